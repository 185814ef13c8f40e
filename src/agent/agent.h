/*
 * `gpuscope agent`: the per-node daemon. A sampling thread publishes one immutable,
 * refcounted snapshot per period (with its /metrics text and JSON rendered once); a
 * libmicrohttpd server serves those; the calling thread waits for signals (SIGTERM/SIGINT
 * stop, SIGHUP reloads). See docs/agent.md.
 */
#ifndef GS_AGENT_H
#define GS_AGENT_H

#include "agent/config.h"

struct gs_err;

/* Runs the agent until SIGTERM or SIGINT. args/argc/argv are kept to rebuild the
 * configuration on SIGHUP (file, then flags). Returns GS_OK after a clean shutdown, or the
 * error that kept it from starting (the HTTP port cannot be bound, ...). */
int gs_agent_run(const struct gs_agent_config *cfg, const struct gs_agent_args *args, int argc,
                 char **argv, struct gs_err *err);

#endif
