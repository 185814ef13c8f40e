/*
 * nvml_link.c - GPM (per GPU and per MIG GPU instance) and NVLink readings of one device.
 */
#include "backend/nvml_int.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- GPM -------------------------------------------------------------------------------- */

/* Learns once whether the GPU does GPM and allocates its two samples. */
int gs_nvml_gpm_ready(struct gs_backend *b, struct nvml_dev *d, int *lost)
{
    const struct nvml_fns *f = &b->fn;
    nvmlGpmSupport_t sup;
    nvmlReturn_t r;

    if (d->gpm != 0)
        return d->gpm > 0;
    if (!f->gpm_support || !f->gpm_alloc || !f->gpm_free || !f->gpm_get || !f->gpm_metrics) {
        d->gpm = -1;
        return 0;
    }
    memset(&sup, 0, sizeof sup);
    sup.version = NVML_GPM_SUPPORT_VERSION;
    r = f->gpm_support(d->h, &sup);
    if (r == NVML_ERROR_GPU_IS_LOST) {
        *lost = 1; /* ask again when it is back */
        return 0;
    }
    if (r != NVML_SUCCESS || !sup.isSupportedDevice) {
        d->gpm = -1;
        return 0;
    }
    if (!b->gpm_req) {
        b->gpm_req = calloc(1, sizeof *b->gpm_req);
        if (!b->gpm_req)
            return 0; /* try again next cycle */
    }
    if (f->gpm_alloc(&d->gpm_s[0]) != NVML_SUCCESS) {
        d->gpm_s[0] = NULL;
        d->gpm = -1;
        return 0;
    }
    if (f->gpm_alloc(&d->gpm_s[1]) != NVML_SUCCESS) {
        f->gpm_free(d->gpm_s[0]);
        d->gpm_s[0] = d->gpm_s[1] = NULL;
        d->gpm = -1;
        return 0;
    }
    d->gpm = 1;
    return 1;
}

/* Takes the first sample of a pair. */
nvmlReturn_t nvml_gpm_first(struct gs_backend *b, struct nvml_dev *d)
{
    int64_t t = gs_clock_mono_ns();
    nvmlReturn_t r = b->fn.gpm_get(d->h, d->gpm_s[0]);
    if (r == NVML_SUCCESS) {
        d->gpm_prev = 0;
        d->gpm_have = 1;
        d->gpm_t_ns = t;
    }
    return r;
}

