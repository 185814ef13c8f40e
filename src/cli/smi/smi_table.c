/*
 * nvidia-smi's default table (what `nvidia-smi` with no option prints) and -L, column for column
 * as the 590/595 drivers print them (shared/reference/nvidia-smi-captures): the 91-character
 * GPU box, the MIG devices box when a GPU is in MIG mode, and the processes box.
 *
 * Every cell comes from the snapshot. What the model does not carry (per-MIG BAR1 usage, SM and
 * engine counts of a MIG device) prints "N/A", as nvidia-smi does when NVML cannot answer.
 */
#include "cli/smi/smi.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpuscope/gs_err.h"

#define RULE_GPU                                                                                   \
    "+-----------------------------------------+------------------------+----------------------+"  \
    "\n"
#define RULE_ALL                                                                                   \
    "+-----------------------------------------------------------------------------------------+"  \
    "\n"
#define RULE_MIG                                                                                   \
    "+------------------+----------------------------------+-----------+-----------------------+"  \
    "\n"
#define NA "N/A"
#define NO_MIG 0xFFFFFFFFu

static int has(const struct gs_gpu *g, enum gs_metric m)
{
    return g->st[m] == GS_ST_OK;
}

static long lv(const struct gs_gpu *g, enum gs_metric m)
{
    return lround(g->v[m]);
}

/* Names longer than the column keep 24 characters and "...", as nvidia-smi cuts them. */
static void cut_name(const char *name, char *out, size_t n)
{
    if (strlen(name) > 27)
        snprintf(out, n, "%.24s...", name);
    else
        snprintf(out, n, "%s", name);
}

static const char *compute_mode(const struct gs_gpu *g)
{
    if (!has(g, GS_M_COMPUTE_MODE))
        return NA;
    switch (lv(g, GS_M_COMPUTE_MODE)) {
    case 0:
        return "Default";
    case 1:
        return "E. Thread";
    case 2:
        return "Prohibited";
    case 3:
        return "E. Process";
    }
    return NA;
}

static int mig_on(const struct gs_gpu *g)
{
    return has(g, GS_M_MIG_MODE) && lv(g, GS_M_MIG_MODE) != 0;
}

