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

#include "base/mfu.h"

#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define GS_DIAG_DATA_RATIO_WARN 0.15    /* data_loading: warning above */
#define GS_DIAG_DATA_RATIO_CRIT 0.30    /* data_loading: critical above */
#define GS_DIAG_COMM_RATIO_WARN 0.05    /* communication: warning above */
#define GS_DIAG_LOW_UTIL_PCT 30.0       /* low_utilization: avg below ... */
#define GS_DIAG_LOW_UTIL_MIN_RUN_S 60.0 /* ... over a run at least this long */
#define GS_DIAG_MEM_FULL_FRAC 0.90      /* memory_fragmentation: peak/total at least */
#define GS_DIAG_MEM_FULL_UTIL_PCT 50.0  /* ... while avg utilization below */
#define GS_DIAG_FRAG_GAP_MIN_GB 1.0     /* or allocator reserved-allocated gap at least */
#define GS_DIAG_FRAG_GAP_FRAC 0.40      /* ... and at least this fraction of reserved */
#define GS_DIAG_IMBAL_UTIL_PTS 30.0     /* imbalance: max-min avg utilization above */
#define GS_DIAG_IMBAL_MEM_FRAC 0.40     /* or (max-min)/max memory peak above */
#define GS_DIAG_THROTTLE_MIN_S 0.0      /* throttling: thermal/power seconds above */
#define GS_DIAG_HEALTHY_UTIL_PCT 85.0   /* healthy: utilization within ... */
#define GS_DIAG_HEALTHY_UTIL_TOL 5.0    /* ... +- this, */
#define GS_DIAG_HEALTHY_DATA_RATIO 0.05 /* data ratio below, */
#define GS_DIAG_HEALTHY_COMM_RATIO 0.03 /* communication ratio below */
#define GS_DIAG_FEW_CORES 2             /* data_loading: at most this many cores is "few" */
#define GS_DIAG_PREFETCH_MIN 2          /* data_loading: prefetch_factor advised range ... */
#define GS_DIAG_PREFETCH_MAX 4          /* ... up to this */
#define GS_DIAG_ATTN_UTIL_PCT 70.0      /* attention_implementation: avg utilization below */
#define GS_DIAG_LOW_MFU 0.20            /* low_mfu: MFU below ... */
#define GS_DIAG_LOW_MFU_UTIL_PCT 70.0   /* ... while NVML's avg GPU utilization at least */

#define GIB (1024.0 * 1024.0 * 1024.0)

/* The run's settings from the report's "facts" (docs/report.md); -1 / NULL = unknown. */
struct diag_facts {
    long workers;            /* the DataLoader's num_workers, else dataloader_num_workers */
    int pin_memory;          /* 0 / 1 / -1 */
    long prefetch;           /* prefetch_factor */
    int find_unused;         /* ddp_find_unused_parameters: 0 / 1 / -1 */
    int bf16, fp16;          /* 0 / 1 / -1 */
    int autocast;            /* torch.autocast on in the training forward: 0 / 1 / -1 */
    const char *attn;        /* "eager", "sdpa", "flash_attention_2", ... */
    const char *param_dtype; /* "float32", "bfloat16", ... */
    const char *gpu_name;    /* cuda_device_name, else the first GPU of the report */
    const char *ib_disable, *p2p_disable; /* NCCL_IB_DISABLE / NCCL_P2P_DISABLE as set */
    const char *nccl_version;
    long accum;    /* gradient_accumulation_steps (micro-steps per optimizer step), -1: unknown */
    long batch;    /* the loader's batch_size, else per_device_train_batch_size; -1: unknown */
    int grad_ckpt; /* gradient_checkpointing: 0 / 1 / -1 */
    int known;     /* the report has facts: an absent NCCL_* variable was not set */
};

/* The framework the advice is spelled for (report run.framework). */
enum diag_fw { FW_PLAIN, FW_HF, FW_SWIFT, FW_DEEPSPEED, FW_ACCELERATE };

struct diag_in {
    long ncpu;
    struct diag_facts fx;
    enum diag_fw fw;
    int cuda;            /* the run used a CUDA device (events, device name, or NVML GPUs) */
    const char *backend; /* facts.dist_backend: "nccl", "gloo", ... or NULL */
    const char *status;  /* outcome.status */
    const char *exception, *why_no_steps;
    long steps, exit_code, sig;
    const char *sig_name;
    const char *stopped_by; /* outcome.stopped_by: a stop gpuscope run passed on */
    int seen_any;           /* the sender reported what its hooks saw (outcome.seen) */
    double data, comm, util_avg, runtime;
    const char *util_src;
    long ranks;
    double from, to;
    const json_t *gpus;
    double peak_reserved_gb, gap_gb, alloc_total_gb;
    const json_t *slow; /* slowest_rank when it is a straggler (src/base/straggler.c), or NULL */
    const json_t *rep;  /* the report (the efficiency figures: src/run/efficiency.c) */
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
    f->autocast = fact_bool(fx, "autocast");
    f->attn = fact_str(fx, "attn_implementation");
    f->param_dtype = fact_str(fx, "param_dtype");
    f->gpu_name = fact_str(fx, "cuda_device_name");
    if (!f->gpu_name)
        f->gpu_name = fact_str(json_array_get(in->gpus, 0), "name");
    f->ib_disable = fact_str(fx, "NCCL_IB_DISABLE");
    f->p2p_disable = fact_str(fx, "NCCL_P2P_DISABLE");
    f->nccl_version = fact_str(fx, "nccl_version");
    f->accum = fact_int(fx, "gradient_accumulation_steps");
    f->batch = fact_int(fx, "loader_batch_size");
    if (f->batch < 0)
        f->batch = fact_int(fx, "per_device_train_batch_size");
    f->grad_ckpt = fact_bool(fx, "gradient_checkpointing");
    f->known = json_object_size(fx) > 0;
    /* The training process's own CPU set beats the machine the report is read on. */
    if (cpus > 0)
        in->ncpu = cpus;
}

