/*
 * The --query-gpu and --query-compute-apps field tables, the cell formatter that reproduces
 * nvidia-smi's CSV bytes from a gs_snapshot, and the --help-query-* texts.
 *
 * Every field nvidia-smi 590, 595 or 610 lists in --help-query-gpu has a row here, naming the
 * branches that list it, so a script written for a branch's nvidia-smi runs unchanged and a
 * field that branch lacks fails as it does there. A row says how its cell is made (kind): from a
 * snapshot metric, text field or process, a fixed token for fields nvidia-smi itself reports as
 * deprecated, or — for fields our model does not carry (vGPU, inforom, fabric, platform, ...) —
 * the absent token a driver that cannot answer prints. The formatting rules come from real
 * nvidia-smi captures (shared/reference/nvidia-smi-captures): MiB rounded up per cell, watts with
 * two decimals, masks as 0x%016llX, " unit" after numbers unless nounits, "[N/A]" for absent
 * values except the bare "N/A" of temperature.memory and fabric.*.
 */
#include "cli/smi/query_fields.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpuscope/gs_err.h"
#include "gpuscope/gs_sampler.h"

/* How a cell is made. */
enum qf_kind {
    QK_SECTION,    /* not a field: a "Section about ..." heading in the help text */
    QK_NONE,       /* not in our model: the absent token (or "[GPU is lost]") */
    QK_DEPRECATED, /* nvidia-smi 590+ answers this token whatever the GPU */
    QK_TIMESTAMP,
    QK_DRIVER,  /* sys.driver_version */
    QK_COUNT,   /* GPUs in the system */
    QK_INDEX,   /* NVML index */
    QK_TEXT,    /* gs_gpu.text[arg] */
    QK_INT,     /* metric arg as an integer */
    QK_HEX,     /* metric arg as 0x%0<arg2>X */
    QK_MASK,    /* metric arg as 0x%016llX */
    QK_BIT,     /* bit arg2 of the mask in metric arg: Active / Not Active */
    QK_PSTATE,  /* P%d */
    QK_US,      /* seconds -> microseconds */
    QK_MIB,     /* bytes -> MiB rounded up */
    QK_PCT,     /* ratio -> integer percent */
    QK_WATT,    /* watts, two decimals */
    QK_MHZ,     /* hertz -> integer MHz */
    QK_ENABLED, /* Enabled / Disabled */
    QK_YESNO,   /* Yes / No */
    QK_CMODE,   /* compute mode name */
    QK_CCAP,    /* metrics arg.arg2 */
    QK_ECCLOC,  /* ecc_loc[arg >> 1][arg & 1][arg2] */
    QK_PID,     /* process rows */
    QK_PNAME,
    QK_PMEM,
    QK_VALID, /* valid / invalid */
    QK_NAME,  /* metric arg as a word of table arg2 (enum gs_qf_names) */
    QK_PCT2,  /* ratio -> percent with two decimals */
};

enum qf_absent { QA_BRACKET = 0, QA_BARE = 1 };

struct gs_qfield {
    const char *name;
    const char *alias;
    const char *unit; /* "" when none */
    uint8_t kind;
    uint8_t absent;
    int16_t arg;
    uint32_t arg2;
    unsigned want;
    const char *help;
    uint8_t branches; /* QB_* bits: the driver branches whose nvidia-smi lists it; 0: every one */
};

/* Driver branches whose --help-query-gpu lists differ (Linux captures: 590.48 and 591.86 list the
 * first power_smoothing fields, 595 drops them and adds kmd_version and the inactive remapped
 * rows, 610 brings them back and adds gpu.base.*, more power_smoothing.* and bbx.time_run). A
 * driver older than 590 is taken as 590, the oldest branch captured. */
enum { QB_590 = 1, QB_595 = 2, QB_610 = 4 };

#define TOK_NA "[N/A]"
#define TOK_NA_BARE "N/A"
#define TOK_NOPERM "[Insufficient Permissions]"
#define TOK_ERROR "[Unknown Error]"
#define TOK_LOST "[GPU is lost]"
#define TOK_DEPRECATED "[Requested functionality has been deprecated]"

#define W_S GS_WANT_STATIC
#define W_H GS_WANT_HEALTH
#define W_M GS_WANT_MIG
#define W_D GS_WANT_DETAIL

/* Row builders: name, alias, unit, kind, arg, arg2, want, help. */
/* clang-format off */
#define SECT(title, text) {title, NULL, "", QK_SECTION, QA_BRACKET, 0, 0, 0, text, 0}
#define ROW(n, a, u, k, x, y, w, h) {n, a, u, k, QA_BRACKET, x, y, w, h, 0}
#define BARE(n, a, u, k, x, y, w, h) {n, a, u, k, QA_BARE, x, y, w, h, 0}
/* A row only some branches list (QB_* bits b). */
#define R_ON(b, n, a, u, k, abs, x, y, w, h) {n, a, u, k, abs, x, y, w, h, b}
#define NONE_ON(b, n, u, h) {n, NULL, u, QK_NONE, QA_BRACKET, 0, 0, 0, h, b}
#define SECT_ON(b, title, text) {title, NULL, "", QK_SECTION, QA_BRACKET, 0, 0, 0, text, b}
/* clang-format on */
#define NONE(n, a, u, h) ROW(n, a, u, QK_NONE, 0, 0, 0, h)
#define PS590 (QB_590 | QB_610) /* the power_smoothing fields 590 and 610 list, 595 not */
#define DEPR(n, a, u, h) ROW(n, a, u, QK_DEPRECATED, 0, 0, 0, h)
#define ECC(type, ctr, t, c, loc, l, h)                                                            \
    ROW("ecc.errors." type "." ctr "." loc, NULL, "", QK_ECCLOC, ((t) << 1) | (c), l, W_H, h)
#define ECC_LOCS(type, ctr, t, c, tot)                                                             \
    ECC(type, ctr, t, c, "device_memory", 2, "Count in the GPU's device memory (DRAM)."),          \
        ECC(type, ctr, t, c, "dram", 2, "Same counter as device_memory, under its newer name."),   \
        ECC(type, ctr, t, c, "register_file", 3, "Count in the register file."),                   \
        ECC(type, ctr, t, c, "l1_cache", 0, "Count in the L1 caches."),                            \
        ECC(type, ctr, t, c, "l2_cache", 1, "Count in the L2 cache."),                             \
        ECC(type, ctr, t, c, "texture_memory", 4, "Parity errors in texture memory."),             \
        ECC(type, ctr, t, c, "cbu", 6, "Parity errors in the CBU."),                               \
        ECC(type, ctr, t, c, "sram", 7, "Count in on-chip SRAMs."),                                \
        ROW("ecc.errors." type "." ctr ".total", NULL, "", QK_INT, tot, 0, W_H,                    \
            "Sum over every memory location of the chip.")

