/*
 * The visibility policy (policy.h, docs/security.md "VISIBILITY POLICY"): who a local viewer
 * is, and the filtered copies of the agent's data that a non-admin viewer gets.
 *
 * Identity comes from the kernel, never from what a client says about itself: SO_PEERCRED on
 * the unix socket; for a loopback TCP peer the uid column of the /proc/net/tcp{,6} line of its
 * end of the connection (what identd answers); for a token mapped to a user, that user's uid.
 * Environment variables (SLURM_JOB_GPUS, CUDA_VISIBLE_DEVICES) are set by the user and so
 * widen nothing; the one grant beyond "GPUs where you run a process" is the nvidia device
 * list of the unix peer's cgroup v1 devices controller, which Slurm writes and the user
 * cannot.
 *
 * The filters work on a snapshot struct (for /metrics, rendered by metrics.c as usual) and on
 * the JSON documents the agent pre-renders (snapshot, processes, alerts), so a viewer's answer
 * has the same shape as an admin's, less what it may not see.
 */
/* _GNU_SOURCE (meson.build) gives struct ucred, SO_PEERCRED and getgrouplist. */
#include "agent/policy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <grp.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "backend/procfs.h"
#include "gpuscope/gs_err.h"

#define CACHE_SLOTS 64
#define CACHE_TTL_S 60
#define NSS_BUF 16384
#define GROUPS_MAX 1024
#define FILE_MAX (4 << 20) /* /proc/net/tcp of a busy host: 150 bytes a socket */
#define NVIDIA_MAJOR 195

struct id_slot {
    int used;
    uid_t uid;
    int admin;
    char user[64];
    time_t expires;
};

struct gs_policy {
    pthread_mutex_t lock; /* guards s and cache */
    struct gs_policy_settings s;
    struct id_slot cache[CACHE_SLOTS];
    uid_t self_uid;
};

int gs_policy_new(struct gs_policy **out, const struct gs_policy_settings *s, struct gs_err *err)
{
    struct gs_policy *p = calloc(1, sizeof *p);

    if (!p)
        return gs_err_set(err, GS_ENOMEM, "policy: out of memory");
    if (pthread_mutex_init(&p->lock, NULL) != 0) {
        free(p);
        return gs_err_set(err, GS_ENOMEM, "policy: pthread_mutex_init failed");
    }
    p->s = *s;
    p->self_uid = geteuid();
    *out = p;
    return GS_OK;
}

void gs_policy_set(struct gs_policy *p, const struct gs_policy_settings *s)
{
    pthread_mutex_lock(&p->lock);
    p->s = *s;
    memset(p->cache, 0, sizeof p->cache);
    pthread_mutex_unlock(&p->lock);
}

void gs_policy_free(struct gs_policy *p)
{
    if (!p)
        return;
    pthread_mutex_destroy(&p->lock);
    free(p);
}

/* ---- who: uid, name, admin ---- */

/* Whether uid (named user, primary group gid) is in the group named group. */
static int in_group(const char *user, gid_t gid, const char *group)
{
    struct group gr, *grp = NULL;
    gid_t groups[GROUPS_MAX], admin_gid;
    int n = GROUPS_MAX, rc;
    size_t len = NSS_BUF;
    char *buf = NULL;

    if (!group[0] || !user[0])
        return 0;
    /* A group with many members needs a larger buffer (ERANGE): up to 1 MiB. */
    do {
        char *nb = realloc(buf, len);
        if (!nb) {
            free(buf);
            return 0;
        }
        buf = nb;
        rc = getgrnam_r(group, &gr, buf, len, &grp);
        len *= 4;
    } while (rc == ERANGE && len <= (1u << 20) * 4);
    if (rc != 0 || !grp) {
        free(buf);
        return 0;
    }
    admin_gid = grp->gr_gid;
    free(buf);
    if (gid == admin_gid)
        return 1;
    if (getgrouplist(user, gid, groups, &n) < 0)
        return 0; /* more than GROUPS_MAX groups: not admin rather than a partial answer */
    for (int i = 0; i < n; i++)
        if (groups[i] == admin_gid)
            return 1;
    return 0;
}

