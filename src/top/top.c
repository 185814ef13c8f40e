/*
 * `gpuscope top` (docs/top.md): options, preferences and the key loop. The data comes from
 * the worker thread (top_src.c) as frames; the loop waits in poll(2) on the terminal and the
 * worker's wake pipe, so it uses no CPU between a frame and a key. Each frame or key redraws
 * the whole screen into ncurses, which sends the terminal only the difference (typeahead off:
 * no keyboard polls during an update). Frames are lent by the worker and given back
 * (top_worker_give_back).
 *
 * Signals are sent only after a confirmation, only to processes on this machine that the
 * viewer owns (or by root), and only when /proc/PID/stat still shows the start time seen when
 * the question was asked, so a pid reused in between is never hit.
 *
 * This file is built into gpuscope-top.so (with ncurses); gs_top_main is its one
 * exported symbol, called by top_load.c in the gpuscope binary.
 */
#include <curses.h>
#include <errno.h>
#include <fcntl.h>
#include <langinfo.h>
#include <locale.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/parse.h"
#include "base/term.h"
#include "gpuscope/gs_err.h"
#include "top/top.h"

static volatile sig_atomic_t g_stop;
static int g_wake_w = -1;

static void on_stop(int sig)
{
    int e = errno;

    (void)sig;
    g_stop = 1;
    if (g_wake_w >= 0) {
        ssize_t n = write(g_wake_w, "q", 1);
        (void)n;
    }
    errno = e;
}

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: gpuscope top [OPTIONS]\n"
        "\n"
        "Full-screen live view of the GPUs, their processes and the node's training runs.\n"
        "\n"
        "options:\n"
        "  -d, --interval S       refresh every S seconds (0.1..3600; default 1, or top.conf)\n"
        "      --source SRC       auto (the local agent when it answers, else NVML), agent, nvml\n"
        "  -H, --host HOST[:PORT] an agent over HTTP(S) (http://, https:// or host:port); repeat\n"
        "                         for several nodes in one view (default port 9400)\n"
        "      --token-file FILE  Bearer token for --host (first line of FILE); or "
        "$GPUSCOPE_TOKEN\n"
        "      --cacert FILE      CA certificates for https:// hosts\n"
        "      --insecure-tls     do not check https:// hosts' certificates\n"
        "  -g, --graph G          utilization, memory or power\n"
        "  -s, --sort COL         gpu, pid, user, job, gpu_memory, sm, cpu, host_memory, time,\n"
        "                         command\n"
        "  -f, --filter TEXT      show only processes matching TEXT\n"
        "  -t, --tree             tree view\n"
        "      --runs             start with the training panel\n"
        "      --mouse, --no-mouse\n"
        "      --color, --no-color  (default: colour on a terminal that has it, unless NO_COLOR)\n"
        "      --no-save          do not write preferences on exit\n"
        "  -h, --help             this help\n"
        "\n"
        "Preferences: $XDG_CONFIG_HOME/gpuscope/top.conf (~/.config/gpuscope/top.conf).\n"
        "Keys: h or F1 inside top; docs/top.md.\n");
}

struct opts {
    struct top_cfg cfg;
    struct top_prefs prefs;
    int have_interval, have_graph, have_sort, have_tree, have_runs, have_mouse;
    enum gs_color_mode color;
    int no_save, help;
    const char *filter;
    char token[512];
};

static int parse_interval(const char *v, double *out)
{
    double d;

    if (gs_parse_double_range(v, 0.1, 3600, &d) != 0) {
        fprintf(stderr, "gpuscope top: --interval: '%s' is not seconds in 0.1..3600\n", v);
        return -1;
    }
    *out = d;
    return 0;
}

