/*
 * The NVML backend: the only code in gpuscope that talks to the NVIDIA driver.
 *
 * It opens libnvidia-ml.so.1 (or $GPUSCOPE_NVML_LIBRARY, or the path the caller gives) with
 * dlopen and resolves every symbol on its own, newest version first, from the table
 * NVML_SYMS below; only nvmlInit and nvmlDeviceGetCount are required, everything else may be
 * missing and then reads as absent. NVML is initialised once at open, device handles are
 * cached, and each reading is converted once to base units (W, J, Hz, bytes, ratios, s).
 * docs/backend.md explains which call fills which field, and when.
 *
 * Per-call outcome -> field status: SUCCESS -> OK; NOT_SUPPORTED, FUNCTION_NOT_FOUND,
 * ARGUMENT_VERSION_MISMATCH, DEPRECATED or a NULL symbol -> absent; NO_PERMISSION -> NOPERM;
 * GPU_IS_LOST -> the GPU is marked lost and nothing more is asked of it this cycle; anything
 * else -> ERROR for that field only.
 *
 * State (device handles, the identity cache, previous GPM samples, the event set, scratch
 * buffers for process lists) lives in struct gs_backend; scratch buffers grow only when the
 * driver reports more entries than ever before, so a warm cycle allocates nothing.
 */
#include "backend/nvml.h"

#include "backend/nvml_int.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NVML_ROW_(f, t, ...) {offsetof(struct nvml_fns, f), {__VA_ARGS__, NULL}},
const struct nvml_sym nvml_syms[SYM__COUNT] = {NVML_SYMS(NVML_ROW_)};
#undef NVML_ROW_

/* Fields read once at open: they never change while a handle lives. */
static const enum gs_metric ident_metrics[] = {
    GS_M_MINOR,          GS_M_ARCH,          GS_M_BRAND,         GS_M_PCI_DOMAIN,
    GS_M_PCI_BUS,        GS_M_PCI_DEVICE,    GS_M_PCI_DEVICE_ID, GS_M_PCI_SUBSYS_ID,
    GS_M_CC_MAJOR,       GS_M_CC_MINOR,      GS_M_GSP_MODE,      GS_M_GSP_MODE_DEFAULT,
    GS_M_PCI_BASE_CLASS, GS_M_PCI_SUB_CLASS,
};

/* Slow-changing fields: read at the first cycle and on GS_WANT_STATIC, repeated otherwise. */
static const enum gs_metric slow_metrics[] = {
    GS_M_POWER_LIMIT,     GS_M_POWER_DEFAULT_LIMIT, GS_M_POWER_MIN_LIMIT,    GS_M_POWER_MAX_LIMIT,
    GS_M_CLOCK_MAX_GR,    GS_M_CLOCK_MAX_SM,        GS_M_CLOCK_MAX_MEM,      GS_M_CLOCK_MAX_VIDEO,
    GS_M_TEMP_SHUTDOWN,   GS_M_TEMP_SLOWDOWN,       GS_M_TEMP_GPU_MAX,       GS_M_TEMP_MEM_MAX,
    GS_M_ECC_MODE,        GS_M_ECC_MODE_PENDING,    GS_M_PCIE_GEN_MAX,       GS_M_PCIE_GEN_GPU_MAX,
    GS_M_PCIE_WIDTH_MAX,  GS_M_THROTTLE_SUPPORTED,  GS_M_PERSISTENCE,        GS_M_COMPUTE_MODE,
    GS_M_MIG_MODE,        GS_M_MIG_MODE_PENDING,    GS_M_INFOROM_VALID,      GS_M_DISPLAY_ATTACHED,
    GS_M_DISPLAY_ACTIVE,  GS_M_ACCOUNTING,          GS_M_ACCOUNTING_BUFFER,  GS_M_TEMP_TARGET,
    GS_M_TEMP_TARGET_MIN, GS_M_TEMP_TARGET_MAX,     GS_M_REPAIR_CHANNEL,     GS_M_REPAIR_TPC,
    GS_M_BOARD_ID,        GS_M_MULTI_GPU_BOARD,     GS_M_CLOCK_BOOST_MAX_GR,
};

