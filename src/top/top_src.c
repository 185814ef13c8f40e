/*
 * `gpuscope top`'s data sources and the worker thread that polls them (top.h). A source is
 * NVML itself (one sampler kept for the whole session), the local agent's unix socket (as
 * cli/agent_client.c finds it: the visibility policy applies there by SO_PEERCRED), or an
 * agent over HTTP or HTTPS (--host: libcurl, dlopen'd only then; a Bearer token as
 * docs/security.md describes).
 * Agents also give history (/api/v1/history, fetched once so that the graphs are full from
 * the first frame) and training runs (/api/v1/runs and the report of each running one, every
 * two seconds).
 *
 * The worker polls every source each interval and publishes one struct top_frame with copies
 * of everything the screen needs, so the key loop never waits on NVML, a socket or the
 * network (PCIe throughput alone blocks ~40 ms per GPU in the driver).
 */
#include "top/top.h"

#include <curl/curl.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/ticker.h"
#include "client/agent_client.h"
#include "core/snapjson.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_sampler.h"

#define HTTP_TIMEOUT_MS 2000
#define RUNS_EVERY_S 2.0
#define STATIC_EVERY_S 60.0
#define MAX_REPORTS 4

struct src {
    enum top_src_kind kind;
    char name[128], where[160], err[512];
    char url[256];  /* http(s)://host:port, no trailing slash */
    char sock[108]; /* the agent's unix socket */
    struct gs_sampler *sampler;
    struct gs_snapshot *work; /* NVML: sampled into */
    struct gs_snapshot *snap; /* the latest good snapshot (owned) */
    struct top_hist *hist;
    unsigned hist_gpus;
    int hist_filled;
    json_t *runs, *reports;
    double runs_t, static_t, t_ok;
    CURL *curl;
    struct curl_slist *hdrs;
};

struct top_worker {
    struct gs_ticker *ticker;
    pthread_mutex_t mu; /* guards slot and interval_s */
    double interval_s;
    int wake_fd;
    unsigned seq;
    struct top_frame *slot;
    const struct top_cfg *cfg;
    unsigned n_src;
    struct src src[TOP_MAX_SRC];
};

/* ---- libcurl, loaded only when --host is given ---- */

/* The handful of libcurl calls top makes, resolved by dlopen so that a local view maps none
 * of libcurl's TLS, Kerberos and LDAP libraries (about 3.5 MiB of RSS). */
static struct {
    void *h;
    CURLcode (*global_init)(long);
    void (*global_cleanup)(void);
    CURL *(*easy_init)(void);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_perform)(CURL *);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    const char *(*easy_strerror)(CURLcode);
    void (*easy_cleanup)(CURL *);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
} C;

static int curl_load(struct gs_err *err)
{
    static const char *const names[] = {"libcurl.so.4", "libcurl-gnutls.so.4", "libcurl.so"};

    if (C.h)
        return GS_OK;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !C.h; i++)
        C.h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!C.h)
        return gs_err_set(err, GS_ENOLIB, "--host needs libcurl (libcurl.so.4): %s", dlerror());
#define SYM(f, n)                                                                                  \
    do {                                                                                           \
        *(void **)&C.f = dlsym(C.h, n);                                                            \
        if (!C.f)                                                                                  \
            return gs_err_set(err, GS_ENOLIB, "libcurl.so.4 lacks %s", n);                         \
    } while (0)
    SYM(global_init, "curl_global_init");
    SYM(global_cleanup, "curl_global_cleanup");
    SYM(easy_init, "curl_easy_init");
    SYM(easy_setopt, "curl_easy_setopt");
    SYM(easy_perform, "curl_easy_perform");
    SYM(easy_getinfo, "curl_easy_getinfo");
    SYM(easy_strerror, "curl_easy_strerror");
    SYM(easy_cleanup, "curl_easy_cleanup");
    SYM(slist_append, "curl_slist_append");
    SYM(slist_free_all, "curl_slist_free_all");
#undef SYM
    return GS_OK;
}

/* ---- HTTP ---- */

struct membuf {
    char *p;
    size_t n, cap;
};

static size_t on_body(char *data, size_t sz, size_t nm, void *ud)
{
    struct membuf *b = ud;
    size_t n = sz * nm;

    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 65536;
        char *np;
        while (cap < b->n + n + 1)
            cap *= 2;
        if (cap > (64u << 20) || !(np = realloc(b->p, cap)))
            return 0;
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
    b->p[b->n] = '\0';
    return n;
}

static int http_get(struct src *s, const char *path, char **body, size_t *len, struct gs_err *err)
{
    char url[768];
    struct membuf b = {0};
    long code = 0;
    CURLcode cc;

    snprintf(url, sizeof url, "%s%s", s->url, path);
    C.easy_setopt(s->curl, CURLOPT_URL, url);
    C.easy_setopt(s->curl, CURLOPT_WRITEDATA, &b);
    cc = C.easy_perform(s->curl);
    if (cc != CURLE_OK) {
        free(b.p);
        return gs_err_set(err, GS_EIO, "%s", C.easy_strerror(cc));
    }
    C.easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &code);
    if (code != 200) {
        free(b.p);
        return gs_err_set(err, GS_EIO, "%s answered %ld%s", path, code,
                          code == 401 || code == 403 ? " (a token: --token-file or GPUSCOPE_TOKEN)"
                                                     : "");
    }
    if (!b.p && !(b.p = calloc(1, 1)))
        return gs_err_set(err, GS_ENOMEM, "out of memory");
    *body = b.p;
    *len = b.n;
    return GS_OK;
}

