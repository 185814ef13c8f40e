/*
 * GPU usage accounting (issue 27): the arithmetic of src/agent/usage.c (shares, one cycle's
 * accrual), the accounting of hand-made snapshots (two holders sharing a GPU by SM share, an
 * idle holder, energy split, a MIG instance, the minute turning, live jobs and the /metrics
 * series), /api/v1/usage's parameters and document (src/agent/usage_api.c), and the usage
 * table of the history (src/store/usage.c: adds that sum, the roll-up into hours, pruning,
 * grouped reads with the owner and job filters).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tmpdir.h"

#include <jansson.h>

#include "agent/usage.h"
#include "agent/usage_api.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"
#include "store/history.h"
#include "store/usage.h"

#define NEAR(a, b) assert_true(fabs((a) - (b)) < 1e-9)

/* ---- the arithmetic ---- */

static void shares_by_sm_or_equal(void **state)
{
    double sm[3] = {0.6, 0.2, 0}, share[3];

    (void)state;
    gs_usage_shares(3, sm, 1, share);
    NEAR(share[0], 0.75);
    NEAR(share[1], 0.25);
    NEAR(share[2], 0);
    gs_usage_shares(3, sm, 0, share); /* no per-process figures: equal */
    NEAR(share[0], 1.0 / 3);
    NEAR(share[2], 1.0 / 3);
    sm[0] = sm[1] = 0; /* the figures say nobody ran: equal */
    gs_usage_shares(3, sm, 1, share);
    NEAR(share[1], 1.0 / 3);
}

static void accrue_busy_idle_memory_energy(void **state)
{
    struct gs_usage_acc a = {0};

    (void)state;
    gs_usage_accrue(&a, 2.0, 100, 0.8, 0.5, 4.0 * 1073741824.0, 300);
    NEAR(a.held_s, 2);
    NEAR(a.busy_s, 0.8);
    NEAR(a.idle_s, 0);
    NEAR(a.mem_gib_s, 8);
    NEAR(a.energy_j, 300);
    NEAR(a.peak_bytes, 4.0 * 1073741824.0);
    /* 0.8 x 0.05 = 4 % busy: idle */
    gs_usage_accrue(&a, 1.0, 101, 0.8, 0.05, NAN, NAN);
    NEAR(a.held_s, 3);
    NEAR(a.busy_s, 0.84);
    NEAR(a.idle_s, 1);
    NEAR(a.mem_gib_s, 8); /* unknown memory adds nothing */
    /* unknown utilization: held, neither busy nor idle */
    gs_usage_accrue(&a, 1.0, 99, NAN, 1, 1.0, 0);
    NEAR(a.held_s, 4);
    NEAR(a.busy_s, 0.84);
    NEAR(a.idle_s, 1);
    NEAR(a.first_seen, 99);
    NEAR(a.last_seen, 101);
    /* the first cycle (dt 0) only marks the holder as seen */
    gs_usage_accrue(&a, 0, 102, 1, 1, 8.0 * 1073741824.0, 50);
    NEAR(a.held_s, 4);
    NEAR(a.energy_j, 300);
    NEAR(a.peak_bytes, 8.0 * 1073741824.0);
    NEAR(a.last_seen, 102);
}

/* ---- the accounting of snapshots ---- */

struct emitted {
    struct gs_usage_row rows[64];
    unsigned n, calls;
};

static void collect_rows(void *ctx, const struct gs_usage_row *rows, unsigned n)
{
    struct emitted *e = ctx;

    e->calls++;
    for (unsigned i = 0; i < n && e->n < 64; i++)
        e->rows[e->n++] = rows[i];
}

