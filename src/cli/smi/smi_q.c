/*
 * nvidia-smi -q: the "NVSMI LOG" text and, with -x, the XML document of NVIDIA's
 * nvsmi_device_v12.dtd (drivers before 590) or nvsmi_device_v13.dtd (590 and later), both from
 * one table of rows so that the two can never disagree.
 *
 * A row has a text label at an indentation depth and an XML element; a group row opens a
 * section (text: its label alone; XML: an element holding the rows below it that are deeper).
 * Values come from the --query-gpu cells of query_fields.c (same numbers, units and rounding as
 * `--query-gpu`, whose bracketed "[N/A]" tokens -q prints bare), from the model directly, or are
 * "N/A" where the model has no source. Rows that differ between boards or drivers carry a
 * condition: T.Limit temperatures (a GPU that reports a temperature margin), the SRAM split of
 * Ampere and later, the 595 driver's extra rows, remapped rows where the GPU has them.
 *
 * The XML keeps element names, nesting and order as drivers write them (telegraf's schema_v12 and
 * schema_v13 and netdata's collector read these paths; tests/e2e/test_smi_xml.py compares them
 * with real documents of drivers 570, 590 and 595). v13 drops gpu_reset_status and voltage.
 * The supported clock list is not in the model: <supported_clocks> is N/A, as nvidia-smi writes
 * it when NVML cannot list them. Two compatibility elements are written as well:
 * gpu_power_readings/power_draw (v12 drivers before 550 put the draw there) and the
 * power_readings section of drivers before 530, which netdata 1.37's collector reads.
 */
#include "cli/smi/smi.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/smi/query_fields.h"
#include "gpuscope/gs_err.h"

#define NA "N/A"
#define NO_MIG 0xFFFFFFFFu
#define COLON 55 /* the ':' column of a row */

enum kind {
    K_GROUP, /* a section */
    K_QF,    /* a --query-gpu field (src) */
    K_NA,    /* no source in the model */
    K_M,     /* a metric of the model with a format (fmt) */
    K_FN,    /* special (fn) */
    K_T,     /* a text of the model (metric: enum gs_text) */
};

enum fmt {
    MF_INT,
    MF_MIB,
    MF_MHZ,
    MF_KBS,
    MF_BIT,
    MF_WATT,
    MF_US,
    MF_YESNO,
    MF_HEX,
    MF_NAME,     /* a word of query_fields' table `bit` (enum gs_qf_names) */
    MF_ENDIS_LC, /* "enabled" / "disabled", lower case (Capabilities) */
    MF_PCT2,     /* a ratio as a percentage with two decimals and no space: "100.00%" */
    MF_ENDIS,    /* "Enabled" / "Disabled" */
    MF_ATOMICS,  /* a mask of NVML_PCIE_ATOMICS_CAP_* bits as names, each followed by a space */
};

enum fn {
    F_TIMESTAMP,
    F_DRIVER,
    F_CUDA,
    F_ATTACHED,
    F_BRAND,
    F_ARCH,
    F_MIG,
    F_PROCS,
    F_ACCOUNTED,
};

/* When a row is printed. */
enum when {
    W_ALL = 0,
    W_TEXT = 1u << 0,     /* text only */
    W_XML = 1u << 1,      /* XML only */
    W_TLIMIT = 1u << 2,   /* the GPU reports a temperature margin (T.Limit) */
    W_NOTLIMIT = 1u << 3, /* it does not */
    W_SPLIT = 1u << 4,    /* Ampere and later: SRAM parity / SEC-DED split and its sources */
    W_NOSPLIT = 1u << 5,  /* before Ampere */
    W_595 = 1u << 6,      /* drivers 595 and later */
    W_REMAP = 1u << 7,    /* remapped rows are reported (and MIG is off) */
    W_NOREMAP = 1u << 8,  /* they are not: one "Remapped Rows : N/A" row */
    W_NO0X = 1u << 9,     /* XML value without its "0x" */
    W_PRE590 = 1u << 10,  /* drivers before 590 (nvsmi_device_v12) only */
    W_610T = 1u << 11,    /* text of drivers 610 and later only */
    W_NOT610T = 1u << 12, /* not in the text of drivers 610 and later */
    W_ECCON = 1u << 13,   /* a value only while ECC is on (N/A otherwise, as nvidia-smi prints) */
};

struct row {
    unsigned char depth;
    unsigned char kind;
    unsigned char arg; /* K_M: enum fmt; K_FN: enum fn */
    unsigned short when;
    unsigned sect; /* -d section of a depth-1 row */
    const char *label;
    const char *tag;
    const char *src; /* K_QF: field name */
    int metric;      /* K_M */
    unsigned long long bit;
    const char *suffix; /* after an answered value */
};

#define D_MEM GS_SMI_D_MEMORY
#define D_UTIL GS_SMI_D_UTILIZATION
#define D_ECC GS_SMI_D_ECC
#define D_TEMP GS_SMI_D_TEMPERATURE
#define D_POWER GS_SMI_D_POWER
#define D_CLOCK GS_SMI_D_CLOCK
#define D_COMPUTE GS_SMI_D_COMPUTE
#define D_PIDS GS_SMI_D_PIDS
#define D_PERF GS_SMI_D_PERFORMANCE
#define D_PAGE GS_SMI_D_PAGE_RETIREMENT
#define D_ACCT GS_SMI_D_ACCOUNTING
#define D_ENC GS_SMI_D_ENCODER_STATS
#define D_FBC GS_SMI_D_FBC_STATS
#define D_REMAP GS_SMI_D_ROW_REMAPPER

/* clang-format off */
#define G(d, w, s, l, t) {d, K_GROUP, 0, w, s, l, t, NULL, 0, 0, NULL}
#define Q(d, w, s, l, t, f) {d, K_QF, 0, w, s, l, t, f, 0, 0, NULL}
#define QS(d, w, s, l, t, f, x) {d, K_QF, 0, w, s, l, t, f, 0, 0, x}
#define N(d, w, s, l, t) {d, K_NA, 0, w, s, l, t, NULL, 0, 0, NULL}
#define M(d, w, s, l, t, m, f) {d, K_M, f, w, s, l, t, NULL, m, 0, NULL}
#define B(d, w, s, l, t, bit) {d, K_M, MF_BIT, w, s, l, t, NULL, GS_M_THROTTLE_ACTIVE, bit, NULL}
#define F(d, w, s, l, t, f) {d, K_FN, f, w, s, l, t, NULL, 0, 0, NULL}
#define T(d, w, s, l, t, x) {d, K_T, 0, w, s, l, t, NULL, x, 0, NULL}
#define MN(d, w, s, l, t, m, tab) {d, K_M, MF_NAME, w, s, l, t, NULL, m, tab, NULL}
/* clang-format on */

#define ECC_SET(w, kind, ctr)                                                                      \
    Q(3, w, 0, "SRAM Correctable", "sram_correctable", "ecc.errors.corrected." ctr ".sram"),       \
        Q(3, W_NOSPLIT | w, 0, "SRAM Uncorrectable", "sram_uncorrectable",                         \
          "ecc.errors.uncorrected." ctr ".sram"),                                                  \
        Q(3, W_SPLIT | W_ECCON | w, 0, "SRAM Uncorrectable Parity", "sram_uncorrectable_parity",   \
          "ecc.errors.uncorrected." ctr ".sram.parity"),                                           \
        Q(3, W_SPLIT | W_ECCON | w, 0, "SRAM Uncorrectable SEC-DED", "sram_uncorrectable_secded",  \
          "ecc.errors.uncorrected." ctr ".sram.secded"),                                           \
        Q(3, w, 0, "DRAM Correctable", "dram_correctable", "ecc.errors.corrected." ctr ".dram"),   \
        Q(3, w, 0, "DRAM Uncorrectable", "dram_uncorrectable",                                     \
          "ecc.errors.uncorrected." ctr ".dram")

