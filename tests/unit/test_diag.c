/*
 * Unit tests for the diagnosis rules (src/diag/diag.c): each rule on both sides of its
 * threshold, over report objects built by hand, with the evidence and advice checked.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "diag/diag.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

/* A report no rule fires on: 60 % utilization, data 0.10, comm 0.01, one rank, no GPUs. */
static json_t *base(void)
{
    return json_pack("{s:f, s:f, s:f, s:f, s:i, s:s, s:{s:f, s:f}, s:[], s:{s:n, s:n, s:n}}",
                     "data_loading_time_ratio", 0.10, "communication_time_ratio", 0.01,
                     "gpu_avg_utilization_percent", 60.0, "train_runtime", 100.0, "ranks", 1,
                     "gpu_utilization_source", "nvml", "run", "start_time", 10.0, "end_time", 110.0,
                     "gpus", "allocator", "peak_reserved_gb", "fragmentation_gap_gb",
                     "memory_total_gb");
}

static void set(json_t *r, const char *key, double v)
{
    json_object_set_new(r, key, isnan(v) ? json_null() : json_real(v));
}

static json_t *gpu(int index, double util, double mem_peak, double mem_total)
{
    return json_pack("{s:i, s:o, s:o, s:o, s:{}, s:[]}", "index", index, "utilization_avg_percent",
                     isnan(util) ? json_null() : json_real(util), "memory_peak_bytes",
                     isnan(mem_peak) ? json_null() : json_real(mem_peak), "memory_total_bytes",
                     isnan(mem_total) ? json_null() : json_real(mem_total), "throttled_seconds",
                     "idle_periods");
}

/* The finding with this id in the findings of r (kept alive in *all), or NULL. */
static json_t *find(const json_t *r, long ncpu, const char *id, json_t **all)
{
    size_t i;
    json_t *f;

    json_decref(*all);
    *all = gs_diag_findings(r, ncpu);
    assert_non_null(*all);
    json_array_foreach(*all, i, f)
    {
        if (strcmp(json_string_value(json_object_get(f, "id")), id) == 0)
            return f;
    }
    return NULL;
}

static const char *severity(const json_t *f)
{
    return json_string_value(json_object_get(f, "severity"));
}

static double ev(const json_t *f, const char *key)
{
    return json_number_value(json_object_get(json_object_get(f, "evidence"), key));
}

static int advice_has(const json_t *f, const char *text)
{
    size_t i;
    json_t *a;

    json_array_foreach(json_object_get(f, "advice"), i, a)
    {
        if (strstr(json_string_value(a), text))
            return 1;
    }
    return 0;
}

static void base_is_quiet(void **state)
{
    json_t *r = base(), *all = gs_diag_findings(r, 8);
    (void)state;

    assert_int_equal(json_array_size(all), 0);
    json_decref(all);
    all = gs_diag_findings(json_null(), 8); /* not a report: nothing, no crash */
    assert_int_equal(json_array_size(all), 0);
    json_decref(all);
    json_decref(r);
}

static void data_loading(void **state)
{
    json_t *r = base(), *all = NULL, *f;
    (void)state;

    set(r, "data_loading_time_ratio", 0.15);
    assert_null(find(r, 16, "data_loading", &all));
    set(r, "data_loading_time_ratio", 0.151);
    f = find(r, 16, "data_loading", &all);
    assert_non_null(f);
    assert_string_equal(severity(f), "warning");
    assert_true(ev(f, "data_loading_time_ratio") == 0.151);
    assert_true(ev(f, "from") == 10.0 && ev(f, "to") == 110.0);
    assert_true(advice_has(f, "DataLoader(num_workers=8)"));
    assert_false(advice_has(f, "prefetch_factor")); /* workers unknown: not advised */
    assert_false(advice_has(f, "pin_memory"));      /* no CUDA in the base report */
    set(r, "data_loading_time_ratio", 0.30);
    assert_string_equal(severity(find(r, 16, "data_loading", &all)), "warning");
    set(r, "data_loading_time_ratio", 0.31);
    f = find(r, 0, "data_loading", &all);
    assert_string_equal(severity(f), "critical");
    assert_true(advice_has(f, "about half the CPU cores"));
    set(r, "data_loading_time_ratio", NAN);
    assert_null(find(r, 16, "data_loading", &all));
    json_decref(all);
    json_decref(r);
}

