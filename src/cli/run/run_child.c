/*
 * run_child.c - the child of `gpuscope run`: its output directory, its environment (the
 * step socket, the Python package, the profiler window), the forwarded signals, spawn and wait.
 */
#include "cli/run/run_int.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
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
#include "cli/cli.h"
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

/* The child the forwarded signals go to, and whether one of them was SIGINT (a Ctrl-C): the
 * signal handler's state. */
static volatile sig_atomic_t g_child_pid;
static volatile sig_atomic_t g_interrupted;
static volatile sig_atomic_t g_stop_sig;  /* the first SIGTERM, SIGINT or SIGHUP received */
static volatile sig_atomic_t g_own_group; /* CMD leads its own process group */

void gs_runcli_child_set(pid_t pid)
{
    g_child_pid = pid;
}

int gs_runcli_stop_signal(void)
{
    return g_stop_sig;
}

int gs_runcli_interrupted(void)
{
    return g_interrupted;
}

/* ---- files ---- */

/* What a run writes as it goes, created exclusively: their presence means another run (or
 * something planted) is there. SQLite's own files beside samples.db count too. */
static const char *const run_files[] = {
    "metrics_report.json", "steps.jsonl",        "samples.db",  "samples.db-wal",
    "samples.db-shm",      "samples.db-journal", "hang.request"};

/* Creates DIR (and missing parents, 0755) or opens the existing one, once, and checks it
 * (base/dirfile.h: ours, not writable by group or others, not a link): every file of the run
 * is then made through the descriptor returned. An existing directory is accepted unless it
 * holds one of a run's files: a second run never mixes into or overwrites the first.
 * *created says whether DIR itself was made here. -1 with the message printed. */
int gs_runcli_open_outdir(const char *dir, int *created)
{
    struct gs_err err;
    struct stat st;
    int fd = gs_dirfile_open_dir(dir, 1, created, &err);

    if (fd < 0) {
        fprintf(stderr, "gpuscope run: --out %s\n", err.msg);
        return -1;
    }
    for (size_t i = 0; i < sizeof run_files / sizeof run_files[0]; i++)
        if (fstatat(fd, run_files[i], &st, AT_SYMLINK_NOFOLLOW) == 0) {
            fprintf(stderr, "gpuscope run: %s already holds %s (%s); choose another --out\n", dir,
                    S_ISLNK(st.st_mode) ? "a symbolic link named like a run's file" : "a run",
                    run_files[i]);
            close(fd);
            if (*created)
                rmdir(dir);
            return -1;
        }
    return fd;
}

/* Removes what a run that never started left in the directory dirfd (path dir). */
void gs_runcli_remove_outputs(int dirfd, const char *dir, int created)
{
    static const char *const made[] = {"samples.db-wal", "samples.db-shm", "steps.jsonl",
                                       "samples.db", "profile"};

    for (size_t i = 0; i < sizeof made / sizeof made[0]; i++)
        unlinkat(dirfd, made[i], strcmp(made[i], "profile") == 0 ? AT_REMOVEDIR : 0);
    if (created)
        rmdir(dir);
}

/* Under sudo (root, SUDO_UID and SUDO_GID naming another user): hands what the run made in
 * DIR, one level of subdirectories down, and DIR itself when made here, to the user who ran
 * sudo, once nothing more is written (docs/run.md, SECURITY). Only root's own entries change
 * owner, by name without following links (fchownat AT_SYMLINK_NOFOLLOW). */
static void chown_entries(int dirfd, uid_t uid, gid_t gid, int depth)
{
    int fd = dup(dirfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    struct dirent *e;

    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    while ((e = readdir(d))) {
        struct stat st;
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
            fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_uid != 0 ||
            !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)))
            continue;
        if (S_ISDIR(st.st_mode) && depth > 0) {
            int sub = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0) {
                chown_entries(sub, uid, gid, depth - 1);
                close(sub);
            }
        }
        if (fchownat(dirfd, e->d_name, uid, gid, AT_SYMLINK_NOFOLLOW) != 0)
            fprintf(stderr, "gpuscope run: chown %s to SUDO_UID %u: %s\n", e->d_name, (unsigned)uid,
                    strerror(errno));
    }
    closedir(d);
}

