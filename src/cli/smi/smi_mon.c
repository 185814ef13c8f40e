/*
 * nvidia-smi's scrolling monitors, `dmon` (one line per GPU per interval) and `pmon` (one line
 * per process), in nvidia-smi's column layout (shared/reference/nvidia-smi-captures).
 *
 * Both monitors sample on CLOCK_MONOTONIC boundaries of -d seconds, print the header once, stop
 * after -c samples or at SIGINT/SIGTERM (blocked and collected with sigtimedwait, no handler),
 * and print "-" for a value the model does not have this cycle, as nvidia-smi does.
 */
#include "cli/smi/smi.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "cli/smi/query_opts.h"
#include "client/source.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_sampler.h"

#define DASH "-"
#define MAX_DELAY_S (7L * 24 * 3600)

struct mon_opts {
    const char *ids;
    const char *select;
    const char *file;
    long delay_s;
    long count; /* 0: until interrupted */
    int help;
};

static const char dmon_help[] =
    "\n"
    "    GPU statistics are displayed in scrolling format with one line per GPU and\n"
    "    sampling interval. The metrics shown are chosen with -s.\n"
    "\n"
    "    Usage: %s dmon [options]\n"
    "\n"
    "    Options include:\n"
    "    [-i | --id]:          Comma separated enumeration index, PCI bus ID or UUID\n"
    "    [-d | --delay]:       Collection delay/interval in seconds [default=1sec]\n"
    "    [-c | --count]:       Collect specified number of samples and exit\n"
    "    [-s | --select]:      One or more metrics [default=puc]\n"
    "                          Can be any of the following:\n"
    "                              p - Power Usage and Temperature\n"
    "                              u - Utilization\n"
    "                              c - Proc and Mem Clocks\n"
    "                              v - Power and Thermal Violations\n"
    "                              m - FB, Bar1 and CC Protected Memory\n"
    "                              e - ECC Errors and PCIe Replay errors\n"
    "                              t - PCIe Rx and Tx Throughput\n"
    "    [-f | --filename]:    Log to a specified file, rather than to stdout\n"
    "    [-h | --help]:        Display help information\n"
    "\n";

static const char pmon_help[] =
    "\n"
    "    Processes running on the GPUs are displayed in scrolling format with one\n"
    "    line per process and sampling interval (one line with \"-\" for a GPU with none).\n"
    "\n"
    "    Usage: %s pmon [options]\n"
    "\n"
    "    Options include:\n"
    "    [-i | --id]:          Comma separated enumeration index, PCI bus ID or UUID\n"
    "    [-d | --delay]:       Collection delay/interval in seconds [default=1sec, max=10secs]\n"
    "    [-c | --count]:       Collect specified number of samples and exit\n"
    "    [-s | --select]:      One or more metrics [default=u]\n"
    "                          Can be any of the following:\n"
    "                              u - Utilization\n"
    "                              m - FB and CC Protected Memory usage\n"
    "    [-f | --filename]:    Log to a specified file, rather than to stdout\n"
    "    [-h | --help]:        Display help information\n"
    "\n";

static int bad(const char *prog, const char *mode, const char *fmt, const char *word)
{
    fprintf(stderr, fmt, word);
    fprintf(stderr, " Please run '%s %s -h' for help.\n", prog, mode);
    return gs_rc_exit_code(GS_EUSAGE);
}

