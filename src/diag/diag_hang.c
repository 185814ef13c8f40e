/*
 * The hang finding over a report's "hangs" (gpuscope run's watchdog, src/run/runstacks.c;
 * docs/report.md, HANGS). Like the rest of src/diag, a pure function of the report.
 *
 *   hang   critical, one per hang recorded (the first three): how long the job made no step,
 *          from when, the ranks outside a collective (the ones the others wait for) and where
 *          each rank's main thread was (file:line of its innermost frame of the user's code);
 *          advice by case: a rank the others wait for, every rank in a collective (a
 *          mismatched collective or the network), a single process stuck on its own.
 *
 * When the last hang lasted until the job ended and the job was then stopped, killed or
 * failed, outcome.status becomes "hung" (outcome.hang: that hang's number) and the hang
 * finding takes the place of run_failed.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "diag/diag.h"

#define MAX_FINDINGS 3

static double num(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static const char *str(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static const char *base(const char *path)
{
    const char *s = path ? strrchr(path, '/') : NULL;
    return s ? s + 1 : path ? path : "?";
}

/* "train.py:42 in main" for rank entry k: its innermost frame of the user's code, else its
 * innermost frame. */
static void where(const json_t *k, char *out, size_t cap)
{
    const char *file = str(k, "user_file"), *fn = str(k, "user_function");
    double line = num(k, "user_line");

    if (!file) {
        file = str(k, "file");
        fn = str(k, "function");
        line = num(k, "line");
    }
    snprintf(out, cap, "%s:%.0f in %s", base(file), isnan(line) ? 0 : line, fn ? fn : "?");
}

/* Appends "s" to out (cap bytes) at *n. */
static void add(char *out, size_t cap, size_t *n, const char *s)
{
    if (*n < cap)
        *n += (size_t)snprintf(out + *n, cap - *n, "%s", s);
}

