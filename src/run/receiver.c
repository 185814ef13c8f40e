/*
 * receiver.c - the step-record socket server (contract in receiver.h).
 *
 * One thread polls the listening socket, a wake-up pipe and every connection. A new
 * connection's peer is read once with SO_PEERCRED; only the receiver's own effective uid and
 * root may send (anyone else is counted as rejected and closed at once, although the caller
 * also keeps the socket in a 0700 directory), unless GS_RECEIVER_ANY_UID lets every uid in. Each
 * SOCK_SEQPACKET message is read with MSG_TRUNC so that an oversized message is seen at its real
 * length and refused instead of being parsed cut. A connection that sends GS_RECEIVER_MAX_BAD bad
 * messages in a row is closed; one good record resets its count. Messages of one connection are
 * drained at most RECV_BURST at a time so a flooding sender cannot starve the others, and a uid
 * other than root may hold at most conn_per_uid connections (issue 18).
 */
#include "run/receiver.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/clock.h"
#include "gpuscope/gs_err.h"

#define RECV_BURST 64
#define RX_DRAIN_MAX 4096

struct rx_conn {
    int fd;
    unsigned bad_in_row;
    struct gs_peer peer;
};

struct gs_receiver {
    int lfd;
    int wake[2];
    pthread_t thread;
    int thread_started;
    uid_t owner;
    unsigned flags;        /* GS_RECEIVER_* */
    unsigned conn_per_uid; /* 0: no per-uid limit */
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    struct gs_receiver_cb cb;
    uint64_t next_conn_id;
    unsigned n_conn;
    struct rx_conn conn[GS_RECEIVER_MAX_CONN];
    /* Guards stats, and the connection table's changes (made on the receiver's thread only,
     * which reads it without the lock) against gs_receiver_send on other threads. */
    pthread_mutex_t lock;
    struct gs_receiver_stats stats;
    char buf[GS_RECORD_MAX + 1];
    struct gs_record rec;
};

static void rx_count(struct gs_receiver *r, uint64_t *field)
{
    pthread_mutex_lock(&r->lock);
    (*field)++;
    pthread_mutex_unlock(&r->lock);
}

static void rx_reject(struct gs_receiver *r, const struct gs_peer *peer, const char *why)
{
    rx_count(r, &r->stats.rejected);
    if (r->cb.on_reject)
        r->cb.on_reject(r->cb.ctx, peer, why);
}

/* Closes connection i and moves the last one into its slot. */
static void rx_drop(struct gs_receiver *r, unsigned i)
{
    struct gs_peer peer = r->conn[i].peer;

    pthread_mutex_lock(&r->lock);
    close(r->conn[i].fd);
    r->conn[i] = r->conn[--r->n_conn];
    pthread_mutex_unlock(&r->lock);
    if (r->cb.on_close)
        r->cb.on_close(r->cb.ctx, &peer);
}

static void rx_accept(struct gs_receiver *r)
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    struct gs_peer peer = {.pid = -1, .uid = (uid_t)-1, .gid = (gid_t)-1};
    int fd = accept4(r->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

    if (fd < 0)
        return; /* EAGAIN, ECONNABORTED, EMFILE: nothing to do now */
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
        close(fd);
        rx_reject(r, &peer, "SO_PEERCRED failed");
        return;
    }
    peer.pid = cred.pid;
    peer.uid = cred.uid;
    peer.gid = cred.gid;
    peer.conn_id = ++r->next_conn_id;
    if (!(r->flags & GS_RECEIVER_ANY_UID) && cred.uid != r->owner && cred.uid != 0) {
        char why[96];

        close(fd);
        snprintf(why, sizeof why, "uid %u may not send records (owner uid %u)", (unsigned)cred.uid,
                 (unsigned)r->owner);
        rx_reject(r, &peer, why);
        return;
    }
    if (r->n_conn >= GS_RECEIVER_MAX_CONN) {
        close(fd);
        rx_count(r, &r->stats.refused_full);
        if (r->cb.on_refuse)
            r->cb.on_refuse(r->cb.ctx, &peer, GS_RECEIVER_FULL);
        return;
    }
    if (r->conn_per_uid && cred.uid != 0) {
        unsigned held = 0;
        for (unsigned i = 0; i < r->n_conn; i++)
            held += r->conn[i].peer.uid == cred.uid;
        if (held >= r->conn_per_uid) {
            close(fd);
            rx_count(r, &r->stats.refused_uid);
            if (r->cb.on_refuse)
                r->cb.on_refuse(r->cb.ctx, &peer, GS_RECEIVER_UID_CONN);
            return;
        }
    }
    pthread_mutex_lock(&r->lock);
    r->conn[r->n_conn].fd = fd;
    r->conn[r->n_conn].bad_in_row = 0;
    r->conn[r->n_conn].peer = peer;
    r->n_conn++;
    pthread_mutex_unlock(&r->lock);
    rx_count(r, &r->stats.connections);
}

