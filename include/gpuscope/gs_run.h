/*
 * gs_run.h - the per-run profile: step records from a training process, the aggregate they
 * build, and the C API the Python package calls through ctypes (libgpuscope.so).
 *
 * One record type travels everywhere: the Python package fills a gs_step_rec per training
 * step; in-process it goes straight to an aggregator (gs_agg, src/run/agg.h); towards
 * `gpuscope run` or the agent it is encoded as one JSON object per SOCK_SEQPACKET message
 * (src/run/record.h documents the wire format) and decoded on the other side into the same
 * struct. Times are milliseconds; a phase that was not measured is NaN (absent on the wire),
 * never 0.
 */
#ifndef GS_RUN_H
#define GS_RUN_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define GS_API __attribute__((visibility("default")))
#else
#define GS_API
#endif

/* Phases of one training step, in report order: X(ENUM, "wire name", wall), the one list of
 * them (the dashboard and the report page get it at build time: src/runview/tables_gen.c).
 * GS_PH_DATA is the wait for the next batch: the gap between the previous step's end and this
 * step's begin (or an explicit "data" phase). GS_PH_STEP is the whole step from begin to end
 * (data not included). GS_PH_COMM is time inside torch.distributed collectives / DDP comm
 * hooks; it may overlap backward. The phases after GS_PH_STEP came with record version 2 and
 * are kept in ms_x[] after the version-1 fields so that the version-1 layout is unchanged.
 * GS_PH_COMM_EXPOSED is the communication the step waited for (not hidden behind compute;
 * taken out of the phase it ran in). GS_PH_OTHER is the rest of the step's wall time. wall = 1
 * marks the parts of the wall time: data + forward + backward + optimizer +
 * communication_exposed + other = data + total_step. A sender may leave other out: the
 * aggregate derives it (docs/report.md). */
#define GS_PHASES(X)                                                                               \
    X(GS_PH_DATA, "data", 1)                                                                       \
    X(GS_PH_FORWARD, "forward", 1)                                                                 \
    X(GS_PH_BACKWARD, "backward", 1)                                                               \
    X(GS_PH_OPTIMIZER, "optimizer_step", 1)                                                        \
    X(GS_PH_COMM, "communication", 0)                                                              \
    X(GS_PH_STEP, "total_step", 0)                                                                 \
    X(GS_PH_COMM_EXPOSED, "communication_exposed", 1)                                              \
    X(GS_PH_OTHER, "other", 1)

/* The version-1 phases, GS_PH_DATA..GS_PH_STEP, are ms[]; the rest (below GS_PH_ALL) ms_x[]. */
#define GS_PHASE_ENUM_(e, name, wall) e,
enum gs_phase { GS_PHASES(GS_PHASE_ENUM_) GS_PH_ALL, GS_PH_N = GS_PH_COMM_EXPOSED };
#undef GS_PHASE_ENUM_

/* The k-th phase (k < GS_PH_ALL) in page order: report order with total_step last, as the
 * run page's columns and `gpuscope compare`'s rows list them. */
static inline int gs_phase_page_order(int k)
{
    return k < GS_PH_STEP ? k : k + 1 < GS_PH_ALL ? k + 1 : GS_PH_STEP;
}

/* Wire / report names (any phase below GS_PH_ALL; NULL otherwise). */
GS_API const char *gs_phase_name(int phase);

enum gs_step_flags {
    GS_STEP_CUDA_EVENTS =
        1u << 0, /* forward/backward/optimizer from CUDA events, else host clocks */
    /* the step's data phase lies inside [t_begin, t_end] (the loop tracker: a step runs from
     * one optimizer step's end to the next, data, forward, backward, optimizer ending at
     * t_end), else it is the gap before t_begin (the explicit API) */
    GS_STEP_DATA_IN_STEP = 1u << 1,
    /* a torch.profiler window ran in this step (its warmup or active steps, or the trace's
     * teardown at the window's end): its times carry the profiler's overhead, so the report
     * counts it (profiled_steps) and leaves it out of the step statistics */
    GS_STEP_PROFILED = 1u << 2,
};

/* One training step. Layout is part of the ctypes ABI (python/gpuscope/_native.py mirrors
 * it): append fields only at the end and bump GS_STEP_REC_VERSION. Version 1 ends at
 * mem_total, version 2 at ms_x (gs_run_step reads only that much of an older record). */
