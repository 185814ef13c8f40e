/*
 * nvml_read.c - one device's reads in a cycle (identity, slow, basic, ECC, health, MIG devices).
 */
#include "backend/nvml_int.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Whether metric m (text t) is to be asked of the driver in this read. */
int gs_nvml_need_m(const struct rd *c, enum gs_metric m)
{
    return !c->masked || c->b->need_all || c->b->need_m[m];
}

int gs_nvml_need_t(const struct rd *c, enum gs_text t)
{
    return !c->masked || c->b->need_all || c->b->need_t[t];
}

int gs_nvml_need_any(const struct rd *c, const enum gs_metric *ms, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (gs_nvml_need_m(c, ms[i]))
            return 1;
    return 0;
}

/* True on success; otherwise records the outcome in *st (when not NULL). */
int gs_nvml_ok(struct rd *c, uint8_t *st, nvmlReturn_t r)
{
    if (r == NVML_SUCCESS)
        return 1;
    if (r == NVML_ERROR_GPU_IS_LOST)
        c->lost = 1;
    else if (gs_nvml_driver_gone(r) && c->fatal == NVML_SUCCESS)
        c->fatal = r;
    if (st)
        *st = gs_nvml_status(r);
    return 0;
}

/* Same, for a call that fills several metrics. */
static int ok_n(struct rd *c, nvmlReturn_t r, const enum gs_metric *ms, size_t n)
{
    if (gs_nvml_ok(c, &c->g->st[ms[0]], r))
        return 1;
    for (size_t i = 1; i < n; i++)
        c->g->st[ms[i]] = c->g->st[ms[0]];
    return 0;
}

static void rd_uint(struct rd *c, enum gs_metric m, fn_d_u fn, double scale)
{
    unsigned int v = 0;
    if (c->lost || !fn || !gs_nvml_need_m(c, m))
        return;
    if (gs_nvml_ok(c, &c->g->st[m], fn(c->h, &v)))
        gs_gpu_set(c->g, m, v * scale);
}

static void rd_uint_arg(struct rd *c, enum gs_metric m, fn_d_arg_u fn, unsigned arg, double scale)
{
    unsigned int v = 0;
    if (c->lost || !fn || !gs_nvml_need_m(c, m))
        return;
    if (gs_nvml_ok(c, &c->g->st[m], fn(c->h, arg, &v)))
        gs_gpu_set(c->g, m, v * scale);
}

static void rd_ull(struct rd *c, enum gs_metric m, fn_d_ull fn, double scale)
{
    unsigned long long v = 0;
    if (c->lost || !fn || !gs_nvml_need_m(c, m))
        return;
    if (gs_nvml_ok(c, &c->g->st[m], fn(c->h, &v)))
        gs_gpu_set(c->g, m, (double)v * scale);
}

static void rd_uint2(struct rd *c, enum gs_metric m1, enum gs_metric m2, fn_d_u2 fn, double scale)
{
    unsigned int a = 0, b = 0;
    enum gs_metric ms[2] = {m1, m2};
    if (c->lost || !fn || !gs_nvml_need_any(c, ms, 2))
        return;
    if (ok_n(c, fn(c->h, &a, &b), ms, 2)) {
        gs_gpu_set(c->g, m1, a * scale);
        gs_gpu_set(c->g, m2, b * scale);
    }
}

static void rd_text(struct rd *c, enum gs_text t, fn_d_str fn)
{
    char buf[GS_STR_LEN];
    if (c->lost || !fn || !gs_nvml_need_t(c, t))
        return;
    memset(buf, 0, sizeof buf);
    if (gs_nvml_ok(c, &c->g->tst[t], fn(c->h, buf, sizeof buf))) {
        gs_nvml_copy_text(c->g->text[t], buf, sizeof buf);
        c->g->tst[t] = GS_ST_OK;
    }
}

static void rd_pci(struct rd *c)
{
    static const enum gs_metric ms[] = {GS_M_PCI_DOMAIN, GS_M_PCI_BUS, GS_M_PCI_DEVICE,
                                        GS_M_PCI_DEVICE_ID, GS_M_PCI_SUBSYS_ID};
    nvmlPciInfo_t pci;
    struct gs_gpu *g = c->g;

    if (c->lost || !c->b->fn.pci ||
        (!gs_nvml_need_any(c, ms, COUNT_OF(ms)) && !gs_nvml_need_t(c, GS_T_PCI_BUS_ID)))
        return;
    memset(&pci, 0, sizeof pci); /* 68 bytes whichever symbol we call (§3) */
    if (!ok_n(c, c->b->fn.pci(c->h, &pci), ms, COUNT_OF(ms))) {
        g->tst[GS_T_PCI_BUS_ID] = g->st[ms[0]];
        return;
    }
    gs_gpu_set(g, GS_M_PCI_DOMAIN, pci.domain);
    gs_gpu_set(g, GS_M_PCI_BUS, pci.bus);
    gs_gpu_set(g, GS_M_PCI_DEVICE, pci.device);
    gs_gpu_set(g, GS_M_PCI_DEVICE_ID, pci.pciDeviceId);
    gs_gpu_set(g, GS_M_PCI_SUBSYS_ID, pci.pciSubSystemId);
    /* Only _v3 has the 32-byte busId at offset 36; the old layouts hold a 16-byte legacy id at
     * offset 0. Rebuild nvidia-smi's "00000000:00:09.0" form when we lack the long one. */
    if (c->b->found[SYM_pci] == 0 && pci.busId[0])
        gs_nvml_copy_text(g->text[GS_T_PCI_BUS_ID], pci.busId, sizeof pci.busId);
    else
        snprintf(g->text[GS_T_PCI_BUS_ID], GS_STR_LEN, "%08X:%02X:%02X.0", pci.domain, pci.bus,
                 pci.device);
    g->tst[GS_T_PCI_BUS_ID] = GS_ST_OK;
}

/* PCI class codes from nvmlDeviceGetPciInfoExt (550+), version 1. The rest of the struct repeats
 * what rd_pci read; only the class codes are new. */
static void rd_pci_class(struct rd *c)
{
    static const enum gs_metric ms[] = {GS_M_PCI_BASE_CLASS, GS_M_PCI_SUB_CLASS};
    nvmlPciInfoExt_v1_t pci;

    if (c->lost || !c->b->fn.pci_ext || !gs_nvml_need_any(c, ms, COUNT_OF(ms)))
        return;
    memset(&pci, 0, sizeof pci);
    pci.version = nvmlPciInfoExt_v1;
    if (!ok_n(c, c->b->fn.pci_ext(c->h, &pci), ms, COUNT_OF(ms)))
        return;
    gs_gpu_set(c->g, GS_M_PCI_BASE_CLASS, pci.baseClass);
    gs_gpu_set(c->g, GS_M_PCI_SUB_CLASS, pci.subClass);
}

/* Inforom versions: the image, then the OEM, ECC and power objects (boards without an
 * inforom, and objects a board lacks, answer NOT_SUPPORTED). */
static void rd_inforom(struct rd *c)
{
    static const unsigned objs[] = {NVML_INFOROM_OEM, NVML_INFOROM_ECC, NVML_INFOROM_POWER};
    const struct nvml_fns *f = &c->b->fn;
    struct gs_gpu *g = c->g;

    for (int i = 0; i <= GS_T_INFOROM_PWR - GS_T_INFOROM_IMAGE && !c->lost; i++) {
        char buf[NVML_DEVICE_INFOROM_VERSION_BUFFER_SIZE + 1];
        enum gs_text t = (enum gs_text)(GS_T_INFOROM_IMAGE + i);
        nvmlReturn_t r;

        if ((i == 0 ? !f->inforom_image : !f->inforom_version) || !gs_nvml_need_t(c, t))
            continue;
        memset(buf, 0, sizeof buf);
        /* one byte of the buffer stays NUL whatever the driver writes */
        r = i == 0 ? f->inforom_image(c->h, buf, sizeof buf - 1)
                   : f->inforom_version(c->h, objs[i - 1], buf, sizeof buf - 1);
        if (gs_nvml_ok(c, &g->tst[t], r)) {
            memcpy(g->text[t], buf, sizeof buf);
            g->tst[t] = GS_ST_OK;
        }
    }
}

