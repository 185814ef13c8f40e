/*
 * snap_fixture.h - the snapshot the policy and snapshot-codec tests share (test_policy.c,
 * test_snapjson.c): three GPUs, three processes of two users, and the documents of it.
 * Include after cmocka.h.
 */
#ifndef GS_TEST_SNAP_FIXTURE_H
#define GS_TEST_SNAP_FIXTURE_H

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "agent/policy.h"
#include "agent/viewer.h"
#include "core/snapjson.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"

#define UID_A 1001
#define UID_B 1002

static inline struct gs_snapshot *make_snap(void)
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

static inline struct gs_viewer viewer(uid_t uid, enum gs_role role)
{
    struct gs_viewer v = {.role = role, .uid_known = true, .uid = uid};
    return v;
}

static inline json_t *snap_doc(const struct gs_snapshot *s)
{
    json_t *doc = NULL;

    assert_int_equal(gs_snapjson_encode(&doc, s, NULL, NULL), GS_OK);
    return doc;
}

/* What a viewer gets as its snapshot document: the snapshot filtered, then encoded. */
static inline json_t *filtered_doc(const struct gs_policy_view *v, const struct gs_snapshot *s)
{
    struct gs_snapshot *f = gs_policy_filter_snapshot(v, s);
    json_t *doc;

    assert_non_null(f);
    doc = snap_doc(f);
    gs_snapshot_free(f);
    return doc;
}

#endif
