/*
 * The sampler: opens a backend once (for the product, NVML through dlopen) and fills
 * snapshots on demand. Front ends (quick check, query, agent) call only this API; they never
 * see NVML.
 *
 * Threads: a sampler is used by one thread at a time. It keeps state between calls (device
 * handles, the last process-utilization timestamp, previous GPM samples, per-pid CPU times),
 * so reuse one sampler for a watch loop instead of reopening it: reopening re-initialises NVML,
 * which is exactly the cost gpustat pays every refresh.
 */
#ifndef GS_SAMPLER_H
#define GS_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

#include "gpuscope/gs_model.h"

struct gs_err;
struct gs_sampler;

/* What one cycle collects. The basic readings are always collected. */
enum gs_want {
    GS_WANT_PROCS = 1u << 0,     /* process lists (pid, memory, NVML's process name) */
    GS_WANT_PROC_UTIL = 1u << 1, /* per-process SM/memory utilization */
    GS_WANT_PCIE_TPUT = 1u << 2, /* PCIe TX/RX throughput: blocks ~20 ms per direction per GPU */
    GS_WANT_GPM = 1u << 3,       /* GPM metrics, from the previous GPM sample (>= 100 ms old) */
    GS_WANT_GPM_WAIT = 1u << 4,  /* with GPM: if no earlier sample exists, take one, wait 110 ms */
    GS_WANT_HEALTH = 1u << 5,    /* ECC counters, retired pages, remapped rows, Xid events */
    GS_WANT_MIG = 1u << 6,       /* MIG devices of MIG-enabled GPUs */
    GS_WANT_STATIC = 1u << 7,    /* slow-changing fields: VBIOS, serial, limits, max clocks */
    /* Identity (name, UUID, PCI, serial, VBIOS, architecture...) is read once at open. The
     * slow fields (limits, max clocks, thresholds, ECC/persistence/compute/MIG modes, PCIe
     * maxima) are read at the first cycle and again whenever GS_WANT_STATIC is set; in other
     * cycles their last values are repeated. See docs/backend.md for the full cadence. */
    GS_WANT_PROC_HOST = 1u << 8, /* with PROCS: procfs details (user, command, CPU, container) */
    /* The driver's own utilization samples (nvmlDeviceGetSamples, ~6 a second) of every GPU
     * since the previous cycle (since open at the first): gs_snapshot_util_samples. A GPU
     * asked in the previous cycle continues from its newest sample, without gaps or repeats;
     * one whose driver keeps none (old driver, MIG) or that is lost is not asked again. */
    GS_WANT_UTIL_SAMPLES = 1u << 9,
    /* NVLink link states (nvmlDeviceGetNvLinkState, one call per link): read at a GPU's first
     * cycle, after each NVLink probe (GS_WANT_STATIC) and whenever this is set; in other
     * cycles the last states read are repeated and gs_gpu.nvlink_state_t says when they were
     * read. The data counters and the rate are read every cycle. */
    GS_WANT_NVLINK_STATE = 1u << 10,
    /* readings only nvidia-smi -q and their --query-gpu fields show, fresh at every cycle that
     * sets this (never read otherwise, so the agent's cycle does not pay for them): addressing,
     * virtualization, host vGPU, C2C and EGM modes, the SRAM ECC error status, the bank-remap
     * histogram and the NVLink fabric registration */
    GS_WANT_DETAIL = 1u << 11,
    GS_WANT_ALL = 0xFFFu,
};

struct gs_sampler_opts {
    const char *library;   /* NULL: $GPUSCOPE_NVML_LIBRARY, else "libnvidia-ml.so.1" */
    const char *proc_root; /* NULL: "/proc"; tests point it at a /proc-like tree */
    /* Pay for what you ask: when either is set, the identity, slow and basic readings of a
     * GPU are asked of the driver only for the metrics (GS_M__COUNT flags) and texts
     * (GS_T__COUNT flags) set here; the others stay GS_ST_NA. What a GS_WANT_* bit asks for
     * (health, MIG, GPM, PCIe throughput, processes) is read in full. Both NULL: all. */
    const unsigned char *need_metrics;
    const unsigned char *need_texts;
    /* With a need mask: the health readings (GS_WANT_HEALTH: ECC totals, retired pages,
     * remapped rows, NVLink error sums) follow need_metrics too and the per-location ECC
     * counters are not read, for a view that prints a health figure or two (the nvidia-smi
     * table's ECC cell, dmon -s e). false: health is read in full with its bit. */
    bool mask_health;
    /* true: with GS_WANT_MIG, each MIG device's volatile uncorrectable SRAM ECC count
     * (gs_mig.sram_unc_vol, one call per MIG device) is read too, for nvidia-smi's table and
     * -q; false (the agent, every other view): not read. */
    bool mig_sram_ecc;
    /* The Kubernetes pod log directories (src/backend/k8s.h) that name the pods of processes:
     * NULL: /var/log/pods; "": do not look. */
    const char *k8s_pods_dir;
    /* true: a process's container, pod and Slurm job (its /proc/PID/cgroup, four system calls
     * a process) are not read, for a view that does not show them (the quick check without
     * --show-container); the fields stay empty. */
    bool skip_jobs;
};

