/*
 * Unit tests for the sampler (src/core/sampler.c) through its public API, on nvml-sim:
 * open errors, snapshot bookkeeping (clocks, hostname, system versions), processes merged
 * per GPU with procfs details (this test's own pid, a pid that does not exist, a fake /proc
 * tree), a GPU lost mid-run, no heap growth once warm, and the driver's utilization samples
 * in the snapshot (GS_WANT_UTIL_SAMPLES: continued without gaps or repeats, none when not
 * asked, from the previous cycle when asked again), and need masks (only the readings asked
 * for reach the driver: counted in nvml-sim).
 *
 * GPUSCOPE_SIM_LIB and GPUSCOPE_SOURCE_ROOT come from tests/meson.build; scenarios derived
 * from the bundled ones are written to temporary files with jansson.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dlfcn.h>
#include <jansson.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"
#include "gpuscope/gs_sampler.h"

struct fx {
    struct gs_sampler *s;
    struct gs_snapshot *snap;
    char scenario[512];  /* a derived scenario to remove */
    char clock[512];     /* NVML_SIM_TIME=file: target */
    char proc_root[512]; /* a fake /proc */
};

static int fx_setup(void **state)
{
    *state = calloc(1, sizeof(struct fx));
    return *state ? 0 : -1;
}

static int fx_teardown(void **state)
{
    struct fx *f = *state;
    gs_sampler_close(f->s);
    gs_snapshot_free(f->snap);
    if (f->scenario[0])
        unlink(f->scenario);
    if (f->clock[0])
        unlink(f->clock);
    if (f->proc_root[0]) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->proc_root);
        if (system(cmd) != 0)
            return -1;
    }
    free(f);
    return 0;
}

static const char *sim_lib(void)
{
    const char *p = getenv("GPUSCOPE_SIM_LIB");
    return p && *p ? p : NULL;
}

#define NEED_SIM()                                                                                 \
    do {                                                                                           \
        if (!sim_lib())                                                                            \
            skip();                                                                                \
    } while (0)

static void bundled(char *buf, size_t n, const char *name)
{
    const char *root = getenv("GPUSCOPE_SOURCE_ROOT");
    snprintf(buf, n, "%s/sim/scenarios/%s", root && *root ? root : ".", name);
}

static void tmpname(char *buf, size_t n, const char *stem)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(buf, n, "%s/%s_XXXXXX", tmp && *tmp ? tmp : "/tmp", stem);
}

/* A copy of a bundled scenario with one top-level key replaced. */
static void derive(struct fx *f, const char *base, const char *key, const char *json)
{
    char path[512];
    json_error_t je;
    json_t *root, *v;
    int fd;

    bundled(path, sizeof path, base);
    root = json_load_file(path, 0, &je);
    assert_non_null(root);
    v = json_loads(json, 0, &je);
    if (!v)
        fail_msg("test JSON: %s", je.text);
    assert_int_equal(json_object_set_new(root, key, v), 0);
    tmpname(f->scenario, sizeof f->scenario, "gs_sampler_scn");
    fd = mkstemp(f->scenario);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(json_dump_file(root, f->scenario, 0), 0);
    json_decref(root);
}

static void set_clock(struct fx *f, double t)
{
    FILE *fp;
    if (!f->clock[0]) {
        int fd;
        tmpname(f->clock, sizeof f->clock, "gs_sampler_clk");
        fd = mkstemp(f->clock);
        assert_true(fd >= 0);
        close(fd);
    }
    fp = fopen(f->clock, "w");
    assert_non_null(fp);
    fprintf(fp, "%.3f\n", t);
    fclose(fp);
}

/* Opens a sampler on the sim: scenario is a bundled name, a path, or NULL (none); tm is
 * NVML_SIM_TIME or NULL for the clock file. */
static int open_on(struct fx *f, const char *scenario, const char *tm, struct gs_err *e)
{
    struct gs_sampler_opts o = {.library = sim_lib(),
                                .proc_root = f->proc_root[0] ? f->proc_root : NULL};
    char path[512], clk[600];

    if (!scenario)
        unsetenv("NVML_SIM_SCENARIO");
    else if (scenario[0] == '/')
        setenv("NVML_SIM_SCENARIO", scenario, 1);
    else {
        bundled(path, sizeof path, scenario);
        setenv("NVML_SIM_SCENARIO", path, 1);
    }
    if (tm) {
        setenv("NVML_SIM_TIME", tm, 1);
    } else {
        snprintf(clk, sizeof clk, "file:%s", f->clock);
        setenv("NVML_SIM_TIME", clk, 1);
    }
    gs_err_clear(e);
    return gs_sampler_open(&f->s, &o, e);
}

