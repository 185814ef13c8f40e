/*
 * plan.c - `gpuscope tune`'s pure logic: candidates, window figures, ranking, the early cut,
 * the loss check, and the change spelled for the framework (plan.h, docs/tune.md).
 */
#include "cli/tune/plan.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- settings ---- */

/* The DataLoader keywords tune knows by their bare name, and whether each needs workers. */
static const struct {
    const char *key;
    int needs_workers;
} loader_keys[] = {
    {"num_workers", 0},
    {"prefetch_factor", 1},
    {"persistent_workers", 1},
    {"pin_memory", 0},
};

static int loader_needs_workers(const char *key)
{
    for (size_t i = 0; i < sizeof loader_keys / sizeof loader_keys[0]; i++)
        if (strcmp(key, loader_keys[i].key) == 0)
            return loader_keys[i].needs_workers;
    return 0;
}

static int is_bare_loader_key(const char *key)
{
    for (size_t i = 0; i < sizeof loader_keys / sizeof loader_keys[0]; i++)
        if (strcmp(key, loader_keys[i].key) == 0)
            return 1;
    return 0;
}

/* An identifier: [A-Za-z_][A-Za-z0-9_]* (a Python keyword, a TrainingArguments field); env
 * names and flags may also hold '-' and '.' after the first character. */
