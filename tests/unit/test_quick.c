/*
 * Unit tests for the quick check without NVML: option parsing, the --id filter, the text
 * renderer and the JSON document on hand-built snapshots, and the terminal helpers (colour
 * decision, display width, clipping, in-place redraw).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "base/clock.h"
#include "base/term.h"
#include "cli/quick/quick.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
#define MIB (1024.0 * 1024.0)

/* ---- fixtures ---- */

static void set_text(struct gs_gpu *g, enum gs_text t, const char *s)
{
    snprintf(g->text[t], sizeof g->text[t], "%s", s);
    g->tst[t] = GS_ST_OK;
}

static void h100(struct gs_gpu *g, unsigned index, double temp, double util, double used_mib)
{
    char uuid[64], bus[32];

    memset(g, 0, sizeof *g);
    g->index = index;
    snprintf(uuid, sizeof uuid, "GPU-0000000%u-1111-2222-3333-444444444444", index);
    snprintf(bus, sizeof bus, "00000000:%02X:00.0", 0x17 + index);
    set_text(g, GS_T_NAME, "NVIDIA H100 80GB HBM3");
    set_text(g, GS_T_UUID, uuid);
    set_text(g, GS_T_PCI_BUS_ID, bus);
    gs_gpu_set(g, GS_M_TEMP_GPU, temp);
    gs_gpu_set(g, GS_M_UTIL_GPU, util);
    gs_gpu_set(g, GS_M_MEM_USED, used_mib * MIB);
    gs_gpu_set(g, GS_M_MEM_TOTAL, 81559.0 * MIB);
    gs_gpu_set(g, GS_M_POWER_DRAW, 512.4);
    gs_gpu_set(g, GS_M_POWER_ENFORCED_LIMIT, 700.0);
    gs_gpu_set(g, GS_M_FAN, 0.3);
    gs_gpu_set(g, GS_M_UTIL_ENC, 0.0);
    gs_gpu_set(g, GS_M_UTIL_DEC, 0.07);
    gs_gpu_set(g, GS_M_PSTATE, 0);
    gs_gpu_set(g, GS_M_CLOCK_SM, 1980e6);
    gs_gpu_set(g, GS_M_CLOCK_MEM, 2619e6);
    gs_gpu_set(g, GS_M_PCIE_GEN, 5);
    gs_gpu_set(g, GS_M_PCIE_WIDTH, 16);
    gs_gpu_set(g, GS_M_THROTTLE_ACTIVE, (double)GS_THR_GPU_IDLE);
}

static struct gs_proc *add_proc(struct gs_snapshot *s, unsigned gpu, unsigned pid, const char *name,
                                const char *user, double mem_bytes)
{
    struct gs_proc *p;

    assert_int_equal(gs_snapshot_reserve_procs(s, s->n_procs + 1, NULL), GS_OK);
    p = &s->procs[s->n_procs++];
    memset(p, 0, sizeof *p);
    p->pid = pid;
    p->gpu = gpu;
    p->type = GS_PROC_COMPUTE;
    p->gi_id = p->ci_id = 0xFFFFFFFFu;
    p->mem_st = GS_ST_OK;
    p->gpu_mem_bytes = (uint64_t)mem_bytes;
    p->host_st = GS_ST_OK;
    snprintf(p->name, sizeof p->name, "%s", name);
    snprintf(p->user, sizeof p->user, "%s", user);
    snprintf(p->cmdline, sizeof p->cmdline, "%s train.py --lr 1e-4", name);
    p->uid = 1000;
    p->cpu_st = GS_ST_OK;
    p->cpu_ratio = 0.98;
    p->rss_bytes = (uint64_t)(2.1 * GIB);
    return p;
}

/* Two H100s at 2025-01-14 10:22:03 UTC; alice's python on GPU 0. */
static struct gs_snapshot *two_gpus(void)
{
    struct gs_snapshot *s = NULL;

    assert_int_equal(gs_snapshot_new(&s, 2, 4, NULL), GS_OK);
    snprintf(s->sys.hostname, sizeof s->sys.hostname, "node1");
    s->sys.driver_st = GS_ST_OK;
    snprintf(s->sys.driver_version, sizeof s->sys.driver_version, "590.48.01");
    s->sys.cuda_st = GS_ST_OK;
    s->sys.cuda_version = 13010;
    s->sys.gpu_count = 2;
    s->t_real = 1736850123.25;
    h100(&s->gpus[0], 0, 45, 0.82, 32120);
    h100(&s->gpus[1], 1, 38, 0.05, 0);
    add_proc(s, 0, 12345, "python", "alice", 30.1 * GIB);
    return s;
}

static struct gs_quick_opts opts_of(const char *args)
{
    struct gs_quick_opts o;
    char buf[256], *argv[32];
    int argc = 0;
    struct gs_err err;

    snprintf(buf, sizeof buf, "%s", args);
    argv[argc++] = "gpuscope";
    for (char *t = strtok(buf, " "); t && argc < 31; t = strtok(NULL, " "))
        argv[argc++] = t;
    argv[argc] = NULL;
    gs_err_clear(&err);
    assert_int_equal(gs_quick_parse(&o, argc, argv, &err), GS_OK);
    /* ids[].text points into buf, gone on return: callers must not print it. */
    return o;
}

/* Renders s; the caller frees the returned string. */
static char *render(const struct gs_snapshot *s, const struct gs_quick_opts *o, unsigned cols,
                    int color)
{
    struct gs_tbuf b;
    char *text;

    gs_tbuf_init(&b, color);
    assert_int_equal(gs_quick_render(&b, s, o, cols), GS_OK);
    text = strdup(gs_tbuf_str(&b));
    gs_tbuf_free(&b);
    assert_non_null(text);
    return text;
}

/* Line k (0-based) of text, in a static buffer. */
static const char *line_of(const char *text, int k)
{
    static char buf[4096];
    const char *p = text;

    while (k-- > 0) {
        p = strchr(p, '\n');
        if (!p)
            return "";
        p++;
    }
    size_t n = strcspn(p, "\n");
    if (n >= sizeof buf)
        n = sizeof buf - 1;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return buf;
}

static int count_lines(const char *text)
{
    int n = 0;
    for (const char *p = text; *p; p++)
        n += *p == '\n';
    return n;
}

/* Display column of the n-th occurrence of needle in line. */
static size_t column_of(const char *line, const char *needle, int nth)
{
    const char *p = line;

    for (int i = 0; i <= nth; i++) {
        p = strstr(i ? p + 1 : p, needle);
        if (!p)
            return (size_t)-1;
    }
    return gs_term_width(line, (size_t)(p - line));
}

static int setup_tz(void **state)
{
    (void)state;
    setenv("TZ", "UTC", 1);
    tzset();
    return 0;
}

/* ---- text view ---- */

