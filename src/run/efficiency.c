/*
 * efficiency.c - MFU from a run report (run/efficiency.h).
 *
 * MFU = model FLOPs per token x tokens/s / peak FLOP/s of the GPUs at the run's precision.
 * FLOPs per token: 6·N (N = facts.param_count), plus 12·L·H·Q·T when the facts carry the
 * model's layers, heads, head dim and the sequence length its training forwards were fed
 * (src/base/mfu.c). A figure with a missing input is null with the reason, never a guess.
 */
#include "run/efficiency.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/mfu.h"

static double fnum(const json_t *facts, const char *key)
{
    const json_t *v = json_object_get(facts, key);
    return json_is_number(v) ? json_number_value(v) : 0;
}

/* 1 true, 0 false, -1 absent */
static int fbool(const json_t *facts, const char *key)
{
    const json_t *v = json_object_get(facts, key);
    return json_is_boolean(v) ? json_is_true(v) : -1;
}

static const char *fstr(const json_t *facts, const char *key)
{
    return json_string_value(json_object_get(facts, key));
}

/* The NVML name of the GPU a rank ran on: the GPU whose index is its device (the report's
 * convention, slowest_rank), else the run's GPUs when they are all one model; NULL (and
 * *none = 1 when the run had no GPU at all). */
static const char *rank_gpu_name(const json_t *gpus, const json_t *rank, int *none)
{
    const json_t *dev = json_object_get(rank, "device"), *g;
    const char *name = NULL;
    size_t i;

    *none = json_array_size(gpus) == 0;
    if (json_is_integer(dev))
        json_array_foreach(gpus, i, g)
        {
            const json_t *ix = json_object_get(g, "index");
            if (json_is_integer(ix) && json_integer_value(ix) == json_integer_value(dev))
                return json_string_value(json_object_get(g, "name"));
        }
    json_array_foreach(gpus, i, g)
    {
        const char *n = json_string_value(json_object_get(g, "name"));
        if (!n || (name && strcmp(n, name) != 0))
            return NULL;
        name = n;
    }
    return name;
}

static void set_null(json_t *rep, const char *why)
{
    json_object_set_new(rep, "mfu", json_null());
    json_object_set_new(rep, "hfu", json_null());
    json_object_set_new(rep, "mfu_null_reason", json_string(why));
}

double gs_efficiency_model(const json_t *facts, int *prec, int *attn, double *hw_fpt)
{
    struct gs_model_shape m = {fnum(facts, "param_count"), fnum(facts, "model_layers"),
                               fnum(facts, "model_heads"), fnum(facts, "model_head_dim"),
                               fnum(facts, "seq_len")};
    int tf32 = fbool(facts, "tf32") == 1 || fbool(facts, "matmul_allow_tf32") == 1;

    if (prec)
        *prec = gs_precision_of(fbool(facts, "autocast"), fstr(facts, "autocast_dtype"),
                                fbool(facts, "bf16"), fbool(facts, "fp16"), tf32,
                                fstr(facts, "param_dtype"));
    if (hw_fpt)
        *hw_fpt = gs_hw_flops_per_token(&m);
    return gs_flops_per_token(&m, attn);
}

