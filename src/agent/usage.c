/*
 * usage.c - GPU usage accounting (usage.h): the arithmetic, the holders of each GPU per
 * cycle, the current minute's rows, the (user, GPU) totals and the live jobs.
 */
#include "agent/usage.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/metrics.h"
#include "backend/procfs.h"
#include "base/hash.h"
#include "gpuscope/gs_err.h"

#define MIG_NONE 0xFFFFFFFFu
#define GIB 1073741824.0

/* ---- the arithmetic ---- */

void gs_usage_shares(unsigned n, const double *sm, int have_sm, double *share)
{
    double sum = 0;

    for (unsigned i = 0; have_sm && i < n; i++)
        sum += sm[i] > 0 ? sm[i] : 0;
    for (unsigned i = 0; i < n; i++)
        share[i] = have_sm && sum > 0 ? (sm[i] > 0 ? sm[i] : 0) / sum : 1.0 / n;
}

void gs_usage_accrue(struct gs_usage_acc *a, double dt, double t, double util, double share,
                     double mem_bytes, double energy_j)
{
    if (a->first_seen == 0 || t < a->first_seen)
        a->first_seen = t;
    if (t > a->last_seen)
        a->last_seen = t;
    if (!isnan(mem_bytes) && mem_bytes > a->peak_bytes)
        a->peak_bytes = mem_bytes;
    if (!(dt > 0))
        return;
    a->held_s += dt;
    if (!isnan(util)) {
        double busy = util * share;
        a->busy_s += busy * dt;
        if (busy < GS_USAGE_IDLE_BELOW)
            a->idle_s += dt;
    }
    if (!isnan(mem_bytes))
        a->mem_gib_s += mem_bytes / GIB * dt;
    if (!isnan(energy_j) && energy_j > 0)
        a->energy_j += energy_j;
}

/* ---- the module ---- */

/* One holder of a unit (a GPU, or a MIG instance) within a cycle. */
struct hold {
    struct gs_usage_holder h;
    uint32_t hash; /* holder_hash(h) */
    double sm, mem;
    int mem_ok;
};

/* A process's Slurm job from its environment, read once per process life. */
struct env_job {
    unsigned pid;
    double start_time;
    uint64_t seen; /* the cycle it was last in a snapshot */
    char job[24];
};

/* (user, GPU) totals since start: the counters. */
struct total {
    uint32_t hash; /* of uid, user, gpu, uuid */
    uint32_t uid;
    char user[GS_PROC_USER_LEN];
    unsigned gpu;
    char uuid[GS_STR_LEN];
    struct gs_usage_acc a;
};

/* A live job on a GPU: its gauges. */
struct live_job {
    uint32_t hash; /* of job, uid, gpu, uuid */
    char job[GS_USAGE_JOB_LEN];
    char user[GS_PROC_USER_LEN];
    uint32_t uid;
    unsigned gpu;
    char uuid[GS_STR_LEN];
    double idle_run_s; /* held continuously while idle, up to the last cycle */
    uint64_t seen;
};

struct gs_usage {
    pthread_mutex_t lock;
    struct gs_usage_opts o;
    uint64_t cycles, dropped;
    int64_t prev_mono_ns; /* 0: no cycle yet */
    double minute;        /* the current bucket's start; 0: none yet */
    struct gs_usage_row *rows;
    uint32_t *row_hash; /* of each row's holder, gpu and uuid: compared before the fields */
    unsigned n_rows, cap_rows;
    struct total *tot;
    unsigned n_tot, cap_tot;
    struct live_job *jobs;
    unsigned n_jobs, cap_jobs;
    struct env_job *env;
    unsigned n_env, cap_env;
    /* the energy counter of each GPU index at the previous cycle (NaN: none) */
    double *prev_energy;
    unsigned n_prev_energy;
    struct hold *hs; /* GS_USAGE_HOLDERS_PER_GPU: one unit's holders, reused every cycle */
};

static int grow(void **arr, unsigned *cap, unsigned need, size_t size)
{
    unsigned nc;
    void *p;

    if (need <= *cap)
        return 1;
    if (need > GS_USAGE_MAX_ROWS)
        return 0;
    nc = *cap ? *cap * 2 : 16;
    while (nc < need)
        nc *= 2;
    if (!(p = realloc(*arr, nc * size)))
        return 0;
    *arr = p;
    *cap = nc;
    return 1;
}