static const struct gs_qfield gpu_fields[] = {
    ROW("timestamp", NULL, "", QK_TIMESTAMP, 0, 0, 0,
        "When the sample was taken, as \"YYYY/MM/DD HH:MM:SS.msec\" in local time."),
    ROW("driver_version", NULL, "", QK_DRIVER, 0, 0, 0,
        "Version string of the installed NVIDIA driver."),
    R_ON(QB_595 | QB_610, "kmd_version", NULL, "", QK_DRIVER, QA_BRACKET, 0, 0, 0,
         "Version string of the NVIDIA kernel-mode driver (newer drivers' name for\n"
         "driver_version)."),
    SECT("vgpu_driver_capability", "Capabilities the driver reports for vGPU use."),
    NONE("vgpu_driver_capability.heterogenous_multivGPU", NULL, "",
         "Whether the driver lets vGPUs of different types share a VM."),
    ROW("count", NULL, "", QK_COUNT, 0, 0, 0, "How many NVIDIA GPUs the system has."),
    ROW("name", "gpu_name", "", QK_TEXT, GS_T_NAME, 0, 0, "Product name of the board."),
    ROW("serial", "gpu_serial", "", QK_TEXT, GS_T_SERIAL, 0, W_S,
        "Board serial number, as printed on the board; boards without an inforom have none."),
    ROW("uuid", "gpu_uuid", "", QK_TEXT, GS_T_UUID, 0, 0,
        "Globally unique identifier of the GPU (\"GPU-\" and 36 characters); not printed on\n"
        "the board."),
    ROW("pci.bus_id", "gpu_bus_id", "", QK_TEXT, GS_T_PCI_BUS_ID, 0, 0,
        "PCI address as domain:bus:device.function, hexadecimal."),
    ROW("pci.domain", NULL, "", QK_HEX, GS_M_PCI_DOMAIN, 4, 0, "PCI domain, hexadecimal."),
    ROW("pci.bus", NULL, "", QK_HEX, GS_M_PCI_BUS, 2, 0, "PCI bus, hexadecimal."),
    ROW("pci.device", NULL, "", QK_HEX, GS_M_PCI_DEVICE, 2, 0, "PCI device, hexadecimal."),
    ROW("pci.baseClass", NULL, "", QK_HEX, GS_M_PCI_BASE_CLASS, 0, 0,
        "PCI base class code, hexadecimal."),
    ROW("pci.subClass", NULL, "", QK_HEX, GS_M_PCI_SUB_CLASS, 0, 0,
        "PCI sub class code, hexadecimal."),
    ROW("pci.device_id", NULL, "", QK_HEX, GS_M_PCI_DEVICE_ID, 8, 0,
        "PCI device id (high 16 bits) and vendor id (low 16 bits), hexadecimal."),
    ROW("pci.sub_device_id", NULL, "", QK_HEX, GS_M_PCI_SUBSYS_ID, 8, 0,
        "PCI subsystem id, hexadecimal."),
    SECT("vgpu_device_capability", "Capabilities the GPU reports for vGPU use."),
    NONE("vgpu_device_capability.fractional_multiVgpu", NULL, "",
         "Whether fractional vGPU profiles may be combined in one VM."),
    NONE("vgpu_device_capability.heterogeneous_timeSlice_profile", NULL, "",
         "Whether time-sliced vGPUs of different profiles may run together."),
    NONE("vgpu_device_capability.heterogeneous_timeSlice_sizes", NULL, "",
         "Whether time-sliced vGPUs of different framebuffer sizes may run together."),
    NONE("vgpu_device_capability.homogeneous_placements", NULL, "",
         "Whether placements of same-size time-sliced vGPUs are reported."),
    NONE("vgpu_device_capability.mig_timeSlicing", NULL, "",
         "Whether time-sliced vGPUs can run on MIG instances."),
    NONE("vgpu_device_capability.mig_timeSlicing_mode", NULL, "",
         "Whether MIG time-slicing is switched on."),
    ROW("pcie.link.gen.current", NULL, "", QK_INT, GS_M_PCIE_GEN, 0, 0,
        "PCIe generation the link runs at now; it may drop while the GPU idles. Kept for old\n"
        "scripts: prefer pcie.link.gen.gpucurrent."),
    ROW("pcie.link.gen.gpucurrent", NULL, "", QK_INT, GS_M_PCIE_GEN, 0, 0,
        "PCIe generation the link runs at now; it may drop while the GPU idles."),
    ROW("pcie.link.gen.max", NULL, "", QK_INT, GS_M_PCIE_GEN_MAX, 0, W_S,
        "Highest PCIe generation this GPU can use in this host (the lower of the GPU's and the\n"
        "system's maximum)."),
    ROW("pcie.link.gen.gpumax", NULL, "", QK_INT, GS_M_PCIE_GEN_GPU_MAX, 0, W_S,
        "Highest PCIe generation the GPU itself supports."),
    NONE("pcie.link.gen.hostmax", NULL, "",
         "Highest PCIe generation the GPU's root port supports."),
    ROW("pcie.link.width.current", NULL, "", QK_INT, GS_M_PCIE_WIDTH, 0, 0,
        "PCIe lanes in use now; may drop while the GPU idles."),
    ROW("pcie.link.width.max", NULL, "", QK_INT, GS_M_PCIE_WIDTH_MAX, 0, W_S,
        "Most PCIe lanes this GPU can use in this host."),
    ROW("index", NULL, "", QK_INDEX, 0, 0, 0,
        "NVML index of the GPU, from 0; the order may change across reboots."),
    DEPR("display_mode", NULL, "", "Deprecated by NVIDIA; always answers that it is."),
    ROW("display_attached", NULL, "", QK_YESNO, GS_M_DISPLAY_ATTACHED, 0, W_S,
        "Whether a monitor is plugged into one of the GPU's outputs: \"Yes\" or \"No\"."),
    ROW("display_active", NULL, "", QK_ENABLED, GS_M_DISPLAY_ACTIVE, 0, W_S,
        "Whether a display is set up on the GPU, even with no monitor attached: \"Enabled\"\n"
        "or \"Disabled\"."),
    ROW("persistence_mode", NULL, "", QK_ENABLED, GS_M_PERSISTENCE, 0, W_S,
        "Whether the driver stays loaded with no client attached, which saves the start-up\n"
        "delay of the next CUDA program: \"Enabled\" or \"Disabled\". Linux only."),
    ROW("addressing_mode", NULL, "", QK_NAME, GS_M_ADDRESSING_MODE, GS_QN_ADDRESSING, W_D,
        "How the GPU reaches ordinary host memory: by software page-table mirroring\n"
        "(\"HMM\"), by address translation services (\"ATS\"), or not at all (\"None\").\n"
        "Linux only."),
    ROW("accounting.mode", NULL, "", QK_ENABLED, GS_M_ACCOUNTING, 0, W_S,
        "Whether per-process accounting statistics are kept: \"Enabled\" or \"Disabled\"."),
    ROW("accounting.buffer_size", NULL, "", QK_INT, GS_M_ACCOUNTING_BUFFER, 0, W_S,
        "How many processes the accounting ring buffer remembers before the oldest entry is\n"
        "overwritten."),
    SECT("driver_model", "Windows driver model (TCC, WDDM, MCDM). Linux has none: \"N/A\"."),
    NONE("driver_model.current", NULL, "", "Driver model in use."),
    NONE("driver_model.pending", NULL, "", "Driver model after the next reboot."),
    ROW("vbios_version", NULL, "", QK_TEXT, GS_T_VBIOS, 0, W_S, "Version of the board's VBIOS."),
    SECT("inforom", "Versions of the objects in the board's inforom, its small persistent store."),
    ROW("inforom.img", "inforom.image", "", QK_TEXT, GS_T_INFOROM_IMAGE, 0, 0,
        "Version of the whole inforom image."),
    ROW("inforom.oem", NULL, "", QK_TEXT, GS_T_INFOROM_OEM, 0, 0,
        "Version of the OEM configuration object."),
    ROW("inforom.ecc", NULL, "", QK_TEXT, GS_T_INFOROM_ECC, 0, 0,
        "Version of the ECC record object."),
    ROW("inforom.pwr", "inforom.power", "", QK_TEXT, GS_T_INFOROM_PWR, 0, 0,
        "Version of the power management object."),
    /* "valid" is what captures show; "invalid" for a corrupted inforom is our spelling */
    ROW("inforom.checksum_validation", NULL, "", QK_VALID, GS_M_INFOROM_VALID, 0, W_S,
        "Result of the inforom checksum check: \"valid\" or \"invalid\"."),
    ROW("gpu_recovery_action", NULL, "", QK_NAME, GS_M_RECOVERY_ACTION, GS_QN_RECOVERY, 0,
        "What the driver recommends to bring the GPU back from a bad state (\"None\" when\n"
        "nothing is needed)."),
    SECT("gom", "GPU operation mode: which features are switched off to save power or favour\n"
                "compute (All On, Compute, Low Double Precision)."),
    ROW("gom.current", "gpu_operation_mode.current", "", QK_NAME, GS_M_GOM_CURRENT, GS_QN_GOM, W_D,
        "Operation mode in use."),
    ROW("gom.pending", "gpu_operation_mode.pending", "", QK_NAME, GS_M_GOM_PENDING, GS_QN_GOM, W_D,
        "Operation mode after the next reboot."),
    ROW("fan.speed", NULL, "%", QK_PCT, GS_M_FAN, 0, 0,
        "Fan speed the GPU asks for, as a percent of its maximum (may exceed 100). Boards cooled\n"
        "by the chassis report none."),
    ROW("pstate", NULL, "", QK_PSTATE, GS_M_PSTATE, 0, 0,
        "Performance state, from P0 (fastest) to P12 (slowest)."),
    SECT("clocks_event_reasons",
         "Why the clocks are below their maximum. All \"Not Active\" means\n"
         "nothing holds them back."),
    ROW("clocks_event_reasons.supported", "clocks_throttle_reasons.supported", "", QK_MASK,
        GS_M_THROTTLE_SUPPORTED, 0, 0, "Mask of the reasons this GPU can report (NVML bits)."),
    ROW("clocks_event_reasons.active", "clocks_throttle_reasons.active", "", QK_MASK,
        GS_M_THROTTLE_ACTIVE, 0, 0, "Mask of the reasons in effect now (NVML bits)."),
    ROW("clocks_event_reasons.gpu_idle", "clocks_throttle_reasons.gpu_idle", "", QK_BIT,
        GS_M_THROTTLE_ACTIVE, GS_THR_GPU_IDLE, 0, "Nothing runs, clocks are going down to idle."),
    ROW("clocks_event_reasons.applications_clocks_setting",
        "clocks_throttle_reasons.applications_clocks_setting", "", QK_BIT, GS_M_THROTTLE_ACTIVE,
        GS_THR_APP_CLOCKS, 0, "Clocks are held by the applications clocks setting."),
    ROW("clocks_event_reasons.sw_power_cap", "clocks_throttle_reasons.sw_power_cap", "", QK_BIT,
        GS_M_THROTTLE_ACTIVE, GS_THR_SW_POWER_CAP, 0,
        "The software power limiter lowers clocks because the board draws too much power."),
    ROW("clocks_event_reasons.hw_slowdown", "clocks_throttle_reasons.hw_slowdown", "", QK_BIT,
        GS_M_THROTTLE_ACTIVE, GS_THR_HW_SLOWDOWN, 0,
        "Hardware slowdown (clocks cut by half or more): too hot, an external power brake, or\n"
        "too much power draw."),
    ROW("clocks_event_reasons.hw_thermal_slowdown", "clocks_throttle_reasons.hw_thermal_slowdown",
        "", QK_BIT, GS_M_THROTTLE_ACTIVE, GS_THR_HW_THERMAL, 0,
        "Hardware slowdown because the GPU is too hot."),
    ROW("clocks_event_reasons.hw_power_brake_slowdown",
        "clocks_throttle_reasons.hw_power_brake_slowdown", "", QK_BIT, GS_M_THROTTLE_ACTIVE,
        GS_THR_HW_POWER_BRAKE, 0,
        "Hardware slowdown because an external power brake is asserted (e.g. by the power\n"
        "supply)."),
    ROW("clocks_event_reasons.sw_thermal_slowdown", "clocks_throttle_reasons.sw_thermal_slowdown",
        "", QK_BIT, GS_M_THROTTLE_ACTIVE, GS_THR_SW_THERMAL, 0,
        "Software thermal capping lowers clocks because the GPU is above its operating\n"
        "temperature."),
    ROW("clocks_event_reasons.sync_boost", "clocks_throttle_reasons.sync_boost", "", QK_BIT,
        GS_M_THROTTLE_ACTIVE, GS_THR_SYNC_BOOST, 0,
        "The GPU is in a sync boost group and runs at the group's lowest clocks."),
    SECT("clocks_event_reasons_counters",
         "Accumulated time, in microseconds, each reason has held\n"
         "the clocks down."),
    ROW("clocks_event_reasons_counters.sw_power_cap", NULL, "us", QK_US, GS_M_THROTTLE_NS_SW_POWER,
        0, 0, "Time spent under the software power limiter."),
    ROW("clocks_event_reasons_counters.sync_boost", NULL, "us", QK_US, GS_M_THROTTLE_NS_SYNC_BOOST,
        0, 0, "Time spent held down by the sync boost group."),
    ROW("clocks_event_reasons_counters.sw_thermal_slowdown", NULL, "us", QK_US,
        GS_M_THROTTLE_NS_SW_THERMAL, 0, 0, "Time spent under software thermal capping."),
    ROW("clocks_event_reasons_counters.hw_thermal_slowdown", NULL, "us", QK_US,
        GS_M_THROTTLE_NS_HW_THERMAL, 0, 0, "Time spent in hardware thermal slowdown."),
    ROW("clocks_event_reasons_counters.hw_power_brake_slowdown", NULL, "us", QK_US,
        GS_M_THROTTLE_NS_HW_POWER_BRAKE, 0, 0, "Time spent with the external power brake on."),
    SECT("memory", "Framebuffer memory. With ECC on, part of the memory holds check bits, and the\n"
                   "driver keeps some for itself even when nothing runs."),
    ROW("memory.total", NULL, "MiB", QK_MIB, GS_M_MEM_TOTAL, 0, 0, "Installed memory."),
    ROW("memory.reserved", NULL, "MiB", QK_MIB, GS_M_MEM_RESERVED, 0, 0,
        "Memory the driver and firmware keep for themselves."),
    ROW("memory.used", NULL, "MiB", QK_MIB, GS_M_MEM_USED, 0, 0,
        "Memory allocated by running contexts."),
    ROW("memory.free", NULL, "MiB", QK_MIB, GS_M_MEM_FREE, 0, 0, "Memory nobody holds."),
    ROW("compute_mode", NULL, "", QK_CMODE, GS_M_COMPUTE_MODE, 0, W_S,
        "Who may create compute contexts: \"Default\" (many contexts), \"Exclusive_Thread\"\n"
        "(deprecated), \"Prohibited\" (none) or \"Exclusive_Process\" (one context, any number of\n"
        "threads)."),
    ROW("compute_cap", NULL, "", QK_CCAP, GS_M_CC_MAJOR, GS_M_CC_MINOR, W_S,
        "CUDA compute capability, major.minor."),
    SECT("utilization", "How busy the GPU was over the last sample period (between 1/6 s and 1 s,\n"
                        "by product). GPUs in MIG mode do not report these."),
    ROW("utilization.gpu", NULL, "%", QK_PCT, GS_M_UTIL_GPU, 0, 0,
        "Percent of the period in which at least one kernel ran."),
    ROW("utilization.memory", NULL, "%", QK_PCT, GS_M_UTIL_MEM, 0, 0,
        "Percent of the period in which device memory was read or written."),
    ROW("utilization.encoder", NULL, "%", QK_PCT, GS_M_UTIL_ENC, 0, 0,
        "Percent of the period in which the video encoder worked."),
    ROW("utilization.decoder", NULL, "%", QK_PCT, GS_M_UTIL_DEC, 0, 0,
        "Percent of the period in which the video decoder worked."),
    ROW("utilization.jpeg", NULL, "%", QK_PCT, GS_M_UTIL_JPEG, 0, 0,
        "Percent of the period in which the JPEG engine worked."),
    ROW("utilization.ofa", NULL, "%", QK_PCT, GS_M_UTIL_OFA, 0, 0,
        "Percent of the period in which the optical flow accelerator worked."),
    SECT("encoder.stats", "Video encoder sessions on the GPU."),
    ROW("encoder.stats.sessionCount", NULL, "", QK_INT, GS_M_ENC_SESSIONS, 0, 0,
        "Encoder sessions open now."),
    ROW("encoder.stats.averageFps", NULL, "", QK_INT, GS_M_ENC_FPS, 0, 0,
        "Mean frames per second over those sessions."),
    /* microseconds, printed without a unit as nvidia-smi does */
    ROW("encoder.stats.averageLatency", NULL, "", QK_US, GS_M_ENC_LATENCY, 0, 0,
        "Mean encode latency over those sessions, in microseconds."),
    SECT("dramEncryption.mode", "Whether DRAM encryption is on; changes take effect at reboot."),
    NONE("dramEncryption.mode.current", NULL, "", "DRAM encryption mode in use."),
    NONE("dramEncryption.mode.pending", NULL, "", "DRAM encryption mode after the next reboot."),
    SECT("ecc.mode", "Whether ECC is on; changes take effect at reboot."),
    ROW("ecc.mode.current", NULL, "", QK_ENABLED, GS_M_ECC_MODE, 0, W_H | W_S, "ECC mode in use."),
    ROW("ecc.mode.pending", NULL, "", QK_ENABLED, GS_M_ECC_MODE_PENDING, 0, W_H | W_S,
        "ECC mode after the next reboot."),
    SECT("ecc.errors",
         "ECC error counts. Corrected errors are single-bit errors the hardware fixed;\n"
         "uncorrected ones were detected but not fixed. Volatile counts start at\n"
         "driver load, aggregate counts cover the board's whole life."),
    ECC_LOCS("corrected", "volatile", 0, 0, GS_M_ECC_CORR_VOL),
    ECC_LOCS("corrected", "aggregate", 0, 1, GS_M_ECC_CORR_AGG),
    ECC_LOCS("uncorrected", "volatile", 1, 0, GS_M_ECC_UNCORR_VOL),
    ECC_LOCS("uncorrected", "aggregate", 1, 1, GS_M_ECC_UNCORR_AGG),
    ROW("ecc.errors.uncorrected.volatile.sram.parity", NULL, "", QK_INT, GS_M_SRAM_PARITY_VOL, 0,
        W_D, "Distinct SRAM parity errors since driver load."),
    ROW("ecc.errors.uncorrected.volatile.sram.secded", NULL, "", QK_INT, GS_M_SRAM_SECDED_VOL, 0,
        W_D, "Distinct SRAM SEC-DED errors since driver load."),
    ROW("ecc.errors.uncorrected.aggregate.sram.parity", NULL, "", QK_INT, GS_M_SRAM_PARITY_AGG, 0,
        W_D, "Distinct SRAM parity errors over the board's life."),
    ROW("ecc.errors.uncorrected.aggregate.sram.secded", NULL, "", QK_INT, GS_M_SRAM_SECDED_AGG, 0,
        W_D, "Distinct SRAM SEC-DED errors over the board's life."),
    ROW("ecc.errors.uncorrected.aggregate.sram.thresholdExceeded", NULL, "", QK_YESNO,
        GS_M_SRAM_THRESHOLD, 0, W_D, "Whether the SRAM error threshold was crossed."),
    ROW("ecc.errors.uncorrected.aggregate.sram.l2", NULL, "", QK_INT, GS_M_SRAM_L2, 0, W_D,
        "Distinct uncorrected SRAM errors in the L2 cache."),
    ROW("ecc.errors.uncorrected.aggregate.sram.sm", NULL, "", QK_INT, GS_M_SRAM_SM, 0, W_D,
        "Distinct uncorrected SRAM errors in the SMs."),
    ROW("ecc.errors.uncorrected.aggregate.sram.mcu", NULL, "", QK_INT, GS_M_SRAM_MCU, 0, W_D,
        "Distinct uncorrected SRAM errors in microcontrollers."),
    ROW("ecc.errors.uncorrected.aggregate.sram.pcie", NULL, "", QK_INT, GS_M_SRAM_PCIE, 0, W_D,
        "Uncorrected SRAM errors in the PCIe logic."),
    ROW("ecc.errors.uncorrected.aggregate.sram.other", NULL, "", QK_INT, GS_M_SRAM_OTHER, 0, W_D,
        "Distinct uncorrected SRAM errors anywhere else."),
    SECT("retired_pages", "Device memory pages the driver stopped using after repeated single-bit\n"
                          "errors or a double-bit error (boards before Ampere)."),
    ROW("retired_pages.single_bit_ecc.count", "retired_pages.sbe", "", QK_INT, GS_M_RETIRED_SBE, 0,
        W_H, "Pages retired after repeated single-bit errors."),
    ROW("retired_pages.double_bit.count", "retired_pages.dbe", "", QK_INT, GS_M_RETIRED_DBE, 0, W_H,
        "Pages retired after a double-bit error."),
    ROW("retired_pages.pending", NULL, "", QK_YESNO, GS_M_RETIRED_PENDING, 0, W_H,
        "Whether pages wait to be retired at the next reboot; until then they can still be\n"
        "allocated."),
    SECT("remapped_rows", "Memory rows replaced by spare rows after errors (Ampere and newer). A\n"
                          "pending remap needs a GPU reset."),
    ROW("remapped_rows.correctable", "remapped_rows.sbe", "", QK_INT, GS_M_REMAP_CORR, 0, W_H,
        "Rows remapped after correctable errors."),
    R_ON(QB_595 | QB_610, "remapped_rows.correctable_inactive", NULL, "", QK_INT, QA_BRACKET,
         GS_M_REMAP_CORR_INACTIVE, 0, 0,
         "Rows remapped after correctable errors that are not in use."),
    ROW("remapped_rows.uncorrectable", "remapped_rows.dbe", "", QK_INT, GS_M_REMAP_UNCORR, 0, W_H,
        "Rows remapped after uncorrectable errors."),
    R_ON(QB_595 | QB_610, "remapped_rows.uncorrectable_inactive", NULL, "", QK_INT, QA_BRACKET,
         GS_M_REMAP_UNCORR_INACTIVE, 0, 0,
         "Rows remapped after uncorrectable errors that are not in use."),
    ROW("remapped_rows.pending", NULL, "", QK_YESNO, GS_M_REMAP_PENDING, 0, W_H,
        "Whether a remap waits for the next reset."),
    ROW("remapped_rows.failure", NULL, "", QK_YESNO, GS_M_REMAP_FAILURE, 0, W_H,
        "Whether a remap has ever failed on this GPU."),
    SECT("remapped_rows.histogram", "How many memory banks have how many spare rows left."),
    ROW("remapped_rows.histogram.max", NULL, "", QK_INT, GS_M_REMAP_HIST_MAX, 0, W_D,
        "Banks with every spare row left."),
    ROW("remapped_rows.histogram.high", NULL, "", QK_INT, GS_M_REMAP_HIST_HIGH, 0, W_D,
        "Banks with many spare rows left."),
    ROW("remapped_rows.histogram.partial", NULL, "", QK_INT, GS_M_REMAP_HIST_PARTIAL, 0, W_D,
        "Banks with some spare rows left."),
    ROW("remapped_rows.histogram.low", NULL, "", QK_INT, GS_M_REMAP_HIST_LOW, 0, W_D,
        "Banks with few spare rows left."),
    ROW("remapped_rows.histogram.none", NULL, "", QK_INT, GS_M_REMAP_HIST_NONE, 0, W_D,
        "Banks with no spare row left."),
    ROW("temperature.gpu", NULL, "", QK_INT, GS_M_TEMP_GPU, 0, 0,
        "GPU core temperature, degrees C."),
    ROW("temperature.gpu.tlimit", NULL, "", QK_INT, GS_M_TEMP_MARGIN, 0, 0,
        "Degrees C left before the GPU reaches its slowdown limit (T.Limit)."),
    BARE("temperature.memory", NULL, "", QK_INT, GS_M_TEMP_MEM, 0, 0,
         "HBM memory temperature, degrees C."),
    DEPR("power.management", NULL, "", "Deprecated by NVIDIA; always answers that it is."),
    ROW("power.draw", NULL, "W", QK_WATT, GS_M_POWER_DRAW, 0, 0,
        "Board power draw, watts: a one-second average on Ampere and newer, an instantaneous\n"
        "reading before (about +/- 5 W)."),
    ROW("power.draw.average", "gpu.power.draw.average", "W", QK_WATT, GS_M_POWER_AVERAGE, 0, 0,
        "Board power draw averaged over the last second, watts (Ampere and newer, not GA100)."),
    ROW("power.draw.instant", "gpu.power.draw.instant", "W", QK_WATT, GS_M_POWER_INSTANT, 0, 0,
        "Board power draw right now, watts."),
    ROW("power.limit", "gpu.power.requested_limit", "W", QK_WATT, GS_M_POWER_LIMIT, 0, W_S,
        "Power limit set by software (nvidia-smi -pl), watts."),
    ROW("enforced.power.limit", "gpu.power.current_limit", "W", QK_WATT, GS_M_POWER_ENFORCED_LIMIT,
        0, W_S, "Power limit actually enforced, the lowest of all limiters, watts."),
    ROW("power.default_limit", "gpu.power.default_limit", "W", QK_WATT, GS_M_POWER_DEFAULT_LIMIT, 0,
        W_S, "Power limit the board returns to when the driver unloads, watts."),
    ROW("power.min_limit", "gpu.power.min_limit", "W", QK_WATT, GS_M_POWER_MIN_LIMIT, 0, W_S,
        "Lowest power limit that may be set, watts."),
    ROW("power.max_limit", "gpu.power.max_limit", "W", QK_WATT, GS_M_POWER_MAX_LIMIT, 0, W_S,
        "Highest power limit that may be set, watts."),
    NONE("module.power.draw.average", NULL, "W",
         "Power draw of the whole module (e.g. Grace Hopper) averaged over a second, watts."),
    NONE("module.power.draw.instant", NULL, "W", "Power draw of the whole module now, watts."),
    NONE("module.power.limit", "module.power.requested_limit", "W",
         "Software power limit of the whole module, watts."),
    NONE("module.enforced.power.limit", "module.power.current_limit", "W",
         "Enforced power limit of the whole module, watts."),
    NONE("module.power.default_limit", NULL, "W", "Default power limit of the module, watts."),
    NONE("module.power.min_limit", NULL, "W", "Lowest module power limit, watts."),
    NONE("module.power.max_limit", NULL, "W", "Highest module power limit, watts."),
    NONE_ON(QB_610, "gpu.base.current", "W", "Base GPU power the software asked for, watts."),
    NONE_ON(QB_610, "gpu.base.requested", "W", "Base GPU power the power manager enforces, watts."),
    NONE_ON(QB_610, "gpu.base.default", "W", "Default base GPU power, watts."),
    NONE_ON(QB_610, "gpu.base.min", "W", "Lowest base GPU power that can be set, watts."),
    NONE_ON(QB_610, "gpu.base.max", "W", "Highest base GPU power that can be set, watts."),
    SECT_ON(QB_610, "power_smoothing", "Power smoothing of the board."),
    NONE_ON(QB_610, "power_smoothing.tmp_floor", "W", "Applied TMP floor, watts."),
    NONE_ON(QB_610, "power_smoothing.tmp_ceil", "W", "Applied TMP ceiling, watts."),
    NONE_ON(QB_610, "power_smoothing.hw_lifetime_remaining_percent", "%",
            "Lifetime left of the power smoothing circuit, percent."),
    NONE_ON(QB_610, "power_smoothing.enabled", "", "Whether power smoothing is on (Yes/No)."),
    NONE_ON(PS590, "power_smoothing.delayed_power_smoothing_supported", "",
            "Whether delayed power smoothing is available (Yes/No)."),
    NONE_ON(QB_610, "power_smoothing.soc_power_smoothing_enabled", "",
            "Whether SoC power smoothing is on (Yes/No)."),
    NONE_ON(QB_610, "power_smoothing.priv_level", "",
            "Privilege level needed to change power smoothing."),
    NONE_ON(QB_610, "power_smoothing.imm_ramp_down", "",
            "Whether immediate ramp-down is on (Yes/No)."),
    NONE_ON(QB_610, "power_smoothing.max_percent_tmp_floor", "%",
            "Highest TMP floor a profile may set, percent of TGP."),
    NONE_ON(QB_610, "power_smoothing.min_percent_tmp_floor", "%",
            "Lowest TMP floor a profile may set, percent of TGP."),
    NONE_ON(PS590, "power_smoothing.primary_power_floor", "W", "Primary power floor, watts."),
    NONE_ON(PS590, "power_smoothing.secondary_power_floor", "W", "Secondary power floor, watts."),
    NONE_ON(PS590, "power_smoothing.min_primary_floor_activation_offset", "W",
            "Smallest primary floor activation offset, watts."),
    NONE_ON(PS590, "power_smoothing.min_primary_floor_activation_point", "W",
            "Smallest primary floor activation point, watts."),
    NONE_ON(PS590, "power_smoothing.window_multiplier", "ms", "Window multiplier, milliseconds."),
    NONE_ON(QB_610, "power_smoothing.num_preset_profiles", "", "Number of preset profiles."),
    NONE_ON(QB_610, "power_smoothing.curr_profile.percent_tmp_floor", "%",
            "TMP floor of the active profile, percent of TGP."),
    NONE_ON(QB_610, "power_smoothing.curr_profile.ramp_up_rate", "W/s",
            "Ramp-up rate of the active profile, watts per second."),
    NONE_ON(QB_610, "power_smoothing.curr_profile.ramp_down_rate", "W/s",
            "Ramp-down rate of the active profile, watts per second."),
    NONE_ON(QB_610, "power_smoothing.curr_profile.ramp_down_hysteresis", "ms",
            "Ramp-down hysteresis of the active profile, milliseconds."),
    NONE_ON(PS590, "power_smoothing.curr_profile.secondary_power_floor", "W",
            "Secondary power floor of the active profile, watts."),
    NONE_ON(PS590, "power_smoothing.curr_profile.primary_floor_act_window_multiplier", "",
            "Primary floor activation window multiplier of the active profile."),
    NONE_ON(PS590, "power_smoothing.curr_profile.primary_floor_tar_window_multiplier", "",
            "Primary floor target window multiplier of the active profile."),
    NONE_ON(PS590, "power_smoothing.curr_profile.primary_floor_act_offset", "W",
            "Primary floor activation offset of the active profile, watts."),
    NONE_ON(QB_610, "power_smoothing.active_profile", "", "Number of the active profile."),
    NONE_ON(QB_610, "power_smoothing.admin_override.percent_tmp_floor", "%",
            "Administrator override of the TMP floor, percent of TGP."),
    NONE_ON(QB_610, "power_smoothing.admin_override.ramp_up_rate", "W/s",
            "Administrator override of the ramp-up rate, watts per second."),
    NONE_ON(QB_610, "power_smoothing.admin_override.ramp_down_rate", "W/s",
            "Administrator override of the ramp-down rate, watts per second."),
    NONE_ON(QB_610, "power_smoothing.admin_override.ramp_down_hysteresis", "ms",
            "Administrator override of the ramp-down hysteresis, milliseconds."),
    NONE_ON(PS590, "power_smoothing.admin_override.secondary_power_floor", "W",
            "Administrator override of the secondary power floor, watts."),
    NONE_ON(PS590, "power_smoothing.admin_override.primary_floor_act_window_multiplier", "",
            "Administrator override of the activation window multiplier."),
    NONE_ON(PS590, "power_smoothing.admin_override.primary_floor_tar_window_multiplier", "",
            "Administrator override of the target window multiplier."),
    NONE_ON(PS590, "power_smoothing.admin_override.primary_floor_act_offset", "W",
            "Administrator override of the activation offset, watts."),
    ROW("edpp_multiplier", NULL, "%", QK_PCT2, GS_M_EDPP_MULTIPLIER, 0, 0,
        "EDPp multiplier, percent."),
    ROW("clocks.current.graphics", "clocks.gr", "MHz", QK_MHZ, GS_M_CLOCK_GR, 0, 0,
        "Graphics (shader) clock now."),
    ROW("clocks.current.sm", "clocks.sm", "MHz", QK_MHZ, GS_M_CLOCK_SM, 0, 0,
        "Streaming multiprocessor clock now."),
    ROW("clocks.current.memory", "clocks.mem", "MHz", QK_MHZ, GS_M_CLOCK_MEM, 0, 0,
        "Memory clock now."),
    ROW("clocks.current.video", "clocks.video", "MHz", QK_MHZ, GS_M_CLOCK_VIDEO, 0, 0,
        "Video encoder/decoder clock now."),
    SECT("clocks.applications", "Clocks an administrator set for applications (-ac)."),
    DEPR("clocks.applications.graphics", "clocks.applications.gr", "MHz",
         "Graphics clock for applications (deprecated by NVIDIA)."),
    DEPR("clocks.applications.memory", "clocks.applications.mem", "MHz",
         "Memory clock for applications (deprecated by NVIDIA)."),
    SECT("clocks.default_applications", "Default clocks for applications (-rac restores them)."),
    DEPR("clocks.default_applications.graphics", "clocks.default_applications.gr", "MHz",
         "Default graphics clock for applications (deprecated by NVIDIA)."),
    DEPR("clocks.default_applications.memory", "clocks.default_applications.mem", "MHz",
         "Default memory clock for applications (deprecated by NVIDIA)."),
    SECT("clocks.max", "Highest clocks the GPU is designed to run at."),
    ROW("clocks.max.graphics", "clocks.max.gr", "MHz", QK_MHZ, GS_M_CLOCK_MAX_GR, 0, W_S,
        "Highest graphics (shader) clock."),
    ROW("clocks.max.sm", "clocks.max.sm", "MHz", QK_MHZ, GS_M_CLOCK_MAX_SM, 0, W_S,
        "Highest streaming multiprocessor clock."),
    ROW("clocks.max.memory", "clocks.max.mem", "MHz", QK_MHZ, GS_M_CLOCK_MAX_MEM, 0, W_S,
        "Highest memory clock."),
    SECT("mig.mode", "Whether Multi-Instance GPU mode is on (\"Enabled\"/\"Disabled\"); a change\n"
                     "needs a GPU reset."),
    ROW("mig.mode.current", NULL, "", QK_ENABLED, GS_M_MIG_MODE, 0, W_M | W_S, "MIG mode in use."),
    ROW("mig.mode.pending", NULL, "", QK_ENABLED, GS_M_MIG_MODE_PENDING, 0, W_M | W_S,
        "MIG mode after the next reset."),
    SECT("gsp.mode", "Whether the GSP firmware runs (\"Enabled\"/\"Disabled\")."),
    ROW("gsp.mode.current", NULL, "", QK_ENABLED, GS_M_GSP_MODE, 0, 0, "GSP firmware state now."),
    ROW("gsp.mode.default", NULL, "", QK_ENABLED, GS_M_GSP_MODE_DEFAULT, 0, 0,
        "GSP firmware state by default."),
    ROW("c2c.mode", NULL, "", QK_ENABLED, GS_M_C2C_MODE, 0, W_D,
        "Whether the chip-to-chip (C2C) link is on, where there is one."),
    SECT("protected_memory", "Memory set aside for confidential computing."),
    ROW("protected_memory.total", NULL, "MiB", QK_MIB, GS_M_CC_PROT_TOTAL, 0, W_D,
        "Protected memory installed."),
    ROW("protected_memory.used", NULL, "MiB", QK_MIB, GS_M_CC_PROT_USED, 0, W_D,
        "Protected memory allocated by contexts."),
    ROW("protected_memory.free", NULL, "MiB", QK_MIB, GS_M_CC_PROT_FREE, 0, W_D,
        "Protected memory nobody holds."),
    BARE("fabric.state", NULL, "", QK_NAME, GS_M_FABRIC_STATE, GS_QN_FABRIC_STATE, W_D,
         "Progress of the GPU's fabric registration."),
    BARE("fabric.status", NULL, "", QK_NAME, GS_M_FABRIC_STATUS, GS_QN_FABRIC_STATUS, W_D,
         "Result of the fabric registration, once completed."),
    BARE("fabric.cliqueId", NULL, "", QK_INT, GS_M_FABRIC_CLIQUE, 0, W_D,
         "Fabric clique the GPU belongs to."),
    BARE("fabric.clusterUuid", NULL, "", QK_TEXT, GS_T_FABRIC_CLUSTER, 0, W_D,
         "UUID of the GPU's fabric cluster."),
    BARE("fabric.health.summary", NULL, "", QK_NAME, GS_M_FABRIC_HEALTH_SUMMARY,
         GS_QN_FABRIC_HEALTH, W_D, "Overall fabric health."),
    BARE("fabric.health.bandwidth", NULL, "", QK_NAME, GS_M_FABRIC_HEALTH_BW_DEGRADED,
         GS_QN_FABRIC_BW, W_D, "Whether fabric bandwidth is degraded."),
    BARE("fabric.health.route_recovery_in_progress", NULL, "", QK_NAME,
         GS_M_FABRIC_HEALTH_ROUTE_RECOVERY, GS_QN_TRUE_FALSE, W_D,
         "Whether a fabric route is being recovered."),
    BARE("fabric.health.route_unhealthy", NULL, "", QK_NAME, GS_M_FABRIC_HEALTH_ROUTE_UNHEALTHY,
         GS_QN_TRUE_FALSE, W_D, "Whether a fabric route is unhealthy."),
    BARE("fabric.health.access_timeout_recovery", NULL, "", QK_NAME,
         GS_M_FABRIC_HEALTH_ACCESS_TIMEOUT, GS_QN_TRUE_FALSE, W_D,
         "Whether the fabric recovers from an access timeout."),
    BARE("fabric.health.incorrect_configuration", NULL, "", QK_NAME, GS_M_FABRIC_HEALTH_CONFIG,
         GS_QN_FABRIC_CONFIG, W_D, "Whether the fabric is configured wrongly."),
    R_ON(QB_595 | QB_610, "fabric.health.partition_assigned", NULL, "", QK_NAME, QA_BARE,
         GS_M_FABRIC_HEALTH_PARTITION, GS_QN_TRUE_FALSE, W_D,
         "Whether a fabric partition is assigned."),
    SECT("platform", "Where the GPU sits in a rack-scale system."),
    NONE("platform.chassis_serial_number", NULL, "", "Serial number of the chassis."),
    NONE("platform.slot_number", NULL, "", "Slot in the chassis (switch trays counted)."),
    NONE("platform.tray_index", NULL, "",
         "Compute tray in the chassis (switch trays not counted)."),
    NONE("platform.host_id", NULL, "", "Node within the slot."),
    NONE("platform.peer_type", NULL, "", "Kind of NVLink peer (e.g. behind a switch or not)."),
    ROW("platform.module_id", NULL, "", QK_INT, GS_M_MODULE_ID, 0, W_D, "GPU within the node."),
    NONE("platform.gpu_fabric_guid", NULL, "", "Fabric GUID of the GPU."),
    NONE("hostname", NULL, "", "Host name stored with the GPU (nvidia-smi --set-hostname)."),
    NONE_ON(QB_610, "bbx.time_run", "seconds",
            "Seconds the GPU has run since it was first initialised (inforom black box)."),
};