void gs_runcli_give_to_sudo_user(int dirfd, int created)
{
    const char *su = getenv("SUDO_UID"), *sg = getenv("SUDO_GID");
    char *end;
    unsigned long uid, gid;

    if (geteuid() != 0 || !su || !sg || !su[0] || !sg[0])
        return;
    errno = 0;
    uid = strtoul(su, &end, 10);
    if (errno || *end || uid == 0 || uid >= (uid_t)-1)
        return;
    gid = strtoul(sg, &end, 10);
    if (errno || *end || gid >= (gid_t)-1)
        return;
    chown_entries(dirfd, (uid_t)uid, (gid_t)gid, 1);
    if (created && fchown(dirfd, (uid_t)uid, (gid_t)gid) != 0)
        fprintf(stderr, "gpuscope run: chown the run directory to SUDO_UID %lu: %s\n", uid,
                strerror(errno));
}

/* ---- the Python package ---- */

static int has_package(const char *pydir)
{
    char p[PATH_MAX];

    if (snprintf(p, sizeof p, "%s/gpuscope/__init__.py", pydir) >= (int)sizeof p)
        return 0;
    return access(p, R_OK) == 0;
}

/* Finds the directory holding the gpuscope package: $GPUSCOPE_PYTHON_DIR, else
 * <exe dir>/python (a build tree), else <exe dir>/GS_PYTHON_DIR_REL (an install moved or staged
 * with DESTDIR: <libexecdir>/../<libdir>/gpuscope/python), else GS_PYTHON_DIR (the install:
 * <libdir>/gpuscope/python, set by meson). */
static int run_find_pydir(char *out, size_t len)
{
    const char *env = getenv("GPUSCOPE_PYTHON_DIR");
    char exe[PATH_MAX];
    ssize_t n;
    char *slash;

    if (env && env[0]) {
        snprintf(out, len, "%s", env);
        return has_package(out) ? 0 : -1;
    }
    n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return -1;
    exe[n] = '\0';
    slash = strrchr(exe, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    if (snprintf(out, len, "%s/python", exe) < (int)len && has_package(out))
        return 0;
#ifdef GS_PYTHON_DIR_REL
    if (snprintf(out, len, "%s/" GS_PYTHON_DIR_REL, exe) < (int)len && has_package(out))
        return 0;
#endif
    if (snprintf(out, len, "%s", GS_PYTHON_DIR) >= (int)len)
        return -1;
    return has_package(out) ? 0 : -1;
}

/* --profile: the package's window (GPUSCOPE_PROFILE) and where its traces go. */
int gs_runcli_profile_env(const char *dir, const char *spec)
{
    char absdir[PATH_MAX], pdir[PATH_MAX + 16];

    if (!realpath(dir, absdir))
        snprintf(absdir, sizeof absdir, "%s", dir);
    snprintf(pdir, sizeof pdir, "%s/profile", absdir);
    return setenv("GPUSCOPE_PROFILE", spec, 1) != 0 || setenv("GPUSCOPE_PROFILE_DIR", pdir, 1) ? -1
                                                                                               : 0;
}

/* Environment CMD inherits: the socket, the output dir and (auto) PYTHONPATH. */
int gs_runcli_child_env(const char *sock, const char *dir, int auto_inject)
{
    char pydir[PATH_MAX], pp[3 * PATH_MAX];
    const char *old = getenv("PYTHONPATH");
    char absdir[PATH_MAX];

    if (!realpath(dir, absdir))
        snprintf(absdir, sizeof absdir, "%s", dir);
    char self[24];

    /* GPUSCOPE_RUN_PID: CMD's parent, so that the auto sitecustomize knows the command's own
     * process (it alone reports a Python that never imported torch) */
    snprintf(self, sizeof self, "%ld", (long)getpid());
    if (setenv("GPUSCOPE_RUN_SOCKET", sock, 1) != 0 || setenv("GPUSCOPE_RUN_DIR", absdir, 1) != 0 ||
        setenv("GPUSCOPE_RUN_PID", self, 1) != 0)
        return -1;
    if (run_find_pydir(pydir, sizeof pydir) != 0) {
        fprintf(stderr, "gpuscope run: the gpuscope Python package was not found (set "
                        "GPUSCOPE_PYTHON_DIR); step timing only from a CMD that sends "
                        "records itself\n");
        return 0;
    }
    /* --no-auto still makes `import gpuscope` work; only the sitecustomize is left out. */
    if (auto_inject)
        snprintf(pp, sizeof pp, "%s/gpuscope/_auto:%s%s%s", pydir, pydir, old && *old ? ":" : "",
                 old && *old ? old : "");
    else
        snprintf(pp, sizeof pp, "%s%s%s", pydir, old && *old ? ":" : "", old && *old ? old : "");
    return setenv("PYTHONPATH", pp, 1);
}

/* ---- the child ---- */

static void run_on_signal(int sig, siginfo_t *si, void *uc)
{
    pid_t child = (pid_t)g_child_pid;
    int saved = errno; /* the interrupted code may be about to read errno */

    (void)uc;
    if (!g_stop_sig && (sig == SIGTERM || sig == SIGINT || sig == SIGHUP))
        g_stop_sig = sig;
    if (sig == SIGINT || sig == SIGQUIT) {
        g_interrupted = 1;
        /* A terminal's Ctrl-C already reached CMD, which shares our process group; only a
         * kill() aimed at gpuscope run itself is passed on. */
        if (si->si_code != SI_USER && !g_own_group)
            goto out;
    }
    if (child > 0)
        kill(g_own_group ? -child : child, sig);
out:
    errno = saved;
}

static const int fwd_signals[] = {SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGINT, SIGQUIT};
#define N_FWD (sizeof fwd_signals / sizeof fwd_signals[0])

void gs_runcli_signals(sigset_t *set)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = run_on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigemptyset(set);
    for (size_t i = 0; i < N_FWD; i++) {
        sigaction(fwd_signals[i], &sa, NULL);
        sigaddset(set, fwd_signals[i]);
    }
    signal(SIGPIPE, SIG_IGN);
}