void gs_nvml_read_identity(struct rd *c)
{
    const struct nvml_fns *f = &c->b->fn;
    int major = 0, minor = 0;
    enum gs_metric cc[2] = {GS_M_CC_MAJOR, GS_M_CC_MINOR};

    rd_text(c, GS_T_NAME, f->name);
    rd_text(c, GS_T_UUID, f->uuid);
    rd_text(c, GS_T_SERIAL, f->serial);
    rd_text(c, GS_T_VBIOS, f->vbios);
    rd_text(c, GS_T_BOARD_PART, f->board_part);
    if (!c->lost && f->gsp_version && gs_nvml_need_t(c, GS_T_GSP_VERSION)) {
        char buf[GS_STR_LEN]; /* >= NVML_GSP_FIRMWARE_VERSION_BUF_SIZE: no length is passed */

        static_assert(sizeof buf >= NVML_GSP_FIRMWARE_VERSION_BUF_SIZE, "GSP version buffer");
        memset(buf, 0, sizeof buf);
        if (gs_nvml_ok(c, &c->g->tst[GS_T_GSP_VERSION], f->gsp_version(c->h, buf))) {
            gs_nvml_copy_text(c->g->text[GS_T_GSP_VERSION], buf, sizeof buf);
            c->g->tst[GS_T_GSP_VERSION] = GS_ST_OK;
        }
    }
    rd_pci(c);
    rd_pci_class(c);
    rd_inforom(c);
    rd_uint(c, GS_M_MINOR, f->minor, 1);
    rd_uint(c, GS_M_ARCH, f->arch, 1);
    if (c->g->st[GS_M_ARCH] == GS_ST_OK && c->g->v[GS_M_ARCH] == (double)NVML_DEVICE_ARCH_UNKNOWN)
        c->g->st[GS_M_ARCH] = GS_ST_NA;
    rd_uint(c, GS_M_BRAND, f->brand, 1);
    /* GSP firmware runs or not from driver load on; NVML says to read both as booleans */
    rd_uint2(c, GS_M_GSP_MODE, GS_M_GSP_MODE_DEFAULT, f->gsp_mode, 1);
    for (int i = 0; i < 2; i++) {
        enum gs_metric m = i ? GS_M_GSP_MODE_DEFAULT : GS_M_GSP_MODE;
        if (gs_gpu_has(c->g, m))
            c->g->v[m] = c->g->v[m] != 0;
    }
    if (!c->lost && f->cuda_cc && gs_nvml_need_any(c, cc, 2) &&
        ok_n(c, f->cuda_cc(c->h, &major, &minor), cc, 2)) {
        gs_gpu_set(c->g, GS_M_CC_MAJOR, major);
        gs_gpu_set(c->g, GS_M_CC_MINOR, minor);
    }
}

/* nvmlDeviceValidateInforom reads the inforom from flash and checks its checksums: SUCCESS is
 * valid, CORRUPTED_INFOROM invalid. Slow cadence: the answer changes only if the flash does. */
static void rd_inforom_valid(struct rd *c)
{
    nvmlReturn_t r;

    if (c->lost || !c->b->fn.inforom_validate || !gs_nvml_need_m(c, GS_M_INFOROM_VALID))
        return;
    r = c->b->fn.inforom_validate(c->h);
    if (r == NVML_ERROR_CORRUPTED_INFOROM)
        gs_gpu_set(c->g, GS_M_INFOROM_VALID, 0);
    else if (gs_nvml_ok(c, &c->g->st[GS_M_INFOROM_VALID], r))
        gs_gpu_set(c->g, GS_M_INFOROM_VALID, 1);
}

/* TPC and memory channel repairs pending (drivers 580+, Ampere and later), version 1. */
static void rd_repair(struct rd *c)
{
    static const enum gs_metric ms[] = {GS_M_REPAIR_CHANNEL, GS_M_REPAIR_TPC};
    nvmlRepairStatus_t r;

    if (c->lost || !c->b->fn.repair_status || !gs_nvml_need_any(c, ms, COUNT_OF(ms)))
        return;
    memset(&r, 0, sizeof r);
    r.version = nvmlRepairStatus_v1;
    if (ok_n(c, c->b->fn.repair_status(c->h, &r), ms, COUNT_OF(ms))) {
        gs_gpu_set(c->g, GS_M_REPAIR_CHANNEL, r.bChannelRepairPending != 0);
        gs_gpu_set(c->g, GS_M_REPAIR_TPC, r.bTpcRepairPending != 0);
    }
}

void gs_nvml_read_slow(struct rd *c)
{
    const struct nvml_fns *f = &c->b->fn;

    rd_uint(c, GS_M_POWER_LIMIT, f->power_limit, 1e-3);
    rd_uint(c, GS_M_POWER_DEFAULT_LIMIT, f->power_default, 1e-3);
    rd_uint2(c, GS_M_POWER_MIN_LIMIT, GS_M_POWER_MAX_LIMIT, f->power_constraints, 1e-3);
    rd_uint_arg(c, GS_M_CLOCK_MAX_GR, f->max_clock, NVML_CLOCK_GRAPHICS, 1e6);
    rd_uint_arg(c, GS_M_CLOCK_MAX_SM, f->max_clock, NVML_CLOCK_SM, 1e6);
    rd_uint_arg(c, GS_M_CLOCK_MAX_MEM, f->max_clock, NVML_CLOCK_MEM, 1e6);
    rd_uint_arg(c, GS_M_CLOCK_MAX_VIDEO, f->max_clock, NVML_CLOCK_VIDEO, 1e6);
    rd_uint_arg(c, GS_M_TEMP_SHUTDOWN, f->temp_threshold, NVML_TEMPERATURE_THRESHOLD_SHUTDOWN, 1);
    rd_uint_arg(c, GS_M_TEMP_SLOWDOWN, f->temp_threshold, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN, 1);
    rd_uint_arg(c, GS_M_TEMP_GPU_MAX, f->temp_threshold, NVML_TEMPERATURE_THRESHOLD_GPU_MAX, 1);
    rd_uint_arg(c, GS_M_TEMP_MEM_MAX, f->temp_threshold, NVML_TEMPERATURE_THRESHOLD_MEM_MAX, 1);
    rd_uint(c, GS_M_BOARD_ID, f->board_id, 1);
    rd_uint(c, GS_M_MULTI_GPU_BOARD, f->multi_gpu, 1);
    rd_uint_arg(c, GS_M_CLOCK_BOOST_MAX_GR, f->boost_max, NVML_CLOCK_GRAPHICS, 1e6);
    rd_uint_arg(c, GS_M_TEMP_TARGET, f->temp_threshold, NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_CURR,
                1);
    rd_uint_arg(c, GS_M_TEMP_TARGET_MIN, f->temp_threshold, NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MIN,
                1);
    rd_uint_arg(c, GS_M_TEMP_TARGET_MAX, f->temp_threshold, NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MAX,
                1);
    rd_uint2(c, GS_M_ECC_MODE, GS_M_ECC_MODE_PENDING, f->ecc_mode, 1);
    rd_uint(c, GS_M_PCIE_GEN_MAX, f->pcie_gen_max, 1);
    rd_uint(c, GS_M_PCIE_GEN_GPU_MAX, f->pcie_gen_gpumax, 1);
    rd_uint(c, GS_M_PCIE_WIDTH_MAX, f->pcie_width_max, 1);
    rd_ull(c, GS_M_THROTTLE_SUPPORTED, f->reasons_supported, 1);
    rd_uint(c, GS_M_PERSISTENCE, f->persistence, 1);
    rd_uint(c, GS_M_COMPUTE_MODE, f->compute_mode, 1);
    rd_uint2(c, GS_M_MIG_MODE, GS_M_MIG_MODE_PENDING, f->mig_mode, 1);
    rd_inforom_valid(c);
    rd_repair(c);
    rd_uint(c, GS_M_DISPLAY_ATTACHED, f->display_mode, 1); /* a monitor on a connector */
    rd_uint(c, GS_M_DISPLAY_ACTIVE, f->display_active, 1); /* a display initialised */
    rd_uint(c, GS_M_ACCOUNTING, f->accounting_mode, 1);
    rd_uint(c, GS_M_ACCOUNTING_BUFFER, f->accounting_buffer, 1);
}

