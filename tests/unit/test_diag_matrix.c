/*
 * The advice matrix of the diagnosis (src/diag/diag.c, docs/report.md "Spelling"): every rule
 * that gives advice, over reports built by hand for each framework (plain PyTorch, HF Trainer,
 * ms-swift, DeepSpeed, accelerate) x device (CPU, CUDA) x process-group backend (gloo, nccl)
 * x loader setting (no workers; a few workers with prefetch 1 and pin_memory False; half the
 * cores with prefetch 4 and pin_memory True), with the run completed or failed. Each cell
 * asserts what its advice may and may not say: options spelled for its framework only,
 * prefetch_factor only with workers, pin_memory only with CUDA, NCCL only with nccl, no
 * worker-count claim, no flag that does not exist (--use_cache, --flash_attn, --bf16 for
 * ms-swift), no GPU finding on a CPU run, never "healthy" for a failed run.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "diag/diag.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static const char *const frameworks[] = {"torch", "hf", "ms-swift", "deepspeed", "accelerate"};
enum { FW_N = 5 };

struct loader {
    int workers, prefetch, pin; /* pin: 0 / 1 */
};
static const struct loader loaders[] = {{0, -1, 0}, {2, 1, 0}, {8, 4, 1}};

/* One cell: data 0.5, communication 0.2 (2 ranks), and on CUDA a low-utilization A100 run
 * with sdpa attention, float32 parameters and a nearly full GPU. */
static json_t *cell(int fw, int cuda, int nccl, const struct loader *ld, int failed)
{
    json_t *r = json_pack("{s:f, s:f, s:f, s:i, s:i, s:{s:f, s:f, s:s}, s:{s:n, s:n, s:n}}",
                          "data_loading_time_ratio", 0.5, "communication_time_ratio", 0.2,
                          "train_runtime", 100.0, "ranks", 2, "steps", 50, "run", "start_time",
                          10.0, "end_time", 110.0, "framework", frameworks[fw], "allocator",
                          "peak_reserved_gb", "fragmentation_gap_gb", "memory_total_gb");
    json_t *fx = json_pack("{s:i, s:i, s:b, s:s, s:s, s:s, s:b}", "loader_num_workers", ld->workers,
                           "cpu_count", 16, "loader_pin_memory", ld->pin, "dist_backend",
                           nccl ? "nccl" : "gloo", "attn_implementation", "sdpa", "param_dtype",
                           "float32", "ddp_find_unused_parameters", 1);

    if (ld->prefetch >= 0)
        json_object_set_new(fx, "loader_prefetch_factor", json_integer(ld->prefetch));
    if (nccl)
        json_object_set_new(fx, "nccl_version", json_string("2.21.5"));
    if (cuda) {
        json_object_set_new(fx, "cuda_device_name", json_string("NVIDIA A100-SXM4-80GB"));
        json_object_set_new(r, "gpu_avg_utilization_percent", json_real(20.0));
        json_object_set_new(r, "gpu_utilization_source", json_string("nvml"));
        json_object_set_new(
            r, "gpus",
            json_pack("[{s:i, s:f, s:f, s:f, s:{}, s:[]}, "
                      "{s:i, s:f, s:f, s:f, s:{}, s:[]}]",
                      "index", 0, "utilization_avg_percent", 20.0, "memory_peak_bytes", 78.0 * GIB,
                      "memory_total_bytes", 80.0 * GIB, "throttled_seconds", "idle_periods",
                      "index", 1, "utilization_avg_percent", 60.0, "memory_peak_bytes", 30.0 * GIB,
                      "memory_total_bytes", 80.0 * GIB, "throttled_seconds", "idle_periods"));
    } else {
        json_object_set_new(r, "gpu_avg_utilization_percent", json_null());
        json_object_set_new(r, "gpus", json_array());
        json_object_set_new(r, "step_busy_estimate_source", json_string("host_timing"));
    }
    json_object_set_new(r, "facts", fx);
    json_object_set_new(r, "outcome",
                        json_pack("{s:s, s:i, s:i, s:s?, s:{s:b}}", "status",
                                  failed ? "failed" : "completed", "exit_code", failed ? 1 : 0,
                                  "steps_completed", 50, "exception",
                                  failed ? "ValueError: boom" : NULL, "seen", "torch_imported", 1));
    return r;
}

static int has_id(const json_t *fs, const char *id)
{
    size_t i;
    const json_t *f;

    json_array_foreach(fs, i, f)
    {
        if (strcmp(json_string_value(json_object_get(f, "id")), id) == 0)
            return 1;
    }
    return 0;
}

