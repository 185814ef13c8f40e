/*
 * plan.h - `gpuscope tune`'s pure logic (docs/tune.md): what a trial changes (settings and how
 * each reaches the job), the candidates a baseline's findings and --try point at, a trial's
 * window figures from its step records, the ranking, the early cut, the loss check and the
 * change spelled for the framework. No I/O: the driver (tune.c) runs the trials.
 */
#ifndef GS_CLI_TUNE_PLAN_H
#define GS_CLI_TUNE_PLAN_H

#include <stddef.h>

#include <jansson.h>

#define TUNE_MAX_SETTINGS 8
#define TUNE_MAX_TRIALS 32
#define TUNE_KEY_MAX 64
#define TUNE_VAL_MAX 64

/* How a setting reaches the job. */
enum tune_route {
    TUNE_LOADER,   /* a DataLoader keyword (GPUSCOPE_TUNE "dataloader"; HF: training_args too) */
    TUNE_TRAINARG, /* a Hugging Face TrainingArguments field (GPUSCOPE_TUNE "training_args") */
    TUNE_FLAG,     /* a command-line flag appended to the command (ms-swift: --KEY VALUE) */
    TUNE_ENV,      /* an environment variable of the command (NCCL_..., OMP_NUM_THREADS) */
};

enum tune_framework { TUNE_FW_TORCH, TUNE_FW_HF, TUNE_FW_SWIFT };

struct tune_setting {
    enum tune_route route;
    char key[TUNE_KEY_MAX]; /* num_workers; ddp_bucket_cap_mb; --flag name without dashes */
    char val[TUNE_VAL_MAX]; /* as typed: 4, true, 25 */
};

struct tune_cand {
    unsigned n;
    struct tune_setting s[TUNE_MAX_SETTINGS];
    int needs_workers; /* a loader setting that means nothing without worker processes */
    char why[160];     /* the finding or option it comes from */
};

/* A --try KEY=V1,V2,... into one candidate per value (appended to out[*n], at most max).
 * KEY: num_workers, prefetch_factor, persistent_workers, pin_memory (DataLoader),
 * loader.NAME (another DataLoader keyword), args.NAME (TrainingArguments), --NAME (a flag),
 * env.NAME. 0, or -1 with why. */
int tune_parse_try(const char *spec, struct tune_cand *out, unsigned *n, unsigned max, char *why,
                   size_t why_len);

/* The framework of a baseline report (run.framework, the command: swift). */
enum tune_framework tune_framework_of(const json_t *report);
const char *tune_framework_name(enum tune_framework fw);

/* The first round's candidates from the baseline report's findings and facts: worker counts
 * (2, 4, 8 and half the CPU cores, at most the cores, not the current one) for a data_loading
 * finding (or a data ratio over 0.05), DDP bucket sizes (HF: ddp_bucket_cap_mb) for a
 * communication finding. Appended to out[*n]; ncpu is the machine's when the report has none. */
void tune_candidates_round1(const json_t *report, long ncpu, struct tune_cand *out, unsigned *n,
                            unsigned max);

/* The second round on top of base (the best worker count; NULL: the job's own), when there
 * are workers (base_workers): prefetch_factor 4, persistent_workers, and pin_memory when the
 * run has a CUDA GPU; each a candidate holding the base's settings too. */
void tune_candidates_round2(const json_t *report, const struct tune_cand *base, int base_workers,
                            struct tune_cand *out, unsigned *n, unsigned max);

/* A trial's window figures from its step records (steps.jsonl's "step" objects, any order, any
 * ranks): per rank the steps after the warmup up to warmup+steps, timed from the end of step
 * warmup. The job's steps/s is its slowest rank's, its samples/s the ranks' sum. */
