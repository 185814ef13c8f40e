/*
 * auth_files.c - the HTTP viewers' credential files (auth.h): the tokens file and the
 * exporter-toolkit web config (basic-auth users with bcrypt hashes, TLS files and versions).
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

/* ---- the tokens file ---- */

static const char *skip_ws(const char *s, const char *e)
{
    while (s < e && (*s == ' ' || *s == '\t' || *s == '\r'))
        s++;
    return s;
}

static const char *word_end(const char *s, const char *e)
{
    while (s < e && *s != ' ' && *s != '\t' && *s != '\r')
        s++;
    return s;
}

static int token_line(struct gs_auth *au, const char *where, const char *s, const char *e,
                      struct gs_err *err)
{
    struct token_entry t;
    const char *w, *we;
    char role[16];

    memset(&t, 0, sizeof t);
    w = skip_ws(s, e);
    if (w == e || *w == '#')
        return GS_OK;
    we = word_end(w, e);
    if (we - w != 7 + 64 || memcmp(w, "sha256:", 7) != 0)
        return gs_err_set(err, GS_EINVAL, "%s: expected sha256:<64 hex digits> ROLE [USER]", where);
    for (int i = 0; i < 32; i++) {
        int hi = gs_auth_hexval(w[7 + 2 * i]), lo = gs_auth_hexval(w[8 + 2 * i]);
        if (hi < 0 || lo < 0)
            return gs_err_set(err, GS_EINVAL, "%s: sha256: not a hex digit", where);
        t.hash[i] = (unsigned char)(hi << 4 | lo);
    }
    w = skip_ws(we, e);
    we = word_end(w, e);
    if (w == we)
        return gs_err_set(err, GS_EINVAL, "%s: missing role (admin, viewer or metrics)", where);
    snprintf(role, sizeof role, "%.*s", (int)(we - w > 15 ? 15 : we - w), w);
    t.role = (size_t)(we - w) < sizeof role ? gs_auth_role_parse(role) : GS_ROLE_NONE;
    if (t.role == GS_ROLE_NONE)
        return gs_err_set(err, GS_EINVAL, "%s: unknown role '%.*s' (admin, viewer or metrics)",
                          where, (int)(we - w > 32 ? 32 : we - w), w);
    w = skip_ws(we, e);
    we = word_end(w, e);
    if (w < we) {
        if (*w == '#') {
            we = e; /* a trailing comment */
        } else {
            if (!gs_auth_user_name_ok(w, (size_t)(we - w)))
                return gs_err_set(err, GS_EINVAL,
                                  "%s: bad user name (letters, digits, ._-@, at most %d bytes)",
                                  where, AUTH_USER_LEN - 1);
            memcpy(t.user, w, (size_t)(we - w));
        }
    }
    w = skip_ws(we, e);
    if (w < e && *w != '#')
        return gs_err_set(err, GS_EINVAL, "%s: unexpected text after the user name", where);
    for (unsigned i = 0; i < au->n_tokens; i++)
        if (memcmp(au->tokens[i].hash, t.hash, 32) == 0)
            return gs_err_set(err, GS_EINVAL, "%s: the same token hash is listed twice", where);
    if (au->n_tokens >= AUTH_TOKENS_MAX)
        return gs_err_set(err, GS_EINVAL, "%s: more than %d tokens", where, AUTH_TOKENS_MAX);
    if ((au->n_tokens & (au->n_tokens - 1)) == 0) { /* 0, 1, 2, 4, ...: grow */
        unsigned cap = au->n_tokens ? au->n_tokens * 2 : 4;
        struct token_entry *n = realloc(au->tokens, cap * sizeof *n);
        if (!n)
            return gs_err_set(err, GS_ENOMEM, "%s: out of memory", where);
        au->tokens = n;
    }
    au->tokens[au->n_tokens++] = t;
    return GS_OK;
}

int gs_auth_parse_tokens(struct gs_auth *au, const char *name, const char *text, size_t len,
                         struct gs_err *err)
{
    const char *s = text, *end = text + len;
    unsigned lineno = 1;
    char where[300];

    if (memchr(text, '\0', len))
        return gs_err_set(err, GS_EINVAL, "%.256s: contains a NUL byte", name);
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        const char *e = nl ? nl : end;
        int rc;
        snprintf(where, sizeof where, "%.256s:%u", name, lineno);
        rc = token_line(au, where, s, e, err);
        if (rc != GS_OK)
            return rc;
        if (!nl)
            break;
        s = nl + 1;
        lineno++;
    }
    return GS_OK;
}

/* ---- the web config (exporter-toolkit web.config.file, YAML) ---- */

struct yctx {
    yaml_document_t *doc;
    const char *name;
    const char *base_dir;
    struct gs_auth *au;
    struct gs_err *err;
};

static int ywhere_err(struct yctx *y, const yaml_node_t *n, const char *fmt, const char *what)
{
    return gs_err_set(y->err, GS_EINVAL, "%.256s:%lu: %.64s: %s", y->name,
                      (unsigned long)n->start_mark.line + 1, what, fmt);
}

