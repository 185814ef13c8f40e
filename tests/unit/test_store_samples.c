/*
 * Unit tests for the read side of a history file's device samples (src/store/samples.c), on
 * real SQLite files written by the store in a temporary directory: a time range, NULLs as NaN,
 * the callback's stop, a file that is not a gpuscope history, a missing file, and no -shm
 * file left beside a cleanly closed history.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "tmpdir.h"

#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"
#include "store/history.h"
#include "store/samples.h"

#define T0 1700000040.0 /* unix seconds */

static int setup_tmp(void **state)
{
    return tmp_setup(state, "/tmp/gs_samples_XXXXXX", "samples.db");
}

static int teardown_tmp(void **state)
{
    return tmp_teardown(state);
}

/* A history with 2 GPUs sampled every 0.5 s for 10 samples from T0; GPU 1 has no power
 * reading. */
static void write_history(const char *path)
{
    struct gs_store *st = NULL;
    struct gs_snapshot *s = NULL;

    assert_int_equal(gs_store_open(&st, path, NULL, NULL), GS_OK);
    assert_int_equal(gs_snapshot_new(&s, 2, 4, NULL), GS_OK);
    for (unsigned k = 0; k < 10; k++) {
        s->t_real = T0 + 0.5 * k;
        for (unsigned i = 0; i < 2; i++) {
            struct gs_gpu *g = &s->gpus[i];
            g->index = i;
            gs_gpu_set(g, GS_M_UTIL_GPU, (double)(k * 10 + i) / 100.0);
            gs_gpu_set(g, GS_M_MEM_USED, 1073741824.0 * (i + 1));
            gs_gpu_set(g, GS_M_TEMP_GPU, 40.0 + k);
            if (i == 0)
                gs_gpu_set(g, GS_M_POWER_DRAW, 100.0 + k);
        }
        assert_int_equal(gs_store_append(st, s, NULL), GS_OK);
    }
    assert_int_equal(gs_store_flush(st, NULL), GS_OK);
    gs_store_close(st);
    gs_snapshot_free(s);
}

struct got {
    unsigned n, stop_at;
    struct gs_store_sample_row rows[64];
};

static int collect(void *ctx, const struct gs_store_sample_row *row)
{
    struct got *g = ctx;
    if (g->stop_at && g->n == g->stop_at)
        return GS_ENOMEM;
    assert_true(g->n < 64);
    g->rows[g->n++] = *row;
    return 0;
}

static void read_range(void **state)
{
    struct tmp *t = *state;
    struct got g = {0};
    struct gs_err err = {0};
    char shm[160];
    struct stat sb;

    write_history(t->db);
    /* samples 2..5 (T0+1.0 .. T0+2.5), both GPUs, in time then GPU order */
    assert_int_equal(gs_store_samples_read(t->db, T0 + 1.0, T0 + 2.5, collect, &g, &err), GS_OK);
    assert_int_equal(g.n, 8);
    for (unsigned j = 0; j < g.n; j++) {
        unsigned k = 2 + j / 2, i = j % 2;
        assert_true(fabs(g.rows[j].t - (T0 + 0.5 * k)) < 1e-6);
        assert_int_equal(g.rows[j].gpu, i);
        assert_true(fabs(g.rows[j].util_ratio - (double)(k * 10 + i) / 100.0) < 1e-9);
        assert_true(fabs(g.rows[j].mem_used_bytes - 1073741824.0 * (i + 1)) < 1.0);
        assert_true(fabs(g.rows[j].temp_c - (40.0 + k)) < 1e-9);
        if (i == 0)
            assert_true(fabs(g.rows[j].power_w - (100.0 + k)) < 1e-9);
        else
            assert_true(isnan(g.rows[j].power_w));
    }
    /* a range before the history: nothing */
    g.n = 0;
    assert_int_equal(gs_store_samples_read(t->db, T0 - 100, T0 - 1, collect, &g, &err), GS_OK);
    assert_int_equal(g.n, 0);
    /* the callback stops the read; its code comes back */
    g.n = 0;
    g.stop_at = 3;
    assert_int_equal(gs_store_samples_read(t->db, T0 - 1, T0 + 10, collect, &g, &err), GS_ENOMEM);
    assert_int_equal(g.n, 3);
    /* a cleanly closed history is read as immutable: no -shm file beside it */
    snprintf(shm, sizeof shm, "%s-shm", t->db);
    assert_int_not_equal(stat(shm, &sb), 0);
}

static void refuses_foreign(void **state)
{
    struct tmp *t = *state;
    struct got g = {0};
    struct gs_err err = {0};
    char path[160];
    FILE *f;

    snprintf(path, sizeof path, "%s/missing.db", t->dir);
    assert_int_equal(gs_store_samples_read(path, T0, T0 + 1, collect, &g, &err), GS_EIO);
    assert_non_null(strstr(err.msg, "missing.db"));
    snprintf(path, sizeof path, "%s/text.db", t->dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("this is not a database, only some text that is long enough to be a header\n", f);
    fclose(f);
    assert_int_equal(gs_store_samples_read(path, T0, T0 + 1, collect, &g, &err), GS_EPARSE);
    assert_non_null(strstr(err.msg, "not an SQLite database"));
    assert_int_equal(g.n, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(read_range, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(refuses_foreign, setup_tmp, teardown_tmp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
