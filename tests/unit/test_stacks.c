/*
 * Unit tests for the Python stack reader (src/stacks/): the frame walker over synthetic
 * memory images of every table layout (3.8-3.12), torn and cyclic memory, the three line-table
 * formats, _Py_DebugOffsets parsing, the stack profile and its writers, thread-state summaries.
 * The live-process side is tests/e2e/test_stacks.py.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

#include <cmocka.h>

#include <jansson.h>

#include "gpuscope/gs_err.h"
#include "pyimage.h"
#include "stacks/flame.h"
#include "stacks/mem.h"
#include "stacks/profile.h"
#include "stacks/pylayout.h"
#include "stacks/pyread.h"
#include "stacks/taskstate.h"

static const unsigned versions[] = {0x030812f0, 0x030912f0, 0x030a0cf0, 0x030b02f0, 0x030c01f0};

static struct gs_pyread *open_image(uint8_t *img, unsigned version, struct gs_py_layout *L)
{
    struct gs_pytarget t;
    struct gs_mem m;
    struct gs_pyread *r = NULL;
    struct gs_err err = {0};

    assert_int_equal(gs_pylayout_for_version(version, L, &err), GS_OK);
    gs_test_pyimage(L, img, &t);
    gs_mem_init_image(&m, PYIMG_BASE, img, PYIMG_SIZE);
    assert_int_equal(gs_pyread_new(&m, &t, &r, &err), GS_OK);
    return r;
}

static void test_walk_every_layout(void **state)
{
    static uint8_t img[PYIMG_SIZE];
    static struct gs_pysample s;
    (void)state;

    for (size_t v = 0; v < sizeof versions / sizeof versions[0]; v++) {
        struct gs_py_layout L;
        struct gs_err err = {0};
        struct gs_pyread *r = open_image(img, versions[v], &L);
        assert_int_equal(gs_pyread_sample(r, 0, &s, &err), GS_OK);
        assert_int_equal(s.nthreads, 1);
        assert_int_equal(s.threads[0].nframes, PYIMG_FRAMES);
        assert_int_equal(s.threads[0].partial, 0);
        assert_int_equal(s.threads[0].thread_id, 0x1234);
        assert_int_equal(s.threads[0].native_tid, L.ts_native_tid ? PYIMG_TID : 0);
        for (unsigned k = 0; k < PYIMG_FRAMES; k++) {
            const struct gs_pyfunc *f = gs_pyread_func(r, s.threads[0].frames[k].func);
            char want[16];
            snprintf(want, sizeof want, "fn%u", k);
            assert_non_null(f);
            assert_string_equal(f->name, want);
            assert_string_equal(f->file, "/img/mod.py");
            assert_int_equal(s.threads[0].frames[k].line, 10 * (int)k + 2);
        }
        /* a second sample hits the code cache and gives the same ids */
        uint32_t f0 = s.threads[0].frames[0].func;
        uint64_t reads = gs_pyread_reads(r);
        assert_int_equal(gs_pyread_sample(r, 0, &s, &err), GS_OK);
        assert_int_equal(s.threads[0].frames[0].func, f0);
        /* no string re-reads; + 2 for the check that the innermost frame did not change */
        assert_true(gs_pyread_reads(r) - reads <= 7 + 2 * PYIMG_FRAMES);
        /* only_tid: another tid keeps nothing on 3.11+ */
        assert_int_equal(gs_pyread_sample(r, PYIMG_TID + 1, &s, &err), GS_OK);
        assert_int_equal(s.nthreads, L.ts_native_tid ? 0u : 1u);
        gs_pyread_close(r);
    }
}

