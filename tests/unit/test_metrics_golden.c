/*
 * The whole /metrics text of a fixed snapshot, byte for byte (src/agent/metrics.c): what a
 * change to how the text is made (label sets rendered once per GPU, the number formatter) must
 * leave alone. The snapshot has every metric of the model set on three GPUs with values of
 * every shape the formatter meets (integers small and past 2^53, fractions, negatives, -0,
 * tiny and huge magnitudes, NaN and infinities), label text to escape, one GPU in MIG mode with
 * MIG devices, and processes in a Kubernetes pod; it is rendered native, with the dcgm-exporter
 * families (both hostname spellings) and with the per-process families.
 *
 * The expected text is tests/unit/metrics_golden.prom, written by the renderer before the
 * change. To write it anew after a deliberate change of the output:
 *   GS_METRICS_GOLDEN_WRITE=1 build/tests/unit/test_metrics_golden
 * (with GPUSCOPE_SOURCE_ROOT set, as meson test sets it) and review the diff.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent/metrics.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"

/* The value of metric m on GPU g: a shape picked by m, scaled by g. */
static double fixture_value(int m, unsigned g)
{
    static const double shapes[] = {
        0,
        1,
        0.92,
        55,
        1980e6,
        81559.0 * 1048576,
        1234.5,
        -3,
        0.1 + 0.2,
        1.0 / 3,
        123456789012345.0,  /* 15 digits */
        1234567890123456.0, /* 16 digits: exponent form */
        9007199254740993.0, /* past 2^53 */
        1e-7,
        2.5e-300,
        1e300,
        -0.0,
        699.999999999,
        0.5,
        4294967295.0,
    };
    double v = shapes[(unsigned)(m * 7 + g) % (sizeof shapes / sizeof shapes[0])];

    return g == 2 && m % 5 == 0 ? v * 1000 + 0.25 : v;
}

static struct gs_snapshot *fixture(void)
{
    struct gs_snapshot *s;

    assert_int_equal(gs_snapshot_new(&s, 3, 8, NULL), GS_OK);
    snprintf(s->sys.hostname, sizeof s->sys.hostname, "dgx-\"a\"\\01\n");
    s->sys.driver_st = GS_ST_OK;
    snprintf(s->sys.driver_version, sizeof s->sys.driver_version, "590.48.01");
    s->sys.nvml_st = GS_ST_OK;
    snprintf(s->sys.nvml_version, sizeof s->sys.nvml_version, "13.590.48.01");
    s->sys.cuda_st = GS_ST_OK;
    s->sys.cuda_version = 13010;
    for (unsigned i = 0; i < 3; i++) {
        struct gs_gpu *g = &s->gpus[i];

        g->index = i;
        for (int m = 0; m < GS_M__COUNT; m++)
            gs_gpu_set(g, (enum gs_metric)m, fixture_value(m, i));
        for (int t = 0; t < GS_T__COUNT; t++) {
            snprintf(g->text[t], GS_STR_LEN, "t%d-gpu%u", t, i);
            g->tst[t] = GS_ST_OK;
        }
        snprintf(g->text[GS_T_UUID], GS_STR_LEN, "GPU-%u0e1f2a3-b4c5-d6e7-f809-1a2b3c4d5e6f", i);
        snprintf(g->text[GS_T_NAME], GS_STR_LEN, "NVIDIA H100 80GB \"HBM3\"");
        snprintf(g->text[GS_T_PCI_BUS_ID], GS_STR_LEN, "00000000:%02X:00.0", 0x18 + i);
        gs_gpu_set(g, GS_M_MINOR, i);
        gs_gpu_set(g, GS_M_MIG_MODE, 0);
        gs_gpu_set(g, GS_M_THROTTLE_ACTIVE, (double)(GS_THR_SW_POWER_CAP | GS_THR_HW_SLOWDOWN));
        gs_gpu_set(g, GS_M_THROTTLE_SUPPORTED, (double)0xFFF);
    }
    s->gpus[1].st[GS_M_TEMP_GPU] = GS_ST_ERROR; /* failed: no line */
    s->gpus[1].st[GS_M_POWER_DRAW] = GS_ST_NA;
    s->gpus[0].v[GS_M_UTIL_MEM] = NAN;
    s->gpus[0].v[GS_M_ENERGY] = INFINITY;
    s->gpus[2].v[GS_M_FAN] = -INFINITY;
    s->gpus[1].index = 5; /* an index that is not the position */

