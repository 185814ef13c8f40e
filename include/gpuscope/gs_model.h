/*
 * The data model every front end reads: one snapshot per sampling cycle, holding the system,
 * each GPU's static identity and dynamic readings, its MIG devices, and the processes on it.
 *
 * Units are base SI (bytes, watts, joules, celsius, hertz, seconds) and ratios are 0..1; the
 * backend converts NVML's milliwatts, MHz, millijoules and percents once. Every numeric
 * reading carries a status: GS_ST_NA (the default of zeroed memory) means absent — not
 * supported, symbol missing, or not collected this cycle — and sinks print N/A or skip it,
 * never 0. The metric list is an X-macro so names, units and the enum stay in one place.
 *
 * Snapshots are plain memory: a producer fills one, then it is read-only. gs_snapshot_new
 * sizes every array once; sampling into an existing snapshot allocates nothing unless the
 * process list must grow (gs_snapshot_reserve_procs).
 */
#ifndef GS_MODEL_H
#define GS_MODEL_H

#include <stddef.h>
#include <stdint.h>

#define GS_STR_LEN 96 /* names, UUIDs, versions; NVML's largest buffers are 96 */
#define GS_MIG_MAX 8  /* MIG devices per GPU (7 on A100/H100) */
#define GS_PROC_NAME_LEN 64
#define GS_PROC_CMD_LEN 512
#define GS_PROC_USER_LEN 33
#define GS_JOB_ID_LEN 72

/* Status of one reading. Zero is "absent" so that a zeroed struct reads as "nothing known". */
enum gs_status {
    GS_ST_NA = 0,     /* absent: not supported, symbol missing, or not collected */
    GS_ST_OK = 1,     /* value valid */
    GS_ST_NOPERM = 2, /* NVML_ERROR_NO_PERMISSION */
    GS_ST_ERROR = 3,  /* any other error for this field */
    GS_ST_LOST = 4,   /* GPU fell off the bus */
};

