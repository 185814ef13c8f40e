/*
 * dirfile.h - files in a directory no other user can steer: the directory is opened once
 * (O_DIRECTORY|O_NOFOLLOW) and checked (ours, not writable by group or others, as ssh checks
 * ~/.ssh), and every file is created through that descriptor with
 * O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC, so no planted link is ever followed and no file that was
 * already there is reused. Whole files go to a fresh temporary name and are renamed into place
 * (renameat replaces a link at the final name, it never writes through it); files written as
 * they grow (steps.jsonl, samples.db) are created at their final name, exclusively.
 */
#ifndef GS_BASE_DIRFILE_H
#define GS_BASE_DIRFILE_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

struct gs_err;

/* Opens dir (O_DIRECTORY|O_NOFOLLOW|O_CLOEXEC) and checks that it is owned by the effective
 * uid and not writable by others, nor by its group unless that is the owner's private group
 * (primary, named as the owner, no other member: umask 002 setups). With create, a missing dir is
 * made (missing parents too, 0755) and *created says so (created may be NULL). Returns the
 * descriptor (>= 0) or a negative gs_rc, err naming the problem and the fix. */
int gs_dirfile_open_dir(const char *dir, int create, int *created, struct gs_err *err);

/* The same check on an open directory: GS_OK or GS_EPERM with err's message about `what`. */
int gs_dirfile_check(int dirfd, const char *what, struct gs_err *err);

/* Creates name in dirfd with O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC and flags (O_WRONLY, O_RDWR,
 * O_APPEND): an existing name, link or not, is refused (EEXIST). The fd, or -1 and errno. */
int gs_dirfile_create(int dirfd, const char *name, int flags, mode_t mode);

/* A subdirectory of dirfd: made when absent (mode), then opened O_DIRECTORY|O_NOFOLLOW and
 * checked as gs_dirfile_open_dir does. The descriptor or a negative gs_rc. */
int gs_dirfile_subdir(int dirfd, const char *name, mode_t mode, struct gs_err *err);

/* One whole file being written: gs_dirfile_begin opens a fresh temporary name beside name,
 * f writes it, gs_dirfile_commit renames it into place (or gs_dirfile_abort removes it). */
struct gs_dirfile {
    int dirfd;
    FILE *f;
    char name[256];
    char tmp[300];
};

int gs_dirfile_begin(struct gs_dirfile *df, int dirfd, const char *name, mode_t mode,
                     struct gs_err *err);
/* Flushes, syncs and closes f, then renameat into place; on any failure the temporary is removed
 * and err says why. */
int gs_dirfile_commit(struct gs_dirfile *df, struct gs_err *err);
void gs_dirfile_abort(struct gs_dirfile *df);

/* Writes len bytes as the whole file name (begin, write, commit). */
int gs_dirfile_write(int dirfd, const char *name, mode_t mode, const void *data, size_t len,
                     struct gs_err *err);

#endif
