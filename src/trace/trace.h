/*
 * trace.h - PyTorch profiler (Kineto) traces: a streaming reader that keeps only what the
 * analysis needs, and the analysis (HTA's figures, docs/trace.md) as a JSON document.
 *
 * gs_trace_load reads one rank's Chrome-trace JSON (.json or .json.gz, zlib reads both) with
 * yajl's event parser: it never holds the document, only compact arrays of GPU activities,
 * launch (runtime) timestamps by correlation id, profiler steps and per-name CPU op totals.
 * gs_trace_analyze turns a set of ranks into the result document that `gpuscope trace analyze
 * --json` prints, the run report carries as "profile" and the diagnosis reads.
 */
#ifndef GS_TRACE_H
#define GS_TRACE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gpuscope/gs_err.h"

/* Kinds of GPU activity, HTA's kernel types plus synchronisation (counted in the kernel span,
 * never a type of its own). Bit values: the overlap states of the breakdown are OR-ed. */
enum gs_trace_kind {
    GS_TRACE_COMP = 1,
    GS_TRACE_COMM = 2,
    GS_TRACE_MEM = 4,
    GS_TRACE_SYNC = 8,
};

/* Memory activity by direction (the name's "Memcpy XtoY" prefix, or Memset). */
enum gs_trace_memdir {
    GS_TRACE_MEM_HTOD,
    GS_TRACE_MEM_DTOH,
    GS_TRACE_MEM_DTOD,
    GS_TRACE_MEM_HTOH,
    GS_TRACE_MEM_PTOP,
    GS_TRACE_MEM_SET,
    GS_TRACE_MEM_OTHER,
    GS_TRACE_MEM_N,
};

/* Correlation ids are CUPTI's 32-bit ones; anything else reads as "none". */
#define GS_TRACE_NO_CORR UINT32_MAX

/* One GPU activity (kernel, memcpy, memset, sync): 40 bytes. Times are the trace's
 * microseconds as read (ts_raw, dur_raw) until the first gs_trace_analyze rounds them once
 * the whole file is known (HTA's rounding) into ts and end, and sorts the array by start. */
struct gs_trace_gpu {
    union {
        double ts_raw;
        int64_t ts;
    };
    union {
        double dur_raw;
        int64_t end;
    };
    int64_t bytes;
    uint32_t corr;   /* GS_TRACE_NO_CORR when none */
    uint32_t stream; /* as written (-1, "no stream", is never stored) */
    uint32_t name;   /* index into the rank's name table */
    uint8_t kind;    /* enum gs_trace_kind */
    uint8_t memdir;  /* enum gs_trace_memdir, for GS_TRACE_MEM */
    uint8_t keep;    /* per analysis: inside the traced window */
};

/* A host event that carries a correlation id (cudaLaunchKernel, cudaMemcpyAsync, ...): 12
 * bytes, as many as there are runtime calls. */
struct __attribute__((packed)) gs_trace_launch {
    uint32_t corr;
    double ts;
};

struct gs_trace_step {
    long long num; /* N of ProfilerStep#N */
    double ts, dur;
};

/* Inclusive time of host operators by name (cpu_op; every "X" event of the legacy format). */
struct gs_trace_cpuop {
    uint32_t name; /* into the op name table (gs_trace_op_name) */
    uint64_t count;
    double sum_us, max_us;
};

struct gs_trace_names; /* interned strings */

