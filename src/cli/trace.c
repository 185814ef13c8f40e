/*
 * `gpuscope trace analyze [OPTIONS] FILE|DIR...`: PyTorch profiler traces (Kineto Chrome-trace
 * JSON, .json or .json.gz, one file per rank) analysed with Holistic Trace Analysis'
 * definitions (src/trace/, docs/trace.md), printed as tables or as one JSON document.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "base/dirfile.h"
#include "base/term.h"
#include "cli/cli.h"
#include "client/agent_client.h"
#include "diag/diag.h"
#include "gpuscope/gs_err.h"
#include "trace/diff.h"
#include "trace/trace.h"

#define TRACE_MAX_FILES 4096

static void usage(FILE *out)
{
    fprintf(out,
            "usage: gpuscope trace analyze [OPTIONS] FILE|DIR...\n"
            "\n"
            "Analyses PyTorch profiler (Kineto) traces: one .json or .json.gz per rank (a\n"
            "directory means every *.json and *.json.gz in it). Figures and their definitions\n"
            "(the same as Holistic Trace Analysis'): docs/trace.md.\n"
            "\n"
            "options:\n"
            "  --json                 print the analysis as one JSON document\n"
            "  --top N                kernels listed per type before 'others' (default 10)\n"
            "  --kernel-wait-us US    gaps shorter than this are kernel wait (default 30)\n"
            "  --include-last-step    keep kernels launched in the last ProfilerStep\n"
            "  --advice               add the diagnosis of the profile (docs/report.md,\n"
            "                         FINDINGS: profile_*) after the tables / as \"findings\"\n"
            "  --color, --no-color    bold headings (default: when stdout is a terminal)\n"
            "  -h, --help             this help\n"
            "\n"
            "       gpuscope trace diff [--json] [--top N] A B\n"
            "\n"
            "Compares two traces, or two sets of traces (a directory, or a gpuscope run\n"
            "directory with profile/): the temporal breakdown and kernel time by type side by\n"
            "side, then the kernels whose total time changed most, appeared or vanished.\n");
}

static int has_suffix(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);

    return n >= m && strcmp(s + n - m, suf) == 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Adds path, or the trace files of a directory (sorted), to files. */
static int add_path(const char *path, char **files, size_t *n)
{
    struct stat st;
    DIR *d;
    struct dirent *e;
    size_t first = *n;

    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
        if (*n >= TRACE_MAX_FILES)
            return -1;
        files[(*n)++] = strdup(path);
        return 0;
    }
    d = opendir(path);
    if (!d)
        return -1;
    while ((e = readdir(d)) != NULL) {
        char *p;

        if (e->d_name[0] == '.' ||
            !(has_suffix(e->d_name, ".json") || has_suffix(e->d_name, ".json.gz")))
            continue;
        if (*n >= TRACE_MAX_FILES)
            break;
        p = malloc(strlen(path) + strlen(e->d_name) + 2);
        if (!p)
            break;
        sprintf(p, "%s/%s", path, e->d_name);
        files[(*n)++] = p;
    }
    closedir(d);
    qsort(files + first, *n - first, sizeof *files, cmp_str);
    if (*n == first)
        fprintf(stderr, "gpuscope trace: %s: no .json or .json.gz files\n", path);
    return 0;
}

