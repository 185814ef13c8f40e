/*
 * parse.c - reads one PyTorch profiler trace into the compact form of trace.h.
 *
 * The file goes through zlib (gzread reads gzip and plain files alike) in 64 KiB chunks into
 * yajl's event parser; the callbacks follow a small stack of roles (top object, traceEvents,
 * one event, its args, distributedInfo, anything else skipped) and fill one event's fields.
 * When an event's object closes it is either kept as a compact record (GPU activity, a host
 * launch with a correlation id, a ProfilerStep, a CPU op total by name) or dropped, so memory
 * grows with the number of GPU activities and launches, never with the JSON. A gzip file is
 * inflated on a second thread into a ring of four chunks, so inflating and parsing overlap.
 */
#include "trace/trace.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>
#include <zlib.h>

#include "base/hash.h"

#define TRACE_MAX_DEPTH 64
#define TRACE_MAX_NAME (1u << 20) /* longer names are cut here */
#define TRACE_CHUNK 65536
#define TRACE_MAX_TS 1e17  /* microseconds: ~3000 years past the epoch */
#define TRACE_MAX_DUR 1e12 /* microseconds: ~11 days; keeps every sum inside int64 */

/* Interned names: an arena of NUL-terminated strings and an open-addressing index. */
struct gs_trace_names {
    char *arena;
    size_t len, cap;
    size_t *off; /* offset of name id */
    uint32_t n, cap_off;
    uint32_t *slot;  /* id + 1, 0 = empty */
    uint32_t n_slot; /* power of two */
    uint32_t *cpuop; /* name id -> cpuop index + 1 */
};

_Static_assert(sizeof(struct gs_trace_gpu) == 40, "the GPU record is 40 bytes (docs/trace.md)");
_Static_assert(sizeof(struct gs_trace_launch) == 12, "the launch record is 12 bytes");

enum role { R_TOP, R_EVENTS, R_EVENT, R_ARGS, R_DINFO, R_SKIP };

enum key {
    K_NONE,
    K_TRACE_EVENTS,
    K_DINFO,
    K_RANK,
    K_NAME,
    K_PH,
    K_CAT,
    K_TS,
    K_DUR,
    K_ARGS,
    K_STREAM,
    K_CORR,
    K_BYTES,
};

enum cat { C_NONE, C_TRACE, C_CPU_OP, C_SYNC, C_OTHER };

struct ev {
    int have_ts, have_dur, have_stream, have_corr;
    double ts, dur;
    int64_t stream, corr, bytes;
    enum cat cat;
    char *name;
    size_t name_len, name_cap;
};

struct parser {
    struct gs_trace *t;
    struct gs_err *err;
    int depth;
    enum role role[TRACE_MAX_DEPTH + 1];
    enum key key[TRACE_MAX_DEPTH + 1];
    int saw_events, saw_top;
    struct ev ev;
    char why[160]; /* a callback's reason for stopping */
};

static int names_grow_index(struct gs_trace_names *nm)
{
    uint32_t ns = nm->n_slot ? nm->n_slot * 2 : 1024;
    uint32_t *slot = calloc(ns, sizeof *slot);

    if (!slot)
        return -1;
    for (uint32_t i = 0; i < nm->n; i++) {
        const char *s = nm->arena + nm->off[i];
        uint32_t h = gs_hash_fnv1a(s, strlen(s)) & (ns - 1);

        while (slot[h])
            h = (h + 1) & (ns - 1);
        slot[h] = i + 1;
    }
    free(nm->slot);
    nm->slot = slot;
    nm->n_slot = ns;
    return 0;
}

