/*
 * Unit tests of the HTTP viewers' credentials (src/agent/auth.c): tokens-file errors with
 * their line numbers, roles and users from Bearer tokens, the constant-time compare, the
 * exporter-toolkit web config (TLS files, bcrypt basic-auth users made here with crypt_rn and
 * a $2b$ setting), its errors, and --new-token's line admitting its token.
 */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <crypt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/auth.h"
#include "agent/log.h"
#include "gpuscope/gs_err.h"

static const char *TOK_A = "token-for-alice-0123456789";
static const char *TOK_M = "token-for-prometheus-xyz";
static const char *TOK_R = "token-for-root-admin";

static struct gs_auth *from_tokens(const char *text, struct gs_err *e)
{
    struct gs_auth *au = NULL;

    gs_err_clear(e);
    if (gs_auth_from_text(&au, "tokens", text, strlen(text), NULL, NULL, 0, NULL, e) != GS_OK)
        return NULL;
    return au;
}

static char *tokens_text(void)
{
    char ha[65], hm[65], hr[65];
    char *s = malloc(1024);

    gs_auth_sha256_hex(TOK_A, strlen(TOK_A), ha);
    gs_auth_sha256_hex(TOK_M, strlen(TOK_M), hm);
    gs_auth_sha256_hex(TOK_R, strlen(TOK_R), hr);
    snprintf(s, 1024,
             "# gpuscope tokens\n\n  sha256:%s viewer alice\n"
             "sha256:%s metrics   # prometheus\nsha256:%s admin root # ops\n",
             ha, hm, hr);
    return s;
}

static void test_sha256_and_equal(void **state)
{
    char hex[65];

    (void)state;
    gs_auth_sha256_hex("abc", 3, hex); /* FIPS 180-2 example */
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    assert_true(gs_auth_equal((const unsigned char *)"abcd", (const unsigned char *)"abcd", 4));
    assert_false(gs_auth_equal((const unsigned char *)"abcd", (const unsigned char *)"abce", 4));
    assert_false(gs_auth_equal((const unsigned char *)"xbcd", (const unsigned char *)"abcd", 4));
    assert_true(gs_auth_equal((const unsigned char *)"x", (const unsigned char *)"y", 0));
}

static void test_tokens_roles(void **state)
{
    char *text = tokens_text(), hdr[128];
    struct gs_err e;
    struct gs_auth *au = from_tokens(text, &e);
    struct gs_viewer v;

    (void)state;
    assert_non_null(au);
    assert_int_equal(gs_auth_token_count(au), 3);
    assert_true(gs_auth_required(au));
    assert_string_equal(gs_auth_challenge(au), "Bearer realm=\"gpuscope\"");

    snprintf(hdr, sizeof hdr, "Bearer %s", TOK_A);
    assert_int_equal(gs_auth_check(au, hdr, &v), GS_ROLE_VIEWER);
    assert_string_equal(v.user, "alice");
    assert_int_equal(v.via, GS_VIA_TCP);
    snprintf(hdr, sizeof hdr, "bearer   %s ", TOK_M); /* scheme case, spaces */
    assert_int_equal(gs_auth_check(au, hdr, &v), GS_ROLE_METRICS);
    assert_string_equal(v.user, "");
    assert_false(v.uid_known);
    snprintf(hdr, sizeof hdr, "Bearer %s", TOK_R);
    assert_int_equal(gs_auth_check(au, hdr, &v), GS_ROLE_ADMIN);
    assert_string_equal(v.user, "root");
    /* from_text does not look users up; gs_auth_open does (below). */
    assert_false(v.uid_known);

    /* Wrong, truncated, extended, missing, other scheme: no role, no user. */
    snprintf(hdr, sizeof hdr, "Bearer %.*s", (int)strlen(TOK_A) - 1, TOK_A);
    assert_int_equal(gs_auth_check(au, hdr, &v), GS_ROLE_NONE);
    snprintf(hdr, sizeof hdr, "Bearer %sx", TOK_A);
    assert_int_equal(gs_auth_check(au, hdr, &v), GS_ROLE_NONE);
    assert_string_equal(v.user, "");
    assert_int_equal(gs_auth_check(au, NULL, &v), GS_ROLE_NONE);
    assert_int_equal(gs_auth_check(au, "Bearer ", &v), GS_ROLE_NONE);
    assert_int_equal(gs_auth_check(au, TOK_A, &v), GS_ROLE_NONE);
    assert_int_equal(gs_auth_check(au, "Basic YWxpY2U6eA==", &v), GS_ROLE_NONE);
    gs_auth_unref(au);
    free(text);
}

