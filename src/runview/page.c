/*
 * page.c - writes the report page: the template's head, the data document, its tail.
 *
 * The data document goes into <script type="application/json" id="gs-data">. Inside a script
 * element the HTML parser only looks for "</script" (and "<!--" games), so every '<' of the
 * JSON text is written as \u003c, which is the same string to JSON.parse and can never close
 * the element: a run name like "</script><script>alert(1)" stays text. The report itself is
 * embedded as it was read (it is already valid JSON, checked by rundata.c), so its numbers
 * keep their digits; the series are written with 7 significant digits.
 */
#include "runview/page.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"

extern const char gs_report_page_head[];
extern const size_t gs_report_page_head_len;
extern const char gs_report_page_tail[];
extern const size_t gs_report_page_tail_len;

#ifndef GS_VERSION
#define GS_VERSION "0.1.0"
#endif

/* Appends s to f with every '<' as \u003c. */
static void put_escaped(FILE *f, const char *s, size_t n)
{
    size_t a = 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] == '<') {
            fwrite(s + a, 1, i - a, f);
            fputs("\\u003c", f);
            a = i + 1;
        }
    fwrite(s + a, 1, n - a, f);
}

/* head, then obj's members (dumped with prec digits) followed by the raw members
 * (key, JSON text) pairs, then tail. */
static int emit(const json_t *obj, int prec, const char *const *raw, size_t nraw, int html,
                char **out, size_t *len, struct gs_err *err)
{
    char *j = json_dumps(obj, JSON_COMPACT | JSON_REAL_PRECISION(prec) | JSON_ESCAPE_SLASH);
    char *buf = NULL;
    size_t blen = 0;
    FILE *f;
    if (!j)
        return gs_err_set(err, GS_ENOMEM, "report page: out of memory");
    f = open_memstream(&buf, &blen);
    if (!f) {
        free(j);
        return gs_err_set(err, GS_ENOMEM, "report page: out of memory");
    }
    if (html)
        fwrite(gs_report_page_head, 1, gs_report_page_head_len, f);
    size_t jl = strlen(j);
    put_escaped(f, j, jl - 1); /* without the closing brace */
    for (size_t i = 0; i + 1 < nraw; i += 2) {
        if (!raw[i + 1])
            continue;
        fprintf(f, "%s\"%s\":", jl > 2 || i ? "," : "", raw[i]);
        put_escaped(f, raw[i + 1], strlen(raw[i + 1]));
    }
    fputc('}', f);
    if (html)
        fwrite(gs_report_page_tail, 1, gs_report_page_tail_len, f);
    free(j);
    if (fclose(f) != 0 || !buf) {
        free(buf);
        return gs_err_set(err, GS_ENOMEM, "report page: out of memory");
    }
    *out = buf;
    if (len)
        *len = blen;
    return GS_OK;
}

/* A report-data document's head: format, version, kind ("report", "compare"), gpuscope. */
static json_t *doc_new(const char *kind)
{
    json_t *o = json_object();

    json_object_set_new(o, "format", json_string("gpuscope-report-data"));
    json_object_set_new(o, "version", json_integer(1));
    json_object_set_new(o, "kind", json_string(kind));
    json_object_set_new(o, "gpuscope", json_string(GS_VERSION));
    return o;
}

static int report_doc(const struct gs_rundata *rd, int html, char **out, size_t *len,
                      struct gs_err *err)
{
    json_t *o = doc_new("report");
    char times[96];
    int rc;
    json_object_set_new(o, "origin", rd->origin ? json_string(rd->origin) : json_null());
    json_object_set_new(o, "label", rd->label ? json_string(rd->label) : json_null());
    json_object_set_new(o, "steps", rd->steps ? json_incref(rd->steps) : json_null());
    json_object_set_new(o, "gpus", rd->gpus ? json_incref(rd->gpus) : json_array());
    if (rd->gpus_note)
        json_object_set_new(o, "gpus_note", json_string(rd->gpus_note));
    json_object_set_new(o, "logs", rd->logs ? json_incref(rd->logs) : json_null());
    if (rd->flamegraph)
        json_object_set_new(o, "flamegraph", json_string(rd->flamegraph));
    /* times of day keep their milliseconds: written by hand, not at 7 digits */
    snprintf(times, sizeof times, "%.3f", rd->t_base);
    char gen[64];
    snprintf(gen, sizeof gen, "%.3f", gs_clock_real_s());
    const char *raw[] = {"t_base", times, "generated", gen, "report", rd->report_text};
    rc = emit(o, 7, raw, sizeof raw / sizeof raw[0], html, out, len, err);
    json_decref(o);
    return rc;
}

int gs_report_page_data(const struct gs_rundata *rd, char **out, size_t *len, struct gs_err *err)
{
    return report_doc(rd, 0, out, len, err);
}

int gs_report_page_html(const struct gs_rundata *rd, char **out, size_t *len, struct gs_err *err)
{
    return report_doc(rd, 1, out, len, err);
}

int gs_report_page_compare_html(const json_t *cmp, char **out, size_t *len, struct gs_err *err)
{
    json_t *o = doc_new("compare");
    char gen[64];
    int rc;
    json_object_set_new(o, "compare", json_deep_copy(cmp));
    snprintf(gen, sizeof gen, "%.3f", gs_clock_real_s());
    const char *raw[] = {"generated", gen};
    rc = emit(o, 15, raw, 2, 1, out, len, err);
    json_decref(o);
    return rc;
}
