/*
 * parse.c - reads one PyTorch profiler trace into the compact form of trace.h.
 *
 * The file is inflated (ISA-L's igzip when the build found it, else zlib; a plain file is read
 * as it is) in 256 KiB chunks into yajl's event parser; the callbacks follow a small stack of
 * roles (top object, traceEvents, one event, its args, distributedInfo, anything else skipped)
 * and fill one event's fields. When an event's object closes it is either kept as a compact
 * record (GPU activity, a host launch with a correlation id, a ProfilerStep, a CPU op total by
 * name) or dropped, so memory grows with the number of GPU activities and launches, never with
 * the JSON: profiler steps and CPU op names go into bounded tables (the latest TRACE_MAX_STEPS
 * steps; at most TRACE_MAX_OPS op names, the least busy folded into a counted remainder). A
 * gzip file is inflated on a second thread into a ring of four chunks, so inflating and parsing
 * overlap.
 *
 * Long tokens: yajl keeps a token that a chunk cuts in a buffer of its own and lexes that
 * buffer again from its start with every later chunk, so a string of L bytes would cost
 * L * L / 256 KiB. The loader therefore follows where each chunk ends lexically (inside a
 * string or a number, from the last token a callback saw) and, when a token runs past the next
 * chunk, collects the rest of it itself, a string cut at TRACE_MAX_TOKEN bytes (what lies
 * beyond is skipped unread; a longer number is an error), and hands it to yajl in one piece:
 * linear in the input.
 */
#include "trace/trace.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yajl/yajl_parse.h>
#ifdef GS_TRACE_ISAL
#include <isa-l/igzip_lib.h>
#else
#include <zlib.h>
#endif

#include "base/hash.h"

#define TRACE_MAX_DEPTH 64
#define TRACE_MAX_NAME (1u << 20)  /* longer names are cut here */
#define TRACE_MAX_TOKEN (1u << 20) /* what the loader hands yajl of a token past one chunk */
#define TRACE_CHUNK 262144
#define TRACE_MAX_STEPS 1024          /* profiler steps kept: the latest-starting ones */
#define TRACE_MAX_OPS 8192            /* CPU op names kept by name ... */
#define TRACE_MAX_OP_BYTES (8u << 20) /* ... and their bytes; the least busy half is folded */
#define TRACE_MAX_TS 1e17             /* microseconds: ~3000 years past the epoch */
#define TRACE_MAX_DUR 1e12            /* microseconds: ~11 days; keeps every sum inside int64 */

/* Interned names: an arena of NUL-terminated strings and an open-addressing index. */
struct gs_trace_names {
    char *arena;
    size_t len, cap;
    size_t *off; /* offset of name id */
    uint32_t n, cap_off;
    uint32_t *slot;  /* id + 1, 0 = empty */
    uint32_t n_slot; /* power of two */
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
    char why[160];                 /* a callback's reason for stopping */
    const unsigned char *last_tok; /* the last token a callback saw (note_end) */
    size_t last_len;
};

/* A token's text s[0..n) ends here (quoted: a string's closing quote follows). Only the last
 * one of a piece matters (feed_chunk checks that it lies in the piece: yajl hands over strings
 * with escapes, and tokens a chunk cut, from buffers of its own), so this is two stores. */
static inline void note_end(struct parser *p, const unsigned char *s, size_t n, int quoted)
{
    p->last_tok = s;
    p->last_len = n + (size_t)quoted;
}

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

        if (!o)
            return -1;
        nm->off = o;
        nm->cap_off = c;
    }
    memcpy(nm->arena + nm->len, s, n);
    nm->arena[nm->len + n] = '\0';
    nm->off[nm->n] = nm->len;
    nm->len += n + 1;
    nm->slot[h] = nm->n + 1;
    return nm->n++;
}

static void names_free(struct gs_trace_names *nm)
{
    if (!nm)
        return;
    free(nm->arena);
    free(nm->off);
    free(nm->slot);
    free(nm);
}

static const char *names_get(const struct gs_trace_names *nm, uint32_t id)
{
    if (!nm || id >= nm->n)
        return "";
    return nm->arena + nm->off[id];
}

const char *gs_trace_name(const struct gs_trace *t, uint32_t id)
{
    return names_get(t->names, id);
}

