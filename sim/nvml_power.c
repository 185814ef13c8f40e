/*
 * nvml-sim entry points: temperature, power and energy, clocks and clock event reasons, PCIe,
 * and the batched field values.
 *
 * Power is reported like an Ampere-or-newer board: nvmlDeviceGetPowerUsage is the mean of the
 * power pattern over the last power window (1 s), field 186 the instantaneous value. Energy is the
 * exact integral of the noise-free power pattern, so it is monotonic and consistent with power.
 * Clock event reason counters (fields 74, 75, 76, 269-271) are the time the scenario's
 * throttle_on/throttle_off events kept each reason active, in nanoseconds.
 */
#include <math.h>
#include <time.h>

#include "core.h"

/* ---- thermal ------------------------------------------------------------------------------ */

GS_SIM_EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device,
                                                    nvmlTemperatureSensors_t sensorType,
                                                    unsigned int *temp)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetTemperature, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!temp || sensorType != NVML_TEMPERATURE_GPU)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    *temp = gs_sim_metric_u(&c, GS_SIM_M_TEMP, c.t);
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t device,
                                                          nvmlTemperature_t *temperature)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetTemperatureV, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!temperature)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (temperature->version != nvmlTemperature_v1)
        return gs_sim_leave(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    if (temperature->sensorType != NVML_TEMPERATURE_GPU)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    temperature->temperature = (int)gs_sim_metric_u(&c, GS_SIM_M_TEMP, c.t);
    return gs_sim_leave(NVML_SUCCESS);
}

/* The margin to the slowdown temperature: its own metric (the driver derives it from a limit it
 * does not report), so only scenarios that give temp_margin_c answer; others say NOT_SUPPORTED,
 * as a pre-555 driver or a GeForce board does. */
GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetMarginTemperature(nvmlDevice_t device,
                                                               nvmlMarginTemperature_t *margin)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetMarginTemperature, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!margin)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (margin->version != nvmlMarginTemperature_v1)
        return gs_sim_leave(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    if (!c.g->metric_given[GS_SIM_M_TEMP_MARGIN])
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    margin->marginTemperature = (int)lround(gs_sim_metric_at(&c, GS_SIM_M_TEMP_MARGIN, c.t));
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetTemperatureThreshold(
    nvmlDevice_t device, nvmlTemperatureThresholds_t thresholdType, unsigned int *temp)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetTemperatureThreshold, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!temp || thresholdType > 7)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!c.g->has_threshold[thresholdType])
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    *temp = c.g->threshold_c[thresholdType];
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int *speed)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetFanSpeed, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!speed)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!c.g->metric_given[GS_SIM_M_FAN]) /* no fan on this board */
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    *speed = gs_sim_metric_u(&c, GS_SIM_M_FAN, c.t);
    return gs_sim_leave(NVML_SUCCESS);
}

/* ---- power -------------------------------------------------------------------------------- */

static unsigned power_avg_mw(const struct gs_sim_call *c)
{
    double w = c->g->power_window_s;

    return (unsigned)llround(gs_sim_metric_avg(c, GS_SIM_M_POWER, c->t - w, c->t) * 1000);
}

static unsigned power_instant_mw(const struct gs_sim_call *c)
{
    return (unsigned)llround(gs_sim_metric_at(c, GS_SIM_M_POWER_INSTANT, c->t) * 1000);
}

static unsigned long long energy_mj(const struct gs_sim_call *c)
{
    double j = c->t > 0 ? gs_sim_pattern_integral(&c->g->metric[GS_SIM_M_POWER], c->t) : 0;

    return gs_sim_u64(c->g->energy_base_mj + (j > 0 ? j * 1000 : 0));
}

GS_SIM_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetPowerUsage, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!power)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    *power = power_avg_mw(&c);
    return gs_sim_leave(NVML_SUCCESS);
}

/* The three single-limit getters share one shape. */
enum limit { LIMIT_ENFORCED, LIMIT_MANAGEMENT, LIMIT_DEFAULT };

