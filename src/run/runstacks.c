/*
 * gpuscope run's stack sampler, the join of its samples with step phases and GPU idle time,
 * and the hang watchdog (runstacks.h).
 *
 * Storage is bounded: at most MAX_SAMPLES timed samples are kept for the joins (when full,
 * every second one is dropped and only every second new one kept, so the kept samples stay an
 * even thinning of the whole run); the flame graph's profile counts every sample. Steps and GPU
 * readings past their caps are counted, not kept.
 */
#include "run/runstacks.h"

#include "gpuscope/gs_model.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend/procfs.h"
#include "base/clock.h"
#include "base/dirfile.h"
#include "gpuscope/gs_err.h"
#include "run/hang.h"
#include "stacks/collect.h"
#include "stacks/flame.h"
#include "stacks/profile.h"
#include "stacks/pyread.h"
#include "stacks/taskstate.h"

#define MAX_RANKS 64
#define MAX_SAMPLES (1u << 20)
#define MAX_STEPS (1u << 19)
#define MAX_GPU_READINGS (1u << 20)
#define IDLE_UTIL 0.05
#define TOP_N 10
#define MAX_HANGS 8      /* hangs recorded in the report (all are counted) */
#define HANG_RANKS 16    /* ranks described per hang */
#define NCCL_WAIT_S 10.0 /* the ranks' answer to hang.request: within a second, this at most */

struct rank {
    pid_t pid;
    int rank;
    int hello;   /* said hello (a real rank); else CMD itself */
    int dropped; /* no longer sampled: gone, or CMD once real ranks appeared */
    struct gs_pyread *r;
    struct gs_collect *col;
    double next_try;
    unsigned tries;
    uint64_t samples, failed;
    char err[GS_ERR_MSG_LEN];
    double last_end; /* realtime end of its last step */
    /* the credentials its file accesses are checked with (backend/procfs.h), read while it
     * runs, at most once a second: the source lines of its frames are read only where these
     * may read (a root `gpuscope run` never copies a file its uid-1000 rank names) */
    struct gs_procfs_creds creds;
    int has_creds;
    double creds_next;
};

struct sample {
    double t;
    uint32_t leaf;
    int32_t line;
    uint16_t ri; /* index in ranks[] */
};

struct step {
    int32_t rank;
    /* first: where the step's time starts (data_start, or t_begin when "other" precedes the
     * data phase: GS_STEP_DATA_IN_STEP) */
    double first, data_start, begin, fwd_end, bwd_end, opt_end, end;
};

struct reading {
    double t;
    float util, power, limit;
    uint16_t gpu;
    uint8_t shared; /* util is the run's processes' SM utilization on a shared GPU */
};

/* Where one rank's main thread was when the watchdog fired. */
struct hang_rank {
    int rank, hello;
    pid_t pid;
    char func[128], file[512];
    int line;
    char user_func[128], user_file[512]; /* the innermost frame outside Python and packages */
    int user_line;
    char state[96];
    int in_collective; /* a torch.distributed frame, or DDP's backward (its all-reduce) */
};

/* One hang: from the last step (or the quiet start) to the next step or the job's end. */
struct hang_ev {
    unsigned number;
    double since, detected, ended; /* unix seconds; ended NAN while it lasts */
    double p95;                    /* NAN before the ring judged */
    uint64_t steps_before;         /* step records received before it */
    char gpus[128];
    unsigned nranks;
    struct hang_rank r[HANG_RANKS];
    int nccl; /* 0 waiting for the ranks' answer, 1 a dump, 2 only .unavailable, 3 no answer */
    double req_mono;
    char nccl_why[256];
};

struct gs_runstacks {
    struct gs_runstacks_cfg cfg;
    char *dir;
    pthread_t th;
    int started, stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct rank ranks[MAX_RANKS];
    unsigned nranks;
    struct gs_stackprof *prof;
    struct gs_pysample *ps;
    struct sample *samples;
    uint32_t nsamples, stride;
    uint64_t seen;
    struct step *steps;
    uint32_t nsteps;
    uint64_t steps_over;
    struct reading *gpu;
    uint32_t ngpu;
    /* watchdog: the run's steps, any rank's, through the hang rule (run/hang.h) */
    struct gs_hang hang;
    int ended; /* an end record came: no more hang checks */
    unsigned hangs;
    double last_check;
    struct hang_ev hev[MAX_HANGS];
    double job_exit; /* CMD's exit (gs_runstacks_job_exit), unix seconds; NAN before */
    double cpu_last; /* CPU seconds of CMD's tree at the previous check; NAN: none yet */
    double cpu_mono; /* ... and when */
};

double gs_runstacks_parse_rate(const char *s)
{
    char *end;
    double v;

    if (strcmp(s, "off") == 0 || strcmp(s, "0") == 0)
        return 0;
    if (strcmp(s, "on") == 0)
        return 20;
    errno = 0;
    v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < 1 || v > 200)
        return -1;
    return v;
}

/* ---- the callbacks ---- */

static struct rank *rank_add(struct gs_runstacks *rs, pid_t pid)
{
    struct rank *k;

    for (unsigned i = 0; i < rs->nranks; i++)
        if (rs->ranks[i].pid == pid)
            return &rs->ranks[i];
    if (rs->nranks >= MAX_RANKS)
        return NULL;
    k = &rs->ranks[rs->nranks++];
    memset(k, 0, sizeof *k);
    k->pid = pid;
    k->last_end = NAN;
    return k;
}

void gs_runstacks_set_child(struct gs_runstacks *rs, pid_t pid)
{
    int any_hello = 0;
    struct rank *k;

    if (!rs || pid <= 0)
        return;
    pthread_mutex_lock(&rs->mu);
    for (unsigned i = 0; i < rs->nranks; i++)
        any_hello |= rs->ranks[i].hello;
    rs->cfg.child = pid;
    gs_hang_begin(&rs->hang, gs_clock_real_s()); /* the job starts: no step, no CPU is quiet */
    k = rank_add(rs, pid);
    if (k && !k->hello && any_hello)
        k->dropped = 1;
    pthread_mutex_unlock(&rs->mu);
}

void gs_runstacks_add_rank(struct gs_runstacks *rs, pid_t pid, int rank)
{
    struct rank *k;

    if (!rs || pid <= 0)
        return;
    pthread_mutex_lock(&rs->mu);
    k = rank_add(rs, pid);
    if (k) {
        k->hello = 1;
        k->rank = rank;
        k->dropped = 0;
        /* CMD was sampled as a stand-in; a launcher (torchrun) is not a rank */
        for (unsigned i = 0; i < rs->nranks; i++)
            if (!rs->ranks[i].hello)
                rs->ranks[i].dropped = 1;
    }
    pthread_mutex_unlock(&rs->mu);
}