#define GS_STEP_REC_VERSION 3
struct gs_step_rec {
    uint32_t version;   /* GS_STEP_REC_VERSION */
    uint32_t flags;     /* enum gs_step_flags */
    uint64_t step;      /* global step number after this step (HF state.global_step) */
    double t_begin;     /* CLOCK_REALTIME seconds at step begin */
    double t_end;       /* CLOCK_REALTIME seconds at step end */
    double ms[GS_PH_N]; /* per phase, milliseconds; NaN = not measured */
    uint64_t samples;   /* samples processed in this step; 0 = unknown */
    int32_t rank;       /* torch.distributed rank, 0 when not distributed */
    int32_t device;     /* CUDA device index of this rank, -1 = CPU */
    /* torch.cuda memory of this rank's device, bytes; 0 = unknown */
    uint64_t mem_allocated;
    uint64_t mem_reserved;
    uint64_t mem_peak_allocated; /* since the previous record */
    uint64_t mem_peak_reserved;
    uint64_t mem_total; /* device total (torch.cuda.mem_get_info) */
    /* version 2 */
    double ms_x[GS_PH_ALL - GS_PH_N]; /* GS_PH_COMM_EXPOSED, GS_PH_OTHER; NaN = not measured */
    /* version 3 */
    /* tokens the model was trained on in this step (the outermost training forwards' token
     * input, padding excluded where a mask was passed, or the HF Trainer's
     * num_input_tokens_seen delta; docs/python.md, TOKENS); 0 = unknown */
    uint64_t tokens;
};

/* ---- In-process core, for the Python package (ctypes over libgpuscope.so) ----
 *
 * gs_run_open(config_json): config keys (all optional):
 *   "run_name": string, "output_dir": string (report destination; NULL/absent: no file),
 *   "socket": path of a receiver; absent: $GPUSCOPE_RUN_SOCKET, else the agent socket
 *             ($GPUSCOPE_AGENT_SOCKET, else /run/gpuscope/steps.sock, else
 *             $XDG_RUNTIME_DIR/gpuscope/steps.sock) if it accepts a connection, else none,
 *   "nvml": "auto" | "off"  (auto: sample NVML in-process when no receiver is connected),
 *   "sample_interval_s": number (default 0.5), "rank", "world_size", "local_rank": ints,
 *   "framework": "hf" | "torch", "logging_steps": int, "devices": [CUDA indices in use],
 *   "job": the multi-node job id every rank shares, "node": the sender's node name (strings
 *          of up to 128 printable bytes; $GPUSCOPE_JOB wins over "job", $GPUSCOPE_NODE fills
 *          an absent "node": docs/run.md, JOBS),
 *   "facts": {the run's settings: scalar entries, src/run/record.h; a set that breaks those
 *             rules is left out with a note (gs_run_notes), the run still opens},
 *   "tags": {the run's tags: string entries, src/run/record.h; $GPUSCOPE_RUN_TAGS, a JSON
 *            object set by gpuscope run --tag, wins; a bad set is left out with a note}.
 * With a receiver, records are encoded and sent by a sender thread (bounded queue, never
 * blocks the caller; dropped records are counted). Without one and with nvml auto, a sampler
 * thread samples the run's GPUs. Neither thread ever calls into Python.
 * Returns NULL on error with a message in err. */
struct gs_run;
GS_API struct gs_run *gs_run_open(const char *config_json, char *err, size_t errlen);
/* Adds one step (copies it). Cheap: no I/O, no allocation in the steady state. 0 or -1. */
GS_API int gs_run_step(struct gs_run *run, const struct gs_step_rec *rec);
/* What gs_run_open has to tell the caller without failing (a "facts" set left out, a named
 * socket that did not answer: profiling in-process), one line each ("" when nothing): the
 * library never writes to the training process's stderr; the caller decides how to show it.
 * Valid until gs_run_close. */
GS_API const char *gs_run_notes(const struct gs_run *run);
/* Sends what the training loop logged: json is an object {"step": n, "t": unix s,
 * "values": {"loss": x, "learning_rate": y, ...}} (src/run/record.h, the "log" record: finite
 * numbers only). Queued for the sender like a step (dropped when 64 wait); without a
 * receiver nothing keeps it. 0, or -1 with a message in err for a record the format refuses. */
GS_API int gs_run_log(struct gs_run *run, const char *json, char *err, size_t errlen);
/* A profiler window the node's agent asked for (`gpuscope trace capture --run ID`, a control
 * message over the record connection: src/run/control.h): its number of steps, once per
 * request; 0 when none is waiting. Never blocks (the sender thread reads the connection). */
GS_API int gs_run_control(struct gs_run *run);
/* Waits until the sender thread has sent (or dropped) every step and log record queued so
 * far, at most timeout_ms: for a process about to die (SIGTERM, exit) or whose main thread
 * is stuck, so that what it handed over reaches the receiver. 0 when nothing is left queued
 * (also without a receiver), 1 when the time ran out. Any thread; never called per step. */
GS_API int gs_run_flush(struct gs_run *run, int timeout_ms);
/* Ends the run: end_json carries {"train_runtime": s, "train_samples": n, "train_steps": n,
 * "train_loss": x} as the framework measured them (any may be absent). Writes
 * <output_dir>/metrics_report.json when output_dir was given (atomically: temp file +
 * rename) and returns the report text (free with gs_free), or NULL with err filled. */
GS_API char *gs_run_finish(struct gs_run *run, const char *end_json, char *err, size_t errlen);
/* Stops the threads, frees everything. NULL allowed. */
GS_API void gs_run_close(struct gs_run *run);
GS_API void gs_free(void *p);
/* "1.0" etc.: the report schema version this library writes. */
GS_API const char *gs_run_report_schema(void);

#endif
