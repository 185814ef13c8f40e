/*
 * Unit tests of the agent's runs pages (src/agent/runs_http.c through gs_runs_http) over a
 * real history.db in a temp dir: runs written with the store (three ended runs of the agent,
 * two owners; one of `gpuscope run`, never listed; one left without an end, rebuilt as
 * "interrupted" at open), then read back: the list newest first, paged, counted and hidden by
 * the viewer's uid; one run's report, annotated, another uid's a 404; a run's steps and
 * logged values, paged with "next"; bad ids and parameters 400/404. A live run through the
 * socket (src/agent/runs.c over run/session): listed first as "running", its report live,
 * a step dated before 2000 refused and counted, stored when its connection closes. A run
 * resumed by its token (another uid's refused) across a closed connection and an agent restart.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <jansson.h>

#include "agent/recorder.h"
#include "agent/runs.h"
#include "base/clock.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_run.h"
#include "store/history.h"

#define T0 1764430000.0

struct fx {
    char dir[64];
    char db[128];
    char sock[96];
    struct gs_recorder *rec;
    struct gs_runs *runs;
    int64_t id[5]; /* A, B, C (agent, ended), D (gpuscope run), E (agent, no end) */
};

static struct gs_step_rec step_rec(uint64_t n)
{
    struct gs_step_rec s;

    memset(&s, 0, sizeof s);
    for (int p = 0; p < GS_PH_N; p++)
        s.ms[p] = NAN;
    s.ms_x[0] = s.ms_x[1] = NAN;
    s.version = GS_STEP_REC_VERSION;
    s.step = n;
    s.t_begin = T0 + (double)n;
    s.t_end = s.t_begin + 0.5;
    s.ms[GS_PH_FORWARD] = 200;
    s.ms[GS_PH_STEP] = 500;
    s.samples = 4;
    return s;
}

/* One run row with its steps (sender uid), logged records and, when report_uid >= 0, an end
 * with a report naming that uid. */
