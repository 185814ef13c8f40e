/*
 * client.c - the in-process side of a run profile: the C API of include/gpuscope/gs_run.h that
 * the Python package calls through ctypes (libgpuscope.so).
 *
 * A training thread hands one struct gs_step_rec per step to gs_run_step. Every record goes
 * into a local aggregate (src/run/agg.h), so the process can always write its own report.
 * When a receiver (`gpuscope run`, or the agent) accepts a SOCK_SEQPACKET connection, a
 * sender thread also encodes the records (src/run/record.h) and sends them; the training
 * thread only copies the record into a bounded ring and never waits on the socket (a full
 * ring drops the record and counts it). Without a receiver, and unless "nvml" is "off", a
 * sampler thread samples the GPUs of the run every sample_interval_s into the aggregate, and
 * with each snapshot the driver's own utilization samples taken since the previous one
 * (src/run/usamp.h). The report's run.records_dropped counts the records the sender dropped.
 * Neither thread ever calls into Python, so neither holds the GIL.
 *
 * Locking: one mutex (run->mu) guards the aggregate and the ring; it is held only for a copy
 * or an aggregate update, never across I/O or NVML calls.
 */
#include "gpuscope/gs_run.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "base/clock.h"
#include "base/ticker.h"
#include "base/userdir.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"
#include "gpuscope/gs_sampler.h"
#include "run/agg.h"
#include "run/attrib.h"
#include "run/control.h"
#include "run/record.h"
#include "run/usamp.h"

#define RING_CAP 4096    /* steps queued for the sender; a step is ~150 bytes */
#define LOG_CAP 64       /* log records queued for the sender (~1.9 KB each) */
#define SEND_TIMEOUT_S 1 /* a stalled receiver costs the sender thread at most this */
/* A receiver that went away (an agent restart) is dialled again after 0.1 s, then twice as
 * long each failure up to 5 s (docs/python.md, RECONNECTING). */
#define RECONNECT_FIRST_NS 100000000LL
#define RECONNECT_MAX_NS 5000000000LL
#define DEFAULT_AGENT_SOCKET "/run/gpuscope/steps.sock"

struct gs_run {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* ring not empty, or stop (CLOCK_MONOTONIC) */
    struct gs_agg *agg;
    struct gs_record_hello hello;
    char socket_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    bool nvml_off;
    double interval_s;

    /* sender */
    int fd;
    int agent_fd; /* the node's agent too, under gpuscope run ($GPUSCOPE_RUN_AGENT_SOCKET) */
    /* the sender thread's: that agent's path once it answered, when to dial it again, the
     * steps it missed while away (its hello's "dropped") */
    char agent_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    int64_t agent_next_ns, agent_backoff_ns;
    uint64_t agent_dropped;
    bool sender_on;
    pthread_t sender;
    struct gs_step_rec *ring;
    unsigned head, count;
    uint64_t dropped, sent;
    bool in_flight; /* the sender holds a record it took off the ring (gs_run_flush) */
    /* the receiver went away: records wait in the ring (a full ring drops and counts them)
     * while the sender dials receiver_path again with backoff, then sends its hello again
     * (same token, the drops so far) and resumes; under mu */
    bool down;
    char receiver_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    uint64_t reconnects;
    bool end_pending;
    struct gs_record_end end;
    /* logged values (gs_run_log), sent after the queued steps; dropped when full */
    struct gs_record_log logs[LOG_CAP];
    unsigned log_head, log_count;
    uint64_t logs_dropped;
    /* the newest control request from a receiver (gs_run_control), under mu */
    int64_t ctl_id, ctl_taken;
    int32_t ctl_steps;

    /* sampler */
    struct gs_ticker *sampler; /* NULL: not sampling */
    struct gs_sampler *smp;
    struct gs_snapshot *snap;
    unsigned char *in_run;
    char cvd[1024];             /* CUDA_VISIBLE_DEVICES at open (run/attrib.h) */
    struct gs_attrib_tree tree; /* the sampler thread's */

    bool stop;
    bool finished;
    char notes[1024]; /* warnings of gs_run_open for the caller (gs_run_notes) */
};

/* The public API's error text: ctypes callers pass a char buffer (gs_run.h). */
static void api_err(char *out, size_t cap, const struct gs_err *e)
{
    if (out && cap)
        snprintf(out, cap, "%s", e->msg[0] ? e->msg : gs_strerror(e->rc));
}

/* A warning for the caller to show (gs_run_notes): the library never writes to the training
 * process's stderr. One line each; what does not fit is cut. */
