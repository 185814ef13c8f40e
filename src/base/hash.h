/*
 * FNV-1a, 32 bits: the string hash of the interning tables (trace names, stack functions and
 * labels). Not for anything an adversary could aim at; fast and stable across runs.
 */
#ifndef GS_BASE_HASH_H
#define GS_BASE_HASH_H

#include <stddef.h>
#include <stdint.h>

#define GS_HASH_FNV1A_INIT 2166136261u /* the offset basis: what an empty input hashes to */

/* Folds n bytes of p into h (GS_HASH_FNV1A_INIT to begin). */
uint32_t gs_hash_fnv1a_add(uint32_t h, const void *p, size_t n);

/* The hash of n bytes of p. */
static inline uint32_t gs_hash_fnv1a(const void *p, size_t n)
{
    return gs_hash_fnv1a_add(GS_HASH_FNV1A_INIT, p, n);
}

/* The hash of the pair of strings (a, b), with a 0xff byte between them (never in UTF-8), so
 * ("ab", "c") and ("a", "bc") differ. */
uint32_t gs_hash_fnv1a_pair(const char *a, const char *b);

#endif