/* The id of name s[0..n), added when new; -1 when out of memory. */
static int64_t names_intern(struct gs_trace_names *nm, const char *s, size_t n)
{
    uint32_t h;

    if ((uint64_t)(nm->n + 1) * 2 > nm->n_slot && names_grow_index(nm) != 0)
        return -1;
    h = gs_hash_fnv1a(s, n) & (nm->n_slot - 1);
    while (nm->slot[h]) {
        const char *o = nm->arena + nm->off[nm->slot[h] - 1];

        if (strncmp(o, s, n) == 0 && o[n] == '\0')
            return nm->slot[h] - 1;
        h = (h + 1) & (nm->n_slot - 1);
    }
    if (nm->len + n + 1 > nm->cap) {
        size_t c = nm->cap ? nm->cap : 65536;
        char *a;

        while (c < nm->len + n + 1)
            c *= 2;
        a = realloc(nm->arena, c);
        if (!a)
            return -1;
        nm->arena = a;
        nm->cap = c;
    }
    if (nm->n == nm->cap_off) {
        uint32_t c = nm->cap_off ? nm->cap_off * 2 : 256;
        size_t *o = realloc(nm->off, c * sizeof *o);
        uint32_t *cp = realloc(nm->cpuop, c * sizeof *cp);

        if (o)
            nm->off = o;
        if (cp)
            nm->cpuop = cp;
        if (!o || !cp)
            return -1;
        nm->cap_off = c;
    }
    memcpy(nm->arena + nm->len, s, n);
    nm->arena[nm->len + n] = '\0';
    nm->off[nm->n] = nm->len;
    nm->cpuop[nm->n] = 0;
    nm->len += n + 1;
    nm->slot[h] = nm->n + 1;
    return nm->n++;
}

const char *gs_trace_name(const struct gs_trace *t, uint32_t id)
{
    if (!t->names || id >= t->names->n)
        return "";
    return t->names->arena + t->names->off[id];
}

/* Grows an array of elements of size sz to hold one more; 0 on success. */
static int grow(void **p, size_t *cap, size_t n, size_t sz)
{
    size_t c;
    void *q;

    if (n < *cap)
        return 0;
    c = *cap ? *cap * 2 : 1024;
    q = realloc(*p, c * sz);
    if (!q)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}

static int stop(struct parser *p, const char *why)
{
    snprintf(p->why, sizeof p->why, "%s", why);
    return 0;
}

static enum key key_of(enum role r, const char *s, size_t n)
{
#define IS(lit) (n == sizeof(lit) - 1 && memcmp(s, lit, n) == 0)
    switch (r) {
    case R_TOP:
        if (IS("traceEvents"))
            return K_TRACE_EVENTS;
        if (IS("distributedInfo"))
            return K_DINFO;
        break;
    case R_DINFO:
        if (IS("rank"))
            return K_RANK;
        break;
    case R_EVENT:
        if (IS("name"))
            return K_NAME;
        if (IS("ph"))
            return K_PH;
        if (IS("cat"))
            return K_CAT;
        if (IS("ts"))
            return K_TS;
        if (IS("dur"))
            return K_DUR;
        if (IS("args"))
            return K_ARGS;
        break;
    case R_ARGS:
        if (IS("stream"))
            return K_STREAM;
        if (IS("correlation"))
            return K_CORR;
        if (IS("bytes"))
            return K_BYTES;
        break;
    default:
        break;
    }
    return K_NONE;
#undef IS
}

static enum role cur_role(const struct parser *p)
{
    return p->depth > 0 ? p->role[p->depth] : R_SKIP;
}

static enum key cur_key(const struct parser *p)
{
    return p->depth > 0 ? p->key[p->depth] : K_NONE;
}

