/*
 * Unit tests of the in-process run API (src/run/client.c, include/gpuscope/gs_run.h): config
 * errors; steps aggregated into the report gs_run_finish returns and writes; the receiver path
 * end to end through the real receiver (src/run/receiver.c): hello, every step and the end
 * arrive in order with our pid from SO_PEERCRED; a receiver that never reads does not block
 * gs_run_step and finish gives it up; a receiver that goes away and comes back gets the hello
 * again (same token) and every queued step in order; the sampler thread on nvml-sim attributes only
 * the GPU where this process runs, and reads the driver's sub-second utilization samples (a square
 * wave whose peak the snapshots alone miss); run.records_dropped: 0 without a receiver, the
 * sender's drops with a stuck one; the run's GPUs: a child's and the configured device through
 * a UUID in CUDA_VISIBLE_DEVICES (run/attrib.h); warnings of gs_run_open as notes, never on
 * stderr; API misuse (NULLs, step after finish, finish twice). Threads and
 * teardown also run under the sanitizer build.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "gpuscope/gs_err.h"
#include "gpuscope/gs_run.h"
#include "run/receiver.h"

#define MAXREC 64

static double now_mono(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static struct gs_step_rec mkrec(uint64_t step, double fwd_ms)
{
    struct gs_step_rec r = {
        .version = GS_STEP_REC_VERSION, .step = step, .samples = 4, .device = -1};

    r.t_begin = 1700000000.0 + (double)step;
    r.t_end = r.t_begin + 0.01;
    r.ms_x[0] = r.ms_x[1] = NAN;
    for (int i = 0; i < GS_PH_N; i++)
        r.ms[i] = NAN;
    r.ms[GS_PH_DATA] = 1.0;
    r.ms[GS_PH_FORWARD] = fwd_ms;
    r.ms[GS_PH_STEP] = 10.0;
    return r;
}

static json_t *finish_json(struct gs_run *run, const char *end)
{
    char err[256] = "";
    char *text = gs_run_finish(run, end, err, sizeof err);
    json_t *rep;

    assert_non_null(text);
    rep = json_loads(text, 0, NULL);
    gs_free(text);
    assert_non_null(rep);
    return rep;
}

static void test_config_errors(void **state)
{
    static const char *bad[][2] = {
        {"{", "config"},
        {"{\"nvml\": \"yes\"}", "nvml"},
        {"{\"rank\": 70000}", "rank"},
        {"{\"devices\": [0, -1]}", "devices[1]"},
        {"{\"sample_interval_s\": \"1\"}", "sample_interval_s"},
        {"{\"run_name\": 3}", "run_name"},
        {"[]", "object"},
    };
    char err[256];

    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        assert_null(gs_run_open(bad[i][0], err, sizeof err));
        assert_non_null(strstr(err, bad[i][1]));
    }
}

static void test_in_process_report(void **state)
{
    char dir[] = "/tmp/gs-client-XXXXXX", path[128], err[256] = "";
    struct gs_run *run;
    json_t *rep, *file;
    const double fwd[] = {2, 4, 6, 8};

    (void)state;
    setenv("GPUSCOPE_AGENT_SOCKET", "/nonexistent/agent.sock", 1);
    unsetenv("GPUSCOPE_RUN_SOCKET");
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path,
             "{\"output_dir\": \"%s\", \"nvml\": \"off\", "
             "\"run_name\": \"unit\"}",
             dir);
    run = gs_run_open(path, err, sizeof err);
    assert_non_null(run);
    for (int i = 0; i < 4; i++) {
        struct gs_step_rec r = mkrec((uint64_t)i + 1, fwd[i]);
        r.tokens = 1000;
        if (i == 3) { /* a version-2 caller: its struct ends before tokens, never read */
            r.version = 2;
            r.tokens = 999999;
        }
        assert_int_equal(gs_run_step(run, &r), 0);
    }
    rep = finish_json(run, "{\"train_runtime\": 4.0, \"train_samples\": 16}");
    assert_int_equal(json_integer_value(json_object_get(rep, "train_tokens")), 3000);
    assert_int_equal(json_integer_value(json_object_get(rep, "steps")), 4);
    /* no receiver: nothing to drop, and that is known */
    assert_true(json_is_integer(json_object_get(json_object_get(rep, "run"), "records_dropped")));
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(rep, "run"), "records_dropped")), 0);
    assert_true(fabs(json_real_value(json_object_get(
                         json_object_get(json_object_get(rep, "phases"), "forward"), "mean_ms")) -
                     5.0) < 1e-6);
    assert_true(fabs(json_number_value(json_object_get(rep, "train_samples_per_second")) - 4.0) <
                1e-9);
    assert_true(fabs(json_number_value(json_object_get(rep, "data_loading_time_ratio")) -
                     4.0 / 44.0) < 1e-9);
    snprintf(path, sizeof path, "%s/metrics_report.json", dir);
    file = json_load_file(path, 0, NULL);
    assert_non_null(file);
    assert_int_equal(json_integer_value(json_object_get(file, "steps")), 4);
    json_decref(file);
    json_decref(rep);
    gs_run_close(run);
    unlink(path);
    rmdir(dir);
}