int gs_usage_new(struct gs_usage **out, const struct gs_usage_opts *o)
{
    struct gs_usage *u = calloc(1, sizeof *u);

    *out = NULL;
    if (!u || !(u->hs = malloc(GS_USAGE_HOLDERS_PER_GPU * sizeof *u->hs))) {
        free(u);
        return GS_ENOMEM;
    }
    pthread_mutex_init(&u->lock, NULL);
    u->o = *o;
    *out = u;
    return GS_OK;
}

void gs_usage_free(struct gs_usage *u)
{
    if (!u)
        return;
    pthread_mutex_destroy(&u->lock);
    free(u->rows);
    free(u->row_hash);
    free(u->tot);
    free(u->jobs);
    free(u->env);
    free(u->prev_energy);
    free(u->hs);
    free(u);
}

/* Lookups compare a hash first, so a scan costs one integer compare per entry that differs. */
static uint32_t hash_str(uint32_t h, const char *s)
{
    return gs_hash_fnv1a_add(h, s, strlen(s) + 1); /* the NUL separates the fields */
}

static uint32_t hash_u32(uint32_t h, uint32_t v)
{
    return gs_hash_fnv1a_add(h, &v, sizeof v);
}

static uint32_t holder_hash(const struct gs_usage_holder *h)
{
    uint32_t x = hash_u32(GS_HASH_FNV1A_INIT, h->uid);

    x = hash_str(x, h->user);
    x = hash_str(x, h->job);
    x = hash_str(x, h->pod);
    x = hash_str(x, h->ns);
    return hash_str(x, h->container);
}

static uint32_t unit_hash(uint32_t x, unsigned gpu, const char *uuid)
{
    return hash_str(hash_u32(x, gpu), uuid);
}

static int holder_eq(const struct gs_usage_holder *a, const struct gs_usage_holder *b)
{
    return a->uid == b->uid && strcmp(a->user, b->user) == 0 && strcmp(a->job, b->job) == 0 &&
           strcmp(a->pod, b->pod) == 0 && strcmp(a->ns, b->ns) == 0 &&
           strcmp(a->container, b->container) == 0;
}

/* SLURM_JOB_ID of a host process (cached by pid and start time); "" when none. */
static const char *env_slurm_job(struct gs_usage *u, const struct gs_proc *p)
{
    struct env_job *e;

    for (unsigned i = 0; i < u->n_env; i++)
        if (u->env[i].pid == p->pid && u->env[i].start_time == p->start_time) {
            u->env[i].seen = u->cycles;
            return u->env[i].job;
        }
    if (!grow((void **)&u->env, &u->cap_env, u->n_env + 1, sizeof *u->env)) {
        u->dropped++;
        return "";
    }
    e = &u->env[u->n_env++];
    memset(e, 0, sizeof *e);
    e->pid = p->pid;
    e->start_time = p->start_time;
    e->seen = u->cycles;
    if (gs_procfs_read_env(NULL, p->pid, "SLURM_JOB_ID", e->job, sizeof e->job) != GS_OK)
        e->job[0] = '\0';
    for (const char *c = e->job; *c; c++) /* a job id is digits (arrays: 123_4) */
        if (!((*c >= '0' && *c <= '9') || *c == '_')) {
            e->job[0] = '\0';
            break;
        }
    return e->job;
}

/* snprintf(dst, cap, "%s", src) without printf's cost (every process, every cycle): the
 * text, cut to cap - 1 bytes, NUL-terminated. */
static void copy_text(char *dst, size_t cap, const char *src)
{
    size_t n = strnlen(src, cap - 1);

    memcpy(dst, src, n);
    dst[n] = '\0';
}

