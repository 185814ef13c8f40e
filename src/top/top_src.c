/*
 * `gpuscope top`'s data sources and the worker thread that polls them (top.h). A source
 * (client/source.h) is NVML itself (one sampler kept for the whole session), the local agent's
 * unix socket (the visibility policy applies there by SO_PEERCRED), or an agent over HTTP or
 * HTTPS (--host: client/http.h, libcurl loaded only then; a Bearer token as docs/security.md
 * describes).
 * Agents also give history (/api/v1/history, fetched once so that the graphs are full from
 * the first frame) and training runs (/api/v1/runs and the report of each running one, every
 * two seconds).
 *
 * The worker polls every source each interval and publishes one struct top_frame with copies
 * of everything the screen needs, so the key loop never waits on NVML, a socket or the
 * network (PCIe throughput alone blocks ~40 ms per GPU in the driver).
 */
#include "top/top.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/ticker.h"
#include "client/http.h"
#include "client/source.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_sampler.h"

#define HTTP_TIMEOUT_MS 2000
#define RUNS_EVERY_S 2.0
#define STATIC_EVERY_S 60.0
#define MAX_REPORTS 4

struct src {
    enum top_src_kind kind;
    char name[128], where[160], err[512];
    struct gs_source *source;
    /* The latest good snapshot: for NVML the sampler's own (borrowed: a failed poll leaves
     * it part-written, so frames then keep what they hold), else a copy (owned). */
    struct gs_snapshot *snap;
    int snap_borrowed;
    struct top_hist *hist;
    unsigned hist_gpus;
    int hist_filled;
    json_t *runs, *reports;
    double runs_t, static_t, t_ok;
};

struct top_worker {
    struct gs_ticker *ticker;
    pthread_mutex_t mu; /* guards slot and interval_s */
    double interval_s;
    int wake_fd;
    unsigned seq;
    struct top_frame *slot;
    /* frames the key loop gave back, to fill again; guarded by mu */
    struct top_frame *spare[3];
    unsigned n_spare;
    const struct top_cfg *cfg;
    unsigned n_src;
    struct src src[TOP_MAX_SRC];
};

/* ---- agents' API ---- */

static int src_get_json(struct src *s, const char *path, json_t **out, struct gs_err *err)
{
    char *body = NULL;
    size_t len = 0;
    json_error_t je;
    int rc = gs_source_get(s->source, path, &body, &len, err);

    if (rc != GS_OK)
        return rc;
    *out = json_loadb(body, len, 0, &je);
    free(body);
    if (!*out)
        return gs_err_set(err, GS_EPARSE, "%s: %s: offset %d: %s", s->name, path, je.position,
                          je.text);
    return GS_OK;
}

/* ---- history ---- */

static int hist_ensure(struct src *s, unsigned n_gpus)
{
    if (s->hist && s->hist_gpus == n_gpus)
        return 0;
    free(s->hist);
    s->hist = calloc((size_t)n_gpus * TOP_G__N, sizeof *s->hist);
    s->hist_gpus = s->hist ? n_gpus : 0;
    return s->hist ? 0 : -1;
}

static void hist_push(struct top_hist *h, float v)
{
    if (h->n < TOP_HIST) {
        h->v[(h->start + h->n++) % TOP_HIST] = v;
    } else { /* full: the newest takes the oldest's place */
        h->v[h->start] = v;
        h->start = (h->start + 1) % TOP_HIST;
    }
}

static float graph_value(const struct gs_gpu *g, enum top_graph k)
{
    if (g->lost)
        return NAN;
    switch (k) {
    case TOP_G_UTIL:
        return gs_gpu_has(g, GS_M_UTIL_GPU) ? (float)g->v[GS_M_UTIL_GPU] : NAN;
    case TOP_G_MEM:
        return gs_gpu_has(g, GS_M_MEM_USED) && gs_gpu_has(g, GS_M_MEM_TOTAL) &&
                       g->v[GS_M_MEM_TOTAL] > 0
                   ? (float)(g->v[GS_M_MEM_USED] / g->v[GS_M_MEM_TOTAL])
                   : NAN;
    case TOP_G_POWER:
        return gs_gpu_has(g, GS_M_POWER_DRAW) ? (float)g->v[GS_M_POWER_DRAW] : NAN;
    default:
        return NAN;
    }
}