static enum diag_fw diag_framework(const char *fw)
{
    if (!fw)
        return FW_PLAIN;
    if (strcmp(fw, "hf") == 0)
        return FW_HF;
    if (strcmp(fw, "ms-swift") == 0)
        return FW_SWIFT;
    if (strcmp(fw, "deepspeed") == 0)
        return FW_DEEPSPEED;
    if (strcmp(fw, "accelerate") == 0)
        return FW_ACCELERATE;
    return FW_PLAIN;
}

static void diag_read_outcome(const json_t *rep, struct diag_in *in)
{
    const json_t *oc = json_object_get(rep, "outcome"), *fx = json_object_get(rep, "facts");
    const char *src = json_string_value(json_object_get(rep, "step_busy_estimate_source"));
    double v;

    in->status = json_string_value(json_object_get(oc, "status"));
    in->exception = fact_str(oc, "exception");
    in->why_no_steps = fact_str(oc, "zero_steps_reason");
    v = num(oc, "steps_completed");
    if (isnan(v))
        v = num(rep, "steps");
    in->steps = isnan(v) ? -1 : (long)v; /* -1: unknown (a report without steps figures) */
    v = num(oc, "exit_code");
    in->exit_code = isnan(v) ? -1 : (long)v;
    v = num(oc, "signal");
    in->sig = isnan(v) ? 0 : (long)v;
    in->sig_name = fact_str(oc, "signal_name");
    in->stopped_by = fact_str(oc, "stopped_by");
    in->seen_any = json_object_size(json_object_get(oc, "seen")) > 0;
    in->fw = diag_framework(
        json_string_value(json_object_get(json_object_get(rep, "run"), "framework")));
    in->backend = fact_str(fx, "dist_backend");
    /* CUDA-only advice needs torch to have used a CUDA device: when the torch side reported
     * (facts.torch_version), a GPU the run's processes were seen on (a shared GPU, another
     * process of the job) does not make a CPU run a CUDA one */
    in->cuda =
        (src && strcmp(src, "cuda_events") == 0) || fact_str(fx, "cuda_device_name") ||
        (!fact_str(fx, "torch_version") && json_array_size(json_object_get(rep, "gpus")) > 0);
}

static void diag_read(const json_t *rep, long ncpu, struct diag_in *in)
{
    const json_t *run = json_object_get(rep, "run"), *al = json_object_get(rep, "allocator");
    double ranks = num(rep, "ranks");

    memset(in, 0, sizeof *in);
    in->ncpu = ncpu;
    in->data = num(rep, "data_loading_time_ratio");
    in->comm = num(rep, "communication_time_ratio");
    in->util_avg = num(rep, "gpu_avg_utilization_percent");
    in->runtime = num(rep, "train_runtime");
    in->util_src = json_string_value(json_object_get(rep, "gpu_utilization_source"));
    in->ranks = isnan(ranks) ? 0 : (long)ranks;
    in->slow = json_object_get(rep, "slowest_rank");
    if (!json_is_true(json_object_get(in->slow, "straggler")))
        in->slow = NULL;
    in->from = num(run, "start_time");
    in->to = num(run, "end_time");
    in->gpus = json_object_get(rep, "gpus");
    in->peak_reserved_gb = num(al, "peak_reserved_gb");
    in->gap_gb = num(al, "fragmentation_gap_gb");
    in->alloc_total_gb = num(al, "memory_total_gb");
    in->rep = rep;
    diag_read_facts(rep, in);
    diag_read_outcome(rep, in);
}

