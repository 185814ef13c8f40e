/*
 * Unit tests for procfs.c: /proc/PID/cgroup shapes seen on real hosts (cgroup v1 and v2;
 * Docker, containerd, CRI-O, Podman, Kubernetes QoS classes, Slurm), command-line joining and
 * capping, /proc/PID/stat with hostile process names, and the reader against a fake /proc
 * tree (CPU ratio over two cycles, pid reuse, a vanished pid) and against the real /proc.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/procfs.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"

#define ID64 "3f4e5d6c7b8a9f0e1d2c3b4a5f6e7d8c9b0a1f2e3d4c5b6a7f8e9d0c1b2a3f4e"
#define ID64B "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define POD_DASH "1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901"
#define POD_UND "1b2c3d4e_5f60_7182_93a4_b5c6d7e8f901"

static struct gs_procfs_job cg(const char *text)
{
    struct gs_procfs_job j;
    gs_procfs_parse_cgroup(text, strlen(text), &j);
    return j;
}

/* ---- cgroup ----------------------------------------------------------------------------- */

static void cgroup_docker_v1_cgroupfs(void **state)
{
    (void)state;
    struct gs_procfs_job j = cg("12:pids:/docker/" ID64 "\n"
                                "11:hugetlb:/docker/" ID64 "\n"
                                "10:memory:/docker/" ID64 "\n"
                                "1:name=systemd:/docker/" ID64 "\n");
    assert_int_equal(j.kind, GS_JOB_DOCKER);
    assert_string_equal(j.container_id, ID64);
    assert_string_equal(j.pod_uid, "");
    assert_string_equal(j.slurm_job, "");
}

static void cgroup_docker_systemd(void **state)
{
    (void)state;
    struct gs_procfs_job j = cg("11:memory:/system.slice/docker-" ID64 ".scope\n"
                                "1:name=systemd:/system.slice/docker-" ID64 ".scope\n");
    assert_int_equal(j.kind, GS_JOB_DOCKER);
    assert_string_equal(j.container_id, ID64);
    j = cg("0::/system.slice/docker-" ID64B ".scope\n");
    assert_int_equal(j.kind, GS_JOB_DOCKER);
    assert_string_equal(j.container_id, ID64B);
    j = cg("0::/docker/" ID64B "\n"); /* v2, cgroupfs driver */
    assert_int_equal(j.kind, GS_JOB_DOCKER);
    assert_string_equal(j.container_id, ID64B);
}

static void cgroup_k8s_containerd_systemd_qos(void **state)
{
    (void)state;
    struct gs_procfs_job j;

    j = cg("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" POD_UND
           ".slice/cri-containerd-" ID64 ".scope\n");
    assert_int_equal(j.kind, GS_JOB_CONTAINERD);
    assert_string_equal(j.container_id, ID64);
    assert_string_equal(j.pod_uid, POD_DASH);

    j = cg("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" POD_UND
           ".slice/cri-containerd-" ID64B ".scope\n");
    assert_int_equal(j.kind, GS_JOB_CONTAINERD);
    assert_string_equal(j.container_id, ID64B);
    assert_string_equal(j.pod_uid, POD_DASH);

    /* Guaranteed pods sit right under kubepods.slice */
    j = cg("0::/kubepods.slice/kubepods-pod" POD_UND ".slice/cri-containerd-" ID64 ".scope\n");
    assert_int_equal(j.kind, GS_JOB_CONTAINERD);
    assert_string_equal(j.pod_uid, POD_DASH);
}

static void cgroup_k8s_cgroupfs_v1(void **state)
{
    (void)state;
    struct gs_procfs_job j;

    j = cg("12:memory:/kubepods/burstable/pod" POD_DASH "/" ID64 "\n"
           "11:cpu,cpuacct:/kubepods/burstable/pod" POD_DASH "/" ID64 "\n");
    assert_int_equal(j.kind, GS_JOB_CONTAINER); /* the path does not name the runtime */
    assert_string_equal(j.container_id, ID64);
    assert_string_equal(j.pod_uid, POD_DASH);

    j = cg("5:devices:/kubepods/pod" POD_DASH "/" ID64B "\n"); /* guaranteed */
    assert_int_equal(j.kind, GS_JOB_CONTAINER);
    assert_string_equal(j.container_id, ID64B);
    assert_string_equal(j.pod_uid, POD_DASH);

    j = cg("4:pids:/kubepods/besteffort/pod" POD_DASH "/" ID64 "\n");
    assert_string_equal(j.pod_uid, POD_DASH);

    /* a static pod (a manifest in /etc/kubernetes/manifests): its UID is 32 hex digits */
    j = cg("0::/kubepods/burstable/pod6b0e1f3a2c4d5e6f708192a3b4c5d6e7/" ID64 "\n");
    assert_string_equal(j.pod_uid, "6b0e1f3a2c4d5e6f708192a3b4c5d6e7");
    j = cg("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
           "6b0e1f3a2c4d5e6f708192a3b4c5d6e7.slice/cri-containerd-" ID64 ".scope\n");
    assert_string_equal(j.pod_uid, "6b0e1f3a2c4d5e6f708192a3b4c5d6e7");
    j = cg("0::/kubepods/burstable/pod6b0e1f3a2c4d5e6f708192a3b4c5d6eZ/" ID64 "\n");
    assert_string_equal(j.pod_uid, ""); /* not hex */
}

