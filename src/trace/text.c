/*
 * text.c - the trace analysis document (analyze.c) as aligned text tables.
 *
 * Each table is built from the JSON document, so the text and --json can never disagree.
 * Columns are sized to their widest cell; kernel names are cut to 70 characters.
 */
#include "trace/trace.h"

#include "base/straggler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TXT_NAME_MAX 70
#define TXT_MAX_COLS 9
#define TXT_MAX_ROWS 256

struct table {
    const char *head[TXT_MAX_COLS];
    int right[TXT_MAX_COLS];
    int ncol;
    char cell[TXT_MAX_ROWS][TXT_MAX_COLS][TXT_NAME_MAX + 4];
    int nrow;
    int more; /* rows left out */
};
/* gs_trace_print allocates one table and passes it down: each table of the text is filled
 * (tab_start, tab_row, cell) and printed (tab_print) in turn. */

static void tab_start(struct table *tb, int ncol, const char *const *head, const int *right)
{
    memset(tb, 0, sizeof *tb);
    tb->ncol = ncol;
    for (int i = 0; i < ncol; i++) {
        tb->head[i] = head[i];
        tb->right[i] = right[i];
    }
}

static char *tab_row(struct table *tb)
{
    if (tb->nrow >= TXT_MAX_ROWS) {
        tb->more++;
        return NULL;
    }
    return (char *)tb->cell[tb->nrow++];
}

static void cell(struct table *tb, int row, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void cell(struct table *tb, int row, int col, const char *fmt, ...)
{
    va_list ap;
    char *c = tb->cell[row][col];

    va_start(ap, fmt);
    vsnprintf(c, TXT_NAME_MAX + 4, fmt, ap);
    va_end(ap);
    if (strlen(c) > TXT_NAME_MAX)
        strcpy(c + TXT_NAME_MAX - 3, "...");
}

static void tab_print(struct table *tb, FILE *out)
{
    size_t w[TXT_MAX_COLS] = {0};

    for (int c = 0; c < tb->ncol; c++) {
        w[c] = strlen(tb->head[c]);
        for (int r = 0; r < tb->nrow; r++)
            if (strlen(tb->cell[r][c]) > w[c])
                w[c] = strlen(tb->cell[r][c]);
    }
    for (int r = -1; r < tb->nrow; r++) {
        for (int c = 0; c < tb->ncol; c++) {
            const char *s = r < 0 ? tb->head[c] : tb->cell[r][c];
            int last = c + 1 == tb->ncol;

            int empty_tail = 1;

            for (int k = c + 1; k < tb->ncol && empty_tail; k++)
                empty_tail = !(r < 0 ? tb->head[k] : tb->cell[r][k])[0];
            if (tb->right[c])
                fprintf(out, "%*s", (int)w[c], s);
            else if (last || empty_tail)
                fprintf(out, "%s", s);
            else
                fprintf(out, "%-*s", (int)w[c], s);
            if (last || empty_tail)
                break;
            fputs("  ", out);
        }
        fputc('\n', out);
    }
    if (tb->more)
        fprintf(out, "(%d more rows: see --json)\n", tb->more);
}

static void heading(FILE *out, int color, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void heading(FILE *out, int color, const char *fmt, ...)
{
    va_list ap;

    fputc('\n', out);
    if (color)
        fputs("\x1b[1m", out);
    va_start(ap, fmt);
    vfprintf(out, fmt, ap);
    va_end(ap);
    if (color)
        fputs("\x1b[0m", out);
    fputc('\n', out);
}

static long long I(const json_t *o, const char *k)
{
    return (long long)json_integer_value(json_object_get(o, k));
}

static const char *S(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));

    return s ? s : "";
}

/* A number or "n/a" for null. */
static void num(struct table *tb, int row, int col, const json_t *v, const char *fmt)
{
    if (json_is_number(v))
        cell(tb, row, col, fmt, json_number_value(v));
    else
        cell(tb, row, col, "n/a");
}

static void print_types(struct table *tb, FILE *out, const json_t *types)
{
    static const char *h[] = {"kernel type", "time (us)", "%"};
    static const int rt[] = {0, 1, 1};
    size_t i;
    json_t *v;

    tab_start(tb, 3, h, rt);
    json_array_foreach(types, i, v)
    {
        if (!tab_row(tb))
            continue;
        cell(tb, tb->nrow - 1, 0, "%s", S(v, "type"));
        cell(tb, tb->nrow - 1, 1, "%lld", I(v, "sum_us"));
        num(tb, tb->nrow - 1, 2, json_object_get(v, "pct"), "%.1f");
    }
    tab_print(tb, out);
}

