/*
 * Credentials of HTTP viewers (auth.h): the tokens file, the exporter-toolkit web config's
 * basic-auth users and TLS files, and the check each request goes through. Bearer tokens are
 * compared by their SHA-256 (GnuTLS) against every entry in constant time, so neither the
 * token nor which entry matched shows in the timing. bcrypt (libcrypt's crypt_rn) is slow by
 * design: a successful basic-auth check is remembered for GS_AUTH_BCRYPT_TTL_S keyed by the
 * SHA-256 of its source and decoded credentials (so blanks or base64 padding around the same
 * credentials reuse it), and uncached checks share a small per-second budget so wrong
 * passwords cannot keep the HTTP thread busy.
 */
#include "agent/auth.h"

#include <arpa/inet.h>
#include <crypt.h>
#include <errno.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <pthread.h>
#include <pwd.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <yaml.h>

#include "agent/auth_int.h"
#include "agent/log.h"
#include "base/clock.h"
#include "gpuscope/gs_err.h"

/* Basic-auth checks refused by a budget since the start (every gs_auth: reloads too). */
static atomic_uint_least64_t budget_refused;

uint64_t gs_auth_budget_refused(void)
{
    return atomic_load(&budget_refused);
}

/* ---- small pieces ---- */

int gs_auth_equal(const unsigned char *a, const unsigned char *b, size_t n)
{
    unsigned char d = 0;

    for (size_t i = 0; i < n; i++)
        d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
}

void gs_auth_sha256(const void *text, size_t len, unsigned char out[32])
{
    if (gnutls_hash_fast(GNUTLS_DIG_SHA256, text, len, out) != 0)
        memset(out, 0, 32); /* cannot happen with SHA-256; an all-zero hash matches nothing */
}

void gs_auth_sha256_hex(const char *text, size_t len, char *hex)
{
    static const char digits[] = "0123456789abcdef";
    unsigned char h[32];

    gs_auth_sha256(text, len, h);
    for (int i = 0; i < 32; i++) {
        hex[2 * i] = digits[h[i] >> 4];
        hex[2 * i + 1] = digits[h[i] & 15];
    }
    hex[64] = '\0';
}

int gs_auth_hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

const char *gs_auth_role_name(enum gs_role role)
{
    switch (role) {
    case GS_ROLE_ADMIN:
        return "admin";
    case GS_ROLE_VIEWER:
        return "viewer";
    case GS_ROLE_METRICS:
        return "metrics";
    default:
        return "none";
    }
}

enum gs_role gs_auth_role_parse(const char *name)
{
    if (strcmp(name, "admin") == 0)
        return GS_ROLE_ADMIN;
    if (strcmp(name, "viewer") == 0)
        return GS_ROLE_VIEWER;
    if (strcmp(name, "metrics") == 0)
        return GS_ROLE_METRICS;
    return GS_ROLE_NONE;
}

int gs_auth_user_name_ok(const char *s, size_t n)
{
    if (n == 0 || n >= AUTH_USER_LEN)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-' || c == '@'))
            return 0;
    }
    return 1;
}

/* A viewer's user name to a local uid, when there is such an account. */
static void resolve_uid(const char *user, int *known, uid_t *uid)
{
    struct passwd pw, *res = NULL;
    char buf[4096];

    *known = 0;
    if (user[0] && getpwnam_r(user, &pw, buf, sizeof buf, &res) == 0 && res) {
        *known = 1;
        *uid = res->pw_uid;
    }
}

/* ---- the tokens file and the web config: auth_files.c ---- */

/* ---- life cycle ---- */

static struct gs_auth *auth_new(void)
{
    struct gs_auth *au = calloc(1, sizeof *au);

    if (!au)
        return NULL;
    au->cache = calloc(1, sizeof *au->cache);
    if (!au->cache || pthread_mutex_init(&au->cache->lock, NULL) != 0) {
        free(au->cache);
        free(au);
        return NULL;
    }
    au->cache->budget = GS_AUTH_BCRYPT_PER_S;
    au->cache->budget_t_ns = gs_clock_mono_ns();
    atomic_init(&au->refs, 1);
    return au;
}

