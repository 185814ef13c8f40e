/*
 * libFuzzer target for nvidia-smi's printers (src/cli/smi/smi_table.c, smi_q.c, smi_fmt.c): the
 * default table, -L, -q and -q -x of a snapshot whose strings (GPU and MIG names, UUIDs, bus
 * ids, process names: text a driver, a scenario or a process's argv hands us) and readings come
 * from the input, written to /dev/null; and the -q -d section list parser.
 *
 * Input: the first byte picks the mode: 'd' parses the rest as a -d list; anything else builds
 * two GPUs and up to six processes. Its lines give the strings in order (name, UUID, bus id,
 * serial, VBIOS of GPU 0 and 1, then MIG device names, then process names); the bytes after
 * the first NUL byte, read cyclically, give each reading a status (byte % 5) and a value (a
 * signed 16-bit number times a unit scale, so NVML-sized: watts, bytes, hertz), and the MIG
 * count, process types and GPU of each process.
 *
 * Build and run: make fuzz (fuzz/meson.build, scripts/fuzz.sh).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/smi/smi.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"

#include "fuzz_util.h"

static FILE *sink;

struct bytes {
    const uint8_t *p;
    size_t n, at;
};

static unsigned next(struct bytes *b)
{
    if (b->n == 0)
        return 0;
    return b->p[b->at++ % b->n];
}

static double value(struct bytes *b, enum gs_metric m)
{
    int16_t raw = (int16_t)(next(b) | next(b) << 8);
    const char *unit = gs_metric_unit(m);
    double scale = 1.0;

    if (strcmp(unit, "bytes") == 0 || strcmp(unit, "bytes_per_second") == 0)
        scale = 1048576.0 * 3.7;
    else if (strcmp(unit, "hertz") == 0)
        scale = 1e6;
    else if (strcmp(unit, "ratio") == 0)
        scale = 0.01;
    else if (strcmp(unit, "watts") == 0)
        scale = 0.37;
    return raw * scale;
}

/* The next line of text (cut to fit), or "" when the lines ran out. */
static void line(char **cur, char *dst, size_t n)
{
    char *s = *cur, *nl;

    if (!s) {
        dst[0] = '\0';
        return;
    }
    nl = strchr(s, '\n');
    if (nl)
        *nl = '\0';
    snprintf(dst, n, "%s", s);
    *cur = nl ? nl + 1 : NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gs_snapshot *snap = NULL;
    struct bytes b;
    char *text, *cur;
    const uint8_t *nul;
    unsigned sections = 0;
    char bad[64];

    if (!sink)
        sink = fopen("/dev/null", "w");
    if (size == 0 || !sink)
        return 0;
    if (data[0] == 'd') {
        text = gs_fuzz_dup_text(data + 1, size - 1);
        if (text)
            gs_smi_parse_sections(text, &sections, bad, sizeof bad);
        free(text);
        return 0;
    }
    nul = memchr(data, 0, size);
    b.p = nul ? nul + 1 : data;
    b.n = nul ? size - (size_t)(nul + 1 - data) : size;
    b.at = 0;
    text = gs_fuzz_dup_text(data + 1, nul ? (size_t)(nul - data) - 1 + (nul == data) : size - 1);
    if (!text || gs_snapshot_new(&snap, 2, 8, NULL) != GS_OK) {
        free(text);
        return 0;
    }
    cur = text;
    snap->t_real = 1784016758.0 + next(&b) * 3600.0;
    snap->sys.driver_st = next(&b) % 5;
    line(&cur, snap->sys.driver_version, sizeof snap->sys.driver_version);
    snap->sys.nvml_st = next(&b) % 5;
    line(&cur, snap->sys.nvml_version, sizeof snap->sys.nvml_version);
    snap->sys.cuda_st = next(&b) % 5;
    snap->sys.cuda_version = (int)(next(&b) * 100 + next(&b));
    snap->sys.gpu_count = 2;
    for (unsigned i = 0; i < 2; i++) {
        struct gs_gpu *g = &snap->gpus[i];

        g->index = i;
        g->lost = next(&b) % 7 == 0;
        for (int t = 0; t < GS_T__COUNT; t++) {
            g->tst[t] = next(&b) % 5;
            line(&cur, g->text[t], sizeof g->text[t]);
        }
        for (int m = 0; m < GS_M__COUNT; m++) {
            g->st[m] = next(&b) % 5;
            g->v[m] = value(&b, m);
        }
        for (int t = 0; t < 2; t++)
            for (int k = 0; k < 2; k++)
                for (int l = 0; l < GS_ECC_LOCATIONS; l++) {
                    g->ecc_loc_st[t][k][l] = next(&b) % 5;
                    g->ecc_loc[t][k][l] = next(&b) * 1000u;
                }
        g->n_mig = next(&b) % (GS_MIG_MAX + 1);
        for (unsigned k = 0; k < g->n_mig; k++) {
            struct gs_mig *mg = &g->mig[k];

            mg->index = k;
            mg->gi_id = next(&b);
            mg->ci_id = next(&b) % 3;
            line(&cur, mg->name, sizeof mg->name);
            line(&cur, mg->uuid, sizeof mg->uuid);
            mg->mem_st = next(&b) % 5;
            mg->mem_total_bytes = (uint64_t)next(&b) << 30;
            mg->mem_used_bytes = (uint64_t)next(&b) << 24;
            mg->mem_free_bytes = (uint64_t)next(&b) << 28;
            mg->bar1_st = next(&b) % 5;
            mg->bar1_total_bytes = (uint64_t)next(&b) << 26;
            mg->bar1_used_bytes = (uint64_t)next(&b) << 27;
            mg->attr_st = next(&b) % 5;
            mg->sm_count = next(&b) * 3u;
            mg->ce_count = next(&b);
            mg->jpg_count = next(&b) * 100000u;
            mg->mem_reserved_st = next(&b) % 5;
            mg->mem_reserved_bytes = (uint64_t)next(&b) << 22;
            mg->sram_unc_st = next(&b) % 5;
            mg->sram_unc_vol = (uint64_t)next(&b) << 40;
        }
    }
    snap->n_procs = next(&b) % 7;
    for (unsigned k = 0; k < snap->n_procs; k++) {
        struct gs_proc *p = &snap->procs[k];

        memset(p, 0, sizeof *p);
        p->pid = next(&b) * 977u + next(&b);
        p->gpu = next(&b) % 2;
        p->type = next(&b) % 8;
        p->gi_id = next(&b) % 2 ? 0xFFFFFFFFu : next(&b);
        p->ci_id = next(&b) % 2 ? 0xFFFFFFFFu : next(&b);
        p->mem_st = next(&b) % 5;
        p->gpu_mem_bytes = (uint64_t)next(&b) << 22;
        p->util_st = next(&b) % 5;
        p->sm_util = next(&b) / 255.0;
        p->nvml_name_st = next(&b) % 5;
        line(&cur, p->nvml_name, sizeof p->nvml_name);
        p->host_st = next(&b) % 5;
        line(&cur, p->cmdline, sizeof p->cmdline);
        line(&cur, p->name, sizeof p->name);
    }
    gs_smi_table(sink, snap, NULL);
    gs_smi_list(sink, snap, NULL);
    gs_smi_q(sink, snap, NULL, 0, 0);
    gs_smi_q(sink, snap, NULL, next(&b) | next(&b) << 8, 1);
    gs_snapshot_free(snap);
    free(text);
    return 0;
}