void gs_nvml_read_gpm(struct rd *c)
{
    static const struct {
        unsigned id;
        enum gs_metric m;
    } metrics[] = {
        {NVML_GPM_METRIC_SM_UTIL, GS_M_GPM_SM_ACTIVE},
        {NVML_GPM_METRIC_SM_OCCUPANCY, GS_M_GPM_SM_OCCUPANCY},
        {NVML_GPM_METRIC_ANY_TENSOR_UTIL, GS_M_GPM_TENSOR_ACTIVE},
        {NVML_GPM_METRIC_DRAM_BW_UTIL, GS_M_GPM_DRAM_ACTIVE},
        {NVML_GPM_METRIC_GRAPHICS_UTIL, GS_M_GPM_GR_ACTIVE}, /* DCGM_FI_PROF_GR_ENGINE_ACTIVE */
    };
    struct gs_backend *b = c->b;
    struct nvml_dev *d = c->d;
    nvmlGpmMetricsGet_t *q;
    nvmlGpmSample_t cur;
    int64_t now;
    nvmlReturn_t r;

    if (c->lost || !gs_nvml_gpm_ready(b, d, &c->lost))
        return;
    if (!d->gpm_have) { /* the first of a pair: metrics come from the next cycle on */
        gs_nvml_ok(c, NULL, nvml_gpm_first(b, d));
        return;
    }
    now = gs_clock_mono_ns();
    if (now - d->gpm_t_ns < NVML_GPM_MIN_NS)
        return; /* too close to the previous sample: absent, keep the older one */
    cur = d->gpm_s[d->gpm_prev ^ 1];
    r = b->fn.gpm_get(c->h, cur);
    if (!gs_nvml_ok(c, &c->g->st[GS_M_GPM_SM_ACTIVE], r))
        return;
    q = b->gpm_req;
    memset(q, 0, offsetof(nvmlGpmMetricsGet_t, metrics) + COUNT_OF(metrics) * sizeof q->metrics[0]);
    q->version = NVML_GPM_METRICS_GET_VERSION;
    q->numMetrics = COUNT_OF(metrics); /* far below the 98 of the oldest drivers */
    q->sample1 = d->gpm_s[d->gpm_prev];
    q->sample2 = cur;
    for (size_t i = 0; i < COUNT_OF(metrics); i++)
        q->metrics[i].metricId = metrics[i].id;
    r = b->fn.gpm_metrics(q);
    /* The new sample is the start of the next interval whatever MetricsGet said. */
    d->gpm_prev ^= 1;
    d->gpm_t_ns = now;
    if (!gs_nvml_ok(c, &c->g->st[GS_M_GPM_SM_ACTIVE], r)) {
        for (size_t i = 1; i < COUNT_OF(metrics); i++)
            c->g->st[metrics[i].m] = c->g->st[GS_M_GPM_SM_ACTIVE];
        return;
    }
    for (size_t i = 0; i < COUNT_OF(metrics); i++) {
        if (q->metrics[i].nvmlReturn == NVML_SUCCESS)
            gs_gpu_set(c->g, metrics[i].m, q->metrics[i].value / 100.0);
        else
            c->g->st[metrics[i].m] = gs_nvml_status(q->metrics[i].nvmlReturn);
    }
}

/* ---- NVLink ----------------------------------------------------------------------------- */

static const enum gs_metric nvl_metrics[] = {
    GS_M_NVLINK_LINKS,    GS_M_NVLINK_LINKS_ACTIVE, GS_M_NVLINK_SPEED,    GS_M_NVLINK_TX,
    GS_M_NVLINK_RX,       GS_M_NVLINK_TX_BYTES,     GS_M_NVLINK_RX_BYTES, GS_M_NVLINK_REPLAY,
    GS_M_NVLINK_RECOVERY, GS_M_NVLINK_CRC_FLIT,     GS_M_NVLINK_CRC_DATA,
};

/* The speed field of link l (NVML has per-link ids for links 0..11 only), 0 past them. */
GS_TESTABLE unsigned gs_nvml_nvlink_speed_field(unsigned l)
{
    if (l <= 5)
        return NVML_FI_DEV_NVLINK_SPEED_MBPS_L0 + l;
    if (l <= 11)
        return NVML_FI_DEV_NVLINK_SPEED_MBPS_L6 + (l - 6);
    return 0;
}

/* One field's value as an unsigned count, or -1 when it failed (status in *st). */
static int nvl_field_u64(struct rd *c, const nvmlFieldValue_t *fv, uint8_t *st,
                         unsigned long long *out)
{
    double v;
    if (!gs_nvml_ok(c, st, gs_nvml_field_return(fv)))
        return -1;
    if (gs_nvml_field_double(fv, &v) != GS_OK || !(v >= 0 && v < 18446744073709551616.0)) {
        *st = GS_ST_NA;
        return -1;
    }
    *out = (unsigned long long)v;
    return 0;
}

/* Finds the GPU's links: nvmlDeviceGetNvLinkState for link 0, 1, ... until the driver refuses
 * one (INVALID_ARGUMENT past the last link; NOT_SUPPORTED on a GPU without NVLink, e.g. a PCIe
 * card), then reads what does not change while the links stay trained: each link's speed
 * (fields 84..89, 132..137, and 90 for all) and the PCI bus id of its far end. Once, and again
 * on GS_WANT_STATIC. */