static void auth_free(struct gs_auth *au)
{
    if (!au)
        return;
    pthread_mutex_destroy(&au->cache->lock);
    /* Nothing secret is kept (hashes only), but the cache keys identify live headers. */
    memset(au->cache, 0, sizeof *au->cache);
    free(au->cache);
    free(au->tokens);
    free(au->users);
    free(au);
}

void gs_auth_ref(struct gs_auth *au)
{
    if (au)
        atomic_fetch_add(&au->refs, 1);
}

void gs_auth_unref(struct gs_auth *au)
{
    if (au && atomic_fetch_sub(&au->refs, 1) == 1)
        auth_free(au);
}

int gs_auth_from_text(struct gs_auth **out, const char *tokens_name, const char *tokens,
                      size_t tokens_len, const char *web_name, const char *web, size_t web_len,
                      const char *base_dir, struct gs_err *err)
{
    struct gs_auth *au = auth_new();
    int rc = GS_OK;

    if (!au)
        return gs_err_set(err, GS_ENOMEM, "auth: out of memory");
    if (tokens)
        rc =
            gs_auth_parse_tokens(au, tokens_name ? tokens_name : "tokens", tokens, tokens_len, err);
    if (rc == GS_OK && web)
        rc = gs_auth_parse_web(au, web_name ? web_name : "web config", web, web_len, base_dir, err);
    if (rc != GS_OK) {
        auth_free(au);
        return rc;
    }
    *out = au;
    return GS_OK;
}