static void communication(void **state)
{
    json_t *r = base(), *all = NULL, *f;
    (void)state;

    set(r, "communication_time_ratio", 0.05);
    assert_null(find(r, 8, "communication", &all));
    set(r, "communication_time_ratio", 0.051);
    f = find(r, 8, "communication", &all);
    assert_non_null(f);
    assert_true(ev(f, "communication_time_ratio") == 0.051);
    assert_false(advice_has(f, "NCCL"));        /* backend unknown */
    assert_false(advice_has(f, "find_unused")); /* unknown: no claim */
    json_decref(all);
    json_decref(r);
}

static void low_utilization(void **state)
{
    json_t *r = base(), *all = NULL, *f, *g;
    (void)state;

    set(r, "gpu_avg_utilization_percent", 29.9);
    set(r, "train_runtime", 60);
    f = find(r, 8, "low_utilization", &all);
    assert_non_null(f);
    assert_true(ev(f, "gpu_avg_utilization_percent") == 29.9);
    assert_true(advice_has(f, "scaled_dot_product_attention"));
    set(r, "gpu_avg_utilization_percent", 30);
    assert_null(find(r, 8, "low_utilization", &all));
    set(r, "gpu_avg_utilization_percent", 29.9);
    set(r, "train_runtime", 59.9);
    assert_null(find(r, 8, "low_utilization", &all));
    set(r, "gpu_avg_utilization_percent", NAN);
    set(r, "train_runtime", 600);
    assert_null(find(r, 8, "low_utilization", &all));
    /* an idle period on GPU 3 is enough, whatever the average */
    set(r, "gpu_avg_utilization_percent", 80);
    g = gpu(3, 80, NAN, NAN);
    json_array_append_new(json_object_get(g, "idle_periods"),
                          json_pack("{s:f, s:f, s:f}", "from", 20.0, "to", 45.0, "seconds", 25.0));
    json_array_append_new(json_object_get(r, "gpus"), g);
    f = find(r, 8, "low_utilization", &all);
    assert_non_null(f);
    assert_true(ev(f, "idle_seconds") == 25.0);
    assert_int_equal(
        json_integer_value(json_object_get(
            json_array_get(json_object_get(json_object_get(f, "evidence"), "idle"), 0), "index")),
        3);
    json_decref(all);
    json_decref(r);
}

static void memory_fragmentation(void **state)
{
    json_t *r = base(), *all = NULL, *f;
    json_t *al;
    (void)state;

    json_array_append_new(json_object_get(r, "gpus"), gpu(1, 49, 72 * GIB, 80 * GIB));
    set(r, "gpu_avg_utilization_percent", 49);
    f = find(r, 8, "memory_fragmentation", &all); /* 72/80 = 0.90 exactly */
    assert_non_null(f);
    assert_true(ev(f, "memory_peak_fraction") == 0.9);
    assert_int_equal(json_integer_value(json_array_get(
                         json_object_get(json_object_get(f, "evidence"), "gpus"), 0)),
                     1);
    assert_false(advice_has(f, "--flash_attn"));
    assert_false(advice_has(f, "--use_cache")); /* no such ms-swift flag */
    assert_true(advice_has(f, "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"));
    set(r, "gpu_avg_utilization_percent", 50);
    assert_null(find(r, 8, "memory_fragmentation", &all));
    set(r, "gpu_avg_utilization_percent", 10);
    json_array_clear(json_object_get(r, "gpus"));
    json_array_append_new(json_object_get(r, "gpus"), gpu(1, 10, 71 * GIB, 80 * GIB));
    assert_null(find(r, 8, "memory_fragmentation", &all));
    /* the allocator gap: 4 of 10 GiB reserved is 0.40 */
    set(r, "gpu_avg_utilization_percent", 60);
    al = json_object_get(r, "allocator");
    set(al, "peak_reserved_gb", 10);
    set(al, "fragmentation_gap_gb", 4);
    f = find(r, 8, "memory_fragmentation", &all);
    assert_non_null(f);
    assert_true(ev(f, "fragmentation_gap_gb") == 4.0);
    set(al, "fragmentation_gap_gb", 3.9);
    assert_null(find(r, 8, "memory_fragmentation", &all));
    set(al, "peak_reserved_gb", 2); /* 0.9 of 2 GiB: a large fraction but under 1 GiB */
    set(al, "fragmentation_gap_gb", 0.9);
    assert_null(find(r, 8, "memory_fragmentation", &all));
    json_decref(all);
    json_decref(r);
}