/* Fills the graphs of an agent's GPUs from /api/v1/history: the last TOP_HIST intervals, one
 * bucket per interval, NAN where the history has a gap. */
static void hist_prefill(struct src *s, double interval_s)
{
    static const char *const metric[TOP_G__N] = {"utilization_gpu", "memory_used", "power_draw"};
    double step = interval_s < 1.0 ? 1.0 : floor(interval_s);
    double to = floor(gs_clock_real_s() / step) * step, from = to - step * TOP_HIST;

    for (unsigned gi = 0; gi < s->snap->n_gpus; gi++) {
        const struct gs_gpu *g = &s->snap->gpus[gi];
        for (int k = 0; k < TOP_G__N; k++) {
            struct top_hist *h = &s->hist[gi * TOP_G__N + k];
            char path[160];
            json_t *doc = NULL, *pts, *pt;
            struct gs_err e = {0};
            size_t i;
            unsigned last = 0;
            double scale = 1.0;
            if (k == TOP_G_MEM) {
                if (!gs_gpu_has(g, GS_M_MEM_TOTAL) || g->v[GS_M_MEM_TOTAL] <= 0)
                    continue;
                scale = 1.0 / g->v[GS_M_MEM_TOTAL];
            }
            snprintf(path, sizeof path,
                     "/api/v1/history?gpu=%u&metric=%s&from=%.0f&to=%.0f&step=%.0f", g->index,
                     metric[k], from, to, step);
            if (src_get_json(s, path, &doc, &e) != GS_OK)
                return; /* history off or not allowed: live points only */
            pts = json_object_get(doc, "points");
            float v[TOP_HIST];
            for (unsigned j = 0; j < TOP_HIST; j++)
                v[j] = NAN;
            json_array_foreach(pts, i, pt)
            {
                double t = json_number_value(json_array_get(pt, 0));
                const json_t *avg = json_array_get(pt, 2);
                long slot = lround((t - from) / step);
                if (slot < 0 || slot >= TOP_HIST || !json_is_number(avg))
                    continue;
                v[slot] = (float)(json_number_value(avg) * scale);
                last = (unsigned)slot + 1;
            }
            json_decref(doc);
            /* the history ends where its last flushed point is; live points follow */
            h->n = h->start = 0;
            for (unsigned j = 0; j < last; j++)
                hist_push(h, v[j]);
        }
    }
}

/* ---- snapshots ---- */

/* Copies s into *dst, reusing *dst's buffers when they fit (the same GPU count, room for
 * the processes), so that the steady state allocates nothing; 0, or -1 with *dst NULL. */
static int snap_copy(struct gs_snapshot **dst, const struct gs_snapshot *s)
{
    struct gs_snapshot *d = *dst;
    struct gs_err e = {0};

    if (d && (d->n_gpus != s->n_gpus ||
              gs_snapshot_reserve_procs(d, s->n_procs ? s->n_procs : 1, &e) != GS_OK)) {
        gs_snapshot_free(d);
        d = *dst = NULL;
    }
    if (!d && gs_snapshot_new(&d, s->n_gpus, s->n_procs ? s->n_procs : 1, &e) != GS_OK)
        return -1;
    *dst = d;
    d->sys = s->sys;
    d->t_real = s->t_real;
    d->t_mono_ns = s->t_mono_ns;
    if (s->n_gpus)
        memcpy(d->gpus, s->gpus, s->n_gpus * sizeof *s->gpus);
    if (s->n_procs)
        memcpy(d->procs, s->procs, s->n_procs * sizeof *s->procs);
    d->n_procs = s->n_procs;
    return 0;
}

