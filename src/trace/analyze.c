/*
 * analyze.c - the figures of docs/trace.md over loaded traces, as one JSON document.
 *
 * Every figure follows Holistic Trace Analysis' definition (HTA 0.6.1, checked against its
 * results on the reference traces by tests/e2e/test_trace.py): times are rounded as HTA rounds
 * them (fractional microseconds: start up, end down), GPU activities launched in the last
 * ProfilerStep are left out when there are at least two steps, unions of intervals merge what
 * touches or overlaps, and the breakdown by kernel type sweeps the per-type unions.
 */
#include "trace/trace.h"

#include "base/straggler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct rstep {
    long long num;
    int64_t ts, end;
};

struct ctx {
    struct gs_trace *t;
    const struct gs_trace_opts *o;
    struct gs_trace_gpu *a; /* t->gpu: rounded, sorted by start; keep marks the window */
    size_t n;               /* all activities */
    size_t n_kept;
    struct rstep *st; /* steps sorted by ts */
    size_t n_st;
};

void gs_trace_opts_default(struct gs_trace_opts *o)
{
    o->top_kernels = 10;
    o->duration_ratio = 0.8;
    o->kernel_wait_us = 30;
    o->include_last_step = 0;
}

static int64_t rnd_start(const struct gs_trace *t, double ts)
{
    return t->float_ts ? (int64_t)ceil(ts) : (int64_t)llround(ts);
}

static int64_t rnd_end(const struct gs_trace *t, double ts, double dur)
{
    return t->float_ts ? (int64_t)floor(ts + dur) : (int64_t)llround(ts) + (int64_t)llround(dur);
}

static int cmp_launch(const void *x, const void *y)
{
    const struct gs_trace_launch *a = x, *b = y;

    if (a->corr != b->corr)
        return a->corr < b->corr ? -1 : 1;
    return a->ts < b->ts ? -1 : a->ts > b->ts;
}

/* By start; ties by end, stream, name, so that the order does not depend on qsort's. */
static int cmp_gpu(const void *x, const void *y)
{
    const struct gs_trace_gpu *a = x, *b = y;

    if (a->ts != b->ts)
        return a->ts < b->ts ? -1 : 1;
    if (a->end != b->end)
        return a->end < b->end ? -1 : 1;
    if (a->stream != b->stream)
        return a->stream < b->stream ? -1 : 1;
    return a->name < b->name ? -1 : a->name > b->name;
}

static int cmp_step(const void *x, const void *y)
{
    const struct rstep *a = x, *b = y;

    return a->ts < b->ts ? -1 : a->ts > b->ts;
}

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;

    return a < b ? -1 : a > b;
}