/* Loads the library, initialises it once and caches every device handle. Errors:
 * GS_ENOLIB (library missing or lacking nvmlInit), GS_ENODRIVER, GS_EMISMATCH, GS_EPERM,
 * GS_ENOGPU (zero GPUs), GS_ENVML. On failure *out is untouched. */
int gs_sampler_open(struct gs_sampler **out, const struct gs_sampler_opts *opts,
                    struct gs_err *err);

/* Number of GPUs found at open (lost ones included). */
unsigned gs_sampler_gpu_count(const struct gs_sampler *s);

/* Fills snap (created with gs_snapshot_new(&snap, gs_sampler_gpu_count(s), ...)) with one
 * cycle. A GPU that is lost is marked lost and the others go on: that is not an error.
 * Returns an error only when nothing could be sampled (e.g. the driver went away). */
int gs_sampler_sample(struct gs_sampler *s, struct gs_snapshot *snap, unsigned want,
                      struct gs_err *err);

/* struct gs_util_sample (one sample of the driver's utilization ring) is in gs_model.h. */

/* One GPU's place in the machine (nvidia-smi topo -m), read when asked, never sampled.
 * Each part has a status (enum gs_status): GS_ST_OK, or GS_ST_NA where the driver does not
 * say. */
#define GS_TOPO_GPUS 64       /* peers one answer covers (level[]) */
#define GS_TOPO_CPUS_LEN 1024 /* "0-55,112-167": CPU and NUMA node lists as ranges */
struct gs_topo {
    /* closest common PCIe ancestor with GPU j (nvmlDeviceGetTopologyCommonAncestor): NVML's
     * levels, 0 on one board, 10 one switch, 20 several switches, 30 a host bridge, 40 one
     * NUMA node, 50 across NUMA nodes; level_st[self] is GS_ST_NA */
    uint8_t level_st[GS_TOPO_GPUS];
    unsigned level[GS_TOPO_GPUS];
    /* active NVLinks to GPU j: links whose far end is GPU j's PCI bus id, or, when this GPU's
     * links end at NVSwitches (nvmlDeviceGetNvLinkRemoteDeviceType), GPU j's also do: the
     * fewer of the two GPUs' active switch links (every switch reaches every GPU) */
    unsigned nvlinks[GS_TOPO_GPUS];
    uint8_t cpus_st, numa_st, gpu_numa_st;
    char cpus[GS_TOPO_CPUS_LEN]; /* ideal CPU set (nvmlDeviceGetCpuAffinity) as ranges */
    char numa[GS_TOPO_CPUS_LEN]; /* closest NUMA nodes (nvmlDeviceGetMemoryAffinity, node scope) */
    unsigned gpu_numa;           /* the GPU memory's own NUMA node (nvmlDeviceGetNumaNodeId) */
    /* each link's capabilities (nvmlDeviceGetNvLinkCapability): n_links links the driver
     * knows, bit c of caps[l] capability c (NVML's order: P2P, system memory access, P2P
     * atomics, system memory atomics, SLI, link supported) when caps_read[l] has bit c */
    unsigned n_links;
    uint8_t link_active[GS_NVLINK_MAX];
    uint8_t caps[GS_NVLINK_MAX], caps_read[GS_NVLINK_MAX];
};

/* What a topology answer reads (gs_sampler_topology's `what`, bits). Each row's link count and
 * link states (n_links, link_active) are read for either. */
enum gs_topo_read {
    /* the matrix (nvidia-smi topo -m): common ancestors (level), NVLinks to each GPU (nvlinks),
     * CPU and NUMA affinity (cpus, numa, gpu_numa) */
    GS_TOPO_MATRIX = 1u << 0,
    /* each link's capabilities (caps, caps_read; nvidia-smi nvlink -c), of the active links */
    GS_TOPO_LINK_CAPS = 1u << 1,
};

/* A snapshot for s's GPUs (gs_snapshot_new with gs_sampler_gpu_count GPUs and room for
 * cap_procs processes, zeroed) that the next gs_sampler_sample fills: that first cycle skips
 * clearing what is zero already (~9 KB a GPU, a one-shot command's whole cycle). Write nothing
 * into it before that cycle. Free it with gs_snapshot_free. */
int gs_sampler_snapshot_new(struct gs_sampler *s, unsigned cap_procs, struct gs_snapshot **out,
                            struct gs_err *err);

/* The topology of GPUs 0..n-1 (n at most gs_sampler_gpu_count): t[i] (zeroed first) is GPU i's
 * toward the GPUs 0..GS_TOPO_GPUS-1, filled for the GPUs marked in sel (sel[i] != 0; every one
 * when sel is NULL), the others left zero; `what` (enum gs_topo_read bits) says which parts are
 * read, the others left zero. One call reads each GPU's NVLinks once (O(n) NVML calls for the
 * links, not one read per pair of GPUs); nothing is kept between calls.
 * GS_OK with what the driver told (unknown parts GS_ST_NA); GS_ENOTSUP when the backend has no
 * topology; GS_ENOGPU when n is past the last GPU; GS_ELOST, GS_ENODRIVER (the first GPU, in
 * order, that failed); GS_ENOMEM. */
int gs_sampler_topology(struct gs_sampler *s, const unsigned char *sel, unsigned what,
                        struct gs_topo *t, unsigned n, struct gs_err *err);

/* Shuts NVML down and unloads the library; NULL is allowed. */
void gs_sampler_close(struct gs_sampler *s);

#endif
