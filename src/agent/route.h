/*
 * route.h - the agent's HTTP routing rules (docs/api.md), apart from the connections: which
 * route a path names, which query arguments it takes, and what a request gets before its
 * handler runs (404, 403, 405, 400, 414) or which answer it gets (an admin's, a filtered
 * viewer's, a POST action). http.c asks these for every request and keeps the handlers.
 */
#ifndef GS_AGENT_ROUTE_H
#define GS_AGENT_ROUTE_H

#include <stdbool.h>
#include <stddef.h>

#define GS_ROUTE_PATH_MAX 256   /* bytes of path; more: 414 */
#define GS_ROUTE_QUERY_MAX 1024 /* bytes of query arguments, names and values; more: 414 */

enum gs_route_id {
    GS_ROUTE_METRICS,   /* /metrics */
    GS_ROUTE_HEALTHZ,   /* /healthz */
    GS_ROUTE_SNAPSHOT,  /* /api/v1/snapshot */
    GS_ROUTE_HISTORY,   /* /api/v1/history */
    GS_ROUTE_PROCESSES, /* /api/v1/processes */
    GS_ROUTE_ALERTS,    /* /api/v1/alerts */
    GS_ROUTE_RUNS,      /* /api/v1/runs[/...] */
    GS_ROUTE_USAGE,     /* /api/v1/usage (usage_api.h) */
    GS_ROUTE_WEB,       /* the dashboard: "/" and its assets (web.c) */
    GS_ROUTE__N
};

struct gs_route {
    enum gs_route_id id;
    const char *path;
    bool subpaths;           /* also path + "/..." */
    bool metrics_role;       /* a metrics-only credential may ask */
    bool strict_args;        /* a query name not in args is a 400 */
    bool filtered;           /* a viewer the policy filters gets an answer of its own */
    const char *const *args; /* the GET/HEAD query names, NULL-terminated */
    const char *const *post; /* POST's query names; NULL: GET and HEAD only */
};

/* The route of a path, or NULL: not found. */
const struct gs_route *gs_route_find(const char *url);

/* The query names a request with this method may give (route NULL: none). */
const char *const *gs_route_args(const struct gs_route *r, const char *method);

/* What the routing knows of one request besides its route. */
struct gs_route_ask {
    const char *method;
    bool metrics_only;   /* the credential reaches /metrics and /healthz only */
    bool filtered;       /* the visibility policy filters this viewer */
    bool body;           /* Transfer-Encoding, a Content-Length other than 0, or upload data */
    bool requested_by;   /* the header X-Requested-By is there */
    const char *unknown; /* the first query name gs_route_args does not list, or NULL */
    size_t query_bytes;  /* names and values, 2 bytes more each */
};

enum gs_route_verdict {
    GS_ROUTE_SERVE,          /* the route's answer */
    GS_ROUTE_SERVE_FILTERED, /* the route's answer for a filtered viewer */
    GS_ROUTE_DO_POST,        /* the route's POST action */
    GS_ROUTE_FORBIDDEN_ROLE, /* 403: a metrics-only credential elsewhere */
    GS_ROUTE_QUERY_LONG,     /* 414 */
    GS_ROUTE_NOT_FOUND,      /* 404 */
    GS_ROUTE_METHOD,         /* 405 (Allow: gs_route_allow) */
    GS_ROUTE_BODY,           /* 400: a request with a body */
    GS_ROUTE_UNKNOWN_ARG,    /* 400: a query name the route does not take */
    GS_ROUTE_NO_REQUESTED_BY /* 403: a POST without X-Requested-By */
};

/* The rules in the API's order (docs/api.md): credential's reach, query length, route, method,
 * body, arguments, then the answer. r NULL: no route. */
enum gs_route_verdict gs_route_decide(const struct gs_route *r, const struct gs_route_ask *q);

/* The Allow header of a 405. */
const char *gs_route_allow(const struct gs_route *r);

#endif
