/*
 * Unit tests for `gpuscope query`'s pure parts: the field tables (names, aliases, units), the
 * cell formatter against values taken from real nvidia-smi captures (H100 590.48.01 idle,
 * RTX 2080 SUPER 595.71.05 under load), the absent/error tokens, header and nounits rules, the
 * option parser and the -i matcher. No sampler and no NVML: snapshots are built by hand.
 */
/* cmocka.h needs these first */
/* clang-format off */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

/* clang-format on */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/smi/query_fields.h"
#include "cli/smi/query_opts.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"
#include "gpuscope/gs_sampler.h"

/* --- fixtures ------------------------------------------------------------------------------ */

static void set_text(struct gs_gpu *g, enum gs_text t, const char *v)
{
    snprintf(g->text[t], sizeof g->text[t], "%s", v);
    g->tst[t] = GS_ST_OK;
}

static void set_ecc(struct gs_gpu *g, unsigned loc, uint64_t v)
{
    for (int t = 0; t < 2; t++)
        for (int c = 0; c < 2; c++) {
            g->ecc_loc[t][c][loc] = v;
            g->ecc_loc_st[t][c][loc] = GS_ST_OK;
        }
}

/* The H100 80GB HBM3 of the 590.48.01 capture, idle, in base SI units as the backend gives
 * them (NVML's mW / MHz / percent converted once). */
static struct gs_snapshot *h100_idle(void)
{
    struct gs_snapshot *s = NULL;
    struct gs_gpu *g;

    assert_int_equal(gs_snapshot_new(&s, 1, 4, NULL), GS_OK);
    s->t_real = 1784016758.696;
    s->sys.driver_st = GS_ST_OK;
    strcpy(s->sys.driver_version, "590.48.01");
    s->sys.gpu_count = 1;
    g = &s->gpus[0];
    set_text(g, GS_T_NAME, "NVIDIA H100 80GB HBM3");
    set_text(g, GS_T_SERIAL, "0000000000000");
    set_text(g, GS_T_UUID, "GPU-00000000-0000-0000-0000-000000000000");
    set_text(g, GS_T_PCI_BUS_ID, "00000000:00:09.0");
    set_text(g, GS_T_VBIOS, "96.00.A5.00.01");
    gs_gpu_set(g, GS_M_PCI_DOMAIN, 0);
    gs_gpu_set(g, GS_M_PCI_BUS, 0);
    gs_gpu_set(g, GS_M_PCI_DEVICE, 9);
    gs_gpu_set(g, GS_M_PCI_DEVICE_ID, 0x233010DE);
    gs_gpu_set(g, GS_M_PCI_SUBSYS_ID, 0x16C110DE);
    gs_gpu_set(g, GS_M_PCIE_GEN, 5);
    gs_gpu_set(g, GS_M_PCIE_GEN_MAX, 5);
    gs_gpu_set(g, GS_M_PCIE_GEN_GPU_MAX, 5);
    gs_gpu_set(g, GS_M_PCIE_WIDTH, 16);
    gs_gpu_set(g, GS_M_PCIE_WIDTH_MAX, 16);
    gs_gpu_set(g, GS_M_PERSISTENCE, 1);
    gs_gpu_set(g, GS_M_PSTATE, 0);
    gs_gpu_set(g, GS_M_THROTTLE_SUPPORTED, 0x1FF);
    gs_gpu_set(g, GS_M_THROTTLE_ACTIVE, 0x1);
    gs_gpu_set(g, GS_M_THROTTLE_NS_SW_POWER, 0);
    gs_gpu_set(g, GS_M_THROTTLE_NS_SYNC_BOOST, 0);
    gs_gpu_set(g, GS_M_MEM_TOTAL, 85520809984.0);  /* 81559 MiB */
    gs_gpu_set(g, GS_M_MEM_RESERVED, 501481472.0); /* 478.25 MiB -> 479 */
    gs_gpu_set(g, GS_M_MEM_USED, 0);
    gs_gpu_set(g, GS_M_MEM_FREE, 85019328512.0); /* 81080.25 MiB -> 81081 */
    gs_gpu_set(g, GS_M_COMPUTE_MODE, 0);
    gs_gpu_set(g, GS_M_CC_MAJOR, 9);
    gs_gpu_set(g, GS_M_CC_MINOR, 0);
    gs_gpu_set(g, GS_M_UTIL_GPU, 0);
    gs_gpu_set(g, GS_M_UTIL_MEM, 0);
    gs_gpu_set(g, GS_M_ECC_MODE, 1);
    gs_gpu_set(g, GS_M_ECC_MODE_PENDING, 1);
    gs_gpu_set(g, GS_M_ECC_CORR_VOL, 0);
    gs_gpu_set(g, GS_M_ECC_UNCORR_AGG, 0);
    set_ecc(g, 2, 0); /* DRAM */
    set_ecc(g, 7, 0); /* SRAM */
    gs_gpu_set(g, GS_M_REMAP_CORR, 0);
    gs_gpu_set(g, GS_M_REMAP_UNCORR, 0);
    gs_gpu_set(g, GS_M_REMAP_PENDING, 0);
    gs_gpu_set(g, GS_M_REMAP_FAILURE, 0);
    gs_gpu_set(g, GS_M_TEMP_GPU, 41);
    gs_gpu_set(g, GS_M_TEMP_MEM, 48);
    gs_gpu_set(g, GS_M_POWER_DRAW, 69850 / 1000.0);
    gs_gpu_set(g, GS_M_POWER_AVERAGE, 69850 / 1000.0);
    gs_gpu_set(g, GS_M_POWER_INSTANT, 69620 / 1000.0);
    gs_gpu_set(g, GS_M_POWER_LIMIT, 700000 / 1000.0);
    gs_gpu_set(g, GS_M_POWER_ENFORCED_LIMIT, 700000 / 1000.0);
    gs_gpu_set(g, GS_M_POWER_DEFAULT_LIMIT, 700000 / 1000.0);
    gs_gpu_set(g, GS_M_POWER_MIN_LIMIT, 200000 / 1000.0);
    gs_gpu_set(g, GS_M_POWER_MAX_LIMIT, 700000 / 1000.0);
    gs_gpu_set(g, GS_M_CLOCK_GR, 345e6);
    gs_gpu_set(g, GS_M_CLOCK_SM, 345e6);
    gs_gpu_set(g, GS_M_CLOCK_MEM, 2619e6);
    gs_gpu_set(g, GS_M_CLOCK_VIDEO, 765e6);
    gs_gpu_set(g, GS_M_CLOCK_MAX_GR, 1980e6);
    gs_gpu_set(g, GS_M_CLOCK_MAX_SM, 1980e6);
    gs_gpu_set(g, GS_M_CLOCK_MAX_MEM, 2619e6);
    gs_gpu_set(g, GS_M_MIG_MODE, 0);
    gs_gpu_set(g, GS_M_MIG_MODE_PENDING, 0);
    return s;
}

