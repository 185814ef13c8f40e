/*
 * control.c - the receiver-to-sender messages of control.h: a strict parse (jansson, the
 * object's keys checked one by one) and the encoder the agent uses.
 */
#include "run/control.h"

#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "gpuscope/gs_err.h"

int gs_control_parse(const char *buf, size_t len, struct gs_control *out, struct gs_err *err)
{
    json_error_t je;
    json_t *o, *v;
    const char *key;
    int have_id = 0, have_steps = 0, have_type = 0, have_v = 0;
    int rc = GS_OK;

    memset(out, 0, sizeof *out);
    if (len > GS_CONTROL_MAX)
        return gs_err_set(err, GS_EPARSE, "control: message of %zu bytes exceeds %d", len,
                          GS_CONTROL_MAX);
    o = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    if (!o)
        return gs_err_set(err, GS_EPARSE, "control: %s", je.text);
    if (!json_is_object(o)) {
        json_decref(o);
        return gs_err_set(err, GS_EPARSE, "control: not an object");
    }
    json_object_foreach(o, key, v)
    {
        if (strcmp(key, "v") == 0) {
            if (!json_is_integer(v) || json_integer_value(v) != GS_CONTROL_VERSION) {
                rc = gs_err_set(err, GS_EPARSE, "control: v: want %d", GS_CONTROL_VERSION);
                break;
            }
            have_v = 1;
        } else if (strcmp(key, "type") == 0) {
            if (!json_is_string(v) || strcmp(json_string_value(v), "capture") != 0) {
                rc = gs_err_set(err, GS_EPARSE, "control: type: want \"capture\"");
                break;
            }
            have_type = 1;
        } else if (strcmp(key, "id") == 0) {
            if (!json_is_integer(v) || json_integer_value(v) <= 0) {
                rc = gs_err_set(err, GS_EPARSE, "capture: id: want a positive integer");
                break;
            }
            out->id = (int64_t)json_integer_value(v);
            have_id = 1;
        } else if (strcmp(key, "steps") == 0) {
            if (!json_is_integer(v) || json_integer_value(v) < 1 ||
                json_integer_value(v) > GS_CONTROL_MAX_STEPS) {
                rc = gs_err_set(err, GS_EPARSE, "capture: steps: want 1..%d", GS_CONTROL_MAX_STEPS);
                break;
            }
            out->steps = (int32_t)json_integer_value(v);
            have_steps = 1;
        } else {
            rc = gs_err_set(err, GS_EPARSE, "control: %.48s: unknown key", key);
            break;
        }
    }
    json_decref(o);
    if (rc == GS_OK && !(have_v && have_type && have_id && have_steps))
        rc = gs_err_set(err, GS_EPARSE, "control: %s: missing",
                        !have_v      ? "v"
                        : !have_type ? "type"
                        : !have_id   ? "id"
                                     : "steps");
    if (rc != GS_OK)
        memset(out, 0, sizeof *out);
    return rc;
}

int gs_control_encode(const struct gs_control *c, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "{\"v\":%d,\"type\":\"capture\",\"id\":%lld,\"steps\":%d}",
                     GS_CONTROL_VERSION, (long long)c->id, (int)c->steps);

    return n < 0 || (size_t)n >= cap ? -1 : n;
}
