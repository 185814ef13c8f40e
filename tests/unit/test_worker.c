/*
 * Unit tests of the bounded-queue worker (src/agent/worker.c): items reach run in order and
 * once, a full queue refuses (and counts) or drops its oldest, a deadline calls run without
 * items, a wake-up does at once, close runs one last time with stopping and joins, and a worker
 * that never started hands its queue to drop. Run under ThreadSanitizer too (build-tsan).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "agent/worker.h"
#include "base/clock.h"

struct log {
    pthread_mutex_t lock;
    int seen[64];
    unsigned n_seen, runs, empty_runs, stops, dropped[64], n_dropped;
    int64_t next; /* what run returns */
    int block;    /* run waits until it is cleared */
};

static int64_t run(void *ctx, void *items, unsigned n, bool stopping)
{
    struct log *l = ctx;
    const int *v = items;

    for (;;) {
        int b;
        pthread_mutex_lock(&l->lock);
        b = l->block;
        pthread_mutex_unlock(&l->lock);
        if (!b)
            break;
        usleep(1000);
    }
    pthread_mutex_lock(&l->lock);
    for (unsigned i = 0; i < n && l->n_seen < 64; i++)
        l->seen[l->n_seen++] = v[i];
    l->runs++;
    l->empty_runs += n == 0;
    l->stops += stopping;
    pthread_mutex_unlock(&l->lock);
    return l->next;
}

static void drop(void *ctx, void *item)
{
    struct log *l = ctx;

    l->dropped[l->n_dropped++ % 64] = (unsigned)*(int *)item;
}

static unsigned seen(struct log *l)
{
    unsigned n;

    pthread_mutex_lock(&l->lock);
    n = l->n_seen;
    pthread_mutex_unlock(&l->lock);
    return n;
}

static void wait_seen(struct log *l, unsigned n)
{
    for (int i = 0; i < 5000 && seen(l) < n; i++)
        usleep(1000);
}

static void test_offer_order_close(void **state)
{
    static const struct gs_worker_ops ops = {"test", sizeof(int), 4, false, run, drop};
    struct log l = {.lock = PTHREAD_MUTEX_INITIALIZER, .next = INT64_MAX};
    struct gs_worker *w;

    (void)state;
    assert_int_equal(gs_worker_new(&w, &ops, &l, NULL), GS_OK);
    assert_int_equal(gs_worker_start(w, INT64_MAX, NULL), GS_OK);
    for (int i = 0; i < 3; i++)
        assert_true(gs_worker_offer(w, &i));
    wait_seen(&l, 3);
    assert_int_equal(seen(&l), 3);
    assert_int_equal(l.seen[0], 0);
    assert_int_equal(l.seen[2], 2);
    /* A busy run: the queue fills to 4, the 5th and 6th are refused and counted. */
    l.block = 1;
    {
        int x = 100;
        assert_true(gs_worker_offer(w, &x)); /* taken by the run that now blocks */
        wait_seen(&l, 3);
        usleep(20000);
        for (int i = 10; i < 14; i++)
            assert_true(gs_worker_offer(w, &i));
        x = 14;
        assert_false(gs_worker_offer(w, &x));
        assert_false(gs_worker_offer(w, &x));
    }
    assert_int_equal(gs_worker_dropped(w), 2);
    pthread_mutex_lock(&l.lock);
    l.block = 0;
    pthread_mutex_unlock(&l.lock);
    gs_worker_close(w); /* what is queued reaches the last run */
    assert_int_equal(l.n_seen, 8);
    assert_int_equal(l.seen[7], 13);
    assert_int_equal(l.stops, 1);
    assert_int_equal(l.n_dropped, 0);
}

static void test_drop_oldest_unstarted(void **state)
{
    static const struct gs_worker_ops ops = {"test", sizeof(int), 2, true, run, drop};
    struct log l = {.lock = PTHREAD_MUTEX_INITIALIZER, .next = INT64_MAX};
    struct gs_worker *w;

    (void)state;
    assert_int_equal(gs_worker_new(&w, &ops, &l, NULL), GS_OK);
    for (int i = 1; i <= 3; i++)
        assert_true(gs_worker_offer(w, &i)); /* 1 goes for 3 */
    assert_int_equal(gs_worker_dropped(w), 1);
    assert_int_equal(l.n_dropped, 1);
    assert_int_equal(l.dropped[0], 1);
    gs_worker_close(w); /* never started: 2 and 3 to drop, run never called */
    assert_int_equal(l.n_dropped, 3);
    assert_int_equal(l.dropped[1], 2);
    assert_int_equal(l.dropped[2], 3);
    assert_int_equal(l.runs, 0);
}

static void test_deadline_and_wake(void **state)
{
    static const struct gs_worker_ops ops = {"ticks", 0, 0, false, run, NULL};
    struct log l = {.lock = PTHREAD_MUTEX_INITIALIZER, .next = INT64_MAX};
    struct gs_worker *w;
    unsigned runs;
    int x = 1;

    (void)state;
    assert_int_equal(gs_worker_new(&w, &ops, &l, NULL), GS_OK);
    assert_false(gs_worker_offer(w, &x)); /* no queue */
    /* The first deadline 20 ms out: one empty run, then none (run returns INT64_MAX). */
    assert_int_equal(gs_worker_start(w, gs_clock_mono_ns() + 20 * 1000000LL, NULL), GS_OK);
    usleep(200000);
    pthread_mutex_lock(&l.lock);
    runs = l.runs;
    pthread_mutex_unlock(&l.lock);
    assert_int_equal(runs, 1);
    gs_worker_wake(w);
    usleep(100000);
    pthread_mutex_lock(&l.lock);
    runs = l.runs;
    pthread_mutex_unlock(&l.lock);
    assert_int_equal(runs, 2);
    gs_worker_close(w);
    assert_int_equal(l.runs, 3);
    assert_int_equal(l.empty_runs, 3);
    assert_int_equal(l.stops, 1);
    gs_worker_close(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_offer_order_close),
        cmocka_unit_test(test_drop_oldest_unstarted),
        cmocka_unit_test(test_deadline_and_wake),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