static nvmlReturn_t power_limit(enum gs_sim_fn fn, enum limit which, nvmlDevice_t device,
                                unsigned int *limit)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(fn, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!limit)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!c.g->has_power_limits)
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    *limit = which == LIMIT_ENFORCED     ? c.g->power_enforced_mw
             : which == LIMIT_MANAGEMENT ? c.g->power_limit_mw
                                         : c.g->power_default_mw;
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device,
                                                                unsigned int *limit)
{
    return power_limit(GS_SIM_FN_nvmlDeviceGetEnforcedPowerLimit, LIMIT_ENFORCED, device, limit);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device,
                                                                  unsigned int *limit)
{
    return power_limit(GS_SIM_FN_nvmlDeviceGetPowerManagementLimit, LIMIT_MANAGEMENT, device,
                       limit);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t device,
                                                                         unsigned int *defaultLimit)
{
    return power_limit(GS_SIM_FN_nvmlDeviceGetPowerManagementDefaultLimit, LIMIT_DEFAULT, device,
                       defaultLimit);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t device,
                                                                             unsigned int *minLimit,
                                                                             unsigned int *maxLimit)
{
    struct gs_sim_call c;
    nvmlReturn_t rc =
        gs_sim_enter(GS_SIM_FN_nvmlDeviceGetPowerManagementLimitConstraints, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!minLimit || !maxLimit)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!c.g->has_power_limits)
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    *minLimit = c.g->power_min_mw;
    *maxLimit = c.g->power_max_mw;
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device,
                                                                    unsigned long long *energy)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetTotalEnergyConsumption, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!energy)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!c.g->has_energy)
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    *energy = energy_mj(&c);
    return gs_sim_leave(NVML_SUCCESS);
}

/* ---- clocks ------------------------------------------------------------------------------- */

static const enum gs_sim_metric clock_metric[4] = {GS_SIM_M_CLK_GRAPHICS, GS_SIM_M_CLK_SM,
                                                   GS_SIM_M_CLK_MEM, GS_SIM_M_CLK_VIDEO};

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                                       unsigned int *clock)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetClockInfo, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!clock || type > NVML_CLOCK_VIDEO)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!c.g->clock_max_mhz[type] && !c.g->metric_given[clock_metric[type]])
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    *clock = gs_sim_metric_u(&c, clock_metric[type], c.t);
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                                          unsigned int *clock)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetMaxClockInfo, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!clock || type > NVML_CLOCK_VIDEO)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!c.g->clock_max_mhz[type])
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    *clock = c.g->clock_max_mhz[type];
    return gs_sim_leave(NVML_SUCCESS);
}

/* The customer boost maximum: graphics only ("clocks_max_mhz.customer_boost_graphics"). */
GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetMaxCustomerBoostClock(nvmlDevice_t device,
                                                                   nvmlClockType_t clockType,
                                                                   unsigned int *clockMHz)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetMaxCustomerBoostClock, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!clockMHz || clockType > NVML_CLOCK_VIDEO)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (clockType != NVML_CLOCK_GRAPHICS || !c.g->clock_boost_max_mhz)
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    *clockMHz = c.g->clock_boost_max_mhz;
    return gs_sim_leave(NVML_SUCCESS);
}

/* Active reasons: the scenario's events plus GpuIdle while the GPU is idle. */
static unsigned long long reasons_now(const struct gs_sim_call *c)
{
    unsigned long long mask = gs_sim_event_reasons(c->sc, c->gpu, c->t);
    double w = c->g->util_window_s;

    if (c->g->idle_reason && gs_sim_metric_avg(c, GS_SIM_M_UTIL_GPU, c->t - w, c->t) < 0.5)
        mask |= nvmlClocksEventReasonGpuIdle;
    return mask & c->g->reasons_supported;
}