    /* GPU 2 in MIG mode: three MIG devices on two GPU instances */
    {
        struct gs_gpu *g = &s->gpus[2];

        gs_gpu_set(g, GS_M_MIG_MODE, 1);
        g->n_mig = 3;
        for (unsigned k = 0; k < 3; k++) {
            struct gs_mig *m = &g->mig[k];

            m->index = k;
            m->gi_id = k ? 9 : 2;
            m->ci_id = k == 2 ? 1 : 0;
            snprintf(m->name, sizeof m->name, "NVIDIA H100 MIG %s", k ? "1g.10gb" : "3g.40gb");
            snprintf(m->uuid, sizeof m->uuid, "MIG-%u", k);
            m->mem_st = GS_ST_OK;
            m->mem_total_bytes = 10240 * 1048576.0;
            m->mem_used_bytes = (k + 1) * 1048576ULL + 5;
            m->mem_free_bytes = m->mem_total_bytes - m->mem_used_bytes;
            for (int q = 0; q < GS_MIG_GPM__COUNT; q++) {
                m->gpm_st[q] = (q + k) % 2 ? GS_ST_OK : GS_ST_NA;
                m->gpm[q] = 0.125 * (q + 1) + k / 3.0;
            }
        }
    }
    /* processes: two of one pod on GPU 0, one outside any pod on GPU 1, two on GPU 2's
     * instances */
    for (unsigned i = 0; i < 5; i++) {
        struct gs_proc *p = &s->procs[s->n_procs++];

        memset(p, 0, sizeof *p);
        p->pid = 4000 + i * 17;
        p->gpu = i < 2 ? 0 : i == 2 ? 1 : 2;
        p->type = GS_PROC_COMPUTE;
        p->gi_id = p->ci_id = 0xFFFFFFFFu;
        if (p->gpu == 2) {
            p->gi_id = i == 3 ? 2 : 9;
            p->ci_id = 0;
        }
        p->mem_st = GS_ST_OK;
        p->gpu_mem_bytes = (uint64_t)(i + 1) * 3 * 1048576 + i;
        p->util_st = i == 4 ? GS_ST_NA : GS_ST_OK;
        p->sm_util = 0.1 * i + 0.05;
        p->mem_util = 1.0 / (i + 3);
        p->host_st = GS_ST_OK;
        snprintf(p->name, sizeof p->name, "python%u", i);
        snprintf(p->cmdline, sizeof p->cmdline, "python train.py --rank=%u \"x\"", i);
        snprintf(p->user, sizeof p->user, "user%u", i % 2);
        p->uid = 1000 + i % 2;
        p->cpu_st = GS_ST_OK;
        p->cpu_ratio = 0.75 + i;
        p->rss_bytes = (uint64_t)(i + 2) << 30;
        p->start_time = 1764633600.5 + i;
        if (p->gpu == 0) {
            snprintf(p->pod_uid, sizeof p->pod_uid, "8a0f8f3c-64a4-4d6b-9c1e-2f7b7c0e4d11");
            snprintf(p->pod_name, sizeof p->pod_name, "trainer-7d9f8c6b5-x2kqp");
            snprintf(p->pod_namespace, sizeof p->pod_namespace, "ml-team");
            snprintf(p->pod_container, sizeof p->pod_container, "pytorch");
        }
    }
    return s;
}

static void render_all(struct gs_buf *b, const struct gs_snapshot *s)
{
    static const unsigned flags[] = {
        0,
        GS_METRICS_DCGM,
        GS_METRICS_DCGM | GS_METRICS_DCGM_HOSTNAME | GS_METRICS_PROCESS,
    };
    struct gs_metrics_self self = {.up = 1,
                                   .hostname = "dgx-\"a\"\\01\n",
                                   .version = "9.9.9",
                                   .interval_s = 1,
                                   .sample_seconds = 0.000731,
                                   .cycles = 123456,
                                   .overruns = 2,
                                   .sample_errors = 1,
                                   .history = 1,
                                   .history_rows = 987654321,
                                   .history_flush_last_s = 0.0125,
                                   .history_flush_max_s = 1.5,
                                   .history_integrity_ok = 1,
                                   .history_integrity_checks = 4,
                                   .runs = 1,
                                   .runs_active = 2,
                                   .runs_started = 7,
                                   .runs_records = 1000000,
                                   .process_series_max = 256};

    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        gs_buf_printf(b, "#### flags %u\n", flags[i]);
        assert_int_equal(gs_metrics_render(b, s, &self, flags[i]), GS_OK);
    }
    /* the same snapshot rendered twice into one buffer: nothing carried over */
    assert_int_equal(gs_metrics_render(b, s, &self, GS_METRICS_DCGM), GS_OK);
    /* the driver down */
    self.up = 0;
    self.reason_rc = GS_ENODRIVER;
    assert_int_equal(gs_metrics_render(b, NULL, &self, GS_METRICS_DCGM), GS_OK);
}

