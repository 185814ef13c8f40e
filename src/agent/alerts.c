/*
 * The alert engine (alerts.h): rule parsing for the configuration, the derived values, the
 * per-(rule, GPU) state machine and the /api/v1/alerts and /metrics renderings. It keeps no
 * thread and does no I/O: the sampling thread owns it, HTTP sees only what it rendered.
 */
#include "agent/alerts.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/config.h"
#include "agent/log.h"
#include "agent/metrics.h"
#include "gpuscope/gs_err.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
#define NODE_SLOT GS_ALERTS_GPUS_MAX /* the state slot of a node rule */
#define GS_STALLED_MAX 256           /* NVML indexes of stalled training ranks kept */
#define THROTTLE_MASK                                                                              \
    (GS_THR_SW_POWER_CAP | GS_THR_HW_SLOWDOWN | GS_THR_SW_THERMAL | GS_THR_HW_THERMAL |            \
     GS_THR_HW_POWER_BRAKE)

static const char *const derived_names[] = {
    "temperature_slowdown_margin",
    "memory_used_ratio",
    "utilization_gpu_idle_with_memory",
    "throttle",
    "gpu_lost",
    "xid_new",
    "utilization_spread",
    "spinning",
    "pcie_downshift",
    "training_hang",
};
static const char *const op_names[] = {">", ">=", "<", "<=", "==", "!="};
static const char *const sev_names[] = {"info", "warning", "critical"};
static const char *const state_names[] = {"inactive", "pending", "firing", "resolved"};

/* name, metric, op, threshold, for, severity, enabled, hysteresis. A 0/1 value compared with
 * > 0.5 over the window: true for more than half of it. */
static const struct gs_alert_rule default_rules[] = {
    {"temperature", GS_AD_SLOWDOWN_MARGIN, GS_ALERT_LE, 5, 20, GS_ALERT_WARNING, 1, 3},
    {"memory_full", GS_AD_MEM_USED_RATIO, GS_ALERT_GT, 0.95, 60, GS_ALERT_WARNING, 1, 0.03},
    {"underutilized", GS_AD_IDLE_UTIL, GS_ALERT_LT, 0.30, 600, GS_ALERT_INFO, 1, 0.10},
    {"throttling", GS_AD_THROTTLE, GS_ALERT_GT, 0.5, 30, GS_ALERT_WARNING, 1, 0.25},
    {"gpu_lost", GS_AD_LOST, GS_ALERT_GT, 0, 0, GS_ALERT_CRITICAL, 1, 0},
    {"xid", GS_AD_XID_NEW, GS_ALERT_GT, 0, 0, GS_ALERT_CRITICAL, 1, 0},
    {"imbalance", GS_AD_UTIL_SPREAD, GS_ALERT_GT, 0.5, 300, GS_ALERT_WARNING, 1, 0.10},
    {"spinning", GS_AD_SPINNING, GS_ALERT_GT, 0.5, 120, GS_ALERT_WARNING, 1, 0.25},
    {"pcie_downshift", GS_AD_PCIE_DOWNSHIFT, GS_ALERT_GT, 0.5, 60, GS_ALERT_WARNING, 1, 0.25},
    {"training_hang", GS_AD_TRAINING_HANG, GS_ALERT_GT, 0.5, 30, GS_ALERT_CRITICAL, 1, 0.25},
};
#define N_DEFAULT (sizeof default_rules / sizeof default_rules[0])

const char *gs_alert_metric_name(int m)
{
    if (m >= 0 && m < GS_M__COUNT)
        return gs_metric_name((enum gs_metric)m);
    if (m >= GS_M__COUNT && m < GS_AD__END)
        return derived_names[m - GS_M__COUNT];
    return "?";
}

int gs_alert_metric_by_name(const char *name)
{
    for (int i = GS_M__COUNT; i < GS_AD__END; i++)
        if (strcmp(name, derived_names[i - GS_M__COUNT]) == 0)
            return i;
    return gs_metric_by_name(name);
}

const char *gs_alert_op_name(int op)
{
    return op >= 0 && op <= GS_ALERT_NE ? op_names[op] : "?";
}
const char *gs_alert_severity_name(int s)
{
    return s >= 0 && s < GS_ALERT__SEVS ? sev_names[s] : "?";
}

