/*
 * diag_profile.c - the diagnosis rules over a report's "profile" section (`gpuscope run
 * --profile`, the trace analysis of docs/trace.md): what the kernel timeline shows that the
 * step phases cannot. Each rule looks at every rank of the profiled window and speaks about
 * the worst one, quoting the kernels and the numbers it rests on:
 *
 *   profile_htod              host-to-device copies >= 20 % of the GPU's busy time
 *   profile_host_wait         GPU idle >= 50 % of the kernel span, host wait >= 60 % of the
 *                             idle time of the busiest stream (the most activities)
 *   profile_launch_bound      GPU idle >= 10 %, kernel wait >= 30 % of the busiest stream's
 *                             idle time and >= half the computation kernels under 10 us
 *   profile_attention         softmax kernels >= 5 % of computation and no FlashAttention or
 *                             memory-efficient attention kernel
 *   profile_exposed_communication  NCCL time not hidden under computation >= 10 % of the span
 *
 * docs/report.md (FINDINGS) lists the same conditions. Like diag.c, a rule stays silent when a
 * number it needs is absent.
 */
#include "diag/diag.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define PROF_HTOD_BUSY_FRAC 0.20
#define PROF_IDLE_PCT 50.0
#define PROF_HOST_WAIT_FRAC 0.60
#define PROF_LAUNCH_IDLE_PCT 10.0
#define PROF_KERNEL_WAIT_FRAC 0.30
#define PROF_TINY_FRAC 0.50
#define PROF_SOFTMAX_FRAC 0.05
#define PROF_EXPOSED_COMM_FRAC 0.10

