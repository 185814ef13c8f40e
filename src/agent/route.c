/*
 * route.c - the agent's routing table and rules (route.h); http.c serves what they decide.
 */
#include "agent/route.h"

#include <string.h>

#include "agent/web.h"

static const char *const no_args[] = {NULL};
static const char *const history_args[] = {"gpu", "metric", "from", "to", "step", NULL};
static const char *const runs_args[] = {"from", "limit", NULL};
static const char *const capture_args[] = {"steps", NULL};
static const char *const usage_args[] = {"by", "from", "to", "job", NULL};

static const struct gs_route routes[] = {
    {GS_ROUTE_METRICS, "/metrics", false, true, false, true, no_args, NULL},
    {GS_ROUTE_HEALTHZ, "/healthz", false, true, false, false, no_args, NULL},
    {GS_ROUTE_SNAPSHOT, "/api/v1/snapshot", false, false, true, true, no_args, NULL},
    {GS_ROUTE_HISTORY, "/api/v1/history", false, false, true, true, history_args, NULL},
    {GS_ROUTE_PROCESSES, "/api/v1/processes", false, false, true, true, no_args, NULL},
    {GS_ROUTE_ALERTS, "/api/v1/alerts", false, false, true, true, no_args, NULL},
    {GS_ROUTE_RUNS, "/api/v1/runs", true, false, true, true, runs_args, capture_args},
    {GS_ROUTE_USAGE, "/api/v1/usage", false, false, true, true, usage_args, NULL},
};

/* "/" and /assets/... (web.c), after the table. */
static const struct gs_route web_route = {GS_ROUTE_WEB, NULL,  false,   false,
                                          false,        false, no_args, NULL};

const struct gs_route *gs_route_find(const char *url)
{
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        size_t n = strlen(routes[i].path);
        if (strncmp(url, routes[i].path, n) == 0 &&
            (url[n] == '\0' || (routes[i].subpaths && url[n] == '/')))
            return &routes[i];
    }
    return gs_web_find(url) ? &web_route : NULL;
}

static bool is_post(const struct gs_route *r, const char *method)
{
    return r && r->post && strcmp(method, "POST") == 0;
}

const char *const *gs_route_args(const struct gs_route *r, const char *method)
{
    if (!r)
        return no_args;
    return is_post(r, method) ? r->post : r->args;
}

enum gs_route_verdict gs_route_decide(const struct gs_route *r, const struct gs_route_ask *q)
{
    bool post = is_post(r, q->method);

    if (q->metrics_only && !(r && r->metrics_role))
        return GS_ROUTE_FORBIDDEN_ROLE;
    if (q->query_bytes > GS_ROUTE_QUERY_MAX)
        return GS_ROUTE_QUERY_LONG;
    if (!r)
        return GS_ROUTE_NOT_FOUND;
    if (!post && strcmp(q->method, "GET") != 0 && strcmp(q->method, "HEAD") != 0)
        return GS_ROUTE_METHOD;
    if (q->body)
        return GS_ROUTE_BODY;
    if (q->unknown && r->strict_args)
        return GS_ROUTE_UNKNOWN_ARG;
    if (post)
        return q->requested_by ? GS_ROUTE_DO_POST : GS_ROUTE_NO_REQUESTED_BY;
    return r->filtered && q->filtered ? GS_ROUTE_SERVE_FILTERED : GS_ROUTE_SERVE;
}

const char *gs_route_allow(const struct gs_route *r)
{
    return r && r->post ? "GET, HEAD, POST" : "GET, HEAD";
}
