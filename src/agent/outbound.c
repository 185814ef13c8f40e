/*
 * One outbound HTTP request and the retry backoff, shared by the push sinks and the alert
 * webhook, and the loaders of libcurl and zlib for them (base/dl.h; see outbound.h).
 */
#include "agent/outbound.h"

#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dl.h"

#define CONNECT_TIMEOUT_MS 2000L
#define REQUEST_TIMEOUT_MS 5000L
#define BACKOFF_MIN_S 1.0
#define BACKOFF_MAX_S 60.0

/* ---- the loaders ---- */

#define CURL_SYM(f, m) GS_DL_SYM(struct gs_curl_api, m, "curl_" #f)
static const struct gs_dl_sym curl_syms[] = {
    CURL_SYM(global_init, global_init),   CURL_SYM(easy_init, easy_init),
    CURL_SYM(easy_cleanup, easy_cleanup), CURL_SYM(easy_reset, easy_reset),
    CURL_SYM(easy_setopt, easy_setopt),   CURL_SYM(easy_perform, easy_perform),
    CURL_SYM(easy_getinfo, easy_getinfo), CURL_SYM(easy_strerror, easy_strerror),
    CURL_SYM(easy_escape, easy_escape),   CURL_SYM(free, free_fn),
    CURL_SYM(slist_append, slist_append), CURL_SYM(slist_free_all, slist_free_all),
};
static const char *const curl_names[] = {"libcurl.so.4", NULL};

#define Z_SYM(f) GS_DL_SYM(struct gs_zlib_api, f, #f)
static const struct gs_dl_sym zlib_syms[] = {
    Z_SYM(deflateInit2_),
    Z_SYM(deflate),
    Z_SYM(deflateEnd),
    Z_SYM(deflateBound),
};
static const char *const zlib_names[] = {"libz.so.1", NULL};

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static struct gs_curl_api curl_api;
static struct gs_zlib_api zlib_api;
static int curl_loaded, zlib_loaded; /* written under load_lock, then only read */

/* Loads lib into api (base/dl.h); the handle is kept for the process's life. The message
 * names the library, what failed and the Debian package to install. */
static int load_lib(const struct gs_dl_lib *lib, const char *what, const char *package, void *api,
                    struct gs_err *err)
{
    char why[400];

    if (!gs_dl_open(lib, api, why, sizeof why))
        return gs_err_set(err, GS_EIO, "%s: %s: install the Debian package %s", what, why, package);
    return GS_OK;
}

int gs_curl_load(struct gs_err *err)
{
    static const struct gs_dl_lib lib = {"GPUSCOPE_CURL_LIBRARY", curl_names, curl_syms,
                                         sizeof curl_syms / sizeof curl_syms[0]};
    int rc = GS_OK;

    pthread_mutex_lock(&load_lock);
    if (!curl_loaded) {
        rc = load_lib(&lib, "libcurl", "libcurl4", &curl_api, err);
        /* curl_global_init is not thread-safe in every libcurl: once, under the lock. */
        if (rc == GS_OK && curl_api.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
            rc = gs_err_set(err, GS_EIO, "libcurl: curl_global_init failed");
        curl_loaded = rc == GS_OK;
    }
    pthread_mutex_unlock(&load_lock);
    return rc;
}

const struct gs_curl_api *gs_curl(void)
{
    int ok;

    pthread_mutex_lock(&load_lock);
    ok = curl_loaded;
    pthread_mutex_unlock(&load_lock);
    return ok ? &curl_api : NULL;
}

int gs_zlib_load(struct gs_err *err)
{
    static const struct gs_dl_lib lib = {"GPUSCOPE_ZLIB_LIBRARY", zlib_names, zlib_syms,
                                         sizeof zlib_syms / sizeof zlib_syms[0]};
    int rc = GS_OK;

    pthread_mutex_lock(&load_lock);
    if (!zlib_loaded) {
        rc = load_lib(&lib, "zlib", "zlib1g", &zlib_api, err);
        zlib_loaded = rc == GS_OK;
    }
    pthread_mutex_unlock(&load_lock);
    return rc;
}

const struct gs_zlib_api *gs_zlib(void)
{
    int ok;

    pthread_mutex_lock(&load_lock);
    ok = zlib_loaded;
    pthread_mutex_unlock(&load_lock);
    return ok ? &zlib_api : NULL;
}

/* ---- one request ---- */

static size_t discard_body(char *ptr, size_t size, size_t n, void *ud)
{
    (void)ptr;
    (void)ud;
    return size * n;
}

int gs_outbound_send(CURL *c, const char *method, const char *url, struct curl_slist *headers,
                     const void *body, size_t len, char *why, size_t why_len)
{
    const struct gs_curl_api *cu = gs_curl(); /* loaded: c exists */
    char errbuf[CURL_ERROR_SIZE] = "";
    long code = 0;
    CURLcode rc;

    cu->easy_reset(c);
    cu->easy_setopt(c, CURLOPT_URL, url);
    cu->easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    cu->easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
    cu->easy_setopt(c, CURLOPT_TIMEOUT_MS, REQUEST_TIMEOUT_MS);
    cu->easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    cu->easy_setopt(c, CURLOPT_WRITEFUNCTION, discard_body);
    cu->easy_setopt(c, CURLOPT_USERAGENT, "gpuscope-agent");
    if (method)
        cu->easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    cu->easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    cu->easy_setopt(c, CURLOPT_POSTFIELDS, body);
    cu->easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    rc = cu->easy_perform(c);
    if (rc == CURLE_OK)
        cu->easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    if (rc != CURLE_OK)
        snprintf(why, why_len, "%s", errbuf[0] ? errbuf : cu->easy_strerror(rc));
    else if (code < 200 || code > 299)
        snprintf(why, why_len, "HTTP %ld", code);
    return rc == CURLE_OK && code >= 200 && code <= 299;
}

int gs_backoff_ok(struct gs_backoff *b)
{
    int was = b->failing;

    b->failing = 0;
    b->delay_s = 0;
    b->retry_at = 0;
    return was;
}

int gs_backoff_fail(struct gs_backoff *b, double now)
{
    int was = b->failing;

    b->delay_s = b->delay_s <= 0 ? BACKOFF_MIN_S : fmin(b->delay_s * 2, BACKOFF_MAX_S);
    b->retry_at = now + b->delay_s;
    b->failing = 1;
    return !was;
}

unsigned char *gs_gzip(const char *data, size_t len, int level, size_t *out_len)
{
    const struct gs_zlib_api *zl = gs_zlib();
    z_stream z;
    uLong cap;
    unsigned char *out;

    memset(&z, 0, sizeof z);
    if (!zl || zl->deflateInit2_(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY,
                                 ZLIB_VERSION, (int)sizeof z) != Z_OK)
        return NULL;
    cap = zl->deflateBound(&z, (uLong)len) + 32;
    out = malloc(cap);
    if (!out) {
        zl->deflateEnd(&z);
        return NULL;
    }
    z.next_in = (Bytef *)(uintptr_t)data;
    z.avail_in = (uInt)len;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    if (zl->deflate(&z, Z_FINISH) != Z_STREAM_END) {
        zl->deflateEnd(&z);
        free(out);
        return NULL;
    }
    *out_len = z.total_out;
    zl->deflateEnd(&z);
    return out;
}
