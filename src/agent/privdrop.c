/*
 * Dropping root (privdrop.h): the user's lookup, the data and socket directories prepared for
 * that user while still root, the TCP port bound while still root, and the drop itself. The
 * order in gs_agent_run is plan -> data dir -> socket dirs -> TCP port -> apply -> history,
 * NVML, sockets, HTTP.
 */
#include "agent/privdrop.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/log.h"
#include "gpuscope/gs_err.h"

#define DEFAULT_RUN_DIR "/run/gpuscope"

int gs_privdrop_plan(struct gs_privdrop *p, const char *user, struct gs_err *err)
{
    struct passwd pw, *res = NULL;
    char buf[4096];
    int e;

    memset(p, 0, sizeof *p);
    p->uid = geteuid();
    p->gid = getegid();
    if (!user || !user[0])
        return GS_OK;
    snprintf(p->user, sizeof p->user, "%s", user);
    e = getpwnam_r(user, &pw, buf, sizeof buf, &res);
    if (!res)
        return gs_err_set(err, GS_EINVAL, "user: no such user '%s'%s%s", user, e ? ": " : "",
                          e ? strerror(e) : "");
    if (pw.pw_uid == geteuid() && pw.pw_uid != 0) {
        gs_log(GS_LOG_INFO, "user: already running as %s (uid %u): nothing to drop", user,
               (unsigned)pw.pw_uid);
        return GS_OK;
    }
    if (geteuid() != 0)
        return gs_err_set(err, GS_EPERM,
                          "user: the agent runs as uid %u, not root: it cannot become %s "
                          "(start it as root, or remove the user key)",
                          (unsigned)geteuid(), user);
    p->uid = pw.pw_uid;
    p->gid = pw.pw_gid;
    p->active = pw.pw_uid != 0; /* user = root: nothing to drop */
    return GS_OK;
}

/* mkdir -p: parents 0755 (the user must traverse them), the last one mode. */
static int make_dirs(const char *dir, mode_t mode, struct gs_err *err)
{
    char path[PATH_MAX];
    size_t n = strlen(dir);

    if (n == 0 || n >= sizeof path || dir[0] != '/')
        return gs_err_set(err, GS_EINVAL, "data_dir: '%s' is not an absolute path", dir);
    memcpy(path, dir, n + 1);
    for (char *s = path + 1;; s++) {
        if (*s == '/' || *s == '\0') {
            char c = *s;
            *s = '\0';
            if (mkdir(path, c ? 0755 : mode) != 0 && errno != EEXIST)
                return gs_err_set(err, GS_EIO, "data_dir: mkdir %s: %s", path, strerror(errno));
            *s = c;
            if (!c)
                break;
        }
    }
    return GS_OK;
}

static const char *user_name(uid_t uid, char *buf, size_t len)
{
    struct passwd *pw = getpwuid(uid);

    snprintf(buf, len, "%s", pw ? pw->pw_name : "?");
    return buf;
}

/* 1 when dir holds nothing but history.db and its -wal, -shm, -journal files. */
static int only_history(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int ok = 1;

    if (!d)
        return 0;
    while ((de = readdir(d)) != NULL) {
        const char *n = de->d_name;
        if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0 || strcmp(n, "history.db") == 0 ||
            strcmp(n, "history.db-wal") == 0 || strcmp(n, "history.db-shm") == 0 ||
            strcmp(n, "history.db-journal") == 0)
            continue;
        ok = 0;
        break;
    }
    closedir(d);
    return ok;
}

/* Gives a root-owned data dir and its history.db files (regular files only, never through a
 * link) to the user. */