static void gpu_rows(FILE *out, const struct gs_snapshot *s, const struct gs_gpu *g)
{
    char name[40], fan[16], temp[16], perf[16], pwr[16], cap[16], used[24], total[24], util[16];
    char ecc[24], persist[8], disp[8];
    const char *bus = gs_gpu_has_text(g, GS_T_PCI_BUS_ID) ? g->text[GS_T_PCI_BUS_ID] : NA;

    (void)s;
    cut_name(gs_gpu_has_text(g, GS_T_NAME) ? g->text[GS_T_NAME] : NA, name, sizeof name);
    snprintf(persist, sizeof persist, "%s",
             !has(g, GS_M_PERSISTENCE) ? NA
             : lv(g, GS_M_PERSISTENCE) ? "On"
                                       : "Off");
    snprintf(disp, sizeof disp, "%s",
             !has(g, GS_M_DISPLAY_ACTIVE) ? NA
             : lv(g, GS_M_DISPLAY_ACTIVE) ? "On"
                                          : "Off");
    /* In MIG mode the error counters belong to the instances: the column shows the ECC mode. */
    if (has(g, GS_M_ECC_MODE) && lv(g, GS_M_ECC_MODE) == 0)
        snprintf(ecc, sizeof ecc, "Off");
    else if (mig_on(g) && has(g, GS_M_ECC_MODE))
        snprintf(ecc, sizeof ecc, "On");
    else if (has(g, GS_M_ECC_MODE) && has(g, GS_M_ECC_UNCORR_VOL))
        snprintf(ecc, sizeof ecc, "%ld", lv(g, GS_M_ECC_UNCORR_VOL));
    else
        snprintf(ecc, sizeof ecc, NA);
    if (g->lost) {
        /* nvidia-smi marks a GPU that fell off the bus with ERR! in its cells */
        fprintf(out, "|%4u  %-27s    %-4s|   %-16s%4s |%21s |\n", g->index, name, "ERR!", bus,
                "ERR!", "ERR!");
        fprintf(out, "|%4s%6s%6s%16s / %5s |%11s / %9s |%8s%13s |\n", "ERR!", "ERR!", "ERR!",
                "ERR!", "ERR!", "ERR!", "ERR!", "ERR!", "ERR!");
        fprintf(out, "|%41s|%24s|%21s |\n", "", "", "ERR!");
        return;
    }
    fprintf(out, "|%4u  %-27s    %-4s|   %-16s %3s |%21s |\n", g->index, name, persist, bus, disp,
            ecc);
    snprintf(fan, sizeof fan, has(g, GS_M_FAN) ? "%ld%%" : NA, lround(g->v[GS_M_FAN] * 100.0));
    snprintf(temp, sizeof temp, has(g, GS_M_TEMP_GPU) ? "%ldC" : NA, lv(g, GS_M_TEMP_GPU));
    snprintf(perf, sizeof perf, has(g, GS_M_PSTATE) ? "P%ld" : NA, lv(g, GS_M_PSTATE));
    /* whole watts, cut as nvidia-smi cuts milliwatts */
    snprintf(pwr, sizeof pwr, has(g, GS_M_POWER_DRAW) ? "%ldW" : NA,
             (long)floor(g->v[GS_M_POWER_DRAW] + 1e-9));
    if (has(g, GS_M_POWER_ENFORCED_LIMIT))
        snprintf(cap, sizeof cap, "%ldW", (long)floor(g->v[GS_M_POWER_ENFORCED_LIMIT] + 1e-9));
    else if (has(g, GS_M_POWER_LIMIT))
        snprintf(cap, sizeof cap, "%ldW", (long)floor(g->v[GS_M_POWER_LIMIT] + 1e-9));
    else
        snprintf(cap, sizeof cap, NA);
    snprintf(used, sizeof used, has(g, GS_M_MEM_USED) ? "%lluMiB" : NA,
             gs_smi_mib((uint64_t)llround(g->v[GS_M_MEM_USED])));
    snprintf(total, sizeof total, has(g, GS_M_MEM_TOTAL) ? "%lluMiB" : NA,
             gs_smi_mib((uint64_t)llround(g->v[GS_M_MEM_TOTAL])));
    if (mig_on(g) || !has(g, GS_M_UTIL_GPU))
        snprintf(util, sizeof util, NA);
    else
        snprintf(util, sizeof util, "%ld%%", lround(g->v[GS_M_UTIL_GPU] * 100.0));
    fprintf(out, "|%4s%6s%6s%16s / %5s |%11s / %9s |%8s%13s |\n", fan, temp, perf, pwr, cap, used,
            total, util, compute_mode(g));
    fprintf(out, "|%41s|%24s|%21s |\n", "", "",
            !has(g, GS_M_MIG_MODE) ? NA
            : lv(g, GS_M_MIG_MODE) ? "Enabled"
                                   : "Disabled");
}

static void mig_rows(FILE *out, const struct gs_gpu *g)
{
    for (unsigned k = 0; k < g->n_mig; k++) {
        const struct gs_mig *m = &g->mig[k];
        char used[24], total[24], b1u[24], b1t[24], n[6][16], ecc[24];
        const unsigned cnt[6] = {m->sm_count,  m->ce_count,  m->enc_count,
                                 m->dec_count, m->ofa_count, m->jpg_count};

        if (m->mem_st == GS_ST_OK) {
            snprintf(used, sizeof used, "%lluMiB", gs_smi_mib(m->mem_used_bytes));
            snprintf(total, sizeof total, "%lluMiB", gs_smi_mib(m->mem_total_bytes));
        } else {
            snprintf(used, sizeof used, NA);
            snprintf(total, sizeof total, NA);
        }
        if (m->bar1_st == GS_ST_OK) {
            snprintf(b1u, sizeof b1u, "%lluMiB", gs_smi_mib(m->bar1_used_bytes));
            snprintf(b1t, sizeof b1t, "%lluMiB", gs_smi_mib(m->bar1_total_bytes));
        } else {
            snprintf(b1u, sizeof b1u, NA);
            snprintf(b1t, sizeof b1t, NA);
        }
        for (int i = 0; i < 6; i++)
            snprintf(n[i], sizeof n[i], m->attr_st == GS_ST_OK ? "%u" : NA, cnt[i]);
        /* the instance's volatile uncorrectable (SRAM) ECC count */
        snprintf(ecc, sizeof ecc, m->sram_unc_st == GS_ST_OK ? "%llu" : NA,
                 (unsigned long long)m->sram_unc_vol);
        fprintf(out, "|%3u%5u%4u%4u  |%19s / %8s    | %-3s%6s |%3s%4s%5s%5s%5s |\n", g->index,
                m->gi_id, m->ci_id, m->index, used, total, n[0], ecc, n[1], n[2], n[3], n[4], n[5]);
        fprintf(out, "|                  |%19s / %8s    |           |                       |\n",
                b1u, b1t);
        fputs(RULE_MIG, out);
    }
}

