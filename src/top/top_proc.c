/*
 * `gpuscope top`'s process table and preferences, without ncurses (top.h): the rows of a
 * frame (one per process and GPU), the filter, the sort by any column, the tree (parents
 * from /proc/PID/stat, for processes on this machine), who may signal whom, the detail
 * screen's text (/proc/PID/cmdline, cgroup, environ, read through src/backend/procfs.c, and
 * the Python stack through src/stacks).
 */
#include "top/top.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/procfs.h"
#include "gpuscope/gs_err.h"
#include "stacks/collect.h"
#include "stacks/pyread.h"

void top_frame_free(struct top_frame *f)
{
    if (!f)
        return;
    for (unsigned i = 0; i < f->n_src; i++) {
        gs_snapshot_free(f->src[i].snap);
        free(f->src[i].hist);
        json_decref(f->src[i].runs);
        json_decref(f->src[i].reports);
    }
    free(f);
}

void top_fmt_bytes(char *out, size_t len, double b)
{
    static const char *const u[] = {"B", "K", "M", "G", "T", "P"};
    int i = 0;

    while (b >= 1024 && i < 5) {
        b /= 1024;
        i++;
    }
    if (i == 0)
        snprintf(out, len, "%.0f%s", b, u[i]);
    else
        snprintf(out, len, b < 10 ? "%.1f%s" : "%.0f%s", b, u[i]);
}

void top_fmt_duration(char *out, size_t len, double s)
{
    long t = s > 0 ? (long)s : 0;

    if (t >= 86400)
        snprintf(out, len, "%ldd%02ldh", t / 86400, t % 86400 / 3600);
    else if (t >= 3600)
        snprintf(out, len, "%ld:%02ld:%02ld", t / 3600, t % 3600 / 60, t % 60);
    else
        snprintf(out, len, "%ld:%02ld", t / 60, t % 60);
}

void top_job_label(const struct gs_proc *p, char *out, size_t len)
{
    static const char *const kinds[] = {"",       "docker", "containerd", "cri-o",
                                        "podman", "slurm",  "container"};

    if (p->pod_name[0] && p->pod_namespace[0])
        snprintf(out, len, "pod:%s/%s", p->pod_namespace, p->pod_name);
    else if (p->pod_uid[0])
        snprintf(out, len, "pod:%.8s", p->pod_uid);
    else if (p->slurm_job[0])
        snprintf(out, len, "slurm:%s", p->slurm_job);
    else if (p->container_id[0])
        snprintf(out, len, "%s:%.12s",
                 p->job_kind < sizeof kinds / sizeof kinds[0] && p->job_kind ? kinds[p->job_kind]
                                                                             : "ctr",
                 p->container_id);
    else
        out[0] = '\0';
}

unsigned long long top_proc_starttime(pid_t pid)
{
    struct gs_procfs_stat st;

    return gs_procfs_read_stat(NULL, (unsigned)pid, 0, &st) == GS_OK ? st.starttime : 0;
}

int top_proc_ppid(pid_t pid)
{
    struct gs_procfs_stat st;

    return gs_procfs_read_stat(NULL, (unsigned)pid, 0, &st) == GS_OK && st.ppid ? (int)st.ppid : -1;
}

int top_may_signal(const struct top_srcframe *s, const struct gs_proc *p, char *why, size_t len)
{
    uid_t me = geteuid();

    if (p->pid == 0) {
        snprintf(why, len, "hidden processes (the agent's visibility policy) cannot be signalled");
        return -1;
    }
    if (!s->local) {
        snprintf(why, len, "pid %u runs on %s: signal it there", p->pid, s->name);
        return -1;
    }
    if (p->host_st != GS_ST_OK) {
        snprintf(why, len, "pid %u is not in this pid namespace or has exited", p->pid);
        return -1;
    }
    if (me != 0 && p->uid != me) {
        snprintf(why, len, "pid %u belongs to %s (uid %u); you are uid %u and not root", p->pid,
                 p->user[0] ? p->user : "another user", (unsigned)p->uid, (unsigned)me);
        return -1;
    }
    return 0;
}

/* ---- rows ---- */

/* What the rows are sorted by: their frame and the user's sort (qsort_r's context). */
struct row_order {
    const struct top_frame *f;
    const struct top_filter_sort *fs;
};

static const struct gs_proc *row_proc(const struct top_frame *f, const struct top_row *r)
{
    return &f->src[r->src].snap->procs[r->proc];
}