static int analyze(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},
        {"top", required_argument, NULL, 't'},
        {"kernel-wait-us", required_argument, NULL, 'k'},
        {"include-last-step", no_argument, NULL, 'l'},
        {"advice", no_argument, NULL, 'a'},
        {"color", no_argument, NULL, 'c'},
        {"no-color", no_argument, NULL, 'C'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct gs_trace_opts o;
    enum gs_color_mode cm = GS_COLOR_AUTO;
    int json = 0, advice = 0, opt, rc = 0;
    char **files = calloc(TRACE_MAX_FILES, sizeof *files);
    struct gs_trace_job *job = NULL;
    size_t nf = 0, nt = 0;
    json_t *doc;

    if (!files) {
        fprintf(stderr, "gpuscope trace: out of memory\n");
        return 1;
    }
    gs_trace_opts_default(&o);
    /* The record arrays grow by realloc: keep big blocks mmapped so that growing them is a
     * mremap, never a copy that holds old and new at once (peak RSS, bench/RESULTS.md). */
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        char *end;

        switch (opt) {
        case 'j':
            json = 1;
            break;
        case 't':
            o.top_kernels = (int)strtol(optarg, &end, 10);
            if (*end || o.top_kernels < 1 || o.top_kernels > 1000) {
                fprintf(stderr, "gpuscope trace: --top wants a number 1..1000, not '%s'\n", optarg);
                rc = GS_EXIT_USAGE;
                goto out;
            }
            break;
        case 'k':
            o.kernel_wait_us = strtod(optarg, &end);
            if (*end || !(o.kernel_wait_us >= 0 && o.kernel_wait_us < 1e9)) {
                fprintf(stderr, "gpuscope trace: --kernel-wait-us wants microseconds, not '%s'\n",
                        optarg);
                rc = GS_EXIT_USAGE;
                goto out;
            }
            break;
        case 'l':
            o.include_last_step = 1;
            break;
        case 'a':
            advice = 1;
            break;
        case 'c':
            cm = GS_COLOR_ALWAYS;
            break;
        case 'C':
            cm = GS_COLOR_NEVER;
            break;
        case 'h':
            usage(stdout);
            goto out;
        default:
            usage(stderr);
            rc = GS_EXIT_USAGE;
            goto out;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "gpuscope trace analyze: no trace file or directory given\n");
        usage(stderr);
        rc = GS_EXIT_USAGE;
        goto out;
    }
    for (int i = optind; i < argc; i++)
        if (add_path(argv[i], files, &nf) != 0) {
            fprintf(stderr, "gpuscope trace: %s: cannot read\n", argv[i]);
            rc = gs_rc_exit_code(GS_EIO);
            goto out;
        }
    /* one rank at a time: only one trace's records are in memory */
    job = gs_trace_job_new(&o);
    if (!job) {
        fprintf(stderr, "gpuscope trace: out of memory\n");
        rc = 1;
        goto out;
    }
    for (size_t i = 0; i < nf; i++) {
        struct gs_err err = {0};
        struct gs_trace *t = NULL;
        int r = gs_trace_load(files[i], &t, &err);

        if (r != GS_OK) {
            fprintf(stderr, "gpuscope trace: %s\n", err.msg);
            rc = gs_rc_exit_code(r);
            continue;
        }
        if (!rc && gs_trace_job_add(job, t) != GS_OK) {
            fprintf(stderr, "gpuscope trace: %s: out of memory\n", files[i]);
            rc = 1;
        }
        gs_trace_free(t);
        nt++;
    }
    if (rc)
        goto out;
    if (!nt) {
        rc = gs_rc_exit_code(GS_ENOTFOUND);
        goto out;
    }
    doc = gs_trace_job_done(job);
    if (!doc) {
        fprintf(stderr, "gpuscope trace: out of memory\n");
        rc = 1;
        goto out;
    }
    if (advice) {
        json_t *rep = json_pack("{s:O}", "profile", doc);
        json_t *fs = rep ? json_array() : NULL;

        if (fs)
            gs_diag_profile_findings(rep, fs);
        json_object_set_new(doc, "findings", fs ? fs : json_array());
        json_decref(rep);
    }
    if (json) {
        json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(15));
        fputc('\n', stdout);
    } else {
        int color = gs_term_use_color(cm, STDOUT_FILENO);
        size_t i, j;
        json_t *f, *a;

        gs_trace_print(stdout, doc, color);
        if (advice) {
            printf("\n%sfindings:%s%s\n", color ? "\x1b[1m" : "", color ? "\x1b[0m" : "",
                   json_array_size(json_object_get(doc, "findings")) ? "" : " none");
            json_array_foreach(json_object_get(doc, "findings"), i, f)
            {
                printf("  [%s] %s: %s\n", json_string_value(json_object_get(f, "severity")),
                       json_string_value(json_object_get(f, "id")),
                       json_string_value(json_object_get(f, "title")));
                json_array_foreach(json_object_get(f, "advice"), j, a)
                    printf("      - %s\n", json_string_value(a));
            }
        }
    }
    json_decref(doc);
out:
    for (size_t i = 0; i < nf; i++)
        free(files[i]);
    free(files);
    gs_trace_job_free(job);
    return rc;
}

