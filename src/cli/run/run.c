/*
 * `gpuscope run [--out DIR] [--interval S] [--no-auto] -- CMD ARGS...`: runs a training
 * command and profiles it. CMD gets a step-record socket (GPUSCOPE_RUN_SOCKET, a
 * SOCK_SEQPACKET socket in a private 0700 directory, src/run/receiver.h) and, unless
 * --no-auto, the Python package's auto-instrumenting sitecustomize on PYTHONPATH. While CMD
 * runs, a sampler thread samples every --interval the GPUs that CMD's process tree uses (and
 * those its hello records name), plus the driver's own utilization samples in between where it
 * keeps them (~1/6 s), into the run aggregate (src/run/agg.h) and into
 * DIR/samples.db (the history store, src/store/history.h); every record received is appended
 * to DIR/steps.jsonl with the sender's SO_PEERCRED pid/uid. At exit DIR/metrics_report.json
 * is written and a summary printed to stderr, also after Ctrl-C. The exit status is CMD's
 * (128+N when a signal N killed it), 127 when CMD is not found, 126 when it cannot be
 * executed, 125 when gpuscope itself fails before CMD starts, 2 on bad usage. See docs/run.md.
 *
 * DIR/samples.db also holds the run itself (table `run`) and its step records (`step`),
 * schema v2 of docs/history.md.
 *
 * Threads: main (fork, signals, waitpid), the receiver's, and the sampler's. The records go
 * through the run's session (src/run/session.h: the aggregate, the time rule, the counters,
 * under its own lock), whose sink here is steps.jsonl and samples.db. One mutex
 * (struct run_ctx.mu) guards steps.jsonl and the hello devices; another (store_mu) the history
 * store, which the receiver feeds steps and the sampler snapshots.
 */
#include "cli/run/run_int.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/dirfile.h"
#include "base/term.h"
#include "base/userdir.h"
#include "cli/cli.h"
#include "client/agent_client.h"
#include "diag/diag.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"
#include "gpuscope/gs_sampler.h"
#include "run/agg.h"
#include "run/attrib.h"
#include "run/hang.h"
#include "run/receiver.h"
#include "run/record.h"
#include "run/runstacks.h"
#include "run/session.h"
#include "store/history.h"
#include "trace/window.h"

/* ---- records ---- */

/* --stop-after-steps: counts a step record of its rank (c->mu held); once every rank that sent
 * steps has sent the window's number, asks the stopper to stop CMD. */
static void run_count_step(struct run_ctx *c, const struct gs_step_rec *st)
{
    long n = c->opts ? c->opts->stop_after_steps : 0;
    unsigned long least = ULONG_MAX;

    if (n <= 0 || st->rank < 0 || st->rank >= RUN_MAX_RANKS || c->stop_asked)
        return;
    c->rank_steps[st->rank]++;
    for (int r = 0; r < RUN_MAX_RANKS; r++)
        if (c->rank_steps[r] && c->rank_steps[r] < least)
            least = c->rank_steps[r];
    if (least != ULONG_MAX && least >= (unsigned long)n) {
        c->stop_asked = 1;
        pthread_cond_broadcast(&c->cv);
    }
}

/* A record the session kept (session.h sink): the stacks sampler's ranks and steps, the
 * hello's devices, and the record as decoded (so only validated fields) in steps.jsonl with
 * who sent it. */
static void run_kept(void *vctx, const struct gs_peer *peer, const struct gs_record *rec)
{
    struct run_ctx *c = vctx;
    char buf[GS_RECORD_MAX + 64];
    struct gs_record shown;
    int n;

    /* a hello's resume token is the sender's and the agent's business, never in a file */
    if (rec->type == GS_REC_HELLO && rec->u.hello.token[0]) {
        shown = *rec;
        shown.u.hello.token[0] = '\0';
        n = gs_record_encode(&shown, buf, sizeof buf);
    } else {
        n = gs_record_encode(rec, buf, sizeof buf);
    }

    pthread_mutex_lock(&c->mu);
    switch (rec->type) {
    case GS_REC_HELLO:
        if (!c->hello_pid)
            c->hello_pid = peer->pid;
        gs_runstacks_add_rank(c->rs, peer->pid, rec->u.hello.rank >= 0 ? rec->u.hello.rank : 0);
        for (uint32_t i = 0; i < rec->u.hello.n_devices && i < GS_RECORD_MAX_DEVICES; i++)
            if (rec->u.hello.devices[i] >= 0 && rec->u.hello.devices[i] < GS_RECORD_MAX_DEVICES)
                c->cuda_dev[rec->u.hello.devices[i]] = 1;
        break;
    case GS_REC_STEP:
        gs_runstacks_step(c->rs, &rec->u.step);
        run_count_step(c, &rec->u.step);
        break;
    case GS_REC_END:
        gs_runstacks_end(c->rs);
        break;
    case GS_REC_LOG: /* kept in steps.jsonl below (the report page's training curves) */
        break;
    }
    if (c->steps && n > 1 && buf[0] == '{') {
        int ok = fprintf(c->steps, "{\"peer_pid\":%ld,\"peer_uid\":%lu,\"conn\":%llu,%s\n",
                         (long)peer->pid, (unsigned long)peer->uid,
                         (unsigned long long)peer->conn_id, buf + 1) > 0 &&
                 fflush(c->steps) == 0;
        if (ok)
            c->steps_lines++;
        else if (!c->steps_failed++)
            fprintf(stderr, "gpuscope run: writing steps.jsonl: %s\n", strerror(errno));
    }
    pthread_mutex_unlock(&c->mu);
}

/* A kept step into samples.db. Never counted dropped: the store counts what it could not
 * keep (said at the end) and steps.jsonl has every step. */
