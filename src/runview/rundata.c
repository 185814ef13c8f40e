/*
 * rundata.c - gathers one training run for the HTML report and the comparison: the report
 * document, the step records (steps.jsonl or the agent's /api/v1/runs/ID/steps), the device
 * samples of the run's GPUs over the run (samples.db, opened read-only, or the agent's
 * /api/v1/history) and logged values (steps.jsonl or /api/v1/runs/ID/logs). Everything is
 * turned into small columnar JSON arrays with times relative to the run's start; long runs
 * are cut to bucket means (rundata.h).
 *
 * The run directory is outside input: every line of steps.jsonl is checked and an error
 * names the file and line; samples.db is read through src/store/samples.c (the history's
 * application_id checked, read-only, no symlink followed, never written).
 */
#include "runview/rundata.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/agent_client.h"
#include "gpuscope/gs_run.h"
#include "run/agg.h"
#include "run/record.h"
#include "store/samples.h"

#define AGENT_TIMEOUT_MS 5000

/* The phases a step record may carry (src/run/record.h "ms"), in the page's order. */
/* The phases a step record may carry (gs_run.h GS_PHASES); page_phase(k) is the k-th in the
 * page's order. */
#define N_PHASES ((size_t)GS_PH_ALL)

static const char *page_phase(size_t k)
{
    return gs_phase_name(gs_phase_page_order((int)k));
}

/* One step record as the page needs it; NaN = absent. */
struct step {
    double t0, t1, step, samples, tokens;
    int rank;
    double ms[N_PHASES];
};

struct steps {
    struct step *v;
    size_t n, cap;
};

/* One device sample of one GPU. */
struct sample {
    double t, util, mem, power, temp; /* %, GiB, W, degrees C; NaN = absent */
};

struct gpu_series {
    int index;
    struct sample *v;
    size_t n, cap;
};

/* One logged record: its step, time and up to LOG_KEYS values. */
#define LOG_KEYS 16
struct logs {
    size_t n, cap;
    double *step, *t;
    double *val[LOG_KEYS];
    char *key[LOG_KEYS];
    unsigned nkeys;
};

