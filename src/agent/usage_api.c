/*
 * usage_api.c - /api/v1/usage's parameters, the merge of stored and current rows, the JSON
 * (usage_api.h; docs/api.md is the contract).
 */
#include "agent/usage_api.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/parse.h"
#include "gpuscope/gs_err.h"

static const char *const by_names[] = {"user", "job", "pod", "namespace", "gpu"};

const char *gs_usage_by_name(enum gs_usage_by by)
{
    return (unsigned)by <= GS_USAGE_BY_GPU ? by_names[by] : "?";
}

/* A time: a plain decimal (base/parse.h, as /api/v1/history's numbers) up to 1e11. */
static int parse_time(const char *s, double *out)
{
    double v;

    if (gs_parse_plain_decimal(s, &v) != 0 || v > 1e11)
        return GS_EINVAL;
    *out = v;
    return GS_OK;
}

static int param_error(char *msg, size_t len, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, len, fmt, ap);
    va_end(ap);
    return GS_EINVAL;
}

int gs_usage_req_parse(struct gs_usage_sel *sel, const char *by, const char *from, const char *to,
                       const char *job, double now, char *msg, size_t msg_len)
{
    sel->by = GS_USAGE_BY_USER;
    sel->job = NULL;
    if (by) {
        unsigned i;
        for (i = 0; i <= GS_USAGE_BY_GPU; i++)
            if (strcmp(by, by_names[i]) == 0)
                break;
        if (i > GS_USAGE_BY_GPU)
            return param_error(msg, msg_len,
                               "by: '%.64s' is not one of user, job, pod, namespace, gpu", by);
        sel->by = (enum gs_usage_by)i;
    }
    sel->to = now;
    if (to && parse_time(to, &sel->to) != GS_OK)
        return param_error(msg, msg_len, "to: '%.64s' is not a unix time in seconds", to);
    sel->from = sel->to - GS_USAGE_DEFAULT_RANGE_S;
    if (from && parse_time(from, &sel->from) != GS_OK)
        return param_error(msg, msg_len, "from: '%.64s' is not a unix time in seconds", from);
    if (sel->from < 0)
        sel->from = 0;
    if (!(sel->from < sel->to))
        return param_error(msg, msg_len, "from: must be before to (%.15g >= %.15g)", sel->from,
                           sel->to);
    if (job) {
        if (!job[0] || strlen(job) >= GS_USAGE_JOB_LEN)
            return param_error(msg, msg_len, "job: must be 1..%d bytes", GS_USAGE_JOB_LEN - 1);
        sel->job = job;
    }
    return GS_OK;
}

/* Whether group g and a row's holder fall in one group of by. */
static int same_key(enum gs_usage_by by, const struct gs_usage_group *g,
                    const struct gs_usage_row *r)
{
    switch (by) {
    case GS_USAGE_BY_USER:
        return g->uid == GS_USAGE_UID(r->h.uid);
    case GS_USAGE_BY_JOB:
        return g->uid == GS_USAGE_UID(r->h.uid) && strcmp(g->job, r->h.job) == 0;
    case GS_USAGE_BY_POD:
        return strcmp(g->ns, r->h.ns) == 0 && strcmp(g->pod, r->h.pod) == 0;
    case GS_USAGE_BY_NS:
        return strcmp(g->ns, r->h.ns) == 0;
    case GS_USAGE_BY_GPU:
        return g->gpu == (int)r->gpu && strcmp(g->uuid, r->uuid) == 0;
    }
    return 0;
}

static struct gs_usage_group *append(struct gs_usage_answer *a)
{
    if (a->n == GS_USAGE_MAX_GROUPS) {
        a->dropped++;
        return NULL;
    }
    if (a->n == a->cap) {
        unsigned cap = a->cap ? a->cap * 2 : 16;
        struct gs_usage_group *p = realloc(a->g, cap * sizeof *p);
        if (!p) {
            a->oom = 1;
            return NULL;
        }
        a->g = p;
        a->cap = cap;
    }
    return &a->g[a->n++];
}