void gs_runstacks_step(struct gs_runstacks *rs, const struct gs_step_rec *s)
{
    struct step st;
    double cur, *last_end = NULL; /* the step's rank's, when it said hello */
    const double *ms = s->ms;

    if (!rs || !isfinite(s->t_begin) || !isfinite(s->t_end) || s->t_end < s->t_begin)
        return;
    st.rank = s->rank;
    st.begin = s->t_begin;
    st.end = s->t_end;
    if (s->flags & GS_STEP_DATA_IN_STEP) {
        /* The loop tracker's marks: the step ends when the optimizer step returns, after
         * data (the loader's __next__), forward and backward, laid end to end back from its
         * end; what precedes them since the previous optimizer step (zero_grad, logging) is
         * "other". begin = where the data phase starts. */
        double opt = isfinite(ms[GS_PH_OPTIMIZER]) ? ms[GS_PH_OPTIMIZER] / 1000.0 : 0;
        double bwd = isfinite(ms[GS_PH_BACKWARD]) ? ms[GS_PH_BACKWARD] / 1000.0 : 0;
        double fwd = isfinite(ms[GS_PH_FORWARD]) ? ms[GS_PH_FORWARD] / 1000.0 : 0;
        double data = isfinite(ms[GS_PH_DATA]) && ms[GS_PH_DATA] > 0 ? ms[GS_PH_DATA] / 1000.0 : 0;

        st.opt_end = s->t_end;
        st.bwd_end = st.opt_end - opt;
        st.fwd_end = st.bwd_end - bwd;
        st.begin = st.fwd_end - fwd;
        st.data_start = st.begin - data;
        if (st.data_start < s->t_begin) { /* phases longer than the step (clock skew): clamp */
            st.data_start = s->t_begin;
            if (st.begin < st.data_start)
                st.begin = st.data_start;
            if (st.fwd_end < st.begin)
                st.fwd_end = st.begin;
            if (st.bwd_end < st.fwd_end)
                st.bwd_end = st.fwd_end;
        }
        st.first = s->t_begin;
    } else {
        st.data_start = isfinite(ms[GS_PH_DATA]) && ms[GS_PH_DATA] > 0
                            ? s->t_begin - ms[GS_PH_DATA] / 1000.0
                            : s->t_begin;
        /* Host-side order of a step: forward, backward, optimizer, laid end to end from its
         * begin; what remains until its end is "other". */
        cur = s->t_begin;
        cur += isfinite(ms[GS_PH_FORWARD]) ? ms[GS_PH_FORWARD] / 1000.0 : 0;
        st.fwd_end = cur;
        cur += isfinite(ms[GS_PH_BACKWARD]) ? ms[GS_PH_BACKWARD] / 1000.0 : 0;
        st.bwd_end = cur;
        cur += isfinite(ms[GS_PH_OPTIMIZER]) ? ms[GS_PH_OPTIMIZER] / 1000.0 : 0;
        st.opt_end = cur;
        st.first = st.data_start;
    }
    pthread_mutex_lock(&rs->mu);
    if (rs->nsteps < MAX_STEPS)
        rs->steps[rs->nsteps++] = st;
    else
        rs->steps_over++;
    for (unsigned i = 0; i < rs->nranks; i++)
        if (rs->ranks[i].hello && rs->ranks[i].rank == s->rank) {
            last_end = &rs->ranks[i].last_end;
            break;
        }
    gs_hang_step(&rs->hang, last_end, s, gs_clock_real_s());
    if (rs->hangs && rs->hangs <= MAX_HANGS && isnan(rs->hev[rs->hangs - 1].ended))
        rs->hev[rs->hangs - 1].ended = rs->hang.last_rx_s; /* steps again: that hang is over */
    pthread_mutex_unlock(&rs->mu);
}

void gs_runstacks_job_exit(struct gs_runstacks *rs, double t)
{
    if (!rs)
        return;
    pthread_mutex_lock(&rs->mu);
    rs->job_exit = t;
    pthread_mutex_unlock(&rs->mu);
}

void gs_runstacks_end(struct gs_runstacks *rs)
{
    if (!rs)
        return;
    pthread_mutex_lock(&rs->mu);
    rs->ended = 1;
    pthread_mutex_unlock(&rs->mu);
}

void gs_runstacks_gpu(struct gs_runstacks *rs, double t, unsigned gpu, double util, double power_w,
                      double power_limit_w, int shared)
{
    if (!rs || !isfinite(util))
        return;
    pthread_mutex_lock(&rs->mu);
    if (rs->ngpu < MAX_GPU_READINGS)
        rs->gpu[rs->ngpu++] = (struct reading){t,
                                               (float)util,
                                               shared ? -1.0f : (float)power_w,
                                               shared ? -1.0f : (float)power_limit_w,
                                               (uint16_t)gpu,
                                               (uint8_t)(shared != 0)};
    pthread_mutex_unlock(&rs->mu);
}

/* ---- sampling ---- */

static void keep_sample(struct gs_runstacks *rs, double t, uint32_t leaf, int32_t line, unsigned ri)
{
    if (rs->seen++ % rs->stride != 0)
        return;
    if (rs->nsamples == MAX_SAMPLES) {
        for (uint32_t i = 0; i < MAX_SAMPLES / 2; i++)
            rs->samples[i] = rs->samples[2 * i];
        rs->nsamples = MAX_SAMPLES / 2;
        rs->stride *= 2;
    }
    rs->samples[rs->nsamples++] = (struct sample){t, leaf, line, (uint16_t)ri};
}

/* CMD is not Python (a shell, a wrapper): its direct children stand in for it until a rank
 * says hello. */
static void add_children(struct gs_runstacks *rs, pid_t parent)
{
    unsigned kids[MAX_RANKS], n = gs_procfs_children(NULL, (unsigned)parent, kids, MAX_RANKS);

    for (unsigned i = 0; i < n; i++)
        rank_add(rs, (pid_t)kids[i]);
}

