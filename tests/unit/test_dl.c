/*
 * Unit tests for src/base/dl.c, the run-time loader with a table of required functions: a
 * library that exists (zlib), one that does not, a missing symbol (the table stays untouched:
 * all or nothing), a fallback candidate and the environment override.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "base/dl.h"

struct zapi {
    const char *(*zlibVersion)(void);
    unsigned long (*crc32)(unsigned long crc, const unsigned char *buf, unsigned len);
    int (*missing)(void);
};

static const struct gs_dl_sym zsyms[] = {
    GS_DL_SYM(struct zapi, zlibVersion, "zlibVersion"),
    GS_DL_SYM(struct zapi, crc32, "crc32"),
};
static const struct gs_dl_sym zsyms_missing[] = {
    GS_DL_SYM(struct zapi, zlibVersion, "zlibVersion"),
    GS_DL_SYM(struct zapi, missing, "gs_no_such_symbol"),
};
static const char *const libz[] = {"libz.so.1", NULL};

static void loads_zlib(void **state)
{
    const struct gs_dl_lib lib = {NULL, libz, zsyms, 2};
    struct zapi z = {0};
    char why[256] = "";
    void *h;

    (void)state;
    h = gs_dl_open(&lib, &z, why, sizeof why);
    assert_non_null(h);
    assert_string_equal(why, "");
    assert_non_null(z.zlibVersion);
    assert_int_equal(z.zlibVersion()[0], '1');
    /* crc32("123456789") is the check value of CRC-32 */
    assert_int_equal(z.crc32(0, (const unsigned char *)"123456789", 9), 0xCBF43926UL);
    assert_null(z.missing);
    gs_dl_close(h);
    gs_dl_close(NULL);
}

static void missing_library(void **state)
{
    static const char *const names[] = {"/nonexistent/libgs-nope.so.1", "libgs-nope-too.so", NULL};
    const struct gs_dl_lib lib = {NULL, names, zsyms, 2};
    struct zapi z, before;
    char why[256] = "";

    (void)state;
    memset(&z, 0x5a, sizeof z);
    before = z;
    assert_null(gs_dl_open(&lib, &z, why, sizeof why));
    /* the first candidate and the loader's reason */
    assert_non_null(strstr(why, "cannot load /nonexistent/libgs-nope.so.1 ("));
    assert_non_null(strstr(why, "libgs-nope.so.1"));
    assert_memory_equal(&z, &before, sizeof z);
}

static void missing_symbol_leaves_the_table(void **state)
{
    const struct gs_dl_lib lib = {NULL, libz, zsyms_missing, 2};
    struct zapi z = {0};
    char why[256] = "";

    (void)state;
    assert_null(gs_dl_open(&lib, &z, why, sizeof why));
    assert_string_equal(why, "libz.so.1 has no gs_no_such_symbol");
    assert_null(z.zlibVersion); /* found, but not written: all or nothing */
    assert_null(z.missing);
}

static void fallback_candidate(void **state)
{
    static const char *const names[] = {"/nonexistent/libz.so.1", "libz.so.1", NULL};
    const struct gs_dl_lib lib = {NULL, names, zsyms, 2};
    struct zapi z = {0};
    char why[256] = "";
    void *h;

    (void)state;
    h = gs_dl_open(&lib, &z, why, sizeof why);
    assert_non_null(h);
    assert_non_null(z.crc32);
    gs_dl_close(h);
}

static void environment_override(void **state)
{
    const struct gs_dl_lib lib = {"GS_TEST_DL_LIBRARY", libz, zsyms, 2};
    struct zapi z = {0};
    char why[256] = "";
    void *h;

    (void)state;
    setenv("GS_TEST_DL_LIBRARY", "/nonexistent/libz-elsewhere.so.1", 1);
    assert_null(gs_dl_open(&lib, &z, why, sizeof why));
    assert_non_null(strstr(why, "cannot load /nonexistent/libz-elsewhere.so.1"));
    assert_null(z.zlibVersion);
    setenv("GS_TEST_DL_LIBRARY", "", 1); /* empty: the candidates */
    h = gs_dl_open(&lib, &z, why, sizeof why);
    assert_non_null(h);
    gs_dl_close(h);
    unsetenv("GS_TEST_DL_LIBRARY");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(loads_zlib),
        cmocka_unit_test(missing_library),
        cmocka_unit_test(missing_symbol_leaves_the_table),
        cmocka_unit_test(fallback_candidate),
        cmocka_unit_test(environment_override),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
