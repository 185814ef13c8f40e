/*
 * nvml-sim entry points: ECC, retired pages, row remapping, and events.
 *
 * ECC counters are the scenario's aggregate counts at t = 0 plus the ecc_error events up to t
 * (volatile counters hold only the events, as if the driver loaded at t = 0). Events follow NVML:
 * a set records only what happens after nvmlDeviceRegisterEvents, each scenario event is
 * delivered once per set when it becomes due, and nvmlEventSetWait sleeps at most timeoutms
 * (never with 0) polling the virtual clock, with the library lock released while it sleeps.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core.h"

/* ---- ECC ---------------------------------------------------------------------------------- */

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device,
                                                     nvmlEnableState_t *current,
                                                     nvmlEnableState_t *pending)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetEccMode, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!current || !pending)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!c.g->has_ecc)
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    *current = c.g->ecc_current ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    *pending = c.g->ecc_pending ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device,
                                                            nvmlMemoryErrorType_t errorType,
                                                            nvmlEccCounterType_t counterType,
                                                            unsigned long long *eccCounts)
{
    struct gs_sim_call c;
    unsigned long long n = 0;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetTotalEccErrors, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!eccCounts || errorType > NVML_MEMORY_ERROR_TYPE_UNCORRECTED ||
        counterType > NVML_AGGREGATE_ECC)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!c.g->has_ecc || !c.g->ecc_current)
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    for (unsigned loc = 0; loc < GS_SIM_ECC_LOCATIONS; loc++)
        if (c.g->ecc_location[loc])
            n += gs_sim_ecc_count(c.sc, c.gpu, errorType, loc, counterType == NVML_AGGREGATE_ECC,
                                  c.t);
    *eccCounts = n;
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetMemoryErrorCounter(nvmlDevice_t device,
                                                                nvmlMemoryErrorType_t errorType,
                                                                nvmlEccCounterType_t counterType,
                                                                nvmlMemoryLocation_t locationType,
                                                                unsigned long long *count)
{
    struct gs_sim_call c;
    nvmlReturn_t rc =
        gs_sim_enter(GS_SIM_FN_nvmlDeviceGetMemoryErrorCounter, device, GS_SIM_MIG_OK, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!count || errorType > NVML_MEMORY_ERROR_TYPE_UNCORRECTED ||
        counterType > NVML_AGGREGATE_ECC || locationType >= GS_SIM_ECC_LOCATIONS)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!c.g->has_ecc || !c.g->ecc_current || !c.g->ecc_location[locationType])
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    if (c.mig) {
        /* per instance NVML counts only volatile uncorrectable errors outside DRAM: the
         * instance's SRAM count, nothing in the other on-chip locations */
        if (errorType != NVML_MEMORY_ERROR_TYPE_UNCORRECTED || counterType != NVML_VOLATILE_ECC ||
            locationType == NVML_MEMORY_LOCATION_DRAM)
            return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
        *count = locationType == NVML_MEMORY_LOCATION_SRAM ? c.mig->sram_unc_vol : 0;
        return gs_sim_leave(NVML_SUCCESS);
    }
    *count = gs_sim_ecc_count(c.sc, c.gpu, errorType, locationType,
                              counterType == NVML_AGGREGATE_ECC, c.t);
    return gs_sim_leave(NVML_SUCCESS);
}