static int src_get_json(struct src *s, const char *path, json_t **out, struct gs_err *err)
{
    char *body = NULL;
    size_t len = 0;
    json_error_t je;
    int rc = s->kind == TOP_SRC_HTTP
                 ? http_get(s, path, &body, &len, err)
                 : gs_agent_client_get(s->sock, path, HTTP_TIMEOUT_MS, &body, &len, err);

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
    if (h->n == TOP_HIST) {
        memmove(h->v, h->v + 1, (TOP_HIST - 1) * sizeof h->v[0]);
        h->n--;
    }
    h->v[h->n++] = v;
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
            h->n = 0;
            for (unsigned j = 0; j < last; j++)
                hist_push(h, v[j]);
        }
    }
}

/* ---- snapshots ---- */

static struct gs_snapshot *snap_dup(const struct gs_snapshot *s)
{
    struct gs_snapshot *d = NULL;
    struct gs_err e = {0};

    if (gs_snapshot_new(&d, s->n_gpus, s->n_procs ? s->n_procs : 1, &e) != GS_OK)
        return NULL;
    d->sys = s->sys;
    d->t_real = s->t_real;
    d->t_mono_ns = s->t_mono_ns;
    if (s->n_gpus)
        memcpy(d->gpus, s->gpus, s->n_gpus * sizeof *s->gpus);
    if (s->n_procs)
        memcpy(d->procs, s->procs, s->n_procs * sizeof *s->procs);
    d->n_procs = s->n_procs;
    return d;
}

static int poll_snapshot(struct src *s, struct gs_err *err)
{
    if (s->kind == TOP_SRC_NVML) {
        unsigned want = GS_WANT_PROCS | GS_WANT_PROC_HOST | GS_WANT_PROC_UTIL | GS_WANT_MIG |
                        GS_WANT_HEALTH | GS_WANT_PCIE_TPUT;
        double t = gs_clock_real_s();
        int rc;
        if (t - s->static_t >= STATIC_EVERY_S) {
            want |= GS_WANT_STATIC;
            s->static_t = t;
        }
        rc = gs_sampler_sample(s->sampler, s->work, want, err);
        if (rc != GS_OK)
            return rc;
        if (!s->work->sys.hostname[0])
            gethostname(s->work->sys.hostname, sizeof s->work->sys.hostname - 1);
        if (s->work->t_real <= 0)
            s->work->t_real = t;
        gs_snapshot_free(s->snap);
        s->snap = snap_dup(s->work);
        return s->snap ? GS_OK : gs_err_set(err, GS_ENOMEM, "out of memory");
    } else {
        json_t *doc = NULL;
        struct gs_snapshot *snap = NULL;
        int rc = src_get_json(s, "/api/v1/snapshot", &doc, err);
        if (rc != GS_OK)
            return rc;
        rc = gs_snapjson_decode(doc, true, &snap, err);
        json_decref(doc);
        if (rc != GS_OK)
            return rc;
        gs_snapshot_free(s->snap);
        s->snap = snap;
        return GS_OK;
    }
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

static struct top_frame *build_frame(struct top_worker *w)
{
    struct top_frame *f = calloc(1, sizeof *f);

    if (!f)
        return NULL;
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
        if (s->snap) {
            d->snap = snap_dup(s->snap);
            if (d->snap && s->hist && s->hist_gpus == s->snap->n_gpus) {
                size_t n = (size_t)s->hist_gpus * TOP_G__N;
                d->hist = malloc(n * sizeof *d->hist);
                if (d->hist)
                    memcpy(d->hist, s->hist, n * sizeof *d->hist);
            }
            if (!d->hist) {
                gs_snapshot_free(d->snap);
                d->snap = NULL;
            }
        }
        d->runs = s->runs ? json_deep_copy(s->runs) : NULL;
        d->reports = s->reports ? json_deep_copy(s->reports) : NULL;
    }
    return f;
}

