/*
 * Unit tests of the visibility policy's pure parts (src/agent/policy.c): which GPUs a viewer
 * sees, the filtered snapshot copy behind /metrics, the filtered snapshot, processes and
 * alerts documents (the filtered copy encoded by core/snapjson.c), the /proc/net/tcp uid
 * lookup, the cgroup devices.list parser, and the snapshot codec's round trip, the clients'
 * way back from the agent's snapshot document to a snapshot (cli/agent_client.c). A
 * hand-built snapshot: GPU 0 runs a process of uid 1001 and one of uid 1002, GPU 1 one of
 * uid 1002 only, GPU 2 nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent/alerts.h"
#include "agent/policy.h"
#include "core/snapjson.h"
#include "gpuscope/gs_err.h"

#include "snap_fixture.h"

static void test_view_used_gpus(void **state)
{
    struct gs_snapshot *s = make_snap();
    struct gs_policy_settings set = {.process_visibility = GS_PROCVIS_OWN,
                                     .gpu_visibility = GS_GPUVIS_USED};
    struct gs_viewer a = viewer(UID_A, GS_ROLE_VIEWER), b = viewer(UID_B, GS_ROLE_VIEWER);
    struct gs_viewer nobody = {.role = GS_ROLE_VIEWER}; /* uid unknown */
    struct gs_viewer admin = viewer(UID_A, GS_ROLE_ADMIN);
    struct gs_policy_view v;
    unsigned char minors[255] = {0};

    (void)state;
    gs_policy_view_build(&v, &set, &a, s, NULL, 0);
    assert_true(v.filtered);
    assert_true(gs_policy_gpu_visible(&v, 0));
    assert_false(gs_policy_gpu_visible(&v, 1));
    assert_false(gs_policy_gpu_visible(&v, 2));
    assert_false(gs_policy_gpu_visible(&v, 100000)); /* out of range: hidden, no overflow */

    gs_policy_view_build(&v, &set, &b, s, NULL, 0);
    assert_true(gs_policy_gpu_visible(&v, 0));
    assert_true(gs_policy_gpu_visible(&v, 1));
    assert_false(gs_policy_gpu_visible(&v, 2));

    /* A viewer nobody could name sees no GPU at all under `used`. */
    gs_policy_view_build(&v, &set, &nobody, s, NULL, 0);
    assert_false(gs_policy_gpu_visible(&v, 0));
    assert_false(gs_policy_gpu_visible(&v, 1));

    /* The job cgroup's device list adds GPU 2 (minor 2) for A. */
    minors[2] = 1;
    gs_policy_view_build(&v, &set, &a, s, minors, sizeof minors);
    assert_true(gs_policy_gpu_visible(&v, 0));
    assert_false(gs_policy_gpu_visible(&v, 1));
    assert_true(gs_policy_gpu_visible(&v, 2));

    /* Admins and an all/all policy: nothing filtered. */
    gs_policy_view_build(&v, &set, &admin, s, NULL, 0);
    assert_false(v.filtered);
    assert_true(gs_policy_gpu_visible(&v, 1) && gs_policy_gpu_visible(&v, 2));
    set.process_visibility = GS_PROCVIS_ALL;
    set.gpu_visibility = GS_GPUVIS_ALL;
    gs_policy_view_build(&v, &set, &a, s, NULL, 0);
    assert_false(v.filtered);
    /* gpu_visibility all with own: filtered, every GPU visible. */
    set.process_visibility = GS_PROCVIS_OWN;
    gs_policy_view_build(&v, &set, &a, s, NULL, 0);
    assert_true(v.filtered);
    assert_true(gs_policy_gpu_visible(&v, 1) && gs_policy_gpu_visible(&v, 2));
    gs_snapshot_free(s);
}

