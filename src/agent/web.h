/*
 * The agent's built-in dashboard (docs/dashboard.md): the files of web/ embedded at build time
 * by scripts/embed-web.py (a generated web_assets.c holds the table below) and served by
 * gs_web_send from libmicrohttpd's thread. Nothing is read from disk and nothing is allocated
 * per request: every body is static.
 */
#ifndef GS_AGENT_WEB_H
#define GS_AGENT_WEB_H

#include <stddef.h>

struct MHD_Connection;

/* One embedded file: its URL path ("/" for index.html, "/assets/NAME" for the others), its
 * Content-Type, the bytes, a gzip copy, and a strong ETag (quoted). */
struct gs_web_asset {
    const char *path;
    const char *type;
    const unsigned char *data;
    size_t len;
    const unsigned char *gz;
    size_t gz_len;
    const char *etag;
};

extern const struct gs_web_asset gs_web_assets[];
extern const size_t gs_web_n_assets;

/* The asset served at url, or NULL. */
const struct gs_web_asset *gs_web_find(const char *url);

/* Whether an Accept-Encoding header value allows gzip (a "gzip" or "*" token without q=0). */
int gs_web_accepts_gzip(const char *accept_encoding);

/* Queues the answer for asset on c: 200 with the body (gzip when the client accepts it), or
 * 304 when If-None-Match names its ETag. Returns MHD's result (int: enum MHD_Result). */
int gs_web_send(struct MHD_Connection *c, const struct gs_web_asset *asset);

#endif
