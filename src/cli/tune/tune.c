/*
 * `gpuscope tune [OPTIONS] -- CMD [ARGS...]` (docs/tune.md): runs CMD several times, each a
 * `gpuscope run --stop-after-steps W+N` trial of its own directory, a baseline first, then one
 * trial per candidate setting (plan.h: from the baseline's findings and --try) and the best
 * combination; ranks them by the steps/s of their window (the N steps after W of warmup) and
 * prints the before/after table, one line per trial and the change to make the best
 * permanent; writes DIR/tune.json and DIR/tune.html (the compare page of baseline vs best,
 * with the trial table). Settings reach the job through GPUSCOPE_TUNE (the package's hooks
 * apply them and write tune-applied-rank<R>.json into the trial's run directory), appended
 * flags (ms-swift) or the environment.
 *
 * One thread. Ctrl-C: the running trial (whose CMD the trial's gpuscope run stops) ends, and
 * what was measured so far is printed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "base/clock.h"
#include "base/dirfile.h"
#include "base/term.h"
#include "cli/cli.h"
#include "cli/tune/plan.h"
#include "gpuscope/gs_err.h"
#include "runview/compare.h"
#include "runview/page.h"
#include "runview/rundata.h"
#include "store/samples.h"

#define TUNE_EXIT_REFUSED 1 /* no baseline to tune (no steps, a crash, not applied) */
#define TUNE_EXIT_FAIL 125

struct tune_opts {
    const char *out;
    long steps, warmup;
    double budget_s; /* 0: none */
    const char *tries[16];
    unsigned n_tries;
    const char *scope;
    double min_gain, loss_tol, cut_margin, trial_timeout_s;
    int help, no_search;
    char **cmd;
};

enum trial_state { T_PENDING, T_MEASURED, T_CUT, T_CRASHED, T_NOT_APPLIED, T_NO_WINDOW, T_SKIPPED };

static const char *const state_names[] = {"pending",     "measured",  "cut early", "crashed",
                                          "not applied", "no window", "skipped"};

struct trial {
    char name[96];
    struct tune_cand cand;
    enum trial_state state;
    char note[512];
    struct tune_window w;
    json_t *report; /* metrics_report.json, or NULL */
    json_t *losses;
    double loss_diff;
    int diverged;
    int exit_code;
    double seconds;      /* the trial's wall time, start-up to teardown */
    double first_step_s; /* from its start to the first step's begin (t0): start-up */
    double last_step_s;  /* from the last step's end (t1) to the trial's end: stop, teardown */
    double started_at, ended_at; /* unix seconds */
    double gpu_util; /* the run's GPUs' mean utilization (%) over the window, NaN none */
    const char *gpu_util_source; /* "window" (samples.db) or "run" (the report's average) */
};

static volatile sig_atomic_t g_interrupted;
static volatile sig_atomic_t g_int_sent; /* the stop was a kill() at tune (not a terminal's) */

static void on_sigint(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    g_interrupted = 1;
    /* a terminal's Ctrl-C also reached the trial's gpuscope run (our process group), which
     * passes it on to its command; a kill() at tune alone is passed on by run_trial */
    if (si->si_code == SI_USER || si->si_code == SI_QUEUE || sig == SIGTERM)
        g_int_sent = 1;
}

/* ---- options ---- */

static void usage(FILE *out)
{
    fputs("usage: gpuscope tune [OPTIONS] -- CMD [ARGS...]\n"
          "\n"
          "Runs CMD for short measured windows with different settings and prints which\n"
          "make it faster: a baseline, one trial per candidate (from the baseline's findings\n"
          "and --try), then the best combination. Each trial is a `gpuscope run` of its own\n"
          "directory, stopped after its window. Settings reach the job without editing it\n"
          "(DataLoader keywords, TrainingArguments fields, ms-swift flags, environment).\n"
          "\n"
          "options:\n"
          "  --out DIR          where the trials and tune.json go (default\n"
          "                     ./gpuscope-tune-YYYYmmdd-HHMMSS)\n"
          "  --steps N          optimizer steps measured per trial (default 30)\n"
          "  --warmup W         steps before the window, not measured (default 5)\n"
          "  --budget T         total time for all trials: 90s, 10m, 1h (default none);\n"
          "                     trials that would not fit are skipped\n"
          "  --try KEY=V1,V2    a trial per value (repeatable). KEY: num_workers,\n"
          "                     prefetch_factor, persistent_workers, pin_memory,\n"
          "                     loader.NAME, args.NAME (TrainingArguments), --FLAG (appended\n"
          "                     to CMD), env.NAME\n"
          "  --only-try         no candidates from the findings: only --try\n"
          "  --scope all|train  DataLoaders changed: every one (default) or the training one\n"
          "  --min-gain F       smallest steps/s gain worth a change (default 0.05: 5 %)\n"
          "  --loss-tol F       mean relative loss difference from the baseline's first\n"
          "                     steps that flags a trial (default 0.10)\n"
          "  --cut-margin F     cut a trial whose window is that much slower than the best\n"
          "                     after a quarter of its steps (default 0.30; 0: never)\n"
          "  --trial-timeout S  stop a trial after S seconds (default: 5 x the baseline's\n"
          "                     time, at least 60)\n"
          "  -h, --help         this help\n"
          "\n"
          "Never changes batch size, model, precision or data unless --try names them.\n"
          "Exit status: 0 done (whether or not a setting was worth it); 1 the baseline could\n"
          "not be tuned (no training steps, a crash, settings not applied); 130 Ctrl-C\n"
          "(what was measured is printed); 2 bad usage; 125 tune itself failed.\n"
          "See docs/tune.md.\n",
          out);
}

static int parse_duration(const char *s, double *out)
{
    char *end;
    double v;

    errno = 0;
    v = strtod(s, &end);
    if (errno || end == s || !isfinite(v) || v <= 0)
        return -1;
    if (!*end || strcmp(end, "s") == 0)
        ;
    else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
        v *= 60;
    else if (strcmp(end, "h") == 0)
        v *= 3600;
    else
        return -1;
    *out = v;
    return 0;
}

