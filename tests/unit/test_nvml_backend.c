/*
 * Unit tests for the NVML backend (src/backend/nvml.c).
 *
 * The first group checks the pure helpers (status mapping, init error mapping, the
 * process-list stride rule of nvml-abi.md §7, field-value conversion). The second group runs
 * the real backend through its ops table against nvml-sim (sim/), a libnvidia-ml.so.1 driven
 * by scenario files: GPUSCOPE_SIM_LIB, GPUSCOPE_SIM_MINIMAL_LIB and GPUSCOPE_SOURCE_ROOT come
 * from tests/meson.build. Scenarios are chosen with NVML_SIM_SCENARIO and a frozen virtual
 * clock with NVML_SIM_TIME, both read by the sim at nvmlInit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <dlfcn.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/nvml.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"

/* ---- pure helpers ----------------------------------------------------------------------- */

static void status_mapping(void **state)
{
    (void)state;
    assert_int_equal(gs_nvml_status(NVML_SUCCESS), GS_ST_OK);
    assert_int_equal(gs_nvml_status(NVML_ERROR_NOT_SUPPORTED), GS_ST_NA);
    assert_int_equal(gs_nvml_status(NVML_ERROR_FUNCTION_NOT_FOUND), GS_ST_NA);
    assert_int_equal(gs_nvml_status(NVML_ERROR_ARGUMENT_VERSION_MISMATCH), GS_ST_NA);
    assert_int_equal(gs_nvml_status(NVML_ERROR_DEPRECATED), GS_ST_NA);
    assert_int_equal(gs_nvml_status(NVML_ERROR_NO_PERMISSION), GS_ST_NOPERM);
    assert_int_equal(gs_nvml_status(NVML_ERROR_GPU_IS_LOST), GS_ST_LOST);
    assert_int_equal(gs_nvml_status(NVML_ERROR_UNKNOWN), GS_ST_ERROR);
    assert_int_equal(gs_nvml_status(NVML_ERROR_TIMEOUT), GS_ST_ERROR);
    assert_int_equal(gs_nvml_status(12345), GS_ST_ERROR);
}

static void init_error_mapping(void **state)
{
    (void)state;
    assert_int_equal(gs_nvml_init_rc(NVML_SUCCESS), GS_OK);
    assert_int_equal(gs_nvml_init_rc(NVML_ERROR_DRIVER_NOT_LOADED), GS_ENODRIVER);
    assert_int_equal(gs_nvml_init_rc(NVML_ERROR_LIB_RM_VERSION_MISMATCH), GS_EMISMATCH);
    assert_int_equal(gs_nvml_init_rc(NVML_ERROR_NO_PERMISSION), GS_EPERM);
    assert_int_equal(gs_nvml_init_rc(NVML_ERROR_LIBRARY_NOT_FOUND), GS_ENOLIB);
    assert_int_equal(gs_nvml_init_rc(NVML_ERROR_GPU_NOT_FOUND), GS_ENOGPU);
    assert_int_equal(gs_nvml_init_rc(NVML_ERROR_UNKNOWN), GS_ENVML);
    /* and the exit codes scripts see, as nvidia-smi's */
    assert_int_equal(gs_rc_exit_code(gs_nvml_init_rc(NVML_ERROR_DRIVER_NOT_LOADED)), 9);
    assert_int_equal(gs_rc_exit_code(gs_nvml_init_rc(NVML_ERROR_LIB_RM_VERSION_MISMATCH)), 18);
}

static void process_stride_rule(void **state)
{
    (void)state;
    /* _v3 on 535.43–535.86: ConfComputeMemSizeInfo exported, RunningProcessDetailList not */
    assert_int_equal(gs_nvml_proc_stride(0, 1, 0), 32);
    /* _v3 on 535.104+ (both exported) and on 510–530 (neither) */
    assert_int_equal(gs_nvml_proc_stride(0, 1, 1), 24);
    assert_int_equal(gs_nvml_proc_stride(0, 0, 0), 24);
    assert_int_equal(gs_nvml_proc_stride(0, 0, 1), 24);
    assert_int_equal(gs_nvml_proc_stride(1, 1, 0), 24); /* _v2 */
    assert_int_equal(gs_nvml_proc_stride(2, 1, 0), 16); /* plain */
    assert_int_equal(gs_nvml_proc_stride(-1, 0, 0), 0); /* none */
    assert_true(gs_nvml_proc_stride(0, 1, 0) <= GS_NVML_PROC_STRIDE_MAX);
}

static void field_value_types(void **state)
{
    nvmlFieldValue_t fv;
    double v = -1;
    (void)state;

    memset(&fv, 0, sizeof fv);
    fv.valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
    fv.value.uiVal = 48;
    assert_int_equal(gs_nvml_field_double(&fv, &v), GS_OK);
    assert_true(v == 48);
    fv.valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
    fv.value.ullVal = 123456789012345ULL;
    assert_int_equal(gs_nvml_field_double(&fv, &v), GS_OK);
    assert_true(v == 123456789012345.0);
    fv.valueType = NVML_VALUE_TYPE_DOUBLE;
    fv.value.dVal = 69.85;
    assert_int_equal(gs_nvml_field_double(&fv, &v), GS_OK);
    assert_true(v == 69.85);
    fv.valueType = NVML_VALUE_TYPE_SIGNED_INT;
    fv.value.siVal = -5;
    assert_int_equal(gs_nvml_field_double(&fv, &v), GS_OK);
    assert_true(v == -5);
    fv.valueType = NVML_VALUE_TYPE_SIGNED_LONG_LONG;
    fv.value.sllVal = -7;
    assert_int_equal(gs_nvml_field_double(&fv, &v), GS_OK);
    assert_true(v == -7);
    fv.valueType = NVML_VALUE_TYPE_UNSIGNED_SHORT;
    fv.value.ullVal = 0;
    fv.value.usVal = 7;
    assert_int_equal(gs_nvml_field_double(&fv, &v), GS_OK);
    assert_true(v == 7);
    fv.valueType = NVML_VALUE_TYPE_UNSIGNED_LONG;
    fv.value.ulVal = 9;
    assert_int_equal(gs_nvml_field_double(&fv, &v), GS_OK);
    assert_true(v == 9);
    fv.valueType = 99;
    assert_int_equal(gs_nvml_field_double(&fv, &v), GS_ENOTSUP);
}

/* ---- the backend on libraries that are not NVML ----------------------------------------- */

static void open_missing_library(void **state)
{
    struct gs_backend_opts o = {.library = "/nonexistent/dir/libnvidia-ml.so.1"};
    struct gs_backend *b = NULL;
    struct gs_err e;
    (void)state;

    gs_err_clear(&e);
    assert_int_equal(gs_backend_nvml.open(&b, &o, &e), GS_ENOLIB);
    assert_null(b);
    assert_int_equal(e.rc, GS_ENOLIB);
    assert_non_null(strstr(e.msg, "nvml: cannot load /nonexistent/dir/libnvidia-ml.so.1"));
    assert_int_equal(gs_rc_exit_code(e.rc), 12);
}

static void open_library_without_nvml(void **state)
{
    struct gs_backend_opts o = {.library = "libm.so.6"}; /* loads fine, exports no nvmlInit */
    struct gs_backend *b = NULL;
    struct gs_err e;
    (void)state;

    assert_int_equal(gs_backend_nvml.open(&b, &o, &e), GS_ENOLIB);
    assert_null(b);
    assert_non_null(strstr(e.msg, "neither nvmlInit_v2 nor nvmlInit"));
    gs_backend_nvml.close(NULL);
}

static void open_env_library(void **state)
{
    struct gs_backend_opts o = {NULL};
    struct gs_backend *b = NULL;
    struct gs_err e;
    char *old = getenv("GPUSCOPE_NVML_LIBRARY");
    char saved[1024] = "";
    (void)state;

    if (old)
        snprintf(saved, sizeof saved, "%s", old);
    setenv("GPUSCOPE_NVML_LIBRARY", "/nonexistent/env/libnvidia-ml.so.1", 1);
    assert_int_equal(gs_backend_nvml.open(&b, &o, &e), GS_ENOLIB);
    assert_non_null(strstr(e.msg, "/nonexistent/env/libnvidia-ml.so.1"));
    if (old)
        setenv("GPUSCOPE_NVML_LIBRARY", saved, 1);
    else
        unsetenv("GPUSCOPE_NVML_LIBRARY");
}

/* ---- against nvml-sim ------------------------------------------------------------------- */

#define MIB 1048576.0

static const char *sim_lib(void)
{
    const char *p = getenv("GPUSCOPE_SIM_LIB");
    return p && *p ? p : NULL;
}

static void scenario(char *buf, size_t n, const char *name)
{
    const char *root = getenv("GPUSCOPE_SOURCE_ROOT");
    snprintf(buf, n, "%s/sim/scenarios/%s", root && *root ? root : ".", name);
}

/* Opens the backend on lib with the scenario (NULL: none) at the virtual time tm ("60",
 * "file:/path"). */
static int sim_open(struct gs_backend **b, const char *lib, const char *name, const char *tm,
                    struct gs_err *e)
{
    struct gs_backend_opts o = {.library = lib};
    char path[1024];

    if (name) {
        if (name[0] == '/')
            snprintf(path, sizeof path, "%s", name);
        else
            scenario(path, sizeof path, name);
        setenv("NVML_SIM_SCENARIO", path, 1);
    } else {
        unsetenv("NVML_SIM_SCENARIO");
    }
    if (tm)
        setenv("NVML_SIM_TIME", tm, 1);
    else
        unsetenv("NVML_SIM_TIME");
    gs_err_clear(e);
    return gs_backend_nvml.open(b, &o, e);
}

