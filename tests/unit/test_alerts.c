/*
 * Unit tests of the alert engine (src/agent/alerts.c): each default rule fires only after its
 * for-duration on hand-built snapshots with time advanced by hand, resolves, an absent value
 * never fires, the node imbalance rule, Xid changes, a lost GPU, the JSON and /metrics
 * renderings, and the [alert NAME] configuration sections with their errors.
 */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent/alerts.h"
#include "agent/config.h"
#include "agent/metrics.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

struct fx {
    struct gs_snapshot *s;
    struct gs_alerts *a;
    struct gs_alert_rules rs;
    unsigned events_firing, events_resolved;
    const char *only; /* count only this rule's events; NULL: every rule's */
};

static void on_event(void *ctx, const struct gs_alert_event *ev)
{
    struct fx *f = ctx;
    if (f->only && strcmp(ev->rule->name, f->only) != 0)
        return;
    if (ev->state == GS_ALERT_FIRING)
        f->events_firing++;
    else
        f->events_resolved++;
}

static void fx_open(struct fx *f, unsigned n_gpus)
{
    struct gs_err e;

    memset(f, 0, sizeof *f);
    assert_int_equal(gs_snapshot_new(&f->s, n_gpus, 4, &e), GS_OK);
    f->s->n_gpus = n_gpus;
    for (unsigned i = 0; i < n_gpus; i++)
        f->s->gpus[i].index = i;
    gs_alert_rules_defaults(&f->rs);
    f->rs.enabled = 1;
    assert_int_equal(gs_alerts_new(&f->a, &f->rs, &e), GS_OK);
    gs_alerts_set_notify(f->a, on_event, f);
}

static void fx_close(struct fx *f)
{
    gs_alerts_free(f->a);
    gs_snapshot_free(f->s);
}

/* The state of rule `rule` on gpu (-1: node) in the JSON document; "inactive" if absent. */
static const char *state_of(struct fx *f, const char *rule, int gpu, double now)
{
    static char out[32];
    struct gs_alert_list l;
    json_t *doc, *list, *it;
    size_t i, len;
    char *text;

    assert_int_equal(gs_alerts_list(f->a, now, &l), GS_OK);
    text = gs_alert_list_json(&l, NULL, NULL, &len);
    gs_alert_list_free(&l);
    assert_non_null(text);
    doc = json_loads(text, 0, NULL);
    free(text);
    assert_non_null(doc);
    strcpy(out, "inactive");
    list = json_object_get(doc, "alerts");
    json_array_foreach(list, i, it)
    {
        json_t *g = json_object_get(it, "gpu");
        int ig = json_is_null(g) ? -1 : (int)json_integer_value(g);
        if (strcmp(json_string_value(json_object_get(it, "rule")), rule) == 0 && ig == gpu) {
            snprintf(out, sizeof out, "%s", json_string_value(json_object_get(it, "state")));
            break; /* live states come before resolved ones */
        }
    }
    json_decref(doc);
    return out;
}

