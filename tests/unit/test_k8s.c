/*
 * Unit tests for k8s.c and its use by procfs.c: the kubelet's pod log directory names
 * (<namespace>_<pod>_<uid>) and CRI log link names (<pod>_<namespace>_<container>-<id>.log)
 * as real nodes have them, names that break Kubernetes' rules, the lookup against a
 * temporary /var/log/{pods,containers} tree (one container, several containers told apart by
 * the container id, an init container beside the main one, no such pod), and the procfs
 * reader naming the pod of a fake /proc process whose cgroup is a pod's, under cgroup v1 with
 * the cgroupfs driver and cgroup v2 with the systemd driver ('_' in the slice's UID).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/k8s.h"
#include "backend/procfs.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"

#define UID1 "8a0f8f3c-64a4-4d6b-9c1e-2f7b7c0e4d11"
#define UID1_UND "8a0f8f3c_64a4_4d6b_9c1e_2f7b7c0e4d11"
#define UID2 "0d3b7e52-91f3-4c39-a7d1-6c2d2e8f5b20"
#define CID1 "4f6c2d3e8a9b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f60718293a4b5c6d7e8f9"
#define CID2 "9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a0f9e8d"

static int parse_pod(const char *s, struct gs_k8s_pod *p)
{
    return gs_k8s_parse_pod_dir(s, strlen(s), p);
}

static void pod_dir_names(void **state)
{
    struct gs_k8s_pod p;

    (void)state;
    assert_int_equal(parse_pod("ml-team_trainer-7d9f8c6b5-x2kqp_" UID1, &p), GS_OK);
    assert_string_equal(p.ns, "ml-team");
    assert_string_equal(p.pod, "trainer-7d9f8c6b5-x2kqp");
    assert_string_equal(p.uid, UID1);
    /* a StatefulSet pod; dots are allowed in pod names (a DNS subdomain) */
    assert_int_equal(parse_pod("default_llm.serve-0_" UID2, &p), GS_OK);
    assert_string_equal(p.pod, "llm.serve-0");
    /* a static pod's UID is the 32-digit hash of its manifest */
    assert_int_equal(
        parse_pod("kube-system_kube-apiserver-node1_0f1e2d3c4b5a69788796a5b4c3d2e1f0", &p), GS_OK);
    assert_string_equal(p.uid, "0f1e2d3c4b5a69788796a5b4c3d2e1f0");

    static const char *const bad[] = {
        "",                       /* empty */
        "default_pod",            /* two fields */
        "default_pod_" UID1 "_x", /* four fields */
        "Default_pod_" UID1,      /* upper case namespace */
        "default_Pod_" UID1,      /* upper case pod */
        "default__" UID1,         /* empty pod */
        "_pod_" UID1,             /* empty namespace */
        "default_pod_",           /* empty uid */
        "default_pod_" UID1 "zz", /* uid not hex */
        "-default_pod_" UID1,     /* starts with '-' */
        "default_pod-_" UID1,     /* ends with '-' */
        "def.ault_pod_" UID1,     /* dot in a namespace */
        "default_po d_" UID1,     /* space */
        "default_pod\n_" UID1,    /* newline (would break a label) */
        "default_pod\"x_" UID1,   /* quote */
        "0123456789012345678901234567890123456789012345678901234567890123_p_" UID1, /* 64 */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(parse_pod(bad[i], &p), GS_EPARSE);
        assert_string_equal(p.pod, "");
    }
    /* a 63-character namespace is the longest allowed */
    assert_int_equal(
        parse_pod("012345678901234567890123456789012345678901234567890123456789012_p_" UID1, &p),
        GS_OK);
    /* the length is honoured: a name cut before its uid ends */
    assert_int_equal(gs_k8s_parse_pod_dir("a_b_" UID1, 4 + 8, &p), GS_OK);
    assert_string_equal(p.uid, "8a0f8f3c");
}

