/*
 * diag.c - the diagnosis rules (diag.h): one table of rules, each a function from the run report
 * to one finding or nothing. The thresholds are the brief's (document 000, "Diagnosis rules"),
 * each a named constant below and listed in docs/report.md.
 *
 * The report is read once into struct diag_in so that each rule reads like its condition. A
 * rule whose inputs are null (not measured) stays silent: no finding is ever built on an
 * unknown number. Every finding carries the numbers it used, the GPUs concerned and the time
 * range, so that a reader can check the claim against the report.
 */
#include "diag/diag.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define GS_DIAG_DATA_RATIO_WARN 0.15     /* data_loading: warning above */
#define GS_DIAG_DATA_RATIO_CRIT 0.30     /* data_loading: critical above */
#define GS_DIAG_COMM_RATIO_WARN 0.05     /* communication: warning above */
#define GS_DIAG_LOW_UTIL_PCT 30.0        /* low_utilization: avg below ... */
#define GS_DIAG_LOW_UTIL_MIN_RUN_S 60.0  /* ... over a run at least this long */
#define GS_DIAG_MEM_FULL_FRAC 0.90       /* memory_fragmentation: peak/total at least */
#define GS_DIAG_MEM_FULL_UTIL_PCT 50.0   /* ... while avg utilization below */
#define GS_DIAG_FRAG_GAP_MIN_GB 1.0      /* or allocator reserved-allocated gap at least */
#define GS_DIAG_FRAG_GAP_FRAC 0.40       /* ... and at least this fraction of reserved */
#define GS_DIAG_IMBAL_UTIL_PTS 30.0      /* imbalance: max-min avg utilization above */
#define GS_DIAG_IMBAL_MEM_FRAC 0.40      /* or (max-min)/max memory peak above */
#define GS_DIAG_THROTTLE_MIN_S 0.0       /* throttling: thermal/power seconds above */
#define GS_DIAG_HEALTHY_UTIL_PCT 85.0    /* healthy: utilization within ... */
#define GS_DIAG_HEALTHY_UTIL_TOL 5.0     /* ... +- this, */
#define GS_DIAG_HEALTHY_DATA_RATIO 0.05  /* data ratio below, */
#define GS_DIAG_HEALTHY_COMM_RATIO 0.03  /* communication ratio below */

#define GIB (1024.0 * 1024.0 * 1024.0)

struct diag_in {
    long ncpu;
    double data, comm, util_avg, runtime;
    const char *util_src;
    long ranks;
    double from, to;
    const json_t *gpus;
    double peak_reserved_gb, gap_gb, alloc_total_gb;
};

