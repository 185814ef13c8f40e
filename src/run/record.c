/*
 * record.c - the step-record wire format (record.h): parse one SOCK_SEQPACKET message into a
 * struct gs_record, validating every field, and encode a record back into one message.
 *
 * Records come from a training process we do not trust (any local user may connect to a
 * receiver), so parsing is bounded before jansson sees the bytes: the message size
 * (GS_RECORD_MAX) and the nesting depth (RECORD_MAX_DEPTH, checked by a scan that skips
 * strings) are refused up front, then each known field is checked for type and range and a
 * failure names it ("step.ms.forward: not a number"). Unknown keys are ignored so that a newer
 * sender can add fields. Absent optional fields keep their "unknown" value (NaN, 0, -1).
 *
 * Encoding writes doubles with 17 significant digits so that parse(encode(r)) == r exactly.
 */
#include "run/record.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "gpuscope/gs_err.h"

/* Deepest nesting a valid record has is 2 ({"ms":{...}}); unknown keys may add a little. */
#define RECORD_MAX_DEPTH 8
#define RECORD_INT_MAX 9007199254740992.0 /* 2^53 */
#define RECORD_U53_MAX (INT64_C(1) << 53)
#define RECORD_MS_MAX 1e7
#define RECORD_SMALL_MIN (-1)
#define RECORD_SMALL_MAX 65535

#define PHASE_NAME_(e, name, wall) name,
static const char *const phase_names[GS_PH_ALL] = {GS_PHASES(PHASE_NAME_)};
#undef PHASE_NAME_

const char *gs_phase_name(int phase)
{
    if (phase < 0 || phase >= GS_PH_ALL)
        return NULL;
    return phase_names[phase];
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (err && errlen) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* Refuses input nested deeper than RECORD_MAX_DEPTH without building anything. */
static int depth_ok(const char *buf, size_t len)
{
    int depth = 0, in_str = 0;

    for (size_t i = 0; i < len; i++) {
        char c = buf[i];
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_str = 0;
        } else if (c == '"') {
            in_str = 1;
        } else if (c == '{' || c == '[') {
            if (++depth > RECORD_MAX_DEPTH)
                return 0;
        } else if (c == '}' || c == ']') {
            depth--;
        }
    }
    return 1;
}

/* Field readers: 1 = present and valid (stored), 0 = absent (or null), -1 = invalid (err set). */
static int get_double(json_t *obj, const char *key, const char *ctx, double lo, double hi,
                      double *out, char *err, size_t errlen)
{
    json_t *v = json_object_get(obj, key);
    double d;

    if (!v || json_is_null(v))
        return 0;
    if (!json_is_number(v))
        return fail(err, errlen, "%s%s: not a number", ctx, key);
    d = json_number_value(v);
    if (!isfinite(d))
        return fail(err, errlen, "%s%s: not finite", ctx, key);
    if (d < lo || d > hi)
        return fail(err, errlen, "%s%s: %g out of range [%g, %g]", ctx, key, d, lo, hi);
    *out = d;
    return 1;
}

static int get_int(json_t *obj, const char *key, const char *ctx, int64_t lo, int64_t hi,
                   int64_t *out, char *err, size_t errlen)
{
    json_t *v = json_object_get(obj, key);
    json_int_t i;

    if (!v || json_is_null(v))
        return 0;
    if (!json_is_integer(v))
        return fail(err, errlen, "%s%s: not an integer", ctx, key);
    i = json_integer_value(v);
    if (i < lo || i > hi)
        return fail(err, errlen, "%s%s: %lld out of range [%lld, %lld]", ctx, key, (long long)i,
                    (long long)lo, (long long)hi);
    *out = (int64_t)i;
    return 1;
}

static int get_small(json_t *obj, const char *key, const char *ctx, int32_t *out, char *err,
                     size_t errlen)
{
    int64_t v = 0;
    int rc = get_int(obj, key, ctx, RECORD_SMALL_MIN, RECORD_SMALL_MAX, &v, err, errlen);

    if (rc == 1)
        *out = (int32_t)v;
    return rc;
}

static int get_u53(json_t *obj, const char *key, const char *ctx, uint64_t *out, char *err,
                   size_t errlen)
{
    int64_t v = 0;
    int rc = get_int(obj, key, ctx, 0, RECORD_U53_MAX, &v, err, errlen);

    if (rc == 1)
        *out = (uint64_t)v;
    return rc;
}

static int get_str(json_t *obj, const char *key, const char *ctx, char *out, size_t size, char *err,
                   size_t errlen)
{
    json_t *v = json_object_get(obj, key);
    const char *s;
    size_t n;

    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return fail(err, errlen, "%s%s: not a string", ctx, key);
    s = json_string_value(v);
    n = json_string_length(v);
    if (strlen(s) != n)
        return fail(err, errlen, "%s%s: contains NUL", ctx, key);
    if (n >= size)
        return fail(err, errlen, "%s%s: longer than %zu bytes", ctx, key, size - 1);
    memcpy(out, s, n + 1);
    return 1;
}

