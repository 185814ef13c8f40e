/*
 * nvml-sim workload patterns: a value as a function of virtual time t (seconds).
 *
 * A pattern is one base shape (constant, square wave of a training step, ramp, or piecewise-linear
 * points, optionally periodic) plus optional seeded noise and a clamp. Everything is a pure
 * function of t, so a fixed t always gives the same value. Besides the value at t, the base shape
 * has an exact integral, which the sim uses for averages over a sampling window (utilization is
 * "percent of time busy over the last sample period"), for GPM metrics between two samples, and
 * for energy (the integral of power).
 */
#ifndef GS_SIM_PATTERN_H
#define GS_SIM_PATTERN_H

#include <stdbool.h>
#include <stdint.h>

enum gs_sim_pattern_kind {
    GS_SIM_PAT_CONST,
    GS_SIM_PAT_SQUARE,
    GS_SIM_PAT_RAMP,
    GS_SIM_PAT_POINTS,
};

struct gs_sim_pattern {
    enum gs_sim_pattern_kind kind;
    double value;                              /* CONST */
    double period_s, duty, high, low, phase_s; /* SQUARE: high for duty*period, then low */
    double from, to, start_s, duration_s;      /* RAMP: from until start, linear, then to */
    const double *pt_t, *pt_v;                 /* POINTS: n_points, times non-decreasing */
    unsigned n_points;
    double points_period_s; /* > 0: the points repeat with this period */
    double noise_amp;       /* uniform in [-amp, amp], linearly interpolated */
    double noise_period_s;  /* between independent noise values */
    uint64_t noise_seed;
    bool has_min, has_max;
    double min, max;
};

/* A constant pattern. */
struct gs_sim_pattern gs_sim_pattern_const(double v);

/* The noise-free value at t. */
double gs_sim_pattern_base(const struct gs_sim_pattern *p, double t);

/* The integral of the noise-free value from 0 to t (negative for t < 0). */
double gs_sim_pattern_integral(const struct gs_sim_pattern *p, double t);

/* The noise at t; salt decorrelates GPUs and metrics that share a seed. */
double gs_sim_pattern_noise(const struct gs_sim_pattern *p, uint64_t salt, double t);

/* Value at t: base + noise, clamped to the pattern's own min/max and to [lo, hi]. */
double gs_sim_pattern_at(const struct gs_sim_pattern *p, uint64_t salt, double t, double lo,
                         double hi);

/* Mean of the base over [t0, t1] plus the noise at t1, clamped as above. t1 <= t0 gives the value
 * at t1. */
double gs_sim_pattern_avg(const struct gs_sim_pattern *p, uint64_t salt, double t0, double t1,
                          double lo, double hi);

#endif