int gs_auth_check_secret(int fd, const char *path, struct gs_err *err)
{
    struct stat st;

    if (fstat(fd, &st) != 0)
        return gs_err_set(err, GS_EIO, "%s: cannot stat: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return gs_err_set(err, GS_EINVAL, "%s: not a regular file", path);
    if (st.st_mode & (S_IWGRP | S_IWOTH))
        return gs_err_set(err, GS_EPERM,
                          "%s: writable by %s (mode %04o): anyone who can write it can give "
                          "themselves access; chmod go-w it",
                          path, (st.st_mode & S_IWOTH) ? "everyone" : "its group",
                          (unsigned)(st.st_mode & 07777));
    if (st.st_uid != 0 && st.st_uid != geteuid() && st.st_uid != getuid())
        return gs_err_set(err, GS_EPERM,
                          "%s: owned by uid %u, neither root nor the agent's uid %u; chown it",
                          path, (unsigned)st.st_uid, (unsigned)geteuid());
    return GS_OK;
}

/* Reads a whole small credential file (NUL-terminated; *len without the NUL), checked with
 * gs_auth_check_secret on the opened file (a symlink's target, as Kubernetes mounts
 * Secrets). */
static int read_small(const char *path, char **text, size_t *len, struct gs_err *err)
{
    FILE *f = fopen(path, "re");
    char *buf;
    size_t n;
    int rc;

    if (!f)
        return gs_err_set(err, GS_EIO, "%s: cannot open: %s", path, strerror(errno));
    if ((rc = gs_auth_check_secret(fileno(f), path, err)) != GS_OK) {
        fclose(f);
        return rc;
    }
    buf = malloc(AUTH_FILE_MAX + 1);
    if (!buf) {
        fclose(f);
        return gs_err_set(err, GS_ENOMEM, "%s: out of memory", path);
    }
    n = fread(buf, 1, AUTH_FILE_MAX + 1, f);
    if (ferror(f) || n > AUTH_FILE_MAX) {
        int rc =
            gs_err_set(err, GS_EIO, "%s: %s", path, ferror(f) ? "read error" : "larger than 1 MiB");
        fclose(f);
        free(buf);
        return rc;
    }
    fclose(f);
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return GS_OK;
}

int gs_auth_open(struct gs_auth **out, const char *tokens_file, const char *web_config_file,
                 struct gs_err *err)
{
    char *tok = NULL, *web = NULL, dir[AUTH_PATH_LEN] = "";
    size_t tok_len = 0, web_len = 0;
    struct gs_auth *au = NULL;
    int rc = GS_OK;

    if (tokens_file && tokens_file[0])
        rc = read_small(tokens_file, &tok, &tok_len, err);
    if (rc == GS_OK && web_config_file && web_config_file[0]) {
        const char *slash = strrchr(web_config_file, '/');
        rc = read_small(web_config_file, &web, &web_len, err);
        if (slash && (size_t)(slash - web_config_file) < sizeof dir)
            snprintf(dir, sizeof dir, "%.*s", (int)(slash - web_config_file), web_config_file);
        if (slash == web_config_file)
            snprintf(dir, sizeof dir, "/");
    }
    if (rc == GS_OK)
        rc = gs_auth_from_text(&au, tokens_file, tok, tok_len, web_config_file, web, web_len, dir,
                               err);
    free(tok);
    free(web);
    if (rc != GS_OK)
        return rc;
    for (unsigned i = 0; i < au->n_tokens; i++)
        resolve_uid(au->tokens[i].user, &au->tokens[i].uid_known, &au->tokens[i].uid);
    for (unsigned i = 0; i < au->n_users; i++)
        resolve_uid(au->users[i].name, &au->users[i].uid_known, &au->users[i].uid);
    *out = au;
    return GS_OK;
}

bool gs_auth_required(const struct gs_auth *au)
{
    return au && (au->n_tokens > 0 || au->n_users > 0);
}

unsigned gs_auth_token_count(const struct gs_auth *au)
{
    return au ? au->n_tokens : 0;
}

unsigned gs_auth_user_count(const struct gs_auth *au)
{
    return au ? au->n_users : 0;
}

const char *gs_auth_tls_cert_file(const struct gs_auth *au)
{
    return au ? au->cert_file : "";
}

const char *gs_auth_tls_key_file(const struct gs_auth *au)
{
    return au ? au->key_file : "";
}

void gs_auth_tls_versions(const struct gs_auth *au, int *min, int *max)
{
    *min = au && au->tls_min ? au->tls_min : 12;
    *max = au && au->tls_max ? au->tls_max : 13;
    if (*max < *min) /* only max_version given, below the default minimum */
        *min = *max;
}

const char *gs_auth_challenge(const struct gs_auth *au)
{
    if (au && au->n_tokens == 0 && au->n_users > 0)
        return "Basic realm=\"gpuscope\", charset=\"UTF-8\"";
    return "Bearer realm=\"gpuscope\"";
}

/* ---- checking a request ---- */

static void fill(struct gs_viewer *out, enum gs_role role, const char *user, int uid_known,
                 uid_t uid)
{
    memset(out, 0, sizeof *out);
    out->role = role;
    out->via = GS_VIA_TCP;
    out->uid_known = uid_known != 0;
    out->uid = uid_known ? uid : (uid_t)-1;
    snprintf(out->user, sizeof out->user, "%s", user ? user : "");
}

static enum gs_role check_bearer(const struct gs_auth *au, const char *tok, size_t len,
                                 struct gs_viewer *out)
{
    unsigned char h[32];
    unsigned hit = 0;
    const struct token_entry *match = NULL;

    if (len == 0)
        return GS_ROLE_NONE;
    gs_auth_sha256(tok, len, h);
    /* Every entry is compared; the match is selected without a data-dependent branch on
     * the comparison's timing (the entry count is public). */
    for (unsigned i = 0; i < au->n_tokens; i++) {
        unsigned eq = (unsigned)gs_auth_equal(h, au->tokens[i].hash, 32);
        if (eq && !hit)
            match = &au->tokens[i];
        hit |= eq;
    }
    if (!match)
        return GS_ROLE_NONE;
    fill(out, match->role, match->user, match->uid_known, match->uid);
    return match->role;
}

/* Standard base64 (RFC 4648 section 4, padding optional) into out; returns the length or -1. */
static long b64_decode(const char *s, size_t n, char *out, size_t cap)
{
    unsigned acc = 0, bits = 0;
    size_t o = 0;

    while (n > 0 && s[n - 1] == '=')
        n--;
    for (size_t i = 0; i < n; i++) {
        const char c = s[i];
        int v = c >= 'A' && c <= 'Z'   ? c - 'A'
                : c >= 'a' && c <= 'z' ? c - 'a' + 26
                : c >= '0' && c <= '9' ? c - '0' + 52
                : c == '+'             ? 62
                : c == '/'             ? 63
                                       : -1;
        if (v < 0)
            return -1;
        acc = (acc << 6 | (unsigned)v) & 0xffffff;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (o >= cap)
                return -1;
            out[o++] = (char)((acc >> bits) & 0xff);
        }
    }
    return (long)o;
}