static void test_temperature(void **state)
{
    struct fx f;

    (void)state;
    fx_open(&f, 1);
    gs_gpu_set(&f.s->gpus[0], GS_M_TEMP_SLOWDOWN, 90);
    gs_gpu_set(&f.s->gpus[0], GS_M_TEMP_GPU, 80);
    gs_alerts_eval(f.a, f.s, 100);
    assert_string_equal(state_of(&f, "temperature", 0, 100), "inactive");
    /* the mean over the 20 s window decides: one hot sample after a cool one is not enough */
    gs_gpu_set(&f.s->gpus[0], GS_M_TEMP_GPU, 85.5);
    gs_alerts_eval(f.a, f.s, 101);
    assert_string_equal(state_of(&f, "temperature", 0, 101), "inactive");
    for (double t = 102; t < 122; t++)
        gs_alerts_eval(f.a, f.s, t);
    assert_string_equal(state_of(&f, "temperature", 0, 121), "pending");
    for (double t = 122; t <= 145; t++)
        gs_alerts_eval(f.a, f.s, t);
    assert_string_equal(state_of(&f, "temperature", 0, 145), "firing");
    assert_int_equal(gs_alerts_firing(f.a, GS_ALERT_WARNING), 1);
    /* hysteresis: a margin of 7 C (above 5, below 5 + 3) keeps it firing */
    gs_gpu_set(&f.s->gpus[0], GS_M_TEMP_GPU, 83);
    for (double t = 146; t <= 180; t++)
        gs_alerts_eval(f.a, f.s, t);
    assert_string_equal(state_of(&f, "temperature", 0, 180), "firing");
    gs_gpu_set(&f.s->gpus[0], GS_M_TEMP_GPU, 70);
    double t = 181;
    for (; t <= 240 && strcmp(state_of(&f, "temperature", 0, t), "firing") == 0; t++)
        gs_alerts_eval(f.a, f.s, t);
    assert_string_equal(state_of(&f, "temperature", 0, t), "resolved");
    assert_true(t > 182 && t < 205); /* once the window's mean is past 8 C */
    assert_int_equal(gs_alerts_firing(f.a, GS_ALERT_WARNING), 0);
    assert_int_equal(f.events_firing, 1);
    assert_int_equal(f.events_resolved, 1);
    /* resolved entries age out after an hour */
    assert_string_equal(state_of(&f, "temperature", 0, t + 3601), "inactive");
    fx_close(&f);
}

static void test_memory_for_duration(void **state)
{
    struct fx f;

    (void)state;
    fx_open(&f, 1);
    gs_gpu_set(&f.s->gpus[0], GS_M_MEM_TOTAL, 100);
    gs_gpu_set(&f.s->gpus[0], GS_M_MEM_USED, 96);
    gs_alerts_eval(f.a, f.s, 0);
    assert_string_equal(state_of(&f, "memory_full", 0, 0), "pending");
    gs_alerts_eval(f.a, f.s, 59);
    assert_string_equal(state_of(&f, "memory_full", 0, 59), "pending");
    gs_alerts_eval(f.a, f.s, 60);
    assert_string_equal(state_of(&f, "memory_full", 0, 60), "firing");
    /* dropping below resets; a short spike never fires */
    gs_gpu_set(&f.s->gpus[0], GS_M_MEM_USED, 50);
    gs_alerts_eval(f.a, f.s, 61);
    assert_string_equal(state_of(&f, "memory_full", 0, 61), "resolved");
    gs_gpu_set(&f.s->gpus[0], GS_M_MEM_USED, 99);
    gs_alerts_eval(f.a, f.s, 62);
    gs_gpu_set(&f.s->gpus[0], GS_M_MEM_USED, 10);
    gs_alerts_eval(f.a, f.s, 200);
    assert_int_equal(f.events_firing, 1);
    fx_close(&f);
}

static void test_underutilized_needs_process(void **state)
{
    struct fx f;

    (void)state;
    fx_open(&f, 1);
    gs_gpu_set(&f.s->gpus[0], GS_M_UTIL_GPU, 0.05);
    gs_alerts_eval(f.a, f.s, 0);
    gs_alerts_eval(f.a, f.s, 1000);
    assert_string_equal(state_of(&f, "underutilized", 0, 1000), "inactive"); /* no process */
    f.s->n_procs = 1;
    f.s->procs[0].gpu = 0;
    f.s->procs[0].mem_st = GS_ST_OK;
    f.s->procs[0].gpu_mem_bytes = (uint64_t)(2 * GIB);
    gs_alerts_eval(f.a, f.s, 1001);
    assert_string_equal(state_of(&f, "underutilized", 0, 1001), "pending");
    gs_alerts_eval(f.a, f.s, 1600);
    assert_string_equal(state_of(&f, "underutilized", 0, 1600), "pending");
    gs_alerts_eval(f.a, f.s, 1601);
    assert_string_equal(state_of(&f, "underutilized", 0, 1601), "firing");
    f.s->procs[0].gpu_mem_bytes = (uint64_t)(0.5 * GIB);
    gs_alerts_eval(f.a, f.s, 1602);
    assert_string_equal(state_of(&f, "underutilized", 0, 1602), "resolved");
    fx_close(&f);
}