static void nvl_probe(struct rd *c)
{
    const struct nvml_fns *f = &c->b->fn;
    struct nvml_dev *d = c->d;
    nvmlFieldValue_t fv[1 + 12];
    unsigned n = 0, nf = 0;

    d->nvl = -1;
    d->nvl_n = 0;
    d->nvl_speed_st = GS_ST_NA;
    d->nvl_active = 0;
    d->nvl_state_t = 0; /* set below once the states are read */
    memset(d->nvl_static, 0, sizeof d->nvl_static);
    if (c->lost || !f->nvlink_state)
        return;
    for (unsigned l = 0; l < GS_NVLINK_MAX; l++) {
        unsigned int st = 0;
        nvmlReturn_t r = f->nvlink_state(c->h, l, &st);
        if (r == NVML_ERROR_GPU_IS_LOST) {
            c->lost = 1;
            d->nvl = 0; /* probe again when it is back */
            d->nvl_active = 0;
            return;
        }
        if (r != NVML_SUCCESS)
            break;
        n = l + 1;
        /* the probe's answers are the links' states: not asked again in the same cycle */
        d->nvl_static[l].active = st == NVML_FEATURE_ENABLED;
        d->nvl_active += st == NVML_FEATURE_ENABLED;
    }
    if (n == 0)
        return;
    d->nvl = 1;
    d->nvl_n = n;
    d->nvl_state_t = gs_clock_real_s();
    if (f->field_values) {
        memset(fv, 0, sizeof fv);
        fv[nf++].fieldId = NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON;
        for (unsigned l = 0; l < n && gs_nvml_nvlink_speed_field(l); l++)
            fv[nf++].fieldId = gs_nvml_nvlink_speed_field(l);
        if (gs_nvml_ok(c, &d->nvl_speed_st, f->field_values(c->h, (int)nf, fv))) {
            unsigned long long mbps;
            if (nvl_field_u64(c, &fv[0], &d->nvl_speed_st, &mbps) == 0 && mbps > 0) {
                d->nvl_speed_bps = (double)mbps * 1e6;
                d->nvl_speed_st = GS_ST_OK;
            } else if (d->nvl_speed_st == GS_ST_OK) {
                d->nvl_speed_st = GS_ST_NA; /* 0: links down or speeds differ */
            }
            for (unsigned k = 1; k < nf; k++) {
                struct gs_nvlink *lk = &d->nvl_static[k - 1];
                if (nvl_field_u64(c, &fv[k], &lk->speed_st, &mbps) == 0) {
                    lk->speed_bps = (double)mbps * 1e6;
                    lk->speed_st = GS_ST_OK;
                }
            }
        }
        /* links past 11 have no field of their own: the common speed is theirs */
        for (unsigned l = nf - 1; l < n && d->nvl_speed_st == GS_ST_OK; l++) {
            d->nvl_static[l].speed_bps = d->nvl_speed_bps;
            d->nvl_static[l].speed_st = GS_ST_OK;
        }
    }
    /* the far end's bus id is the snapshot document's only (nvlinks[]): a caller that gives
     * a need mask does not print it */
    for (unsigned l = 0; l < n && f->nvlink_remote_pci && c->b->need_all && !c->lost; l++) {
        struct gs_nvlink *lk = &d->nvl_static[l];
        nvmlPciInfo_t pci;
        memset(&pci, 0, sizeof pci); /* the 68-byte struct of _v3 (§3) */
        if (!gs_nvml_ok(c, &lk->remote_st, f->nvlink_remote_pci(c->h, l, &pci)))
            continue;
        if (pci.busId[0])
            snprintf(lk->remote_bus_id, sizeof lk->remote_bus_id, "%.*s", (int)sizeof pci.busId,
                     pci.busId);
        else
            snprintf(lk->remote_bus_id, sizeof lk->remote_bus_id, "%08X:%02X:%02X.0", pci.domain,
                     pci.bus, pci.device);
        lk->remote_st = GS_ST_OK;
    }
}

/* The data counters (fields 138/139, KiB) of every link and of all links (scopeId UINT_MAX), in
 * one call; the rate is the change of the total since the previous reading over the driver's
 * own timestamps (our clock when the driver gives none). Returns 0 when the totals were read. */