static double pnum(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);

    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* A finding of the profiled rank: evidence "from", "to" (the run's), "rank", "profile_steps"
 * and "trace" (the rank's trace file, null when unknown). */
static json_t *pfinding(const json_t *rep, const char *id, const char *sev, const json_t *rank,
                        const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static json_t *pfinding(const json_t *rep, const char *id, const char *sev, const json_t *rank,
                        const char *fmt, ...)
{
    const json_t *run = json_object_get(rep, "run"), *prof = json_object_get(rep, "profile");
    const json_t *steps = json_object_get(prof, "steps"), *file = json_object_get(rank, "file");
    double from = pnum(run, "start_time"), to = pnum(run, "end_time");
    json_t *f;
    va_list ap;

    va_start(ap, fmt);
    f = gs_diag_vfinding(id, sev, fmt, ap);
    va_end(ap);
    gs_diag_evidence(f, "from", isfinite(from) ? json_real(from) : json_null());
    gs_diag_evidence(f, "to", isfinite(to) ? json_real(to) : json_null());
    gs_diag_evidence(f, "rank", json_integer((json_int_t)pnum(rank, "rank")));
    gs_diag_evidence(f, "profile_steps",
                     json_is_string(steps) ? json_string(json_string_value(steps)) : json_null());
    gs_diag_evidence(f, "trace", file ? json_incref((json_t *)file) : json_null());
    return f;
}

/* The biggest top-kernel row of a type whose name contains sub (NULL: any). */
static const json_t *top_kernel(const json_t *rank, const char *type, const char *sub)
{
    const json_t *best = NULL, *k;
    size_t i;

    json_array_foreach(json_object_get(rank, "top_kernels"), i, k)
    {
        const char *t = json_string_value(json_object_get(k, "type"));
        const char *n = json_string_value(json_object_get(k, "name"));

        if (!t || !n || strcmp(t, type) != 0 || strcmp(n, "others") == 0 ||
            (sub && !strstr(n, sub)))
            continue;
        if (!best || pnum(k, "sum_us") > pnum(best, "sum_us"))
            best = k;
    }
    return best;
}

static json_t *kernel_ev(const json_t *k)
{
    return k ? json_pack("{s:O, s:O, s:O}", "name", json_object_get(k, "name"), "count",
                         json_object_get(k, "count"), "sum_us", json_object_get(k, "sum_us"))
             : json_null();
}

static int fact_is(const json_t *rep, const char *key, int want)
{
    const json_t *v = json_object_get(json_object_get(rep, "facts"), key);

    return json_is_boolean(v) && json_is_true(v) == want;
}

static json_t *rule_htod(const json_t *rep, const json_t *ranks)
{
    const json_t *r, *worst = NULL, *m, *wm = NULL;
    double wfrac = 0;
    size_t i, j;
    json_t *f;

    json_array_foreach(ranks, i, r)
    {
        const json_t *t = json_object_get(r, "temporal");
        double busy = pnum(t, "kernel_span_us") - pnum(t, "idle_us");

        json_array_foreach(json_object_get(r, "memcpy"), j, m)
        {
            const char *kind = json_string_value(json_object_get(m, "kind"));
            double frac = busy > 0 ? pnum(m, "time_us") / busy : NAN;

            if (kind && strcmp(kind, "HtoD") == 0 && frac > wfrac) {
                wfrac = frac;
                worst = r;
                wm = m;
            }
        }
    }
    if (!worst || !(wfrac >= PROF_HTOD_BUSY_FRAC))
        return NULL;
    f = pfinding(rep, "profile_htod", "warning", worst,
                 "Host-to-device copies take %.0f%% of the GPU's busy time (rank %.0f)",
                 100.0 * wfrac, pnum(worst, "rank"));
    gs_diag_evidence(f, "htod_time_us", json_real(pnum(wm, "time_us")));
    gs_diag_evidence(f, "htod_count", json_real(pnum(wm, "count")));
    gs_diag_evidence(f, "htod_bytes", json_real(pnum(wm, "bytes")));
    gs_diag_evidence(f, "htod_bandwidth_gbps",
                     json_is_number(json_object_get(wm, "bandwidth_gbps"))
                         ? json_real(pnum(wm, "bandwidth_gbps"))
                         : json_null());
    gs_diag_evidence(f, "busy_fraction", json_real(wfrac));
    gs_diag_evidence(f, "threshold", json_real(PROF_HTOD_BUSY_FRAC));
    {
        const json_t *pageable = top_kernel(worst, "MEMORY", "HtoD (Pageable");

        gs_diag_evidence(f, "kernel",
                         kernel_ev(pageable ? pageable : top_kernel(worst, "MEMORY", "HtoD")));
        if (pageable)
            gs_diag_advise(
                f,
                "\"%s\" (%.0f us): the copies come from pageable memory; use pinned memory: "
                "DataLoader(pin_memory=True)%s",
                json_string_value(json_object_get(pageable, "name")), pnum(pageable, "sum_us"),
                fact_is(rep, "loader_pin_memory", 0) || fact_is(rep, "dataloader_pin_memory", 0)
                    ? " (this run: pin_memory=False)"
                    : "");
        else
            gs_diag_advise(f, "Use pinned memory for the batches: DataLoader(pin_memory=True)");
    }
    gs_diag_advise(f, "Copy asynchronously so the copy overlaps compute: tensor.to(device, "
                      "non_blocking=True) from pinned memory");
    gs_diag_advise(
        f, "Move less: keep data on the GPU between steps, send compact dtypes (uint8 images, "
           "int32 token ids) and convert on the GPU");
    return f;
}

/* Idle by cause on the rank's busiest stream (the most activities): the one the step's work
 * runs on; side streams idle between their few kernels whatever the host does. */
static void idle_causes(const json_t *r, double *host, double *kern, double *total, double *stream)
{
    const json_t *s;
    size_t i;
    double best = -1, most = -1;

    json_array_foreach(json_object_get(r, "idle_by_stream"), i, s) if (pnum(s, "activities") > most)
    {
        most = pnum(s, "activities");
        best = pnum(s, "stream");
    }
    *host = *kern = *total = 0;
    *stream = best;
    json_array_foreach(json_object_get(r, "idle_by_stream"), i, s)
    {
        const char *c = json_string_value(json_object_get(s, "cause"));
        double v = pnum(s, "idle_us");

        if (!c || !isfinite(v) || pnum(s, "stream") != best)
            continue;
        *total += v;
        if (strcmp(c, "host_wait") == 0)
            *host += v;
        else if (strcmp(c, "kernel_wait") == 0)
            *kern += v;
    }
}

static json_t *rule_host_wait(const json_t *rep, const json_t *ranks)
{
    const json_t *r, *worst = NULL;
    double widle = 0, whost = 0, wtotal = 0, wstream = 0;
    size_t i;
    json_t *f;

    json_array_foreach(ranks, i, r)
    {
        double idle = pnum(json_object_get(r, "temporal"), "idle_pct"), host, kern, total, st;

        idle_causes(r, &host, &kern, &total, &st);
        if (idle >= PROF_IDLE_PCT && total > 0 && host / total >= PROF_HOST_WAIT_FRAC &&
            idle > widle) {
            worst = r;
            widle = idle;
            whost = host;
            wtotal = total;
            wstream = st;
        }
    }
    if (!worst)
        return NULL;
    f = pfinding(rep, "profile_host_wait", "warning", worst,
                 "The GPU is idle %.0f%% of the kernel span, mostly waiting for the CPU to queue "
                 "work (rank %.0f)",
                 widle, pnum(worst, "rank"));
    gs_diag_evidence(f, "idle_pct", json_real(widle));
    gs_diag_evidence(f, "stream", json_real(wstream));
    gs_diag_evidence(f, "host_wait_us", json_real(whost));
    gs_diag_evidence(f, "stream_idle_us", json_real(wtotal));
    gs_diag_evidence(f, "host_wait_fraction", json_real(whost / wtotal));
    gs_diag_evidence(f, "launch_delay", json_deep_copy(json_object_get(worst, "launch_delay")));
    gs_diag_evidence(f, "cpu_op",
                     json_deep_copy(json_array_get(json_object_get(worst, "cpu_ops"), 0)));
    gs_diag_advise(f,
                   "The CPU side starves the GPU: %.0f%% of stream %.0f's idle time is host wait. "
                   "Look at the data loader first (more DataLoader num_workers, pin_memory, "
                   "prefetch_factor) and at Python work between steps (logging, .item() / .cpu() "
                   "synchronisations, metrics)",
                   100.0 * whost / wtotal, wstream);
    gs_diag_advise(f,
                   "When the step itself is Python-bound (many small ops): torch.compile(model), "
                   "or CUDA graphs (torch.cuda.graphs, torch.compile(mode=\"reduce-overhead\"))");
    return f;
}

static json_t *rule_launch_bound(const json_t *rep, const json_t *ranks)
{
    const json_t *r, *worst = NULL;
    double wkern = 0, wtotal = 0, wtiny = 0;
    size_t i;
    json_t *f;

    json_array_foreach(ranks, i, r)
    {
        const json_t *sk = json_object_get(r, "small_kernels");
        double idle = pnum(json_object_get(r, "temporal"), "idle_pct"), host, kern, total, st;
        double tiny = pnum(sk, "under_10us") / pnum(sk, "computation_kernels");

        idle_causes(r, &host, &kern, &total, &st);
        if (idle >= PROF_LAUNCH_IDLE_PCT && total > 0 && kern / total >= PROF_KERNEL_WAIT_FRAC &&
            tiny >= PROF_TINY_FRAC && (!worst || kern > wkern)) {
            worst = r;
            wkern = kern;
            wtotal = total;
            wtiny = tiny;
        }
    }
    if (!worst)
        return NULL;
    f = pfinding(rep, "profile_launch_bound", "warning", worst,
                 "Launch-bound: %.0f%% of the kernels are under 10 us and %.0f%% of the idle time "
                 "is the gap between back-to-back kernels (rank %.0f)",
                 100.0 * wtiny, 100.0 * wkern / wtotal, pnum(worst, "rank"));
    gs_diag_evidence(f, "small_kernels", json_deep_copy(json_object_get(worst, "small_kernels")));
    gs_diag_evidence(f, "kernel_wait_us", json_real(wkern));
    gs_diag_evidence(f, "stream_idle_us", json_real(wtotal));
    gs_diag_evidence(f, "kernel", kernel_ev(top_kernel(worst, "COMPUTATION", NULL)));
    gs_diag_advise(f,
                   "Capture the step in a CUDA graph (torch.cuda.CUDAGraph / torch.cuda.graphs, or "
                   "torch.compile(model, mode=\"reduce-overhead\")) so its kernels launch as one");
    gs_diag_advise(f, "Fuse the small kernels: torch.compile(model); fused optimizers "
                      "(torch.optim.AdamW(fused=True) or foreach=True)");
    gs_diag_advise(f, "Give each kernel more work: a larger batch size per GPU");
    return f;
}

static json_t *rule_attention(const json_t *rep, const json_t *ranks)
{
    const json_t *r, *worst = NULL;
    double wfrac = 0;
    size_t i;
    json_t *f;
    const char *attn;

    json_array_foreach(ranks, i, r)
    {
        const json_t *a = json_object_get(r, "attention");
        double comp = pnum(json_object_get(r, "temporal"), "compute_us");
        double frac = comp > 0 ? pnum(a, "softmax_us") / comp : NAN;

        if (pnum(a, "flash_us") == 0 && pnum(a, "mem_efficient_us") == 0 &&
            frac >= PROF_SOFTMAX_FRAC && frac > wfrac) {
            worst = r;
            wfrac = frac;
        }
    }
    if (!worst)
        return NULL;
    attn = json_string_value(json_object_get(json_object_get(rep, "facts"), "attn_implementation"));
    f = pfinding(rep, "profile_attention", "warning", worst,
                 "Attention runs as separate softmax and matmul kernels, not FlashAttention: "
                 "softmax alone is %.0f%% of computation (rank %.0f)",
                 100.0 * wfrac, pnum(worst, "rank"));
    gs_diag_evidence(f, "softmax_us",
                     json_real(pnum(json_object_get(worst, "attention"), "softmax_us")));
    gs_diag_evidence(f, "softmax_fraction", json_real(wfrac));
    gs_diag_evidence(
        f, "softmax_kernel",
        json_deep_copy(json_object_get(json_object_get(worst, "attention"), "softmax_top")));
    gs_diag_evidence(f, "attn_implementation", attn ? json_string(attn) : json_null());
    gs_diag_advise(
        f,
        "Enable FlashAttention: load the model with attn_implementation="
        "\"flash_attention_2\"%s%s%s, or call torch.nn.functional.scaled_dot_product_attention; "
        "it needs fp16/bf16 and an Ampere or newer GPU",
        attn ? " (this run: \"" : "", attn ? attn : "", attn ? "\")" : "");
    return f;
}

static json_t *rule_exposed_comm(const json_t *rep, const json_t *ranks)
{
    const json_t *r, *worst = NULL;
    double wfrac = 0, wexp = 0;
    size_t i;
    json_t *f;

    json_array_foreach(ranks, i, r)
    {
        double comm = pnum(r, "communication_us"), ov = pnum(r, "comm_comp_overlap_pct");
        double span = pnum(json_object_get(r, "temporal"), "kernel_span_us");
        double exposed = comm * (1.0 - (isfinite(ov) ? ov : 0) / 100.0);

        if (span > 0 && comm > 0 && exposed / span >= PROF_EXPOSED_COMM_FRAC &&
            exposed / span > wfrac) {
            worst = r;
            wfrac = exposed / span;
            wexp = exposed;
        }
    }
    if (!worst)
        return NULL;
    f = pfinding(rep, "profile_exposed_communication", "warning", worst,
                 "NCCL communication not hidden under computation: %.0f%% of the kernel span "
                 "(rank %.0f, %.1f%% of it overlapped)",
                 100.0 * wfrac, pnum(worst, "rank"), pnum(worst, "comm_comp_overlap_pct"));
    gs_diag_evidence(f, "communication_us", json_real(pnum(worst, "communication_us")));
    gs_diag_evidence(f, "exposed_us", json_real(wexp));
    gs_diag_evidence(f, "exposed_fraction", json_real(wfrac));
    gs_diag_evidence(f, "comm_comp_overlap_pct", json_real(pnum(worst, "comm_comp_overlap_pct")));
    gs_diag_evidence(f, "kernel", kernel_ev(top_kernel(worst, "COMMUNICATION", NULL)));
    {
        const json_t *k = top_kernel(worst, "COMMUNICATION", NULL);

        gs_diag_advise(
            f,
            "Overlap the collectives with backward: DDP gradient buckets "
            "(DistributedDataParallel(bucket_cap_mb=...), gradient_as_bucket_view=True, "
            "static_graph=True), FSDP backward_prefetch; the largest is \"%s\" (%.0f us)",
            k ? json_string_value(json_object_get(k, "name")) : "?", k ? pnum(k, "sum_us") : 0);
    }
    if (fact_is(rep, "ddp_find_unused_parameters", 1))
        gs_diag_advise(
            f, "ddp_find_unused_parameters is True: set it False when every parameter gets a "
               "gradient (it delays the first bucket)");
    gs_diag_advise(
        f, "Communicate less often: gradient accumulation (DDP no_sync() on all but the last "
           "micro-batch); check the transport with NCCL_DEBUG=INFO (NVLink / InfiniBand, not "
           "sockets)");
    {
        const json_t *job = json_object_get(json_object_get(rep, "profile"), "job"), *s;

        json_array_foreach(json_object_get(job, "stragglers"), i,
                           s) if (json_is_true(json_object_get(s, "straggler")))
            gs_diag_advise(f,
                           "Rank %.0f computes %.0f%% more than the other ranks: they wait "
                           "for it in the collectives; balance its work",
                           pnum(s, "rank"), pnum(s, "compute_vs_others_pct"));
    }
    return f;
}

void gs_diag_profile_findings(const json_t *report, json_t *out)
{
    const json_t *ranks = json_object_get(json_object_get(report, "profile"), "ranks");
    json_t *(*const rules[])(const json_t *, const json_t *) = {
        rule_htod, rule_host_wait, rule_launch_bound, rule_attention, rule_exposed_comm,
    };

    if (!json_array_size(ranks) || !out)
        return;
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
        json_t *f = rules[i](report, ranks);

        if (f)
            json_array_append_new(out, f);
    }
}