static nvmlReturn_t reasons(enum gs_sim_fn fn, bool supported, nvmlDevice_t device,
                            unsigned long long *out)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(fn, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!out)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    *out = supported ? c.g->reasons_supported : reasons_now(&c);
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                                       unsigned long long *r)
{
    return reasons(GS_SIM_FN_nvmlDeviceGetCurrentClocksEventReasons, false, device, r);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                                          unsigned long long *r)
{
    return reasons(GS_SIM_FN_nvmlDeviceGetCurrentClocksThrottleReasons, false, device, r);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetSupportedClocksEventReasons(nvmlDevice_t device,
                                                                         unsigned long long *r)
{
    return reasons(GS_SIM_FN_nvmlDeviceGetSupportedClocksEventReasons, true, device, r);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetSupportedClocksThrottleReasons(nvmlDevice_t device,
                                                                            unsigned long long *r)
{
    return reasons(GS_SIM_FN_nvmlDeviceGetSupportedClocksThrottleReasons, true, device, r);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device,
                                                              nvmlPstates_t *pState)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetPerformanceState, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!pState)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    *pState = gs_sim_metric_u(&c, GS_SIM_M_PSTATE, c.t);
    return gs_sim_leave(NVML_SUCCESS);
}

/* ---- PCIe --------------------------------------------------------------------------------- */

enum pcie_what {
    PCIE_CUR_GEN,
    PCIE_CUR_WIDTH,
    PCIE_MAX_GEN,
    PCIE_GPU_MAX_GEN,
    PCIE_MAX_WIDTH,
    PCIE_REPLAYS
};

static nvmlReturn_t pcie(enum gs_sim_fn fn, enum pcie_what what, nvmlDevice_t device,
                         unsigned int *out)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(fn, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!out)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    switch (what) {
    case PCIE_CUR_GEN:
        *out = gs_sim_metric_u(&c, GS_SIM_M_PCIE_GEN, c.t);
        break;
    case PCIE_CUR_WIDTH:
        *out = gs_sim_metric_u(&c, GS_SIM_M_PCIE_WIDTH, c.t);
        break;
    case PCIE_MAX_GEN:
        *out = c.g->pcie_max_gen;
        break;
    case PCIE_GPU_MAX_GEN:
        *out = c.g->pcie_gpu_max_gen;
        break;
    case PCIE_MAX_WIDTH:
        *out = c.g->pcie_max_width;
        break;
    case PCIE_REPLAYS:
        *out = c.g->pcie_replays;
        break;
    }
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device,
                                                                    unsigned int *currLinkGen)
{
    return pcie(GS_SIM_FN_nvmlDeviceGetCurrPcieLinkGeneration, PCIE_CUR_GEN, device, currLinkGen);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device,
                                                               unsigned int *currLinkWidth)
{
    return pcie(GS_SIM_FN_nvmlDeviceGetCurrPcieLinkWidth, PCIE_CUR_WIDTH, device, currLinkWidth);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device,
                                                                   unsigned int *maxLinkGen)
{
    return pcie(GS_SIM_FN_nvmlDeviceGetMaxPcieLinkGeneration, PCIE_MAX_GEN, device, maxLinkGen);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetGpuMaxPcieLinkGeneration(nvmlDevice_t device,
                                                                      unsigned int *maxLinkGen)
{
    return pcie(GS_SIM_FN_nvmlDeviceGetGpuMaxPcieLinkGeneration, PCIE_GPU_MAX_GEN, device,
                maxLinkGen);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device,
                                                              unsigned int *maxLinkWidth)
{
    return pcie(GS_SIM_FN_nvmlDeviceGetMaxPcieLinkWidth, PCIE_MAX_WIDTH, device, maxLinkWidth);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device,
                                                               unsigned int *value)
{
    return pcie(GS_SIM_FN_nvmlDeviceGetPcieReplayCounter, PCIE_REPLAYS, device, value);
}

static void sleep_ms(double ms)
{
    struct timespec ts;

    if (ms <= 0)
        return;
    ts.tv_sec = (time_t)(ms / 1000);
    ts.tv_nsec = (long)((ms - (double)ts.tv_sec * 1000) * 1e6);
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* The driver counts bytes over a 20 ms window, so the real call blocks about that long; the sim
 * sleeps the scenario's pcie_throughput_delay_ms after releasing its lock. */
GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device,
                                                            nvmlPcieUtilCounter_t counter,
                                                            unsigned int *value)
{
    struct gs_sim_call c;
    double delay;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetPcieThroughput, device, 0, &c);
    enum gs_sim_metric m = counter == NVML_PCIE_UTIL_TX_BYTES ? GS_SIM_M_PCIE_TX : GS_SIM_M_PCIE_RX;

    if (rc != NVML_SUCCESS)
        return rc;
    if (!value || counter > NVML_PCIE_UTIL_RX_BYTES)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    *value = (unsigned)llround(gs_sim_metric_avg(&c, m, c.t - 0.02, c.t));
    delay = c.g->pcie_delay_ms;
    gs_sim_leave(NVML_SUCCESS);
    sleep_ms(delay);
    return NVML_SUCCESS;
}

