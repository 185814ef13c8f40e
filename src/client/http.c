/*
 * An agent over HTTP(S) through libcurl loaded at run time (http.h).
 */
#include "client/http.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dl.h"
#include "gpuscope/gs_err.h"

#define DEFAULT_TIMEOUT_MS 2000
#define BODY_MAX (64u << 20)

/* The libcurl calls this module makes. */
struct curl_api {
    CURLcode (*global_init)(long);
    void (*global_cleanup)(void);
    CURL *(*easy_init)(void);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_perform)(CURL *);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    const char *(*easy_strerror)(CURLcode);
    void (*easy_cleanup)(CURL *);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
};

#define SYM(m) GS_DL_SYM(struct curl_api, m, "curl_" #m)
static const struct gs_dl_sym curl_syms[] = {
    SYM(global_init),  SYM(global_cleanup), SYM(easy_init),     SYM(easy_setopt),
    SYM(easy_perform), SYM(easy_getinfo),   SYM(easy_strerror), SYM(easy_cleanup),
    SYM(slist_append), SYM(slist_free_all),
};
#undef SYM
static const char *const curl_names[] = {"libcurl.so.4", "libcurl-gnutls.so.4", "libcurl.so", NULL};

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static struct curl_api C;
static void *curl_handle; /* kept for the process's life once loaded */

struct gs_http {
    char url[256]; /* http(s)://host:port, no trailing slash */
    CURL *curl;
    struct curl_slist *hdrs;
};

static int curl_load(struct gs_err *err)
{
    static const struct gs_dl_lib lib = {NULL, curl_names, curl_syms,
                                         sizeof curl_syms / sizeof curl_syms[0]};
    char why[400];
    int rc = GS_OK;

    pthread_mutex_lock(&load_lock);
    if (!curl_handle && !(curl_handle = gs_dl_open(&lib, &C, why, sizeof why)))
        rc = gs_err_set(err, GS_ENOLIB, "--host needs libcurl: %s", why);
    pthread_mutex_unlock(&load_lock);
    return rc;
}

struct membuf {
    char *p;
    size_t n, cap;
};

static size_t on_body(char *data, size_t sz, size_t nm, void *ud)
{
    struct membuf *b = ud;
    size_t n = sz * nm;

    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 65536;
        char *np;
        while (cap < b->n + n + 1)
            cap *= 2;
        if (cap > BODY_MAX || !(np = realloc(b->p, cap)))
            return 0;
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
    b->p[b->n] = '\0';
    return n;
}

int gs_http_open(struct gs_http **out, const char *host, const struct gs_http_opts *o,
                 struct gs_err *err)
{
    static const struct gs_http_opts none = {0};
    long timeout_ms;
    struct gs_http *h;
    size_t n;
    int rc = curl_load(err);

    if (rc != GS_OK)
        return rc;
    if (!o)
        o = &none;
    timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : DEFAULT_TIMEOUT_MS;
    h = calloc(1, sizeof *h);
    if (!h)
        return gs_err_set(err, GS_ENOMEM, "%s: out of memory", host);
    if (strncmp(host, "http://", 7) == 0 || strncmp(host, "https://", 8) == 0)
        snprintf(h->url, sizeof h->url, "%s", host);
    else
        snprintf(h->url, sizeof h->url, "http://%s", host);
    n = strlen(h->url);
    while (n > 0 && h->url[n - 1] == '/')
        h->url[--n] = '\0';
    /* libcurl counts its global inits: each handle holds one, released by gs_http_close */
    C.global_init(CURL_GLOBAL_DEFAULT);
    h->curl = C.easy_init();
    if (!h->curl) {
        gs_http_close(h);
        return gs_err_set(err, GS_ENOMEM, "%s: curl_easy_init failed", host);
    }
    C.easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, on_body);
    C.easy_setopt(h->curl, CURLOPT_TIMEOUT_MS, timeout_ms);
    C.easy_setopt(h->curl, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
    C.easy_setopt(h->curl, CURLOPT_NOSIGNAL, 1L);
    C.easy_setopt(h->curl, CURLOPT_ACCEPT_ENCODING, "");
    C.easy_setopt(h->curl, CURLOPT_PROTOCOLS_STR, "http,https");
    C.easy_setopt(h->curl, CURLOPT_USERAGENT, o->user_agent ? o->user_agent : "gpuscope");
    if (o->cacert)
        C.easy_setopt(h->curl, CURLOPT_CAINFO, o->cacert);
    if (o->insecure_tls) {
        C.easy_setopt(h->curl, CURLOPT_SSL_VERIFYPEER, 0L);
        C.easy_setopt(h->curl, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (o->token) {
        char hdr[600];
        snprintf(hdr, sizeof hdr, "Authorization: Bearer %s", o->token);
        h->hdrs = C.slist_append(NULL, hdr);
        C.easy_setopt(h->curl, CURLOPT_HTTPHEADER, h->hdrs);
    }
    *out = h;
    return GS_OK;
}

const char *gs_http_url(const struct gs_http *h)
{
    return h->url;
}

int gs_http_get(struct gs_http *h, const char *path, char **body, size_t *len, struct gs_err *err)
{
    char url[768];
    struct membuf b = {0};
    long code = 0;
    CURLcode cc;

    snprintf(url, sizeof url, "%s%s", h->url, path);
    C.easy_setopt(h->curl, CURLOPT_URL, url);
    C.easy_setopt(h->curl, CURLOPT_WRITEDATA, &b);
    cc = C.easy_perform(h->curl);
    if (cc != CURLE_OK) {
        free(b.p);
        return gs_err_set(err, GS_EIO, "%s", C.easy_strerror(cc));
    }
    C.easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &code);
    if (code != 200) {
        free(b.p);
        return gs_err_set(err, GS_EIO, "%s answered %ld%s", path, code,
                          code == 401 || code == 403 ? " (a token: --token-file or GPUSCOPE_TOKEN)"
                                                     : "");
    }
    if (!b.p && !(b.p = calloc(1, 1)))
        return gs_err_set(err, GS_ENOMEM, "out of memory");
    *body = b.p;
    *len = b.n;
    return GS_OK;
}

void gs_http_close(struct gs_http *h)
{
    if (!h)
        return;
    if (h->curl)
        C.easy_cleanup(h->curl);
    if (h->hdrs)
        C.slist_free_all(h->hdrs);
    C.global_cleanup();
    free(h);
}