static int nvl_counters(struct rd *c, struct gs_gpu *g, unsigned long long tot[2], long long *ts_us)
{
    const struct nvml_fns *f = &c->b->fn;
    struct nvml_dev *d = c->d;
    nvmlFieldValue_t fv[2 * GS_NVLINK_MAX + 2];
    unsigned n = d->nvl_n, nf = 0;
    uint8_t st = GS_ST_NA;
    int have_sum = 1;

    if (!f->field_values)
        return -1;
    memset(fv, 0, sizeof fv);
    for (unsigned k = 0; k < 2; k++) {
        unsigned id =
            k ? NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX : NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX;
        fv[nf].fieldId = id;
        fv[nf++].scopeId = GS_NVML_SCOPE_ALL_LINKS;
        for (unsigned l = 0; l < n; l++) {
            fv[nf].fieldId = id;
            fv[nf++].scopeId = l;
        }
    }
    if (!gs_nvml_ok(c, &st, f->field_values(c->h, (int)nf, fv))) {
        for (size_t i = 0; i < COUNT_OF(nvl_metrics); i++)
            if (nvl_metrics[i] == GS_M_NVLINK_TX_BYTES || nvl_metrics[i] == GS_M_NVLINK_RX_BYTES)
                g->st[nvl_metrics[i]] = st;
        return -1;
    }
    *ts_us = fv[0].timestamp;
    for (unsigned k = 0; k < 2; k++) {
        const nvmlFieldValue_t *base = &fv[k * (n + 1)];
        unsigned long long sum = 0, v;
        int all = 1;
        for (unsigned l = 0; l < n; l++) {
            struct gs_nvlink *lk = &g->nvlink[l];
            uint8_t lst = GS_ST_NA;
            if (nvl_field_u64(c, &base[1 + l], &lst, &v) != 0) {
                lk->tput_st = lst;
                all = 0;
                continue;
            }
            if (k == 0)
                lk->tx_bytes = v * 1024;
            else
                lk->rx_bytes = v * 1024;
            lk->tput_st = (k == 0 || lk->tput_st == GS_ST_OK) ? GS_ST_OK : lk->tput_st;
            sum += v;
        }
        st = GS_ST_NA;
        if (nvl_field_u64(c, &base[0], &st, &v) == 0)
            tot[k] = v * 1024;
        else if (all)
            tot[k] = sum * 1024; /* a driver without the all-links scope: the links' sum */
        else
            have_sum = 0;
        if (have_sum)
            gs_gpu_set(g, k ? GS_M_NVLINK_RX_BYTES : GS_M_NVLINK_TX_BYTES, (double)tot[k]);
        else
            g->st[k ? GS_M_NVLINK_RX_BYTES : GS_M_NVLINK_TX_BYTES] = st;
    }
    return have_sum ? 0 : -1;
}

/* The rate from two readings of the totals: absent on the first, after a counter went back
 * (reset, wrap) or when no time passed between them. */
static void nvl_rate(struct nvml_dev *d, struct gs_gpu *g, const unsigned long long tot[2],
                     long long ts_us, int64_t now)
{
    double dt = 0;

    if (d->nvl_have) {
        if (ts_us > 0 && d->nvl_prev_us > 0)
            dt = (double)(ts_us - d->nvl_prev_us) * 1e-6;
        else if (ts_us <= 0)
            dt = (double)(now - d->nvl_prev_ns) * 1e-9;
    }
    if (dt > 0 && tot[0] >= d->nvl_prev[0] && tot[1] >= d->nvl_prev[1]) {
        gs_gpu_set(g, GS_M_NVLINK_TX, (double)(tot[0] - d->nvl_prev[0]) / dt);
        gs_gpu_set(g, GS_M_NVLINK_RX, (double)(tot[1] - d->nvl_prev[1]) / dt);
    }
    /* keep the older reading when no time passed, so the next interval is not lost */
    if (!d->nvl_have || dt > 0 || tot[0] < d->nvl_prev[0] || tot[1] < d->nvl_prev[1]) {
        d->nvl_prev[0] = tot[0];
        d->nvl_prev[1] = tot[1];
        d->nvl_prev_us = ts_us;
        d->nvl_prev_ns = now;
        d->nvl_have = 1;
    }
}