/* X(ENUM, "name", "unit"): name is used in JSON, history and (prefixed) Prometheus. */
#define GS_METRICS(X)                                                                              \
    /* identity-like numbers */                                                                    \
    X(GS_M_MINOR, "minor_number", "")                                                              \
    X(GS_M_ARCH, "architecture", "")                                                               \
    X(GS_M_BRAND, "brand", "")                                                                     \
    X(GS_M_PCI_DOMAIN, "pci_domain", "")                                                           \
    X(GS_M_PCI_BUS, "pci_bus", "")                                                                 \
    X(GS_M_PCI_DEVICE, "pci_device", "")                                                           \
    X(GS_M_PCI_DEVICE_ID, "pci_device_id", "")                                                     \
    X(GS_M_PCI_SUBSYS_ID, "pci_sub_device_id", "")                                                 \
    X(GS_M_CC_MAJOR, "compute_cap_major", "")                                                      \
    X(GS_M_CC_MINOR, "compute_cap_minor", "")                                                      \
    /* utilization (ratios) */                                                                     \
    X(GS_M_UTIL_GPU, "utilization_gpu", "ratio")                                                   \
    X(GS_M_UTIL_MEM, "utilization_memory", "ratio")                                                \
    X(GS_M_UTIL_ENC, "utilization_encoder", "ratio")                                               \
    X(GS_M_UTIL_DEC, "utilization_decoder", "ratio")                                               \
    /* memory */                                                                                   \
    X(GS_M_MEM_TOTAL, "memory_total", "bytes")                                                     \
    X(GS_M_MEM_USED, "memory_used", "bytes")                                                       \
    X(GS_M_MEM_FREE, "memory_free", "bytes")                                                       \
    X(GS_M_MEM_RESERVED, "memory_reserved", "bytes")                                               \
    X(GS_M_BAR1_TOTAL, "bar1_total", "bytes")                                                      \
    X(GS_M_BAR1_USED, "bar1_used", "bytes")                                                        \
    X(GS_M_BAR1_FREE, "bar1_free", "bytes")                                                        \
    /* thermal and fan */                                                                          \
    X(GS_M_TEMP_GPU, "temperature_gpu", "celsius")                                                 \
    X(GS_M_TEMP_MEM, "temperature_memory", "celsius")                                              \
    X(GS_M_TEMP_SLOWDOWN, "temperature_slowdown", "celsius")                                       \
    X(GS_M_TEMP_SHUTDOWN, "temperature_shutdown", "celsius")                                       \
    X(GS_M_TEMP_GPU_MAX, "temperature_gpu_max", "celsius")                                         \
    X(GS_M_TEMP_MEM_MAX, "temperature_memory_max", "celsius")                                      \
    X(GS_M_FAN, "fan_speed", "ratio")                                                              \
    /* power and energy */                                                                         \
    X(GS_M_POWER_DRAW, "power_draw", "watts")                                                      \
    X(GS_M_POWER_AVERAGE, "power_draw_average", "watts")                                           \
    X(GS_M_POWER_INSTANT, "power_draw_instant", "watts")                                           \
    X(GS_M_POWER_LIMIT, "power_limit", "watts")                                                    \
    X(GS_M_POWER_ENFORCED_LIMIT, "power_enforced_limit", "watts")                                  \
    X(GS_M_POWER_DEFAULT_LIMIT, "power_default_limit", "watts")                                    \
    X(GS_M_POWER_MIN_LIMIT, "power_min_limit", "watts")                                            \
    X(GS_M_POWER_MAX_LIMIT, "power_max_limit", "watts")                                            \
    X(GS_M_ENERGY, "energy", "joules")                                                             \
    /* clocks */                                                                                   \
    X(GS_M_CLOCK_GR, "clock_graphics", "hertz")                                                    \
    X(GS_M_CLOCK_SM, "clock_sm", "hertz")                                                          \
    X(GS_M_CLOCK_MEM, "clock_memory", "hertz")                                                     \
    X(GS_M_CLOCK_VIDEO, "clock_video", "hertz")                                                    \
    X(GS_M_CLOCK_MAX_GR, "clock_max_graphics", "hertz")                                            \
    X(GS_M_CLOCK_MAX_SM, "clock_max_sm", "hertz")                                                  \
    X(GS_M_CLOCK_MAX_MEM, "clock_max_memory", "hertz")                                             \
    X(GS_M_CLOCK_MAX_VIDEO, "clock_max_video", "hertz")                                            \
    X(GS_M_PSTATE, "pstate", "")                                                                   \
    X(GS_M_THROTTLE_ACTIVE, "clocks_event_reasons_active", "mask")                                 \
    X(GS_M_THROTTLE_SUPPORTED, "clocks_event_reasons_supported", "mask")                           \
    X(GS_M_THROTTLE_NS_SW_POWER, "clocks_event_sw_power_cap", "seconds")                           \
    X(GS_M_THROTTLE_NS_SYNC_BOOST, "clocks_event_sync_boost", "seconds")                           \
    X(GS_M_THROTTLE_NS_SW_THERMAL, "clocks_event_sw_thermal_slowdown", "seconds")                  \
    X(GS_M_THROTTLE_NS_HW_THERMAL, "clocks_event_hw_thermal_slowdown", "seconds")                  \
    X(GS_M_THROTTLE_NS_HW_POWER_BRAKE, "clocks_event_hw_power_brake_slowdown", "seconds")          \
    /* PCIe */                                                                                     \
    X(GS_M_PCIE_GEN, "pcie_link_gen_current", "")                                                  \
    X(GS_M_PCIE_GEN_MAX, "pcie_link_gen_max", "")                                                  \
    X(GS_M_PCIE_GEN_GPU_MAX, "pcie_link_gen_gpumax", "")                                           \
    X(GS_M_PCIE_WIDTH, "pcie_link_width_current", "")                                              \
    X(GS_M_PCIE_WIDTH_MAX, "pcie_link_width_max", "")                                              \
    X(GS_M_PCIE_TX, "pcie_tx", "bytes_per_second")                                                 \
    X(GS_M_PCIE_RX, "pcie_rx", "bytes_per_second")                                                 \
    X(GS_M_PCIE_REPLAY, "pcie_replay_counter", "")                                                 \
    /* health */                                                                                   \
    X(GS_M_ECC_MODE, "ecc_mode_current", "")                                                       \
    X(GS_M_ECC_MODE_PENDING, "ecc_mode_pending", "")                                               \
    X(GS_M_ECC_CORR_VOL, "ecc_errors_corrected_volatile", "")                                      \
    X(GS_M_ECC_UNCORR_VOL, "ecc_errors_uncorrected_volatile", "")                                  \
    X(GS_M_ECC_CORR_AGG, "ecc_errors_corrected_aggregate", "")                                     \
    X(GS_M_ECC_UNCORR_AGG, "ecc_errors_uncorrected_aggregate", "")                                 \
    X(GS_M_RETIRED_SBE, "retired_pages_single_bit", "")                                            \
    X(GS_M_RETIRED_DBE, "retired_pages_double_bit", "")                                            \
    X(GS_M_RETIRED_PENDING, "retired_pages_pending", "")                                           \
    X(GS_M_REMAP_CORR, "remapped_rows_correctable", "")                                            \
    X(GS_M_REMAP_UNCORR, "remapped_rows_uncorrectable", "")                                        \
    X(GS_M_REMAP_PENDING, "remapped_rows_pending", "")                                             \
    X(GS_M_REMAP_FAILURE, "remapped_rows_failure", "")                                             \
    X(GS_M_XID_LAST, "xid_last", "")                                                               \
    /* modes */                                                                                    \
    X(GS_M_PERSISTENCE, "persistence_mode", "")                                                    \
    X(GS_M_COMPUTE_MODE, "compute_mode", "")                                                       \
    X(GS_M_MIG_MODE, "mig_mode_current", "")                                                       \
    X(GS_M_MIG_MODE_PENDING, "mig_mode_pending", "")                                               \
    /* GPM (Hopper+), over the interval since the previous GPM sample */                           \
    X(GS_M_GPM_SM_ACTIVE, "sm_active", "ratio")                                                    \
    X(GS_M_GPM_SM_OCCUPANCY, "sm_occupancy", "ratio")                                              \
    X(GS_M_GPM_TENSOR_ACTIVE, "tensor_active", "ratio")                                            \
    X(GS_M_GPM_DRAM_ACTIVE, "dram_bandwidth_utilization", "ratio")                                 \
    X(GS_M_GPM_GR_ACTIVE, "graphics_active", "ratio")                                              \
    /* video engines: encoder sessions (nvmlDeviceGetEncoderStats), JPEG and OFA engines */        \
    X(GS_M_ENC_SESSIONS, "encoder_sessions", "")                                                   \
    X(GS_M_ENC_FPS, "encoder_average_fps", "fps")                                                  \
    X(GS_M_ENC_LATENCY, "encoder_average_latency", "seconds")                                      \
    X(GS_M_UTIL_JPEG, "utilization_jpeg", "ratio")                                                 \
    X(GS_M_UTIL_OFA, "utilization_ofa", "ratio")                                                   \
    /* 1 when the inforom checksums verify, 0 when the driver finds it corrupted */                \
    X(GS_M_INFOROM_VALID, "inforom_valid", "")                                                     \
    /* display and accounting (0/1, and the accounting ring size), GSP firmware (0/1) */           \
    X(GS_M_DISPLAY_ATTACHED, "display_attached", "")                                               \
    X(GS_M_DISPLAY_ACTIVE, "display_active", "")                                                   \
    X(GS_M_ACCOUNTING, "accounting_mode", "")                                                      \
    X(GS_M_ACCOUNTING_BUFFER, "accounting_buffer_size", "")                                        \
    X(GS_M_GSP_MODE, "gsp_mode_current", "")                                                       \
    X(GS_M_GSP_MODE_DEFAULT, "gsp_mode_default", "")                                               \
    /* PCI class codes (nvmlDeviceGetPciInfoExt): 0x3 display; sub 0x0 VGA, 0x2 3D */              \
    X(GS_M_PCI_BASE_CLASS, "pci_base_class", "")                                                   \
    X(GS_M_PCI_SUB_CLASS, "pci_sub_class", "")                                                     \
    /* degrees left before slowdown (nvmlDeviceGetMarginTemperature), negative past it */          \
    X(GS_M_TEMP_MARGIN, "temperature_margin", "celsius")                                           \
    /* NVLink, summed over the GPU's links (each link: gs_gpu.nvlink[]): links the driver          \
     * reports and those active, their common speed per direction, data throughput (a rate         \
     * from two counter readings, and the counters), and the data-link error counters */           \
    X(GS_M_NVLINK_LINKS, "nvlink_links", "")                                                       \
    X(GS_M_NVLINK_LINKS_ACTIVE, "nvlink_links_active", "")                                         \
    X(GS_M_NVLINK_SPEED, "nvlink_link_speed", "bytes_per_second")                                  \
    X(GS_M_NVLINK_TX, "nvlink_tx", "bytes_per_second")                                             \
    X(GS_M_NVLINK_RX, "nvlink_rx", "bytes_per_second")                                             \
    X(GS_M_NVLINK_TX_BYTES, "nvlink_tx_bytes", "bytes")                                            \
    X(GS_M_NVLINK_RX_BYTES, "nvlink_rx_bytes", "bytes")                                            \
    X(GS_M_NVLINK_REPLAY, "nvlink_replay_errors", "")                                              \
    X(GS_M_NVLINK_RECOVERY, "nvlink_recovery_errors", "")                                          \
    X(GS_M_NVLINK_CRC_FLIT, "nvlink_crc_flit_errors", "")                                          \
    X(GS_M_NVLINK_CRC_DATA, "nvlink_crc_data_errors", "")                                          \
    /* the GPU target temperature (acoustic threshold) and its settable range */                   \
    X(GS_M_TEMP_TARGET, "temperature_target", "celsius")                                           \
    X(GS_M_TEMP_TARGET_MIN, "temperature_target_min", "celsius")                                   \
    X(GS_M_TEMP_TARGET_MAX, "temperature_target_max", "celsius")                                   \
    /* frame buffer capture (NvFBC) sessions */                                                    \
    X(GS_M_FBC_SESSIONS, "fbc_sessions", "")                                                       \
    X(GS_M_FBC_FPS, "fbc_average_fps", "fps")                                                      \
    X(GS_M_FBC_LATENCY, "fbc_average_latency", "seconds")                                          \
    /* repairs the GPU has pending (1) for its next reset */                                       \
    X(GS_M_REPAIR_CHANNEL, "repair_channel_pending", "")                                           \
    X(GS_M_REPAIR_TPC, "repair_tpc_pending", "")                                                   \
    /* board identity: NVML's board id, whether the board holds several GPUs */                    \
    X(GS_M_BOARD_ID, "board_id", "")                                                               \
    X(GS_M_MULTI_GPU_BOARD, "multi_gpu_board", "")                                                 \
    X(GS_M_CLOCK_BOOST_MAX_GR, "clock_customer_boost_max_graphics", "hertz")                       \
    /* times the PCIe replay counter wrapped (field value 95) */                                   \
    X(GS_M_PCIE_REPLAY_ROLLOVER, "pcie_replay_rollover_counter", "")                               \
    /* what the driver recommends to recover the GPU (field value 230): 0 none, 1 GPU reset,       \
     * 2 node reboot, 3 drain P2P, 4 drain and reset */                                            \
    X(GS_M_RECOVERY_ACTION, "recovery_action", "")                                                 \
    /* GPU memory power (power field values, memory scope) */                                      \
    X(GS_M_POWER_MEMORY_AVERAGE, "power_memory_average", "watts")                                  \
    X(GS_M_POWER_MEMORY_INSTANT, "power_memory_instant", "watts")                                  \
    /* the shutdown, slowdown, memory max and GPU max thresholds relative to T.Limit (fields       \
     * 193-196; degrees, negative below the limit) */                                              \
    X(GS_M_TLIMIT_SHUTDOWN, "temperature_tlimit_shutdown", "celsius")                              \
    X(GS_M_TLIMIT_SLOWDOWN, "temperature_tlimit_slowdown", "celsius")                              \
    X(GS_M_TLIMIT_MEM_MAX, "temperature_tlimit_memory_max", "celsius")                             \
    X(GS_M_TLIMIT_GPU_MAX, "temperature_tlimit_gpu_max", "celsius")                                \
    /* rows remapped after correctable / uncorrectable errors that are not in use (fields          \
     * 301, 302; drivers 595+) */                                                                  \
    X(GS_M_REMAP_CORR_INACTIVE, "remapped_rows_correctable_inactive", "")                          \
    X(GS_M_REMAP_UNCORR_INACTIVE, "remapped_rows_uncorrectable_inactive", "")                      \
    /* the EDPp multiplier (field 274, a percentage; 1 = 100 %) */                                 \
    X(GS_M_EDPP_MULTIPLIER, "edpp_multiplier", "ratio")                                            \
    /* read with GS_WANT_DETAIL only (nvidia-smi -q): addressing mode (0 none, 1 HMM, 2 ATS),      \
     * virtualization mode (0 none, 1 pass-through, 2 vGPU, 3 host vGPU, 4 host vSGA), host vGPU   \
     * mode (0 non SR-IOV, 1 SR-IOV), C2C and EGM on (1) or off (0) */                             \
    X(GS_M_ADDRESSING_MODE, "addressing_mode", "")                                                 \
    X(GS_M_VIRT_MODE, "virtualization_mode", "")                                                   \
    X(GS_M_HOST_VGPU_MODE, "host_vgpu_mode", "")                                                   \
    X(GS_M_C2C_MODE, "c2c_mode", "")                                                               \
    X(GS_M_EGM, "egm", "")                                                                         \
    /* SRAM ECC error status (GS_WANT_DETAIL): uncorrectable parity and SEC-DED errors since       \
     * driver load and over the board's life, whether the error threshold was crossed (1), and     \
     * the aggregate uncorrectable errors by where they happened */                                \
    X(GS_M_SRAM_PARITY_VOL, "sram_uncorrected_parity_volatile", "")                                \
    X(GS_M_SRAM_SECDED_VOL, "sram_uncorrected_secded_volatile", "")                                \
    X(GS_M_SRAM_PARITY_AGG, "sram_uncorrected_parity_aggregate", "")                               \
    X(GS_M_SRAM_SECDED_AGG, "sram_uncorrected_secded_aggregate", "")                               \
    X(GS_M_SRAM_THRESHOLD, "sram_threshold_exceeded", "")                                          \
    X(GS_M_SRAM_L2, "sram_uncorrected_l2", "")                                                     \
    X(GS_M_SRAM_SM, "sram_uncorrected_sm", "")                                                     \
    X(GS_M_SRAM_MCU, "sram_uncorrected_mcu", "")                                                   \
    X(GS_M_SRAM_PCIE, "sram_uncorrected_pcie", "")                                                 \
    X(GS_M_SRAM_OTHER, "sram_uncorrected_other", "")                                               \
    /* memory banks by spare rows left (GS_WANT_DETAIL): all, many, some, few, none */             \
    X(GS_M_REMAP_HIST_MAX, "remap_banks_max", "")                                                  \
    X(GS_M_REMAP_HIST_HIGH, "remap_banks_high", "")                                                \
    X(GS_M_REMAP_HIST_PARTIAL, "remap_banks_partial", "")                                          \
    X(GS_M_REMAP_HIST_LOW, "remap_banks_low", "")                                                  \
    X(GS_M_REMAP_HIST_NONE, "remap_banks_none", "")                                                \
    /* NVLink fabric registration (GS_WANT_DETAIL): state (0 not supported, 1 not started,         \
     * 2 in progress, 3 completed), its NVML return code once completed, the clique id */          \
    X(GS_M_FABRIC_STATE, "fabric_state", "")                                                       \
    X(GS_M_FABRIC_STATUS, "fabric_status", "")                                                     \
    X(GS_M_FABRIC_CLIQUE, "fabric_clique_id", "")                                                  \
    /* fabric health (GS_WANT_DETAIL, from the same call; each only where the driver reports a     \
     * health summary and that condition): summary (1 healthy, 2 unhealthy, 3 limited capacity),   \
     * bandwidth degraded, route recovery in progress, route unhealthy, access timeout recovery    \
     * in progress, partition assigned (1 yes, 0 no), the configuration error (1 none, 2 wrong     \
     * SysGUID, 3 wrong chassis serial number, 4 no partition, 5 too few NVLinks, 6 incompatible   \
     * GPU firmware, 7 invalid location, 8 GPU state invalid) */                                   \
    X(GS_M_FABRIC_HEALTH_SUMMARY, "fabric_health_summary", "")                                     \
    X(GS_M_FABRIC_HEALTH_BW_DEGRADED, "fabric_health_bandwidth_degraded", "")                      \
    X(GS_M_FABRIC_HEALTH_ROUTE_RECOVERY, "fabric_health_route_recovery", "")                       \
    X(GS_M_FABRIC_HEALTH_ROUTE_UNHEALTHY, "fabric_health_route_unhealthy", "")                     \
    X(GS_M_FABRIC_HEALTH_ACCESS_TIMEOUT, "fabric_health_access_timeout_recovery", "")              \
    X(GS_M_FABRIC_HEALTH_CONFIG, "fabric_health_incorrect_configuration", "")                      \
    X(GS_M_FABRIC_HEALTH_PARTITION, "fabric_health_partition_assigned", "")                        \
    /* whole-GPU -q rows (GS_WANT_DETAIL): the module id within the node; GPU operation mode now   \
     * and after reboot (0 all on, 1 compute, 2 low double precision); vGPU heterogeneous mode on  \
     * (1) or off (0); PCIe atomics the GPU issues / completes (NVML_PCIE_ATOMICS_CAP_* mask);     \
     * confidential-computing protected memory; whether memory has unrepairable errors (1) */      \
    X(GS_M_MODULE_ID, "module_id", "")                                                             \
    X(GS_M_GOM_CURRENT, "gpu_operation_mode_current", "")                                          \
    X(GS_M_GOM_PENDING, "gpu_operation_mode_pending", "")                                          \
    X(GS_M_VGPU_HETERO, "vgpu_heterogeneous_mode", "")                                             \
    X(GS_M_PCIE_ATOMICS_OUT, "pcie_atomics_outbound_mask", "")                                     \
    X(GS_M_PCIE_ATOMICS_IN, "pcie_atomics_inbound_mask", "")                                       \
    X(GS_M_CC_PROT_TOTAL, "cc_protected_memory_total", "bytes")                                    \
    X(GS_M_CC_PROT_USED, "cc_protected_memory_used", "bytes")                                      \
    X(GS_M_CC_PROT_FREE, "cc_protected_memory_free", "bytes")                                      \
    X(GS_M_UNREPAIRABLE_MEM, "unrepairable_memory", "")