static int cmp_num(double a, double b)
{
    return a < b ? -1 : a > b ? 1 : 0;
}

static int cmp_rows(const struct top_row *ra, const struct top_row *rb, const struct row_order *o)
{
    const struct top_filter_sort *fs = o->fs;
    const struct gs_proc *a = row_proc(o->f, ra), *b = row_proc(o->f, rb);
    int c = 0;

    switch (fs->sort) {
    case TOP_C_GPU:
        c = ra->src != rb->src ? cmp_num(ra->src, rb->src) : cmp_num(a->gpu, b->gpu);
        break;
    case TOP_C_PID:
        c = cmp_num(a->pid, b->pid);
        break;
    case TOP_C_USER:
        c = strcmp(a->user, b->user);
        break;
    case TOP_C_JOB:
        c = strcmp(ra->job, rb->job);
        break;
    case TOP_C_GMEM:
        c = cmp_num(a->mem_st == GS_ST_OK ? (double)a->gpu_mem_bytes : -1,
                    b->mem_st == GS_ST_OK ? (double)b->gpu_mem_bytes : -1);
        break;
    case TOP_C_SM:
        c = cmp_num(a->util_st == GS_ST_OK ? a->sm_util : -1,
                    b->util_st == GS_ST_OK ? b->sm_util : -1);
        break;
    case TOP_C_CPU:
        c = cmp_num(a->cpu_st == GS_ST_OK ? a->cpu_ratio : -1,
                    b->cpu_st == GS_ST_OK ? b->cpu_ratio : -1);
        break;
    case TOP_C_HMEM:
        c = cmp_num(a->host_st == GS_ST_OK ? (double)a->rss_bytes : -1,
                    b->host_st == GS_ST_OK ? (double)b->rss_bytes : -1);
        break;
    case TOP_C_TIME: /* running time: an earlier start is longer */
        c = cmp_num(b->start_time > 0 ? b->start_time : 1e18,
                    a->start_time > 0 ? a->start_time : 1e18);
        break;
    case TOP_C_CMD:
        c = strcmp(a->cmdline[0] ? a->cmdline : a->name, b->cmdline[0] ? b->cmdline : b->name);
        break;
    default:
        break;
    }
    /* numbers sort largest first by default (what a user looks for), text A to Z */
    if (fs->sort >= TOP_C_GMEM && fs->sort <= TOP_C_TIME)
        c = -c;
    if (fs->reverse)
        c = -c;
    if (c == 0)
        c = cmp_num(ra->src, rb->src) ? cmp_num(ra->src, rb->src)
            : a->pid != b->pid        ? cmp_num(a->pid, b->pid)
                                      : cmp_num(a->gpu, b->gpu);
    return c;
}

static int qcmp(const void *x, const void *y, void *order)
{
    return cmp_rows(x, y, order);
}

static int matches(const struct gs_proc *p, const struct top_row *r, const char *f)
{
    char pid[16];

    if (!f || !f[0])
        return 1;
    snprintf(pid, sizeof pid, "%u", p->pid);
    return strcasestr(p->cmdline, f) || strcasestr(p->name, f) || strcasestr(p->user, f) ||
           strcasestr(r->job, f) || strcmp(pid, f) == 0 || strcasestr(r->gpu, f) != NULL;
}

/* Orders rows as a forest: each row after its parent (the nearest ancestor in the table),
 * siblings in sort order. out must hold n rows. */
