/*
 * libFuzzer target for CUDA_VISIBLE_DEVICES as the run-attribution rule reads it
 * (src/run/attrib.c): the variable comes from the training process's environment (its own, or
 * its /proc/PID/environ read by the agent), so any bytes. The input is the variable's value
 * against a fixed snapshot of four GPUs (one in MIG mode with two devices); every CUDA index
 * 0..64 must map to -1 or a GPU of the snapshot, and gs_attrib_mark must set only GPUs that
 * exist. Seeds: fuzz/corpus/run_attrib/ (index lists, UUIDs and prefixes, MIG forms).
 *
 * Build and run: make fuzz (fuzz/meson.build, scripts/fuzz.sh).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"
#include "run/attrib.h"

#include "fuzz_util.h"

static struct gs_snapshot *snap_once(void)
{
    static struct gs_snapshot *s;

    if (!s && gs_snapshot_new(&s, 4, 1, NULL) == GS_OK) {
        for (unsigned g = 0; g < 4; g++)
            snprintf(s->gpus[g].text[GS_T_UUID], GS_STR_LEN, "GPU-%08x-1111-2222-3333-444444444444",
                     0xaaaa0000u + g);
        s->gpus[3].n_mig = 2;
        snprintf(s->gpus[3].mig[0].uuid, GS_STR_LEN, "MIG-11111111-2222-3333-4444-555555555555");
        snprintf(s->gpus[3].mig[1].uuid, GS_STR_LEN, "MIG-11111112-2222-3333-4444-555555555555");
    }
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gs_snapshot *s = snap_once();
    char *cvd;
    int32_t dev[65];
    unsigned char in_run[4] = {0};
    struct gs_attrib a = {.devices = dev, .n_devices = 65, .cvd_known = 1};

    if (!s || size > 4096 || !(cvd = gs_fuzz_dup_text(data, size)))
        return 0;
    for (int k = 0; k <= 64; k++) {
        int g = gs_attrib_cuda_gpu(s, cvd, k);
        CHECK(g >= -1 && g < (int)s->n_gpus);
        dev[k] = k;
    }
    a.cvd = cvd;
    CHECK(gs_attrib_mark(&a, NULL, s, in_run) <= 4);
    for (int g = 0; g < 4; g++)
        CHECK(in_run[g] <= 1);
    free(cvd);
    return 0;
}
