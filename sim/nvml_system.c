/*
 * nvml-sim entry points: init/shutdown, error strings, system queries, device enumeration.
 *
 * nvmlInit_v2 loads the scenario named by NVML_SIM_SCENARIO (no variable: DRIVER_NOT_LOADED, as
 * on a machine without the kernel driver). Init is reference counted; the scenario is parsed on
 * the first init and freed on the last shutdown, so a test can switch scenarios between the two.
 * A scenario that cannot be read or parsed prints one "nvml-sim: file:line:col: why" line on
 * stderr and makes init return NVML_ERROR_UNKNOWN.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

/* Frees event sets and GPM samples the caller did not free; called with the lock held. */
static void drop_registries(void)
{
    for (unsigned i = 0; i < gs_sim.n_sets; i++) {
        free(gs_sim.sets[i]->delivered);
        free(gs_sim.sets[i]);
    }
    gs_sim.n_sets = 0;
    for (unsigned i = 0; i < gs_sim.n_samples; i++)
        free(gs_sim.samples[i]);
    gs_sim.n_samples = 0;
}

static int init_override(const struct gs_sim_scenario *sc, enum gs_sim_fn fn)
{
    for (unsigned i = 0; i < sc->n_override; i++)
        if (sc->override[i].fn == fn)
            return sc->override[i].rc;
    return NVML_SUCCESS;
}