/* Returns -1 when parsed, else the exit status. allowed: the letters -s takes. */
static int parse(int argc, char **argv, struct mon_opts *o, const char *prog, const char *mode,
                 const char *allowed, long max_delay)
{
    memset(o, 0, sizeof *o);
    o->delay_s = 1;
    for (int i = 1; i < argc; i++) {
        const char *w = argv[i], *v = NULL;
        const char *eq = strchr(w, '=');
        size_t n = eq ? (size_t)(eq - w) : strlen(w);
        char name[32], key[40];

        if (n >= sizeof name)
            return bad(prog, mode, "ERROR: Option %s is not recognized.", w);
        memcpy(name, w, n);
        name[n] = '\0';
        if (strcmp(name, "-h") == 0 || strcmp(name, "--help") == 0) {
            o->help = 1;
            continue;
        }
        snprintf(key, sizeof key, " %s ", name);
        if (!strstr(" -i --id -f --filename -s --select -d --delay -c --count ", key))
            return bad(prog, mode, "ERROR: Option %s is not recognized.", name);
        if (eq)
            v = eq + 1;
        else if (i + 1 < argc)
            v = argv[++i];
        if (!v)
            return bad(prog, mode, "ERROR: Option %s is missing its value.", w);
        if (strcmp(name, "-i") == 0 || strcmp(name, "--id") == 0) {
            o->ids = v;
        } else if (strcmp(name, "-f") == 0 || strcmp(name, "--filename") == 0) {
            o->file = v;
        } else if (strcmp(name, "-s") == 0 || strcmp(name, "--select") == 0) {
            if (!*v || strspn(v, allowed) != strlen(v))
                return bad(prog, mode, "ERROR: Invalid metric selection \"%s\".", v);
            o->select = v;
        } else if (strcmp(name, "-d") == 0 || strcmp(name, "--delay") == 0) {
            o->delay_s = gs_query_positive(v, max_delay);
            if (o->delay_s < 0)
                return bad(prog, mode, "ERROR: Invalid delay \"%s\".", v);
        } else if (strcmp(name, "-c") == 0 || strcmp(name, "--count") == 0) {
            o->count = gs_query_positive(v, 1L << 30);
            if (o->count < 0)
                return bad(prog, mode, "ERROR: Invalid count \"%s\".", v);
        } else {
            return bad(prog, mode, "ERROR: Option %s is not recognized.", name);
        }
    }
    return -1;
}

typedef int (*print_fn)(FILE *out, const struct gs_snapshot *s, const unsigned char *sel,
                        const char *select);

/* Opens, samples every delay seconds and prints, count times or until a signal. */
static int run(const struct mon_opts *o, unsigned want, const struct gs_sampler_opts *so,
               const char *select, print_fn header, print_fn rows)
{
    struct gs_source *src = NULL;
    struct gs_snapshot *snap = NULL;
    unsigned char *sel = NULL;
    FILE *out = stdout;
    struct gs_err err = {0};
    sigset_t stop, old;
    int status, rc;
    int64_t start, period = (int64_t)o->delay_s * 1000000000;

    /* held from the start: a signal during the first sample ends the run after it */
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigprocmask(SIG_BLOCK, &stop, &old);
    status = gs_smi_open(&src, want, so);
    if (status != 0)
        goto done;
    snap = gs_source_snapshot(src);
    sel = calloc(snap->n_gpus, 1);
    if (!sel) {
        status = gs_smi_fail(GS_ENOMEM, "out of memory");
        goto done;
    }
    rc = gs_query_select(o->ids, snap, sel, &err);
    if (rc < 0) {
        status = gs_smi_fail(rc, err.msg);
        goto done;
    }
    if (o->file && !(out = fopen(o->file, "w"))) {
        out = stdout;
        gs_err_set(&err, GS_EIO, "cannot open %s: %s", o->file, strerror(errno));
        status = gs_smi_fail(GS_EIO, err.msg);
        goto done;
    }
    rc = header(out, snap, sel, select);
    start = gs_clock_mono_ns();
    for (long k = 1; rc == GS_OK; k++) {
        rc = rows(out, snap, sel, select);
        if (fflush(out) != 0)
            rc = GS_EIO;
        if (rc != GS_OK || (o->count && k >= o->count) ||
            gs_smi_wait_until(&stop, start + k * period))
            break;
        rc = gs_source_sample(src, want, &err);
        snap = gs_source_snapshot(src);
    }
    if (rc == GS_EIO && !err.msg[0])
        gs_err_set(&err, GS_EIO, "cannot write %s: %s", o->file ? o->file : "output",
                   strerror(errno));
    status = rc == GS_OK ? 0 : gs_smi_fail(rc, err.msg);
done:
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (out != stdout)
        fclose(out);
    free(sel);
    gs_source_close(src);
    return status;
}

/* --- dmon ----------------------------------------------------------------------------------- */

struct dcol {
    char group; /* the -s letter */
    const char *name, *unit;
};

static const struct dcol dcols[] = {
    {'p', "pwr", "W"},      {'p', "gtemp", "C"},    {'p', "mtemp", "C"},  {'u', "sm", "%"},
    {'u', "mem", "%"},      {'u', "enc", "%"},      {'u', "dec", "%"},    {'u', "jpg", "%"},
    {'u', "ofa", "%"},      {'c', "mclk", "MHz"},   {'c', "pclk", "MHz"}, {'v', "pviol", "%"},
    {'v', "tviol", "bool"}, {'m', "fb", "MB"},      {'m', "bar1", "MB"},  {'m', "ccpm", "MB"},
    {'e', "sbecc", "errs"}, {'e', "dbecc", "errs"}, {'e', "pci", "errs"}, {'t', "rxpci", "MB/s"},
    {'t', "txpci", "MB/s"},
};