struct seen {
    pthread_mutex_t lock;
    unsigned n;
    enum gs_record_type type[MAXREC];
    uint64_t step[MAXREC];
    double fwd[MAXREC];
    pid_t pid;
    char run[GS_RECORD_STR];
    double end_runtime;
    unsigned n_facts;
    int64_t workers;
};

static void on_record(void *ctx, const struct gs_peer *peer, const struct gs_record *rec)
{
    struct seen *s = ctx;

    pthread_mutex_lock(&s->lock);
    if (s->n < MAXREC) {
        s->type[s->n] = rec->type;
        if (rec->type == GS_REC_STEP) {
            s->step[s->n] = rec->u.step.step;
            s->fwd[s->n] = rec->u.step.ms[GS_PH_FORWARD];
        } else if (rec->type == GS_REC_HELLO) {
            const struct gs_fact *w = gs_record_fact_get(&rec->u.hello.facts, "loader_num_workers");
            snprintf(s->run, sizeof s->run, "%s", rec->u.hello.run);
            s->n_facts = rec->u.hello.facts.n;
            s->workers = w && w->type == GS_FACT_INT ? w->v.i : -1;
        } else {
            s->end_runtime = rec->u.end.train_runtime;
        }
    }
    s->pid = peer->pid;
    s->n++;
    pthread_mutex_unlock(&s->lock);
}

