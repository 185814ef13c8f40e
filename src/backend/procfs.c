/*
 * Process details from procfs (see procfs.h for the contract).
 *
 * Parsers work on (text, len) so they never read past what the kernel gave us, even when a
 * file was cut at our buffer size. The reader opens each /proc/PID file with open/read/close
 * into a stack buffer (stdio would allocate), keeps one small record per pid for the CPU
 * ratio, and caches uid -> user name because getpwuid_r may go to NSS/LDAP.
 */
#include "backend/procfs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/k8s.h"
#include "gpuscope/gs_err.h"

#define PF_ROOT_MAX 200
#define PF_STAT_BUF 2048
#define PF_CMDLINE_BUF 4096
#define PF_STATUS_BUF 4096
#define PF_CGROUP_BUF 8192

/* ---- small text helpers ----------------------------------------------------------------- */

static int is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Length of the run of hex digits at s (at most n). */
static size_t hex_run(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && is_hex(s[i]))
        i++;
    return i;
}

static int has_prefix(const char *s, size_t n, const char *pre)
{
    size_t k = strlen(pre);
    return n >= k && memcmp(s, pre, k) == 0;
}

static int has_suffix(const char *s, size_t n, const char *suf)
{
    size_t k = strlen(suf);
    return n >= k && memcmp(s + n - k, suf, k) == 0;
}

/* Finds needle in s[0..n). */
static const char *find_in(const char *s, size_t n, const char *needle)
{
    size_t k = strlen(needle);
    for (size_t i = 0; k <= n && i + k <= n; i++)
        if (memcmp(s + i, needle, k) == 0)
            return s + i;
    return NULL;
}