static void new_snap(struct fx *f)
{
    assert_int_equal(gs_snapshot_new(&f->snap, gs_sampler_gpu_count(f->s), 2, NULL), GS_OK);
}

static void cycle(struct fx *f, unsigned want)
{
    struct gs_err e;
    if (gs_sampler_sample(f->s, f->snap, want, &e) != GS_OK)
        fail_msg("sample: %s", e.msg);
}

/* ---- open ------------------------------------------------------------------------------- */

static void open_errors(void **state)
{
    struct fx *f = *state;
    struct gs_sampler *sentinel = (struct gs_sampler *)f;
    struct gs_sampler_opts o = {.library = "/nonexistent/libnvidia-ml.so.1"};
    struct gs_err e;

    f->s = sentinel;
    assert_int_equal(gs_sampler_open(&f->s, &o, &e), GS_ENOLIB);
    assert_ptr_equal(f->s, sentinel); /* untouched on failure */
    assert_non_null(strstr(e.msg, "nvml: cannot load /nonexistent/libnvidia-ml.so.1"));
    f->s = NULL;
    assert_int_equal(gs_sampler_gpu_count(NULL), 0);
    gs_sampler_close(NULL);
    if (!sim_lib())
        return;
    assert_int_equal(open_on(f, NULL, "0", &e), GS_ENODRIVER);
    assert_null(f->s);
    assert_string_equal(e.msg, "nvml: nvmlInit_v2: Driver Not Loaded");
}

static void snapshot_bookkeeping(void **state)
{
    struct fx *f = *state;
    struct gs_snapshot *small = NULL;
    struct gs_err e;
    char host[256] = "";
    struct timespec mono;

    NEED_SIM();
    assert_int_equal(open_on(f, "a100x2-dpo-imbalance.json", "50", &e), GS_OK);
    assert_int_equal(gs_sampler_gpu_count(f->s), 2);
    assert_int_equal(gs_snapshot_new(&small, 1, 0, NULL), GS_OK);
    assert_int_equal(gs_sampler_sample(f->s, small, 0, &e), GS_EINVAL);
    gs_snapshot_free(small);

    new_snap(f);
    cycle(f, 0);
    clock_gettime(CLOCK_MONOTONIC, &mono);
    assert_true(fabs(f->snap->t_real - (double)time(NULL)) < 5);
    assert_true(f->snap->t_mono_ns > 0);
    assert_true(f->snap->t_mono_ns <= (int64_t)mono.tv_sec * 1000000000LL + mono.tv_nsec);
    gethostname(host, sizeof host - 1);
    assert_string_equal(f->snap->sys.hostname, host);
    assert_int_equal(f->snap->sys.gpu_count, 2);
    assert_int_equal(f->snap->sys.driver_st, GS_ST_OK);
    assert_true(f->snap->sys.driver_version[0] != '\0');
    assert_int_equal(f->snap->gpus[1].index, 1);
    assert_true(gs_gpu_has(&f->snap->gpus[1], GS_M_MEM_USED));
    assert_int_equal(f->snap->n_procs, 0); /* not asked for */

    /* the same pid on two GPUs: one entry per GPU */
    cycle(f, GS_WANT_PROCS | GS_WANT_PROC_HOST);
    assert_int_equal(f->snap->n_procs, 2);
    assert_int_equal(f->snap->procs[0].pid, 31337);
    assert_int_equal(f->snap->procs[1].pid, 31337);
    assert_int_equal(f->snap->procs[0].gpu, 0);
    assert_int_equal(f->snap->procs[1].gpu, 1);
    assert_true(f->snap->procs[0].gpu_mem_bytes > f->snap->procs[1].gpu_mem_bytes);

    /* a second cycle into the same snapshot starts from a clean slate */
    cycle(f, 0);
    assert_int_equal(f->snap->n_procs, 0);
}

