/*
 * The nvidia-smi command lines that are not a --query-gpu selective query: bare (the default
 * table), -L, --version, -q [-d SECTIONS] [-x], each with -i, -f and the -l / -lms loops, and the
 * dmon / pmon / topo subcommands. gs_cli_query sends a command line here when gs_smi_wants says
 * so; main.c sends everything here when the binary runs as `nvidia-smi`.
 *
 * Messages are nvidia-smi's: a driver that cannot be reached prints its sentence on stdout and
 * exits 9, a missing libnvidia-ml.so exits 12, no GPU "No devices were found" and 6. Loops sample
 * on CLOCK_MONOTONIC boundaries and end cleanly on SIGINT/SIGTERM (blocked and collected with
 * sigtimedwait, as query.c does); each -q -x iteration is one whole document, so a reader that
 * splits the stream on the <nvidia_smi_log> lines (netdata) sees one document per sample.
 */
#include "cli/smi/smi.h"

#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/clock.h"
#include "cli/smi/query_opts.h"
#include "client/source.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_sampler.h"

enum smi_mode { M_TABLE, M_LIST, M_QUERY, M_VERSION };

struct smi_opts {
    enum smi_mode mode;
    int xml;
    unsigned sections;
    const char *ids;
    const char *file;
    long loop_ms;
};

/* --- which command lines are ours ----------------------------------------------------------- */

static int starts(const char *w, const char *name)
{
    size_t n = strlen(name);

    return strncmp(w, name, n) == 0 && (w[n] == '\0' || w[n] == '=');
}

int gs_smi_wants(int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "dmon") == 0 || strcmp(argv[1], "pmon") == 0 ||
                     strcmp(argv[1], "topo") == 0 || strcmp(argv[1], "nvlink") == 0))
        return 1;
    for (int i = 1; i < argc; i++) {
        const char *w = argv[i];

        if (starts(w, "--query-gpu") || starts(w, "--query-compute-apps") ||
            starts(w, "--format") || starts(w, "--help-query-gpu") ||
            starts(w, "--help-query-compute-apps") || strcmp(w, "-h") == 0 || starts(w, "--help"))
            return 0;
    }
    return 1;
}

/* --- messages ------------------------------------------------------------------------------- */

int gs_smi_fail(int rc, const char *detail)
{
    (void)detail;
    switch (rc) {
    case GS_ENODRIVER:
        printf("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
               "Make sure that the latest NVIDIA driver is installed and running.\n\n");
        break;
    case GS_ENOLIB:
        printf("NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make "
               "sure that the NVIDIA Display Driver is properly installed and present in your "
               "system.\nPlease also try adding directory that contains libnvidia-ml.so to your "
               "system PATH.\n");
        break;
    case GS_EMISMATCH:
        printf("Failed to initialize NVML: Driver/library version mismatch\n");
        break;
    case GS_EPERM:
        printf("Failed to initialize NVML: Insufficient Permissions\n");
        break;
    case GS_ENOGPU:
        printf("No devices were found\n");
        break;
    case GS_ELOST:
        printf("Unable to determine the device handle for GPU: GPU is lost. Reboot the system "
               "to recover this GPU\n");
        break;
    case GS_EIO:
        fprintf(stderr, "%s\n", detail && detail[0] ? detail : gs_strerror(rc));
        break;
    default:
        printf("Failed to initialize NVML: Unknown Error\n");
        if (detail && detail[0])
            fprintf(stderr, "%s\n", detail);
    }
    fflush(stdout);
    return gs_rc_exit_code(rc);
}

static int usage_error(const char *prog, const char *fmt, const char *word)
{
    fprintf(stderr, fmt, word);
    fprintf(stderr, " Please run '%s -h' for help.\n", prog);
    return gs_rc_exit_code(GS_EUSAGE);
}

int gs_smi_open(struct gs_source **src, unsigned want, const struct gs_sampler_opts *so)
{
    const struct gs_source_opts o = {.pick = GS_SOURCE_NVML, .sampler = so, .max_procs = 16};
    const struct gs_snapshot *snap;
    struct gs_err err = {0};
    int rc = gs_source_open(src, &o, &err);

    if (rc != GS_OK) {
        int status = gs_smi_fail(rc, err.msg);

        gs_source_hint_no_driver(rc, "gpuscope query", true); /* stderr: stdout is nvidia-smi's */
        return status;
    }
    if (gs_source_gpu_count(*src) == 0)
        return gs_smi_fail(GS_ENOGPU, NULL);
    rc = gs_source_sample(*src, want, &err);
    if (rc != GS_OK)
        return gs_smi_fail(rc, err.msg);
    snap = gs_source_snapshot(*src);
    if (snap->sys.simulated) /* stdout keeps nvidia-smi's bytes */
        fprintf(stderr, "gpuscope query: note: simulated GPUs (%s), not real hardware\n",
                snap->sys.sim_info[0] ? snap->sys.sim_info : "nvml-sim");
    return 0;
}