static json_t *jnum(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

json_t *gs_diag_vfinding(const char *id, const char *severity, const char *fmt, va_list ap)
{
    json_t *f = json_object();

    if (!f)
        return NULL;
    json_object_set_new(f, "id", json_string(id));
    json_object_set_new(f, "severity", json_string(severity));
    json_object_set_new(f, "title", json_vsprintf(fmt, ap));
    json_object_set_new(f, "evidence", json_object());
    json_object_set_new(f, "advice", json_array());
    return f;
}

json_t *gs_diag_finding(const char *id, const char *severity, const char *fmt, ...)
{
    json_t *f;
    va_list ap;

    va_start(ap, fmt);
    f = gs_diag_vfinding(id, severity, fmt, ap);
    va_end(ap);
    return f;
}

void gs_diag_evidence(json_t *f, const char *key, json_t *v)
{
    json_object_set_new(json_object_get(f, "evidence"), key, v);
}

void gs_diag_advise(json_t *f, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    json_array_append_new(json_object_get(f, "advice"), json_vsprintf(fmt, ap));
    va_end(ap);
}

/* A finding of the run's time range (evidence "from", "to"). */
static json_t *finding(const struct diag_in *in, const char *id, const char *severity,
                       const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static json_t *finding(const struct diag_in *in, const char *id, const char *severity,
                       const char *fmt, ...)
{
    json_t *f;
    va_list ap;

    va_start(ap, fmt);
    f = gs_diag_vfinding(id, severity, fmt, ap);
    va_end(ap);
    gs_diag_evidence(f, "from", jnum(in->from));
    gs_diag_evidence(f, "to", jnum(in->to));
    return f;
}

/* Indices of every GPU in the report (the run's GPUs). */
static json_t *all_gpus(const struct diag_in *in)
{
    json_t *arr = json_array();
    size_t i;
    const json_t *g;

    json_array_foreach(in->gpus, i, g)
    {
        json_array_append_new(arr, json_integer((json_int_t)num(g, "index")));
    }
    return arr;
}

/* ---- the rules ---- */

/* An option as the run's framework spells it: TrainingArguments for the HF Trainer, the CLI
 * flag for ms-swift (its training arguments are the Trainer's), the constructor argument in
 * plain PyTorch / DeepSpeed / accelerate loops. */
struct spelling {
    const char *hf, *swift, *plain;
};

static const char *spell(const struct diag_in *in, const struct spelling *sp)
{
    return in->fw == FW_HF ? sp->hf : in->fw == FW_SWIFT ? sp->swift : sp->plain;
}

static const struct spelling SP_WORKERS = {"dataloader_num_workers=%ld (TrainingArguments)",
                                           "--dataloader_num_workers %ld",
                                           "DataLoader(num_workers=%ld)"};
static const struct spelling SP_PREFETCH = {"dataloader_prefetch_factor=%d (TrainingArguments)",
                                            "--dataloader_prefetch_factor %d",
                                            "DataLoader(prefetch_factor=%d)"};
static const struct spelling SP_PIN = {"dataloader_pin_memory=True (TrainingArguments)",
                                       "--dataloader_pin_memory true",
                                       "DataLoader(pin_memory=True)"};

/* Worker advice that no number of this run contradicts: the current value, the cores, and a
 * concrete next value to try and measure, never a claim that more workers cannot help. */
static void workers_advice(json_t *f, const struct diag_in *in)
{
    long w = in->fx.workers, n = in->ncpu, want = n / 2;
    char opt[96], now[96] = "";

    if (want < 1)
        want = 1;
    if (w >= 0)
        snprintf(now, sizeof now, "num_workers is %ld%s", w, n > 0 ? "" : ": ");
    if (n > 0 && w >= 0)
        snprintf(now + strlen(now), sizeof now - strlen(now), " of %ld CPU core(s): ", n);
    if (w >= want && w > 0) {
        gs_diag_advise(f,
                       "%sif more workers do not lower data_loading_time_ratio, make each sample "
                       "cheaper (pre-process) or give the run more cores",
                       now);
        return;
    }
    if (w > 0 && w >= n / 2)
        return;
    snprintf(opt, sizeof opt, spell(in, &SP_WORKERS), want);
    if (n > 0)
        gs_diag_advise(f,
                       "%sload batches in worker processes: %s, then compare "
                       "data_loading_time_ratio",
                       now, opt);
    else
        gs_diag_advise(f,
                       "%sload batches in worker processes: %s (about half the CPU cores), then "
                       "compare data_loading_time_ratio",
                       now, opt);
}

/* prefetch_factor only applies with worker processes, pin_memory only with a CUDA device. */
static void prefetch_pin_advice(json_t *f, const struct diag_in *in)
{
    long p = in->fx.prefetch;
    char opt[96];

    if (in->fx.workers > 0 && !(p >= GS_DIAG_PREFETCH_MIN && p <= GS_DIAG_PREFETCH_MAX)) {
        snprintf(opt, sizeof opt, spell(in, &SP_PREFETCH), GS_DIAG_PREFETCH_MAX);
        if (p >= 0)
            gs_diag_advise(f, "prefetch_factor is %ld: %s keeps more batches ready per worker", p,
                           opt);
        else
            gs_diag_advise(f, "%s keeps more batches ready per worker", opt);
    }
    if (in->cuda && in->fx.pin_memory != 1)
        gs_diag_advise(f, "%s%s for faster host-to-device copies",
                       in->fx.pin_memory == 0 ? "pin_memory is False: " : "", spell(in, &SP_PIN));
}

static json_t *rule_data_loading(const struct diag_in *in)
{
    json_t *f;

    if (!(in->data > GS_DIAG_DATA_RATIO_WARN))
        return NULL;
    f = finding(in, "data_loading", in->data > GS_DIAG_DATA_RATIO_CRIT ? "critical" : "warning",
                "Data loading is %.0f%% of each step", 100.0 * in->data);
    gs_diag_evidence(f, "data_loading_time_ratio", json_real(in->data));
    gs_diag_evidence(f, "threshold", json_real(GS_DIAG_DATA_RATIO_WARN));
    gs_diag_evidence(f, "cpu_cores", in->ncpu > 0 ? json_integer(in->ncpu) : json_null());
    gs_diag_evidence(f, "num_workers",
                     in->fx.workers >= 0 ? json_integer(in->fx.workers) : json_null());
    gs_diag_evidence(f, "pin_memory",
                     in->fx.pin_memory >= 0 ? json_boolean(in->fx.pin_memory) : json_null());
    gs_diag_evidence(f, "prefetch_factor",
                     in->fx.prefetch >= 0 ? json_integer(in->fx.prefetch) : json_null());
    gs_diag_evidence(f, "gpus", all_gpus(in));
    workers_advice(f, in);
    prefetch_pin_advice(f, in);
    gs_diag_advise(f,
                   "Pre-process the dataset once (tokenize / augment ahead%s) instead of in every "
                   "step",
                   in->fw == FW_HF || in->fw == FW_SWIFT ? ", e.g. datasets.map" : "");
    return f;
}

static json_t *rule_communication(const struct diag_in *in)
{
    json_t *f;

    if (!(in->comm > GS_DIAG_COMM_RATIO_WARN))
        return NULL;
    f = finding(in, "communication", "warning", "Communication is %.0f%% of each step",
                100.0 * in->comm);
    gs_diag_evidence(f, "communication_time_ratio", json_real(in->comm));
    gs_diag_evidence(f, "threshold", json_real(GS_DIAG_COMM_RATIO_WARN));
    gs_diag_evidence(f, "ranks", json_integer(in->ranks));
    gs_diag_evidence(f, "gpus", all_gpus(in));
    gs_diag_evidence(f, "ddp_find_unused_parameters",
                     in->fx.find_unused >= 0 ? json_boolean(in->fx.find_unused) : json_null());
    gs_diag_evidence(f, "nccl_version",
                     in->fx.nccl_version ? json_string(in->fx.nccl_version) : json_null());
    gs_diag_evidence(f, "backend", in->backend ? json_string(in->backend) : json_null());
    if (in->backend && strcmp(in->backend, "nccl") == 0) {
        if (in->fx.ib_disable)
            gs_diag_advise(f,
                           "NCCL_IB_DISABLE=%s is set: it forces NCCL off InfiniBand onto sockets; "
                           "unset it unless InfiniBand is broken",
                           in->fx.ib_disable);
        if (in->fx.p2p_disable)
            gs_diag_advise(
                f,
                "NCCL_P2P_DISABLE=%s is set: it stops direct GPU-to-GPU copies (NVLink / "
                "PCIe P2P); unset it unless P2P is broken",
                in->fx.p2p_disable);
        gs_diag_advise(f, "NCCL_DEBUG=INFO shows the transport NCCL uses%s%s%s",
                       in->fx.nccl_version ? " (this run: NCCL " : "",
                       in->fx.nccl_version ? in->fx.nccl_version : "",
                       in->fx.nccl_version ? ")" : "");
    } else if (in->backend && strcmp(in->backend, "gloo") == 0 && in->cuda) {
        gs_diag_advise(f, "the process group uses gloo on a CUDA run: init_process_group(\"nccl\") "
                          "runs the collectives on the GPUs");
    }
    if (in->fx.find_unused == 1)
        gs_diag_advise(
            f, "ddp_find_unused_parameters is True: %s when every parameter gets a gradient",
            spell(in, &(struct spelling){"set ddp_find_unused_parameters=False "
                                         "(TrainingArguments)",
                                         "pass --ddp_find_unused_parameters false",
                                         "DistributedDataParallel(find_unused_parameters="
                                         "False)"}));
    if (in->slow) {
        /* the others wait for a straggler: bucket sizes would not change that */
        gs_diag_evidence(f, "straggler_rank", json_incref(json_object_get(in->slow, "rank")));
        gs_diag_advise(f,
                       "Most of this is the other ranks waiting for rank %.0f, which computes "
                       "%.0f %% longer per step (the straggler finding): make that rank as fast "
                       "as the others before tuning communication",
                       num(in->slow, "rank"), 100.0 * num(in->slow, "slower_by_ratio"));
        return f;
    }
    if (in->fw == FW_DEEPSPEED)
        gs_diag_advise(f,
                       "Overlap reduction with backward: \"overlap_comm\": true and a larger "
                       "\"reduce_bucket_size\" in the DeepSpeed config; more gradient accumulation "
                       "steps communicate less often");
    else
        gs_diag_advise(
            f, "Communicate less often or overlap more: %s",
            spell(in, &(struct spelling){
                          "ddp_bucket_cap_mb (e.g. 100) and gradient_accumulation_steps "
                          "(TrainingArguments)",
                          "--ddp_bucket_cap_mb 100 and --gradient_accumulation_steps",
                          in->fx.accum > 1 ? "DistributedDataParallel(bucket_cap_mb=100), and "
                                             "model.no_sync() on gradient-accumulation "
                                             "micro-steps"
                                           : "DistributedDataParallel(bucket_cap_mb=100)"}));
    return f;
}

static int gpu_is_ampere_plus(const char *name);
static const struct spelling SP_FLASH, SP_BF16, SP_FAST, SP_BATCH;

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
    json_array_foreach(in->gpus, i, g)
    {
        const json_t *periods = json_object_get(g, "idle_periods");
        if (!json_array_size(periods))
            continue;
        json_t *e = json_object();
        json_object_set_new(e, "index", json_integer((json_int_t)num(g, "index")));
        json_object_set_new(e, "idle_periods", json_deep_copy(periods));
        json_array_append_new(arr, e);
        json_array_foreach(periods, j, p)
        {
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
        f = finding(in, "low_utilization", "warning", "GPU utilization averages %.0f%% over %.0f s",
                    in->util_avg, in->runtime);
    else
        f = finding(in, "low_utilization", "warning",
                    "GPU sat idle %zu time(s), %.0f s in all, while holding memory", n_idle,
                    idle_s);
    gs_diag_evidence(f, "gpu_avg_utilization_percent", jnum(in->util_avg));
    gs_diag_evidence(f, "gpu_utilization_source",
                     in->util_src ? json_string(in->util_src) : json_null());
    gs_diag_evidence(f, "train_runtime", jnum(in->runtime));
    gs_diag_evidence(f, "threshold_percent", json_real(GS_DIAG_LOW_UTIL_PCT));
    gs_diag_evidence(f, "idle_seconds", json_real(idle_s));
    gs_diag_evidence(f, "idle", idle);
    gs_diag_evidence(f, "gpus", all_gpus(in));
    gs_diag_advise(
        f, "Check data_loading_time_ratio and communication_time_ratio first: a GPU waiting "
           "for input or for its peers shows there");
    if (!flash_on(in) && gpu_is_ampere_plus(in->fx.gpu_name) != 0)
        gs_diag_advise(f, "On an Ampere or newer GPU: %s", spell(in, &SP_FAST));
    gs_diag_advise(f, "Give each step more work: raise %s while memory allows",
                   spell(in, &SP_BATCH));
    if (n_idle)
        gs_diag_advise(
            f,
            "Idle periods with memory held point at evaluation, checkpoint saving or a "
            "rank waiting for others: compare their times with %s",
            spell(in, &(struct spelling){"eval_steps / save_steps (TrainingArguments)",
                                         "--eval_steps / --save_steps",
                                         "the loop's evaluation and checkpoint intervals"}));
    return f;
}

/* Highest fraction of memory in use on any GPU (NVML), or from the allocator's reserved peak. */
static double mem_full_frac(const struct diag_in *in, json_t *gpus_out)
{
    double best = NAN;
    size_t i;
    const json_t *g;

    json_array_foreach(in->gpus, i, g)
    {
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
    gs_diag_evidence(f, "memory_peak_fraction", jnum(full));
    gs_diag_evidence(f, "gpu_avg_utilization_percent", jnum(in->util_avg));
    gs_diag_evidence(f, "peak_reserved_gb", jnum(in->peak_reserved_gb));
    gs_diag_evidence(f, "fragmentation_gap_gb", jnum(in->gap_gb));
    gs_diag_evidence(f, "gpus", json_array_size(gpus) ? gpus : (json_decref(gpus), all_gpus(in)));
    if (!flash_on(in) && in->fx.attn)
        gs_diag_advise(f, "Cut attention memory on long sequences: %s", spell(in, &SP_FLASH));
    gs_diag_advise(f, "Let the allocator grow segments instead of splitting them: "
                      "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");
    return f;
}

/* A straggler (slowest_rank.straggler, src/base/straggler.c): the rank the others wait for. */
static json_t *rule_straggler(const struct diag_in *in)
{
    const json_t *g;
    json_t *f;
    double wait;

    if (!in->slow)
        return NULL;
    g = json_object_get(in->slow, "gpu");
    wait = num(in->slow, "others_comm_wait_p50_ms");
    f = finding(in, "straggler", "warning",
                "Rank %.0f computes %.0f%% longer per step than the other ranks%s",
                num(in->slow, "rank"), 100.0 * num(in->slow, "slower_by_ratio"),
                isfinite(wait) ? "; they wait for it" : "");
    gs_diag_evidence(f, "rank", json_incref(json_object_get(in->slow, "rank")));
    gs_diag_evidence(f, "busy_p50_ms", json_incref(json_object_get(in->slow, "busy_p50_ms")));
    gs_diag_evidence(f, "others_busy_p50_ms",
                     json_incref(json_object_get(in->slow, "others_busy_p50_ms")));
    gs_diag_evidence(f, "others_comm_wait_p50_ms", jnum(wait));
    gs_diag_evidence(f, "threshold_ratio",
                     json_incref(json_object_get(in->slow, "threshold_ratio")));
    gs_diag_evidence(f, "gpu", json_is_object(g) ? json_deep_copy(g) : json_null());
    if (json_is_object(g) && num(g, "throttled_seconds_total") > 0)
        gs_diag_advise(f,
                       "Its GPU %.0f was held down %.1f s (throttle reasons in the GPU table): "
                       "check its cooling, power cap and clocks (nvidia-smi -q -d PERFORMANCE)",
                       num(g, "index"), num(g, "throttled_seconds_total"));
    else if (json_is_object(g))
        gs_diag_advise(f,
                       "Check its GPU %.0f: clocks, temperature and PCIe link against the other "
                       "ranks' GPUs (gpuscope compare --job lists them side by side)",
                       num(g, "index"));
    gs_diag_advise(f, "Check its data shard: longer or larger samples on that rank (balance the "
                      "shards, or batches of similar length)");
    gs_diag_advise(f, "Check its host: other processes on its CPUs or GPU, fewer CPU cores, a "
                      "slower disk or network for its data");
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

    json_array_foreach(in->gpus, i, g)
    {
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
    gs_diag_evidence(f, "utilization_spread_points",
                     nu >= 2 ? json_real(umax - umin) : json_null());
    gs_diag_evidence(f, "memory_spread_fraction",
                     nm >= 2 && mmax > 0 ? json_real((mmax - mmin) / mmax) : json_null());
    gs_diag_evidence(f, "per_gpu", per);
    gs_diag_evidence(f, "gpus", all_gpus(in));
    if (in->fw == FW_HF || in->fw == FW_SWIFT)
        gs_diag_advise(f, "Spread model layers evenly: from_pretrained(device_map=\"auto\") (or "
                          "max_memory per GPU) for model-parallel loading");
    gs_diag_advise(
        f, "Shard parameters, gradients and optimizer state across GPUs: %s",
        in->fw == FW_DEEPSPEED ? "ZeRO stage 3 (\"zero_optimization\": {\"stage\": 3} in the "
                                 "DeepSpeed config)"
        : in->fw == FW_ACCELERATE
            ? "accelerate launch --use_fsdp (or a DeepSpeed ZeRO-3 plugin)"
            : spell(in,
                    &(struct spelling){
                        "a DeepSpeed ZeRO-3 config (TrainingArguments deepspeed=...) or "
                        "fsdp=\"full_shard\" (TrainingArguments)",
                        "--deepspeed zero3", "torch.distributed.fsdp.FullyShardedDataParallel"}));
    gs_diag_advise(
        f, "Give every rank equal work: the same batch size per rank%s",
        in->fw == FW_HF      ? ", group_by_length=True (TrainingArguments) for variable-length "
                               "samples"
        : in->fw == FW_SWIFT ? ", --group_by_length true for variable-length samples"
                             : ", batches of similar length for variable-length samples");
    return f;
}

static json_t *rule_throttling(const struct diag_in *in)
{
    static const char *const reasons[] = {"sw_power_cap", "hw_slowdown", "sw_thermal", "hw_thermal",
                                          "hw_power_brake"};
    json_t *per = json_array(), *gpus = json_array(), *f;
    double worst = 0, total = 0, gpu_tot = 0, worst_tot = -1;
    long worst_gpu = -1, worst_tot_gpu = -1;
    int thermal = 0, power = 0;
    size_t i;
    const json_t *g;

    json_array_foreach(in->gpus, i, g)
    {
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
        if (e) {
            /* the report's one throttled-time figure per GPU (union of the reasons) */
            double tot = num(g, "throttled_seconds_total");
            json_array_append_new(per, e);
            if (!isnan(tot))
                gpu_tot += tot;
            if (!isnan(tot) && tot > worst_tot) {
                worst_tot = tot;
                worst_tot_gpu = (long)num(g, "index");
            }
        }
    }
    if (!json_array_size(per)) {
        json_decref(per);
        json_decref(gpus);
        return NULL;
    }
    if (worst_tot >= 0) { /* the same figure as the summary's "throttle s" */
        worst = worst_tot;
        worst_gpu = worst_tot_gpu;
        total = gpu_tot;
    }
    f = finding(in, "throttling", "warning", "GPU %ld throttled %.0f s during the run (%zu GPU(s))",
                worst_gpu, worst, json_array_size(gpus));
    gs_diag_evidence(f, "throttled_seconds", json_real(total));
    gs_diag_evidence(f, "per_gpu", per);
    gs_diag_evidence(f, "gpus", gpus);
    if (thermal)
        gs_diag_advise(f, "Thermal slowdown: check cooling, airflow and fan speed "
                          "(nvidia-smi -q -d TEMPERATURE,PERFORMANCE)");
    if (power)
        gs_diag_advise(
            f, "Power cap reached: check the power limit (nvidia-smi -q -d POWER); raise it "
               "with nvidia-smi -pl where the supply allows, or expect lower clocks");
    return f;
}

static const struct spelling SP_FLASH = {
    "load the model with attn_implementation=\"flash_attention_2\" (pip install flash-attn)",
    "--attn_impl flash_attn",
    "use torch.nn.functional.scaled_dot_product_attention (FlashAttention kernels) in the "
    "model's attention"};
static const struct spelling SP_BF16 = {
    "bf16=True (TrainingArguments)", "--torch_dtype bfloat16",
    "torch.autocast(\"cuda\", dtype=torch.bfloat16) around forward and loss"};
static const struct spelling SP_FAST = {
    "attn_implementation=\"flash_attention_2\" and bf16=True (TrainingArguments)",
    "--attn_impl flash_attn and --torch_dtype bfloat16",
    "bfloat16 autocast (torch.autocast) and scaled_dot_product_attention"};
static const struct spelling SP_BATCH = {"per_device_train_batch_size (TrainingArguments)",
                                         "--per_device_train_batch_size",
                                         "the DataLoader's batch_size"};

/* GPUs of Ampere or newer (compute capability >= 8.0): FlashAttention-2 and bf16 run there. */
static const char *const ampere_plus[] = {
    "A100",   "A800",   "A10",    "A16", "A30",   "A40",  "A2",    "RTX A",
    "H100",   "H200",   "H800",   "H20", "GH200", "L40",  "L4",    "L20",
    "RTX 30", "RTX 40", "RTX 50", "Ada", "B100",  "B200", "GB200",
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
    gs_diag_evidence(f, "attn_implementation", json_string(attn));
    gs_diag_evidence(f, "gpu_name", in->fx.gpu_name ? json_string(in->fx.gpu_name) : json_null());
    gs_diag_evidence(f, "gpu_avg_utilization_percent", jnum(in->util_avg));
    gs_diag_evidence(f, "threshold_percent", json_real(GS_DIAG_ATTN_UTIL_PCT));
    gs_diag_evidence(f, "memory_peak_fraction", jnum(full));
    gs_diag_evidence(f, "gpus", all_gpus(in));
    gs_diag_advise(f, "attn_implementation is \"%s\": %s%s", attn, spell(in, &SP_FLASH),
                   gpu < 0 ? "; it needs an Ampere or newer GPU (A100, H100, L40, RTX 30xx/40xx)"
                           : "");
    return f;
}

static json_t *rule_precision(const struct diag_in *in)
{
    const char *dt = in->fx.param_dtype;
    int fp32 = dt ? strcmp(dt, "float32") == 0 : in->fx.bf16 == 0;
    json_t *f;

    if (!fp32 || in->fx.bf16 == 1 || in->fx.fp16 == 1 || in->fx.autocast == 1 ||
        gpu_is_ampere_plus(in->fx.gpu_name) != 1)
        return NULL;
    f = finding(in, "precision", "info", "Training in float32 on %s, which runs bfloat16",
                in->fx.gpu_name);
    gs_diag_evidence(f, "param_dtype", dt ? json_string(dt) : json_null());
    gs_diag_evidence(f, "bf16", in->fx.bf16 >= 0 ? json_boolean(in->fx.bf16) : json_null());
    gs_diag_evidence(f, "fp16", in->fx.fp16 >= 0 ? json_boolean(in->fx.fp16) : json_null());
    gs_diag_evidence(f, "gpu_name", json_string(in->fx.gpu_name));
    gs_diag_evidence(f, "gpus", all_gpus(in));
    gs_diag_advise(
        f, "%s%s: train in bfloat16: %s", dt ? "parameters are " : "bf16 is False", dt ? dt : "",
        in->fw == FW_DEEPSPEED    ? "\"bf16\": {\"enabled\": true} in the DeepSpeed config"
        : in->fw == FW_ACCELERATE ? "Accelerator(mixed_precision=\"bf16\") (accelerate launch "
                                    "--mixed_precision bf16)"
                                  : spell(in, &SP_BF16));
    return f;
}

/* MFU low while NVML says the GPU is busy: kernels run but do little arithmetic (small
 * matmuls, fp32, unfused attention); the advice names the run's current values. */
/* How many times the run's peak the GPU's bf16 peak is (peak_flops_gpu's table entry). */
static double mfu_bf16_ratio(const json_t *rep)
{
    const char *model = json_string_value(json_object_get(rep, "peak_flops_gpu"));
    double peak = num(rep, "peak_flops");
    size_t n;
    const struct gs_peak_gpu *t = gs_peak_table(&n);

    for (size_t i = 0; model && i < n; i++)
        if (strcmp(t[i].model, model) == 0 && peak > 0)
            return t[i].flops[GS_PREC_BF16] / peak;
    return NAN;
}

static json_t *rule_low_mfu(const struct diag_in *in)
{
    double mfu = num(in->rep, "mfu"), peak = num(in->rep, "peak_flops");
    const char *prec = json_string_value(json_object_get(in->rep, "peak_flops_precision"));
    const char *model = json_string_value(json_object_get(in->rep, "peak_flops_gpu"));
    const char *attn = in->fx.attn;
    int wide = prec && (strcmp(prec, "fp32") == 0 || strcmp(prec, "tf32") == 0);
    json_t *f;

    if (!(mfu < GS_DIAG_LOW_MFU) || !(in->util_avg >= GS_DIAG_LOW_MFU_UTIL_PCT) || !in->util_src ||
        strcmp(in->util_src, "nvml") != 0)
        return NULL;
    f = finding(in, "low_mfu", "warning",
                "MFU is %.*f%% while GPU utilization is %.0f%%: kernels are busy but do "
                "little arithmetic (small matmuls, fp32, no fused attention)",
                100.0 * mfu >= 0.1 ? 1 : 4, 100.0 * mfu, in->util_avg);
    gs_diag_evidence(f, "mfu", json_real(mfu));
    gs_diag_evidence(f, "threshold_mfu", json_real(GS_DIAG_LOW_MFU));
    gs_diag_evidence(f, "gpu_avg_utilization_percent", json_real(in->util_avg));
    gs_diag_evidence(f, "threshold_percent", json_real(GS_DIAG_LOW_MFU_UTIL_PCT));
    gs_diag_evidence(f, "train_tokens_per_second", jnum(num(in->rep, "train_tokens_per_second")));
    gs_diag_evidence(f, "model_flops_per_token", jnum(num(in->rep, "model_flops_per_token")));
    gs_diag_evidence(f, "peak_flops", jnum(peak));
    gs_diag_evidence(f, "peak_flops_precision", prec ? json_string(prec) : json_null());
    gs_diag_evidence(f, "peak_flops_gpu", model ? json_string(model) : json_null());
    gs_diag_evidence(f, "gpus", all_gpus(in));
    if (wide) {
        double x = mfu_bf16_ratio(in->rep);
        char more[96] = "";
        if (x > 1)
            snprintf(more, sizeof more, " (the %s's bf16 peak is %.0fx its %s peak)", model, x,
                     prec);
        gs_diag_advise(f, "The matmuls run in %s (parameters %s, autocast %s): %s%s", prec,
                       in->fx.param_dtype ? in->fx.param_dtype : "of unknown dtype",
                       in->fx.autocast == 1   ? "on"
                       : in->fx.autocast == 0 ? "off"
                                              : "unknown",
                       in->fw == FW_DEEPSPEED    ? "\"bf16\": {\"enabled\": true} in the DeepSpeed "
                                                   "config"
                       : in->fw == FW_ACCELERATE ? "Accelerator(mixed_precision=\"bf16\")"
                                                 : spell(in, &SP_BF16),
                       more);
    }
    if (!attn || strcmp(attn, "eager") == 0)
        gs_diag_advise(f, "Attention %s%s%s: %s", attn ? "is \"" : "implementation unknown",
                       attn ? attn : "", attn ? "\"" : "", spell(in, &SP_FLASH));
    if (in->fx.batch > 0)
        gs_diag_advise(f,
                       "A larger micro-batch gives larger matmuls: the batch size is %ld now; "
                       "raise %s while memory allows (gradient_accumulation_steps %ld%s)",
                       in->fx.batch, spell(in, &SP_BATCH), in->fx.accum > 0 ? in->fx.accum : 1,
                       in->fx.accum > 1 ? ": lower it as the batch grows" : "");
    else
        gs_diag_advise(f,
                       "A larger micro-batch gives larger matmuls: raise %s while memory "
                       "allows",
                       spell(in, &SP_BATCH));
    gs_diag_advise(f,
                   "torch.compile(model) fuses the small elementwise kernels between the "
                   "matmuls%s",
                   in->fw == FW_HF ? " (torch_compile=True in TrainingArguments)" : "");
    return f;
}

static json_t *rule_healthy(const struct diag_in *in)
{
    int comm_ok = in->comm < GS_DIAG_HEALTHY_COMM_RATIO || (isnan(in->comm) && in->ranks <= 1);
    json_t *f;

    /* a run that failed, was killed or never stepped is never the reference */
    if (in->steps == 0 ||
        (in->status && strcmp(in->status, "completed") != 0 && strcmp(in->status, "unknown") != 0))
        return NULL;
    if (!(fabs(in->util_avg - GS_DIAG_HEALTHY_UTIL_PCT) <= GS_DIAG_HEALTHY_UTIL_TOL) ||
        !(in->data < GS_DIAG_HEALTHY_DATA_RATIO) || !comm_ok)
        return NULL;
    f = finding(in, "healthy", "info",
                "Pipeline looks healthy: %.0f%% GPU utilization, data "
                "loading %.1f%% of each step",
                in->util_avg, 100.0 * in->data);
    gs_diag_evidence(f, "gpu_avg_utilization_percent", json_real(in->util_avg));
    gs_diag_evidence(f, "data_loading_time_ratio", json_real(in->data));
    gs_diag_evidence(f, "communication_time_ratio", jnum(in->comm));
    gs_diag_evidence(f, "gpus", all_gpus(in));
    gs_diag_advise(f, "Nothing to change; keep this configuration as the reference for later runs");
    return f;
}

/* The command failed, was killed or interrupted, or no step was measured: said first, with
 * the exception's last line and why there are no steps. */
static json_t *rule_outcome(const struct diag_in *in)
{
    int bad =
        in->status && (strcmp(in->status, "failed") == 0 || strcmp(in->status, "killed") == 0 ||
                       strcmp(in->status, "interrupted") == 0);
    char how[96];
    int stopped;
    json_t *f;

    /* no steps from a command where gpuscope ran (it reported what it saw) */
    if (!bad && (in->steps != 0 || !in->seen_any))
        return NULL;
    if (!bad) {
        f = finding(in, "no_steps", "warning", "No training step was measured: %s",
                    in->why_no_steps ? in->why_no_steps : "no step record arrived");
        gs_diag_evidence(f, "zero_steps_reason",
                         in->why_no_steps ? json_string(in->why_no_steps) : json_null());
        gs_diag_advise(f, "gpuscope run times any PyTorch loop by default (a step ends at each "
                          "optimizer step); keep --auto and make sure the command runs under the "
                          "Python that imports torch");
        return f;
    }
    /* SIGTERM, SIGINT, SIGHUP come from outside (a user, a scheduler's cancel or time
     * limit, a closed terminal), as does a KeyboardInterrupt: a stop, not a failure */
    stopped = strcmp(in->status, "interrupted") == 0 || in->sig == SIGTERM || in->sig == SIGINT ||
              in->sig == SIGHUP || in->stopped_by;
    if (in->stopped_by)
        snprintf(how, sizeof how, "was stopped by %s", in->stopped_by);
    else if (in->sig > 0)
        snprintf(how, sizeof how, "was %s by %s", stopped ? "stopped" : "killed",
                 in->sig_name ? in->sig_name : "a signal");
    else if (strcmp(in->status, "interrupted") == 0)
        snprintf(how, sizeof how, "was interrupted (KeyboardInterrupt)");
    else if (in->exit_code >= 0)
        snprintf(how, sizeof how, "exited with status %ld", in->exit_code);
    else
        snprintf(how, sizeof how, "raised an exception");
    f = finding(in, "run_failed",
                strcmp(in->status, "failed") == 0 ? "critical"
                : stopped                         ? "info"
                                                  : "warning",
                "The command %s after %ld step(s)%s%s", how, in->steps,
                in->exception && !stopped ? ": " : "",
                in->exception && !stopped ? in->exception : "");
    gs_diag_evidence(f, "status", json_string(in->status));
    gs_diag_evidence(f, "exit_code",
                     in->exit_code >= 0 ? json_integer(in->exit_code) : json_null());
    gs_diag_evidence(f, "signal", in->sig > 0 ? json_integer(in->sig) : json_null());
    gs_diag_evidence(f, "exception", in->exception ? json_string(in->exception) : json_null());
    gs_diag_evidence(f, "steps_completed", json_integer(in->steps));
    if (stopped)
        gs_diag_advise(f,
                       "The figures cover the %ld step(s) before the stop; compare them with "
                       "complete runs only per step (steps/s, phase shares), not in totals",
                       in->steps);
    else
        gs_diag_advise(f,
                       "The figures cover only the %ld step(s) before the end; fix the failure "
                       "and run again before tuning on them",
                       in->steps);
    return f;
}

static const struct {
    const char *id;
    json_t *(*rule)(const struct diag_in *in);
} rules[] = {
    {"run_failed", rule_outcome},
    {"data_loading", rule_data_loading},
    {"communication", rule_communication},
    {"straggler", rule_straggler},
    {"low_utilization", rule_low_utilization},
    {"memory_fragmentation", rule_memory_fragmentation},
    {"imbalance", rule_imbalance},
    {"throttling", rule_throttling},
    {"attention_implementation", rule_attention},
    {"precision", rule_precision},
    {"low_mfu", rule_low_mfu},
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
    gs_diag_stacks_findings(report, out);
    gs_diag_profile_findings(report, out); /* the kernel timeline of gpuscope run --profile */
    return out;
}