/* Fills *admin and user (may stay "") for uid, from the cache or from NSS. */
static void lookup_uid(struct gs_policy *p, uid_t uid, int *admin, char *user, size_t len)
{
    time_t now = time(NULL);
    struct id_slot *slot = &p->cache[uid % CACHE_SLOTS];
    char group[GS_POLICY_GROUP_LEN];
    char buf[NSS_BUF];
    struct passwd pw, *pwp = NULL;
    int adm;

    pthread_mutex_lock(&p->lock);
    if (slot->used && slot->uid == uid && slot->expires > now) {
        *admin = slot->admin;
        snprintf(user, len, "%s", slot->user);
        pthread_mutex_unlock(&p->lock);
        return;
    }
    snprintf(group, sizeof group, "%s", p->s.admin_group);
    pthread_mutex_unlock(&p->lock);

    /* NSS may be slow (LDAP, sssd): outside the lock. */
    user[0] = '\0';
    if (getpwuid_r(uid, &pw, buf, sizeof buf, &pwp) == 0 && pwp)
        snprintf(user, len, "%s", pw.pw_name);
    adm = uid == 0 || uid == p->self_uid || (pwp && in_group(pw.pw_name, pw.pw_gid, group));
    *admin = adm;

    pthread_mutex_lock(&p->lock);
    slot->used = 1;
    slot->uid = uid;
    slot->admin = adm;
    snprintf(slot->user, sizeof slot->user, "%s", user);
    slot->expires = now + CACHE_TTL_S;
    pthread_mutex_unlock(&p->lock);
}

/* Reads a whole (small, /proc) file; NULL when it cannot. */
static char *read_text(const char *path)
{
    FILE *f = fopen(path, "re");
    char *buf = NULL;
    size_t len = 0, cap = 0;

    if (!f)
        return NULL;
    for (;;) {
        size_t n;
        if (cap - len < 4096) {
            char *nb;
            if (cap >= FILE_MAX || !(nb = realloc(buf, cap ? cap * 2 : 8192)))
                break;
            buf = nb;
            cap = cap ? cap * 2 : 8192;
        }
        n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0)
            break;
    }
    fclose(f);
    if (buf)
        buf[len] = '\0';
    return buf;
}

/* 16 bytes: IPv6 as is, IPv4 as ::ffff:a.b.c.d. Returns 0 for another family. */
static int addr16(const struct sockaddr_storage *ss, unsigned char *a, unsigned *port)
{
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)(const void *)ss;
        memset(a, 0, 10);
        a[10] = a[11] = 0xff;
        memcpy(a + 12, &s4->sin_addr, 4);
        *port = ntohs(s4->sin_port);
        return 1;
    }
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)(const void *)ss;
        memcpy(a, &s6->sin6_addr, 16);
        *port = ntohs(s6->sin6_port);
        return 1;
    }
    return 0;
}

static int is_loopback(const unsigned char *a)
{
    static const unsigned char v6lo[16] = {[15] = 1};
    static const unsigned char mapped[12] = {[10] = 0xff, [11] = 0xff};

    return memcmp(a, v6lo, 16) == 0 || (memcmp(a, mapped, 12) == 0 && a[12] == 127);
}

/* Parses "HEX:PORT" of /proc/net/tcp (8 hex digits) or tcp6 (32) into 16 bytes. The kernel
 * prints each 32-bit word of the address as a native-endian integer. */
static int parse_endpoint(const char *s, size_t n, unsigned char *a, unsigned *port)
{
    size_t hex = 0;
    char word[9];

    while (hex < n && s[hex] != ':')
        hex++;
    if (hex == n || (hex != 8 && hex != 32))
        return 0;
    memset(a, 0, 16);
    for (size_t w = 0; w < hex / 8; w++) {
        uint32_t v;
        char *end;
        memcpy(word, s + w * 8, 8);
        word[8] = '\0';
        v = (uint32_t)strtoul(word, &end, 16);
        if (*end)
            return 0;
        if (hex == 8) {
            a[10] = a[11] = 0xff;
            memcpy(a + 12, &v, 4);
        } else {
            memcpy(a + w * 4, &v, 4);
        }
    }
    {
        char pbuf[8];
        size_t pl = n - hex - 1;
        char *end;
        unsigned long pv;
        if (pl == 0 || pl >= sizeof pbuf)
            return 0;
        memcpy(pbuf, s + hex + 1, pl);
        pbuf[pl] = '\0';
        pv = strtoul(pbuf, &end, 16);
        if (*end || pv > 65535)
            return 0;
        *port = (unsigned)pv;
    }
    return 1;
}