static void cgroup_k8s_dockershim_systemd(void **state)
{
    (void)state;
    struct gs_procfs_job j = cg("1:name=systemd:/kubepods.slice/kubepods-burstable.slice/"
                                "kubepods-burstable-pod" POD_UND ".slice/docker-" ID64 ".scope\n");
    assert_int_equal(j.kind, GS_JOB_DOCKER);
    assert_string_equal(j.container_id, ID64);
    assert_string_equal(j.pod_uid, POD_DASH);
}

static void cgroup_crio(void **state)
{
    (void)state;
    struct gs_procfs_job j;

    j = cg("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" POD_UND
           ".slice/crio-" ID64 ".scope\n");
    assert_int_equal(j.kind, GS_JOB_CRIO);
    assert_string_equal(j.container_id, ID64);
    assert_string_equal(j.pod_uid, POD_DASH);

    /* conmon, the monitor next to the container, is not the container */
    j = cg("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" POD_UND
           ".slice/crio-conmon-" ID64 ".scope\n");
    assert_int_equal(j.kind, GS_JOB_NONE);
    assert_string_equal(j.container_id, "");
    assert_string_equal(j.pod_uid, POD_DASH);
}

static void cgroup_podman(void **state)
{
    (void)state;
    struct gs_procfs_job j;

    j = cg("0::/machine.slice/libpod-" ID64 ".scope/container\n");
    assert_int_equal(j.kind, GS_JOB_PODMAN);
    assert_string_equal(j.container_id, ID64);

    j = cg("0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" ID64B
           ".scope/container\n"); /* rootless */
    assert_int_equal(j.kind, GS_JOB_PODMAN);
    assert_string_equal(j.container_id, ID64B);

    j = cg("10:memory:/libpod_parent/libpod-" ID64 "\n"); /* v1, cgroupfs manager */
    assert_int_equal(j.kind, GS_JOB_PODMAN);
    assert_string_equal(j.container_id, ID64);

    j = cg("0::/machine.slice/libpod-conmon-" ID64 ".scope\n");
    assert_int_equal(j.kind, GS_JOB_NONE);
}

static void cgroup_slurm(void **state)
{
    (void)state;
    struct gs_procfs_job j;

    j = cg("11:memory:/slurm/uid_1000/job_123456/step_0/task_0\n"
           "7:cpuset:/slurm/uid_1000/job_123456/step_0\n"
           "1:name=systemd:/system.slice/slurmd.service\n");
    assert_string_equal(j.slurm_job, "123456");
    assert_int_equal(j.kind, GS_JOB_NONE);

    j = cg("0::/system.slice/slurmstepd.scope/job_987654/step_batch/user/task_0\n");
    assert_string_equal(j.slurm_job, "987654");

    j = cg("4:devices:/slurm_node17/uid_2001/job_42/step_extern\n");
    assert_string_equal(j.slurm_job, "42");

    /* "job_" without slurm in the path is someone else's naming */
    j = cg("0::/system.slice/runner.service/job_77\n");
    assert_string_equal(j.slurm_job, "");
    j = cg("0::/system.slice/slurmstepd.scope/job_12x/step_0\n");
    assert_string_equal(j.slurm_job, "");
}

static void cgroup_host_and_garbage(void **state)
{
    (void)state;
    struct gs_procfs_job j;

    j = cg("0::/user.slice/user-1000.slice/session-3.scope\n");
    assert_int_equal(j.kind, GS_JOB_NONE);
    assert_string_equal(j.container_id, "");
    assert_string_equal(j.pod_uid, "");
    assert_string_equal(j.slurm_job, "");

    j = cg("0::/\n"); /* inside a cgroup namespace */
    assert_int_equal(j.kind, GS_JOB_NONE);
    j = cg("");
    assert_int_equal(j.kind, GS_JOB_NONE);
    j = cg("garbage without colons\n::\n:::\n0::/docker/xyz\n0::/docker/" ID64 "0000000\n");
    assert_int_equal(j.kind, GS_JOB_NONE); /* not hex / too long */
    j = cg("0::/kubepods.slice/kubepods-pod1234.slice/cri-containerd-abc.scope");
    assert_string_equal(j.pod_uid, "");    /* short uid */
    assert_int_equal(j.kind, GS_JOB_NONE); /* short id */
    /* no trailing newline, and a NUL-free buffer that is not terminated */
    {
        char buf[128];
        const char *line = "0::/docker/" ID64B;
        size_t n = strlen(line);
        memcpy(buf, line, n);
        memset(buf + n, 'f', sizeof buf - n); /* more hex after the end must not count */
        gs_procfs_parse_cgroup(buf, n, &j);
        assert_int_equal(j.kind, GS_JOB_DOCKER);
        assert_string_equal(j.container_id, ID64B);
    }
}

