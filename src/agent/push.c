/*
 * The push sinks (push.h): line-protocol rendering, and the pusher thread with its libcurl
 * handle, its InfluxDB batch and pending buffer, and the retry backoff of each sink.
 *
 * The pusher is a bounded-queue worker (worker.h): the sampler's offers are copied into its
 * queue and never wait on the network. One lock, lock, guards the published stats; the pusher
 * holds it for a few instructions only, never across a request, so the /metrics render (stats)
 * never waits either. Everything else (the curl handle, the batch, the pending ring, the
 * backoff state) is the pusher thread's own.
 */
#include "agent/push.h"

#include <curl/curl.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/log.h"
#include "agent/outbound.h"
#include "agent/worker.h"
#include "base/clock.h"
#include "gpuscope/gs_err.h"

#define QUEUE_CAP 8
#define TOKEN_MAX 1024

static const char *const sink_names[GS_PUSH__SINKS] = {"influxdb", "pushgateway"};

/* Line protocol escaping: tag keys, tag values and field keys escape comma, equals sign and
 * space; a backslash is doubled so a value ending in one cannot escape what follows. Newlines
 * cannot be escaped at all and become spaces (escaped). */
static void put_escaped(struct gs_buf *b, const char *s)
{
    for (; *s; s++) {
        char c = *s;
        if (c == '\n' || c == '\r')
            c = ' ';
        if (c == ',' || c == '=' || c == ' ' || c == '\\')
            gs_buf_put(b, "\\", 1);
        gs_buf_put(b, &c, 1);
    }
}

static void put_tag(struct gs_buf *b, const char *key, const char *value)
{
    if (!value || !value[0])
        return; /* line protocol has no empty tag values */
    gs_buf_put(b, ",", 1);
    gs_buf_put(b, key, strlen(key));
    gs_buf_put(b, "=", 1);
    put_escaped(b, value);
}

int gs_push_render_influx(struct gs_buf *b, const struct gs_snapshot *snap)
{
    /* Whole seconds and the rounded fraction apart: t_real * 1e9 alone loses the last bits. */
    double whole = floor(snap->t_real);
    long long t_ns = (long long)whole * 1000000000LL + llround((snap->t_real - whole) * 1e9);

    for (unsigned i = 0; i < snap->n_gpus; i++) {
        const struct gs_gpu *g = &snap->gpus[i];
        char idx[16];
        size_t line_start = b->len;
        unsigned fields = 0;

        snprintf(idx, sizeof idx, "%u", g->index);
        gs_buf_put(b, "gpuscope_gpu", 12);
        /* Tags in key order, as InfluxDB prefers. */
        put_tag(b, "gpu", idx);
        put_tag(b, "hostname", snap->sys.hostname);
        put_tag(b, "uuid", gs_gpu_has_text(g, GS_T_UUID) ? g->text[GS_T_UUID] : NULL);
        for (int m = 0; m < GS_M__COUNT; m++) {
            if (!gs_gpu_has(g, (enum gs_metric)m) || !isfinite(g->v[m]))
                continue;
            gs_buf_put(b, fields ? "," : " ", 1);
            put_escaped(b, gs_metric_name((enum gs_metric)m));
            gs_buf_printf(b, "=%.17g", g->v[m]);
            fields++;
        }
        if (!fields) {
            if (gs_buf_status(b) == GS_BUF_OK) {
                b->len = line_start;
                if (b->data)
                    b->data[b->len] = '\0';
            }
            continue;
        }
        gs_buf_printf(b, " %lld\n", t_ns);
    }
    return gs_buf_status(b) != GS_BUF_OK ? GS_ENOMEM : GS_OK;
}

/* ---- URLs ---- */

static char *url_escape(CURL *c, const char *s)
{
    return gs_curl()->easy_escape(c, s, (int)strlen(s));
}