int gs_usage_answer_group(void *ctx, const struct gs_usage_group *g)
{
    struct gs_usage_answer *a = ctx;
    struct gs_usage_group *d = append(a);

    if (d)
        *d = *g;
    return a->oom ? GS_ENOMEM : 0;
}

/* Text field f of a group: kept when the row agrees, else "" (the group mixes values). */
static void merge_text(char *g, const char *r, int fresh, size_t cap)
{
    if (fresh)
        snprintf(g, cap, "%s", r);
    else if (strcmp(g, r) != 0)
        g[0] = '\0';
}

void gs_usage_answer_rows(void *ctx, const struct gs_usage_row *rows, unsigned n)
{
    struct gs_usage_answer *a = ctx;
    const struct gs_usage_sel *s = &a->sel;

    for (unsigned i = 0; i < n; i++) {
        const struct gs_usage_row *r = &rows[i];
        struct gs_usage_group *g = NULL;
        int fresh = 0;
        if (!(r->t + r->res > s->from && r->t < s->to) ||
            (s->owner_only && GS_USAGE_UID(r->h.uid) != s->uid) ||
            (s->job && strcmp(s->job, r->h.job) != 0))
            continue;
        for (unsigned k = 0; k < a->n && !g; k++)
            if (same_key(s->by, &a->g[k], r))
                g = &a->g[k];
        if (!g) {
            if (!(g = append(a)))
                continue;
            memset(g, 0, sizeof *g);
            fresh = 1;
            g->uid = GS_USAGE_UID(r->h.uid);
            g->gpu = (int)r->gpu;
        } else {
            if (g->uid != GS_USAGE_UID(r->h.uid))
                g->uid = -1;
            if (g->gpu != (int)r->gpu)
                g->gpu = -1;
        }
        merge_text(g->user, r->h.user, fresh, sizeof g->user);
        merge_text(g->job, r->h.job, fresh, sizeof g->job);
        merge_text(g->pod, r->h.pod, fresh, sizeof g->pod);
        merge_text(g->ns, r->h.ns, fresh, sizeof g->ns);
        merge_text(g->uuid, r->uuid, fresh, sizeof g->uuid);
        g->a.held_s += r->a.held_s;
        g->a.busy_s += r->a.busy_s;
        g->a.idle_s += r->a.idle_s;
        g->a.mem_gib_s += r->a.mem_gib_s;
        g->a.energy_j += r->a.energy_j;
        if (r->a.peak_bytes > g->a.peak_bytes)
            g->a.peak_bytes = r->a.peak_bytes;
        if (r->a.first_seen > 0 && (g->a.first_seen == 0 || r->a.first_seen < g->a.first_seen))
            g->a.first_seen = r->a.first_seen;
        if (r->a.last_seen > g->a.last_seen)
            g->a.last_seen = r->a.last_seen;
    }
}

static int by_held_desc(const void *x, const void *y)
{
    const struct gs_usage_group *a = x, *b = y;
    return a->a.held_s < b->a.held_s ? 1 : a->a.held_s > b->a.held_s ? -1 : 0;
}

static json_t *str_or_null(const char *s)
{
    return s && s[0] ? json_string(s) : json_null();
}

/* The key of a group under by, as text. */
static void group_key(enum gs_usage_by by, const struct gs_usage_group *g, char *out, size_t cap)
{
    switch (by) {
    case GS_USAGE_BY_USER:
        if (g->user[0])
            snprintf(out, cap, "%s", g->user);
        else if (g->uid >= 0)
            snprintf(out, cap, "uid:%lld", (long long)g->uid);
        else
            snprintf(out, cap, "unknown");
        return;
    case GS_USAGE_BY_JOB:
        snprintf(out, cap, "%s", g->job);
        return;
    case GS_USAGE_BY_POD:
        if (g->pod[0])
            snprintf(out, cap, "%s/%s", g->ns, g->pod);
        else
            out[0] = '\0';
        return;
    case GS_USAGE_BY_NS:
        snprintf(out, cap, "%s", g->ns);
        return;
    case GS_USAGE_BY_GPU:
        snprintf(out, cap, "%d", g->gpu);
        return;
    }
    out[0] = '\0';
}

