/*
 * `gpuscope` with no subcommand: the quick check's run loop. Parse the options
 * (quick_opts.c), open one source (client/source.h: the local agent or NVML), sample, render
 * (quick_text.c or quick_json.c), and in watch mode repeat on CLOCK_MONOTONIC boundaries, redrawing
 * in place on a terminal.
 *
 * Watch mode hides the cursor and shows it again on every way out: the normal end, SIGINT,
 * SIGTERM and SIGHUP (which only set a flag and wake the wait through a self-pipe, so a signal
 * between the check and the wait is never lost). A second signal while the first is being
 * handled — say NVML hangs in a call — restores the cursor from the handler and exits at once.
 */
#include "cli/quick/quick.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/term.h"
#include "cli/cli.h"
#include "client/source.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_sampler.h"

/* ---- the run loop ---- */

static volatile sig_atomic_t quick_stop;
static volatile sig_atomic_t quick_winch;
static volatile sig_atomic_t quick_cursor_hidden;
static int quick_wake_fd = -1; /* write end of the self-pipe, set before handlers exist */

static void quick_on_signal(int sig)
{
    int saved = errno;

    if (sig == SIGWINCH) {
        quick_winch = 1;
    } else if (quick_stop) {
        /* Second signal: the loop is stuck (a hung driver call). Leave now, tidily. */
        if (quick_cursor_hidden) {
            ssize_t w = write(STDOUT_FILENO, GS_TERM_SHOW_CURSOR "\n", sizeof GS_TERM_SHOW_CURSOR);
            (void)w;
        }
        _exit(128 + sig);
    } else {
        quick_stop = 1;
    }
    if (quick_wake_fd >= 0) {
        ssize_t w = write(quick_wake_fd, "x", 1);
        (void)w;
    }
    errno = saved;
}

static unsigned quick_want(const struct gs_quick_opts *o)
{
    /* GS_WANT_STATIC is added by one_cycle once a minute: the sampler reads limits and maxima
     * at its first cycle and repeats them after. */
    unsigned want = GS_WANT_MIG;

    if (!o->no_procs)
        want |= GS_WANT_PROCS | GS_WANT_PROC_HOST;
    if (o->json)
        want |= GS_WANT_PROC_UTIL | GS_WANT_HEALTH | GS_WANT_GPM | GS_WANT_NVLINK_STATE;
    /* PCIe throughput blocks ~20 ms per direction per GPU: only when asked for (-a), with the
     * health counters (ECC, Xid, remapped rows) and NVLink links up that -a shows beside it. */
    if (o->show & GS_QS_CLOCKS)
        want |= GS_WANT_PCIE_TPUT | GS_WANT_HEALTH | GS_WANT_NVLINK_STATE;
    return want;
}

struct quick_run {
    const struct gs_quick_opts *o;
    struct gs_source *src;
    struct gs_snapshot *snap; /* the source's, after each sample */
    struct gs_tbuf frame;     /* the rendered text of one snapshot */
    struct gs_tbuf screen;    /* frame turned into an in-place redraw */
    int color;
    int tty;        /* stdout is a terminal: redraw in place */
    int wake[2];    /* self-pipe */
    int have_frame; /* frame holds a rendered snapshot (for SIGWINCH redraws) */
    int sigs_installed;
    int abandoned;     /* a write was cut short by a stop signal: write nothing more */
    int64_t static_ns; /* when limits, maxima and modes were last read (CLOCK_MONOTONIC) */
    struct sigaction old[4];
};

/* In watch mode the slow fields (power limits, max clocks, thresholds, modes) are re-read
 * this often, so `nvidia-smi -pl` or a mode change shows up without a restart. */
#define QUICK_STATIC_REFRESH_NS (60LL * 1000000000LL)

static const int quick_signals[4] = {SIGINT, SIGTERM, SIGHUP, SIGWINCH};

/* A write cut short by a stop signal (the reader stopped reading a full pipe) is not an
 * error: the watch is ending anyway; nothing more is written, so the end is not blocked by the
 * same full pipe again. */
