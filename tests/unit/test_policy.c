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

#define UID_A 1001
#define UID_B 1002

static struct gs_snapshot *make_snap(void)
{
    struct gs_snapshot *s = NULL;
    static const struct {
        unsigned pid, gpu, uid;
        uint64_t mem;
        const char *user, *cmd;
    } pr[] = {
        {100, 0, UID_A, 1000, "alice", "python train_a.py"},
        {200, 0, UID_B, 2000, "bob", "python secret_b.py --key=hunter2"},
        {201, 1, UID_B, 4000, "bob", "python secret_b2.py"},
    };

    assert_int_equal(gs_snapshot_new(&s, 3, 8, NULL), GS_OK);
    for (unsigned i = 0; i < 3; i++) {
        struct gs_gpu *g = &s->gpus[i];
        g->index = i;
        snprintf(g->text[GS_T_UUID], GS_STR_LEN, "GPU-%u", i);
        g->tst[GS_T_UUID] = GS_ST_OK;
        gs_gpu_set(g, GS_M_MINOR, i);
        gs_gpu_set(g, GS_M_UTIL_GPU, 0.5);
    }
    for (unsigned i = 0; i < sizeof pr / sizeof pr[0]; i++) {
        struct gs_proc *p = &s->procs[s->n_procs++];
        memset(p, 0, sizeof *p);
        p->pid = pr[i].pid;
        p->gpu = pr[i].gpu;
        p->type = GS_PROC_COMPUTE;
        p->gi_id = p->ci_id = 0xFFFFFFFFu;
        p->mem_st = GS_ST_OK;
        p->gpu_mem_bytes = pr[i].mem;
        p->host_st = GS_ST_OK;
        p->uid = pr[i].uid;
        snprintf(p->user, sizeof p->user, "%s", pr[i].user);
        snprintf(p->cmdline, sizeof p->cmdline, "%s", pr[i].cmd);
        snprintf(p->name, sizeof p->name, "python");
    }
    s->t_real = 1700000000.0;
    return s;
}

static struct gs_viewer viewer(uid_t uid, enum gs_role role)
{
    struct gs_viewer v = {.role = role, .uid_known = true, .uid = uid};
    return v;
}

static json_t *snap_doc(const struct gs_snapshot *s)
{
    json_t *doc = NULL;

    assert_int_equal(gs_snapjson_encode(&doc, s, NULL, NULL), GS_OK);
    return doc;
}

/* What a viewer gets as its snapshot document: the snapshot filtered, then encoded. */
static json_t *filtered_doc(const struct gs_policy_view *v, const struct gs_snapshot *s)
{
    struct gs_snapshot *f = gs_policy_filter_snapshot(v, s);
    json_t *doc;

    assert_non_null(f);
    doc = snap_doc(f);
    gs_snapshot_free(f);
    return doc;
}

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

/* A snapshot encoded by core/snapjson.c and decoded back renders the same document: every
 * field the JSON carries survives, statuses included. */