/* Whether one more uncached bcrypt check fits this second's budget. Under the cache lock. */
static int budget_take(struct auth_cache *c, int64_t now)
{
    c->budget += (double)(now - c->budget_t_ns) / 1e9 * GS_AUTH_BCRYPT_PER_S;
    if (c->budget > GS_AUTH_BCRYPT_PER_S)
        c->budget = GS_AUTH_BCRYPT_PER_S;
    c->budget_t_ns = now;
    if (c->budget < 1)
        return 0;
    c->budget -= 1;
    return 1;
}

/* key's failure bucket in tab (rate per second, burst at most), refilled to now; a new one
 * takes a free slot or the fullest (the one with the oldest failures). Under the cache lock. */
static struct fail_bucket *fail_find(struct fail_bucket *tab, const char *key, double rate,
                                     double burst, int64_t now)
{
    struct fail_bucket *b = NULL, *spare = NULL;
    double most = -1;

    for (unsigned i = 0; i < FAIL_SLOTS && !b; i++) {
        struct fail_bucket *x = &tab[i];
        if (x->key[0] && strcmp(x->key, key) == 0) {
            b = x;
            break;
        }
        if (x->key[0]) { /* refilled, to compare */
            x->left += (double)(now - x->t_ns) / 1e9 * rate;
            x->left = x->left > burst ? burst : x->left;
            x->t_ns = now;
        }
        if (!x->key[0] || x->left > most) {
            most = x->key[0] ? x->left : burst + 1;
            spare = x;
        }
    }
    if (!b) {
        b = spare;
        snprintf(b->key, sizeof b->key, "%s", key);
        b->left = burst;
        b->t_ns = now;
    }
    b->left += (double)(now - b->t_ns) / 1e9 * rate;
    b->left = b->left > burst ? burst : b->left;
    b->t_ns = now;
    return b;
}

/* The budget key of a source: an IPv4 address, an IPv6 /64, "unix", or "-" (none known). */
static void src_key(const struct sockaddr *sa, char *out, size_t n)
{
    snprintf(out, n, "-");
    if (sa && sa->sa_family == AF_INET) {
        const struct sockaddr_in *s = (const struct sockaddr_in *)(const void *)sa;
        inet_ntop(AF_INET, &s->sin_addr, out, (socklen_t)n);
    } else if (sa && sa->sa_family == AF_INET6) {
        struct sockaddr_in6 s = *(const struct sockaddr_in6 *)(const void *)sa;
        memset(s.sin6_addr.s6_addr + 8, 0, 8);
        inet_ntop(AF_INET6, &s.sin6_addr, out, (socklen_t)n);
    } else if (sa && sa->sa_family == AF_UNIX) {
        snprintf(out, n, "unix");
    }
}

static int bcrypt_ok(const char *pass, const char *hash)
{
    struct crypt_data *cd = calloc(1, sizeof *cd);
    int ok = 0;

    if (!cd)
        return 0;
    if (crypt_rn(pass, hash, cd, (int)sizeof *cd) != NULL) {
        size_t n = strlen(cd->output);
        ok = n == strlen(hash) &&
             gs_auth_equal((const unsigned char *)cd->output, (const unsigned char *)hash, n);
    }
    memset(cd, 0, sizeof *cd); /* the password passed through it */
    free(cd);
    return ok;
}

/* The cache key of credentials plain ("user:password", n bytes) from source skey. */
static void cache_key(const char *skey, const char *plain, size_t n, unsigned char key[32])
{
    char buf[INET6_ADDRSTRLEN + 8 + 512];
    size_t k = strlen(skey) + 1;

    memcpy(buf, skey, k); /* with its NUL: no source and credentials make another's bytes */
    memcpy(buf + k, plain, n);
    gs_auth_sha256(buf, k + n, key);
    memset(buf, 0, sizeof buf);
}