static struct gs_proc *add_proc(struct gs_snapshot *s, unsigned pid, unsigned gpu, uint32_t uid,
                                const char *user, double sm, double mem_gib, const char *slurm)
{
    struct gs_proc *p = &s->procs[s->n_procs++];

    memset(p, 0, sizeof *p);
    p->pid = pid;
    p->gpu = gpu;
    p->type = GS_PROC_COMPUTE;
    p->gi_id = p->ci_id = 0xFFFFFFFFu;
    p->host_st = GS_ST_OK;
    p->uid = uid;
    snprintf(p->user, sizeof p->user, "%s", user);
    p->util_st = GS_ST_OK;
    p->sm_util = sm;
    p->mem_st = GS_ST_OK;
    p->gpu_mem_bytes = (uint64_t)(mem_gib * 1073741824.0);
    snprintf(p->slurm_job, sizeof p->slurm_job, "%s", slurm ? slurm : "");
    return p;
}

/* Two GPUs: GPU 0 at 80 % shared by alice (SM 0.6, job 11) and bob (SM 0.2); GPU 1 at 0 %
 * held by carol (job 12, idle). Energy counters at e0, e1. */
static struct gs_snapshot *two_gpus(double t, double e0, double e1)
{
    struct gs_snapshot *s = NULL;
    struct gs_err err;

    assert_int_equal(gs_snapshot_new(&s, 2, 8, &err), GS_OK);
    s->t_real = t;
    s->t_mono_ns = (int64_t)(t * 1e9);
    for (unsigned i = 0; i < 2; i++) {
        s->gpus[i].index = i;
        snprintf(s->gpus[i].text[GS_T_UUID], GS_STR_LEN, "GPU-%u", i);
        s->gpus[i].tst[GS_T_UUID] = GS_ST_OK;
        gs_gpu_set(&s->gpus[i], GS_M_UTIL_GPU, i == 0 ? 0.8 : 0.0);
        gs_gpu_set(&s->gpus[i], GS_M_ENERGY, i == 0 ? e0 : e1);
    }
    add_proc(s, 100, 0, 1001, "alice", 0.6, 10, "11");
    add_proc(s, 101, 0, 1001, "alice", 0, 2, "11"); /* a second process of the same holder */
    add_proc(s, 200, 0, 1002, "bob", 0.2, 4, NULL);
    add_proc(s, 300, 1, 1003, "carol", 0, 1, "12");
    return s;
}

static const struct gs_usage_row *find_row(const struct emitted *e, const char *user, unsigned gpu)
{
    for (unsigned i = 0; i < e->n; i++)
        if (strcmp(e->rows[i].h.user, user) == 0 && e->rows[i].gpu == gpu)
            return &e->rows[i];
    return NULL;
}

static void cycles_split_shared_gpu(void **state)
{
    struct emitted e = {0};
    struct gs_usage_opts o = {.emit = collect_rows, .emit_ctx = &e};
    struct gs_usage *u = NULL;
    const struct gs_usage_row *r;
    double t0 = 1800000000; /* a minute boundary */

    (void)state;
    assert_int_equal(gs_usage_new(&u, &o), GS_OK);
    /* 11 cycles 2 s apart: 10 accounted intervals (20 s); energy +1000 J and +100 J each */
    for (int k = 0; k <= 10; k++) {
        struct gs_snapshot *s = two_gpus(t0 + 2.0 * k, 5000 + 1000.0 * k, 700 + 100.0 * k);
        gs_usage_cycle(u, s);
        gs_snapshot_free(s);
    }
    assert_int_equal(e.calls, 0); /* still the same minute */
    gs_usage_flush(u);
    assert_int_equal(e.calls, 1);
    assert_int_equal(e.n, 3);
    r = find_row(&e, "alice", 0);
    assert_non_null(r);
    assert_string_equal(r->h.job, "11");
    assert_string_equal(r->uuid, "GPU-0");
    NEAR(r->t, t0);
    assert_int_equal(r->res, 60);
    NEAR(r->a.held_s, 20);
    NEAR(r->a.busy_s, 20 * 0.8 * 0.75); /* SM 0.6 of 0.8 */
    NEAR(r->a.idle_s, 0);
    NEAR(r->a.mem_gib_s, 20 * 12); /* both processes' memory */
    NEAR(r->a.peak_bytes, 12 * 1073741824.0);
    NEAR(r->a.energy_j, 10 * 1000 * 0.75);
    r = find_row(&e, "bob", 0);
    assert_non_null(r);
    assert_string_equal(r->h.job, "");
    NEAR(r->a.busy_s, 20 * 0.8 * 0.25);
    NEAR(r->a.idle_s, 0);
    NEAR(r->a.energy_j, 10 * 1000 * 0.25);
    r = find_row(&e, "carol", 1);
    assert_non_null(r);
    NEAR(r->a.held_s, 20);
    NEAR(r->a.busy_s, 0);
    NEAR(r->a.idle_s, 20);
    NEAR(r->a.energy_j, 10 * 100); /* an idle GPU's energy goes to its holder whole */
    NEAR(r->a.first_seen, t0);
    NEAR(r->a.last_seen, t0 + 20);
    gs_usage_free(u);
}

