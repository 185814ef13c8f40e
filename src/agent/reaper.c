/*
 * The slow-client reaper (reaper.h): a doubly linked list of the open connections, each with
 * its socket and the deadline of its request head, under one mutex. The list entry is the
 * connection's MHD socket context, so finding it is a lookup, and it leaves the list before
 * MHD closes the descriptor: the reaper never shuts down a reused fd.
 */
#include "agent/reaper.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "core/clock.h"

/* A connection whose request head has a deadline. */
struct conn_track {
    int fd;
    int64_t deadline_ns; /* INT64_MAX while a request is being answered */
    struct conn_track *prev, *next;
};

struct gs_reaper {
    pthread_mutex_t lock; /* guards conns */
    struct conn_track *conns;
    int64_t head_ns;
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

void gs_reaper_on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                             enum MHD_ConnectionNotificationCode toe)
{
    struct gs_reaper *r = cls;
    struct conn_track *t;

    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!ci || !(t = calloc(1, sizeof *t)))
            return;
        t->fd = ci->connect_fd;
        t->deadline_ns = gs_clock_mono_ns() + r->head_ns;
        pthread_mutex_lock(&r->lock);
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