static const struct gs_qfield app_fields[] = {
    SECT("Active Compute Processes", "Processes that hold a compute context on a GPU, one row per\n"
                                     "process and GPU."),
    ROW("timestamp", NULL, "", QK_TIMESTAMP, 0, 0, 0,
        "When the sample was taken, as \"YYYY/MM/DD HH:MM:SS.msec\" in local time."),
    ROW("gpu_name", NULL, "", QK_TEXT, GS_T_NAME, 0, 0, "Product name of the GPU."),
    ROW("gpu_bus_id", NULL, "", QK_TEXT, GS_T_PCI_BUS_ID, 0, 0,
        "PCI address of the GPU as domain:bus:device.function, hexadecimal."),
    ROW("gpu_serial", NULL, "", QK_TEXT, GS_T_SERIAL, 0, W_S, "Serial number of the GPU's board."),
    ROW("gpu_uuid", NULL, "", QK_TEXT, GS_T_UUID, 0, 0,
        "UUID of the GPU (of the physical GPU in MIG mode)."),
    ROW("pid", NULL, "", QK_PID, 0, 0, 0, "Process id."),
    ROW("process_name", "name", "", QK_PNAME, 0, 0, 0, "Process name as the driver reports it."),
    ROW("used_gpu_memory", "used_memory", "MiB", QK_PMEM, 0, 0, 0,
        "GPU memory the process's context uses (not known under Windows WDDM)."),
};

