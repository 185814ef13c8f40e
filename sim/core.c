/*
 * nvml-sim core: shared state, the common checks of every entry point, and the scenario state
 * at a virtual time (see core.h).
 *
 * State at t is always recomputed from the scenario (events are few and sorted), never stored, so
 * any t, including one that goes backwards under NVML_SIM_TIME=file:, gives the same answer.
 */
#include "core.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct gs_sim_state gs_sim = {.lock = PTHREAD_MUTEX_INITIALIZER};

static struct gs_sim_handle gpu_handles[GS_SIM_MAX_GPUS];
static struct gs_sim_handle mig_handles[GS_SIM_MAX_GPUS][GS_SIM_MAX_MIG];
static pthread_once_t handles_once = PTHREAD_ONCE_INIT;

static void handles_init(void)
{
    for (unsigned g = 0; g < GS_SIM_MAX_GPUS; g++) {
        gpu_handles[g] = (struct gs_sim_handle){g, -1};
        for (unsigned s = 0; s < GS_SIM_MAX_MIG; s++)
            mig_handles[g][s] = (struct gs_sim_handle){g, (int)s};
    }
}

nvmlDevice_t gs_sim_gpu_handle(unsigned gpu)
{
    pthread_once(&handles_once, handles_init);
    return (nvmlDevice_t)(void *)&gpu_handles[gpu];
}

nvmlDevice_t gs_sim_mig_handle(unsigned gpu, unsigned slot)
{
    pthread_once(&handles_once, handles_init);
    return (nvmlDevice_t)(void *)&mig_handles[gpu][slot];
}

/* Maps a caller's handle to a table entry without dereferencing anything the sim did not hand
 * out: the address must fall on an entry of one of the two tables. */
static const struct gs_sim_handle *resolve(nvmlDevice_t dev)
{
    uintptr_t a = (uintptr_t)(void *)dev;
    uintptr_t g0 = (uintptr_t)(void *)gpu_handles, g1 = g0 + sizeof gpu_handles;
    uintptr_t m0 = (uintptr_t)(void *)mig_handles, m1 = m0 + sizeof mig_handles;

    pthread_once(&handles_once, handles_init);
    if (a >= g0 && a < g1 && (a - g0) % sizeof gpu_handles[0] == 0)
        return &gpu_handles[(a - g0) / sizeof gpu_handles[0]];
    if (a >= m0 && a < m1 && (a - m0) % sizeof(struct gs_sim_handle) == 0) {
        size_t i = (a - m0) / sizeof(struct gs_sim_handle);
        return &mig_handles[i / GS_SIM_MAX_MIG][i % GS_SIM_MAX_MIG];
    }
    return NULL;
}

static int override_rc(const struct gs_sim_override *ov, unsigned n, enum gs_sim_fn fn)
{
    for (unsigned i = 0; i < n; i++)
        if (ov[i].fn == fn)
            return ov[i].rc;
    return NVML_SUCCESS;
}

/* Optional self-profiling for bench/bench_cycle: with NVML_SIM_PROFILE set at load time, every
 * entry point adds the time it spent (CLOCK_MONOTONIC: a vDSO read of ~25 ns, where the
 * thread CPU clock is a ~600 ns system call on VMs; lock included) to these counters, so a
 * benchmark can subtract "time inside NVML" from its own cycle cost. Off by default: the
 * clock reads cost ~50 ns per call. */
static int profile_on = -1;
static _Thread_local struct timespec profile_t0;
static unsigned long long profile_ns, profile_calls;
static pthread_mutex_t profile_lock = PTHREAD_MUTEX_INITIALIZER;

static void profile_start(void)
{
    if (profile_on < 0)
        profile_on = getenv("NVML_SIM_PROFILE") != NULL;
    if (profile_on)
        clock_gettime(CLOCK_MONOTONIC, &profile_t0);
}

static void profile_stop(void)
{
    struct timespec t1;

    if (profile_on <= 0)
        return;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    pthread_mutex_lock(&profile_lock);
    profile_ns += (unsigned long long)((t1.tv_sec - profile_t0.tv_sec) * 1000000000LL +
                                       (t1.tv_nsec - profile_t0.tv_nsec));
    profile_calls++;
    pthread_mutex_unlock(&profile_lock);
}