static void test_snapshot_json_round_trip(void **state)
{
    struct gs_snapshot *s = make_snap(), *back = NULL;
    json_t *doc, *doc2;
    char *t1, *t2;

    (void)state;
    s->procs[0].util_st = GS_ST_OK;
    s->procs[0].sm_util = 0.5;
    s->procs[0].cpu_st = GS_ST_OK;
    s->procs[0].cpu_ratio = 1.25;
    s->procs[0].job_kind = GS_JOB_DOCKER;
    snprintf(s->procs[0].container_id, sizeof s->procs[0].container_id, "abc123");
    snprintf(s->procs[0].pod_uid, sizeof s->procs[0].pod_uid,
             "8a0f8f3c-64a4-4d6b-9c1e-2f7b7c0e4d11");
    snprintf(s->procs[0].pod_name, sizeof s->procs[0].pod_name, "trainer-0");
    snprintf(s->procs[0].pod_namespace, sizeof s->procs[0].pod_namespace, "ml-team");
    snprintf(s->procs[0].pod_container, sizeof s->procs[0].pod_container, "pytorch");
    s->procs[1].host_st = GS_ST_NA; /* host details unknown: null in JSON */
    s->procs[2].job_kind = GS_JOB_SLURM;
    snprintf(s->procs[2].slurm_job, sizeof s->procs[2].slurm_job, "4242");
    s->gpus[1].st[GS_M_POWER_DRAW] = GS_ST_NOPERM;
    s->gpus[2].lost = 1;
    gs_gpu_set(&s->gpus[0], GS_M_MEM_USED, 123456789.0);
    gs_gpu_set(&s->gpus[0], GS_M_POWER_DRAW, 301.5);
    gs_gpu_set(&s->gpus[0], GS_M_THROTTLE_ACTIVE, (double)(GS_THR_SW_POWER_CAP | GS_THR_GPU_IDLE));
    s->gpus[0].ecc_loc_st[1][0][2] = GS_ST_OK;
    s->gpus[0].ecc_loc[1][0][2] = 7;
    s->gpus[0].n_mig = 1;
    s->gpus[0].mig[0].index = 3;
    s->gpus[0].mig[0].gi_id = 1;
    snprintf(s->gpus[0].mig[0].uuid, GS_STR_LEN, "MIG-x");
    s->gpus[0].mig[0].mem_st = GS_ST_OK;
    s->gpus[0].mig[0].mem_total_bytes = 10;
    s->gpus[0].mig[0].mem_used_bytes = 4;
    s->gpus[0].mig[0].mem_free_bytes = 6;
    s->gpus[0].n_nvlink = 2; /* link 0 read in full, link 1 inactive and unread */
    s->gpus[0].nvlink[0].active = 1;
    s->gpus[0].nvlink[0].speed_st = GS_ST_OK;
    s->gpus[0].nvlink[0].speed_bps = 26562e6;
    s->gpus[0].nvlink[0].tput_st = GS_ST_OK;
    s->gpus[0].nvlink[0].tx_bytes = 1ULL << 40;
    s->gpus[0].nvlink[0].rx_bytes = 5;
    s->gpus[0].nvlink[0].remote_st = GS_ST_OK;
    snprintf(s->gpus[0].nvlink[0].remote_bus_id, 32, "00000000:05:00.0");
    s->gpus[0].nvlink[0].err_st[GS_NVL_ERR_CRC_FLIT] = GS_ST_OK;
    s->gpus[0].nvlink[0].err[GS_NVL_ERR_CRC_FLIT] = 3;
    gs_gpu_set(&s->gpus[0], GS_M_NVLINK_TX, 1.5e9);
    snprintf(s->sys.hostname, sizeof s->sys.hostname, "node7");
    snprintf(s->sys.driver_version, sizeof s->sys.driver_version, "590.48.01");
    s->sys.driver_st = GS_ST_OK;
    s->sys.cuda_version = 13010;
    s->sys.cuda_st = GS_ST_OK;
    doc = snap_doc(s);
    assert_int_equal(gs_snapjson_decode(doc, 0, &back, NULL), GS_OK);
    assert_int_equal(back->n_gpus, 3);
    assert_int_equal(back->n_procs, 3);
    assert_int_equal(back->gpus[1].st[GS_M_POWER_DRAW], GS_ST_NOPERM);
    assert_int_equal(back->procs[2].job_kind, GS_JOB_SLURM);
    assert_int_equal(back->gpus[0].n_nvlink, 2);
    assert_true(back->gpus[0].nvlink[0].active && back->gpus[0].nvlink[0].tx_bytes == 1ULL << 40);
    assert_true(back->gpus[0].nvlink[0].speed_bps == 26562e6);
    assert_string_equal(back->gpus[0].nvlink[0].remote_bus_id, "00000000:05:00.0");
    assert_true(back->gpus[0].nvlink[0].err[GS_NVL_ERR_CRC_FLIT] == 3);
    assert_int_equal(back->gpus[0].nvlink[0].err_st[GS_NVL_ERR_REPLAY], GS_ST_NA);
    assert_int_equal(back->gpus[0].nvlink[1].tput_st, GS_ST_NA);
    assert_false(back->gpus[0].nvlink[1].active);
    assert_int_equal(back->gpus[1].n_nvlink, 0);
    assert_true(back->gpus[0].v[GS_M_NVLINK_TX] == 1.5e9);
    assert_string_equal(back->procs[0].pod_name, "trainer-0"); /* the "pod" object */
    assert_string_equal(back->procs[0].pod_namespace, "ml-team");
    assert_string_equal(back->procs[0].pod_container, "pytorch");
    assert_string_equal(back->procs[1].pod_name, "");
    doc2 = snap_doc(back);
    t1 = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
    t2 = json_dumps(doc2, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(t1, t2);
    free(t1);
    free(t2);
    json_decref(doc2);
    gs_snapshot_free(back);
    json_decref(doc);

    /* A filtered document's hidden summary becomes one "N hidden" entry for the text view. */
    {
        struct gs_policy_settings set = {.process_visibility = GS_PROCVIS_OWN};
        struct gs_viewer a = viewer(UID_A, GS_ROLE_VIEWER);
        struct gs_policy_view v;
        gs_policy_view_build(&v, &set, &a, s, NULL, 0);
        doc = filtered_doc(&v, s);
        assert_int_equal(gs_snapjson_decode(doc, 1, &back, NULL), GS_OK);
        assert_int_equal(back->n_procs, 3); /* A's, "1 hidden" on GPU 0, "1 hidden" on GPU 1 */
        assert_int_equal(back->procs[1].pid, 0);
        assert_int_equal(back->procs[1].gpu, 0);
        assert_string_equal(back->procs[1].name, "1 hidden");
        assert_int_equal(back->procs[2].gpu, 1);
        assert_int_equal(back->procs[2].gpu_mem_bytes, 4000);
        gs_snapshot_free(back);
        json_decref(doc);
    }
    back = NULL;
    doc = json_loads("{\"hostname\":\"x\"}", 0, NULL);
    assert_int_equal(gs_snapjson_decode(doc, 0, &back, NULL), GS_EPARSE);
    assert_null(back);
    json_decref(doc);
    gs_snapshot_free(s);
}

/* MIG devices in the snapshot document: profile, BAR1, engines, per-instance GPM, the pids of
 * the instance's processes, and utilization absent "mig_mode" on the GPU and every instance;
 * decode(encode(s)) encodes to the same text. A viewer who may not see a process does not
 * find its pid in the instance's list either. */
static void test_snapshot_json_mig(void **state)
{
    struct gs_snapshot *s = make_snap(), *back = NULL;
    struct gs_gpu *g = &s->gpus[0];
    json_t *doc, *doc2, *m0, *m1;
    char *t1, *t2;

    (void)state;
    g->st[GS_M_UTIL_GPU] = GS_ST_NA; /* what NVML answers in MIG mode */
    gs_gpu_set(g, GS_M_MIG_MODE, 1);
    g->n_mig = 2;
    for (unsigned i = 0; i < 2; i++) {
        struct gs_mig *m = &g->mig[i];
        m->index = i;
        m->gi_id = i ? 9 : 2;
        m->ci_id = 0;
        snprintf(m->uuid, sizeof m->uuid, "MIG-%u", i);
        snprintf(m->name, sizeof m->name, "NVIDIA H100 80GB HBM3 MIG %s",
                 i ? "1g.10gb" : "3g.40gb");
        m->mem_st = GS_ST_OK;
        m->mem_total_bytes = i ? 10468982784ULL : 42412802048ULL;
        m->mem_used_bytes = 1000 * (i + 1);
        m->mem_free_bytes = m->mem_total_bytes - m->mem_used_bytes;
    }
    g->mig[0].bar1_st = GS_ST_OK;
    g->mig[0].bar1_total_bytes = 25940721664ULL;
    g->mig[0].attr_st = GS_ST_OK;
    g->mig[0].sm_count = 60;
    g->mig[0].ce_count = 3;
    g->mig[0].gpm_st[GS_MIG_GPM_GR_ACTIVE] = GS_ST_OK;
    g->mig[0].gpm[GS_MIG_GPM_GR_ACTIVE] = 0.99;
    g->mig[0].gpm_st[GS_MIG_GPM_SM_ACTIVE] = GS_ST_NOPERM; /* absent: null, not 0 */
    g->mig[0].place_st = GS_ST_OK;
    g->mig[0].place_start = 4;
    g->mig[0].place_size = 4;
    g->mig[0].profile_id = 9;
    g->mig[1].place_st = GS_ST_NOPERM; /* nvmlDeviceGetGpuInstanceById is root only */
    s->procs[0].gi_id = 2;             /* alice's on 3g.40gb, bob's on 1g.10gb */
    s->procs[0].ci_id = 0;
    s->procs[1].gi_id = 9;
    s->procs[1].ci_id = 0;
    doc = snap_doc(s);
    {
        json_t *jg = json_array_get(json_object_get(doc, "gpus"), 0);
        m0 = json_array_get(json_object_get(jg, "mig_devices"), 0);
        m1 = json_array_get(json_object_get(jg, "mig_devices"), 1);
        assert_string_equal(json_string_value(json_object_get(json_object_get(jg, "unavailable"),
                                                              "utilization_gpu")),
                            "mig_mode");
        assert_true(json_is_null(json_object_get(jg, "utilization_gpu")));
    }
    assert_string_equal(json_string_value(json_object_get(m0, "profile")), "3g.40gb");
    assert_string_equal(json_string_value(json_object_get(m1, "profile")), "1g.10gb");
    assert_int_equal(json_integer_value(json_object_get(m0, "gi_id")), 2);
    assert_int_equal(json_integer_value(json_object_get(m0, "sm_count")), 60);
    assert_true(json_is_null(json_object_get(m1, "sm_count")));
    assert_int_equal(json_integer_value(json_object_get(m0, "bar1_total")), 25940721664LL);
    assert_true(json_real_value(json_object_get(m0, "graphics_active")) == 0.99);
    assert_true(json_is_null(json_object_get(m0, "sm_active")));
    assert_true(json_is_null(json_object_get(m0, "utilization_gpu")));
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(m0, "unavailable"), "utilization_gpu")),
        "mig_mode");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(m0, "placement"), "start")),
                     4);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(m0, "placement"), "size")),
                     4);
    assert_int_equal(json_integer_value(json_object_get(m0, "profile_id")), 9);
    assert_true(json_is_null(json_object_get(m1, "placement")));
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(m1, "unavailable"), "placement")),
        "no_permission");
    assert_int_equal(json_array_size(json_object_get(m0, "processes")), 1);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(m0, "processes"), 0)), 100);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(m1, "processes"), 0)), 200);

    assert_int_equal(gs_snapjson_decode(doc, 0, &back, NULL), GS_OK);
    assert_int_equal(back->gpus[0].n_mig, 2);
    assert_int_equal(back->gpus[0].st[GS_M_UTIL_GPU], GS_ST_NA); /* "mig_mode" is absent */
    assert_int_equal(back->gpus[0].mig[0].gpm_st[GS_MIG_GPM_GR_ACTIVE], GS_ST_OK);
    assert_int_equal(back->gpus[0].mig[0].sm_count, 60);
    assert_int_equal(back->gpus[0].mig[0].ce_count, 3);
    assert_int_equal(back->gpus[0].mig[0].place_st, GS_ST_OK);
    assert_int_equal(back->gpus[0].mig[0].place_start, 4);
    assert_int_equal(back->gpus[0].mig[1].place_st, GS_ST_NOPERM);
    assert_string_equal(gs_mig_profile(&back->gpus[0].mig[1]), "1g.10gb");
    assert_int_equal(back->procs[1].gi_id, 9);
    doc2 = snap_doc(back);
    t1 = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
    t2 = json_dumps(doc2, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(t1, t2);
    free(t1);
    free(t2);
    json_decref(doc2);
    gs_snapshot_free(back);
    json_decref(doc);

    {
        struct gs_policy_settings set = {.process_visibility = GS_PROCVIS_OWN};
        struct gs_viewer a = viewer(UID_A, GS_ROLE_VIEWER);
        struct gs_policy_view v;
        json_t *jg;
        gs_policy_view_build(&v, &set, &a, s, NULL, 0);
        doc = filtered_doc(&v, s);
        jg = json_array_get(json_object_get(doc, "gpus"), 0);
        m1 = json_array_get(json_object_get(jg, "mig_devices"), 1);
        assert_int_equal(json_array_size(json_object_get(m1, "processes")), 0); /* bob's */
        json_decref(doc);
    }
    /* a profile is what follows the last " MIG "; a name without one has none */
    snprintf(g->mig[0].name, sizeof g->mig[0].name, "NVIDIA A30");
    assert_string_equal(gs_mig_profile(&g->mig[0]), "");
    snprintf(g->mig[0].name, sizeof g->mig[0].name, "NVIDIA A100-SXM4-40GB MIG 1g.5gb+me");
    assert_string_equal(gs_mig_profile(&g->mig[0]), "1g.5gb+me");
    gs_snapshot_free(s);
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
        cmocka_unit_test(test_snapshot_json_round_trip),
        cmocka_unit_test(test_snapshot_json_mig),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
