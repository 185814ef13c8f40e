/*
 * compare_job.c - `gpuscope compare --job DIR...`: the text of the job document
 * (src/runview/job.c): one line for the job, a table of its nodes, a table of its ranks (each
 * one's busy time over the other ranks' median), and the straggler with its GPU's evidence. The
 * --json output is the document itself (docs/compare.md, JOB).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/term.h"
#include "cli/runview/compare_job.h"

static double num(const json_t *v)
{
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static const char *fmt(char *buf, size_t n, const char *f, double v)
{
    if (isfinite(v))
        snprintf(buf, n, f, v);
    else
        snprintf(buf, n, "n/a");
    return buf;
}

static void ranks_list(char *buf, size_t n, const json_t *ranks)
{
    size_t i, len = 0;
    json_t *r;

    buf[0] = 0;
    json_array_foreach(ranks, i, r)
    {
        int w =
            snprintf(buf + len, n - len, "%s%lld", i ? "," : "", (long long)json_integer_value(r));
        if (w < 0 || (size_t)w >= n - len)
            break;
        len += (size_t)w;
    }
}

/* The nodes' table: ranks, steps, median step, data and communication ratios, throttling. */
static void nodes_table(struct gs_tbuf *b, const json_t *nodes)
{
    char a[64], c[64], d[64], e[64], f[64], rl[128];
    const json_t *row;
    size_t i;

    gs_tbuf_printf(b, "\n%-16s %-12s %6s %10s %10s %8s %8s %11s  %s\n", "node", "ranks", "steps",
                   "step p50", "samples/s", "data", "comm", "throttled", "origin");
    json_array_foreach(nodes, i, row)
    {
        ranks_list(rl, sizeof rl, json_object_get(row, "ranks"));
        gs_tbuf_printf(
            b, "%-16s %-12s %6lld %10s %10s %8s %8s %11s  %s\n",
            json_string_value(json_object_get(row, "node")), rl,
            (long long)json_integer_value(json_object_get(row, "steps")),
            fmt(a, sizeof a, "%.1f ms", num(json_object_get(row, "step_p50_ms"))),
            fmt(f, sizeof f, "%.1f", num(json_object_get(row, "samples_per_second"))),
            fmt(c, sizeof c, "%.3f", num(json_object_get(row, "data_loading_time_ratio"))),
            fmt(d, sizeof d, "%.3f", num(json_object_get(row, "communication_time_ratio"))),
            fmt(e, sizeof e, "%.1f s", num(json_object_get(row, "throttled_seconds"))),
            json_string_value(json_object_get(row, "origin")));
    }
}

/* The ranks' table, the straggler's ratio cell in red. */
static void ranks_table(struct gs_tbuf *b, const json_t *ranks, const json_t *s)
{
    char a[64], c[64], d[64], e[64], f[64], g[64], rl[128];
    const json_t *row;
    size_t i;
    int tok = 0; /* tokens/s and MFU columns when a rank has them */

    json_array_foreach(ranks, i, row) if (json_is_number(json_object_get(row, "tokens_per_second")))
        tok = 1;
    gs_tbuf_printf(b, "\n%5s %-16s %4s %6s %10s %10s %10s %8s %10s %10s", "rank", "node", "gpu",
                   "steps", "p50 ms", "p95 ms", "busy ms", "x others", "data ms", "comm ms");
    gs_tbuf_printf(b, tok ? " %10s %7s\n" : "\n", "tokens/s", "MFU");
    json_array_foreach(ranks, i, row)
    {
        double ratio = num(json_object_get(row, "ratio_to_others"));
        int slow = json_is_object(s) &&
                   json_equal(json_object_get(s, "rank"), json_object_get(row, "rank")) &&
                   json_equal(json_object_get(s, "node"), json_object_get(row, "node"));
        gs_tbuf_printf(b, "%5lld %-16s %4s %6lld %10s %10s %10s ",
                       (long long)json_integer_value(json_object_get(row, "rank")),
                       json_string_value(json_object_get(row, "node")),
                       json_is_integer(json_object_get(row, "gpu"))
                           ? fmt(rl, sizeof rl, "%.0f", num(json_object_get(row, "gpu")))
                           : "-",
                       (long long)json_integer_value(json_object_get(row, "steps")),
                       fmt(a, sizeof a, "%.1f", num(json_object_get(row, "step_p50_ms"))),
                       fmt(c, sizeof c, "%.1f", num(json_object_get(row, "step_p95_ms"))),
                       fmt(g, sizeof g, "%.1f", num(json_object_get(row, "busy_ms"))));
        fmt(d, sizeof d, "%.2fx", ratio);
        /* the ratio cell, coloured when it is the straggler's */
        gs_tbuf_spaces(b, strlen(d) < 8 ? 8 - strlen(d) : 0);
        if (slow)
            gs_tbuf_color(b, GS_SGR_RED, d);
        else
            gs_tbuf_puts(b, d);
        gs_tbuf_printf(b, " %10s %10s",
                       fmt(e, sizeof e, "%.1f", num(json_object_get(row, "data_ms"))),
                       fmt(f, sizeof f, "%.1f", num(json_object_get(row, "communication_ms"))));
        if (tok)
            gs_tbuf_printf(b, " %10s %7s",
                           fmt(e, sizeof e, "%.1f", num(json_object_get(row, "tokens_per_second"))),
                           fmt(f, sizeof f, "%.2f%%", 100.0 * num(json_object_get(row, "mfu"))));
        gs_tbuf_puts(b, "\n");
    }
}

