/*
 * `gpuscope query`: nvidia-smi compatible --query-gpu / --query-compute-apps with
 * --format=csv[,noheader][,nounits], -i, -f and the -l / -lms loops, so a script written for
 * `nvidia-smi --query-gpu=... --format=csv` gets the same bytes from this command.
 *
 * The flow is parse (query_opts.c) -> resolve the field list (query_fields.c) -> open one source
 * (client/source.h: the local agent or NVML) -> sample, print, and in loop mode sleep to the next
 * CLOCK_MONOTONIC boundary. The source is opened once and reused for every iteration (reopening
 * re-initialises NVML, which is exactly the per-refresh cost gpustat pays). SIGINT and SIGTERM end
 * a loop cleanly after the current iteration: they are blocked and collected with sigtimedwait
 * while waiting for the next tick, so no handler or global flag is needed.
 *
 * Where nvidia-smi puts a message, we put ours: its data-level answers (`Field "x" is not a valid
 * field to query.`, `No devices were found`) go to stdout, where scripts capturing nvidia-smi's
 * output already look; usage errors and driver failures go to stderr as one line.
 */
#include "cli/cli.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "cli/smi/query_fields.h"
#include "cli/smi/query_opts.h"
#include "cli/smi/smi.h"
#include "client/source.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"
#include "gpuscope/gs_sampler.h"

#define NO_DEVICES "No devices were found"

/* Everything one run holds, released by run_close. */
struct run {
    struct gs_query_opts opts;
    struct gs_qf_sel sel;
    FILE *out;
    struct gs_source *src;
    struct gs_snapshot *snap; /* the source's, after each sample */
    unsigned char *gpu_sel;
    int header_done;
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: gpuscope query --query-gpu=FIELDS --format=csv[,noheader][,nounits] [OPTIONS]\n"
            "       gpuscope query --query-compute-apps=FIELDS --format=csv[,...] [OPTIONS]\n"
            "       gpuscope query [-i ID] [-l SEC]     nvidia-smi's default table\n"
            "       gpuscope query -L | --version\n"
            "       gpuscope query -q [-x] [-d SECTION[,...]] [-i ID] [-f FILE] [-l SEC]\n"
            "       gpuscope query dmon|pmon|topo|nvlink [-h]\n"
            "\n"
            "nvidia-smi compatible selective queries: the same field names, CSV bytes and exit\n"
            "codes as `nvidia-smi --query-gpu` / `--query-compute-apps`.\n"
            "\n"
            "    --query-gpu=FIELDS          One row per GPU. See --help-query-gpu.\n"
            "    --query-compute-apps=FIELDS One row per process with a compute context.\n"
            "                                See --help-query-compute-apps.\n"
            "    --format=csv[,noheader][,nounits]\n"
            "                                csv (mandatory); noheader: no column header line;\n"
            "                                nounits: numbers without their unit.\n"
            "    -i,   --id=ID[,ID...]       Only these GPUs: index, UUID or PCI bus id.\n"
            "    -f,   --filename=FILE       Write to FILE instead of stdout.\n"
            "    -l,   --loop[=SEC]          Repeat every SEC seconds (5 when omitted) until\n"
            "                                Ctrl+C.\n"
            "    -lms, --loop-ms=MS          Repeat every MS milliseconds until Ctrl+C.\n"
            "          --help-query-gpu      List the --query-gpu fields.\n"
            "          --help-query-compute-apps\n"
            "                                List the --query-compute-apps fields.\n"
            "          --no-agent            Read NVML even when the local agent answers.\n"
            "    -h,   --help                This help.\n"
            "\n"
            "Options take --opt=VALUE or --opt VALUE. The NVML library is libnvidia-ml.so.1, or\n"
            "$GPUSCOPE_NVML_LIBRARY when set. Exit status follows nvidia-smi: 0 ok, 2 bad\n"
            "usage or field, 6 no such GPU, 9 driver not loaded, 12 NVML library not found,\n"
            "15 GPU lost, 255 other errors. See docs/query.md.\n"
            "\n"
            "Without --query-*, the command is nvidia-smi's: no option prints its table, -L lists\n"
            "the GPUs and MIG devices, --version the versions, -q (--query) the NVSMI LOG (-x:\n"
            "as XML; -d: only these sections: MEMORY, UTILIZATION, ECC, TEMPERATURE, POWER,\n"
            "CLOCK, COMPUTE, PIDS, PERFORMANCE, SUPPORTED_CLOCKS, PAGE_RETIREMENT, ACCOUNTING,\n"
            "ENCODER_STATS, FBC_STATS, ROW_REMAPPER, VOLTAGE, RESET_STATUS); dmon and pmon\n"
            "monitor devices and processes. Installed as `nvidia-smi` (a symlink to gpuscope),\n"
            "the binary takes nvidia-smi's command line. See docs/nvidia-smi.md.\n");
}

