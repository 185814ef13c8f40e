/*
 * Unit tests of the Prometheus rendering (src/agent/metrics.c): absent -> no line, label
 * escaping, both naming modes, self metrics while the driver is missing, history self metrics,
 * per-process series and their cap, MIG devices, Kubernetes pod labels.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/config.h"
#include "agent/history_api.h"
#include "agent/log.h"
#include "agent/metrics.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"

/* ---- metrics ---- */

static struct gs_snapshot *one_gpu(void)
{
    struct gs_snapshot *s;
    struct gs_gpu *g;

    assert_int_equal(gs_snapshot_new(&s, 1, 4, NULL), GS_OK);
    strcpy(s->sys.hostname, "node\"1\\\n");
    g = &s->gpus[0];
    g->index = 0;
    g->tst[GS_T_UUID] = GS_ST_OK;
    strcpy(g->text[GS_T_UUID], "GPU-abc");
    g->tst[GS_T_NAME] = GS_ST_OK;
    strcpy(g->text[GS_T_NAME], "NVIDIA H100");
    g->tst[GS_T_PCI_BUS_ID] = GS_ST_OK;
    strcpy(g->text[GS_T_PCI_BUS_ID], "00000000:18:00.0");
    gs_gpu_set(g, GS_M_MINOR, 3);
    gs_gpu_set(g, GS_M_MEM_USED, 2 * 1048576.0);
    gs_gpu_set(g, GS_M_UTIL_GPU, 0.92);
    gs_gpu_set(g, GS_M_CLOCK_SM, 1980e6);
    gs_gpu_set(g, GS_M_ENERGY, 1234.5);
    gs_gpu_set(g, GS_M_THROTTLE_ACTIVE, (double)GS_THR_SW_POWER_CAP);
    gs_gpu_set(g, GS_M_THROTTLE_SUPPORTED, (double)(GS_THR_SW_POWER_CAP | GS_THR_GPU_IDLE));
    g->st[GS_M_TEMP_GPU] = GS_ST_ERROR; /* present in the struct, not valid */
    g->v[GS_M_TEMP_GPU] = 55;
    return s;
}

static const struct gs_metrics_self up_self = {
    .up = 1, .version = "9.9", .interval_s = 1, .sample_seconds = 0.001, .cycles = 3};

static void test_render_native(void **state)
{
    struct gs_snapshot *s = one_gpu();
    struct gs_buf b = {0};
    const char *lbl = "{gpu=\"0\",uuid=\"GPU-abc\",hostname=\"node\\\"1\\\\\\n\"}";
    char want[256];

    (void)state;
    gs_gpu_set(&s->gpus[0], GS_M_TEMP_MARGIN, -3);
    assert_int_equal(gs_metrics_render(&b, s, &up_self, 0), GS_OK);
    snprintf(want, sizeof want, "\ngpuscope_gpu_temperature_margin_celsius%s -3\n", lbl);
    assert_non_null(strstr(b.data, want));
    snprintf(want, sizeof want, "\ngpuscope_gpu_memory_used_bytes%s 2097152\n", lbl);
    assert_non_null(strstr(b.data, want));
    snprintf(want, sizeof want, "\ngpuscope_gpu_utilization_ratio%s 0.92\n", lbl);
    assert_non_null(strstr(b.data, want));
    assert_non_null(strstr(b.data, "# TYPE gpuscope_gpu_energy_joules_total counter\n"));
    assert_non_null(strstr(b.data, "hostname=\"node\\\"1\\\\\\n\",clock=\"sm\"} 1980000000\n"));
    assert_non_null(strstr(b.data, ",reason=\"sw_power_cap\"} 1\n"));
    assert_non_null(strstr(b.data, ",reason=\"gpu_idle\"} 0\n"));
    assert_null(strstr(b.data, "hw_slowdown")); /* not supported by this GPU */
    /* absent or failed: neither a line nor a header */
    assert_null(strstr(b.data, "temperature_celsius"));
    assert_null(strstr(b.data, "power_watts"));
    assert_null(strstr(b.data, "DCGM_"));
    assert_non_null(strstr(b.data, "\ngpuscope_up{hostname=\"\"} 1\n"));
    assert_non_null(strstr(b.data, "\ngpuscope_cycles_total 3\n"));
    assert_non_null(strstr(b.data, "gpuscope_build_info{version=\"9.9\",schema=\"1\"} 1\n"));
    gs_buf_free(&b);
    gs_snapshot_free(s);
}