static void test_torn_and_cyclic(void **state)
{
    static uint8_t img[PYIMG_SIZE];
    static struct gs_pysample s;
    struct gs_py_layout L;
    struct gs_err err = {0};
    struct gs_pyread *r;
    (void)state;

    /* frame 1's code object is not a code object: the walk stops there, partial */
    r = open_image(img, 0x030b02f0, &L);
    pyimg_p64(img, PYIMG_BASE + 0x2200 + L.ob_type, 0xdead0);
    assert_int_equal(gs_pyread_sample(r, 0, &s, &err), GS_OK);
    assert_int_equal(s.threads[0].nframes, 2);
    assert_int_equal(s.threads[0].frames[1].func, 0);
    assert_true(s.threads[0].partial);
    gs_pyread_close(r);

    /* the last frame points back at the first: bounded, partial */
    r = open_image(img, 0x030b02f0, &L);
    pyimg_p64(img, PYIMG_BASE + 0x1200 + L.fr_back, PYIMG_BASE + 0x1000);
    assert_int_equal(gs_pyread_sample(r, 0, &s, &err), GS_OK);
    assert_int_equal(s.threads[0].nframes, GS_PY_MAX_DEPTH);
    assert_true(s.threads[0].partial);
    /* a frame pointer outside the image */
    pyimg_p64(img, PYIMG_BASE + 0x1000 + L.fr_back, 0x7fff00000000);
    assert_int_equal(gs_pyread_sample(r, 0, &s, &err), GS_OK);
    assert_int_equal(s.threads[0].nframes, 1);
    assert_true(s.threads[0].partial);
    /* the thread state no longer points at its interpreter */
    pyimg_p64(img, PYIMG_BASE + 0x800 + L.ts_interp, 0x5000);
    assert_int_equal(gs_pyread_sample(r, 0, &s, &err), GS_EPARSE);
    assert_non_null(strstr(err.msg, "interpreter"));
    /* no interpreter at all */
    pyimg_p64(img, PYIMG_BASE + L.rt_interp_head, 0);
    assert_int_equal(gs_pyread_sample(r, 0, &s, &err), GS_EPARSE);
    gs_pyread_close(r);
}

static void test_new_refuses(void **state)
{
    static uint8_t img[PYIMG_SIZE];
    struct gs_py_layout L;
    struct gs_pytarget t;
    struct gs_mem m;
    struct gs_pyread *r = NULL;
    struct gs_err err = {0};
    (void)state;

    assert_int_equal(gs_pylayout_for_version(0x030b02f0, &L, &err), GS_OK);
    gs_test_pyimage(&L, img, &t);
    pyimg_p64(img, PYIMG_BASE + L.rt_interp_head, 0x12345); /* misaligned */
    gs_mem_init_image(&m, PYIMG_BASE, img, PYIMG_SIZE);
    assert_int_equal(gs_pyread_new(&m, &t, &r, &err), GS_EPARSE);
    assert_null(r);
    t.version = 0x02070ff0;
    gs_mem_init_image(&m, PYIMG_BASE, img, PYIMG_SIZE);
    assert_int_equal(gs_pyread_new(&m, &t, &r, &err), GS_EPARSE);
    t.version = 0x030700f0;
    gs_mem_init_image(&m, PYIMG_BASE, img, PYIMG_SIZE);
    assert_int_equal(gs_pyread_new(&m, &t, &r, &err), GS_ENOTSUP);
    assert_non_null(strstr(err.msg, "3.7"));
    /* 3.13 without the debug cookie */
    t.version = 0x030d00f0;
    gs_mem_init_image(&m, PYIMG_BASE, img, PYIMG_SIZE);
    assert_int_equal(gs_pyread_new(&m, &t, &r, &err), GS_EPARSE);
    assert_non_null(strstr(err.msg, "cookie"));
    /* the C test binary has no interpreter of its own */
    assert_int_equal(gs_pyread_open_self(&r, &err), GS_ENOTFOUND);
}

