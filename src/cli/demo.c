/*
 * `gpuscope demo`: the agent on a bundled nvml-sim scenario, for a machine without a GPU or a
 * first look. It points the NVML loader at the sim library (GPUSCOPE_NVML_LIBRARY) and the sim
 * at a scenario (NVML_SIM_SCENARIO) before the sampler opens, makes a temporary data
 * directory, runs the same daemon as `gpuscope agent` (src/agent/agent.c), prints the URL once
 * the port is open, and removes the directory when the agent stops (SIGINT/SIGTERM). Its
 * step-record and local-viewer sockets live in that directory too (unless given as flags), so a
 * demo is never taken for the node's agent; the sim says it is a sim (nvmlSimGetInfo), which the
 * snapshot, /metrics, the page and the CLI repeat.
 *
 * Files are found next to the binary: the sim in <exe dir>/sim/ (the build tree) or
 * <exe dir>/../lib/gpuscope/ (an install), the scenarios in <exe dir>/../sim/scenarios/ (a
 * build dir inside the source tree) or <exe dir>/../share/gpuscope/scenarios/. See
 * docs/agent.md, "gpuscope demo".
 */
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/config.h"
#include "base/userdir.h"
#include "cli/cli.h"
#include "gpuscope/gs_err.h"

#define DEMO_DEFAULT_SCENARIO "h100x8-training"

static const char *const sim_dirs[] = {"sim", "../lib/gpuscope"};
static const char *const scenario_dirs[] = {"../sim/scenarios", "../share/gpuscope/scenarios"};
#define N_DIRS(a) (sizeof(a) / sizeof((a)[0]))

struct demo_args {
    const char *scenario; /* NAME or PATH */
    int help;
    int agent_argc; /* argv without --scenario: what the agent's own parser sees */
    char **agent_argv;
};

/* The directory of the running binary, without a trailing slash. */
static int exe_dir(char *out, size_t len)
{
    ssize_t n = readlink("/proc/self/exe", out, len - 1);
    char *slash;

    if (n <= 0)
        return GS_EIO;
    out[n] = '\0';
    slash = strrchr(out, '/');
    if (!slash)
        return GS_EIO;
    *slash = '\0';
    return GS_OK;
}

/* Splits off --scenario; the rest goes to the agent's parser unchanged. */
static int parse_demo_args(struct demo_args *d, int argc, char **argv, struct gs_err *err)
{
    memset(d, 0, sizeof *d);
    d->scenario = DEMO_DEFAULT_SCENARIO;
    d->agent_argv = calloc((size_t)argc + 1, sizeof *d->agent_argv);
    if (!d->agent_argv)
        return gs_err_set(err, GS_ENOMEM, "demo: out of memory");
    d->agent_argv[d->agent_argc++] = argv[0];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--scenario") == 0) {
            if (i + 1 >= argc)
                return gs_err_set(err, GS_EUSAGE, "--scenario: missing value");
            d->scenario = argv[++i];
        } else if (strncmp(a, "--scenario=", 11) == 0) {
            d->scenario = a + 11;
        } else {
            if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
                d->help = 1;
            d->agent_argv[d->agent_argc++] = argv[i];
        }
    }
    if (!d->scenario[0])
        return gs_err_set(err, GS_EUSAGE, "--scenario: missing value");
    return GS_OK;
}

/* The first dir/rel/name that can be read, into out. */
static int find_file(char *out, size_t len, const char *dir, const char *const *rels, size_t n,
                     const char *name, const char *suffix)
{
    for (size_t i = 0; i < n; i++) {
        int w = snprintf(out, len, "%s/%s/%s%s", dir, rels[i], name, suffix);
        if (w > 0 && (size_t)w < len && access(out, R_OK) == 0)
            return GS_OK;
    }
    return GS_ENOTFOUND;
}

/* GPUSCOPE_NVML_LIBRARY when the caller set it (a sim built elsewhere), else the sim next to
 * the binary. */
