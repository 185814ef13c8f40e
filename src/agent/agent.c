/*
 * The agent daemon (agent.h), its life cycle; the rest of it is listed in agent_int.h. Threads:
 *
 * - the sampling thread (sampling.c) owns the sampler and makes one publication per period
 *   (pub.c); it never waits for a reader, the disk or the network.
 * - libmicrohttpd's threads (http.c), one per daemon (TCP, the unix socket, and for a moment
 *   two TCP ones during a TLS reload), serve requests from the current publication; what they
 *   share (rate limiter, reaper, auth, policy) has its own lock.
 * - the history writer (recorder.c), the pusher (push.c) and the webhook sender (webhook.c)
 *   each take references or transitions from a bounded queue the sampling thread fills; what
 *   does not fit is dropped and counted.
 * - the calling thread blocks SIGINT/SIGTERM/SIGHUP before the others start (they inherit the
 *   mask) and takes them with sigtimedwait: no async-signal-safety puzzles. SIGHUP rebuilds the
 *   configuration and applies what may change without a restart (reload below); once a second
 *   it also shuts down HTTP connections whose request head is late (reaper.c) and closes the
 *   sinks a reload retired.
 */
#include "agent/agent_int.h"

#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/alerts.h"
#include "agent/auth.h"
#include "agent/listen.h"
#include "agent/log.h"
#include "agent/policy.h"
#include "agent/privdrop.h"
#include "agent/push.h"
#include "agent/ratelimit.h"
#include "agent/reaper.h"
#include "agent/recorder.h"
#include "agent/runs.h"
#include "agent/usage.h"
#include "agent/webhook.h"
#include "base/clock.h"
#include "base/ticker.h"
#include "gpuscope/gs_sampler.h"

#define HTTP_REQUEST_S 10 /* a request's head must be complete within this (slow clients) */

static void policy_settings(const struct gs_agent_config *c, struct gs_policy_settings *s)
{
    memset(s, 0, sizeof *s);
    s->process_visibility = c->process_visibility;
    s->gpu_visibility = c->gpu_visibility;
    snprintf(s->admin_group, sizeof s->admin_group, "%s", c->admin_group);
}

/* Shuts down HTTP connections whose request head is late (reaper.h). Once a second, from the
 * main thread. */
static void reap_slow(struct gs_agent *a)
{
    unsigned n = gs_reaper_reap(a->reaper, gs_clock_mono_ns());

    if (n)
        gs_log(GS_LOG_DEBUG, "http: closed %u connection(s) slower than %d s", n, HTTP_REQUEST_S);
}

/* ---- signals and the life cycle ---- */

/* Closes the sinks the sampling thread swapped out (main thread: may wait for a request);
 * cancel also closes new ones it has not taken yet (a newer SIGHUP replaces them). */
static void close_retired(struct gs_agent *a, int cancel)
{
    struct gs_push *p, *pn = NULL;
    struct gs_webhook *w, *wn = NULL;

    pthread_mutex_lock(&a->lock);
    p = a->push_old;
    w = a->webhook_old;
    a->push_old = NULL;
    a->webhook_old = NULL;
    if (cancel) {
        pn = a->push_new;
        wn = a->webhook_new;
        a->push_new = NULL;
        a->webhook_new = NULL;
        a->push_swap = a->webhook_swap = 0;
    }
    pthread_mutex_unlock(&a->lock);
    gs_push_close(p);
    gs_push_close(pn);
    gs_webhook_close(w);
    gs_webhook_close(wn);
}

/* Opens what a SIGHUP's push settings and alert_webhook ask for and queues it for the sampling
 * thread to swap in (sampling.c). On failure (bad token file, libcurl missing, ...) the running
 * sinks stay and c gets their settings back. */