static int run_store_step(void *vctx, const struct gs_peer *peer, const struct gs_step_rec *step)
{
    struct run_ctx *c = vctx;

    if (!c->store)
        return GS_OK;
    pthread_mutex_lock(&c->store_mu);
    gs_store_run_step(c->store, c->run_id, step, peer->pid, peer->uid, NULL);
    /* run_flush_thread flushes every RUN_FLUSH_S; steps coming faster than the store's
     * buffer holds are flushed from here. */
    if (gs_store_stats(c->store).steps_buffered >= RUN_STEP_FLUSH)
        gs_store_flush(c->store, NULL);
    pthread_mutex_unlock(&c->store_mu);
    return GS_OK;
}

/* Steps dated before 2000 or before the run (CMD's start) are refused, as the agent does:
 * counted by the session, the first one's reason said when the run ends; not in steps.jsonl
 * nor the report. */
static void run_refused(void *vctx, const struct gs_peer *peer, const struct gs_record *rec,
                        enum gs_session_refusal what, const char *why, uint64_t nth)
{
    struct run_ctx *c = vctx;

    if (what != GS_SESSION_STEP_TIME || nth != 1)
        return;
    pthread_mutex_lock(&c->mu);
    snprintf(c->refused_why, sizeof c->refused_why, "pid %ld: step %llu: t0 %.3f is %s",
             (long)peer->pid, (unsigned long long)rec->u.step.step, rec->u.step.t_begin, why);
    pthread_mutex_unlock(&c->mu);
}

static void on_record(void *vctx, const struct gs_peer *peer, const struct gs_record *rec)
{
    struct run_ctx *c = vctx;

    gs_session_record(c->session, peer, rec);
}

static void on_reject(void *vctx, const struct gs_peer *peer, const char *why)
{
    struct run_ctx *c = vctx;

    pthread_mutex_lock(&c->mu);
    snprintf(c->last_reject, sizeof c->last_reject, "pid %ld: %s", (long)peer->pid, why);
    pthread_mutex_unlock(&c->mu);
}

static void on_close(void *vctx, const struct gs_peer *peer)
{
    struct run_ctx *c = vctx;

    (void)peer;
    pthread_mutex_lock(&c->mu);
    c->closed_conns++; /* compared with the receiver's count of connections */
    pthread_mutex_unlock(&c->mu);
}

/* ---- sampling ---- */

/* Adds to in_run the GPUs of CMD's process tree and those its hello records named, through
 * the CUDA_VISIBLE_DEVICES that CMD inherited (cvd; run/attrib.h). */
static void run_mark_gpus(struct run_ctx *c, struct gs_attrib_tree *tree, const char *cvd,
                          const struct gs_snapshot *snap, unsigned char *in_run,
                          unsigned char *proc_in_run)
{
    int32_t devices[GS_RECORD_MAX_DEVICES];
    pid_t root = c->child;
    struct gs_attrib a = {.pids = &root,
                          .n_pids = 1,
                          .descendants = 1,
                          .devices = devices,
                          .cvd_known = 1,
                          .cvd = cvd};

    pthread_mutex_lock(&c->mu);
    for (int d = 0; d < GS_RECORD_MAX_DEVICES; d++)
        if (c->cuda_dev[d])
            devices[a.n_devices++] = d;
    pthread_mutex_unlock(&c->mu);
    if (snap->n_procs > 0 && gs_attrib_tree_read(tree, snap, NULL) != 0)
        a.descendants = 0;
    gs_attrib_mark(&a, tree, snap, in_run);
    if (proc_in_run)
        gs_attrib_procs(&a, tree, snap, proc_in_run);
}

/* The watchdog's GPU readings (runstacks.h): the device's utilization and power, or on a GPU
 * that also runs processes not of CMD's tree, the SM utilization of the run's own processes
 * (NVML's per-process samples: a process without a sample in the window was idle, when the
 * GPU gave samples for any process; unknown when it gave none). */
static void run_stacks_gpus(struct run_ctx *c, const struct gs_attrib_tree *tree,
                            const struct gs_snapshot *snap, const unsigned char *in_run)
{
    pid_t root = c->child;
    struct gs_attrib a = {.pids = &root, .n_pids = 1, .descendants = 1};

    for (unsigned g = 0; g < snap->n_gpus; g++) {
        const struct gs_gpu *gp = &snap->gpus[g];
        unsigned others = 0, ours = 0, sampled = 0;
        double sm = 0;
        if (!in_run[g])
            continue;
        for (unsigned i = 0; i < snap->n_procs; i++) {
            const struct gs_proc *p = &snap->procs[i];
            int mine;
            if (p->gpu != g)
                continue;
            mine = gs_attrib_proc_ours(&a, tree, snap, i);
            others += !mine;
            ours += mine;
            if (p->util_st == GS_ST_OK) {
                sampled++;
                if (mine)
                    sm += p->sm_util;
            }
        }
        if (others && ours) {
            if (sampled)
                gs_runstacks_gpu(c->rs, snap->t_real, gp->index, fmin(sm, 1.0), -1, -1, 1);
            continue; /* no per-process samples: no reading (the watchdog's "unknown") */
        }
        if (gs_gpu_has(gp, GS_M_UTIL_GPU))
            gs_runstacks_gpu(c->rs, snap->t_real, gp->index, gp->v[GS_M_UTIL_GPU],
                             gs_gpu_has(gp, GS_M_POWER_DRAW) ? gp->v[GS_M_POWER_DRAW] : -1,
                             gs_gpu_has(gp, GS_M_POWER_LIMIT) ? gp->v[GS_M_POWER_LIMIT] : -1, 0);
    }
}