static void text_normal(void **state)
{
    struct gs_snapshot *s = two_gpus();
    struct gs_quick_opts o = opts_of("");
    char *t;
    (void)state;

    t = render(s, &o, 0, 0);
    assert_string_equal(line_of(t, 0), "node1  2025-01-14 10:22:03  driver 590.48.01  CUDA 13.1");
    assert_string_equal(line_of(t, 1), "[0] NVIDIA H100 80GB HBM3 | 45\xc2\xb0"
                                       "C,  82 % | 32120 / 81559 MB | python/12345(alice 30.1G)");
    assert_string_equal(line_of(t, 2), "[1] NVIDIA H100 80GB HBM3 | 38\xc2\xb0"
                                       "C,   5 % |     0 / 81559 MB |");
    assert_int_equal(count_lines(t), 3);
    assert_null(strchr(t, '\x1b'));
    free(t);
    gs_snapshot_free(s);
}

static void text_absent_is_na(void **state)
{
    struct gs_snapshot *s = two_gpus();
    struct gs_quick_opts o = opts_of("-P -F -e");
    struct gs_gpu *g = &s->gpus[1];
    char *t;
    (void)state;

    g->st[GS_M_TEMP_GPU] = GS_ST_NA;
    g->st[GS_M_UTIL_GPU] = GS_ST_NOPERM;
    g->st[GS_M_MEM_USED] = GS_ST_NA;
    g->st[GS_M_POWER_DRAW] = GS_ST_ERROR;
    g->st[GS_M_FAN] = GS_ST_NA;
    g->st[GS_M_UTIL_ENC] = GS_ST_NA;
    s->sys.driver_st = GS_ST_NA;
    t = render(s, &o, 0, 0);
    assert_non_null(strstr(line_of(t, 0), "driver N/A"));
    assert_string_equal(line_of(t, 2), "[1] NVIDIA H100 80GB HBM3 |  N/A, fan   N/A,   N/A "
                                       "(E:   N/A  D:   7 %),  N/A /  700 W |   N/A / 81559 MB |");
    assert_non_null(strstr(line_of(t, 1),
                           "45\xc2\xb0"
                           "C, fan  30 %,  82 % (E:   0 %  D:   7 %),  512 /  700 W"));
    free(t);
    gs_snapshot_free(s);
}

static void text_lost_gpu(void **state)
{
    struct gs_snapshot *s = NULL;
    struct gs_quick_opts o = opts_of("");
    char *t;
    (void)state;

    assert_int_equal(gs_snapshot_new(&s, 3, 0, NULL), GS_OK);
    h100(&s->gpus[0], 0, 45, 0.5, 100);
    h100(&s->gpus[1], 1, 45, 0.5, 100);
    h100(&s->gpus[2], 2, 45, 0.5, 100);
    set_text(&s->gpus[2], GS_T_NAME, "NVIDIA A100-SXM4-80GB");
    s->gpus[2].lost = 1;
    memset(s->gpus[2].st, GS_ST_LOST, sizeof s->gpus[2].st);
    t = render(s, &o, 0, 0);
    assert_string_equal(line_of(t, 3), "[2] NVIDIA A100-SXM4-80GB | GPU is lost");
    assert_non_null(strstr(line_of(t, 1), "[0] NVIDIA H100 80GB HBM3 | 45"));
    assert_non_null(strstr(line_of(t, 2), "|   100 / 81559 MB |"));
    free(t);
    gs_snapshot_free(s);
}

static void text_throttled(void **state)
{
    struct gs_snapshot *s = two_gpus();
    struct gs_quick_opts o = opts_of("--no-header");
    char *t;
    (void)state;

    gs_gpu_set(&s->gpus[1], GS_M_THROTTLE_ACTIVE,
               (double)(GS_THR_GPU_IDLE | GS_THR_SW_POWER_CAP | GS_THR_HW_THERMAL));
    t = render(s, &o, 0, 0);
    assert_non_null(strstr(line_of(t, 1), "|     0 / 81559 MB |"));
    assert_non_null(strstr(line_of(t, 1), "   5 % \xe2\x9a\xa0 power cap, HW thermal |"));
    assert_null(strstr(t, "idle"));
    /* GPU 0 has no throttle text but its columns line up with GPU 1's. */
    assert_int_equal(column_of(line_of(t, 0), "|", 1), column_of(line_of(t, 1), "|", 1));
    assert_int_equal(column_of(line_of(t, 0), "|", 2), column_of(line_of(t, 1), "|", 2));
    free(t);
    gs_snapshot_free(s);
}

static void text_many_processes_wrap(void **state)
{
    struct gs_snapshot *s = two_gpus();
    struct gs_quick_opts o = opts_of("--no-header");
    char *t, name[32];
    (void)state;

    for (unsigned i = 0; i < 60; i++) {
        snprintf(name, sizeof name, "worker%u", i);
        add_proc(s, 1, 20000 + i, name, "bob", (double)(i + 1) * 512 * MIB);
    }
    t = render(s, &o, 0, 0);
    assert_int_equal(count_lines(t), 2); /* no width: one line per GPU */
    free(t);

    t = render(s, &o, 100, 1);
    for (int k = 0; k < count_lines(t); k++) {
        const char *l = line_of(t, k);
        assert_true(gs_term_width(l, strlen(l)) <= 100);
    }
    assert_true(count_lines(t) > 5);
    for (unsigned i = 0; i < 60; i++) {
        char pid[16];
        snprintf(pid, sizeof pid, "/%u", 20000 + i);
        assert_non_null(strstr(t, pid));
    }
    /* Largest memory first. */
    assert_true(strstr(t, "/20059(") < strstr(t, "/20000("));
    /* Continuation lines start at the process column. */
    {
        size_t col = column_of(line_of(t, 1), "|", 2) + 2;
        const char *l = line_of(t, 2);
        size_t sp = strspn(l, " ");
        assert_int_equal(sp, col);
    }
    free(t);
    gs_snapshot_free(s);
}

static void text_long_names_aligned(void **state)
{
    struct gs_snapshot *s = two_gpus();
    struct gs_quick_opts o = opts_of("--no-header");
    char *t;
    (void)state;

    set_text(&s->gpus[0], GS_T_NAME,
             "NVIDIA Some Extremely Long Engineering Sample Board Name That Goes On And On");
    set_text(&s->gpus[1], GS_T_NAME, "GPU");
    t = render(s, &o, 0, 0);
    assert_non_null(strstr(line_of(t, 0), "\xe2\x80\xa6 |")); /* cut with an ellipsis */
    assert_int_equal(column_of(line_of(t, 0), "|", 0), 4 + GS_QUICK_NAME_MAX + 1);
    assert_int_equal(column_of(line_of(t, 0), "|", 0), column_of(line_of(t, 1), "|", 0));
    assert_int_equal(column_of(line_of(t, 0), "|", 1), column_of(line_of(t, 1), "|", 1));
    free(t);
    gs_snapshot_free(s);
}