static int poll_snapshot(struct src *s, struct gs_err *err)
{
    struct gs_snapshot *snap;
    unsigned want = 0; /* an agent reads what it reads */
    double t = gs_clock_real_s();
    int rc;

    if (s->kind == TOP_SRC_NVML) {
        want = GS_WANT_PROCS | GS_WANT_PROC_HOST | GS_WANT_PROC_UTIL | GS_WANT_MIG |
               GS_WANT_HEALTH | GS_WANT_PCIE_TPUT | GS_WANT_NVLINK_STATE;
        if (t - s->static_t >= STATIC_EVERY_S) {
            want |= GS_WANT_STATIC;
            s->static_t = t;
        }
    }
    rc = gs_source_sample(s->source, want, err);
    if (rc != GS_OK)
        return rc;
    snap = gs_source_snapshot(s->source);
    if (s->kind == TOP_SRC_NVML) {
        if (!snap->sys.hostname[0])
            gethostname(snap->sys.hostname, sizeof snap->sys.hostname - 1);
        if (snap->t_real <= 0)
            snap->t_real = t;
        /* no copy of our own: the frames copy it (one 185 KiB copy a poll fewer on 8 GPUs
         * with 64 processes, and its memory) */
        s->snap = snap;
        s->snap_borrowed = 1;
        return GS_OK;
    }
    return snap_copy(&s->snap, snap) == 0 ? GS_OK : gs_err_set(err, GS_ENOMEM, "out of memory");
}

static void poll_runs(struct src *s)
{
    json_t *runs = NULL, *reports, *r;
    struct gs_err e = {0};
    size_t i;
    unsigned n = 0;

    if (s->kind == TOP_SRC_NVML)
        return;
    if (src_get_json(s, "/api/v1/runs?limit=20", &runs, &e) != GS_OK) {
        json_decref(s->runs);
        s->runs = NULL; /* no steps socket, or no agent: the panel says so */
        return;
    }
    reports = json_object();
    json_array_foreach(json_object_get(runs, "runs"), i, r)
    {
        const char *state = json_string_value(json_object_get(r, "state"));
        json_int_t id = json_integer_value(json_object_get(r, "id"));
        char key[32], path[64];
        json_t *old, *rep = NULL;
        int running = state && strcmp(state, "running") == 0;
        if (n >= MAX_REPORTS || (!running && i > 0))
            continue;
        snprintf(key, sizeof key, "%lld", (long long)id);
        old = s->reports ? json_object_get(s->reports, key) : NULL;
        if (!running && old) { /* an ended run's report does not change */
            json_object_set(reports, key, old);
            n++;
            continue;
        }
        snprintf(path, sizeof path, "/api/v1/runs/%lld", (long long)id);
        if (src_get_json(s, path, &rep, &e) == GS_OK) {
            json_object_set_new(reports, key, rep);
            n++;
        }
    }
    json_decref(s->runs);
    json_decref(s->reports);
    s->runs = runs;
    s->reports = reports;
}

/* What a good poll (at t) feeds: the history graphs, prefilled from the agent's history the
 * first time, and every RUNS_EVERY_S the runs. */
static void record_poll(struct src *s, double t, double interval_s)
{
    s->err[0] = '\0';
    s->t_ok = t;
    if (hist_ensure(s, s->snap->n_gpus) != 0)
        return;
    if (!s->hist_filled) {
        s->hist_filled = 1;
        if (s->kind != TOP_SRC_NVML)
            hist_prefill(s, interval_s);
    }
    for (unsigned gi = 0; gi < s->snap->n_gpus; gi++)
        for (int k = 0; k < TOP_G__N; k++)
            hist_push(&s->hist[gi * TOP_G__N + k], graph_value(&s->snap->gpus[gi], k));
    if (t - s->runs_t >= RUNS_EVERY_S) {
        s->runs_t = t;
        poll_runs(s);
    }
}