int gs_policy_proc_net_uid(const char *text, const unsigned char *local, unsigned lport,
                           const unsigned char *remote, unsigned rport, uid_t *uid)
{
    const char *line = text;

    while (line && *line) {
        const char *nl = strchr(line, '\n');
        const char *end = nl ? nl : line + strlen(line);
        const char *tok[8];
        size_t tlen[8];
        unsigned nt = 0;
        const char *s = line;

        while (s < end && nt < 8) {
            while (s < end && (*s == ' ' || *s == '\t'))
                s++;
            if (s == end)
                break;
            tok[nt] = s;
            while (s < end && *s != ' ' && *s != '\t')
                s++;
            tlen[nt] = (size_t)(s - tok[nt]);
            nt++;
        }
        if (nt == 8) {
            unsigned char la[16], ra[16];
            unsigned lp, rp;
            if (parse_endpoint(tok[1], tlen[1], la, &lp) &&
                parse_endpoint(tok[2], tlen[2], ra, &rp) && lp == lport && rp == rport &&
                memcmp(la, local, 16) == 0 && memcmp(ra, remote, 16) == 0) {
                char ubuf[16];
                char *e;
                unsigned long u;
                if (tlen[7] == 0 || tlen[7] >= sizeof ubuf)
                    return 0;
                memcpy(ubuf, tok[7], tlen[7]);
                ubuf[tlen[7]] = '\0';
                u = strtoul(ubuf, &e, 10);
                if (*e)
                    return 0;
                *uid = (uid_t)u;
                return 1;
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    return 0;
}

/* The owner of one TCP socket, asked of the kernel by its exact 4-tuple (NETLINK_SOCK_DIAG,
 * what `ss` uses): one request, one answer, whatever the number of sockets on the machine.
 * src/sport: the peer's end (the socket we want), dst/dport: ours; 16-byte addresses, v4
 * mapped ones asked as AF_INET. Returns 1 with *uid, 0 when the kernel does not answer (no
 * sock_diag, a sandbox without AF_NETLINK) or knows no such socket. */
static int sock_diag_uid(const unsigned char *src, unsigned sport, const unsigned char *dst,
                         unsigned dport, uid_t *uid)
{
    static const unsigned char mapped[12] = {[10] = 0xff, [11] = 0xff};
    struct {
        struct nlmsghdr nh;
        struct inet_diag_req_v2 r;
    } req;
    union {
        struct nlmsghdr nh;
        char buf[1024];
    } ans;
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    struct timeval tv = {.tv_sec = 0, .tv_usec = 200000};
    int v4 = memcmp(src, mapped, 12) == 0 && memcmp(dst, mapped, 12) == 0;
    int fd, found = 0;
    ssize_t n;

    memset(&req, 0, sizeof req);
    req.nh.nlmsg_len = sizeof req;
    req.nh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    req.nh.nlmsg_flags = NLM_F_REQUEST;
    req.nh.nlmsg_seq = 1;
    req.r.sdiag_family = v4 ? AF_INET : AF_INET6;
    req.r.sdiag_protocol = IPPROTO_TCP;
    req.r.idiag_states = ~0u;
    req.r.id.idiag_sport = htons((uint16_t)sport);
    req.r.id.idiag_dport = htons((uint16_t)dport);
    memcpy(req.r.id.idiag_src, v4 ? src + 12 : src, v4 ? 4 : 16);
    memcpy(req.r.id.idiag_dst, v4 ? dst + 12 : dst, v4 ? 4 : 16);
    req.r.id.idiag_cookie[0] = req.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (fd < 0)
        return 0;
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (sendto(fd, &req, sizeof req, 0, (struct sockaddr *)&kernel, sizeof kernel) ==
        (ssize_t)sizeof req) {
        n = recv(fd, &ans, sizeof ans, 0);
        if (n >= (ssize_t)NLMSG_LENGTH(sizeof(struct inet_diag_msg)) && NLMSG_OK(&ans.nh, n) &&
            ans.nh.nlmsg_type == SOCK_DIAG_BY_FAMILY) {
            const struct inet_diag_msg *m = NLMSG_DATA(&ans.nh);
            *uid = (uid_t)m->idiag_uid;
            found = 1;
        }
    }
    close(fd);
    return found;
}

/* The uid of the loopback TCP peer on fd: the owner of the socket whose local end is our
 * remote end. Asked of sock_diag; the /proc/net/tcp{,6} scan (as long as the machine's socket
 * table) only where netlink is closed. */
static int tcp_peer_uid(int fd, uid_t *uid)
{
    struct sockaddr_storage me, peer;
    socklen_t ml = sizeof me, pl = sizeof peer;
    unsigned char ma[16], pa[16];
    unsigned mp, pp;
    static const char *const files[] = {"/proc/net/tcp", "/proc/net/tcp6"};

    if (getsockname(fd, (struct sockaddr *)&me, &ml) != 0 ||
        getpeername(fd, (struct sockaddr *)&peer, &pl) != 0)
        return 0;
    if (!addr16(&me, ma, &mp) || !addr16(&peer, pa, &pp) || !is_loopback(pa))
        return 0;
    if (sock_diag_uid(pa, pp, ma, mp, uid))
        return 1;
    for (size_t i = 0; i < 2; i++) {
        char *text = read_text(files[i]);
        int found = text && gs_policy_proc_net_uid(text, pa, pp, ma, mp, uid);
        free(text);
        if (found)
            return 1;
    }
    return 0;
}

bool gs_policy_peer_uid(int fd, uint32_t *uid)
{
    struct sockaddr_storage me;
    socklen_t ml = sizeof me;
    struct ucred cr;
    socklen_t cl = sizeof cr;
    uid_t u;

    if (getsockname(fd, (struct sockaddr *)&me, &ml) != 0)
        return false;
    if (me.ss_family == AF_UNIX) {
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0)
            return false;
        *uid = (uint32_t)cr.uid;
        return true;
    }
    if (!tcp_peer_uid(fd, &u))
        return false;
    *uid = (uint32_t)u;
    return true;
}

/* Whether the policy shows everything to everyone (all/all). */
static bool policy_is_open(struct gs_policy *p)
{
    bool open;

    pthread_mutex_lock(&p->lock);
    open = p->s.process_visibility == GS_PROCVIS_ALL && p->s.gpu_visibility == GS_GPUVIS_ALL;
    pthread_mutex_unlock(&p->lock);
    return open;
}

void gs_policy_resolve(struct gs_policy *p, struct MHD_Connection *c, struct gs_viewer *v,
                       pid_t *peer_pid)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    int fd = ci ? ci->connect_fd : -1;
    struct sockaddr_storage me;
    socklen_t ml = sizeof me;
    int admin = 0;
    char user[64];

    if (peer_pid)
        *peer_pid = 0;
    if (fd >= 0 && getsockname(fd, (struct sockaddr *)&me, &ml) == 0 && me.ss_family == AF_UNIX) {
        struct ucred cr;
        socklen_t cl = sizeof cr;
        /* The kernel's word wins over any header: a local viewer is who it runs as. */
        v->via = GS_VIA_UNIX;
        v->uid_known = false;
        v->user[0] = '\0';
        v->role = GS_ROLE_VIEWER;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0) {
            v->uid = cr.uid;
            v->uid_known = true;
            if (peer_pid)
                *peer_pid = cr.pid;
        }
    } else {
        v->via = GS_VIA_TCP;
        if (v->role != GS_ROLE_VIEWER && v->role != GS_ROLE_ADMIN)
            return;
        if (!v->uid_known && v->user[0]) {
            char buf[NSS_BUF];
            struct passwd pw, *pwp = NULL;
            if (getpwnam_r(v->user, &pw, buf, sizeof buf, &pwp) == 0 && pwp) {
                v->uid = pw.pw_uid;
                v->uid_known = true;
            }
        } else if (!v->uid_known && !v->user[0] && fd >= 0 && v->role == GS_ROLE_VIEWER &&
                   !policy_is_open(p)) {
            uid_t u;
            /* Reading /proc/net/tcp only matters when a viewer may be filtered. */
            if (tcp_peer_uid(fd, &u)) {
                v->uid = u;
                v->uid_known = true;
            }
        }
    }
    if (!v->uid_known)
        return;
    lookup_uid(p, v->uid, &admin, user, sizeof user);
    if (!v->user[0])
        snprintf(v->user, sizeof v->user, "%s", user);
    if (admin)
        v->role = GS_ROLE_ADMIN;
}