static void cgroup_hybrid_first_match(void **state)
{
    (void)state;
    /* hybrid v1+v2 host: the systemd line names the container, the unified one is empty */
    struct gs_procfs_job j = cg("13:misc:/\n12:pids:/docker/" ID64 "\n0::/\n");
    assert_int_equal(j.kind, GS_JOB_DOCKER);
    assert_string_equal(j.container_id, ID64);
}

/* ---- cmdline ---------------------------------------------------------------------------- */

static void cmdline_join(void **state)
{
    char out[GS_PROC_CMD_LEN];
    static const char raw[] = "python\0train.py\0--lr\0"
                              "0.01\0";
    (void)state;

    assert_int_equal(gs_procfs_join_cmdline(raw, sizeof raw - 1, out, sizeof out),
                     strlen("python train.py --lr 0.01"));
    assert_string_equal(out, "python train.py --lr 0.01");

    /* setproctitle style: one string padded with NULs */
    static const char t[] = "swift sft --model qwen\0\0\0\0";
    gs_procfs_join_cmdline(t, sizeof t - 1, out, sizeof out);
    assert_string_equal(out, "swift sft --model qwen");

    /* an empty argument keeps its place; control characters become spaces */
    static const char e[] = "a\0\0b\tc\nd\0";
    gs_procfs_join_cmdline(e, sizeof e - 1, out, sizeof out);
    assert_string_equal(out, "a  b c d");

    assert_int_equal(gs_procfs_join_cmdline("", 0, out, sizeof out), 0);
    assert_string_equal(out, "");
    assert_int_equal(gs_procfs_join_cmdline("x", 1, out, 0), 0);
}

static void cmdline_cap(void **state)
{
    char raw[2000], out[32], one[1];
    (void)state;
    for (size_t i = 0; i < sizeof raw; i++)
        raw[i] = i % 10 == 9 ? '\0' : 'a';
    size_t n = gs_procfs_join_cmdline(raw, sizeof raw, out, sizeof out);
    assert_int_equal(n, sizeof out - 1);
    assert_int_equal(strlen(out), sizeof out - 1);
    assert_memory_equal(out + sizeof out - 4, "...", 3);
    assert_memory_equal(out, "aaaaaaaaa aaaaaaaaa", 19);

    /* exactly fits: no ellipsis */
    gs_procfs_join_cmdline("abc\0", 4, out, 4);
    assert_string_equal(out, "abc");
    gs_procfs_join_cmdline("abcd", 4, out, 4); /* too small for an ellipsis: plain cut */
    assert_string_equal(out, "abc");
    gs_procfs_join_cmdline("abcdef", 6, out, 6);
    assert_string_equal(out, "ab...");
    gs_procfs_join_cmdline("abcd", 4, one, 1);
    assert_string_equal(one, "");
}

/* ---- stat ------------------------------------------------------------------------------- */

static const char stat_plain[] =
    "1234 (python3) S 1 1234 1234 0 -1 4194560 12345 0 0 0 150 25 0 0 20 0 8 0 987654 "
    "123456789 4096 18446744073709551615 1 1 0 0 0 0 0 16781312 2 0 0 0 17 3 0 0 0 0 0\n";

static void stat_plain_fields(void **state)
{
    struct gs_procfs_stat st;
    (void)state;
    assert_int_equal(gs_procfs_parse_stat(stat_plain, strlen(stat_plain), &st), GS_OK);
    assert_string_equal(st.comm, "python3");
    assert_int_equal(st.state, 'S');
    assert_int_equal(st.utime, 150);
    assert_int_equal(st.stime, 25);
    assert_int_equal(st.starttime, 987654);
    assert_int_equal(st.rss_pages, 4096);
}

