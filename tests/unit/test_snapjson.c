/*
 * Unit tests of the snapshot codec (src/core/snapjson.c): a snapshot encoded and decoded back
 * renders the same document, every field and status the JSON carries, MIG devices included,
 * and the same holds for the copy the visibility policy filters.
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
        cmocka_unit_test(test_snapshot_json_round_trip),
        cmocka_unit_test(test_snapshot_json_mig),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
