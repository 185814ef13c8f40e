/*
 * Unit tests of the HTTP rate limiter (src/agent/ratelimit.c): a fresh address gets its burst,
 * then rate tokens per second; addresses are independent and the port is ignored; rate 0 and
 * no address are never limited; a clock read out of order never takes tokens back; a full
 * table evicts. And the case the module exists for: several threads (libmicrohttpd daemons) on
 * one table and one address never get more than burst + rate * t between them (under
 * ThreadSanitizer, build-tsan, a missing lock is also a report).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "agent/ratelimit.h"

#define SEC 1000000000LL

static struct sockaddr_in v4(const char *ip, unsigned port)
{
    struct sockaddr_in s;

    memset(&s, 0, sizeof s);
    s.sin_family = AF_INET;
    s.sin_port = htons((uint16_t)port);
    assert_int_equal(inet_pton(AF_INET, ip, &s.sin_addr), 1);
    return s;
}

static unsigned takes(struct gs_ratelimit *rl, const void *sa, unsigned n, int64_t t)
{
    unsigned ok = 0;

    for (unsigned i = 0; i < n; i++)
        ok += gs_ratelimit_take(rl, sa, 10, 5, t);
    return ok;
}

static void test_bucket(void **state)
{
    struct gs_ratelimit *rl;
    struct sockaddr_in a = v4("10.0.0.1", 1000), a2 = v4("10.0.0.1", 2000),
                       b = v4("10.0.0.2", 1000);
    struct sockaddr_in6 c;

    (void)state;
    assert_int_equal(gs_ratelimit_new(&rl, NULL), GS_OK);
    assert_int_equal(takes(rl, &a, 8, SEC), 5);                /* the burst */
    assert_int_equal(takes(rl, &a2, 1, SEC), 0);               /* another port: the same client */
    assert_int_equal(takes(rl, &b, 8, SEC), 5);                /* another address: its own bucket */
    assert_int_equal(takes(rl, &a, 8, SEC + SEC / 2), 5);      /* 0.5 s at 10/s: 5 tokens */
    assert_int_equal(takes(rl, &a, 2, SEC + SEC / 10 * 6), 1); /* 0.1 s more: one */
    assert_int_equal(takes(rl, &a, 1, SEC), 0); /* a clock read before the last: no refill */
    assert_int_equal(takes(rl, &a, 2, SEC + SEC / 10 * 7), 1); /* and none taken back */
    assert_int_equal(takes(rl, &a, 20, 100 * SEC), 5); /* idle for long: full to burst only */
    memset(&c, 0, sizeof c);
    c.sin6_family = AF_INET6;
    c.sin6_addr.s6_addr[0] = 0x01;
    assert_int_equal(takes(rl, &c, 8, SEC), 5);
    assert_true(gs_ratelimit_take(rl, NULL, 10, 5, SEC)); /* no address: not limited */
    for (int i = 0; i < 100; i++)
        assert_true(gs_ratelimit_take(rl, (struct sockaddr *)&b, 0, 5, SEC)); /* rate 0: off */
    gs_ratelimit_free(rl);
    gs_ratelimit_free(NULL);
}

/* The step socket's per-uid buckets (runs.c): one per uid, apart from every address's, the
 * same refill; 10,000/s with a 20,000 burst lets a 200-step run through whole right after a
 * flood of another uid, and holds a 100,000/s flood to the rate. */
static void test_uid_buckets(void **state)
{
    struct gs_ratelimit *rl;
    struct sockaddr_in6 z;
    unsigned ok = 0;

    (void)state;
    assert_int_equal(gs_ratelimit_new(&rl, NULL), GS_OK);
    for (int i = 0; i < 7; i++)
        ok += gs_ratelimit_take_uid(rl, 1000, 10, 5, SEC);
    assert_int_equal(ok, 5);
    assert_true(gs_ratelimit_take_uid(rl, 1001, 10, 5, SEC)); /* another uid */
    memset(&z, 0, sizeof z); /* an address key, even all-zero, is not a uid's */
    z.sin6_family = AF_INET6;
    assert_int_equal(takes(rl, &z, 8, SEC), 5);
    assert_false(gs_ratelimit_take_uid(rl, 1000, 10, 5, SEC));
    assert_true(gs_ratelimit_take_uid(rl, 1000, 10, 5, SEC + SEC / 10)); /* 0.1 s: one */
    assert_true(gs_ratelimit_take_uid(rl, 1000, 0, 5, SEC));             /* rate 0: off */
    /* uid 2000 floods 100,000 records in one second at 10,000/s, burst 20,000 */
    ok = 0;
    for (unsigned i = 0; i < 100000; i++)
        ok += gs_ratelimit_take_uid(rl, 2000, 10000, 20000, 10 * SEC + (int64_t)i * (SEC / 100000));
    assert_true(ok >= 29990 && ok <= 30000);
    ok = 0; /* uid 2001's 200 steps at the same moment: all of them */
    for (unsigned i = 0; i < 200; i++)
        ok += gs_ratelimit_take_uid(rl, 2001, 10000, 20000, 11 * SEC);
    assert_int_equal(ok, 200);
    gs_ratelimit_free(rl);
}

static void test_eviction(void **state)
{
    struct gs_ratelimit *rl;
    char ip[32];

    (void)state;
    assert_int_equal(gs_ratelimit_new(&rl, NULL), GS_OK);
    /* 4096 addresses through 1024 slots: each new one starts full, none is refused. */
    for (unsigned i = 0; i < 4096; i++) {
        struct sockaddr_in s;
        snprintf(ip, sizeof ip, "10.%u.%u.1", i / 256, i % 256);
        s = v4(ip, 1);
        assert_true(gs_ratelimit_take(rl, (struct sockaddr *)&s, 1, 1, SEC + i));
    }
    gs_ratelimit_free(rl);
}

#define THREADS 4
#define PER_THREAD 20000

struct hammer {
    struct gs_ratelimit *rl;
    pthread_barrier_t *go;
    unsigned granted;
};

/* Every thread asks at the same fake instants (i ns past 1 s): at rate 1e6/s that is a token
 * per 1000 requests, so all threads together may get burst + PER_THREAD / 1000 at most. */
static void *hammer_thread(void *arg)
{
    struct hammer *h = arg;
    struct sockaddr_in s = v4("127.0.0.1", 1);

    pthread_barrier_wait(h->go);
    for (unsigned i = 0; i < PER_THREAD; i++)
        h->granted += gs_ratelimit_take(h->rl, (struct sockaddr *)&s, 1e6, 100, SEC + i);
    return NULL;
}

static void test_threads(void **state)
{
    struct gs_ratelimit *rl;
    pthread_barrier_t go;
    pthread_t th[THREADS];
    struct hammer h[THREADS];
    unsigned total = 0;

    (void)state;
    assert_int_equal(gs_ratelimit_new(&rl, NULL), GS_OK);
    assert_int_equal(pthread_barrier_init(&go, NULL, THREADS), 0);
    for (int i = 0; i < THREADS; i++) {
        h[i] = (struct hammer){.rl = rl, .go = &go};
        assert_int_equal(pthread_create(&th[i], NULL, hammer_thread, &h[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        total += h[i].granted;
    }
    pthread_barrier_destroy(&go);
    assert_true(total >= 100);
    assert_true(total <= 100 + PER_THREAD / 1000 + 1);
    gs_ratelimit_free(rl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bucket),
        cmocka_unit_test(test_uid_buckets),
        cmocka_unit_test(test_eviction),
        cmocka_unit_test(test_threads),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