static int out_write(struct quick_run *r, const char *p, size_t n, struct gs_err *err)
{
    if (r->abandoned)
        return GS_OK;
    if (gs_term_write(STDOUT_FILENO, p, n, &quick_stop) == 0)
        return GS_OK;
    if (errno == EINTR && quick_stop) {
        r->abandoned = 1;
        return GS_OK;
    }
    return gs_err_set(err, GS_EIO, "stdout: %s", strerror(errno));
}

static int install_signals(struct quick_run *r, struct gs_err *err)
{
    struct sigaction sa;

    if (pipe2(r->wake, O_CLOEXEC | O_NONBLOCK) != 0)
        return gs_err_set(err, GS_EIO, "pipe: %s", strerror(errno));
    quick_wake_fd = r->wake[1];
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = quick_on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: the wait returns early */
    for (int i = 0; i < 4; i++)
        sigaction(quick_signals[i], &sa, &r->old[i]);
    r->sigs_installed = 1;
    return GS_OK;
}

static void restore_signals(struct quick_run *r)
{
    if (r->sigs_installed)
        for (int i = 0; i < 4; i++)
            sigaction(quick_signals[i], &r->old[i], NULL);
    r->sigs_installed = 0;
    quick_wake_fd = -1;
    if (r->wake[0] >= 0)
        close(r->wake[0]);
    if (r->wake[1] >= 0)
        close(r->wake[1]);
    r->wake[0] = r->wake[1] = -1;
}

/* Fills what the renderers show but a backend may leave empty. */
static void fill_host_and_time(struct gs_snapshot *snap)
{
    if (!snap->sys.hostname[0] && gethostname(snap->sys.hostname, sizeof snap->sys.hostname) != 0)
        snap->sys.hostname[0] = '\0';
    snap->sys.hostname[sizeof snap->sys.hostname - 1] = '\0';
    if (snap->t_real <= 0)
        snap->t_real = gs_clock_real_s();
}

static int emit_json(struct quick_run *r, struct gs_err *err)
{
    json_t *doc = NULL;
    char *text;
    int rc = gs_quick_json(&doc, r->snap, r->o, err);

    if (rc != GS_OK)
        return rc;
    /* 15 significant digits: 0.92 rather than 0.92000000000000004, and still 10 µs for a
     * unix time. */
    text = json_dumps(doc, (r->o->interval_s > 0 ? JSON_COMPACT : JSON_INDENT(2)) |
                               JSON_REAL_PRECISION(15));
    json_decref(doc);
    if (!text)
        return gs_err_set(err, GS_ENOMEM, "json: out of memory");
    rc = out_write(r, text, strlen(text), err);
    if (rc == GS_OK)
        rc = out_write(r, "\n", 1, err);
    free(text);
    return rc;
}

/* Writes the rendered frame: in place on a terminal in watch mode, else as plain lines. */
static int emit_frame(struct quick_run *r, struct gs_err *err)
{
    if (r->o->interval_s > 0 && r->tty) {
        gs_tbuf_reset(&r->screen);
        gs_term_redraw(&r->screen, r->frame.text.data, r->frame.text.len,
                       gs_term_cols(STDOUT_FILENO), gs_term_rows(STDOUT_FILENO));
        if (gs_tbuf_status(&r->screen) != GS_OK)
            return gs_err_set(err, GS_ENOMEM, "render: out of memory");
        return out_write(r, r->screen.text.data, r->screen.text.len, err);
    }
    if (r->o->interval_s > 0) { /* into a pipe: frames one after another, a blank line apart */
        int rc = out_write(r, r->frame.text.data, r->frame.text.len, err);
        return rc == GS_OK ? out_write(r, "\n", 1, err) : rc;
    }
    return out_write(r, r->frame.text.data, r->frame.text.len, err);
}

/* A sampling failure in the middle of watch mode is shown in the frame and the loop goes on:
 * the driver may come back. */