/* ---- retired pages and remapped rows ------------------------------------------------------ */

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device,
                                                          nvmlPageRetirementCause_t cause,
                                                          unsigned int *pageCount,
                                                          unsigned long long *addresses)
{
    struct gs_sim_call c;
    unsigned n;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetRetiredPages, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!pageCount || cause > NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!c.g->has_retired)
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    n = c.g->retired_count[cause];
    if (*pageCount < n) {
        *pageCount = n;
        return gs_sim_leave(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    *pageCount = n;
    if (n == 0)
        return gs_sim_leave(NVML_SUCCESS);
    if (!addresses)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    memcpy(addresses, c.g->retired_addr[cause], n * sizeof *addresses);
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device,
                                                                       nvmlEnableState_t *pending)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetRetiredPagesPendingStatus, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!pending)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!c.g->has_retired)
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    *pending = c.g->retired_pending ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device,
                                                          unsigned int *corrRows,
                                                          unsigned int *uncRows,
                                                          unsigned int *isPending,
                                                          unsigned int *failureOccurred)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetRemappedRows, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!corrRows || !uncRows || !isPending || !failureOccurred)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    /* Not while MIG is enabled ("[N/A]" on H100-MIG, reference §8). */
    if (!c.g->has_remap || gs_sim_mig_on(c.sc, c.gpu, c.t))
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    *corrRows = c.g->remap_corr;
    *uncRows = c.g->remap_unc;
    *isPending = c.g->remap_pending;
    *failureOccurred = c.g->remap_failure;
    return gs_sim_leave(NVML_SUCCESS);
}

/* ---- events ------------------------------------------------------------------------------- */

static unsigned long long supported_events(const struct gs_sim_gpu *g)
{
    unsigned long long m = nvmlEventTypeXidCriticalError | nvmlEventTypePState;

    if (g->has_ecc)
        m |= nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError;
    if (g->mig_capable)
        m |= nvmlEventMigConfigChange;
    return m;
}

/* The NVML event type a scenario event produces, or 0. */
static unsigned long long event_bit(const struct gs_sim_event *e)
{
    switch (e->kind) {
    case GS_SIM_EV_XID:
        return nvmlEventTypeXidCriticalError;
    case GS_SIM_EV_GPU_LOST:
        return e->data ? nvmlEventTypeXidCriticalError : 0; /* only with an "xid" */
    case GS_SIM_EV_ECC_ERROR:
        return e->ecc_type == NVML_MEMORY_ERROR_TYPE_CORRECTED ? nvmlEventTypeSingleBitEccError
                                                               : nvmlEventTypeDoubleBitEccError;
    case GS_SIM_EV_MIG_ENABLE:
    case GS_SIM_EV_MIG_DISABLE:
        return nvmlEventMigConfigChange;
    default:
        return 0;
    }
}

static int set_index(nvmlEventSet_t set)
{
    for (unsigned i = 0; i < gs_sim.n_sets; i++)
        if ((void *)gs_sim.sets[i] == (void *)set)
            return (int)i;
    return -1;
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
    struct gs_sim_call c;
    struct gs_sim_event_set *s;
    nvmlReturn_t rc = gs_sim_enter_system(GS_SIM_FN_nvmlEventSetCreate, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!set)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (gs_sim.n_sets >= GS_SIM_MAX_SETS)
        return gs_sim_leave(NVML_ERROR_MEMORY);
    s = calloc(1, sizeof *s);
    if (s)
        s->delivered = calloc(c.sc->n_events ? c.sc->n_events : 1, 1);
    if (!s || !s->delivered) {
        free(s);
        return gs_sim_leave(NVML_ERROR_MEMORY);
    }
    s->n_delivered = c.sc->n_events;
    for (unsigned g = 0; g < GS_SIM_MAX_GPUS; g++)
        s->reg_t[g] = NAN;
    gs_sim.sets[gs_sim.n_sets++] = s;
    *set = (nvmlEventSet_t)(void *)s;
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device,
                                                                 unsigned long long *eventTypes)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetSupportedEventTypes, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!eventTypes)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    *eventTypes = supported_events(c.g);
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device,
                                                         unsigned long long eventTypes,
                                                         nvmlEventSet_t set)
{
    struct gs_sim_call c;
    struct gs_sim_event_set *s;
    int i;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceRegisterEvents, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    i = set_index(set);
    if (i < 0 || eventTypes == 0)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    /* Any unsupported bit: nothing is registered, the set stays usable. */
    if (eventTypes & ~supported_events(c.g))
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    s = gs_sim.sets[i];
    if (isnan(s->reg_t[c.gpu]))
        s->reg_t[c.gpu] = c.t;
    s->mask[c.gpu] |= eventTypes;
    return gs_sim_leave(NVML_SUCCESS);
}

