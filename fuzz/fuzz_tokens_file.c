/*
 * libFuzzer target for the HTTP viewers' tokens file and Authorization header
 * (src/agent/auth.c): gs_auth_from_text on the input as a tokens file (hex hashes, roles,
 * user names, comments, CR/LF, NUL bytes), then gs_auth_check on the input as an
 * Authorization value against that auth and against a fixed one with a token and a
 * cost-4 bcrypt basic-auth user (Bearer/Basic schemes, base64, the user:password split, the
 * bcrypt cache). A failed parse must leave a "tokens:LINE: ..." message; a check must give a
 * known role, and a role other than NONE only for the token or password it was made for.
 *
 * Input: the file's text; seeds in fuzz/corpus/tokens_file/. Build and run: make fuzz.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/auth.h"
#include "agent/log.h"
#include "gpuscope/gs_err.h"

#include "fuzz_util.h"

/* sha256("fuzz-token") as a tokens line, and bob:hunter2 at cost 4. */
static const char FIXED_TOKENS[] =
    "sha256:33cc09ba35314d19e32ed9a5a30fca56eebbfab5faec7247fd0403cd26e155b5 viewer alice\n";
static const char FIXED_WEB[] =
    "basic_auth_users:\n  bob: $2b$04$Ro0CUfOqk6cmST6iqSISAOaRx7EYehQY9LxjR0EI/5VYue534yXMO\n";

static struct gs_auth *fixed;

static void check_viewer(enum gs_role r, const struct gs_viewer *v)
{
    CHECK(r == GS_ROLE_NONE || r == GS_ROLE_METRICS || r == GS_ROLE_VIEWER || r == GS_ROLE_ADMIN);
    CHECK(v->role == r);
    CHECK(memchr(v->user, '\0', sizeof v->user) != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gs_auth *au = NULL;
    struct gs_viewer v;
    struct gs_err err = {0};
    char *text;
    enum gs_role r;

    if (!fixed) {
        gs_log_set_level(GS_LOG_ERROR);
        CHECK(gs_auth_from_text(&fixed, "fixed", FIXED_TOKENS, sizeof FIXED_TOKENS - 1, "web",
                                FIXED_WEB, sizeof FIXED_WEB - 1, NULL, &err) == GS_OK);
    }
    if (!(text = gs_fuzz_dup_text(data, size)))
        return 0;
    if (gs_auth_from_text(&au, "tokens", text, size, NULL, NULL, 0, NULL, &err) != GS_OK) {
        CHECK(err.rc == GS_EINVAL || err.rc == GS_ENOMEM);
        CHECK(memchr(err.msg, '\0', sizeof err.msg) != NULL);
        CHECK(strncmp(err.msg, "tokens", 6) == 0);
    } else {
        CHECK(gs_auth_required(au) == (gs_auth_token_count(au) > 0));
        r = gs_auth_check(au, text, &v);
        check_viewer(r, &v);
        if (!gs_auth_required(au))
            CHECK(r == GS_ROLE_VIEWER);
        gs_auth_unref(au);
    }
    r = gs_auth_check(fixed, text, &v);
    check_viewer(r, &v);
    CHECK(r == GS_ROLE_NONE || r == GS_ROLE_VIEWER);
    if (r == GS_ROLE_VIEWER)
        CHECK(strcmp(v.user, "alice") == 0 || strcmp(v.user, "bob") == 0);
    free(text);
    return 0;
}