static void test_throttling(void **state)
{
    struct fx f;

    (void)state;
    fx_open(&f, 1);
    gs_gpu_set(&f.s->gpus[0], GS_M_THROTTLE_ACTIVE, (double)(GS_THR_GPU_IDLE));
    gs_alerts_eval(f.a, f.s, 0);
    assert_string_equal(state_of(&f, "throttling", 0, 0), "inactive");
    gs_gpu_set(&f.s->gpus[0], GS_M_THROTTLE_ACTIVE, (double)(GS_THR_SW_POWER_CAP));
    for (double t = 10; t <= 39; t++)
        gs_alerts_eval(f.a, f.s, t);
    assert_string_equal(state_of(&f, "throttling", 0, 39), "pending");
    gs_gpu_set(&f.s->gpus[0], GS_M_THROTTLE_ACTIVE, (double)(GS_THR_HW_THERMAL));
    for (double t = 40; t <= 45; t++)
        gs_alerts_eval(f.a, f.s, t);
    assert_string_equal(state_of(&f, "throttling", 0, 45), "firing"); /* 30 s past pending */
    fx_close(&f);
}

static void test_absent_never_fires(void **state)
{
    struct fx f;

    (void)state;
    fx_open(&f, 2);
    /* nothing set at all: every reading absent */
    for (double t = 0; t <= 4000; t += 100)
        gs_alerts_eval(f.a, f.s, t);
    for (int s = 0; s < GS_ALERT__SEVS; s++)
        assert_int_equal(gs_alerts_firing(f.a, s), 0);
    /* a firing alert whose value goes absent resolves */
    gs_gpu_set(&f.s->gpus[1], GS_M_TEMP_SLOWDOWN, 90);
    gs_gpu_set(&f.s->gpus[1], GS_M_TEMP_GPU, 89);
    gs_alerts_eval(f.a, f.s, 5000);
    gs_alerts_eval(f.a, f.s, 5020);
    assert_string_equal(state_of(&f, "temperature", 1, 5020), "firing");
    f.s->gpus[1].st[GS_M_TEMP_GPU] = GS_ST_NA;
    gs_alerts_eval(f.a, f.s, 5021);
    assert_string_equal(state_of(&f, "temperature", 1, 5021), "resolved");
    /* a NULL snapshot (driver down) changes nothing */
    gs_alerts_eval(f.a, NULL, 6000);
    fx_close(&f);
}

static void test_imbalance(void **state)
{
    struct fx f;

    (void)state;
    fx_open(&f, 3);
    gs_gpu_set(&f.s->gpus[0], GS_M_UTIL_GPU, 0.95);
    gs_alerts_eval(f.a, f.s, 0); /* one GPU with a value: no spread */
    assert_string_equal(state_of(&f, "imbalance", -1, 0), "inactive");
    gs_gpu_set(&f.s->gpus[1], GS_M_UTIL_GPU, 0.30);
    gs_gpu_set(&f.s->gpus[2], GS_M_UTIL_GPU, 0.90);
    gs_alerts_eval(f.a, f.s, 1);
    assert_string_equal(state_of(&f, "imbalance", -1, 1), "pending");
    gs_alerts_eval(f.a, f.s, 301);
    assert_string_equal(state_of(&f, "imbalance", -1, 301), "firing");
    gs_gpu_set(&f.s->gpus[1], GS_M_UTIL_GPU, 0.80);
    gs_alerts_eval(f.a, f.s, 302);
    assert_string_equal(state_of(&f, "imbalance", -1, 302), "resolved");
    fx_close(&f);
}