static int64_t put_run(struct gs_store *st, const char *name, const char *source, int64_t uid,
                       unsigned steps, unsigned logs, int ended)
{
    struct gs_store_run run = {
        .name = name, .source = source, .hostname = "node1", .start_time = T0, .tags = NULL};
    struct gs_err err;
    int64_t id = 0;
    char report[256];

    if (strcmp(name, "a") == 0)
        run.tags = "{\"team\":\"nlp\"}";
    assert_int_equal(gs_store_run_begin(st, &run, &id, &err), GS_OK);
    for (unsigned i = 0; i < steps; i++) {
        struct gs_step_rec s = step_rec(i + 1);
        assert_int_equal(gs_store_run_step(st, id, &s, 100 + uid, uid, &err), GS_OK);
    }
    for (unsigned i = 0; i < logs; i++) {
        struct gs_store_log l = {.seq = i, .step = i + 1, .t = T0 + i, .rank = 0, .n = 2};
        snprintf(l.key[0], sizeof l.key[0], "loss");
        snprintf(l.key[1], sizeof l.key[1], "learning_rate");
        l.value[0] = 2.0 - 0.1 * i;
        l.value[1] = 1e-4;
        assert_int_equal(gs_store_run_log(st, id, &l, &err), GS_OK);
    }
    if (ended) {
        snprintf(report, sizeof report,
                 "{\"run\":{\"name\":\"%s\",\"uid\":%lld,\"pid\":%lld,"
                 "\"steps_received\":%u},\"train_runtime\":10.0,"
                 "\"findings\":[{\"id\":\"input_bound\"}]}",
                 name, (long long)uid, (long long)(100 + uid), steps);
        assert_int_equal(gs_store_run_end(st, id, T0 + 60, -1, report, &err), GS_OK);
    }
    return id;
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    struct gs_store *st = NULL;
    struct gs_err err;
    struct gs_runs_opts o = {0};

    assert_non_null(f);
    snprintf(f->dir, sizeof f->dir, "/tmp/gs-agent-runs-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->db, sizeof f->db, "%s/history.db", f->dir);
    snprintf(f->sock, sizeof f->sock, "%s/run/steps.sock", f->dir);
    assert_int_equal(gs_store_open(&st, f->db, NULL, &err), GS_OK);
    f->id[0] = put_run(st, "a", "agent", 1000, 3, 2, 1);
    f->id[1] = put_run(st, "b", "agent", 2000, 1, 0, 1);
    f->id[2] = put_run(st, "c", "agent", 1000, 0, 0, 1);
    f->id[3] = put_run(st, "d", "gpuscope-run", 1000, 1, 0, 1);
    f->id[4] = put_run(st, "e", "agent", 1000, 2, 0, 0); /* the agent stopped during it */
    assert_int_equal(gs_store_flush(st, &err), GS_OK);
    gs_store_close(st);
    assert_int_equal(gs_recorder_open(&f->rec, f->dir, &err), GS_OK);
    o.socket_path = f->sock;
    o.rec = f->rec;
    o.history_path = f->db;
    o.hostname = "node1";
    assert_int_equal(gs_runs_open(&f->runs, &o, &err), GS_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    char cmd[160];

    gs_runs_close(f->runs);
    gs_recorder_close(f->rec);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

/* GET path?from&limit for who: the status, the body parsed into *doc. */
static unsigned get(struct fx *f, const char *path, const char *from, const char *limit,
                    const struct gs_runs_who *who, json_t **doc)
{
    char *body = NULL;
    size_t len = 0;
    unsigned code = gs_runs_http(f->runs, path, from, limit, who, &body, &len);

    assert_non_null(body);
    assert_int_equal(strlen(body), len);
    *doc = json_loads(body, 0, NULL);
    assert_non_null(*doc);
    free(body);
    return code;
}

static int64_t jint(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);

    if (!json_is_integer(v))
        fail_msg("%s: not an integer", key);
    return json_integer_value(v);
}

static const char *jstr(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);

    if (!json_is_string(v))
        fail_msg("%s: not a string", key);
    return json_string_value(v);
}

/* The ids of a list's runs, in order. */
static void ids_are(const json_t *doc, const int64_t *want, size_t n)
{
    const json_t *runs = json_object_get(doc, "runs");

    assert_int_equal(json_array_size(runs), n);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(jint(json_array_get(runs, i), "id"), want[i]);
}

static void test_list_paging_and_visibility(void **state)
{
    struct fx *f = *state;
    struct gs_runs_who u1000 = {.all = 0, .uid = 1000}, u2000 = {.all = 0, .uid = 2000},
                       nobody = {.all = 0, .uid = -1}, all = {.all = 1, .uid = -1};
    json_t *doc, *a;

    /* every run of the agent, newest first; `gpuscope run`'s is not the agent's */
    assert_int_equal(get(f, "/api/v1/runs", NULL, NULL, NULL, &doc), 200);
    assert_int_equal(jint(doc, "total"), 4);
    assert_int_equal(jint(doc, "from"), 0);
    assert_int_equal(jint(doc, "limit"), 100);
    assert_null(json_object_get(doc, "hidden")); /* nothing filtered */
    {
        int64_t want[] = {f->id[4], f->id[2], f->id[1], f->id[0]};
        ids_are(doc, want, 4);
    }
    a = json_array_get(json_object_get(doc, "runs"), 3);
    assert_string_equal(jstr(a, "name"), "a");
    assert_string_equal(jstr(a, "state"), "ended");
    assert_int_equal(jint(a, "uid"), 1000);
    assert_int_equal(jint(a, "steps"), 3);
    assert_string_equal(jstr(json_object_get(a, "tags"), "team"), "nlp");
    assert_string_equal(json_string_value(json_array_get(json_object_get(a, "findings"), 0)),
                        "input_bound");
    /* the run the agent did not see end: rebuilt from its steps at open */
    assert_string_equal(jstr(json_array_get(json_object_get(doc, "runs"), 0), "state"),
                        "interrupted");
    json_decref(doc);
    /* a page */
    assert_int_equal(get(f, "/api/v1/runs/", "1", "2", &all, &doc), 200);
    assert_int_equal(jint(doc, "total"), 4);
    {
        int64_t want[] = {f->id[2], f->id[1]};
        ids_are(doc, want, 2);
    }
    json_decref(doc);
    /* one uid's: counted and paged among its own, the others "hidden" */
    assert_int_equal(get(f, "/api/v1/runs", NULL, NULL, &u1000, &doc), 200);
    assert_int_equal(jint(doc, "total"), 3);
    assert_int_equal(jint(doc, "hidden"), 1);
    {
        int64_t want[] = {f->id[4], f->id[2], f->id[0]};
        ids_are(doc, want, 3);
    }
    json_decref(doc);
    assert_int_equal(get(f, "/api/v1/runs", "1", "1", &u1000, &doc), 200);
    {
        int64_t want[] = {f->id[2]};
        ids_are(doc, want, 1);
    }
    json_decref(doc);
    assert_int_equal(get(f, "/api/v1/runs", NULL, NULL, &u2000, &doc), 200);
    assert_int_equal(jint(doc, "total"), 1);
    assert_int_equal(jint(doc, "hidden"), 3);
    json_decref(doc);
    assert_int_equal(get(f, "/api/v1/runs", NULL, NULL, &nobody, &doc), 200);
    assert_int_equal(jint(doc, "total"), 0);
    assert_int_equal(jint(doc, "hidden"), 4);
    assert_int_equal(json_array_size(json_object_get(doc, "runs")), 0);
    json_decref(doc);
}

static void test_report(void **state)
{
    struct fx *f = *state;
    struct gs_runs_who u1000 = {.all = 0, .uid = 1000}, u2000 = {.all = 0, .uid = 2000};
    char path[64];
    json_t *doc, *ro;

    snprintf(path, sizeof path, "/api/v1/runs/%lld", (long long)f->id[0]);
    assert_int_equal(get(f, path, NULL, NULL, &u1000, &doc), 200);
    ro = json_object_get(doc, "run");
    assert_int_equal(jint(ro, "id"), f->id[0]);
    assert_string_equal(jstr(ro, "state"), "ended");
    assert_string_equal(jstr(ro, "name"), "a");
    assert_non_null(json_object_get(ro, "user")); /* a name or null */
    assert_true(fabs(json_number_value(json_object_get(doc, "train_runtime")) - 10.0) < 1e-9);
    json_decref(doc);
    /* another uid's run is no run */
    assert_int_equal(get(f, path, NULL, NULL, &u2000, &doc), 404);
    assert_non_null(strstr(jstr(doc, "error"), "no run"));
    json_decref(doc);
    /* the interrupted one: its report rebuilt from the two stored steps */
    snprintf(path, sizeof path, "/api/v1/runs/%lld", (long long)f->id[4]);
    assert_int_equal(get(f, path, NULL, NULL, NULL, &doc), 200);
    ro = json_object_get(doc, "run");
    assert_string_equal(jstr(ro, "state"), "interrupted");
    assert_true(json_is_true(json_object_get(ro, "interrupted")));
    assert_int_equal(jint(ro, "steps_received"), 2);
    assert_int_equal(jint(ro, "uid"), 1000);
    assert_int_equal(jint(doc, "steps"), 2);
    json_decref(doc);
    /* `gpuscope run`'s run is not the agent's */
    snprintf(path, sizeof path, "/api/v1/runs/%lld", (long long)f->id[3]);
    assert_int_equal(get(f, path, NULL, NULL, NULL, &doc), 404);
    json_decref(doc);
}

static void test_steps_and_logs(void **state)
{
    struct fx *f = *state;
    struct gs_runs_who u1000 = {.all = 0, .uid = 1000}, u2000 = {.all = 0, .uid = 2000};
    char path[64];
    json_t *doc, *s0, *l0;

    snprintf(path, sizeof path, "/api/v1/runs/%lld/steps", (long long)f->id[0]);
    assert_int_equal(get(f, path, NULL, "2", &u1000, &doc), 200);
    assert_int_equal(jint(doc, "id"), f->id[0]);
    assert_int_equal(jint(doc, "total"), 3);
    assert_int_equal(jint(doc, "limit"), 2);
    assert_int_equal(jint(doc, "next"), 2);
    assert_int_equal(json_array_size(json_object_get(doc, "steps")), 2);
    s0 = json_array_get(json_object_get(doc, "steps"), 0);
    assert_int_equal(jint(s0, "step"), 1);
    assert_int_equal(jint(s0, "peer_uid"), 1000);
    assert_int_equal(jint(s0, "peer_pid"), 1100);
    assert_true(fabs(json_number_value(json_object_get(s0, "forward_ms")) - 200) < 1e-9);
    assert_true(json_is_null(json_object_get(s0, "data_ms"))); /* unknown stays null */
    assert_true(json_is_null(json_object_get(s0, "mem_total")));
    json_decref(doc);
    assert_int_equal(get(f, path, "2", "2", NULL, &doc), 200);
    assert_int_equal(json_array_size(json_object_get(doc, "steps")), 1);
    assert_true(json_is_null(json_object_get(doc, "next"))); /* the last page */
    json_decref(doc);
    assert_int_equal(get(f, path, NULL, NULL, &u2000, &doc), 404);
    json_decref(doc);

    snprintf(path, sizeof path, "/api/v1/runs/%lld/logs", (long long)f->id[0]);
    assert_int_equal(get(f, path, NULL, "1", &u1000, &doc), 200);
    assert_int_equal(jint(doc, "total"), 2);
    assert_int_equal(jint(doc, "points"), 4);
    assert_int_equal(jint(doc, "dropped"), 0);
    assert_int_equal(jint(doc, "next"), 1);
    l0 = json_array_get(json_object_get(doc, "logs"), 0);
    assert_int_equal(jint(l0, "step"), 1);
    assert_int_equal(jint(l0, "rank"), 0);
    assert_true(fabs(json_number_value(json_object_get(json_object_get(l0, "values"), "loss")) -
                     2.0) < 1e-9);
    json_decref(doc);
    assert_int_equal(get(f, path, NULL, NULL, &u2000, &doc), 404);
    json_decref(doc);
    /* a run without logged values: an empty page */
    snprintf(path, sizeof path, "/api/v1/runs/%lld/logs", (long long)f->id[2]);
    assert_int_equal(get(f, path, NULL, NULL, NULL, &doc), 200);
    assert_int_equal(jint(doc, "total"), 0);
    assert_true(json_is_null(json_object_get(doc, "next")));
    json_decref(doc);
}

static void test_bad_requests(void **state)
{
    struct fx *f = *state;
    static const struct {
        const char *path, *from, *limit;
        unsigned code;
    } cases[] = {
        {"/api/v1/runs", "x", NULL, 400},
        {"/api/v1/runs", "-1", NULL, 400},
        {"/api/v1/runs", NULL, "0", 400},
        {"/api/v1/runs", NULL, "1001", 400},
        {"/api/v1/runs", NULL, "", 400},
        {"/api/v1/runs/1/steps", NULL, "2x", 400},
        {"/api/v1/runs/1", "0", NULL, 400}, /* from, limit: not for a report */
        {"/api/v1/runsX", NULL, NULL, 404},
        {"/api/v1/runs/abc", NULL, NULL, 404},
        {"/api/v1/runs/0", NULL, NULL, 404},
        {"/api/v1/runs/01", NULL, NULL, 404},
        {"/api/v1/runs/999", NULL, NULL, 404},
        {"/api/v1/runs/999/steps", NULL, NULL, 404},
        {"/api/v1/runs/999/logs", NULL, NULL, 404},
        {"/api/v1/runs/1/other", NULL, NULL, 404},
        {"/api/v1/runs/99999999999999999999999", NULL, NULL, 404},
    };
    json_t *doc;

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unsigned code = get(f, cases[i].path, cases[i].from, cases[i].limit, NULL, &doc);
        if (code != cases[i].code)
            fail_msg("%s from=%s limit=%s: %u, want %u", cases[i].path,
                     cases[i].from ? cases[i].from : "-", cases[i].limit ? cases[i].limit : "-",
                     code, cases[i].code);
        assert_true(json_is_string(json_object_get(doc, "error")));
        json_decref(doc);
    }
}