static void test_render_dcgm(void **state)
{
    struct gs_snapshot *s = one_gpu();
    struct gs_buf b = {0};

    (void)state;
    assert_int_equal(gs_metrics_render(&b, s, &up_self, GS_METRICS_DCGM), GS_OK);
    /* dcgm-exporter 4.x's labels: hostname (upstream #655), DCGM_FI_DRIVER_VERSION */
    assert_non_null(strstr(b.data, "\nDCGM_FI_DEV_FB_USED{gpu=\"0\",UUID=\"GPU-abc\","
                                   "pci_bus_id=\"00000000:18:00.0\",device=\"nvidia3\","
                                   "modelName=\"NVIDIA H100\",hostname=\"node\\\"1\\\\\\n\","
                                   "DCGM_FI_DRIVER_VERSION=\""));
    gs_buf_free(&b);
    memset(&b, 0, sizeof b); /* 3.x's spelling on request */
    assert_int_equal(gs_metrics_render(&b, s, &up_self, GS_METRICS_DCGM | GS_METRICS_DCGM_HOSTNAME),
                     GS_OK);
    assert_non_null(strstr(b.data, "modelName=\"NVIDIA H100\",Hostname=\"node\\\"1\\\\\\n\","));
    assert_null(strstr(b.data, ",hostname=\"node\\\"1\\\\\\n\",DCGM"));
    assert_non_null(strstr(b.data, "} 92\n"));                          /* GPU_UTIL in percent */
    assert_non_null(strstr(b.data, "} 1980\n"));                        /* SM clock in MHz */
    assert_non_null(strstr(b.data, "} 1234500\n"));                     /* energy in mJ */
    assert_null(strstr(b.data, "DCGM_FI_DEV_GPU_TEMP"));                /* absent */
    assert_non_null(strstr(b.data, "gpuscope_gpu_memory_used_bytes{")); /* native still there */
    gs_buf_free(&b);
    gs_snapshot_free(s);
}

static void test_render_down(void **state)
{
    struct gs_metrics_self self = {.up = 0,
                                   .reason = "nvml: nvmlInit_v2: Driver \"Not\" Loaded",
                                   .reason_rc = GS_ENODRIVER,
                                   .hostname = "n1",
                                   .version = "1",
                                   .interval_s = 1,
                                   .sample_seconds = -1};
    struct gs_buf b = {0};

    (void)state;
    assert_int_equal(gs_metrics_render(&b, NULL, &self, GS_METRICS_DCGM), GS_OK);
    /* no free text in a label: one gpuscope_up series, the reason a bounded name */
    assert_non_null(strstr(b.data, "\ngpuscope_up{hostname=\"n1\"} 0\n"));
    assert_non_null(
        strstr(b.data, "\ngpuscope_down_reason{hostname=\"n1\",reason=\"no_driver\"} 1\n"));
    assert_non_null(strstr(b.data, "\ngpuscope_info{hostname=\"n1\",simulated=\"0\"} 1\n"));
    assert_null(strstr(b.data, "Loaded"));
    assert_string_equal(gs_metrics_down_reason(GS_ENOLIB), "no_library");
    assert_string_equal(gs_metrics_down_reason(12345), "error");
    assert_null(strstr(b.data, "gpuscope_gpu_"));
    assert_null(strstr(b.data, "sample_duration"));
    gs_buf_free(&b);
}

static void test_lost_gpu(void **state)
{
    struct gs_snapshot *s = one_gpu();
    struct gs_buf b = {0};

    (void)state;
    s->gpus[0].lost = 1;
    for (int m = 0; m < GS_M__COUNT; m++)
        if (s->gpus[0].st[m] == GS_ST_OK && m != GS_M_MINOR)
            s->gpus[0].st[m] = GS_ST_LOST;
    assert_int_equal(gs_metrics_render(&b, s, &up_self, 0), GS_OK);
    assert_non_null(strstr(b.data, "\ngpuscope_gpu_up{gpu=\"0\","));
    assert_non_null(strstr(b.data, "\"} 0\n"));
    assert_null(strstr(b.data, "memory_used_bytes"));
    gs_buf_free(&b);
    gs_snapshot_free(s);
}