/* A holder whose processes have no per-process sample (idle in the driver's window) counts 0
 * SM; a GPU without any per-process figure is split equally. */
static void idle_sharer_without_samples(void **state)
{
    struct emitted e = {0};
    struct gs_usage_opts o = {.emit = collect_rows, .emit_ctx = &e};
    struct gs_usage *u = NULL;
    double t0 = 1800000000;

    (void)state;
    assert_int_equal(gs_usage_new(&u, &o), GS_OK);
    for (int pass = 0; pass < 2; pass++) {
        for (int k = 0; k <= 2; k++) {
            struct gs_snapshot *s = two_gpus(t0 + pass * 120 + k, 0, 0);
            s->procs[2].util_st = GS_ST_NA; /* bob: no sample */
            if (pass == 1)
                for (unsigned i = 0; i < s->n_procs; i++)
                    s->procs[i].util_st = GS_ST_NA; /* nobody has one */
            gs_usage_cycle(u, s);
            gs_snapshot_free(s);
        }
        gs_usage_flush(u);
    }
    /* pass 0: alice all of 0.8, bob idle; pass 1 (dt 30 s at the gap, then 1 s): equal */
    assert_true(e.n >= 6);
    NEAR(find_row(&e, "alice", 0)->a.busy_s, 2 * 0.8);
    NEAR(find_row(&e, "bob", 0)->a.busy_s, 0);
    NEAR(find_row(&e, "bob", 0)->a.idle_s, 2);
    NEAR(e.rows[3].a.busy_s + e.rows[4].a.busy_s, (GS_USAGE_MAX_GAP_S + 2) * 0.8);
    NEAR(e.rows[3].a.busy_s, e.rows[4].a.busy_s);
    gs_usage_free(u);
}

static void minute_turns_and_gap_is_capped(void **state)
{
    struct emitted e = {0};
    struct gs_usage_opts o = {.emit = collect_rows, .emit_ctx = &e};
    struct gs_usage *u = NULL;
    double t0 = 1800000000 + 50;
    double ts[] = {t0, t0 + 5, t0 + 10, t0 + 15, t0 + 15 + 100};
    const struct gs_usage_row *r;

    (void)state;
    assert_int_equal(gs_usage_new(&u, &o), GS_OK);
    for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) {
        struct gs_snapshot *s = two_gpus(ts[k], 0, 0);
        gs_usage_cycle(u, s);
        gs_snapshot_free(s);
    }
    /* t0+10 is in the next minute: the first minute (t0, t0+5: 5 s) was handed over then, and
     * the 100 s gap (an agent that stood still) counts GS_USAGE_MAX_GAP_S and turned another */
    assert_int_equal(e.calls, 2);
    r = find_row(&e, "carol", 1);
    assert_non_null(r);
    NEAR(r->t, 1800000000);
    NEAR(r->a.held_s, 5);
    e.n = 0;
    gs_usage_flush(u);
    r = find_row(&e, "carol", 1);
    assert_non_null(r);
    NEAR(r->a.held_s, GS_USAGE_MAX_GAP_S);
    gs_usage_free(u);
}

