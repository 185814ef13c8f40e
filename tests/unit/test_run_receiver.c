/*
 * Unit tests of the step-record receiver (src/run/receiver.c) on a real SOCK_SEQPACKET socket
 * in a temporary directory: good records arrive with the sender's pid/uid from SO_PEERCRED;
 * garbage, an oversized message and a wrong version are rejected and the connection keeps
 * working; GS_RECEIVER_MAX_BAD bad records in a row close it; a stale socket file is
 * replaced but a live receiver is not; a sender of another uid is refused (when run as root);
 * what was sent before a stop is read, not dropped with the connection.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpuscope/gs_err.h"
#include "run/control.h"
#include "run/receiver.h"

#define MAXREC 64

struct seen {
    pthread_mutex_t lock;
    unsigned n, closes, rejects;
    struct gs_peer peer[MAXREC];
    enum gs_record_type type[MAXREC];
    uint64_t step[MAXREC];
    char last_why[256];
};

struct fx {
    char dir[64];
    char path[128];
    struct seen seen;
    struct gs_receiver *r;
};

/* gs_receiver_start(_flags) as 0 / -1 with the message in err (256 bytes). */
static int start_rx(struct gs_receiver **out, const char *path, mode_t mode, unsigned flags,
                    const struct gs_receiver_cb *cb, char *err)
{
    struct gs_err e;
    int rc;

    gs_err_clear(&e);
    rc = gs_receiver_start_flags(out, path, mode, flags, cb, &e);
    snprintf(err, 256, "%.255s", e.msg);
    return rc == GS_OK ? 0 : -1;
}

static void on_record(void *ctx, const struct gs_peer *peer, const struct gs_record *rec)
{
    struct seen *s = ctx;

    pthread_mutex_lock(&s->lock);
    if (s->n < MAXREC) {
        s->peer[s->n] = *peer;
        s->type[s->n] = rec->type;
        s->step[s->n] = rec->type == GS_REC_STEP ? rec->u.step.step : 0;
    }
    s->n++;
    pthread_mutex_unlock(&s->lock);
}

static void on_close(void *ctx, const struct gs_peer *peer)
{
    struct seen *s = ctx;

    (void)peer;
    pthread_mutex_lock(&s->lock);
    s->closes++;
    pthread_mutex_unlock(&s->lock);
}