/* gs_sampler_snapshot_new: its first cycle skips the clear (the allocation is zero) and reads
 * what a cleared snapshot reads; every later cycle clears, and another snapshot is cleared even
 * while the fresh one waits. */
static void fresh_snapshot_first_cycle(void **state)
{
    struct fx *f = *state;
    struct gs_snapshot *fresh = NULL;
    const unsigned want = GS_WANT_PROCS | GS_WANT_PROC_HOST;
    struct gs_err e;

    NEED_SIM();
    assert_int_equal(open_on(f, "h100x8-training.json", "100", &e), GS_OK);
    assert_int_equal(gs_sampler_snapshot_new(f->s, 2, &fresh, &e), GS_OK);
    assert_int_equal(fresh->n_gpus, 8);
    assert_int_equal(fresh->cap_procs, 2);
    new_snap(f);
    f->snap->gpus[3].st[GS_M_ECC_CORR_VOL] = GS_ST_OK; /* left from an earlier cycle */
    f->snap->gpus[3].hidden_count = 5;
    cycle(f, want); /* another snapshot before the fresh one's first cycle: cleared */
    assert_int_equal(f->snap->gpus[3].st[GS_M_ECC_CORR_VOL], GS_ST_NA);
    assert_int_equal(f->snap->gpus[3].hidden_count, 0);
    assert_int_equal(gs_sampler_sample(f->s, fresh, want, &e), GS_OK);
    for (unsigned i = 0; i < 8; i++) { /* the same readings as the cleared one (clock frozen) */
        assert_memory_equal(fresh->gpus[i].st, f->snap->gpus[i].st, sizeof fresh->gpus[i].st);
        assert_memory_equal(fresh->gpus[i].v, f->snap->gpus[i].v, sizeof fresh->gpus[i].v);
        assert_memory_equal(fresh->gpus[i].text, f->snap->gpus[i].text, sizeof fresh->gpus[i].text);
    }
    assert_int_equal(fresh->n_procs, f->snap->n_procs);
    assert_true(fresh->cap_procs >= fresh->n_procs); /* grown from 2 */
    fresh->gpus[2].st[GS_M_ECC_CORR_VOL] = GS_ST_OK; /* its second cycle clears */
    assert_int_equal(gs_sampler_sample(f->s, fresh, 0, &e), GS_OK);
    assert_int_equal(fresh->gpus[2].st[GS_M_ECC_CORR_VOL], GS_ST_NA);
    assert_int_equal(fresh->n_procs, 0);
    gs_snapshot_free(fresh);
}

/* ---- processes and procfs --------------------------------------------------------------- */

