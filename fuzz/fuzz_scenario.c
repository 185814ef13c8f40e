/*
 * libFuzzer target for the nvml-sim scenario parser (sim/scenario.c): arbitrary bytes must give
 * either a scenario or a one-line error, never a crash, a leak or undefined behaviour. When a
 * parse succeeds, the environment-dependent resolution step runs, and every parsed pattern is
 * evaluated (value, window mean, integral) at a few awkward times, so the arithmetic of
 * sim/pattern.c meets the parsed extremes too.
 *
 * Build and run (see docs/nvml-sim.md):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=c17 -D_GNU_SOURCE -Isrc -Isim \
 *       fuzz/fuzz_scenario.c sim/scenario.c sim/pattern.c -ljansson -lm \
 *       -o build-fuzz/fuzz_scenario
 *   build-fuzz/fuzz_scenario -max_total_time=60 build-fuzz/work fuzz/corpus/scenario
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "scenario.h"

#include "fuzz_util.h"

static volatile double sink;

static void evaluate(const struct gs_sim_pattern *p)
{
    static const double t[] = {-3.5, 0, 0.1666, 1.5, 29.99, 1e6, 1e12};

    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        sink = gs_sim_pattern_at(p, i, t[i], 0, 1e9);
        sink = gs_sim_pattern_avg(p, i, t[i] - 1, t[i], 0, 100);
        sink = gs_sim_pattern_integral(p, t[i]);
    }
}

static void evaluate_all(const struct gs_sim_scenario *sc)
{
    for (unsigned g = 0; g < sc->n_gpus; g++) {
        for (unsigned m = 0; m < GS_SIM_M__COUNT; m++)
            evaluate(&sc->gpus[g].metric[m]);
        for (unsigned s = 0; s < GS_SIM_MAX_MIG; s++)
            if (sc->gpus[g].mig[s].present)
                evaluate(&sc->gpus[g].mig[s].metric[GS_SIM_M_MEM_USED]);
    }
    for (unsigned i = 0; i < sc->n_procs; i++) {
        evaluate(&sc->procs[i].mem_mib);
        evaluate(&sc->procs[i].sm_pct);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gs_sim_scenario *sc = NULL;
    char err[512];

    if (gs_sim_scenario_parse((const char *)data, size, "fuzz.json", &sc, err, sizeof err) == 0) {
        char rerr[256];
        (void)gs_sim_scenario_resolve(sc, rerr, sizeof rerr);
        evaluate_all(sc);
        gs_sim_scenario_free(sc);
    } else if (sc != NULL || memchr(err, '\0', sizeof err) == NULL) {
        __builtin_trap(); /* a failed parse must leave *out NULL and a terminated message */
    }
    return 0;
}
