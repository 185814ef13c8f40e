/*
 * Prometheus text exposition of a snapshot (metrics.h). Families are rows of two tables,
 * native and dcgm-exporter; consecutive rows with one name form one family whose rows differ
 * by a constant label (clock="sm", direction="tx"). The output is family-major, as the format
 * requires: HELP and TYPE once, then the family's lines for every GPU.
 */
#include "agent/metrics.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuscope/gs_err.h"

void gs_metrics_escape(struct gs_buf *b, const char *s)
{
    for (const char *p = s; *p; p++) {
        const char *run = p;
        while (*p && *p != '\\' && *p != '"' && *p != '\n')
            p++;
        gs_buf_put(b, run, (size_t)(p - run));
        if (!*p)
            break;
        gs_buf_puts(b, *p == '\\' ? "\\\\" : *p == '"' ? "\\\"" : "\\n");
    }
}

/* ---- values: printf's " %.15g\n", most without printf ----
 *
 * 15 significant digits print integers up to 1e15 exactly and 0.92 as 0.92. A render writes a
 * thousand values and printf's exact binary-to-decimal conversion was a third of its cost, so
 * gs_metrics_g15 writes the common cases itself, to the byte what %.15g writes:
 * - a whole number below 1e15 (bytes, hertz, degrees, counts, 0 and 1): every digit, nothing
 *   else;
 * - any other number from 1e-4 to 1e15: its 15 significant digits d (an integer) are a * 10^k
 *   rounded to nearest, with a * 10^k known exactly as hi + lo (fma); %.15g prints
 *   d / 10^k in fixed notation with the fraction's trailing zeros (and a bare point) removed.
 *   Where the exact product is within 1e-6 of a tie, or close to a decade's edge, printf does it.
 * The rest (-0, NaN, infinities, magnitudes outside those ranges) goes to printf. */
static const double pow10_exact[19] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8, 1e9,
                                       1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18};

/* The digits of u at the end of a buffer ending at end; returns where they start. */
static char *digits_before(char *end, unsigned long long u)
{
    do
        *--end = (char)('0' + u % 10);
    while ((u /= 10) != 0);
    return end;
}

/* %.15g of a, not a whole number, 1e-4 <= a < 1e15, into out (>= 40 bytes, no sign); 0 when
 * this way cannot tell the rounding for sure. */
static size_t g15_fraction(double a, char *out)
{
    int e = (int)floor(log10(a)), k;
    double hi, lo, t, f;
    unsigned long long d;
    char dig[16];
    size_t n = 0, int_len, frac_len;

    if (e < -4 || e > 14)
        return 0;
    k = 14 - e;
    hi = a * pow10_exact[k];
    if (hi < 1e14 && e > -4) /* log10 a digit off near a power of ten */
        hi = a * pow10_exact[++k], e--;
    else if (hi >= 1e15 && e < 14)
        hi = a * pow10_exact[--k], e++;
    /* d must lie well inside [1e14, 1e15): the exact product is within 1/16 of hi */
    if (!(hi >= 1e14 + 1 && hi < 1e15 - 1))
        return 0;
    lo = fma(a, pow10_exact[k], -hi); /* a * 10^k == hi + lo exactly */
    t = floor(hi);
    f = (hi - t) + lo; /* hi - t is exact; f is the exact fraction within 2^-52 */
    if (f < 0)
        t -= 1, f += 1;
    else if (f >= 1)
        t += 1, f -= 1;
    if (fabs(f - 0.5) < 1e-6)
        return 0;
    d = (unsigned long long)t + (f > 0.5);
    if (d < 100000000000000ULL || d >= 1000000000000000ULL)
        return 0;
    digits_before(dig + 15, d); /* 15 digits: dig[0..14] */
    /* k digits after the point (k = 14 - e, 0..18) */
    int_len = k <= 14 ? (size_t)(15 - k) : 0;
    frac_len = 15 - int_len;
    while (frac_len > 0 && dig[int_len + frac_len - 1] == '0')
        frac_len--;
    if (int_len) {
        memcpy(out, dig, int_len);
        n = int_len;
    } else {
        out[n++] = '0';
    }
    if (frac_len || k > 14) {
        /* k > 14: a < 1, so d is not all zeros past the point */
        out[n++] = '.';
        for (int z = 15; z < k; z++)
            out[n++] = '0';
        memcpy(out + n, dig + int_len, frac_len);
        n += frac_len;
    }
    return n;
}

size_t gs_metrics_g15(double v, char *out)
{
    double a = fabs(v);
    char *p, *end = out + 32;
    size_t n;

    if (a < 1e15 && v == (double)(long long)v && !(v == 0 && signbit(v))) {
        p = digits_before(end, (unsigned long long)(long long)a);
        if (v < 0)
            *--p = '-';
        n = (size_t)(end - p);
        memmove(out, p, n);
        return n;
    }
    if (a >= 1e-4 && a < 1e15 && (n = g15_fraction(a, out + (v < 0))) != 0) {
        if (v < 0)
            out[0] = '-', n++;
        return n;
    }
    return (size_t)snprintf(out, 40, "%.15g", v);
}

static void value(struct gs_buf *b, double v)
{
    char tmp[48];
    size_t n;

    tmp[0] = ' ';
    n = 1 + gs_metrics_g15(v, tmp + 1);
    tmp[n++] = '\n';
    gs_buf_put(b, tmp, n);
}

static void header(struct gs_buf *b, const char *name, const char *help, const char *type)
{
    gs_buf_puts(b, "# HELP ");
    gs_buf_puts(b, name);
    gs_buf_puts(b, " ");
    gs_buf_puts(b, help);
    gs_buf_puts(b, "\n# TYPE ");
    gs_buf_puts(b, name);
    gs_buf_puts(b, " ");
    gs_buf_puts(b, type);
    gs_buf_puts(b, "\n");
}

/* A constant label: ,key="value" (neither needs escaping: both are ours). */
static void const_label(struct gs_buf *b, const char *k, const char *v)
{
    gs_buf_puts(b, ",");
    gs_buf_puts(b, k);
    gs_buf_puts(b, "=\"");
    gs_buf_puts(b, v);
    gs_buf_puts(b, "\"");
}

#define MIB_SCALE (1.0 / 1048576)

/* ---- native families ---- */

struct fam {
    const char *name;
    const char *help;
    const char *type;
    enum gs_metric m;
    double scale;
    const char *lk, *lv; /* a constant label, or NULL */
};

