/*
 * The daemon's insides, shared by the files that make it up (agent.h is what the rest of the
 * program sees):
 *
 *   agent.c     life cycle: start-up in order, signals, SIGHUP's reload, shutdown
 *   sampling.c  the sampling thread: one cycle per tick, the sampler's down/up backoff
 *   pub.c       publications: the refcounted per-cycle bodies every request is served from
 *   http.c      libmicrohttpd: the daemons, the routing table, one way to send an answer
 *   listen.c    the TCP door's address, exposure rule and TLS pair
 *   ratelimit.c the per-client token buckets; reaper.c the slow-client reaper
 *
 * Threads and what they own are described in agent.c.
 */
#ifndef GS_AGENT_INT_H
#define GS_AGENT_INT_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "agent/agent.h"
#include "agent/metrics.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"

struct gs_agent;
struct gs_ticker;
struct gs_usage;
struct MHD_Daemon;

/* What a publication serves: /metrics, /api/v1/snapshot, /api/v1/processes, /api/v1/alerts. */
enum gs_pub_body { GS_PUB_METRICS, GS_PUB_SNAPSHOT, GS_PUB_PROCESSES, GS_PUB_ALERTS };

/* One cycle's answers: immutable from publication until its last reference goes. */
struct gs_pub {
    struct gs_agent *agent;
    int refs; /* under agent->lock */
    struct gs_pub *next_spare;
    int up;
    struct gs_snapshot *snap; /* valid when up */
    /* /metrics body: the snapshot's series (gs_metrics_render of snap, self, mflags), the
     * live runs' and the usage accounting's are rendered by the first request that asks
     * (under json_lock, prom_ready; pub.c render_prom), since a scraper comes every 5-60 s
     * and the cycle every second; prom_tail is what follows them (refusals, push, webhook,
     * the alert rules' states), rendered every cycle with the cycle's figures. With a push
     * sink, which takes the text every cycle, the whole body is rendered in the cycle. */
    struct gs_buf prom;
    struct gs_buf prom_tail;
    int prom_ready; /* under json_lock once published */
    /* /api/v1/snapshot and /api/v1/processes bodies (jansson's malloc): rendered by the first
     * request that asks for them (gs_pub_body), not every cycle: most agents are only scraped
     * for /metrics, and the JSON is most of a cycle's instructions. */
    pthread_mutex_t json_lock;
    int json_ready; /* under json_lock */
    char *json;
    size_t json_len;
    char *procs_json;
    size_t procs_json_len;
    char reason[GS_ERR_MSG_LEN]; /* why the agent was down at this cycle ("" when up) */
    struct gs_alert_list alerts; /* the alerts of this cycle (filtered viewers' documents) */
    int alerts_listed;           /* alerts holds this cycle's list (alert rules are on) */
    /* /api/v1/alerts body, every alert (jansson's malloc): made by the first request that asks
     * (under json_lock), so a cycle allocates nothing for it */
    int alerts_ready;
    char *alerts_json;
    size_t alerts_json_len;
    struct gs_metrics_self self; /* what /metrics was rendered with: for viewers' copies */
    unsigned mflags;
};

/* What the HTTP doors refuse besides connections (reaper.h): gpuscope_refused_total's
 * reasons "rate" (http_rate, 429), "history_busy" (the history worker's queue full, 503) and
 * "host" (a Host header not of this agent, 421: listen.h). */
enum gs_http_refusal {
    GS_HTTP_REF_RATE = 0,
    GS_HTTP_REF_HISTORY_BUSY,
    GS_HTTP_REF_HOST,
    GS_HTTP_REF_N
};

struct gs_agent {
    pthread_mutex_t lock; /* guards cfg, current, spare, n_spare and every refs */
    struct gs_agent_config cfg;
    struct gs_pub *current;
    struct gs_pub *spare;
    unsigned n_spare;

    /* The sampling thread (a ticker on cfg.interval) and its own state. */
    struct gs_ticker *ticker;
    struct gs_sampler *sampler;
    uint64_t n_since_open; /* cycles since the sampler opened: the cadence counter */
    uint64_t cycles, overruns, sample_errors;
    double last_sample_s;
    double backoff_s;
    int64_t retry_at;
    int down_logged;
    char reason[GS_ERR_MSG_LEN];
    char hostname[256]; /* gethostname at start: the hostname label of the self series */
    int reason_rc;      /* the enum gs_rc of reason (gpuscope_down_reason's bounded label) */

