/*
 * The agent's cadence (schedule.h); its tick math is core/clock.c's gs_clock_next_tick. Kept
 * out of sampling.c so the unit tests link it without the daemon's threads and HTTP server.
 */
#include "agent/schedule.h"

#include "gpuscope/gs_sampler.h"

unsigned gs_agent_want(uint64_t n)
{
    unsigned want = GS_WANT_PROCS | GS_WANT_PROC_HOST | GS_WANT_PROC_UTIL | GS_WANT_GPM;

    if (n % 5 == 0)
        want |= GS_WANT_PCIE_TPUT; /* ~40 ms per GPU, only without the byte counters */
    if (n % 10 == 0)               /* change rarely; held in between (docs/agent.md) */
        want |= GS_WANT_HEALTH | GS_WANT_MIG | GS_WANT_NVLINK_STATE;
    if (n > 0 && n % 60 == 0)
        want |= GS_WANT_STATIC; /* the sampler reads them at its first cycle anyway */
    return want;
}