#define GS_METRIC_ENUM_(e, n, u) e,
enum gs_metric { GS_METRICS(GS_METRIC_ENUM_) GS_M__COUNT };
#undef GS_METRIC_ENUM_

/* Text fields of a GPU. */
enum gs_text {
    GS_T_NAME,
    GS_T_UUID,
    GS_T_SERIAL,
    GS_T_PCI_BUS_ID, /* "00000000:00:09.0" */
    GS_T_VBIOS,
    /* inforom object versions: the whole image ("G520.0200.00.05"), then the OEM, ECC and
     * power objects ("2.1", "7.16"); consecutive, in that order */
    GS_T_INFOROM_IMAGE,
    GS_T_INFOROM_OEM,
    GS_T_INFOROM_ECC,
    GS_T_INFOROM_PWR,
    GS_T_BOARD_PART,     /* board part number ("692-2G520-0200-000") */
    GS_T_GSP_VERSION,    /* GSP firmware version ("590.48.01") */
    GS_T_FABRIC_CLUSTER, /* fabric cluster UUID, GS_WANT_DETAIL ("00000000-0000-...") */
    GS_T_PDI,            /* per-device identifier, GS_WANT_DETAIL ("0xd52bae2e458244e2") */
    GS_T__COUNT,
};

/* Throttle (clock event) reason bits, equal to NVML's. */
#define GS_THR_GPU_IDLE 0x1ULL
#define GS_THR_APP_CLOCKS 0x2ULL
#define GS_THR_SW_POWER_CAP 0x4ULL
#define GS_THR_HW_SLOWDOWN 0x8ULL
#define GS_THR_SYNC_BOOST 0x10ULL
#define GS_THR_SW_THERMAL 0x20ULL
#define GS_THR_HW_THERMAL 0x40ULL
#define GS_THR_HW_POWER_BRAKE 0x80ULL
#define GS_THR_DISPLAY_CLOCK 0x100ULL

