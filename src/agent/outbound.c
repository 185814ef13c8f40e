/*
 * One outbound HTTP request and the retry backoff, shared by the push sinks and the alert
 * webhook (see outbound.h).
 */
#include "agent/outbound.h"

#include <math.h>
#include <stdio.h>

#define CONNECT_TIMEOUT_MS 2000L
#define REQUEST_TIMEOUT_MS 5000L
#define BACKOFF_MIN_S 1.0
#define BACKOFF_MAX_S 60.0

static size_t discard_body(char *ptr, size_t size, size_t n, void *ud)
{
    (void)ptr;
    (void)ud;
    return size * n;
}

int gs_outbound_send(CURL *c, const char *method, const char *url, struct curl_slist *headers,
                     const void *body, size_t len, char *why, size_t why_len)
{
    char errbuf[CURL_ERROR_SIZE] = "";
    long code = 0;
    CURLcode rc;

    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, REQUEST_TIMEOUT_MS);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard_body);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "gpuscope-agent");
    if (method)
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    rc = curl_easy_perform(c);
    if (rc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    if (rc != CURLE_OK)
        snprintf(why, why_len, "%s", errbuf[0] ? errbuf : curl_easy_strerror(rc));
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
