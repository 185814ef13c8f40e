/*
 * The hang rule of gpuscope run's watchdog and the agent's training_hang (hang.h): a ring of
 * step durations, its p95, and the stall test against the time of the last step.
 */
#include "run/hang.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpuscope/gs_run.h"
#include "run/record.h"

double gs_hang_wall_s(const struct gs_step_rec *r)
{
    double data = gs_step_ms(r, GS_PH_DATA), step = gs_step_ms(r, GS_PH_STEP);
    double ms = (isfinite(data) && data > 0 ? data : 0) + (isfinite(step) && step > 0 ? step : 0);

    if (ms > 0)
        return ms / 1e3;
    return isfinite(r->t_begin) && isfinite(r->t_end) && r->t_end > r->t_begin
               ? r->t_end - r->t_begin
               : 0;
}

void gs_hang_step(struct gs_hang *h, double *last_end, const struct gs_step_rec *r, double now)
{
    double d = NAN;

    if (last_end && isfinite(*last_end) && isfinite(r->t_end) && r->t_end > *last_end)
        d = r->t_end - *last_end;
    if (last_end)
        *last_end = r->t_end;
    if (!(d > 0))
        d = gs_hang_wall_s(r);
    if (d > 0) {
        h->ring[h->head] = d;
        h->head = (h->head + 1) % GS_HANG_WINDOW;
        if (h->n < GS_HANG_WINDOW)
            h->n++;
    }
    h->steps++;
    h->last_rx_s = now;
    h->reported = 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double gs_hang_p95(const struct gs_hang *h)
{
    double v[GS_HANG_WINDOW];
    unsigned k;

    if (h->n == 0)
        return NAN;
    memcpy(v, h->ring, h->n * sizeof v[0]);
    qsort(v, h->n, sizeof v[0], cmp_double);
    k = (unsigned)ceil(0.95 * h->n);
    return v[k == 0 ? 0 : k - 1];
}

void gs_hang_begin(struct gs_hang *h, double now)
{
    if (!(h->begun_s > 0))
        h->begun_s = now;
}

void gs_hang_active(struct gs_hang *h, double now)
{
    h->active_s = now;
}

/* Judged by the ring: enough steps with durations. */
static int by_ring(const struct gs_hang *h)
{
    return h->steps >= GS_HANG_MIN_STEPS && h->n > 0;
}

double gs_hang_quiet_since(const struct gs_hang *h)
{
    double t = h->steps ? h->last_rx_s : NAN;

    if (by_ring(h) || !(h->begun_s > 0))
        return t;
    return fmax(isnan(t) ? h->begun_s : fmax(t, h->begun_s), h->active_s);
}

double gs_hang_limit(const struct gs_hang *h, double factor, double min_s)
{
    if (!by_ring(h))
        return h->begun_s > 0 ? min_s : INFINITY;
    return fmax(min_s, factor * gs_hang_p95(h));
}

int gs_hang_stalled(const struct gs_hang *h, double factor, double min_s, double now)
{
    double since = gs_hang_quiet_since(h);

    return !isnan(since) && now - since >= gs_hang_limit(h, factor, min_s);
}

int gs_hang_new_stall(const struct gs_hang *h, double factor, double min_s, double now)
{
    return !h->reported && gs_hang_stalled(h, factor, min_s, now);
}

void gs_hang_mark(struct gs_hang *h)
{
    h->reported = 1;
}