#define POWER5(d, w, pre)                                                                          \
    N(d, w, 0, "Average Power Draw", "average_power_draw"),                                        \
        N(d, w, 0, "Instantaneous Power Draw", "instant_power_draw"),                              \
        N(d, w, 0, "Current Power Limit", "current_power_limit"),                                  \
        N(d, w, 0, "Requested Power Limit", "requested_power_limit"),                              \
        N(d, w, 0, "Default Power Limit", "default_power_limit"),                                  \
        N(d, w, 0, "Min Power Limit", "min_power_limit"),                                          \
        N(d, w, 0, "Max Power Limit", "max_power_limit")

static const struct row rows[] = {
    Q(1, 0, 0, "Product Name", "product_name", "name"),
    F(1, 0, 0, "Product Brand", "product_brand", F_BRAND),
    F(1, 0, 0, "Product Architecture", "product_architecture", F_ARCH),
    Q(1, 0, 0, "Display Mode", "display_mode", "display_mode"),
    Q(1, 0, 0, "Display Attached", "display_attached", "display_attached"),
    Q(1, 0, 0, "Display Active", "display_active", "display_active"),
    Q(1, 0, 0, "Persistence Mode", "persistence_mode", "persistence_mode"),
    Q(1, 0, 0, "Addressing Mode", "addressing_mode", "addressing_mode"),
    G(1, 0, 0, "MIG Mode", "mig_mode"),
    Q(2, 0, 0, "Current", "current_mig", "mig.mode.current"),
    Q(2, 0, 0, "Pending", "pending_mig", "mig.mode.pending"),
    F(1, 0, 0, "MIG Device", "mig_devices", F_MIG),
    Q(1, 0, D_ACCT, "Accounting Mode", "accounting_mode", "accounting.mode"),
    Q(1, 0, D_ACCT, "Accounting Mode Buffer Size", "accounting_mode_buffer_size",
      "accounting.buffer_size"),
    G(1, 0, 0, "Driver Model", "driver_model"),
    Q(2, 0, 0, "Current", "current_dm", "driver_model.current"),
    Q(2, 0, 0, "Pending", "pending_dm", "driver_model.pending"),
    Q(1, 0, 0, "Serial Number", "serial", "serial"),
    Q(1, 0, 0, "GPU UUID", "uuid", "uuid"),
    T(1, 0, 0, "GPU PDI", "pdi", GS_T_PDI),
    M(1, 0, 0, "Minor Number", "minor_number", GS_M_MINOR, MF_INT),
    Q(1, 0, 0, "VBIOS Version", "vbios_version", "vbios_version"),
    M(1, 0, 0, "MultiGPU Board", "multigpu_board", GS_M_MULTI_GPU_BOARD, MF_YESNO),
    M(1, 0, 0, "Board ID", "board_id", GS_M_BOARD_ID, MF_HEX),
    T(1, 0, 0, "Board Part Number", "board_part_number", GS_T_BOARD_PART),
    N(1, 0, 0, "GPU Part Number", "gpu_part_number"),
    N(1, 0, 0, "FRU Part Number", "gpu_fru_part_number"),
    G(1, 0, 0, "Platform Info", "platformInfo"),
    Q(2, 0, 0, "Chassis Serial Number", "chassis_serial_number", "platform.chassis_serial_number"),
    Q(2, 0, 0, "Slot Number", "slot_number", "platform.slot_number"),
    Q(2, 0, 0, "Tray Index", "tray_index", "platform.tray_index"),
    Q(2, 0, 0, "Host ID", "host_id", "platform.host_id"),
    Q(2, 0, 0, "Peer Type", "peer_type", "platform.peer_type"),
    Q(2, 0, 0, "Module Id", "module_id", "platform.module_id"),
    Q(2, 0, 0, "GPU Fabric GUID", "gpu_fabric_guid", "platform.gpu_fabric_guid"),
    G(1, 0, 0, "Inforom Version", "inforom_version"),
    Q(2, 0, 0, "Image Version", "img_version", "inforom.img"),
    Q(2, 0, 0, "OEM Object", "oem_object", "inforom.oem"),
    Q(2, 0, 0, "ECC Object", "ecc_object", "inforom.ecc"),
    Q(2, 0, 0, "Power Management Object", "pwr_object", "inforom.pwr"),
    G(1, 0, 0, "Inforom BBX Object Flush", "inforom_bbx_flush"),
    N(2, 0, 0, "Latest Timestamp", "latest_timestamp"),
    N(2, 0, 0, "Latest Duration", "latest_duration"),
    G(1, W_610T, 0, "Inforom Time Data", NULL),
    N(2, 0, 0, "Time Run", NULL),
    G(1, 0, 0, "GPU Operation Mode", "gpu_operation_mode"),
    Q(2, 0, 0, "Current", "current_gom", "gom.current"),
    Q(2, 0, 0, "Pending", "pending_gom", "gom.pending"),
    Q(1, 0, 0, "GPU C2C Mode", "c2c_mode", "c2c.mode"),
    G(1, 0, 0, "GPU Virtualization Mode", "gpu_virtualization_mode"),
    MN(2, 0, 0, "Virtualization Mode", "virtualization_mode", GS_M_VIRT_MODE, GS_QN_VIRT),
    MN(2, 0, 0, "Host VGPU Mode", "host_vgpu_mode", GS_M_HOST_VGPU_MODE, GS_QN_HOST_VGPU),
    M(2, 0, 0, "vGPU Heterogeneous Mode", "vgpu_heterogeneous_mode", GS_M_VGPU_HETERO, MF_ENDIS),
    G(1, W_XML | W_PRE590, 0, "GPU Reset Status", "gpu_reset_status"),
    N(2, 0, 0, "Reset Required", "reset_required"),
    N(2, 0, 0, "Drain and Reset Recommended", "drain_and_reset_recommended"),
    Q(1, 0, 0, "GPU Recovery Action", "gpu_recovery_action", "gpu_recovery_action"),
    T(1, 0, 0, "GSP Firmware Version", "gsp_firmware_version", GS_T_GSP_VERSION),
    G(1, 0, 0, "IBMNPU", "ibmnpu"),
    N(2, 0, 0, "Relaxed Ordering Mode", "relaxed_ordering_mode"),
    G(1, 0, 0, "PCI", "pci"),
    Q(2, W_NO0X, 0, "Bus", "pci_bus", "pci.bus"),
    Q(2, W_NO0X, 0, "Device", "pci_device", "pci.device"),
    Q(2, W_NO0X, 0, "Domain", "pci_domain", "pci.domain"),
    Q(2, W_NO0X, 0, "Base Classcode", "pci_base_class", "pci.baseClass"),
    Q(2, W_NO0X, 0, "Sub Classcode", "pci_sub_class", "pci.subClass"),
    Q(2, W_NO0X, 0, "Device Id", "pci_device_id", "pci.device_id"),
    Q(2, 0, 0, "Bus Id", "pci_bus_id", "pci.bus_id"),
    Q(2, W_NO0X, 0, "Sub System Id", "pci_sub_system_id", "pci.sub_device_id"),
    G(2, 0, 0, "GPU Link Info", "pci_gpu_link_info"),
    G(3, 0, 0, "PCIe Generation", "pcie_gen"),
    Q(4, 0, 0, "Max", "max_link_gen", "pcie.link.gen.max"),
    Q(4, 0, 0, "Current", "current_link_gen", "pcie.link.gen.current"),
    Q(4, 0, 0, "Device Current", "device_current_link_gen", "pcie.link.gen.gpucurrent"),
    Q(4, 0, 0, "Device Max", "max_device_link_gen", "pcie.link.gen.gpumax"),
    Q(4, 0, 0, "Host Max", "max_host_link_gen", "pcie.link.gen.hostmax"),
    G(3, 0, 0, "Link Width", "link_widths"),
    QS(4, 0, 0, "Max", "max_link_width", "pcie.link.width.max", "x"),
    QS(4, 0, 0, "Current", "current_link_width", "pcie.link.width.current", "x"),
    G(2, 0, 0, "Bridge Chip", "pci_bridge_chip"),
    N(3, 0, 0, "Type", "bridge_chip_type"),
    N(3, 0, 0, "Firmware", "bridge_chip_fw"),
    M(2, 0, 0, "Replays Since Reset", "replay_counter", GS_M_PCIE_REPLAY, MF_INT),
    M(2, 0, 0, "Replay Number Rollovers", "replay_rollover_counter", GS_M_PCIE_REPLAY_ROLLOVER,
      MF_INT),
    M(2, 0, 0, "Tx Throughput", "tx_util", GS_M_PCIE_TX, MF_KBS),
    M(2, 0, 0, "Rx Throughput", "rx_util", GS_M_PCIE_RX, MF_KBS),
    M(2, 0, 0, "Atomic Caps Outbound", "atomic_caps_outbound", GS_M_PCIE_ATOMICS_OUT, MF_ATOMICS),
    M(2, 0, 0, "Atomic Caps Inbound", "atomic_caps_inbound", GS_M_PCIE_ATOMICS_IN, MF_ATOMICS),
    Q(1, 0, 0, "Fan Speed", "fan_speed", "fan.speed"),
    Q(1, 0, D_PERF, "Performance State", "performance_state", "pstate"),
    G(1, 0, D_PERF, "Clocks Event Reasons", "clocks_event_reasons"),
    B(2, 0, 0, "Idle", "clocks_event_reason_gpu_idle", GS_THR_GPU_IDLE),
    B(2, 0, 0, "Applications Clocks Setting", "clocks_event_reason_applications_clocks_setting",
      GS_THR_APP_CLOCKS),
    B(2, 0, 0, "SW Power Cap", "clocks_event_reason_sw_power_cap", GS_THR_SW_POWER_CAP),
    B(2, 0, 0, "HW Slowdown", "clocks_event_reason_hw_slowdown", GS_THR_HW_SLOWDOWN),
    B(3, 0, 0, "HW Thermal Slowdown", "clocks_event_reason_hw_thermal_slowdown", GS_THR_HW_THERMAL),
    B(3, 0, 0, "HW Power Brake Slowdown", "clocks_event_reason_hw_power_brake_slowdown",
      GS_THR_HW_POWER_BRAKE),
    B(2, 0, 0, "Sync Boost", "clocks_event_reason_sync_boost", GS_THR_SYNC_BOOST),
    B(2, 0, 0, "SW Thermal Slowdown", "clocks_event_reason_sw_thermal_slowdown", GS_THR_SW_THERMAL),
    B(2, 0, 0, "Display Clock Setting", "clocks_event_reason_display_clocks_setting",
      GS_THR_DISPLAY_CLOCK),
    G(1, 0, D_PERF, "Clocks Event Reasons Counters", "clocks_event_reasons_counters"),
    Q(2, 0, 0, "SW Power Capping", "clocks_event_reasons_counters_sw_power_cap",
      "clocks_event_reasons_counters.sw_power_cap"),
    Q(2, 0, 0, "Sync Boost", "clocks_event_reasons_counters_sync_boost",
      "clocks_event_reasons_counters.sync_boost"),
    Q(2, 0, 0, "SW Thermal Slowdown", "clocks_event_reasons_counters_sw_therm_slowdown",
      "clocks_event_reasons_counters.sw_thermal_slowdown"),
    Q(2, 0, 0, "HW Thermal Slowdown", "clocks_event_reasons_counters_hw_therm_slowdown",
      "clocks_event_reasons_counters.hw_thermal_slowdown"),
    Q(2, 0, 0, "HW Power Braking", "clocks_event_reasons_counters_hw_power_brake",
      "clocks_event_reasons_counters.hw_power_brake_slowdown"),
    N(1, 0, 0, "Sparse Operation Mode", "sparse_operation_mode"),
    G(1, 0, D_MEM, "FB Memory Usage", "fb_memory_usage"),
    Q(2, 0, 0, "Total", "total", "memory.total"),
    Q(2, 0, 0, "Reserved", "reserved", "memory.reserved"),
    Q(2, 0, 0, "Used", "used", "memory.used"),
    Q(2, 0, 0, "Free", "free", "memory.free"),
    G(1, 0, D_MEM, "BAR1 Memory Usage", "bar1_memory_usage"),
    M(2, 0, 0, "Total", "total", GS_M_BAR1_TOTAL, MF_MIB),
    M(2, 0, 0, "Used", "used", GS_M_BAR1_USED, MF_MIB),
    M(2, 0, 0, "Free", "free", GS_M_BAR1_FREE, MF_MIB),
    G(1, 0, D_MEM, "Conf Compute Protected Memory Usage", "cc_protected_memory_usage"),
    Q(2, 0, 0, "Total", "total", "protected_memory.total"),
    Q(2, 0, 0, "Used", "used", "protected_memory.used"),
    Q(2, 0, 0, "Free", "free", "protected_memory.free"),
    Q(1, 0, D_COMPUTE, "Compute Mode", "compute_mode", "compute_mode"),
    G(1, 0, D_UTIL, "Utilization", "utilization"),
    Q(2, 0, 0, "GPU", "gpu_util", "utilization.gpu"),
    Q(2, 0, 0, "Memory", "memory_util", "utilization.memory"),
    Q(2, 0, 0, "Encoder", "encoder_util", "utilization.encoder"),
    Q(2, 0, 0, "Decoder", "decoder_util", "utilization.decoder"),
    Q(2, 0, 0, "JPEG", "jpeg_util", "utilization.jpeg"),
    Q(2, 0, 0, "OFA", "ofa_util", "utilization.ofa"),
    G(1, 0, D_ENC, "Encoder Stats", "encoder_stats"),
    Q(2, 0, 0, "Active Sessions", "session_count", "encoder.stats.sessionCount"),
    Q(2, 0, 0, "Average FPS", "average_fps", "encoder.stats.averageFps"),
    Q(2, 0, 0, "Average Latency", "average_latency", "encoder.stats.averageLatency"),
    G(1, 0, D_FBC, "FBC Stats", "fbc_stats"),
    M(2, 0, 0, "Active Sessions", "session_count", GS_M_FBC_SESSIONS, MF_INT),
    M(2, 0, 0, "Average FPS", "average_fps", GS_M_FBC_FPS, MF_INT),
    M(2, 0, 0, "Average Latency", "average_latency", GS_M_FBC_LATENCY, MF_US),
    G(1, 0, 0, "DRAM Encryption Mode", "dram_encryption_mode"),
    Q(2, 0, 0, "Current", "current_dram_encryption", "dramEncryption.mode.current"),
    Q(2, 0, 0, "Pending", "pending_dram_encryption", "dramEncryption.mode.pending"),
    G(1, 0, D_ECC, "ECC Mode", "ecc_mode"),
    Q(2, 0, 0, "Current", "current_ecc", "ecc.mode.current"),
    Q(2, 0, 0, "Pending", "pending_ecc", "ecc.mode.pending"),
    G(1, 0, D_ECC, "ECC Errors", "ecc_errors"),
    G(2, 0, 0, "Volatile", "volatile"),
    ECC_SET(0, "volatile", "volatile"),
    G(2, 0, 0, "Aggregate", "aggregate"),
    ECC_SET(0, "aggregate", "aggregate"),
    Q(3, W_SPLIT | W_ECCON, 0, "SRAM Threshold Exceeded", "sram_threshold_exceeded",
      "ecc.errors.uncorrected.aggregate.sram.thresholdExceeded"),
    G(2, W_SPLIT, 0, "Aggregate Uncorrectable SRAM Sources",
      "aggregate_uncorrectable_sram_sources"),
    Q(3, W_SPLIT | W_ECCON, 0, "SRAM L2", "sram_l2", "ecc.errors.uncorrected.aggregate.sram.l2"),
    Q(3, W_SPLIT | W_ECCON, 0, "SRAM SM", "sram_sm", "ecc.errors.uncorrected.aggregate.sram.sm"),
    Q(3, W_SPLIT | W_ECCON, 0, "SRAM Microcontroller", "sram_microcontroller",
      "ecc.errors.uncorrected.aggregate.sram.mcu"),
    Q(3, W_SPLIT | W_ECCON, 0, "SRAM PCIE", "sram_pcie",
      "ecc.errors.uncorrected.aggregate.sram.pcie"),
    Q(3, W_SPLIT | W_ECCON, 0, "SRAM Other", "sram_other",
      "ecc.errors.uncorrected.aggregate.sram.other"),
    M(2, W_SPLIT, 0, "Channel Repair Pending", "channel_repair_pending", GS_M_REPAIR_CHANNEL,
      MF_YESNO),
    M(2, W_SPLIT, 0, "TPC Repair Pending", "tpc_repair_pending", GS_M_REPAIR_TPC, MF_YESNO),
    M(2, W_SPLIT, 0, "Unrepairable Memory", "unrepairable_memory", GS_M_UNREPAIRABLE_MEM, MF_YESNO),
    G(1, 0, D_PAGE, "Retired Pages", "retired_pages"),
    Q(2, W_TEXT, 0, "Single Bit ECC", NULL, "retired_pages.single_bit_ecc.count"),
    Q(2, W_TEXT, 0, "Double Bit ECC", NULL, "retired_pages.double_bit.count"),
    G(2, W_XML, 0, NULL, "multiple_single_bit_retirement"),
    Q(3, W_XML, 0, NULL, "retired_count", "retired_pages.single_bit_ecc.count"),
    N(3, W_XML, 0, NULL, "retired_pagelist"),
    G(2, W_XML, 0, NULL, "double_bit_retirement"),
    Q(3, W_XML, 0, NULL, "retired_count", "retired_pages.double_bit.count"),
    N(3, W_XML, 0, NULL, "retired_pagelist"),
    Q(2, 0, 0, "Pending Page Blacklist", "pending_blacklist", "retired_pages.pending"),
    N(2, W_XML, 0, NULL, "pending_retirement"),
    N(1, W_NOREMAP, D_REMAP, "Remapped Rows", "remapped_rows"),
    G(1, W_REMAP, D_REMAP, "Remapped Rows", "remapped_rows"),
    Q(2, 0, 0, "Correctable Error", "remapped_row_corr", "remapped_rows.correctable"),
    Q(2, W_595, 0, "Inactive Correctable Error", "remapped_row_corr_inactive",
      "remapped_rows.correctable_inactive"),
    Q(2, 0, 0, "Uncorrectable Error", "remapped_row_unc", "remapped_rows.uncorrectable"),
    Q(2, W_595, 0, "Inactive Uncorrectable Error", "remapped_row_unc_inactive",
      "remapped_rows.uncorrectable_inactive"),
    Q(2, 0, 0, "Pending", "remapped_row_pending", "remapped_rows.pending"),
    Q(2, 0, 0, "Remapping Failure Occurred", "remapped_row_failure", "remapped_rows.failure"),
    G(2, 0, 0, "Bank Remap Availability Histogram", "row_remapper_histogram"),
    QS(3, 0, 0, "Max", "row_remapper_histogram_max", "remapped_rows.histogram.max", " bank(s)"),
    QS(3, 0, 0, "High", "row_remapper_histogram_high", "remapped_rows.histogram.high", " bank(s)"),
    QS(3, 0, 0, "Partial", "row_remapper_histogram_partial", "remapped_rows.histogram.partial",
       " bank(s)"),
    QS(3, 0, 0, "Low", "row_remapper_histogram_low", "remapped_rows.histogram.low", " bank(s)"),
    QS(3, 0, 0, "None", "row_remapper_histogram_none", "remapped_rows.histogram.none", " bank(s)"),
    G(1, 0, D_TEMP, "Temperature", "temperature"),
    QS(2, 0, 0, "GPU Current Temp", "gpu_temp", "temperature.gpu", " C"),
    QS(2, 0, 0, "GPU T.Limit Temp", "gpu_temp_tlimit", "temperature.gpu.tlimit", " C"),
    {2, K_M, MF_INT, W_TLIMIT, 0, "GPU Shutdown T.Limit Temp", "gpu_temp_max_tlimit_threshold",
     NULL, GS_M_TLIMIT_SHUTDOWN, 0, " C"},
    {2, K_M, MF_INT, W_TLIMIT, 0, "GPU Slowdown T.Limit Temp", "gpu_temp_slow_tlimit_threshold",
     NULL, GS_M_TLIMIT_SLOWDOWN, 0, " C"},
    {2, K_M, MF_INT, W_TLIMIT, 0, "GPU Max Operating T.Limit Temp",
     "gpu_temp_max_gpu_tlimit_threshold", NULL, GS_M_TLIMIT_GPU_MAX, 0, " C"},
    {2, K_M, MF_INT, W_NOTLIMIT, 0, "GPU Shutdown Temp", "gpu_temp_max_threshold", NULL,
     GS_M_TEMP_SHUTDOWN, 0, " C"},
    {2, K_M, MF_INT, W_NOTLIMIT, 0, "GPU Slowdown Temp", "gpu_temp_slow_threshold", NULL,
     GS_M_TEMP_SLOWDOWN, 0, " C"},
    {2, K_M, MF_INT, W_NOTLIMIT, 0, "GPU Max Operating Temp", "gpu_temp_max_gpu_threshold", NULL,
     GS_M_TEMP_GPU_MAX, 0, " C"},
    {2, K_M, MF_INT, 0, 0, "GPU Target Temperature", "gpu_target_temperature", NULL,
     GS_M_TEMP_TARGET, 0, " C"},
    QS(2, 0, 0, "Memory Current Temp", "memory_temp", "temperature.memory", " C"),
    {2, K_M, MF_INT, W_TLIMIT, 0, "Memory Max Operating T.Limit Temp",
     "gpu_temp_max_mem_tlimit_threshold", NULL, GS_M_TLIMIT_MEM_MAX, 0, " C"},
    {2, K_M, MF_INT, W_NOTLIMIT, 0, "Memory Max Operating Temp", "gpu_temp_max_mem_threshold", NULL,
     GS_M_TEMP_MEM_MAX, 0, " C"},
    G(1, W_XML, D_TEMP, NULL, "supported_gpu_target_temp"),
    {2, K_M, MF_INT, W_XML, 0, NULL, "gpu_target_temp_min", NULL, GS_M_TEMP_TARGET_MIN, 0, " C"},
    {2, K_M, MF_INT, W_XML, 0, NULL, "gpu_target_temp_max", NULL, GS_M_TEMP_TARGET_MAX, 0, " C"},
    G(1, W_XML, D_POWER, NULL, "power_readings"),
    Q(2, W_XML, 0, NULL, "power_state", "pstate"),
    Q(2, W_XML, 0, NULL, "power_management", "power.management"),
    Q(2, W_XML, 0, NULL, "power_draw", "power.draw"),
    Q(2, W_XML, 0, NULL, "power_limit", "power.limit"),
    Q(2, W_XML, 0, NULL, "default_power_limit", "power.default_limit"),
    Q(2, W_XML, 0, NULL, "enforced_power_limit", "enforced.power.limit"),
    Q(2, W_XML, 0, NULL, "min_power_limit", "power.min_limit"),
    Q(2, W_XML, 0, NULL, "max_power_limit", "power.max_limit"),
    G(1, 0, D_POWER, "GPU Power Readings", "gpu_power_readings"),
    Q(2, W_XML, 0, NULL, "power_state", "pstate"),
    Q(2, W_XML, 0, NULL, "power_draw", "power.draw"),
    Q(2, 0, 0, "Average Power Draw", "average_power_draw", "power.draw.average"),
    Q(2, 0, 0, "Instantaneous Power Draw", "instant_power_draw", "power.draw.instant"),
    Q(2, W_NOT610T, 0, "Current Power Limit", "current_power_limit", "enforced.power.limit"),
    Q(2, W_NOT610T, 0, "Requested Power Limit", "requested_power_limit", "power.limit"),
    Q(2, W_NOT610T, 0, "Default Power Limit", "default_power_limit", "power.default_limit"),
    G(2, W_610T, 0, "GPU Ceiling Power Limit", NULL),
    Q(3, 0, 0, "Current Power Limit", NULL, "enforced.power.limit"),
    Q(3, 0, 0, "Requested Power Limit", NULL, "power.limit"),
    Q(3, 0, 0, "Default Power Limit", NULL, "power.default_limit"),
    G(2, W_610T, 0, "GPU Base Power", NULL),
    N(3, 0, 0, "Current Base Power", NULL),
    N(3, 0, 0, "Requested Base Power", NULL),
    N(3, 0, 0, "Default Base Power", NULL),
    Q(2, 0, 0, "Min Power Limit", "min_power_limit", "power.min_limit"),
    Q(2, 0, 0, "Max Power Limit", "max_power_limit", "power.max_limit"),
    G(1, 0, D_POWER, "GPU Memory Power Readings ", "gpu_memory_power_readings"),
    M(2, 0, 0, "Average Power Draw", "average_power_draw", GS_M_POWER_MEMORY_AVERAGE, MF_WATT),
    M(2, 0, 0, "Instantaneous Power Draw", "instant_power_draw", GS_M_POWER_MEMORY_INSTANT,
      MF_WATT),
    G(1, 0, D_POWER, "Module Power Readings", "module_power_readings"),
    Q(2, W_XML, 0, NULL, "power_state", "pstate"),
    Q(2, 0, 0, "Average Power Draw", "average_power_draw", "module.power.draw.average"),
    Q(2, 0, 0, "Instantaneous Power Draw", "instant_power_draw", "module.power.draw.instant"),
    Q(2, 0, 0, "Current Power Limit", "current_power_limit", "module.enforced.power.limit"),
    Q(2, 0, 0, "Requested Power Limit", "requested_power_limit", "module.power.limit"),
    Q(2, 0, 0, "Default Power Limit", "default_power_limit", "module.power.default_limit"),
    Q(2, 0, 0, "Min Power Limit", "min_power_limit", "module.power.min_limit"),
    Q(2, 0, 0, "Max Power Limit", "max_power_limit", "module.power.max_limit"),
    N(1, 0, D_POWER, "Power Smoothing", "power_smoothing"),
    G(1, 0, D_POWER, "Workload Power Profiles", "power_profiles"),
    N(2, 0, 0, "Requested Profiles", "power_profile_requested_profiles"),
    N(2, 0, 0, "Enforced Profiles", "power_profile_enforced_profiles"),
    M(1, 0, D_POWER, "EDPp Multiplier", "edpp_multiplier", GS_M_EDPP_MULTIPLIER, MF_PCT2),
    G(1, 0, D_CLOCK, "Clocks", "clocks"),
    Q(2, 0, 0, "Graphics", "graphics_clock", "clocks.current.graphics"),
    Q(2, 0, 0, "SM", "sm_clock", "clocks.current.sm"),
    Q(2, 0, 0, "Memory", "mem_clock", "clocks.current.memory"),
    Q(2, 0, 0, "Video", "video_clock", "clocks.current.video"),
    G(1, 0, D_CLOCK, "Applications Clocks", "applications_clocks"),
    Q(2, 0, 0, "Graphics", "graphics_clock", "clocks.applications.graphics"),
    Q(2, 0, 0, "Memory", "mem_clock", "clocks.applications.memory"),
    G(1, 0, D_CLOCK, "Default Applications Clocks", "default_applications_clocks"),
    Q(2, 0, 0, "Graphics", "graphics_clock", "clocks.default_applications.graphics"),
    Q(2, 0, 0, "Memory", "mem_clock", "clocks.default_applications.memory"),
    G(1, 0, D_CLOCK, "Deferred Clocks", "deferred_clocks"),
    N(2, 0, 0, "Memory", "mem_clock"),
    G(1, 0, D_CLOCK, "Max Clocks", "max_clocks"),
    Q(2, 0, 0, "Graphics", "graphics_clock", "clocks.max.graphics"),
    Q(2, 0, 0, "SM", "sm_clock", "clocks.max.sm"),
    Q(2, 0, 0, "Memory", "mem_clock", "clocks.max.memory"),
    M(2, 0, 0, "Video", "video_clock", GS_M_CLOCK_MAX_VIDEO, MF_MHZ),
    G(1, 0, D_CLOCK, "Max Customer Boost Clocks", "max_customer_boost_clocks"),
    M(2, 0, 0, "Graphics", "graphics_clock", GS_M_CLOCK_BOOST_MAX_GR, MF_MHZ),
    G(1, 0, D_CLOCK, "Clock Policy", "clock_policy"),
    N(2, 0, 0, "Auto Boost", "auto_boost"),
    N(2, 0, 0, "Auto Boost Default", "auto_boost_default"),
    G(1, W_XML | W_PRE590, GS_SMI_D_VOLTAGE, NULL, "voltage"),
    N(2, W_XML, 0, NULL, "graphics_volt"),
    G(1, 0, 0, "Fabric", "fabric"),
    Q(2, 0, 0, "State", "state", "fabric.state"),
    Q(2, 0, 0, "Status", "status", "fabric.status"),
    Q(2, 0, 0, "CliqueId", "cliqueId", "fabric.cliqueId"),
    Q(2, 0, 0, "ClusterUUID", "clusterUuid", "fabric.clusterUuid"),
    G(2, 0, 0, "Health", "health"),
    Q(3, 0, 0, "Summary", "summary", "fabric.health.summary"),
    Q(3, 0, 0, "Bandwidth", "bandwidth", "fabric.health.bandwidth"),
    Q(3, 0, 0, "Route Recovery in progress", "route_recovery_in_progress",
      "fabric.health.route_recovery_in_progress"),
    Q(3, 0, 0, "Route Unhealthy", "route_unhealthy", "fabric.health.route_unhealthy"),
    Q(3, 0, 0, "Access Timeout Recovery", "access_timeout_recovery",
      "fabric.health.access_timeout_recovery"),
    Q(3, 0, 0, "Incorrect Configuration", "incorrect_configuration",
      "fabric.health.incorrect_configuration"),
    Q(3, W_595, 0, "Partition Assigned", "partition_assigned", "fabric.health.partition_assigned"),
    N(1, W_XML, GS_SMI_D_SUPPORTED_CLOCKS, NULL, "supported_clocks"),
    F(1, 0, D_PIDS, "Processes", "processes", F_PROCS),
    F(1, W_XML, D_ACCT, NULL, "accounted_processes", F_ACCOUNTED),
    G(1, 0, 0, "Capabilities", "capabilities"),
    M(2, 0, 0, "EGM", "egm", GS_M_EGM, MF_ENDIS_LC),
};

