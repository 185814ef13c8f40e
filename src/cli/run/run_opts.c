/*
 * run_opts.c - `gpuscope run`'s options: the usage text and the parser (docs/run.md).
 */
#include "cli/run/run_int.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/term.h"
#include "cli/cli.h"
#include "diag/diag.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"
#include "gpuscope/gs_sampler.h"
#include "run/agg.h"
#include "run/attrib.h"
#include "run/hang.h"
#include "run/receiver.h"
#include "run/record.h"
#include "run/runstacks.h"
#include "run/session.h"
#include "store/history.h"
#include "trace/window.h"

void gs_runcli_usage(FILE *out)
{
    fputs("usage: gpuscope run [--out DIR] [--interval S] [--no-auto] -- CMD [ARGS...]\n"
          "\n"
          "Runs CMD, receives its training step records, samples the GPUs its processes use,\n"
          "and writes DIR/metrics_report.json, DIR/steps.jsonl and DIR/samples.db.\n"
          "\n"
          "options:\n"
          "  --out DIR       output directory (default ./gpuscope-run-YYYYmmdd-HHMMSS);\n"
          "                  created if missing; refused if it already holds a run's files,\n"
          "                  is a link, is another user's or others may write it\n"
          "  --interval S    GPU sampling period in seconds, 0.1 to 60 (default 0.5)\n"
          "  --no-auto       do not put the auto-instrumenting sitecustomize on PYTHONPATH\n"
          "  --auto          put it there (the default)\n"
          "  --stacks off|HZ sample the Python main thread of every rank at HZ (default 20):\n"
          "                  the report's stacks section, DIR/stacks.svg (docs/stacks.md)\n"
          "  --hang-after X  hang watchdog: no step for X times the p95 step time (default\n"
          "                  10; 0 off) with GPUs idle or spinning dumps every rank's stacks\n"
          "                  into DIR/hang-N-stacks.txt\n"
          "  --hang-min S    ... and at least S seconds without a step (default 60); before\n"
          "                  5 steps: no step and no CPU used by CMD's processes for S\n"
          "  --log-steps N   the package's step lines every N steps (default: its own,\n"
          "                  10; 0: none), prefixed [rank R] in a multi-rank job\n"
          "  --profile STEPS torch.profiler traces of steps A..B-1 (A:B) or of N steps every P\n"
          "                  (every:P:N) into DIR/profile, analysed into the report\n"
          "  --name NAME     the run's name (default: the HF run_name, else the script and\n"
          "                  the start time); also in the agent's run list\n"
          "  --tag K=V       a tag on the run (report run.tags, the agent's run list),\n"
          "                  up to 16\n"
          "  --job ID        the multi-node job this run is part of (default: torchrun's\n"
          "                  run id, SLURM_JOB_ID, ..., MASTER_ADDR:MASTER_PORT)\n"
          "  --no-agent      do not send the run to the node's agent as well\n"
          "  --stop-after-steps N\n"
          "                  stop CMD once every rank has sent N steps: SIGTERM to its\n"
          "                  process group (CMD runs in one of its own), SIGKILL after\n"
          "                  --stop-grace S (default 10); outcome \"stopped\", exit status 0\n"
          "  -h, --help      this help\n"
          "\n"
          "CMD sees GPUSCOPE_RUN_SOCKET (where to send step records) and GPUSCOPE_RUN_DIR.\n"
          "Exit status: CMD's; 128+N if signal N killed it; 127 CMD not found; 126 CMD not\n"
          "executable; 125 gpuscope run failed before CMD started; 123 CMD exited 0 but DIR\n"
          "could not be written completely (full disk: the report goes to $TMPDIR instead);\n"
          "2 bad usage.\n"
          "See docs/run.md.\n",
          out);
}

/* ---- options ---- */

static int parse_interval(const char *s, double *out)
{
    char *end;
    double v;

    errno = 0;
    v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < 0.1 || v > 60)
        return -1;
    *out = v;
    return 0;
}

/* A name: 1..255 bytes without control characters; a tag: K=V, K 1..48 bytes of
 * [A-Za-z0-9_.-], V up to 128 bytes without control characters. */
