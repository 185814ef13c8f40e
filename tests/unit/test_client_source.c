/*
 * Unit tests for src/client/source.c, the one decision between the local agent and NVML, on
 * nvml-sim ($GPUSCOPE_SIM_LIB, from tests/meson.build): an agent socket that answers (a fake
 * agent thread serving a snapshot document), one that is absent, one that never answers; the
 * picks (auto, agent, nvml) and the options that keep each command's rule
 * (nvml_env_picks_nvml, fixed_gpus).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "client/source.h"
#include "core/snapjson.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"
#include "gpuscope/gs_sampler.h"

/* A fake agent on a unix socket: answers every GET with docs[min(request, n_docs - 1)], or
 * (silent) listens and never accepts. */
struct agent {
    char dir[32], sock[100];
    int fd, stop[2];
    int silent;
    char *docs[2];
    unsigned n_docs;
    unsigned requests;
    pthread_mutex_t mu;
    pthread_t th;
    int running;
};

struct fx {
    struct agent a;
    struct gs_sampler_opts so;
    char *doc;       /* the sim's snapshot document, hostname "fake-agent" */
    char *doc_fewer; /* the same with one GPU less */
    unsigned n_gpus;
};

static const char *sim_lib(void)
{
    const char *p = getenv("GPUSCOPE_SIM_LIB");
    return p && *p ? p : NULL;
}

static void *agent_main(void *arg)
{
    struct agent *a = arg;

    for (;;) {
        struct pollfd p[2] = {{.fd = a->fd, .events = POLLIN},
                              {.fd = a->stop[0], .events = POLLIN}};
        char req[2048];
        size_t n = 0;
        const char *doc;
        char hdr[128];
        int c;

        if (poll(p, 2, -1) < 0 && errno != EINTR)
            break;
        if (p[1].revents)
            break;
        if (!(p[0].revents & POLLIN))
            continue;
        c = accept(a->fd, NULL, NULL);
        if (c < 0)
            continue;
        while (n < sizeof req - 1) {
            ssize_t r = read(c, req + n, sizeof req - 1 - n);
            if (r <= 0)
                break;
            n += (size_t)r;
            req[n] = '\0';
            if (strstr(req, "\r\n\r\n"))
                break;
        }
        pthread_mutex_lock(&a->mu);
        doc = a->docs[a->requests < a->n_docs ? a->requests : a->n_docs - 1];
        a->requests++;
        pthread_mutex_unlock(&a->mu);
        snprintf(hdr, sizeof hdr,
                 "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                 strlen(doc));
        if (write(c, hdr, strlen(hdr)) < 0 || write(c, doc, strlen(doc)) < 0)
            fprintf(stderr, "# fake agent: write: %s\n", strerror(errno));
        close(c);
    }
    return NULL;
}

/* Starts the fake agent at dir/gpuscope/agent.sock (where $XDG_RUNTIME_DIR puts it). */
static void agent_start(struct agent *a, int silent, char *doc0, char *doc1)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    char sub[200];

    snprintf(a->dir, sizeof a->dir, "/tmp/gs_source_XXXXXX");
    assert_non_null(mkdtemp(a->dir));
    snprintf(sub, sizeof sub, "%s/gpuscope", a->dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    snprintf(a->sock, sizeof a->sock, "%s/gpuscope/agent.sock", a->dir);
    a->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(a->fd >= 0);
    memcpy(sun.sun_path, a->sock, strlen(a->sock) + 1);
    assert_int_equal(bind(a->fd, (struct sockaddr *)&sun, sizeof sun), 0);
    assert_int_equal(listen(a->fd, 8), 0);
    a->silent = silent;
    a->docs[0] = doc0;
    a->docs[1] = doc1;
    a->n_docs = doc1 ? 2 : 1;
    pthread_mutex_init(&a->mu, NULL);
    assert_int_equal(pipe(a->stop), 0);
    if (!silent) {
        assert_int_equal(pthread_create(&a->th, NULL, agent_main, a), 0);
        a->running = 1;
    }
}

static unsigned agent_requests(struct agent *a)
{
    unsigned n;

    pthread_mutex_lock(&a->mu);
    n = a->requests;
    pthread_mutex_unlock(&a->mu);
    return n;
}

static void agent_stop(struct agent *a)
{
    char sub[200];

    if (!a->dir[0])
        return;
    if (a->running) {
        assert_int_equal(write(a->stop[1], "x", 1), 1);
        pthread_join(a->th, NULL);
    }
    close(a->stop[0]);
    close(a->stop[1]);
    close(a->fd);
    unlink(a->sock);
    snprintf(sub, sizeof sub, "%s/gpuscope", a->dir);
    rmdir(sub);
    rmdir(a->dir);
    pthread_mutex_destroy(&a->mu);
    memset(a, 0, sizeof *a);
}

/* The sim's snapshot as the agent's document, under another hostname. */
static int fx_setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    const char *root = getenv("GPUSCOPE_SOURCE_ROOT");
    char scenario[512];
    struct gs_sampler *s = NULL;
    struct gs_snapshot *snap = NULL;
    json_t *doc = NULL;

    *state = f;
    if (!sim_lib())
        return 0;
    snprintf(scenario, sizeof scenario, "%s/sim/scenarios/a100x2-dpo-imbalance.json",
             root && *root ? root : ".");
    setenv("NVML_SIM_SCENARIO", scenario, 1);
    setenv("NVML_SIM_TIME", "45", 1);
    unsetenv("GPUSCOPE_NVML_LIBRARY");
    f->so.library = sim_lib();
    if (gs_sampler_open(&s, &f->so, NULL) != GS_OK)
        return -1;
    f->n_gpus = gs_sampler_gpu_count(s);
    if (f->n_gpus < 2 || gs_snapshot_new(&snap, f->n_gpus, 16, NULL) != GS_OK ||
        gs_sampler_sample(s, snap, GS_WANT_PROCS, NULL) != GS_OK)
        return -1;
    snprintf(snap->sys.hostname, sizeof snap->sys.hostname, "fake-agent");
    if (gs_snapjson_encode(&doc, snap, NULL, NULL) != GS_OK)
        return -1;
    f->doc = json_dumps(doc, JSON_COMPACT);
    json_array_remove(json_object_get(doc, "gpus"), f->n_gpus - 1);
    f->doc_fewer = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    gs_snapshot_free(snap);
    gs_sampler_close(s);
    return f->doc && f->doc_fewer ? 0 : -1;
}