static int push(struct parser *p, int is_map)
{
    enum role parent = cur_role(p);
    enum key k = cur_key(p);
    enum role r = R_SKIP;

    if (p->depth >= TRACE_MAX_DEPTH)
        return stop(p, "nesting deeper than 64 levels");
    if (p->depth == 0) {
        p->saw_top = 1;
        if (is_map) {
            r = R_TOP;
        } else {
            r = R_EVENTS; /* legacy: the document is the event array */
            p->t->legacy = 1;
            p->saw_events = 1;
        }
    } else if (parent == R_TOP && k == K_TRACE_EVENTS && !is_map) {
        r = R_EVENTS;
        p->saw_events = 1;
    } else if (parent == R_TOP && k == K_DINFO && is_map) {
        r = R_DINFO;
    } else if (parent == R_EVENTS && is_map) {
        struct ev *e = &p->ev;

        r = R_EVENT;
        e->have_ts = e->have_dur = e->have_stream = e->have_corr = 0;
        e->ts = e->dur = 0;
        e->stream = e->corr = -1;
        e->bytes = 0;
        e->cat = C_NONE;
        e->name_len = 0;
    } else if (parent == R_EVENT && k == K_ARGS && is_map) {
        r = R_ARGS;
    }
    p->depth++;
    p->role[p->depth] = r;
    p->key[p->depth] = K_NONE;
    return 1;
}

static int contains(const char *s, size_t n, const char *w)
{
    return memmem(s, n, w, strlen(w)) != NULL;
}

static uint8_t memdir_of(const char *s, size_t n)
{
    static const struct {
        const char *prefix;
        uint8_t dir;
    } dirs[] = {
        {"Memcpy HtoD", GS_TRACE_MEM_HTOD}, {"Memcpy DtoH", GS_TRACE_MEM_DTOH},
        {"Memcpy DtoD", GS_TRACE_MEM_DTOD}, {"Memcpy HtoH", GS_TRACE_MEM_HTOH},
        {"Memcpy PtoP", GS_TRACE_MEM_PTOP}, {"Memset", GS_TRACE_MEM_SET},
    };

    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        size_t m = strlen(dirs[i].prefix);

        if (n >= m && memcmp(s, dirs[i].prefix, m) == 0)
            return dirs[i].dir;
    }
    return GS_TRACE_MEM_OTHER;
}

static long long step_number(const char *s, size_t n)
{
    const char *h = memchr(s, '#', n);
    long long v = 0;
    size_t i;

    if (!h)
        return -1;
    i = (size_t)(h - s) + 1;
    while (i < n && s[i] == ' ')
        i++;
    if (i >= n || s[i] < '0' || s[i] > '9')
        return -1;
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++)
        v = v < 100000000000000LL ? v * 10 + (s[i] - '0') : v;
    return v;
}

/* Runtime calls that only query or set host-side state: they never launch GPU work, so no
 * GPU activity carries their correlation id, and they are most of a trace's runtime calls
 * (cudaEventQuery alone is 3 in 4 in nccl-sendrecv-rank-0). Not kept as launches. */
static int never_launches(const char *nm, size_t nl)
{
    static const char *const prefix[] = {
        "cudaEventQuery",        "cudaEventRecord",          "cudaPeekAtLastError",
        "cudaGetLastError",      "cudaStreamIsCapturing",    "cudaStreamGetCaptureInfo",
        "cudaOccupancy",         "cudaDeviceGetAttribute",   "cudaGetDevice",
        "cudaSetDevice",         "cudaStreamGetPriority",    "cudaDeviceGetStreamPriorityRange",
        "cudaDriverGetVersion",  "cudaRuntimeGetVersion",    "cudaFuncSetAttribute",
        "cudaFuncGetAttributes", "cudaPointerGetAttributes",
    };

    if (nl < 4 || memcmp(nm, "cuda", 4) != 0)
        return 0;
    for (size_t i = 0; i < sizeof prefix / sizeof prefix[0]; i++) {
        size_t m = strlen(prefix[i]);

        if (nl >= m && memcmp(nm, prefix[i], m) == 0)
            return 1;
    }
    return 0;
}

static uint32_t corr32(const struct ev *e)
{
    return e->have_corr && e->corr >= 0 && e->corr < GS_TRACE_NO_CORR ? (uint32_t)e->corr
                                                                      : GS_TRACE_NO_CORR;
}