static json_t *num_or_null(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

/* v to `digits` significant digits, or to a multiple of `quantum` (whichever is coarser):
 * what a chart can show, and what keeps the page small. */
static double round_to(double v, int digits, double quantum)
{
    if (!isfinite(v) || v == 0)
        return v;
    double mag = pow(10.0, floor(log10(fabs(v))) + 1 - digits);
    double q = mag > quantum ? mag : quantum;
    return round(v / q) * q;
}

static json_t *rnum(double v, int digits, double quantum)
{
    return num_or_null(round_to(v, digits, quantum));
}

static char *xstrdup(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* ---- steps ---- */

static int steps_push(struct steps *s, const struct step *x)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        struct step *v = realloc(s->v, cap * sizeof *v);
        if (!v)
            return -1;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = *x;
    return 0;
}

static double jnum(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static int cmp_step(const void *a, const void *b)
{
    const struct step *x = a, *y = b;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    if (x->t0 != y->t0)
        return x->t0 < y->t0 ? -1 : 1;
    return (x->step > y->step) - (x->step < y->step);
}

/* Mean of the finite values of a column over v[lo..hi). */
#define BUCKET_MEAN(v, lo, hi, field, out)                                                         \
    do {                                                                                           \
        double sum_ = 0;                                                                           \
        size_t m_ = 0;                                                                             \
        for (size_t i_ = (lo); i_ < (hi); i_++)                                                    \
            if (isfinite((v)[i_].field)) {                                                         \
                sum_ += (v)[i_].field;                                                             \
                m_++;                                                                              \
            }                                                                                      \
        (out) = m_ ? sum_ / (double)m_ : NAN;                                                      \
    } while (0)

/* The sum of the finite values of a count column over v[lo..hi), NaN when none is known. */
#define BUCKET_SUM(v, lo, hi, field, out)                                                          \
    do {                                                                                           \
        double sum_ = 0;                                                                           \
        int any_ = 0;                                                                              \
        for (size_t i_ = (lo); i_ < (hi); i_++)                                                    \
            if (isfinite((v)[i_].field)) {                                                         \
                sum_ += (v)[i_].field;                                                             \
                any_ = 1;                                                                          \
            }                                                                                      \
        (out) = any_ ? sum_ : NAN;                                                                 \
    } while (0)

/* The steps as columns, at most GS_RUNDATA_MAX_STEPS rows: consecutive steps of one rank are
 * merged into bucket means (phases) and sums (samples, tokens) when there are more. */
static json_t *steps_json(struct steps *s, double base)
{
    size_t per = (s->n + GS_RUNDATA_MAX_STEPS - 1) / GS_RUNDATA_MAX_STEPS;
    static const char *const head[] = {"rank", "step", "t0", "t1", "samples", "tokens"};
    enum { N_HEAD = sizeof head / sizeof head[0] };
    json_t *o = json_object(), *cols[N_PHASES + N_HEAD];
    size_t kept = 0;

    if (per < 1)
        per = 1;
    qsort(s->v, s->n, sizeof *s->v, cmp_step);
    for (size_t c = 0; c < N_HEAD; c++)
        json_object_set_new(o, head[c], cols[c] = json_array());
    for (size_t p = 0; p < N_PHASES; p++)
        json_object_set_new(o, page_phase(p), cols[N_HEAD + p] = json_array());
    for (size_t i = 0; i < s->n;) {
        size_t j = i + 1;
        while (j < s->n && j - i < per && s->v[j].rank == s->v[i].rank)
            j++;
        double samples, tokens;
        BUCKET_SUM(s->v, i, j, samples, samples);
        BUCKET_SUM(s->v, i, j, tokens, tokens);
        json_array_append_new(cols[0], json_integer(s->v[i].rank));
        json_array_append_new(cols[1], num_or_null(s->v[j - 1].step));
        json_array_append_new(cols[2], rnum(s->v[i].t0 - base, 15, 1e-3));
        json_array_append_new(cols[3], rnum(s->v[j - 1].t1 - base, 15, 1e-3));
        json_array_append_new(cols[4], num_or_null(samples));
        json_array_append_new(cols[5], num_or_null(tokens));
        for (size_t p = 0; p < N_PHASES; p++) {
            double sum = 0;
            size_t m = 0;
            for (size_t k = i; k < j; k++)
                if (isfinite(s->v[k].ms[p])) {
                    sum += s->v[k].ms[p];
                    m++;
                }
            json_array_append_new(cols[N_HEAD + p],
                                  m ? rnum(sum / (double)m, 4, 1e-4) : json_null());
        }
        kept++;
        i = j;
    }
    json_object_set_new(o, "n", json_integer((json_int_t)s->n));
    json_object_set_new(o, "kept", json_integer((json_int_t)kept));
    json_object_set_new(o, "bucket", json_integer((json_int_t)per));
    return o;
}

/* A step record of steps.jsonl (src/run/record.h, as `gpuscope run` wrote it). */
static void step_from_record(const json_t *r, struct step *x)
{
    const json_t *ms = json_object_get(r, "ms");
    const json_t *rank = json_object_get(r, "rank");
    x->t0 = jnum(r, "t0");
    x->t1 = jnum(r, "t1");
    x->step = jnum(r, "step");
    x->samples = jnum(r, "samples");
    x->tokens = jnum(r, "tokens");
    if (!(x->tokens > 0)) /* the record's 0 (or a bad value): unknown */
        x->tokens = NAN;
    x->rank = json_is_integer(rank) ? (int)json_integer_value(rank) : 0;
    for (size_t p = 0; p < N_PHASES; p++)
        x->ms[p] = jnum(ms, page_phase(p));
}

/* A row of the agent's /api/v1/runs/ID/steps ("data_ms", "t_begin", ...). */
static void step_from_agent(const json_t *r, struct step *x)
{
    char key[64];
    const json_t *rank = json_object_get(r, "rank");
    x->t0 = jnum(r, "t_begin");
    x->t1 = jnum(r, "t_end");
    x->step = jnum(r, "step");
    x->samples = jnum(r, "samples");
    x->tokens = jnum(r, "tokens"); /* null: not carried, or stored before history schema v6 */
    if (!(x->tokens > 0))
        x->tokens = NAN;
    x->rank = json_is_integer(rank) ? (int)json_integer_value(rank) : 0;
    for (size_t p = 0; p < N_PHASES; p++) {
        snprintf(key, sizeof key, "%s_ms", page_phase(p));
        x->ms[p] = jnum(r, key);
    }
}

/* ---- logs ---- */

static int logs_key(struct logs *l, const char *k)
{
    for (unsigned i = 0; i < l->nkeys; i++)
        if (strcmp(l->key[i], k) == 0)
            return (int)i;
    if (l->nkeys == LOG_KEYS)
        return -1;
    l->key[l->nkeys] = strdup(k);
    l->val[l->nkeys] = malloc((l->cap ? l->cap : 1) * sizeof(double));
    if (!l->key[l->nkeys] || !l->val[l->nkeys]) {
        free(l->key[l->nkeys]);
        free(l->val[l->nkeys]);
        return -2;
    }
    for (size_t i = 0; i < l->n; i++)
        l->val[l->nkeys][i] = NAN;
    return (int)l->nkeys++;
}

static int logs_grow(struct logs *l)
{
    if (l->n < l->cap)
        return 0;
    size_t cap = l->cap ? l->cap * 2 : 64;
    double *p;
    if (!(p = realloc(l->step, cap * sizeof *p)))
        return -1;
    l->step = p;
    if (!(p = realloc(l->t, cap * sizeof *p)))
        return -1;
    l->t = p;
    for (unsigned k = 0; k < l->nkeys; k++) {
        if (!(p = realloc(l->val[k], cap * sizeof *p)))
            return -1;
        l->val[k] = p;
    }
    l->cap = cap;
    return 0;
}

/* A "log" record: {"type":"log","step":N,"t":T,"values":{"loss":1.2,"learning_rate":1e-4}}. */
static int logs_add(struct logs *l, const json_t *r)
{
    const json_t *vals = json_object_get(r, "values");
    const char *k;
    const json_t *v;
    if (!json_is_object(vals) || logs_grow(l) < 0)
        return json_is_object(vals) ? -1 : 0;
    size_t i = l->n;
    l->step[i] = jnum(r, "step");
    l->t[i] = jnum(r, "t");
    for (unsigned j = 0; j < l->nkeys; j++)
        l->val[j][i] = NAN;
    json_object_foreach((json_t *)vals, k, v)
    {
        if (!json_is_number(v))
            continue;
        int c = logs_key(l, k);
        if (c == -2)
            return -1;
        if (c >= 0)
            l->val[c][i] = json_number_value(v);
    }
    l->n++;
    return 0;
}

static void logs_free(struct logs *l)
{
    free(l->step);
    free(l->t);
    for (unsigned k = 0; k < l->nkeys; k++) {
        free(l->val[k]);
        free(l->key[k]);
    }
}

/* Log records in step order as columns; bucket means beyond GS_RUNDATA_MAX_LOGS. */
static json_t *logs_json(struct logs *l, double base)
{
    /* insertion order is arrival order; sort an index by step (stable for equal steps) */
    size_t *ix = malloc((l->n ? l->n : 1) * sizeof *ix);
    json_t *o = json_object(), *st = json_array(), *tt = json_array(), *vals = json_object();
    json_t *cols[LOG_KEYS];
    size_t per = (l->n + GS_RUNDATA_MAX_LOGS - 1) / GS_RUNDATA_MAX_LOGS, kept = 0;
    if (!ix)
        return o;
    for (size_t i = 0; i < l->n; i++)
        ix[i] = i;
    for (size_t i = 1; i < l->n; i++) { /* insertion sort: logs are nearly sorted */
        size_t v = ix[i], j = i;
        while (j > 0 && l->step[ix[j - 1]] > l->step[v]) {
            ix[j] = ix[j - 1];
            j--;
        }
        ix[j] = v;
    }
    per = per ? per : 1;
    for (unsigned k = 0; k < l->nkeys; k++)
        json_object_set_new(vals, l->key[k], cols[k] = json_array());
    for (size_t i = 0; i < l->n; i += per) {
        size_t j = i + per < l->n ? i + per : l->n;
        json_array_append_new(st, num_or_null(l->step[ix[j - 1]]));
        json_array_append_new(tt, rnum(l->t[ix[j - 1]] - base, 15, 1e-3));
        for (unsigned k = 0; k < l->nkeys; k++) {
            double sum = 0;
            size_t m = 0;
            for (size_t q = i; q < j; q++)
                if (isfinite(l->val[k][ix[q]])) {
                    sum += l->val[k][ix[q]];
                    m++;
                }
            json_array_append_new(cols[k], m ? rnum(sum / (double)m, 7, 0) : json_null());
        }
        kept++;
    }
    free(ix);
    json_object_set_new(o, "step", st);
    json_object_set_new(o, "t", tt);
    json_object_set_new(o, "values", vals);
    json_object_set_new(o, "n", json_integer((json_int_t)l->n));
    json_object_set_new(o, "kept", json_integer((json_int_t)kept));
    return o;
}

/* ---- steps.jsonl ---- */

static int read_steps_file(const char *path, struct steps *s, struct logs *l, struct gs_err *err)
{
    FILE *f = fopen(path, "re");
    char *line = NULL;
    size_t cap = 0, lineno = 0;
    ssize_t len;
    int rc = GS_OK;

    if (!f)
        return gs_err_set(err, errno == ENOENT ? GS_ENOTFOUND : GS_EIO, "%s: %s", path,
                          strerror(errno));
    while ((len = getline(&line, &cap, f)) >= 0) {
        json_error_t je;
        json_t *r;
        int cut = len > 0 && line[len - 1] != '\n'; /* the last line, without its end */
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            len--;
        if (len == 0)
            continue;
        r = json_loadb(line, (size_t)len, JSON_REJECT_DUPLICATES, &je);
        if (!r && cut)
            break; /* cut by a killed gpuscope run or a full disk: the lines before count */
        if (!r || !json_is_object(r)) {
            rc = gs_err_set(err, GS_EPARSE, "%s:%zu: %s", path, lineno,
                            r ? "not a JSON object" : je.text);
            json_decref(r);
            break;
        }
        const char *type = json_string_value(json_object_get(r, "type"));
        if (type && strcmp(type, "step") == 0) {
            struct step x;
            step_from_record(r, &x);
            if (!isfinite(x.t0) || !isfinite(x.t1)) {
                rc = gs_err_set(err, GS_EPARSE, "%s:%zu: step record without t0/t1", path, lineno);
                json_decref(r);
                break;
            }
            if (steps_push(s, &x) < 0)
                rc = gs_err_set(err, GS_ENOMEM, "%s:%zu: out of memory", path, lineno);
        } else if (type && strcmp(type, "log") == 0 && l) {
            if (logs_add(l, r) < 0)
                rc = gs_err_set(err, GS_ENOMEM, "%s:%zu: out of memory", path, lineno);
        }
        json_decref(r);
        if (rc != GS_OK)
            break;
    }
    if (rc == GS_OK && ferror(f))
        rc = gs_err_set(err, GS_EIO, "%s: read error", path);
    free(line);
    fclose(f);
    return rc;
}

/* ---- device samples ---- */

static struct gpu_series *series_for(struct gpu_series **g, size_t *n, int index)
{
    for (size_t i = 0; i < *n; i++)
        if ((*g)[i].index == index)
            return &(*g)[i];
    struct gpu_series *v = realloc(*g, (*n + 1) * sizeof *v);
    if (!v)
        return NULL;
    *g = v;
    memset(&v[*n], 0, sizeof v[*n]);
    v[*n].index = index;
    return &v[(*n)++];
}

static int series_push(struct gpu_series *g, const struct sample *x)
{
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 256;
        struct sample *v = realloc(g->v, cap * sizeof *v);
        if (!v)
            return -1;
        g->v = v;
        g->cap = cap;
    }
    g->v[g->n++] = *x;
    return 0;
}

static int run_has_gpu(const json_t *report, int index, const char **name)
{
    size_t i;
    const json_t *g;
    json_array_foreach(json_object_get(report, "gpus"), i, g)
    {
        const json_t *ix = json_object_get(g, "index");
        if (json_is_integer(ix) && json_integer_value(ix) == index) {
            if (name)
                *name = json_string_value(json_object_get(g, "name"));
            return 1;
        }
    }
    return 0;
}

/* The run's time range from its report: run.start_time .. run.end_time, else the steps'. */
static int run_range(const json_t *report, double *from, double *to)
{
    const json_t *run = json_object_get(report, "run");
    *from = jnum(run, "start_time");
    *to = jnum(run, "end_time");
    if (!isfinite(*from))
        *from = jnum(run, "steps_from");
    if (!isfinite(*to))
        *to = jnum(run, "steps_to");
    return isfinite(*from) && isfinite(*to) && *to >= *from;
}

static int cmp_sample(const void *a, const void *b)
{
    const struct sample *x = a, *y = b;
    return (x->t > y->t) - (x->t < y->t);
}

static json_t *gpus_json(struct gpu_series *g, size_t n, const json_t *report, double base)
{
    json_t *arr = json_array();
    size_t budget = n ? GS_RUNDATA_MAX_SAMPLES / n : 0;
    if (budget < 300)
        budget = 300;
    for (size_t i = 0; i < n; i++) {
        struct gpu_series *s = &g[i];
        const char *name = NULL;
        size_t per = (s->n + budget - 1) / budget, kept = 0;
        json_t *o = json_object(), *t = json_array(), *u = json_array(), *m = json_array(),
               *p = json_array(), *c = json_array();
        per = per ? per : 1;
        qsort(s->v, s->n, sizeof *s->v, cmp_sample);
        run_has_gpu(report, s->index, &name);
        for (size_t a = 0; a < s->n; a += per) {
            size_t b = a + per < s->n ? a + per : s->n;
            double tv, uv, mv, pv, cv;
            BUCKET_MEAN(s->v, a, b, t, tv);
            BUCKET_MEAN(s->v, a, b, util, uv);
            BUCKET_MEAN(s->v, a, b, mem, mv);
            BUCKET_MEAN(s->v, a, b, power, pv);
            BUCKET_MEAN(s->v, a, b, temp, cv);
            json_array_append_new(t, rnum(tv - base, 15, 1e-3));
            json_array_append_new(u, rnum(uv, 4, 0.01));
            json_array_append_new(m, rnum(mv, 4, 0.001));
            json_array_append_new(p, rnum(pv, 4, 0.01));
            json_array_append_new(c, rnum(cv, 4, 0.01));
            kept++;
        }
        json_object_set_new(o, "index", json_integer(s->index));
        json_object_set_new(o, "name", name ? json_string(name) : json_null());
        json_object_set_new(o, "n", json_integer((json_int_t)s->n));
        json_object_set_new(o, "kept", json_integer((json_int_t)kept));
        json_object_set_new(o, "t", t);
        json_object_set_new(o, "util", u);
        json_object_set_new(o, "mem", m);
        json_object_set_new(o, "power", p);
        json_object_set_new(o, "temp", c);
        json_array_append_new(arr, o);
    }
    return arr;
}

static void series_free(struct gpu_series *g, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(g[i].v);
    free(g);
}

/* What a read of samples.db fills: the series of the run's GPUs. */
struct samples_ctx {
    const char *path;
    const json_t *report;
    struct gpu_series **g;
    size_t *n;
    struct gs_err *err;
};

static int sample_row(void *ctx, const struct gs_store_sample_row *row)
{
    struct samples_ctx *c = ctx;
    int gpu = (int)row->gpu;
    struct gpu_series *gs;

    if (!run_has_gpu(c->report, gpu, NULL))
        return 0;
    struct sample x = {
        .t = row->t,
        .util = row->util_ratio * 100.0,
        .mem = row->mem_used_bytes * (1.0 / 1073741824.0),
        .power = row->power_w,
        .temp = row->temp_c,
    };
    gs = series_for(c->g, c->n, gpu);
    if (!gs || series_push(gs, &x) < 0)
        return gs_err_set(c->err, GS_ENOMEM, "%s: out of memory", c->path);
    return 0;
}

/* The samples of the run's GPUs over the run (and a second either side) from a history file,
 * read-only (store/samples.h). */
static int read_samples_db(const char *path, const json_t *report, struct gpu_series **g, size_t *n,
                           struct gs_err *err)
{
    struct samples_ctx c = {path, report, g, n, err};
    double from, to;

    if (!run_range(report, &from, &to))
        return GS_OK;
    return gs_store_samples_read(path, from - 1.0, to + 1.0, sample_row, &c, err);
}

/* ---- files ---- */

static int read_file(const char *path, size_t max, char **out, size_t *len, struct gs_err *err)
{
    FILE *f = fopen(path, "re");
    struct stat sb;
    if (!f)
        return gs_err_set(err, errno == ENOENT ? GS_ENOTFOUND : GS_EIO, "%s: %s", path,
                          strerror(errno));
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return gs_err_set(err, GS_EINVAL, "%s: not a regular file", path);
    }
    if ((size_t)sb.st_size > max) {
        fclose(f);
        return gs_err_set(err, GS_EINVAL, "%s: larger than %zu bytes", path, max);
    }
    char *buf = malloc((size_t)sb.st_size + 1);
    size_t n = buf ? fread(buf, 1, (size_t)sb.st_size, f) : 0;
    int bad = !buf || ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return gs_err_set(err, buf ? GS_EIO : GS_ENOMEM, "%s: read error", path);
    }
    buf[n] = 0;
    *out = buf;
    if (len)
        *len = n;
    return GS_OK;
}