/* ---- small helpers ---------------------------------------------------------------------- */

static const char *sym_name(const struct gs_backend *b, enum nvml_sym_id id)
{
    int k = b->found[id];
    return nvml_syms[id].names[k < 0 ? 0 : k];
}

/* NVML's own text when the library has nvmlErrorString, ours otherwise. */
const char *gs_nvml_errstr(const struct gs_backend *b, nvmlReturn_t r)
{
    const char *s = b && b->fn.error_string ? b->fn.error_string(r) : NULL;
    if (s && *s)
        return s;
    switch (r) {
    case NVML_ERROR_UNINITIALIZED:
        return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
        return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
        return "Not Supported";
    case NVML_ERROR_NO_PERMISSION:
        return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND:
        return "Not Found";
    case NVML_ERROR_DRIVER_NOT_LOADED:
        return "Driver Not Loaded";
    case NVML_ERROR_LIBRARY_NOT_FOUND:
        return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND:
        return "Function Not Found";
    case NVML_ERROR_GPU_IS_LOST:
        return "GPU is lost";
    case NVML_ERROR_GPU_NOT_FOUND:
        return "No supported GPUs were found";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
        return "Driver/library version mismatch";
    }
    return "Unknown Error";
}

uint8_t gs_nvml_status(nvmlReturn_t r)
{
    switch (r) {
    case NVML_SUCCESS:
        return GS_ST_OK;
    case NVML_ERROR_NOT_SUPPORTED:
    case NVML_ERROR_FUNCTION_NOT_FOUND:
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
    case NVML_ERROR_DEPRECATED:
        return GS_ST_NA;
    case NVML_ERROR_NO_PERMISSION:
        return GS_ST_NOPERM;
    case NVML_ERROR_GPU_IS_LOST:
        return GS_ST_LOST;
    }
    return GS_ST_ERROR;
}

GS_TESTABLE int gs_nvml_init_rc(nvmlReturn_t r)
{
    switch (r) {
    case NVML_SUCCESS:
        return GS_OK;
    case NVML_ERROR_DRIVER_NOT_LOADED:
        return GS_ENODRIVER;
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
        return GS_EMISMATCH;
    case NVML_ERROR_NO_PERMISSION:
        return GS_EPERM;
    case NVML_ERROR_LIBRARY_NOT_FOUND:
        return GS_ENOLIB;
    case NVML_ERROR_GPU_NOT_FOUND:
        return GS_ENOGPU; /* init with no supported GPU */
    case NVML_ERROR_GPU_IS_LOST:
        return GS_ELOST;
    case NVML_ERROR_MEMORY:
        return GS_ENOMEM;
    }
    return GS_ENVML;
}

/* Codes after which nothing on any GPU can work until NVML is re-initialised. */
int gs_nvml_driver_gone(nvmlReturn_t r)
{
    return r == NVML_ERROR_UNINITIALIZED || r == NVML_ERROR_DRIVER_NOT_LOADED ||
           r == NVML_ERROR_LIB_RM_VERSION_MISMATCH;
}

GS_TESTABLE unsigned gs_nvml_proc_stride(int found, int has_conf_compute, int has_detail_list)
{
    switch (found) {
    case 0: /* _v3 wrote 32-byte entries only on 535.43–535.86 (§7, nvitop's rule) */
        return has_conf_compute && !has_detail_list ? 32 : 24;
    case 1:
        return 24;
    case 2:
        return 16;
    }
    return 0;
}

/* A field value's outcome, with an id (or scope) newer than the driver as NOT_SUPPORTED: such a
 * field fails by itself, with INVALID_ARGUMENT or NOT_FOUND on some drivers, and is absent. */
nvmlReturn_t gs_nvml_field_return(const nvmlFieldValue_t *fv)
{
    nvmlReturn_t r = fv->nvmlReturn;

    return r == NVML_ERROR_INVALID_ARGUMENT || r == NVML_ERROR_NOT_FOUND ? NVML_ERROR_NOT_SUPPORTED
                                                                         : r;
}