/* Loads FILE|DIR (a run directory means its profile/) into tr; returns how many, -1 on error. */
static long load_set(const char *arg, struct gs_trace **tr, size_t cap)
{
    char **files = calloc(TRACE_MAX_FILES, sizeof *files), sub[4096];
    size_t nf = 0, nt = 0;
    struct stat st;
    long rc = 0;

    if (!files)
        return -1;
    snprintf(sub, sizeof sub, "%s/profile", arg);
    if (stat(sub, &st) == 0 && S_ISDIR(st.st_mode))
        arg = sub;
    if (add_path(arg, files, &nf) != 0) {
        fprintf(stderr, "gpuscope trace: %s: cannot read\n", arg);
        rc = -1;
    }
    for (size_t i = 0; i < nf && rc == 0 && nt < cap; i++) {
        struct gs_err err = {0};

        if (gs_trace_load(files[i], &tr[nt], &err) != GS_OK) {
            fprintf(stderr, "gpuscope trace: %s\n", err.msg);
            rc = -1;
            break;
        }
        nt++;
    }
    for (size_t i = 0; i < nf; i++)
        free(files[i]);
    free(files);
    if (rc != 0) {
        for (size_t i = 0; i < nt; i++)
            gs_trace_free(tr[i]);
        return -1;
    }
    return (long)nt;
}

static void print_delta_table(const json_t *rows, const char *first)
{
    size_t i, w = strlen(first);
    json_t *r;
    char pct[32];

    json_array_foreach(rows, i, r) if (strlen(json_string_value(json_object_get(r, "what"))) > w)
        w = strlen(json_string_value(json_object_get(r, "what")));
    printf("%-*s  %12s  %12s  %12s  %9s\n", (int)w, first, "A (us)", "B (us)", "change (us)",
           "change");
    json_array_foreach(rows, i, r)
    {
        const json_t *p = json_object_get(r, "delta_pct");

        if (json_is_number(p))
            snprintf(pct, sizeof pct, "%+.1f%%", json_number_value(p));
        else
            snprintf(pct, sizeof pct, "new");
        printf("%-*s  %12lld  %12lld  %+12lld  %9s\n", (int)w,
               json_string_value(json_object_get(r, "what")),
               (long long)json_integer_value(json_object_get(r, "a_us")),
               (long long)json_integer_value(json_object_get(r, "b_us")),
               (long long)json_integer_value(json_object_get(r, "delta_us")), pct);
    }
}

static int diff(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},
        {"top", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct gs_trace **ta = calloc(TRACE_MAX_FILES, sizeof *ta);
    struct gs_trace **tb = calloc(TRACE_MAX_FILES, sizeof *tb);
    long na = -1, nb = -1;
    int json = 0, top = 15, opt, rc = 0;
    json_t *out = NULL;

    if (!ta || !tb) {
        rc = 1;
        goto done;
    }
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        char *end;

        switch (opt) {
        case 'j':
            json = 1;
            break;
        case 't':
            top = (int)strtol(optarg, &end, 10);
            if (*end || top < 1 || top > 10000) {
                fprintf(stderr, "gpuscope trace diff: --top wants a number 1..10000\n");
                rc = GS_EXIT_USAGE;
                goto done;
            }
            break;
        case 'h':
            usage(stdout);
            goto done;
        default:
            usage(stderr);
            rc = GS_EXIT_USAGE;
            goto done;
        }
    }
    if (argc - optind != 2) {
        fprintf(stderr, "gpuscope trace diff: want two traces (or directories): A B\n");
        rc = GS_EXIT_USAGE;
        goto done;
    }
    na = load_set(argv[optind], ta, TRACE_MAX_FILES);
    nb = load_set(argv[optind + 1], tb, TRACE_MAX_FILES);
    if (na <= 0 || nb <= 0) {
        if (na == 0 || nb == 0)
            fprintf(stderr, "gpuscope trace diff: no trace in %s\n",
                    na == 0 ? argv[optind] : argv[optind + 1]);
        rc = 2;
        goto done;
    }
    out = gs_trace_diff(ta, (size_t)na, tb, (size_t)nb, top);
    if (!out) {
        fprintf(stderr, "gpuscope trace diff: out of memory\n");
        rc = 1;
        goto done;
    }
    if (json) {
        json_dumpf(out, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(15));
        fputc('\n', stdout);
    } else {
        size_t i;
        json_t *r;

        printf("A: %s (%ld trace%s)\nB: %s (%ld trace%s)\n\n", argv[optind], na, na == 1 ? "" : "s",
               argv[optind + 1], nb, nb == 1 ? "" : "s");
        print_delta_table(json_object_get(out, "temporal"), "temporal (all ranks)");
        printf("\n");
        print_delta_table(json_object_get(out, "kernel_types"), "kernel time by type (sum)");
        printf("\nkernels whose time changed most:\n");
        printf("%-60s  %-13s  %10s  %10s  %11s\n", "kernel", "type", "A (us)", "B (us)",
               "change (us)");
        json_array_foreach(json_object_get(out, "kernels"), i, r)
        {
            const char *nm = json_string_value(json_object_get(r, "what"));
            const char *stt = json_string_value(json_object_get(r, "status"));

            printf("%-60.60s  %-13s  %10lld  %10lld  %+11lld%s%s\n", nm,
                   json_string_value(json_object_get(r, "type")),
                   (long long)json_integer_value(json_object_get(r, "a_us")),
                   (long long)json_integer_value(json_object_get(r, "b_us")),
                   (long long)json_integer_value(json_object_get(r, "delta_us")),
                   strcmp(stt, "changed") == 0 ? "" : "  ", strcmp(stt, "changed") == 0 ? "" : stt);
        }
    }