static void imbalance(void **state)
{
    json_t *r = base(), *all = NULL, *f, *gpus = json_object_get(r, "gpus");
    (void)state;

    json_array_append_new(gpus, gpu(0, 90, NAN, NAN));
    assert_null(find(r, 8, "imbalance", &all)); /* one GPU: nothing to compare */
    json_array_append_new(gpus, gpu(1, 59.9, NAN, NAN));
    f = find(r, 8, "imbalance", &all);
    assert_non_null(f);
    assert_true(fabs(ev(f, "utilization_spread_points") - 30.1) < 1e-9);
    /* a plain loop (no framework in the report): FSDP, no HF loading option */
    assert_false(advice_has(f, "device_map"));
    assert_true(advice_has(f, "FullyShardedDataParallel"));
    assert_false(advice_has(f, "--deepspeed"));
    json_array_set_new(gpus, 1, gpu(1, 60, NAN, NAN));
    assert_null(find(r, 8, "imbalance", &all));
    json_array_clear(gpus);
    json_array_append_new(gpus, gpu(0, 80, 100 * GIB, NAN));
    json_array_append_new(gpus, gpu(1, 80, 59 * GIB, NAN));
    f = find(r, 8, "imbalance", &all);
    assert_non_null(f);
    assert_true(fabs(ev(f, "memory_spread_fraction") - 0.41) < 1e-9);
    json_array_set_new(gpus, 1, gpu(1, 80, 60 * GIB, NAN));
    assert_null(find(r, 8, "imbalance", &all));
    json_decref(all);
    json_decref(r);
}

static void throttling(void **state)
{
    json_t *r = base(), *all = NULL, *f, *g = gpu(2, 60, NAN, NAN);
    json_t *thr = json_object_get(g, "throttled_seconds");
    (void)state;

    json_array_append_new(json_object_get(r, "gpus"), g);
    set(thr, "hw_thermal", 0);
    set(thr, "sync_boost", 100); /* not thermal/power */
    assert_null(find(r, 8, "throttling", &all));
    set(thr, "hw_thermal", 0.5);
    f = find(r, 8, "throttling", &all);
    assert_non_null(f);
    assert_true(ev(f, "throttled_seconds") == 0.5);
    assert_int_equal(json_integer_value(json_array_get(
                         json_object_get(json_object_get(f, "evidence"), "gpus"), 0)),
                     2);
    assert_non_null(strstr(json_string_value(json_object_get(f, "title")), "GPU 2"));
    assert_true(advice_has(f, "cooling"));
    assert_false(advice_has(f, "power limit"));
    set(thr, "hw_thermal", 0);
    set(thr, "sw_power_cap", 12);
    f = find(r, 8, "throttling", &all);
    assert_true(advice_has(f, "power limit"));
    assert_false(advice_has(f, "cooling"));
    json_decref(all);
    json_decref(r);
}

