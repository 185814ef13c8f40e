/*
 * libFuzzer target for the exporter-toolkit web config (src/agent/auth.c, libyaml):
 * gs_auth_from_text on the input as YAML (tls_server_config with relative and absolute
 * paths, client_auth_type, ignored keys, basic_auth_users with bcrypt hashes, anchors and
 * aliases, flow and block styles, broken documents). A failed parse must leave a
 * "web.yml:LINE: ..." message; a successful one terminated TLS file names that come in pairs
 * and users only with well-formed hashes (checked by one Basic header that names none of
 * them, so no bcrypt runs).
 *
 * Input: the YAML text; seeds in fuzz/corpus/web_config/. Build and run: make fuzz.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/auth.h"
#include "agent/log.h"
#include "gpuscope/gs_err.h"

#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gs_auth *au = NULL;
    struct gs_err err = {0};
    struct gs_viewer v;
    const char *cert, *key;

    gs_log_set_level(GS_LOG_ERROR); /* ignored-key warnings */
    if (gs_auth_from_text(&au, NULL, NULL, 0, "web.yml", (const char *)data, size, "/etc/gs",
                          &err) != GS_OK) {
        CHECK(err.rc == GS_EINVAL || err.rc == GS_ENOMEM);
        CHECK(memchr(err.msg, '\0', sizeof err.msg) != NULL);
        CHECK(strncmp(err.msg, "web.yml", 7) == 0);
        return 0;
    }
    cert = gs_auth_tls_cert_file(au);
    key = gs_auth_tls_key_file(au);
    CHECK(!cert[0] == !key[0]);
    CHECK(!cert[0] || cert[0] == '/');
    CHECK(gs_auth_required(au) == (gs_auth_user_count(au) > 0));
    /* "\x01:x" is no user name the parser accepts: never a bcrypt, always NONE. */
    CHECK(gs_auth_check(au, "Basic ATp4", &v) ==
          (gs_auth_required(au) ? GS_ROLE_NONE : GS_ROLE_VIEWER));
    gs_auth_unref(au);
    return 0;
}