static void run_close(struct run *r)
{
    gs_source_close(r->src);
    gs_qf_sel_free(&r->sel);
    free(r->gpu_sel);
    if (r->out && r->out != stdout)
        fclose(r->out);
}

/* Prints every selected row of one snapshot. */
static int emit(struct run *r)
{
    const struct gs_snapshot *s = r->snap;
    int rc = GS_OK;

    if (!r->header_done && !(r->opts.flags & GS_QF_NOHEADER))
        rc = gs_qf_write_header(r->out, &r->sel);
    r->header_done = 1;
    for (unsigned g = 0; g < s->n_gpus && rc == GS_OK; g++) {
        if (!r->gpu_sel[g])
            continue;
        if (r->sel.list == GS_QF_GPU) {
            rc = gs_qf_write_row(r->out, &r->sel, s, g, NULL, r->opts.flags);
            continue;
        }
        /* nvidia-smi walks the GPUs in index order and lists each one's compute processes in
         * the driver's order; graphics-only processes are not part of this query. */
        for (unsigned p = 0; p < s->n_procs && rc == GS_OK; p++)
            if (s->procs[p].gpu == g && (s->procs[p].type & GS_PROC_COMPUTE))
                rc = gs_qf_write_row(r->out, &r->sel, s, g, &s->procs[p], r->opts.flags);
    }
    if (fflush(r->out) != 0 || rc != GS_OK)
        return GS_EIO;
    return GS_OK;
}

static int sample(struct run *r, struct gs_err *err)
{
    int rc = gs_source_sample(r->src, gs_qf_want(&r->sel), err);

    r->snap = gs_source_snapshot(r->src);
    return rc;
}