static int parse_num(const char *opt, const char *v, double lo, double hi, int integer, double *out)
{
    char *end = NULL;
    double x;

    errno = 0;
    x = v ? strtod(v, &end) : NAN;
    if (!v || errno || end == v || *end || !isfinite(x) || x < lo || x > hi ||
        (integer && x != floor(x))) {
        fprintf(stderr, "gpuscope tune: %s: '%s' is not %s from %g to %g\n", opt, v ? v : "",
                integer ? "a whole number" : "a number", lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

static int parse_opts(struct tune_opts *o, int argc, char **argv)
{
    int i;

    memset(o, 0, sizeof *o);
    o->steps = 30;
    o->warmup = 5;
    o->scope = "all";
    o->min_gain = 0.05;
    o->loss_tol = 0.10;
    o->cut_margin = 0.30;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *eq = strchr(a, '='), *v;
        char name[32];
        double x;

        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-')
            break;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            o->help = 1;
            return 0;
        }
        if (strcmp(a, "--only-try") == 0) {
            o->no_search = 1;
            continue;
        }
        snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - a) : (int)strlen(a), a);
        v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (strcmp(name, "--out") == 0 && v && *v) {
            o->out = v;
        } else if (strcmp(name, "--steps") == 0) {
            if (parse_num(name, v, 2, 1e6, 1, &x) != 0)
                return -1;
            o->steps = (long)x;
        } else if (strcmp(name, "--warmup") == 0) {
            if (parse_num(name, v, 0, 1e6, 1, &x) != 0)
                return -1;
            o->warmup = (long)x;
        } else if (strcmp(name, "--budget") == 0) {
            if (!v || parse_duration(v, &o->budget_s) != 0) {
                fprintf(stderr, "gpuscope tune: --budget: '%s' is not a duration (90s, 10m, 1h)\n",
                        v ? v : "");
                return -1;
            }
        } else if (strcmp(name, "--try") == 0 && v) {
            if (o->n_tries == sizeof o->tries / sizeof o->tries[0]) {
                fprintf(stderr, "gpuscope tune: --try: at most 16\n");
                return -1;
            }
            o->tries[o->n_tries++] = v;
        } else if (strcmp(name, "--scope") == 0) {
            if (!v || (strcmp(v, "all") != 0 && strcmp(v, "train") != 0)) {
                fprintf(stderr, "gpuscope tune: --scope: '%s' is not all or train\n", v ? v : "");
                return -1;
            }
            o->scope = v;
        } else if (strcmp(name, "--min-gain") == 0) {
            if (parse_num(name, v, 0, 10, 0, &o->min_gain) != 0)
                return -1;
        } else if (strcmp(name, "--loss-tol") == 0) {
            if (parse_num(name, v, 0, 100, 0, &o->loss_tol) != 0)
                return -1;
        } else if (strcmp(name, "--cut-margin") == 0) {
            if (parse_num(name, v, 0, 0.99, 0, &o->cut_margin) != 0)
                return -1;
        } else if (strcmp(name, "--trial-timeout") == 0) {
            if (parse_num(name, v, 1, 86400, 0, &o->trial_timeout_s) != 0)
                return -1;
        } else {
            fprintf(stderr, "gpuscope tune: %s '%s'\n",
                    v || eq ? "unknown option or bad value:" : "missing value for", a);
            return -1;
        }
    }
    if (i >= argc) {
        fprintf(stderr, "gpuscope tune: no command given (gpuscope tune [OPTIONS] -- CMD ...)\n");
        return -1;
    }
    o->cmd = argv + i;
    return 0;
}

/* ---- reading a trial ---- */

/* steps.jsonl: its step records and every record. */
static void read_records(const char *path, json_t **steps, json_t **all)
{
    FILE *f = fopen(path, "re");
    char *line = NULL;
    size_t cap = 0;

    *steps = json_array();
    *all = json_array();
    if (!f)
        return;
    while (getline(&line, &cap, f) > 0) {
        json_t *r = json_loads(line, 0, NULL);
        const char *type = json_string_value(json_object_get(r, "type"));
        if (!r)
            continue; /* the line being written */
        if (type && strcmp(type, "step") == 0)
            json_array_append(*steps, r);
        json_array_append_new(*all, r);
    }
    free(line);
    fclose(f);
}

/* Whether a rank's "applied" names setting s: "dataloader.K" (from a hook that saw a
 * DataLoader: seen > 0), "training_args.K" or, for a DataLoader keyword,
 * "training_args.dataloader_K" (a Trainer builds its loader from those). */
static int rank_applied(const json_t *applied, long long seen, const struct tune_setting *s)
{
    char k[TUNE_KEY_MAX + 32];

    snprintf(k, sizeof k, "%s.%s", s->route == TUNE_LOADER ? "dataloader" : "training_args",
             s->key);
    if (json_object_get(applied, k) && (s->route != TUNE_LOADER || seen > 0))
        return 1;
    if (s->route != TUNE_LOADER)
        return 0;
    snprintf(k, sizeof k, "training_args.%s", s->key);
    if (json_object_get(applied, k))
        return 1;
    snprintf(k, sizeof k, "training_args.dataloader_%s", s->key);
    return json_object_get(applied, k) != NULL;
}

/* The package's tune-applied-rank<R>.json files in the trial's directory (docs/tune.md):
 * whether every rank (the report's count) applied every setting that went through
 * GPUSCOPE_TUNE; why not in why. A job that wrote none and whose settings (the report's
 * facts) name no DataLoader had none for the hooks to change. 1 applied, 0 not. */
static int check_applied(const char *dir, const struct tune_cand *c, const json_t *report,
                         char *why, size_t len)
{
    long ranks = (long)json_integer_value(json_object_get(report, "ranks"));
    const json_t *facts = json_object_get(report, "facts");
    unsigned loader_settings = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    unsigned files = 0;
    int ok = 1;

    while (ok && d && (e = readdir(d))) {
        char p[PATH_MAX + 256];
        json_t *doc, *errs, *applied;
        long long rank;
        if (strncmp(e->d_name, "tune-applied-rank", 17) != 0)
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        doc = json_load_file(p, 0, NULL);
        if (!doc)
            continue;
        files++;
        rank = (long long)json_integer_value(json_object_get(doc, "rank"));
        errs = json_object_get(doc, "errors");
        applied = json_object_get(doc, "applied");
        if (json_array_size(errs) > 0) {
            snprintf(why, len, "rank %lld: %s", rank,
                     json_string_value(json_array_get(errs, 0))
                         ? json_string_value(json_array_get(errs, 0))
                         : "error");
            ok = 0;
        }
        for (unsigned i = 0; ok && i < c->n; i++) {
            const struct tune_setting *s = &c->s[i];
            if ((s->route != TUNE_LOADER && s->route != TUNE_TRAINARG) ||
                rank_applied(
                    applied,
                    (long long)json_integer_value(json_object_get(doc, "dataloaders_seen")), s))
                continue;
            ok = 0;
            if (s->route == TUNE_LOADER &&
                json_integer_value(json_object_get(doc, "dataloaders_seen")) == 0)
                snprintf(why, len,
                         "rank %lld: the hook saw no DataLoader (the job builds none the hooks "
                         "reach)",
                         rank);
            else
                snprintf(
                    why, len,
                    "rank %lld did not apply %s (saw %lld DataLoader(s), changed "
                    "%lld; --scope?)",
                    rank, s->key,
                    (long long)json_integer_value(json_object_get(doc, "dataloaders_seen")),
                    (long long)json_integer_value(json_object_get(doc, "dataloaders_changed")));
        }
        json_decref(doc);
    }
    if (d)
        closedir(d);
    if (!ok)
        return 0;
    for (unsigned i = 0; i < c->n; i++)
        loader_settings += c->s[i].route == TUNE_LOADER;
    if (!files && loader_settings && json_object_size(facts) &&
        !json_object_get(facts, "loader_num_workers") &&
        !json_object_get(facts, "dataloader_num_workers")) {
        snprintf(why, len,
                 "the hook saw no DataLoader: the run's settings name none, and no "
                 "tune-applied-rank*.json was written");
        return 0;
    }
    if (!files) {
        snprintf(why, len,
                 "no tune-applied-rank*.json in the run directory: the job's gpuscope package "
                 "did not apply GPUSCOPE_TUNE (not a Python job, --no-auto, or a package "
                 "without tune hooks)");
        return 0;
    }
    if (ranks > 0 && files < (unsigned long)ranks) {
        snprintf(why, len, "%u of the job's %ld ranks said they applied the settings", files,
                 ranks);
        return 0;
    }
    return 1;
}

