/*
 * record.h - the step-record wire format between a training process and its receiver
 * (`gpuscope run` or the agent).
 *
 * Transport: a unix socket of type SOCK_SEQPACKET; one message = one JSON object (UTF-8, no
 * trailing newline needed), at most GS_RECORD_MAX bytes. The receiver learns the sender's
 * pid/uid/gid from SO_PEERCRED; the "pid" a record claims is informative only.
 *
 *   {"v":1,"type":"hello","run":"name","pid":123,"rank":0,"world_size":2,"local_rank":0,
 *    "framework":"hf","devices":[0],"logging_steps":10,"output_dir":"/path"}
 *   {"v":1,"type":"step","step":100,"t0":1764430000.125,"t1":1764430000.357,"rank":0,
 *    "device":0,"samples":8,"cuda_events":true,
 *    "ms":{"data":3.1,"forward":124.3,"backward":89.7,"optimizer_step":15.2,
 *          "communication":4.0,"total_step":232.1},
 *    "mem":{"allocated":..,"reserved":..,"peak_allocated":..,"peak_reserved":..,"total":..}}
 *   {"v":1,"type":"end","train_runtime":3624.5,"train_samples":10296,"train_steps":997,
 *    "train_loss":1.23}
 *
 * Rules (gs_record_parse enforces them; every violation is an error naming the field):
 * "v" must be 1 (a newer version is refused with "unsupported record version N"); "type" one
 * of the three; numbers finite; times 0 <= ms <= 1e7; t0 <= t1; step, samples, memory
 * integers in [0, 2^53]; rank/device/world_size small ints (-1..65535); strings <= 255
 * bytes without NUL; "devices" <= 64 entries; unknown keys are ignored (forward
 * compatibility); absent optional fields stay "unknown" (NaN / 0 / -1), never invented.
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
#define GS_RECORD_MAX_DEVICES 64

enum gs_record_type { GS_REC_HELLO = 1, GS_REC_STEP, GS_REC_END };

struct gs_record_hello {
    char run[GS_RECORD_STR];        /* "" = unnamed */
    char framework[32];             /* "hf", "torch", "" */
    char output_dir[GS_RECORD_STR]; /* "" = none */
    int64_t pid;                    /* claimed; -1 = absent */
    int32_t rank, world_size, local_rank; /* -1 = absent */
    int32_t logging_steps;          /* -1 = absent */
    uint32_t n_devices;
    int32_t devices[GS_RECORD_MAX_DEVICES];
};

struct gs_record_end {
    double train_runtime; /* seconds; NaN = absent */
    double train_samples; /* NaN = absent */
    double train_steps;   /* NaN = absent */
    double train_loss;    /* NaN = absent */
};

struct gs_record {
    enum gs_record_type type;
    union {
        struct gs_record_hello hello;
        struct gs_step_rec step;
        struct gs_record_end end;
    } u;
};

/* Parses one message. Returns 0, or -1 with a one-line reason in err ("step.ms.forward: not a
 * number"). Never reads past len; buf need not be NUL-terminated. */
int gs_record_parse(const char *buf, size_t len, struct gs_record *out, char *err, size_t errlen);

/* Encodes rec as one message into buf (NUL-terminated). Returns the length without the NUL,
 * or -1 if it does not fit. Absent values are left out. */
int gs_record_encode(const struct gs_record *rec, char *buf, size_t size);

/* True when a and b hold the same record (NaN equals NaN: both absent). */
bool gs_record_equal(const struct gs_record *a, const struct gs_record *b);

#endif
