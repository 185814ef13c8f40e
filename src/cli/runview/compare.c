/*
 * `gpuscope compare A B [C ...]`: runs side by side, the way document 000 judges a change: a
 * before/after table of every headline field and phase (each run's value, its change against
 * A, the change in %), the settings that differ (num_workers 0 -> 8, bf16 off -> on), and the
 * findings that appeared or went away. Text (aligned; colour on a terminal unless NO_COLOR),
 * --json (the comparison document, docs/compare.md) or --html (the report page's compare
 * view). The document is built by src/runview/compare.c; this file only renders the text.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/term.h"
#include "cli/cli.h"
#include "cli/runview/compare_job.h"
#include "gpuscope/gs_err.h"
#include "runview/compare.h"
#include "runview/job.h"
#include "runview/page.h"
#include "runview/rundata.h"

#define MAX_RUNS 26 /* named A..Z */

struct compare_opts {
    const char *runs[MAX_RUNS];
    size_t n;
    int json, html, help, job;
    const char *out;
    enum gs_color_mode color;
};

static void compare_usage(FILE *out)
{
    fputs("usage: gpuscope compare [--json | --html [-o FILE]] A B [C ...]\n"
          "       gpuscope compare --job [--json] NODE1 [NODE2 ...]\n"
          "\n"
          "Compares training runs: every headline field and step phase of each run with its\n"
          "change against A (absolute and in %), the settings (facts) that differ, and the\n"
          "findings that appeared or went away.\n"
          "\n"
          "Each run is a run directory of `gpuscope run`, a metrics_report.json, or the id of\n"
          "a run the local agent kept.\n"
          "\n"
          "options:\n"
          "  --job              the runs are the nodes of one multi-node job: one job\n"
          "                     report (per node, per rank, the straggler and its GPU)\n"
          "  --json             the comparison document (docs/compare.md) on stdout\n"
          "  --html             the comparison as a self-contained HTML page\n"
          "  -o, --output FILE  where --html writes (default: stdout)\n"
          "  --color, --no-color  text colours (default: on a terminal, NO_COLOR unset)\n"
          "  -h, --help         this help\n"
          "\n"
          "Green is a change the good way, red the bad way (runtime down, samples/s up, data\n"
          "and communication ratios down, ...). See docs/compare.md.\n",
          out);
}

static int parse(int argc, char **argv, struct compare_opts *o)
{
    memset(o, 0, sizeof *o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            o->help = 1;
        } else if (strcmp(a, "--job") == 0) {
            o->job = 1;
        } else if (strcmp(a, "--json") == 0) {
            o->json = 1;
        } else if (strcmp(a, "--html") == 0) {
            o->html = 1;
        } else if (strcmp(a, "--color") == 0) {
            o->color = GS_COLOR_ALWAYS;
        } else if (strcmp(a, "--no-color") == 0) {
            o->color = GS_COLOR_NEVER;
        } else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
            if (++i >= argc) {
                fprintf(stderr, "gpuscope compare: %s needs a file name\n", a);
                return -1;
            }
            o->out = argv[i];
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "gpuscope compare: unknown option '%s' (see --help)\n", a);
            return -1;
        } else if (o->n == MAX_RUNS) {
            fprintf(stderr, "gpuscope compare: at most %d runs\n", MAX_RUNS);
            return -1;
        } else {
            o->runs[o->n++] = a;
        }
    }
    if (o->help)
        return 0;
    if (o->json && o->html) {
        fprintf(stderr, "gpuscope compare: --json or --html, not both\n");
        return -1;
    }
    if (o->out && !o->html) {
        fprintf(stderr, "gpuscope compare: -o goes with --html\n");
        return -1;
    }
    if (o->job && o->html) {
        fprintf(stderr, "gpuscope compare: --job has text and --json output, not --html\n");
        return -1;
    }
    if (o->n < (o->job ? 1 : 2)) {
        fprintf(stderr, "gpuscope compare: needs two runs or more (see --help)\n");
        return -1;
    }
    return 0;
}