static void test_render_history_self(void **state)
{
    struct gs_metrics_self self = up_self;
    struct gs_buf b = {0};

    (void)state;
    assert_int_equal(gs_metrics_render(&b, NULL, &self, 0), GS_OK);
    assert_null(strstr(b.data, "gpuscope_history_")); /* history off */
    gs_buf_reset(&b);
    self.history = 1;
    self.history_rows = 42;
    self.history_write_errors = 2;
    self.history_dropped = 1;
    self.history_flush_last_s = -1;
    assert_int_equal(gs_metrics_render(&b, NULL, &self, 0), GS_OK);
    assert_non_null(strstr(b.data, "\ngpuscope_history_rows_written_total 42\n"));
    assert_non_null(strstr(b.data, "\ngpuscope_history_write_errors_total 2\n"));
    assert_non_null(strstr(b.data, "\ngpuscope_history_snapshots_dropped_total 1\n"));
    assert_null(strstr(b.data, "flush_duration")); /* no flush yet */
    gs_buf_reset(&b);
    self.history_flush_last_s = 0.004;
    self.history_flush_max_s = 0.02;
    assert_int_equal(gs_metrics_render(&b, NULL, &self, 0), GS_OK);
    assert_non_null(strstr(b.data, "\ngpuscope_history_flush_duration_seconds 0.004\n"));
    assert_non_null(strstr(b.data, "\ngpuscope_history_flush_duration_max_seconds 0.02\n"));
    gs_buf_free(&b);
}

/* Per-process series: labels, bytes outside printable ASCII, absent values, and the cap
 * leaving later processes out whole and counting their series. */
static void test_render_processes(void **state)
{
    struct gs_snapshot *s = one_gpu();
    struct gs_metrics_self self = up_self;
    struct gs_buf b = {0};

    (void)state;
    s->n_procs = 2;
    memset(s->procs, 0, 2 * sizeof *s->procs);
    s->procs[0].pid = 7;
    s->procs[0].mem_st = GS_ST_OK;
    s->procs[0].gpu_mem_bytes = 4096;
    s->procs[0].host_st = GS_ST_OK;
    strcpy(s->procs[0].user, "alice");
    strcpy(s->procs[0].name, "tr\xc3\xa4in");
    s->procs[0].rss_bytes = 100;
    s->procs[1].pid = 8;
    s->procs[1].mem_st = GS_ST_OK;
    s->procs[1].gpu_mem_bytes = 1;
    self.process_series_max = 100;
    assert_int_equal(gs_metrics_render(&b, s, &self, 0), GS_OK);
    assert_null(strstr(b.data, "gpuscope_process_")); /* off */
    gs_buf_reset(&b);
    assert_int_equal(gs_metrics_render(&b, s, &self, GS_METRICS_PROCESS), GS_OK);
    assert_non_null(strstr(b.data, ",pid=\"7\",user=\"alice\",name=\"tr??in\",container=\"\","
                                   "pod_uid=\"\",slurm_job=\"\"} 4096\n"));
    assert_non_null(strstr(b.data, "gpuscope_process_resident_memory_bytes{"));
    assert_null(strstr(b.data, "gpuscope_process_cpu_ratio")); /* absent everywhere */
    assert_non_null(strstr(b.data, "\ngpuscope_process_series_dropped 0\n"));
    gs_buf_reset(&b);
    self.process_series_max = 2; /* process 7 has 2 series, process 8 one more */
    assert_int_equal(gs_metrics_render(&b, s, &self, GS_METRICS_PROCESS), GS_OK);
    assert_null(strstr(b.data, "pid=\"8\""));
    assert_non_null(strstr(b.data, "\ngpuscope_process_series_dropped 1\n"));
    gs_buf_free(&b);
    gs_snapshot_free(s);
}
/* gpuscope_refused_total (issue 18): one HELP/TYPE, a line per row, zeros kept, nothing for
 * no rows; and the step-socket quota keys' defaults and bounds. */
