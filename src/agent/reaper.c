/*
 * The slow-client reaper (reaper.h): a doubly linked list of the open connections, each with
 * its socket and the deadline of its request head, under one mutex. The list entry is the
 * connection's MHD socket context, so finding it is a lookup, and it leaves the list before
 * MHD closes the descriptor: the reaper never shuts down a reused fd.
 */
#include "agent/reaper.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "agent/log.h"
#include "base/clock.h"

/* A connection whose request head has a deadline. */
struct conn_track {
    int fd;
    int64_t deadline_ns; /* INT64_MAX while a request is being answered */
    bool uid_known;
    uint32_t uid;           /* the local peer's (gs_reaper_set_uid_limit) */
    bool unix_door;         /* on the HTTP unix socket */
    unsigned char addr[16]; /* the TCP peer's address (IPv4 in the first four), 0s on unix */
    struct conn_track *prev, *next;
};

/* The uids and addresses whose refusal was logged (a full list forgets the oldest). */
#define LOGGED_UIDS 64
#define LOGGED_ADDRS 64

struct gs_reaper {
    pthread_mutex_t lock; /* guards all below */
    struct conn_track *conns;
    int64_t head_ns;
    unsigned per_uid; /* 0: no per-uid limit */
    bool (*uid_of)(int fd, uint32_t *uid);
    uint64_t uid_refused;
    uint64_t uid_refused_unix; /* of uid_refused: on the HTTP unix socket */
    uint64_t addr_refused;     /* by GS_REAPER_CONN_PER_ADDR (TCP only) */
    uint32_t logged[LOGGED_UIDS];
    unsigned n_logged;
    unsigned char logged_addr[LOGGED_ADDRS][16];
    unsigned n_logged_addr;
};

int gs_reaper_new(struct gs_reaper **out, int head_s, struct gs_err *err)
{
    struct gs_reaper *r = calloc(1, sizeof *r);

    *out = NULL;
    if (!r || pthread_mutex_init(&r->lock, NULL) != 0) {
        free(r);
        return gs_err_set(err, GS_ENOMEM, "http: reaper: out of memory");
    }
    r->head_ns = (int64_t)head_s * GS_NS_PER_S;
    *out = r;
    return GS_OK;
}

void gs_reaper_free(struct gs_reaper *r)
{
    if (!r)
        return;
    pthread_mutex_destroy(&r->lock);
    free(r);
}

static struct conn_track *track_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

    return ci ? ci->socket_context : NULL;
}

void gs_reaper_head_done(struct gs_reaper *r, struct MHD_Connection *c)
{
    struct conn_track *t = track_of(c);

    if (!t)
        return;
    pthread_mutex_lock(&r->lock);
    t->deadline_ns = INT64_MAX;
    pthread_mutex_unlock(&r->lock);
}

void gs_reaper_on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                            enum MHD_RequestTerminationCode toe)
{
    struct gs_reaper *r = cls;
    struct conn_track *t = track_of(c);

    (void)con_cls;
    (void)toe;
    if (!t)
        return;
    pthread_mutex_lock(&r->lock); /* the next request on a kept-alive connection */
    t->deadline_ns = gs_clock_mono_ns() + r->head_ns;
    pthread_mutex_unlock(&r->lock);
}

/* Whether uid was logged; records it (a full list forgets the oldest). */
static bool logged_has(struct gs_reaper *r, uint32_t uid)
{
    for (unsigned i = 0; i < r->n_logged; i++)
        if (r->logged[i] == uid)
            return true;
    if (r->n_logged == LOGGED_UIDS)
        memmove(r->logged, r->logged + 1, sizeof r->logged[0] * --r->n_logged);
    r->logged[r->n_logged++] = uid;
    return false;
}

/* Whether addr's refusal was logged; records it (a full list forgets the oldest). */
static bool logged_addr_has(struct gs_reaper *r, const unsigned char addr[16])
{
    for (unsigned i = 0; i < r->n_logged_addr; i++)
        if (memcmp(r->logged_addr[i], addr, 16) == 0)
            return true;
    if (r->n_logged_addr == LOGGED_ADDRS)
        memmove(r->logged_addr, r->logged_addr + 1, sizeof r->logged_addr[0] * --r->n_logged_addr);
    memcpy(r->logged_addr[r->n_logged_addr++], addr, 16);
    return false;
}

/* Whether t counts against the per-address limit: a TCP connection whose peer has no known
 * uid (remote) or is root's. A local user's loopback connection counts against its uid only,
 * so no local user can fill 127.0.0.1's share for the others. */
static bool by_address(const struct conn_track *t)
{
    return !t->unix_door && (!t->uid_known || t->uid == 0);
}

/* A new connection t, under the lock: shut down at once when its uid (other than root)
 * already holds per_uid connections, or, counted by address, when its address holds
 * GS_REAPER_CONN_PER_ADDR. Each refusal is counted and logged once per uid or address. */
