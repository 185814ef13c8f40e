/*
 * A front end's source of snapshots and the one decision between the local agent and NVML
 * (source.h).
 */
#include "client/source.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/userdir.h"
#include "client/agent_client.h"
#include "client/http.h"
#include "core/snapjson.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_sampler.h"

#define DEFAULT_MAX_PROCS 64

struct gs_source {
    enum gs_source_kind kind;
    struct gs_source_opts o;
    char where[256]; /* the socket or the base URL */
    char host[128];  /* HTTP: the host as given, in messages */
    struct gs_sampler *sampler;
    struct gs_http *http;
    struct gs_snapshot *snap;
    int pending; /* snap holds the agent's answer to open's probe, not yet sampled */
};

/* The agent's snapshot over the unix socket or HTTP, decoded. */
static int fetch(struct gs_source *s, struct gs_snapshot **out, struct gs_err *err)
{
    json_t *doc;
    json_error_t je;
    char *body = NULL;
    size_t len = 0;
    int rc;

    if (s->kind == GS_SOURCE_KIND_AGENT)
        return gs_agent_client_snapshot(s->where, s->o.hidden_as_procs, out, err);
    rc = gs_http_get(s->http, "/api/v1/snapshot", &body, &len, err);
    if (rc != GS_OK)
        return rc;
    doc = json_loadb(body, len, 0, &je);
    free(body);
    if (!doc)
        return gs_err_set(err, GS_EPARSE, "%s: /api/v1/snapshot: offset %d: %s", s->host,
                          je.position, je.text);
    rc = gs_snapjson_decode(doc, s->o.hidden_as_procs, out, err);
    json_decref(doc);
    if (rc == GS_OK)
        snprintf((*out)->sys.source, sizeof(*out)->sys.source, "agent:%.100s", s->where);
    return rc;
}

static int fetch_into(struct gs_source *s, struct gs_err *err)
{
    struct gs_snapshot *snap = NULL;
    int rc = fetch(s, &snap, err);

    if (rc != GS_OK)
        return rc;
    if (s->o.fixed_gpus && s->snap && snap->n_gpus != s->snap->n_gpus) {
        gs_snapshot_free(snap);
        return gs_err_set(err, GS_EIO, "agent: the GPUs it shows changed");
    }
    gs_snapshot_free(s->snap);
    s->snap = snap;
    return GS_OK;
}

/* The local agent, when the rule allows one and it answers: 1 when picked (its answer is the
 * first sample), 0 for NVML, or an error (GS_SOURCE_AGENT only). */
static int try_agent(struct gs_source *s, struct gs_err *err)
{
    struct gs_err e;
    char sock[108];

    if (s->o.pick == GS_SOURCE_NVML)
        return 0;
    if (s->o.pick == GS_SOURCE_AUTO && s->o.nvml_env_picks_nvml &&
        getenv("GPUSCOPE_NVML_LIBRARY") && !getenv("GPUSCOPE_HTTP_SOCKET"))
        return 0;
    if (!gs_agent_client_socket(sock, sizeof sock)) {
        if (s->o.pick == GS_SOURCE_AGENT)
            return gs_err_set(err, GS_EIO,
                              "agent: no socket to try (GPUSCOPE_HTTP_SOCKET, "
                              "/run/gpuscope/agent.sock, $XDG_RUNTIME_DIR)");
        return 0;
    }
    s->kind = GS_SOURCE_KIND_AGENT;
    snprintf(s->where, sizeof s->where, "%s", sock);
    gs_err_clear(&e);
    if (fetch_into(s, &e) == GS_OK) {
        s->pending = 1;
        return 1;
    }
    s->kind = GS_SOURCE_KIND_NVML;
    s->where[0] = '\0';
    if (s->o.pick == GS_SOURCE_AGENT)
        return gs_err_set(err, GS_EIO, "%s", e.msg);
    return 0; /* no agent answers: NVML */
}

static int open_nvml(struct gs_source *s, struct gs_err *err)
{
    int rc = gs_sampler_open(&s->sampler, s->o.sampler, err);

    if (rc != GS_OK)
        return rc;
    /* its first cycle skips the clear: the snapshot is zero from the allocation */
    return gs_sampler_snapshot_new(s->sampler, s->o.max_procs ? s->o.max_procs : DEFAULT_MAX_PROCS,
                                   &s->snap, err);
}

