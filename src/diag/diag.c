/*
 * diag.c - the diagnosis rules (diag.h): one table of rules, each a function from the run report
 * to one finding or nothing. The thresholds are the brief's (document 000, "Diagnosis rules"),
 * each a named constant below and listed in docs/report.md. The advice names the run's own
 * settings when the training side sent them (the report's "facts"): the current value of the
 * option to change, and only the options that are not already right.
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
#define GS_DIAG_FEW_CORES 2              /* data_loading: at most this many cores is "few" */
#define GS_DIAG_PREFETCH_MIN 2           /* data_loading: prefetch_factor advised range ... */
#define GS_DIAG_PREFETCH_MAX 4           /* ... up to this */
#define GS_DIAG_ATTN_UTIL_PCT 70.0       /* attention_implementation: avg utilization below */

#define GIB (1024.0 * 1024.0 * 1024.0)

/* The run's settings from the report's "facts" (docs/report.md); -1 / NULL = unknown. */
struct diag_facts {
    long workers;            /* the DataLoader's num_workers, else dataloader_num_workers */
    int pin_memory;          /* 0 / 1 / -1 */
    long prefetch;           /* prefetch_factor */
    int find_unused;         /* ddp_find_unused_parameters: 0 / 1 / -1 */
    int bf16, fp16;          /* 0 / 1 / -1 */
    const char *attn;        /* "eager", "sdpa", "flash_attention_2", ... */
    const char *param_dtype; /* "float32", "bfloat16", ... */
    const char *gpu_name;    /* cuda_device_name, else the first GPU of the report */
    const char *ib_disable, *p2p_disable; /* NCCL_IB_DISABLE / NCCL_P2P_DISABLE as set */
    const char *nccl_version;
    int known;               /* the report has facts: an absent NCCL_* variable was not set */
};