/* ECC error counters per memory location (nvmlDeviceGetMemoryErrorCounter), indexed
 * [error type: 0 corrected, 1 uncorrected][counter: 0 volatile, 1 aggregate][location], with
 * NVML's location numbering: L1 0, L2 1, DRAM/device memory 2, register file 3, texture 4,
 * texture shared 5, CBU 6, SRAM 7. */
#define GS_ECC_LOCATIONS 8

/* NVLink: at most this many links per GPU (NVML_NVLINK_MAX_LINKS of the 13.3 header, 610+). */
#define GS_NVLINK_MAX 36
/* Data-link error counters of a link (nvmlDeviceGetNvLinkErrorCounter), in NVML's order. */
enum gs_nvlink_err {
    GS_NVL_ERR_REPLAY,
    GS_NVL_ERR_RECOVERY,
    GS_NVL_ERR_CRC_FLIT,
    GS_NVL_ERR_CRC_DATA,
    GS_NVL_ERR__COUNT,
};

/* One NVLink of a GPU. Each reading has its status; a link the driver reports is listed even
 * when inactive (active 0). */
struct gs_nvlink {
    uint8_t active;    /* 1 active, 0 inactive (nvmlDeviceGetNvLinkState) */
    uint8_t speed_st;  /* status of speed_bps */
    uint8_t tput_st;   /* status of tx_bytes / rx_bytes */
    uint8_t remote_st; /* status of remote_bus_id */
    uint8_t err_st[GS_NVL_ERR__COUNT];
    double speed_bps;            /* per direction, bytes/s (NVML's MBps * 1e6) */
    uint64_t tx_bytes, rx_bytes; /* data payload counters (NVML's KiB * 1024) */
    uint64_t err[GS_NVL_ERR__COUNT];
    char remote_bus_id[32]; /* PCI bus id of the far end (a GPU, an NVSwitch, a CPU bridge) */
};

