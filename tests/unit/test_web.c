/*
 * Unit tests of the dashboard's serving table (src/agent/web.c and the generated
 * web_assets.c): every page file is embedded with its type and a gzip copy that inflates to
 * the same bytes, and Accept-Encoding is read the way RFC 9110 says (q=0 refuses, "*" counts,
 * case and spaces do not matter).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <cmocka.h>

#include "agent/web.h"

static void test_assets_present(void **state)
{
    static const char *const want[][2] = {
        {"/", "text/html"},
        {"/assets/app.js", "text/javascript"},
        {"/assets/format.js", "text/javascript"},
        {"/assets/style.css", "text/css"},
        {"/assets/uPlot.iife.min.js", "text/javascript"},
        {"/assets/uPlot.min.css", "text/css"},
        {"/assets/favicon.svg", "image/svg+xml"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const struct gs_web_asset *a = gs_web_find(want[i][0]);
        assert_non_null(a);
        assert_int_equal(strncmp(a->type, want[i][1], strlen(want[i][1])), 0);
        assert_true(a->len > 0 && a->gz_len > 0);
        assert_true(a->etag[0] == '"' && a->etag[strlen(a->etag) - 1] == '"');
    }
    assert_null(gs_web_find("/assets/"));
    assert_null(gs_web_find("/assets/../index.html"));
    assert_null(gs_web_find("/index.html"));
    assert_null(gs_web_find("/metrics"));
}

static void test_gzip_copies_inflate(void **state)
{
    (void)state;
    for (size_t i = 0; i < gs_web_n_assets; i++) {
        const struct gs_web_asset *a = &gs_web_assets[i];
        unsigned char *out = malloc(a->len + 1);
        z_stream zs;

        assert_non_null(out);
        memset(&zs, 0, sizeof zs);
        assert_int_equal(inflateInit2(&zs, 16 + MAX_WBITS), Z_OK);
        zs.next_in = (unsigned char *)a->gz;
        zs.avail_in = (unsigned)a->gz_len;
        zs.next_out = out;
        zs.avail_out = (unsigned)a->len + 1;
        assert_int_equal(inflate(&zs, Z_FINISH), Z_STREAM_END);
        assert_int_equal(zs.total_out, a->len);
        assert_memory_equal(out, a->data, a->len);
        inflateEnd(&zs);
        free(out);
        /* Worth serving: text compresses. */
        if (a->len > 1000)
            assert_true(a->gz_len < a->len / 2);
    }
}

static void test_page_loads_only_same_origin(void **state)
{
    const struct gs_web_asset *a = gs_web_find("/");
    char *html;

    (void)state;
    html = calloc(1, a->len + 1);
    assert_non_null(html);
    memcpy(html, a->data, a->len);
    assert_non_null(strstr(html, "src=\"/assets/app.js\""));
    assert_non_null(strstr(html, "href=\"/assets/uPlot.min.css\""));
    assert_null(strstr(html, "<style"));
    assert_null(strstr(html, "http://"));
    assert_null(strstr(html, "https://"));
    free(html);
}

static void test_accept_encoding(void **state)
{
    (void)state;
    assert_false(gs_web_accepts_gzip(NULL));
    assert_false(gs_web_accepts_gzip(""));
    assert_true(gs_web_accepts_gzip("gzip"));
    assert_true(gs_web_accepts_gzip("gzip, deflate, br, zstd"));
    assert_true(gs_web_accepts_gzip("br;q=1.0, GZIP;q=0.5"));
    assert_true(gs_web_accepts_gzip("  deflate ,  gzip  "));
    assert_false(gs_web_accepts_gzip("gzip;q=0"));
    assert_false(gs_web_accepts_gzip("gzip; q=0.000"));
    assert_false(gs_web_accepts_gzip("deflate, br"));
    assert_false(gs_web_accepts_gzip("x-gzip2, gzipper"));
    assert_true(gs_web_accepts_gzip("*"));
    assert_true(gs_web_accepts_gzip("br, *;q=0.1"));
    assert_false(gs_web_accepts_gzip("*;q=0"));
    /* An explicit gzip wins over "*". */
    assert_false(gs_web_accepts_gzip("*, gzip;q=0"));
    assert_true(gs_web_accepts_gzip("*;q=0, gzip"));
    assert_true(gs_web_accepts_gzip("identity;q=1, gzip;q=0.001"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_assets_present),
        cmocka_unit_test(test_gzip_copies_inflate),
        cmocka_unit_test(test_page_loads_only_same_origin),
        cmocka_unit_test(test_accept_encoding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