done:
    json_decref(out);
    for (long i = 0; i < na; i++)
        gs_trace_free(ta[i]);
    for (long i = 0; i < nb; i++)
        gs_trace_free(tb[i]);
    free(ta);
    free(tb);
    return rc;
}

/* `gpuscope trace capture --run ID`: the node's agent asks the run's ranks over their record
 * connections (POST /api/v1/runs/ID/capture, docs/api.md); only the run's owner or an admin
 * may. */
static int capture_run(const char *id, long steps)
{
    char sock[256], path[160], *body = NULL;
    size_t len = 0;
    struct gs_err e;
    json_t *doc;
    int status = 0;

    gs_err_clear(&e);
    if (strspn(id, "0123456789") != strlen(id) || !id[0] || strlen(id) > 18) {
        fprintf(stderr,
                "gpuscope trace capture: --run wants a run id (gpuscope runs, "
                "/api/v1/runs), not '%s'\n",
                id);
        return GS_EXIT_USAGE;
    }
    if (!gs_agent_client_socket(sock, sizeof sock)) {
        fprintf(stderr, "gpuscope trace capture: no agent socket to ask (GPUSCOPE_HTTP_SOCKET "
                        "is off, no /run/gpuscope/agent.sock, no XDG_RUNTIME_DIR)\n");
        return gs_rc_exit_code(GS_ENOTFOUND);
    }
    snprintf(path, sizeof path, "/api/v1/runs/%s/capture?steps=%ld", id, steps);
    if (gs_agent_client_request(sock, "POST", path, GS_AGENT_CLIENT_TIMEOUT_MS, &status, &body,
                                &len, &e) != GS_OK) {
        fprintf(stderr, "gpuscope trace capture: %s\n", e.msg);
        return gs_rc_exit_code(GS_EIO);
    }
    doc = json_loadb(body, len, 0, NULL);
    free(body);
    if (status != 202) {
        const char *why = json_string_value(json_object_get(doc, "error"));
        fprintf(stderr, "gpuscope trace capture: run %s: %s (HTTP %d)\n", id, why ? why : "refused",
                status);
        json_decref(doc);
        return gs_rc_exit_code(status == 404   ? GS_ENOTFOUND
                               : status == 400 ? GS_EINVAL
                               : status == 403 ? GS_EPERM
                                               : GS_EIO);
    }
    printf("asked run %s for a profiler window of %ld step(s): %lld of %lld rank(s) reached; "
           "each writes its trace to its profile directory ($GPUSCOPE_PROFILE_DIR, else "
           "./gpuscope-profile where it runs)\n",
           id, steps, (long long)json_integer_value(json_object_get(doc, "sent")),
           (long long)json_integer_value(json_object_get(doc, "ranks")));
    json_decref(doc);
    return 0;
}

/* `gpuscope trace capture --dir DIR [--steps N]`: asks the job that `gpuscope run --out DIR`
 * runs for a profiler window of its next N steps (python/gpuscope/_profile.py polls
 * DIR/profile.request at step boundaries). Only who may write DIR can ask. With --run ID,
 * a run the node's agent keeps (capture_run). */