static void send_msg(int fd, const char *msg)
{
    assert_int_equal(send(fd, msg, strlen(msg), 0), (ssize_t)strlen(msg));
}

/* Waits (at most 5 s) until the runs' stats satisfy field >= want. */
#define WAIT_FOR(f, field, want)                                                                   \
    do {                                                                                           \
        int64_t until_ = gs_clock_mono_ns() + 5 * GS_NS_PER_S;                                     \
        while (gs_runs_stats((f)->runs).field < (want) && gs_clock_mono_ns() < until_)             \
            usleep(5000);                                                                          \
        assert_true(gs_runs_stats((f)->runs).field >= (want));                                     \
    } while (0)

static void test_live_run(void **state)
{
    struct fx *f = *state;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    char msg[256], path[64];
    json_t *doc, *first;
    int64_t id;
    struct gs_runs_stats st;

    assert_true(fd >= 0);
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", f->sock);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    send_msg(fd, "{\"v\":1,\"type\":\"hello\",\"run\":\"live\",\"rank\":0,\"world_size\":1}");
    snprintf(msg, sizeof msg,
             "{\"v\":1,\"type\":\"step\",\"step\":1,\"t0\":%.3f,\"t1\":%.3f,\"rank\":0,"
             "\"ms\":{\"forward\":100,\"total_step\":250}}",
             gs_clock_real_s(), gs_clock_real_s() + 0.25);
    send_msg(fd, msg);
    /* dated 1970: refused and counted, never in the run */
    send_msg(fd, "{\"v\":1,\"type\":\"step\",\"step\":2,\"t0\":5.0,\"t1\":5.2,\"rank\":0}");
    WAIT_FOR(f, records, 3);
    st = gs_runs_stats(f->runs);
    assert_int_equal(st.live, 1);
    assert_int_equal(st.runs_started, 1);
    assert_int_equal(st.refused[GS_RUNS_REF_STEP_TIME], 1);
    assert_int_equal(st.steps_dropped, 1);
    /* listed first, running */
    assert_int_equal(get(f, "/api/v1/runs", NULL, NULL, NULL, &doc), 200);
    assert_int_equal(jint(doc, "total"), 5);
    first = json_array_get(json_object_get(doc, "runs"), 0);
    assert_string_equal(jstr(first, "state"), "running");
    assert_string_equal(jstr(first, "name"), "live");
    assert_int_equal(jint(first, "steps"), 1);
    assert_int_equal(jint(first, "uid"), (int64_t)getuid());
    id = jint(first, "id");
    json_decref(doc);
    snprintf(path, sizeof path, "/api/v1/runs/%lld", (long long)id);
    assert_int_equal(get(f, path, NULL, NULL, NULL, &doc), 200);
    assert_string_equal(jstr(json_object_get(doc, "run"), "state"), "running");
    assert_int_equal(jint(json_object_get(doc, "run"), "steps_received"), 1);
    assert_int_equal(jint(doc, "steps"), 1);
    json_decref(doc);
    /* another uid sees nothing of it */
    {
        struct gs_runs_who other = {.all = 0, .uid = (int64_t)getuid() + 1};
        assert_int_equal(get(f, path, NULL, NULL, &other, &doc), 404);
        json_decref(doc);
    }
    /* its connection closes: the run ends, its report stored */
    close(fd);
    WAIT_FOR(f, runs_ended, 1);
    /* counted as ended when it leaves the table; stored a moment later */
    {
        int64_t until = gs_clock_mono_ns() + 5 * GS_NS_PER_S;
        unsigned code;
        while ((code = get(f, path, NULL, NULL, NULL, &doc)) == 404 && gs_clock_mono_ns() < until) {
            json_decref(doc);
            usleep(5000);
        }
        assert_int_equal(code, 200);
    }
    assert_string_equal(jstr(json_object_get(doc, "run"), "state"), "ended");
    assert_int_equal(jint(json_object_get(doc, "run"), "steps_received"), 1);
    assert_int_equal(jint(json_object_get(doc, "run"), "records_dropped"), 0);
    json_decref(doc);
}

