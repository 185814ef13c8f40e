/*
 * receiver.h - the step-record socket: a SOCK_SEQPACKET unix socket whose thread accepts
 * training processes, learns each sender's pid/uid/gid with SO_PEERCRED and hands every valid
 * record (src/run/record.h) to callbacks. Invalid records are counted and answered by
 * nothing; a connection that sends GS_RECEIVER_MAX_BAD bad records in a row is closed. Limits:
 * GS_RECEIVER_MAX_CONN connections (and optionally a number per uid), GS_RECORD_MAX bytes a
 * message (longer: truncated, counted as bad). Used by `gpuscope run` and by the agent.
 */
#ifndef GS_RUN_RECEIVER_H
#define GS_RUN_RECEIVER_H

#include <stdint.h>
#include <sys/types.h>

#include "run/record.h"

#define GS_RECEIVER_MAX_CONN 256
#define GS_RECEIVER_MAX_BAD 16

struct gs_peer {
    pid_t pid;
    uid_t uid;
    gid_t gid;
    uint64_t conn_id; /* unique per connection for the receiver's life */
};

struct gs_receiver_cb {
    void *ctx;
    /* Called on the receiver thread, one record at a time. */
    void (*on_record)(void *ctx, const struct gs_peer *peer, const struct gs_record *rec);
    void (*on_close)(void *ctx, const struct gs_peer *peer); /* may be NULL */
    /* A rejected message; why is the parser's reason. May be NULL. */
    void (*on_reject)(void *ctx, const struct gs_peer *peer, const char *why);
    /* A connection closed at accept by a limit (enum gs_receiver_refusal); may be NULL. */
    void (*on_refuse)(void *ctx, const struct gs_peer *peer, int why);
    /* Called on the receiver thread about once a second, busy or idle, while it returns
     * nonzero; may be NULL. Once it returns 0 the thread sleeps until its next event (a
     * connection, a message, a close) and ticks again from there: what only the callbacks
     * start (a run left interrupted) gets its ticks, and an idle agent is not woken every
     * second. */
    int (*on_tick)(void *ctx);
};

/* Why a connection was refused at accept (on_refuse). */
enum gs_receiver_refusal {
    GS_RECEIVER_FULL = 0,     /* GS_RECEIVER_MAX_CONN connections open */
    GS_RECEIVER_UID_CONN = 1, /* its uid holds conn_per_uid connections already */
};

struct gs_receiver_stats {
    uint64_t connections, records, rejected, closed_bad;
    uint64_t refused_full, refused_uid; /* connections closed at accept by a limit */
};

struct gs_err;
struct gs_receiver;

/* Binds path (an existing socket file there is replaced only if nothing answers on it),
 * chmod mode, starts the thread. Returns GS_OK, or GS_EINVAL (bad path), GS_EIO (another
 * receiver listens there, bind/listen failed), GS_EPERM, GS_ENOMEM with err. Accepts senders
 * of the receiver's own effective uid and root only. */
int gs_receiver_start(struct gs_receiver **out, const char *path, mode_t mode,
                      const struct gs_receiver_cb *cb, struct gs_err *err);

/* gs_receiver_start with flags: GS_RECEIVER_ANY_UID accepts every local uid (the agent's
 * node-wide socket; records stay attributed to each sender's SO_PEERCRED uid/pid). */
#define GS_RECEIVER_ANY_UID 0x1u
int gs_receiver_start_flags(struct gs_receiver **out, const char *path, mode_t mode, unsigned flags,
                            const struct gs_receiver_cb *cb, struct gs_err *err);
/* gs_receiver_start_flags with a per-uid limit (issue 18): a uid other than root holding
 * conn_per_uid connections gets its next ones closed at accept (0: no limit). */
int gs_receiver_start_limited(struct gs_receiver **out, const char *path, mode_t mode,
                              unsigned flags, unsigned conn_per_uid,
                              const struct gs_receiver_cb *cb, struct gs_err *err);
void gs_receiver_stats(const struct gs_receiver *r, struct gs_receiver_stats *out);

/* Whether a connection waits to be accepted (a sender that connected, sent and exited before
 * the receiver's thread got to it): a drain is not over while one does. */
int gs_receiver_backlog(const struct gs_receiver *r);
/* Sends one message back to the sender of connection conn_id (a control message,
 * run/control.h), from any thread, never waiting: 0 when sent, -1 when there is no such
 * connection any more or its buffer is full. */
int gs_receiver_send(struct gs_receiver *r, uint64_t conn_id, const void *msg, size_t len);
/* Stops the thread, closes every connection, unlinks the path. NULL allowed. */
void gs_receiver_stop(struct gs_receiver *r);

#endif