/* ---- facts ---- */

static int fact_key_ok(const char *k)
{
    size_t n = strlen(k);

    if (n == 0 || n >= GS_RECORD_FACT_KEY)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = k[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return 0;
    }
    return 1;
}

/* Strings are shown in the terminal summary: no control characters (UTF-8 is jansson's). */
static int fact_str_ok(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            return 0;
    }
    return 1;
}

/* The facts and tags objects share their rules; what ("facts", "tags") names the object in
 * the errors ("<ctx><what>.<key>: ..."). */

typedef int (*kv_put_fn)(void *out, const char *key, json_t *v, const char *ctx, char *err,
                         size_t errlen);

/* Walks the object: absent or null is empty (0), anything but an object fails (-1); null
 * values count as absent, keys are 1-48 of [A-Za-z0-9_.-], and put takes each other entry
 * (1: walked, -1: an entry failed). */
static int kv_walk(const json_t *obj, const char *what, const char *ctx, kv_put_fn put, void *out,
                   char *err, size_t errlen)
{
    const char *key;
    json_t *v;

    if (!obj || json_is_null(obj))
        return 0;
    if (!json_is_object(obj))
        return fail(err, errlen, "%s%s: not an object", ctx, what);
    /* jansson's objects are not const-iterable; reading does not change them */
    json_object_foreach((json_t *)obj, key, v)
    {
        if (json_is_null(v))
            continue;
        if (!fact_key_ok(key))
            return fail(err, errlen, "%s%s: key \"%.48s\" not 1-48 of [A-Za-z0-9_.-]", ctx, what,
                        key);
        if (put(out, key, v, ctx, err, errlen) < 0)
            return -1;
    }
    return 1;
}

/* A string value: shorter than GS_RECORD_FACT_STR, without control characters. */
static int kv_string(const json_t *v, const char *what, const char *ctx, const char *key, char *err,
                     size_t errlen)
{
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);

    if (n >= GS_RECORD_FACT_STR)
        return fail(err, errlen, "%s%s.%s: longer than %d bytes", ctx, what, key,
                    GS_RECORD_FACT_STR - 1);
    if (strlen(s) != n || !fact_str_ok(s, n))
        return fail(err, errlen, "%s%s.%s: contains a control character", ctx, what, key);
    return 0;
}

/* Bounds the object's size as it would be encoded (back: its JSON, NULL when out of memory;
 * released here), so that a hello always re-encodes into a message. */
static int kv_encoded(json_t *back, const char *what, const char *ctx, size_t max, char *err,
                      size_t errlen)
{
    size_t n;

    if (!back)
        return fail(err, errlen, "%s%s: out of memory", ctx, what);
    n = json_dumpb(back, NULL, 0, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(back);
    if (n > max)
        return fail(err, errlen, "%s%s: %zu bytes encoded, more than %zu", ctx, what, n, max);
    return 0;
}

static int fact_value(json_t *v, struct gs_fact *f, const char *ctx, const char *key, char *err,
                      size_t errlen)
{
    if (json_is_boolean(v)) {
        f->type = GS_FACT_BOOL;
        f->v.b = json_is_true(v);
    } else if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        if (i < -(json_int_t)RECORD_U53_MAX || i > (json_int_t)RECORD_U53_MAX)
            return fail(err, errlen, "%sfacts.%s: integer out of range", ctx, key);
        f->type = GS_FACT_INT;
        f->v.i = (int64_t)i;
    } else if (json_is_real(v)) {
        if (!isfinite(json_real_value(v)))
            return fail(err, errlen, "%sfacts.%s: not finite", ctx, key);
        f->type = GS_FACT_REAL;
        f->v.d = json_real_value(v);
    } else if (json_is_string(v)) {
        if (kv_string(v, "facts", ctx, key, err, errlen) < 0)
            return -1;
        f->type = GS_FACT_STR;
        memcpy(f->v.s, json_string_value(v), json_string_length(v) + 1);
    } else {
        return fail(err, errlen, "%sfacts.%s: not a scalar", ctx, key);
    }
    return 0;
}

static int fact_put(void *out, const char *key, json_t *v, const char *ctx, char *err,
                    size_t errlen)
{
    struct gs_record_facts *fs = out;
    struct gs_fact *f;

    if (fs->n >= GS_RECORD_MAX_FACTS)
        return fail(err, errlen, "%sfacts: more than %d entries", ctx, GS_RECORD_MAX_FACTS);
    f = &fs->f[fs->n];
    memcpy(f->key, key, strlen(key) + 1);
    if (fact_value(v, f, ctx, key, err, errlen) < 0)
        return -1;
    fs->n++;
    return 0;
}

