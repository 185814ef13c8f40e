/*
 * `gpuscope agent`: the per-node daemon. A sampling thread publishes one immutable,
 * refcounted snapshot per period (with its /metrics text and JSON rendered once); a
 * libmicrohttpd server serves those; the calling thread waits for signals (SIGTERM/SIGINT
 * stop, SIGHUP reloads). See docs/agent.md.
 */
#ifndef GS_AGENT_H
#define GS_AGENT_H

#include <stdint.h>

#include "agent/config.h"

struct gs_err;

/* Runs the agent until SIGTERM or SIGINT. args/argc/argv are kept to rebuild the
 * configuration on SIGHUP (file, then flags). Returns GS_OK after a clean shutdown, or the
 * error that kept it from starting (the HTTP port cannot be bound, ...). */
int gs_agent_run(const struct gs_agent_config *cfg, const struct gs_agent_args *args, int argc,
                 char **argv, struct gs_err *err);

/* The next CLOCK_MONOTONIC boundary after a cycle that started at prev and ended at now, with
 * period step: prev + step, or, when the cycle overran it, the first boundary after now
 * (*missed = boundaries skipped, 0 when on time). Ticks never stack up. */
int64_t gs_agent_next_tick(int64_t prev, int64_t now, int64_t step, uint64_t *missed);

/* The GS_WANT_* flags of cycle number n (0-based), per docs/backend.md's cadence. */
unsigned gs_agent_want(uint64_t n);

#endif
