/*
 * Unit tests of a run's record dispatch (src/run/session.c), with a recording sink: hello,
 * step, end and log records reach the aggregate and the sink in that order; a step dated
 * before the run's start (more than GS_RECORD_BEFORE_RUN_S) or before 2000 is refused,
 * counted and said once; log records are numbered, capped by max_log_points (refused,
 * counted) and their points dropped when the store fails; a step the store refuses or the
 * caller lost is counted in the report's records_dropped; a second hello on one connection
 * replaces the first in the aggregate unless the run has more ranks (first_rank_hello); the
 * name is the first non-empty one; the end record's figures reach the report.
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

#include "gpuscope/gs_err.h"
#include "run/agg.h"
#include "run/record.h"
#include "run/session.h"

#define T0 1764430000.0 /* the run's start in these tests */

/* What the sink saw. */
struct seen {
    unsigned kept[GS_REC_LOG + 1];
    unsigned stored_steps, stored_logs;
    int64_t seqs[8];
    unsigned refused[2];
    uint64_t last_nth;
    char last_why[64];
    int fail_steps, fail_logs; /* the store refuses them */
    char order[32];            /* the sink's calls, one letter each */
    size_t n_order;
};

static void note(struct seen *w, char c)
{
    if (w->n_order + 1 < sizeof w->order)
        w->order[w->n_order++] = c;
}

static void kept(void *ctx, const struct gs_peer *peer, const struct gs_record *rec)
{
    struct seen *w = ctx;

    (void)peer;
    w->kept[rec->type]++;
    note(w, "?hseL"[rec->type]);
}

static int store_step(void *ctx, const struct gs_peer *peer, const struct gs_step_rec *step)
{
    struct seen *w = ctx;

    (void)peer;
    (void)step;
    note(w, 'S');
    if (w->fail_steps)
        return GS_EPERM;
    w->stored_steps++;
    return GS_OK;
}

static int store_log(void *ctx, const struct gs_peer *peer, const struct gs_record_log *log,
                     int64_t seq)
{
    struct seen *w = ctx;

    (void)peer;
    (void)log;
    note(w, 'G');
    if (w->fail_logs)
        return GS_EIO;
    if (w->stored_logs < 8)
        w->seqs[w->stored_logs] = seq;
    w->stored_logs++;
    return GS_OK;
}

static void refused(void *ctx, const struct gs_peer *peer, const struct gs_record *rec,
                    enum gs_session_refusal what, const char *why, uint64_t nth)
{
    struct seen *w = ctx;

    (void)peer;
    (void)rec;
    w->refused[what]++;
    w->last_nth = nth;
    snprintf(w->last_why, sizeof w->last_why, "%s", why);
    note(w, 'R');
}

static const struct gs_peer PEER = {.pid = 4242, .uid = 1000, .gid = 1000, .conn_id = 1};

static struct gs_session *open_session(struct seen *w, const struct gs_session_opts *o)
{
    struct gs_session_sink sink = {.ctx = w,
                                   .kept = kept,
                                   .store_step = store_step,
                                   .store_log = store_log,
                                   .refused = refused};
    struct gs_session *s = NULL;
    struct gs_err err;

    memset(w, 0, sizeof *w);
    assert_int_equal(gs_session_new(&s, o, &sink, &err), GS_OK);
    assert_non_null(s);
    return s;
}

static struct gs_record hello(const char *run, const char *framework)
{
    struct gs_record r;

    memset(&r, 0, sizeof r);
    r.type = GS_REC_HELLO;
    snprintf(r.u.hello.run, sizeof r.u.hello.run, "%s", run);
    snprintf(r.u.hello.framework, sizeof r.u.hello.framework, "%s", framework);
    r.u.hello.pid = -1;
    r.u.hello.rank = 0;
    r.u.hello.world_size = 1;
    r.u.hello.local_rank = 0;
    r.u.hello.logging_steps = -1;
    return r;
}

static struct gs_record step(uint64_t n, double t0)
{
    struct gs_record r;
    struct gs_step_rec *s = &r.u.step;

    memset(&r, 0, sizeof r);
    r.type = GS_REC_STEP;
    for (int p = 0; p < GS_PH_N; p++)
        s->ms[p] = NAN;
    s->ms_x[0] = s->ms_x[1] = NAN;
    s->version = GS_STEP_REC_VERSION;
    s->step = n;
    s->t_begin = t0;
    s->t_end = t0 + 0.25;
    s->ms[GS_PH_FORWARD] = 100;
    s->ms[GS_PH_STEP] = 250;
    s->samples = 8;
    s->device = 0;
    return r;
}

static struct gs_record end_rec(double runtime)
{
    struct gs_record r;