/* One rank's trace as kept in memory. */
struct gs_trace {
    char *path;
    long long rank;     /* distributedInfo.rank, else from the file name, else -1 */
    int rank_from_file; /* 1: rank came from distributedInfo */
    int legacy;         /* top-level array: the pre-Kineto CPU-only format */
    int float_ts;       /* some ts is fractional or missing: HTA's ns rounding applies */
    int rounded;        /* gpu[] holds rounded times, sorted (gs_trace_analyze) */
    uint64_t n_events;  /* every traceEvents entry */
    double min_ts;      /* earliest ts of a kept event */
    struct gs_trace_gpu *gpu;
    size_t n_gpu, cap_gpu;
    struct gs_trace_launch *launch;
    size_t n_launch, cap_launch;
    struct gs_trace_step *step; /* the latest-starting profiler steps, at most 2048 */
    size_t n_step, cap_step;
    uint64_t n_step_seen;    /* every ProfilerStep event */
    uint64_t n_step_omitted; /* the earliest ones, not in step[] */
    long long first_step_num;
    int step_nums_differ;         /* two steps with different N: HTA's last-step filter applies */
    struct gs_trace_cpuop *cpuop; /* by op name; the table is bounded */
    size_t n_cpuop, cap_cpuop;
    struct gs_trace_cpuop ops_folded; /* the remainder: ops folded out of cpuop[] (name unused) */
    uint64_t n_ops_folded;            /* distinct names folded (a name may come back) */
    struct gs_trace_names *names;     /* GPU activity names */
    struct gs_trace_names *op_names;  /* CPU op names */
    uint32_t *streams;                /* streams in order of first appearance */
    size_t n_streams, cap_streams;
};

/* Reads one trace file (.json, .json.gz or any gzip/plain JSON). Malformed input fails with
 * GS_EPARSE and "PATH:OFFSET: what" in err (OFFSET counts bytes of the decompressed JSON). */
int gs_trace_load(const char *path, struct gs_trace **out, struct gs_err *err);

/* The same from memory (plain JSON); label names it in messages. */
int gs_trace_load_mem(const char *buf, size_t len, const char *label, struct gs_trace **out,
                      struct gs_err *err);

/* Tests and the fuzzer: gs_trace_load_mem hands yajl pieces of n bytes (0: the default,
 * 256 KiB, as files are read), so that tokens cut by pieces are exercised on small inputs. */
void gs_trace_set_mem_chunk(size_t n);

void gs_trace_free(struct gs_trace *t);

/* A GPU activity's name (never NULL). */
const char *gs_trace_name(const struct gs_trace *t, uint32_t id);

/* A CPU op's name (struct gs_trace_cpuop; never NULL). */
const char *gs_trace_op_name(const struct gs_trace *t, uint32_t id);

struct gs_trace_opts {
    int top_kernels;       /* HTA num_kernels, default 10 */
    double duration_ratio; /* HTA duration_ratio, default 0.8 */
    double kernel_wait_us; /* HTA consecutive_kernel_delay, default 30 */
    int include_last_step; /* keep kernels launched in the last ProfilerStep */
};

void gs_trace_opts_default(struct gs_trace_opts *o);

/* The analysis of n ranks (docs/trace.md has each figure): {"ranks": [...], "job": {...}}.
 * NULL when out of memory. */
json_t *gs_trace_analyze(struct gs_trace *const *ranks, size_t n, const struct gs_trace_opts *o);

/* The same one rank at a time, so that only one rank's trace is in memory: add each loaded
 * trace (its records are rounded and sorted in place; free it afterwards or keep it), then
 * done for the document. add returns GS_OK or GS_ENOMEM; done NULL only when out of memory. */
struct gs_trace_job;
struct gs_trace_job *gs_trace_job_new(const struct gs_trace_opts *o);
int gs_trace_job_add(struct gs_trace_job *j, struct gs_trace *t);
json_t *gs_trace_job_done(struct gs_trace_job *j);
void gs_trace_job_free(struct gs_trace_job *j);

/* Per kernel name over n ranks (the traced window of gs_trace_analyze): {"NAME": {"type",
 * "count", "sum_us"}}, what `gpuscope trace diff` compares. NULL when out of memory. */
json_t *gs_trace_kernel_totals(struct gs_trace *const *ranks, size_t n,
                               const struct gs_trace_opts *o);

/* The result document as aligned text tables (color: 1 for bold headings). */
void gs_trace_print(FILE *out, const json_t *doc, int color);

#endif