static const struct fam native[] = {
    {"gpuscope_gpu_utilization_ratio", "Fraction of time a kernel was running (NVML GPU-Util).",
     "gauge", GS_M_UTIL_GPU, 1, NULL, NULL},
    {"gpuscope_gpu_memory_utilization_ratio", "Fraction of time device memory was read or written.",
     "gauge", GS_M_UTIL_MEM, 1, NULL, NULL},
    {"gpuscope_gpu_encoder_utilization_ratio", "Video encoder utilization.", "gauge", GS_M_UTIL_ENC,
     1, NULL, NULL},
    {"gpuscope_gpu_decoder_utilization_ratio", "Video decoder utilization.", "gauge", GS_M_UTIL_DEC,
     1, NULL, NULL},
    {"gpuscope_gpu_memory_total_bytes", "Device memory total.", "gauge", GS_M_MEM_TOTAL, 1, NULL,
     NULL},
    {"gpuscope_gpu_memory_used_bytes", "Device memory in use.", "gauge", GS_M_MEM_USED, 1, NULL,
     NULL},
    {"gpuscope_gpu_memory_free_bytes", "Device memory free.", "gauge", GS_M_MEM_FREE, 1, NULL,
     NULL},
    {"gpuscope_gpu_memory_reserved_bytes", "Device memory reserved by the driver.", "gauge",
     GS_M_MEM_RESERVED, 1, NULL, NULL},
    {"gpuscope_gpu_temperature_celsius", "GPU core temperature.", "gauge", GS_M_TEMP_GPU, 1, NULL,
     NULL},
    {"gpuscope_gpu_memory_temperature_celsius", "HBM/memory temperature.", "gauge", GS_M_TEMP_MEM,
     1, NULL, NULL},
    {"gpuscope_gpu_slowdown_temperature_celsius", "Temperature at which the GPU slows down.",
     "gauge", GS_M_TEMP_SLOWDOWN, 1, NULL, NULL},
    {"gpuscope_gpu_shutdown_temperature_celsius", "Temperature at which the GPU shuts down.",
     "gauge", GS_M_TEMP_SHUTDOWN, 1, NULL, NULL},
    {"gpuscope_gpu_temperature_margin_celsius",
     "Degrees left before the GPU slows down (NVML margin temperature; negative past it).", "gauge",
     GS_M_TEMP_MARGIN, 1, NULL, NULL},
    {"gpuscope_gpu_fan_speed_ratio", "Intended fan speed (may exceed 1).", "gauge", GS_M_FAN, 1,
     NULL, NULL},
    {"gpuscope_gpu_power_watts", "Power draw.", "gauge", GS_M_POWER_DRAW, 1, NULL, NULL},
    {"gpuscope_gpu_power_limit_watts", "Enforced power limit.", "gauge", GS_M_POWER_ENFORCED_LIMIT,
     1, NULL, NULL},
    {"gpuscope_gpu_energy_joules_total", "Energy consumed since the driver was loaded.", "counter",
     GS_M_ENERGY, 1, NULL, NULL},
    {"gpuscope_gpu_clock_hertz", "Current clock frequency.", "gauge", GS_M_CLOCK_GR, 1, "clock",
     "graphics"},
    {"gpuscope_gpu_clock_hertz", NULL, NULL, GS_M_CLOCK_SM, 1, "clock", "sm"},
    {"gpuscope_gpu_clock_hertz", NULL, NULL, GS_M_CLOCK_MEM, 1, "clock", "memory"},
    {"gpuscope_gpu_clock_hertz", NULL, NULL, GS_M_CLOCK_VIDEO, 1, "clock", "video"},
    {"gpuscope_gpu_max_clock_hertz", "Maximum clock frequency.", "gauge", GS_M_CLOCK_MAX_GR, 1,
     "clock", "graphics"},
    {"gpuscope_gpu_max_clock_hertz", NULL, NULL, GS_M_CLOCK_MAX_SM, 1, "clock", "sm"},
    {"gpuscope_gpu_max_clock_hertz", NULL, NULL, GS_M_CLOCK_MAX_MEM, 1, "clock", "memory"},
    {"gpuscope_gpu_max_clock_hertz", NULL, NULL, GS_M_CLOCK_MAX_VIDEO, 1, "clock", "video"},
    {"gpuscope_gpu_performance_state", "P-state (0 fastest, 15 slowest).", "gauge", GS_M_PSTATE, 1,
     NULL, NULL},
    {"gpuscope_gpu_pcie_throughput_bytes_per_second",
     "PCIe throughput over NVML's 20 ms window (a rate, sampled every 5th cycle).", "gauge",
     GS_M_PCIE_TX, 1, "direction", "tx"},
    {"gpuscope_gpu_pcie_throughput_bytes_per_second", NULL, NULL, GS_M_PCIE_RX, 1, "direction",
     "rx"},
    {"gpuscope_gpu_pcie_link_generation", "Current PCIe link generation.", "gauge", GS_M_PCIE_GEN,
     1, NULL, NULL},
    {"gpuscope_gpu_pcie_link_width", "Current PCIe link width (lanes).", "gauge", GS_M_PCIE_WIDTH,
     1, NULL, NULL},
    {"gpuscope_gpu_pcie_replays_total", "PCIe replay counter.", "counter", GS_M_PCIE_REPLAY, 1,
     NULL, NULL},
    {"gpuscope_gpu_ecc_errors_total", "ECC errors since the driver was loaded (volatile).",
     "counter", GS_M_ECC_CORR_VOL, 1, "type", "corrected"},
    {"gpuscope_gpu_ecc_errors_total", NULL, NULL, GS_M_ECC_UNCORR_VOL, 1, "type", "uncorrected"},
    {"gpuscope_gpu_xid_last", "Last Xid error number seen (0: none).", "gauge", GS_M_XID_LAST, 1,
     NULL, NULL},
    {"gpuscope_gpu_sm_active_ratio", "Fraction of time SMs had work (GPM).", "gauge",
     GS_M_GPM_SM_ACTIVE, 1, NULL, NULL},
    {"gpuscope_gpu_sm_occupancy_ratio", "Warps resident over the maximum (GPM).", "gauge",
     GS_M_GPM_SM_OCCUPANCY, 1, NULL, NULL},
    {"gpuscope_gpu_tensor_active_ratio", "Fraction of time tensor pipes were active (GPM).",
     "gauge", GS_M_GPM_TENSOR_ACTIVE, 1, NULL, NULL},
    {"gpuscope_gpu_dram_active_ratio", "DRAM bandwidth utilization (GPM).", "gauge",
     GS_M_GPM_DRAM_ACTIVE, 1, NULL, NULL},
    {"gpuscope_gpu_graphics_active_ratio",
     "Fraction of time the graphics or compute engine was active (GPM).", "gauge",
     GS_M_GPM_GR_ACTIVE, 1, NULL, NULL},
    {"gpuscope_gpu_remapped_rows_total", "Memory rows remapped (row remapping, A100 and newer).",
     "counter", GS_M_REMAP_CORR, 1, "type", "correctable"},
    {"gpuscope_gpu_remapped_rows_total", NULL, NULL, GS_M_REMAP_UNCORR, 1, "type", "uncorrectable"},
    {"gpuscope_gpu_row_remap_failure", "1 when a row remapping failed (the GPU needs service).",
     "gauge", GS_M_REMAP_FAILURE, 1, NULL, NULL},
};

/* dcgm-exporter's names, units and labels (gpu, UUID, pci_bus_id, device, modelName,
 * Hostname), so dashboards written for it (Grafana 12239) work unchanged. */