static void holder_of(struct gs_usage *u, const struct gs_proc *p, struct gs_usage_holder *h)
{
    memset(h, 0, sizeof *h);
    h->uid = GS_USAGE_UID_UNKNOWN;
    if (p->host_st == GS_ST_OK) {
        h->uid = p->uid;
        copy_text(h->user, sizeof h->user, p->user);
    }
    copy_text(h->pod, sizeof h->pod, p->pod_name);
    copy_text(h->ns, sizeof h->ns, p->pod_namespace);
    copy_text(h->container, sizeof h->container, p->container_id);
    if (p->slurm_job[0])
        copy_text(h->job, sizeof h->job, p->slurm_job);
    else if (u->o.read_env && p->host_st == GS_ST_OK && !p->sim_only && *env_slurm_job(u, p))
        copy_text(h->job, sizeof h->job, env_slurm_job(u, p));
    else if (p->pod_name[0] && p->pod_namespace[0])
        snprintf(h->job, sizeof h->job, "%s/%s", p->pod_namespace, p->pod_name);
    else if (u->o.run_of && p->host_st == GS_ST_OK &&
             !u->o.run_of(u->o.run_ctx, p->pid, h->job, sizeof h->job))
        h->job[0] = '\0';
}

/* The row of (h, gpu, uuid) in the current minute, made when missing; NULL at the bound. */
static struct gs_usage_acc *row_acc(struct gs_usage *u, const struct gs_usage_holder *h,
                                    uint32_t hh, unsigned gpu, const char *uuid)
{
    uint32_t x = unit_hash(hh, gpu, uuid);
    struct gs_usage_row *r;
    unsigned cap = u->cap_rows;

    for (unsigned i = 0; i < u->n_rows; i++)
        if (u->row_hash[i] == x && u->rows[i].gpu == gpu && strcmp(u->rows[i].uuid, uuid) == 0 &&
            holder_eq(&u->rows[i].h, h))
            return &u->rows[i].a;
    if (!grow((void **)&u->rows, &cap, u->n_rows + 1, sizeof *u->rows))
        return NULL;
    if (cap != u->cap_rows) { /* the hashes follow the rows' capacity */
        uint32_t *p = realloc(u->row_hash, cap * sizeof *p);
        if (!p)
            return NULL;
        u->row_hash = p;
        u->cap_rows = cap;
    }
    u->row_hash[u->n_rows] = x;
    r = &u->rows[u->n_rows++];
    memset(r, 0, sizeof *r);
    r->t = u->minute;
    r->res = 60;
    r->gpu = gpu;
    snprintf(r->uuid, sizeof r->uuid, "%s", uuid);
    r->h = *h;
    return &r->a;
}

static struct gs_usage_acc *total_acc(struct gs_usage *u, const struct gs_usage_holder *h,
                                      unsigned gpu, const char *uuid)
{
    uint32_t x = unit_hash(hash_str(hash_u32(GS_HASH_FNV1A_INIT, h->uid), h->user), gpu, uuid);
    struct total *t;

    for (unsigned i = 0; i < u->n_tot; i++)
        if (u->tot[i].hash == x && u->tot[i].uid == h->uid && u->tot[i].gpu == gpu &&
            strcmp(u->tot[i].uuid, uuid) == 0 && strcmp(u->tot[i].user, h->user) == 0)
            return &u->tot[i].a;
    if (!grow((void **)&u->tot, &u->cap_tot, u->n_tot + 1, sizeof *u->tot))
        return NULL;
    t = &u->tot[u->n_tot++];
    memset(t, 0, sizeof *t);
    t->hash = x;
    t->uid = h->uid;
    snprintf(t->user, sizeof t->user, "%s", h->user);
    t->gpu = gpu;
    snprintf(t->uuid, sizeof t->uuid, "%s", uuid);
    return &t->a;
}

static void live_job(struct gs_usage *u, const struct gs_usage_holder *h, unsigned gpu,
                     const char *uuid, double dt, int idle)
{
    uint32_t x = unit_hash(hash_u32(hash_str(GS_HASH_FNV1A_INIT, h->job), h->uid), gpu, uuid);
    struct live_job *j = NULL;

    for (unsigned i = 0; i < u->n_jobs && !j; i++)
        if (u->jobs[i].hash == x && u->jobs[i].gpu == gpu && u->jobs[i].uid == h->uid &&
            strcmp(u->jobs[i].uuid, uuid) == 0 && strcmp(u->jobs[i].job, h->job) == 0)
            j = &u->jobs[i];
    if (!j) {
        if (!grow((void **)&u->jobs, &u->cap_jobs, u->n_jobs + 1, sizeof *u->jobs)) {
            u->dropped++;
            return;
        }
        j = &u->jobs[u->n_jobs++];
        memset(j, 0, sizeof *j);
        j->hash = x;
        snprintf(j->job, sizeof j->job, "%s", h->job);
        snprintf(j->user, sizeof j->user, "%s", h->user);
        j->uid = h->uid;
        j->gpu = gpu;
        snprintf(j->uuid, sizeof j->uuid, "%s", uuid);
    } else if (j->seen == u->cycles) { /* a second holder of the job (another container) */
        if (!idle)
            j->idle_run_s = 0;
        return;
    }
    j->idle_run_s = idle ? j->idle_run_s + dt : 0;
    j->seen = u->cycles;
}