static void test_xid(void **state)
{
    struct fx f;

    (void)state;
    fx_open(&f, 1);
    gs_gpu_set(&f.s->gpus[0], GS_M_XID_LAST, 13); /* seen at start: old, no alert */
    gs_alerts_eval(f.a, f.s, 0);
    gs_alerts_eval(f.a, f.s, 1);
    assert_string_equal(state_of(&f, "xid", 0, 1), "inactive");
    gs_gpu_set(&f.s->gpus[0], GS_M_XID_LAST, 79);
    gs_alerts_eval(f.a, f.s, 2);
    assert_string_equal(state_of(&f, "xid", 0, 2), "firing");
    assert_int_equal(gs_alerts_firing(f.a, GS_ALERT_CRITICAL), 1);
    gs_alerts_eval(f.a, f.s, 2 + GS_ALERT_XID_HOLD_S);
    assert_string_equal(state_of(&f, "xid", 0, 2 + GS_ALERT_XID_HOLD_S), "resolved");
    fx_close(&f);
}

static void test_lost(void **state)
{
    struct fx f;
    struct gs_buf b = {0};

    (void)state;
    fx_open(&f, 2);
    gs_alerts_eval(f.a, f.s, 0);
    assert_string_equal(state_of(&f, "gpu_lost", 1, 0), "inactive");
    f.s->gpus[1].lost = 1;
    gs_gpu_set(&f.s->gpus[1], GS_M_TEMP_SLOWDOWN, 90); /* stale values of a lost GPU: ignored */
    gs_gpu_set(&f.s->gpus[1], GS_M_TEMP_GPU, 89);
    gs_alerts_eval(f.a, f.s, 31);
    assert_string_equal(state_of(&f, "gpu_lost", 1, 31), "firing");
    assert_string_equal(state_of(&f, "gpu_lost", 0, 31), "inactive");
    assert_string_equal(state_of(&f, "temperature", 1, 31), "inactive");
    gs_alerts_render_prom(&b, f.a, "n1");
    assert_non_null(
        strstr(b.data, "gpuscope_alerts_firing{hostname=\"n1\",severity=\"critical\"} 1\n"));
    assert_non_null(
        strstr(b.data, "gpuscope_alerts_firing{hostname=\"n1\",severity=\"warning\"} 0\n"));
    gs_buf_free(&b);
    fx_close(&f);
}

/* ---- every default rule across its threshold, with noise ---- */

static uint32_t rng_state;

static double noise(void) /* uniform in [-1, 1), reproducible */
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return (double)(rng_state >> 8) / (double)(1u << 23) - 1.0;
}

static int coin(double p)
{
    return (noise() + 1) / 2 < p;
}

/* Sets GPU 0 (and 1 for the node rule) so that rule's value is x, or for a 0/1 value true with
 * probability x. */