static int facts_parse(const json_t *obj, const char *ctx, struct gs_record_facts *out, char *err,
                       size_t errlen)
{
    int rc;

    memset(out, 0, sizeof *out);
    if (!ctx)
        ctx = "";
    if ((rc = kv_walk(obj, "facts", ctx, fact_put, out, err, errlen)) <= 0)
        return rc;
    return kv_encoded(gs_record_facts_json(out), "facts", ctx, GS_RECORD_FACTS_BYTES, err, errlen);
}

static int outcome_parse(const json_t *obj, const char *ctx, struct gs_record_facts *out, char *err,
                         size_t errlen)
{
    char sub[64];

    /* the facts rules, with errors that name the object ("end.outcome.<key>") */
    snprintf(sub, sizeof sub, "%soutcome.", ctx ? ctx : "");
    if (obj && !json_is_null(obj) && !json_is_object(obj))
        return fail(err, errlen, "%soutcome: not an object", ctx ? ctx : "");
    if (facts_parse(obj, "", out, err, errlen) != 0) {
        char why[256];
        snprintf(why, sizeof why, "%s", err ? err : "");
        /* "facts.key: ..." -> "end.outcome.key: ..." */
        if (err && strncmp(why, "facts", 5) == 0)
            snprintf(err, errlen, "%s%s%s",
                     why[5] == '.' ? sub
                     : ctx         ? ctx
                                   : "",
                     why[5] == '.' ? "" : "outcome", why[5] == '.' ? why + 6 : why + 5);
        return -1;
    }
    return 0;
}

