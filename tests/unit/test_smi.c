/*
 * Unit tests for nvidia-smi's printers (src/cli/smi/smi_table.c, smi_q.c, smi_fmt.c) on snapshots
 * built by hand: the -d section parser, MiB rounding, the table's fixed 91-column geometry with
 * long names, MIG devices, processes and a lost GPU, name cutting, -L's MIG lines, -q section
 * selection, and the XML's escaping and element balance. The byte-for-byte comparison with
 * real captures is tests/e2e/test_smi_capture.py; these pin the edge cases no capture has.
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

#include "cli/smi/smi.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"

static void set_text(struct gs_gpu *g, enum gs_text t, const char *v)
{
    snprintf(g->text[t], sizeof g->text[t], "%s", v);
    g->tst[t] = GS_ST_OK;
}

/* Three GPUs: a long-named one with readings, a MIG-enabled one with two devices, a lost one;
 * and three processes, one with a path longer than the table's column. */
static struct gs_snapshot *fixture(void)
{
    struct gs_snapshot *s = NULL;
    struct gs_gpu *g;

    assert_int_equal(gs_snapshot_new(&s, 3, 4, NULL), GS_OK);
    s->t_real = 1784016758.0;
    s->sys.driver_st = s->sys.nvml_st = s->sys.cuda_st = GS_ST_OK;
    strcpy(s->sys.driver_version, "595.71.05");
    strcpy(s->sys.nvml_version, "13.595.71.05");
    s->sys.cuda_version = 13020;
    s->sys.gpu_count = 3;
    for (unsigned i = 0; i < 3; i++) {
        g = &s->gpus[i];
        g->index = i;
        set_text(g, GS_T_UUID, "GPU-00000000-0000-0000-0000-000000000000");
        gs_gpu_set(g, GS_M_PCI_BUS, i + 1);
        g->text[GS_T_UUID][strlen(g->text[GS_T_UUID]) - 1] = (char)('0' + i);
        snprintf(g->text[GS_T_PCI_BUS_ID], GS_STR_LEN, "00000000:%02X:00.0", i + 1);
        g->tst[GS_T_PCI_BUS_ID] = GS_ST_OK;
        gs_gpu_set(g, GS_M_MEM_TOTAL, 49140.0 * 1048576);
        gs_gpu_set(g, GS_M_MEM_USED, 1234.5 * 1048576);
        gs_gpu_set(g, GS_M_TEMP_GPU, 47);
        gs_gpu_set(g, GS_M_POWER_DRAW, 87.99);
        gs_gpu_set(g, GS_M_POWER_ENFORCED_LIMIT, 300);
        gs_gpu_set(g, GS_M_UTIL_GPU, 0.07);
        gs_gpu_set(g, GS_M_PSTATE, 2);
        gs_gpu_set(g, GS_M_FAN, i ? 0.3 : 1.0); /* 100 % still fits the column */
        gs_gpu_set(g, GS_M_COMPUTE_MODE, 3);
        gs_gpu_set(g, GS_M_PERSISTENCE, 1);
        gs_gpu_set(g, GS_M_MIG_MODE, 0);
        gs_gpu_set(g, GS_M_ARCH, 8);
    }
    set_text(&s->gpus[0], GS_T_NAME, "NVIDIA RTX 6000 Ada Generation & <more>");
    g = &s->gpus[1];
    set_text(g, GS_T_NAME, "NVIDIA H100 80GB HBM3");
    gs_gpu_set(g, GS_M_MIG_MODE, 1);
    gs_gpu_set(g, GS_M_ECC_MODE, 1);
    g->n_mig = 2;
    for (unsigned k = 0; k < 2; k++) {
        struct gs_mig *m = &g->mig[k];

        m->index = k;
        m->gi_id = k ? 13 : 1;
        m->ci_id = 0;
        snprintf(m->name, sizeof m->name, "NVIDIA H100 80GB HBM3 MIG %s",
                 k ? "1g.10gb" : "7g.80gb");
        snprintf(m->uuid, sizeof m->uuid, "MIG-%u", k);
        m->mem_st = GS_ST_OK;
        m->mem_total_bytes = (k ? 9984ull : 81104ull) << 20;
        m->mem_used_bytes = 13ull << 20;
        m->attr_st = GS_ST_OK;
        m->sm_count = k ? 16 : 132;
        m->ce_count = k ? 1 : 8;
    }
    g = &s->gpus[2];
    set_text(g, GS_T_NAME, "NVIDIA A100 80GB PCIe");
    g->lost = 1;
    s->n_procs = 3;
    for (unsigned k = 0; k < 3; k++) {
        struct gs_proc *p = &s->procs[k];

        memset(p, 0, sizeof *p);
        p->pid = 3000 - k;
        p->gpu = k == 2 ? 1 : 0;
        p->type = k == 1 ? GS_PROC_GRAPHICS : GS_PROC_COMPUTE;
        p->gi_id = k == 2 ? 13 : 0xFFFFFFFFu;
        p->ci_id = k == 2 ? 0 : 0xFFFFFFFFu;
        p->mem_st = GS_ST_OK;
        p->gpu_mem_bytes = (k + 1) * 1000ull << 20;
        p->nvml_name_st = GS_ST_OK;
        snprintf(p->nvml_name, sizeof p->nvml_name, "%s",
                 k ? "/usr/bin/python3"
                   : "/home/someone/miniconda3/envs/training-env-2024/bin/torchrun");
    }
    return s;
}