static int ident_ok(const char *s, int loose)
{
    if (!s[0] || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
        return 0;
    for (const char *p = s + 1; *p; p++)
        if (!(isalnum((unsigned char)*p) || *p == '_' || (loose && (*p == '-' || *p == '.'))))
            return 0;
    return 1;
}

static int value_ok(const char *v)
{
    if (!v[0] || strlen(v) >= TUNE_VAL_MAX)
        return 0;
    for (const char *p = v; *p; p++)
        if ((unsigned char)*p < 0x21 || *p == 0x7f || *p == ',' || *p == '\'' || *p == '"' ||
            *p == '\\')
            return 0;
    return 1;
}

int tune_parse_try(const char *spec, struct tune_cand *out, unsigned *n, unsigned max, char *why,
                   size_t why_len)
{
    const char *eq = spec ? strchr(spec, '=') : NULL;
    char key[TUNE_KEY_MAX], vals[1024];
    enum tune_route route;
    const char *name;
    unsigned added = 0;

    if (!eq || eq == spec || (size_t)(eq - spec) >= sizeof key) {
        snprintf(why, why_len, "'%s' is not KEY=V1,V2,...", spec ? spec : "");
        return -1;
    }
    snprintf(key, sizeof key, "%.*s", (int)(eq - spec), spec);
    if (strlen(eq + 1) >= sizeof vals || !eq[1]) {
        snprintf(why, why_len, "%s: no values (KEY=V1,V2,...)", key);
        return -1;
    }
    snprintf(vals, sizeof vals, "%s", eq + 1);
    if (is_bare_loader_key(key)) {
        route = TUNE_LOADER;
        name = key;
    } else if (strncmp(key, "loader.", 7) == 0 && ident_ok(key + 7, 0)) {
        route = TUNE_LOADER;
        name = key + 7;
    } else if (strncmp(key, "args.", 5) == 0 && ident_ok(key + 5, 0)) {
        route = TUNE_TRAINARG;
        name = key + 5;
    } else if (strncmp(key, "env.", 4) == 0 && ident_ok(key + 4, 0)) {
        route = TUNE_ENV;
        name = key + 4;
    } else if (strncmp(key, "--", 2) == 0 && ident_ok(key + 2, 1)) {
        route = TUNE_FLAG;
        name = key + 2;
    } else {
        snprintf(why, why_len,
                 "%s: not a setting tune can change (num_workers, prefetch_factor, "
                 "persistent_workers, pin_memory, loader.NAME, args.NAME, env.NAME, --FLAG)",
                 key);
        return -1;
    }
    for (char *save = NULL, *v = strtok_r(vals, ",", &save); v; v = strtok_r(NULL, ",", &save)) {
        struct tune_cand *c;
        if (!value_ok(v)) {
            snprintf(why, why_len, "%s: '%s' is not a plain value (no spaces, quotes, commas)", key,
                     v);
            return -1;
        }
        if (*n >= max) {
            snprintf(why, why_len, "more than %u trials", max);
            return -1;
        }
        c = &out[(*n)++];
        memset(c, 0, sizeof *c);
        c->n = 1;
        c->s[0].route = route;
        snprintf(c->s[0].key, sizeof c->s[0].key, "%s", name);
        snprintf(c->s[0].val, sizeof c->s[0].val, "%s", v);
        c->needs_workers = route == TUNE_LOADER && loader_needs_workers(name);
        snprintf(c->why, sizeof c->why, "--try %s", key);
        added++;
    }
    if (!added) {
        snprintf(why, why_len, "%s: no values (KEY=V1,V2,...)", key);
        return -1;
    }
    return 0;
}

/* ---- reading a report ---- */

static double num(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static const char *str(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static const json_t *finding(const json_t *report, const char *id)
{
    size_t i;
    const json_t *f;

    json_array_foreach(json_object_get(report, "findings"), i, f)
    {
        const char *fid = str(f, "id");
        if (fid && strcmp(fid, id) == 0)
            return f;
    }
    return NULL;
}

enum tune_framework tune_framework_of(const json_t *report)
{
    const json_t *run = json_object_get(report, "run");
    const char *fw = str(run, "framework"), *cmd = str(run, "command");

    if (cmd) { /* `swift sft ...`, `.../bin/swift`, `python -m swift.cli...` */
        const char *end = cmd + strcspn(cmd, " ");
        const char *base = cmd;
        for (const char *p = cmd; p < end; p++)
            if (*p == '/')
                base = p + 1;
        if ((end - base == 5 && strncmp(base, "swift", 5) == 0) || strstr(cmd, "-m swift"))
            return TUNE_FW_SWIFT;
    }
    if (fw && strcmp(fw, "hf") == 0)
        return TUNE_FW_HF;
    return TUNE_FW_TORCH;
}

const char *tune_framework_name(enum tune_framework fw)
{
    return fw == TUNE_FW_HF ? "hf" : fw == TUNE_FW_SWIFT ? "ms-swift" : "torch";
}

static void add_one(struct tune_cand *out, unsigned *n, unsigned max, const struct tune_cand *base,
                    enum tune_route route, const char *key, const char *val, const char *why)
{
    struct tune_cand *c;

    if (*n >= max)
        return;
    c = &out[*n];
    if (base)
        *c = *base;
    else
        memset(c, 0, sizeof *c);
    if (c->n >= TUNE_MAX_SETTINGS)
        return;
    c->s[c->n].route = route;
    snprintf(c->s[c->n].key, sizeof c->s[c->n].key, "%s", key);
    snprintf(c->s[c->n].val, sizeof c->s[c->n].val, "%s", val);
    c->n++;
    c->needs_workers = 0;
    snprintf(c->why, sizeof c->why, "%s", why);
    (*n)++;
}

void tune_candidates_round1(const json_t *report, long ncpu, struct tune_cand *out, unsigned *n,
                            unsigned max)
{
    const json_t *facts = json_object_get(report, "facts");
    double cores = num(facts, "cpu_count"), cur = num(facts, "loader_num_workers");
    double data = num(report, "data_loading_time_ratio");

    if (!isfinite(cores) || cores < 1)
        cores = ncpu > 0 ? (double)ncpu : 1;
    if (finding(report, "data_loading") || (isfinite(data) && data > 0.05)) {
        long tried[8];
        unsigned nt = 0;
        long want[] = {(long)cores / 2 > 0 ? (long)cores / 2 : 1, 2, 4, 8};
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
            char v[24];
            int dup = 0;
            if (want[i] > (long)cores || (isfinite(cur) && want[i] == (long)cur))
                continue;
            for (unsigned j = 0; j < nt; j++)
                dup |= tried[j] == want[i];
            if (dup)
                continue;
            tried[nt++] = want[i];
            snprintf(v, sizeof v, "%ld", want[i]);
            add_one(out, n, max, NULL, TUNE_LOADER, "num_workers", v,
                    finding(report, "data_loading") ? "data_loading finding"
                                                    : "data loading over 5 % of the step");
        }
    }
    if (finding(report, "communication") && tune_framework_of(report) != TUNE_FW_TORCH) {
        static const char *const mb[] = {"50", "100"};
        for (size_t i = 0; i < 2; i++)
            add_one(out, n, max, NULL, TUNE_TRAINARG, "ddp_bucket_cap_mb", mb[i],
                    "communication finding");
    }
}

/* Whether the run has a CUDA GPU: GPUs in the report, or a rank on a CUDA device. */
static int has_cuda(const json_t *report)
{
    const json_t *facts = json_object_get(report, "facts");
    const char *dev = str(facts, "device_type");

    return json_array_size(json_object_get(report, "gpus")) > 0 ||
           (dev && strcmp(dev, "cuda") == 0);
}

void tune_candidates_round2(const json_t *report, const struct tune_cand *base, int base_workers,
                            struct tune_cand *out, unsigned *n, unsigned max)
{
    const json_t *facts = json_object_get(report, "facts");
    const json_t *pin = json_object_get(facts, "loader_pin_memory");
    const json_t *pers = json_object_get(facts, "loader_persistent_workers");
    if (!base_workers)
        return;
    add_one(out, n, max, base, TUNE_LOADER, "prefetch_factor", "4", "on top of the best workers");
    if (!json_is_true(pers))
        add_one(out, n, max, base, TUNE_LOADER, "persistent_workers", "true",
                "on top of the best workers");
    if (has_cuda(report) && !json_is_true(pin))
        add_one(out, n, max, base, TUNE_LOADER, "pin_memory", "true",
                "CUDA: host-to-device copies");
}

/* ---- window figures ---- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(const double *sorted, size_t n, double p)
{
    double pos;
    size_t lo;

    if (!n)
        return NAN;
    pos = p * (double)(n - 1);
    lo = (size_t)pos;
    if (lo + 1 >= n)
        return sorted[n - 1];
    return sorted[lo] + (sorted[lo + 1] - sorted[lo]) * (pos - (double)lo);
}

/* One rank's records sorted by step. */
struct rstep {
    long step;
    double t1, data_ms, comm_ms;
    double samples, tokens;
    int comm_known;
};

static int cmp_rstep(const void *a, const void *b)
{
    long x = ((const struct rstep *)a)->step, y = ((const struct rstep *)b)->step;
    return x < y ? -1 : x > y;
}

int tune_window_stats(const json_t *steps, long warmup, long nsteps, struct tune_window *w)
{
    size_t n = json_array_size(steps), i;
    struct rstep *rs = calloc(n ? n : 1, sizeof *rs);
    double *walls = calloc(n ? n : 1, sizeof *walls);
    long ranks[64];
    unsigned nr = 0, nwall = 0;
    double data_ms = 0, comm_ms = 0, wall_s = 0, samples_ps = 0, tokens_ps = 0;
    int samples_known = 1, tokens_known = 1, comm_any = 0;

    memset(w, 0, sizeof *w);
    w->steps_per_s = w->samples_per_s = w->tokens_per_s = w->data_ratio = w->comm_ratio = NAN;
    w->step_p50_ms = w->step_p95_ms = w->t_from = w->t_to = NAN;
    if (!rs || !walls) {
        free(rs);
        free(walls);
        return -1;
    }
    /* the ranks present */
    for (i = 0; i < n; i++) {
        const json_t *r = json_array_get(steps, i);
        long rank = (long)json_integer_value(json_object_get(r, "rank"));
        unsigned j;
        for (j = 0; j < nr && ranks[j] != rank; j++)
            ;
        if (j == nr && nr < sizeof ranks / sizeof ranks[0])
            ranks[nr++] = rank;
    }
    for (unsigned k = 0; k < nr; k++) {
        size_t m = 0, first = 0, last;
        double t_start, span, sps;
        long have;
        for (i = 0; i < n; i++) {
            const json_t *r = json_array_get(steps, i), *ms = json_object_get(r, "ms");
            if ((long)json_integer_value(json_object_get(r, "rank")) != ranks[k] ||
                !json_is_number(json_object_get(r, "step")) ||
                !json_is_number(json_object_get(r, "t1")))
                continue;
            rs[m].step = (long)num(r, "step");
            rs[m].t1 = num(r, "t1");
            rs[m].data_ms = num(ms, "data");
            rs[m].comm_ms = num(ms, "communication");
            rs[m].comm_known = isfinite(rs[m].comm_ms);
            rs[m].samples = num(r, "samples");
            rs[m].tokens = num(r, "tokens");
            m++;
        }
        qsort(rs, m, sizeof *rs, cmp_rstep);
        /* the window: steps warmup+1 .. warmup+nsteps, timed from the end of step warmup (or
         * of the first record when warmup is 0: that step's own time is unknown) */
        while (first < m && rs[first].step <= warmup)
            first++;
        if (first == 0 && m > 0 && warmup == 0)
            first = 1;
        if (first == 0 || first >= m)
            goto none;
        last = first;
        while (last + 1 < m && rs[last + 1].step <= warmup + nsteps)
            last++;
        t_start = rs[first - 1].t1;
        span = rs[last].t1 - t_start;
        have = (long)(last - first + 1);
        if (!(span > 0))
            goto none;
        sps = (double)have / span;
        if (isnan(w->steps_per_s) || sps < w->steps_per_s) { /* the slowest rank's */
            w->steps_per_s = sps;
            w->steps = (unsigned)have;
            w->seconds = span;
            w->t_from = t_start;
            w->t_to = rs[last].t1;
        }
        {
            double smp = 0, tok = 0;
            for (size_t j = first; j <= last; j++) {
                if (isfinite(rs[j].data_ms))
                    data_ms += rs[j].data_ms;
                if (rs[j].comm_known) {
                    comm_ms += rs[j].comm_ms;
                    comm_any = 1;
                }
                if (isfinite(rs[j].samples) && rs[j].samples > 0)
                    smp += rs[j].samples;
                else
                    samples_known = 0;
                if (isfinite(rs[j].tokens) && rs[j].tokens > 0)
                    tok += rs[j].tokens;
                else
                    tokens_known = 0; /* a step without its count: the job's figure would lie */
                walls[nwall++] = (rs[j].t1 - rs[j - 1].t1) * 1000.0;
            }
            samples_ps += smp / span;
            tokens_ps += tok / span;
            wall_s += span;
        }
        continue;
    none:
        samples_known = tokens_known = 0;
    }
    w->ranks = nr;
    if (nwall && wall_s > 0) {
        qsort(walls, nwall, sizeof *walls, cmp_double);
        w->step_p50_ms = pct(walls, nwall, 0.5);
        w->step_p95_ms = pct(walls, nwall, 0.95);
        w->data_ratio = data_ms / (wall_s * 1000.0);
        if (comm_any)
            w->comm_ratio = comm_ms / (wall_s * 1000.0);
        if (samples_known)
            w->samples_per_s = samples_ps;
        if (tokens_known)
            w->tokens_per_s = tokens_ps;
    }
    free(rs);
    free(walls);
    return isfinite(w->steps_per_s) ? 0 : -1;
}

double tune_window_mfu(const json_t *report, double window_tokens_per_s)
{
    double mfu = num(report, "mfu"), tps = num(report, "train_tokens_per_second");

    if (!isfinite(mfu) || !(tps > 0) || !isfinite(window_tokens_per_s))
        return NAN;
    return mfu * window_tokens_per_s / tps;
}

json_t *tune_losses(const json_t *records, long upto)
{
    json_t *out = json_array();
    size_t i;
    const json_t *r;

    json_array_foreach(records, i, r)
    {
        const char *type = str(r, "type");
        double loss = num(json_object_get(r, "values"), "loss");
        long step = (long)num(r, "step"); /* a float in HF's logs: state.global_step */
        if (!type || strcmp(type, "log") != 0 || !isfinite(loss) || step < 1 || step > upto ||
            json_integer_value(json_object_get(r, "rank")) != 0)
            continue;
        json_array_append_new(out, json_pack("[I,f]", (json_int_t)step, loss));
    }
    return out;
}

int tune_loss_diverges(const json_t *base, const json_t *trial, double tol, double *diff)
{
    double sum = 0;
    unsigned shared = 0;
    size_t i, j;
    const json_t *b, *t;

    *diff = NAN;
    json_array_foreach(base, i, b)
    {
        json_array_foreach(trial, j, t)
        {
            double lb, lt;
            if (json_integer_value(json_array_get(b, 0)) !=
                json_integer_value(json_array_get(t, 0)))
                continue;
            lb = json_number_value(json_array_get(b, 1));
            lt = json_number_value(json_array_get(t, 1));
            sum += fabs(lt - lb) / fmax(fabs(lb), 1e-9);
            shared++;
            break;
        }
    }
    if (!shared)
        return -1;
    *diff = sum / shared;
    return *diff > tol;
}

int tune_cut_early(double trial_sps, unsigned trial_steps, double best_sps, unsigned min_steps,
                   double margin)
{
    return trial_steps >= min_steps && isfinite(trial_sps) && isfinite(best_sps) &&
           trial_sps < best_sps * (1.0 - margin);
}

int tune_worth(double base_sps, double trial_sps, double min_gain)
{
    return isfinite(base_sps) && isfinite(trial_sps) && base_sps > 0 &&
           trial_sps > base_sps * (1.0 + min_gain);
}

int tune_subset(const struct tune_cand *a, const struct tune_cand *b)
{
    for (unsigned i = 0; i < a->n; i++) {
        int found = 0;
        for (unsigned j = 0; j < b->n && !found; j++)
            found = a->s[i].route == b->s[j].route && strcmp(a->s[i].key, b->s[j].key) == 0 &&
                    strcmp(a->s[i].val, b->s[j].val) == 0;
        if (!found)
            return 0;
    }
    return 1;
}

static int cand_has_key(const struct tune_cand *c, const struct tune_setting *s)
{
    for (unsigned i = 0; i < c->n; i++)
        if (c->s[i].route == s->route && strcmp(c->s[i].key, s->key) == 0)
            return 1;
    return 0;
}

int tune_combination(const struct tune_cand *const *cands, const double *sps, const int *ok,
                     unsigned n, double min_gain, struct tune_cand *out)
{
    int best = -1;
    unsigned added = 0;

    for (unsigned i = 1; i < n; i++)
        if (ok[i] && isfinite(sps[i]) && (best < 0 || sps[i] > sps[best]))
            best = (int)i;
    if (best < 0 || !tune_worth(sps[0], sps[best], min_gain))
        return 0;
    *out = *cands[best];
    for (unsigned i = 1; i < n; i++) {
        double base = sps[0];
        if ((int)i == best || !ok[i] || !isfinite(sps[i]))
            continue;
        for (unsigned j = 1; j < n; j++) /* its own base: the fastest strict subset */
            if (j != i && ok[j] && isfinite(sps[j]) && cands[j]->n < cands[i]->n &&
                tune_subset(cands[j], cands[i]) && sps[j] > base)
                base = sps[j];
        if (!tune_worth(base, sps[i], min_gain))
            continue;
        for (unsigned k = 0; k < cands[i]->n && out->n < TUNE_MAX_SETTINGS; k++)
            if (!cand_has_key(out, &cands[i]->s[k])) {
                out->s[out->n++] = cands[i]->s[k];
                added++;
            }
    }
    snprintf(out->why, sizeof out->why, "the best combination");
    return added > 0;
}

int tune_recommend(const struct tune_cand *const *cands, const double *sps, const int *ok,
                   unsigned n, double min_gain)
{
    int best = -1, pick;

    for (unsigned i = 1; i < n; i++)
        if (ok[i] && isfinite(sps[i]) && (best < 0 || sps[i] > sps[best]))
            best = (int)i;
    if (best < 0 || n < 1 || !tune_worth(sps[0], sps[best], min_gain))
        return -1;
    pick = best;
    for (unsigned i = 1; i < n; i++) {
        if ((int)i == best || !ok[i] || !isfinite(sps[i]) ||
            sps[i] * (1.0 + min_gain) < sps[best] || !tune_worth(sps[0], sps[i], min_gain) ||
            !tune_subset(cands[i], cands[best]))
            continue;
        if (cands[i]->n < cands[pick]->n || (cands[i]->n == cands[pick]->n && sps[i] > sps[pick]))
            pick = (int)i;
    }
    return pick;
}

/* ---- spelling ---- */

json_t *tune_value_json(const char *v)
{
    char *end;
    long long i;
    double d;

    if (strcmp(v, "true") == 0 || strcmp(v, "True") == 0)
        return json_true();
    if (strcmp(v, "false") == 0 || strcmp(v, "False") == 0)
        return json_false();
    if (strcmp(v, "none") == 0 || strcmp(v, "None") == 0 || strcmp(v, "null") == 0)
        return json_null();
    errno = 0;
    i = strtoll(v, &end, 10);
    if (!errno && end != v && !*end)
        return json_integer((json_int_t)i);
    errno = 0;
    d = strtod(v, &end);
    if (!errno && end != v && !*end && isfinite(d))
        return json_real(d);
    return json_string(v);
}

/* The TrainingArguments field of a DataLoader keyword (HF, ms-swift use the same names). */
static void trainarg_of_loader(const char *key, char *out, size_t len)
{
    snprintf(out, len, "dataloader_%s", key);
}

json_t *tune_env_json(const struct tune_cand *c, enum tune_framework fw, const char *scope)
{
    json_t *doc = json_object(), *dl = json_object(), *ta = json_object();

    for (unsigned i = 0; i < c->n; i++) {
        const struct tune_setting *s = &c->s[i];
        char field[TUNE_KEY_MAX + 16];
        if (s->route == TUNE_LOADER && fw != TUNE_FW_SWIFT) {
            json_object_set_new(dl, s->key, tune_value_json(s->val));
            if (fw == TUNE_FW_HF && is_bare_loader_key(s->key)) {
                trainarg_of_loader(s->key, field, sizeof field);
                json_object_set_new(ta, field, tune_value_json(s->val));
            }
        } else if (s->route == TUNE_TRAINARG && fw != TUNE_FW_SWIFT) {
            json_object_set_new(ta, s->key, tune_value_json(s->val));
        }
    }
    if (json_object_size(dl)) {
        json_object_set(doc, "dataloader", dl);
        json_object_set_new(doc, "dataloader_scope", json_string(scope ? scope : "all"));
    }
    if (json_object_size(ta))
        json_object_set(doc, "training_args", ta);
    json_decref(dl);
    json_decref(ta);
    if (!json_object_size(doc)) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

const char *tune_cand_label(const struct tune_cand *c, char *buf, size_t len)
{
    size_t o = 0;

    buf[0] = '\0';
    for (unsigned i = 0; i < c->n && o < len; i++) {
        const struct tune_setting *s = &c->s[i];
        const char *pre = s->route == TUNE_TRAINARG    ? "args."
                          : s->route == TUNE_ENV       ? "env."
                          : s->route == TUNE_FLAG      ? "--"
                          : is_bare_loader_key(s->key) ? ""
                                                       : "loader.";
        o += (size_t)snprintf(buf + o, len - o, "%s%s%s=%s", i ? " " : "", pre, s->key, s->val);
    }
    if (!c->n)
        snprintf(buf, len, "(unchanged)");
    return buf;
}

/* A value as Python source: True/False/None, numbers as typed, else a quoted string. */
static const char *py_value(const char *v, char *buf, size_t len)
{
    json_t *j = tune_value_json(v);

    if (json_is_true(j))
        snprintf(buf, len, "True");
    else if (json_is_false(j))
        snprintf(buf, len, "False");
    else if (json_is_null(j))
        snprintf(buf, len, "None");
    else if (json_is_number(j))
        snprintf(buf, len, "%s", v);
    else
        snprintf(buf, len, "\"%s\"", v);
    json_decref(j);
    return buf;
}

unsigned tune_flags(const struct tune_cand *c, enum tune_framework fw, const char **out,
                    unsigned max)
{
    static char names[TUNE_MAX_SETTINGS][TUNE_KEY_MAX + 16];
    unsigned k = 0;

    for (unsigned i = 0; i < c->n && k + 2 <= max; i++) {
        const struct tune_setting *s = &c->s[i];
        if (s->route == TUNE_FLAG) {
            snprintf(names[i], sizeof names[i], "--%s", s->key);
        } else if (fw == TUNE_FW_SWIFT &&
                   (s->route == TUNE_TRAINARG ||
                    (s->route == TUNE_LOADER && is_bare_loader_key(s->key)))) {
            /* ms-swift takes the TrainingArguments fields as flags */
            if (s->route == TUNE_LOADER)
                snprintf(names[i], sizeof names[i], "--dataloader_%s", s->key);
            else
                snprintf(names[i], sizeof names[i], "--%s", s->key);
        } else {
            continue;
        }
        out[k++] = names[i];
        out[k++] = s->val;
    }
    return k;
}

const char *tune_spell(const struct tune_cand *c, enum tune_framework fw, char *buf, size_t len)
{
    size_t o = 0;
    char v[TUNE_VAL_MAX + 4];
    int any;

    buf[0] = '\0';
#define ADD(...)                                                                                   \
    do {                                                                                           \
        if (o < len)                                                                               \
            o += (size_t)snprintf(buf + o, len - o, __VA_ARGS__);                                  \
    } while (0)
    if (fw == TUNE_FW_SWIFT) {
        const char *w[2 * TUNE_MAX_SETTINGS];
        unsigned k = tune_flags(c, fw, w, 2 * TUNE_MAX_SETTINGS);
        if (k) {
            ADD("swift ...");
            for (unsigned i = 0; i < k; i++)
                ADD(" %s", w[i]);
        }
    } else {
        /* the loader line: DataLoader(...) for plain PyTorch, TrainingArguments for HF */
        any = 0;
        for (unsigned i = 0; i < c->n; i++) {
            const struct tune_setting *s = &c->s[i];
            if (s->route != TUNE_LOADER || (fw == TUNE_FW_HF && is_bare_loader_key(s->key)))
                continue;
            ADD("%s%s=%s", any ? ", " : "DataLoader(..., ", s->key, py_value(s->val, v, sizeof v));
            any = 1;
        }
        if (any)
            ADD(")");
        any = 0;
        for (unsigned i = 0; i < c->n; i++) {
            const struct tune_setting *s = &c->s[i];
            char field[TUNE_KEY_MAX + 16];
            if (s->route == TUNE_TRAINARG)
                snprintf(field, sizeof field, "%s", s->key);
            else if (s->route == TUNE_LOADER && fw == TUNE_FW_HF && is_bare_loader_key(s->key))
                trainarg_of_loader(s->key, field, sizeof field);
            else
                continue;
            ADD("%s%s=%s",
                any ? ", "
                : o ? "\nTrainingArguments(..., "
                    : "TrainingArguments(..., ",
                field, py_value(s->val, v, sizeof v));
            any = 1;
        }
        if (any)
            ADD(")");
        any = 0;
        for (unsigned i = 0; i < c->n; i++)
            if (c->s[i].route == TUNE_FLAG) {
                ADD("%s--%s %s",
                    any ? " "
                    : o ? "\nCMD ... "
                        : "CMD ... ",
                    c->s[i].key, c->s[i].val);
                any = 1;
            }
    }
    for (unsigned i = 0; i < c->n; i++)
        if (c->s[i].route == TUNE_ENV)
            ADD("%sexport %s=%s", o ? "\n" : "", c->s[i].key, c->s[i].val);
#undef ADD
    return buf;
}
