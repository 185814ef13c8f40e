/*
 * The text view of the quick check: a pure function from (snapshot, options, width, colour)
 * to lines, in gpustat's layout and colours:
 *
 *   node1  2025-01-14 10:22:03  driver 590.48.01  CUDA 13.1
 *   [0] NVIDIA H100 80GB HBM3 | 45°C,  82 % | 32120 / 81559 MB | python/12345(alice 30.1G)
 *
 * Every GPU line is cut into cells (index and name, readings with any throttling, memory,
 * clocks, processes); each cell is padded to the widest across GPUs so columns line up. When
 * that is wider than the terminal, the same cells are built in a narrow layout (shorter
 * readings, clocks and throttling on a line below) rather than cut at the edge. Colours follow
 * gpustat: temperature red below 50 °C and bold red from 50, utilization green below 30 % and
 * bold green from 30, memory yellow, power magenta (bold from 40 % of the limit). Absent
 * readings print a grey N/A, never 0. Text that comes from outside (names, command lines) is
 * stripped of control characters so a process cannot drive the terminal.
 */
#include "cli/quick/quick.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpuscope/gs_err.h"

#define MIB 1048576.0
#define NO_INSTANCE 0xFFFFFFFFu

enum cell { C_ID, C_NAME, C_SENS, C_MEM, C_CLK, C__COUNT };

struct span {
    size_t off, len, w; /* bytes in the scratch buffer, display width */
};

struct row {
    struct span c[C__COUNT];
    int lost;
};

/* ---- small formatters ---- */

/* The decimal digits of v into d (at least 21 bytes, NUL-terminated); their count. What "%llu"
 * writes, without printf's cost: a quick check formats a few dozen numbers. */
