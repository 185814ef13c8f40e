/*
 * libFuzzer target for the Kubernetes name parsers (src/backend/k8s.c): the entry names of
 * the kubelet's /var/log/pods (<namespace>_<pod>_<uid>) and /var/log/containers
 * (<pod>_<namespace>_<container>-<id>.log), which any pod's owner shapes within the API's
 * rules and anyone who can write there shapes at will, and which end up as label values on
 * /metrics. The input goes to both parsers whole, and line by line (the seed corpus,
 * fuzz/corpus/k8s/, holds real-shaped names one per line, and broken ones).
 *
 * Beyond "no crash, no read past len" (libFuzzer's heap buffer of exactly size bytes), each
 * result is checked against the contract: on GS_OK every field is a terminated string of the
 * characters Kubernetes allows (no '"', '\\', newline or '_' can reach a label), non-empty,
 * and the fields put back together give the input; on GS_EPARSE every field is empty.
 *
 * Build and run: make fuzz (fuzz/meson.build, scripts/fuzz.sh), or by hand with clang:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -std=c17 \
 *       -D_GNU_SOURCE -Iinclude -Isrc fuzz/fuzz_k8s.c src/backend/k8s.c src/core/err.c \
 *       -o build-fuzz/fuzz_k8s
 *   build-fuzz/fuzz_k8s -max_total_time=60 build-fuzz/work fuzz/corpus/k8s
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/k8s.h"
#include "gpuscope/gs_err.h"

#include "fuzz_util.h"

static int name_chars(const char *s, size_t cap, int dots, int hex_upper)
{
    if (!memchr(s, '\0', cap) || !s[0])
        return 0;
    for (; *s; s++) {
        char c = *s;
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || (dots && c == '.') ||
              (hex_upper && c >= 'A' && c <= 'F')))
            return 0;
    }
    return 1;
}

static void one(const uint8_t *data, size_t size)
{
    struct gs_k8s_pod p;
    struct gs_k8s_ctr_log c;
    char back[GS_K8S_POD_LEN + GS_K8S_NAME_LEN * 2 + GS_K8S_ID_LEN + 16];
    /* a heap copy of exactly size bytes, so ASan sees an over-read of a line */
    char *buf = malloc(size ? size : 1);

    if (!buf)
        return;
    if (size)
        memcpy(buf, data, size);
    if (gs_k8s_parse_pod_dir(buf, size, &p) == GS_OK) {
        CHECK(name_chars(p.ns, sizeof p.ns, 0, 0));
        CHECK(name_chars(p.pod, sizeof p.pod, 1, 0));
        CHECK(name_chars(p.uid, sizeof p.uid, 0, 1));
        snprintf(back, sizeof back, "%s_%s_%s", p.ns, p.pod, p.uid);
        CHECK(strlen(back) == size && memcmp(back, buf, size) == 0);
    } else {
        CHECK(!p.ns[0] && !p.pod[0] && !p.uid[0]);
    }
    if (gs_k8s_parse_container_log(buf, size, &c) == GS_OK) {
        CHECK(name_chars(c.pod, sizeof c.pod, 1, 0));
        CHECK(name_chars(c.ns, sizeof c.ns, 0, 0));
        CHECK(name_chars(c.container, sizeof c.container, 0, 0));
        CHECK(name_chars(c.id, sizeof c.id, 0, 1) && !strchr(c.id, '-') && strlen(c.id) >= 12);
        snprintf(back, sizeof back, "%s_%s_%s-%s.log", c.pod, c.ns, c.container, c.id);
        CHECK(strlen(back) == size && memcmp(back, buf, size) == 0);
    } else {
        CHECK(!c.pod[0] && !c.ns[0] && !c.container[0] && !c.id[0]);
    }
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *p = data, *end = data + size;

    one(data, size);
    while (p < end) {
        const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
        const uint8_t *le = nl ? nl : end;
        one(p, (size_t)(le - p));
        p = le + 1;
    }
    return 0;
}