const char *gs_trace_op_name(const struct gs_trace *t, uint32_t id)
{
    return names_get(t->op_names, id);
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

static int cmp_step_ts(const void *x, const void *y)
{
    const struct gs_trace_step *a = x, *b = y;

    return a->ts < b->ts ? -1 : a->ts > b->ts;
}

/* Keeps the TRACE_MAX_STEPS latest-starting steps, counts the others. */
static void steps_trim(struct gs_trace *t)
{
    size_t drop;

    if (t->n_step <= TRACE_MAX_STEPS)
        return;
    drop = t->n_step - TRACE_MAX_STEPS;
    qsort(t->step, t->n_step, sizeof *t->step, cmp_step_ts);
    memmove(t->step, t->step + drop, TRACE_MAX_STEPS * sizeof *t->step);
    t->n_step = TRACE_MAX_STEPS;
    t->n_step_omitted += drop;
}

/* A ProfilerStep: the table keeps the TRACE_MAX_STEPS latest-starting ones (the last step,
 * which decides the traced window, always among them) and counts the rest. */
static int step_add(struct gs_trace *t, long long num, double ts, double dur)
{
    struct gs_trace_step *s;

    if (t->n_step_seen == 0)
        t->first_step_num = num;
    else if (num != t->first_step_num)
        t->step_nums_differ = 1;
    t->n_step_seen++;
    if (t->n_step == 2 * TRACE_MAX_STEPS)
        steps_trim(t);
    if (grow((void **)&t->step, &t->cap_step, t->n_step, sizeof *t->step))
        return -1;
    s = &t->step[t->n_step++];
    s->num = num;
    s->ts = ts;
    s->dur = dur;
    return 0;
}

static int cmp_op_sum(const void *x, const void *y)
{
    const struct gs_trace_cpuop *a = x, *b = y;

    if (a->sum_us != b->sum_us)
        return a->sum_us > b->sum_us ? -1 : 1;
    return a->name < b->name ? -1 : a->name > b->name;
}

/* The op table is full: the busiest ops (up to half the table, by count and bytes) stay, the
 * rest go into the counted remainder; the name table is built again for those kept. */
static int ops_fold(struct gs_trace *t)
{
    struct gs_trace_names *old = t->op_names, *nm = calloc(1, sizeof *nm);
    size_t keep = 0, bytes = 0;

    if (!nm)
        return -1;
    qsort(t->cpuop, t->n_cpuop, sizeof *t->cpuop, cmp_op_sum);
    for (; keep < t->n_cpuop && keep < TRACE_MAX_OPS / 2; keep++) {
        const char *s = names_get(old, t->cpuop[keep].name);
        size_t l = strlen(s);
        int64_t id;

        if (bytes + l + 1 > TRACE_MAX_OP_BYTES / 2)
            break;
        bytes += l + 1;
        if ((id = names_intern(nm, s, l)) < 0) {
            names_free(nm);
            return -1;
        }
        t->cpuop[keep].name = (uint32_t)id;
    }
    for (size_t i = keep; i < t->n_cpuop; i++) {
        t->ops_folded.count += t->cpuop[i].count;
        t->ops_folded.sum_us += t->cpuop[i].sum_us;
        if (t->cpuop[i].max_us > t->ops_folded.max_us)
            t->ops_folded.max_us = t->cpuop[i].max_us;
    }
    t->n_ops_folded += t->n_cpuop - keep;
    t->n_cpuop = keep;
    t->op_names = nm;
    names_free(old);
    return 0;
}

/* A CPU op's inclusive time, by name: ids of t->op_names are indices into t->cpuop. */
static int op_add(struct gs_trace *t, const char *nm, size_t nl, double dur)
{
    struct gs_trace_cpuop *c;
    int64_t id;

    if (t->op_names->n >= TRACE_MAX_OPS || t->op_names->len + nl + 1 > TRACE_MAX_OP_BYTES) {
        if (ops_fold(t) != 0)
            return -1;
    }
    id = names_intern(t->op_names, nm, nl);
    if (id < 0)
        return -1;
    if ((size_t)id == t->n_cpuop) {
        if (grow((void **)&t->cpuop, &t->cap_cpuop, t->n_cpuop, sizeof *t->cpuop))
            return -1;
        c = &t->cpuop[t->n_cpuop++];
        memset(c, 0, sizeof *c);
        c->name = (uint32_t)id;
    }
    c = &t->cpuop[id];
    c->count++;
    c->sum_us += dur;
    if (dur > c->max_us || c->count == 1)
        c->max_us = dur;
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
        if (step_add(t, step_number(nm, nl), e->ts, e->dur) != 0)
            return stop(p, "out of memory");
        return 1;
    }
    if (e->cat == C_CPU_OP || (t->legacy && e->cat == C_NONE)) {
        if (op_add(t, nm, nl, e->dur) != 0)
            return stop(p, "out of memory");
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

    note_end(p, s, n, 1);
    p->key[p->depth] = key_of(cur_role(p), (const char *)s, n);
    return 1;
}

static int cb_string(void *ctx, const unsigned char *s, size_t n)
{
    struct parser *p = ctx;
    struct ev *e = &p->ev;
    enum role r = cur_role(p);
    enum key k = cur_key(p);

    note_end(p, s, n, 1);
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

    note_end(p, (const unsigned char *)s, n, 0);
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
    t->op_names = calloc(1, sizeof *t->op_names);
    t->path = strdup(label);
    if (!t->names || !t->op_names || !t->path) {
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
    names_free(t->names);
    names_free(t->op_names);
    free(t->gpu);
    free(t->launch);
    free(t->step);
    free(t->cpuop);
    free(t->streams);
    free(t->path);
    free(t);
}

/* Feeds one piece; on error fills err with label:offset. */
static int feed(yajl_handle h, struct parser *p, const unsigned char *buf, size_t n, uint64_t base,
                const char *label)
{
    yajl_status st;

    p->last_tok = NULL;
    st = n ? yajl_parse(h, buf, n) : yajl_complete_parse(h);
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

/* Where a piece of JSON ends lexically: outside any token, inside a string (and where in an
 * escape), or inside a number (or a literal's letters: treated alike, both end at the first
 * character that cannot continue them). */
enum lex_mode { LX_OUT, LX_STRING, LX_NUMBER };

struct lex {
    enum lex_mode mode;
    int esc; /* in a string: 1 after a backslash, 2..5 inside \uXXXX (hex digits left + 1) */
};

static int numchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

/* Scans the token lx is inside, from b[i] up to b[n]: the index just past its end (LX_OUT
 * after), or n when it goes on. */
static size_t lex_token(struct lex *lx, const unsigned char *b, size_t i, size_t n)
{
    const unsigned char *q = NULL; /* the next quote, cached: escapes never rescan */

    if (lx->mode == LX_NUMBER) {
        while (i < n && numchar(b[i]))
            i++;
        if (i < n)
            lx->mode = LX_OUT;
        return i;
    }
    while (i < n) {
        const unsigned char *bs;

        if (lx->esc) {
            lx->esc = lx->esc == 1 && b[i] == 'u' ? 5 : lx->esc > 2 ? lx->esc - 1 : 0;
            i++;
            continue;
        }
        if (!q || q < b + i)
            q = memchr(b + i, '"', n - i);
        bs = memchr(b + i, '\\', (size_t)((q ? q : b + n) - (b + i)));
        if (bs) {
            i = (size_t)(bs - b) + 1;
            lx->esc = 1;
        } else if (q) {
            lx->mode = LX_OUT;
            return (size_t)(q - b) + 1;
        } else {
            i = n;
        }
    }
    return n;
}

/* The state at b[n], from a state at b[i]. */
static void lex_tail(struct lex *lx, const unsigned char *b, size_t i, size_t n)
{
    for (;;) {
        const unsigned char *q;

        if (lx->mode != LX_OUT) {
            i = lex_token(lx, b, i, n);
            if (i >= n)
                return;
        }
        q = memchr(b + i, '"', n - i);
        if (!q)
            break;
        lx->mode = LX_STRING;
        lx->esc = 0;
        i = (size_t)(q - b) + 1;
    }
    if (n > i && numchar(b[n - 1]))
        lx->mode = LX_NUMBER; /* a number (or "true"'s e) that the next piece may continue */
}

/* The rest of a token that ran past a chunk, as yajl gets it: at most TRACE_MAX_TOKEN bytes
 * of a string (a cut never splits an escape), then its closing quote; a number whole. */
struct tail {
    unsigned char *buf;
    size_t len, cap;
    int skipping; /* full: the rest of the token is read past */
};

static int tail_add(struct tail *tl, const unsigned char *s, size_t n)
{
    if (tl->len + n > tl->cap) {
        size_t c = tl->cap ? tl->cap : 65536;
        unsigned char *b;

        while (c < tl->len + n)
            c *= 2;
        if (!(b = realloc(tl->buf, c)))
            return -1;
        tl->buf = b;
        tl->cap = c;
    }
    memcpy(tl->buf + tl->len, s, n);
    tl->len += n;
    return 0;
}

/* Takes b[0..n) into the token's tail and sets *end past the token's end (n when it goes
 * on); -1 when out of memory, -2 for a number longer than TRACE_MAX_TOKEN. */
static int tail_take(struct tail *tl, struct lex *lx, const unsigned char *b, size_t n, size_t *end)
{
    size_t i = 0, e;
    enum lex_mode m = lx->mode;

    if (!tl->skipping) {
        size_t room = TRACE_MAX_TOKEN > tl->len ? TRACE_MAX_TOKEN - tl->len : 0;

        e = lex_token(lx, b, 0, room < n ? room : n);
        while (e < n && lx->mode == LX_STRING && lx->esc) /* never cut an escape */
            e = lex_token(lx, b, e, e + 1);
        if (tail_add(tl, b, e) != 0)
            return -1;
        if (lx->mode == LX_OUT) {
            *end = e;
            return 0;
        }
        i = e;
        if (i < n || tl->len >= TRACE_MAX_TOKEN) {
            if (m == LX_NUMBER)
                return -2; /* no number is that long: an error, not a cut that might change it */
            tl->skipping = 1;
        }
    }
    if (tl->skipping && i < n) {
        e = lex_token(lx, b, i, n);
        if (lx->mode == LX_OUT && m == LX_STRING && tail_add(tl, (const unsigned char *)"\"", 1))
            return -1;
        *end = e;
        return 0;
    }
    *end = n;
    return 0;
}

/* Where the JSON comes from: memory, or a gzip/plain file inflated by a reader thread into a
 * ring of RING chunks (the parser returns a chunk once yajl is done with it). */
#define RING 4
#define TRACE_IN 131072 /* compressed bytes read at a time */

struct chunk {
    unsigned char *buf;
    long n; /* bytes, 0 at the end, -1 on error */
};

struct source {
    const char *mem;
    size_t mem_len, mem_off;
    int file;
#ifdef GS_TRACE_ISAL
    int fd;
    int gzip;   /* the file starts with gzip's magic */
    int in_eof; /* read() said end of file */
    unsigned char *in;
    struct inflate_state *inf;
#else
    gzFile gz;
#endif
    pthread_t thr;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct chunk ring[RING];
    unsigned head, tail; /* produced, consumed (mod 2*RING counters) */
    int stop;            /* the parser gave up: the reader ends */
    char rerr[200];
};

#ifdef GS_TRACE_ISAL
/* More compressed input; 0 at the end of the file, -1 on error. */
static int isal_read(struct source *s)
{
    ssize_t n;

    do
        n = read(s->fd, s->in, TRACE_IN);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
        snprintf(s->rerr, sizeof s->rerr, "read: %s", strerror(errno));
        return -1;
    }
    if (n == 0)
        s->in_eof = 1;
    s->inf->next_in = s->in;
    s->inf->avail_in = (uint32_t)n;
    return (int)n;
}

static const char *isal_error(int rc)
{
    switch (rc) {
    case ISAL_INVALID_BLOCK:
        return "invalid block type";
    case ISAL_INVALID_SYMBOL:
        return "invalid code";
    case ISAL_INVALID_LOOKBACK:
        return "invalid distance too far back";
    case ISAL_INVALID_WRAPPER:
        return "incorrect header check";
    case ISAL_UNSUPPORTED_METHOD:
        return "unknown compression method";
    case ISAL_INCORRECT_CHECKSUM:
        return "incorrect data check";
    default:
        return "invalid compressed data";
    }
}

/* Up to cap bytes of JSON: a plain file as read, a gzip file (one member or several, as
 * gzip -d takes them; bytes after the last member are ignored, as zlib's gzread does)
 * inflated by igzip. */
static long src_fill(struct source *s, unsigned char *buf, size_t cap)
{
    struct inflate_state *st = s->inf;

    if (!s->gzip) {
        size_t got = st->avail_in < cap ? st->avail_in : cap;

        memcpy(buf, st->next_in, got); /* what src_open read to see the magic */
        st->next_in += got;
        st->avail_in -= (uint32_t)got;
        while (got < cap && !s->in_eof) {
            ssize_t n = read(s->fd, buf + got, cap - got);

            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0) {
                snprintf(s->rerr, sizeof s->rerr, "read: %s", strerror(errno));
                return -1;
            }
            if (n == 0)
                s->in_eof = 1;
            got += (size_t)n;
        }
        return (long)got;
    }
    st->next_out = buf;
    st->avail_out = (uint32_t)cap;
    while (st->avail_out > 0) {
        uint32_t before = st->avail_out;
        int rc;

        if (st->block_state == ISAL_BLOCK_FINISH) { /* a member ended: another one? */
            uint8_t *in = st->next_in;
            uint32_t avail = st->avail_in;

            if (avail == 0 && !s->in_eof) {
                if (isal_read(s) < 0)
                    return -1;
                continue;
            }
            if (avail == 0 || in[0] != 0x1f)
                break;
            isal_inflate_init(st);
            st->crc_flag = ISAL_GZIP;
            st->next_in = in;
            st->avail_in = avail;
            st->next_out = buf + (cap - before);
            st->avail_out = before;
        }
        if (st->avail_in == 0 && !s->in_eof && isal_read(s) < 0)
            return -1;
        rc = isal_inflate(st);
        if (rc < 0) {
            snprintf(s->rerr, sizeof s->rerr, "gzip: %s", isal_error(rc));
            return -1;
        }
        if (st->avail_out == before && st->avail_in == 0 && s->in_eof &&
            st->block_state != ISAL_BLOCK_FINISH) {
            snprintf(s->rerr, sizeof s->rerr, "gzip: unexpected end of file");
            return -1;
        }
    }
    return (long)(cap - st->avail_out);
}
#else
/* Up to cap bytes of JSON: zlib's gzread takes gzip and plain files alike. */
static long src_fill(struct source *s, unsigned char *buf, size_t cap)
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
#endif

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
        n = src_fill(s, c->buf, TRACE_CHUNK);
        pthread_mutex_lock(&s->mu);
        c->n = n;
        s->head++;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        if (n <= 0)
            return NULL;
    }
}