/* A basic-auth check: the cache (by source and credentials) first; else a bcrypt check when
 * the global budget (CPU) and the failure budget of the source allow it, and, for a source
 * that has failed lately, the user name's too. A failure is charged to both, so one attacker
 * drains its own source's budget (and, spread over sources, the name's for those sources) but
 * never a clean source's login: a lockout hits the attacking sources, not the user. */
static enum gs_role check_basic(const struct gs_auth *au, const char *b64, size_t len,
                                const struct sockaddr *src, struct gs_viewer *out)
{
    struct fail_bucket *fs, *fu;
    char skey[INET6_ADDRSTRLEN + 8];
    int ok;
    struct auth_cache *c = au->cache;
    unsigned char key[32];
    char plain[512];
    const struct basic_user *u = NULL;
    int64_t now = gs_clock_mono_ns();
    long n;
    char *colon;
    int found = -1, allowed;

    n = b64_decode(b64, len, plain, sizeof plain - 1);
    if (n <= 0)
        return GS_ROLE_NONE;
    plain[n] = '\0';
    colon = memchr(plain, ':', (size_t)n);
    if (!colon || strlen(plain) != (size_t)n) {
        memset(plain, 0, sizeof plain);
        return GS_ROLE_NONE;
    }
    src_key(src, skey, sizeof skey);
    cache_key(skey, plain, (size_t)n, key);
    pthread_mutex_lock(&c->lock);
    for (unsigned i = 0; i < CACHE_SLOTS; i++)
        if (c->slot[i].expires_ns > now && gs_auth_equal(c->slot[i].key, key, 32))
            found = (int)c->slot[i].user;
    pthread_mutex_unlock(&c->lock);
    if (found >= 0 && (unsigned)found < au->n_users) {
        memset(plain, 0, sizeof plain);
        u = &au->users[found];
        fill(out, GS_ROLE_VIEWER, u->name, u->uid_known, u->uid);
        return GS_ROLE_VIEWER;
    }
    *colon = '\0';
    for (unsigned i = 0; i < au->n_users; i++)
        if (strcmp(au->users[i].name, plain) == 0) {
            u = &au->users[i];
            found = (int)i;
        }
    pthread_mutex_lock(&c->lock);
    fs = fail_find(c->by_src, skey, GS_AUTH_FAIL_SRC_PER_S, GS_AUTH_FAIL_BURST, now);
    fu = fail_find(c->by_user, plain, GS_AUTH_FAIL_USER_PER_S, GS_AUTH_FAIL_USER_BURST, now);
    /* A clean source (no failure in its bucket) is not held to the name's budget. */
    allowed = fs->left >= 1 && (fs->left >= GS_AUTH_FAIL_BURST || fu->left >= 1) &&
              (!u || budget_take(c, now));
    pthread_mutex_unlock(&c->lock);
    if (!allowed)
        atomic_fetch_add(&budget_refused, 1);
    ok = allowed && u && bcrypt_ok(colon + 1, u->hash);
    if (!ok) {
        if (allowed) { /* a failure that was checked (or an unknown name): charged */
            pthread_mutex_lock(&c->lock);
            fs = fail_find(c->by_src, skey, GS_AUTH_FAIL_SRC_PER_S, GS_AUTH_FAIL_BURST, now);
            fu =
                fail_find(c->by_user, plain, GS_AUTH_FAIL_USER_PER_S, GS_AUTH_FAIL_USER_BURST, now);
            fs->left -= 1;
            fu->left -= 1;
            pthread_mutex_unlock(&c->lock);
        }
        memset(plain, 0, sizeof plain);
        return GS_ROLE_NONE;
    }
    memset(plain, 0, sizeof plain);
    pthread_mutex_lock(&c->lock);
    memcpy(c->slot[c->next].key, key, 32);
    c->slot[c->next].user = (unsigned)found;
    c->slot[c->next].expires_ns = now + (int64_t)GS_AUTH_BCRYPT_TTL_S * 1000000000LL;
    c->next = (c->next + 1) % CACHE_SLOTS;
    pthread_mutex_unlock(&c->lock);
    fill(out, GS_ROLE_VIEWER, u->name, u->uid_known, u->uid);
    return GS_ROLE_VIEWER;
}