static void drive(struct fx *f, const char *rule, double x)
{
    struct gs_gpu *g = &f->s->gpus[0];

    if (strcmp(rule, "temperature") == 0) {
        gs_gpu_set(g, GS_M_TEMP_SLOWDOWN, 90);
        gs_gpu_set(g, GS_M_TEMP_GPU, 90 - x);
    } else if (strcmp(rule, "memory_full") == 0) {
        gs_gpu_set(g, GS_M_MEM_TOTAL, 1000);
        gs_gpu_set(g, GS_M_MEM_USED, 1000 * x);
    } else if (strcmp(rule, "underutilized") == 0) {
        f->s->n_procs = 1;
        f->s->procs[0].gpu = 0;
        f->s->procs[0].mem_st = GS_ST_OK;
        f->s->procs[0].gpu_mem_bytes = (uint64_t)(2 * GIB);
        gs_gpu_set(g, GS_M_UTIL_GPU, x);
    } else if (strcmp(rule, "imbalance") == 0) {
        gs_gpu_set(g, GS_M_UTIL_GPU, 0.95);
        gs_gpu_set(&f->s->gpus[1], GS_M_UTIL_GPU, 0.95 - x);
    } else if (strcmp(rule, "throttling") == 0) {
        gs_gpu_set(g, GS_M_THROTTLE_ACTIVE, coin(x) ? GS_THR_SW_POWER_CAP : GS_THR_GPU_IDLE);
    } else if (strcmp(rule, "spinning") == 0) {
        gs_gpu_set(g, GS_M_POWER_ENFORCED_LIMIT, 700);
        gs_gpu_set(g, GS_M_POWER_DRAW, coin(x) ? 90 : 450);
        gs_gpu_set(g, GS_M_UTIL_GPU, 1.0);
    } else if (strcmp(rule, "training_hang") == 0) {
        unsigned char stalled[2] = {(unsigned char)coin(x), 0};
        gs_gpu_set(g, GS_M_UTIL_GPU, 0.0);
        gs_alerts_set_stalled(f->a, stalled, 2);
    } else if (strcmp(rule, "pcie_downshift") == 0) {
        gs_gpu_set(g, GS_M_UTIL_GPU, 0.9);
        gs_gpu_set(g, GS_M_PCIE_GEN_MAX, 4);
        gs_gpu_set(g, GS_M_PCIE_WIDTH_MAX, 16);
        gs_gpu_set(g, GS_M_PCIE_WIDTH, 16);
        gs_gpu_set(g, GS_M_PCIE_GEN, coin(x) ? 1 : 4);
    }
}

static void test_defaults_hold_up_under_noise(void **state)
{
    struct gs_alert_rules rs;

    (void)state;
    gs_alert_rules_defaults(&rs);
    for (unsigned ri = 0; ri < rs.n; ri++) {
        const struct gs_alert_rule *r = &rs.r[ri];
        int boolean = strcmp(r->name, "throttling") == 0 || strcmp(r->name, "spinning") == 0 ||
                      strcmp(r->name, "pcie_downshift") == 0 ||
                      strcmp(r->name, "training_hang") == 0;
        double w = (r->for_s > 10 ? r->for_s : 10) + 10, sgn, d, fire, clear, amp;
        unsigned crossings = 0;
        int last_above = -1;
        struct fx f;

        if (strcmp(r->name, "gpu_lost") == 0 || strcmp(r->name, "xid") == 0)
            continue; /* events, not levels: test_lost_and_xid_once */
        fx_open(&f, 2);
        f.only = r->name;
        rng_state = 12345u + ri;
        sgn = r->op == GS_ALERT_GT || r->op == GS_ALERT_GE ? 1 : -1;
        d = r->hysteresis > 0 ? r->hysteresis * 0.7 : 0.05;
        fire = boolean ? 0.85 : r->threshold + sgn * d;
        clear = boolean ? 0.05 : r->threshold - sgn * (r->hysteresis + d);
        amp = 1.5 * d; /* every phase's samples cross a threshold again and again */
        for (double t = 0; t < 11 * w; t++) {
            double level = t >= 3 * w && t < 7 * w ? fire : clear;
            double x = boolean ? level : level + amp * noise();
            int above;
            drive(&f, r->name, x);
            above = sgn * (x - r->threshold) > 0;
            if (last_above >= 0 && above != last_above)
                crossings++;
            last_above = above;
            gs_alerts_eval(f.a, f.s, 1000 + t);
        }
        if (!boolean) /* the instantaneous value flapped: the old engine would have, too */
            assert_true(crossings > 10);
        if (f.events_firing != 1 || f.events_resolved != 1)
            fail_msg("%s: %u firing, %u resolved (want 1 and 1)", r->name, f.events_firing,
                     f.events_resolved);
        fx_close(&f);
    }
}

/* A GPU that falls off the bus with Xid 79: gpu_lost and xid fire once each, and the Xid is
 * not dropped because the GPU is lost; both resolve once. */