char *gs_push_influx_write_url(const struct gs_push_config *c)
{
    const struct gs_curl_api *cu = gs_curl_load(NULL) == GS_OK ? gs_curl() : NULL;
    CURL *h = cu ? cu->easy_init() : NULL;
    char *a = NULL, *bkt = NULL, *out = NULL;
    size_t base_len = strlen(c->influx_url);
    size_t n;

    if (!h)
        return NULL;
    while (base_len > 0 && c->influx_url[base_len - 1] == '/')
        base_len--;
    if (c->influx_version == GS_INFLUX_V2) {
        a = url_escape(h, c->influx_org);
        bkt = url_escape(h, c->influx_bucket);
    } else {
        a = url_escape(h, c->influx_db);
    }
    if (a && (c->influx_version != GS_INFLUX_V2 || bkt)) {
        n = base_len + strlen(a) + (bkt ? strlen(bkt) : 0) + 64;
        out = malloc(n);
        if (out) {
            if (c->influx_version == GS_INFLUX_V2)
                snprintf(out, n, "%.*s/api/v2/write?org=%s&bucket=%s&precision=ns", (int)base_len,
                         c->influx_url, a, bkt);
            else
                snprintf(out, n, "%.*s/write?db=%s&precision=ns", (int)base_len, c->influx_url, a);
        }
    }
    cu->free_fn(a);
    cu->free_fn(bkt);
    cu->easy_cleanup(h);
    return out;
}

int gs_push_enabled(const struct gs_push_config *c)
{
    return c->influx_url[0] || c->pushgateway_url[0];
}

void gs_push_render_self(struct gs_buf *b, const struct gs_push_stats *s)
{
    static const struct {
        const char *name, *help;
        size_t off;
    } fam[] = {
        {"gpuscope_push_total", "Push requests the target accepted, per sink.",
         offsetof(struct gs_push_sink_stats, pushes)},
        {"gpuscope_push_failed_total",
         "Push requests that failed (no connection, timeout, non-2xx), per sink.",
         offsetof(struct gs_push_sink_stats, failed)},
        {"gpuscope_push_dropped_total",
         "Batches (influxdb) or bodies (pushgateway) discarded unsent: buffer full or replaced.",
         offsetof(struct gs_push_sink_stats, dropped)},
    };
    int any = 0;

    for (int k = 0; k < GS_PUSH__SINKS; k++)
        any |= s->sink[k].enabled;
    if (!any)
        return;
    for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++) {
        gs_buf_printf(b, "# HELP %s %s\n# TYPE %s counter\n", fam[f].name, fam[f].help,
                      fam[f].name);
        for (int k = 0; k < GS_PUSH__SINKS; k++) {
            uint64_t v;
            if (!s->sink[k].enabled)
                continue;
            memcpy(&v, (const char *)&s->sink[k] + fam[f].off, sizeof v);
            gs_buf_printf(b, "%s{sink=\"%s\"} %llu\n", fam[f].name, sink_names[k],
                          (unsigned long long)v);
        }
    }
    gs_buf_printf(b,
                  "# HELP gpuscope_push_snapshots_dropped_total Snapshots the pusher was too far "
                  "behind to take.\n# TYPE gpuscope_push_snapshots_dropped_total counter\n"
                  "gpuscope_push_snapshots_dropped_total %llu\n",
                  (unsigned long long)s->queue_dropped);
}

/* ---- the pusher ---- */

struct queued {
    const struct gs_snapshot *snap;
    const char *prom;
    size_t prom_len;
    gs_push_release_fn release;
    void *cls;
};

struct batch {
    char *data;
    size_t len;
};

struct gs_push {
    pthread_mutex_t lock; /* pub */
    struct gs_push_stats pub;
    struct gs_worker *worker; /* the queue and the pusher thread */
    double next_push;         /* the pusher's own (CLOCK_MONOTONIC s) */

    /* The pusher thread's own. */
    struct gs_push_config cfg;
    char token_header[TOKEN_MAX + 32];
    char *influx_url;
    char *pgw_url;
    CURL *curl;
    struct gs_buf cur;     /* the InfluxDB batch being filled */
    struct batch *pending; /* a ring of cap batches */
    unsigned cap;
    unsigned p_head, p_n;
    size_t p_bytes;
    struct gs_buf pgw; /* the newest /metrics text, unsent */
    int pgw_dirty;     /* pgw holds a body not yet accepted */
    int pgw_unsent;    /* ... and a push tick passed without sending it */
    struct gs_backoff st[GS_PUSH__SINKS];
    int started;
};

static int64_t pusher_run(void *ctx, void *items, unsigned n, bool stopping);

static void drop_queued(void *ctx, void *item)
{
    const struct queued *e = item;

    (void)ctx;
    if (e->release)
        e->release(e->cls);
}

static const struct gs_worker_ops pusher_ops = {
    .name = "push",
    .item_size = sizeof(struct queued),
    .cap = QUEUE_CAP,
    .run = pusher_run,
    .drop = drop_queued,
};

