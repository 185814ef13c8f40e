/*
 * dirfile.c - files in a directory no other user can steer (dirfile.h): one checked directory
 * descriptor, every file created through it exclusively and without following links, whole
 * files renamed into place. The writers of a run directory (gpuscope run's steps, samples,
 * report and stacks files, the hang request, the profiler window's traces) all go through here.
 */
#include "base/dirfile.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gpuscope/gs_err.h"

/* A user-private group (Debian's and Fedora's umask 002 setups): the owner's primary group,
 * named as the owner, with no member but the owner. Group write there is the owner's alone,
 * as Debian's ssh accepts it for ~/.ssh. */
static int private_group(uid_t uid, gid_t gid)
{
    struct passwd pw, *pwp = NULL;
    struct group gr, *grp = NULL;
    char pbuf[4096], gbuf[16384];

    if (getpwuid_r(uid, &pw, pbuf, sizeof pbuf, &pwp) != 0 || !pwp || pw.pw_gid != gid ||
        getgrgid_r(gid, &gr, gbuf, sizeof gbuf, &grp) != 0 || !grp ||
        strcmp(gr.gr_name, pw.pw_name) != 0)
        return 0;
    for (char **m = gr.gr_mem; m && *m; m++)
        if (strcmp(*m, pw.pw_name) != 0)
            return 0;
    return 1;
}

static int check_stat(const struct stat *st, const char *what, struct gs_err *err)
{
    if (!S_ISDIR(st->st_mode))
        return gs_err_set(err, GS_EINVAL, "%s is not a directory", what);
    if (st->st_uid != geteuid())
        return gs_err_set(err, GS_EPERM,
                          "%s belongs to uid %u, not to you (uid %u): its owner could plant "
                          "links or files in it; use a directory of your own",
                          what, (unsigned)st->st_uid, (unsigned)geteuid());
    if ((st->st_mode & S_IWOTH) ||
        ((st->st_mode & S_IWGRP) && !private_group(st->st_uid, st->st_gid)))
        return gs_err_set(err, GS_EPERM,
                          "%s is writable by %s (mode %04o): another user could plant links or "
                          "files in it; make it private (chmod go-w %s) or use another directory",
                          what, (st->st_mode & S_IWOTH) ? "every user" : "its group",
                          (unsigned)(st->st_mode & 07777), what);
    return GS_OK;
}

int gs_dirfile_check(int dirfd, const char *what, struct gs_err *err)
{
    struct stat st;

    if (fstat(dirfd, &st) != 0)
        return gs_err_set(err, GS_EIO, "%s: fstat: %s", what, strerror(errno));
    return check_stat(&st, what, err);
}