/* Memory of a GPU or MIG handle: _v2 (reserved split out) unless the library lacks it or
 * rejects our version, then v1, whose `used` includes the reserved memory. */
static nvmlReturn_t mem_info(struct gs_backend *b, nvmlDevice_t h, unsigned long long out[4],
                             int *has_reserved)
{
    nvmlReturn_t r = NVML_ERROR_FUNCTION_NOT_FOUND;

    if (b->fn.memory_v2 && !b->mem_v1_only) {
        nvmlMemory_v2_t m;
        memset(&m, 0, sizeof m);
        m.version = nvmlMemory_v2;
        r = b->fn.memory_v2(h, &m);
        if (r == NVML_SUCCESS) {
            out[0] = m.total, out[1] = m.used, out[2] = m.free, out[3] = m.reserved;
            *has_reserved = 1;
            return r;
        }
        if (r == NVML_ERROR_ARGUMENT_VERSION_MISMATCH || r == NVML_ERROR_FUNCTION_NOT_FOUND)
            b->mem_v1_only = 1; /* this library will not take v2; stop asking */
        else if (r != NVML_ERROR_NOT_SUPPORTED)
            return r;
    }
    if (b->fn.memory) {
        nvmlMemory_t m;
        memset(&m, 0, sizeof m);
        r = b->fn.memory(h, &m);
        if (r == NVML_SUCCESS) {
            out[0] = m.total, out[1] = m.used, out[2] = m.free, out[3] = 0;
            *has_reserved = 0;
        }
    }
    return r;
}

static void rd_memory(struct rd *c)
{
    static const enum gs_metric ms[] = {GS_M_MEM_TOTAL, GS_M_MEM_USED, GS_M_MEM_FREE,
                                        GS_M_MEM_RESERVED};
    unsigned long long v[4];
    int has_reserved = 0;

    if (c->lost || (!c->b->fn.memory_v2 && !c->b->fn.memory) || !gs_nvml_need_any(c, ms, 4))
        return;
    if (!ok_n(c, mem_info(c->b, c->h, v, &has_reserved), ms, 4))
        return;
    gs_gpu_set(c->g, GS_M_MEM_TOTAL, (double)v[0]);
    gs_gpu_set(c->g, GS_M_MEM_USED, (double)v[1]);
    gs_gpu_set(c->g, GS_M_MEM_FREE, (double)v[2]);
    if (has_reserved)
        gs_gpu_set(c->g, GS_M_MEM_RESERVED, (double)v[3]);
    else
        c->g->st[GS_M_MEM_RESERVED] = GS_ST_NA;
}

static void rd_temperature(struct rd *c)
{
    const struct nvml_fns *f = &c->b->fn;

    if (c->lost || !gs_nvml_need_m(c, GS_M_TEMP_GPU))
        return;
    if (f->temperature_v) {
        nvmlTemperature_t t;
        nvmlReturn_t r;
        memset(&t, 0, sizeof t);
        t.version = nvmlTemperature_v1;
        t.sensorType = NVML_TEMPERATURE_GPU;
        r = f->temperature_v(c->h, &t);
        if (r == NVML_SUCCESS) {
            gs_gpu_set(c->g, GS_M_TEMP_GPU, t.temperature);
            return;
        }
        if (gs_nvml_status(r) != GS_ST_NA || !f->temperature) {
            gs_nvml_ok(c, &c->g->st[GS_M_TEMP_GPU], r);
            return;
        }
    }
    rd_uint_arg(c, GS_M_TEMP_GPU, f->temperature, NVML_TEMPERATURE_GPU, 1);
}

/* Margin to the slowdown temperature (555+), version 1. Signed: a GPU past its limit reads < 0.
 * It is not slowdown threshold - current temperature; the driver computes it from its own limit. */
static void rd_temp_margin(struct rd *c)
{
    nvmlMarginTemperature_t m;

    if (c->lost || !c->b->fn.temp_margin || !gs_nvml_need_m(c, GS_M_TEMP_MARGIN))
        return;
    memset(&m, 0, sizeof m);
    m.version = nvmlMarginTemperature_v1;
    if (gs_nvml_ok(c, &c->g->st[GS_M_TEMP_MARGIN], c->b->fn.temp_margin(c->h, &m)))
        gs_gpu_set(c->g, GS_M_TEMP_MARGIN, m.marginTemperature);
}

/* ---- PCIe throughput from the byte counters (fields 197/198) ------------------------------ */

/* Faster than any PCIe link (6.0 x16 is ~64 GB/s a direction): a counter that went back (reset)
 * reads as a jump near 2^width, and such a jump gives no rate that cycle, never a spike. */
#define PCIE_RATE_MAX_BPS 1e12

static int pcie_cnt_value(const nvmlFieldValue_t *fv, unsigned long long *v, unsigned *bits)
{
    switch (fv->valueType) {
    case NVML_VALUE_TYPE_UNSIGNED_INT:
        *v = fv->value.uiVal;
        *bits = 32;
        return 1;
    case NVML_VALUE_TYPE_UNSIGNED_LONG:
        *v = fv->value.ulVal;
        *bits = (unsigned)(sizeof fv->value.ulVal * 8);
        return 1;
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
        *v = fv->value.ullVal;
        *bits = 64;
        return 1;
    default:
        return 0;
    }
}

/* fv[0..1]: this cycle's TX and RX counters. The rate is the bytes between two readings over
 * the time between them (the driver's timestamps when both have one, else CLOCK_MONOTONIC); the
 * difference is taken at the counter's width, so a wrap costs nothing. The first reading, a
 * reset or a width change gives no rate (d->pcie_rated stays 0). A field the driver does not
 * know (NOT_SUPPORTED; INVALID_ARGUMENT / NOT_FOUND from drivers older than the id) turns the
 * counters off for this GPU: GS_WANT_PCIE_TPUT then calls nvmlDeviceGetPcieThroughput. */
static void pcie_counters(struct rd *c, const nvmlFieldValue_t fv[2])
{
    struct nvml_dev *d = c->d;
    unsigned long long v[2];
    unsigned bits[2];
    long long ts_us = fv[0].timestamp;
    int64_t now = gs_clock_mono_ns();
    double dt = 0;

    for (int k = 0; k < 2; k++) {
        nvmlReturn_t r = gs_nvml_field_return(&fv[k]);
        if (r == NVML_ERROR_NOT_SUPPORTED) {
            d->pcie_cnt = -1;
            d->pcie_have = 0;
            return;
        }
        if (!gs_nvml_ok(c, NULL, r))
            return; /* lost, or a passing error: no rate this cycle */
        if (!pcie_cnt_value(&fv[k], &v[k], &bits[k])) {
            d->pcie_cnt = -1; /* not a counter we can difference */
            d->pcie_have = 0;
            return;
        }
    }
    d->pcie_cnt = 1;
    if (bits[0] != bits[1] || (d->pcie_have && bits[0] != d->pcie_bits))
        d->pcie_have = 0;
    if (d->pcie_have) {
        if (ts_us > 0 && d->pcie_prev_us > 0)
            dt = (double)(ts_us - d->pcie_prev_us) * 1e-6;
        else
            dt = (double)(now - d->pcie_prev_ns) * 1e-9;
    }
    if (d->pcie_have && dt <= 0)
        return; /* no time passed: keep the older reading, so the next interval is whole */
    if (d->pcie_have) {
        unsigned long long mask = bits[0] >= 64 ? ~0ull : (1ull << bits[0]) - 1;
        double rate[2];
        for (int k = 0; k < 2; k++)
            rate[k] = (double)((v[k] - d->pcie_prev[k]) & mask) / dt;
        if (rate[0] <= PCIE_RATE_MAX_BPS && rate[1] <= PCIE_RATE_MAX_BPS) {
            gs_gpu_set(c->g, GS_M_PCIE_TX, rate[0]);
            gs_gpu_set(c->g, GS_M_PCIE_RX, rate[1]);
            d->pcie_rated = 1;
        }
    }
    d->pcie_prev[0] = v[0];
    d->pcie_prev[1] = v[1];
    d->pcie_prev_us = ts_us > 0 && fv[1].timestamp > 0 ? ts_us : 0;
    d->pcie_prev_ns = now;
    d->pcie_bits = bits[0];
    d->pcie_have = 1;
}