static void copy_n(char *dst, size_t cap, const char *src, size_t n)
{
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static int parse_ull(const char **p, const char *end, unsigned long long *out)
{
    const char *s = *p;
    unsigned long long v = 0;

    while (s < end && *s == ' ')
        s++;
    if (s >= end || !is_digit(*s))
        return -1;
    while (s < end && is_digit(*s)) {
        unsigned d = (unsigned)(*s - '0');
        if (v > (ULLONG_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
        s++;
    }
    *p = s;
    *out = v;
    return 0;
}

/* Skips one space-separated token (which may be negative or non-numeric). */
static int skip_token(const char **p, const char *end)
{
    const char *s = *p;
    while (s < end && *s == ' ')
        s++;
    if (s >= end)
        return -1;
    while (s < end && *s != ' ' && *s != '\n')
        s++;
    *p = s;
    return 0;
}

/* ---- /proc/PID/stat --------------------------------------------------------------------- */

int gs_procfs_parse_stat(const char *text, size_t len, struct gs_procfs_stat *out)
{
    const char *open = memchr(text, '(', len);
    const char *close = NULL, *p, *end = text + len;
    unsigned long long v;

    if (!open)
        return GS_EPARSE;
    for (const char *q = end; q > open + 1;) /* the LAST ')' ends the name */
        if (*--q == ')') {
            close = q;
            break;
        }
    if (!close)
        return GS_EPARSE;
    memset(out, 0, sizeof *out);
    copy_n(out->comm, sizeof out->comm, open + 1, (size_t)(close - open - 1));
    p = close + 1;
    while (p < end && *p == ' ')
        p++;
    if (p >= end)
        return GS_EPARSE;
    out->state = *p++;
    /* After the state come fields 4..: ppid pgrp session tty_nr tpgid flags minflt cminflt
     * majflt cmajflt utime(14) stime(15) cutime cstime priority nice num_threads itrealvalue
     * starttime(22) vsize rss(24). Some of the skipped ones can be negative. */
    for (int field = 4; field <= 24; field++) {
        if (field == 4 || field == 14 || field == 15 || field == 22 || field == 24) {
            if (parse_ull(&p, end, &v) != 0)
                return GS_EPARSE;
            if (field == 4)
                out->ppid = v;
            else if (field == 14)
                out->utime = v;
            else if (field == 15)
                out->stime = v;
            else if (field == 22)
                out->starttime = v;
            else
                out->rss_pages = v > LLONG_MAX ? LLONG_MAX : (long long)v;
        } else if (skip_token(&p, end) != 0) {
            return GS_EPARSE;
        }
    }
    return GS_OK;
}

/* ---- /proc/PID/cmdline ------------------------------------------------------------------ */

size_t gs_procfs_join_cmdline(const char *raw, size_t len, char *out, size_t cap)
{
    size_t n = 0, keep;

    if (cap == 0)
        return 0;
    while (len > 0 && raw[len - 1] == '\0')
        len--;
    keep = len < cap ? len : (cap > 4 ? cap - 4 : cap - 1);
    for (size_t i = 0; i < keep; i++) {
        unsigned char c = (unsigned char)raw[i];
        out[n++] = (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
    }
    if (keep < len && cap > 4) {
        memcpy(out + n, "...", 3);
        n += 3;
    }
    out[n] = '\0';
    return n;
}

/* ---- /proc/PID/status, /proc/stat ------------------------------------------------------- */

/* Finds a line starting with key and returns a pointer after it, or NULL. */
static const char *find_line(const char *text, size_t len, const char *key, const char **end)
{
    const char *p = text, *stop = text + len;
    size_t k = strlen(key);

    while (p < stop) {
        const char *nl = memchr(p, '\n', (size_t)(stop - p));
        const char *le = nl ? nl : stop;
        if ((size_t)(le - p) >= k && memcmp(p, key, k) == 0) {
            *end = le;
            return p + k;
        }
        p = le + 1;
    }
    return NULL;
}

int gs_procfs_parse_uid(const char *text, size_t len, uint32_t *uid)
{
    const char *end, *p = find_line(text, len, "Uid:", &end);
    unsigned long long v;

    if (!p)
        return GS_EPARSE;
    while (p < end && (*p == '\t' || *p == ' '))
        p++;
    if (parse_ull(&p, end, &v) != 0 || v > UINT32_MAX)
        return GS_EPARSE;
    *uid = (uint32_t)v;
    return GS_OK;
}

/* The n-th (0-based) of the numbers after key on its line of a status text. */
static int status_field(const char *text, size_t len, const char *key, unsigned n, uint32_t *out)
{
    const char *end, *p = find_line(text, len, key, &end);
    unsigned long long v = 0;

    if (!p)
        return -1;
    for (unsigned i = 0; i <= n; i++) {
        while (p < end && (*p == '\t' || *p == ' '))
            p++;
        if (parse_ull(&p, end, &v) != 0 || v > UINT32_MAX)
            return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

int gs_procfs_parse_creds(const char *text, size_t len, struct gs_procfs_creds *c)
{
    const char *end, *p;

    memset(c, 0, sizeof *c);
    /* Uid:/Gid: real, effective, saved, file-system: the last is what file access checks */
    if (status_field(text, len, "Uid:", 3, &c->uid) != 0 ||
        status_field(text, len, "Gid:", 3, &c->gid) != 0)
        return GS_EPARSE;
    p = find_line(text, len, "Groups:", &end);
    while (p && p < end) {
        unsigned long long v;
        while (p < end && (*p == '\t' || *p == ' '))
            p++;
        if (p >= end)
            break;
        if (parse_ull(&p, end, &v) != 0 || v > UINT32_MAX)
            return GS_EPARSE;
        if (c->ngroups >= GS_PROCFS_MAX_GROUPS)
            return GS_EPARSE; /* more than we keep: a check on a partial list would be wrong */
        c->groups[c->ngroups++] = (uint32_t)v;
    }
    return GS_OK;
}

int gs_procfs_read_creds(unsigned pid, struct gs_procfs_creds *c)
{
    char buf[4096];
    long n = gs_procfs_read_text(NULL, pid, 0, "status", buf, sizeof buf);

    if (n <= 0)
        return GS_ENOTFOUND;
    return gs_procfs_parse_creds(buf, (size_t)n, c);
}

int gs_procfs_parse_btime(const char *text, size_t len, long long *btime)
{
    const char *end, *p = find_line(text, len, "btime ", &end);
    unsigned long long v;

    if (!p || parse_ull(&p, end, &v) != 0 || v > LLONG_MAX)
        return GS_EPARSE;
    *btime = (long long)v;
    return GS_OK;
}

/* ---- /proc/PID/cgroup ------------------------------------------------------------------- */

/* A container id: 12..64 hex digits filling the whole span. */
static int take_id(const char *s, size_t n, struct gs_procfs_job *job, uint8_t kind)
{
    if (n < 12 || n > 64 || hex_run(s, n) != n)
        return 0;
    if (job->kind != GS_JOB_NONE)
        return 1;
    job->kind = kind;
    copy_n(job->container_id, sizeof job->container_id, s, n);
    return 1;
}

/* "<prefix><id>.scope" or "<prefix><id>" */
static int scoped_id(const char *c, size_t n, const char *prefix, struct gs_procfs_job *job,
                     uint8_t kind)
{
    size_t k = strlen(prefix);
    if (!has_prefix(c, n, prefix))
        return 0;
    c += k;
    n -= k;
    if (has_suffix(c, n, ".scope"))
        n -= 6;
    return take_id(c, n, job, kind);
}

/* A pod UID: 36 characters of hex and '-' (or '_' in systemd slice names), 8-4-4-4-12; or a
 * static pod's (a manifest file's, the kubelet's hash of it): 32 hex digits. */
static int take_pod_uid(const char *s, size_t n, struct gs_procfs_job *job)
{
    char uid[37];

    if (n == 32) {
        for (size_t i = 0; i < 32; i++)
            if (!is_hex(s[i]))
                return 0;
        if (!job->pod_uid[0]) {
            memcpy(job->pod_uid, s, 32);
            job->pod_uid[32] = '\0';
        }
        return 1;
    }
    if (n != 36)
        return 0;
    for (size_t i = 0; i < 36; i++) {
        int dash = i == 8 || i == 13 || i == 18 || i == 23;
        char c = s[i];
        if (dash ? (c != '-' && c != '_') : !is_hex(c))
            return 0;
        uid[i] = dash ? '-' : c;
    }
    uid[36] = '\0';
    if (!job->pod_uid[0])
        memcpy(job->pod_uid, uid, sizeof uid);
    return 1;
}

static void cgroup_component(const char *c, size_t n, const char *prev, size_t prev_n,
                             int in_kubepods, int in_slurm, struct gs_procfs_job *job)
{
    const char *pod;

    if (scoped_id(c, n, "docker-", job, GS_JOB_DOCKER) ||
        scoped_id(c, n, "cri-containerd-", job, GS_JOB_CONTAINERD) ||
        scoped_id(c, n, "crio-", job, GS_JOB_CRIO) || /* crio-conmon-<id> fails the hex test */
        scoped_id(c, n, "libpod-", job, GS_JOB_PODMAN))
        return;
    if (prev && prev_n == 6 && memcmp(prev, "docker", 6) == 0 && take_id(c, n, job, GS_JOB_DOCKER))
        return;
    /* cgroupfs driver: /kubepods[/qos]/pod<uid>/<container id> */
    if (in_kubepods && has_prefix(c, n, "pod") && take_pod_uid(c + 3, n - 3, job))
        return;
    /* systemd driver: kubepods-burstable-pod<uid>.slice, kubepods-pod<uid>.slice */
    if (has_prefix(c, n, "kubepods") && has_suffix(c, n, ".slice") &&
        (pod = find_in(c, n, "-pod")) != NULL) {
        size_t off = (size_t)(pod - c) + 4;
        if (n >= off + 6 && take_pod_uid(c + off, n - off - 6, job))
            return;
    }
    if (in_kubepods && take_id(c, n, job, GS_JOB_CONTAINER))
        return;
    if (in_slurm && has_prefix(c, n, "job_") && n > 4 && n - 4 < sizeof job->slurm_job) {
        for (size_t i = 4; i < n; i++)
            if (!is_digit(c[i]))
                return;
        if (!job->slurm_job[0])
            copy_n(job->slurm_job, sizeof job->slurm_job, c + 4, n - 4);
    }
}

static void cgroup_path(const char *path, size_t n, struct gs_procfs_job *job)
{
    int in_kubepods = find_in(path, n, "kubepods") != NULL;
    int in_slurm = find_in(path, n, "slurm") != NULL;
    const char *prev = NULL, *p = path, *end = path + n;
    size_t prev_n = 0;

    while (p < end) {
        const char *slash = memchr(p, '/', (size_t)(end - p));
        const char *ce = slash ? slash : end;
        if (ce > p) {
            cgroup_component(p, (size_t)(ce - p), prev, prev_n, in_kubepods, in_slurm, job);
            prev = p;
            prev_n = (size_t)(ce - p);
        }
        p = ce + 1;
    }
}

void gs_procfs_parse_cgroup(const char *text, size_t len, struct gs_procfs_job *job)
{
    const char *p = text, *stop = text + len;

    memset(job, 0, sizeof *job);
    while (p < stop) {
        const char *nl = memchr(p, '\n', (size_t)(stop - p));
        const char *le = nl ? nl : stop;
        const char *c1 = memchr(p, ':', (size_t)(le - p));
        const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(le - c1 - 1)) : NULL;
        if (c2)
            cgroup_path(c2 + 1, (size_t)(le - c2 - 1), job);
        p = le + 1;
    }
}

/* ---- the reader ------------------------------------------------------------------------- */

struct pf_seen {
    unsigned pid;
    uint64_t gen;                 /* cycle of the last fill */
    unsigned long long starttime; /* tells a reused pid apart */
    unsigned long long cpu_ticks; /* utime + stime at t_ns */
    int64_t t_ns;
    int64_t prev_t_ns; /* the fill before, for a second fill in the same cycle */
    unsigned long long prev_ticks;
    int have_prev;
    /* Details that do not change while a process lives (except on exec): read on first sight
     * and every PF_STATIC_TTL_NS after, so a steady cycle reads only /proc/PID/stat. */
    int static_ok;
    int64_t static_t_ns;
    int nvml_name_ok;
    struct gs_proc cache; /* only the static fields (and nvml_name) are meaningful */
    int stat_fd;          /* /proc/PID/stat kept open, or -1 */
};

#define PF_MAX_KEPT_FDS 512 /* beyond this many processes, stat is opened per read */

#define PF_STATIC_TTL_NS (10LL * 1000000000LL)

struct pf_user {
    uint32_t uid;
    char name[GS_PROC_USER_LEN];
};

struct gs_procfs {
    char root[PF_ROOT_MAX];
    long hz;
    long page;
    long long btime;
    int btime_ok;
    uint64_t gen;
    struct pf_seen *seen;
    unsigned n_seen, cap_seen;
    struct pf_user *users;
    unsigned n_users, cap_users;
    unsigned n_fds;               /* stat descriptors kept open in seen[] */
    char pods_dir[PATH_MAX - 64]; /* Kubernetes pod log directories (k8s.h); "": off */
    int no_jobs;                  /* gs_procfs_set_jobs(pf, 0): cgroups not read */
};

/* Opens root/pid/name (pid 0: root/name) read-only; -1 with errno set on failure. */
static int pf_open(const struct gs_procfs *pf, unsigned pid, const char *name)
{
    char path[PF_ROOT_MAX + 64];
    /* Built by hand: snprintf was the single largest cost of a steady cycle. */
    size_t rl = strlen(pf->root), nl = strlen(name), k = rl;
    char digits[12];
    int nd = 0;

    memcpy(path, pf->root, rl);
    path[k++] = '/';
    if (pid) {
        for (unsigned v = pid; v; v /= 10)
            digits[nd++] = (char)('0' + v % 10);
        while (nd)
            path[k++] = digits[--nd];
        path[k++] = '/';
    }
    memcpy(path + k, name, nl + 1);
    return open(path, O_RDONLY | O_CLOEXEC);
}

/* Reads up to cap-1 bytes of fd from offset 0 and NUL-terminates. procfs files are generated
 * on each read from offset 0, so a kept descriptor can be read again every cycle. Returns the
 * byte count or -1 with errno set. */
static ssize_t pf_read_fd(int fd, char *buf, size_t cap)
{
    size_t got = 0;

    while (got < cap - 1) {
        ssize_t r = pread(fd, buf + got, cap - 1 - got, (off_t)got);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    buf[got] = '\0';
    return (ssize_t)got;
}

/* pf_read_fd for /proc/PID/stat, in one pread: the kernel writes the whole line (a few hundred
 * bytes, seq_file's single_open) into a buffer that holds it, so a read shorter than the buffer
 * is the whole file, and the second pread that would only see its end is saved (one system
 * call a process a cycle instead of two). A read that fills the buffer goes on as pf_read_fd. */
static ssize_t pf_read_fd_line(int fd, char *buf, size_t cap)
{
    ssize_t r;

    do
        r = pread(fd, buf, cap - 1, 0);
    while (r < 0 && errno == EINTR);
    if (r < 0)
        return -1;
    if ((size_t)r == cap - 1)
        return pf_read_fd(fd, buf, cap);
    buf[r] = '\0';
    return r;
}

/* Reads up to cap-1 bytes of root/pid/name (pid 0: root/name) and NUL-terminates. Returns the
 * byte count or -1 with errno set. */
static ssize_t pf_read(const struct gs_procfs *pf, unsigned pid, const char *name, char *buf,
                       size_t cap)
{
    int fd = pf_open(pf, pid, name);
    ssize_t n;
    int e;

    if (fd < 0)
        return -1;
    n = pf_read_fd(fd, buf, cap);
    e = errno;
    close(fd);
    errno = e;
    return n;
}

/* Reads /proc/PID/stat through the descriptor kept in the pid's record, opening it on first
 * use: one pread per cycle instead of open+read+close (2.4x faster for 64 processes, see
 * bench/RESULTS.md). A kept descriptor refers to the task it was opened for, so once that
 * process exits the read fails and the path is opened again (a reused pid is a new task). */
static ssize_t pf_read_stat(struct gs_procfs *pf, unsigned pid, struct pf_seen *seen, char *buf,
                            size_t cap)
{
    ssize_t n;

    if (seen && seen->stat_fd >= 0) {
        n = pf_read_fd_line(seen->stat_fd, buf, cap);
        if (n > 0)
            return n;
        close(seen->stat_fd);
        seen->stat_fd = -1;
        pf->n_fds--;
    }
    if (!seen || pf->n_fds >= PF_MAX_KEPT_FDS)
        return pf_read(pf, pid, "stat", buf, cap);
    seen->stat_fd = pf_open(pf, pid, "stat");
    if (seen->stat_fd < 0)
        return -1;
    pf->n_fds++;
    return pf_read_fd_line(seen->stat_fd, buf, cap);
}

int gs_procfs_open(struct gs_procfs **out, const char *root, struct gs_err *err)
{
    struct gs_procfs *pf;
    char buf[PF_STATUS_BUF];
    ssize_t n;

    if (!root)
        root = "/proc";
    if (strlen(root) >= PF_ROOT_MAX)
        return gs_err_set(err, GS_EINVAL, "procfs: root path too long: %.64s...", root);
    pf = calloc(1, sizeof *pf);
    if (!pf)
        return gs_err_set(err, GS_ENOMEM, "procfs: out of memory");
    strcpy(pf->root, root);
    strcpy(pf->pods_dir, GS_K8S_PODS_DIR);
    pf->hz = sysconf(_SC_CLK_TCK);
    if (pf->hz <= 0)
        pf->hz = 100;
    pf->page = sysconf(_SC_PAGESIZE);
    if (pf->page <= 0)
        pf->page = 4096;
    /* /proc/stat is long on many-core hosts, but btime follows the cpu and intr lines; a
     * truncated read only costs us start times. */
    n = pf_read(pf, 0, "stat", buf, sizeof buf);
    if (n > 0 && gs_procfs_parse_btime(buf, (size_t)n, &pf->btime) == GS_OK)
        pf->btime_ok = 1;
    if (!pf->btime_ok) {
        size_t cap = 1u << 20;
        char *big = malloc(cap); /* only at open */
        if (big) {
            n = pf_read(pf, 0, "stat", big, cap);
            if (n > 0 && gs_procfs_parse_btime(big, (size_t)n, &pf->btime) == GS_OK)
                pf->btime_ok = 1;
            free(big);
        }
    }
    *out = pf;
    return GS_OK;
}

void gs_procfs_close(struct gs_procfs *pf)
{
    if (!pf)
        return;
    for (unsigned i = 0; i < pf->n_seen; i++)
        if (pf->seen[i].stat_fd >= 0)
            close(pf->seen[i].stat_fd);
    free(pf->seen);
    free(pf->users);
    free(pf);
}

void gs_procfs_begin(struct gs_procfs *pf)
{
    pf->gen++;
}

void gs_procfs_end(struct gs_procfs *pf)
{
    unsigned k = 0;
    for (unsigned i = 0; i < pf->n_seen; i++)
        if (pf->seen[i].gen == pf->gen) {
            if (k != i) /* records are ~2 KiB: copy only what moves */
                pf->seen[k] = pf->seen[i];
            k++;
        } else if (pf->seen[i].stat_fd >= 0) { /* gone: release its descriptor */
            close(pf->seen[i].stat_fd);
            pf->n_fds--;
        }
    pf->n_seen = k;
}

/* Returns the record for pid, adding one if needed; NULL only when out of memory. */
static struct pf_seen *pf_seen_get(struct gs_procfs *pf, unsigned pid)
{
    for (unsigned i = 0; i < pf->n_seen; i++)
        if (pf->seen[i].pid == pid)
            return &pf->seen[i];
    if (pf->n_seen == pf->cap_seen) {
        unsigned cap = pf->cap_seen ? pf->cap_seen * 2 : 32;
        struct pf_seen *s = realloc(pf->seen, cap * sizeof *s); /* old block kept on failure */
        if (!s)
            return NULL;
        pf->seen = s;
        pf->cap_seen = cap;
    }
    memset(&pf->seen[pf->n_seen], 0, sizeof pf->seen[0]);
    pf->seen[pf->n_seen].pid = pid;
    pf->seen[pf->n_seen].stat_fd = -1;
    return &pf->seen[pf->n_seen++];
}

static void pf_user_name(struct gs_procfs *pf, uint32_t uid, char *out, size_t cap)
{
    struct passwd pw, *res = NULL;
    char buf[4096];

    for (unsigned i = 0; i < pf->n_users; i++)
        if (pf->users[i].uid == uid) {
            snprintf(out, cap, "%s", pf->users[i].name);
            return;
        }
    if (getpwuid_r(uid, &pw, buf, sizeof buf, &res) == 0 && res && res->pw_name)
        snprintf(out, cap, "%s", res->pw_name);
    else
        snprintf(out, cap, "%u", uid);
    if (pf->n_users == pf->cap_users) {
        unsigned ncap = pf->cap_users ? pf->cap_users * 2 : 8;
        struct pf_user *u = realloc(pf->users, ncap * sizeof *u);
        if (!u)
            return; /* uncached: looked up again next time */
        pf->users = u;
        pf->cap_users = ncap;
    }
    pf->users[pf->n_users].uid = uid;
    snprintf(pf->users[pf->n_users].name, sizeof pf->users[0].name, "%s", out);
    pf->n_users++;
}

/* comm is cut at 15 characters; like psutil, prefer argv[0]'s base name when it extends it. */
static void pf_name(struct gs_proc *p, const char *comm, const char *raw, size_t raw_len)
{
    size_t clen = strlen(comm);
    size_t a0 = strnlen(raw, raw_len);
    const char *base = raw;

    snprintf(p->name, sizeof p->name, "%s", comm);
    if (clen != 15 || a0 == 0)
        return;
    for (size_t i = 0; i < a0; i++)
        if (raw[i] == '/')
            base = raw + i + 1;
    if ((size_t)(raw + a0 - base) > clen && memcmp(base, comm, clen) == 0)
        copy_n(p->name, sizeof p->name, base, (size_t)(raw + a0 - base));
}

static void pf_cpu(struct gs_procfs *pf, unsigned pid, const struct gs_procfs_stat *st,
                   int64_t now_ns, struct gs_proc *p)
{
    struct pf_seen *s = pf_seen_get(pf, pid);
    unsigned long long ticks = st->utime + st->stime;
    int64_t t0;
    unsigned long long k0;

    p->cpu_st = GS_ST_NA;
    if (!s)
        return;
    if (s->gen != 0 && s->starttime != st->starttime) { /* pid reused: a new process */
        int fd = s->stat_fd; /* already reopened for the new task by pf_read_stat */
        memset(s, 0, sizeof *s);
        s->pid = pid;
        s->stat_fd = fd;
    }
    if (s->gen == pf->gen) { /* second fill in this cycle: measure from the fill before */
        t0 = s->prev_t_ns;
        k0 = s->prev_ticks;
        if (!s->have_prev)
            return;
    } else {
        s->have_prev = s->gen != 0;
        s->prev_t_ns = s->t_ns;
        s->prev_ticks = s->cpu_ticks;
        t0 = s->t_ns;
        k0 = s->cpu_ticks;
        s->gen = pf->gen;
        s->starttime = st->starttime;
        s->cpu_ticks = ticks;
        s->t_ns = now_ns;
    }
    if (!s->have_prev || now_ns <= t0 || ticks < k0)
        return;
    p->cpu_ratio = ((double)(ticks - k0) / (double)pf->hz) / ((double)(now_ns - t0) / 1e9);
    p->cpu_st = GS_ST_OK;
}

/* Copies the fields that stay fixed for a process's life (see struct pf_seen). */
static void pf_static_copy(struct gs_proc *dst, const struct gs_proc *src)
{
    memcpy(dst->name, src->name, sizeof dst->name);
    memcpy(dst->cmdline, src->cmdline, sizeof dst->cmdline);
    memcpy(dst->user, src->user, sizeof dst->user);
    dst->uid = src->uid;
    dst->job_kind = src->job_kind;
    memcpy(dst->container_id, src->container_id, sizeof dst->container_id);
    memcpy(dst->pod_uid, src->pod_uid, sizeof dst->pod_uid);
    memcpy(dst->slurm_job, src->slurm_job, sizeof dst->slurm_job);
    memcpy(dst->pod_name, src->pod_name, sizeof dst->pod_name);
    memcpy(dst->pod_namespace, src->pod_namespace, sizeof dst->pod_namespace);
    memcpy(dst->pod_container, src->pod_container, sizeof dst->pod_container);
}

void gs_procfs_set_pods_dir(struct gs_procfs *pf, const char *dir)
{
    if (!dir)
        dir = GS_K8S_PODS_DIR;
    if (strlen(dir) >= sizeof pf->pods_dir)
        dir = "";
    strcpy(pf->pods_dir, dir);
}

void gs_procfs_set_jobs(struct gs_procfs *pf, int on)
{
    pf->no_jobs = !on;
}

/* The Kubernetes names of p's pod (p->pod_uid from its cgroup), read with the other details
 * that do not change while a process lives. */
static void pf_pod_names(const struct gs_procfs *pf, struct gs_proc *p)
{
    struct gs_k8s_names k;

    p->pod_name[0] = p->pod_namespace[0] = p->pod_container[0] = '\0';
    if (!p->pod_uid[0] || !pf->pods_dir[0] ||
        gs_k8s_lookup(pf->pods_dir, p->pod_uid, p->container_id, &k) != GS_OK)
        return;
    snprintf(p->pod_name, sizeof p->pod_name, "%s", k.pod);
    snprintf(p->pod_namespace, sizeof p->pod_namespace, "%s", k.ns);
    snprintf(p->pod_container, sizeof p->pod_container, "%s", k.container);
}

int gs_procfs_fill(struct gs_procfs *pf, unsigned pid, int64_t now_ns, struct gs_proc *p)
{
    char buf[PF_CGROUP_BUF];
    char raw[PF_CMDLINE_BUF];
    struct gs_procfs_stat st;
    struct gs_procfs_job job;
    ssize_t n, raw_n;
    uint32_t uid;

    struct pf_seen *seen;

    if (pid == 0)
        return GS_ENOTFOUND;
    /* A record made for a pid that turns out not to exist has gen 0 and goes at the next
     * gs_procfs_end. */
    n = pf_read_stat(pf, pid, pf_seen_get(pf, pid), buf, PF_STAT_BUF);
    if (n <= 0 || gs_procfs_parse_stat(buf, (size_t)n, &st) != GS_OK)
        return GS_ENOTFOUND;
    p->rss_bytes = st.rss_pages > 0 ? (uint64_t)st.rss_pages * (uint64_t)pf->page : 0;
    p->start_time = pf->btime_ok ? (double)pf->btime + (double)st.starttime / (double)pf->hz : 0;
    pf_cpu(pf, pid, &st, now_ns, p); /* also forgets the record of a reused pid */
    seen = pf_seen_get(pf, pid);
    if (seen && seen->static_ok && seen->starttime == st.starttime &&
        now_ns - seen->static_t_ns < PF_STATIC_TTL_NS) {
        pf_static_copy(p, &seen->cache);
        p->host_st = GS_ST_OK;
        return GS_OK;
    }
    raw_n = pf_read(pf, pid, "cmdline", raw, sizeof raw);
    if (raw_n < 0)
        raw_n = 0;
    gs_procfs_join_cmdline(raw, (size_t)raw_n, p->cmdline, sizeof p->cmdline);
    pf_name(p, st.comm, raw, (size_t)raw_n);

    n = pf_read(pf, pid, "status", buf, PF_STATUS_BUF);
    if (n > 0 && gs_procfs_parse_uid(buf, (size_t)n, &uid) == GS_OK) {
        p->uid = uid;
        pf_user_name(pf, uid, p->user, sizeof p->user);
    } else {
        p->uid = 0;
        p->user[0] = '\0';
    }

    n = pf->no_jobs ? 0 : pf_read(pf, pid, "cgroup", buf, sizeof buf);
    gs_procfs_parse_cgroup(buf, n > 0 ? (size_t)n : 0, &job);
    p->job_kind = job.kind;
    memcpy(p->container_id, job.container_id, sizeof p->container_id);
    memcpy(p->pod_uid, job.pod_uid, sizeof p->pod_uid);
    memcpy(p->slurm_job, job.slurm_job, sizeof p->slurm_job);
    pf_pod_names(pf, p);
    if (seen) {
        pf_static_copy(&seen->cache, p);
        seen->static_ok = 1;
        seen->static_t_ns = now_ns;
        seen->nvml_name_ok = 0; /* re-asked along with the rest (an exec changes both) */
    }
    p->host_st = GS_ST_OK;
    return GS_OK;
}

int gs_procfs_cached_nvml_name(struct gs_procfs *pf, unsigned pid, struct gs_proc *p)
{
    for (unsigned i = 0; i < pf->n_seen; i++)
        if (pf->seen[i].pid == pid && pf->seen[i].static_ok && pf->seen[i].nvml_name_ok) {
            p->nvml_name_st = pf->seen[i].cache.nvml_name_st;
            memcpy(p->nvml_name, pf->seen[i].cache.nvml_name, sizeof p->nvml_name);
            return 1;
        }
    return 0;
}

void gs_procfs_store_nvml_name(struct gs_procfs *pf, unsigned pid, const struct gs_proc *p)
{
    for (unsigned i = 0; i < pf->n_seen; i++)
        if (pf->seen[i].pid == pid && pf->seen[i].static_ok) {
            pf->seen[i].cache.nvml_name_st = p->nvml_name_st;
            memcpy(pf->seen[i].cache.nvml_name, p->nvml_name, sizeof p->nvml_name);
            pf->seen[i].nvml_name_ok = 1;
            return;
        }
}

/* ---- one-off reads ---------------------------------------------------------------------- */

/* Reads up to cap-1 bytes of path, NUL-terminated, into a malloc'ed buffer (*len bytes).
 * NULL with errno set when the file cannot be read. */
static char *read_small(const char *path, size_t cap, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    size_t size = 0, got = 0;
    char *buf = NULL;

    if (fd < 0)
        return NULL;
    for (;;) {
        ssize_t r;
        if (got + 1 >= size) {
            size_t ns = size ? size * 2 : 4096;
            char *nb;
            if (ns > cap)
                ns = cap;
            if (ns <= size || !(nb = realloc(buf, ns)))
                break; /* at cap (the rest is not read) or out of memory */
            buf = nb;
            size = ns;
        }
        r = read(fd, buf + got, size - 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            close(fd);
            errno = e;
            return NULL;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (!buf) {
        errno = ENOMEM;
        return NULL;
    }
    buf[got] = '\0';
    *len = got;
    return buf;
}

static int proc_path(char *out, size_t cap, const char *root, unsigned pid, const char *name)
{
    int n = snprintf(out, cap, "%s/%u/%s", root ? root : "/proc", pid, name);

    return n > 0 && (size_t)n < cap ? 0 : -1;
}

long gs_procfs_read_text(const char *root, unsigned pid, unsigned tid, const char *name, char *buf,
                         size_t cap)
{
    char path[PF_ROOT_MAX + 96];
    ssize_t n;
    int fd, e, len;

    buf[0] = '\0';
    if (!root)
        root = "/proc";
    len = tid ? snprintf(path, sizeof path, "%s/%u/task/%u/%s", root, pid, tid, name)
              : snprintf(path, sizeof path, "%s/%u/%s", root, pid, name);
    if (len <= 0 || (size_t)len >= sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return -1;
    n = pf_read_fd(fd, buf, cap);
    e = errno;
    close(fd);
    errno = e;
    return (long)n;
}

int gs_procfs_read_stat(const char *root, unsigned pid, unsigned tid, struct gs_procfs_stat *st)
{
    char buf[1024];
    long n = gs_procfs_read_text(root, pid, tid, "stat", buf, sizeof buf);

    if (n <= 0)
        return GS_ENOTFOUND;
    return gs_procfs_parse_stat(buf, (size_t)n, st) == GS_OK ? GS_OK : GS_EPARSE;
}

int gs_procfs_read_ppid(const char *root, unsigned pid, unsigned *ppid)
{
    struct gs_procfs_stat st;
    int rc = gs_procfs_read_stat(root, pid, 0, &st);

    if (rc == GS_OK && st.ppid > UINT_MAX)
        rc = GS_EPARSE;
    if (rc == GS_OK)
        *ppid = (unsigned)st.ppid;
    return rc;
}

unsigned gs_procfs_children(const char *root, unsigned parent, unsigned *pids, unsigned cap)
{
    DIR *d = opendir(root ? root : "/proc");
    struct dirent *e;
    unsigned n = 0;

    if (!d)
        return 0;
    while (n < cap && (e = readdir(d)) != NULL) {
        struct gs_procfs_stat st;
        char *end;
        unsigned long pid;
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        pid = strtoul(e->d_name, &end, 10);
        if (*end || pid > UINT_MAX)
            continue;
        if (gs_procfs_read_stat(root, (unsigned)pid, 0, &st) == GS_OK && st.ppid == parent)
            pids[n++] = (unsigned)pid;
    }
    closedir(d);
    return n;
}

int gs_procfs_tree_ticks(const char *root, unsigned pid, unsigned long long *ticks)
{
    enum { SCAN = 4096, TREE = 256, DEPTH = 8 };
    struct node {
        unsigned pid, ppid;
        unsigned long long ticks;
        int mark;
    } * p;
    unsigned n = 0, in[TREE], nin = 0, changed = 1;
    struct gs_procfs_stat st;
    struct dirent *e;
    DIR *d;

    *ticks = 0;
    if (pid == 0 || gs_procfs_read_stat(root, pid, 0, &st) != GS_OK)
        return GS_ENOTFOUND;
    p = malloc(SCAN * sizeof *p);
    if (!p)
        return GS_ENOMEM;
    d = opendir(root ? root : "/proc");
    while (d && n < SCAN && (e = readdir(d)) != NULL) {
        char *end;
        unsigned long v;
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        v = strtoul(e->d_name, &end, 10);
        if (*end || v > UINT_MAX || gs_procfs_read_stat(root, (unsigned)v, 0, &st) != GS_OK)
            continue;
        p[n] = (struct node){(unsigned)v, st.ppid > UINT_MAX ? 0 : (unsigned)st.ppid,
                             st.utime + st.stime, (unsigned)v == pid};
        n++;
    }
    if (d)
        closedir(d);
    in[nin++] = pid;
    for (unsigned pass = 0; changed && pass < DEPTH; pass++) { /* one generation a pass */
        changed = 0;
        for (unsigned i = 0; i < n && nin < TREE; i++)
            for (unsigned j = 0; !p[i].mark && j < nin; j++)
                if (in[j] == p[i].ppid) {
                    p[i].mark = changed = 1;
                    in[nin++] = p[i].pid;
                }
    }
    for (unsigned i = 0; i < n; i++)
        if (p[i].mark)
            *ticks += p[i].ticks;
    free(p);
    return GS_OK;
}

int gs_procfs_read_env(const char *root, unsigned pid, const char *name, char *out, size_t cap)
{
    char path[PF_ROOT_MAX + 64];
    size_t len = 0, nl = strlen(name);
    char *env;
    int rc = GS_ENOTFOUND;

    if (cap)
        out[0] = '\0';
    if (proc_path(path, sizeof path, root, pid, "environ") != 0)
        return GS_EIO;
    /* environ is at most the exec's argument space; 4 MiB bounds a hostile one. */
    if (!(env = read_small(path, 4u << 20, &len)))
        return errno == EACCES || errno == EPERM   ? GS_EPERM
               : errno == ENOENT || errno == ESRCH ? GS_ENOTFOUND
                                                   : GS_EIO;
    for (size_t i = 0; i < len;) {
        size_t el = strnlen(env + i, len - i);
        if (el > nl && memcmp(env + i, name, nl) == 0 && env[i + nl] == '=') {
            if (cap)
                copy_n(out, cap, env + i + nl + 1, el - nl - 1);
            rc = GS_OK; /* the first one, as getenv(3) */
            break;
        }
        i += el + 1;
    }
    free(env);
    return rc;
}

char *gs_procfs_read_devices_list(const char *root, const char *cgroup_root, unsigned pid)
{
    char path[PF_ROOT_MAX + 4096 + 64], *text, *line, *list = NULL;
    size_t len = 0;

    if (proc_path(path, sizeof path, root, pid, "cgroup") != 0 ||
        !(text = read_small(path, 1u << 20, &len)))
        return NULL;
    for (line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (nl)
            *nl = '\0';
        if (c1 && c2 && (size_t)(c2 - c1 - 1) == strlen("devices") &&
            strncmp(c1 + 1, "devices", 7) == 0 && c2[1] == '/' && !strstr(c2, "..")) {
            int n = snprintf(path, sizeof path, "%s/devices%s/devices.list",
                             cgroup_root ? cgroup_root : "/sys/fs/cgroup", c2 + 1);
            if (n > 0 && (size_t)n < sizeof path)
                list = read_small(path, 1u << 20, &len);
            break;
        }
        line = nl ? nl + 1 : NULL;
    }
    free(text);
    return list;
}

double gs_procfs_tree_cpu_s(const char *root, unsigned pid)
{
    long hz = sysconf(_SC_CLK_TCK);
    unsigned long long ticks;

    if (pid == 0 || gs_procfs_tree_ticks(root, pid, &ticks) != GS_OK)
        return NAN;
    return (double)ticks / (double)(hz > 0 ? hz : 100);
}