static void stat_hostile_names(void **state)
{
    struct gs_procfs_stat st;
    const char *s;
    (void)state;

    s = "77 (my (weird) name) R 1 77 77 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 100 0 9 0\n";
    assert_int_equal(gs_procfs_parse_stat(s, strlen(s), &st), GS_OK);
    assert_string_equal(st.comm, "my (weird) name");
    assert_int_equal(st.state, 'R');
    assert_int_equal(st.utime, 5);
    assert_int_equal(st.rss_pages, 9);

    /* a name that imitates the fields after it */
    s = "78 (a) S 1 2 3) D 1 78 78 0 -1 0 0 0 0 0 7 8 0 0 20 0 1 0 200 0 10 0\n";
    assert_int_equal(gs_procfs_parse_stat(s, strlen(s), &st), GS_OK);
    assert_string_equal(st.comm, "a) S 1 2 3");
    assert_int_equal(st.state, 'D');
    assert_int_equal(st.stime, 8);
    assert_int_equal(st.starttime, 200);

    s = "79 ( ) S 1 2 3 0 -1 0 0 0 0 0 1 2 -3 -4 -20 -5 1 0 300 0 11 0\n"; /* spaces, negatives */
    assert_int_equal(gs_procfs_parse_stat(s, strlen(s), &st), GS_OK);
    assert_string_equal(st.comm, " ");
    assert_int_equal(st.starttime, 300);

    s = "80 () Z 1 2 3 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0 0\n"; /* empty name, zombie */
    assert_int_equal(gs_procfs_parse_stat(s, strlen(s), &st), GS_OK);
    assert_string_equal(st.comm, "");
    assert_int_equal(st.state, 'Z');
}

static void stat_malformed(void **state)
{
    struct gs_procfs_stat st;
    (void)state;
    assert_int_equal(gs_procfs_parse_stat("", 0, &st), GS_EPARSE);
    assert_int_equal(gs_procfs_parse_stat("12 python S 1", 13, &st), GS_EPARSE);
    assert_int_equal(gs_procfs_parse_stat("12 (python", 10, &st), GS_EPARSE);
    assert_int_equal(gs_procfs_parse_stat("12 (p) S 1 2 3", 14, &st), GS_EPARSE); /* cut short */
    assert_int_equal(gs_procfs_parse_stat(stat_plain, 60, &st), GS_EPARSE);
    const char *s = "1 (x) S 1 1 1 0 -1 0 0 0 0 0 abc 2 0 0 20 0 1 0 5 0 0 0";
    assert_int_equal(gs_procfs_parse_stat(s, strlen(s), &st), GS_EPARSE);
    s = "1 (x) S 1 1 1 0 -1 0 0 0 0 0 99999999999999999999999 2 0 0 20 0 1 0 5 0 0 0";
    assert_int_equal(gs_procfs_parse_stat(s, strlen(s), &st), GS_EPARSE); /* overflow */
}

static void status_and_btime(void **state)
{
    uint32_t uid = 7;
    long long bt = 0;
    const char *status = "Name:\tpython3\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t1234\n"
                         "Uid:\t1000\t1001\t1002\t1003\nGid:\t1000\t1000\t1000\t1000\n";
    const char *pstat = "cpu  1 2 3 4\ncpu0 1 2 3 4\nintr 12 0 0\nctxt 99\nbtime 1700000000\n"
                        "processes 1234\n";
    (void)state;
    assert_int_equal(gs_procfs_parse_uid(status, strlen(status), &uid), GS_OK);
    assert_int_equal(uid, 1000);
    assert_int_equal(gs_procfs_parse_uid("Name:\tx\n", 8, &uid), GS_EPARSE);
    assert_int_equal(gs_procfs_parse_uid("Uid:\t\n", 6, &uid), GS_EPARSE);
    assert_int_equal(gs_procfs_parse_btime(pstat, strlen(pstat), &bt), GS_OK);
    assert_int_equal(bt, 1700000000);
    assert_int_equal(gs_procfs_parse_btime("cpu 1 2\n", 8, &bt), GS_EPARSE);
}