static const struct fam dcgm[] = {
    {"DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", "gauge", GS_M_CLOCK_SM, 1e-6, NULL,
     NULL},
    {"DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", "gauge", GS_M_CLOCK_MEM, 1e-6,
     NULL, NULL},
    {"DCGM_FI_DEV_MEMORY_TEMP", "Memory temperature (in C).", "gauge", GS_M_TEMP_MEM, 1, NULL,
     NULL},
    {"DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", "gauge", GS_M_TEMP_GPU, 1, NULL, NULL},
    {"DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", "gauge", GS_M_POWER_DRAW, 1, NULL, NULL},
    {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "Total energy consumption since boot (in mJ).",
     "counter", GS_M_ENERGY, 1e3, NULL, NULL},
    {"DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "Total number of PCIe retries.", "counter",
     GS_M_PCIE_REPLAY, 1, NULL, NULL},
    {"DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", "gauge", GS_M_UTIL_GPU, 100, NULL, NULL},
    {"DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", "gauge", GS_M_UTIL_MEM, 100, NULL,
     NULL},
    {"DCGM_FI_DEV_ENC_UTIL", "Encoder utilization (in %).", "gauge", GS_M_UTIL_ENC, 100, NULL,
     NULL},
    {"DCGM_FI_DEV_DEC_UTIL", "Decoder utilization (in %).", "gauge", GS_M_UTIL_DEC, 100, NULL,
     NULL},
    {"DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.", "gauge", GS_M_XID_LAST,
     1, NULL, NULL},
    {"DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", "gauge", GS_M_MEM_FREE,
     1.0 / 1048576, NULL, NULL},
    {"DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", "gauge", GS_M_MEM_USED,
     1.0 / 1048576, NULL, NULL},
    {"DCGM_FI_DEV_FB_RESERVED", "Framebuffer memory reserved (in MiB).", "gauge", GS_M_MEM_RESERVED,
     1.0 / 1048576, NULL, NULL},
    {"DCGM_FI_PROF_SM_ACTIVE", "The ratio of cycles an SM has at least 1 warp assigned.", "gauge",
     GS_M_GPM_SM_ACTIVE, 1, NULL, NULL},
    {"DCGM_FI_PROF_SM_OCCUPANCY", "The ratio of warps resident to the maximum.", "gauge",
     GS_M_GPM_SM_OCCUPANCY, 1, NULL, NULL},
    {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "Ratio of cycles the tensor pipe is active.", "gauge",
     GS_M_GPM_TENSOR_ACTIVE, 1, NULL, NULL},
    {"DCGM_FI_PROF_DRAM_ACTIVE", "Ratio of cycles the memory interface is active.", "gauge",
     GS_M_GPM_DRAM_ACTIVE, 1, NULL, NULL},
    {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active.", "gauge",
     GS_M_GPM_GR_ACTIVE, 1, NULL, NULL},
    {"DCGM_FI_PROF_PCIE_TX_BYTES",
     "The rate of data transmitted over the PCIe bus - including "
     "both protocol headers and data payloads - in bytes per second.",
     "gauge", GS_M_PCIE_TX, 1, NULL, NULL},
    {"DCGM_FI_PROF_PCIE_RX_BYTES",
     "The rate of data received over the PCIe bus - including "
     "both protocol headers and data payloads - in bytes per second.",
     "gauge", GS_M_PCIE_RX, 1, NULL, NULL},
    {"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "Number of remapped rows for correctable errors",
     "counter", GS_M_REMAP_CORR, 1, NULL, NULL},
    {"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "Number of remapped rows for uncorrectable errors",
     "counter", GS_M_REMAP_UNCORR, 1, NULL, NULL},
    {"DCGM_FI_DEV_ROW_REMAP_FAILURE", "Whether remapping of rows has failed", "gauge",
     GS_M_REMAP_FAILURE, 1, NULL, NULL},
};

/* NVLink, native names: the per-GPU sums (GS_M_NVLINK_*), absent on a GPU without NVLink.
 * Not one series per link: 18 links x 8 GPUs would grow an HGX node's body by half (which link
 * is down, and its counters, are in /api/v1/snapshot's nvlinks[]). */
static const struct fam nvlink_native[] = {
    {"gpuscope_gpu_nvlink_links", "NVLink links the driver reports on this GPU.", "gauge",
     GS_M_NVLINK_LINKS, 1, NULL, NULL},
    {"gpuscope_gpu_nvlink_links_active", "NVLink links that are active (trained).", "gauge",
     GS_M_NVLINK_LINKS_ACTIVE, 1, NULL, NULL},
    {"gpuscope_gpu_nvlink_link_speed_bytes_per_second",
     "Speed of one NVLink link per direction (the links' common speed).", "gauge",
     GS_M_NVLINK_SPEED, 1, NULL, NULL},
    {"gpuscope_gpu_nvlink_bytes_total",
     "NVLink data payload moved over all links since the driver was loaded.", "counter",
     GS_M_NVLINK_TX_BYTES, 1, "direction", "tx"},
    {"gpuscope_gpu_nvlink_bytes_total", NULL, NULL, GS_M_NVLINK_RX_BYTES, 1, "direction", "rx"},
    {"gpuscope_gpu_nvlink_throughput_bytes_per_second",
     "NVLink data throughput over all links since the previous cycle.", "gauge", GS_M_NVLINK_TX, 1,
     "direction", "tx"},
    {"gpuscope_gpu_nvlink_throughput_bytes_per_second", NULL, NULL, GS_M_NVLINK_RX, 1, "direction",
     "rx"},
    {"gpuscope_gpu_nvlink_errors_total",
     "NVLink data-link errors summed over the links (replays, recoveries, CRC errors).", "counter",
     GS_M_NVLINK_REPLAY, 1, "type", "replay"},
    {"gpuscope_gpu_nvlink_errors_total", NULL, NULL, GS_M_NVLINK_RECOVERY, 1, "type", "recovery"},
    {"gpuscope_gpu_nvlink_errors_total", NULL, NULL, GS_M_NVLINK_CRC_FLIT, 1, "type", "crc_flit"},
    {"gpuscope_gpu_nvlink_errors_total", NULL, NULL, GS_M_NVLINK_CRC_DATA, 1, "type", "crc_data"},
};

/* dcgm-exporter's NVLink default counter. It declares it a counter (etc/default-counters.csv);
 * DCGM fills field 449 with the bandwidth of all links, TX + RX, in MB/s (docs/metrics.md). */
static const struct fam nvlink_dcgm[] = {
    {"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
     "Total number of NVLink bandwidth counters for all lanes (TX + RX, in MB/s).", "counter",
     GS_M_NVLINK_TX, 1e-6, NULL, NULL},
};

static const char *text_or_empty(const struct gs_gpu *g, enum gs_text t)
{
    return gs_gpu_has_text(g, t) ? g->text[t] : "";
}

static void native_labels_text(struct gs_buf *b, const struct gs_snapshot *s,
                               const struct gs_gpu *g)
{
    gs_buf_printf(b, "gpu=\"%u\",uuid=\"", g->index);
    gs_metrics_escape(b, text_or_empty(g, GS_T_UUID));
    gs_buf_puts(b, "\",hostname=\"");
    gs_metrics_escape(b, s->sys.hostname);
    gs_buf_puts(b, "\"");
}

/* A GPU's label set is the same on every line of one render: each is written (escaped) once,
 * at its first line, and copied from there into the later ones (gs_buf_copy). One per GPU
 * of the first LABEL_GPUS; a GPU past them is written every time. Lives for one render. */
#define LABEL_GPUS 64
struct label_sets {
    uint32_t off[LABEL_GPUS], len[LABEL_GPUS]; /* where in the buffer; len 0: not yet */
};

/* What one render's label writers share (gs_metrics_render's stack). */
struct render {
    struct label_sets native, dcgm;
};

typedef void (*label_text_fn)(struct gs_buf *, const struct gs_snapshot *, const struct gs_gpu *,
                              const void *);

static void labels_once(struct gs_buf *b, struct label_sets *c, const struct gs_snapshot *s,
                        const struct gs_gpu *g, label_text_fn fn, const void *arg)
{
    size_t gi = (size_t)(g - s->gpus), at = b->len;

    if (gi < LABEL_GPUS && c->len[gi]) {
        gs_buf_copy(b, c->off[gi], c->len[gi]);
        return;
    }
    fn(b, s, g, arg);
    if (gi < LABEL_GPUS && gs_buf_status(b) == GS_BUF_OK && b->len - at <= UINT32_MAX &&
        at <= UINT32_MAX) {
        c->off[gi] = (uint32_t)at;
        c->len[gi] = (uint32_t)(b->len - at);
    }
}

static void native_text(struct gs_buf *b, const struct gs_snapshot *s, const struct gs_gpu *g,
                        const void *arg)
{
    (void)arg;
    native_labels_text(b, s, g);
}

/* gpu, uuid and hostname of GPU g (g one of s->gpus) */
static void native_labels(struct gs_buf *b, struct render *x, const struct gs_snapshot *s,
                          const struct gs_gpu *g)
{
    labels_once(b, &x->native, s, g, native_text, NULL);
}

/* ---- Kubernetes pods: dcgm-exporter's pod, namespace and container labels ---- */

static void proc_escape(struct gs_buf *b, const char *s);

/* The pod of a GPU (gs_metrics_gpu_pod; pod NULL where none). */
struct gpu_pod {
    const struct gs_proc *pod;
    int one_container;
};

/* What the dcgm-exporter families of one render share, passed down to their labels: the pod
 * of each GPU (pods_begin; NULL when none has one) and GS_METRICS_DCGM_HOSTNAME. */