static json_t *hang_finding(const json_t *h, const json_t *outcome, int stopped)
{
    const json_t *ranks = json_object_get(h, "ranks"), *stuck = json_object_get(h, "stuck_ranks");
    const json_t *k;
    double dur = num(h, "duration_seconds"), start = num(h, "started_at");
    size_t nr = json_array_size(ranks), ns = json_array_size(stuck), in_coll = 0, i, n = 0;
    const char *sig =
        str(outcome, "stopped_by") ? str(outcome, "stopped_by") : str(outcome, "signal_name");
    char when[32] = "?", who[1024] = "", buf[600], tail[64];
    time_t t = isnan(start) ? 0 : (time_t)start;
    struct tm tm;
    json_t *f;

    if (t && localtime_r(&t, &tm))
        strftime(when, sizeof when, "%H:%M:%S", &tm);
    json_array_foreach(ranks, i, k) in_coll += json_is_true(json_object_get(k, "in_collective"));
    json_array_foreach(ranks, i, k)
    {
        json_t *rk = json_object_get(k, "rank");
        char w[700];
        where(k, w, sizeof w);
        if (json_is_integer(rk))
            snprintf(buf, sizeof buf, "%srank %lld %s at %.400s", n ? "; " : "",
                     (long long)json_integer_value(rk),
                     json_is_true(json_object_get(k, "in_collective"))
                         ? "waits in a collective"
                         : (in_coll ? "is not in a collective" : "was"),
                     w);
        else
            snprintf(buf, sizeof buf, "%sthe command was at %.400s", n ? "; " : "", w);
        add(who, sizeof who, &n, buf);
    }
    if (!nr)
        snprintf(who, sizeof who, "no rank's stack could be read");
    if (!json_is_true(json_object_get(h, "until_job_end")))
        snprintf(tail, sizeof tail, ", then went on");
    else if (stopped && sig)
        snprintf(tail, sizeof tail, " until it was stopped by %s", sig);
    else
        snprintf(tail, sizeof tail, " until the job ended");
    f = gs_diag_finding("hang", "critical", "The job hung for %.0f s from %s (no step)%s: %s",
                        isnan(dur) ? 0 : dur, when, tail, who);
    if (!f)
        return NULL;
    gs_diag_evidence(f, "hang", json_integer(json_integer_value(json_object_get(h, "number"))));
    gs_diag_evidence(f, "started_at", json_deep_copy(json_object_get(h, "started_at")));
    gs_diag_evidence(f, "duration_seconds", json_deep_copy(json_object_get(h, "duration_seconds")));
    gs_diag_evidence(f, "until_job_end", json_deep_copy(json_object_get(h, "until_job_end")));
    gs_diag_evidence(f, "stuck_ranks", json_deep_copy(stuck));
    gs_diag_evidence(f, "steps_before", json_deep_copy(json_object_get(h, "steps_before")));
    gs_diag_evidence(f, "gpus", json_deep_copy(json_object_get(h, "gpus")));
    if (ns && in_coll) {
        char w[700] = "";
        size_t m = 0;
        json_array_foreach(ranks, i, k) if (!json_is_true(json_object_get(k, "in_collective")))
        {
            char one[720];
            where(k, one, sizeof one);
            snprintf(buf, sizeof buf, "%s%.400s", m ? ", " : "", one);
            add(w, sizeof w, &m, buf);
        }
        gs_diag_advise(f,
                       "The other ranks wait in a collective for %s outside one: look at what %s "
                       "at %s (a slow or blocking call, an exception caught and retried, a "
                       "rank-dependent branch that skips a collective)",
                       ns > 1 ? "the ranks" : "the rank", ns > 1 ? "they do" : "it does", w);
    } else if (nr && in_coll == nr && nr > 1) {
        gs_diag_advise(f, "Every rank waits in a collective: a collective called in a different "
                          "order, or with different shapes, on some rank, or the network between "
                          "the ranks; the NCCL flight recorder (NCCL jobs) shows which "
                          "collective each rank is in");
    } else if (nr) {
        gs_diag_advise(f, "No other rank waits for it: the main thread stayed at that line (see "
                          "its state in the stacks file): a lock, a read that never returns, a "
                          "sleep or a wait on a child process");
    }
    snprintf(buf, sizeof buf, "Every thread of every rank when it was found: %s",
             str(h, "stacks_file") ? str(h, "stacks_file") : "hang-N-stacks.txt");
    gs_diag_advise(f, "%s", buf);
    if (str(h, "nccl_dump"))
        gs_diag_advise(f,
                       "The NCCL flight recorder of each rank: torchfrtrace --prefix "
                       "nccl_trace_rank_ %s",
                       str(h, "nccl_dump"));
    return f;
}

void gs_diag_hang_findings(json_t *report, json_t *findings)
{
    const json_t *hangs = json_object_get(report, "hangs"), *last;
    json_t *outcome = json_object_get(report, "outcome");
    const char *status = str(outcome, "status");
    size_t n = json_array_size(hangs), i;
    int ended_hung, stopped;

    if (!n || !json_is_array(findings))
        return;
    last = json_array_get(hangs, n - 1);
    ended_hung = json_is_true(json_object_get(last, "until_job_end")) && status &&
                 (strcmp(status, "killed") == 0 || strcmp(status, "interrupted") == 0 ||
                  strcmp(status, "failed") == 0 || strcmp(status, "unknown") == 0);
    stopped = ended_hung && (strcmp(status, "failed") != 0 || str(outcome, "stopped_by"));
    if (ended_hung) {
        json_object_set_new(outcome, "status", json_string("hung"));
        json_object_set(outcome, "hang", json_object_get(last, "number"));
        for (i = json_array_size(findings); i-- > 0;)
            if (strcmp(str(json_array_get(findings, i), "id")
                           ? str(json_array_get(findings, i), "id")
                           : "",
                       "run_failed") == 0)
                json_array_remove(findings, i);
    }
    /* the latest hangs first, ahead of the other findings (a hang says the most) */
    for (i = 0; i < n && i < MAX_FINDINGS; i++) {
        json_t *f = hang_finding(json_array_get(hangs, n - 1 - i), outcome, i == 0 && stopped);
        if (f)
            json_array_insert_new(findings, i, f);
    }
}