static void text_index_width_aligned(void **state)
{
    struct gs_snapshot *s = NULL;
    struct gs_quick_opts o = opts_of("--no-header");
    char *t;
    (void)state;

    assert_int_equal(gs_snapshot_new(&s, 11, 0, NULL), GS_OK);
    for (unsigned i = 0; i < 11; i++)
        h100(&s->gpus[i], i, 40, 0.5, 10);
    t = render(s, &o, 0, 0);
    assert_int_equal(count_lines(t), 11);
    assert_int_equal(column_of(line_of(t, 0), "|", 0), column_of(line_of(t, 10), "|", 0));
    assert_true(strncmp(line_of(t, 0), "[0]  NVIDIA", 11) == 0);
    free(t);
    gs_snapshot_free(s);
}

static void text_color_and_no_color(void **state)
{
    struct gs_snapshot *s = two_gpus();
    struct gs_quick_opts o = opts_of("-a");
    char *t;
    (void)state;

    t = render(s, &o, 0, 0);
    assert_null(strchr(t, '\x1b'));
    free(t);
    t = render(s, &o, 0, 1);
    assert_non_null(strstr(t, "\x1b[31m 45\xc2\xb0"));
    assert_non_null(strstr(t, "\x1b[1;32m 82 %")); /* busy: bold green */
    assert_non_null(strstr(t, "\x1b[32m  5 %"));   /* idle: green */
    assert_non_null(strstr(t, "\x1b[0m"));
    free(t);
    gs_snapshot_free(s);
}

static void text_no_processes(void **state)
{
    struct gs_snapshot *s = two_gpus();
    struct gs_quick_opts o = opts_of("--no-header --no-processes");
    char *t;
    (void)state;

    t = render(s, &o, 0, 0);
    assert_string_equal(line_of(t, 0), "[0] NVIDIA H100 80GB HBM3 | 45\xc2\xb0"
                                       "C,  82 % | 32120 / 81559 MB");
    assert_null(strstr(t, "python"));
    free(t);
    gs_snapshot_free(s);
}

static void text_process_parts(void **state)
{
    struct gs_snapshot *s = two_gpus();
    struct gs_quick_opts o;
    struct gs_proc *p;
    char *t;
    (void)state;

    p = add_proc(s, 1, 777, "torchrun", "carol", 512 * MIB);
    snprintf(p->container_id, sizeof p->container_id, "3f2a1b9c4d5e6f7a8b9c0d1e2f3a4b5c");
    p->job_kind = GS_JOB_DOCKER;
    snprintf(p->pod_uid, sizeof p->pod_uid, "1a2b3c4d-0000-1111-2222-333344445555");
    snprintf(p->slurm_job, sizeof p->slurm_job, "4242");

    o = opts_of("--no-header -u");
    t = render(s, &o, 0, 0);
    assert_non_null(strstr(t, "| alice(30.1G)\n"));
    free(t);
    o = opts_of("--no-header -c");
    t = render(s, &o, 0, 0);
    assert_non_null(strstr(t, "| python(30.1G)\n"));
    free(t);
    o = opts_of("--no-header -p");
    t = render(s, &o, 0, 0);
    assert_non_null(strstr(t, "| 12345(30.1G)\n"));
    free(t);
    o = opts_of("--no-header -cu");
    t = render(s, &o, 0, 0);
    assert_non_null(strstr(t, "| python(alice 30.1G)\n"));
    free(t);
    o = opts_of("--no-header --show-container");
    t = render(s, &o, 0, 0);
    assert_non_null(
        strstr(t, "torchrun/777(carol 512M docker:3f2a1b9c4d5e pod:1a2b3c4d slurm:4242)"));
    free(t);
    /* the node names the pod (/var/log/pods): namespace/name instead of the UID */
    snprintf(p->pod_name, sizeof p->pod_name, "trainer-0");
    snprintf(p->pod_namespace, sizeof p->pod_namespace, "ml-team");
    t = render(s, &o, 0, 0);
    assert_non_null(strstr(t, "docker:3f2a1b9c4d5e pod:ml-team/trainer-0 slurm:4242)"));
    free(t);
    p->pod_name[0] = p->pod_namespace[0] = '\0';
    o = opts_of("--no-header -f");
    t = render(s, &o, 0, 0);
    assert_non_null(strstr(t, "\n \xe2\x94\x94\xe2\x94\x80   12345 (  98%,   2.1G) alice: "
                              "python train.py --lr 1e-4\n"));
    free(t);
    gs_snapshot_free(s);
}

static void text_show_all(void **state)
{
    struct gs_snapshot *s = two_gpus();
    struct gs_quick_opts o = opts_of("--no-header -a");
    char *t;
    (void)state;

    gs_gpu_set(&s->gpus[0], GS_M_PCIE_TX, 1.26e9);
    gs_gpu_set(&s->gpus[0], GS_M_PCIE_RX, 350e6);
    t = render(s, &o, 0, 0);
    assert_non_null(strstr(line_of(t, 0), "| P0  1980 / 2619 MHz  Gen5 x16  tx 1.3 GB/s rx 350 "
                                          "MB/s |"));
    assert_non_null(strstr(line_of(t, 0), ",  512 /  700 W"));
    assert_non_null(strstr(line_of(t, 0), "fan  30 %"));
    assert_non_null(strstr(t, "python train.py"));
    free(t);
    gs_snapshot_free(s);
}

/* -a: a PCIe link below its maximum says the maximum; the ECC counters (volatile corrected /
 * uncorrected), the last Xid and a pending row remap are shown, as the dashboard's health;
 * unknown counters print nothing; the narrow layout's line below carries the same. */
static void text_show_all_health(void **state)
{
    struct gs_snapshot *s = two_gpus();
    struct gs_quick_opts o = opts_of("--no-header -a --no-processes");
    char *t;
    (void)state;

    gs_gpu_set(&s->gpus[0], GS_M_PCIE_GEN_MAX, 5);
    gs_gpu_set(&s->gpus[0], GS_M_PCIE_WIDTH_MAX, 16);
    gs_gpu_set(&s->gpus[0], GS_M_PCIE_WIDTH, 8);
    gs_gpu_set(&s->gpus[0], GS_M_ECC_CORR_VOL, 3);
    gs_gpu_set(&s->gpus[0], GS_M_ECC_UNCORR_VOL, 1);
    gs_gpu_set(&s->gpus[0], GS_M_XID_LAST, 79);
    gs_gpu_set(&s->gpus[0], GS_M_REMAP_PENDING, 1);
    gs_gpu_set(&s->gpus[1], GS_M_PCIE_GEN_MAX, 5);
    gs_gpu_set(&s->gpus[1], GS_M_PCIE_WIDTH_MAX, 16);
    gs_gpu_set(&s->gpus[1], GS_M_ECC_CORR_VOL, 0);
    gs_gpu_set(&s->gpus[1], GS_M_ECC_UNCORR_VOL, 0);
    gs_gpu_set(&s->gpus[1], GS_M_XID_LAST, 0);
    t = render(s, &o, 0, 0);
    assert_non_null(strstr(line_of(t, 0), "MHz  Gen5 x8 (max Gen5 x16)  ECC 3/1  Xid 79  row "
                                          "remap pending"));
    assert_non_null(strstr(line_of(t, 1), "MHz  Gen5 x16  ECC 0/0"));
    assert_null(strstr(line_of(t, 1), "Xid"));
    assert_null(strstr(line_of(t, 1), "max Gen"));
    free(t);
    t = render(s, &o, 80, 0);
    assert_non_null(strstr(t, "Gen5 x8 (max Gen5 x16)  ECC 3/1  Xid 79"));
    free(t);
    gs_snapshot_free(s);
}

