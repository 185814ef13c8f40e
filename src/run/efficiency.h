/*
 * efficiency.h - the report's efficiency figures: tokens/s turned into MFU (model FLOPs
 * utilization) with the peak table and FLOPs arithmetic of src/base/mfu.c.
 */
#ifndef GS_RUN_EFFICIENCY_H
#define GS_RUN_EFFICIENCY_H

#include <jansson.h>

/* Adds to a run report (docs/report.md, MFU) that already holds "train_tokens_per_second",
 * "per_rank" (with "tokens_per_second" and "device"), "gpus" and "facts": "mfu" (0..1, the
 * job), "mfu_null_reason" (why mfu is null, else null), "hfu" (gradient checkpointing on),
 * "model_flops_per_token", "model_flops_formula", "peak_flops" (per GPU),
 * "peak_flops_precision", "peak_flops_gpu", and per rank "mfu" and "gpu_model". A pure
 * function of the report: a stored report gets the same figures. */
void gs_efficiency(json_t *rep);

#endif