/* --- output -------------------------------------------------------------------------------- */

struct q {
    FILE *out;
    const struct gs_snapshot *s;
    const struct gs_gpu *g;
    unsigned gpu;
    int xml;
    const struct gs_smi_layout *layout;
};

/* Text labels drivers 610 and later changed, by the row's XML element. */
static const struct {
    const char *tag;
    const char *label;
} labels_610[] = {
    {"gpu_temp_tlimit", "GPU Current T.Limit Temp"},
    {"gpu_target_temperature", "GPU Target Temperature Specification"},
};

static const char *row_label(const struct q *q, const struct row *r)
{
    if (q->layout->rows_610 && r->tag)
        for (size_t i = 0; i < sizeof labels_610 / sizeof labels_610[0]; i++)
            if (strcmp(r->tag, labels_610[i].tag) == 0)
                return labels_610[i].label;
    return r->label;
}

static void xml_escaped(FILE *out, const char *v)
{
    for (; *v; v++) {
        switch (*v) {
        case '&':
            fputs("&amp;", out);
            break;
        case '<':
            fputs("&lt;", out);
            break;
        case '>':
            fputs("&gt;", out);
            break;
        case '"':
            fputs("&quot;", out);
            break;
        default:
            fputc(*v, out);
        }
    }
}