/* ---- the window's GPU utilization ---- */

struct util_acc {
    unsigned char gpu[64]; /* the run's GPUs (NVML indices) */
    double sum;
    unsigned n;
};

static int util_row(void *ctx, const struct gs_store_sample_row *row)
{
    struct util_acc *a = ctx;

    if (row->gpu < sizeof a->gpu && a->gpu[row->gpu] && isfinite(row->util_ratio)) {
        a->sum += row->util_ratio * 100.0;
        a->n++;
    }
    return 0;
}

/* The mean utilization of the run's GPUs (the report's "gpus") over the trial's window, from
 * its samples.db; else the report's whole-run average; NaN when the run had no GPU. */
static void window_gpu_util(const char *dir, struct trial *t)
{
    struct util_acc a;
    char path[PATH_MAX + 16];
    struct gs_err err;
    size_t i;
    const json_t *g;
    unsigned gpus = 0;

    memset(&a, 0, sizeof a);
    t->gpu_util = NAN;
    t->gpu_util_source = NULL;
    json_array_foreach(json_object_get(t->report, "gpus"), i, g)
    {
        json_int_t idx = json_integer_value(json_object_get(g, "index"));
        if (idx >= 0 && idx < (json_int_t)sizeof a.gpu) {
            a.gpu[idx] = 1;
            gpus++;
        }
    }
    if (!gpus)
        return;
    snprintf(path, sizeof path, "%s/samples.db", dir);
    if (isfinite(t->w.t_from) &&
        gs_store_samples_read(path, t->w.t_from, t->w.t_to, util_row, &a, &err) == GS_OK && a.n) {
        t->gpu_util = a.sum / a.n;
        t->gpu_util_source = "window";
    } else if (json_is_number(json_object_get(t->report, "gpu_avg_utilization_percent"))) {
        t->gpu_util = json_number_value(json_object_get(t->report, "gpu_avg_utilization_percent"));
        t->gpu_util_source = "run";
    }
}

/* ---- running a trial ---- */

/* The last non-empty line of the trial's log (what its gpuscope run said last). */
static void log_tail(const char *outdir, const char *name, char *out, size_t len)
{
    char path[PATH_MAX + 128], *line = NULL;
    size_t cap = 0;
    FILE *f;

    out[0] = '\0';
    snprintf(path, sizeof path, "%s/%s.log", outdir, name);
    f = fopen(path, "re");
    if (!f)
        return;
    while (getline(&line, &cap, f) > 0) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0])
            snprintf(out, len, "%s", line);
    }
    free(line);
    fclose(f);
}

/* Whether a setting of c goes through GPUSCOPE_TUNE (then the package must say it applied). */
static int tune_env_json_needed(const struct tune_cand *c, enum tune_framework fw)
{
    json_t *e = tune_env_json(c, fw, "all");
    int needed = e != NULL;

    json_decref(e);
    return needed;
}

static void self_exe(char *out, size_t len)
{
    ssize_t n = readlink("/proc/self/exe", out, len - 1);
    out[n > 0 ? n : 0] = '\0';
}

static double mono(void)
{
    return gs_clock_mono_s();
}

/* Runs one trial to its end; fills t. base_sps: the best steps/s so far (the early cut).
 * budget_end: the monotonic time the budget ends (0 none). */
static void run_trial(const struct tune_opts *o, const char *outdir, int outfd, struct trial *t,
                      enum tune_framework fw, double best_sps, double budget_end, double timeout_s)
{
    char exe[PATH_MAX], dir[PATH_MAX], logname[128], stopn[24], path[PATH_MAX + 32];
    const char *flags[2 * TUNE_MAX_SETTINGS];
    unsigned nflags = tune_flags(&t->cand, fw, flags, 2 * TUNE_MAX_SETTINGS), ncmd = 0;
    json_t *envj = tune_env_json(&t->cand, fw, o->scope), *steps = NULL, *all = NULL;
    char *envtext = envj ? json_dumps(envj, JSON_COMPACT) : NULL;
    char **argv;
    int logfd, status = 0, cut = 0, killed = 0;
    double start = mono(), next_check = start + 0.5, termed_at = 0;
    pid_t pid;

