/*
 * `gpuscope runs`: the training runs the local agent received (GET /api/v1/runs over its unix
 * socket, client/agent_client.h), as an aligned table or, with --json, the API's document as it
 * came. The agent applies its visibility policy to the caller (SO_PEERCRED), so the list is
 * what the API shows this user; runs of others it withheld are counted in the footer. See
 * docs/runs.md.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/parse.h"
#include "base/term.h"
#include "base/userdir.h"
#include "cli/agentdoc.h"
#include "cli/cli.h"
#include "client/agent_client.h"
#include "gpuscope/gs_err.h"

#define RUNS_TIMEOUT_MS 5000

static void runs_usage(FILE *out)
{
    fprintf(out,
            "usage: gpuscope runs [--json] [--limit N] [--from I]\n\n"
            "Lists the training runs the local agent received on its step socket (gpuscope\n"
            "run, the Python package), the ones going on first, then the stored ones, newest\n"
            "first: id, state, user, steps, start, duration, samples/s, mean GPU utilization,\n"
            "name. The agent shows you what its API would (other users' runs per its\n"
            "visibility policy). The id is what gpuscope report ID and gpuscope trace capture\n"
            "--run ID take.\n\n"
            "  --json       the agent's /api/v1/runs document, unchanged\n"
            "  --limit N    at most N runs (1..1000, default 20)\n"
            "  --from I     skip the first I runs (paging; default 0)\n"
            "  -h, --help   this text\n\n"
            "The agent's socket: $GPUSCOPE_HTTP_SOCKET, else /run/gpuscope/agent.sock, else\n"
            "$XDG_RUNTIME_DIR/gpuscope/agent.sock; when none answers, your own running\n"
            "gpuscope demo. Colour follows NO_COLOR and the terminal.\n"
            "See docs/runs.md.\n");
}

static void fmt_num(char *out, size_t len, const json_t *v, const char *fmt, double scale)
{
    if (json_is_number(v))
        snprintf(out, len, fmt, json_number_value(v) * scale);
    else
        snprintf(out, len, "-");
}

static void fmt_duration(char *out, size_t len, double s)
{
    if (!isfinite(s) || s < 0)
        snprintf(out, len, "-");
    else if (s < 60)
        snprintf(out, len, "%.1fs", s);
    else if (s < 3600)
        snprintf(out, len, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else
        snprintf(out, len, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
}

static void print_table(const json_t *doc, int color)
{
    const json_t *runs = json_object_get(doc, "runs");
    const json_t *r;
    size_t i;
    double now = (double)time(NULL);

    printf("%5s  %-11s  %-10s  %7s  %-16s  %9s  %10s  %5s  %s\n", "ID", "STATE", "USER", "STEPS",
           "STARTED", "DURATION", "SAMPLES/S", "GPU%", "NAME");
    json_array_foreach(runs, i, r)
    {
        const char *state = json_string_value(json_object_get(r, "state"));
        const json_t *start = json_object_get(r, "start"), *end = json_object_get(r, "end");
        const char *user = json_string_value(json_object_get(r, "user"));
        char started[32] = "-", dur[32], sps[32], util[32], uid[32];
        const char *sgr = "";

        if (json_is_number(start)) {
            time_t t = (time_t)json_number_value(start);
            struct tm tm;
            localtime_r(&t, &tm);
            strftime(started, sizeof started, "%Y-%m-%d %H:%M", &tm);
            fmt_duration(dur, sizeof dur,
                         (json_is_number(end) ? json_number_value(end) : now) -
                             json_number_value(start));
        } else {
            snprintf(dur, sizeof dur, "-");
        }
        fmt_num(sps, sizeof sps, json_object_get(r, "train_samples_per_second"), "%.1f", 1);
        fmt_num(util, sizeof util, json_object_get(r, "gpu_avg_utilization_percent"), "%.0f", 1);
        if (!user) {
            snprintf(uid, sizeof uid, "uid %lld",
                     (long long)json_integer_value(json_object_get(r, "uid")));
            user = uid;
        }
        if (color && state)
            sgr = strcmp(state, "running") == 0       ? "\033[32m"
                  : strcmp(state, "interrupted") == 0 ? "\033[33m"
                                                      : "";
        printf("%5lld  %s", (long long)json_integer_value(json_object_get(r, "id")), sgr);
        gs_term_put_cell(stdout, state ? state : "?", 11, 11);
        printf("%s  ", sgr[0] ? "\033[0m" : "");
        gs_term_put_cell(stdout, user, 10, 10);
        printf("  %7lld  %-16s  %9s  %10s  %5s  ",
               (long long)json_integer_value(json_object_get(r, "steps")), started, dur, sps, util);
        gs_term_put_cell(stdout, json_string_value(json_object_get(r, "name")), 60, 0);
        putchar('\n');
    }
    {
        long long total = json_integer_value(json_object_get(doc, "total"));
        long long from = json_integer_value(json_object_get(doc, "from"));
        const json_t *hidden = json_object_get(doc, "hidden");

        printf("%zu of %lld run%s", json_array_size(runs), total, total == 1 ? "" : "s");
        if (from > 0)
            printf(" (from %lld)", from);
        if (json_is_integer(hidden) && json_integer_value(hidden) > 0)
            printf("; %lld of other users not shown (the agent's visibility policy)",
                   (long long)json_integer_value(hidden));
        putchar('\n');
    }
}

int gs_cli_runs(int argc, char **argv)
{
    int json = 0, rc;
    long limit = 20, from = 0;
    char sock[256], path[128], demo[256];
    int have, from_demo = 0;
    char *body = NULL;
    size_t len = 0;
    json_t *doc;
    struct gs_err err = {0};

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            runs_usage(stdout);
            return GS_EXIT_OK;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if ((strcmp(a, "--limit") == 0 || strcmp(a, "--from") == 0) && i + 1 < argc) {
            int is_limit = a[2] == 'l';
            long v = gs_parse_is_digits(argv[++i]) && strlen(argv[i]) < 10 ? atol(argv[i]) : -1;
            if (is_limit ? v < 1 || v > 1000 : v < 0) {
                fprintf(stderr, "gpuscope runs: %s %s: %s\n", a, argv[i],
                        is_limit ? "a number of runs, 1..1000" : "a run index, 0 or more");
                return GS_EXIT_USAGE;
            }
            *(is_limit ? &limit : &from) = v;
        } else {
            fprintf(stderr, "gpuscope runs: unknown argument '%s' (gpuscope runs --help)\n", a);
            return GS_EXIT_USAGE;
        }
    }
    snprintf(path, sizeof path, "/api/v1/runs?from=%ld&limit=%ld", from, limit);
    have = gs_agent_client_socket(sock, sizeof sock);
    rc = have ? gs_agent_client_get(sock, path, RUNS_TIMEOUT_MS, &body, &len, &err) : GS_ENOTFOUND;
    /* No agent answers and none was named: the user's own `gpuscope demo`, where this user's
     * runs went (it publishes its steps socket for them, base/userdir.h) */
    if (rc != GS_OK && !getenv("GPUSCOPE_HTTP_SOCKET") &&
        gs_user_runtime_path(demo, sizeof demo, "demo-agent.sock") == 0) {
        struct gs_err e2 = {0};
        if (gs_agent_client_get(demo, path, RUNS_TIMEOUT_MS, &body, &len, &e2) == GS_OK) {
            rc = GS_OK;
            snprintf(sock, sizeof sock, "%s", demo);
            from_demo = 1;
        }
    }
    if (rc != GS_OK && !have) {
        fprintf(stderr, "gpuscope runs: no local agent socket (GPUSCOPE_HTTP_SOCKET, "
                        "/run/gpuscope/agent.sock, $XDG_RUNTIME_DIR/gpuscope/agent.sock); runs "
                        "are kept by a running gpuscope agent (docs/agent.md) or gpuscope demo\n");
        return gs_rc_exit_code(GS_ENOTFOUND);
    }
    if (rc != GS_OK) {
        fprintf(stderr,
                "gpuscope runs: %s\ngpuscope runs: runs are kept by a running gpuscope agent "
                "(or gpuscope demo: GPUSCOPE_HTTP_SOCKET names its socket)\n",
                err.msg);
        return gs_rc_exit_code(rc);
    }
    if ((rc = gs_cli_agent_doc("runs", sock, body, len, json, "runs", &doc)) >= 0)
        return rc;
    print_table(doc, gs_term_use_color(GS_COLOR_AUTO, STDOUT_FILENO));
    if (from_demo)
        printf("(from your gpuscope demo, %s: simulated GPUs)\n", sock);
    json_decref(doc);
    return fflush(stdout) == 0 ? GS_EXIT_OK : gs_rc_exit_code(GS_EIO);
}
