/*
 * test_mfu.c - the MFU arithmetic (src/base/mfu.c): NVML names to the peak table, every
 * entry's figures, the FLOPs per token (6N, the attention term), the precision rule; and the
 * report's efficiency figures (src/run/efficiency.c) over a report object.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "base/mfu.h"
#include "run/efficiency.h"

#define T 1e12

static void near(double got, double want)
{
    assert_true(fabs(got - want) <= 1e-9 * fabs(want));
}

static const char *model_of(const char *nvml)
{
    const struct gs_peak_gpu *g = gs_peak_find(nvml);
    return g ? g->model : NULL;
}

/* Names as NVML reports them, to the table's models; variants the table must not guess. */
static void names(void **state)
{
    (void)state;
    assert_string_equal(model_of("NVIDIA H100 80GB HBM3"), "H100 SXM");
    assert_string_equal(model_of("NVIDIA H100 PCIe"), "H100 PCIe");
    assert_string_equal(model_of("NVIDIA H100 NVL"), "H100 NVL");
    assert_string_equal(model_of("NVIDIA H200"), "H200 SXM");
    assert_string_equal(model_of("NVIDIA H200 NVL"), "H200 NVL");
    assert_string_equal(model_of("NVIDIA A100-SXM4-80GB"), "A100 SXM");
    assert_string_equal(model_of("NVIDIA A100-SXM4-40GB"), "A100 SXM");
    assert_string_equal(model_of("A100-SXM4-40GB"), "A100 SXM");
    assert_string_equal(model_of("NVIDIA A100 80GB PCIe"), "A100 PCIe");
    assert_string_equal(model_of("NVIDIA A100-PCIE-40GB"), "A100 PCIe");
    assert_string_equal(model_of("NVIDIA B200"), "B200");
    assert_string_equal(model_of("NVIDIA L40S"), "L40S");
    assert_string_equal(model_of("NVIDIA L4"), "L4");
    assert_string_equal(model_of("NVIDIA A10"), "A10");
    assert_string_equal(model_of("NVIDIA GeForce RTX 4090"), "RTX 4090");
    assert_string_equal(model_of("Tesla V100-SXM2-32GB"), "V100 SXM2");
    assert_string_equal(model_of("Tesla V100-PCIE-16GB"), "V100 PCIe");
    assert_string_equal(model_of("Tesla V100S-PCIE-32GB"), "V100S PCIe");
    assert_string_equal(model_of("nvidia h100 80gb hbm3"), "H100 SXM");
    /* whole words: L4 is not L40S's prefix, A10 not A100's or A10G's */
    assert_null(model_of("NVIDIA L40"));
    assert_null(model_of("NVIDIA A10G"));
    assert_null(model_of("NVIDIA A100X"));
    assert_null(model_of("NVIDIA GeForce RTX 4090 D"));
    assert_null(model_of("NVIDIA H100"));
    assert_null(model_of("NVIDIA Frobnicator 9000"));
    assert_null(model_of(""));
    assert_null(model_of(NULL));
}

/* The datasheet figures (docs/report.md, MFU): dense, half the sparse tensor figures. */
static void figures(void **state)
{
    const struct gs_peak_gpu *g;
    size_t n;
    (void)state;

    g = gs_peak_find("NVIDIA H100 80GB HBM3");
    near(g->flops[GS_PREC_BF16], 989.5 * T);
    near(g->flops[GS_PREC_FP16], 989.5 * T);
    near(g->flops[GS_PREC_TF32], 494.5 * T);
    near(g->flops[GS_PREC_FP32], 67 * T);
    g = gs_peak_find("NVIDIA A100-SXM4-80GB");
    near(g->flops[GS_PREC_BF16], 312 * T);
    near(g->flops[GS_PREC_TF32], 156 * T);
    near(g->flops[GS_PREC_FP32], 19.5 * T);
    near(gs_peak_find("NVIDIA H100 PCIe")->flops[GS_PREC_BF16], 756.5 * T);
    near(gs_peak_find("NVIDIA B200")->flops[GS_PREC_BF16], 2250 * T);
    near(gs_peak_find("NVIDIA L40S")->flops[GS_PREC_BF16], 366.5 * T);
    near(gs_peak_find("NVIDIA L4")->flops[GS_PREC_BF16], 121 * T);
    near(gs_peak_find("NVIDIA A10")->flops[GS_PREC_BF16], 125 * T);
    near(gs_peak_find("NVIDIA GeForce RTX 4090")->flops[GS_PREC_BF16], 165.2 * T);
    g = gs_peak_find("Tesla V100-SXM2-16GB");
    near(g->flops[GS_PREC_FP16], 125 * T);
    assert_true(g->flops[GS_PREC_BF16] == 0 && g->flops[GS_PREC_TF32] == 0);
    /* every entry: fp32 known, 16-bit at least tf32 at least fp32 where present */
    g = gs_peak_table(&n);
    assert_true(n >= 15);
    for (size_t i = 0; i < n; i++) {
        assert_true(g[i].flops[GS_PREC_FP32] > 0);
        assert_true(g[i].flops[GS_PREC_FP16] >= g[i].flops[GS_PREC_FP32]);
        assert_true(g[i].flops[GS_PREC_TF32] == 0 ||
                    g[i].flops[GS_PREC_TF32] >= g[i].flops[GS_PREC_FP32]);
    }
    assert_string_equal(gs_precision_name(GS_PREC_BF16), "bf16");
    assert_null(gs_precision_name(-1));
    assert_null(gs_precision_name(GS_PREC_N));
}