static void reload_sinks(struct gs_agent *a, struct gs_agent_config *c)
{
    char host[256] = "";
    struct gs_push *p = NULL;
    struct gs_webhook *w = NULL;
    int push_changed = memcmp(&c->push, &a->cfg.push, sizeof c->push) != 0;
    int hook_changed = strcmp(c->alerts.webhook, a->cfg.alerts.webhook) != 0;
    struct gs_err e;

    if (!push_changed && !hook_changed)
        return;
    close_retired(a, 1);
    if (gethostname(host, sizeof host - 1) != 0)
        host[0] = '\0';
    gs_err_clear(&e);
    if (push_changed && gs_push_enabled(&c->push) &&
        (gs_push_open(&p, &c->push, host, &e) != GS_OK || gs_push_start(p, &e) != GS_OK)) {
        gs_log(GS_LOG_ERROR, "reload: %s; keeping the running push settings", e.msg);
        gs_push_close(p);
        p = NULL;
        c->push = a->cfg.push;
        push_changed = 0;
    }
    if (hook_changed && c->alerts.webhook[0] &&
        (gs_webhook_open(&w, c->alerts.webhook, host, a->cfg.listen, &e) != GS_OK ||
         gs_webhook_start(w, &e) != GS_OK)) {
        gs_log(GS_LOG_ERROR, "reload: %s; keeping the running alert_webhook", e.msg);
        gs_webhook_close(w);
        w = NULL;
        snprintf(c->alerts.webhook, sizeof c->alerts.webhook, "%s", a->cfg.alerts.webhook);
        hook_changed = 0;
    }
    pthread_mutex_lock(&a->lock);
    if (push_changed) {
        a->push_new = p;
        a->push_swap = 1;
    }
    if (hook_changed) {
        a->webhook_new = w;
        a->webhook_swap = 1;
    }
    pthread_mutex_unlock(&a->lock);
    if (push_changed)
        gs_log(GS_LOG_INFO, "reload: push settings applied (influxdb %s, pushgateway %s)",
               c->push.influx_url[0] ? c->push.influx_url : "off",
               c->push.pushgateway_url[0] ? c->push.pushgateway_url : "off");
    if (hook_changed)
        gs_log(GS_LOG_INFO, "reload: alert_webhook %s",
               c->alerts.webhook[0] ? c->alerts.webhook : "off");
}

static void reload(struct gs_agent *a, const struct gs_agent_args *args, int argc, char **argv)
{
    struct gs_policy_settings ps;
    struct gs_agent_config c;
    struct gs_err e;

    gs_err_clear(&e);
    if (gs_config_build(&c, args, argc, argv, &e) != GS_OK) {
        gs_log(GS_LOG_ERROR, "reload: %s; keeping the running configuration", e.msg);
        return;
    }
    reload_sinks(a, &c);         /* a->cfg is the main thread's to write: read without the lock */
    gs_agent_http_reload(a, &c); /* credentials and TLS pair; the listen address stays */
    pthread_mutex_lock(&a->lock);
    gs_config_keep_restart_keys(&c, &a->cfg, a->data_dir_from_caller ? "data_dir" : NULL);
    a->cfg = c;
    policy_settings(&c, &ps);
    gs_policy_set(a->policy, &ps);
    pthread_mutex_unlock(&a->lock);
    /* A new interval from the boundary after the one waited for (ticker.h). */
    gs_ticker_set_period(a->ticker, (int64_t)llround(c.interval_s * 1e9));
    gs_log_set_level((enum gs_log_level)c.log_level);
    if (a->rec) {
        gs_recorder_set_policy(a->rec, c.flush_interval_s, c.retention_raw_s, c.retention_rollup_s);
        gs_recorder_set_runs_retention(a->rec, c.retention_runs_s);
        gs_recorder_set_steps_per_run(a->rec, c.steps_per_run, c.steps_per_uid);
        gs_recorder_set_ended_caps(a->rec, c.ended_rows_per_uid,
                                   (uint64_t)c.ended_mib_per_uid << 20);
        gs_recorder_set_check_interval(a->rec, c.integrity_check_s);
    }
    gs_log(GS_LOG_INFO, "reload: interval %gs, metrics_compat %s, log_level %s", c.interval_s,
           c.metrics_compat == GS_COMPAT_DCGM3  ? "dcgm3"
           : c.metrics_compat == GS_COMPAT_DCGM ? "dcgm"
                                                : "none",
           gs_log_level_name((enum gs_log_level)c.log_level));
}

