/*
 * Unit tests of src/base/dirfile.c: the directory check (owner, group/other write, a link, not
 * a directory), exclusive creation that never follows a planted link, whole files renamed into
 * place over a planted link without touching its target, no temporary left behind, checked
 * subdirectories.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/dirfile.h"
#include "gpuscope/gs_err.h"
#include "tmpdir.h"

static int setup(void **state)
{
    return tmp_setup(state, "/tmp/gs_dirfile_XXXXXX", "x");
}

static int teardown(void **state)
{
    return tmp_teardown(state);
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void expect_text(const char *path, const char *text)
{
    char buf[256] = "";
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    assert_string_equal(buf, text);
}

/* The names in dir, sorted, joined by spaces. */
static void names(const char *dir, char *out, size_t cap)
{
    struct dirent **ents;
    int n = scandir(dir, &ents, NULL, alphasort);
    out[0] = '\0';
    assert_true(n >= 0);
    for (int i = 0; i < n; i++) {
        if (strcmp(ents[i]->d_name, ".") && strcmp(ents[i]->d_name, "..")) {
            if (out[0])
                strncat(out, " ", cap - strlen(out) - 1);
            strncat(out, ents[i]->d_name, cap - strlen(out) - 1);
        }
        free(ents[i]);
    }
    free(ents);
}

static void test_open_dir_checks(void **state)
{
    struct tmp *t = *state;
    char d[200], link[200], file[200];
    struct gs_err err;
    int created = -1, fd;

    snprintf(d, sizeof d, "%s/a/b/run", t->dir);
    fd = gs_dirfile_open_dir(d, 1, &created, &err);
    assert_true(fd >= 0);
    assert_int_equal(created, 1);
    close(fd);
    fd = gs_dirfile_open_dir(d, 1, &created, &err); /* an existing one of ours */
    assert_true(fd >= 0);
    assert_int_equal(created, 0);
    close(fd);

    chmod(d, 0777);
    assert_int_equal(gs_dirfile_open_dir(d, 1, NULL, &err), GS_EPERM);
    assert_non_null(strstr(err.msg, "writable by every user (mode 0777)"));
    assert_non_null(strstr(err.msg, "chmod go-w"));
    chmod(d, 0775);
    if (geteuid() == 0) { /* root's group is its private one: accepted; a shared group's not */
        fd = gs_dirfile_open_dir(d, 0, NULL, &err);
        assert_true(fd >= 0);
        close(fd);
        assert_int_equal(chown(d, 0, 4242), 0);
        assert_int_equal(gs_dirfile_open_dir(d, 0, NULL, &err), GS_EPERM);
        assert_non_null(strstr(err.msg, "writable by its group"));
        assert_int_equal(chown(d, 0, 0), 0);
    }
    chmod(d, 01777); /* sticky protects renames, not the names another user may plant */
    assert_int_equal(gs_dirfile_open_dir(d, 0, NULL, &err), GS_EPERM);
    chmod(d, 0755);

    snprintf(link, sizeof link, "%s/link", t->dir);
    assert_int_equal(symlink(d, link), 0);
    assert_int_equal(gs_dirfile_open_dir(link, 1, NULL, &err), GS_EPERM);
    assert_non_null(strstr(err.msg, "symbolic link"));

    snprintf(file, sizeof file, "%s/file", t->dir);
    put(file, "x");
    assert_int_equal(gs_dirfile_open_dir(file, 1, NULL, &err), GS_EINVAL);
    assert_non_null(strstr(err.msg, "not a directory"));

    snprintf(d, sizeof d, "%s/missing", t->dir);
    assert_int_equal(gs_dirfile_open_dir(d, 0, NULL, &err), GS_ENOTFOUND);

    if (geteuid() == 0) { /* another user's directory */
        snprintf(d, sizeof d, "%s/theirs", t->dir);
        assert_int_equal(mkdir(d, 0755), 0);
        assert_int_equal(chown(d, 4242, 4242), 0);
        assert_int_equal(gs_dirfile_open_dir(d, 1, NULL, &err), GS_EPERM);
        assert_non_null(strstr(err.msg, "belongs to uid 4242"));
    }
}

