/*
 * auth.h - who an HTTP request is (issue 5, docs/security.md "HTTP VIEWERS"): the tokens file,
 * the Prometheus exporter-toolkit web.config.file (TLS files and bcrypt basic-auth users), and
 * the token generator behind `gpuscope agent --new-token`.
 *
 * Tokens file, one entry a line, `#` starts a comment:
 *
 *     sha256:<64 hex digits> admin|viewer|metrics [user]
 *
 * The token itself (32 random bytes, base64url, 43 characters) is never stored; a request
 * shows it as `Authorization: Bearer <token>` and its SHA-256 is compared with every entry in
 * constant time. Basic-auth users of the web config are viewers named by their user name;
 * admins use tokens.
 *
 * Threads: a struct gs_auth is immutable after gs_auth_open except its bcrypt cache, which
 * has its own mutex, so several HTTP threads may call gs_auth_identify at once. A SIGHUP
 * builds a new one; references (gs_auth_ref/gs_auth_unref) keep the old one alive for
 * requests still using it.
 */
#ifndef GS_AGENT_AUTH_H
#define GS_AGENT_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "agent/viewer.h"

struct gs_err;
struct MHD_Connection;

struct gs_auth;

#define GS_AUTH_TOKEN_LEN 43      /* base64url of 32 bytes, no padding */
#define GS_AUTH_BCRYPT_TTL_S 60   /* a successful basic-auth check is remembered this long */
#define GS_AUTH_BCRYPT_PER_S 8    /* uncached bcrypt checks per second, all clients together */
#define GS_AUTH_FAIL_SRC_PER_S 1  /* failed basic-auth checks per second from one source */
#define GS_AUTH_FAIL_USER_PER_S 2 /* failed basic-auth checks per second for one user name */
#define GS_AUTH_FAIL_BURST 4      /* failures at once from one source */
#define GS_AUTH_FAIL_USER_BURST 8 /* failures at once for one user name (> one source's) */

/* Reads the tokens file and the web config (either path may be NULL or "": not used).
 * No file at all: *out is an auth that lets everyone in as a viewer. Errors GS_EIO (cannot
 * read), GS_EINVAL "FILE:LINE: why"; *out untouched on failure. The result has one
 * reference. */
int gs_auth_open(struct gs_auth **out, const char *tokens_file, const char *web_config_file,
                 struct gs_err *err);

/* An auth from texts instead of files (names are for messages); what the tests and the fuzz
 * targets drive. Either text may be NULL. base_dir resolves the web config's relative
 * cert_file/key_file ("" or NULL: as given). */
int gs_auth_from_text(struct gs_auth **out, const char *tokens_name, const char *tokens,
                      size_t tokens_len, const char *web_name, const char *web, size_t web_len,
                      const char *base_dir, struct gs_err *err);

/* The rule for a credential file (tokens file, web config, TLS key; docs/security.md
 * "CREDENTIAL FILES"), on the opened file fd (so a symlink's target): a regular file, not
 * writable by group or others, owned by root or the agent's (real or effective) uid.
 * GS_EPERM naming path and the fault. */
int gs_auth_check_secret(int fd, const char *path, struct gs_err *err);

void gs_auth_ref(struct gs_auth *au);
void gs_auth_unref(struct gs_auth *au); /* frees on the last; NULL is fine */

/* Whether any credential is configured (tokens or basic-auth users). */
bool gs_auth_required(const struct gs_auth *au);
unsigned gs_auth_token_count(const struct gs_auth *au);
unsigned gs_auth_user_count(const struct gs_auth *au);

/* The web config's TLS files ("" when it names none). */
const char *gs_auth_tls_cert_file(const struct gs_auth *au);
const char *gs_auth_tls_key_file(const struct gs_auth *au);

/* The TLS versions to offer, 10 (TLS 1.0) .. 13 (TLS 1.3): the web config's
 * min_version/max_version, else 12 and 13 (docs/security.md, "TLS"). */
void gs_auth_tls_versions(const struct gs_auth *au, int *min, int *max);

/* The WWW-Authenticate value for a 401: `Bearer realm="gpuscope"`, or Basic when only
 * basic-auth users are configured. */
const char *gs_auth_challenge(const struct gs_auth *au);

/* Identifies one request by its Authorization header value (NULL: none). No credential
 * configured: GS_ROLE_VIEWER, uid unknown. Good Bearer token or basic-auth user: that role
 * and user. Else GS_ROLE_NONE. Always fills *out (via = TCP); returns out->role. */
enum gs_role gs_auth_check(const struct gs_auth *au, const char *authorization,
                           struct gs_viewer *out);

/* gs_auth_check from the source src (NULL: unknown, one shared budget): the cache is keyed by
 * src and the decoded credentials; a basic-auth check missing it needs the global bcrypt
 * budget (GS_AUTH_BCRYPT_PER_S), the failure budget of src (an IPv4 address or IPv6 /64) and,
 * when src has failed lately, the user name's; a failure is charged to both, a success to
 * neither, so attackers lock out their own sources, never the user's (docs/security.md). */
enum gs_role gs_auth_check_from(const struct gs_auth *au, const char *authorization,
                                const struct sockaddr *src, struct gs_viewer *out);

/* gs_auth_check on the connection's Authorization header (au NULL: as no credential). A
 * unix-socket peer is a viewer without credentials, via GS_VIA_UNIX (policy.c knows it by
 * SO_PEERCRED). Returns out->role. */
int gs_auth_identify(const struct gs_auth *au, struct MHD_Connection *c, struct gs_viewer *out);

/* "admin", "viewer", "metrics" <-> the role; gs_auth_role_parse returns GS_ROLE_NONE for
 * another name. */
/* Basic-auth attempts refused unchecked by the failure or bcrypt budgets since the start
 * (gpuscope_refused_total{reason="auth_budget"}). */
uint64_t gs_auth_budget_refused(void);

const char *gs_auth_role_name(enum gs_role role);
enum gs_role gs_auth_role_parse(const char *name);

/* Makes a new random token (token: GS_AUTH_TOKEN_LEN + 1 bytes) and the tokens-file line
 * that admits it for role and user (user may be NULL or ""). GS_EINVAL for a bad role or
 * user name (letters, digits, ._-@, at most 63 bytes), GS_EIO when no randomness. */
int gs_auth_new_token(enum gs_role role, const char *user, char *token, char *line, size_t line_len,
                      struct gs_err *err);

/* The SHA-256 of a text as 64 lowercase hex digits (hex: 65 bytes). */
void gs_auth_sha256_hex(const char *text, size_t len, char *hex);

/* Constant-time comparison of n bytes: 1 when equal. */
int gs_auth_equal(const unsigned char *a, const unsigned char *b, size_t n);

#endif