    json_decref(envj);
    self_exe(exe, sizeof exe);
    snprintf(dir, sizeof dir, "%s/%s", outdir, t->name);
    snprintf(logname, sizeof logname, "%s.log", t->name);
    snprintf(stopn, sizeof stopn, "%ld", o->warmup + o->steps);
    while (o->cmd[ncmd])
        ncmd++;
    argv = calloc(ncmd + nflags + 16, sizeof *argv);
    logfd = gs_dirfile_create(outfd, logname, O_WRONLY, 0644);
    if (!argv || logfd < 0) {
        t->state = T_CRASHED;
        snprintf(t->note, sizeof t->note, "cannot start: %s", strerror(errno));
        free(argv);
        free(envtext);
        if (logfd >= 0)
            close(logfd);
        return;
    }
    {
        unsigned k = 0;
        argv[k++] = exe;
        argv[k++] = "run";
        argv[k++] = "--out";
        argv[k++] = dir;
        argv[k++] = "--stop-after-steps";
        argv[k++] = stopn;
        argv[k++] = "--stacks";
        argv[k++] = "off";
        argv[k++] = "--no-agent";
        argv[k++] = "--name";
        argv[k++] = t->name;
        argv[k++] = "--";
        for (unsigned i = 0; i < ncmd; i++)
            argv[k++] = o->cmd[i];
        for (unsigned i = 0; i < nflags; i++)
            argv[k++] = (char *)flags[i];
        argv[k] = NULL;
    }
    t->started_at = gs_clock_real_s();
    pid = fork();
    if (pid == 0) {
        signal(SIGINT, SIG_DFL);
        dup2(logfd, STDOUT_FILENO);
        dup2(logfd, STDERR_FILENO);
        if (envtext)
            setenv("GPUSCOPE_TUNE", envtext, 1);
        else
            unsetenv("GPUSCOPE_TUNE");
        for (unsigned i = 0; i < t->cand.n; i++)
            if (t->cand.s[i].route == TUNE_ENV)
                setenv(t->cand.s[i].key, t->cand.s[i].val, 1);
        execv(exe, argv);
        _exit(TUNE_EXIT_FAIL);
    }
    close(logfd);
    free(envtext);
    free(argv);
    if (pid < 0) {
        t->state = T_CRASHED;
        snprintf(t->note, sizeof t->note, "fork: %s", strerror(errno));
        return;
    }
    snprintf(path, sizeof path, "%s/steps.jsonl", dir);
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        double now = mono();
        if (r == pid)
            break;
        if (r < 0 && errno != EINTR)
            break;
        if (!cut && now >= next_check) {
            struct tune_window w;
            next_check = now + 0.5;
            read_records(path, &steps, &all);
            if (o->cut_margin > 0 && tune_window_stats(steps, o->warmup, o->steps, &w) == 0 &&
                tune_cut_early(w.steps_per_s, w.steps, best_sps,
                               (unsigned)(o->steps / 4 > 3 ? o->steps / 4 : 3), o->cut_margin) &&
                w.steps < (unsigned)o->steps) {
                cut = 1;
                snprintf(t->note, sizeof t->note,
                         "cut after %u window step(s): %.3g steps/s against the best %.3g", w.steps,
                         w.steps_per_s, best_sps);
            }
            json_decref(steps);
            json_decref(all);
            steps = all = NULL;
        }
        if (!cut && g_interrupted) {
            cut = 4;
            snprintf(t->note, sizeof t->note, "interrupted (Ctrl-C)");
            if (g_int_sent)
                kill(pid, SIGINT); /* its gpuscope run stops its command's group */
            termed_at = now;
        }
        if (!cut && budget_end > 0 && now >= budget_end) {
            cut = 2;
            snprintf(t->note, sizeof t->note, "cut: the --budget ran out");
        }
        if (!cut && now - start >= timeout_s) {
            cut = 3;
            snprintf(t->note, sizeof t->note, "cut: no window after %.0f s (--trial-timeout)",
                     timeout_s);
        }
        if (cut && !termed_at) {
            kill(pid, SIGTERM); /* the trial's gpuscope run stops CMD's group, writes its report */
            termed_at = now;
        }
        if (termed_at && !killed && now - termed_at > 30) {
            kill(pid, SIGKILL);
            killed = 1;
        }
        usleep(50000);
    }
    t->seconds = mono() - start;
    t->ended_at = gs_clock_real_s();
    t->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    snprintf(path, sizeof path, "%s/metrics_report.json", dir);
    t->report = json_load_file(path, 0, NULL);
    snprintf(path, sizeof path, "%s/steps.jsonl", dir);
    read_records(path, &steps, &all);
    t->losses = tune_losses(all, o->warmup + o->steps);
    {
        double t0 = INFINITY, t1 = -INFINITY;
        size_t i;
        const json_t *r;
        json_array_foreach(steps, i, r)
        {
            double a = json_number_value(json_object_get(r, "t0")),
                   b = json_number_value(json_object_get(r, "t1"));
            t0 = a > 0 && a < t0 ? a : t0;
            t1 = b > t1 ? b : t1;
        }
        if (isfinite(t0) && isfinite(t1)) {
            t->first_step_s = t0 - t->started_at;
            t->last_step_s = t->ended_at - t1;
        }
    }
    {
        const json_t *oc = json_object_get(t->report, "outcome");
        const char *st = json_string_value(json_object_get(oc, "status"));
        int have_window = tune_window_stats(steps, o->warmup, o->steps, &t->w) == 0;
        window_gpu_util(dir, t);
        if (cut) {
            t->state = T_CUT;
        } else if (!t->report || !st ||
                   (strcmp(st, "stopped") != 0 && strcmp(st, "completed") != 0)) {
            const char *exc = json_string_value(json_object_get(oc, "exception"));
            char last[200];
            if (!t->report) /* CMD never ran: not found, not executable, the directory */
                log_tail(outdir, t->name, last, sizeof last);
            t->state = T_CRASHED;
            snprintf(t->note, sizeof t->note, "%s%s%s (exit %d; see %s/%s.log)",
                     st ? st : "no report", exc || !t->report ? ": " : "",
                     exc          ? exc
                     : !t->report ? last
                                  : "",
                     t->exit_code, outdir, t->name);
        } else if (!have_window) {
            const char *why = json_string_value(json_object_get(oc, "zero_steps_reason"));
            t->state = T_NO_WINDOW;
            snprintf(t->note, sizeof t->note, "%lld step(s), the window needs %ld%s%s",
                     (long long)json_integer_value(json_object_get(oc, "steps_completed")),
                     o->warmup + 1, why ? ": " : "", why ? why : "");
        } else {
            t->state = T_MEASURED;
            if ((long)t->w.steps < o->steps)
                snprintf(t->note, sizeof t->note, "the command ended after %u window step(s)",
                         t->w.steps);
        }
        if ((t->state == T_MEASURED || t->state == T_CUT) && tune_env_json_needed(&t->cand, fw)) {
            char why[400];
            if (!check_applied(dir, &t->cand, t->report, why, sizeof why)) {
                t->state = T_NOT_APPLIED;
                snprintf(t->note, sizeof t->note, "%s", why);
            }
        }
    }
    json_decref(steps);
    json_decref(all);
}

/* ---- output ---- */