#define N_GPU_FIELDS (sizeof gpu_fields / sizeof gpu_fields[0])
#define N_APP_FIELDS (sizeof app_fields / sizeof app_fields[0])

static const struct gs_qfield *table(enum gs_qf_list list, size_t *n)
{
    if (list == GS_QF_APPS) {
        *n = N_APP_FIELDS;
        return app_fields;
    }
    *n = N_GPU_FIELDS;
    return gpu_fields;
}

const struct gs_qfield *gs_qf_find(enum gs_qf_list list, const char *name)
{
    size_t n;
    const struct gs_qfield *t = table(list, &n);

    for (size_t i = 0; i < n; i++) {
        if (t[i].kind == QK_SECTION)
            continue;
        /* the first byte before strcmp: most of the ~200 entries differ there */
        if ((t[i].name[0] == name[0] && strcmp(t[i].name, name) == 0) ||
            (t[i].alias && t[i].alias[0] == name[0] && strcmp(t[i].alias, name) == 0))
            return &t[i];
    }
    return NULL;
}

const char *gs_qf_name(const struct gs_qfield *f)
{
    return f->name;
}

const char *gs_qf_unit(const struct gs_qfield *f)
{
    return f->unit;
}

unsigned gs_qf_count(enum gs_qf_list list)
{
    size_t n;
    const struct gs_qfield *t = table(list, &n);
    unsigned c = 0;

    for (size_t i = 0; i < n; i++)
        c += t[i].kind != QK_SECTION;
    return c;
}

