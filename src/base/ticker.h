/*
 * A periodic thread on the CLOCK_MONOTONIC grid: every periodic loop's scheduling in one
 * place (the agent's sampling, top's poller, the run sampler, the stack samplers). Ticks fall
 * on first + k * period; a callback that overruns one or more boundaries does not make them up
 * in a burst: the missed ticks are skipped and counted (clock.h, gs_clock_next_tick), and the
 * next call is told how many. Stopping wakes the thread at once.
 */
#ifndef GS_BASE_TICKER_H
#define GS_BASE_TICKER_H

#include <stdint.h>

struct gs_ticker;

/* One tick, on the ticker's thread, without any lock of the ticker held: missed is the number
 * of boundaries skipped since the previous call (0 when on time). */
typedef void (*gs_ticker_fn)(void *ctx, uint64_t missed);

/* Starts a thread that calls fn(ctx, missed) at first_ns (CLOCK_MONOTONIC, ns: now or in the
 * past for a tick at once, now + period_ns for one period from now) and every period_ns (> 0)
 * after. Returns 0, or an errno value (EINVAL, ENOMEM, pthread_create's) with *out NULL. */
int gs_ticker_start(struct gs_ticker **out, int64_t period_ns, int64_t first_ns, gs_ticker_fn fn,
                    void *ctx);

/* A new period (> 0) for the next boundary computed, after the current or next call: a wait
 * under way keeps its deadline. Thread-safe; callable from the callback; NULL is ignored. */
void gs_ticker_set_period(struct gs_ticker *t, int64_t period_ns);

/* Ticks skipped since the start (the sum of every call's missed). Thread-safe. */
uint64_t gs_ticker_overruns(struct gs_ticker *t);

/* Stops the thread: a wait under way ends at once, a callback under way finishes first (so
 * never from the callback). Then frees the ticker. NULL is allowed. */
void gs_ticker_stop(struct gs_ticker *t);

#endif