static void test_receiver_path(void **state)
{
    char dir[] = "/tmp/gs-client-XXXXXX", sock[128], err[256] = "";
    static struct seen seen = {.lock = PTHREAD_MUTEX_INITIALIZER};
    struct gs_receiver_cb cb = {.ctx = &seen, .on_record = on_record};
    struct gs_receiver *rx = NULL;
    struct gs_run *run;
    json_t *rep;
    double t0;

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(sock, sizeof sock, "%s/run.sock", dir);
    {
        struct gs_err e;
        assert_int_equal(gs_receiver_start(&rx, sock, 0600, &cb, &e), GS_OK);
    }
    setenv("GPUSCOPE_RUN_SOCKET", sock, 1);
    run = gs_run_open("{\"run_name\": \"rx\", \"nvml\": \"auto\", \"facts\": "
                      "{\"loader_num_workers\": 3, \"bf16\": true}}",
                      err, sizeof err);
    unsetenv("GPUSCOPE_RUN_SOCKET");
    assert_non_null(run);
    for (int i = 1; i <= 5; i++) {
        struct gs_step_rec r = mkrec((uint64_t)i, 1.5 * i);
        assert_int_equal(gs_run_step(run, &r), 0);
    }
    rep = finish_json(run, "{\"train_runtime\": 7.25}");
    assert_int_equal(json_integer_value(json_object_get(rep, "steps")), 5);
    /* with a receiver there is no in-process sampling */
    assert_int_equal(json_array_size(json_object_get(rep, "gpus")), 0);
    json_decref(rep);
    gs_run_close(run);
    t0 = now_mono();
    for (;;) { /* the receiver thread may still be reading */
        pthread_mutex_lock(&seen.lock);
        unsigned n = seen.n;
        pthread_mutex_unlock(&seen.lock);
        if (n >= 7 || now_mono() - t0 > 5)
            break;
        usleep(10000);
    }
    gs_receiver_stop(rx);
    assert_int_equal(seen.n, 7);
    assert_int_equal(seen.type[0], GS_REC_HELLO);
    assert_string_equal(seen.run, "rx");
    assert_int_equal(seen.n_facts, 2); /* facts travel in the hello */
    assert_int_equal(seen.workers, 3);
    for (int i = 1; i <= 5; i++) {
        assert_int_equal(seen.type[i], GS_REC_STEP);
        assert_int_equal(seen.step[i], (uint64_t)i);
        assert_true(fabs(seen.fwd[i] - 1.5 * i) < 1e-12);
    }
    assert_int_equal(seen.type[6], GS_REC_END);
    assert_true(fabs(seen.end_runtime - 7.25) < 1e-12);
    assert_int_equal(seen.pid, getpid());
    rmdir(dir);
}

/* The next message on fd (at most 5 s) parsed; NULL when none came. */
static json_t *recv_json(int fd)
{
    char buf[8192];
    struct timeval tv = {.tv_sec = 5};
    ssize_t n;

    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    n = recv(fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return NULL;
    buf[n] = '\0';
    return json_loads(buf, 0, NULL);
}

/* A listening SOCK_SEQPACKET socket at path. */
static int listen_at(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);

    assert_true(fd >= 0);
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(fd, 4), 0);
    {
        struct timeval tv = {.tv_sec = 5}; /* accept waits at most this (Linux) */
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }
    return fd;
}

/* The receiver goes away and comes back (an agent restart): the sender keeps the steps in its
 * queue, connects again, sends its hello again with the same token and its dropped count, then
 * every step from the first one not sent, in order, and the end. */
static void test_reconnect(void **state)
{
    char dir[] = "/tmp/gs-client-XXXXXX", sock[128], cfg[256], err[256] = "", token[40];
    struct gs_run *run;
    json_t *m, *rep;
    int lfd, c;

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(sock, sizeof sock, "%s/steps.sock", dir);
    lfd = listen_at(sock);
    snprintf(cfg, sizeof cfg, "{\"socket\": \"%s\", \"nvml\": \"off\"}", sock);
    run = gs_run_open(cfg, err, sizeof err);
    assert_non_null(run);
    c = accept(lfd, NULL, NULL);
    assert_true(c >= 0);
    m = recv_json(c);
    assert_string_equal(json_string_value(json_object_get(m, "type")), "hello");
    snprintf(token, sizeof token, "%s", json_string_value(json_object_get(m, "token")));
    assert_int_equal(strlen(token), 32); /* 128 random bits in hex */
    assert_null(json_object_get(m, "dropped"));
    json_decref(m);
    for (int i = 1; i <= 3; i++) {
        struct gs_step_rec r = mkrec((uint64_t)i, 1.0);
        assert_int_equal(gs_run_step(run, &r), 0);
        m = recv_json(c);
        assert_int_equal(json_integer_value(json_object_get(m, "step")), i);
        json_decref(m);
    }
    /* the receiver goes away; the training goes on */
    close(c);
    close(lfd);
    unlink(sock);
    for (int i = 4; i <= 10; i++) {
        struct gs_step_rec r = mkrec((uint64_t)i, 1.0);
        assert_int_equal(gs_run_step(run, &r), 0);
    }
    usleep(300000);
    lfd = listen_at(sock);
    c = accept(lfd, NULL, NULL); /* within the backoff (at most 5 s) */
    assert_true(c >= 0);
    m = recv_json(c);
    assert_string_equal(json_string_value(json_object_get(m, "type")), "hello");
    assert_string_equal(json_string_value(json_object_get(m, "token")), token);
    assert_int_equal(json_integer_value(json_object_get(m, "dropped")), 0);
    json_decref(m);
    for (int i = 4; i <= 10; i++) {
        m = recv_json(c);
        assert_non_null(m);
        assert_int_equal(json_integer_value(json_object_get(m, "step")), i);
        json_decref(m);
    }
    rep = finish_json(run, NULL);
    m = recv_json(c);
    assert_string_equal(json_string_value(json_object_get(m, "type")), "end");
    json_decref(m);
    assert_int_equal(json_integer_value(json_object_get(rep, "steps")), 10);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(rep, "run"), "records_dropped")), 0);
    json_decref(rep);
    gs_run_close(run);
    close(c);
    close(lfd);
    unlink(sock);
    rmdir(dir);
}