static void test_addr2line(void **state)
{
    /* 3.11 location table, first line 100:
     *  A code 10 (same line), 2 units, 2 column bytes   -> 100 for bytes 0..3
     *  B code 11 (+1), 1 unit, 2 bytes                  -> 101 for 4..5
     *  C code 15 (no location), 1 unit                  -> 0   for 6..7
     *  D code 14 (long): +3, end line 0, cols 1, 2; 4 units -> 104 for 8..15
     *  E code 13 (no columns): -2, 1 unit               -> 102 for 16..17 */
    static const uint8_t loc[] = {0x80 | 10 << 3 | 1,
                                  5,
                                  9,
                                  0x80 | 11 << 3 | 0,
                                  1,
                                  2,
                                  0x80 | 15 << 3 | 0,
                                  0x80 | 14 << 3 | 3,
                                  6,
                                  0,
                                  1,
                                  2,
                                  0x80 | 13 << 3 | 0,
                                  5};
    /* 3.10: (8 bytes, +0) (4 bytes, no line) (0 bytes, +5) (6 bytes, +1) */
    static const uint8_t lt310[] = {8, 0, 4, 0x80, 0, 5, 6, 1};
    /* 3.8 lnotab: line +2 at byte 6, +3 at byte 10 */
    static const uint8_t lnotab[] = {6, 2, 4, 3};
    (void)state;

    assert_int_equal(gs_pyread_addr2line(GS_PYL_LOCATIONS, loc, sizeof loc, 100, -2), 100);
    assert_int_equal(gs_pyread_addr2line(GS_PYL_LOCATIONS, loc, sizeof loc, 100, 0), 100);
    assert_int_equal(gs_pyread_addr2line(GS_PYL_LOCATIONS, loc, sizeof loc, 100, 3), 100);
    assert_int_equal(gs_pyread_addr2line(GS_PYL_LOCATIONS, loc, sizeof loc, 100, 4), 101);
    assert_int_equal(gs_pyread_addr2line(GS_PYL_LOCATIONS, loc, sizeof loc, 100, 6), 0);
    assert_int_equal(gs_pyread_addr2line(GS_PYL_LOCATIONS, loc, sizeof loc, 100, 8), 104);
    assert_int_equal(gs_pyread_addr2line(GS_PYL_LOCATIONS, loc, sizeof loc, 100, 15), 104);
    assert_int_equal(gs_pyread_addr2line(GS_PYL_LOCATIONS, loc, sizeof loc, 100, 16), 102);
    assert_int_equal(gs_pyread_addr2line(GS_PYL_LOCATIONS, loc, sizeof loc, 100, 18), 0);
    /* truncated varint, a byte without its entry bit */
    assert_int_equal(gs_pyread_addr2line(GS_PYL_LOCATIONS, loc, 8, 100, 8), 0);
    assert_int_equal(gs_pyread_addr2line(GS_PYL_LOCATIONS, (const uint8_t *)"\x01", 1, 7, 0), 0);
    assert_int_equal(gs_pyread_addr2line(GS_PYL_LOCATIONS, NULL, 0, 7, 0), 0);

    assert_int_equal(gs_pyread_addr2line(GS_PYL_LINETABLE, lt310, sizeof lt310, 50, 0), 50);
    assert_int_equal(gs_pyread_addr2line(GS_PYL_LINETABLE, lt310, sizeof lt310, 50, 7), 50);
    assert_int_equal(gs_pyread_addr2line(GS_PYL_LINETABLE, lt310, sizeof lt310, 50, 9), 0);
    assert_int_equal(gs_pyread_addr2line(GS_PYL_LINETABLE, lt310, sizeof lt310, 50, 12), 56);
    assert_int_equal(gs_pyread_addr2line(GS_PYL_LINETABLE, lt310, sizeof lt310, 50, 18), 0);

    assert_int_equal(gs_pyread_addr2line(GS_PYL_LNOTAB, lnotab, sizeof lnotab, 1, 0), 1);
    assert_int_equal(gs_pyread_addr2line(GS_PYL_LNOTAB, lnotab, sizeof lnotab, 1, 5), 1);
    assert_int_equal(gs_pyread_addr2line(GS_PYL_LNOTAB, lnotab, sizeof lnotab, 1, 6), 3);
    assert_int_equal(gs_pyread_addr2line(GS_PYL_LNOTAB, lnotab, sizeof lnotab, 1, 10), 6);
    assert_int_equal(gs_pyread_addr2line(GS_PYL_LNOTAB, lnotab, sizeof lnotab, 1, 99), 6);
}