static void test_render_refused(void **state)
{
    static const struct gs_refused_row rows[] = {
        {"http", "uid_connections", 3}, {"unix", "rate", 0}, {"steps", "uid_rate", 123456789012}};
    struct gs_agent_config c;
    struct gs_buf b = {0};
    struct gs_err err;

    (void)state;
    gs_metrics_render_refused(&b, rows, 0);
    assert_true(b.data == NULL || b.len == 0);
    gs_metrics_render_refused(&b, rows, 3);
    assert_non_null(strstr(b.data, "# TYPE gpuscope_refused_total counter\n"));
    assert_non_null(
        strstr(b.data, "\ngpuscope_refused_total{door=\"http\",reason=\"uid_connections\"} 3\n"));
    assert_non_null(strstr(b.data, "\ngpuscope_refused_total{door=\"unix\",reason=\"rate\"} 0\n"));
    assert_non_null(strstr(b.data, "\ngpuscope_refused_total{door=\"steps\",reason=\"uid_rate\"} "
                                   "123456789012\n"));
    gs_buf_free(&b);
    gs_config_defaults(&c);
    assert_int_equal(c.steps_conn_per_uid, 32);
    assert_true(c.steps_rate_per_uid == 10000);
    assert_int_equal(c.steps_burst_per_uid, 20000);
    assert_int_equal(c.steps_per_run, 500000);
    assert_int_equal(c.steps_per_uid, 2000000);
    gs_err_clear(&err);
    assert_int_equal(gs_config_set(&c, "steps_conn_per_uid", "0", "t", &err), GS_EINVAL);
    assert_int_equal(gs_config_set(&c, "steps_rate_per_uid", "0", "t", &err), GS_OK);
    assert_int_equal(gs_config_set(&c, "steps_per_run", "0", "t", &err), GS_OK);
    assert_int_equal(gs_config_set(&c, "steps_per_run", "0x10", "t", &err), GS_EINVAL);
}

/* A GPU in MIG mode with two GPU instances (the second with two compute instances): native
 * gpuscope_mig_* series per MIG device; in dcgm mode one series per GPU instance with
 * GPU_I_PROFILE and GPU_I_ID before the hostname (Hostname on request), the instance's
 * framebuffer and GPM figures, the parent's clocks, and no whole-GPU series. */
