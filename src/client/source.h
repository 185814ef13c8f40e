/*
 * A source of snapshots, what a front end opens and samples (`gpuscope`, `gpuscope query`,
 * nvidia-smi's modes, `gpuscope top`): the local sampler (NVML), the local agent's unix
 * socket (agent_client.h: no NVML start-up, and the agent's visibility policy applies,
 * docs/security.md LOCAL VIEWERS), or an agent over HTTP(S) (http.h, top --host).
 *
 * gs_source_open makes the one decision between the local agent and NVML:
 *   - a host given: that agent over HTTP(S), nothing local;
 *   - GS_SOURCE_NVML: NVML;
 *   - otherwise the socket gs_agent_client_socket names, when there is one and its agent
 *     answers /api/v1/snapshot (that answer is the first sample);
 *   - otherwise NVML for GS_SOURCE_AUTO, an error for GS_SOURCE_AGENT.
 * The per-command rules: the nvidia-smi modes (the table, -L, -q, dmon, pmon) ask for
 * GS_SOURCE_NVML always, since they print the driver's view as nvidia-smi does; the quick
 * check, query's CSV and top take the agent when it answers. Where those differ, an option
 * says how: nvml_env_picks_nvml, hidden_as_procs, fixed_gpus, and the NVML reading options.
 * After NVML fails to open, gs_source_hint_no_driver says what can be read instead.
 *
 * Threads: a source is used by one thread at a time.
 */
#ifndef GS_CLIENT_SOURCE_H
#define GS_CLIENT_SOURCE_H

#include <stdbool.h>
#include <stddef.h>

#include "gpuscope/gs_model.h"

struct gs_topo;

struct gs_err;
struct gs_http_opts;
struct gs_sampler_opts;
struct gs_source;

enum gs_source_kind {
    GS_SOURCE_KIND_NVML,  /* the local sampler */
    GS_SOURCE_KIND_AGENT, /* the local agent's unix socket */
    GS_SOURCE_KIND_HTTP,  /* an agent over HTTP(S) */
};

enum gs_source_pick {
    GS_SOURCE_AUTO,  /* the local agent when it answers, else NVML */
    GS_SOURCE_AGENT, /* the local agent, else an error (top --source agent) */
    GS_SOURCE_NVML,  /* NVML (--no-agent, top --source nvml, nvidia-smi's modes) */
};

struct gs_source_opts {
    enum gs_source_pick pick;
    /* quick check and query: an explicit $GPUSCOPE_NVML_LIBRARY asks for that library, unless
     * $GPUSCOPE_HTTP_SOCKET names a socket too (top asks the agent all the same). */
    bool nvml_env_picks_nvml;
    /* The agent's per-GPU summaries of processes its policy withheld become process rows
     * (gs_snapjson_decode): top; the quick check and query show them per GPU. */
    bool hidden_as_procs;
    /* An agent whose GPU list changes in a later sample is an error (GS_EIO "agent: the GPUs
     * it shows changed"): query, whose -i selection was resolved on the first sample. */
    bool fixed_gpus;
    /* NVML: the sampler's options (NULL: read everything) and the process capacity of the
     * snapshot it fills (0: 64). */
    const struct gs_sampler_opts *sampler;
    unsigned max_procs;
    /* An agent over HTTP(S) (http.h's host forms) instead of the local decision; http may be
     * NULL. */
    const char *host;
    const struct gs_http_opts *http;
};

/* After a failure to open NVML (rc GS_ENOLIB or GS_ENODRIVER; nothing for other codes): one
 * line on stderr, "PROG: hint: ...", naming the caller's running `gpuscope demo` (its
 * demo-agent.sock in the user's runtime dir, base/userdir.h, answering) and how to read it, or
 * else `gpuscope demo` itself. smi_mode: the caller is an nvidia-smi mode (the table, -L, -q,
 * dmon, pmon), which reads NVML only, so the line points at `gpuscope` instead. The demo is never
 * read without being asked (docs/agent.md). */
void gs_source_hint_no_driver(int rc, const char *prog, bool smi_mode);

/* Opens the source o picks (see above); NULL o is GS_SOURCE_AUTO with no option set. Errors:
 * the sampler's (NVML), GS_EIO (GS_SOURCE_AGENT: no socket or no answer; the message says
 * which), http.h's (a host). An HTTP source makes no request here. On failure *out is
 * untouched. */
int gs_source_open(struct gs_source **out, const struct gs_source_opts *o, struct gs_err *err);

/* One sample into the source's snapshot: a sampling cycle with want (GS_WANT_*) for NVML, the
 * agent's /api/v1/snapshot otherwise (want unused: an agent reads what it reads). The first
 * call after the local agent was picked returns the answer gs_source_open got. On failure the
 * snapshot keeps the last good agent answer (NVML may have filled part of it). */
int gs_source_sample(struct gs_source *s, unsigned want, struct gs_err *err);

/* The snapshot the last sample filled, owned by the source: valid until the next
 * gs_source_sample (an agent's answer replaces it) or gs_source_close. NVML: allocated for
 * every GPU at open, empty before the first sample. HTTP: NULL before the first good sample. */
struct gs_snapshot *gs_source_snapshot(const struct gs_source *s);

enum gs_source_kind gs_source_kind(const struct gs_source *s);

/* The number of GPUs: NVML's at open, else the last answer's (0 before one). */
unsigned gs_source_gpu_count(const struct gs_source *s);

/* The topology of GPUs 0..n-1, those marked in sel (all when NULL), the parts in what (enum
 * gs_topo_read) (gs_sampler_topology: each GPU's NVLinks read once), read now; NVML only:
 * GS_ENOTSUP from an agent. */
int gs_source_topology(struct gs_source *s, const unsigned char *sel, unsigned what,
                       struct gs_topo *t, unsigned n, struct gs_err *err);

/* The agent's socket path or base URL; "" for NVML. */
const char *gs_source_where(const struct gs_source *s);

/* GET an agent's API path (history, runs): GS_OK with the body (malloc'ed, NUL-terminated)
 * and its length, or the transport's error; GS_ENOTSUP for NVML. */
int gs_source_get(struct gs_source *s, const char *path, char **body, size_t *len,
                  struct gs_err *err);

/* NULL is allowed. */
void gs_source_close(struct gs_source *s);

#endif