static void self_process_details(void **state)
{
    struct fx *f = *state;
    struct gs_err e;
    const struct gs_proc *p0 = NULL, *p1 = NULL, *ghost = NULL;

    NEED_SIM();
    derive(f, "h100x8-training.json", "processes",
           "[{\"pid\": \"self\", \"gpu\": 0, \"type\": \"both\", \"name\": \"/opt/bin/selftest\","
           "  \"used_memory_mib\": 1000, \"sm_util_pct\": 50},"
           " {\"pid\": \"self\", \"gpu\": 1, \"type\": \"compute\", \"name\": \"selftest\","
           "  \"used_memory_mib\": 2000},"
           " {\"pid\": 2147483000, \"gpu\": 0, \"name\": \"/opt/ghost/bin/ghost --x\","
           "  \"used_memory_mib\": \"unknown\"}]");
    assert_int_equal(open_on(f, f->scenario, "100", &e), GS_OK);
    new_snap(f);
    cycle(f, GS_WANT_PROCS | GS_WANT_PROC_HOST | GS_WANT_PROC_UTIL);
    assert_int_equal(f->snap->n_procs, 3);
    for (unsigned i = 0; i < f->snap->n_procs; i++) {
        const struct gs_proc *p = &f->snap->procs[i];
        if (p->pid == (unsigned)getpid())
            *(p->gpu == 0 ? &p0 : &p1) = p;
        else
            ghost = p;
    }
    assert_non_null(p0);
    assert_non_null(p1);
    assert_non_null(ghost);
    /* merged lists: one entry with two type bits */
    assert_int_equal(p0->type, GS_PROC_COMPUTE | GS_PROC_GRAPHICS);
    assert_int_equal(p1->type, GS_PROC_COMPUTE);
    assert_true(p0->gpu_mem_bytes == 1000ULL * 1048576);
    assert_true(p1->gpu_mem_bytes == 2000ULL * 1048576);
    /* procfs details of this very process */
    assert_int_equal(p0->host_st, GS_ST_OK);
    assert_string_equal(p0->name, "test_sampler");
    assert_non_null(strstr(p0->cmdline, "test_sampler"));
    assert_int_equal(p0->uid, (uint32_t)getuid());
    assert_true(p0->user[0] != '\0');
    assert_true(p0->rss_bytes > 0);
    assert_true(p0->start_time > 1e9 && p0->start_time <= (double)time(NULL) + 1);
    assert_int_equal(p0->cpu_st, GS_ST_NA); /* first sight */
    /* what NVML calls it */
    assert_int_equal(p0->nvml_name_st, GS_ST_OK);
    assert_string_equal(p0->nvml_name, "/opt/bin/selftest");
    /* the same pid on GPU 1 carries the same host details */
    assert_int_equal(p1->host_st, GS_ST_OK);
    assert_string_equal(p1->cmdline, p0->cmdline);
    assert_string_equal(p1->user, p0->user);
    /* a pid procfs does not have: NVML's word stands */
    assert_int_equal(ghost->host_st, GS_ST_NA);
    assert_int_equal(ghost->mem_st, GS_ST_NA); /* NVML_VALUE_NOT_AVAILABLE */
    assert_string_equal(ghost->nvml_name, "/opt/ghost/bin/ghost --x");
    assert_string_equal(ghost->name, "ghost");
    assert_string_equal(ghost->cmdline, "");

    /* without GS_WANT_PROC_HOST only NVML is asked: names, no procfs details */
    cycle(f, GS_WANT_PROCS);
    for (unsigned i = 0; i < f->snap->n_procs; i++) {
        const struct gs_proc *p = &f->snap->procs[i];
        assert_int_equal(p->host_st, GS_ST_NA);
        assert_int_equal(p->nvml_name_st, GS_ST_OK);
        assert_string_equal(p->cmdline, "");
        if (p->pid == (unsigned)getpid())
            assert_string_equal(p->name, "selftest");
    }

    /* burn some CPU, then the ratio appears */
    for (volatile unsigned long i = 0; i < 30000000UL; i++)
        ;
    cycle(f, GS_WANT_PROCS | GS_WANT_PROC_HOST);
    for (unsigned i = 0; i < f->snap->n_procs; i++) {
        const struct gs_proc *p = &f->snap->procs[i];
        if (p->pid != (unsigned)getpid())
            continue;
        assert_int_equal(p->cpu_st, GS_ST_OK);
        assert_true(p->cpu_ratio >= 0 && p->cpu_ratio < 64);
    }
}

static void fake_proc_root(void **state)
{
    struct fx *f = *state;
    struct gs_err e;
    char dir[600];
    FILE *fp;
    static const char cg[] = "0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n";
    static const char cmd[] = "python\0train.py\0";

    NEED_SIM();
    tmpname(f->proc_root, sizeof f->proc_root, "gs_sampler_proc");
    assert_non_null(mkdtemp(f->proc_root));
    snprintf(dir, sizeof dir, "%s/48211", f->proc_root); /* rank0 of the H100 scenario */
    assert_int_equal(mkdir(dir, 0755), 0);
#define PUT(name, data, len)                                                                       \
    do {                                                                                           \
        char p_[700];                                                                              \
        snprintf(p_, sizeof p_, "%s/%s", dir, name);                                               \
        fp = fopen(p_, "wb");                                                                      \
        assert_non_null(fp);                                                                       \
        fwrite(data, 1, len, fp);                                                                  \
        fclose(fp);                                                                                \
    } while (0)
    PUT("stat", "48211 (python) R 1 1 1 0 -1 0 0 0 0 0 10 5 0 0 20 0 1 0 100 0 7 0\n", 66);
    PUT("cmdline", cmd, sizeof cmd - 1);
    PUT("status", "Uid:\t0\t0\t0\t0\n", 13);
    PUT("cgroup", cg, sizeof cg - 1);
#undef PUT
    assert_int_equal(open_on(f, "h100x8-training.json", "100", &e), GS_OK);
    new_snap(f);
    cycle(f, GS_WANT_PROCS | GS_WANT_PROC_HOST);
    assert_int_equal(f->snap->n_procs, 8);
    assert_int_equal(f->snap->procs[0].pid, 48211);
    assert_int_equal(f->snap->procs[0].host_st, GS_ST_OK);
    assert_string_equal(f->snap->procs[0].name, "python");
    assert_string_equal(f->snap->procs[0].cmdline, "python train.py");
    assert_string_equal(f->snap->procs[0].user, "root");
    assert_string_equal(f->snap->procs[0].slurm_job, "4242");
    assert_int_equal(f->snap->procs[1].host_st, GS_ST_NA);  /* 48212 is not in the fake tree */
    assert_string_equal(f->snap->procs[1].name, "python3"); /* from NVML's /usr/bin/python3 */
}