static void count(struct gs_push *p, int sink, uint64_t ok, uint64_t failed, uint64_t dropped)
{
    pthread_mutex_lock(&p->lock);
    p->pub.sink[sink].pushes += ok;
    p->pub.sink[sink].failed += failed;
    p->pub.sink[sink].dropped += dropped;
    pthread_mutex_unlock(&p->lock);
}

static int read_token(const char *path, char *out, size_t len, struct gs_err *err)
{
    FILE *f = fopen(path, "r");
    size_t n;

    if (!f)
        return gs_err_set(err, GS_EIO, "push: influx_token_file %s: %s", path, strerror(errno));
    n = fread(out, 1, len - 1, f);
    fclose(f);
    out[n] = '\0';
    while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == '\r' || out[n - 1] == ' '))
        out[--n] = '\0';
    if (n == 0 || n >= len - 1 || strpbrk(out, "\r\n"))
        return gs_err_set(err, GS_EINVAL, "push: influx_token_file %s: %s", path,
                          n == 0 ? "empty" : "not one line of at most 1022 bytes");
    return GS_OK;
}

static int pgw_url(struct gs_push *p, const char *instance, struct gs_err *err)
{
    const char *base = p->cfg.pushgateway_url;
    size_t base_len = strlen(base);
    char *job = url_escape(p->curl, p->cfg.pushgateway_job);
    char *inst = url_escape(p->curl, instance && instance[0] ? instance : "unknown");
    size_t n;

    while (base_len > 0 && base[base_len - 1] == '/')
        base_len--;
    if (job && inst) {
        n = base_len + strlen(job) + strlen(inst) + 32;
        p->pgw_url = malloc(n);
        if (p->pgw_url)
            snprintf(p->pgw_url, n, "%.*s/metrics/job/%s/instance/%s", (int)base_len, base, job,
                     inst);
    }
    gs_curl()->free_fn(job);
    gs_curl()->free_fn(inst);
    return p->pgw_url ? GS_OK : gs_err_set(err, GS_ENOMEM, "push: out of memory");
}