static void *run_sampler_thread(void *arg)
{
    struct run_ctx *c = arg;
    unsigned n = gs_sampler_gpu_count(c->sampler);
    struct gs_snapshot *snap = NULL;
    unsigned char *in_run = calloc(n ? n : 1, 1), *procs = NULL;
    unsigned procs_cap = 0;
    struct gs_attrib_tree tree = {0};
    const char *env_cvd = getenv("CUDA_VISIBLE_DEVICES");
    char cvd[1024];
    unsigned want;
    struct gs_err err;
    double next = gs_clock_mono_s();
    int failing = 0;

    if (!in_run || gs_snapshot_new(&snap, n, 64, &err) != GS_OK) {
        fprintf(stderr, "gpuscope run: sampler: out of memory\n");
        free(in_run);
        return NULL;
    }
    snprintf(cvd, sizeof cvd, "%s", env_cvd ? env_cvd : "");
    /* with the driver's utilization samples since the previous cycle (run/usamp.h) */
    want = GS_WANT_PROCS | GS_WANT_PROC_UTIL | GS_WANT_UTIL_SAMPLES |
           (gs_attrib_cvd_mig(cvd) ? GS_WANT_MIG : 0);
    pthread_mutex_lock(&c->mu);
    while (!c->stop) {
        struct timespec until;
        double now;

        pthread_mutex_unlock(&c->mu);
        if (gs_sampler_sample(c->sampler, snap, want, &err) == GS_OK) {
            failing = 0;
            if (snap->n_procs > procs_cap) { /* the run's processes among them */
                unsigned char *p = realloc(procs, snap->n_procs);
                if (p) {
                    procs = p;
                    procs_cap = snap->n_procs;
                }
            }
            run_mark_gpus(c, &tree, cvd, snap, in_run, snap->n_procs <= procs_cap ? procs : NULL);
            /* and what the driver sampled (~6 a second) on the run's GPUs since the previous
             * cycle (the sampler's open at first) */
            gs_session_snapshot(c->session, snap, in_run, 1);
            if (snap->n_procs && snap->n_procs <= procs_cap)
                gs_session_run_procs(c->session, snap, in_run, procs);
            if (c->rs)
                run_stacks_gpus(c, &tree, snap, in_run);
            pthread_mutex_lock(&c->store_mu);
            gs_store_append(c->store, snap, NULL);
            pthread_mutex_unlock(&c->store_mu);
        } else if (!failing++) {
            fprintf(stderr, "gpuscope run: GPU sample failed: %s\n", err.msg);
        }
        now = gs_clock_mono_s();
        /* Ticks on the grid of the first sample; an overrun skips to the next boundary. */
        next += c->interval_s;
        if (next < now)
            next = now + c->interval_s - fmod(now - next, c->interval_s);
        until.tv_sec = (time_t)next;
        until.tv_nsec = (long)((next - (double)until.tv_sec) * 1e9);
        pthread_mutex_lock(&c->mu);
        while (!c->stop && pthread_cond_timedwait(&c->cv, &c->mu, &until) != ETIMEDOUT)
            ;
    }
    pthread_mutex_unlock(&c->mu);
    gs_snapshot_free(snap);
    free(in_run);
    free(procs);
    gs_attrib_tree_free(&tree);
    return NULL;
}

/* Flushes samples.db every RUN_FLUSH_S while CMD runs, sampler or not, so that a directory
 * whose gpuscope run is killed holds the steps and samples up to then (steps.jsonl is
 * flushed at every record). A write error is said once here; the report says it again. */