/* -a: an NVLink line under a GPU with links, its "|" under the GPU line's first; a link down
 * and counted errors are said; a GPU without NVLink (GPU 1) gets no line; no -a, no line. */
static void text_nvlink_line(void **state)
{
    struct gs_snapshot *s = two_gpus();
    struct gs_quick_opts o = opts_of("--no-header -a --no-processes");
    struct gs_quick_opts plain = opts_of("--no-header --no-processes");
    struct gs_gpu *g = &s->gpus[0];
    char *t;
    (void)state;

    g->n_nvlink = 18;
    gs_gpu_set(g, GS_M_NVLINK_LINKS, 18);
    gs_gpu_set(g, GS_M_NVLINK_LINKS_ACTIVE, 17);
    gs_gpu_set(g, GS_M_NVLINK_SPEED, 26562e6);
    gs_gpu_set(g, GS_M_NVLINK_TX, 39.4e9);
    gs_gpu_set(g, GS_M_NVLINK_RX, 350e6);
    gs_gpu_set(g, GS_M_NVLINK_REPLAY, 41);
    gs_gpu_set(g, GS_M_NVLINK_RECOVERY, 1);
    gs_gpu_set(g, GS_M_NVLINK_CRC_FLIT, 118);
    gs_gpu_set(g, GS_M_NVLINK_CRC_DATA, 3);
    t = render(s, &o, 0, 0);
    assert_int_equal(count_lines(t), 3);
    assert_non_null(strstr(line_of(t, 1), "NVLink"));
    assert_non_null(strstr(line_of(t, 1), "| 17/18 links up, 26.6 GB/s each | tx  39.4 GB/s rx "
                                          "  350 MB/s | errors replay 41, recovery 1, CRC 121"));
    assert_int_equal(column_of(line_of(t, 1), "|", 0), column_of(line_of(t, 0), "|", 0));
    assert_null(strstr(line_of(t, 2), "NVLink"));
    free(t);
    /* no rate yet, errors all 0 */
    g->st[GS_M_NVLINK_TX] = g->st[GS_M_NVLINK_RX] = GS_ST_NA;
    gs_gpu_set(g, GS_M_NVLINK_LINKS_ACTIVE, 18);
    gs_gpu_set(g, GS_M_NVLINK_REPLAY, 0);
    gs_gpu_set(g, GS_M_NVLINK_RECOVERY, 0);
    gs_gpu_set(g, GS_M_NVLINK_CRC_FLIT, 0);
    gs_gpu_set(g, GS_M_NVLINK_CRC_DATA, 0);
    t = render(s, &o, 0, 0);
    assert_non_null(strstr(line_of(t, 1), "| 18/18 links up, 26.6 GB/s each | tx        N/A rx "
                                          "       N/A | errors 0"));
    free(t);
    t = render(s, &plain, 0, 0);
    assert_null(strstr(t, "NVLink"));
    free(t);
    gs_snapshot_free(s);
}

static void text_mig_devices(void **state)
{
    struct gs_snapshot *s = two_gpus();
    struct gs_quick_opts o = opts_of("--no-header");
    struct gs_gpu *g = &s->gpus[1];
    struct gs_proc *p;
    char *t;
    (void)state;

    set_text(g, GS_T_NAME, "NVIDIA A100-SXM4-80GB");
    g->n_mig = 2;
    for (unsigned m = 0; m < 2; m++) {
        g->mig[m].index = m;
        g->mig[m].gi_id = m + 1;
        g->mig[m].ci_id = 0;
        snprintf(g->mig[m].name, sizeof g->mig[m].name, "NVIDIA A100-SXM4-80GB MIG %s",
                 m ? "4g.40gb" : "3g.40gb");
        g->mig[m].mem_st = GS_ST_OK;
        g->mig[m].mem_total_bytes = (uint64_t)(40192 * MIB);
        g->mig[m].mem_used_bytes = (uint64_t)(m ? 0 : 10240 * MIB);
    }
    p = add_proc(s, 1, 4321, "vllm", "dave", 10000 * MIB);
    p->gi_id = 1;
    p->ci_id = 0;
    t = render(s, &o, 0, 0);
    assert_int_equal(count_lines(t), 4);
    assert_null(strstr(line_of(t, 1), "vllm"));
    assert_non_null(strstr(line_of(t, 2), "\xe2\x94\x9c\xe2\x94\x80 MIG 3g.40gb  (gi 1, ci 0)"));
    assert_non_null(strstr(line_of(t, 2), "| 10240 / 40192 MB | vllm/4321(dave 9.8G)"));
    assert_non_null(strstr(line_of(t, 3), "\xe2\x94\x94\xe2\x94\x80 MIG 4g.40gb"));
    /* MIG memory sits under the GPU memory column. */
    assert_int_equal(column_of(line_of(t, 2), "|", 0), column_of(line_of(t, 1), "|", 1));
    free(t);
    gs_snapshot_free(s);
}

/* A GPU in MIG mode: utilization "MIG" (NVML has none), not N/A; with -a each MIG line adds
 * the instance's SM count and graphics activity (N/A when absent), columns still aligned. */
static void text_mig_mode_all(void **state)
{
    struct gs_snapshot *s = two_gpus();
    struct gs_quick_opts o = opts_of("--no-header");
    struct gs_gpu *g = &s->gpus[1];
    char *t;
    (void)state;

    set_text(g, GS_T_NAME, "NVIDIA H100 80GB HBM3");
    g->st[GS_M_UTIL_GPU] = GS_ST_NA;
    gs_gpu_set(g, GS_M_MIG_MODE, 1);
    g->n_mig = 2;
    for (unsigned m = 0; m < 2; m++) {
        g->mig[m].index = m;
        g->mig[m].gi_id = m ? 9 : 2;
        snprintf(g->mig[m].name, sizeof g->mig[m].name, "NVIDIA H100 80GB HBM3 MIG %s",
                 m ? "1g.10gb" : "3g.40gb");
        g->mig[m].mem_st = GS_ST_OK;
        g->mig[m].mem_total_bytes = (uint64_t)(9984 * MIB);
    }
    g->mig[0].attr_st = GS_ST_OK;
    g->mig[0].sm_count = 60;
    g->mig[0].gpm_st[GS_MIG_GPM_GR_ACTIVE] = GS_ST_OK;
    g->mig[0].gpm[GS_MIG_GPM_GR_ACTIVE] = 0.99;
    t = render(s, &o, 0, 0);
    assert_non_null(strstr(line_of(t, 1), ",   MIG |"));
    assert_null(strstr(line_of(t, 0), "MIG")); /* the other GPU is whole */
    free(t);
    o = opts_of("--no-header -a");
    t = render(s, &o, 0, 0);
    assert_non_null(strstr(t, "3g.40gb  (gi 2, ci 0)"));
    assert_non_null(strstr(t, "|     0 /  9984 MB |  60 SMs, gr  99 % |"));
    assert_non_null(strstr(t, "|     0 /  9984 MB |     N/A, gr   N/A |"));
    free(t);
    gs_snapshot_free(s);
}

