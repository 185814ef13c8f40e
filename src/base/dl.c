/*
 * Run-time loading of a library with a table of required functions (dl.h).
 */
#include "base/dl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *gs_dl_open(const struct gs_dl_lib *lib, void *table, char *why, size_t why_len)
{
    const char *env = lib->env ? getenv(lib->env) : NULL;
    const char *const one[2] = {env, NULL};
    const char *const *names = env && env[0] ? one : lib->names;
    char first_err[256] = "";
    const char *name = NULL;
    void *h = NULL;

    for (size_t i = 0; names[i] && !h; i++) {
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h) {
            name = names[i];
        } else if (i == 0) { /* the name people know; later ones are fallbacks */
            const char *e = dlerror();
            snprintf(first_err, sizeof first_err, "%s", e ? e : "unknown error");
        }
    }
    if (!h) {
        snprintf(why, why_len, "cannot load %s (%s)", names[0] ? names[0] : "(no name)", first_err);
        return NULL;
    }
    /* Every symbol first, so that a library lacking one leaves the table as it was. */
    for (size_t i = 0; i < lib->n_syms; i++) {
        if (!dlsym(h, lib->syms[i].name)) {
            snprintf(why, why_len, "%s has no %s", name, lib->syms[i].name);
            dlclose(h);
            return NULL;
        }
    }
    for (size_t i = 0; i < lib->n_syms; i++) {
        void *f = dlsym(h, lib->syms[i].name);
        /* POSIX guarantees a function pointer round-trips through void *. */
        memcpy((char *)table + lib->syms[i].offset, &f, sizeof f);
    }
    return h;
}

void gs_dl_close(void *handle)
{
    if (handle)
        dlclose(handle);
}