void gs_smi_need_ids(const char *ids, unsigned char *texts)
{
    if (ids) /* -i matches an index, a UUID or a PCI bus id */
        texts[GS_T_UUID] = texts[GS_T_PCI_BUS_ID] = 1;
}

/* --- options -------------------------------------------------------------------------------- */

/* The value of an option: "--opt=V", or the next word. */
static const char *value(int argc, char **argv, int *i, const char *eq)
{
    if (eq)
        return eq + 1;
    if (*i + 1 < argc)
        return argv[++*i];
    return NULL;
}

static int is_opt(const char *w, const char *s, const char *l, const char **eq)
{
    size_t n;

    *eq = NULL;
    if (s && strcmp(w, s) == 0)
        return 1;
    if (s && strncmp(w, s, strlen(s)) == 0 && w[strlen(s)] == '=') {
        *eq = w + strlen(s);
        return 1;
    }
    n = strlen(l);
    if (strncmp(w, l, n) == 0 && (w[n] == '\0' || w[n] == '=')) {
        *eq = w[n] == '=' ? w + n : NULL;
        return 1;
    }
    return 0;
}

/* Fills o from argv; returns -1 when the command line is good, else the exit status of the
 * usage error it printed. */
static int parse(int argc, char **argv, struct smi_opts *o, const char *prog)
{
    int list = 0, q = 0, version = 0;

    memset(o, 0, sizeof *o);
    for (int i = 1; i < argc; i++) {
        const char *w = argv[i], *eq, *v;
        char bad[64];
        long n;

        if (is_opt(w, "-L", "--list-gpus", &eq)) {
            list = 1;
        } else if (is_opt(w, "-q", "--query", &eq)) {
            q = 1;
        } else if (is_opt(w, "-x", "--xml-format", &eq)) {
            o->xml = 1;
        } else if (is_opt(w, NULL, "--version", &eq)) {
            version = 1;
        } else if (is_opt(w, NULL, "--no-agent", &eq)) {
            /* accepted for symmetry with --query-gpu: these modes always read NVML */
        } else if (is_opt(w, "-d", "--display", &eq)) {
            v = value(argc, argv, &i, eq);
            if (!v)
                return usage_error(prog, "ERROR: Option %s is missing its value.", w);
            if (gs_smi_parse_sections(v, &o->sections, bad, sizeof bad) < 0)
                return usage_error(prog, "ERROR: Invalid display type \"%s\".", bad);
        } else if (is_opt(w, "-i", "--id", &eq)) {
            o->ids = value(argc, argv, &i, eq);
            if (!o->ids)
                return usage_error(prog, "ERROR: Option %s is missing its value.", w);
        } else if (is_opt(w, "-f", "--filename", &eq)) {
            o->file = value(argc, argv, &i, eq);
            if (!o->file)
                return usage_error(prog, "ERROR: Option %s is missing its value.", w);
        } else if (is_opt(w, "-lms", "--loop-ms", &eq)) {
            v = value(argc, argv, &i, eq);
            n = gs_query_positive(v, GS_QUERY_LOOP_MAX_MS);
            if (n < 0)
                return usage_error(prog, "ERROR: Option %s has an invalid value.", w);
            o->loop_ms = n;
        } else if (is_opt(w, "-l", "--loop", &eq)) {
            v = eq ? eq + 1
                   : (i + 1 < argc && isdigit((unsigned char)argv[i + 1][0]) ? argv[++i] : NULL);
            n = v ? gs_query_positive(v, GS_QUERY_LOOP_MAX_MS / 1000)
                  : GS_QUERY_DEFAULT_LOOP_MS / 1000;
            if (n < 0)
                return usage_error(prog, "ERROR: Option %s has an invalid value.", w);
            o->loop_ms = n * 1000;
        } else {
            return usage_error(prog, "ERROR: Option %s is not recognized.", w);
        }
    }
    if (list + q + version > 1 || ((o->xml || o->sections) && !q))
        return usage_error(prog, "Invalid combination of input arguments.%s", "");
    o->mode = list ? M_LIST : q ? M_QUERY : version ? M_VERSION : M_TABLE;
    return -1;
}