/* ---- failures --------------------------------------------------------------------------- */

/* A scenario's numeric pid is made up: even when it is the pid of a live host process (here
 * this test's own), its user and command line are not read from /proc; {"self"} is. */
static void sim_pids_never_borrow_host(void **state)
{
    struct fx *f = *state;
    struct gs_err e;
    char procs[512];
    const struct gs_proc *num = NULL, *self = NULL;

    NEED_SIM();
    snprintf(procs, sizeof procs,
             "[{\"pid\": %u, \"gpu\": 0, \"name\": \"python3\", \"used_memory_mib\": 10},"
             " {\"pid\": \"self\", \"gpu\": 1, \"name\": \"selftest\", \"used_memory_mib\": 20}]",
             (unsigned)getppid());
    derive(f, "h100x8-training.json", "processes", procs);
    assert_int_equal(open_on(f, f->scenario, "100", &e), GS_OK);
    new_snap(f);
    cycle(f, GS_WANT_PROCS | GS_WANT_PROC_HOST);
    assert_int_equal(f->snap->n_procs, 2);
    assert_int_equal(f->snap->sys.simulated, 1);
    assert_string_equal(f->snap->sys.sim_info, "nvml-sim");
    for (unsigned i = 0; i < f->snap->n_procs; i++) {
        const struct gs_proc *p = &f->snap->procs[i];
        if (p->pid == (unsigned)getppid())
            num = p;
        else if (p->pid == (unsigned)getpid())
            self = p;
    }
    assert_non_null(num);
    assert_non_null(self);
    assert_int_equal(num->sim_only, 1);
    assert_int_equal(num->host_st, GS_ST_NA); /* the parent's /proc entry is not read */
    assert_string_equal(num->cmdline, "");
    assert_string_equal(num->name, "python3"); /* what the scenario says */
    assert_int_equal(self->sim_only, 0);
    assert_int_equal(self->host_st, GS_ST_OK);
}

static void lost_gpu_mid_run(void **state)
{
    struct fx *f = *state;
    struct gs_err e;

    NEED_SIM();
    set_clock(f, 5);
    assert_int_equal(open_on(f, "gpu-lost.json", NULL, &e), GS_OK);
    new_snap(f);
    cycle(f, GS_WANT_ALL & ~GS_WANT_GPM_WAIT);
    for (unsigned i = 0; i < 4; i++)
        assert_int_equal(f->snap->gpus[i].lost, 0);
    assert_int_equal(f->snap->n_procs, 4);
    set_clock(f, 40);
    cycle(f, GS_WANT_ALL & ~GS_WANT_GPM_WAIT); /* one lost GPU is not an error */
    for (unsigned i = 0; i < 4; i++) {
        assert_int_equal(f->snap->gpus[i].lost, i == 2);
        assert_int_equal(f->snap->gpus[i].tst[GS_T_UUID], GS_ST_OK);
    }
    assert_int_equal(f->snap->gpus[2].st[GS_M_TEMP_GPU], GS_ST_LOST);
    assert_true(gs_gpu_has(&f->snap->gpus[3], GS_M_TEMP_GPU));
    assert_int_equal(f->snap->n_procs, 3);
    /* and it stays lost */
    cycle(f, 0);
    assert_int_equal(f->snap->gpus[2].lost, 1);
}

/* ---- memory ----------------------------------------------------------------------------- */