static double num(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static void diag_read(const json_t *rep, long ncpu, struct diag_in *in)
{
    const json_t *run = json_object_get(rep, "run"), *al = json_object_get(rep, "allocator");
    double ranks = num(rep, "ranks");

    in->ncpu = ncpu;
    in->data = num(rep, "data_loading_time_ratio");
    in->comm = num(rep, "communication_time_ratio");
    in->util_avg = num(rep, "gpu_avg_utilization_percent");
    in->runtime = num(rep, "train_runtime");
    in->util_src = json_string_value(json_object_get(rep, "gpu_utilization_source"));
    in->ranks = isnan(ranks) ? 0 : (long)ranks;
    in->from = num(run, "start_time");
    in->to = num(run, "end_time");
    in->gpus = json_object_get(rep, "gpus");
    in->peak_reserved_gb = num(al, "peak_reserved_gb");
    in->gap_gb = num(al, "fragmentation_gap_gb");
    in->alloc_total_gb = num(al, "memory_total_gb");
}

static json_t *jnum(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

/* A finding with an empty evidence object (time range filled) and an empty advice list. */
static json_t *finding(const struct diag_in *in, const char *id, const char *severity,
                       const char *fmt, ...)
{
    json_t *f = json_object(), *ev = json_object();
    char title[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(title, sizeof title, fmt, ap);
    va_end(ap);
    json_object_set_new(f, "id", json_string(id));
    json_object_set_new(f, "severity", json_string(severity));
    json_object_set_new(f, "title", json_string(title));
    json_object_set_new(ev, "from", jnum(in->from));
    json_object_set_new(ev, "to", jnum(in->to));
    json_object_set_new(f, "evidence", ev);
    json_object_set_new(f, "advice", json_array());
    return f;
}

static void evidence(json_t *f, const char *key, json_t *v)
{
    json_object_set_new(json_object_get(f, "evidence"), key, v);
}

static void advise(json_t *f, const char *fmt, ...)
{
    char line[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    json_array_append_new(json_object_get(f, "advice"), json_string(line));
}

/* Indices of every GPU in the report (the run's GPUs). */
static json_t *all_gpus(const struct diag_in *in)
{
    json_t *arr = json_array();
    size_t i;
    const json_t *g;

    json_array_foreach(in->gpus, i, g) {
        json_array_append_new(arr, json_integer((json_int_t)num(g, "index")));
    }
    return arr;
}

/* ---- the rules ---- */

static json_t *rule_data_loading(const struct diag_in *in)
{
    json_t *f;

    if (!(in->data > GS_DIAG_DATA_RATIO_WARN))
        return NULL;
    f = finding(in, "data_loading", in->data > GS_DIAG_DATA_RATIO_CRIT ? "critical" : "warning",
                "Data loading is %.0f%% of each step", 100.0 * in->data);
    evidence(f, "data_loading_time_ratio", json_real(in->data));
    evidence(f, "threshold", json_real(GS_DIAG_DATA_RATIO_WARN));
    evidence(f, "cpu_cores", in->ncpu > 0 ? json_integer(in->ncpu) : json_null());
    evidence(f, "gpus", all_gpus(in));
    if (in->ncpu > 1)
        advise(f, "Raise dataloader_num_workers to about %ld (half of %ld cores; "
                  "DataLoader(num_workers=%ld) in plain PyTorch)",
               in->ncpu / 2, in->ncpu, in->ncpu / 2);
    else
        advise(f, "Raise dataloader_num_workers to about half the CPU cores "
                  "(DataLoader(num_workers=...) in plain PyTorch)");
    advise(f, "Set dataloader_prefetch_factor (DataLoader prefetch_factor) to 2-4 so the next "
              "batches are ready before the step asks");
    advise(f, "Set dataloader_pin_memory True (DataLoader pin_memory=True) for faster "
              "host-to-device copies");
    advise(f, "Pre-process the dataset once (tokenize / augment ahead, e.g. datasets.map) "
              "instead of in every step");
    return f;
}

static json_t *rule_communication(const struct diag_in *in)
{
    json_t *f;

    if (!(in->comm > GS_DIAG_COMM_RATIO_WARN))
        return NULL;
    f = finding(in, "communication", "warning", "Communication is %.0f%% of each step",
                100.0 * in->comm);
    evidence(f, "communication_time_ratio", json_real(in->comm));
    evidence(f, "threshold", json_real(GS_DIAG_COMM_RATIO_WARN));
    evidence(f, "ranks", json_integer(in->ranks));
    evidence(f, "gpus", all_gpus(in));
    advise(f, "Check the NCCL configuration: NCCL_DEBUG=INFO shows the transport in use; "
              "NCCL_IB_DISABLE=1 forces sockets (only when InfiniBand is broken); use a current "
              "NCCL version");
    advise(f, "Set ddp_find_unused_parameters False (DistributedDataParallel("
              "find_unused_parameters=False)) when every parameter gets a gradient");
    advise(f, "Bucket gradients to overlap communication with backward: ddp_bucket_cap_mb "
              "(e.g. 100); gradient_accumulation_steps communicates less often");
    return f;
}

static json_t *idle_gpus(const struct diag_in *in, double *idle_s, size_t *n_periods)
{
    json_t *arr = json_array();
    size_t i, j;
    const json_t *g, *p;

    *idle_s = 0;
    *n_periods = 0;
    json_array_foreach(in->gpus, i, g) {
        const json_t *periods = json_object_get(g, "idle_periods");
        if (!json_array_size(periods))
            continue;
        json_t *e = json_object();
        json_object_set_new(e, "index", json_integer((json_int_t)num(g, "index")));
        json_object_set_new(e, "idle_periods", json_deep_copy(periods));
        json_array_append_new(arr, e);
        json_array_foreach(periods, j, p) {
            double s = num(p, "seconds");
            *idle_s += isnan(s) ? 0 : s;
            (*n_periods)++;
        }
    }
    return arr;
}

static json_t *rule_low_utilization(const struct diag_in *in)
{
    int low = in->util_avg < GS_DIAG_LOW_UTIL_PCT && in->runtime >= GS_DIAG_LOW_UTIL_MIN_RUN_S;
    double idle_s;
    size_t n_idle;
    json_t *idle = idle_gpus(in, &idle_s, &n_idle), *f;

    if (!low && n_idle == 0) {
        json_decref(idle);
        return NULL;
    }
    if (low)
        f = finding(in, "low_utilization", "warning",
                    "GPU utilization averages %.0f%% over %.0f s", in->util_avg, in->runtime);
    else
        f = finding(in, "low_utilization", "warning",
                    "GPU sat idle %zu time(s), %.0f s in all, while holding memory", n_idle,
                    idle_s);
    evidence(f, "gpu_avg_utilization_percent", jnum(in->util_avg));
    evidence(f, "gpu_utilization_source", in->util_src ? json_string(in->util_src) : json_null());
    evidence(f, "train_runtime", jnum(in->runtime));
    evidence(f, "threshold_percent", json_real(GS_DIAG_LOW_UTIL_PCT));
    evidence(f, "idle_seconds", json_real(idle_s));
    evidence(f, "idle", idle);
    evidence(f, "gpus", all_gpus(in));
    advise(f, "Check data_loading_time_ratio and communication_time_ratio first: a GPU waiting "
              "for input or for its peers shows there");
    advise(f, "Enable FlashAttention-2 (--attn_impl flash_attn, HF attn_implementation="
              "\"flash_attention_2\") and bf16 (--torch_dtype bfloat16) on A100/H100");
    advise(f, "Give each step more work: raise per_device_train_batch_size while memory allows");
    if (n_idle)
        advise(f, "Idle periods with memory held point at evaluation, checkpoint saving or a "
                  "rank waiting for others: compare their times with eval_steps / save_steps");
    return f;
}

/* Highest fraction of memory in use on any GPU (NVML), or from the allocator's reserved peak. */
static double mem_full_frac(const struct diag_in *in, json_t *gpus_out)
{
    double best = NAN;
    size_t i;
    const json_t *g;

    json_array_foreach(in->gpus, i, g) {
        double peak = num(g, "memory_peak_bytes"), total = num(g, "memory_total_bytes");
        if (!(total > 0) || isnan(peak))
            continue;
        if (peak / total >= GS_DIAG_MEM_FULL_FRAC)
            json_array_append_new(gpus_out, json_integer((json_int_t)num(g, "index")));
        if (isnan(best) || peak / total > best)
            best = peak / total;
    }
    if (in->alloc_total_gb > 0 && in->peak_reserved_gb >= 0) {
        double f = in->peak_reserved_gb / in->alloc_total_gb;
        if (isnan(best) || f > best)
            best = f;
    }
    return best;
}

static json_t *rule_memory_fragmentation(const struct diag_in *in)
{
    json_t *gpus = json_array(), *f;
    double full = mem_full_frac(in, gpus);
    int a = full >= GS_DIAG_MEM_FULL_FRAC && in->util_avg < GS_DIAG_MEM_FULL_UTIL_PCT;
    int b = in->gap_gb >= GS_DIAG_FRAG_GAP_MIN_GB && in->peak_reserved_gb > 0 &&
            in->gap_gb / in->peak_reserved_gb >= GS_DIAG_FRAG_GAP_FRAC;

    if (!a && !b) {
        json_decref(gpus);
        return NULL;
    }
    if (a)
        f = finding(in, "memory_fragmentation", "warning",
                    "GPU memory %.0f%% full while utilization averages %.0f%%", 100.0 * full,
                    in->util_avg);
    else
        f = finding(in, "memory_fragmentation", "warning",
                    "Allocator holds %.1f GiB reserved but unallocated at peak", in->gap_gb);
    evidence(f, "memory_peak_fraction", jnum(full));
    evidence(f, "gpu_avg_utilization_percent", jnum(in->util_avg));
    evidence(f, "peak_reserved_gb", jnum(in->peak_reserved_gb));
    evidence(f, "fragmentation_gap_gb", jnum(in->gap_gb));
    evidence(f, "gpus", json_array_size(gpus) ? gpus : (json_decref(gpus), all_gpus(in)));
    advise(f, "Use FlashAttention (--flash_attn True; --attn_impl flash_attn in newer ms-swift) "
              "to cut attention memory on long sequences");
    advise(f, "Turn off the KV cache in training (--use_cache False)");
    advise(f, "Let the allocator grow segments instead of splitting them: "
              "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");
    return f;
}

static json_t *rule_imbalance(const struct diag_in *in)
{
    double umin = NAN, umax = NAN, mmin = NAN, mmax = NAN;
    unsigned nu = 0, nm = 0;
    size_t i;
    const json_t *g;
    int by_util, by_mem;
    json_t *f, *per = json_array();

    json_array_foreach(in->gpus, i, g) {
        double u = num(g, "utilization_avg_percent"), m = num(g, "memory_peak_bytes");
        json_t *e = json_object();
        json_object_set_new(e, "index", json_integer((json_int_t)num(g, "index")));
        json_object_set_new(e, "utilization_avg_percent", jnum(u));
        json_object_set_new(e, "memory_peak_gb", isnan(m) ? json_null() : json_real(m / GIB));
        json_array_append_new(per, e);
        if (!isnan(u)) {
            umin = nu ? fmin(umin, u) : u;
            umax = nu ? fmax(umax, u) : u;
            nu++;
        }
        if (!isnan(m)) {
            mmin = nm ? fmin(mmin, m) : m;
            mmax = nm ? fmax(mmax, m) : m;
            nm++;
        }
    }
    by_util = nu >= 2 && umax - umin > GS_DIAG_IMBAL_UTIL_PTS;
    by_mem = nm >= 2 && mmax > 0 && (mmax - mmin) / mmax > GS_DIAG_IMBAL_MEM_FRAC;
    if (!by_util && !by_mem) {
        json_decref(per);
        return NULL;
    }
    if (by_util)
        f = finding(in, "imbalance", "warning",
                    "GPUs of this run differ by %.0f points of utilization", umax - umin);
    else
        f = finding(in, "imbalance", "warning", "GPU memory peaks of this run differ by %.0f%%",
                    100.0 * (mmax - mmin) / mmax);
    evidence(f, "utilization_spread_points", nu >= 2 ? json_real(umax - umin) : json_null());
    evidence(f, "memory_spread_fraction", nm >= 2 && mmax > 0 ? json_real((mmax - mmin) / mmax)
                                                              : json_null());
    evidence(f, "per_gpu", per);
    evidence(f, "gpus", all_gpus(in));
    advise(f, "Spread model layers evenly: device_map=\"auto\" (or max_memory per GPU) for "
              "model-parallel loading");
    advise(f, "Shard parameters, gradients and optimizer state across GPUs: DeepSpeed ZeRO-3 "
              "(--deepspeed zero3) or FSDP");
    advise(f, "Give every rank equal work: same per-device batch size, group_by_length for "
              "variable-length samples");
    return f;
}

static json_t *rule_throttling(const struct diag_in *in)
{
    static const char *const reasons[] = {"sw_power_cap", "hw_slowdown", "sw_thermal",
                                          "hw_thermal", "hw_power_brake"};
    json_t *per = json_array(), *gpus = json_array(), *f;
    double worst = 0, total = 0;
    long worst_gpu = -1;
    int thermal = 0, power = 0;
    size_t i;
    const json_t *g;

    json_array_foreach(in->gpus, i, g) {
        const json_t *thr = json_object_get(g, "throttled_seconds");
        json_t *e = NULL;
        for (size_t r = 0; r < sizeof reasons / sizeof reasons[0]; r++) {
            double s = num(thr, reasons[r]);
            if (!(s > GS_DIAG_THROTTLE_MIN_S))
                continue;
            if (!e) {
                e = json_object();
                json_object_set_new(e, "index", json_integer((json_int_t)num(g, "index")));
                json_array_append_new(gpus, json_integer((json_int_t)num(g, "index")));
            }
            json_object_set_new(e, reasons[r], json_real(s));
            total += s;
            if (s > worst) {
                worst = s;
                worst_gpu = (long)num(g, "index");
            }
            if (strstr(reasons[r], "thermal") || strcmp(reasons[r], "hw_slowdown") == 0)
                thermal = 1;
            if (strstr(reasons[r], "power"))
                power = 1;
        }
        if (e)
            json_array_append_new(per, e);
    }
    if (!json_array_size(per)) {
        json_decref(per);
        json_decref(gpus);
        return NULL;
    }
    f = finding(in, "throttling", "warning", "GPU %ld throttled %.0f s during the run (%zu GPU(s))",
                worst_gpu, worst, json_array_size(gpus));
    evidence(f, "throttled_seconds", json_real(total));
    evidence(f, "per_gpu", per);
    evidence(f, "gpus", gpus);
    if (thermal)
        advise(f, "Thermal slowdown: check cooling, airflow and fan speed "
                  "(nvidia-smi -q -d TEMPERATURE,PERFORMANCE)");
    if (power)
        advise(f, "Power cap reached: check the power limit (nvidia-smi -q -d POWER); raise it "
                  "with nvidia-smi -pl where the supply allows, or expect lower clocks");
    return f;
}

static json_t *rule_healthy(const struct diag_in *in)
{
    int comm_ok = in->comm < GS_DIAG_HEALTHY_COMM_RATIO || (isnan(in->comm) && in->ranks <= 1);
    json_t *f;

    if (!(fabs(in->util_avg - GS_DIAG_HEALTHY_UTIL_PCT) <= GS_DIAG_HEALTHY_UTIL_TOL) ||
        !(in->data < GS_DIAG_HEALTHY_DATA_RATIO) || !comm_ok)
        return NULL;
    f = finding(in, "healthy", "info", "Pipeline looks healthy: %.0f%% GPU utilization, data "
                "loading %.1f%% of each step", in->util_avg, 100.0 * in->data);
    evidence(f, "gpu_avg_utilization_percent", json_real(in->util_avg));
    evidence(f, "data_loading_time_ratio", json_real(in->data));
    evidence(f, "communication_time_ratio", jnum(in->comm));
    evidence(f, "gpus", all_gpus(in));
    advise(f, "Nothing to change; keep this configuration as the reference for later runs");
    return f;
}

static const struct {
    const char *id;
    json_t *(*rule)(const struct diag_in *in);
} rules[] = {
    {"data_loading", rule_data_loading},
    {"communication", rule_communication},
    {"low_utilization", rule_low_utilization},
    {"memory_fragmentation", rule_memory_fragmentation},
    {"imbalance", rule_imbalance},
    {"throttling", rule_throttling},
    {"healthy", rule_healthy},
};

json_t *gs_diag_findings(const json_t *report, long ncpu)
{
    json_t *out = json_array();
    struct diag_in in;

    if (!out || !json_is_object(report))
        return out;
    diag_read(report, ncpu, &in);
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
        json_t *f = rules[i].rule(&in);
        if (f)
            json_array_append_new(out, f);
    }
    return out;
}