/* Field values in one call (§6): memory temperature, average/instant power of the GPU and of its
 * memory, the time spent in each clock-event reason (ns), the PCIe replay counter's rollovers and
 * the recovery action the driver recommends, the T.Limit-relative temperature thresholds, the
 * EDPp multiplier and the inactive remapped rows; and, while they answer, the PCIe byte counters
 * (pcie_counters: the throughput without nvmlDeviceGetPcieThroughput's 20 ms wait). */
static void rd_fields(struct rd *c)
{
    static const struct {
        unsigned id;
        unsigned scope; /* power fields: the GPU itself, its memory (not the module) */
        enum gs_metric m;
        double scale;
    } fields[] = {
        {NVML_FI_DEV_MEMORY_TEMP, 0, GS_M_TEMP_MEM, 1},
        {NVML_FI_DEV_POWER_AVERAGE, NVML_POWER_SCOPE_GPU, GS_M_POWER_AVERAGE, 1e-3},
        {NVML_FI_DEV_POWER_INSTANT, NVML_POWER_SCOPE_GPU, GS_M_POWER_INSTANT, 1e-3},
        {NVML_FI_DEV_PERF_POLICY_POWER, 0, GS_M_THROTTLE_NS_SW_POWER, 1e-9},
        {NVML_FI_DEV_PERF_POLICY_SYNC_BOOST, 0, GS_M_THROTTLE_NS_SYNC_BOOST, 1e-9},
        {NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN, 0, GS_M_THROTTLE_NS_SW_THERMAL, 1e-9},
        {NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN, 0, GS_M_THROTTLE_NS_HW_THERMAL, 1e-9},
        {NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN, 0,
         GS_M_THROTTLE_NS_HW_POWER_BRAKE, 1e-9},
        {NVML_FI_DEV_PCIE_REPLAY_ROLLOVER_COUNTER, 0, GS_M_PCIE_REPLAY_ROLLOVER, 1},
        {NVML_FI_DEV_GET_GPU_RECOVERY_ACTION, 0, GS_M_RECOVERY_ACTION, 1},
        {NVML_FI_DEV_EDPP_MULTIPLIER, 0, GS_M_EDPP_MULTIPLIER, 1e-2},
        {NVML_FI_DEV_REMAPPED_ROWS_COR_INACTIVE, 0, GS_M_REMAP_CORR_INACTIVE, 1},
        {NVML_FI_DEV_REMAPPED_ROWS_UNC_INACTIVE, 0, GS_M_REMAP_UNCORR_INACTIVE, 1},
        {NVML_FI_DEV_TEMPERATURE_SHUTDOWN_TLIMIT, 0, GS_M_TLIMIT_SHUTDOWN, 1},
        {NVML_FI_DEV_TEMPERATURE_SLOWDOWN_TLIMIT, 0, GS_M_TLIMIT_SLOWDOWN, 1},
        {NVML_FI_DEV_TEMPERATURE_MEM_MAX_TLIMIT, 0, GS_M_TLIMIT_MEM_MAX, 1},
        {NVML_FI_DEV_TEMPERATURE_GPU_MAX_TLIMIT, 0, GS_M_TLIMIT_GPU_MAX, 1},
        {NVML_FI_DEV_POWER_AVERAGE, NVML_POWER_SCOPE_MEMORY, GS_M_POWER_MEMORY_AVERAGE, 1e-3},
        {NVML_FI_DEV_POWER_INSTANT, NVML_POWER_SCOPE_MEMORY, GS_M_POWER_MEMORY_INSTANT, 1e-3},
    };
    nvmlFieldValue_t fv[COUNT_OF(fields) + 2];
    enum gs_metric ms[COUNT_OF(fields) + 2];
    size_t n = COUNT_OF(fields);
    int pcie = 0;
    nvmlReturn_t r;

    c->d->pcie_rated = 0;
    if (c->lost || !c->b->fn.field_values)
        return;
    memset(fv, 0, sizeof fv);
    for (size_t i = 0; i < COUNT_OF(fields); i++) {
        fv[i].fieldId = fields[i].id;
        fv[i].scopeId = fields[i].scope;
        ms[i] = fields[i].m;
    }
    if (c->d->pcie_cnt >= 0 &&
        (gs_nvml_need_m(c, GS_M_PCIE_TX) || gs_nvml_need_m(c, GS_M_PCIE_RX))) {
        fv[n].fieldId = NVML_FI_DEV_PCIE_COUNT_TX_BYTES;
        ms[n++] = GS_M_PCIE_TX;
        fv[n].fieldId = NVML_FI_DEV_PCIE_COUNT_RX_BYTES;
        ms[n++] = GS_M_PCIE_RX;
        pcie = 1;
    }
    if (!gs_nvml_need_any(c, ms, n))
        return;
    r = c->b->fn.field_values(c->h, (int)n, fv);
    if (!ok_n(c, r, ms, COUNT_OF(fields)))
        return;
    if (pcie)
        pcie_counters(c, &fv[COUNT_OF(fields)]);
    for (size_t i = 0; i < COUNT_OF(fields); i++) {
        double v;
        uint8_t *st = &c->g->st[fields[i].m];
        if (!gs_nvml_ok(c, st, gs_nvml_field_return(&fv[i])))
            continue;
        if (gs_nvml_field_double(&fv[i], &v) == GS_OK)
            gs_gpu_set(c->g, fields[i].m, v * fields[i].scale);
        else
            *st = GS_ST_NA;
    }
}

/* Encoder and frame buffer capture sessions (count, trailing average FPS, latency in us) and
 * the JPEG and optical-flow engines (percent over the driver's sampling period, like the
 * encoder's). */
static void rd_video_engines(struct rd *c)
{
    static const enum gs_metric enc_ms[] = {GS_M_ENC_SESSIONS, GS_M_ENC_FPS, GS_M_ENC_LATENCY};
    static const enum gs_metric fbc_ms[] = {GS_M_FBC_SESSIONS, GS_M_FBC_FPS, GS_M_FBC_LATENCY};
    const struct nvml_fns *f = &c->b->fn;
    unsigned int n = 0, fps = 0, lat_us = 0, period = 0;

    if (!c->lost && f->encoder_stats && gs_nvml_need_any(c, enc_ms, COUNT_OF(enc_ms)) &&
        ok_n(c, f->encoder_stats(c->h, &n, &fps, &lat_us), enc_ms, COUNT_OF(enc_ms))) {
        gs_gpu_set(c->g, GS_M_ENC_SESSIONS, n);
        gs_gpu_set(c->g, GS_M_ENC_FPS, fps);
        gs_gpu_set(c->g, GS_M_ENC_LATENCY, lat_us * 1e-6);
    }
    if (!c->lost && f->fbc_stats && gs_nvml_need_any(c, fbc_ms, COUNT_OF(fbc_ms))) {
        nvmlFBCStats_t s;
        memset(&s, 0, sizeof s);
        if (ok_n(c, f->fbc_stats(c->h, &s), fbc_ms, COUNT_OF(fbc_ms))) {
            gs_gpu_set(c->g, GS_M_FBC_SESSIONS, s.sessionsCount);
            gs_gpu_set(c->g, GS_M_FBC_FPS, s.averageFPS);
            gs_gpu_set(c->g, GS_M_FBC_LATENCY, s.averageLatency * 1e-6);
        }
    }
    if (!c->lost && f->jpg_util && gs_nvml_need_m(c, GS_M_UTIL_JPEG) &&
        gs_nvml_ok(c, &c->g->st[GS_M_UTIL_JPEG], f->jpg_util(c->h, &n, &period)))
        gs_gpu_set(c->g, GS_M_UTIL_JPEG, n / 100.0);
    if (!c->lost && f->ofa_util && gs_nvml_need_m(c, GS_M_UTIL_OFA) &&
        gs_nvml_ok(c, &c->g->st[GS_M_UTIL_OFA], f->ofa_util(c->h, &n, &period)))
        gs_gpu_set(c->g, GS_M_UTIL_OFA, n / 100.0);
}