/* The GPM figures a MIG device carries (gs_mig.gpm), in the order of the GPU's GS_M_GPM_*. */
enum gs_mig_gpm {
    GS_MIG_GPM_SM_ACTIVE,
    GS_MIG_GPM_SM_OCCUPANCY,
    GS_MIG_GPM_TENSOR_ACTIVE,
    GS_MIG_GPM_DRAM_ACTIVE,
    GS_MIG_GPM_GR_ACTIVE,
    GS_MIG_GPM__COUNT,
};

struct gs_mig {
    unsigned index; /* MIG slot on the parent, for nvmlDeviceGetMigDeviceHandleByIndex */
    unsigned gi_id;
    unsigned ci_id;
    char uuid[GS_STR_LEN];
    char name[GS_STR_LEN];
    uint8_t mem_st; /* enum gs_status for the three memory figures */
    uint64_t mem_total_bytes;
    uint64_t mem_used_bytes;
    uint64_t mem_free_bytes;
    uint8_t bar1_st; /* the instance's share of BAR1 (nvmlDeviceGetBAR1MemoryInfo) */
    uint64_t bar1_total_bytes;
    uint64_t bar1_used_bytes;
    uint8_t attr_st; /* SM and shared engine counts (nvmlDeviceGetAttributes_v2) */
    unsigned sm_count, ce_count, enc_count, dec_count, ofa_count, jpg_count;
    /* GPM of this GPU instance (nvmlGpmMigSampleGet on the parent, GS_WANT_GPM with
     * GS_WANT_MIG), over the interval since the previous sample: one status and one 0..1 ratio
     * per enum gs_mig_gpm. Compute instances of one GPU instance share its figures. */
    uint8_t gpm_st[GS_MIG_GPM__COUNT];
    double gpm[GS_MIG_GPM__COUNT];
    /* The GPU instance's memory-slice placement (first slice, slices) and NVML profile id
     * (nvmlDeviceGetGpuInstanceById + nvmlGpuInstanceGetInfo: root only, GS_ST_NOPERM else). */
    uint8_t place_st;
    unsigned place_start, place_size, profile_id;
    /* What nvidia-smi prints of the instance beyond the above. The memory the driver reserves
     * in it comes with the memory figures (nvmlDeviceGetMemoryInfo_v2; GS_ST_NA from a library
     * that only has v1). Its volatile uncorrectable SRAM ECC count
     * (nvmlDeviceGetMemoryErrorCounter(UNCORRECTED, VOLATILE, SRAM) on the MIG handle) is read
     * only for nvidia-smi's table and -q, whose sampler is opened with mig_sram_ecc
     * (gs_sampler.h); GS_ST_NA otherwise. */
    uint8_t mem_reserved_st;
    uint64_t mem_reserved_bytes;
    uint8_t sram_unc_st;
    uint64_t sram_unc_vol;
};