/* The file-system ids (4th of Uid:/Gid:) and the groups a file access is checked with. */
static void status_creds(void **state)
{
    struct gs_procfs_creds c;
    const char *status = "Name:\tpython3\nUid:\t0\t1000\t0\t1003\nGid:\t0\t100\t0\t104\n"
                         "FDSize:\t64\nGroups:\t27 44 1000 \nNStgid:\t1\n";
    char many[4096] = "Uid:\t1 1 1 1\nGid:\t2 2 2 2\nGroups:\t";
    (void)state;
    assert_int_equal(gs_procfs_parse_creds(status, strlen(status), &c), GS_OK);
    assert_int_equal(c.uid, 1003);
    assert_int_equal(c.gid, 104);
    assert_int_equal(c.ngroups, 3);
    assert_int_equal(c.groups[0], 27);
    assert_int_equal(c.groups[2], 1000);
    status = "Uid:\t5\t5\t5\t5\nGid:\t6\t6\t6\t6\nGroups:\t\n"; /* no groups */
    assert_int_equal(gs_procfs_parse_creds(status, strlen(status), &c), GS_OK);
    assert_int_equal(c.uid, 5);
    assert_int_equal(c.ngroups, 0);
    status = "Uid:\t5\t5\t5\nGid:\t6\t6\t6\t6\n"; /* three uids: malformed */
    assert_int_equal(gs_procfs_parse_creds(status, strlen(status), &c), GS_EPARSE);
    status = "Uid:\t5\t5\t5\t5\n"; /* no Gid: */
    assert_int_equal(gs_procfs_parse_creds(status, strlen(status), &c), GS_EPARSE);
    status = "Uid:\t5\t5\t5\t5\nGid:\t6\t6\t6\t6\nGroups:\t7 x\n";
    assert_int_equal(gs_procfs_parse_creds(status, strlen(status), &c), GS_EPARSE);
    for (int i = 0; i <= GS_PROCFS_MAX_GROUPS; i++) /* more than kept: refused, not cut */
        snprintf(many + strlen(many), sizeof many - strlen(many), "%d ", i);
    assert_int_equal(gs_procfs_parse_creds(many, strlen(many), &c), GS_EPARSE);
    assert_int_equal(gs_procfs_read_creds((unsigned)getpid(), &c), GS_OK);
    assert_int_equal(c.uid, (uint32_t)geteuid());
    assert_int_equal(c.gid, (uint32_t)getegid());
}

/* ---- the reader on a fake /proc --------------------------------------------------------- */

struct fake {
    char root[256];
};

static void write_file(const char *dir, const char *name, const char *data, size_t len)
{
    char path[512];
    FILE *f;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
}

static void fake_proc(struct fake *fk, unsigned pid, const char *comm, unsigned long long ticks,
                      unsigned long long start)
{
    char dir[320], stat[512];
    static const char cmd[] = "/usr/bin/very_long_process_name\0--flag\0";
    static const char cgroup[] =
        "0::/kubepods.slice/kubepods-burstable.slice/"
        "kubepods-burstable-pod" POD_UND ".slice/cri-containerd-" ID64 ".scope\n";
    static const char status[] = "Name:\tx\nUid:\t0\t0\t0\t0\n";

    snprintf(dir, sizeof dir, "%s/%u", fk->root, pid);
    mkdir(dir, 0755);
    snprintf(stat, sizeof stat,
             "%u (%s) S 1 %u %u 0 -1 0 0 0 0 0 %llu 0 0 0 20 0 1 0 %llu 1000 25 0\n", pid, comm,
             pid, pid, ticks, start);
    write_file(dir, "stat", stat, strlen(stat));
    write_file(dir, "cmdline", cmd, sizeof cmd - 1);
    write_file(dir, "status", status, sizeof status - 1);
    write_file(dir, "cgroup", cgroup, sizeof cgroup - 1);
}

static int fake_setup(void **state)
{
    struct fake *fk = calloc(1, sizeof *fk);
    const char *tmp = getenv("TMPDIR");
    if (!fk)
        return -1;
    snprintf(fk->root, sizeof fk->root, "%s/gs_procfs_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(fk->root))
        return -1;
    write_file(fk->root, "stat", "cpu 1 2 3\nbtime 1700000000\n", 27);
    *state = fk;
    return 0;
}

static int fake_teardown(void **state)
{
    struct fake *fk = *state;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fk->root);
    if (system(cmd) != 0)
        return -1;
    free(fk);
    return 0;
}

/* The one-off reads: a process's and a thread's stat through the one parser, a file's text,
 * the children of a pid. */
