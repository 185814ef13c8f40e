/*
 * policy.h - the visibility policy (issue 5, docs/security.md "VISIBILITY POLICY"): who a
 * local viewer is, and what a non-admin viewer may see of the agent's data.
 *
 * Two halves. gs_policy_resolve learns a request's uid (SO_PEERCRED on the unix socket; the
 * owner of a loopback TCP peer's socket, from sock_diag, else /proc/net/tcp{,6}; getpwnam for
 * a token's user) and turns root, the agent's own user and members of admin_group into
 * GS_ROLE_ADMIN. The filter functions are pure: gs_policy_view_build decides, from one snapshot,
 * which GPUs a viewer sees and whether other users' processes are hidden; the gs_policy_filter_*
 * functions apply that to a snapshot (for /metrics), to the snapshot and processes documents, to
 * the alerts document and to one GPU index (history). Admin viewers never reach them: the agent
 * serves its pre-rendered bodies to those.
 *
 * Threads: a struct gs_policy may be used by several HTTP threads at once (its settings and
 * its identity cache sit behind one mutex); a struct gs_policy_view is the caller's own.
 */
#ifndef GS_AGENT_POLICY_H
#define GS_AGENT_POLICY_H

#include <jansson.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "agent/viewer.h"
#include "gpuscope/gs_model.h"

struct gs_err;
struct MHD_Connection;

enum gs_proc_visibility {
    GS_PROCVIS_ALL = 0,  /* every process in full */
    GS_PROCVIS_OWN = 1,  /* own processes in full; others counted, memory summed per GPU */
    GS_PROCVIS_NONE = 2, /* counts and sums only */
};

enum gs_gpu_visibility {
    GS_GPUVIS_ALL = 0,  /* every GPU */
    GS_GPUVIS_USED = 1, /* GPUs where the viewer runs a process (or its job's cgroup allows) */
};

#define GS_POLICY_GROUP_LEN 64
#define GS_POLICY_GPU_MAX 256 /* NVML indices at or above this are never shown to viewers */

struct gs_policy_settings {
    int process_visibility;                /* enum gs_proc_visibility */
    int gpu_visibility;                    /* enum gs_gpu_visibility */
    char admin_group[GS_POLICY_GROUP_LEN]; /* "" : root and the agent's user only */
};

/* What one non-admin viewer sees of one snapshot. */
struct gs_policy_view {
    bool filtered; /* false: everything (admin, or policy all/all) */
    bool uid_known;
    uid_t uid;
    int process_visibility;
    unsigned char gpu_visible[GS_POLICY_GPU_MAX]; /* by NVML index */
};

struct gs_policy;

int gs_policy_new(struct gs_policy **out, const struct gs_policy_settings *s, struct gs_err *err);
/* SIGHUP: new settings; the identity cache is emptied (admin_group may have changed). */
void gs_policy_set(struct gs_policy *p, const struct gs_policy_settings *s);
void gs_policy_free(struct gs_policy *p);

/* Completes v for the request on c: via (from the connection's socket family); uid from
 * SO_PEERCRED (unix socket), from sock_diag (else /proc/net/tcp{,6}) for a loopback TCP peer
 * when no token named a user, or from getpwnam of v->user; the user name from the uid. A viewer
 * whose uid is 0, the agent's effective uid, or a member of admin_group becomes GS_ROLE_ADMIN.
 * Roles NONE and METRICS are left alone. peer_pid (may be NULL) gets the unix peer's pid, or
 * 0. Lookups are cached per uid for a minute. */
void gs_policy_resolve(struct gs_policy *p, struct MHD_Connection *c, struct gs_viewer *v,
                       pid_t *peer_pid);

/* For the rate limiter, which keys clients by address: a unix-socket client's uid as an
 * address of its own (IPv6 discard prefix 100::/64, the uid in the last four bytes), so local
 * users do not share one bucket. Returns whether c is on a unix socket and *out was filled. */
bool gs_policy_unix_rate_addr(struct MHD_Connection *c, struct sockaddr_in6 *out);

/* The local uid behind the connected socket fd: SO_PEERCRED on a unix socket, sock_diag (else
 * /proc/net/tcp{,6}) for a loopback TCP peer. False for a remote peer or when unknown. */
bool gs_policy_peer_uid(int fd, uint32_t *uid);

/* Whether the viewer's responses must be filtered (GS_ROLE_VIEWER and a policy other than
 * all/all). */
bool gs_policy_filters(struct gs_policy *p, const struct gs_viewer *v);

/* Decides the view of snap for v under settings s: the GPUs where one of v's processes runs
 * (host_st OK and uid equal); with cgroup_minors (a bitmask by NVML minor number of the nvidia
 * devices the viewer's job cgroup allows, 0: none known) the GPUs with those minors too. */
void gs_policy_view_build(struct gs_policy_view *view, const struct gs_policy_settings *s,
                          const struct gs_viewer *v, const struct gs_snapshot *snap,
                          const unsigned char *cgroup_minors, size_t n_minors);

/* gs_policy_view_build with the live settings of p, and for a unix peer (peer_pid > 0) the
 * nvidia minors its cgroup v1 devices controller allows (docs/security.md). */
void gs_policy_view(struct gs_policy *p, struct gs_policy_view *view, const struct gs_viewer *v,
                    pid_t peer_pid, const struct gs_snapshot *snap);

/* Whether the GPU of NVML index gpu is visible. */
bool gs_policy_gpu_visible(const struct gs_policy_view *view, unsigned gpu);

/* What a viewer may see of snap, made once per request; every answer (the snapshot and
 * processes documents of core/snapjson.h, /metrics) is an encoding of it. A copy with only the
 * visible GPUs and the processes shown in full (own ones for `own`, none for `none`),
 * proc->gpu re-indexed; unless the policy shows all processes, each GPU left counts what it
 * withheld in its hidden_* fields (the documents' "hidden_processes"). NULL when out of
 * memory. */
struct gs_snapshot *gs_policy_filter_snapshot(const struct gs_policy_view *view,
                                              const struct gs_snapshot *snap);

/* Whether the view (a struct gs_policy_view *) shows an alert on this GPU: node-level alerts
 * (gpu -1) are shown; a GPU's only if the GPU is (alerts.h, gs_alert_shown_fn). */
int gs_policy_alert_shown(void *view, int gpu);

/* Whose runs the view shows: *all = 1 for an unfiltered view and `all`; else only runs of
 * *uid: the viewer's uid for `own` (when known), -1 (none) for `none`. /api/v1/runs filters
 * and pages by it in the history's SQL (runs.h, struct gs_runs_who). */
void gs_policy_runs_owner(const struct gs_policy_view *view, int *all, int64_t *uid);

/* Parses a cgroup v1 devices.list text ("c 195:0 rwm" lines): sets minors[m] = 1 for each
 * nvidia GPU device (major 195, minor below 255; 255 is nvidiactl) it allows. "a" entries
 * (allow all) grant nothing. Returns how many were set. */
unsigned gs_policy_parse_devices_list(const char *text, unsigned char *minors, size_t n);

/* Finds in a /proc/net/tcp or tcp6 text the socket whose local end is (local, lport) and
 * remote end is (remote, rport) and writes its uid. Addresses are 16 bytes (IPv4 as
 * v4-mapped IPv6, ::ffff:a.b.c.d); ports in host order. Returns 1 when found, else 0. */
int gs_policy_proc_net_uid(const char *text, const unsigned char *local, unsigned lport,
                           const unsigned char *remote, unsigned rport, uid_t *uid);

#endif
