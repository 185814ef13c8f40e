/*
 * libFuzzer target for the quick check's command line (src/cli/quick/quick_opts.c): gs_quick_parse
 * with its short-option clusters, "--name=value" / "--name value" forms, the --interval number
 * and the --id list (indexes, UUIDs, PCI bus ids, parsed at option time). A successful parse is
 * checked against what quick.c relies on, then its --id filter is matched against a fixed
 * snapshot (gs_quick_selected, gs_quick_check_ids) as each watch cycle does.
 *
 * Input: the arguments, one per line; seeds are in fuzz/corpus/quick_opts/.
 * Build and run: make fuzz (fuzz/meson.build, scripts/fuzz.sh).
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/quick/quick.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"

#include "fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);

#define MAX_ARGS 64

static struct gs_snapshot *snap;

static void set_text(struct gs_gpu *g, enum gs_text t, const char *v)
{
    snprintf(g->text[t], sizeof g->text[t], "%s", v);
    g->tst[t] = GS_ST_OK;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    struct gs_gpu *g;

    (void)argc;
    (void)argv;
    if (gs_snapshot_new(&snap, 3, 1, NULL) != GS_OK)
        abort();
    g = &snap->gpus[0];
    g->index = 0;
    set_text(g, GS_T_UUID, "GPU-9f8e7d6c-5b4a-3f2e-1d0c-ba9876543210");
    set_text(g, GS_T_PCI_BUS_ID, "00000000:17:00.0");
    g = &snap->gpus[1];
    g->index = 5;
    set_text(g, GS_T_PCI_BUS_ID, "not a bus id");
    g->n_mig = 2;
    strcpy(g->mig[0].uuid, "MIG-11111111-2222-3333-4444-555555555555");
    strcpy(g->mig[1].uuid, "MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee");
    g = &snap->gpus[2];
    g->index = 2;
    set_text(g, GS_T_UUID, "GPU-00000000-0000-0000-0000-000000000002");
    set_text(g, GS_T_PCI_BUS_ID, "0000ABCD:3B:1F.7");
    return 0;
}

static void check_opts(const struct gs_quick_opts *o)
{
    CHECK(o->interval_s == 0.0 ||
          (isfinite(o->interval_s) && o->interval_s >= GS_QUICK_INTERVAL_MIN &&
           o->interval_s <= GS_QUICK_INTERVAL_MAX));
    CHECK((o->show & ~(unsigned)GS_QS_ALL) == 0);
    CHECK(o->n_ids <= GS_QUICK_IDS_MAX);
    for (unsigned i = 0; i < o->n_ids; i++) {
        const struct gs_quick_id *id = &o->ids[i];
        CHECK(id->kind == GS_QID_INDEX || id->kind == GS_QID_UUID || id->kind == GS_QID_BUS);
        CHECK(id->text != NULL);
        if (id->kind == GS_QID_UUID)
            CHECK(memchr(id->uuid, '\0', sizeof id->uuid) != NULL);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    char *text = gs_fuzz_dup_text(data, size);
    struct gs_quick_opts *o = malloc(sizeof *o); /* ~7 KiB of ids: keep it off the stack */
    struct gs_err err = {0};

    if (!text || !o)
        goto out;
    argc = gs_fuzz_split_args(text, "gpuscope", argv, MAX_ARGS);
    if (gs_quick_parse(o, argc, argv, &err) != GS_OK) {
        CHECK(err.rc == GS_EUSAGE);
        CHECK(memchr(err.msg, '\0', sizeof err.msg) != NULL);
        goto out;
    }
    check_opts(o);
    for (unsigned g = 0; g < snap->n_gpus; g++)
        (void)gs_quick_selected(o, &snap->gpus[g]);
    if (gs_quick_check_ids(o, snap, &err) != GS_OK)
        CHECK(err.rc == GS_ENOGPU);
out:
    free(o);
    free(text);
    return 0;
}