static void test_render_mig(void **state)
{
    struct gs_snapshot *s = one_gpu();
    struct gs_gpu *g = &s->gpus[0];
    struct gs_buf b = {0};
    const char *ml = "{gpu=\"0\",uuid=\"GPU-abc\",hostname=\"node\\\"1\\\\\\n\",gpu_instance=\"9\","
                     "compute_instance=\"0\",profile=\"1g.10gb\"}";
    const char *dl = "{gpu=\"0\",UUID=\"GPU-abc\",pci_bus_id=\"00000000:18:00.0\","
                     "device=\"nvidia3\",modelName=\"NVIDIA H100\",GPU_I_PROFILE=\"1g.10gb\","
                     "GPU_I_ID=\"9\",hostname=\"node\\\"1\\\\\\n\",DCGM_FI_DRIVER_VERSION=\"\"}";
    char want[512];
    const char *p;
    int n;

    (void)state;
    g->st[GS_M_UTIL_GPU] = GS_ST_NA;
    gs_gpu_set(g, GS_M_MIG_MODE, 1);
    g->n_mig = 3;
    for (unsigned i = 0; i < 3; i++) {
        struct gs_mig *m = &g->mig[i];
        m->index = i;
        m->gi_id = i ? 9 : 2;
        m->ci_id = i == 2 ? 1 : 0;
        snprintf(m->name, sizeof m->name, "NVIDIA H100 MIG %s", i ? "1g.10gb" : "3g.40gb");
        snprintf(m->uuid, sizeof m->uuid, "MIG-%u", i);
        m->mem_st = GS_ST_OK;
        m->mem_total_bytes = 10240 * 1048576.0;
        m->mem_used_bytes = (i + 1) * 1048576ULL + 5;
        m->mem_free_bytes = m->mem_total_bytes - m->mem_used_bytes;
    }
    g->mig[1].gpm_st[GS_MIG_GPM_GR_ACTIVE] = GS_ST_OK;
    g->mig[1].gpm[GS_MIG_GPM_GR_ACTIVE] = 0.25;
    s->n_procs = 1;
    memset(&s->procs[0], 0, sizeof s->procs[0]);
    s->procs[0].pid = 7;
    s->procs[0].gi_id = 9;
    s->procs[0].ci_id = 0;

    assert_int_equal(gs_metrics_render(&b, s, &up_self, 0), GS_OK);
    snprintf(want, sizeof want, "\ngpuscope_mig_memory_used_bytes%s 2097157\n", ml);
    assert_non_null(strstr(b.data, want));
    snprintf(want, sizeof want, "\ngpuscope_mig_graphics_active_ratio%s 0.25\n", ml);
    assert_non_null(strstr(b.data, want));
    snprintf(want, sizeof want, "\ngpuscope_mig_processes%s 1\n", ml);
    assert_non_null(strstr(b.data, want));
    assert_non_null(
        strstr(b.data, "compute_instance=\"1\",profile=\"1g.10gb\",mig_uuid=\"MIG-2\"} 1\n"));
    assert_null(strstr(b.data, "gpuscope_mig_sm_active_ratio")); /* absent: no family */
    assert_null(strstr(b.data, "GPU_I_"));
    gs_buf_reset(&b);

    assert_int_equal(gs_metrics_render(&b, s, &up_self, GS_METRICS_DCGM), GS_OK);
    snprintf(want, sizeof want, "\nDCGM_FI_DEV_FB_USED%s 2\n", dl); /* whole MiB */
    assert_non_null(strstr(b.data, want));
    snprintf(want, sizeof want, "\nDCGM_FI_PROF_GR_ENGINE_ACTIVE%s 0.25\n", dl);
    assert_non_null(strstr(b.data, want));
    snprintf(want, sizeof want, "\nDCGM_FI_DEV_SM_CLOCK%s 1980\n", dl); /* the parent's */
    assert_non_null(strstr(b.data, want));
    assert_non_null(strstr(b.data, "GPU_I_PROFILE=\"3g.40gb\",GPU_I_ID=\"2\",hostname="));
    /* one series per GPU instance: GPU instance 9's second compute instance adds none */
    for (n = 0, p = b.data; (p = strstr(p, "\nDCGM_FI_DEV_FB_USED{")); p++)
        n++;
    assert_int_equal(n, 2);
    /* in MIG mode dcgm-exporter has no whole-GPU series, and no utilization */
    assert_null(strstr(b.data, "modelName=\"NVIDIA H100\",hostname="));
    assert_null(strstr(b.data, "DCGM_FI_DEV_GPU_UTIL"));
    assert_null(strstr(b.data, "DCGM_FI_DEV_FB_RESERVED"));
    gs_buf_reset(&b);
    /* NVLink's device-wide figure follows the same rule: one series per GPU instance */
    gs_gpu_set(g, GS_M_NVLINK_TX, 3e9);
    gs_gpu_set(g, GS_M_NVLINK_RX, 1e9);
    assert_int_equal(gs_metrics_render(&b, s, &up_self, GS_METRICS_DCGM), GS_OK);
    snprintf(want, sizeof want, "\nDCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL%s 4000\n", dl);
    assert_non_null(strstr(b.data, want));
    for (n = 0, p = b.data; (p = strstr(p, "\nDCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL{")); p++)
        n++;
    assert_int_equal(n, 2);
    g->st[GS_M_NVLINK_TX] = g->st[GS_M_NVLINK_RX] = GS_ST_NA;
    gs_buf_reset(&b);
    assert_int_equal(gs_metrics_render(&b, s, &up_self, GS_METRICS_DCGM | GS_METRICS_DCGM_HOSTNAME),
                     GS_OK);
    assert_non_null(strstr(b.data, "GPU_I_PROFILE=\"1g.10gb\",GPU_I_ID=\"9\",Hostname=\"node"));
    assert_null(strstr(b.data, "GPU_I_ID=\"9\",hostname="));
    gs_buf_reset(&b);
    /* MIG mode off: the devices listed are not rendered, the GPU is whole again */
    gs_gpu_set(g, GS_M_MIG_MODE, 0);
    assert_int_equal(gs_metrics_render(&b, s, &up_self, GS_METRICS_DCGM), GS_OK);
    assert_null(strstr(b.data, "GPU_I_"));
    assert_null(strstr(b.data, "gpuscope_mig_"));
    assert_non_null(strstr(b.data, "modelName=\"NVIDIA H100\",hostname="));
    gs_buf_free(&b);
    gs_snapshot_free(s);
}