/* One GPU-utilization sample from the driver's own ring: the mean utilization over the
 * driver's sampling period (~1/6 s on datacenter GPUs) that ends at t_us. */
struct gs_util_sample {
    uint64_t t_us;     /* driver timestamp, unix microseconds (CPU clock, as CLOCK_REALTIME) */
    double util_ratio; /* 0..1 */
};

struct gs_gpu {
    unsigned index; /* NVML index */
    int lost;       /* the GPU fell off the bus; readings below are stale or absent */
    uint8_t tst[GS_T__COUNT];
    char text[GS_T__COUNT][GS_STR_LEN];
    uint8_t st[GS_M__COUNT]; /* enum gs_status per metric */
    double v[GS_M__COUNT];
    uint8_t ecc_loc_st[2][2][GS_ECC_LOCATIONS];
    uint64_t ecc_loc[2][2][GS_ECC_LOCATIONS];
    unsigned n_mig;
    struct gs_mig mig[GS_MIG_MAX];
    /* GS_WANT_UTIL_SAMPLES: usamp_n samples at gs_snapshot.usamp[usamp_first], oldest first
     * (read them with gs_snapshot_util_samples); usamp_st GS_ST_OK when they were read. */
    uint8_t usamp_st;
    unsigned usamp_first, usamp_n;
    /* What a visibility filter withheld of this GPU's processes (the agent's policy,
     * src/agent/policy.c): hidden_st GS_ST_OK once a filter cut the list (then the snapshot
     * document carries "hidden_processes"), GS_ST_NA when nothing was filtered. The memory
     * sum is known (hidden_mem_st OK) when NVML sized every withheld process. */
    uint8_t hidden_st, hidden_mem_st;
    unsigned hidden_count;
    uint64_t hidden_mem_bytes;
    /* NVLink links of this GPU, 0 on a GPU without NVLink (PCIe cards): link i is nvlink[i].
     * The per-GPU sums are the GS_M_NVLINK_* metrics. */
    unsigned n_nvlink;
    struct gs_nvlink nvlink[GS_NVLINK_MAX];
    /* When the links' states (nvlink[].active, GS_M_NVLINK_LINKS_ACTIVE) were read, unix
     * seconds; earlier than the snapshot's t_real when they are held from an earlier cycle
     * (GS_WANT_NVLINK_STATE not set). 0 when not read. */
    double nvlink_state_t;
};