/* Handles one message of connection c; returns -1 when c must be closed for bad records. */
static int rx_message(struct gs_receiver *r, struct rx_conn *c, size_t n)
{
    struct gs_err why;

    gs_err_clear(&why);
    if (n > GS_RECORD_MAX) {
        gs_err_set(&why, GS_EPARSE, "message of %zu bytes exceeds %d", n, GS_RECORD_MAX);
    } else if (gs_record_parse(r->buf, n, &r->rec, &why) == GS_OK) {
        c->bad_in_row = 0;
        rx_count(r, &r->stats.records);
        r->cb.on_record(r->cb.ctx, &c->peer, &r->rec);
        return 0;
    }
    rx_reject(r, &c->peer, why.msg);
    if (++c->bad_in_row >= GS_RECEIVER_MAX_BAD) {
        rx_count(r, &r->stats.closed_bad);
        return -1;
    }
    return 0;
}

/* Reads up to RECV_BURST messages; returns -1 when connection i is to be dropped. */
static int rx_read(struct gs_receiver *r, unsigned i)
{
    for (int k = 0; k < RECV_BURST; k++) {
        ssize_t n = recv(r->conn[i].fd, r->buf, GS_RECORD_MAX, MSG_DONTWAIT | MSG_TRUNC);

        if (n < 0)
            return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? 0 : -1;
        if (n == 0)
            return -1; /* end of stream (an empty message is no record either) */
        if (rx_message(r, &r->conn[i], (size_t)n) != 0)
            return -1;
    }
    return 0;
}

/* At stop: what a sender already sent (it is in the socket, its send returned) is read
 * before the connection closes, so that an agent restart loses no step that reached it.
 * Bounded: a socket's queue holds a few hundred records at most. */
static void rx_drain(struct gs_receiver *r, unsigned i)
{
    for (int k = 0; k < RX_DRAIN_MAX; k++) {
        ssize_t n = recv(r->conn[i].fd, r->buf, GS_RECORD_MAX, MSG_DONTWAIT | MSG_TRUNC);

        if (n <= 0 || rx_message(r, &r->conn[i], (size_t)n) != 0)
            return;
    }
}

static void *rx_thread(void *arg)
{
    struct gs_receiver *r = arg;
    struct pollfd pfd[GS_RECEIVER_MAX_CONN + 2];
    int64_t next_tick = gs_clock_mono_ns() + GS_NS_PER_S;
    int ticking = r->cb.on_tick != NULL; /* on_tick wants its ticks (receiver.h) */
    int got;

    pthread_setname_np(pthread_self(), "gs-steps"); /* per-thread figures (top -H) */

    for (;;) {
        unsigned n = r->n_conn;
        int64_t now = gs_clock_mono_ns();

        pfd[0] = (struct pollfd){.fd = r->wake[0], .events = POLLIN};
        pfd[1] = (struct pollfd){.fd = r->lfd, .events = POLLIN};
        for (unsigned i = 0; i < n; i++)
            pfd[2 + i] = (struct pollfd){.fd = r->conn[i].fd, .events = POLLIN};
        if (ticking && now >= next_tick) {
            ticking = r->cb.on_tick(r->cb.ctx) != 0;
            next_tick = now + GS_NS_PER_S;
        }
        got = poll(pfd, n + 2, ticking ? (int)((next_tick - now) / 1000000 + 1) : -1);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (got > 0 && !ticking && r->cb.on_tick) { /* an event: ticks again from now */
            ticking = 1;
            next_tick = gs_clock_mono_ns() + GS_NS_PER_S;
        }
        if (pfd[0].revents)
            break;
        /* Connections first, from the last so that rx_drop's swap-with-last never moves an
         * unvisited one into a visited slot. */
        for (unsigned i = n; i-- > 0;) {
            if (!pfd[2 + i].revents)
                continue;
            if ((pfd[2 + i].revents & POLLIN) ? rx_read(r, i) != 0 : 1)
                rx_drop(r, i);
        }
        if (pfd[1].revents & POLLIN)
            rx_accept(r);
    }
    for (unsigned i = r->n_conn; i-- > 0;)
        rx_drain(r, i);
    while (r->n_conn > 0)
        rx_drop(r, r->n_conn - 1);
    return NULL;
}

/* Binds lfd to path; an existing socket file is replaced only when nobody answers on it. */
static int rx_bind(int lfd, const struct sockaddr_un *sa, struct gs_err *err)
{
    if (bind(lfd, (const struct sockaddr *)sa, sizeof *sa) == 0)
        return GS_OK;
    if (errno == EADDRINUSE) {
        struct stat st;
        int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        int answered = probe >= 0 && connect(probe, (const struct sockaddr *)sa, sizeof *sa) == 0;
        int conn_errno = errno;

        if (probe >= 0)
            close(probe);
        if (answered) {
            return gs_err_set(err, GS_EIO, "receiver: %s: another receiver is listening",
                              sa->sun_path);
        }
        if (conn_errno == ECONNREFUSED && lstat(sa->sun_path, &st) == 0 && S_ISSOCK(st.st_mode) &&
            unlink(sa->sun_path) == 0 && bind(lfd, (const struct sockaddr *)sa, sizeof *sa) == 0)
            return GS_OK;
    }
    return gs_err_set(err, errno == EACCES || errno == EPERM ? GS_EPERM : GS_EIO,
                      "receiver: bind(%s): %s", sa->sun_path, strerror(errno));
}