/* Formats one row of `fields` into a static buffer. */
static const char *row(const char *fields, const struct gs_snapshot *s, unsigned gpu,
                       const struct gs_proc *p, unsigned flags, int header)
{
    static char out[8192];
    struct gs_qf_sel sel;
    FILE *f = fmemopen(out, sizeof out, "w");

    assert_non_null(f);
    assert_int_equal(gs_qf_parse(&sel, p ? GS_QF_APPS : GS_QF_GPU, fields, NULL), GS_OK);
    if (header)
        assert_int_equal(gs_qf_write_header(f, &sel), GS_OK);
    else
        assert_int_equal(gs_qf_write_row(f, &sel, s, gpu, p, flags), GS_OK);
    fclose(f);
    gs_qf_sel_free(&sel);
    return out;
}

static const char *cell(const char *field, const struct gs_snapshot *s, unsigned flags)
{
    static char out[GS_QF_CELL_MAX];
    const struct gs_qfield *f = gs_qf_find(GS_QF_GPU, field);

    assert_non_null(f);
    gs_qf_cell(f, s, 0, NULL, flags, out, sizeof out);
    return out;
}

/* --- field table ------------------------------------------------------------------------- */

static void lookup_names_and_aliases(void **state)
{
    const struct gs_qfield *f;
    (void)state;

    f = gs_qf_find(GS_QF_GPU, "gpu_name");
    assert_non_null(f);
    assert_string_equal(gs_qf_name(f), "name");
    assert_ptr_equal(gs_qf_find(GS_QF_GPU, "clocks_throttle_reasons.active"),
                     gs_qf_find(GS_QF_GPU, "clocks_event_reasons.active"));
    assert_ptr_equal(gs_qf_find(GS_QF_GPU, "clocks.sm"),
                     gs_qf_find(GS_QF_GPU, "clocks.current.sm"));
    assert_ptr_equal(gs_qf_find(GS_QF_GPU, "gpu.power.current_limit"),
                     gs_qf_find(GS_QF_GPU, "enforced.power.limit"));
    assert_ptr_equal(gs_qf_find(GS_QF_GPU, "retired_pages.sbe"),
                     gs_qf_find(GS_QF_GPU, "retired_pages.single_bit_ecc.count"));
    assert_string_equal(gs_qf_unit(gs_qf_find(GS_QF_GPU, "memory.used")), "MiB");
    assert_string_equal(gs_qf_unit(gs_qf_find(GS_QF_GPU, "temperature.gpu")), "");
    assert_string_equal(gs_qf_unit(gs_qf_find(GS_QF_GPU, "power_smoothing.window_multiplier")),
                        "ms");
    assert_null(gs_qf_find(GS_QF_GPU, "device_minor"));
    assert_null(gs_qf_find(GS_QF_GPU, "Name")); /* case matters, as in nvidia-smi */
    assert_null(gs_qf_find(GS_QF_GPU, "pid"));  /* that one belongs to compute-apps */
    assert_null(gs_qf_find(GS_QF_GPU, "Section about memory properties"));
    assert_string_equal(gs_qf_name(gs_qf_find(GS_QF_APPS, "used_memory")), "used_gpu_memory");
    assert_string_equal(gs_qf_name(gs_qf_find(GS_QF_APPS, "name")), "process_name");
    /* the union of the 590.48.01 (212), 595.x (202) and 610.57 (241) --help-query-gpu lists,
     * which is 610's */
    assert_int_equal(gs_qf_count(GS_QF_GPU), 241);
    /* by branch: 595 dropped the first power_smoothing fields, which 610 lists again */
    f = gs_qf_find(GS_QF_GPU, "power_smoothing.primary_power_floor");
    assert_true(gs_qf_on_driver(f, 590) && gs_qf_on_driver(f, 575) && !gs_qf_on_driver(f, 595) &&
                !gs_qf_on_driver(f, 609) && gs_qf_on_driver(f, 610) && gs_qf_on_driver(f, 0));
    f = gs_qf_find(GS_QF_GPU, "kmd_version");
    assert_true(!gs_qf_on_driver(f, 590) && gs_qf_on_driver(f, 595) && gs_qf_on_driver(f, 610));
    f = gs_qf_find(GS_QF_GPU, "bbx.time_run");
    assert_true(!gs_qf_on_driver(f, 595) && gs_qf_on_driver(f, 610));
    assert_true(gs_qf_on_driver(gs_qf_find(GS_QF_GPU, "name"), 550));
    {
        struct gs_qf_sel sel;
        struct gs_err e = {0};
        assert_int_equal(gs_qf_parse(&sel, GS_QF_GPU, "index,bbx.time_run", NULL), GS_OK);
        assert_int_equal(gs_qf_check_driver(&sel, 610, &e), GS_OK);
        assert_int_equal(gs_qf_check_driver(&sel, 595, &e), GS_EUSAGE);
        assert_string_equal(e.msg, "Field \"bbx.time_run\" is not a valid field to query.");
        gs_qf_sel_free(&sel);
    }
    assert_int_equal(gs_qf_count(GS_QF_APPS), 8);
}

static void parse_reports_unknown_field_like_nvidia_smi(void **state)
{
    struct gs_qf_sel sel;
    struct gs_err err = {0};
    (void)state;

    assert_int_equal(gs_qf_parse(&sel, GS_QF_GPU, "index,device_minor,name", &err), GS_EUSAGE);
    assert_string_equal(err.msg, "Field \"device_minor\" is not a valid field to query.");
    assert_int_equal(gs_rc_exit_code(err.rc), 2);
    assert_null(sel.f);
    gs_qf_sel_free(&sel);
    assert_int_equal(gs_qf_parse(&sel, GS_QF_GPU, "index,", &err), GS_EUSAGE);
    assert_string_equal(err.msg, "Field \"\" is not a valid field to query.");
    assert_int_equal(gs_qf_parse(&sel, GS_QF_APPS, "pid,memory.used", &err), GS_EUSAGE);
    assert_string_equal(err.msg, "Field \"memory.used\" is not a valid field to query.");
}

