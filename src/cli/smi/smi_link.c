/*
 * nvidia-smi nvlink -s: each GPU's NVLinks and their speed, from the model's per-link state
 * (nvmlDeviceGetNvLinkState) and speed (the NVLink speed field values), in nvidia-smi's words
 * for a GPU without NVLink, one whose links are all down, and one in MIG mode; and nvlink -c: each
 * active link's capabilities (nvmlDeviceGetNvLinkCapability, read when asked through
 * gs_source_topology).
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
    "    [-c | --capabilities]: Display link capabilities.\n"
    "\n"
    "    gpuscope answers -s and -c; the driver's nvidia-smi has the other options (counters,\n"
    "    error counters, remote device types).\n"
    "\n";

/* The GPU's line, then 0 when its links are to be listed, or 1 after nvidia-smi's message for a
 * GPU in MIG mode, without NVLink, or with every link down. */
static int gpu_head(FILE *out, const struct gs_gpu *g)
{
    unsigned active = 0;

    fprintf(out, "GPU %u: %s (UUID: %s)\n", g->index,
            gs_gpu_has_text(g, GS_T_NAME) ? g->text[GS_T_NAME] : "N/A",
            gs_gpu_has_text(g, GS_T_UUID) ? g->text[GS_T_UUID] : "N/A");
    if (g->st[GS_M_MIG_MODE] == GS_ST_OK && g->v[GS_M_MIG_MODE] != 0) {
        fputs("Nvlink queries are not supported for Devices in MIG mode\n", out);
        return 1;
    }
    if (g->n_nvlink == 0) {
        fputs("Device does not have or support Nvlink\n", out);
        return 1;
    }
    for (unsigned l = 0; l < g->n_nvlink && l < GS_NVLINK_MAX; l++)
        active += g->nvlink[l].active != 0;
    if (active == 0) {
        fputs("NVML: Unable to retrieve Nvlink information as all links are inActive\n", out);
        return 1;
    }
    return 0;
}

/* nvidia-smi's words for NVML's capabilities, in NVML's order (nvmlNvLinkCapability_t). */
static const char *const cap_words[] = {
    "P2P is supported",      "Access to system memory supported",
    "P2P atomics supported", "System memory atomics supported",
    "SLI is supported",      "Link is supported",
};

int gs_smi_nvlink_caps(FILE *out, const struct gs_snapshot *s, const unsigned char *sel,
                       const struct gs_topo *t)
{
    for (unsigned i = 0; i < s->n_gpus; i++) {
        const struct gs_topo *k = &t[i];

        if (sel && !sel[i])
            continue;
        if (gpu_head(out, &s->gpus[i]))
            continue;
        for (unsigned l = 0; l < k->n_links && l < GS_NVLINK_MAX; l++) {
            if (!k->link_active[l])
                continue;
            for (unsigned c = 0; c < sizeof cap_words / sizeof cap_words[0]; c++)
                if (k->caps_read[l] >> c & 1u)
                    fprintf(out, "\t Link %u, %s: %s\n", l, cap_words[c],
                            k->caps[l] >> c & 1u ? "true" : "false");
        }
    }
    return ferror(out) ? GS_EIO : GS_OK;
}

int gs_smi_nvlink_status(FILE *out, const struct gs_snapshot *s, const unsigned char *sel)
{
    for (unsigned i = 0; i < s->n_gpus; i++) {
        const struct gs_gpu *g = &s->gpus[i];

        if (sel && !sel[i])
            continue;
        if (gpu_head(out, g))
            continue;
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

void gs_smi_nvlink_need(unsigned char *m, unsigned char *t)
{
    /* gpu_head's line and checks, the links' states and speeds (-c reads the topology) */
    m[GS_M_MIG_MODE] = m[GS_M_NVLINK_LINKS] = m[GS_M_NVLINK_LINKS_ACTIVE] = 1;
    m[GS_M_NVLINK_SPEED] = 1;
    t[GS_T_NAME] = t[GS_T_UUID] = 1;
}

int gs_smi_nvlink(int argc, char **argv, const char *prog)
{
    unsigned char need_m[GS_M__COUNT] = {0}, need_t[GS_T__COUNT] = {0};
    struct gs_sampler_opts so = {.need_metrics = need_m, .need_texts = need_t};
    const char *ids = NULL;
    int status_opt = 0, caps_opt = 0;
    struct gs_topo *topo = NULL;
    struct gs_source *src = NULL;
    const struct gs_snapshot *snap;
    unsigned char *sel = NULL, *rows = NULL;
    struct gs_err err = {0};
    int status, rc;

    for (int i = 1; i < argc; i++) {
        const char *w = argv[i];

        if (strcmp(w, "-h") == 0 || strcmp(w, "--help") == 0) {
            printf(nvlink_help, prog);
            return 0;
        } else if (strcmp(w, "-s") == 0 || strcmp(w, "--status") == 0) {
            status_opt = 1;
        } else if (strcmp(w, "-c") == 0 || strcmp(w, "--capabilities") == 0) {
            caps_opt = 1;
        } else if ((strcmp(w, "-i") == 0 || strcmp(w, "--id") == 0) && i + 1 < argc) {
            ids = argv[++i];
        } else if (strncmp(w, "--id=", 5) == 0) {
            ids = w + 5;
        } else {
            printf(
                "nvlink %s is not supported by gpuscope: it answers nvlink -s and -c only. Use the "
                "driver's nvidia-smi for it.\n",
                w);
            return gs_rc_exit_code(GS_ENOTSUP);
        }
    }
    if (!status_opt && !caps_opt) {
        printf(nvlink_help, prog);
        return 0;
    }
    gs_smi_nvlink_need(need_m, need_t);
    gs_smi_need_ids(ids, need_t);
    status = gs_smi_open(&src, GS_WANT_MIG | GS_WANT_STATIC, &so);
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
    rc = status_opt ? gs_smi_nvlink_status(stdout, snap, sel) : GS_OK;
    if (rc == GS_OK && caps_opt) {
        topo = calloc(snap->n_gpus ? snap->n_gpus : 1, sizeof *topo);
        rows = calloc(snap->n_gpus ? snap->n_gpus : 1, 1);
        if (!topo || !rows) {
            status = gs_smi_fail(GS_ENOMEM, "out of memory");
            goto done;
        }
        for (unsigned i = 0; i < snap->n_gpus; i++) /* the GPUs whose links are printed */
            rows[i] = sel[i] && snap->gpus[i].n_nvlink > 0;
        /* the links' states and capabilities, each GPU's once; not the matrix (topo -m) */
        rc = gs_source_topology(src, rows, GS_TOPO_LINK_CAPS, topo, snap->n_gpus, &err);
        if (rc != GS_OK) {
            status = gs_smi_fail(rc, err.msg);
            goto done;
        }
        rc = gs_smi_nvlink_caps(stdout, snap, sel, topo);
    }
    if (fflush(stdout) != 0)
        rc = GS_EIO;
    status = rc == GS_OK ? 0 : gs_smi_fail(rc, "cannot write the output");
done:
    free(topo);
    free(rows);
    free(sel);
    gs_source_close(src);
    return status;
}