static void test_no_auth_is_viewer(void **state)
{
    struct gs_err e;
    struct gs_auth *au = from_tokens("# nothing yet\n", &e);
    struct gs_viewer v;

    (void)state;
    assert_non_null(au);
    assert_false(gs_auth_required(au));
    assert_int_equal(gs_auth_check(au, NULL, &v), GS_ROLE_VIEWER);
    assert_false(v.uid_known);
    assert_int_equal(gs_auth_check(NULL, "Bearer whatever", &v), GS_ROLE_VIEWER);
    gs_auth_unref(au);
}

static void expect_error(const char *text, const char *want)
{
    struct gs_err e;
    struct gs_auth *au = from_tokens(text, &e);

    if (au || !strstr(e.msg, want))
        fail_msg("tokens %s: got '%s', want '%s'", au ? "accepted" : "refused", au ? "" : e.msg,
                 want);
    assert_int_equal(e.rc, GS_EINVAL);
}

static void test_tokens_errors(void **state)
{
    char good[65], dup[400], bad[400];

    (void)state;
    gs_auth_sha256_hex("x", 1, good);
    expect_error("sha256:abc viewer\n", "tokens:1: expected sha256:<64 hex digits>");
    snprintf(bad, sizeof bad, "# c\n\nmd5:%s viewer\n", good);
    expect_error(bad, "tokens:3: expected sha256:");
    snprintf(bad, sizeof bad, "sha256:%.63sg viewer\n", good);
    expect_error(bad, "tokens:1: sha256: not a hex digit");
    snprintf(bad, sizeof bad, "\n\nsha256:%s\n", good);
    expect_error(bad, "tokens:3: missing role");
    snprintf(bad, sizeof bad, "sha256:%s root\n", good);
    expect_error(bad, "tokens:1: unknown role 'root'");
    snprintf(bad, sizeof bad, "sha256:%s viewer bad/user\n", good);
    expect_error(bad, "tokens:1: bad user name");
    snprintf(bad, sizeof bad, "sha256:%s viewer alice extra\n", good);
    expect_error(bad, "tokens:1: unexpected text after the user name");
    snprintf(dup, sizeof dup, "sha256:%s viewer\n# again\nsha256:%s admin\n", good, good);
    expect_error(dup, "tokens:3: the same token hash is listed twice");
    expect_error("ok\0", "tokens:1:"); /* the NUL is beyond strlen: a plain bad line */
}

static void test_open_files_and_uid(void **state)
{
    char path[] = "/tmp/gs-test-auth-XXXXXX", hex[65], hdr[64];
    struct gs_auth *au = NULL;
    struct gs_viewer v;
    struct gs_err e;
    int fd = mkstemp(path);
    FILE *f;

    (void)state;
    assert_true(fd >= 0);
    f = fdopen(fd, "w");
    gs_auth_sha256_hex("rt", 2, hex);
    fprintf(f, "sha256:%s admin root\n", hex);
    fclose(f);
    gs_err_clear(&e);
    assert_int_equal(gs_auth_open(&au, path, NULL, &e), GS_OK);
    snprintf(hdr, sizeof hdr, "Bearer rt");
    assert_int_equal(gs_auth_check(au, hdr, &v), GS_ROLE_ADMIN);
    assert_true(v.uid_known); /* root exists everywhere: uid 0 */
    assert_int_equal(v.uid, 0);
    gs_auth_ref(au);
    gs_auth_unref(au);
    gs_auth_unref(au);
    unlink(path);
    gs_err_clear(&e);
    assert_int_equal(gs_auth_open(&au, path, NULL, &e), GS_EIO);
    assert_non_null(strstr(e.msg, "cannot open"));
}

