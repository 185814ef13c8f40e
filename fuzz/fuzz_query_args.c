/*
 * libFuzzer target for the text `gpuscope query` takes from its user (src/cli/smi/query_opts.c,
 * src/cli/smi/query_fields.c): the command line (gs_query_parse, with the --format= parser behind
 * it), the --query-gpu= / --query-compute-apps= field lists (gs_qf_parse) and the -i/--id list
 * (gs_query_select). What the parse yields is then used as query.c uses it: the header and a
 * row per GPU (or per process) are written to /dev/null from a fixed four-GPU snapshot, so the
 * cell formatter meets every field the fuzzer can name.
 *
 * The first byte picks what the rest is (fuzz/corpus/query_args/ starts each seed with it):
 *   'a'  a command line, one argument per line ("--query-gpu=index\n--format=csv")
 *   'g'  a --query-gpu field list          'c'  a --query-compute-apps field list
 *   'f'  a --format value                  'i'  an -i/--id list
 * any other byte picks one of these by its value, so no input is wasted.
 *
 * Build and run: make fuzz (fuzz/meson.build, scripts/fuzz.sh).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/smi/query_fields.h"
#include "cli/smi/query_opts.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"

#include "fuzz_util.h"

#define MAX_ARGS 64

static struct gs_snapshot *snap;
static FILE *sink;

static void set_text(struct gs_gpu *g, enum gs_text t, const char *v)
{
    snprintf(g->text[t], sizeof g->text[t], "%s", v);
    g->tst[t] = GS_ST_OK;
}

/* Four GPUs as a backend leaves them: a healthy one with every reading, a lost one, one with
 * no identity at all and odd statuses, and a MIG-enabled one with readings at their extremes. */