/* The cap over many processes: 300 processes on one GPU with distinct memory sizes (and one
 * of unknown size), a cap of 256 series of one family each: the 256 largest are kept, the
 * unknown-size one and the 43 smallest are left out and counted, and the same snapshot in
 * another order keeps the same processes. */
static void test_render_processes_cap_by_memory(void **state)
{
    struct gs_snapshot *s = one_gpu();
    struct gs_metrics_self self = up_self;
    struct gs_metrics_proc_cut cut;
    unsigned char keep[300];
    struct gs_buf b = {0};
    char needle[64];

    (void)state;
    assert_int_equal(gs_snapshot_reserve_procs(s, 300, NULL), GS_OK);
    s->n_procs = 300;
    memset(s->procs, 0, 300 * sizeof *s->procs);
    for (unsigned i = 0; i < 300; i++) {
        s->procs[i].pid = 1000 + i;
        s->procs[i].mem_st = GS_ST_OK;
        /* sizes interleaved so that snapshot order is not size order */
        s->procs[i].gpu_mem_bytes = (uint64_t)((i * 7919u) % 300u + 1) << 20;
    }
    s->procs[0].mem_st = GS_ST_NA;  /* size unknown: ranks last */
    s->procs[0].host_st = GS_ST_OK; /* its one series: RSS */
    self.process_series_max = 256;
    assert_int_equal(gs_metrics_process_select(s, 256, keep, &cut), GS_OK);
    assert_int_equal(cut.kept_procs, 256);
    assert_int_equal(cut.kept_series, 256);
    assert_int_equal(cut.dropped_procs, 44);
    assert_int_equal(cut.dropped_series, 44);
    assert_int_equal(keep[0], 0);
    for (unsigned i = 1; i < 300; i++) /* the 256 largest of sizes 1..300 MiB (0's is lost) */
        assert_int_equal(keep[i], s->procs[i].gpu_mem_bytes > (44ull << 20) ? 1 : 0);
    assert_int_equal(gs_metrics_render(&b, s, &self, GS_METRICS_PROCESS), GS_OK);
    assert_non_null(strstr(b.data, "\ngpuscope_process_series_dropped 44\n"));
    assert_non_null(strstr(b.data, "\ngpuscope_processes_dropped 44\n"));
    snprintf(needle, sizeof needle, ",pid=\"%u\"", 1000u);
    assert_null(strstr(b.data, needle));
    for (unsigned i = 1; i < 300; i++) {
        snprintf(needle, sizeof needle, ",pid=\"%u\"", 1000 + i);
        assert_int_equal(strstr(b.data, needle) != NULL, keep[i]);
    }
    {
        unsigned lines = 0;
        for (const char *p = b.data; (p = strstr(p, "\ngpuscope_process_gpu_memory_bytes{")); p++)
            lines++;
        assert_int_equal(lines, 256);
    }
    /* reversed snapshot order: the same pids are kept */
    for (unsigned i = 0; i < 150; i++) {
        struct gs_proc t = s->procs[i];
        s->procs[i] = s->procs[299 - i];
        s->procs[299 - i] = t;
    }
    assert_int_equal(gs_metrics_process_select(s, 256, keep, &cut), GS_OK);
    for (unsigned i = 0; i < 300; i++)
        assert_int_equal(keep[i], s->procs[i].mem_st == GS_ST_OK &&
                                      s->procs[i].gpu_mem_bytes > (44ull << 20));
    /* a cap below the largest process's series keeps none and counts all */
    s->procs[0].host_st = GS_ST_OK; /* 2 series (memory and RSS) */
    assert_int_equal(gs_metrics_process_select(s, 1, keep, &cut), GS_OK);
    assert_true(cut.kept_procs <= 1 && cut.kept_procs + cut.dropped_procs == 300);
    gs_buf_free(&b);
    gs_snapshot_free(s);
}