    memset(&r, 0, sizeof r);
    r.type = GS_REC_END;
    r.u.end.train_runtime = runtime;
    r.u.end.train_samples = r.u.end.train_steps = r.u.end.train_loss = NAN;
    return r;
}

static struct gs_record log_rec(double at, unsigned n)
{
    struct gs_record r;

    memset(&r, 0, sizeof r);
    r.type = GS_REC_LOG;
    r.u.log.step = at;
    r.u.log.t = T0 + at;
    r.u.log.rank = 0;
    r.u.log.n = n;
    for (unsigned i = 0; i < n; i++) {
        snprintf(r.u.log.key[i], sizeof r.u.log.key[i], "v%u", i);
        r.u.log.val[i] = at + i;
    }
    return r;
}

static json_t *run_obj(json_t *rep)
{
    json_t *ro = json_object_get(rep, "run");

    assert_true(json_is_object(ro));
    return ro;
}

static void test_dispatch(void **state)
{
    struct seen w;
    struct gs_session_opts o = {.start_s = T0};
    struct gs_session *s = open_session(&w, &o);
    struct gs_record h = hello("bert", "hf"), e = end_rec(12.5), l = log_rec(1, 2);
    struct gs_session_stats st;
    char name[GS_RECORD_STR];
    json_t *rep;
    (void)state;

    assert_int_equal(gs_session_record(s, &PEER, &h), GS_SESSION_KEPT);
    for (uint64_t i = 1; i <= 3; i++) {
        struct gs_record r = step(i, T0 + (double)i);
        assert_int_equal(gs_session_record(s, &PEER, &r), GS_SESSION_KEPT);
    }
    assert_int_equal(gs_session_record(s, &PEER, &l), GS_SESSION_KEPT);
    assert_int_equal(gs_session_record(s, &PEER, &e), GS_SESSION_KEPT);
    /* each record to the sink once, kept before stored */
    assert_string_equal(w.order, "hsSsSsSLGe");
    assert_int_equal(w.stored_steps, 3);
    assert_int_equal(w.stored_logs, 1);
    st = gs_session_stats(s);
    assert_int_equal(st.records, 6);
    assert_int_equal(st.steps, 3);
    assert_int_equal(st.steps_refused, 0);
    assert_int_equal(st.steps_dropped, 0);
    assert_int_equal(st.log_records, 1);
    assert_int_equal(st.log_points, 2);
    assert_int_equal(st.ranks, 1);
    gs_session_name(s, name, sizeof name);
    assert_string_equal(name, "bert");
    rep = gs_session_report(s, NULL);
    assert_non_null(rep);
    assert_string_equal(json_string_value(json_object_get(run_obj(rep), "name")), "bert");
    assert_string_equal(json_string_value(json_object_get(run_obj(rep), "framework")), "hf");
    assert_int_equal(json_integer_value(json_object_get(run_obj(rep), "pid")), 4242);
    assert_int_equal(json_integer_value(json_object_get(run_obj(rep), "uid")), 1000);
    assert_int_equal(json_integer_value(json_object_get(rep, "steps")), 3);
    /* the end record's runtime wins over the steps' wall time */
    assert_true(fabs(json_number_value(json_object_get(rep, "train_runtime")) - 12.5) < 1e-9);
    /* drops not known (no drops_known, none dropped) */
    assert_true(json_is_null(json_object_get(run_obj(rep), "records_dropped")));
    json_decref(rep);
    gs_session_free(s);
    gs_session_free(NULL);
}

static void test_step_before_run_refused(void **state)
{
    struct seen w;
    struct gs_session_opts o = {.start_s = T0};
    struct gs_session *s = open_session(&w, &o);
    struct gs_record early = step(1, T0 - GS_RECORD_BEFORE_RUN_S - 1);
    struct gs_record edge = step(2, T0 - GS_RECORD_BEFORE_RUN_S + 1);
    struct gs_session_stats st;
    json_t *rep;
    (void)state;

    assert_int_equal(gs_session_record(s, &PEER, &early), GS_SESSION_REFUSED);
    assert_int_equal(w.refused[GS_SESSION_STEP_TIME], 1);
    assert_int_equal(w.last_nth, 1);
    assert_non_null(strstr(w.last_why, "before the run began"));
    assert_int_equal(gs_session_record(s, &PEER, &early), GS_SESSION_REFUSED);
    assert_int_equal(w.last_nth, 2); /* the second: the caller says nothing more */
    /* within the margin: kept */
    assert_int_equal(gs_session_record(s, &PEER, &edge), GS_SESSION_KEPT);
    /* neither kept nor stored */
    assert_string_equal(w.order, "RRsS");
    st = gs_session_stats(s);
    assert_int_equal(st.records, 3);
    assert_int_equal(st.steps, 1);
    assert_int_equal(st.steps_refused, 2);
    assert_int_equal(st.steps_dropped, 0);
    rep = gs_session_report(s, NULL);
    assert_int_equal(json_integer_value(json_object_get(rep, "steps")), 1);
    json_decref(rep);
    gs_session_free(s);
}