static void tree_order(struct top_row *rows, size_t n, struct top_row *out)
{
    size_t k = 0;
    unsigned char *done = calloc(n ? n : 1, 1);
    size_t *stack = malloc((n ? n : 1) * sizeof *stack);
    int *parent = malloc((n ? n : 1) * sizeof *parent);

    if (!done || !stack || !parent) {
        memcpy(out, rows, n * sizeof *rows);
        free(done);
        free(stack);
        free(parent);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        parent[i] = -1;
        /* the nearest ancestor listed in the table (up to 16 generations) */
        int pp = rows[i].ppid;
        for (int gen = 0; gen < 16 && pp > 1 && parent[i] < 0; gen++) {
            for (size_t j = 0; j < n; j++)
                if (j != i && rows[j].src == rows[i].src && (int)rows[j].pid == pp &&
                    rows[j].pid != rows[i].pid) {
                    parent[i] = (int)j;
                    break;
                }
            if (parent[i] < 0)
                pp = top_proc_ppid(pp);
        }
    }
    for (size_t root = 0; root < n; root++) {
        size_t sp = 0;
        if (done[root] || parent[root] >= 0)
            continue;
        stack[sp++] = root;
        while (sp) {
            size_t i = stack[--sp];
            if (done[i])
                continue;
            done[i] = 1;
            out[k] = rows[i];
            out[k].depth = 0;
            for (int p = parent[i]; p >= 0 && out[k].depth < 8; p = parent[p])
                out[k].depth++;
            k++;
            /* children in reverse so that the first sorted child pops first */
            for (size_t j = n; j-- > 0;)
                if (parent[j] == (int)i && !done[j] && sp < n)
                    stack[sp++] = j;
        }
    }
    for (size_t i = 0; i < n; i++) /* a parent cycle (pid reuse): append what is left */
        if (!done[i])
            out[k++] = rows[i];
    for (size_t i = 0; i < k; i++) {
        out[i].prefix[0] = '\0';
        if (out[i].depth) {
            size_t o = 0;
            for (unsigned d = 1; d < out[i].depth && o + 3 < sizeof out[i].prefix; d++)
                o += (size_t)snprintf(out[i].prefix + o, sizeof out[i].prefix - o, "  ");
            snprintf(out[i].prefix + o, sizeof out[i].prefix - o, "`-");
        }
    }
    free(done);
    free(stack);
    free(parent);
}

size_t top_rows_build(const struct top_frame *f, const struct top_filter_sort *fs,
                      struct top_row **rows, size_t *cap)
{
    size_t n = 0;

    for (unsigned si = 0; si < f->n_src; si++) {
        const struct gs_snapshot *s = f->src[si].snap;
        if (!s)
            continue;
        for (unsigned pi = 0; pi < s->n_procs; pi++) {
            const struct gs_proc *p = &s->procs[pi];
            struct top_row r = {.src = si, .proc = pi, .pid = p->pid, .ppid = -1};
            if (n + 1 > *cap) {
                size_t nc = *cap ? *cap * 2 : 128;
                struct top_row *nr = realloc(*rows, nc * sizeof *nr);
                if (!nr)
                    return n;
                *rows = nr;
                *cap = nc;
            }
            top_job_label(p, r.job, sizeof r.job);
            if (f->n_src > 1)
                snprintf(r.gpu, sizeof r.gpu, "%.12s/%u", f->src[si].name,
                         p->gpu < s->n_gpus ? s->gpus[p->gpu].index : p->gpu);
            else
                snprintf(r.gpu, sizeof r.gpu, "%u",
                         p->gpu < s->n_gpus ? s->gpus[p->gpu].index : p->gpu);
            if (p->gi_id != 0xFFFFFFFFu && p->gi_id != 0)
                snprintf(r.gpu + strlen(r.gpu), sizeof r.gpu - strlen(r.gpu), ":%u", p->gi_id);
            if (!matches(p, &r, fs->filter))
                continue;
            if (fs->tree && f->src[si].local && p->pid)
                r.ppid = top_proc_ppid((pid_t)p->pid);
            (*rows)[n++] = r;
        }
    }
    qsort_r(*rows, n, sizeof **rows, qcmp, &(struct row_order){f, fs});
    if (fs->tree && n > 1) {
        struct top_row *out = malloc(n * sizeof *out);
        if (out) {
            tree_order(*rows, n, out);
            memcpy(*rows, out, n * sizeof *out);
            free(out);
        }
    }
    return n;
}

/* ---- the detail screen ---- */

/* The file name of process pid (at most max bytes), malloc'ed and NUL-terminated; NULL with
 * errno set when it cannot be read. */
static char *read_file(unsigned pid, const char *name, size_t max, size_t *len)
{
    char *buf = malloc(max + 1);
    long n;
    int e;

    *len = 0;
    if (!buf)
        return NULL;
    n = gs_procfs_read_text(NULL, pid, 0, name, buf, max + 1);
    if (n < 0) {
        e = errno;
        free(buf);
        errno = e;
        return NULL;
    }
    *len = (size_t)n;
    return buf;
}

static int is_python(const struct gs_proc *p)
{
    return strncmp(p->name, "python", 6) == 0 || strstr(p->cmdline, "python") != NULL;
}