static void oneoff_reads(void **state)
{
    struct fake *fk = *state;
    struct gs_procfs_stat st;
    char dir[400], buf[64];
    unsigned kids[4], ppid = 0;
    static const char child[] =
        "300 (kid (x)) R 200 1 1 0 -1 0 0 0 0 0 7 0 0 0 20 0 1 0 55 1000 25 0\n";
    static const char thread[] =
        "201 (a thread) D 1 200 200 0 -1 0 0 0 0 0 3 4 0 0 20 0 2 0 40 1000 25 0\n";

    fake_proc(fk, 200, "parent", 10, 40);
    snprintf(dir, sizeof dir, "%s/300", fk->root);
    mkdir(dir, 0755);
    write_file(dir, "stat", child, sizeof child - 1);
    snprintf(dir, sizeof dir, "%s/400", fk->root);
    mkdir(dir, 0755);
    write_file(dir, "stat", "400 garbage", 11);
    snprintf(dir, sizeof dir, "%s/200/task", fk->root);
    mkdir(dir, 0755);
    snprintf(dir, sizeof dir, "%s/200/task/201", fk->root);
    mkdir(dir, 0755);
    write_file(dir, "stat", thread, sizeof thread - 1);
    write_file(dir, "wchan", "futex_wait_queue", 16);

    assert_int_equal(gs_procfs_read_stat(fk->root, 300, 0, &st), GS_OK);
    assert_string_equal(st.comm, "kid (x)");
    assert_int_equal(st.state, 'R');
    assert_int_equal(st.ppid, 200);
    assert_int_equal(st.starttime, 55);
    assert_int_equal(gs_procfs_read_stat(fk->root, 200, 201, &st), GS_OK);
    assert_string_equal(st.comm, "a thread");
    assert_int_equal(st.state, 'D');
    assert_int_equal(st.utime + st.stime, 7);
    assert_int_equal(gs_procfs_read_stat(fk->root, 999, 0, &st), GS_ENOTFOUND);
    assert_int_equal(gs_procfs_read_stat(fk->root, 200, 999, &st), GS_ENOTFOUND);
    assert_int_equal(gs_procfs_read_stat(fk->root, 400, 0, &st), GS_EPARSE);
    assert_int_equal(gs_procfs_read_ppid(fk->root, 300, &ppid), GS_OK);
    assert_int_equal(ppid, 200);

    assert_int_equal(gs_procfs_read_text(fk->root, 200, 201, "wchan", buf, sizeof buf), 16);
    assert_string_equal(buf, "futex_wait_queue");
    assert_int_equal(gs_procfs_read_text(fk->root, 200, 201, "wchan", buf, 6), 5);
    assert_string_equal(buf, "futex");
    assert_int_equal(gs_procfs_read_text(fk->root, 999, 0, "stat", buf, sizeof buf), -1);
    assert_string_equal(buf, "");

    assert_int_equal(gs_procfs_children(fk->root, 200, kids, 4), 1);
    assert_int_equal(kids[0], 300);
    assert_int_equal(gs_procfs_children(fk->root, 1, kids, 4), 1);
    assert_int_equal(kids[0], 200);
    assert_int_equal(gs_procfs_children(fk->root, 1, kids, 0), 0);
    assert_int_equal(gs_procfs_children(fk->root, 777, kids, 4), 0);
    snprintf(dir, sizeof dir, "%s/nothing", fk->root);
    assert_int_equal(gs_procfs_children(dir, 1, kids, 4), 0);

    /* the CPU ticks of a tree: 200 (10) and its child 300 (7); 300 alone; 1 is no process */
    {
        unsigned long long ticks = 99;
        assert_int_equal(gs_procfs_tree_ticks(fk->root, 200, &ticks), GS_OK);
        assert_int_equal(ticks, 17);
        assert_int_equal(gs_procfs_tree_ticks(fk->root, 300, &ticks), GS_OK);
        assert_int_equal(ticks, 7);
        assert_int_equal(gs_procfs_tree_ticks(fk->root, 777, &ticks), GS_ENOTFOUND);
        assert_int_equal(ticks, 0);
    }
}

static void reader_fake_tree(void **state)
{
    struct fake *fk = *state;
    struct gs_procfs *pf = NULL;
    struct gs_proc p;
    long hz = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);

    fake_proc(fk, 4242, "very_long_proce", 100, 5 * (unsigned long long)hz);
    assert_int_equal(gs_procfs_open(&pf, fk->root, NULL), GS_OK);

    memset(&p, 0, sizeof p);
    gs_procfs_begin(pf);
    assert_int_equal(gs_procfs_fill(pf, 4242, 1000000000LL, &p), GS_OK);
    gs_procfs_end(pf);
    assert_int_equal(p.host_st, GS_ST_OK);
    assert_string_equal(p.name, "very_long_process_name"); /* comm extended from argv[0] */
    assert_string_equal(p.cmdline, "/usr/bin/very_long_process_name --flag");
    assert_int_equal(p.uid, 0);
    assert_string_equal(p.user, "root");
    assert_int_equal(p.rss_bytes, 25ULL * (unsigned long long)page);
    assert_true(p.start_time > 1700000004.99 && p.start_time < 1700000005.01);
    assert_int_equal(p.job_kind, GS_JOB_CONTAINERD);
    assert_string_equal(p.container_id, ID64);
    assert_string_equal(p.pod_uid, POD_DASH);
    assert_int_equal(p.cpu_st, GS_ST_NA); /* first sight */

    /* two seconds later, 2 s of CPU more: one core */
    fake_proc(fk, 4242, "very_long_proce", 100 + 2 * (unsigned long long)hz,
              5 * (unsigned long long)hz);
    gs_procfs_begin(pf);
    assert_int_equal(gs_procfs_fill(pf, 4242, 3000000000LL, &p), GS_OK);
    assert_int_equal(p.cpu_st, GS_ST_OK);
    assert_true(p.cpu_ratio > 0.999 && p.cpu_ratio < 1.001);
    /* the same pid filled again in the same cycle (it is on two GPUs): same ratio */
    memset(&p, 0, sizeof p);
    assert_int_equal(gs_procfs_fill(pf, 4242, 3000000001LL, &p), GS_OK);
    assert_int_equal(p.cpu_st, GS_ST_OK);
    assert_true(p.cpu_ratio > 0.99 && p.cpu_ratio < 1.01);
    gs_procfs_end(pf);

    /* the pid is reused by a new process (other start time): no ratio from the old one */
    fake_proc(fk, 4242, "short", 10, 9 * (unsigned long long)hz);
    gs_procfs_begin(pf);
    memset(&p, 0, sizeof p);
    assert_int_equal(gs_procfs_fill(pf, 4242, 4000000000LL, &p), GS_OK);
    assert_string_equal(p.name, "short");
    assert_int_equal(p.cpu_st, GS_ST_NA);
    gs_procfs_end(pf);

    /* a cycle without the pid forgets it */
    gs_procfs_begin(pf);
    gs_procfs_end(pf);
    gs_procfs_begin(pf);
    assert_int_equal(gs_procfs_fill(pf, 4242, 5000000000LL, &p), GS_OK);
    assert_int_equal(p.cpu_st, GS_ST_NA);
    gs_procfs_end(pf);
    gs_procfs_close(pf);
}