static nvmlReturn_t sim_init(enum gs_sim_fn fn, unsigned flags)
{
    struct gs_sim_scenario *sc = NULL;
    const char *path = getenv("NVML_SIM_SCENARIO");
    char err[512];
    nvmlReturn_t rc = NVML_SUCCESS;
    double t;

    pthread_mutex_lock(&gs_sim.lock);
    if (gs_sim.refcount > 0) {
        gs_sim.refcount++;
        return gs_sim_leave(NVML_SUCCESS);
    }
    if (!path || !*path)
        return gs_sim_leave(NVML_ERROR_DRIVER_NOT_LOADED);
    if (gs_sim_clock_setup(&gs_sim.clock, err, sizeof err) != 0 ||
        gs_sim_scenario_load(path, &sc, err, sizeof err) != 0 ||
        gs_sim_scenario_resolve(sc, err, sizeof err) != 0) {
        fprintf(stderr, "nvml-sim: %s\n", err);
        gs_sim_scenario_free(sc);
        return gs_sim_leave(NVML_ERROR_UNKNOWN);
    }
    t = gs_sim_clock_now(&gs_sim.clock);
    if (sc->init_error)
        rc = sc->init_error;
    else if (init_override(sc, fn) != NVML_SUCCESS)
        rc = init_override(sc, fn);
    else if (sc->n_gpus == 0 && !(flags & NVML_INIT_FLAG_NO_GPUS))
        rc = NVML_ERROR_GPU_NOT_FOUND; /* "No supported GPUs were found" */
    else if (fn == GS_SIM_FN_nvmlInit) {
        /* The legacy init attaches every GPU up front and fails on a broken one. */
        for (unsigned i = 0; i < sc->n_gpus && rc == NVML_SUCCESS; i++)
            if (gs_sim_lost(sc, i, t))
                rc = NVML_ERROR_GPU_IS_LOST;
    }
    if (rc != NVML_SUCCESS) {
        gs_sim_scenario_free(sc);
        return gs_sim_leave(rc);
    }
    gs_sim.sc = sc;
    gs_sim.refcount = 1;
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlInit_v2(void)
{
    return sim_init(GS_SIM_FN_nvmlInit_v2, 0);
}

GS_SIM_EXPORT nvmlReturn_t nvmlInit(void)
{
    return sim_init(GS_SIM_FN_nvmlInit, 0);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    if (flags & ~(NVML_INIT_FLAG_NO_GPUS | NVML_INIT_FLAG_NO_ATTACH | NVML_INIT_FLAG_FORCE_INIT))
        return NVML_ERROR_INVALID_ARGUMENT;
    return sim_init(GS_SIM_FN_nvmlInitWithFlags, flags);
}

GS_SIM_EXPORT nvmlReturn_t nvmlShutdown(void)
{
    pthread_mutex_lock(&gs_sim.lock);
    if (gs_sim.refcount == 0)
        return gs_sim_leave(NVML_ERROR_UNINITIALIZED);
    if (--gs_sim.refcount == 0) {
        drop_registries();
        gs_sim_scenario_free(gs_sim.sc);
        gs_sim.sc = NULL;
    }
    return gs_sim_leave(NVML_SUCCESS);
}

/* Codes 0-20, 28 and 999 carry NVIDIA's texts (as pynvml and nvidia-smi print them); the
 * texts of the other newer codes are the sim's own wording. */
static const struct {
    nvmlReturn_t rc;
    const char *text;
} error_texts[] = {
    {NVML_SUCCESS, "Success"},
    {NVML_ERROR_UNINITIALIZED, "Uninitialized"},
    {NVML_ERROR_INVALID_ARGUMENT, "Invalid Argument"},
    {NVML_ERROR_NOT_SUPPORTED, "Not Supported"},
    {NVML_ERROR_NO_PERMISSION, "Insufficient Permissions"},
    {NVML_ERROR_ALREADY_INITIALIZED, "Already Initialized"},
    {NVML_ERROR_NOT_FOUND, "Not Found"},
    {NVML_ERROR_INSUFFICIENT_SIZE, "Insufficient Size"},
    {NVML_ERROR_INSUFFICIENT_POWER, "Insufficient External Power"},
    {NVML_ERROR_DRIVER_NOT_LOADED, "Driver Not Loaded"},
    {NVML_ERROR_TIMEOUT, "Timeout"},
    {NVML_ERROR_IRQ_ISSUE, "Interrupt Request Issue"},
    {NVML_ERROR_LIBRARY_NOT_FOUND, "NVML Shared Library Not Found"},
    {NVML_ERROR_FUNCTION_NOT_FOUND, "Function Not Found"},
    {NVML_ERROR_CORRUPTED_INFOROM, "Corrupted infoROM"},
    {NVML_ERROR_GPU_IS_LOST, "GPU is lost"},
    {NVML_ERROR_RESET_REQUIRED, "GPU requires restart"},
    {NVML_ERROR_OPERATING_SYSTEM, "The operating system has blocked the request."},
    {NVML_ERROR_LIB_RM_VERSION_MISMATCH, "RM has detected an NVML/RM version mismatch."},
    {NVML_ERROR_IN_USE, "In use by another client"},
    {NVML_ERROR_MEMORY, "Insufficient Memory"},
    {NVML_ERROR_NO_DATA, "No data"},
    {NVML_ERROR_VGPU_ECC_NOT_SUPPORTED,
     "The requested vgpu operation is not available on target device, because ECC is enabled"},
    {NVML_ERROR_INSUFFICIENT_RESOURCES, "Ran out of critical resources, other than memory"},
    {NVML_ERROR_FREQ_NOT_SUPPORTED, "The requested frequency is not supported"},
    {NVML_ERROR_ARGUMENT_VERSION_MISMATCH, "The provided version is invalid/unsupported"},
    {NVML_ERROR_DEPRECATED, "Requested functionality has been deprecated"},
    {NVML_ERROR_NOT_READY, "The system is not ready for the request"},
    {NVML_ERROR_GPU_NOT_FOUND, "No supported GPUs were found"},
    {NVML_ERROR_INVALID_STATE, "Resource not in correct state to perform requested operation"},
    {NVML_ERROR_UNKNOWN, "Unknown Error"},
};

GS_SIM_EXPORT const char *nvmlErrorString(nvmlReturn_t result)
{
    for (size_t i = 0; i < sizeof error_texts / sizeof error_texts[0]; i++)
        if (error_texts[i].rc == result)
            return error_texts[i].text;
    return "Unknown Error";
}

/* ---- system ------------------------------------------------------------------------------- */

GS_SIM_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter_system(GS_SIM_FN_nvmlSystemGetDriverVersion, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    return gs_sim_leave(gs_sim_copy_str(version, length, c.sc->driver_version));
}

/* Not an NVML entry point: the marker by which a reader of the library (src/backend/nvml.c)
 * knows it talks to nvml-sim and not to a driver, without guessing from the data. It needs no
 * nvmlInit and is exported by every build, the minimal one included. Writes "nvml-sim" and
 * returns NVML_SUCCESS, or NVML_ERROR_INSUFFICIENT_SIZE / INVALID_ARGUMENT as NVML's string
 * getters do. docs/nvml-sim.md, "Telling the sim from a driver". */
GS_SIM_EXPORT nvmlReturn_t nvmlSimGetInfo(char *info, unsigned int length)
{
    static const char marker[] = "nvml-sim";

    if (!info)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (length < sizeof marker)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(info, marker, sizeof marker);
    return NVML_SUCCESS;
}

/* Not an NVML entry point either: whether pid, as the sim reports it, is a real process of
 * this host. Only a scenario process whose pid is {"self"} or {"env": ...} is (the scenario
 * says so); a number in a scenario is a made-up pid that a reader must not look up in /proc,
 * where it may belong to anything. *isHost = 0 for pids the scenario does not list. */
GS_SIM_EXPORT nvmlReturn_t nvmlSimProcessIsHost(unsigned int pid, unsigned int *isHost)
{
    nvmlReturn_t rc = NVML_SUCCESS;

    if (!isHost)
        return NVML_ERROR_INVALID_ARGUMENT;
    pthread_mutex_lock(&gs_sim.lock);
    if (gs_sim.refcount == 0 || !gs_sim.sc) {
        rc = NVML_ERROR_UNINITIALIZED;
    } else {
        *isHost = 0;
        for (unsigned i = 0; i < gs_sim.sc->n_procs; i++)
            if (gs_sim.sc->procs[i].pid == pid && gs_sim.sc->procs[i].pid_kind != GS_SIM_PID_NUMBER)
                *isHost = 1;
    }
    pthread_mutex_unlock(&gs_sim.lock);
    return rc;
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter_system(GS_SIM_FN_nvmlSystemGetNVMLVersion, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    return gs_sim_leave(gs_sim_copy_str(version, length, c.sc->nvml_version));
}

static nvmlReturn_t cuda_version(enum gs_sim_fn fn, int *out)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter_system(fn, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!out)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    *out = c.sc->cuda_version;
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion)
{
    return cuda_version(GS_SIM_FN_nvmlSystemGetCudaDriverVersion, cudaDriverVersion);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion)
{
    return cuda_version(GS_SIM_FN_nvmlSystemGetCudaDriverVersion_v2, cudaDriverVersion);
}

/* argv[0] of a live process, as NVML reports it ("/usr/bin/Xwayland", "./gpu_burn"); falls back
 * to comm for kernel threads. Returns 0 or -1 if there is no such process. */
static int proc_name_from_procfs(unsigned pid, char *out, size_t cap)
{
    char path[64], buf[4096];
    size_t n = 0;
    FILE *f;

    snprintf(path, sizeof path, "/proc/%u/cmdline", pid);
    f = fopen(path, "rb");
    if (!f)
        return -1;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    if (n == 0 || buf[0] == '\0') {
        snprintf(path, sizeof path, "/proc/%u/comm", pid);
        f = fopen(path, "rb");
        if (!f)
            return -1;
        n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        buf[strcspn(buf, "\n")] = '\0';
    }
    n = strlen(buf);
    if (n >= cap)
        n = cap - 1;
    memcpy(out, buf, n);
    out[n] = '\0';
    return 0;
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char *name,
                                                         unsigned int length)
{
    struct gs_sim_call c;
    char buf[GS_SIM_PNAME_MAX];
    bool found = false;
    nvmlReturn_t rc = gs_sim_enter_system(GS_SIM_FN_nvmlSystemGetProcessName, &c);
    size_t n;

    if (rc != NVML_SUCCESS)
        return rc;
    if (!name || length == 0)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    for (unsigned i = 0; i < c.sc->n_procs && !found; i++) {
        const struct gs_sim_proc *p = &c.sc->procs[i];
        if (p->pid == pid && p->name[0]) {
            snprintf(buf, sizeof buf, "%s", p->name);
            found = true;
        }
    }
    if (!found && proc_name_from_procfs(pid, buf, sizeof buf) != 0)
        return gs_sim_leave(NVML_ERROR_NOT_FOUND);
    /* NVML crops the name to the buffer rather than failing. */
    n = strlen(buf);
    if (n >= length)
        n = length - 1;
    memcpy(name, buf, n);
    name[n] = '\0';
    return gs_sim_leave(NVML_SUCCESS);
}

/* ---- enumeration -------------------------------------------------------------------------- */

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter_system(GS_SIM_FN_nvmlDeviceGetCount_v2, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!deviceCount)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    *deviceCount = c.sc->n_gpus;
    return gs_sim_leave(NVML_SUCCESS);
}