static void parse_keeps_names_as_queried(void **state)
{
    struct gs_qf_sel sel;
    (void)state;

    assert_int_equal(gs_qf_parse(&sel, GS_QF_GPU, "index, gpu_name ,clocks.sm,index", NULL), GS_OK);
    assert_int_equal(sel.n, 4);
    assert_string_equal(sel.name[1], "gpu_name");
    assert_string_equal(gs_qf_name(sel.f[1]), "name");
    assert_ptr_equal(sel.f[0], sel.f[3]); /* repeats are allowed */
    gs_qf_sel_free(&sel);
    gs_qf_sel_free(&sel); /* twice is safe */
}

static void header_repeats_queried_name_and_unit(void **state)
{
    (void)state;
    assert_string_equal(row("index,memory.used,clocks.sm,temperature.gpu,fan.speed,"
                            "clocks_event_reasons_counters.sync_boost,power.draw",
                            NULL, 0, NULL, 0, 1),
                        "index, memory.used [MiB], clocks.sm [MHz], temperature.gpu, "
                        "fan.speed [%], clocks_event_reasons_counters.sync_boost [us], "
                        "power.draw [W]\n");
}

static void want_flags_follow_fields(void **state)
{
    struct gs_qf_sel sel;
    static char all[65536];
    (void)state;

    assert_int_equal(gs_qf_parse(&sel, GS_QF_GPU, "index,utilization.gpu", NULL), GS_OK);
    assert_int_equal(gs_qf_want(&sel), 0);
    gs_qf_sel_free(&sel);
    assert_int_equal(gs_qf_parse(&sel, GS_QF_GPU, "ecc.errors.corrected.volatile.dram", NULL),
                     GS_OK);
    assert_true(gs_qf_want(&sel) & GS_WANT_HEALTH);
    gs_qf_sel_free(&sel);
    assert_int_equal(gs_qf_parse(&sel, GS_QF_GPU, "power.max_limit,vbios_version", NULL), GS_OK);
    assert_true(gs_qf_want(&sel) & GS_WANT_STATIC);
    gs_qf_sel_free(&sel);
    assert_int_equal(gs_qf_parse(&sel, GS_QF_APPS, "pid", NULL), GS_OK);
    assert_true(gs_qf_want(&sel) & GS_WANT_PROCS);
    gs_qf_sel_free(&sel);

    /* every field at once still never asks for the slow PCIe throughput or GPM reads */
    {
        FILE *f = fmemopen(all, sizeof all, "w");
        char line[256], *p = all, *end;
        size_t used = 0;
        static char list[16384];

        assert_int_equal(gs_qf_write_help(f, GS_QF_GPU, 0), GS_OK);
        fclose(f);
        list[0] = '\0';
        /* a field line follows an empty line and starts with its quoted name */
        while ((p = strstr(p, "\n\n\"")) != NULL) {
            p += 2;
            end = strchr(p + 1, '"');
            snprintf(line, sizeof line, "%s%.*s", used ? "," : "", (int)(end - p - 1), p + 1);
            strcat(list, line);
            used++;
        }
        assert_int_equal(used, 241);
        assert_int_equal(gs_qf_parse(&sel, GS_QF_GPU, list, NULL), GS_OK);
        assert_int_equal(gs_qf_want(&sel) & (GS_WANT_PCIE_TPUT | GS_WANT_GPM | GS_WANT_GPM_WAIT),
                         0);
        gs_qf_sel_free(&sel);
    }
}

static void help_lists_fields_with_aliases(void **state)
{
    static char out[65536];
    FILE *f = fmemopen(out, sizeof out, "w");
    (void)state;

    assert_int_equal(gs_qf_write_help(f, GS_QF_GPU, 0), GS_OK);
    fclose(f);
    assert_non_null(strstr(out, "List of valid properties to query for the switch "
                                "\"--query-gpu\":\n\n\"timestamp\"\n"));
    assert_non_null(strstr(out, "\n\"name\" or \"gpu_name\"\n"));
    assert_non_null(strstr(out, "\nSection about clocks_event_reasons properties\n"));
    assert_non_null(strstr(out, "\n\"clocks_event_reasons.sync_boost\" or "
                                "\"clocks_throttle_reasons.sync_boost\"\n"));
    assert_non_null(strstr(out, "\n\"hostname\"\n"));
    /* tools find the fields by the lines that start with a quote: only field lines may */
    for (const char *p = strstr(out, "\n\""); p; p = strstr(p + 1, "\n\""))
        assert_true(p[-1] == '\n');
    f = fmemopen(out, sizeof out, "w");
    assert_int_equal(gs_qf_write_help(f, GS_QF_APPS, 0), GS_OK);
    fclose(f);
    assert_non_null(strstr(out, "\"--query-compute-apps\":\n\nSection about Active Compute "
                                "Processes properties\n"));
    assert_non_null(strstr(out, "\n\"used_gpu_memory\" or \"used_memory\"\n"));
}

/* --- cells from captures ------------------------------------------------------------------ */