json_t *gs_record_facts_json(const struct gs_record_facts *f)
{
    json_t *o = json_object();
    int rc = 0;

    if (!o)
        return NULL;
    for (uint32_t i = 0; f && i < f->n && i < GS_RECORD_MAX_FACTS; i++) {
        const struct gs_fact *x = &f->f[i];
        json_t *v = x->type == GS_FACT_BOOL   ? json_boolean(x->v.b)
                    : x->type == GS_FACT_INT  ? json_integer((json_int_t)x->v.i)
                    : x->type == GS_FACT_REAL ? json_real(x->v.d)
                    : x->type == GS_FACT_STR  ? json_string(x->v.s)
                                              : json_null();
        rc |= json_object_set_new(o, x->key, v);
    }
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

const struct gs_fact *gs_record_fact_get(const struct gs_record_facts *f, const char *key)
{
    for (uint32_t i = 0; f && key && i < f->n && i < GS_RECORD_MAX_FACTS; i++)
        if (strcmp(f->f[i].key, key) == 0)
            return &f->f[i];
    return NULL;
}

static int fact_equal(const struct gs_fact *a, const struct gs_fact *b)
{
    if (strcmp(a->key, b->key) != 0 || a->type != b->type)
        return 0;
    switch (a->type) {
    case GS_FACT_BOOL:
        return a->v.b == b->v.b;
    case GS_FACT_INT:
        return a->v.i == b->v.i;
    case GS_FACT_REAL:
        return a->v.d == b->v.d;
    case GS_FACT_STR:
        return strcmp(a->v.s, b->v.s) == 0;
    }
    return 0;
}

static int facts_equal(const struct gs_record_facts *a, const struct gs_record_facts *b)
{
    if (a->n != b->n)
        return 0;
    for (uint32_t i = 0; i < a->n && i < GS_RECORD_MAX_FACTS; i++)
        if (!fact_equal(&a->f[i], &b->f[i]))
            return 0;
    return 1;
}

/* ---- tags ---- */

static int tag_put(void *out, const char *key, json_t *v, const char *ctx, char *err, size_t errlen)
{
    struct gs_record_tags *ts = out;

    if (!json_is_string(v))
        return fail(err, errlen, "%stags.%s: not a string", ctx, key);
    if (ts->n >= GS_RECORD_MAX_TAGS)
        return fail(err, errlen, "%stags: more than %d entries", ctx, GS_RECORD_MAX_TAGS);
    if (kv_string(v, "tags", ctx, key, err, errlen) < 0)
        return -1;
    memcpy(ts->key[ts->n], key, strlen(key) + 1);
    memcpy(ts->val[ts->n], json_string_value(v), json_string_length(v) + 1);
    ts->n++;
    return 0;
}

static int tags_parse(const json_t *obj, const char *ctx, struct gs_record_tags *out, char *err,
                      size_t errlen)
{
    int rc;

    memset(out, 0, sizeof *out);
    if (!ctx)
        ctx = "";
    if ((rc = kv_walk(obj, "tags", ctx, tag_put, out, err, errlen)) <= 0)
        return rc;
    /* bounded as encoded, so that a hello with facts and tags always fits a message */
    return kv_encoded(gs_record_tags_json(out), "tags", ctx, GS_RECORD_TAGS_BYTES, err, errlen);
}

int gs_record_tags_parse(const json_t *obj, const char *ctx, struct gs_record_tags *out,
                         struct gs_err *err)
{
    char msg[GS_ERR_MSG_LEN];

    if (tags_parse(obj, ctx, out, msg, sizeof msg) == 0)
        return GS_OK;
    return gs_err_set(err, GS_EPARSE, "%s", msg);
}

json_t *gs_record_tags_json(const struct gs_record_tags *t)
{
    json_t *o = json_object();

    for (uint32_t i = 0; o && i < t->n && i < GS_RECORD_MAX_TAGS; i++)
        if (json_object_set_new(o, t->key[i], json_string(t->val[i])) != 0) {
            json_decref(o);
            return NULL;
        }
    return o;
}

static int tags_equal(const struct gs_record_tags *a, const struct gs_record_tags *b)
{
    if (a->n != b->n)
        return 0;
    for (uint32_t i = 0; i < a->n && i < GS_RECORD_MAX_TAGS; i++)
        if (strcmp(a->key[i], b->key[i]) != 0 || strcmp(a->val[i], b->val[i]) != 0)
            return 0;
    return 1;
}

static int parse_hello(json_t *root, struct gs_record_hello *h, char *err, size_t errlen)
{
    const char *ctx = "hello.";
    json_t *devs;
    int64_t v = 0;
    int rc;

    memset(h, 0, sizeof *h);
    h->pid = h->dropped = -1;
    h->rank = h->world_size = h->local_rank = h->logging_steps = -1;
    if (get_str(root, "run", ctx, h->run, sizeof h->run, err, errlen) < 0 ||
        get_str(root, "framework", ctx, h->framework, sizeof h->framework, err, errlen) < 0 ||
        get_str(root, "output_dir", ctx, h->output_dir, sizeof h->output_dir, err, errlen) < 0 ||
        get_str(root, "job", ctx, h->job, sizeof h->job, err, errlen) < 0 ||
        get_str(root, "node", ctx, h->node, sizeof h->node, err, errlen) < 0 ||
        get_str(root, "token", ctx, h->token, sizeof h->token, err, errlen) < 0 ||
        get_small(root, "rank", ctx, &h->rank, err, errlen) < 0 ||
        get_small(root, "world_size", ctx, &h->world_size, err, errlen) < 0 ||
        get_small(root, "local_rank", ctx, &h->local_rank, err, errlen) < 0)
        return -1;
    /* printable only: label values on /metrics, and a bounded encoded size */
    for (const char *p = h->job; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return fail(err, errlen, "hello.job: control character at byte %d", (int)(p - h->job));
    for (const char *p = h->node; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return fail(err, errlen, "hello.node: control character at byte %d",
                        (int)(p - h->node));
    if (h->token[0] && strlen(h->token) != GS_RECORD_TOKEN - 1)
        return fail(err, errlen, "hello.token: expected %d hex digits", GS_RECORD_TOKEN - 1);
    for (const char *p = h->token; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return fail(err, errlen, "hello.token: not a lowercase hex digit at byte %d",
                        (int)(p - h->token));
    rc = get_int(root, "pid", ctx, 0, INT64_C(1) << 32, &v, err, errlen);
    if (rc < 0)
        return -1;
    if (rc == 1)
        h->pid = v;
    rc = get_int(root, "dropped", ctx, 0, INT64_C(1) << 53, &v, err, errlen);
    if (rc < 0)
        return -1;
    if (rc == 1)
        h->dropped = v;
    rc = get_int(root, "logging_steps", ctx, 0, INT32_MAX, &v, err, errlen);
    if (rc < 0)
        return -1;
    if (rc == 1)
        h->logging_steps = (int32_t)v;
    if (facts_parse(json_object_get(root, "facts"), ctx, &h->facts, err, errlen) < 0)
        return -1;
    if (tags_parse(json_object_get(root, "tags"), ctx, &h->tags, err, errlen) < 0)
        return -1;
    devs = json_object_get(root, "devices");
    if (!devs || json_is_null(devs))
        return 0;
    if (!json_is_array(devs))
        return fail(err, errlen, "hello.devices: not an array");
    if (json_array_size(devs) > GS_RECORD_MAX_DEVICES)
        return fail(err, errlen, "hello.devices: more than %d entries", GS_RECORD_MAX_DEVICES);
    for (size_t i = 0; i < json_array_size(devs); i++) {
        json_t *d = json_array_get(devs, i);
        json_int_t x;
        if (!json_is_integer(d))
            return fail(err, errlen, "hello.devices[%zu]: not an integer", i);
        x = json_integer_value(d);
        if (x < RECORD_SMALL_MIN || x > RECORD_SMALL_MAX)
            return fail(err, errlen, "hello.devices[%zu]: %lld out of range", i, (long long)x);
        h->devices[h->n_devices++] = (int32_t)x;
    }
    return 0;
}

static int parse_mem(json_t *root, struct gs_step_rec *s, char *err, size_t errlen)
{
    json_t *m = json_object_get(root, "mem");
    const char *ctx = "step.mem.";

    if (!m || json_is_null(m))
        return 0;
    if (!json_is_object(m))
        return fail(err, errlen, "step.mem: not an object");
    if (get_u53(m, "allocated", ctx, &s->mem_allocated, err, errlen) < 0 ||
        get_u53(m, "reserved", ctx, &s->mem_reserved, err, errlen) < 0 ||
        get_u53(m, "peak_allocated", ctx, &s->mem_peak_allocated, err, errlen) < 0 ||
        get_u53(m, "peak_reserved", ctx, &s->mem_peak_reserved, err, errlen) < 0 ||
        get_u53(m, "total", ctx, &s->mem_total, err, errlen) < 0)
        return -1;
    return 0;
}

static int parse_step(json_t *root, struct gs_step_rec *s, char *err, size_t errlen)
{
    const char *ctx = "step.";
    json_t *ms, *ev;
    int rc;

    memset(s, 0, sizeof *s);
    s->version = GS_STEP_REC_VERSION;
    s->device = -1;
    for (int p = 0; p < GS_PH_ALL; p++)
        gs_step_ms_set(s, p, NAN);
    rc = get_u53(root, "step", ctx, &s->step, err, errlen);
    if (rc <= 0)
        return rc < 0 ? -1 : fail(err, errlen, "step.step: missing");
    rc = get_double(root, "t0", ctx, 0, 1e11, &s->t_begin, err, errlen);
    if (rc <= 0)
        return rc < 0 ? -1 : fail(err, errlen, "step.t0: missing");
    rc = get_double(root, "t1", ctx, 0, 1e11, &s->t_end, err, errlen);
    if (rc <= 0)
        return rc < 0 ? -1 : fail(err, errlen, "step.t1: missing");
    if (s->t_end < s->t_begin)
        return fail(err, errlen, "step.t1: before t0");
    if (get_small(root, "rank", ctx, &s->rank, err, errlen) < 0 ||
        get_small(root, "device", ctx, &s->device, err, errlen) < 0 ||
        get_u53(root, "samples", ctx, &s->samples, err, errlen) < 0 ||
        get_u53(root, "tokens", ctx, &s->tokens, err, errlen) < 0)
        return -1;
    if (s->rank < 0)
        return fail(err, errlen, "step.rank: negative");
    ev = json_object_get(root, "cuda_events");
    if (ev && !json_is_null(ev)) {
        if (!json_is_boolean(ev))
            return fail(err, errlen, "step.cuda_events: not a boolean");
        if (json_is_true(ev))
            s->flags |= GS_STEP_CUDA_EVENTS;
    }
    ev = json_object_get(root, "data_in_step");
    if (ev && !json_is_null(ev)) {
        if (!json_is_boolean(ev))
            return fail(err, errlen, "step.data_in_step: not a boolean");
        if (json_is_true(ev))
            s->flags |= GS_STEP_DATA_IN_STEP;
    }
    ev = json_object_get(root, "profiled");
    if (ev && !json_is_null(ev)) {
        if (!json_is_boolean(ev))
            return fail(err, errlen, "step.profiled: not a boolean");
        if (json_is_true(ev))
            s->flags |= GS_STEP_PROFILED;
    }
    ms = json_object_get(root, "ms");
    if (ms && !json_is_null(ms)) {
        if (!json_is_object(ms))
            return fail(err, errlen, "step.ms: not an object");
        for (int p = 0; p < GS_PH_ALL; p++) {
            double v = NAN;
            if (get_double(ms, phase_names[p], "step.ms.", 0, RECORD_MS_MAX, &v, err, errlen) < 0)
                return -1;
            gs_step_ms_set(s, p, v);
        }
    }
    return parse_mem(root, s, err, errlen);
}

static int parse_end(json_t *root, struct gs_record_end *e, char *err, size_t errlen)
{
    const char *ctx = "end.";

    e->train_runtime = e->train_samples = e->train_steps = e->train_loss = NAN;
    if (get_double(root, "train_runtime", ctx, 0, 1e10, &e->train_runtime, err, errlen) < 0 ||
        get_double(root, "train_samples", ctx, 0, RECORD_INT_MAX, &e->train_samples, err, errlen) <
            0 ||
        get_double(root, "train_steps", ctx, 0, RECORD_INT_MAX, &e->train_steps, err, errlen) < 0 ||
        get_double(root, "train_loss", ctx, -1e300, 1e300, &e->train_loss, err, errlen) < 0)
        return -1;
    return outcome_parse(json_object_get(root, "outcome"), ctx, &e->outcome, err, errlen);
}

static int log_key_ok(const char *k)
{
    size_t n = strlen(k);
    if (n == 0 || n >= GS_RECORD_FACT_KEY)
        return 0;
    for (; *k; k++)
        if (!isalnum((unsigned char)*k) && !strchr("_.-/", *k))
            return 0;
    return 1;
}

static int parse_log(json_t *root, struct gs_record_log *l, char *err, size_t errlen)
{
    const char *ctx = "log.", *k;
    json_t *vals = json_object_get(root, "values"), *v;
    int64_t rank = -1;

    l->step = l->t = NAN;
    l->rank = -1;
    l->n = 0;
    if (get_double(root, "step", ctx, 0, RECORD_INT_MAX, &l->step, err, errlen) < 0 ||
        get_double(root, "t", ctx, 0, 1e11, &l->t, err, errlen) < 0 ||
        get_int(root, "rank", ctx, -1, 65535, &rank, err, errlen) < 0)
        return -1;
    l->rank = (int32_t)rank;
    if (!vals)
        return fail(err, errlen, "log.values: missing");
    if (!json_is_object(vals))
        return fail(err, errlen, "log.values: not an object");
    if (json_object_size(vals) == 0)
        return fail(err, errlen, "log.values: empty");
    if (json_object_size(vals) > GS_RECORD_MAX_LOG)
        return fail(err, errlen, "log.values: %zu entries, more than %d", json_object_size(vals),
                    GS_RECORD_MAX_LOG);
    json_object_foreach(vals, k, v)
    {
        if (!log_key_ok(k))
            return fail(err, errlen,
                        "log.values: key '%.60s' is not 1..48 bytes of "
                        "[A-Za-z0-9_.-/]",
                        k);
        if (!json_is_number(v))
            return fail(err, errlen, "log.values.%s: not a number", k);
        double d = json_number_value(v);
        if (!isfinite(d)) /* ±1e308 is a value like any other */
            return fail(err, errlen, "log.values.%s: not finite", k);
        snprintf(l->key[l->n], sizeof l->key[l->n], "%s", k);
        l->val[l->n++] = d;
    }
    return 0;
}

static int parse_root(json_t *root, struct gs_record *out, char *err, size_t errlen)
{
    json_t *v = json_object_get(root, "v");
    json_t *t = json_object_get(root, "type");
    const char *type;

    if (!v)
        return fail(err, errlen, "v: missing");
    if (!json_is_integer(v))
        return fail(err, errlen, "v: not an integer");
    if (json_integer_value(v) != GS_RECORD_VERSION)
        return fail(err, errlen, "unsupported record version %lld",
                    (long long)json_integer_value(v));
    if (!t)
        return fail(err, errlen, "type: missing");
    if (!json_is_string(t))
        return fail(err, errlen, "type: not a string");
    type = json_string_value(t);
    /* each parse_* clears its own member: a step need not clear a hello's facts table */
    out->type = 0;
    if (strcmp(type, "hello") == 0) {
        out->type = GS_REC_HELLO;
        return parse_hello(root, &out->u.hello, err, errlen);
    }
    if (strcmp(type, "step") == 0) {
        out->type = GS_REC_STEP;
        return parse_step(root, &out->u.step, err, errlen);
    }
    if (strcmp(type, "end") == 0) {
        out->type = GS_REC_END;
        return parse_end(root, &out->u.end, err, errlen);
    }
    if (strcmp(type, "log") == 0) {
        out->type = GS_REC_LOG;
        return parse_log(root, &out->u.log, err, errlen);
    }
    return fail(err, errlen, "type: unknown record type");
}

int gs_record_facts_parse(const json_t *obj, const char *ctx, struct gs_record_facts *out,
                          struct gs_err *err)
{
    char msg[GS_ERR_MSG_LEN];

    if (facts_parse(obj, ctx, out, msg, sizeof msg) == 0)
        return GS_OK;
    return gs_err_set(err, GS_EPARSE, "%s", msg);
}

int gs_record_outcome_parse(const json_t *obj, const char *ctx, struct gs_record_facts *out,
                            struct gs_err *err)
{
    char msg[GS_ERR_MSG_LEN];

    if (outcome_parse(obj, ctx, out, msg, sizeof msg) == 0)
        return GS_OK;
    return gs_err_set(err, GS_EPARSE, "%s", msg);
}

static int record_parse(const char *buf, size_t len, struct gs_record *out, char *err,
                        size_t errlen);

int gs_record_parse(const char *buf, size_t len, struct gs_record *out, struct gs_err *err)
{
    char msg[GS_ERR_MSG_LEN];

    if (record_parse(buf, len, out, msg, sizeof msg) == 0)
        return GS_OK;
    return gs_err_set(err, GS_EPARSE, "%s", msg);
}

/* The parser proper: 0, or -1 with the reason in err (fail()). */
static int record_parse(const char *buf, size_t len, struct gs_record *out, char *err,
                        size_t errlen)
{
    json_error_t jerr;
    json_t *root;
    int rc;

    if (!buf || len == 0)
        return fail(err, errlen, "record: empty");
    if (len > GS_RECORD_MAX)
        return fail(err, errlen, "record: %zu bytes, more than %d", len, GS_RECORD_MAX);
    if (!depth_ok(buf, len))
        return fail(err, errlen, "record: nested deeper than %d", RECORD_MAX_DEPTH);
    root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return fail(err, errlen, "record: invalid JSON at byte %d: %s", jerr.position, jerr.text);
    if (!json_is_object(root)) {
        json_decref(root);
        return fail(err, errlen, "record: not a JSON object");
    }
    rc = parse_root(root, out, err, errlen);
    json_decref(root);
    return rc;
}

/* ---- encoding ---- */

static int set_num(json_t *obj, const char *key, double v)
{
    if (isnan(v))
        return 0;
    return json_object_set_new(obj, key, json_real(v));
}

static int set_int(json_t *obj, const char *key, int64_t v)
{
    return json_object_set_new(obj, key, json_integer((json_int_t)v));
}

static int set_str(json_t *obj, const char *key, const char *s)
{
    if (!s[0])
        return 0;
    return json_object_set_new(obj, key, json_string(s));
}

static int encode_hello(json_t *o, const struct gs_record_hello *h)
{
    json_t *devs;
    int rc = set_str(o, "run", h->run) | set_str(o, "framework", h->framework) |
             set_str(o, "output_dir", h->output_dir) | set_str(o, "job", h->job) |
             set_str(o, "node", h->node) | set_str(o, "token", h->token);

    if (h->pid >= 0)
        rc |= set_int(o, "pid", h->pid);
    if (h->dropped >= 0)
        rc |= set_int(o, "dropped", h->dropped);
    if (h->rank >= 0)
        rc |= set_int(o, "rank", h->rank);
    if (h->world_size >= 0)
        rc |= set_int(o, "world_size", h->world_size);
    if (h->local_rank >= 0)
        rc |= set_int(o, "local_rank", h->local_rank);
    if (h->logging_steps >= 0)
        rc |= set_int(o, "logging_steps", h->logging_steps);
    if (h->n_devices > GS_RECORD_MAX_DEVICES)
        return -1;
    if (h->n_devices) {
        devs = json_array();
        for (uint32_t i = 0; i < h->n_devices; i++)
            rc |= json_array_append_new(devs, json_integer(h->devices[i]));
        rc |= json_object_set_new(o, "devices", devs);
    }
    if (h->facts.n > GS_RECORD_MAX_FACTS)
        return -1;
    if (h->facts.n) {
        json_t *facts = gs_record_facts_json(&h->facts);
        rc |= facts ? json_object_set_new(o, "facts", facts) : -1;
    }
    if (h->tags.n > GS_RECORD_MAX_TAGS)
        return -1;
    if (h->tags.n) {
        json_t *tags = gs_record_tags_json(&h->tags);
        rc |= tags ? json_object_set_new(o, "tags", tags) : -1;
    }
    return rc;
}

static int encode_step(json_t *o, const struct gs_step_rec *s)
{
    json_t *ms = json_object(), *mem = json_object();
    int rc = set_int(o, "step", (int64_t)s->step) | set_num(o, "t0", s->t_begin) |
             set_num(o, "t1", s->t_end) | set_int(o, "rank", s->rank);

    if (s->device >= 0)
        rc |= set_int(o, "device", s->device);
    if (s->samples)
        rc |= set_int(o, "samples", (int64_t)s->samples);
    if (s->tokens)
        rc |= set_int(o, "tokens", (int64_t)s->tokens);
    if (s->flags & GS_STEP_CUDA_EVENTS)
        rc |= json_object_set_new(o, "cuda_events", json_true());
    if (s->flags & GS_STEP_DATA_IN_STEP)
        rc |= json_object_set_new(o, "data_in_step", json_true());
    if (s->flags & GS_STEP_PROFILED)
        rc |= json_object_set_new(o, "profiled", json_true());
    for (int p = 0; p < GS_PH_ALL; p++)
        rc |= set_num(ms, phase_names[p], gs_step_ms(s, p));
    if (s->mem_allocated)
        rc |= set_int(mem, "allocated", (int64_t)s->mem_allocated);
    if (s->mem_reserved)
        rc |= set_int(mem, "reserved", (int64_t)s->mem_reserved);
    if (s->mem_peak_allocated)
        rc |= set_int(mem, "peak_allocated", (int64_t)s->mem_peak_allocated);
    if (s->mem_peak_reserved)
        rc |= set_int(mem, "peak_reserved", (int64_t)s->mem_peak_reserved);
    if (s->mem_total)
        rc |= set_int(mem, "total", (int64_t)s->mem_total);
    rc |= json_object_set_new(o, "ms", ms);
    if (json_object_size(mem))
        rc |= json_object_set_new(o, "mem", mem);
    else
        json_decref(mem);
    return rc;
}

static int encode_end(json_t *o, const struct gs_record_end *e)
{
    int rc = set_num(o, "train_runtime", e->train_runtime) |
             set_num(o, "train_samples", e->train_samples) |
             set_num(o, "train_steps", e->train_steps) | set_num(o, "train_loss", e->train_loss);
    json_t *oc;

    if (e->outcome.n == 0)
        return rc;
    oc = gs_record_facts_json(&e->outcome);
    return rc | (oc ? json_object_set_new(o, "outcome", oc) : -1);
}

static int encode_log(json_t *o, const struct gs_record_log *l)
{
    json_t *vals = json_object();
    int rc = set_num(o, "step", l->step) | set_num(o, "t", l->t);
    if (l->rank >= 0)
        rc |= set_int(o, "rank", l->rank);
    if (!vals)
        return -1;
    for (uint32_t i = 0; i < l->n && i < GS_RECORD_MAX_LOG; i++)
        rc |= json_object_set_new(vals, l->key[i], json_real(l->val[i]));
    return rc | json_object_set_new(o, "values", vals);
}

const char *gs_record_step_time_refusal(const struct gs_step_rec *step, double run_start_s)
{
    if (!(step->t_begin >= GS_RECORD_T_MIN)) /* NaN too: the parser never lets one through */
        return "before 2000-01-01";
    if (run_start_s > 0 && step->t_begin < run_start_s - GS_RECORD_BEFORE_RUN_S)
        return "before the run began (its hello)";
    return NULL;
}

int gs_record_encode(const struct gs_record *rec, char *buf, size_t size)
{
    static const char *const types[] = {NULL, "hello", "step", "end", "log"};
    json_t *o;
    size_t n;
    int rc;

    if (!rec || !buf || size == 0 || rec->type < GS_REC_HELLO || rec->type > GS_REC_LOG)
        return -1;
    o = json_object();
    if (!o)
        return -1;
    rc = set_int(o, "v", GS_RECORD_VERSION) |
         json_object_set_new(o, "type", json_string(types[rec->type]));
    if (rec->type == GS_REC_HELLO)
        rc |= encode_hello(o, &rec->u.hello);
    else if (rec->type == GS_REC_STEP)
        rc |= encode_step(o, &rec->u.step);
    else if (rec->type == GS_REC_LOG)
        rc |= encode_log(o, &rec->u.log);
    else
        rc |= encode_end(o, &rec->u.end);
    n = rc ? 0 : json_dumpb(o, buf, size, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(o);
    if (rc || n == 0 || n >= size || n > GS_RECORD_MAX)
        return -1;
    buf[n] = '\0';
    return (int)n;
}

static int same_double(double a, double b)
{
    return (isnan(a) && isnan(b)) || a == b;
}

bool gs_record_equal(const struct gs_record *a, const struct gs_record *b)
{
    if (a->type != b->type)
        return false;
    if (a->type == GS_REC_HELLO) {
        const struct gs_record_hello *x = &a->u.hello, *y = &b->u.hello;
        return strcmp(x->run, y->run) == 0 && strcmp(x->framework, y->framework) == 0 &&
               strcmp(x->output_dir, y->output_dir) == 0 && x->pid == y->pid &&
               strcmp(x->job, y->job) == 0 && strcmp(x->node, y->node) == 0 && x->rank == y->rank &&
               x->world_size == y->world_size && x->local_rank == y->local_rank &&
               x->logging_steps == y->logging_steps && x->n_devices == y->n_devices &&
               memcmp(x->devices, y->devices, x->n_devices * sizeof x->devices[0]) == 0 &&
               facts_equal(&x->facts, &y->facts) && tags_equal(&x->tags, &y->tags) &&
               strcmp(x->token, y->token) == 0 && x->dropped == y->dropped;
    }
    if (a->type == GS_REC_STEP) {
        const struct gs_step_rec *x = &a->u.step, *y = &b->u.step;
        for (int p = 0; p < GS_PH_ALL; p++)
            if (!same_double(gs_step_ms(x, p), gs_step_ms(y, p)))
                return false;
        return x->version == y->version && x->flags == y->flags && x->step == y->step &&
               x->t_begin == y->t_begin && x->t_end == y->t_end && x->samples == y->samples &&
               x->tokens == y->tokens && x->rank == y->rank && x->device == y->device &&
               x->mem_allocated == y->mem_allocated && x->mem_reserved == y->mem_reserved &&
               x->mem_peak_allocated == y->mem_peak_allocated &&
               x->mem_peak_reserved == y->mem_peak_reserved && x->mem_total == y->mem_total;
    }
    if (a->type == GS_REC_END)
        return same_double(a->u.end.train_runtime, b->u.end.train_runtime) &&
               same_double(a->u.end.train_samples, b->u.end.train_samples) &&
               same_double(a->u.end.train_steps, b->u.end.train_steps) &&
               same_double(a->u.end.train_loss, b->u.end.train_loss) &&
               facts_equal(&a->u.end.outcome, &b->u.end.outcome);
    if (a->type == GS_REC_LOG) {
        const struct gs_record_log *x = &a->u.log, *y = &b->u.log;
        if (!same_double(x->step, y->step) || !same_double(x->t, y->t) || x->rank != y->rank ||
            x->n != y->n)
            return false;
        for (uint32_t i = 0; i < x->n; i++)
            if (strcmp(x->key[i], y->key[i]) != 0 || x->val[i] != y->val[i])
                return false;
        return true;
    }
    return false;
}

const char *gs_run_report_schema(void)
{
    return "1.0";
}
