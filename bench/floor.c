/*
 * floor: the least a one-shot GPU view can cost (issue 25). It dlopens the same
 * libnvidia-ml.so.1 gpuscope loads ($GPUSCOPE_NVML_LIBRARY, else the system's), looks up the
 * symbols it calls, calls nvmlInit_v2 and the NVML calls gpuscope's command makes (the same
 * entry points, the same number of times: nvml-sim's NVML_SIM_COUNT lists them), prints one
 * unaligned line per GPU with printf, calls nvmlShutdown and exits. No option parsing, no
 * model, no procfs, no table: gpuscope's overhead over this is what its own code costs.
 *
 * usage: floor [quick|query]
 *   quick  the calls of `gpuscope` (the quick check's default view): system versions, then per
 *          GPU handle, name, UUID, PCI info, utilization, memory, temperature, clock
 *          event reasons, the three process lists, MIG mode; NVML's name of one process
 *   query  the calls of `gpuscope query --query-gpu=index,name,utilization.gpu,memory.used,
 *          memory.total,temperature.gpu,power.draw --format=csv`
 * bench/floor.sh measures it against gpuscope (bench/RESULTS.md, "The floor").
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/nvml_abi.h"

#define PROC_MAX 64

struct nvml {
    nvmlReturn_t (*init)(void);
    nvmlReturn_t (*shutdown)(void);
    nvmlReturn_t (*driver_version)(char *, unsigned);
    nvmlReturn_t (*nvml_version)(char *, unsigned);
    nvmlReturn_t (*cuda_version)(int *);
    nvmlReturn_t (*process_name)(unsigned, char *, unsigned);
    nvmlReturn_t (*count)(unsigned *);
    nvmlReturn_t (*handle)(unsigned, nvmlDevice_t *);
    nvmlReturn_t (*name)(nvmlDevice_t, char *, unsigned);
    nvmlReturn_t (*uuid)(nvmlDevice_t, char *, unsigned);
    nvmlReturn_t (*pci)(nvmlDevice_t, nvmlPciInfo_t *);
    nvmlReturn_t (*util)(nvmlDevice_t, nvmlUtilization_t *);
    nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_v2_t *);
    nvmlReturn_t (*temperature)(nvmlDevice_t, nvmlTemperature_t *);
    nvmlReturn_t (*power)(nvmlDevice_t, unsigned *);
    nvmlReturn_t (*reasons)(nvmlDevice_t, unsigned long long *);
    nvmlReturn_t (*procs[3])(nvmlDevice_t, unsigned *, nvmlProcessDetail_v1_t *);
    nvmlReturn_t (*mig_mode)(nvmlDevice_t, unsigned *, unsigned *);
};

static void *sym(void *lib, const char *name)
{
    void *p = dlsym(lib, name);

    if (!p) {
        fprintf(stderr, "floor: %s has no %s\n", "libnvidia-ml", name);
        exit(1);
    }
    return p;
}

#define SYM(field, name) (*(void **)&n.field = sym(lib, name))

int main(int argc, char **argv)
{
    static const char *const procs[3] = {"nvmlDeviceGetComputeRunningProcesses_v3",
                                         "nvmlDeviceGetGraphicsRunningProcesses_v3",
                                         "nvmlDeviceGetMPSComputeRunningProcesses_v3"};
    const char *path = getenv("GPUSCOPE_NVML_LIBRARY");
    int quick = argc < 2 || strcmp(argv[1], "quick") == 0;
    char drv[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE], ver[NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE];
    struct nvml n = {0};
    unsigned count = 0, first_pid = 0;
    int cuda = 0;
    void *lib;

    if (argc > 2 || (argc == 2 && !quick && strcmp(argv[1], "query") != 0)) {
        fprintf(stderr, "usage: floor [quick|query]\n");
        return 2;
    }
    lib = dlopen(path && *path ? path : "libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "floor: %s\n", dlerror());
        return 1;
    }
    SYM(init, "nvmlInit_v2");
    SYM(shutdown, "nvmlShutdown");
    SYM(driver_version, "nvmlSystemGetDriverVersion");
    SYM(nvml_version, "nvmlSystemGetNVMLVersion");
    SYM(cuda_version, "nvmlSystemGetCudaDriverVersion");
    SYM(count, "nvmlDeviceGetCount_v2");
    SYM(handle, "nvmlDeviceGetHandleByIndex_v2");
    SYM(name, "nvmlDeviceGetName");
    SYM(uuid, "nvmlDeviceGetUUID");
    SYM(pci, "nvmlDeviceGetPciInfo_v3");
    SYM(util, "nvmlDeviceGetUtilizationRates");
    SYM(memory, "nvmlDeviceGetMemoryInfo_v2");
    SYM(temperature, "nvmlDeviceGetTemperatureV");
    if (quick) {
        SYM(process_name, "nvmlSystemGetProcessName");
        SYM(reasons, "nvmlDeviceGetCurrentClocksEventReasons");
        SYM(mig_mode, "nvmlDeviceGetMigMode");
        for (int k = 0; k < 3; k++)
            *(void **)&n.procs[k] = sym(lib, procs[k]);
    } else {
        SYM(power, "nvmlDeviceGetPowerUsage");
    }
    if (n.init() != NVML_SUCCESS) {
        fprintf(stderr, "floor: nvmlInit_v2 failed\n");
        return 1;
    }
    n.driver_version(drv, sizeof drv);
    n.nvml_version(ver, sizeof ver);
    n.cuda_version(&cuda);
    n.count(&count);
    if (quick)
        printf("driver %s, CUDA %d.%d\n", drv, cuda / 1000, cuda % 1000 / 10);
    for (unsigned i = 0; i < count; i++) {
        char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = "", uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = "";
        nvmlDevice_t d;
        nvmlPciInfo_t pci;
        nvmlUtilization_t u = {0};
        nvmlMemory_v2_t m = {.version = nvmlMemory_v2};
        nvmlTemperature_t t = {.version = nvmlTemperature_v1};
        unsigned long long reasons = 0;
        unsigned power = 0, nprocs = 0, cur = 0, pending = 0;

        if (n.handle(i, &d) != NVML_SUCCESS)
            continue;
        n.name(d, name, sizeof name);
        n.uuid(d, uuid, sizeof uuid);
        n.pci(d, &pci);
        n.util(d, &u);
        n.memory(d, &m);
        n.temperature(d, &t);
        if (!quick) {
            n.power(d, &power);
            printf("%u, %s, %u %%, %llu MiB, %llu MiB, %d, %.2f W\n", i, name, u.gpu, m.used >> 20,
                   m.total >> 20, t.temperature, power / 1000.0);
            continue;
        }
        n.reasons(d, &reasons);
        for (int k = 0; k < 3; k++) {
            nvmlProcessDetail_v1_t p[PROC_MAX];
            unsigned np = PROC_MAX;
            if (n.procs[k](d, &np, p) == NVML_SUCCESS) {
                nprocs += np;
                if (np && !first_pid)
                    first_pid = p[0].pid;
            }
        }
        n.mig_mode(d, &cur, &pending);
        printf("[%u] %s | %d'C, %3u %% | %llu / %llu MB | %u process(es)\n", i, name, t.temperature,
               u.gpu, m.used >> 20, m.total >> 20, nprocs);
    }
    if (quick && first_pid) {
        char pname[256];
        if (n.process_name(first_pid, pname, sizeof pname) == NVML_SUCCESS)
            printf("%u %s\n", first_pid, pname);
    }
    n.shutdown();
    return 0;
}