/* --- running -------------------------------------------------------------------------------- */

int gs_smi_wait_until(const sigset_t *stop, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - gs_clock_mono_ns();
        struct timespec ts;
        int sig;

        if (left <= 0)
            return 0;
        ts = gs_clock_timespec(left);
        sig = sigtimedwait(stop, NULL, &ts);
        if (sig > 0)
            return 1;
        if (sig < 0 && errno == EAGAIN)
            return 0;
        /* EINTR from another signal: wait the rest */
    }
}

int gs_smi_wait_tick(const sigset_t *stop, int64_t start, int64_t period)
{
    return gs_smi_wait_until(stop, gs_clock_next_tick(start, gs_clock_mono_ns(), period, NULL));
}

static unsigned want_of(const struct smi_opts *o)
{
    switch (o->mode) {
    case M_VERSION: /* the system's versions only */
        return 0;
    case M_LIST:
        return GS_WANT_MIG | GS_WANT_STATIC;
    case M_TABLE:
        return GS_WANT_PROCS | GS_WANT_HEALTH | GS_WANT_MIG | GS_WANT_STATIC;
    case M_QUERY:
        break;
    }
    /* PCIe throughput blocks ~20 ms per direction and GPU; only the PCI block (no -d) shows it.
     * The detail readings (15 calls per GPU, each only where a printed row needs it) feed rows
     * outside any -d section but ECC's SRAM status and unrepairable flag, ROW_REMAPPER's
     * histogram and MEMORY's protected memory. */
    return GS_WANT_PROCS | GS_WANT_HEALTH | GS_WANT_MIG | GS_WANT_STATIC |
           (o->sections ? 0 : GS_WANT_PCIE_TPUT) |
           (!o->sections || (o->sections & (GS_SMI_D_ECC | GS_SMI_D_ROW_REMAPPER | GS_SMI_D_MEMORY))
                ? GS_WANT_DETAIL
                : 0);
}

/* nvmlSystemGetNVMLVersion answers "<CUDA major>.<driver version>" ("13.595.71.05"); nvidia-smi
 * prints the driver's major.minor part of it ("595.71"). */
static void nvml_version(const struct gs_system *y, char *buf, size_t n)
{
    const char *v = strchr(y->nvml_version, '.');
    size_t len;

    if (y->nvml_st != GS_ST_OK || !v) {
        snprintf(buf, n, "%s", y->nvml_st == GS_ST_OK ? y->nvml_version : "N/A");
        return;
    }
    v++;
    len = strcspn(v, ".");
    if (v[len] == '.')
        len += 1 + strcspn(v + len + 1, ".");
    snprintf(buf, n, "%.*s", (int)len, v);
}

static int print_version(FILE *out, const struct gs_snapshot *s)
{
    const struct gs_system *y = &s->sys;
    const char *drv = y->driver_st == GS_ST_OK ? y->driver_version : "N/A";
    char nvml[GS_STR_LEN], cuda[16];

    /* The nvidia-smi a driver ships carries the driver's version. */
    fprintf(out, "NVIDIA-SMI version  : %s\n", drv);
    nvml_version(y, nvml, sizeof nvml);
    fprintf(out, "NVML version        : %s\n", nvml);
    if (y->cuda_st == GS_ST_OK)
        snprintf(cuda, sizeof cuda, "%d.%d", y->cuda_version / 1000, (y->cuda_version % 1000) / 10);
    else
        snprintf(cuda, sizeof cuda, "N/A");
    if (gs_smi_layout(s)->kmd) {
        fputs("DRIVER version      : Deprecated, see \"KMD version\" instead\n"
              "CUDA version        : Deprecated, see \"CUDA UMD version\" instead\n",
              out);
        fprintf(out, "KMD version         : %s\n", drv);
        fprintf(out, "CUDA UMD version    : %s\n", cuda);
    } else {
        fprintf(out, "DRIVER version      : %s\n", drv);
        fprintf(out, "CUDA Version        : %s\n", cuda);
    }
    return ferror(out) ? GS_EIO : GS_OK;
}