/* Each link's error counters (nvmlDeviceGetNvLinkErrorCounter) and their sums (health). */
static void nvl_errors(struct rd *c, struct gs_gpu *g)
{
    static const enum gs_metric sums[GS_NVL_ERR__COUNT] = {
        GS_M_NVLINK_REPLAY, GS_M_NVLINK_RECOVERY, GS_M_NVLINK_CRC_FLIT, GS_M_NVLINK_CRC_DATA};
    static const unsigned counters[GS_NVL_ERR__COUNT] = {
        NVML_NVLINK_ERROR_DL_REPLAY, NVML_NVLINK_ERROR_DL_RECOVERY, NVML_NVLINK_ERROR_DL_CRC_FLIT,
        NVML_NVLINK_ERROR_DL_CRC_DATA};
    fn_d_nvl_err fn = c->b->fn.nvlink_errors;

    if (!fn)
        return;
    for (unsigned e = 0; e < GS_NVL_ERR__COUNT && !c->lost; e++) {
        unsigned long long sum = 0;
        unsigned got = 0;
        uint8_t st = GS_ST_NA;

        if (c->b->mask_health && !gs_nvml_need_m(c, sums[e]))
            continue; /* a masked health read asks only for the sums it prints */
        for (unsigned l = 0; l < c->d->nvl_n && !c->lost; l++) {
            struct gs_nvlink *lk = &g->nvlink[l];
            unsigned long long v = 0;
            if (!gs_nvml_ok(c, &lk->err_st[e], fn(c->h, l, counters[e], &v))) {
                st = lk->err_st[e] != GS_ST_NA ? lk->err_st[e] : st;
                continue;
            }
            lk->err[e] = v;
            lk->err_st[e] = GS_ST_OK;
            sum += v;
            got++;
        }
        if (got)
            gs_gpu_set(g, sums[e], (double)sum);
        else
            g->st[sums[e]] = st;
    }
}

/* Links, their state, data counters and rate every cycle (one state call per link and one
 * field-value call); error counters with GS_WANT_HEALTH. */
void gs_nvml_read_nvlink(struct rd *c, unsigned want)
{
    struct nvml_dev *d = c->d;
    struct gs_gpu *g = c->g;
    unsigned long long tot[2] = {0, 0};
    long long ts_us = 0;
    unsigned active = 0;
    int probed = 0;

    if (c->lost || !gs_nvml_need_any(c, nvl_metrics, COUNT_OF(nvl_metrics)))
        return;
    if (d->nvl == 0 || (want & GS_WANT_STATIC)) {
        nvl_probe(c);
        probed = 1;
    }
    if (c->lost || d->nvl <= 0)
        return;
    g->n_nvlink = d->nvl_n;
    memcpy(g->nvlink, d->nvl_static, d->nvl_n * sizeof g->nvlink[0]);
    gs_gpu_set(g, GS_M_NVLINK_LINKS, d->nvl_n);
    if (d->nvl_speed_st == GS_ST_OK)
        gs_gpu_set(g, GS_M_NVLINK_SPEED, d->nvl_speed_bps);
    else
        g->st[GS_M_NVLINK_SPEED] = d->nvl_speed_st;
    /* The links' states change rarely (a link that fails to train, a cable, a fabric fault):
     * on the caller's cadence, held in between (g->nvlink[].active came with nvl_static). */
    if ((!probed && (want & GS_WANT_NVLINK_STATE)) || d->nvl_state_t == 0) {
        for (unsigned l = 0; l < d->nvl_n && !c->lost; l++) {
            unsigned int st = 0;
            g->nvlink[l].active = 0;
            if (gs_nvml_ok(c, &g->st[GS_M_NVLINK_LINKS_ACTIVE],
                           c->b->fn.nvlink_state(c->h, l, &st)) &&
                st == NVML_FEATURE_ENABLED) {
                g->nvlink[l].active = 1;
                active++;
            }
        }
        if (c->lost)
            return;
        for (unsigned l = 0; l < d->nvl_n; l++)
            d->nvl_static[l].active = g->nvlink[l].active;
        d->nvl_active = active;
        d->nvl_state_t = gs_clock_real_s();
    }
    gs_gpu_set(g, GS_M_NVLINK_LINKS_ACTIVE, d->nvl_active);
    g->nvlink_state_t = d->nvl_state_t;
    if (nvl_counters(c, g, tot, &ts_us) == 0)
        nvl_rate(d, g, tot, ts_us, gs_clock_mono_ns());
    if (want & GS_WANT_HEALTH)
        nvl_errors(c, g);
}

