/*
 * Unit tests of the run-attribution rule (src/run/attrib.c): CUDA_VISIBLE_DEVICES as indices,
 * GPU UUIDs and unique prefixes, MIG UUIDs (and the old MIG-GPU-<uuid>/gi/ci form) to the GPU
 * that holds them, the list ending at its first bad entry as CUDA's does, unset = identity;
 * a run's processes and their descendants (ancestry from a fake /proc tree) in the snapshot's
 * process lists; announced devices ignored when the process's CUDA_VISIBLE_DEVICES is unknown;
 * and procfs's one-off reads (ppid, one environment variable, the cgroup v1 devices.list).
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

#include "backend/procfs.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"
#include "run/attrib.h"

static struct gs_snapshot *four_gpus(void)
{
    static const char *const uuid[] = {
        "GPU-aaaaaaaa-0000-0000-0000-000000000000", "GPU-bbbbbbbb-0000-0000-0000-000000000000",
        "GPU-bbbbcccc-0000-0000-0000-000000000000", "GPU-dddddddd-0000-0000-0000-000000000000"};
    struct gs_snapshot *s = NULL;

    assert_int_equal(gs_snapshot_new(&s, 4, 8, NULL), GS_OK);
    for (unsigned g = 0; g < 4; g++) {
        s->gpus[g].index = g;
        snprintf(s->gpus[g].text[GS_T_UUID], GS_STR_LEN, "%s", uuid[g]);
    }
    /* GPU 3 is in MIG mode with two devices */
    s->gpus[3].n_mig = 2;
    snprintf(s->gpus[3].mig[0].uuid, GS_STR_LEN, "MIG-11111111-2222-3333-4444-555555555555");
    snprintf(s->gpus[3].mig[1].uuid, GS_STR_LEN, "MIG-66666666-2222-3333-4444-555555555555");
    return s;
}

static void cuda_to_gpu(void **state)
{
    struct gs_snapshot *s = four_gpus();

    (void)state;
    /* unset or empty: CUDA index k is GPU k */
    assert_int_equal(gs_attrib_cuda_gpu(s, NULL, 2), 2);
    assert_int_equal(gs_attrib_cuda_gpu(s, "", 3), 3);
    assert_int_equal(gs_attrib_cuda_gpu(s, NULL, 4), -1);
    assert_int_equal(gs_attrib_cuda_gpu(s, NULL, -1), -1);
    /* indices */
    assert_int_equal(gs_attrib_cuda_gpu(s, "2,0", 0), 2);
    assert_int_equal(gs_attrib_cuda_gpu(s, "2,0", 1), 0);
    assert_int_equal(gs_attrib_cuda_gpu(s, "2,0", 2), -1);
    assert_int_equal(gs_attrib_cuda_gpu(s, " 3 , 1", 1), 1);
    /* UUIDs, whole and as unique prefixes; an ambiguous prefix names nothing */
    assert_int_equal(gs_attrib_cuda_gpu(s, "GPU-dddddddd-0000-0000-0000-000000000000", 0), 3);
    assert_int_equal(gs_attrib_cuda_gpu(s, "GPU-bbbbc,GPU-aaaa", 0), 2);
    assert_int_equal(gs_attrib_cuda_gpu(s, "GPU-bbbbc,GPU-aaaa", 1), 0);
    assert_int_equal(gs_attrib_cuda_gpu(s, "GPU-bbbb", 0), -1);
    assert_int_equal(gs_attrib_cuda_gpu(s, "GPU-ffff", 0), -1);
    /* MIG devices: the GPU that holds them */
    assert_int_equal(gs_attrib_cuda_gpu(s, "MIG-66666666-2222-3333-4444-555555555555", 0), 3);
    assert_int_equal(gs_attrib_cuda_gpu(s, "MIG-GPU-dddddddd-0000-0000-0000-000000000000/1/0", 0),
                     3);
    assert_int_equal(gs_attrib_cuda_gpu(s, "MIG-99999999", 0), -1);
    /* the list ends at its first entry that names no GPU (as CUDA's) */
    assert_int_equal(gs_attrib_cuda_gpu(s, "1,7,2", 0), 1);
    assert_int_equal(gs_attrib_cuda_gpu(s, "1,7,2", 2), -1);
    assert_int_equal(gs_attrib_cuda_gpu(s, "1,-1,2", 2), -1);
    assert_int_equal(gs_attrib_cuda_gpu(s, "1,,2", 2), -1);
    assert_int_equal(gs_attrib_cuda_gpu(s, "x", 0), -1);
    assert_true(gs_attrib_cvd_mig("0,MIG-1234"));
    assert_false(gs_attrib_cvd_mig("0,1"));
    assert_false(gs_attrib_cvd_mig(NULL));
    gs_snapshot_free(s);
}