/* Facts reach the in-process report; a set that breaks the rules is left out, the run opens. */
static void test_facts_in_process(void **state)
{
    char err[256] = "";
    struct gs_run *run;
    json_t *rep;
    struct gs_step_rec r = mkrec(1, 1.0);

    (void)state;
    setenv("GPUSCOPE_AGENT_SOCKET", "/nonexistent/agent.sock", 1);
    unsetenv("GPUSCOPE_RUN_SOCKET");
    run = gs_run_open("{\"nvml\": \"off\", \"facts\": {\"param_dtype\": \"float32\", "
                      "\"cpu_count\": 4}}",
                      err, sizeof err);
    assert_non_null(run);
    assert_int_equal(gs_run_step(run, &r), 0);
    rep = finish_json(run, NULL);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(rep, "facts"), "param_dtype")),
        "float32");
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(rep, "facts"), "cpu_count")), 4);
    json_decref(rep);
    gs_run_close(run);

    run = gs_run_open("{\"nvml\": \"off\", \"facts\": {\"nested\": {\"x\": 1}}}", err, sizeof err);
    assert_non_null(run);
    assert_int_equal(gs_run_step(run, &r), 0);
    rep = finish_json(run, NULL);
    assert_int_equal(json_object_size(json_object_get(rep, "facts")), 0);
    json_decref(rep);
    gs_run_close(run);
}

/* Tags: $GPUSCOPE_RUN_TAGS (gpuscope run --tag) wins over the config's "tags"; either reaches
 * the hello and so the report's run.tags; a bad set is left out with a note. */
