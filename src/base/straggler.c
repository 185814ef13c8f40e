/*
 * straggler.c - the straggler rule (contract in straggler.h, docs/report.md STRAGGLER).
 *
 * In synchronous data-parallel training every rank's step lasts as long as the slowest rank's:
 * the others wait for it in the collectives. So the step time names no one; the busy time
 * (the step less the communication waited for) does: the straggler computes (or loads data)
 * longest and waits least. It is compared with the median of the other ranks, never with a
 * median that includes it: with two ranks a median over both is the mean of the pair, and a
 * rank 1.5x its peer reads 1.2x of it.
 */
#include "base/straggler.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of the finite values of r[k].busy_ms (busy) or .wait_ms (!busy), k != skip. */
static int median_others(const struct gs_straggler_rank *r, size_t n, size_t skip, int busy,
                         double *out)
{
    double *v = malloc((n ? n : 1) * sizeof *v);
    size_t m = 0;

    *out = NAN;
    if (!v)
        return -1;
    for (size_t k = 0; k < n; k++) {
        double x = busy ? r[k].busy_ms : r[k].wait_ms;
        if (k != skip && isfinite(x))
            v[m++] = x;
    }
    if (m) {
        qsort(v, m, sizeof v[0], cmp_double);
        *out = m % 2 ? v[m / 2] : (v[m / 2 - 1] + v[m / 2]) / 2;
    }
    free(v);
    return 0;
}

int gs_straggler_ratio(const struct gs_straggler_rank *r, size_t n, size_t i, double *ratio)
{
    double others;

    *ratio = NAN;
    if (i >= n || !isfinite(r[i].busy_ms))
        return 0;
    if (median_others(r, n, i, 1, &others) < 0)
        return -1;
    if (isfinite(others) && others > 0)
        *ratio = r[i].busy_ms / others;
    return 0;
}

int gs_straggler_find(const struct gs_straggler_rank *r, size_t n, struct gs_straggler *out)
{
    size_t with = 0, top = 0;

    *out = (struct gs_straggler){.idx = -1,
                                 .busy_ms = NAN,
                                 .others_ms = NAN,
                                 .ratio = NAN,
                                 .wait_ms = NAN,
                                 .others_wait_ms = NAN};
    for (size_t k = 0; k < n; k++) {
        if (!isfinite(r[k].busy_ms))
            continue;
        if (!with || r[k].busy_ms > r[top].busy_ms)
            top = k;
        with++;
    }
    if (with < 2)
        return 0;
    if (median_others(r, n, top, 1, &out->others_ms) < 0 ||
        median_others(r, n, top, 0, &out->others_wait_ms) < 0)
        return -1;
    out->idx = (long)top;
    out->busy_ms = r[top].busy_ms;
    out->wait_ms = r[top].wait_ms;
    out->ratio = out->others_ms > 0 ? out->busy_ms / out->others_ms : NAN;
    out->straggler = out->others_ms > 0 && out->ratio > GS_STRAGGLER_RATIO &&
                     out->busy_ms - out->others_ms >= GS_STRAGGLER_MIN_GAP_MS;
    return 0;
}

void gs_straggler_text(const struct gs_straggler *s, long rank, char *buf, size_t size)
{
    int n;

    if (isfinite(s->ratio))
        n = snprintf(buf, size,
                     "rank %ld computes %.0f %% longer per step than the other ranks (%.1f "
                     "against %.1f ms)",
                     rank, 100.0 * (s->ratio - 1.0), s->busy_ms, s->others_ms);
    else
        n = snprintf(buf, size, "rank %ld computes %.1f ms per step, the other ranks %.1f ms", rank,
                     s->busy_ms, s->others_ms);
    if (n < 0 || (size_t)n >= size || !isfinite(s->others_wait_ms))
        return;
    if (isfinite(s->wait_ms))
        snprintf(buf + n, size - (size_t)n,
                 "; the others wait %.1f ms/step in communication, it waits %.1f",
                 s->others_wait_ms, s->wait_ms);
    else
        snprintf(buf + n, size - (size_t)n, "; the others wait %.1f ms/step in communication",
                 s->others_wait_ms);
}