/* First launch (earliest) with this correlation id, or NULL. */
static const struct gs_trace_launch *launch_find(const struct gs_trace *t, uint32_t corr)
{
    size_t lo = 0, hi = t->n_launch;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (t->launch[mid].corr < corr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < t->n_launch && t->launch[lo].corr == corr ? &t->launch[lo] : NULL;
}

/* The rounded ts of the activity's launch (the earliest host event with its correlation id),
 * INT64_MIN when none. */
static int64_t launch_of(const struct ctx *c, const struct gs_trace_gpu *g)
{
    const struct gs_trace_launch *l =
        g->corr != GS_TRACE_NO_CORR ? launch_find(c->t, g->corr) : NULL;

    return l ? rnd_start(c->t, l->ts) : INT64_MIN;
}

/* Rounds and sorts once; marks the window for these options. */
static int ctx_build(struct ctx *c, struct gs_trace *t, const struct gs_trace_opts *o)
{
    int64_t last_start = INT64_MAX;

    memset(c, 0, sizeof *c);
    c->t = t;
    c->o = o;
    if (!t->rounded) {
        for (size_t i = 0; i < t->n_gpu; i++) {
            struct gs_trace_gpu *g = &t->gpu[i];
            double ts = g->ts_raw, dur = g->dur_raw;

            g->ts = rnd_start(t, ts);
            g->end = rnd_end(t, ts, dur);
        }
        if (t->n_gpu)
            qsort(t->gpu, t->n_gpu, sizeof *t->gpu, cmp_gpu);
        if (t->n_launch)
            qsort(t->launch, t->n_launch, sizeof *t->launch, cmp_launch);
        t->rounded = 1;
    }
    c->a = t->gpu;
    c->n = t->n_gpu;
    c->st = calloc(t->n_step ? t->n_step : 1, sizeof *c->st);
    if (!c->st)
        return -1;
    for (size_t i = 0; i < t->n_step; i++) {
        c->st[i].num = t->step[i].num;
        c->st[i].ts = rnd_start(t, t->step[i].ts);
        c->st[i].end = rnd_end(t, t->step[i].ts, t->step[i].dur);
    }
    c->n_st = t->n_step;
    qsort(c->st, c->n_st, sizeof *c->st, cmp_step);
    for (size_t i = 0; i < c->n_st; i++)
        if (last_start == INT64_MAX || c->st[i].ts > last_start)
            last_start = c->st[i].ts;
    /* HTA filters only with two or more distinct ProfilerStep names. */
    if (!t->step_nums_differ || o->include_last_step)
        last_start = INT64_MAX;
    for (size_t i = 0; i < c->n; i++) {
        struct gs_trace_gpu *g = &c->a[i];
        int64_t l = launch_of(c, g);

        /* launches are sorted by ts within a correlation id: the first decides */
        g->keep = last_start == INT64_MAX || (l != INT64_MIN && l < last_start);
        c->n_kept += g->keep;
    }
    return 0;
}

/* HTA: the last step whose [ts, end) holds the launch; -1 when none. */
static int step_of(const struct ctx *c, int64_t launch_ts)
{
    size_t lo = 0, hi = c->n_st;

    if (launch_ts == INT64_MIN)
        return -1;
    while (lo < hi) { /* first step starting after the launch */
        size_t mid = lo + (hi - lo) / 2;

        if (c->st[mid].ts <= launch_ts)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t s = lo; s-- > 0 && lo - s <= 8;) /* overlapping steps: look back a little */
        if (launch_ts < c->st[s].end)
            return (int)s;
    return -1;
}

/* A union of intervals fed in start order, with HTA's merge: a new interval starts when ts is
 * after every earlier end; touching intervals merge. */
struct uacc {
    int64_t total, gs, ge, cummax, first;
    uint64_t n;
};

static void uacc_add(struct uacc *u, int64_t ts, int64_t end)
{
    if (!u->n) {
        u->gs = u->first = ts;
        u->ge = u->cummax = end;
    } else if (ts > u->cummax) {
        u->total += u->ge - u->gs;
        u->gs = ts;
        u->ge = end;
    } else if (end > u->ge) {
        u->ge = end;
    }
    if (end > u->cummax)
        u->cummax = end;
    u->n++;
}

/* The union's length; *last: its last interval's end. */
static int64_t uacc_len(const struct uacc *u, int64_t *last)
{
    if (last)
        *last = u->n ? u->ge : 0;
    return u->n ? u->total + (u->ge - u->gs) : 0;
}

#define ALL_KINDS (GS_TRACE_COMP | GS_TRACE_COMM | GS_TRACE_MEM | GS_TRACE_SYNC)

/* Union length of the kept activities of the kinds given. */
static int64_t union_len(const struct ctx *c, unsigned kinds, int64_t *first, int64_t *last)
{
    struct uacc u = {0};
    int64_t len;

    for (size_t i = 0; i < c->n; i++)
        if (c->a[i].keep && (c->a[i].kind & kinds))
            uacc_add(&u, c->a[i].ts, c->a[i].end);
    len = uacc_len(&u, last);
    if (first)
        *first = u.n ? u.first : 0;
    return len;
}

/* The merged intervals of one kind, produced one at a time from the sorted activities. */
struct gen {
    const struct ctx *c;
    unsigned kind;
    size_t i;
    int64_t s, e;
    int valid, active;
};

static void gen_next(struct gen *g)
{
    const struct ctx *c = g->c;

    g->valid = 0;
    g->active = 0;
    for (; g->i < c->n; g->i++) {
        const struct gs_trace_gpu *a = &c->a[g->i];

        if (!a->keep || a->kind != g->kind)
            continue;
        if (!g->valid) {
            g->s = a->ts;
            g->e = a->end;
            g->valid = 1;
        } else if (a->ts > g->e) {
            return; /* the next interval starts here */
        } else if (a->end > g->e) {
            g->e = a->end;
        }
    }
}

/* Time in each overlap state (index = OR of kinds, 1..7): the per-kind unions swept together,
 * each stretch counted once under the set of kinds running then. */
static void overlap_states(const struct ctx *c, int64_t state[8])
{
    struct gen g[3] = {{c, GS_TRACE_COMP, 0, 0, 0, 0, 0},
                       {c, GS_TRACE_COMM, 0, 0, 0, 0, 0},
                       {c, GS_TRACE_MEM, 0, 0, 0, 0, 0}};
    int run = 0, have_prev = 0;
    int64_t prev = 0;

    memset(state, 0, 8 * sizeof state[0]);
    for (int k = 0; k < 3; k++)
        gen_next(&g[k]);
    for (;;) {
        int best = -1;
        int64_t tbest = 0;

        for (int k = 0; k < 3; k++) {
            int64_t tk;

            if (!g[k].valid)
                continue;
            tk = g[k].active ? g[k].e : g[k].s;
            if (best < 0 || tk < tbest) {
                best = k;
                tbest = tk;
            }
        }
        if (best < 0)
            break;
        if (have_prev && run > 0)
            state[run] += tbest - prev;
        prev = tbest;
        have_prev = 1;
        if (!g[best].active) {
            g[best].active = 1;
            run |= (int)g[best].kind;
        } else {
            run &= ~(int)g[best].kind;
            gen_next(&g[best]);
        }
    }
}

static const char *kind_name(unsigned k)
{
    switch (k) {
    case GS_TRACE_COMP:
        return "COMPUTATION";
    case GS_TRACE_COMM:
        return "COMMUNICATION";
    case GS_TRACE_MEM:
        return "MEMORY";
    default:
        return "SYNC";
    }
}

/* "COMPUTATION overlapping COMMUNICATION ..." for a state, HTA's order. */
static void state_name(int s, char *buf, size_t len)
{
    static const unsigned order[] = {GS_TRACE_COMP, GS_TRACE_COMM, GS_TRACE_MEM};

    buf[0] = '\0';
    for (size_t i = 0; i < 3; i++)
        if (s & (int)order[i]) {
            if (buf[0])
                strncat(buf, " overlapping ", len - strlen(buf) - 1);
            strncat(buf, kind_name(order[i]), len - strlen(buf) - 1);
        }
}

/* The states 1..7 ordered by time, largest first (HTA's order). */
static void states_by_time(const int64_t state[8], int order[7])
{
    for (int i = 0; i < 7; i++)
        order[i] = i + 1;
    for (int i = 1; i < 7; i++)
        for (int j = i; j > 0 && state[order[j]] > state[order[j - 1]]; j--) {
            int t = order[j];

            order[j] = order[j - 1];
            order[j - 1] = t;
        }
}

static json_t *pct(double num, double den)
{
    return den > 0 ? json_real(100.0 * num / den) : json_null();
}

/* Per-name kernel totals. */
struct kagg {
    uint32_t name;
    uint8_t kind;
    uint64_t count;
    int64_t sum, min, max;
    double mean, m2; /* Welford over durations */
};

static int cmp_kagg(const void *x, const void *y)
{
    const struct kagg *a = x, *b = y;

    if (a->sum != b->sum)
        return a->sum > b->sum ? -1 : 1;
    return a->name < b->name ? -1 : a->name > b->name;
}

static json_t *krow(const char *type, const char *name, uint64_t count, uint64_t kernels,
                    int64_t sum, double mean, int64_t max, int64_t min, double sd)
{
    return json_pack("{s:s, s:s, s:I, s:I, s:I, s:f, s:I, s:I, s:f}", "type", type, "name", name,
                     "count", (json_int_t)count, "kernels", (json_int_t)kernels, "sum_us",
                     (json_int_t)sum, "mean_us", mean, "max_us", (json_int_t)max, "min_us",
                     (json_int_t)min, "stddev_us", sd);
}

/* HTA's top kernels of one type. With at most top_kernels names, each keeps the statistics
 * of its durations. With more, the names past top_kernels or past duration_ratio of the
 * cumulative total are lumped as "others", and HTA regroups every row over the per-name totals:
 * a name on its own then shows its total as mean, min and max, and "others" the mean, min,
 * max and stddev of the lumped names' totals. count is always the number of activities. */
static void top_kernels(const struct ctx *c, struct kagg *k, size_t nk, unsigned kind, json_t *arr)
{
    size_t n = 0, top = (size_t)(c->o->top_kernels > 0 ? c->o->top_kernels : 10);
    struct kagg *v;

    for (size_t i = 0; i < nk; i++)
        if (k[i].kind == kind && k[i].count)
            n++;
    if (!n)
        return;
    v = malloc(n * sizeof *v);
    if (!v)
        return;
    n = 0;
    for (size_t i = 0; i < nk; i++)
        if (k[i].kind == kind && k[i].count)
            v[n++] = k[i];
    qsort(v, n, sizeof *v, cmp_kagg);
    if (n <= top) {
        for (size_t i = 0; i < n; i++)
            json_array_append_new(
                arr, krow(kind_name(kind), gs_trace_name(c->t, v[i].name), v[i].count, 1, v[i].sum,
                          v[i].mean, v[i].max, v[i].min,
                          v[i].count > 1 ? sqrt(v[i].m2 / (double)(v[i].count - 1)) : 0));
    } else {
        /* pandas quantile (linear) of the cumulative sums */
        double *cs = malloc(n * sizeof *cs), q, pos, frac;
        uint64_t ocount = 0, onames = 0;
        int64_t osum = 0, omax = INT64_MIN, omin = INT64_MAX;
        double omean = 0, om2 = 0;
        size_t lo;

        if (!cs) {
            free(v);
            return;
        }
        for (size_t i = 0; i < n; i++)
            cs[i] = (i ? cs[i - 1] : 0) + (double)v[i].sum;
        pos = (double)(n - 1) * c->o->duration_ratio;
        lo = (size_t)floor(pos);
        frac = pos - (double)lo;
        q = cs[lo] + (lo + 1 < n ? (cs[lo + 1] - cs[lo]) * frac : 0);
        for (size_t i = 0; i < n; i++) {
            if (cs[i] > q || i >= top) {
                double d = (double)v[i].sum - omean;

                onames++;
                ocount += v[i].count;
                osum += v[i].sum;
                omax = v[i].sum > omax ? v[i].sum : omax;
                omin = v[i].sum < omin ? v[i].sum : omin;
                omean += d / (double)onames;
                om2 += d * ((double)v[i].sum - omean);
                continue;
            }
            json_array_append_new(arr,
                                  krow(kind_name(kind), gs_trace_name(c->t, v[i].name), v[i].count,
                                       1, v[i].sum, (double)v[i].sum, v[i].sum, v[i].sum, 0));
        }
        if (onames)
            json_array_append_new(arr,
                                  krow(kind_name(kind), "others", ocount, onames, osum, omean, omax,
                                       omin, onames > 1 ? sqrt(om2 / (double)(onames - 1)) : 0));
        free(cs);
    }
    free(v);
}

static json_t *kernels_json(const struct ctx *c)
{
    size_t nn = 0;
    struct kagg *k;
    json_t *top = json_array(), *small;
    uint64_t n_comp = 0, n_small = 0;
    int64_t small_us = 0;
    double flash = 0, memeff = 0, softmax = 0;
    int64_t softmax_top = -1, softmax_top_sum = 0;

    for (size_t i = 0; i < c->n; i++)
        if (c->a[i].name + 1 > nn)
            nn = c->a[i].name + 1;
    k = calloc(nn ? nn : 1, sizeof *k);
    if (!k || !top) {
        free(k);
        json_decref(top);
        return NULL;
    }
    for (size_t i = 0; i < c->n; i++) {
        const struct gs_trace_gpu *a = &c->a[i];
        struct kagg *g = &k[a->name];
        int64_t d = a->end - a->ts;
        double delta;

        if (!a->keep || a->kind == GS_TRACE_SYNC)
            continue;
        if (!g->count) {
            g->name = a->name;
            g->kind = a->kind;
            g->min = g->max = d;
        }
        g->count++;
        g->sum += d;
        g->min = d < g->min ? d : g->min;
        g->max = d > g->max ? d : g->max;
        delta = (double)d - g->mean;
        g->mean += delta / (double)g->count;
        g->m2 += delta * ((double)d - g->mean);
        if (a->kind == GS_TRACE_COMP) {
            n_comp++;
            if (d < 10) {
                n_small++;
                small_us += d;
            }
        }
    }
    /* attention kernels by name, once per name */
    for (size_t i = 0; i < nn; i++) {
        const char *nm;

        if (!k[i].count || k[i].kind != GS_TRACE_COMP)
            continue;
        nm = gs_trace_name(c->t, k[i].name);
        if (strcasestr(nm, "flash"))
            flash += (double)k[i].sum;
        else if (strcasestr(nm, "fmha") || strcasestr(nm, "efficient_attention") ||
                 strcasestr(nm, "mem_eff"))
            memeff += (double)k[i].sum;
        else if (strcasestr(nm, "softmax")) {
            softmax += (double)k[i].sum;
            if (k[i].sum > softmax_top_sum) {
                softmax_top_sum = k[i].sum;
                softmax_top = k[i].name;
            }
        }
    }
    top_kernels(c, k, nn, GS_TRACE_COMP, top);
    top_kernels(c, k, nn, GS_TRACE_COMM, top);
    top_kernels(c, k, nn, GS_TRACE_MEM, top);
    free(k);
    small = json_pack("{s:I, s:I, s:I}", "computation_kernels", (json_int_t)n_comp, "under_10us",
                      (json_int_t)n_small, "under_10us_sum_us", (json_int_t)small_us);
    return json_pack("{s:o, s:o, s:{s:f, s:f, s:f, s:s?}}", "top_kernels", top, "small_kernels",
                     small, "attention", "flash_us", flash, "mem_efficient_us", memeff,
                     "softmax_us", softmax, "softmax_top",
                     softmax_top >= 0 ? gs_trace_name(c->t, (uint32_t)softmax_top) : NULL);
}

/* HTA's idle time by stream: the gap before each kernel is host wait when the kernel's launch
 * came after the previous kernel ended, kernel wait when shorter than kernel_wait_us, else
 * other. Synchronisation events are not kernels here. Streams in order of first appearance;
 * one pass over the activities with one accumulator per stream. */
struct sacc {
    uint32_t stream;
    int started, have[3];
    int64_t prev_end, sum[3];
    uint64_t n;
};

static struct sacc *sacc_of(struct sacc *s, size_t *ns, size_t cap, uint32_t stream)
{
    for (size_t i = 0; i < *ns; i++)
        if (s[i].stream == stream)
            return &s[i];
    if (*ns >= cap)
        return NULL;
    memset(&s[*ns], 0, sizeof s[0]);
    s[*ns].stream = stream;
    return &s[(*ns)++];
}

static json_t *idle_by_stream(const struct ctx *c)
{
    static const char *causes[] = {"host_wait", "kernel_wait", "other"};
    size_t cap = c->t->n_streams + 64, ns = 0;
    struct sacc *s = calloc(cap, sizeof *s);
    json_t *arr = json_array();

    if (!arr || !s) {
        free(s);
        return arr;
    }
    /* the order of first appearance in the file */
    for (size_t i = 0; i < c->t->n_streams; i++)
        sacc_of(s, &ns, cap, c->t->streams[i]);
    for (size_t i = 0; i < c->n; i++) {
        const struct gs_trace_gpu *a = &c->a[i];
        struct sacc *q;
        int cat;
        int64_t gap, launch;

        if (!a->keep || a->kind == GS_TRACE_SYNC || !(q = sacc_of(s, &ns, cap, a->stream)))
            continue;
        q->n++;
        if (!q->started) {
            q->started = 1;
            q->have[2] = 1; /* HTA: the first kernel's gap is NaN, filed under other */
            q->prev_end = a->end;
            continue;
        }
        gap = a->ts - q->prev_end;
        launch = launch_of(c, a);
        if (launch != INT64_MIN && launch > q->prev_end)
            cat = 0;
        else if ((double)gap < c->o->kernel_wait_us)
            cat = 1;
        else
            cat = 2;
        q->have[cat] = 1;
        q->sum[cat] += gap;
        q->prev_end = a->end;
    }
    for (size_t i = 0; i < ns; i++) {
        int64_t total = s[i].sum[0] + s[i].sum[1] + s[i].sum[2];

        for (int k = 0; k < 3; k++)
            if (s[i].have[k])
                json_array_append_new(
                    arr,
                    json_pack("{s:I, s:s, s:I, s:o, s:I}", "stream", (json_int_t)s[i].stream,
                              "cause", causes[k], "idle_us", (json_int_t)s[i].sum[k], "ratio",
                              total ? json_real((double)s[i].sum[k] / (double)total) : json_null(),
                              "activities", (json_int_t)s[i].n));
    }
    free(s);
    return arr;
}

/* Per step: unions of all kinds and of each kind, in one pass. */
static json_t *steps_json(const struct ctx *c)
{
    json_t *arr = json_array();
    struct uacc *u = calloc(c->n_st * 4 + 1, sizeof *u); /* all, comp, comm, mem */

    if (!arr || !u) {
        free(u);
        return arr;
    }
    for (size_t i = 0; i < c->n; i++) {
        const struct gs_trace_gpu *a = &c->a[i];
        struct uacc *q;
        int step;

        if (!a->keep || (step = step_of(c, launch_of(c, a))) < 0)
            continue;
        q = &u[(size_t)step * 4];
        uacc_add(&q[0], a->ts, a->end);
        if (a->kind == GS_TRACE_COMP)
            uacc_add(&q[1], a->ts, a->end);
        else if (a->kind == GS_TRACE_COMM)
            uacc_add(&q[2], a->ts, a->end);
        else if (a->kind == GS_TRACE_MEM)
            uacc_add(&q[3], a->ts, a->end);
    }
    for (size_t s = 0; s < c->n_st; s++) {
        struct uacc *q = &u[s * 4];
        int64_t last = 0, busy = uacc_len(&q[0], &last);
        json_t *row = json_pack("{s:I, s:I, s:I}", "step", (json_int_t)c->st[s].num, "cpu_us",
                                (json_int_t)(c->st[s].end - c->st[s].ts), "gpu_activities",
                                (json_int_t)q[0].n);

        if (!row)
            continue;
        if (q[0].n) {
            json_object_set_new(row, "kernel_span_us", json_integer(last - q[0].first));
            json_object_set_new(row, "busy_us", json_integer(busy));
            json_object_set_new(row, "idle_us", json_integer(last - q[0].first - busy));
            json_object_set_new(row, "computation_us", json_integer(uacc_len(&q[1], NULL)));
            json_object_set_new(row, "communication_us", json_integer(uacc_len(&q[2], NULL)));
            json_object_set_new(row, "memory_us", json_integer(uacc_len(&q[3], NULL)));
        } else if (s + 1 == c->n_st && !c->o->include_last_step && c->n_st > 1) {
            json_object_set_new(row, "note", json_string("last step: left out (incomplete)"));
        }
        json_array_append_new(arr, row);
    }
    free(u);
    return arr;
}

static json_t *memcpy_json(const struct ctx *c, int64_t span)
{
    static const char *names[GS_TRACE_MEM_N] = {"HtoD", "DtoH",   "DtoD", "HtoH",
                                                "PtoP", "Memset", "other"};
    uint64_t count[GS_TRACE_MEM_N] = {0};
    int64_t time[GS_TRACE_MEM_N] = {0}, bytes[GS_TRACE_MEM_N] = {0};
    json_t *arr = json_array();

    for (size_t i = 0; i < c->n; i++) {
        const struct gs_trace_gpu *a = &c->a[i];

        if (!a->keep || a->kind != GS_TRACE_MEM || a->memdir >= GS_TRACE_MEM_N)
            continue;
        count[a->memdir]++;
        time[a->memdir] += a->end - a->ts;
        if (bytes[a->memdir] <= INT64_MAX - a->bytes)
            bytes[a->memdir] += a->bytes;
    }
    for (int d = 0; d < GS_TRACE_MEM_N && arr; d++) {
        if (!count[d])
            continue;
        json_array_append_new(
            arr, json_pack("{s:s, s:I, s:I, s:I, s:o, s:o}", "kind", names[d], "count",
                           (json_int_t)count[d], "time_us", (json_int_t)time[d], "bytes",
                           (json_int_t)bytes[d], "bandwidth_gbps",
                           time[d] > 0 ? json_real((double)bytes[d] / (double)time[d] / 1e3)
                                       : json_null(),
                           "span_pct", pct((double)time[d], (double)span)));
    }
    return arr;
}

static json_t *launch_json(const struct ctx *c)
{
    int64_t *d = malloc((c->n_kept + 1) * sizeof *d);
    size_t n = 0;
    double sum = 0;
    json_t *o;

    if (!d)
        return json_null();
    for (size_t i = 0; i < c->n; i++) {
        int64_t l;

        if (!c->a[i].keep || c->a[i].kind == GS_TRACE_SYNC || n >= c->n_kept ||
            (l = launch_of(c, &c->a[i])) == INT64_MIN)
            continue;
        d[n] = c->a[i].ts - l;
        sum += (double)d[n++];
    }
    if (!n) {
        free(d);
        return json_null();
    }
    qsort(d, n, sizeof *d, cmp_i64);
    o = json_pack("{s:I, s:f, s:I, s:I, s:I, s:I}", "count", (json_int_t)n, "mean_us",
                  sum / (double)n, "p50_us", (json_int_t)d[(n - 1) / 2], "p95_us",
                  (json_int_t)d[(size_t)ceil(0.95 * (double)n) - 1], "max_us", (json_int_t)d[n - 1],
                  "min_us", (json_int_t)d[0]);
    free(d);
    return o;
}

static int cmp_cpuop(const void *x, const void *y)
{
    const struct gs_trace_cpuop *a = x, *b = y;

    if (a->sum_us != b->sum_us)
        return a->sum_us > b->sum_us ? -1 : 1;
    return a->name < b->name ? -1 : a->name > b->name;
}

static json_t *cpuops_json(const struct gs_trace *t)
{
    json_t *arr = json_array();
    struct gs_trace_cpuop *v = malloc((t->n_cpuop + 1) * sizeof *v);

    if (!v || !arr) {
        free(v);
        return arr;
    }
    if (t->n_cpuop) {
        memcpy(v, t->cpuop, t->n_cpuop * sizeof *v);
        qsort(v, t->n_cpuop, sizeof *v, cmp_cpuop);
    }
    for (size_t i = 0; i < t->n_cpuop && i < 15; i++)
        json_array_append_new(
            arr, json_pack("{s:s, s:I, s:f, s:f, s:f}", "name", gs_trace_op_name(t, v[i].name),
                           "count", (json_int_t)v[i].count, "sum_us", v[i].sum_us, "mean_us",
                           v[i].sum_us / (double)v[i].count, "max_us", v[i].max_us));
    free(v);
    return arr;
}

/* One rank's document; also returns its overlap states for the job's sums. */
static json_t *rank_json(struct ctx *c, int64_t state[8], int64_t *comp_out, int64_t *comm_out,
                         int64_t *idle_out, int64_t *span_out)
{
    const struct gs_trace *t = c->t;
    json_t *r = json_pack("{s:I, s:s, s:s, s:I, s:I, s:I}", "rank", (json_int_t)t->rank, "file",
                          t->path, "format", t->legacy ? "legacy" : "kineto", "events",
                          (json_int_t)t->n_events, "gpu_activities", (json_int_t)c->n_kept,
                          "profiler_steps", (json_int_t)t->n_step_seen);
    int64_t first = 0, last = 0, busy, comp, comm, span, idle;
    json_t *types, *k;
    char nm[96];

    if (!r)
        return NULL;
    memset(state, 0, 8 * sizeof state[0]);
    json_object_set_new(r, "cpu_ops", cpuops_json(t));
    if (t->n_ops_folded)
        json_object_set_new(r, "cpu_ops_folded",
                            json_pack("{s:I, s:I, s:f, s:f}", "names", (json_int_t)t->n_ops_folded,
                                      "count", (json_int_t)t->ops_folded.count, "sum_us",
                                      t->ops_folded.sum_us, "max_us", t->ops_folded.max_us));
    json_object_set_new(r, "steps", steps_json(c));
    if (t->n_step_omitted)
        json_object_set_new(r, "steps_omitted", json_integer((json_int_t)t->n_step_omitted));
    if (!c->n_kept) {
        json_object_set_new(r, "note",
                            json_string(t->legacy ? "no GPU activity: a CPU-only "
                                                    "trace (the legacy format); CPU "
                                                    "op figures only"
                                                  : "no GPU activity in the trace; "
                                                    "CPU op figures only"));
        *comp_out = *comm_out = *idle_out = *span_out = 0;
        return r;
    }
    busy = union_len(c, ALL_KINDS, &first, &last);
    comp = union_len(c, GS_TRACE_COMP, NULL, NULL);
    comm = union_len(c, GS_TRACE_COMM, NULL, NULL);
    span = last - first;
    idle = span - busy;
    json_object_set_new(
        r, "temporal",
        json_pack("{s:I, s:I, s:I, s:I, s:o, s:o, s:o}", "idle_us", (json_int_t)idle, "compute_us",
                  (json_int_t)comp, "non_compute_us", (json_int_t)(span - comp - idle),
                  "kernel_span_us", (json_int_t)span, "idle_pct", pct((double)idle, (double)span),
                  "compute_pct", pct((double)comp, (double)span), "non_compute_pct",
                  pct((double)(span - comp - idle), (double)span)));
    overlap_states(c, state);
    types = json_array();
    {
        int64_t tot = 0;

        int ord[7];

        states_by_time(state, ord);
        for (int s = 1; s < 8; s++)
            tot += state[s];
        for (int i = 0; i < 7; i++) {
            int s = ord[i];

            if (!state[s])
                continue;
            state_name(s, nm, sizeof nm);
            json_array_append_new(types, json_pack("{s:s, s:I, s:o}", "type", nm, "sum_us",
                                                   (json_int_t)state[s], "pct",
                                                   pct((double)state[s], (double)tot)));
        }
    }
    json_object_set_new(r, "kernel_types", types);
    json_object_set_new(r, "communication_us", json_integer(comm));
    json_object_set_new(r, "comm_comp_overlap_pct",
                        pct((double)(state[3] + state[7]), (double)comm));
    k = kernels_json(c);
    if (k) {
        json_object_update(r, k);
        json_decref(k);
    }
    json_object_set_new(r, "idle_by_stream", idle_by_stream(c));
    json_object_set_new(r, "memcpy", memcpy_json(c, span));
    json_object_set_new(r, "launch_delay", launch_json(c));
    *comp_out = comp;
    *comm_out = comm;
    *idle_out = idle;
    *span_out = span;
    return r;
}

/* A job analysed one rank at a time: each rank's document and the sums the job's tables need,
 * so that a caller can free a rank's trace before it loads the next. */
struct jrank {
    long long rank; /* -1 until gs_trace_job_done numbers it */
    size_t order;   /* add order: the tie-break of the rank sort */
    json_t *doc;
    int64_t comp, comm, idle, span;
};

struct gs_trace_job {
    struct gs_trace_opts o;
    struct jrank *r;
    size_t n, cap;
    int64_t states[8];
};

struct gs_trace_job *gs_trace_job_new(const struct gs_trace_opts *o)
{
    struct gs_trace_job *j = calloc(1, sizeof *j);

    if (!j)
        return NULL;
    if (o)
        j->o = *o;
    else
        gs_trace_opts_default(&j->o);
    return j;
}

void gs_trace_job_free(struct gs_trace_job *j)
{
    if (!j)
        return;
    for (size_t i = 0; i < j->n; i++)
        json_decref(j->r[i].doc);
    free(j->r);
    free(j);
}

int gs_trace_job_add(struct gs_trace_job *j, struct gs_trace *t)
{
    struct ctx c;
    int64_t st[8];
    struct jrank *r;

    if (j->n == j->cap) {
        size_t cap = j->cap ? j->cap * 2 : 16;
        struct jrank *p = realloc(j->r, cap * sizeof *p);

        if (!p)
            return GS_ENOMEM;
        j->r = p;
        j->cap = cap;
    }
    r = &j->r[j->n];
    memset(r, 0, sizeof *r);
    if (ctx_build(&c, t, &j->o) != 0) {
        free(c.st);
        return GS_ENOMEM;
    }
    r->doc = rank_json(&c, st, &r->comp, &r->comm, &r->idle, &r->span);
    free(c.st);
    if (!r->doc)
        return GS_ENOMEM;
    r->rank = t->rank;
    r->order = j->n++;
    for (int s = 1; s < 8; s++)
        j->states[s] += st[s];
    return GS_OK;
}

static int cmp_jrank(const void *x, const void *y)
{
    const struct jrank *a = x, *b = y;

    if (a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    return a->order < b->order ? -1 : a->order > b->order;
}

/* The straggler rule's input: each rank's compute time (the temporal breakdown's) over the
 * traced window, in ms, its communication time as its wait. Returns sr. */
static const struct gs_straggler_rank *sr_fill(struct gs_straggler_rank *sr,
                                               const struct gs_trace_job *j)
{
    for (size_t i = 0; i < j->n; i++)
        sr[i] = (struct gs_straggler_rank){.busy_ms = (double)j->r[i].comp / 1000.0,
                                           .wait_ms = (double)j->r[i].comm / 1000.0};
    return sr;
}

json_t *gs_trace_job_done(struct gs_trace_job *j)
{
    json_t *doc = json_object(), *arr = json_array(), *types = json_array(), *strag = json_array();
    int64_t tot = 0;
    struct gs_straggler_rank *sr = NULL;
    struct gs_straggler top = {.idx = -1};
    size_t n = j->n;
    char nm[96];
    long long next = 0;

    if (!doc || !arr || !types || !strag) {
        json_decref(doc);
        json_decref(arr);
        json_decref(types);
        json_decref(strag);
        return NULL;
    }
    /* ranks without a number get the next free ones, in the order added */
    for (size_t i = 0; i < n; i++)
        if (j->r[i].rank >= next)
            next = j->r[i].rank + 1;
    for (size_t i = 0; i < n; i++)
        if (j->r[i].rank < 0) {
            j->r[i].rank = next++;
            json_object_set_new(j->r[i].doc, "rank", json_integer(j->r[i].rank));
        }
    if (n)
        qsort(j->r, n, sizeof *j->r, cmp_jrank);
    for (int s = 1; s < 8; s++)
        tot += j->states[s];
    {
        int ord[7];

        states_by_time(j->states, ord);
        for (int i = 0; i < 7; i++) {
            int s = ord[i];

            if (!j->states[s])
                continue;
            state_name(s, nm, sizeof nm);
            json_array_append_new(types, json_pack("{s:s, s:I, s:o}", "type", nm, "sum_us",
                                                   (json_int_t)j->states[s], "pct",
                                                   pct((double)j->states[s], (double)tot)));
        }
    }
    /* stragglers: the one rule (base/straggler.h): each rank's compute over the traced window
     * against the median of the other ranks' (leave-one-out); the rank computing longest is
     * the straggler when that rule says so */
    if (n) {
        sr = malloc(n * sizeof *sr);
        if (!sr || gs_straggler_find(sr_fill(sr, j), n, &top) < 0) {
            free(sr);
            json_decref(doc);
            json_decref(arr);
            json_decref(types);
            json_decref(strag);
            return NULL;
        }
    }
    for (size_t i = 0; i < n; i++) {
        const struct jrank *r = &j->r[i];
        double ratio = NAN;

        if (gs_straggler_ratio(sr, n, i, &ratio) < 0)
            ratio = NAN;
        json_array_append(arr, r->doc);
        json_array_append_new(
            strag, json_pack("{s:I, s:I, s:I, s:I, s:I, s:o, s:b}", "rank", (json_int_t)r->rank,
                             "compute_us", (json_int_t)r->comp, "communication_us",
                             (json_int_t)r->comm, "idle_us", (json_int_t)r->idle, "kernel_span_us",
                             (json_int_t)r->span, "compute_vs_others_pct",
                             isfinite(ratio) ? json_real(100.0 * (ratio - 1.0)) : json_null(),
                             "straggler", top.straggler && top.idx == (long)i));
    }
    free(sr);
    json_object_set_new(doc, "ranks", arr);
    json_object_set_new(doc, "job",
                        json_pack("{s:I, s:o, s:o}", "ranks", (json_int_t)n, "kernel_types", types,
                                  "stragglers", strag));
    return doc;
}

json_t *gs_trace_analyze(struct gs_trace *const *in, size_t n, const struct gs_trace_opts *o)
{
    struct gs_trace_job *j = gs_trace_job_new(o);
    json_t *doc = NULL;

    if (!j)
        return NULL;
    for (size_t i = 0; i < n; i++)
        if (gs_trace_job_add(j, in[i]) != GS_OK)
            goto out;
    doc = gs_trace_job_done(j);
out:
    gs_trace_job_free(j);
    return doc;
}

json_t *gs_trace_kernel_totals(struct gs_trace *const *ranks, size_t n,
                               const struct gs_trace_opts *o)
{
    struct gs_trace_opts def;
    json_t *out = json_object();

    if (!o) {
        gs_trace_opts_default(&def);
        o = &def;
    }
    for (size_t r = 0; r < n && out; r++) {
        struct ctx c;

        if (ctx_build(&c, ranks[r], o) != 0) {
            free(c.st);
            json_decref(out);
            return NULL;
        }
        for (size_t i = 0; i < c.n; i++) {
            const struct gs_trace_gpu *a = &c.a[i];
            const char *nm;
            json_t *row;

            if (!a->keep || a->kind == GS_TRACE_SYNC)
                continue;
            nm = gs_trace_name(c.t, a->name);
            row = json_object_get(out, nm);
            if (!row) {
                row = json_pack("{s:s, s:I, s:I}", "type", kind_name(a->kind), "count",
                                (json_int_t)0, "sum_us", (json_int_t)0);
                if (!row || json_object_set_new(out, nm, row) != 0)
                    continue;
            }
            json_object_set_new(
                row, "count", json_integer(json_integer_value(json_object_get(row, "count")) + 1));
            json_object_set_new(row, "sum_us",
                                json_integer(json_integer_value(json_object_get(row, "sum_us")) +
                                             (a->end - a->ts)));
        }
        free(c.st);
    }
    return out;
}