static void test_lost_and_xid_once(void **state)
{
    struct fx f;

    (void)state;
    fx_open(&f, 1);
    for (double t = 0; t < 1000; t++) {
        int lost = t >= 100 && t < 400;
        f.s->gpus[0].lost = (uint8_t)lost;
        gs_gpu_set(&f.s->gpus[0], GS_M_XID_LAST, t >= 100 ? 79 : 0);
        gs_alerts_eval(f.a, f.s, t);
        if (t == 101) {
            assert_string_equal(state_of(&f, "gpu_lost", 0, t), "firing");
            assert_string_equal(state_of(&f, "xid", 0, t), "firing");
        }
    }
    assert_int_equal(f.events_firing, 2);
    assert_int_equal(f.events_resolved, 2);
    fx_close(&f);
}

/* training_hang: a stalled rank's GPU fires only while idle or spinning (a long evaluation
 * keeps it busy at full power: no hang), never before the runs module said anything, and
 * resolves when its rank steps again. */
static void test_training_hang(void **state)
{
    struct fx f;
    unsigned char none[2] = {0, 0}, gpu1[2] = {0, 1};

    (void)state;
    fx_open(&f, 2);
    f.only = "training_hang";
    for (unsigned i = 0; i < 2; i++) {
        gs_gpu_set(&f.s->gpus[i], GS_M_UTIL_GPU, 0.0);
        gs_gpu_set(&f.s->gpus[i], GS_M_POWER_ENFORCED_LIMIT, 700);
        gs_gpu_set(&f.s->gpus[i], GS_M_POWER_DRAW, 80);
    }
    for (double t = 0; t < 100; t++) /* no step socket: absent */
        gs_alerts_eval(f.a, f.s, t);
    assert_int_equal(f.events_firing, 0);
    gs_gpu_set(&f.s->gpus[1], GS_M_UTIL_GPU, 0.97);
    gs_gpu_set(&f.s->gpus[1], GS_M_POWER_DRAW, 600); /* busy for real */
    for (double t = 100; t < 200; t++) {
        gs_alerts_set_stalled(f.a, gpu1, 2);
        gs_alerts_eval(f.a, f.s, t);
    }
    assert_int_equal(f.events_firing, 0);
    gs_gpu_set(&f.s->gpus[1], GS_M_POWER_DRAW, 90); /* spinning: a stuck collective */
    for (double t = 200; t < 300; t++) {
        gs_alerts_set_stalled(f.a, gpu1, 2);
        gs_alerts_eval(f.a, f.s, t);
    }
    assert_int_equal(f.events_firing, 1);
    assert_string_equal(state_of(&f, "training_hang", 1, 300), "firing");
    assert_string_equal(state_of(&f, "training_hang", 0, 300), "inactive");
    for (double t = 300; t < 400; t++) {
        gs_alerts_set_stalled(f.a, none, 2);
        gs_alerts_eval(f.a, f.s, t);
    }
    assert_int_equal(f.events_resolved, 1);
    fx_close(&f);
}

static void test_custom_rule_and_reconfigure(void **state)
{
    struct fx f;
    struct gs_err e;

    (void)state;
    fx_open(&f, 1);
    assert_int_equal(gs_alert_rule_set(&f.rs, "hot_mem", "metric", "temperature_memory", "x", &e),
                     GS_OK);
    assert_int_equal(gs_alert_rule_set(&f.rs, "hot_mem", "op", ">=", "x", &e), GS_OK);
    assert_int_equal(gs_alert_rule_set(&f.rs, "hot_mem", "threshold", "90", "x", &e), GS_OK);
    assert_int_equal(gs_alert_rule_set(&f.rs, "hot_mem", "for", "2s", "x", &e), GS_OK);
    assert_int_equal(gs_alert_rule_set(&f.rs, "gpu_lost", "enabled", "off", "x", &e), GS_OK);
    gs_alerts_configure(f.a, &f.rs, f.s, 0);
    gs_gpu_set(&f.s->gpus[0], GS_M_TEMP_MEM, 90);
    f.s->gpus[0].lost = 0;
    gs_alerts_eval(f.a, f.s, 0);
    assert_string_equal(state_of(&f, "hot_mem", 0, 0), "pending");
    gs_alerts_eval(f.a, f.s, 2);
    assert_string_equal(state_of(&f, "hot_mem", 0, 2), "firing");
    f.s->gpus[0].lost = 1;
    gs_alerts_eval(f.a, f.s, 3);
    assert_string_equal(state_of(&f, "gpu_lost", 0, 3), "inactive"); /* disabled */
    fx_close(&f);
}