/* dcgm-exporter's pod, namespace and container labels: on every dcgm series of a GPU whose
 * processes run in one pod the node names, with gpuscope_gpu_pod_info beside the native
 * series; none when a process of the GPU is outside the pod or in another. */
static void set_pod(struct gs_proc *p, unsigned pid, const char *uid, const char *ctr)
{
    memset(p, 0, sizeof *p);
    p->pid = pid;
    p->host_st = GS_ST_OK;
    p->mem_st = GS_ST_OK;
    p->gpu_mem_bytes = 1 << 20;
    if (uid) {
        strcpy(p->pod_uid, uid);
        strcpy(p->pod_name, "trainer-7d9f8c6b5-x2kqp");
        strcpy(p->pod_namespace, "ml-team");
        strcpy(p->pod_container, ctr);
    }
}

static void test_render_pod_labels(void **state)
{
    static const char uid[] = "8a0f8f3c-64a4-4d6b-9c1e-2f7b7c0e4d11";
    static const char want[] = ",pod=\"trainer-7d9f8c6b5-x2kqp\",namespace=\"ml-team\","
                               "container=\"pytorch\"}";
    struct gs_snapshot *s = one_gpu();
    struct gs_buf b = {0};
    int one = -1;
    const char *l;

    (void)state;
    s->n_procs = 3;
    set_pod(&s->procs[0], 10, uid, "pytorch");
    set_pod(&s->procs[1], 11, uid, "pytorch");
    set_pod(&s->procs[2], 12, NULL, ""); /* host details unread: says nothing */
    s->procs[2].host_st = GS_ST_NA;
    assert_non_null(gs_metrics_gpu_pod(s, 0, &one));
    assert_int_equal(one, 1);
    /* a viewer's copy that withheld a process of the GPU: not known to be one pod */
    s->gpus[0].hidden_st = GS_ST_OK;
    s->gpus[0].hidden_count = 1;
    assert_null(gs_metrics_gpu_pod(s, 0, &one));
    s->gpus[0].hidden_st = GS_ST_NA;
    s->gpus[0].hidden_count = 0;
    assert_int_equal(gs_metrics_render(&b, s, &up_self, GS_METRICS_DCGM), GS_OK);
    /* every dcgm line of the GPU carries them */
    for (l = strstr(b.data, "\nDCGM_FI_"); l; l = strstr(l + 1, "\nDCGM_FI_")) {
        const char *end = strchr(l + 1, '\n');
        const char *hit = strstr(l, want);
        assert_true(hit && hit < end);
    }
    assert_non_null(strstr(b.data, "\nDCGM_FI_DEV_GPU_UTIL{"));
    assert_non_null(strstr(b.data, "\ngpuscope_gpu_pod_info{gpu=\"0\",uuid=\"GPU-abc\","));
    assert_non_null(strstr(b.data, ",pod_uid=\"8a0f8f3c-64a4-4d6b-9c1e-2f7b7c0e4d11\""));
    /* the native GPU series stay as they are (the pod is on the info series) */
    l = strstr(b.data, "\ngpuscope_gpu_utilization_ratio{");
    assert_non_null(l);
    assert_true(strstr(l, ",pod=") == NULL || strstr(l, ",pod=") > strchr(l + 1, '\n'));

    /* two containers of the pod: pod and namespace, container empty */
    strcpy(s->procs[1].pod_container, "sidecar");
    gs_buf_reset(&b);
    assert_int_equal(gs_metrics_render(&b, s, &up_self, GS_METRICS_DCGM), GS_OK);
    assert_non_null(strstr(b.data, ",pod=\"trainer-7d9f8c6b5-x2kqp\",namespace=\"ml-team\","
                                   "container=\"\"}"));

    /* a process of the GPU outside any pod: no pod labels */
    set_pod(&s->procs[2], 12, NULL, "");
    assert_null(gs_metrics_gpu_pod(s, 0, NULL));
    gs_buf_reset(&b);
    assert_int_equal(gs_metrics_render(&b, s, &up_self, GS_METRICS_DCGM), GS_OK);
    assert_null(strstr(b.data, ",pod=\""));
    assert_null(strstr(b.data, "gpuscope_gpu_pod_info"));

    /* two pods: none either */
    set_pod(&s->procs[2], 12, "0d3b7e52-91f3-4c39-a7d1-6c2d2e8f5b20", "pytorch");
    assert_null(gs_metrics_gpu_pod(s, 0, NULL));
    /* a pod the node does not name (no /var/log/pods entry): none */
    set_pod(&s->procs[2], 12, uid, "pytorch");
    s->procs[0].pod_name[0] = '\0';
    assert_null(gs_metrics_gpu_pod(s, 0, NULL));
    gs_buf_free(&b);
    gs_snapshot_free(s);
}