/* Not an NVML symbol: nvml-sim's own extension, read by bench/bench_cycle.c via dlsym. */
GS_SIM_EXPORT void nvmlSimProfileGet(unsigned long long *ns, unsigned long long *calls)
{
    pthread_mutex_lock(&profile_lock);
    if (ns)
        *ns = profile_ns;
    if (calls)
        *calls = profile_calls;
    pthread_mutex_unlock(&profile_lock);
}

/* Optional call counting for bench/RESULTS.md ("NVML calls per GPU per command"): with
 * NVML_SIM_COUNT=FILE set at load time, every entry point (those that go through
 * gs_sim_enter_system: all but nvmlInit*, nvmlShutdown, the error strings) is counted per
 * function, and when the process exits the counts are appended to FILE: one line
 * "nvml_calls total N gpus G" and one "nvml_call FN N" per function called. */
static int count_on = -1;
static unsigned long long count_fn[GS_SIM_FN__COUNT];
static unsigned count_gpus;

static void count_dump(void)
{
    unsigned long long total = 0;
    FILE *f;

    for (int i = 0; i < GS_SIM_FN__COUNT; i++)
        total += count_fn[i];
    f = fopen(getenv("NVML_SIM_COUNT"), "ae");
    if (!f)
        return;
    fprintf(f, "nvml_calls total %llu gpus %u\n", total, count_gpus);
    for (int i = 0; i < GS_SIM_FN__COUNT; i++)
        if (count_fn[i])
            fprintf(f, "nvml_call %s %llu\n", gs_sim_fn_name((enum gs_sim_fn)i), count_fn[i]);
    fclose(f);
}

/* Under gs_sim.lock. */
static void count_call(enum gs_sim_fn fn)
{
    if (count_on < 0) {
        const char *path = getenv("NVML_SIM_COUNT");
        count_on = path && path[0];
        if (count_on)
            atexit(count_dump);
    }
    if (count_on && (unsigned)fn < GS_SIM_FN__COUNT) {
        count_fn[fn]++;
        if (gs_sim.sc && gs_sim.sc->n_gpus > count_gpus)
            count_gpus = gs_sim.sc->n_gpus;
    }
}

nvmlReturn_t gs_sim_leave(nvmlReturn_t rc)
{
    pthread_mutex_unlock(&gs_sim.lock);
    profile_stop();
    return rc;
}

nvmlReturn_t gs_sim_enter_system(enum gs_sim_fn fn, struct gs_sim_call *c)
{
    int rc;

    profile_start();
    pthread_mutex_lock(&gs_sim.lock);
    count_call(fn);
    if (gs_sim.refcount == 0 || !gs_sim.sc)
        return gs_sim_leave(NVML_ERROR_UNINITIALIZED);
    memset(c, 0, sizeof *c);
    c->sc = gs_sim.sc;
    c->t = gs_sim_clock_now(&gs_sim.clock);
    c->slot = -1;
    rc = override_rc(c->sc->override, c->sc->n_override, fn);
    if (rc != NVML_SUCCESS)
        return gs_sim_leave(rc);
    return NVML_SUCCESS;
}

nvmlReturn_t gs_sim_enter(enum gs_sim_fn fn, nvmlDevice_t dev, unsigned flags,
                          struct gs_sim_call *c)
{
    const struct gs_sim_handle *h;
    nvmlReturn_t rc = gs_sim_enter_system(fn, c);

    if (rc != NVML_SUCCESS)
        return rc;
    h = resolve(dev);
    if (!h || h->gpu >= c->sc->n_gpus)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    c->gpu = h->gpu;
    c->g = &c->sc->gpus[h->gpu];
    c->slot = h->slot;
    if (h->slot >= 0) {
        /* A MIG handle is valid only while its instance exists. */
        const struct gs_sim_mig *m = &c->g->mig[h->slot];
        if (!m->present || !gs_sim_mig_on(c->sc, h->gpu, c->t))
            return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
        c->mig = m;
    }
    if (!(flags & GS_SIM_LOST_OK) && gs_sim_lost(c->sc, h->gpu, c->t))
        return gs_sim_leave(NVML_ERROR_GPU_IS_LOST);
    if (h->slot >= 0 && !(flags & (GS_SIM_MIG_OK | GS_SIM_MIG_ONLY)))
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    if (h->slot < 0 && (flags & GS_SIM_MIG_ONLY))
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    rc = override_rc(c->g->override, c->g->n_override, fn);
    if (rc != NVML_SUCCESS)
        return gs_sim_leave(rc);
    return NVML_SUCCESS;
}

/* ---- state at t --------------------------------------------------------------------------- */

