/*
 * `gpuscope stacks PID`: where a running Python process spends its time, read from outside
 * (src/stacks/): a live top view of functions (own and total samples, like `py-spy top`),
 * `--dump` (every thread's stack once, with its OS state), and `--record -o FILE` (collapsed
 * stacks, speedscope JSON, or an SVG flame graph, by extension or --format). The target is
 * never stopped. See docs/stacks.md.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/parse.h"
#include "base/term.h"
#include "cli/cli.h"
#include "gpuscope/gs_err.h"
#include "stacks/collect.h"
#include "stacks/flame.h"
#include "stacks/profile.h"
#include "stacks/pyread.h"
#include "stacks/taskstate.h"

enum stacks_mode { MODE_TOP, MODE_DUMP, MODE_RECORD };
enum stacks_format { FMT_AUTO, FMT_COLLAPSED, FMT_SPEEDSCOPE, FMT_SVG };

struct stacks_opts {
    pid_t pid;
    enum stacks_mode mode;
    enum stacks_format format;
    const char *out;
    double rate_hz;
    double duration_s; /* 0: until Ctrl-C or the target exits */
    int idle;          /* count sleeping threads too */
    int threads;       /* a root frame per thread */
    int json;          /* --dump --json */
    int help;
    enum gs_color_mode color;
};

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

static void stacks_usage(FILE *out)
{
    fputs("usage: gpuscope stacks PID [--rate HZ] [--duration S] [--idle]\n"
          "       gpuscope stacks PID --dump [--json]\n"
          "       gpuscope stacks PID --record -o FILE [--format F] [--rate HZ] [--duration S]\n"
          "\n"
          "Samples the Python call stacks of process PID from outside (process_vm_readv; the\n"
          "process is never stopped) and shows where it spends its time.\n"
          "\n"
          "modes:\n"
          "  (default)         live top view: own and total share per function, refreshed\n"
          "                    every second; Ctrl-C quits\n"
          "  --dump            every thread's stack once, with its OS state (running,\n"
          "                    waiting on a futex, in I/O)\n"
          "  --record          sample for --duration (or until Ctrl-C / the process exits)\n"
          "                    and write FILE\n"
          "\n"
          "options:\n"
          "  -o, --output FILE  where --record writes (required with --record)\n"
          "  --format F         collapsed (flamegraph.pl, speedscope), speedscope (JSON) or\n"
          "                     svg (a flame graph); default from FILE's extension: .svg,\n"
          "                     .json / .speedscope.json, anything else collapsed\n"
          "  --rate HZ          samples per second, 1 to 1000 (default 100)\n"
          "  --duration S       stop after S seconds (default: until Ctrl-C or exit)\n"
          "  --idle             count threads that sleep (futex, I/O) too; by default only\n"
          "                     running threads are counted (Python < 3.11: all threads)\n"
          "  --threads          a root frame per thread in --record output\n"
          "  --json             --dump as JSON\n"
          "  --color, --no-color  top view colours (default: when a terminal, NO_COLOR unset)\n"
          "  -h, --help         this help\n"
          "\n"
          "CPython 3.8 to 3.14 (3.13+ through the interpreter's _Py_DebugOffsets). Reading\n"
          "another process needs the right to ptrace it: same user and kernel.yama.ptrace_scope\n"
          "0, an ancestor (gpuscope run), or CAP_SYS_PTRACE. See docs/stacks.md.\n"
          "Exit status: 0 ok; 2 bad usage, or memory that does not read as CPython;\n"
          "4 permission denied; 6 no such process or no Python in it; 3 Python version not\n"
          "supported; 255 other errors.\n",
          out);
}