static void healthy(void **state)
{
    json_t *r = base(), *all = NULL, *f;
    (void)state;

    set(r, "gpu_avg_utilization_percent", 85);
    set(r, "data_loading_time_ratio", 0.04);
    set(r, "communication_time_ratio", 0.02);
    f = find(r, 8, "healthy", &all);
    assert_non_null(f);
    assert_string_equal(severity(f), "info");
    set(r, "gpu_avg_utilization_percent", 90);
    assert_non_null(find(r, 8, "healthy", &all));
    set(r, "gpu_avg_utilization_percent", 90.1);
    assert_null(find(r, 8, "healthy", &all));
    set(r, "gpu_avg_utilization_percent", 79.9);
    assert_null(find(r, 8, "healthy", &all));
    set(r, "gpu_avg_utilization_percent", 80);
    assert_non_null(find(r, 8, "healthy", &all));
    set(r, "data_loading_time_ratio", 0.05);
    assert_null(find(r, 8, "healthy", &all));
    set(r, "data_loading_time_ratio", 0.04);
    set(r, "communication_time_ratio", 0.03);
    assert_null(find(r, 8, "healthy", &all));
    set(r, "communication_time_ratio", NAN); /* single rank: no communication to measure */
    assert_non_null(find(r, 8, "healthy", &all));
    json_object_set_new(r, "ranks", json_integer(2));
    assert_null(find(r, 8, "healthy", &all));
    json_decref(all);
    json_decref(r);
}

/* Sets r's "facts" (replacing them) from a json_pack format. */
static void facts(json_t *r, json_t *fx)
{
    assert_non_null(fx);
    json_object_set_new(r, "facts", fx);
}

static const char *ev_str(const json_t *f, const char *key)
{
    return json_string_value(json_object_get(json_object_get(f, "evidence"), key));
}

static void data_loading_names_settings(void **state)
{
    json_t *r = base(), *all = NULL, *f;
    (void)state;

    set(r, "data_loading_time_ratio", 0.5);
    /* the loader's own num_workers wins over the Trainer argument; a CPU run (no GPU in the
     * report, no CUDA fact): pin_memory is never advised there */
    facts(r, json_pack("{s:i, s:i, s:b, s:i}", "dataloader_num_workers", 4, "loader_num_workers", 0,
                       "loader_pin_memory", 0, "cpu_count", 16));
    json_object_set_new(r, "gpus", json_array());
    f = find(r, 0, "data_loading", &all);
    assert_non_null(f);
    assert_true(advice_has(f, "num_workers is 0 of 16 CPU core(s)"));
    assert_true(advice_has(f, "DataLoader(num_workers=8)"));
    assert_false(advice_has(f, "pin_memory"));
    assert_true(ev(f, "num_workers") == 0 && ev(f, "cpu_cores") == 16);
    /* facts.cpu_count beats the caller's ncpu */
    f = find(r, 64, "data_loading", &all);
    assert_true(advice_has(f, "DataLoader(num_workers=8)"));
    /* workers > 0 and prefetch 1: prefetch advised in the loader's spelling */
    facts(r, json_pack("{s:i, s:b, s:i, s:i}", "loader_num_workers", 2, "loader_pin_memory", 1,
                       "loader_prefetch_factor", 1, "cpu_count", 16));
    f = find(r, 0, "data_loading", &all);
    assert_true(advice_has(f, "num_workers is 2 of 16"));
    assert_true(advice_has(f, "prefetch_factor is 1: DataLoader(prefetch_factor=4)"));
    /* workers already half the cores: no claim that more cannot help, no raise */
    facts(r, json_pack("{s:i, s:i, s:i}", "loader_num_workers", 8, "loader_prefetch_factor", 4,
                       "cpu_count", 16));
    f = find(r, 0, "data_loading", &all);
    assert_false(advice_has(f, "prefetch_factor"));
    assert_false(advice_has(f, "will not help"));
    assert_true(advice_has(f, "if more workers do not lower data_loading_time_ratio"));
    assert_false(advice_has(f, "DataLoader(num_workers="));
    /* 2 cores and no workers: try one worker (2 workers cut 0.60 to 0.03 on such a machine),
     * never "too few" */
    facts(r, json_pack("{s:i, s:i}", "loader_num_workers", 0, "cpu_count", 2));
    f = find(r, 0, "data_loading", &all);
    assert_false(advice_has(f, "too few"));
    assert_true(advice_has(f, "DataLoader(num_workers=1)"));
    /* no workers: prefetch_factor never, whatever the loader reports */
    facts(r, json_pack("{s:i, s:i, s:i}", "loader_num_workers", 0, "loader_prefetch_factor", 2,
                       "cpu_count", 16));
    f = find(r, 0, "data_loading", &all);
    assert_false(advice_has(f, "prefetch_factor"));
    json_decref(all);
    json_decref(r);
}