static void admit(struct gs_reaper *r, struct conn_track *t)
{
    unsigned held = 0;
    char who[INET6_ADDRSTRLEN];

    if (by_address(t)) {
        for (struct conn_track *x = r->conns; x; x = x->next)
            held += by_address(x) && x->fd >= 0 && x->uid_known == t->uid_known &&
                    x->uid == t->uid && memcmp(x->addr, t->addr, 16) == 0;
        if (held < GS_REAPER_CONN_PER_ADDR)
            return;
        shutdown(t->fd, SHUT_RDWR);
        t->fd = -1;
        r->addr_refused++;
        if (logged_addr_has(r, t->addr))
            return;
        if (!memcmp(t->addr + 4, (const unsigned char[12]){0}, 12))
            inet_ntop(AF_INET, t->addr, who, sizeof who);
        else
            inet_ntop(AF_INET6, t->addr, who, sizeof who);
        gs_log(GS_LOG_WARN,
               "http: %s%s holds %u connections: refusing more of its connections (logged once)",
               who, t->uid_known ? " (root)" : "", held);
        return;
    }
    if (!r->per_uid || !t->uid_known || t->uid == 0)
        return;
    for (struct conn_track *x = r->conns; x; x = x->next)
        held += x->uid_known && x->uid == t->uid && x->fd >= 0;
    if (held < r->per_uid)
        return;
    if (t->unix_door)
        r->uid_refused_unix++;
    shutdown(t->fd, SHUT_RDWR);
    t->fd = -1;
    r->uid_refused++;
    if (!logged_has(r, t->uid))
        gs_log(GS_LOG_WARN,
               "http: uid %lu holds %u connections (http_conn_per_uid): refusing "
               "more of its connections (logged once)",
               (unsigned long)t->uid, held);
}

void gs_reaper_set_uid_limit(struct gs_reaper *r, unsigned per_uid,
                             bool (*uid_of)(int fd, uint32_t *uid))
{
    pthread_mutex_lock(&r->lock);
    r->per_uid = per_uid;
    r->uid_of = uid_of;
    pthread_mutex_unlock(&r->lock);
}

bool gs_reaper_conn_uid(struct MHD_Connection *c, uint32_t *uid)
{
    struct conn_track *t = track_of(c);

    if (!t || !t->uid_known) /* set before MHD sees the connection's first byte */
        return false;
    *uid = t->uid;
    return true;
}

uint64_t gs_reaper_uid_refused(struct gs_reaper *r)
{
    uint64_t n;

    pthread_mutex_lock(&r->lock);
    n = r->uid_refused;
    pthread_mutex_unlock(&r->lock);
    return n;
}

uint64_t gs_reaper_addr_refused(struct gs_reaper *r)
{
    uint64_t n;

    pthread_mutex_lock(&r->lock);
    n = r->addr_refused;
    pthread_mutex_unlock(&r->lock);
    return n;
}

uint64_t gs_reaper_uid_refused_unix(struct gs_reaper *r)
{
    uint64_t n;

    pthread_mutex_lock(&r->lock);
    n = r->uid_refused_unix;
    pthread_mutex_unlock(&r->lock);
    return n;
}

/* t's door and, on TCP, its peer's address (an IPv4-mapped IPv6 peer as IPv4). */
static void peer_of(struct conn_track *t)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;

    if (getsockname(t->fd, (struct sockaddr *)&ss, &len) == 0 && ss.ss_family == AF_UNIX) {
        t->unix_door = true;
        return;
    }
    len = sizeof ss;
    if (getpeername(t->fd, (struct sockaddr *)&ss, &len) != 0)
        return; /* every unknown peer shares the all-zero address */
    if (ss.ss_family == AF_INET) {
        memcpy(t->addr, &((const struct sockaddr_in *)(const void *)&ss)->sin_addr, 4);
    } else if (ss.ss_family == AF_INET6) {
        const struct in6_addr *a6 = &((const struct sockaddr_in6 *)(const void *)&ss)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a6))
            memcpy(t->addr, a6->s6_addr + 12, 4);
        else
            memcpy(t->addr, a6->s6_addr, 16);
    }
}

void gs_reaper_on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                             enum MHD_ConnectionNotificationCode toe)
{
    struct gs_reaper *r = cls;
    struct conn_track *t;
    bool (*uid_of)(int fd, uint32_t *uid);

    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!ci || !(t = calloc(1, sizeof *t)))
            return;
        t->fd = ci->connect_fd;
        t->deadline_ns = gs_clock_mono_ns() + r->head_ns;
        peer_of(t);
        pthread_mutex_lock(&r->lock);
        uid_of = r->uid_of;
        pthread_mutex_unlock(&r->lock);
        t->uid_known = uid_of && uid_of(t->fd, &t->uid); /* a syscall or two: unlocked */
        pthread_mutex_lock(&r->lock);
        admit(r, t);
        t->next = r->conns;
        if (r->conns)
            r->conns->prev = t;
        r->conns = t;
        pthread_mutex_unlock(&r->lock);
        *socket_context = t;
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED && (t = *socket_context) != NULL) {
        /* Before MHD closes the descriptor: the reaper never shuts down a reused fd. */
        pthread_mutex_lock(&r->lock);
        if (t->prev)
            t->prev->next = t->next;
        else
            r->conns = t->next;
        if (t->next)
            t->next->prev = t->prev;
        pthread_mutex_unlock(&r->lock);
        free(t);
        *socket_context = NULL;
    }
}

unsigned gs_reaper_reap(struct gs_reaper *r, int64_t now_ns)
{
    unsigned n = 0;

    pthread_mutex_lock(&r->lock);
    for (struct conn_track *t = r->conns; t; t = t->next)
        if (t->deadline_ns < now_ns && t->fd >= 0) {
            shutdown(t->fd, SHUT_RDWR);
            t->fd = -1;
            n++;
        }
    pthread_mutex_unlock(&r->lock);
    return n;
}