/* GS_WANT_PCIE_TPUT at a GPU's first cycle: one counter reading now, so that this cycle has a
 * rate (begin then waits 20 ms once for all GPUs, like NVML's own PCIe window). */
int gs_nvml_nvl_prime(struct gs_backend *b, struct nvml_dev *d)
{
    struct gs_gpu *g = calloc(1, sizeof *g);
    struct rd c = {b, d, d->h, g, 0, NVML_SUCCESS, 1};
    unsigned long long tot[2] = {0, 0};
    long long ts_us = 0;
    int primed = 0;

    if (!g)
        return 0;
    if (!gs_nvml_need_m(&c, GS_M_NVLINK_TX) && !gs_nvml_need_m(&c, GS_M_NVLINK_RX)) {
        free(g); /* no NVLink rate asked for: no probe, no priming wait */
        return 0;
    }
    if (d->nvl == 0)
        nvl_probe(&c);
    if (!c.lost && d->nvl > 0 && !d->nvl_have && nvl_counters(&c, g, tot, &ts_us) == 0) {
        nvl_rate(d, g, tot, ts_us, gs_clock_mono_ns());
        primed = 1;
    }
    free(g);
    return primed;
}

/* ---- GPM per MIG GPU instance ------------------------------------------------------------ */

void gs_nvml_mig_gpm_drop(struct gs_backend *b, struct mig_gpm *p)
{
    for (int k = 0; k < 2; k++)
        if (p->s[k])
            b->fn.gpm_free(p->s[k]);
    memset(p, 0, sizeof *p);
}

/* The sample pair of instance gi, made on first sight; NULL when no room or no memory. */
static struct mig_gpm *mig_gpm_slot(struct gs_backend *b, struct nvml_dev *d, unsigned gi)
{
    struct mig_gpm *p;

    for (unsigned i = 0; i < d->n_mgpm; i++)
        if (d->mgpm[i].gi == gi)
            return &d->mgpm[i];
    if (d->n_mgpm >= GS_MIG_MAX)
        return NULL;
    p = &d->mgpm[d->n_mgpm];
    memset(p, 0, sizeof *p);
    p->gi = gi;
    if (b->fn.gpm_alloc(&p->s[0]) != NVML_SUCCESS || b->fn.gpm_alloc(&p->s[1]) != NVML_SUCCESS) {
        if (p->s[0])
            b->fn.gpm_free(p->s[0]);
        memset(p, 0, sizeof *p);
        return NULL;
    }
    d->n_mgpm++;
    return p;
}