const char *gs_alert_state_name(int s)
{
    return s >= 0 && s <= GS_ALERT_RESOLVED ? state_names[s] : "?";
}

void gs_alert_rules_defaults(struct gs_alert_rules *rs)
{
    rs->n = N_DEFAULT;
    memset(rs->r, 0, sizeof rs->r);
    memcpy(rs->r, default_rules, sizeof default_rules);
}

static struct gs_alert_rule *find_rule(const struct gs_alert_rules *rs, const char *name)
{
    for (unsigned i = 0; i < rs->n; i++)
        if (strcmp(rs->r[i].name, name) == 0)
            return (struct gs_alert_rule *)&rs->r[i];
    return NULL;
}

static int pick(const char *const *names, int n, const char *value)
{
    for (int i = 0; i < n; i++)
        if (strcmp(value, names[i]) == 0)
            return i;
    return -1;
}

int gs_alert_rule_set(struct gs_alert_rules *rs, const char *rule, const char *key,
                      const char *value, const char *where, struct gs_err *err)
{
    struct gs_alert_rule *r = find_rule(rs, rule);
    char prefix[GS_ERR_MSG_LEN / 2];
    int i;

    snprintf(prefix, sizeof prefix, "%s: %.64s", where, key);
    if (!rule[0] || strlen(rule) >= GS_ALERT_NAME_LEN ||
        strspn(rule, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") !=
            strlen(rule))
        return gs_err_set(err, GS_EINVAL, "%s: bad alert name '%.64s' (letters, digits, _-.)",
                          prefix, rule);
    if (!r) {
        if (rs->n >= GS_ALERT_RULES_MAX)
            return gs_err_set(err, GS_EINVAL, "%s: more than %d alert rules", prefix,
                              GS_ALERT_RULES_MAX);
        r = &rs->r[rs->n++];
        memset(r, 0, sizeof *r);
        snprintf(r->name, sizeof r->name, "%s", rule);
        r->metric = -1;
        r->severity = GS_ALERT_WARNING;
        r->enabled = 1;
    }
    if (strcmp(key, "metric") == 0) {
        if ((i = gs_alert_metric_by_name(value)) < 0)
            return gs_err_set(err, GS_EINVAL, "%s: unknown metric '%.64s'", prefix, value);
        r->metric = i;
    } else if (strcmp(key, "op") == 0) {
        if ((i = pick(op_names, 6, value)) < 0)
            return gs_err_set(err, GS_EINVAL, "%s: '%.64s' is not one of > >= < <= == !=", prefix,
                              value);
        r->op = i;
    } else if (strcmp(key, "threshold") == 0) {
        double v;
        if (gs_config_parse_number(value, &v) != GS_OK)
            return gs_err_set(err, GS_EINVAL, "%s: '%.64s' is not a number", prefix, value);
        r->threshold = v;
    } else if (strcmp(key, "for") == 0) {
        double v;
        if (gs_config_parse_duration(value, &v) != GS_OK)
            return gs_err_set(err, GS_EINVAL,
                              "%s: '%.64s' is not a duration (a number with s, m, h or d)", prefix,
                              value);
        r->for_s = v;
    } else if (strcmp(key, "hysteresis") == 0) {
        double v;
        if (gs_config_parse_number(value, &v) != GS_OK || v < 0)
            return gs_err_set(err, GS_EINVAL, "%s: '%.64s' is not a number >= 0", prefix, value);
        r->hysteresis = v;
    } else if (strcmp(key, "severity") == 0) {
        if ((i = pick(sev_names, GS_ALERT__SEVS, value)) < 0)
            return gs_err_set(err, GS_EINVAL, "%s: '%.64s' is not one of info, warning, critical",
                              prefix, value);
        r->severity = i;
    } else if (strcmp(key, "enabled") == 0) {
        static const char *const onoff[] = {"off", "on"};
        if ((i = pick(onoff, 2, value)) < 0)
            return gs_err_set(err, GS_EINVAL, "%s: '%.64s' is not one of off, on", prefix, value);
        r->enabled = i;
    } else {
        return gs_err_set(err, GS_EINVAL,
                          "%s: unknown key (metric, op, threshold, for, hysteresis, severity, "
                          "enabled)",
                          prefix);
    }
    return GS_OK;
}

int gs_alert_rule_check(const struct gs_alert_rules *rs, const char *rule, const char *where,
                        struct gs_err *err)
{
    const struct gs_alert_rule *r = find_rule(rs, rule);

    if (r && r->metric < 0)
        return gs_err_set(err, GS_EINVAL, "%s: alert %.64s: metric: missing", where, rule);
    return GS_OK;
}

/* ---- the engine ---- */

/* One time bucket of a rule's for-window: the samples that fell in [id * w, (id + 1) * w),
 * w = for / GS_ALERT_WINDOW_BUCKETS. */
struct bucket {
    int64_t id;
    double sum;
    unsigned n;
};

struct slot {
    int state; /* GS_ALERT_INACTIVE, _PENDING or _FIRING */
    double since;
    double value; /* the window mean last compared */
    struct bucket w[GS_ALERT_WINDOW_BUCKETS];
};

struct resolved {
    char rule[GS_ALERT_NAME_LEN];
    int gpu;
    double value, threshold, since, ended;
    int severity;
    int metric, op; /* kept: the rule may be gone (a SIGHUP removed it) */
};

struct gs_alerts {
    struct gs_alert_rules rs;
    struct slot slots[GS_ALERT_RULES_MAX][GS_ALERTS_GPUS_MAX + 1];
    /* xid_last per GPU: the last value seen, and the last change */
    int xid_seen[GS_ALERTS_GPUS_MAX];
    double xid_last[GS_ALERTS_GPUS_MAX], xid_changed[GS_ALERTS_GPUS_MAX];
    struct resolved res[GS_ALERTS_RESOLVED_MAX];
    unsigned res_head, res_n; /* a ring: the oldest at res_head */
    gs_alert_notify_fn notify;
    void *notify_ctx;
    int stalled_known;     /* gs_alerts_set_stalled was called */
    unsigned stalled_node; /* gs_alerts_set_stalled_node */
    unsigned char stalled[GS_STALLED_MAX];
};

int gs_alerts_new(struct gs_alerts **out, const struct gs_alert_rules *rs, struct gs_err *err)
{
    struct gs_alerts *a = calloc(1, sizeof *a);

    if (!a)
        return gs_err_set(err, GS_ENOMEM, "alerts: out of memory");
    a->rs = *rs;
    *out = a;
    return GS_OK;
}

void gs_alerts_free(struct gs_alerts *a)
{
    free(a);
}

void gs_alerts_set_stalled(struct gs_alerts *a, const unsigned char *stalled, unsigned n)
{
    memset(a->stalled, 0, sizeof a->stalled);
    memcpy(a->stalled, stalled, n < GS_STALLED_MAX ? n : GS_STALLED_MAX);
    a->stalled_known = 1;
}

void gs_alerts_set_notify(struct gs_alerts *a, gs_alert_notify_fn fn, void *ctx)
{
    a->notify = fn;
    a->notify_ctx = ctx;
}

/* Defined with the state machine below. */
static void end_slot(struct gs_alerts *a, const struct gs_alert_rule *r, int gpu, struct slot *sl,
                     const struct gs_snapshot *s, double value, double now, const char *why);

/* Ends every firing (resolved, with why) and pending state of rule ri. */
static void end_rule(struct gs_alerts *a, unsigned ri, const struct gs_snapshot *s, double now,
                     const char *why)
{
    for (unsigned i = 0; i <= GS_ALERTS_GPUS_MAX; i++) {
        struct slot *sl = &a->slots[ri][i];
        if (sl->state != GS_ALERT_INACTIVE)
            end_slot(a, &a->rs.r[ri], i == NODE_SLOT ? -1 : (int)i, sl, s, sl->value, now, why);
    }
}

void gs_alerts_configure(struct gs_alerts *a, const struct gs_alert_rules *rs,
                         const struct gs_snapshot *s, double now)
{
    struct slot(*kept)[GS_ALERTS_GPUS_MAX + 1];

    memcpy(a->rs.webhook, rs->webhook, sizeof rs->webhook);
    if (rs->n == a->rs.n && memcmp(rs->r, a->rs.r, rs->n * sizeof rs->r[0]) == 0) {
        /* alerts = off ends what fires: nothing would evaluate it again (a SIGHUP). */
        if (!rs->enabled && a->rs.enabled)
            for (unsigned ri = 0; ri < a->rs.n; ri++)
                end_rule(a, ri, s, now, " (alerts off)");
        a->rs.enabled = rs->enabled;
        return;
    }
    /* A new rule set: a rule that stays as it was keeps its states; one removed, disabled or
     * changed resolves what it had firing, so no alert is left firing with no rule behind it. */
    kept = calloc(GS_ALERT_RULES_MAX, sizeof *kept);
    for (unsigned ri = 0; ri < a->rs.n; ri++) {
        const struct gs_alert_rule *old = &a->rs.r[ri];
        const struct gs_alert_rule *nr = find_rule(rs, old->name);
        size_t ni = nr ? (size_t)(nr - rs->r) : 0;
        if (nr && kept && rs->enabled && memcmp(nr, old, sizeof *nr) == 0)
            memcpy(kept[ni], a->slots[ri], sizeof kept[ni]);
        else
            end_rule(a, ri, s, now,
                     !nr            ? " (rule removed)"
                     : !rs->enabled ? " (alerts off)"
                     : !nr->enabled ? " (rule disabled)"
                                    : " (rule changed)");
    }
    a->rs = *rs;
    if (kept)
        memcpy(a->slots, kept, sizeof a->slots);
    else
        memset(a->slots, 0, sizeof a->slots); /* out of memory: every state restarts */
    free(kept);
    gs_log(GS_LOG_INFO, "alerts: %u rules loaded; changed rules restart their states", rs->n);
}

/* xid_new's bookkeeping: runs once per GPU per cycle, whatever the rules. */
static void track_xid(struct gs_alerts *a, const struct gs_gpu *g, unsigned i, double now)
{
    if (i >= GS_ALERTS_GPUS_MAX || !gs_gpu_has(g, GS_M_XID_LAST))
        return;
    if (a->xid_seen[i] && g->v[GS_M_XID_LAST] != a->xid_last[i] && g->v[GS_M_XID_LAST] != 0)
        a->xid_changed[i] = now;
    a->xid_seen[i] = 1;
    a->xid_last[i] = g->v[GS_M_XID_LAST];
}

/* The value a per-GPU rule compares; 0 when absent. */
static int gpu_value(const struct gs_alerts *a, const struct gs_snapshot *s, unsigned i, int metric,
                     double now, double *v)
{
    const struct gs_gpu *g = &s->gpus[i];

    if (metric == GS_AD_LOST) {
        *v = g->lost ? 1 : 0;
        return 1;
    }
    if (metric == GS_AD_XID_NEW) { /* kept for a lost GPU: Xid 79 is how it got lost */
        if (i >= GS_ALERTS_GPUS_MAX || !a->xid_seen[i])
            return 0;
        *v = a->xid_changed[i] > 0 && now - a->xid_changed[i] < GS_ALERT_XID_HOLD_S ? a->xid_last[i]
                                                                                    : 0;
        return 1;
    }
    if (g->lost)
        return 0;
    switch (metric) {
    case GS_AD_SLOWDOWN_MARGIN:
        if (gs_gpu_has(g, GS_M_TEMP_SLOWDOWN) && gs_gpu_has(g, GS_M_TEMP_GPU)) {
            *v = g->v[GS_M_TEMP_SLOWDOWN] - g->v[GS_M_TEMP_GPU];
            return 1;
        }
        if (gs_gpu_has(g, GS_M_TEMP_MARGIN)) {
            *v = g->v[GS_M_TEMP_MARGIN];
            return 1;
        }
        return 0;
    case GS_AD_MEM_USED_RATIO:
        if (!gs_gpu_has(g, GS_M_MEM_USED) || !gs_gpu_has(g, GS_M_MEM_TOTAL) ||
            g->v[GS_M_MEM_TOTAL] <= 0)
            return 0;
        *v = g->v[GS_M_MEM_USED] / g->v[GS_M_MEM_TOTAL];
        return 1;
    case GS_AD_IDLE_UTIL:
        if (!gs_gpu_has(g, GS_M_UTIL_GPU))
            return 0;
        for (unsigned k = 0; k < s->n_procs; k++) {
            const struct gs_proc *p = &s->procs[k];
            if (p->gpu == i && p->mem_st == GS_ST_OK && (double)p->gpu_mem_bytes > GIB) {
                *v = g->v[GS_M_UTIL_GPU];
                return 1;
            }
        }
        return 0;
    case GS_AD_THROTTLE:
        if (!gs_gpu_has(g, GS_M_THROTTLE_ACTIVE))
            return 0;
        *v = (gs_gpu_mask(g, GS_M_THROTTLE_ACTIVE) & THROTTLE_MASK) ? 1 : 0;
        return 1;
    case GS_AD_SPINNING: {
        double lim = gs_gpu_power_limit(g);
        if (!gs_gpu_has(g, GS_M_UTIL_GPU) || !gs_gpu_has(g, GS_M_POWER_DRAW) || lim <= 0)
            return 0;
        *v = gs_spinning(g->v[GS_M_UTIL_GPU], g->v[GS_M_POWER_DRAW], lim);
        return 1;
    }
    case GS_AD_TRAINING_HANG: {
        double lim = gs_gpu_power_limit(g);
        int idle, spin;
        if (!a->stalled_known || !gs_gpu_has(g, GS_M_UTIL_GPU))
            return 0;
        idle = g->v[GS_M_UTIL_GPU] <= 0.05;
        spin = gs_gpu_has(g, GS_M_POWER_DRAW) && lim > 0 &&
               gs_spinning(g->v[GS_M_UTIL_GPU], g->v[GS_M_POWER_DRAW], lim);
        *v = g->index < GS_STALLED_MAX && a->stalled[g->index] && (idle || spin) ? 1 : 0;
        return 1;
    }
    case GS_AD_PCIE_DOWNSHIFT:
        if (!gs_gpu_has(g, GS_M_UTIL_GPU) ||
            !(gs_gpu_has(g, GS_M_PCIE_GEN) && gs_gpu_has(g, GS_M_PCIE_GEN_MAX)) ||
            !(gs_gpu_has(g, GS_M_PCIE_WIDTH) && gs_gpu_has(g, GS_M_PCIE_WIDTH_MAX)))
            return 0;
        *v = g->v[GS_M_UTIL_GPU] >= 0.5 && (g->v[GS_M_PCIE_GEN] < g->v[GS_M_PCIE_GEN_MAX] ||
                                            g->v[GS_M_PCIE_WIDTH] < g->v[GS_M_PCIE_WIDTH_MAX])
                 ? 1
                 : 0;
        return 1;
    default:
        if (metric < 0 || metric >= GS_M__COUNT || !gs_gpu_has(g, (enum gs_metric)metric))
            return 0;
        *v = g->v[metric];
        return 1;
    }
}

static int node_value(const struct gs_snapshot *s, int metric, double *v)
{
    double lo = INFINITY, hi = -INFINITY;
    unsigned n = 0;

    if (metric != GS_AD_UTIL_SPREAD)
        return 0;
    for (unsigned i = 0; i < s->n_gpus; i++) {
        const struct gs_gpu *g = &s->gpus[i];
        if (g->lost || !gs_gpu_has(g, GS_M_UTIL_GPU))
            continue;
        lo = fmin(lo, g->v[GS_M_UTIL_GPU]);
        hi = fmax(hi, g->v[GS_M_UTIL_GPU]);
        n++;
    }
    if (n < 2)
        return 0;
    *v = hi - lo;
    return 1;
}

static int compare(int op, double v, double t)
{
    switch (op) {
    case GS_ALERT_GT:
        return v > t;
    case GS_ALERT_GE:
        return v >= t;
    case GS_ALERT_LT:
        return v < t;
    case GS_ALERT_LE:
        return v <= t;
    case GS_ALERT_EQ:
        return v == t;
    default:
        return v != t;
    }
}

static void gpu_label(char *buf, size_t len, int gpu)
{
    if (gpu < 0)
        snprintf(buf, len, "node");
    else
        snprintf(buf, len, "gpu %d", gpu);
}

static void emit(struct gs_alerts *a, const struct gs_alert_rule *r, int gpu,
                 const struct gs_snapshot *s, int state, double value, double since, double ended)
{
    struct gs_alert_event ev = {r, gpu, "", state, value, since, ended};

    if (!a->notify)
        return;
    if (s && gpu >= 0 && (unsigned)gpu < s->n_gpus && gs_gpu_has_text(&s->gpus[gpu], GS_T_UUID))
        ev.gpu_uuid = s->gpus[gpu].text[GS_T_UUID];
    a->notify(a->notify_ctx, &ev);
}

/* Adds v at now to the slot's for-window and returns the window's mean (v itself when the
 * rule has no for-duration). */
static double window_mean(struct slot *sl, const struct gs_alert_rule *r, double v, double now)
{
    int64_t id;
    struct bucket *b;
    double sum = 0;
    unsigned n = 0;

    if (!(r->for_s > 0))
        return v;
    id = (int64_t)floor(now / (r->for_s / GS_ALERT_WINDOW_BUCKETS));
    b = &sl->w[((id % GS_ALERT_WINDOW_BUCKETS) + GS_ALERT_WINDOW_BUCKETS) %
               GS_ALERT_WINDOW_BUCKETS];
    if (b->n == 0 || b->id != id)
        *b = (struct bucket){id, 0, 0};
    b->sum += v;
    b->n++;
    for (unsigned k = 0; k < GS_ALERT_WINDOW_BUCKETS; k++)
        if (sl->w[k].n && sl->w[k].id <= id && sl->w[k].id > id - GS_ALERT_WINDOW_BUCKETS) {
            sum += sl->w[k].sum;
            n += sl->w[k].n;
        }
    return n ? sum / n : v;
}

/* The threshold a firing alert must cross back to resolve. */
static double clear_threshold(const struct gs_alert_rule *r)
{
    if (r->op == GS_ALERT_GT || r->op == GS_ALERT_GE)
        return r->threshold - r->hysteresis;
    if (r->op == GS_ALERT_LT || r->op == GS_ALERT_LE)
        return r->threshold + r->hysteresis;
    return r->threshold;
}

static void step(struct gs_alerts *a, unsigned ri, int gpu, const struct gs_snapshot *s,
                 int present, double v, double now)
{
    const struct gs_alert_rule *r = &a->rs.r[ri];
    struct slot *sl = &a->slots[ri][gpu < 0 ? NODE_SLOT : gpu];
    double m = v;
    char who[16];

    if (present)
        m = window_mean(sl, r, v, now);
    else
        memset(sl->w, 0, sizeof sl->w); /* a value gone: its old samples do not come back */
    if (sl->state == GS_ALERT_FIRING) {
        if (present && compare(r->op, m, clear_threshold(r))) {
            sl->value = m; /* still past the threshold less the hysteresis */
            return;
        }
        end_slot(a, r, gpu, sl, s, present ? m : sl->value, now, present ? "" : " (value absent)");
        return;
    }
    if (present && compare(r->op, m, r->threshold)) {
        sl->value = m;
        if (sl->state == GS_ALERT_INACTIVE) {
            sl->state = GS_ALERT_PENDING;
            sl->since = now;
            gpu_label(who, sizeof who, gpu); /* only for a log line: every rule and GPU, every
                                              * cycle, steps here (callgrind: 0.1 M a cycle) */
            if (r->for_s > 0)
                gs_log(GS_LOG_DEBUG, "alerts: %s on %s pending (%g %s %g)", r->name, who, m,
                       op_names[r->op], r->threshold);
        }
        if (sl->state == GS_ALERT_PENDING && now - sl->since >= r->for_s) {
            sl->state = GS_ALERT_FIRING;
            sl->since = now;
            gpu_label(who, sizeof who, gpu);
            gs_log(GS_LOG_WARN, "alerts: %s on %s firing (%s %g %s %g, %s)", r->name, who,
                   gs_alert_metric_name(r->metric), m, op_names[r->op], r->threshold,
                   sev_names[r->severity]);
            emit(a, r, gpu, s, GS_ALERT_FIRING, m, now, 0);
        }
        return;
    }
    end_slot(a, r, gpu, sl, s, present ? m : sl->value, now, present ? "" : " (value absent)");
}

/* Ends one state: a pending one silently goes back to inactive, a firing one resolves
 * (logged with why, kept in the resolved ring, notified) with value. */
static void end_slot(struct gs_alerts *a, const struct gs_alert_rule *r, int gpu, struct slot *sl,
                     const struct gs_snapshot *s, double value, double now, const char *why)
{
    char who[16];

    if (sl->state == GS_ALERT_INACTIVE) /* the usual case: nothing to end, nothing to log */
        return;
    gpu_label(who, sizeof who, gpu);
    if (sl->state == GS_ALERT_PENDING) {
        gs_log(GS_LOG_DEBUG, "alerts: %s on %s back to inactive before firing%s", r->name, who,
               why);
    } else if (sl->state == GS_ALERT_FIRING) {
        struct resolved *e;
        unsigned at;
        if (a->res_n == GS_ALERTS_RESOLVED_MAX) {
            at = a->res_head;
            a->res_head = (a->res_head + 1) % GS_ALERTS_RESOLVED_MAX;
        } else {
            at = (a->res_head + a->res_n++) % GS_ALERTS_RESOLVED_MAX;
        }
        e = &a->res[at];
        memcpy(e->rule, r->name, sizeof e->rule);
        e->gpu = gpu;
        e->value = value;
        e->threshold = r->threshold;
        e->metric = r->metric;
        e->op = r->op;
        e->severity = r->severity;
        e->since = sl->since;
        e->ended = now;
        gs_log(GS_LOG_INFO, "alerts: %s on %s resolved%s", r->name, who, why);
        emit(a, r, gpu, s, GS_ALERT_RESOLVED, e->value, sl->since, now);
    }
    sl->state = GS_ALERT_INACTIVE;
}

void gs_alerts_set_stalled_node(struct gs_alerts *a, unsigned ranks)
{
    a->stalled_node = ranks;
}

/* training_hang at node level (gpu -1): a stalled rank that no GPU's state can gate. */
static void node_hang(struct gs_alerts *a, const struct gs_snapshot *s, double now)
{
    for (unsigned ri = 0; ri < a->rs.n; ri++) {
        const struct gs_alert_rule *r = &a->rs.r[ri];
        if (!r->enabled || r->metric != GS_AD_TRAINING_HANG)
            continue;
        if (!a->stalled_known && a->slots[ri][NODE_SLOT].state == GS_ALERT_INACTIVE)
            continue;
        step(a, ri, -1, s, a->stalled_known, a->stalled_node > 0 ? 1 : 0, now);
    }
}

void gs_alerts_eval_node_hang(struct gs_alerts *a, double now)
{
    node_hang(a, NULL, now);
}

void gs_alerts_eval(struct gs_alerts *a, const struct gs_snapshot *s, double now)
{
    if (!s)
        return;
    node_hang(a, s, now);
    for (unsigned i = 0; i < s->n_gpus && i < GS_ALERTS_GPUS_MAX; i++)
        track_xid(a, &s->gpus[i], i, now);
    for (unsigned ri = 0; ri < a->rs.n; ri++) {
        const struct gs_alert_rule *r = &a->rs.r[ri];
        double v = 0;
        if (!r->enabled || r->metric < 0)
            continue;
        if (r->metric == GS_AD_UTIL_SPREAD) {
            int present = node_value(s, r->metric, &v);
            step(a, ri, -1, s, present, v, now);
            continue;
        }
        for (unsigned i = 0; i < GS_ALERTS_GPUS_MAX; i++) {
            int present = i < s->n_gpus && gpu_value(a, s, i, r->metric, now, &v);
            if (i >= s->n_gpus && a->slots[ri][i].state == GS_ALERT_INACTIVE)
                continue;
            step(a, ri, (int)i, s, present, v, now);
        }
    }
}

unsigned gs_alerts_firing(const struct gs_alerts *a, int severity)
{
    unsigned n = 0;

    for (unsigned ri = 0; ri < a->rs.n; ri++)
        if (a->rs.r[ri].severity == severity)
            for (unsigned i = 0; i <= GS_ALERTS_GPUS_MAX; i++)
                n += a->slots[ri][i].state == GS_ALERT_FIRING;
    return n;
}

int gs_alerts_list(const struct gs_alerts *a, double now, struct gs_alert_list *out)
{
    unsigned cap = a->res_n, n = 0;

    memset(out, 0, sizeof *out);
    out->enabled = a->rs.enabled;
    for (unsigned ri = 0; ri < a->rs.n; ri++)
        for (unsigned i = 0; i <= GS_ALERTS_GPUS_MAX; i++)
            cap += a->slots[ri][i].state != GS_ALERT_INACTIVE;
    if (!cap)
        return GS_OK;
    out->item = calloc(cap, sizeof *out->item);
    if (!out->item)
        return GS_ENOMEM;
    for (unsigned ri = 0; ri < a->rs.n; ri++) {
        const struct gs_alert_rule *r = &a->rs.r[ri];
        for (unsigned i = 0; i <= GS_ALERTS_GPUS_MAX; i++) {
            const struct slot *sl = &a->slots[ri][i];
            struct gs_alert_item *it = &out->item[n];
            if (sl->state == GS_ALERT_INACTIVE)
                continue;
            snprintf(it->rule, sizeof it->rule, "%s", r->name);
            it->metric = r->metric;
            it->op = r->op;
            it->severity = r->severity;
            it->state = sl->state;
            it->gpu = i == NODE_SLOT ? -1 : (int)i;
            it->value = sl->value;
            it->threshold = r->threshold;
            it->since = sl->since;
            n++;
        }
    }
    /* the newest resolved first */
    for (unsigned k = a->res_n; k-- > 0;) {
        const struct resolved *e = &a->res[(a->res_head + k) % GS_ALERTS_RESOLVED_MAX];
        struct gs_alert_item *it = &out->item[n];
        if (now - e->ended > GS_ALERTS_RESOLVED_KEEP_S)
            continue;
        snprintf(it->rule, sizeof it->rule, "%s", e->rule);
        it->metric = e->metric;
        it->op = e->op;
        it->severity = e->severity;
        it->state = GS_ALERT_RESOLVED;
        it->gpu = e->gpu;
        it->value = e->value;
        it->threshold = e->threshold;
        it->since = e->since;
        it->resolved_at = e->ended;
        n++;
    }
    out->n = n;
    return GS_OK;
}

void gs_alert_list_free(struct gs_alert_list *l)
{
    free(l->item);
    memset(l, 0, sizeof *l);
}

static json_t *item_json(const struct gs_alert_item *it)
{
    json_t *o = json_pack("{s:s, s:s, s:f, s:s, s:f, s:s, s:s, s:f}", "rule", it->rule, "metric",
                          gs_alert_metric_name(it->metric), "value", it->value, "op",
                          gs_alert_op_name(it->op), "threshold", it->threshold, "severity",
                          gs_alert_severity_name(it->severity), "state",
                          gs_alert_state_name(it->state), "since", it->since);

    if (!o)
        return NULL;
    json_object_set_new(o, "gpu", it->gpu < 0 ? json_null() : json_integer(it->gpu));
    if (it->state == GS_ALERT_RESOLVED)
        json_object_set_new(o, "resolved_at", json_real(it->resolved_at));
    return o;
}

char *gs_alert_list_json(const struct gs_alert_list *l, gs_alert_shown_fn shown, void *ctx,
                         size_t *len)
{
    json_t *list = json_array(), *doc;
    char *out;

    *len = 0;
    if (!list)
        return NULL;
    for (unsigned k = 0; k < l->n; k++)
        if (!shown || shown(ctx, l->item[k].gpu))
            json_array_append_new(list, item_json(&l->item[k]));
    doc = json_pack("{s:b, s:o}", "enabled", l->enabled, "alerts", list);
    if (!doc)
        return NULL;
    out = json_dumps(doc, JSON_COMPACT | JSON_REAL_PRECISION(15));
    json_decref(doc);
    if (out)
        *len = strlen(out);
    return out;
}

void gs_alerts_render_prom(struct gs_buf *b, const struct gs_alerts *a, const char *hostname)
{
    gs_buf_printf(b, "# HELP gpuscope_alerts_firing Alerts now firing, per severity.\n"
                     "# TYPE gpuscope_alerts_firing gauge\n");
    for (int s = 0; s < GS_ALERT__SEVS; s++) {
        gs_buf_printf(b, "gpuscope_alerts_firing{hostname=\"");
        gs_metrics_escape(b, hostname ? hostname : "");
        gs_buf_printf(b, "\",severity=\"%s\"} %u\n", sev_names[s], gs_alerts_firing(a, s));
    }
}