static void sample_rank(struct gs_runstacks *rs, unsigned ri, double mono)
{
    struct rank *k = &rs->ranks[ri];
    struct gs_err err = {0};
    uint32_t ids[GS_PY_MAX_DEPTH], leaf = 0;
    unsigned n = 0;
    int rc;

    if (k->dropped)
        return;
    if (!k->r) {
        if (mono < k->next_try)
            return;
        rc = gs_pyread_find(k->pid, &k->r, &err);
        if (rc == GS_ENOTFOUND && !k->hello && k->pid == rs->cfg.child && k->tries < 10 &&
            strstr(err.msg, "no python")) {
            int any_hello = 0;
            for (unsigned i = 0; i < rs->nranks; i++)
                any_hello |= rs->ranks[i].hello;
            if (!any_hello)
                add_children(rs, k->pid);
            k = &rs->ranks[ri]; /* (ranks[] is a fixed array: still valid) */
        }
        if (rc == GS_ENOTFOUND && !k->hello && k->pid != rs->cfg.child &&
            strstr(err.msg, "no python"))
            k->dropped = 1; /* a non-Python child of a non-Python CMD */
        if (rc != GS_OK) {
            snprintf(k->err, sizeof k->err, "%s", err.msg);
            k->tries++;
            k->next_try = mono + (k->tries < 10 ? 0.5 : 5.0);
            if (kill(k->pid, 0) != 0 && errno == ESRCH)
                k->dropped = 1;
            return;
        }
        k->col = malloc(sizeof *k->col);
        if (!k->col) {
            gs_pyread_close(k->r);
            k->r = NULL;
            return;
        }
        gs_collect_init(k->col, rs->prof, k->r);
        k->err[0] = '\0';
    }
    rc = gs_pyread_sample(k->r, k->pid, rs->ps, &err);
    if (rc == GS_ENOTFOUND) {
        k->dropped = 1;
        return;
    }
    if (rc != GS_OK || rs->ps->nthreads == 0) {
        k->failed++;
        if (rc != GS_OK)
            snprintf(k->err, sizeof k->err, "%s", err.msg);
        return;
    }
    if (mono >= k->creds_next) {
        struct gs_procfs_creds c;
        k->creds_next = mono + 1.0;
        /* the least privileged seen: a rank that dropped root is never read as root again */
        if (gs_procfs_read_creds((unsigned)k->pid, &c) == GS_OK &&
            (!k->has_creds || k->creds.uid == 0 || c.uid != 0)) {
            k->creds = c;
            k->has_creds = 1;
        }
    }
    {
        const struct gs_pythread *th = &rs->ps->threads[0];
        for (unsigned i = th->nframes; i-- > 0;) {
            uint32_t id = gs_collect_label(k->col, th->frames[i].func);
            if (id != GS_PROF_NONE)
                ids[n++] = id;
        }
        if (gs_stackprof_add_leaf(rs->prof, ids, n, 1, &leaf) == GS_OK) {
            k->samples++;
            keep_sample(rs, gs_clock_real_s(), leaf, th->nframes ? th->frames[0].line : 0, ri);
        }
    }
}

/* ---- the watchdog ---- */

/* The GPUs' state over the last few seconds: 1 idle or spinning or no readings, 0 busy. */
static int gpus_stuck(const struct gs_runstacks *rs, double now, char *what, size_t cap)
{
    unsigned idle = 0, spin = 0, busy = 0, shared = 0;

    for (uint32_t i = rs->ngpu; i-- > 0 && rs->gpu[i].t > now - 5;) {
        const struct reading *g = &rs->gpu[i];
        shared |= g->shared;
        if (g->util < IDLE_UTIL)
            idle++;
        else if (!g->shared && gs_spinning(g->util, g->power, g->limit))
            spin++;
        else
            busy++;
    }
    if (busy && !idle && !spin)
        return 0;
    snprintf(what, cap, "%s",
             spin             ? "GPUs spinning (utilization ~100 % at low power: a stuck "
                                "collective?)"
             : idle && shared ? "the run's processes idle on their shared GPUs"
             : idle           ? "GPUs idle"
                              : "no GPU readings");
    return 1;
}

/* Asks every rank's package for its NCCL flight recorder (python/gpuscope/_flight.py): the
 * hang's number in DIR/hang.request, written whole (rename), which each rank's watcher thread
 * answers within a second in DIR/hang-N-nccl/. */
static void hang_request(struct gs_runstacks *rs)
{
    char text[16];
    struct gs_err err;
    int n = snprintf(text, sizeof text, "%u\n", rs->hangs);

    /* made here, whole: the package honours only a regular file of the run's owner */
    if (gs_dirfile_write(rs->cfg.dirfd, "hang.request", 0644, text, (size_t)n, &err) != GS_OK) {
        fprintf(stderr, "gpuscope run: %s/%s (no NCCL flight recorder dump)\n", rs->dir, err.msg);
        if (rs->hangs <= MAX_HANGS)
            rs->hev[rs->hangs - 1].nccl = 3;
        return;
    }
    if (rs->hangs <= MAX_HANGS)
        rs->hev[rs->hangs - 1].req_mono = gs_clock_mono_s();
}

/* The ranks' answers to hang N's request (DIR/hang-N-nccl/): the flight recorder pointer is
 * printed once a rank wrote a dump; when every rank that said hello answered .unavailable,
 * or none answered within NCCL_WAIT_S, one line says there is none. */
