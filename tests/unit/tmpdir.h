/*
 * tmpdir.h - a fresh temporary directory per test, with a database path in it, removed after
 * the test: the fixture of the store tests (test_store.c, test_store_samples.c). Include after
 * cmocka.h.
 */
#ifndef GS_TEST_TMPDIR_H
#define GS_TEST_TMPDIR_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tmp {
    char dir[64];
    char db[128];
};

/* A cmocka setup's body: *state becomes a struct tmp in a new directory made from tmpl
 * ("/tmp/NAME_XXXXXX"), db its file db_name. */
static inline int tmp_setup(void **state, const char *tmpl, const char *db_name)
{
    struct tmp *t = calloc(1, sizeof *t);

    if (!t)
        return -1;
    snprintf(t->dir, sizeof t->dir, "%s", tmpl);
    if (!mkdtemp(t->dir)) {
        free(t);
        return -1;
    }
    snprintf(t->db, sizeof t->db, "%s/%s", t->dir, db_name);
    *state = t;
    return 0;
}

/* The matching teardown: the directory and everything in it go. */
static inline int tmp_teardown(void **state)
{
    struct tmp *t = *state;
    char cmd[200];

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", t->dir);
    if (system(cmd) != 0)
        return -1;
    free(t);
    return 0;
}

#endif