/* A bcrypt hash of pass with a $2b$ setting at cost 4 (fast), made by libxcrypt. */
static void make_bcrypt(const char *pass, char *out, size_t len)
{
    char setting[CRYPT_GENSALT_OUTPUT_SIZE];
    struct crypt_data *cd = calloc(1, sizeof *cd);

    assert_non_null(crypt_gensalt_rn("$2b$", 4, NULL, 0, setting, sizeof setting));
    assert_non_null(crypt_rn(pass, setting, cd, (int)sizeof *cd));
    assert_int_equal(strncmp(cd->output, "$2b$04$", 7), 0);
    assert_int_equal(strlen(cd->output), 60);
    assert_true(len > 60);
    memcpy(out, cd->output, 61); /* 60 characters and the NUL */
    free(cd);
}

/* min_version/max_version are honoured (issue 18): TLS 1.2 and 1.3 by default, the web
 * config's range otherwise, bad values and an inverted range refused. */
static void test_web_config_tls_versions(void **state)
{
    static const char *const bad[] = {
        "tls_server_config:\n  min_version: TLS14\n",
        "tls_server_config:\n  min_version: tls12\n",
        "tls_server_config:\n  max_version: 1.2\n",
        "tls_server_config:\n  min_version: TLS13\n  max_version: TLS12\n",
    };
    const char *y13 = "tls_server_config:\n  min_version: TLS13\n";
    const char *y11 = "tls_server_config:\n  min_version: TLS11\n  max_version: TLS12\n";
    struct gs_auth *au = NULL;
    struct gs_err e;
    int mn, mx;

    (void)state;
    gs_auth_tls_versions(NULL, &mn, &mx);
    assert_int_equal(mn, 12);
    assert_int_equal(mx, 13);
    gs_err_clear(&e);
    assert_int_equal(gs_auth_from_text(&au, NULL, NULL, 0, "web.yml", y13, strlen(y13), "", &e),
                     GS_OK);
    gs_auth_tls_versions(au, &mn, &mx);
    assert_int_equal(mn, 13);
    assert_int_equal(mx, 13);
    gs_auth_unref(au);
    assert_int_equal(gs_auth_from_text(&au, NULL, NULL, 0, "web.yml", y11, strlen(y11), "", &e),
                     GS_OK);
    gs_auth_tls_versions(au, &mn, &mx);
    assert_int_equal(mn, 11);
    assert_int_equal(mx, 12);
    gs_auth_unref(au);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        au = NULL;
        gs_err_clear(&e);
        assert_int_not_equal(
            gs_auth_from_text(&au, NULL, NULL, 0, "web.yml", bad[i], strlen(bad[i]), "", &e),
            GS_OK);
        assert_non_null(strstr(e.msg, "web.yml:"));
        assert_null(au);
    }
}

static struct sockaddr_in from4(unsigned last)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(0x0a000000u | last); /* 10.0.0.last */
    return sa;
}

/* basic_from's header with blanks trailing blanks (a client's padding) on src. */
static enum gs_role basic_from_pad(const struct gs_auth *au, const char *user, const char *pass,
                                   unsigned src, unsigned blanks)
{
    char plain[128], hdr[256];
    struct gs_viewer v;
    struct sockaddr_in sa = from4(src);
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t n = (size_t)snprintf(plain, sizeof plain, "%s:%s", user, pass), o = 6;

    memcpy(hdr, "Basic ", 6);
    for (size_t i = 0; i < n; i += 3) {
        unsigned x = (unsigned)(unsigned char)plain[i] << 16 |
                     (i + 1 < n ? (unsigned)(unsigned char)plain[i + 1] << 8 : 0) |
                     (i + 2 < n ? (unsigned char)plain[i + 2] : 0);
        hdr[o++] = b64[x >> 18 & 63];
        hdr[o++] = b64[x >> 12 & 63];
        hdr[o++] = i + 1 < n ? b64[x >> 6 & 63] : '=';
        hdr[o++] = i + 2 < n ? b64[x & 63] : '=';
    }
    while (blanks-- > 0 && o + 1 < sizeof hdr)
        hdr[o++] = ' ';
    hdr[o] = '\0';
    return gs_auth_check_from(au, hdr, (const struct sockaddr *)&sa, &v);
}