int gs_receiver_start(struct gs_receiver **out, const char *path, mode_t mode,
                      const struct gs_receiver_cb *cb, struct gs_err *err)
{
    return gs_receiver_start_flags(out, path, mode, 0, cb, err);
}

int gs_receiver_start_flags(struct gs_receiver **out, const char *path, mode_t mode, unsigned flags,
                            const struct gs_receiver_cb *cb, struct gs_err *err)
{
    return gs_receiver_start_limited(out, path, mode, flags, 0, cb, err);
}

int gs_receiver_start_limited(struct gs_receiver **out, const char *path, mode_t mode,
                              unsigned flags, unsigned conn_per_uid,
                              const struct gs_receiver_cb *cb, struct gs_err *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct gs_receiver *r;
    int rc = GS_EIO;

    if (!path || !cb || !cb->on_record) {
        return gs_err_set(err, GS_EINVAL, "receiver: path and on_record are required");
    }
    if (strlen(path) >= sizeof sa.sun_path) {
        return gs_err_set(err, GS_EINVAL,
                          "receiver: socket path too long (%zu bytes, limit %zu): %s", strlen(path),
                          sizeof sa.sun_path - 1, path);
    }
    r = calloc(1, sizeof *r);
    if (!r) {
        return gs_err_set(err, GS_ENOMEM, "receiver: out of memory");
    }
    r->lfd = -1;
    r->wake[0] = r->wake[1] = -1;
    r->cb = *cb;
    r->owner = geteuid();
    r->flags = flags;
    r->conn_per_uid = conn_per_uid;
    pthread_mutex_init(&r->lock, NULL);
    strcpy(sa.sun_path, path);
    strcpy(r->path, path);
    r->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (r->lfd < 0) {
        rc = gs_err_set(err, GS_EIO, "receiver: socket: %s", strerror(errno));
        goto fail;
    }
    if ((rc = rx_bind(r->lfd, &sa, err)) != GS_OK) {
        r->path[0] = '\0'; /* not ours: never unlink it */
        goto fail;
    }
    if (chmod(path, mode) != 0 || listen(r->lfd, 64) != 0) {
        rc = gs_err_set(err, GS_EIO, "receiver: chmod/listen(%s): %s", path, strerror(errno));
        goto fail;
    }
    if (pipe2(r->wake, O_CLOEXEC) != 0) {
        rc = gs_err_set(err, GS_EIO, "receiver: pipe: %s", strerror(errno));
        goto fail;
    }
    if (pthread_create(&r->thread, NULL, rx_thread, r) != 0) {
        rc = gs_err_set(err, GS_ENOMEM, "receiver: cannot start thread");
        goto fail;
    }
    r->thread_started = 1;
    *out = r;
    return GS_OK;
fail:
    gs_receiver_stop(r);
    return rc;
}

void gs_receiver_stats(const struct gs_receiver *r, struct gs_receiver_stats *out)
{
    struct gs_receiver *w = (struct gs_receiver *)r; /* the lock only */

    pthread_mutex_lock(&w->lock);
    *out = r->stats;
    pthread_mutex_unlock(&w->lock);
}

int gs_receiver_backlog(const struct gs_receiver *r)
{
    struct pollfd p = {.fd = r->lfd, .events = POLLIN};

    return poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

void gs_receiver_stop(struct gs_receiver *r)
{
    if (!r)
        return;
    if (r->thread_started) {
        ssize_t w;

        do
            w = write(r->wake[1], "x", 1);
        while (w < 0 && errno == EINTR);
        pthread_join(r->thread, NULL);
    }
    if (r->lfd >= 0)
        close(r->lfd);
    if (r->wake[0] >= 0)
        close(r->wake[0]);
    if (r->wake[1] >= 0)
        close(r->wake[1]);
    if (r->path[0])
        unlink(r->path);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

int gs_receiver_send(struct gs_receiver *r, uint64_t conn_id, const void *msg, size_t len)
{
    int rc = -1;

    if (!r)
        return -1;
    pthread_mutex_lock(&r->lock);
    for (unsigned i = 0; i < r->n_conn; i++)
        if (r->conn[i].peer.conn_id == conn_id) {
            ssize_t n = send(r->conn[i].fd, msg, len, MSG_DONTWAIT | MSG_NOSIGNAL);
            rc = n == (ssize_t)len ? 0 : -1;
            break;
        }
    pthread_mutex_unlock(&r->lock);
    return rc;
}
