/*
 * Process details from procfs: name, command line, user, CPU and host memory, start time, and
 * the container or batch job a process runs in (from /proc/PID/cgroup).
 *
 * NVML tells us which pids use a GPU; this module says who they are. The parsers take text
 * (never paths) so unit tests and fuzz targets feed them real-world samples directly; the
 * reader (struct gs_procfs) takes a root directory so tests can point it at a /proc-like tree.
 *
 * A process may exit between the NVML read and ours: gs_procfs_fill then returns
 * GS_ENOTFOUND and leaves the NVML fields of the gs_proc alone (host_st stays GS_ST_NA).
 * After warm-up a cycle allocates nothing: files are read into stack buffers, and the per-pid
 * and per-uid caches grow only when more pids or users appear than ever before.
 *
 * Threads: one gs_procfs per thread (the sampler owns one).
 */
#ifndef GS_PROCFS_H
#define GS_PROCFS_H

#include <stddef.h>
#include <stdint.h>

#include "gpuscope/gs_model.h"

struct gs_err;
struct gs_procfs;

/* ---- pure parsers (outside input; each has a fuzz target) -------------------------------- */

/* Fields of /proc/PID/stat that we use. */
struct gs_procfs_stat {
    char comm[GS_PROC_NAME_LEN]; /* between the first '(' and the last ')', may hold both */
    char state;
    unsigned long long ppid;
    unsigned long long utime, stime; /* clock ticks */
    unsigned long long starttime;    /* clock ticks after boot */
    long long rss_pages;
};

/* Parses the text of /proc/PID/stat (len bytes, need not be NUL-terminated). The name may
 * contain spaces and parentheses, so it runs to the LAST ')'. Returns GS_OK or GS_EPARSE. */
int gs_procfs_parse_stat(const char *text, size_t len, struct gs_procfs_stat *out);

/* Joins the NUL-separated arguments of /proc/PID/cmdline with single spaces into out (cap
 * bytes, always NUL-terminated when cap > 0). Trailing NULs are dropped, control characters
 * become spaces, and a line cut at cap ends in "..." (when cap > 4). Returns the length. */
size_t gs_procfs_join_cmdline(const char *raw, size_t len, char *out, size_t cap);

/* Finds the real uid on the "Uid:" line of /proc/PID/status. GS_OK or GS_EPARSE. */
int gs_procfs_parse_uid(const char *text, size_t len, uint32_t *uid);

/* The credentials a process's file accesses are checked with, from /proc/PID/status: the
 * file-system uid and gid (the last of the four on "Uid:" and "Gid:") and the supplementary
 * groups ("Groups:"). */
#define GS_PROCFS_MAX_GROUPS 256
struct gs_procfs_creds {
    uint32_t uid, gid;
    unsigned ngroups;
    uint32_t groups[GS_PROCFS_MAX_GROUPS];
};
/* GS_OK, or GS_EPARSE (also for more groups than GS_PROCFS_MAX_GROUPS). */
int gs_procfs_parse_creds(const char *text, size_t len, struct gs_procfs_creds *c);
/* The same from /proc/PID/status: GS_OK, GS_ENOTFOUND (gone) or GS_EPARSE. */
int gs_procfs_read_creds(unsigned pid, struct gs_procfs_creds *c);

/* Finds "btime N" (boot time, unix seconds) in /proc/stat. GS_OK or GS_EPARSE. */
int gs_procfs_parse_btime(const char *text, size_t len, long long *btime);

/* Where a process runs, from /proc/PID/cgroup. */
struct gs_procfs_job {
    uint8_t kind;                     /* enum gs_job_kind of container_id */
    char container_id[GS_JOB_ID_LEN]; /* Docker/containerd/CRI-O/Podman id, "" if none */
    /* Kubernetes pod UID with dashes (a static pod's: 32 hex digits), "" if none */
    char pod_uid[40];
    char slurm_job[24]; /* Slurm job id, "" if none */
};

/* Parses the text of /proc/PID/cgroup (v1 "N:controllers:/path" lines and the v2 "0::/path"
 * line) and fills job; anything not recognised leaves the fields empty. Recognised shapes:
 * docker (/docker/<id>, docker-<id>.scope), containerd (cri-containerd-<id>.scope), CRI-O
 * (crio-<id>.scope), Podman (libpod-<id>.scope, /libpod_parent/libpod-<id>), a bare id under
 * kubepods (runtime unknown: GS_JOB_CONTAINER), Kubernetes pod UIDs (kubepods/.../pod<uid> and
 * kubepods-...-pod<uid with _>.slice) and Slurm jobs (job_<id> in a path naming slurm). */
void gs_procfs_parse_cgroup(const char *text, size_t len, struct gs_procfs_job *job);

/* ---- the reader ------------------------------------------------------------------------- */

/* Opens a reader rooted at root (NULL: "/proc"). Reads the boot time once; a missing
 * /proc/stat only makes start times absent. Errors: GS_ENOMEM, GS_EINVAL (root too long). */
int gs_procfs_open(struct gs_procfs **out, const char *root, struct gs_err *err);