/* Every advice line of every finding, joined (with " | "). */
static void all_advice(const json_t *fs, char *out, size_t size)
{
    size_t i, j, n = 0;
    const json_t *f, *a;

    out[0] = '\0';
    json_array_foreach(fs, i, f)
    {
        json_array_foreach(json_object_get(f, "advice"), j, a)
        {
            int w = snprintf(out + n, size - n, "%s | ", json_string_value(a));
            if (w > 0 && (size_t)w < size - n)
                n += (size_t)w;
        }
    }
}

static int cells, checks;

static void expect(int cond, const char *what, int fw, int cuda, int nccl, int l, int failed,
                   const char *adv)
{
    checks++;
    if (!cond) {
        fprintf(stderr, "cell %s/%s/%s/loader%d/%s: %s\n  advice: %s\n", frameworks[fw],
                cuda ? "cuda" : "cpu", nccl ? "nccl" : "gloo", l, failed ? "failed" : "completed",
                what, adv);
        fail();
    }
}

static void matrix(void **state)
{
    static char adv[16384];
    (void)state;

    for (int fw = 0; fw < FW_N; fw++)
        for (int cuda = 0; cuda <= 1; cuda++)
            for (int nccl = 0; nccl <= 1; nccl++)
                for (int l = 0; l < 3; l++)
                    for (int failed = 0; failed <= 1; failed++) {
                        const struct loader *ld = &loaders[l];
                        json_t *r = cell(fw, cuda, nccl, ld, failed);
                        json_t *fs = gs_diag_findings(r, 64);
                        int hf = fw == 1, swift = fw == 2, plainish = fw == 0 || fw >= 3;
#define E(cond, what) expect((cond), (what), fw, cuda, nccl, l, failed, adv)
                        cells++;
                        all_advice(fs, adv, sizeof adv);
                        E(has_id(fs, "data_loading"), "data_loading fires at 0.5");
                        E(has_id(fs, "communication"), "communication fires at 0.2");
                        /* no claim about worker counts the numbers could contradict */
                        E(!strstr(adv, "too few") && !strstr(adv, "will not help") &&
                              !strstr(adv, "cannot help"),
                          "no worker-count claim");
                        E(ld->workers > 0 || !strstr(adv, "prefetch"),
                          "prefetch_factor only with workers");
                        E(!(ld->workers > 0 && ld->prefetch == 1) || strstr(adv, "prefetch"),
                          "prefetch 1 with workers is advised");
                        E(cuda || !strstr(adv, "pin_memory"), "pin_memory only with CUDA");
                        E(!cuda || ld->pin || strstr(adv, "pin_memory"),
                          "pin_memory False on CUDA is advised");
                        E(nccl || !strstr(adv, "NCCL"), "NCCL only with nccl");
                        E(!nccl || strstr(adv, "NCCL_DEBUG=INFO"), "nccl: NCCL_DEBUG advice");
                        E(!strstr(adv, "--use_cache") && !strstr(adv, "--flash_attn"),
                          "no flag that does not exist");
                        /* spelled for the framework, and only for it */
                        E(hf == (strstr(adv, "TrainingArguments") != NULL),
                          "TrainingArguments names only for the HF Trainer");
                        E(swift == (strstr(adv, "--dataloader_num_workers") != NULL ||
                                    strstr(adv, "--ddp_") != NULL),
                          "ms-swift flags only for ms-swift");
                        E(!swift || !strstr(adv, "--bf16"), "ms-swift: --torch_dtype, not --bf16");
                        E(swift || !strstr(adv, "--deepspeed"), "--deepspeed only for ms-swift");
                        E(!(hf || swift) || !strstr(adv, "DataLoader("),
                          "no DataLoader(...) spelling for the Trainer");
                        E(!plainish || !strstr(adv, "dataloader_num_workers"),
                          "no Trainer option names for a plain loop");
                        E(!plainish || ld->workers >= 8 || strstr(adv, "DataLoader(num_workers="),
                          "plain loops: DataLoader(num_workers=...)");
                        E(!strstr(adv, "find_unused") ||
                              strstr(adv, "ddp_find_unused_parameters is True"),
                          "find_unused only when known True");
                        /* the GPU rules need a GPU */
                        E(cuda || (!has_id(fs, "low_utilization") &&
                                   !has_id(fs, "attention_implementation") &&
                                   !has_id(fs, "precision") && !has_id(fs, "memory_fragmentation")),
                          "no GPU finding on a CPU run");
                        E(!cuda || (has_id(fs, "attention_implementation") &&
                                    has_id(fs, "precision") && has_id(fs, "imbalance")),
                          "CUDA A100, sdpa, float32: attention and precision findings");
                        E(!cuda || !swift || strstr(adv, "--attn_impl flash_attn"),
                          "ms-swift: --attn_impl flash_attn");
                        E(!cuda || !hf || strstr(adv, "attn_implementation=\"flash_attention_2\""),
                          "HF: attn_implementation=\"flash_attention_2\"");
                        E(!cuda || fw != 3 || strstr(adv, "DeepSpeed config"),
                          "DeepSpeed: bf16 in the DeepSpeed config");
                        E(!cuda || fw != 4 || strstr(adv, "mixed_precision"),
                          "accelerate: mixed_precision");
                        E(!has_id(fs, "healthy"), "never healthy here");
                        E(failed == has_id(fs, "run_failed"), "run_failed iff the run failed");
                        E(!failed || strcmp(json_string_value(
                                                json_object_get(json_array_get(fs, 0), "id")),
                                            "run_failed") == 0,
                          "run_failed comes first");
#undef E
                        json_decref(fs);
                        json_decref(r);
                    }
    assert_int_equal(cells, FW_N * 2 * 2 * 3 * 2);
    printf("# %d cells, %d checks\n", cells, checks);
}