char *top_proc_detail(const struct top_srcframe *s, const struct gs_proc *p, int stack)
{
    char *out = NULL, b1[32], b2[32];
    size_t olen = 0, n;
    FILE *f = open_memstream(&out, &olen);
    char *buf;
    const struct gs_gpu *g = s->snap && p->gpu < s->snap->n_gpus ? &s->snap->gpus[p->gpu] : NULL;

    if (!f)
        return NULL;
    fprintf(f, "pid %u on %s, GPU %u%s%s\n", p->pid, s->name, g ? g->index : p->gpu, g ? " " : "",
            g ? g->text[GS_T_NAME] : "");
    if (p->host_st == GS_ST_OK)
        fprintf(f, "user %s (uid %u)\n", p->user[0] ? p->user : "?", (unsigned)p->uid);
    if (p->mem_st == GS_ST_OK) {
        top_fmt_bytes(b1, sizeof b1, (double)p->gpu_mem_bytes);
        fprintf(f, "GPU memory %s\n", b1);
    }
    if (p->util_st == GS_ST_OK)
        fprintf(f, "SM %.0f %%, memory %.0f %%, encoder %.0f %%, decoder %.0f %%\n",
                p->sm_util * 100, p->mem_util * 100, p->enc_util * 100, p->dec_util * 100);
    if (p->host_st == GS_ST_OK) {
        top_fmt_bytes(b2, sizeof b2, (double)p->rss_bytes);
        fprintf(f, "host memory %s", b2);
        if (p->cpu_st == GS_ST_OK)
            fprintf(f, ", CPU %.0f %%", p->cpu_ratio * 100);
        fprintf(f, "\n");
    }
    top_job_label(p, b1, sizeof b1);
    if (b1[0])
        fprintf(f, "job %s%s%s%s%s\n", b1, p->pod_uid[0] ? " pod " : "", p->pod_uid,
                p->container_id[0] ? " container " : "", p->container_id);
    if (!s->local || p->pid == 0 || p->host_st != GS_ST_OK) {
        fprintf(f,
                "\ncommand: %s\n(details from /proc are read only for processes in this "
                "machine's pid namespace)\n",
                p->cmdline[0] ? p->cmdline : p->name);
        fclose(f);
        return out;
    }
    buf = read_file(p->pid, "cmdline", 65536, &n);
    fprintf(f, "\ncommand line:\n  ");
    if (buf && n) {
        for (size_t i = 0; i + 1 < n; i++)
            if (buf[i] == '\0')
                buf[i] = ' ';
        fprintf(f, "%s\n", buf);
    } else {
        fprintf(f, "%s (from the sampler; /proc/%u/cmdline unreadable)\n",
                p->cmdline[0] ? p->cmdline : p->name, p->pid);
    }
    free(buf);
    buf = read_file(p->pid, "environ", 1 << 20, &n);
    if (buf) {
        const char *v = NULL;
        for (size_t i = 0; i < n; i += strlen(buf + i) + 1)
            if (strncmp(buf + i, "CUDA_VISIBLE_DEVICES=", 21) == 0)
                v = buf + i + 21;
        fprintf(f, "\nCUDA_VISIBLE_DEVICES: %s\n", v ? v : "(not set)");
    } else {
        fprintf(f, "\nCUDA_VISIBLE_DEVICES: (environment not readable: %s)\n", strerror(errno));
    }
    free(buf);
    if (is_python(p)) {
        fprintf(f, "\nPython stack");
        if (!stack) {
            fprintf(f, ": press s to read it (gpuscope stacks)\n");
        } else {
            struct gs_pyread *r = NULL;
            struct gs_pysample *smp = malloc(sizeof *smp);
            struct gs_err e = {0};
            fprintf(f, " (s reads it again):\n");
            if (!smp) {
                fprintf(f, "  out of memory\n");
            } else if (gs_pyread_find((pid_t)p->pid, &r, &e) != GS_OK ||
                       gs_pyread_sample(r, 0, smp, &e) != GS_OK) {
                fprintf(f, "  %s\n", e.msg[0] ? e.msg : "could not read the stack");
            } else {
                gs_collect_dump(r, (pid_t)p->pid, smp, f);
            }
            gs_pyread_close(r);
            free(smp);
        }
    }
    buf = read_file(p->pid, "cgroup", 8192, &n);
    fprintf(f, "\ncgroup:\n");
    if (buf && n) {
        char *line, *save = NULL;
        for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
            fprintf(f, "  %s\n", line);
    } else {
        fprintf(f, "  (unreadable)\n");
    }
    free(buf);
    fclose(f);
    return out;
}
