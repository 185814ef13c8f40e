/*
 * A library loaded at run time and its functions resolved by name into a caller's table of
 * function pointers (dl.c): how the agent loads libcurl and zlib for its push sinks and
 * webhook (agent/outbound.c) and `gpuscope top --host` loads libcurl (client/http.c), so
 * that no process maps a library it does not use (docs/ARCHITECTURE.md). The NVML backend
 * resolves its symbols on its own: optional ones may be missing there, here none may.
 *
 * The table is a struct of function pointers; each gs_dl_sym names a symbol and the offset of
 * its member (GS_DL_SYM). Resolution is all or nothing: the table is written only when every
 * symbol is found. Not thread-safe: callers that load from several threads lock.
 */
#ifndef GS_BASE_DL_H
#define GS_BASE_DL_H

#include <stddef.h>

struct gs_dl_sym {
    const char *name; /* the symbol */
    size_t offset;    /* of its function pointer in the table */
};

/* One entry of a symbol list: member of struct type gets symbol name. */
#define GS_DL_SYM(type, member, name)                                                              \
    {                                                                                              \
        (name), offsetof(type, member)                                                             \
    }

struct gs_dl_lib {
    /* An environment variable naming the library to load instead of the candidates (when set
     * and not empty), or NULL. */
    const char *env;
    const char *const *names; /* candidate names, tried in order; NULL-terminated */
    const struct gs_dl_sym *syms;
    size_t n_syms;
};

/* dlopens the first candidate that loads (RTLD_NOW | RTLD_LOCAL) and resolves every symbol of
 * lib into table. Returns the handle (the functions stay valid until gs_dl_close), or NULL
 * with table untouched and why set to "cannot load NAME (DLERROR)" (NAME the first candidate,
 * DLERROR its loader message) or "NAME has no SYMBOL". */
void *gs_dl_open(const struct gs_dl_lib *lib, void *table, char *why, size_t why_len);

/* Unloads a library gs_dl_open loaded; NULL is allowed. Its table must not be called after. */
void gs_dl_close(void *handle);

#endif