static int dmon_header(FILE *out, const struct gs_snapshot *s, const unsigned char *sel,
                       const char *select)
{
    (void)s, (void)sel;
    fputs("# gpu", out);
    for (size_t i = 0; i < sizeof dcols / sizeof dcols[0]; i++)
        if (strchr(select, dcols[i].group))
            fprintf(out, "%7s", dcols[i].name);
    fputs(" \n# Idx", out);
    for (size_t i = 0; i < sizeof dcols / sizeof dcols[0]; i++)
        if (strchr(select, dcols[i].group))
            fprintf(out, "%7s", dcols[i].unit);
    fputs(" \n", out);
    return ferror(out) ? GS_EIO : GS_OK;
}

static void cell(char *buf, size_t n, int ok, long long v)
{
    if (ok)
        snprintf(buf, n, "%lld", v);
    else
        snprintf(buf, n, DASH);
}

static void dmon_value(const struct gs_gpu *g, size_t col, char *b, size_t n)
{
    int mig = g->st[GS_M_MIG_MODE] == GS_ST_OK && g->v[GS_M_MIG_MODE] != 0;
    const enum gs_metric util[] = {GS_M_UTIL_GPU, GS_M_UTIL_MEM,  GS_M_UTIL_ENC,
                                   GS_M_UTIL_DEC, GS_M_UTIL_JPEG, GS_M_UTIL_OFA};
    enum gs_metric m;

#define HAS(x) (g->st[x] == GS_ST_OK)
    switch (col) {
    case 0: /* whole watts, cut as nvidia-smi cuts milliwatts */
        cell(b, n, HAS(GS_M_POWER_DRAW), (long long)floor(g->v[GS_M_POWER_DRAW] + 1e-9));
        return;
    case 1:
        cell(b, n, HAS(GS_M_TEMP_GPU), llround(g->v[GS_M_TEMP_GPU]));
        return;
    case 2:
        cell(b, n, HAS(GS_M_TEMP_MEM), llround(g->v[GS_M_TEMP_MEM]));
        return;
    case 3:
    case 4:
    case 5:
    case 6:
    case 7:
    case 8: /* in MIG mode the engines belong to the instances */
        m = util[col - 3];
        cell(b, n, HAS(m) && !mig, llround(g->v[m] * 100.0));
        return;
    case 9:
        cell(b, n, HAS(GS_M_CLOCK_MEM), llround(g->v[GS_M_CLOCK_MEM] / 1e6));
        return;
    case 10:
        cell(b, n, HAS(GS_M_CLOCK_GR), llround(g->v[GS_M_CLOCK_GR] / 1e6));
        return;
    case 13:
        cell(b, n, HAS(GS_M_MEM_USED),
             (long long)gs_smi_mib((uint64_t)llround(g->v[GS_M_MEM_USED])));
        return;
    case 14:
        cell(b, n, HAS(GS_M_BAR1_USED),
             (long long)gs_smi_mib((uint64_t)llround(g->v[GS_M_BAR1_USED])));
        return;
    case 16:
        cell(b, n, HAS(GS_M_ECC_CORR_VOL), llround(g->v[GS_M_ECC_CORR_VOL]));
        return;
    case 17:
        cell(b, n, HAS(GS_M_ECC_UNCORR_VOL), llround(g->v[GS_M_ECC_UNCORR_VOL]));
        return;
    case 18:
        cell(b, n, HAS(GS_M_PCIE_REPLAY), llround(g->v[GS_M_PCIE_REPLAY]));
        return;
    case 19:
        cell(b, n, HAS(GS_M_PCIE_RX), llround(g->v[GS_M_PCIE_RX] / 1048576.0));
        return;
    case 20:
        cell(b, n, HAS(GS_M_PCIE_TX), llround(g->v[GS_M_PCIE_TX] / 1048576.0));
        return;
    }
#undef HAS
    /* pviol, tviol (violation time over the interval) and ccpm: not in the model */
    snprintf(b, n, DASH);
}

static int dmon_rows(FILE *out, const struct gs_snapshot *s, const unsigned char *sel,
                     const char *select)
{
    char b[32];

    for (unsigned i = 0; i < s->n_gpus; i++) {
        if (!sel[i])
            continue;
        fprintf(out, "%5u", s->gpus[i].index);
        for (size_t c = 0; c < sizeof dcols / sizeof dcols[0]; c++) {
            if (!strchr(select, dcols[c].group))
                continue;
            dmon_value(&s->gpus[i], c, b, sizeof b);
            fprintf(out, "%7s", b);
        }
        fputs(" \n", out);
    }
    return ferror(out) ? GS_EIO : GS_OK;
}

