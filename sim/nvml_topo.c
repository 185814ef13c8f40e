/*
 * nvml-sim entry points: GPU topology (nvmlDeviceGetTopologyCommonAncestor), CPU and memory
 * affinity (nvmlDeviceGetCpuAffinity, nvmlDeviceGetMemoryAffinity) and the NUMA node of a GPU's
 * own memory (nvmlDeviceGetNumaNodeId), from a GPU's "topology" object (scenario.h). Without
 * it, or for a pair it does not name, the calls answer NOT_SUPPORTED.
 */
#include <stdlib.h>
#include <string.h>

#include "core.h"

#define ULONG_BITS (8 * sizeof(unsigned long))

/* Sets the bits of a range list ("0-19,40-59", checked by the parser) in set[0..words). A bit
 * past the caller's words is not an error to NVML: the set is cut, as the driver cuts it. */
static void ranges_to_set(const char *s, unsigned long *set, unsigned words)
{
    memset(set, 0, words * sizeof *set);
    while (*s) {
        char *e;
        unsigned long long lo = strtoull(s, &e, 10), hi = lo;
        if (*e == '-')
            hi = strtoull(e + 1, &e, 10);
        for (unsigned long long b = lo; b <= hi && b < (unsigned long long)words * ULONG_BITS; b++)
            set[b / ULONG_BITS] |= 1ul << (b % ULONG_BITS);
        s = *e ? e + 1 : e;
    }
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t device,
                                                         unsigned int cpuSetSize,
                                                         unsigned long *cpuSet)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetCpuAffinity, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!cpuSet || cpuSetSize == 0)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!c.g->cpu_affinity[0])
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    ranges_to_set(c.g->cpu_affinity, cpuSet, cpuSetSize);
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetMemoryAffinity(nvmlDevice_t device,
                                                            unsigned int nodeSetSize,
                                                            unsigned long *nodeSet,
                                                            nvmlAffinityScope_t scope)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetMemoryAffinity, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!nodeSet || nodeSetSize == 0 ||
        (scope != NVML_AFFINITY_SCOPE_NODE && scope != NVML_AFFINITY_SCOPE_SOCKET))
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!c.g->numa_affinity[0])
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    ranges_to_set(c.g->numa_affinity, nodeSet, nodeSetSize);
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int *node)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetNumaNodeId, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!node)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!c.g->has_gpu_numa)
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    *node = c.g->gpu_numa_id;
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(
    nvmlDevice_t device1, nvmlDevice_t device2, nvmlGpuTopologyLevel_t *pathInfo)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetTopologyCommonAncestor, device1, 0, &c);
    unsigned j;

    if (rc != NVML_SUCCESS)
        return rc;
    if (!pathInfo)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    for (j = 0; j < c.sc->n_gpus && gs_sim_gpu_handle(j) != device2; j++)
        ;
    if (j == c.sc->n_gpus)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (gs_sim_lost(c.sc, j, c.t))
        return gs_sim_leave(NVML_ERROR_GPU_IS_LOST);
    if (j == c.gpu || !c.g->has_level[j])
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    *pathInfo = c.g->level[j];
    return gs_sim_leave(NVML_SUCCESS);
}