static int find_sim(char *out, size_t len, const char *dir, struct gs_err *err)
{
    const char *env = getenv("GPUSCOPE_NVML_LIBRARY");

    if (env && env[0]) {
        snprintf(out, len, "%s", env);
        return GS_OK;
    }
    if (find_file(out, len, dir, sim_dirs, N_DIRS(sim_dirs), "libnvidia-ml.so.1", "") == GS_OK)
        return GS_OK;
    return gs_err_set(err, GS_ENOLIB,
                      "demo: nvml-sim not found (%s/sim/libnvidia-ml.so.1, "
                      "%s/../lib/gpuscope/libnvidia-ml.so.1); build it with "
                      "'ninja -C BUILD sim/libnvidia-ml.so.1' or set GPUSCOPE_NVML_LIBRARY",
                      dir, dir);
}

/* A PATH (has a '/' or ends in .json) is taken as is; a NAME is looked up in the bundled
 * scenario directories. *label is what the URL line calls it. */
static int find_scenario(char *out, size_t len, const char *dir, const char *arg,
                         const char **label, struct gs_err *err)
{
    size_t n = strlen(arg);
    int is_path = strchr(arg, '/') || (n > 5 && strcmp(arg + n - 5, ".json") == 0);

    *label = arg;
    if (is_path) {
        const char *base = strrchr(arg, '/');
        *label = base ? base + 1 : arg;
        if (access(arg, R_OK) != 0)
            return gs_err_set(err, GS_EUSAGE, "demo: --scenario %s: %s", arg, strerror(errno));
        snprintf(out, len, "%s", arg);
        return GS_OK;
    }
    if (find_file(out, len, dir, scenario_dirs, N_DIRS(scenario_dirs), arg, ".json") == GS_OK)
        return GS_OK;
    return gs_err_set(err, GS_EUSAGE,
                      "demo: no scenario '%.64s' (looked in %s/../sim/scenarios/ and "
                      "%s/../share/gpuscope/scenarios/); give a file with --scenario PATH",
                      arg, dir, dir);
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    if (remove(path) != 0)
        fprintf(stderr, "gpuscope demo: cannot remove %s: %s\n", path, strerror(errno));
    return 0; /* go on: remove what can be removed */
}

/* The temporary data dir and everything the agent put in it (history.db and its -wal/-shm
 * once the store is wired). */