int gs_nvml_field_double(const nvmlFieldValue_t *fv, double *out)
{
    switch (fv->valueType) {
    case NVML_VALUE_TYPE_DOUBLE:
        *out = fv->value.dVal;
        break;
    case NVML_VALUE_TYPE_UNSIGNED_INT:
        *out = fv->value.uiVal;
        break;
    case NVML_VALUE_TYPE_UNSIGNED_LONG:
        *out = (double)fv->value.ulVal;
        break;
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
        *out = (double)fv->value.ullVal;
        break;
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG:
        *out = (double)fv->value.sllVal;
        break;
    case NVML_VALUE_TYPE_SIGNED_INT:
        *out = fv->value.siVal;
        break;
    case NVML_VALUE_TYPE_UNSIGNED_SHORT:
        *out = fv->value.usVal;
        break;
    default:
        return GS_ENOTSUP;
    }
    return GS_OK;
}

void gs_nvml_copy_text(char *dst, const char *src, size_t src_cap)
{
    size_t n = strnlen(src, src_cap);
    if (n >= GS_STR_LEN)
        n = GS_STR_LEN - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static void copy_metrics(struct gs_gpu *dst, const struct gs_gpu *src, const enum gs_metric *ms,
                         size_t n)
{
    for (size_t i = 0; i < n; i++) {
        dst->st[ms[i]] = src->st[ms[i]];
        dst->v[ms[i]] = src->v[ms[i]];
    }
}

/* ---- loading ---------------------------------------------------------------------------- */

static void load_symbols(struct gs_backend *b)
{
    for (int i = 0; i < SYM__COUNT; i++) {
        b->found[i] = -1;
        for (int k = 0; nvml_syms[i].names[k]; k++) {
            void *p = dlsym(b->lib, nvml_syms[i].names[k]);
            if (p) {
                memcpy((char *)&b->fn + nvml_syms[i].off, &p, sizeof p);
                b->found[i] = (signed char)k;
                break;
            }
        }
    }
    b->proc_stride[0] =
        gs_nvml_proc_stride(b->found[SYM_procs_compute], b->fn.conf_compute_mem != NULL,
                            b->fn.proc_detail_list != NULL);
    b->proc_stride[1] =
        gs_nvml_proc_stride(b->found[SYM_procs_graphics], b->fn.conf_compute_mem != NULL,
                            b->fn.proc_detail_list != NULL);
    b->proc_stride[2] = gs_nvml_proc_stride(b->found[SYM_procs_mps], b->fn.conf_compute_mem != NULL,
                                            b->fn.proc_detail_list != NULL);
}

/* ---- one device's reads: nvml_read.c; GPM and NVLink: nvml_link.c; processes: nvml_proc.c */

/* ---- events ----------------------------------------------------------------------------- */

static void events_register(struct gs_backend *b)
{
    const struct nvml_fns *f = &b->fn;

    if (b->ev_state == 0) {
        b->ev_state = -1;
        if (f->event_create && f->event_register && f->event_wait && f->event_free &&
            f->event_create(&b->evset) == NVML_SUCCESS)
            b->ev_state = 1;
    }
    if (b->ev_state < 0)
        return;
    for (unsigned i = 0; i < b->n; i++) {
        struct nvml_dev *d = &b->dev[i];
        unsigned long long mask = 0;
        nvmlReturn_t r;
        if (!d->h || d->xid_reg != 0)
            continue;
        /* Register only what the GPU reports: newer bits confuse older drivers (§8). */
        if (f->event_supported) {
            r = f->event_supported(d->h, &mask);
            if (r == NVML_ERROR_GPU_IS_LOST)
                continue;
            if (r == NVML_SUCCESS && !(mask & nvmlEventTypeXidCriticalError)) {
                d->xid_reg = -1;
                continue;
            }
        }
        r = f->event_register(d->h, nvmlEventTypeXidCriticalError, b->evset);
        if (r == NVML_SUCCESS)
            d->xid_reg = 1;
        else if (r != NVML_ERROR_GPU_IS_LOST)
            d->xid_reg = -1;
    }
}

/* Drains queued events without waiting (timeout 0). */
static void events_poll(struct gs_backend *b)
{
    for (int k = 0; k < NVML_EVENTS_PER_CYCLE; k++) {
        nvmlEventData_t ev; /* 32 bytes whichever symbol writes it (§8) */
        memset(&ev, 0, sizeof ev);
        if (b->fn.event_wait(b->evset, &ev, 0) != NVML_SUCCESS)
            return; /* TIMEOUT: nothing queued */
        if (!(ev.eventType & nvmlEventTypeXidCriticalError))
            continue;
        for (unsigned i = 0; i < b->n; i++)
            if (b->dev[i].h && b->dev[i].h == ev.device)
                b->dev[i].xid_last = ev.eventData;
    }
}

/* ---- ops -------------------------------------------------------------------------------- */

static void nvml_close(struct gs_backend *b)
{
    if (!b)
        return;
    for (unsigned i = 0; b->dev && i < b->n; i++) {
        struct nvml_dev *d = &b->dev[i];
        for (int k = 0; k < 2; k++)
            if (d->gpm_s[k] && b->fn.gpm_free)
                b->fn.gpm_free(d->gpm_s[k]);
        for (unsigned k = 0; k < d->n_mgpm; k++)
            gs_nvml_mig_gpm_drop(b, &d->mgpm[k]);
        free(d->urec);
    }
    if (b->ev_state > 0)
        b->fn.event_free(b->evset);
    if (b->inited && b->fn.shutdown)
        b->fn.shutdown();
    if (b->lib)
        dlclose(b->lib);
    free(b->dev);
    free(b->pbuf);
    free(b->ubuf);
    free(b->sbuf);
    free(b->gpm_req);
    free(b);
}

/* nvml-sim's marker (sim/nvml_system.c): not part of NVML, so not in nvml_abi.h; a driver's
 * library has no such symbol. */
typedef nvmlReturn_t (*sim_info_fn)(char *info, unsigned int length);
typedef nvmlReturn_t (*sim_host_fn)(unsigned int pid, unsigned int *is_host);

static void read_simulated(struct gs_backend *b)
{
    char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
    void *p = dlsym(b->lib, "nvmlSimGetInfo");
    sim_info_fn f;

    if (!p)
        return;
    memcpy(&f, &p, sizeof f);
    memset(buf, 0, sizeof buf);
    b->sys.simulated = 1;
    if (f(buf, sizeof buf) != NVML_SUCCESS || !buf[0])
        snprintf(buf, sizeof buf, "nvml-sim");
    gs_nvml_copy_text(b->sys.sim_info, buf, sizeof buf);
    p = dlsym(b->lib, "nvmlSimProcessIsHost");
    if (p)
        memcpy(&b->sim_is_host, &p, sizeof p);
}

/* Whether a simulated pid has no process of this host behind it (see nvmlSimProcessIsHost):
 * always 0 with a driver's library; 1 with a sim that cannot tell. */
int gs_nvml_sim_only_pid(const struct gs_backend *b, unsigned pid)
{
    sim_host_fn f;
    unsigned int host = 0;

    if (!b->sys.simulated)
        return 0;
    if (!b->sim_is_host)
        return 1;
    memcpy(&f, &b->sim_is_host, sizeof f);
    return f(pid, &host) != NVML_SUCCESS || !host;
}

static void read_system(struct gs_backend *b)
{
    char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
    int cuda = 0;

    read_simulated(b);

    memset(buf, 0, sizeof buf);
    if (b->fn.driver_version && b->fn.driver_version(buf, sizeof buf) == NVML_SUCCESS) {
        gs_nvml_copy_text(b->sys.driver_version, buf, sizeof buf);
        b->sys.driver_st = GS_ST_OK;
    }
    memset(buf, 0, sizeof buf);
    if (b->fn.nvml_version && b->fn.nvml_version(buf, sizeof buf) == NVML_SUCCESS) {
        gs_nvml_copy_text(b->sys.nvml_version, buf, sizeof buf);
        b->sys.nvml_st = GS_ST_OK;
    }
    if (b->fn.cuda_version && b->fn.cuda_version(&cuda) == NVML_SUCCESS) {
        b->sys.cuda_version = cuda;
        b->sys.cuda_st = GS_ST_OK;
    }
    b->sys.gpu_count = b->n;
}

static void dev_attach(struct gs_backend *b, unsigned i)
{
    struct nvml_dev *d = &b->dev[i];
    struct rd c = {b, d, NULL, &d->cache, 0, NVML_SUCCESS, 1};

    if (!d->h) {
        d->h_rc = b->fn.handle(i, &d->h);
        if (d->h_rc != NVML_SUCCESS) {
            d->h = NULL;
            return;
        }
    }
    if (d->ident_done)
        return;
    c.h = d->h;
    gs_nvml_read_identity(&c);
    d->ident_done = !c.lost;
}

static int nvml_open(struct gs_backend **out, const struct gs_backend_opts *opts,
                     struct gs_err *err)
{
    struct gs_backend *b = calloc(1, sizeof *b);
    const char *path = opts ? opts->library : NULL;
    unsigned int n = 0;
    nvmlReturn_t r;
    int rc;

    if (!b)
        return gs_err_set(err, GS_ENOMEM, "nvml: out of memory");
    b->need_all = !opts || (!opts->need_metrics && !opts->need_texts);
    if (!b->need_all) {
        if (opts->need_metrics)
            memcpy(b->need_m, opts->need_metrics, sizeof b->need_m);
        if (opts->need_texts)
            memcpy(b->need_t, opts->need_texts, sizeof b->need_t);
        b->mask_health = opts->mask_health;
    }
    b->mig_sram_ecc = opts && opts->mig_sram_ecc;
    if (!path || !*path)
        path = getenv("GPUSCOPE_NVML_LIBRARY");
    if (!path || !*path)
        path = NVML_DEFAULT_LIBRARY;
    snprintf(b->path, sizeof b->path, "%s", path);
    b->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!b->lib) {
        const char *why = dlerror();
        rc = gs_err_set(err, GS_ENOLIB, "nvml: cannot load %s: %s", path, why ? why : "?");
        goto fail;
    }
    load_symbols(b);
    if (!b->fn.init) {
        rc = gs_err_set(err, GS_ENOLIB, "nvml: %s has neither nvmlInit_v2 nor nvmlInit", path);
        goto fail;
    }
    r = b->fn.init();
    if (r != NVML_SUCCESS) {
        rc = gs_err_set(err, gs_nvml_init_rc(r), "nvml: %s: %s", sym_name(b, SYM_init),
                        gs_nvml_errstr(b, r));
        goto fail;
    }
    b->inited = 1;
    if (!b->fn.count || !b->fn.handle) {
        rc = gs_err_set(err, GS_ENOLIB, "nvml: %s lacks nvmlDeviceGetCount/GetHandleByIndex", path);
        goto fail;
    }
    r = b->fn.count(&n);
    if (r != NVML_SUCCESS) {
        rc = gs_err_set(err, gs_nvml_init_rc(r), "nvml: %s: %s", sym_name(b, SYM_count),
                        gs_nvml_errstr(b, r));
        goto fail;
    }
    if (n == 0) {
        rc = gs_err_set(err, GS_ENOGPU, "nvml: %s: no NVIDIA GPU found", sym_name(b, SYM_count));
        goto fail;
    }
    if (n > NVML_MAX_GPUS)
        n = NVML_MAX_GPUS;
    b->n = n;
    b->dev = calloc(n, sizeof *b->dev);
    b->pcap = 64;
    b->pbuf = calloc(b->pcap, GS_NVML_PROC_STRIDE_MAX);
    b->ucap = 64;
    b->ubuf = calloc(b->ucap, sizeof *b->ubuf);
    if (!b->dev || !b->pbuf || !b->ubuf) {
        rc = gs_err_set(err, GS_ENOMEM, "nvml: out of memory for %u GPUs", n);
        goto fail;
    }
    for (unsigned i = 0; i < n; i++)
        dev_attach(b, i);
    read_system(b);
    *out = b;
    return GS_OK;
fail:
    nvml_close(b);
    return rc;
}