enum gs_proc_type { GS_PROC_COMPUTE = 1, GS_PROC_GRAPHICS = 2, GS_PROC_MPS = 4 };

/* Where a process runs, from /proc/PID/cgroup. */
enum gs_job_kind {
    GS_JOB_NONE = 0,
    GS_JOB_DOCKER,
    GS_JOB_CONTAINERD,
    GS_JOB_CRIO,
    GS_JOB_PODMAN,
    GS_JOB_SLURM,
    GS_JOB_CONTAINER, /* a container id under kubepods whose runtime the path does not name */
};

struct gs_proc {
    unsigned pid;
    unsigned gpu;          /* index into gs_snapshot.gpus */
    unsigned type;         /* GS_PROC_* bits: a process may be in several lists */
    unsigned gi_id, ci_id; /* MIG instance, 0xFFFFFFFF when MIG is off */
    uint8_t mem_st;        /* status of gpu_mem_bytes */
    uint64_t gpu_mem_bytes;
    uint8_t util_st; /* status of the four utilization ratios (nvmlDeviceGetProcessUtilization) */
    double sm_util, mem_util, enc_util, dec_util;
    /* 1: a simulated process whose pid is no process of this host (nvml-sim's made-up pid):
     * procfs is not asked, so it never borrows a real process's user or command line */
    uint8_t sim_only;
    /* from procfs; host_st is GS_ST_NA when the process vanished or lives in another pid ns */
    uint8_t host_st;
    char name[GS_PROC_NAME_LEN];
    char cmdline[GS_PROC_CMD_LEN];
    char user[GS_PROC_USER_LEN];
    uint32_t uid;
    uint8_t cpu_st;   /* CPU ratio needs two reads; absent on the first sight of a pid */
    double cpu_ratio; /* CPU time / wall time since the previous sample; 1.0 = one core */
    uint64_t rss_bytes;
    double start_time;                /* unix seconds */
    uint8_t job_kind;                 /* enum gs_job_kind of container_id */
    char container_id[GS_JOB_ID_LEN]; /* Docker/containerd/CRI-O/Podman container id */
    char pod_uid[40];                 /* Kubernetes pod UID, "" if none */
    char slurm_job[24];               /* Slurm job id, "" if none */
    /* What nvmlSystemGetProcessName answers (argv[0] as started, e.g. "/root/tools/memhog",
     * where name holds "memhog"): nvidia-smi's process_name, printed by `gpuscope query`.
     * nvml_name_st is GS_ST_NA when it was not asked for or not answered. */
    uint8_t nvml_name_st;
    char nvml_name[GS_PROC_CMD_LEN];
    /* The Kubernetes names of pod_uid's pod, from the node's kubelet log directories
     * (src/backend/k8s.h): "" when not known (no pod, or nothing on the node names it). */
    char pod_name[254];
    char pod_namespace[64];
    char pod_container[64]; /* the container's name in its pod, "" when not known */
};

struct gs_system {
    char hostname[256];
    uint8_t driver_st;
    char driver_version[GS_STR_LEN]; /* "590.48.01" */
    uint8_t nvml_st;
    char nvml_version[GS_STR_LEN];
    uint8_t cuda_st;
    int cuda_version; /* major*1000 + minor*10, 13010 = 13.1 */
    unsigned gpu_count;
    /* 1: the NVML library is nvml-sim (it exports nvmlSimGetInfo), so every reading is
     * simulated; sim_info holds what it says of itself ("nvml-sim"). */
    uint8_t simulated;
    char sim_info[GS_STR_LEN];
    /* Where a front end got the snapshot: "" when this process opened NVML itself (the JSON
     * says "nvml"), "agent:SOCKET" when a local agent sent it (src/client/agent_client.c). */
    char source[128];
};