static void h100_idle_row_matches_capture(void **state)
{
    struct gs_snapshot *s = h100_idle();
    (void)state;

    /* the capture's own cells for these fields, in the capture's order */
    assert_string_equal(
        row("driver_version,count,name,serial,uuid,pci.bus_id,pci.domain,pci.bus,pci.device,"
            "pci.device_id,pci.sub_device_id,pcie.link.gen.current,pcie.link.gen.gpucurrent,"
            "pcie.link.gen.max,pcie.link.gen.gpumax,pcie.link.width.current,pcie.link.width.max,"
            "index,display_mode,persistence_mode,vbios_version,fan.speed,pstate,"
            "clocks_event_reasons.supported,clocks_event_reasons.active,"
            "clocks_event_reasons.gpu_idle,clocks_event_reasons.applications_clocks_setting,"
            "clocks_event_reasons_counters.sw_power_cap,clocks_event_reasons_counters.sync_boost,"
            "memory.total,memory.reserved,memory.used,memory.free,compute_mode,compute_cap,"
            "utilization.gpu,utilization.memory",
            s, 0, NULL, 0, 0),
        "590.48.01, 1, NVIDIA H100 80GB HBM3, 0000000000000, "
        "GPU-00000000-0000-0000-0000-000000000000, 00000000:00:09.0, 0x0000, 0x00, 0x09, "
        "0x233010DE, 0x16C110DE, 5, 5, 5, 5, 16, 16, 0, "
        "[Requested functionality has been deprecated], Enabled, 96.00.A5.00.01, [N/A], P0, "
        "0x00000000000001FF, 0x0000000000000001, Active, Not Active, 0 us, 0 us, 81559 MiB, "
        "479 MiB, 0 MiB, 81081 MiB, Default, 9.0, 0 %, 0 %\n");
    assert_string_equal(
        row("ecc.mode.current,ecc.mode.pending,ecc.errors.corrected.volatile.device_memory,"
            "ecc.errors.corrected.volatile.dram,ecc.errors.corrected.volatile.register_file,"
            "ecc.errors.corrected.volatile.l1_cache,ecc.errors.corrected.volatile.sram,"
            "ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.aggregate.total,"
            "retired_pages.single_bit_ecc.count,retired_pages.double_bit.count,"
            "retired_pages.pending,remapped_rows.correctable,remapped_rows.uncorrectable,"
            "remapped_rows.pending,remapped_rows.failure,temperature.gpu,temperature.memory,"
            "power.management,power.draw,power.draw.average,power.draw.instant,power.limit,"
            "enforced.power.limit,power.default_limit,power.min_limit,power.max_limit,"
            "module.power.draw.average,clocks.current.graphics,clocks.current.sm,"
            "clocks.current.memory,clocks.current.video,clocks.applications.graphics,"
            "clocks.max.graphics,clocks.max.sm,clocks.max.memory,mig.mode.current,"
            "mig.mode.pending,fabric.health.summary,hostname",
            s, 0, NULL, 0, 0),
        "Enabled, Enabled, 0, 0, [N/A], [N/A], 0, 0, 0, [N/A], [N/A], [N/A], 0, 0, No, No, 41, "
        "48, [Requested functionality has been deprecated], 69.85 W, 69.85 W, 69.62 W, "
        "700.00 W, 700.00 W, 700.00 W, 200.00 W, 700.00 W, [N/A], 345 MHz, 345 MHz, 2619 MHz, "
        "765 MHz, [Requested functionality has been deprecated], 1980 MHz, 1980 MHz, 2619 MHz, "
        "Disabled, Disabled, N/A, [N/A]\n");
    gs_snapshot_free(s);
}

static void rtx2080_load_cells(void **state)
{
    struct gs_snapshot *s = h100_idle();
    struct gs_gpu *g = &s->gpus[0];
    (void)state;

    /* RTX 2080 SUPER, 595.71.05, under load */
    gs_gpu_set(g, GS_M_THROTTLE_ACTIVE, 0x4);
    gs_gpu_set(g, GS_M_THROTTLE_NS_SW_POWER, 212553937e-6); /* the capture's us, in seconds */
    gs_gpu_set(g, GS_M_FAN, 0.38);
    gs_gpu_set(g, GS_M_PSTATE, 2);
    gs_gpu_set(g, GS_M_UTIL_GPU, 0.08);
    gs_gpu_set(g, GS_M_UTIL_MEM, 0.03);
    gs_gpu_set(g, GS_M_UTIL_ENC, 1.0);
    gs_gpu_set(g, GS_M_POWER_DRAW, 111500 / 1000.0);
    gs_gpu_set(g, GS_M_MEM_TOTAL, 8589934592.0);
    gs_gpu_set(g, GS_M_MEM_USED, 858521600.0); /* 818.75 MiB -> 819 */
    gs_gpu_set(g, GS_M_CLOCK_MEM, 7500e6);
    gs_gpu_set(g, GS_M_CC_MAJOR, 7);
    gs_gpu_set(g, GS_M_CC_MINOR, 5);
    g->tst[GS_T_SERIAL] = GS_ST_NA;
    g->st[GS_M_TEMP_MEM] = GS_ST_NA;
    g->st[GS_M_ECC_MODE] = GS_ST_NA;
    g->st[GS_M_MIG_MODE] = GS_ST_NA;
    g->st[GS_M_POWER_AVERAGE] = GS_ST_NA;
    assert_string_equal(
        row("serial,fan.speed,pstate,clocks_event_reasons.active,clocks_event_reasons.gpu_idle,"
            "clocks_event_reasons.sw_power_cap,clocks_event_reasons_counters.sw_power_cap,"
            "memory.total,memory.used,compute_cap,utilization.gpu,utilization.memory,"
            "utilization.encoder,ecc.mode.current,temperature.memory,power.draw,"
            "power.draw.average,clocks.current.memory,mig.mode.current,fabric.state",
            s, 0, NULL, 0, 0),
        "[N/A], 38 %, P2, 0x0000000000000004, Not Active, Active, 212553937 us, 8192 MiB, "
        "819 MiB, 7.5, 8 %, 3 %, 100 %, [N/A], N/A, 111.50 W, [N/A], 7500 MHz, [N/A], N/A\n");
    gs_snapshot_free(s);
}

static void nounits_drops_units_from_cells_only(void **state)
{
    struct gs_snapshot *s = h100_idle();
    const char *f =
        "memory.reserved,power.draw,clocks.sm,fan.speed,utilization.gpu,"
        "clocks_event_reasons_counters.sync_boost,temperature.gpu,clocks.applications.gr";
    (void)state;

    assert_string_equal(row(f, s, 0, NULL, GS_QF_NOUNITS, 0),
                        "479, 69.85, 345, [N/A], 0, 0, 41, "
                        "[Requested functionality has been deprecated]\n");
    assert_string_equal(row(f, s, 0, NULL, GS_QF_NOUNITS, 1),
                        "memory.reserved [MiB], power.draw [W], clocks.sm [MHz], fan.speed [%], "
                        "utilization.gpu [%], clocks_event_reasons_counters.sync_boost [us], "
                        "temperature.gpu, clocks.applications.gr [MHz]\n");
    gs_snapshot_free(s);
}