static int capture(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"dir", required_argument, NULL, 'd'},
        {"run", required_argument, NULL, 'r'},
        {"steps", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *dir = NULL, *run = NULL;
    long steps = 5;
    char text[64];
    struct timespec now;
    struct gs_err err;
    struct stat st;
    int opt, dirfd, n, rc;

    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        char *end;

        switch (opt) {
        case 'd':
            dir = optarg;
            break;
        case 'r':
            run = optarg;
            break;
        case 's':
            steps = strtol(optarg, &end, 10);
            if (*end || steps < 1 || steps > 1000) {
                fprintf(stderr, "gpuscope trace capture: --steps wants 1..1000, not '%s'\n",
                        optarg);
                return GS_EXIT_USAGE;
            }
            break;
        case 'h':
            printf("usage: gpuscope trace capture --dir DIR [--steps N]\n"
                   "       gpuscope trace capture --run ID [--steps N]\n\n"
                   "Asks the job running under `gpuscope run --out DIR` for a torch.profiler\n"
                   "window of its next N steps (default 5, at most 1000), on every rank; the\n"
                   "traces go to DIR/profile/ and into the run's report at its end.\n"
                   "--run ID asks a run the node's agent keeps (its id in the dashboard or\n"
                   "/api/v1/runs) through the agent: only its owner or an admin may; each rank\n"
                   "writes to $GPUSCOPE_PROFILE_DIR, else ./gpuscope-profile (docs/trace.md).\n");
            return 0;
        default:
            return GS_EXIT_USAGE;
        }
    }
    if ((!dir == !run) || optind != argc) {
        fprintf(stderr, "usage: gpuscope trace capture --dir DIR | --run ID [--steps N]\n");
        return GS_EXIT_USAGE;
    }
    if (run)
        return capture_run(run, steps);
    /* the run directory as gpuscope run checks it (base/dirfile.h): ours, private; the
     * request made there whole, without following a link (the package honours only a
     * regular file of the directory's owner) */
    dirfd = gs_dirfile_open_dir(dir, 0, NULL, &err);
    if (dirfd < 0) {
        fprintf(stderr, "gpuscope trace capture: %s\n", err.msg);
        return gs_rc_exit_code(dirfd);
    }
    if (fstatat(dirfd, "steps.jsonl", &st, AT_SYMLINK_NOFOLLOW) != 0) {
        fprintf(stderr,
                "gpuscope trace capture: %s is not a gpuscope run directory (no "
                "steps.jsonl)\n",
                dir);
        close(dirfd);
        return gs_rc_exit_code(GS_ENOTFOUND);
    }
    clock_gettime(CLOCK_REALTIME, &now);
    n = snprintf(text, sizeof text, "%lld%09ld %ld\n", (long long)now.tv_sec, now.tv_nsec, steps);
    rc = gs_dirfile_write(dirfd, "profile.request", 0644, text, (size_t)n, &err);
    close(dirfd);
    if (rc != GS_OK) {
        fprintf(stderr, "gpuscope trace capture: %s/%s\n", dir, err.msg);
        return gs_rc_exit_code(rc);
    }
    printf("asked for a profiler window of %ld step(s); traces in %s/profile/\n", steps, dir);
    return 0;
}

int gs_cli_trace(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        fprintf(argc < 2 ? stderr : stdout,
                "usage: gpuscope trace analyze [OPTIONS] FILE|DIR...\n"
                "       gpuscope trace diff [OPTIONS] A B\n"
                "       gpuscope trace capture --dir RUN_DIR | --run ID [--steps N]\n"
                "(gpuscope trace analyze --help for both)\n");
        return argc < 2 ? GS_EXIT_USAGE : 0;
    }
    if (strcmp(argv[1], "analyze") == 0)
        return analyze(argc - 1, argv + 1);
    if (strcmp(argv[1], "diff") == 0)
        return diff(argc - 1, argv + 1);
    if (strcmp(argv[1], "capture") == 0)
        return capture(argc - 1, argv + 1);
    fprintf(stderr, "gpuscope trace: unknown subcommand '%s'\n", argv[1]);
    return GS_EXIT_USAGE;
}