/* Runs a printer into a string the caller frees. */
#define CAPTURE(buf, call)                                                                         \
    do {                                                                                           \
        size_t len_;                                                                               \
        FILE *f_ = open_memstream(&(buf), &len_);                                                  \
        assert_non_null(f_);                                                                       \
        assert_int_equal((call), GS_OK);                                                           \
        fclose(f_);                                                                                \
    } while (0)

static void sections(void **state)
{
    unsigned mask = 0;
    char bad[32];

    (void)state;
    assert_int_equal(gs_smi_parse_sections("memory,Utilization,PIDS", &mask, bad, sizeof bad), 0);
    assert_int_equal(mask, GS_SMI_D_MEMORY | GS_SMI_D_UTILIZATION | GS_SMI_D_PIDS);
    assert_int_equal(gs_smi_parse_sections("MEMORY,BOGUS", &mask, bad, sizeof bad), -1);
    assert_string_equal(bad, "BOGUS");
    assert_int_equal(gs_smi_parse_sections("ECC,,POWER", &mask, bad, sizeof bad), -1);
    assert_string_equal(bad, "");
    assert_int_equal(gs_smi_parse_sections("", &mask, bad, sizeof bad), -1);
}

static void mib(void **state)
{
    (void)state;
    assert_int_equal(gs_smi_mib(0), 0);
    assert_int_equal(gs_smi_mib(1), 1);
    assert_int_equal(gs_smi_mib(1048576), 1);
    assert_int_equal(gs_smi_mib(1048577), 2);
    assert_int_equal(gs_smi_mib(501481472), 479); /* H100's reserved memory, as nvidia-smi */
}

static void table_geometry(void **state)
{
    struct gs_snapshot *s = fixture();
    char *out = NULL, *line, *save = NULL;
    int n = 0, err_cells = 0;

    (void)state;
    CAPTURE(out, gs_smi_table(f_, s, NULL));
    for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save), n++) {
        if (n == 0) { /* the time, then 7 blanks */
            assert_int_equal(strlen(line), 24 + 7);
            continue;
        }
        if (strlen(line) != 91)
            fail_msg("line %d is %zu columns: '%s'", n, strlen(line), line);
        err_cells += strstr(line, "ERR!") != NULL;
    }
    free(out);
    CAPTURE(out, gs_smi_table(f_, s, NULL));
    if (getenv("SMI_TEST_DUMP"))
        fputs(out, stderr);
    /* names past 27 characters keep 24 and "..." */
    assert_non_null(strstr(out, "|   0  NVIDIA RTX 6000 Ada Gene...    On  |"));
    /* MIG: the ECC column shows the mode, GPU-Util N/A, the MIG box the instances */
    assert_non_null(strstr(out, "|                   On |"));
    assert_non_null(strstr(out, "| MIG devices:"));
    assert_non_null(strstr(out,
                           "|  1   13   0   1  |              13MiB /  9984MiB    | 16    N/A |"
                           "  1 "));
    /* processes by GPU then pid; a long path keeps its end */
    assert_true(strstr(out, "  2999 ") < strstr(out, "  3000 "));
    assert_non_null(strstr(out, "|    0   N/A  N/A            2999      G   /usr/bin/python3"));
    assert_non_null(strstr(out, "   ...nvs/training-env-2024/bin/torchrun  1000MiB |"));
    assert_non_null(strstr(out, "|    1   13    0             2998      C   /usr/bin/python3"));
    assert_true(err_cells >= 2);
    free(out);
    gs_snapshot_free(s);
}