static void test_tags(void **state)
{
    char err[256] = "";
    struct gs_run *run;
    json_t *rep, *tags;
    struct gs_step_rec r = mkrec(1, 1.0);

    (void)state;
    setenv("GPUSCOPE_AGENT_SOCKET", "/nonexistent/agent.sock", 1);
    unsetenv("GPUSCOPE_RUN_SOCKET");
    unsetenv("GPUSCOPE_RUN_TAGS");
    run = gs_run_open("{\"nvml\": \"off\", \"tags\": {\"team\": \"nlp\"}}", err, sizeof err);
    assert_non_null(run);
    assert_int_equal(gs_run_step(run, &r), 0);
    rep = finish_json(run, NULL);
    tags = json_object_get(json_object_get(rep, "run"), "tags");
    assert_string_equal(json_string_value(json_object_get(tags, "team")), "nlp");
    json_decref(rep);
    gs_run_close(run);

    setenv("GPUSCOPE_RUN_TAGS", "{\"try\":\"3\",\"ablation\":\"no-warmup\"}", 1);
    run = gs_run_open("{\"nvml\": \"off\", \"tags\": {\"team\": \"nlp\"}}", err, sizeof err);
    assert_non_null(run);
    assert_int_equal(gs_run_step(run, &r), 0);
    rep = finish_json(run, NULL);
    tags = json_object_get(json_object_get(rep, "run"), "tags");
    assert_int_equal(json_object_size(tags), 2); /* the environment's, not the config's */
    assert_string_equal(json_string_value(json_object_get(tags, "try")), "3");
    assert_null(json_object_get(tags, "team"));
    json_decref(rep);
    gs_run_close(run);

    setenv("GPUSCOPE_RUN_TAGS", "{\"n\": 1}", 1);
    run = gs_run_open("{\"nvml\": \"off\"}", err, sizeof err);
    assert_non_null(run);
    assert_non_null(strstr(gs_run_notes(run), "GPUSCOPE_RUN_TAGS: tags.n: not a string"));
    assert_int_equal(gs_run_step(run, &r), 0);
    rep = finish_json(run, NULL);
    assert_null(json_object_get(json_object_get(rep, "run"), "tags"));
    json_decref(rep);
    gs_run_close(run);
    setenv("GPUSCOPE_RUN_TAGS", "not json", 1);
    run = gs_run_open("{\"nvml\": \"off\"}", err, sizeof err);
    assert_non_null(run);
    assert_non_null(strstr(gs_run_notes(run), "GPUSCOPE_RUN_TAGS: not JSON"));
    gs_run_close(run);
    unsetenv("GPUSCOPE_RUN_TAGS");
}

/* What gs_run_open cannot do without failing comes back as notes; the library writes nothing
 * to the training process's stderr (fd 2 is a file here during the opens). */
static void test_notes_not_stderr(void **state)
{
    char path[] = "/tmp/gs-client-stderr-XXXXXX", err[256] = "", got[256] = "";
    struct gs_run *run;
    int fd = mkstemp(path), saved = dup(2);
    ssize_t n;

    (void)state;
    assert_true(fd >= 0 && saved >= 0);
    fflush(stderr);
    dup2(fd, 2);
    run = gs_run_open("{\"nvml\": \"off\", \"facts\": {\"nested\": {\"x\": 1}}, "
                      "\"socket\": \"/nonexistent/run.sock\"}",
                      err, sizeof err);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    assert_non_null(run);
    assert_non_null(strstr(gs_run_notes(run), "facts.nested"));
    assert_non_null(strstr(gs_run_notes(run), "facts left out\n"));
    assert_non_null(strstr(gs_run_notes(run), "cannot connect to /nonexistent/run.sock"));
    assert_non_null(strstr(gs_run_notes(run), "profiling in-process\n"));
    n = pread(fd, got, sizeof got - 1, 0);
    assert_int_equal(n, 0); /* nothing on stderr */
    gs_run_close(run);
    run = gs_run_open("{\"nvml\": \"off\"}", err, sizeof err);
    assert_non_null(run);
    assert_string_equal(gs_run_notes(run), "");
    gs_run_close(run);
    assert_string_equal(gs_run_notes(NULL), "");
    close(fd);
    unlink(path);
}