bool gs_policy_unix_rate_addr(struct MHD_Connection *c, struct sockaddr_in6 *out)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    struct sockaddr_storage me;
    socklen_t ml = sizeof me;
    struct ucred cr;
    socklen_t cl = sizeof cr;
    uint32_t uid;

    if (!ci || getsockname(ci->connect_fd, (struct sockaddr *)&me, &ml) != 0 ||
        me.ss_family != AF_UNIX ||
        getsockopt(ci->connect_fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0)
        return false;
    memset(out, 0, sizeof *out);
    out->sin6_family = AF_INET6;
    out->sin6_addr.s6_addr[0] = 0x01; /* 100::/64, RFC 6666 */
    uid = htonl((uint32_t)cr.uid);
    memcpy(&out->sin6_addr.s6_addr[12], &uid, 4);
    return true;
}

bool gs_policy_filters(struct gs_policy *p, const struct gs_viewer *v)
{
    return v->role == GS_ROLE_VIEWER && !policy_is_open(p);
}

/* ---- what: the view and the filters ---- */

static bool proc_is_viewers(const struct gs_policy_view *view, const struct gs_proc *pr)
{
    return view->uid_known && pr->host_st == GS_ST_OK && pr->uid == (uint32_t)view->uid;
}

/* Whether a process is shown in full. */
static bool proc_shown(const struct gs_policy_view *view, const struct gs_proc *pr)
{
    if (!view->filtered || view->process_visibility == GS_PROCVIS_ALL)
        return true;
    return view->process_visibility == GS_PROCVIS_OWN && proc_is_viewers(view, pr);
}

