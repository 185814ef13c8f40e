/*
 * nvml-sim workload patterns: values, exact integrals and deterministic noise over virtual time.
 *
 * Integrals are closed-form per shape so that an average over any window, a GPM interval or the
 * energy counter costs the same at t = 1 s as at t = 1e7 s. Noise is a hash of (seed, salt, tick)
 * mapped to [-1, 1], linearly interpolated between ticks: a pure function of t.
 */
#include "pattern.h"

#include <math.h>

struct gs_sim_pattern gs_sim_pattern_const(double v)
{
    struct gs_sim_pattern p = {0};

    p.kind = GS_SIM_PAT_CONST;
    p.value = v;
    p.noise_period_s = 1.0;
    return p;
}

/* ---- square wave -------------------------------------------------------------------------- */

/* Integral of one square wave from its cycle start over r seconds, 0 <= r <= period. */
static double square_partial(const struct gs_sim_pattern *p, double r)
{
    double hi_len = p->duty * p->period_s;

    if (r <= hi_len)
        return r * p->high;
    return hi_len * p->high + (r - hi_len) * p->low;
}

/* Antiderivative G with G(0) = 0 of the un-shifted wave (cycle starts at 0). */
static double square_anti(const struct gs_sim_pattern *p, double x)
{
    double cycles = floor(x / p->period_s);
    double r = x - cycles * p->period_s;
    double cycle = square_partial(p, p->period_s);

    if (r < 0)
        r = 0;
    if (r > p->period_s)
        r = p->period_s;
    return cycles * cycle + square_partial(p, r);
}

static double square_value(const struct gs_sim_pattern *p, double t)
{
    double x = t + p->phase_s;
    double r = x - floor(x / p->period_s) * p->period_s;

    return r < p->duty * p->period_s ? p->high : p->low;
}

/* ---- ramp --------------------------------------------------------------------------------- */

static double ramp_value(const struct gs_sim_pattern *p, double t)
{
    if (t <= p->start_s)
        return p->from;
    if (p->duration_s <= 0 || t >= p->start_s + p->duration_s)
        return p->to;
    return p->from + (p->to - p->from) * (t - p->start_s) / p->duration_s;
}

/* Antiderivative with H(start) = 0. */
static double ramp_anti(const struct gs_sim_pattern *p, double x)
{
    double s = p->start_s, d = p->duration_s;

    if (x <= s)
        return p->from * (x - s);
    if (d > 0 && x < s + d) {
        double u = x - s;
        return p->from * u + (p->to - p->from) * u * u / (2 * d);
    }
    return (d > 0 ? (p->from + p->to) / 2 * d : 0) + p->to * (x - s - (d > 0 ? d : 0));
}

/* ---- points ------------------------------------------------------------------------------- */

