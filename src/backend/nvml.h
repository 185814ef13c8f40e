/*
 * The NVML backend. Its ops table, gs_backend_nvml, is declared in backend.h; this header
 * declares the helpers that tests reach (GS_TESTABLE: static in the product).
 *
 * The declarations appear only when GS_TESTABLE is defined before this header is read, which
 * is the case in test builds (-DGS_TESTABLE= on the command line) and not in product builds,
 * where nvml.c includes this header first and base/testable.h afterwards.
 */
#ifndef GS_NVML_H
#define GS_NVML_H

#include <stdint.h>

#include "backend/backend.h"
#include "backend/nvml_abi.h"

#ifdef GS_TESTABLE
/* Status of a field after an NVML call returned r (absent, no permission, lost, error). */
uint8_t gs_nvml_status(nvmlReturn_t r);
/* gpuscope code for a failed nvmlInit / nvmlDeviceGetCount. */
int gs_nvml_init_rc(nvmlReturn_t r);
/* Bytes per process-list entry for the symbol version found (0 = _v3, 1 = _v2, 2 = plain),
 * given whether the library exports nvmlDeviceGetConfComputeMemSizeInfo and
 * nvmlDeviceGetRunningProcessDetailList (nvml-abi.md §7). */
unsigned gs_nvml_proc_stride(int found, int has_conf_compute, int has_detail_list);
/* The value of a field-value entry as a double; GS_OK or GS_ENOTSUP for an unknown type. */
int gs_nvml_field_double(const nvmlFieldValue_t *fv, double *out);
/* The NVLink speed field id of link l (84..89, 132..137), 0 for links past 11. */
unsigned gs_nvml_nvlink_speed_field(unsigned l);
#endif

#endif