static enum gs_role basic_from(const struct gs_auth *au, const char *user, const char *pass,
                               unsigned src)
{
    return basic_from_pad(au, user, pass, src, 0);
}

/* Failed basic-auth checks are budgeted per source and per user name (issue 18): one
 * attacker's 40 wrong passwords at once leave other sources' first logins (cache misses)
 * working; its own source is held back; wrong passwords for one name from many sources hold
 * that name back. */
static void test_basic_auth_budgets(void **state)
{
    char hash[64], yaml[1024];
    struct gs_auth *au = NULL;
    struct gs_err e;
    unsigned ok = 0;

    (void)state;
    make_bcrypt("pw", hash, sizeof hash);
    snprintf(yaml, sizeof yaml,
             "basic_auth_users:\n  alice: %s\n  bob: %s\n  carol: %s\n  dave: %s\n"
             "  erin: %s\n",
             hash, hash, hash, hash, hash);
    gs_err_clear(&e);
    assert_int_equal(gs_auth_from_text(&au, NULL, NULL, 0, "web.yml", yaml, strlen(yaml), "", &e),
                     GS_OK);
    for (int i = 0; i < 40; i++)
        assert_int_equal(basic_from(au, "alice", "guess", 1), GS_ROLE_NONE);
    ok += basic_from(au, "alice", "pw", 2) == GS_ROLE_VIEWER;
    ok += basic_from(au, "bob", "pw", 3) == GS_ROLE_VIEWER;
    ok += basic_from(au, "carol", "pw", 4) == GS_ROLE_VIEWER;
    ok += basic_from(au, "dave", "pw", 5) == GS_ROLE_VIEWER;
    assert_int_equal(ok, 4);
    /* The attacker's own source is out of failures: even a right password waits. */
    assert_int_equal(basic_from(au, "erin", "pw", 1), GS_ROLE_NONE);
    /* One name guessed from many sources: the name's budget (burst 8) runs out for those
     * sources, not for the user's own (issue 24: a lockout hits the attacking sources). */
    for (unsigned s = 10; s < 18; s++)
        assert_int_equal(basic_from(au, "erin", "guess", s), GS_ROLE_NONE);
    assert_int_equal(basic_from(au, "erin", "pw", 10), GS_ROLE_NONE);
    nanosleep(&(struct timespec){0, 300000000}, NULL); /* the bcrypt budget (8/s) refills */
    assert_int_equal(basic_from(au, "erin", "pw", 30), GS_ROLE_VIEWER);
    gs_auth_unref(au);
}

/* Issue 24: four sources guessing one name as fast as they can (10 each per 0.3 s) leave
 * that user's fresh logins from its own sources working (each a cache miss: a new source),
 * and the cache is keyed by source and decoded credentials, so trailing blanks reuse it:
 * 30 logins with 0..29 blanks within one bcrypt budget (8/s) all pass. */
static void test_basic_auth_lockout_by_source(void **state)
{
    char hash[64], yaml[256];
    struct gs_auth *au = NULL;
    struct gs_err e;
    unsigned ok = 0;

    (void)state;
    make_bcrypt("pw", hash, sizeof hash);
    snprintf(yaml, sizeof yaml, "basic_auth_users:\n  bob: %s\n", hash);
    gs_err_clear(&e);
    assert_int_equal(gs_auth_from_text(&au, NULL, NULL, 0, "web.yml", yaml, strlen(yaml), "", &e),
                     GS_OK);
    for (unsigned round = 0; round < 6; round++) {
        for (unsigned s = 1; s <= 4; s++)
            for (int i = 0; i < 10; i++)
                assert_int_equal(basic_from(au, "bob", "guess", s), GS_ROLE_NONE);
        nanosleep(&(struct timespec){0, 300000000}, NULL); /* the bcrypt budget refills */
        ok += basic_from(au, "bob", "pw", 100 + round) == GS_ROLE_VIEWER;
    }
    assert_int_equal(ok, 6);
    assert_int_equal(basic_from(au, "bob", "pw", 1), GS_ROLE_NONE); /* an attacker's source */
    nanosleep(&(struct timespec){0, 300000000}, NULL); /* the first login below needs one */
    for (unsigned blanks = 0; blanks < 30; blanks++)
        assert_int_equal(basic_from_pad(au, "bob", "pw", 200, blanks), GS_ROLE_VIEWER);
    gs_auth_unref(au);
}

