/*
 * An agent over HTTP or HTTPS, as `gpuscope top --host` reads it: libcurl, loaded at run time
 * on the first open (base/dl.h), so that a command that never asks for a remote agent maps none
 * of libcurl's TLS, Kerberos and LDAP libraries (about 3.5 MiB of RSS). One handle per agent:
 * its base URL, timeouts, TLS and token settings, and GETs of an API path into memory.
 *
 * Threads: open and close from one thread (curl_global_init and _cleanup are not thread-safe
 * in every libcurl); a handle is used by one thread at a time.
 */
#ifndef GS_CLIENT_HTTP_H
#define GS_CLIENT_HTTP_H

#include <stddef.h>

struct gs_err;
struct gs_http;

struct gs_http_opts {
    const char *token;      /* "Authorization: Bearer TOKEN", NULL: none */
    const char *cacert;     /* CA bundle for https://, NULL: the system's */
    int insecure_tls;       /* no certificate or host name check */
    const char *user_agent; /* NULL: "gpuscope" */
    int timeout_ms;         /* connect and whole request; 0: 2000 */
};

/* A handle for the agent at host: "http://H:P", "https://H:P" or "H:P" (http://), trailing
 * slashes dropped. Loads libcurl (libcurl.so.4, libcurl-gnutls.so.4, libcurl.so) first: GS_ENOLIB
 * "--host needs libcurl: cannot load ..." when it cannot; GS_ENOMEM. o may be NULL. */
int gs_http_open(struct gs_http **out, const char *host, const struct gs_http_opts *o,
                 struct gs_err *err);

/* The base URL: "http://H:P", no trailing slash. */
const char *gs_http_url(const struct gs_http *h);

/* GET base URL + path. On 200: GS_OK with the body (malloc'ed, NUL-terminated, at most 64 MiB)
 * in *body and its length in *len. GS_EIO with curl's message, or "PATH answered CODE" (with a
 * hint about tokens on 401 and 403); GS_ENOMEM. */
int gs_http_get(struct gs_http *h, const char *path, char **body, size_t *len, struct gs_err *err);

/* NULL is allowed. */
void gs_http_close(struct gs_http *h);

#endif