/* Whether needle is in the line that starts at l and ends at e. */
static int in_line(const char *l, const char *e, const char *needle)
{
    const char *hit = strstr(l, needle);
    return hit && hit < e;
}

/* MIG and Kubernetes: two pods on two GPU instances of one GPU (what a MIG cluster does) get
 * their own pod labels on their instance's dcgm series; the GPU as a whole has none. */
static void test_render_mig_pods(void **state)
{
    struct gs_snapshot *s = one_gpu();
    struct gs_gpu *g = &s->gpus[0];
    struct gs_buf b = {0};
    const char *l2, *l9, *e2, *e9;

    (void)state;
    g->st[GS_M_UTIL_GPU] = GS_ST_NA;
    gs_gpu_set(g, GS_M_MIG_MODE, 1);
    g->n_mig = 2;
    for (unsigned i = 0; i < 2; i++) {
        struct gs_mig *m = &g->mig[i];
        memset(m, 0, sizeof *m);
        m->index = i;
        m->gi_id = i ? 9 : 2;
        snprintf(m->name, sizeof m->name, "NVIDIA H100 MIG 3g.40gb");
        m->mem_st = GS_ST_OK;
        m->mem_total_bytes = 40960 * 1048576ULL;
        m->mem_used_bytes = 1048576ULL;
    }
    s->n_procs = 2;
    set_pod(&s->procs[0], 10, "8a0f8f3c-64a4-4d6b-9c1e-2f7b7c0e4d11", "pytorch");
    set_pod(&s->procs[1], 11, "0d3b7e52-91f3-4c39-a7d1-6c2d2e8f5b20", "infer");
    strcpy(s->procs[1].pod_name, "server-0");
    s->procs[0].gi_id = 2;
    s->procs[1].gi_id = 9;
    assert_null(gs_metrics_gpu_pod(s, 0, NULL)); /* two pods on the GPU */
    assert_int_equal(gs_metrics_render(&b, s, &up_self, GS_METRICS_DCGM), GS_OK);
    l2 = strstr(b.data, "\nDCGM_FI_DEV_FB_USED{");
    assert_non_null(l2);
    l9 = strstr(l2 + 1, "\nDCGM_FI_DEV_FB_USED{");
    assert_non_null(l9);
    e2 = strchr(l2 + 1, '\n');
    e9 = strchr(l9 + 1, '\n');
    assert_true(in_line(l2, e2, "GPU_I_ID=\"2\""));
    assert_true(in_line(l2, e2,
                        ",pod=\"trainer-7d9f8c6b5-x2kqp\",namespace=\"ml-team\","
                        "container=\"pytorch\"}"));
    assert_true(in_line(l9, e9, "GPU_I_ID=\"9\""));
    assert_true(in_line(l9, e9, ",pod=\"server-0\",namespace=\"ml-team\",container=\"infer\"}"));
    assert_null(strstr(b.data, "gpuscope_gpu_pod_info"));
    gs_buf_free(&b);
    gs_snapshot_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_render_native),
        cmocka_unit_test(test_render_dcgm),
        cmocka_unit_test(test_render_down),
        cmocka_unit_test(test_lost_gpu),
        cmocka_unit_test(test_render_history_self),
        cmocka_unit_test(test_render_processes),
        cmocka_unit_test(test_render_refused),
        cmocka_unit_test(test_render_mig),
        cmocka_unit_test(test_render_processes_cap_by_memory),
        cmocka_unit_test(test_render_pod_labels),
        cmocka_unit_test(test_render_mig_pods),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
