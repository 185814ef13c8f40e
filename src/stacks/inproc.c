/*
 * The in-process sampler (include/gpuscope/gs_stacks.h): a native thread that reads this
 * process's Python stacks through gs_pyread_open_self (process_vm_readv on ourselves, or
 * /proc/self/mem) and folds them into a profile that gs_stacks_self_write saves. One mutex
 * guards the profile between the sampler thread and the writer.
 */
#include "gpuscope/gs_stacks.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/dirfile.h"
#include "base/ticker.h"
#include "gpuscope/gs_err.h"
#include "stacks/collect.h"
#include "stacks/flame.h"
#include "stacks/profile.h"
#include "stacks/pyread.h"

struct gs_stacks_self {
    struct gs_pyread *r;
    struct gs_stackprof *prof;
    struct gs_collect *col;
    struct gs_pysample *s;
    double hz;
    int main_only;
    struct gs_ticker *ticker;
    pthread_mutex_t mu;
    unsigned long long samples;
};

/* One sample: the read outside the lock (the writer only waits for the fold). */
static void self_tick(void *arg, uint64_t missed)
{
    struct gs_stacks_self *s = arg;
    int rc = gs_pyread_sample(s->r, s->main_only ? getpid() : 0, s->s, NULL);

    (void)missed;
    pthread_mutex_lock(&s->mu);
    if (rc == GS_OK)
        for (unsigned t = 0; t < s->s->nthreads; t++)
            if (s->s->threads[t].nframes &&
                gs_collect_add(s->col, &s->s->threads[t], NULL, 1) == GS_OK)
                s->samples++;
    pthread_mutex_unlock(&s->mu);
}

static void self_free(struct gs_stacks_self *s)
{
    gs_pyread_close(s->r);
    gs_stackprof_free(s->prof);
    free(s->col);
    free(s->s);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

GS_API struct gs_stacks_self *gs_stacks_self_start(double hz, int main_only, char *err,
                                                   size_t errlen)
{
    struct gs_stacks_self *s = calloc(1, sizeof *s);
    struct gs_err e = {0};
    int rc;

    if (!s || !(hz >= 1 && hz <= 1000)) {
        snprintf(err, errlen, "%s", s ? "stacks: rate must be 1 to 1000 Hz" : "out of memory");
        free(s);
        return NULL;
    }
    pthread_mutex_init(&s->mu, NULL);
    s->hz = hz;
    s->main_only = main_only;
    s->prof = gs_stackprof_new();
    s->col = malloc(sizeof *s->col);
    s->s = malloc(sizeof *s->s);
    if (!s->prof || !s->col || !s->s) {
        snprintf(err, errlen, "stacks: out of memory");
        self_free(s);
        return NULL;
    }
    if (gs_pyread_open_self(&s->r, &e) != GS_OK) {
        snprintf(err, errlen, "%s", e.msg);
        self_free(s);
        return NULL;
    }
    gs_collect_init(s->col, s->prof, s->r);
    rc = gs_ticker_start(&s->ticker, (int64_t)(1e9 / hz), gs_clock_mono_ns(), self_tick, s);
    if (rc != 0) {
        snprintf(err, errlen, "stacks: cannot start the sampler thread: %s", strerror(rc));
        self_free(s);
        return NULL;
    }
    return s;
}

GS_API int gs_stacks_self_write(struct gs_stacks_self *s, const char *path, const char *format,
                                char *err, size_t errlen)
{
    struct gs_err e = {0};
    struct gs_dirfile df;
    FILE *f;
    int rc, dirfd;

    if (!s || !path || !format) {
        snprintf(err, errlen, "stacks: no sampler or path");
        return -1;
    }
    /* a fresh file of ours renamed into place (base/dirfile.h): a link planted at path, in a
     * run directory for instance, is replaced, never written through */
    {
        const char *slash = strrchr(path, '/');
        char dir[4096];
        snprintf(dir, sizeof dir, "%.*s", slash ? (slash == path ? 1 : (int)(slash - path)) : 1,
                 slash ? path : ".");
        dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dirfd < 0) {
            snprintf(err, errlen, "stacks: %s: %s", dir, strerror(errno));
            return -1;
        }
        rc = gs_dirfile_begin(&df, dirfd, slash ? slash + 1 : path, 0644, &e);
        if (rc != GS_OK) {
            close(dirfd);
            snprintf(err, errlen, "stacks: %s", e.msg);
            return -1;
        }
    }
    f = df.f;
    pthread_mutex_lock(&s->mu);
    if (strcmp(format, "svg") == 0)
        rc = gs_flame_write_svg(s->prof, "gpuscope: in-process stacks", f, &e);
    else if (strcmp(format, "speedscope") == 0)
        rc = gs_stackprof_write_speedscope(s->prof, "gpuscope: in-process stacks", 1.0 / s->hz, f,
                                           &e);
    else
        rc = gs_stackprof_write_collapsed(s->prof, f);
    pthread_mutex_unlock(&s->mu);
    if (rc == GS_OK)
        rc = gs_dirfile_commit(&df, &e);
    else
        gs_dirfile_abort(&df);
    close(dirfd);
    if (rc != GS_OK) {
        snprintf(err, errlen, "stacks: writing %s: %s", path, e.msg[0] ? e.msg : gs_strerror(rc));
        return -1;
    }
    return 0;
}

GS_API unsigned long long gs_stacks_self_samples(struct gs_stacks_self *s)
{
    unsigned long long n;

    if (!s)
        return 0;
    pthread_mutex_lock(&s->mu);
    n = s->samples;
    pthread_mutex_unlock(&s->mu);
    return n;
}

GS_API void gs_stacks_self_stop(struct gs_stacks_self *s)
{
    if (!s)
        return;
    gs_ticker_stop(s->ticker);
    self_free(s);
}