static void text_hostile_process_name(void **state)
{
    struct gs_snapshot *s = two_gpus();
    struct gs_quick_opts o = opts_of("--no-header -a");
    char *t;
    (void)state;

    add_proc(s, 1, 666, "evil\x1b]0;pwned\x07", "mallory", MIB);
    snprintf(s->procs[1].cmdline, sizeof s->procs[1].cmdline, "x\x1b[2Jy");
    t = render(s, &o, 0, 0);
    assert_null(strchr(t, '\x1b'));
    assert_non_null(strstr(t, "evil?]0;pwned?/666"));
    free(t);
    gs_snapshot_free(s);
}

static void text_id_filter(void **state)
{
    struct gs_snapshot *s = two_gpus();
    struct gs_quick_opts o;
    struct gs_err err;
    char *t;
    char *argv[] = {"gpuscope", "--id", "GPU-00000001-1111-2222-3333-444444444444", NULL};
    char *argv2[] = {"gpuscope", "--id=18:00.0,0", NULL};
    char *argv3[] = {"gpuscope", "--id", "7", NULL};
    (void)state;

    assert_int_equal(gs_quick_parse(&o, 3, argv, &err), GS_OK);
    assert_int_equal(gs_quick_check_ids(&o, s, &err), GS_OK);
    t = render(s, &o, 0, 0);
    assert_int_equal(count_lines(t), 2);
    assert_non_null(strstr(t, "[1] NVIDIA"));
    free(t);

    assert_int_equal(gs_quick_parse(&o, 2, argv2, &err), GS_OK);
    assert_int_equal(o.n_ids, 2);
    assert_true(gs_quick_selected(&o, &s->gpus[0]));
    assert_true(gs_quick_selected(&o, &s->gpus[1])); /* bus 0x18 is GPU 1 */

    assert_int_equal(gs_quick_parse(&o, 3, argv3, &err), GS_OK);
    assert_int_equal(gs_quick_check_ids(&o, s, &err), GS_ENOGPU);
    assert_non_null(strstr(err.msg, "index 7"));
    gs_snapshot_free(s);
}

static void fmt_mem_units(void **state)
{
    char b[32];
    (void)state;

    gs_quick_fmt_mem(b, sizeof b, 512 * MIB);
    assert_string_equal(b, "512M");
    gs_quick_fmt_mem(b, sizeof b, 30.1 * GIB);
    assert_string_equal(b, "30.1G");
    gs_quick_fmt_mem(b, sizeof b, 141.0 * GIB);
    assert_string_equal(b, "141G");
    gs_quick_fmt_mem(b, sizeof b, 0);
    assert_string_equal(b, "0M");
}

/* The integers are written without printf (a one-shot check's cost): the same text as "%.0fM" /
 * "%.0fG" for ties (to even), values next to them, the unit boundaries, huge and odd values. */
static void fmt_mem_as_printf(void **state)
{
    static const double mib[] = {0.5,        1.5,         2.5,      0.49999999, 1023.5,    1023.4,
                                 1024.0,     102399.0,    102400.0, 102911.999, 102912.0,  103424.0,
                                 3.0e9,      4.5036e15,   1.0e300,  -1.0,       -0.4,      7.0,
                                 999.999999, 1000.000001, 65536.49, 1.0e-300,   4194303.5, 0.0};
    char b[32], want[32]; /* 1e300 MiB: both cut at 31 characters */
    (void)state;

    for (size_t i = 0; i < sizeof mib / sizeof mib[0]; i++) {
        double m = mib[i];
        if (m >= 1024.0 && m < 100 * 1024.0)
            snprintf(want, sizeof want, "%.1fG", m / 1024.0);
        else if (m >= 1024.0)
            snprintf(want, sizeof want, "%.0fG", m / 1024.0);
        else
            snprintf(want, sizeof want, "%.0fM", m);
        gs_quick_fmt_mem(b, sizeof b, m * MIB);
        assert_string_equal(b, want);
    }
    gs_quick_fmt_mem(b, 3, 512 * MIB); /* cut as snprintf cuts */
    assert_string_equal(b, "51");
    gs_quick_fmt_mem(b, 1, 512 * MIB);
    assert_string_equal(b, "");
}

/* ---- JSON ---- */

static json_t *to_json(const struct gs_snapshot *s, const struct gs_quick_opts *o)
{
    json_t *doc = NULL;
    struct gs_err err;
    char *text;
    json_error_t jerr;

    assert_int_equal(gs_quick_json(&doc, s, o, &err), GS_OK);
    /* It must survive a round trip through text. */
    text = json_dumps(doc, JSON_COMPACT);
    assert_non_null(text);
    json_decref(doc);
    doc = json_loads(text, 0, &jerr);
    free(text);
    assert_non_null(doc);
    return doc;
}