static unsigned nvml_count(const struct gs_backend *b)
{
    return b->n;
}

static void nvml_system(const struct gs_backend *b, struct gs_system *sys)
{
    char host[sizeof sys->hostname];
    memcpy(host, sys->hostname, sizeof host);
    *sys = b->sys;
    memcpy(sys->hostname, host, sizeof host);
}

static int nvml_begin(struct gs_backend *b, unsigned want, struct gs_err *err)
{
    int primed = 0;
    (void)err;

    if (want & GS_WANT_HEALTH) {
        events_register(b);
        if (b->ev_state > 0)
            events_poll(b);
    }
    if ((want & GS_WANT_GPM) && (want & GS_WANT_GPM_WAIT)) {
        for (unsigned i = 0; i < b->n; i++) {
            struct nvml_dev *d = &b->dev[i];
            int lost = 0;
            if (!d->h || d->gpm_have || !gs_nvml_gpm_ready(b, d, &lost))
                continue;
            if (nvml_gpm_first(b, d) == NVML_SUCCESS)
                primed = 1;
        }
        if (primed) { /* one wait for all GPUs, not one per GPU */
            struct timespec ts = {0, NVML_GPM_WAIT_NS};
            while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
                ;
        }
    }
    if (want & GS_WANT_PCIE_TPUT) {
        primed = 0;
        for (unsigned i = 0; i < b->n; i++)
            if (b->dev[i].h && !b->dev[i].nvl_have && b->dev[i].nvl >= 0)
                primed |= gs_nvml_nvl_prime(b, &b->dev[i]);
        if (primed) { /* NVLink counters need two readings for a rate: one wait for all */
            struct timespec ts = {0, NVML_NVLINK_WAIT_NS};
            while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
                ;
        }
    }
    return GS_OK;
}