/* A SIGHUP's rule set: an unchanged rule keeps firing; a changed one, and then every one
 * when alerts go off, resolves at once (notified, listed) instead of hanging in firing. */
static void test_reconfigure_resolves(void **state)
{
    struct fx f;
    struct gs_err e;
    const char *rule[2] = {"a", "b"};

    (void)state;
    fx_open(&f, 1);
    f.rs.n = 0; /* only the two custom rules */
    for (int i = 0; i < 2; i++) {
        assert_int_equal(gs_alert_rule_set(&f.rs, rule[i], "metric", "temperature_gpu", "x", &e),
                         GS_OK);
        assert_int_equal(gs_alert_rule_set(&f.rs, rule[i], "threshold", "50", "x", &e), GS_OK);
        assert_int_equal(gs_alert_rule_set(&f.rs, rule[i], "for", "0s", "x", &e), GS_OK);
    }
    gs_alerts_configure(f.a, &f.rs, f.s, 0);
    gs_gpu_set(&f.s->gpus[0], GS_M_TEMP_GPU, 80);
    gs_alerts_eval(f.a, f.s, 10);
    assert_int_equal(f.events_firing, 2);
    assert_string_equal(state_of(&f, "a", 0, 10), "firing");
    assert_int_equal(gs_alert_rule_set(&f.rs, "b", "threshold", "60", "x", &e), GS_OK);
    gs_alerts_configure(f.a, &f.rs, f.s, 11);
    assert_int_equal(f.events_resolved, 1);
    assert_string_equal(state_of(&f, "a", 0, 11), "firing");   /* unchanged: kept */
    assert_string_equal(state_of(&f, "b", 0, 11), "resolved"); /* changed: resolved */
    gs_alerts_configure(f.a, &f.rs, f.s, 12); /* the same set again: nothing happens */
    assert_int_equal(f.events_resolved, 1);
    f.rs.enabled = 0;
    gs_alerts_configure(f.a, &f.rs, f.s, 13);
    assert_int_equal(f.events_resolved, 2);
    assert_string_equal(state_of(&f, "a", 0, 13), "resolved");
    f.rs.n = 0; /* every rule removed while nothing fires: no more notifications */
    gs_alerts_configure(f.a, &f.rs, f.s, 14);
    assert_int_equal(f.events_resolved, 2);
    assert_int_equal(f.events_firing, 2);
    fx_close(&f);
}

static void expect_conf_error(const char *text, const char *msg)
{
    struct gs_agent_config c;
    struct gs_err e;

    gs_config_defaults(&c);
    assert_int_equal(gs_config_parse_text(&c, "a.conf", text, &e), GS_EINVAL);
    assert_string_equal(e.msg, msg);
}