/* The legacy count skips GPUs the caller may not open, so its indices can differ from v2's. */
GS_SIM_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount)
{
    struct gs_sim_call c;
    unsigned n = 0;
    nvmlReturn_t rc = gs_sim_enter_system(GS_SIM_FN_nvmlDeviceGetCount, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!deviceCount)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    for (unsigned i = 0; i < c.sc->n_gpus; i++)
        n += c.sc->gpus[i].accessible;
    *deviceCount = n;
    return gs_sim_leave(NVML_SUCCESS);
}

/* Hands out the handle of GPU i after the checks attaching it would make. Lock held. */
static nvmlReturn_t attach(const struct gs_sim_call *c, enum gs_sim_fn fn, unsigned i,
                           nvmlDevice_t *device)
{
    const struct gs_sim_gpu *g = &c->sc->gpus[i];

    if (!g->accessible)
        return NVML_ERROR_NO_PERMISSION;
    if (gs_sim_lost(c->sc, i, c->t))
        return NVML_ERROR_GPU_IS_LOST;
    for (unsigned k = 0; k < g->n_override; k++)
        if (g->override[k].fn == fn)
            return g->override[k].rc;
    *device = gs_sim_gpu_handle(i);
    return NVML_SUCCESS;
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index,
                                                              nvmlDevice_t *device)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter_system(GS_SIM_FN_nvmlDeviceGetHandleByIndex_v2, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!device || index >= c.sc->n_gpus)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    return gs_sim_leave(attach(&c, GS_SIM_FN_nvmlDeviceGetHandleByIndex_v2, index, device));
}

