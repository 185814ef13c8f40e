/*
 * `gpuscope top` (docs/top.md): the full-screen live view. Its parts share this header:
 *
 *   top.c       options, preferences (top.conf), the key loop and the screen's state
 *   top_src.c   the data sources and the worker thread that polls them: NVML directly, the
 *               local agent's unix socket, or agents over HTTP(S) (--host); history to fill
 *               the graphs, the agent's training runs; each cycle published as a struct
 *               top_frame
 *   top_proc.c  the process table: rows from a frame, filter, sort, tree, /proc details,
 *               who may signal what (no ncurses: tests/unit/test_top.c links it)
 *   top_draw.c  the ncurses drawing of the header, GPU meters and graphs, the process table,
 *               the training panel, help and the detail screen
 *   top_load.c  (in the gpuscope binary) loads gpuscope-top.so, which links ncurses (and
 *               dlopens libcurl for --host), so that no other command pays for them at start-up
 *
 * The worker owns the sources; the key loop owns the screen. They meet in one mutex-guarded
 * slot holding the newest frame, and a pipe that wakes the key loop when a frame arrives.
 */
#ifndef GS_CLI_TOP_H
#define GS_CLI_TOP_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gpuscope/gs_model.h"

#define TOP_MAX_SRC 16
#define TOP_HIST 512 /* history points per GPU and graph */
#define TOP_MAX_TAGS 64

enum top_graph { TOP_G_UTIL, TOP_G_MEM, TOP_G_POWER, TOP_G__N };

enum top_src_kind { TOP_SRC_NVML, TOP_SRC_AGENT, TOP_SRC_HTTP };

/* One graph's points in a fixed ring: n points, the oldest at v[start]; NAN where the reading
 * was absent. A new point overwrites the oldest once the ring is full (no move). */
struct top_hist {
    unsigned n, start;
    float v[TOP_HIST];
};

/* Point i of h, 0 the oldest, i < h->n. */
static inline float top_hist_at(const struct top_hist *h, unsigned i)
{
    return h->v[(h->start + i) % TOP_HIST];
}

/* One source's part of a frame. */
struct top_srcframe {
    enum top_src_kind kind;
    char name[128];  /* "local" or HOST:PORT as given */
    char where[160]; /* the header's words: "NVML 590.48.01", "agent /run/gpuscope/agent.sock" */
    char err[512];   /* the last failure, "" when the last poll worked */
    int local;       /* processes live on this machine (signals, /proc details) */
    struct gs_snapshot *snap; /* NULL until the first good poll */
    struct top_hist *hist;    /* [snap->n_gpus * TOP_G__N] */
    unsigned hist_cap;        /* entries allocated at hist (a reused frame keeps them) */
    json_t *runs;             /* /api/v1/runs (agents only), NULL otherwise */
    json_t *reports;          /* object: run id -> /api/v1/runs/ID of running runs */
    double t_ok;              /* wall time of the last good poll */
};

struct top_frame {
    unsigned n_src;
    struct top_srcframe src[TOP_MAX_SRC];
    double t; /* wall time of the poll */
    unsigned seq;
};

void top_frame_free(struct top_frame *f);

/* ---- sources and the worker (top_src.c) ---- */

enum top_source_mode { TOP_SOURCE_AUTO, TOP_SOURCE_AGENT, TOP_SOURCE_NVML };

struct top_cfg {
    enum top_source_mode source;
    unsigned n_hosts;
    const char *hosts[TOP_MAX_SRC];
    const char *token;  /* Bearer token for --host, NULL: none */
    const char *cacert; /* CA bundle for https:// hosts, NULL: the system's */
    int insecure_tls;   /* --insecure-tls: no certificate check */
};

struct top_worker;
struct gs_err;

/* Opens the sources (the first poll included, so that a missing driver or an unreachable
 * agent is an error before the screen is taken) and starts the worker thread. wake_fd gets a
 * byte per published frame. */
int top_worker_start(struct top_worker **out, const struct top_cfg *cfg, double interval_s,
                     int wake_fd, struct gs_err *err);
/* The newest frame not yet taken (the caller holds it until top_worker_give_back), or NULL.
 * At most two frames exist (the caller's and the newest), each filled again with its buffers
 * kept: a frame costs no allocation in the steady state. */
struct top_frame *top_worker_take(struct top_worker *w);
/* Returns a frame that top_worker_take gave (NULL: nothing) for the worker to fill again. */
void top_worker_give_back(struct top_worker *w, struct top_frame *f);
void top_worker_set_interval(struct top_worker *w, double interval_s);
/* Stops the thread and closes the sources. */
void top_worker_stop(struct top_worker *w);