static int init_agent(struct gs_agent *a, const struct gs_agent_config *cfg, struct gs_err *err)
{
    int rc;

    memset(a, 0, sizeof *a);
    a->cfg = *cfg;
    if (gethostname(a->hostname, sizeof a->hostname - 1) != 0)
        a->hostname[0] = '\0';
    a->last_sample_s = -1;
    if (pthread_mutex_init(&a->lock, NULL) != 0)
        return gs_err_set(err, GS_ENOMEM, "agent: pthread_mutex_init failed");
    if (pthread_mutex_init(&a->rate_logged_lock, NULL) != 0) {
        pthread_mutex_destroy(&a->lock);
        return gs_err_set(err, GS_ENOMEM, "agent: pthread_mutex_init failed");
    }
    rc = gs_ratelimit_new(&a->rl, err);
    if (rc == GS_OK)
        rc = gs_reaper_new(&a->reaper, HTTP_REQUEST_S, err);
    if (rc != GS_OK) {
        gs_ratelimit_free(a->rl);
        pthread_mutex_destroy(&a->rate_logged_lock);
        pthread_mutex_destroy(&a->lock);
    }
    return rc;
}

/* Opens the history (a foreign or corrupt history.db stops the start: fatal, never
 * overwritten) and starts its writer. */
static int start_history(struct gs_agent *a, struct gs_err *err)
{
    const struct gs_agent_config *c = &a->cfg;
    int rc;

    if (!c->history) {
        gs_log(GS_LOG_INFO, "history: off");
        return GS_OK;
    }
    rc = gs_recorder_open(&a->rec, c->data_dir, err);
    if (rc != GS_OK)
        return rc;
    gs_recorder_set_policy(a->rec, c->flush_interval_s, c->retention_raw_s, c->retention_rollup_s);
    gs_recorder_set_runs_retention(a->rec, c->retention_runs_s);
    gs_recorder_set_steps_per_run(a->rec, c->steps_per_run, c->steps_per_uid);
    gs_recorder_set_ended_caps(a->rec, c->ended_rows_per_uid, (uint64_t)c->ended_mib_per_uid << 20);
    gs_recorder_set_check_interval(a->rec, c->integrity_check_s);
    rc = gs_recorder_start(a->rec, err);
    if (rc != GS_OK)
        return rc;
    gs_log(GS_LOG_INFO, "history: data dir %s, flush every %gs, raw kept %.15gs, rollups %.15gs",
           c->data_dir, c->flush_interval_s, c->retention_raw_s, c->retention_rollup_s);
    return GS_OK;
}

/* Opens the step-record socket (runs.h) unless socket = off. A socket that cannot be bound
 * (another agent on it, no permission) is logged and the agent goes on without it: metrics
 * and history matter more than runs. */
static void start_runs(struct gs_agent *a)
{
    char host[256] = "", db[GS_DATA_DIR_LEN + 16];
    struct gs_runs_opts o = {.socket_path = a->cfg.socket,
                             .rec = a->rec,
                             .hostname = host,
                             .runs_per_uid = a->cfg.runs_per_uid,
                             .resume_timeout_s = a->cfg.runs_resume_timeout_s,
                             .grafana_url = a->cfg.grafana_url,
                             .conn_per_uid = a->cfg.steps_conn_per_uid,
                             .rate_per_uid = a->cfg.steps_rate_per_uid,
                             .burst_per_uid = a->cfg.steps_burst_per_uid};
    struct gs_err e;

    if (!a->cfg.socket[0] || strcmp(a->cfg.socket, "off") == 0) {
        gs_log(GS_LOG_INFO, "runs: socket off");
        snprintf(a->runs_off, sizeof a->runs_off,
                 "runs are off on this agent (socket = off): it keeps no training runs");
        return;
    }
    if (gethostname(host, sizeof host - 1) != 0)
        host[0] = '\0';
    snprintf(db, sizeof db, "%s/history.db", a->cfg.data_dir);
    o.history_path = a->rec ? db : NULL;
    gs_err_clear(&e);
    if (gs_runs_open(&a->runs, &o, &e) != GS_OK) {
        gs_log(GS_LOG_ERROR, "runs: %s; going on without the step-record socket", e.msg);
        snprintf(a->runs_off, sizeof a->runs_off,
                 "runs are unavailable: the step-record socket could not be opened (%.200s)",
                 e.msg);
        a->runs = NULL;
        return;
    }
    gs_log(GS_LOG_INFO, "runs: step records on %s%s", a->cfg.socket,
           a->rec ? "" : " (history off: runs are not kept once they end)");
}