/* Whether CMD can be found like a shell would (a name with '/' is taken as a path). */
int gs_runcli_cmd_exists(const char *cmd)
{
    const char *path = getenv("PATH");
    char buf[PATH_MAX];

    if (strchr(cmd, '/'))
        return access(cmd, F_OK) == 0;
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path;;) {
        size_t len = strcspn(p, ":");

        snprintf(buf, sizeof buf, "%.*s%s%s", (int)len, p, len ? "/" : "./", cmd);
        if (access(buf, X_OK) == 0)
            return 1;
        p += len;
        if (!*p)
            return 0;
        p++;
    }
}

/* fork + exec; an exec failure comes back through a close-on-exec pipe. Returns the pid, or
 * -(exit status) when CMD could not start. */
pid_t gs_runcli_spawn(char **cmd, const sigset_t *fwd, int own_group)
{
    int pfd[2], e = 0;
    pid_t pid;
    ssize_t r;

    if (pipe2(pfd, O_CLOEXEC) != 0)
        return -RUN_EXIT_FAIL;
    pid = fork();
    if (pid < 0) {
        close(pfd[0]);
        close(pfd[1]);
        return -RUN_EXIT_FAIL;
    }
    if (pid == 0) {
        /* Only async-signal-safe calls between fork and exec: other threads exist. */
        for (size_t i = 0; i < N_FWD; i++)
            signal(fwd_signals[i], SIG_DFL);
        signal(SIGPIPE, SIG_DFL);
        if (own_group)
            setpgid(0, 0);
        sigprocmask(SIG_UNBLOCK, fwd, NULL);
        execvp(cmd[0], cmd);
        e = errno;
        r = write(pfd[1], &e, sizeof e);
        (void)r;
        _exit(e == ENOENT ? RUN_EXIT_NOTFOUND : RUN_EXIT_NOEXEC);
    }
    close(pfd[1]);
    if (own_group) {
        setpgid(pid, pid); /* either side may come first; the other then fails harmlessly */
        g_own_group = 1;
    }
    do
        r = read(pfd[0], &e, sizeof e);
    while (r < 0 && errno == EINTR);
    close(pfd[0]);
    if (r == (ssize_t)sizeof e) {
        waitpid(pid, NULL, 0);
        fprintf(stderr, "gpuscope run: %s: %s\n", cmd[0],
                e == ENOENT ? "command not found" : strerror(e));
        return e == ENOENT ? -RUN_EXIT_NOTFOUND : -RUN_EXIT_NOEXEC;
    }
    return pid;
}

/* CMD's exit status as a shell gives it; *sig the signal that killed it (0: none), for the
 * report's outcome (128 + N alone cannot tell `exit 130` from SIGINT). */
int gs_runcli_wait(pid_t pid, int *sig)
{
    int status;

    *sig = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return RUN_EXIT_FAIL;
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) {
        *sig = WTERMSIG(status);
        return 128 + WTERMSIG(status);
    }
    return RUN_EXIT_FAIL;
}
