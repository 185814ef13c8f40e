/*
 * record.h - the step-record wire format between a training process and its receiver
 * (`gpuscope run` or the agent).
 *
 * Transport: a unix socket of type SOCK_SEQPACKET; one message = one JSON object (UTF-8, no
 * trailing newline needed), at most GS_RECORD_MAX bytes. The receiver learns the sender's
 * pid/uid/gid from SO_PEERCRED; the "pid" a record claims is informative only.
 *
 *   {"v":1,"type":"hello","run":"name","pid":123,"rank":0,"world_size":2,"local_rank":0,
 *    "framework":"hf","devices":[0],"logging_steps":10,"output_dir":"/path",
 *    "facts":{"dataloader_num_workers":0,"bf16":true,"attn_implementation":"sdpa"}}
 *   {"v":1,"type":"step","step":100,"t0":1764430000.125,"t1":1764430000.357,"rank":0,
 *    "device":0,"samples":8,"cuda_events":true,
 *    "ms":{"data":3.1,"forward":124.3,"backward":89.7,"optimizer_step":15.2,
 *          "communication":4.0,"total_step":232.1},
 *    "mem":{"allocated":..,"reserved":..,"peak_allocated":..,"peak_reserved":..,"total":..}}
 *   {"v":1,"type":"end","train_runtime":3624.5,"train_samples":10296,"train_steps":997,
 *    "train_loss":1.23,"outcome":{"exception":"ValueError: boom","seen_optimizer_step":0}}
 * A step's "ms" may also carry "communication_exposed" and "other" (record version 2 of
 * gs_step_rec; the wire version stays 1: they are optional keys), and a step its "tokens"
 * (an integer in [0, 2^53], the tokens trained on in the step: record version 3; absent or 0
 * = unknown; an older receiver ignores it).
 *   {"v":1,"type":"log","step":100,"t":1764430000.4,"rank":0,
 *    "values":{"loss":1.23,"learning_rate":2e-5,"grad_norm":0.8,"epoch":0.5}}
 * A "log" record (added after the first three; a receiver older than it refuses it as an
 * unknown type, which costs only that record) carries what the training loop logged: the HF
 * Trainer's on_log, or gpuscope.log(...). "values": 1..GS_RECORD_MAX_LOG entries, keys 1..48
 * bytes of [A-Za-z0-9_.-/], finite numbers only (strings, booleans, null are left out by the
 * sender; the parser refuses them). "step", "t" and "rank" are optional.
 *
 * Rules (gs_record_parse enforces them; every violation is an error naming the field):
 * "v" must be 1 (a newer version is refused with "unsupported record version N"); "type" one
 * of the three; numbers finite; times 0 <= ms <= 1e7; t0 <= t1; step, samples, memory
 * integers in [0, 2^53]; rank/device/world_size small ints (-1..65535); strings <= 255
 * bytes without NUL; "devices" <= 64 entries; unknown keys are ignored (forward
 * compatibility); absent optional fields stay "unknown" (NaN / 0 / -1), never invented.
 * "facts" (the run's settings as the training side found them, docs/python.md) is an object
 * of at most GS_RECORD_MAX_FACTS scalar entries: keys 1..48 bytes of [A-Za-z0-9_.-], values
 * true/false, integers in [-2^53, 2^53], finite numbers, or strings of at most 128 bytes
 * without control characters; null means absent (left out); arrays and objects are refused;
 * encoded back it takes at most GS_RECORD_FACTS_BYTES, so a hello always fits a message.
 * A hello's optional "tags" ({"team":"nlp","ablation":"no-warmup"}: `gpuscope run --tag`,
 * $GPUSCOPE_RUN_TAGS; added after the first version, an older receiver ignores it) is an
 * object of at most GS_RECORD_MAX_TAGS entries, keys as facts' keys, values strings of at most
 * 128 bytes without control characters (null: left out; anything else is refused), at most
 * GS_RECORD_TAGS_BYTES encoded.
 * A hello's optional "token" (32 lowercase hex digits: 128 random bits the sender drew at the
 * run's start) names its run across reconnections: a sender whose receiver went away (an
 * agent restart) connects again and sends its hello again with the same token, and the
 * receiver resumes that run (the agent: only for the uid that opened it, docs/agent.md,
 * RESUMING A RUN). "dropped" (an integer in [0, 2^53]) counts the step records the sender
 * could not pass on so far (its queue full while the receiver was away). Both were added
 * after the first version; an older receiver ignores them.
 */
