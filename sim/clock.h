/*
 * nvml-sim virtual time: the t (seconds) at which scenario patterns and events are evaluated.
 *
 * Three modes, chosen from the environment at each nvmlInit that starts the library:
 *   real    t = seconds since the first nvmlInit in this process, or since NVML_SIM_EPOCH
 *           (unix seconds) when set, so several processes share one timeline;
 *   frozen  NVML_SIM_TIME=SECONDS: t never moves;
 *   file    NVML_SIM_TIME=file:PATH: t is read from PATH on every call (tests advance it).
 * The start of the timeline is kept across shutdown and re-init: a backend that re-initialises
 * after GPU_IS_LOST must not see the lost GPU come back. Timestamps NVML reports (samples, field
 * values) are unix microseconds: the wall-clock time of t = 0 plus t.
 */
#ifndef GS_SIM_CLOCK_H
#define GS_SIM_CLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

enum gs_sim_clock_mode { GS_SIM_CLOCK_REAL, GS_SIM_CLOCK_FROZEN, GS_SIM_CLOCK_FILE };

struct gs_sim_clock {
    enum gs_sim_clock_mode mode;
    double frozen_t;
    char path[4096];
    double last_file_t;    /* kept when the file cannot be read */
    bool started;          /* the process-wide start below is set */
    struct timespec mono0; /* CLOCK_MONOTONIC at the first init */
    double wall0_s;        /* unix seconds at t = 0 */
    bool epoch_env;        /* NVML_SIM_EPOCH gave wall0_s */
};

/* Reads NVML_SIM_TIME and NVML_SIM_EPOCH. Returns 0, or -1 with a message in err. */
int gs_sim_clock_setup(struct gs_sim_clock *c, char *err, size_t err_len);

/* The current virtual time in seconds. */
double gs_sim_clock_now(struct gs_sim_clock *c);

/* Unix microseconds of virtual time t. */
unsigned long long gs_sim_clock_wall_us(const struct gs_sim_clock *c, double t);

#endif