static int fx_teardown(void **state)
{
    struct fx *f = *state;

    agent_stop(&f->a);
    free(f->doc);
    free(f->doc_fewer);
    free(f);
    unsetenv("GPUSCOPE_HTTP_SOCKET");
    unsetenv("GPUSCOPE_NVML_LIBRARY");
    return 0;
}

#define NEED_SIM()                                                                                 \
    do {                                                                                           \
        if (!sim_lib())                                                                            \
            skip();                                                                                \
    } while (0)

static struct gs_source *open_ok(const struct gs_source_opts *o)
{
    struct gs_source *src = NULL;
    struct gs_err e = {0};

    if (gs_source_open(&src, o, &e) != GS_OK)
        fail_msg("gs_source_open: %s", e.msg);
    return src;
}

/* The agent answers: it is the source, and its first answer is the first sample. */
static void agent_answers(void **state)
{
    struct fx *f = *state;
    struct gs_source_opts o = {.pick = GS_SOURCE_AUTO, .sampler = &f->so};
    struct gs_source *src;
    struct gs_err e = {0};
    char *body = NULL;
    size_t len = 0;

    NEED_SIM();
    agent_start(&f->a, 0, f->doc, NULL);
    setenv("GPUSCOPE_HTTP_SOCKET", f->a.sock, 1);
    src = open_ok(&o);
    assert_int_equal(gs_source_kind(src), GS_SOURCE_KIND_AGENT);
    assert_string_equal(gs_source_where(src), f->a.sock);
    assert_int_equal(gs_source_gpu_count(src), f->n_gpus);
    assert_int_equal(agent_requests(&f->a), 1);
    assert_int_equal(gs_source_sample(src, GS_WANT_PROCS, &e), GS_OK);
    assert_int_equal(agent_requests(&f->a), 1); /* the probe's answer */
    assert_string_equal(gs_source_snapshot(src)->sys.hostname, "fake-agent");
    assert_non_null(strstr(gs_source_snapshot(src)->sys.source, f->a.sock));
    assert_int_equal(gs_source_sample(src, GS_WANT_PROCS, &e), GS_OK);
    assert_int_equal(agent_requests(&f->a), 2);
    assert_int_equal(gs_source_get(src, "/api/v1/snapshot", &body, &len, &e), GS_OK);
    assert_true(len > 0 && body[0] == '{');
    free(body);
    gs_source_close(src);
}

