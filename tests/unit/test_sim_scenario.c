/*
 * Unit tests for nvml-sim: the scenario parser (linked in directly, for its messages) and the
 * built library's NVML behaviour (dlopen of $GPUSCOPE_SIM_LIB, as the backend loads a driver):
 * every bundled scenario loads, counting protocols, version checks, a GPU lost at its event time,
 * deterministic virtual time, square-wave averages, MIG handles, GPM, events, and the minimal
 * 390-era library. Virtual time comes from NVML_SIM_TIME (a fixed value, or file:PATH that a test
 * rewrites to move time forward).
 */
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../sim/scenario.h"
#include "backend/nvml_abi.h"

/* ---- the library under test ---------------------------------------------------------------- */

#define SIM_FUNCTIONS(X)                                                                           \
    X(nvmlReturn_t, nvmlInit_v2, (void))                                                           \
    X(nvmlReturn_t, nvmlInitWithFlags, (unsigned))                                                 \
    X(nvmlReturn_t, nvmlShutdown, (void))                                                          \
    X(const char *, nvmlErrorString, (nvmlReturn_t))                                               \
    X(nvmlReturn_t, nvmlSystemGetDriverVersion, (char *, unsigned))                                \
    X(nvmlReturn_t, nvmlSystemGetNVMLVersion, (char *, unsigned))                                  \
    X(nvmlReturn_t, nvmlSystemGetCudaDriverVersion, (int *))                                       \
    X(nvmlReturn_t, nvmlSystemGetProcessName, (unsigned, char *, unsigned))                        \
    X(nvmlReturn_t, nvmlDeviceGetCount_v2, (unsigned *))                                           \
    X(nvmlReturn_t, nvmlDeviceGetCount, (unsigned *))                                              \
    X(nvmlReturn_t, nvmlDeviceGetHandleByIndex, (unsigned, nvmlDevice_t *))                        \
    X(nvmlReturn_t, nvmlDeviceGetMemoryErrorCounter,                                               \
      (nvmlDevice_t, nvmlMemoryErrorType_t, nvmlEccCounterType_t, nvmlMemoryLocation_t,            \
       unsigned long long *))                                                                      \
    X(nvmlReturn_t, nvmlDeviceGetHandleByIndex_v2, (unsigned, nvmlDevice_t *))                     \
    X(nvmlReturn_t, nvmlDeviceGetHandleByUUID, (const char *, nvmlDevice_t *))                     \
    X(nvmlReturn_t, nvmlDeviceGetHandleByPciBusId_v2, (const char *, nvmlDevice_t *))              \
    X(nvmlReturn_t, nvmlDeviceGetName, (nvmlDevice_t, char *, unsigned))                           \
    X(nvmlReturn_t, nvmlDeviceGetUUID, (nvmlDevice_t, char *, unsigned))                           \
    X(nvmlReturn_t, nvmlDeviceGetSerial, (nvmlDevice_t, char *, unsigned))                         \
    X(nvmlReturn_t, nvmlDeviceGetPciInfo_v3, (nvmlDevice_t, nvmlPciInfo_t *))                      \
    X(nvmlReturn_t, nvmlDeviceGetUtilizationRates, (nvmlDevice_t, nvmlUtilization_t *))            \
    X(nvmlReturn_t, nvmlDeviceGetMemoryInfo, (nvmlDevice_t, nvmlMemory_t *))                       \
    X(nvmlReturn_t, nvmlDeviceGetMemoryInfo_v2, (nvmlDevice_t, nvmlMemory_v2_t *))                 \
    X(nvmlReturn_t, nvmlDeviceGetSamples,                                                          \
      (nvmlDevice_t, nvmlSamplingType_t, unsigned long long, nvmlValueType_t *, unsigned *,        \
       nvmlSample_t *))                                                                            \
    X(nvmlReturn_t, nvmlDeviceGetTemperature, (nvmlDevice_t, unsigned, unsigned *))                \
    X(nvmlReturn_t, nvmlDeviceGetFanSpeed, (nvmlDevice_t, unsigned *))                             \
    X(nvmlReturn_t, nvmlDeviceGetPowerUsage, (nvmlDevice_t, unsigned *))                           \
    X(nvmlReturn_t, nvmlDeviceGetTotalEnergyConsumption, (nvmlDevice_t, unsigned long long *))     \
    X(nvmlReturn_t, nvmlDeviceGetClockInfo, (nvmlDevice_t, nvmlClockType_t, unsigned *))           \
    X(nvmlReturn_t, nvmlDeviceGetCurrentClocksEventReasons, (nvmlDevice_t, unsigned long long *))  \
    X(nvmlReturn_t, nvmlDeviceGetCurrentClocksThrottleReasons,                                     \
      (nvmlDevice_t, unsigned long long *))                                                        \
    X(nvmlReturn_t, nvmlDeviceGetSupportedClocksEventReasons,                                      \
      (nvmlDevice_t, unsigned long long *))                                                        \
    X(nvmlReturn_t, nvmlDeviceGetPcieThroughput,                                                   \
      (nvmlDevice_t, nvmlPcieUtilCounter_t, unsigned *))                                           \
    X(nvmlReturn_t, nvmlDeviceGetFieldValues, (nvmlDevice_t, int, nvmlFieldValue_t *))             \
    X(nvmlReturn_t, nvmlDeviceGetComputeRunningProcesses,                                          \
      (nvmlDevice_t, unsigned *, nvmlProcessInfo_v1_t *))                                          \
    X(nvmlReturn_t, nvmlDeviceGetComputeRunningProcesses_v3,                                       \
      (nvmlDevice_t, unsigned *, nvmlProcessInfo_v2_t *))                                          \
    X(nvmlReturn_t, nvmlDeviceGetGraphicsRunningProcesses,                                         \
      (nvmlDevice_t, unsigned *, nvmlProcessInfo_v1_t *))                                          \
    X(nvmlReturn_t, nvmlDeviceGetGraphicsRunningProcesses_v3,                                      \
      (nvmlDevice_t, unsigned *, nvmlProcessInfo_v2_t *))                                          \
    X(nvmlReturn_t, nvmlDeviceGetRunningProcessDetailList,                                         \
      (nvmlDevice_t, nvmlProcessDetailList_t *))                                                   \
    X(nvmlReturn_t, nvmlDeviceGetProcessUtilization,                                               \
      (nvmlDevice_t, nvmlProcessUtilizationSample_t *, unsigned *, unsigned long long))            \
    X(nvmlReturn_t, nvmlDeviceGetEccMode,                                                          \
      (nvmlDevice_t, nvmlEnableState_t *, nvmlEnableState_t *))                                    \
    X(nvmlReturn_t, nvmlDeviceGetTotalEccErrors,                                                   \
      (nvmlDevice_t, nvmlMemoryErrorType_t, nvmlEccCounterType_t, unsigned long long *))           \
    X(nvmlReturn_t, nvmlDeviceGetRetiredPages,                                                     \
      (nvmlDevice_t, nvmlPageRetirementCause_t, unsigned *, unsigned long long *))                 \
    X(nvmlReturn_t, nvmlDeviceGetRemappedRows,                                                     \
      (nvmlDevice_t, unsigned *, unsigned *, unsigned *, unsigned *))                              \
    X(nvmlReturn_t, nvmlEventSetCreate, (nvmlEventSet_t *))                                        \
    X(nvmlReturn_t, nvmlDeviceRegisterEvents, (nvmlDevice_t, unsigned long long, nvmlEventSet_t))  \
    X(nvmlReturn_t, nvmlEventSetWait_v2, (nvmlEventSet_t, nvmlEventData_t *, unsigned))            \
    X(nvmlReturn_t, nvmlEventSetFree, (nvmlEventSet_t))                                            \
    X(nvmlReturn_t, nvmlDeviceGetMigMode, (nvmlDevice_t, unsigned *, unsigned *))                  \
    X(nvmlReturn_t, nvmlDeviceGetMaxMigDeviceCount, (nvmlDevice_t, unsigned *))                    \
    X(nvmlReturn_t, nvmlDeviceGetMigDeviceHandleByIndex, (nvmlDevice_t, unsigned, nvmlDevice_t *)) \
    X(nvmlReturn_t, nvmlDeviceGetDeviceHandleFromMigDeviceHandle, (nvmlDevice_t, nvmlDevice_t *))  \
    X(nvmlReturn_t, nvmlDeviceIsMigDeviceHandle, (nvmlDevice_t, unsigned *))                       \
    X(nvmlReturn_t, nvmlDeviceGetGpuInstanceId, (nvmlDevice_t, unsigned *))                        \
    X(nvmlReturn_t, nvmlGpmQueryDeviceSupport, (nvmlDevice_t, nvmlGpmSupport_t *))                 \
    X(nvmlReturn_t, nvmlGpmSampleAlloc, (nvmlGpmSample_t *))                                       \
    X(nvmlReturn_t, nvmlGpmSampleFree, (nvmlGpmSample_t))                                          \
    X(nvmlReturn_t, nvmlGpmSampleGet, (nvmlDevice_t, nvmlGpmSample_t))                             \
    X(nvmlReturn_t, nvmlGpmMetricsGet, (nvmlGpmMetricsGet_t *))                                    \
    X(nvmlReturn_t, nvmlDeviceGetEncoderStats, (nvmlDevice_t, unsigned *, unsigned *, unsigned *)) \
    X(nvmlReturn_t, nvmlDeviceGetJpgUtilization, (nvmlDevice_t, unsigned *, unsigned *))           \
    X(nvmlReturn_t, nvmlDeviceGetOfaUtilization, (nvmlDevice_t, unsigned *, unsigned *))           \
    X(nvmlReturn_t, nvmlDeviceGetInforomImageVersion, (nvmlDevice_t, char *, unsigned))            \
    X(nvmlReturn_t, nvmlDeviceGetInforomVersion,                                                   \
      (nvmlDevice_t, nvmlInforomObject_t, char *, unsigned))                                       \
    X(nvmlReturn_t, nvmlDeviceValidateInforom, (nvmlDevice_t))                                     \
    X(nvmlReturn_t, nvmlDeviceGetDisplayMode, (nvmlDevice_t, nvmlEnableState_t *))                 \
    X(nvmlReturn_t, nvmlDeviceGetDisplayActive, (nvmlDevice_t, nvmlEnableState_t *))               \
    X(nvmlReturn_t, nvmlDeviceGetAccountingMode, (nvmlDevice_t, nvmlEnableState_t *))              \
    X(nvmlReturn_t, nvmlDeviceGetAccountingBufferSize, (nvmlDevice_t, unsigned *))                 \
    X(nvmlReturn_t, nvmlDeviceGetGspFirmwareMode, (nvmlDevice_t, unsigned *, unsigned *))          \
    X(nvmlReturn_t, nvmlDeviceGetPciInfoExt, (nvmlDevice_t, nvmlPciInfoExt_v1_t *))                \
    X(nvmlReturn_t, nvmlDeviceGetMarginTemperature, (nvmlDevice_t, nvmlMarginTemperature_t *))     \
    X(nvmlReturn_t, nvmlDeviceGetNvLinkState, (nvmlDevice_t, unsigned int, nvmlEnableState_t *))   \
    X(nvmlReturn_t, nvmlDeviceGetNvLinkErrorCounter,                                               \
      (nvmlDevice_t, unsigned int, nvmlNvLinkErrorCounter_t, unsigned long long *))                \
    X(nvmlReturn_t, nvmlDeviceGetCpuAffinity, (nvmlDevice_t, unsigned, unsigned long *))           \
    X(nvmlReturn_t, nvmlDeviceGetMemoryAffinity,                                                   \
      (nvmlDevice_t, unsigned, unsigned long *, nvmlAffinityScope_t))                              \
    X(nvmlReturn_t, nvmlDeviceGetNumaNodeId, (nvmlDevice_t, unsigned *))                           \
    X(nvmlReturn_t, nvmlDeviceGetNvLinkRemotePciInfo_v2,                                           \
      (nvmlDevice_t, unsigned int, nvmlPciInfo_t *))                                               \
    X(nvmlReturn_t, nvmlDeviceGetGpuInstanceById, (nvmlDevice_t, unsigned, nvmlGpuInstance_t *))   \
    X(nvmlReturn_t, nvmlGpuInstanceGetInfo, (nvmlGpuInstance_t, nvmlGpuInstanceInfo_t *))          \
    X(nvmlReturn_t, nvmlDeviceGetAddressingMode, (nvmlDevice_t, nvmlDeviceAddressingMode_t *))     \
    X(nvmlReturn_t, nvmlDeviceGetVirtualizationMode,                                               \
      (nvmlDevice_t, nvmlGpuVirtualizationMode_t *))                                               \
    X(nvmlReturn_t, nvmlDeviceGetHostVgpuMode, (nvmlDevice_t, nvmlHostVgpuMode_t *))               \
    X(nvmlReturn_t, nvmlDeviceGetC2cModeInfoV, (nvmlDevice_t, nvmlC2cModeInfo_v1_t *))             \
    X(nvmlReturn_t, nvmlDeviceGetCapabilities, (nvmlDevice_t, nvmlDeviceCapabilities_t *))         \
    X(nvmlReturn_t, nvmlDeviceGetSramEccErrorStatus, (nvmlDevice_t, nvmlEccSramErrorStatus_t *))   \
    X(nvmlReturn_t, nvmlDeviceGetRowRemapperHistogram,                                             \
      (nvmlDevice_t, nvmlRowRemapperHistogramValues_t *))                                          \
    X(nvmlReturn_t, nvmlDeviceGetGpuFabricInfoV, (nvmlDevice_t, nvmlGpuFabricInfo_v3_t *))

#define SIM_DECL(ret, name, args) ret(*name) args;
static struct {
    SIM_FUNCTIONS(SIM_DECL)
} nv;
static void *lib;
static char scen_dir[1024];
static char tmp_dir[] = "/tmp/gs-sim-test-XXXXXX";
static char time_file[1100];

static void *sym(void *h, const char *name)
{
    void *p = dlsym(h, name);
    if (!p)
        fail_msg("nvml-sim lacks %s", name);
    return p;
}