static void poll_src(struct src *s, double interval_s)
{
    struct gs_err e = {0};
    double t = gs_clock_real_s();

    if (poll_snapshot(s, &e) != GS_OK) {
        snprintf(s->err, sizeof s->err, "%s", e.msg[0] ? e.msg : "poll failed");
        return;
    }
    record_poll(s, t, interval_s);
}

/* Fills f (new or reused: its snapshots and history buffers are kept when they fit) with
 * copies of what the screen needs; 0, or -1 when out of memory. */
static int build_frame(struct top_worker *w, struct top_frame *f)
{
    f->n_src = w->n_src;
    f->t = gs_clock_real_s();
    f->seq = ++w->seq;
    for (unsigned i = 0; i < w->n_src; i++) {
        const struct src *s = &w->src[i];
        struct top_srcframe *d = &f->src[i];
        d->kind = s->kind;
        d->local = s->kind != TOP_SRC_HTTP;
        memcpy(d->name, s->name, sizeof d->name);
        memcpy(d->where, s->where, sizeof d->where);
        memcpy(d->err, s->err, sizeof d->err);
        d->t_ok = s->t_ok;
        if (s->snap_borrowed && s->err[0]) {
            /* the sampler's snapshot after a failed poll: the frame keeps its last answer */
        } else if (s->snap && s->hist && s->hist_gpus == s->snap->n_gpus) {
            unsigned n = s->hist_gpus * TOP_G__N;
            if (d->hist_cap < n) {
                free(d->hist);
                d->hist = malloc((size_t)n * sizeof *d->hist);
                d->hist_cap = d->hist ? n : 0;
            }
            if (!d->hist || snap_copy(&d->snap, s->snap) != 0)
                return -1;
            memcpy(d->hist, s->hist, (size_t)n * sizeof *d->hist);
        } else if (d->snap) { /* no good poll yet: the screen says so */
            gs_snapshot_free(d->snap);
            d->snap = NULL;
        }
        json_decref(d->runs);
        json_decref(d->reports);
        d->runs = s->runs ? json_deep_copy(s->runs) : NULL;
        d->reports = s->reports ? json_deep_copy(s->reports) : NULL;
    }
    return 0;
}

/* Two frames at most: the key loop's and the newest. A frame not yet taken is filled again in
 * place (under the lock: a copy of ~0.3 MB, while the key loop only takes); else the one the
 * key loop gave back, or a new one the first time. */
static void publish(struct top_worker *w)
{
    struct top_frame *f;
    int rc;

    pthread_mutex_lock(&w->mu);
    if (w->slot) {
        rc = build_frame(w, w->slot);
        if (rc != 0) {
            top_frame_free(w->slot);
            w->slot = NULL;
        }
        pthread_mutex_unlock(&w->mu);
        return; /* the key loop was woken for it already */
    }
    f = w->n_spare ? w->spare[--w->n_spare] : NULL;
    pthread_mutex_unlock(&w->mu);
    if (!f && !(f = calloc(1, sizeof *f)))
        return;
    if (build_frame(w, f) != 0) {
        top_frame_free(f);
        return;
    }
    pthread_mutex_lock(&w->mu);
    w->slot = f; /* only this thread fills the slot */
    pthread_mutex_unlock(&w->mu);
    if (w->wake_fd >= 0) {
        ssize_t n = write(w->wake_fd, "f", 1);
        (void)n;
    }
}

/* One poll of every source and a frame, on the ticker's thread; a set_interval applies from
 * the next boundary computed (ticker.h). */
static void worker_tick(void *arg, uint64_t missed)
{
    struct top_worker *w = arg;
    double iv;

    (void)missed;
    pthread_mutex_lock(&w->mu);
    iv = w->interval_s;
    pthread_mutex_unlock(&w->mu);
    for (unsigned i = 0; i < w->n_src; i++)
        poll_src(&w->src[i], iv);
    publish(w);
}

/* ---- opening ---- */

