/*
 * Unit tests of the shared base (src/base/): the periodic thread (ticker.c: period, prompt
 * stop, overruns skipped and counted), the capped text buffer (buf.c: growth, cap, sticky
 * status, take), FNV-1a (hash.c) and the number and duration parsers (parse.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/hash.h"
#include "base/parse.h"
#include "base/ticker.h"
#include "base/userdir.h"

#define MS 1000000LL

/* ---- ticker ---- */

struct tick_rec {
    pthread_mutex_t lock;
    int64_t t[64];
    unsigned n;
    uint64_t missed;
    int64_t busy_ns; /* how long each call takes */
};

static void on_tick(void *ctx, uint64_t missed)
{
    struct tick_rec *r = ctx;
    int64_t busy;

    pthread_mutex_lock(&r->lock);
    if (r->n < 64)
        r->t[r->n++] = gs_clock_mono_ns();
    r->missed += missed;
    busy = r->busy_ns;
    pthread_mutex_unlock(&r->lock);
    if (busy > 0)
        usleep((useconds_t)(busy / 1000));
}

static unsigned ticks(struct tick_rec *r)
{
    unsigned n;

    pthread_mutex_lock(&r->lock);
    n = r->n;
    pthread_mutex_unlock(&r->lock);
    return n;
}

static void test_ticker_period(void **state)
{
    struct tick_rec r = {.lock = PTHREAD_MUTEX_INITIALIZER};
    struct gs_ticker *t;
    int64_t t0 = gs_clock_mono_ns();

    (void)state;
    assert_int_equal(gs_ticker_start(&t, 20 * MS, t0, on_tick, &r), 0);
    while (ticks(&r) < 5 && gs_clock_mono_ns() - t0 < 5000 * MS)
        usleep(2000);
    gs_ticker_stop(t);
    assert_true(r.n >= 5);
    /* The first tick at first = t0, the rest on t0 + k * 20 ms, never early. */
    assert_true(r.t[0] >= t0);
    for (unsigned k = 1; k < 5; k++)
        assert_true(r.t[k] >= t0 + (int64_t)k * 20 * MS);
}

static void test_ticker_first_after_a_period(void **state)
{
    struct tick_rec r = {.lock = PTHREAD_MUTEX_INITIALIZER};
    struct gs_ticker *t;
    int64_t t0 = gs_clock_mono_ns();

    (void)state;
    assert_int_equal(gs_ticker_start(&t, 30 * MS, t0 + 30 * MS, on_tick, &r), 0);
    while (ticks(&r) < 1 && gs_clock_mono_ns() - t0 < 5000 * MS)
        usleep(2000);
    gs_ticker_stop(t);
    assert_true(r.n >= 1);
    assert_true(r.t[0] >= t0 + 30 * MS);
}

static void test_ticker_stop_is_prompt(void **state)
{
    struct tick_rec r = {.lock = PTHREAD_MUTEX_INITIALIZER};
    struct gs_ticker *t;
    int64_t t0 = gs_clock_mono_ns(), t1;

    (void)state;
    /* A period of an hour: the stop must not wait for the boundary. */
    assert_int_equal(gs_ticker_start(&t, 3600 * 1000 * MS, t0 + 3600 * 1000 * MS, on_tick, &r), 0);
    usleep(10000);
    gs_ticker_stop(t);
    t1 = gs_clock_mono_ns();
    assert_int_equal(r.n, 0);
    assert_true(t1 - t0 < 2000 * MS);
    gs_ticker_stop(NULL);
}

static void test_ticker_overruns_counted(void **state)
{
    struct tick_rec r = {.lock = PTHREAD_MUTEX_INITIALIZER, .busy_ns = 55 * MS};
    struct gs_ticker *t;
    int64_t t0 = gs_clock_mono_ns();
    uint64_t over;
    unsigned n;

    (void)state;
    /* Each call takes 55 ms of a 20 ms period: at least 2 boundaries skipped per call. */
    assert_int_equal(gs_ticker_start(&t, 20 * MS, t0, on_tick, &r), 0);
    while ((n = ticks(&r)) < 4 && gs_clock_mono_ns() - t0 < 5000 * MS)
        usleep(2000);
    over = gs_ticker_overruns(t); /* n calls started: n - 1 skips counted, or more */
    gs_ticker_stop(t);
    assert_true(n >= 4);
    assert_true(over >= 2 * (uint64_t)(n - 1));
    assert_true(r.missed >= 2);
    /* Skipped, not made up: consecutive calls stay a whole overrun apart, on the grid. */
    for (unsigned k = 1; k < r.n; k++) {
        assert_true(r.t[k] - r.t[k - 1] >= 55 * MS);
        assert_true(r.t[k] - t0 >= 0);
    }
}