static void list(void **state)
{
    struct gs_snapshot *s = fixture();
    char *out = NULL;

    (void)state;
    CAPTURE(out, gs_smi_list(f_, s, NULL));
    assert_string_equal(
        out, "GPU 0: NVIDIA RTX 6000 Ada Generation & <more> (UUID: "
             "GPU-00000000-0000-0000-0000-000000000000)\n"
             "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-000000000001)\n"
             "  MIG 7g.80gb     Device  0: (UUID: MIG-0)\n"
             "  MIG 1g.10gb     Device  1: (UUID: MIG-1)\n"
             "GPU 2: NVIDIA A100 80GB PCIe (UUID: GPU-00000000-0000-0000-0000-000000000002)\n");
    free(out);
    gs_snapshot_free(s);
}

static void q_sections(void **state)
{
    struct gs_snapshot *s = fixture();
    unsigned char sel[3] = {1, 0, 0};
    char *out = NULL;

    (void)state;
    CAPTURE(out, gs_smi_q(f_, s, sel, GS_SMI_D_MEMORY | GS_SMI_D_PIDS, 0));
    assert_non_null(strstr(out, "==============NVSMI LOG=============="));
    assert_non_null(strstr(out, "Attached GPUs                                          : 3\n"));
    assert_non_null(strstr(out, "    FB Memory Usage\n        Total                                "
                                "          : 49140 MiB\n"));
    assert_non_null(
        strstr(out, "        Used                                           : 1235 MiB"));
    assert_non_null(strstr(out, "    Processes\n"));
    assert_null(strstr(out, "Temperature"));
    assert_null(strstr(out, "Product Name"));
    assert_null(strstr(out, "GPU 00000000:02:00.0"));
    free(out);
    gs_snapshot_free(s);
}

/* Every element opened is closed in order; leaves are <t>v</t> on one line. */
static void xml_balanced(const char *doc)
{
    char stack[32][64];
    int depth = 0;
    const char *p = doc;

    while (*p) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char line[512];
        const char *l = line;

        snprintf(line, sizeof line, "%.*s", (int)n, p);
        while (*l == '\t')
            l++;
        if (strncmp(l, "<?xml", 5) == 0 || strncmp(l, "<!DOCTYPE", 9) == 0 || !*l || l[0] != '<') {
            /* declaration, blank line or text ("None") */
        } else if (l[1] == '/') {
            assert_true(depth > 0);
            depth--;
            if (strncmp(l + 2, stack[depth], strlen(stack[depth])) != 0)
                fail_msg("</%s> expected, got %s", stack[depth], l);
        } else if (!strstr(l, "</")) {
            size_t k = strcspn(l + 1, " >");

            assert_true(depth < 32);
            snprintf(stack[depth++], sizeof stack[0], "%.*s", (int)k, l + 1);
        } else {
            /* a leaf: no raw '<' or '&' inside the value */
            const char *v = strchr(l, '>') + 1, *end = strstr(l, "</");

            for (const char *c = v; c < end; c++) {
                assert_true(*c != '<');
                if (*c == '&')
                    assert_true(strncmp(c, "&amp;", 5) == 0 || strncmp(c, "&lt;", 4) == 0 ||
                                strncmp(c, "&gt;", 4) == 0 || strncmp(c, "&quot;", 6) == 0);
            }
        }
        p += n + (e ? 1 : 0);
    }
    assert_int_equal(depth, 0);
}