static int open_checked(int at, const char *path, const char *what, struct gs_err *err)
{
    int fd = openat(at, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int rc;

    if (fd < 0) {
        struct stat st;
        if (errno == ELOOP ||
            (errno == ENOTDIR && fstatat(at, path, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
             S_ISLNK(st.st_mode)))
            return gs_err_set(err, GS_EPERM,
                              "%s is a symbolic link: links are not followed here; give the "
                              "directory itself",
                              what);
        if (errno == ENOTDIR)
            return gs_err_set(err, GS_EINVAL, "%s exists and is not a directory", what);
        return gs_err_set(err,
                          errno == EACCES   ? GS_EPERM
                          : errno == ENOENT ? GS_ENOTFOUND
                                            : GS_EIO,
                          "%s: %s", what, strerror(errno));
    }
    rc = gs_dirfile_check(fd, what, err);
    if (rc != GS_OK) {
        close(fd);
        return rc;
    }
    return fd;
}

int gs_dirfile_open_dir(const char *dir, int create, int *created, struct gs_err *err)
{
    char path[PATH_MAX];
    size_t n = strlen(dir);

    if (created)
        *created = 0;
    if (n == 0 || n >= sizeof path)
        return gs_err_set(err, GS_EINVAL, "%s: %s", n ? dir : "\"\"",
                          n ? "path too long" : "empty directory name");
    if (create) {
        memcpy(path, dir, n + 1);
        while (n > 1 && path[n - 1] == '/')
            path[--n] = '\0';
        for (char *p = path + 1; *p; p++) {
            if (*p != '/')
                continue;
            *p = '\0';
            if (mkdir(path, 0755) != 0 && errno != EEXIST)
                return gs_err_set(err, GS_EIO, "mkdir %s: %s", path, strerror(errno));
            *p = '/';
        }
        if (mkdir(path, 0755) == 0) {
            if (created)
                *created = 1;
        } else if (errno != EEXIST) {
            return gs_err_set(err, errno == EACCES ? GS_EPERM : GS_EIO, "mkdir %s: %s", path,
                              strerror(errno));
        }
    }
    return open_checked(AT_FDCWD, dir, dir, err);
}

int gs_dirfile_create(int dirfd, const char *name, int flags, mode_t mode)
{
    if (!name[0] || strchr(name, '/')) {
        errno = EINVAL;
        return -1;
    }
    return openat(dirfd, name, flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
}

int gs_dirfile_subdir(int dirfd, const char *name, mode_t mode, struct gs_err *err)
{
    if (!name[0] || strchr(name, '/'))
        return gs_err_set(err, GS_EINVAL, "%s: not a plain name", name);
    if (mkdirat(dirfd, name, mode) != 0 && errno != EEXIST)
        return gs_err_set(err, errno == EACCES ? GS_EPERM : GS_EIO, "mkdir %s: %s", name,
                          strerror(errno));
    return open_checked(dirfd, name, name, err);
}

static uint64_t tmp_random(void)
{
    uint64_t r = 0;
    struct timespec ts;

    if (getrandom(&r, sizeof r, GRND_NONBLOCK) == (ssize_t)sizeof r)
        return r;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20);
}

int gs_dirfile_begin(struct gs_dirfile *df, int dirfd, const char *name, mode_t mode,
                     struct gs_err *err)
{
    int fd = -1;

    memset(df, 0, sizeof *df);
    df->dirfd = dirfd;
    if (!name[0] || strchr(name, '/') ||
        snprintf(df->name, sizeof df->name, "%s", name) >= (int)sizeof df->name)
        return gs_err_set(err, GS_EINVAL, "%s: not a plain file name", name);
    /* a fresh name each try: one planted at the first is refused (O_EXCL), never used */
    for (int tries = 0; tries < 16 && fd < 0; tries++) {
        snprintf(df->tmp, sizeof df->tmp, ".%s.tmp-%012llx", name,
                 (unsigned long long)(tmp_random() & 0xffffffffffffULL));
        fd = gs_dirfile_create(dirfd, df->tmp, O_WRONLY, mode);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0)
        return gs_err_set(err, GS_EIO, "%s: create %s: %s", name, df->tmp, strerror(errno));
    df->f = fdopen(fd, "w");
    if (!df->f) {
        close(fd);
        unlinkat(dirfd, df->tmp, 0);
        return gs_err_set(err, GS_ENOMEM, "%s: fdopen: %s", name, strerror(errno));
    }
    return GS_OK;
}

int gs_dirfile_commit(struct gs_dirfile *df, struct gs_err *err)
{
    int bad, e;

    if (!df->f)
        return gs_err_set(err, GS_EINVAL, "%s: not open", df->name);
    bad = fflush(df->f) != 0 || ferror(df->f) || fsync(fileno(df->f)) != 0;
    e = errno;
    if (fclose(df->f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    df->f = NULL;
    if (!bad && renameat(df->dirfd, df->tmp, df->dirfd, df->name) != 0) {
        bad = 1;
        e = errno;
    }
    if (bad) {
        unlinkat(df->dirfd, df->tmp, 0);
        return gs_err_set(err, GS_EIO, "%s: %s", df->name, strerror(e ? e : EIO));
    }
    return GS_OK;
}

void gs_dirfile_abort(struct gs_dirfile *df)
{
    if (!df->f)
        return;
    fclose(df->f);
    df->f = NULL;
    unlinkat(df->dirfd, df->tmp, 0);
}

int gs_dirfile_write(int dirfd, const char *name, mode_t mode, const void *data, size_t len,
                     struct gs_err *err)
{
    struct gs_dirfile df;
    int rc = gs_dirfile_begin(&df, dirfd, name, mode, err);

    if (rc != GS_OK)
        return rc;
    if (len && fwrite(data, 1, len, df.f) != len) {
        int e = errno;
        gs_dirfile_abort(&df);
        return gs_err_set(err, GS_EIO, "%s: %s", name, strerror(e ? e : EIO));
    }
    return gs_dirfile_commit(&df, err);
}