static void test_config_sections(void **state)
{
    struct gs_agent_config c, c2;
    struct gs_err e;
    char *buf = NULL;
    size_t len = 0;
    FILE *out;
    const struct gs_alert_rule *r = NULL;

    (void)state;
    gs_config_defaults(&c);
    assert_int_equal(c.alerts.enabled, 1);
    assert_true(c.alerts.n >= 7);
    assert_int_equal(gs_config_parse_text(&c, "a.conf",
                                          "interval = 2\nalert_webhook = http://127.0.0.1:9/x\n"
                                          "[alert throttling]\nfor = 1m\n# c\nseverity = critical\n"
                                          "[alert power]\nmetric = power_draw\nop = >\n"
                                          "threshold = 300\nfor = 10s\n"
                                          "[agent]\nlog_level = debug\n",
                                          &e),
                     GS_OK);
    assert_true(c.interval_s == 2);
    assert_string_equal(c.alerts.webhook, "http://127.0.0.1:9/x");
    for (unsigned i = 0; i < c.alerts.n; i++)
        if (strcmp(c.alerts.r[i].name, "throttling") == 0)
            r = &c.alerts.r[i];
    assert_non_null(r);
    assert_true(r->for_s == 60);
    assert_int_equal(r->severity, GS_ALERT_CRITICAL);
    r = &c.alerts.r[c.alerts.n - 1];
    assert_string_equal(r->name, "power");
    assert_int_equal(r->metric, GS_M_POWER_DRAW);
    assert_true(r->threshold == 300 && r->for_s == 10);
    /* the effective configuration reads back the same */
    out = open_memstream(&buf, &len);
    gs_config_write(out, &c);
    fclose(out);
    gs_config_defaults(&c2);
    assert_int_equal(gs_config_parse_text(&c2, "w.conf", buf, &e), GS_OK);
    free(buf);
    assert_int_equal(c2.alerts.n, c.alerts.n);
    assert_memory_equal(c2.alerts.r, c.alerts.r, c.alerts.n * sizeof c.alerts.r[0]);
    assert_int_equal(gs_config_parse_text(&c, "a.conf", "alerts = off\n", &e), GS_OK);
    assert_int_equal(c.alerts.enabled, 0);

    expect_conf_error("[alert x]\nop = >\n", "a.conf:1: alert x: metric: missing");
    expect_conf_error("[alert x]\nop = >\n[agent]\n", "a.conf:1: alert x: metric: missing");
    expect_conf_error("[alert x]\nmetric = bogus\n", "a.conf:2: metric: unknown metric 'bogus'");
    expect_conf_error("[alert temperature]\nop = =>\n",
                      "a.conf:2: op: '=>' is not one of > >= < <= == !=");
    expect_conf_error("[alert temperature]\nfor = 5x\n",
                      "a.conf:2: for: '5x' is not a duration (a number with s, m, h or d)");
    expect_conf_error("[alert temperature]\nseverity = fatal\n",
                      "a.conf:2: severity: 'fatal' is not one of info, warning, critical");
    expect_conf_error("[alert temperature]\nthreshold = hot\n",
                      "a.conf:2: threshold: 'hot' is not a number");
    expect_conf_error("[alert temperature]\ncolour = red\n",
                      "a.conf:2: colour: unknown key (metric, op, threshold, for, hysteresis, "
                      "severity, enabled)");
    expect_conf_error("[alert temperature]\nenabled\n",
                      "a.conf:2: enabled: expected 'key = value'");
    expect_conf_error("[alert a b]\n",
                      "a.conf:1: [alert a b]: bad alert name (letters, digits, _-.)");
    expect_conf_error("alerts = maybe\n", "a.conf:1: alerts: 'maybe' is not one of off, on");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_temperature),
        cmocka_unit_test(test_memory_for_duration),
        cmocka_unit_test(test_underutilized_needs_process),
        cmocka_unit_test(test_throttling),
        cmocka_unit_test(test_absent_never_fires),
        cmocka_unit_test(test_imbalance),
        cmocka_unit_test(test_xid),
        cmocka_unit_test(test_lost),
        cmocka_unit_test(test_defaults_hold_up_under_noise),
        cmocka_unit_test(test_lost_and_xid_once),
        cmocka_unit_test(test_training_hang),
        cmocka_unit_test(test_custom_rule_and_reconfigure),
        cmocka_unit_test(test_reconfigure_resolves),
        cmocka_unit_test(test_config_sections),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
