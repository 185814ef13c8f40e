/*
 * The alert engine: a pure evaluator (no threads, no I/O besides gs_log lines) that the
 * sampling thread calls once per cycle with the new snapshot and its time. Each rule compares
 * one value of a GPU (or, for node rules, of the whole node) with a threshold; a rule whose
 * condition holds for its for-duration fires. Per (rule, GPU) the state runs
 * inactive -> pending -> firing -> resolved; resolved alerts are kept in a bounded list
 * (GS_ALERTS_RESOLVED_MAX entries, at most GS_ALERTS_RESOLVED_KEEP_S old). An absent value
 * never fires a rule: it counts as "condition false".
 *
 * What a rule compares is the mean of its value over its for-window (the samples of the last
 * for seconds, kept in GS_ALERT_WINDOW_BUCKETS buckets; the sample itself when for is 0), so
 * a noisy value near the threshold does not flap; a firing alert resolves with the rule's
 * hysteresis. pending <-> inactive changes are logged at debug, firing and resolved at
 * warning and info.
 *
 * Values compared are in the model's units (ratios 0..1, celsius, bytes), plus the derived
 * values below (gs_alert_metric_name). The default rules are in docs/agent.md ("Alerts").
 */
#ifndef GS_AGENT_ALERTS_H
#define GS_AGENT_ALERTS_H

#include "gpuscope/gs_model.h"

struct gs_err;
struct gs_buf;

#define GS_ALERT_NAME_LEN 48
#define GS_ALERT_RULES_MAX 32
#define GS_ALERT_URL_LEN 256
#define GS_ALERTS_GPUS_MAX 64          /* GPUs tracked per rule; more are ignored */
#define GS_ALERTS_RESOLVED_MAX 100     /* recently resolved alerts kept ... */
#define GS_ALERTS_RESOLVED_KEEP_S 3600 /* ... for at most this long */
#define GS_ALERT_XID_HOLD_S 300        /* xid_new stays set this long after a change */
#define GS_ALERT_WINDOW_BUCKETS 16     /* a rule's for-window, in this many time buckets */

enum gs_alert_op { GS_ALERT_GT, GS_ALERT_GE, GS_ALERT_LT, GS_ALERT_LE, GS_ALERT_EQ, GS_ALERT_NE };
enum gs_alert_severity { GS_ALERT_INFO, GS_ALERT_WARNING, GS_ALERT_CRITICAL, GS_ALERT__SEVS };
enum gs_alert_state { GS_ALERT_INACTIVE, GS_ALERT_PENDING, GS_ALERT_FIRING, GS_ALERT_RESOLVED };

/* Derived values, numbered after the model's metrics (enum gs_metric). */
enum gs_alert_derived {
    GS_AD_SLOWDOWN_MARGIN = GS_M__COUNT, /* temperature_slowdown - temperature_gpu, celsius */
    GS_AD_MEM_USED_RATIO,                /* memory_used / memory_total */
    GS_AD_IDLE_UTIL,      /* utilization_gpu while a process holds > 1 GiB, else absent */
    GS_AD_THROTTLE,       /* 1 while a power or thermal clock event reason is active, else 0 */
    GS_AD_LOST,           /* 1 when the GPU fell off the bus, else 0 */
    GS_AD_XID_NEW,        /* the new Xid for GS_ALERT_XID_HOLD_S after xid_last changed, else 0 */
    GS_AD_UTIL_SPREAD,    /* node: max - min utilization_gpu over the GPUs (2 or more) */
    GS_AD_SPINNING,       /* 1 while utilization_gpu >= 0.95 at power_draw <= 0.25 of the
                           * enforced limit (busy-waiting kernels), else 0 */
    GS_AD_PCIE_DOWNSHIFT, /* 1 while the link runs below its max gen or width under load
                           * (utilization_gpu >= 0.5), else 0: at idle it is power saving */
    GS_AD_TRAINING_HANG,  /* 1 while a training rank on the GPU sent no step for hang_after x
                           * its p95 step time (at least hang_min) and the GPU is idle
                           * (utilization_gpu <= 0.05) or spinning, else 0; absent without a
                           * step socket (runs.h, gs_alerts_set_stalled) */
    GS_AD__END,
};

struct gs_alert_rule {
    char name[GS_ALERT_NAME_LEN];
    int metric; /* enum gs_metric or enum gs_alert_derived; -1: not set yet */
    int op;     /* enum gs_alert_op */
    double threshold;
    double for_s;
    int severity; /* enum gs_alert_severity */
    int enabled;
    /* A firing alert resolves only once the value is this far past the threshold, on the
     * clear side (> and >=: below threshold - hysteresis; < and <=: above threshold +
     * hysteresis); 0: at the threshold. */
    double hysteresis;
};

/* The alert part of the agent's configuration (config.h embeds it). */
struct gs_alert_rules {
    int enabled;                    /* key alerts = on | off */
    char webhook[GS_ALERT_URL_LEN]; /* key alert_webhook; "": none */
    unsigned n;
    struct gs_alert_rule r[GS_ALERT_RULES_MAX];
    double hang_after; /* key training_hang_after: multiple of a rank's p95 step time */
    double hang_min_s; /* key training_hang_min: and at least this long without a step */
};

/* The default rules (enabled, webhook untouched). */
void gs_alert_rules_defaults(struct gs_alert_rules *rs);