/* ---- resuming a run (a hello's token: runs.h resume_timeout_s) ---- */

#define TOKEN "0123456789abcdef0123456789abcdef"

static int connect_sock(const struct fx *f)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);

    assert_true(fd >= 0);
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", f->sock);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    return fd;
}

static void send_step(int fd, int n)
{
    char msg[256];

    snprintf(msg, sizeof msg,
             "{\"v\":1,\"type\":\"step\",\"step\":%d,\"t0\":%.3f,\"t1\":%.3f,\"rank\":0,"
             "\"ms\":{\"forward\":100,\"total_step\":250}}",
             n, gs_clock_real_s(), gs_clock_real_s() + 0.25);
    send_msg(fd, msg);
}

/* Waits (at most 5 s) until run id's state (GET /api/v1/runs/ID) is want; its report. */
static json_t *wait_state(struct fx *f, int64_t id, const char *want)
{
    char path[64];
    int64_t until = gs_clock_mono_ns() + 5 * GS_NS_PER_S;
    json_t *doc = NULL;

    snprintf(path, sizeof path, "/api/v1/runs/%lld", (long long)id);
    for (;;) {
        unsigned code = get(f, path, NULL, NULL, NULL, &doc);
        const char *st = code == 200 ? jstr(json_object_get(doc, "run"), "state") : NULL;
        if ((st && strcmp(st, want) == 0) || gs_clock_mono_ns() > until)
            break;
        json_decref(doc);
        usleep(5000);
    }
    assert_string_equal(jstr(json_object_get(doc, "run"), "state"), want);
    return doc;
}

