/*
 * usage_api.h - /api/v1/usage apart from the HTTP server (docs/api.md): the query parameters
 * checked, the groups the history returns merged with the current minute's rows (usage.h),
 * and the JSON document with hours, shares, kWh and cost. Pure (no store, no clock), so
 * tests/unit/test_usage.c drives it directly; fuzz_usage_query parses hostile parameters.
 */
#ifndef GS_AGENT_USAGE_API_H
#define GS_AGENT_USAGE_API_H

#include <stddef.h>

#include "store/usage.h"

#define GS_USAGE_DEFAULT_RANGE_S (7 * 86400.0)
/* Groups one answer carries at most (the largest by held hours); the rest are counted. */
#define GS_USAGE_MAX_GROUPS 10000

/* Checks the raw parameter values (NULL when absent) into sel (its owner filter untouched):
 * by (user, job, pod, namespace, gpu; default user), from and to (unix seconds; to defaults
 * to now, from to 7 days before to), job (a job id, at most GS_USAGE_JOB_LEN - 1 bytes).
 * GS_EINVAL with a sentence naming the parameter in msg. sel->job points into job. */
int gs_usage_req_parse(struct gs_usage_sel *sel, const char *by, const char *from, const char *to,
                       const char *job, double now, char *msg, size_t msg_len);

/* The name of a grouping ("user", ...). */
const char *gs_usage_by_name(enum gs_usage_by by);

/* An answer under construction: the groups so far. */
struct gs_usage_answer {
    struct gs_usage_sel sel;
    struct gs_usage_group *g;
    unsigned n, cap;
    unsigned dropped; /* groups past GS_USAGE_MAX_GROUPS */
    int oom;
};

/* Adds a group the history returned (a gs_usage_group_fn: ctx is the answer). */
int gs_usage_answer_group(void *ctx, const struct gs_usage_group *g);
/* Adds the rows of the current minute that the selection takes (a gs_usage_emit_fn). */
void gs_usage_answer_rows(void *ctx, const struct gs_usage_row *rows, unsigned n);

/* Prices: cost = held GPU-hours x gpu_hour_price + kWh x kwh_price, shown when either is > 0. */
struct gs_usage_prices {
    double gpu_hour_price, kwh_price;
    const char *currency; /* "" : none said */
};

/* The JSON document (malloc'ed, *len bytes; NULL when out of memory), groups sorted by held
 * hours, largest first. Frees the answer's groups. */
char *gs_usage_answer_json(struct gs_usage_answer *a, const struct gs_usage_prices *p, size_t *len);

#endif
