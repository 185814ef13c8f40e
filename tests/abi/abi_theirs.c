/*
 * NVIDIA's side of the ABI comparison: the real nvml.h (Debian libnvidia-ml-dev, installed by
 * scripts/deps-abi.sh), measured by the same list as abi_ours.c. This is the only file in the
 * tree that includes nvml.h.
 */
#include "abi_table.h"

#include <stddef.h>

/* Keep the plain names (nvmlInit, nvmlDeviceGetComputeRunningProcesses) bound to the plain
 * symbols instead of being #defined to their _v2/_v3 successors: we dlsym each by its own
 * name, so each prototype must be the one that symbol really has. */
#define NVML_NO_UNVERSIONED_FUNC_DEFS
#include <nvml.h>

#define GS_ABI_SIDE_OURS 0
#define GS_ABI_PICK(ours, theirs) theirs
#define GS_ABI_IF_OURS(x)
/* 1 when nvml.h declares fn with exactly this prototype (compatible function types). */
#define GS_ABI_PROTO_OK(ret, fn, params) _Generic(&fn, ret(*) params : 1, default : 0)

const struct gs_abi_entry gs_abi_theirs[] = {
#include "abi_list.h"
};
const size_t gs_abi_theirs_len = sizeof gs_abi_theirs / sizeof gs_abi_theirs[0];
const char gs_abi_theirs_version[] = NVML_API_VERSION_STR;