static void test_ticker_at_once_and_bad_args(void **state)
{
    struct tick_rec r = {.lock = PTHREAD_MUTEX_INITIALIZER};
    struct gs_ticker *t = (struct gs_ticker *)&r;
    int64_t t0 = gs_clock_mono_ns();

    (void)state;
    assert_int_not_equal(gs_ticker_start(&t, 0, t0, on_tick, &r), 0);
    assert_null(t);
    assert_int_not_equal(gs_ticker_start(&t, MS, t0, NULL, &r), 0);
    /* A period of an hour and first = now: the first call does not wait for a period. */
    assert_int_equal(gs_ticker_start(&t, 3600 * 1000 * MS, t0, on_tick, &r), 0);
    while (ticks(&r) < 1 && gs_clock_mono_ns() - t0 < 5000 * MS)
        usleep(2000);
    gs_ticker_stop(t);
    assert_int_equal(r.n, 1);
}

static void test_ticker_set_period(void **state)
{
    struct tick_rec r = {.lock = PTHREAD_MUTEX_INITIALIZER};
    struct gs_ticker *t;
    int64_t t0 = gs_clock_mono_ns();
    unsigned at_set, n1, n2;

    (void)state;
    assert_int_equal(gs_ticker_start(&t, 10 * MS, t0, on_tick, &r), 0);
    while (ticks(&r) < 2 && gs_clock_mono_ns() - t0 < 5000 * MS)
        usleep(2000);
    /* An hour from the next boundary computed: the wait under way keeps its deadline, so at
     * most the call under way and one more, then none. */
    gs_ticker_set_period(t, 3600 * 1000 * MS);
    at_set = ticks(&r);
    usleep(300000);
    n1 = ticks(&r);
    usleep(300000);
    n2 = ticks(&r);
    gs_ticker_stop(t);
    assert_true(at_set >= 2);
    assert_true(n1 <= at_set + 2);
    assert_int_equal(n1, n2);
    gs_ticker_set_period(NULL, MS);
}

/* ---- buf ---- */