/* Accounts the holders of one unit. */
static void account_unit(struct gs_usage *u, unsigned gpu, const char *uuid, struct hold *hs,
                         unsigned n, int have_sm, double util, double energy, double dt, double t)
{
    double share[GS_USAGE_HOLDERS_PER_GPU], sm[GS_USAGE_HOLDERS_PER_GPU] = {0};
    double busy_sum = 0;

    for (unsigned i = 0; i < n; i++)
        sm[i] = hs[i].sm;
    gs_usage_shares(n, sm, have_sm, share);
    for (unsigned i = 0; i < n; i++)
        busy_sum += isnan(util) ? 0 : util * share[i];
    for (unsigned i = 0; i < n; i++) {
        struct gs_usage_acc *ra = row_acc(u, &hs[i].h, hs[i].hash, gpu, uuid);
        struct gs_usage_acc *ta = total_acc(u, &hs[i].h, gpu, uuid);
        double mem = hs[i].mem_ok ? hs[i].mem : NAN;
        /* energy by busy share; equal parts of a GPU that did nothing */
        double e = isnan(energy) ? NAN : energy * (busy_sum > 0 ? share[i] : 1.0 / n);
        if (ra)
            gs_usage_accrue(ra, dt, t, util, share[i], mem, e);
        if (ta)
            gs_usage_accrue(ta, dt, t, util, share[i], mem, e);
        if (!ra || !ta)
            u->dropped++;
        if (hs[i].h.job[0])
            live_job(u, &hs[i].h, gpu, uuid, dt,
                     !isnan(util) && util * share[i] < GS_USAGE_IDLE_BELOW);
    }
}

/* Collects the holders of GPU gi's unit (mig: index into its MIG devices; -1 the GPU). */
static unsigned collect(struct gs_usage *u, const struct gs_snapshot *s, unsigned gi, int mig,
                        struct hold *hs, int *have_sm)
{
    const struct gs_gpu *g = &s->gpus[gi];
    unsigned n = 0;

    *have_sm = 0;
    for (unsigned k = 0; k < s->n_procs; k++) {
        const struct gs_proc *p = &s->procs[k];
        struct gs_usage_holder h;
        uint32_t hh;
        unsigned i;

        if (p->gpu != gi)
            continue;
        if (mig < 0 ? p->gi_id != MIG_NONE && g->n_mig > 0
                    : p->gi_id != g->mig[mig].gi_id || p->ci_id != g->mig[mig].ci_id)
            continue;
        holder_of(u, p, &h);
        hh = holder_hash(&h);
        for (i = 0; i < n; i++)
            if (hs[i].hash == hh && holder_eq(&hs[i].h, &h))
                break;
        if (i == n) {
            if (n == GS_USAGE_HOLDERS_PER_GPU) {
                u->dropped++;
                continue;
            }
            memset(&hs[n], 0, sizeof hs[n]);
            hs[n].h = h;
            hs[n].hash = hh;
            hs[n].mem_ok = 1;
            n++;
        }
        /* A process without a sample in the driver's window ran no kernel in it (nvml_proc.c):
         * 0; only a GPU with no per-process figure at all is split equally. */
        if (p->util_st == GS_ST_OK) {
            hs[i].sm += p->sm_util;
            *have_sm = 1;
        }
        if (p->mem_st == GS_ST_OK)
            hs[i].mem += (double)p->gpu_mem_bytes;
        else
            hs[i].mem_ok = 0;
    }
    return n;
}

/* Ends the current minute: its rows to emit. */
static void end_minute(struct gs_usage *u)
{
    if (u->n_rows && u->o.emit)
        u->o.emit(u->o.emit_ctx, u->rows, u->n_rows);
    u->n_rows = 0;
}