static int contains(const char *hay, const char *needle)
{
    return strstr(hay, needle) != NULL;
}

static void metrics_series_and_live_jobs(void **state)
{
    struct gs_usage_opts o = {0};
    struct gs_usage *u = NULL;
    struct gs_buf b = {0};
    double t0 = 1800000000;

    (void)state;
    assert_int_equal(gs_usage_new(&u, &o), GS_OK);
    for (int k = 0; k <= 3; k++) {
        struct gs_snapshot *s = two_gpus(t0 + k, 0, 0);
        gs_usage_cycle(u, s);
        gs_snapshot_free(s);
    }
    gs_usage_render_prom(u, &b, -1, GS_USAGE_PROM_COUNTERS | GS_USAGE_PROM_JOBS);
    assert_non_null(b.data);
    assert_true(contains(b.data, "# TYPE gpuscope_usage_held_seconds_total counter\n"));
    assert_true(contains(
        b.data, "gpuscope_usage_held_seconds_total{gpu=\"0\",uuid=\"GPU-0\",user=\"alice\"} 3\n"));
    assert_true(contains(
        b.data,
        "gpuscope_usage_idle_held_seconds_total{gpu=\"1\",uuid=\"GPU-1\",user=\"carol\"} 3\n"));
    assert_true(contains(b.data, "gpuscope_usage_busy_seconds_total{"));
    assert_true(contains(b.data, "gpuscope_usage_memory_gib_seconds_total{"));
    assert_true(contains(b.data, "gpuscope_usage_energy_joules_total{"));
    assert_true(contains(b.data, "gpuscope_job_gpu_held{gpu=\"0\",uuid=\"GPU-0\",job_id=\"11\","
                                 "user=\"alice\"} 1\n"));
    assert_true(contains(b.data, "gpuscope_job_gpu_idle_seconds{gpu=\"1\",uuid=\"GPU-1\","
                                 "job_id=\"12\",user=\"carol\"} 3\n"));
    assert_true(contains(b.data, "gpuscope_job_gpu_idle_seconds{gpu=\"0\",uuid=\"GPU-0\","
                                 "job_id=\"11\",user=\"alice\"} 0\n"));
    assert_false(contains(b.data, "job_id=\"\"")); /* bob has no job: no job series */
    gs_buf_free(&b);
    /* each part alone: the counters (what a Pushgateway gets) and the jobs' gauges */
    gs_usage_render_prom(u, &b, -1, GS_USAGE_PROM_COUNTERS);
    assert_false(contains(b.data, "gpuscope_job_gpu"));
    assert_true(contains(b.data, "gpuscope_usage_dropped_total 0\n"));
    gs_buf_free(&b);
    gs_usage_render_prom(u, &b, -1, GS_USAGE_PROM_JOBS);
    assert_false(contains(b.data, "gpuscope_usage_"));
    assert_true(contains(b.data, "gpuscope_job_gpu_held{"));
    gs_buf_free(&b);
    /* a filtered viewer (carol's uid) */
    gs_usage_render_prom(u, &b, 1003, GS_USAGE_PROM_COUNTERS | GS_USAGE_PROM_JOBS);
    assert_false(contains(b.data, "alice"));
    assert_true(contains(b.data, "user=\"carol\""));
    gs_buf_free(&b);
    /* carol's job ends: its gauges go, her counters stay */
    {
        struct gs_snapshot *s = two_gpus(t0 + 4, 0, 0);
        s->n_procs = 3;
        gs_usage_cycle(u, s);
        gs_snapshot_free(s);
    }
    gs_usage_render_prom(u, &b, -1, GS_USAGE_PROM_COUNTERS | GS_USAGE_PROM_JOBS);
    assert_false(contains(b.data, "job_id=\"12\""));
    assert_true(contains(b.data, "user=\"carol\"} 3\n"));
    gs_buf_free(&b);
    gs_usage_free(u);
}