static int parse_stacks(int argc, char **argv, struct stacks_opts *o)
{
    memset(o, 0, sizeof *o);
    o->rate_hz = 100;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            o->help = 1;
            return 0;
        }
        if (strcmp(a, "--dump") == 0) {
            o->mode = MODE_DUMP;
        } else if (strcmp(a, "--record") == 0) {
            o->mode = MODE_RECORD;
        } else if (strcmp(a, "--idle") == 0) {
            o->idle = 1;
        } else if (strcmp(a, "--threads") == 0) {
            o->threads = 1;
        } else if (strcmp(a, "--json") == 0) {
            o->json = 1;
        } else if (strcmp(a, "--color") == 0) {
            o->color = GS_COLOR_ALWAYS;
        } else if (strcmp(a, "--no-color") == 0) {
            o->color = GS_COLOR_NEVER;
        } else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0 ||
                   strcmp(a, "--format") == 0 || strcmp(a, "--rate") == 0 ||
                   strcmp(a, "--duration") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "gpuscope stacks: %s needs a value\n", a);
                return -1;
            }
            val = argv[++i];
        } else if (strncmp(a, "--output=", 9) == 0 || strncmp(a, "--format=", 9) == 0 ||
                   strncmp(a, "--rate=", 7) == 0 || strncmp(a, "--duration=", 11) == 0) {
            val = strchr(a, '=') + 1;
        } else if (a[0] == '-') {
            fprintf(stderr, "gpuscope stacks: unknown option '%s' (see --help)\n", a);
            return -1;
        } else {
            char *end;
            long pid;
            errno = 0;
            pid = strtol(a, &end, 10);
            if (errno || *end || pid <= 0 || pid > 0x3fffffff || o->pid) {
                fprintf(stderr, "gpuscope stacks: '%s' is not a process id\n", a);
                return -1;
            }
            o->pid = (pid_t)pid;
            continue;
        }
        if (!val)
            continue;
        if (strncmp(a, "-o", 2) == 0 || strncmp(a, "--output", 8) == 0) {
            o->out = val;
        } else if (strncmp(a, "--format", 8) == 0) {
            if (strcmp(val, "collapsed") == 0)
                o->format = FMT_COLLAPSED;
            else if (strcmp(val, "speedscope") == 0)
                o->format = FMT_SPEEDSCOPE;
            else if (strcmp(val, "svg") == 0 || strcmp(val, "flamegraph") == 0)
                o->format = FMT_SVG;
            else {
                fprintf(stderr,
                        "gpuscope stacks: --format: '%s' is not collapsed, "
                        "speedscope or svg\n",
                        val);
                return -1;
            }
        } else if (strncmp(a, "--rate", 6) == 0) {
            if (gs_parse_double_range(val, 1, 1000, &o->rate_hz) != 0) {
                fprintf(stderr, "gpuscope stacks: --rate: '%s' is not a rate from 1 to 1000 Hz\n",
                        val);
                return -1;
            }
        } else if (gs_parse_double_range(val, 0.01, 1e7, &o->duration_s) != 0) {
            fprintf(stderr, "gpuscope stacks: --duration: '%s' is not a number of seconds\n", val);
            return -1;
        }
    }
    if (!o->pid) {
        fprintf(stderr, "gpuscope stacks: which process? (gpuscope stacks PID; see --help)\n");
        return -1;
    }
    if (o->mode == MODE_RECORD && !o->out) {
        fprintf(stderr, "gpuscope stacks: --record needs -o FILE\n");
        return -1;
    }
    if (o->out && o->mode != MODE_RECORD)
        o->mode = MODE_RECORD;
    if (o->format == FMT_AUTO && o->out) {
        size_t n = strlen(o->out);
        if (n >= 4 && strcmp(o->out + n - 4, ".svg") == 0)
            o->format = FMT_SVG;
        else if (n >= 5 && strcmp(o->out + n - 5, ".json") == 0)
            o->format = FMT_SPEEDSCOPE;
        else
            o->format = FMT_COLLAPSED;
    }
    return 0;
}