static int group_setup(void **state)
{
    const char *path = getenv("GPUSCOPE_SIM_LIB");
    const char *src = getenv("GPUSCOPE_SOURCE_ROOT");
    char buf[1024];

    (void)state;
    if (!path) {
        const char *b = getenv("GPUSCOPE_BUILD_ROOT");
        snprintf(buf, sizeof buf, "%s/sim/libnvidia-ml.so.1", b ? b : "build");
        path = buf;
    }
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "cannot load %s: %s\n", path, dlerror());
        return -1;
    }
#define SIM_LOAD(ret, name, args)                                                                  \
    {                                                                                              \
        void *p_ = sym(lib, #name);                                                                \
        memcpy(&nv.name, &p_, sizeof p_);                                                          \
    }
    SIM_FUNCTIONS(SIM_LOAD)
    snprintf(scen_dir, sizeof scen_dir, "%s/sim/scenarios", src ? src : ".");
    if (!mkdtemp(tmp_dir))
        return -1;
    snprintf(time_file, sizeof time_file, "%s/t", tmp_dir);
    return 0;
}

static int group_teardown(void **state)
{
    char cmd[1200];

    (void)state;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
    if (system(cmd) != 0)
        return -1;
    return 0;
}

/* Leaves the library uninitialised after each test, whatever the test did. */
static int test_teardown(void **state)
{
    (void)state;
    while (nv.nvmlShutdown() == NVML_SUCCESS)
        ;
    unsetenv("NVML_SIM_TIME");
    unsetenv("NVML_SIM_SCENARIO");
    return 0;
}

/* ---- helpers ------------------------------------------------------------------------------- */

static void use_bundled(const char *name, const char *t)
{
    char path[1200];

    snprintf(path, sizeof path, "%s/%s", scen_dir, name);
    setenv("NVML_SIM_SCENARIO", path, 1);
    if (t)
        setenv("NVML_SIM_TIME", t, 1);
    else
        unsetenv("NVML_SIM_TIME");
}

/* Writes an inline scenario to a temporary file and selects it. */
static void use_inline(const char *json, const char *t)
{
    static unsigned n;
    char path[1200];
    FILE *f;

    snprintf(path, sizeof path, "%s/s%u.json", tmp_dir, n++);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(json, f);
    fclose(f);
    setenv("NVML_SIM_SCENARIO", path, 1);
    if (t)
        setenv("NVML_SIM_TIME", t, 1);
    else
        unsetenv("NVML_SIM_TIME");
}

/* Drives virtual time through NVML_SIM_TIME=file:. */
static void set_time(double t)
{
    FILE *f = fopen(time_file, "w");

    assert_non_null(f);
    fprintf(f, "%.6f\n", t);
    fclose(f);
}

static void use_time_file(double t)
{
    char v[1200];

    set_time(t);
    snprintf(v, sizeof v, "file:%s", time_file);
    setenv("NVML_SIM_TIME", v, 1);
}

static nvmlDevice_t dev(unsigned i)
{
    nvmlDevice_t d = NULL;

    assert_int_equal(nv.nvmlDeviceGetHandleByIndex_v2(i, &d), NVML_SUCCESS);
    return d;
}

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* A minimal one-GPU scenario with extra GPU keys and top-level keys spliced in. */
static void use_one_gpu(const char *gpu_extra, const char *top_extra, const char *t)
{
    char json[8192];

    snprintf(json, sizeof json,
             "{\"gpus\": [{\"name\": \"NVIDIA Test GPU\", \"uuid\": \"GPU-test-0\", "
             "\"architecture\": \"hopper\", \"pci\": {\"bus\": 1, \"device_id\": \"0x2330\"}, "
             "\"memory\": {\"total_mib\": 1000, \"reserved_mib\": 10}%s%s}]%s%s}",
             gpu_extra && *gpu_extra ? ", " : "", gpu_extra ? gpu_extra : "",
             top_extra && *top_extra ? ", " : "", top_extra ? top_extra : "");
    use_inline(json, t);
}

/* ---- the parser ---------------------------------------------------------------------------- */

static void parse_error_has_file_line_column(void **state)
{
    static const char text[] = "{\n  \"gpus\": [\n    {\"name\": 5}\n  ]\n}\n";
    struct gs_sim_scenario *sc = NULL;
    char err[512];

    (void)state;
    assert_int_equal(gs_sim_scenario_parse(text, strlen(text), "t.json", &sc, err, sizeof err), -1);
    assert_null(sc);
    assert_string_equal(err, "t.json:3:14: gpus[0].name: expected a string");
}

static void syntax_error_and_unknown_key_are_located(void **state)
{
    static const char bad[] = "{\"gpus\": [}";
    static const char typo[] = "{\n\"driver_version\": \"1\",\n\"gpu\": []}";
    struct gs_sim_scenario *sc = NULL;
    char err[512];

    (void)state;
    assert_int_equal(gs_sim_scenario_parse(bad, strlen(bad), "b.json", &sc, err, sizeof err), -1);
    assert_non_null(strstr(err, "b.json:1:"));
    assert_int_equal(gs_sim_scenario_parse(typo, strlen(typo), "k.json", &sc, err, sizeof err), -1);
    assert_string_equal(err, "k.json:3:8: unknown key \"gpu\"");
    /* Bytes that are not JSON at all, and deep nesting, are errors too, not crashes. */
    assert_int_equal(gs_sim_scenario_parse("\x01\xff", 2, "x", &sc, err, sizeof err), -1);
    {
        char deep[400];
        memset(deep, '[', sizeof deep);
        assert_int_equal(gs_sim_scenario_parse(deep, sizeof deep, "d", &sc, err, sizeof err), -1);
        assert_non_null(strstr(err, "nesting"));
    }
}

static void template_values_are_inherited_and_overridden(void **state)
{
    static const char text[] =
        "{\"templates\": {\"t\": {\"name\": \"NVIDIA H100 80GB HBM3\", \"serial\": \"1\","
        " \"pci\": {\"device_id\": \"0x2330\"}, \"memory\": {\"total_mib\": 81559},"
        " \"power\": {\"default_limit_w\": 700}}},"
        " \"gpus\": [{\"template\": \"t\", \"uuid\": \"GPU-a\", \"pci\": {\"bus\": 24},"
        " \"serial\": null, \"power\": {\"default_limit_w\": 500, \"min_limit_w\": 200}}]}";
    struct gs_sim_scenario *sc = NULL;
    char err[512];

    (void)state;
    assert_int_equal(gs_sim_scenario_parse(text, strlen(text), "t", &sc, err, sizeof err), 0);
    assert_string_equal(sc->gpus[0].name, "NVIDIA H100 80GB HBM3");
    assert_false(sc->gpus[0].has_serial); /* null removes the inherited value */
    assert_int_equal(sc->gpus[0].pci_device_id, 0x233010DE);
    assert_string_equal(sc->gpus[0].bus_id, "00000000:18:00.0");
    assert_int_equal(sc->gpus[0].power_default_mw, 500000);
    assert_int_equal(sc->gpus[0].power_min_mw, 200000);
    gs_sim_scenario_free(sc);
}

/* ---- init ---------------------------------------------------------------------------------- */

static void every_bundled_scenario_loads(void **state)
{
    static const char *const names[] = {
        "rtx4090-idle-desktop.json",
        "h100x8-training.json",
        "a100x8-dataloader-bound.json",
        "a100x2-dpo-imbalance.json",
        "thermal-powercap.json",
        "gpu-lost.json",
        "h100-mig.json",
    };
    static const unsigned gpus[] = {1, 8, 8, 2, 1, 4, 1};

    (void)state;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        unsigned n = 0;
        char name[96];
        use_bundled(names[i], "10");
        assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
        assert_int_equal(nv.nvmlDeviceGetCount_v2(&n), NVML_SUCCESS);
        assert_int_equal(n, gpus[i]);
        for (unsigned g = 0; g < n; g++) {
            assert_int_equal(nv.nvmlDeviceGetName(dev(g), name, sizeof name), NVML_SUCCESS);
            assert_true(strncmp(name, "NVIDIA ", 7) == 0);
        }
        assert_int_equal(nv.nvmlShutdown(), NVML_SUCCESS);
    }
}

static void no_scenario_means_no_driver(void **state)
{
    unsigned n;
    char buf[80];

    (void)state;
    unsetenv("NVML_SIM_SCENARIO");
    assert_int_equal(nv.nvmlInit_v2(), NVML_ERROR_DRIVER_NOT_LOADED);
    assert_int_equal(nv.nvmlDeviceGetCount_v2(&n), NVML_ERROR_UNINITIALIZED);
    assert_int_equal(nv.nvmlSystemGetDriverVersion(buf, sizeof buf), NVML_ERROR_UNINITIALIZED);
    assert_int_equal(nv.nvmlShutdown(), NVML_ERROR_UNINITIALIZED);
    assert_string_equal(nv.nvmlErrorString(NVML_ERROR_DRIVER_NOT_LOADED), "Driver Not Loaded");
    assert_string_equal(nv.nvmlErrorString(NVML_ERROR_GPU_IS_LOST), "GPU is lost");
    assert_string_equal(nv.nvmlErrorString(NVML_ERROR_NOT_SUPPORTED), "Not Supported");
}

static void bad_scenario_is_an_init_error_not_a_crash(void **state)
{
    (void)state;
    use_inline("{\"gpus\": [ {\"name\": \"x\", ", NULL);
    assert_int_equal(nv.nvmlInit_v2(), NVML_ERROR_UNKNOWN);
    use_inline("{\"gpus\": [{\"name\": \"x\", \"uuid\": \"GPU-1\", \"pci\": {\"bus\": 300}}]}",
               NULL);
    assert_int_equal(nv.nvmlInit_v2(), NVML_ERROR_UNKNOWN);
    setenv("NVML_SIM_SCENARIO", "/nonexistent/scenario.json", 1);
    assert_int_equal(nv.nvmlInit_v2(), NVML_ERROR_UNKNOWN);
    use_bundled("h100x8-training.json", "not-a-time");
    assert_int_equal(nv.nvmlInit_v2(), NVML_ERROR_UNKNOWN);
}

static void requested_init_errors_and_zero_gpus(void **state)
{
    unsigned n = 7;

    (void)state;
    use_inline("{\"init_error\": \"LIB_RM_VERSION_MISMATCH\", \"gpus\": []}", NULL);
    assert_int_equal(nv.nvmlInit_v2(), NVML_ERROR_LIB_RM_VERSION_MISMATCH);
    use_inline("{\"init_error\": \"NO_PERMISSION\"}", NULL);
    assert_int_equal(nv.nvmlInit_v2(), NVML_ERROR_NO_PERMISSION);
    use_inline("{\"driver_version\": \"590.48.01\", \"gpus\": []}", NULL);
    assert_int_equal(nv.nvmlInit_v2(), NVML_ERROR_GPU_NOT_FOUND);
    assert_int_equal(nv.nvmlInitWithFlags(NVML_INIT_FLAG_NO_GPUS), NVML_SUCCESS);
    assert_int_equal(nv.nvmlDeviceGetCount_v2(&n), NVML_SUCCESS);
    assert_int_equal(n, 0);
}