void gs_smi_dmon_need(const char *select, unsigned char *m, unsigned char *t)
{
    /* dmon_value's metrics by column; pviol, tviol and ccpm are not in the model */
    static const enum gs_metric by_col[][2] = {
        {GS_M_POWER_DRAW, GS_M__COUNT},       {GS_M_TEMP_GPU, GS_M__COUNT},
        {GS_M_TEMP_MEM, GS_M__COUNT},         {GS_M_UTIL_GPU, GS_M_MIG_MODE},
        {GS_M_UTIL_MEM, GS_M_MIG_MODE},       {GS_M_UTIL_ENC, GS_M_MIG_MODE},
        {GS_M_UTIL_DEC, GS_M_MIG_MODE},       {GS_M_UTIL_JPEG, GS_M_MIG_MODE},
        {GS_M_UTIL_OFA, GS_M_MIG_MODE},       {GS_M_CLOCK_MEM, GS_M__COUNT},
        {GS_M_CLOCK_GR, GS_M__COUNT},         {GS_M__COUNT, GS_M__COUNT},
        {GS_M__COUNT, GS_M__COUNT},           {GS_M_MEM_USED, GS_M__COUNT},
        {GS_M_BAR1_USED, GS_M__COUNT},        {GS_M__COUNT, GS_M__COUNT},
        {GS_M_ECC_CORR_VOL, GS_M_ECC_MODE}, /* the counters are read only with ECC on */
        {GS_M_ECC_UNCORR_VOL, GS_M_ECC_MODE}, {GS_M_PCIE_REPLAY, GS_M__COUNT},
        {GS_M_PCIE_RX, GS_M__COUNT},          {GS_M_PCIE_TX, GS_M__COUNT},
    };

    _Static_assert(sizeof by_col / sizeof by_col[0] == sizeof dcols / sizeof dcols[0],
                   "a metric pair per dmon column");
    (void)t;
    for (size_t c = 0; c < sizeof dcols / sizeof dcols[0]; c++)
        if (strchr(select, dcols[c].group))
            for (int k = 0; k < 2; k++)
                if (by_col[c][k] != GS_M__COUNT)
                    m[by_col[c][k]] = 1;
}

int gs_smi_dmon(int argc, char **argv, const char *prog)
{
    struct mon_opts o;
    int st = parse(argc, argv, &o, prog, "dmon", "pucvmet", MAX_DELAY_S);
    unsigned want = GS_WANT_MIG | GS_WANT_STATIC;
    unsigned char need_m[GS_M__COUNT] = {0}, need_t[GS_T__COUNT] = {0};
    struct gs_sampler_opts so = {.need_metrics = need_m, .need_texts = need_t};

    if (st >= 0)
        return st;
    if (o.help) {
        printf(dmon_help, prog);
        return 0;
    }
    if (!o.select)
        o.select = "puc";
    if (strchr(o.select, 'e'))
        want |= GS_WANT_HEALTH;
    if (strchr(o.select, 't'))
        want |= GS_WANT_PCIE_TPUT;
    gs_smi_dmon_need(o.select, need_m, need_t);
    gs_smi_need_ids(o.ids, need_t);
    so.mask_health = true; /* the two ECC columns only */
    return run(&o, want, &so, o.select, dmon_header, dmon_rows);
}

/* --- pmon ----------------------------------------------------------------------------------- */

static int pmon_header(FILE *out, const struct gs_snapshot *s, const unsigned char *sel,
                       const char *select)
{
    (void)s, (void)sel;
    fputs("# gpu         pid   type", out);
    if (strchr(select, 'u'))
        fputs("     sm    mem    enc    dec    jpg    ofa", out);
    if (strchr(select, 'm'))
        fputs("     fb   ccpm", out);
    fputs("    command \n# Idx           #    C/G", out);
    if (strchr(select, 'u'))
        fputs("      %      %      %      %      %      %", out);
    if (strchr(select, 'm'))
        fputs("     MB     MB", out);
    fputs("    name \n", out);
    return ferror(out) ? GS_EIO : GS_OK;
}

