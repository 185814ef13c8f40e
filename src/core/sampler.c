/*
 * The sampler: gs_sampler.h on top of a backend ops table (src/backend/backend.h).
 *
 * It opens the backend once (the registry below holds the product's one backend, NVML) and
 * a procfs reader, and each cycle fills a caller-owned snapshot: clocks and hostname, then
 * the backend's begin hook, every device, every device's processes, and the host details
 * of each process from procfs. A device that fails does not stop the others; a cycle is an
 * error only when no device could be read.
 *
 * With GS_WANT_UTIL_SAMPLES it also reads the driver's own utilization samples of every GPU
 * since the previous cycle into the snapshot (gs_snapshot_util_samples), so the consumers of
 * sub-second utilization (run aggregates: `gpuscope run`, the in-process core, the agent's
 * runs) read snapshots and never the driver.
 *
 * After warm-up a cycle allocates nothing: the snapshot is reused, the backend's scratch
 * buffers, the sample array and the procfs caches only grow when more processes (samples)
 * appear than ever before.
 */
#include "gpuscope/gs_sampler.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/procfs.h"
#include "base/clock.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"

/* Backends in order of preference; the first that opens wins. */
static const struct gs_backend_ops *const gs_backends[] = {
    &gs_backend_nvml,
};

/* GS_WANT_UTIL_SAMPLES: where each GPU's read of the driver's samples stands. */
struct usamp_state {
    uint64_t last_us; /* newest sample read */
    int was_read;     /* read in the previous cycle: continue from last_us */
    int off;          /* keeps none (GS_ENOTSUP) or lost: never asked again */
};

struct gs_sampler {
    const struct gs_backend_ops *ops;
    struct gs_backend *b;
    unsigned n_gpus;
    struct gs_procfs *pf;
    struct usamp_state *us; /* n_gpus */
    uint64_t prev_us;       /* the previous cycle's time (open at first), unix µs */
    int host_proc;          /* procfs is this host's /proc (no proc_root given) */
    /* the snapshot gs_sampler_snapshot_new made, zeroed and not filled yet (NULL once any
     * cycle ran): its first cycle skips the clear */
    const struct gs_snapshot *fresh;
};

#define USAMP_BATCH 64  /* samples per backend call */
#define USAMP_ROUNDS 16 /* calls per GPU per cycle at most: a stalled cycle reads 1024 */

int gs_sampler_open(struct gs_sampler **out, const struct gs_sampler_opts *opts, struct gs_err *err)
{
    struct gs_backend_opts bopts = {opts ? opts->library : NULL, opts ? opts->need_metrics : NULL,
                                    opts ? opts->need_texts : NULL,
                                    opts ? opts->mask_health : false,
                                    opts ? opts->mig_sram_ecc : false};
    struct gs_sampler *s = calloc(1, sizeof *s);
    int rc = GS_ENOLIB;

    if (!s)
        return gs_err_set(err, GS_ENOMEM, "sampler: out of memory");
    for (size_t i = 0; i < sizeof gs_backends / sizeof gs_backends[0]; i++) {
        if (gs_backends[i]->abi != GS_BACKEND_ABI)
            continue;
        rc = gs_backends[i]->open(&s->b, &bopts, err);
        if (rc == GS_OK) {
            s->ops = gs_backends[i];
            break;
        }
    }
    if (rc != GS_OK)
        goto fail;
    s->n_gpus = s->ops->count(s->b);
    s->us = calloc(s->n_gpus ? s->n_gpus : 1, sizeof *s->us);
    if (!s->us) {
        rc = gs_err_set(err, GS_ENOMEM, "sampler: out of memory");
        goto fail;
    }
    s->prev_us = (uint64_t)(gs_clock_real_ns() / 1000);
    s->host_proc = !(opts && opts->proc_root && opts->proc_root[0]);
    rc = gs_procfs_open(&s->pf, opts ? opts->proc_root : NULL, err);
    if (rc == GS_OK && opts && opts->k8s_pods_dir)
        gs_procfs_set_pods_dir(s->pf, opts->k8s_pods_dir);
    if (rc == GS_OK && opts && opts->skip_jobs)
        gs_procfs_set_jobs(s->pf, 0);
    if (rc != GS_OK)
        goto fail;
    *out = s;
    return GS_OK;
fail:
    gs_sampler_close(s);
    return rc;
}

unsigned gs_sampler_gpu_count(const struct gs_sampler *s)
{
    return s ? s->n_gpus : 0;
}

int gs_sampler_snapshot_new(struct gs_sampler *s, unsigned cap_procs, struct gs_snapshot **out,
                            struct gs_err *err)
{
    int rc = gs_snapshot_new(out, s->n_gpus, cap_procs, err);

    if (rc == GS_OK)
        s->fresh = *out;
    return rc;
}