static void note(struct gs_run *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void note(struct gs_run *run, const char *fmt, ...)
{
    size_t len = strlen(run->notes);
    va_list ap;

    if (len + 2 >= sizeof run->notes)
        return;
    va_start(ap, fmt);
    vsnprintf(run->notes + len, sizeof run->notes - len - 1, fmt, ap);
    va_end(ap);
    len = strlen(run->notes);
    run->notes[len] = '\n';
    run->notes[len + 1] = '\0';
}

/* ---- configuration ---- */

static int cfg_str(json_t *cfg, const char *key, char *dst, size_t size, struct gs_err *err)
{
    json_t *v = json_object_get(cfg, key);

    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v) || json_string_length(v) >= size ||
        strlen(json_string_value(v)) != json_string_length(v)) {
        return gs_err_set(err, GS_EINVAL, "config: %s: expected a string shorter than %zu bytes",
                          key, size);
    }
    memcpy(dst, json_string_value(v), json_string_length(v) + 1);
    return 0;
}

static int cfg_int(json_t *cfg, const char *key, int32_t lo, int32_t hi, int32_t *dst,
                   struct gs_err *err)
{
    json_t *v = json_object_get(cfg, key);

    if (!v || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        return gs_err_set(err, GS_EINVAL, "config: %s: expected an integer in [%d, %d]", key,
                          (int)lo, (int)hi);
    }
    *dst = (int32_t)json_integer_value(v);
    return 0;
}

static int cfg_devices(json_t *cfg, struct gs_record_hello *h, struct gs_err *err)
{
    json_t *v = json_object_get(cfg, "devices"), *d;
    size_t i;

    if (!v || json_is_null(v))
        return 0;
    if (!json_is_array(v) || json_array_size(v) > GS_RECORD_MAX_DEVICES) {
        return gs_err_set(err, GS_EINVAL,
                          "config: devices: expected an array of at most %d indices",
                          GS_RECORD_MAX_DEVICES);
    }
    json_array_foreach(v, i, d)
    {
        if (!json_is_integer(d) || json_integer_value(d) < 0 || json_integer_value(d) > 65535) {
            return gs_err_set(err, GS_EINVAL,
                              "config: devices[%zu]: expected an index in [0, 65535]", i);
        }
        h->devices[h->n_devices++] = (int32_t)json_integer_value(d);
    }
    return 0;
}

/* "facts": the run's settings, validated as a receiver would (record.h). They are advisory, so
 * a bad set is left out with a note for the caller (gs_run_notes) rather than failing the
 * training. */
static void cfg_facts(struct gs_run *run, json_t *cfg, struct gs_record_hello *h)
{
    struct gs_err why;

    gs_err_clear(&why);
    if (gs_record_facts_parse(json_object_get(cfg, "facts"), "config: ", &h->facts, &why) !=
        GS_OK) {
        note(run, "%s; facts left out", why.msg);
        memset(&h->facts, 0, sizeof h->facts);
    }
}

/* The run's tags: $GPUSCOPE_RUN_TAGS (a JSON object of strings; gpuscope run --tag sets it),
 * else the config's "tags". Advisory like the facts: a bad set is left out with a note. */
static void cfg_tags(struct gs_run *run, json_t *cfg, struct gs_record_hello *h)
{
    const char *env = getenv("GPUSCOPE_RUN_TAGS");
    json_t *obj = NULL;
    json_error_t jerr;
    struct gs_err why;

    gs_err_clear(&why);
    if (env && *env) {
        obj = json_loads(env, JSON_REJECT_DUPLICATES, &jerr);
        if (!obj) {
            note(run, "GPUSCOPE_RUN_TAGS: not JSON (%s); tags left out", jerr.text);
            return;
        }
        if (gs_record_tags_parse(obj, "GPUSCOPE_RUN_TAGS: ", &h->tags, &why) != GS_OK) {
            note(run, "%s; tags left out", why.msg);
            memset(&h->tags, 0, sizeof h->tags);
        }
        json_decref(obj);
        return;
    }
    if (gs_record_tags_parse(json_object_get(cfg, "tags"), "config: ", &h->tags, &why) != GS_OK) {
        note(run, "%s; tags left out", why.msg);
        memset(&h->tags, 0, sizeof h->tags);
    }
}