struct diag_in {
    long ncpu;
    struct diag_facts fx;
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

static long fact_int(const json_t *fx, const char *key)
{
    json_t *v = json_object_get(fx, key);
    return json_is_integer(v) && json_integer_value(v) >= 0 ? (long)json_integer_value(v) : -1;
}

static int fact_bool(const json_t *fx, const char *key)
{
    json_t *v = json_object_get(fx, key);
    return json_is_boolean(v) ? json_is_true(v) : -1;
}

static const char *fact_str(const json_t *fx, const char *key)
{
    const char *s = json_string_value(json_object_get(fx, key));
    return s && *s ? s : NULL;
}

/* The DataLoader the run iterated is the truth; the Trainer's arguments are what it was built
 * from, so they only stand in when the loader was not seen. */
static void diag_read_facts(const json_t *rep, struct diag_in *in)
{
    const json_t *fx = json_object_get(rep, "facts");
    struct diag_facts *f = &in->fx;
    long cpus = fact_int(fx, "cpu_count");

    f->workers = fact_int(fx, "loader_num_workers");
    if (f->workers < 0)
        f->workers = fact_int(fx, "dataloader_num_workers");
    f->pin_memory = fact_bool(fx, "loader_pin_memory");
    if (f->pin_memory < 0)
        f->pin_memory = fact_bool(fx, "dataloader_pin_memory");
    /* without worker processes prefetch_factor does not apply (older torch still reports 2) */
    f->prefetch = fact_int(fx, "loader_prefetch_factor");
    if (f->prefetch < 0)
        f->prefetch = fact_int(fx, "dataloader_prefetch_factor");
    if (f->workers == 0)
        f->prefetch = -1;
    f->find_unused = fact_bool(fx, "ddp_find_unused_parameters");
    f->bf16 = fact_bool(fx, "bf16");
    f->fp16 = fact_bool(fx, "fp16");
    f->attn = fact_str(fx, "attn_implementation");
    f->param_dtype = fact_str(fx, "param_dtype");
    f->gpu_name = fact_str(fx, "cuda_device_name");
    if (!f->gpu_name)
        f->gpu_name = fact_str(json_array_get(in->gpus, 0), "name");
    f->ib_disable = fact_str(fx, "NCCL_IB_DISABLE");
    f->p2p_disable = fact_str(fx, "NCCL_P2P_DISABLE");
    f->nccl_version = fact_str(fx, "nccl_version");
    f->known = json_object_size(fx) > 0;
    /* The training process's own CPU set beats the machine the report is read on. */
    if (cpus > 0)
        in->ncpu = cpus;
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
    diag_read_facts(rep, in);
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

/* "dataloader_num_workers is 0 (DataLoader(num_workers=0))", or the generic name. */
static void workers_advice(json_t *f, const struct diag_in *in)
{
    long w = in->fx.workers, n = in->ncpu, want = n / 2;
    char now[128] = "";

    if (w >= 0)
        snprintf(now, sizeof now, "dataloader_num_workers is %ld (DataLoader(num_workers=%ld)): ",
                 w, w);
    if (n > 0 && n <= GS_DIAG_FEW_CORES)
        advise(f, "%sthis machine gives the run only %ld CPU core(s), too few to raise "
                  "dataloader_num_workers: pre-process the dataset ahead of training, or run on "
                  "a machine with more cores", now, n);
    else if (n > 0 && w >= want)
        advise(f, "%salready half or more of %ld cores: more workers will not help; make each "
                  "sample cheaper (pre-process) or give the run more cores", now, n);
    else if (n > 0)
        advise(f, "%sraise dataloader_num_workers to about %ld of %ld cores "
                  "(DataLoader(num_workers=%ld) in plain PyTorch)", now, want, n, want);
    else
        advise(f, "%sraise dataloader_num_workers to about half the CPU cores "
                  "(DataLoader(num_workers=...) in plain PyTorch)", now);
}

static void prefetch_pin_advice(json_t *f, const struct diag_in *in)
{
    long p = in->fx.prefetch;

    if (p >= GS_DIAG_PREFETCH_MIN && p <= GS_DIAG_PREFETCH_MAX)
        advise(f, "prefetch_factor is %ld, already in the %d-%d range", p, GS_DIAG_PREFETCH_MIN,
               GS_DIAG_PREFETCH_MAX);
    else if (p >= 0)
        advise(f, "prefetch_factor is %ld: set dataloader_prefetch_factor (DataLoader "
                  "prefetch_factor) to %d-%d", p, GS_DIAG_PREFETCH_MIN, GS_DIAG_PREFETCH_MAX);
    else
        advise(f, "Set dataloader_prefetch_factor (DataLoader prefetch_factor) to %d-%d so the "
                  "next batches are ready before the step asks (it needs num_workers > 0)",
               GS_DIAG_PREFETCH_MIN, GS_DIAG_PREFETCH_MAX);
    if (in->fx.pin_memory == 0)
        advise(f, "pin_memory is False: set dataloader_pin_memory True (DataLoader "
                  "pin_memory=True) for faster host-to-device copies");
    else if (in->fx.pin_memory < 0)
        advise(f, "Set dataloader_pin_memory True (DataLoader pin_memory=True) for faster "
                  "host-to-device copies");
}

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
    evidence(f, "num_workers", in->fx.workers >= 0 ? json_integer(in->fx.workers) : json_null());
    evidence(f, "pin_memory", in->fx.pin_memory >= 0 ? json_boolean(in->fx.pin_memory)
                                                      : json_null());
    evidence(f, "prefetch_factor", in->fx.prefetch >= 0 ? json_integer(in->fx.prefetch)
                                                         : json_null());
    evidence(f, "gpus", all_gpus(in));
    workers_advice(f, in);
    prefetch_pin_advice(f, in);
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
    evidence(f, "ddp_find_unused_parameters",
             in->fx.find_unused >= 0 ? json_boolean(in->fx.find_unused) : json_null());
    evidence(f, "nccl_version", in->fx.nccl_version ? json_string(in->fx.nccl_version)
                                                    : json_null());
    if (in->fx.ib_disable)
        advise(f, "NCCL_IB_DISABLE=%s is set: it forces NCCL off InfiniBand onto sockets; "
                  "unset it unless InfiniBand is broken", in->fx.ib_disable);
    if (in->fx.p2p_disable)
        advise(f, "NCCL_P2P_DISABLE=%s is set: it stops direct GPU-to-GPU copies (NVLink / "
                  "PCIe P2P); unset it unless P2P is broken", in->fx.p2p_disable);
    advise(f, "Check the NCCL configuration: NCCL_DEBUG=INFO shows the transport in use; "
              "%suse a current NCCL version%s%s%s",
           in->fx.known ? "" : "NCCL_IB_DISABLE=1 forces sockets (only when InfiniBand is broken); ",
           in->fx.nccl_version ? " (this run: " : "",
           in->fx.nccl_version ? in->fx.nccl_version : "", in->fx.nccl_version ? ")" : "");
    if (in->fx.find_unused != 0)
        advise(f, "%s: set ddp_find_unused_parameters False (DistributedDataParallel("
                  "find_unused_parameters=False)) when every parameter gets a gradient",
               in->fx.find_unused == 1 ? "ddp_find_unused_parameters is True"
                                       : "ddp_find_unused_parameters is unknown");
    advise(f, "Bucket gradients to overlap communication with backward: ddp_bucket_cap_mb "
              "(e.g. 100); gradient_accumulation_steps communicates less often");
    return f;
}

/* The run already uses FlashAttention (any "flash_attention_*" implementation). */
static int flash_on(const struct diag_in *in)
{
    return in->fx.attn && strncmp(in->fx.attn, "flash_attention", 15) == 0;
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
    if (!flash_on(in))
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
    if (!flash_on(in))
        advise(f, "Use FlashAttention (--flash_attn True; --attn_impl flash_attn in newer "
                  "ms-swift) to cut attention memory on long sequences");
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

/* GPUs of Ampere or newer (compute capability >= 8.0): FlashAttention-2 and bf16 run there. */
static const char *const ampere_plus[] = {
    "A100", "A800", "A10", "A16", "A30", "A40", "A2", "RTX A", "H100", "H200", "H800", "H20",
    "GH200", "L40", "L4", "L20", "RTX 30", "RTX 40", "RTX 50", "Ada", "B100", "B200", "GB200",
};

/* 1: Ampere or newer, 0: an older GPU, -1: no name known. */
static int gpu_is_ampere_plus(const char *name)
{
    if (!name)
        return -1;
    for (size_t i = 0; i < sizeof ampere_plus / sizeof ampere_plus[0]; i++)
        if (strstr(name, ampere_plus[i]))
            return 1;
    return 0;
}

static json_t *rule_attention(const struct diag_in *in)
{
    json_t *gpus = json_array(), *f;
    double full = mem_full_frac(in, gpus);
    int low = in->util_avg < GS_DIAG_ATTN_UTIL_PCT, mem = full >= GS_DIAG_MEM_FULL_FRAC;
    const char *attn = in->fx.attn;
    int gpu = gpu_is_ampere_plus(in->fx.gpu_name);

    json_decref(gpus);
    if (!attn || (strcmp(attn, "eager") != 0 && strcmp(attn, "sdpa") != 0) || gpu == 0 ||
        (!low && !mem))
        return NULL;
    f = finding(in, "attention_implementation", "warning",
                "FlashAttention-2 is not in effect (attention \"%s\") while %s", attn,
                low ? "GPU utilization is low" : "GPU memory is nearly full");
    evidence(f, "attn_implementation", json_string(attn));
    evidence(f, "gpu_name", in->fx.gpu_name ? json_string(in->fx.gpu_name) : json_null());
    evidence(f, "gpu_avg_utilization_percent", jnum(in->util_avg));
    evidence(f, "threshold_percent", json_real(GS_DIAG_ATTN_UTIL_PCT));
    evidence(f, "memory_peak_fraction", jnum(full));
    evidence(f, "gpus", all_gpus(in));
    advise(f, "attn_implementation is \"%s\": load the model with attn_implementation="
              "\"flash_attention_2\" (pip install flash-attn); in ms-swift --attn_impl flash_attn "
              "(--flash_attn True in older versions)%s", attn,
           gpu < 0 ? "; it needs an Ampere or newer GPU (A100, H100, L40, RTX 30xx/40xx)" : "");
    return f;
}

static json_t *rule_precision(const struct diag_in *in)
{
    const char *dt = in->fx.param_dtype;
    int fp32 = dt ? strcmp(dt, "float32") == 0 : in->fx.bf16 == 0;
    json_t *f;

    if (!fp32 || in->fx.bf16 == 1 || in->fx.fp16 == 1 || gpu_is_ampere_plus(in->fx.gpu_name) != 1)
        return NULL;
    f = finding(in, "precision", "info", "Training in float32 on %s, which runs bfloat16",
                in->fx.gpu_name);
    evidence(f, "param_dtype", dt ? json_string(dt) : json_null());
    evidence(f, "bf16", in->fx.bf16 >= 0 ? json_boolean(in->fx.bf16) : json_null());
    evidence(f, "fp16", in->fx.fp16 >= 0 ? json_boolean(in->fx.fp16) : json_null());
    evidence(f, "gpu_name", json_string(in->fx.gpu_name));
    evidence(f, "gpus", all_gpus(in));
    advise(f, "%s%s: train in bfloat16: --bf16 True (TrainingArguments(bf16=True)), load the "
              "model with torch_dtype=torch.bfloat16 (ms-swift --torch_dtype bfloat16)",
           dt ? "parameters are " : "bf16 is False", dt ? dt : "");
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
    {"attention_implementation", rule_attention},
    {"precision", rule_precision},
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
    gs_diag_profile_findings(report, out); /* the kernel timeline of gpuscope run --profile */
    return out;
}
