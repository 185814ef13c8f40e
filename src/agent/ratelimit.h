/*
 * The HTTP rate limiter (docs/api.md, "Limits"): a token bucket per client address, rate
 * tokens per second up to burst, one taken per request. One table serves every libmicrohttpd
 * daemon of the agent (TCP, the unix socket, and the old and new TCP daemons that overlap
 * during a TLS reload), so it keeps its own mutex: a check is a hash, at most RL_PROBE slot
 * compares and a few arithmetic operations under it.
 */
#ifndef GS_AGENT_RATELIMIT_H
#define GS_AGENT_RATELIMIT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "gpuscope/gs_err.h"

struct gs_ratelimit;

/* A table of 1024 client addresses, every bucket empty. GS_ENOMEM on failure. */
int gs_ratelimit_new(struct gs_ratelimit **out, struct gs_err *err);
void gs_ratelimit_free(struct gs_ratelimit *rl);

/* Whether a request from sa (AF_INET or AF_INET6, the port ignored; other families share one
 * bucket) at now_ns (CLOCK_MONOTONIC) may go on, taking a token if so. rate <= 0 or no sa:
 * always true. An address not in the table starts with a full bucket; a full table evicts the
 * least recently seen of the probed slots. Safe from any thread. */
bool gs_ratelimit_take(struct gs_ratelimit *rl, const struct sockaddr *sa, double rate,
                       double burst, int64_t now_ns);

/* The same bucket logic keyed by a local uid (the step socket's records per second per uid,
 * runs.h); a table used for uids and addresses keeps them apart. */
bool gs_ratelimit_take_uid(struct gs_ratelimit *rl, uint32_t uid, double rate, double burst,
                           int64_t now_ns);

#endif
