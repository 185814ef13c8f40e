/*
 * nvidia-smi nvlink -s: each GPU's NVLinks and their speed, from the model's per-link state
 * (nvmlDeviceGetNvLinkState) and speed (the NVLink speed field values), in nvidia-smi's words
 * for a GPU without NVLink, one whose links are all down, and one in MIG mode.
 */
#include "cli/smi/smi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/smi/query_opts.h"
#include "client/source.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_sampler.h"

static const char nvlink_help[] =
    "\n"
    "    nvlink -- Display NvLink information.\n"
    "\n"
    "    Usage: %s nvlink [options]\n"
    "\n"
    "    Options include:\n"
    "    [-h | --help]:        Display help information\n"
    "    [-i | --id]:          Enumeration index, PCI bus ID or UUID.\n"
    "    [-s | --status]:      Display link state (active/inactive) and speed.\n"
    "\n"
    "    gpuscope answers -s only; the driver's nvidia-smi has the other options (capabilities,\n"
    "    counters, error counters, remote device types).\n"
    "\n";

int gs_smi_nvlink_status(FILE *out, const struct gs_snapshot *s, const unsigned char *sel)
{
    for (unsigned i = 0; i < s->n_gpus; i++) {
        const struct gs_gpu *g = &s->gpus[i];
        unsigned active = 0;

        if (sel && !sel[i])
            continue;
        fprintf(out, "GPU %u: %s (UUID: %s)\n", g->index,
                gs_gpu_has_text(g, GS_T_NAME) ? g->text[GS_T_NAME] : "N/A",
                gs_gpu_has_text(g, GS_T_UUID) ? g->text[GS_T_UUID] : "N/A");
        if (g->st[GS_M_MIG_MODE] == GS_ST_OK && g->v[GS_M_MIG_MODE] != 0) {
            fputs("Nvlink queries are not supported for Devices in MIG mode\n", out);
            continue;
        }
        if (g->n_nvlink == 0) {
            fputs("Device does not have or support Nvlink\n", out);
            continue;
        }
        for (unsigned l = 0; l < g->n_nvlink && l < GS_NVLINK_MAX; l++)
            active += g->nvlink[l].active != 0;
        if (active == 0) {
            fputs("NVML: Unable to retrieve Nvlink information as all links are inActive\n", out);
            continue;
        }
        for (unsigned l = 0; l < g->n_nvlink && l < GS_NVLINK_MAX; l++) {
            const struct gs_nvlink *k = &g->nvlink[l];

            if (!k->active)
                fprintf(out, "\t Link %u: <inactive>\n", l);
            else if (k->speed_st == GS_ST_OK)
                fprintf(out, "\t Link %u: %.3f GB/s\n", l, k->speed_bps / 1e9);
            else
                fprintf(out, "\t Link %u: N/A\n", l);
        }
    }
    return ferror(out) ? GS_EIO : GS_OK;
}

int gs_smi_nvlink(int argc, char **argv, const char *prog)
{
    const char *ids = NULL;
    int status_opt = 0;
    struct gs_source *src = NULL;
    const struct gs_snapshot *snap;
    unsigned char *sel = NULL;
    struct gs_err err = {0};
    int status, rc;

    for (int i = 1; i < argc; i++) {
        const char *w = argv[i];

        if (strcmp(w, "-h") == 0 || strcmp(w, "--help") == 0) {
            printf(nvlink_help, prog);
            return 0;
        } else if (strcmp(w, "-s") == 0 || strcmp(w, "--status") == 0) {
            status_opt = 1;
        } else if ((strcmp(w, "-i") == 0 || strcmp(w, "--id") == 0) && i + 1 < argc) {
            ids = argv[++i];
        } else if (strncmp(w, "--id=", 5) == 0) {
            ids = w + 5;
        } else {
            printf("nvlink %s is not supported by gpuscope: it answers nvlink -s only. Use the "
                   "driver's nvidia-smi for it.\n",
                   w);
            return gs_rc_exit_code(GS_ENOTSUP);
        }
    }
    if (!status_opt) {
        printf(nvlink_help, prog);
        return 0;
    }
    status = gs_smi_open(&src, GS_WANT_MIG | GS_WANT_STATIC);
    if (status != 0)
        goto done;
    snap = gs_source_snapshot(src);
    sel = calloc(snap->n_gpus ? snap->n_gpus : 1, 1);
    if (!sel) {
        status = gs_smi_fail(GS_ENOMEM, "out of memory");
        goto done;
    }
    rc = gs_query_select(ids, snap, sel, &err);
    if (rc < 0) {
        status = gs_smi_fail(rc, err.msg);
        goto done;
    }
    rc = gs_smi_nvlink_status(stdout, snap, sel);
    if (fflush(stdout) != 0)
        rc = GS_EIO;
    status = rc == GS_OK ? 0 : gs_smi_fail(rc, "cannot write the output");
done:
    free(sel);
    gs_source_close(src);
    return status;
}
