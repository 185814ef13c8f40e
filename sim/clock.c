/*
 * nvml-sim virtual time (see clock.h for the three modes).
 */
#include "clock.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double ts_seconds(const struct timespec *ts)
{
    return (double)ts->tv_sec + (double)ts->tv_nsec / 1e9;
}

static int parse_seconds(const char *s, double *out)
{
    char *end = NULL;
    double v;

    errno = 0;
    v = strtod(s, &end);
    if (errno || end == s || !isfinite(v) || fabs(v) > 1e12)
        return -1;
    while (*end == ' ' || *end == '\n' || *end == '\r' || *end == '\t')
        end++;
    if (*end)
        return -1;
    *out = v;
    return 0;
}

int gs_sim_clock_setup(struct gs_sim_clock *c, char *err, size_t err_len)
{
    const char *tm = getenv("NVML_SIM_TIME");
    const char *ep = getenv("NVML_SIM_EPOCH");

    if (!c->started) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &c->mono0);
        clock_gettime(CLOCK_REALTIME, &now);
        c->wall0_s = ts_seconds(&now);
        c->started = true;
    }
    if (ep && *ep) {
        double e;
        if (parse_seconds(ep, &e) != 0 || e < 0) {
            snprintf(err, err_len, "NVML_SIM_EPOCH=\"%.64s\" is not unix seconds", ep);
            return -1;
        }
        c->wall0_s = e;
        c->epoch_env = true;
    } else if (c->epoch_env) {
        /* The variable went away: fall back to the process's own start. */
        struct timespec now, mono;
        clock_gettime(CLOCK_REALTIME, &now);
        clock_gettime(CLOCK_MONOTONIC, &mono);
        c->wall0_s = ts_seconds(&now) - (ts_seconds(&mono) - ts_seconds(&c->mono0));
        c->epoch_env = false;
    }
    c->mode = GS_SIM_CLOCK_REAL;
    if (tm && *tm) {
        if (strncmp(tm, "file:", 5) == 0) {
            if (!tm[5] || strlen(tm + 5) >= sizeof c->path) {
                snprintf(err, err_len, "NVML_SIM_TIME: bad file path");
                return -1;
            }
            snprintf(c->path, sizeof c->path, "%s", tm + 5);
            c->last_file_t = 0;
            c->mode = GS_SIM_CLOCK_FILE;
        } else if (parse_seconds(tm, &c->frozen_t) == 0) {
            c->mode = GS_SIM_CLOCK_FROZEN;
        } else {
            snprintf(err, err_len, "NVML_SIM_TIME=\"%.64s\" is neither SECONDS nor file:PATH", tm);
            return -1;
        }
    }
    return 0;
}

static double read_file_t(struct gs_sim_clock *c)
{
    char buf[64];
    size_t n;
    FILE *f = fopen(c->path, "r");
    double v;

    if (!f)
        return c->last_file_t;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    if (parse_seconds(buf, &v) == 0)
        c->last_file_t = v;
    return c->last_file_t;
}

double gs_sim_clock_now(struct gs_sim_clock *c)
{
    struct timespec now;

    switch (c->mode) {
    case GS_SIM_CLOCK_FROZEN:
        return c->frozen_t;
    case GS_SIM_CLOCK_FILE:
        return read_file_t(c);
    case GS_SIM_CLOCK_REAL:
        break;
    }
    if (c->epoch_env) {
        clock_gettime(CLOCK_REALTIME, &now);
        return ts_seconds(&now) - c->wall0_s;
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    return ts_seconds(&now) - ts_seconds(&c->mono0);
}

unsigned long long gs_sim_clock_wall_us(const struct gs_sim_clock *c, double t)
{
    double us = (c->wall0_s + t) * 1e6;

    if (!(us > 0))
        return 0;
    return us < 9e18 ? (unsigned long long)llround(us) : 9000000000000000000ull;
}
