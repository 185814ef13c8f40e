/*
 * mfu.c - peak FLOPs table, training FLOPs per token, precision (base/mfu.h).
 *
 * Every figure is the vendor's datasheet figure for dense math: where a datasheet gives the
 * tensor-core figure with structured sparsity only (marked * there), the dense figure is half
 * of it. docs/report.md (MFU) names each datasheet and the figure taken from it.
 */
#include "base/mfu.h"

#include <ctype.h>
#include <math.h>
#include <string.h>

#define T 1e12

static const char *const prec_names[GS_PREC_N] = {"fp32", "tf32", "bf16", "fp16"};

const char *gs_precision_name(int p)
{
    return p >= 0 && p < GS_PREC_N ? prec_names[p] : NULL;
}

/*                                   fp32      tf32        bf16        fp16 */
static const struct gs_peak_gpu table[] = {
    {"A100 SXM", {19.5 * T, 156 * T, 312 * T, 312 * T}},
    {"A100 PCIe", {19.5 * T, 156 * T, 312 * T, 312 * T}},
    {"H100 SXM", {67 * T, 494.5 * T, 989.5 * T, 989.5 * T}},
    {"H100 PCIe", {51 * T, 378 * T, 756.5 * T, 756.5 * T}},
    {"H100 NVL", {60 * T, 417.5 * T, 835.5 * T, 835.5 * T}},
    {"H200 SXM", {67 * T, 494.5 * T, 989.5 * T, 989.5 * T}},
    {"H200 NVL", {60 * T, 417.5 * T, 835.5 * T, 835.5 * T}},
    {"B200", {75 * T, 1100 * T, 2250 * T, 2250 * T}},
    {"L40S", {91.6 * T, 183 * T, 366.5 * T, 366.5 * T}},
    {"L4", {30.3 * T, 60 * T, 121 * T, 121 * T}},
    {"A10", {31.2 * T, 62.5 * T, 125 * T, 125 * T}},
    {"RTX 4090", {82.6 * T, 82.6 * T, 165.2 * T, 165.2 * T}},
    {"V100 SXM2", {15.7 * T, 0, 0, 125 * T}},
    {"V100 PCIe", {14 * T, 0, 0, 112 * T}},
    {"V100S PCIe", {16.4 * T, 0, 0, 130 * T}},
};

enum {
    A100_SXM,
    A100_PCIE,
    H100_SXM,
    H100_PCIE,
    H100_NVL,
    H200_SXM,
    H200_NVL,
    B200,
    L40S,
    L4,
    A10,
    RTX4090,
    V100_SXM2,
    V100_PCIE,
    V100S_PCIE,
    UNKNOWN = -1,
};

/* NVML names, matched in this order (the more specific first); UNKNOWN: a variant the table
 * must not mistake for its sibling. */
static const struct {
    const char *pat;
    int model;
} names[] = {
    {"A100-SXM4", A100_SXM},
    {"A100 SXM", A100_SXM},
    {"A100-PCIE", A100_PCIE},
    {"A100 80GB PCIE", A100_PCIE},
    {"A100 PCIE", A100_PCIE},
    {"H100 NVL", H100_NVL},
    {"H100 PCIE", H100_PCIE},
    {"H100 80GB HBM3", H100_SXM},
    {"H100 SXM", H100_SXM},
    {"H100-SXM", H100_SXM},
    {"H200 NVL", H200_NVL},
    {"H200", H200_SXM},
    {"B200", B200},
    {"L40S", L40S},
    {"L4", L4},
    {"A10", A10},
    {"RTX 4090 D", UNKNOWN},
    {"RTX 4090", RTX4090},
    {"V100S", V100S_PCIE},
    {"V100-SXM2", V100_SXM2},
    {"V100 SXM2", V100_SXM2},
    {"V100-PCIE", V100_PCIE},
    {"V100 PCIE", V100_PCIE},
};

/* pat occurs in s (case-insensitive) as whole words: no letter or digit right before or
 * after it. */
static int has_word(const char *s, const char *pat)
{
    size_t n = strlen(pat);

    for (const char *p = s; *p; p++) {
        size_t i = 0;
        while (i < n && p[i] && toupper((unsigned char)p[i]) == toupper((unsigned char)pat[i]))
            i++;
        if (i < n)
            continue;
        if (p > s && isalnum((unsigned char)p[-1]))
            continue;
        if (isalnum((unsigned char)p[n]))
            continue;
        return 1;
    }
    return 0;
}

const struct gs_peak_gpu *gs_peak_find(const char *nvml_name)
{
    if (!nvml_name || !nvml_name[0])
        return NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (has_word(nvml_name, names[i].pat))
            return names[i].model == UNKNOWN ? NULL : &table[names[i].model];
    return NULL;
}

const struct gs_peak_gpu *gs_peak_table(size_t *n)
{
    if (n)
        *n = sizeof table / sizeof table[0];
    return table;
}

static double attn_term(const struct gs_model_shape *m, double per)
{
    if (m->layers > 0 && m->heads > 0 && m->head_dim > 0 && m->seq_len > 0)
        return per * m->layers * m->heads * m->head_dim * m->seq_len;
    return NAN;
}

double gs_flops_per_token(const struct gs_model_shape *m, int *attn)
{
    double a;

    if (attn)
        *attn = 0;
    if (!m || !(m->params > 0))
        return NAN;
    a = attn_term(m, 12.0);
    if (isnan(a))
        return 6.0 * m->params;
    if (attn)
        *attn = 1;
    return 6.0 * m->params + a;
}

double gs_hw_flops_per_token(const struct gs_model_shape *m)
{
    double a;

    if (!m || !(m->params > 0))
        return NAN;
    a = attn_term(m, 16.0);
    return 8.0 * m->params + (isnan(a) ? 0 : a);
}

static int is(const char *s, const char *want)
{
    return s && strcmp(s, want) == 0;
}

int gs_precision_of(int autocast, const char *autocast_dtype, int bf16, int fp16, int tf32,
                    const char *param_dtype)
{
    if (autocast == 1) {
        if (is(autocast_dtype, "bfloat16"))
            return GS_PREC_BF16;
        if (is(autocast_dtype, "float16"))
            return GS_PREC_FP16;
    }
    if (bf16 == 1)
        return GS_PREC_BF16;
    if (fp16 == 1)
        return GS_PREC_FP16;
    if (is(param_dtype, "bfloat16"))
        return GS_PREC_BF16;
    if (is(param_dtype, "float16"))
        return GS_PREC_FP16;
    if (is(param_dtype, "float32"))
        return tf32 == 1 ? GS_PREC_TF32 : GS_PREC_FP32;
    return -1;
}
