/*
 * straggler.h - the one straggler rule of gpuscope (docs/report.md, STRAGGLER): over each
 * rank's compute (busy: its step's wall time less the communication it waited for) and the
 * communication it waited for, the rank that computes longest is compared with the median of
 * the OTHER ranks (leave-one-out, so that with two ranks it is compared with its peer, and a
 * straggler never raises the figure it is compared with). The run report's slowest_rank,
 * `gpuscope compare --job`, `gpuscope trace analyze`'s job table (src/trace/analyze.c) and the
 * Prometheus rules of deploy/prometheus/training-job-rules.yml apply it with the same
 * thresholds. In src/base, pure arithmetic, so that src/trace and src/diag's peers may use it.
 */
#ifndef GS_BASE_STRAGGLER_H
#define GS_BASE_STRAGGLER_H

#include <stddef.h>

/* A straggler computes more than GS_STRAGGLER_RATIO times the other ranks' median and at
 * least GS_STRAGGLER_MIN_GAP_MS longer per step (docs/report.md explains the choice). */
#define GS_STRAGGLER_RATIO 1.15
#define GS_STRAGGLER_MIN_GAP_MS 1.0

/* One rank's figures in ms per step (medians over its steps); NaN when unknown. A rank
 * without a busy figure takes no part. */
struct gs_straggler_rank {
    double busy_ms; /* step wall time less the communication waited for */
    double wait_ms; /* the communication it waited for (exposed when measured) */
};

struct gs_straggler {
    long idx;              /* the rank (index into the input) that computes longest; -1: fewer
                            * than two ranks with a busy figure */
    int straggler;         /* 1 when it is a straggler by the thresholds above */
    double busy_ms;        /* its busy time */
    double others_ms;      /* the median busy time of the other ranks */
    double ratio;          /* busy_ms / others_ms (NaN when others_ms is 0) */
    double wait_ms;        /* its own wait */
    double others_wait_ms; /* the median wait of the other ranks (NaN: unknown) */
};

/* The leave-one-out ratio of rank i: its busy time over the median of the other ranks' (NaN
 * when either is unknown or the median is 0). Returns -1 when out of memory, else 0. */
int gs_straggler_ratio(const struct gs_straggler_rank *r, size_t n, size_t i, double *ratio);

/* The rank computing longest among r[0..n) and whether it is a straggler. Returns -1 when
 * out of memory (out is then idx -1), else 0. */
int gs_straggler_find(const struct gs_straggler_rank *r, size_t n, struct gs_straggler *out);

/* "rank 1 computes 48 % longer per step than the other ranks (95.2 against 64.3 ms); the
 * others wait 31.0 ms/step in communication, it waits 0.4" into buf, for the rank number rank (s
 * from gs_straggler_find, s->idx >= 0). */
void gs_straggler_text(const struct gs_straggler *s, long rank, char *buf, size_t size);

#endif
