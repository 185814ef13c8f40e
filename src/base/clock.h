/*
 * The clocks every loop reads, in one place: CLOCK_MONOTONIC in nanoseconds (deadlines,
 * durations, ticks) and CLOCK_REALTIME in unix seconds (timestamps people read), plus the tick
 * arithmetic of every periodic loop (clock.c). Header-only readers: a clock_gettime call each.
 */
#ifndef GS_CORE_CLOCK_H
#define GS_CORE_CLOCK_H

#include <stdint.h>
#include <time.h>

#define GS_NS_PER_S 1000000000LL

/* CLOCK_MONOTONIC, ns. */
static inline int64_t gs_clock_mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * GS_NS_PER_S + ts.tv_nsec;
}

/* CLOCK_MONOTONIC, seconds. */
static inline double gs_clock_mono_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CLOCK_REALTIME, ns since the epoch. */
static inline int64_t gs_clock_real_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * GS_NS_PER_S + ts.tv_nsec;
}

/* CLOCK_REALTIME, unix seconds. */
static inline double gs_clock_real_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The next boundary of period step (> 0) after a cycle that started at prev and ended at now,
 * all in ns of one clock: prev + step, or, when the cycle overran it (now >= prev + step), the
 * first boundary strictly after now (*missed = boundaries skipped, 0 when on time; missed may
 * be NULL). Ticks never stack up and stay on prev's grid. */
int64_t gs_clock_next_tick(int64_t prev, int64_t now, int64_t step, uint64_t *missed);

/* ns as a struct timespec (for pthread_cond_timedwait, clock_nanosleep). */
static inline struct timespec gs_clock_timespec(int64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / GS_NS_PER_S),
                          .tv_nsec = (long)(ns % GS_NS_PER_S)};

    return ts;
}

#endif