/* The straggler s of doc: where, how much slower, its GPU's evidence and the likely cause. */
static void straggler_text(struct gs_tbuf *b, const json_t *doc, const json_t *s)
{
    char a[64], c[64], d[64], e[64];
    const json_t *gpu = json_object_get(s, "gpu");
    gs_tbuf_sgr(b, GS_SGR_BOLD);
    gs_tbuf_printf(b, "straggler: rank %lld on %s",
                   (long long)json_integer_value(json_object_get(s, "rank")),
                   json_string_value(json_object_get(s, "node")));
    gs_tbuf_sgr(b, GS_SGR_RESET);
    if (json_is_object(gpu))
        gs_tbuf_printf(b, " (GPU %lld, %s)",
                       (long long)json_integer_value(json_object_get(gpu, "gpu")),
                       json_is_string(json_object_get(gpu, "name"))
                           ? json_string_value(json_object_get(gpu, "name"))
                           : "?");
    gs_tbuf_printf(b,
                   ": computes %.0f %% longer per step than the other ranks (busy %s of its "
                   "median step %s, the others' median %s)\n",
                   100.0 * (num(json_object_get(s, "ratio_to_others")) - 1.0),
                   fmt(a, sizeof a, "%.1f ms", num(json_object_get(s, "busy_ms"))),
                   fmt(d, sizeof d, "%.1f ms", num(json_object_get(s, "step_p50_ms"))),
                   fmt(c, sizeof c, "%.1f ms", num(json_object_get(s, "others_busy_ms"))));
    if (json_is_object(gpu)) {
        const char *k;
        json_t *v;
        gs_tbuf_printf(
            b, "  its GPU: throttled %s",
            fmt(a, sizeof a, "%.1f s", num(json_object_get(gpu, "throttled_seconds_total"))));
        if (json_object_size(json_object_get(gpu, "throttle_reasons"))) {
            const char *sep = " (";
            json_object_foreach(json_object_get(gpu, "throttle_reasons"), k, v)
            {
                gs_tbuf_printf(b, "%s%s %.1f s", sep, k, num(v));
                sep = ", ";
            }
            gs_tbuf_puts(b, ")");
        }
        gs_tbuf_printf(b, "; SM clock avg %s of max %s; temperature max %s\n",
                       fmt(c, sizeof c, "%.0f MHz", num(json_object_get(gpu, "clock_sm_avg_mhz"))),
                       fmt(d, sizeof d, "%.0f MHz", num(json_object_get(gpu, "clock_sm_max_mhz"))),
                       fmt(e, sizeof e, "%.0f C", num(json_object_get(gpu, "temperature_max_c"))));
    }
    gs_tbuf_printf(b,
                   "  data %s (job median %s); it waits %s/step in communication, the others %s\n",
                   fmt(a, sizeof a, "%.1f ms", num(json_object_get(s, "data_ms"))),
                   fmt(c, sizeof c, "%.1f ms", num(json_object_get(doc, "median_data_ms"))),
                   fmt(d, sizeof d, "%.1f ms", num(json_object_get(s, "communication_ms"))),
                   fmt(e, sizeof e, "%.1f ms", num(json_object_get(s, "others_communication_ms"))));
    const char *cause = json_string_value(json_object_get(s, "cause"));
    gs_tbuf_printf(b, "  likely cause: %s\n",
                   cause && strcmp(cause, "gpu_throttled") == 0
                       ? "its GPU is held down (throttle reasons above): cooling, power limit"
                   : cause && strcmp(cause, "data_loading") == 0
                       ? "it waits for data longer than the other ranks: its input pipeline"
                       : "slower compute on this rank (the others wait for it in communication)");
}

void gs_cli_job_text(struct gs_tbuf *b, const json_t *doc)
{
    const json_t *nodes = json_object_get(doc, "nodes"), *ranks = json_object_get(doc, "ranks");
    const json_t *s = json_object_get(doc, "straggler"), *row;
    const char *job = json_string_value(json_object_get(doc, "job"));
    char a[64], c[64];
    size_t i;

    gs_tbuf_sgr(b, GS_SGR_BOLD);
    gs_tbuf_printf(b, "job %s", job ? job : "(no common job id)");
    gs_tbuf_sgr(b, GS_SGR_RESET);
    gs_tbuf_printf(
        b, ": %zu rank(s) on %zu node(s), median step %s, %s over all nodes\n",
        json_array_size(ranks), json_array_size(nodes),
        fmt(a, sizeof a, "%.1f ms", num(json_object_get(doc, "median_step_p50_ms"))),
        fmt(c, sizeof c, "%.1f samples/s", num(json_object_get(doc, "samples_per_second"))));
    if (json_array_size(json_object_get(doc, "jobs_seen")) > 1) {
        gs_tbuf_puts(b, "note: the runs name different jobs:");
        json_array_foreach(json_object_get(doc, "jobs_seen"), i, row)
            gs_tbuf_printf(b, " %s", json_string_value(row));
        gs_tbuf_puts(b, "\n");
    }
    nodes_table(b, nodes);
    ranks_table(b, ranks, s);
    gs_tbuf_puts(b, "\n");
    if (!json_is_object(s)) {
        gs_tbuf_printf(b,
                       "straggler: none (no rank computes more than %.2fx the other ranks' "
                       "median and %.0f ms longer)\n",
                       num(json_object_get(doc, "straggler_ratio")),
                       num(json_object_get(doc, "straggler_min_gap_ms")));
        return;
    }
    straggler_text(b, doc, s);
}
