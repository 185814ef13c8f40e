/*
 * attrib.c - which GPUs belong to a run (contract in attrib.h): the process tree from
 * procfs, the hello's CUDA devices through CUDA_VISIBLE_DEVICES (indices, GPU UUIDs and
 * their prefixes, MIG UUIDs), one rule for every run aggregate.
 */
#include "run/attrib.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "backend/procfs.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"

int gs_attrib_tree_read(struct gs_attrib_tree *t, const struct gs_snapshot *snap,
                        const char *proc_root)
{
    t->n = 0;
    if (snap->n_procs > t->cap) {
        void *p = realloc(t->anc, (size_t)snap->n_procs * sizeof *t->anc);
        if (!p)
            return -1;
        t->anc = p;
        t->cap = snap->n_procs;
    }
    for (unsigned i = 0; i < snap->n_procs; i++) {
        unsigned pid = snap->procs[i].pid, ppid, d = 0;

        memset(t->anc[i], 0, sizeof t->anc[i]);
        /* A process listed twice (compute and graphics) has the same ancestors. */
        for (unsigned j = 0; j < i; j++)
            if (snap->procs[j].pid == pid) {
                memcpy(t->anc[i], t->anc[j], sizeof t->anc[i]);
                d = GS_ATTRIB_DEPTH;
                break;
            }
        while (d < GS_ATTRIB_DEPTH && pid > 1 &&
               gs_procfs_read_ppid(proc_root, pid, &ppid) == GS_OK && ppid > 0) {
            t->anc[i][d++] = (pid_t)ppid;
            pid = ppid;
        }
    }
    t->n = snap->n_procs;
    return 0;
}

void gs_attrib_tree_free(struct gs_attrib_tree *t)
{
    free(t->anc);
    memset(t, 0, sizeof *t);
}

static int has_pid(const struct gs_attrib *run, pid_t pid)
{
    for (unsigned k = 0; k < run->n_pids; k++)
        if (run->pids[k] == pid && pid > 0)
            return 1;
    return 0;
}

/* The GPU whose UUID (or one of whose MIG devices' UUIDs, mig set) starts with the len bytes
 * at id; -1 when none or more than one does (CUDA takes a unique prefix only). */
static int gpu_by_uuid(const struct gs_snapshot *snap, const char *id, size_t len, int mig)
{
    int found = -1;

    if (len == 0)
        return -1;
    for (unsigned g = 0; g < snap->n_gpus; g++) {
        const struct gs_gpu *gpu = &snap->gpus[g];
        int hit = 0;

        if (!mig)
            hit =
                strlen(gpu->text[GS_T_UUID]) >= len && strncmp(gpu->text[GS_T_UUID], id, len) == 0;
        for (unsigned k = 0; mig && k < gpu->n_mig && k < GS_MIG_MAX && !hit; k++)
            hit = strlen(gpu->mig[k].uuid) >= len && strncmp(gpu->mig[k].uuid, id, len) == 0;
        if (hit) {
            if (found >= 0)
                return -1;
            found = (int)g;
        }
    }
    return found;
}

/* The GPU one CUDA_VISIBLE_DEVICES entry names (len bytes at e, spaces trimmed), or -1. */
static int entry_gpu(const struct gs_snapshot *snap, const char *e, size_t len)
{
    while (len && isspace((unsigned char)*e))
        e++, len--;
    while (len && isspace((unsigned char)e[len - 1]))
        len--;
    if (len == 0)
        return -1;
    if (isdigit((unsigned char)e[0])) {
        long v = 0;
        for (size_t i = 0; i < len; i++) {
            if (!isdigit((unsigned char)e[i]) || v > 100000)
                return -1;
            v = v * 10 + (e[i] - '0');
        }
        return v < (long)snap->n_gpus ? (int)v : -1;
    }
    if (len > 8 && strncmp(e, "MIG-GPU-", 8) == 0) { /* MIG-GPU-<uuid>/<gi>/<ci> (CUDA 10/11) */
        const char *slash = memchr(e, '/', len);
        return gpu_by_uuid(snap, e + 4, slash ? (size_t)(slash - e - 4) : len - 4, 0);
    }
    if (len > 4 && strncmp(e, "MIG-", 4) == 0)
        return gpu_by_uuid(snap, e, len, 1);
    if (len > 4 && strncmp(e, "GPU-", 4) == 0)
        return gpu_by_uuid(snap, e, len, 0);
    return -1;
}

int gs_attrib_cuda_gpu(const struct gs_snapshot *snap, const char *cvd, int cuda)
{
    int k = 0;

    if (cuda < 0)
        return -1;
    if (!cvd || !cvd[0])
        return cuda < (int)snap->n_gpus ? cuda : -1;
    for (const char *p = cvd;;) {
        size_t len = strcspn(p, ",");
        int g = entry_gpu(snap, p, len);

        if (g < 0)
            return -1; /* CUDA ignores this entry and every later one */
        if (k++ == cuda)
            return g;
        if (p[len] != ',')
            return -1;
        p += len + 1;
    }
}

int gs_attrib_cvd_mig(const char *cvd)
{
    return cvd && strstr(cvd, "MIG-") != NULL;
}

int gs_attrib_proc_ours(const struct gs_attrib *run, const struct gs_attrib_tree *tree,
                        const struct gs_snapshot *snap, unsigned i)
{
    int ours;

    if (i >= snap->n_procs)
        return 0;
    ours = has_pid(run, (pid_t)snap->procs[i].pid);
    if (!ours && run->descendants && tree && i < tree->n)
        for (unsigned d = 0; d < GS_ATTRIB_DEPTH && tree->anc[i][d] && !ours; d++)
            ours = has_pid(run, tree->anc[i][d]);
    return ours;
}

void gs_attrib_procs(const struct gs_attrib *run, const struct gs_attrib_tree *tree,
                     const struct gs_snapshot *snap, unsigned char *proc_in_run)
{
    for (unsigned i = 0; i < snap->n_procs; i++)
        proc_in_run[i] = (unsigned char)gs_attrib_proc_ours(run, tree, snap, i);
}

unsigned gs_attrib_mark(const struct gs_attrib *run, const struct gs_attrib_tree *tree,
                        const struct gs_snapshot *snap, unsigned char *in_run)
{
    unsigned set = 0;

    for (unsigned i = 0; i < snap->n_procs; i++) {
        const struct gs_proc *p = &snap->procs[i];
        int ours;

        if (p->gpu >= snap->n_gpus)
            continue;
        ours = gs_attrib_proc_ours(run, tree, snap, i);
        if (ours && !in_run[p->gpu]) {
            in_run[p->gpu] = 1;
            set++;
        }
    }
    for (unsigned d = 0; run->cvd_known && d < run->n_devices; d++) {
        int g = gs_attrib_cuda_gpu(snap, run->cvd, run->devices[d]);

        if (g >= 0 && !in_run[g]) {
            in_run[g] = 1;
            set++;
        }
    }
    return set;
}