#define NEED_SIM()                                                                                 \
    do {                                                                                           \
        if (!sim_lib()) {                                                                          \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

/* A file the sim reads its virtual time from on every call (NVML_SIM_TIME=file:PATH). */
struct simclock {
    char path[256];
    char env[300];
};

static void clock_set(struct simclock *c, double t)
{
    FILE *f = fopen(c->path, "w");
    assert_non_null(f);
    fprintf(f, "%.3f\n", t);
    fclose(f);
}

static void clock_new(struct simclock *c, double t)
{
    const char *tmp = getenv("TMPDIR");
    int fd;
    snprintf(c->path, sizeof c->path, "%s/gs_simclock_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    fd = mkstemp(c->path);
    assert_true(fd >= 0);
    close(fd);
    snprintf(c->env, sizeof c->env, "file:%s", c->path);
    clock_set(c, t);
}

/* Per-test state, released by the teardown even when an assertion fails, so a failed test
 * never leaves the sim initialised for the next one. */
struct fx {
    struct gs_backend *b;
    struct gs_snapshot *snap;
    struct simclock clk;
};

static int fx_setup(void **state)
{
    *state = calloc(1, sizeof(struct fx));
    return *state ? 0 : -1;
}

static int fx_teardown(void **state)
{
    struct fx *f = *state;
    gs_backend_nvml.close(f->b);
    gs_snapshot_free(f->snap);
    if (f->clk.path[0])
        unlink(f->clk.path);
    free(f);
    return 0;
}

static void assert_close(double got, double want, double tol)
{
    if (fabs(got - want) > tol)
        fail_msg("got %.6f, want %.6f (+-%g)", got, want, tol);
}

static void sample_ok(struct gs_backend *b, unsigned dev, struct gs_gpu *g, unsigned want)
{
    struct gs_err e;
    memset(g, 0, sizeof *g);
    if (gs_backend_nvml.sample(b, dev, g, want, &e) != GS_OK)
        fail_msg("sample(gpu %u): %s", dev, e.msg);
}

static void every_scenario_opens_and_samples(void **state)
{
    struct fx *f = *state;
    char dir[1024];
    struct dirent *de;
    DIR *d;
    unsigned n_scen = 0;

    NEED_SIM();
    scenario(dir, sizeof dir, "");
    d = opendir(dir);
    assert_non_null(d);
    while ((de = readdir(d)) != NULL) {
        struct gs_err e;
        size_t len = strlen(de->d_name);
        unsigned n, ok_gpus = 0;

        if (len < 6 || strcmp(de->d_name + len - 5, ".json") != 0)
            continue;
        n_scen++;
        if (sim_open(&f->b, sim_lib(), de->d_name, "12.5", &e) != GS_OK)
            fail_msg("%s: %s", de->d_name, e.msg);
        n = gs_backend_nvml.count(f->b);
        assert_true(n > 0);
        assert_int_equal(gs_snapshot_new(&f->snap, n, 4, NULL), GS_OK);
        assert_int_equal(gs_backend_nvml.begin(f->b, GS_WANT_ALL, &e), GS_OK);
        for (unsigned i = 0; i < n; i++) {
            struct gs_gpu *g = &f->snap->gpus[i];
            assert_int_equal(gs_backend_nvml.sample(f->b, i, g, GS_WANT_ALL, &e), GS_OK);
            assert_int_equal(g->index, i);
            if (g->lost)
                continue;
            ok_gpus++;
            assert_true(gs_gpu_has_text(g, GS_T_NAME));
            assert_true(gs_gpu_has_text(g, GS_T_UUID));
            assert_true(gs_gpu_has_text(g, GS_T_PCI_BUS_ID));
            assert_true(gs_gpu_has(g, GS_M_MEM_TOTAL));
            assert_true(gs_gpu_has(g, GS_M_TEMP_GPU));
            assert_int_equal(gs_backend_nvml.processes(f->b, i, f->snap, GS_WANT_ALL, &e), GS_OK);
        }
        assert_true(ok_gpus > 0);
        for (unsigned i = 0; i < f->snap->n_procs; i++) {
            assert_true(f->snap->procs[i].pid > 0);
            assert_true(f->snap->procs[i].gpu < n);
            assert_true(f->snap->procs[i].type != 0);
        }
        gs_snapshot_free(f->snap);
        f->snap = NULL;
        gs_backend_nvml.close(f->b);
        f->b = NULL;
    }
    closedir(d);
    assert_true(n_scen >= 5);
}

static void h100_matches_scenario(void **state)
{
    struct fx *f = *state;
    struct gs_system sys;
    struct gs_gpu g;
    struct gs_err e;

    NEED_SIM();
    assert_int_equal(sim_open(&f->b, sim_lib(), "h100x8-training.json", "100", &e), GS_OK);
    assert_int_equal(gs_backend_nvml.count(f->b), 8);
    memset(&sys, 0, sizeof sys);
    strcpy(sys.hostname, "kept");
    gs_backend_nvml.system(f->b, &sys);
    assert_string_equal(sys.hostname, "kept");
    assert_int_equal(sys.driver_st, GS_ST_OK);
    assert_string_equal(sys.driver_version, "590.48.01");
    assert_int_equal(sys.cuda_st, GS_ST_OK);
    assert_int_equal(sys.cuda_version, 13010);
    assert_int_equal(sys.gpu_count, 8);

    /* begin registers for Xid events (GS_WANT_HEALTH) before the first sample */
    assert_int_equal(gs_backend_nvml.begin(f->b, GS_WANT_ALL & ~GS_WANT_GPM_WAIT, &e), GS_OK);
    sample_ok(f->b, 0, &g, GS_WANT_ALL & ~GS_WANT_GPM_WAIT);
    assert_int_equal(g.lost, 0);
    assert_string_equal(g.text[GS_T_NAME], "NVIDIA H100 80GB HBM3");
    assert_string_equal(g.text[GS_T_UUID], "GPU-6c9a1f3e-24b1-5d7e-8a0f-3b9c41d27e51");
    assert_string_equal(g.text[GS_T_SERIAL], "1652223010463");
    assert_string_equal(g.text[GS_T_PCI_BUS_ID], "00000000:18:00.0");
    assert_string_equal(g.text[GS_T_VBIOS], "96.00.A5.00.01");
    assert_true(g.v[GS_M_PCI_BUS] == 0x18);
    assert_true(g.v[GS_M_PCI_DEVICE_ID] == (double)0x233010DEu);
    assert_true(g.v[GS_M_PCI_SUBSYS_ID] == (double)0x16C110DEu);
    assert_true(g.v[GS_M_ARCH] == NVML_DEVICE_ARCH_HOPPER);
    assert_true(g.v[GS_M_CC_MAJOR] == 9 && g.v[GS_M_CC_MINOR] == 0);
    assert_true(g.v[GS_M_MINOR] == 0);
    /* memory: v2 splits out the reserved part */
    assert_true(g.v[GS_M_MEM_TOTAL] == 81559 * MIB);
    assert_true(gs_gpu_has(&g, GS_M_MEM_RESERVED));
    assert_true(g.v[GS_M_MEM_RESERVED] == 479 * MIB);
    assert_close(g.v[GS_M_MEM_USED] + g.v[GS_M_MEM_FREE] + g.v[GS_M_MEM_RESERVED],
                 g.v[GS_M_MEM_TOTAL], MIB);
    assert_true(g.v[GS_M_BAR1_TOTAL] == 131072 * MIB);
    /* units: W, Hz, ratios */
    assert_true(g.v[GS_M_POWER_LIMIT] == 700);
    assert_true(g.v[GS_M_POWER_DEFAULT_LIMIT] == 700);
    assert_true(g.v[GS_M_POWER_ENFORCED_LIMIT] == 700);
    assert_true(g.v[GS_M_POWER_MIN_LIMIT] == 200);
    assert_true(g.v[GS_M_POWER_MAX_LIMIT] == 700);
    assert_true(g.v[GS_M_POWER_DRAW] > 200 && g.v[GS_M_POWER_DRAW] < 700);
    assert_true(gs_gpu_has(&g, GS_M_POWER_AVERAGE) && gs_gpu_has(&g, GS_M_POWER_INSTANT));
    assert_true(g.v[GS_M_POWER_INSTANT] > 200 && g.v[GS_M_POWER_INSTANT] < 720);
    assert_true(g.v[GS_M_ENERGY] >= 412345678.901);
    assert_true(g.v[GS_M_CLOCK_SM] == 1980e6);
    assert_true(g.v[GS_M_CLOCK_MEM] == 2619e6);
    assert_true(g.v[GS_M_CLOCK_MAX_SM] == 1980e6);
    assert_true(g.v[GS_M_CLOCK_MAX_VIDEO] == 1545e6);
    assert_true(g.v[GS_M_UTIL_GPU] >= 0 && g.v[GS_M_UTIL_GPU] <= 1);
    assert_true(g.v[GS_M_UTIL_MEM] >= 0 && g.v[GS_M_UTIL_MEM] <= 1);
    assert_true(g.v[GS_M_TEMP_GPU] >= 37 && g.v[GS_M_TEMP_GPU] <= 65);
    assert_true(gs_gpu_has(&g, GS_M_TEMP_MEM));
    assert_true(g.v[GS_M_TEMP_SHUTDOWN] == 95 && g.v[GS_M_TEMP_SLOWDOWN] == 89);
    assert_true(g.v[GS_M_TEMP_GPU_MAX] == 87 && g.v[GS_M_TEMP_MEM_MAX] == 95);
    assert_true(g.v[GS_M_PCIE_GEN] == 5 && g.v[GS_M_PCIE_WIDTH] == 16);
    assert_true(g.v[GS_M_PCIE_GEN_MAX] == 5 && g.v[GS_M_PCIE_WIDTH_MAX] == 16);
    assert_true(gs_gpu_has(&g, GS_M_PCIE_TX) && gs_gpu_has(&g, GS_M_PCIE_RX));
    assert_true(g.v[GS_M_PCIE_RX] > 1000.0 * 1024); /* KB/s became bytes/s */
    assert_true(g.v[GS_M_PSTATE] == 0);
    assert_true(g.v[GS_M_THROTTLE_SUPPORTED] == 0x1FF);
    assert_true(gs_gpu_has(&g, GS_M_THROTTLE_ACTIVE));
    assert_true(gs_gpu_has(&g, GS_M_THROTTLE_NS_SW_POWER));
    assert_true(g.v[GS_M_ECC_MODE] == 1 && g.v[GS_M_PERSISTENCE] == 1);
    assert_true(g.v[GS_M_COMPUTE_MODE] == 0 && g.v[GS_M_MIG_MODE] == 0);
    assert_true(gs_gpu_has(&g, GS_M_ECC_UNCORR_VOL) && g.v[GS_M_ECC_UNCORR_VOL] == 0);
    assert_int_equal(g.ecc_loc_st[1][0][2], GS_ST_OK); /* device memory */
    assert_int_equal(g.ecc_loc_st[1][0][0], GS_ST_NA); /* L1: not on this board */
    assert_true(gs_gpu_has(&g, GS_M_REMAP_CORR));
    assert_true(gs_gpu_has(&g, GS_M_XID_LAST) && g.v[GS_M_XID_LAST] == 0);
    /* absent, not zero */
    assert_int_equal(g.st[GS_M_FAN], GS_ST_NA);
    assert_int_equal(g.st[GS_M_RETIRED_SBE], GS_ST_NA);
    assert_int_equal(g.n_mig, 0);
    gs_backend_nvml.close(f->b);
    f->b = NULL;
}

static void geforce_absent_fields(void **state)
{
    struct fx *f = *state;
    struct gs_gpu g;
    struct gs_err e;

    NEED_SIM();
    assert_int_equal(sim_open(&f->b, sim_lib(), "rtx4090-idle-desktop.json", "30", &e), GS_OK);
    sample_ok(f->b, 0, &g, GS_WANT_ALL & ~GS_WANT_GPM_WAIT);
    assert_string_equal(g.text[GS_T_NAME], "NVIDIA GeForce RTX 4090");
    assert_int_equal(g.tst[GS_T_SERIAL], GS_ST_NA);
    assert_string_equal(g.text[GS_T_SERIAL], "");
    assert_int_equal(g.st[GS_M_ECC_MODE], GS_ST_NA);
    assert_int_equal(g.st[GS_M_ECC_CORR_VOL], GS_ST_NA);
    assert_int_equal(g.ecc_loc_st[1][0][2], GS_ST_NA);
    assert_int_equal(g.st[GS_M_MIG_MODE], GS_ST_NA);
    assert_int_equal(g.st[GS_M_TEMP_MEM], GS_ST_NA);
    assert_int_equal(g.st[GS_M_GPM_SM_ACTIVE], GS_ST_NA);
    assert_int_equal(g.st[GS_M_REMAP_CORR], GS_ST_NA);
    assert_true(gs_gpu_has(&g, GS_M_FAN)); /* a fan, stopped: 0 is a value */
    assert_true(gs_gpu_has(&g, GS_M_POWER_DRAW));
    assert_true(g.v[GS_M_ARCH] == NVML_DEVICE_ARCH_ADA);
    gs_backend_nvml.close(f->b);
    f->b = NULL;
}

/* A capture scenario (tests/e2e/scenarios) by its short name: "rtx4080s-load". */
static void capture_scenario(char *buf, size_t n, const char *name)
{
    const char *root = getenv("GPUSCOPE_SOURCE_ROOT");
    snprintf(buf, n, "%s/tests/e2e/scenarios/capture-%s.json", root && *root ? root : ".", name);
}

/* The fields nvidia-smi prints from the video engine calls: encoder sessions (with latency in
 * seconds), JPEG and OFA utilization; absent where the board (or MIG mode) has none. */
static void video_engine_fields(void **state)
{
    struct fx *f = *state;
    struct gs_gpu g;
    struct gs_err e;
    char path[1024];

    NEED_SIM();
    capture_scenario(path, sizeof path, "rtx4080s-load");
    assert_int_equal(sim_open(&f->b, sim_lib(), path, "100", &e), GS_OK);
    sample_ok(f->b, 0, &g, 0);
    assert_true(gs_gpu_has(&g, GS_M_ENC_SESSIONS) && g.v[GS_M_ENC_SESSIONS] == 2);
    assert_true(gs_gpu_has(&g, GS_M_ENC_FPS) && g.v[GS_M_ENC_FPS] == 184);
    assert_true(gs_gpu_has(&g, GS_M_ENC_LATENCY));
    assert_true(fabs(g.v[GS_M_ENC_LATENCY] - 0.062844) < 1e-9);
    assert_true(gs_gpu_has(&g, GS_M_UTIL_JPEG) && g.v[GS_M_UTIL_JPEG] == 0);
    assert_true(gs_gpu_has(&g, GS_M_UTIL_OFA) && g.v[GS_M_UTIL_OFA] == 0);
    gs_backend_nvml.close(f->b);
    f->b = NULL;

    capture_scenario(path, sizeof path, "h100-mig-load"); /* engines, but MIG mode is on */
    assert_int_equal(sim_open(&f->b, sim_lib(), path, "100", &e), GS_OK);
    sample_ok(f->b, 0, &g, 0);
    assert_int_equal(g.st[GS_M_UTIL_JPEG], GS_ST_NA);
    assert_int_equal(g.st[GS_M_UTIL_OFA], GS_ST_NA);
    assert_true(gs_gpu_has(&g, GS_M_ENC_SESSIONS) && g.v[GS_M_ENC_SESSIONS] == 0);
    gs_backend_nvml.close(f->b);
    f->b = NULL;

    /* a scenario that does not describe them: absent, not 0 */
    assert_int_equal(sim_open(&f->b, sim_lib(), "rtx4090-idle-desktop.json", "30", &e), GS_OK);
    sample_ok(f->b, 0, &g, GS_WANT_ALL & ~GS_WANT_GPM_WAIT);
    assert_int_equal(g.st[GS_M_ENC_SESSIONS], GS_ST_NA);
    assert_int_equal(g.st[GS_M_ENC_FPS], GS_ST_NA);
    assert_int_equal(g.st[GS_M_ENC_LATENCY], GS_ST_NA);
    assert_int_equal(g.st[GS_M_UTIL_JPEG], GS_ST_NA);
    assert_int_equal(g.st[GS_M_UTIL_OFA], GS_ST_NA);
    gs_backend_nvml.close(f->b);
    f->b = NULL;
}

/* Writes a one-GPU scenario with extra GPU keys to a temporary file; path receives its name. */
static void inline_scenario(char *path, size_t n, const char *gpu_extra)
{
    int fd;
    FILE *fp;

    snprintf(path, n, "/tmp/gs-backend-test-XXXXXX");
    fd = mkstemp(path);
    assert_true(fd >= 0);
    fp = fdopen(fd, "w");
    assert_non_null(fp);
    fprintf(fp,
            "{\"gpus\": [{\"name\": \"NVIDIA Test GPU\", \"uuid\": \"GPU-test-0\", "
            "\"architecture\": \"hopper\", \"pci\": {\"bus\": 1, \"device_id\": \"0x2330\"}, "
            "\"memory\": {\"total_mib\": 1000}, %s}]}\n",
            gpu_extra);
    fclose(fp);
}

/* Board fields read once at open or at the slow cadence: inforom versions and validity. */
static void board_fields(void **state)
{
    struct fx *f = *state;
    struct gs_gpu g;
    struct gs_err e;
    char path[1024];

    NEED_SIM();
    capture_scenario(path, sizeof path, "h100-load");
    assert_int_equal(sim_open(&f->b, sim_lib(), path, "100", &e), GS_OK);
    sample_ok(f->b, 0, &g, 0);
    assert_int_equal(g.tst[GS_T_INFOROM_IMAGE], GS_ST_OK);
    assert_string_equal(g.text[GS_T_INFOROM_IMAGE], "G520.0200.00.05");
    assert_string_equal(g.text[GS_T_INFOROM_OEM], "2.1");
    assert_string_equal(g.text[GS_T_INFOROM_ECC], "7.16");
    assert_int_equal(g.tst[GS_T_INFOROM_PWR], GS_ST_NA);
    assert_true(gs_gpu_has(&g, GS_M_INFOROM_VALID) && g.v[GS_M_INFOROM_VALID] == 1);
    assert_true(gs_gpu_has(&g, GS_M_DISPLAY_ATTACHED) && g.v[GS_M_DISPLAY_ATTACHED] == 1);
    assert_true(gs_gpu_has(&g, GS_M_DISPLAY_ACTIVE) && g.v[GS_M_DISPLAY_ACTIVE] == 0);
    assert_true(gs_gpu_has(&g, GS_M_ACCOUNTING) && g.v[GS_M_ACCOUNTING] == 0);
    assert_true(gs_gpu_has(&g, GS_M_ACCOUNTING_BUFFER) && g.v[GS_M_ACCOUNTING_BUFFER] == 4000);
    assert_true(gs_gpu_has(&g, GS_M_GSP_MODE) && g.v[GS_M_GSP_MODE] == 1);
    assert_true(gs_gpu_has(&g, GS_M_GSP_MODE_DEFAULT) && g.v[GS_M_GSP_MODE_DEFAULT] == 1);
    gs_backend_nvml.close(f->b);
    f->b = NULL;

    inline_scenario(path, sizeof path,
                    "\"inforom\": {\"image\": \"G001.0000.02.04\", \"valid\": false}");
    assert_int_equal(sim_open(&f->b, sim_lib(), path, "10", &e), GS_OK);
    sample_ok(f->b, 0, &g, 0);
    assert_string_equal(g.text[GS_T_INFOROM_IMAGE], "G001.0000.02.04");
    assert_int_equal(g.tst[GS_T_INFOROM_OEM], GS_ST_NA);
    assert_true(gs_gpu_has(&g, GS_M_INFOROM_VALID) && g.v[GS_M_INFOROM_VALID] == 0);
    gs_backend_nvml.close(f->b);
    f->b = NULL;
    unlink(path);

    /* none of it in the scenario: absent */
    assert_int_equal(sim_open(&f->b, sim_lib(), "rtx4090-idle-desktop.json", "30", &e), GS_OK);
    sample_ok(f->b, 0, &g, GS_WANT_ALL & ~GS_WANT_GPM_WAIT);
    for (int t = GS_T_INFOROM_IMAGE; t <= GS_T_INFOROM_PWR; t++)
        assert_int_equal(g.tst[t], GS_ST_NA);
    assert_int_equal(g.st[GS_M_INFOROM_VALID], GS_ST_NA);
    assert_int_equal(g.st[GS_M_DISPLAY_ATTACHED], GS_ST_NA);
    assert_int_equal(g.st[GS_M_DISPLAY_ACTIVE], GS_ST_NA);
    assert_int_equal(g.st[GS_M_ACCOUNTING], GS_ST_NA);
    assert_int_equal(g.st[GS_M_ACCOUNTING_BUFFER], GS_ST_NA);
    assert_int_equal(g.st[GS_M_GSP_MODE], GS_ST_NA);
    assert_int_equal(g.st[GS_M_GSP_MODE_DEFAULT], GS_ST_NA);
    gs_backend_nvml.close(f->b);
    f->b = NULL;
}

/* PCI class codes: nvmlDeviceGetPciInfoExt with version 1 (the sim rejects any other), read at
 * open; a library or board that cannot answer leaves them absent. */
static void pci_class_codes(void **state)
{
    static const char *const absent_rc[] = {"ARGUMENT_VERSION_MISMATCH", "FUNCTION_NOT_FOUND",
                                            "NOT_SUPPORTED"};
    struct fx *f = *state;
    struct gs_gpu g;
    struct gs_err e;
    char path[1024], extra[160];

    NEED_SIM();
    capture_scenario(path, sizeof path, "h100-load");
    assert_int_equal(sim_open(&f->b, sim_lib(), path, "100", &e), GS_OK);
    sample_ok(f->b, 0, &g, 0);
    assert_true(gs_gpu_has(&g, GS_M_PCI_BASE_CLASS) && g.v[GS_M_PCI_BASE_CLASS] == 3);
    assert_true(gs_gpu_has(&g, GS_M_PCI_SUB_CLASS) && g.v[GS_M_PCI_SUB_CLASS] == 2);
    gs_backend_nvml.close(f->b);
    f->b = NULL;

    capture_scenario(path, sizeof path, "rtx4080s-idle");
    assert_int_equal(sim_open(&f->b, sim_lib(), path, "100", &e), GS_OK);
    sample_ok(f->b, 0, &g, 0);
    assert_true(gs_gpu_has(&g, GS_M_PCI_BASE_CLASS) && g.v[GS_M_PCI_BASE_CLASS] == 3);
    assert_true(gs_gpu_has(&g, GS_M_PCI_SUB_CLASS) && g.v[GS_M_PCI_SUB_CLASS] == 0);
    gs_backend_nvml.close(f->b);
    f->b = NULL;

    /* the scenario gives no class codes: NOT_SUPPORTED */
    assert_int_equal(sim_open(&f->b, sim_lib(), "rtx4090-idle-desktop.json", "30", &e), GS_OK);
    sample_ok(f->b, 0, &g, GS_WANT_ALL & ~GS_WANT_GPM_WAIT);
    assert_int_equal(g.st[GS_M_PCI_BASE_CLASS], GS_ST_NA);
    assert_int_equal(g.st[GS_M_PCI_SUB_CLASS], GS_ST_NA);
    gs_backend_nvml.close(f->b);
    f->b = NULL;

    for (size_t i = 0; i < sizeof absent_rc / sizeof absent_rc[0]; i++) {
        snprintf(extra, sizeof extra, "\"errors\": {\"nvmlDeviceGetPciInfoExt\": \"%s\"}",
                 absent_rc[i]);
        inline_scenario(path, sizeof path, extra);
        assert_int_equal(sim_open(&f->b, sim_lib(), path, "10", &e), GS_OK);
        sample_ok(f->b, 0, &g, 0);
        assert_int_equal(g.st[GS_M_PCI_BASE_CLASS], GS_ST_NA);
        assert_int_equal(g.st[GS_M_PCI_SUB_CLASS], GS_ST_NA);
        assert_true(gs_gpu_has(&g, GS_M_PCI_BUS)); /* the older PCI call still answers */
        gs_backend_nvml.close(f->b);
        f->b = NULL;
        unlink(path);
    }
}

/* The margin to the slowdown temperature: version 1, every cycle, signed; absent where the
 * library or board cannot answer. */
static void temperature_margin(void **state)
{
    static const char *const absent_rc[] = {"ARGUMENT_VERSION_MISMATCH", "FUNCTION_NOT_FOUND",
                                            "NOT_SUPPORTED"};
    struct fx *f = *state;
    struct gs_gpu g;
    struct gs_err e;
    char path[1024], extra[200];

    NEED_SIM();
    capture_scenario(path, sizeof path, "l40s-idle");
    assert_int_equal(sim_open(&f->b, sim_lib(), path, "1000", &e), GS_OK);
    sample_ok(f->b, 0, &g, 0);
    assert_true(gs_gpu_has(&g, GS_M_TEMP_MARGIN) && g.v[GS_M_TEMP_MARGIN] == 25);
    gs_backend_nvml.close(f->b);
    f->b = NULL;

    /* a pattern: read fresh each cycle on one open backend, and below zero past the limit */
    inline_scenario(path, sizeof path,
                    "\"metrics\": {\"temp_margin_c\": {\"points\": [[0, 12], [20, -3]]}}");
    clock_new(&f->clk, 0);
    assert_int_equal(sim_open(&f->b, sim_lib(), path, f->clk.env, &e), GS_OK);
    sample_ok(f->b, 0, &g, 0);
    assert_true(gs_gpu_has(&g, GS_M_TEMP_MARGIN) && g.v[GS_M_TEMP_MARGIN] == 12);
    clock_set(&f->clk, 20);
    sample_ok(f->b, 0, &g, 0);
    assert_true(gs_gpu_has(&g, GS_M_TEMP_MARGIN) && g.v[GS_M_TEMP_MARGIN] == -3);
    gs_backend_nvml.close(f->b);
    f->b = NULL;
    unlink(path);

    assert_int_equal(sim_open(&f->b, sim_lib(), "rtx4090-idle-desktop.json", "30", &e), GS_OK);
    sample_ok(f->b, 0, &g, 0);
    assert_int_equal(g.st[GS_M_TEMP_MARGIN], GS_ST_NA);
    gs_backend_nvml.close(f->b);
    f->b = NULL;

    for (size_t i = 0; i < sizeof absent_rc / sizeof absent_rc[0]; i++) {
        snprintf(extra, sizeof extra,
                 "\"metrics\": {\"temp_margin_c\": 9}, "
                 "\"errors\": {\"nvmlDeviceGetMarginTemperature\": \"%s\"}",
                 absent_rc[i]);
        inline_scenario(path, sizeof path, extra);
        assert_int_equal(sim_open(&f->b, sim_lib(), path, "10", &e), GS_OK);
        sample_ok(f->b, 0, &g, 0);
        assert_int_equal(g.st[GS_M_TEMP_MARGIN], GS_ST_NA);
        assert_true(gs_gpu_has(&g, GS_M_TEMP_GPU));
        gs_backend_nvml.close(f->b);
        f->b = NULL;
        unlink(path);
    }
}

static void minimal_library(void **state)
{
    const char *lib = getenv("GPUSCOPE_SIM_MINIMAL_LIB");
    struct fx *f = *state;
    struct gs_system sys;
    struct gs_gpu g, gf;
    struct gs_err e;

    NEED_SIM();
    if (!lib || !*lib)
        skip();
    /* the same scenario through the f->b library, for comparison */
    assert_int_equal(sim_open(&f->b, sim_lib(), "h100x8-training.json", "100", &e), GS_OK);
    sample_ok(f->b, 0, &gf, 0);
    gs_backend_nvml.close(f->b);
    f->b = NULL;

    assert_int_equal(sim_open(&f->b, lib, "h100x8-training.json", "100", &e), GS_OK);
    assert_int_equal(gs_backend_nvml.count(f->b), 8);
    memset(&sys, 0, sizeof sys);
    gs_backend_nvml.system(f->b, &sys);
    assert_int_equal(sys.driver_st, GS_ST_OK);
    assert_int_equal(sys.nvml_st, GS_ST_NA);
    assert_int_equal(sys.cuda_st, GS_ST_NA);
    sample_ok(f->b, 0, &g, GS_WANT_ALL & ~GS_WANT_GPM_WAIT);
    assert_string_equal(g.text[GS_T_NAME], "NVIDIA H100 80GB HBM3");
    assert_string_equal(g.text[GS_T_UUID], gf.text[GS_T_UUID]);
    /* the legacy PCI symbol: the bus id is rebuilt from domain/bus/device */
    assert_string_equal(g.text[GS_T_PCI_BUS_ID], "00000000:18:00.0");
    /* v1 memory: used includes the reserved part, which is absent */
    assert_true(gs_gpu_has(&g, GS_M_MEM_USED));
    assert_int_equal(g.st[GS_M_MEM_RESERVED], GS_ST_NA);
    assert_close(g.v[GS_M_MEM_USED], gf.v[GS_M_MEM_USED] + gf.v[GS_M_MEM_RESERVED], MIB);
    assert_true(gs_gpu_has(&g, GS_M_TEMP_GPU));
    assert_true(gs_gpu_has(&g, GS_M_POWER_DRAW));
    assert_true(gs_gpu_has(&g, GS_M_UTIL_GPU));
    /* everything newer is absent, never 0 */
    assert_int_equal(g.tst[GS_T_SERIAL], GS_ST_NA);
    assert_int_equal(g.tst[GS_T_VBIOS], GS_ST_NA);
    assert_int_equal(g.st[GS_M_ARCH], GS_ST_NA);
    assert_int_equal(g.st[GS_M_FAN], GS_ST_NA);
    assert_int_equal(g.st[GS_M_CLOCK_SM], GS_ST_NA);
    assert_int_equal(g.st[GS_M_POWER_LIMIT], GS_ST_NA);
    assert_int_equal(g.st[GS_M_TEMP_MEM], GS_ST_NA);
    assert_int_equal(g.st[GS_M_THROTTLE_ACTIVE], GS_ST_NA);
    assert_int_equal(g.st[GS_M_ECC_CORR_VOL], GS_ST_NA);
    assert_int_equal(g.st[GS_M_GPM_SM_ACTIVE], GS_ST_NA);
    assert_int_equal(g.st[GS_M_XID_LAST], GS_ST_NA);
    assert_int_equal(g.st[GS_M_MIG_MODE], GS_ST_NA);
    /* the 16-byte process list: pids right, no MIG ids */
    assert_int_equal(gs_snapshot_new(&f->snap, 8, 1, NULL), GS_OK);
    for (unsigned i = 0; i < 8; i++)
        assert_int_equal(gs_backend_nvml.processes(f->b, i, f->snap, GS_WANT_ALL, &e), GS_OK);
    assert_int_equal(f->snap->n_procs, 8);
    for (unsigned i = 0; i < 8; i++) {
        assert_int_equal(f->snap->procs[i].pid, 48211 + i);
        assert_int_equal(f->snap->procs[i].gpu, i);
        assert_int_equal(f->snap->procs[i].gi_id, NVML_MIG_ID_NONE);
        assert_int_equal(f->snap->procs[i].mem_st, GS_ST_OK);
        assert_int_equal(f->snap->procs[i].util_st, GS_ST_NA);
    }
    gs_snapshot_free(f->snap);
    f->snap = NULL;
    gs_backend_nvml.close(f->b);
    f->b = NULL;
}

static void no_scenario_is_no_driver(void **state)
{
    struct fx *f = *state;
    struct gs_err e;

    NEED_SIM();
    assert_int_equal(sim_open(&f->b, sim_lib(), NULL, NULL, &e), GS_ENODRIVER);
    assert_null(f->b);
    assert_string_equal(e.msg, "nvml: nvmlInit_v2: Driver Not Loaded");
    assert_int_equal(gs_rc_exit_code(e.rc), 9);
}

static void lost_gpu_mid_run(void **state)
{
    struct fx *f = *state;
    struct gs_err e;
    char uuid2[GS_STR_LEN];

    NEED_SIM();
    clock_new(&f->clk, 10);
    assert_int_equal(sim_open(&f->b, sim_lib(), "gpu-lost.json", f->clk.env, &e), GS_OK);
    assert_int_equal(gs_backend_nvml.count(f->b), 4);
    assert_int_equal(gs_snapshot_new(&f->snap, 4, 4, NULL), GS_OK);
    for (unsigned i = 0; i < 4; i++) {
        sample_ok(f->b, i, &f->snap->gpus[i], GS_WANT_ALL & ~GS_WANT_GPM_WAIT);
        assert_int_equal(f->snap->gpus[i].lost, 0);
        assert_int_equal(gs_backend_nvml.processes(f->b, i, f->snap, GS_WANT_PROCS, &e), GS_OK);
    }
    assert_int_equal(f->snap->n_procs, 4);
    memcpy(uuid2, f->snap->gpus[2].text[GS_T_UUID], sizeof uuid2);

    clock_set(&f->clk, 35); /* GPU 2 fell off the bus at 30 s */
    gs_snapshot_clear(f->snap);
    for (unsigned i = 0; i < 4; i++) {
        struct gs_gpu *g = &f->snap->gpus[i];
        assert_int_equal(gs_backend_nvml.sample(f->b, i, g, GS_WANT_ALL & ~GS_WANT_GPM_WAIT, &e),
                         GS_OK);
        if (i == 2) {
            assert_int_equal(g->lost, 1);
            assert_int_equal(g->st[GS_M_MEM_USED], GS_ST_LOST);
            assert_int_equal(g->st[GS_M_UTIL_GPU], GS_ST_LOST);
            assert_int_equal(g->n_mig, 0);
            /* identity stays, so a front end can say which GPU is gone */
            assert_string_equal(g->text[GS_T_UUID], uuid2);
            assert_true(gs_gpu_has(g, GS_M_PCI_BUS));
            continue;
        }
        assert_int_equal(g->lost, 0);
        assert_true(gs_gpu_has(g, GS_M_UTIL_GPU));
        assert_true(gs_gpu_has(g, GS_M_MEM_USED));
        assert_int_equal(gs_backend_nvml.processes(f->b, i, f->snap, GS_WANT_PROCS, &e), GS_OK);
    }
    assert_int_equal(f->snap->n_procs, 3);
    for (unsigned i = 0; i < f->snap->n_procs; i++)
        assert_true(f->snap->procs[i].gpu != 2);
    gs_snapshot_free(f->snap);
    f->snap = NULL;
    gs_backend_nvml.close(f->b);
    f->b = NULL;
}

static void mig_devices(void **state)
{
    struct fx *f = *state;
    struct gs_gpu *g;
    struct gs_err e;

    NEED_SIM();
    assert_int_equal(sim_open(&f->b, sim_lib(), "h100-mig.json", "60", &e), GS_OK);
    assert_int_equal(gs_snapshot_new(&f->snap, 1, 1, NULL), GS_OK);
    g = &f->snap->gpus[0];
    sample_ok(f->b, 0, g, GS_WANT_MIG | GS_WANT_PROCS | GS_WANT_PROC_UTIL);
    assert_true(g->v[GS_M_MIG_MODE] == 1);
    assert_int_equal(g->st[GS_M_UTIL_GPU], GS_ST_NA); /* device utilization: not in MIG mode */
    assert_int_equal(g->n_mig, 4);
    assert_int_equal(g->mig[0].index, 0);
    assert_int_equal(g->mig[0].gi_id, 2);
    assert_int_equal(g->mig[0].ci_id, 0);
    assert_string_equal(g->mig[0].uuid, "MIG-4d1f7a2c-93b5-5e08-a6c1-0f82e7b3d954");
    assert_non_null(strstr(g->mig[0].name, "3g.40gb"));
    assert_int_equal(g->mig[0].mem_st, GS_ST_OK);
    assert_true(g->mig[0].mem_total_bytes == 40448ULL * 1048576);
    assert_true(g->mig[0].mem_used_bytes == 11091ULL * 1048576);
    assert_int_equal(g->mig[3].gi_id, 10);
    assert_non_null(strstr(g->mig[3].name, "1g.10gb"));
    /* the GPU instance's placement (a privileged caller, as the scenario's default) */
    assert_int_equal(g->mig[0].place_st, GS_ST_OK);
    assert_int_equal(g->mig[0].place_start, 4);
    assert_int_equal(g->mig[0].place_size, 4);
    assert_int_equal(g->mig[0].profile_id, 9);
    assert_int_equal(g->mig[3].place_start, 1);
    assert_int_equal(g->mig[3].place_size, 1);
    /* read once per MIG device: the second cycle answers from the cache, the same */
    sample_ok(f->b, 0, g, GS_WANT_MIG);
    assert_int_equal(g->mig[1].place_st, GS_ST_OK);
    assert_int_equal(g->mig[1].place_start, 2);
    assert_int_equal(g->mig[1].profile_id, 14);
    /* without GS_WANT_MIG no devices are listed */
    sample_ok(f->b, 0, g, 0);
    assert_int_equal(g->n_mig, 0);
    /* processes carry their instance ids */
    f->snap->n_procs = 0;
    assert_int_equal(gs_backend_nvml.processes(f->b, 0, f->snap, GS_WANT_PROCS, &e), GS_OK);
    assert_true(f->snap->n_procs >= 4);
    assert_int_equal(f->snap->procs[0].pid, 21180);
    assert_int_equal(f->snap->procs[0].gi_id, 2);
    assert_int_equal(f->snap->procs[0].ci_id, 0);
    assert_true(f->snap->procs[0].gpu_mem_bytes == 2296ULL * 1048576);
    gs_snapshot_free(f->snap);
    f->snap = NULL;
    gs_backend_nvml.close(f->b);
    f->b = NULL;
}

/* GPM per GPU instance (nvmlGpmMigSampleGet on the parent): absent on the first sample of a
 * pair, then each instance's own figures (the 3g.40gb's graphics activity is ~99 %, the
 * whole GPU's ~64 %). */
static void mig_gpm(void **state)
{
    struct fx *f = *state;
    struct gs_gpu *g;
    struct gs_err e;
    const unsigned want = GS_WANT_MIG | GS_WANT_GPM;

    NEED_SIM();
    assert_int_equal(sim_open(&f->b, sim_lib(), "h100-mig.json", "60", &e), GS_OK);
    assert_int_equal(gs_snapshot_new(&f->snap, 1, 1, NULL), GS_OK);
    g = &f->snap->gpus[0];
    sample_ok(f->b, 0, g, want);
    assert_int_equal(g->n_mig, 4);
    assert_int_equal(g->mig[0].gpm_st[GS_MIG_GPM_GR_ACTIVE], GS_ST_NA);
    usleep(120000);
    sample_ok(f->b, 0, g, want);
    assert_int_equal(g->mig[0].gpm_st[GS_MIG_GPM_GR_ACTIVE], GS_ST_OK);
    assert_true(g->mig[0].gpm[GS_MIG_GPM_GR_ACTIVE] > 0.96 &&
                g->mig[0].gpm[GS_MIG_GPM_GR_ACTIVE] <= 1.0);
    assert_true(g->mig[0].gpm[GS_MIG_GPM_SM_ACTIVE] > 0.9);
    assert_int_equal(g->mig[2].gpm_st[GS_MIG_GPM_TENSOR_ACTIVE], GS_ST_OK);
    assert_true(gs_gpu_has(g, GS_M_GPM_GR_ACTIVE));
    assert_true(g->v[GS_M_GPM_GR_ACTIVE] > 0.55 && g->v[GS_M_GPM_GR_ACTIVE] < 0.7);
    /* GPM without MIG asked: no instance figures */
    usleep(120000);
    sample_ok(f->b, 0, g, GS_WANT_GPM);
    assert_int_equal(g->n_mig, 0);
    gs_snapshot_free(f->snap);
    f->snap = NULL;
    gs_backend_nvml.close(f->b);
    f->b = NULL;
}

static void gpm_two_samples(void **state)
{
    struct fx *f = *state;
    struct gs_gpu g;
    struct gs_err e;

    NEED_SIM();
    assert_int_equal(sim_open(&f->b, sim_lib(), "h100x8-training.json", "100", &e), GS_OK);
    sample_ok(f->b, 0, &g, GS_WANT_GPM); /* the first sample of a pair: nothing yet */
    assert_int_equal(g.st[GS_M_GPM_SM_ACTIVE], GS_ST_NA);
    sample_ok(f->b, 0, &g, GS_WANT_GPM); /* < 100 ms later: still nothing */
    assert_int_equal(g.st[GS_M_GPM_SM_ACTIVE], GS_ST_NA);
    usleep(120000);
    sample_ok(f->b, 0, &g, GS_WANT_GPM);
    assert_true(gs_gpu_has(&g, GS_M_GPM_SM_ACTIVE));
    assert_true(gs_gpu_has(&g, GS_M_GPM_SM_OCCUPANCY));
    assert_true(gs_gpu_has(&g, GS_M_GPM_TENSOR_ACTIVE));
    assert_true(gs_gpu_has(&g, GS_M_GPM_DRAM_ACTIVE));
    assert_true(g.v[GS_M_GPM_SM_ACTIVE] > 0 && g.v[GS_M_GPM_SM_ACTIVE] <= 1);
    assert_true(g.v[GS_M_GPM_DRAM_ACTIVE] > 0 && g.v[GS_M_GPM_DRAM_ACTIVE] <= 1);
    /* without GS_WANT_GPM nothing is asked */
    sample_ok(f->b, 0, &g, 0);
    assert_int_equal(g.st[GS_M_GPM_SM_ACTIVE], GS_ST_NA);
    /* GS_WANT_GPM_WAIT gives metrics in one cycle on a GPU never sampled before */
    assert_int_equal(gs_backend_nvml.begin(f->b, GS_WANT_GPM | GS_WANT_GPM_WAIT, &e), GS_OK);
    sample_ok(f->b, 1, &g, GS_WANT_GPM | GS_WANT_GPM_WAIT);
    assert_true(gs_gpu_has(&g, GS_M_GPM_SM_ACTIVE));
    gs_backend_nvml.close(f->b);
    f->b = NULL;
}

static void throttle_reasons(void **state)
{
    struct fx *f = *state;
    struct gs_gpu g;
    struct gs_err e;

    NEED_SIM();
    clock_new(&f->clk, 10);
    assert_int_equal(sim_open(&f->b, sim_lib(), "thermal-powercap.json", f->clk.env, &e), GS_OK);
    sample_ok(f->b, 0, &g, 0);
    assert_true(g.v[GS_M_THROTTLE_ACTIVE] == 0);
    clock_set(&f->clk, 50);
    sample_ok(f->b, 0, &g, 0);
    assert_true(g.v[GS_M_THROTTLE_ACTIVE] == (double)GS_THR_SW_POWER_CAP);
    assert_true(g.v[GS_M_THROTTLE_NS_SW_POWER] > 0); /* seconds, from ns */
    assert_true(g.v[GS_M_THROTTLE_NS_SW_POWER] < 60);
    clock_set(&f->clk, 500);
    sample_ok(f->b, 0, &g, 0);
    assert_true(g.v[GS_M_THROTTLE_ACTIVE] == (double)(GS_THR_SW_POWER_CAP | GS_THR_SW_THERMAL |
                                                      GS_THR_HW_SLOWDOWN | GS_THR_HW_THERMAL));
    gs_backend_nvml.close(f->b);
    f->b = NULL;
}

/* Writes a copy of a bundled scenario with its "events" replaced by events_json. */
static void derived_scenario(char *out, size_t n, const char *base, const char *events_json)
{
    char path[1024];
    const char *tmp = getenv("TMPDIR");
    json_error_t je;
    json_t *root, *ev;
    int fd;

    scenario(path, sizeof path, base);
    root = json_load_file(path, 0, &je);
    assert_non_null(root);
    ev = json_loads(events_json, 0, &je);
    assert_non_null(ev);
    assert_int_equal(json_object_set_new(root, "events", ev), 0);
    snprintf(out, n, "%s/gs_scenario_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    fd = mkstemp(out);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(json_dump_file(root, out, 0), 0);
    json_decref(root);
}

static void xid_events(void **state)
{
    struct fx *f = *state;
    char path[1100];
    struct gs_gpu g;
    struct gs_err e;

    NEED_SIM();
    derived_scenario(path, sizeof path, "h100x8-training.json",
                     "[{\"at_s\": 20, \"type\": \"xid\", \"gpu\": 1, \"xid\": 63},"
                     " {\"at_s\": 22, \"type\": \"xid\", \"gpu\": 1, \"xid\": 94}]");
    clock_new(&f->clk, 10);
    assert_int_equal(sim_open(&f->b, sim_lib(), path, f->clk.env, &e), GS_OK);
    unlink(path);
    assert_int_equal(gs_backend_nvml.begin(f->b, GS_WANT_HEALTH, &e), GS_OK); /* registers */
    sample_ok(f->b, 1, &g, GS_WANT_HEALTH);
    assert_true(gs_gpu_has(&g, GS_M_XID_LAST));
    assert_true(g.v[GS_M_XID_LAST] == 0);
    clock_set(&f->clk, 25);
    /* without GS_WANT_HEALTH the events wait in the set */
    assert_int_equal(gs_backend_nvml.begin(f->b, 0, &e), GS_OK);
    sample_ok(f->b, 1, &g, 0);
    assert_int_equal(g.st[GS_M_XID_LAST], GS_ST_NA);
    assert_int_equal(gs_backend_nvml.begin(f->b, GS_WANT_HEALTH, &e), GS_OK);
    sample_ok(f->b, 1, &g, GS_WANT_HEALTH);
    assert_true(g.v[GS_M_XID_LAST] == 94); /* the last of the two */
    sample_ok(f->b, 0, &g, GS_WANT_HEALTH);
    assert_true(g.v[GS_M_XID_LAST] == 0); /* other GPUs untouched */
}

static void process_utilization_kept(void **state)
{
    struct fx *f = *state;
    struct gs_err e;

    NEED_SIM();
    /* a frozen clock: after the first answer the driver has no newer sample (NOT_FOUND), and
     * the last values are kept rather than reported as an error or as 0 */
    assert_int_equal(sim_open(&f->b, sim_lib(), "h100x8-training.json", "100", &e), GS_OK);
    assert_int_equal(gs_snapshot_new(&f->snap, 8, 1, NULL), GS_OK);
    for (int cycle = 0; cycle < 3; cycle++) {
        gs_snapshot_clear(f->snap);
        assert_int_equal(
            gs_backend_nvml.processes(f->b, 0, f->snap, GS_WANT_PROCS | GS_WANT_PROC_UTIL, &e),
            GS_OK);
        assert_int_equal(f->snap->n_procs, 1);
        assert_int_equal(f->snap->procs[0].util_st, GS_ST_OK);
        assert_true(f->snap->procs[0].sm_util > 0.5 && f->snap->procs[0].sm_util <= 1.0);
    }
    /* without GS_WANT_PROC_UTIL: absent */
    gs_snapshot_clear(f->snap);
    assert_int_equal(gs_backend_nvml.processes(f->b, 0, f->snap, GS_WANT_PROCS, &e), GS_OK);
    assert_int_equal(f->snap->procs[0].util_st, GS_ST_NA);
}

/* nvmlDeviceGetSamples through the backend: a 0.4 s square wave (25 % at 100, else 20) read
 * at 100 ms samples gives the known values; a second call returns only newer samples; a short
 * array continues where it stopped; no symbol, or "not supported", is GS_ENOTSUP. */
/* What only nvidia-smi -q shows is read with GS_WANT_DETAIL and never without it (the agent's
 * cycle does not set it); the recovery action, memory power, T.Limit thresholds and inactive
 * remapped rows come with the every-cycle field values. Values as the H100 capture shows. */
static void detail_readings(void **state)
{
    struct fx *f = *state;
    struct gs_gpu g;
    struct gs_err e;
    char path[1024];
    static const enum gs_metric detail[] = {
        GS_M_ADDRESSING_MODE, GS_M_VIRT_MODE,      GS_M_C2C_MODE,       GS_M_EGM,
        GS_M_SRAM_PARITY_VOL, GS_M_SRAM_THRESHOLD, GS_M_REMAP_HIST_MAX, GS_M_FABRIC_STATE};

    NEED_SIM();
    capture_scenario(path, sizeof path, "h100-idle");
    assert_int_equal(sim_open(&f->b, sim_lib(), path, "100", &e), GS_OK);
    sample_ok(f->b, 0, &g, GS_WANT_ALL & ~(GS_WANT_DETAIL | GS_WANT_GPM_WAIT));
    for (size_t i = 0; i < sizeof detail / sizeof detail[0]; i++)
        assert_int_equal(g.st[detail[i]], GS_ST_NA);
    assert_int_equal(g.tst[GS_T_FABRIC_CLUSTER], GS_ST_NA);
    assert_true(gs_gpu_has(&g, GS_M_RECOVERY_ACTION) && g.v[GS_M_RECOVERY_ACTION] == 0);
    assert_true(gs_gpu_has(&g, GS_M_TLIMIT_SHUTDOWN) && g.v[GS_M_TLIMIT_SHUTDOWN] == -8);
    assert_true(gs_gpu_has(&g, GS_M_TLIMIT_SLOWDOWN) && g.v[GS_M_TLIMIT_SLOWDOWN] == -2);
    assert_int_equal(g.st[GS_M_POWER_MEMORY_AVERAGE], GS_ST_NA); /* the base scenario has none */
    assert_int_equal(g.st[GS_M_POWER_MEMORY_INSTANT], GS_ST_NA);

    sample_ok(f->b, 0, &g, GS_WANT_DETAIL);
    assert_true(gs_gpu_has(&g, GS_M_ADDRESSING_MODE) && g.v[GS_M_ADDRESSING_MODE] == 0);
    assert_true(gs_gpu_has(&g, GS_M_VIRT_MODE) && g.v[GS_M_VIRT_MODE] == 1);
    assert_int_equal(g.st[GS_M_HOST_VGPU_MODE], GS_ST_NA);
    assert_true(gs_gpu_has(&g, GS_M_C2C_MODE) && g.v[GS_M_C2C_MODE] == 0);
    assert_true(gs_gpu_has(&g, GS_M_EGM) && g.v[GS_M_EGM] == 0);
    assert_true(gs_gpu_has(&g, GS_M_SRAM_PARITY_VOL) && g.v[GS_M_SRAM_PARITY_VOL] == 0);
    assert_true(gs_gpu_has(&g, GS_M_SRAM_OTHER));
    assert_true(gs_gpu_has(&g, GS_M_SRAM_THRESHOLD) && g.v[GS_M_SRAM_THRESHOLD] == 0);
    assert_true(gs_gpu_has(&g, GS_M_REMAP_HIST_MAX) && g.v[GS_M_REMAP_HIST_MAX] == 2560);
    assert_true(gs_gpu_has(&g, GS_M_REMAP_HIST_NONE) && g.v[GS_M_REMAP_HIST_NONE] == 0);
    assert_true(gs_gpu_has(&g, GS_M_FABRIC_STATE) && g.v[GS_M_FABRIC_STATE] == 3);
    assert_true(gs_gpu_has(&g, GS_M_FABRIC_STATUS) && g.v[GS_M_FABRIC_STATUS] == 0);
    assert_true(gs_gpu_has(&g, GS_M_FABRIC_CLIQUE) && g.v[GS_M_FABRIC_CLIQUE] == 0);
    assert_int_equal(g.tst[GS_T_FABRIC_CLUSTER], GS_ST_OK);
    assert_string_equal(g.text[GS_T_FABRIC_CLUSTER], "00000000-0000-0000-0000-000000000000");
    gs_backend_nvml.close(f->b);
    f->b = NULL;

    /* a PCIe board: fabric state "not supported" reads as absent, as nvidia-smi prints N/A */
    capture_scenario(path, sizeof path, "l40s-idle");
    assert_int_equal(sim_open(&f->b, sim_lib(), path, "1000", &e), GS_OK);
    sample_ok(f->b, 0, &g, GS_WANT_DETAIL);
    assert_int_equal(g.st[GS_M_FABRIC_STATE], GS_ST_NA);
    assert_int_equal(g.tst[GS_T_FABRIC_CLUSTER], GS_ST_NA);
    assert_int_equal(g.st[GS_M_C2C_MODE], GS_ST_NA);
    assert_true(gs_gpu_has(&g, GS_M_ADDRESSING_MODE) && g.v[GS_M_ADDRESSING_MODE] == 1);
    assert_true(gs_gpu_has(&g, GS_M_REMAP_CORR_INACTIVE) && g.v[GS_M_REMAP_CORR_INACTIVE] == 0);
    gs_backend_nvml.close(f->b);
    f->b = NULL;
}

/* The H100 capture's scenario with keys of `gpu_json` set on its GPU, in a temporary file. */
static void capture_with(char *out, size_t n, const char *name, const char *gpu_json)
{
    char path[1024];
    const char *tmp = getenv("TMPDIR");
    json_error_t je;
    json_t *root, *over;
    int fd;

    capture_scenario(path, sizeof path, name);
    root = json_load_file(path, 0, &je);
    assert_non_null(root);
    over = json_loads(gpu_json, 0, &je);
    assert_non_null(over);
    assert_int_equal(json_object_update(json_array_get(json_object_get(root, "gpus"), 0), over), 0);
    json_decref(over);
    snprintf(out, n, "%s/gs_scenario_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    fd = mkstemp(out);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(json_dump_file(root, out, 0), 0);
    json_decref(root);
}

/* The fabric health of the same GetGpuFabricInfoV (v3) answer: the summary and each condition
 * of the mask (nvml.h's shifts: bandwidth 0, route recovery 2, route unhealthy 4, access
 * timeout 6, configuration 8 (4 bits), partition 12); a condition the mask reports as not
 * supported stays absent, and so does all of it while the summary is not supported. */
static void fabric_health_readings(void **state)
{
    struct fx *f = *state;
    struct gs_gpu g;
    struct gs_err e;
    char path[1100];
    static const enum gs_metric ms[] = {
        GS_M_FABRIC_HEALTH_SUMMARY,        GS_M_FABRIC_HEALTH_BW_DEGRADED,
        GS_M_FABRIC_HEALTH_ROUTE_RECOVERY, GS_M_FABRIC_HEALTH_ROUTE_UNHEALTHY,
        GS_M_FABRIC_HEALTH_ACCESS_TIMEOUT, GS_M_FABRIC_HEALTH_CONFIG,
        GS_M_FABRIC_HEALTH_PARTITION};
    /* bandwidth degraded (1), route recovery not supported (0), route unhealthy (1), access
     * timeout false (2), configuration "insufficient NVLinks" (5), partition assigned (1) */
    char json[256];

    NEED_SIM();
    snprintf(json, sizeof json,
             "{\"fabric\": {\"health_summary\": \"limited-capacity\", \"health_mask\": %u}}",
             1u | 0u << 2 | 1u << 4 | 2u << 6 | 5u << 8 | 1u << 12);
    capture_with(path, sizeof path, "h100-idle", json);
    assert_int_equal(sim_open(&f->b, sim_lib(), path, "100", &e), GS_OK);
    unlink(path);
    sample_ok(f->b, 0, &g, GS_WANT_ALL & ~(GS_WANT_DETAIL | GS_WANT_GPM_WAIT));
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
        assert_int_equal(g.st[ms[i]], GS_ST_NA);
    sample_ok(f->b, 0, &g, GS_WANT_DETAIL);
    assert_true(gs_gpu_has(&g, GS_M_FABRIC_STATE) && g.v[GS_M_FABRIC_STATE] == 3);
    assert_true(gs_gpu_has(&g, GS_M_FABRIC_HEALTH_SUMMARY) && g.v[GS_M_FABRIC_HEALTH_SUMMARY] == 3);
    assert_true(gs_gpu_has(&g, GS_M_FABRIC_HEALTH_BW_DEGRADED) &&
                g.v[GS_M_FABRIC_HEALTH_BW_DEGRADED] == 1);
    assert_int_equal(g.st[GS_M_FABRIC_HEALTH_ROUTE_RECOVERY], GS_ST_NA);
    assert_true(gs_gpu_has(&g, GS_M_FABRIC_HEALTH_ROUTE_UNHEALTHY) &&
                g.v[GS_M_FABRIC_HEALTH_ROUTE_UNHEALTHY] == 1);
    assert_true(gs_gpu_has(&g, GS_M_FABRIC_HEALTH_ACCESS_TIMEOUT) &&
                g.v[GS_M_FABRIC_HEALTH_ACCESS_TIMEOUT] == 0);
    assert_true(gs_gpu_has(&g, GS_M_FABRIC_HEALTH_CONFIG) && g.v[GS_M_FABRIC_HEALTH_CONFIG] == 5);
    assert_true(gs_gpu_has(&g, GS_M_FABRIC_HEALTH_PARTITION) &&
                g.v[GS_M_FABRIC_HEALTH_PARTITION] == 1);
    gs_backend_nvml.close(f->b);
    f->b = NULL;

    /* a healthy GB300 as its -q -x shows it (0x1aa: every condition false, configuration none,
     * partition not supported) */
    capture_with(path, sizeof path, "h100-idle",
                 "{\"fabric\": {\"health_summary\": \"healthy\", \"health_mask\": 426}}");
    assert_int_equal(sim_open(&f->b, sim_lib(), path, "100", &e), GS_OK);
    unlink(path);
    sample_ok(f->b, 0, &g, GS_WANT_DETAIL);
    assert_true(g.v[GS_M_FABRIC_HEALTH_SUMMARY] == 1 && g.v[GS_M_FABRIC_HEALTH_BW_DEGRADED] == 0 &&
                g.v[GS_M_FABRIC_HEALTH_ROUTE_RECOVERY] == 0 &&
                g.v[GS_M_FABRIC_HEALTH_ROUTE_UNHEALTHY] == 0 &&
                g.v[GS_M_FABRIC_HEALTH_ACCESS_TIMEOUT] == 0 && g.v[GS_M_FABRIC_HEALTH_CONFIG] == 1);
    for (size_t i = 0; i + 1 < sizeof ms / sizeof ms[0]; i++)
        assert_int_equal(g.st[ms[i]], GS_ST_OK);
    assert_int_equal(g.st[GS_M_FABRIC_HEALTH_PARTITION], GS_ST_NA);
    gs_backend_nvml.close(f->b);
    f->b = NULL;

    /* a mask with no summary (the H100 capture's driver): nothing of it is read */
    capture_with(path, sizeof path, "h100-idle", "{\"fabric\": {\"health_mask\": 426}}");
    assert_int_equal(sim_open(&f->b, sim_lib(), path, "100", &e), GS_OK);
    unlink(path);
    sample_ok(f->b, 0, &g, GS_WANT_DETAIL);
    assert_true(gs_gpu_has(&g, GS_M_FABRIC_STATE));
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
        assert_int_equal(g.st[ms[i]], GS_ST_NA);
    gs_backend_nvml.close(f->b);
    f->b = NULL;
}

/* The whole GPU's other -q rows (PDI, module id, GPU operation mode, vGPU heterogeneous mode,
 * PCIe atomics, protected memory, unrepairable memory): read with GS_WANT_DETAIL only, values as
 * the scenario gives them, absent (N/A) where the driver answers NOT_SUPPORTED. */
static void detail_gpu_readings(void **state)
{
    struct fx *f = *state;
    struct gs_gpu g;
    struct gs_err e;
    char path[1100];
    static const enum gs_metric ms[] = {
        GS_M_MODULE_ID,        GS_M_GOM_CURRENT,     GS_M_GOM_PENDING,   GS_M_VGPU_HETERO,
        GS_M_PCIE_ATOMICS_OUT, GS_M_PCIE_ATOMICS_IN, GS_M_CC_PROT_TOTAL, GS_M_CC_PROT_USED,
        GS_M_CC_PROT_FREE,     GS_M_UNREPAIRABLE_MEM};

    NEED_SIM();
    capture_with(path, sizeof path, "h100-idle",
                 "{\"gpu_operation_mode\": {\"current\": \"compute\", \"pending\": \"low_dp\"},"
                 " \"vgpu_heterogeneous_mode\": true,"
                 " \"pcie_atomics\": {\"outbound\": 63, \"inbound\": 127},"
                 " \"protected_memory\": {\"total_mib\": 1024, \"used_mib\": 256},"
                 " \"unrepairable_memory\": true}");
    assert_int_equal(sim_open(&f->b, sim_lib(), path, "100", &e), GS_OK);
    unlink(path);
    sample_ok(f->b, 0, &g, GS_WANT_ALL & ~(GS_WANT_DETAIL | GS_WANT_GPM_WAIT));
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
        assert_int_equal(g.st[ms[i]], GS_ST_NA);
    assert_int_equal(g.tst[GS_T_PDI], GS_ST_NA);

    sample_ok(f->b, 0, &g, GS_WANT_DETAIL);
    assert_int_equal(g.tst[GS_T_PDI], GS_ST_OK);
    assert_string_equal(g.text[GS_T_PDI], "0xd52bae2e458244e2");
    assert_true(gs_gpu_has(&g, GS_M_MODULE_ID) && g.v[GS_M_MODULE_ID] == 7);
    assert_true(gs_gpu_has(&g, GS_M_GOM_CURRENT) && g.v[GS_M_GOM_CURRENT] == 1);
    assert_true(gs_gpu_has(&g, GS_M_GOM_PENDING) && g.v[GS_M_GOM_PENDING] == 2);
    assert_true(gs_gpu_has(&g, GS_M_VGPU_HETERO) && g.v[GS_M_VGPU_HETERO] == 1);
    assert_true(gs_gpu_has(&g, GS_M_PCIE_ATOMICS_OUT) && g.v[GS_M_PCIE_ATOMICS_OUT] == 63);
    assert_true(gs_gpu_has(&g, GS_M_PCIE_ATOMICS_IN) && g.v[GS_M_PCIE_ATOMICS_IN] == 127);
    assert_true(gs_gpu_has(&g, GS_M_CC_PROT_TOTAL) && g.v[GS_M_CC_PROT_TOTAL] == 1024.0 * 1048576);
    assert_true(gs_gpu_has(&g, GS_M_CC_PROT_USED) && g.v[GS_M_CC_PROT_USED] == 256.0 * 1048576);
    assert_true(gs_gpu_has(&g, GS_M_CC_PROT_FREE) && g.v[GS_M_CC_PROT_FREE] == 768.0 * 1048576);
    assert_true(gs_gpu_has(&g, GS_M_UNREPAIRABLE_MEM) && g.v[GS_M_UNREPAIRABLE_MEM] == 1);
    gs_backend_nvml.close(f->b);
    f->b = NULL;

    /* the L40S capture: no GOM, heterogeneous mode, atomics or unrepairable flag (N/A there) */
    capture_scenario(path, sizeof path, "l40s-idle");
    assert_int_equal(sim_open(&f->b, sim_lib(), path, "1000", &e), GS_OK);
    sample_ok(f->b, 0, &g, GS_WANT_DETAIL);
    assert_string_equal(g.text[GS_T_PDI], "0x4cc17b2978ffca4d");
    assert_true(gs_gpu_has(&g, GS_M_MODULE_ID) && g.v[GS_M_MODULE_ID] == 1);
    assert_true(gs_gpu_has(&g, GS_M_CC_PROT_TOTAL) && g.v[GS_M_CC_PROT_TOTAL] == 0);
    assert_int_equal(g.st[GS_M_GOM_CURRENT], GS_ST_NA);
    assert_int_equal(g.st[GS_M_GOM_PENDING], GS_ST_NA);
    assert_int_equal(g.st[GS_M_VGPU_HETERO], GS_ST_NA);
    assert_int_equal(g.st[GS_M_PCIE_ATOMICS_OUT], GS_ST_NA);
    assert_int_equal(g.st[GS_M_PCIE_ATOMICS_IN], GS_ST_NA);
    assert_int_equal(g.st[GS_M_UNREPAIRABLE_MEM], GS_ST_NA);
    gs_backend_nvml.close(f->b);
    f->b = NULL;
}

/* The links' states on their own cadence (GS_WANT_NVLINK_STATE): read at the first cycle,
 * held without the bit (nvlink_state_t unchanged), read again with it, when a link that went
 * down in between shows; then held at the new value. */
static void nvlink_state_cadence(void **state)
{
    struct fx *f = *state;
    char path[1100];
    struct gs_gpu g;
    struct gs_err e;
    double t1;

    NEED_SIM();
    derived_scenario(path, sizeof path, "h100x8-training.json",
                     "[{\"at_s\": 20, \"type\": \"nvlink_down\", \"gpu\": 2, \"link\": 9}]");
    clock_new(&f->clk, 10);
    assert_int_equal(sim_open(&f->b, sim_lib(), path, f->clk.env, &e), GS_OK);
    unlink(path);
    sample_ok(f->b, 2, &g, 0); /* the first cycle reads them, bit or not */
    assert_true(g.v[GS_M_NVLINK_LINKS_ACTIVE] == 18 && g.nvlink[9].active);
    t1 = g.nvlink_state_t;
    assert_true(t1 > 0);
    clock_set(&f->clk, 30); /* link 9 is down now */
    nanosleep(&(struct timespec){0, 2000000}, NULL);
    sample_ok(f->b, 2, &g, 0); /* held: as read at the first cycle, and said so */
    assert_true(gs_gpu_has(&g, GS_M_NVLINK_LINKS_ACTIVE));
    assert_true(g.v[GS_M_NVLINK_LINKS_ACTIVE] == 18 && g.nvlink[9].active);
    assert_true(g.nvlink_state_t == t1);
    assert_true(gs_gpu_has(&g, GS_M_NVLINK_TX_BYTES)); /* the counters are read every cycle */
    sample_ok(f->b, 2, &g, GS_WANT_NVLINK_STATE);
    assert_true(g.v[GS_M_NVLINK_LINKS_ACTIVE] == 17);
    assert_true(!g.nvlink[9].active && g.nvlink[8].active && g.nvlink[10].active);
    assert_true(g.nvlink_state_t > t1);
    t1 = g.nvlink_state_t;
    sample_ok(f->b, 2, &g, 0);
    assert_true(g.v[GS_M_NVLINK_LINKS_ACTIVE] == 17 && !g.nvlink[9].active);
    assert_true(g.nvlink_state_t == t1);
    gs_backend_nvml.close(f->b);
    f->b = NULL;
}

/* NVLink on the HGX scenario (18 links per GPU to NVSwitches): links, speed, far ends, the
 * data counters and the rate between two readings a virtual second apart, the error counters
 * at health cadence; a PCIe card has no links at all. */
static void nvlink_links(void **state)
{
    struct fx *f = *state;
    struct gs_gpu g, g2;
    struct gs_err e;
    /* the square step of h100x8-training: 610000 KiB/s per link for 1.32 s, 9100000 for 0.18 s;
     * [10, 11] holds 0.82 s of the first and 0.18 s of the second */
    const double want_tx = 18 * (610000 * 0.82 + 9100000 * 0.18) * 1024;

    (void)state;
    assert_int_equal(gs_nvml_nvlink_speed_field(0), NVML_FI_DEV_NVLINK_SPEED_MBPS_L0);
    assert_int_equal(gs_nvml_nvlink_speed_field(5), 89);
    assert_int_equal(gs_nvml_nvlink_speed_field(6), 132);
    assert_int_equal(gs_nvml_nvlink_speed_field(11), 137);
    assert_int_equal(gs_nvml_nvlink_speed_field(12), 0);
    NEED_SIM();
    clock_new(&f->clk, 10);
    assert_int_equal(sim_open(&f->b, sim_lib(), "h100x8-training.json", f->clk.env, &e), GS_OK);
    sample_ok(f->b, 0, &g, 0);
    assert_int_equal(g.n_nvlink, 18);
    assert_true(g.v[GS_M_NVLINK_LINKS] == 18 && g.v[GS_M_NVLINK_LINKS_ACTIVE] == 18);
    assert_true(g.v[GS_M_NVLINK_SPEED] == 26562e6);
    assert_true(g.nvlink[17].speed_st == GS_ST_OK && g.nvlink[17].speed_bps == 26562e6);
    assert_true(g.nvlink[0].active && g.nvlink[0].remote_st == GS_ST_OK);
    assert_string_equal(g.nvlink[0].remote_bus_id, "00000000:05:00.0");
    assert_string_equal(g.nvlink[5].remote_bus_id, "00000000:06:00.0");
    assert_true(gs_gpu_has(&g, GS_M_NVLINK_TX_BYTES) && g.v[GS_M_NVLINK_TX_BYTES] > 0);
    assert_int_equal(g.st[GS_M_NVLINK_TX], GS_ST_NA);     /* one reading: no rate yet */
    assert_int_equal(g.st[GS_M_NVLINK_REPLAY], GS_ST_NA); /* errors: health cadence */
    sample_ok(f->b, 0, &g2, 0); /* no virtual time passed: still no rate */
    assert_int_equal(g2.st[GS_M_NVLINK_TX], GS_ST_NA);
    clock_set(&f->clk, 11);
    sample_ok(f->b, 0, &g2, GS_WANT_HEALTH);
    assert_true(gs_gpu_has(&g2, GS_M_NVLINK_TX) && gs_gpu_has(&g2, GS_M_NVLINK_RX));
    assert_close(g2.v[GS_M_NVLINK_TX], g2.v[GS_M_NVLINK_TX_BYTES] - g.v[GS_M_NVLINK_TX_BYTES], 1);
    assert_close(g2.v[GS_M_NVLINK_TX], want_tx, want_tx * 1e-4);
    assert_true(g2.v[GS_M_NVLINK_RX] > 0 && g2.v[GS_M_NVLINK_RX] < g2.v[GS_M_NVLINK_TX]);
    {
        uint64_t sum = 0;
        for (unsigned l = 0; l < g2.n_nvlink; l++)
            sum += g2.nvlink[l].tx_bytes;
        assert_true((double)sum == g2.v[GS_M_NVLINK_TX_BYTES]);
    }
    assert_true(gs_gpu_has(&g2, GS_M_NVLINK_REPLAY) && g2.v[GS_M_NVLINK_REPLAY] == 0);
    /* GPU 5: link 7 has replays and CRC errors */
    sample_ok(f->b, 5, &g, GS_WANT_HEALTH);
    assert_true(g.nvlink[7].err_st[GS_NVL_ERR_REPLAY] == GS_ST_OK);
    assert_true(g.nvlink[7].err[GS_NVL_ERR_REPLAY] == 41 &&
                g.nvlink[7].err[GS_NVL_ERR_CRC_FLIT] == 118);
    assert_true(g.v[GS_M_NVLINK_REPLAY] == 41 && g.v[GS_M_NVLINK_RECOVERY] == 1);
    assert_true(g.v[GS_M_NVLINK_CRC_FLIT] == 118 && g.v[GS_M_NVLINK_CRC_DATA] == 3);
    gs_backend_nvml.close(f->b);
    f->b = NULL;
    /* a PCIe card: nvmlDeviceGetNvLinkState says NOT_SUPPORTED, nothing NVLink is present */
    assert_int_equal(sim_open(&f->b, sim_lib(), "rtx4090-idle-desktop.json", "30", &e), GS_OK);
    assert_int_equal(gs_backend_nvml.begin(f->b, GS_WANT_ALL, &e), GS_OK);
    sample_ok(f->b, 0, &g, GS_WANT_ALL);
    assert_int_equal(g.n_nvlink, 0);
    for (int m = GS_M_NVLINK_LINKS; m <= GS_M_NVLINK_CRC_DATA; m++)
        assert_int_equal(g.st[m], GS_ST_NA);
    gs_backend_nvml.close(f->b);
    f->b = NULL;
}

/* GS_WANT_PCIE_TPUT on a first cycle: begin takes one counter reading, so the cycle has a rate. */
static void nvlink_first_cycle_rate(void **state)
{
    struct fx *f = *state;
    struct gs_gpu g;
    struct gs_err e;

    NEED_SIM();
    assert_int_equal(sim_open(&f->b, sim_lib(), "h100x8-training.json", NULL, &e), GS_OK);
    assert_int_equal(gs_backend_nvml.begin(f->b, GS_WANT_PCIE_TPUT, &e), GS_OK);
    sample_ok(f->b, 3, &g, GS_WANT_PCIE_TPUT);
    assert_true(gs_gpu_has(&g, GS_M_NVLINK_TX) && g.v[GS_M_NVLINK_TX] > 0);
    assert_true(g.v[GS_M_NVLINK_TX] < 18 * 26562e6); /* below the links' capacity */
    gs_backend_nvml.close(f->b);
    f->b = NULL;
}

/* The calls nvml-sim counted so far (NVML_SIM_PROFILE), through its own extension symbol. */
static unsigned long long pcie_sim_calls(void)
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

/* NVML calls one sample of GPU 0 at virtual time t makes, and the sample. */
static unsigned long long pcie_sample_at(struct fx *f, double t, struct gs_gpu *g, unsigned want)
{
    unsigned long long n0;

    clock_set(&f->clk, t);
    n0 = pcie_sim_calls();
    sample_ok(f->b, 0, g, want);
    return pcie_sim_calls() - n0;
}

static void pcie_open(struct fx *f, const char *path)
{
    struct gs_err e;

    setenv("NVML_SIM_PROFILE", "1", 1);
    setenv("NVML_SIM_SCENARIO", path, 1);
    setenv("NVML_SIM_TIME", f->clk.env, 1);
    gs_err_clear(&e);
    assert_int_equal(
        gs_backend_nvml.open(&f->b, &(struct gs_backend_opts){.library = sim_lib()}, &e), GS_OK);
}

/* PCIe throughput from the byte counters (fields 197/198, read in the field-values batch): the
 * scenario's exact rate from the second reading on, with no nvmlDeviceGetPcieThroughput call
 * and so no 20 ms wait; a first reading (a one-shot command) asks the throughput call. */
static void pcie_counter_rate(void **state)
{
    struct fx *f = *state;
    struct gs_gpu g;
    char path[1024];
    unsigned long long n_want, n_plain;

    NEED_SIM();
    clock_new(&f->clk, 10);
    inline_scenario(path, sizeof path,
                    "\"pcie_throughput_delay_ms\": 0, "
                    "\"metrics\": {\"pcie_tx_kb_s\": 1000, \"pcie_rx_kb_s\": 2500}");
    pcie_open(f, path);
    n_want = pcie_sample_at(f, 10, &g, GS_WANT_PCIE_TPUT); /* first: the throughput call */
    assert_true(gs_gpu_has(&g, GS_M_PCIE_TX) && gs_gpu_has(&g, GS_M_PCIE_RX));
    assert_close(g.v[GS_M_PCIE_TX], 1000 * 1024.0, 1024);
    n_want = pcie_sample_at(f, 12, &g, GS_WANT_PCIE_TPUT);
    assert_close(g.v[GS_M_PCIE_TX], 1000 * 1024.0, 1e-6);
    assert_close(g.v[GS_M_PCIE_RX], 2500 * 1024.0, 1e-6);
    n_plain = pcie_sample_at(f, 14, &g, 0); /* the counters answer without the want bit too */
    assert_close(g.v[GS_M_PCIE_TX], 1000 * 1024.0, 1e-6);
    assert_int_equal(n_want, n_plain); /* no throughput call on top of the batch */
    gs_backend_nvml.close(f->b);
    f->b = NULL;
    unlink(path);

    /* the counters near 2^64: the interval over the wrap still reads the exact rate */
    inline_scenario(path, sizeof path,
                    "\"pcie_throughput_delay_ms\": 0, \"pcie\": {\"count_base_bytes\": "
                    "1.8446744073709e19}, "
                    "\"metrics\": {\"pcie_tx_kb_s\": 1000, \"pcie_rx_kb_s\": 1000}");
    pcie_open(f, path);
    pcie_sample_at(f, 0.2, &g, 0); /* ~551 KB below 2^64 at t = 0: not wrapped yet */
    assert_int_equal(g.st[GS_M_PCIE_TX], GS_ST_NA); /* a first reading gives no rate */
    pcie_sample_at(f, 1.2, &g, 0);                  /* wrapped */
    assert_true(gs_gpu_has(&g, GS_M_PCIE_TX));
    assert_close(g.v[GS_M_PCIE_TX], 1000 * 1024.0, 1e-6);
    assert_close(g.v[GS_M_PCIE_RX], 1000 * 1024.0, 1e-6);
    gs_backend_nvml.close(f->b);
    f->b = NULL;
    unlink(path);

    /* a reset (the counters restart from 0 at t = 20): no rate that cycle, never a spike; the
     * next interval reads right again */
    inline_scenario(path, sizeof path,
                    "\"pcie_throughput_delay_ms\": 0, \"pcie\": {\"count_reset_s\": 20}, "
                    "\"metrics\": {\"pcie_tx_kb_s\": 1000, \"pcie_rx_kb_s\": 1000}");
    pcie_open(f, path);
    pcie_sample_at(f, 10, &g, 0);
    pcie_sample_at(f, 19, &g, 0);
    assert_close(g.v[GS_M_PCIE_TX], 1000 * 1024.0, 1e-6);
    pcie_sample_at(f, 21, &g, 0);
    assert_int_equal(g.st[GS_M_PCIE_TX], GS_ST_NA);
    assert_int_equal(g.st[GS_M_PCIE_RX], GS_ST_NA);
    pcie_sample_at(f, 22, &g, 0);
    assert_close(g.v[GS_M_PCIE_TX], 1000 * 1024.0, 1e-6);
    gs_backend_nvml.close(f->b);
    f->b = NULL;
    unlink(path);
    unsetenv("NVML_SIM_PROFILE");
}

/* A driver without the counters (NOT_SUPPORTED for 197/198): decided once, then every cycle that
 * asks for PCIe calls nvmlDeviceGetPcieThroughput as before (2 calls, TX and RX), and 197/198
 * are not asked again. */
static void pcie_counter_fallback(void **state)
{
    struct fx *f = *state;
    struct gs_gpu g;
    char path[1024];
    unsigned long long n_want, n_plain;

    NEED_SIM();
    clock_new(&f->clk, 10);
    inline_scenario(path, sizeof path,
                    "\"pcie_throughput_delay_ms\": 0, \"not_supported\": [\"field:197\", "
                    "\"field:198\"], "
                    "\"metrics\": {\"pcie_tx_kb_s\": 1000, \"pcie_rx_kb_s\": 2500}");
    pcie_open(f, path);
    pcie_sample_at(f, 10, &g, GS_WANT_PCIE_TPUT);
    n_want = pcie_sample_at(f, 12, &g, GS_WANT_PCIE_TPUT);
    assert_true(gs_gpu_has(&g, GS_M_PCIE_TX));
    assert_close(g.v[GS_M_PCIE_RX], 2500 * 1024.0, 1024); /* the 20 ms window's mean, in KB/s */
    n_plain = pcie_sample_at(f, 14, &g, 0);
    assert_int_equal(g.st[GS_M_PCIE_TX], GS_ST_NA); /* not asked: no reading */
    assert_int_equal(n_want, n_plain + 2);
    gs_backend_nvml.close(f->b);
    f->b = NULL;
    unlink(path);
    unsetenv("NVML_SIM_PROFILE");
}

static void utilization_samples(void **state)
{
    struct fx *f = *state;
    const char *minimal = getenv("GPUSCOPE_SIM_MINIMAL_LIB");
    struct gs_util_sample u[32];
    uint64_t last = 0, t1;
    unsigned n = 99;
    char path[1024];
    struct gs_err e;

    NEED_SIM();
    inline_scenario(path, sizeof path,
                    "\"sample_interval_ms\": 100, \"metrics\": {\"util_gpu_pct\": {\"square\": "
                    "{\"period_s\": 0.4, \"duty\": 0.25, \"high\": 100, \"low\": 20}}}");
    clock_new(&f->clk, 1.05);
    assert_int_equal(sim_open(&f->b, sim_lib(), path, f->clk.env, &e), GS_OK);
    assert_int_equal(gs_backend_nvml.util_samples(f->b, 0, &last, u, 32, &n, &e), GS_OK);
    assert_int_equal(n, 11); /* t = 0, 0.1, ... 1.0 */
    for (unsigned k = 1; k < n; k++) {
        double gap = (double)(u[k].t_us - u[k - 1].t_us);
        assert_close(gap, 100000, 1);
        assert_close(u[k].util_ratio, k % 4 == 1 ? 1.0 : 0.2, 1e-9);
    }
    assert_true(last == u[10].t_us);
    t1 = u[1].t_us;
    /* the clock stands still: nothing newer, which is not an error */
    assert_int_equal(gs_backend_nvml.util_samples(f->b, 0, &last, u, 32, &n, &e), GS_OK);
    assert_int_equal(n, 0);
    assert_true(last == t1 + 900000 || fabs((double)last - (double)(t1 + 900000)) <= 1);
    /* 0.3 s later, read two at a time: 11 and 12, then 13 (0.2, 0.2, 1.0) */
    clock_set(&f->clk, 1.35);
    assert_int_equal(gs_backend_nvml.util_samples(f->b, 0, &last, u, 2, &n, &e), GS_OK);
    assert_int_equal(n, 2);
    assert_close(u[0].util_ratio, 0.2, 1e-9);
    assert_close(u[1].util_ratio, 0.2, 1e-9);
    assert_close((double)(u[0].t_us - t1), 1000000, 2);
    assert_int_equal(gs_backend_nvml.util_samples(f->b, 0, &last, u, 2, &n, &e), GS_OK);
    assert_int_equal(n, 1);
    assert_close(u[0].util_ratio, 1.0, 1e-9);
    assert_close((double)(u[0].t_us - t1), 1200000, 2);
    assert_int_equal(gs_backend_nvml.util_samples(f->b, 0, &last, u, 2, &n, &e), GS_OK);
    assert_int_equal(n, 0);
    gs_backend_nvml.close(f->b);
    f->b = NULL;
    unlink(path);

    /* the GPU keeps no such samples */
    inline_scenario(path, sizeof path, "\"not_supported\": [\"samples:gpu_utilization\"]");
    assert_int_equal(sim_open(&f->b, sim_lib(), path, "5", &e), GS_OK);
    last = 0;
    assert_int_equal(gs_backend_nvml.util_samples(f->b, 0, &last, u, 32, &n, &e), GS_ENOTSUP);
    assert_int_equal(n, 0);
    assert_non_null(strstr(e.msg, "nvmlDeviceGetSamples(gpu 0)"));
    gs_backend_nvml.close(f->b);
    f->b = NULL;
    unlink(path);

    /* a 390-era library without the symbol: unavailable, cleanly */
    if (!minimal || !*minimal)
        return;
    assert_int_equal(sim_open(&f->b, minimal, "h100x8-training.json", "5", &e), GS_OK);
    n = 99;
    assert_int_equal(gs_backend_nvml.util_samples(f->b, 0, &last, u, 32, &n, &e), GS_ENOTSUP);
    assert_int_equal(n, 0);
    assert_true(last == 0);
}

/* The topology answer (nvidia-smi topo -m): h100x8-training's GPUs reach each other over 18
 * NVSwitch links, two NUMA nodes of CPUs; one call answers the GPUs asked for (sel), the others
 * left zero, and the parts asked for (what), the others zero; the 390-era library lacks the
 * calls: all unknown. */
static void topology(void **state)
{
    const unsigned ALL = GS_TOPO_MATRIX | GS_TOPO_LINK_CAPS;
    struct fx *f = *state;
    const char *minimal = getenv("GPUSCOPE_SIM_MINIMAL_LIB");
    static struct gs_topo t[9];
    unsigned char sel[8] = {0};
    struct gs_err e;

    NEED_SIM();
    assert_int_equal(sim_open(&f->b, sim_lib(), "h100x8-training.json", "5", &e), GS_OK);
    assert_int_equal(gs_backend_nvml.topology(f->b, NULL, ALL, t, 8, &e), GS_OK);
    for (unsigned i = 0; i < 8; i++) {
        assert_int_equal(t[i].level_st[i], GS_ST_NA);
        assert_int_equal(t[i].nvlinks[i], 0);
        for (unsigned j = 0; j < 8; j++) {
            if (j == i)
                continue;
            assert_int_equal(t[i].level_st[j], GS_ST_OK);
            assert_int_equal(t[i].level[j], (i < 4) == (j < 4) ? 40u : 50u);
            assert_int_equal(t[i].nvlinks[j], 18);
        }
        assert_int_equal(t[i].level_st[8], GS_ST_NA);
    }
    assert_true(t[0].cpus_st == GS_ST_OK && t[0].numa_st == GS_ST_OK);
    assert_string_equal(t[0].cpus, "0-55,112-167");
    assert_string_equal(t[0].numa, "0");
    assert_int_equal(t[0].gpu_numa_st, GS_ST_NA);
    /* 18 links, all up; the scenario gives no capabilities: none read */
    assert_int_equal(t[0].n_links, 18);
    assert_true(t[0].link_active[0] && t[0].link_active[17] && t[0].caps_read[0] == 0);
    assert_string_equal(t[6].cpus, "56-111,168-223");
    assert_string_equal(t[6].numa, "1");
    /* GPU 6 alone: its row as in the whole answer (its peers' links read for its NV counts),
     * every other row zero */
    sel[6] = 1;
    assert_int_equal(gs_backend_nvml.topology(f->b, sel, ALL, t, 8, &e), GS_OK);
    assert_string_equal(t[6].cpus, "56-111,168-223");
    assert_int_equal(t[6].nvlinks[0], 18);
    assert_int_equal(t[6].level[0], 50u);
    assert_int_equal(t[6].n_links, 18);
    assert_true(t[0].cpus_st == GS_ST_NA && t[0].n_links == 0 && t[0].nvlinks[1] == 0);
    /* the links alone (nvlink -c): their states, no matrix */
    assert_int_equal(gs_backend_nvml.topology(f->b, NULL, GS_TOPO_LINK_CAPS, t, 8, &e), GS_OK);
    assert_int_equal(t[3].n_links, 18);
    assert_true(t[3].link_active[0] && t[3].link_active[17] && !t[3].link_active[18]);
    assert_true(t[3].cpus_st == GS_ST_NA && t[3].numa_st == GS_ST_NA && t[3].gpu_numa_st == 0);
    for (unsigned j = 0; j < 8; j++)
        assert_true(t[3].level_st[j] == GS_ST_NA && t[3].nvlinks[j] == 0);
    /* the matrix alone (topo -m): the same peers and levels */
    assert_int_equal(gs_backend_nvml.topology(f->b, NULL, GS_TOPO_MATRIX, t, 8, &e), GS_OK);
    assert_true(t[3].nvlinks[5] == 18 && t[3].level[5] == 50u && t[3].n_links == 18);
    assert_int_equal(gs_backend_nvml.topology(f->b, NULL, ALL, t, 9, &e), GS_ENOGPU);
    assert_non_null(strstr(e.msg, "no GPU 8 (have 8)"));
    gs_backend_nvml.close(f->b);
    f->b = NULL;
    if (!minimal || !*minimal)
        return;
    assert_int_equal(sim_open(&f->b, minimal, "h100x8-training.json", "5", &e), GS_OK);
    assert_int_equal(gs_backend_nvml.topology(f->b, NULL, ALL, t, 8, &e), GS_OK);
    assert_true(t[0].cpus_st == GS_ST_NA && t[0].numa_st == GS_ST_NA &&
                t[0].gpu_numa_st == GS_ST_NA);
    for (unsigned j = 0; j < 8; j++)
        assert_true(t[0].level_st[j] == GS_ST_NA && t[0].nvlinks[j] == 0);
}

/* What only nvidia-smi prints of a MIG device. The memory the driver reserves in the instance
 * comes with its memory call (MemoryInfo_v2), every cycle; the volatile uncorrectable SRAM ECC
 * count (nvmlDeviceGetMemoryErrorCounter on the MIG handle) is read only when the backend is
 * opened with mig_sram_ecc (the table and -q): never in the agent's cycle, nor by a health view
 * masked to the GPU's ECC counts (dmon -s e) or a --query-gpu asking for detail readings; a
 * failing call leaves it absent. */
static void mig_smi_rows(void **state)
{
    struct fx *f = *state;
    unsigned char need_m[GS_M__COUNT] = {0};
    struct gs_backend_opts o = {.library = sim_lib(), .need_metrics = need_m, .mask_health = true};
    struct gs_backend_opts tab = {
        .library = sim_lib(), .need_metrics = need_m, .mask_health = true, .mig_sram_ecc = true};
    char path[1024];
    const char *tmp = getenv("TMPDIR");
    json_error_t je;
    json_t *root, *inst;
    struct gs_gpu *g;
    struct gs_err e;
    int fd;

    NEED_SIM();
    scenario(path, sizeof path, "h100-mig.json");
    root = json_load_file(path, 0, &je);
    assert_non_null(root);
    inst = json_array_get(
        json_object_get(json_object_get(json_array_get(json_object_get(root, "gpus"), 0), "mig"),
                        "instances"),
        0);
    assert_non_null(inst);
    json_object_set_new(inst, "ecc_sram_uncorrected_volatile", json_integer(3));
    json_object_set_new(inst, "memory_reserved_mib", json_integer(12));
    snprintf(path, sizeof path, "%s/gs_scenario_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(json_dump_file(root, path, 0), 0);
    assert_int_equal(sim_open(&f->b, sim_lib(), path, "60", &e), GS_OK);
    assert_int_equal(gs_snapshot_new(&f->snap, 1, 1, NULL), GS_OK);
    g = &f->snap->gpus[0];
    /* the agent's slow cycle: health and MIG devices, no mask */
    sample_ok(f->b, 0, g, GS_WANT_MIG | GS_WANT_HEALTH);
    assert_int_equal(g->n_mig, 4);
    assert_int_equal(g->mig[0].sram_unc_st, GS_ST_NA);
    assert_int_equal(g->mig[0].mem_reserved_st, GS_ST_OK);
    assert_true(g->mig[0].mem_reserved_bytes == 12ULL * 1048576);
    assert_true(g->mig[0].mem_free_bytes ==
                (40448ULL - 12 - 11091) * 1048576); /* total - reserved - used */
    assert_int_equal(g->mig[1].mem_reserved_st, GS_ST_OK);
    assert_true(g->mig[1].mem_reserved_bytes == 0);
    /* detail readings (a --query-gpu of mig.mode and a detail field) */
    sample_ok(f->b, 0, g, GS_WANT_MIG | GS_WANT_DETAIL);
    assert_int_equal(g->mig[0].sram_unc_st, GS_ST_NA);
    gs_backend_nvml.close(f->b);
    /* dmon -s e: health masked to the GPU's ECC counts, MIG devices listed, no SRAM count */
    need_m[GS_M_ECC_UNCORR_VOL] = need_m[GS_M_ECC_CORR_VOL] = need_m[GS_M_MIG_MODE] = 1;
    gs_err_clear(&e);
    assert_int_equal(gs_backend_nvml.open(&f->b, &o, &e), GS_OK);
    sample_ok(f->b, 0, g, GS_WANT_MIG | GS_WANT_HEALTH);
    assert_int_equal(g->n_mig, 4);
    assert_int_equal(g->mig[0].sram_unc_st, GS_ST_NA);
    gs_backend_nvml.close(f->b);
    /* the table and -q */
    assert_int_equal(gs_backend_nvml.open(&f->b, &tab, &e), GS_OK);
    sample_ok(f->b, 0, g, GS_WANT_MIG | GS_WANT_HEALTH);
    assert_int_equal(g->n_mig, 4);
    assert_int_equal(g->mig[0].sram_unc_st, GS_ST_OK);
    assert_true(g->mig[0].sram_unc_vol == 3);
    assert_int_equal(g->mig[1].sram_unc_st, GS_ST_OK);
    assert_true(g->mig[1].sram_unc_vol == 0);
    gs_backend_nvml.close(f->b);
    /* the call failing (ECC off here): absent, the rest of the device read */
    json_object_set_new(json_object_get(json_array_get(json_object_get(root, "gpus"), 0), "ecc"),
                        "current", json_false());
    assert_int_equal(json_dump_file(root, path, 0), 0);
    json_decref(root);
    assert_int_equal(gs_backend_nvml.open(&f->b, &tab, &e), GS_OK); /* the same file */
    unlink(path);
    sample_ok(f->b, 0, g, GS_WANT_MIG | GS_WANT_HEALTH);
    assert_int_equal(g->n_mig, 4);
    assert_int_equal(g->mig[0].sram_unc_st, GS_ST_NA);
    assert_int_equal(g->mig[0].attr_st, GS_ST_OK);
    gs_snapshot_free(f->snap);
    f->snap = NULL;
    gs_backend_nvml.close(f->b);
    f->b = NULL;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(status_mapping),
        cmocka_unit_test(init_error_mapping),
        cmocka_unit_test(process_stride_rule),
        cmocka_unit_test(field_value_types),
        cmocka_unit_test(open_missing_library),
        cmocka_unit_test(open_library_without_nvml),
        cmocka_unit_test(open_env_library),
        cmocka_unit_test_setup_teardown(every_scenario_opens_and_samples, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(h100_matches_scenario, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(geforce_absent_fields, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(video_engine_fields, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(board_fields, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(pci_class_codes, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(temperature_margin, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(detail_readings, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(fabric_health_readings, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(detail_gpu_readings, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(minimal_library, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(no_scenario_is_no_driver, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(lost_gpu_mid_run, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(mig_devices, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(gpm_two_samples, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(throttle_reasons, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(xid_events, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(process_utilization_kept, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(utilization_samples, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(nvlink_links, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(nvlink_state_cadence, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(nvlink_first_cycle_rate, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(pcie_counter_rate, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(pcie_counter_fallback, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(topology, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(mig_gpm, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(mig_smi_rows, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