static void test_filter_snapshot_struct(void **state)
{
    struct gs_snapshot *s = make_snap(), *f;
    struct gs_policy_settings set = {.process_visibility = GS_PROCVIS_OWN,
                                     .gpu_visibility = GS_GPUVIS_USED};
    struct gs_viewer b = viewer(UID_B, GS_ROLE_VIEWER), a = viewer(UID_A, GS_ROLE_VIEWER);
    struct gs_policy_view v;

    (void)state;
    /* B: GPUs 0 and 1, its two processes, re-indexed. */
    gs_policy_view_build(&v, &set, &b, s, NULL, 0);
    f = gs_policy_filter_snapshot(&v, s);
    assert_non_null(f);
    assert_int_equal(f->n_gpus, 2);
    assert_int_equal(f->gpus[0].index, 0);
    assert_int_equal(f->gpus[1].index, 1);
    assert_int_equal(f->n_procs, 2);
    assert_int_equal(f->procs[0].pid, 200);
    assert_int_equal(f->procs[1].pid, 201);
    assert_int_equal(f->procs[1].gpu, 1);
    gs_snapshot_free(f);

    /* A under gpu all: three GPUs, only pid 100; the source is untouched. */
    set.gpu_visibility = GS_GPUVIS_ALL;
    gs_policy_view_build(&v, &set, &a, s, NULL, 0);
    f = gs_policy_filter_snapshot(&v, s);
    assert_non_null(f);
    assert_int_equal(f->n_gpus, 3);
    assert_int_equal(f->n_procs, 1);
    assert_int_equal(f->procs[0].pid, 100);
    assert_int_equal(s->n_procs, 3);
    gs_snapshot_free(f);

    /* none: no process in full, not even one's own. */
    set.process_visibility = GS_PROCVIS_NONE;
    gs_policy_view_build(&v, &set, &a, s, NULL, 0);
    f = gs_policy_filter_snapshot(&v, s);
    assert_non_null(f);
    assert_int_equal(f->n_procs, 0);
    gs_snapshot_free(f);
    gs_snapshot_free(s);
}

static void test_filter_snapshot_doc_own(void **state)
{
    struct gs_snapshot *s = make_snap();
    struct gs_policy_settings set = {.process_visibility = GS_PROCVIS_OWN,
                                     .gpu_visibility = GS_GPUVIS_ALL};
    struct gs_viewer a = viewer(UID_A, GS_ROLE_VIEWER);
    struct gs_policy_view v;
    json_t *doc, *gpus, *g0, *procs, *h;
    char *text;

    (void)state;
    gs_policy_view_build(&v, &set, &a, s, NULL, 0);
    doc = filtered_doc(&v, s);
    gpus = json_object_get(doc, "gpus");
    assert_int_equal(json_array_size(gpus), 3);
    g0 = json_array_get(gpus, 0);
    procs = json_object_get(g0, "processes");
    assert_int_equal(json_array_size(procs), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(procs, 0), "pid")), 100);
    assert_string_equal(json_string_value(json_object_get(json_array_get(procs, 0), "command")),
                        "python train_a.py");
    h = json_object_get(g0, "hidden_processes");
    assert_int_equal(json_integer_value(json_object_get(h, "count")), 1);
    assert_int_equal(json_integer_value(json_object_get(h, "gpu_memory")), 2000);
    h = json_object_get(json_array_get(gpus, 1), "hidden_processes");
    assert_int_equal(json_integer_value(json_object_get(h, "count")), 1);
    assert_int_equal(json_integer_value(json_object_get(h, "gpu_memory")), 4000);
    h = json_object_get(json_array_get(gpus, 2), "hidden_processes");
    assert_int_equal(json_integer_value(json_object_get(h, "count")), 0);
    /* Nothing of B's is left anywhere in the text. */
    text = json_dumps(doc, JSON_COMPACT);
    assert_null(strstr(text, "secret_b"));
    assert_null(strstr(text, "bob"));
    assert_null(strstr(text, "\"pid\":200"));
    assert_null(strstr(text, "\"pid\":201"));
    free(text);
    json_decref(doc);
    gs_snapshot_free(s);
}

static void test_filter_snapshot_doc_used_none(void **state)
{
    struct gs_snapshot *s = make_snap();
    struct gs_policy_settings set = {.process_visibility = GS_PROCVIS_NONE,
                                     .gpu_visibility = GS_GPUVIS_USED};
    struct gs_viewer a = viewer(UID_A, GS_ROLE_VIEWER);
    struct gs_policy_view v;
    json_t *doc, *gpus, *h;

    (void)state;
    /* A unknown process memory makes the hidden sum unknown. */
    s->procs[1].mem_st = GS_ST_NA;
    gs_policy_view_build(&v, &set, &a, s, NULL, 0);
    doc = filtered_doc(&v, s);
    gpus = json_object_get(doc, "gpus");
    assert_int_equal(json_array_size(gpus), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(gpus, 0), "index")), 0);
    assert_int_equal(json_array_size(json_object_get(json_array_get(gpus, 0), "processes")), 0);
    h = json_object_get(json_array_get(gpus, 0), "hidden_processes");
    assert_int_equal(json_integer_value(json_object_get(h, "count")), 2);
    assert_true(json_is_null(json_object_get(h, "gpu_memory")));
    json_decref(doc);
    gs_snapshot_free(s);
}