void gs_usage_cycle(struct gs_usage *u, const struct gs_snapshot *s)
{
    struct hold *hs = u->hs;
    double dt = 0, minute = floor(s->t_real / 60) * 60;

    pthread_mutex_lock(&u->lock);
    u->cycles++;
    if (u->prev_mono_ns && s->t_mono_ns > u->prev_mono_ns)
        dt = fmin((double)(s->t_mono_ns - u->prev_mono_ns) / 1e9, GS_USAGE_MAX_GAP_S);
    u->prev_mono_ns = s->t_mono_ns;
    if (u->minute != minute) {
        end_minute(u);
        u->minute = minute;
    }
    if (u->n_prev_energy < s->n_gpus) {
        double *pe = realloc(u->prev_energy, s->n_gpus * sizeof *pe);
        if (pe) {
            for (unsigned i = u->n_prev_energy; i < s->n_gpus; i++)
                pe[i] = NAN;
            u->prev_energy = pe;
            u->n_prev_energy = s->n_gpus;
        }
    }
    for (unsigned gi = 0; gi < s->n_gpus; gi++) {
        const struct gs_gpu *g = &s->gpus[gi];
        double energy = NAN, util = NAN;
        int have_sm;
        unsigned n;

        if (gi < u->n_prev_energy) {
            double e = gs_gpu_has(g, GS_M_ENERGY) ? g->v[GS_M_ENERGY] : NAN;
            if (!isnan(e) && !isnan(u->prev_energy[gi]) && e >= u->prev_energy[gi])
                energy = e - u->prev_energy[gi];
            u->prev_energy[gi] = e;
        }
        if (g->lost)
            continue;
        if (gs_gpu_has(g, GS_M_UTIL_GPU))
            util = g->v[GS_M_UTIL_GPU];
        n = collect(u, s, gi, -1, hs, &have_sm);
        if (n)
            account_unit(u, g->index, g->text[GS_T_UUID], hs, n, have_sm, util,
                         g->n_mig > 0 ? NAN : energy, dt, s->t_real);
        for (unsigned m = 0; m < g->n_mig && m < GS_MIG_MAX; m++) {
            const struct gs_mig *mg = &g->mig[m];
            double mu =
                mg->gpm_st[GS_MIG_GPM_SM_ACTIVE] == GS_ST_OK ? mg->gpm[GS_MIG_GPM_SM_ACTIVE] : NAN;
            if ((n = collect(u, s, gi, (int)m, hs, &have_sm)) > 0)
                account_unit(u, g->index, mg->uuid, hs, n, have_sm, mu, NAN, dt, s->t_real);
        }
    }
    /* jobs gone from their GPU, and processes gone from the environment cache */
    for (unsigned i = 0; i < u->n_jobs;)
        if (u->jobs[i].seen != u->cycles)
            u->jobs[i] = u->jobs[--u->n_jobs];
        else
            i++;
    for (unsigned i = 0; i < u->n_env;)
        if (u->env[i].seen != u->cycles)
            u->env[i] = u->env[--u->n_env];
        else
            i++;
    pthread_mutex_unlock(&u->lock);
}

void gs_usage_flush(struct gs_usage *u)
{
    if (!u)
        return;
    pthread_mutex_lock(&u->lock);
    end_minute(u);
    pthread_mutex_unlock(&u->lock);
}

void gs_usage_live(struct gs_usage *u, gs_usage_emit_fn fn, void *ctx)
{
    struct gs_usage_row *copy = NULL;
    unsigned n;

    /* copied under the lock, handed over outside it: the sampling thread never waits for a
     * request's merge */
    pthread_mutex_lock(&u->lock);
    n = u->n_rows;
    if (n && (copy = malloc(n * sizeof *copy)) != NULL)
        memcpy(copy, u->rows, n * sizeof *copy);
    pthread_mutex_unlock(&u->lock);
    if (copy)
        fn(ctx, copy, n);
    free(copy);
}

struct gs_usage_stats gs_usage_stats(struct gs_usage *u)
{
    struct gs_usage_stats st;

    pthread_mutex_lock(&u->lock);
    st = (struct gs_usage_stats){u->cycles, u->dropped, u->n_rows, u->n_tot, u->n_jobs};
    pthread_mutex_unlock(&u->lock);
    return st;
}

/* ---- /metrics ---- */

