/*
 * The TCP door's address, exposure rule and TLS pair (listen.h).
 */
#include "agent/listen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/log.h"

#define PEM_MAX (1u << 20)

/* A PEM file read whole, NUL-terminated; NULL with err set on failure. secret: the private
 * key, which must pass gs_auth_check_secret. */
static char *read_pem(const char *path, int secret, struct gs_err *err)
{
    FILE *f = fopen(path, "re");
    char *buf = NULL;
    size_t n;
    struct gs_err e;

    if (!f) {
        gs_err_set(err, GS_EIO, "tls: %s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    gs_err_clear(&e);
    if (secret && gs_auth_check_secret(fileno(f), path, &e) != GS_OK) {
        gs_err_set(err, e.rc, "tls: %s", e.msg);
        fclose(f);
        return NULL;
    }
    if ((buf = malloc(PEM_MAX + 1)) == NULL) {
        gs_err_set(err, GS_ENOMEM, "tls: %s: out of memory", path);
    } else if ((n = fread(buf, 1, PEM_MAX + 1, f)) > PEM_MAX || ferror(f) || memchr(buf, '\0', n)) {
        gs_err_set(err, GS_EIO, "tls: %s: %s", path,
                   n > PEM_MAX ? "larger than 1 MiB" : "unreadable or not PEM text");
        free(buf);
        buf = NULL;
    } else {
        buf[n] = '\0';
    }
    fclose(f);
    return buf;
}

/* The TLS pair c asks for (tls_cert_file + tls_key_file, or the web config's
 * tls_server_config), read and checked with GnuTLS (parses, key matches). *cert and *key are
 * NULL when none is asked for; the caller frees them. */
int gs_listen_load_tls(const struct gs_agent_config *c, const struct gs_auth *au, char **cert,
                       char **key, struct gs_err *err)
{
    const char *cf = c->tls_cert_file, *kf = c->tls_key_file;
    gnutls_certificate_credentials_t cred;
    gnutls_datum_t dc, dk;
    int rc;

    *cert = *key = NULL;
    if (!cf[0] != !kf[0])
        return gs_err_set(err, GS_EINVAL, "tls: tls_cert_file and tls_key_file go together");
    if (gs_auth_tls_cert_file(au)[0]) {
        if (cf[0])
            return gs_err_set(err, GS_EINVAL,
                              "tls: set the pair in tls_cert_file/tls_key_file "
                              "or in web_config_file, not both");
        cf = gs_auth_tls_cert_file(au);
        kf = gs_auth_tls_key_file(au);
    }
    if (!cf[0])
        return GS_OK;
    if (!MHD_is_feature_supported(MHD_FEATURE_TLS))
        return gs_err_set(err, GS_EINVAL, "tls: this libmicrohttpd has no TLS support");
    if (!(*cert = read_pem(cf, 0, err)) || !(*key = read_pem(kf, 1, err)))
        goto fail;
    if (gnutls_certificate_allocate_credentials(&cred) < 0) {
        gs_err_set(err, GS_ENOMEM, "tls: out of memory");
        goto fail;
    }
    dc.data = (unsigned char *)*cert;
    dc.size = (unsigned)strlen(*cert);
    dk.data = (unsigned char *)*key;
    dk.size = (unsigned)strlen(*key);
    rc = gnutls_certificate_set_x509_key_mem(cred, &dc, &dk, GNUTLS_X509_FMT_PEM);
    gnutls_certificate_free_credentials(cred);
    if (rc < 0) {
        gs_err_set(err, GS_EINVAL, "tls: %s + %s: %s", cf, kf, gnutls_strerror(rc));
        goto fail;
    }
    return GS_OK;
fail:
    free(*cert);
    if (*key)
        memset(*key, 0, strlen(*key));
    free(*key);
    *cert = *key = NULL;
    return err ? (err->rc ? err->rc : GS_EINVAL) : GS_EINVAL;
}

void gs_listen_tls_priorities(const struct gs_auth *au, char *buf, size_t size)
{
    int min, max;
    size_t n;

    gs_auth_tls_versions(au, &min, &max);
    n = (size_t)snprintf(buf, size, "NORMAL:-VERS-ALL");
    for (int v = max; v >= min && n < size; v--)
        n += (size_t)snprintf(buf + n, size - n, ":+VERS-TLS1.%d", v - 10);
}

void gs_listen_free_pem(char *cert, char *key)
{
    free(cert);
    if (key)
        memset(key, 0, strlen(key)); /* the private key */
    free(key);
}

static int is_loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *s = (const struct sockaddr_in *)(const void *)ss;
        return (ntohl(s->sin_addr.s_addr) >> 24) == 127;
    }
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)(const void *)ss;
        const unsigned char *b = s->sin6_addr.s6_addr;
        return IN6_IS_ADDR_LOOPBACK(&s->sin6_addr) ||
               (IN6_IS_ADDR_V4MAPPED(&s->sin6_addr) && b[12] == 127);
    }
    return 0;
}

/* The exposure rule: a listen address other than loopback needs TLS and credentials (tokens
 * or basic-auth users), unless insecure = on, which is then said loudly. */
int gs_listen_check_exposure(const struct gs_agent_config *c, const struct sockaddr_storage *ss,
                             int tls, const struct gs_auth *au, struct gs_err *err)
{
    int protected_ = tls && gs_auth_required(au);

    if (is_loopback(ss) || protected_)
        return GS_OK;
    if (!c->insecure)
        return gs_err_set(err, GS_EINVAL,
                          "listen %s: refusing a non-loopback address without %s%s%s; set "
                          "them up (docs/security.md) or pass --insecure",
                          c->listen, tls ? "" : "TLS (tls_cert_file/tls_key_file)",
                          !tls && !gs_auth_required(au) ? " and " : "",
                          gs_auth_required(au) ? "" : "tokens_file or basic_auth_users");
    gs_log(GS_LOG_WARN, "http: INSECURE: %s is reachable from the network %s%s%s (--insecure)",
           c->listen, tls ? "" : "in clear text", !tls && !gs_auth_required(au) ? " and " : "",
           gs_auth_required(au) ? "" : "without credentials: anyone who reaches it sees data");
    return GS_OK;
}

int gs_listen_parse(const char *listen, struct sockaddr_storage *ss, struct gs_err *err)
{
    char host[GS_LISTEN_LEN];
    unsigned port;
    struct sockaddr_in *sin = (struct sockaddr_in *)(void *)ss;
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)(void *)ss;

    memset(ss, 0, sizeof *ss);
    if (gs_config_split_listen(listen, host, sizeof host, &port) != GS_OK)
        return gs_err_set(err, GS_EINVAL, "listen: bad address '%s'", listen);
    if (inet_pton(AF_INET, host, &sin->sin_addr) == 1) {
        sin->sin_family = AF_INET;
        sin->sin_port = htons((uint16_t)port);
    } else if (inet_pton(AF_INET6, host, &sin6->sin6_addr) == 1) {
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons((uint16_t)port);
    } else {
        return gs_err_set(err, GS_EINVAL, "listen: bad address '%s'", listen);
    }
    return GS_OK;
}