    struct MHD_Daemon *mhd;
    struct sockaddr_storage http_addr; /* the listen address, parsed */
    struct gs_auth *auth;              /* under lock; each request holds a reference */
    char *tls_cert_pem, *tls_key_pem;  /* the running daemon's pair (main thread); NULL: http */
    char tls_prio[96];                 /* its GnuTLS priorities (listen.h, GS_LISTEN_PRIO_LEN) */
    struct gs_ratelimit *rl;           /* every daemon's (ratelimit.h: its own lock) */
    struct gs_reaper *reaper;          /* every daemon's connections (reaper.h: its own lock) */
    struct gs_recorder *rec;           /* NULL when history = off */
    struct gs_worker *history_q;       /* /api/v1/history's worker (http.c); NULL: history off */
    struct gs_runs *runs;              /* the step-record socket (runs.h); NULL when socket = off */
    char runs_off[320];                /* why runs is NULL, as /api/v1/runs's 404 says it */
    struct gs_policy *policy;          /* the visibility policy (policy.h) */
    struct gs_usage *usage;            /* GPU usage accounting (usage.h); its own lock */
    struct MHD_Daemon *mhd_unix;       /* http_socket for local viewers; NULL when off */
    struct gs_push *push;              /* NULL when no push sink is configured */
    struct gs_webhook *webhook;        /* NULL without alert_webhook (webhook.h) */
    struct gs_alerts *alerts;          /* the sampling thread's own (alerts.h) */
    /* SIGHUP's new sinks (agent.c opens them; NULL new: removed), swapped in by the sampling
     * thread at its next cycle; the ones replaced wait in *_old for the main thread, since
     * closing joins a sender that may be inside a 5 s request. Under lock. */
    struct gs_push *push_new, *push_old;
    struct gs_webhook *webhook_new, *webhook_old;
    int push_swap, webhook_swap;
    int data_dir_from_caller; /* gs_agent_run_opts.data_dir overrides the configured one */
    int http_fd;              /* the TCP port bound before a drop (privdrop.h); -1: none */
    /* HTTP refusals for gpuscope_refused_total (http.c), [0] TCP, [1] the unix socket. */
    _Atomic uint64_t refused_http[2][GS_HTTP_REF_N];
    /* The rate keys (a uid mapped into 100::/64, or an address) and reasons (the 17th byte,
     * enum gs_http_refusal) whose refusal http.c logged; a full list forgets the oldest. */
    pthread_mutex_t rate_logged_lock;
    unsigned char rate_logged[64][17];
    unsigned n_rate_logged;
};

/* ---- pub.c ---- */

/* The current publication with one more reference, or NULL before the first cycle. */
struct gs_pub *gs_pub_acquire(struct gs_agent *a);
/* Drops a reference; the last one returns p to the spare list (or frees it). Call without
 * a->lock. */
void gs_pub_release(struct gs_pub *p);
/* gs_pub_release with a void pointer: libmicrohttpd's and the workers' free callback. */
void gs_pub_release_cb(void *cls);
/* One more reference, for a worker that keeps p beyond the request or cycle. */
void gs_pub_ref(struct gs_pub *p);
/* A spare publication to fill (reused, or new); NULL when out of memory. */
struct gs_pub *gs_pub_take_spare(struct gs_agent *a);
/* Makes p the current publication; the agent holds one reference to it. */
void gs_pub_publish(struct gs_agent *a, struct gs_pub *p);
/* Frees p (no references left); NULL is allowed. */
void gs_pub_free(struct gs_pub *p);
/* Renders the /metrics text and the alerts document of an unpublished p (p->up and p->snap
 * set) and forgets its JSON bodies, which gs_pub_body makes on demand. */
void gs_pub_render(struct gs_agent *a, struct gs_pub *p, const struct gs_agent_config *cfg);
/* The body which of a published p (made once, by the first request that asks), and its length;
 * NULL when it could not be rendered. */
const char *gs_pub_body(struct gs_pub *p, enum gs_pub_body which, size_t *len);
/* doc dumped compact with 15 significant digits, doc's reference dropped; NULL when doc is
 * NULL or out of memory. */
char *gs_pub_dump(json_t *doc, size_t *len);

/* ---- sampling.c ---- */

/* One sampling cycle: sample (or publish "down"), evaluate alerts, render, publish, hand the
 * snapshot to the recorder, the runs and the pusher. The sampling thread's (and, once before
 * it starts, the main thread's). */
void gs_agent_cycle(struct gs_agent *a, const struct gs_agent_config *cfg);
/* The sampling thread's tick (base/ticker.h, arg the agent): counts an overrun when ticks
 * were skipped, then runs gs_agent_cycle with the current configuration. */
void gs_agent_sampling_tick(void *arg, uint64_t missed);

/* ---- http.c ---- */

/* Starts the TCP daemon on cfg.listen (a->http_fd when privdrop bound it), with the
 * credentials and the TLS pair the configuration names, after the exposure rule. */
int gs_agent_http_start(struct gs_agent *a, struct gs_err *err);
/* Starts the unix socket daemon for local viewers (http_socket); failures are logged. */
void gs_agent_http_start_unix(struct gs_agent *a);
/* SIGHUP: new credentials and, when the PEM pair changed, a new TCP daemon on the same socket.
 * Anything wrong keeps what runs and puts its settings back into c. Main thread. */
void gs_agent_http_reload(struct gs_agent *a, struct gs_agent_config *c);
/* Stops both daemons (every response drops its publication reference) and forgets the
 * credentials and TLS pair. */
void gs_agent_http_stop(struct gs_agent *a);

#endif