static void test_processes_doc(void **state)
{
    struct gs_snapshot *s = make_snap();
    struct gs_policy_settings set = {.process_visibility = GS_PROCVIS_OWN,
                                     .gpu_visibility = GS_GPUVIS_ALL};
    struct gs_viewer a = viewer(UID_A, GS_ROLE_VIEWER);
    struct gs_policy_view v;
    struct gs_snapshot *f;
    json_t *pd = NULL, *list, *hidden;

    (void)state;
    gs_policy_view_build(&v, &set, &a, s, NULL, 0);
    f = gs_policy_filter_snapshot(&v, s);
    assert_non_null(f);
    assert_int_equal(gs_snapjson_processes(&pd, f, true, NULL), GS_OK);
    gs_snapshot_free(f);
    assert_non_null(pd);
    list = json_object_get(pd, "processes");
    assert_int_equal(json_array_size(list), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(list, 0), "gpu")), 0);
    assert_string_equal(json_string_value(json_object_get(json_array_get(list, 0), "gpu_uuid")),
                        "GPU-0");
    assert_string_equal(json_string_value(json_object_get(json_array_get(list, 0), "user")),
                        "alice");
    hidden = json_object_get(pd, "hidden_processes");
    assert_int_equal(json_array_size(hidden), 2); /* GPUs 0 and 1; GPU 2 hides nothing */
    assert_int_equal(json_integer_value(json_object_get(json_array_get(hidden, 1), "gpu")), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(hidden, 1), "count")), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(hidden, 1), "gpu_memory")),
                     4000);
    assert_true(json_is_real(json_object_get(pd, "query_time_unix")));
    json_decref(pd);
    gs_snapshot_free(s);
}

/* The alerts document of a filtered viewer: the items on GPUs it sees and the node-level ones
 * (src/agent/alerts.h gs_alert_list_json with gs_policy_alert_shown). */
static void test_alerts_doc(void **state)
{
    struct gs_snapshot *s = make_snap();
    struct gs_policy_settings set = {.process_visibility = GS_PROCVIS_OWN,
                                     .gpu_visibility = GS_GPUVIS_USED};
    struct gs_viewer a = viewer(UID_A, GS_ROLE_VIEWER);
    struct gs_alert_item items[] = {
        {.rule = "hot", .gpu = 1, .state = GS_ALERT_FIRING},
        {.rule = "hot", .gpu = 0, .state = GS_ALERT_FIRING},
        {.rule = "node", .gpu = -1, .state = GS_ALERT_PENDING},
        {.rule = "x", .gpu = 2, .state = GS_ALERT_RESOLVED, .resolved_at = 5},
    };
    struct gs_alert_list l = {.enabled = 1, .n = 4, .item = items};
    struct gs_policy_view v;
    json_t *doc, *list;
    char *text;
    size_t len;

    (void)state;
    gs_policy_view_build(&v, &set, &a, s, NULL, 0);
    text = gs_alert_list_json(&l, gs_policy_alert_shown, &v, &len);
    assert_non_null(text);
    assert_int_equal(len, strlen(text));
    doc = json_loads(text, 0, NULL);
    free(text);
    assert_non_null(doc);
    list = json_object_get(doc, "alerts");
    assert_int_equal(json_array_size(list), 2);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(list, 0), "gpu")), 0);
    assert_true(json_is_null(json_object_get(json_array_get(list, 1), "gpu")));
    json_decref(doc);
    /* an admin's (unfiltered) view shows all four, the resolved one with its resolved_at */
    text = gs_alert_list_json(&l, NULL, NULL, &len);
    doc = json_loads(text, 0, NULL);
    free(text);
    list = json_object_get(doc, "alerts");
    assert_int_equal(json_array_size(list), 4);
    assert_true(json_is_real(json_object_get(json_array_get(list, 3), "resolved_at")));
    assert_null(json_object_get(json_array_get(list, 0), "resolved_at"));
    json_decref(doc);
    gs_snapshot_free(s);
}