static int parse_report(struct gs_rundata *rd, const char *where, struct gs_err *err)
{
    json_error_t je;
    rd->report = json_loads(rd->report_text, JSON_REJECT_DUPLICATES, &je);
    if (!rd->report)
        return gs_err_set(err, GS_EPARSE, "%s:%d: not JSON: %s", where, je.line, je.text);
    if (!json_is_object(rd->report) || !json_is_string(json_object_get(rd->report, "schema")))
        return gs_err_set(err, GS_EPARSE, "%s: not a gpuscope run report (no \"schema\")", where);
    const char *schema = json_string_value(json_object_get(rd->report, "schema"));
    if (schema[0] != '1' || (schema[1] != '.' && schema[1] != 0))
        return gs_err_set(err, GS_EPARSE, "%s: report schema %s; this gpuscope reads 1.x", where,
                          schema);
    double from, to;
    rd->t_base = run_range(rd->report, &from, &to) ? from : 0;
    return GS_OK;
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static char *data_url(const char *mime, const unsigned char *p, size_t n)
{
    size_t hl = strlen(mime) + 14;
    char *out = malloc(hl + (n + 2) / 3 * 4 + 1), *o;
    if (!out)
        return NULL;
    o = out + sprintf(out, "data:%s;base64,", mime);
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        *o++ = b64[v >> 18 & 63];
        *o++ = b64[v >> 12 & 63];
        *o++ = i + 1 < n ? b64[v >> 6 & 63] : '=';
        *o++ = i + 2 < n ? b64[v & 63] : '=';
    }
    *o = 0;
    return out;
}