static void *run_flush_thread(void *arg)
{
    struct run_ctx *c = arg;
    struct timespec until;
    struct gs_err err;
    int failing = 0;

    clock_gettime(CLOCK_MONOTONIC, &until);
    pthread_mutex_lock(&c->mu);
    while (!c->stop) {
        until.tv_sec += (time_t)RUN_FLUSH_S;
        while (!c->stop && pthread_cond_timedwait(&c->cv, &c->mu, &until) != ETIMEDOUT)
            ;
        if (c->stop)
            break;
        pthread_mutex_unlock(&c->mu);
        pthread_mutex_lock(&c->store_mu);
        gs_err_clear(&err);
        if (gs_store_flush(c->store, &err) != GS_OK) {
            c->store_failed++;
            if (!failing++)
                fprintf(stderr, "gpuscope run: samples.db: %s\n", err.msg);
        }
        pthread_mutex_unlock(&c->store_mu);
        pthread_mutex_lock(&c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* ---- --stop-after-steps ---- */

/* Waits for the window's last step (run_count_step), then stops CMD's process group: SIGTERM
 * (the package flushes its records on it), and SIGKILL to the group if CMD has not exited
 * --stop-grace seconds later. */
static void *run_stopper_thread(void *arg)
{
    struct run_ctx *c = arg;
    struct timespec until;
    pid_t pgid = c->child;

    pthread_mutex_lock(&c->mu);
    while (!c->stop && !c->child_exited && !c->stop_asked)
        pthread_cond_wait(&c->cv, &c->mu);
    if (c->stop || c->child_exited) {
        pthread_mutex_unlock(&c->mu);
        return NULL;
    }
    c->stopped = 1;
    pthread_mutex_unlock(&c->mu);
    kill(-pgid, SIGTERM);
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += (time_t)c->opts->stop_grace_s;
    until.tv_nsec += (long)((c->opts->stop_grace_s - floor(c->opts->stop_grace_s)) * 1e9);
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&c->mu);
    while (!c->stop && !c->child_exited &&
           pthread_cond_timedwait(&c->cv, &c->mu, &until) != ETIMEDOUT)
        ;
    if (!c->stop && !c->child_exited) {
        fprintf(stderr,
                "gpuscope run: the command did not stop within %g s of SIGTERM; SIGKILL to its "
                "process group\n",
                c->opts->stop_grace_s);
        kill(-pgid, SIGKILL);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* ---- the agent's run id ---- */

#define RUN_ID_WAIT_S 60.0 /* the agent's list is asked this long after CMD starts, at most */

/* When CMD's package also sends to the node's agent (GPUSCOPE_RUN_AGENT_SOCKET): once the
 * first hello came, the agent's /api/v1/runs (its HTTP unix socket, as `gpuscope report ID`
 * finds it) is asked every second for the running run whose pid is that hello's sender, and
 * its id printed once, for `gpuscope report ID` and the dashboard. Quiet when there is none. */
static void *run_id_thread(void *arg)
{
    struct run_ctx *c = arg;
    char sock[512];
    double until = gs_clock_mono_s() + RUN_ID_WAIT_S;

    if (!gs_agent_client_socket(sock, sizeof sock))
        return NULL;
    pthread_mutex_lock(&c->mu);
    while (!c->stop && gs_clock_mono_s() < until) {
        struct timespec ts;
        pid_t pid = c->hello_pid;
        pthread_mutex_unlock(&c->mu);
        if (pid > 0) {
            char *body = NULL;
            size_t len = 0;
            json_t *doc = NULL, *r;
            size_t i;
            long long id = -1;
            if (gs_agent_client_get(sock, "/api/v1/runs?limit=100", 1000, &body, &len, NULL) ==
                GS_OK)
                doc = json_loadb(body, len, 0, NULL);
            free(body);
            json_array_foreach(json_object_get(doc, "runs"), i, r)
            {
                const char *st = json_string_value(json_object_get(r, "state"));
                if (json_integer_value(json_object_get(r, "pid")) == pid && st &&
                    strcmp(st, "running") == 0)
                    id = (long long)json_integer_value(json_object_get(r, "id"));
            }
            json_decref(doc);
            if (id > 0) {
                fprintf(stderr,
                        "gpuscope run: the node's agent keeps this run as run %lld "
                        "(gpuscope report %lld; /api/v1/runs/%lld)\n",
                        id, id, id);
                return NULL;
            }
        }
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += 1;
        pthread_mutex_lock(&c->mu);
        if (!c->stop)
            pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* ---- report ---- */

/* argv as one shell-quoted string (for the report's "command"). */
static char *run_quote(char **argv)
{
    size_t cap = 1;
    char *s, *p;

    for (char **a = argv; *a; a++)
        cap += 4 * strlen(*a) + 3;
    s = malloc(cap);
    if (!s)
        return NULL;
    p = s;
    for (char **a = argv; *a; a++) {
        int plain = **a != '\0' && strspn(*a, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                              "0123456789_./:=@%+,-") == strlen(*a);
        if (a != argv)
            *p++ = ' ';
        if (plain) {
            p += sprintf(p, "%s", *a);
            continue;
        }
        *p++ = '\'';
        for (const char *q = *a; *q; q++) {
            if (*q == '\'') {
                memcpy(p, "'\\''", 4);
                p += 4;
            } else {
                *p++ = *q;
            }
        }
        *p++ = '\'';
    }
    *p = '\0';
    return s;
}

/* The run's tags as JSON text (malloc'ed; NULL: none): --tag K=V ..., else a valid
 * $GPUSCOPE_RUN_TAGS of the caller's (what CMD's package then sends). */
static char *run_tags_text(const struct run_opts *o)
{
    const char *env = getenv("GPUSCOPE_RUN_TAGS");
    json_t *tags;
    char *text;

    if (!o || !o->n_tags) {
        struct gs_record_tags t;
        struct gs_err err;
        json_t *j = env && *env ? json_loads(env, JSON_REJECT_DUPLICATES, NULL) : NULL;
        int ok = j && gs_record_tags_parse(j, "", &t, &err) == GS_OK && t.n > 0;
        json_decref(j);
        return ok ? strdup(env) : NULL;
    }
    tags = json_object();
    for (unsigned i = 0; tags && i < o->n_tags; i++) {
        const char *eq = strchr(o->tags[i], '=');
        char key[64];
        snprintf(key, sizeof key, "%.*s", (int)(eq - o->tags[i]), o->tags[i]);
        json_object_set_new(tags, key, json_string(eq + 1));
    }
    text = tags ? json_dumps(tags, JSON_COMPACT) : NULL;
    json_decref(tags);
    return text;
}

/* The run's row in samples.db (schema v3, with its tags); a failure only costs that row. */
static void run_store_begin(struct run_ctx *c, char **cmd)
{
    char host[256] = "";
    char *command = run_quote(cmd), *tags = run_tags_text(c->opts);
    struct gs_store_run run = {.name = c->opts && c->opts->name ? c->opts->name : c->default_name,
                               .source = "gpuscope-run",
                               .command = command,
                               .hostname = host,
                               .start_time = gs_clock_real_s(),
                               .tags = tags};
    struct gs_err err;

    gethostname(host, sizeof host - 1);
    if (gs_store_run_begin(c->store, &run, &c->run_id, &err) != GS_OK)
        fprintf(stderr, "gpuscope run: samples.db: %s\n", err.msg);
    free(command);
    free(tags);
}

/* run.name: --name, else the sender's (HF run_name), else script and start time; run.tags
 * from --tag (docs/run.md, RUN NAMES). */
static void run_name_report(const struct run_ctx *c, json_t *report)
{
    json_t *run = json_object_get(report, "run");
    const char *have = json_string_value(json_object_get(run, "name"));
    if (!json_is_object(run))
        return;
    if (c->opts && c->opts->name)
        json_object_set_new(run, "name", json_string(c->opts->name));
    else if ((!have || !*have) && c->default_name[0])
        json_object_set_new(run, "name", json_string(c->default_name));
    if (c->opts && c->opts->n_tags) {
        json_t *tags = json_object();
        for (unsigned i = 0; i < c->opts->n_tags; i++) {
            const char *eq = strchr(c->opts->tags[i], '=');
            char key[64];
            snprintf(key, sizeof key, "%.*s", (int)(eq - c->opts->tags[i]), c->opts->tags[i]);
            json_object_set_new(tags, key, json_string(eq + 1));
        }
        json_object_set_new(run, "tags", tags);
    }
}

/* "train.py 2026-12-01 20:45:10": the script (python's first non-option argument, the module
 * of -m) or the program, and the local start time. */
static void run_default_name(char *out, size_t len, char **cmd)
{
    const char *prog = strrchr(cmd[0], '/') ? strrchr(cmd[0], '/') + 1 : cmd[0];
    const char *what = prog;
    char when[32];
    time_t now = time(NULL);
    struct tm tm;

    if (strncmp(prog, "python", 6) == 0) {
        for (int i = 1; cmd[i]; i++) {
            if (strcmp(cmd[i], "-m") == 0 && cmd[i + 1]) {
                what = cmd[i + 1];
                break;
            }
            if (cmd[i][0] != '-') {
                what = strrchr(cmd[i], '/') ? strrchr(cmd[i], '/') + 1 : cmd[i];
                break;
            }
        }
    }
    localtime_r(&now, &tm);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    snprintf(out, len, "%.200s %s", what, when);
}

/* --tag K=V ... as $GPUSCOPE_RUN_TAGS (a JSON object), which CMD's package puts in its hello
 * (record.h "tags"), so that the node's agent keeps them too; they replace the caller's. */
static int run_tags_env(const struct run_opts *o)
{
    char *text = run_tags_text(o);
    int rc = text ? setenv("GPUSCOPE_RUN_TAGS", text, 1) : -1;

    free(text);
    return rc;
}

/* The names CMD's package puts in its hello, and the node's agent socket it also sends to. */
static int run_child_names(struct run_ctx *c, const struct run_opts *o)
{
    struct stat st;
    char user_sock[PATH_MAX];
    const char *agent = getenv("GPUSCOPE_AGENT_SOCKET");

    if ((o->job && setenv("GPUSCOPE_JOB", o->job, 1) != 0) ||
        (o->name && setenv("GPUSCOPE_RUN_NAME", o->name, 1) != 0) ||
        setenv("GPUSCOPE_RUN_DEFAULT_NAME", c->default_name, 1) != 0)
        return -1;
    if (o->n_tags && run_tags_env(o) != 0)
        return -1;
    if (o->log_steps >= 0) { /* the package's step lines (docs/python.md, LOG LINES) */
        char n[16];
        snprintf(n, sizeof n, "%d", o->log_steps);
        if (setenv("GPUSCOPE_LOG_STEPS", n, 1) != 0)
            return -1;
    }
    unsetenv("GPUSCOPE_RUN_AGENT_SOCKET");
    if (o->no_agent)
        return 0;
    /* the package's own lookup of the agent (docs/python.md, WHERE RECORDS GO) */
    if (!agent || agent[0] != '/') {
        agent = "/run/gpuscope/steps.sock";
        if ((stat(agent, &st) != 0 || !S_ISSOCK(st.st_mode)) &&
            gs_user_runtime_path(user_sock, sizeof user_sock, "steps.sock") == 0)
            agent = user_sock;
    }
    if (stat(agent, &st) == 0 && S_ISSOCK(st.st_mode))
        return setenv("GPUSCOPE_RUN_AGENT_SOCKET", agent, 1);
    return 0;
}

/* The report when DIR refused it (a full disk, an I/O error): in a new private directory
 * under $TMPDIR (else /tmp), whose path is left in path; "" when that fails too. */
static void run_report_elsewhere(const json_t *report, char *path, size_t len)
{
    const char *tmp = getenv("TMPDIR");
    char dir[PATH_MAX];
    struct gs_err gerr;

    path[0] = '\0';
    if (!tmp || !tmp[0] || strlen(tmp) > PATH_MAX - 64)
        tmp = "/tmp";
    snprintf(dir, sizeof dir, "%s/gpuscope-report-XXXXXX", tmp);
    if (!mkdtemp(dir)) {
        fprintf(stderr, "gpuscope run: the report could not be written elsewhere either (%s: %s)\n",
                dir, strerror(errno));
        return;
    }
    gs_err_clear(&gerr);
    if (snprintf(path, len, "%s/metrics_report.json", dir) >= (int)len)
        gs_err_set(&gerr, GS_EINVAL, "%s: path too long", dir);
    else
        gs_report_write(report, path, &gerr);
    if (gerr.rc != GS_OK) {
        fprintf(stderr, "gpuscope run: the report could not be written elsewhere either (%s)\n",
                gerr.msg);
        rmdir(dir);
        path[0] = '\0';
        return;
    }
    fprintf(stderr, "gpuscope run: the report was written to %s instead\n", path);
}

static int run_write_report(struct run_ctx *c, const char *dir, char **cmd, int exit_code,
                            int term_signal, const json_t *profile)
{
    long stopped_after = c->stopped ? c->opts->stop_after_steps : 0;
    char host[256] = "", path[PATH_MAX];
    char *command = run_quote(cmd), *text;
    struct gs_report_meta meta = {.command = command,
                                  .hostname = host,
                                  .exit_code = exit_code,
                                  .source = "gpuscope-run",
                                  .term_signal = term_signal,
                                  .profile = profile,
                                  .stop_signal = gs_runcli_stop_signal(),
                                  .job_start = c->job_start,
                                  .job_end = c->job_end,
                                  .stopped_after_steps = stopped_after};
    struct gs_err gerr;
    json_t *report;
    int rc = 0;

    gethostname(host, sizeof host - 1);
    report = gs_session_report(c->session, &meta);
    if (report)
        run_name_report(c, report);
    if (report && c->rs) {
        gs_runstacks_report(c->rs, report); /* "stacks", "hangs", DIR/stacks.svg, stacks.txt */
        gs_diag_stacks_findings(report, json_object_get(report, "findings"));
        gs_diag_hang_findings(report, json_object_get(report, "findings"));
    }
    free(command);
    if (report && c->store && c->run_id > 0) {
        text = json_dumps(report, JSON_COMPACT);
        if (gs_store_run_end(c->store, c->run_id, gs_clock_real_s(), exit_code, text, &gerr) !=
            GS_OK)
            fprintf(stderr, "gpuscope run: samples.db: %s\n", gerr.msg);
        free(text);
    }
    if (!report) {
        fprintf(stderr, "gpuscope run: out of memory building the report\n");
        return -1;
    }
    snprintf(path, sizeof path, "%s/metrics_report.json", dir);
    if (gs_report_write_at(report, c->dirfd, "metrics_report.json", &gerr) != GS_OK) {
        fprintf(stderr, "gpuscope run: %s\n", gerr.msg);
        rc = -1;
        run_report_elsewhere(report, path, sizeof path);
    }
    gs_report_print_summary(stderr, report, gs_term_use_color(GS_COLOR_AUTO, STDERR_FILENO));
    if (path[0])
        fprintf(stderr, "gpuscope run: report in %s\n", path);
    json_decref(report);
    return rc;
}

/* ---- main ---- */

static void default_outdir(char *out, size_t len)
{
    time_t now = time(NULL);
    struct tm tm;

    localtime_r(&now, &tm);
    strftime(out, len, "gpuscope-run-%Y%m%d-%H%M%S", &tm);
}

/* A private 0700 directory for the socket, short enough for sun_path. */
static int run_sockdir(char *dir, size_t dlen, char *sock, size_t slen)
{
    const char *tmp = getenv("TMPDIR");

    if (!tmp || !tmp[0] || strlen(tmp) > 60)
        tmp = "/tmp";
    snprintf(dir, dlen, "%s/gpuscope-run-XXXXXX", tmp);
    if (!mkdtemp(dir)) {
        fprintf(stderr, "gpuscope run: mkdtemp %s: %s\n", dir, strerror(errno));
        return -1;
    }
    snprintf(sock, slen, "%s/steps.sock", dir);
    return 0;
}

static void run_open_sampler(struct run_ctx *c, pid_t child, pthread_t *th, int *started)
{
    char pidbuf[24];
    struct gs_err err;

    /* Before NVML opens: nvml-sim scenarios map a process through this variable. */
    snprintf(pidbuf, sizeof pidbuf, "%ld", (long)child);
    setenv("GPUSCOPE_RUN_CHILD_PID", pidbuf, 1);
    c->child = child;
    gs_err_clear(&err);
    if (gs_sampler_open(&c->sampler, NULL, &err) != GS_OK) {
        fprintf(stderr, "gpuscope run: no GPU figures (%s); the report has step data only\n",
                err.msg);
        c->sampler = NULL;
        return;
    }
    *started = pthread_create(th, NULL, run_sampler_thread, c) == 0;
    if (!*started)
        fprintf(stderr, "gpuscope run: cannot start the sampler thread\n");
}

/* Waits until every connection the receiver accepted has closed, at most RUN_DRAIN_S: the
 * records CMD sent just before it exited are still queued on the socket. */
static void run_drain(struct run_ctx *c, struct gs_receiver *rx)
{
    double now = gs_clock_mono_s(), until = now + RUN_DRAIN_S, cap = now + RUN_DRAIN_MAX_S;
    uint64_t records = UINT64_MAX;

    for (;;) {
        struct gs_receiver_stats st;
        unsigned closed;

        gs_receiver_stats(rx, &st);
        pthread_mutex_lock(&c->mu);
        closed = c->closed_conns;
        pthread_mutex_unlock(&c->mu);
        if (closed >= st.connections && !gs_receiver_backlog(rx))
            return;
        now = gs_clock_mono_s();
        if (st.records != records) { /* still reading: a loaded machine, not a silent sender */
            records = st.records;
            until = now + RUN_DRAIN_S;
        }
        if (now >= until || now >= cap)
            return;
        usleep(10000);
    }
}

/* samples.db: SQLite opens by path, so the file is first made here exclusively through the
 * checked directory (no link, no file that was there), and after SQLite opened the path the
 * file it holds is checked to be that one (the directory's path still leads to the directory
 * we hold). SQLite's own -wal/-shm are refused up front (gs_runcli_open_outdir) and opened by
 * SQLite with O_NOFOLLOW. */
static int run_open_samples(struct run_ctx *c, const char *dir, const char *path,
                            struct gs_err *err)
{
    struct stat made, opened, dst, dpath;
    int fd = gs_dirfile_create(c->dirfd, "samples.db", O_RDWR, 0644), rc;

    if (fd < 0)
        return gs_err_set(err, GS_EIO, "create: %s", strerror(errno));
    rc = fstat(fd, &made) == 0 ? GS_OK : gs_err_set(err, GS_EIO, "fstat: %s", strerror(errno));
    close(fd);
    if (rc == GS_OK)
        rc = gs_store_open(&c->store, path, NULL, err);
    if (rc == GS_OK &&
        (stat(path, &opened) != 0 || opened.st_dev != made.st_dev || opened.st_ino != made.st_ino ||
         fstat(c->dirfd, &dst) != 0 || stat(dir, &dpath) != 0 || dst.st_dev != dpath.st_dev ||
         dst.st_ino != dpath.st_ino)) {
        gs_store_close(c->store);
        c->store = NULL;
        rc = gs_err_set(err, GS_EPERM,
                        "not the file gpuscope run created (%s was moved or replaced while "
                        "it opened)",
                        dir);
    }
    return rc;
}

static int run_session(const struct run_opts *o, const char *dir, int dirfd, int created)
{
    struct run_ctx c;
    struct gs_receiver *rx = NULL;
    struct gs_receiver_cb cb = {
        .ctx = &c, .on_record = on_record, .on_close = on_close, .on_reject = on_reject};
    /* the run's start is set just before CMD starts (gs_session_set_start) */
    struct gs_session_sink sink = {
        .ctx = &c, .kept = run_kept, .store_step = run_store_step, .refused = run_refused};
    struct gs_session_stats sst;
    struct gs_receiver_stats st;
    char sockdir[96], sock[128], path[PATH_MAX];
    pthread_t sth, fth, idth, stopth;
    int stopper_started = 0, sampler_started = 0, flusher_started = 0, id_started = 0, started = 0,
        code, term_signal = 0;
    pthread_condattr_t ca;
    sigset_t fwd, old;
    struct gs_err gerr;
    pid_t pid = 0;

    memset(&c, 0, sizeof c);
    pthread_mutex_init(&c.mu, NULL);
    pthread_mutex_init(&c.store_mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c.cv, &ca);
    pthread_condattr_destroy(&ca);
    c.interval_s = o->interval_s;
    c.dirfd = dirfd;
    gs_session_new(&c.session, NULL, &sink, NULL);
    snprintf(path, sizeof path, "%s/steps.jsonl", dir);
    {
        /* made here, exclusively, through the checked directory (base/dirfile.h) */
        int fd = gs_dirfile_create(dirfd, "steps.jsonl", O_WRONLY, 0644);
        c.steps = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (fd >= 0 && !c.steps)
            close(fd);
    }
    if (!c.session || !c.steps) {
        fprintf(stderr, "gpuscope run: %s: %s\n", path, c.session ? strerror(errno) : "no memory");
        code = RUN_EXIT_FAIL;
        goto out;
    }
    snprintf(path, sizeof path, "%s/samples.db", dir);
    if (run_open_samples(&c, dir, path, &gerr) != GS_OK) {
        fprintf(stderr, "gpuscope run: %s: %s\n", path, gerr.msg);
        code = RUN_EXIT_FAIL;
        goto out;
    }
    if (o->profile) { /* the profiler window's traces: a checked directory of ours */
        int pfd = gs_dirfile_subdir(dirfd, "profile", 0755, &gerr);
        if (pfd < 0) {
            fprintf(stderr, "gpuscope run: %s/%s\n", dir, gerr.msg);
            code = RUN_EXIT_FAIL;
            goto out;
        }
        close(pfd);
    }
    c.opts = o;
    run_default_name(c.default_name, sizeof c.default_name, o->cmd);
    run_store_begin(&c, o->cmd);
    /* Signals are blocked while the threads start so that only main ever handles them. */
    gs_runcli_signals(&fwd);
    pthread_sigmask(SIG_BLOCK, &fwd, &old);
    if (run_sockdir(sockdir, sizeof sockdir, sock, sizeof sock) != 0) {
        code = RUN_EXIT_FAIL;
        goto unblock;
    }
    if (gs_receiver_start(&rx, sock, 0600, &cb, &gerr) != GS_OK) {
        fprintf(stderr, "gpuscope run: %s\n", gerr.msg);
        rmdir(sockdir);
        code = RUN_EXIT_FAIL;
        goto unblock;
    }
    if (gs_runcli_child_env(sock, dir, o->auto_inject) != 0 || run_child_names(&c, o) != 0 ||
        (o->profile && gs_runcli_profile_env(dir, o->profile) != 0)) {
        code = RUN_EXIT_FAIL;
        goto unblock;
    }
    gs_session_set_start(c.session, gs_clock_real_s()); /* just before CMD starts */
    if (o->stacks_hz > 0) {
        char hz[32];
        struct gs_runstacks_cfg scfg = {.hz = o->stacks_hz,
                                        .hang_factor = o->hang_factor,
                                        .hang_min_s = o->hang_min_s,
                                        .dir = dir,
                                        .dirfd = dirfd};
        pthread_mutex_lock(&c.mu);
        if (gs_runstacks_start(&scfg, &c.rs, &gerr) != GS_OK)
            fprintf(stderr, "gpuscope run: --stacks: %s\n", gerr.msg);
        pthread_mutex_unlock(&c.mu);
        /* the package samples itself when nothing may read it from outside (stacks.py) */
        snprintf(hz, sizeof hz, "%g", o->stacks_hz);
        setenv("GPUSCOPE_STACKS_HZ", hz, 1);
        /* The NCCL flight recorder the watchdog dumps (python/gpuscope/_flight.py): on with
         * PyTorch's recommended size unless the user chose one (0 keeps it off). */
        if (o->hang_factor > 0)
            setenv("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000", 0);
    }
    c.job_start = gs_clock_real_s();
    pid = gs_runcli_spawn(o->cmd, &fwd, o->stop_after_steps > 0);
    if (pid < 0) {
        code = -pid;
        goto unblock;
    }
    gs_runcli_child_set(pid);
    started = 1;
    gs_runstacks_set_child(c.rs, pid);
    run_open_sampler(&c, pid, &sth, &sampler_started);
    flusher_started = c.store && pthread_create(&fth, NULL, run_flush_thread, &c) == 0;
    if (o->stop_after_steps > 0 &&
        !(stopper_started = pthread_create(&stopth, NULL, run_stopper_thread, &c) == 0))
        fprintf(stderr, "gpuscope run: cannot start the thread of --stop-after-steps\n");
    if (getenv("GPUSCOPE_RUN_AGENT_SOCKET"))
        id_started = pthread_create(&idth, NULL, run_id_thread, &c) == 0;
unblock:
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!started)
        goto out;
    code = gs_runcli_wait(pid, &term_signal);
    c.job_end = gs_clock_real_s();
    pthread_mutex_lock(&c.mu);
    c.child_exited = 1;
    pthread_cond_broadcast(&c.cv);
    pthread_mutex_unlock(&c.mu);
    if (stopper_started)
        pthread_join(stopth, NULL);
    if (c.stopped) {
        /* what CMD's stop left of its group (loader workers, a launcher's ranks) goes too */
        kill(-pid, SIGKILL);
        fprintf(stderr,
                "gpuscope run: stopped the command after its window of %ld step(s) "
                "(--stop-after-steps; it exited with %d)\n",
                o->stop_after_steps, code);
    }
    gs_runstacks_job_exit(c.rs, c.job_end);
    gs_runcli_child_set(0);
    run_drain(&c, rx);
    pthread_mutex_lock(&c.mu);
    c.stop = 1;
    pthread_cond_broadcast(&c.cv);
    pthread_mutex_unlock(&c.mu);
    if (sampler_started)
        pthread_join(sth, NULL);
    if (flusher_started)
        pthread_join(fth, NULL);
    if (id_started)
        pthread_join(idth, NULL);
    gs_receiver_stats(rx, &st);
    gs_receiver_stop(rx);
    rx = NULL;
    rmdir(sockdir);
    if (st.rejected)
        fprintf(stderr,
                "gpuscope run: %llu record(s) rejected, %llu connection(s) closed for "
                "bad records (last: %s)\n",
                (unsigned long long)st.rejected, (unsigned long long)st.closed_bad, c.last_reject);
    sst = gs_session_stats(c.session);
    if (sst.steps_refused)
        fprintf(stderr, "gpuscope run: %llu step record(s) refused for their time (first: %s)\n",
                (unsigned long long)sst.steps_refused, c.refused_why);
    if (c.store && gs_store_flush(c.store, &gerr) != GS_OK) {
        c.store_failed++;
        fprintf(stderr, "gpuscope run: samples.db: %s\n", gerr.msg);
    }
    if (c.store && gs_store_stats(c.store).steps_dropped)
        fprintf(stderr,
                "gpuscope run: samples.db: %llu step record(s) not stored "
                "(steps.jsonl has them all)\n",
                (unsigned long long)gs_store_stats(c.store).steps_dropped);
    if (gs_runcli_interrupted())
        fprintf(stderr, "gpuscope run: interrupted; writing the report of what ran\n");
    {
        json_t *prof = gs_trace_window_analyze(dir, o->profile, stderr);

        int report_failed = run_write_report(&c, dir, o->cmd, code, term_signal, prof) != 0;
        json_decref(prof);
        /* A full disk or an I/O error in DIR: said once more at the end, and a status of its
         * own when CMD itself succeeded (docs/run.md, EXIT STATUS) */
        if (c.stopped && code != 0 && !gs_runcli_stop_signal())
            code = 0; /* the stop was ours: the window was measured */
        if (report_failed || c.steps_failed || c.store_failed) {
            fprintf(stderr, "gpuscope run: %s is incomplete:%s%s%s (see the errors above)\n", dir,
                    c.steps_failed ? " steps.jsonl lacks records" : "",
                    c.store_failed ? " samples.db lacks data" : "",
                    report_failed ? " metrics_report.json was not written" : "");
            if (code == 0)
                code = RUN_EXIT_WRITE;
        }
    }
out:
    if (rx) {
        gs_receiver_stop(rx);
        rmdir(sockdir);
    }
    gs_runstacks_free(c.rs);
    gs_sampler_close(c.sampler);
    gs_store_close(c.store);
    if (c.steps)
        fclose(c.steps);
    gs_session_free(c.session);
    pthread_cond_destroy(&c.cv);
    pthread_mutex_destroy(&c.mu);
    pthread_mutex_destroy(&c.store_mu);
    if (!started)
        gs_runcli_remove_outputs(dirfd, dir, created); /* CMD never ran: leave nothing behind */
    return code;
}

int gs_cli_run(int argc, char **argv)
{
    struct run_opts o;
    char defdir[64];
    int created, dirfd, code;

    if (gs_runcli_parse(&o, argc, argv) != 0) {
        fprintf(stderr, "Try 'gpuscope run --help'.\n");
        return GS_EXIT_USAGE;
    }
    if (o.help) {
        gs_runcli_usage(stdout);
        return GS_EXIT_OK;
    }
    if (!gs_runcli_cmd_exists(o.cmd[0])) {
        fprintf(stderr, "gpuscope run: %s: command not found\n", o.cmd[0]);
        return RUN_EXIT_NOTFOUND;
    }
    if (!o.out) {
        default_outdir(defdir, sizeof defdir);
        o.out = defdir;
    }
    dirfd = gs_runcli_open_outdir(o.out, &created);
    if (dirfd < 0)
        return RUN_EXIT_FAIL;
    code = run_session(&o, o.out, dirfd, created);
    gs_runcli_give_to_sudo_user(dirfd, created);
    close(dirfd);
    return code;
}