static void communication_names_settings(void **state)
{
    json_t *r = base(), *all = NULL, *f;
    (void)state;

    set(r, "communication_time_ratio", 0.2);
    facts(r, json_pack("{s:b, s:s, s:s}", "ddp_find_unused_parameters", 0, "nccl_version", "2.21.5",
                       "dist_backend", "nccl"));
    f = find(r, 8, "communication", &all);
    assert_non_null(f);
    assert_false(advice_has(f, "ddp_find_unused_parameters"));
    assert_false(advice_has(f, "NCCL_IB_DISABLE"));
    assert_false(advice_has(f, "NCCL_P2P_DISABLE"));
    assert_true(advice_has(f, "(this run: NCCL 2.21.5)"));
    facts(r, json_pack("{s:b, s:s, s:s, s:s}", "ddp_find_unused_parameters", 1, "NCCL_IB_DISABLE",
                       "1", "NCCL_P2P_DISABLE", "1", "dist_backend", "nccl"));
    f = find(r, 8, "communication", &all);
    assert_true(advice_has(f, "ddp_find_unused_parameters is True: "
                              "DistributedDataParallel(find_unused_parameters=False)"));
    assert_true(advice_has(f, "NCCL_IB_DISABLE=1 is set"));
    assert_true(advice_has(f, "NCCL_P2P_DISABLE=1 is set"));
    /* gloo: no NCCL advice at all */
    facts(r, json_pack("{s:s, s:s}", "dist_backend", "gloo", "NCCL_IB_DISABLE", "1"));
    f = find(r, 8, "communication", &all);
    assert_false(advice_has(f, "NCCL"));
    assert_false(advice_has(f, "find_unused"));
    json_decref(all);
    json_decref(r);
}

/* A straggler (slowest_rank.straggler): its own finding with GPU, shard and host advice; the
 * communication finding blames it, not buckets; no_sync() only with gradient accumulation. */