/* Blanks nvidia-smi users put after commas ("index, name") are dropped. */
static char *trim(char *s)
{
    char *e;

    while (*s == ' ' || *s == '\t')
        s++;
    e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
        *--e = '\0';
    return s;
}

int gs_qf_parse(struct gs_qf_sel *sel, enum gs_qf_list list, const char *spec, struct gs_err *err)
{
    size_t len = strlen(spec);
    unsigned cap = 1;
    char *p;

    memset(sel, 0, sizeof *sel);
    sel->list = list;
    for (size_t i = 0; i < len; i++)
        cap += spec[i] == ',';
    sel->buf = malloc(len + 1);
    sel->f = calloc(cap, sizeof *sel->f);
    sel->name = calloc(cap, sizeof *sel->name);
    if (!sel->buf || !sel->f || !sel->name) {
        gs_qf_sel_free(sel);
        return gs_err_set(err, GS_ENOMEM, "query: out of memory for %u fields", cap);
    }
    memcpy(sel->buf, spec, len + 1);
    p = sel->buf;
    for (;;) {
        char *comma = strchr(p, ',');
        char *name;
        const struct gs_qfield *f;

        if (comma)
            *comma = '\0';
        name = trim(p);
        f = gs_qf_find(list, name);
        if (!f) {
            gs_err_set(err, GS_EUSAGE, "Field \"%s\" is not a valid field to query.", name);
            gs_qf_sel_free(sel);
            return GS_EUSAGE;
        }
        sel->f[sel->n] = f;
        sel->name[sel->n] = name;
        sel->n++;
        if (!comma)
            break;
        p = comma + 1;
    }
    return GS_OK;
}