/* ---- the process table (top_proc.c) ---- */

enum top_col {
    TOP_C_GPU,
    TOP_C_PID,
    TOP_C_USER,
    TOP_C_JOB,
    TOP_C_GMEM,
    TOP_C_SM,
    TOP_C_CPU,
    TOP_C_HMEM,
    TOP_C_TIME,
    TOP_C_CMD,
    TOP_C__N,
};

extern const char *const top_col_names[TOP_C__N]; /* "gpu", "pid", ... (top.conf, --sort) */

struct top_row {
    unsigned src, proc; /* frame->src[src].snap->procs[proc] */
    unsigned pid;
    int ppid;        /* -1 unknown */
    unsigned depth;  /* tree depth */
    char prefix[32]; /* tree drawing before the command */
    char job[GS_JOB_ID_LEN + 8];
    char gpu[24];
    int tagged;
};

struct top_filter_sort {
    enum top_col sort;
    int reverse;
    int tree;
    const char *filter; /* substring (case-insensitive) of pid, user, job, command; "" none */
};

/* Rows of frame f, filtered and sorted. *rows is realloc'ed; returns the count. */
size_t top_rows_build(const struct top_frame *f, const struct top_filter_sort *fs,
                      struct top_row **rows, size_t *cap);

/* The job column: "pod:UID8", "slurm:ID", "docker:ID12", "" */
void top_job_label(const struct gs_proc *p, char *out, size_t len);

/* 0 when the viewer may signal pid (owned by uid); else -1 with the reason in why. */
int top_may_signal(const struct top_srcframe *s, const struct gs_proc *p, char *why, size_t len);

/* The start time of pid in clock ticks after boot (/proc/PID/stat field 22), 0 when gone. */
unsigned long long top_proc_starttime(pid_t pid);
int top_proc_ppid(pid_t pid);

/* The detail screen's text of process p of s: command line, cgroup, CUDA_VISIBLE_DEVICES, the
 * GPU figures, and with stack the Python stack (src/stacks). Malloc'ed. */
char *top_proc_detail(const struct top_srcframe *s, const struct gs_proc *p, int stack);

/* Human figures. */
void top_fmt_bytes(char *out, size_t len, double b);
void top_fmt_duration(char *out, size_t len, double s);

/* ---- preferences (top.c) ---- */

struct top_prefs {
    enum top_graph graph;
    enum top_col sort;
    int reverse;
    int tree;
    int runs_panel; /* the lower panel shows training runs instead of processes */
    int mouse;
    double interval_s;
};

/* Parses top.conf text (key = value lines, # comments). Unknown keys and bad values are
 * reported as "PATH:LINE: what" in warn (the first one) and skipped. */
void top_prefs_parse(struct top_prefs *p, const char *path, const char *text, char *warn,
                     size_t wlen);
int top_prefs_format(const struct top_prefs *p, char *out, size_t len);

/* ---- the screen's state (top.c keeps it, top_draw.c draws it) ---- */

enum top_mode {
    TOP_MODE_MAIN,
    TOP_MODE_FILTER,  /* typing the filter */
    TOP_MODE_SIGNAL,  /* choosing the signal */
    TOP_MODE_CONFIRM, /* y/N before sending it */
    TOP_MODE_HELP,
    TOP_MODE_DETAIL,
};

struct top_tag {
    unsigned src, pid;
};

struct top_target {
    unsigned src, pid;
    unsigned long long start; /* /proc/PID/stat start time when asked: no pid reuse */
    char what[64];
};

struct top_ui {
    struct top_prefs prefs;
    struct top_frame *f;
    struct top_row *rows;
    size_t n_rows, cap_rows;
    size_t sel, proc_top;
    unsigned gpu_top; /* first GPU shown (over every source's GPUs) */
    unsigned n_gpus_total;
    char filter[128];
    enum top_mode mode;
    int color, utf8;
    char msg[320];
    int msg_err;
    struct top_tag tags[TOP_MAX_TAGS];
    unsigned n_tags;
    int sig;
    const char *sig_name;
    struct top_target targets[TOP_MAX_TAGS];
    unsigned n_targets;
    char *detail;
    unsigned detail_top, detail_src, detail_pid;
    unsigned run_sel;
    int proc_y0, proc_rows; /* where the table's rows were drawn (mouse) */
    const char *conf_path;
};

int top_is_tagged(const struct top_ui *u, unsigned src, unsigned pid);
void top_draw(struct top_ui *u);
void top_draw_init_colors(int *color);
#endif