int gs_rundata_load_files(struct gs_rundata *rd, const char *steps_path, const char *db_path,
                          struct gs_err *err)
{
    struct steps s = {0};
    struct logs l = {0};
    struct gpu_series *g = NULL;
    size_t ng = 0;
    int rc = GS_OK;

    if (steps_path && access(steps_path, F_OK) == 0)
        rc = read_steps_file(steps_path, &s, &l, err);
    if (rc == GS_OK && s.n)
        rd->steps = steps_json(&s, rd->t_base);
    if (rc == GS_OK && l.n)
        rd->logs = logs_json(&l, rd->t_base);
    if (rc == GS_OK && db_path && access(db_path, F_OK) == 0)
        rc = read_samples_db(db_path, rd->report, &g, &ng, err);
    if (rc == GS_OK) {
        rd->gpus = gpus_json(g, ng, rd->report, rd->t_base);
        if (!ng)
            rd->gpus_note = strdup(db_path && access(db_path, F_OK) == 0
                                       ? "samples.db has no samples of the run's GPUs over the "
                                         "run (no GPU belonged to it)"
                                       : "no samples.db: no device samples");
    }
    free(s.v);
    logs_free(&l);
    series_free(g, ng);
    return rc;
}

/* One line of steps.jsonl (run.c: the record as sent, with who sent it in front) into the
 * aggregate; -1 when it is not a record. */