struct dcgm_render {
    const struct gpu_pod *pods;
    unsigned n_pods;
    int old_hostname;
    struct label_sets *sets; /* the GPUs' label sets of this render */
};

/* gs_metrics_gpu_pod for the processes of GPU gi, or with m only those of m's GPU instance
 * (dcgm-exporter maps a pod to the MIG device it was given). */
static const struct gs_proc *procs_pod(const struct gs_snapshot *s, unsigned gi,
                                       const struct gs_mig *m, int *one_container)
{
    const struct gs_proc *pod = NULL;
    int same_ctr = 1;

    if (one_container)
        *one_container = 0;
    if (gi < s->n_gpus && s->gpus[gi].hidden_st == GS_ST_OK && s->gpus[gi].hidden_count > 0)
        return NULL; /* a viewer's filtered copy: what it may not see could be another pod's */
    for (unsigned i = 0; i < s->n_procs; i++) {
        const struct gs_proc *p = &s->procs[i];
        if (p->gpu != gi || (m && p->gi_id != m->gi_id) || p->host_st != GS_ST_OK)
            continue; /* a process procfs could not read says nothing either way */
        if (!p->pod_uid[0] || !p->pod_name[0])
            return NULL; /* not in a pod, or in one the node does not name */
        if (!pod) {
            pod = p;
            continue;
        }
        if (strcmp(p->pod_uid, pod->pod_uid) != 0)
            return NULL;
        if (strcmp(p->pod_container, pod->pod_container) != 0)
            same_ctr = 0;
    }
    if (one_container)
        *one_container = pod && same_ctr && pod->pod_container[0];
    return pod;
}

const struct gs_proc *gs_metrics_gpu_pod(const struct gs_snapshot *s, unsigned gi,
                                         int *one_container)
{
    return procs_pod(s, gi, NULL, one_container);
}

static void pod_labels(struct gs_buf *b, const struct gs_proc *pod, int one_container)
{
    gs_buf_puts(b, ",pod=\"");
    proc_escape(b, pod->pod_name);
    gs_buf_puts(b, "\",namespace=\"");
    proc_escape(b, pod->pod_namespace);
    gs_buf_puts(b, "\",container=\"");
    proc_escape(b, one_container ? pod->pod_container : "");
    gs_buf_puts(b, "\"");
}

/* Computes dr's pods for s (NULL when no GPU has a pod or memory is short: no labels);
 * returns them for pods_end. */
static struct gpu_pod *pods_begin(const struct gs_snapshot *s, struct dcgm_render *dr)
{
    struct gpu_pod *pods = NULL;
    int any = 0;

    dr->pods = NULL;
    dr->n_pods = 0;
    if (!s->n_gpus || !(pods = calloc(s->n_gpus, sizeof *pods)))
        return NULL;
    for (unsigned gi = 0; gi < s->n_gpus; gi++)
        any |= (pods[gi].pod = gs_metrics_gpu_pod(s, gi, &pods[gi].one_container)) != NULL;
    if (!any) {
        free(pods);
        return NULL;
    }
    dr->pods = pods;
    dr->n_pods = s->n_gpus;
    return pods;
}

static void pods_end(struct dcgm_render *dr, struct gpu_pod *pods)
{
    dr->pods = NULL;
    dr->n_pods = 0;
    free(pods);
}

/* gpuscope_gpu_pod_info: the native spelling of the same facts, one line per GPU whose
 * processes are one pod's (join on gpu, uuid). */
static void render_pod_info(struct gs_buf *b, struct render *x, const struct gs_snapshot *s)
{
    int any = 0;

    for (unsigned gi = 0; gi < s->n_gpus; gi++) {
        int one;
        const struct gs_proc *pod = gs_metrics_gpu_pod(s, gi, &one);
        if (!pod)
            continue;
        if (!any++)
            header(b, "gpuscope_gpu_pod_info",
                   "The Kubernetes pod whose processes use this GPU (all of them); always 1.",
                   "gauge");
        gs_buf_puts(b, "gpuscope_gpu_pod_info{");
        native_labels(b, x, s, &s->gpus[gi]);
        gs_buf_puts(b, ",pod_uid=\"");
        proc_escape(b, pod->pod_uid);
        gs_buf_puts(b, "\"");
        pod_labels(b, pod, one);
        gs_buf_puts(b, "} 1\n");
    }
}

/* dcgm-exporter's labels of GPU g, in its template's order; with m (a MIG device of g: a
 * GPU-instance series) its GPU_I_PROFILE and GPU_I_ID after modelName. */
static void dcgm_labels_text(struct gs_buf *b, const struct gs_snapshot *s, const struct gs_gpu *g,
                             const struct gs_mig *m, const struct dcgm_render *dr)
{
    gs_buf_printf(b, "gpu=\"%u\",UUID=\"", g->index);
    gs_metrics_escape(b, text_or_empty(g, GS_T_UUID));
    gs_buf_puts(b, "\",pci_bus_id=\"");
    gs_metrics_escape(b, text_or_empty(g, GS_T_PCI_BUS_ID));
    if (gs_gpu_has(g, GS_M_MINOR))
        gs_buf_printf(b, "\",device=\"nvidia%.0f", g->v[GS_M_MINOR]);
    else
        gs_buf_printf(b, "\",device=\"nvidia%u", g->index);
    gs_buf_puts(b, "\",modelName=\"");
    gs_metrics_escape(b, text_or_empty(g, GS_T_NAME));
    if (m) {
        gs_buf_puts(b, "\",GPU_I_PROFILE=\"");
        gs_metrics_escape(b, gs_mig_profile(m));
        gs_buf_printf(b, "\",GPU_I_ID=\"%u", m->gi_id);
    }
    /* dcgm-exporter 4.x spells it hostname (upstream #655); the 3.x Hostname on request */
    gs_buf_puts(b, dr->old_hostname ? "\",Hostname=\"" : "\",hostname=\"");
    gs_metrics_escape(b, s->sys.hostname);
    gs_buf_puts(b, "\",DCGM_FI_DRIVER_VERSION=\"");
    gs_metrics_escape(b, s->sys.driver_st == GS_ST_OK ? s->sys.driver_version : "");
    gs_buf_puts(b, "\"");
    /* the pod whose processes are all of the GPU's (or of the GPU instance's, with m) */
    if (m) {
        int one;
        const struct gs_proc *pod = procs_pod(s, (unsigned)(g - s->gpus), m, &one);
        if (pod)
            pod_labels(b, pod, one);
    } else if (dr->pods && (size_t)(g - s->gpus) < dr->n_pods && dr->pods[g - s->gpus].pod) {
        pod_labels(b, dr->pods[g - s->gpus].pod, dr->pods[g - s->gpus].one_container);
    }
}

static void dcgm_text(struct gs_buf *b, const struct gs_snapshot *s, const struct gs_gpu *g,
                      const void *dr)
{
    dcgm_labels_text(b, s, g, NULL, dr);
}

/* dcgm_labels_text, a GPU's (no m) written once per render (labels_once) */
static void dcgm_gpu_labels(struct gs_buf *b, const struct gs_snapshot *s, const struct gs_gpu *g,
                            const struct gs_mig *m, const struct dcgm_render *dr)
{
    if (m || !dr->sets)
        dcgm_labels_text(b, s, g, m, dr);
    else
        labels_once(b, dr->sets, s, g, dcgm_text, dr);
}