/* A scalar's text (NULL when n is not a scalar). YAML's null spellings count as empty. */
static const char *yscalar(const yaml_node_t *n, size_t *len)
{
    const char *v;

    if (!n || n->type != YAML_SCALAR_NODE)
        return NULL;
    v = (const char *)n->data.scalar.value;
    *len = n->data.scalar.length;
    if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
        ((*len == 1 && v[0] == '~') || (*len == 4 && memcmp(v, "null", 4) == 0)))
        *len = 0;
    return v;
}

static int ynull(const yaml_node_t *n)
{
    size_t len = 0;
    return n && n->type == YAML_SCALAR_NODE && yscalar(n, &len) && len == 0;
}

static int set_path(struct yctx *y, const yaml_node_t *v, const char *key, char *dst)
{
    size_t len = 0;
    const char *s = yscalar(v, &len);

    if (!s)
        return ywhere_err(y, v, "expected a file name", key);
    if (len == 0) {
        dst[0] = '\0';
        return GS_OK;
    }
    if (memchr(s, '\0', len))
        return ywhere_err(y, v, "contains a NUL byte", key);
    /* exporter-toolkit resolves relative paths against the config file's directory. */
    if (s[0] != '/' && y->base_dir && y->base_dir[0]) {
        if (strlen(y->base_dir) + 1 + len >= AUTH_PATH_LEN)
            return ywhere_err(y, v, "path too long", key);
        snprintf(dst, AUTH_PATH_LEN, "%s/%.*s", y->base_dir, (int)len, s);
    } else {
        if (len >= AUTH_PATH_LEN)
            return ywhere_err(y, v, "path too long", key);
        memcpy(dst, s, len);
        dst[len] = '\0';
    }
    return GS_OK;
}

static int ykey_is(const yaml_node_t *k, const char *name)
{
    size_t len = 0;
    const char *s = yscalar(k, &len);
    return s && len == strlen(name) && memcmp(s, name, len) == 0;
}

static int parse_tls(struct yctx *y, const yaml_node_t *m)
{
    static const char *const ignored[] = {"cipher_suites", "curve_preferences",
                                          "prefer_server_cipher_suites", "client_allowed_sans",
                                          NULL};
    yaml_node_pair_t *p;
    int rc;

    if (ynull(m))
        return GS_OK;
    if (m->type != YAML_MAPPING_NODE)
        return ywhere_err(y, m, "expected a mapping", "tls_server_config");
    for (p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(y->doc, p->key);
        yaml_node_t *v = yaml_document_get_node(y->doc, p->value);
        size_t len = 0;
        const char *ks = yscalar(k, &len), *vs;
        int known = 0;
        if (!ks || !v)
            return ywhere_err(y, k ? k : m, "expected a plain key", "tls_server_config");
        if (ykey_is(k, "cert_file")) {
            if ((rc = set_path(y, v, "cert_file", y->au->cert_file)) != GS_OK)
                return rc;
            continue;
        }
        if (ykey_is(k, "key_file")) {
            if ((rc = set_path(y, v, "key_file", y->au->key_file)) != GS_OK)
                return rc;
            continue;
        }
        if (ykey_is(k, "min_version") || ykey_is(k, "max_version")) {
            int *dst = ykey_is(k, "min_version") ? &y->au->tls_min : &y->au->tls_max;
            size_t vl = 0;
            vs = yscalar(v, &vl);
            if (!vs || vl != 5 || memcmp(vs, "TLS1", 4) != 0 || vs[4] < '0' || vs[4] > '3')
                return ywhere_err(y, v, "expected TLS10, TLS11, TLS12 or TLS13",
                                  ykey_is(k, "min_version") ? "min_version" : "max_version");
            *dst = 10 + (vs[4] - '0');
            continue;
        }
        if (ykey_is(k, "client_auth_type")) {
            size_t vl = 0;
            vs = yscalar(v, &vl);
            if (!vs || (vl && !(vl == 12 && memcmp(vs, "NoClientCert", 12) == 0)))
                return ywhere_err(y, v,
                                  "only NoClientCert is supported (client certificates "
                                  "are not checked by gpuscope)",
                                  "client_auth_type");
            continue;
        }
        if (ykey_is(k, "client_ca_file"))
            known = 1;
        for (int i = 0; ignored[i]; i++)
            known |= ykey_is(k, ignored[i]);
        if (!known)
            return ywhere_err(y, k, "unknown key in tls_server_config", "tls_server_config");
        gs_log(GS_LOG_WARN, "%.256s:%lu: tls_server_config: %.*s is ignored (GnuTLS defaults)",
               y->name, (unsigned long)k->start_mark.line + 1, (int)(len > 64 ? 64 : len), ks);
    }
    if (!y->au->cert_file[0] != !y->au->key_file[0])
        return ywhere_err(y, m, "cert_file and key_file go together", "tls_server_config");
    if (y->au->tls_min && y->au->tls_max && y->au->tls_min > y->au->tls_max)
        return ywhere_err(y, m, "min_version is above max_version", "tls_server_config");
    return GS_OK;
}