#ifndef GS_RUN_RECORD_H
#define GS_RUN_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpuscope/gs_run.h"

#define GS_RECORD_VERSION 1
#define GS_RECORD_MAX 8192
#define GS_RECORD_STR 256
#define GS_RECORD_TOKEN 33 /* hello "token": 32 hex digits + NUL */
#define GS_RECORD_JOB 129  /* hello "job" and "node": 128 bytes + NUL */
#define GS_RECORD_MAX_DEVICES 64

#define GS_RECORD_MAX_FACTS 32
#define GS_RECORD_FACT_KEY 49      /* 48 bytes + NUL */
#define GS_RECORD_FACT_STR 129     /* 128 bytes + NUL */
#define GS_RECORD_FACTS_BYTES 3072 /* the encoded "facts" object, at most */

enum gs_record_type { GS_REC_HELLO = 1, GS_REC_STEP, GS_REC_END, GS_REC_LOG };

#define GS_RECORD_MAX_LOG 32

/* A logged record: loss, learning rate, ... at a step. */
struct gs_record_log {
    double step;  /* NaN = absent */
    double t;     /* unix s; NaN = absent */
    int32_t rank; /* -1 = absent */
    uint32_t n;
    char key[GS_RECORD_MAX_LOG][GS_RECORD_FACT_KEY];
    double val[GS_RECORD_MAX_LOG];
};

enum gs_fact_type { GS_FACT_BOOL = 1, GS_FACT_INT, GS_FACT_REAL, GS_FACT_STR };

/* One fact: a key and a scalar, in the order the sender wrote them. */
struct gs_fact {
    char key[GS_RECORD_FACT_KEY];
    enum gs_fact_type type;
    union {
        int b;     /* GS_FACT_BOOL: 0 / 1 */
        int64_t i; /* GS_FACT_INT */
        double d;  /* GS_FACT_REAL */
        char s[GS_RECORD_FACT_STR];
    } v;
};

struct gs_record_facts {
    uint32_t n;
    struct gs_fact f[GS_RECORD_MAX_FACTS];
};

#define GS_RECORD_MAX_TAGS 16
#define GS_RECORD_TAGS_BYTES 2048 /* the encoded "tags" object, at most */

/* A hello's tags, in the sender's order. */
struct gs_record_tags {
    uint32_t n;
    char key[GS_RECORD_MAX_TAGS][GS_RECORD_FACT_KEY];
    char val[GS_RECORD_MAX_TAGS][GS_RECORD_FACT_STR];
};

struct gs_record_hello {
    char run[GS_RECORD_STR];              /* "" = unnamed */
    char framework[32];                   /* "hf", "torch", "" */
    char output_dir[GS_RECORD_STR];       /* "" = none */
    int64_t pid;                          /* claimed; -1 = absent */
    int32_t rank, world_size, local_rank; /* -1 = absent */
    int32_t logging_steps;                /* -1 = absent */
    uint32_t n_devices;
    int32_t devices[GS_RECORD_MAX_DEVICES];
    struct gs_record_facts facts; /* n = 0: none sent */
    /* A multi-node job (docs/run.md, JOBS): the id every rank of the job shares and the
     * sender's node name; "" = absent (optional keys, wire version 1). */
    char job[GS_RECORD_JOB];
    char node[GS_RECORD_JOB];
    struct gs_record_tags tags;  /* n = 0: none sent */
    char token[GS_RECORD_TOKEN]; /* "" = absent; else GS_RECORD_TOKEN - 1 lowercase hex */
    int64_t dropped;             /* -1 = absent */
};