static void fixture(void)
{
    struct gs_gpu *g;

    if (gs_snapshot_new(&snap, 4, 4, NULL) != GS_OK)
        abort();
    snap->t_real = 1784016758.696;
    snap->sys.driver_st = GS_ST_OK;
    strcpy(snap->sys.driver_version, "590.48.01");
    snap->sys.gpu_count = 4;

    g = &snap->gpus[0];
    g->index = 0;
    set_text(g, GS_T_NAME, "NVIDIA H100 80GB HBM3");
    set_text(g, GS_T_SERIAL, "1654922003441");
    set_text(g, GS_T_UUID, "GPU-9f8e7d6c-5b4a-3f2e-1d0c-ba9876543210");
    set_text(g, GS_T_PCI_BUS_ID, "00000000:00:09.0");
    set_text(g, GS_T_VBIOS, "96.00.A5.00.01");
    for (unsigned m = 0; m < GS_M__COUNT; m++) {
        g->st[m] = GS_ST_OK;
        g->v[m] = (double)(m * 7 % 101) / 100.0 + m;
    }
    for (unsigned t = 0; t < 2; t++)
        for (unsigned k = 0; k < 2; k++)
            for (unsigned l = 0; l < GS_ECC_LOCATIONS; l++) {
                g->ecc_loc_st[t][k][l] = (uint8_t)(l % 3 ? GS_ST_OK : GS_ST_NA);
                g->ecc_loc[t][k][l] = l * 1000u;
            }

    g = &snap->gpus[1];
    g->index = 1;
    g->lost = 1;
    set_text(g, GS_T_PCI_BUS_ID, "00000001:3B:00.1");
    set_text(g, GS_T_UUID, "GPU-00000000-0000-0000-0000-000000000001");

    g = &snap->gpus[2];
    g->index = 7; /* indexes need not be dense */
    for (unsigned m = 0; m < GS_M__COUNT; m++)
        g->st[m] = (uint8_t)(m % 5); /* NA, OK, NOPERM, ERROR, LOST */

    g = &snap->gpus[3];
    g->index = 3;
    set_text(g, GS_T_NAME, "NVIDIA A100-SXM4-80GB with a name long enough to need cutting");
    set_text(g, GS_T_UUID, "GPU-abcdefab-cdef-abcd-efab-cdefabcdefab");
    set_text(g, GS_T_PCI_BUS_ID, "0000FFFF:FF:1F.7");
    for (unsigned m = 0; m < GS_M__COUNT; m++) {
        static const double extreme[] = {-1.0, 0.0, 1e300, -1e300, 4.5e18, 1.8446744073709552e19};
        g->st[m] = GS_ST_OK;
        g->v[m] = extreme[m % (sizeof extreme / sizeof extreme[0])];
    }
    g->n_mig = 2;
    for (unsigned i = 0; i < 2; i++) {
        g->mig[i].index = i;
        snprintf(g->mig[i].uuid, sizeof g->mig[i].uuid, "MIG-0000000%u-1111-2222-3333-444444444444",
                 i);
    }

    snap->n_procs = 3;
    for (unsigned i = 0; i < snap->n_procs; i++) {
        struct gs_proc *p = &snap->procs[i];
        p->pid = 1000 + i;
        p->gpu = i == 2 ? 3 : 0;
        p->type = GS_PROC_COMPUTE;
        p->mem_st = (uint8_t)(i == 1 ? GS_ST_NA : GS_ST_OK);
        p->gpu_mem_bytes = i == 2 ? UINT64_MAX : 501481472u;
        p->host_st = GS_ST_OK;
        snprintf(p->name, sizeof p->name, "python3");
        snprintf(p->cmdline, sizeof p->cmdline, i == 1 ? " leading blank" : "python3 train.py");
        p->nvml_name_st = (uint8_t)(i == 0 ? GS_ST_OK : GS_ST_NA);
        snprintf(p->nvml_name, sizeof p->nvml_name, "/usr/bin/python3");
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fixture();
    sink = fopen("/dev/null", "w");
    if (!sink)
        abort();
    return 0;
}

/* Writes what a query prints, as query.c's emit does, for a parsed selection. */
static void emit(const struct gs_qf_sel *sel, const unsigned char *gpu_sel, unsigned flags)
{
    (void)gs_qf_want(sel);
    if (!(flags & GS_QF_NOHEADER))
        CHECK(gs_qf_write_header(sink, sel) == GS_OK);
    for (unsigned i = 0; i < snap->n_gpus; i++) {
        if (gpu_sel && !gpu_sel[i])
            continue;
        if (sel->list == GS_QF_GPU) {
            gs_qf_write_row(sink, sel, snap, i, NULL, flags);
            continue;
        }
        for (unsigned k = 0; k < snap->n_procs; k++)
            if (snap->procs[k].gpu == i)
                gs_qf_write_row(sink, sel, snap, i, &snap->procs[k], flags);
    }
}

static void fields(enum gs_qf_list list, const char *spec, const unsigned char *gpu_sel,
                   unsigned flags)
{
    struct gs_qf_sel sel;
    struct gs_err err = {0};
    int rc = gs_qf_parse(&sel, list, spec, &err);

    if (rc != GS_OK) {
        CHECK(rc == GS_EUSAGE || rc == GS_ENOMEM);
        CHECK(sel.n == 0 && sel.f == NULL && sel.name == NULL && sel.buf == NULL);
        CHECK(memchr(err.msg, '\0', sizeof err.msg) != NULL);
        gs_qf_sel_free(&sel);
        return;
    }
    CHECK(sel.n >= 1 && sel.list == list);
    for (unsigned i = 0; i < sel.n; i++)
        CHECK(sel.f[i] != NULL && sel.name[i] != NULL);
    emit(&sel, gpu_sel, flags);
    gs_qf_sel_free(&sel);
    gs_qf_sel_free(&sel); /* the contract: safe on a freed selection */
}

/* Returns the count gs_query_select gives, checking its contract. */
static int ids(const char *list, unsigned char *gpu_sel)
{
    struct gs_err err = {0};
    int rc = gs_query_select(list, snap, gpu_sel, &err);
    int marked = 0;

    for (unsigned i = 0; i < snap->n_gpus; i++) {
        CHECK(gpu_sel[i] <= 1);
        marked += gpu_sel[i];
    }
    if (rc < 0) {
        CHECK(rc == GS_ENOGPU);
        CHECK(memchr(err.msg, '\0', sizeof err.msg) != NULL);
    } else {
        CHECK(rc == marked && rc >= 1); /* every item matched a GPU */
    }
    return rc;
}

/* Splits text at '\n' into argv[1..] (argv[0] is the subcommand) and runs the whole front
 * end on what gs_query_parse makes of it. */
static void command_line(char *text)
{
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    struct gs_query_opts o;
    struct gs_err err = {0};
    unsigned char gpu_sel[4];

    argc = gs_fuzz_split_args(text, "query", argv, MAX_ARGS);
    if (gs_query_parse(argc, argv, &o, &err) != GS_OK) {
        CHECK(memchr(err.msg, '\0', sizeof err.msg) != NULL);
        return;
    }
    if (o.help || o.help_gpu || o.help_apps)
        return;
    /* What check_query promises to query.c. */
    CHECK((o.gpu_fields != NULL) != (o.app_fields != NULL));
    CHECK(o.format != NULL);
    CHECK(o.loop_ms >= 0 && o.loop_ms <= 7L * 24 * 3600 * 1000);
    if (ids(o.ids, gpu_sel) < 0)
        return;
    fields(o.gpu_fields ? GS_QF_GPU : GS_QF_APPS, o.gpu_fields ? o.gpu_fields : o.app_fields,
           gpu_sel, o.flags);
}

/* A --format value on an otherwise valid command line. */
static void format(char *value)
{
    char *argv[] = {"query", "--query-gpu=index,name", "--format", value, NULL};
    struct gs_query_opts o;
    struct gs_err err = {0};

    if (gs_query_parse(4, argv, &o, &err) != GS_OK)
        return;
    CHECK(o.format == value);
    CHECK((o.flags & ~(unsigned)(GS_QF_NOHEADER | GS_QF_NOUNITS)) == 0);
    fields(GS_QF_GPU, o.gpu_fields, NULL, o.flags);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char modes[] = "agcfi";
    char *text;
    char mode;
    unsigned char gpu_sel[4];

    if (size == 0)
        return 0;
    mode = strchr(modes, data[0]) && data[0] ? (char)data[0] : modes[data[0] % 5];
    /* the rest, NUL-terminated: argv and option values are C strings */
    text = gs_fuzz_dup_text(data + 1, size - 1);
    if (!text)
        return 0;
    switch (mode) {
    case 'a':
        command_line(text);
        break;
    case 'g':
        fields(GS_QF_GPU, text, NULL, 0);
        break;
    case 'c':
        fields(GS_QF_APPS, text, NULL, GS_QF_NOUNITS);
        break;
    case 'f':
        format(text);
        break;
    case 'i':
        if (ids(text, gpu_sel) > 0)
            fields(GS_QF_GPU, "index,pci.bus_id,uuid", gpu_sel, 0);
        break;
    }
    free(text);
    return 0;
}