static int emit(FILE *out, const struct smi_opts *o, const struct gs_snapshot *s,
                const unsigned char *sel)
{
    int rc = GS_OK;

    switch (o->mode) {
    case M_TABLE:
        rc = gs_smi_table(out, s, sel);
        break;
    case M_LIST:
        rc = gs_smi_list(out, s, sel);
        break;
    case M_QUERY:
        rc = gs_smi_q(out, s, sel, o->sections, o->xml);
        break;
    case M_VERSION:
        rc = print_version(out, s);
        break;
    }
    if (fflush(out) != 0)
        rc = GS_EIO;
    return rc;
}

int gs_smi_main(int argc, char **argv, const char *prog)
{
    struct smi_opts o;
    unsigned char need_m[GS_M__COUNT] = {0}, need_t[GS_T__COUNT] = {0};
    struct gs_sampler_opts so = {.need_metrics = need_m, .need_texts = need_t};
    struct gs_source *src = NULL;
    struct gs_snapshot *snap = NULL;
    unsigned char *sel = NULL;
    FILE *out = stdout;
    struct gs_err err = {0};
    sigset_t stop, old;
    int status, rc;

    if (argc > 1 && strcmp(argv[1], "dmon") == 0)
        return gs_smi_dmon(argc - 1, argv + 1, prog);
    if (argc > 1 && strcmp(argv[1], "pmon") == 0)
        return gs_smi_pmon(argc - 1, argv + 1, prog);
    if (argc > 1 && strcmp(argv[1], "topo") == 0)
        return gs_smi_topo(argc - 1, argv + 1, prog);
    if (argc > 1 && strcmp(argv[1], "nvlink") == 0)
        return gs_smi_nvlink(argc - 1, argv + 1, prog);
    status = parse(argc, argv, &o, prog);
    if (status >= 0)
        return status;
    /* a loop holds SIGINT/SIGTERM from the start, so that one arriving during the first
     * sample still ends the loop cleanly after its document */
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    if (o.loop_ms > 0)
        sigprocmask(SIG_BLOCK, &stop, &old);
    /* each mode's readings; --version prints the system's only */
    if (o.mode == M_TABLE)
        gs_smi_table_need(need_m, need_t);
    else if (o.mode == M_LIST)
        gs_smi_list_need(need_m, need_t);
    else if (o.mode == M_QUERY)
        gs_smi_q_need(o.sections, need_m, need_t);
    gs_smi_need_ids(o.ids, need_t);
    /* the table's ECC cell; -q's sections but ECC (its per-location counters: no -d is all) */
    so.mask_health =
        o.mode == M_TABLE || (o.mode == M_QUERY && o.sections && !(o.sections & GS_SMI_D_ECC));
    /* the MIG devices' SRAM ECC count: the table's MIG box, -q's MIG Device blocks (no -d) */
    so.mig_sram_ecc = o.mode == M_TABLE || (o.mode == M_QUERY && !o.sections);
    status = gs_smi_open(&src, want_of(&o), &so);
    if (status != 0)
        goto done;
    snap = gs_source_snapshot(src);
    sel = calloc(snap->n_gpus, 1);
    if (!sel) {
        status = gs_smi_fail(GS_ENOMEM, "out of memory");
        goto done;
    }
    rc = gs_query_select(o.ids, snap, sel, &err);
    if (rc < 0) {
        status = gs_smi_fail(rc, err.msg);
        goto done;
    }
    if (o.file) {
        out = fopen(o.file, "w");
        if (!out) {
            out = stdout;
            gs_err_set(&err, GS_EIO, "cannot open %s: %s", o.file, strerror(errno));
            status = gs_smi_fail(GS_EIO, err.msg);
            goto done;
        }
    }
    rc = emit(out, &o, snap, sel);
    if (rc == GS_OK && o.loop_ms > 0) {
        int64_t period = (int64_t)o.loop_ms * 1000000, start = gs_clock_mono_ns();

        while (rc == GS_OK && !gs_smi_wait_tick(&stop, start, period)) {
            rc = gs_source_sample(src, want_of(&o), &err);
            snap = gs_source_snapshot(src);
            if (rc == GS_OK)
                rc = emit(out, &o, snap, sel);
        }
    }
    if (rc == GS_EIO && !err.msg[0])
        gs_err_set(&err, GS_EIO, "cannot write %s: %s", o.file ? o.file : "output",
                   strerror(errno));
    status = rc == GS_OK ? 0 : gs_smi_fail(rc, err.msg);
done:
    if (o.loop_ms > 0)
        sigprocmask(SIG_SETMASK, &old, NULL);
    if (out != stdout)
        fclose(out);
    free(sel);
    gs_source_close(src);
    return status;
}