static void test_web_config_basic(void **state)
{
    char hash[64], yaml[512];
    struct gs_auth *au = NULL;
    struct gs_viewer v;
    struct gs_err e;

    (void)state;
    make_bcrypt("s3cret", hash, sizeof hash);
    snprintf(yaml, sizeof yaml,
             "# exporter-toolkit\ntls_server_config:\n  cert_file: tls/server.crt\n"
             "  key_file: /etc/k.pem\n  client_auth_type: NoClientCert\n"
             "basic_auth_users:\n  alice: '%s'\n  bob: %s\n",
             hash, hash);
    gs_err_clear(&e);
    assert_int_equal(
        gs_auth_from_text(&au, NULL, NULL, 0, "web.yml", yaml, strlen(yaml), "/etc/gpuscope", &e),
        GS_OK);
    assert_string_equal(gs_auth_tls_cert_file(au), "/etc/gpuscope/tls/server.crt");
    assert_string_equal(gs_auth_tls_key_file(au), "/etc/k.pem");
    assert_int_equal(gs_auth_user_count(au), 2);
    assert_string_equal(gs_auth_challenge(au), "Basic realm=\"gpuscope\", charset=\"UTF-8\"");
    /* alice:s3cret, alice:wrong, carol:s3cret, bob:s3cret */
    assert_int_equal(gs_auth_check(au, "Basic YWxpY2U6czNjcmV0", &v), GS_ROLE_VIEWER);
    assert_string_equal(v.user, "alice");
    /* Again: from the cache (same result). */
    assert_int_equal(gs_auth_check(au, "Basic YWxpY2U6czNjcmV0", &v), GS_ROLE_VIEWER);
    assert_string_equal(v.user, "alice");
    assert_int_equal(gs_auth_check(au, "Basic YWxpY2U6d3Jvbmc=", &v), GS_ROLE_NONE);
    assert_int_equal(gs_auth_check(au, "Basic Y2Fyb2w6czNjcmV0", &v), GS_ROLE_NONE);
    assert_int_equal(gs_auth_check(au, "Basic Ym9iOnMzY3JldA==", &v), GS_ROLE_VIEWER);
    assert_string_equal(v.user, "bob");
    assert_int_equal(gs_auth_check(au, "Basic !!!", &v), GS_ROLE_NONE);
    assert_int_equal(gs_auth_check(au, "Bearer s3cret", &v), GS_ROLE_NONE);
    gs_auth_unref(au);
}

static void expect_web_error(const char *yaml, const char *want)
{
    struct gs_auth *au = NULL;
    struct gs_err e;

    gs_err_clear(&e);
    if (gs_auth_from_text(&au, NULL, NULL, 0, "web.yml", yaml, strlen(yaml), NULL, &e) == GS_OK ||
        !strstr(e.msg, want))
        fail_msg("web config: got '%s', want '%s'", e.msg, want);
}