static void tokens_for_absent_noperm_error_lost(void **state)
{
    struct gs_snapshot *s = h100_idle();
    struct gs_gpu *g = &s->gpus[0];
    (void)state;

    g->st[GS_M_POWER_DRAW] = GS_ST_NOPERM;
    g->st[GS_M_TEMP_GPU] = GS_ST_ERROR;
    g->st[GS_M_CLOCK_SM] = GS_ST_LOST;
    g->st[GS_M_UTIL_GPU] = GS_ST_NA;
    g->st[GS_M_TEMP_MEM] = GS_ST_NOPERM;
    g->ecc_loc_st[0][0][2] = GS_ST_ERROR;
    assert_string_equal(cell("power.draw", s, 0), "[Insufficient Permissions]");
    assert_string_equal(cell("power.draw", s, GS_QF_NOUNITS), "[Insufficient Permissions]");
    assert_string_equal(cell("temperature.gpu", s, 0), "[Unknown Error]");
    assert_string_equal(cell("clocks.sm", s, 0), "[GPU is lost]");
    assert_string_equal(cell("utilization.gpu", s, 0), "[N/A]");
    assert_string_equal(cell("temperature.memory", s, 0), "[Insufficient Permissions]");
    assert_string_equal(cell("ecc.errors.corrected.volatile.dram", s, 0), "[Unknown Error]");
    assert_string_equal(cell("inforom.img", s, 0), "[N/A]");
    assert_string_equal(cell("fabric.cliqueId", s, 0), "N/A");

    /* a lost GPU as the backend leaves it: readings LOST or cleared, identity read earlier,
     * index and the fixed deprecation answers stay */
    g->lost = 1;
    g->tst[GS_T_SERIAL] = GS_ST_NA;
    g->st[GS_M_MEM_USED] = GS_ST_LOST;
    g->st[GS_M_MEM_FREE] = GS_ST_NA;
    memset(g->ecc_loc_st, 0, sizeof g->ecc_loc_st);
    assert_string_equal(cell("memory.used", s, 0), "[GPU is lost]");
    assert_string_equal(cell("memory.free", s, GS_QF_NOUNITS), "[GPU is lost]");
    assert_string_equal(cell("pci.bus", s, 0), "0x00");
    assert_string_equal(cell("ecc.errors.corrected.volatile.sram", s, 0), "[GPU is lost]");
    assert_string_equal(cell("inforom.img", s, 0), "[GPU is lost]");
    assert_string_equal(cell("pci.bus_id", s, 0), "00000000:00:09.0");
    assert_string_equal(cell("serial", s, 0), "[GPU is lost]");
    assert_string_equal(cell("index", s, 0), "0");
    assert_string_equal(cell("display_mode", s, 0),
                        "[Requested functionality has been deprecated]");
    assert_string_equal(cell("driver_version", s, 0), "590.48.01");

    s->sys.driver_st = GS_ST_NA;
    assert_string_equal(cell("kmd_version", s, 0), "[N/A]");
    gs_snapshot_free(s);
}

/* The -q detail readings as --query-gpu cells: NVML's enum values as nvidia-smi's words, the
 * bare "N/A" of fabric.* when absent, and the want bit they need. */
static void detail_cells(void **state)
{
    struct gs_snapshot *s = h100_idle();
    struct gs_gpu *g = &s->gpus[0];
    struct gs_qf_sel sel;
    static const char *const modes[] = {"None", "HMM", "ATS"};
    (void)state;

    for (int m = 0; m < 3; m++) {
        gs_gpu_set(g, GS_M_ADDRESSING_MODE, m);
        assert_string_equal(cell("addressing_mode", s, 0), modes[m]);
    }
    gs_gpu_set(g, GS_M_ADDRESSING_MODE, 9); /* a value newer than our table */
    assert_string_equal(cell("addressing_mode", s, 0), "[Unknown Error]");
    gs_gpu_set(g, GS_M_RECOVERY_ACTION, 0);
    assert_string_equal(cell("gpu_recovery_action", s, 0), "None");
    gs_gpu_set(g, GS_M_RECOVERY_ACTION, 4);
    assert_string_equal(cell("gpu_recovery_action", s, 0), "Drain and Reset");
    gs_gpu_set(g, GS_M_C2C_MODE, 0);
    assert_string_equal(cell("c2c.mode", s, 0), "Disabled");
    gs_gpu_set(g, GS_M_SRAM_PARITY_VOL, 3);
    gs_gpu_set(g, GS_M_SRAM_THRESHOLD, 1);
    assert_string_equal(cell("ecc.errors.uncorrected.volatile.sram.parity", s, 0), "3");
    assert_string_equal(cell("ecc.errors.uncorrected.aggregate.sram.secded", s, 0), "[N/A]");
    assert_string_equal(cell("ecc.errors.uncorrected.aggregate.sram.thresholdExceeded", s, 0),
                        "Yes");
    gs_gpu_set(g, GS_M_EDPP_MULTIPLIER, 1.0);
    assert_string_equal(cell("edpp_multiplier", s, 0), "100.00 %");
    assert_string_equal(cell("edpp_multiplier", s, GS_QF_NOUNITS), "100.00");
    gs_gpu_set(g, GS_M_REMAP_HIST_MAX, 2560);
    assert_string_equal(cell("remapped_rows.histogram.max", s, 0), "2560");

    /* fabric: bare N/A until the registration is read, then its words */
    assert_string_equal(cell("fabric.state", s, 0), "N/A");
    assert_string_equal(cell("fabric.clusterUuid", s, 0), "N/A");
    gs_gpu_set(g, GS_M_FABRIC_STATE, 2);
    assert_string_equal(cell("fabric.state", s, 0), "In Progress");
    gs_gpu_set(g, GS_M_FABRIC_STATE, 3);
    gs_gpu_set(g, GS_M_FABRIC_STATUS, 0);
    gs_gpu_set(g, GS_M_FABRIC_CLIQUE, 32766);
    set_text(g, GS_T_FABRIC_CLUSTER, "00000000-0000-0000-0000-000000000000");
    assert_string_equal(cell("fabric.state", s, 0), "Completed");
    assert_string_equal(cell("fabric.status", s, 0), "Success");
    assert_string_equal(cell("fabric.cliqueId", s, 0), "32766");
    assert_string_equal(cell("fabric.clusterUuid", s, 0), "00000000-0000-0000-0000-000000000000");
    gs_gpu_set(g, GS_M_FABRIC_STATUS, 3);
    assert_string_equal(cell("fabric.status", s, 0), "Not Supported");
    /* its health: bare N/A until read, then nvidia-smi's words */
    assert_string_equal(cell("fabric.health.summary", s, 0), "N/A");
    assert_string_equal(cell("fabric.health.route_unhealthy", s, 0), "N/A");
    gs_gpu_set(g, GS_M_FABRIC_HEALTH_SUMMARY, 2);
    gs_gpu_set(g, GS_M_FABRIC_HEALTH_BW_DEGRADED, 0);
    gs_gpu_set(g, GS_M_FABRIC_HEALTH_ROUTE_UNHEALTHY, 1);
    gs_gpu_set(g, GS_M_FABRIC_HEALTH_CONFIG, 4);
    assert_string_equal(cell("fabric.health.summary", s, 0), "Unhealthy");
    assert_string_equal(cell("fabric.health.bandwidth", s, 0), "Full");
    assert_string_equal(cell("fabric.health.route_unhealthy", s, 0), "True");
    assert_string_equal(cell("fabric.health.route_recovery_in_progress", s, 0), "N/A");
    assert_string_equal(cell("fabric.health.incorrect_configuration", s, 0), "No Partition");
    assert_string_equal(cell("fabric.health.partition_assigned", s, 0), "N/A");
    gs_gpu_set(g, GS_M_FABRIC_HEALTH_PARTITION, 1);
    assert_string_equal(cell("fabric.health.partition_assigned", s, 0), "True");
    gs_gpu_set(g, GS_M_FABRIC_HEALTH_CONFIG, 9); /* a value newer than our table */
    assert_string_equal(cell("fabric.health.incorrect_configuration", s, 0), "[Unknown Error]");

    assert_string_equal(gs_qf_value_name(GS_QN_VIRT, 1), "Pass-Through");
    assert_string_equal(gs_qf_value_name(GS_QN_HOST_VGPU, 1), "SR-IOV");
    assert_null(gs_qf_value_name(GS_QN_VIRT, -1));
    assert_null(gs_qf_value_name(GS_QN_VIRT, 0.0 / 0.0));
    assert_null(gs_qf_value_name(GS_QN__COUNT, 0));

    /* what needs the detail readings asks for them; the recovery action is a field value of
     * every cycle */
    assert_int_equal(gs_qf_parse(&sel, GS_QF_GPU, "addressing_mode,fabric.state", NULL), GS_OK);
    assert_true(gs_qf_want(&sel) & GS_WANT_DETAIL);
    gs_qf_sel_free(&sel);
    assert_int_equal(gs_qf_parse(&sel, GS_QF_GPU, "gpu_recovery_action", NULL), GS_OK);
    assert_false(gs_qf_want(&sel) & GS_WANT_DETAIL);
    gs_qf_sel_free(&sel);
    gs_snapshot_free(s);
}

