/*
 * libFuzzer target for the Python stack walker (src/stacks/pyread.c) over memory it cannot
 * trust. The first byte picks a layout (3.8-3.12 tables); the rest either patches a valid
 * synthetic image (pairs of a 16-bit offset and a byte: torn pointers, lengths, line tables)
 * or, past 2 KiB, is the image itself. The walker must return (an error or a partial stack),
 * never crash or loop; the line-table decoders also run over the raw input.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../tests/unit/pyimage.h"
#include "gpuscope/gs_err.h"
#include "stacks/collect.h"
#include "stacks/mem.h"
#include "stacks/pylayout.h"
#include "stacks/pyread.h"

static const unsigned versions[] = {0x030812f0, 0x030912f0, 0x030a0cf0, 0x030b02f0, 0x030c01f0};
static uint8_t img[PYIMG_SIZE];
static struct gs_pysample sample;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gs_py_layout L;
    struct gs_pytarget t;
    struct gs_mem m;
    struct gs_pyread *r = NULL;
    static FILE *null_out;

    if (size < 1)
        return 0;
    if (!null_out)
        null_out = fopen("/dev/null", "w");
    if (gs_pylayout_for_version(versions[data[0] % 5], &L, NULL) != GS_OK)
        return 0;
    gs_test_pyimage(&L, img, &t);
    if (size > 2048) {
        memcpy(img, data + 1, size - 1 < PYIMG_SIZE ? size - 1 : PYIMG_SIZE);
    } else {
        for (size_t i = 1; i + 2 < size; i += 3) {
            uint16_t off = (uint16_t)(data[i] | data[i + 1] << 8);
            img[off % PYIMG_SIZE] = data[i + 2];
        }
    }
    gs_mem_init_image(&m, PYIMG_BASE, img, PYIMG_SIZE);
    if (gs_pyread_new(&m, &t, &r, NULL) == GS_OK) {
        for (int k = 0; k < 2; k++)
            if (gs_pyread_sample(r, k ? PYIMG_TID : 0, &sample, NULL) == GS_OK && null_out)
                gs_collect_dump_json(r, 1, &sample, null_out, NULL);
        gs_pyread_close(r);
    }
    for (int f = GS_PYL_LNOTAB; f <= GS_PYL_LOCATIONS; f++)
        for (int64_t a = -2; a < 64; a += 7)
            (void)gs_pyread_addr2line((enum gs_py_lines)f, data, size, 1, a);
    if (size >= GS_PY_DEBUG_OFFSETS_MAX)
        (void)gs_pylayout_from_debug(data, size, &L, NULL);
    return 0;
}