/* What the view draws of a GPU read from NVML (top_draw.c: meters, badges, graphs, the NVLink
 * part; top_proc.c: the detail screen), so that the sampler asks the driver for these and not
 * for the ~20 other readings of a cycle (encoder, BAR1, fans, energy, per-location ECC, ...):
 * about half of NVML's calls a frame. Processes, MIG and PCIe throughput are read in full with
 * their want bits; health follows the mask (mask_health). Keep in step with top_draw.c. */
static const enum gs_metric top_metrics[] = {
    GS_M_UTIL_GPU,        GS_M_MEM_USED,
    GS_M_MEM_TOTAL,       GS_M_POWER_DRAW,
    GS_M_POWER_LIMIT,     GS_M_POWER_ENFORCED_LIMIT,
    GS_M_TEMP_GPU,        GS_M_TEMP_SLOWDOWN,
    GS_M_CLOCK_SM,        GS_M_CLOCK_MEM,
    GS_M_PCIE_GEN,        GS_M_PCIE_WIDTH,
    GS_M_PCIE_TX,         GS_M_PCIE_RX,
    GS_M_THROTTLE_ACTIVE, GS_M_ECC_UNCORR_VOL,
    GS_M_REMAP_PENDING,   GS_M_XID_LAST,
    GS_M_NVLINK_LINKS,    GS_M_NVLINK_LINKS_ACTIVE,
    GS_M_NVLINK_TX,       GS_M_NVLINK_RX,
    GS_M_ECC_MODE, /* the ECC counters are read only where ECC is on */
};
static unsigned char top_need_m[GS_M__COUNT], top_need_t[GS_T__COUNT];

static const struct gs_sampler_opts *top_sampler_opts(void)
{
    static struct gs_sampler_opts so = {
        .need_metrics = top_need_m, .need_texts = top_need_t, .mask_health = true};

    for (size_t i = 0; i < sizeof top_metrics / sizeof top_metrics[0]; i++)
        top_need_m[top_metrics[i]] = 1;
    top_need_t[GS_T_NAME] = 1;
    return &so;
}

/* Opens s with o (client/source.h) under name; the local NVML source takes its first sample
 * (a missing driver is an error before the screen is taken: an agent answered already). */
static int open_src(struct src *s, const struct gs_source_opts *o, const char *name,
                    struct gs_err *err)
{
    int rc = gs_source_open(&s->source, o, err);

    if (rc != GS_OK)
        return rc;
    snprintf(s->name, sizeof s->name, "%s", name);
    switch (gs_source_kind(s->source)) {
    case GS_SOURCE_KIND_NVML:
        s->kind = TOP_SRC_NVML;
        s->static_t = -1e18;
        rc = poll_snapshot(s, err);
        if (rc == GS_OK) {
            char drv[GS_STR_LEN + 16] = "";
            if (s->snap->sys.driver_st == GS_ST_OK)
                snprintf(drv, sizeof drv, ", driver %s", s->snap->sys.driver_version);
            snprintf(s->where, sizeof s->where, "NVML direct%s", drv);
        }
        return rc;
    case GS_SOURCE_KIND_AGENT:
        s->kind = TOP_SRC_AGENT;
        snprintf(s->where, sizeof s->where, "agent %s", gs_source_where(s->source));
        return poll_snapshot(s, err); /* the answer gs_source_open got: no request */
    case GS_SOURCE_KIND_HTTP:
        s->kind = TOP_SRC_HTTP;
        snprintf(s->where, sizeof s->where, "agent %.150s", gs_source_where(s->source));
        return GS_OK; /* polled below: an unreachable host shows its error in the header */
    }
    return GS_OK;
}

static void close_src(struct src *s)
{
    if (!s->snap_borrowed)
        gs_snapshot_free(s->snap);
    gs_source_close(s->source);
    free(s->hist);
    json_decref(s->runs);
    json_decref(s->reports);
    memset(s, 0, sizeof *s);
}