static void number_rules(void **state)
{
    struct gs_snapshot *s = h100_idle();
    struct gs_gpu *g = &s->gpus[0];
    (void)state;

    gs_gpu_set(g, GS_M_MEM_USED, 1.0); /* one byte is a whole MiB */
    assert_string_equal(cell("memory.used", s, 0), "1 MiB");
    gs_gpu_set(g, GS_M_MEM_USED, 1048576.0);
    assert_string_equal(cell("memory.used", s, 0), "1 MiB");
    gs_gpu_set(g, GS_M_MEM_USED, 1048577.0);
    assert_string_equal(cell("memory.used", s, 0), "2 MiB");
    gs_gpu_set(g, GS_M_POWER_DRAW, 631950 / 1000.0);
    assert_string_equal(cell("power.draw", s, 0), "631.95 W");
    gs_gpu_set(g, GS_M_POWER_DRAW, 26200 / 1000.0);
    assert_string_equal(cell("power.draw", s, 0), "26.20 W");
    gs_gpu_set(g, GS_M_UTIL_GPU, 0.07); /* 7 %: 0.07 * 100 is 7.000000000000001 */
    assert_string_equal(cell("utilization.gpu", s, 0), "7 %");
    gs_gpu_set(g, GS_M_UTIL_GPU, 0.29);
    assert_string_equal(cell("utilization.gpu", s, 0), "29 %");
    gs_gpu_set(g, GS_M_CLOCK_MEM, 11251e6);
    assert_string_equal(cell("clocks.mem", s, 0), "11251 MHz");
    gs_gpu_set(g, GS_M_COMPUTE_MODE, 3);
    assert_string_equal(cell("compute_mode", s, 0), "Exclusive_Process");
    gs_gpu_set(g, GS_M_COMPUTE_MODE, 2);
    assert_string_equal(cell("compute_mode", s, 0), "Prohibited");
    gs_gpu_set(g, GS_M_REMAP_PENDING, 1);
    assert_string_equal(cell("remapped_rows.pending", s, 0), "Yes");
    gs_gpu_set(g, GS_M_PCI_BUS, 0x0C);
    assert_string_equal(cell("pci.bus", s, 0), "0x0C");
    gs_gpu_set(g, GS_M_THROTTLE_ACTIVE, 0x60);
    assert_string_equal(cell("clocks_throttle_reasons.hw_thermal_slowdown", s, 0), "Active");
    assert_string_equal(cell("clocks_event_reasons.sw_thermal_slowdown", s, 0), "Active");
    assert_string_equal(cell("clocks_event_reasons.hw_slowdown", s, 0), "Not Active");
    g->st[GS_M_CC_MINOR] = GS_ST_NA;
    assert_string_equal(cell("compute_cap", s, 0), "[N/A]");
    gs_snapshot_free(s);
}

static void timestamp_format(void **state)
{
    char buf[40];
    (void)state;

    setenv("TZ", "UTC", 1);
    tzset();
    assert_int_equal(gs_qf_timestamp(1784016758.696, buf, sizeof buf), 23);
    assert_string_equal(buf, "2026/07/14 08:12:38.696");
    gs_qf_timestamp(0.9999, buf, sizeof buf); /* milliseconds are cut, not rounded up */
    assert_string_equal(buf, "1970/01/01 00:00:00.999");
    gs_qf_timestamp(86400.0, buf, sizeof buf);
    assert_string_equal(buf, "1970/01/02 00:00:00.000");
}