/* gs_procfs_set_jobs(pf, 0) (the quick check without --show-container): the cgroup is not
 * read, so the job stays empty while the rest is filled. */
static void reader_skips_jobs(void **state)
{
    struct fake *fk = *state;
    struct gs_procfs *pf = NULL;
    struct gs_proc p;
    long hz = sysconf(_SC_CLK_TCK);

    fake_proc(fk, 4242, "very_long_proce", 100, 5 * (unsigned long long)hz);
    assert_int_equal(gs_procfs_open(&pf, fk->root, NULL), GS_OK);
    gs_procfs_set_jobs(pf, 0);
    memset(&p, 0, sizeof p);
    gs_procfs_begin(pf);
    assert_int_equal(gs_procfs_fill(pf, 4242, 1000000000LL, &p), GS_OK);
    gs_procfs_end(pf);
    assert_int_equal(p.host_st, GS_ST_OK);
    assert_string_equal(p.cmdline, "/usr/bin/very_long_process_name --flag");
    assert_string_equal(p.user, "root");
    assert_int_equal(p.job_kind, 0);
    assert_string_equal(p.container_id, "");
    assert_string_equal(p.pod_uid, "");
    gs_procfs_close(pf);
}

static void reader_vanished_pid(void **state)
{
    struct fake *fk = *state;
    struct gs_procfs *pf = NULL;
    struct gs_proc p;
    char dir[320];

    assert_int_equal(gs_procfs_open(&pf, fk->root, NULL), GS_OK);
    memset(&p, 0, sizeof p);
    p.pid = 999999;
    p.gpu_mem_bytes = 1234;
    p.mem_st = GS_ST_OK;
    strcpy(p.name, "from-nvml");
    gs_procfs_begin(pf);
    assert_int_equal(gs_procfs_fill(pf, 999999, 1, &p), GS_ENOTFOUND);
    assert_int_equal(gs_procfs_fill(pf, 0, 1, &p), GS_ENOTFOUND);
    /* a directory that lost its files mid-read (exit between NVML and us) */
    snprintf(dir, sizeof dir, "%s/31337", fk->root);
    mkdir(dir, 0755);
    assert_int_equal(gs_procfs_fill(pf, 31337, 1, &p), GS_ENOTFOUND);
    /* an unparsable stat */
    write_file(dir, "stat", "31337 garbage", 13);
    assert_int_equal(gs_procfs_fill(pf, 31337, 1, &p), GS_ENOTFOUND);
    gs_procfs_end(pf);
    assert_int_equal(p.host_st, GS_ST_NA);
    assert_string_equal(p.name, "from-nvml");
    assert_int_equal(p.gpu_mem_bytes, 1234);
    gs_procfs_close(pf);
    gs_procfs_close(NULL);
}

static void reader_missing_files(void **state)
{
    struct fake *fk = *state;
    struct gs_procfs *pf = NULL;
    struct gs_proc p;
    char dir[320];
    const char *stat = "555 (bare) S 1 1 1 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 7 0 3 0\n";

    /* only stat: cmdline, status, cgroup missing (kernel thread, hidepid, race) */
    snprintf(dir, sizeof dir, "%s/555", fk->root);
    mkdir(dir, 0755);
    write_file(dir, "stat", stat, strlen(stat));
    assert_int_equal(gs_procfs_open(&pf, fk->root, NULL), GS_OK);
    memset(&p, 0xAB, sizeof p);
    gs_procfs_begin(pf);
    assert_int_equal(gs_procfs_fill(pf, 555, 1, &p), GS_OK);
    gs_procfs_end(pf);
    assert_string_equal(p.name, "bare");
    assert_string_equal(p.cmdline, "");
    assert_string_equal(p.user, "");
    assert_int_equal(p.job_kind, GS_JOB_NONE);
    assert_string_equal(p.container_id, "");
    gs_procfs_close(pf);
}