static int by_pid(const void *a, const void *b)
{
    const struct gs_proc *x = *(const struct gs_proc *const *)a;
    const struct gs_proc *y = *(const struct gs_proc *const *)b;

    if (x->gpu != y->gpu)
        return x->gpu < y->gpu ? -1 : 1;
    return x->pid < y->pid ? -1 : x->pid > y->pid;
}

static void proc_name(const struct gs_proc *p, char *out, size_t n)
{
    char full[GS_PROC_CMD_LEN];
    size_t len;

    if (p->nvml_name_st == GS_ST_OK)
        snprintf(full, sizeof full, "%s", p->nvml_name);
    else if (p->host_st == GS_ST_OK && p->cmdline[0] && p->cmdline[0] != ' ')
        snprintf(full, sizeof full, "%.*s", (int)strcspn(p->cmdline, " "), p->cmdline);
    else if (p->name[0])
        snprintf(full, sizeof full, "%s", p->name);
    else
        snprintf(full, sizeof full, NA);
    len = strlen(full);
    /* a long path keeps its end, where the program's name is */
    if (len > 37)
        snprintf(out, n, "...%s", full + len - 34);
    else
        snprintf(out, n, "%s", full);
}

static void id_cell(unsigned id, char *out, size_t n)
{
    if (id == NO_MIG)
        snprintf(out, n, NA);
    else
        snprintf(out, n, "%2u ", id);
}

static void proc_rows(FILE *out, const struct gs_snapshot *s, const unsigned char *sel)
{
    const struct gs_proc **list = NULL;
    unsigned n = 0;

    if (s->n_procs)
        list = malloc(s->n_procs * sizeof *list);
    for (unsigned i = 0; list && i < s->n_procs; i++)
        if (s->procs[i].gpu < s->n_gpus && (!sel || sel[s->procs[i].gpu]))
            list[n++] = &s->procs[i];
    if (n == 0)
        fprintf(out, "|  %-87s|\n", "No running processes found");
    if (n)
        qsort(list, n, sizeof *list, by_pid);
    for (unsigned i = 0; i < n; i++) {
        const struct gs_proc *p = list[i];
        char gi[16], ci[16], name[48], mem[24];
        const char *type = (p->type & GS_PROC_COMPUTE) && (p->type & GS_PROC_GRAPHICS) ? "C+G"
                           : (p->type & GS_PROC_MPS)                                   ? "M"
                           : (p->type & GS_PROC_COMPUTE)                               ? "C"
                                                                                       : "G";

        id_cell(p->gi_id, gi, sizeof gi);
        id_cell(p->ci_id, ci, sizeof ci);
        proc_name(p, name, sizeof name);
        snprintf(mem, sizeof mem, p->mem_st == GS_ST_OK ? "%lluMiB" : NA,
                 gs_smi_mib(p->gpu_mem_bytes));
        fprintf(out, "|%5u   %3s  %3s%16u%7s   %-37s %8s |\n", s->gpus[p->gpu].index, gi, ci,
                p->pid, type, name, mem);
    }
    free(list);
}

