/*
 * The sampling thread's cadence, apart from the thread: what each cycle reads (when the next
 * cycle starts is core/clock.h's gs_clock_next_tick). A pure function (no clock, no sampler),
 * so tests/unit/test_schedule.c checks it without libmicrohttpd or NVML.
 */
#ifndef GS_AGENT_SCHEDULE_H
#define GS_AGENT_SCHEDULE_H

#include <stdint.h>

/* The GS_WANT_* flags of cycle number n (0-based, counted since the sampler opened), per
 * docs/backend.md's cadence: every cycle the basic readings, processes (with procfs details),
 * per-process utilization and GPM; PCIe throughput every 5th; health, MIG and NVLink link
 * states every 10th;
 * static fields every 60th (cycle 0 reads them anyway). */
unsigned gs_agent_want(uint64_t n);

#endif