static void warm_cycles_do_not_grow_the_heap(void **state)
{
    struct fx *f = *state;
    struct gs_err e;
    size_t before, after;
    /* PCIe throughput blocks 20 ms per direction per GPU, also in the sim: once is enough */
    unsigned want = GS_WANT_ALL & ~(GS_WANT_GPM_WAIT | GS_WANT_PCIE_TPUT);

    NEED_SIM();
    assert_int_equal(open_on(f, "h100x8-training.json", "100", &e), GS_OK);
    new_snap(f);
    cycle(f, GS_WANT_ALL);
    for (int i = 0; i < 3; i++) /* warm-up: buffers reach their size */
        cycle(f, want);
    before = mallinfo2().uordblks;
    for (int i = 0; i < 20; i++)
        cycle(f, want);
    after = mallinfo2().uordblks;
    if (after > before)
        fail_msg("heap in use grew by %zu bytes over 20 warm cycles", after - before);
}

static double sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
    return s;
}

/* Real clock (the driver's sample times are CLOCK_REALTIME), samples every 50 ms. */
static void util_samples_in_the_snapshot(void **state)
{
    static const char scn[] =
        "{\"scenario_version\": 1, \"gpus\": [{\"name\": \"NVIDIA H100 80GB HBM3\", "
        "\"uuid\": \"GPU-00000000-1111-2222-3333-000000000009\", \"architecture\": \"hopper\", "
        "\"pci\": {\"bus\": \"0x18\", \"device_id\": \"0x233010DE\"}, "
        "\"memory\": {\"total_mib\": 81559}, \"sample_interval_ms\": 50, "
        "\"metrics\": {\"util_gpu_pct\": 64}}]}";
    struct fx *f = *state;
    const struct gs_util_sample *u;
    struct gs_snapshot *copy = NULL;
    uint64_t last = 0, t_off;
    struct gs_err e;
    unsigned n;
    int fd;

    NEED_SIM();
    tmpname(f->scenario, sizeof f->scenario, "gs_sampler_us");
    fd = mkstemp(f->scenario);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, scn, sizeof scn - 1), (ssize_t)(sizeof scn - 1));
    close(fd);
    unsetenv("NVML_SIM_TIME");
    setenv("NVML_SIM_SCENARIO", f->scenario, 1);
    {
        struct gs_sampler_opts o = {.library = sim_lib()};
        assert_int_equal(gs_sampler_open(&f->s, &o, &e), GS_OK);
    }
    new_snap(f);
    sleep_s(0.3);
    for (int round = 0; round < 2; round++) {
        cycle(f, GS_WANT_UTIL_SAMPLES);
        u = gs_snapshot_util_samples(f->snap, 0, &n);
        assert_int_equal(f->snap->gpus[0].usamp_st, GS_ST_OK);
        /* ~6 samples of 50 ms since the open (or the previous cycle) */
        assert_true(n >= 3 && n <= 9);
        for (unsigned i = 0; i < n; i++) {
            assert_true(u[i].t_us > last); /* oldest first, no repeats across cycles */
            assert_true(fabs(u[i].util_ratio - 0.64) < 1e-9);
            assert_true(u[i].t_us <= (uint64_t)(f->snap->t_real * 1e6) + 1000);
            last = u[i].t_us;
        }
        sleep_s(0.3);
    }
    /* not asked: none */
    cycle(f, 0);
    assert_null(gs_snapshot_util_samples(f->snap, 0, &n));
    assert_int_equal(n, 0);
    assert_int_not_equal(f->snap->gpus[0].usamp_st, GS_ST_OK);
    t_off = (uint64_t)(f->snap->t_real * 1e6);
    sleep_s(0.3);
    /* asked again: from the previous cycle's time, not from the last sample read */
    cycle(f, GS_WANT_UTIL_SAMPLES);
    u = gs_snapshot_util_samples(f->snap, 0, &n);
    assert_true(n >= 3 && n <= 9);
    assert_true(u[0].t_us > t_off);
    /* a copy that carries the GPUs only (as the policy's filtered snapshot) has none */
    assert_int_equal(gs_snapshot_new(&copy, 1, 1, NULL), GS_OK);
    copy->gpus[0] = f->snap->gpus[0];
    assert_null(gs_snapshot_util_samples(copy, 0, &n));
    gs_snapshot_free(copy);
    assert_null(gs_snapshot_util_samples(f->snap, 7, &n));
}

