/*
 * The sampling thread (agent_int.h). It owns the sampler. Each cycle it takes a spare
 * publication, samples into its snapshot (fields on a slower cadence carried forward), runs
 * the alert rules, renders and publishes it (pub.c), then hands one more reference each to the
 * history writer (recorder.c) and the pusher (push.c) through their bounded queues, and the
 * snapshot to the runs (runs.c): none of them is ever waited for. Its thread is a ticker
 * (base/ticker.h) on CLOCK_MONOTONIC boundaries; a cycle that overruns skips the missed
 * boundaries and is counted.
 * While the driver is missing it publishes "up 0, reason" and retries with a doubling backoff
 * (1 s .. 30 s).
 */
#include "agent/agent_int.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "agent/alerts.h"
#include "agent/log.h"
#include "agent/push.h"
#include "agent/recorder.h"
#include "agent/runs.h"
#include "agent/schedule.h"
#include "agent/usage.h"
#include "agent/webhook.h"
#include "base/clock.h"
#include "gpuscope/gs_sampler.h"

#define BACKOFF_MIN_S 1.0
#define BACKOFF_MAX_S 30.0

/* Fields read on a slower cadence keep their last value in the cycles between (the sampler
 * clears a snapshot each cycle), so a series does not flap between present and absent. */
static void carry_forward(const struct gs_snapshot *prev, struct gs_snapshot *cur, unsigned want)
{
    static const enum gs_metric pcie[] = {GS_M_PCIE_TX, GS_M_PCIE_RX};

    if (!prev || prev->n_gpus != cur->n_gpus)
        return;
    for (unsigned i = 0; i < cur->n_gpus; i++) {
        const struct gs_gpu *pg = &prev->gpus[i];
        struct gs_gpu *g = &cur->gpus[i];
        /* A lost GPU answers nothing more, but the Xid it fell off with (79) is what its
         * owner needs to see: the last one read stays. */
        if (g->lost && !gs_gpu_has(g, GS_M_XID_LAST) && gs_gpu_has(pg, GS_M_XID_LAST)) {
            g->st[GS_M_XID_LAST] = pg->st[GS_M_XID_LAST];
            g->v[GS_M_XID_LAST] = pg->v[GS_M_XID_LAST];
        }
        if (g->lost || pg->lost)
            continue;
        if (!(want & GS_WANT_PCIE_TPUT))
            for (size_t k = 0; k < 2; k++)
                if (g->st[pcie[k]] == GS_ST_NA) {
                    g->st[pcie[k]] = pg->st[pcie[k]];
                    g->v[pcie[k]] = pg->v[pcie[k]];
                }
        if (!(want & GS_WANT_HEALTH)) {
            for (int m = GS_M_ECC_CORR_VOL; m <= GS_M_XID_LAST; m++)
                if (g->st[m] == GS_ST_NA) {
                    g->st[m] = pg->st[m];
                    g->v[m] = pg->v[m];
                }
            memcpy(g->ecc_loc_st, pg->ecc_loc_st, sizeof g->ecc_loc_st);
            memcpy(g->ecc_loc, pg->ecc_loc, sizeof g->ecc_loc);
        }
        if (!(want & GS_WANT_MIG) && g->n_mig == 0) {
            g->n_mig = pg->n_mig;
            memcpy(g->mig, pg->mig, sizeof g->mig);
        }
        /* NVLink error counters are health readings too (the links' states are held by the
         * sampler itself, gs_gpu.nvlink_state_t saying when they were read) */
        if (!(want & GS_WANT_HEALTH) && g->n_nvlink == pg->n_nvlink) {
            for (int m = GS_M_NVLINK_REPLAY; m <= GS_M_NVLINK_CRC_DATA; m++)
                if (g->st[m] == GS_ST_NA) {
                    g->st[m] = pg->st[m];
                    g->v[m] = pg->v[m];
                }
            for (unsigned l = 0; l < g->n_nvlink && l < GS_NVLINK_MAX; l++)
                for (int e = 0; e < GS_NVL_ERR__COUNT; e++)
                    if (g->nvlink[l].err_st[e] == GS_ST_NA) {
                        g->nvlink[l].err_st[e] = pg->nvlink[l].err_st[e];
                        g->nvlink[l].err[e] = pg->nvlink[l].err[e];
                    }
        }
    }
}

