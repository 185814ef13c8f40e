/*
 * /api/v1/history's parameters and JSON (history_api.h). Numbers are printed with %.15g, so
 * a value reads back as the double the store holds (to 15 digits) and times keep their
 * milliseconds.
 */
#include "agent/history_api.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/parse.h"
#include "gpuscope/gs_err.h"

/* Bytes one answer may take (GS_HISTORY_MAX_POINTS points of ~90 bytes fit). */
#define DOC_MAX (4u << 20)

static int param_error(char *msg, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int param_error(char *msg, size_t len, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, len, fmt, ap);
    va_end(ap);
    return GS_EINVAL;
}

static void kept_list(char *out, size_t len)
{
    size_t n = 0;

    out[0] = '\0';
    for (int m = 0; m < GS_M__COUNT && n < len; m++)
        if (gs_store_keeps((enum gs_metric)m)) {
            int w = snprintf(out + n, len - n, "%s%s", n ? ", " : "",
                             gs_metric_name((enum gs_metric)m));
            if (w < 0)
                break;
            n += (size_t)w;
        }
}

static int parse_metric(struct gs_history_req *q, const char *metric, char *msg, size_t len)
{
    char kept[1024];
    int m;

    if (!metric || !*metric)
        return param_error(msg, len, "metric: missing (one of the metrics history keeps)");
    m = gs_metric_by_name(metric);
    if (m < 0 || !gs_store_keeps((enum gs_metric)m)) {
        kept_list(kept, sizeof kept);
        return param_error(msg, len, "metric: '%.64s' is %s; history keeps: %s", metric,
                           m < 0 ? "not a metric" : "not kept in history", kept);
    }
    q->metric = (enum gs_metric)m;
    return GS_OK;
}

double gs_history_default_step(double range_s)
{
    static const double steps[] = {1, 5, 15, 60, 300, 900, 3600, 21600, 86400};
    size_t n = sizeof steps / sizeof steps[0];

    for (size_t i = 0; i < n; i++)
        if (range_s / steps[i] <= GS_HISTORY_TARGET_POINTS)
            return steps[i];
    return steps[n - 1];
}

int gs_history_req_parse(struct gs_history_req *q, const char *gpu, const char *metric,
                         const char *from, const char *to, const char *step, double now, char *msg,
                         size_t len)
{
    double v;

    memset(q, 0, sizeof *q);
    if (!gpu || !*gpu)
        return param_error(msg, len, "gpu: missing (a GPU index 0..%d)", GS_STORE_MAX_GPU);
    if (strspn(gpu, "0123456789") != strlen(gpu) || gs_parse_plain_decimal(gpu, &v) != GS_OK ||
        v > GS_STORE_MAX_GPU)
        return param_error(msg, len, "gpu: '%.64s' is not an integer 0..%d", gpu, GS_STORE_MAX_GPU);
    q->gpu = (unsigned)v;
    if (parse_metric(q, metric, msg, len) != GS_OK)
        return GS_EINVAL;
    q->to = floor(now);
    if (to && gs_parse_plain_decimal(to, &q->to) != GS_OK)
        return param_error(msg, len, "to: '%.64s' is not a unix time in seconds", to);
    if (!(q->to > 0 && q->to <= 1e11))
        return param_error(msg, len, "to: %.64s is out of range 0..1e11", to ? to : "now");
    q->from = q->to - GS_HISTORY_DEFAULT_RANGE_S;
    if (from && gs_parse_plain_decimal(from, &q->from) != GS_OK)
        return param_error(msg, len, "from: '%.64s' is not a unix time in seconds", from);
    if (q->from < 0)
        q->from = 0;
    if (!(q->from < q->to))
        return param_error(msg, len, "from: must be before to (%.15g >= %.15g)", q->from, q->to);
    q->step = gs_history_default_step(q->to - q->from);
    if (step && (gs_parse_plain_decimal(step, &q->step) != GS_OK || q->step < 0 || q->step > 1e10))
        return param_error(msg, len, "step: '%.64s' is not a number of seconds >= 0", step);
    if (q->step > 0 && (q->to - q->from) / q->step > GS_HISTORY_MAX_POINTS)
        return param_error(msg, len, "%s: %.15g s over %.15g s gives more than %d points",
                           step ? "step" : "from", q->step, q->to - q->from, GS_HISTORY_MAX_POINTS);
    return GS_OK;
}

double gs_history_effective_step(double step, enum gs_store_source source)
{
    if (source != GS_STORE_ROLLUP)
        return step;
    if (step <= 0)
        return 60;
    return ceil(step / 60) * 60;
}

void gs_history_doc_begin(struct gs_history_doc *d)
{
    memset(d, 0, sizeof *d);
    gs_buf_init(&d->text, DOC_MAX);
}

int gs_history_doc_point(void *doc, const struct gs_store_point *p)
{
    struct gs_history_doc *d = doc;

    if (d->points >= GS_HISTORY_MAX_POINTS) {
        d->truncated = 1;
        return 1;
    }
    gs_buf_printf(&d->text, "%s[%.15g,%.15g,%.15g,%.15g]", d->points ? "," : "", p->t, p->min,
                  p->avg, p->max);
    d->points++;
    return gs_buf_status(&d->text) != GS_BUF_OK ? 1 : 0;
}

void gs_history_doc_end(struct gs_history_doc *d, const struct gs_history_req *q,
                        enum gs_store_source source)
{
    struct gs_history_doc out;

    gs_history_doc_begin(&out);
    out.points = d->points;
    out.truncated = d->truncated;
    gs_buf_fail(&out.text, gs_buf_status(&d->text));
    /* Metric names and units are fixed identifiers: nothing to escape. */
    gs_buf_printf(&out.text,
                  "{\"gpu\":%u,\"metric\":\"%s\",\"unit\":\"%s\",\"source\":\"%s\",\"from\":%.15g,"
                  "\"to\":%.15g,\"step\":%.15g,\"truncated\":%s,\"points\":[",
                  q->gpu, gs_metric_name(q->metric), gs_metric_unit(q->metric),
                  source == GS_STORE_ROLLUP ? "rollup" : "raw", q->from, q->to,
                  gs_history_effective_step(q->step, source), d->truncated ? "true" : "false");
    gs_buf_put(&out.text, d->text.data, d->text.len);
    gs_buf_puts(&out.text, "]}\n");
    gs_buf_free(&d->text);
    if (gs_buf_status(&out.text) != GS_BUF_OK) { /* no use half-written: empty, status kept */
        int status = gs_buf_status(&out.text);
        gs_buf_free(&out.text);
        gs_buf_fail(&out.text, status);
    }
    *d = out;
}

char *gs_history_error_json(const char *msg, size_t *len)
{
    size_t n = strlen(msg), j = 0;
    char *out = malloc(n * 6 + 16);

    if (!out)
        return NULL;
    j += (size_t)sprintf(out, "{\"error\":\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)msg[i];
        if (c == '"' || c == '\\') {
            out[j++] = '\\';
            out[j++] = (char)c;
        } else if (c < 0x20) {
            j += (size_t)sprintf(out + j, "\\u%04x", c);
        } else {
            out[j++] = (char)c;
        }
    }
    j += (size_t)sprintf(out + j, "\"}\n");
    *len = j;
    return out;
}
