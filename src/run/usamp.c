/*
 * usamp.c - the driver's utilization samples for run aggregates (contract in usamp.h).
 *
 * Each GPU keeps the samples of the last read in a buffer that only grows (64 samples a call,
 * at most USAMP_ROUNDS calls a cycle, so a stalled cycle costs at most 1024 samples a GPU).
 */
#include "run/usamp.h"

#include <stdlib.h>

#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"
#include "gpuscope/gs_sampler.h"
#include "run/agg.h"

#define USAMP_BATCH 64  /* samples per gs_sampler_util_samples call */
#define USAMP_ROUNDS 16 /* calls per GPU per cycle at most */

struct usamp_gpu {
    uint64_t last_us;           /* newest sample read */
    int off;                    /* no samples here (GS_ENOTSUP) or lost: never asked again */
    int was_read;               /* read in the previous cycle: continue from last_us */
    struct gs_util_sample *buf; /* the last read's samples, oldest first */
    unsigned n, cap;
};

struct gs_usamp {
    unsigned n_gpus;
    struct usamp_gpu g[];
};

struct gs_usamp *gs_usamp_new(unsigned n_gpus)
{
    struct gs_usamp *u = calloc(1, sizeof *u + (size_t)n_gpus * sizeof u->g[0]);

    if (u)
        u->n_gpus = n_gpus;
    return u;
}

void gs_usamp_free(struct gs_usamp *u)
{
    if (!u)
        return;
    for (unsigned i = 0; i < u->n_gpus; i++)
        free(u->g[i].buf);
    free(u);
}

/* Room for one more batch after the n kept; 0 when out of memory. */
static int usamp_reserve(struct usamp_gpu *g)
{
    struct gs_util_sample *p;

    if (g->n + USAMP_BATCH <= g->cap)
        return 1;
    p = realloc(g->buf, (size_t)(g->n + USAMP_BATCH) * sizeof *p);
    if (!p)
        return 0;
    g->buf = p;
    g->cap = g->n + USAMP_BATCH;
    return 1;
}

static void usamp_read_gpu(struct usamp_gpu *g, struct gs_sampler *s, unsigned i,
                           uint64_t since_us)
{
    unsigned got = 0, rounds = 0;
    int rc;

    if (!g->was_read || !g->last_us)
        g->last_us = since_us;
    g->was_read = 1;
    do {
        if (!usamp_reserve(g))
            return;
        rc = gs_sampler_util_samples(s, i, &g->last_us, g->buf + g->n, USAMP_BATCH, &got, NULL);
        if (rc != GS_OK) {
            /* Absent for good (old driver, MIG) or gone; other errors: next cycle. */
            g->off = rc == GS_ENOTSUP || rc == GS_ELOST;
            return;
        }
        g->n += got;
    } while (got == USAMP_BATCH && ++rounds < USAMP_ROUNDS);
}

unsigned gs_usamp_read(struct gs_usamp *u, struct gs_sampler *s, const struct gs_snapshot *snap,
                       const unsigned char *want, uint64_t since_us)
{
    unsigned with = 0;

    if (!u || !s || !snap)
        return 0;
    for (unsigned i = 0; i < u->n_gpus; i++) {
        struct usamp_gpu *g = &u->g[i];

        g->n = 0;
        if (i >= snap->n_gpus || !want || !want[i] || g->off || snap->gpus[i].lost) {
            g->was_read = 0;
            continue;
        }
        usamp_read_gpu(g, s, i, since_us);
        with += g->n > 0;
    }
    return with;
}

void gs_usamp_feed(const struct gs_usamp *u, struct gs_agg *agg, const struct gs_snapshot *snap,
                   const unsigned char *in_run)
{
    if (!u || !agg || !snap)
        return;
    for (unsigned i = 0; i < u->n_gpus && i < snap->n_gpus; i++)
        if (u->g[i].n && (!in_run || in_run[i]))
            gs_agg_util_samples(agg, snap->gpus[i].index, u->g[i].buf, u->g[i].n);
}
