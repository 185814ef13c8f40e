/*
 * viewer.h - who is asking: the identity of one HTTP request, and what the visibility policy
 * lets that viewer see (issue 5, docs/security.md).
 *
 * Two modules meet here. auth.c (tokens file, exporter-toolkit web config, TLS) turns a
 * request's credentials into a role and maybe a user; policy.c (process_visibility,
 * gpu_visibility, admin_group, the unix-socket listener) learns local viewers' uids from
 * SO_PEERCRED and filters what a viewer gets. agent.c calls gs_viewer_identify() once per
 * request, refuses what the role may not reach, and asks policy.c to filter data responses.
 */
#ifndef GS_AGENT_VIEWER_H
#define GS_AGENT_VIEWER_H

#include <stdbool.h>
#include <sys/types.h>

struct MHD_Connection;

enum gs_role {
    GS_ROLE_NONE = 0, /* not authenticated: 401 */
    GS_ROLE_METRICS,  /* /metrics and /healthz only */
    GS_ROLE_VIEWER,   /* everything, filtered by the visibility policy for uid */
    GS_ROLE_ADMIN,    /* everything, unfiltered */
};

enum gs_via { GS_VIA_TCP = 0, GS_VIA_UNIX };

struct gs_viewer {
    enum gs_role role;
    enum gs_via via;
    bool uid_known; /* uid below is real: SO_PEERCRED, a token mapped to a user, or a
                     * loopback TCP peer found in /proc/net/tcp{,6} */
    uid_t uid;
    char user[64]; /* "" when unknown */
};

#endif