static void go_down(struct gs_agent *a, const struct gs_err *e, int64_t now)
{
    snprintf(a->reason, sizeof a->reason, "%s", e->msg[0] ? e->msg : gs_strerror(e->rc));
    a->reason_rc = e->rc;
    if (!a->down_logged)
        gs_log(GS_LOG_WARN, "sampler: %s; serving gpuscope_up 0, retrying", a->reason);
    else
        gs_log(GS_LOG_DEBUG, "sampler: still down: %s", a->reason);
    a->down_logged = 1;
    gs_sampler_close(a->sampler);
    a->sampler = NULL;
    a->backoff_s = a->backoff_s <= 0 ? BACKOFF_MIN_S : fmin(a->backoff_s * 2, BACKOFF_MAX_S);
    a->retry_at = now + (int64_t)(a->backoff_s * GS_NS_PER_S);
}

/* Opens the sampler when the backoff allows; returns whether one is open. */
static int ensure_sampler(struct gs_agent *a, const struct gs_agent_config *cfg, int64_t now)
{
    struct gs_sampler_opts so = {.library = NULL};
    struct gs_err e;

    if (a->sampler)
        return 1;
    if (now < a->retry_at)
        return 0;
    gs_err_clear(&e);
    so.k8s_pods_dir = strcmp(cfg->kubernetes_pods_dir, "off") == 0 ? "" : cfg->kubernetes_pods_dir;
    /* A node without Kubernetes has no /var/log/pods: only a directory named on purpose that
     * cannot be read is worth a word (pod labels stay off until it can). */
    if (so.k8s_pods_dir[0] && strcmp(so.k8s_pods_dir, "/var/log/pods") != 0 &&
        access(so.k8s_pods_dir, R_OK | X_OK) != 0)
        gs_log(GS_LOG_WARN, "kubernetes_pods_dir %s: %s; no pod names until it can be read",
               so.k8s_pods_dir, strerror(errno));
    if (gs_sampler_open(&a->sampler, &so, &e) != GS_OK) {
        go_down(a, &e, now);
        return 0;
    }
    a->n_since_open = 0;
    a->backoff_s = 0;
    a->down_logged = 0;
    a->reason[0] = '\0';
    gs_log(GS_LOG_INFO, "sampler: driver up, %u GPU(s)", gs_sampler_gpu_count(a->sampler));
    return 1;
}

/* Whether a GPU of the previous cycle was in MIG mode with MIG devices: then MIG devices are
 * read every cycle, their memory and GPM being the only per-instance figures there are. */
static int any_mig(const struct gs_pub *prev)
{
    for (unsigned i = 0; prev && prev->up && prev->snap && i < prev->snap->n_gpus; i++)
        if (gs_gpu_mig_on(&prev->snap->gpus[i]) && prev->snap->gpus[i].n_mig > 0)
            return 1;
    return 0;
}

static int sample_into(struct gs_agent *a, struct gs_pub *p, const struct gs_pub *prev, int64_t now)
{
    unsigned n = gs_sampler_gpu_count(a->sampler);
    unsigned want = gs_agent_want(a->n_since_open) | gs_runs_want(a->runs);
    struct gs_err e;
    int64_t t0;

    gs_err_clear(&e);
    if (any_mig(prev))
        want |= GS_WANT_MIG;
    if (p->snap && p->snap->n_gpus != n) {
        gs_snapshot_free(p->snap);
        p->snap = NULL;
    }
    if (!p->snap && gs_snapshot_new(&p->snap, n, 64, &e) != GS_OK) {
        gs_log(GS_LOG_ERROR, "sampler: %s", e.msg);
        return 0;
    }
    t0 = gs_clock_mono_ns();
    if (gs_sampler_sample(a->sampler, p->snap, want, &e) != GS_OK) {
        go_down(a, &e, now);
        return 0;
    }
    a->last_sample_s = (double)(gs_clock_mono_ns() - t0) / 1e9;
    a->n_since_open++;
    carry_forward(prev && prev->up ? prev->snap : NULL, p->snap, want);
    return 1;
}

/* Takes the sinks a SIGHUP opened (agent.c); only the sampling thread uses a->push,
 * a->webhook and the alerts' notifier, so it alone swaps them. */