GS_SIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter_system(GS_SIM_FN_nvmlDeviceGetHandleByIndex, &c);
    unsigned seen = 0;

    if (rc != NVML_SUCCESS)
        return rc;
    if (!device)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    for (unsigned i = 0; i < c.sc->n_gpus; i++) {
        if (!c.sc->gpus[i].accessible)
            continue;
        if (seen++ == index)
            return gs_sim_leave(attach(&c, GS_SIM_FN_nvmlDeviceGetHandleByIndex, i, device));
    }
    return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter_system(GS_SIM_FN_nvmlDeviceGetHandleByUUID, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!uuid || !device)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    for (unsigned i = 0; i < c.sc->n_gpus; i++) {
        const struct gs_sim_gpu *g = &c.sc->gpus[i];
        if (strcmp(g->uuid, uuid) == 0)
            return gs_sim_leave(attach(&c, GS_SIM_FN_nvmlDeviceGetHandleByUUID, i, device));
        if (!gs_sim_mig_on(c.sc, i, c.t))
            continue;
        for (unsigned s = 0; s < GS_SIM_MAX_MIG; s++) {
            if (g->mig[s].present && strcmp(g->mig[s].uuid, uuid) == 0) {
                rc = attach(&c, GS_SIM_FN_nvmlDeviceGetHandleByUUID, i, device);
                if (rc == NVML_SUCCESS)
                    *device = gs_sim_mig_handle(i, s);
                return gs_sim_leave(rc);
            }
        }
    }
    return gs_sim_leave(NVML_ERROR_NOT_FOUND);
}

static int hex_field(const char *s, size_t n, unsigned long max, unsigned *out)
{
    char buf[16];
    char *end;
    unsigned long v;

    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)buf[i]))
            return -1;
    errno = 0;
    v = strtoul(buf, &end, 16);
    if (errno || *end || v > max)
        return -1;
    *out = (unsigned)v;
    return 0;
}

/* Accepts "domain:bus:device.function", "domain:bus:device" and "bus:device.function" (hex). */
static int parse_bus_id(const char *s, unsigned *dom, unsigned *bus, unsigned *dev)
{
    const char *c1 = strchr(s, ':'), *c2, *dot;
    unsigned fn = 0;

    if (!c1 || strlen(s) > 64)
        return -1;
    c2 = strchr(c1 + 1, ':');
    dot = strchr(s, '.');
    *dom = 0;
    if (c2) {
        if (hex_field(s, (size_t)(c1 - s), 0xFFFFFFFFul, dom) != 0 ||
            hex_field(c1 + 1, (size_t)(c2 - c1 - 1), 0xFF, bus) != 0)
            return -1;
        c1 = c2;
    } else {
        if (!dot || hex_field(s, (size_t)(c1 - s), 0xFF, bus) != 0)
            return -1;
    }
    if (dot && dot < c1)
        return -1;
    if (hex_field(c1 + 1, dot ? (size_t)(dot - c1 - 1) : strlen(c1 + 1), 0x1F, dev) != 0)
        return -1;
    if (dot && hex_field(dot + 1, strlen(dot + 1), 0x7, &fn) != 0)
        return -1;
    return fn == 0 ? 0 : 1; /* GPUs are function 0 */
}

static nvmlReturn_t by_bus_id(enum gs_sim_fn fn, const char *pciBusId, nvmlDevice_t *device)
{
    struct gs_sim_call c;
    unsigned dom, bus, dev;
    nvmlReturn_t rc = gs_sim_enter_system(fn, &c);
    int prc;

    if (rc != NVML_SUCCESS)
        return rc;
    if (!pciBusId || !device)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    prc = parse_bus_id(pciBusId, &dom, &bus, &dev);
    if (prc < 0)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (prc > 0)
        return gs_sim_leave(NVML_ERROR_NOT_FOUND);
    for (unsigned i = 0; i < c.sc->n_gpus; i++) {
        const struct gs_sim_gpu *g = &c.sc->gpus[i];
        if (g->pci_domain == dom && g->pci_bus == bus && g->pci_device == dev)
            return gs_sim_leave(attach(&c, fn, i, device));
    }
    return gs_sim_leave(NVML_ERROR_NOT_FOUND);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId,
                                                                 nvmlDevice_t *device)
{
    return by_bus_id(GS_SIM_FN_nvmlDeviceGetHandleByPciBusId_v2, pciBusId, device);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId,
                                                              nvmlDevice_t *device)
{
    return by_bus_id(GS_SIM_FN_nvmlDeviceGetHandleByPciBusId, pciBusId, device);
}
