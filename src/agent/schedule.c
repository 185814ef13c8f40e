/*
 * The agent's tick and cadence math (schedule.h). Kept out of agent.c so the unit tests link
 * it without the daemon's threads and HTTP server.
 */
#include "agent/schedule.h"

#include "gpuscope/gs_sampler.h"

int64_t gs_agent_next_tick(int64_t prev, int64_t now, int64_t step, uint64_t *missed)
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

unsigned gs_agent_want(uint64_t n)
{
    unsigned want = GS_WANT_PROCS | GS_WANT_PROC_HOST | GS_WANT_PROC_UTIL | GS_WANT_GPM;

    if (n % 5 == 0)
        want |= GS_WANT_PCIE_TPUT; /* blocks ~40 ms per GPU */
    if (n % 10 == 0)
        want |= GS_WANT_HEALTH | GS_WANT_MIG;
    if (n > 0 && n % 60 == 0)
        want |= GS_WANT_STATIC; /* the sampler reads them at its first cycle anyway */
    return want;
}
