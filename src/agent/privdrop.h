/*
 * Dropping root (docs/security.md, HARDENING): when the agent starts as root with the `user`
 * key set, it binds the TCP port (ports < 1024 need root), prepares its data directory and
 * socket directories for that user, then becomes the user for good (initgroups, setgid,
 * setuid; setuid(0) must fail afterwards; no_new_privs; not dumpable). NVML, the history
 * store and every socket but the TCP port are opened after the drop, by the user.
 *
 * The data directory check runs with or without a drop: a data directory (or a symbolic
 * link naming it) that another user owns or may write is refused, so nobody can plant links
 * where the agent writes.
 */
#ifndef GS_AGENT_PRIVDROP_H
#define GS_AGENT_PRIVDROP_H

#include <sys/socket.h>
#include <sys/types.h>

struct gs_err;

struct gs_privdrop {
    char user[64]; /* the `user` key; "" when none */
    uid_t uid;     /* the user's, or the effective uid when not dropping */
    gid_t gid;
    int active; /* 1: started as root with `user` set: gs_privdrop_apply drops */
};

/* Resolves user (NULL or "": stay as started). Not root and not already that user:
 * GS_EPERM; unknown user: GS_EINVAL. */
int gs_privdrop_plan(struct gs_privdrop *p, const char *user, struct gs_err *err);

/* Checks dir for the agent's use: a real directory, or a symbolic link owned by root or the
 * agent's user naming one; the directory owned by the agent's user (or by root, which a drop
 * hands over when it holds nothing but history.db files) and not writable by group or others.
 * When dropping, a missing dir is made (parents 0755, dir 0750) and given to the user, with
 * the history.db files inside. GS_EPERM with the reason otherwise. A missing dir without a
 * drop is left to the recorder. */
int gs_privdrop_data_dir(const struct gs_privdrop *p, const char *dir, struct gs_err *err);

/* Before a drop: makes the directory of a unix socket path (0755) and gives it to the user
 * when it was made now or is the default /run/gpuscope (the user then binds, replaces and
 * removes its sockets there, as under systemd's RuntimeDirectory=). Never fails: a socket
 * that cannot be bound later is logged by its opener. Ignores "off" and "". */
void gs_privdrop_socket_dir(const struct gs_privdrop *p, const char *sock_path);

/* Binds and listens on a TCP address (SO_REUSEADDR, IPV6_V6ONLY for IPv6, close-on-exec)
 * before a drop; *fd is then handed to libmicrohttpd. */
int gs_privdrop_listen_tcp(const struct sockaddr_storage *ss, const char *text, int *fd,
                           struct gs_err *err);

/* Becomes the user: initgroups (the device group comes from the user's groups), setgid,
 * setuid, checks that setuid(0) fails, PR_SET_NO_NEW_PRIVS and PR_SET_DUMPABLE 0. A no-op
 * unless active. Any failure is fatal (GS_EPERM). */
int gs_privdrop_apply(const struct gs_privdrop *p, struct gs_err *err);

#endif
