/*
 * /api/v1/history apart from the HTTP server: the query-string parameters checked and
 * defaulted, and the JSON document built from the store's points. Pure (no store, no clock,
 * no libmicrohttpd), so tests/unit/test_agent.c drives it directly. docs/api.md is the
 * contract.
 */
#ifndef GS_AGENT_HISTORY_API_H
#define GS_AGENT_HISTORY_API_H

#include <stddef.h>

#include "base/buf.h"
#include "gpuscope/gs_model.h"
#include "store/history.h"

/* Default range when from is missing, and the most points one answer carries. */
#define GS_HISTORY_DEFAULT_RANGE_S 900
#define GS_HISTORY_MAX_POINTS 20000
/* Points a default step aims at, at most. */
#define GS_HISTORY_TARGET_POINTS 1000

struct gs_history_req {
    unsigned gpu;
    enum gs_metric metric;
    double from, to; /* unix seconds, from < to */
    double step;     /* seconds; 0: every raw sample */
};

/* Checks the raw parameter values (NULL when absent) and fills q; now is the current unix
 * time (the default of to). On error returns GS_EINVAL and writes into msg a sentence that
 * starts with the parameter's name ("gpu: 'x' is not an integer 0..255"); an unknown or
 * not-kept metric says so and lists the metrics the history keeps. */
int gs_history_req_parse(struct gs_history_req *q, const char *gpu, const char *metric,
                         const char *from, const char *to, const char *step, double now, char *msg,
                         size_t msg_len);

/* The step a request without one gets: the smallest of 1, 5, 15, 60, 300, 900, 3600,
 * 21600 and 86400 seconds that keeps the range within GS_HISTORY_TARGET_POINTS points. */
double gs_history_default_step(double range_s);

/* A JSON answer under construction, in a buffer capped at 4 MiB (its status not GS_BUF_OK:
 * out of memory or past the cap). */
struct gs_history_doc {
    struct gs_buf text;
    unsigned points;
    int truncated; /* GS_HISTORY_MAX_POINTS reached */
};

/* Opens the document ({"gpu":...,"points":[), adds one point per call (the store's
 * gs_store_point_fn: returns 1 to stop at GS_HISTORY_MAX_POINTS or when out of memory), and
 * closes it with the source the store reported and the effective step. After end, text is the
 * whole document (the caller frees it with gs_buf_free or takes it), or empty with its status
 * set. */
void gs_history_doc_begin(struct gs_history_doc *d);
int gs_history_doc_point(void *doc, const struct gs_store_point *p);
void gs_history_doc_end(struct gs_history_doc *d, const struct gs_history_req *q,
                        enum gs_store_source source);

/* The step the store really used: rollups round up to whole minutes (0: 60). */
double gs_history_effective_step(double step, enum gs_store_source source);

/* {"error":"msg"} with msg escaped; malloc'd, NULL when out of memory. */
char *gs_history_error_json(const char *msg, size_t *len);

#endif