static void test_stuck_receiver_never_blocks(void **state)
{
    char dir[] = "/tmp/gs-client-XXXXXX", cfg[256], err[256] = "";
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct gs_run *run;
    double worst = 0, t0;
    json_t *rep;
    int lfd;

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s/stuck.sock", dir);
    lfd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    assert_true(lfd >= 0);
    assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(lfd, 4), 0); /* never accepted, never read */
    snprintf(cfg, sizeof cfg, "{\"socket\": \"%s\", \"nvml\": \"off\"}", sa.sun_path);
    run = gs_run_open(cfg, err, sizeof err);
    assert_non_null(run);
    for (int i = 1; i <= 10000; i++) {
        struct gs_step_rec r = mkrec((uint64_t)i, 1.0);
        double a = now_mono();
        assert_int_equal(gs_run_step(run, &r), 0);
        if (now_mono() - a > worst)
            worst = now_mono() - a;
    }
    assert_true(worst < 0.25); /* blocking would be >= 1 s (the send timeout) or forever */
    t0 = now_mono();
    rep = finish_json(run, NULL);
    assert_true(now_mono() - t0 < 4.0);
    assert_int_equal(json_integer_value(json_object_get(rep, "steps")), 10000);
    /* The ring holds 4096 and the socket a little: most of the 10000 never left. */
    {
        json_int_t d =
            json_integer_value(json_object_get(json_object_get(rep, "run"), "records_dropped"));
        assert_true(d >= 5000 && d <= 10000);
    }
    json_decref(rep);
    gs_run_close(run);
    close(lfd);
    unlink(sa.sun_path);
    rmdir(dir);
}

static void test_sampler_on_sim(void **state)
{
    const char *sim = getenv("GPUSCOPE_SIM_LIB"), *src = getenv("GPUSCOPE_SOURCE_ROOT");
    char scen[512], err[256] = "";
    struct gs_run *run;
    json_t *rep, *gpus;
    struct gs_step_rec r = mkrec(1, 1.0);

    (void)state;
    if (!sim || !src) {
        skip();
        return;
    }
    snprintf(scen, sizeof scen, "%s/tests/python/scenarios/self-on-gpu1.json", src);
    setenv("GPUSCOPE_NVML_LIBRARY", sim, 1);
    setenv("NVML_SIM_SCENARIO", scen, 1);
    unsetenv("NVML_SIM_TIME");
    unsetenv("GPUSCOPE_RUN_SOCKET");
    setenv("GPUSCOPE_AGENT_SOCKET", "/nonexistent/agent.sock", 1);
    run = gs_run_open("{\"sample_interval_s\": 0.02}", err, sizeof err);
    assert_non_null(run);
    assert_int_equal(gs_run_step(run, &r), 0);
    usleep(150000);
    rep = finish_json(run, NULL);
    gpus = json_object_get(rep, "gpus");
    assert_int_equal(json_array_size(gpus), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(gpus, 0), "index")), 1);
    assert_true(fabs(json_number_value(
                         json_object_get(json_array_get(gpus, 0), "utilization_avg_percent")) -
                     73.0) < 1e-6);
    assert_true(json_integer_value(json_object_get(json_array_get(gpus, 0), "samples")) >= 3);
    json_decref(rep);
    gs_run_close(run);
    unsetenv("NVML_SIM_SCENARIO");
}

/* The driver's samples between snapshots: GPU 0 is at 100 % for 0.1 s of every 0.4 s, else
 * 20 % (mean 40 %). nvmlDeviceGetUtilizationRates is a 1 s mean (36..44 %), so the 0.5 s
 * snapshots alone never see the peak; the driver's 100 ms samples do. */