/* A 3.13 _Py_DebugOffsets block, fields by index as in CPython 3.13's pycore_runtime.h. */
static void debug_block(uint64_t *f, unsigned version)
{
    memset(f, 0, GS_PY_DEBUG_OFFSETS_MAX);
    memcpy(f, "xdebugpy", 8);
    f[1] = version;
    f[3] = 100000; /* runtime size */
    f[5] = 40;     /* interpreters_head */
    f[6] = 90000;  /* interp size */
    f[8] = 0;
    f[9] = 7000;  /* threads_head */
    f[19] = 4000; /* tstate size */
    f[21] = 8;
    f[22] = 16;
    f[23] = 72; /* current_frame */
    f[24] = 152;
    f[25] = 160;
    f[28] = 80; /* frame size */
    f[29] = 8;
    f[30] = 0;
    f[31] = 56;
    f[33] = 70;
    f[34] = 200; /* code size */
    f[35] = 112;
    f[36] = 120;
    f[37] = 128;
    f[38] = 136;
    f[39] = 68;
    f[43] = 200;
    f[44] = 16;
    f[45] = 8;
    f[64] = 40;
    f[65] = 16;
    f[66] = 32;
    f[67] = 56;
    f[68] = 32;
    f[69] = 16;
    f[70] = 40;
}

static void test_debug_offsets(void **state)
{
    uint64_t f[GS_PY_DEBUG_OFFSETS_MAX / 8];
    struct gs_py_layout L;
    struct gs_err err = {0};
    (void)state;

    debug_block(f, 0x030d01f0);
    assert_int_equal(gs_pylayout_from_debug(f, sizeof f, &L, &err), GS_OK);
    assert_int_equal(L.frames, GS_PYF_DIRECT);
    assert_int_equal(L.rt_interp_head, 40);
    assert_int_equal(L.is_threads_head, 7000);
    assert_int_equal(L.ts_frame, 72);
    assert_int_equal(L.ts_native_tid, 160);
    assert_int_equal(L.fr_lasti, 56);
    assert_int_equal(L.fr_owner, 70);
    assert_int_equal(L.co_qualname, 128);
    assert_int_equal(L.co_code, 200);
    assert_int_equal(L.uni_ascii_size, 40);
    assert_int_equal(L.uni_compact_size, 56);

    assert_int_equal(gs_pylayout_from_debug(f, 100, &L, &err), GS_EPARSE); /* truncated */
    f[23] = 5000; /* current_frame beyond the thread state's size */
    assert_int_equal(gs_pylayout_from_debug(f, sizeof f, &L, &err), GS_EPARSE);
    debug_block(f, 0x030d01f0);
    f[2] = 1;
    assert_int_equal(gs_pylayout_from_debug(f, sizeof f, &L, &err), GS_ENOTSUP);
    assert_non_null(strstr(err.msg, "free-threaded"));
    debug_block(f, 0x030f00a1);
    assert_int_equal(gs_pylayout_from_debug(f, sizeof f, &L, &err), GS_ENOTSUP);
    memcpy(f, "xdebugpz", 8);
    assert_int_equal(gs_pylayout_from_debug(f, sizeof f, &L, &err), GS_EPARSE);
}

static char *mem_text(void (*fill)(struct gs_stackprof *, FILE *), struct gs_stackprof *p)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    fill(p, f);
    fclose(f);
    return buf;
}

static void fill_collapsed(struct gs_stackprof *p, FILE *f)
{
    assert_int_equal(gs_stackprof_write_collapsed(p, f), GS_OK);
}

static void fill_speedscope(struct gs_stackprof *p, FILE *f)
{
    assert_int_equal(gs_stackprof_write_speedscope(p, "t", 0.01, f, NULL), GS_OK);
}

static void fill_svg(struct gs_stackprof *p, FILE *f)
{
    assert_int_equal(gs_flame_write_svg(p, "title <&>", f, NULL), GS_OK);
}