static void test_buf_printf_growth(void **state)
{
    struct gs_buf b = {0};
    char big[1000];

    (void)state;
    assert_string_equal(gs_buf_str(&b), "");
    gs_buf_puts(&b, "a");
    gs_buf_printf(&b, "%d-%s", 42, "x");
    assert_string_equal(gs_buf_str(&b), "a42-x");
    assert_int_equal(b.len, 5);
    /* Past the first 256 bytes and a long line in one printf (no 512-byte truncation). */
    memset(big, 'z', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    for (int i = 0; i < 10; i++)
        gs_buf_printf(&b, "%s|", big);
    assert_int_equal(b.len, 5 + 10 * 1000);
    assert_int_equal(strlen(gs_buf_str(&b)), b.len);
    assert_int_equal(b.data[5 + 999], '|');
    assert_int_equal(gs_buf_status(&b), GS_BUF_OK);
    gs_buf_fill(&b, ' ', 3);
    assert_int_equal(b.len, 5 + 10 * 1000 + 3);
    gs_buf_reset(&b);
    assert_int_equal(b.len, 0);
    assert_string_equal(gs_buf_str(&b), "");
    gs_buf_free(&b);
    gs_buf_free(NULL);
}

static void test_buf_cap_and_status(void **state)
{
    struct gs_buf b;

    (void)state;
    gs_buf_init(&b, 8); /* 7 bytes of text */
    gs_buf_puts(&b, "1234567");
    assert_int_equal(gs_buf_status(&b), GS_BUF_OK);
    assert_string_equal(gs_buf_str(&b), "1234567");
    gs_buf_puts(&b, "8");
    assert_int_equal(gs_buf_status(&b), GS_BUF_FULL);
    /* Sticky: later appends do nothing, the text so far stays. */
    gs_buf_puts(&b, "");
    gs_buf_printf(&b, "%s", "x");
    assert_int_equal(gs_buf_status(&b), GS_BUF_FULL);
    assert_string_equal(gs_buf_str(&b), "1234567");
    /* reset clears the error and keeps the cap. */
    gs_buf_reset(&b);
    gs_buf_printf(&b, "%s", "123456789");
    assert_int_equal(gs_buf_status(&b), GS_BUF_FULL);
    assert_string_equal(gs_buf_str(&b), "");
    gs_buf_reset(&b);
    gs_buf_fail(&b, GS_BUF_EFMT);
    gs_buf_fail(&b, GS_BUF_ENOMEM); /* the first failure stays */
    assert_int_equal(gs_buf_status(&b), GS_BUF_EFMT);
    gs_buf_free(&b);
}

static void test_buf_copy(void **state)
{
    struct gs_buf b = {0};
    size_t len;

    (void)state;
    gs_buf_puts(&b, "label=\"x\"|");
    /* copies that make the buffer grow (its text moves) many times over */
    for (int i = 0; i < 200; i++)
        gs_buf_copy(&b, 0, 10);
    assert_int_equal(gs_buf_status(&b), GS_BUF_OK);
    assert_int_equal(b.len, 201 * 10);
    for (size_t i = 0; i < b.len; i += 10)
        assert_memory_equal(b.data + i, "label=\"x\"|", 10);
    assert_int_equal(b.data[b.len], '\0');
    len = b.len;
    gs_buf_copy(&b, 3, 0); /* nothing */
    assert_int_equal(b.len, len);
    gs_buf_copy(&b, len - 2, 3); /* past the text: refused, sticky */
    assert_int_equal(gs_buf_status(&b), GS_BUF_EFMT);
    assert_int_equal(b.len, len);
    gs_buf_free(&b);
    gs_buf_init(&b, 8); /* the cap holds for copies too */
    gs_buf_puts(&b, "1234");
    gs_buf_copy(&b, 0, 4);
    assert_int_equal(gs_buf_status(&b), GS_BUF_FULL);
    assert_string_equal(gs_buf_str(&b), "1234");
    gs_buf_free(&b);
}

static void test_buf_take(void **state)
{
    struct gs_buf b = {0};
    size_t n = 99;
    char *p;

    (void)state;
    assert_null(gs_buf_take(&b, &n));
    assert_int_equal(n, 0);
    gs_buf_printf(&b, "{\"a\":%d}", 1);
    p = gs_buf_take(&b, &n);
    assert_string_equal(p, "{\"a\":1}");
    assert_int_equal(n, 7);
    assert_string_equal(gs_buf_str(&b), "");
    assert_int_equal(b.len, 0);
    free(p);
    gs_buf_free(&b);
}

/* ---- hash ---- */

static void test_hash_fnv1a(void **state)
{
    (void)state;
    /* The published FNV-1a 32-bit test vectors. */
    assert_int_equal(gs_hash_fnv1a("", 0), 0x811c9dc5u);
    assert_int_equal(gs_hash_fnv1a("a", 1), 0xe40c292cu);
    assert_int_equal(gs_hash_fnv1a("foobar", 6), 0xbf9cf968u);
    assert_int_equal(gs_hash_fnv1a_add(gs_hash_fnv1a("foo", 3), "bar", 3), 0xbf9cf968u);
    /* The pair: a 0xff between the two strings. */
    assert_int_equal(gs_hash_fnv1a_pair("foo", "bar"),
                     gs_hash_fnv1a_add(gs_hash_fnv1a("foo\xff", 4), "bar", 3));
    assert_int_not_equal(gs_hash_fnv1a_pair("ab", "c"), gs_hash_fnv1a_pair("a", "bc"));
}

/* ---- parse ---- */

static void test_parse_numbers(void **state)
{
    double v = -1;

    (void)state;
    assert_true(gs_parse_is_number("1"));
    assert_true(gs_parse_is_number("0.5"));
    assert_true(gs_parse_is_number("-2e3"));
    assert_false(gs_parse_is_number(""));
    assert_false(gs_parse_is_number(NULL));
    assert_false(gs_parse_is_number("1x"));
    assert_false(gs_parse_is_number("--json"));
    assert_true(gs_parse_is_digits("0123"));
    assert_false(gs_parse_is_digits("-1"));
    assert_false(gs_parse_is_digits("1.5"));
    assert_false(gs_parse_is_digits(""));
    assert_false(gs_parse_is_digits(NULL));
    assert_int_equal(gs_parse_double("2.5", &v), 0);
    assert_true(v == 2.5);
    assert_int_equal(gs_parse_double("2.5s", &v), -1);
    assert_int_equal(gs_parse_double("", &v), -1);
    assert_int_equal(gs_parse_double("inf", &v), -1);
    assert_int_equal(gs_parse_double("nan", &v), -1);
    assert_int_equal(gs_parse_double("1e999", &v), -1);
    assert_true(v == 2.5); /* untouched on failure */
    assert_int_equal(gs_parse_double_range("0.1", 0.1, 60, &v), 0);
    assert_true(v == 0.1);
    assert_int_equal(gs_parse_double_range("0.09", 0.1, 60, &v), -1);
    assert_int_equal(gs_parse_double_range("61", 0.1, 60, &v), -1);
    assert_int_equal(gs_parse_double_range("x", 0.1, 60, &v), -1);
}

static void test_parse_plain_decimal(void **state)
{
    double v = -1;
    const char *bad[] = {"",
                         "+1",
                         "-1",
                         " 1",
                         "1 ",
                         "1e3",
                         "0x10",
                         "inf",
                         "nan",
                         "1.",
                         ".5",
                         "1.2.3",
                         "123456789012345678901",
                         NULL};

    (void)state;
    assert_int_equal(gs_parse_plain_decimal("1700000000.25", &v), 0);
    assert_true(v == 1700000000.25);
    assert_int_equal(gs_parse_plain_decimal("0", &v), 0);
    assert_true(v == 0);
    assert_int_equal(gs_parse_plain_decimal("12345678901234567890", &v), 0);
    for (int i = 0; bad[i]; i++) {
        v = -1;
        assert_int_equal(gs_parse_plain_decimal(bad[i], &v), -1);
        assert_true(v == -1);
    }
    assert_int_equal(gs_parse_plain_decimal(NULL, &v), -1);
}

static void test_parse_duration(void **state)
{
    double v = -1;

    (void)state;
    assert_int_equal(gs_parse_duration("90", &v), 0);
    assert_true(v == 90);
    assert_int_equal(gs_parse_duration("1.5s", &v), 0);
    assert_true(v == 1.5);
    assert_int_equal(gs_parse_duration("5m", &v), 0);
    assert_true(v == 300);
    assert_int_equal(gs_parse_duration("2h", &v), 0);
    assert_true(v == 7200);
    assert_int_equal(gs_parse_duration("7d", &v), 0);
    assert_true(v == 7 * 86400);
    v = -1;
    const char *bad[] = {"", " 5", "+5", "-5", "0x10", "1e3", "inf", "5w", "5ms", "5 s", "s"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(gs_parse_duration(bad[i], &v), -1);
    assert_int_equal(gs_parse_duration(NULL, &v), -1);
    assert_true(v == -1);
}

/* The user's runtime dir: made under $XDG_RUNTIME_DIR, and refused when it is a link or (as
 * root, who can make one) someone else's. */
static void test_user_runtime_dir(void **state)
{
    char tmpl[] = "/tmp/gs-userdir-XXXXXX", want[128], got[256], path[300];
    char *old = getenv("XDG_RUNTIME_DIR") ? strdup(getenv("XDG_RUNTIME_DIR")) : NULL;

    (void)state;
    assert_non_null(mkdtemp(tmpl));
    setenv("XDG_RUNTIME_DIR", tmpl, 1);
    snprintf(want, sizeof want, "%s/gpuscope", tmpl);
    assert_int_equal(gs_user_runtime_path(path, sizeof path, "steps.sock"), -1); /* not made */
    assert_int_equal(gs_user_runtime_dir(got, sizeof got, 1), 0);
    assert_string_equal(got, want);
    assert_int_equal(gs_user_runtime_path(path, sizeof path, "steps.sock"), 0);
    assert_int_equal(strncmp(path, want, strlen(want)), 0);
    assert_int_equal(gs_user_runtime_path(path, 8, "steps.sock"), -1); /* too long */
    if (getuid() == 0) {
        assert_int_equal(chown(want, 12345, 12345), 0);
        errno = 0;
        assert_int_equal(gs_user_runtime_dir(got, sizeof got, 1), -1);
        assert_int_equal(errno, EPERM);
    }
    assert_int_equal(rmdir(want), 0);
    assert_int_equal(symlink("/tmp", want), 0);
    errno = 0;
    assert_int_equal(gs_user_runtime_dir(got, sizeof got, 1), -1);
    assert_int_equal(errno, EPERM);
    assert_int_equal(unlink(want), 0);
    assert_int_equal(rmdir(tmpl), 0);
    if (old) {
        setenv("XDG_RUNTIME_DIR", old, 1);
        free(old);
    } else {
        unsetenv("XDG_RUNTIME_DIR");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ticker_period),
        cmocka_unit_test(test_ticker_first_after_a_period),
        cmocka_unit_test(test_ticker_stop_is_prompt),
        cmocka_unit_test(test_ticker_overruns_counted),
        cmocka_unit_test(test_ticker_at_once_and_bad_args),
        cmocka_unit_test(test_ticker_set_period),
        cmocka_unit_test(test_buf_printf_growth),
        cmocka_unit_test(test_buf_cap_and_status),
        cmocka_unit_test(test_buf_copy),
        cmocka_unit_test(test_buf_take),
        cmocka_unit_test(test_hash_fnv1a),
        cmocka_unit_test(test_parse_numbers),
        cmocka_unit_test(test_parse_plain_decimal),
        cmocka_unit_test(test_parse_duration),
        cmocka_unit_test(test_user_runtime_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