/* A value with the unit its field's name implies (docs/report.md CONVENTIONS). */
static void fmt_value(char *buf, size_t n, const char *field, const json_t *v, int sign)
{
    if (!json_is_number(v)) {
        snprintf(buf, n, "%s", sign ? "" : "n/a");
        return;
    }
    double x = json_number_value(v);
    const char *sg = sign ? "+" : "";
    size_t fl = strlen(field);
#define ENDS(s) (fl >= sizeof(s) - 1 && strcmp(field + fl - (sizeof(s) - 1), s) == 0)
    if (strcmp(field, "train_runtime") == 0 || ENDS("_seconds"))
        snprintf(buf, n, "%s%.2f s", x >= 0 ? sg : "", x);
    else if (ENDS("_percent"))
        snprintf(buf, n, "%s%.1f %%", x >= 0 ? sg : "", x);
    else if (ENDS("_ratio"))
        snprintf(buf, n, "%s%.3f", x >= 0 ? sg : "", x);
    else if (ENDS("_gb"))
        snprintf(buf, n, "%s%.2f GiB", x >= 0 ? sg : "", x);
    else if (ENDS("_per_second"))
        snprintf(buf, n, "%s%.3f /s", x >= 0 ? sg : "", x);
    else if (ENDS("_joules"))
        snprintf(buf, n, "%s%.0f J", x >= 0 ? sg : "", x);
    else if (ENDS("_ms"))
        snprintf(buf, n, "%s%.2f ms", x >= 0 ? sg : "", x);
    else if (x == floor(x) && fabs(x) < 1e15)
        snprintf(buf, n, "%s%.0f", x >= 0 ? sg : "", x);
    else
        snprintf(buf, n, "%s%.4g", x >= 0 ? sg : "", x);
#undef ENDS
}