static void tabs(FILE *out, unsigned n)
{
    while (n--)
        fputc('\t', out);
}

/* One value line: text "label : value" with the colon at column `colon`, or <tag>value</tag>
 * at XML depth xd. */
static void leaf(struct q *q, unsigned depth, unsigned xd, int colon, const char *label,
                 const char *tag, const char *v)
{
    if (q->xml) {
        tabs(q->out, xd);
        fprintf(q->out, "<%s>", tag);
        xml_escaped(q->out, v);
        fprintf(q->out, "</%s>\n", tag);
        return;
    }
    fprintf(q->out, "%*s%-*s: %s\n", (int)(4 * depth), "", colon - (int)(4 * depth), label, v);
}

static void open_group(struct q *q, unsigned depth, unsigned xd, const char *label, const char *tag)
{
    if (q->xml) {
        tabs(q->out, xd);
        fprintf(q->out, "<%s>\n", tag);
    } else {
        fprintf(q->out, "%*s%s\n", (int)(4 * depth), "", label);
    }
}

static void close_group(struct q *q, unsigned xd, const char *tag)
{
    if (q->xml) {
        tabs(q->out, xd);
        fprintf(q->out, "</%s>\n", tag);
    }
}

/* A --query-gpu cell as -q prints it: the bracketed tokens bare. */
static void qf_value(const struct q *q, const char *field, char *buf, size_t n, int *answered)
{
    const struct gs_qfield *f = gs_qf_find(GS_QF_GPU, field);
    size_t len;

    *answered = 0;
    if (!f) {
        snprintf(buf, n, NA);
        return;
    }
    len = gs_qf_cell(f, q->s, q->gpu, NULL, 0, buf, n);
    if (len >= 2 && buf[0] == '[' && buf[len - 1] == ']') {
        memmove(buf, buf + 1, len - 2);
        buf[len - 2] = '\0';
        return;
    }
    *answered = strcmp(buf, NA) != 0;
}