static int hand_over(const struct gs_privdrop *p, const char *dir, struct gs_err *err)
{
    static const char *const names[] = {"history.db", "history.db-wal", "history.db-shm",
                                        "history.db-journal"};
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

    if (dfd < 0)
        return gs_err_set(err, GS_EIO, "data_dir: open %s: %s", dir, strerror(errno));
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        struct stat st;
        if (fstatat(dfd, names[i], &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        if (!S_ISREG(st.st_mode) || st.st_uid != 0)
            continue; /* a link or someone else's: the store refuses or reports it */
        if (fchownat(dfd, names[i], p->uid, p->gid, AT_SYMLINK_NOFOLLOW) != 0) {
            close(dfd);
            return gs_err_set(err, GS_EIO, "data_dir: chown %s/%s: %s", dir, names[i],
                              strerror(errno));
        }
    }
    if (fchown(dfd, p->uid, p->gid) != 0) {
        close(dfd);
        return gs_err_set(err, GS_EIO, "data_dir: chown %s: %s", dir, strerror(errno));
    }
    close(dfd);
    gs_log(GS_LOG_INFO, "data_dir: %s given to %s (uid %u)", dir, p->user, (unsigned)p->uid);
    return GS_OK;
}

int gs_privdrop_data_dir(const struct gs_privdrop *p, const char *dir, struct gs_err *err)
{
    struct stat lst, st;
    char who[64];
    int rc;

    if (lstat(dir, &lst) != 0) {
        if (errno != ENOENT)
            return gs_err_set(err, GS_EIO, "data_dir: %s: %s", dir, strerror(errno));
        if (!p->active)
            return GS_OK; /* the recorder makes it, as us */
        rc = make_dirs(dir, 0750, err);
        if (rc != GS_OK)
            return rc;
        if (lstat(dir, &lst) != 0)
            return gs_err_set(err, GS_EIO, "data_dir: %s: %s", dir, strerror(errno));
    }
    if (S_ISLNK(lst.st_mode) && lst.st_uid != 0 && lst.st_uid != p->uid)
        return gs_err_set(err, GS_EPERM,
                          "data_dir: %s is a symbolic link owned by uid %u (%s), not by root "
                          "or the agent's user: refusing to follow it",
                          dir, (unsigned)lst.st_uid, user_name(lst.st_uid, who, sizeof who));
    if (stat(dir, &st) != 0)
        return gs_err_set(err, GS_EIO, "data_dir: %s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return gs_err_set(err, GS_EINVAL, "data_dir: %s is not a directory", dir);
    if (st.st_uid != p->uid && st.st_uid != 0)
        return gs_err_set(err, GS_EPERM,
                          "data_dir: %s%s is owned by uid %u (%s), not by the agent's user "
                          "(uid %u): refusing to write there",
                          dir, S_ISLNK(lst.st_mode) ? " (a symbolic link)" : "",
                          (unsigned)st.st_uid, user_name(st.st_uid, who, sizeof who),
                          (unsigned)p->uid);
    if ((st.st_mode & 0022) != 0)
        return gs_err_set(err, GS_EPERM,
                          "data_dir: %s is writable by group or others (mode %04o): refusing "
                          "it (anyone could plant links there); chmod go-w it",
                          dir, (unsigned)(st.st_mode & 07777));
    if (!p->active || st.st_uid == p->uid)
        return GS_OK;
    /* Root's: a drop hands it over when it is the agent's (empty or only the history). */
    if (!only_history(dir))
        return gs_err_set(err, GS_EPERM,
                          "data_dir: %s belongs to root and holds more than history.db; "
                          "chown it to %s or choose another data_dir",
                          dir, p->user);
    return hand_over(p, dir, err);
}

void gs_privdrop_socket_dir(const struct gs_privdrop *p, const char *sock_path)
{
    char dir[PATH_MAX], *slash;
    struct stat st;
    int made;

    if (!p->active || !sock_path || sock_path[0] != '/' ||
        snprintf(dir, sizeof dir, "%s", sock_path) >= (int)sizeof dir)
        return;
    slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return;
    *slash = '\0';
    for (char *s = dir + 1; s < slash; s++) { /* parents, as runs.c and the http socket do */
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(dir, 0755) != 0 && errno != EEXIST)
            gs_log(GS_LOG_WARN, "user: mkdir %s: %s", dir, strerror(errno));
        *s = '/';
    }
    made = mkdir(dir, 0755) == 0;
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        gs_log(GS_LOG_WARN, "user: %s is not a directory (a link?): left alone", dir);
        return;
    }
    if (st.st_uid == p->uid)
        return;
    if (!made && !(strcmp(dir, DEFAULT_RUN_DIR) == 0 && st.st_uid == 0)) {
        gs_log(GS_LOG_WARN,
               "user: %s is not %s's: its socket %s can only be bound if %s may "
               "write there",
               dir, p->user, sock_path, p->user);
        return;
    }
    if (chown(dir, p->uid, p->gid) != 0 || chmod(dir, 0755) != 0)
        gs_log(GS_LOG_WARN, "user: chown %s: %s", dir, strerror(errno));
}

int gs_privdrop_listen_tcp(const struct sockaddr_storage *ss, const char *text, int *fd,
                           struct gs_err *err)
{
    int one = 1, s;
    socklen_t len =
        ss->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);

    s = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return gs_err_set(err, GS_EIO, "http: socket: %s", strerror(errno));
    if (setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        (ss->ss_family == AF_INET6 &&
         setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) != 0) ||
        bind(s, (const struct sockaddr *)ss, len) != 0 || listen(s, 128) != 0) {
        int e = errno;
        close(s);
        return gs_err_set(err, GS_EIO, "http: cannot listen on %s: %s", text, strerror(e));
    }
    *fd = s;
    return GS_OK;
}

int gs_privdrop_apply(const struct gs_privdrop *p, struct gs_err *err)
{
    uid_t r, e, s;
    gid_t gr, ge, gsv;

    if (!p->active)
        return GS_OK;
    if (initgroups(p->user, p->gid) != 0)
        return gs_err_set(err, GS_EPERM, "user: initgroups(%s): %s", p->user, strerror(errno));
    if (setgid(p->gid) != 0)
        return gs_err_set(err, GS_EPERM, "user: setgid(%u): %s", (unsigned)p->gid, strerror(errno));
    if (setuid(p->uid) != 0)
        return gs_err_set(err, GS_EPERM, "user: setuid(%u): %s", (unsigned)p->uid, strerror(errno));
    if (getresuid(&r, &e, &s) != 0 || r != p->uid || e != p->uid || s != p->uid ||
        getresgid(&gr, &ge, &gsv) != 0 || gr != p->gid || ge != p->gid || gsv != p->gid)
        return gs_err_set(err, GS_EPERM, "user: ids not all %u/%u after the drop", (unsigned)p->uid,
                          (unsigned)p->gid);
    if (setuid(0) == 0 || seteuid(0) == 0)
        return gs_err_set(err, GS_EPERM, "user: root could be regained after the drop");
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return gs_err_set(err, GS_EPERM, "user: PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
    /* The kernel already resets it on setuid (fs.suid_dumpable, 0 by default); said anyway so
     * no other process of the user may ptrace the agent or read its memory. /proc/self turns
     * root's: the agent reads only others' world-readable /proc files (procfs.c, policy.c). */
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
        return gs_err_set(err, GS_EPERM, "user: PR_SET_DUMPABLE: %s", strerror(errno));
    gs_log(GS_LOG_INFO, "user: now %s (uid %u, gid %u)", p->user, (unsigned)p->uid,
           (unsigned)p->gid);
    return GS_OK;
}