static void test_web_config_errors(void **state)
{
    struct gs_auth *au = NULL;
    struct gs_err e;

    (void)state;
    expect_web_error("tls_server_config:\n  cert_file: a\n", "web.yml:2:");
    expect_web_error("tls_server_config:\n  cert_file: a\n", "cert_file and key_file go together");
    expect_web_error("\nbasic_auth_users:\n  alice: notahash\n",
                     "web.yml:3: basic_auth_users: expected a bcrypt hash");
    expect_web_error("basic_auth_users:\n  'a b': "
                     "$2y$10$abcdefghijklmnopqrstuuABCDEFGHIJKLMNOPQRSTUVWXYZ01234\n",
                     "web.yml:2: basic_auth_users: bad user name");
    /* A cost of 31 would take hours per check: refused. */
    expect_web_error("basic_auth_users:\n  a: "
                     "$2y$31$abcdefghijklmnopqrstuuABCDEFGHIJKLMNOPQRSTUVWXYZ01234\n",
                     "web.yml:2: basic_auth_users: expected a bcrypt hash");
    expect_web_error("tls_server_config:\n  client_auth_type: RequireAndVerifyClientCert\n",
                     "web.yml:2: client_auth_type: only NoClientCert");
    expect_web_error("foo: 1\n", "web.yml:1: foo: unknown key");
    expect_web_error("tls_server_config:\n  cert_fil: x\n",
                     "web.yml:2: tls_server_config: unknown");
    expect_web_error("- a\n- b\n", "web.yml:1: web config: expected a mapping");
    expect_web_error("a: [\n", "web.yml:2:"); /* libyaml's own message, its line */
    /* Empty and null are fine: no TLS, no users. */
    gs_err_clear(&e);
    assert_int_equal(gs_auth_from_text(&au, NULL, NULL, 0, "web.yml", "", 0, NULL, &e), GS_OK);
    assert_false(gs_auth_required(au));
    assert_string_equal(gs_auth_tls_cert_file(au), "");
    gs_auth_unref(au);
    assert_int_equal(gs_auth_from_text(&au, NULL, NULL, 0, "web.yml",
                                       "basic_auth_users:\ntls_server_config: ~\n", 39, NULL, &e),
                     GS_OK);
    gs_auth_unref(au);
}

static void test_new_token(void **state)
{
    char tok[GS_AUTH_TOKEN_LEN + 1], tok2[GS_AUTH_TOKEN_LEN + 1], line[200], hdr[80];
    struct gs_auth *au;
    struct gs_viewer v;
    struct gs_err e;

    (void)state;
    gs_err_clear(&e);
    assert_int_equal(gs_auth_new_token(GS_ROLE_METRICS, "prometheus", tok, line, sizeof line, &e),
                     GS_OK);
    assert_int_equal(strlen(tok), GS_AUTH_TOKEN_LEN);
    assert_int_equal(
        strspn(tok, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"),
        GS_AUTH_TOKEN_LEN);
    assert_int_equal(strncmp(line, "sha256:", 7), 0);
    assert_non_null(strstr(line, " metrics prometheus"));
    au = from_tokens(line, &e);
    assert_non_null(au);
    snprintf(hdr, sizeof hdr, "Bearer %s", tok);
    assert_int_equal(gs_auth_check(au, hdr, &v), GS_ROLE_METRICS);
    assert_string_equal(v.user, "prometheus");
    gs_auth_unref(au);
    assert_int_equal(gs_auth_new_token(GS_ROLE_ADMIN, NULL, tok2, line, sizeof line, &e), GS_OK);
    assert_string_not_equal(tok, tok2);
    assert_int_equal(gs_auth_new_token(GS_ROLE_NONE, NULL, tok2, line, sizeof line, &e), GS_EINVAL);
    assert_int_equal(gs_auth_new_token(GS_ROLE_ADMIN, "a b", tok2, line, sizeof line, &e),
                     GS_EINVAL);
    assert_int_equal(gs_auth_role_parse("metrics"), GS_ROLE_METRICS);
    assert_int_equal(gs_auth_role_parse("Admin"), GS_ROLE_NONE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256_and_equal),
        cmocka_unit_test(test_tokens_roles),
        cmocka_unit_test(test_no_auth_is_viewer),
        cmocka_unit_test(test_tokens_errors),
        cmocka_unit_test(test_open_files_and_uid),
        cmocka_unit_test(test_web_config_basic),
        cmocka_unit_test(test_web_config_tls_versions),
        cmocka_unit_test(test_basic_auth_budgets),
        cmocka_unit_test(test_web_config_errors),
        cmocka_unit_test(test_new_token),
        cmocka_unit_test(test_basic_auth_lockout_by_source),
    };
    gs_log_set_level(GS_LOG_ERROR); /* the ignored-key warnings are expected */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