struct gs_record_end {
    double train_runtime; /* seconds; NaN = absent */
    double train_samples; /* NaN = absent */
    double train_steps;   /* NaN = absent */
    double train_loss;    /* NaN = absent */
    /* What the sender saw of the run's end (docs/report.md, OUTCOME): "exception" (the last
     * line of an uncaught exception's traceback), "torch_imported", "seen_data",
     * "seen_forward", ... Same rules as facts; n = 0: none sent. */
    struct gs_record_facts outcome;
};

/* Phase p (< GS_PH_ALL) of a step record, wherever the layout keeps it. */
static inline double gs_step_ms(const struct gs_step_rec *s, int p)
{
    return p < GS_PH_N ? s->ms[p] : s->ms_x[p - GS_PH_N];
}

static inline void gs_step_ms_set(struct gs_step_rec *s, int p, double v)
{
    if (p < GS_PH_N)
        s->ms[p] = v;
    else
        s->ms_x[p - GS_PH_N] = v;
}

struct gs_record {
    enum gs_record_type type;
    union {
        struct gs_record_hello hello;
        struct gs_step_rec step;
        struct gs_record_end end;
        struct gs_record_log log;
    } u;
};

/* Parses one message. Returns GS_OK, or GS_EPARSE with a one-line reason in err
 * ("step.ms.forward: not a number"). Never reads past len; buf need not be NUL-terminated. */
struct gs_err;
int gs_record_parse(const char *buf, size_t len, struct gs_record *out, struct gs_err *err);

/* The time rule of step records, one for the agent's socket and `gpuscope run`'s receiver
 * (issue 18): a step whose t0 is before 2000-01-01 (a clock at 0) or more than
 * GS_RECORD_BEFORE_RUN_S before its run began (a sender making up history) is refused. Returns
 * NULL when step may be kept in a run that began at run_start_s (unix seconds; <= 0: unknown,
 * only the first rule applies), else the reason: "before 2000-01-01" or "before the run began
 * (its hello)". */
#define GS_RECORD_T_MIN 946684800.0
#define GS_RECORD_BEFORE_RUN_S 60.0
const char *gs_record_step_time_refusal(const struct gs_step_rec *step, double run_start_s);

/* Encodes rec as one message into buf (NUL-terminated). Returns the length without the NUL,
 * or -1 if it does not fit. Absent values are left out. */
int gs_record_encode(const struct gs_record *rec, char *buf, size_t size);

/* Validates a "facts" object (the rules above; errors name "<ctx>facts.<key>") into out:
 * GS_OK, or GS_EPARSE with err. obj NULL or JSON null: no facts. Used by the parser and by
 * gs_run_open's config. */
struct json_t;
int gs_record_facts_parse(const struct json_t *obj, const char *ctx, struct gs_record_facts *out,
                          struct gs_err *err);

/* The end record's "outcome" object: the facts rules, errors naming "<ctx>outcome.<key>":
 * GS_OK, or GS_EPARSE with err. */
int gs_record_outcome_parse(const struct json_t *obj, const char *ctx, struct gs_record_facts *out,
                            struct gs_err *err);

/* Validates a "tags" object (the rules above; errors name "<ctx>tags.<key>") into out: GS_OK,
 * or GS_EPARSE with err. obj NULL or JSON null: no tags. Used by the parser, the package's
 * $GPUSCOPE_RUN_TAGS and gpuscope run --tag. */
int gs_record_tags_parse(const struct json_t *obj, const char *ctx, struct gs_record_tags *out,
                         struct gs_err *err);

/* The tags as a new JSON object of strings (keys in order), NULL on allocation failure. */
struct json_t *gs_record_tags_json(const struct gs_record_tags *t);

/* The facts as a new JSON object (keys in order), NULL on allocation failure. */
struct json_t *gs_record_facts_json(const struct gs_record_facts *f);

/* The fact named key, or NULL. */
const struct gs_fact *gs_record_fact_get(const struct gs_record_facts *f, const char *key);

/* True when a and b hold the same record (NaN equals NaN: both absent). */
bool gs_record_equal(const struct gs_record *a, const struct gs_record *b);

#endif