static void straggler(void **state)
{
    json_t *r = base(), *all = NULL, *f, *g;
    (void)state;

    set(r, "communication_time_ratio", 0.3);
    json_object_set_new(r, "ranks", json_integer(2));
    f = find(r, 8, "communication", &all);
    assert_true(advice_has(f, "bucket_cap_mb=100)"));
    assert_false(advice_has(f, "no_sync"));
    assert_null(find(r, 8, "straggler", &all));
    facts(r, json_pack("{s:i}", "gradient_accumulation_steps", 4));
    f = find(r, 8, "communication", &all);
    assert_true(advice_has(f, "model.no_sync() on gradient-accumulation micro-steps"));
    /* a rank computing longest but under the threshold: no straggler */
    json_object_set_new(r, "slowest_rank",
                        json_pack("{s:i, s:b, s:f, s:f, s:f, s:f}", "rank", 1, "straggler", 0,
                                  "busy_p50_ms", 105.0, "others_busy_p50_ms", 100.0,
                                  "slower_by_ratio", 0.05, "others_comm_wait_p50_ms", 5.0));
    assert_null(find(r, 8, "straggler", &all));
    g = gpu(1, 90, NAN, NAN);
    json_object_set_new(g, "throttled_seconds_total", json_real(12.5));
    json_object_set_new(r, "slowest_rank",
                        json_pack("{s:i, s:b, s:f, s:f, s:f, s:f, s:f, s:o}", "rank", 1,
                                  "straggler", 1, "busy_p50_ms", 148.0, "others_busy_p50_ms", 100.0,
                                  "slower_by_ratio", 0.48, "others_comm_wait_p50_ms", 42.0,
                                  "threshold_ratio", 1.15, "gpu", g));
    f = find(r, 8, "straggler", &all);
    assert_non_null(f);
    assert_string_equal(severity(f), "warning");
    assert_non_null(
        strstr(json_string_value(json_object_get(f, "title")), "Rank 1 computes 48% longer"));
    assert_true(ev(f, "others_comm_wait_p50_ms") == 42.0);
    assert_true(advice_has(f, "Its GPU 1 was held down 12.5 s"));
    assert_true(advice_has(f, "data shard"));
    assert_true(advice_has(f, "host"));
    f = find(r, 8, "communication", &all);
    assert_true(advice_has(f, "waiting for rank 1, which computes 48 % longer"));
    assert_false(advice_has(f, "bucket_cap_mb"));
    assert_false(advice_has(f, "no_sync"));
    json_decref(all);
    json_decref(r);
}

static void attention_implementation(void **state)
{
    json_t *r = base(), *all = NULL, *f;
    (void)state;

    /* base: 60 % utilization, below 70 */
    facts(r, json_pack("{s:s, s:s}", "attn_implementation", "sdpa", "cuda_device_name",
                       "NVIDIA A100-SXM4-80GB"));
    f = find(r, 8, "attention_implementation", &all);
    assert_non_null(f);
    assert_string_equal(ev_str(f, "attn_implementation"), "sdpa");
    assert_true(advice_has(f, "attn_implementation is \"sdpa\""));
    assert_false(advice_has(f, "--attn_impl")); /* a plain loop: no ms-swift flag */
    assert_false(advice_has(f, "--flash_attn"));
    set(r, "gpu_avg_utilization_percent", 70.0);
    assert_null(find(r, 8, "attention_implementation", &all));
    set(r, "gpu_avg_utilization_percent", 69.9);
    assert_non_null(find(r, 8, "attention_implementation", &all));
    /* already flash: silent, and low_utilization stops advising it */
    facts(r, json_pack("{s:s, s:s}", "attn_implementation", "flash_attention_2", "cuda_device_name",
                       "NVIDIA H100 80GB HBM3"));
    assert_null(find(r, 8, "attention_implementation", &all));
    set(r, "gpu_avg_utilization_percent", 20.0);
    f = find(r, 8, "low_utilization", &all);
    assert_non_null(f);
    assert_false(advice_has(f, "FlashAttention-2"));
    /* an older GPU: silent; an unknown one: advised with the caveat */
    facts(r, json_pack("{s:s, s:s}", "attn_implementation", "eager", "cuda_device_name",
                       "Tesla V100-SXM2-32GB"));
    assert_null(find(r, 8, "attention_implementation", &all));
    facts(r, json_pack("{s:s}", "attn_implementation", "eager"));
    f = find(r, 8, "attention_implementation", &all);
    assert_non_null(f);
    assert_true(advice_has(f, "needs an Ampere or newer GPU"));
    /* the GPU name from the report's gpus when the facts lack it */
    json_array_append_new(json_object_get(r, "gpus"),
                          json_pack("{s:i, s:s}", "index", 0, "name", "NVIDIA L40S"));
    f = find(r, 8, "attention_implementation", &all);
    assert_string_equal(ev_str(f, "gpu_name"), "NVIDIA L40S");
    assert_false(advice_has(f, "needs an Ampere"));
    /* attention unknown: silent */
    facts(r, json_pack("{s:s}", "cuda_device_name", "NVIDIA A100"));
    assert_null(find(r, 8, "attention_implementation", &all));
    json_decref(all);
    json_decref(r);
}