/* Notes a stream's first appearance; 0 on success. */
static int stream_seen(struct gs_trace *t, uint32_t stream)
{
    for (size_t i = t->n_streams; i-- > 0;)
        if (t->streams[i] == stream)
            return 0;
    if (t->n_streams >= 4096)
        return 0; /* more streams than that: order of the rest by number */
    if (grow((void **)&t->streams, &t->cap_streams, t->n_streams, sizeof *t->streams))
        return -1;
    t->streams[t->n_streams++] = stream;
    return 0;
}

/* An event's object closed: keep what the analysis needs. */
static int event_end(struct parser *p)
{
    struct gs_trace *t = p->t;
    struct ev *e = &p->ev;
    const char *nm = e->name ? e->name : "";
    size_t nl = e->name_len;

    t->n_events++;
    if (!e->have_ts)
        t->float_ts = 1; /* a missing ts makes HTA's ts column fractional */
    if (!e->have_ts || !e->have_dur || e->cat == C_TRACE)
        return 1;
    if (e->cat == C_NONE && !t->legacy)
        return 1; /* HTA drops events without a category */
    if (e->ts < t->min_ts)
        t->min_ts = e->ts;
    if (e->have_stream && e->stream != -1) {
        struct gs_trace_gpu *g;
        int64_t id = names_intern(t->names, nm, nl);

        if (id < 0 || grow((void **)&t->gpu, &t->cap_gpu, t->n_gpu, sizeof *t->gpu))
            return stop(p, "out of memory");
        g = &t->gpu[t->n_gpu++];
        memset(g, 0, sizeof *g);
        g->ts_raw = e->ts;
        g->dur_raw = e->dur;
        g->stream = (uint32_t)e->stream;
        g->corr = corr32(e);
        g->bytes = e->bytes;
        g->name = (uint32_t)id;
        g->memdir = GS_TRACE_MEM_OTHER;
        if (stream_seen(t, g->stream) != 0)
            return stop(p, "out of memory");
        if (e->cat == C_SYNC) {
            g->kind = GS_TRACE_SYNC;
        } else if (contains(nm, nl, "ncclKernel") || contains(nm, nl, "ncclDevKernel")) {
            g->kind = GS_TRACE_COMM;
        } else if (contains(nm, nl, "Memcpy") || contains(nm, nl, "Memset")) {
            g->kind = GS_TRACE_MEM;
            g->memdir = memdir_of(nm, nl);
        } else {
            g->kind = GS_TRACE_COMP;
        }
        return 1;
    }
    if (corr32(e) != GS_TRACE_NO_CORR && !never_launches(nm, nl)) {
        struct gs_trace_launch *l;

        if (grow((void **)&t->launch, &t->cap_launch, t->n_launch, sizeof *t->launch))
            return stop(p, "out of memory");
        l = &t->launch[t->n_launch++];
        l->corr = corr32(e);
        l->ts = e->ts;
    }
    if (contains(nm, nl, "ProfilerStep")) {
        struct gs_trace_step *s;

        if (grow((void **)&t->step, &t->cap_step, t->n_step, sizeof *t->step))
            return stop(p, "out of memory");
        s = &t->step[t->n_step++];
        s->num = step_number(nm, nl);
        s->ts = e->ts;
        s->dur = e->dur;
        return 1;
    }
    if (e->cat == C_CPU_OP || (t->legacy && e->cat == C_NONE)) {
        int64_t id = names_intern(t->names, nm, nl);
        struct gs_trace_cpuop *c;

        if (id < 0)
            return stop(p, "out of memory");
        if (!t->names->cpuop[id]) {
            if (grow((void **)&t->cpuop, &t->cap_cpuop, t->n_cpuop, sizeof *t->cpuop))
                return stop(p, "out of memory");
            c = &t->cpuop[t->n_cpuop++];
            memset(c, 0, sizeof *c);
            c->name = (uint32_t)id;
            t->names->cpuop[id] = (uint32_t)t->n_cpuop;
        }
        c = &t->cpuop[t->names->cpuop[id] - 1];
        c->count++;
        c->sum_us += e->dur;
        if (e->dur > c->max_us || c->count == 1)
            c->max_us = e->dur;
    }
    return 1;
}