static void mig_instance_by_gpm(void **state)
{
    struct emitted e = {0};
    struct gs_usage_opts o = {.emit = collect_rows, .emit_ctx = &e};
    struct gs_usage *u = NULL;
    struct gs_snapshot *s;
    struct gs_err err;

    (void)state;
    assert_int_equal(gs_usage_new(&u, &o), GS_OK);
    for (int k = 0; k <= 2; k++) {
        assert_int_equal(gs_snapshot_new(&s, 1, 4, &err), GS_OK);
        s->t_real = 1800000000 + k;
        s->t_mono_ns = (int64_t)(s->t_real * 1e9);
        s->gpus[0].n_mig = 1;
        s->gpus[0].mig[0].gi_id = 1;
        s->gpus[0].mig[0].ci_id = 0;
        snprintf(s->gpus[0].mig[0].uuid, GS_STR_LEN, "MIG-1");
        s->gpus[0].mig[0].gpm_st[GS_MIG_GPM_SM_ACTIVE] = GS_ST_OK;
        s->gpus[0].mig[0].gpm[GS_MIG_GPM_SM_ACTIVE] = 0.5;
        gs_gpu_set(&s->gpus[0], GS_M_ENERGY, 1000.0 * k);
        struct gs_proc *p = add_proc(s, 100, 0, 1001, "alice", 0, 1, NULL);
        p->gi_id = 1;
        p->ci_id = 0;
        gs_usage_cycle(u, s);
        gs_snapshot_free(s);
    }
    gs_usage_flush(u);
    assert_int_equal(e.n, 1);
    assert_string_equal(e.rows[0].uuid, "MIG-1");
    NEAR(e.rows[0].a.held_s, 2);
    NEAR(e.rows[0].a.busy_s, 1);
    NEAR(e.rows[0].a.energy_j, 0); /* the counter is the whole GPU's */
    gs_usage_free(u);
}

/* ---- /api/v1/usage ---- */

static void req_parse(void **state)
{
    struct gs_usage_sel sel = {0};
    char msg[256];

    (void)state;
    assert_int_equal(gs_usage_req_parse(&sel, NULL, NULL, NULL, NULL, 1000000, msg, sizeof msg),
                     GS_OK);
    assert_int_equal(sel.by, GS_USAGE_BY_USER);
    NEAR(sel.to, 1000000);
    NEAR(sel.from, 1000000 - 7 * 86400.0);
    assert_int_equal(gs_usage_req_parse(&sel, "pod", "100", "200.5", "42", 0, msg, sizeof msg),
                     GS_OK);
    assert_int_equal(sel.by, GS_USAGE_BY_POD);
    NEAR(sel.from, 100);
    NEAR(sel.to, 200.5);
    assert_string_equal(sel.job, "42");
    assert_int_equal(gs_usage_req_parse(&sel, "team", NULL, NULL, NULL, 0, msg, sizeof msg),
                     GS_EINVAL);
    assert_string_equal(msg, "by: 'team' is not one of user, job, pod, namespace, gpu");
    assert_int_equal(gs_usage_req_parse(&sel, NULL, "1e3", "5000", NULL, 0, msg, sizeof msg),
                     GS_EINVAL);
    assert_string_equal(msg, "from: '1e3' is not a unix time in seconds");
    assert_int_equal(gs_usage_req_parse(&sel, NULL, "-5", "5000", NULL, 0, msg, sizeof msg),
                     GS_EINVAL);
    assert_int_equal(gs_usage_req_parse(&sel, NULL, "300", "200", NULL, 0, msg, sizeof msg),
                     GS_EINVAL);
    assert_string_equal(msg, "from: must be before to (300 >= 200)");
    assert_int_equal(gs_usage_req_parse(&sel, NULL, NULL, NULL, "", 10, msg, sizeof msg),
                     GS_EINVAL);
    assert_string_equal(msg, "job: must be 1..319 bytes");
}