/* A fake /proc: pid -> ppid. */
struct fake {
    char root[128];
};

static void put_stat(const char *root, unsigned pid, unsigned ppid)
{
    char path[256];
    FILE *f;

    snprintf(path, sizeof path, "%s/%u", root, pid);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/%u/stat", root, pid);
    f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%u (py thon) S %u 1 1 0 -1 4194304 0 0 0 0 5 6 0 0 20 0 1 0 77 1000 10\n", pid,
            ppid);
    fclose(f);
}

static void put_file(const char *root, const char *rel, const char *text, size_t len)
{
    char path[512];
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", root, rel);
    f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    fclose(f);
}

static int fake_setup(void **state)
{
    struct fake *fk = calloc(1, sizeof *fk);

    snprintf(fk->root, sizeof fk->root, "/tmp/gs-attrib-XXXXXX");
    if (!mkdtemp(fk->root))
        return -1;
    /* 100 (the command) -> 200 (a launcher) -> 300, 301 (ranks) -> 400 (a worker of 300);
     * 500 is someone else's, a child of init. */
    put_stat(fk->root, 100, 50);
    put_stat(fk->root, 50, 1);
    put_stat(fk->root, 200, 100);
    put_stat(fk->root, 300, 200);
    put_stat(fk->root, 301, 200);
    put_stat(fk->root, 400, 300);
    put_stat(fk->root, 500, 1);
    *state = fk;
    return 0;
}

static int fake_teardown(void **state)
{
    struct fake *fk = *state;
    char cmd[200];

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fk->root);
    if (system(cmd) != 0)
        return -1;
    free(fk);
    return 0;
}

static void add_proc(struct gs_snapshot *s, unsigned pid, unsigned gpu)
{
    memset(&s->procs[s->n_procs], 0, sizeof s->procs[0]);
    s->procs[s->n_procs].pid = pid;
    s->procs[s->n_procs].gpu = gpu;
    s->n_procs++;
}