static void container_log_names(void **state)
{
    struct gs_k8s_ctr_log c;
    const char *s = "trainer-7d9f8c6b5-x2kqp_ml-team_pytorch-" CID1 ".log";

    (void)state;
    assert_int_equal(gs_k8s_parse_container_log(s, strlen(s), &c), GS_OK);
    assert_string_equal(c.pod, "trainer-7d9f8c6b5-x2kqp");
    assert_string_equal(c.ns, "ml-team");
    assert_string_equal(c.container, "pytorch");
    assert_string_equal(c.id, CID1);
    s = "llm.serve-0_default_vllm-server-" CID2 ".log"; /* '-' inside the container name */
    assert_int_equal(gs_k8s_parse_container_log(s, strlen(s), &c), GS_OK);
    assert_string_equal(c.container, "vllm-server");

    static const char *const bad[] = {
        "trainer_ml-team_pytorch-" CID1,         /* no .log */
        "trainer_ml-team_pytorch-" CID1 ".txt",  /* not .log */
        "trainer_ml-team_pytorch" CID1 ".log",   /* no '-' before the id */
        "trainer_ml-team_pytorch-abc.log",       /* id too short */
        "trainer_ml-team_pytorch-" CID1 "0.log", /* id too long */
        "trainer_ml-team_pytorch-" CID1 "x.log", /* id not hex... */
        "trainer_ml-team_-" CID1 ".log",         /* empty container */
        "trainer_ml.team_pytorch-" CID1 ".log",  /* dot in a namespace */
        "trainer_ml-team_py_torch-" CID1 ".log", /* four fields */
        ".log",
        "",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(gs_k8s_parse_container_log(bad[i], strlen(bad[i]), &c), GS_EPARSE);
}

/* ---- a temporary /var/log --------------------------------------------------------------- */

struct tree {
    char root[256]; /* the fake /var/log (and /proc under it) */
    char pods[300]; /* root/pods */
};

static void mkdirs(const char *fmt, const char *a, const char *b)
{
    char path[700], cmd[800];
    snprintf(path, sizeof path, fmt, a, b);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", path);
    assert_int_equal(system(cmd), 0);
}

static void put_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int tree_setup(void **state)
{
    struct tree *t = calloc(1, sizeof *t);
    const char *tmp = getenv("TMPDIR");
    char path[700];

    if (!t)
        return -1;
    snprintf(t->root, sizeof t->root, "%s/gs_k8s_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(t->root))
        return -1;
    snprintf(t->pods, sizeof t->pods, "%s/pods", t->root);
    /* pod 1: one container */
    mkdirs("%s/pods/ml-team_trainer-7d9f8c6b5-x2kqp_" UID1 "/pytorch%s", t->root, "");
    /* pod 2: an init container, a sidecar and the main container */
    mkdirs("%s/pods/default_llm-serve-0_" UID2 "/fetch-weights%s", t->root, "");
    mkdirs("%s/pods/default_llm-serve-0_" UID2 "/vllm%s", t->root, "");
    mkdirs("%s/pods/default_llm-serve-0_" UID2 "/metrics-sidecar%s", t->root, "");
    /* noise: a file and an entry that is not a pod */
    snprintf(path, sizeof path, "%s/pods/README", t->root);
    put_file(path, "x");
    mkdirs("%s/pods/not-a-pod%s", t->root, "");
    mkdirs("%s/containers%s", t->root, "");
    snprintf(path, sizeof path, "%s/containers/llm-serve-0_default_vllm-" CID2 ".log", t->root);
    put_file(path, "");
    snprintf(path, sizeof path, "%s/containers/llm-serve-0_default_metrics-sidecar-" CID1 ".log",
             t->root);
    put_file(path, "");
    *state = t;
    return 0;
}

static int tree_teardown(void **state)
{
    struct tree *t = *state;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", t->root);
    if (system(cmd) != 0)
        return -1;
    free(t);
    return 0;
}

static void lookup(void **state)
{
    struct tree *t = *state;
    struct gs_k8s_names k;

    assert_int_equal(gs_k8s_lookup(t->pods, UID1, CID1, &k), GS_OK);
    assert_string_equal(k.pod, "trainer-7d9f8c6b5-x2kqp");
    assert_string_equal(k.ns, "ml-team");
    assert_string_equal(k.container, "pytorch"); /* its only container */
    assert_int_equal(gs_k8s_lookup(t->pods, UID1, NULL, &k), GS_OK);
    assert_string_equal(k.container, "pytorch");

    /* three containers: the container id picks one through its log link */
    assert_int_equal(gs_k8s_lookup(t->pods, UID2, CID2, &k), GS_OK);
    assert_string_equal(k.pod, "llm-serve-0");
    assert_string_equal(k.ns, "default");
    assert_string_equal(k.container, "vllm");
    assert_int_equal(gs_k8s_lookup(t->pods, UID2, CID1, &k), GS_OK);
    assert_string_equal(k.container, "metrics-sidecar");
    assert_int_equal(gs_k8s_lookup(t->pods, UID2, "", &k), GS_OK); /* id unknown */
    assert_string_equal(k.pod, "llm-serve-0");
    assert_string_equal(k.container, "");

    assert_int_equal(gs_k8s_lookup(t->pods, "11111111-2222-3333-4444-555555555555", NULL, &k),
                     GS_ENOTFOUND);
    assert_string_equal(k.pod, "");
    assert_int_equal(gs_k8s_lookup(t->pods, "", NULL, &k), GS_ENOTFOUND);
    assert_int_equal(gs_k8s_lookup("/nonexistent/pods", UID1, NULL, &k), GS_ENOTFOUND);
    /* a uid that is only the end of another's does not match */
    assert_int_equal(gs_k8s_lookup(t->pods, "4d11", NULL, &k), GS_ENOTFOUND);
}

/* A fake /proc/PID with the given cgroup file, under the tree. */
static void fake_pid(struct tree *t, unsigned pid, const char *cgroup)
{
    char dir[400], path[500], stat[256];

    snprintf(dir, sizeof dir, "%s/proc/%u", t->root, pid);
    mkdirs("%s%s", dir, "");
    snprintf(path, sizeof path, "%s/stat", dir);
    snprintf(stat, sizeof stat,
             "%u (python3) S 1 %u %u 0 -1 0 0 0 0 0 10 0 0 0 20 0 1 0 500 1000 25 0\n", pid, pid,
             pid);
    put_file(path, stat);
    snprintf(path, sizeof path, "%s/cmdline", dir);
    put_file(path, "python3");
    snprintf(path, sizeof path, "%s/status", dir);
    put_file(path, "Name:\tpython3\nUid:\t0\t0\t0\t0\n");
    snprintf(path, sizeof path, "%s/cgroup", dir);
    put_file(path, cgroup);
}

static void procfs_names_pods(void **state)
{
    struct tree *t = *state;
    struct gs_procfs *pf = NULL;
    struct gs_proc p;
    char proc[300], path[400];

    /* cgroup v1, cgroupfs driver (containerd): /kubepods/<qos>/pod<uid>/<id> */
    fake_pid(t, 100,
             "12:memory:/kubepods/burstable/pod" UID2 "/" CID2 "\n"
             "11:devices:/kubepods/burstable/pod" UID2 "/" CID2 "\n"
             "1:name=systemd:/kubepods/burstable/pod" UID2 "/" CID2 "\n");
    /* cgroup v2, systemd driver: '_' for '-' in the slice's UID */
    fake_pid(t, 101,
             "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID1_UND
             ".slice/cri-containerd-" CID1 ".scope\n");
    /* no pod */
    fake_pid(t, 102, "0::/user.slice/user-1000.slice/session-3.scope\n");
    snprintf(proc, sizeof proc, "%s/proc", t->root);
    snprintf(path, sizeof path, "%s/stat", proc);
    put_file(path, "cpu 1 2 3\nbtime 1700000000\n");
    assert_int_equal(gs_procfs_open(&pf, proc, NULL), GS_OK);
    gs_procfs_set_pods_dir(pf, t->pods);
    gs_procfs_begin(pf);

    memset(&p, 0, sizeof p);
    assert_int_equal(gs_procfs_fill(pf, 100, 1000, &p), GS_OK);
    assert_string_equal(p.pod_uid, UID2);
    assert_string_equal(p.pod_name, "llm-serve-0");
    assert_string_equal(p.pod_namespace, "default");
    assert_string_equal(p.pod_container, "vllm");

    memset(&p, 0, sizeof p);
    assert_int_equal(gs_procfs_fill(pf, 101, 1000, &p), GS_OK);
    assert_string_equal(p.pod_uid, UID1);
    assert_string_equal(p.pod_name, "trainer-7d9f8c6b5-x2kqp");
    assert_string_equal(p.pod_namespace, "ml-team");
    assert_string_equal(p.pod_container, "pytorch");

    memset(&p, 0, sizeof p);
    assert_int_equal(gs_procfs_fill(pf, 102, 1000, &p), GS_OK);
    assert_string_equal(p.pod_name, "");
    gs_procfs_end(pf);

    /* looking up turned off: the UID stays, no names */
    gs_procfs_set_pods_dir(pf, "");
    gs_procfs_begin(pf);
    memset(&p, 0, sizeof p);
    assert_int_equal(gs_procfs_fill(pf, 101, 2000000000000LL, &p), GS_OK);
    assert_string_equal(p.pod_uid, UID1);
    assert_string_equal(p.pod_name, "");
    gs_procfs_end(pf);
    gs_procfs_close(pf);
}

/* The cgroup shapes a pod's process has, as the agent sees them (procfs.c's parser, reused):
 * the pod UID and container id that the lookup starts from. */
static void cgroup_shapes(void **state)
{
    static const struct {
        const char *text, *uid, *id;
    } cases[] = {
        /* v2, systemd driver, containerd */
        {"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID1_UND
         ".slice/cri-containerd-" CID1 ".scope\n",
         UID1, CID1},
        /* v2 seen from inside the agent's own cgroup namespace: relative to its root */
        {"0::/../../kubepods-burstable-pod" UID1_UND ".slice/cri-containerd-" CID1 ".scope\n", UID1,
         CID1},
        /* v2, systemd driver, CRI-O, guaranteed QoS (no QoS slice) */
        {"0::/kubepods.slice/kubepods-pod" UID1_UND ".slice/crio-" CID2 ".scope\n", UID1, CID2},
        /* v1 hybrid, systemd driver, dockershim */
        {"12:pids:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID2
         ".slice/docker-" CID2 ".scope\n0::/\n",
         UID2, CID2},
        /* v1, cgroupfs driver, containerd: a bare id under pod<uid> */
        {"4:memory:/kubepods/besteffort/pod" UID2 "/" CID1 "\n", UID2, CID1},
        /* v2, cgroupfs driver */
        {"0::/kubepods/burstable/pod" UID1 "/" CID2 "\n", UID1, CID2},
        /* not a pod */
        {"0::/system.slice/containerd.service\n", "", ""},
    };
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct gs_procfs_job j;
        gs_procfs_parse_cgroup(cases[i].text, strlen(cases[i].text), &j);
        assert_string_equal(j.pod_uid, cases[i].uid);
        assert_string_equal(j.container_id, cases[i].id);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pod_dir_names),
        cmocka_unit_test(container_log_names),
        cmocka_unit_test(cgroup_shapes),
        cmocka_unit_test_setup_teardown(lookup, tree_setup, tree_teardown),
        cmocka_unit_test_setup_teardown(procfs_names_pods, tree_setup, tree_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