static void init_is_reference_counted(void **state)
{
    char v[80];
    int cuda = 0;

    (void)state;
    use_bundled("h100x8-training.json", "5");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    assert_int_equal(nv.nvmlShutdown(), NVML_SUCCESS);
    assert_int_equal(nv.nvmlSystemGetDriverVersion(v, sizeof v), NVML_SUCCESS);
    assert_string_equal(v, "590.48.01");
    assert_int_equal(nv.nvmlSystemGetDriverVersion(v, 9), NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(nv.nvmlSystemGetNVMLVersion(v, sizeof v), NVML_SUCCESS);
    assert_string_equal(v, "13.590.48.01");
    assert_int_equal(nv.nvmlSystemGetCudaDriverVersion(&cuda), NVML_SUCCESS);
    assert_int_equal(cuda, 13010);
    assert_int_equal(nv.nvmlShutdown(), NVML_SUCCESS);
    assert_int_equal(nv.nvmlShutdown(), NVML_ERROR_UNINITIALIZED);
}

/* ---- arguments ----------------------------------------------------------------------------- */

static void arguments_are_validated_like_nvml(void **state)
{
    nvmlDevice_t d, bogus = (nvmlDevice_t)(void *)&bogus;
    char small[4];
    unsigned u;
    nvmlUtilization_t util;

    (void)state;
    use_bundled("h100x8-training.json", "20");
    assert_int_equal(nv.nvmlDeviceGetName(NULL, small, sizeof small), NVML_ERROR_UNINITIALIZED);
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    d = dev(0);
    assert_int_equal(nv.nvmlDeviceGetHandleByIndex_v2(8, &d), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nv.nvmlDeviceGetHandleByIndex_v2(0, NULL), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nv.nvmlDeviceGetName(bogus, small, 64), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nv.nvmlDeviceGetName(NULL, small, 64), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nv.nvmlDeviceGetName(d, small, sizeof small), NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(nv.nvmlDeviceGetName(d, NULL, 64), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nv.nvmlDeviceGetUtilizationRates(d, NULL), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nv.nvmlDeviceGetUtilizationRates(bogus, &util), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nv.nvmlDeviceGetTemperature(d, 1, &u), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nv.nvmlDeviceGetClockInfo(d, 9, &u), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nv.nvmlDeviceGetFieldValues(d, 0, NULL), NVML_ERROR_INVALID_ARGUMENT);
}

static void unsupported_fields_follow_the_board(void **state)
{
    nvmlDevice_t d;
    char buf[96];
    unsigned u, cur, pend;
    nvmlEnableState_t e1, e2;

    (void)state;
    use_bundled("rtx4090-idle-desktop.json", "30");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    d = dev(0);
    assert_int_equal(nv.nvmlDeviceGetSerial(d, buf, sizeof buf), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nv.nvmlDeviceGetEccMode(d, &e1, &e2), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nv.nvmlDeviceGetMigMode(d, &cur, &pend), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nv.nvmlDeviceGetFanSpeed(d, &u), NVML_SUCCESS);
    assert_int_equal(u, 0);
    nv.nvmlShutdown();

    use_bundled("h100x8-training.json", "30");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    d = dev(0);
    assert_int_equal(nv.nvmlDeviceGetFanSpeed(d, &u), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nv.nvmlDeviceGetSerial(d, buf, sizeof buf), NVML_SUCCESS);
    assert_int_equal(nv.nvmlDeviceGetEccMode(d, &e1, &e2), NVML_SUCCESS);
    assert_int_equal(e1, NVML_FEATURE_ENABLED);
    assert_int_equal(nv.nvmlDeviceGetMigMode(d, &cur, &pend), NVML_SUCCESS);
    assert_int_equal(cur, NVML_DEVICE_MIG_DISABLE);
}

static void scenario_errors_and_not_supported_are_forced(void **state)
{
    nvmlDevice_t d;
    unsigned u;
    nvmlFieldValue_t fv[2] = {{.fieldId = NVML_FI_DEV_MEMORY_TEMP}, {.fieldId = 185}};
    int cuda;

    (void)state;
    use_one_gpu("\"errors\": {\"nvmlDeviceGetPowerUsage\": \"NO_PERMISSION\"},"
                " \"not_supported\": [\"nvmlDeviceGetTemperature\", \"field:185\"],"
                " \"metrics\": {\"mem_temp_c\": 50}",
                "\"errors\": {\"nvmlSystemGetCudaDriverVersion\": \"LIBRARY_NOT_FOUND\"}", "1");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    d = dev(0);
    assert_int_equal(nv.nvmlDeviceGetPowerUsage(d, &u), NVML_ERROR_NO_PERMISSION);
    assert_int_equal(nv.nvmlDeviceGetTemperature(d, 0, &u), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nv.nvmlSystemGetCudaDriverVersion(&cuda), NVML_ERROR_LIBRARY_NOT_FOUND);
    assert_int_equal(nv.nvmlDeviceGetFieldValues(d, 2, fv), NVML_SUCCESS);
    assert_int_equal(fv[0].nvmlReturn, NVML_SUCCESS);
    assert_int_equal(fv[0].value.uiVal, 50);
    assert_int_equal(fv[1].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
}

/* ---- what only nvidia-smi -q shows -------------------------------------------------------- */

static void detail_readings_follow_the_scenario(void **state)
{
    nvmlDevice_t d;
    nvmlDeviceAddressingMode_t am = {0};
    nvmlDeviceCapabilities_t caps = {0};
    nvmlEccSramErrorStatus_t sram = {0};
    nvmlRowRemapperHistogramValues_t hist;
    nvmlGpuFabricInfo_v3_t fab = {0};
    nvmlC2cModeInfo_v1_t c2c;
    unsigned u;
    nvmlFieldValue_t fv[7] = {{.fieldId = 230},
                              {.fieldId = 185, .scopeId = 2},
                              {.fieldId = 186, .scopeId = 2},
                              {.fieldId = 193},
                              {.fieldId = 196},
                              {.fieldId = 301},
                              {.fieldId = 302}};

    (void)state;
    use_one_gpu("\"addressing_mode\": \"ats\", \"virtualization_mode\": \"pass-through\","
                " \"recovery_action\": \"drain-p2p\", \"c2c_mode\": true, \"egm\": false,"
                " \"remapped_rows\": {\"correctable_inactive\": 3, \"histogram\": {\"max\": 2560, "
                "\"low\": 2}},"
                " \"sram_ecc\": {\"volatile_parity\": 4, \"aggregate_secded\": 5, \"other\": 6,"
                " \"threshold_exceeded\": true},"
                " \"fabric\": {\"clique_id\": 32766,"
                " \"cluster_uuid\": \"0123abcd-4567-89ef-0123-456789ABCDEF\","
                " \"health_summary\": \"unhealthy\", \"health_mask\": 4506},"
                " \"tlimit_thresholds_c\": {\"shutdown\": -8},"
                " \"metrics\": {\"memory_power_w\": 43.19}",
                NULL, "10");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    d = dev(0);
    assert_int_equal(nv.nvmlDeviceGetAddressingMode(d, &am), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    am.version = nvmlDeviceAddressingMode_v1;
    assert_int_equal(nv.nvmlDeviceGetAddressingMode(d, &am), NVML_SUCCESS);
    assert_int_equal(am.value, NVML_DEVICE_ADDRESSING_MODE_ATS);
    assert_int_equal(nv.nvmlDeviceGetVirtualizationMode(d, &u), NVML_SUCCESS);
    assert_int_equal(u, NVML_GPU_VIRTUALIZATION_MODE_PASSTHROUGH);
    assert_int_equal(nv.nvmlDeviceGetHostVgpuMode(d, &u), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nv.nvmlDeviceGetC2cModeInfoV(d, &c2c), NVML_SUCCESS);
    assert_int_equal(c2c.isC2cEnabled, 1);
    caps.version = nvmlDeviceCapabilities_v1;
    assert_int_equal(nv.nvmlDeviceGetCapabilities(d, &caps), NVML_SUCCESS);
    assert_int_equal(caps.capMask & NVML_DEV_CAP_EGM, 0);
    sram.version = nvmlEccSramErrorStatus_v1;
    assert_int_equal(nv.nvmlDeviceGetSramEccErrorStatus(d, &sram), NVML_SUCCESS);
    assert_int_equal(sram.volatileUncParity, 4);
    assert_int_equal(sram.aggregateUncSecDed, 5);
    assert_int_equal(sram.aggregateUncBucketOther, 6);
    assert_int_equal(sram.aggregateUncParity, 0);
    assert_int_equal(sram.bThresholdExceeded, 1);
    assert_int_equal(nv.nvmlDeviceGetRowRemapperHistogram(d, &hist), NVML_SUCCESS);
    assert_int_equal(hist.max, 2560);
    assert_int_equal(hist.low, 2);
    assert_int_equal(hist.none, 0);
    fab.version = nvmlGpuFabricInfo_v3;
    assert_int_equal(nv.nvmlDeviceGetGpuFabricInfoV(d, &fab), NVML_SUCCESS);
    assert_int_equal(fab.state, NVML_GPU_FABRIC_STATE_COMPLETED);
    assert_int_equal(fab.status, NVML_SUCCESS);
    assert_int_equal(fab.cliqueId, 32766);
    assert_int_equal(fab.clusterUuid[0], 0x01);
    assert_int_equal(fab.clusterUuid[15], 0xEF);
    assert_int_equal(fab.healthMask, 4506);
    assert_int_equal(fab.healthSummary, NVML_GPU_FABRIC_HEALTH_SUMMARY_UNHEALTHY);
    assert_int_equal((fab.healthMask >> NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_UNHEALTHY) &
                         NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_ROUTE_UNHEALTHY,
                     NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_UNHEALTHY_TRUE);
    assert_int_equal(nv.nvmlDeviceGetFieldValues(d, 7, fv), NVML_SUCCESS);
    assert_int_equal(fv[0].nvmlReturn, NVML_SUCCESS);
    assert_int_equal(fv[0].value.uiVal, NVML_GPU_RECOVERY_ACTION_DRAIN_P2P);
    assert_int_equal(fv[1].nvmlReturn, NVML_SUCCESS);
    assert_int_equal(fv[1].value.uiVal, 43190);
    assert_int_equal(fv[2].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(fv[3].nvmlReturn, NVML_SUCCESS);
    assert_int_equal(fv[3].valueType, NVML_VALUE_TYPE_SIGNED_INT);
    assert_int_equal(fv[3].value.siVal, -8);
    assert_int_equal(fv[4].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(fv[5].nvmlReturn, NVML_SUCCESS);
    assert_int_equal(fv[5].value.uiVal, 3);
    assert_int_equal(fv[6].nvmlReturn, NVML_ERROR_NOT_SUPPORTED); /* not given */
    nv.nvmlShutdown();

    /* a board the scenario says nothing about: unsupported, and fabric state NOT_SUPPORTED */
    use_one_gpu("", NULL, "10");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    d = dev(0);
    assert_int_equal(nv.nvmlDeviceGetAddressingMode(d, &am), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nv.nvmlDeviceGetSramEccErrorStatus(d, &sram), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nv.nvmlDeviceGetRowRemapperHistogram(d, &hist), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nv.nvmlDeviceGetGpuFabricInfoV(d, &fab), NVML_SUCCESS);
    assert_int_equal(fab.state, NVML_GPU_FABRIC_STATE_NOT_SUPPORTED);
    assert_int_equal(fab.healthSummary, NVML_GPU_FABRIC_HEALTH_SUMMARY_NOT_SUPPORTED);
    assert_int_equal(fab.healthMask, 0);
    fv[0].nvmlReturn = NVML_SUCCESS;
    assert_int_equal(nv.nvmlDeviceGetFieldValues(d, 1, fv), NVML_SUCCESS);
    assert_int_equal(fv[0].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
}

static void detail_keys_are_checked(void **state)
{
    static const char *const bad[][2] = {
        {"\"addressing_mode\": \"numa\"", "addressing_mode: unknown value \"numa\""},
        {"\"fabric\": {\"cluster_uuid\": \"0123\"}", "cluster_uuid: expected 32 hex digits"},
        {"\"fabric\": {\"health_summary\": \"fine\"}", "health_summary: unknown value \"fine\""},
        {"\"fabric\": {\"health_mask\": -1}", "health_mask"},
        {"\"fabric\": {\"health\": 1}", "health"},
        {"\"sram_ecc\": {\"l3\": 1}", "l3"},
        {"\"remapped_rows\": {\"histogram\": {\"max\": -1}}", "max"},
        {"\"gpu_operation_mode\": {\"current\": \"turbo\"}", "current: unknown value \"turbo\""},
        {"\"pcie_atomics\": {\"outbound\": 128}", "outbound: 128 is out of range"},
        {"\"pcie_atomics\": {\"both\": 1}", "both"},
        {"\"protected_memory\": {\"total_mib\": 1, \"used_mib\": 2}", "used exceeds total"},
        {"\"pdi\": \"0xzz\"", "pdi: \"0xzz\" is not an integer"},
    };
    char json[1024], err[512];

    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct gs_sim_scenario *sc = NULL;
        snprintf(json, sizeof json,
                 "{\"gpus\": [{\"name\": \"G\", \"uuid\": \"GPU-1\", \"pci\": {\"bus\": 1, "
                 "\"device_id\": 1}, "
                 "\"memory\": {\"total_mib\": 1}, %s}]}",
                 bad[i][0]);
        assert_int_equal(gs_sim_scenario_parse(json, strlen(json), "t.json", &sc, err, sizeof err),
                         -1);
        assert_null(sc);
        if (!strstr(err, bad[i][1]))
            fail_msg("%s: %s", bad[i][0], err);
    }
}

/* ---- memory -------------------------------------------------------------------------------- */

static void memory_v2_checks_its_version(void **state)
{
    nvmlDevice_t d;
    nvmlMemory_v2_t m2 = {0};
    nvmlMemory_t m1;

    (void)state;
    use_bundled("h100x8-training.json", "100");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    d = dev(0);
    m2.version = 2; /* the bare number nvtop passes */
    assert_int_equal(nv.nvmlDeviceGetMemoryInfo_v2(d, &m2), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    m2.version = 0x02000028;
    assert_int_equal(nv.nvmlDeviceGetMemoryInfo_v2(d, &m2), NVML_SUCCESS);
    assert_int_equal(m2.total, 81559ull << 20);
    assert_int_equal(m2.reserved, 479ull << 20);
    assert_int_equal(m2.used, 61822ull << 20); /* the rank's memory after its ramp */
    assert_int_equal(m2.total, m2.reserved + m2.used + m2.free);
    assert_int_equal(nv.nvmlDeviceGetMemoryInfo(d, &m1), NVML_SUCCESS);
    assert_int_equal(m1.total, m2.total);
    assert_int_equal(m1.used, m2.reserved + m2.used); /* v1 counts reservations as used */
    assert_int_equal(m1.free, m2.free);
}

/* ---- processes ----------------------------------------------------------------------------- */

static void process_lists_follow_the_counting_protocol(void **state)
{
    nvmlDevice_t d;
    nvmlProcessInfo_v2_t p[4];
    unsigned n;

    (void)state;
    use_bundled("h100x8-training.json", "100");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    d = dev(3);
    n = 0;
    assert_int_equal(nv.nvmlDeviceGetComputeRunningProcesses_v3(d, &n, NULL),
                     NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(n, 1);
    n = 4;
    assert_int_equal(nv.nvmlDeviceGetComputeRunningProcesses_v3(d, &n, p), NVML_SUCCESS);
    assert_int_equal(n, 1);
    assert_int_equal(p[0].pid, 48214);
    assert_int_equal(p[0].usedGpuMemory, 61830ull << 20);
    assert_int_equal(p[0].gpuInstanceId, 0xFFFFFFFFu);
    assert_int_equal(p[0].computeInstanceId, 0xFFFFFFFFu);
    n = 0;
    assert_int_equal(nv.nvmlDeviceGetGraphicsRunningProcesses_v3(d, &n, NULL), NVML_SUCCESS);
    assert_int_equal(n, 0);
    assert_int_equal(nv.nvmlDeviceGetComputeRunningProcesses_v3(d, NULL, p),
                     NVML_ERROR_INVALID_ARGUMENT);
}

static void plain_process_list_writes_16_byte_entries(void **state)
{
    unsigned char buf[128];
    nvmlProcessInfo_v1_t e[2];
    unsigned n = 2;

    (void)state;
    use_bundled("rtx4090-idle-desktop.json", "5");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    memset(buf, 0xAB, sizeof buf);
    assert_int_equal(
        nv.nvmlDeviceGetGraphicsRunningProcesses(dev(0), &n, (nvmlProcessInfo_v1_t *)buf),
        NVML_SUCCESS);
    assert_int_equal(n, 2);
    memcpy(e, buf, sizeof e);
    assert_int_equal(e[0].pid, 1873);
    assert_int_equal(e[0].usedGpuMemory, 231ull << 20);
    assert_int_equal(e[1].pid, 2312);
    assert_int_equal(buf[32], 0xAB); /* nothing written past two 16-byte entries */
    n = 0;
    assert_int_equal(nv.nvmlDeviceGetComputeRunningProcesses(dev(0), &n, NULL), NVML_SUCCESS);
    assert_int_equal(n, 0);
}

static void unknown_memory_and_env_and_self_pids(void **state)
{
    nvmlProcessInfo_v2_t p[4];
    unsigned n = 4;
    char name[64];

    (void)state;
    setenv("SIM_TEST_PID", "4242", 1);
    use_one_gpu(NULL,
                "\"processes\": [{\"pid\": {\"env\": \"SIM_TEST_PID\"}, \"gpu\": 0,"
                " \"name\": \"trainer\", \"used_memory_mib\": \"unknown\"},"
                " {\"pid\": \"self\", \"gpu\": 0, \"used_memory_mib\": 12.5}]",
                "3");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    assert_int_equal(nv.nvmlDeviceGetComputeRunningProcesses_v3(dev(0), &n, p), NVML_SUCCESS);
    assert_int_equal(n, 2);
    assert_int_equal(p[0].pid, 4242);
    assert_int_equal(p[0].usedGpuMemory, NVML_VALUE_NOT_AVAILABLE);
    assert_int_equal(p[1].pid, (unsigned)getpid());
    assert_int_equal(p[1].usedGpuMemory, 12.5 * 1048576);
    assert_int_equal(nv.nvmlSystemGetProcessName(4242, name, sizeof name), NVML_SUCCESS);
    assert_string_equal(name, "trainer");
    assert_int_equal(nv.nvmlSystemGetProcessName(4242, name, 4), NVML_SUCCESS);
    assert_string_equal(name, "tra"); /* cropped, as NVML does */
    assert_int_equal(nv.nvmlSystemGetProcessName((unsigned)getpid(), name, sizeof name),
                     NVML_SUCCESS); /* from /proc */
    assert_true(strlen(name) > 0);
    nv.nvmlShutdown();
    unsetenv("SIM_TEST_PID");
    assert_int_equal(nv.nvmlInit_v2(), NVML_ERROR_UNKNOWN); /* no variable, no default */
}

static void process_utilization_reports_new_samples_once(void **state)
{
    nvmlProcessUtilizationSample_t s[4];
    unsigned n = 0;
    nvmlDevice_t d;

    (void)state;
    use_bundled("h100x8-training.json", "120");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    d = dev(0);
    assert_int_equal(nv.nvmlDeviceGetProcessUtilization(d, NULL, &n, 0),
                     NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(n, 1);
    n = 4;
    assert_int_equal(nv.nvmlDeviceGetProcessUtilization(d, s, &n, 0), NVML_SUCCESS);
    assert_int_equal(n, 1);
    assert_int_equal(s[0].pid, 48211);
    assert_in_range(s[0].smUtil, 70, 93);
    n = 4;
    assert_int_equal(nv.nvmlDeviceGetProcessUtilization(d, s, &n, s[0].timeStamp),
                     NVML_ERROR_NOT_FOUND);
}

static void detail_list_is_versioned_and_hopper_only(void **state)
{
    nvmlProcessDetail_v1_t arr[2];
    nvmlProcessDetailList_t l = {.version = nvmlProcessDetailList_v1, .mode = 0};

    (void)state;
    use_bundled("h100x8-training.json", "100");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    assert_int_equal(nv.nvmlDeviceGetRunningProcessDetailList(dev(1), &l),
                     NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(l.numProcArrayEntries, 1);
    l.procArray = arr;
    l.numProcArrayEntries = 2;
    assert_int_equal(nv.nvmlDeviceGetRunningProcessDetailList(dev(1), &l), NVML_SUCCESS);
    assert_int_equal(arr[0].pid, 48212);
    l.version = 1;
    assert_int_equal(nv.nvmlDeviceGetRunningProcessDetailList(dev(1), &l),
                     NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    nv.nvmlShutdown();
    use_bundled("a100x2-dpo-imbalance.json", "100");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    l.version = nvmlProcessDetailList_v1;
    assert_int_equal(nv.nvmlDeviceGetRunningProcessDetailList(dev(0), &l),
                     NVML_ERROR_NOT_SUPPORTED);
}

/* ---- time ---------------------------------------------------------------------------------- */

struct reading {
    nvmlUtilization_t util;
    unsigned power, temp, sm;
    unsigned long long energy;
    nvmlMemory_v2_t mem;
};

static void read_gpu(nvmlDevice_t d, struct reading *r)
{
    memset(r, 0, sizeof *r);
    r->mem.version = nvmlMemory_v2;
    assert_int_equal(nv.nvmlDeviceGetUtilizationRates(d, &r->util), NVML_SUCCESS);
    assert_int_equal(nv.nvmlDeviceGetPowerUsage(d, &r->power), NVML_SUCCESS);
    assert_int_equal(nv.nvmlDeviceGetTemperature(d, 0, &r->temp), NVML_SUCCESS);
    assert_int_equal(nv.nvmlDeviceGetClockInfo(d, NVML_CLOCK_SM, &r->sm), NVML_SUCCESS);
    assert_int_equal(nv.nvmlDeviceGetTotalEnergyConsumption(d, &r->energy), NVML_SUCCESS);
    assert_int_equal(nv.nvmlDeviceGetMemoryInfo_v2(d, &r->mem), NVML_SUCCESS);
}

static void fixed_time_gives_identical_readings(void **state)
{
    struct reading a, b, c;

    (void)state;
    use_bundled("a100x8-dataloader-bound.json", "1234.567");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    read_gpu(dev(4), &a);
    usleep(20000);
    read_gpu(dev(4), &b);
    nv.nvmlShutdown();
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS); /* a fresh load of the same scenario */
    read_gpu(dev(4), &c);
    assert_memory_equal(&a, &b, sizeof a);
    assert_memory_equal(&a, &c, sizeof a);
}

static void time_file_moves_the_clock_and_energy_only_grows(void **state)
{
    struct reading r;
    unsigned long long last = 0;
    unsigned temp0 = 0;

    (void)state;
    use_bundled("thermal-powercap.json", NULL);
    use_time_file(0);
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    for (int t = 0; t <= 900; t += 50) {
        set_time(t);
        read_gpu(dev(0), &r);
        if (t == 0)
            temp0 = r.temp;
        assert_true(r.energy >= last);
        last = r.energy;
    }
    assert_in_range(temp0, 44, 48);
    assert_in_range(r.temp, 85, 90);
    /* 900 s at roughly 185..350 W is 0.2..0.35 MJ on top of the base counter. */
    assert_in_range(last - 7654321098ull, 200000000ull, 350000000ull);
}

/* The mean of a training-step square wave over whole periods is duty*high + (1-duty)*low. */
static void square_wave_averages_to_its_duty(void **state)
{
    nvmlSample_t s[100];
    nvmlValueType_t vt;
    unsigned n = 100;
    double sum = 0;

    (void)state;
    use_one_gpu("\"sample_interval_ms\": 250, \"metrics\": {\"util_gpu_pct\": {\"square\":"
                " {\"period_s\": 2.5, \"duty\": 0.75, \"high\": 100, \"low\": 20}}}",
                NULL, "40");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    /* 100 samples of 0.25 s = 25 s = 10 whole periods. */
    assert_int_equal(nv.nvmlDeviceGetSamples(dev(0), NVML_GPU_UTILIZATION_SAMPLES, 0, &vt, &n, s),
                     NVML_SUCCESS);
    assert_int_equal(n, 100);
    assert_int_equal(vt, NVML_VALUE_TYPE_UNSIGNED_INT);
    for (unsigned i = 0; i < n; i++) {
        sum += s[i].sampleValue.uiVal;
        assert_in_range(s[i].sampleValue.uiVal, 20, 100);
        if (i > 0)
            assert_int_equal(s[i].timeStamp - s[i - 1].timeStamp, 250000);
    }
    assert_true(fabs(sum / n - 80.0) < 0.5);
}

static void samples_protocol(void **state)
{
    nvmlSample_t s[200];
    nvmlValueType_t vt;
    unsigned n = 0;
    nvmlDevice_t d;

    (void)state;
    use_bundled("h100x8-training.json", "60");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    d = dev(0);
    assert_int_equal(nv.nvmlDeviceGetSamples(d, NVML_TOTAL_POWER_SAMPLES, 0, &vt, &n, NULL),
                     NVML_SUCCESS);
    assert_int_equal(n, 100); /* the ring holds 100 samples at 1/6 s */
    n = 0;
    assert_int_equal(nv.nvmlDeviceGetSamples(d, NVML_TOTAL_POWER_SAMPLES, 0, &vt, &n, s),
                     NVML_ERROR_INVALID_ARGUMENT);
    n = 200;
    assert_int_equal(nv.nvmlDeviceGetSamples(d, NVML_TOTAL_POWER_SAMPLES, 0, &vt, &n, s),
                     NVML_SUCCESS);
    assert_int_equal(n, 100);
    assert_in_range(s[99].sampleValue.uiVal, 200000, 700000); /* mW */
    n = 200;
    assert_int_equal(
        nv.nvmlDeviceGetSamples(d, NVML_TOTAL_POWER_SAMPLES, s[97].timeStamp, &vt, &n, s),
        NVML_SUCCESS);
    assert_int_equal(n, 2);
    n = 200;
    assert_int_equal(
        nv.nvmlDeviceGetSamples(d, NVML_TOTAL_POWER_SAMPLES, s[1].timeStamp, &vt, &n, s),
        NVML_ERROR_NOT_FOUND);
}

/* ---- power, clocks, fields ------------------------------------------------------------------ */

static void throttle_events_set_reasons_and_counters(void **state)
{
    nvmlDevice_t d;
    unsigned long long r = 0, r2 = 0, sup = 0;
    nvmlFieldValue_t fv[13];
    static const unsigned ids[13] = {1, 2, 74, 76, 82, 83, 94, 185, 186, 269, 270, 271, 9999};
    unsigned clk;

    (void)state;
    use_bundled("thermal-powercap.json", "500");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    d = dev(0);
    assert_int_equal(nv.nvmlDeviceGetCurrentClocksEventReasons(d, &r), NVML_SUCCESS);
    assert_int_equal(r, 0x4 | 0x8 | 0x20 | 0x40);
    assert_int_equal(nv.nvmlDeviceGetCurrentClocksThrottleReasons(d, &r2), NVML_SUCCESS);
    assert_int_equal(r, r2);
    assert_int_equal(nv.nvmlDeviceGetSupportedClocksEventReasons(d, &sup), NVML_SUCCESS);
    assert_int_equal(sup, 0x1FF);
    assert_int_equal(nv.nvmlDeviceGetClockInfo(d, NVML_CLOCK_SM, &clk), NVML_SUCCESS);
    assert_int_equal(clk, 1005);
    memset(fv, 0, sizeof fv);
    for (int i = 0; i < 13; i++)
        fv[i].fieldId = ids[i];
    assert_int_equal(nv.nvmlDeviceGetFieldValues(d, 13, fv), NVML_SUCCESS);
    assert_int_equal(fv[0].nvmlReturn, NVML_SUCCESS); /* ECC current */
    assert_int_equal(fv[0].value.uiVal, 1);
    assert_int_equal(fv[2].nvmlReturn, NVML_SUCCESS);
    assert_int_equal(fv[2].value.ullVal, 455000000000ull); /* power cap on since 45 s, in ns */
    assert_int_equal(fv[3].value.ullVal, 0);               /* no sync boost */
    assert_int_equal(fv[4].nvmlReturn, NVML_ERROR_NOT_SUPPORTED); /* L40S: no memory temp */
    assert_int_equal(fv[5].nvmlReturn, NVML_SUCCESS);
    assert_int_equal(fv[5].valueType, NVML_VALUE_TYPE_UNSIGNED_LONG_LONG);
    assert_int_equal(fv[7].nvmlReturn, NVML_SUCCESS);
    assert_in_range(fv[7].value.uiVal, 200000, 225000);    /* clocks halved since 480 s */
    assert_int_equal(fv[9].value.ullVal, 80000000000ull);  /* SW thermal since 420 s */
    assert_int_equal(fv[10].value.ullVal, 20000000000ull); /* HW thermal since 480 s */
    assert_int_equal(fv[11].value.ullVal, 0);
    assert_int_equal(fv[12].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
    assert_true(fv[12].timestamp > 1600000000000000ll); /* unix microseconds */
}

static void pcie_throughput_blocks_like_the_driver(void **state)
{
    unsigned v;
    double t0;

    (void)state;
    use_bundled("h100x8-training.json", "50");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    t0 = now_ms();
    assert_int_equal(nv.nvmlDeviceGetPcieThroughput(dev(0), NVML_PCIE_UTIL_RX_BYTES, &v),
                     NVML_SUCCESS);
    assert_true(now_ms() - t0 >= 19.0);
    assert_true(v > 0);
    nv.nvmlShutdown();
    use_one_gpu(NULL, "\"pcie_throughput_delay_ms\": 0", "5");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    t0 = now_ms();
    assert_int_equal(nv.nvmlDeviceGetPcieThroughput(dev(0), NVML_PCIE_UTIL_TX_BYTES, &v),
                     NVML_SUCCESS);
    assert_true(now_ms() - t0 < 15.0);
}

static void handles_by_pci_bus_id_and_uuid(void **state)
{
    nvmlDevice_t d = NULL, d0;
    nvmlPciInfo_t pci;

    (void)state;
    use_bundled("h100x8-training.json", "5");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    d0 = dev(0);
    assert_int_equal(nv.nvmlDeviceGetHandleByPciBusId_v2("00000000:18:00.0", &d), NVML_SUCCESS);
    assert_ptr_equal(d, d0);
    assert_int_equal(nv.nvmlDeviceGetHandleByPciBusId_v2("0000:18:00.0", &d), NVML_SUCCESS);
    assert_ptr_equal(d, d0);
    assert_int_equal(nv.nvmlDeviceGetHandleByPciBusId_v2("18:00.0", &d), NVML_SUCCESS);
    assert_ptr_equal(d, d0);
    assert_int_equal(nv.nvmlDeviceGetHandleByPciBusId_v2("0000:ff:00.0", &d), NVML_ERROR_NOT_FOUND);
    assert_int_equal(nv.nvmlDeviceGetHandleByPciBusId_v2("garbage", &d),
                     NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nv.nvmlDeviceGetHandleByUUID("GPU-0f83d2a7-9e14-c6b5-2d71-84a3f06b9c22", &d),
                     NVML_SUCCESS);
    assert_ptr_equal(d, dev(1));
    assert_int_equal(nv.nvmlDeviceGetHandleByUUID("GPU-nope", &d), NVML_ERROR_NOT_FOUND);
    assert_int_equal(nv.nvmlDeviceGetPciInfo_v3(d0, &pci), NVML_SUCCESS);
    assert_string_equal(pci.busId, "00000000:18:00.0");
    assert_string_equal(pci.busIdLegacy, "0000:18:00.0");
    assert_int_equal(pci.pciDeviceId, 0x233010DE);
    assert_int_equal(pci.pciSubSystemId, 0x16C110DE);
}

/* ---- a lost GPU ---------------------------------------------------------------------------- */

static void gpu_is_lost_after_its_event(void **state)
{
    nvmlDevice_t d2, d1;
    char name[96];
    unsigned n = 8, u;
    nvmlProcessInfo_v2_t p[8];

    (void)state;
    use_bundled("gpu-lost.json", NULL);
    use_time_file(29.9);
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    d2 = dev(2);
    d1 = dev(1);
    assert_int_equal(nv.nvmlDeviceGetName(d2, name, sizeof name), NVML_SUCCESS);
    set_time(30.0);
    assert_int_equal(nv.nvmlDeviceGetName(d2, name, sizeof name), NVML_ERROR_GPU_IS_LOST);
    assert_int_equal(nv.nvmlDeviceGetPowerUsage(d2, &u), NVML_ERROR_GPU_IS_LOST);
    assert_int_equal(nv.nvmlDeviceGetComputeRunningProcesses_v3(d2, &n, p), NVML_ERROR_GPU_IS_LOST);
    assert_int_equal(nv.nvmlDeviceGetHandleByIndex_v2(2, &d2), NVML_ERROR_GPU_IS_LOST);
    assert_int_equal(nv.nvmlDeviceGetCount_v2(&n), NVML_SUCCESS);
    assert_int_equal(n, 4); /* still counted */
    assert_int_equal(nv.nvmlDeviceGetName(d1, name, sizeof name), NVML_SUCCESS);
    /* A re-init does not bring it back: virtual time keeps running from the first init. */
    nv.nvmlShutdown();
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    assert_int_equal(nv.nvmlDeviceGetHandleByIndex_v2(2, &d2), NVML_ERROR_GPU_IS_LOST);
}

static void events_are_delivered_once_when_due(void **state)
{
    nvmlEventSet_t set;
    nvmlEventData_t ev;
    nvmlDevice_t d;
    double t0;

    (void)state;
    use_bundled("gpu-lost.json", NULL);
    use_time_file(10);
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    d = dev(2);
    assert_int_equal(nv.nvmlEventSetCreate(&set), NVML_SUCCESS);
    assert_int_equal(nv.nvmlDeviceRegisterEvents(d, 1ull << 40, set), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nv.nvmlDeviceRegisterEvents(d, nvmlEventTypeXidCriticalError, set),
                     NVML_SUCCESS);
    t0 = now_ms();
    assert_int_equal(nv.nvmlEventSetWait_v2(set, &ev, 0), NVML_ERROR_TIMEOUT);
    assert_true(now_ms() - t0 < 5.0); /* a zero timeout never sleeps */
    set_time(30.5);
    assert_int_equal(nv.nvmlEventSetWait_v2(set, &ev, 0), NVML_SUCCESS);
    assert_ptr_equal(ev.device, d);
    assert_int_equal(ev.eventType, nvmlEventTypeXidCriticalError);
    assert_int_equal(ev.eventData, 79);
    assert_int_equal(ev.gpuInstanceId, 0xFFFFFFFFu);
    t0 = now_ms();
    assert_int_equal(nv.nvmlEventSetWait_v2(set, &ev, 30), NVML_ERROR_TIMEOUT);
    assert_true(now_ms() - t0 >= 25.0);
    assert_int_equal(nv.nvmlEventSetFree(set), NVML_SUCCESS);
    assert_int_equal(nv.nvmlEventSetFree(set), NVML_ERROR_INVALID_ARGUMENT);
}

/* ---- health -------------------------------------------------------------------------------- */

static void ecc_events_raise_counters_and_events(void **state)
{
    nvmlEventSet_t set;
    nvmlEventData_t ev;
    nvmlDevice_t d;
    unsigned long long n = 0;
    unsigned long long addr[4];
    unsigned cnt, corr, unc, pend, fail;

    (void)state;
    use_one_gpu("\"ecc\": {\"locations\": [\"device_memory\", \"sram\"],"
                " \"aggregate_corrected\": {\"device_memory\": 5}},"
                " \"retired_pages\": {\"single_bit_ecc\": [\"0x1f000\", 4096]},"
                " \"remapped_rows\": {\"correctable\": 2, \"pending\": true}",
                "\"events\": [{\"at_s\": 20, \"type\": \"ecc_error\", \"gpu\": 0,"
                " \"error\": \"corrected\", \"count\": 3}]",
                NULL);
    use_time_file(10);
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    d = dev(0);
    assert_int_equal(nv.nvmlEventSetCreate(&set), NVML_SUCCESS);
    assert_int_equal(nv.nvmlDeviceRegisterEvents(d, nvmlEventTypeSingleBitEccError, set),
                     NVML_SUCCESS);
    assert_int_equal(
        nv.nvmlDeviceGetTotalEccErrors(d, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_AGGREGATE_ECC, &n),
        NVML_SUCCESS);
    assert_int_equal(n, 5);
    set_time(21);
    assert_int_equal(
        nv.nvmlDeviceGetTotalEccErrors(d, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC, &n),
        NVML_SUCCESS);
    assert_int_equal(n, 3);
    assert_int_equal(nv.nvmlDeviceGetMemoryErrorCounter(d, NVML_MEMORY_ERROR_TYPE_CORRECTED,
                                                        NVML_AGGREGATE_ECC,
                                                        NVML_MEMORY_LOCATION_DEVICE_MEMORY, &n),
                     NVML_SUCCESS);
    assert_int_equal(n, 8);
    assert_int_equal(nv.nvmlDeviceGetMemoryErrorCounter(d, NVML_MEMORY_ERROR_TYPE_CORRECTED,
                                                        NVML_AGGREGATE_ECC,
                                                        NVML_MEMORY_LOCATION_L1_CACHE, &n),
                     NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nv.nvmlEventSetWait_v2(set, &ev, 0), NVML_SUCCESS);
    assert_int_equal(ev.eventType, nvmlEventTypeSingleBitEccError);
    cnt = 0;
    assert_int_equal(nv.nvmlDeviceGetRetiredPages(d, 0, &cnt, NULL), NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(cnt, 2);
    cnt = 4;
    assert_int_equal(nv.nvmlDeviceGetRetiredPages(d, 0, &cnt, addr), NVML_SUCCESS);
    assert_int_equal(addr[0], 0x1f000);
    assert_int_equal(addr[1], 4096);
    cnt = 0;
    assert_int_equal(nv.nvmlDeviceGetRetiredPages(d, 1, &cnt, NULL), NVML_SUCCESS);
    assert_int_equal(cnt, 0);
    assert_int_equal(nv.nvmlDeviceGetRemappedRows(d, &corr, &unc, &pend, &fail), NVML_SUCCESS);
    assert_int_equal(corr, 2);
    assert_int_equal(pend, 1);
}

static void processes_start_and_exit_with_events(void **state)
{
    nvmlProcessInfo_v2_t p[4];
    unsigned n;

    (void)state;
    use_one_gpu(NULL,
                "\"processes\": [{\"id\": \"a\", \"pid\": 100, \"gpu\": 0},"
                " {\"id\": \"b\", \"pid\": 200, \"gpu\": 0, \"type\": \"both\"}],"
                " \"events\": [{\"at_s\": 10, \"type\": \"process_start\", \"process\": \"b\"},"
                " {\"at_s\": 20, \"type\": \"process_exit\", \"process\": \"a\"}]",
                NULL);
    use_time_file(5);
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    n = 4;
    assert_int_equal(nv.nvmlDeviceGetComputeRunningProcesses_v3(dev(0), &n, p), NVML_SUCCESS);
    assert_int_equal(n, 1);
    assert_int_equal(p[0].pid, 100);
    set_time(15);
    n = 4;
    assert_int_equal(nv.nvmlDeviceGetComputeRunningProcesses_v3(dev(0), &n, p), NVML_SUCCESS);
    assert_int_equal(n, 2);
    n = 4;
    assert_int_equal(nv.nvmlDeviceGetGraphicsRunningProcesses_v3(dev(0), &n, p), NVML_SUCCESS);
    assert_int_equal(n, 1); /* "both" is in the graphics list too */
    set_time(20);
    n = 4;
    assert_int_equal(nv.nvmlDeviceGetComputeRunningProcesses_v3(dev(0), &n, p), NVML_SUCCESS);
    assert_int_equal(n, 1);
    assert_int_equal(p[0].pid, 200);
}

static void inaccessible_gpu_and_legacy_enumeration(void **state)
{
    static const char json[] =
        "{\"templates\": {\"t\": {\"name\": \"NVIDIA T\", \"pci\": {\"device_id\": 1},"
        " \"memory\": {\"total_mib\": 10}}},"
        " \"gpus\": [{\"template\": \"t\", \"uuid\": \"GPU-0\", \"pci\": {\"bus\": 1},"
        " \"accessible\": false},"
        " {\"template\": \"t\", \"uuid\": \"GPU-1\", \"pci\": {\"bus\": 2}}]}";
    nvmlDevice_t d;
    unsigned n;
    char uuid[96];

    (void)state;
    use_inline(json, "1");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    assert_int_equal(nv.nvmlDeviceGetCount_v2(&n), NVML_SUCCESS);
    assert_int_equal(n, 2);
    assert_int_equal(nv.nvmlDeviceGetHandleByIndex_v2(0, &d), NVML_ERROR_NO_PERMISSION);
    /* The legacy calls skip what the caller may not open, so their index 0 is GPU 1. */
    assert_int_equal(nv.nvmlDeviceGetCount(&n), NVML_SUCCESS);
    assert_int_equal(n, 1);
    assert_int_equal(nv.nvmlDeviceGetHandleByIndex(0, &d), NVML_SUCCESS);
    assert_int_equal(nv.nvmlDeviceGetUUID(d, uuid, sizeof uuid), NVML_SUCCESS);
    assert_string_equal(uuid, "GPU-1");
}

static void idle_gpu_reports_the_idle_reason(void **state)
{
    unsigned long long r = 0;

    (void)state;
    use_one_gpu(NULL, NULL, "50");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    assert_int_equal(nv.nvmlDeviceGetCurrentClocksEventReasons(dev(0), &r), NVML_SUCCESS);
    assert_int_equal(r, nvmlClocksEventReasonGpuIdle);
    nv.nvmlShutdown();
    use_bundled("h100x8-training.json", "50");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    assert_int_equal(nv.nvmlDeviceGetCurrentClocksEventReasons(dev(0), &r), NVML_SUCCESS);
    assert_int_equal(r, 0);
}

/* ---- MIG ----------------------------------------------------------------------------------- */

static void mig_devices_have_their_own_handles(void **state)
{
    static const unsigned gi[4] = {2, 3, 9, 10};
    nvmlDevice_t gpu, mig[7], parent;
    unsigned max = 0, is_mig = 9, id, found = 0, n;
    char buf[96];
    nvmlUtilization_t util;
    nvmlMemory_v2_t m = {.version = nvmlMemory_v2};
    nvmlProcessInfo_v2_t p[8];

    (void)state;
    use_bundled("h100-mig.json", "100");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    gpu = dev(0);
    assert_int_equal(nv.nvmlDeviceGetUtilizationRates(gpu, &util), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nv.nvmlDeviceGetMaxMigDeviceCount(gpu, &max), NVML_SUCCESS);
    assert_int_equal(max, 7);
    for (unsigned i = 0; i < max; i++) {
        nvmlReturn_t rc = nv.nvmlDeviceGetMigDeviceHandleByIndex(gpu, i, &mig[found]);
        if (rc == NVML_ERROR_NOT_FOUND)
            continue;
        assert_int_equal(rc, NVML_SUCCESS);
        assert_ptr_not_equal(mig[found], gpu);
        assert_int_equal(nv.nvmlDeviceIsMigDeviceHandle(mig[found], &is_mig), NVML_SUCCESS);
        assert_int_equal(is_mig, 1);
        assert_int_equal(nv.nvmlDeviceGetGpuInstanceId(mig[found], &id), NVML_SUCCESS);
        assert_int_equal(id, gi[found]);
        assert_int_equal(nv.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig[found], &parent),
                         NVML_SUCCESS);
        assert_ptr_equal(parent, gpu);
        found++;
    }
    assert_int_equal(found, 4);
    assert_int_equal(nv.nvmlDeviceIsMigDeviceHandle(gpu, &is_mig), NVML_SUCCESS);
    assert_int_equal(is_mig, 0);
    assert_int_equal(nv.nvmlDeviceGetGpuInstanceId(gpu, &id), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nv.nvmlDeviceGetName(mig[0], buf, sizeof buf), NVML_SUCCESS);
    assert_string_equal(buf, "NVIDIA H100 80GB HBM3 MIG 3g.40gb");
    assert_int_equal(nv.nvmlDeviceGetUUID(mig[0], buf, sizeof buf), NVML_SUCCESS);
    assert_true(strncmp(buf, "MIG-", 4) == 0);
    assert_int_equal(nv.nvmlDeviceGetHandleByUUID(buf, &parent), NVML_SUCCESS);
    assert_ptr_equal(parent, mig[0]);
    assert_int_equal(nv.nvmlDeviceGetMemoryInfo_v2(mig[0], &m), NVML_SUCCESS);
    assert_int_equal(m.total, 40448ull << 20);
    assert_int_equal(m.used, 11091ull << 20);
    n = 8;
    assert_int_equal(nv.nvmlDeviceGetComputeRunningProcesses_v3(mig[0], &n, p), NVML_SUCCESS);
    assert_int_equal(n, 3);
    assert_int_equal(p[2].pid, 21198);
    assert_int_equal(p[2].gpuInstanceId, 2);
    assert_int_equal(p[2].computeInstanceId, 0);
    n = 8;
    assert_int_equal(nv.nvmlDeviceGetComputeRunningProcesses_v3(gpu, &n, p), NVML_SUCCESS);
    assert_int_equal(n, 5); /* the full GPU lists every instance's processes */
    assert_int_equal(nv.nvmlDeviceGetPowerUsage(mig[0], &id), NVML_ERROR_NOT_SUPPORTED);
}

/* nvmlDeviceGetGpuInstanceById + nvmlGpuInstanceGetInfo: the scenario's placement and profile
 * id to a privileged caller, NO_PERMISSION otherwise; bad handles and ids are refused; a
 * placement past the 8th memory slice is a parse error with its place. */
static void gpu_instance_info(void **state)
{
    static const char past[] =
        "{\"gpus\": [{\"name\": \"G\", \"uuid\": \"GPU-g\", \"memory\": {\"total_mib\": 1000},"
        "\"architecture\": \"hopper\", \"pci\": {\"bus\": 1, \"device_id\": \"0x2330\"},"
        "\"mig\": {\"mode\": \"enabled\", \"instances\": [{\"gi\": 1, \"profile\": \"3g.40gb\","
        "\"uuid\": \"MIG-x\", \"memory_total_mib\": 900, \"placement\": {\"start\": 6, "
        "\"size\": 4}}]}}]}";
    struct gs_sim_scenario *sc = NULL;
    nvmlDevice_t gpu;
    nvmlGpuInstance_t gi = NULL;
    nvmlGpuInstanceInfo_t info;
    char err[512];

    (void)state;
    use_bundled("h100-mig.json", "100");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    gpu = dev(0);
    assert_int_equal(nv.nvmlDeviceGetGpuInstanceById(gpu, 3, &gi), NVML_SUCCESS);
    memset(&info, 0, sizeof info);
    assert_int_equal(nv.nvmlGpuInstanceGetInfo(gi, &info), NVML_SUCCESS);
    assert_ptr_equal(info.device, gpu);
    assert_int_equal(info.id, 3);
    assert_int_equal(info.profileId, 14);
    assert_int_equal(info.placement.start, 2);
    assert_int_equal(info.placement.size, 2);
    assert_int_equal(nv.nvmlDeviceGetGpuInstanceById(gpu, 5, &gi), NVML_ERROR_NOT_FOUND);
    assert_int_equal(nv.nvmlGpuInstanceGetInfo((nvmlGpuInstance_t)(void *)&info, &info),
                     NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nv.nvmlShutdown(), NVML_SUCCESS);
    use_one_gpu("\"mig\": {\"mode\": \"enabled\", \"instances\": [{\"gi\": 1, \"profile\": "
                "\"7g.80gb\", \"uuid\": \"MIG-x\", \"memory_total_mib\": 900, "
                "\"placement\": {\"start\": 0, \"size\": 8}}]}",
                "\"privileged\": false", NULL);
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    assert_int_equal(nv.nvmlDeviceGetGpuInstanceById(dev(0), 1, &gi), NVML_ERROR_NO_PERMISSION);
    assert_int_equal(nv.nvmlShutdown(), NVML_SUCCESS);
    assert_int_equal(gs_sim_scenario_parse(past, strlen(past), "p.json", &sc, err, sizeof err), -1);
    assert_non_null(strstr(err, "placement: slices 6..9 past the 8th"));
    assert_non_null(strstr(err, "p.json:1:"));
}

/* "topology": CPU and NUMA node lists as ranges and NVML's level names, refused with the
 * place when malformed; the calls answer what it says, NOT_SUPPORTED without it. */
static void topology_is_served_and_checked(void **state)
{
    static const char *const bad[][2] = {
        {"{\"cpu_affinity\": \"0-\"}", "cpu_affinity: expected CPU ranges"},
        {"{\"cpu_affinity\": \"5-2\"}", "cpu_affinity: expected CPU ranges"},
        {"{\"cpu_affinity\": \"0,,1\"}", "cpu_affinity: expected CPU ranges"},
        {"{\"numa_affinity\": \"x\"}", "numa_affinity: expected NUMA node ranges"},
        {"{\"common_ancestor\": [\"pcie\"]}", "common_ancestor"},
        {"{\"cpus\": \"0\"}", "cpus"},
    };
    const char *head = "{\"gpus\": [{\"name\": \"G\", \"uuid\": \"GPU-g\", \"memory\": "
                       "{\"total_mib\": 1000}, \"pci\": {\"bus\": 1, \"device_id\": \"0x2330\"}, "
                       "\"topology\": ";
    struct gs_sim_scenario *sc = NULL;
    unsigned long set[2] = {0, 0};
    unsigned node = 9;
    char json[512], err[512];

    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(json, sizeof json, "%s%s}]}", head, bad[i][0]);
        assert_int_equal(gs_sim_scenario_parse(json, strlen(json), "t.json", &sc, err, sizeof err),
                         -1);
        assert_non_null(strstr(err, "t.json:1:"));
        assert_non_null(strstr(err, bad[i][1]));
    }
    use_one_gpu("\"topology\": {\"cpu_affinity\": \"0-2,64\", \"numa_affinity\": \"1\", "
                "\"gpu_numa_id\": 3}",
                NULL, NULL);
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    assert_int_equal(nv.nvmlDeviceGetCpuAffinity(dev(0), 2, set), NVML_SUCCESS);
    assert_true(set[0] == 0x7 && set[1] == 1);
    assert_int_equal(nv.nvmlDeviceGetCpuAffinity(dev(0), 1, set), NVML_SUCCESS); /* cut */
    assert_true(set[0] == 0x7);
    assert_int_equal(nv.nvmlDeviceGetMemoryAffinity(dev(0), 1, set, 0), NVML_SUCCESS);
    assert_true(set[0] == 0x2);
    assert_int_equal(nv.nvmlDeviceGetMemoryAffinity(dev(0), 1, set, 7),
                     NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nv.nvmlDeviceGetNumaNodeId(dev(0), &node), NVML_SUCCESS);
    assert_int_equal(node, 3);
    assert_int_equal(nv.nvmlShutdown(), NVML_SUCCESS);
    use_one_gpu(NULL, NULL, NULL);
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    assert_int_equal(nv.nvmlDeviceGetCpuAffinity(dev(0), 2, set), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nv.nvmlDeviceGetNumaNodeId(dev(0), &node), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nv.nvmlShutdown(), NVML_SUCCESS);
}

/* What nvidia-smi -q prints of a MIG device beyond its memory: the instance's reserved memory
 * (MemoryInfo_v2 on its handle, out of what is free) and its volatile uncorrectable SRAM ECC
 * count, the one per-instance memory error counter NVML documents (other counters on the MIG
 * handle: NOT_SUPPORTED); a reservation larger than the instance is refused. */
static void mig_reserved_and_sram_ecc(void **state)
{
    static const char big[] =
        "{\"gpus\": [{\"name\": \"G\", \"uuid\": \"GPU-g\", \"memory\": {\"total_mib\": 1000},"
        "\"architecture\": \"hopper\", \"pci\": {\"bus\": 1, \"device_id\": \"0x2330\"},"
        "\"mig\": {\"mode\": \"enabled\", \"instances\": [{\"gi\": 1, \"profile\": \"3g.40gb\","
        "\"uuid\": \"MIG-x\", \"memory_total_mib\": 900, \"memory_reserved_mib\": 901}]}}]}";
    struct gs_sim_scenario *sc = NULL;
    nvmlDevice_t mig = NULL;
    nvmlMemory_v2_t m;
    unsigned long long n = 9;
    char err[512];

    (void)state;
    use_one_gpu("\"ecc\": {\"locations\": [\"device_memory\", \"sram\", \"l2_cache\"]},"
                " \"mig\": {\"mode\": \"enabled\", \"instances\": [{\"gi\": 1, \"profile\": "
                "\"3g.40gb\", \"uuid\": \"MIG-x\", \"memory_total_mib\": 400, "
                "\"memory_reserved_mib\": 20, \"ecc_sram_uncorrected_volatile\": 5, "
                "\"metrics\": {\"mem_used_mib\": 100}}]}",
                NULL, NULL);
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    assert_int_equal(nv.nvmlDeviceGetMigDeviceHandleByIndex(dev(0), 0, &mig), NVML_SUCCESS);
    memset(&m, 0, sizeof m);
    m.version = nvmlMemory_v2;
    assert_int_equal(nv.nvmlDeviceGetMemoryInfo_v2(mig, &m), NVML_SUCCESS);
    assert_int_equal(m.total, 400ull << 20);
    assert_int_equal(m.reserved, 20ull << 20);
    assert_int_equal(m.used, 100ull << 20);
    assert_int_equal(m.free, 280ull << 20);
    assert_int_equal(nv.nvmlDeviceGetMemoryErrorCounter(mig, NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                                        NVML_VOLATILE_ECC,
                                                        NVML_MEMORY_LOCATION_SRAM, &n),
                     NVML_SUCCESS);
    assert_int_equal(n, 5);
    assert_int_equal(nv.nvmlDeviceGetMemoryErrorCounter(mig, NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                                        NVML_VOLATILE_ECC,
                                                        NVML_MEMORY_LOCATION_L2_CACHE, &n),
                     NVML_SUCCESS);
    assert_int_equal(n, 0);
    assert_int_equal(nv.nvmlDeviceGetMemoryErrorCounter(mig, NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                                        NVML_VOLATILE_ECC,
                                                        NVML_MEMORY_LOCATION_DRAM, &n),
                     NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nv.nvmlDeviceGetMemoryErrorCounter(mig, NVML_MEMORY_ERROR_TYPE_CORRECTED,
                                                        NVML_VOLATILE_ECC,
                                                        NVML_MEMORY_LOCATION_SRAM, &n),
                     NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nv.nvmlDeviceGetMemoryErrorCounter(mig, NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                                        NVML_AGGREGATE_ECC,
                                                        NVML_MEMORY_LOCATION_SRAM, &n),
                     NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nv.nvmlShutdown(), NVML_SUCCESS);
    assert_int_equal(gs_sim_scenario_parse(big, strlen(big), "r.json", &sc, err, sizeof err), -1);
    assert_non_null(strstr(err, "memory_reserved exceeds memory_total"));
}

static void mig_enable_event_makes_instances_appear(void **state)
{
    nvmlDevice_t gpu, mig;
    unsigned max, cur, pend;
    nvmlUtilization_t util;

    (void)state;
    use_one_gpu("\"mig\": {\"mode\": \"disabled\", \"instances\": [{\"gi\": 1, \"profile\": "
                "\"7g.80gb\", \"uuid\": \"MIG-x\", \"memory_total_mib\": 900}]}",
                "\"events\": [{\"at_s\": 10, \"type\": \"mig_enable\", \"gpu\": 0}]", NULL);
    use_time_file(5);
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    gpu = dev(0);
    assert_int_equal(nv.nvmlDeviceGetMaxMigDeviceCount(gpu, &max), NVML_SUCCESS);
    assert_int_equal(max, 0);
    assert_int_equal(nv.nvmlDeviceGetUtilizationRates(gpu, &util), NVML_SUCCESS);
    set_time(10);
    assert_int_equal(nv.nvmlDeviceGetMigMode(gpu, &cur, &pend), NVML_SUCCESS);
    assert_int_equal(cur, NVML_DEVICE_MIG_ENABLE);
    assert_int_equal(nv.nvmlDeviceGetMigDeviceHandleByIndex(gpu, 0, &mig), NVML_SUCCESS);
    assert_int_equal(nv.nvmlDeviceGetMigDeviceHandleByIndex(gpu, 1, &mig), NVML_ERROR_NOT_FOUND);
    assert_int_equal(nv.nvmlDeviceGetUtilizationRates(gpu, &util), NVML_ERROR_NOT_SUPPORTED);
}

/* ---- fields nvidia-smi's query adds -------------------------------------------------------- */

/* Encoder sessions and the JPEG/OFA engines: NOT_SUPPORTED unless the scenario describes them;
 * JPEG/OFA also while MIG is on (like the codecs), encoder sessions not. */
static void video_engines(void **state)
{
    unsigned n = 9, fps = 9, lat = 9, u = 9, p = 0;
    nvmlDevice_t d;

    (void)state;
    use_one_gpu("\"metrics\": {\"enc_sessions\": 2, \"enc_fps\": 184, "
                "\"enc_latency_us\": 62844, \"jpg_util_pct\": 7}",
                NULL, "10");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    d = dev(0);
    assert_int_equal(nv.nvmlDeviceGetEncoderStats(d, &n, &fps, &lat), NVML_SUCCESS);
    assert_int_equal(n, 2);
    assert_int_equal(fps, 184);
    assert_int_equal(lat, 62844);
    assert_int_equal(nv.nvmlDeviceGetEncoderStats(d, NULL, &fps, &lat),
                     NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nv.nvmlDeviceGetJpgUtilization(d, &u, &p), NVML_SUCCESS);
    assert_int_equal(u, 7);
    assert_int_equal(p, 167000);
    assert_int_equal(nv.nvmlDeviceGetJpgUtilization(d, &u, NULL), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nv.nvmlDeviceGetOfaUtilization(d, &u, &p), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nv.nvmlShutdown(), NVML_SUCCESS);

    use_one_gpu(NULL, NULL, "10");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    d = dev(0);
    assert_int_equal(nv.nvmlDeviceGetEncoderStats(d, &n, &fps, &lat), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nv.nvmlDeviceGetJpgUtilization(d, &u, &p), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nv.nvmlShutdown(), NVML_SUCCESS);

    use_one_gpu("\"metrics\": {\"enc_fps\": 30, \"jpg_util_pct\": 7, \"ofa_util_pct\": 3}, "
                "\"mig\": {\"mode\": \"enabled\"}",
                NULL, "10");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    d = dev(0);
    assert_int_equal(nv.nvmlDeviceGetEncoderStats(d, &n, &fps, &lat), NVML_SUCCESS);
    assert_int_equal(n, 0);
    assert_int_equal(fps, 30);
    assert_int_equal(lat, 0);
    assert_int_equal(nv.nvmlDeviceGetJpgUtilization(d, &u, &p), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nv.nvmlDeviceGetOfaUtilization(d, &u, &p), NVML_ERROR_NOT_SUPPORTED);
}

/* Inforom: versions of the objects the scenario names, NOT_SUPPORTED for the others and for a
 * board without an inforom; a corrupted one fails validation. */
static void inforom_versions(void **state)
{
    char buf[NVML_DEVICE_INFOROM_VERSION_BUFFER_SIZE];
    nvmlDevice_t d;

    (void)state;
    use_one_gpu("\"inforom\": {\"image\": \"G520.0200.00.05\", \"oem\": \"2.1\", "
                "\"ecc\": \"7.16\"}",
                NULL, "10");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    d = dev(0);
    assert_int_equal(nv.nvmlDeviceGetInforomImageVersion(d, buf, sizeof buf), NVML_SUCCESS);
    assert_string_equal(buf, "G520.0200.00.05");
    assert_int_equal(nv.nvmlDeviceGetInforomImageVersion(d, buf, 8), NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(nv.nvmlDeviceGetInforomVersion(d, NVML_INFOROM_OEM, buf, sizeof buf),
                     NVML_SUCCESS);
    assert_string_equal(buf, "2.1");
    assert_int_equal(nv.nvmlDeviceGetInforomVersion(d, NVML_INFOROM_ECC, buf, sizeof buf),
                     NVML_SUCCESS);
    assert_string_equal(buf, "7.16");
    assert_int_equal(nv.nvmlDeviceGetInforomVersion(d, NVML_INFOROM_POWER, buf, sizeof buf),
                     NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nv.nvmlDeviceGetInforomVersion(d, 3, buf, sizeof buf),
                     NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nv.nvmlDeviceValidateInforom(d), NVML_SUCCESS);
    assert_int_equal(nv.nvmlShutdown(), NVML_SUCCESS);

    use_one_gpu("\"inforom\": {\"image\": \"G001.0000.02.04\", \"valid\": false}", NULL, "10");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    assert_int_equal(nv.nvmlDeviceValidateInforom(dev(0)), NVML_ERROR_CORRUPTED_INFOROM);
    assert_int_equal(nv.nvmlShutdown(), NVML_SUCCESS);

    use_one_gpu(NULL, NULL, "10");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    d = dev(0);
    assert_int_equal(nv.nvmlDeviceGetInforomImageVersion(d, buf, sizeof buf),
                     NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nv.nvmlDeviceValidateInforom(d), NVML_ERROR_NOT_SUPPORTED);
}

/* Display, accounting and GSP firmware modes: what the scenario says, NOT_SUPPORTED otherwise. */
static void board_modes(void **state)
{
    nvmlEnableState_t e = 9;
    unsigned u = 9, v = 9;
    nvmlDevice_t d;

    (void)state;
    use_one_gpu("\"display\": {\"attached\": true, \"active\": false}, "
                "\"accounting\": {\"buffer_size\": 4000}, \"gsp_firmware\": {\"enabled\": false}",
                NULL, "10");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    d = dev(0);
    assert_int_equal(nv.nvmlDeviceGetDisplayMode(d, &e), NVML_SUCCESS);
    assert_int_equal(e, NVML_FEATURE_ENABLED);
    assert_int_equal(nv.nvmlDeviceGetDisplayActive(d, &e), NVML_SUCCESS);
    assert_int_equal(e, NVML_FEATURE_DISABLED);
    assert_int_equal(nv.nvmlDeviceGetDisplayActive(d, NULL), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nv.nvmlDeviceGetAccountingMode(d, &e), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nv.nvmlDeviceGetAccountingBufferSize(d, &u), NVML_SUCCESS);
    assert_int_equal(u, 4000);
    assert_int_equal(nv.nvmlDeviceGetGspFirmwareMode(d, &u, &v), NVML_SUCCESS);
    assert_int_equal(u, 0);
    assert_int_equal(v, 0); /* default follows enabled */
    assert_int_equal(nv.nvmlDeviceGetGspFirmwareMode(d, &u, NULL), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nv.nvmlShutdown(), NVML_SUCCESS);

    use_one_gpu(NULL, NULL, "10");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    d = dev(0);
    assert_int_equal(nv.nvmlDeviceGetDisplayMode(d, &e), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nv.nvmlDeviceGetAccountingBufferSize(d, &u), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nv.nvmlDeviceGetGspFirmwareMode(d, &u, &v), NVML_ERROR_NOT_SUPPORTED);
}

/* nvmlDeviceGetPciInfoExt: version 1 exactly, the class codes the scenario gives (the one not
 * given reads 0), NOT_SUPPORTED when it gives neither. */
static void pci_info_ext(void **state)
{
    nvmlPciInfoExt_v1_t p;
    nvmlDevice_t d;

    (void)state;
    use_inline("{\"gpus\": [{\"name\": \"G\", \"uuid\": \"GPU-a\", \"pci\": {\"bus\": 3, "
               "\"device_id\": \"0x2330\", \"subsystem_id\": \"0x16C110DE\", \"base_class\": 3, "
               "\"sub_class\": \"0x2\"}, \"memory\": {\"total_mib\": 1000}}, {\"name\": \"G\", "
               "\"uuid\": \"GPU-b\", \"pci\": {\"bus\": 4, \"device_id\": \"0x2330\", "
               "\"base_class\": 3}, \"memory\": {\"total_mib\": 1000}}]}",
               "10");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    d = dev(0);
    memset(&p, 0xAB, sizeof p);
    p.version = nvmlPciInfoExt_v1;
    assert_int_equal(nv.nvmlDeviceGetPciInfoExt(d, &p), NVML_SUCCESS);
    assert_int_equal(p.version, nvmlPciInfoExt_v1);
    assert_int_equal(p.bus, 3);
    assert_int_equal(p.pciDeviceId, 0x233010DE);
    assert_int_equal(p.pciSubSystemId, 0x16C110DE);
    assert_int_equal(p.baseClass, 3);
    assert_int_equal(p.subClass, 2);
    assert_string_equal(p.busId, "00000000:03:00.0");
    p.version = 0x01000044; /* a size the library does not know */
    assert_int_equal(nv.nvmlDeviceGetPciInfoExt(d, &p), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    p.version = 1; /* the plain number, not size-encoded */
    assert_int_equal(nv.nvmlDeviceGetPciInfoExt(d, &p), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    assert_int_equal(nv.nvmlDeviceGetPciInfoExt(d, NULL), NVML_ERROR_INVALID_ARGUMENT);
    p.version = nvmlPciInfoExt_v1;
    assert_int_equal(nv.nvmlDeviceGetPciInfoExt(dev(1), &p), NVML_SUCCESS);
    assert_int_equal(p.baseClass, 3);
    assert_int_equal(p.subClass, 0);
    assert_int_equal(nv.nvmlShutdown(), NVML_SUCCESS);

    use_one_gpu(NULL, NULL, "10");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    p.version = nvmlPciInfoExt_v1;
    assert_int_equal(nv.nvmlDeviceGetPciInfoExt(dev(0), &p), NVML_ERROR_NOT_SUPPORTED);
}

/* nvmlDeviceGetMarginTemperature: version 1 exactly, the temp_margin_c pattern at the call's
 * instant (negative allowed), NOT_SUPPORTED without it. */
/* "nvlink": bad values are located; links answer state, error counters, far ends and the
 * NVLink field values like a driver; a GPU without it answers NOT_SUPPORTED. */
static void nvlink_links_and_fields(void **state)
{
    static const char bad_link[] =
        "{\"gpus\": [{\"name\": \"G\", \"uuid\": \"GPU-1\", \"memory\": {\"total_mib\": 1}, "
        "\"pci\": {\"bus\": 1, \"device_id\": \"0x2330\"},\n"
        "\"nvlink\": {\"links\": 4, \"inactive\": [4]}}]}";
    static const char bad_key[] =
        "{\"gpus\": [{\"name\": \"G\", \"uuid\": \"GPU-1\", \"memory\": {\"total_mib\": 1}, "
        "\"pci\": {\"bus\": 1, \"device_id\": \"0x2330\"},\n"
        "\"nvlink\": {\"links\": 4, \"errors\": [{\"link\": 1, \"crc\": 2}]}}]}";
    struct gs_sim_scenario *sc = NULL;
    nvmlFieldValue_t fv[9];
    nvmlEnableState_t st = 9;
    unsigned long long n = 0;
    nvmlPciInfo_t pci;
    char err[512];
    nvmlDevice_t d;

    (void)state;
    assert_int_equal(
        gs_sim_scenario_parse(bad_link, strlen(bad_link), "n.json", &sc, err, sizeof err), -1);
    assert_non_null(strstr(err, "n.json:2:"));
    assert_non_null(strstr(err, "gpus[0].nvlink.inactive: 4 is out of range [0, 3]"));
    assert_int_equal(
        gs_sim_scenario_parse(bad_key, strlen(bad_key), "n.json", &sc, err, sizeof err), -1);
    assert_non_null(strstr(err, "unknown key \"crc\""));

    use_one_gpu("\"nvlink\": {\"links\": 4, \"speed_mbps\": 25781, \"inactive\": [2], "
                "\"errors\": [{\"link\": 1, \"replay\": 5, \"crc_data\": 2}], "
                "\"remote_bus_ids\": [\"00000000:05:00.0\", \"00000000:06:00.0\"]}, "
                "\"metrics\": {\"nvlink_tx_kib_s\": 1000, \"nvlink_rx_kib_s\": 500}",
                NULL, "10");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    d = dev(0);
    assert_int_equal(nv.nvmlDeviceGetNvLinkState(d, 0, &st), NVML_SUCCESS);
    assert_int_equal(st, NVML_FEATURE_ENABLED);
    assert_int_equal(nv.nvmlDeviceGetNvLinkState(d, 2, &st), NVML_SUCCESS);
    assert_int_equal(st, NVML_FEATURE_DISABLED);
    assert_int_equal(nv.nvmlDeviceGetNvLinkState(d, 4, &st), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nv.nvmlDeviceGetNvLinkState(d, 0, NULL), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nv.nvmlDeviceGetNvLinkErrorCounter(d, 1, NVML_NVLINK_ERROR_DL_REPLAY, &n),
                     NVML_SUCCESS);
    assert_true(n == 5);
    assert_int_equal(nv.nvmlDeviceGetNvLinkErrorCounter(d, 1, NVML_NVLINK_ERROR_DL_CRC_DATA, &n),
                     NVML_SUCCESS);
    assert_true(n == 2);
    assert_int_equal(nv.nvmlDeviceGetNvLinkErrorCounter(d, 0, NVML_NVLINK_ERROR_DL_CRC_FLIT, &n),
                     NVML_SUCCESS);
    assert_true(n == 0);
    assert_int_equal(nv.nvmlDeviceGetNvLinkErrorCounter(d, 0, 4, &n), NVML_ERROR_NOT_SUPPORTED);
    memset(&pci, 0, sizeof pci);
    assert_int_equal(nv.nvmlDeviceGetNvLinkRemotePciInfo_v2(d, 3, &pci), NVML_SUCCESS);
    assert_string_equal(pci.busId, "00000000:06:00.0");
    assert_int_equal(pci.bus, 6);
    memset(fv, 0, sizeof fv);
    fv[0].fieldId = NVML_FI_DEV_NVLINK_LINK_COUNT;
    fv[1].fieldId = NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON; /* link 2 is down: no common speed */
    fv[2].fieldId = NVML_FI_DEV_NVLINK_SPEED_MBPS_L0;
    fv[3].fieldId = NVML_FI_DEV_NVLINK_SPEED_MBPS_L0 + 2;
    fv[4].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX; /* link 0: 10 s x 1000 KiB/s */
    fv[5].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX;
    fv[5].scopeId = GS_NVML_SCOPE_ALL_LINKS; /* three active links */
    fv[6].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX;
    fv[6].scopeId = 2; /* inactive: moved nothing */
    fv[7].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_TX;
    fv[8].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX;
    fv[8].scopeId = 9;
    assert_int_equal(nv.nvmlDeviceGetFieldValues(d, 9, fv), NVML_SUCCESS);
    for (int i = 0; i < 8; i++)
        assert_int_equal(fv[i].nvmlReturn, NVML_SUCCESS);
    assert_int_equal(fv[0].value.uiVal, 4);
    assert_int_equal(fv[1].value.uiVal, 0);
    assert_int_equal(fv[2].value.uiVal, 25781);
    assert_int_equal(fv[3].value.uiVal, 0);
    assert_int_equal(fv[4].valueType, NVML_VALUE_TYPE_UNSIGNED_LONG_LONG);
    assert_true(fv[4].value.ullVal == 10000);
    assert_true(fv[5].value.ullVal == 30000);
    assert_true(fv[6].value.ullVal == 0);
    assert_true(fv[7].value.ullVal == 10600); /* data + 6 % protocol overhead */
    assert_int_equal(fv[8].nvmlReturn, NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nv.nvmlShutdown(), NVML_SUCCESS);

    /* link 1 down from 5 s to 8 s: inactive meanwhile, its counter stands still */
    use_one_gpu("\"nvlink\": {\"links\": 2, \"speed_mbps\": 25781}, "
                "\"metrics\": {\"nvlink_tx_kib_s\": 1000}",
                "\"events\": [{\"at_s\": 5, \"type\": \"nvlink_down\", \"gpu\": 0, \"link\": 1}, "
                "{\"at_s\": 8, \"type\": \"nvlink_up\", \"gpu\": 0, \"link\": 1}]",
                NULL);
    use_time_file(6);
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    d = dev(0);
    assert_int_equal(nv.nvmlDeviceGetNvLinkState(d, 1, &st), NVML_SUCCESS);
    assert_int_equal(st, NVML_FEATURE_DISABLED);
    assert_int_equal(nv.nvmlDeviceGetNvLinkState(d, 0, &st), NVML_SUCCESS);
    assert_int_equal(st, NVML_FEATURE_ENABLED);
    set_time(10);
    assert_int_equal(nv.nvmlDeviceGetNvLinkState(d, 1, &st), NVML_SUCCESS);
    assert_int_equal(st, NVML_FEATURE_ENABLED);
    memset(fv, 0, sizeof fv);
    fv[0].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX;
    fv[0].scopeId = 1; /* active 0..5 and 8..10 */
    fv[1].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX;
    fv[1].scopeId = GS_NVML_SCOPE_ALL_LINKS;
    assert_int_equal(nv.nvmlDeviceGetFieldValues(d, 2, fv), NVML_SUCCESS);
    assert_true(fv[0].value.ullVal == 7000);
    assert_true(fv[1].value.ullVal == 17000);
    assert_int_equal(nv.nvmlShutdown(), NVML_SUCCESS);
    unsetenv("NVML_SIM_TIME");
    use_one_gpu(NULL,
                "\"events\": [{\"at_s\": 5, \"type\": \"nvlink_down\", \"gpu\": 0, "
                "\"link\": 0}]",
                "10");
    assert_int_not_equal(nv.nvmlInit_v2(), NVML_SUCCESS); /* no links to take down */

    use_one_gpu(NULL, NULL, "10"); /* a PCIe card */
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    assert_int_equal(nv.nvmlDeviceGetNvLinkState(dev(0), 0, &st), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nv.nvmlDeviceGetNvLinkRemotePciInfo_v2(dev(0), 0, &pci),
                     NVML_ERROR_NOT_SUPPORTED);
    memset(fv, 0, sizeof fv);
    fv[0].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX;
    fv[0].scopeId = GS_NVML_SCOPE_ALL_LINKS;
    fv[1].fieldId = NVML_FI_DEV_NVLINK_LINK_COUNT;
    assert_int_equal(nv.nvmlDeviceGetFieldValues(dev(0), 2, fv), NVML_SUCCESS);
    assert_int_equal(fv[0].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(fv[1].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
}

static void margin_temperature(void **state)
{
    nvmlMarginTemperature_t m;
    nvmlDevice_t d;

    (void)state;
    use_one_gpu("\"metrics\": {\"temp_c\": 50, "
                "\"temp_margin_c\": {\"points\": [[0, 30], [10, -4]]}}",
                NULL, "10");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    d = dev(0);
    memset(&m, 0, sizeof m);
    m.version = nvmlMarginTemperature_v1;
    assert_int_equal(nv.nvmlDeviceGetMarginTemperature(d, &m), NVML_SUCCESS);
    assert_int_equal(m.version, nvmlMarginTemperature_v1);
    assert_int_equal(m.marginTemperature, -4);
    m.version = 0x0100000C; /* nvmlTemperature_v1: another struct's version */
    assert_int_equal(nv.nvmlDeviceGetMarginTemperature(d, &m),
                     NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    m.version = 1;
    assert_int_equal(nv.nvmlDeviceGetMarginTemperature(d, &m),
                     NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    assert_int_equal(nv.nvmlDeviceGetMarginTemperature(d, NULL), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nv.nvmlShutdown(), NVML_SUCCESS);

    use_one_gpu(NULL, NULL, "10");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    m.version = nvmlMarginTemperature_v1;
    assert_int_equal(nv.nvmlDeviceGetMarginTemperature(dev(0), &m), NVML_ERROR_NOT_SUPPORTED);
}

/* ---- GPM ----------------------------------------------------------------------------------- */

static void gpm_versions_and_metrics(void **state)
{
    nvmlGpmSupport_t sup = {.version = 0x01000008}; /* the size-encoded form go-nvml once sent */
    nvmlGpmSample_t s1, s2;
    nvmlGpmMetricsGet_t *mg = calloc(1, sizeof *mg);
    nvmlDevice_t d;

    (void)state;
    assert_non_null(mg);
    use_bundled("h100x8-training.json", NULL);
    use_time_file(100);
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    d = dev(0);
    assert_int_equal(nv.nvmlGpmQueryDeviceSupport(d, &sup), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    sup.version = 1;
    assert_int_equal(nv.nvmlGpmQueryDeviceSupport(d, &sup), NVML_SUCCESS);
    assert_int_equal(sup.isSupportedDevice, 1);
    assert_int_equal(nv.nvmlGpmSampleAlloc(&s1), NVML_SUCCESS);
    assert_int_equal(nv.nvmlGpmSampleAlloc(&s2), NVML_SUCCESS);
    assert_int_equal(nv.nvmlGpmSampleGet(d, s1), NVML_SUCCESS);
    set_time(130); /* 20 whole 1.5 s steps */
    assert_int_equal(nv.nvmlGpmSampleGet(d, s2), NVML_SUCCESS);
    mg->version = 0x01000000 | (unsigned)sizeof *mg;
    mg->numMetrics = 3;
    mg->sample1 = s1;
    mg->sample2 = s2;
    mg->metrics[0].metricId = NVML_GPM_METRIC_SM_UTIL;
    mg->metrics[1].metricId = NVML_GPM_METRIC_ANY_TENSOR_UTIL;
    mg->metrics[2].metricId = 999;
    assert_int_equal(nv.nvmlGpmMetricsGet(mg), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    mg->version = NVML_GPM_METRICS_GET_VERSION;
    assert_int_equal(nv.nvmlGpmMetricsGet(mg), NVML_SUCCESS);
    assert_int_equal(mg->metrics[0].nvmlReturn, NVML_SUCCESS);
    /* 0.88 * 93 + 0.12 * 1, plus at most the pattern's 1.5 noise */
    assert_true(fabs(mg->metrics[0].value - 81.96) <= 1.6);
    assert_true(fabs(mg->metrics[1].value - 0.88 * 61) <= 3.1);
    assert_non_null(mg->metrics[0].metricInfo.unit);
    assert_int_equal(mg->metrics[2].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nv.nvmlGpmSampleFree(s1), NVML_SUCCESS);
    assert_int_equal(nv.nvmlGpmSampleFree(s2), NVML_SUCCESS);
    nv.nvmlShutdown();

    use_bundled("a100x2-dpo-imbalance.json", "10");
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    assert_int_equal(nv.nvmlGpmQueryDeviceSupport(dev(0), &sup), NVML_SUCCESS);
    assert_int_equal(sup.isSupportedDevice, 0);
    assert_int_equal(nv.nvmlGpmSampleAlloc(&s1), NVML_SUCCESS);
    assert_int_equal(nv.nvmlGpmSampleGet(dev(0), s1), NVML_ERROR_NOT_SUPPORTED);
    free(mg);
}

/* ---- threads ------------------------------------------------------------------------------- */

static void *hammer(void *arg)
{
    unsigned i, u;
    nvmlDevice_t d;
    nvmlUtilization_t util;
    nvmlProcessInfo_v2_t p[4];
    intptr_t bad = 0;

    (void)arg;
    for (i = 0; i < 2000; i++) {
        unsigned n = 4;
        bad += nv.nvmlDeviceGetHandleByIndex_v2(i % 8, &d) != NVML_SUCCESS;
        bad += nv.nvmlDeviceGetUtilizationRates(d, &util) != NVML_SUCCESS;
        bad += nv.nvmlDeviceGetPowerUsage(d, &u) != NVML_SUCCESS;
        bad += nv.nvmlDeviceGetComputeRunningProcesses_v3(d, &n, p) != NVML_SUCCESS;
    }
    return (void *)bad;
}

static void calls_from_several_threads(void **state)
{
    pthread_t th[4];

    (void)state;
    use_bundled("h100x8-training.json", NULL);
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, hammer, NULL), 0);
    for (int i = 0; i < 4; i++) {
        void *bad;
        assert_int_equal(pthread_join(th[i], &bad), 0);
        assert_ptr_equal(bad, NULL);
    }
}

/* ---- the minimal library ------------------------------------------------------------------- */

static void minimal_library_exports_only_the_old_core(void **state)
{
    const char *path = getenv("GPUSCOPE_SIM_MINIMAL_LIB");
    nvmlReturn_t (*init)(void), (*shutdown)(void), (*pci)(nvmlDevice_t, void *),
        (*by_index)(unsigned, nvmlDevice_t *);
    unsigned char buf[68];
    nvmlDevice_t d;
    void *h, *p;

    (void)state;
    if (!path)
        skip();
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(h);
    assert_null(dlsym(h, "nvmlInit_v2"));
    assert_null(dlsym(h, "nvmlDeviceGetCount_v2"));
    assert_null(dlsym(h, "nvmlDeviceGetPciInfo_v3"));
    assert_null(dlsym(h, "nvmlDeviceGetMemoryInfo_v2"));
    assert_null(dlsym(h, "nvmlDeviceGetComputeRunningProcesses_v3"));
    assert_null(dlsym(h, "nvmlGpmMetricsGet"));
    assert_null(dlsym(h, "gs_sim_scenario_parse")); /* no internals */
    p = dlsym(h, "nvmlInit");
    memcpy(&init, &p, sizeof p);
    p = dlsym(h, "nvmlShutdown");
    memcpy(&shutdown, &p, sizeof p);
    p = dlsym(h, "nvmlDeviceGetPciInfo");
    memcpy(&pci, &p, sizeof p);
    p = dlsym(h, "nvmlDeviceGetHandleByIndex");
    memcpy(&by_index, &p, sizeof p);
    assert_non_null(init);
    assert_non_null(pci);
    use_bundled("h100x8-training.json", "10");
    assert_int_equal(init(), NVML_SUCCESS);
    assert_int_equal(by_index(0, &d), NVML_SUCCESS);
    memset(buf, 0xAB, sizeof buf);
    assert_int_equal(pci(d, buf), NVML_SUCCESS);
    /* The pre-415 layout: short bus id first, 52 bytes in all. */
    assert_string_equal((char *)buf, "0000:18:00.0");
    assert_int_equal(buf[36], 0);
    assert_int_equal(buf[52], 0xAB);
    assert_int_equal(shutdown(), NVML_SUCCESS);
    dlclose(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parse_error_has_file_line_column),
        cmocka_unit_test(syntax_error_and_unknown_key_are_located),
        cmocka_unit_test(template_values_are_inherited_and_overridden),
        cmocka_unit_test_teardown(every_bundled_scenario_loads, test_teardown),
        cmocka_unit_test_teardown(no_scenario_means_no_driver, test_teardown),
        cmocka_unit_test_teardown(bad_scenario_is_an_init_error_not_a_crash, test_teardown),
        cmocka_unit_test_teardown(requested_init_errors_and_zero_gpus, test_teardown),
        cmocka_unit_test_teardown(init_is_reference_counted, test_teardown),
        cmocka_unit_test_teardown(arguments_are_validated_like_nvml, test_teardown),
        cmocka_unit_test_teardown(unsupported_fields_follow_the_board, test_teardown),
        cmocka_unit_test_teardown(scenario_errors_and_not_supported_are_forced, test_teardown),
        cmocka_unit_test_teardown(memory_v2_checks_its_version, test_teardown),
        cmocka_unit_test_teardown(detail_readings_follow_the_scenario, test_teardown),
        cmocka_unit_test(detail_keys_are_checked),
        cmocka_unit_test_teardown(process_lists_follow_the_counting_protocol, test_teardown),
        cmocka_unit_test_teardown(plain_process_list_writes_16_byte_entries, test_teardown),
        cmocka_unit_test_teardown(unknown_memory_and_env_and_self_pids, test_teardown),
        cmocka_unit_test_teardown(process_utilization_reports_new_samples_once, test_teardown),
        cmocka_unit_test_teardown(detail_list_is_versioned_and_hopper_only, test_teardown),
        cmocka_unit_test_teardown(fixed_time_gives_identical_readings, test_teardown),
        cmocka_unit_test_teardown(time_file_moves_the_clock_and_energy_only_grows, test_teardown),
        cmocka_unit_test_teardown(square_wave_averages_to_its_duty, test_teardown),
        cmocka_unit_test_teardown(samples_protocol, test_teardown),
        cmocka_unit_test_teardown(throttle_events_set_reasons_and_counters, test_teardown),
        cmocka_unit_test_teardown(pcie_throughput_blocks_like_the_driver, test_teardown),
        cmocka_unit_test_teardown(handles_by_pci_bus_id_and_uuid, test_teardown),
        cmocka_unit_test_teardown(gpu_is_lost_after_its_event, test_teardown),
        cmocka_unit_test_teardown(events_are_delivered_once_when_due, test_teardown),
        cmocka_unit_test_teardown(ecc_events_raise_counters_and_events, test_teardown),
        cmocka_unit_test_teardown(processes_start_and_exit_with_events, test_teardown),
        cmocka_unit_test_teardown(inaccessible_gpu_and_legacy_enumeration, test_teardown),
        cmocka_unit_test_teardown(idle_gpu_reports_the_idle_reason, test_teardown),
        cmocka_unit_test_teardown(mig_devices_have_their_own_handles, test_teardown),
        cmocka_unit_test_teardown(topology_is_served_and_checked, test_teardown),
        cmocka_unit_test_teardown(mig_enable_event_makes_instances_appear, test_teardown),
        cmocka_unit_test_teardown(gpu_instance_info, test_teardown),
        cmocka_unit_test_teardown(mig_reserved_and_sram_ecc, test_teardown),
        cmocka_unit_test_teardown(gpm_versions_and_metrics, test_teardown),
        cmocka_unit_test_teardown(video_engines, test_teardown),
        cmocka_unit_test_teardown(inforom_versions, test_teardown),
        cmocka_unit_test_teardown(board_modes, test_teardown),
        cmocka_unit_test_teardown(pci_info_ext, test_teardown),
        cmocka_unit_test_teardown(margin_temperature, test_teardown),
        cmocka_unit_test_teardown(nvlink_links_and_fields, test_teardown),
        cmocka_unit_test_teardown(calls_from_several_threads, test_teardown),
        cmocka_unit_test_teardown(minimal_library_exports_only_the_old_core, test_teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