/* Where the Kubernetes pod log directories are (k8s.h: pod, namespace and container names of
 * a process whose cgroup names a pod): NULL restores the default (/var/log/pods), "" turns
 * the lookup off. Longer than PATH_MAX - 64: off. */
void gs_procfs_set_pods_dir(struct gs_procfs *pf, const char *dir);

/* on 0: gs_procfs_fill leaves a process's job (container, pod, Slurm job) empty without
 * reading its cgroup; 1 (the default): reads it. */
void gs_procfs_set_jobs(struct gs_procfs *pf, int on);

/* Starts a cycle; pids not filled between begin and end are forgotten at end. */
void gs_procfs_begin(struct gs_procfs *pf);

/* Fills the host fields of p (name, cmdline, user, uid, cpu, rss, start time, job, and the
 * pod's Kubernetes names when the pods directory names its pod UID) for pid,
 * measured at now_ns (CLOCK_MONOTONIC). The CPU ratio needs a previous fill of the same pid
 * (same start time) in an earlier cycle; filling a pid twice in one cycle gives the same
 * ratio. Returns GS_OK, or GS_ENOTFOUND when the process is gone (p untouched). */
int gs_procfs_fill(struct gs_procfs *pf, unsigned pid, int64_t now_ns, struct gs_proc *p);

/* Ends a cycle (forgets pids not seen in it). */
void gs_procfs_end(struct gs_procfs *pf);

/* NULL is allowed. */
void gs_procfs_close(struct gs_procfs *pf);

/* ---- one-off reads of one process (no reader: callers outside the sampler) -------------
 *
 * root is the /proc to read (NULL: "/proc"), so tests point these at a fake tree. */

/* Reads up to cap-1 bytes of root/PID/name, or with tid > 0 of the thread's
 * root/PID/task/TID/name, into buf and NUL-terminates (cap > 0). Returns the byte count, or -1
 * with errno set when the file cannot be opened or read (a process gone: ENOENT or ESRCH). */
long gs_procfs_read_text(const char *root, unsigned pid, unsigned tid, const char *name, char *buf,
                         size_t cap);

/* The stat fields of pid (root/PID/stat) or with tid > 0 of its thread tid
 * (root/PID/task/TID/stat), through gs_procfs_parse_stat. GS_OK, GS_ENOTFOUND (gone or
 * unreadable), GS_EPARSE. */
int gs_procfs_read_stat(const char *root, unsigned pid, unsigned tid, struct gs_procfs_stat *st);

/* The parent pid of pid, from root/PID/stat. GS_OK, GS_ENOTFOUND (gone), GS_EPARSE. */
int gs_procfs_read_ppid(const char *root, unsigned pid, unsigned *ppid);

/* CPU time (utime + stime, clock ticks) of pid and its descendants (8 generations, 256
 * processes, of the first 4096 processes of one scan of root): what a process tree used so
 * far, e.g. to tell a job still working from one waiting on nothing. GS_OK, GS_ENOTFOUND (pid
 * gone), GS_ENOMEM. Processes that exited and were reaped leave the sum. */
int gs_procfs_tree_ticks(const char *root, unsigned pid, unsigned long long *ticks);

/* The same in seconds (ticks / the clock's ticks a second); NAN when pid is 0, gone or not
 * readable: the hang rule's activity measure (run/hang.h) for `gpuscope run`'s watchdog and
 * the agent's training_hang alike. */
double gs_procfs_tree_cpu_s(const char *root, unsigned pid);

/* The processes whose parent is parent, by a scan of root (every PID/stat): their pids into
 * pids (at most cap, in directory order). Returns how many were stored; 0 when root cannot
 * be listed. */
unsigned gs_procfs_children(const char *root, unsigned parent, unsigned *pids, unsigned cap);

/* The value of environment variable name in root/PID/environ (the environment pid was
 * started with: a later setenv inside the process is not seen) into out (cap bytes, always
 * NUL-terminated, cut at cap). GS_OK; GS_ENOTFOUND when the variable is not set; GS_EPERM
 * when the file cannot be read (another user's process, without privilege), GS_EIO else. */
int gs_procfs_read_env(const char *root, unsigned pid, const char *name, char *out, size_t cap);

/* The devices.list of pid's cgroup v1 devices controller (the "devices" line of
 * root/PID/cgroup, under cgroup_root, NULL: "/sys/fs/cgroup", + "/devices"), malloc'ed and
 * NUL-terminated; NULL when there is none (cgroup v2, no controller, unreadable). At most
 * 1 MiB is read. */
char *gs_procfs_read_devices_list(const char *root, const char *cgroup_root, unsigned pid);

/* The backend's process name (nvmlSystemGetProcessName) cached beside the procfs details of
 * pid: gs_procfs_cached_nvml_name copies it into p->nvml_name(_st) and returns 1 when known;
 * gs_procfs_store_nvml_name records it after a gs_procfs_fill that returned GS_OK. */
int gs_procfs_cached_nvml_name(struct gs_procfs *pf, unsigned pid, struct gs_proc *p);
void gs_procfs_store_nvml_name(struct gs_procfs *pf, unsigned pid, const struct gs_proc *p);

#endif