static struct gs_usage_row mkrow(double t, uint32_t uid, const char *user, const char *job,
                                 unsigned gpu, double held, double busy, double idle, double kj)
{
    struct gs_usage_row r;

    memset(&r, 0, sizeof r);
    r.t = t;
    r.res = 60;
    r.gpu = gpu;
    snprintf(r.uuid, sizeof r.uuid, "GPU-%u", gpu);
    r.h.uid = uid;
    snprintf(r.h.user, sizeof r.h.user, "%s", user);
    snprintf(r.h.job, sizeof r.h.job, "%s", job);
    r.a.held_s = held;
    r.a.busy_s = busy;
    r.a.idle_s = idle;
    r.a.mem_gib_s = held * 2;
    r.a.energy_j = kj * 1000;
    r.a.peak_bytes = 1e9 * gpu + 1;
    r.a.first_seen = t;
    r.a.last_seen = t + 59;
    return r;
}

static void answer_json_with_cost(void **state)
{
    struct gs_usage_answer a;
    struct gs_usage_group g;
    struct gs_usage_row live[3];
    struct gs_usage_prices pr = {.gpu_hour_price = 2, .kwh_price = 0.5, .currency = "EUR"};
    json_t *doc, *rows, *r0;
    char *text;
    size_t len;

    (void)state;
    memset(&a, 0, sizeof a);
    a.sel.by = GS_USAGE_BY_USER;
    a.sel.from = 0;
    a.sel.to = 1e10;
    /* from the history: alice 1 h held, 0.5 h busy */
    memset(&g, 0, sizeof g);
    g.uid = 1001;
    snprintf(g.user, sizeof g.user, "alice");
    g.gpu = -1;
    g.a.held_s = 3600;
    g.a.busy_s = 1800;
    g.a.energy_j = 3.6e6;
    g.a.first_seen = 100;
    g.a.last_seen = 200;
    assert_int_equal(gs_usage_answer_group(&a, &g), 0);
    /* the current minute: alice on GPU 1 (one more hour), bob, and a row out of range */
    live[0] = mkrow(5000, 1001, "alice", "7", 1, 3600, 0, 3600, 0);
    live[1] = mkrow(5000, 1002, "bob", "", 0, 1800, 900, 0, 0);
    live[2] = mkrow(2e10, 1002, "bob", "", 0, 1800, 900, 0, 0);
    gs_usage_answer_rows(&a, live, 3);
    text = gs_usage_answer_json(&a, &pr, &len);
    assert_non_null(text);
    doc = json_loads(text, 0, NULL);
    free(text);
    assert_non_null(doc);
    assert_string_equal(json_string_value(json_object_get(doc, "by")), "user");
    assert_string_equal(json_string_value(json_object_get(doc, "currency")), "EUR");
    rows = json_object_get(doc, "rows");
    assert_int_equal(json_array_size(rows), 2);
    r0 = json_array_get(rows, 0);
    assert_string_equal(json_string_value(json_object_get(r0, "key")), "alice");
    assert_int_equal(json_integer_value(json_object_get(r0, "uid")), 1001);
    NEAR(json_real_value(json_object_get(r0, "held_gpu_hours")), 2);
    NEAR(json_real_value(json_object_get(r0, "busy_share")), 0.25);
    NEAR(json_real_value(json_object_get(r0, "idle_held_hours")), 1);
    NEAR(json_real_value(json_object_get(r0, "energy_kwh")), 1);
    NEAR(json_real_value(json_object_get(r0, "cost")), 2 * 2 + 1 * 0.5);
    NEAR(json_real_value(json_object_get(r0, "first_seen")), 100);
    NEAR(json_real_value(json_object_get(r0, "last_seen")), 5059);
    assert_true(json_is_null(json_object_get(r0, "job"))); /* the history's group had none */
    assert_string_equal(json_string_value(json_object_get(json_array_get(rows, 1), "key")), "bob");
    json_decref(doc);

    /* unpriced, by gpu, owner filter: only bob's rows */
    memset(&a, 0, sizeof a);
    a.sel.by = GS_USAGE_BY_GPU;
    a.sel.to = 1e10;
    a.sel.owner_only = 1;
    a.sel.uid = 1002;
    gs_usage_answer_rows(&a, live, 3);
    text = gs_usage_answer_json(&a, NULL, &len);
    doc = json_loads(text, 0, NULL);
    free(text);
    rows = json_object_get(doc, "rows");
    assert_int_equal(json_array_size(rows), 1);
    r0 = json_array_get(rows, 0);
    assert_string_equal(json_string_value(json_object_get(r0, "key")), "0");
    assert_string_equal(json_string_value(json_object_get(r0, "user")), "bob");
    assert_true(json_is_null(json_object_get(r0, "cost")));
    assert_true(json_is_null(json_object_get(doc, "currency")));
    json_decref(doc);
}