static char *golden_path(void)
{
    const char *root = getenv("GPUSCOPE_SOURCE_ROOT");
    static char path[4096];

    if (!root || !*root)
        return NULL;
    snprintf(path, sizeof path, "%s/tests/unit/metrics_golden.prom", root);
    return path;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;

    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, f) == (size_t)n) {
        buf[n] = '\0';
        *len = (size_t)n;
    } else {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    return buf;
}

static void test_text_unchanged(void **state)
{
    struct gs_snapshot *s = fixture();
    struct gs_buf b = {0};
    const char *path = golden_path();
    const char *write = getenv("GS_METRICS_GOLDEN_WRITE");
    char *want;
    size_t want_len = 0, at = 0;

    (void)state;
    if (!path)
        skip();
    render_all(&b, s);
    assert_int_equal(gs_buf_status(&b), GS_BUF_OK);
    if (write && *write) {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(b.data, 1, b.len, f), b.len);
        assert_int_equal(fclose(f), 0);
    }
    want = slurp(path, &want_len);
    assert_non_null(want);
    while (at < b.len && at < want_len && b.data[at] == want[at])
        at++;
    if (at != b.len || at != want_len) {
        size_t line = 1, from = at;

        for (size_t i = 0; i < at; i++)
            line += want[i] == '\n';
        while (from > 0 && want[from - 1] != '\n')
            from--;
        print_error("first difference at byte %zu, line %zu of %s:\nwant: %.160s\ngot:  %.160s\n",
                    at, line, path, want + from, b.data + from);
        fail();
    }
    free(want);
    gs_buf_free(&b);
    gs_snapshot_free(s);
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* gs_metrics_g15 writes what printf's %.15g writes, for doubles of every shape: random bit
 * patterns, short decimals (what the sampler's unit conversions give: 0.92, 312.456 W),
 * ratios, values at a tie of the 15th digit and next to powers of ten, whole numbers. */
static void test_g15_is_printf(void **state)
{
    char got[64], want[64];
    long n_checked = 0;

    (void)state;
    for (long i = 0; i < 400000; i++) {
        uint64_t r = next();
        double v;
        size_t n;

        switch (i % 8) {
        case 0: /* any finite double */
            memcpy(&v, &r, sizeof v);
            if (!isfinite(v))
                continue;
            break;
        case 1: /* a short decimal: k / 10^j */
            v = (double)(r % 100000000) / pow(10, (double)((r >> 40) % 12));
            break;
        case 2: /* a ratio of small integers */
            v = (double)(r % 1000) / (double)(1 + (r >> 20) % 997);
            break;
        case 3: /* a tie or near-tie of the 15th significant digit: d.5 / 10^j */
            v = ((double)(r % 900000000000000ull + 100000000000000ull) + 0.5) /
                pow(10, (double)((r >> 50) % 19));
            break;
        case 4: /* next to a power of ten */
            v = nextafter(pow(10, (double)((r % 40)) - 20.0), (r >> 32) & 1 ? INFINITY : 0);
            break;
        case 5: /* a whole number */
            v = (double)(r >> (r % 64));
            break;
        case 6: /* a product of the sampler's scales: milli, kibi, mega */
            v = (double)(r % 10000000) * ((r >> 30) & 1 ? 1e-3 : (r >> 31) & 1 ? 1024 : 1e-6);
            break;
        default: /* any double of ordinary magnitude */
            v = ldexp((double)(r >> 11), (int)((r >> 3) % 100) - 100);
            break;
        }
        if ((r >> 63) & 1)
            v = -v;
        n = gs_metrics_g15(v, got);
        got[n] = '\0';
        snprintf(want, sizeof want, "%.15g", v);
        if (strcmp(got, want) != 0) {
            print_error("%.17g (%a): got %s, printf %s\n", v, v, got, want);
            fail();
        }
        n_checked++;
    }
    assert_true(n_checked > 350000);
    /* the edges by name */
    {
        static const double edge[] = {0.0,
                                      -0.0,
                                      1e15,
                                      -1e15,
                                      999999999999999.0,
                                      1e-4,
                                      9.99999999999999e-5,
                                      0.0001000000000000001,
                                      0.5,
                                      -0.5,
                                      1e300,
                                      5e-324,
                                      123456789012345.5,
                                      0.1234567890123455,
                                      0.30000000000000004,
                                      NAN,
                                      INFINITY,
                                      -INFINITY};
        for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++) {
            size_t n = gs_metrics_g15(edge[i], got);
            got[n] = '\0';
            snprintf(want, sizeof want, "%.15g", edge[i]);
            assert_string_equal(got, want);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_unchanged),
        cmocka_unit_test(test_g15_is_printf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