/* One instance's GPM figures into m (absent on the first sample of a pair). */
static void mig_gpm_read(struct rd *c, struct mig_gpm *p, struct gs_mig *m)
{
    static const unsigned ids[GS_MIG_GPM__COUNT] = {
        [GS_MIG_GPM_SM_ACTIVE] = NVML_GPM_METRIC_SM_UTIL,
        [GS_MIG_GPM_SM_OCCUPANCY] = NVML_GPM_METRIC_SM_OCCUPANCY,
        [GS_MIG_GPM_TENSOR_ACTIVE] = NVML_GPM_METRIC_ANY_TENSOR_UTIL,
        [GS_MIG_GPM_DRAM_ACTIVE] = NVML_GPM_METRIC_DRAM_BW_UTIL,
        [GS_MIG_GPM_GR_ACTIVE] = NVML_GPM_METRIC_GRAPHICS_UTIL,
    };
    struct gs_backend *b = c->b;
    nvmlGpmMetricsGet_t *q = b->gpm_req;
    nvmlGpmSample_t cur;
    int64_t now = gs_clock_mono_ns();
    nvmlReturn_t r;

    if (!p->have) {
        if (gs_nvml_ok(c, NULL, b->fn.gpm_mig_get(c->h, p->gi, p->s[0]))) {
            p->prev = 0;
            p->have = 1;
            p->t_ns = now;
        }
        return;
    }
    if (now - p->t_ns < NVML_GPM_MIN_NS)
        return;
    cur = p->s[p->prev ^ 1];
    r = b->fn.gpm_mig_get(c->h, p->gi, cur);
    if (!gs_nvml_ok(c, &m->gpm_st[0], r)) {
        for (int k = 1; k < GS_MIG_GPM__COUNT; k++)
            m->gpm_st[k] = m->gpm_st[0];
        return;
    }
    memset(q, 0, offsetof(nvmlGpmMetricsGet_t, metrics) + COUNT_OF(ids) * sizeof q->metrics[0]);
    q->version = NVML_GPM_METRICS_GET_VERSION;
    q->numMetrics = COUNT_OF(ids);
    q->sample1 = p->s[p->prev];
    q->sample2 = cur;
    for (size_t k = 0; k < COUNT_OF(ids); k++)
        q->metrics[k].metricId = ids[k];
    r = b->fn.gpm_metrics(q);
    p->prev ^= 1;
    p->t_ns = now;
    for (size_t k = 0; k < COUNT_OF(ids); k++) {
        nvmlReturn_t mr = r == NVML_SUCCESS ? q->metrics[k].nvmlReturn : r;
        if (mr == NVML_SUCCESS) {
            m->gpm_st[k] = GS_ST_OK;
            m->gpm[k] = q->metrics[k].value / 100.0;
        } else {
            m->gpm_st[k] = gs_nvml_status(mr);
        }
    }
}

/* GPM of every GPU instance of a GPU in MIG mode (GS_WANT_GPM with GS_WANT_MIG): the
 * parent's handle and the instance id; compute instances of one GPU instance share it. */
void gs_nvml_read_mig_gpm(struct rd *c)
{
    struct gs_backend *b = c->b;
    struct nvml_dev *d = c->d;
    struct gs_gpu *g = c->g;

    if (c->lost || !b->fn.gpm_mig_get || !gs_gpu_mig_on(g) || g->n_mig == 0 ||
        !gs_nvml_gpm_ready(b, d, &c->lost))
        return;
    for (unsigned i = 0; i < d->n_mgpm; i++)
        d->mgpm[i].seen = 0;
    for (unsigned i = 0; i < g->n_mig && !c->lost; i++) {
        struct gs_mig *m = &g->mig[i];
        struct mig_gpm *p;
        unsigned j;

        for (j = 0; j < i && g->mig[j].gi_id != m->gi_id; j++)
            ;
        if (j < i) { /* a second compute instance of a GPU instance read already */
            memcpy(m->gpm_st, g->mig[j].gpm_st, sizeof m->gpm_st);
            memcpy(m->gpm, g->mig[j].gpm, sizeof m->gpm);
            continue;
        }
        if (m->gi_id == NVML_MIG_ID_NONE || !(p = mig_gpm_slot(b, d, m->gi_id)))
            continue;
        p->seen = 1;
        mig_gpm_read(c, p, m);
    }
    for (unsigned i = 0; i < d->n_mgpm;) /* instances gone (MIG reconfigured): free them */
        if (!d->mgpm[i].seen) {
            gs_nvml_mig_gpm_drop(b, &d->mgpm[i]);
            d->mgpm[i] = d->mgpm[--d->n_mgpm];
            memset(&d->mgpm[d->n_mgpm], 0, sizeof d->mgpm[0]);
        } else {
            i++;
        }
}