int gs_source_open(struct gs_source **out, const struct gs_source_opts *o, struct gs_err *err)
{
    static const struct gs_source_opts auto_opts = {.pick = GS_SOURCE_AUTO};
    struct gs_source *s = calloc(1, sizeof *s);
    int rc;

    if (!s)
        return gs_err_set(err, GS_ENOMEM, "source: out of memory");
    s->o = o ? *o : auto_opts;
    if (o && o->host) {
        s->kind = GS_SOURCE_KIND_HTTP;
        snprintf(s->host, sizeof s->host, "%s", o->host);
        rc = gs_http_open(&s->http, o->host, o->http, err);
        if (rc == GS_OK)
            snprintf(s->where, sizeof s->where, "%s", gs_http_url(s->http));
    } else {
        s->kind = GS_SOURCE_KIND_NVML;
        rc = try_agent(s, err);
        if (rc == 0)
            rc = open_nvml(s, err);
        else if (rc == 1)
            rc = GS_OK;
    }
    if (rc != GS_OK) {
        gs_source_close(s);
        return rc;
    }
    /* what only open reads is the caller's: not kept */
    s->o.sampler = NULL;
    s->o.host = NULL;
    s->o.http = NULL;
    *out = s;
    return GS_OK;
}

int gs_source_sample(struct gs_source *s, unsigned want, struct gs_err *err)
{
    if (s->kind == GS_SOURCE_KIND_NVML)
        return gs_sampler_sample(s->sampler, s->snap, want, err);
    if (s->pending) {
        s->pending = 0;
        return GS_OK;
    }
    return fetch_into(s, err);
}

struct gs_snapshot *gs_source_snapshot(const struct gs_source *s)
{
    return s->snap;
}

enum gs_source_kind gs_source_kind(const struct gs_source *s)
{
    return s->kind;
}

unsigned gs_source_gpu_count(const struct gs_source *s)
{
    if (s->kind == GS_SOURCE_KIND_NVML)
        return gs_sampler_gpu_count(s->sampler);
    return s->snap ? s->snap->n_gpus : 0;
}

int gs_source_topology(struct gs_source *s, const unsigned char *sel, unsigned what,
                       struct gs_topo *t, unsigned n, struct gs_err *err)
{
    if (s->kind != GS_SOURCE_KIND_NVML)
        return gs_err_set(err, GS_ENOTSUP, "the agent does not serve the GPU topology");
    return gs_sampler_topology(s->sampler, sel, what, t, n, err);
}

const char *gs_source_where(const struct gs_source *s)
{
    return s->where;
}

int gs_source_get(struct gs_source *s, const char *path, char **body, size_t *len,
                  struct gs_err *err)
{
    switch (s->kind) {
    case GS_SOURCE_KIND_AGENT:
        return gs_agent_client_get(s->where, path, GS_AGENT_CLIENT_TIMEOUT_MS, body, len, err);
    case GS_SOURCE_KIND_HTTP:
        return gs_http_get(s->http, path, body, len, err);
    case GS_SOURCE_KIND_NVML:
        break;
    }
    return gs_err_set(err, GS_ENOTSUP, "%s: no agent API over NVML", path);
}

void gs_source_close(struct gs_source *s)
{
    if (!s)
        return;
    gs_snapshot_free(s->snap);
    gs_sampler_close(s->sampler);
    gs_http_close(s->http);
    free(s);
}

/* Whether a unix stream socket at path accepts a connection. */
void gs_source_hint_no_driver(int rc, const char *prog, bool smi_mode)
{
    char demo[256];

    if (rc != GS_ENOLIB && rc != GS_ENODRIVER)
        return;
    if (gs_user_runtime_path(demo, sizeof demo, "demo-agent.sock") == 0 &&
        gs_unix_socket_answers(demo, SOCK_STREAM))
        fprintf(stderr,
                "%s: hint: no NVIDIA driver here, but your gpuscope demo is running; its "
                "simulated GPUs: GPUSCOPE_HTTP_SOCKET=%s %s%s\n",
                prog, demo, smi_mode ? "gpuscope" : prog,
                smi_mode ? " (the nvidia-smi modes read the driver only)" : "");
    else
        fprintf(stderr,
                "%s: hint: no NVIDIA driver here; `gpuscope demo` runs the agent and its "
                "dashboard on simulated GPUs\n",
                prog);
}
