/*
 * compare_fields.h - the run report fields `gpuscope compare` lists (docs/compare.md), one
 * table for the C document (compare.c) and, through src/runview/tables_gen.c at build time,
 * for the dashboard's comparison (web/format.js). No other include: the generator is built
 * for the build machine.
 */
#ifndef GS_RUNVIEW_COMPARE_FIELDS_H
#define GS_RUNVIEW_COMPARE_FIELDS_H

/* X(report key, larger_is_better: 1 up is better / -1 down / 0 neither, always: listed even
 * when every run has null, unit as the dashboard prints it ("" none), digits after the point
 * (-1: the number as it is)). */
#define GS_COMPARE_FIELDS(X)                                                                       \
    /* document 000's eight headline fields, always listed */                                      \
    X("train_runtime", -1, 1, "s", 2)                                                              \
    X("train_samples_per_second", 1, 1, "/s", 3)                                                   \
    X("train_steps_per_second", 1, 1, "/s", 3)                                                     \
    X("gpu_peak_memory_allocated_gb", 0, 1, "GiB", 2)                                              \
    X("gpu_avg_utilization_percent", 1, 1, "%", 1)                                                 \
    X("gpu_max_utilization_percent", 0, 1, "%", 1)                                                 \
    X("data_loading_time_ratio", -1, 1, "", 3)                                                     \
    X("communication_time_ratio", -1, 1, "", 3)                                                    \
    /* more of the report, listed when a run has them */                                           \
    X("other_time_ratio", -1, 0, "", 3)                                                            \
    X("gpu_busy_estimate_percent", 1, 0, "%", 1)                                                   \
    X("step_busy_estimate_percent", 1, 0, "%", 1)                                                  \
    X("train_tokens_per_second", 1, 0, "/s", 1)                                                    \
    X("tokens_per_second_per_gpu", 1, 0, "/s", 1)                                                  \
    X("mfu", 1, 0, "", 4)                                                                          \
    X("hfu", 1, 0, "", 4)                                                                          \
    X("steps", 0, 0, "", -1)                                                                       \
    X("ranks", 0, 0, "", -1)                                                                       \
    X("energy_joules", -1, 0, "J", 0)                                                              \
    X("throttled_seconds", -1, 0, "s", 1)

#endif
