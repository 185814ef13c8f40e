/*
 * usamp.c - the driver's utilization samples a snapshot carries, fed to a run aggregate
 * (contract in usamp.h; the sampler reads them: src/core/sampler.c, GS_WANT_UTIL_SAMPLES).
 */
#include "run/usamp.h"

#include "gpuscope/gs_model.h"
#include "run/agg.h"

unsigned gs_usamp_feed(struct gs_agg *agg, const struct gs_snapshot *snap,
                       const unsigned char *in_run)
{
    unsigned with = 0;

    if (!agg || !snap)
        return 0;
    for (unsigned i = 0; i < snap->n_gpus; i++) {
        unsigned n;
        const struct gs_util_sample *s = gs_snapshot_util_samples(snap, i, &n);

        if (n && (!in_run || in_run[i])) {
            gs_agg_util_samples(agg, snap->gpus[i].index, s, n);
            with++;
        }
    }
    return with;
}
