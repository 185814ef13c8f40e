/*
 * The slow-client reaper (docs/api.md, "Limits"): every HTTP connection of every daemon is
 * tracked from accept to close with the deadline of its request head, and once a second the
 * main thread shuts down those past it (a client sending a byte now and then resets
 * libmicrohttpd's inactivity timeout; this bounds the whole head). Its own lock: the daemons'
 * threads and the main thread share it.
 */
#ifndef GS_AGENT_REAPER_H
#define GS_AGENT_REAPER_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stdint.h>

#include "gpuscope/gs_err.h"

struct gs_reaper;

/* A reaper that gives every request head head_s seconds. GS_ENOMEM. */
int gs_reaper_new(struct gs_reaper **out, int head_s, struct gs_err *err);
/* After every daemon that reported to it has stopped. NULL is allowed. */
void gs_reaper_free(struct gs_reaper *r);

/* libmicrohttpd's MHD_OPTION_NOTIFY_CONNECTION and MHD_OPTION_NOTIFY_COMPLETED callbacks, with
 * the reaper as cls: a connection starts tracked, and each completed request gives the next
 * one on a kept-alive connection a fresh deadline. */
void gs_reaper_on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                             enum MHD_ConnectionNotificationCode toe);
void gs_reaper_on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                            enum MHD_RequestTerminationCode toe);
/* The connection's request head is complete: no deadline while it is answered. */
void gs_reaper_head_done(struct gs_reaper *r, struct MHD_Connection *c);
/* Shuts down the connections past their deadline (MHD then sees the end of the stream and
 * closes them); returns how many. */
unsigned gs_reaper_reap(struct gs_reaper *r, int64_t now_ns);

/* TCP connections at once from one address (docs/api.md, "Limits"), counted only among the
 * connections of that address without a known local uid, or root's: a local user's loopback
 * connections count against its uid instead, so no local user can fill 127.0.0.1's share. */
#define GS_REAPER_CONN_PER_ADDR 32

/* Per-uid fairness (docs/api.md, "Limits"): uid_of names the local uid behind a new
 * connection's socket (unix socket peer, loopback TCP peer; false: remote or unknown); a uid
 * other than root already holding per_uid connections gets the new one shut down at once
 * (counted, logged once per uid). The per-address limit above holds from the start; until
 * this is called nothing is counted per uid (and every TCP peer by address). SIGHUP may call
 * it again with a new per_uid. */
void gs_reaper_set_uid_limit(struct gs_reaper *r, unsigned per_uid,
                             bool (*uid_of)(int fd, uint32_t *uid));
/* The uid recorded for c's connection; false when none is known. */
bool gs_reaper_conn_uid(struct MHD_Connection *c, uint32_t *uid);
/* Connections refused by the per-uid limit since the start. */
uint64_t gs_reaper_uid_refused(struct gs_reaper *r);
/* Of those, the ones on a unix socket (the rest came over TCP). */
uint64_t gs_reaper_uid_refused_unix(struct gs_reaper *r);
/* TCP connections refused by GS_REAPER_CONN_PER_ADDR since the start (logged once per
 * address). */
uint64_t gs_reaper_addr_refused(struct gs_reaper *r);

#endif