/* 6N; 6N + 12LHQT with the whole shape (nanoGPT's GPT-2 124M at T = 1024); 8N + 16LHQT. */
static void flops(void **state)
{
    struct gs_model_shape m = {124e6, 12, 12, 64, 1024};
    int attn = -1;
    (void)state;

    near(gs_flops_per_token(&m, &attn), 6 * 124e6 + 12.0 * 12 * 12 * 64 * 1024);
    assert_int_equal(attn, 1);
    near(gs_hw_flops_per_token(&m), 8 * 124e6 + 16.0 * 12 * 12 * 64 * 1024);
    m.seq_len = 0; /* no sequence length seen: the attention term is left out */
    near(gs_flops_per_token(&m, &attn), 6 * 124e6);
    assert_int_equal(attn, 0);
    near(gs_hw_flops_per_token(&m), 8 * 124e6);
    m.params = 0;
    assert_true(isnan(gs_flops_per_token(&m, &attn)));
    assert_true(isnan(gs_hw_flops_per_token(&m)));
    assert_true(isnan(gs_flops_per_token(NULL, NULL)));
}

static void precision(void **state)
{
    (void)state;
    assert_int_equal(gs_precision_of(1, "bfloat16", -1, -1, 0, "float32"), GS_PREC_BF16);
    assert_int_equal(gs_precision_of(1, "float16", -1, -1, 0, "float32"), GS_PREC_FP16);
    assert_int_equal(gs_precision_of(0, NULL, 1, 0, 0, "float32"), GS_PREC_BF16);
    assert_int_equal(gs_precision_of(-1, NULL, 0, 1, 0, "float32"), GS_PREC_FP16);
    assert_int_equal(gs_precision_of(0, NULL, -1, -1, 0, "bfloat16"), GS_PREC_BF16);
    assert_int_equal(gs_precision_of(0, NULL, -1, -1, 0, "float16"), GS_PREC_FP16);
    assert_int_equal(gs_precision_of(0, NULL, 0, 0, 1, "float32"), GS_PREC_TF32);
    assert_int_equal(gs_precision_of(0, NULL, 0, 0, 0, "float32"), GS_PREC_FP32);
    assert_int_equal(gs_precision_of(-1, NULL, -1, -1, 0, NULL), -1);
    assert_int_equal(gs_precision_of(-1, NULL, -1, -1, 0, "int8"), -1);
}

/* A report with the inputs: two ranks on H100 SXM in bf16, 6N + attention. */
static json_t *report(const char *gpu_name)
{
    json_t *rep = json_pack(
        "{s:f, s:[{s:i,s:i,s:f},{s:i,s:i,s:f}], s:[{s:i,s:s},{s:i,s:s}],"
        " s:{s:i,s:b,s:s,s:s,s:i,s:i,s:i,s:i}}",
        "train_tokens_per_second", 30000.0, "per_rank", "rank", 0, "device", 0, "tokens_per_second",
        14000.0, "rank", 1, "device", 1, "tokens_per_second", 16000.0, "gpus", "index", 0, "name",
        gpu_name, "index", 1, "name", gpu_name, "facts", "param_count", 1000000000, "autocast", 1,
        "autocast_dtype", "bfloat16", "param_dtype", "float32", "model_layers", 24, "model_heads",
        16, "model_head_dim", 128, "seq_len", 2048);
    assert_non_null(rep);
    return rep;
}

static double jnum(const json_t *o, const char *k)
{
    return json_number_value(json_object_get(o, k));
}