static void print_rank(struct table *tb, FILE *out, const json_t *r, int color)
{
    const json_t *t = json_object_get(r, "temporal"), *a;
    size_t i;
    json_t *v;

    heading(out, color, "rank %lld: %s (%s, %lld events, %lld GPU activities, %lld steps)",
            I(r, "rank"), S(r, "file"), S(r, "format"), I(r, "events"), I(r, "gpu_activities"),
            I(r, "profiler_steps"));
    if (json_object_get(r, "note"))
        fprintf(out, "note: %s\n", S(r, "note"));
    if (t) {
        static const char *h[] = {"", "time (us)", "% of span"};
        static const int rt[] = {0, 1, 1};

        heading(out, color, "temporal breakdown (over the kernel span)");
        tab_start(tb, 3, h, rt);
        {
            static const char *rows[][2] = {
                {"idle", "idle"}, {"compute", "compute"}, {"non-compute", "non_compute"}};
            char k1[40], k2[40];

            for (int j = 0; j < 3; j++) {
                tab_row(tb);
                snprintf(k1, sizeof k1, "%s_us", rows[j][1]);
                snprintf(k2, sizeof k2, "%s_pct", rows[j][1]);
                cell(tb, j, 0, "%s", rows[j][0]);
                cell(tb, j, 1, "%lld", I(t, k1));
                num(tb, j, 2, json_object_get(t, k2), "%.2f");
            }
            tab_row(tb);
            cell(tb, 3, 0, "kernel span");
            cell(tb, 3, 1, "%lld", I(t, "kernel_span_us"));
            cell(tb, 3, 2, "100.00");
        }
        tab_print(tb, out);
        heading(out, color, "kernel time by type (overlaps counted once, in their own row)");
        print_types(tb, out, json_object_get(r, "kernel_types"));
        a = json_object_get(r, "comm_comp_overlap_pct");
        if (json_is_number(a))
            fprintf(out, "communication overlapped by computation: %.2f %% of %lld us\n",
                    json_number_value(a), I(r, "communication_us"));
        else
            fprintf(out, "communication overlapped by computation: n/a (no communication)\n");
    }
    a = json_object_get(r, "top_kernels");
    if (json_array_size(a)) {
        static const char *h[] = {"type",      "kernel",   "count",    "sum (us)",
                                  "mean (us)", "max (us)", "min (us)", "stddev"};
        static const int rt[] = {0, 0, 1, 1, 1, 1, 1, 1};

        heading(out, color, "top kernels by total time");
        tab_start(tb, 8, h, rt);
        json_array_foreach(a, i, v)
        {
            int row;

            if (!tab_row(tb))
                continue;
            row = tb->nrow - 1;
            cell(tb, row, 0, "%s", S(v, "type"));
            if (I(v, "kernels") > 1)
                cell(tb, row, 1, "others (%lld kernels)", I(v, "kernels"));
            else
                cell(tb, row, 1, "%s", S(v, "name"));
            cell(tb, row, 2, "%lld", I(v, "count"));
            cell(tb, row, 3, "%lld", I(v, "sum_us"));
            num(tb, row, 4, json_object_get(v, "mean_us"), "%.1f");
            cell(tb, row, 5, "%lld", I(v, "max_us"));
            cell(tb, row, 6, "%lld", I(v, "min_us"));
            num(tb, row, 7, json_object_get(v, "stddev_us"), "%.1f");
        }
        tab_print(tb, out);
    }
    a = json_object_get(r, "idle_by_stream");
    if (json_array_size(a)) {
        static const char *h[] = {"stream", "cause", "idle (us)", "ratio"};
        static const int rt[] = {1, 0, 1, 1};

        heading(out, color, "idle time by stream and cause");
        tab_start(tb, 4, h, rt);
        json_array_foreach(a, i, v)
        {
            if (!tab_row(tb))
                continue;
            cell(tb, tb->nrow - 1, 0, "%lld", I(v, "stream"));
            cell(tb, tb->nrow - 1, 1, "%s", S(v, "cause"));
            cell(tb, tb->nrow - 1, 2, "%lld", I(v, "idle_us"));
            num(tb, tb->nrow - 1, 3, json_object_get(v, "ratio"), "%.2f");
        }
        tab_print(tb, out);
    }
    a = json_object_get(r, "memcpy");
    if (json_array_size(a)) {
        static const char *h[] = {"memory", "count", "time (us)", "bytes", "GB/s", "% of span"};
        static const int rt[] = {0, 1, 1, 1, 1, 1};

        heading(out, color, "memory copies and sets");
        tab_start(tb, 6, h, rt);
        json_array_foreach(a, i, v)
        {
            if (!tab_row(tb))
                continue;
            cell(tb, tb->nrow - 1, 0, "%s", S(v, "kind"));
            cell(tb, tb->nrow - 1, 1, "%lld", I(v, "count"));
            cell(tb, tb->nrow - 1, 2, "%lld", I(v, "time_us"));
            cell(tb, tb->nrow - 1, 3, "%lld", I(v, "bytes"));
            num(tb, tb->nrow - 1, 4, json_object_get(v, "bandwidth_gbps"), "%.2f");
            num(tb, tb->nrow - 1, 5, json_object_get(v, "span_pct"), "%.2f");
        }
        tab_print(tb, out);
    }
    a = json_object_get(r, "launch_delay");
    if (json_is_object(a))
        fprintf(out,
                "\nkernel launch delay (launch call to kernel start): %lld kernels, mean %.1f us,"
                " p50 %lld us, p95 %lld us, max %lld us\n",
                I(a, "count"), json_number_value(json_object_get(a, "mean_us")), I(a, "p50_us"),
                I(a, "p95_us"), I(a, "max_us"));
    a = json_object_get(r, "steps");
    if (json_array_size(a)) {
        static const char *h[] = {"step",      "cpu (us)", "gpu acts", "span (us)",
                                  "busy (us)", "compute",  "comm",     "memory"};
        static const int rt[] = {1, 1, 1, 1, 1, 1, 1, 1};

        heading(out, color, "profiler steps");
        tab_start(tb, 8, h, rt);
        json_array_foreach(a, i, v)
        {
            int row;

            if (!tab_row(tb))
                continue;
            row = tb->nrow - 1;
            cell(tb, row, 0, "%lld", I(v, "step"));
            cell(tb, row, 1, "%lld", I(v, "cpu_us"));
            cell(tb, row, 2, "%lld", I(v, "gpu_activities"));
            if (json_object_get(v, "kernel_span_us")) {
                cell(tb, row, 3, "%lld", I(v, "kernel_span_us"));
                cell(tb, row, 4, "%lld", I(v, "busy_us"));
                cell(tb, row, 5, "%lld", I(v, "computation_us"));
                cell(tb, row, 6, "%lld", I(v, "communication_us"));
                cell(tb, row, 7, "%lld", I(v, "memory_us"));
            } else {
                for (int c = 3; c < 8; c++)
                    cell(tb, row, c, "-");
            }
        }
        tab_print(tb, out);
    }
    if (json_integer_value(json_object_get(r, "steps_omitted")) > 0)
        fprintf(out, "(%lld earlier profiler steps not listed: the latest %zu are)\n",
                I(r, "steps_omitted"), json_array_size(a));
    a = json_object_get(r, "cpu_ops");
    if (json_array_size(a)) {
        static const char *h[] = {"cpu op", "count", "total (us)", "mean (us)", "max (us)"};
        static const int rt[] = {0, 1, 1, 1, 1};

        heading(out, color, "top CPU ops by inclusive time");
        tab_start(tb, 5, h, rt);
        json_array_foreach(a, i, v)
        {
            if (!tab_row(tb) || i >= 10)
                continue;
            cell(tb, tb->nrow - 1, 0, "%s", S(v, "name"));
            cell(tb, tb->nrow - 1, 1, "%lld", I(v, "count"));
            num(tb, tb->nrow - 1, 2, json_object_get(v, "sum_us"), "%.0f");
            num(tb, tb->nrow - 1, 3, json_object_get(v, "mean_us"), "%.1f");
            num(tb, tb->nrow - 1, 4, json_object_get(v, "max_us"), "%.0f");
        }
        if (tb->nrow > 10)
            tb->nrow = 10;
        tab_print(tb, out);
    }
    a = json_object_get(r, "cpu_ops_folded");
    if (json_is_object(a))
        fprintf(out,
                "(%lld more op names, folded together when the op table was full: %lld calls,"
                " %.0f us)\n",
                I(a, "names"), I(a, "count"), json_number_value(json_object_get(a, "sum_us")));
}