static void push_free(struct gs_push *p)
{
    gs_worker_close(p->worker); /* the pusher's last run, or the queued references back */
    free(p->influx_url);
    free(p->pgw_url);
    if (p->curl)
        gs_curl()->easy_cleanup(p->curl);
    gs_buf_free(&p->cur);
    gs_buf_free(&p->pgw);
    for (; p->p_n > 0; p->p_n--, p->p_head = (p->p_head + 1) % p->cap)
        free(p->pending[p->p_head].data);
    free(p->pending);
    explicit_bzero(p->token_header, sizeof p->token_header);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

int gs_push_open(struct gs_push **out, const struct gs_push_config *c, const char *instance,
                 struct gs_err *err)
{
    struct gs_push *p;
    int rc = GS_OK;

    if (c->influx_url[0]) {
        if (c->influx_version == GS_INFLUX_V2 &&
            (!c->influx_org[0] || !c->influx_bucket[0] || !c->influx_token_file[0]))
            return gs_err_set(err, GS_EINVAL,
                              "push: influx_version 2 needs influx_org, influx_bucket and "
                              "influx_token_file");
        if (c->influx_version != GS_INFLUX_V2 && !c->influx_db[0])
            return gs_err_set(err, GS_EINVAL, "push: influx_version 1 needs influx_db");
    }
    if (c->pushgateway_url[0] && !c->pushgateway_job[0])
        return gs_err_set(err, GS_EINVAL, "push: pushgateway_job is empty");
    /* Loaded only now, when a sink is configured; missing: a config-time error. */
    rc = gs_curl_load(err);
    if (rc == GS_OK && c->influx_url[0] && c->influx_gzip)
        rc = gs_zlib_load(err);
    if (rc != GS_OK)
        return rc;
    p = calloc(1, sizeof *p);
    if (!p)
        return gs_err_set(err, GS_ENOMEM, "push: out of memory");
    p->cfg = *c;
    pthread_mutex_init(&p->lock, NULL);
    rc = gs_worker_new(&p->worker, &pusher_ops, p, err);
    if (rc != GS_OK) {
        pthread_mutex_destroy(&p->lock);
        free(p);
        return rc;
    }
    p->pub.sink[GS_PUSH_INFLUX].enabled = c->influx_url[0] != '\0';
    p->pub.sink[GS_PUSH_PUSHGATEWAY].enabled = c->pushgateway_url[0] != '\0';
    p->cap = c->buffer_batches ? c->buffer_batches : GS_PUSH_PENDING_MAX;
    p->pending = calloc(p->cap, sizeof *p->pending);
    p->curl = gs_curl()->easy_init();
    if (!p->curl || !p->pending)
        rc = gs_err_set(err, GS_ENOMEM, "push: curl_easy_init failed");
    if (rc == GS_OK && c->influx_url[0] && c->influx_token_file[0]) {
        char token[TOKEN_MAX];
        rc = read_token(c->influx_token_file, token, sizeof token, err);
        if (rc == GS_OK)
            snprintf(p->token_header, sizeof p->token_header, "Authorization: Token %s", token);
        explicit_bzero(token, sizeof token);
    }
    if (rc == GS_OK && c->influx_url[0] && !(p->influx_url = gs_push_influx_write_url(c)))
        rc = gs_err_set(err, GS_ENOMEM, "push: out of memory");
    if (rc == GS_OK && c->pushgateway_url[0])
        rc = pgw_url(p, instance, err);
    if (rc != GS_OK) {
        push_free(p);
        return rc;
    }
    *out = p;
    return GS_OK;
}

int gs_push_offer(struct gs_push *p, const struct gs_snapshot *snap, const char *prom,
                  size_t prom_len, gs_push_release_fn release, void *cls)
{
    struct queued e = {snap, prom, prom_len, release, cls};

    return gs_worker_offer(p->worker, &e);
}

struct gs_push_stats gs_push_stats(struct gs_push *p)
{
    struct gs_push_stats s;

    pthread_mutex_lock(&p->lock);
    s = p->pub;
    pthread_mutex_unlock(&p->lock);
    s.queue_dropped += gs_worker_dropped(p->worker);
    return s;
}

/* Takes one snapshot: its lines join the batch, its /metrics text replaces the unsent one. */
static void take(struct gs_push *p, const struct queued *e)
{
    if (p->cfg.influx_url[0] && gs_push_render_influx(&p->cur, e->snap) != GS_OK) {
        gs_log(GS_LOG_WARN, "push: influxdb batch too large or out of memory; batch dropped");
        gs_buf_reset(&p->cur);
        count(p, GS_PUSH_INFLUX, 0, 0, 1);
    }
    if (p->cfg.pushgateway_url[0] && e->prom) {
        if (p->pgw_unsent && p->pgw_dirty)
            count(p, GS_PUSH_PUSHGATEWAY, 0, 0, 1);
        p->pgw_unsent = 0;
        gs_buf_reset(&p->pgw);
        gs_buf_put(&p->pgw, e->prom, e->prom_len);
        p->pgw_dirty = gs_buf_status(&p->pgw) == GS_BUF_OK;
    }
    if (e->release)
        e->release(e->cls);
}

/* Moves the current batch to the pending ring, dropping the oldest to stay in bounds. */
static void seal_batch(struct gs_push *p)
{
    struct batch b;
    uint64_t dropped = 0;

    if (p->cur.len == 0)
        return;
    b.data = p->cur.data;
    b.len = p->cur.len;
    memset(&p->cur, 0, sizeof p->cur);
    while (p->p_n > 0 && (p->p_n >= p->cap || p->p_bytes + b.len > GS_PUSH_PENDING_BYTES)) {
        struct batch *old = &p->pending[p->p_head];
        p->p_bytes -= old->len;
        free(old->data);
        p->p_head = (p->p_head + 1) % p->cap;
        p->p_n--;
        dropped++;
    }
    p->pending[(p->p_head + p->p_n) % p->cap] = b;
    p->p_n++;
    p->p_bytes += b.len;
    if (dropped)
        count(p, GS_PUSH_INFLUX, 0, 0, dropped);
}

/* gzip (RFC 1952) of [data, data+len) into a new buffer; NULL on failure. */
static unsigned char *gzip_body(const char *data, size_t len, size_t *out_len)
{
    return gs_gzip(data, len, Z_DEFAULT_COMPRESSION, out_len); /* gs_push_open loaded zlib */
}

/* One request; returns 1 on a 2xx answer. why gets the reason of a failure. */
static int request(struct gs_push *p, int sink, const char *url, const char *body, size_t len,
                   char *why, size_t why_len)
{
    const struct gs_curl_api *cu = gs_curl();
    struct curl_slist *h = NULL;
    unsigned char *gz = NULL;
    const char *method = NULL;
    int ok;

    if (sink == GS_PUSH_INFLUX) {
        h = cu->slist_append(h, "Content-Type: text/plain; charset=utf-8");
        if (p->token_header[0])
            h = cu->slist_append(h, p->token_header);
        if (p->cfg.influx_gzip) {
            size_t gz_len;
            gz = gzip_body(body, len, &gz_len);
            if (gz) {
                h = cu->slist_append(h, "Content-Encoding: gzip");
                body = (const char *)gz;
                len = gz_len;
            }
        }
    } else {
        h = cu->slist_append(h, "Content-Type: text/plain; version=0.0.4; charset=utf-8");
        method = "PUT";
    }
    ok = gs_outbound_send(p->curl, method, url, h, body, len, why, why_len);
    cu->slist_free_all(h);
    free(gz);
    return ok;
}

/* Counts and logs one result, and moves the sink's backoff. */
static void settle(struct gs_push *p, int sink, int ok, const char *why)
{
    struct gs_backoff *s = &p->st[sink];

    count(p, sink, ok ? 1 : 0, ok ? 0 : 1, 0);
    if (ok) {
        if (gs_backoff_ok(s))
            gs_log(GS_LOG_INFO, "push: %s recovered", sink_names[sink]);
    } else if (gs_backoff_fail(s, gs_clock_mono_s())) {
        gs_log(GS_LOG_WARN, "push: %s failed: %s; retrying with backoff, buffering",
               sink_names[sink], why);
    } else {
        gs_log(GS_LOG_DEBUG, "push: %s still failing: %s (next try in %gs)", sink_names[sink], why,
               s->delay_s);
    }
}

/* Sends what is due: pending InfluxDB batches oldest first until one fails, then the newest
 * /metrics text. force ignores the backoff (the last try at close). */
static void send_due(struct gs_push *p, int force)
{
    char why[CURL_ERROR_SIZE + 32];
    double now = gs_clock_mono_s();

    if (p->cfg.influx_url[0] && (force || now >= p->st[GS_PUSH_INFLUX].retry_at)) {
        while (p->p_n > 0) {
            struct batch *b = &p->pending[p->p_head];
            int ok = request(p, GS_PUSH_INFLUX, p->influx_url, b->data, b->len, why, sizeof why);
            settle(p, GS_PUSH_INFLUX, ok, why);
            if (!ok)
                break;
            p->p_bytes -= b->len;
            free(b->data);
            p->p_head = (p->p_head + 1) % p->cap;
            p->p_n--;
        }
    }
    if (p->pgw_dirty && (force || now >= p->st[GS_PUSH_PUSHGATEWAY].retry_at)) {
        int ok =
            request(p, GS_PUSH_PUSHGATEWAY, p->pgw_url, p->pgw.data, p->pgw.len, why, sizeof why);
        settle(p, GS_PUSH_PUSHGATEWAY, ok, why);
        if (ok)
            p->pgw_dirty = 0;
    }
}

/* The pusher's body (worker.h): each snapshot taken, and every push_interval (and at stop)
 * the batch sealed and what is due sent. */
static int64_t pusher_run(void *ctx, void *items, unsigned n, bool stopping)
{
    struct gs_push *p = ctx;
    const struct queued *batch = items;
    double interval = p->cfg.interval_s > 0 ? p->cfg.interval_s : 10;

    for (unsigned i = 0; i < n; i++)
        take(p, &batch[i]);
    if (stopping || gs_clock_mono_s() >= p->next_push) {
        seal_batch(p);
        send_due(p, stopping);
        p->pgw_unsent = p->pgw_dirty; /* the next take replaces it: dropped */
        p->next_push = gs_clock_mono_s() + interval;
    }
    return (int64_t)(p->next_push * 1e9);
}

int gs_push_start(struct gs_push *p, struct gs_err *err)
{
    int rc;

    p->next_push = gs_clock_mono_s() + (p->cfg.interval_s > 0 ? p->cfg.interval_s : 10);
    rc = gs_worker_start(p->worker, (int64_t)(p->next_push * 1e9), err);
    if (rc != GS_OK)
        return rc;
    p->started = 1;
    if (p->cfg.influx_url[0])
        gs_log(GS_LOG_INFO, "push: influxdb v%d %s every %gs%s",
               p->cfg.influx_version == GS_INFLUX_V2 ? 2 : 1, p->influx_url, p->cfg.interval_s,
               p->cfg.influx_gzip ? ", gzip" : "");
    if (p->cfg.pushgateway_url[0])
        gs_log(GS_LOG_INFO, "push: pushgateway %s every %gs", p->pgw_url, p->cfg.interval_s);
    return GS_OK;
}

void gs_push_close(struct gs_push *p)
{
    if (!p)
        return;
    push_free(p); /* the pusher's last run first: what is due is sent */
}