static int render_error(struct quick_run *r, const struct gs_err *serr, struct gs_err *err)
{
    gs_tbuf_reset(&r->frame);
    if (r->o->json) {
        json_t *doc =
            json_pack("{s:s, s:i}", "error", serr->msg, "code", gs_rc_exit_code(serr->rc));
        char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
        int rc;
        json_decref(doc);
        if (!text)
            return gs_err_set(err, GS_ENOMEM, "json: out of memory");
        rc = out_write(r, text, strlen(text), err);
        free(text);
        return rc == GS_OK ? out_write(r, "\n", 1, err) : rc;
    }
    gs_tbuf_sgr(&r->frame, GS_SGR_BOLD_RED);
    gs_tbuf_printf(&r->frame, "gpuscope: %s", serr->msg);
    gs_tbuf_sgr(&r->frame, GS_SGR_RESET);
    gs_tbuf_puts(&r->frame, "\n");
    r->have_frame = 1;
    return emit_frame(r, err);
}

static int one_cycle(struct quick_run *r, int first, struct gs_err *err)
{
    struct gs_err serr;
    int rc;

    unsigned want = quick_want(r->o);
    int64_t now = gs_clock_mono_ns();

    if (first)
        r->static_ns = now; /* the sampler reads the slow fields at its first cycle anyway */
    else if (now - r->static_ns >= QUICK_STATIC_REFRESH_NS) {
        want |= GS_WANT_STATIC;
        r->static_ns = now;
    }
    gs_err_clear(&serr);
    rc = gs_source_sample(r->src, want, &serr);
    r->snap = gs_source_snapshot(r->src); /* an agent's last good answer after a failure */
    if (rc != GS_OK) {
        if (first || r->o->interval_s <= 0) {
            *err = serr;
            return rc;
        }
        return render_error(r, &serr, err);
    }
    fill_host_and_time(r->snap);
    if (first && (rc = gs_quick_check_ids(r->o, r->snap, err)) != GS_OK)
        return rc;
    if (r->o->json)
        return emit_json(r, err);
    gs_tbuf_reset(&r->frame);
    /* Into a pipe the width is $COLUMNS when set (watch(1) sets it), else unlimited. */
    rc = gs_quick_render(&r->frame, r->snap, r->o, gs_term_cols(STDOUT_FILENO));
    if (rc != GS_OK)
        return gs_err_set(err, rc, "render: out of memory");
    r->have_frame = 1;
    return emit_frame(r, err);
}

/* Sleeps until deadline (CLOCK_MONOTONIC ns) or a stop signal; a SIGWINCH redraws the last
 * frame at the new size without sampling again. */
static int wait_until(struct quick_run *r, int64_t deadline, struct gs_err *err)
{
    while (!quick_stop) {
        int64_t left = deadline - gs_clock_mono_ns();
        struct pollfd pfd = {.fd = r->wake[0], .events = POLLIN};
        struct timespec ts;
        char drain[64];

        if (left <= 0)
            return GS_OK;
        ts.tv_sec = left / 1000000000;
        ts.tv_nsec = left % 1000000000;
        if (ppoll(&pfd, 1, &ts, NULL) > 0)
            while (read(r->wake[0], drain, sizeof drain) > 0)
                ;
        if (quick_winch) {
            quick_winch = 0;
            if (r->tty && r->have_frame && !r->o->json) {
                int rc;
                gs_tbuf_reset(&r->frame);
                rc = gs_quick_render(&r->frame, r->snap, r->o, gs_term_cols(STDOUT_FILENO));
                if (rc != GS_OK)
                    return gs_err_set(err, rc, "render: out of memory");
                if ((rc = emit_frame(r, err)) != GS_OK)
                    return rc;
            }
        }
    }
    return GS_OK;
}