enum gs_role gs_auth_check(const struct gs_auth *au, const char *authorization,
                           struct gs_viewer *out)
{
    return gs_auth_check_from(au, authorization, NULL, out);
}

enum gs_role gs_auth_check_from(const struct gs_auth *au, const char *authorization,
                                const struct sockaddr *src, struct gs_viewer *out)
{
    size_t len = 0;
    const char *v;

    fill(out, GS_ROLE_NONE, NULL, 0, 0);
    if (!gs_auth_required(au)) {
        out->role = GS_ROLE_VIEWER;
        return GS_ROLE_VIEWER;
    }
    if (!authorization)
        return GS_ROLE_NONE;
    len = strnlen(authorization, AUTH_HEADER_MAX + 1);
    if (len > AUTH_HEADER_MAX)
        return GS_ROLE_NONE;
    /* The scheme is case-insensitive (RFC 9110 section 11.1). */
    if (len > 7 && strncasecmp(authorization, "Bearer ", 7) == 0 && au->n_tokens) {
        v = authorization + 7;
        while (*v == ' ')
            v++;
        len = strlen(v);
        while (len && v[len - 1] == ' ')
            len--;
        return check_bearer(au, v, len, out);
    }
    if (len > 6 && strncasecmp(authorization, "Basic ", 6) == 0 && au->n_users) {
        v = authorization + 6;
        while (*v == ' ')
            v++;
        len = strlen(v);
        while (len && v[len - 1] == ' ')
            len--;
        return check_basic(au, v, len, src, out);
    }
    return GS_ROLE_NONE;
}

int gs_auth_identify(const struct gs_auth *au, struct MHD_Connection *c, struct gs_viewer *out)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const char *h;

    /* The unix socket's peers are known by SO_PEERCRED (policy.c): no credential asked. */
    if (ci && ci->client_addr && ci->client_addr->sa_family == AF_UNIX) {
        fill(out, GS_ROLE_VIEWER, NULL, 0, 0);
        out->via = GS_VIA_UNIX;
        return GS_ROLE_VIEWER;
    }
    h = gs_auth_required(au)
            ? MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION)
            : NULL;
    return (int)gs_auth_check_from(au, h, ci ? ci->client_addr : NULL, out);
}

/* ---- new tokens ---- */

int gs_auth_new_token(enum gs_role role, const char *user, char *token, char *line, size_t line_len,
                      struct gs_err *err)
{
    static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    unsigned char raw[33] = {0}; /* 32 random bytes and a zero byte to finish the last group */
    char hex[65];
    size_t o = 0;

    if (role == GS_ROLE_NONE)
        return gs_err_set(err, GS_EINVAL, "new token: role must be admin, viewer or metrics");
    if (user && user[0] && !gs_auth_user_name_ok(user, strlen(user)))
        return gs_err_set(err, GS_EINVAL,
                          "new token: bad user name (letters, digits, ._-@, at most %d bytes)",
                          AUTH_USER_LEN - 1);
    if (getrandom(raw, 32, 0) != 32)
        return gs_err_set(err, GS_EIO, "new token: getrandom: %s", strerror(errno));
    for (size_t i = 0; i < 33 && o < GS_AUTH_TOKEN_LEN; i += 3) {
        unsigned v = (unsigned)raw[i] << 16 | (i + 1 < 33 ? (unsigned)raw[i + 1] << 8 : 0) |
                     (i + 2 < 33 ? raw[i + 2] : 0);
        for (int k = 3; k >= 0 && o < GS_AUTH_TOKEN_LEN; k--)
            token[o++] = b64url[(v >> (6 * k)) & 63];
    }
    token[GS_AUTH_TOKEN_LEN] = '\0';
    memset(raw, 0, sizeof raw);
    gs_auth_sha256_hex(token, GS_AUTH_TOKEN_LEN, hex);
    snprintf(line, line_len, "sha256:%s %s%s%s", hex, gs_auth_role_name(role),
             user && user[0] ? " " : "", user && user[0] ? user : "");
    return GS_OK;
}