char *gs_usage_answer_json(struct gs_usage_answer *a, const struct gs_usage_prices *p, size_t *len)
{
    int priced = p && (p->gpu_hour_price > 0 || p->kwh_price > 0);
    json_t *doc = json_object(), *rows = json_array();
    char key[GS_USAGE_JOB_LEN + 80];
    char *text = NULL;

    *len = 0;
    if (a->n)
        qsort(a->g, a->n, sizeof *a->g, by_held_desc);
    for (unsigned i = 0; doc && rows && i < a->n; i++) {
        const struct gs_usage_group *g = &a->g[i];
        json_t *o = json_object();
        double held_h = g->a.held_s / 3600.0, kwh = g->a.energy_j / 3.6e6;
        if (!o)
            break;
        group_key(a->sel.by, g, key, sizeof key);
        json_object_set_new(o, "key", json_string(key));
        json_object_set_new(o, "user", str_or_null(g->user));
        json_object_set_new(o, "uid", g->uid >= 0 ? json_integer(g->uid) : json_null());
        json_object_set_new(o, "job", str_or_null(g->job));
        json_object_set_new(o, "pod", str_or_null(g->pod));
        json_object_set_new(o, "namespace", str_or_null(g->ns));
        json_object_set_new(o, "gpu", g->gpu >= 0 ? json_integer(g->gpu) : json_null());
        json_object_set_new(o, "uuid", str_or_null(g->uuid));
        json_object_set_new(o, "held_gpu_hours", json_real(held_h));
        json_object_set_new(o, "busy_share",
                            g->a.held_s > 0 ? json_real(g->a.busy_s / g->a.held_s) : json_null());
        json_object_set_new(o, "busy_gpu_hours", json_real(g->a.busy_s / 3600.0));
        json_object_set_new(o, "idle_held_hours", json_real(g->a.idle_s / 3600.0));
        json_object_set_new(o, "memory_gib_hours", json_real(g->a.mem_gib_s / 3600.0));
        json_object_set_new(o, "peak_memory_bytes", json_integer((json_int_t)g->a.peak_bytes));
        json_object_set_new(o, "energy_kwh", json_real(kwh));
        json_object_set_new(o, "cost",
                            priced ? json_real(held_h * p->gpu_hour_price + kwh * p->kwh_price)
                                   : json_null());
        json_object_set_new(o, "first_seen",
                            g->a.first_seen > 0 ? json_real(g->a.first_seen) : json_null());
        json_object_set_new(o, "last_seen",
                            g->a.last_seen > 0 ? json_real(g->a.last_seen) : json_null());
        json_array_append_new(rows, o);
    }
    if (doc && rows) {
        json_object_set_new(doc, "by", json_string(gs_usage_by_name(a->sel.by)));
        json_object_set_new(doc, "from", json_real(a->sel.from));
        json_object_set_new(doc, "to", json_real(a->sel.to));
        json_object_set_new(doc, "job", a->sel.job ? json_string(a->sel.job) : json_null());
        json_object_set_new(doc, "gpu_hour_price",
                            p && p->gpu_hour_price > 0 ? json_real(p->gpu_hour_price)
                                                       : json_null());
        json_object_set_new(doc, "kwh_price",
                            p && p->kwh_price > 0 ? json_real(p->kwh_price) : json_null());
        json_object_set_new(doc, "currency",
                            priced && p->currency && p->currency[0] ? json_string(p->currency)
                                                                    : json_null());
        json_object_set_new(doc, "groups_dropped", json_integer(a->dropped));
        json_object_set(doc, "rows", rows);
        text = json_dumps(doc, JSON_COMPACT | JSON_REAL_PRECISION(15));
        if (text)
            *len = strlen(text);
    }
    json_decref(rows);
    json_decref(doc);
    free(a->g);
    a->g = NULL;
    a->n = a->cap = 0;
    return text;
}
