/*
 * The HTTP rate limiter (ratelimit.h): an open-addressed table of token buckets keyed by the
 * client's address (16 bytes: IPv4 in the first four, IPv6 whole; the unix socket's callers
 * pass a uid mapped into 100::/64, policy.h), FNV-1a hashed, probed linearly RL_PROBE slots.
 * Until this module the table lived in agent.c as "the MHD thread's own" while two daemons
 * (and during a TLS reload three) called it: now every check holds rl->lock.
 */
#include "agent/ratelimit.h"

#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define RL_SLOTS 1024 /* client addresses tracked */
#define RL_PROBE 8

/* One client address's token bucket. */
struct rl_slot {
    unsigned char addr[16];
    int used;
    double tokens;
    int64_t t_ns;
};

struct gs_ratelimit {
    pthread_mutex_t lock; /* guards slot */
    struct rl_slot slot[RL_SLOTS];
};

int gs_ratelimit_new(struct gs_ratelimit **out, struct gs_err *err)
{
    struct gs_ratelimit *rl = calloc(1, sizeof *rl);

    *out = NULL;
    if (!rl || pthread_mutex_init(&rl->lock, NULL) != 0) {
        free(rl);
        return gs_err_set(err, GS_ENOMEM, "http: rate limiter: out of memory");
    }
    *out = rl;
    return GS_OK;
}

void gs_ratelimit_free(struct gs_ratelimit *rl)
{
    if (!rl)
        return;
    pthread_mutex_destroy(&rl->lock);
    free(rl);
}

/* The table key of sa; other families than IPv4 and IPv6 share the all-zero key. */
static void addr_key(const struct sockaddr *sa, unsigned char key[16])
{
    memset(key, 0, 16);
    if (sa->sa_family == AF_INET)
        memcpy(key, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
    else if (sa->sa_family == AF_INET6)
        memcpy(key, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
}

/* The slot of key, or the one it takes (fresh, with a full bucket). Under rl->lock. */
static struct rl_slot *find_slot(struct gs_ratelimit *rl, const unsigned char key[16], double burst,
                                 int64_t now_ns)
{
    uint32_t h = 2166136261u;
    struct rl_slot *oldest = NULL;

    for (size_t k = 0; k < 16; k++)
        h = (h ^ key[k]) * 16777619u;
    for (unsigned k = 0; k < RL_PROBE; k++) {
        struct rl_slot *e = &rl->slot[(h + k) % RL_SLOTS];
        if (e->used && memcmp(e->addr, key, 16) == 0)
            return e;
        if (!oldest || !e->used || (oldest->used && e->t_ns < oldest->t_ns))
            oldest = e;
    }
    memcpy(oldest->addr, key, 16);
    oldest->used = 1;
    oldest->tokens = burst;
    oldest->t_ns = now_ns;
    return oldest;
}

static bool take_key(struct gs_ratelimit *rl, const unsigned char key[16], double rate,
                     double burst, int64_t now_ns)
{
    struct rl_slot *s;
    bool ok;

    pthread_mutex_lock(&rl->lock);
    s = find_slot(rl, key, burst, now_ns);
    if (now_ns > s->t_ns) /* two daemons' clocks read in either order: never backwards */
        s->tokens = fmin(burst, s->tokens + rate * (double)(now_ns - s->t_ns) / 1e9);
    s->t_ns = now_ns > s->t_ns ? now_ns : s->t_ns;
    ok = s->tokens >= 1;
    if (ok)
        s->tokens -= 1;
    pthread_mutex_unlock(&rl->lock);
    return ok;
}

bool gs_ratelimit_take(struct gs_ratelimit *rl, const struct sockaddr *sa, double rate,
                       double burst, int64_t now_ns)
{
    unsigned char key[16];

    if (rate <= 0 || !sa)
        return true;
    addr_key(sa, key);
    return take_key(rl, key, rate, burst, now_ns);
}

bool gs_ratelimit_take_uid(struct gs_ratelimit *rl, uint32_t uid, double rate, double burst,
                           int64_t now_ns)
{
    /* ff00::/8 with "uid" and the uid: no address family of addr_key makes this key */
    unsigned char key[16] = {0xff, 0, 'u', 'i', 'd'};

    if (rate <= 0)
        return true;
    memcpy(key + 12, &uid, 4);
    return take_key(rl, key, rate, burst, now_ns);
}
