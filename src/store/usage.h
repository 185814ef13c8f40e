/*
 * usage.h - the GPU usage accounting in the history (schema v5, docs/history.md): its rows
 * (one holder on one GPU over one minute, or one hour once older than retention_raw), the
 * writes (the agent's history writer: recorder.c), the roll-up into hours and the pruning,
 * and the grouped read behind /api/v1/usage. The figures are made by src/agent/usage.c.
 */
#ifndef GS_STORE_USAGE_H
#define GS_STORE_USAGE_H

#include <stddef.h>
#include <stdint.h>

#include "gpuscope/gs_model.h"

struct gs_err;
struct gs_store;

#define GS_USAGE_JOB_LEN 320 /* "NAMESPACE/POD" (63 + 1 + 253) fits */

/* The uid of a holder whose process the agent could not read (gone, another pid namespace):
 * stored as -1, shown as null. */
#define GS_USAGE_UID_UNKNOWN 0xFFFFFFFFu
/* A holder's uid as a signed number: -1 when unknown. */
#define GS_USAGE_UID(u) ((u) == GS_USAGE_UID_UNKNOWN ? (int64_t)-1 : (int64_t)(u))

/* Who holds a GPU. Empty strings: not known. */
struct gs_usage_holder {
    uint32_t uid;
    char user[GS_PROC_USER_LEN];
    char job[GS_USAGE_JOB_LEN]; /* Slurm job, else NAMESPACE/POD, else gpuscope run id */
    char pod[254];
    char ns[64];
    char container[GS_JOB_ID_LEN];
};

/* What a holder's use of one GPU adds up to. */
struct gs_usage_acc {
    double held_s, busy_s, idle_s, mem_gib_s, energy_j;
    double peak_bytes;
    double first_seen, last_seen; /* unix seconds; 0: none */
};

/* One holder on one GPU (or MIG instance) over one bucket. */
struct gs_usage_row {
    double t;              /* bucket start, unix seconds */
    int res;               /* bucket length, seconds: 60 (minutes) or 3600 (hours) */
    unsigned gpu;          /* NVML index of the GPU (of the MIG instance's parent) */
    char uuid[GS_STR_LEN]; /* the GPU's, or the MIG instance's */
    struct gs_usage_holder h;
    struct gs_usage_acc a;
};

/* What a usage answer groups by (/api/v1/usage's by=). */
enum gs_usage_by {
    GS_USAGE_BY_USER,
    GS_USAGE_BY_JOB,
    GS_USAGE_BY_POD,
    GS_USAGE_BY_NS,
    GS_USAGE_BY_GPU
};

/* Which rows a read sums: every bucket that overlaps [from, to), whole. */
struct gs_usage_sel {
    double from, to;
    enum gs_usage_by by;
    int owner_only; /* 1: only uid's rows */
    int64_t uid;
    const char *job; /* only this job's rows; NULL: any */
};

/* One group of an answer: the key columns of by (the others: uid -1, "" and gpu -1 unless
 * every row of the group agrees) and the sums. */
struct gs_usage_group {
    int64_t uid;
    char user[GS_PROC_USER_LEN];
    char job[GS_USAGE_JOB_LEN];
    char pod[254];
    char ns[64];
    int gpu;
    char uuid[GS_STR_LEN];
    struct gs_usage_acc a;
};
typedef int (*gs_usage_group_fn)(void *ctx, const struct gs_usage_group *g);

/* Adds n rows (each into the row of its bucket and holder: a bucket seen twice, across an
 * agent restart, sums). One transaction. */
int gs_store_usage_add(struct gs_store *st, const struct gs_usage_row *rows, unsigned n,
                       struct gs_err *err);

/* Rolls the minute rows older than now - raw_s into hour rows, deletes hour rows older than
 * now - rollup_s (0: keep). *changed: rows rolled up or deleted. One transaction. */
int gs_store_usage_prune(struct gs_store *st, double now, double raw_s, double rollup_s,
                         unsigned *changed, struct gs_err *err);

/* The groups of sel, one fn call each (fn's non-zero return stops the read). */
int gs_store_usage_query(struct gs_store *st, const struct gs_usage_sel *sel, gs_usage_group_fn fn,
                         void *ctx, struct gs_err *err);

#endif