/* Finds the earliest due, undelivered event for set s at time t and marks it delivered. */
static bool take_event(const struct gs_sim_scenario *sc, struct gs_sim_event_set *s, double t,
                       nvmlEventData_t *out)
{
    for (unsigned i = 0; i < sc->n_events && i < s->n_delivered; i++) {
        const struct gs_sim_event *e = &sc->events[i];
        unsigned long long bit = event_bit(e);
        if (e->at_s > t)
            break;
        if (!bit || s->delivered[i] || !(s->mask[e->gpu] & bit) || isnan(s->reg_t[e->gpu]) ||
            !(e->at_s > s->reg_t[e->gpu]))
            continue;
        s->delivered[i] = 1;
        memset(out, 0, sizeof *out);
        out->device = gs_sim_gpu_handle(e->gpu);
        out->eventType = bit;
        out->eventData = bit == nvmlEventTypeXidCriticalError ? e->data : 0;
        out->gpuInstanceId = e->gi >= 0 ? (unsigned)e->gi : NVML_MIG_ID_NONE;
        out->computeInstanceId = e->ci >= 0 ? (unsigned)e->ci : NVML_MIG_ID_NONE;
        return true;
    }
    return false;
}

static double mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static nvmlReturn_t wait_event(enum gs_sim_fn fn, nvmlEventSet_t set, nvmlEventData_t *data,
                               unsigned timeoutms, size_t out_size)
{
    struct gs_sim_call c;
    double deadline = mono_ms() + timeoutms;
    nvmlEventData_t ev;
    nvmlReturn_t rc = gs_sim_enter_system(fn, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!data || set_index(set) < 0)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    for (;;) {
        double left;
        struct timespec nap;
        if (take_event(gs_sim.sc, gs_sim.sets[set_index(set)], c.t, &ev)) {
            memcpy(data, &ev, out_size);
            return gs_sim_leave(NVML_SUCCESS);
        }
        left = deadline - mono_ms();
        if (left <= 0)
            return gs_sim_leave(NVML_ERROR_TIMEOUT);
        /* Poll the virtual clock every 10 ms with the lock released. */
        gs_sim_leave(NVML_SUCCESS);
        if (left > 10)
            left = 10;
        nap.tv_sec = 0;
        nap.tv_nsec = (long)(left * 1e6);
        nanosleep(&nap, NULL);
        rc = gs_sim_enter_system(fn, &c);
        if (rc != NVML_SUCCESS)
            return rc;
        if (set_index(set) < 0) /* freed by another thread meanwhile */
            return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    }
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data,
                                                    unsigned int timeoutms)
{
    return wait_event(GS_SIM_FN_nvmlEventSetWait_v2, set, data, timeoutms, sizeof *data);
}

/* The pre-450 form: the old nvmlEventData_t had no instance ids (24 bytes). */
GS_SIM_EXPORT_FULL nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t *data,
                                                 unsigned int timeoutms)
{
    return wait_event(GS_SIM_FN_nvmlEventSetWait, set, data, timeoutms,
                      offsetof(nvmlEventData_t, gpuInstanceId));
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
    struct gs_sim_call c;
    int i;
    nvmlReturn_t rc = gs_sim_enter_system(GS_SIM_FN_nvmlEventSetFree, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    i = set_index(set);
    if (i < 0)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    free(gs_sim.sets[i]->delivered);
    free(gs_sim.sets[i]);
    gs_sim.sets[i] = gs_sim.sets[--gs_sim.n_sets];
    return gs_sim_leave(NVML_SUCCESS);
}