static void remove_tree(const char *dir)
{
    nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* The demo's sockets published in the user's runtime dir (base/userdir.h) as links: steps.sock,
 * where this user's training processes and `gpuscope run` look after /run/gpuscope, so that
 * their runs reach the demo's dashboard; demo-agent.sock, a name no client reads by default,
 * which the quick check's no-driver hint names. */
struct published {
    char link[2][300];
    const char *target[2];
};

struct banner {
    const char *scenario;
    const char *data;        /* the private directory */
    const char *http_socket; /* the private local-viewer socket, or "off" */
    const char *steps_socket;
    int publish;
    struct published pub;
};

/* Links name -> target in the user's runtime dir unless something answering is there (an agent
 * of this user's, another demo): a stale entry is replaced. Prints what it did. */
static void publish_one(struct published *p, int i, const char *dir, const char *name,
                        const char *target, int type)
{
    char *link = p->link[i];
    struct stat st;

    p->link[i][0] = '\0';
    if (strcmp(target, "off") == 0 || !target[0])
        return;
    if (snprintf(link, sizeof p->link[i], "%s/%s", dir, name) >= (int)sizeof p->link[i]) {
        link[0] = '\0';
        return;
    }
    if (lstat(link, &st) == 0) {
        if (gs_unix_socket_answers(link, type)) {
            printf("gpuscope demo: %s answers already (your own agent?): not published there\n",
                   link);
            link[0] = '\0';
            return;
        }
        unlink(link); /* stale: a demo killed before it could clean up */
    }
    if (symlink(target, link) != 0) {
        printf("gpuscope demo: cannot publish %s: %s\n", link, strerror(errno));
        link[0] = '\0';
        return;
    }
    p->target[i] = target;
}

/* Removes the links that still point at this demo's sockets. */
static void unpublish(struct published *p)
{
    char got[PATH_MAX];

    for (int i = 0; i < 2; i++) {
        ssize_t n;

        if (!p->link[i][0])
            continue;
        n = readlink(p->link[i], got, sizeof got - 1);
        if (n < 0)
            continue;
        got[n] = '\0';
        if (strcmp(got, p->target[i]) == 0)
            unlink(p->link[i]);
    }
}

static void print_url(void *ctx, const char *listen)
{
    struct banner *b = ctx;
    char dir[256];

    printf("gpuscope demo: http://%s/ (scenario %s, SIMULATED GPUs, Ctrl-C to stop)\n", listen,
           b->scenario);
    printf("gpuscope demo: private data dir %s (removed at exit)\n", b->data);
    if (strcmp(b->http_socket, "off") != 0)
        printf("gpuscope demo: to read it from the CLI: GPUSCOPE_HTTP_SOCKET=%s gpuscope\n",
               b->http_socket);
    if (b->publish && gs_user_runtime_dir(dir, sizeof dir, 1) == 0) {
        publish_one(&b->pub, 0, dir, "steps.sock", b->steps_socket, SOCK_SEQPACKET);
        publish_one(&b->pub, 1, dir, "demo-agent.sock", b->http_socket, SOCK_STREAM);
        if (b->pub.link[0][0])
            printf("gpuscope demo: your training runs (gpuscope run, the Python package) send "
                   "their steps to it: %s\n",
                   b->pub.link[0]);
    } else if (b->publish) {
        printf("gpuscope demo: not published for your training runs (%s: %s); "
               "GPUSCOPE_AGENT_SOCKET=%s reaches it\n",
               dir, strerror(errno), b->steps_socket);
    }
    fflush(stdout);
}

/* Whether the user named key on the command line (--key=V, --key V, underscores as dashes):
 * then it is theirs; otherwise the demo keeps the node's paths free. */
static int flag_given(const struct demo_args *d, const char *flag)
{
    size_t n = strlen(flag);

    for (int i = 1; i < d->agent_argc; i++)
        if (strncmp(d->agent_argv[i], flag, n) == 0 &&
            (d->agent_argv[i][n] == '\0' || d->agent_argv[i][n] == '='))
            return 1;
    return 0;
}

/* The step-record socket and the local-viewer socket inside the private directory, never the
 * node's /run/gpuscope/ or $XDG_RUNTIME_DIR/gpuscope/: a demo must not be taken for the node's
 * agent by `gpuscope`, `gpuscope query` or a training process. */
static int private_sockets(const struct demo_args *d, struct gs_agent_config *cfg, const char *data,
                           struct gs_err *err)
{
    static const struct {
        const char *flag, *name;
        size_t off;
    } socks[] = {
        {"--socket", "steps.sock", offsetof(struct gs_agent_config, socket)},
        {"--http-socket", "agent.sock", offsetof(struct gs_agent_config, http_socket)},
    };

    for (size_t i = 0; i < N_DIRS(socks); i++) {
        char *dst = (char *)cfg + socks[i].off;
        char under[32];
        int w;

        snprintf(under, sizeof under, "%s", socks[i].flag);
        for (char *p = under + 2; *p; p++)
            if (*p == '-')
                *p = '_';
        if (flag_given(d, socks[i].flag) || flag_given(d, under))
            continue;
        w = snprintf(dst, GS_SOCKET_LEN, "%s/%s", data, socks[i].name);
        if (w < 0 || w >= GS_SOCKET_LEN)
            return gs_err_set(err, GS_EUSAGE,
                              "demo: %s/%s is longer than a unix socket path may be (%d bytes); "
                              "set a shorter TMPDIR",
                              data, socks[i].name, GS_SOCKET_LEN - 1);
    }
    return GS_OK;
}

static void demo_usage(FILE *out)
{
    fprintf(out,
            "usage: gpuscope demo [--scenario NAME|PATH] [--listen HOST:PORT] [AGENT FLAGS]\n\n"
            "Runs the agent (gpuscope agent) on a bundled nvml-sim scenario with a private\n"
            "temporary data directory, removed at exit, and prints the URL. Its sockets\n"
            "(steps.sock, agent.sock) live in that directory, never in /run/gpuscope or\n"
            "$XDG_RUNTIME_DIR/gpuscope, unless --socket / --http-socket name them. Everything it\n"
            "shows is marked SIMULATED. Ctrl-C stops it.\n\n"
            "  --scenario NAME|PATH  sim/scenarios/NAME.json or a scenario file (default %s)\n"
            "  --listen HOST:PORT    where to serve (default 127.0.0.1:9400)\n\n"
            "Every 'gpuscope agent' flag is accepted (--interval, --metrics-compat,\n"
            "--log-level, --config, ...): gpuscope agent --help. See docs/agent.md.\n",
            DEMO_DEFAULT_SCENARIO);
}

/* Sets up the environment and the data dir, then runs the agent; returns the exit status. */
static int demo_run(const struct demo_args *d, struct gs_err *err)
{
    char dir[PATH_MAX], sim[PATH_MAX + 64], scenario[PATH_MAX + 128], data[PATH_MAX];
    const char *tmp = getenv("TMPDIR");
    struct gs_agent_args args;
    struct gs_agent_config cfg;
    struct banner b;
    struct gs_agent_run_opts opts;
    int rc;

    if (exe_dir(dir, sizeof dir) != GS_OK)
        return gs_err_set(err, GS_EIO, "demo: cannot read /proc/self/exe: %s", strerror(errno));
    rc = gs_config_parse_args(&args, d->agent_argc, d->agent_argv, err);
    if (rc == GS_OK)
        rc = gs_config_build(&cfg, &args, d->agent_argc, d->agent_argv, err);
    if (rc != GS_OK)
        return rc == GS_EUSAGE ? rc : GS_EUSAGE; /* bad flag or configuration: exit 2 */
    rc = find_sim(sim, sizeof sim, dir, err);
    if (rc == GS_OK)
        rc = find_scenario(scenario, sizeof scenario, dir, d->scenario, &b.scenario, err);
    if (rc != GS_OK)
        return rc;
    /* Before gs_agent_run: the sampler reads both when it opens NVML. */
    if (setenv("GPUSCOPE_NVML_LIBRARY", sim, 1) != 0 ||
        setenv("NVML_SIM_SCENARIO", scenario, 1) != 0)
        return gs_err_set(err, GS_ENOMEM, "demo: setenv: %s", strerror(errno));
    snprintf(data, sizeof data, "%s/gpuscope-demo.XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(data))
        return gs_err_set(err, GS_EIO, "demo: mkdtemp %s: %s", data, strerror(errno));
    rc = private_sockets(d, &cfg, data, err);
    if (rc != GS_OK) {
        remove_tree(data);
        return rc;
    }
    memset(&b.pub, 0, sizeof b.pub);
    b.data = data;
    b.http_socket = cfg.http_socket;
    b.steps_socket = cfg.socket;
    /* sockets the user named on the command line are theirs to publish */
    b.publish = !flag_given(d, "--socket") && !flag_given(d, "--http-socket") &&
                !flag_given(d, "--http_socket");
    opts = (struct gs_agent_run_opts){.data_dir = data, .ready = print_url, .ctx = &b};
    rc = gs_agent_run(&cfg, &args, d->agent_argc, d->agent_argv, &opts, err);
    unpublish(&b.pub);
    remove_tree(data);
    return rc;
}

int gs_cli_demo(int argc, char **argv)
{
    struct demo_args d;
    struct gs_err err;
    int rc;

    gs_err_clear(&err);
    rc = parse_demo_args(&d, argc, argv, &err);
    if (rc == GS_OK && d.help) {
        demo_usage(stdout);
        free(d.agent_argv);
        return GS_EXIT_OK;
    }
    if (rc == GS_OK)
        rc = demo_run(&d, &err);
    free(d.agent_argv);
    if (rc == GS_OK)
        return GS_EXIT_OK;
    fprintf(stderr, "gpuscope: %s\n", err.msg[0] ? err.msg : gs_strerror(rc));
    return rc == GS_EUSAGE ? GS_EXIT_USAGE : gs_rc_exit_code(rc);
}