static void json_shape(void **state)
{
    struct gs_snapshot *s = two_gpus();
    struct gs_quick_opts o = opts_of("--json");
    json_t *doc, *g0, *g1, *p;
    (void)state;

    s->gpus[1].st[GS_M_TEMP_GPU] = GS_ST_NA;
    s->gpus[1].st[GS_M_POWER_DRAW] = GS_ST_NOPERM;
    s->procs[0].container_id[0] = 'a';
    s->procs[0].job_kind = GS_JOB_PODMAN;
    doc = to_json(s, &o);
    assert_string_equal(json_string_value(json_object_get(doc, "hostname")), "node1");
    assert_string_equal(json_string_value(json_object_get(doc, "query_time")),
                        "2025-01-14T10:22:03.250+00:00");
    assert_string_equal(json_string_value(json_object_get(doc, "driver_version")), "590.48.01");
    assert_string_equal(json_string_value(json_object_get(doc, "cuda_version")), "13.1");
    assert_true(json_is_null(json_object_get(doc, "nvml_version")));
    assert_int_equal(json_array_size(json_object_get(doc, "gpus")), 2);
    g0 = json_array_get(json_object_get(doc, "gpus"), 0);
    g1 = json_array_get(json_object_get(doc, "gpus"), 1);
    assert_int_equal(json_integer_value(json_object_get(g0, "index")), 0);
    assert_string_equal(json_string_value(json_object_get(g0, "name")), "NVIDIA H100 80GB HBM3");
    assert_true(json_is_false(json_object_get(g0, "lost")));
    assert_int_equal(json_integer_value(json_object_get(g0, "temperature_gpu")), 45);
    assert_true(json_is_real(json_object_get(g0, "utilization_gpu")));
    assert_true(json_real_value(json_object_get(g0, "utilization_gpu")) == 0.82);
    assert_int_equal(json_integer_value(json_object_get(g0, "memory_used")),
                     (json_int_t)(32120 * MIB));
    assert_int_equal(json_integer_value(json_object_get(g0, "clock_sm")), 1980000000);
    assert_true(json_real_value(json_object_get(g0, "power_draw")) == 512.4);
    assert_true(json_is_null(json_object_get(g0, "serial")));
    assert_true(json_is_null(json_object_get(g0, "ecc_errors_by_location")));
    /* every metric of the model has a key */
    for (int m = 0; m < GS_M__COUNT; m++)
        assert_non_null(json_object_get(g0, gs_metric_name((enum gs_metric)m)));
    assert_string_equal(
        json_string_value(json_array_get(json_object_get(g0, "clocks_event_reasons"), 0)), "idle");
    /* absent → null, never 0; a failure names its reason */
    assert_true(json_is_null(json_object_get(g1, "temperature_gpu")));
    assert_true(json_is_null(json_object_get(g1, "power_draw")));
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(g1, "unavailable"), "power_draw")),
        "no_permission");
    assert_null(json_object_get(json_object_get(g1, "unavailable"), "temperature_gpu"));
    assert_int_equal(json_array_size(json_object_get(g1, "processes")), 0);
    assert_int_equal(json_array_size(json_object_get(g0, "processes")), 1);
    p = json_array_get(json_object_get(g0, "processes"), 0);
    assert_int_equal(json_integer_value(json_object_get(p, "pid")), 12345);
    assert_string_equal(json_string_value(json_object_get(p, "user")), "alice");
    assert_string_equal(json_string_value(json_object_get(p, "name")), "python");
    assert_string_equal(json_string_value(json_object_get(p, "command")),
                        "python train.py --lr 1e-4");
    assert_int_equal(json_integer_value(json_object_get(p, "gpu_memory")),
                     (json_int_t)(30.1 * GIB));
    assert_true(json_is_null(json_object_get(p, "gi_id")));
    assert_true(json_is_null(json_object_get(p, "utilization_sm")));
    assert_true(json_is_null(json_object_get(p, "pod_uid")));
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(p, "container"), "runtime")), "podman");
    assert_string_equal(json_string_value(json_array_get(json_object_get(p, "type"), 0)),
                        "compute");
    json_decref(doc);
    gs_snapshot_free(s);
}

static void json_lost_and_filters(void **state)
{
    struct gs_snapshot *s = two_gpus();
    struct gs_quick_opts o = opts_of("--json --no-processes --id 1");
    json_t *doc, *g;
    (void)state;

    s->gpus[1].lost = 1;
    memset(s->gpus[1].st, GS_ST_LOST, sizeof s->gpus[1].st);
    doc = to_json(s, &o);
    assert_int_equal(json_array_size(json_object_get(doc, "gpus")), 1);
    g = json_array_get(json_object_get(doc, "gpus"), 0);
    assert_true(json_is_true(json_object_get(g, "lost")));
    assert_true(json_is_null(json_object_get(g, "memory_used")));
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(g, "unavailable"), "memory_used")),
        "gpu_lost");
    assert_null(json_object_get(g, "processes"));
    json_decref(doc);
    gs_snapshot_free(s);
}

static void json_bad_utf8_survives(void **state)
{
    struct gs_snapshot *s = two_gpus();
    struct gs_quick_opts o = opts_of("--json");
    json_t *doc, *p;
    (void)state;

    snprintf(s->procs[0].cmdline, sizeof s->procs[0].cmdline, "caf\xe9 \xc3\xa9t\xc3\xa9");
    doc = to_json(s, &o);
    p = json_array_get(
        json_object_get(json_array_get(json_object_get(doc, "gpus"), 0), "processes"), 0);
    assert_string_equal(json_string_value(json_object_get(p, "command")), "caf? \xc3\xa9t\xc3\xa9");
    json_decref(doc);
    gs_snapshot_free(s);
}

/* ---- options ---- */

static int parse_rc(const char *a1, const char *a2, struct gs_err *err)
{
    struct gs_quick_opts o;
    char *argv[] = {"gpuscope", (char *)a1, (char *)a2, NULL};
    int argc = a2 ? 3 : a1 ? 2 : 1;

    gs_err_clear(err);
    return gs_quick_parse(&o, argc, argv, err);
}

static void opts_good(void **state)
{
    struct gs_quick_opts o;
    (void)state;

    o = opts_of("");
    assert_true(o.interval_s == 0);
    assert_int_equal(o.show, 0);
    assert_int_equal(o.color, GS_COLOR_AUTO);
    o = opts_of("-i");
    assert_true(o.interval_s == 1.0);
    o = opts_of("-i 0.2 --json");
    assert_true(o.interval_s == 0.2);
    assert_int_equal(o.json, 1);
    o = opts_of("-i2.5");
    assert_true(o.interval_s == 2.5);
    o = opts_of("--interval=60");
    assert_true(o.interval_s == 60);
    o = opts_of("--watch 3 -cup");
    assert_true(o.interval_s == 3);
    assert_int_equal(o.show, GS_QS_CMD | GS_QS_USER | GS_QS_PID);
    o = opts_of("-a");
    assert_int_equal(o.show, GS_QS_ALL);
    o = opts_of("-PFe -f --show-container");
    assert_int_equal(o.show,
                     GS_QS_POWER | GS_QS_FAN | GS_QS_CODEC | GS_QS_FULL_CMD | GS_QS_CONTAINER);
    o = opts_of("--color --no-color");
    assert_int_equal(o.color, GS_COLOR_NEVER);
    o = opts_of("--no-color --color");
    assert_int_equal(o.color, GS_COLOR_ALWAYS);
    o = opts_of("-h");
    assert_int_equal(o.help, 1);
    o = opts_of("--id 0,GPU-abc,0000:17:00.0");
    assert_int_equal(o.n_ids, 3);
    assert_int_equal(o.ids[0].kind, GS_QID_INDEX);
    assert_int_equal(o.ids[1].kind, GS_QID_UUID);
    assert_int_equal(o.ids[2].kind, GS_QID_BUS);
    assert_int_equal(o.ids[2].bus, 0x17);
}