void gs_nvml_read_basic(struct rd *c)
{
    const struct nvml_fns *f = &c->b->fn;
    static const enum gs_metric util_ms[] = {GS_M_UTIL_GPU, GS_M_UTIL_MEM};
    static const enum gs_metric bar1_ms[] = {GS_M_BAR1_TOTAL, GS_M_BAR1_USED, GS_M_BAR1_FREE};
    unsigned int v = 0, period = 0;

    if (!c->lost && f->utilization && gs_nvml_need_any(c, util_ms, 2)) {
        nvmlUtilization_t u = {0, 0};
        if (ok_n(c, f->utilization(c->h, &u), util_ms, 2)) {
            gs_gpu_set(c->g, GS_M_UTIL_GPU, u.gpu / 100.0);
            gs_gpu_set(c->g, GS_M_UTIL_MEM, u.memory / 100.0);
        }
    }
    if (!c->lost && f->encoder && gs_nvml_need_m(c, GS_M_UTIL_ENC) &&
        gs_nvml_ok(c, &c->g->st[GS_M_UTIL_ENC], f->encoder(c->h, &v, &period)))
        gs_gpu_set(c->g, GS_M_UTIL_ENC, v / 100.0);
    if (!c->lost && f->decoder && gs_nvml_need_m(c, GS_M_UTIL_DEC) &&
        gs_nvml_ok(c, &c->g->st[GS_M_UTIL_DEC], f->decoder(c->h, &v, &period)))
        gs_gpu_set(c->g, GS_M_UTIL_DEC, v / 100.0);
    rd_video_engines(c);
    rd_memory(c);
    if (!c->lost && f->bar1 && gs_nvml_need_any(c, bar1_ms, 3)) {
        nvmlBAR1Memory_t m;
        memset(&m, 0, sizeof m);
        if (ok_n(c, f->bar1(c->h, &m), bar1_ms, 3)) {
            gs_gpu_set(c->g, GS_M_BAR1_TOTAL, (double)m.bar1Total);
            gs_gpu_set(c->g, GS_M_BAR1_USED, (double)m.bar1Used);
            gs_gpu_set(c->g, GS_M_BAR1_FREE, (double)m.bar1Free);
        }
    }
    rd_temperature(c);
    rd_temp_margin(c);
    rd_uint(c, GS_M_FAN, f->fan, 0.01);
    rd_uint(c, GS_M_POWER_DRAW, f->power, 1e-3);
    rd_uint(c, GS_M_POWER_ENFORCED_LIMIT, f->power_enforced, 1e-3);
    rd_ull(c, GS_M_ENERGY, f->energy, 1e-3);
    rd_uint_arg(c, GS_M_CLOCK_GR, f->clock, NVML_CLOCK_GRAPHICS, 1e6);
    rd_uint_arg(c, GS_M_CLOCK_SM, f->clock, NVML_CLOCK_SM, 1e6);
    rd_uint_arg(c, GS_M_CLOCK_MEM, f->clock, NVML_CLOCK_MEM, 1e6);
    rd_uint_arg(c, GS_M_CLOCK_VIDEO, f->clock, NVML_CLOCK_VIDEO, 1e6);
    rd_uint(c, GS_M_PSTATE, f->pstate, 1);
    if (c->g->st[GS_M_PSTATE] == GS_ST_OK && c->g->v[GS_M_PSTATE] >= NVML_PSTATE_UNKNOWN)
        c->g->st[GS_M_PSTATE] = GS_ST_NA;
    rd_ull(c, GS_M_THROTTLE_ACTIVE, f->reasons, 1);
    rd_uint(c, GS_M_PCIE_GEN, f->pcie_gen, 1);
    rd_uint(c, GS_M_PCIE_WIDTH, f->pcie_width, 1);
    rd_uint(c, GS_M_PCIE_REPLAY, f->pcie_replay, 1);
    rd_fields(c);
}

/* NVML says KB/s; whether K is 1000 or 1024 is not documented (§6). We take 1024 (the
 * binary reading) and say so in docs/backend.md; this is the one place to change it. */
void gs_nvml_read_pcie_tput(struct rd *c)
{
    rd_uint_arg(c, GS_M_PCIE_TX, c->b->fn.pcie_tput, NVML_PCIE_UTIL_TX_BYTES, 1024);
    rd_uint_arg(c, GS_M_PCIE_RX, c->b->fn.pcie_tput, NVML_PCIE_UTIL_RX_BYTES, 1024);
}

static void read_ecc(struct rd *c)
{
    static const enum gs_metric totals[2][2] = {{GS_M_ECC_CORR_VOL, GS_M_ECC_CORR_AGG},
                                                {GS_M_ECC_UNCORR_VOL, GS_M_ECC_UNCORR_AGG}};
    const struct nvml_fns *f = &c->b->fn;
    struct gs_gpu *g = c->g;

    /* Counters need ECC on; a board without ECC (GeForce) or with it off gets no counters. */
    if (g->st[GS_M_ECC_MODE] == GS_ST_NA ||
        (g->st[GS_M_ECC_MODE] == GS_ST_OK && g->v[GS_M_ECC_MODE] == 0))
        return;
    for (unsigned t = 0; t < 2; t++)
        for (unsigned k = 0; k < 2; k++) {
            unsigned long long v = 0;
            if (c->lost)
                return;
            if (f->ecc_total && gs_nvml_need_m(c, totals[t][k]) &&
                gs_nvml_ok(c, &g->st[totals[t][k]], f->ecc_total(c->h, t, k, &v)))
                gs_gpu_set(g, totals[t][k], (double)v);
            if (c->masked && c->b->mask_health)
                continue; /* the locations have no metric of their own: not asked */
            for (unsigned loc = 0; f->ecc_loc && loc < GS_ECC_LOCATIONS && !c->lost; loc++) {
                nvmlReturn_t r;
                if (c->d->ecc_loc_skip[t][k][loc])
                    continue;
                r = f->ecc_loc(c->h, t, k, loc, &v);
                if (gs_nvml_ok(c, &g->ecc_loc_st[t][k][loc], r)) {
                    g->ecc_loc[t][k][loc] = v;
                    g->ecc_loc_st[t][k][loc] = GS_ST_OK;
                } else if (gs_nvml_status(r) == GS_ST_NA) {
                    c->d->ecc_loc_skip[t][k][loc] = 1; /* a location does not come back */
                }
            }
        }
}