struct gs_snapshot {
    struct gs_system sys;
    double t_real;     /* unix seconds when the cycle started */
    int64_t t_mono_ns; /* CLOCK_MONOTONIC when the cycle started */
    unsigned n_gpus;
    struct gs_gpu *gpus;
    unsigned n_procs;
    unsigned cap_procs;
    struct gs_proc *procs;
    /* the driver's utilization samples of every GPU (gs_gpu.usamp_*), GS_WANT_UTIL_SAMPLES */
    unsigned n_usamp, cap_usamp;
    struct gs_util_sample *usamp;
};

struct gs_err;

/* Allocates a snapshot with room for n_gpus GPUs and an initial process capacity. */
int gs_snapshot_new(struct gs_snapshot **out, unsigned n_gpus, unsigned cap_procs,
                    struct gs_err *err);
/* Makes room for at least n processes; existing entries are kept. */
int gs_snapshot_reserve_procs(struct gs_snapshot *s, unsigned n, struct gs_err *err);
/* Makes room for at least n utilization samples; existing ones are kept. */
int gs_snapshot_reserve_usamp(struct gs_snapshot *s, unsigned n, struct gs_err *err);
/* The driver's utilization samples of GPU g (index into gpus) in this snapshot, oldest first,
 * *n of them; NULL (*n = 0) when none were read (not asked, not kept, or a copy of the
 * snapshot that carries the GPUs only). */
const struct gs_util_sample *gs_snapshot_util_samples(const struct gs_snapshot *s, unsigned g,
                                                      unsigned *n);
/* Resets readings to absent, keeping capacities (used before each cycle). */
void gs_snapshot_clear(struct gs_snapshot *s);
void gs_snapshot_free(struct gs_snapshot *s);

/* Metric metadata from the X-macro. */
const char *gs_metric_name(enum gs_metric m);
const char *gs_metric_unit(enum gs_metric m);
/* Returns the metric whose name is `name`, or -1. */
int gs_metric_by_name(const char *name);

static inline int gs_gpu_has(const struct gs_gpu *g, enum gs_metric m)
{
    return g->st[m] == GS_ST_OK;
}

static inline void gs_gpu_set(struct gs_gpu *g, enum gs_metric m, double v)
{
    g->v[m] = v;
    g->st[m] = GS_ST_OK;
}

/* A bit-mask reading (throttle reasons) as an integer: 0 when absent or when the stored number
 * is not a mask (negative, fractional garbage, NaN or >= 2^64, e.g. from a hostile snapshot
 * document); converting such a double to uint64_t directly is undefined behaviour. */
static inline uint64_t gs_gpu_mask(const struct gs_gpu *g, enum gs_metric m)
{
    double v = g->v[m];

    if (g->st[m] != GS_ST_OK || !(v >= 0.0 && v < 18446744073709551616.0))
        return 0;
    return (uint64_t)v;
}

static inline int gs_gpu_has_text(const struct gs_gpu *g, enum gs_text t)
{
    return g->tst[t] == GS_ST_OK;
}

/* "Spinning": kernels busy-waiting (a collective waiting for a peer, a spin loop) read as
 * utilization >= GS_SPIN_UTIL at a power draw <= GS_SPIN_POWER_RATIO of the power limit. One
 * definition for the agent's `spinning` alert, `gpuscope top`'s badge and `gpuscope run`'s hang
 * watchdog. */
#define GS_SPIN_UTIL 0.95
#define GS_SPIN_POWER_RATIO 0.25

static inline int gs_spinning(double util, double power_w, double limit_w)
{
    return limit_w > 0 && power_w >= 0 && util >= GS_SPIN_UTIL &&
           power_w <= GS_SPIN_POWER_RATIO * limit_w;
}

/* The power limit a spinning or power check compares against: the enforced limit, else the
 * configured one; 0 when neither is known. */
static inline double gs_gpu_power_limit(const struct gs_gpu *g)
{
    if (gs_gpu_has(g, GS_M_POWER_ENFORCED_LIMIT) && g->v[GS_M_POWER_ENFORCED_LIMIT] > 0)
        return g->v[GS_M_POWER_ENFORCED_LIMIT];
    if (gs_gpu_has(g, GS_M_POWER_LIMIT) && g->v[GS_M_POWER_LIMIT] > 0)
        return g->v[GS_M_POWER_LIMIT];
    return 0;
}

/* Human names of throttle bits: "power cap", "HW thermal", ...; NULL for an unknown bit. */
const char *gs_throttle_name(uint64_t bit);

/* The MIG profile of a MIG device ("1g.10gb", "3g.40gb+me"): what follows "MIG " in the name
 * NVML gives a MIG handle ("NVIDIA H100 80GB HBM3 MIG 1g.10gb"); "" when the name has none. */
const char *gs_mig_profile(const struct gs_mig *m);
/* The metric of the GPU that a gs_mig_gpm figure mirrors (GS_M_GPM_*): its name and unit. */
enum gs_metric gs_mig_gpm_metric(enum gs_mig_gpm k);
/* Whether the GPU is in MIG mode (mig_mode_current read and enabled). */
static inline int gs_gpu_mig_on(const struct gs_gpu *g)
{
    return gs_gpu_has(g, GS_M_MIG_MODE) && g->v[GS_M_MIG_MODE] == 1;
}

#endif