static void opts_bad(void **state)
{
    struct gs_err err;
    (void)state;

    assert_int_equal(parse_rc("-i", "0.01", &err), GS_EUSAGE);
    assert_non_null(strstr(err.msg, "out of range"));
    assert_int_equal(parse_rc("--interval", "61", &err), GS_EUSAGE);
    assert_int_equal(parse_rc("--interval=abc", NULL, &err), GS_EUSAGE);
    assert_non_null(strstr(err.msg, "not a number"));
    assert_int_equal(parse_rc("-i", "nan", &err), GS_EUSAGE);
    assert_int_equal(parse_rc("-i", "-1", &err), GS_EUSAGE);
    assert_int_equal(parse_rc("--bogus", NULL, &err), GS_EUSAGE);
    assert_string_equal(err.msg, "gpuscope: unknown option '--bogus' (see gpuscope --help)");
    assert_int_equal(parse_rc("-x", NULL, &err), GS_EUSAGE);
    assert_non_null(strstr(err.msg, "'-x'"));
    assert_int_equal(parse_rc("-cz", NULL, &err), GS_EUSAGE);
    assert_int_equal(parse_rc("--json=yes", NULL, &err), GS_EUSAGE);
    assert_int_equal(parse_rc("--id", NULL, &err), GS_EUSAGE);
    assert_int_equal(parse_rc("--id", "zebra", &err), GS_EUSAGE);
    assert_int_equal(parse_rc("--id", "0,,1", &err), GS_EUSAGE);
    /* bus ids: hex digits only, and a number too large is an error, not a wrap to 0 */
    assert_int_equal(parse_rc("--id", "100000000:17:00.0", &err), GS_EUSAGE);
    assert_int_equal(parse_rc("--id", "-1:17:00.0", &err), GS_EUSAGE);
    assert_int_equal(parse_rc("--id", " 17:00.0", &err), GS_EUSAGE);
    assert_int_equal(parse_rc("--id", "0x17:00.0", &err), GS_EUSAGE);
    assert_int_equal(parse_rc("--id", "17:00.0:", &err), GS_EUSAGE);
    assert_int_equal(parse_rc("--id", "FFFFFFFF:ff:1F.7", &err), GS_OK);
    assert_int_equal(parse_rc("stray", NULL, &err), GS_EUSAGE);
    assert_int_equal(parse_rc("--", "stray", &err), GS_EUSAGE);
    assert_int_equal(gs_rc_exit_code(GS_EUSAGE), 2);
}

static void usage_lists_every_option(void **state)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    static const char *const want[] = {
        "--interval",   "--json",           "--color",    "--no-color",   "--show-all",
        "--show-cmd",   "--show-user",      "--show-pid", "--show-power", "--show-fan",
        "--show-codec", "--show-container", "--id",       "--help",       "--version"};
    (void)state;

    assert_non_null(f);
    gs_quick_usage(f);
    fclose(f);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        assert_non_null(strstr(buf, want[i]));
    assert_null(strstr(buf, "--watch")); /* an alias, not documented twice */
    free(buf);
}

static void watch_ticks_stay_on_grid(void **state)
{
    const int64_t s = 1000000000;
    (void)state;

    /* on time: the next grid point */
    assert_true(gs_clock_next_tick(0, s / 10, s, NULL) == s);
    /* exactly on a tick counts as late: never fire twice at the same instant */
    assert_true(gs_clock_next_tick(0, s, s, NULL) == 2 * s);
    /* a 3.5 s stall skips the missed ticks, stays on the grid */
    assert_true(gs_clock_next_tick(0, 3 * s + s / 2, s, NULL) == 4 * s);
    /* 0.2 s steps from an arbitrary origin */
    assert_true(gs_clock_next_tick(7 * s + 13, 7 * s + 13 + s / 10, s / 5, NULL) ==
                7 * s + 13 + s / 5);
}

/* ---- terminal helpers ---- */

static void term_width_and_clip(void **state)
{
    const char *s = "\x1b[31m45\xc2\xb0"
                    "C\x1b[0m ab";
    (void)state;

    assert_int_equal(gs_term_width(s, strlen(s)), 7);
    assert_int_equal(gs_term_clip(s, strlen(s), 3), strlen("\x1b[31m45\xc2\xb0"));
    /* escapes right after the cut are kept, so the reset survives */
    assert_int_equal(gs_term_clip(s, strlen(s), 4), strlen("\x1b[31m45\xc2\xb0"
                                                           "C\x1b[0m"));
    assert_int_equal(gs_term_clip(s, strlen(s), 100), strlen(s));
}

/* A cell of outside text: escapes and control bytes shown as '?', clipped, padded. */
static void term_cell(void **state)
{
    struct gs_tbuf b;
    char out[64];
    FILE *f;
    (void)state;

    gs_tbuf_init(&b, 1);
    gs_tbuf_cell(&b, "a\x1b[2Jb\n\x7f", 10, 10);
    assert_string_equal(gs_tbuf_str(&b), "a?[2Jb??  ");
    gs_tbuf_reset(&b);
    gs_tbuf_cell(&b, "r\xc3\xa9sum\xc3\xa9-long-name", 6, 8);
    assert_string_equal(gs_tbuf_str(&b), "r\xc3\xa9sum\xc3\xa9  ");
    gs_tbuf_reset(&b);
    gs_tbuf_cell(&b, NULL, 4, 3);
    assert_string_equal(gs_tbuf_str(&b), "   ");
    gs_tbuf_free(&b);

    f = fmemopen(out, sizeof out, "w");
    assert_non_null(f);
    gs_term_put_cell(f, "x\ty", 2, 4);
    fclose(f);
    assert_string_equal(out, "x?  ");
}

static void term_redraw_in_place(void **state)
{
    struct gs_tbuf b;
    const char *frame = "header\nabcdefghij\nxy\n", *frame2;
    (void)state;

    gs_tbuf_init(&b, 0);
    gs_term_redraw(&b, frame, strlen(frame), 5, 0); /* a cut line says so with '>' */
    assert_string_equal(gs_tbuf_str(&b), "\x1b[H"
                                         "head>\n"
                                         "abcd>\n"
                                         "xy\x1b[K\n"
                                         "\x1b[J");
    gs_tbuf_reset(&b);
    gs_term_redraw(&b, frame, strlen(frame), 0, 3); /* 3 rows: 2 lines and the cursor */
    assert_string_equal(gs_tbuf_str(&b), "\x1b[H"
                                         "header\x1b[K\n"
                                         "... 2 more lines: the terminal is too short\x1b[K\n"
                                         "\x1b[J");
    gs_tbuf_reset(&b);
    frame2 = "hdr\n[0] a\n x\n\x1b[36m[1]\x1b[0m b\n y\n[2] c\n";
    gs_term_redraw(&b, frame2, strlen(frame2), 0, 3);
    assert_string_equal(gs_tbuf_str(&b), "\x1b[H" /* the GPUs left out are named */
                                         "hdr\x1b[K\n"
                                         "... 5 more lines, GPUs 0-2: the terminal is too short"
                                         "\x1b[K\n"
                                         "\x1b[J");
    gs_tbuf_reset(&b);
    frame2 = "hdr\n[0] a\n[3] b\n[1] c\n";
    gs_term_redraw(&b, frame2, strlen(frame2), 0, 3);
    assert_non_null(strstr(gs_tbuf_str(&b), "... 3 more lines, 3 GPUs: "));
    gs_tbuf_reset(&b);
    frame2 = "hdr\n[0] a\n x\n    [1 process of other users, 1G]\n[7] b\n";
    gs_term_redraw(&b, frame2, strlen(frame2), 0, 4); /* an indented "[1 ..." is no GPU */
    assert_non_null(strstr(gs_tbuf_str(&b), "... 3 more lines, GPU 7: "));
    gs_tbuf_reset(&b);
    gs_term_redraw(&b, frame, strlen(frame), 0, 4); /* everything fits: no note */
    assert_string_equal(gs_tbuf_str(&b), "\x1b[H"
                                         "header\x1b[K\n"
                                         "abcdefghij\x1b[K\n"
                                         "xy\x1b[K\n"
                                         "\x1b[J");
    gs_tbuf_free(&b);
}