static void test_sampler_subsecond(void **state)
{
    static const char scenario[] =
        "{\"scenario_version\": 1, \"gpus\": [{\"name\": \"NVIDIA H100 80GB HBM3\", "
        "\"uuid\": \"GPU-00000000-1111-2222-3333-000000000009\", \"architecture\": \"hopper\", "
        "\"pci\": {\"bus\": \"0x18\", \"device_id\": \"0x233010DE\"}, "
        "\"memory\": {\"total_mib\": 81559}, \"sample_interval_ms\": 100, "
        "\"metrics\": {\"util_gpu_pct\": {\"square\": {\"period_s\": 0.4, \"duty\": 0.25, "
        "\"high\": 100, \"low\": 20}}, \"power_w\": 300}}], "
        "\"processes\": [{\"pid\": \"self\", \"gpu\": 0, \"used_memory_mib\": 1000}]}";
    const char *sim = getenv("GPUSCOPE_SIM_LIB");
    char scen[] = "/tmp/gs-client-square-XXXXXX", err[256] = "";
    struct gs_run *run;
    json_t *rep, *g;
    struct gs_step_rec r = mkrec(1, 1.0);
    int fd;

    (void)state;
    if (!sim) {
        skip();
        return;
    }
    fd = mkstemp(scen);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, scenario, sizeof scenario - 1), (ssize_t)(sizeof scenario - 1));
    close(fd);
    setenv("GPUSCOPE_NVML_LIBRARY", sim, 1);
    setenv("NVML_SIM_SCENARIO", scen, 1);
    unsetenv("NVML_SIM_TIME");
    unsetenv("GPUSCOPE_RUN_SOCKET");
    setenv("GPUSCOPE_AGENT_SOCKET", "/nonexistent/agent.sock", 1);
    run = gs_run_open("{\"sample_interval_s\": 0.5}", err, sizeof err);
    assert_non_null(run);
    assert_int_equal(gs_run_step(run, &r), 0);
    usleep(1600000);
    rep = finish_json(run, NULL);
    g = json_array_get(json_object_get(rep, "gpus"), 0);
    assert_non_null(g);
    assert_string_equal(json_string_value(json_object_get(g, "utilization_source")),
                        "nvml_samples");
    assert_true(json_number_value(json_object_get(g, "utilization_max_percent")) == 100.0);
    assert_true(fabs(json_number_value(json_object_get(g, "utilization_avg_percent")) - 40.0) <
                8.0);
    assert_true(
        fabs(json_number_value(json_object_get(g, "utilization_sample_period_ms")) - 100.0) < 1.0);
    assert_true(json_integer_value(json_object_get(g, "samples")) >= 3); /* snapshots too */
    json_decref(rep);
    gs_run_close(run);
    unsetenv("NVML_SIM_SCENARIO");
    unlink(scen);
}

/* Which GPUs are the run's (run/attrib.h): a child of this process on GPU 1, and the
 * configured CUDA device 0 under CUDA_VISIBLE_DEVICES=<GPU 2's UUID>; GPU 0 is someone
 * else's. The old rule read only integer lists and took CUDA 0 for GPU 0. */