static void reader_bad_root(void **state)
{
    struct gs_procfs *pf = NULL;
    char longroot[400];
    struct gs_err e;
    struct gs_proc p;
    (void)state;

    memset(longroot, 'x', sizeof longroot - 1);
    longroot[sizeof longroot - 1] = '\0';
    assert_int_equal(gs_procfs_open(&pf, longroot, &e), GS_EINVAL);
    assert_null(pf);
    /* a root without /proc/stat still works; start times are then 0 */
    assert_int_equal(gs_procfs_open(&pf, "/nonexistent-gs-root", NULL), GS_OK);
    gs_procfs_begin(pf);
    assert_int_equal(gs_procfs_fill(pf, 1, 1, &p), GS_ENOTFOUND);
    gs_procfs_end(pf);
    gs_procfs_close(pf);
}

static void reader_real_self(void **state)
{
    struct gs_procfs *pf = NULL;
    struct gs_proc p;
    (void)state;

    assert_int_equal(gs_procfs_open(&pf, NULL, NULL), GS_OK);
    memset(&p, 0, sizeof p);
    gs_procfs_begin(pf);
    assert_int_equal(gs_procfs_fill(pf, (unsigned)getpid(), 1, &p), GS_OK);
    gs_procfs_end(pf);
    assert_int_equal(p.host_st, GS_ST_OK);
    assert_string_equal(p.name, "test_procfs");
    assert_non_null(strstr(p.cmdline, "test_procfs"));
    assert_int_equal(p.uid, (uint32_t)getuid());
    assert_true(p.user[0] != '\0');
    assert_true(p.rss_bytes > 0);
    assert_true(p.start_time > 1.0e9);
    gs_procfs_close(pf);
}

static unsigned open_fd_count(void)
{
    unsigned n = 0;
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;

    assert_non_null(d);
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* The stat descriptor kept per pid is reused across cycles, fails once the process exits, and
 * is closed when the pid leaves the table: no descriptor leaks, no stale reads. */
static void reader_kept_stat_descriptor(void **state)
{
    struct gs_procfs *pf = NULL;
    struct gs_proc p;
    unsigned base;
    pid_t child;
    (void)state;

    child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        pause();
        _exit(0);
    }
    assert_int_equal(gs_procfs_open(&pf, NULL, NULL), GS_OK);
    base = open_fd_count();
    for (int cycle = 0; cycle < 3; cycle++) {
        memset(&p, 0, sizeof p);
        gs_procfs_begin(pf);
        assert_int_equal(gs_procfs_fill(pf, (unsigned)child, 1000000000LL * (cycle + 1), &p),
                         GS_OK);
        gs_procfs_end(pf);
        assert_int_equal(open_fd_count(), base + 1); /* one kept descriptor, not one per cycle */
    }
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    gs_procfs_begin(pf);
    assert_int_equal(gs_procfs_fill(pf, (unsigned)child, 9000000000LL, &p), GS_ENOTFOUND);
    gs_procfs_end(pf);
    assert_int_equal(open_fd_count(), base);
    gs_procfs_close(pf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(status_creds),
        cmocka_unit_test(cgroup_docker_v1_cgroupfs),
        cmocka_unit_test(cgroup_docker_systemd),
        cmocka_unit_test(cgroup_k8s_containerd_systemd_qos),
        cmocka_unit_test(cgroup_k8s_cgroupfs_v1),
        cmocka_unit_test(cgroup_k8s_dockershim_systemd),
        cmocka_unit_test(cgroup_crio),
        cmocka_unit_test(cgroup_podman),
        cmocka_unit_test(cgroup_slurm),
        cmocka_unit_test(cgroup_host_and_garbage),
        cmocka_unit_test(cgroup_hybrid_first_match),
        cmocka_unit_test(cmdline_join),
        cmocka_unit_test(cmdline_cap),
        cmocka_unit_test(stat_plain_fields),
        cmocka_unit_test(stat_hostile_names),
        cmocka_unit_test(stat_malformed),
        cmocka_unit_test(status_and_btime),
        cmocka_unit_test_setup_teardown(reader_fake_tree, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(reader_skips_jobs, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(oneoff_reads, fake_setup, fake_teardown),
        cmocka_unit_test(reader_kept_stat_descriptor),
        cmocka_unit_test_setup_teardown(reader_vanished_pid, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(reader_missing_files, fake_setup, fake_teardown),
        cmocka_unit_test(reader_bad_root),
        cmocka_unit_test(reader_real_self),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
