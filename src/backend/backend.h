/*
 * The backend interface: one table of operations per source of GPU data. The sampler
 * (src/core/sampler.c) drives a backend through this table and never sees NVML; the product
 * has one backend, NVML through dlopen (nvml.c), and nvml-sim sits below it as a library, so
 * tests exercise the real backend code.
 *
 * A backend instance holds all its state (library handle, device handles, previous GPM
 * samples, event set, scratch buffers); nothing lives in file statics. Every call that can
 * fail returns GS_OK or a negative enum gs_rc and fills err when it is not NULL.
 *
 * Lifecycle: open (load, initialise once, enumerate and read identity) -> per cycle: begin,
 * then sample and processes per device -> close. One thread at a time.
 */
#ifndef GS_BACKEND_H
#define GS_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "gpuscope/gs_model.h"
#include "gpuscope/gs_sampler.h" /* GS_WANT_* */

struct gs_err;
struct gs_backend;

/* Bumped when a member is added; members are appended, never reordered. */
#define GS_BACKEND_ABI 5

/* What a backend may fill beyond the basic readings. */
enum gs_backend_cap {
    GS_CAP_PROCS = 1u << 0,
    GS_CAP_PROC_UTIL = 1u << 1,
    GS_CAP_GPM = 1u << 2,
    GS_CAP_EVENTS = 1u << 3,
    GS_CAP_MIG = 1u << 4,
    GS_CAP_HEALTH = 1u << 5,
};

struct gs_backend_opts {
    const char *library; /* NULL: $GPUSCOPE_NVML_LIBRARY, else the backend's default */
    /* gs_sampler_opts.need_metrics/need_texts: both NULL, every reading */
    const unsigned char *need_metrics, *need_texts;
    bool mask_health;  /* gs_sampler_opts.mask_health */
    bool mig_sram_ecc; /* gs_sampler_opts.mig_sram_ecc */
};

struct gs_backend_ops {
    unsigned abi; /* GS_BACKEND_ABI */
    const char *name;
    unsigned caps; /* GS_CAP_* */

    /* Loads and initialises the source and enumerates its devices, reading their identity
     * (name, UUID, PCI, serial, ...) once. On failure *out is untouched and err names the
     * failed call. Codes: GS_ENOLIB, GS_ENODRIVER, GS_EMISMATCH, GS_EPERM, GS_ENOGPU,
     * GS_ENVML, GS_ENOMEM. */
    int (*open)(struct gs_backend **out, const struct gs_backend_opts *opts, struct gs_err *err);

    /* Number of devices found at open, lost ones included. Device numbers are 0..n-1. */
    unsigned (*count)(const struct gs_backend *b);

    /* System facts read at open (driver, library and CUDA versions); hostname untouched. */
    void (*system)(const struct gs_backend *b, struct gs_system *sys);

    /* Once per cycle before the per-device calls, with the cycle's GS_WANT_* bits: drains
     * events, primes GPM when GS_WANT_GPM_WAIT asks for it (may sleep 110 ms once). May be
     * NULL. Errors here are not fatal to the cycle. */
    int (*begin)(struct gs_backend *b, unsigned want, struct gs_err *err);

    /* Fills g (zeroed by the caller) for device dev: identity from open, the basic readings,
     * and what want asks for. A lost device gets g->lost = 1 and is not an error. Returns an
     * error only when the device could not be read at all for another reason (the driver went
     * away: GS_ENODRIVER; no permission on the device: GS_EPERM; ...). */
    int (*sample)(struct gs_backend *b, unsigned dev, struct gs_gpu *g, unsigned want,
                  struct gs_err *err);

    /* Appends the processes of device dev to snap->procs (one entry per pid, type bits
     * merged; growing the array with gs_snapshot_reserve_procs), filling pid, gpu, type,
     * MIG ids, GPU memory and, with GS_WANT_PROC_UTIL, utilization. Host fields are left
     * for the caller. May be NULL. */
    int (*processes)(struct gs_backend *b, unsigned dev, struct gs_snapshot *snap, unsigned want,
                     struct gs_err *err);

    /* The source's own name for a process (NVML: nvmlSystemGetProcessName, argv[0] as started,
     * what nvidia-smi prints), also the fallback when procfs cannot see the pid. Returns GS_OK,
     * GS_ENOTSUP (the call is missing), GS_ENOTFOUND (no such pid), GS_EPERM or GS_ENVML;
     * buf is "" on failure. May be NULL. */
    int (*process_name)(struct gs_backend *b, unsigned pid, char *buf, size_t len);

    /* Shuts the source down and frees b; NULL is allowed. */
    void (*close)(struct gs_backend *b);

    /* (ABI 2) The device's own GPU-utilization samples (NVML: nvmlDeviceGetSamples, a ring
     * at the GPU's rate) newer than *last_ts_us, at most cap into out, oldest first; *n is
     * how many and *last_ts_us advances to the newest one read. GS_OK with *n = 0: nothing
     * new. GS_ENOTSUP: the call is missing or the device keeps no samples (MIG). Also
     * GS_ELOST, GS_EPERM, GS_ENODRIVER, GS_ENVML, GS_ENOMEM. May be NULL. */
    int (*util_samples)(struct gs_backend *b, unsigned dev, uint64_t *last_ts_us,
                        struct gs_util_sample *out, unsigned cap, unsigned *n, struct gs_err *err);

    /* (ABI 3; ABI 4: one call for every GPU; ABI 5: what) The topology (gs_sampler.h struct
     * gs_topo) of GPUs 0..n-1, t[i] GPU i's (those marked in sel; all when sel is NULL), read
     * now, the parts in what (enum gs_topo_read): common ancestors with the other devices,
     * NVLink peers, CPU and NUMA affinity (GS_TOPO_MATRIX), the links' capabilities
     * (GS_TOPO_LINK_CAPS); each GPU's links read once per call. Codes as gs_sampler_topology.
     * May be NULL (no topology). */
    int (*topology)(struct gs_backend *b, const unsigned char *sel, unsigned what,
                    struct gs_topo *t, unsigned n, struct gs_err *err);
};

/* The NVML backend (nvml.c). */
extern const struct gs_backend_ops gs_backend_nvml;

#endif