/* No socket there, or none to try: NVML. */
static void agent_absent(void **state)
{
    struct fx *f = *state;
    struct gs_source_opts o = {.pick = GS_SOURCE_AUTO, .sampler = &f->so};
    const char *socks[] = {"/nonexistent/gpuscope/agent.sock", "off"};
    struct gs_err e = {0};
    char *body = NULL;
    size_t len = 0;

    NEED_SIM();
    for (unsigned i = 0; i < 2; i++) {
        struct gs_source *src;
        setenv("GPUSCOPE_HTTP_SOCKET", socks[i], 1);
        src = open_ok(&o);
        assert_int_equal(gs_source_kind(src), GS_SOURCE_KIND_NVML);
        assert_string_equal(gs_source_where(src), "");
        assert_int_equal(gs_source_gpu_count(src), f->n_gpus);
        assert_int_equal(gs_source_sample(src, GS_WANT_PROCS, &e), GS_OK);
        assert_int_equal(gs_source_snapshot(src)->n_gpus, f->n_gpus);
        assert_string_equal(gs_source_snapshot(src)->sys.source, "");
        assert_int_equal(gs_source_get(src, "/api/v1/runs", &body, &len, &e), GS_ENOTSUP);
        gs_source_close(src);
    }
}

/* A socket whose agent never answers: NVML after the client's timeout. */
static void agent_not_answering(void **state)
{
    struct fx *f = *state;
    struct gs_source_opts o = {.pick = GS_SOURCE_AUTO, .sampler = &f->so};
    struct gs_source *src;

    NEED_SIM();
    agent_start(&f->a, 1, f->doc, NULL);
    setenv("GPUSCOPE_HTTP_SOCKET", f->a.sock, 1);
    src = open_ok(&o);
    assert_int_equal(gs_source_kind(src), GS_SOURCE_KIND_NVML);
    gs_source_close(src);
}

/* GS_SOURCE_AGENT: the agent or an error saying why; GS_SOURCE_NVML never asks it. */
static void picks(void **state)
{
    struct fx *f = *state;
    struct gs_source_opts agent = {.pick = GS_SOURCE_AGENT, .sampler = &f->so};
    struct gs_source_opts nvml = {.pick = GS_SOURCE_NVML, .sampler = &f->so};
    struct gs_source *src = NULL;
    struct gs_err e = {0};

    NEED_SIM();
    setenv("GPUSCOPE_HTTP_SOCKET", "off", 1);
    assert_int_equal(gs_source_open(&src, &agent, &e), GS_EIO);
    assert_null(src);
    assert_non_null(strstr(e.msg, "agent: no socket to try"));
    setenv("GPUSCOPE_HTTP_SOCKET", "/nonexistent/agent.sock", 1);
    assert_int_equal(gs_source_open(&src, &agent, &e), GS_EIO);
    assert_null(src);
    assert_non_null(strstr(e.msg, "/nonexistent/agent.sock"));

    agent_start(&f->a, 0, f->doc, NULL);
    setenv("GPUSCOPE_HTTP_SOCKET", f->a.sock, 1);
    src = open_ok(&agent);
    assert_int_equal(gs_source_kind(src), GS_SOURCE_KIND_AGENT);
    gs_source_close(src);
    src = open_ok(&nvml);
    assert_int_equal(gs_source_kind(src), GS_SOURCE_KIND_NVML);
    assert_int_equal(agent_requests(&f->a), 1); /* only the agent pick's */
    gs_source_close(src);
}