static void test_proc_net_uid(void **state)
{
    /* Client 127.0.0.1:40000 -> server 127.0.0.1:9400 (0x24B8), uid 1001; the server's end
     * (uid 0) and the listener must not match. x86 is little-endian: 127.0.0.1 prints as
     * 0100007F. */
    static const char tcp[] =
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
        "timeout inode\n"
        "   0: 0100007F:24B8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0 "
        "       0 111 1 0000000000000000 100 0 0 10 0\n"
        "   1: 0100007F:24B8 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0 "
        "       0 222 1 0000000000000000 20 4 30 10 -1\n"
        "   2: 0100007F:9C40 0100007F:24B8 01 00000000:00000000 00:00000000 00000000  1001 "
        "       0 333 1 0000000000000000 20 4 30 10 -1\n";
    /* ::1 port 40001 -> ::1 port 9400, uid 1002. */
    static const char tcp6[] =
        "  sl  local_address                         remote_address                        st "
        "tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
        "   0: 00000000000000000000000001000000:9C41 00000000000000000000000001000000:24B8 01 "
        "00000000:00000000 00:00000000 00000000  1002        0 444 1 0 20 4 30 10 -1\n";
    unsigned char lo4[16] = {[10] = 0xff, [11] = 0xff, [12] = 127, [15] = 1};
    unsigned char lo6[16] = {[15] = 1};
    uint32_t probe = 1;
    uid_t uid = 77;

    (void)state;
    if (*(unsigned char *)&probe != 1) {
        skip(); /* the fixtures are little-endian /proc text */
    }
    assert_int_equal(gs_policy_proc_net_uid(tcp, lo4, 40000, lo4, 9400, &uid), 1);
    assert_int_equal(uid, 1001);
    /* The server's own end: uid 0 (the direction matters). */
    assert_int_equal(gs_policy_proc_net_uid(tcp, lo4, 9400, lo4, 40000, &uid), 1);
    assert_int_equal(uid, 0);
    uid = 77;
    assert_int_equal(gs_policy_proc_net_uid(tcp, lo4, 40001, lo4, 9400, &uid), 0);
    assert_int_equal(uid, 77);
    assert_int_equal(gs_policy_proc_net_uid(tcp6, lo6, 40001, lo6, 9400, &uid), 1);
    assert_int_equal(uid, 1002);
    /* An IPv4 peer is not the IPv6 loopback. */
    assert_int_equal(gs_policy_proc_net_uid(tcp6, lo4, 40001, lo4, 9400, &uid), 0);
    /* Garbage is not a match. */
    assert_int_equal(gs_policy_proc_net_uid("junk\n 0: zz:zz yy:yy\n", lo4, 1, lo4, 2, &uid), 0);
    assert_int_equal(gs_policy_proc_net_uid("", lo4, 1, lo4, 2, &uid), 0);
}

static void test_devices_list(void **state)
{
    unsigned char m[255] = {0};

    (void)state;
    assert_int_equal(gs_policy_parse_devices_list("c 195:1 rwm\nc 195:255 rwm\nc 1:3 rwm\n"
                                                  "c 195:3 rwm\nb 195:4 rwm\nc 195:5 m\n",
                                                  m, sizeof m),
                     2);
    assert_true(m[1] && m[3]);
    assert_false(m[0] || m[4] || m[5] || m[254]);
    memset(m, 0, sizeof m);
    /* Allow-all is no grant (the root cgroup says that). */
    assert_int_equal(gs_policy_parse_devices_list("a *:* rwm\n", m, sizeof m), 0);
    assert_int_equal(gs_policy_parse_devices_list("", m, sizeof m), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_view_used_gpus),
        cmocka_unit_test(test_filter_snapshot_struct),
        cmocka_unit_test(test_filter_snapshot_doc_own),
        cmocka_unit_test(test_filter_snapshot_doc_used_none),
        cmocka_unit_test(test_processes_doc),
        cmocka_unit_test(test_alerts_doc),
        cmocka_unit_test(test_proc_net_uid),
        cmocka_unit_test(test_devices_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