int top_worker_start(struct top_worker **out, const struct top_cfg *cfg, double interval_s,
                     int wake_fd, struct gs_err *err)
{
    struct top_worker *w = calloc(1, sizeof *w);
    int64_t step = (int64_t)llround(interval_s * 1e9);
    int rc = GS_OK;

    if (!w)
        return gs_err_set(err, GS_ENOMEM, "out of memory");
    w->cfg = cfg;
    w->interval_s = interval_s;
    w->wake_fd = wake_fd;
    pthread_mutex_init(&w->mu, NULL);
    if (cfg->n_hosts) {
        const struct gs_http_opts http = {.token = cfg->token,
                                          .cacert = cfg->cacert,
                                          .insecure_tls = cfg->insecure_tls,
                                          .user_agent = "gpuscope-top",
                                          .timeout_ms = HTTP_TIMEOUT_MS};
        for (unsigned i = 0; i < cfg->n_hosts && rc == GS_OK; i++) {
            const struct gs_source_opts o = {
                .hidden_as_procs = true, .host = cfg->hosts[i], .http = &http};
            rc = open_src(&w->src[w->n_src++], &o, cfg->hosts[i], err);
        }
    } else {
        const struct gs_source_opts o = {.pick = cfg->source == TOP_SOURCE_AGENT  ? GS_SOURCE_AGENT
                                                 : cfg->source == TOP_SOURCE_NVML ? GS_SOURCE_NVML
                                                                                  : GS_SOURCE_AUTO,
                                         .hidden_as_procs = true,
                                         .sampler = top_sampler_opts(),
                                         .max_procs = 64};
        rc = open_src(&w->src[w->n_src++], &o, "local", err);
    }
    if (rc != GS_OK) {
        for (unsigned i = 0; i < w->n_src; i++)
            close_src(&w->src[i]);
        free(w);
        return rc;
    }
    for (unsigned i = 0; i < w->n_src; i++) {
        struct src *s = &w->src[i];
        if (s->snap) /* the first poll (above) counts: history and runs now */
            record_poll(s, gs_clock_real_s(), interval_s);
        else
            poll_src(s, interval_s);
    }
    publish(w);
    if (gs_ticker_start(&w->ticker, step, gs_clock_mono_ns() + step, worker_tick, w) != 0) {
        top_frame_free(w->slot);
        for (unsigned i = 0; i < w->n_src; i++)
            close_src(&w->src[i]);
        free(w);
        return gs_err_set(err, GS_ENOMEM, "pthread_create failed");
    }
    *out = w;
    return GS_OK;
}

struct top_frame *top_worker_take(struct top_worker *w)
{
    struct top_frame *f;

    pthread_mutex_lock(&w->mu);
    f = w->slot;
    w->slot = NULL;
    pthread_mutex_unlock(&w->mu);
    return f;
}

void top_worker_give_back(struct top_worker *w, struct top_frame *f)
{
    if (!f)
        return;
    pthread_mutex_lock(&w->mu);
    if (w->n_spare < sizeof w->spare / sizeof w->spare[0]) {
        w->spare[w->n_spare++] = f;
        f = NULL;
    }
    pthread_mutex_unlock(&w->mu);
    top_frame_free(f);
}

void top_worker_set_interval(struct top_worker *w, double interval_s)
{
    pthread_mutex_lock(&w->mu);
    w->interval_s = interval_s;
    pthread_mutex_unlock(&w->mu);
    gs_ticker_set_period(w->ticker, (int64_t)llround(interval_s * 1e9));
}

void top_worker_stop(struct top_worker *w)
{
    if (!w)
        return;
    gs_ticker_stop(w->ticker);
    top_frame_free(w->slot);
    for (unsigned i = 0; i < w->n_spare; i++)
        top_frame_free(w->spare[i]);
    for (unsigned i = 0; i < w->n_src; i++)
        close_src(&w->src[i]);
    pthread_mutex_destroy(&w->mu);
    free(w);
}
