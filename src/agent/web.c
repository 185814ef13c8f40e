/*
 * Serving the embedded dashboard (web.h). Each answer carries the agent's usual security
 * headers with a Content-Security-Policy that lets the page load its own script, style and
 * icon and talk to its own origin, nothing else: no inline script or style, no other host, no
 * framing. Bodies are the static arrays of the generated web_assets.c; a client that accepts
 * gzip gets the compressed copy (Vary: Accept-Encoding), and a revalidation with the current
 * ETag gets 304. Cache-Control: no-cache makes a browser revalidate after an upgrade of the
 * agent instead of mixing old and new files.
 */
#include "agent/web.h"

#include <ctype.h>
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define WEB_CSP                                                                                    \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "                    \
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

const struct gs_web_asset *gs_web_find(const char *url)
{
    for (size_t i = 0; i < gs_web_n_assets; i++)
        if (strcmp(gs_web_assets[i].path, url) == 0)
            return &gs_web_assets[i];
    return NULL;
}

/* Parses one ";q=VALUE" parameter list; returns whether q is above zero (absent: yes). */
static int web_q_positive(const char *p, const char *end)
{
    while (p < end) {
        while (p < end && (*p == ';' || isspace((unsigned char)*p)))
            p++;
        if (end - p >= 2 && (p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
            char num[16];
            size_t n = 0;
            for (p += 2; p < end && n < sizeof num - 1 && !isspace((unsigned char)*p) && *p != ';';
                 p++)
                num[n++] = *p;
            num[n] = '\0';
            return strtod(num, NULL) > 0;
        }
        while (p < end && *p != ';')
            p++;
    }
    return 1;
}

int gs_web_accepts_gzip(const char *ae)
{
    int star = 0, gzip = -1;

    if (!ae)
        return 0;
    while (*ae) {
        const char *tok, *tok_end, *item_end = strchr(ae, ',');
        if (!item_end)
            item_end = ae + strlen(ae);
        while (ae < item_end && isspace((unsigned char)*ae))
            ae++;
        tok = ae;
        while (ae < item_end && *ae != ';' && !isspace((unsigned char)*ae))
            ae++;
        tok_end = ae;
        if (tok_end - tok == 4 && strncasecmp(tok, "gzip", 4) == 0)
            gzip = web_q_positive(tok_end, item_end);
        else if (tok_end - tok == 1 && *tok == '*')
            star = web_q_positive(tok_end, item_end);
        ae = *item_end ? item_end + 1 : item_end;
    }
    return gzip >= 0 ? gzip : star;
}

/* Whether an If-None-Match value lists etag, weak or strong, or is "*". */
static int web_etag_matches(const char *inm, const char *etag)
{
    if (!inm)
        return 0;
    while (isspace((unsigned char)*inm))
        inm++;
    return strcmp(inm, "*") == 0 || strstr(inm, etag) != NULL;
}

int gs_web_send(struct MHD_Connection *c, const struct gs_web_asset *asset)
{
    const char *ae =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING);
    const char *inm =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_IF_NONE_MATCH);
    int not_modified = web_etag_matches(inm, asset->etag);
    int gz = !not_modified && gs_web_accepts_gzip(ae);
    struct MHD_Response *r;
    enum MHD_Result ret;

    if (not_modified)
        r = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    else
        r = MHD_create_response_from_buffer(gz ? asset->gz_len : asset->len,
                                            (void *)(gz ? asset->gz : asset->data),
                                            MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
    MHD_add_response_header(r, "Content-Security-Policy", WEB_CSP);
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, asset->etag);
    MHD_add_response_header(r, MHD_HTTP_HEADER_VARY, "Accept-Encoding");
    if (!not_modified)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, asset->type);
    if (gz)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
    ret = MHD_queue_response(c, not_modified ? MHD_HTTP_NOT_MODIFIED : MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}