static void metric_value(const struct q *q, const struct row *r, char *buf, size_t n, int *answered)
{
    const struct gs_gpu *g = q->g;
    double v = g->v[r->metric];

    *answered = 0;
    if (g->st[r->metric] != GS_ST_OK) {
        snprintf(buf, n, NA);
        return;
    }
    *answered = 1;
    switch (r->arg) {
    case MF_INT:
        snprintf(buf, n, "%lld", llround(v));
        break;
    case MF_MIB:
        snprintf(buf, n, "%llu MiB", gs_smi_mib((uint64_t)llround(v)));
        break;
    case MF_MHZ:
        snprintf(buf, n, "%lld MHz", llround(v / 1e6));
        break;
    case MF_KBS:
        snprintf(buf, n, "%lld KB/s", llround(v / 1024.0));
        break;
    case MF_WATT:
        snprintf(buf, n, "%.2f W", v);
        break;
    case MF_US:
        snprintf(buf, n, "%lld", llround(v * 1e6));
        break;
    case MF_HEX:
        snprintf(buf, n, "0x%llx", (unsigned long long)llround(v));
        break;
    case MF_YESNO:
        snprintf(buf, n, "%s", v != 0 ? "Yes" : "No");
        break;
    case MF_ENDIS:
        snprintf(buf, n, "%s", v != 0 ? "Enabled" : "Disabled");
        break;
    case MF_ATOMICS: {
        /* the bit order of NVML_PCIE_ATOMICS_CAP_*, as a capture prints them */
        static const char *const ops[] = {"FETCHADD_32", "FETCHADD_64", "SWAP_32", "SWAP_64",
                                          "CAS_32",      "CAS_64",      "CAS_128"};
        unsigned long long mask = (unsigned long long)llround(v);
        size_t at = 0;
        buf[0] = '\0';
        for (size_t i = 0; i < sizeof ops / sizeof *ops && at < n; i++)
            if (mask & (1ull << i))
                at += (size_t)snprintf(buf + at, n - at, "%s ", ops[i]);
        break;
    }
    case MF_BIT:
        snprintf(buf, n, "%s", ((unsigned long long)llround(v) & r->bit) ? "Active" : "Not Active");
        break;
    case MF_NAME: {
        const char *w = gs_qf_value_name((enum gs_qf_names)r->bit, v);
        snprintf(buf, n, "%s", w ? w : "Unknown Error");
        break;
    }
    case MF_PCT2:
        snprintf(buf, n, "%.2f%%", v * 100.0);
        break;
    case MF_ENDIS_LC:
        snprintf(buf, n, "%s", v != 0 ? "enabled" : "disabled");
        break;
    }
}