static int cb_start_map(void *ctx)
{
    return push(ctx, 1);
}

static int cb_start_array(void *ctx)
{
    return push(ctx, 0);
}

static int cb_end(void *ctx)
{
    struct parser *p = ctx;
    enum role r = cur_role(p);

    p->depth--;
    if (r == R_EVENT)
        return event_end(p);
    return 1;
}

static int cb_key(void *ctx, const unsigned char *s, size_t n)
{
    struct parser *p = ctx;

    p->key[p->depth] = key_of(cur_role(p), (const char *)s, n);
    return 1;
}

static int cb_string(void *ctx, const unsigned char *s, size_t n)
{
    struct parser *p = ctx;
    struct ev *e = &p->ev;
    enum role r = cur_role(p);
    enum key k = cur_key(p);

    if (p->depth == 0)
        return stop(p, "not a trace: the document is a string");
    if (r != R_EVENT)
        return 1;
    if (k == K_NAME) {
        if (n > TRACE_MAX_NAME)
            n = TRACE_MAX_NAME;
        if (n + 1 > e->name_cap) {
            char *b = realloc(e->name, n + 1);

            if (!b)
                return stop(p, "out of memory");
            e->name = b;
            e->name_cap = n + 1;
        }
        memcpy(e->name, s, n);
        e->name[n] = '\0';
        e->name_len = n;
    } else if (k == K_CAT) {
#define IS(lit) (n == sizeof(lit) - 1 && memcmp(s, lit, n) == 0)
        e->cat = IS("Trace")       ? C_TRACE
                 : IS("cpu_op")    ? C_CPU_OP
                 : IS("cuda_sync") ? C_SYNC
                                   : C_OTHER;
#undef IS
    }
    return 1;
}

/* A JSON number as written: its value, and whether Python would read it as a float. Plain
 * integers (most of a trace's numbers) skip strtod. */
static int number_value(const char *s, size_t n, double *v, int *is_float)
{
    char buf[64];
    size_t i = 0;
    int neg = 0;
    uint64_t acc = 0;

    if (n && s[0] == '-') {
        neg = 1;
        i = 1;
    }
    if (n > i && n - i <= 18) {
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++)
            acc = acc * 10 + (uint64_t)(s[i] - '0');
        if (i == n) {
            *is_float = 0;
            *v = neg ? -(double)acc : (double)acc;
            return 0;
        }
    }
    if (n >= sizeof buf) {
        *v = HUGE_VAL; /* a literal this long: only its magnitude matters */
        *is_float = 1;
        return -1;
    }
    memcpy(buf, s, n);
    buf[n] = '\0';
    *is_float = memchr(buf, '.', n) || memchr(buf, 'e', n) || memchr(buf, 'E', n);
    *v = strtod(buf, NULL);
    return isfinite(*v) ? 0 : -1;
}

static int64_t to_i64(double v)
{
    if (!(v > -9.2e18 && v < 9.2e18))
        return v > 0 ? INT64_MAX : INT64_MIN;
    return (int64_t)v;
}