/* Opens the push sinks when any is configured (a bad token file stops the start). */
static int start_push(struct gs_agent *a, struct gs_err *err)
{
    char host[256] = "";
    int rc;

    if (!gs_push_enabled(&a->cfg.push))
        return GS_OK;
    if (gethostname(host, sizeof host - 1) != 0)
        host[0] = '\0';
    rc = gs_push_open(&a->push, &a->cfg.push, host, err);
    if (rc == GS_OK)
        rc = gs_push_start(a->push, err);
    return rc;
}

/* Starts the alert webhook sender when alert_webhook is set, and hands it the transitions. */
static int start_webhook(struct gs_agent *a, struct gs_err *err)
{
    char host[256] = "";
    int rc;

    if (!a->cfg.alerts.webhook[0])
        return GS_OK;
    if (gethostname(host, sizeof host - 1) != 0)
        host[0] = '\0';
    rc = gs_webhook_open(&a->webhook, a->cfg.alerts.webhook, host, a->cfg.listen, err);
    if (rc == GS_OK)
        rc = gs_webhook_start(a->webhook, err);
    if (rc == GS_OK)
        gs_alerts_set_notify(a->alerts, gs_webhook_notify, a->webhook);
    return rc;
}

/* The usage rows of each finished minute go to the history writer (when history is on). */
static void usage_emit(void *ctx, const struct gs_usage_row *rows, unsigned n)
{
    struct gs_agent *a = ctx;

    if (a->rec)
        gs_recorder_usage_add(a->rec, rows, n);
}

/* The gpuscope run a pid belongs to (runs.h), for the usage accounting's job id. */
static int usage_run_of(void *ctx, unsigned pid, char *out, size_t cap)
{
    struct gs_agent *a = ctx;

    return a->runs && gs_runs_of_pid(a->runs, pid, out, cap);
}

static int start_usage(struct gs_agent *a, struct gs_err *err)
{
    struct gs_usage_opts o = {
        .emit = usage_emit, .emit_ctx = a, .run_of = usage_run_of, .run_ctx = a, .read_env = 1};

    if (gs_usage_new(&a->usage, &o) != GS_OK)
        return gs_err_set(err, GS_ENOMEM, "agent: out of memory (usage accounting)");
    return GS_OK;
}

static void shutdown_agent(struct gs_agent *a)
{
    struct gs_pub *p;

    gs_ticker_stop(a->ticker); /* a cycle under way finishes first */
    a->ticker = NULL;
    gs_agent_http_stop(a);    /* every response's reference comes back */
    gs_usage_flush(a->usage); /* the current minute's rows, to the recorder before it closes */
    /* After the sampler (no more offers) and HTTP (no more queries): appends what is queued,
     * flushes, and gives the queued references back before the publications are freed. */
    gs_runs_close(a->runs); /* live runs end and are stored: before the recorder closes */
    a->runs = NULL;
    gs_recorder_close(a->rec);
    a->rec = NULL;
    gs_usage_free(a->usage);
    a->usage = NULL;
    gs_push_close(a->push); /* gives its queued references back, like the recorder */
    a->push = NULL;
    gs_webhook_close(a->webhook); /* after the sampler: no more transitions */
    a->webhook = NULL;
    close_retired(a, 1); /* a SIGHUP's sinks, swapped out or never taken */
    if (a->current)
        gs_pub_release(a->current);
    a->current = NULL;
    while ((p = a->spare) != NULL) {
        a->spare = p->next_spare;
        gs_pub_free(p);
    }
    gs_sampler_close(a->sampler);
    gs_alerts_free(a->alerts);
    gs_policy_free(a->policy);
    a->policy = NULL;
    a->alerts = NULL;
    gs_ratelimit_free(a->rl);
    gs_reaper_free(a->reaper);
    pthread_mutex_destroy(&a->rate_logged_lock);
    pthread_mutex_destroy(&a->lock);
}

/* The `user` key (privdrop.h): checks the data dir (always); started as root with a user,
 * also prepares the data and socket directories for it, binds the TCP port and drops root;
 * then a SIGHUP's defaults stay those of the start (args: the reload's). */