/* NVML's brand numbers; the RTX GeForce boards of the captures (brand GEFORCE_RTX) print
 * "GeForce". */
static const char *brand_name(long b)
{
    static const char *const names[] = {
        "Unknown",
        "Quadro",
        "Tesla",
        "NVS",
        "Grid",
        "GeForce",
        "Titan",
        "NVIDIA Virtual Applications",
        "NVIDIA Virtual PC",
        "NVIDIA Virtual Compute Server",
        "NVIDIA RTX Virtual Workstation",
        "NVIDIA Cloud Gaming",
        "Quadro RTX",
        "NVIDIA RTX",
        "NVIDIA",
        "GeForce",
        "Titan RTX",
    };

    return b >= 0 && b < (long)(sizeof names / sizeof names[0]) ? names[b] : NA;
}

static const char *arch_name(long a)
{
    switch (a) {
    case 2:
        return "Kepler";
    case 3:
        return "Maxwell";
    case 4:
        return "Pascal";
    case 5:
        return "Volta";
    case 6:
        return "Turing";
    case 7:
        return "Ampere";
    case 8:
        return "Ada Lovelace";
    case 9:
        return "Hopper";
    case 10:
        return "Blackwell";
    }
    return NA;
}

static void count(char *buf, size_t n, const struct gs_mig *m, unsigned v)
{
    snprintf(buf, n, m->attr_st == GS_ST_OK ? "%u" : NA, v);
}

