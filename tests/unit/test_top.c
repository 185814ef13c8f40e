/*
 * Unit tests of `gpuscope top`'s process table and preferences (src/top/top_proc.c): sort by
 * columns and inverted, filter, host-qualified GPU labels, the tree over real processes (this
 * test and a forked child), who may be signalled, job labels, figures, and top.conf parsing
 * (errors named file:line) with a format/parse round trip.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "gpuscope/gs_err.h"
#include "top/top.h"

static struct gs_proc *add_proc(struct gs_snapshot *s, unsigned pid, unsigned gpu, uint64_t mem,
                                const char *user, const char *cmd)
{
    struct gs_err e = {0};
    struct gs_proc *p;

    assert_int_equal(gs_snapshot_reserve_procs(s, s->n_procs + 1, &e), GS_OK);
    p = &s->procs[s->n_procs++];
    memset(p, 0, sizeof *p);
    p->pid = pid;
    p->gpu = gpu;
    p->gi_id = p->ci_id = 0xFFFFFFFFu;
    p->mem_st = GS_ST_OK;
    p->gpu_mem_bytes = mem;
    p->host_st = GS_ST_OK;
    p->uid = 1000;
    snprintf(p->user, sizeof p->user, "%s", user);
    snprintf(p->cmdline, sizeof p->cmdline, "%s", cmd);
    snprintf(p->name, sizeof p->name, "%.20s", cmd);
    return p;
}

static struct top_frame *frame_with(unsigned n_src)
{
    struct top_frame *f = calloc(1, sizeof *f);
    struct gs_err e = {0};

    assert_non_null(f);
    f->n_src = n_src;
    for (unsigned i = 0; i < n_src; i++) {
        assert_int_equal(gs_snapshot_new(&f->src[i].snap, 2, 4, &e), GS_OK);
        f->src[i].snap->gpus[0].index = 0;
        f->src[i].snap->gpus[1].index = 1;
        f->src[i].local = i == 0;
        snprintf(f->src[i].name, sizeof f->src[i].name, i == 0 ? "local" : "node%u:9400", i);
    }
    return f;
}

static void pids_of(const struct top_frame *f, const struct top_row *r, size_t n, unsigned *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = f->src[r[i].src].snap->procs[r[i].proc].pid;
}

static void test_sort_filter(void **state)
{
    struct top_frame *f = frame_with(1);
    struct gs_snapshot *s = f->src[0].snap;
    struct top_row *rows = NULL;
    size_t cap = 0, n;
    unsigned pids[8];
    struct top_filter_sort fs = {.sort = TOP_C_GMEM, .filter = ""};

    (void)state;
    add_proc(s, 300, 0, 10u << 20, "bob", "python train.py");
    add_proc(s, 100, 1, 30u << 20, "alice", "python eval.py");
    add_proc(s, 200, 0, 20u << 20, "carol", "memhog");
    n = top_rows_build(f, &fs, &rows, &cap);
    assert_int_equal(n, 3);
    pids_of(f, rows, n, pids);
    /* numbers: largest first */
    assert_int_equal(pids[0], 100);
    assert_int_equal(pids[1], 200);
    assert_int_equal(pids[2], 300);
    fs.reverse = 1;
    n = top_rows_build(f, &fs, &rows, &cap);
    pids_of(f, rows, n, pids);
    assert_int_equal(pids[0], 300);
    fs.reverse = 0;
    fs.sort = TOP_C_USER; /* text: A to Z */
    n = top_rows_build(f, &fs, &rows, &cap);
    pids_of(f, rows, n, pids);
    assert_int_equal(pids[0], 100);
    assert_int_equal(pids[2], 200);
    fs.sort = TOP_C_PID;
    n = top_rows_build(f, &fs, &rows, &cap);
    pids_of(f, rows, n, pids);
    assert_int_equal(pids[0], 100);
    assert_int_equal(pids[1], 200);
    /* filter: command substring (any case), user, exact pid */
    fs.filter = "PYTHON";
    assert_int_equal(top_rows_build(f, &fs, &rows, &cap), 2);
    fs.filter = "carol";
    assert_int_equal(top_rows_build(f, &fs, &rows, &cap), 1);
    fs.filter = "20"; /* not a pid, not in any text */
    assert_int_equal(top_rows_build(f, &fs, &rows, &cap), 0);
    fs.filter = "200";
    n = top_rows_build(f, &fs, &rows, &cap);
    assert_int_equal(n, 1);
    assert_string_equal(rows[0].gpu, "0");
    free(rows);
    top_frame_free(f);
}