static void test_step_before_2000_refused(void **state)
{
    struct seen w;
    struct gs_session *s = open_session(&w, NULL); /* start unknown: the 2000 rule only */
    struct gs_record zero = step(1, 5.0), old = step(2, T0 - 86400.0 * 365);
    (void)state;

    assert_int_equal(gs_session_record(s, &PEER, &zero), GS_SESSION_REFUSED);
    assert_non_null(strstr(w.last_why, "before 2000-01-01"));
    /* a year before the run, but the run's start is not known yet */
    assert_int_equal(gs_session_record(s, &PEER, &old), GS_SESSION_KEPT);
    /* once it is, the same step is refused */
    gs_session_set_start(s, T0);
    assert_int_equal(gs_session_record(s, &PEER, &old), GS_SESSION_REFUSED);
    assert_non_null(strstr(w.last_why, "before the run began"));
    assert_int_equal(w.refused[GS_SESSION_STEP_TIME], 2);
    assert_int_equal(gs_session_stats(s).steps_refused, 2);
    assert_int_equal(gs_session_stats(s).steps, 1);
    gs_session_free(s);
}

static void test_log_records(void **state)
{
    struct seen w;
    struct gs_session_opts o = {.start_s = T0, .max_log_points = 5};
    struct gs_session *s = open_session(&w, &o);
    struct gs_record l2 = log_rec(1, 2), l3 = log_rec(2, 3), l1 = log_rec(3, 1);
    struct gs_session_stats st;
    (void)state;

    assert_int_equal(gs_session_record(s, &PEER, &l2), GS_SESSION_KEPT);
    assert_int_equal(gs_session_record(s, &PEER, &l3), GS_SESSION_KEPT); /* 5 points: full */
    assert_int_equal(gs_session_record(s, &PEER, &l1), GS_SESSION_REFUSED);
    assert_int_equal(w.refused[GS_SESSION_LOG_FULL], 1);
    assert_int_equal(w.last_nth, 1);
    assert_int_equal(gs_session_record(s, &PEER, &l2), GS_SESSION_REFUSED);
    assert_int_equal(w.last_nth, 2);
    assert_int_equal(w.stored_logs, 2);
    assert_int_equal(w.seqs[0], 0);
    assert_int_equal(w.seqs[1], 1);
    assert_int_equal(w.kept[GS_REC_LOG], 2);
    st = gs_session_stats(s);
    assert_int_equal(st.log_records, 2);
    assert_int_equal(st.log_points, 5);
    assert_int_equal(st.log_points_dropped, 3);
    gs_session_free(s);

    /* the store refuses them: points dropped, the next record still gets the next seq */
    o.max_log_points = 0;
    s = open_session(&w, &o);
    w.fail_logs = 1;
    assert_int_equal(gs_session_record(s, &PEER, &l3), GS_SESSION_KEPT);
    w.fail_logs = 0;
    assert_int_equal(gs_session_record(s, &PEER, &l2), GS_SESSION_KEPT);
    assert_int_equal(w.seqs[0], 1);
    st = gs_session_stats(s);
    assert_int_equal(st.log_records, 2);
    assert_int_equal(st.log_points, 5);
    assert_int_equal(st.log_points_dropped, 3);
    assert_int_equal(w.refused[GS_SESSION_LOG_FULL], 0);
    gs_session_free(s);
}

static void test_counters(void **state)
{
    struct seen w;
    struct gs_session_opts o = {.start_s = T0, .max_agg_steps = 2, .drops_known = 1};
    struct gs_session *s = open_session(&w, &o);
    struct gs_session_stats st;
    json_t *rep;
    (void)state;

    rep = gs_session_report(s, NULL);
    assert_int_equal(json_integer_value(json_object_get(run_obj(rep), "records_dropped")), 0);
    json_decref(rep);
    for (uint64_t i = 1; i <= 4; i++) {
        struct gs_record r = step(i, T0 + (double)i);
        w.fail_steps = i == 4; /* the store refuses the last one */
        assert_int_equal(gs_session_record(s, &PEER, &r), GS_SESSION_KEPT);
    }
    gs_session_drop_step(s); /* one lost before the session (a rate limit) */
    st = gs_session_stats(s);
    assert_int_equal(st.records, 4);
    assert_int_equal(st.steps, 4); /* every step kept is counted ... */
    assert_int_equal(st.steps_dropped, 2);
    assert_int_equal(w.stored_steps, 3);
    rep = gs_session_report(s, NULL);
    /* ... but max_agg_steps are aggregated */
    assert_int_equal(json_integer_value(json_object_get(rep, "steps")), 2);
    assert_int_equal(json_integer_value(json_object_get(run_obj(rep), "records_dropped")), 2);
    json_decref(rep);
    gs_session_free(s);

    /* without a store nothing is dropped */
    {
        struct gs_session_sink none = {0};
        struct gs_record r = step(1, T0 + 1);
        struct gs_err err;

        assert_int_equal(gs_session_new(&s, &o, &none, &err), GS_OK);
        assert_int_equal(gs_session_record(s, &PEER, &r), GS_SESSION_KEPT);
        assert_int_equal(gs_session_stats(s).steps_dropped, 0);
        gs_session_free(s);
    }
}

