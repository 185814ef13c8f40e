/*
 * Unit tests of the agent's HTTP routing (src/agent/route.c, served by src/agent/http.c):
 * which route a path names (exact paths, /api/v1/runs/..., no prefix matches, the dashboard's
 * assets), which query names each method may give, and the verdicts in the API's order
 * (docs/api.md): a metrics-only credential's reach, query length, 404, 405 with its Allow, a
 * body, an unknown parameter on a strict route, a POST without X-Requested-By, and a filtered
 * viewer's own answer where the route has one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "agent/route.h"

static enum gs_route_id id_of(const char *url)
{
    const struct gs_route *r = gs_route_find(url);

    return r ? r->id : GS_ROUTE__N;
}

static void test_find(void **state)
{
    (void)state;
    assert_int_equal(id_of("/metrics"), GS_ROUTE_METRICS);
    assert_int_equal(id_of("/healthz"), GS_ROUTE_HEALTHZ);
    assert_int_equal(id_of("/api/v1/snapshot"), GS_ROUTE_SNAPSHOT);
    assert_int_equal(id_of("/api/v1/history"), GS_ROUTE_HISTORY);
    assert_int_equal(id_of("/api/v1/processes"), GS_ROUTE_PROCESSES);
    assert_int_equal(id_of("/api/v1/alerts"), GS_ROUTE_ALERTS);
    assert_int_equal(id_of("/api/v1/runs"), GS_ROUTE_RUNS);
    assert_int_equal(id_of("/api/v1/runs/12"), GS_ROUTE_RUNS);
    assert_int_equal(id_of("/api/v1/runs/12/steps"), GS_ROUTE_RUNS);
    assert_int_equal(id_of("/api/v1/usage"), GS_ROUTE_USAGE);
    assert_int_equal(id_of("/api/v1/usage/x"), GS_ROUTE__N); /* no sub-paths */
    assert_int_equal(id_of("/"), GS_ROUTE_WEB);
    /* no prefix matches, no sub-paths where the route takes none */
    assert_int_equal(id_of("/metricsx"), GS_ROUTE__N);
    assert_int_equal(id_of("/metrics/"), GS_ROUTE__N);
    assert_int_equal(id_of("/api/v1/runsx"), GS_ROUTE__N);
    assert_int_equal(id_of("/api/v1/snapshot/1"), GS_ROUTE__N);
    assert_int_equal(id_of("/api/v1"), GS_ROUTE__N);
    assert_int_equal(id_of("/nothing"), GS_ROUTE__N);
    assert_int_equal(id_of(""), GS_ROUTE__N);
}

static int lists(const char *const *names, const char *name)
{
    for (; *names; names++)
        if (strcmp(*names, name) == 0)
            return 1;
    return 0;
}

static void test_args(void **state)
{
    const struct gs_route *runs = gs_route_find("/api/v1/runs/3/capture");
    const struct gs_route *hist = gs_route_find("/api/v1/history");

    (void)state;
    assert_true(lists(gs_route_args(hist, "GET"), "gpu"));
    assert_true(lists(gs_route_args(hist, "GET"), "step"));
    assert_false(lists(gs_route_args(hist, "GET"), "limit"));
    assert_true(lists(gs_route_args(runs, "GET"), "limit"));
    assert_false(lists(gs_route_args(runs, "GET"), "steps"));
    assert_true(lists(gs_route_args(runs, "POST"), "steps"));
    assert_false(lists(gs_route_args(runs, "POST"), "limit"));
    /* POST to a route without one: its GET names; no route: none */
    assert_false(lists(gs_route_args(gs_route_find("/metrics"), "POST"), "gpu"));
    assert_null(gs_route_args(NULL, "GET")[0]);
    assert_string_equal(gs_route_allow(runs), "GET, HEAD, POST");
    assert_string_equal(gs_route_allow(hist), "GET, HEAD");
}

static enum gs_route_verdict decide(const char *url, struct gs_route_ask q)
{
    if (!q.method)
        q.method = "GET";
    return gs_route_decide(gs_route_find(url), &q);
}

static void test_verdicts(void **state)
{
    (void)state;
    /* answers */
    assert_int_equal(decide("/metrics", (struct gs_route_ask){0}), GS_ROUTE_SERVE);
    assert_int_equal(decide("/metrics", (struct gs_route_ask){.method = "HEAD"}), GS_ROUTE_SERVE);
    assert_int_equal(decide("/api/v1/alerts", (struct gs_route_ask){.filtered = true}),
                     GS_ROUTE_SERVE_FILTERED);
    assert_int_equal(decide("/healthz", (struct gs_route_ask){.filtered = true}), GS_ROUTE_SERVE);
    assert_int_equal(decide("/", (struct gs_route_ask){.filtered = true}), GS_ROUTE_SERVE);
    assert_int_equal(decide("/api/v1/runs/3/capture",
                            (struct gs_route_ask){.method = "POST", .requested_by = 1}),
                     GS_ROUTE_DO_POST);
    /* a metrics-only credential: /metrics and /healthz only, even where nothing is */
    assert_int_equal(decide("/metrics", (struct gs_route_ask){.metrics_only = 1}), GS_ROUTE_SERVE);
    assert_int_equal(decide("/healthz", (struct gs_route_ask){.metrics_only = 1}), GS_ROUTE_SERVE);
    assert_int_equal(decide("/api/v1/snapshot", (struct gs_route_ask){.metrics_only = 1}),
                     GS_ROUTE_FORBIDDEN_ROLE);
    assert_int_equal(decide("/nothing", (struct gs_route_ask){.metrics_only = 1}),
                     GS_ROUTE_FORBIDDEN_ROLE);
    /* the query's length comes before the route */
    assert_int_equal(
        decide("/nothing", (struct gs_route_ask){.query_bytes = GS_ROUTE_QUERY_MAX + 1}),
        GS_ROUTE_QUERY_LONG);
    assert_int_equal(decide("/metrics", (struct gs_route_ask){.query_bytes = GS_ROUTE_QUERY_MAX}),
                     GS_ROUTE_SERVE);
    assert_int_equal(decide("/nothing", (struct gs_route_ask){0}), GS_ROUTE_NOT_FOUND);
    /* methods */
    assert_int_equal(decide("/metrics", (struct gs_route_ask){.method = "POST"}), GS_ROUTE_METHOD);
    assert_int_equal(decide("/api/v1/runs", (struct gs_route_ask){.method = "DELETE"}),
                     GS_ROUTE_METHOD);
    /* a body, then the arguments */
    assert_int_equal(decide("/metrics", (struct gs_route_ask){.body = 1, .unknown = "x"}),
                     GS_ROUTE_BODY);
    assert_int_equal(decide("/api/v1/snapshot", (struct gs_route_ask){.unknown = "x"}),
                     GS_ROUTE_UNKNOWN_ARG);
    assert_int_equal(decide("/metrics", (struct gs_route_ask){.unknown = "x"}), GS_ROUTE_SERVE);
    assert_int_equal(decide("/", (struct gs_route_ask){.unknown = "x"}), GS_ROUTE_SERVE);
    assert_int_equal(decide("/api/v1/runs/3/capture",
                            (struct gs_route_ask){.method = "POST", .unknown = "limit"}),
                     GS_ROUTE_UNKNOWN_ARG);
    /* a POST needs X-Requested-By (a browser page cannot send it cross-site) */
    assert_int_equal(decide("/api/v1/runs/3/capture", (struct gs_route_ask){.method = "POST"}),
                     GS_ROUTE_NO_REQUESTED_BY);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_find),
        cmocka_unit_test(test_args),
        cmocka_unit_test(test_verdicts),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