bool gs_sim_lost(const struct gs_sim_scenario *sc, unsigned gpu, double t)
{
    for (unsigned i = 0; i < sc->n_events && sc->events[i].at_s <= t; i++)
        if (sc->events[i].kind == GS_SIM_EV_GPU_LOST && sc->events[i].gpu == gpu)
            return true;
    return false;
}

bool gs_sim_mig_on(const struct gs_sim_scenario *sc, unsigned gpu, double t)
{
    bool on = sc->gpus[gpu].mig_capable && sc->gpus[gpu].mig_initially_on;

    for (unsigned i = 0; i < sc->n_events && sc->events[i].at_s <= t; i++) {
        const struct gs_sim_event *e = &sc->events[i];
        if (e->gpu != gpu)
            continue;
        if (e->kind == GS_SIM_EV_MIG_ENABLE)
            on = true;
        else if (e->kind == GS_SIM_EV_MIG_DISABLE)
            on = false;
    }
    return on;
}

unsigned long long gs_sim_event_reasons(const struct gs_sim_scenario *sc, unsigned gpu, double t)
{
    unsigned long long mask = 0;

    for (unsigned i = 0; i < sc->n_events && sc->events[i].at_s <= t; i++) {
        const struct gs_sim_event *e = &sc->events[i];
        if (e->gpu != gpu)
            continue;
        if (e->kind == GS_SIM_EV_THROTTLE_ON)
            mask |= e->data;
        else if (e->kind == GS_SIM_EV_THROTTLE_OFF)
            mask &= ~e->data;
    }
    return mask;
}

double gs_sim_reason_seconds(const struct gs_sim_scenario *sc, unsigned gpu,
                             unsigned long long mask, double t)
{
    unsigned long long cur = 0;
    double since = 0, total = 0;

    for (unsigned i = 0; i < sc->n_events && sc->events[i].at_s <= t; i++) {
        const struct gs_sim_event *e = &sc->events[i];
        unsigned long long next = cur;
        if (e->gpu != gpu)
            continue;
        if (e->kind == GS_SIM_EV_THROTTLE_ON)
            next |= e->data;
        else if (e->kind == GS_SIM_EV_THROTTLE_OFF)
            next &= ~e->data;
        else
            continue;
        if ((cur & mask) && !(next & mask))
            total += e->at_s - since;
        else if (!(cur & mask) && (next & mask))
            since = e->at_s;
        cur = next;
    }
    if (cur & mask)
        total += t - since;
    return total > 0 ? total : 0;
}

bool gs_sim_proc_alive(const struct gs_sim_scenario *sc, const struct gs_sim_proc *p, double t)
{
    if (!(t >= p->start_s && t < p->exit_s))
        return false;
    /* A process inside a MIG instance exists only while MIG is on. */
    if (p->mig_gi >= 0 && !gs_sim_mig_on(sc, p->gpu, t))
        return false;
    return true;
}

unsigned long long gs_sim_ecc_count(const struct gs_sim_scenario *sc, unsigned gpu, unsigned type,
                                    unsigned location, bool aggregate, double t)
{
    unsigned long long n = aggregate ? sc->gpus[gpu].ecc_aggregate[type][location] : 0;

    for (unsigned i = 0; i < sc->n_events && sc->events[i].at_s <= t; i++) {
        const struct gs_sim_event *e = &sc->events[i];
        if (e->kind == GS_SIM_EV_ECC_ERROR && e->gpu == gpu && e->ecc_type == type &&
            e->ecc_location == location)
            n += e->count;
    }
    return n;
}

/* ---- metrics ------------------------------------------------------------------------------ */

static uint64_t salt_of(const struct gs_sim_call *c, enum gs_sim_metric m)
{
    return ((uint64_t)c->gpu << 16) | ((uint64_t)(c->slot + 1) << 8) | (uint64_t)m;
}

const struct gs_sim_pattern *gs_sim_pattern_of(const struct gs_sim_call *c, enum gs_sim_metric m)
{
    return c->mig ? &c->mig->metric[m] : &c->g->metric[m];
}

double gs_sim_metric_at(const struct gs_sim_call *c, enum gs_sim_metric m, double t)
{
    const struct gs_sim_metric_info *mi = gs_sim_metric_info(m);

    return gs_sim_pattern_at(gs_sim_pattern_of(c, m), salt_of(c, m), t, mi->lo, mi->hi);
}