/* Index i of the segment [t_i, t_i+1) containing x, for n >= 2 and t_0 <= x < t_n-1. */
static unsigned points_segment(const struct gs_sim_pattern *p, double x)
{
    unsigned lo = 0, hi = p->n_points - 1;

    /* Invariant: t[lo] <= x < t[hi]. Duplicated times (a jump) are resolved to the later
     * point, because the search keeps the largest lo with t[lo] <= x. */
    while (hi - lo > 1) {
        unsigned mid = lo + (hi - lo) / 2;
        if (p->pt_t[mid] <= x)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

static double points_value_flat(const struct gs_sim_pattern *p, double x)
{
    unsigned n = p->n_points, i;
    double dt;

    if (n == 0)
        return 0;
    if (x < p->pt_t[0])
        return p->pt_v[0];
    if (x >= p->pt_t[n - 1])
        return p->pt_v[n - 1];
    i = points_segment(p, x);
    dt = p->pt_t[i + 1] - p->pt_t[i];
    if (dt <= 0)
        return p->pt_v[i + 1];
    return p->pt_v[i] + (p->pt_v[i + 1] - p->pt_v[i]) * (x - p->pt_t[i]) / dt;
}

/* Antiderivative with H(t_0) = 0 for the non-periodic form (values held outside the points). */
static double points_anti_flat(const struct gs_sim_pattern *p, double x)
{
    unsigned n = p->n_points;
    double acc = 0;

    if (n == 0)
        return 0;
    if (x <= p->pt_t[0])
        return p->pt_v[0] * (x - p->pt_t[0]);
    for (unsigned i = 0; i + 1 < n; i++) {
        double a = p->pt_t[i], b = p->pt_t[i + 1];
        if (x <= a)
            return acc;
        if (x < b) {
            double vx = points_value_flat(p, x);
            return acc + (p->pt_v[i] + vx) / 2 * (x - a);
        }
        acc += (p->pt_v[i] + p->pt_v[i + 1]) / 2 * (b - a);
    }
    return acc + p->pt_v[n - 1] * (x - p->pt_t[n - 1]);
}

/* Periodic points: one cycle over [0, period), the points start at 0 (checked by the parser),
 * and the last point connects back to the first at t = period. */
static double points_value_cycle(const struct gs_sim_pattern *p, double r)
{
    unsigned n = p->n_points;
    double last_t = p->pt_t[n - 1];

    if (r >= last_t) {
        double span = p->points_period_s - last_t;
        if (span <= 0)
            return p->pt_v[0];
        return p->pt_v[n - 1] + (p->pt_v[0] - p->pt_v[n - 1]) * (r - last_t) / span;
    }
    return points_value_flat(p, r);
}

static double points_anti_cycle(const struct gs_sim_pattern *p, double r)
{
    unsigned n = p->n_points;
    double last_t = p->pt_t[n - 1];

    if (r <= last_t)
        return points_anti_flat(p, r);
    return points_anti_flat(p, last_t) +
           (p->pt_v[n - 1] + points_value_cycle(p, r)) / 2 * (r - last_t);
}

static double points_value(const struct gs_sim_pattern *p, double t)
{
    if (p->points_period_s > 0 && p->n_points > 0) {
        double r = t - floor(t / p->points_period_s) * p->points_period_s;
        return points_value_cycle(p, r);
    }
    return points_value_flat(p, t);
}

static double points_anti(const struct gs_sim_pattern *p, double x)
{
    if (p->points_period_s > 0 && p->n_points > 0) {
        double per = p->points_period_s;
        double cycles = floor(x / per);
        double r = x - cycles * per;
        return cycles * points_anti_cycle(p, per) + points_anti_cycle(p, r);
    }
    return points_anti_flat(p, x);
}

/* ---- public ------------------------------------------------------------------------------- */

double gs_sim_pattern_base(const struct gs_sim_pattern *p, double t)
{
    switch (p->kind) {
    case GS_SIM_PAT_CONST:
        return p->value;
    case GS_SIM_PAT_SQUARE:
        return square_value(p, t);
    case GS_SIM_PAT_RAMP:
        return ramp_value(p, t);
    case GS_SIM_PAT_POINTS:
        return points_value(p, t);
    }
    return 0;
}

double gs_sim_pattern_integral(const struct gs_sim_pattern *p, double t)
{
    switch (p->kind) {
    case GS_SIM_PAT_CONST:
        return p->value * t;
    case GS_SIM_PAT_SQUARE:
        return square_anti(p, t + p->phase_s) - square_anti(p, p->phase_s);
    case GS_SIM_PAT_RAMP:
        return ramp_anti(p, t) - ramp_anti(p, 0);
    case GS_SIM_PAT_POINTS:
        return points_anti(p, t) - points_anti(p, 0);
    }
    return 0;
}

/* splitmix64: a well-mixed 64-bit hash, enough for reproducible noise. */
static uint64_t mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static double noise_tick(uint64_t key, int64_t tick)
{
    uint64_t h = mix64(key ^ mix64((uint64_t)tick));
    return (double)(h >> 11) / (double)(1ull << 53) * 2.0 - 1.0; /* [-1, 1) */
}

double gs_sim_pattern_noise(const struct gs_sim_pattern *p, uint64_t salt, double t)
{
    double per = p->noise_period_s > 0 ? p->noise_period_s : 1.0;
    double x, k, frac;
    uint64_t key;

    if (p->noise_amp <= 0)
        return 0;
    x = t / per;
    if (!(x > -9.0e15 && x < 9.0e15)) /* also rejects NaN: keep the tick in int64 range */
        return 0;
    k = floor(x);
    frac = x - k;
    key = mix64(p->noise_seed) ^ mix64(salt + 0x632BE59BD9B4E019ull);
    return p->noise_amp *
           (noise_tick(key, (int64_t)k) * (1 - frac) + noise_tick(key, (int64_t)k + 1) * frac);
}

static double clamp(const struct gs_sim_pattern *p, double v, double lo, double hi)
{
    if (p->has_min && v < p->min)
        v = p->min;
    if (p->has_max && v > p->max)
        v = p->max;
    if (v < lo)
        v = lo;
    if (v > hi)
        v = hi;
    if (isnan(v))
        v = lo;
    return v;
}

double gs_sim_pattern_at(const struct gs_sim_pattern *p, uint64_t salt, double t, double lo,
                         double hi)
{
    return clamp(p, gs_sim_pattern_base(p, t) + gs_sim_pattern_noise(p, salt, t), lo, hi);
}

double gs_sim_pattern_avg(const struct gs_sim_pattern *p, uint64_t salt, double t0, double t1,
                          double lo, double hi)
{
    double mean;

    if (!(t1 > t0))
        return gs_sim_pattern_at(p, salt, t1, lo, hi);
    mean = (gs_sim_pattern_integral(p, t1) - gs_sim_pattern_integral(p, t0)) / (t1 - t0);
    return clamp(p, mean + gs_sim_pattern_noise(p, salt, t1), lo, hi);
}