static void test_second_hello(void **state)
{
    struct seen w;
    struct gs_session_opts o = {.start_s = T0};
    struct gs_session *s = open_session(&w, &o);
    struct gs_record unnamed = hello("", "torch"), h1 = hello("first", "hf"),
                     h2 = hello("second", "lightning");
    char name[GS_RECORD_STR];
    json_t *rep;
    (void)state;

    /* every hello: the last one wins in the aggregate; the name is the first non-empty one */
    assert_int_equal(gs_session_record(s, &PEER, &unnamed), GS_SESSION_KEPT);
    gs_session_name(s, name, sizeof name);
    assert_string_equal(name, "");
    assert_int_equal(gs_session_record(s, &PEER, &h1), GS_SESSION_KEPT);
    assert_int_equal(gs_session_record(s, &PEER, &h2), GS_SESSION_KEPT);
    assert_int_equal(w.kept[GS_REC_HELLO], 3);
    gs_session_name(s, name, sizeof name);
    assert_string_equal(name, "first");
    rep = gs_session_report(s, NULL);
    assert_string_equal(json_string_value(json_object_get(run_obj(rep), "framework")), "lightning");
    json_decref(rep);
    gs_session_free(s);

    /* first_rank_hello: a second hello on one connection still counts while the run has one
     * rank; once another joined, hellos no longer change the aggregate */
    o.first_rank_hello = 1;
    s = open_session(&w, &o);
    assert_int_equal(gs_session_record(s, &PEER, &h1), GS_SESSION_KEPT);
    assert_int_equal(gs_session_record(s, &PEER, &h2), GS_SESSION_KEPT);
    rep = gs_session_report(s, NULL);
    assert_string_equal(json_string_value(json_object_get(run_obj(rep), "framework")), "lightning");
    json_decref(rep);
    gs_session_add_rank(s);
    assert_int_equal(gs_session_stats(s).ranks, 2);
    assert_int_equal(gs_session_record(s, &PEER, &h1), GS_SESSION_KEPT);
    assert_int_equal(w.kept[GS_REC_HELLO], 3); /* still given to the sink */
    rep = gs_session_report(s, NULL);
    assert_string_equal(json_string_value(json_object_get(run_obj(rep), "framework")), "lightning");
    json_decref(rep);
    gs_session_name(s, name, sizeof name);
    assert_string_equal(name, "first");
    gs_session_free(s);
}

static void test_end(void **state)
{
    struct seen w;
    struct gs_session_opts o = {.start_s = T0};
    struct gs_session *s = open_session(&w, &o);
    struct gs_record e = end_rec(NAN), r = step(1, T0 + 1);
    json_t *rep;
    (void)state;

    e.u.end.outcome.n = 1;
    snprintf(e.u.end.outcome.f[0].key, sizeof e.u.end.outcome.f[0].key, "exception");
    e.u.end.outcome.f[0].type = GS_FACT_STR;
    snprintf(e.u.end.outcome.f[0].v.s, sizeof e.u.end.outcome.f[0].v.s, "ValueError: boom");
    assert_int_equal(gs_session_record(s, &PEER, &r), GS_SESSION_KEPT);
    assert_int_equal(gs_session_record(s, &PEER, &e), GS_SESSION_KEPT);
    assert_int_equal(w.kept[GS_REC_END], 1);
    assert_int_equal(w.stored_steps, 1); /* an end stores nothing */
    rep = gs_session_report(s, NULL);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(rep, "outcome"), "exception")),
        "ValueError: boom");
    json_decref(rep);
    /* records after an end are still the run's (the caller decides when it ends) */
    r = step(2, T0 + 2);
    assert_int_equal(gs_session_record(s, &PEER, &r), GS_SESSION_KEPT);
    assert_int_equal(gs_session_stats(s).steps, 2);
    gs_session_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dispatch),
        cmocka_unit_test(test_step_before_run_refused),
        cmocka_unit_test(test_step_before_2000_refused),
        cmocka_unit_test(test_log_records),
        cmocka_unit_test(test_counters),
        cmocka_unit_test(test_second_hello),
        cmocka_unit_test(test_end),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