static void swap_sinks(struct gs_agent *a)
{
    pthread_mutex_lock(&a->lock);
    if (a->push_swap) {
        a->push_old = a->push;
        a->push = a->push_new;
        a->push_new = NULL;
        a->push_swap = 0;
    }
    if (a->webhook_swap) {
        a->webhook_old = a->webhook;
        a->webhook = a->webhook_new;
        a->webhook_new = NULL;
        a->webhook_swap = 0;
        gs_alerts_set_notify(a->alerts, a->webhook ? gs_webhook_notify : NULL, a->webhook);
    }
    pthread_mutex_unlock(&a->lock);
}

void gs_agent_cycle(struct gs_agent *a, const struct gs_agent_config *cfg)
{
    int64_t now = gs_clock_mono_ns();
    struct gs_pub *p = gs_pub_take_spare(a);
    struct gs_pub *prev = a->current; /* the sampler is its only writer: no lock to read */

    swap_sinks(a);
    if (!p) {
        gs_log(GS_LOG_ERROR, "sampler: out of memory; cycle skipped");
        return;
    }
    a->cycles++;
    p->up = ensure_sampler(a, cfg, now) && sample_into(a, p, prev, now);
    if (!p->up) /* every cycle without a reading counts, the ones in the retry backoff too */
        a->sample_errors++;
    if (!p->up)
        a->last_sample_s = -1;
    if (a->alerts) {
        /* A SIGHUP may have changed the rules: what they drop resolves now. */
        gs_alerts_configure(a->alerts, &cfg->alerts, p->up ? p->snap : NULL,
                            p->up ? p->snap->t_real : gs_clock_real_s());
        if (a->runs) { /* the ranks that stopped stepping (also the runs API's "stalled") */
            unsigned char stalled[256];
            unsigned no_gpu, n;
            double t = p->up ? p->snap->t_real : gs_clock_real_s();
            n = gs_runs_stalled(a->runs, t, cfg->alerts.hang_after, cfg->alerts.hang_min_s, stalled,
                                sizeof stalled, &no_gpu);
            if (cfg->alerts.enabled) {
                /* training_hang: by GPU, and at node level for the ranks on no GPU (a CPU
                 * job) or, without a GPU reading this cycle, for every stalled rank */
                gs_alerts_set_stalled(a->alerts, stalled, sizeof stalled);
                gs_alerts_set_stalled_node(a->alerts, p->up ? no_gpu : n);
                if (!p->up)
                    gs_alerts_eval_node_hang(a->alerts, t);
            }
        }
        if (cfg->alerts.enabled && p->up)
            gs_alerts_eval(a->alerts, p->snap, p->snap->t_real);
    }
    if (a->usage && p->up)
        gs_usage_cycle(a->usage, p->snap); /* before the render: /metrics has this cycle's */
    gs_pub_render(a, p, cfg);
    gs_pub_publish(a, p);
    if (a->rec && p->up) {
        /* One more reference, for the writer; it drops it once the snapshot is copied. */
        gs_pub_ref(p);
        if (!gs_recorder_offer(a->rec, p->snap, gs_pub_release_cb, p))
            gs_pub_release(p);
    }
    if (a->runs && p->up)
        gs_runs_snapshot(a->runs, p->snap); /* never waits (runs.h) */
    if (a->push && p->up) {
        /* And one for the pusher (push.c), dropped once its lines and text are taken. */
        gs_pub_ref(p);
        if (!gs_push_offer(a->push, p->snap, p->prom.data, p->prom.len, gs_pub_release_cb, p))
            gs_pub_release(p);
    }
}

void gs_agent_sampling_tick(void *arg, uint64_t missed)
{
    struct gs_agent *a = arg;
    struct gs_agent_config cfg;

    if (a->cycles <= 1) /* its first tick (cycle 1 ran on the main thread before it started) */
        pthread_setname_np(pthread_self(), "gs-sampler"); /* per-thread figures (top -H) */
    if (missed) {
        a->overruns++;
        gs_log(GS_LOG_DEBUG, "sampler: cycle overran, %llu tick(s) skipped",
               (unsigned long long)missed);
    }
    pthread_mutex_lock(&a->lock);
    cfg = a->cfg;
    pthread_mutex_unlock(&a->lock);
    gs_agent_cycle(a, &cfg);
}