static void publish(struct top_worker *w)
{
    struct top_frame *f = build_frame(w), *old;

    if (!f)
        return;
    pthread_mutex_lock(&w->mu);
    old = w->slot;
    w->slot = f;
    pthread_mutex_unlock(&w->mu);
    top_frame_free(old);
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

static int open_http(struct src *s, const char *host, const struct top_cfg *cfg, struct gs_err *err)
{
    size_t n;

    s->kind = TOP_SRC_HTTP;
    char url[sizeof s->url];

    snprintf(s->name, sizeof s->name, "%s", host);
    if (strncmp(host, "http://", 7) == 0 || strncmp(host, "https://", 8) == 0)
        snprintf(url, sizeof url, "%s", host);
    else
        snprintf(url, sizeof url, "http://%s", host);
    n = strlen(url);
    while (n > 0 && url[n - 1] == '/')
        url[--n] = '\0';
    memcpy(s->url, url, sizeof url);
    snprintf(s->where, sizeof s->where, "agent %.150s", url);
    s->curl = C.easy_init();
    if (!s->curl)
        return gs_err_set(err, GS_ENOMEM, "%s: curl_easy_init failed", host);
    C.easy_setopt(s->curl, CURLOPT_WRITEFUNCTION, on_body);
    C.easy_setopt(s->curl, CURLOPT_TIMEOUT_MS, (long)HTTP_TIMEOUT_MS);
    C.easy_setopt(s->curl, CURLOPT_CONNECTTIMEOUT_MS, (long)HTTP_TIMEOUT_MS);
    C.easy_setopt(s->curl, CURLOPT_NOSIGNAL, 1L);
    C.easy_setopt(s->curl, CURLOPT_ACCEPT_ENCODING, "");
    C.easy_setopt(s->curl, CURLOPT_PROTOCOLS_STR, "http,https");
    C.easy_setopt(s->curl, CURLOPT_USERAGENT, "gpuscope-top");
    if (cfg->cacert)
        C.easy_setopt(s->curl, CURLOPT_CAINFO, cfg->cacert);
    if (cfg->insecure_tls) {
        C.easy_setopt(s->curl, CURLOPT_SSL_VERIFYPEER, 0L);
        C.easy_setopt(s->curl, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (cfg->token) {
        char h[600];
        snprintf(h, sizeof h, "Authorization: Bearer %s", cfg->token);
        s->hdrs = C.slist_append(NULL, h);
        C.easy_setopt(s->curl, CURLOPT_HTTPHEADER, s->hdrs);
    }
    return GS_OK;
}

static int open_nvml(struct src *s, struct gs_err *err)
{
    int rc = gs_sampler_open(&s->sampler, NULL, err);

    s->kind = TOP_SRC_NVML;
    snprintf(s->name, sizeof s->name, "local");
    if (rc != GS_OK)
        return rc;
    rc = gs_snapshot_new(&s->work, gs_sampler_gpu_count(s->sampler), 64, err);
    if (rc != GS_OK)
        return rc;
    s->static_t = -1e18;
    return GS_OK;
}

static void close_src(struct src *s)
{
    gs_sampler_close(s->sampler);
    gs_snapshot_free(s->work);
    gs_snapshot_free(s->snap);
    free(s->hist);
    json_decref(s->runs);
    json_decref(s->reports);
    if (s->curl)
        C.easy_cleanup(s->curl);
    if (s->hdrs)
        C.slist_free_all(s->hdrs);
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
        rc = curl_load(err);
        if (rc == GS_OK)
            C.global_init(CURL_GLOBAL_DEFAULT);
        for (unsigned i = 0; i < cfg->n_hosts && rc == GS_OK; i++)
            rc = open_http(&w->src[w->n_src++], cfg->hosts[i], cfg, err);
    } else {
        struct src *s = &w->src[w->n_src++];
        char sock[108];
        int have_sock = gs_agent_client_socket(sock, sizeof sock);
        if (cfg->source != TOP_SOURCE_NVML && have_sock) {
            struct gs_err e = {0};
            s->kind = TOP_SRC_AGENT;
            snprintf(s->sock, sizeof s->sock, "%s", sock);
            snprintf(s->name, sizeof s->name, "local");
            snprintf(s->where, sizeof s->where, "agent %s", sock);
            if (poll_snapshot(s, &e) != GS_OK) {
                if (cfg->source == TOP_SOURCE_AGENT)
                    rc = gs_err_set(err, GS_EIO, "%s", e.msg);
                else
                    memset(s, 0, sizeof *s); /* no agent answers: NVML below */
            }
        } else if (cfg->source == TOP_SOURCE_AGENT) {
            rc = gs_err_set(err, GS_EIO,
                            "agent: no socket to try (GPUSCOPE_HTTP_SOCKET, "
                            "/run/gpuscope/agent.sock, $XDG_RUNTIME_DIR)");
        }
        if (rc == GS_OK && s->kind != TOP_SRC_AGENT) {
            rc = open_nvml(s, err);
            if (rc == GS_OK)
                rc = poll_snapshot(s, err);
            if (rc == GS_OK) {
                char drv[GS_STR_LEN + 16] = "";
                if (s->snap->sys.driver_st == GS_ST_OK)
                    snprintf(drv, sizeof drv, ", driver %s", s->snap->sys.driver_version);
                snprintf(s->where, sizeof s->where, "NVML direct%s", drv);
            }
        }
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
    for (unsigned i = 0; i < w->n_src; i++)
        close_src(&w->src[i]);
    if (w->cfg->n_hosts && C.h)
        C.global_cleanup();
    pthread_mutex_destroy(&w->mu);
    free(w);
}
