/*
 * `gpuscope top` in the gpuscope binary (main_light.c) and in gpuscope-full (main.c): loads
 * gpuscope-top.so and calls its gs_top_main.
 * The full-screen view links ncurses (and dlopens libcurl for --host); keeping it in a
 * module that only this command loads means `gpuscope`, `gpuscope query` and the agent map
 * neither at start-up.
 *
 * The module is looked for next to the executable (a build tree), then at GS_TOP_MODULE_REL
 * from it (an install moved or staged with DESTDIR: <bindir or libexecdir>/../<libdir>/gpuscope/,
 * each executable built with its own), then
 * in GS_TOP_MODULE (the install: <libdir>/gpuscope/gpuscope-top.so); $GPUSCOPE_TOP_MODULE
 * overrides them.
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

#ifndef GS_TOP_MODULE
#define GS_TOP_MODULE "/usr/local/lib/gpuscope/gpuscope-top.so"
#endif
#ifndef GS_TOP_MODULE_REL
#define GS_TOP_MODULE_REL "../lib/gpuscope/gpuscope-top.so"
#endif

int gs_cli_top(int argc, char **argv)
{
    char exe[PATH_MAX], path[PATH_MAX + sizeof GS_TOP_MODULE_REL + 32];
    const char *env = getenv("GPUSCOPE_TOP_MODULE");
    void *h = NULL;
    int (*entry)(int, char **);
    ssize_t n;

    if (env && env[0]) {
        h = dlopen(env, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            fprintf(stderr, "gpuscope top: GPUSCOPE_TOP_MODULE: %s\n", dlerror());
            return 1;
        }
    }
    if (!h && (n = readlink("/proc/self/exe", exe, sizeof exe - 1)) > 0) {
        char *slash;
        exe[n] = '\0';
        slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            snprintf(path, sizeof path, "%s/gpuscope-top.so", exe);
            if (access(path, R_OK) == 0)
                h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            snprintf(path, sizeof path, "%s/" GS_TOP_MODULE_REL, exe);
            if (!h && access(path, R_OK) == 0)
                h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        }
    }
    if (!h)
        h = dlopen(GS_TOP_MODULE, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "gpuscope top: cannot load the full-screen view (%s): %s\n", GS_TOP_MODULE,
                dlerror());
        return 1;
    }
    *(void **)&entry = dlsym(h, "gs_top_main");
    if (!entry) {
        fprintf(stderr, "gpuscope top: %s\n", dlerror());
        return 1;
    }
    return entry(argc, argv);
}