/* Sleeps until deadline (CLOCK_MONOTONIC ns) unless a signal stops the run first. */
static void sleep_until(int64_t deadline)
{
    struct timespec ts = gs_clock_timespec(deadline);

    while (!g_stop && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

struct loop {
    struct gs_pyread *r;
    struct gs_stackprof *prof;
    struct gs_collect col;
    struct gs_pysample *s;
    uint64_t ticks, ok, failed, thread_samples;
    double read_s; /* time spent in gs_pyread_sample */
    int gone;      /* the target exited */
    char last_err[GS_ERR_MSG_LEN];
};

/* One tick: read, fold the counted threads. */
static void tick(struct loop *L, const struct stacks_opts *o)
{
    struct gs_err err = {0};
    double t0 = gs_clock_mono_s();
    int rc = gs_pyread_sample(L->r, 0, L->s, &err);

    L->read_s += gs_clock_mono_s() - t0;
    L->ticks++;
    if (rc == GS_ENOTFOUND || (rc != GS_OK && kill(o->pid, 0) != 0 && errno == ESRCH)) {
        L->gone = 1;
        return;
    }
    if (rc != GS_OK) {
        L->failed++;
        snprintf(L->last_err, sizeof L->last_err, "%s", err.msg);
        return;
    }
    L->ok++;
    for (unsigned t = 0; t < L->s->nthreads; t++) {
        const struct gs_pythread *th = &L->s->threads[t];
        char root[64];
        if (!o->idle && th->native_tid > 0) {
            char st = gs_taskstate_letter(o->pid, (pid_t)th->native_tid);
            if (st != 'R' && st != 'D')
                continue;
        }
        if (th->nframes == 0)
            continue;
        if (o->threads)
            snprintf(root, sizeof root, "thread %lld",
                     th->native_tid > 0 ? (long long)th->native_tid : (long long)t);
        gs_collect_add(&L->col, th, o->threads ? root : NULL, 1);
        L->thread_samples++;
    }
}

static void render_top(struct loop *L, const struct stacks_opts *o, double elapsed, int color,
                       int tty)
{
    struct gs_tbuf b, frame;
    uint32_t ids[256];
    unsigned rows = tty ? gs_term_rows(1) : 0, cols = tty ? gs_term_cols(1) : 0;
    unsigned want = rows > 8 ? rows - 6 : 30;
    unsigned n;
    double per = 1.0 / o->rate_hz;
    uint64_t total = L->prof->samples;
    unsigned v = gs_pyread_version(L->r);

    if (want > 256)
        want = 256;
    n = gs_stackprof_top(L->prof, ids, want, 0);
    gs_tbuf_init(&b, color);
    gs_tbuf_init(&frame, color);
    gs_tbuf_printf(&b, "gpuscope stacks %d: python %u.%u, %.0f Hz, %.1f s, %llu samples",
                   (int)o->pid, v >> 24, (v >> 16) & 0xff, o->rate_hz, elapsed,
                   (unsigned long long)total);
    if (L->failed)
        gs_tbuf_printf(&b, ", %llu unreadable", (unsigned long long)L->failed);
    gs_tbuf_printf(&b, "%s\n\n", o->idle ? "" : " (running threads only; --idle for all)");
    gs_tbuf_sgr(&b, GS_SGR_BOLD);
    gs_tbuf_printf(&b, "%6s %7s %9s %9s  %s\n", "%Own", "%Total", "OwnTime", "TotalTime",
                   "Function (file)");
    gs_tbuf_sgr(&b, GS_SGR_RESET);
    for (unsigned i = 0; i < n; i++) {
        const struct gs_prof_label *l = &L->prof->labels[ids[i]];
        double own = total ? 100.0 * (double)L->prof->own[ids[i]] / (double)total : 0;
        double tot = total ? 100.0 * (double)L->prof->tot[ids[i]] / (double)total : 0;
        gs_tbuf_printf(&b, "%5.1f%% %6.1f%% %8.2fs %8.2fs  ", own, tot,
                       (double)L->prof->own[ids[i]] * per, (double)L->prof->tot[ids[i]] * per);
        gs_tbuf_sgr(&b, own >= 10 ? GS_SGR_BOLD_YELLOW : GS_SGR_NONE);
        gs_tbuf_puts(&b, l->name);
        gs_tbuf_sgr(&b, own >= 10 ? GS_SGR_RESET : GS_SGR_NONE);
        gs_tbuf_printf(&b, " (%s)\n", l->file);
    }
    if (n == 0)
        gs_tbuf_puts(&b, "  (no samples of running Python code yet)\n");
    if (tty) {
        gs_term_redraw(&frame, gs_tbuf_str(&b), b.text.len, cols, rows);
        gs_term_write(1, gs_tbuf_str(&frame), frame.text.len, &g_stop);
    } else {
        gs_tbuf_puts(&b, "\n");
        gs_term_write(1, gs_tbuf_str(&b), b.text.len, &g_stop);
    }
    gs_tbuf_free(&b);
    gs_tbuf_free(&frame);
}

static int write_record(struct loop *L, const struct stacks_opts *o, struct gs_err *err)
{
    char title[128];
    FILE *f;
    int rc;

    f = strcmp(o->out, "-") == 0 ? stdout : fopen(o->out, "w");
    if (!f)
        return gs_err_set(err, GS_EIO, "stacks: %s: %s", o->out, strerror(errno));
    snprintf(title, sizeof title, "gpuscope stacks: process %d", (int)o->pid);
    if (o->format == FMT_SVG)
        rc = gs_flame_write_svg(L->prof, title, f, err);
    else if (o->format == FMT_SPEEDSCOPE)
        rc = gs_stackprof_write_speedscope(L->prof, title, 1.0 / o->rate_hz, f, err);
    else
        rc = gs_stackprof_write_collapsed(L->prof, f);
    if (f != stdout && fclose(f) != 0 && rc == GS_OK)
        rc = gs_err_set(err, GS_EIO, "stacks: %s: %s", o->out, strerror(errno));
    if (rc != GS_OK && !err->msg[0])
        gs_err_set(err, rc, "stacks: writing %s failed", o->out);
    return rc;
}

static int run_loop(struct loop *L, const struct stacks_opts *o, struct gs_err *err)
{
    /* On the main thread, not a ticker's: SIGINT must end the sleep at once (EINTR). */
    const int64_t step = (int64_t)llround(1e9 / o->rate_hz);
    int64_t next = gs_clock_mono_ns();
    double start = gs_clock_mono_s(), last_draw = start;
    int tty = isatty(1), color = gs_term_use_color(o->color, 1);

    if (o->mode == MODE_TOP && tty)
        gs_term_write(1, GS_TERM_CLEAR_SCREEN GS_TERM_HIDE_CURSOR,
                      strlen(GS_TERM_CLEAR_SCREEN GS_TERM_HIDE_CURSOR), NULL);
    while (!g_stop && !L->gone) {
        double t;
        tick(L, o);
        t = gs_clock_mono_s();
        if (o->duration_s > 0 && t - start >= o->duration_s)
            break;
        if (L->ok == 0 && L->failed >= 20 && t - start > 2.0) {
            if (o->mode == MODE_TOP && tty)
                gs_term_write(1, GS_TERM_SHOW_CURSOR, strlen(GS_TERM_SHOW_CURSOR), NULL);
            return gs_err_set(err, GS_EPARSE, "%s", L->last_err);
        }
        if (o->mode == MODE_TOP && t - last_draw >= 1.0) {
            render_top(L, o, t - start, color, tty);
            last_draw = t;
        }
        next = gs_clock_next_tick(next, gs_clock_mono_ns(), step, NULL); /* no burst after a lag */
        sleep_until(next);
    }
    if (o->mode == MODE_TOP) {
        render_top(L, o, gs_clock_mono_s() - start, color, tty);
        if (tty)
            gs_term_write(1, GS_TERM_SHOW_CURSOR, strlen(GS_TERM_SHOW_CURSOR), NULL);
    }
    if (L->gone)
        fprintf(stderr, "gpuscope stacks: process %d exited after %llu samples\n", (int)o->pid,
                (unsigned long long)L->ok);
    return GS_OK;
}

int gs_cli_stacks(int argc, char **argv)
{
    struct stacks_opts o;
    struct loop L = {0};
    struct gs_err err = {0};
    struct sigaction sa;
    int rc;

    if (parse_stacks(argc, argv, &o) != 0)
        return GS_EXIT_USAGE;
    if (o.help) {
        stacks_usage(stdout);
        return GS_EXIT_OK;
    }
    rc = gs_pyread_find(o.pid, &L.r, &err);
    if (rc != GS_OK) {
        fprintf(stderr, "gpuscope %s\n", err.msg);
        return gs_rc_exit_code(rc);
    }
    L.s = malloc(sizeof *L.s);
    if (!L.s) {
        gs_pyread_close(L.r);
        fprintf(stderr, "gpuscope stacks: out of memory\n");
        return gs_rc_exit_code(GS_ENOMEM);
    }
    if (o.mode == MODE_DUMP) {
        rc = gs_pyread_sample(L.r, 0, L.s, &err);
        if (rc == GS_OK) {
            if (o.json)
                rc = gs_collect_dump_json(L.r, o.pid, L.s, stdout, &err);
            else
                gs_collect_dump(L.r, o.pid, L.s, stdout);
        }
        goto out;
    }
    L.prof = gs_stackprof_new();
    if (!L.prof) {
        rc = gs_err_set(&err, GS_ENOMEM, "stacks: out of memory");
        goto out;
    }
    gs_collect_init(&L.col, L.prof, L.r);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    rc = run_loop(&L, &o, &err);
    if (rc == GS_OK && o.mode == MODE_RECORD) {
        rc = write_record(&L, &o, &err);
        if (rc == GS_OK && strcmp(o.out, "-") != 0)
            fprintf(stderr,
                    "gpuscope stacks: wrote %s (%llu samples of %llu reads, %.1f us "
                    "per read)\n",
                    o.out, (unsigned long long)L.prof->samples, (unsigned long long)L.ok,
                    L.ticks ? L.read_s / (double)L.ticks * 1e6 : 0.0);
    }
out:
    if (rc != GS_OK)
        fprintf(stderr, "gpuscope %s\n", err.msg[0] ? err.msg : gs_strerror(rc));
    gs_stackprof_free(L.prof);
    free(L.s);
    gs_pyread_close(L.r);
    return rc == GS_OK ? GS_EXIT_OK : gs_rc_exit_code(rc);
}