void gs_efficiency(json_t *rep)
{
    const json_t *facts = json_object_get(rep, "facts"), *gpus = json_object_get(rep, "gpus");
    json_t *ranks = json_object_get(rep, "per_rank"), *r;
    double tps = json_number_value(json_object_get(rep, "train_tokens_per_second"));
    int attn = 0, prec = -1;
    double hw_fpt = NAN, fpt = gs_efficiency_model(facts, &prec, &attn, &hw_fpt), peak_sum = 0;
    const char *model = NULL;
    char why[320] = "";
    int mixed = 0;
    size_t i;

    json_object_set_new(rep, "model_flops_per_token", isnan(fpt) ? json_null() : json_real(fpt));
    json_object_set_new(rep, "model_flops_formula",
                        isnan(fpt) ? json_null() : json_string(attn ? "6N+12LHQT" : "6N"));
    json_object_set_new(rep, "peak_flops_precision",
                        prec >= 0 ? json_string(gs_precision_name(prec)) : json_null());
    /* per rank: its GPU's peak, and its MFU when its tokens/s is known */
    json_array_foreach(ranks, i, r)
    {
        int none = 0;
        const char *name = rank_gpu_name(gpus, r, &none);
        const struct gs_peak_gpu *pk = gs_peak_find(name);
        const json_t *rt = json_object_get(r, "tokens_per_second");
        double peak = pk && prec >= 0 ? pk->flops[prec] : 0;

        json_object_set_new(r, "gpu_model", pk ? json_string(pk->model) : json_null());
        json_object_set_new(r, "mfu",
                            peak > 0 && json_is_number(rt) && !isnan(fpt)
                                ? json_real(fpt * json_number_value(rt) / peak)
                                : json_null());
        if (why[0])
            continue;
        if (!json_is_number(rt) &&
            json_is_number(json_object_get(rep, "train_tokens_per_second"))) {
            /* the job's tokens/s without this rank's: its MFU would read low */
            snprintf(why, sizeof why,
                     "no_tokens: rank %lld carried no token count (the job's MFU would leave "
                     "its work out)",
                     (long long)json_integer_value(json_object_get(r, "rank")));
        } else if (none) {
            snprintf(why, sizeof why, "cpu_only: the run used no GPU (no peak to compare with)");
        } else if (!name) {
            snprintf(why, sizeof why,
                     "unknown_gpu: the GPU of rank %lld is not known (its device is not among "
                     "the run's GPUs, which are of several models)",
                     (long long)json_integer_value(json_object_get(r, "rank")));
        } else if (!pk) {
            snprintf(why, sizeof why,
                     "unknown_gpu: %.200s is not in the peak table (docs/report.md, MFU)", name);
        } else if (prec >= 0 && peak <= 0) {
            snprintf(why, sizeof why, "no_peak: %s has no %s math in the peak table", pk->model,
                     gs_precision_name(prec));
        } else {
            if (model && strcmp(model, pk->model) != 0)
                mixed = 1;
            model = pk->model;
            peak_sum += peak;
        }
    }
    /* the straggler's own MFU, next to its other figures */
    json_array_foreach(ranks, i, r)
    {
        json_t *sl = json_object_get(rep, "slowest_rank");
        if (json_is_object(sl) &&
            json_equal(json_object_get(sl, "rank"), json_object_get(r, "rank")))
            json_object_set(sl, "mfu", json_object_get(r, "mfu"));
    }
    json_object_set_new(rep, "peak_flops_gpu",
                        why[0] || !model ? json_null() : json_string(mixed ? "mixed" : model));
    json_object_set_new(rep, "peak_flops",
                        why[0] || !model || prec < 0 || !json_array_size(ranks)
                            ? json_null()
                            : json_real(peak_sum / (double)json_array_size(ranks)));
    if (!json_array_size(ranks)) {
        set_null(rep, "no_steps: the run recorded no training step");
    } else if (!json_is_number(json_object_get(rep, "train_tokens_per_second"))) {
        set_null(rep, "no_tokens: no training step carried a token count (docs/python.md, "
                      "TOKENS)");
    } else if (isnan(fpt)) {
        set_null(rep, "no_param_count: the run's facts carry no param_count");
    } else if (why[0]) {
        set_null(rep, why);
    } else if (prec < 0) {
        set_null(rep, "unknown_precision: neither autocast, the Trainer's bf16/fp16 nor the "
                      "parameters' dtype says which");
    } else {
        double mfu = fpt * tps / peak_sum;
        json_object_set_new(rep, "mfu", json_real(mfu));
        json_object_set_new(rep, "mfu_null_reason", json_null());
        json_object_set_new(rep, "hfu",
                            fbool(facts, "gradient_checkpointing") == 1
                                ? json_real(mfu * hw_fpt / fpt)
                                : json_null());
    }
}