static int run_check_label(const char *opt, const char *v, int is_name)
{
    const char *eq = v && !is_name ? strchr(v, '=') : NULL;
    size_t n = v ? strlen(v) : 0;
    int bad = !v || n == 0 || n > 255;
    for (size_t i = 0; !bad && i < n; i++)
        bad = (unsigned char)v[i] < 0x20 || v[i] == 0x7f;
    if (!bad && !is_name) {
        size_t k = eq ? (size_t)(eq - v) : 0;
        bad = !eq || k == 0 || k > 48 || strlen(eq + 1) > 128;
        for (size_t i = 0; !bad && i < k; i++)
            bad = !isalnum((unsigned char)v[i]) && !strchr("_.-", v[i]);
    }
    if (bad)
        fprintf(stderr, "gpuscope run: %s: '%s' is not %s\n", opt, v ? v : "",
                is_name ? "a name of 1 to 255 printable bytes"
                        : "KEY=VALUE (KEY 1..48 of [A-Za-z0-9_.-], VALUE up to 128 bytes)");
    return bad ? -1 : 0;
}

int gs_runcli_parse(struct run_opts *o, int argc, char **argv)
{
    int i;

    memset(o, 0, sizeof *o);
    o->interval_s = 0.5;
    o->auto_inject = 1;
    o->stacks_hz = 20;
    o->hang_factor = GS_HANG_FACTOR; /* the agent's training_hang defaults too (run/hang.h) */
    o->hang_min_s = GS_HANG_MIN_S;
    o->log_steps = -1;
    o->stop_grace_s = 10;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;

        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-')
            break; /* CMD starts here */
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            o->help = 1;
            return 0;
        } else if (strcmp(a, "--no-auto") == 0) {
            o->auto_inject = 0;
        } else if (strcmp(a, "--auto") == 0) {
            o->auto_inject = 1;
        } else if (strcmp(a, "--stacks") == 0 || strncmp(a, "--stacks=", 9) == 0 ||
                   strcmp(a, "--hang-after") == 0 || strncmp(a, "--hang-after=", 13) == 0 ||
                   strcmp(a, "--hang-min") == 0 || strncmp(a, "--hang-min=", 11) == 0) {
            const char *v = strchr(a, '=') ? strchr(a, '=') + 1 : i + 1 < argc ? argv[++i] : NULL;
            char *end = NULL;
            double x = v ? strtod(v, &end) : -1;
            if (strncmp(a, "--stacks", 8) == 0 && v)
                x = gs_runstacks_parse_rate(v);
            else if (!v || !end || *end || end == v || !isfinite(x) || x < 0 || x > 1e6)
                x = -1;
            if (x < 0) {
                fprintf(stderr, "gpuscope run: %.12s: '%s' is not %s\n", a, v ? v : "",
                        strncmp(a, "--stacks", 8) == 0 ? "off, on or a rate of 1 to 200 Hz"
                                                       : "a non-negative number");
                return -1;
            }
            if (strncmp(a, "--stacks", 8) == 0)
                o->stacks_hz = x;
            else if (strncmp(a, "--hang-after", 12) == 0)
                o->hang_factor = x;
            else
                o->hang_min_s = x;
        } else if (strcmp(a, "--log-steps") == 0 || strncmp(a, "--log-steps=", 12) == 0) {
            const char *v = a[11] == '=' ? a + 12 : (i + 1 < argc ? argv[++i] : NULL);
            char *end = NULL;
            long n;
            errno = 0;
            n = v ? strtol(v, &end, 10) : -1;
            if (!v || errno || end == v || *end || n < 0 || n > 1000000) {
                fprintf(stderr,
                        "gpuscope run: --log-steps: '%s' is not a number of steps from 0 to "
                        "1000000\n",
                        v ? v : "");
                return -1;
            }
            o->log_steps = (int)n;
        } else if (strcmp(a, "--profile") == 0 || strncmp(a, "--profile=", 10) == 0) {
            const char *v = a[9] == '=' ? a + 10 : (i + 1 < argc ? argv[++i] : NULL);

            if (!v || gs_trace_window_check(v) != 0) {
                fprintf(stderr,
                        "gpuscope run: --profile: '%s' is not A:B (1 <= A < B, B >= 3) "
                        "or every:P:N (1 <= N < P)\n",
                        v ? v : "");
                return -1;
            }
            o->profile = v;
        } else if (strcmp(a, "--stop-after-steps") == 0 ||
                   strncmp(a, "--stop-after-steps=", 19) == 0 || strcmp(a, "--stop-grace") == 0 ||
                   strncmp(a, "--stop-grace=", 13) == 0) {
            int steps = strncmp(a, "--stop-after", 12) == 0;
            const char *v = strchr(a, '=') ? strchr(a, '=') + 1 : i + 1 < argc ? argv[++i] : NULL;
            char *end = NULL;
            double x;
            errno = 0;
            x = v ? strtod(v, &end) : -1;
            if (!v || errno || end == v || *end || !isfinite(x) ||
                (steps ? (x < 1 || x > 1e9 || x != floor(x)) : (x < 0 || x > 3600))) {
                fprintf(stderr, "gpuscope run: %s: '%s' is not %s\n",
                        steps ? "--stop-after-steps" : "--stop-grace", v ? v : "",
                        steps ? "a number of steps from 1 to 1000000000"
                              : "a number of seconds from 0 to 3600");
                return -1;
            }
            if (steps)
                o->stop_after_steps = (long)x;
            else
                o->stop_grace_s = x;
        } else if (strcmp(a, "--no-agent") == 0) {
            o->no_agent = 1;
        } else if (strcmp(a, "--job") == 0 || strncmp(a, "--job=", 6) == 0) {
            const char *v = strchr(a, '=') ? strchr(a, '=') + 1 : i + 1 < argc ? argv[++i] : NULL;
            if (run_check_label("--job", v, 1) != 0)
                return -1;
            if (strlen(v) > 128) {
                fprintf(stderr, "gpuscope run: --job: longer than 128 bytes\n");
                return -1;
            }
            o->job = v;
        } else if (strcmp(a, "--name") == 0 || strncmp(a, "--name=", 7) == 0 ||
                   strcmp(a, "--tag") == 0 || strncmp(a, "--tag=", 6) == 0) {
            int is_name = strncmp(a, "--name", 6) == 0;
            const char *v = strchr(a, '=') ? strchr(a, '=') + 1 : i + 1 < argc ? argv[++i] : NULL;
            if (run_check_label(is_name ? "--name" : "--tag", v, is_name) != 0)
                return -1;
            if (is_name) {
                o->name = v;
            } else if (o->n_tags == RUN_MAX_TAGS) {
                fprintf(stderr, "gpuscope run: --tag: at most %d tags\n", RUN_MAX_TAGS);
                return -1;
            } else {
                o->tags[o->n_tags++] = v;
            }
        } else if (strcmp(a, "--out") == 0 || strcmp(a, "--interval") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "gpuscope run: %s: missing value\n", a);
                return -1;
            }
            val = argv[++i];
        } else if (strncmp(a, "--out=", 6) == 0 || strncmp(a, "--interval=", 11) == 0) {
            val = strchr(a, '=') + 1;
        } else {
            fprintf(stderr, "gpuscope run: unknown option '%s'\n", a);
            return -1;
        }
        if (val && strncmp(a, "--out", 5) == 0) {
            if (!val[0]) {
                fprintf(stderr, "gpuscope run: --out: empty directory name\n");
                return -1;
            }
            o->out = val;
        } else if (val && parse_interval(val, &o->interval_s) != 0) {
            fprintf(stderr,
                    "gpuscope run: --interval: '%s' is not a number of seconds in "
                    "0.1..60\n",
                    val);
            return -1;
        }
    }
    if (i >= argc) {
        fprintf(stderr, "gpuscope run: no command given (gpuscope run [OPTIONS] -- CMD ...)\n");
        return -1;
    }
    o->cmd = argv + i;
    return 0;
}