/* Copies the host fields of one process entry to another (same pid on another GPU). */
static void copy_host(struct gs_proc *dst, const struct gs_proc *src)
{
    dst->host_st = src->host_st;
    memcpy(dst->name, src->name, sizeof dst->name);
    memcpy(dst->cmdline, src->cmdline, sizeof dst->cmdline);
    memcpy(dst->user, src->user, sizeof dst->user);
    dst->uid = src->uid;
    dst->cpu_st = src->cpu_st;
    dst->cpu_ratio = src->cpu_ratio;
    dst->rss_bytes = src->rss_bytes;
    dst->start_time = src->start_time;
    dst->job_kind = src->job_kind;
    memcpy(dst->container_id, src->container_id, sizeof dst->container_id);
    memcpy(dst->pod_uid, src->pod_uid, sizeof dst->pod_uid);
    memcpy(dst->slurm_job, src->slurm_job, sizeof dst->slurm_job);
    dst->nvml_name_st = src->nvml_name_st;
    memcpy(dst->nvml_name, src->nvml_name, sizeof dst->nvml_name);
    memcpy(dst->pod_name, src->pod_name, sizeof dst->pod_name);
    memcpy(dst->pod_namespace, src->pod_namespace, sizeof dst->pod_namespace);
    memcpy(dst->pod_container, src->pod_container, sizeof dst->pod_container);
}

/* The backend's own name for a pid (nvmlSystemGetProcessName: argv[0] as started, which is
 * what nvidia-smi prints). */
static void fill_nvml_name(struct gs_sampler *s, struct gs_proc *p)
{
    int rc = s->ops->process_name
                 ? s->ops->process_name(s->b, p->pid, p->nvml_name, sizeof p->nvml_name)
                 : GS_ENOTSUP;
    switch (rc) {
    case GS_OK:
        p->nvml_name_st = GS_ST_OK;
        return;
    case GS_ENOTSUP:
    case GS_ENOTFOUND:
        p->nvml_name_st = GS_ST_NA;
        break;
    case GS_EPERM:
        p->nvml_name_st = GS_ST_NOPERM;
        break;
    default:
        p->nvml_name_st = GS_ST_ERROR;
        break;
    }
    p->nvml_name[0] = '\0';
}

/* Without procfs (the process is gone, or in another pid namespace) the short name is the
 * base name of what the backend said. */
static void name_from_nvml(struct gs_proc *p)
{
    const char *base = p->nvml_name, *slash = strrchr(p->nvml_name, '/');
    const char *sp;
    size_t n;

    if (p->nvml_name_st != GS_ST_OK)
        return;
    if (slash && slash[1])
        base = slash + 1;
    sp = strchr(base, ' ');
    n = sp ? (size_t)(sp - base) : strlen(base);
    if (n >= sizeof p->name)
        n = sizeof p->name - 1;
    memcpy(p->name, base, n);
    p->name[n] = '\0';
}

/* Fills each process's names and, with host set, its procfs details. Without host only NVML
 * is asked (nvidia-smi's --query-compute-apps needs nothing more), which spares a one-shot
 * query four procfs reads per process. */
static void fill_hosts(struct gs_sampler *s, struct gs_snapshot *snap, int host)
{
    int64_t now = gs_clock_mono_ns();

    if (!host) {
        for (unsigned i = 0; i < snap->n_procs; i++) {
            struct gs_proc *p = &snap->procs[i];
            unsigned j;
            for (j = 0; j < i && snap->procs[j].pid != p->pid; j++)
                ;
            if (j < i) {
                copy_host(p, &snap->procs[j]);
                continue;
            }
            fill_nvml_name(s, p);
            p->host_st = GS_ST_NA;
            name_from_nvml(p);
        }
        return;
    }
    gs_procfs_begin(s->pf);
    for (unsigned i = 0; i < snap->n_procs; i++) {
        struct gs_proc *p = &snap->procs[i];
        unsigned j;
        for (j = 0; j < i; j++) /* a pid on several GPUs is read once */
            if (snap->procs[j].pid == p->pid)
                break;
        if (j < i) {
            copy_host(p, &snap->procs[j]);
            continue;
        }
        /* a made-up simulated pid is never looked up in this host's /proc (a given proc root
         * is another matter: the caller put those pids there) */
        if ((p->sim_only && s->host_proc) || gs_procfs_fill(s->pf, p->pid, now, p) != GS_OK) {
            /* Gone, or in another pid namespace: keep what NVML said. */
            fill_nvml_name(s, p);
            p->host_st = GS_ST_NA;
            name_from_nvml(p);
        } else if (!gs_procfs_cached_nvml_name(s->pf, p->pid, p)) {
            fill_nvml_name(s, p);
            gs_procfs_store_nvml_name(s->pf, p->pid, p);
        }
    }
    gs_procfs_end(s->pf);
}