static int basic_any_ok(const struct gs_gpu *g)
{
    static const enum gs_metric ms[] = {GS_M_MEM_TOTAL, GS_M_TEMP_GPU, GS_M_POWER_DRAW,
                                        GS_M_UTIL_GPU,  GS_M_CLOCK_SM, GS_M_PSTATE};
    for (size_t i = 0; i < COUNT_OF(ms); i++)
        if (gs_gpu_has(g, ms[i]))
            return 1;
    return 0;
}

/* Everything but identity reads as lost; identity stays so front ends can say which GPU. */
static void mark_lost(struct gs_gpu *g)
{
    uint8_t keep[GS_M__COUNT] = {0};
    for (size_t i = 0; i < COUNT_OF(ident_metrics); i++)
        keep[ident_metrics[i]] = 1;
    for (int m = 0; m < GS_M__COUNT; m++)
        if (!keep[m]) {
            g->st[m] = GS_ST_LOST;
            g->v[m] = 0;
        }
    memset(g->ecc_loc_st, 0, sizeof g->ecc_loc_st);
    g->n_mig = 0;
    g->n_nvlink = 0;
    g->lost = 1;
}

static int nvml_sample(struct gs_backend *b, unsigned dev, struct gs_gpu *g, unsigned want,
                       struct gs_err *err)
{
    struct nvml_dev *d;
    struct rd c;