void gs_nvml_read_health(struct rd *c)
{
    const struct nvml_fns *f = &c->b->fn;
    static const enum gs_metric remap_ms[] = {GS_M_REMAP_CORR, GS_M_REMAP_UNCORR,
                                              GS_M_REMAP_PENDING, GS_M_REMAP_FAILURE};

    read_ecc(c);
    for (unsigned cause = 0; cause < 2 && f->retired && !c->lost; cause++) {
        enum gs_metric m = cause == 0 ? GS_M_RETIRED_SBE : GS_M_RETIRED_DBE;
        unsigned int n = 0;
        nvmlReturn_t r;

        if (!gs_nvml_need_m(c, m))
            continue;
        r = f->retired(c->h, cause, &n, NULL);
        /* With room for 0 addresses the driver answers INSUFFICIENT_SIZE and the count. */
        if (r == NVML_ERROR_INSUFFICIENT_SIZE)
            r = NVML_SUCCESS;
        if (gs_nvml_ok(c, &c->g->st[m], r))
            gs_gpu_set(c->g, m, n);
    }
    rd_uint(c, GS_M_RETIRED_PENDING, f->retired_pending, 1);
    if (!c->lost && f->remapped && gs_nvml_need_any(c, remap_ms, 4)) {
        unsigned int a = 0, b = 0, p = 0, x = 0;
        if (ok_n(c, f->remapped(c->h, &a, &b, &p, &x), remap_ms, 4)) {
            gs_gpu_set(c->g, GS_M_REMAP_CORR, a);
            gs_gpu_set(c->g, GS_M_REMAP_UNCORR, b);
            gs_gpu_set(c->g, GS_M_REMAP_PENDING, p);
            gs_gpu_set(c->g, GS_M_REMAP_FAILURE, x);
        }
    }
    if (c->d->xid_reg == 1)
        gs_gpu_set(c->g, GS_M_XID_LAST, (double)c->d->xid_last);
}

/* The placement of m's GPU instance: from the cache when its MIG device was seen before, else
 * read through the parent's handle (a privileged call) and kept unless it failed oddly. */
static void read_mig_place(struct rd *c, struct gs_mig *m)
{
    const struct nvml_fns *f = &c->b->fn;
    struct nvml_dev *d = c->d;
    nvmlGpuInstance_t gi = NULL;
    nvmlGpuInstanceInfo_t info;
    struct mig_place *p;
    nvmlReturn_t r;

    for (unsigned i = 0; i < d->n_place; i++)
        if (strcmp(d->place[i].uuid, m->uuid) == 0) {
            p = &d->place[i];
            goto done;
        }
    memset(&info, 0, sizeof info);
    r = f->gi_by_id(c->h, m->gi_id, &gi);
    if (r == NVML_SUCCESS)
        r = f->gi_info(gi, &info);
    if (!gs_nvml_ok(c, &m->place_st, r)) {
        if (m->place_st == GS_ST_ERROR || !m->uuid[0]) /* try again next time */
            return;
    } else {
        m->place_st = GS_ST_OK;
    }
    if (d->n_place == GS_MIG_MAX) /* instances reconfigured: start the cache over */
        d->n_place = 0;
    p = &d->place[d->n_place++];
    memset(p, 0, sizeof *p);
    snprintf(p->uuid, sizeof p->uuid, "%s", m->uuid);
    p->st = m->place_st;
    p->start = info.placement.start;
    p->size = info.placement.size;
    p->profile_id = info.profileId;
done:
    m->place_st = p->st;
    m->place_start = p->start;
    m->place_size = p->size;
    m->profile_id = p->profile_id;
}

/* The instance's volatile uncorrectable SRAM ECC errors: NVML counts per MIG device only the
 * volatile uncorrectable errors outside DRAM, through the per-location counter on the MIG
 * handle (nvidia-smi's "ECC Errors / Volatile / SRAM Uncorrectable" and its table's cell). */
static void read_mig_sram(struct rd *c, nvmlDevice_t mh, struct gs_mig *m)
{
    unsigned long long n = 0;

    if (c->lost || !c->b->fn.ecc_loc)
        return;
    if (gs_nvml_ok(c, &m->sram_unc_st,
                   c->b->fn.ecc_loc(mh, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC,
                                    NVML_MEMORY_LOCATION_SRAM, &n))) {
        m->sram_unc_st = GS_ST_OK;
        m->sram_unc_vol = n;
    }
}

static void read_mig_device(struct rd *c, nvmlDevice_t mh, unsigned slot, struct gs_mig *m,
                            int detail)
{
    const struct nvml_fns *f = &c->b->fn;
    char buf[GS_STR_LEN];
    unsigned int id = 0;
    unsigned long long v[4];
    int has_reserved = 0;
    nvmlReturn_t r;

    memset(m, 0, sizeof *m);
    m->index = slot;
    m->gi_id = m->ci_id = NVML_MIG_ID_NONE;
    memset(buf, 0, sizeof buf);
    if (f->name && gs_nvml_ok(c, NULL, f->name(mh, buf, sizeof buf)))
        gs_nvml_copy_text(m->name, buf, sizeof buf);
    memset(buf, 0, sizeof buf);
    if (!c->lost && f->uuid && gs_nvml_ok(c, NULL, f->uuid(mh, buf, sizeof buf)))
        gs_nvml_copy_text(m->uuid, buf, sizeof buf);
    if (!c->lost && f->gi_id && gs_nvml_ok(c, NULL, f->gi_id(mh, &id)))
        m->gi_id = id;
    if (!c->lost && f->ci_id && gs_nvml_ok(c, NULL, f->ci_id(mh, &id)))
        m->ci_id = id;
    if (c->lost)
        return;
    r = mem_info(c->b, mh, v, &has_reserved);
    if (gs_nvml_ok(c, &m->mem_st, r)) {
        m->mem_st = GS_ST_OK;
        m->mem_total_bytes = v[0];
        m->mem_used_bytes = v[1];
        m->mem_free_bytes = v[2];
        if (has_reserved) {
            m->mem_reserved_st = GS_ST_OK;
            m->mem_reserved_bytes = v[3];
        }
    }
    if (!c->lost && f->bar1) {
        nvmlBAR1Memory_t b1;

        memset(&b1, 0, sizeof b1);
        if (gs_nvml_ok(c, &m->bar1_st, f->bar1(mh, &b1))) {
            m->bar1_st = GS_ST_OK;
            m->bar1_total_bytes = b1.bar1Total;
            m->bar1_used_bytes = b1.bar1Used;
        }
    }
    if (!c->lost && f->attributes) {
        nvmlDeviceAttributes_t a;

        memset(&a, 0, sizeof a);
        if (gs_nvml_ok(c, &m->attr_st, f->attributes(mh, &a))) {
            m->attr_st = GS_ST_OK;
            m->sm_count = a.multiprocessorCount;
            m->ce_count = a.sharedCopyEngineCount;
            m->enc_count = a.sharedEncoderCount;
            m->dec_count = a.sharedDecoderCount;
            m->ofa_count = a.sharedOfaCount;
            m->jpg_count = a.sharedJpegCount;
        }
    }
    if (!c->lost && f->gi_by_id && f->gi_info && m->gi_id != NVML_MIG_ID_NONE)
        read_mig_place(c, m);
    if (detail)
        read_mig_sram(c, mh, m);
}

void gs_nvml_read_mig(struct rd *c, int detail)
{
    const struct nvml_fns *f = &c->b->fn;
    unsigned int max = 0;

    /* The mode can change with a GPU reset: read it fresh rather than from the slow cache. */
    rd_uint2(c, GS_M_MIG_MODE, GS_M_MIG_MODE_PENDING, f->mig_mode, 1);
    if (c->lost || !gs_gpu_has(c->g, GS_M_MIG_MODE) ||
        c->g->v[GS_M_MIG_MODE] != NVML_DEVICE_MIG_ENABLE || !f->mig_max || !f->mig_handle)
        return;
    if (!gs_nvml_ok(c, NULL, f->mig_max(c->h, &max)))
        return;
    for (unsigned i = 0; i < max && c->g->n_mig < GS_MIG_MAX && !c->lost; i++) {
        nvmlDevice_t mh = NULL;
        nvmlReturn_t r = f->mig_handle(c->h, i, &mh);
        if (r == NVML_ERROR_NOT_FOUND) /* an empty slot */
            continue;
        if (!gs_nvml_ok(c, NULL, r) || !mh)
            continue;
        read_mig_device(c, mh, i, &c->g->mig[c->g->n_mig], detail);
        if (!c->lost)
            c->g->n_mig++;
    }
}