static void compute_app_rows(void **state)
{
    struct gs_snapshot *s = h100_idle();
    struct gs_proc p = {0};
    const char *all = "timestamp,gpu_name,gpu_bus_id,gpu_serial,gpu_uuid,pid,process_name,"
                      "used_gpu_memory";
    (void)state;

    setenv("TZ", "UTC", 1);
    tzset();
    s->t_real = 1784016773.5;
    p.pid = 11345;
    p.type = GS_PROC_COMPUTE;
    p.mem_st = GS_ST_OK;
    p.gpu_mem_bytes = 15690ULL * 1048576;
    strcpy(p.name, "./gpu_burn");
    assert_string_equal(row(all, s, 0, &p, 0, 1),
                        "timestamp, gpu_name, gpu_bus_id, gpu_serial, gpu_uuid, pid, "
                        "process_name, used_gpu_memory [MiB]\n");
    assert_string_equal(row(all, s, 0, &p, 0, 0),
                        "2026/07/14 08:12:53.500, NVIDIA H100 80GB HBM3, 00000000:00:09.0, "
                        "0000000000000, GPU-00000000-0000-0000-0000-000000000000, 11345, "
                        "./gpu_burn, 15690 MiB\n");
    /* NVML's name wins over procfs; argv[0] comes before the short name */
    p.host_st = GS_ST_OK;
    strcpy(p.cmdline, "/root/tools/memhog --size 2g");
    strcpy(p.name, "memhog");
    assert_string_equal(row("process_name", s, 0, &p, 0, 0), "/root/tools/memhog\n");
    p.nvml_name_st = GS_ST_OK;
    strcpy(p.nvml_name, "./memhog");
    assert_string_equal(row("name", s, 0, &p, 0, 0), "./memhog\n");
    p.nvml_name_st = GS_ST_NA;
    p.host_st = GS_ST_NA;
    assert_string_equal(row("name", s, 0, &p, 0, 0), "memhog\n");

    p.mem_st = GS_ST_NA; /* Windows WDDM: NVML_VALUE_NOT_AVAILABLE */
    p.name[0] = '\0';
    assert_string_equal(row("pid,name,used_memory", s, 0, &p, GS_QF_NOUNITS, 0),
                        "11345, [N/A], [N/A]\n");
    p.nvml_name_st = GS_ST_NOPERM;
    assert_string_equal(row("name", s, 0, &p, 0, 0), "[Insufficient Permissions]\n");
    assert_string_equal(row("pid,name,used_memory", s, 0, &p, 0, 1),
                        "pid, name, used_memory [MiB]\n");
    gs_snapshot_free(s);
}

/* --- options --------------------------------------------------------------------------- */

static int parse(struct gs_query_opts *o, struct gs_err *err, ...)
{
    char *argv[32] = {"query"};
    int argc = 1;
    va_list ap;

    va_start(ap, err);
    while ((argv[argc] = va_arg(ap, char *)) != NULL)
        argc++;
    va_end(ap);
    memset(err, 0, sizeof *err);
    return gs_query_parse(argc, argv, o, err);
}

static void options_both_spellings(void **state)
{
    struct gs_query_opts o;
    struct gs_err err;
    (void)state;

    assert_int_equal(parse(&o, &err, "--query-gpu=index,name", "--format=csv,noheader,nounits",
                           "-i", "0,1", "-f", "/tmp/x.csv", NULL),
                     GS_OK);
    assert_string_equal(o.gpu_fields, "index,name");
    assert_int_equal(o.flags, GS_QF_NOHEADER | GS_QF_NOUNITS);
    assert_string_equal(o.ids, "0,1");
    assert_string_equal(o.file, "/tmp/x.csv");
    assert_int_equal(o.loop_ms, 0);

    assert_int_equal(parse(&o, &err, "--query-compute-apps", "pid", "--format", "nounits,csv",
                           "--id=GPU-1", "--filename=out", "-l", NULL),
                     GS_OK);
    assert_string_equal(o.app_fields, "pid");
    assert_int_equal(o.flags, GS_QF_NOUNITS);
    assert_string_equal(o.ids, "GPU-1");
    assert_int_equal(o.loop_ms, GS_QUERY_DEFAULT_LOOP_MS); /* bare -l: 5 s, like nvidia-smi */

    assert_int_equal(parse(&o, &err, "--query-gpu=index", "-l", "2", "--format=csv", NULL), GS_OK);
    assert_int_equal(o.loop_ms, 2000);
    assert_int_equal(parse(&o, &err, "--query-gpu=index", "--loop=3", "--format=csv", NULL), GS_OK);
    assert_int_equal(o.loop_ms, 3000);
    assert_int_equal(parse(&o, &err, "--query-gpu=index", "-lms", "250", "--format=csv", NULL),
                     GS_OK);
    assert_int_equal(o.loop_ms, 250);
    assert_int_equal(parse(&o, &err, "--loop-ms=100", "--query-gpu=index", "--format=csv", NULL),
                     GS_OK);
    assert_int_equal(o.loop_ms, 100);

    /* help needs nothing else */
    assert_int_equal(parse(&o, &err, "--help-query-gpu", NULL), GS_OK);
    assert_true(o.help_gpu);
    assert_int_equal(parse(&o, &err, "-h", NULL), GS_OK);
    assert_true(o.help);
    assert_int_equal(parse(&o, &err, "--help-query-compute-apps", NULL), GS_OK);
    assert_true(o.help_apps);
}