static int refeed_line(struct gs_agg *agg, const char *line, size_t len)
{
    json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
    json_int_t pid, uid;
    struct gs_record rec;
    struct gs_err e;
    char *text;
    int rc = -1;

    if (!json_is_object(o))
        goto out;
    pid = json_integer_value(json_object_get(o, "peer_pid"));
    uid = json_integer_value(json_object_get(o, "peer_uid"));
    json_object_del(o, "peer_pid");
    json_object_del(o, "peer_uid");
    json_object_del(o, "conn");
    text = json_dumps(o, JSON_COMPACT);
    if (text && gs_record_parse(text, strlen(text), &rec, &e) == GS_OK) {
        rc = 0;
        if (rec.type == GS_REC_HELLO)
            gs_agg_hello(agg, &rec.u.hello, (pid_t)pid, (uid_t)uid);
        else if (rec.type == GS_REC_STEP)
            rc = gs_agg_step(agg, &rec.u.step) == 0 ? 0 : -1;
        else if (rec.type == GS_REC_END)
            gs_agg_end(agg, &rec.u.end);
    }
    free(text);
out:
    json_decref(o);
    return rc;
}

/* The report of an interrupted run directory, rebuilt from its steps.jsonl into
 * rd->report_text (see the head of this file). GS_ENOTFOUND when there is no steps.jsonl. */