    if (dev >= b->n)
        return gs_err_set(err, GS_ENOGPU, "nvml: no GPU %u (have %u)", dev, b->n);
    d = &b->dev[dev];
    g->index = dev;
    dev_attach(b, dev);
    memcpy(g->text, d->cache.text, sizeof g->text);
    memcpy(g->tst, d->cache.tst, sizeof g->tst);
    copy_metrics(g, &d->cache, ident_metrics, COUNT_OF(ident_metrics));
    if (!d->h) {
        if (d->h_rc == NVML_ERROR_GPU_IS_LOST) {
            mark_lost(g);
            if (d->xid_reg == 1 && d->xid_last)
                gs_gpu_set(g, GS_M_XID_LAST, (double)d->xid_last);
            return GS_OK;
        }
        for (int m = 0; m < GS_M__COUNT; m++)
            g->st[m] = gs_nvml_status(d->h_rc);
        return gs_err_set(err, gs_nvml_init_rc(d->h_rc), "nvml: %s(%u): %s",
                          sym_name(b, SYM_handle), dev, gs_nvml_errstr(b, d->h_rc));
    }

    c = (struct rd){b, d, d->h, &d->cache, 0, NVML_SUCCESS, 1};
    if ((want & GS_WANT_STATIC) || !d->slow_done) {
        gs_nvml_read_slow(&c);
        d->slow_done = !c.lost;
    }
    c.g = g;
    copy_metrics(g, &d->cache, slow_metrics, COUNT_OF(slow_metrics));
    gs_nvml_read_basic(&c);
    gs_nvml_read_nvlink(&c, want);
    c.masked = 0; /* what the want bits ask for is read in full */
    /* the byte counters gave this cycle's rate (rd_fields): no 20 ms throughput window; a
     * GPU without them, or a first reading (one-shot commands), asks the driver's window */
    if ((want & GS_WANT_PCIE_TPUT) && !d->pcie_rated)
        gs_nvml_read_pcie_tput(&c);
    if (want & GS_WANT_HEALTH) {
        c.masked = b->mask_health; /* unless the caller masks health too */
        gs_nvml_read_health(&c);
        c.masked = 0;
    }
    if (want & GS_WANT_DETAIL) {
        c.masked = 1; /* of these, what the caller prints (-q -d MEMORY: protected memory) */
        gs_nvml_read_detail(&c);
        gs_nvml_read_detail_gpu(&c);
        c.masked = 0;
    }
    if (want & GS_WANT_MIG)
        gs_nvml_read_mig(&c, b->mig_sram_ecc);
    if (want & GS_WANT_GPM)
        gs_nvml_read_gpm(&c);
    if ((want & GS_WANT_GPM) && (want & GS_WANT_MIG))
        gs_nvml_read_mig_gpm(&c);
    if (c.lost) {
        mark_lost(g);
        /* the Xid event the GPU fell off with (79) was drained in begin: keep it */
        if (d->xid_reg == 1 && d->xid_last)
            gs_gpu_set(g, GS_M_XID_LAST, (double)d->xid_last);
        return GS_OK;
    }
    /* The driver went away (unloaded, re-initialised elsewhere): an error only if it left
     * nothing readable; a library that answers UNINITIALIZED for one odd call is not dead. */
    if (c.fatal != NVML_SUCCESS && !basic_any_ok(g))
        return gs_err_set(
            err, c.fatal == NVML_ERROR_LIB_RM_VERSION_MISMATCH ? GS_EMISMATCH : GS_ENODRIVER,
            "nvml: gpu %u: %s", dev, gs_nvml_errstr(b, c.fatal));
    return GS_OK;
}

const struct gs_backend_ops gs_backend_nvml = {
    .abi = GS_BACKEND_ABI,
    .name = "nvml",
    .caps =
        GS_CAP_PROCS | GS_CAP_PROC_UTIL | GS_CAP_GPM | GS_CAP_EVENTS | GS_CAP_MIG | GS_CAP_HEALTH,
    .open = nvml_open,
    .count = nvml_count,
    .system = nvml_system,
    .begin = nvml_begin,
    .sample = nvml_sample,
    .processes = gs_nvml_processes,
    .process_name = gs_nvml_process_name,
    .close = nvml_close,
    .util_samples = gs_nvml_util_samples,
    .topology = gs_nvml_topology,
};