/* Renders the families of a table; rows [i, j) share a name. */
static void render_table(struct gs_buf *b, struct render *x, const struct gs_snapshot *s,
                         const struct fam *t, size_t n)
{
    for (size_t i = 0, j; i < n; i = j) {
        int any = 0;
        for (j = i + 1; j < n && strcmp(t[j].name, t[i].name) == 0; j++)
            ;
        for (unsigned gi = 0; gi < s->n_gpus; gi++) {
            const struct gs_gpu *g = &s->gpus[gi];
            for (size_t r = i; r < j; r++) {
                if (!gs_gpu_has(g, t[r].m))
                    continue;
                if (!any++)
                    header(b, t[i].name, t[i].help, t[i].type);
                gs_buf_puts(b, t[r].name);
                gs_buf_puts(b, "{");
                native_labels(b, x, s, g);
                if (t[r].lk)
                    const_label(b, t[r].lk, t[r].lv);
                gs_buf_puts(b, "}");
                /* Framebuffer figures are whole MiB in dcgm-exporter, as NVML's MiB are. */
                value(b, t[r].scale == MIB_SCALE ? floor(g->v[t[r].m] * MIB_SCALE)
                                                 : g->v[t[r].m] * t[r].scale);
            }
        }
    }
}

/* ---- MIG devices ---- */

/* The MIG device that stands for GPU instance m->gi_id: the first of its compute instances
 * (they share the instance's memory and GPM figures). */
static int mig_first_of_gi(const struct gs_gpu *g, unsigned k)
{
    for (unsigned j = 0; j < k; j++)
        if (g->mig[j].gi_id == g->mig[k].gi_id)
            return 0;
    return 1;
}

/* A GPU whose series dcgm-exporter renders per GPU instance: MIG mode on, instances listed. */
static int mig_split(const struct gs_gpu *g)
{
    return gs_gpu_mig_on(g) && g->n_mig > 0 && !g->lost;
}

/* What a GPU-instance series of metric gm reads, as dcgm-exporter reports one: the instance's
 * own framebuffer and profiling (GPM) figures; no utilization (NVML has none in MIG mode) nor
 * reserved memory; every other field is the parent GPU's (clocks, temperatures, power, ...). */
static int mig_value(const struct gs_gpu *g, const struct gs_mig *m, enum gs_metric gm, double *v)
{
    for (int k = 0; k < GS_MIG_GPM__COUNT; k++)
        if (gs_mig_gpm_metric((enum gs_mig_gpm)k) == gm) {
            *v = m->gpm[k];
            return m->gpm_st[k] == GS_ST_OK;
        }
    switch (gm) {
    case GS_M_MEM_USED:
        *v = (double)m->mem_used_bytes;
        return m->mem_st == GS_ST_OK;
    case GS_M_MEM_FREE:
        *v = (double)m->mem_free_bytes;
        return m->mem_st == GS_ST_OK;
    case GS_M_MEM_TOTAL:
        *v = (double)m->mem_total_bytes;
        return m->mem_st == GS_ST_OK;
    case GS_M_MEM_RESERVED:
    case GS_M_UTIL_GPU:
    case GS_M_UTIL_MEM:
    case GS_M_UTIL_ENC:
    case GS_M_UTIL_DEC:
        return 0;
    default:
        *v = g->v[gm];
        return gs_gpu_has(g, gm);
    }
}

static void dcgm_line(struct gs_buf *b, const struct fam *f, double v)
{
    /* Framebuffer figures are whole MiB in dcgm-exporter, as NVML's MiB are. */
    value(b, f->scale == MIB_SCALE ? floor(v * MIB_SCALE) : v * f->scale);
}

/* The dcgm-exporter table: a GPU in MIG mode as one series per GPU instance (GPU_I_PROFILE,
 * GPU_I_ID), as dcgm-exporter's default "flex" device mode does; other GPUs as render_table. */
static void render_dcgm(struct gs_buf *b, const struct gs_snapshot *s, const struct dcgm_render *dr)
{
    const size_t n = sizeof dcgm / sizeof dcgm[0];
    const struct fam *t = dcgm;

    for (size_t i = 0, j; i < n; i = j) {
        int any = 0;
        for (j = i + 1; j < n && strcmp(t[j].name, t[i].name) == 0; j++)
            ;
        for (unsigned gi = 0; gi < s->n_gpus; gi++) {
            const struct gs_gpu *g = &s->gpus[gi];
            unsigned nm = mig_split(g) ? (g->n_mig < GS_MIG_MAX ? g->n_mig : GS_MIG_MAX) : 0;
            for (size_t r = i; r < j; r++) {
                for (unsigned k = 0; k < (nm ? nm : 1); k++) {
                    double v = g->v[t[r].m];
                    if (nm ? !mig_first_of_gi(g, k) || !mig_value(g, &g->mig[k], t[r].m, &v)
                           : !gs_gpu_has(g, t[r].m))
                        continue;
                    if (!any++)
                        header(b, t[i].name, t[i].help, t[i].type);
                    gs_buf_puts(b, t[r].name);
                    gs_buf_puts(b, "{");
                    dcgm_gpu_labels(b, s, g, nm ? &g->mig[k] : NULL, dr);
                    if (t[r].lk)
                        const_label(b, t[r].lk, t[r].lv);
                    gs_buf_puts(b, "}");
                    dcgm_line(b, &t[r], v);
                }
            }
        }
    }
}

/* Native per-MIG-device families: the GPU's labels with gpu_instance, compute_instance and
 * profile. */
static void mig_native_labels(struct gs_buf *b, struct render *x, const struct gs_snapshot *s,
                              const struct gs_gpu *g, const struct gs_mig *m)
{
    native_labels(b, x, s, g);
    gs_buf_printf(b, ",gpu_instance=\"%u\",compute_instance=\"%u\",profile=\"", m->gi_id, m->ci_id);
    gs_metrics_escape(b, gs_mig_profile(m));
    gs_buf_puts(b, "\"");
}

/* the families, the GPM ones last (MF_GPM + enum gs_mig_gpm) */
enum mfam { MF_INFO, MF_MEM_TOTAL, MF_MEM_USED, MF_MEM_FREE, MF_PROCS, MF_GPM };
#define MF_N (MF_GPM + GS_MIG_GPM__COUNT)

static const struct {
    const char *name, *help;
} mfams[MF_N] = {
    [MF_INFO] = {"gpuscope_mig_info",
                 "A MIG device (GPU instance, compute instance) of a GPU in MIG mode; always 1."},
    [MF_MEM_TOTAL] = {"gpuscope_mig_memory_total_bytes", "Device memory of the MIG device."},
    [MF_MEM_USED] = {"gpuscope_mig_memory_used_bytes", "Device memory in use on the MIG device."},
    [MF_MEM_FREE] = {"gpuscope_mig_memory_free_bytes", "Device memory free on the MIG device."},
    [MF_PROCS] = {"gpuscope_mig_processes",
                  "Processes on the MIG device (as this viewer may see them)."},
    [MF_GPM + GS_MIG_GPM_SM_ACTIVE] = {"gpuscope_mig_sm_active_ratio",
                                       "Fraction of time the instance's SMs had work (GPM)."},
    [MF_GPM + GS_MIG_GPM_SM_OCCUPANCY] = {"gpuscope_mig_sm_occupancy_ratio",
                                          "Warps resident over the maximum (GPM, instance)."},
    [MF_GPM + GS_MIG_GPM_TENSOR_ACTIVE] = {"gpuscope_mig_tensor_active_ratio",
                                           "Fraction of time tensor pipes were active (GPM, "
                                           "instance)."},
    [MF_GPM + GS_MIG_GPM_DRAM_ACTIVE] = {"gpuscope_mig_dram_active_ratio",
                                         "DRAM bandwidth utilization (GPM, instance)."},
    [MF_GPM + GS_MIG_GPM_GR_ACTIVE] = {"gpuscope_mig_graphics_active_ratio",
                                       "Fraction of time the instance's graphics or compute "
                                       "engine was active (GPM)."},
};