/* ---- field values ------------------------------------------------------------------------- */

static bool field_forced_off(const struct gs_sim_gpu *g, unsigned id)
{
    for (unsigned i = 0; i < g->n_unsupported_fields; i++)
        if (g->unsupported_fields[i] == id)
            return true;
    return false;
}

static nvmlReturn_t set_ui(nvmlFieldValue_t *v, unsigned u)
{
    v->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
    v->value.ullVal = 0;
    v->value.uiVal = u;
    return NVML_SUCCESS;
}

static nvmlReturn_t set_ull(nvmlFieldValue_t *v, unsigned long long u)
{
    v->valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
    v->value.ullVal = u;
    return NVML_SUCCESS;
}

static unsigned long long reason_ns(const struct gs_sim_call *c, unsigned long long mask)
{
    return gs_sim_u64(gs_sim_reason_seconds(c->sc, c->gpu, mask, c->t) * 1e9);
}

static nvmlReturn_t ecc_total_field(const struct gs_sim_call *c, nvmlFieldValue_t *v, unsigned type,
                                    bool aggregate)
{
    unsigned long long n = 0;

    if (!c->g->has_ecc || !c->g->ecc_current)
        return NVML_ERROR_NOT_SUPPORTED;
    for (unsigned loc = 0; loc < GS_SIM_ECC_LOCATIONS; loc++)
        if (c->g->ecc_location[loc])
            n += gs_sim_ecc_count(c->sc, c->gpu, type, loc, aggregate, c->t);
    return set_ull(v, n);
}

/* NVLink fields (§6): the link count, speeds (per link for links 0..11, and common to all), and
 * the data and raw throughput counters of one link (scopeId) or of all (scopeId UINT_MAX), KiB.
 * Returns -1 for a field that is not NVLink's. */