void gs_qf_sel_free(struct gs_qf_sel *sel)
{
    if (!sel)
        return;
    free(sel->f);
    free(sel->name);
    free(sel->buf);
    sel->f = NULL;
    sel->name = NULL;
    sel->buf = NULL;
    sel->n = 0;
}

unsigned gs_qf_want(const struct gs_qf_sel *sel)
{
    unsigned want = sel->list == GS_QF_APPS ? GS_WANT_PROCS | GS_WANT_MIG : 0;

    for (unsigned i = 0; i < sel->n; i++)
        want |= sel->f[i]->want;
    return want;
}

void gs_qf_need(const struct gs_qf_sel *sel, unsigned char *metrics, unsigned char *texts)
{
    /* the GPU selection (--id: UUID, PCI bus id) and the process rows' GPU match on these */
    texts[GS_T_UUID] = texts[GS_T_PCI_BUS_ID] = 1;
    for (unsigned i = 0; i < sel->n; i++) {
        const struct gs_qfield *f = sel->f[i];

        switch (f->kind) {
        case QK_SECTION:
        case QK_TIMESTAMP:
        case QK_DRIVER:
        case QK_COUNT:
        case QK_DEPRECATED:
        case QK_PID:
        case QK_PNAME:
        case QK_PMEM:
        case QK_INDEX:
        case QK_NONE:
        case QK_ECCLOC: /* health, read in full with its want bit */
            break;
        case QK_TEXT:
            if (f->arg >= 0 && f->arg < GS_T__COUNT)
                texts[f->arg] = 1;
            break;
        case QK_CCAP:
            if (f->arg2 < GS_M__COUNT)
                metrics[f->arg2] = 1;
            /* fall through */
        default:
            if (f->arg >= 0 && f->arg < GS_M__COUNT)
                metrics[f->arg] = 1;
            break;
        }
    }
}