static void nccl_answers(struct gs_runstacks *rs, struct hang_ev *e, double mono)
{
    char path[4200];
    unsigned dumps = 0, unavail = 0, hello = 0;
    struct dirent *d;
    DIR *dir;

    if (e->nccl != 0)
        return;
    snprintf(path, sizeof path, "%s/hang-%u-nccl", rs->dir, e->number);
    {
        char sub[64];
        int dfd;
        snprintf(sub, sizeof sub, "hang-%u-nccl", e->number);
        dfd = openat(rs->cfg.dirfd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        dir = dfd >= 0 ? fdopendir(dfd) : NULL;
        if (!dir && dfd >= 0)
            close(dfd);
    }
    while (dir && (d = readdir(dir)) != NULL) {
        size_t n = strlen(d->d_name);
        if (strncmp(d->d_name, "nccl_trace_rank_", 16) != 0 ||
            (n > 4 && strcmp(d->d_name + n - 4, ".tmp") == 0))
            continue;
        if (n > 12 && strcmp(d->d_name + n - 12, ".unavailable") == 0) {
            if (!unavail++) {
                int fd = openat(dirfd(dir), d->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
                if (!f && fd >= 0)
                    close(fd);
                if (f) {
                    if (!fgets(e->nccl_why, sizeof e->nccl_why, f))
                        e->nccl_why[0] = '\0';
                    e->nccl_why[strcspn(e->nccl_why, "\r\n")] = '\0';
                    fclose(f);
                }
            }
        } else {
            dumps++;
        }
    }
    if (dir)
        closedir(dir);
    for (unsigned i = 0; i < rs->nranks; i++)
        hello += rs->ranks[i].hello;
    if (dumps) {
        e->nccl = 1;
        fprintf(stderr,
                "gpuscope run:   NCCL flight recorder of each rank: %s/ "
                "(torchfrtrace --prefix nccl_trace_rank_ %s)\n",
                path, path);
    } else if (unavail && unavail >= (hello ? hello : 1)) {
        e->nccl = 2;
        fprintf(stderr, "gpuscope run:   no NCCL flight recorder dump: %s\n",
                e->nccl_why[0] ? e->nccl_why : "the ranks have none");
    } else if (mono - e->req_mono >= NCCL_WAIT_S) {
        e->nccl = unavail ? 2 : 3;
        if (!unavail)
            fprintf(stderr,
                    "gpuscope run:   no NCCL flight recorder dump: no rank answered "
                    "within %.0f s\n",
                    NCCL_WAIT_S);
    }
}

/* A file of Python itself or of an installed package (not the user's code). */
static int library_file(const char *file)
{
    return file[0] != '/' || strstr(file, "/site-packages/") || strstr(file, "/dist-packages/") ||
           strstr(file, "/lib/python3") || strstr(file, "/gpuscope/_") ||
           strstr(file, "/gpuscope/__init__.py");
}

/* Fills e->r[] from the main thread th of rank k (read into rs->ps). */
static void hang_rank_fill(struct gs_runstacks *rs, const struct rank *k,
                           const struct gs_pythread *th, struct hang_rank *hr, int ddp)
{
    struct gs_taskstate ts = {0};

    memset(hr, 0, sizeof *hr);
    hr->rank = k->hello ? k->rank : -1;
    hr->hello = k->hello;
    hr->pid = k->pid;
    for (unsigned i = 0; i < th->nframes; i++) {
        const struct gs_pyfunc *fn = gs_pyread_func(k->r, th->frames[i].func);
        if (!fn)
            continue;
        if (i == 0) {
            snprintf(hr->func, sizeof hr->func, "%s", fn->name);
            snprintf(hr->file, sizeof hr->file, "%s", fn->file);
            hr->line = th->frames[i].line;
        }
        if (!hr->user_file[0] && !library_file(fn->file)) {
            snprintf(hr->user_func, sizeof hr->user_func, "%s", fn->name);
            snprintf(hr->user_file, sizeof hr->user_file, "%s", fn->file);
            hr->user_line = th->frames[i].line;
        }
        if (strstr(fn->file, "torch/distributed/") ||
            (ddp && strstr(fn->file, "torch/autograd/") && strcmp(fn->name, "backward") == 0))
            hr->in_collective = 1;
    }
    gs_taskstate_read(k->pid, k->pid, &ts);
    snprintf(hr->state, sizeof hr->state, "%s", ts.what);
    (void)rs;
}

static void hang_dump(struct gs_runstacks *rs, double now, double stalled_s, double p95,
                      const char *gpu_what)
{
    char name[64], p95s[48];
    struct hang_ev *e = NULL;
    unsigned hello = 0;
    struct gs_dirfile df;
    struct gs_err err;
    FILE *f = NULL;

    rs->hangs++;
    if (rs->hangs <= MAX_HANGS) {
        e = &rs->hev[rs->hangs - 1];
        memset(e, 0, sizeof *e);
        e->number = rs->hangs;
        e->since = now - stalled_s;
        e->detected = now;
        e->ended = NAN;
        e->p95 = p95;
        e->steps_before = rs->hang.steps;
        snprintf(e->gpus, sizeof e->gpus, "%s", gpu_what);
    }
    for (unsigned i = 0; i < rs->nranks; i++)
        hello += rs->ranks[i].hello;
    if (isnan(p95))
        snprintf(p95s, sizeof p95s, "%s", rs->hang.steps ? "too few steps to time" : "no step yet");
    else
        snprintf(p95s, sizeof p95s, "p95 step %.2f s", p95);
    snprintf(name, sizeof name, "hang-%u-stacks.txt", rs->hangs);
    if (gs_dirfile_begin(&df, rs->cfg.dirfd, name, 0644, &err) == GS_OK)
        f = df.f;
    else
        fprintf(stderr, "gpuscope run: %s/%s\n", rs->dir, err.msg);
    fprintf(stderr, "gpuscope run: no step for %.0f s (%s), %s; stacks in %s/%s\n", stalled_s, p95s,
            gpu_what, rs->dir, name);
    if (f)
        fprintf(f, "no step for %.1f s (%s); %s\n", stalled_s, p95s, gpu_what);
    for (unsigned i = 0; i < rs->nranks; i++) {
        struct rank *k = &rs->ranks[i];
        const struct gs_pythread *main_th = NULL;
        struct hang_rank hr;
        if (!k->r || k->dropped || gs_pyread_sample(k->r, 0, rs->ps, NULL) != GS_OK)
            continue;
        if (f) {
            fprintf(f, "\n== rank %d (pid %d) ==\n", k->rank, (int)k->pid);
            gs_collect_dump(k->r, k->pid, rs->ps, f);
        }
        for (unsigned t = 0; t < rs->ps->nthreads; t++)
            if (rs->ps->threads[t].native_tid == k->pid || (t == rs->ps->nthreads - 1 && !main_th))
                main_th = &rs->ps->threads[t];
        if (!main_th || !main_th->nframes)
            continue;
        hang_rank_fill(rs, k, main_th, &hr, hello > 1);
        fprintf(stderr, "gpuscope run:   rank %d (pid %d) waits in %s (%s:%d), %s%s\n", k->rank,
                (int)k->pid, hr.func[0] ? hr.func : "?", hr.file[0] ? hr.file : "?", hr.line,
                hr.state, hr.in_collective ? "; in a collective" : "");
        if (e && e->nranks < HANG_RANKS)
            e->r[e->nranks++] = hr;
    }
    if (f && gs_dirfile_commit(&df, &err) != GS_OK)
        fprintf(stderr, "gpuscope run: %s/%s\n", rs->dir, err.msg);
    hang_request(rs);
}

/* Before the hang rule has steps to time, CPU used by the job's processes is its activity:
 * GS_HANG_ACTIVE_CPU of a core since the previous check (run/hang.h). */
static void job_activity(struct gs_runstacks *rs, double mono, double now)
{
    double cpu;

    if (rs->hang.steps >= GS_HANG_MIN_STEPS)
        return;
    cpu = rs->cfg.child > 0 ? gs_procfs_tree_cpu_s(NULL, (unsigned)rs->cfg.child) : NAN;
    if (!isnan(cpu) && !isnan(rs->cpu_last) && mono > rs->cpu_mono &&
        cpu - rs->cpu_last >= GS_HANG_ACTIVE_CPU * (mono - rs->cpu_mono))
        gs_hang_active(&rs->hang, now);
    rs->cpu_last = cpu;
    rs->cpu_mono = mono;
}

static void watchdog(struct gs_runstacks *rs, double mono)
{
    double now = gs_clock_real_s();
    char what[128];
    int python = 0;

    if (rs->cfg.hang_factor <= 0 || mono - rs->last_check < 1.0)
        return;
    rs->last_check = mono;
    if (rs->hangs && rs->hangs <= MAX_HANGS)
        nccl_answers(rs, &rs->hev[rs->hangs - 1], mono);
    if (rs->ended)
        return;
    job_activity(rs, mono, now);
    if (!gs_hang_new_stall(&rs->hang, rs->cfg.hang_factor, rs->cfg.hang_min_s, now))
        return;
    {
        /* a run whose ranks have all exited is ending, not hanging */
        int alive = 0;
        for (unsigned i = 0; i < rs->nranks; i++) {
            if (!rs->ranks[i].dropped && kill(rs->ranks[i].pid, 0) == 0 &&
                gs_taskstate_letter(rs->ranks[i].pid, rs->ranks[i].pid) != 'Z')
                alive = 1;
            python |= rs->ranks[i].hello || rs->ranks[i].r;
        }
        if (!alive)
            return;
    }
    /* with no step yet, only a Python job (a rank said hello, or a Python process was read)
     * is a training job that may hang: `gpuscope run -- sleep 100` does not */
    if (rs->hang.steps == 0 && !python)
        return;
    if (!gpus_stuck(rs, now, what, sizeof what))
        return;
    gs_hang_mark(&rs->hang); /* once per stall: a new step re-arms it */
    hang_dump(rs, now, now - gs_hang_quiet_since(&rs->hang),
              rs->hang.steps >= GS_HANG_MIN_STEPS ? gs_hang_p95(&rs->hang) : NAN, what);
}

static void *sampler_main(void *arg)
{
    struct gs_runstacks *rs = arg;
    double period = 1.0 / rs->cfg.hz, next = gs_clock_mono_s();

    pthread_mutex_lock(&rs->mu);
    while (!rs->stop) {
        double mono = gs_clock_mono_s();
        struct timespec until;
        for (unsigned i = 0; i < rs->nranks; i++)
            sample_rank(rs, i, mono);
        watchdog(rs, mono);
        next += period;
        mono = gs_clock_mono_s();
        if (next < mono)
            next = mono;
        until.tv_sec = (time_t)next;
        until.tv_nsec = (long)((next - (double)until.tv_sec) * 1e9);
        while (!rs->stop && pthread_cond_timedwait(&rs->cv, &rs->mu, &until) == 0)
            ;
    }
    pthread_mutex_unlock(&rs->mu);
    return NULL;
}

int gs_runstacks_start(const struct gs_runstacks_cfg *cfg, struct gs_runstacks **out,
                       struct gs_err *err)
{
    struct gs_runstacks *rs = calloc(1, sizeof *rs);
    pthread_condattr_t ca;

    if (!rs)
        return gs_err_set(err, GS_ENOMEM, "stacks: out of memory");
    rs->cfg = *cfg;
    rs->dir = strdup(cfg->dir ? cfg->dir : ".");
    rs->prof = gs_stackprof_new();
    rs->ps = malloc(sizeof *rs->ps);
    rs->samples = malloc(MAX_SAMPLES * sizeof *rs->samples);
    rs->steps = malloc(MAX_STEPS * sizeof *rs->steps);
    rs->gpu = malloc(MAX_GPU_READINGS * sizeof *rs->gpu);
    rs->stride = 1;
    rs->job_exit = rs->cpu_last = NAN;
    pthread_mutex_init(&rs->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&rs->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (!rs->dir || !rs->prof || !rs->ps || !rs->samples || !rs->steps || !rs->gpu) {
        gs_runstacks_free(rs);
        return gs_err_set(err, GS_ENOMEM, "stacks: out of memory");
    }
    if (cfg->child > 0)
        rank_add(rs, cfg->child);
    if (pthread_create(&rs->th, NULL, sampler_main, rs) != 0) {
        gs_runstacks_free(rs);
        return gs_err_set(err, GS_EIO, "stacks: cannot start the sampler thread");
    }
    rs->started = 1;
    *out = rs;
    return GS_OK;
}

void gs_runstacks_stop(struct gs_runstacks *rs)
{
    if (!rs || !rs->started)
        return;
    pthread_mutex_lock(&rs->mu);
    rs->stop = 1;
    pthread_cond_signal(&rs->cv);
    pthread_mutex_unlock(&rs->mu);
    pthread_join(rs->th, NULL);
    rs->started = 0;
}

void gs_runstacks_free(struct gs_runstacks *rs)
{
    if (!rs)
        return;
    gs_runstacks_stop(rs);
    for (unsigned i = 0; i < rs->nranks; i++) {
        gs_pyread_close(rs->ranks[i].r);
        free(rs->ranks[i].col);
    }
    gs_stackprof_free(rs->prof);
    free(rs->ps);
    free(rs->samples);
    free(rs->steps);
    free(rs->gpu);
    free(rs->dir);
    pthread_mutex_destroy(&rs->mu);
    pthread_cond_destroy(&rs->cv);
    free(rs);
}

/* ---- the report ---- */

/* Own and total counts of labels over a subset of samples; then the top TOP_N as JSON. */
struct tally {
    uint64_t *own, *tot;
    uint32_t *stamp;
    uint32_t cur;
    uint64_t n;
};

static int tally_init(struct tally *t, const struct gs_stackprof *p)
{
    size_t n = p->nlabels ? p->nlabels : 1;
    t->own = calloc(n, sizeof *t->own);
    t->tot = calloc(n, sizeof *t->tot);
    t->stamp = calloc(n, sizeof *t->stamp);
    t->cur = 0;
    t->n = 0;
    return t->own && t->tot && t->stamp ? 0 : -1;
}

static void tally_free(struct tally *t)
{
    free(t->own);
    free(t->tot);
    free(t->stamp);
}

static void tally_add(struct tally *t, const struct gs_stackprof *p, uint32_t leaf)
{
    t->n++;
    t->cur++;
    if (leaf && leaf < p->nnodes)
        t->own[p->nodes[leaf].frame]++;
    for (uint32_t c = leaf, d = 0; c && c < p->nnodes && d < 2048; c = p->nodes[c].parent, d++) {
        uint32_t f = p->nodes[c].frame;
        if (t->stamp[f] != t->cur) {
            t->stamp[f] = t->cur;
            t->tot[f]++;
        }
    }
}

static const struct tally *cmp_t;

static int cmp_own(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    if (cmp_t->own[x] != cmp_t->own[y])
        return cmp_t->own[x] > cmp_t->own[y] ? -1 : 1;
    if (cmp_t->tot[x] != cmp_t->tot[y])
        return cmp_t->tot[x] > cmp_t->tot[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

static double ratio(uint64_t a, uint64_t b)
{
    return b ? round((double)a / (double)b * 1e4) / 1e4 : 0;
}

static json_t *tally_top(const struct tally *t, const struct gs_stackprof *p)
{
    json_t *arr = json_array();
    uint32_t *ids = malloc((p->nlabels ? p->nlabels : 1) * sizeof *ids);
    uint32_t n = 0;

    if (!arr || !ids) {
        free(ids);
        return arr;
    }
    for (uint32_t i = 0; i < p->nlabels; i++)
        if (t->tot[i])
            ids[n++] = i;
    cmp_t = t;
    qsort(ids, n, sizeof *ids, cmp_own);
    for (uint32_t i = 0; i < n && i < TOP_N; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "function", json_string(p->labels[ids[i]].name));
        json_object_set_new(o, "file", json_string(p->labels[ids[i]].file));
        json_object_set_new(o, "own", json_real(ratio(t->own[ids[i]], t->n)));
        json_object_set_new(o, "total", json_real(ratio(t->tot[ids[i]], t->n)));
        json_array_append_new(arr, o);
    }
    free(ids);
    return arr;
}

/* Totals of a few labels that rules look for, by substring of name or file. */
static json_t *tally_groups(const struct tally *t, const struct gs_stackprof *p)
{
    static const struct {
        const char *key, *name_has, *file_has;
    } groups[] = {
        {"data_loading", "_next_data", NULL},
        {"data_loading", NULL, "torch/utils/data/"},
        {"cuda_synchronize", "synchronize", "torch/cuda/"},
        {"checkpoint", NULL, "torch/serialization.py"},
        {"checkpoint", "save_pretrained", NULL},
        {"checkpoint", "_save_checkpoint", NULL},
        {"checkpoint", NULL, "safetensors"},
        {"logging", NULL, "logging/__init__.py"},
        {"logging", NULL, "wandb/"},
        {"logging", NULL, "tensorboard"},
        {"logging", NULL, "mlflow/"},
        {"collective", NULL, "torch/distributed/"},
    };
    json_t *o = json_object();
    const char *keys[] = {"data_loading", "cuda_synchronize", "checkpoint", "logging",
                          "collective"};

    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        /* a sample counts once per group: the deepest matching frame's total is a lower
         * bound, so take the max over matching labels (frames nest) */
        uint64_t best = 0;
        for (uint32_t i = 0; i < p->nlabels; i++) {
            int match = 0;
            for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
                if (strcmp(groups[g].key, keys[k]) != 0)
                    continue;
                if ((!groups[g].name_has || strstr(p->labels[i].name, groups[g].name_has)) &&
                    (!groups[g].file_has || strstr(p->labels[i].file, groups[g].file_has)))
                    match = 1;
            }
            if (match && t->tot[i] > best)
                best = t->tot[i];
        }
        json_object_set_new(o, keys[k], json_real(ratio(best, t->n)));
    }
    return o;
}

static json_t *tally_json(const struct tally *t, const struct gs_stackprof *p)
{
    json_t *o = json_object();
    json_object_set_new(o, "samples", json_integer((json_int_t)t->n));
    json_object_set_new(o, "top", tally_top(t, p));
    json_object_set_new(o, "groups", tally_groups(t, p));
    return o;
}

static int cmp_step(const void *a, const void *b)
{
    const struct step *x = a, *y = b;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return x->first < y->first ? -1 : x->first > y->first;
}

static const char *const phase_names[] = {"data",           "forward", "backward",
                                          "optimizer_step", "other",   "outside_steps"};

static unsigned phase_of(const struct gs_runstacks *rs, int rank, double t)
{
    uint32_t lo = 0, hi = rs->nsteps, best = UINT32_MAX;
    const struct step *s;

    /* last step of `rank` with first <= t */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        const struct step *m = &rs->steps[mid];
        if (m->rank < rank || (m->rank == rank && m->first <= t)) {
            if (m->rank == rank)
                best = mid;
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if (best == UINT32_MAX)
        return 5;
    s = &rs->steps[best];
    if (t < s->data_start)
        return 4; /* before the data phase, after the previous optimizer step: "other" */
    if (t < s->begin)
        return 0;
    if (t < s->fwd_end)
        return 1;
    if (t < s->bwd_end)
        return 2;
    if (t < s->opt_end)
        return 3;
    if (t < s->end)
        return 4;
    return 5;
}

static int cmp_reading(const void *a, const void *b)
{
    const struct reading *x = a, *y = b;
    if (x->gpu != y->gpu)
        return x->gpu < y->gpu ? -1 : 1;
    return x->t < y->t ? -1 : x->t > y->t;
}

/* The reading of GPU readings[lo..hi) that covers t (the first at or after it, within 5 s);
 * NULL when none. */
static const struct reading *reading_at(const struct reading *r, uint32_t lo, uint32_t hi, double t)
{
    const uint32_t end = hi;

    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (r[mid].t < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < end && r[lo].t - t <= 5.0 ? &r[lo] : NULL;
}

/* Whether c may do `want` (4 read, 1 search) on a file of this stat, by its mode bits. */
static int creds_allow(const struct gs_procfs_creds *c, const struct stat *st, unsigned want)
{
    unsigned bits = st->st_mode & 7;

    if (c->uid == 0)
        return 1;
    if (st->st_uid == c->uid) {
        bits = (st->st_mode >> 6) & 7;
    } else {
        int member = st->st_gid == c->gid;
        for (unsigned i = 0; i < c->ngroups && !member; i++)
            member = st->st_gid == c->groups[i];
        if (member)
            bits = (st->st_mode >> 3) & 7;
    }
    return (bits & want) == want;
}

/* Opens file for reading only where every one of the n credentials may read it: each directory
 * on its resolved path searchable, the file itself a readable regular file; the file opened is
 * the one checked (O_NOFOLLOW, same device and inode). NULL otherwise. */
static FILE *open_as(const char *file, const struct gs_procfs_creds *const *cs, unsigned n)
{
    char real[PATH_MAX], pre[PATH_MAX];
    struct stat st, fst;
    int fd;
    FILE *f;

    if (!n || !realpath(file, real))
        return NULL;
    for (size_t i = 0; real[i]; i++) {
        if (real[i] != '/')
            continue;
        snprintf(pre, sizeof pre, "%.*s", i ? (int)i : 1, real);
        if (stat(pre, &st) != 0 || !S_ISDIR(st.st_mode))
            return NULL;
        for (unsigned c = 0; c < n; c++)
            if (!creds_allow(cs[c], &st, 1))
                return NULL;
    }
    if (stat(real, &st) != 0 || !S_ISREG(st.st_mode))
        return NULL;
    for (unsigned c = 0; c < n; c++)
        if (!creds_allow(cs[c], &st, 4))
            return NULL;
    fd = open(real, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    if (fstat(fd, &fst) != 0 || fst.st_dev != st.st_dev || fst.st_ino != st.st_ino ||
        !(f = fdopen(fd, "r"))) {
        close(fd);
        return NULL;
    }
    return f;
}

/* Source line `line` of file, trimmed, into out; "" when unreadable by any of the n ranks'
 * credentials (or by us). */
static void source_line(const char *file, int line, const struct gs_procfs_creds *const *cs,
                        unsigned n, char *out, size_t cap)
{
    FILE *f = line > 0 && file[0] == '/' ? open_as(file, cs, n) : NULL;
    char buf[1024];
    int ln = 0;

    out[0] = '\0';
    if (!f)
        return;
    while (fgets(buf, sizeof buf, f))
        if (++ln == line) {
            char *s = buf;
            while (*s == ' ' || *s == '\t')
                s++;
            s[strcspn(s, "\r\n")] = '\0';
            snprintf(out, cap, "%.160s", s);
            break;
        }
    fclose(f);
}

/* The credentials of the ranks whose samples among idx[0..n) are at frame f, line: NULL
 * entries and 0 when one of them has none known (then no source is read). */
static unsigned line_creds(const struct gs_runstacks *rs, const uint32_t *idx, uint32_t n,
                           uint32_t f, int32_t line, const struct gs_procfs_creds **out)
{
    unsigned char seen[MAX_RANKS] = {0};
    unsigned m = 0;

    for (uint32_t i = 0; i < n; i++) {
        const struct sample *s = &rs->samples[idx[i]];
        const struct rank *k;
        if (!s->leaf || s->line != line || rs->prof->nodes[s->leaf].frame != f ||
            s->ri >= MAX_RANKS || seen[s->ri])
            continue;
        seen[s->ri] = 1;
        k = &rs->ranks[s->ri];
        if (!k->has_creds)
            return 0;
        out[m++] = &k->creds;
    }
    return m;
}

/* The leaf lines most often sampled among samples idx[0..n), with their source text. */
static json_t *top_lines(const struct gs_runstacks *rs, const uint32_t *idx, uint32_t n)
{
    struct lc {
        uint32_t frame;
        int32_t line;
        uint64_t count;
    } *lines = calloc(n ? n : 1, sizeof *lines);
    uint32_t nl = 0;
    json_t *arr = json_array();

    if (!lines || !arr) {
        free(lines);
        return arr;
    }
    for (uint32_t i = 0; i < n; i++) {
        const struct sample *s = &rs->samples[idx[i]];
        uint32_t f;
        uint32_t k;
        if (!s->leaf)
            continue;
        f = rs->prof->nodes[s->leaf].frame;
        for (k = 0; k < nl; k++)
            if (lines[k].frame == f && lines[k].line == s->line)
                break;
        if (k == nl) {
            if (nl >= 4096)
                continue;
            lines[nl++] = (struct lc){f, s->line, 0};
        }
        lines[k].count++;
    }
    for (unsigned pick = 0; pick < 5; pick++) {
        uint32_t best = UINT32_MAX;
        char src[200];
        json_t *o;
        for (uint32_t k = 0; k < nl; k++)
            if (lines[k].count && (best == UINT32_MAX || lines[k].count > lines[best].count))
                best = k;
        if (best == UINT32_MAX)
            break;
        o = json_object();
        json_object_set_new(o, "function", json_string(rs->prof->labels[lines[best].frame].name));
        json_object_set_new(o, "file", json_string(rs->prof->labels[lines[best].frame].file));
        json_object_set_new(o, "line", json_integer(lines[best].line));
        json_object_set_new(o, "share", json_real(ratio(lines[best].count, n)));
        {
            const struct gs_procfs_creds *cs[MAX_RANKS];
            unsigned nc = line_creds(rs, idx, n, lines[best].frame, lines[best].line, cs);
            source_line(rs->prof->labels[lines[best].frame].file, lines[best].line, cs, nc, src,
                        sizeof src);
        }
        if (src[0])
            json_object_set_new(o, "source", json_string(src));
        json_array_append_new(arr, o);
        lines[best].count = 0;
    }
    free(lines);
    return arr;
}

static void write_outputs(struct gs_runstacks *rs, json_t *sec)
{
    struct gs_dirfile df;
    struct gs_err err;

    gs_err_clear(&err);
    if (gs_dirfile_begin(&df, rs->cfg.dirfd, "stacks.svg", 0644, &err) == GS_OK) {
        if (gs_flame_write_svg(rs->prof, "gpuscope run: main threads of the ranks", df.f, NULL) !=
            GS_OK)
            gs_dirfile_abort(&df);
        else if (gs_dirfile_commit(&df, &err) == GS_OK)
            json_object_set_new(sec, "flamegraph", json_string("stacks.svg"));
    }
    if (err.msg[0])
        fprintf(stderr, "gpuscope run: %s/%s\n", rs->dir, err.msg);
    gs_err_clear(&err);
    if (gs_dirfile_begin(&df, rs->cfg.dirfd, "stacks.txt", 0644, &err) == GS_OK) {
        if (gs_stackprof_write_collapsed(rs->prof, df.f) != GS_OK)
            gs_dirfile_abort(&df);
        else if (gs_dirfile_commit(&df, &err) == GS_OK)
            json_object_set_new(sec, "collapsed", json_string("stacks.txt"));
    }
    if (err.msg[0])
        fprintf(stderr, "gpuscope run: %s/%s\n", rs->dir, err.msg);
}

static json_t *jnum_or_null(double v)
{
    return isfinite(v) ? json_real(round(v * 1e3) / 1e3) : json_null();
}

/* The report's "hangs": each hang the watchdog found (docs/report.md, HANGS). */
static json_t *hangs_json(struct gs_runstacks *rs)
{
    json_t *arr = json_array();
    double end = isfinite(rs->job_exit) ? rs->job_exit : gs_clock_real_s();

    for (unsigned h = 0; arr && h < rs->hangs && h < MAX_HANGS; h++) {
        struct hang_ev *e = &rs->hev[h];
        json_t *o = json_object(), *ranks = json_array(), *stuck = json_array();
        char name[64];
        if (!o || !ranks || !stuck) {
            json_decref(o);
            json_decref(ranks);
            json_decref(stuck);
            break;
        }
        for (unsigned i = 0; i < e->nranks; i++) {
            const struct hang_rank *r = &e->r[i];
            json_t *k = json_object();
            json_object_set_new(k, "rank", r->hello ? json_integer(r->rank) : json_null());
            json_object_set_new(k, "pid", json_integer(r->pid));
            json_object_set_new(k, "function", json_string(r->func));
            json_object_set_new(k, "file", json_string(r->file));
            json_object_set_new(k, "line", json_integer(r->line));
            json_object_set_new(k, "user_function",
                                r->user_file[0] ? json_string(r->user_func) : json_null());
            json_object_set_new(k, "user_file",
                                r->user_file[0] ? json_string(r->user_file) : json_null());
            json_object_set_new(k, "user_line",
                                r->user_file[0] ? json_integer(r->user_line) : json_null());
            json_object_set_new(k, "state", json_string(r->state));
            json_object_set_new(k, "in_collective", json_boolean(r->in_collective));
            json_array_append_new(ranks, k);
            /* the ranks the others wait for: those outside a collective when some are in
             * one; every rank when none is (a single process, or all stuck on their own) */
            if (!r->in_collective && r->hello)
                json_array_append_new(stuck, json_integer(r->rank));
        }
        json_object_set_new(o, "number", json_integer(e->number));
        json_object_set_new(o, "started_at", jnum_or_null(e->since));
        json_object_set_new(o, "detected_at", jnum_or_null(e->detected));
        json_object_set_new(o, "ended_at", jnum_or_null(e->ended));
        json_object_set_new(o, "until_job_end", json_boolean(isnan(e->ended)));
        json_object_set_new(o, "duration_seconds",
                            jnum_or_null((isnan(e->ended) ? end : e->ended) - e->since));
        json_object_set_new(o, "steps_before", json_integer((json_int_t)e->steps_before));
        json_object_set_new(o, "p95_step_seconds", jnum_or_null(e->p95));
        json_object_set_new(o, "gpus", json_string(e->gpus));
        json_object_set_new(o, "ranks", ranks);
        json_object_set_new(o, "stuck_ranks", stuck);
        snprintf(name, sizeof name, "hang-%u-stacks.txt", e->number);
        json_object_set_new(o, "stacks_file", json_string(name));
        snprintf(name, sizeof name, "hang-%u-nccl", e->number);
        json_object_set_new(o, "nccl_dump", e->nccl == 1 ? json_string(name) : json_null());
        json_object_set_new(o, "nccl_unavailable",
                            e->nccl == 2 && e->nccl_why[0] ? json_string(e->nccl_why)
                                                           : json_null());
        json_array_append_new(arr, o);
    }
    return arr;
}

void gs_runstacks_report(struct gs_runstacks *rs, json_t *report)
{
    json_t *sec, *ranks, *phases, *idle;
    struct tally all, ph[6];
    uint32_t *idx = NULL;

    if (!rs || !json_is_object(report))
        return;
    gs_runstacks_stop(rs);
    sec = json_object();
    ranks = json_array();
    json_object_set_new(sec, "rate_hz", json_real(rs->cfg.hz));
    json_object_set_new(sec, "samples", json_integer((json_int_t)rs->prof->samples));
    json_object_set_new(sec, "kept_samples", json_integer(rs->nsamples));
    for (unsigned i = 0; i < rs->nranks; i++) {
        struct rank *k = &rs->ranks[i];
        json_t *o = json_object();
        json_object_set_new(o, "pid", json_integer(k->pid));
        json_object_set_new(o, "rank", k->hello ? json_integer(k->rank) : json_null());
        json_object_set_new(o, "samples", json_integer((json_int_t)k->samples));
        json_object_set_new(o, "unreadable", json_integer((json_int_t)k->failed));
        if (k->r) {
            unsigned v = gs_pyread_version(k->r);
            char ver[32];
            snprintf(ver, sizeof ver, "%u.%u.%u", v >> 24, (v >> 16) & 0xff, (v >> 8) & 0xff);
            json_object_set_new(o, "python", json_string(ver));
        }
        if (k->err[0] && !k->samples) {
            char name[64];
            struct stat st;
            json_object_set_new(o, "error", json_string(k->err));
            /* refused from outside: the package may have sampled itself (stacks.py) */
            snprintf(name, sizeof name, "stacks-inproc-%d.txt", (int)k->pid);
            if (fstatat(rs->cfg.dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
                json_object_set_new(o, "in_process_profile", json_string(name));
        }
        json_array_append_new(ranks, o);
    }
    json_object_set_new(sec, "ranks", ranks);
    json_object_set_new(sec, "hangs", json_integer(rs->hangs));
    if (rs->hangs)
        json_object_set_new(report, "hangs", hangs_json(rs));
    if (rs->prof->samples)
        write_outputs(rs, sec);

    if (tally_init(&all, rs->prof) != 0)
        goto done;
    for (int p = 0; p < 6; p++)
        if (tally_init(&ph[p], rs->prof) != 0) {
            for (int q = 0; q < p; q++)
                tally_free(&ph[q]);
            tally_free(&all);
            goto done;
        }
    qsort(rs->steps, rs->nsteps, sizeof *rs->steps, cmp_step);
    qsort(rs->gpu, rs->ngpu, sizeof *rs->gpu, cmp_reading);
    idx = malloc((rs->nsamples ? rs->nsamples : 1) * sizeof *idx);
    for (uint32_t i = 0; i < rs->nsamples; i++) {
        const struct sample *s = &rs->samples[i];
        const struct rank *k = &rs->ranks[s->ri];
        tally_add(&all, rs->prof, s->leaf);
        tally_add(&ph[phase_of(rs, k->hello ? k->rank : 0, s->t)], rs->prof, s->leaf);
    }
    json_object_set_new(sec, "top", tally_top(&all, rs->prof));
    json_object_set_new(sec, "groups", tally_groups(&all, rs->prof));
    if (idx) {
        for (uint32_t i = 0; i < rs->nsamples; i++)
            idx[i] = i;
        json_object_set_new(sec, "lines", top_lines(rs, idx, rs->nsamples));
    }
    phases = json_object();
    for (int p = 0; p < 6; p++) {
        if (ph[p].n)
            json_object_set_new(phases, phase_names[p], tally_json(&ph[p], rs->prof));
        tally_free(&ph[p]);
    }
    json_object_set_new(sec, "by_phase", phases);
    tally_free(&all);

    /* per GPU: the samples taken while it was idle */
    idle = json_array();
    for (uint32_t lo = 0; lo < rs->ngpu && idx;) {
        uint32_t hi = lo, nidle = 0, ni = 0;
        unsigned g = rs->gpu[lo].gpu;
        struct tally t;
        while (hi < rs->ngpu && rs->gpu[hi].gpu == g)
            nidle += rs->gpu[hi++].util < IDLE_UTIL;
        if (tally_init(&t, rs->prof) == 0) {
            json_t *o = json_object();
            for (uint32_t i = 0; i < rs->nsamples; i++) {
                const struct reading *r = reading_at(rs->gpu, lo, hi, rs->samples[i].t);
                if (r && r->util < IDLE_UTIL) {
                    tally_add(&t, rs->prof, rs->samples[i].leaf);
                    idx[ni++] = i;
                }
            }
            json_object_set_new(o, "gpu", json_integer(g));
            json_object_set_new(o, "idle_fraction", json_real(ratio(nidle, hi - lo)));
            json_object_set_new(o, "samples", json_integer((json_int_t)t.n));
            json_object_set_new(o, "top", tally_top(&t, rs->prof));
            json_object_set_new(o, "groups", tally_groups(&t, rs->prof));
            json_object_set_new(o, "lines", top_lines(rs, idx, ni));
            json_array_append_new(idle, o);
            tally_free(&t);
        }
        lo = hi;
    }
    json_object_set_new(sec, "gpu_idle", idle);
done:
    free(idx);
    json_object_set_new(report, "stacks", sec);
}