/* The calls nvml-sim counted so far (NVML_SIM_PROFILE), through its own extension symbol. */
static unsigned long long sim_calls(void)
{
    void *h = dlopen(sim_lib(), RTLD_NOW | RTLD_NOLOAD);
    void (*get)(unsigned long long *, unsigned long long *);
    unsigned long long ns = 0, calls = 0;

    assert_non_null(h);
    *(void **)&get = dlsym(h, "nvmlSimProfileGet");
    assert_non_null(get);
    get(&ns, &calls);
    dlclose(h);
    return calls;
}

/* Pay for what you ask: with need masks the driver is asked for those readings only. */
static void need_masks(void **state)
{
    struct fx *f = *state;
    static unsigned char m[GS_M__COUNT], t[GS_T__COUNT];
    struct gs_sampler_opts o = {.library = sim_lib(), .need_metrics = m, .need_texts = t};
    unsigned long long before, masked, full;
    struct gs_err e;
    char path[512];

    NEED_SIM();
    setenv("NVML_SIM_PROFILE", "1", 1);
    bundled(path, sizeof path, "h100x8-training.json");
    setenv("NVML_SIM_SCENARIO", path, 1);
    setenv("NVML_SIM_TIME", "100", 1);
    m[GS_M_POWER_DRAW] = m[GS_M_MEM_USED] = 1;
    t[GS_T_NAME] = 1;
    assert_int_equal(gs_sampler_open(&f->s, &o, &e), GS_OK);
    new_snap(f);
    before = sim_calls();
    cycle(f, 0);
    masked = sim_calls() - before;
    for (unsigned g = 0; g < f->snap->n_gpus; g++) {
        const struct gs_gpu *gpu = &f->snap->gpus[g];
        assert_true(gs_gpu_has(gpu, GS_M_POWER_DRAW));
        assert_true(gs_gpu_has(gpu, GS_M_MEM_USED));
        assert_true(gs_gpu_has(gpu, GS_M_MEM_TOTAL)); /* the same call */
        assert_int_equal(gpu->tst[GS_T_NAME], GS_ST_OK);
        assert_int_equal(gpu->st[GS_M_UTIL_GPU], GS_ST_NA);
        assert_int_equal(gpu->st[GS_M_POWER_LIMIT], GS_ST_NA);
        assert_int_not_equal(gpu->tst[GS_T_SERIAL], GS_ST_OK);
    }
    /* per GPU and cycle: the power and memory calls */
    assert_int_equal(masked, 2ull * f->snap->n_gpus);
    gs_sampler_close(f->s);
    gs_snapshot_free(f->snap);
    f->s = NULL;
    f->snap = NULL;
    o.need_metrics = o.need_texts = NULL;
    assert_int_equal(gs_sampler_open(&f->s, &o, &e), GS_OK);
    new_snap(f);
    before = sim_calls();
    cycle(f, 0);
    full = sim_calls() - before;
    assert_true(full > 10 * masked);
    assert_true(gs_gpu_has(&f->snap->gpus[0], GS_M_UTIL_GPU));
    unsetenv("NVML_SIM_PROFILE");
}

static void every_scenario_through_the_sampler(void **state)
{
    static const char *const names[] = {
        "a100x2-dpo-imbalance.json",
        "a100x8-dataloader-bound.json",
        "gpu-lost.json",
        "h100-mig.json",
        "h100x8-training.json",
        "rtx4090-idle-desktop.json",
        "thermal-powercap.json",
    };
    struct fx *f = *state;
    struct gs_err e;

    NEED_SIM();
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (open_on(f, names[i], "45", &e) != GS_OK)
            fail_msg("%s: %s", names[i], e.msg);
        new_snap(f);
        cycle(f, GS_WANT_ALL);
        cycle(f, GS_WANT_ALL & ~GS_WANT_PCIE_TPUT);
        assert_true(f->snap->n_gpus >= 1);
        gs_snapshot_free(f->snap);
        f->snap = NULL;
        gs_sampler_close(f->s);
        f->s = NULL;
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(open_errors, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(snapshot_bookkeeping, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(fresh_snapshot_first_cycle, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(self_process_details, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(fake_proc_root, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(sim_pids_never_borrow_host, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(lost_gpu_mid_run, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(warm_cycles_do_not_grow_the_heap, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(every_scenario_through_the_sampler, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(util_samples_in_the_snapshot, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(need_masks, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
