/*
 * main_light.c - the `gpuscope` executable: the commands a person runs by hand many times a
 * day, linked with only what they use, and everything else handed to gpuscope-full.
 *
 * The one-shot quick check (`gpuscope`, `gpuscope --json`, the watch), `gpuscope query` and
 * `gpuscope --version` run here, and `gpuscope top`, whose module (top_load.c) then maps
 * ncurses but none of gpuscope-full's libraries. This executable links libgpuscope's sampler and
 * backend, jansson and libc, and not SQLite, libmicrohttpd, GnuTLS, libyaml or libcrypt: the
 * dynamic loader then maps a handful of libraries instead of ~20 (bench/RESULTS.md, "Start-up").
 * Every other command (agent, demo, run, help, and commands added later) is the same
 * argv exec'd into gpuscope-full, the executable with every command (main.c), so the process
 * (pid, signals, exit status) is the same one: `gpuscope agent` under systemd stays the
 * unit's main process. docs/ARCHITECTURE.md says why this split rather than lazily loaded
 * libraries.
 *
 * gpuscope-full is looked for next to this executable (the build tree, a bundle), then in
 * ../libexec (a relocated install), then in the libexecdir this was built for.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

#ifndef GS_VERSION
#error "GS_VERSION comes from meson (project version)"
#endif
#ifndef GS_LIBEXECDIR
#error "GS_LIBEXECDIR comes from meson"
#endif

#define FULL_NAME "gpuscope-full"

/* The directory of this executable, without a trailing slash; "" when unknown. */
static void self_dir(char *out, size_t len)
{
    ssize_t n = readlink("/proc/self/exe", out, len - 1);
    char *slash;

    if (n <= 0) {
        out[0] = '\0';
        return;
    }
    out[n] = '\0';
    slash = strrchr(out, '/');
    if (slash)
        *slash = '\0';
    else
        out[0] = '\0';
}

/* Execs gpuscope-full with this argv; returns only when none could be started. */
static int exec_full(char **argv)
{
    char dir[PATH_MAX], path[PATH_MAX + 64];
    const char *tried[3];
    int n = 0, err = ENOENT;

    self_dir(dir, sizeof dir);
    if (dir[0]) {
        snprintf(path, sizeof path, "%s/" FULL_NAME, dir);
        execv(path, argv);
        err = errno;
        snprintf(path, sizeof path, "%s/../libexec/" FULL_NAME, dir);
        execv(path, argv);
        if (errno != ENOENT)
            err = errno;
        tried[n++] = "next to gpuscope";
        tried[n++] = "../libexec";
    }
    execv(GS_LIBEXECDIR "/" FULL_NAME, argv);
    if (errno != ENOENT)
        err = errno;
    tried[n++] = GS_LIBEXECDIR;
    fprintf(stderr, "gpuscope: cannot start %s (looked %s%s%s%s%s): %s\n", FULL_NAME, tried[0],
            n > 1 ? ", " : "", n > 1 ? tried[1] : "", n > 2 ? ", " : "", n > 2 ? tried[2] : "",
            strerror(err));
    return 255;
}

int main(int argc, char **argv)
{
    const char *cmd = argc > 1 ? argv[1] : NULL;
    const char *base = argv[0] ? strrchr(argv[0], '/') : NULL;

    /* run as `nvidia-smi` (a symlink, see meson_options.txt): nvidia-smi's whole command line */
    base = base ? base + 1 : argv[0];
    if (base && strcmp(base, "nvidia-smi") == 0) {
        argv[0] = "nvidia-smi";
        return gs_cli_query(argc, argv);
    }
    if (cmd && (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0)) {
        printf("gpuscope %s\n", GS_VERSION);
        return 0;
    }
    if (!cmd || cmd[0] == '-')
        return gs_cli_quick(argc, argv);
    if (strcmp(cmd, "query") == 0)
        return gs_cli_query(argc - 1, argv + 1);
    if (strcmp(cmd, "top") == 0) /* the module: ncurses, not gpuscope-full's libraries */
        return gs_cli_top(argc - 1, argv + 1);
    return exec_full(argv);
}