static int mig_native_value(const struct gs_snapshot *s, unsigned gi, const struct gs_mig *m,
                            unsigned f, double *v)
{
    unsigned n = 0;

    switch (f) {
    case MF_INFO:
        *v = 1;
        return 1;
    case MF_MEM_TOTAL:
        *v = (double)m->mem_total_bytes;
        return m->mem_st == GS_ST_OK;
    case MF_MEM_USED:
        *v = (double)m->mem_used_bytes;
        return m->mem_st == GS_ST_OK;
    case MF_MEM_FREE:
        *v = (double)m->mem_free_bytes;
        return m->mem_st == GS_ST_OK;
    case MF_PROCS:
        for (unsigned i = 0; i < s->n_procs; i++)
            n += s->procs[i].gpu == gi && s->procs[i].gi_id == m->gi_id &&
                 s->procs[i].ci_id == m->ci_id;
        *v = n;
        return 1;
    default:
        if (f < MF_GPM || f >= MF_N)
            return 0;
        *v = m->gpm[f - MF_GPM];
        return m->gpm_st[f - MF_GPM] == GS_ST_OK;
    }
}

static void render_mig_native(struct gs_buf *b, struct render *x, const struct gs_snapshot *s)
{
    for (unsigned f = 0; f < MF_N; f++) {
        int any = 0;
        for (unsigned gi = 0; gi < s->n_gpus; gi++) {
            const struct gs_gpu *g = &s->gpus[gi];
            for (unsigned k = 0; mig_split(g) && k < g->n_mig && k < GS_MIG_MAX; k++) {
                const struct gs_mig *m = &g->mig[k];
                double v;
                if (!mig_native_value(s, gi, m, f, &v))
                    continue;
                if (!any++)
                    header(b, mfams[f].name, mfams[f].help, "gauge");
                gs_buf_puts(b, mfams[f].name);
                gs_buf_puts(b, "{");
                mig_native_labels(b, x, s, g, m);
                if (f == MF_INFO) {
                    gs_buf_puts(b, ",mig_uuid=\"");
                    gs_metrics_escape(b, m->uuid);
                    gs_buf_puts(b, "\"");
                }
                gs_buf_puts(b, "}");
                value(b, v);
            }
        }
    }
}

/* nvidia-smi's names of the clock-event ("throttle") reasons. */
static const struct {
    uint64_t bit;
    const char *name;
} throttle_reasons[] = {
    {GS_THR_GPU_IDLE, "gpu_idle"},
    {GS_THR_APP_CLOCKS, "applications_clocks_setting"},
    {GS_THR_SW_POWER_CAP, "sw_power_cap"},
    {GS_THR_HW_SLOWDOWN, "hw_slowdown"},
    {GS_THR_SYNC_BOOST, "sync_boost"},
    {GS_THR_SW_THERMAL, "sw_thermal_slowdown"},
    {GS_THR_HW_THERMAL, "hw_thermal_slowdown"},
    {GS_THR_HW_POWER_BRAKE, "hw_power_brake_slowdown"},
    {GS_THR_DISPLAY_CLOCK, "display_clock_setting"},
};

/* One line per reason the GPU supports (every known reason when the supported mask is absent):
 * 1 while it holds the clocks down, else 0. */
static void render_throttle(struct gs_buf *b, struct render *x, const struct gs_snapshot *s)
{
    int any = 0;

    for (unsigned gi = 0; gi < s->n_gpus; gi++) {
        const struct gs_gpu *g = &s->gpus[gi];
        uint64_t active, supported = ~0ULL;
        if (!gs_gpu_has(g, GS_M_THROTTLE_ACTIVE))
            continue;
        active = gs_gpu_mask(g, GS_M_THROTTLE_ACTIVE);
        if (gs_gpu_has(g, GS_M_THROTTLE_SUPPORTED))
            supported = gs_gpu_mask(g, GS_M_THROTTLE_SUPPORTED);
        for (size_t r = 0; r < sizeof throttle_reasons / sizeof throttle_reasons[0]; r++) {
            if (!(supported & throttle_reasons[r].bit))
                continue;
            if (!any++)
                header(b, "gpuscope_gpu_throttle",
                       "1 while this clock-event reason holds the clocks down.", "gauge");
            gs_buf_puts(b, "gpuscope_gpu_throttle{");
            native_labels(b, x, s, g);
            const_label(b, "reason", throttle_reasons[r].name);
            gs_buf_puts(b, "}");
            value(b, (active & throttle_reasons[r].bit) ? 1 : 0);
        }
    }
}

static void render_info(struct gs_buf *b, struct render *x, const struct gs_snapshot *s)
{
    if (s->n_gpus == 0)
        return;
    header(b, "gpuscope_gpu_info", "Static identity of a GPU; the value is always 1.", "gauge");
    for (unsigned gi = 0; gi < s->n_gpus; gi++) {
        const struct gs_gpu *g = &s->gpus[gi];
        gs_buf_puts(b, "gpuscope_gpu_info{");
        native_labels(b, x, s, g);
        gs_buf_puts(b, ",name=\"");
        gs_metrics_escape(b, text_or_empty(g, GS_T_NAME));
        gs_buf_puts(b, "\",pci_bus_id=\"");
        gs_metrics_escape(b, text_or_empty(g, GS_T_PCI_BUS_ID));
        gs_buf_puts(b, "\",serial=\"");
        gs_metrics_escape(b, text_or_empty(g, GS_T_SERIAL));
        gs_buf_puts(b, "\",vbios=\"");
        gs_metrics_escape(b, text_or_empty(g, GS_T_VBIOS));
        gs_buf_puts(b, "\",driver_version=\"");
        gs_metrics_escape(b, s->sys.driver_st == GS_ST_OK ? s->sys.driver_version : "");
        gs_buf_puts(b, "\"} 1\n");
    }
    header(b, "gpuscope_gpu_up", "1 while the GPU answers, 0 once it fell off the bus.", "gauge");
    for (unsigned gi = 0; gi < s->n_gpus; gi++) {
        gs_buf_puts(b, "gpuscope_gpu_up{");
        native_labels(b, x, s, &s->gpus[gi]);
        gs_buf_puts(b, "}");
        value(b, s->gpus[gi].lost ? 0 : 1);
    }
}

/* DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL: TX + RX of the last cycle, whole MB/s as DCGM's integer
 * field; only when both directions have a rate. */
static void render_nvlink_dcgm(struct gs_buf *b, const struct gs_snapshot *s,
                               const struct dcgm_render *dr)
{
    const struct fam *f = &nvlink_dcgm[0];
    int any = 0;

    for (unsigned gi = 0; gi < s->n_gpus; gi++) {
        const struct gs_gpu *g = &s->gpus[gi];
        /* a GPU in MIG mode: one series per GPU instance with the GPU's value, as for the
         * other device-wide fields (render_dcgm) */
        unsigned nm = mig_split(g) ? (g->n_mig < GS_MIG_MAX ? g->n_mig : GS_MIG_MAX) : 0;
        if (!gs_gpu_has(g, GS_M_NVLINK_TX) || !gs_gpu_has(g, GS_M_NVLINK_RX))
            continue;
        for (unsigned k = 0; k < (nm ? nm : 1); k++) {
            if (nm && !mig_first_of_gi(g, k))
                continue;
            if (!any++)
                header(b, f->name, f->help, f->type);
            gs_buf_puts(b, f->name);
            gs_buf_puts(b, "{");
            dcgm_gpu_labels(b, s, g, nm ? &g->mig[k] : NULL, dr);
            gs_buf_puts(b, "}");
            value(b, floor((g->v[GS_M_NVLINK_TX] + g->v[GS_M_NVLINK_RX]) * f->scale));
        }
    }
}

/* ---- per-process families (GS_METRICS_PROCESS) ---- */

/* A process string as a label value: escaped, and bytes outside printable ASCII become '?'
 * (a command name may hold any bytes; the exposition must be UTF-8). */