void gs_policy_view_build(struct gs_policy_view *view, const struct gs_policy_settings *s,
                          const struct gs_viewer *v, const struct gs_snapshot *snap,
                          const unsigned char *cgroup_minors, size_t n_minors)
{
    memset(view, 0, sizeof *view);
    view->filtered = v->role == GS_ROLE_VIEWER && !(s->process_visibility == GS_PROCVIS_ALL &&
                                                    s->gpu_visibility == GS_GPUVIS_ALL);
    view->uid_known = v->uid_known;
    view->uid = v->uid;
    view->process_visibility = s->process_visibility;
    if (!view->filtered || s->gpu_visibility == GS_GPUVIS_ALL) {
        memset(view->gpu_visible, 1, sizeof view->gpu_visible);
        return;
    }
    if (!snap)
        return;
    for (unsigned i = 0; i < snap->n_procs; i++) {
        const struct gs_proc *pr = &snap->procs[i];
        if (pr->gpu < snap->n_gpus && proc_is_viewers(view, pr) &&
            snap->gpus[pr->gpu].index < GS_POLICY_GPU_MAX)
            view->gpu_visible[snap->gpus[pr->gpu].index] = 1;
    }
    for (unsigned i = 0; cgroup_minors && i < snap->n_gpus; i++) {
        const struct gs_gpu *g = &snap->gpus[i];
        if (gs_gpu_has(g, GS_M_MINOR) && g->v[GS_M_MINOR] >= 0 &&
            g->v[GS_M_MINOR] < (double)n_minors && cgroup_minors[(size_t)g->v[GS_M_MINOR]] &&
            g->index < GS_POLICY_GPU_MAX)
            view->gpu_visible[g->index] = 1;
    }
}

unsigned gs_policy_parse_devices_list(const char *text, unsigned char *minors, size_t n)
{
    unsigned set = 0;
    const char *line = text;

    while (line && *line) {
        char type;
        unsigned major, minor;
        char acc[8];
        if (sscanf(line, " %c %u:%u %7s", &type, &major, &minor, acc) == 4 && type == 'c' &&
            major == NVIDIA_MAJOR && minor < 255 && minor < n && strchr(acc, 'r') &&
            strchr(acc, 'w') && !minors[minor]) {
            minors[minor] = 1;
            set++;
        }
        line = strchr(line, '\n');
        if (line)
            line++;
    }
    return set;
}

/* The nvidia minors the cgroup v1 devices controller of pid allows; 0 when none is known
 * (cgroup v2 enforces devices with eBPF, which cannot be read back). */