static int parse_config(struct gs_run *run, const char *config_json, struct gs_err *err)
{
    struct gs_record_hello *h = &run->hello;
    char nvml[16] = "auto";
    json_error_t jerr;
    json_t *cfg, *iv;
    int rc = GS_EINVAL;

    h->pid = getpid();
    h->dropped = -1;
    h->rank = h->world_size = h->local_rank = h->logging_steps = -1;
    run->interval_s = 0.5;
    if (!config_json || !*config_json)
        return 0;
    cfg = json_loads(config_json, JSON_REJECT_DUPLICATES, &jerr);
    if (!cfg) {
        return gs_err_set(err, GS_EINVAL, "config: %s (column %d)", jerr.text, jerr.column);
    }
    if (!json_is_object(cfg)) {
        gs_err_set(err, GS_EINVAL, "config: expected a JSON object");
        goto out;
    }
    if (cfg_str(cfg, "run_name", h->run, sizeof h->run, err) ||
        cfg_str(cfg, "output_dir", h->output_dir, sizeof h->output_dir, err) ||
        cfg_str(cfg, "framework", h->framework, sizeof h->framework, err) ||
        cfg_str(cfg, "job", h->job, sizeof h->job, err) ||
        cfg_str(cfg, "node", h->node, sizeof h->node, err) ||
        cfg_str(cfg, "socket", run->socket_path, sizeof run->socket_path, err) ||
        cfg_str(cfg, "nvml", nvml, sizeof nvml, err) ||
        cfg_int(cfg, "rank", 0, 65535, &h->rank, err) ||
        cfg_int(cfg, "world_size", 1, 65535, &h->world_size, err) ||
        cfg_int(cfg, "local_rank", 0, 65535, &h->local_rank, err) ||
        cfg_int(cfg, "logging_steps", 1, 1000000000, &h->logging_steps, err) ||
        cfg_devices(cfg, h, err))
        goto out;
    /* gpuscope run --name wins over the config's run_name; its default (script and start
     * time) only fills an unnamed run (docs/run.md, RUN NAMES) */
    const char *forced = getenv("GPUSCOPE_RUN_NAME"),
               *fallback = getenv("GPUSCOPE_RUN_DEFAULT_NAME");
    if (forced && *forced)
        snprintf(h->run, sizeof h->run, "%s", forced);
    else if (!h->run[0] && fallback && *fallback)
        snprintf(h->run, sizeof h->run, "%s", fallback);
    /* gpuscope run --job wins over the package's job id; $GPUSCOPE_NODE names the node when
     * the config does not (docs/run.md, JOBS) */
    const char *job = getenv("GPUSCOPE_JOB"), *node = getenv("GPUSCOPE_NODE");
    if (job && *job)
        snprintf(h->job, sizeof h->job, "%s", job);
    if (!h->node[0] && node && *node)
        snprintf(h->node, sizeof h->node, "%s", node);
    if (strcmp(nvml, "auto") != 0 && strcmp(nvml, "off") != 0) {
        gs_err_set(err, GS_EINVAL, "config: nvml: expected \"auto\" or \"off\"");
        goto out;
    }
    run->nvml_off = strcmp(nvml, "off") == 0;
    cfg_facts(run, cfg, h);
    cfg_tags(run, cfg, h);
    iv = json_object_get(cfg, "sample_interval_s");
    if (iv && !json_is_null(iv)) {
        if (!json_is_number(iv) || json_number_value(iv) < 0.01 || json_number_value(iv) > 3600) {
            gs_err_set(err, GS_EINVAL,
                       "config: sample_interval_s: expected a number in [0.01, 3600]");
            goto out;
        }
        run->interval_s = json_number_value(iv);
    }
    rc = GS_OK;
out:
    json_decref(cfg);
    return rc;
}

/* ---- receiver connection and sender thread ---- */