static void test_sampler_uuid_cvd(void **state)
{
    static const char scenario[] =
        "{\"scenario_version\": 1, \"templates\": {\"g\": {\"name\": \"NVIDIA H100 80GB HBM3\", "
        "\"architecture\": \"hopper\", \"memory\": {\"total_mib\": 81559}, "
        "\"pci\": {\"device_id\": \"0x233010DE\"}}}, \"gpus\": ["
        "{\"template\": \"g\", \"uuid\": \"GPU-00000000-1111-2222-3333-000000000000\", "
        "\"pci\": {\"bus\": \"0x18\"}, \"metrics\": {\"util_gpu_pct\": 11}}, "
        "{\"template\": \"g\", \"uuid\": \"GPU-00000000-1111-2222-3333-000000000001\", "
        "\"pci\": {\"bus\": \"0x2a\"}, \"metrics\": {\"util_gpu_pct\": 22}}, "
        "{\"template\": \"g\", \"uuid\": \"GPU-00000000-1111-2222-3333-000000000002\", "
        "\"pci\": {\"bus\": \"0x3a\"}, \"metrics\": {\"util_gpu_pct\": 33}}], "
        "\"processes\": [{\"pid\": 4242, \"gpu\": 0, \"used_memory_mib\": 1000}, "
        "{\"pid\": {\"env\": \"GS_TEST_CHILD_PID\"}, \"gpu\": 1, \"used_memory_mib\": 1000}]}";
    const char *sim = getenv("GPUSCOPE_SIM_LIB");
    char scen[] = "/tmp/gs-client-cvd-XXXXXX", err[256] = "", kid_pid[16];
    struct gs_run *run;
    json_t *rep, *gpus;
    struct gs_step_rec r = mkrec(1, 1.0);
    pid_t kid;
    int fd;

    (void)state;
    if (!sim) {
        skip();
        return;
    }
    fd = mkstemp(scen);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, scenario, sizeof scenario - 1), (ssize_t)(sizeof scenario - 1));
    close(fd);
    kid = fork();
    assert_true(kid >= 0);
    if (kid == 0) {
        pause();
        _exit(0);
    }
    snprintf(kid_pid, sizeof kid_pid, "%d", (int)kid);
    setenv("GS_TEST_CHILD_PID", kid_pid, 1);
    setenv("CUDA_VISIBLE_DEVICES", "GPU-00000000-1111-2222-3333-000000000002", 1);
    setenv("GPUSCOPE_NVML_LIBRARY", sim, 1);
    setenv("NVML_SIM_SCENARIO", scen, 1);
    unsetenv("NVML_SIM_TIME");
    unsetenv("GPUSCOPE_RUN_SOCKET");
    setenv("GPUSCOPE_AGENT_SOCKET", "/nonexistent/agent.sock", 1);
    run = gs_run_open("{\"sample_interval_s\": 0.02, \"devices\": [0]}", err, sizeof err);
    unsetenv("CUDA_VISIBLE_DEVICES");
    assert_non_null(run);
    assert_int_equal(gs_run_step(run, &r), 0);
    usleep(150000);
    rep = finish_json(run, NULL);
    gpus = json_object_get(rep, "gpus");
    kill(kid, SIGKILL);
    waitpid(kid, NULL, 0);
    assert_int_equal(json_array_size(gpus), 2);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(gpus, 0), "index")), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(gpus, 1), "index")), 2);
    assert_true(fabs(json_number_value(
                         json_object_get(json_array_get(gpus, 1), "utilization_avg_percent")) -
                     33.0) < 1e-6);
    json_decref(rep);
    gs_run_close(run);
    unsetenv("NVML_SIM_SCENARIO");
    unsetenv("GS_TEST_CHILD_PID");
    unlink(scen);
}

static void test_misuse(void **state)
{
    char err[256] = "";
    struct gs_run *run;
    struct gs_step_rec r = mkrec(1, 1.0), bad = r;
    json_t *rep;

    (void)state;
    gs_run_close(NULL);
    gs_free(NULL);
    assert_int_equal(gs_run_step(NULL, &r), -1);
    assert_null(gs_run_finish(NULL, NULL, err, sizeof err));
    run = gs_run_open(NULL, err, sizeof err); /* all defaults; no receiver here */
    assert_non_null(run);
    assert_int_equal(gs_run_step(run, NULL), -1);
    bad.version = 0;
    assert_int_equal(gs_run_step(run, &bad), -1);
    assert_null(gs_run_finish(run, "{not json", err, sizeof err));
    assert_int_equal(gs_run_step(run, &r), 0);
    rep = finish_json(run, "{}");
    json_decref(rep);
    assert_int_equal(gs_run_step(run, &r), -1); /* after finish */
    rep = finish_json(run, "{}");               /* a second finish re-reports */
    assert_int_equal(json_integer_value(json_object_get(rep, "steps")), 1);
    json_decref(rep);
    gs_run_close(run);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_in_process_report),
        cmocka_unit_test(test_receiver_path),
        cmocka_unit_test(test_reconnect),
        cmocka_unit_test(test_facts_in_process),
        cmocka_unit_test(test_tags),
        cmocka_unit_test(test_stuck_receiver_never_blocks),
        cmocka_unit_test(test_sampler_on_sim),
        cmocka_unit_test(test_sampler_subsecond),
        cmocka_unit_test(test_sampler_uuid_cvd),
        cmocka_unit_test(test_notes_not_stderr),
        cmocka_unit_test(test_misuse),
    };
    signal(SIGPIPE, SIG_IGN);
    setenv("GPUSCOPE_AGENT_SOCKET", "/nonexistent/agent.sock", 1);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