static void option_errors(void **state)
{
    struct gs_query_opts o;
    struct gs_err err;
    (void)state;

    assert_int_equal(parse(&o, &err, "--query-gpu=index", NULL), GS_EUSAGE);
    assert_string_equal(err.msg, "\"--format=\" switch is missing. "
                                 "Please run 'gpuscope query -h' for help.");
    assert_int_equal(gs_rc_exit_code(err.rc), 2);
    assert_int_equal(parse(&o, &err, "--format=csv", NULL), GS_EUSAGE);
    assert_string_equal(err.msg, "Invalid combination of input arguments. "
                                 "Please run 'gpuscope query -h' for help.");
    assert_int_equal(
        parse(&o, &err, "--query-gpu=index", "--query-compute-apps=pid", "--format=csv", NULL),
        GS_EUSAGE);
    assert_string_equal(err.msg, "Only one --query-* switch can be used at a time.");
    assert_int_equal(parse(&o, &err, "--query-gpu=index", "--format=xml", NULL), GS_EUSAGE);
    assert_string_equal(err.msg, "\"xml\" is not a valid format option. "
                                 "Please run 'gpuscope query -h' for help.");
    assert_int_equal(parse(&o, &err, "--query-gpu=index", "--format=noheader", NULL), GS_EUSAGE);
    assert_string_equal(err.msg, "\"csv\" is a mandatory --format option. "
                                 "Please run 'gpuscope query -h' for help.");
    assert_int_equal(parse(&o, &err, "--query-gpu=index", "--format=csv", "-lms100", NULL),
                     GS_EUSAGE);
    assert_string_equal(err.msg, "ERROR: Option -lms100 is not recognized. "
                                 "Please run 'gpuscope query -h' for help.");
    assert_int_equal(parse(&o, &err, "--query-gpu=index", "--format=csv", "-i", NULL), GS_EUSAGE);
    assert_string_equal(err.msg, "ERROR: Option -i is missing its value. "
                                 "Please run 'gpuscope query -h' for help.");
    assert_int_equal(parse(&o, &err, "--query-gpu=index", "--format=csv", "-lms", "0", NULL),
                     GS_EUSAGE);
    assert_string_equal(err.msg, "ERROR: Option -lms has an invalid value \"0\". "
                                 "Please run 'gpuscope query -h' for help.");
    assert_int_equal(parse(&o, &err, "--query-gpu=index", "--format=csv", "--loop=x", NULL),
                     GS_EUSAGE);
    assert_int_equal(parse(&o, &err, "--query-gpu=index", "--format=csv", "-l", "x", NULL),
                     GS_EUSAGE); /* -l takes 5 s, then "x" is no option */
    assert_string_equal(err.msg, "ERROR: Option x is not recognized. "
                                 "Please run 'gpuscope query -h' for help.");
    assert_int_equal(parse(&o, &err, "--help=1", NULL), GS_EUSAGE);
    assert_int_equal(parse(&o, &err, "--query-gpu=index", "--format=csv", "--id=", NULL), GS_OK);
}

/* --- -i ------------------------------------------------------------------------------------- */

static struct gs_snapshot *three_gpus(void)
{
    struct gs_snapshot *s = NULL;
    static const char *bus[] = {"00000000:01:00.0", "00000000:0C:00.0", "00000001:81:00.0"};
    static const char *uuid[] = {"GPU-aaaaaaaa-0000-0000-0000-000000000000",
                                 "GPU-bbbbbbbb-0000-0000-0000-000000000000",
                                 "GPU-cccccccc-0000-0000-0000-000000000000"};

    assert_int_equal(gs_snapshot_new(&s, 3, 0, NULL), GS_OK);
    for (unsigned i = 0; i < 3; i++) {
        s->gpus[i].index = i;
        set_text(&s->gpus[i], GS_T_PCI_BUS_ID, bus[i]);
        set_text(&s->gpus[i], GS_T_UUID, uuid[i]);
    }
    return s;
}

static void select_by_index_uuid_and_bus_id(void **state)
{
    struct gs_snapshot *s = three_gpus();
    unsigned char sel[3];
    struct gs_err err = {0};
    (void)state;

    assert_int_equal(gs_query_select(NULL, s, sel, &err), 3);
    assert_int_equal(gs_query_select("1", s, sel, &err), 1);
    assert_memory_equal(sel, ((unsigned char[]){0, 1, 0}), 3);
    assert_int_equal(gs_query_select("2,0,2", s, sel, &err), 2);
    assert_memory_equal(sel, ((unsigned char[]){1, 0, 1}), 3);
    assert_int_equal(gs_query_select("gpu-BBBBBBBB-0000-0000-0000-000000000000", s, sel, &err), 1);
    assert_int_equal(sel[1], 1);
    assert_int_equal(gs_query_select("00000000:0c:00.0", s, sel, &err), 1);
    assert_int_equal(sel[1], 1);
    assert_int_equal(gs_query_select("0000:0C:00.0", s, sel, &err), 1);
    assert_int_equal(gs_query_select("0C:00.0", s, sel, &err), 1);
    assert_int_equal(sel[1], 1);
    assert_int_equal(gs_query_select("1:81:00", s, sel, &err), 1);
    assert_int_equal(sel[2], 1);
    assert_int_equal(gs_query_select(" 0 , 00000001:81:00.0", s, sel, &err), 2);

    assert_int_equal(gs_query_select("3", s, sel, &err), GS_ENOGPU);
    assert_string_equal(err.msg, "No devices were found");
    assert_int_equal(gs_rc_exit_code(err.rc), 6);
    assert_int_equal(gs_query_select("0,9", s, sel, &err), GS_ENOGPU);
    assert_int_equal(gs_query_select("GPU-nope", s, sel, &err), GS_ENOGPU);
    assert_int_equal(gs_query_select("zz:00.0", s, sel, &err), GS_ENOGPU);
    assert_int_equal(gs_query_select("", s, sel, &err), GS_ENOGPU);
    gs_snapshot_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lookup_names_and_aliases),
        cmocka_unit_test(parse_reports_unknown_field_like_nvidia_smi),
        cmocka_unit_test(parse_keeps_names_as_queried),
        cmocka_unit_test(header_repeats_queried_name_and_unit),
        cmocka_unit_test(want_flags_follow_fields),
        cmocka_unit_test(help_lists_fields_with_aliases),
        cmocka_unit_test(h100_idle_row_matches_capture),
        cmocka_unit_test(rtx2080_load_cells),
        cmocka_unit_test(nounits_drops_units_from_cells_only),
        cmocka_unit_test(tokens_for_absent_noperm_error_lost),
        cmocka_unit_test(detail_cells),
        cmocka_unit_test(number_rules),
        cmocka_unit_test(timestamp_format),
        cmocka_unit_test(compute_app_rows),
        cmocka_unit_test(options_both_spellings),
        cmocka_unit_test(option_errors),
        cmocka_unit_test(select_by_index_uuid_and_bus_id),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
