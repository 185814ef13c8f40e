/*
 * attrib.h - which GPUs of a snapshot belong to a training run: one rule for `gpuscope run`
 * (src/cli/run/run.c), the in-process core (src/run/client.c) and the agent (src/agent/runs.c).
 *
 * A GPU is the run's when
 *  - a process of the run, or a descendant of one, is in its process lists (NVML's compute,
 *    graphics and MPS lists; ancestry from /proc/PID/stat through src/backend/procfs.c), or
 *  - a training process announced its CUDA device in its hello ("devices": CUDA indices) and
 *    that index maps to the GPU through the process's CUDA_VISIBLE_DEVICES: unset or empty,
 *    index k is NVML GPU k; else the k-th entry, an NVML index ("2"), a GPU UUID or a unique
 *    prefix of one ("GPU-8a3c..."), a MIG device UUID ("MIG-...", the GPU that holds it:
 *    the snapshot must have GS_WANT_MIG) or the old form "MIG-GPU-<uuid>/<gi>/<ci>". As CUDA
 *    does, the list ends at its first entry that names no GPU.
 * Without a known CUDA_VISIBLE_DEVICES (the agent could not read the sender's environment)
 * announced devices are not used: a guess would name the wrong GPU.
 *
 * The ancestry of a snapshot's processes is read once (gs_attrib_tree_read) and matched
 * against any number of runs, so the agent pays one walk per GPU process and cycle.
 * Single-threaded: a tree belongs to its caller's thread.
 */
#ifndef GS_RUN_ATTRIB_H
#define GS_RUN_ATTRIB_H

#include <stdint.h>
#include <sys/types.h>

struct gs_snapshot;

/* Ancestors followed per process (a deeper descendant is not attributed). */
#define GS_ATTRIB_DEPTH 16

/* One run's side of the question. */
struct gs_attrib {
    const pid_t *pids; /* the run's processes: the command, the ranks (SO_PEERCRED), getpid() */
    unsigned n_pids;
    int descendants;        /* 1: their descendants too (needs a tree) */
    const int32_t *devices; /* CUDA indices announced (hello "devices"); < 0 ignored */
    unsigned n_devices;
    int cvd_known;   /* 0: the process's CUDA_VISIBLE_DEVICES is unknown: devices unused */
    const char *cvd; /* its value; NULL or "": unset */
};

/* The ancestry of a snapshot's processes (their order). Zero-initialise; gs_attrib_tree_free
 * releases it. */
struct gs_attrib_tree {
    unsigned n, cap;
    pid_t (*anc)[GS_ATTRIB_DEPTH]; /* parent first; 0 ends a chain */
};

/* Reads the ancestors of every process of snap from proc_root (NULL: "/proc"). A process
 * that is gone has none. Returns 0, or -1 when out of memory (the tree is then empty). */
int gs_attrib_tree_read(struct gs_attrib_tree *t, const struct gs_snapshot *snap,
                        const char *proc_root);
void gs_attrib_tree_free(struct gs_attrib_tree *t);

/* proc_in_run[i] = 1 for each process i of snap (snap->n_procs entries) that is the run's: its
 * pids and, with descendants, theirs; 0 for the others (another tenant of a shared GPU). */
void gs_attrib_procs(const struct gs_attrib *run, const struct gs_attrib_tree *tree,
                     const struct gs_snapshot *snap, unsigned char *proc_in_run);

/* Sets in_run[g] = 1 (snap->n_gpus entries, not cleared first) for each GPU of the run; tree
 * is the one read for snap (NULL: no descendants). Returns how many GPUs it set. */
unsigned gs_attrib_mark(const struct gs_attrib *run, const struct gs_attrib_tree *tree,
                        const struct gs_snapshot *snap, unsigned char *in_run);

/* 1 when snap->procs[i] is one of run's processes (or, with descendants and tree, a
 * descendant of one): the per-process figures of the run's share of a GPU. */
int gs_attrib_proc_ours(const struct gs_attrib *run, const struct gs_attrib_tree *tree,
                        const struct gs_snapshot *snap, unsigned i);

/* The snapshot index of CUDA device `cuda` under cvd (NULL or "": unset), or -1. */
int gs_attrib_cuda_gpu(const struct gs_snapshot *snap, const char *cvd, int cuda);

/* Whether cvd names MIG devices (the sampler must then be asked for GS_WANT_MIG). */
int gs_attrib_cvd_mig(const char *cvd);

#endif