static void fmt_scalar(char *buf, size_t n, const json_t *v)
{
    if (!v || json_is_null(v))
        snprintf(buf, n, "-");
    else if (json_is_true(v))
        snprintf(buf, n, "true");
    else if (json_is_false(v))
        snprintf(buf, n, "false");
    else if (json_is_string(v))
        snprintf(buf, n, "%s", json_string_value(v));
    else if (json_is_integer(v))
        snprintf(buf, n, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        snprintf(buf, n, "%.6g", json_real_value(v));
    else
        snprintf(buf, n, "?");
}

/* Pads s (display width w) to width on the left (right-aligned) or right. */
static void cell(struct gs_tbuf *b, const char *s, size_t width, int right, enum gs_sgr c)
{
    size_t w = gs_term_width(s, strlen(s));
    if (right && w < width)
        gs_tbuf_spaces(b, width - w);
    if (c != GS_SGR_NONE)
        gs_tbuf_color(b, c, s);
    else
        gs_tbuf_puts(b, s);
    if (!right && w < width)
        gs_tbuf_spaces(b, width - w);
}

#define CELL 24

/* The rows of fields or phases: name, then per run its value, and after the first its change
 * and change %. unit_field maps a phase row to the "_ms" formatting. */
static void table(struct gs_tbuf *b, const char *title, const json_t *rows, size_t nruns,
                  int phases)
{
    size_t i, namew = strlen(title);
    const json_t *r;
    char v[CELL * 4];

    if (!json_array_size(rows))
        return;
    json_array_foreach(rows, i, r)
    {
        size_t l = strlen(json_string_value(json_object_get(r, "field")));
        namew = l > namew ? l : namew;
    }
    /* widths of the value, change and % columns */
    size_t wv = 1, wc = 6, wp = 8;
    json_array_foreach(rows, i, r)
    {
        const char *f = json_string_value(json_object_get(r, "field"));
        const char *uf = phases ? "x_ms" : f;
        for (size_t k = 0; k < nruns; k++) {
            fmt_value(v, sizeof v, uf, json_array_get(json_object_get(r, "values"), k), 0);
            wv = strlen(v) > wv ? strlen(v) : wv;
            if (k) {
                const json_t *c = json_array_get(json_object_get(r, "changes"), k - 1);
                const json_t *pc = json_object_get(c, "change_percent");
                fmt_value(v, sizeof v, uf, json_object_get(c, "change"), 1);
                wc = strlen(v) > wc ? strlen(v) : wc;
                if (json_is_number(pc)) {
                    int l = snprintf(v, sizeof v, "%+.1f %%", json_number_value(pc));
                    wp = (size_t)l > wp ? (size_t)l : wp;
                }
            }
        }
    }
    gs_tbuf_sgr(b, GS_SGR_BOLD);
    cell(b, title, namew, 0, GS_SGR_NONE);
    for (size_t k = 0; k < nruns; k++) {
        char h[4] = {(char)('A' + k), 0};
        gs_tbuf_puts(b, "  ");
        cell(b, h, wv, 1, GS_SGR_NONE);
        if (k) {
            gs_tbuf_puts(b, "  ");
            cell(b, "change", wc, 1, GS_SGR_NONE);
            gs_tbuf_puts(b, "  ");
            cell(b, "change %", wp, 1, GS_SGR_NONE);
        }
    }
    gs_tbuf_sgr(b, GS_SGR_RESET);
    gs_tbuf_puts(b, "\n");
    json_array_foreach(rows, i, r)
    {
        const char *f = json_string_value(json_object_get(r, "field"));
        const char *uf = phases ? "x_ms" : f;
        cell(b, f, namew, 0, GS_SGR_NONE);
        for (size_t k = 0; k < nruns; k++) {
            gs_tbuf_puts(b, "  ");
            fmt_value(v, sizeof v, uf, json_array_get(json_object_get(r, "values"), k), 0);
            cell(b, v, wv, 1, GS_SGR_NONE);
            if (!k)
                continue;
            const json_t *c = json_array_get(json_object_get(r, "changes"), k - 1);
            const json_t *better = json_object_get(c, "better");
            enum gs_sgr col = json_is_true(better)    ? GS_SGR_GREEN
                              : json_is_false(better) ? GS_SGR_RED
                                                      : GS_SGR_NONE;
            gs_tbuf_puts(b, "  ");
            fmt_value(v, sizeof v, uf, json_object_get(c, "change"), 1);
            cell(b, v, wc, 1, col);
            gs_tbuf_puts(b, "  ");
            const json_t *pc = json_object_get(c, "change_percent");
            if (json_is_number(pc))
                snprintf(v, sizeof v, "%+.1f %%", json_number_value(pc));
            else
                v[0] = 0;
            cell(b, v, wp, 1, col);
        }
        gs_tbuf_puts(b, "\n");
    }
    gs_tbuf_puts(b, "\n");
}

static void render_text(struct gs_tbuf *b, const json_t *doc)
{
    const json_t *runs = json_object_get(doc, "runs"), *r;
    size_t n = json_array_size(runs), i;
    char v[256];

    json_array_foreach(runs, i, r)
    {
        gs_tbuf_sgr(b, GS_SGR_BOLD);
        gs_tbuf_printf(b, "%c", (char)('A' + i));
        gs_tbuf_sgr(b, GS_SGR_RESET);
        gs_tbuf_printf(b, "  %s", json_string_value(json_object_get(r, "label")));
        const char *origin = json_string_value(json_object_get(r, "origin"));
        if (origin && strcmp(origin, json_string_value(json_object_get(r, "label"))) != 0)
            gs_tbuf_printf(b, "  (%s)", origin);
        gs_tbuf_puts(b, "\n");
    }
    gs_tbuf_puts(b, "\n");
    table(b, "field", json_object_get(doc, "fields"), n, 0);
    table(b, "phase (mean ms)", json_object_get(doc, "phases"), n, 1);

    const json_t *facts = json_object_get(doc, "facts"), *f;
    gs_tbuf_sgr(b, GS_SGR_BOLD);
    gs_tbuf_puts(b, "settings that differ (facts, command)");
    gs_tbuf_sgr(b, GS_SGR_RESET);
    if (!json_array_size(facts)) {
        gs_tbuf_puts(b, ": none\n\n");
    } else {
        size_t kw = 0;
        gs_tbuf_puts(b, "\n");
        json_array_foreach(facts, i, f)
        {
            size_t l = strlen(json_string_value(json_object_get(f, "key")));
            kw = l > kw ? l : kw;
        }
        json_array_foreach(facts, i, f)
        {
            gs_tbuf_puts(b, "  ");
            cell(b, json_string_value(json_object_get(f, "key")), kw, 0, GS_SGR_NONE);
            gs_tbuf_puts(b, "  ");
            for (size_t k = 0; k < n; k++) {
                fmt_scalar(v, sizeof v, json_array_get(json_object_get(f, "values"), k));
                if (k)
                    gs_tbuf_puts(b, " -> ");
                gs_tbuf_puts(b, v);
            }
            gs_tbuf_puts(b, "\n");
        }
        gs_tbuf_puts(b, "\n");
    }

    const json_t *fs = json_object_get(doc, "findings");
    gs_tbuf_sgr(b, GS_SGR_BOLD);
    gs_tbuf_puts(b, "findings");
    gs_tbuf_sgr(b, GS_SGR_RESET);
    if (!json_array_size(fs)) {
        gs_tbuf_puts(b, ": none in any run\n");
        return;
    }
    gs_tbuf_puts(b, "\n");
    size_t iw = 0;
    json_array_foreach(fs, i, f)
    {
        size_t l = strlen(json_string_value(json_object_get(f, "id")));
        iw = l > iw ? l : iw;
    }
    json_array_foreach(fs, i, f)
    {
        const char *ch = json_string_value(json_object_get(f, "change"));
        enum gs_sgr col = strcmp(ch, "went away") == 0  ? GS_SGR_GREEN
                          : strcmp(ch, "appeared") == 0 ? GS_SGR_RED
                                                        : GS_SGR_NONE;
        gs_tbuf_puts(b, "  ");
        cell(b, json_string_value(json_object_get(f, "id")), iw, 0, GS_SGR_NONE);
        for (size_t k = 0; k < n; k++) {
            const json_t *s = json_array_get(json_object_get(f, "severity"), k);
            gs_tbuf_printf(b, "  %c: ", (char)('A' + k));
            cell(b, json_is_string(s) ? json_string_value(s) : "-", 8, 0, GS_SGR_NONE);
        }
        gs_tbuf_puts(b, "  ");
        cell(b, ch, 0, 0, col);
        const char *title = json_string_value(json_object_get(f, "title"));
        if (title)
            gs_tbuf_printf(b, "  (%s)", title);
        gs_tbuf_puts(b, "\n");
    }
}

int gs_cli_compare(int argc, char **argv)
{
    struct compare_opts o;
    struct gs_rundata rd[MAX_RUNS];
    struct gs_err err = {0};
    size_t loaded = 0;
    int status = 0;

    if (parse(argc, argv, &o) != 0)
        return 2;
    if (o.help) {
        compare_usage(stdout);
        return 0;
    }
    for (; loaded < o.n; loaded++) {
        if (gs_rundata_load(o.runs[loaded], GS_RUNDATA_REPORT_ONLY, &rd[loaded], &err) != GS_OK) {
            fprintf(stderr, "gpuscope compare: %s\n", err.msg);
            gs_rundata_free(&rd[loaded]);
            status = 1;
            goto out;
        }
    }
    json_t *doc = o.job ? gs_job_doc(rd, o.n) : gs_compare_doc(rd, o.n);
    if (!doc) {
        fprintf(stderr, "gpuscope compare: out of memory\n");
        status = 3;
        goto out;
    }
    if (o.json) {
        char *s = json_dumps(doc, JSON_INDENT(2) | JSON_REAL_PRECISION(15));
        if (!s || printf("%s\n", s) < 0 || fflush(stdout) != 0)
            status = 3;
        free(s);
    } else if (o.html) {
        char *buf = NULL;
        size_t len = 0;
        if (gs_report_page_compare_html(doc, &buf, &len, &err) != GS_OK) {
            fprintf(stderr, "gpuscope compare: %s\n", err.msg);
            status = 3;
        } else {
            FILE *f = o.out && strcmp(o.out, "-") != 0 ? fopen(o.out, "we") : stdout;
            if (!f || fwrite(buf, 1, len, f) != len || (f != stdout ? fclose(f) : fflush(f))) {
                fprintf(stderr, "gpuscope compare: %s: write failed\n", o.out ? o.out : "stdout");
                status = 3;
            } else if (f != stdout) {
                fprintf(stderr, "gpuscope compare: wrote %s (%zu bytes)\n", o.out, len);
            }
        }
        free(buf);
    } else {
        struct gs_tbuf b;
        gs_tbuf_init(&b, gs_term_use_color(o.color, STDOUT_FILENO));
        if (o.job)
            gs_cli_job_text(&b, doc);
        else
            render_text(&b, doc);
        if (gs_tbuf_status(&b) != GS_OK || fputs(gs_tbuf_str(&b), stdout) < 0 ||
            fflush(stdout) != 0)
            status = 3;
        gs_tbuf_free(&b);
    }
    json_decref(doc);
out:
    for (size_t i = 0; i < loaded; i++)
        gs_rundata_free(&rd[i]);
    return status;
}