static void attention_when_memory_full(void **state)
{
    json_t *r = base(), *all = NULL;
    (void)state;

    set(r, "gpu_avg_utilization_percent", 90.0);
    facts(r, json_pack("{s:s, s:s}", "attn_implementation", "eager", "cuda_device_name",
                       "NVIDIA H200"));
    json_array_append_new(json_object_get(r, "gpus"), gpu(0, 90.0, 0.89 * GIB, GIB));
    assert_null(find(r, 8, "attention_implementation", &all));
    json_array_clear(json_object_get(r, "gpus"));
    json_array_append_new(json_object_get(r, "gpus"), gpu(0, 90.0, 0.95 * GIB, GIB));
    assert_non_null(find(r, 8, "attention_implementation", &all));
    json_decref(all);
    json_decref(r);
}

static void precision(void **state)
{
    json_t *r = base(), *all = NULL, *f;
    (void)state;

    facts(r, json_pack("{s:s, s:b, s:s}", "param_dtype", "float32", "bf16", 0, "cuda_device_name",
                       "NVIDIA A100-SXM4-40GB"));
    f = find(r, 8, "precision", &all);
    assert_non_null(f);
    assert_string_equal(severity(f), "info");
    assert_true(advice_has(f, "parameters are float32"));
    assert_true(advice_has(f, "torch.autocast")); /* a plain loop's spelling */
    assert_false(advice_has(f, "--bf16"));
    /* bf16 on, fp16 on, bf16 params, an older GPU, no GPU: silent */
    facts(r, json_pack("{s:s, s:b, s:s}", "param_dtype", "float32", "bf16", 1, "cuda_device_name",
                       "NVIDIA A100"));
    assert_null(find(r, 8, "precision", &all));
    facts(r, json_pack("{s:s, s:b, s:s}", "param_dtype", "float32", "fp16", 1, "cuda_device_name",
                       "NVIDIA A100"));
    assert_null(find(r, 8, "precision", &all));
    facts(r, json_pack("{s:s, s:s}", "param_dtype", "bfloat16", "cuda_device_name", "NVIDIA A100"));
    assert_null(find(r, 8, "precision", &all));
    facts(r, json_pack("{s:s, s:s}", "param_dtype", "float32", "cuda_device_name", "Tesla T4"));
    assert_null(find(r, 8, "precision", &all));
    facts(r, json_pack("{s:s}", "param_dtype", "float32"));
    assert_null(find(r, 8, "precision", &all));
    /* dtype unknown: bf16 False said explicitly is enough */
    facts(r, json_pack("{s:b, s:s}", "bf16", 0, "cuda_device_name", "NVIDIA GeForce RTX 4090"));
    f = find(r, 8, "precision", &all);
    assert_non_null(f);
    assert_true(advice_has(f, "bf16 is False"));
    facts(r, json_pack("{s:s}", "cuda_device_name", "NVIDIA GeForce RTX 4090"));
    assert_null(find(r, 8, "precision", &all));
    json_decref(all);
    json_decref(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(base_is_quiet),
        cmocka_unit_test(data_loading),
        cmocka_unit_test(communication),
        cmocka_unit_test(low_utilization),
        cmocka_unit_test(memory_fragmentation),
        cmocka_unit_test(imbalance),
        cmocka_unit_test(throttling),
        cmocka_unit_test(healthy),
        cmocka_unit_test(data_loading_names_settings),
        cmocka_unit_test(communication_names_settings),
        cmocka_unit_test(straggler),
        cmocka_unit_test(attention_implementation),
        cmocka_unit_test(attention_when_memory_full),
        cmocka_unit_test(precision),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