static double rnum(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static void cell(char *buf, size_t len, double v, const char *fmt)
{
    if (isfinite(v))
        snprintf(buf, len, fmt, v);
    else
        snprintf(buf, len, "n/a");
}

static void change(char *buf, size_t len, double a, double b)
{
    if (isfinite(a) && isfinite(b) && a != 0)
        snprintf(buf, len, "%+.0f %%", (b - a) / fabs(a) * 100.0);
    else
        buf[0] = '\0';
}

/* One row of the before/after table. */
struct row {
    const char *name, *fmt;
    double base, best;
    int larger_is_better;
};

static void print_table(FILE *out, const struct trial *base, const struct trial *best, int color)
{
    struct row rows[12];
    unsigned n = 0;
    const json_t *rb = base->report, *rt = best ? best->report : NULL;
    const struct tune_window *wb = &base->w, *wt = best ? &best->w : &base->w;

    rows[n++] = (struct row){"steps/s", "%.3f", wb->steps_per_s, wt->steps_per_s, 1};
    rows[n++] = (struct row){"samples/s", "%.1f", wb->samples_per_s, wt->samples_per_s, 1};
    /* the windows' tokens/s and MFU (plan.h), shown when the baseline has them */
    if (isfinite(wb->tokens_per_s))
        rows[n++] = (struct row){"tokens/s", "%.0f", wb->tokens_per_s, wt->tokens_per_s, 1};
    if (isfinite(tune_window_mfu(rb, wb->tokens_per_s)))
        rows[n++] = (struct row){"MFU", "%.3f", tune_window_mfu(rb, wb->tokens_per_s),
                                 tune_window_mfu(rt ? rt : rb, wt->tokens_per_s), 1};
    rows[n++] = (struct row){"data loading ratio", "%.3f", wb->data_ratio, wt->data_ratio, -1};
    rows[n++] = (struct row){"communication ratio", "%.3f", wb->comm_ratio, wt->comm_ratio, -1};
    rows[n++] = (struct row){"GPU utilization %", "%.1f", base->gpu_util,
                             best ? best->gpu_util : base->gpu_util, 1};
    rows[n++] = (struct row){"step p50 ms", "%.2f", wb->step_p50_ms, wt->step_p50_ms, -1};
    rows[n++] = (struct row){"step p95 ms", "%.2f", wb->step_p95_ms, wt->step_p95_ms, -1};
    if (best)
        fprintf(out, "\n%s%-22s %14s %14s %10s%s\n", color ? "\033[1m" : "", "", "baseline", "best",
                "change", color ? "\033[0m" : "");
    else
        fprintf(out, "\n%s%-22s %14s%s\n", color ? "\033[1m" : "", "", "baseline",
                color ? "\033[0m" : "");
    for (unsigned i = 0; i < n; i++) {
        char a[32], b[32], c[32];
        int good = isfinite(rows[i].base) && isfinite(rows[i].best) &&
                   (rows[i].best - rows[i].base) * rows[i].larger_is_better > 0;
        cell(a, sizeof a, rows[i].base, rows[i].fmt);
        cell(b, sizeof b, best ? rows[i].best : NAN, rows[i].fmt);
        change(c, sizeof c, rows[i].base, rows[i].best);
        if (!best)
            fprintf(out, "%-22s %14s\n", rows[i].name, a);
        else if (!c[0])
            fprintf(out, "%-22s %14s %14s\n", rows[i].name, a, b);
        else
            fprintf(out, "%-22s %14s %14s %s%10s%s\n", rows[i].name, a, b,
                    color ? (good ? "\033[32m" : "\033[31m") : "", c, color ? "\033[0m" : "");
    }
}

static void print_trials(FILE *out, const struct trial *tr, unsigned n, double base_sps, int color)
{
    int wn = 5, ws = 8;

    for (unsigned i = 0; i < n; i++) {
        char label[256];
        int a = (int)strlen(tr[i].name),
            b = (int)strlen(tune_cand_label(&tr[i].cand, label, sizeof label));
        wn = a > wn ? a : wn;
        ws = b > ws ? b : ws;
    }
    fprintf(out, "\n%s%-*s %-*s %9s %8s %6s  %s%s\n", color ? "\033[1m" : "", wn, "trial", ws,
            "settings", "steps/s", "vs base", "data", "status", color ? "\033[0m" : "");
    for (unsigned i = 0; i < n; i++) {
        char label[256], sps[32], vs[32], data[32];
        const struct trial *t = &tr[i];
        int ok = t->state == T_MEASURED;
        tune_cand_label(&t->cand, label, sizeof label);
        cell(sps, sizeof sps, ok || t->state == T_CUT ? t->w.steps_per_s : NAN, "%.3f");
        if (i > 0 && (ok || t->state == T_CUT))
            change(vs, sizeof vs, base_sps, t->w.steps_per_s);
        else
            snprintf(vs, sizeof vs, i ? "" : "-");
        cell(data, sizeof data, ok || t->state == T_CUT ? t->w.data_ratio : NAN, "%.2f");
        fprintf(out, "%-*s %-*s %9s %8s %6s  %s%s%s%s\n", wn, t->name, ws, label, sps, vs, data,
                state_names[t->state], t->diverged ? ", loss diverges" : "", t->note[0] ? ": " : "",
                t->note);
    }
}

static json_t *window_json(const struct tune_window *w)
{
    json_t *o = json_object();
#define NUM(k, v) json_object_set_new(o, k, isfinite(v) ? json_real(v) : json_null())
    json_object_set_new(o, "ranks", json_integer(w->ranks));
    json_object_set_new(o, "steps", json_integer(w->steps));
    NUM("seconds", w->seconds);
    NUM("steps_per_second", w->steps_per_s);
    NUM("samples_per_second", w->samples_per_s);
    NUM("tokens_per_second", w->tokens_per_s);
    NUM("data_loading_time_ratio", w->data_ratio);
    NUM("communication_time_ratio", w->comm_ratio);
    NUM("step_p50_ms", w->step_p50_ms);
    NUM("step_p95_ms", w->step_p95_ms);
#undef NUM
    return o;
}

static json_t *trial_json(const struct trial *t, enum tune_framework fw, const char *scope)
{
    json_t *o = json_object(), *set = json_array(), *env = tune_env_json(&t->cand, fw, scope);
    static const char *const routes[] = {"dataloader", "training_args", "flag", "env"};
    char label[256];

    for (unsigned i = 0; i < t->cand.n; i++)
        json_array_append_new(set, json_pack("{s:s,s:s,s:o}", "route", routes[t->cand.s[i].route],
                                             "key", t->cand.s[i].key, "value",
                                             tune_value_json(t->cand.s[i].val)));
    json_object_set_new(o, "name", json_string(t->name));
    json_object_set_new(o, "dir", json_string(t->name));
    json_object_set_new(o, "settings", json_string(tune_cand_label(&t->cand, label, sizeof label)));
    json_object_set_new(o, "why", json_string(t->cand.why));
    json_object_set_new(o, "gpuscope_tune", env ? env : json_null());
    json_object_set_new(o, "status", json_string(state_names[t->state]));
    json_object_set_new(o, "note", t->note[0] ? json_string(t->note) : json_null());
    json_object_set_new(o, "exit_code", json_integer(t->exit_code));
    json_object_set_new(o, "window", window_json(&t->w));
    {
        double m = tune_window_mfu(t->report, t->w.tokens_per_s);
        json_object_set_new(o, "mfu", isfinite(m) ? json_real(m) : json_null());
    }
    json_object_set_new(o, "gpu_utilization_percent",
                        isfinite(t->gpu_util) ? json_real(t->gpu_util) : json_null());
    json_object_set_new(o, "gpu_utilization_source",
                        t->gpu_util_source ? json_string(t->gpu_util_source) : json_null());
    json_object_set_new(o, "loss_diverges", json_boolean(t->diverged));
    json_object_set_new(o, "loss_difference",
                        isfinite(t->loss_diff) ? json_real(t->loss_diff) : json_null());
    json_object_set_new(o, "seconds", json_real(t->seconds));
    json_object_set_new(o, "startup_seconds",
                        isfinite(t->first_step_s) ? json_real(t->first_step_s) : json_null());
    json_object_set_new(o, "after_last_step_seconds",
                        isfinite(t->last_step_s) ? json_real(t->last_step_s) : json_null());
    json_object_set_new(o, "started_at", json_real(t->started_at));
    json_object_set_new(o, "ended_at", json_real(t->ended_at));
    json_object_set_new(o, "changes", set);
    return o;
}

/* The HTML escaping of text into f. */
static void html_text(FILE *f, const char *s)
{
    for (; s && *s; s++)
        switch (*s) {
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '&':
            fputs("&amp;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        default:
            fputc(*s, f);
        }
}

/* tune.html: the compare page of baseline vs best (src/runview) with the trial table and the
 * change put in front of it, as plain HTML (the page's CSP allows no new script or style). */
static int write_html(int outfd, const char *outdir, const struct trial *tr, unsigned n,
                      const struct trial *best, const char *spelled, struct gs_err *err)
{
    struct gs_rundata rd[2];
    char p0[PATH_MAX], p1[PATH_MAX], *page = NULL, *table = NULL, *merged, *body;
    size_t len = 0, tlen = 0;
    json_t *doc;
    FILE *f;
    int rc;

    memset(rd, 0, sizeof rd);
    snprintf(p0, sizeof p0, "%s/%s", outdir, tr[0].name);
    snprintf(p1, sizeof p1, "%s/%s", outdir, best ? best->name : tr[0].name);
    if (gs_rundata_load(p0, GS_RUNDATA_REPORT_ONLY, &rd[0], err) != GS_OK)
        return -1;
    if (gs_rundata_load(p1, GS_RUNDATA_REPORT_ONLY, &rd[1], err) != GS_OK) {
        gs_rundata_free(&rd[0]);
        return -1;
    }
    doc = gs_compare_doc(rd, 2);
    rc = doc ? gs_report_page_compare_html(doc, &page, &len, err) : -1;
    json_decref(doc);
    gs_rundata_free(&rd[0]);
    gs_rundata_free(&rd[1]);
    if (rc != GS_OK)
        return -1;
    f = open_memstream(&table, &tlen);
    if (!f) {
        free(page);
        return -1;
    }
    fputs("<section id=\"tune\"><h1>gpuscope tune</h1><p>", f);
    if (best) {
        fputs("Best: ", f);
        html_text(f, best->name);
        fputs(". To make it permanent:</p><pre>", f);
        html_text(f, spelled);
        fputs("</pre>", f);
    } else {
        fputs("No setting was worth changing.</p>", f);
    }
    fputs("<table><thead><tr><th>trial</th><th>settings</th><th>steps/s</th><th>data "
          "ratio</th><th>status</th></tr></thead><tbody>",
          f);
    for (unsigned i = 0; i < n; i++) {
        char label[256];
        fputs("<tr><td>", f);
        html_text(f, tr[i].name);
        fputs("</td><td>", f);
        html_text(f, tune_cand_label(&tr[i].cand, label, sizeof label));
        if (isfinite(tr[i].w.steps_per_s))
            fprintf(f, "</td><td>%.3f</td><td>%.3f</td><td>", tr[i].w.steps_per_s,
                    tr[i].w.data_ratio);
        else
            fputs("</td><td>n/a</td><td>n/a</td><td>", f);
        html_text(f, state_names[tr[i].state]);
        if (tr[i].note[0]) {
            fputs(": ", f);
            html_text(f, tr[i].note);
        }
        fputs("</td></tr>", f);
    }
    fputs("</tbody></table></section>\n", f);
    fclose(f);
    body = strstr(page, "<body>");
    merged = malloc(len + tlen + 1);
    if (!merged || !body) {
        free(merged);
        free(page);
        free(table);
        return gs_err_set(err, GS_EIO, "the compare page has no <body>");
    }
    body += 6;
    memcpy(merged, page, (size_t)(body - page));
    memcpy(merged + (body - page), table, tlen);
    memcpy(merged + (body - page) + tlen, body, len - (size_t)(body - page));
    rc = gs_dirfile_write(outfd, "tune.html", 0644, merged, len + tlen, err);
    free(merged);
    free(page);
    free(table);
    return rc == GS_OK ? 0 : -1;
}

/* ---- main ---- */

static void default_outdir(char *out, size_t len)
{
    time_t now = time(NULL);
    struct tm tm;

    localtime_r(&now, &tm);
    strftime(out, len, "gpuscope-tune-%Y%m%d-%H%M%S", &tm);
}

static int trial_ok(const struct trial *t)
{
    return t->state == T_MEASURED && !t->diverged;
}

static int has_key(const struct tune_cand *c, const char *key, enum tune_route r)
{
    for (unsigned i = 0; i < c->n; i++)
        if (c->s[i].route == r && strcmp(c->s[i].key, key) == 0)
            return 1;
    return 0;
}

/* The best measured trial after the baseline (index), or -1. */
static int best_of(const struct trial *tr, unsigned n)
{
    int best = -1;

    for (unsigned i = 1; i < n; i++)
        if (trial_ok(&tr[i]) && (best < 0 || tr[i].w.steps_per_s > tr[best].w.steps_per_s))
            best = (int)i;
    return best;
}

/* The trial to recommend (plan.h's tune_recommend), or -1. */
static int recommend(const struct trial *tr, unsigned n, double min_gain)
{
    const struct tune_cand *c[TUNE_MAX_TRIALS + 2];
    double sps[TUNE_MAX_TRIALS + 2];
    int ok[TUNE_MAX_TRIALS + 2];

    for (unsigned i = 0; i < n && i < TUNE_MAX_TRIALS + 2; i++) {
        c[i] = &tr[i].cand;
        sps[i] = tr[i].w.steps_per_s;
        ok[i] = i == 0 || trial_ok(&tr[i]);
    }
    return tune_recommend(c, sps, ok, n, min_gain);
}

static void name_trial(struct trial *t, unsigned idx)
{
    char label[256], *p;

    tune_cand_label(&t->cand, label, sizeof label);
    for (p = label; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '.' || *p == '_' || *p == '='))
            *p = '-';
    snprintf(t->name, sizeof t->name, "trial-%02u-%.28s", idx, idx ? label : "baseline");
    t->first_step_s = t->last_step_s = NAN;
    t->loss_diff = NAN;
}

int gs_cli_tune(int argc, char **argv)
{
    struct tune_opts o;
    struct trial *tr;
    struct tune_cand pending[TUNE_MAX_TRIALS];
    unsigned n = 0, np = 0;
    char defdir[64], why[256], spelled[1024] = "";
    int created = 0, outfd, code = 0, best = -1,
        color = gs_term_use_color(GS_COLOR_AUTO, STDOUT_FILENO);
    double t_start = mono(), budget_end, timeout_s;
    enum tune_framework fw;
    struct gs_err err;
    struct sigaction sa;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

    if (parse_opts(&o, argc, argv) != 0) {
        fprintf(stderr, "Try 'gpuscope tune --help'.\n");
        return GS_EXIT_USAGE;
    }
    if (o.help) {
        usage(stdout);
        return GS_EXIT_OK;
    }
    for (unsigned i = 0; i < o.n_tries; i++)
        if (tune_parse_try(o.tries[i], pending, &np, TUNE_MAX_TRIALS, why, sizeof why) != 0) {
            fprintf(stderr, "gpuscope tune: --try %s\n", why);
            return GS_EXIT_USAGE;
        }
    if (!o.out) {
        default_outdir(defdir, sizeof defdir);
        o.out = defdir;
    }
    outfd = gs_dirfile_open_dir(o.out, 1, &created, &err);
    if (outfd < 0) {
        fprintf(stderr, "gpuscope tune: --out %s\n", err.msg);
        return TUNE_EXIT_FAIL;
    }
    tr = calloc(TUNE_MAX_TRIALS + 2, sizeof *tr);
    if (!tr) {
        close(outfd);
        return TUNE_EXIT_FAIL;
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigint;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    budget_end = o.budget_s > 0 ? t_start + o.budget_s : 0;

    /* the baseline */
    name_trial(&tr[0], 0);
    fprintf(stderr, "gpuscope tune: %s: baseline (%ld warmup + %ld measured steps)\n", tr[0].name,
            o.warmup, o.steps);
    /* the baseline runs to its window whatever the budget: without it nothing is measured */
    run_trial(&o, o.out, outfd, &tr[0], TUNE_FW_TORCH, NAN, 0,
              o.trial_timeout_s > 0 ? o.trial_timeout_s : 3600);
    n = 1;
    if (tr[0].state != T_MEASURED && g_interrupted) {
        fprintf(stderr,
                "gpuscope tune: interrupted (Ctrl-C) during the baseline: nothing to compare; "
                "what it measured is in %s/%s\n",
                o.out, tr[0].name);
        code = 130;
        goto done;
    }
    if (tr[0].state != T_MEASURED) {
        fprintf(stderr,
                "gpuscope tune: cannot tune: the baseline %s: %s\n"
                "gpuscope tune: its run directory is %s/%s\n",
                tr[0].state == T_NO_WINDOW ? "shows no training steps to measure"
                                           : state_names[tr[0].state],
                tr[0].note, o.out, tr[0].name);
        code = TUNE_EXIT_REFUSED;
        goto done;
    }
    fw = tune_framework_of(tr[0].report);
    timeout_s = o.trial_timeout_s > 0 ? o.trial_timeout_s : fmax(60, 5 * tr[0].seconds);
    /* the first round: the findings' candidates and the --try ones that need no workers */
    {
        struct tune_cand r1[TUNE_MAX_TRIALS];
        unsigned n1 = 0;
        if (!o.no_search)
            tune_candidates_round1(tr[0].report, ncpu, r1, &n1, TUNE_MAX_TRIALS);
        for (unsigned i = 0; i < np; i++)
            if (!pending[i].needs_workers && n1 < TUNE_MAX_TRIALS)
                r1[n1++] = pending[i];
        for (unsigned i = 0; i < n1 && n < TUNE_MAX_TRIALS; i++) {
            tr[n].cand = r1[i];
            name_trial(&tr[n], n);
            n++;
        }
    }
    for (unsigned round = 1; round <= 3; round++) {
        for (unsigned i = 1; i < n; i++) {
            struct trial *t = &tr[i];
            int b;
            if (t->state != T_PENDING)
                continue;
            if (g_interrupted) {
                t->state = T_SKIPPED;
                snprintf(t->note, sizeof t->note, "Ctrl-C");
                continue;
            }
            if (budget_end > 0 && mono() + tr[0].seconds > budget_end) {
                t->state = T_SKIPPED;
                snprintf(t->note, sizeof t->note, "would not fit in the --budget");
                continue;
            }
            b = best_of(tr, n);
            fprintf(stderr, "gpuscope tune: %s\n", t->name);
            run_trial(&o, o.out, outfd, t, fw,
                      b >= 0 && tr[b].w.steps_per_s > tr[0].w.steps_per_s ? tr[b].w.steps_per_s
                                                                          : tr[0].w.steps_per_s,
                      budget_end, timeout_s);
            if (t->state == T_MEASURED || t->state == T_CUT) {
                int d = tune_loss_diverges(tr[0].losses, t->losses, o.loss_tol, &t->loss_diff);
                t->diverged = d == 1;
            }
        }
        if (g_interrupted || n >= TUNE_MAX_TRIALS)
            break;
        if (round == 1) {
            /* the second round: on top of the best worker count (or the job's own workers) */
            struct tune_cand base = {0};
            int b = -1, base_workers;
            double cur = rnum(json_object_get(tr[0].report, "facts"), "loader_num_workers");
            for (unsigned i = 1; i < n; i++)
                if (trial_ok(&tr[i]) && has_key(&tr[i].cand, "num_workers", TUNE_LOADER) &&
                    tr[i].cand.n == 1 && (b < 0 || tr[i].w.steps_per_s > tr[b].w.steps_per_s))
                    b = (int)i;
            if (b >= 0 && tune_worth(tr[0].w.steps_per_s, tr[b].w.steps_per_s, o.min_gain))
                base = tr[b].cand;
            base_workers = base.n > 0 || (isfinite(cur) && cur > 0);
            {
                struct tune_cand r2[TUNE_MAX_TRIALS];
                unsigned n2 = 0;
                if (!o.no_search)
                    tune_candidates_round2(tr[0].report, base.n ? &base : NULL, base_workers, r2,
                                           &n2, TUNE_MAX_TRIALS);
                for (unsigned i = 0; i < np; i++) {
                    struct tune_cand c = base;
                    if (!pending[i].needs_workers)
                        continue;
                    if (!base_workers) {
                        fprintf(stderr,
                                "gpuscope tune: --try %s=%s left out: it needs DataLoader "
                                "workers and no worker count was worth it\n",
                                pending[i].s[0].key, pending[i].s[0].val);
                        continue;
                    }
                    if (c.n < TUNE_MAX_SETTINGS) {
                        c.s[c.n++] = pending[i].s[0];
                        snprintf(c.why, sizeof c.why, "%s", pending[i].why);
                        if (n2 < TUNE_MAX_TRIALS)
                            r2[n2++] = c;
                    }
                }
                for (unsigned i = 0; i < n2 && n < TUNE_MAX_TRIALS; i++) {
                    tr[n].cand = r2[i];
                    name_trial(&tr[n], n);
                    n++;
                }
            }
        } else if (round == 2) {
            /* the best combination (plan.h) */
            struct tune_cand comb;
            const struct tune_cand *c[TUNE_MAX_TRIALS + 2];
            double sps[TUNE_MAX_TRIALS + 2];
            int ok[TUNE_MAX_TRIALS + 2];
            for (unsigned i = 0; i < n; i++) {
                c[i] = &tr[i].cand;
                sps[i] = tr[i].w.steps_per_s;
                ok[i] = i == 0 || trial_ok(&tr[i]);
            }
            if (!tune_combination(c, sps, ok, n, o.min_gain, &comb))
                break;
            tr[n].cand = comb;
            name_trial(&tr[n], n);
            n++;
        }
    }
    best = recommend(tr, n, o.min_gain);
    if (best >= 0)
        tune_spell(&tr[best].cand, fw, spelled, sizeof spelled);

    /* the output */
    printf("%sgpuscope tune%s: %s, framework %s, %ld steps measured after %ld of warmup, %u "
           "trial(s) in %.0f s\n",
           color ? "\033[1m" : "", color ? "\033[0m" : "",
           json_string_value(json_object_get(json_object_get(tr[0].report, "run"), "command")),
           tune_framework_name(fw), o.steps, o.warmup, n, mono() - t_start);
    print_trials(stdout, tr, n, tr[0].w.steps_per_s, color);
    print_table(stdout, &tr[0], best >= 0 ? &tr[best] : NULL, color);
    if (best >= 0) {
        printf("\nBest: %s (%+.0f %% steps/s). To make it permanent:\n", tr[best].name,
               (tr[best].w.steps_per_s / tr[0].w.steps_per_s - 1) * 100);
        for (char *line = spelled, *nl; *line; line = nl ? nl + 1 : line + strlen(line)) {
            nl = strchr(line, '\n');
            printf("  %.*s\n", nl ? (int)(nl - line) : (int)strlen(line), line);
            if (!nl)
                break;
        }
    } else if (n == 1) {
        printf("\nNo setting worth changing: the baseline's findings point at no setting tune "
               "can try (no data loading or communication bottleneck) and no --try was given.\n");
    } else {
        printf("\nNo setting worth changing: no trial was %.0f %% faster than the baseline "
               "(--min-gain).\n",
               o.min_gain * 100);
    }
    if (g_interrupted)
        printf("Interrupted (Ctrl-C): the figures above are what was measured.\n");
    if (n > 1)
        printf("Trials in %s/; compare any two: gpuscope compare %s/%s %s/%s\n", o.out, o.out,
               tr[0].name, o.out, best >= 0 ? tr[best].name : tr[1].name);
    else
        printf("The baseline's run: %s/%s (gpuscope report %s/%s)\n", o.out, tr[0].name, o.out,
               tr[0].name);
    code = g_interrupted ? 130 : 0;
done : {
    json_t *doc = json_object(), *arr = json_array();
    char *text;
    fw = tr[0].report ? tune_framework_of(tr[0].report) : TUNE_FW_TORCH;
    for (unsigned i = 0; i < n; i++)
        json_array_append_new(arr, trial_json(&tr[i], fw, o.scope));
    json_object_set_new(doc, "schema", json_string("gpuscope.tune/1"));
    json_object_set_new(
        doc, "command",
        json_incref(json_object_get(json_object_get(tr[0].report, "run"), "command"))
            ?: json_null());
    json_object_set_new(doc, "framework", json_string(tune_framework_name(fw)));
    json_object_set_new(doc, "warmup", json_integer(o.warmup));
    json_object_set_new(doc, "steps", json_integer(o.steps));
    json_object_set_new(doc, "min_gain", json_real(o.min_gain));
    json_object_set_new(doc, "interrupted", json_boolean(g_interrupted));
    json_object_set_new(doc, "trials", arr);
    json_object_set_new(doc, "best", best >= 0 ? json_string(tr[best].name) : json_null());
    json_object_set_new(doc, "change", best >= 0 ? json_string(spelled) : json_null());
    text = json_dumps(doc, JSON_INDENT(2));
    if (!text || gs_dirfile_write(outfd, "tune.json", 0644, text, strlen(text), &err) != GS_OK)
        fprintf(stderr, "gpuscope tune: %s/tune.json: %s\n", o.out, text ? err.msg : "no memory");
    free(text);
    json_decref(doc);
    if (tr[0].state == T_MEASURED) {
        if (write_html(outfd, o.out, tr, n, best >= 0 ? &tr[best] : NULL, spelled, &err) != 0)
            fprintf(stderr, "gpuscope tune: tune.html: %s\n", err.msg);
        else
            printf("Written: %s/tune.json, %s/tune.html\n", o.out, o.out);
    }
}
    for (unsigned i = 0; i < n; i++) {
        json_decref(tr[i].report);
        json_decref(tr[i].losses);
    }
    free(tr);
    close(outfd);
    return code;
}