/* Connects to path; -1 (errno set) when nobody listens there. */
static int connect_seqpacket(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct timeval tv = {.tv_sec = SEND_TIMEOUT_S};
    int fd, saved;

    if (strlen(path) >= sizeof sa.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    /* before connect too: a receiver whose backlog is full (stuck) makes connect wait, at
     * most this long (unix sockets apply the send timeout to connect) */
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

static int send_record(int fd, const struct gs_record *rec)
{
    char buf[GS_RECORD_MAX];
    int n = gs_record_encode(rec, buf, sizeof buf);

    if (n < 0)
        return 0; /* cannot happen for our own records; skip rather than stop */
    return send(fd, buf, (size_t)n, MSG_NOSIGNAL) == n ? 0 : -1;
}

/* Picks the receiver: explicit "socket", else $GPUSCOPE_RUN_SOCKET, else the agent's socket.
 * Sends the hello. Without a receiver run->fd stays -1; a named one that does not answer is
 * reported once on stderr (the run goes on, sampling in-process). */
static void connect_receiver(struct gs_run *run)
{
    struct gs_record rec = {.type = GS_REC_HELLO};
    char user_sock[108]; /* sun_path's size */
    bool by_default = false;
    const char *path = run->socket_path[0] ? run->socket_path : getenv("GPUSCOPE_RUN_SOCKET");
    bool named = path && *path;

    if (!named) {
        path = getenv("GPUSCOPE_AGENT_SOCKET");
        if (!path || !*path) {
            path = DEFAULT_AGENT_SOCKET;
            by_default = true;
        }
    }
    run->fd = connect_seqpacket(path);
    if (run->fd < 0 && by_default &&
        gs_user_runtime_path(user_sock, sizeof user_sock, "steps.sock") == 0) {
        /* An agent run by a user (not systemd, not root), or that user's `gpuscope demo`,
         * listens in the user's runtime dir (base/userdir.h). */
        path = user_sock;
        run->fd = connect_seqpacket(path);
    }
    if (run->fd < 0) {
        if (named)
            note(run, "cannot connect to %s: %s; profiling in-process", path, strerror(errno));
        return;
    }
    snprintf(run->receiver_path, sizeof run->receiver_path, "%s", path);
    rec.u.hello = run->hello;
    if (send_record(run->fd, &rec) != 0) {
        note(run, "%s: sending hello: %s; profiling in-process", path, strerror(errno));
        close(run->fd);
        run->fd = -1;
        return;
    }
    /* Under gpuscope run, the node's agent gets the same records on a second connection,
     * so that the run is in its run list with this process's pid (SO_PEERCRED: the agent
     * finds the run's GPUs by it). Best effort: an agent that is not there, refuses or
     * stalls is left alone, and the run's own receiver is unaffected. */
    const char *agent = named ? getenv("GPUSCOPE_RUN_AGENT_SOCKET") : NULL;
    if (agent && *agent && strcmp(agent, path) != 0) {
        run->agent_fd = connect_seqpacket(agent);
        if (run->agent_fd >= 0 && send_record(run->agent_fd, &rec) != 0) {
            close(run->agent_fd);
            run->agent_fd = -1;
        }
        /* an agent that was there at the start is dialled again when it goes away */
        if (run->agent_fd >= 0)
            snprintf(run->agent_path, sizeof run->agent_path, "%s", agent);
    }
}

/* The record to the agent too (sender thread only). An agent that goes away (a restart) is
 * dialled again with the receiver's backoff, at a record's turn, and given the hello again
 * (same token, the records it missed meanwhile as "dropped"); the records of the time between
 * reach the run's own receiver only. */
static void send_agent(struct gs_run *run, const struct gs_record *rec)
{
    if (run->agent_fd < 0 && run->agent_path[0] && gs_clock_mono_ns() >= run->agent_next_ns) {
        struct gs_record hello = {.type = GS_REC_HELLO};
        hello.u.hello = run->hello;
        hello.u.hello.dropped = (int64_t)run->agent_dropped;
        run->agent_fd = connect_seqpacket(run->agent_path);
        if (run->agent_fd >= 0 && send_record(run->agent_fd, &hello) != 0) {
            close(run->agent_fd);
            run->agent_fd = -1;
        }
        if (run->agent_fd < 0) {
            run->agent_next_ns = gs_clock_mono_ns() + run->agent_backoff_ns;
            run->agent_backoff_ns = run->agent_backoff_ns * 2 > RECONNECT_MAX_NS
                                        ? RECONNECT_MAX_NS
                                        : run->agent_backoff_ns * 2;
        }
    }
    if (run->agent_fd >= 0 && send_record(run->agent_fd, rec) == 0) {
        run->agent_backoff_ns = RECONNECT_FIRST_NS;
        return;
    }
    if (run->agent_fd >= 0) {
        close(run->agent_fd);
        run->agent_fd = -1;
        run->agent_next_ns = gs_clock_mono_ns() + run->agent_backoff_ns;
    }
    if (run->agent_path[0] && rec->type == GS_REC_STEP)
        run->agent_dropped++;
}

/* Reads the control messages waiting on fd (never blocks; sender thread only) and keeps the
 * newest capture request for gs_run_control. A message that does not parse is skipped. */
static void read_control(struct gs_run *run, int fd)
{
    char buf[GS_CONTROL_MAX + 1];

    for (int k = 0; fd >= 0 && k < 8; k++) {
        struct gs_control c;
        struct gs_err e;
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT | MSG_TRUNC);

        if (n <= 0)
            return; /* nothing waiting (EAGAIN), or the receiver is gone: the sends see it */
        if ((size_t)n > sizeof buf || gs_control_parse(buf, (size_t)n, &c, &e) != GS_OK)
            continue;
        pthread_mutex_lock(&run->mu);
        if (c.id != run->ctl_id && c.id != run->ctl_taken) {
            run->ctl_id = c.id;
            run->ctl_steps = c.steps;
        }
        pthread_mutex_unlock(&run->mu);
    }
}

GS_API int gs_run_control(struct gs_run *run)
{
    int steps = 0;

    if (!run)
        return 0;
    pthread_mutex_lock(&run->mu);
    if (run->ctl_id && run->ctl_id != run->ctl_taken) {
        run->ctl_taken = run->ctl_id;
        steps = run->ctl_steps;
    }
    pthread_mutex_unlock(&run->mu);
    return steps;
}

GS_API int gs_run_flush(struct gs_run *run, int timeout_ms)
{
    int64_t until = gs_clock_mono_ns() + (int64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000;
    const struct timespec pause = {.tv_nsec = 1000000};

    if (!run)
        return 0;
    /* Polled: a rare path (a dying process), so the per-record path pays no signalling. */
    for (;;) {
        bool left;

        pthread_mutex_lock(&run->mu);
        /* while the receiver is away the records wait for it: nothing to wait for here */
        left = run->sender_on && !run->down &&
               (run->count > 0 || run->log_count > 0 || run->in_flight);
        pthread_mutex_unlock(&run->mu);
        if (!left)
            return 0;
        if (gs_clock_mono_ns() >= until)
            return 1;
        nanosleep(&pause, NULL);
    }
}

/* The next dial after *backoff_ns, which doubles up to RECONNECT_MAX_NS (a record sent
 * resets it). */
static void backoff(int64_t *backoff_ns, int64_t *next_ns)
{
    *next_ns = gs_clock_mono_ns() + *backoff_ns;
    *backoff_ns = *backoff_ns * 2 > RECONNECT_MAX_NS ? RECONNECT_MAX_NS : *backoff_ns * 2;
}

/* The receiver went away (sender thread, mu held): the connection is closed and the sender
 * dials again from *next_ns on. */
static void went_down(struct gs_run *run, int64_t *backoff_ns, int64_t *next_ns)
{
    run->down = true;
    if (run->fd >= 0)
        close(run->fd);
    run->fd = -1;
    backoff(backoff_ns, next_ns);
}

/* Dials the receiver again and sends the hello again with its token and the records dropped
 * so far (sender thread, mu held, released around the socket calls); true when back. */
static bool redial(struct gs_run *run)
{
    struct gs_record rec = {.type = GS_REC_HELLO};
    int fd;

    rec.u.hello = run->hello;
    rec.u.hello.dropped = (int64_t)run->dropped;
    pthread_mutex_unlock(&run->mu);
    fd = connect_seqpacket(run->receiver_path);
    if (fd >= 0 && send_record(fd, &rec) != 0) {
        close(fd);
        fd = -1;
    }
    pthread_mutex_lock(&run->mu);
    if (fd < 0)
        return false;
    run->fd = fd;
    run->down = false;
    run->reconnects++;
    return true;
}

/* Waits until the ring has work, stop or end is asked, or (while down) the next dial is due;
 * mu held. */
static void wait_work(struct gs_run *run, int64_t next_ns)
{
    if (!run->down) {
        while (run->count == 0 && run->log_count == 0 && !run->stop && !run->end_pending)
            pthread_cond_wait(&run->cv, &run->mu);
        return;
    }
    if (run->stop || gs_clock_mono_ns() >= next_ns)
        return;
    struct timespec ts = {.tv_sec = (time_t)(next_ns / 1000000000),
                          .tv_nsec = (long)(next_ns % 1000000000)};
    pthread_cond_timedwait(&run->cv, &run->mu, &ts);
}

static void *sender_main(void *arg)
{
    struct gs_run *run = arg;
    struct gs_record rec = {.type = GS_REC_STEP};
    int64_t backoff_ns = RECONNECT_FIRST_NS, next_ns = 0;
    bool gave_up = false;    /* stopping while down: what is left is dropped */
    bool stop_tried = false; /* stopping: one more connection at most */

    pthread_mutex_lock(&run->mu);
    for (;;) {
        wait_work(run, next_ns);
        if (run->down && !gave_up) {
            bool stopping = run->stop;
            if (stopping && stop_tried) {
                gave_up = true;
            } else if ((stopping || gs_clock_mono_ns() >= next_ns) && !redial(run)) {
                if (stopping) {
                    gave_up = true; /* one last try at the end: the training is not held */
                } else {
                    backoff(&backoff_ns, &next_ns);
                    continue;
                }
            }
            stop_tried = stopping;
            if (run->down && !gave_up)
                continue;
        }
        if (run->count > 0) {
            /* sent from its place in the ring, taken off only once sent: a record whose send
             * fails waits there for the next connection */
            rec.type = GS_REC_STEP;
            rec.u.step = run->ring[run->head];
            run->in_flight = true;
            pthread_mutex_unlock(&run->mu);
            bool ok = !gave_up && send_record(run->fd, &rec) == 0;
            if (ok || gave_up)
                send_agent(run, &rec);
            /* the agent's requests come back on its connection, one read a step */
            if (ok)
                read_control(run, run->agent_fd >= 0 ? run->agent_fd : run->fd);
            pthread_mutex_lock(&run->mu);
            run->in_flight = false;
            if (!ok && !gave_up) {
                went_down(run, &backoff_ns, &next_ns);
                continue;
            }
            run->head = (run->head + 1) % RING_CAP;
            run->count--;
            if (ok) {
                run->sent++;
                backoff_ns = RECONNECT_FIRST_NS;
            } else {
                run->dropped++;
            }
            continue;
        }
        if (run->log_count > 0) {
            rec.type = GS_REC_LOG;
            rec.u.log = run->logs[run->log_head];
            run->in_flight = true;
            pthread_mutex_unlock(&run->mu);
            bool ok = !gave_up && send_record(run->fd, &rec) == 0;
            if (ok || gave_up)
                send_agent(run, &rec);
            pthread_mutex_lock(&run->mu);
            run->in_flight = false;
            if (!ok && !gave_up) {
                went_down(run, &backoff_ns, &next_ns);
                continue;
            }
            run->log_head = (run->log_head + 1) % LOG_CAP;
            run->log_count--;
            if (!ok)
                run->logs_dropped++;
            continue;
        }
        if (run->end_pending) {
            rec.type = GS_REC_END;
            rec.u.end = run->end;
            pthread_mutex_unlock(&run->mu);
            bool ok = !gave_up && send_record(run->fd, &rec) == 0;
            if (ok || gave_up) /* once: a second end would start a run there */
                send_agent(run, &rec);
            pthread_mutex_lock(&run->mu);
            if (!ok && !gave_up) {
                went_down(run, &backoff_ns, &next_ns);
                continue;
            }
            run->end_pending = false;
            continue;
        }
        if (run->stop)
            break;
    }
    pthread_mutex_unlock(&run->mu);
    return NULL;
}

/* ---- in-process sampler thread ---- */

/* The GPUs of the run (run/attrib.h): those where this process or a child of it appears,
 * and the configured devices through this process's CUDA_VISIBLE_DEVICES. */
static void mark_in_run(struct gs_run *run)
{
    const struct gs_snapshot *s = run->snap;
    pid_t self = getpid();
    struct gs_attrib a = {.pids = &self,
                          .n_pids = 1,
                          .descendants = 1,
                          .devices = run->hello.devices,
                          .n_devices = run->hello.n_devices,
                          .cvd_known = 1,
                          .cvd = run->cvd};

    memset(run->in_run, 0, s->n_gpus);
    if (s->n_procs > 0 && gs_attrib_tree_read(&run->tree, s, NULL) != 0)
        a.descendants = 0;
    gs_attrib_mark(&a, &run->tree, s, run->in_run);
}

static void sample_once(struct gs_run *run)
{
    struct gs_err e;

    /* With what the driver sampled (~6 a second) since the previous cycle (usamp.h). */
    if (gs_sampler_sample(run->smp, run->snap,
                          GS_WANT_PROCS | GS_WANT_UTIL_SAMPLES |
                              (gs_attrib_cvd_mig(run->cvd) ? GS_WANT_MIG : 0),
                          &e) != GS_OK)
        return; /* transient: the next cycle tries again */
    mark_in_run(run);
    pthread_mutex_lock(&run->mu);
    gs_agg_snapshot(run->agg, run->snap, run->in_run, run->snap->t_real);
    gs_usamp_feed(run->agg, run->snap, run->in_run);
    pthread_mutex_unlock(&run->mu);
}

static void sampler_tick(void *arg, uint64_t missed)
{
    (void)missed;
    sample_once(arg);
}

static void start_sampler(struct gs_run *run)
{
    struct gs_err e;

    /* Read here, on the caller's thread: getenv races a setenv of the Python thread. */
    snprintf(run->cvd, sizeof run->cvd, "%s",
             getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : "");
    if (gs_sampler_open(&run->smp, NULL, &e) != GS_OK) {
        run->smp = NULL; /* no NVML here (a CPU run): the report has no per-GPU figures */
        return;
    }
    if (gs_snapshot_new(&run->snap, gs_sampler_gpu_count(run->smp), 16, &e) != GS_OK)
        goto fail;
    run->in_run = calloc(gs_sampler_gpu_count(run->smp) + 1, 1);
    if (!run->in_run)
        goto fail;
    /* Ticks on monotonic boundaries, so a slow cycle does not shift later ones. */
    if (gs_ticker_start(&run->sampler, (int64_t)llround(run->interval_s * 1e9), gs_clock_mono_ns(),
                        sampler_tick, run) != 0)
        goto fail;
    return;
fail:
    free(run->in_run);
    run->in_run = NULL;
    gs_snapshot_free(run->snap);
    run->snap = NULL;
    gs_sampler_close(run->smp);
    run->smp = NULL;
}

/* ---- the API ---- */

/* The run's token (record.h "token"): 128 bits of getrandom, in hex; "" when the kernel has no
 * randomness to give (the run then cannot be resumed after its receiver restarts). */
static void make_token(char out[GS_RECORD_TOKEN])
{
    unsigned char raw[(GS_RECORD_TOKEN - 1) / 2];
    size_t got = 0;

    out[0] = '\0';
    while (got < sizeof raw) {
        ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        got += (size_t)n;
    }
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(out + 2 * i, 3, "%02x", raw[i]);
}

GS_API struct gs_run *gs_run_open(const char *config_json, char *err, size_t errlen)
{
    struct gs_run *run = calloc(1, sizeof *run);
    pthread_condattr_t ca;
    struct gs_err e;

    gs_err_clear(&e);
    if (!run) {
        gs_err_set(&e, GS_ENOMEM, "out of memory");
        api_err(err, errlen, &e);
        return NULL;
    }
    run->fd = -1;
    run->agent_fd = -1;
    run->agent_backoff_ns = RECONNECT_FIRST_NS;
    pthread_mutex_init(&run->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&run->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (parse_config(run, config_json, &e) != GS_OK)
        goto fail;
    run->agg = gs_agg_new();
    if (!run->agg) {
        gs_err_set(&e, GS_ENOMEM, "out of memory");
        goto fail;
    }
    gs_agg_hello(run->agg, &run->hello, getpid(), getuid());
    make_token(run->hello.token);
    connect_receiver(run);
    if (run->fd >= 0) {
        run->ring = malloc(RING_CAP * sizeof *run->ring);
        if (!run->ring || pthread_create(&run->sender, NULL, sender_main, run) != 0) {
            gs_err_set(&e, GS_ENOMEM, "cannot start the sender thread");
            goto fail;
        }
        run->sender_on = true;
    } else if (!run->nvml_off) {
        start_sampler(run);
    }
    return run;
fail:
    api_err(err, errlen, &e);
    gs_run_close(run);
    return NULL;
}

GS_API const char *gs_run_notes(const struct gs_run *run)
{
    return run ? run->notes : "";
}

GS_API int gs_run_log(struct gs_run *run, const char *json, char *err, size_t errlen)
{
    char buf[GS_RECORD_MAX + 64];
    struct gs_record rec;
    struct gs_err e;
    int n;

    gs_err_clear(&e);
    if (!run || !json) {
        gs_err_set(&e, GS_EINVAL, "gs_run_log: no run or no record");
        api_err(err, errlen, &e);
        return -1;
    }
    /* the caller's object with the record's version and type in front, then the one parser */
    n = snprintf(buf, sizeof buf, "{\"v\":%d,\"type\":\"log\",%s", GS_RECORD_VERSION,
                 json[0] == '{' ? json + 1 : "");
    if (json[0] != '{' || n < 0 || (size_t)n >= sizeof buf) {
        gs_err_set(&e, GS_EINVAL, "log: %s", json[0] == '{' ? "record too long" : "not an object");
        api_err(err, errlen, &e);
        return -1;
    }
    if (gs_record_parse(buf, (size_t)n, &rec, &e) != GS_OK || rec.type != GS_REC_LOG) {
        if (e.rc == GS_OK)
            gs_err_set(&e, GS_EPARSE, "log: not a log record");
        api_err(err, errlen, &e);
        return -1;
    }
    if (rec.u.log.rank < 0)
        rec.u.log.rank = run->hello.rank;
    pthread_mutex_lock(&run->mu);
    if (!run->finished && run->sender_on) {
        if (run->log_count < LOG_CAP) {
            run->logs[(run->log_head + run->log_count) % LOG_CAP] = rec.u.log;
            run->log_count++;
            pthread_cond_signal(&run->cv);
        } else {
            run->logs_dropped++;
        }
    }
    pthread_mutex_unlock(&run->mu);
    return 0;
}

GS_API int gs_run_step(struct gs_run *run, const struct gs_step_rec *in)
{
    struct gs_step_rec v2;
    const struct gs_step_rec *rec = in;
    int rc;

    if (!run || !in || in->version < 1)
        return -1;
    if (in->version == 1) { /* a version-1 caller's struct ends before ms_x */
        memcpy(&v2, in, offsetof(struct gs_step_rec, ms_x));
        for (int p = GS_PH_N; p < GS_PH_ALL; p++)
            v2.ms_x[p - GS_PH_N] = NAN;
        v2.tokens = 0;
        rec = &v2;
    } else if (in->version == 2) { /* a version-2 caller's struct ends before tokens */
        memcpy(&v2, in, offsetof(struct gs_step_rec, tokens));
        v2.tokens = 0;
        rec = &v2;
    }
    pthread_mutex_lock(&run->mu);
    if (run->finished) {
        pthread_mutex_unlock(&run->mu);
        return -1;
    }
    rc = gs_agg_step(run->agg, rec) == 0 ? 0 : -1;
    if (rc == 0 && run->sender_on) {
        if (run->count < RING_CAP) {
            run->ring[(run->head + run->count) % RING_CAP] = *rec;
            run->count++;
            pthread_cond_signal(&run->cv);
        } else {
            run->dropped++;
        }
    }
    pthread_mutex_unlock(&run->mu);
    return rc;
}

static double end_num(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);

    return json_is_number(v) && isfinite(json_number_value(v)) ? json_number_value(v) : NAN;
}

static int parse_end(struct gs_run *run, const char *end_json, struct gs_record_end *e,
                     struct gs_err *err)
{
    struct gs_err oe;

    json_error_t jerr;
    json_t *o;

    e->train_runtime = e->train_samples = e->train_steps = e->train_loss = NAN;
    memset(&e->outcome, 0, sizeof e->outcome);
    if (!end_json || !*end_json)
        return 0;
    o = json_loads(end_json, 0, &jerr);
    if (!o || !json_is_object(o)) {
        gs_err_set(err, GS_EINVAL, "end: %s", o ? "expected a JSON object" : jerr.text);
        json_decref(o);
        return GS_EINVAL;
    }
    e->train_runtime = end_num(o, "train_runtime");
    e->train_samples = end_num(o, "train_samples");
    e->train_steps = end_num(o, "train_steps");
    e->train_loss = end_num(o, "train_loss");
    /* advisory, like facts: a bad outcome is left out, the report is still written */
    if (gs_record_outcome_parse(json_object_get(o, "outcome"), "end.", &e->outcome, &oe) != GS_OK) {
        note(run, "%s; outcome left out", oe.msg);
        memset(&e->outcome, 0, sizeof e->outcome);
    }
    json_decref(o);
    return 0;
}

/* Stops and joins the sampler thread. */
static void stop_sampler(struct gs_run *run)
{
    gs_ticker_stop(run->sampler);
    run->sampler = NULL;
}

/* Stops and joins the sender thread; it first sends what is queued (and a pending end). */
static void stop_sender(struct gs_run *run)
{
    if (!run->sender_on)
        return;
    pthread_mutex_lock(&run->mu);
    run->stop = true;
    pthread_cond_broadcast(&run->cv);
    pthread_mutex_unlock(&run->mu);
    pthread_join(run->sender, NULL);
    run->sender_on = false;
}

GS_API char *gs_run_finish(struct gs_run *run, const char *end_json, char *err, size_t errlen)
{
    struct gs_record_end end;
    struct gs_report_meta meta = {.exit_code = -1, .source = "in-process"};
    char host[256] = "", path[GS_RECORD_STR + 32];
    json_t *report;
    char *text;
    struct gs_err e;

    gs_err_clear(&e);
    if (!run) {
        gs_err_set(&e, GS_EINVAL, "no run");
        api_err(err, errlen, &e);
        return NULL;
    }
    if (parse_end(run, end_json, &end, &e) != GS_OK) {
        api_err(err, errlen, &e);
        return NULL;
    }
    stop_sampler(run);
    if (run->smp && !run->finished)
        sample_once(run); /* a last sample so a short run still has device figures */
    pthread_mutex_lock(&run->mu);
    run->finished = true;
    gs_agg_end(run->agg, &end);
    if (run->sender_on) {
        run->end = end;
        run->end_pending = true;
        pthread_cond_broadcast(&run->cv);
    }
    pthread_mutex_unlock(&run->mu);
    stop_sender(run);

    gethostname(host, sizeof host - 1);
    meta.run_name = run->hello.run[0] ? run->hello.run : NULL;
    meta.hostname = host;
    pthread_mutex_lock(&run->mu);
    /* Known here: what the sender could not pass on (0 without a receiver: nothing to drop). */
    gs_agg_set_records_dropped(run->agg, run->dropped);
    report = gs_agg_report(run->agg, &meta);
    pthread_mutex_unlock(&run->mu);
    if (!report) {
        gs_err_set(&e, GS_ENOMEM, "out of memory");
        api_err(err, errlen, &e);
        return NULL;
    }
    if (run->hello.output_dir[0]) {
        snprintf(path, sizeof path, "%s/metrics_report.json", run->hello.output_dir);
        if (gs_report_write(report, path, &e) != GS_OK) {
            api_err(err, errlen, &e);
            json_decref(report);
            return NULL;
        }
    }
    text = json_dumps(report, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(report);
    if (!text) {
        gs_err_set(&e, GS_ENOMEM, "out of memory");
        api_err(err, errlen, &e);
    }
    return text;
}

GS_API void gs_run_close(struct gs_run *run)
{
    if (!run)
        return;
    stop_sampler(run);
    stop_sender(run);
    if (run->fd >= 0)
        close(run->fd);
    if (run->agent_fd >= 0)
        close(run->agent_fd);
    free(run->ring);
    free(run->in_run);
    gs_attrib_tree_free(&run->tree);
    gs_snapshot_free(run->snap);
    gs_sampler_close(run->smp);
    gs_agg_free(run->agg);
    pthread_cond_destroy(&run->cv);
    pthread_mutex_destroy(&run->mu);
    free(run);
}

GS_API void gs_free(void *p)
{
    free(p);
}