/* The driver's utilization samples of GPU i since the previous cycle into the snapshot. */
static void usamp_gpu(struct gs_sampler *s, struct gs_snapshot *snap, unsigned i)
{
    struct usamp_state *u = &s->us[i];
    struct gs_gpu *g = &snap->gpus[i];
    unsigned got = 0, rounds = 0;
    int rc;

    if (!u->was_read || !u->last_us)
        u->last_us = s->prev_us;
    u->was_read = 1;
    g->usamp_first = snap->n_usamp;
    g->usamp_n = 0;
    do {
        if (gs_snapshot_reserve_usamp(snap, snap->n_usamp + USAMP_BATCH, NULL) != GS_OK)
            break;
        rc = s->ops->util_samples(s->b, i, &u->last_us, snap->usamp + snap->n_usamp, USAMP_BATCH,
                                  &got, NULL);
        if (rc != GS_OK) {
            /* Absent for good (old driver, MIG) or gone; other errors: next cycle. */
            u->off = rc == GS_ENOTSUP || rc == GS_ELOST;
            if (g->usamp_n == 0)
                return;
            break;
        }
        snap->n_usamp += got;
        g->usamp_n += got;
    } while (got == USAMP_BATCH && ++rounds < USAMP_ROUNDS);
    g->usamp_st = GS_ST_OK;
}

static void usamp_all(struct gs_sampler *s, struct gs_snapshot *snap, unsigned want,
                      uint64_t now_us)
{
    for (unsigned i = 0; s->us && i < s->n_gpus; i++) {
        if (!(want & GS_WANT_UTIL_SAMPLES) || !s->ops->util_samples || s->us[i].off ||
            snap->gpus[i].lost)
            s->us[i].was_read = 0;
        else
            usamp_gpu(s, snap, i);
    }
    s->prev_us = now_us;
}

int gs_sampler_sample(struct gs_sampler *s, struct gs_snapshot *snap, unsigned want,
                      struct gs_err *err)
{
    struct gs_err first = {GS_OK, ""};
    unsigned failed = 0;
    int64_t real_ns;

    if (!s || !snap)
        return gs_err_set(err, GS_EINVAL, "sampler: no sampler or snapshot");
    if (snap->n_gpus < s->n_gpus)
        return gs_err_set(err, GS_EINVAL, "sampler: snapshot has room for %u GPUs, need %u",
                          snap->n_gpus, s->n_gpus);
    if (snap != s->fresh) /* one from gs_sampler_snapshot_new is as zero as a clear leaves it */
        gs_snapshot_clear(snap);
    s->fresh = NULL;
    real_ns = gs_clock_real_ns();
    snap->t_mono_ns = gs_clock_mono_ns();
    snap->t_real = (double)real_ns / 1e9;
    if (gethostname(snap->sys.hostname, sizeof snap->sys.hostname - 1) != 0)
        snap->sys.hostname[0] = '\0';
    snap->sys.hostname[sizeof snap->sys.hostname - 1] = '\0';
    s->ops->system(s->b, &snap->sys);
    snap->sys.gpu_count = s->n_gpus;

    if (s->ops->begin)
        s->ops->begin(s->b, want, NULL); /* events and GPM priming: best effort */
    for (unsigned i = 0; i < s->n_gpus; i++) {
        struct gs_err e;
        if (s->ops->sample(s->b, i, &snap->gpus[i], want, &e) != GS_OK) {
            if (failed++ == 0)
                first = e;
        }
    }
    if (failed == s->n_gpus) { /* nothing readable: the driver is gone */
        if (err)
            *err = first;
        return first.rc;
    }
    usamp_all(s, snap, want, (uint64_t)(real_ns / 1000));
    if ((want & GS_WANT_PROCS) && s->ops->processes) {
        for (unsigned i = 0; i < s->n_gpus; i++) {
            int rc;
            if (snap->gpus[i].lost)
                continue;
            rc = s->ops->processes(s->b, i, snap, want, err);
            if (rc == GS_ENOMEM)
                return rc; /* the list so far stays valid, but the caller must know */
        }
        fill_hosts(s, snap, (want & GS_WANT_PROC_HOST) != 0);
    }
    return GS_OK;
}

int gs_sampler_topology(struct gs_sampler *s, const unsigned char *sel, unsigned what,
                        struct gs_topo *t, unsigned n, struct gs_err *err)
{
    if (!s->ops->topology)
        return gs_err_set(err, GS_ENOTSUP, "%s: no topology", s->ops->name);
    return s->ops->topology(s->b, sel, what, t, n, err);
}

void gs_sampler_close(struct gs_sampler *s)
{
    if (!s)
        return;
    if (s->ops && s->b)
        s->ops->close(s->b);
    gs_procfs_close(s->pf);
    free(s->us);
    free(s);
}