static void labels(struct gs_buf *b, unsigned gpu, const char *uuid, const char *job,
                   const char *user, uint32_t uid)
{
    gs_buf_printf(b, "{gpu=\"%u\",uuid=\"", gpu);
    gs_metrics_escape(b, uuid);
    if (job) {
        gs_buf_puts(b, "\",job_id=\"");
        gs_metrics_escape(b, job);
    }
    gs_buf_puts(b, "\",user=\"");
    if (user[0])
        gs_metrics_escape(b, user);
    else if (uid != GS_USAGE_UID_UNKNOWN)
        gs_buf_printf(b, "%u", (unsigned)uid);
    else
        gs_buf_puts(b, "unknown");
    gs_buf_puts(b, "\"}");
}

void gs_usage_render_prom(struct gs_usage *u, struct gs_buf *b, int64_t uid, unsigned what)
{
    static const struct {
        const char *name, *help;
        size_t off;
    } fam[] = {
        {"gpuscope_usage_held_seconds_total",
         "Seconds a process of the user had a context on the GPU.",
         offsetof(struct gs_usage_acc, held_s)},
        {"gpuscope_usage_busy_seconds_total",
         "GPU seconds the user kept busy: held seconds times utilization times the user's share.",
         offsetof(struct gs_usage_acc, busy_s)},
        {"gpuscope_usage_idle_held_seconds_total",
         "Seconds the user held the GPU while its busy ratio was below 5 %.",
         offsetof(struct gs_usage_acc, idle_s)},
        {"gpuscope_usage_memory_gib_seconds_total",
         "The user's GPU memory in GiB times seconds held.",
         offsetof(struct gs_usage_acc, mem_gib_s)},
        {"gpuscope_usage_energy_joules_total",
         "The GPU's energy while the user held it, split by busy share.",
         offsetof(struct gs_usage_acc, energy_j)},
    };
    int any;

    pthread_mutex_lock(&u->lock);
    for (size_t f = 0; (what & GS_USAGE_PROM_COUNTERS) && f < sizeof fam / sizeof fam[0]; f++) {
        any = 0;
        for (unsigned i = 0; i < u->n_tot; i++) {
            const struct total *t = &u->tot[i];
            if (uid >= 0 && GS_USAGE_UID(t->uid) != uid)
                continue;
            if (!any)
                gs_buf_printf(b, "# HELP %s %s\n# TYPE %s counter\n", fam[f].name, fam[f].help,
                              fam[f].name);
            any = 1;
            gs_buf_puts(b, fam[f].name);
            labels(b, t->gpu, t->uuid, NULL, t->user, t->uid);
            gs_buf_printf(b, " %.17g\n", *(const double *)((const char *)&t->a + fam[f].off));
        }
    }
    for (int f = 0; (what & GS_USAGE_PROM_JOBS) && f < 2; f++) {
        const char *name = f ? "gpuscope_job_gpu_idle_seconds" : "gpuscope_job_gpu_held";
        any = 0;
        for (unsigned i = 0; i < u->n_jobs; i++) {
            const struct live_job *j = &u->jobs[i];
            if (uid >= 0 && GS_USAGE_UID(j->uid) != uid)
                continue;
            if (!any)
                gs_buf_printf(b, "# HELP %s %s\n# TYPE %s gauge\n", name,
                              f ? "Seconds the live job has held the GPU continuously while its "
                                  "busy ratio was below 5 % (0 when busy)."
                                : "1 for each GPU a live job holds (Slurm job, NAMESPACE/POD or "
                                  "gpuscope run).",
                              name);
            any = 1;
            gs_buf_puts(b, name);
            labels(b, j->gpu, j->uuid, j->job, j->user, j->uid);
            if (f)
                gs_buf_printf(b, " %.17g\n", j->idle_run_s);
            else
                gs_buf_puts(b, " 1\n");
        }
    }
    if (what & GS_USAGE_PROM_COUNTERS)
        gs_buf_printf(
            b,
            "# HELP gpuscope_usage_dropped_total Holders or rows the usage accounting left "
            "out at its bounds.\n# TYPE gpuscope_usage_dropped_total counter\n"
            "gpuscope_usage_dropped_total %llu\n",
            (unsigned long long)u->dropped);
    pthread_mutex_unlock(&u->lock);
}