static int nvlink_field(const struct gs_sim_call *c, nvmlFieldValue_t *v, nvmlReturn_t *rc)
{
    const struct gs_sim_nvlink *nl = &c->g->nvlink;
    unsigned id = v->fieldId, link;
    bool rx, raw;
    double kib = 0;

    if (id >= NVML_FI_DEV_NVLINK_SPEED_MBPS_L0 && id <= NVML_FI_DEV_NVLINK_SPEED_MBPS_L5)
        link = id - NVML_FI_DEV_NVLINK_SPEED_MBPS_L0;
    else if (id >= NVML_FI_DEV_NVLINK_SPEED_MBPS_L6 && id <= NVML_FI_DEV_NVLINK_SPEED_MBPS_L11)
        link = 6 + id - NVML_FI_DEV_NVLINK_SPEED_MBPS_L6;
    else if (id == NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON || id == NVML_FI_DEV_NVLINK_LINK_COUNT ||
             (id >= NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX &&
              id <= NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_RX))
        link = 0;
    else
        return -1;
    if (nl->n_links == 0) {
        *rc = NVML_ERROR_NOT_SUPPORTED;
        return 0;
    }
    if (id == NVML_FI_DEV_NVLINK_LINK_COUNT) {
        *rc = set_ui(v, nl->n_links);
        return 0;
    }
    if (id == NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON) {
        bool all = true;
        for (unsigned l = 0; l < nl->n_links; l++)
            all = all && gs_sim_nvlink_active(c, l);
        *rc = set_ui(v, all ? nl->speed_mbps : 0); /* 0: the links do not share one speed */
        return 0;
    }
    if (id < NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX) { /* a per-link speed */
        *rc = link < nl->n_links ? set_ui(v, gs_sim_nvlink_active(c, link) ? nl->speed_mbps : 0)
                                 : NVML_ERROR_NOT_SUPPORTED;
        return 0;
    }
    rx = id == NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX || id == NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_RX;
    raw = id >= NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_TX;
    if (v->scopeId == GS_NVML_SCOPE_ALL_LINKS) {
        for (unsigned l = 0; l < nl->n_links; l++)
            kib += floor(gs_sim_nvlink_kib(c, l, rx, raw));
    } else if (v->scopeId < nl->n_links) {
        kib = floor(gs_sim_nvlink_kib(c, v->scopeId, rx, raw));
    } else {
        *rc = NVML_ERROR_INVALID_ARGUMENT;
        return 0;
    }
    *rc = set_ull(v, gs_sim_u64(kib));
    return 0;
}

/* Fields 197/198: pcie.count_base_bytes plus the exact integral of the noise-free pcie_tx_kb_s /
 * pcie_rx_kb_s pattern (KB = 1024 bytes) over [0, t], wrapping at 2^64 like the driver's; from
 * pcie.count_reset_s on (a driver reload), the integral since then, without the base. */
static unsigned long long pcie_count(const struct gs_sim_call *c, bool rx)
{
    const struct gs_sim_pattern *p = &c->g->metric[rx ? GS_SIM_M_PCIE_RX : GS_SIM_M_PCIE_TX];
    double reset = c->g->pcie_count_reset_s;
    double base = c->g->pcie_count_base; /* parsed as at most 1.8446744073709e19 < 2^64 */
    double kib;

    if (reset >= 0 && c->t >= reset)
        return gs_sim_u64((gs_sim_pattern_integral(p, c->t) - gs_sim_pattern_integral(p, reset)) *
                          1024);
    kib = c->t > 0 ? gs_sim_pattern_integral(p, c->t) : 0;
    return (unsigned long long)base + gs_sim_u64(kib * 1024); /* unsigned: wraps at 2^64 */
}