static void test_profile(void **state)
{
    struct gs_stackprof *p = gs_stackprof_new();
    uint32_t main_, a, b, rec, ids[8];
    char *text;
    json_t *j;
    (void)state;

    assert_non_null(p);
    main_ = gs_stackprof_label(p, "main", "m.py");
    a = gs_stackprof_label(p, "a;x", "m.py");
    b = gs_stackprof_label(p, "b", "");
    rec = gs_stackprof_label(p, "rec", "m.py");
    assert_int_equal(gs_stackprof_label(p, "main", "m.py"), main_);
    {
        uint32_t s1[] = {main_, a}, s2[] = {main_, b}, s3[] = {main_, rec, rec, rec};
        for (int i = 0; i < 3; i++)
            assert_int_equal(gs_stackprof_add(p, s1, 2, 1), GS_OK);
        assert_int_equal(gs_stackprof_add(p, s2, 2, 1), GS_OK);
        assert_int_equal(gs_stackprof_add(p, s3, 4, 2), GS_OK);
        assert_int_equal(gs_stackprof_add(p, s1, 0, 1), GS_OK); /* empty stack: root */
        uint32_t bad[] = {999};
        assert_int_equal(gs_stackprof_add(p, bad, 1, 1), GS_EINVAL);
    }
    assert_int_equal(p->samples, 7);
    assert_int_equal(p->dropped, 1);
    assert_int_equal(p->own[a], 3);
    assert_int_equal(p->tot[main_], 6);
    assert_int_equal(p->tot[rec], 2); /* recursion counted once per sample */
    assert_int_equal(p->own[rec], 2);
    assert_int_equal(gs_stackprof_top(p, ids, 8, 0), 4);
    assert_int_equal(ids[0], a);
    assert_int_equal(ids[1], rec);
    assert_int_equal(gs_stackprof_top(p, ids, 1, 1), 1);
    assert_int_equal(ids[0], main_);

    text = mem_text(fill_collapsed, p);
    assert_non_null(strstr(text, "main (m.py);a:x (m.py) 3\n"));
    assert_non_null(strstr(text, "main (m.py);b 1\n"));
    assert_non_null(strstr(text, "main (m.py);rec (m.py);rec (m.py);rec (m.py) 2\n"));
    free(text);

    text = mem_text(fill_speedscope, p);
    j = json_loads(text, 0, NULL);
    assert_non_null(j);
    assert_int_equal(json_array_size(json_object_get(json_object_get(j, "shared"), "frames")), 4);
    json_t *prof = json_array_get(json_object_get(j, "profiles"), 0);
    assert_string_equal(json_string_value(json_object_get(prof, "type")), "sampled");
    assert_int_equal(json_array_size(json_object_get(prof, "samples")), 3);
    json_decref(j);
    free(text);

    text = mem_text(fill_svg, p);
    assert_non_null(strstr(text, "title &lt;&amp;&gt;"));
    assert_non_null(strstr(text, "<title>a;x (m.py): 3 samples, 42.86%</title>"));
    assert_non_null(strstr(text, "</svg>"));
    free(text);
    gs_stackprof_free(p);
}

static void test_taskstate(void **state)
{
    char out[96];
    (void)state;

    gs_taskstate_describe('R', -1, "", out, sizeof out);
    assert_string_equal(out, "running");
    gs_taskstate_describe('S', SYS_futex, "", out, sizeof out);
    assert_non_null(strstr(out, "futex"));
    gs_taskstate_describe('S', SYS_read, "pipe_read", out, sizeof out);
    assert_string_equal(out, "in I/O: read");
    gs_taskstate_describe('D', -1, "io_schedule", out, sizeof out);
    assert_non_null(strstr(out, "uninterruptible"));
    gs_taskstate_describe('S', -1, "futex_wait_queue", out, sizeof out);
    assert_non_null(strstr(out, "futex"));
    gs_taskstate_describe('Z', -1, "", out, sizeof out);
    assert_string_equal(out, "exited");
}

static void test_mem_self(void **state)
{
    struct gs_mem m;
    uint64_t v = 0x1122334455667788ull, got = 0;
    (void)state;

    assert_int_equal(gs_mem_init_self(&m, NULL), GS_OK);
    assert_int_equal(gs_mem_read(&m, (uint64_t)(uintptr_t)&v, &got, sizeof got), GS_OK);
    assert_true(got == v);
    assert_int_equal(gs_mem_read(&m, 8, &got, sizeof got), GS_EIO); /* never faults */
    gs_mem_fini(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_walk_every_layout), cmocka_unit_test(test_torn_and_cyclic),
        cmocka_unit_test(test_new_refuses),       cmocka_unit_test(test_addr2line),
        cmocka_unit_test(test_debug_offsets),     cmocka_unit_test(test_profile),
        cmocka_unit_test(test_taskstate),         cmocka_unit_test(test_mem_self),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