double gs_sim_metric_avg(const struct gs_sim_call *c, enum gs_sim_metric m, double t0, double t1)
{
    const struct gs_sim_metric_info *mi = gs_sim_metric_info(m);

    return gs_sim_pattern_avg(gs_sim_pattern_of(c, m), salt_of(c, m), t0, t1, mi->lo, mi->hi);
}

unsigned gs_sim_metric_u(const struct gs_sim_call *c, enum gs_sim_metric m, double t)
{
    return (unsigned)llround(gs_sim_metric_at(c, m, t));
}

static uint64_t mib_to_bytes(double mib)
{
    return mib > 0 ? (uint64_t)llround(mib * 1048576.0) : 0;
}

unsigned long long gs_sim_proc_mem(const struct gs_sim_proc *p, unsigned idx, double t)
{
    if (p->mem_unknown)
        return NVML_VALUE_NOT_AVAILABLE;
    return mib_to_bytes(gs_sim_pattern_at(&p->mem_mib, 0x1000000ull + idx * 8ull, t, 0, 1e9));
}

double gs_sim_proc_util(const struct gs_sim_proc *p, unsigned idx, int which, double t0, double t1)
{
    const struct gs_sim_pattern *pat[4] = {&p->sm_pct, &p->mem_pct, &p->enc_pct, &p->dec_pct};

    return gs_sim_pattern_avg(pat[which & 3], 0x1000000ull + idx * 8ull + 1 + (unsigned)which, t0,
                              t1, 0, 100);
}

uint64_t gs_sim_mem_used(const struct gs_sim_call *c, double t)
{
    const struct gs_sim_scenario *sc = c->sc;
    bool given =
        c->mig ? c->mig->metric_given[GS_SIM_M_MEM_USED] : c->g->metric_given[GS_SIM_M_MEM_USED];
    uint64_t sum = 0, cap;

    if (given) {
        sum = mib_to_bytes(gs_sim_metric_at(c, GS_SIM_M_MEM_USED, t));
    } else if (!c->mig && gs_sim_mig_on(sc, c->gpu, t)) {
        /* The full GPU in MIG mode: what its GPU instances use (memory belongs to the GPU
         * instance, shared by its compute instances: count each gi once), plus processes
         * outside them. */
        for (unsigned s = 0; s < GS_SIM_MAX_MIG; s++) {
            struct gs_sim_call mc = *c;
            bool seen = false;
            if (!c->g->mig[s].present)
                continue;
            for (unsigned k = 0; k < s; k++)
                seen |= c->g->mig[k].present && c->g->mig[k].gi == c->g->mig[s].gi;
            if (seen)
                continue;
            mc.slot = (int)s;
            mc.mig = &c->g->mig[s];
            sum += gs_sim_mem_used(&mc, t);
        }
        for (unsigned i = 0; i < sc->n_procs; i++) {
            const struct gs_sim_proc *p = &sc->procs[i];
            unsigned long long m;
            if (p->gpu != c->gpu || p->mig_gi >= 0 || !gs_sim_proc_alive(sc, p, t))
                continue;
            m = gs_sim_proc_mem(p, i, t);
            if (m != NVML_VALUE_NOT_AVAILABLE)
                sum += m;
        }
    } else {
        /* Derived: the memory of the processes running there. */
        for (unsigned i = 0; i < sc->n_procs; i++) {
            const struct gs_sim_proc *p = &sc->procs[i];
            unsigned long long m;
            if (p->gpu != c->gpu || !gs_sim_proc_alive(sc, p, t))
                continue;
            if (c->mig && p->mig_gi != (int)c->mig->gi)
                continue;
            m = gs_sim_proc_mem(p, i, t);
            if (m != NVML_VALUE_NOT_AVAILABLE)
                sum += m;
        }
    }
    cap = c->mig ? c->mig->mem_total_bytes - c->mig->mem_reserved_bytes
                 : c->g->mem_total_bytes - c->g->mem_reserved_bytes;
    return sum > cap ? cap : sum;
}

unsigned long long gs_sim_u64(double v)
{
    if (!(v > 0))
        return 0;
    if (v >= 1.8e19)
        return 18000000000000000000ull;
    return (unsigned long long)(v + 0.5);
}

nvmlReturn_t gs_sim_copy_str(char *dst, unsigned len, const char *src)
{
    size_t n = strlen(src);

    if (!dst)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (n + 1 > len)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, src, n + 1);
    return NVML_SUCCESS;
}
