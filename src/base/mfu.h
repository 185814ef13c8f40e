/*
 * mfu.h - the arithmetic of model FLOPs utilization, in one place: the GPUs' peak FLOPs by
 * model and precision (one table, each figure from the vendor's datasheet: docs/report.md,
 * MFU), the training FLOPs per token (6N plus the attention term 12·L·H·Q·T, PaLM appendix B,
 * nanoGPT's estimate_mfu) and the precision a run computes in. Pure: no I/O, no allocation.
 * Used by the run report (src/run/efficiency.c); tests/unit/test_mfu.c checks every entry.
 */
#ifndef GS_BASE_MFU_H
#define GS_BASE_MFU_H

#include <stddef.h>

/* Precisions of the peak table (dense tensor-core math for the 16-bit types and TF32; plain
 * FP32 on the CUDA cores). */
enum gs_precision { GS_PREC_FP32, GS_PREC_TF32, GS_PREC_BF16, GS_PREC_FP16, GS_PREC_N };

/* "fp32", "tf32", "bf16", "fp16"; NULL for an unknown value. */
const char *gs_precision_name(int p);

/* One GPU model of the table: its name as the report gives it ("H100 SXM") and its dense
 * peak FLOP/s per precision (0: the GPU has no such math, e.g. V100's bf16). */
struct gs_peak_gpu {
    const char *model;
    double flops[GS_PREC_N];
};

/* The table entry matching an NVML device name ("NVIDIA H100 80GB HBM3" -> H100 SXM), or NULL
 * for a name the table does not know (no guess: a variant it cannot tell apart is unknown).
 * Matching ignores case and needs whole words ("L4" does not match "L40S"). */
const struct gs_peak_gpu *gs_peak_find(const char *nvml_name);

/* The table, for the documentation and the tests. */
const struct gs_peak_gpu *gs_peak_table(size_t *n);

/* The model's shape, as the run's facts give it; 0 = unknown. */
struct gs_model_shape {
    double params;   /* N: parameters counted (facts.param_count) */
    double layers;   /* L */
    double heads;    /* H */
    double head_dim; /* Q */
    double seq_len;  /* T: the sequence length the training forwards were fed */
};

/* Training FLOPs per token: 6·N, plus 12·L·H·Q·T when L, H, Q and T are all known (*attn set
 * to 1 then). NAN when N is unknown (<= 0). */
double gs_flops_per_token(const struct gs_model_shape *m, int *attn);

/* Hardware FLOPs per token with full activation recomputation (gradient checkpointing: the
 * forward runs twice): 8·N, plus 16·L·H·Q·T under the same condition. NAN as above. */
double gs_hw_flops_per_token(const struct gs_model_shape *m);

/* The precision of the run's matmuls from its facts (any may be NULL / -1 = unknown):
 * autocast on with autocast_dtype "bfloat16"/"float16" -> bf16/fp16; else the Trainer's
 * bf16/fp16 flags (1 = on); else the parameters' dtype ("bfloat16", "float16"; "float32" ->
 * tf32 when tf32 is on, else fp32). -1 when nothing says. */
int gs_precision_of(int autocast, const char *autocast_dtype, int bf16, int fp16, int tf32,
                    const char *param_dtype);

#endif
