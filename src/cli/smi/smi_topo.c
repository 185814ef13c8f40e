/*
 * nvidia-smi topo -m: the matrix of how each pair of GPUs is connected (NV# for # NVLinks
 * between them, else the closest common PCIe ancestor: PIX, PXB, PHB, NODE, SYS), each GPU's
 * CPU and NUMA affinity and its memory's own NUMA node, then the legend, in nvidia-smi's bytes
 * (tab-separated cells, the header underlined with ECMA-48 SGR 4 as nvidia-smi writes it even
 * into a pipe, unless NO_COLOR is set; shared/reference/nvidia-smi-captures). Read from NVML when
 * asked (gs_source_topology); NIC rows are not printed: NVML does not enumerate network devices.
 */
#include "cli/smi/smi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/source.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_sampler.h"

static const char topo_help[] =
    "\n"
    "    topo -- Display topological information about the system.\n"
    "\n"
    "    Usage: %s topo [options]\n"
    "\n"
    "    Options include:\n"
    "    [-m | --matrix]: Display the GPUDirect communication matrix for the system.\n"
    "    [-h | --help]:   Display help information\n"
    "\n"
    "    gpuscope answers -m only; the driver's nvidia-smi has the other options (-mp, -p2p,\n"
    "    -c, -n, -p), and prints NIC rows, which NVML does not enumerate.\n"
    "\n";

static const char legend[] = "Legend:\n"
                             "\n"
                             "  X    = Self\n"
                             "  SYS  = Connection traversing PCIe as well as the SMP interconnect "
                             "between NUMA nodes (e.g., QPI/UPI)\n"
                             "  NODE = Connection traversing PCIe as well as the interconnect "
                             "between PCIe Host Bridges within a NUMA node\n"
                             "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge "
                             "(typically the CPU)\n"
                             "  PXB  = Connection traversing multiple PCIe bridges (without "
                             "traversing the PCIe Host Bridge)\n"
                             "  PIX  = Connection traversing at most a single PCIe bridge\n"
                             "  NV#  = Connection traversing a bonded set of # NVLinks\n";

/* NVML's level (nvmlGpuTopologyLevel_t) in the legend's words. INTERNAL (two GPUs of one
 * board, whose bridge is on the board) reads as PIX, the single bridge it is. */
static const char *level_name(unsigned level)
{
    switch (level) {
    case 0:
    case 10:
        return "PIX";
    case 20:
        return "PXB";
    case 30:
        return "PHB";
    case 40:
        return "NODE";
    case 50:
        return "SYS";
    default:
        return "N/A";
    }
}

int gs_smi_topo_matrix(FILE *out, const struct gs_topo *t, unsigned n, int underline)
{
    fputs(underline ? "\t\033[4m" : "\t", out);
    for (unsigned j = 0; j < n; j++)
        fprintf(out, "GPU%u\t", j);
    fputs(underline ? "CPU Affinity\tNUMA Affinity\tGPU NUMA ID\033[0m\n"
                    : "CPU Affinity\tNUMA Affinity\tGPU NUMA ID\n",
          out);
    for (unsigned i = 0; i < n; i++) {
        const struct gs_topo *r = &t[i];

        fprintf(out, "GPU%u\t", i);
        for (unsigned j = 0; j < n; j++) {
            if (j == i)
                fputs(" X \t", out);
            else if (j < GS_TOPO_GPUS && r->nvlinks[j] > 0)
                fprintf(out, "NV%u\t", r->nvlinks[j]);
            else if (j < GS_TOPO_GPUS && r->level_st[j] == GS_ST_OK)
                fprintf(out, "%s\t", level_name(r->level[j]));
            else
                fputs("N/A\t", out);
        }
        fprintf(out, "%s\t%s\t\t", r->cpus_st == GS_ST_OK ? r->cpus : "N/A",
                r->numa_st == GS_ST_OK ? r->numa : "N/A");
        if (r->gpu_numa_st == GS_ST_OK)
            fprintf(out, "%u\n", r->gpu_numa);
        else
            fputs("N/A\n", out);
    }
    fputs("\n", out);
    fputs(legend, out);
    return ferror(out) ? GS_EIO : GS_OK;
}

int gs_smi_topo(int argc, char **argv, const char *prog)
{
    static const unsigned char none_m[GS_M__COUNT], none_t[GS_T__COUNT];
    const struct gs_sampler_opts so = {.need_metrics = none_m, .need_texts = none_t};
    struct gs_source *src = NULL;
    struct gs_topo *t = NULL;
    struct gs_err err = {0};
    int matrix = 0, status, rc = GS_OK;
    unsigned n;

    for (int i = 1; i < argc; i++) {
        const char *w = argv[i];

        if (strcmp(w, "-h") == 0 || strcmp(w, "--help") == 0) {
            printf(topo_help, prog);
            return 0;
        } else if (strcmp(w, "-m") == 0 || strcmp(w, "--matrix") == 0) {
            matrix = 1;
        } else {
            printf("topo %s is not supported by gpuscope: it answers topo -m only. Use the "
                   "driver's nvidia-smi for it.\n",
                   w);
            return gs_rc_exit_code(GS_ENOTSUP);
        }
    }
    if (!matrix) {
        printf(topo_help, prog);
        return 0;
    }
    /* the matrix is read through gs_source_topology: no reading of the sample is printed */
    status = gs_smi_open(&src, 0, &so);
    if (status != 0)
        goto done;
    n = gs_source_gpu_count(src);
    if (n > GS_TOPO_GPUS)
        n = GS_TOPO_GPUS;
    t = calloc(n ? n : 1, sizeof *t);
    if (!t) {
        status = gs_smi_fail(GS_ENOMEM, "out of memory");
        goto done;
    }
    /* one answer: each GPU's links read once; the links' capabilities (nvlink -c) not read */
    rc = gs_source_topology(src, NULL, GS_TOPO_MATRIX, t, n, &err);
    if (rc != GS_OK) {
        status = gs_smi_fail(rc, err.msg);
        goto done;
    }
    {
        const char *nc = getenv("NO_COLOR"); /* https://no-color.org: no underline either */
        rc = gs_smi_topo_matrix(stdout, t, n, !(nc && *nc));
    }
    if (fflush(stdout) != 0)
        rc = GS_EIO;
    status = rc == GS_OK ? 0 : gs_smi_fail(rc, "cannot write the output");
done:
    free(t);
    gs_source_close(src);
    return status;
}