static void xml(void **state)
{
    struct gs_snapshot *s = fixture();
    char *out = NULL;

    (void)state;
    CAPTURE(out, gs_smi_q(f_, s, NULL, 0, 1));
    /* driver 595: nvsmi_device_v13, its element names, no gpu_reset_status / voltage */
    assert_true(strncmp(out,
                        "<?xml version=\"1.0\" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "
                        "\"nvsmi_device_v13.dtd\">\n<nvidia_smi_log>\n",
                        95) == 0);
    assert_non_null(strstr(out, "\t\t<pdi>N/A</pdi>\n"));
    assert_non_null(strstr(out, "<current_dram_encryption>"));
    assert_non_null(strstr(out, "<clocks_event_reasons_counters_hw_power_brake>"));
    assert_non_null(strstr(out, "\t\t<supported_clocks>N/A</supported_clocks>\n"));
    assert_null(strstr(out, "<gpu_reset_status>"));
    assert_null(strstr(out, "<voltage>"));
    free(out);
    strcpy(s->sys.driver_version, "570.124.04");
    CAPTURE(out, gs_smi_q(f_, s, NULL, 0, 1));
    assert_true(strncmp(out,
                        "<?xml version=\"1.0\" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "
                        "\"nvsmi_device_v12.dtd\">\n<nvidia_smi_log>\n",
                        95) == 0);
    assert_non_null(strstr(out, "<gpu_reset_status>"));
    assert_non_null(strstr(out, "<voltage>"));
    assert_non_null(strstr(out, "<product_name>NVIDIA RTX 6000 Ada Generation &amp; &lt;more&gt;"
                                "</product_name>"));
    assert_non_null(strstr(out, "\t<gpu id=\"00000000:02:00.0\">\n"));
    assert_non_null(strstr(out, "<multiprocessor_count>132</multiprocessor_count>"));
    assert_non_null(strstr(out, "<pci_bus>01</pci_bus>"));
    assert_non_null(strstr(out, "<used>1235 MiB</used>"));
    assert_non_null(strstr(out, "<gpu_power_readings>\n\t\t\t<power_state>P2</power_state>\n"
                                "\t\t\t<power_draw>87.99 W</power_draw>"));
    xml_balanced(out);
    assert_non_null(strstr(out, "\t</gpu>\n\n</nvidia_smi_log>\n"));
    free(out);
    gs_snapshot_free(s);
}

/* The -q detail rows: words for the modes, the lower-case Capabilities answer, memory power,
 * and the SRAM split printed only while ECC is on (nvidia-smi's --query-gpu gives the counts
 * either way; its -q prints N/A, as an RTX 4080 SUPER with ECC off shows). */
static void q_detail_rows(void **state)
{
    struct gs_snapshot *s = fixture();
    unsigned char sel[3] = {0, 1, 0};
    struct gs_gpu *g = &s->gpus[1];
    char *out = NULL;

    (void)state;
    gs_gpu_set(g, GS_M_ARCH, 9);
    gs_gpu_set(g, GS_M_VIRT_MODE, 1);
    gs_gpu_set(g, GS_M_HOST_VGPU_MODE, 0);
    gs_gpu_set(g, GS_M_EGM, 1);
    gs_gpu_set(g, GS_M_POWER_MEMORY_AVERAGE, 43.19);
    gs_gpu_set(g, GS_M_SRAM_PARITY_VOL, 2);
    gs_gpu_set(g, GS_M_SRAM_L2, 5);
    gs_gpu_set(g, GS_M_EDPP_MULTIPLIER, 1.0);
    CAPTURE(out, gs_smi_q(f_, s, sel, 0, 0));
    assert_non_null(
        strstr(out, "    EDPp Multiplier                                    : 100.00%\n"));
    assert_non_null(strstr(out, "        Virtualization Mode                            : "
                                "Pass-Through\n"
                                "        Host VGPU Mode                                 : "
                                "Non SR-IOV\n"));
    assert_non_null(
        strstr(out, "        EGM                                            : enabled\n"));
    assert_non_null(strstr(out, "    GPU Memory Power Readings \n"
                                "        Average Power Draw                             : 43.19 W\n"
                                "        Instantaneous Power Draw                       : N/A\n"));
    assert_non_null(strstr(out, "            SRAM Uncorrectable Parity                  : 2\n"));
    assert_non_null(strstr(out, "            SRAM L2                                    : 5\n"));
    free(out);

    gs_gpu_set(g, GS_M_ECC_MODE, 0);
    gs_gpu_set(g, GS_M_EGM, 0);
    CAPTURE(out, gs_smi_q(f_, s, sel, 0, 0));
    assert_non_null(strstr(out, "            SRAM Uncorrectable Parity                  : N/A\n"));
    assert_non_null(strstr(out, "            SRAM L2                                    : N/A\n"));
    assert_non_null(
        strstr(out, "        EGM                                            : disabled\n"));
    free(out);

    CAPTURE(out, gs_smi_q(f_, s, sel, 0, 1));
    assert_non_null(strstr(out, "<virtualization_mode>Pass-Through</virtualization_mode>"));
    assert_non_null(strstr(out, "<egm>disabled</egm>"));
    xml_balanced(out);
    free(out);
    gs_snapshot_free(s);
}

/* The Fabric Health rows of -q and -q -x: every word of every condition, N/A for a condition
 * not read (the mask's "not supported") and for all of them before anything is read. */