/* Sets one key (metric, op, threshold, for, severity, enabled) of rule `rule`, appended when
 * new (its metric then must be set: gs_alert_rule_check). where prefixes the message
 * ("a.conf:12"); GS_EINVAL "WHERE: KEY: why". */
int gs_alert_rule_set(struct gs_alert_rules *rs, const char *rule, const char *key,
                      const char *value, const char *where, struct gs_err *err);
/* GS_EINVAL "WHERE: alert RULE: metric: missing" when the rule has no metric. */
int gs_alert_rule_check(const struct gs_alert_rules *rs, const char *rule, const char *where,
                        struct gs_err *err);

const char *gs_alert_metric_name(int metric);  /* "temperature_gpu", "throttle", ... */
int gs_alert_metric_by_name(const char *name); /* -1 if unknown */
const char *gs_alert_op_name(int op);
const char *gs_alert_severity_name(int sev);
const char *gs_alert_state_name(int st);

struct gs_alerts;

int gs_alerts_new(struct gs_alerts **out, const struct gs_alert_rules *rs, struct gs_err *err);
void gs_alerts_free(struct gs_alerts *a);
/* Takes a new rule set (each cycle, so a SIGHUP applies). A rule that stays the same keeps
 * its states; a rule removed, disabled or changed, or every rule when rs->enabled goes off,
 * ends its states: what was firing resolves at now (unix seconds) as if its condition had
 * cleared (logged with the reason, listed as resolved, notified). snap (may be NULL) gives
 * the GPU UUIDs of those notifications. */
void gs_alerts_configure(struct gs_alerts *a, const struct gs_alert_rules *rs,
                         const struct gs_snapshot *snap, double now);

/* One transition to firing or resolved, for a notifier (the webhook). */
struct gs_alert_event {
    const struct gs_alert_rule *rule;
    int gpu; /* -1 for a node rule */
    const char *gpu_uuid;
    int state; /* GS_ALERT_FIRING or GS_ALERT_RESOLVED */
    double value;
    double since; /* unix time it started firing */
    double ended; /* unix time it resolved; 0 while firing */
};
typedef void (*gs_alert_notify_fn)(void *ctx, const struct gs_alert_event *ev);
void gs_alerts_set_notify(struct gs_alerts *a, gs_alert_notify_fn fn, void *ctx);

/* The stalled training ranks' GPUs for the next gs_alerts_eval (stalled[NVML index], n
 * entries; gs_runs_stalled); until the first call training_hang is absent. */
void gs_alerts_set_stalled(struct gs_alerts *a, const unsigned char *stalled, unsigned n);

/* How many stalled training ranks count at node level (no known GPU, or no GPU reading this
 * cycle): training_hang's node state (gpu -1) is 1 while there is one. */
void gs_alerts_set_stalled_node(struct gs_alerts *a, unsigned ranks);

/* training_hang's node state alone, at now: for a cycle without a snapshot (driver down or
 * no GPU), where gs_alerts_eval does nothing. */
void gs_alerts_eval_node_hang(struct gs_alerts *a, double now);

/* Evaluates every enabled rule on snap taken at now (unix seconds). snap NULL (driver down):
 * nothing changes (training_hang's node state: gs_alerts_eval_node_hang). */
void gs_alerts_eval(struct gs_alerts *a, const struct gs_snapshot *snap, double now);

/* Alerts now firing with this severity. */
unsigned gs_alerts_firing(const struct gs_alerts *a, int severity);

/* One alert as /api/v1/alerts lists it (docs/api.md): a copy of its state that outlives the
 * rules (a SIGHUP may remove the rule) and the evaluator (the sampling thread owns that). */
struct gs_alert_item {
    char rule[GS_ALERT_NAME_LEN];
    int metric, op, severity, state; /* state: pending, firing or resolved */
    int gpu;                         /* -1: the node */
    double value, threshold, since;
    double resolved_at; /* GS_ALERT_RESOLVED only */
};

/* The alerts at one moment, in the document's order (active ones by rule and GPU, then the
 * newest resolved first); a publication keeps one per cycle. */
struct gs_alert_list {
    int enabled;
    unsigned n;
    struct gs_alert_item *item; /* malloc'd, n entries */
};

/* Copies the current alerts (taken at now, unix seconds) into *out; GS_ENOMEM when out of memory
 * (*out then empty). gs_alert_list_free releases it (a zeroed list is empty). */
int gs_alerts_list(const struct gs_alerts *a, double now, struct gs_alert_list *out);
void gs_alert_list_free(struct gs_alert_list *l);

/* Whether a viewer sees an item on this GPU (-1: the node); NULL shows every item. */
typedef int (*gs_alert_shown_fn)(void *ctx, int gpu);

/* The /api/v1/alerts document of the items shown, malloc'd, NUL-terminated, *len its length;
 * NULL when out of memory. */
char *gs_alert_list_json(const struct gs_alert_list *l, gs_alert_shown_fn shown, void *ctx,
                         size_t *len);

/* Appends gpuscope_alerts_firing{hostname,severity} to a /metrics body (hostname: the node's,
 * the label the dashboards filter on). */
void gs_alerts_render_prom(struct gs_buf *b, const struct gs_alerts *a, const char *hostname);

#endif
