/*
 * The tick arithmetic of every periodic loop (clock.h): the sampling thread, watch mode, the
 * run sampler. Pure, so tests/unit/test_schedule.c checks it without a clock.
 */
#include "base/clock.h"

int64_t gs_clock_next_tick(int64_t prev, int64_t now, int64_t step, uint64_t *missed)
{
    int64_t next = prev + step;
    uint64_t k = 0;

    if (next <= now) {
        k = (uint64_t)((now - next) / step + 1);
        next += (int64_t)k * step;
    }
    if (missed)
        *missed = k;
    return next;
}