static void reopen(struct fx *f, unsigned resume_timeout_s)
{
    struct gs_runs_opts o = {.socket_path = f->sock,
                             .history_path = f->db,
                             .hostname = "node1",
                             .resume_timeout_s = resume_timeout_s};
    struct gs_err err;

    gs_runs_close(f->runs);
    f->runs = NULL;
    /* the agent's restart: its recorder too (its buffered steps are written at close) */
    gs_recorder_close(f->rec);
    assert_int_equal(gs_recorder_open(&f->rec, f->dir, &err), GS_OK);
    o.rec = f->rec;
    assert_int_equal(gs_runs_open(&f->runs, &o, &err), GS_OK);
}

/* A run with a token whose connection closes without an end is kept "interrupted"; its token
 * from another uid is refused (a run of its own); from its uid it resumes the same run. An
 * agent restart leaves it without an end; the new agent puts it back, interrupted, with its
 * stored steps, and the sender's next hello resumes it again: one run, every step, the
 * sender's dropped count in the report. Not resumed within the timeout: ended, interrupted. */
static void test_resume(void **state)
{
    struct fx *f = *state;
    json_t *doc, *ro;
    int64_t id;
    int fd;

    reopen(f, 2);
    fd = connect_sock(f);
    send_msg(fd, "{\"v\":1,\"type\":\"hello\",\"run\":\"res\",\"token\":\"" TOKEN "\"}");
    send_step(fd, 1);
    send_step(fd, 2);
    WAIT_FOR(f, records, 3);
    assert_int_equal(get(f, "/api/v1/runs", NULL, NULL, NULL, &doc), 200);
    id = jint(json_array_get(json_object_get(doc, "runs"), 0), "id");
    json_decref(doc);
    close(fd);
    doc = wait_state(f, id, "interrupted");
    json_decref(doc);
    if (getuid() == 0) { /* another uid with the token: refused, a run of its own */
        assert_int_equal(chmod(f->dir, 0755), 0); /* the socket's directory, for that uid */
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) { /* no cmocka here: a failure is the exit status */
            static const char hello[] =
                "{\"v\":1,\"type\":\"hello\",\"run\":\"x\",\"token\":\"" TOKEN "\"}";
            struct sockaddr_un sa = {.sun_family = AF_UNIX};
            int c;
            if (setgid(65534) != 0 || setuid(65534) != 0)
                _exit(2);
            snprintf(sa.sun_path, sizeof sa.sun_path, "%s", f->sock);
            c = socket(AF_UNIX, SOCK_SEQPACKET, 0);
            if (c < 0 || connect(c, (struct sockaddr *)&sa, sizeof sa) != 0)
                _exit(3);
            if (send(c, hello, strlen(hello), 0) != (ssize_t)strlen(hello))
                _exit(4);
            close(c);
            _exit(0);
        }
        int wst = 0;
        assert_int_equal(waitpid(pid, &wst, 0), pid);
        assert_true(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
        WAIT_FOR(f, refused[GS_RUNS_REF_RESUME_UID], 1);
        WAIT_FOR(f, runs_ended, 1); /* its own run, no token: ended at its close */
        doc = wait_state(f, id, "interrupted");
        assert_int_equal(jint(json_object_get(doc, "run"), "steps_received"), 2);
        json_decref(doc);
    }
    /* the same uid, the same token: the same run again */
    fd = connect_sock(f);
    send_msg(fd,
             "{\"v\":1,\"type\":\"hello\",\"run\":\"res\",\"token\":\"" TOKEN "\",\"dropped\":0}");
    send_step(fd, 3);
    WAIT_FOR(f, runs_resumed, 1);
    doc = wait_state(f, id, "running");
    json_decref(doc);
    /* the agent restarts under it */
    reopen(f, 2);
    close(fd);
    doc = wait_state(f, id, "interrupted");
    assert_int_equal(jint(json_object_get(doc, "run"), "steps_received"), 3);
    json_decref(doc);
    fd = connect_sock(f);
    send_msg(fd,
             "{\"v\":1,\"type\":\"hello\",\"run\":\"res\",\"token\":\"" TOKEN "\",\"dropped\":4}");
    send_step(fd, 8);
    WAIT_FOR(f, runs_resumed, 1);
    doc = wait_state(f, id, "running");
    json_decref(doc);
    send_msg(fd, "{\"v\":1,\"type\":\"end\"}");
    doc = wait_state(f, id, "ended");
    ro = json_object_get(doc, "run");
    assert_int_equal(jint(ro, "steps_received"), 4);
    assert_int_equal(jint(ro, "records_dropped"), 4);
    json_decref(doc);
    close(fd);
    /* one run: the list has it once */
    {
        struct gs_runs_who all = {.all = 1};
        size_t n = 0, i;
        json_t *it;
        assert_int_equal(get(f, "/api/v1/runs", NULL, "100", &all, &doc), 200);
        json_array_foreach(json_object_get(doc, "runs"), i, it) n += jint(it, "id") == id;
        assert_int_equal(n, 1);
        json_decref(doc);
    }
    /* not resumed within the timeout (2 s): ended, its report "interrupted" */
    fd = connect_sock(f);
    send_msg(fd, "{\"v\":1,\"type\":\"hello\",\"run\":\"gone\",\"token\":"
                 "\"ffffffffffffffffffffffffffffffff\"}");
    send_step(fd, 1);
    WAIT_FOR(f, runs_started, 1);
    assert_int_equal(get(f, "/api/v1/runs", NULL, NULL, NULL, &doc), 200);
    id = jint(json_array_get(json_object_get(doc, "runs"), 0), "id");
    json_decref(doc);
    close(fd);
    doc = wait_state(f, id, "interrupted");
    json_decref(doc);
    {
        int64_t until = gs_clock_mono_ns() + 8 * GS_NS_PER_S;
        while (gs_runs_stats(f->runs).runs_ended < 2 && gs_clock_mono_ns() < until)
            usleep(20000);
        assert_int_equal(gs_runs_stats(f->runs).runs_ended, 2);
    }
    doc = wait_state(f, id, "interrupted");
    assert_true(json_is_true(json_object_get(json_object_get(doc, "run"), "interrupted")));
    assert_int_equal(jint(json_object_get(doc, "run"), "steps_received"), 1);
    json_decref(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_list_paging_and_visibility, setup, teardown),
        cmocka_unit_test_setup_teardown(test_report, setup, teardown),
        cmocka_unit_test_setup_teardown(test_steps_and_logs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_requests, setup, teardown),
        cmocka_unit_test_setup_teardown(test_live_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resume, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
