/*
 * Our side of the ABI comparison: src/backend/nvml_abi.h, measured by the list in abi_list.h.
 * abi_theirs.c measures NVIDIA's nvml.h with the same list; test_nvml_abi.c compares them.
 */
#include "abi_table.h"

#include <stddef.h>

#include "backend/nvml_abi.h"

#define GS_ABI_SIDE_OURS 1
#define GS_ABI_PICK(ours, theirs) ours
#define GS_ABI_IF_OURS(x) x
/* Our backend calls these through function pointers it declares itself; here we only check
 * that the prototype abi_list.h states is writable with our types (it does not compile
 * otherwise). abi_theirs.c checks the same text against NVIDIA's declaration. */
#define GS_ABI_PROTO_OK(ret, fn, params) (sizeof(ret(*) params) == sizeof(void (*)(void)))

const struct gs_abi_entry gs_abi_ours[] = {
#include "abi_list.h"
};
const size_t gs_abi_ours_len = sizeof gs_abi_ours / sizeof gs_abi_ours[0];