/* ---- the usage table ---- */

static int setup_tmp(void **state)
{
    return tmp_setup(state, "/tmp/gs_usage_XXXXXX", "history.db");
}

static int teardown_tmp(void **state)
{
    return tmp_teardown(state);
}

struct groups {
    struct gs_usage_group g[16];
    unsigned n;
};

static int take_group(void *ctx, const struct gs_usage_group *g)
{
    struct groups *gs = ctx;

    if (gs->n < 16)
        gs->g[gs->n++] = *g;
    return 0;
}

static void read_groups(struct gs_store *st, struct gs_usage_sel *sel, struct groups *out)
{
    struct gs_err err;

    out->n = 0;
    assert_int_equal(gs_store_usage_query(st, sel, take_group, out, &err), GS_OK);
}

static void store_add_rollup_prune_query(void **state)
{
    struct tmp *t = *state;
    struct gs_store *st = NULL;
    struct gs_err err;
    struct gs_usage_row rows[4];
    struct gs_usage_sel sel = {.from = 0, .to = 1e10, .by = GS_USAGE_BY_USER};
    struct groups gs;
    unsigned changed;
    double h0 = 1800000000 - 1800000000 % 3600; /* an hour boundary */

    assert_int_equal(gs_store_open(&st, t->db, NULL, &err), GS_OK);
    rows[0] = mkrow(h0, 1001, "alice", "7", 0, 60, 30, 0, 1);
    rows[1] = mkrow(h0 + 60, 1001, "alice", "7", 0, 60, 30, 0, 1);
    rows[2] = mkrow(h0 + 60, 1002, "bob", "", 1, 60, 0, 60, 2);
    rows[3] = mkrow(h0 + 7200, 1001, "alice", "8", 1, 30, 30, 0, 0);
    assert_int_equal(gs_store_usage_add(st, rows, 4, &err), GS_OK);
    /* the same bucket again (an agent restarted within the minute): added into its row */
    assert_int_equal(gs_store_usage_add(st, rows, 1, &err), GS_OK);
    read_groups(st, &sel, &gs);
    assert_int_equal(gs.n, 2);
    assert_int_equal(gs.g[0].uid, 1001); /* most held first */
    assert_string_equal(gs.g[0].user, "alice");
    NEAR(gs.g[0].a.held_s, 60 + 60 + 60 + 30);
    NEAR(gs.g[0].a.busy_s, 30 + 30 + 30 + 30);
    assert_int_equal(gs.g[0].gpu, -1);    /* two GPUs */
    assert_string_equal(gs.g[0].job, ""); /* two jobs */
    assert_int_equal(gs.g[1].gpu, 1);
    NEAR(gs.g[1].a.idle_s, 60);
    NEAR(gs.g[1].a.energy_j, 2000);
    /* by job, one job, one owner */
    sel.by = GS_USAGE_BY_JOB;
    read_groups(st, &sel, &gs);
    assert_int_equal(gs.n, 3);
    sel.job = "7";
    read_groups(st, &sel, &gs);
    assert_int_equal(gs.n, 1);
    NEAR(gs.g[0].a.held_s, 180);
    assert_int_equal(gs.g[0].gpu, 0);
    sel.job = NULL;
    sel.by = GS_USAGE_BY_GPU;
    sel.owner_only = 1;
    sel.uid = 1002;
    read_groups(st, &sel, &gs);
    assert_int_equal(gs.n, 1);
    assert_string_equal(gs.g[0].uuid, "GPU-1");
    assert_string_equal(gs.g[0].user, "bob");
    sel.owner_only = 0;
    /* by pod and by namespace: bob's row is in pod ml/trainer-0 (added once more with it) */
    {
        struct gs_usage_row pr = mkrow(h0 + 120, 1002, "bob", "ml/trainer-0", 1, 10, 0, 10, 0);
        snprintf(pr.h.pod, sizeof pr.h.pod, "trainer-0");
        snprintf(pr.h.ns, sizeof pr.h.ns, "ml");
        assert_int_equal(gs_store_usage_add(st, &pr, 1, &err), GS_OK);
    }
    sel.by = GS_USAGE_BY_POD;
    read_groups(st, &sel, &gs);
    assert_int_equal(gs.n, 2); /* the pod, and the rows of no pod */
    assert_string_equal(gs.g[1].pod, "trainer-0");
    assert_string_equal(gs.g[1].ns, "ml");
    assert_string_equal(gs.g[1].job, "ml/trainer-0");
    assert_int_equal(gs.g[1].uid, 1002);
    NEAR(gs.g[1].a.held_s, 10);
    assert_int_equal(gs.g[0].uid, -1); /* alice and bob */
    sel.by = GS_USAGE_BY_NS;
    read_groups(st, &sel, &gs);
    assert_int_equal(gs.n, 2);
    assert_string_equal(gs.g[1].ns, "ml");
    assert_string_equal(gs.g[1].pod, "trainer-0"); /* one pod in it */
    sel.by = GS_USAGE_BY_USER;
    /* a range takes the buckets that overlap it: [h0+90, h0+100) is inside the minute h0+60 */
    sel.by = GS_USAGE_BY_USER;
    sel.from = h0 + 90;
    sel.to = h0 + 100;
    read_groups(st, &sel, &gs);
    assert_int_equal(gs.n, 2);
    NEAR(gs.g[0].a.held_s + gs.g[1].a.held_s, 120);

    /* roll the first hour's minutes into an hour row (raw retention ends at h0 + 3600) */
    assert_int_equal(gs_store_usage_prune(st, h0 + 3600 + 3600, 3600, 0, &changed, &err), GS_OK);
    assert_int_equal(changed, 4); /* the four minute rows of the first hour */
    sel.from = 0;
    sel.to = 1e10;
    read_groups(st, &sel, &gs);
    NEAR(gs.g[0].a.held_s, 210); /* nothing lost */
    /* the hour row answers a range inside its hour */
    sel.from = h0 + 1000;
    sel.to = h0 + 1001;
    read_groups(st, &sel, &gs);
    assert_int_equal(gs.n, 2);
    /* prune the hour rows after the roll-up retention */
    assert_int_equal(gs_store_usage_prune(st, h0 + 2 * 3600 + 1, 1e9, 3600, &changed, &err), GS_OK);
    sel.from = 0;
    sel.to = 1e10;
    read_groups(st, &sel, &gs);
    assert_int_equal(gs.n, 1); /* alice's minute at h0 + 7200 is left */
    NEAR(gs.g[0].a.held_s, 30);
    gs_store_close(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(shares_by_sm_or_equal),
        cmocka_unit_test(accrue_busy_idle_memory_energy),
        cmocka_unit_test(cycles_split_shared_gpu),
        cmocka_unit_test(idle_sharer_without_samples),
        cmocka_unit_test(minute_turns_and_gap_is_capped),
        cmocka_unit_test(metrics_series_and_live_jobs),
        cmocka_unit_test(mig_instance_by_gpm),
        cmocka_unit_test(req_parse),
        cmocka_unit_test(answer_json_with_cost),
        cmocka_unit_test_setup_teardown(store_add_rollup_prune_query, setup_tmp, teardown_tmp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