void gs_trace_print(FILE *out, const json_t *doc, int color)
{
    const json_t *ranks = json_object_get(doc, "ranks"), *job = json_object_get(doc, "job");
    struct table *tb = malloc(sizeof *tb); /* ~170 KB: not on the stack */
    size_t i;
    json_t *r;

    if (!tb) {
        fprintf(out, "(out of memory)\n");
        return;
    }
    json_array_foreach(ranks, i, r) print_rank(tb, out, r, color);
    if (json_array_size(ranks) > 1) {
        const json_t *s = json_object_get(job, "stragglers");
        static const char *h[] = {"rank",      "compute (us)", "vs others", "comm (us)",
                                  "idle (us)", "span (us)",    ""};
        static const int rt[] = {1, 1, 1, 1, 1, 1, 0};

        heading(out, color, "job: kernel time by type, all ranks");
        print_types(tb, out, json_object_get(job, "kernel_types"));
        heading(out, color,
                "job: ranks side by side (straggler: compute > %.2f x the other ranks' median)",
                GS_STRAGGLER_RATIO);
        tab_start(tb, 7, h, rt);
        json_array_foreach(s, i, r)
        {
            int row;

            if (!tab_row(tb))
                continue;
            row = tb->nrow - 1;
            cell(tb, row, 0, "%lld", I(r, "rank"));
            cell(tb, row, 1, "%lld", I(r, "compute_us"));
            num(tb, row, 2, json_object_get(r, "compute_vs_others_pct"), "%+.1f%%");
            cell(tb, row, 3, "%lld", I(r, "communication_us"));
            cell(tb, row, 4, "%lld", I(r, "idle_us"));
            cell(tb, row, 5, "%lld", I(r, "kernel_span_us"));
            cell(tb, row, 6, "%s",
                 json_is_true(json_object_get(r, "straggler")) ? "straggler" : "");
        }
        tab_print(tb, out);
    }
    free(tb);
}