static int by_pid(const void *a, const void *b)
{
    const struct gs_proc *x = *(const struct gs_proc *const *)a;
    const struct gs_proc *y = *(const struct gs_proc *const *)b;

    return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* The short name nvidia-smi shows: the last part of the process's path. */
static void command(const struct gs_proc *p, char *out, size_t n)
{
    const char *full = p->nvml_name_st == GS_ST_OK ? p->nvml_name : p->name[0] ? p->name : DASH;
    const char *slash = strrchr(full, '/');

    snprintf(out, n, "%s", slash && slash[1] ? slash + 1 : full);
}

static void pmon_line(FILE *out, unsigned gpu, const struct gs_proc *p, const char *select)
{
    char pid[16], name[GS_PROC_CMD_LEN], u[4][16], fb[24];
    const char *type = DASH;

    if (p) {
        snprintf(pid, sizeof pid, "%u", p->pid);
        type = (p->type & GS_PROC_COMPUTE) && (p->type & GS_PROC_GRAPHICS) ? "C+G"
               : (p->type & GS_PROC_MPS)                                   ? "M"
               : (p->type & GS_PROC_COMPUTE)                               ? "C"
                                                                           : "G";
        command(p, name, sizeof name);
    } else {
        snprintf(pid, sizeof pid, DASH);
        snprintf(name, sizeof name, DASH);
    }
    cell(u[0], sizeof u[0], p && p->util_st == GS_ST_OK, p ? llround(p->sm_util * 100.0) : 0);
    cell(u[1], sizeof u[1], p && p->util_st == GS_ST_OK, p ? llround(p->mem_util * 100.0) : 0);
    /* the video engines print "-" when idle in the sample, as nvidia-smi does ("99 10 - -" for
     * a training process, "7 3 99 -" for an encoder): every capture's pmon agrees */
    cell(u[2], sizeof u[2], p && p->util_st == GS_ST_OK && llround(p->enc_util * 100.0) > 0,
         p ? llround(p->enc_util * 100.0) : 0);
    cell(u[3], sizeof u[3], p && p->util_st == GS_ST_OK && llround(p->dec_util * 100.0) > 0,
         p ? llround(p->dec_util * 100.0) : 0);
    cell(fb, sizeof fb, p && p->mem_st == GS_ST_OK,
         p ? (long long)gs_smi_mib(p->gpu_mem_bytes) : 0);
    fprintf(out, "%5u%11s%6s", gpu, pid, type);
    if (strchr(select, 'u'))
        fprintf(out, "%7s%7s%7s%7s%7s%7s", u[0], u[1], u[2], u[3], DASH, DASH);
    if (strchr(select, 'm'))
        fprintf(out, "%7s%7s", fb, DASH);
    fprintf(out, "    %-15.15s\n", name);
}

static int pmon_rows(FILE *out, const struct gs_snapshot *s, const unsigned char *sel,
                     const char *select)
{
    const struct gs_proc **list = s->n_procs ? malloc(s->n_procs * sizeof *list) : NULL;

    if (s->n_procs && !list)
        return GS_ENOMEM;
    for (unsigned i = 0; i < s->n_gpus; i++) {
        unsigned n = 0;

        if (!sel[i])
            continue;
        for (unsigned k = 0; k < s->n_procs; k++)
            if (s->procs[k].gpu == i)
                list[n++] = &s->procs[k];
        if (n == 0) {
            pmon_line(out, s->gpus[i].index, NULL, select);
            continue; /* and no qsort: list is NULL when the snapshot has no process at all */
        }
        qsort(list, n, sizeof *list, by_pid);
        for (unsigned k = 0; k < n; k++)
            pmon_line(out, s->gpus[i].index, list[k], select);
    }
    free(list);
    return ferror(out) ? GS_EIO : GS_OK;
}

int gs_smi_pmon(int argc, char **argv, const char *prog)
{
    unsigned char need_m[GS_M__COUNT] = {0}, need_t[GS_T__COUNT] = {0};
    const struct gs_sampler_opts so = {.need_metrics = need_m, .need_texts = need_t};
    struct mon_opts o;
    int st = parse(argc, argv, &o, prog, "pmon", "um", 10);

    if (st >= 0)
        return st;
    if (o.help) {
        printf(pmon_help, prog);
        return 0;
    }
    if (!o.select)
        o.select = "u";
    /* every column is a process's (GS_WANT_PROCS, _PROC_UTIL): no GPU reading is printed */
    gs_smi_need_ids(o.ids, need_t);
    return run(&o, GS_WANT_PROCS | GS_WANT_PROC_UTIL | GS_WANT_MIG | GS_WANT_STATIC, &so, o.select,
               pmon_header, pmon_rows);
}