/* Memory is handed out in pieces of this size (the file's chunks are TRACE_CHUNK). */
static size_t mem_chunk = TRACE_CHUNK;

void gs_trace_set_mem_chunk(size_t n)
{
    mem_chunk = n ? n : TRACE_CHUNK;
}

/* The next chunk (and gives back the previous one); n as struct chunk. */
static long src_next(struct source *s, const unsigned char **buf, int *taken, char *rerr, size_t rl)
{
    long n;

    if (!s->file) {
        n = (long)(s->mem_len - s->mem_off > mem_chunk ? mem_chunk : s->mem_len - s->mem_off);
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

/* Feeds b[0..n), then follows where it ends: from just past the last token a callback saw,
 * when that lies in b (outside any token there), else from b's start. */
static int feed_chunk(yajl_handle h, struct parser *p, struct lex *lx, const unsigned char *b,
                      size_t n, uint64_t base, const char *label)
{
    int rc = n ? feed(h, p, b, n, base, label) : GS_OK;
    uintptr_t a = (uintptr_t)p->last_tok, lo = (uintptr_t)b;

    if (rc != GS_OK || n == 0)
        return rc;
    if (p->last_tok && a >= lo && a - lo <= n && p->last_len <= n - (a - lo)) {
        lx->mode = LX_OUT;
        lex_tail(lx, b, (size_t)(a - lo) + p->last_len, n);
    } else {
        lex_tail(lx, b, 0, n);
    }
    return GS_OK;
}

static int load(struct source *src, const char *label, struct gs_trace **out, struct gs_err *err)
{
    struct parser p;
    struct lex lx = {LX_OUT, 0};
    struct tail tl = {NULL, 0, 0, 0};
    int in_tail = 0; /* collecting a long token's rest in tl */
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
        size_t e = 0;

        if (n < 0) {
            rc = gs_err_set(err, GS_EPARSE, "%s:%llu: %s", label, (unsigned long long)base, rerr);
            goto done;
        }
        if (n == 0)
            break;
        if (lx.mode != LX_OUT && !in_tail) {
            /* a token the last chunk cut: ends here (yajl takes the chunk as it is), or is
             * long (its rest goes into tl) */
            struct lex probe = lx;

            if (lex_token(&probe, buf, 0, (size_t)n) >= (size_t)n && probe.mode != LX_OUT) {
                in_tail = 1;
                tl.len = 0;
                tl.skipping = 0;
            }
        }
        if (in_tail) {
            int tr = tail_take(&tl, &lx, buf, (size_t)n, &e);

            if (tr == -2) {
                rc = gs_err_set(err, GS_EPARSE, "%s:%llu: a number longer than 1 MiB", label,
                                (unsigned long long)base);
                goto done;
            }
            if (tr != 0) {
                rc = gs_err_set(err, GS_ENOMEM, "%s: out of memory", label);
                goto done;
            }
            if (lx.mode != LX_OUT) { /* the token goes on */
                base += (uint64_t)n;
                continue;
            }
            in_tail = 0;
            if (tl.len && (rc = feed(h, &p, tl.buf, tl.len, base, label)) != GS_OK)
                goto done;
        }
        rc = feed_chunk(h, &p, &lx, buf + e, (size_t)n - e, base + e, label);
        if (rc != GS_OK)
            goto done;
        base += (uint64_t)n;
    }
    if (in_tail && tl.len) {
        rc = feed(h, &p, tl.buf, tl.len, base, label);
        if (rc != GS_OK)
            goto done;
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
    steps_trim(p.t);
done:
    if (h)
        yajl_free(h);
    free(p.ev.name);
    free(tl.buf);
    if (rc != GS_OK) {
        gs_trace_free(p.t);
        return rc;
    }
    *out = p.t;
    return GS_OK;
}

/* Opens the file for src_fill; GS_OK or an error in err. */
static int src_open(struct source *src, const char *path, struct gs_err *err)
{
#ifdef GS_TRACE_ISAL
    size_t got = 0;

    src->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (src->fd < 0)
        return gs_err_set(err, errno == ENOENT ? GS_ENOTFOUND : GS_EIO, "%s: %s", path,
                          strerror(errno));
    src->in = malloc(TRACE_IN);
    src->inf = malloc(sizeof *src->inf);
    if (!src->in || !src->inf)
        return gs_err_set(err, GS_ENOMEM, "%s: out of memory", path);
    /* The first bytes decide (read, not pread: a pipe is a file too). */
    while (got < 2 && !src->in_eof) {
        ssize_t n = read(src->fd, src->in + got, TRACE_IN - got);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return gs_err_set(err, GS_EIO, "%s: %s", path, strerror(errno));
        if (n == 0)
            src->in_eof = 1;
        got += (size_t)n;
    }
    src->gzip = got >= 2 && src->in[0] == 0x1f && src->in[1] == 0x8b;
    isal_inflate_init(src->inf);
    src->inf->crc_flag = ISAL_GZIP;
    src->inf->next_in = src->in;
    src->inf->avail_in = (uint32_t)got; /* a plain file hands these out first */
#else
    src->gz = gzopen(path, "rb");
    if (!src->gz)
        return gs_err_set(err, errno == ENOENT ? GS_ENOTFOUND : GS_EIO, "%s: %s", path,
                          errno ? strerror(errno) : "cannot open");
    gzbuffer(src->gz, 128 * 1024);
#endif
    src->file = 1;
    return GS_OK;
}

static void src_close(struct source *src)
{
#ifdef GS_TRACE_ISAL
    if (src->fd >= 0)
        close(src->fd);
    free(src->in);
    free(src->inf);
#else
    if (src->gz)
        gzclose(src->gz);
#endif
}

int gs_trace_load(const char *path, struct gs_trace **out, struct gs_err *err)
{
    struct source src;
    int rc, started = 0;

    memset(&src, 0, sizeof src);
#ifdef GS_TRACE_ISAL
    src.fd = -1;
#endif
    pthread_mutex_init(&src.mu, NULL);
    pthread_cond_init(&src.cv, NULL);
    rc = src_open(&src, path, err);
    for (int i = 0; i < RING && rc == GS_OK; i++)
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
    src_close(&src);
    return rc;
}

int gs_trace_load_mem(const char *buf, size_t len, const char *label, struct gs_trace **out,
                      struct gs_err *err)
{
    struct source src = {.mem = buf, .mem_len = len};

    return load(&src, label, out, err);
}