static nvmlReturn_t one_field(const struct gs_sim_call *c, nvmlFieldValue_t *v)
{
    const struct gs_sim_gpu *g = c->g;
    bool mig = gs_sim_mig_on(c->sc, c->gpu, c->t);

    nvmlReturn_t nrc = NVML_SUCCESS;

    if (field_forced_off(g, v->fieldId))
        return NVML_ERROR_NOT_SUPPORTED;
    if (nvlink_field(c, v, &nrc) == 0)
        return nrc;
    switch (v->fieldId) {
    case NVML_FI_DEV_ECC_CURRENT:
    case NVML_FI_DEV_ECC_PENDING:
        if (!g->has_ecc)
            return NVML_ERROR_NOT_SUPPORTED;
        return set_ui(v, v->fieldId == NVML_FI_DEV_ECC_CURRENT ? g->ecc_current : g->ecc_pending);
    case NVML_FI_DEV_ECC_SBE_VOL_TOTAL:
        return ecc_total_field(c, v, NVML_MEMORY_ERROR_TYPE_CORRECTED, false);
    case NVML_FI_DEV_ECC_DBE_VOL_TOTAL:
        return ecc_total_field(c, v, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, false);
    case NVML_FI_DEV_ECC_SBE_AGG_TOTAL:
        return ecc_total_field(c, v, NVML_MEMORY_ERROR_TYPE_CORRECTED, true);
    case NVML_FI_DEV_ECC_DBE_AGG_TOTAL:
        return ecc_total_field(c, v, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, true);
    case NVML_FI_DEV_PERF_POLICY_POWER:
        return set_ull(v, reason_ns(c, nvmlClocksEventReasonSwPowerCap));
    case NVML_FI_DEV_PERF_POLICY_THERMAL:
        return set_ull(v, reason_ns(c, nvmlClocksEventReasonSwThermalSlowdown |
                                           nvmlClocksEventReasonHwThermalSlowdown));
    case NVML_FI_DEV_PERF_POLICY_SYNC_BOOST:
        return set_ull(v, reason_ns(c, nvmlClocksEventReasonSyncBoost));
    case NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN:
        return set_ull(v, reason_ns(c, nvmlClocksEventReasonSwThermalSlowdown));
    case NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN:
        return set_ull(v, reason_ns(c, nvmlClocksEventReasonHwThermalSlowdown));
    case NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN:
        return set_ull(v, reason_ns(c, nvmlClocksEventReasonHwPowerBrakeSlowdown));
    case NVML_FI_DEV_MEMORY_TEMP:
        if (!g->metric_given[GS_SIM_M_MEM_TEMP])
            return NVML_ERROR_NOT_SUPPORTED;
        return set_ui(v, gs_sim_metric_u(c, GS_SIM_M_MEM_TEMP, c->t));
    case NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION:
    case NVML_FI_DEV_ENERGY:
        if (!g->has_energy)
            return NVML_ERROR_NOT_SUPPORTED;
        return set_ull(v, energy_mj(c));
    case NVML_FI_DEV_PCIE_COUNT_TX_BYTES:
    case NVML_FI_DEV_PCIE_COUNT_RX_BYTES:
        return set_ull(v, pcie_count(c, v->fieldId == NVML_FI_DEV_PCIE_COUNT_RX_BYTES));
    case NVML_FI_DEV_PCIE_REPLAY_COUNTER:
        return set_ui(v, g->pcie_replays);
    case NVML_FI_DEV_PCIE_REPLAY_ROLLOVER_COUNTER:
        return set_ui(v, g->pcie_replay_rollovers);
    case NVML_FI_DEV_REMAPPED_COR:
    case NVML_FI_DEV_REMAPPED_UNC:
    case NVML_FI_DEV_REMAPPED_PENDING:
    case NVML_FI_DEV_REMAPPED_FAILURE:
        if (!g->has_remap || mig)
            return NVML_ERROR_NOT_SUPPORTED;
        return set_ui(v, v->fieldId == NVML_FI_DEV_REMAPPED_COR       ? g->remap_corr
                         : v->fieldId == NVML_FI_DEV_REMAPPED_UNC     ? g->remap_unc
                         : v->fieldId == NVML_FI_DEV_REMAPPED_PENDING ? g->remap_pending
                                                                      : g->remap_failure);
    case NVML_FI_DEV_POWER_AVERAGE:
    case NVML_FI_DEV_POWER_INSTANT:
        if (v->scopeId == NVML_POWER_SCOPE_MEMORY) { /* "memory_power_w" / "_instant_w" */
            enum gs_sim_metric m =
                v->fieldId == NVML_FI_DEV_POWER_AVERAGE ? GS_SIM_M_POWER_MEM : GS_SIM_M_POWER_MEM_I;
            double w = c->g->power_window_s;
            if (!g->metric_given[m])
                return NVML_ERROR_NOT_SUPPORTED;
            return set_ui(v, (unsigned)llround((m == GS_SIM_M_POWER_MEM
                                                    ? gs_sim_metric_avg(c, m, c->t - w, c->t)
                                                    : gs_sim_metric_at(c, m, c->t)) *
                                               1000));
        }
        if (v->scopeId != 0) /* module / GPU-base scopes: Grace boards only */
            return NVML_ERROR_NOT_SUPPORTED;
        return set_ui(v, v->fieldId == NVML_FI_DEV_POWER_AVERAGE ? power_avg_mw(c)
                                                                 : power_instant_mw(c));
    case NVML_FI_DEV_TEMPERATURE_SHUTDOWN_TLIMIT:
    case NVML_FI_DEV_TEMPERATURE_SLOWDOWN_TLIMIT:
    case NVML_FI_DEV_TEMPERATURE_MEM_MAX_TLIMIT:
    case NVML_FI_DEV_TEMPERATURE_GPU_MAX_TLIMIT: {
        unsigned k = v->fieldId - NVML_FI_DEV_TEMPERATURE_SHUTDOWN_TLIMIT;
        if (!g->has_tlimit[k])
            return NVML_ERROR_NOT_SUPPORTED;
        v->valueType = NVML_VALUE_TYPE_SIGNED_INT;
        v->value.ullVal = 0;
        v->value.siVal = g->tlimit_c[k];
        return NVML_SUCCESS;
    }
    case NVML_FI_DEV_REMAPPED_ROWS_COR_INACTIVE:
    case NVML_FI_DEV_REMAPPED_ROWS_UNC_INACTIVE: {
        unsigned k = v->fieldId - NVML_FI_DEV_REMAPPED_ROWS_COR_INACTIVE;
        if (!g->has_remap || mig || !g->has_remap_inactive[k])
            return NVML_ERROR_NOT_SUPPORTED;
        return set_ui(v, g->remap_inactive[k]);
    }
    case NVML_FI_DEV_EDPP_MULTIPLIER:
        if (!g->has_edpp)
            return NVML_ERROR_NOT_SUPPORTED;
        return set_ui(v, g->edpp_pct);
    case NVML_FI_DEV_GET_GPU_RECOVERY_ACTION:
        if (!g->has_recovery)
            return NVML_ERROR_NOT_SUPPORTED;
        return set_ui(v, g->recovery_action);
    case NVML_FI_DEV_PCIE_OUTBOUND_ATOMICS_MASK:
    case NVML_FI_DEV_PCIE_INBOUND_ATOMICS_MASK: {
        int in = v->fieldId == NVML_FI_DEV_PCIE_INBOUND_ATOMICS_MASK;
        if (!g->has_atomics[in])
            return NVML_ERROR_NOT_SUPPORTED;
        return set_ui(v, g->atomics[in]);
    }
    case NVML_FI_DEV_POWER_MIN_LIMIT:
    case NVML_FI_DEV_POWER_MAX_LIMIT:
    case NVML_FI_DEV_POWER_DEFAULT_LIMIT:
    case NVML_FI_DEV_POWER_CURRENT_LIMIT:
    case NVML_FI_DEV_POWER_REQUESTED_LIMIT:
        if (!g->has_power_limits || v->scopeId != 0)
            return NVML_ERROR_NOT_SUPPORTED;
        return set_ui(v, v->fieldId == NVML_FI_DEV_POWER_MIN_LIMIT       ? g->power_min_mw
                         : v->fieldId == NVML_FI_DEV_POWER_MAX_LIMIT     ? g->power_max_mw
                         : v->fieldId == NVML_FI_DEV_POWER_DEFAULT_LIMIT ? g->power_default_mw
                         : v->fieldId == NVML_FI_DEV_POWER_CURRENT_LIMIT ? g->power_enforced_mw
                                                                         : g->power_limit_mw);
    default:
        return NVML_ERROR_NOT_SUPPORTED;
    }
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount,
                                                         nvmlFieldValue_t *values)
{
    struct gs_sim_call c;
    long long ts;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetFieldValues, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (valuesCount <= 0 || !values)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    ts = (long long)gs_sim_clock_wall_us(&gs_sim.clock, c.t);
    for (int i = 0; i < valuesCount; i++) {
        nvmlFieldValue_t *v = &values[i];
        v->timestamp = ts;
        v->latencyUsec = 0;
        v->nvmlReturn = one_field(&c, v);
    }
    return gs_sim_leave(NVML_SUCCESS);
}