/* ---- GS_WANT_DETAIL: what only nvidia-smi -q shows ------------------------------------------ */

/* One enum-like reading of a plain `unsigned int *` getter. */
static void rd_detail_uint(struct rd *c, enum gs_metric m, fn_d_u fn)
{
    unsigned int v = 0;

    if (c->lost || !fn || !gs_nvml_need_m(c, m))
        return;
    if (gs_nvml_ok(c, &c->g->st[m], fn(c->h, &v)))
        gs_gpu_set(c->g, m, v);
}

/* SRAM ECC error status (12.4+), version 1: the uncorrectable parity / SEC-DED split of the SRAM
 * counters, whether the error threshold was crossed, and the aggregate errors by unit. */
static void rd_sram(struct rd *c)
{
    static const enum gs_metric ms[] = {
        GS_M_SRAM_PARITY_VOL, GS_M_SRAM_SECDED_VOL, GS_M_SRAM_PARITY_AGG, GS_M_SRAM_SECDED_AGG,
        GS_M_SRAM_THRESHOLD,  GS_M_SRAM_L2,         GS_M_SRAM_SM,         GS_M_SRAM_MCU,
        GS_M_SRAM_PCIE,       GS_M_SRAM_OTHER};
    nvmlEccSramErrorStatus_t e;

    if (c->lost || !c->b->fn.sram_status || !gs_nvml_need_any(c, ms, COUNT_OF(ms)))
        return;
    memset(&e, 0, sizeof e);
    e.version = nvmlEccSramErrorStatus_v1;
    if (!ok_n(c, c->b->fn.sram_status(c->h, &e), ms, COUNT_OF(ms)))
        return;
    gs_gpu_set(c->g, GS_M_SRAM_PARITY_VOL, (double)e.volatileUncParity);
    gs_gpu_set(c->g, GS_M_SRAM_SECDED_VOL, (double)e.volatileUncSecDed);
    gs_gpu_set(c->g, GS_M_SRAM_PARITY_AGG, (double)e.aggregateUncParity);
    gs_gpu_set(c->g, GS_M_SRAM_SECDED_AGG, (double)e.aggregateUncSecDed);
    gs_gpu_set(c->g, GS_M_SRAM_THRESHOLD, e.bThresholdExceeded != 0);
    gs_gpu_set(c->g, GS_M_SRAM_L2, (double)e.aggregateUncBucketL2);
    gs_gpu_set(c->g, GS_M_SRAM_SM, (double)e.aggregateUncBucketSm);
    gs_gpu_set(c->g, GS_M_SRAM_MCU, (double)e.aggregateUncBucketMcu);
    gs_gpu_set(c->g, GS_M_SRAM_PCIE, (double)e.aggregateUncBucketPcie);
    gs_gpu_set(c->g, GS_M_SRAM_OTHER, (double)e.aggregateUncBucketOther);
}

/* Bank-remap availability: memory banks with all, many, some, few and no spare rows left. */
static void rd_remap_histogram(struct rd *c)
{
    static const enum gs_metric ms[] = {GS_M_REMAP_HIST_MAX, GS_M_REMAP_HIST_HIGH,
                                        GS_M_REMAP_HIST_PARTIAL, GS_M_REMAP_HIST_LOW,
                                        GS_M_REMAP_HIST_NONE};
    nvmlRowRemapperHistogramValues_t h;

    if (c->lost || !c->b->fn.remap_histogram || !gs_nvml_need_any(c, ms, COUNT_OF(ms)))
        return;
    memset(&h, 0, sizeof h);
    if (!ok_n(c, c->b->fn.remap_histogram(c->h, &h), ms, COUNT_OF(ms)))
        return;
    gs_gpu_set(c->g, GS_M_REMAP_HIST_MAX, h.max);
    gs_gpu_set(c->g, GS_M_REMAP_HIST_HIGH, h.high);
    gs_gpu_set(c->g, GS_M_REMAP_HIST_PARTIAL, h.partial);
    gs_gpu_set(c->g, GS_M_REMAP_HIST_LOW, h.low);
    gs_gpu_set(c->g, GS_M_REMAP_HIST_NONE, h.none);
}