static void efficiency(void **state)
{
    json_t *rep = report("NVIDIA H100 80GB HBM3"), *r1;
    double fpt = 6e9 + 12.0 * 24 * 16 * 128 * 2048;
    (void)state;

    json_object_set_new(rep, "slowest_rank", json_pack("{s:i}", "rank", 1));
    gs_efficiency(rep);
    near(jnum(rep, "model_flops_per_token"), fpt);
    near(jnum(json_object_get(rep, "slowest_rank"), "mfu"), fpt * 16000.0 / (989.5 * T));
    assert_string_equal(json_string_value(json_object_get(rep, "model_flops_formula")),
                        "6N+12LHQT");
    near(jnum(rep, "peak_flops"), 989.5 * T);
    assert_string_equal(json_string_value(json_object_get(rep, "peak_flops_precision")), "bf16");
    assert_string_equal(json_string_value(json_object_get(rep, "peak_flops_gpu")), "H100 SXM");
    near(jnum(rep, "mfu"), fpt * 30000.0 / (2 * 989.5 * T));
    assert_true(json_is_null(json_object_get(rep, "mfu_null_reason")));
    assert_true(json_is_null(json_object_get(rep, "hfu")));
    r1 = json_array_get(json_object_get(rep, "per_rank"), 1);
    near(jnum(r1, "mfu"), fpt * 16000.0 / (989.5 * T));
    assert_string_equal(json_string_value(json_object_get(r1, "gpu_model")), "H100 SXM");
    json_decref(rep);

    /* gradient checkpointing: HFU counts the recomputed forward */
    rep = report("NVIDIA H100 80GB HBM3");
    json_object_set_new(json_object_get(rep, "facts"), "gradient_checkpointing", json_true());
    gs_efficiency(rep);
    near(jnum(rep, "hfu"), jnum(rep, "mfu") * (8e9 + 16.0 * 24 * 16 * 128 * 2048) / fpt);
    json_decref(rep);

    /* an unknown GPU: null with the reason, per rank too */
    rep = report("NVIDIA Frobnicator 9000");
    gs_efficiency(rep);
    assert_true(json_is_null(json_object_get(rep, "mfu")));
    assert_true(json_is_null(json_object_get(rep, "peak_flops")));
    assert_non_null(strstr(json_string_value(json_object_get(rep, "mfu_null_reason")),
                           "unknown_gpu: NVIDIA Frobnicator 9000"));
    assert_true(
        json_is_null(json_object_get(json_array_get(json_object_get(rep, "per_rank"), 0), "mfu")));
    json_decref(rep);

    /* a rank without token counts: no job MFU (it would leave that rank's work out) */
    rep = report("NVIDIA H100 80GB HBM3");
    json_object_set_new(json_array_get(json_object_get(rep, "per_rank"), 1), "tokens_per_second",
                        json_null());
    gs_efficiency(rep);
    assert_true(json_is_null(json_object_get(rep, "mfu")));
    assert_non_null(
        strstr(json_string_value(json_object_get(rep, "mfu_null_reason")), "no_tokens: rank 1"));
    assert_true(json_is_number(
        json_object_get(json_array_get(json_object_get(rep, "per_rank"), 0), "mfu")));
    json_decref(rep);

    /* no GPU at all */
    rep = report("x");
    json_object_set_new(rep, "gpus", json_array());
    gs_efficiency(rep);
    assert_int_equal(
        strncmp(json_string_value(json_object_get(rep, "mfu_null_reason")), "cpu_only", 8), 0);
    json_decref(rep);

    /* no tokens */
    rep = report("NVIDIA H100 80GB HBM3");
    json_object_set_new(rep, "train_tokens_per_second", json_null());
    gs_efficiency(rep);
    assert_int_equal(
        strncmp(json_string_value(json_object_get(rep, "mfu_null_reason")), "no_tokens", 9), 0);
    json_decref(rep);

    /* V100 has no bf16 */
    rep = report("Tesla V100-SXM2-32GB");
    gs_efficiency(rep);
    assert_int_equal(
        strncmp(json_string_value(json_object_get(rep, "mfu_null_reason")), "no_peak", 7), 0);
    json_decref(rep);

    /* no param_count, no precision */
    rep = report("NVIDIA H100 80GB HBM3");
    json_object_del(json_object_get(rep, "facts"), "param_count");
    gs_efficiency(rep);
    assert_int_equal(
        strncmp(json_string_value(json_object_get(rep, "mfu_null_reason")), "no_param", 8), 0);
    assert_true(json_is_null(json_object_get(rep, "model_flops_per_token")));
    json_decref(rep);
    rep = report("NVIDIA H100 80GB HBM3");
    json_object_del(json_object_get(rep, "facts"), "autocast");
    json_object_del(json_object_get(rep, "facts"), "param_dtype");
    gs_efficiency(rep);
    assert_int_equal(strncmp(json_string_value(json_object_get(rep, "mfu_null_reason")),
                             "unknown_precision", 17),
                     0);
    json_decref(rep);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(names),     cmocka_unit_test(figures),    cmocka_unit_test(flops),
        cmocka_unit_test(precision), cmocka_unit_test(efficiency),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