size_t gs_qf_timestamp(double t_real, char *buf, size_t n)
{
    time_t secs = (time_t)floor(t_real);
    int ms = (int)floor((t_real - (double)secs) * 1000.0);
    struct tm tm;
    char day[32];

    if (n == 0)
        return 0;
    if (ms > 999) /* t_real just below a whole second */
        ms = 999;
    if (ms < 0)
        ms = 0;
    if (!localtime_r(&secs, &tm) || strftime(day, sizeof day, "%Y/%m/%d %H:%M:%S", &tm) == 0) {
        buf[0] = '\0';
        return 0;
    }
    return (size_t)snprintf(buf, n, "%s.%03d", day, ms);
}

/* --- cells ---------------------------------------------------------------------------- */

/* A small formatting cursor: cells are short, so truncation only guards odd input. */
struct cell {
    char *buf;
    size_t n;
    size_t len;
};

static void put(struct cell *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* s appended, cut as vsnprintf cuts: what put(c, "%s", s) writes, without printf's cost. */
static void put_str(struct cell *c, const char *s)
{
    size_t k = strlen(s), room = c->n - c->len - 1;

    if (k > room)
        k = room;
    memcpy(c->buf + c->len, s, k);
    c->len += k;
    c->buf[c->len] = '\0';
}

static void put(struct cell *c, const char *fmt, ...)
{
    va_list ap;
    int w;

    if (c->len + 1 >= c->n)
        return;
    va_start(ap, fmt);
    if (strcmp(fmt, "%s") == 0 || strcmp(fmt, " %s") == 0) { /* most cells and every unit */
        if (fmt[0] == ' ')
            put_str(c, " ");
        put_str(c, va_arg(ap, const char *));
        va_end(ap);
        return;
    }
    w = vsnprintf(c->buf + c->len, c->n - c->len, fmt, ap);
    va_end(ap);
    if (w < 0)
        return;
    c->len += (size_t)w;
    if (c->len >= c->n)
        c->len = c->n - 1;
}

static const char *absent_token(const struct gs_qfield *f, unsigned st)
{
    switch (st) {
    case GS_ST_NOPERM:
        return TOK_NOPERM;
    case GS_ST_ERROR:
        return TOK_ERROR;
    case GS_ST_LOST:
        return TOK_LOST;
    }
    return f->absent == QA_BARE ? TOK_NA_BARE : TOK_NA;
}

/* Number then " unit" unless nounits. */
static void unit(struct cell *c, const struct gs_qfield *f, unsigned flags)
{
    if (f->unit[0] && !(flags & GS_QF_NOUNITS))
        put(c, " %s", f->unit);
}

static long long ll(double v)
{
    return llround(v);
}

static unsigned long long ull(double v)
{
    return v <= 0.0 ? 0ULL : (unsigned long long)llround(v);
}

static const char *compute_mode_name(long long m)
{
    switch (m) {
    case 0:
        return "Default";
    case 1:
        return "Exclusive_Thread";
    case 2:
        return "Prohibited";
    case 3:
        return "Exclusive_Process";
    }
    return NULL;
}

/* Words nvidia-smi prints: addressing, virtualization and host vGPU modes from NVML's enums
 * (captures show "None", "HMM", "Pass-Through"), recovery actions as NVIDIA's memory error
 * management guide names them, fabric states as nvml.h's NVML_GPU_FABRIC_STATE_*. */
static const char *const names_addressing[] = {"None", "HMM", "ATS"};
static const char *const names_recovery[] = {"None", "Reset", "Reboot", "Drain P2P",
                                             "Drain and Reset"};
static const char *const names_virt[] = {"None", "Pass-Through", "VGPU", "Host VGPU", "Host VSGA"};
static const char *const names_host_vgpu[] = {"Non SR-IOV", "SR-IOV"};
static const char *const names_gom[] = {"All On", "Compute", "Low Double Precision"};
static const char *const names_fabric_state[] = {"Not Supported", "Not Started", "In Progress",
                                                 "Completed"};
/* Fabric health: "Healthy", "Full", "False", "True", "Unhealthy" and "None" are in real -q -x
 * files; "Limited Capacity", "Degraded" and the configuration errors (nvml.h's descriptions of
 * NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_*) are unconfirmed (docs/nvidia-smi.md). */
static const char *const names_fabric_health[] = {NULL, "Healthy", "Unhealthy", "Limited Capacity"};
static const char *const names_fabric_bw[] = {"Full", "Degraded"};
static const char *const names_true_false[] = {"False", "True"};
static const char *const names_fabric_config[] = {NULL,
                                                  "None",
                                                  "SysGUID",
                                                  "Chassis Serial Number",
                                                  "No Partition",
                                                  "Insufficient Nvlinks",
                                                  "Incompatible GPU Firmware",
                                                  "Invalid Location",
                                                  "GPU State Invalid"};

/* The registration outcome is an NVML return code; nvidia-smi prints "Success" for it, and
 * nvmlErrorString's words for the codes a registration can end with. */
static const char *fabric_status_name(long long rc)
{
    switch (rc) {
    case 0:
        return "Success";
    case 2:
        return "Invalid Argument";
    case 3:
        return "Not Supported";
    case 4:
        return "Insufficient Permissions";
    case 10:
        return "Timeout";
    case 999:
        return "Unknown Error";
    }
    return NULL;
}

const char *gs_qf_value_name(enum gs_qf_names t, double v)
{
    static const struct {
        const char *const *w;
        size_t n;
    } tabs[] = {
        [GS_QN_ADDRESSING] = {names_addressing, sizeof names_addressing / sizeof *names_addressing},
        [GS_QN_RECOVERY] = {names_recovery, sizeof names_recovery / sizeof *names_recovery},
        [GS_QN_VIRT] = {names_virt, sizeof names_virt / sizeof *names_virt},
        [GS_QN_HOST_VGPU] = {names_host_vgpu, sizeof names_host_vgpu / sizeof *names_host_vgpu},
        [GS_QN_FABRIC_STATE] = {names_fabric_state,
                                sizeof names_fabric_state / sizeof *names_fabric_state},
        [GS_QN_FABRIC_STATUS] = {NULL, 0},
        [GS_QN_GOM] = {names_gom, sizeof names_gom / sizeof *names_gom},
        [GS_QN_FABRIC_HEALTH] = {names_fabric_health,
                                 sizeof names_fabric_health / sizeof *names_fabric_health},
        [GS_QN_FABRIC_BW] = {names_fabric_bw, sizeof names_fabric_bw / sizeof *names_fabric_bw},
        [GS_QN_TRUE_FALSE] = {names_true_false, sizeof names_true_false / sizeof *names_true_false},
        [GS_QN_FABRIC_CONFIG] = {names_fabric_config,
                                 sizeof names_fabric_config / sizeof *names_fabric_config},
    };
    long long k;

    if (!(v >= -1e6 && v <= 1e6) || (unsigned)t >= GS_QN__COUNT)
        return NULL;
    k = llround(v);
    if (t == GS_QN_FABRIC_STATUS)
        return fabric_status_name(k);
    return k >= 0 && (size_t)k < tabs[t].n ? tabs[t].w[k] : NULL;
}

/* nvidia-smi's bytes -> MiB: each cell rounded up on its own (501481472 B is 479 MiB). */
static unsigned long long mib_ceil(double bytes)
{
    unsigned long long b = ull(bytes);

    return b / 1048576ULL + (b % 1048576ULL != 0);
}

/* Status of a reading: on a lost GPU whatever was not read says so (the backend keeps the
 * identity it read before as valid, and nvidia-smi keeps printing the bus id). */
static unsigned status(const struct gs_gpu *g, unsigned st)
{
    return g->lost && st == GS_ST_NA ? GS_ST_LOST : st;
}

static void metric_cell(struct cell *c, const struct gs_qfield *f, const struct gs_gpu *g,
                        unsigned flags)
{
    double v = g->v[f->arg];
    unsigned st = status(g, g->st[f->arg]);
    const char *name;

    if (st != GS_ST_OK) {
        put(c, "%s", absent_token(f, st));
        return;
    }
    switch (f->kind) {
    case QK_INT:
        put(c, "%lld", ll(v));
        break;
    case QK_HEX:
        put(c, "0x%0*llX", (int)f->arg2, ull(v));
        break;
    case QK_MASK:
        put(c, "0x%016llX", ull(v));
        break;
    case QK_BIT:
        put(c, "%s", (ull(v) & f->arg2) ? "Active" : "Not Active");
        break;
    case QK_PSTATE:
        put(c, "P%lld", ll(v));
        break;
    case QK_US:
        put(c, "%lld", ll(v * 1e6));
        break;
    case QK_MIB:
        put(c, "%llu", mib_ceil(v));
        break;
    case QK_PCT:
        put(c, "%lld", ll(v * 100.0));
        break;
    /* NVML reports milliwatts; printing mW/1000 keeps nvidia-smi's rounding exactly. */
    case QK_WATT:
        put(c, "%.2f", (double)ll(v * 1000.0) / 1000.0);
        break;
    case QK_MHZ:
        put(c, "%lld", ll(v / 1e6));
        break;
    case QK_ENABLED:
        put(c, "%s", v != 0.0 ? "Enabled" : "Disabled");
        break;
    case QK_YESNO:
        put(c, "%s", v != 0.0 ? "Yes" : "No");
        break;
    case QK_VALID:
        put(c, "%s", v != 0.0 ? "valid" : "invalid");
        break;
    case QK_PCT2:
        put(c, "%.2f", v * 100.0);
        break;
    case QK_NAME:
        name = gs_qf_value_name((enum gs_qf_names)f->arg2, v);
        put(c, "%s", name ? name : TOK_ERROR);
        break;
    case QK_CMODE:
        name = compute_mode_name(ll(v));
        put(c, "%s", name ? name : TOK_ERROR);
        break;
    case QK_CCAP:
        if (g->st[f->arg2] != GS_ST_OK) {
            put(c, "%s", absent_token(f, status(g, g->st[f->arg2])));
            return;
        }
        put(c, "%lld.%lld", ll(v), ll(g->v[f->arg2]));
        break;
    }
    unit(c, f, flags);
}

static void ecc_cell(struct cell *c, const struct gs_qfield *f, const struct gs_gpu *g)
{
    unsigned t = ((unsigned)f->arg >> 1) & 1, k = (unsigned)f->arg & 1, loc = f->arg2;
    unsigned st = status(g, g->ecc_loc_st[t][k][loc]);

    if (st != GS_ST_OK)
        put(c, "%s", absent_token(f, st));
    else
        put(c, "%llu", (unsigned long long)g->ecc_loc[t][k][loc]);
}

static void text_cell(struct cell *c, const struct gs_qfield *f, const struct gs_gpu *g)
{
    unsigned st = status(g, g->tst[f->arg]);

    if (st == GS_ST_OK)
        put(c, "%s", g->text[f->arg]);
    else
        put(c, "%s", absent_token(f, st));
}

/* nvidia-smi prints nvmlSystemGetProcessName's answer, argv[0] as the process was started
 * ("./gpu_burn", "/usr/bin/kwin_wayland"). Without it, argv[0] from procfs comes closest; the
 * short name (comm) is the last resort. */
static void proc_name_cell(struct cell *c, const struct gs_qfield *f, const struct gs_proc *p)
{
    if (p->nvml_name_st == GS_ST_OK)
        put(c, "%s", p->nvml_name);
    else if (p->host_st == GS_ST_OK && p->cmdline[0] && p->cmdline[0] != ' ')
        put(c, "%.*s", (int)strcspn(p->cmdline, " "), p->cmdline);
    else if (p->name[0])
        put(c, "%s", p->name);
    else
        put(c, "%s", absent_token(f, p->nvml_name_st));
}

static void proc_cell(struct cell *c, const struct gs_qfield *f, const struct gs_proc *p,
                      unsigned flags)
{
    if (!p) {
        put(c, "%s", TOK_NA);
        return;
    }
    switch (f->kind) {
    case QK_PID:
        put(c, "%u", p->pid);
        break;
    case QK_PNAME:
        proc_name_cell(c, f, p);
        break;
    case QK_PMEM:
        if (p->mem_st != GS_ST_OK) {
            put(c, "%s", absent_token(f, p->mem_st));
            return;
        }
        put(c, "%llu", mib_ceil((double)p->gpu_mem_bytes));
        unit(c, f, flags);
        break;
    }
}

size_t gs_qf_cell(const struct gs_qfield *f, const struct gs_snapshot *snap, unsigned gpu,
                  const struct gs_proc *proc, unsigned flags, char *buf, size_t n)
{
    struct cell c = {buf, n, 0};
    const struct gs_gpu *g = gpu < snap->n_gpus ? &snap->gpus[gpu] : NULL;
    char ts[40];

    if (n == 0)
        return 0;
    buf[0] = '\0';
    switch (f->kind) {
    case QK_SECTION:
        break;
    case QK_TIMESTAMP:
        gs_qf_timestamp(snap->t_real, ts, sizeof ts);
        put(&c, "%s", ts);
        break;
    case QK_DRIVER:
        if (snap->sys.driver_st == GS_ST_OK)
            put(&c, "%s", snap->sys.driver_version);
        else
            put(&c, "%s", absent_token(f, snap->sys.driver_st));
        break;
    case QK_COUNT:
        put(&c, "%u", snap->sys.gpu_count ? snap->sys.gpu_count : snap->n_gpus);
        break;
    case QK_DEPRECATED:
        put(&c, "%s", TOK_DEPRECATED);
        break;
    case QK_PID:
    case QK_PNAME:
    case QK_PMEM:
        proc_cell(&c, f, proc, flags);
        break;
    default:
        if (!g) {
            put(&c, "%s", absent_token(f, GS_ST_NA));
            break;
        }
        if (f->kind == QK_INDEX)
            put(&c, "%u", g->index);
        else if (f->kind == QK_NONE)
            put(&c, "%s", absent_token(f, g->lost ? GS_ST_LOST : GS_ST_NA));
        else if (f->kind == QK_TEXT)
            text_cell(&c, f, g);
        else if (f->kind == QK_ECCLOC)
            ecc_cell(&c, f, g);
        else
            metric_cell(&c, f, g, flags);
    }
    return c.len;
}

/* --- lines -------------------------------------------------------------------------------- */

int gs_qf_write_header(FILE *out, const struct gs_qf_sel *sel)
{
    for (unsigned i = 0; i < sel->n; i++) {
        fputs(i ? GS_QF_SEP : "", out);
        fputs(sel->name[i], out);
        if (sel->f[i]->unit[0])
            fprintf(out, " [%s]", sel->f[i]->unit);
    }
    fputc('\n', out);
    return ferror(out) ? GS_EIO : GS_OK;
}

int gs_qf_write_row(FILE *out, const struct gs_qf_sel *sel, const struct gs_snapshot *snap,
                    unsigned gpu, const struct gs_proc *proc, unsigned flags)
{
    char cell[GS_QF_CELL_MAX];

    for (unsigned i = 0; i < sel->n; i++) {
        gs_qf_cell(sel->f[i], snap, gpu, proc, flags, cell, sizeof cell);
        fputs(i ? GS_QF_SEP : "", out);
        fputs(cell, out);
    }
    fputc('\n', out);
    return ferror(out) ? GS_EIO : GS_OK;
}

/* The QB_* bit of a driver major; 0 (unknown) lists every field. */
static unsigned branch_bit(int driver_major)
{
    if (driver_major <= 0)
        return 0;
    return driver_major < 595 ? QB_590 : driver_major < 610 ? QB_595 : QB_610;
}

int gs_qf_on_driver(const struct gs_qfield *f, int driver_major)
{
    unsigned b = branch_bit(driver_major);
    return !f->branches || !b || (f->branches & b);
}

int gs_qf_check_driver(const struct gs_qf_sel *sel, int driver_major, struct gs_err *err)
{
    for (unsigned i = 0; i < sel->n; i++)
        if (!gs_qf_on_driver(sel->f[i], driver_major))
            return gs_err_set(err, GS_EUSAGE, "Field \"%s\" is not a valid field to query.",
                              sel->name[i]);
    return GS_OK;
}

int gs_qf_write_help(FILE *out, enum gs_qf_list list, int driver_major)
{
    size_t n;
    const struct gs_qfield *t = table(list, &n);

    fprintf(out, "List of valid properties to query for the switch \"%s\":\n\n",
            list == GS_QF_APPS ? "--query-compute-apps" : "--query-gpu");
    for (size_t i = 0; i < n; i++) {
        if (!gs_qf_on_driver(&t[i], driver_major))
            continue;
        if (t[i].kind == QK_SECTION) {
            fprintf(out, "Section about %s properties\n%s\n\n", t[i].name, t[i].help);
            continue;
        }
        fprintf(out, "\"%s\"", t[i].name);
        if (t[i].alias)
            fprintf(out, " or \"%s\"", t[i].alias);
        fprintf(out, "\n%s\n\n", t[i].help);
    }
    return ferror(out) ? GS_EIO : GS_OK;
}
