/*
 * One outbound HTTP request and the retry backoff, shared by the push sinks and the alert
 * webhook, and the loaders that dlopen libcurl and zlib for them (see outbound.h).
 */
#include "agent/outbound.h"

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONNECT_TIMEOUT_MS 2000L
#define REQUEST_TIMEOUT_MS 5000L
#define BACKOFF_MIN_S 1.0
#define BACKOFF_MAX_S 60.0

/* ---- the loaders ---- */

struct sym {
    const char *name;
    size_t offset; /* of the function pointer in the api struct */
};

#define CURL_SYM(f, m)                                                                             \
    {                                                                                              \
        "curl_" #f, offsetof(struct gs_curl_api, m)                                                \
    }
static const struct sym curl_syms[] = {
    CURL_SYM(global_init, global_init),   CURL_SYM(easy_init, easy_init),
    CURL_SYM(easy_cleanup, easy_cleanup), CURL_SYM(easy_reset, easy_reset),
    CURL_SYM(easy_setopt, easy_setopt),   CURL_SYM(easy_perform, easy_perform),
    CURL_SYM(easy_getinfo, easy_getinfo), CURL_SYM(easy_strerror, easy_strerror),
    CURL_SYM(easy_escape, easy_escape),   CURL_SYM(free, free_fn),
    CURL_SYM(slist_append, slist_append), CURL_SYM(slist_free_all, slist_free_all),
};

#define Z_SYM(f)                                                                                   \
    {                                                                                              \
#f, offsetof(struct gs_zlib_api, f)                                                        \
    }
static const struct sym zlib_syms[] = {
    Z_SYM(deflateInit2_),
    Z_SYM(deflate),
    Z_SYM(deflateEnd),
    Z_SYM(deflateBound),
};

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static struct gs_curl_api curl_api;
static struct gs_zlib_api zlib_api;
static int curl_loaded, zlib_loaded; /* written under load_lock, then only read */

/* dlopens name ($env when set) and fills api from syms; the handle is kept for the process's
 * life. On failure api is left partly filled but not marked loaded. */
static int load_lib(const char *env, const char *name, const char *what, const char *package,
                    const struct sym *syms, size_t n, void *api, struct gs_err *err)
{
    const char *path = getenv(env);
    void *h;

    if (!path || !path[0])
        path = name;
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return gs_err_set(err, GS_EIO, "%s: cannot load %s (%s): install the Debian package %s",
                          what, path, dlerror(), package);
    for (size_t i = 0; i < n; i++) {
        void *f = dlsym(h, syms[i].name);
        if (!f) {
            gs_err_set(err, GS_EIO, "%s: %s has no %s: install the Debian package %s", what, path,
                       syms[i].name, package);
            dlclose(h);
            return GS_EIO;
        }
        /* POSIX guarantees a function pointer round-trips through void *. */
        memcpy((char *)api + syms[i].offset, &f, sizeof f);
    }
    return GS_OK;
}

int gs_curl_load(struct gs_err *err)
{
    int rc = GS_OK;

    pthread_mutex_lock(&load_lock);
    if (!curl_loaded) {
        rc = load_lib("GPUSCOPE_CURL_LIBRARY", "libcurl.so.4", "libcurl", "libcurl4", curl_syms,
                      sizeof curl_syms / sizeof curl_syms[0], &curl_api, err);
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
    int rc = GS_OK;

    pthread_mutex_lock(&load_lock);
    if (!zlib_loaded) {
        rc = load_lib("GPUSCOPE_ZLIB_LIBRARY", "libz.so.1", "zlib", "zlib1g", zlib_syms,
                      sizeof zlib_syms / sizeof zlib_syms[0], &zlib_api, err);
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
