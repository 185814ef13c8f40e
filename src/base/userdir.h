/*
 * The calling user's own runtime directory for gpuscope's sockets: $XDG_RUNTIME_DIR/gpuscope
 * when $XDG_RUNTIME_DIR is set (systemd-logind's /run/user/UID, private to the user), else
 * /tmp/gpuscope-UID. Either is used only when it is a real directory (not a link) owned by the
 * caller, and the /tmp one only when closed to everyone else (no group or other permission
 * bits), so another user can neither plant a socket there nor read what is in it.
 *
 * What looks there: a training process's step records and `gpuscope run` (steps.sock, after
 * /run/gpuscope/steps.sock), and the quick check's hint (demo-agent.sock); `gpuscope demo`
 * publishes its sockets there (docs/agent.md, "gpuscope demo").
 */
#ifndef GS_BASE_USERDIR_H
#define GS_BASE_USERDIR_H

#include <stddef.h>

/* Fills out with the directory's path (no trailing slash). With create, makes it (mode 0700)
 * when missing. Returns 0 when the directory exists and is safe to use, -1 otherwise (out
 * still holds the path, for messages; errno says why: ENOENT, ENAMETOOLONG, or EPERM for a
 * directory that is a link, someone else's, or open to others). */
int gs_user_runtime_dir(char *out, size_t len, int create);

/* out = <the directory>/name when the directory is usable (see above) and the result fits;
 * 0 then, else -1. */
int gs_user_runtime_path(char *out, size_t len, const char *name);

/* 1 when a unix socket of that type (SOCK_STREAM, SOCK_SEQPACKET) at path accepts a connection
 * (a live agent or demo, not a stale file), else 0. */
int gs_unix_socket_answers(const char *path, int type);

#endif
