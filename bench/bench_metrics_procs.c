/*
 * bench_metrics_procs: what the per-process cap and the Kubernetes pod labels cost on the
 * agent's sampling thread (src/agent/metrics.c, src/backend/k8s.c).
 *
 * 1. One /metrics render (native + dcgm-exporter families + per-process series, cap 256) of
 *    a hand-built 8-GPU snapshot with P processes (each in a Kubernetes pod, one pod per GPU,
 *    so every dcgm line carries pod labels), for P = 0, 256, 2000, 10000: the median of R
 *    renders, and the body's size. The cap's selection sorts the P entries once per render.
 * 2. One gs_k8s_lookup (the readdir of a pods directory of K pods, then the pod's own
 *    directory) in a temporary tree, for K = 20 and 200: the median of 2000 lookups. The
 *    sampler does one per process at its first sight and every 10 s after.
 *
 * usage: bench_metrics_procs [RENDERS]   (default 50)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/metrics.h"
#include "backend/k8s.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"

static long long mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

static struct gs_snapshot *snapshot(unsigned n_procs)
{
    struct gs_snapshot *s = NULL;

    if (gs_snapshot_new(&s, 8, n_procs ? n_procs : 1, NULL) != GS_OK)
        exit(1);
    snprintf(s->sys.hostname, sizeof s->sys.hostname, "gpu-node-17");
    s->sys.driver_st = GS_ST_OK;
    snprintf(s->sys.driver_version, sizeof s->sys.driver_version, "590.48.01");
    for (unsigned i = 0; i < 8; i++) {
        struct gs_gpu *g = &s->gpus[i];
        g->index = i;
        g->tst[GS_T_UUID] = g->tst[GS_T_NAME] = g->tst[GS_T_PCI_BUS_ID] = GS_ST_OK;
        snprintf(g->text[GS_T_UUID], GS_STR_LEN, "GPU-%08u-24b1-5d7e-8a0f-3b9c41d27e51", i);
        snprintf(g->text[GS_T_NAME], GS_STR_LEN, "NVIDIA H100 80GB HBM3");
        snprintf(g->text[GS_T_PCI_BUS_ID], GS_STR_LEN, "00000000:%02X:00.0", 0x18 + i);
        for (int m = 0; m < GS_M__COUNT; m++)
            gs_gpu_set(g, (enum gs_metric)m, 1000.0 + m);
        gs_gpu_set(g, GS_M_THROTTLE_ACTIVE, 0);
        gs_gpu_set(g, GS_M_THROTTLE_SUPPORTED, 0xff);
    }
    s->n_procs = n_procs;
    for (unsigned k = 0; k < n_procs; k++) {
        struct gs_proc *p = &s->procs[k];
        memset(p, 0, sizeof *p);
        p->pid = 10000 + k;
        p->gpu = k % 8;
        p->mem_st = p->util_st = p->cpu_st = p->host_st = GS_ST_OK;
        p->gpu_mem_bytes = (uint64_t)((k * 7919u) % 100000u + 1) << 16;
        p->start_time = 1.7e9;
        snprintf(p->name, sizeof p->name, "python3");
        snprintf(p->user, sizeof p->user, "trainer");
        snprintf(p->pod_uid, sizeof p->pod_uid, "8a0f8f3c-64a4-4d6b-9c1e-2f7b7c0e4d1%u", p->gpu);
        snprintf(p->pod_name, sizeof p->pod_name, "trainer-%u", p->gpu);
        snprintf(p->pod_namespace, sizeof p->pod_namespace, "ml-team");
        snprintf(p->pod_container, sizeof p->pod_container, "pytorch");
    }
    return s;
}

static void bench_render(unsigned n_procs, int renders)
{
    struct gs_snapshot *s = snapshot(n_procs);
    struct gs_metrics_self self = {.up = 1,
                                   .version = "bench",
                                   .interval_s = 1,
                                   .sample_seconds = 0.001,
                                   .process_series_max = 256};
    struct gs_buf b = {0};
    long long *t = calloc((size_t)renders, sizeof *t);

    for (int i = 0; i < renders + 3; i++) {
        long long t0 = mono_ns();
        gs_buf_reset(&b);
        if (gs_metrics_render(&b, s, &self, GS_METRICS_DCGM | GS_METRICS_PROCESS) != GS_OK)
            exit(1);
        if (i >= 3)
            t[i - 3] = mono_ns() - t0;
    }
    qsort(t, (size_t)renders, sizeof *t, cmp_ll);
    printf("render  procs %5u  median %8.1f us  min %8.1f us  body %7zu bytes\n", n_procs,
           (double)t[renders / 2] / 1e3, (double)t[0] / 1e3, b.len);
    free(t);
    gs_buf_free(&b);
    gs_snapshot_free(s);
}

static void bench_lookup(unsigned n_pods)
{
    char root[128], path[512], uid[64];
    long long t[2000];
    struct gs_k8s_names k;
    int n = 0;

    snprintf(root, sizeof root, "/tmp/gs_bench_k8s_XXXXXX");
    if (!mkdtemp(root))
        exit(1);
    for (unsigned i = 0; i < n_pods; i++) {
        snprintf(path, sizeof path, "%s/ns%u_pod-%u_%08x-64a4-4d6b-9c1e-2f7b7c0e4d11", root, i % 7,
                 i, i);
        mkdir(path, 0755);
        strcat(path, "/main");
        mkdir(path, 0755);
    }
    snprintf(uid, sizeof uid, "%08x-64a4-4d6b-9c1e-2f7b7c0e4d11", n_pods / 2);
    for (int i = 0; i < 2000; i++) {
        long long t0 = mono_ns();
        if (gs_k8s_lookup(root, uid, NULL, &k) != GS_OK)
            exit(1);
        t[n++] = mono_ns() - t0;
    }
    qsort(t, (size_t)n, sizeof *t, cmp_ll);
    printf("lookup  pods  %5u  median %8.1f us  min %8.1f us  (%s/%s/%s)\n", n_pods,
           (double)t[n / 2] / 1e3, (double)t[0] / 1e3, k.ns, k.pod, k.container);
    snprintf(path, sizeof path, "rm -rf '%s'", root);
    if (system(path) != 0)
        exit(1);
}

int main(int argc, char **argv)
{
    int renders = argc > 1 ? atoi(argv[1]) : 50;
    static const unsigned procs[] = {0, 256, 2000, 10000};

    if (renders < 1)
        renders = 1;
    for (size_t i = 0; i < sizeof procs / sizeof procs[0]; i++)
        bench_render(procs[i], renders);
    bench_lookup(20);
    bench_lookup(200);
    return 0;
}
