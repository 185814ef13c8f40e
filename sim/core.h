/*
 * nvml-sim core: the library-wide state behind the NVML entry points, the checks every entry
 * point starts with, and the scenario state evaluated at a virtual time t.
 *
 * NVML is a process-global API (nvmlInit takes no context), so the sim keeps one state, gs_sim,
 * behind one mutex. An entry point calls gs_sim_enter(), which takes the lock and performs, in
 * NVML's order, the checks every device call shares: initialised, handle valid, GPU not lost,
 * handle kind accepted, forced errors from the scenario. On success the lock stays held until
 * gs_sim_leave(); the entry point then validates its own arguments and fills the caller's
 * structs from the scenario evaluated at c->t.
 *
 * Device handles are pointers into static tables (one entry per GPU and per MIG slot), so a stale
 * handle never points at freed memory and a MIG handle is told apart from a GPU handle by address.
 */
#ifndef GS_SIM_CORE_H
#define GS_SIM_CORE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/nvml_abi.h"
#include "clock.h"
#include "scenario.h"

/* Exported NVML symbols. The minimal build (-DNVML_SIM_MINIMAL) plays a 390-era library: only
 * the core entry points are exported, everything else is compiled but stays hidden. */
#define GS_SIM_EXPORT __attribute__((visibility("default")))
#ifdef NVML_SIM_MINIMAL
#define GS_SIM_EXPORT_FULL
#else
#define GS_SIM_EXPORT_FULL GS_SIM_EXPORT
#endif

/* The sim's own marker (not NVML): see sim/nvml_system.c. */
GS_SIM_EXPORT nvmlReturn_t nvmlSimGetInfo(char *info, unsigned int length);
GS_SIM_EXPORT nvmlReturn_t nvmlSimProcessIsHost(unsigned int pid, unsigned int *isHost);

#define GS_SIM_MAX_SETS 256u
#define GS_SIM_MAX_SAMPLES 4096u

struct gs_sim_handle {
    unsigned gpu;
    int slot; /* MIG slot, -1 for the full GPU */
};

struct gs_sim_event_set {
    unsigned long long mask[GS_SIM_MAX_GPUS];
    double reg_t[GS_SIM_MAX_GPUS]; /* virtual time of the first registration */
    unsigned char *delivered;      /* one flag per scenario event */
    unsigned n_delivered;
};

struct gs_sim_gpm_sample {
    bool filled;
    unsigned gpu;
    int slot; /* MIG slot or -1 */
    double t;
};

struct gs_sim_state {
    pthread_mutex_t lock;
    unsigned refcount;
    struct gs_sim_scenario *sc;
    struct gs_sim_clock clock;
    struct gs_sim_event_set *sets[GS_SIM_MAX_SETS];
    unsigned n_sets;
    struct gs_sim_gpm_sample *samples[GS_SIM_MAX_SAMPLES];
    unsigned n_samples;
};

extern struct gs_sim_state gs_sim;

/* What an entry point works on once gs_sim_enter succeeded. */
struct gs_sim_call {
    const struct gs_sim_scenario *sc;
    double t;
    unsigned gpu;
    const struct gs_sim_gpu *g;   /* NULL for system calls */
    int slot;                     /* MIG slot, -1 for a full-GPU handle */
    const struct gs_sim_mig *mig; /* the MIG device, or NULL */
};

/* Flags for gs_sim_enter. */
enum {
    GS_SIM_MIG_OK = 0x1,   /* the function also accepts MIG device handles */
    GS_SIM_MIG_ONLY = 0x2, /* full-GPU handles get NOT_SUPPORTED */
    GS_SIM_LOST_OK = 0x4,  /* do not fail on a lost GPU (the caller decides) */
};

nvmlReturn_t gs_sim_enter(enum gs_sim_fn fn, nvmlDevice_t dev, unsigned flags,
                          struct gs_sim_call *c);
nvmlReturn_t gs_sim_enter_system(enum gs_sim_fn fn, struct gs_sim_call *c);
/* Unlocks and returns rc, so entry points end with "return gs_sim_leave(rc);". */
nvmlReturn_t gs_sim_leave(nvmlReturn_t rc);

/* Handles. */
nvmlDevice_t gs_sim_gpu_handle(unsigned gpu);
nvmlDevice_t gs_sim_mig_handle(unsigned gpu, unsigned slot);

/* Scenario state at time t. */
bool gs_sim_lost(const struct gs_sim_scenario *sc, unsigned gpu, double t);
bool gs_sim_mig_on(const struct gs_sim_scenario *sc, unsigned gpu, double t);
unsigned long long gs_sim_event_reasons(const struct gs_sim_scenario *sc, unsigned gpu, double t);
double gs_sim_reason_seconds(const struct gs_sim_scenario *sc, unsigned gpu,
                             unsigned long long mask, double t);
bool gs_sim_proc_alive(const struct gs_sim_scenario *sc, const struct gs_sim_proc *p, double t);
unsigned long long gs_sim_ecc_count(const struct gs_sim_scenario *sc, unsigned gpu, unsigned type,
                                    unsigned location, bool aggregate, double t);

/* Metrics of the GPU or MIG device of a call. */
const struct gs_sim_pattern *gs_sim_pattern_of(const struct gs_sim_call *c, enum gs_sim_metric m);
double gs_sim_metric_at(const struct gs_sim_call *c, enum gs_sim_metric m, double t);
double gs_sim_metric_avg(const struct gs_sim_call *c, enum gs_sim_metric m, double t0, double t1);
unsigned gs_sim_metric_u(const struct gs_sim_call *c, enum gs_sim_metric m, double t);
/* Memory in use (bytes, excluding reserved) of the GPU or MIG device. */
uint64_t gs_sim_mem_used(const struct gs_sim_call *c, double t);
/* The memory a process holds (bytes) or NVML_VALUE_NOT_AVAILABLE. */
unsigned long long gs_sim_proc_mem(const struct gs_sim_proc *p, unsigned idx, double t);
/* A process's utilization pattern averaged over [t0, t1]. */
double gs_sim_proc_util(const struct gs_sim_proc *p, unsigned idx, int which, double t0, double t1);

/* NVLink of the call's GPU (nvml_nvlink.c): whether link exists (NOT_SUPPORTED without NVLink,
 * INVALID_ARGUMENT past the last link), and the KiB the link moved by c->t (0 when inactive). */
nvmlReturn_t gs_sim_nvlink_check(const struct gs_sim_call *c, unsigned link);
double gs_sim_nvlink_kib(const struct gs_sim_call *c, unsigned link, bool rx, bool raw);
/* Whether link is active at c->t: the scenario's state, then its nvlink_down / nvlink_up events. */
bool gs_sim_nvlink_active(const struct gs_sim_call *c, unsigned link);

/* A non-negative double rounded to an unsigned 64-bit count, saturating (NaN gives 0). */
unsigned long long gs_sim_u64(double v);

/* Copies a string into a caller buffer of len bytes: INSUFFICIENT_SIZE if it does not fit. */
nvmlReturn_t gs_sim_copy_str(char *dst, unsigned len, const char *src);

#endif