static int read_token(const char *path, char *out, size_t len)
{
    FILE *f = fopen(path, "re");
    size_t n;

    if (!f) {
        fprintf(stderr, "gpuscope top: --token-file: %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (!fgets(out, (int)len, f))
        out[0] = '\0';
    fclose(f);
    n = strcspn(out, "\r\n");
    out[n] = '\0';
    if (!out[0]) {
        fprintf(stderr, "gpuscope top: --token-file: %s:1: empty\n", path);
        return -1;
    }
    return 0;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        char name[64];
        const char *eq = strchr(a, '=');
        size_t nl = eq && a[0] == '-' && a[1] == '-' ? (size_t)(eq - a) : strlen(a);
        snprintf(name, sizeof name, "%.*s", (int)(nl < sizeof name ? nl : sizeof name - 1), a);
        if (eq && a[1] == '-')
            v = eq + 1;
#define NEEDV()                                                                                    \
    do {                                                                                           \
        if (!v) {                                                                                  \
            if (i + 1 >= argc) {                                                                   \
                fprintf(stderr, "gpuscope top: %s needs a value\n", name);                         \
                return -1;                                                                         \
            }                                                                                      \
            v = argv[++i];                                                                         \
        }                                                                                          \
    } while (0)
        if (!strcmp(name, "-h") || !strcmp(name, "--help")) {
            o->help = 1;
        } else if (!strcmp(name, "-d") || !strcmp(name, "--interval")) {
            NEEDV();
            if (parse_interval(v, &o->prefs.interval_s) != 0)
                return -1;
            o->have_interval = 1;
        } else if (!strcmp(name, "--source")) {
            NEEDV();
            if (!strcmp(v, "auto"))
                o->cfg.source = TOP_SOURCE_AUTO;
            else if (!strcmp(v, "agent"))
                o->cfg.source = TOP_SOURCE_AGENT;
            else if (!strcmp(v, "nvml"))
                o->cfg.source = TOP_SOURCE_NVML;
            else {
                fprintf(stderr, "gpuscope top: --source: '%s' is not auto, agent or nvml\n", v);
                return -1;
            }
        } else if (!strcmp(name, "-H") || !strcmp(name, "--host")) {
            NEEDV();
            if (o->cfg.n_hosts >= TOP_MAX_SRC) {
                fprintf(stderr, "gpuscope top: at most %d --host\n", TOP_MAX_SRC);
                return -1;
            }
            if (!v[0]) {
                fprintf(stderr, "gpuscope top: --host: empty\n");
                return -1;
            }
            o->cfg.hosts[o->cfg.n_hosts++] = v;
        } else if (!strcmp(name, "--token-file")) {
            NEEDV();
            if (read_token(v, o->token, sizeof o->token) != 0)
                return -1;
            o->cfg.token = o->token;
        } else if (!strcmp(name, "--cacert")) {
            NEEDV();
            o->cfg.cacert = v;
        } else if (!strcmp(name, "--insecure-tls")) {
            o->cfg.insecure_tls = 1;
        } else if (!strcmp(name, "-g") || !strcmp(name, "--graph")) {
            char line[96], warn[160] = "";
            NEEDV();
            snprintf(line, sizeof line, "graph = %s", v);
            top_prefs_parse(&o->prefs, "--graph", line, warn, sizeof warn);
            if (warn[0]) {
                fprintf(stderr, "gpuscope top: '%s' is not utilization, memory or power\n", v);
                return -1;
            }
            o->have_graph = 1;
        } else if (!strcmp(name, "-s") || !strcmp(name, "--sort")) {
            char line[96], warn[160] = "";
            NEEDV();
            snprintf(line, sizeof line, "sort = %s", v);
            top_prefs_parse(&o->prefs, "--sort", line, warn, sizeof warn);
            if (warn[0]) {
                fprintf(stderr, "gpuscope top: --sort: unknown column '%s'\n", v);
                return -1;
            }
            o->have_sort = 1;
        } else if (!strcmp(name, "-f") || !strcmp(name, "--filter")) {
            NEEDV();
            o->filter = v;
        } else if (!strcmp(name, "-t") || !strcmp(name, "--tree")) {
            o->prefs.tree = 1;
            o->have_tree = 1;
        } else if (!strcmp(name, "--runs")) {
            o->prefs.runs_panel = 1;
            o->have_runs = 1;
        } else if (!strcmp(name, "--mouse") || !strcmp(name, "--no-mouse")) {
            o->prefs.mouse = !strcmp(name, "--mouse");
            o->have_mouse = 1;
        } else if (!strcmp(name, "--color")) {
            o->color = GS_COLOR_ALWAYS;
        } else if (!strcmp(name, "--no-color")) {
            o->color = GS_COLOR_NEVER;
        } else if (!strcmp(name, "--no-save")) {
            o->no_save = 1;
        } else {
            fprintf(stderr, "gpuscope top: unknown option '%s' (see gpuscope top --help)\n", a);
            return -1;
        }
#undef NEEDV
    }
    return 0;
}

/* ---- preferences file ---- */

static int conf_path(char *out, size_t len, char *dir, size_t dlen)
{
    const char *x = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");

    if (x && x[0] == '/')
        snprintf(dir, dlen, "%s/gpuscope", x);
    else if (home && home[0])
        snprintf(dir, dlen, "%s/.config/gpuscope", home);
    else
        return -1;
    snprintf(out, len, "%s/top.conf", dir);
    return 0;
}

static void load_prefs(struct top_prefs *p, const char *path, char *warn, size_t wlen)
{
    FILE *f = fopen(path, "re");
    char buf[8192];
    size_t n;

    if (!f)
        return;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    top_prefs_parse(p, path, buf, warn, wlen);
}

static void save_prefs(const struct top_prefs *p, const char *path, const char *dir)
{
    char text[1024], tmp[600], parent[512];
    FILE *f;
    char *slash;

    if (top_prefs_format(p, text, sizeof text) != 0)
        return;
    snprintf(parent, sizeof parent, "%s", dir);
    slash = strrchr(parent, '/');
    if (slash && slash != parent) {
        *slash = '\0';
        mkdir(parent, 0700);
    }
    mkdir(dir, 0700);
    snprintf(tmp, sizeof tmp, "%s.%d", path, (int)getpid());
    f = fopen(tmp, "we");
    if (!f)
        return;
    fputs(text, f);
    if (fclose(f) == 0)
        rename(tmp, path);
    else
        unlink(tmp);
}

/* ---- the key loop ---- */

int top_is_tagged(const struct top_ui *u, unsigned src, unsigned pid)
{
    for (unsigned i = 0; i < u->n_tags; i++)
        if (u->tags[i].src == src && u->tags[i].pid == pid)
            return 1;
    return 0;
}

static void toggle_tag(struct top_ui *u, unsigned src, unsigned pid)
{
    for (unsigned i = 0; i < u->n_tags; i++)
        if (u->tags[i].src == src && u->tags[i].pid == pid) {
            u->tags[i] = u->tags[--u->n_tags];
            return;
        }
    if (u->n_tags < TOP_MAX_TAGS)
        u->tags[u->n_tags++] = (struct top_tag){src, pid};
}

static void set_msg(struct top_ui *u, int is_err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_msg(struct top_ui *u, int is_err, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(u->msg, sizeof u->msg, fmt, ap);
    va_end(ap);
    u->msg_err = is_err;
}

static void rebuild(struct top_ui *u)
{
    unsigned sel_src = 0, sel_pid = 0;
    int had = 0;
    struct top_filter_sort fs = {u->prefs.sort, u->prefs.reverse, u->prefs.tree, u->filter};

    if (u->sel < u->n_rows) {
        sel_src = u->rows[u->sel].src;
        sel_pid = u->rows[u->sel].pid;
        had = 1;
    }
    u->n_rows = top_rows_build(u->f, &fs, &u->rows, &u->cap_rows);
    if (had)
        for (size_t i = 0; i < u->n_rows; i++)
            if (u->rows[i].src == sel_src && u->rows[i].pid == sel_pid) {
                u->sel = i;
                break;
            }
}

static const struct gs_proc *row_proc(const struct top_ui *u, const struct top_row *r)
{
    return &u->f->src[r->src].snap->procs[r->proc];
}

/* The processes a signal goes to: the tagged ones, else the selected one; those the viewer
 * may not signal are left out and named in the message. */
static void start_signal(struct top_ui *u)
{
    char why[200] = "";
    unsigned refused = 0;

    u->n_targets = 0;
    for (size_t i = 0; i < u->n_rows; i++) {
        const struct top_row *r = &u->rows[i];
        const struct gs_proc *p = row_proc(u, r);
        int pick = u->n_tags ? top_is_tagged(u, r->src, r->pid) : i == u->sel;
        int dup = 0;
        if (!pick)
            continue;
        for (unsigned j = 0; j < u->n_targets; j++)
            dup |= u->targets[j].src == r->src && u->targets[j].pid == r->pid;
        if (dup)
            continue;
        if (top_may_signal(&u->f->src[r->src], p, why, sizeof why) != 0) {
            refused++;
            continue;
        }
        if (u->n_targets < TOP_MAX_TAGS) {
            struct top_target *t = &u->targets[u->n_targets++];
            t->src = r->src;
            t->pid = r->pid;
            t->start = top_proc_starttime((pid_t)r->pid);
            snprintf(t->what, sizeof t->what, "%.60s", p->cmdline[0] ? p->cmdline : p->name);
        }
    }
    if (!u->n_targets) {
        set_msg(u, 1, "%s", why[0] ? why : "no process selected");
        return;
    }
    if (refused)
        set_msg(u, 1, "%u left out: %s", refused, why);
    else
        u->msg[0] = '\0';
    u->mode = TOP_MODE_SIGNAL;
}

static void send_signal(struct top_ui *u)
{
    unsigned sent = 0, failed = 0;
    char err[160] = "";

    for (unsigned i = 0; i < u->n_targets; i++) {
        const struct top_target *t = &u->targets[i];
        if (top_proc_starttime((pid_t)t->pid) != t->start || t->start == 0) {
            failed++;
            snprintf(err, sizeof err, "pid %u exited (or was reused) before the signal", t->pid);
            continue;
        }
        if (kill((pid_t)t->pid, u->sig) != 0) {
            failed++;
            snprintf(err, sizeof err, "pid %u: %s", t->pid, strerror(errno));
        } else {
            sent++;
        }
    }
    if (failed)
        set_msg(u, 1, "SIG%s sent to %u, %u failed: %s", u->sig_name, sent, failed, err);
    else if (sent == 1)
        set_msg(u, 0, "SIG%s sent to pid %u", u->sig_name, u->targets[0].pid);
    else
        set_msg(u, 0, "SIG%s sent to %u processes", u->sig_name, sent);
    u->n_tags = 0;
    u->n_targets = 0;
}

static void open_detail(struct top_ui *u, int stack)
{
    const struct top_row *r;

    free(u->detail);
    u->detail = NULL;
    if (u->sel >= u->n_rows)
        return;
    r = &u->rows[u->sel];
    u->detail_src = r->src;
    u->detail_pid = r->pid;
    u->detail = top_proc_detail(&u->f->src[r->src], row_proc(u, r), stack);
    u->detail_top = 0;
    u->mode = TOP_MODE_DETAIL;
}

/* A key in the filter prompt ('/'): edit the filter, Enter keeps it, Esc clears it. */
static void key_filter(struct top_ui *u, int ch)
{
    size_t n = strlen(u->filter);
    if (ch == 27) {
        u->filter[0] = '\0';
        u->mode = TOP_MODE_MAIN;
    } else if (ch == '\n' || ch == '\r' || ch == KEY_ENTER) {
        u->mode = TOP_MODE_MAIN;
    } else if (ch == KEY_BACKSPACE || ch == 127 || ch == 8) {
        if (n)
            u->filter[n - 1] = '\0';
    } else if (ch >= 32 && ch < 127 && n + 1 < sizeof u->filter) {
        u->filter[n] = (char)ch;
        u->filter[n + 1] = '\0';
    }
    u->sel = 0;
    rebuild(u);
}

/* A key at the signal prompt ('k'): which signal, then a confirmation. */
static void key_signal(struct top_ui *u, int ch)
{
    u->mode = TOP_MODE_CONFIRM;
    if (ch == '1' || ch == 't' || ch == 'T') {
        u->sig = SIGTERM;
        u->sig_name = "TERM";
    } else if (ch == '2' || ch == 'k' || ch == 'K') {
        u->sig = SIGKILL;
        u->sig_name = "KILL";
    } else if (ch == '3' || ch == 'i' || ch == 'I') {
        u->sig = SIGINT;
        u->sig_name = "INT";
    } else {
        u->mode = TOP_MODE_MAIN;
        set_msg(u, 0, "no signal sent");
    }
}

/* A key on the detail screen: scroll, 's' the Python stack, anything else back. */
static void key_detail(struct top_ui *u, int ch)
{
    if (ch == 27 || ch == 'q' || ch == '\n' || ch == '\r' || ch == KEY_ENTER || ch == KEY_LEFT) {
        u->mode = TOP_MODE_MAIN;
    } else if (ch == KEY_DOWN) {
        u->detail_top++;
    } else if (ch == KEY_UP && u->detail_top) {
        u->detail_top--;
    } else if (ch == KEY_NPAGE) {
        u->detail_top += (unsigned)LINES / 2;
    } else if (ch == KEY_PPAGE) {
        u->detail_top =
            u->detail_top > (unsigned)LINES / 2 ? u->detail_top - (unsigned)LINES / 2 : 0;
    } else if (ch == 's') {
        for (size_t i = 0; i < u->n_rows; i++)
            if (u->rows[i].src == u->detail_src && u->rows[i].pid == u->detail_pid)
                u->sel = i;
        open_detail(u, 1);
    }
}

/* Cursor keys and the mouse wheel: the selected process (or run, in the runs panel). */
static int key_move(struct top_ui *u, int ch)
{
    size_t page = u->proc_rows > 1 ? (size_t)u->proc_rows - 1 : 1;

    switch (ch) {
    case KEY_DOWN:
        if (u->prefs.runs_panel)
            u->run_sel++;
        else if (u->sel + 1 < u->n_rows)
            u->sel++;
        return 1;
    case KEY_UP:
        if (u->prefs.runs_panel) {
            if (u->run_sel)
                u->run_sel--;
        } else if (u->sel) {
            u->sel--;
        }
        return 1;
    case KEY_NPAGE:
        u->sel = u->sel + page < u->n_rows ? u->sel + page : (u->n_rows ? u->n_rows - 1 : 0);
        return 1;
    case KEY_PPAGE:
        u->sel = u->sel > page ? u->sel - page : 0;
        return 1;
    case KEY_HOME:
        u->sel = 0;
        return 1;
    case KEY_END:
        u->sel = u->n_rows ? u->n_rows - 1 : 0;
        return 1;
    case KEY_MOUSE: {
        MEVENT ev;
        if (getmouse(&ev) == OK) {
            if (ev.bstate & BUTTON4_PRESSED) {
                if (u->sel)
                    u->sel--;
            } else if (ev.bstate & BUTTON5_PRESSED) {
                if (u->sel + 1 < u->n_rows)
                    u->sel++;
            } else if (ev.y >= u->proc_y0 && ev.y < u->proc_y0 + u->proc_rows &&
                       !u->prefs.runs_panel) {
                size_t i = u->proc_top + (size_t)(ev.y - u->proc_y0);
                if (i < u->n_rows)
                    u->sel = i;
            }
        }
        return 1;
    }
    }
    return 0;
}

/* '+' / '-': the next refresh interval up or down the steps. */
static void key_interval(struct top_ui *u, int ch, struct top_worker *w)
{
    static const double steps[] = {0.25, 0.5, 1, 2, 5, 10, 30, 60};
    size_t i = 0, n = sizeof steps / sizeof steps[0];

    while (i + 1 < n && steps[i] < u->prefs.interval_s - 1e-9)
        i++;
    if (ch == '+' && i + 1 < n && steps[i] <= u->prefs.interval_s + 1e-9)
        i++;
    else if (ch == '-' && i > 0)
        i--;
    u->prefs.interval_s = steps[i];
    top_worker_set_interval(w, u->prefs.interval_s);
    set_msg(u, 0, "refresh every %g s", u->prefs.interval_s);
}

/* Handles one key; returns 1 to quit. */
/* The view's settings: graph, sort column and order, tree, runs panel, mouse. */
static int key_view(struct top_ui *u, int ch)
{
    switch (ch) {
    case 'g':
        u->prefs.graph = (u->prefs.graph + 1) % TOP_G__N;
        set_msg(u, 0, "graph: %s",
                u->prefs.graph == TOP_G_UTIL  ? "utilization"
                : u->prefs.graph == TOP_G_MEM ? "memory used"
                                              : "power vs. limit");
        return 1;
    case '<':
    case ',':
        u->prefs.sort = (u->prefs.sort + TOP_C__N - 1) % TOP_C__N;
        rebuild(u);
        set_msg(u, 0, "sort: %s", top_col_names[u->prefs.sort]);
        return 1;
    case '>':
    case '.':
        u->prefs.sort = (u->prefs.sort + 1) % TOP_C__N;
        rebuild(u);
        set_msg(u, 0, "sort: %s", top_col_names[u->prefs.sort]);
        return 1;
    case 'i':
    case 'I':
        u->prefs.reverse = !u->prefs.reverse;
        rebuild(u);
        return 1;
    case 't':
        u->prefs.tree = !u->prefs.tree;
        rebuild(u);
        return 1;
    case 'r':
        u->prefs.runs_panel = !u->prefs.runs_panel;
        return 1;
    case 'm':
        u->prefs.mouse = !u->prefs.mouse;
        mousemask(u->prefs.mouse
                      ? BUTTON1_CLICKED | BUTTON1_PRESSED | BUTTON4_PRESSED | BUTTON5_PRESSED
                      : 0,
                  NULL);
        set_msg(u, 0, "mouse %s", u->prefs.mouse ? "on" : "off");
        return 1;
    }
    return 0;
}

static int on_key(struct top_ui *u, int ch, struct top_worker *w)
{
    switch (u->mode) {
    case TOP_MODE_HELP:
        u->mode = TOP_MODE_MAIN;
        return 0;
    case TOP_MODE_FILTER:
        key_filter(u, ch);
        return 0;
    case TOP_MODE_SIGNAL:
        key_signal(u, ch);
        return 0;
    case TOP_MODE_CONFIRM:
        u->mode = TOP_MODE_MAIN;
        if (ch == 'y' || ch == 'Y')
            send_signal(u);
        else
            set_msg(u, 0, "no signal sent");
        return 0;
    case TOP_MODE_DETAIL:
        key_detail(u, ch);
        return 0;
    default:
        break;
    }
    if (key_move(u, ch) || key_view(u, ch))
        return 0;
    switch (ch) {
    case 'q':
    case KEY_F(10):
        return 1;
    case 'h':
    case '?':
    case KEY_F(1):
        u->mode = TOP_MODE_HELP;
        break;
    case ']':
        if (u->gpu_top + 1 < u->n_gpus_total)
            u->gpu_top++;
        break;
    case '[':
        if (u->gpu_top)
            u->gpu_top--;
        break;
    case '/':
        u->mode = TOP_MODE_FILTER;
        break;
    case ' ':
        if (u->sel < u->n_rows) {
            toggle_tag(u, u->rows[u->sel].src, u->rows[u->sel].pid);
            if (u->sel + 1 < u->n_rows)
                u->sel++;
        }
        break;
    case 'U':
        u->n_tags = 0;
        break;
    case 'k':
    case KEY_F(9):
        start_signal(u);
        break;
    case '\n':
    case '\r':
    case KEY_ENTER:
        open_detail(u, 0);
        break;
    case '+':
    case '-':
        key_interval(u, ch, w);
        break;
    case 12: /* Ctrl-L */
        clearok(curscr, TRUE);
        break;
    default:
        break;
    }
    return 0;
}

static int use_utf8(void)
{
    const char *cs = nl_langinfo(CODESET);

    return cs && (strcmp(cs, "UTF-8") == 0 || strcmp(cs, "utf8") == 0);
}

__attribute__((visibility("default"))) int gs_top_main(int argc, char **argv);

int gs_top_main(int argc, char **argv)
{
    struct opts o;
    struct top_ui u;
    struct top_worker *w = NULL;
    struct gs_err err = {0};
    char cpath[512] = "", cdir[512] = "", warn[320] = "";
    int wake[2], rc, color;
    struct sigaction sa, old[3];
    static const int sigs[3] = {SIGINT, SIGTERM, SIGHUP};
    const char *tok = getenv("GPUSCOPE_TOKEN");

#ifdef __GLIBC__
    /* One malloc arena for both threads: the worker's own arena would keep its touched pages
     * (~0.4 MiB of RSS) for the few buffers it fills once; the threads rarely allocate. */
    mallopt(M_ARENA_MAX, 1);
#endif
    memset(&o, 0, sizeof o);
    memset(&u, 0, sizeof u);
    o.prefs.interval_s = 1.0;
    o.prefs.sort = TOP_C_GMEM;
    /* top.conf first, options over it */
    if (conf_path(cpath, sizeof cpath, cdir, sizeof cdir) == 0)
        load_prefs(&o.prefs, cpath, warn, sizeof warn);
    if (parse_opts(argc, argv, &o) != 0)
        return GS_EXIT_USAGE;
    if (o.help) {
        usage(stdout);
        return GS_EXIT_OK;
    }
    if (!o.cfg.token && tok && tok[0])
        o.cfg.token = tok;
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
        fprintf(stderr, "gpuscope top: needs a terminal (for a one-shot or watch view: gpuscope, "
                        "gpuscope -l 1)\n");
        return GS_EXIT_USAGE;
    }
    color = gs_term_use_color(o.color, STDOUT_FILENO);
    if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        fprintf(stderr, "gpuscope top: pipe: %s\n", strerror(errno));
        return 1;
    }
    rc = top_worker_start(&w, &o.cfg, o.prefs.interval_s, wake[1], &err);
    if (rc != GS_OK) {
        fprintf(stderr, "gpuscope top: %s\n", err.msg);
        close(wake[0]);
        close(wake[1]);
        return gs_rc_exit_code(rc);
    }
    g_wake_w = wake[1];
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 3; i++)
        sigaction(sigs[i], &sa, &old[i]);

    setlocale(LC_ALL, "");
    u.utf8 = use_utf8();
    u.prefs = o.prefs;
    u.conf_path = cpath;
    if (o.filter)
        snprintf(u.filter, sizeof u.filter, "%s", o.filter);
    if (warn[0])
        set_msg(&u, 1, "%s", warn);
    initscr();
    cbreak();
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    nodelay(stdscr, TRUE);
    set_escdelay(25);
    /* No typeahead check: by default ncurses polls the keyboard every few lines of an update
     * (~8 polls a frame here); without it a key waits for the frame being written (a few ms
     * at most). */
    typeahead(-1);
    curs_set(0);
    u.color = color;
    top_draw_init_colors(&u.color);
    if (u.prefs.mouse)
        mousemask(BUTTON1_CLICKED | BUTTON1_PRESSED | BUTTON4_PRESSED | BUTTON5_PRESSED, NULL);

    /* Draw only when something changed: a frame, a key, a resize. Between them the loop
     * sleeps in poll(2) without a timeout (a signal or SIGWINCH interrupts it). */
    int dirty = 1;
    while (!g_stop) {
        struct top_frame *f = top_worker_take(w);
        struct pollfd pf[2] = {{.fd = STDIN_FILENO, .events = POLLIN},
                               {.fd = wake[0], .events = POLLIN}};
        int ch, quit = 0;
        if (f) {
            top_worker_give_back(w, u.f);
            u.f = f;
            rebuild(&u);
            dirty = 1;
        }
        if (u.f && dirty)
            top_draw(&u);
        dirty = 0;
        if (poll(pf, 2, -1) < 0 && errno != EINTR)
            break;
        if (pf[1].revents & POLLIN) {
            char b[64];
            while (read(wake[0], b, sizeof b) > 0)
                ;
        }
        while ((ch = getch()) != ERR) {
            dirty = 1;
            if (ch == KEY_RESIZE)
                continue; /* ncurses resized its screens; the next draw fills them */
            if (on_key(&u, ch, w)) {
                quit = 1;
                break;
            }
        }
        if (quit)
            break;
    }
    endwin();
    for (int i = 0; i < 3; i++)
        sigaction(sigs[i], &old[i], NULL);
    g_wake_w = -1;
    top_worker_stop(w);
    close(wake[0]);
    close(wake[1]);
    if (!o.no_save && cpath[0])
        save_prefs(&u.prefs, cpath, cdir);
    top_frame_free(u.f);
    free(u.rows);
    free(u.detail);
    return GS_EXIT_OK;
}
