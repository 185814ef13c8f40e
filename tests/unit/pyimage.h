/*
 * A synthetic CPython memory image for the stack reader's tests and fuzz target: a runtime,
 * one interpreter, one thread state and a chain of PYIMG_FRAMES frames, each with its code
 * object, name and file strings and a one-entry line table, placed with the offsets of any
 * table layout (src/stacks/pylayout.h). Frame k is function "fn<k>" in "/img/mod.py", first
 * line 10k+1, at line 10k+2; frame 0 is the innermost. Shared by tests/unit/test_stacks.c and
 * fuzz/fuzz_pyframes.c.
 */
#ifndef GS_TEST_PYIMAGE_H
#define GS_TEST_PYIMAGE_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "stacks/pylayout.h"
#include "stacks/pyread.h"

#define PYIMG_BASE 0x100000u
#define PYIMG_SIZE 0x4000u
#define PYIMG_FRAMES 3
#define PYIMG_TID 4242
#define PYIMG_CODE_TYPE (PYIMG_BASE + 0x3f00u)

static void pyimg_p64(uint8_t *img, uint64_t addr, uint64_t v)
{
    memcpy(img + (addr - PYIMG_BASE), &v, 8);
}

static void pyimg_p32(uint8_t *img, uint64_t addr, uint32_t v)
{
    memcpy(img + (addr - PYIMG_BASE), &v, 4);
}

static void pyimg_str(const struct gs_py_layout *L, uint8_t *img, uint64_t at, const char *s)
{
    uint32_t state = (1u << 2) | (1u << 5) | (1u << 6); /* kind 1, compact, ascii */
    pyimg_p32(img, at + L->uni_state, state);
    pyimg_p64(img, at + L->uni_length, strlen(s));
    memcpy(img + (at - PYIMG_BASE) + L->uni_ascii_size, s, strlen(s));
}

/* Fills img (PYIMG_SIZE bytes) for layout L and the target describing it. */
static void gs_test_pyimage(const struct gs_py_layout *L, uint8_t *img, struct gs_pytarget *t)
{
    const uint64_t interp = PYIMG_BASE + 0x400, ts = PYIMG_BASE + 0x800,
                   cframe = PYIMG_BASE + 0xc00;
    const uint64_t file = PYIMG_BASE + 0x3800;

    memset(img, 0, PYIMG_SIZE);
    memset(t, 0, sizeof *t);
    t->runtime_addr = PYIMG_BASE;
    t->code_type_addr = PYIMG_CODE_TYPE;
    t->version = L->version;
    pyimg_p64(img, PYIMG_BASE + L->rt_interp_head, interp);
    pyimg_p64(img, interp + L->is_threads_head, ts);
    pyimg_p64(img, ts + L->ts_interp, interp);
    pyimg_p64(img, ts + L->ts_thread_id, 0x1234);
    if (L->ts_native_tid)
        pyimg_p64(img, ts + L->ts_native_tid, PYIMG_TID);
    pyimg_str(L, img, file, "/img/mod.py");
    for (unsigned k = 0; k < PYIMG_FRAMES; k++) {
        uint64_t fr = PYIMG_BASE + 0x1000 + k * 0x100, code = PYIMG_BASE + 0x2000 + k * 0x200;
        uint64_t name = PYIMG_BASE + 0x3000 + k * 0x80, lt = PYIMG_BASE + 0x3a00 + k * 0x40;
        char nm[16];
        if (k == 0) {
            if (L->frames == GS_PYF_CFRAME) {
                pyimg_p64(img, ts + L->ts_frame, cframe);
                pyimg_p64(img, cframe + L->cf_current_frame, fr);
            } else {
                pyimg_p64(img, ts + L->ts_frame, fr);
            }
        }
        pyimg_p64(img, fr + L->fr_back, k + 1 < PYIMG_FRAMES ? fr + 0x100 : 0);
        pyimg_p64(img, fr + L->fr_code, code);
        if (L->frames == GS_PYF_FRAMEOBJ)
            pyimg_p32(img, fr + L->fr_lasti, L->lines == GS_PYL_LNOTAB ? 2 * k : k);
        else
            pyimg_p64(img, fr + L->fr_lasti, code + L->co_code + 2 * k);
        pyimg_p64(img, code + L->ob_type, PYIMG_CODE_TYPE);
        pyimg_p64(img, code + L->co_filename, file);
        pyimg_p64(img, code + L->co_name, name);
        if (L->co_qualname)
            pyimg_p64(img, code + L->co_qualname, name);
        pyimg_p64(img, code + L->co_linetable, lt);
        pyimg_p32(img, code + L->co_firstlineno, 10 * k + 1);
        snprintf(nm, sizeof nm, "fn%u", k);
        pyimg_str(L, img, name, nm);
        /* one entry: 16 bytes of code at first line + 1 */
        pyimg_p64(img, lt + L->bytes_size, 2);
        if (L->lines == GS_PYL_LOCATIONS) {
            img[lt - PYIMG_BASE + L->bytes_sval] = 0x80 | (13 << 3) | 7; /* no column, 8 units */
            img[lt - PYIMG_BASE + L->bytes_sval + 1] = 2;                /* svarint +1 */
        } else if (L->lines == GS_PYL_LINETABLE) {
            img[lt - PYIMG_BASE + L->bytes_sval] = 16;
            img[lt - PYIMG_BASE + L->bytes_sval + 1] = 1;
        } else {
            img[lt - PYIMG_BASE + L->bytes_sval] = 0;
            img[lt - PYIMG_BASE + L->bytes_sval + 1] = 1;
        }
    }
}

#endif
