/*
 * The Prometheus text exposition (format 0.0.4) of one snapshot: gpuscope's native metric
 * families, optionally dcgm-exporter's names and labels as well, and the agent's self metrics.
 * A pure function of its inputs: the agent's sampling thread calls it once per cycle and every
 * scrape serves the result; tests/unit/test_agent_metrics.c feeds it hand-built snapshots.
 * The schema is docs/metrics.md (GS_METRICS_SCHEMA_VERSION).
 *
 * Absent readings (status other than GS_ST_OK) produce no line, and a family with no line at
 * all has no HELP/TYPE either. Label values are escaped (\\, \", \n) as the format requires.
 */
#ifndef GS_AGENT_METRICS_H
#define GS_AGENT_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "gpuscope/gs_model.h"

#define GS_METRICS_SCHEMA_VERSION 1

/* The renderers append to a base/buf.h buffer (a zero-filled struct gs_buf): a render that
 * would pass its cap (GS_BUF_MAX_DEFAULT, 16 MiB) fails with GS_ENOMEM rather than grow without
 * end (8 GPUs with everything present render about 30 KiB). */

/* The bounded name of why the driver cannot be read, from an enum gs_rc: no_library,
 * no_driver, version_mismatch, no_gpu, no_permission, nvml_error, error (anything else). */
const char *gs_metrics_down_reason(int rc);

/* What the agent knows about itself, rendered as gpuscope_* self metrics. */
struct gs_metrics_self {
    int up;               /* 1: the last cycle sampled the driver */
    const char *reason;   /* why up is 0 (the log's text, not a label); NULL or "" when up */
    int reason_rc;        /* its enum gs_rc: gpuscope_down_reason{reason=<bounded name>} */
    const char *hostname; /* the node's: the hostname label of gpuscope_up, _down_reason,
                           * _info (the series a dashboard needs while the driver is down) */
    const char *version;  /* gpuscope_build_info{version=...} */
    double interval_s;
    double sample_seconds; /* duration of the last gs_sampler_sample; < 0: none yet */
    uint64_t cycles;
    uint64_t overruns;
    uint64_t sample_errors;
    /* History store (docs/history.md); the gpuscope_history_* families only when history. */
    int history;
    uint64_t history_rows;
    uint64_t history_write_errors;
    uint64_t history_dropped;
    double history_flush_last_s; /* < 0: no flush yet */
    double history_flush_max_s;
    int history_integrity_ok;          /* 0: the scheduled check found history.db damaged */
    uint64_t history_integrity_checks; /* scheduled checks run */
    /* Training runs on the step-record socket (runs.h); gpuscope_runs_* only when runs. */
    int runs;
    unsigned runs_active;
    uint64_t runs_started;
    uint64_t runs_records;       /* step-socket records accepted */
    uint64_t runs_rejected;      /* records refused by validation */
    uint64_t runs_steps_dropped; /* step records received but not kept */
    uint64_t runs_logs_dropped;  /* logged values of runs not kept (runs.h logs_dropped) */
    /* Per-process series (GS_METRICS_PROCESS): at most this many lines, of the processes
     * holding the most GPU memory (gs_metrics_process_select); the others are left out whole
     * and counted in gpuscope_process_series_dropped and gpuscope_processes_dropped. */
    unsigned process_series_max;
};

enum gs_metrics_flags {
    GS_METRICS_DCGM = 1u << 0,          /* add the dcgm-exporter families */
    GS_METRICS_PROCESS = 1u << 1,       /* add the gpuscope_process_* families */
    GS_METRICS_DCGM_HOSTNAME = 1u << 2, /* dcgm families: dcgm-exporter 3.x's Hostname label,
                                         * not 4.x's hostname */
};

/* Appends the exposition of snap (NULL: no GPU families, e.g. while the driver is missing) and
 * self to b. Returns GS_OK or GS_ENOMEM (gs_buf_status(b) not GS_BUF_OK). */
int gs_metrics_render(struct gs_buf *b, const struct gs_snapshot *snap,
                      const struct gs_metrics_self *self, unsigned flags);

/* printf's "%.15g" of v into out (>= 40 bytes, NUL not written), the values' formatter: the
 * common cases without printf (metrics.c says how); returns its length. */
size_t gs_metrics_g15(double v, char *out);

/* One series of gpuscope_refused_total (issue 18): what a door refused and why, both bounded
 * names (docs/metrics.md). */
struct gs_refused_row {
    const char *door;   /* "http" (TCP), "unix" (the HTTP unix socket), "steps" */
    const char *reason; /* "uid_connections", "rate", "uid_rate", "runs_per_uid", ... */
    uint64_t n;
};

/* Appends the gpuscope_refused_total family with the n rows (zeros too: the series are there
 * from the start). */
void gs_metrics_render_refused(struct gs_buf *b, const struct gs_refused_row *rows, unsigned n);

/* What the per-process cap keeps of a snapshot (GS_METRICS_PROCESS). */
struct gs_metrics_proc_cut {
    unsigned kept_procs, dropped_procs;
    uint64_t kept_series, dropped_series;
};

/* Chooses the process entries of s whose series /metrics shows under a cap of max series:
 * by GPU memory, largest first (an unknown size last; ties by GPU, then pid), each process
 * whole, until the next one does not fit; every later one is left out. keep[i] (s->n_procs
 * bytes) is set to 1 for a kept entry, 0 else. GS_OK or GS_ENOMEM. */
int gs_metrics_process_select(const struct gs_snapshot *s, unsigned max, unsigned char *keep,
                              struct gs_metrics_proc_cut *cut);

/* The process whose Kubernetes names label GPU gi (index into s->gpus) with dcgm-exporter's
 * pod, namespace and container: when every process of the GPU whose host details were read
 * runs in one pod (one pod_uid) that the node names (pod_name set), and none of its
 * processes was withheld from the viewer (gs_gpu.hidden_count). NULL else.
 * *one_container (may be NULL): 1 when they are also all in one named container. */
const struct gs_proc *gs_metrics_gpu_pod(const struct gs_snapshot *s, unsigned gi,
                                         int *one_container);

/* Appends s as a label value, escaped. */
void gs_metrics_escape(struct gs_buf *b, const char *s);

#endif