int gs_smi_table(FILE *out, const struct gs_snapshot *s, const unsigned char *sel)
{
    const struct gs_system *y = &s->sys;
    char when[64], cuda[16];
    int any_mig = 0;

    gs_smi_ctime(s->t_real, when, sizeof when);
    fprintf(out, "%s       \n", when);
    fputs(RULE_ALL, out);
    if (y->cuda_st == GS_ST_OK)
        snprintf(cuda, sizeof cuda, "%d.%d", y->cuda_version / 1000, (y->cuda_version % 1000) / 10);
    else
        snprintf(cuda, sizeof cuda, NA);
    fprintf(out,
            gs_smi_layout(s)->kmd ? "| NVIDIA-SMI %-23sKMD Version: %-14sCUDA UMD Version: %-9s|\n"
                                  : "| NVIDIA-SMI %-23sDriver Version: %-15sCUDA Version: %-9s|\n",
            y->driver_st == GS_ST_OK ? y->driver_version : NA,
            y->driver_st == GS_ST_OK ? y->driver_version : NA, cuda);
    fputs(RULE_GPU, out);
    fputs("| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. "
          "ECC |\n"
          "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute "
          "M. |\n"
          "|                                         |                        |               MIG "
          "M. |\n"
          "|=========================================+========================+=================="
          "====|\n",
          out);
    for (unsigned i = 0; i < s->n_gpus; i++) {
        if (sel && !sel[i])
            continue;
        gpu_rows(out, s, &s->gpus[i]);
        fputs(RULE_GPU, out);
        any_mig |= mig_on(&s->gpus[i]) && s->gpus[i].n_mig > 0;
    }
    if (any_mig) {
        fputs("\n" RULE_ALL, out);
        fprintf(out, "| %-88s|\n", "MIG devices:");
        fputs(RULE_MIG, out);
        fputs("| GPU  GI  CI  MIG |              Shared Memory-Usage |        Vol|        Shared  "
              "       |\n"
              "|      ID  ID  Dev |                Shared BAR1-Usage | SM     Unc| CE ENC  DEC  "
              "OFA  JPG |\n"
              "|                  |                                  |        ECC|                "
              "       |\n"
              "|==================+==================================+===========+================"
              "=======|\n",
              out);
        for (unsigned i = 0; i < s->n_gpus; i++)
            if ((!sel || sel[i]) && mig_on(&s->gpus[i]))
                mig_rows(out, &s->gpus[i]);
    }
    fputs("\n" RULE_ALL, out);
    fprintf(out, "| %-88s|\n", "Processes:");
    fputs("|  GPU   GI   CI              PID   Type   Process name                        GPU "
          "Memory |\n"
          "|        ID   ID                                                               Usage "
          "     |\n"
          "|=================================================================================="
          "=======|\n",
          out);
    proc_rows(out, s, sel);
    fputs(RULE_ALL, out);
    return ferror(out) ? GS_EIO : GS_OK;
}

void gs_smi_table_need(unsigned char *m, unsigned char *t)
{
    /* gpu_rows' cells; the MIG devices and processes come with their want bits */
    static const enum gs_metric ms[] = {
        GS_M_PERSISTENCE,  GS_M_DISPLAY_ACTIVE,
        GS_M_ECC_MODE,     GS_M_ECC_UNCORR_VOL,
        GS_M_MIG_MODE,     GS_M_FAN,
        GS_M_TEMP_GPU,     GS_M_PSTATE,
        GS_M_POWER_DRAW,   GS_M_POWER_ENFORCED_LIMIT,
        GS_M_POWER_LIMIT,  GS_M_MEM_USED,
        GS_M_MEM_TOTAL,    GS_M_UTIL_GPU,
        GS_M_COMPUTE_MODE,
    };

    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
        m[ms[i]] = 1;
    t[GS_T_NAME] = t[GS_T_PCI_BUS_ID] = 1;
}

void gs_smi_list_need(unsigned char *m, unsigned char *t)
{
    m[GS_M_MIG_MODE] = 1;
    t[GS_T_NAME] = t[GS_T_UUID] = 1;
}

int gs_smi_list(FILE *out, const struct gs_snapshot *s, const unsigned char *sel)
{
    for (unsigned i = 0; i < s->n_gpus; i++) {
        const struct gs_gpu *g = &s->gpus[i];

        if (sel && !sel[i])
            continue;
        fprintf(out, "GPU %u: %s (UUID: %s)\n", g->index,
                gs_gpu_has_text(g, GS_T_NAME) ? g->text[GS_T_NAME] : NA,
                gs_gpu_has_text(g, GS_T_UUID) ? g->text[GS_T_UUID] : NA);
        for (unsigned k = 0; mig_on(g) && k < g->n_mig; k++) {
            const struct gs_mig *m = &g->mig[k];
            const char *prof = strstr(m->name, "MIG ");

            prof = prof ? prof + 4 : m->name[0] ? m->name : NA;
            fprintf(out, "  MIG %-12sDevice %2u: (UUID: %s)\n", prof, m->index, m->uuid);
        }
    }
    return ferror(out) ? GS_EIO : GS_OK;
}