static int rebuild_report(const char *dir, const char *spath, struct gs_rundata *rd,
                          struct gs_err *err)
{
    struct gs_report_meta meta = {.exit_code = -1, .source = "gpuscope-run"};
    FILE *f = fopen(spath, "re");
    struct gs_agg *agg;
    long long lines = 0, bad = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    json_t *rep, *ro;

    if (!f)
        return gs_err_set(err, errno == ENOENT ? GS_ENOTFOUND : GS_EIO,
                          "%s: no metrics_report.json and %s: %s (not a run directory of "
                          "gpuscope run, or the run has not started)",
                          dir, spath, strerror(errno));
    agg = gs_agg_new();
    if (!agg) {
        fclose(f);
        return gs_err_set(err, GS_ENOMEM, "out of memory");
    }
    while ((len = getline(&line, &cap, f)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            len--;
        if (len == 0)
            continue;
        lines++;
        /* a line cut by the kill or a full disk is left out and counted */
        if (refeed_line(agg, line, (size_t)len) != 0)
            bad++;
    }
    free(line);
    fclose(f);
    rep = gs_agg_report(agg, &meta);
    gs_agg_free(agg);
    ro = json_object_get(rep, "run");
    if (!json_is_object(ro)) {
        json_decref(rep);
        return gs_err_set(err, GS_ENOMEM, "out of memory");
    }
    json_object_set_new(ro, "interrupted", json_true());
    json_object_set_new(ro, "rebuilt_from", json_string("steps.jsonl"));
    json_object_set_new(ro, "rebuilt_records", json_integer(lines - bad));
    json_object_set_new(ro, "rebuilt_lines_skipped", json_integer(bad));
    rd->report_text = json_dumps(rep, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(rep);
    if (!rd->report_text)
        return gs_err_set(err, GS_ENOMEM, "out of memory");
    return GS_OK;
}

static int load_dir(const char *dir, unsigned flags, struct gs_rundata *rd, struct gs_err *err)
{
    char path[4096], spath[4096], dpath[4096];
    int rc;

    if (snprintf(path, sizeof path, "%s/metrics_report.json", dir) >= (int)sizeof path)
        return gs_err_set(err, GS_EINVAL, "%s: path too long", dir);
    snprintf(spath, sizeof spath, "%s/steps.jsonl", dir);
    if ((rc = read_file(path, 256u << 20, &rd->report_text, NULL, err)) != GS_OK) {
        if (rc != GS_ENOTFOUND)
            return rc;
        /* gpuscope run did not end (killed): the report rebuilt from what it kept */
        if ((rc = rebuild_report(dir, spath, rd, err)) != GS_OK)
            return rc;
    }
    if ((rc = parse_report(rd, path, err)) != GS_OK)
        return rc;
    rd->origin = xstrdup(dir);
    const char *name =
        json_string_value(json_object_get(json_object_get(rd->report, "run"), "name"));
    if (name && *name) {
        rd->label = strdup(name);
    } else {
        const char *b = dir + strlen(dir);
        while (b > dir && b[-1] == '/')
            b--;
        const char *e = b;
        while (b > dir && b[-1] != '/')
            b--;
        rd->label = e > b ? strndup(b, (size_t)(e - b)) : strdup(dir);
    }
    if (flags & GS_RUNDATA_REPORT_ONLY)
        return GS_OK;
    snprintf(dpath, sizeof dpath, "%s/samples.db", dir);
    if ((rc = gs_rundata_load_files(rd, spath, dpath, err)) != GS_OK)
        return rc;
    snprintf(path, sizeof path, "%s/stacks.svg", dir);
    char *svg = NULL;
    size_t svg_len = 0;
    struct gs_err ig = {0};
    int frc = read_file(path, GS_RUNDATA_MAX_FLAME, &svg, &svg_len, &ig);
    if (frc == GS_OK)
        rd->flamegraph = data_url("image/svg+xml", (const unsigned char *)svg, svg_len);
    else if (frc == GS_EINVAL && access(path, R_OK) == 0)
        rd->flamegraph = strdup("stacks.svg"); /* too big to embed: a link next to the page */
    free(svg);
    return GS_OK;
}

/* ---- the agent ---- */

static int agent_json(const char *sock, const char *path, json_t **out, struct gs_err *err)
{
    char *body = NULL;
    size_t len = 0;
    json_error_t je;
    int rc = gs_agent_client_get(sock, path, AGENT_TIMEOUT_MS, &body, &len, err);
    if (rc != GS_OK)
        return rc;
    *out = json_loadb(body, len, 0, &je);
    free(body);
    if (!*out)
        return gs_err_set(err, GS_EPARSE, "agent %s: not JSON: %s", path, je.text);
    return GS_OK;
}

static const struct {
    const char *metric;
    double scale;
} AGENT_METRICS[] = {
    {"utilization_gpu", 100.0},
    {"memory_used", 1.0 / 1073741824.0},
    {"power_draw", 1.0},
    {"temperature_gpu", 1.0},
};

/* The run's logged values from /api/v1/runs/ID/logs (records of the wire's "log" shape, 1000
 * a page) into rd->logs, as a run directory's steps.jsonl gives them. An agent without them
 * (history off, or older than the endpoint) leaves the page without curves. */
static int agent_logs(const char *sock, const char *id, struct gs_rundata *rd, struct gs_err *err)
{
    struct logs l = {0};
    char path[256];
    long from = 0;
    int rc = GS_OK;

    while (from >= 0 && rc == GS_OK) {
        json_t *page = NULL, *arr;
        const json_t *r;
        size_t i;
        struct gs_err ig = {0};

        snprintf(path, sizeof path, "/api/v1/runs/%s/logs?from=%ld&limit=1000", id, from);
        if (agent_json(sock, path, &page, &ig) != GS_OK)
            break;
        arr = json_object_get(page, "logs");
        json_array_foreach(arr, i, r)
        {
            if (json_is_object(r) && logs_add(&l, r) < 0) {
                rc = gs_err_set(err, GS_ENOMEM, "run %s: out of memory", id);
                break;
            }
        }
        const json_t *next = json_object_get(page, "next");
        from = json_is_integer(next) && json_array_size(arr) ? (long)json_integer_value(next) : -1;
        json_decref(page);
    }
    if (rc == GS_OK && l.n)
        rd->logs = logs_json(&l, rd->t_base);
    logs_free(&l);
    return rc;
}

static int load_agent(const char *id, unsigned flags, struct gs_rundata *rd, struct gs_err *err)
{
    char sock[512], path[256];
    char *body = NULL;
    size_t len = 0;
    int rc;

    if (!gs_agent_client_socket(sock, sizeof sock))
        return gs_err_set(err, GS_ENOTFOUND,
                          "%s: no such run directory, and no local agent socket to ask for run "
                          "%s (GPUSCOPE_HTTP_SOCKET)",
                          id, id);
    snprintf(path, sizeof path, "/api/v1/runs/%s", id);
    if ((rc = gs_agent_client_get(sock, path, AGENT_TIMEOUT_MS, &body, &len, err)) != GS_OK) {
        char msg[GS_ERR_MSG_LEN];
        snprintf(msg, sizeof msg, "%s", err->msg);
        return gs_err_set(err, rc, "run %s: %s", id, msg);
    }
    rd->report_text = body;
    snprintf(path, sizeof path, "agent run %s", id);
    if ((rc = parse_report(rd, path, err)) != GS_OK)
        return rc;
    rd->origin = strdup(path);
    const char *name =
        json_string_value(json_object_get(json_object_get(rd->report, "run"), "name"));
    rd->label = strdup(name && *name ? name : path + 6);
    if (flags & GS_RUNDATA_REPORT_ONLY)
        return GS_OK;

    /* steps, 1000 a page */
    struct steps s = {0};
    long from = 0;
    while (from >= 0) {
        json_t *page = NULL, *arr;
        size_t i;
        const json_t *r;
        snprintf(path, sizeof path, "/api/v1/runs/%s/steps?from=%ld&limit=1000", id, from);
        if (agent_json(sock, path, &page, err) != GS_OK) {
            /* history off: the agent keeps no steps; the report still renders */
            err->rc = GS_OK;
            err->msg[0] = 0;
            break;
        }
        arr = json_object_get(page, "steps");
        json_array_foreach(arr, i, r)
        {
            struct step x;
            step_from_agent(r, &x);
            if (isfinite(x.t0) && isfinite(x.t1) && steps_push(&s, &x) < 0) {
                json_decref(page);
                free(s.v);
                return gs_err_set(err, GS_ENOMEM, "run %s: out of memory", id);
            }
        }
        const json_t *next = json_object_get(page, "next");
        from = json_is_integer(next) && json_array_size(arr) ? (long)json_integer_value(next) : -1;
        json_decref(page);
        if (s.n >= (4u << 20))
            break;
    }
    if (s.n)
        rd->steps = steps_json(&s, rd->t_base);
    free(s.v);
    if ((rc = agent_logs(sock, id, rd, err)) != GS_OK)
        return rc;

    /* device samples of the run's GPUs over the run */
    double t0, t1;
    struct gpu_series *g = NULL;
    size_t ng = 0;
    if (run_range(rd->report, &t0, &t1)) {
        size_t i;
        const json_t *gj;
        json_array_foreach(json_object_get(rd->report, "gpus"), i, gj)
        {
            const json_t *ix = json_object_get(gj, "index");
            if (!json_is_integer(ix))
                continue;
            int gpu = (int)json_integer_value(ix);
            struct gpu_series *gs = series_for(&g, &ng, gpu);
            if (!gs)
                break;
            for (size_t m = 0; m < sizeof AGENT_METRICS / sizeof AGENT_METRICS[0]; m++) {
                json_t *doc = NULL;
                struct gs_err e2 = {0};
                snprintf(path, sizeof path, "/api/v1/history?gpu=%d&metric=%s&from=%.3f&to=%.3f",
                         gpu, AGENT_METRICS[m].metric, t0 - 1.0, t1 + 1.0);
                if (agent_json(sock, path, &doc, &e2) != GS_OK)
                    continue; /* history off or the range pruned: no series */
                size_t k;
                const json_t *pt;
                json_array_foreach(json_object_get(doc, "points"), k, pt)
                {
                    double t = json_number_value(json_array_get(pt, 0));
                    double v = json_number_value(json_array_get(pt, 2)) * AGENT_METRICS[m].scale;
                    /* points of the four metrics share bucket times: merge by time */
                    size_t q = 0;
                    while (q < gs->n && gs->v[q].t != t)
                        q++;
                    if (q == gs->n) {
                        struct sample x = {t, NAN, NAN, NAN, NAN};
                        if (series_push(gs, &x) < 0)
                            break;
                    }
                    double *f[] = {&gs->v[q].util, &gs->v[q].mem, &gs->v[q].power, &gs->v[q].temp};
                    *f[m] = v;
                }
                json_decref(doc);
            }
        }
    }
    /* drop GPUs without any point */
    size_t w = 0;
    for (size_t i = 0; i < ng; i++) {
        if (g[i].n)
            g[w++] = g[i];
        else
            free(g[i].v);
    }
    rd->gpus = gpus_json(g, w, rd->report, rd->t_base);
    if (!w)
        rd->gpus_note = strdup("the agent has no history of the run's GPUs over the run "
                               "(history off, or pruned)");
    series_free(g, w);
    return GS_OK;
}

static int all_digits(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return 0;
    return 1;
}

int gs_rundata_load(const char *what, unsigned flags, struct gs_rundata *out, struct gs_err *err)
{
    struct stat sb;
    memset(out, 0, sizeof *out);
    if (stat(what, &sb) == 0) {
        if (S_ISDIR(sb.st_mode))
            return load_dir(what, flags, out, err);
        /* DIR/metrics_report.json: the directory around it */
        const char *slash = strrchr(what, '/');
        char *dir = slash ? strndup(what, (size_t)(slash - what)) : strdup(".");
        if (!dir)
            return gs_err_set(err, GS_ENOMEM, "out of memory");
        if (slash && slash == what) {
            free(dir);
            dir = strdup("/");
        }
        int rc;
        if (strcmp(slash ? slash + 1 : what, "metrics_report.json") == 0) {
            rc = load_dir(dir, flags, out, err);
        } else {
            /* any other file: a report by itself (no steps, no samples) */
            rc = read_file(what, 256u << 20, &out->report_text, NULL, err);
            if (rc == GS_OK)
                rc = parse_report(out, what, err);
            if (rc == GS_OK) {
                const char *name =
                    json_string_value(json_object_get(json_object_get(out->report, "run"), "name"));
                out->origin = strdup(what);
                out->label = strdup(name && *name ? name : what);
                out->gpus = json_array();
                out->gpus_note = strdup("a report file alone: no device samples");
            }
        }
        free(dir);
        return rc;
    }
    if (all_digits(what))
        return load_agent(what, flags, out, err);
    return gs_err_set(err, GS_ENOTFOUND, "%s: %s", what, strerror(errno));
}

void gs_rundata_free(struct gs_rundata *rd)
{
    if (!rd)
        return;
    free(rd->origin);
    free(rd->label);
    free(rd->report_text);
    json_decref(rd->report);
    json_decref(rd->steps);
    json_decref(rd->gpus);
    free(rd->gpus_note);
    json_decref(rd->logs);
    free(rd->flamegraph);
    memset(rd, 0, sizeof *rd);
}