static int drop_privileges(struct gs_agent *a, struct gs_agent_args *args, struct gs_err *err)
{
    struct gs_privdrop pd;
    int rc = gs_privdrop_plan(&pd, a->cfg.user, err);

    if (rc == GS_OK && a->cfg.history)
        rc = gs_privdrop_data_dir(&pd, a->cfg.data_dir, err);
    if (rc != GS_OK || !pd.active)
        return rc;
    gs_privdrop_socket_dir(&pd, a->cfg.socket);
    gs_privdrop_socket_dir(&pd, a->cfg.http_socket);
    rc = gs_listen_parse(a->cfg.listen, &a->http_addr, err);
    if (rc == GS_OK)
        rc = gs_privdrop_listen_tcp(&a->http_addr, a->cfg.listen, &a->http_fd, err);
    if (rc == GS_OK)
        rc = gs_privdrop_apply(&pd, err);
    if (rc == GS_OK) { /* SIGHUP: the defaults of the start (root's), not the user's */
        args->pin_euid = 1;
        args->euid = 0;
    }
    return rc;
}

int gs_agent_run(const struct gs_agent_config *cfg, const struct gs_agent_args *args, int argc,
                 char **argv, const struct gs_agent_run_opts *opts, struct gs_err *err)
{
    struct gs_agent a;
    struct gs_agent_args rargs = *args; /* what a SIGHUP rebuilds the configuration from */
    sigset_t set, old;
    int rc;

    gs_log_set_level((enum gs_log_level)cfg->log_level);
    rc = init_agent(&a, cfg, err);
    if (rc != GS_OK)
        return rc;
    a.http_fd = -1;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, &old);
    signal(SIGPIPE, SIG_IGN);

    if (opts && opts->data_dir) {
        snprintf(a.cfg.data_dir, sizeof a.cfg.data_dir, "%s", opts->data_dir);
        a.data_dir_from_caller = 1;
    }
    rc = gs_alerts_new(&a.alerts, &a.cfg.alerts, err);
    if (rc == GS_OK) {
        struct gs_policy_settings ps;
        policy_settings(&a.cfg, &ps);
        rc = gs_policy_new(&a.policy, &ps, err);
    }
    if (rc == GS_OK)
        rc = drop_privileges(&a, &rargs, err); /* before the history, NVML and the unix sockets */
    if (rc == GS_OK)
        rc = start_history(&a, err);
    if (rc == GS_OK)
        start_runs(&a);
    if (rc == GS_OK)
        rc = start_usage(&a, err);
    if (rc == GS_OK)
        rc = start_push(&a, err);
    if (rc == GS_OK)
        rc = start_webhook(&a, err);
    if (rc == GS_OK) {
        gs_agent_cycle(&a, &a.cfg); /* the first publication exists before the port opens */
        rc = gs_agent_http_start(&a, err);
        if (rc == GS_OK)
            gs_agent_http_start_unix(&a);
    }
    if (rc == GS_OK) {
        /* The first cycle ran above: the thread's first tick is one interval on. */
        int64_t step = (int64_t)llround(a.cfg.interval_s * 1e9);
        if (gs_ticker_start(&a.ticker, step, gs_clock_mono_ns() + step, gs_agent_sampling_tick,
                            &a) != 0)
            rc = gs_err_set(err, GS_ENOMEM, "agent: cannot start the sampling thread");
    }
    if (rc == GS_OK) {
        gs_log(GS_LOG_INFO, "agent: started, interval %gs", cfg->interval_s);
        if (opts && opts->ready)
            opts->ready(opts->ctx, a.cfg.listen);
        for (;;) {
            struct timespec tick = {1, 0};
            int sig = sigtimedwait(&set, NULL, &tick);
            if (sig < 0) {
                reap_slow(&a); /* a second without a signal */
                close_retired(&a, 0);
                continue;
            }
            if (sig == SIGHUP) {
                reload(&a, &rargs, argc, argv);
            } else if (sig == SIGINT || sig == SIGTERM) {
                gs_log(GS_LOG_INFO, "agent: %s, shutting down",
                       sig == SIGINT ? "SIGINT" : "SIGTERM");
                break;
            }
        }
    }
    shutdown_agent(&a);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == GS_OK)
        gs_log(GS_LOG_INFO, "agent: stopped");
    return rc;
}