static unsigned cgroup_minors(pid_t pid, unsigned char *minors, size_t n)
{
    char *list = gs_procfs_read_devices_list(NULL, NULL, (unsigned)pid);
    unsigned got = list ? gs_policy_parse_devices_list(list, minors, n) : 0;

    free(list);
    return got;
}

void gs_policy_view(struct gs_policy *p, struct gs_policy_view *view, const struct gs_viewer *v,
                    pid_t peer_pid, const struct gs_snapshot *snap)
{
    struct gs_policy_settings s;
    unsigned char minors[255] = {0};
    unsigned got = 0;

    pthread_mutex_lock(&p->lock);
    s = p->s;
    pthread_mutex_unlock(&p->lock);
    if (s.gpu_visibility == GS_GPUVIS_USED && peer_pid > 0 && v->uid_known)
        got = cgroup_minors(peer_pid, minors, sizeof minors);
    gs_policy_view_build(view, &s, v, snap, got ? minors : NULL, sizeof minors);
}

bool gs_policy_gpu_visible(const struct gs_policy_view *view, unsigned gpu)
{
    return gpu < GS_POLICY_GPU_MAX && view->gpu_visible[gpu];
}

struct gs_snapshot *gs_policy_filter_snapshot(const struct gs_policy_view *view,
                                              const struct gs_snapshot *snap)
{
    struct gs_snapshot *out = NULL;
    unsigned map[GS_POLICY_GPU_MAX];
    unsigned n_gpus = 0, n_procs = 0;

    for (unsigned i = 0; i < snap->n_gpus; i++)
        if (i < GS_POLICY_GPU_MAX && gs_policy_gpu_visible(view, snap->gpus[i].index))
            map[i] = n_gpus++;
        else if (i < GS_POLICY_GPU_MAX)
            map[i] = UINT32_MAX;
    for (unsigned i = 0; i < snap->n_procs; i++) {
        const struct gs_proc *pr = &snap->procs[i];
        n_procs += pr->gpu < snap->n_gpus && pr->gpu < GS_POLICY_GPU_MAX &&
                   map[pr->gpu] != UINT32_MAX && proc_shown(view, pr);
    }
    if (gs_snapshot_new(&out, n_gpus, n_procs ? n_procs : 1, NULL) != GS_OK)
        return NULL;
    out->sys = snap->sys;
    out->sys.gpu_count = n_gpus;
    out->t_real = snap->t_real;
    out->t_mono_ns = snap->t_mono_ns;
    for (unsigned i = 0; i < snap->n_gpus && i < GS_POLICY_GPU_MAX; i++)
        if (map[i] != UINT32_MAX) {
            struct gs_gpu *g = &out->gpus[map[i]];
            *g = snap->gpus[i];
            if (view->filtered && view->process_visibility != GS_PROCVIS_ALL) {
                g->hidden_st = g->hidden_mem_st = GS_ST_OK;
                g->hidden_count = 0;
                g->hidden_mem_bytes = 0;
            }
        }
    for (unsigned i = 0; i < snap->n_procs; i++) {
        const struct gs_proc *pr = &snap->procs[i];
        struct gs_gpu *g;
        if (pr->gpu >= snap->n_gpus || pr->gpu >= GS_POLICY_GPU_MAX || map[pr->gpu] == UINT32_MAX)
            continue;
        if (proc_shown(view, pr)) {
            out->procs[out->n_procs] = *pr;
            out->procs[out->n_procs].gpu = map[pr->gpu];
            out->n_procs++;
            continue;
        }
        /* Memory of processes NVML could not size is unknown: the sum is too, unless none. */
        g = &out->gpus[map[pr->gpu]];
        g->hidden_count++;
        if (pr->mem_st == GS_ST_OK)
            g->hidden_mem_bytes += pr->gpu_mem_bytes;
        else
            g->hidden_mem_st = GS_ST_NA;
    }
    return out;
}

int gs_policy_alert_shown(void *vview, int gpu)
{
    const struct gs_policy_view *view = vview;

    return !view->filtered || gpu < 0 || gs_policy_gpu_visible(view, (unsigned)gpu);
}

void gs_policy_runs_owner(const struct gs_policy_view *view, int *all, int64_t *uid)
{
    *all = !view->filtered || view->process_visibility == GS_PROCVIS_ALL;
    *uid = view->process_visibility == GS_PROCVIS_OWN && view->uid_known ? (int64_t)view->uid : -1;
}