static void q_fabric_health(void **state)
{
    struct gs_snapshot *s = fixture();
    unsigned char sel[3] = {0, 1, 0};
    struct gs_gpu *g = &s->gpus[1];
    char *out = NULL, line[160];
    static const char *const summary[] = {NULL, "Healthy", "Unhealthy", "Limited Capacity"};
    static const char *const config[] = {NULL,
                                         "None",
                                         "SysGUID",
                                         "Chassis Serial Number",
                                         "No Partition",
                                         "Insufficient Nvlinks",
                                         "Incompatible GPU Firmware",
                                         "Invalid Location",
                                         "GPU State Invalid"};
    static const struct {
        enum gs_metric m;
        const char *label, *elem, *w0, *w1;
    } flags[] = {
        {GS_M_FABRIC_HEALTH_BW_DEGRADED, "Bandwidth", "bandwidth", "Full", "Degraded"},
        {GS_M_FABRIC_HEALTH_ROUTE_RECOVERY, "Route Recovery in progress",
         "route_recovery_in_progress", "False", "True"},
        {GS_M_FABRIC_HEALTH_ROUTE_UNHEALTHY, "Route Unhealthy", "route_unhealthy", "False", "True"},
        {GS_M_FABRIC_HEALTH_ACCESS_TIMEOUT, "Access Timeout Recovery", "access_timeout_recovery",
         "False", "True"},
    };

    (void)state;
    gs_gpu_set(g, GS_M_FABRIC_STATE, 3);
    CAPTURE(out, gs_smi_q(f_, s, sel, 0, 0));
    assert_non_null(strstr(out, "        Health\n"
                                "            Summary                                    : N/A\n"
                                "            Bandwidth                                  : N/A\n"
                                "            Route Recovery in progress                 : N/A\n"
                                "            Route Unhealthy                            : N/A\n"
                                "            Access Timeout Recovery                    : N/A\n"
                                "            Incorrect Configuration                    : N/A\n"));
    free(out);
    for (int v = 1; v <= 3; v++) {
        gs_gpu_set(g, GS_M_FABRIC_HEALTH_SUMMARY, v);
        CAPTURE(out, gs_smi_q(f_, s, sel, 0, 0));
        snprintf(line, sizeof line, "            Summary                                    : %s\n",
                 summary[v]);
        assert_non_null(strstr(out, line));
        free(out);
        CAPTURE(out, gs_smi_q(f_, s, sel, 0, 1));
        snprintf(line, sizeof line, "<health>\n\t\t\t\t<summary>%s</summary>\n", summary[v]);
        assert_non_null(strstr(out, line));
        free(out);
    }
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        for (int v = 0; v <= 1; v++) {
            gs_gpu_set(g, flags[i].m, v);
            CAPTURE(out, gs_smi_q(f_, s, sel, 0, 0));
            snprintf(line, sizeof line, "            %-43s: %s\n", flags[i].label,
                     v ? flags[i].w1 : flags[i].w0);
            assert_non_null(strstr(out, line));
            free(out);
            CAPTURE(out, gs_smi_q(f_, s, sel, 0, 1));
            snprintf(line, sizeof line, "<%s>%s</%s>", flags[i].elem, v ? flags[i].w1 : flags[i].w0,
                     flags[i].elem);
            assert_non_null(strstr(out, line));
            xml_balanced(out);
            free(out);
        }
    for (int v = 1; v <= 8; v++) {
        gs_gpu_set(g, GS_M_FABRIC_HEALTH_CONFIG, v);
        CAPTURE(out, gs_smi_q(f_, s, sel, 0, 0));
        snprintf(line, sizeof line, "            Incorrect Configuration                    : %s\n",
                 config[v]);
        assert_non_null(strstr(out, line));
        free(out);
        CAPTURE(out, gs_smi_q(f_, s, sel, 0, 1));
        snprintf(line, sizeof line, "<incorrect_configuration>%s</incorrect_configuration>",
                 config[v]);
        assert_non_null(strstr(out, line));
        free(out);
    }
    /* a condition the driver does not report is N/A among the others' words */
    g->st[GS_M_FABRIC_HEALTH_ROUTE_RECOVERY] = GS_ST_NA;
    CAPTURE(out, gs_smi_q(f_, s, sel, 0, 0));
    assert_non_null(strstr(out,
                           "            Bandwidth                                  : Degraded\n"
                           "            Route Recovery in progress                 : N/A\n"
                           "            Route Unhealthy                            : True\n"));
    free(out);
    gs_snapshot_free(s);
}