static int cb_number(void *ctx, const char *s, size_t n)
{
    struct parser *p = ctx;
    struct ev *e = &p->ev;
    enum role r = cur_role(p);
    enum key k = cur_key(p);
    double v;
    int fl, ok;

    if (p->depth == 0)
        return stop(p, "not a trace: the document is a number");
    if (r != R_EVENT && r != R_ARGS && r != R_DINFO)
        return 1;
    if (k == K_NONE || k == K_NAME || k == K_PH || k == K_CAT || k == K_ARGS)
        return 1;
    ok = number_value(s, n, &v, &fl) == 0;
    if (r == R_DINFO && k == K_RANK) {
        if (ok && v >= 0 && v < 1e9) {
            p->t->rank = (long long)v;
            p->t->rank_from_file = 1;
        }
        return 1;
    }
    if (r == R_EVENT && (k == K_TS || k == K_DUR)) {
        if (!ok)
            return stop(p, k == K_TS ? "ts is not a finite number" : "dur is not a finite number");
        if (fabs(v) > (k == K_TS ? TRACE_MAX_TS : TRACE_MAX_DUR))
            return stop(p, k == K_TS ? "ts out of range (more than 1e17 us)"
                                     : "dur out of range (more than 1e12 us)");
        if (k == K_TS) {
            e->ts = v;
            e->have_ts = 1;
            if (fl)
                p->t->float_ts = 1;
        } else {
            e->dur = v;
            e->have_dur = 1;
        }
        return 1;
    }
    if (r == R_ARGS) {
        int64_t iv = ok ? to_i64(v) : (v > 0 ? INT64_MAX : INT64_MIN);

        if (k == K_STREAM) {
            e->stream = iv;
            e->have_stream = 1;
        } else if (k == K_CORR) {
            e->corr = iv;
            e->have_corr = 1;
        } else if (k == K_BYTES) {
            e->bytes = iv > 0 ? iv : 0;
        }
    }
    return 1;
}

static int cb_scalar(void *ctx)
{
    struct parser *p = ctx;

    if (p->depth == 0)
        return stop(p, "not a trace: the document is not an object or array");
    return 1;
}

static int cb_bool(void *ctx, int b)
{
    (void)b;
    return cb_scalar(ctx);
}

static const yajl_callbacks callbacks = {
    .yajl_null = cb_scalar,
    .yajl_boolean = cb_bool,
    .yajl_number = cb_number,
    .yajl_string = cb_string,
    .yajl_start_map = cb_start_map,
    .yajl_map_key = cb_key,
    .yajl_end_map = cb_end,
    .yajl_start_array = cb_start_array,
    .yajl_end_array = cb_end,
};

/* "rank-3", "rank_3", "rank3" in a file name; -1 when none. */
static long long rank_from_name(const char *path)
{
    const char *b = strrchr(path, '/');
    const char *r;

    b = b ? b + 1 : path;
    for (r = strstr(b, "rank"); r; r = strstr(r + 1, "rank")) {
        const char *d = r + 4;

        if (*d == '-' || *d == '_' || *d == '.')
            d++;
        if (*d >= '0' && *d <= '9')
            return strtoll(d, NULL, 10);
    }
    return -1;
}

static struct gs_trace *trace_new(const char *label)
{
    struct gs_trace *t = calloc(1, sizeof *t);

    if (!t)
        return NULL;
    t->names = calloc(1, sizeof *t->names);
    t->path = strdup(label);
    if (!t->names || !t->path) {
        gs_trace_free(t);
        return NULL;
    }
    t->rank = -1;
    t->min_ts = HUGE_VAL;
    return t;
}

void gs_trace_free(struct gs_trace *t)
{
    if (!t)
        return;
    if (t->names) {
        free(t->names->arena);
        free(t->names->off);
        free(t->names->slot);
        free(t->names->cpuop);
        free(t->names);
    }
    free(t->gpu);
    free(t->launch);
    free(t->step);
    free(t->cpuop);
    free(t->streams);
    free(t->path);
    free(t);
}

