/*
 * What the agent's outbound HTTP senders (push.c, webhook.c) share: libcurl (and zlib, for
 * gzip pushes) loaded with dlopen on first use, one request with the same timeouts and error
 * reporting, and the retry backoff of a destination.
 *
 * Why dlopen: libcurl pulls in ~20 libraries (OpenSSL, Kerberos, LDAP, ssh2, ...), ~4.5 MiB of
 * RSS, that an agent without push sinks or webhook never uses (bench/RESULTS.md). The headers
 * still give the types and constants; the functions come from the tables below.
 *
 * Threads: the loaders lock; each sender thread owns its CURL handle and its backoffs.
 */
#ifndef GS_AGENT_OUTBOUND_H
#define GS_AGENT_OUTBOUND_H

#include <stddef.h>

#include <curl/curl.h>
#include <zlib.h>

#include "gpuscope/gs_err.h"

/* The libcurl functions the agent calls. Members named after curl_<name>. */
struct gs_curl_api {
    CURLcode (*global_init)(long flags);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *c);
    void (*easy_reset)(CURL *c);
    CURLcode (*easy_setopt)(CURL *c, CURLoption opt, ...);
    CURLcode (*easy_perform)(CURL *c);
    CURLcode (*easy_getinfo)(CURL *c, CURLINFO info, ...);
    const char *(*easy_strerror)(CURLcode rc);
    char *(*easy_escape)(CURL *c, const char *s, int len);
    void (*free_fn)(void *p);
    struct curl_slist *(*slist_append)(struct curl_slist *l, const char *s);
    void (*slist_free_all)(struct curl_slist *l);
};

/* Loads libcurl.so.4 ($GPUSCOPE_CURL_LIBRARY overrides the name) and runs curl_global_init
 * once per process; later calls return at once. A failure is not remembered (a later call
 * tries again): GS_EIO "libcurl: cannot load NAME (dlerror): install the Debian package
 * libcurl4". Thread-safe. */
int gs_curl_load(struct gs_err *err);
/* The table once gs_curl_load succeeded; NULL before. */
const struct gs_curl_api *gs_curl(void);

/* The zlib functions gzip pushes call (deflateInit2 is a macro over deflateInit2_). */
struct gs_zlib_api {
    int (*deflateInit2_)(z_streamp s, int level, int method, int window_bits, int mem_level,
                         int strategy, const char *version, int stream_size);
    int (*deflate)(z_streamp s, int flush);
    int (*deflateEnd)(z_streamp s);
    uLong (*deflateBound)(z_streamp s, uLong len);
};

/* Loads libz.so.1 ($GPUSCOPE_ZLIB_LIBRARY overrides), as gs_curl_load; the message names the
 * Debian package zlib1g. */
int gs_zlib_load(struct gs_err *err);
const struct gs_zlib_api *gs_zlib(void);

/* gzip (RFC 1952) of [data, data+len) at level (Z_BEST_SPEED..Z_BEST_COMPRESSION, or
 * Z_DEFAULT_COMPRESSION) into a new buffer (malloc'ed, *out_len bytes); NULL when zlib is not
 * loaded (gs_zlib_load) or out of memory. Thread-safe. The push sinks' bodies and /metrics. */
unsigned char *gs_gzip(const char *data, size_t len, int level, size_t *out_len);

/* Sends body (len bytes) to url with method ("POST" when NULL) and headers (not taken), on a
 * reset handle: 2 s to connect, 5 s in all, no signals, answer body discarded. Returns 1 on a
 * 2xx answer; otherwise 0 with the reason in why ("HTTP 503", curl's error text). */
int gs_outbound_send(CURL *c, const char *method, const char *url, struct curl_slist *headers,
                     const void *body, size_t len, char *why, size_t why_len);

/* Exponential backoff of one destination: 1 s doubling to 60 s after each failure, cleared by
 * a success. failing marks a failure episode, so callers log its start and end once. */
struct gs_backoff {
    double delay_s;
    double retry_at; /* CLOCK_MONOTONIC seconds; 0: now */
    int failing;
};

/* Records a success; returns 1 when it ends a failure episode (log the recovery). */
int gs_backoff_ok(struct gs_backoff *b);
/* Records a failure at now (monotonic seconds); returns 1 when it starts an episode. */
int gs_backoff_fail(struct gs_backoff *b, double now);

#endif
