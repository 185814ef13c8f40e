/*
 * session.c - one training run's record dispatch (contract in session.h): the one place
 * where a hello, step, end or log record of a run reaches its aggregate, for `gpuscope run`
 * and for the agent alike. The mutex is held for the aggregate and the counters only; the
 * sink (steps.jsonl, samples.db, the agent's recorder and live series) is called after it is
 * released, so a slow store never holds a report or a snapshot up.
 */
#include "run/session.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"
#include "run/usamp.h"

struct gs_session {
    pthread_mutex_t mu; /* everything below but the constants */
    struct gs_session_sink sink;
    struct gs_session_opts o; /* constant but o.start_s */
    struct gs_agg *agg;
    struct gs_session_stats st;
    uint64_t log_refused; /* log records refused (beyond max_log_points) */
    char name[GS_RECORD_STR];
};

int gs_session_new(struct gs_session **out, const struct gs_session_opts *o,
                   const struct gs_session_sink *sink, struct gs_err *err)
{
    struct gs_session *s = calloc(1, sizeof *s);

    if (!s || !(s->agg = gs_agg_new())) {
        free(s);
        return gs_err_set(err, GS_ENOMEM, "session: out of memory");
    }
    if (o)
        s->o = *o;
    if (sink)
        s->sink = *sink;
    if (s->o.drops_known)
        gs_agg_set_records_dropped(s->agg, 0); /* known: none lost yet */
    s->st.ranks = 1;
    pthread_mutex_init(&s->mu, NULL);
    *out = s;
    return GS_OK;
}