/* Feeds one chunk; on error fills err with label:offset. */
static int feed(yajl_handle h, struct parser *p, const unsigned char *buf, size_t n, uint64_t base,
                const char *label)
{
    yajl_status st = n ? yajl_parse(h, buf, n) : yajl_complete_parse(h);

    if (st == yajl_status_ok)
        return GS_OK;
    if (st == yajl_status_client_canceled)
        return gs_err_set(p->err, GS_EPARSE, "%s:%llu: %s", label,
                          (unsigned long long)(base + (n ? yajl_get_bytes_consumed(h) : 0)),
                          p->why[0] ? p->why : "stopped");
    {
        unsigned char *m = yajl_get_error(h, 0, buf, n);
        const char *ms = m ? (const char *)m : "parse error";
        char msg[200];
        size_t l;

        if (strncmp(ms, "parse error: ", 13) == 0)
            ms += 13;
        snprintf(msg, sizeof msg, "%s", ms);
        if (m)
            yajl_free_error(h, m);
        l = strlen(msg);
        while (l && (msg[l - 1] == '\n' || msg[l - 1] == ' '))
            msg[--l] = '\0';
        return gs_err_set(p->err, GS_EPARSE, "%s:%llu: invalid JSON: %s", label,
                          (unsigned long long)(base + (n ? yajl_get_bytes_consumed(h) : 0)), msg);
    }
}

/* Where the JSON comes from: memory, or a gzip/plain file inflated by a reader thread into a
 * ring of RING chunks (the parser returns a chunk once yajl is done with it). */
#define RING 4

struct chunk {
    unsigned char *buf;
    long n; /* bytes, 0 at the end, -1 on error */
};

struct source {
    const char *mem;
    size_t mem_len, mem_off;
    gzFile gz;
    pthread_t thr;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct chunk ring[RING];
    unsigned head, tail; /* produced, consumed (mod 2*RING counters) */
    int stop;            /* the parser gave up: the reader ends */
    char rerr[200];
};

static long gz_fill(struct source *s, unsigned char *buf, size_t cap)
{
    int n = gzread(s->gz, buf, (unsigned)cap);
    int code;
    const char *m;

    if (n > 0)
        return n;
    m = gzerror(s->gz, &code);
    if (n < 0 || (code != Z_OK && code != Z_BUF_ERROR)) {
        snprintf(s->rerr, sizeof s->rerr, "gzip: %s", code == Z_ERRNO ? strerror(errno) : m);
        return -1;
    }
    if (code == Z_BUF_ERROR) {
        snprintf(s->rerr, sizeof s->rerr, "gzip: %s", m);
        return -1;
    }
    return 0;
}

static void *reader_main(void *arg)
{
    struct source *s = arg;

    for (;;) {
        struct chunk *c;
        long n;

        pthread_mutex_lock(&s->mu);
        while (s->head - s->tail == RING && !s->stop)
            pthread_cond_wait(&s->cv, &s->mu);
        if (s->stop) {
            pthread_mutex_unlock(&s->mu);
            return NULL;
        }
        c = &s->ring[s->head % RING];
        pthread_mutex_unlock(&s->mu);
        n = gz_fill(s, c->buf, TRACE_CHUNK);
        pthread_mutex_lock(&s->mu);
        c->n = n;
        s->head++;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        if (n <= 0)
            return NULL;
    }
}

/* The next chunk (and gives back the previous one); n as struct chunk. */
static long src_next(struct source *s, const unsigned char **buf, int *taken, char *rerr, size_t rl)
{
    long n;

    if (!s->gz) {
        n = (long)(s->mem_len - s->mem_off > TRACE_CHUNK ? TRACE_CHUNK : s->mem_len - s->mem_off);
        *buf = (const unsigned char *)s->mem + s->mem_off;
        s->mem_off += (size_t)n;
        return n;
    }
    pthread_mutex_lock(&s->mu);
    if (*taken) {
        s->tail++;
        pthread_cond_broadcast(&s->cv);
    }
    while (s->head == s->tail)
        pthread_cond_wait(&s->cv, &s->mu);
    n = s->ring[s->tail % RING].n;
    *buf = s->ring[s->tail % RING].buf;
    *taken = 1;
    if (n < 0)
        snprintf(rerr, rl, "%s", s->rerr);
    pthread_mutex_unlock(&s->mu);
    return n;
}

