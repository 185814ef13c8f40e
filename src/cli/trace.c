/*
 * `gpuscope trace analyze [OPTIONS] FILE|DIR...`: PyTorch profiler traces (Kineto Chrome-trace
 * JSON, .json or .json.gz, one file per rank) analysed with Holistic Trace Analysis'
 * definitions (src/trace/, docs/trace.md), printed as tables or as one JSON document.
 */
#include <dirent.h>
#include <getopt.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/term.h"
#include "diag/diag.h"
#include "gpuscope/gs_err.h"
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
            "  -h, --help             this help\n");
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

        if (e->d_name[0] == '.' || !(has_suffix(e->d_name, ".json") ||
                                     has_suffix(e->d_name, ".json.gz")))
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
    struct gs_trace **tr = calloc(TRACE_MAX_FILES, sizeof *tr);
    size_t nf = 0, nt = 0;
    json_t *doc;

    if (!files || !tr) {
        free(files);
        free(tr);
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
                fprintf(stderr, "gpuscope trace: --top wants a number 1..1000, not '%s'\n",
                        optarg);
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
    for (size_t i = 0; i < nf; i++) {
        struct gs_err err = {0};
        int r = gs_trace_load(files[i], &tr[nt], &err);

        if (r != GS_OK) {
            fprintf(stderr, "gpuscope trace: %s\n", err.msg);
            rc = gs_rc_exit_code(r);
            continue;
        }
        nt++;
    }
    if (rc)
        goto out;
    if (!nt) {
        rc = gs_rc_exit_code(GS_ENOTFOUND);
        goto out;
    }
    doc = gs_trace_analyze(tr, nt, &o);
    if (!doc) {
        fprintf(stderr, "gpuscope trace: out of memory\n");
        rc = 1;
        goto out;
    }
    if (advice) {
        json_t *rep = json_pack("{s:O}", "profile", doc);
        json_t *fs = rep ? json_array() : NULL;

        if (fs)
            gs_diag_profile(rep, fs);
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
            json_array_foreach(json_object_get(doc, "findings"), i, f) {
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
    for (size_t i = 0; i < nt; i++)
        gs_trace_free(tr[i]);
    free(files);
    free(tr);
    return rc;
}

int gs_cli_trace(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        fprintf(argc < 2 ? stderr : stdout,
                "usage: gpuscope trace analyze [OPTIONS] FILE|DIR...   (see --help)\n");
        return argc < 2 ? GS_EXIT_USAGE : 0;
    }
    if (strcmp(argv[1], "analyze") == 0)
        return analyze(argc - 1, argv + 1);
    fprintf(stderr, "gpuscope trace: unknown subcommand '%s'\n", argv[1]);
    return GS_EXIT_USAGE;
}