void gs_session_free(struct gs_session *s)
{
    if (!s)
        return;
    gs_agg_free(s->agg);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

void gs_session_set_start(struct gs_session *s, double start_s)
{
    pthread_mutex_lock(&s->mu);
    s->o.start_s = start_s;
    pthread_mutex_unlock(&s->mu);
}

/* A step kept but lost (not stored, or before the session): the report's count. */
static void drop_step(struct gs_session *s)
{
    pthread_mutex_lock(&s->mu);
    gs_agg_set_records_dropped(s->agg, ++s->st.steps_dropped + s->st.sender_dropped);
    pthread_mutex_unlock(&s->mu);
}

void gs_session_drop_step(struct gs_session *s)
{
    drop_step(s);
}

void gs_session_set_name(struct gs_session *s, const char *name)
{
    pthread_mutex_lock(&s->mu);
    if (!s->name[0] && name)
        snprintf(s->name, sizeof s->name, "%s", name);
    pthread_mutex_unlock(&s->mu);
}

void gs_session_replay_step(struct gs_session *s, const struct gs_step_rec *step)
{
    pthread_mutex_lock(&s->mu);
    s->st.steps++;
    if (!s->o.max_agg_steps || s->st.steps <= s->o.max_agg_steps)
        gs_agg_step(s->agg, step);
    pthread_mutex_unlock(&s->mu);
}

void gs_session_add_rank(struct gs_session *s)
{
    pthread_mutex_lock(&s->mu);
    s->st.ranks++;
    pthread_mutex_unlock(&s->mu);
}

/* What a record does to the aggregate and the counters, under mu: NULL when it is kept
 * (*seq: a log record's number), else why it is refused, *what and *nth (the refusal's number
 * of its kind). */
static const char *take(struct gs_session *s, const struct gs_peer *peer,
                        const struct gs_record *rec, enum gs_session_refusal *what, uint64_t *nth,
                        int64_t *seq)
{
    const struct gs_record_log *l = &rec->u.log;
    const char *why;

    s->st.records++;
    switch (rec->type) {
    case GS_REC_HELLO:
        if (!s->o.first_rank_hello || s->st.ranks == 1)
            gs_agg_hello(s->agg, &rec->u.hello, peer->pid, peer->uid);
        if (!s->name[0])
            snprintf(s->name, sizeof s->name, "%s", rec->u.hello.run);
        /* a resumed sender's count of what it could not pass on (record.h "dropped") */
        if (rec->u.hello.dropped > 0 && (uint64_t)rec->u.hello.dropped > s->st.sender_dropped) {
            s->st.sender_dropped = (uint64_t)rec->u.hello.dropped;
            gs_agg_set_records_dropped(s->agg, s->st.steps_dropped + s->st.sender_dropped);
        }
        break;
    case GS_REC_STEP:
        /* dated before 2000 or before the run began: the rule of run/record.h */
        if ((why = gs_record_step_time_refusal(&rec->u.step, s->o.start_s)) != NULL) {
            *what = GS_SESSION_STEP_TIME;
            *nth = ++s->st.steps_refused;
            return why;
        }
        s->st.steps++;
        if (!s->o.max_agg_steps || s->st.steps <= s->o.max_agg_steps)
            gs_agg_step(s->agg, &rec->u.step);
        break;
    case GS_REC_END:
        gs_agg_end(s->agg, &rec->u.end);
        break;
    case GS_REC_LOG:
        if (s->o.max_log_points && s->st.log_points + l->n > s->o.max_log_points) {
            s->st.log_points_dropped += l->n;
            *what = GS_SESSION_LOG_FULL;
            *nth = ++s->log_refused;
            return "log points";
        }
        *seq = (int64_t)s->st.log_records++;
        s->st.log_points += l->n;
        break;
    }
    return NULL;
}

enum gs_session_verdict gs_session_record(struct gs_session *s, const struct gs_peer *peer,
                                          const struct gs_record *rec)
{
    const struct gs_session_sink *k = &s->sink;
    enum gs_session_refusal what = GS_SESSION_STEP_TIME;
    const char *why;
    uint64_t nth = 0;
    int64_t seq = 0;

    pthread_mutex_lock(&s->mu);
    why = take(s, peer, rec, &what, &nth, &seq);
    pthread_mutex_unlock(&s->mu);
    if (why) {
        if (k->refused)
            k->refused(k->ctx, peer, rec, what, why, nth);
        return GS_SESSION_REFUSED;
    }
    if (k->kept)
        k->kept(k->ctx, peer, rec);
    if (rec->type == GS_REC_STEP && k->store_step &&
        k->store_step(k->ctx, peer, &rec->u.step) != GS_OK)
        drop_step(s);
    if (rec->type == GS_REC_LOG && k->store_log &&
        k->store_log(k->ctx, peer, &rec->u.log, seq) != GS_OK) {
        pthread_mutex_lock(&s->mu);
        s->st.log_points_dropped += rec->u.log.n;
        pthread_mutex_unlock(&s->mu);
    }
    return GS_SESSION_KEPT;
}

int gs_session_snapshot(struct gs_session *s, const struct gs_snapshot *snap,
                        const unsigned char *in_run, int wait)
{
    if (wait)
        pthread_mutex_lock(&s->mu);
    else if (pthread_mutex_trylock(&s->mu) != 0)
        return 0;
    gs_agg_snapshot(s->agg, snap, in_run, snap->t_real);
    /* and what the driver sampled on the run's GPUs since the previous cycle */
    gs_usamp_feed(s->agg, snap, in_run);
    pthread_mutex_unlock(&s->mu);
    return 1;
}

void gs_session_run_procs(struct gs_session *s, const struct gs_snapshot *snap,
                          const unsigned char *in_run, const unsigned char *proc_in_run)
{
    pthread_mutex_lock(&s->mu);
    gs_agg_run_procs(s->agg, snap, in_run, proc_in_run);
    pthread_mutex_unlock(&s->mu);
}

json_t *gs_session_report(struct gs_session *s, const struct gs_report_meta *meta)
{
    json_t *rep;

    pthread_mutex_lock(&s->mu);
    rep = gs_agg_report(s->agg, meta);
    pthread_mutex_unlock(&s->mu);
    return rep;
}

struct gs_session_stats gs_session_stats(struct gs_session *s)
{
    struct gs_session_stats st;

    pthread_mutex_lock(&s->mu);
    st = s->st;
    pthread_mutex_unlock(&s->mu);
    return st;
}

void gs_session_name(struct gs_session *s, char *out, size_t size)
{
    pthread_mutex_lock(&s->mu);
    snprintf(out, size, "%s", s->name);
    pthread_mutex_unlock(&s->mu);
}