static void mig_block(struct q *q, unsigned xd)
{
    const struct gs_gpu *g = q->g;
    int on = g->st[GS_M_MIG_MODE] == GS_ST_OK && g->v[GS_M_MIG_MODE] != 0;
    char b1[48], b2[48], b3[48], b4[48];

    if (!on || g->n_mig == 0) {
        if (q->xml) {
            tabs(q->out, xd);
            fputs("<mig_devices>\n", q->out);
            tabs(q->out, xd + 1);
            fputs("None\n", q->out);
            tabs(q->out, xd);
            fputs("</mig_devices>\n", q->out);
        }
        return;
    }
    if (q->xml) {
        tabs(q->out, xd);
        fputs("<mig_devices>\n", q->out);
    }
    for (unsigned k = 0; k < g->n_mig; k++) {
        const struct gs_mig *m = &g->mig[k];
        unsigned x = xd + 1;

        snprintf(b1, sizeof b1, "%u", m->index);
        open_group(q, 1, x, "MIG Device", "mig_device");
        leaf(q, 2, x + 1, COLON, "Index", "index", b1);
        snprintf(b1, sizeof b1, "%u", m->gi_id);
        leaf(q, 2, x + 1, COLON, "GPU Instance ID", "gpu_instance_id", b1);
        snprintf(b1, sizeof b1, "%u", m->ci_id);
        leaf(q, 2, x + 1, COLON, "Compute Instance ID", "compute_instance_id", b1);
        open_group(q, 2, x + 1, "Device Attributes", "device_attributes");
        open_group(q, 3, x + 2, "Shared", "shared");
        count(b1, sizeof b1, m, m->sm_count);
        leaf(q, 4, x + 3, COLON, "Multiprocessor count", "multiprocessor_count", b1);
        count(b1, sizeof b1, m, m->ce_count);
        leaf(q, 4, x + 3, COLON, "Copy Engine count", "copy_engine_count", b1);
        count(b1, sizeof b1, m, m->enc_count);
        leaf(q, 4, x + 3, COLON, "Encoder count", "encoder_count", b1);
        count(b1, sizeof b1, m, m->dec_count);
        leaf(q, 4, x + 3, COLON, "Decoder count", "decoder_count", b1);
        count(b1, sizeof b1, m, m->ofa_count);
        leaf(q, 4, x + 3, COLON, "OFA count", "ofa_count", b1);
        count(b1, sizeof b1, m, m->jpg_count);
        leaf(q, 4, x + 3, COLON, "JPG count", "jpg_count", b1);
        close_group(q, x + 2, "shared");
        close_group(q, x + 1, "device_attributes");
        open_group(q, 2, x + 1, "ECC Errors", "ecc_error_count");
        open_group(q, 3, x + 2, "Volatile", "volatile_count");
        snprintf(b1, sizeof b1, m->sram_unc_st == GS_ST_OK ? "%llu" : NA,
                 (unsigned long long)m->sram_unc_vol);
        leaf(q, 4, x + 3, COLON, "SRAM Uncorrectable", "sram_uncorrectable", b1);
        close_group(q, x + 2, "volatile_count");
        close_group(q, x + 1, "ecc_error_count");
        open_group(q, 2, x + 1, "Shared FB Memory Usage", "fb_memory_usage");
        if (m->mem_st == GS_ST_OK) {
            snprintf(b1, sizeof b1, "%llu MiB", gs_smi_mib(m->mem_total_bytes));
            snprintf(b3, sizeof b3, "%llu MiB", gs_smi_mib(m->mem_used_bytes));
            snprintf(b4, sizeof b4, "%llu MiB", gs_smi_mib(m->mem_free_bytes));
        } else {
            snprintf(b1, sizeof b1, NA);
            snprintf(b3, sizeof b3, NA);
            snprintf(b4, sizeof b4, NA);
        }
        if (m->mem_st == GS_ST_OK && m->mem_reserved_st == GS_ST_OK)
            snprintf(b2, sizeof b2, "%llu MiB", gs_smi_mib(m->mem_reserved_bytes));
        else
            snprintf(b2, sizeof b2, NA);
        leaf(q, 3, x + 2, COLON, "Total", "total", b1);
        leaf(q, 3, x + 2, COLON, "Reserved", "reserved", b2);
        leaf(q, 3, x + 2, COLON, "Used", "used", b3);
        leaf(q, 3, x + 2, COLON, "Free", "free", b4);
        close_group(q, x + 1, "fb_memory_usage");
        open_group(q, 2, x + 1, "Shared BAR1 Memory", "bar1_memory_usage");
        if (m->bar1_st == GS_ST_OK) {
            snprintf(b1, sizeof b1, "%llu MiB", gs_smi_mib(m->bar1_total_bytes));
            snprintf(b3, sizeof b3, "%llu MiB", gs_smi_mib(m->bar1_used_bytes));
            snprintf(b4, sizeof b4, "%llu MiB",
                     gs_smi_mib(m->bar1_total_bytes > m->bar1_used_bytes
                                    ? m->bar1_total_bytes - m->bar1_used_bytes
                                    : 0));
        } else {
            snprintf(b1, sizeof b1, NA);
            snprintf(b3, sizeof b3, NA);
            snprintf(b4, sizeof b4, NA);
        }
        leaf(q, 3, x + 2, COLON, "Total", "total", b1);
        leaf(q, 3, x + 2, COLON, "Used", "used", b3);
        leaf(q, 3, x + 2, COLON, "Free", "free", b4);
        close_group(q, x + 1, "bar1_memory_usage");
        close_group(q, x, "mig_device");
    }
    if (q->xml) {
        tabs(q->out, xd);
        fputs("</mig_devices>\n", q->out);
    }
}

static int by_pid(const void *a, const void *b)
{
    const struct gs_proc *x = *(const struct gs_proc *const *)a;
    const struct gs_proc *y = *(const struct gs_proc *const *)b;

    return x->pid < y->pid ? -1 : x->pid > y->pid;
}

static void proc_name(const struct gs_proc *p, char *out, size_t n)
{
    if (p->nvml_name_st == GS_ST_OK)
        snprintf(out, n, "%s", p->nvml_name);
    else if (p->host_st == GS_ST_OK && p->cmdline[0] && p->cmdline[0] != ' ')
        snprintf(out, n, "%.*s", (int)strcspn(p->cmdline, " "), p->cmdline);
    else if (p->name[0])
        snprintf(out, n, "%s", p->name);
    else
        snprintf(out, n, NA);
}

static void procs_block(struct q *q, unsigned xd)
{
    const struct gs_snapshot *s = q->s;
    const struct gs_proc **list = s->n_procs ? malloc(s->n_procs * sizeof *list) : NULL;
    unsigned n = 0;

    for (unsigned i = 0; list && i < s->n_procs; i++)
        if (s->procs[i].gpu == q->gpu)
            list[n++] = &s->procs[i];
    if (n == 0) {
        if (q->xml) {
            tabs(q->out, xd);
            fputs("<processes>\n", q->out);
            tabs(q->out, xd);
            fputs("</processes>\n", q->out);
        } else {
            leaf(q, 1, xd, COLON, "Processes", "processes", "None");
        }
        free(list);
        return;
    }
    qsort(list, n, sizeof *list, by_pid);
    open_group(q, 1, xd, "Processes", "processes");
    for (unsigned i = 0; i < n; i++) {
        const struct gs_proc *p = list[i];
        char b[GS_PROC_CMD_LEN];
        const char *type = (p->type & GS_PROC_COMPUTE) && (p->type & GS_PROC_GRAPHICS) ? "C+G"
                           : (p->type & GS_PROC_MPS)                                   ? "M"
                           : (p->type & GS_PROC_COMPUTE)                               ? "C"
                                                                                       : "G";
        unsigned x = xd + 2;

        if (q->xml) {
            tabs(q->out, xd + 1);
            fputs("<process_info>\n", q->out);
        }
        snprintf(b, sizeof b, p->gi_id == NO_MIG ? NA : "%u", p->gi_id);
        leaf(q, 2, x, 42, "GPU instance ID", "gpu_instance_id", b);
        snprintf(b, sizeof b, p->ci_id == NO_MIG ? NA : "%u", p->ci_id);
        leaf(q, 2, x, 42, "Compute instance ID", "compute_instance_id", b);
        snprintf(b, sizeof b, "%u", p->pid);
        leaf(q, 2, x, 42, "Process ID", "pid", b);
        leaf(q, 3, x, 42, "Type", "type", type);
        proc_name(p, b, sizeof b);
        leaf(q, 3, x, 42, "Name", "process_name", b);
        if (p->mem_st == GS_ST_OK)
            snprintf(b, sizeof b, "%llu MiB", gs_smi_mib(p->gpu_mem_bytes));
        else
            snprintf(b, sizeof b, NA);
        leaf(q, 3, x, 42, "Used GPU Memory", "used_memory", b);
        if (q->xml) {
            tabs(q->out, xd + 1);
            fputs("</process_info>\n", q->out);
        }
    }
    close_group(q, xd, "processes");
    free(list);
}

/* Whether row r applies to this GPU and output. */
static int applies(const struct q *q, const struct row *r)
{
    const struct gs_gpu *g = q->g;
    unsigned w = r->when;
    int tlimit = g->st[GS_M_TEMP_MARGIN] == GS_ST_OK;
    int split = g->st[GS_M_ARCH] == GS_ST_OK && g->v[GS_M_ARCH] >= 7;
    int mig = g->st[GS_M_MIG_MODE] == GS_ST_OK && g->v[GS_M_MIG_MODE] != 0;
    int remap = g->st[GS_M_REMAP_CORR] == GS_ST_OK && !mig;

    if ((w & W_TEXT) && q->xml)
        return 0;
    if ((w & W_XML) && !q->xml)
        return 0;
    if (((w & W_TLIMIT) && !tlimit) || ((w & W_NOTLIMIT) && tlimit))
        return 0;
    if (((w & W_SPLIT) && !split) || ((w & W_NOSPLIT) && split))
        return 0;
    if ((w & W_595) && !q->layout->rows_595)
        return 0;
    if ((w & W_PRE590) && q->layout->dtd >= 13)
        return 0;
    if ((w & W_610T) && (q->xml || !q->layout->rows_610))
        return 0;
    if ((w & W_NOT610T) && !q->xml && q->layout->rows_610)
        return 0;
    if (((w & W_REMAP) && !remap) || ((w & W_NOREMAP) && remap))
        return 0;
    return 1;
}