/* $2a$, $2b$ or $2y$, a two-digit cost, '$', 53 characters of bcrypt's base64. Costs above
 * 16 (seconds per check) would let one request stall the HTTP thread. */
static int bcrypt_hash_ok(const char *h, size_t n)
{
    int cost;

    if (!h || n != 60 || h[0] != '$' || h[1] != '2' ||
        (h[2] != 'a' && h[2] != 'b' && h[2] != 'y') || h[3] != '$' || h[4] < '0' || h[4] > '9' ||
        h[5] < '0' || h[5] > '9' || h[6] != '$')
        return 0;
    cost = (h[4] - '0') * 10 + (h[5] - '0');
    if (cost < 4 || cost > 16)
        return 0;
    return strspn(h + 7, "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789") == 53;
}

static int parse_users(struct yctx *y, const yaml_node_t *m)
{
    yaml_node_pair_t *p;

    if (ynull(m))
        return GS_OK;
    if (m->type != YAML_MAPPING_NODE)
        return ywhere_err(y, m, "expected a mapping of user: bcrypt hash", "basic_auth_users");
    for (p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(y->doc, p->key);
        yaml_node_t *v = yaml_document_get_node(y->doc, p->value);
        struct basic_user *u;
        size_t kl = 0, vl = 0;
        const char *ks = yscalar(k, &kl), *vs = yscalar(v, &vl);
        if (!ks || !gs_auth_user_name_ok(ks, kl))
            return ywhere_err(y, k ? k : m,
                              "bad user name (letters, digits, ._-@, at most 63 "
                              "bytes)",
                              "basic_auth_users");
        if (!bcrypt_hash_ok(vs, vl))
            return ywhere_err(y, v ? v : k,
                              "expected a bcrypt hash ($2y$10$..., 60 characters, "
                              "cost 4..16)",
                              "basic_auth_users");
        for (unsigned i = 0; i < y->au->n_users; i++)
            if (strlen(y->au->users[i].name) == kl && memcmp(y->au->users[i].name, ks, kl) == 0)
                return ywhere_err(y, k, "user listed twice", "basic_auth_users");
        if (y->au->n_users >= AUTH_USERS_MAX)
            return ywhere_err(y, k, "too many users", "basic_auth_users");
        if ((y->au->n_users & (y->au->n_users - 1)) == 0) {
            unsigned cap = y->au->n_users ? y->au->n_users * 2 : 4;
            struct basic_user *n = realloc(y->au->users, cap * sizeof *n);
            if (!n)
                return gs_err_set(y->err, GS_ENOMEM, "%.256s: out of memory", y->name);
            y->au->users = n;
        }
        u = &y->au->users[y->au->n_users++];
        memset(u, 0, sizeof *u);
        memcpy(u->name, ks, kl);
        memcpy(u->hash, vs, vl);
    }
    return GS_OK;
}

static int parse_web_root(struct yctx *y, const yaml_node_t *root)
{
    yaml_node_pair_t *p;
    int rc;

    if (!root || ynull(root))
        return GS_OK; /* an empty file: no TLS, no users */
    if (root->type != YAML_MAPPING_NODE)
        return ywhere_err(y, root, "expected a mapping", "web config");
    for (p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(y->doc, p->key);
        yaml_node_t *v = yaml_document_get_node(y->doc, p->value);
        size_t len = 0;
        const char *ks = yscalar(k, &len);
        if (!ks || !v)
            return ywhere_err(y, k ? k : root, "expected a plain key", "web config");
        if (ykey_is(k, "tls_server_config"))
            rc = parse_tls(y, v);
        else if (ykey_is(k, "basic_auth_users"))
            rc = parse_users(y, v);
        else if (ykey_is(k, "http_server_config")) {
            gs_log(GS_LOG_WARN,
                   "%.256s:%lu: http_server_config is ignored (gpuscope sets its "
                   "own headers; HTTP/2 is not served)",
                   y->name, (unsigned long)k->start_mark.line + 1);
            rc = GS_OK;
        } else {
            char key[65];
            snprintf(key, sizeof key, "%.*s", (int)(len > 64 ? 64 : len), ks);
            rc = ywhere_err(y, k, "unknown key (tls_server_config, basic_auth_users)", key);
        }
        if (rc != GS_OK)
            return rc;
    }
    return GS_OK;
}

int gs_auth_parse_web(struct gs_auth *au, const char *name, const char *text, size_t len,
                      const char *base_dir, struct gs_err *err)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    struct yctx y = {&doc, name, base_dir, au, err};
    int rc;

    if (memchr(text, '\0', len))
        return gs_err_set(err, GS_EINVAL, "%.256s: contains a NUL byte", name);
    if (!yaml_parser_initialize(&parser))
        return gs_err_set(err, GS_ENOMEM, "%.256s: out of memory", name);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        rc = gs_err_set(err, GS_EINVAL, "%.256s:%lu: %s", name,
                        (unsigned long)parser.problem_mark.line + 1,
                        parser.problem ? parser.problem : "YAML syntax error");
        yaml_parser_delete(&parser);
        return rc;
    }
    rc = parse_web_root(&y, yaml_document_get_root_node(&doc));
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return rc;
}