static int loop(struct run *r, struct gs_err *err)
{
    int64_t period = (int64_t)r->opts.loop_ms * 1000000;
    int64_t start = gs_clock_mono_ns();
    sigset_t stop, old;
    int rc = GS_OK;

    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigprocmask(SIG_BLOCK, &stop, &old);
    while (!gs_smi_wait_tick(&stop, start, period)) {
        rc = sample(r, err);
        if (rc == GS_OK)
            rc = emit(r);
        if (rc != GS_OK)
            break;
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    return rc;
}

/* Prints why the run failed and returns the exit status. */
static int fail(int rc, const struct gs_err *err)
{
    if (rc == GS_ENOGPU) {
        printf("%s\n", NO_DEVICES);
        return gs_rc_exit_code(rc);
    }
    fprintf(stderr, "gpuscope query: %s\n", err->msg[0] ? err->msg : gs_strerror(rc));
    gs_source_hint_no_driver(rc, "gpuscope query", false);
    return gs_rc_exit_code(rc);
}

static int open_output(struct run *r, struct gs_err *err)
{
    r->out = stdout;
    if (!r->opts.file)
        return GS_OK;
    r->out = fopen(r->opts.file, "w");
    if (!r->out)
        return gs_err_set(err, GS_EIO, "cannot open %s: %s", r->opts.file, strerror(errno));
    return GS_OK;
}

/* Opens the source, takes the first sample and resolves -i against it. */
static int start(struct run *r, struct gs_err *err)
{
    /* Pay for what you ask: the driver is asked only for what the fields print. */
    static unsigned char need_m[GS_M__COUNT], need_t[GS_T__COUNT];
    struct gs_sampler_opts so = {.need_metrics = need_m, .need_texts = need_t};
    /* The local agent when it answers, as `gpuscope` does (quick.c, docs/security.md); the GPU
     * list may not change under -i's selection. Fields of the -q detail readings
     * (GS_WANT_DETAIL: addressing mode, C2C, SRAM split, bank-remap histogram, fabric) come
     * from NVML when it opens (the agent's cycle does not read them; where it does not open,
     * the agent's answer with those cells N/A). */
    bool detail = (gs_qf_want(&r->sel) & GS_WANT_DETAIL) != 0;
    struct gs_source_opts src = {.pick =
                                     r->opts.no_agent || detail ? GS_SOURCE_NVML : GS_SOURCE_AUTO,
                                 .nvml_env_picks_nvml = true,
                                 .fixed_gpus = true,
                                 .sampler = &so,
                                 .max_procs = 16};
    unsigned n;
    int rc;

    gs_qf_need(&r->sel, need_m, need_t);
    rc = gs_source_open(&r->src, &src, err);
    if (rc != GS_OK && detail && !r->opts.no_agent && rc != GS_ENOMEM) {
        struct gs_err e2;

        src.pick = GS_SOURCE_AUTO;
        if (gs_source_open(&r->src, &src, &e2) == GS_OK)
            rc = GS_OK;
    }
    if (rc != GS_OK)
        return rc;
    n = gs_source_gpu_count(r->src);
    if (n == 0)
        return gs_err_set(err, GS_ENOGPU, NO_DEVICES);
    r->gpu_sel = calloc(n, 1);
    if (!r->gpu_sel)
        return gs_err_set(err, GS_ENOMEM, "query: out of memory");
    rc = sample(r, err);
    if (rc != GS_OK)
        return rc;
    rc = gs_query_select(r->opts.ids, r->snap, r->gpu_sel, err);
    if (rc < 0)
        return rc;
    /* stdout keeps nvidia-smi's bytes; the warning that no GPU here is real goes to stderr */
    if (r->snap->sys.simulated)
        fprintf(stderr, "gpuscope query: note: simulated GPUs (%s%s%s), not real hardware\n",
                r->snap->sys.sim_info[0] ? r->snap->sys.sim_info : "nvml-sim",
                r->snap->sys.source[0] ? ", via " : "", r->snap->sys.source);
    return GS_OK;
}

/* The installed driver's major version for --help-query-gpu, whose field list differs by branch;
 * 0 (every field) when no driver answers: the help needs none. Reads nothing but the system. */
static int help_driver_major(const struct gs_query_opts *o)
{
    static unsigned char none_m[GS_M__COUNT], none_t[GS_T__COUNT];
    struct gs_sampler_opts so = {.need_metrics = none_m, .need_texts = none_t};
    struct gs_source_opts src = {.pick = o->no_agent ? GS_SOURCE_NVML : GS_SOURCE_AUTO,
                                 .nvml_env_picks_nvml = true,
                                 .sampler = &so};
    struct gs_source *s = NULL;
    struct gs_err err = {0};
    int major = 0;

    if (gs_source_open(&s, &src, &err) == GS_OK && gs_source_sample(s, 0, &err) == GS_OK)
        major = gs_smi_driver_major(gs_source_snapshot(s));
    gs_source_close(s);
    return major;
}

static int query(struct run *r)
{
    struct gs_err err = {0};
    int rc;

    rc = gs_qf_parse(&r->sel, r->opts.gpu_fields ? GS_QF_GPU : GS_QF_APPS,
                     r->opts.gpu_fields ? r->opts.gpu_fields : r->opts.app_fields, &err);
    if (rc == GS_EUSAGE) {
        /* nvidia-smi's exact bytes: the message, then an empty line, on stdout */
        printf("%s\n\n", err.msg);
        return gs_rc_exit_code(rc);
    }
    if (rc == GS_OK)
        rc = start(r, &err);
    if (rc == GS_OK) /* the installed driver's nvidia-smi lists these fields? */
        rc = gs_qf_check_driver(&r->sel, gs_smi_driver_major(r->snap), &err);
    if (rc == GS_EUSAGE) {
        printf("%s\n\n", err.msg);
        return gs_rc_exit_code(rc);
    }
    if (rc == GS_OK)
        rc = open_output(r, &err);
    if (rc == GS_OK)
        rc = emit(r);
    if (rc == GS_EIO && !err.msg[0])
        gs_err_set(&err, GS_EIO, "cannot write %s: %s", r->opts.file ? r->opts.file : "output",
                   strerror(errno));
    if (rc == GS_OK && r->opts.loop_ms > 0)
        rc = loop(r, &err);
    return rc == GS_OK ? GS_EXIT_OK : fail(rc, &err);
}

int gs_cli_query(int argc, char **argv)
{
    struct run r = {0};
    struct gs_err err = {0};
    int rc, status;

    /* the table, -L, -q, --version, dmon, pmon, topo, nvlink: smi.c */
    if (gs_smi_wants(argc, argv))
        return gs_smi_main(argc, argv,
                           strcmp(argv[0], "nvidia-smi") == 0 ? "nvidia-smi" : "gpuscope query");
    rc = gs_query_parse(argc, argv, &r.opts, &err);
    if (rc != GS_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return gs_rc_exit_code(rc);
    }
    if (r.opts.help) {
        usage(stdout);
        return GS_EXIT_OK;
    }
    if (r.opts.help_gpu || r.opts.help_apps) {
        int major = r.opts.help_gpu ? help_driver_major(&r.opts) : 0;
        if (r.opts.help_gpu)
            gs_qf_write_help(stdout, GS_QF_GPU, major);
        if (r.opts.help_apps)
            gs_qf_write_help(stdout, GS_QF_APPS, major);
        return GS_EXIT_OK;
    }
    status = query(&r);
    run_close(&r);
    return status;
}