/* Condition X of a fabric health mask (nvml.h's NVML_GPU_FABRIC_HEALTH_GET). */
#define FABRIC_HEALTH_GET(mask, X)                                                                 \
    (((mask) >> NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_##X) & NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_##X)

/* A two-state condition of the fabric health mask (TRUE 1, FALSE 2) as 1 / 0; NOT_SUPPORTED
 * (0) and values this header does not know leave the reading absent. */
static void fabric_flag(struct gs_gpu *g, enum gs_metric m, unsigned v)
{
    if (v == 1 || v == 2)
        gs_gpu_set(g, m, v == 1);
}

/* The health of a GPU's fabric attachment from the same v3 struct. nvidia-smi prints N/A for
 * the whole Health block while the summary is NOT_SUPPORTED, whatever the mask says, and N/A
 * for each condition the mask reports as NOT_SUPPORTED (0). */
static void fabric_health(struct gs_gpu *g, const nvmlGpuFabricInfo_v3_t *f)
{
    unsigned m = f->healthMask, cfg;

    if (f->healthSummary < NVML_GPU_FABRIC_HEALTH_SUMMARY_HEALTHY ||
        f->healthSummary > NVML_GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY)
        return;
    gs_gpu_set(g, GS_M_FABRIC_HEALTH_SUMMARY, f->healthSummary);
    fabric_flag(g, GS_M_FABRIC_HEALTH_BW_DEGRADED, FABRIC_HEALTH_GET(m, DEGRADED_BW));
    fabric_flag(g, GS_M_FABRIC_HEALTH_ROUTE_RECOVERY, FABRIC_HEALTH_GET(m, ROUTE_RECOVERY));
    fabric_flag(g, GS_M_FABRIC_HEALTH_ROUTE_UNHEALTHY, FABRIC_HEALTH_GET(m, ROUTE_UNHEALTHY));
    fabric_flag(g, GS_M_FABRIC_HEALTH_ACCESS_TIMEOUT,
                FABRIC_HEALTH_GET(m, ACCESS_TIMEOUT_RECOVERY));
    fabric_flag(g, GS_M_FABRIC_HEALTH_PARTITION, FABRIC_HEALTH_GET(m, PARTITION_ASSIGNED));
    cfg = FABRIC_HEALTH_GET(m, INCORRECT_CONFIGURATION);
    if (cfg >= NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_NONE &&
        cfg <= NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_GPU_STATE_INVALID)
        gs_gpu_set(g, GS_M_FABRIC_HEALTH_CONFIG, cfg);
}

/* NVLink fabric registration, version 3: its state, then (once completed) its outcome, clique
 * and cluster, and its health. State NOT_SUPPORTED reads as absent, as nvidia-smi prints N/A
 * for it. */
static void rd_fabric(struct rd *c)
{
    static const enum gs_metric ms[] = {
        GS_M_FABRIC_STATE,
        GS_M_FABRIC_STATUS,
        GS_M_FABRIC_CLIQUE,
        GS_M_FABRIC_HEALTH_SUMMARY,
        GS_M_FABRIC_HEALTH_BW_DEGRADED,
        GS_M_FABRIC_HEALTH_ROUTE_RECOVERY,
        GS_M_FABRIC_HEALTH_ROUTE_UNHEALTHY,
        GS_M_FABRIC_HEALTH_ACCESS_TIMEOUT,
        GS_M_FABRIC_HEALTH_CONFIG,
        GS_M_FABRIC_HEALTH_PARTITION,
    };
    nvmlGpuFabricInfo_v3_t f;
    struct gs_gpu *g = c->g;
    const unsigned char *u;

    if (c->lost || !c->b->fn.fabric_info ||
        !(gs_nvml_need_any(c, ms, COUNT_OF(ms)) || gs_nvml_need_t(c, GS_T_FABRIC_CLUSTER)))
        return;
    memset(&f, 0, sizeof f);
    f.version = nvmlGpuFabricInfo_v3;
    if (!ok_n(c, c->b->fn.fabric_info(c->h, &f), ms, COUNT_OF(ms)) ||
        f.state == NVML_GPU_FABRIC_STATE_NOT_SUPPORTED)
        return;
    gs_gpu_set(g, GS_M_FABRIC_STATE, f.state);
    fabric_health(g, &f);
    if (f.state != NVML_GPU_FABRIC_STATE_COMPLETED)
        return;
    gs_gpu_set(g, GS_M_FABRIC_STATUS, f.status);
    gs_gpu_set(g, GS_M_FABRIC_CLIQUE, f.cliqueId);
    u = f.clusterUuid;
    snprintf(g->text[GS_T_FABRIC_CLUSTER], GS_STR_LEN,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
             u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
             u[15]);
    g->tst[GS_T_FABRIC_CLUSTER] = GS_ST_OK;
}

void gs_nvml_read_detail(struct rd *c)
{
    const struct nvml_fns *f = &c->b->fn;

    if (!c->lost && f->addressing_mode && gs_nvml_need_m(c, GS_M_ADDRESSING_MODE)) {
        nvmlDeviceAddressingMode_t a;
        memset(&a, 0, sizeof a);
        a.version = nvmlDeviceAddressingMode_v1;
        if (gs_nvml_ok(c, &c->g->st[GS_M_ADDRESSING_MODE], f->addressing_mode(c->h, &a)))
            gs_gpu_set(c->g, GS_M_ADDRESSING_MODE, a.value);
    }
    rd_detail_uint(c, GS_M_VIRT_MODE, f->virt_mode);
    rd_detail_uint(c, GS_M_HOST_VGPU_MODE, f->host_vgpu_mode);
    if (!c->lost && f->c2c_mode && gs_nvml_need_m(c, GS_M_C2C_MODE)) {
        nvmlC2cModeInfo_v1_t m;
        memset(&m, 0, sizeof m);
        if (gs_nvml_ok(c, &c->g->st[GS_M_C2C_MODE], f->c2c_mode(c->h, &m)))
            gs_gpu_set(c->g, GS_M_C2C_MODE, m.isC2cEnabled != 0);
    }
    if (!c->lost && f->capabilities && gs_nvml_need_m(c, GS_M_EGM)) {
        nvmlDeviceCapabilities_t k;
        memset(&k, 0, sizeof k);
        k.version = nvmlDeviceCapabilities_v1;
        if (gs_nvml_ok(c, &c->g->st[GS_M_EGM], f->capabilities(c->h, &k)))
            gs_gpu_set(c->g, GS_M_EGM, (k.capMask & NVML_DEV_CAP_EGM) != 0);
    }
    rd_sram(c);
    rd_remap_histogram(c);
    rd_fabric(c);
}

/* ---- GS_WANT_DETAIL: the whole GPU's other -q rows ----------------------------------------- */

/* PCIe atomics the GPU issues and completes: field values 228/229 in a call of their own (the
 * agent's field batch does not carry them). */
static void rd_pcie_atomics(struct rd *c)
{
    static const enum gs_metric ms[] = {GS_M_PCIE_ATOMICS_OUT, GS_M_PCIE_ATOMICS_IN};
    nvmlFieldValue_t fv[2];
    double v;

    if (c->lost || !c->b->fn.field_values || !gs_nvml_need_any(c, ms, COUNT_OF(ms)))
        return;
    memset(fv, 0, sizeof fv);
    fv[0].fieldId = NVML_FI_DEV_PCIE_OUTBOUND_ATOMICS_MASK;
    fv[1].fieldId = NVML_FI_DEV_PCIE_INBOUND_ATOMICS_MASK;
    if (!ok_n(c, c->b->fn.field_values(c->h, 2, fv), ms, COUNT_OF(ms)))
        return;
    for (size_t i = 0; i < COUNT_OF(ms); i++) {
        if (!gs_nvml_ok(c, &c->g->st[ms[i]], gs_nvml_field_return(&fv[i])))
            continue;
        if (gs_nvml_field_double(&fv[i], &v) == GS_OK)
            gs_gpu_set(c->g, ms[i], v);
        else
            c->g->st[ms[i]] = GS_ST_NA;
    }
}

/* PDI, module id, GPU operation mode, vGPU heterogeneous mode, PCIe atomics, protected memory
 * and the unrepairable-memory flag: one call each, where the caller needs the reading. */
void gs_nvml_read_detail_gpu(struct rd *c)
{
    const struct nvml_fns *f = &c->b->fn;
    struct gs_gpu *g = c->g;

    if (!c->lost && f->pdi && gs_nvml_need_t(c, GS_T_PDI)) {
        nvmlPdi_t p;
        memset(&p, 0, sizeof p);
        p.version = nvmlPdi_v1;
        if (gs_nvml_ok(c, &g->tst[GS_T_PDI], f->pdi(c->h, &p))) {
            snprintf(g->text[GS_T_PDI], GS_STR_LEN, "0x%016llx", p.value);
            g->tst[GS_T_PDI] = GS_ST_OK;
        }
    }
    rd_detail_uint(c, GS_M_MODULE_ID, f->module_id);
    if (!c->lost && f->gom) {
        static const enum gs_metric ms[] = {GS_M_GOM_CURRENT, GS_M_GOM_PENDING};
        unsigned int cur = 0, pend = 0;
        if (gs_nvml_need_any(c, ms, COUNT_OF(ms)) &&
            ok_n(c, f->gom(c->h, &cur, &pend), ms, COUNT_OF(ms))) {
            gs_gpu_set(g, GS_M_GOM_CURRENT, cur);
            gs_gpu_set(g, GS_M_GOM_PENDING, pend);
        }
    }
    if (!c->lost && f->vgpu_hetero && gs_nvml_need_m(c, GS_M_VGPU_HETERO)) {
        nvmlVgpuHeterogeneousMode_t m;
        memset(&m, 0, sizeof m);
        m.version = nvmlVgpuHeterogeneousMode_v1;
        if (gs_nvml_ok(c, &g->st[GS_M_VGPU_HETERO], f->vgpu_hetero(c->h, &m)))
            gs_gpu_set(g, GS_M_VGPU_HETERO, m.mode != 0);
    }
    rd_pcie_atomics(c);
    if (!c->lost && f->cc_protected_mem) {
        static const enum gs_metric ms[] = {GS_M_CC_PROT_TOTAL, GS_M_CC_PROT_USED,
                                            GS_M_CC_PROT_FREE};
        nvmlMemory_t m;
        memset(&m, 0, sizeof m);
        if (gs_nvml_need_any(c, ms, COUNT_OF(ms)) &&
            ok_n(c, f->cc_protected_mem(c->h, &m), ms, COUNT_OF(ms))) {
            gs_gpu_set(g, GS_M_CC_PROT_TOTAL, (double)m.total);
            gs_gpu_set(g, GS_M_CC_PROT_USED, (double)m.used);
            gs_gpu_set(g, GS_M_CC_PROT_FREE, (double)m.free);
        }
    }
    if (!c->lost && f->unrepairable_mem && gs_nvml_need_m(c, GS_M_UNREPAIRABLE_MEM)) {
        nvmlUnrepairableMemoryStatus_v1_t u;
        memset(&u, 0, sizeof u);
        if (gs_nvml_ok(c, &g->st[GS_M_UNREPAIRABLE_MEM], f->unrepairable_mem(c->h, &u)))
            gs_gpu_set(g, GS_M_UNREPAIRABLE_MEM, u.bUnrepairableMemory != 0);
    }
}