static size_t ull_digits(char *d, unsigned long long v)
{
    char r[21];
    size_t n = 0;

    do {
        r[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        d[i] = r[n - 1 - i];
    d[n] = '\0';
    return n;
}

/* x rounded to an integer as "%.0f" rounds it (to nearest, ties to even: the default rounding
 * mode, which printf follows too): adding 2^52 leaves no fraction bits. For 0 <= x < 2^52; -1
 * for anything else (the caller prints with printf then). */
static double round_half_even(double x)
{
    const double two52 = 4503599627370496.0;
    volatile double t; /* the sum must be rounded to double, not kept wider or folded */

    if (!(x >= 0 && x < two52))
        return -1;
    t = x + two52;
    return t - two52;
}

/* Appends s with control characters (and DEL) replaced by '?', cut to max display columns
 * (0: no limit) with an ellipsis. */
static void put_safe(struct gs_tbuf *b, const char *s, size_t max)
{
    size_t n = strlen(s), cut = n, cols = gs_term_width(s, n);
    size_t i;

    if (max && cols > max)
        cut = gs_term_clip(s, n, max - 1);
    for (i = 0; i < cut;) { /* runs of printable bytes at once */
        size_t j = i;
        while (j < cut && (unsigned char)s[j] >= 0x20 && s[j] != 0x7f)
            j++;
        gs_tbuf_put(b, s + i, j - i);
        if (j < cut)
            gs_tbuf_put(b, "?", 1);
        i = j + (j < cut);
    }
    if (cut < n)
        gs_tbuf_puts(b, "\xe2\x80\xa6"); /* … */
}

static void put_na(struct gs_tbuf *b, size_t width)
{
    if (width > 3)
        gs_tbuf_spaces(b, width - 3);
    gs_tbuf_color(b, GS_SGR_GRAY, "N/A");
}

static long pct(double ratio)
{
    return lround(ratio * 100.0);
}

void gs_quick_fmt_mem(char *buf, size_t n, double bytes)
{
    double mib = bytes / MIB, r;
    char d[24];
    size_t k;

    if (mib >= 1024.0 && mib < 100 * 1024.0) {
        snprintf(buf, n, "%.1fG", mib / 1024.0);
        return;
    }
    /* "%.0fG" / "%.0fM", the integer written by hand when it is one */
    r = round_half_even(mib >= 1024.0 ? mib / 1024.0 : mib);
    if (r < 0) {
        snprintf(buf, n, mib >= 1024.0 ? "%.0fG" : "%.0fM", mib >= 1024.0 ? mib / 1024.0 : mib);
        return;
    }
    k = ull_digits(d, (unsigned long long)r);
    d[k++] = mib >= 1024.0 ? 'G' : 'M';
    if (n == 0)
        return;
    if (k > n - 1) /* cut as snprintf cuts */
        k = n - 1;
    memcpy(buf, d, k);
    buf[k] = '\0';
}

/* A decimal rate for PCIe throughput: "12.3 GB/s", "350 MB/s", "8 kB/s". */
static void fmt_rate(char *buf, size_t n, double bps)
{
    if (bps >= 1e9)
        snprintf(buf, n, "%.1f GB/s", bps / 1e9);
    else if (bps >= 1e6)
        snprintf(buf, n, "%.0f MB/s", bps / 1e6);
    else
        snprintf(buf, n, "%.0f kB/s", bps / 1e3);
}

/* "%3ld %" in colour lo below threshold and hi from it, or N/A. */
static void put_pct(struct gs_tbuf *b, const struct gs_gpu *g, enum gs_metric m, long threshold,
                    enum gs_sgr lo, enum gs_sgr hi)
{
    long v;

    if (!gs_gpu_has(g, m)) {
        put_na(b, 5);
        return;
    }
    v = pct(g->v[m]);
    gs_tbuf_sgr(b, v < threshold ? lo : hi);
    gs_tbuf_printf(b, "%3ld %%", v);
    gs_tbuf_sgr(b, GS_SGR_RESET);
}

/* Power draw / limit ("lead 590 / 700 W" in the normal layout, " 590/ 700W" in the narrow
 * one), the draw bold from 40 % of the limit. */
static void put_power(struct gs_tbuf *b, const struct gs_gpu *g, const char *lead, const char *sep,
                      const char *unit)
{
    enum gs_metric lim =
        gs_gpu_has(g, GS_M_POWER_ENFORCED_LIMIT) ? GS_M_POWER_ENFORCED_LIMIT : GS_M_POWER_LIMIT;
    int has_lim = gs_gpu_has(g, lim);

    gs_tbuf_puts(b, lead);
    if (gs_gpu_has(g, GS_M_POWER_DRAW)) {
        double d = g->v[GS_M_POWER_DRAW];
        int hot = has_lim && g->v[lim] > 0 && d / g->v[lim] >= 0.4;
        gs_tbuf_sgr(b, hot ? GS_SGR_BOLD_MAGENTA : GS_SGR_MAGENTA);
        gs_tbuf_printf(b, "%4ld", lround(d));
        gs_tbuf_sgr(b, GS_SGR_RESET);
    } else {
        put_na(b, 4);
    }
    gs_tbuf_puts(b, sep);
    if (has_lim) {
        gs_tbuf_sgr(b, GS_SGR_MAGENTA);
        gs_tbuf_printf(b, "%4ld", lround(g->v[lim]));
        gs_tbuf_sgr(b, GS_SGR_RESET);
    } else {
        put_na(b, 4);
    }
    gs_tbuf_puts(b, unit);
}

/* ---- cells ---- */

/* The GPU temperature, "%3ld°C" (red, bold from 50 °C), or N/A as wide. */
static void put_temp(struct gs_tbuf *b, const struct gs_gpu *g)
{
    if (gs_gpu_has(g, GS_M_TEMP_GPU)) {
        long t = lround(g->v[GS_M_TEMP_GPU]);
        gs_tbuf_sgr(b, t < 50 ? GS_SGR_RED : GS_SGR_BOLD_RED);
        gs_tbuf_printf(b,
                       "%3ld\xc2\xb0"
                       "C",
                       t);
        gs_tbuf_sgr(b, GS_SGR_RESET);
    } else {
        put_na(b, 5);
    }
}

static void cell_sensors(struct gs_tbuf *b, const struct gs_gpu *g, unsigned show)
{
    put_temp(b, g);
    if (show & GS_QS_FAN) {
        gs_tbuf_puts(b, ", fan ");
        put_pct(b, g, GS_M_FAN, 30, GS_SGR_CYAN, GS_SGR_BOLD_CYAN);
    }
    gs_tbuf_puts(b, ", ");
    if (gs_gpu_mig_on(g) && !gs_gpu_has(g, GS_M_UTIL_GPU))
        gs_tbuf_color(b, GS_SGR_GRAY, "  MIG"); /* NVML has no utilization in MIG mode */
    else
        put_pct(b, g, GS_M_UTIL_GPU, 30, GS_SGR_GREEN, GS_SGR_BOLD_GREEN);
    if (show & GS_QS_CODEC) {
        gs_tbuf_puts(b, " (");
        gs_tbuf_color(b, GS_SGR_BOLD, "E:");
        gs_tbuf_puts(b, " ");
        put_pct(b, g, GS_M_UTIL_ENC, 50, GS_SGR_GREEN, GS_SGR_BOLD_GREEN);
        gs_tbuf_puts(b, "  ");
        gs_tbuf_color(b, GS_SGR_BOLD, "D:");
        gs_tbuf_puts(b, " ");
        put_pct(b, g, GS_M_UTIL_DEC, 50, GS_SGR_GREEN, GS_SGR_BOLD_GREEN);
        gs_tbuf_puts(b, ")");
    }
    if (show & GS_QS_POWER)
        put_power(b, g, ", ", " / ", " W");
}

static void put_mib(struct gs_tbuf *b, int has, double bytes, enum gs_sgr c)
{
    if (!has) {
        put_na(b, 5);
        return;
    }
    gs_tbuf_sgr(b, c);
    if (bytes >= 0 && bytes / MIB < 1e15) { /* "%5.0f" of the floor: the integer part */
        char d[24];
        size_t k = ull_digits(d, (unsigned long long)(bytes / MIB));
        if (k < 5)
            gs_tbuf_spaces(b, 5 - k);
        gs_tbuf_put(b, d, k);
    } else {
        gs_tbuf_printf(b, "%5.0f", floor(bytes / MIB));
    }
    gs_tbuf_sgr(b, GS_SGR_RESET);
}

static void cell_mem(struct gs_tbuf *b, int has_used, double used, int has_total, double total)
{
    put_mib(b, has_used, used, GS_SGR_BOLD_YELLOW);
    gs_tbuf_puts(b, " / ");
    put_mib(b, has_total, total, GS_SGR_YELLOW);
    gs_tbuf_puts(b, " MB");
}

static void put_mhz(struct gs_tbuf *b, const struct gs_gpu *g, enum gs_metric m)
{
    if (gs_gpu_has(g, m))
        gs_tbuf_printf(b, "%4ld", lround(g->v[m] / 1e6));
    else
        put_na(b, 4);
}

/* "  tx 1.2 GB/s rx 350 MB/s" when both PCIe rates are known (cell_clocks, cell_below_narrow). */
static void put_pcie_rates(struct gs_tbuf *b, const struct gs_gpu *g)
{
    if (gs_gpu_has(g, GS_M_PCIE_TX) && gs_gpu_has(g, GS_M_PCIE_RX)) {
        char tx[32], rx[32];
        fmt_rate(tx, sizeof tx, g->v[GS_M_PCIE_TX]);
        fmt_rate(rx, sizeof rx, g->v[GS_M_PCIE_RX]);
        gs_tbuf_printf(b, "  tx %s rx %s", tx, rx);
    }
}

/* "Gen4 x8", in yellow with " (max Gen5 x16)" when the link runs below what the GPU and the
 * slot allow (a reseated card, a riser, a bad slot: the dashboard flags the same). */
static void put_pcie_link(struct gs_tbuf *b, const struct gs_gpu *g, int pad)
{
    long gen, width, gmax = 0, wmax = 0;
    int below;

    if (!gs_gpu_has(g, GS_M_PCIE_GEN) || !gs_gpu_has(g, GS_M_PCIE_WIDTH)) {
        gs_tbuf_puts(b, "PCIe ");
        gs_tbuf_color(b, GS_SGR_GRAY, "N/A");
        return;
    }
    gen = lround(g->v[GS_M_PCIE_GEN]);
    width = lround(g->v[GS_M_PCIE_WIDTH]);
    if (gs_gpu_has(g, GS_M_PCIE_GEN_MAX))
        gmax = lround(g->v[GS_M_PCIE_GEN_MAX]);
    if (gs_gpu_has(g, GS_M_PCIE_WIDTH_MAX))
        wmax = lround(g->v[GS_M_PCIE_WIDTH_MAX]);
    below = (gmax > 0 && gen < gmax) || (wmax > 0 && width < wmax);
    if (!below) {
        gs_tbuf_printf(b, pad ? "Gen%ld x%-2ld" : "Gen%ld x%ld", gen, width);
        return;
    }
    gs_tbuf_sgr(b, GS_SGR_BOLD_YELLOW);
    gs_tbuf_printf(b, "Gen%ld x%ld (max Gen%ld x%ld)", gen, width, gmax > 0 ? gmax : gen,
                   wmax > 0 ? wmax : width);
    gs_tbuf_sgr(b, GS_SGR_RESET);
}

/* "  ECC 2/0" (volatile corrected / uncorrected, red when any uncorrected), "  Xid 79" (the
 * last Xid the driver reported), "  row remap pending": what the dashboard's health shows. */
static void put_health(struct gs_tbuf *b, const struct gs_gpu *g)
{
    if (gs_gpu_has(g, GS_M_ECC_CORR_VOL) && gs_gpu_has(g, GS_M_ECC_UNCORR_VOL)) {
        int bad = g->v[GS_M_ECC_UNCORR_VOL] > 0;

        gs_tbuf_puts(b, "  ");
        gs_tbuf_sgr(b, bad                           ? GS_SGR_BOLD_RED
                       : g->v[GS_M_ECC_CORR_VOL] > 0 ? GS_SGR_YELLOW
                                                     : GS_SGR_NONE);
        gs_tbuf_printf(b, "ECC %.0f/%.0f", g->v[GS_M_ECC_CORR_VOL], g->v[GS_M_ECC_UNCORR_VOL]);
        gs_tbuf_sgr(b, GS_SGR_RESET);
    }
    if (gs_gpu_has(g, GS_M_XID_LAST) && g->v[GS_M_XID_LAST] > 0) {
        gs_tbuf_puts(b, "  ");
        gs_tbuf_sgr(b, GS_SGR_BOLD_RED);
        gs_tbuf_printf(b, "Xid %.0f", g->v[GS_M_XID_LAST]);
        gs_tbuf_sgr(b, GS_SGR_RESET);
    }
    if (gs_gpu_has(g, GS_M_REMAP_PENDING) && g->v[GS_M_REMAP_PENDING] > 0) {
        gs_tbuf_puts(b, "  ");
        gs_tbuf_color(b, GS_SGR_BOLD_RED, "row remap pending");
    }
}

/* -a: "P0  1980 / 2619 MHz  Gen5 x16  tx 1.2 GB/s rx 350 MB/s  ECC 0/0" (SM and memory
 * clocks, the PCIe link, its throughput, the health counters). */
static void cell_clocks(struct gs_tbuf *b, const struct gs_gpu *g)
{
    if (gs_gpu_has(g, GS_M_PSTATE) && g->v[GS_M_PSTATE] >= 0 && g->v[GS_M_PSTATE] <= 15)
        gs_tbuf_printf(b, "P%-2ld", lround(g->v[GS_M_PSTATE]));
    else
        gs_tbuf_color(b, GS_SGR_GRAY, "N/A");
    gs_tbuf_puts(b, " ");
    put_mhz(b, g, GS_M_CLOCK_SM);
    gs_tbuf_puts(b, " / ");
    put_mhz(b, g, GS_M_CLOCK_MEM);
    gs_tbuf_puts(b, " MHz  ");
    put_pcie_link(b, g, 1);
    put_pcie_rates(b, g);
    put_health(b, g);
}

#define THR_HW (GS_THR_HW_SLOWDOWN | GS_THR_HW_THERMAL | GS_THR_HW_POWER_BRAKE)

/* Active throttle reasons except "GPU idle"; 0 when none or unknown. */
static uint64_t throttle_mask(const struct gs_gpu *g)
{
    if (g->lost || !gs_gpu_has(g, GS_M_THROTTLE_ACTIVE))
        return 0;
    return gs_gpu_mask(g, GS_M_THROTTLE_ACTIVE) & ~GS_THR_GPU_IDLE;
}

static void cell_throttle(struct gs_tbuf *b, uint64_t mask)
{
    int first = 1;

    if (!mask)
        return;
    gs_tbuf_sgr(b, (mask & THR_HW) ? GS_SGR_BOLD_RED : GS_SGR_BOLD_YELLOW);
    gs_tbuf_puts(b, "\xe2\x9a\xa0 "); /* ⚠ */
    for (unsigned bit = 0; bit < 64; bit++) {
        uint64_t m = 1ULL << bit;
        const char *name;
        if (!(mask & m))
            continue;
        name = gs_throttle_name(m);
        if (!first)
            gs_tbuf_puts(b, ", ");
        if (name)
            gs_tbuf_puts(b, name);
        else
            gs_tbuf_printf(b, "0x%llx", (unsigned long long)m);
        first = 0;
    }
    gs_tbuf_sgr(b, GS_SGR_RESET);
}

/* ---- processes ---- */

static const char *job_kind_name(unsigned kind)
{
    switch (kind) {
    case GS_JOB_DOCKER:
        return "docker";
    case GS_JOB_CONTAINERD:
        return "containerd";
    case GS_JOB_CRIO:
        return "cri-o";
    case GS_JOB_PODMAN:
        return "podman";
    case GS_JOB_SLURM:
        return "slurm";
    }
    return "container";
}

/* " docker:3f2a1b9c4d5e pod:1a2b3c4d slurm:4242" — short ids, enough to grep for. */
static void put_jobs(struct gs_tbuf *b, const struct gs_proc *p)
{
    if (p->container_id[0]) {
        char id[13];
        memcpy(id, p->container_id, sizeof id - 1);
        id[sizeof id - 1] = '\0';
        gs_tbuf_printf(b, " %s:", job_kind_name(p->job_kind));
        put_safe(b, id, 0);
    }
    if (p->pod_name[0]) { /* the node names the pod (src/backend/k8s.h) */
        gs_tbuf_puts(b, " pod:");
        if (p->pod_namespace[0]) {
            put_safe(b, p->pod_namespace, 0);
            gs_tbuf_puts(b, "/");
        }
        put_safe(b, p->pod_name, 0);
    } else if (p->pod_uid[0]) {
        char id[9];
        memcpy(id, p->pod_uid, sizeof id - 1);
        id[sizeof id - 1] = '\0';
        gs_tbuf_puts(b, " pod:");
        put_safe(b, id, 0);
    }
    if (p->slurm_job[0]) {
        gs_tbuf_puts(b, " slurm:");
        put_safe(b, p->slurm_job, 0);
    }
}

static const char *proc_name(const struct gs_proc *p)
{
    return p->name[0] ? p->name : "?";
}

static const char *proc_user(const struct gs_proc *p)
{
    return p->user[0] ? p->user : "?";
}

/* name/pid(user mem) with the parts -c, -u, -p choose; all three when none is chosen. */
static void put_proc(struct gs_tbuf *b, const struct gs_proc *p, unsigned show)
{
    unsigned parts = show & GS_QS_PROC_PARTS;
    char mem[32];

    if (!parts)
        parts = GS_QS_PROC_PARTS;
    if (p->mem_st == GS_ST_OK)
        gs_quick_fmt_mem(mem, sizeof mem, (double)p->gpu_mem_bytes);
    else
        snprintf(mem, sizeof mem, "N/A");
    if (parts & GS_QS_CMD) {
        gs_tbuf_sgr(b, GS_SGR_CYAN);
        put_safe(b, proc_name(p), 32);
        gs_tbuf_sgr(b, GS_SGR_RESET);
    }
    if (parts & GS_QS_PID)
        gs_tbuf_printf(b, "%s%u", (parts & GS_QS_CMD) ? "/" : "", p->pid);
    if ((parts & GS_QS_USER) && !(parts & (GS_QS_CMD | GS_QS_PID))) {
        gs_tbuf_sgr(b, GS_SGR_GRAY);
        put_safe(b, proc_user(p), 0);
        gs_tbuf_sgr(b, GS_SGR_RESET);
        parts &= ~GS_QS_USER;
    }
    gs_tbuf_puts(b, "(");
    if ((parts & GS_QS_USER) && p->user[0]) { /* an unknown owner is left out, not "?" */
        gs_tbuf_sgr(b, GS_SGR_GRAY);
        put_safe(b, proc_user(p), 0);
        gs_tbuf_sgr(b, GS_SGR_RESET);
        gs_tbuf_puts(b, " ");
    }
    gs_tbuf_color(b, p->mem_st == GS_ST_OK ? GS_SGR_YELLOW : GS_SGR_GRAY, mem);
    if (show & GS_QS_CONTAINER)
        put_jobs(b, p);
    gs_tbuf_puts(b, ")");
}

static int by_mem_desc(const void *a, const void *b)
{
    const struct gs_proc *x = *(const struct gs_proc *const *)a;
    const struct gs_proc *y = *(const struct gs_proc *const *)b;
    uint64_t mx = x->mem_st == GS_ST_OK ? x->gpu_mem_bytes : 0;
    uint64_t my = y->mem_st == GS_ST_OK ? y->gpu_mem_bytes : 0;

    if (mx != my)
        return mx > my ? -1 : 1;
    return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* Which MIG device of g process p runs on, or -1 for the GPU itself. */
static int proc_mig(const struct gs_gpu *g, const struct gs_proc *p)
{
    if (p->gi_id == NO_INSTANCE)
        return -1;
    for (unsigned m = 0; m < g->n_mig && m < GS_MIG_MAX; m++)
        if (g->mig[m].gi_id == p->gi_id && (g->mig[m].ci_id == p->ci_id || p->ci_id == NO_INSTANCE))
            return (int)m;
    return -1;
}

/* Collects the processes of GPU slot gi on MIG device mig (-1: the GPU) into list, largest
 * memory first; returns the count. */
static unsigned collect_procs(const struct gs_snapshot *s, unsigned gi, int mig,
                              const struct gs_proc **list)
{
    unsigned n = 0;

    for (unsigned i = 0; i < s->n_procs; i++) {
        const struct gs_proc *p = &s->procs[i];
        if (p->gpu == gi && proc_mig(&s->gpus[gi], p) == mig)
            list[n++] = p;
    }
    qsort(list, n, sizeof *list, by_mem_desc);
    return n;
}

/* Appends " proc" for each process after a line prefix `col` columns wide; with cols set,
 * a process that would cross the edge starts a continuation line indented to the process
 * column (or 4 when that column is too far right). */
static void put_procs(struct gs_tbuf *out, struct gs_tbuf *tmp, const struct gs_proc **list,
                      unsigned n, unsigned show, size_t col, unsigned cols)
{
    size_t indent = (cols && col + 24 > cols) ? 4 : col;
    size_t x = col;

    for (unsigned i = 0; i < n; i++) {
        size_t w;
        gs_tbuf_reset(tmp);
        put_proc(tmp, list[i], show);
        w = gs_term_width(tmp->text.data, tmp->text.len);
        if (cols && x + 1 + w > cols && x > indent) {
            gs_tbuf_puts(out, "\n");
            gs_tbuf_spaces(out, indent);
            x = indent;
        }
        gs_tbuf_puts(out, " ");
        gs_tbuf_put(out, gs_tbuf_str(tmp), tmp->text.len);
        x += 1 + w;
    }
}

/* -f: " ├─   12345 (  98%,   2.1G) alice: python train.py --lr 1e-4" under the line. */
static void put_full_cmds(struct gs_tbuf *out, const struct gs_proc **list, unsigned n,
                          unsigned show, const char *lead, unsigned cols)
{
    for (unsigned i = 0; i < n; i++) {
        const struct gs_proc *p = list[i];
        size_t start = out->text.len, w;
        char rss[32];

        gs_tbuf_printf(out, "%s%s %7u (", lead,
                       i + 1 == n ? "\xe2\x94\x94\xe2\x94\x80" : "\xe2\x94\x9c\xe2\x94\x80",
                       p->pid);
        if (p->cpu_st == GS_ST_OK) {
            gs_tbuf_sgr(out, GS_SGR_GREEN);
            gs_tbuf_printf(out, "%4.0f%%", p->cpu_ratio * 100.0);
            gs_tbuf_sgr(out, GS_SGR_RESET);
        } else {
            put_na(out, 5);
        }
        gs_tbuf_puts(out, ", ");
        if (p->host_st == GS_ST_OK) {
            gs_quick_fmt_mem(rss, sizeof rss, (double)p->rss_bytes);
            gs_tbuf_sgr(out, GS_SGR_YELLOW);
            gs_tbuf_printf(out, "%6s", rss);
            gs_tbuf_sgr(out, GS_SGR_RESET);
        } else {
            put_na(out, 6);
        }
        gs_tbuf_puts(out, ") ");
        gs_tbuf_sgr(out, GS_SGR_GRAY);
        put_safe(out, proc_user(p), 0);
        gs_tbuf_sgr(out, GS_SGR_RESET);
        if (show & GS_QS_CONTAINER)
            put_jobs(out, p);
        gs_tbuf_puts(out, ": ");
        w = gs_tbuf_status(out) == GS_OK
                ? gs_term_width(out->text.data + start, out->text.len - start)
                : 0;
        gs_tbuf_sgr(out, GS_SGR_CYAN);
        put_safe(out, p->cmdline[0] ? p->cmdline : proc_name(p),
                 cols && cols > w + 8 ? cols - w : 0);
        gs_tbuf_sgr(out, GS_SGR_RESET);
        gs_tbuf_puts(out, "\n");
    }
}

/* ---- layout ---- */

static void header(struct gs_tbuf *out, const struct gs_snapshot *s)
{
    char when[64] = "N/A";

    if (s->t_real > 0) {
        time_t t = (time_t)s->t_real;
        struct tm tm;
        if (localtime_r(&t, &tm))
            strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    }
    gs_tbuf_sgr(out, GS_SGR_BOLD_WHITE);
    put_safe(out, s->sys.hostname[0] ? s->sys.hostname : "?", 64);
    gs_tbuf_sgr(out, GS_SGR_RESET);
    gs_tbuf_printf(out, "  %s  ", when);
    gs_tbuf_sgr(out, GS_SGR_GRAY);
    gs_tbuf_puts(out, "driver ");
    put_safe(out, s->sys.driver_st == GS_ST_OK ? s->sys.driver_version : "N/A", 0);
    if (s->sys.cuda_st == GS_ST_OK && s->sys.cuda_version > 0)
        gs_tbuf_printf(out, "  CUDA %d.%d", s->sys.cuda_version / 1000,
                       (s->sys.cuda_version % 1000) / 10);
    if (s->sys.source[0]) { /* an agent's snapshot: say which agent */
        gs_tbuf_puts(out, "  via ");
        put_safe(out, s->sys.source, 0);
    }
    gs_tbuf_sgr(out, GS_SGR_RESET);
    if (s->sys.simulated) {
        gs_tbuf_puts(out, "  ");
        gs_tbuf_sgr(out, GS_SGR_BOLD_RED);
        gs_tbuf_puts(out, "SIMULATED (");
        put_safe(out, s->sys.sim_info[0] ? s->sys.sim_info : "nvml-sim", 32);
        gs_tbuf_puts(out, "): not real GPUs");
        gs_tbuf_sgr(out, GS_SGR_RESET);
    }
    gs_tbuf_puts(out, "\n");
}

static struct span end_span(const struct gs_tbuf *b, size_t off)
{
    struct span sp = {off, 0, 0};

    if (gs_tbuf_status(b) == GS_OK) {
        sp.len = b->text.len - off;
        sp.w = gs_term_width(b->text.data + off, sp.len);
    }
    return sp;
}

static void put_cell(struct gs_tbuf *out, const struct gs_tbuf *scratch, const struct span *sp,
                     size_t width)
{
    gs_tbuf_put(out, gs_tbuf_str(scratch) + sp->off, sp->len);
    if (width > sp->w)
        gs_tbuf_spaces(out, width - sp->w);
}

/* The MIG device's own part of its name: "MIG 1g.10gb" from "NVIDIA A100 ... MIG 1g.10gb". */
static const char *mig_short_name(const struct gs_gpu *g, const struct gs_mig *m)
{
    const char *p = strstr(m->name, "MIG ");

    if (p)
        return p;
    if (gs_gpu_has_text(g, GS_T_NAME)) {
        size_t n = strlen(g->text[GS_T_NAME]);
        if (strncmp(m->name, g->text[GS_T_NAME], n) == 0) {
            p = m->name + n;
            while (*p == ' ')
                p++;
            if (*p)
                return p;
        }
    }
    return m->name[0] ? m->name : "MIG";
}

static void mig_label(struct gs_tbuf *b, const struct gs_gpu *g, unsigned m, unsigned n_mig)
{
    const struct gs_mig *mig = &g->mig[m];

    gs_tbuf_puts(b, m + 1 == n_mig ? " \xe2\x94\x94\xe2\x94\x80 " : " \xe2\x94\x9c\xe2\x94\x80 ");
    gs_tbuf_sgr(b, GS_SGR_BLUE);
    put_safe(b, mig_short_name(g, mig), GS_QUICK_NAME_MAX);
    gs_tbuf_sgr(b, GS_SGR_RESET);
    gs_tbuf_printf(b, "  (gi %u, ci %u)", mig->gi_id, mig->ci_id);
}

struct widths {
    size_t w[C__COUNT];
    size_t mig_label; /* widest MIG label */
    int compact;      /* the narrow layout (build_cells(..., 1)): C_CLK is a line of its own */
};

/* The narrow layout (below gpu_line). */
#define GS_QUICK_NARROW_NAME_MAX 18
static void cell_mem_narrow(struct gs_tbuf *b, int has_used, double used, int has_total,
                            double total);
static void put_below(struct gs_tbuf *out, const struct gs_tbuf *scratch, const struct span *sp);
static void put_hidden_narrow(struct gs_tbuf *out, struct gs_tbuf *tmp, const struct gs_gpu *g,
                              unsigned cols);

static struct widths measure(struct gs_tbuf *tmp, const struct row *rows,
                             const struct gs_snapshot *s, const struct gs_quick_opts *o)
{
    struct widths wd;

    memset(&wd, 0, sizeof wd);
    for (unsigned i = 0; i < s->n_gpus; i++) {
        const struct gs_gpu *g = &s->gpus[i];
        if (!gs_quick_selected(o, g))
            continue;
        for (int c = 0; c < C__COUNT; c++)
            if (rows[i].c[c].w > wd.w[c])
                wd.w[c] = rows[i].c[c].w;
        if (g->lost)
            continue;
        for (unsigned m = 0; m < g->n_mig && m < GS_MIG_MAX; m++) {
            size_t w;
            gs_tbuf_reset(tmp);
            mig_label(tmp, g, m, g->n_mig);
            w = gs_term_width(gs_tbuf_str(tmp), tmp->text.len);
            if (w > wd.mig_label)
                wd.mig_label = w;
        }
    }
    /* MIG lines put their memory under the GPU's memory column. */
    if (wd.w[C_ID] + 1 + wd.w[C_NAME] + 2 + wd.w[C_SENS] < wd.mig_label)
        wd.w[C_SENS] = wd.mig_label - (wd.w[C_ID] + 1 + wd.w[C_NAME] + 2);
    return wd;
}

/* -a on a MIG line: the instance's SM count and its graphics engine activity (GPM, when the
 * snapshot has it: an agent's), "%3u SMs, gr %3ld %"; MIG_EXTRA_W columns. */
#define MIG_EXTRA_W 17
static void mig_extra(struct gs_tbuf *b, const struct gs_mig *m)
{
    if (m->attr_st == GS_ST_OK && m->sm_count < 1000)
        gs_tbuf_printf(b, "%3u SMs", m->sm_count);
    else
        put_na(b, 7);
    gs_tbuf_puts(b, ", gr ");
    if (m->gpm_st[GS_MIG_GPM_GR_ACTIVE] == GS_ST_OK) {
        long v = pct(m->gpm[GS_MIG_GPM_GR_ACTIVE]);
        gs_tbuf_sgr(b, v < 30 ? GS_SGR_GREEN : GS_SGR_BOLD_GREEN);
        gs_tbuf_printf(b, "%3ld %%", v);
        gs_tbuf_sgr(b, GS_SGR_RESET);
    } else {
        put_na(b, 5);
    }
}

static void mig_lines(struct gs_tbuf *out, struct gs_tbuf *tmp, const struct gs_snapshot *s,
                      unsigned gi, const struct gs_quick_opts *o, const struct widths *wd,
                      unsigned cols, const struct gs_proc **list)
{
    const struct gs_gpu *g = &s->gpus[gi];
    size_t label_w = wd->w[C_ID] + 1 + wd->w[C_NAME] + 2 + wd->w[C_SENS];

    for (unsigned m = 0; m < g->n_mig && m < GS_MIG_MAX; m++) {
        const struct gs_mig *mig = &g->mig[m];
        size_t start = out->text.len, w;
        unsigned n;

        mig_label(out, g, m, g->n_mig);
        w = gs_tbuf_status(out) == GS_OK
                ? gs_term_width(out->text.data + start, out->text.len - start)
                : 0;
        if (label_w > w)
            gs_tbuf_spaces(out, label_w - w);
        gs_tbuf_puts(out, " | ");
        if (wd->compact)
            cell_mem_narrow(out, mig->mem_st == GS_ST_OK, (double)mig->mem_used_bytes,
                            mig->mem_st == GS_ST_OK, (double)mig->mem_total_bytes);
        else
            cell_mem(out, mig->mem_st == GS_ST_OK, (double)mig->mem_used_bytes,
                     mig->mem_st == GS_ST_OK, (double)mig->mem_total_bytes);
        if ((o->show & GS_QS_CLOCKS) && !wd->compact) {
            gs_tbuf_puts(out, " | ");
            mig_extra(out, mig);
        }
        if (o->no_procs) {
            gs_tbuf_puts(out, "\n");
            continue;
        }
        gs_tbuf_puts(out, " |");
        n = collect_procs(s, gi, (int)m, list);
        put_procs(out, tmp, list, n, o->show,
                  label_w + 3 + wd->w[C_MEM] + 2 + (o->show & GS_QS_CLOCKS ? 3 + MIG_EXTRA_W : 0),
                  cols);
        gs_tbuf_puts(out, "\n");
        if (o->show & GS_QS_FULL_CMD)
            put_full_cmds(out, list, n, o->show, "     ", cols);
    }
}

/* -a, right under a GPU with NVLink, its "|" under the GPU line's first one:
 *  " ├─ NVLink              | 18/18 links up, 26.6 GB/s each | tx  39.4 GB/s rx  39.1 GB/s"
 * then " | errors 0" once the error counters were read. Links down are red, data-link errors
 * (replays, recoveries, CRC) yellow. last: no further line under this GPU. */
static void nvlink_line(struct gs_tbuf *out, const struct gs_gpu *g, size_t label_w, int last,
                        int compact)
{
    static const enum gs_metric errs[] = {GS_M_NVLINK_REPLAY, GS_M_NVLINK_RECOVERY,
                                          GS_M_NVLINK_CRC_FLIT, GS_M_NVLINK_CRC_DATA};
    size_t start = out->text.len, w;
    double sum = 0;
    int have_err = 0;
    char a[32], b[32];

    if (g->lost || g->n_nvlink == 0 || !gs_gpu_has(g, GS_M_NVLINK_LINKS))
        return;
    gs_tbuf_puts(out, !last ? " \xe2\x94\x9c\xe2\x94\x80 " : " \xe2\x94\x94\xe2\x94\x80 ");
    gs_tbuf_puts(out, "NVLink");
    w = gs_tbuf_status(out) == GS_OK ? gs_term_width(out->text.data + start, out->text.len - start)
                                     : 0;
    if (label_w > w)
        gs_tbuf_spaces(out, label_w - w);
    gs_tbuf_puts(out, " | ");
    if (gs_gpu_has(g, GS_M_NVLINK_LINKS_ACTIVE)) {
        long up = lround(g->v[GS_M_NVLINK_LINKS_ACTIVE]), n = lround(g->v[GS_M_NVLINK_LINKS]);
        snprintf(a, sizeof a, "%2ld/%-2ld", up, n);
        gs_tbuf_color(out, up < n ? GS_SGR_BOLD_RED : GS_SGR_RESET, a);
        gs_tbuf_puts(out, " links up");
    } else {
        gs_tbuf_printf(out, "%2ld links", lround(g->v[GS_M_NVLINK_LINKS]));
        gs_tbuf_color(out, GS_SGR_GRAY, " N/A");
    }
    if (gs_gpu_has(g, GS_M_NVLINK_SPEED) && !compact) {
        fmt_rate(a, sizeof a, g->v[GS_M_NVLINK_SPEED]);
        gs_tbuf_printf(out, ", %s each", a);
    }
    gs_tbuf_puts(out, " | ");
    if (gs_gpu_has(g, GS_M_NVLINK_TX) && gs_gpu_has(g, GS_M_NVLINK_RX)) {
        fmt_rate(a, sizeof a, g->v[GS_M_NVLINK_TX]);
        fmt_rate(b, sizeof b, g->v[GS_M_NVLINK_RX]);
        gs_tbuf_printf(out, compact ? "tx %s rx %s" : "tx %10s rx %10s", a, b);
    } else if (compact) {
        gs_tbuf_puts(out, "tx ");
        gs_tbuf_color(out, GS_SGR_GRAY, "N/A");
        gs_tbuf_puts(out, " rx ");
        gs_tbuf_color(out, GS_SGR_GRAY, "N/A");
    } else {
        gs_tbuf_puts(out, "tx ");
        gs_tbuf_color(out, GS_SGR_GRAY, "       N/A");
        gs_tbuf_puts(out, " rx ");
        gs_tbuf_color(out, GS_SGR_GRAY, "       N/A");
    }
    for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)
        if (gs_gpu_has(g, errs[i])) {
            have_err = 1;
            sum += g->v[errs[i]];
        }
    if (have_err && compact) { /* the narrow layout: the sum only (the full view names them) */
        gs_tbuf_puts(out, " | err ");
        if (sum == 0) {
            gs_tbuf_puts(out, "0");
        } else {
            gs_tbuf_sgr(out, GS_SGR_YELLOW);
            gs_tbuf_printf(out, "%.0f", sum);
            gs_tbuf_sgr(out, GS_SGR_RESET);
        }
    } else if (have_err) {
        gs_tbuf_puts(out, " | errors ");
        if (sum == 0) {
            gs_tbuf_puts(out, "0");
        } else {
            double crc = (gs_gpu_has(g, GS_M_NVLINK_CRC_FLIT) ? g->v[GS_M_NVLINK_CRC_FLIT] : 0) +
                         (gs_gpu_has(g, GS_M_NVLINK_CRC_DATA) ? g->v[GS_M_NVLINK_CRC_DATA] : 0);
            gs_tbuf_sgr(out, GS_SGR_YELLOW);
            gs_tbuf_printf(out, "replay %.0f, recovery %.0f, CRC %.0f",
                           gs_gpu_has(g, GS_M_NVLINK_REPLAY) ? g->v[GS_M_NVLINK_REPLAY] : 0,
                           gs_gpu_has(g, GS_M_NVLINK_RECOVERY) ? g->v[GS_M_NVLINK_RECOVERY] : 0,
                           crc);
            gs_tbuf_sgr(out, GS_SGR_RESET);
        }
    }
    gs_tbuf_puts(out, "\n");
}

/* What the visibility policy withheld on g (an agent's snapshot for a non-admin viewer):
 * " [2 processes of other users, 60.4G]", never a made-up process line. */
static void put_hidden(struct gs_tbuf *out, const struct gs_gpu *g)
{
    char mem[32];

    if (g->hidden_st != GS_ST_OK || g->hidden_count == 0)
        return;
    if (g->hidden_mem_st == GS_ST_OK)
        gs_quick_fmt_mem(mem, sizeof mem, (double)g->hidden_mem_bytes);
    else
        snprintf(mem, sizeof mem, "memory N/A");
    gs_tbuf_puts(out, " ");
    gs_tbuf_sgr(out, GS_SGR_GRAY);
    gs_tbuf_printf(out, "[%u process%s of other users, %s]", g->hidden_count,
                   g->hidden_count == 1 ? "" : "es", mem);
    gs_tbuf_sgr(out, GS_SGR_RESET);
}

static void gpu_line(struct gs_tbuf *out, struct gs_tbuf *tmp, const struct gs_tbuf *scratch,
                     const struct gs_snapshot *s, unsigned gi, const struct row *r,
                     const struct gs_quick_opts *o, const struct widths *wd, unsigned cols,
                     const struct gs_proc **list)
{
    size_t col;
    unsigned n;

    put_cell(out, scratch, &r->c[C_ID], wd->w[C_ID]);
    gs_tbuf_puts(out, " ");
    put_cell(out, scratch, &r->c[C_NAME], wd->w[C_NAME]);
    if (r->lost) {
        gs_tbuf_puts(out, " | ");
        gs_tbuf_color(out, GS_SGR_BOLD_RED, "GPU is lost");
        gs_tbuf_puts(out, "\n");
        return;
    }
    /* As gpustat: "|" then the 3-wide temperature, so "| 45°C" and "|100°C". */
    gs_tbuf_puts(out, " |");
    put_cell(out, scratch, &r->c[C_SENS], wd->w[C_SENS]);
    gs_tbuf_puts(out, " | ");
    put_cell(out, scratch, &r->c[C_MEM], wd->w[C_MEM]);
    col = wd->w[C_ID] + 1 + wd->w[C_NAME] + 2 + wd->w[C_SENS] + 3 + wd->w[C_MEM];
    if ((o->show & GS_QS_CLOCKS) && !wd->compact) {
        gs_tbuf_puts(out, " | ");
        put_cell(out, scratch, &r->c[C_CLK], o->no_procs ? 0 : wd->w[C_CLK]);
        col += 3 + wd->w[C_CLK];
    }
    if (o->no_procs) {
        gs_tbuf_puts(out, "\n");
        if (wd->compact)
            put_below(out, scratch, &r->c[C_CLK]);
    } else {
        gs_tbuf_puts(out, " |");
        n = collect_procs(s, gi, -1, list);
        put_procs(out, tmp, list, n, o->show, col + 2, cols);
        if (wd->compact)
            put_hidden_narrow(out, tmp, &s->gpus[gi], cols);
        else
            put_hidden(out, &s->gpus[gi]);
        gs_tbuf_puts(out, "\n");
        if (wd->compact)
            put_below(out, scratch, &r->c[C_CLK]);
        if (o->show & GS_QS_CLOCKS)
            nvlink_line(out, &s->gpus[gi], wd->w[C_ID] + 1 + wd->w[C_NAME],
                        !((o->show & GS_QS_FULL_CMD) && n) && !s->gpus[gi].n_mig, wd->compact);
        if (o->show & GS_QS_FULL_CMD)
            put_full_cmds(out, list, n, o->show, " ", cols);
    }
    if ((o->show & GS_QS_CLOCKS) && o->no_procs)
        nvlink_line(out, &s->gpus[gi], wd->w[C_ID] + 1 + wd->w[C_NAME], !s->gpus[gi].n_mig,
                    wd->compact);
    mig_lines(out, tmp, s, gi, o, wd, cols, list);
}

/* ---- the narrow layout ----
 *
 * When a GPU line of the layout above would be wider than the terminal (gpuscope -a at 80
 * columns), the same readings are written shorter instead of being cut at the edge:
 *
 *   [0] H100 80GB HBM3 | 40°C F N/A  83% E  0 D  0  590/ 700W |  60.4G/79.6G |
 *        python3/48211(60.4G)
 *        P0 1980/2619 MHz  Gen5 x16  tx 30 MB/s rx 1.7 GB/s
 *
 * the name without "NVIDIA " and "GeForce ", fan, codec and power figures without their
 * separators, memory as used/total with a unit (as process sizes are written), and the
 * clocks, PCIe link and throttle reasons on a line of their own below. The header says that
 * the view is abbreviated and how wide the full one is. */

/* The width of the widest GPU line of the normal layout up to its process column. */
static size_t line_width(const struct widths *wd, const struct gs_quick_opts *o)
{
    size_t w = wd->w[C_ID] + 1 + wd->w[C_NAME] + 2 + wd->w[C_SENS] + 3 + wd->w[C_MEM];

    if (o->show & GS_QS_CLOCKS)
        w += 3 + wd->w[C_CLK];
    return w + (o->no_procs ? 0 : 2);
}

/* The GPU's name without the vendor words every GPU of a node shares. */
static const char *short_gpu_name(const char *name)
{
    static const char *const drop[] = {"NVIDIA ", "GeForce "};

    for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++)
        if (strncmp(name, drop[i], strlen(drop[i])) == 0 && name[strlen(drop[i])])
            name += strlen(drop[i]);
    return name;
}

/* "%3ld%" (sign) or "%3ld" without put_pct's space, or N/A. */
static void put_pct_narrow(struct gs_tbuf *b, const struct gs_gpu *g, enum gs_metric m,
                           long threshold, enum gs_sgr lo, enum gs_sgr hi, int sign)
{
    long v;

    if (!gs_gpu_has(g, m)) {
        put_na(b, 4);
        return;
    }
    v = pct(g->v[m]);
    gs_tbuf_sgr(b, v < threshold ? lo : hi);
    gs_tbuf_printf(b, sign ? "%3ld%%" : "%3ld", v);
    gs_tbuf_sgr(b, GS_SGR_RESET);
}

/* " 40°C F 30%  83% E  0 D  0  590/ 700W": the readings cell_sensors writes, shorter; the
 * throttle reasons go below (cell_below_narrow). */
static void cell_sensors_narrow(struct gs_tbuf *b, const struct gs_gpu *g, unsigned show)
{
    put_temp(b, g);
    if (show & GS_QS_FAN) {
        gs_tbuf_puts(b, " F");
        put_pct_narrow(b, g, GS_M_FAN, 30, GS_SGR_CYAN, GS_SGR_BOLD_CYAN, 1);
    }
    gs_tbuf_puts(b, " ");
    if (gs_gpu_mig_on(g) && !gs_gpu_has(g, GS_M_UTIL_GPU))
        gs_tbuf_color(b, GS_SGR_GRAY, " MIG"); /* as the normal layout: none in MIG mode */
    else
        put_pct_narrow(b, g, GS_M_UTIL_GPU, 30, GS_SGR_GREEN, GS_SGR_BOLD_GREEN, 1);
    if (show & GS_QS_CODEC) {
        gs_tbuf_color(b, GS_SGR_BOLD, " E");
        put_pct_narrow(b, g, GS_M_UTIL_ENC, 50, GS_SGR_GREEN, GS_SGR_BOLD_GREEN, 0);
        gs_tbuf_color(b, GS_SGR_BOLD, " D");
        put_pct_narrow(b, g, GS_M_UTIL_DEC, 50, GS_SGR_GREEN, GS_SGR_BOLD_GREEN, 0);
    }
    if (show & GS_QS_POWER)
        put_power(b, g, " ", "/", "W");
}

/* " 60.4G/79.6G": used and total with a unit, as process sizes are written. */
static void cell_mem_narrow(struct gs_tbuf *b, int has_used, double used, int has_total,
                            double total)
{
    char u[32], t[32];

    if (has_used) {
        gs_quick_fmt_mem(u, sizeof u, used);
        gs_tbuf_sgr(b, GS_SGR_BOLD_YELLOW);
        gs_tbuf_printf(b, "%6s", u);
        gs_tbuf_sgr(b, GS_SGR_RESET);
    } else {
        put_na(b, 6);
    }
    gs_tbuf_puts(b, "/");
    if (has_total) {
        gs_quick_fmt_mem(t, sizeof t, total);
        gs_tbuf_sgr(b, GS_SGR_YELLOW);
        gs_tbuf_printf(b, "%-5s", t);
        gs_tbuf_sgr(b, GS_SGR_RESET);
    } else {
        gs_tbuf_color(b, GS_SGR_GRAY, "N/A  ");
    }
}

/* The line below a GPU: "P0 1980/2619 MHz  Gen5 x16  tx 30 MB/s rx 1.7 GB/s  ⚠ ...". */
static void cell_below_narrow(struct gs_tbuf *b, const struct gs_gpu *g, unsigned show)
{
    int any = 0;

    if (show & GS_QS_CLOCKS) {
        if (gs_gpu_has(g, GS_M_PSTATE) && g->v[GS_M_PSTATE] >= 0 && g->v[GS_M_PSTATE] <= 15)
            gs_tbuf_printf(b, "P%ld", lround(g->v[GS_M_PSTATE]));
        else
            gs_tbuf_color(b, GS_SGR_GRAY, "P?");
        gs_tbuf_puts(b, " ");
        put_mhz(b, g, GS_M_CLOCK_SM);
        gs_tbuf_puts(b, "/");
        put_mhz(b, g, GS_M_CLOCK_MEM);
        gs_tbuf_puts(b, " MHz");
        if (gs_gpu_has(g, GS_M_PCIE_GEN) && gs_gpu_has(g, GS_M_PCIE_WIDTH)) {
            gs_tbuf_puts(b, "  ");
            put_pcie_link(b, g, 0);
        }
        put_pcie_rates(b, g);
        put_health(b, g);
        any = 1;
    }
    if (throttle_mask(g)) {
        if (any)
            gs_tbuf_puts(b, "  ");
        cell_throttle(b, throttle_mask(g));
    }
}

/* Renders every cell of every selected GPU into scratch and records the spans; narrow: the
 * narrow layout's cells, where C_CLK holds the line below (empty: none). */
static void build_cells(struct gs_tbuf *scratch, struct row *rows, const struct gs_snapshot *s,
                        const struct gs_quick_opts *o, int narrow)
{
    for (unsigned i = 0; i < s->n_gpus; i++) {
        const struct gs_gpu *g = &s->gpus[i];
        struct row *r = &rows[i];
        const char *name;
        size_t off;

        if (!gs_quick_selected(o, g))
            continue;
        r->lost = g->lost;
        off = scratch->text.len;
        gs_tbuf_sgr(scratch, GS_SGR_CYAN);
        gs_tbuf_printf(scratch, "[%u]", g->index);
        gs_tbuf_sgr(scratch, GS_SGR_RESET);
        r->c[C_ID] = end_span(scratch, off);
        off = scratch->text.len;
        name = gs_gpu_has_text(g, GS_T_NAME) ? g->text[GS_T_NAME] : NULL;
        gs_tbuf_sgr(scratch, GS_SGR_BLUE);
        put_safe(scratch,
                 !name    ? "N/A"
                 : narrow ? short_gpu_name(name)
                          : name,
                 narrow ? GS_QUICK_NARROW_NAME_MAX : GS_QUICK_NAME_MAX);
        gs_tbuf_sgr(scratch, GS_SGR_RESET);
        r->c[C_NAME] = end_span(scratch, off);
        if (g->lost)
            continue;
        off = scratch->text.len;
        if (narrow) {
            cell_sensors_narrow(scratch, g, o->show);
        } else {
            cell_sensors(scratch, g, o->show);
            /* Throttling sits by the readings it explains: "| 71°C, 100 % ⚠ HW thermal |". */
            if (throttle_mask(g)) {
                gs_tbuf_puts(scratch, " ");
                cell_throttle(scratch, throttle_mask(g));
            }
        }
        r->c[C_SENS] = end_span(scratch, off);
        off = scratch->text.len;
        (narrow ? cell_mem_narrow : cell_mem)(scratch, gs_gpu_has(g, GS_M_MEM_USED),
                                              g->v[GS_M_MEM_USED], gs_gpu_has(g, GS_M_MEM_TOTAL),
                                              g->v[GS_M_MEM_TOTAL]);
        r->c[C_MEM] = end_span(scratch, off);
        off = scratch->text.len;
        if (narrow)
            cell_below_narrow(scratch, g, o->show);
        else if (o->show & GS_QS_CLOCKS)
            cell_clocks(scratch, g);
        r->c[C_CLK] = end_span(scratch, off);
    }
}

/* The line below a GPU (C_CLK of the narrow layout), indented under the name. */
static void put_below(struct gs_tbuf *out, const struct gs_tbuf *scratch, const struct span *sp)
{
    if (!sp->len)
        return;
    gs_tbuf_spaces(out, 5); /* under the processes put_procs wraps to column 5 */
    put_cell(out, scratch, sp, 0);
    gs_tbuf_puts(out, "\n");
}

/* put_hidden, on a line of its own when it would cross the edge. */
static void put_hidden_narrow(struct gs_tbuf *out, struct gs_tbuf *tmp, const struct gs_gpu *g,
                              unsigned cols)
{
    size_t line = out->text.len, w;

    gs_tbuf_reset(tmp);
    put_hidden(tmp, g);
    if (!tmp->text.len)
        return;
    while (line > 0 && out->text.data && out->text.data[line - 1] != '\n')
        line--;
    w = gs_tbuf_status(out) == GS_OK ? gs_term_width(out->text.data + line, out->text.len - line)
                                     : 0;
    if (cols && w + gs_term_width(tmp->text.data, tmp->text.len) > cols) {
        gs_tbuf_puts(out, "\n    "); /* its " [" then starts under the processes */
    }
    gs_tbuf_put(out, gs_tbuf_str(tmp), tmp->text.len);
}

/* The header, on two lines when it does not fit on one: host, time, driver and CUDA; then
 * the SIMULATED warning and the agent it came from. */
static void header_fit(struct gs_tbuf *out, struct gs_tbuf *tmp, const struct gs_snapshot *s,
                       unsigned cols)
{
    struct gs_snapshot one = *s; /* header() reads sys and t_real only */
    size_t w;

    gs_tbuf_reset(tmp);
    header(tmp, s);
    w = gs_tbuf_status(tmp) == GS_OK
            ? gs_term_width(tmp->text.data, tmp->text.len ? tmp->text.len - 1 : 0)
            : 0;
    if (!cols || w <= cols) {
        gs_tbuf_put(out, gs_tbuf_str(tmp), tmp->text.len);
    } else {
        one.sys.source[0] = '\0';
        one.sys.simulated = 0;
        header(out, &one);
        if (s->sys.simulated) {
            gs_tbuf_sgr(out, GS_SGR_BOLD_RED);
            gs_tbuf_puts(out, "SIMULATED (");
            put_safe(out, s->sys.sim_info[0] ? s->sys.sim_info : "nvml-sim", 32);
            gs_tbuf_puts(out, "): not real GPUs");
            gs_tbuf_sgr(out, GS_SGR_RESET);
        }
        if (s->sys.source[0]) {
            /* the rest of the line, else a line of its own; a long path ends in "…" */
            size_t line = out->text.len, used;
            while (line > 0 && out->text.data && out->text.data[line - 1] != '\n')
                line--;
            used = gs_tbuf_status(out) == GS_OK
                       ? gs_term_width(out->text.data + line, out->text.len - line)
                       : 0;
            if (used && used + 6 + 16 > cols) {
                gs_tbuf_puts(out, "\n");
                used = 0;
            }
            gs_tbuf_sgr(out, GS_SGR_GRAY);
            gs_tbuf_puts(out, used ? "  via " : "via ");
            used += used ? 6 : 4;
            put_safe(out, s->sys.source, cols > used + 1 ? cols - used : 1);
            gs_tbuf_sgr(out, GS_SGR_RESET);
        }
        if (s->sys.simulated || s->sys.source[0])
            gs_tbuf_puts(out, "\n");
    }
}

/* header_fit, then the note that the view is abbreviated:
 * "(abbreviated for 80 columns; the full view needs 164)". */
static void header_narrow(struct gs_tbuf *out, struct gs_tbuf *tmp, const struct gs_snapshot *s,
                          unsigned cols, size_t full)
{
    char note[96];

    header_fit(out, tmp, s, cols);
    snprintf(note, sizeof note, "(abbreviated for %u columns; the full view needs %zu)", cols,
             full);
    gs_tbuf_color(out, GS_SGR_GRAY, note);
    gs_tbuf_puts(out, "\n");
}

void gs_quick_text_need(const struct gs_quick_opts *o, unsigned char *m, unsigned char *t)
{
    /* cell_sensors, cell_throttle, cell_mem, cell_clocks */
    static const struct {
        unsigned show; /* 0: always shown */
        enum gs_metric m;
    } shown[] = {
        {0, GS_M_TEMP_GPU},
        {0, GS_M_UTIL_GPU},
        {0, GS_M_MEM_USED},
        {0, GS_M_MEM_TOTAL},
        {0, GS_M_THROTTLE_ACTIVE},
        {GS_QS_FAN, GS_M_FAN},
        {GS_QS_CODEC, GS_M_UTIL_ENC},
        {GS_QS_CODEC, GS_M_UTIL_DEC},
        {GS_QS_POWER, GS_M_POWER_DRAW},
        {GS_QS_POWER, GS_M_POWER_ENFORCED_LIMIT},
        {GS_QS_POWER, GS_M_POWER_LIMIT},
        {GS_QS_CLOCKS, GS_M_PSTATE},
        {GS_QS_CLOCKS, GS_M_CLOCK_SM},
        {GS_QS_CLOCKS, GS_M_CLOCK_MEM},
        {GS_QS_CLOCKS, GS_M_PCIE_GEN},
        {GS_QS_CLOCKS, GS_M_PCIE_WIDTH},
        {GS_QS_CLOCKS, GS_M_PCIE_GEN_MAX},
        {GS_QS_CLOCKS, GS_M_PCIE_WIDTH_MAX},
        {GS_QS_CLOCKS, GS_M_ECC_MODE}, /* the counters are read only with ECC on */
        {GS_QS_CLOCKS, GS_M_ECC_CORR_VOL},
        {GS_QS_CLOCKS, GS_M_ECC_UNCORR_VOL},
        {GS_QS_CLOCKS, GS_M_XID_LAST},
        {GS_QS_CLOCKS, GS_M_REMAP_PENDING},
        {GS_QS_CLOCKS, GS_M_PCIE_TX},
        {GS_QS_CLOCKS, GS_M_PCIE_RX},
        {GS_QS_CLOCKS, GS_M_NVLINK_LINKS},
        {GS_QS_CLOCKS, GS_M_NVLINK_LINKS_ACTIVE},
        {GS_QS_CLOCKS, GS_M_NVLINK_SPEED},
        {GS_QS_CLOCKS, GS_M_NVLINK_TX},
        {GS_QS_CLOCKS, GS_M_NVLINK_RX},
        {GS_QS_CLOCKS, GS_M_NVLINK_REPLAY},
        {GS_QS_CLOCKS, GS_M_NVLINK_RECOVERY},
        {GS_QS_CLOCKS, GS_M_NVLINK_CRC_FLIT},
        {GS_QS_CLOCKS, GS_M_NVLINK_CRC_DATA},
    };
    /* the name shown, the UUID and bus id --id matches (no serial: the text shows none) */
    static const enum gs_text texts[] = {GS_T_NAME, GS_T_UUID, GS_T_PCI_BUS_ID};

    for (size_t i = 0; i < sizeof shown / sizeof shown[0]; i++)
        if (!shown[i].show || (o->show & shown[i].show))
            m[shown[i].m] = 1;
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        t[texts[i]] = 1;
}

int gs_quick_render(struct gs_tbuf *out, const struct gs_snapshot *s, const struct gs_quick_opts *o,
                    unsigned cols)
{
    struct gs_tbuf scratch, tmp;
    struct row *rows = calloc(s->n_gpus ? s->n_gpus : 1, sizeof *rows);
    const struct gs_proc **list = calloc(s->n_procs ? s->n_procs : 1, sizeof *list);
    struct widths wd;

    if (!rows || !list) {
        free(rows);
        free(list);
        gs_buf_fail(&out->text, GS_BUF_ENOMEM);
        return GS_ENOMEM;
    }
    gs_tbuf_init(&scratch, out->color);
    gs_tbuf_init(&tmp, out->color);
    build_cells(&scratch, rows, s, o, 0);
    wd = measure(&tmp, rows, s, o);
    if (cols && line_width(&wd, o) > cols) {
        /* Too wide for the terminal: the narrow layout rather than lines cut at the edge. */
        size_t full = line_width(&wd, o);
        gs_tbuf_reset(&scratch);
        memset(rows, 0, (s->n_gpus ? s->n_gpus : 1) * sizeof *rows);
        build_cells(&scratch, rows, s, o, 1);
        wd = measure(&tmp, rows, s, o);
        wd.compact = 1;
        if (!o->no_header)
            header_narrow(out, &tmp, s, cols, full);
    } else if (!o->no_header) {
        header_fit(out, &tmp, s, cols);
    }
    for (unsigned i = 0; i < s->n_gpus; i++)
        if (gs_quick_selected(o, &s->gpus[i]))
            gpu_line(out, &tmp, &scratch, s, i, &rows[i], o, &wd, cols, list);
    if (gs_tbuf_status(&scratch) != GS_OK || gs_tbuf_status(&tmp) != GS_OK)
        gs_buf_fail(&out->text, GS_BUF_ENOMEM);
    gs_tbuf_free(&scratch);
    gs_tbuf_free(&tmp);
    free(rows);
    free(list);
    return gs_tbuf_status(out);
}