static void test_create_never_follows(void **state)
{
    struct tmp *t = *state;
    char target[200], link[200];
    struct gs_err err;
    int dfd = gs_dirfile_open_dir(t->dir, 0, NULL, &err), fd;

    assert_true(dfd >= 0);
    snprintf(target, sizeof target, "%s/target", t->dir);
    snprintf(link, sizeof link, "%s/steps.jsonl", t->dir);
    put(target, "precious\n");
    assert_int_equal(symlink(target, link), 0);
    errno = 0;
    assert_int_equal(gs_dirfile_create(dfd, "steps.jsonl", O_WRONLY, 0644), -1);
    assert_int_equal(errno, EEXIST);
    expect_text(target, "precious\n");
    /* an existing regular file is not reused either */
    assert_int_equal(gs_dirfile_create(dfd, "target", O_WRONLY, 0644), -1);
    assert_int_equal(gs_dirfile_create(dfd, "a/b", O_WRONLY, 0644), -1);
    assert_int_equal(errno, EINVAL);
    fd = gs_dirfile_create(dfd, "fresh", O_WRONLY | O_APPEND, 0640);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "ok", 2), 2);
    close(fd);
    snprintf(link, sizeof link, "%s/fresh", t->dir);
    expect_text(link, "ok");
    close(dfd);
}

static void test_whole_file_replaces_link(void **state)
{
    struct tmp *t = *state;
    char target[200], path[200], list[400];
    struct gs_err err;
    struct gs_dirfile df;
    struct stat st;
    int dfd = gs_dirfile_open_dir(t->dir, 0, NULL, &err);

    assert_true(dfd >= 0);
    snprintf(target, sizeof target, "%s/target", t->dir);
    snprintf(path, sizeof path, "%s/stacks.svg", t->dir);
    put(target, "precious\n");
    assert_int_equal(symlink(target, path), 0);
    assert_int_equal(gs_dirfile_begin(&df, dfd, "stacks.svg", 0644, &err), GS_OK);
    fputs("<svg/>\n", df.f);
    assert_int_equal(gs_dirfile_commit(&df, &err), GS_OK);
    expect_text(target, "precious\n"); /* the link was replaced, not written through */
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0644 & ~umask(022));
    expect_text(path, "<svg/>\n");

    assert_int_equal(gs_dirfile_write(dfd, "hang.request", 0644, "3\n", 2, &err), GS_OK);
    snprintf(path, sizeof path, "%s/hang.request", t->dir);
    expect_text(path, "3\n");

    assert_int_equal(gs_dirfile_begin(&df, dfd, "gone.txt", 0644, &err), GS_OK);
    fputs("x", df.f);
    gs_dirfile_abort(&df);
    assert_int_equal(gs_dirfile_begin(&df, dfd, "../up", 0644, &err), GS_EINVAL);
    names(t->dir, list, sizeof list); /* no temporary and no aborted file left */
    assert_string_equal(list, "hang.request stacks.svg target");
    close(dfd);
}

static void test_subdir(void **state)
{
    struct tmp *t = *state;
    char elsewhere[200], link[200], path[200], other[200];
    struct gs_err err;
    int dfd = gs_dirfile_open_dir(t->dir, 0, NULL, &err), sub, fd;

    assert_true(dfd >= 0);
    sub = gs_dirfile_subdir(dfd, "profile", 0755, &err);
    assert_true(sub >= 0);
    close(sub);
    sub = gs_dirfile_subdir(dfd, "profile", 0755, &err); /* again: the same one */
    assert_true(sub >= 0);
    fd = gs_dirfile_create(sub, "trace.json", O_WRONLY, 0644);
    assert_true(fd >= 0);
    close(fd);
    close(sub);
    snprintf(path, sizeof path, "%s/profile/trace.json", t->dir);
    assert_int_equal(access(path, F_OK), 0);

    snprintf(elsewhere, sizeof elsewhere, "%s/elsewhere", t->dir);
    snprintf(link, sizeof link, "%s/hang-1-nccl", t->dir);
    assert_int_equal(mkdir(elsewhere, 0755), 0);
    assert_int_equal(symlink(elsewhere, link), 0);
    assert_int_equal(gs_dirfile_subdir(dfd, "hang-1-nccl", 0755, &err), GS_EPERM);
    assert_non_null(strstr(err.msg, "symbolic link"));
    snprintf(other, sizeof other, "%s/open", t->dir);
    assert_int_equal(mkdir(other, 0777), 0);
    chmod(other, 0777);
    assert_int_equal(gs_dirfile_subdir(dfd, "open", 0755, &err), GS_EPERM);

    close(dfd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_open_dir_checks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_never_follows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_whole_file_replaces_link, setup, teardown),
        cmocka_unit_test_setup_teardown(test_subdir, setup, teardown),
    };
    umask(022);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
