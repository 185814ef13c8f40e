/*
 * libFuzzer target for the control messages a receiver sends a training process
 * (src/run/control.c, what src/run/client.c reads from the agent): gs_control_parse on any
 * bytes; a message it accepts has its fields in range, encodes (gs_control_encode) and
 * reparses to the same message.
 *
 * Input: one message; seeds are in fuzz/corpus/control/. Build and run: make fuzz.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_util.h"
#include "gpuscope/gs_err.h"
#include "run/control.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gs_control c, again;
    struct gs_err e;
    char buf[GS_CONTROL_MAX];
    int n;

    gs_err_clear(&e);
    if (gs_control_parse((const char *)data, size, &c, &e) != GS_OK) {
        CHECK(e.msg[0] != '\0');
        return 0;
    }
    CHECK(c.id > 0 && c.steps >= 1 && c.steps <= GS_CONTROL_MAX_STEPS);
    n = gs_control_encode(&c, buf, sizeof buf);
    CHECK(n > 0);
    CHECK(gs_control_parse(buf, (size_t)n, &again, &e) == GS_OK);
    CHECK(again.id == c.id && again.steps == c.steps);
    return 0;
}