static int watch_loop(struct quick_run *r, struct gs_err *err)
{
    const int64_t step = (int64_t)llround(r->o->interval_s * 1e9);
    int64_t next = gs_clock_mono_ns();
    int rc;

    rc = install_signals(r, err);
    if (rc != GS_OK)
        return rc;
    if (r->tty && !r->o->json) {
        rc = out_write(r, GS_TERM_HIDE_CURSOR GS_TERM_CLEAR_SCREEN,
                       sizeof(GS_TERM_HIDE_CURSOR GS_TERM_CLEAR_SCREEN) - 1, err);
        quick_cursor_hidden = 1;
    }
    for (int first = 1; rc == GS_OK && !quick_stop; first = 0) {
        int64_t now;
        rc = one_cycle(r, first, err);
        if (rc != GS_OK)
            break;
        now = gs_clock_mono_ns();
        next = gs_clock_next_tick(next, now, step, NULL);
        rc = wait_until(r, next, err);
    }
    if (quick_cursor_hidden) {
        /* Even after an abandoned frame: a terminal left without a cursor is worse. */
        if (gs_term_write(STDOUT_FILENO, GS_TERM_SHOW_CURSOR, sizeof GS_TERM_SHOW_CURSOR - 1,
                          &quick_stop) != 0 &&
            rc == GS_OK && !quick_stop)
            rc = gs_err_set(err, GS_EIO, "stdout: %s", strerror(errno));
        quick_cursor_hidden = 0;
    }
    restore_signals(r);
    return rc;
}

static int quick_main(const struct gs_quick_opts *o, struct gs_err *err)
{
    /* Pay for what you ask: the text view asks the driver for what it can show; the JSON
     * document holds every reading. */
    static unsigned char need_m[GS_M__COUNT], need_t[GS_T__COUNT];
    struct gs_sampler_opts sopts = {.library = NULL};
    /* The local agent when it answers (no NVML start-up, and its visibility policy applies);
     * an explicit $GPUSCOPE_NVML_LIBRARY asks for that library unless $GPUSCOPE_HTTP_SOCKET
     * names a socket too (docs/security.md, LOCAL VIEWERS). The text view shows what the
     * policy withheld per GPU (quick_text.c), not as processes. */
    struct gs_source_opts src = {.pick = o->no_agent ? GS_SOURCE_NVML : GS_SOURCE_AUTO,
                                 .nvml_env_picks_nvml = true,
                                 .sampler = &sopts,
                                 /* room grows with the processes found (1.7 KB each, zeroed) */
                                 .max_procs = 16};
    struct quick_run r;
    int rc;

    memset(&r, 0, sizeof r);
    r.o = o;
    r.wake[0] = r.wake[1] = -1;
    r.tty = isatty(STDOUT_FILENO) == 1;
    r.color = !o->json && gs_term_use_color(o->color, STDOUT_FILENO);
    gs_tbuf_init(&r.frame, r.color);
    gs_tbuf_init(&r.screen, r.color);
    quick_stop = quick_winch = 0;

    if (!o->json) {
        gs_quick_text_need(o, need_m, need_t);
        sopts.need_metrics = need_m;
        sopts.need_texts = need_t;
        sopts.skip_jobs = !(o->show & GS_QS_CONTAINER); /* only --show-container shows them */
    }
    rc = gs_source_open(&r.src, &src, err);
    if (rc != GS_OK)
        goto out;
    r.snap = gs_source_snapshot(r.src);
    if (o->interval_s > 0)
        rc = watch_loop(&r, err);
    else
        rc = one_cycle(&r, 1, err);
out:
    gs_tbuf_free(&r.screen);
    gs_tbuf_free(&r.frame);
    gs_source_close(r.src);
    return rc;
}

int gs_cli_quick(int argc, char **argv)
{
    struct gs_quick_opts o;
    struct gs_err err;
    int rc;

    gs_err_clear(&err);
    rc = gs_quick_parse(&o, argc, argv, &err);
    if (rc != GS_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return gs_rc_exit_code(rc);
    }
    if (o.help) {
        gs_quick_usage(stdout);
        return GS_EXIT_OK;
    }
    rc = quick_main(&o, &err);
    if (rc != GS_OK) {
        fflush(stdout);
        fprintf(stderr, "gpuscope: %s\n", err.msg[0] ? err.msg : gs_strerror(rc));
        gs_source_hint_no_driver(rc, "gpuscope", false);
    }
    return gs_rc_exit_code(rc);
}