static void proc_escape(struct gs_buf *b, const char *s)
{
    char tmp[GS_PROC_CMD_LEN];
    size_t i;

    for (i = 0; s[i] && i + 1 < sizeof tmp; i++)
        tmp[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
    tmp[i] = '\0';
    gs_metrics_escape(b, tmp);
}

enum pfam { PF_MEM, PF_SM, PF_CPU, PF_RSS, PF_START, PF__COUNT };

static const struct {
    const char *name, *help, *type;
} pfams[PF__COUNT] = {
    [PF_MEM] = {"gpuscope_process_gpu_memory_bytes", "GPU memory a process holds on this GPU.",
                "gauge"},
    [PF_SM] = {"gpuscope_process_sm_utilization_ratio",
               "Fraction of the GPU's SM time the process used (NVML per-process utilization).",
               "gauge"},
    [PF_CPU] = {"gpuscope_process_cpu_ratio",
                "CPU time over wall time since the previous cycle (1 = one core).", "gauge"},
    [PF_RSS] = {"gpuscope_process_resident_memory_bytes", "Host resident memory (RSS).", "gauge"},
    [PF_START] = {"gpuscope_process_start_time_seconds", "Process start time, unix seconds.",
                  "gauge"},
};

/* Whether family f has a value for p, and the value. */
static int proc_value(const struct gs_proc *p, enum pfam f, double *v)
{
    int host = p->host_st == GS_ST_OK;

    switch (f) {
    case PF_MEM:
        *v = (double)p->gpu_mem_bytes;
        return p->mem_st == GS_ST_OK;
    case PF_SM:
        *v = p->sm_util;
        return p->util_st == GS_ST_OK;
    case PF_CPU:
        *v = p->cpu_ratio;
        return p->cpu_st == GS_ST_OK;
    case PF_RSS:
        *v = (double)p->rss_bytes;
        return host;
    case PF_START:
        *v = p->start_time;
        return host && p->start_time > 0;
    default:
        return 0;
    }
}

static void proc_labels(struct gs_buf *b, struct render *x, const struct gs_snapshot *s,
                        const struct gs_proc *p)
{
    const struct gs_gpu *g = &s->gpus[p->gpu];

    native_labels(b, x, s, g);
    gs_buf_printf(b, ",pid=\"%u\",user=\"", p->pid);
    proc_escape(b, p->host_st == GS_ST_OK ? p->user : "");
    gs_buf_puts(b, "\",name=\"");
    proc_escape(b, p->name);
    gs_buf_puts(b, "\",container=\"");
    proc_escape(b, p->container_id);
    gs_buf_puts(b, "\",pod_uid=\"");
    proc_escape(b, p->pod_uid);
    gs_buf_puts(b, "\",slurm_job=\"");
    proc_escape(b, p->slurm_job);
    gs_buf_puts(b, "\"}");
}

/* Orders process indices by GPU memory, largest first (an unknown size last), then by GPU and
 * pid, so that the same snapshot always keeps the same processes. */
static int proc_order(const void *a, const void *b, void *snap)
{
    const struct gs_snapshot *s = snap;
    const struct gs_proc *p = &s->procs[*(const unsigned *)a];
    const struct gs_proc *q = &s->procs[*(const unsigned *)b];
    uint64_t pm = p->mem_st == GS_ST_OK ? p->gpu_mem_bytes + 1 : 0;
    uint64_t qm = q->mem_st == GS_ST_OK ? q->gpu_mem_bytes + 1 : 0;

    if (pm != qm)
        return pm > qm ? -1 : 1;
    if (p->gpu != q->gpu)
        return p->gpu < q->gpu ? -1 : 1;
    return p->pid < q->pid ? -1 : p->pid > q->pid;
}

int gs_metrics_process_select(const struct gs_snapshot *s, unsigned max, unsigned char *keep,
                              struct gs_metrics_proc_cut *cut)
{
    unsigned *order = NULL, n = 0;
    uint64_t used = 0;
    int full = 0;
    double v;

    memset(cut, 0, sizeof *cut);
    if (s->n_procs == 0)
        return GS_OK;
    if (!(order = malloc(s->n_procs * sizeof *order)))
        return GS_ENOMEM;
    for (unsigned i = 0; i < s->n_procs; i++) {
        keep[i] = 0;
        if (s->procs[i].gpu < s->n_gpus)
            order[n++] = i;
    }
    qsort_r(order, n, sizeof *order, proc_order, (void *)s);
    for (unsigned k = 0; k < n; k++) {
        const struct gs_proc *p = &s->procs[order[k]];
        unsigned series = 0;
        for (int f = 0; f < PF__COUNT; f++)
            series += (unsigned)proc_value(p, (enum pfam)f, &v);
        if (series == 0)
            continue; /* nothing to show, nothing left out */
        if (!full && used + series <= max) {
            used += series;
            keep[order[k]] = 1;
            cut->kept_procs++;
            cut->kept_series += series;
        } else {
            full = 1; /* the rest are smaller: none of them passes a larger one */
            cut->dropped_procs++;
            cut->dropped_series += series;
        }
    }
    free(order);
    return GS_OK;
}

/* The processes holding the most GPU memory are kept, whole, while their series fit in max;
 * the rest are left out whole and counted (gs_metrics_process_select). */
static void render_processes(struct gs_buf *b, struct render *x, const struct gs_snapshot *s,
                             unsigned max)
{
    struct gs_metrics_proc_cut cut;
    unsigned char *keep = s->n_procs ? malloc(s->n_procs) : NULL;
    double v;

    if ((s->n_procs && !keep) || gs_metrics_process_select(s, max, keep, &cut) != GS_OK) {
        free(keep);
        gs_buf_fail(b, GS_BUF_ENOMEM);
        return;
    }
    for (int f = 0; f < PF__COUNT; f++) {
        int any = 0;
        for (unsigned i = 0; i < s->n_procs; i++) {
            const struct gs_proc *p = &s->procs[i];
            if (!keep[i] || !proc_value(p, (enum pfam)f, &v))
                continue;
            if (!any++)
                header(b, pfams[f].name, pfams[f].help, pfams[f].type);
            gs_buf_puts(b, pfams[f].name);
            gs_buf_puts(b, "{");
            proc_labels(b, x, s, p);
            value(b, v);
        }
    }
    free(keep);
    header(b, "gpuscope_process_series_dropped",
           "Per-process series left out of this exposition by process_metrics_max.", "gauge");
    gs_buf_printf(b, "gpuscope_process_series_dropped %llu\n",
                  (unsigned long long)cut.dropped_series);
    header(b, "gpuscope_processes_dropped",
           "Processes whose series were left out of this exposition by process_metrics_max "
           "(those holding the least GPU memory).",
           "gauge");
    gs_buf_printf(b, "gpuscope_processes_dropped %u\n", cut.dropped_procs);
}

static void render_history_self(struct gs_buf *b, const struct gs_metrics_self *self)
{
    header(b, "gpuscope_history_rows_written_total",
           "Rows committed to history.db (samples, processes, rollups).", "counter");
    gs_buf_printf(b, "gpuscope_history_rows_written_total %llu\n",
                  (unsigned long long)self->history_rows);
    header(b, "gpuscope_history_write_errors_total",
           "History flushes that failed (rolled back, retried at the next flush).", "counter");
    gs_buf_printf(b, "gpuscope_history_write_errors_total %llu\n",
                  (unsigned long long)self->history_write_errors);
    header(b, "gpuscope_history_snapshots_dropped_total",
           "Snapshots never written to history (writer queue or store buffer full).", "counter");
    gs_buf_printf(b, "gpuscope_history_snapshots_dropped_total %llu\n",
                  (unsigned long long)self->history_dropped);
    if (self->history_flush_last_s >= 0) {
        header(b, "gpuscope_history_flush_duration_seconds",
               "Duration of the last successful history flush.", "gauge");
        gs_buf_printf(b, "gpuscope_history_flush_duration_seconds %.9g\n",
                      self->history_flush_last_s);
        header(b, "gpuscope_history_flush_duration_max_seconds",
               "Longest successful history flush since the agent started.", "gauge");
        gs_buf_printf(b, "gpuscope_history_flush_duration_max_seconds %.9g\n",
                      self->history_flush_max_s);
    }
    header(b, "gpuscope_history_integrity_ok",
           "0 once a scheduled check (integrity_check_interval) found history.db damaged: "
           "writes stopped, reads answer 503; else 1.",
           "gauge");
    gs_buf_printf(b, "gpuscope_history_integrity_ok %d\n", self->history_integrity_ok ? 1 : 0);
    header(b, "gpuscope_history_integrity_checks_total",
           "Scheduled integrity checks of history.db run.", "counter");
    gs_buf_printf(b, "gpuscope_history_integrity_checks_total %llu\n",
                  (unsigned long long)self->history_integrity_checks);
}

static void render_runs_self(struct gs_buf *b, const struct gs_metrics_self *self)
{
    header(b, "gpuscope_runs_active", "Training runs going on (step-record socket).", "gauge");
    gs_buf_printf(b, "gpuscope_runs_active %u\n", self->runs_active);
    header(b, "gpuscope_runs_started_total", "Training runs started since the agent started.",
           "counter");
    gs_buf_printf(b, "gpuscope_runs_started_total %llu\n", (unsigned long long)self->runs_started);
    header(b, "gpuscope_runs_records_received_total",
           "Valid records (hello, step, end) received on the step-record socket.", "counter");
    gs_buf_printf(b, "gpuscope_runs_records_received_total %llu\n",
                  (unsigned long long)self->runs_records);
    header(b, "gpuscope_runs_records_rejected_total",
           "Records refused on the step-record socket (malformed, wrong version, too big).",
           "counter");
    gs_buf_printf(b, "gpuscope_runs_records_rejected_total %llu\n",
                  (unsigned long long)self->runs_rejected);
    header(b, "gpuscope_runs_steps_dropped_total",
           "Step records received but not kept (too many runs, history buffer full or failing).",
           "counter");
    gs_buf_printf(b, "gpuscope_runs_steps_dropped_total %llu\n",
                  (unsigned long long)self->runs_steps_dropped);
    header(b, "gpuscope_runs_log_points_dropped_total",
           "Logged values (loss, learning rate) of runs not kept (past 100000 a run, or the "
           "history's buffer full or failing).",
           "counter");
    gs_buf_printf(b, "gpuscope_runs_log_points_dropped_total %llu\n",
                  (unsigned long long)self->runs_logs_dropped);
}

const char *gs_metrics_down_reason(int rc)
{
    switch (rc) {
    case GS_ENOLIB:
        return "no_library";
    case GS_ENODRIVER:
        return "no_driver";
    case GS_EMISMATCH:
        return "version_mismatch";
    case GS_ENOGPU:
        return "no_gpu";
    case GS_EPERM:
        return "no_permission";
    case GS_ENVML:
        return "nvml_error";
    default:
        return "error";
    }
}

static void render_self(struct gs_buf *b, const struct gs_metrics_self *self)
{
    /* One series whatever the state: the why is a bounded label on its own family (the
     * text, a dlerror path maybe, is in the log and /api/v1/snapshot's 503). */
    header(b, "gpuscope_up", "1 when the last cycle could read the NVIDIA driver.", "gauge");
    gs_buf_puts(b, "gpuscope_up{hostname=\"");
    gs_metrics_escape(b, self->hostname ? self->hostname : "");
    gs_buf_printf(b, "\"} %d\n", self->up ? 1 : 0);
    if (!self->up) {
        header(b, "gpuscope_down_reason",
               "Why the driver cannot be read (present while gpuscope_up is 0); always 1.",
               "gauge");
        gs_buf_puts(b, "gpuscope_down_reason{hostname=\"");
        gs_metrics_escape(b, self->hostname ? self->hostname : "");
        gs_buf_printf(b, "\",reason=\"%s\"} 1\n", gs_metrics_down_reason(self->reason_rc));
    }
    header(b, "gpuscope_build_info", "Build of the agent; the value is always 1.", "gauge");
    gs_buf_puts(b, "gpuscope_build_info{version=\"");
    gs_metrics_escape(b, self->version ? self->version : "");
    gs_buf_printf(b, "\",schema=\"%d\"} 1\n", GS_METRICS_SCHEMA_VERSION);
    header(b, "gpuscope_sample_interval_seconds", "Configured sampling period.", "gauge");
    gs_buf_printf(b, "gpuscope_sample_interval_seconds %.15g\n", self->interval_s);
    if (self->sample_seconds >= 0) {
        header(b, "gpuscope_sample_duration_seconds", "Duration of the last sampling cycle.",
               "gauge");
        gs_buf_printf(b, "gpuscope_sample_duration_seconds %.9g\n", self->sample_seconds);
    }
    header(b, "gpuscope_cycles_total", "Sampling cycles run.", "counter");
    gs_buf_printf(b, "gpuscope_cycles_total %llu\n", (unsigned long long)self->cycles);
    header(b, "gpuscope_cycles_overrun_total",
           "Cycles that ran past the next period boundary (the missed ticks are skipped).",
           "counter");
    gs_buf_printf(b, "gpuscope_cycles_overrun_total %llu\n", (unsigned long long)self->overruns);
    header(b, "gpuscope_sample_errors_total",
           "Cycles in which no GPU could be read (the driver down or failing).", "counter");
    gs_buf_printf(b, "gpuscope_sample_errors_total %llu\n",
                  (unsigned long long)self->sample_errors);
    if (self->history)
        render_history_self(b, self);
    if (self->runs)
        render_runs_self(b, self);
}

int gs_metrics_render(struct gs_buf *b, const struct gs_snapshot *snap,
                      const struct gs_metrics_self *self, unsigned flags)
{
    render_self(b, self);
    header(b, "gpuscope_info",
           "What the agent reads; simulated=\"1\": the NVML library is nvml-sim, no GPU is "
           "real. The value is always 1.",
           "gauge");
    gs_buf_puts(b, "gpuscope_info{hostname=\"");
    gs_metrics_escape(b, self->hostname ? self->hostname : "");
    gs_buf_printf(b, "\",simulated=\"%d\"} 1\n", snap && snap->sys.simulated ? 1 : 0);
    if (snap) {
        struct render x;

        memset(x.native.len, 0, sizeof x.native.len);
        memset(x.dcgm.len, 0, sizeof x.dcgm.len);
        render_info(b, &x, snap);
        render_table(b, &x, snap, native, sizeof native / sizeof native[0]);
        render_throttle(b, &x, snap);
        render_table(b, &x, snap, nvlink_native, sizeof nvlink_native / sizeof nvlink_native[0]);
        render_mig_native(b, &x, snap);
        render_pod_info(b, &x, snap);
        if (flags & GS_METRICS_DCGM) {
            struct dcgm_render dr = {.old_hostname = (flags & GS_METRICS_DCGM_HOSTNAME) != 0,
                                     .sets = &x.dcgm};
            struct gpu_pod *pods = pods_begin(snap, &dr);
            render_dcgm(b, snap, &dr);
            render_nvlink_dcgm(b, snap, &dr);
            pods_end(&dr, pods);
        }
        if (flags & GS_METRICS_PROCESS)
            render_processes(b, &x, snap, self->process_series_max);
    }
    return gs_buf_status(b) != GS_BUF_OK ? GS_ENOMEM : GS_OK;
}

void gs_metrics_render_refused(struct gs_buf *b, const struct gs_refused_row *rows, unsigned n)
{
    if (n == 0)
        return;
    header(b, "gpuscope_refused_total",
           "Connections, requests and records the agent refused, by door (http, unix, steps) "
           "and reason (docs/metrics.md); each (uid, reason) is also logged once.",
           "counter");
    for (unsigned i = 0; i < n; i++)
        gs_buf_printf(b, "gpuscope_refused_total{door=\"%s\",reason=\"%s\"} %llu\n", rows[i].door,
                      rows[i].reason, (unsigned long long)rows[i].n);
}