static void test_hosts_and_signal(void **state)
{
    struct top_frame *f = frame_with(2);
    struct top_row *rows = NULL;
    size_t cap = 0, n;
    struct top_filter_sort fs = {.sort = TOP_C_GPU, .filter = ""};
    char why[200];
    struct gs_proc *local, *remote, *gone, *hidden;

    (void)state;
    local = add_proc(f->src[0].snap, 10, 0, 1, "me", "a");
    local->uid = (uint32_t)geteuid();
    remote = add_proc(f->src[1].snap, 11, 1, 1, "me", "b");
    gone = add_proc(f->src[0].snap, 12, 1, 1, "me", "c");
    gone->host_st = GS_ST_NA;
    hidden = add_proc(f->src[0].snap, 0, 0, 1, "", "3 hidden");
    n = top_rows_build(f, &fs, &rows, &cap);
    assert_int_equal(n, 4);
    assert_string_equal(rows[n - 1].gpu, "node1:9400/1");
    assert_int_equal(top_may_signal(&f->src[0], local, why, sizeof why), 0);
    assert_int_equal(top_may_signal(&f->src[1], remote, why, sizeof why), -1);
    assert_non_null(strstr(why, "runs on node1:9400: signal it there"));
    assert_int_equal(top_may_signal(&f->src[0], gone, why, sizeof why), -1);
    assert_non_null(strstr(why, "pid namespace"));
    assert_int_equal(top_may_signal(&f->src[0], hidden, why, sizeof why), -1);
    assert_non_null(strstr(why, "visibility policy"));
    if (geteuid() != 0) {
        local->uid = geteuid() + 1;
        assert_int_equal(top_may_signal(&f->src[0], local, why, sizeof why), -1);
        assert_non_null(strstr(why, "not root"));
    }
    free(rows);
    top_frame_free(f);
}

static void test_tree(void **state)
{
    struct top_frame *f = frame_with(1);
    struct top_row *rows = NULL;
    size_t cap = 0, n;
    struct top_filter_sort fs = {.sort = TOP_C_PID, .tree = 1, .filter = ""};
    pid_t child = fork();

    (void)state;
    assert_true(child >= 0);
    if (child == 0) {
        pause();
        _exit(0);
    }
    /* the child first by pid order would be wrong: the parent must lead */
    add_proc(f->src[0].snap, (unsigned)child, 0, 1, "me", "child");
    add_proc(f->src[0].snap, 1, 0, 1, "root", "init-like"); /* ppid 0: a root */
    add_proc(f->src[0].snap, (unsigned)getpid(), 1, 1, "me", "parent");
    fs.sort = TOP_C_CMD; /* "child" sorts before "parent" */
    n = top_rows_build(f, &fs, &rows, &cap);
    assert_int_equal(n, 3);
    for (size_t i = 0; i < n; i++)
        if (rows[i].pid == (unsigned)child) {
            assert_true(i > 0);
            assert_int_equal(rows[i - 1].pid, (unsigned)getpid());
            assert_int_equal(rows[i].depth, 1);
            assert_string_equal(rows[i].prefix, "`-");
        }
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    free(rows);
    top_frame_free(f);
}