static void term_color_decision(void **state)
{
    (void)state;

    assert_int_equal(gs_term_use_color(GS_COLOR_ALWAYS, -1), 1);
    assert_int_equal(gs_term_use_color(GS_COLOR_NEVER, 0), 0);
    setenv("NO_COLOR", "1", 1);
    assert_int_equal(gs_term_use_color(GS_COLOR_AUTO, 0), 0);
    assert_int_equal(gs_term_use_color(GS_COLOR_ALWAYS, 0), 1);
    unsetenv("NO_COLOR");
    /* not a terminal: no colour */
    assert_int_equal(gs_term_use_color(GS_COLOR_AUTO, -1), 0);
}

static void tbuf_sticky_and_plain(void **state)
{
    struct gs_tbuf b;
    (void)state;

    gs_tbuf_init(&b, 0);
    assert_string_equal(gs_tbuf_str(&b), "");
    gs_tbuf_color(&b, GS_SGR_RED, "x");
    gs_tbuf_printf(&b, "%d", 42);
    assert_string_equal(gs_tbuf_str(&b), "x42");
    gs_tbuf_put(&b, "y", GS_TBUF_MAX); /* too big: sticky failure */
    assert_int_equal(gs_tbuf_status(&b), GS_ENOMEM);
    gs_tbuf_puts(&b, "z");
    assert_string_equal(gs_tbuf_str(&b), "x42");
    gs_tbuf_reset(&b);
    assert_int_equal(gs_tbuf_status(&b), GS_OK);
    gs_tbuf_free(&b);
}

/* -a at 80 columns: the narrow layout, no line wider than the terminal, every reading still
 * there (shorter), the clocks and throttle reasons on a line below, and the header saying
 * the view is abbreviated; wide enough, the normal layout and no note. In colour too (the
 * escapes take no columns). */
static void narrow_layout_at_80_columns(void **state)
{
    struct gs_snapshot *s = two_gpus();
    struct gs_quick_opts o = opts_of("-a");
    char *t;

    (void)state;
    s->sys.simulated = 1;
    snprintf(s->sys.sim_info, sizeof s->sys.sim_info, "nvml-sim");
    gs_gpu_set(&s->gpus[1], GS_M_THROTTLE_ACTIVE, (double)GS_THR_HW_THERMAL);
    add_proc(s, 1, 777, "torchrun", "carol", 512 * MIB);
    for (int color = 0; color < 2; color++) {
        t = render(s, &o, 80, color);
        for (int k = 0; k < count_lines(t); k++) {
            const char *l = line_of(t, k);
            assert_true(gs_term_width(l, strlen(l)) <= 80);
        }
        if (!color) {
            assert_non_null(strstr(t, "(abbreviated for 80 columns; the full view needs "));
            assert_non_null(strstr(t, "SIMULATED (nvml-sim): not real GPUs")); /* not cut */
            assert_non_null(strstr(t, "[0] H100 80GB HBM3 |"));
            assert_non_null(strstr(t, "| 45\xc2\xb0"
                                      "C F 30%  82% E  0 D  7  512/ 700W |"));
            assert_non_null(strstr(t, "  31.4G/79.6G |")); /* memory used/total */
            assert_non_null(strstr(t, "\n     P0 1980/2619 MHz  Gen5 x16\n"));
            assert_non_null(strstr(t, "MHz  Gen5 x16  \xe2\x9a\xa0 HW thermal")); /* GPU 1 */
            assert_non_null(strstr(t, "python/12345(alice 30.1G)"));
            assert_non_null(strstr(t, "torchrun/777(carol 512M)"));
            assert_non_null(strstr(t, "alice: python train.py --lr 1e-4")); /* -f */
        }
        free(t);
    }
    t = render(s, &o, 200, 0); /* wide enough: the normal layout */
    assert_null(strstr(t, "abbreviated"));
    assert_non_null(strstr(t, "32120 / 81559 MB"));
    free(t);
    t = render(s, &o, 0, 0); /* a pipe without $COLUMNS: no limit */
    assert_null(strstr(t, "abbreviated"));
    free(t);
    /* without -a the line fits in 80: normal, only the header goes on two lines */
    o = opts_of("");
    t = render(s, &o, 80, 0);
    assert_null(strstr(t, "abbreviated"));
    assert_non_null(strstr(t, "node1  2025-01-14 10:22:03  driver 590.48.01  CUDA 13.1\n"
                              "SIMULATED (nvml-sim): not real GPUs\n"));
    assert_non_null(strstr(t, "32120 / 81559 MB"));
    free(t);
    gs_snapshot_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(text_normal),
        cmocka_unit_test(text_show_all_health),
        cmocka_unit_test(text_absent_is_na),
        cmocka_unit_test(text_lost_gpu),
        cmocka_unit_test(text_throttled),
        cmocka_unit_test(text_many_processes_wrap),
        cmocka_unit_test(text_long_names_aligned),
        cmocka_unit_test(text_index_width_aligned),
        cmocka_unit_test(text_color_and_no_color),
        cmocka_unit_test(text_no_processes),
        cmocka_unit_test(text_process_parts),
        cmocka_unit_test(text_show_all),
        cmocka_unit_test(text_nvlink_line),
        cmocka_unit_test(text_mig_devices),
        cmocka_unit_test(text_mig_mode_all),
        cmocka_unit_test(text_hostile_process_name),
        cmocka_unit_test(text_id_filter),
        cmocka_unit_test(fmt_mem_units),
        cmocka_unit_test(fmt_mem_as_printf),
        cmocka_unit_test(json_shape),
        cmocka_unit_test(json_lost_and_filters),
        cmocka_unit_test(json_bad_utf8_survives),
        cmocka_unit_test(opts_good),
        cmocka_unit_test(opts_bad),
        cmocka_unit_test(usage_lists_every_option),
        cmocka_unit_test(watch_ticks_stay_on_grid),
        cmocka_unit_test(term_width_and_clip),
        cmocka_unit_test(term_cell),
        cmocka_unit_test(narrow_layout_at_80_columns),
        cmocka_unit_test(term_redraw_in_place),
        cmocka_unit_test(term_color_decision),
        cmocka_unit_test(tbuf_sticky_and_plain),
    };

    return cmocka_run_group_tests(tests, setup_tz, NULL);
}
