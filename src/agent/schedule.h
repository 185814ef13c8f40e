/*
 * The sampling thread's arithmetic, apart from the thread: when the next cycle starts and what
 * each cycle reads. Pure functions (no clock, no sampler), so tests/unit/test_schedule.c checks
 * them without libmicrohttpd or NVML.
 */
#ifndef GS_AGENT_SCHEDULE_H
#define GS_AGENT_SCHEDULE_H

#include <stdint.h>

/* The next CLOCK_MONOTONIC boundary after a cycle that started at prev and ended at now, with
 * period step (> 0), all in ns: prev + step, or, when the cycle overran it (now >= prev + step),
 * the first boundary strictly after now (*missed = boundaries skipped, 0 when on time; missed
 * may be NULL). Ticks never stack up. */
int64_t gs_agent_next_tick(int64_t prev, int64_t now, int64_t step, uint64_t *missed);

/* The GS_WANT_* flags of cycle number n (0-based, counted since the sampler opened), per
 * docs/backend.md's cadence: every cycle the basic readings, processes (with procfs details),
 * per-process utilization and GPM; PCIe throughput every 5th; health and MIG every 10th;
 * static fields every 60th (cycle 0 reads them anyway). */
unsigned gs_agent_want(uint64_t n);

#endif
