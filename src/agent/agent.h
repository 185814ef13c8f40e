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

/* What a front end other than `gpuscope agent` adds (gpuscope demo, src/cli/demo.c). */
struct gs_agent_run_opts {
    /* The history directory, made (and later removed) by the caller; it wins over the
     * configured data_dir (also across SIGHUP). NULL: the configured one. Borrowed for the
     * run. */
    const char *data_dir;
    /* Called once on the calling thread when the HTTP port is open, before the agent waits
     * for signals; listen is the address it serves. NULL for none. */
    void (*ready)(void *ctx, const char *listen);
    void *ctx;
};

/* Runs the agent until SIGTERM or SIGINT. args/argc/argv are kept to rebuild the
 * configuration on SIGHUP (file, then flags); opts may be NULL. Returns GS_OK after a clean
 * shutdown, or the error that kept it from starting (the HTTP port cannot be bound, ...). */
int gs_agent_run(const struct gs_agent_config *cfg, const struct gs_agent_args *args, int argc,
                 char **argv, const struct gs_agent_run_opts *opts, struct gs_err *err);

#endif