struct tune_window {
    unsigned ranks;
    unsigned steps;       /* window steps of the slowest rank */
    double seconds;       /* that rank's window span */
    double steps_per_s;   /* NaN when no window */
    double samples_per_s; /* NaN when samples unknown */
    double tokens_per_s;  /* the ranks' sum; NaN unless every window step carried "tokens" */
    double data_ratio;    /* data ms / wall, NaN unknown */
    double comm_ratio;    /* communication ms / wall, NaN when not measured */
    double step_p50_ms, step_p95_ms;
    double t_from, t_to; /* the slowest rank's window, unix seconds (GPU samples) */
};
int tune_window_stats(const json_t *steps, long warmup, long nsteps, struct tune_window *w);

/* The window's MFU: the report's mfu scaled by the window's tokens/s against the report's
 * train_tokens_per_second (MFU is linear in tokens/s, its FLOPs per token and peaks are the
 * run's); NaN when any of the three is unknown. */
double tune_window_mfu(const json_t *report, double window_tokens_per_s);

/* The losses logged at steps 1..upto (log records with "loss"): array of [step, loss]. */
json_t *tune_losses(const json_t *records, long upto);

/* Whether a trial's losses diverge from the baseline's at the same steps: the mean relative
 * difference over the steps both logged is over tol. 1 diverges, 0 not, -1 nothing shared.
 * *diff the mean relative difference. */
int tune_loss_diverges(const json_t *base, const json_t *trial, double tol, double *diff);

/* A running trial clearly worse than the best: after at least min_steps window steps its
 * steps/s is under best * (1 - margin). */
int tune_cut_early(double trial_sps, unsigned trial_steps, double best_sps, unsigned min_steps,
                   double margin);

/* Whether a trial's gain over the baseline is worth a change: over min_gain (0.05 = 5 %). */
int tune_worth(double base_sps, double trial_sps, double min_gain);

/* The trial to recommend among n (index 0 the baseline; ok[i]: measured, applied, its loss not
 * diverging): the fastest usable one when it is worth a change over the baseline (tune_worth),
 * then, of the trials whose settings are a subset of its own and whose steps/s is within
 * min_gain of it, the one with the fewest settings (a setting that adds nothing measurable is
 * left out of the change). -1: none worth it. */
int tune_recommend(const struct tune_cand *const *cands, const double *sps, const int *ok,
                   unsigned n, double min_gain);

/* The best combination (plan step 3) into *out: the fastest usable trial's settings plus the
 * settings of every other usable trial that was worth it over its own base (the fastest of
 * the trials whose settings are a strict subset of its own, else the baseline, index 0) and
 * whose keys the combination lacks. 1 when that adds a setting to the fastest trial's, else 0
 * (nothing to try). */
int tune_combination(const struct tune_cand *const *cands, const double *sps, const int *ok,
                     unsigned n, double min_gain, struct tune_cand *out);

/* Whether every setting of a is one of b's (same route, key and value). */
int tune_subset(const struct tune_cand *a, const struct tune_cand *b);

/* GPUSCOPE_TUNE for a candidate (NULL when no setting goes through it): {"dataloader": {...},
 * "dataloader_scope": scope, "training_args": {...}} with values typed (int, float, bool,
 * null, else string). New reference. */
json_t *tune_env_json(const struct tune_cand *c, enum tune_framework fw, const char *scope);

/* A value as JSON: 4 -> 4, 0.5 -> 0.5, true/false, none/null -> null, else a string. */
json_t *tune_value_json(const char *v);

/* The candidate's settings as "num_workers=4 prefetch_factor=4" (into buf). */
const char *tune_cand_label(const struct tune_cand *c, char *buf, size_t len);

/* The change that makes the candidate permanent, spelled for the framework, one line per
 * route: "DataLoader(..., num_workers=4, prefetch_factor=4)",
 * "TrainingArguments(..., dataloader_num_workers=4)", "swift ... --dataloader_num_workers 4",
 * "export NCCL_ALGO=Ring". Into buf, lines separated by '\n'. */
const char *tune_spell(const struct tune_cand *c, enum tune_framework fw, char *buf, size_t len);

/* The flags a candidate appends to the command (ms-swift and --NAME settings): the words, in
 * order, into argv-like out (pointers into c and static text); returns how many (<= max). */
unsigned tune_flags(const struct tune_cand *c, enum tune_framework fw, const char **out,
                    unsigned max);

#endif