static void on_reject(void *ctx, const struct gs_peer *peer, const char *why)
{
    struct seen *s = ctx;

    (void)peer;
    pthread_mutex_lock(&s->lock);
    s->rejects++;
    snprintf(s->last_why, sizeof s->last_why, "%s", why);
    pthread_mutex_unlock(&s->lock);
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    struct gs_receiver_cb cb = {
        .on_record = on_record, .on_close = on_close, .on_reject = on_reject};
    char err[256];

    snprintf(f->dir, sizeof f->dir, "/tmp/gs-rx-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof f->path, "%s/run.sock", f->dir);
    pthread_mutex_init(&f->seen.lock, NULL);
    cb.ctx = &f->seen;
    assert_int_equal(start_rx(&f->r, f->path, 0600, 0, &cb, err), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;

    gs_receiver_stop(f->r);
    assert_int_equal(access(f->path, F_OK), -1); /* stop unlinks the socket */
    rmdir(f->dir);
    pthread_mutex_destroy(&f->seen.lock);
    free(f);
    return 0;
}

static void set_sun(struct sockaddr_un *sa, const char *path)
{
    assert_true(strlen(path) < sizeof sa->sun_path);
    memcpy(sa->sun_path, path, strlen(path) + 1);
}

static int client(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

    assert_true(fd >= 0);
    set_sun(&sa, path);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    return fd;
}

static void send_str(int fd, const char *s)
{
    assert_int_equal(send(fd, s, strlen(s), MSG_NOSIGNAL), (ssize_t)strlen(s));
}

static void send_step(int fd, unsigned step)
{
    char buf[512];

    snprintf(buf, sizeof buf,
             "{\"v\":1,\"type\":\"step\",\"step\":%u,\"t0\":1764430000.125,"
             "\"t1\":1764430000.357,\"rank\":0,\"device\":0,\"samples\":8,"
             "\"ms\":{\"data\":3.1,\"forward\":124.3,\"backward\":89.7,"
             "\"optimizer_step\":15.2,\"total_step\":232.1}}",
             step);
    send_str(fd, buf);
}

/* Waits (up to 3 s) until the receiver has counted want records + rejected. */
static void wait_for(struct gs_receiver *r, uint64_t records, uint64_t rejected)
{
    struct gs_receiver_stats st;

    for (int i = 0; i < 3000; i++) {
        gs_receiver_stats(r, &st);
        if (st.records >= records && st.rejected >= rejected)
            return;
        usleep(1000);
    }
    gs_receiver_stats(r, &st);
    fail_msg("timed out: records %llu/%llu rejected %llu/%llu", (unsigned long long)st.records,
             (unsigned long long)records, (unsigned long long)st.rejected,
             (unsigned long long)rejected);
}

/* A receiver whose first record takes 300 ms: the test sends the rest and stops it meanwhile. */
struct slow {
    pthread_mutex_t lock;
    unsigned n;
    int entered;
};

static void on_record_slow(void *ctx, const struct gs_peer *peer, const struct gs_record *rec)
{
    struct slow *s = ctx;
    int first;

    (void)peer;
    (void)rec;
    pthread_mutex_lock(&s->lock);
    first = s->n++ == 0;
    s->entered = 1;
    pthread_mutex_unlock(&s->lock);
    if (first)
        usleep(300 * 1000);
}

/* What a sender sent before the receiver stops is read, not dropped with the connection: more
 * than one burst (64) is queued when the stop comes (an agent restart under a run). */
static void test_stop_reads_what_was_sent(void **state)
{
    struct fx *f = *state;
    struct slow s = {.n = 0};
    struct gs_receiver_cb cb = {.on_record = on_record_slow, .ctx = &s};
    struct gs_receiver *r = NULL;
    char path[160], err[256];
    int fd, entered = 0;
    unsigned n;

    pthread_mutex_init(&s.lock, NULL);
    snprintf(path, sizeof path, "%s/slow.sock", f->dir);
    assert_int_equal(start_rx(&r, path, 0600, 0, &cb, err), 0);
    fd = client(path);
    send_step(fd, 1);
    for (int i = 0; i < 3000 && !entered; i++) {
        pthread_mutex_lock(&s.lock);
        entered = s.entered;
        pthread_mutex_unlock(&s.lock);
        if (!entered)
            usleep(1000);
    }
    assert_true(entered);
    for (unsigned k = 2; k <= 150; k++)
        send_step(fd, k);
    gs_receiver_stop(r); /* the wake comes while the first record is still being handled */
    pthread_mutex_lock(&s.lock);
    n = s.n;
    pthread_mutex_unlock(&s.lock);
    assert_int_equal(n, 150);
    close(fd);
    pthread_mutex_destroy(&s.lock);
}

static void test_good_records_carry_peer(void **state)
{
    struct fx *f = *state;
    struct gs_receiver_stats st;
    int fd = client(f->path);

    send_str(fd, "{\"v\":1,\"type\":\"hello\",\"run\":\"r\",\"pid\":1,\"devices\":[0]}");
    send_step(fd, 7);
    send_step(fd, 8);
    send_str(fd, "{\"v\":1,\"type\":\"end\",\"train_runtime\":3.5}");
    wait_for(f->r, 4, 0);
    pthread_mutex_lock(&f->seen.lock);
    assert_int_equal(f->seen.n, 4);
    assert_int_equal(f->seen.type[0], GS_REC_HELLO);
    assert_int_equal(f->seen.type[1], GS_REC_STEP);
    assert_int_equal(f->seen.step[1], 7);
    assert_int_equal(f->seen.step[2], 8);
    assert_int_equal(f->seen.type[3], GS_REC_END);
    /* SO_PEERCRED, not the claimed "pid": 1 */
    assert_int_equal(f->seen.peer[0].pid, getpid());
    assert_int_equal(f->seen.peer[0].uid, getuid());
    assert_int_equal(f->seen.peer[0].gid, getgid());
    assert_true(f->seen.peer[0].conn_id > 0);
    assert_true(f->seen.peer[3].conn_id == f->seen.peer[0].conn_id);
    pthread_mutex_unlock(&f->seen.lock);
    gs_receiver_stats(f->r, &st);
    assert_int_equal(st.connections, 1);
    assert_int_equal(st.rejected, 0);
    close(fd);
    for (int i = 0; i < 3000; i++) {
        unsigned closes;

        pthread_mutex_lock(&f->seen.lock);
        closes = f->seen.closes;
        pthread_mutex_unlock(&f->seen.lock);
        if (closes)
            break;
        usleep(1000);
    }
    pthread_mutex_lock(&f->seen.lock);
    assert_int_equal(f->seen.closes, 1);
    pthread_mutex_unlock(&f->seen.lock);
}

/* A control message back to a sender (run/control.h): gs_receiver_send reaches the
 * connection its conn_id names, the sender reads it and it parses; a gone connection is -1. */
static void test_send_back(void **state)
{
    struct fx *f = *state;
    struct gs_control c = {.id = 42, .steps = 3}, got;
    struct gs_err e;
    char msg[GS_CONTROL_MAX], buf[GS_CONTROL_MAX];
    uint64_t conn;
    int fd = client(f->path), n = gs_control_encode(&c, msg, sizeof msg);
    ssize_t r;

    send_str(fd, "{\"v\":1,\"type\":\"hello\",\"run\":\"r\",\"pid\":1}");
    wait_for(f->r, 1, 0);
    pthread_mutex_lock(&f->seen.lock);
    conn = f->seen.peer[0].conn_id;
    pthread_mutex_unlock(&f->seen.lock);
    assert_true(n > 0);
    assert_int_equal(gs_receiver_send(f->r, conn + 1000, msg, (size_t)n), -1);
    assert_int_equal(gs_receiver_send(f->r, conn, msg, (size_t)n), 0);
    r = recv(fd, buf, sizeof buf, 0);
    assert_int_equal(r, n);
    assert_int_equal(gs_control_parse(buf, (size_t)r, &got, &e), GS_OK);
    assert_true(got.id == 42 && got.steps == 3);
    assert_int_equal(gs_control_parse("{\"v\":1,\"type\":\"capture\",\"id\":1}", 31, &got, &e),
                     GS_EPARSE);
    assert_non_null(strstr(e.msg, "steps: missing"));
    close(fd);
    for (int i = 0; i < 3000 && gs_receiver_send(f->r, conn, msg, (size_t)n) == 0; i++)
        usleep(1000); /* until the receiver has seen the close */
    assert_int_equal(gs_receiver_send(f->r, conn, msg, (size_t)n), -1);
}

static void test_bad_records_rejected(void **state)
{
    struct fx *f = *state;
    struct gs_receiver_stats st;
    static char big[GS_RECORD_MAX + 1000];
    int fd = client(f->path);

    send_str(fd, "\x01\x02garbage{{{");
    /* a syntactically fine record too large to be one: seen whole thanks to MSG_TRUNC */
    memset(big, ' ', sizeof big - 1);
    memcpy(big, "{\"v\":1,\"type\":\"end\"}", 20);
    send_str(fd, big);
    wait_for(f->r, 0, 2);
    pthread_mutex_lock(&f->seen.lock);
    assert_non_null(strstr(f->seen.last_why, "exceeds")); /* not parsed cut short */
    pthread_mutex_unlock(&f->seen.lock);
    send_str(fd, "{\"v\":2,\"type\":\"step\",\"step\":1}");
    wait_for(f->r, 0, 3);
    pthread_mutex_lock(&f->seen.lock);
    assert_non_null(strstr(f->seen.last_why, "version"));
    pthread_mutex_unlock(&f->seen.lock);
    /* the same connection still delivers */
    send_step(fd, 42);
    wait_for(f->r, 1, 3);
    gs_receiver_stats(f->r, &st);
    assert_int_equal(st.records, 1);
    assert_int_equal(st.rejected, 3);
    assert_int_equal(st.closed_bad, 0);
    pthread_mutex_lock(&f->seen.lock);
    assert_int_equal(f->seen.step[0], 42);
    assert_int_equal(f->seen.rejects, 3);
    pthread_mutex_unlock(&f->seen.lock);
    close(fd);
}

static void test_bad_in_a_row_closes(void **state)
{
    struct fx *f = *state;
    struct gs_receiver_stats st;
    char c;
    int fd = client(f->path), fd2;

    for (int i = 0; i < GS_RECEIVER_MAX_BAD; i++)
        send_str(fd, "not json");
    wait_for(f->r, 0, GS_RECEIVER_MAX_BAD);
    /* the receiver hung up: the client reads end of stream */
    assert_int_equal(recv(fd, &c, 1, 0), 0);
    gs_receiver_stats(f->r, &st);
    assert_int_equal(st.closed_bad, 1);
    close(fd);
    /* a new connection works, and bad records below the limit do not close it */
    fd2 = client(f->path);
    for (int i = 0; i < GS_RECEIVER_MAX_BAD - 1; i++)
        send_str(fd2, "[]");
    send_step(fd2, 5);
    for (int i = 0; i < GS_RECEIVER_MAX_BAD - 1; i++)
        send_str(fd2, "{}");
    send_step(fd2, 6);
    wait_for(f->r, 2, 3 * GS_RECEIVER_MAX_BAD - 2);
    gs_receiver_stats(f->r, &st);
    assert_int_equal(st.closed_bad, 1);
    assert_int_equal(st.records, 2);
    close(fd2);
}

static void test_many_connections(void **state)
{
    struct fx *f = *state;
    int fds[8];

    for (int i = 0; i < 8; i++)
        fds[i] = client(f->path);
    for (int i = 0; i < 8; i++)
        send_step(fds[i], 100 + i);
    wait_for(f->r, 8, 0);
    pthread_mutex_lock(&f->seen.lock);
    /* eight distinct connections, each step once */
    for (unsigned i = 0; i < 8; i++) {
        assert_true(f->seen.step[i] >= 100 && f->seen.step[i] < 108);
        for (unsigned j = 0; j < i; j++) {
            assert_true(f->seen.peer[i].conn_id != f->seen.peer[j].conn_id);
            assert_true(f->seen.step[i] != f->seen.step[j]);
        }
    }
    pthread_mutex_unlock(&f->seen.lock);
    for (int i = 0; i < 8; i++)
        close(fds[i]);
}

/* The other-uid clients run in a fresh exec of this binary (main's "--as-nobody" mode), which
 * becomes uid 65534 itself: a forked child of this multi-threaded process (the receiver's
 * thread runs) only execs, since anything more there may meet a lock another thread held at
 * the fork (a rare hang under AddressSanitizer). */
static pid_t spawn_as_nobody_in(const char *mode, const char *path, int stdin_fd)
{
    pid_t pid = fork();

    assert_true(pid >= 0);
    if (pid == 0) {
        if (stdin_fd >= 0 && dup2(stdin_fd, 0) < 0)
            _exit(15);
        execl("/proc/self/exe", "test_run_receiver", "--as-nobody", mode, path, (char *)NULL);
        _exit(13);
    }
    return pid;
}

static pid_t spawn_as_nobody(const char *mode, const char *path)
{
    return spawn_as_nobody_in(mode, path, -1);
}

/* "hold5": five connections 20 ms apart, then how many of them the receiver left open (its
 * exit status), once stdin is closed (the parent has counted). */
static int hold5(const struct sockaddr_un *sa)
{
    int fd[5], open_n = 0;
    char c;

    for (int i = 0; i < 5; i++) {
        fd[i] = socket(AF_UNIX, SOCK_SEQPACKET, 0);
        if (connect(fd[i], (const struct sockaddr *)sa, sizeof *sa) != 0)
            return 11;
        usleep(20000); /* accepted in order */
    }
    usleep(100000);
    for (int i = 0; i < 5; i++) { /* a closed one reads as end of stream */
        struct pollfd p = {.fd = fd[i], .events = POLLIN};
        open_n += !(poll(&p, 1, 0) == 1 && recv(fd[i], &c, 1, MSG_DONTWAIT) <= 0);
    }
    (void)!read(0, &c, 1); /* held until the parent has counted */
    return open_n;
}

/* The child's side: "refused" sends an end record and expects the receiver to close the
 * connection; "hello" sends one hello record. Exit status 0 when it went as expected. */
static int as_nobody(const char *mode, const char *path)
{
    static const char hello[] = "{\"v\":1,\"type\":\"hello\",\"pid\":1,\"run\":\"x\"}";
    static const char end[] = "{\"v\":1,\"type\":\"end\"}";
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd;
    int refused = strcmp(mode, "refused") == 0;
    const char *msg = refused ? end : hello;
    size_t len = strlen(msg);
    char c;

    alarm(20); /* never a hang: the parent sees a signal instead */
    if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
        return 10;
    fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    if (fd < 0 || strlen(path) >= sizeof sa.sun_path)
        return 14;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    if (strcmp(mode, "hold5") == 0) {
        close(fd);
        return hold5(&sa);
    }
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        return 11;
    if (send(fd, msg, len, MSG_NOSIGNAL) != (ssize_t)len)
        return refused ? 0 : 12; /* refused: a reset before the send is as good */
    if (!refused) {
        close(fd);
        return 0;
    }
    /* the receiver closes us: end of stream, or a reset */
    return recv(fd, &c, 1, 0) <= 0 ? 0 : 12;
}

static void test_other_uid_refused(void **state)
{
    struct fx *f = *state;
    struct gs_receiver_stats st;
    pid_t pid;
    int status;

    if (geteuid() != 0) {
        skip(); /* only root can become another uid */
        return;
    }
    /* Let nobody reach the socket at all, so the uid check itself is what refuses. */
    assert_int_equal(chmod(f->dir, 0755), 0);
    assert_int_equal(chmod(f->path, 0777), 0);
    pid = spawn_as_nobody("refused", f->path);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    wait_for(f->r, 0, 1);
    gs_receiver_stats(f->r, &st);
    assert_int_equal(st.records, 0);
    assert_int_equal(st.connections, 0);
    pthread_mutex_lock(&f->seen.lock);
    assert_non_null(strstr(f->seen.last_why, "uid 65534"));
    pthread_mutex_unlock(&f->seen.lock);
}

/* GS_RECEIVER_ANY_UID (the agent's socket): another uid is let in, and its record carries
 * that uid and the child's pid from SO_PEERCRED, not what the record claims. */
static void test_any_uid_accepted(void **state)
{
    struct fx *f = *state;
    struct gs_receiver *r2 = NULL;
    struct gs_receiver_cb cb = {.on_record = on_record, .on_reject = on_reject, .ctx = &f->seen};
    struct gs_receiver_stats st;
    char err[256], path[160];
    pid_t pid;
    int status;

    if (geteuid() != 0) {
        skip(); /* only root can become another uid */
        return;
    }
    snprintf(path, sizeof path, "%s/any.sock", f->dir);
    assert_int_equal(start_rx(&r2, path, 0666, GS_RECEIVER_ANY_UID, &cb, err), 0);
    assert_int_equal(chmod(f->dir, 0755), 0);
    pid = spawn_as_nobody("hello", path);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    wait_for(r2, 1, 0);
    gs_receiver_stats(r2, &st);
    assert_int_equal(st.records, 1);
    assert_int_equal(st.rejected, 0);
    pthread_mutex_lock(&f->seen.lock);
    assert_int_equal(f->seen.n, 1);
    assert_int_equal(f->seen.type[0], GS_REC_HELLO);
    assert_int_equal(f->seen.peer[0].uid, 65534);
    assert_int_equal(f->seen.peer[0].pid, pid);
    pthread_mutex_unlock(&f->seen.lock);
    gs_receiver_stop(r2);
}

static void on_refuse(void *ctx, const struct gs_peer *peer, int why)
{
    struct seen *s = ctx;

    pthread_mutex_lock(&s->lock);
    if (why == GS_RECEIVER_UID_CONN && peer->uid == 65534)
        s->rejects += 1000; /* apart from on_reject's */
    pthread_mutex_unlock(&s->lock);
}

/* A per-uid connection limit (issue 18): uid 65534 holding 3 connections gets its 4th and 5th
 * closed at accept (counted, on_refuse told); root is not limited. */
static void test_conn_per_uid(void **state)
{
    struct fx *f = *state;
    struct gs_receiver *r2 = NULL;
    struct gs_receiver_cb cb = {
        .on_record = on_record, .on_reject = on_reject, .on_refuse = on_refuse, .ctx = &f->seen};
    struct gs_receiver_stats st;
    struct gs_err e;
    char path[160];
    int fds[5], pipefd[2];
    pid_t pid;
    int status;

    if (geteuid() != 0) {
        skip(); /* only root can become another uid */
        return;
    }
    snprintf(path, sizeof path, "%s/quota.sock", f->dir);
    gs_err_clear(&e);
    assert_int_equal(gs_receiver_start_limited(&r2, path, 0666, GS_RECEIVER_ANY_UID, 3, &cb, &e),
                     GS_OK);
    assert_int_equal(chmod(f->dir, 0755), 0);
    assert_int_equal(pipe2(pipefd, O_CLOEXEC), 0);
    pid = spawn_as_nobody_in("hold5", path, pipefd[0]); /* dup2 clears CLOEXEC on its stdin */
    close(pipefd[0]);
    for (int i = 0; i < 200; i++) {
        gs_receiver_stats(r2, &st);
        if (st.refused_uid >= 2)
            break;
        usleep(5000);
    }
    gs_receiver_stats(r2, &st);
    assert_int_equal(st.refused_uid, 2);
    assert_int_equal(st.connections, 3);
    for (int i = 0; i < 5; i++) /* root: five more, none refused */
        fds[i] = client(path);
    for (int i = 0; i < 200; i++) {
        gs_receiver_stats(r2, &st);
        if (st.connections >= 8)
            break;
        usleep(5000);
    }
    assert_int_equal(st.connections, 8);
    assert_int_equal(st.refused_uid, 2);
    close(pipefd[1]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 3); /* three of its five stayed open */
    pthread_mutex_lock(&f->seen.lock);
    assert_int_equal(f->seen.rejects / 1000, 2);
    pthread_mutex_unlock(&f->seen.lock);
    for (int i = 0; i < 5; i++)
        close(fds[i]);
    gs_receiver_stop(r2);
}

static void test_start_rules(void **state)
{
    struct fx *f = *state;
    struct gs_receiver *r2 = NULL;
    struct gs_receiver_cb cb = {.on_record = on_record, .ctx = &f->seen};
    char err[256], stale[160], longp[200];
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd;

    /* a live receiver is not replaced */
    assert_int_equal(start_rx(&r2, f->path, 0600, 0, &cb, err), -1);
    assert_non_null(strstr(err, "listening"));
    assert_int_equal(access(f->path, F_OK), 0);
    /* a stale socket file (nobody listening) is */
    snprintf(stale, sizeof stale, "%s/stale.sock", f->dir);
    set_sun(&sa, stale);
    fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    close(fd);
    assert_int_equal(start_rx(&r2, stale, 0600, 0, &cb, err), 0);
    fd = client(stale);
    send_step(fd, 1);
    wait_for(r2, 1, 0);
    close(fd);
    gs_receiver_stop(r2);
    assert_int_equal(access(stale, F_OK), -1);
    /* a path beyond sun_path is refused up front */
    memset(longp, 'a', sizeof longp - 1);
    longp[0] = '/';
    longp[sizeof longp - 1] = '\0';
    assert_int_equal(start_rx(&r2, longp, 0600, 0, &cb, err), -1);
    assert_non_null(strstr(err, "too long"));
    /* a regular file in the way is not deleted */
    snprintf(stale, sizeof stale, "%s/file", f->dir);
    fclose(fopen(stale, "w"));
    assert_int_equal(start_rx(&r2, stale, 0600, 0, &cb, err), -1);
    assert_int_equal(access(stale, F_OK), 0);
    unlink(stale);
    gs_receiver_stop(NULL);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_good_records_carry_peer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_send_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_records_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_in_a_row_closes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_connections, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_uid_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_conn_per_uid, setup, teardown),
        cmocka_unit_test_setup_teardown(test_any_uid_accepted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_start_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_reads_what_was_sent, setup, teardown),
    };
    signal(SIGPIPE, SIG_IGN);
    if (argc == 4 && strcmp(argv[1], "--as-nobody") == 0)
        return as_nobody(argv[2], argv[3]);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