/* A failed run is never healthy, even with healthy numbers. */
static void failed_never_healthy(void **state)
{
    json_t *r = json_pack("{s:f, s:f, s:f, s:f, s:i, s:i, s:{s:f, s:f}, s:[], s:{s:s, s:i, "
                          "s:i}}",
                          "data_loading_time_ratio", 0.01, "communication_time_ratio", 0.0,
                          "gpu_avg_utilization_percent", 85.0, "train_runtime", 100.0, "ranks", 1,
                          "steps", 30, "run", "start_time", 10.0, "end_time", 110.0, "gpus",
                          "outcome", "status", "failed", "exit_code", 1, "steps_completed", 30);
    json_t *fs = gs_diag_findings(r, 8);
    (void)state;

    assert_false(has_id(fs, "healthy"));
    assert_true(has_id(fs, "run_failed"));
    json_decref(fs);
    json_object_set_new(json_object_get(r, "outcome"), "status", json_string("completed"));
    json_object_set_new(json_object_get(r, "outcome"), "exit_code", json_integer(0));
    fs = gs_diag_findings(r, 8);
    assert_true(has_id(fs, "healthy"));
    assert_false(has_id(fs, "run_failed"));
    json_decref(fs);
    json_decref(r);
}

/* A CPU torch job that NVML lists on a shared GPU (facts without cuda_device_name): no
 * CUDA-only advice; the same report without a torch side is a CUDA run. An autocast run gets
 * no precision finding. */
static void shared_gpu_cpu_job(void **state)
{
    static char adv[16384];
    json_t *r = json_pack(
        "{s:f, s:f, s:f, s:i, s:i, s:{s:f, s:f}, s:[{s:i, s:s}], "
        "s:{s:s, s:i, s:i}, s:{s:s, s:i, s:s, s:i, s:b}}",
        "data_loading_time_ratio", 0.5, "communication_time_ratio", 0.2, "train_runtime", 100.0,
        "ranks", 2, "steps", 50, "run", "start_time", 10.0, "end_time", 110.0, "gpus", "index", 0,
        "name", "NVIDIA H100 80GB HBM3", "outcome", "status", "completed", "exit_code", 0,
        "steps_completed", 50, "facts", "torch_version", "1.13.0", "loader_num_workers", 2,
        "dist_backend", "gloo", "cpu_count", 16, "loader_pin_memory", 0);
    json_t *fs = gs_diag_findings(r, 16);
    (void)state;

    all_advice(fs, adv, sizeof adv);
    assert_null(strstr(adv, "pin_memory=True"));
    assert_null(strstr(adv, "gloo on a CUDA run"));
    json_decref(fs);
    json_object_del(json_object_get(r, "facts"), "torch_version");
    fs = gs_diag_findings(r, 16);
    all_advice(fs, adv, sizeof adv);
    assert_non_null(strstr(adv, "pin_memory=True"));
    json_decref(fs);
    /* float32 parameters on an H100, but under torch.autocast: no precision finding */
    json_object_set_new(json_object_get(r, "facts"), "param_dtype", json_string("float32"));
    fs = gs_diag_findings(r, 16);
    assert_true(has_id(fs, "precision"));
    json_decref(fs);
    json_object_set_new(json_object_get(r, "facts"), "autocast", json_true());
    fs = gs_diag_findings(r, 16);
    assert_false(has_id(fs, "precision"));
    json_decref(fs);
    json_decref(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(matrix),
        cmocka_unit_test(failed_never_healthy),
        cmocka_unit_test(shared_gpu_cpu_job),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
