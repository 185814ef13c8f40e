/*
 * control.h - messages a receiver sends back to a training process over its step-record
 * connection (the other direction of src/run/record.h). One kind so far: the node's agent
 * asking the ranks of a run for a profiler window (`gpuscope trace capture --run ID`,
 * docs/trace.md), as one SOCK_SEQPACKET message
 *
 *     {"v":1,"type":"capture","id":ID,"steps":N}
 *
 * with ID a positive integer that tells requests apart and N 1..GS_CONTROL_MAX_STEPS. The
 * sender (src/run/client.c) reads them without blocking and hands the newest to the package.
 */
#ifndef GS_RUN_CONTROL_H
#define GS_RUN_CONTROL_H

#include <stddef.h>
#include <stdint.h>

struct gs_err;

#define GS_CONTROL_VERSION 1
#define GS_CONTROL_MAX 256 /* bytes of one message */
#define GS_CONTROL_MAX_STEPS 1000

struct gs_control {
    int64_t id;    /* > 0 */
    int32_t steps; /* 1 .. GS_CONTROL_MAX_STEPS */
};

/* Parses one message (need not be NUL-terminated; never read past len). GS_OK, or GS_EPARSE
 * with a one-line reason ("capture: steps: want 1..1000"). Unknown keys are refused: a
 * newer agent's message is told apart by its version, not guessed at. */
int gs_control_parse(const char *buf, size_t len, struct gs_control *out, struct gs_err *err);

/* Writes the message for c into buf (NUL-terminated); returns its length, or -1 when it does
 * not fit. */
int gs_control_encode(const struct gs_control *c, char *buf, size_t cap);

#endif