static int load(struct source *src, const char *label, struct gs_trace **out, struct gs_err *err)
{
    struct parser p;
    yajl_handle h = NULL;
    const unsigned char *buf = NULL;
    uint64_t base = 0;
    int rc = GS_OK, taken = 0;
    char rerr[200] = "";

    memset(&p, 0, sizeof p);
    p.err = err;
    p.t = trace_new(label);
    if (p.t)
        h = yajl_alloc(&callbacks, NULL, &p);
    if (!p.t || !h) {
        rc = gs_err_set(err, GS_ENOMEM, "%s: out of memory", label);
        goto done;
    }
    yajl_config(h, yajl_dont_validate_strings, 1);
    for (;;) {
        long n = src_next(src, &buf, &taken, rerr, sizeof rerr);

        if (n < 0) {
            rc = gs_err_set(err, GS_EPARSE, "%s:%llu: %s", label, (unsigned long long)base, rerr);
            goto done;
        }
        if (n == 0)
            break;
        rc = feed(h, &p, buf, (size_t)n, base, label);
        if (rc != GS_OK)
            goto done;
        base += (uint64_t)n;
    }
    if (base == 0) {
        rc = gs_err_set(err, GS_EPARSE, "%s:0: empty file", label);
        goto done;
    }
    rc = feed(h, &p, NULL, 0, base, label);
    if (rc != GS_OK)
        goto done;
    if (!p.saw_events) {
        rc = gs_err_set(err, GS_EPARSE, "%s:%llu: no traceEvents array: not a profiler trace",
                        label, (unsigned long long)base);
        goto done;
    }
    if (!p.t->rank_from_file)
        p.t->rank = rank_from_name(label);
done:
    if (h)
        yajl_free(h);
    free(p.ev.name);
    if (rc != GS_OK) {
        gs_trace_free(p.t);
        return rc;
    }
    *out = p.t;
    return GS_OK;
}

int gs_trace_load(const char *path, struct gs_trace **out, struct gs_err *err)
{
    struct source src;
    int rc = GS_OK, started = 0;

    memset(&src, 0, sizeof src);
    src.gz = gzopen(path, "rb");
    if (!src.gz)
        return gs_err_set(err, errno == ENOENT ? GS_ENOTFOUND : GS_EIO, "%s: %s", path,
                          errno ? strerror(errno) : "cannot open");
    gzbuffer(src.gz, 128 * 1024);
    pthread_mutex_init(&src.mu, NULL);
    pthread_cond_init(&src.cv, NULL);
    for (int i = 0; i < RING; i++)
        if (!(src.ring[i].buf = malloc(TRACE_CHUNK)))
            rc = gs_err_set(err, GS_ENOMEM, "%s: out of memory", path);
    if (rc == GS_OK && pthread_create(&src.thr, NULL, reader_main, &src) != 0)
        rc = gs_err_set(err, GS_ENOMEM, "%s: cannot start the reader thread", path);
    started = rc == GS_OK;
    if (rc == GS_OK)
        rc = load(&src, path, out, err);
    if (started) {
        pthread_mutex_lock(&src.mu);
        src.stop = 1;
        pthread_cond_broadcast(&src.cv);
        pthread_mutex_unlock(&src.mu);
        pthread_join(src.thr, NULL);
    }
    for (int i = 0; i < RING; i++)
        free(src.ring[i].buf);
    pthread_cond_destroy(&src.cv);
    pthread_mutex_destroy(&src.mu);
    gzclose(src.gz);
    return rc;
}

int gs_trace_load_mem(const char *buf, size_t len, const char *label, struct gs_trace **out,
                      struct gs_err *err)
{
    struct source src = {.mem = buf, .mem_len = len};

    return load(&src, label, out, err);
}
