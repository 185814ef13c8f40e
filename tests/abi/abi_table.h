/*
 * The shape of the two ABI tables that tests/abi compares.
 *
 * Our src/backend/nvml_abi.h and NVIDIA's nvml.h declare the same names, so no translation
 * unit can include both. abi_ours.c includes ours, abi_theirs.c includes the real header, and
 * each expands the same list (abi_list.h) into an array of these entries: one number per
 * size, alignment, field offset, field size, constant or prototype, under a key that reads the
 * same on both sides. test_nvml_abi.c then matches the two arrays key by key. This header names
 * no NVML type, so the test sees neither declaration.
 */
#ifndef GS_ABI_TABLE_H
#define GS_ABI_TABLE_H

#include <stddef.h>

enum gs_abi_rel {
    GS_ABI_EQ,        /* ours must equal nvml.h */
    GS_ABI_GE,        /* ours must be >= nvml.h (arrays we size for the newest driver) */
    GS_ABI_OURS_ONLY, /* our own constant; nvml.h has no counterpart (shown, not compared) */
};

struct gs_abi_entry {
    const char *group; /* what the cmocka test is named after: "nvmlPciInfo_t", "return codes" */
    const char *key;   /* the same string on both sides: "nvmlPciInfo_t.busId" */
    const char *name;  /* the C expression this side evaluated, when it is not the key */
    int rel;           /* enum gs_abi_rel; taken from our side */
    unsigned long long value;
};

extern const struct gs_abi_entry gs_abi_ours[];
extern const size_t gs_abi_ours_len;
extern const struct gs_abi_entry gs_abi_theirs[];
extern const size_t gs_abi_theirs_len;
extern const char gs_abi_theirs_version[]; /* NVML_API_VERSION_STR of the header compiled */

#endif