static void row_value(const struct q *q, const struct row *r, char *v, size_t n)
{
    int answered = 0;

    if (r->kind == K_QF)
        qf_value(q, r->src, v, n, &answered);
    else if (r->kind == K_M)
        metric_value(q, r, v, n, &answered);
    else if (r->kind == K_T)
        snprintf(v, n, "%s",
                 gs_gpu_has_text(q->g, (enum gs_text)r->metric) ? q->g->text[r->metric] : NA);
    else
        snprintf(v, n, NA);
    if (answered && r->suffix)
        strncat(v, r->suffix, n - strlen(v) - 1);
}

static void fn_value(const struct q *q, const struct row *r, char *v, size_t n)
{
    const struct gs_gpu *g = q->g;

    if (r->arg == F_BRAND)
        snprintf(v, n, "%s",
                 g->st[GS_M_BRAND] == GS_ST_OK ? brand_name(lround(g->v[GS_M_BRAND])) : NA);
    else
        snprintf(v, n, "%s",
                 g->st[GS_M_ARCH] == GS_ST_OK ? arch_name(lround(g->v[GS_M_ARCH])) : NA);
}

static void gpu_body(struct q *q, unsigned sections)
{
    /* open groups: their text depth and tag */
    struct {
        unsigned depth;
        const char *tag;
    } open[8];
    unsigned nopen = 0;
    unsigned skip_below = 0; /* skip rows deeper than this (0: none) */
    char v[GS_QF_CELL_MAX + 16];

    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const struct row *r = &rows[i];

        if (skip_below && r->depth > skip_below)
            continue;
        skip_below = 0;
        if (!applies(q, r) || (sections && r->depth == 1 && !(r->sect & sections))) {
            skip_below = r->depth;
            continue;
        }
        while (nopen && open[nopen - 1].depth >= r->depth) {
            nopen--;
            close_group(q, 1 + nopen + 1, open[nopen].tag);
        }
        switch (r->kind) {
        case K_GROUP:
            open_group(q, r->depth, 2 + nopen, row_label(q, r), r->tag);
            if (nopen < sizeof open / sizeof open[0]) {
                open[nopen].depth = r->depth;
                open[nopen].tag = r->tag;
                nopen++;
            }
            break;
        case K_FN:
            if (r->arg == F_MIG) {
                mig_block(q, 2 + nopen);
            } else if (r->arg == F_PROCS) {
                procs_block(q, 2 + nopen);
            } else if (r->arg == F_ACCOUNTED) {
                tabs(q->out, 2 + nopen);
                fprintf(q->out, "<%s>\n", r->tag);
                tabs(q->out, 2 + nopen);
                fprintf(q->out, "</%s>\n", r->tag);
            } else {
                fn_value(q, r, v, sizeof v);
                leaf(q, r->depth, 2 + nopen, COLON, row_label(q, r), r->tag, v);
            }
            break;
        default:
            row_value(q, r, v, sizeof v);
            if ((r->when & W_ECCON) &&
                !(q->g->st[GS_M_ECC_MODE] == GS_ST_OK && q->g->v[GS_M_ECC_MODE] != 0))
                snprintf(v, sizeof v, NA);
            if (q->xml && (r->when & W_NO0X) && strncmp(v, "0x", 2) == 0)
                memmove(v, v + 2, strlen(v + 2) + 1);
            leaf(q, r->depth, 2 + nopen, COLON, row_label(q, r), r->tag, v);
        }
    }
    while (nopen) {
        nopen--;
        close_group(q, 2 + nopen, open[nopen].tag);
    }
}

void gs_smi_q_need(unsigned sections, unsigned char *m, unsigned char *t)
{
    int in = 0; /* the current depth-1 row is in a chosen section */

    /* the GPU's header line, and what applies() decides rows by */
    t[GS_T_PCI_BUS_ID] = 1;
    m[GS_M_TEMP_MARGIN] = m[GS_M_ARCH] = m[GS_M_MIG_MODE] = m[GS_M_REMAP_CORR] = 1;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const struct row *r = &rows[i];

        if (r->depth == 1)
            in = !sections || (r->sect & sections) != 0;
        if (!in)
            continue;
        switch (r->kind) {
        case K_QF: {
            const struct gs_qfield *f = gs_qf_find(GS_QF_GPU, r->src);
            const struct gs_qf_sel one = {.list = GS_QF_GPU, .n = 1, .f = &f};

            if (f)
                gs_qf_need(&one, m, t);
            break;
        }
        case K_M:
            m[r->metric] = 1;
            break;
        case K_T:
            t[r->metric] = 1;
            break;
        case K_FN:
            if (r->arg == F_BRAND)
                m[GS_M_BRAND] = 1; /* MIG devices and processes come with their want bits */
            break;
        default:
            break;
        }
    }
}

int gs_smi_q(FILE *out, const struct gs_snapshot *s, const unsigned char *sel, unsigned sections,
             int xml)
{
    struct q q = {out, s, NULL, 0, xml, gs_smi_layout(s)};
    const struct gs_system *y = &s->sys;
    char when[64], cuda[16], count[16];

    gs_smi_ctime(s->t_real, when, sizeof when);
    if (y->cuda_st == GS_ST_OK)
        snprintf(cuda, sizeof cuda, "%d.%d", y->cuda_version / 1000, (y->cuda_version % 1000) / 10);
    else
        snprintf(cuda, sizeof cuda, NA);
    snprintf(count, sizeof count, "%u", y->gpu_count ? y->gpu_count : s->n_gpus);
    if (xml) {
        fprintf(out,
                "<?xml version=\"1.0\" ?>\n"
                "<!DOCTYPE nvidia_smi_log SYSTEM \"nvsmi_device_v%d.dtd\">\n"
                "<nvidia_smi_log>\n",
                q.layout->dtd);
    } else {
        fputs("\n==============NVSMI LOG==============\n\n", out);
    }
    leaf(&q, 0, 1, COLON, "Timestamp", "timestamp", when);
    if (q.layout->kmd && !xml) {
        /* 610: the old names stay, marked deprecated, before the new ones */
        const char *drv = y->driver_st == GS_ST_OK ? y->driver_version : NA;

        fprintf(out,
                "%-*s: %s [Deprecated; will be removed in CUDA 14.0. Use KMD Version instead]\n",
                COLON, "Driver Version", drv);
        fprintf(out,
                "%-*s: %s [Deprecated; will be removed in CUDA 14.0. Use CUDA UMD Version "
                "instead]\n",
                COLON, "CUDA Version", cuda);
        leaf(&q, 0, 1, COLON, "KMD Version", "kmd_version", drv);
        leaf(&q, 0, 1, COLON, "CUDA UMD Version", "cuda_umd_version", cuda);
    } else {
        leaf(&q, 0, 1, COLON, "Driver Version", "driver_version",
             y->driver_st == GS_ST_OK ? y->driver_version : NA);
        leaf(&q, 0, 1, COLON, "CUDA Version", "cuda_version", cuda);
    }
    if (!xml)
        fputc('\n', out);
    leaf(&q, 0, 1, COLON, "Attached GPUs", "attached_gpus", count);
    for (unsigned i = 0; i < s->n_gpus; i++) {
        const struct gs_gpu *g = &s->gpus[i];
        const char *bus = gs_gpu_has_text(g, GS_T_PCI_BUS_ID) ? g->text[GS_T_PCI_BUS_ID] : NA;

        if (sel && !sel[i])
            continue;
        q.g = g;
        q.gpu = i;
        if (xml) {
            fputs("\t<gpu id=\"", out);
            xml_escaped(out, bus);
            fputs("\">\n", out);
        } else {
            fprintf(out, "GPU %s\n", bus);
        }
        gpu_body(&q, sections);
        fputs(xml ? "\t</gpu>\n\n" : "\n", out);
    }
    if (xml)
        fputs("</nvidia_smi_log>\n", out);
    return ferror(out) ? GS_EIO : GS_OK;
}