/* The whole GPU's other -q rows: PDI, module id, GPU operation mode words, vGPU heterogeneous
 * mode, PCIe atomics as NVML_PCIE_ATOMICS_CAP_* names (each followed by a space, as the H100
 * capture prints them), protected memory in MiB, the unrepairable flag; N/A where not read. */
static void q_gpu_rows(void **state)
{
    struct gs_snapshot *s = fixture();
    unsigned char sel[3] = {0, 1, 0};
    struct gs_gpu *g = &s->gpus[1];
    char *out = NULL;

    (void)state;
    gs_gpu_set(g, GS_M_ARCH, 9);
    snprintf(g->text[GS_T_PDI], GS_STR_LEN, "0xd52bae2e458244e2");
    g->tst[GS_T_PDI] = GS_ST_OK;
    gs_gpu_set(g, GS_M_MODULE_ID, 7);
    gs_gpu_set(g, GS_M_GOM_CURRENT, 0);
    gs_gpu_set(g, GS_M_GOM_PENDING, 2);
    gs_gpu_set(g, GS_M_VGPU_HETERO, 1);
    gs_gpu_set(g, GS_M_PCIE_ATOMICS_OUT, 63);
    gs_gpu_set(g, GS_M_PCIE_ATOMICS_IN, 0x41);
    gs_gpu_set(g, GS_M_CC_PROT_TOTAL, 1024.0 * 1048576);
    gs_gpu_set(g, GS_M_CC_PROT_USED, 1.5 * 1048576);
    gs_gpu_set(g, GS_M_CC_PROT_FREE, 1022.5 * 1048576);
    gs_gpu_set(g, GS_M_UNREPAIRABLE_MEM, 0);
    CAPTURE(out, gs_smi_q(f_, s, sel, 0, 0));
    assert_non_null(strstr(out, "    GPU PDI                                            : "
                                "0xd52bae2e458244e2\n"));
    assert_non_null(strstr(out, "        Module Id                                      : 7\n"));
    assert_non_null(strstr(out, "    GPU Operation Mode\n"
                                "        Current                                        : All On\n"
                                "        Pending                                        : "
                                "Low Double Precision\n"));
    assert_non_null(
        strstr(out, "        vGPU Heterogeneous Mode                        : Enabled\n"));
    assert_non_null(strstr(out, "        Atomic Caps Outbound                           : "
                                "FETCHADD_32 FETCHADD_64 SWAP_32 SWAP_64 CAS_32 CAS_64 \n"
                                "        Atomic Caps Inbound                            : "
                                "FETCHADD_32 CAS_128 \n"));
    assert_non_null(strstr(out,
                           "    Conf Compute Protected Memory Usage\n"
                           "        Total                                          : 1024 MiB\n"
                           "        Used                                           : 2 MiB\n"
                           "        Free                                           : 1023 MiB\n"));
    assert_non_null(strstr(out, "        Unrepairable Memory                            : No\n"));
    free(out);

    CAPTURE(out, gs_smi_q(f_, s, sel, 0, 1));
    assert_non_null(strstr(out, "<pdi>0xd52bae2e458244e2</pdi>"));
    assert_non_null(strstr(out, "<current_gom>All On</current_gom>"));
    assert_non_null(strstr(out, "<vgpu_heterogeneous_mode>Enabled</vgpu_heterogeneous_mode>"));
    assert_non_null(strstr(out, "<unrepairable_memory>No</unrepairable_memory>"));
    xml_balanced(out);
    free(out);

    g->st[GS_M_GOM_CURRENT] = g->st[GS_M_PCIE_ATOMICS_IN] = GS_ST_NA;
    g->tst[GS_T_PDI] = GS_ST_NA;
    CAPTURE(out, gs_smi_q(f_, s, sel, 0, 0));
    assert_non_null(strstr(out, "    GPU PDI                                            : N/A\n"));
    assert_non_null(strstr(out, "        Current                                        : N/A\n"
                                "        Pending                                        : "
                                "Low Double Precision\n"));
    assert_non_null(strstr(out, "        Atomic Caps Inbound                            : N/A\n"));
    free(out);
    gs_snapshot_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sections),        cmocka_unit_test(mib),
        cmocka_unit_test(table_geometry),  cmocka_unit_test(list),
        cmocka_unit_test(q_sections),      cmocka_unit_test(xml),
        cmocka_unit_test(q_detail_rows),   cmocka_unit_test(q_gpu_rows),
        cmocka_unit_test(q_fabric_health),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