static void test_labels(void **state)
{
    struct gs_proc p;
    char b[64];

    (void)state;
    memset(&p, 0, sizeof p);
    top_job_label(&p, b, sizeof b);
    assert_string_equal(b, "");
    snprintf(p.slurm_job, sizeof p.slurm_job, "4242");
    top_job_label(&p, b, sizeof b);
    assert_string_equal(b, "slurm:4242");
    snprintf(p.pod_uid, sizeof p.pod_uid, "0f1e2d3c-aaaa-bbbb");
    top_job_label(&p, b, sizeof b);
    assert_string_equal(b, "pod:0f1e2d3c");
    snprintf(p.pod_name, sizeof p.pod_name, "trainer-0");
    snprintf(p.pod_namespace, sizeof p.pod_namespace, "ml-team");
    top_job_label(&p, b, sizeof b);
    assert_string_equal(b, "pod:ml-team/trainer-0");
    memset(&p, 0, sizeof p);
    p.job_kind = GS_JOB_DOCKER;
    snprintf(p.container_id, sizeof p.container_id, "0123456789abcdef0123");
    top_job_label(&p, b, sizeof b);
    assert_string_equal(b, "docker:0123456789ab");
    top_fmt_bytes(b, sizeof b, 512);
    assert_string_equal(b, "512B");
    top_fmt_bytes(b, sizeof b, 1.5 * 1024 * 1024 * 1024);
    assert_string_equal(b, "1.5G");
    top_fmt_bytes(b, sizeof b, 80.0 * 1024 * 1024 * 1024);
    assert_string_equal(b, "80G");
    top_fmt_duration(b, sizeof b, 65);
    assert_string_equal(b, "1:05");
    top_fmt_duration(b, sizeof b, 3 * 3600 + 61);
    assert_string_equal(b, "3:01:01");
    top_fmt_duration(b, sizeof b, 2 * 86400 + 5 * 3600);
    assert_string_equal(b, "2d05h");
}

static void test_prefs(void **state)
{
    struct top_prefs p = {.interval_s = 1.0, .sort = TOP_C_GMEM}, q;
    char warn[200] = "", text[1024];

    (void)state;
    top_prefs_parse(&p, "top.conf",
                    "# comment\n\ngraph = power\nsort=cpu\n tree = yes \nreverse = on\n"
                    "interval = 2.5\nmouse = no\nruns_panel = true\n",
                    warn, sizeof warn);
    assert_string_equal(warn, "");
    assert_int_equal(p.graph, TOP_G_POWER);
    assert_int_equal(p.sort, TOP_C_CPU);
    assert_int_equal(p.tree, 1);
    assert_int_equal(p.reverse, 1);
    assert_int_equal(p.runs_panel, 1);
    assert_true(p.interval_s == 2.5);
    /* round trip */
    assert_int_equal(top_prefs_format(&p, text, sizeof text), 0);
    memset(&q, 0, sizeof q);
    top_prefs_parse(&q, "x", text, warn, sizeof warn);
    assert_string_equal(warn, "");
    assert_memory_equal(&p, &q, sizeof p);
    /* errors: the first one named by file and line, the rest applied */
    top_prefs_parse(&p, "/h/top.conf", "graph = memory\nbogus = 1\ninterval = 0\nsort = nope\n",
                    warn, sizeof warn);
    assert_string_equal(warn, "/h/top.conf:2: unknown key 'bogus' (ignored)");
    assert_int_equal(p.graph, TOP_G_MEM);
    assert_true(p.interval_s == 2.5);
    assert_int_equal(p.sort, TOP_C_CPU);
    warn[0] = '\0';
    top_prefs_parse(&p, "c", "interval = 0.01\n", warn, sizeof warn);
    assert_string_equal(warn, "c:1: interval: '0.01' is not seconds in 0.1..3600 (ignored)");
    warn[0] = '\0';
    top_prefs_parse(&p, "c", "\n\nno equals sign\n", warn, sizeof warn);
    assert_string_equal(warn, "c:3: expected key = value (ignored)");
    warn[0] = '\0';
    top_prefs_parse(&p, "c", "tree = maybe\n", warn, sizeof warn);
    assert_string_equal(warn, "c:1: tree: 'maybe' is not yes or no (ignored)");
    warn[0] = '\0';
    top_prefs_parse(&p, "c", NULL, warn, sizeof warn);
    assert_string_equal(warn, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sort_filter), cmocka_unit_test(test_hosts_and_signal),
        cmocka_unit_test(test_tree),        cmocka_unit_test(test_labels),
        cmocka_unit_test(test_prefs),
    };

    cmocka_set_message_output(CM_OUTPUT_TAP);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
