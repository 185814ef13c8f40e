/*
 * FNV-1a (hash.h), http://www.isthe.com/chongo/tech/comp/fnv/.
 */
#include "base/hash.h"

#include <string.h>

#define FNV_PRIME 16777619u

uint32_t gs_hash_fnv1a_add(uint32_t h, const void *p, size_t n)
{
    const unsigned char *s = p;

    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * FNV_PRIME;
    return h;
}

uint32_t gs_hash_fnv1a_pair(const char *a, const char *b)
{
    static const unsigned char sep = 0xff;
    uint32_t h = gs_hash_fnv1a_add(GS_HASH_FNV1A_INIT, a, strlen(a));

    h = gs_hash_fnv1a_add(h, &sep, 1);
    return gs_hash_fnv1a_add(h, b, strlen(b));
}
