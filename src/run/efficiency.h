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
 * "peak_flops_precision", "peak_flops_gpu", per rank "mfu" and "gpu_model", and the
 * slowest rank's "mfu" when the report has one. A pure
 * function of the report: a stored report gets the same figures. */
void gs_efficiency(json_t *rep);

/* From a run's facts (the report's "facts", a hello's as JSON): the model FLOPs per training
 * token (NAN without param_count; *attn 1 when the attention term is in), the precision of
 * its matmuls (*prec: enum gs_precision, -1 unknown) and the hardware FLOPs per token with
 * activation recomputation (*hw_fpt). Any pointer may be NULL. The one reading of the facts
 * for the report and the agent's gpuscope_run_mfu. */
double gs_efficiency_model(const json_t *facts, int *prec, int *attn, double *hw_fpt);

#endif