static void tree_and_devices(void **state)
{
    struct fake *fk = *state;
    struct gs_snapshot *s = four_gpus();
    struct gs_attrib_tree tree = {0};
    unsigned char in_run[4], procs[5];
    pid_t cmd = 100, rank = 301;
    int32_t dev[] = {0, -1};
    struct gs_attrib a = {.pids = &cmd, .n_pids = 1, .descendants = 1};

    add_proc(s, 400, 0); /* a grandchild's grandchild of the command */
    add_proc(s, 301, 1);
    add_proc(s, 301, 1); /* listed twice (compute and graphics) */
    add_proc(s, 500, 2); /* not ours */
    add_proc(s, 999, 3); /* gone: no ancestry */
    assert_int_equal(gs_attrib_tree_read(&tree, s, fk->root), 0);
    memset(in_run, 0, sizeof in_run);
    assert_int_equal(gs_attrib_mark(&a, &tree, s, in_run), 2);
    assert_memory_equal(in_run, ((unsigned char[]){1, 1, 0, 0}), 4);
    /* the same rule per process: the run's own among the others on its GPUs */
    memset(procs, 9, sizeof procs);
    gs_attrib_procs(&a, &tree, s, procs);
    assert_memory_equal(procs, ((unsigned char[]){1, 1, 1, 0, 0}), 5);
    /* without descendants: only a listed pid of the run */
    a.descendants = 0;
    memset(in_run, 0, sizeof in_run);
    assert_int_equal(gs_attrib_mark(&a, &tree, s, in_run), 0);
    a.pids = &rank;
    assert_int_equal(gs_attrib_mark(&a, NULL, s, in_run), 1);
    assert_memory_equal(in_run, ((unsigned char[]){0, 1, 0, 0}), 4);
    /* announced devices through CUDA_VISIBLE_DEVICES (a UUID list: the bug of the old
     * in-process rule, which kept index 0 = GPU 0) */
    a.devices = dev;
    a.n_devices = 2;
    a.cvd_known = 1;
    a.cvd = "GPU-bbbbc,GPU-aaaa";
    memset(in_run, 0, sizeof in_run);
    assert_int_equal(gs_attrib_mark(&a, NULL, s, in_run), 2);
    assert_memory_equal(in_run, ((unsigned char[]){0, 1, 1, 0}), 4);
    /* not known (the agent could not read the environment): devices unused */
    a.cvd_known = 0;
    memset(in_run, 0, sizeof in_run);
    assert_int_equal(gs_attrib_mark(&a, NULL, s, in_run), 1);
    assert_memory_equal(in_run, ((unsigned char[]){0, 1, 0, 0}), 4);
    gs_attrib_tree_free(&tree);
    gs_snapshot_free(s);
}

static void procfs_one_off_reads(void **state)
{
    struct fake *fk = *state;
    static const char env[] = "PATH=/bin\0CUDA_VISIBLE_DEVICESX=9\0CUDA_VISIBLE_DEVICES=GPU-"
                              "bbbbc,1\0CUDA_VISIBLE_DEVICES=7\0";
    char out[64], dir[256];
    unsigned ppid = 0;
    char *list;

    (void)state;
    assert_int_equal(gs_procfs_read_ppid(fk->root, 400, &ppid), GS_OK);
    assert_int_equal(ppid, 300);
    assert_int_equal(gs_procfs_read_ppid(fk->root, 12345, &ppid), GS_ENOTFOUND);
    put_file(fk->root, "300/environ", env, sizeof env - 1);
    assert_int_equal(gs_procfs_read_env(fk->root, 300, "CUDA_VISIBLE_DEVICES", out, sizeof out),
                     GS_OK);
    assert_string_equal(out, "GPU-bbbbc,1");
    assert_int_equal(gs_procfs_read_env(fk->root, 300, "HOME", out, sizeof out), GS_ENOTFOUND);
    assert_string_equal(out, "");
    assert_int_equal(gs_procfs_read_env(fk->root, 300, "CUDA_VISIBLE_DEVICES", out, 5), GS_OK);
    assert_string_equal(out, "GPU-");
    assert_int_equal(gs_procfs_read_env(fk->root, 301, "PATH", out, sizeof out), GS_ENOTFOUND);
    /* cgroup v1 devices.list under a fake cgroup root; v2 only: none */
    put_file(fk->root, "300/cgroup", "12:devices:/slurm/uid_1/job_7\n0::/x\n", 35);
    snprintf(dir, sizeof dir, "mkdir -p '%s/cg/devices/slurm/uid_1/job_7'", fk->root);
    assert_int_equal(system(dir), 0);
    put_file(fk->root, "cg/devices/slurm/uid_1/job_7/devices.list", "c 195:1 rwm\n", 12);
    snprintf(dir, sizeof dir, "%s/cg", fk->root);
    list = gs_procfs_read_devices_list(fk->root, dir, 300);
    assert_non_null(list);
    assert_string_equal(list, "c 195:1 rwm\n");
    free(list);
    put_file(fk->root, "301/cgroup", "0::/user.slice\n", 15);
    assert_null(gs_procfs_read_devices_list(fk->root, dir, 301));
    assert_null(gs_procfs_read_devices_list(fk->root, dir, 12345));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cuda_to_gpu),
        cmocka_unit_test_setup_teardown(tree_and_devices, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(procfs_one_off_reads, fake_setup, fake_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