/* The quick check's and query's rule: an explicit $GPUSCOPE_NVML_LIBRARY picks NVML unless
 * $GPUSCOPE_HTTP_SOCKET names a socket too; top's asks the agent all the same. */
static void nvml_library_rule(void **state)
{
    struct fx *f = *state;
    struct gs_source_opts quick = {
        .pick = GS_SOURCE_AUTO, .nvml_env_picks_nvml = true, .sampler = &f->so};
    struct gs_source_opts top = {.pick = GS_SOURCE_AUTO, .sampler = &f->so};
    struct stat st;
    struct gs_source *src;
    char *xdg = getenv("XDG_RUNTIME_DIR") ? strdup(getenv("XDG_RUNTIME_DIR")) : NULL;

    NEED_SIM();
    if (stat("/run/gpuscope/agent.sock", &st) == 0) {
        free(xdg);
        skip(); /* the node's agent would be found before $XDG_RUNTIME_DIR's */
    }
    agent_start(&f->a, 0, f->doc, NULL);
    unsetenv("GPUSCOPE_HTTP_SOCKET");
    setenv("XDG_RUNTIME_DIR", f->a.dir, 1);
    setenv("GPUSCOPE_NVML_LIBRARY", sim_lib(), 1);

    src = open_ok(&quick);
    assert_int_equal(gs_source_kind(src), GS_SOURCE_KIND_NVML);
    gs_source_close(src);
    src = open_ok(&top);
    assert_int_equal(gs_source_kind(src), GS_SOURCE_KIND_AGENT);
    assert_string_equal(gs_source_where(src), f->a.sock);
    gs_source_close(src);

    setenv("GPUSCOPE_HTTP_SOCKET", f->a.sock, 1);
    src = open_ok(&quick);
    assert_int_equal(gs_source_kind(src), GS_SOURCE_KIND_AGENT);
    gs_source_close(src);

    unsetenv("GPUSCOPE_NVML_LIBRARY");
    unsetenv("GPUSCOPE_HTTP_SOCKET");
    src = open_ok(&quick);
    assert_int_equal(gs_source_kind(src), GS_SOURCE_KIND_AGENT);
    gs_source_close(src);
    if (xdg)
        setenv("XDG_RUNTIME_DIR", xdg, 1);
    else
        unsetenv("XDG_RUNTIME_DIR");
    free(xdg);
}

/* query's fixed_gpus: an agent whose GPU list changes is an error, and the last good answer
 * stays; without it the new answer replaces the old. */
static void fixed_gpus(void **state)
{
    struct fx *f = *state;
    struct gs_source_opts query = {.pick = GS_SOURCE_AUTO, .fixed_gpus = true, .sampler = &f->so};
    struct gs_source_opts quick = {.pick = GS_SOURCE_AUTO, .sampler = &f->so};
    struct gs_source *src;
    struct gs_err e = {0};

    NEED_SIM();
    agent_start(&f->a, 0, f->doc, f->doc_fewer);
    setenv("GPUSCOPE_HTTP_SOCKET", f->a.sock, 1);
    src = open_ok(&query);
    assert_int_equal(gs_source_sample(src, 0, &e), GS_OK);
    assert_int_equal(gs_source_sample(src, 0, &e), GS_EIO);
    assert_string_equal(e.msg, "agent: the GPUs it shows changed");
    assert_int_equal(gs_source_snapshot(src)->n_gpus, f->n_gpus);
    gs_source_close(src);

    src = open_ok(&quick);
    assert_int_equal(gs_source_gpu_count(src), f->n_gpus - 1);
    gs_source_close(src);
    pthread_mutex_lock(&f->a.mu);
    f->a.requests = 0;
    pthread_mutex_unlock(&f->a.mu);
    src = open_ok(&quick);
    assert_int_equal(gs_source_sample(src, 0, &e), GS_OK);
    assert_int_equal(gs_source_sample(src, 0, &e), GS_OK);
    assert_int_equal(gs_source_gpu_count(src), f->n_gpus - 1);
    gs_source_close(src);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(agent_answers, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(agent_absent, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(agent_not_answering, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(picks, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(nvml_library_rule, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(fixed_gpus, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
