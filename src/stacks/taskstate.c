/*
 * Reading a thread's OS state from /proc (taskstate.h), through src/backend/procfs.c (its
 * stat parser and file reader). The syscall file needs the same access as reading memory;
 * without it the state letter and wchan still say a good deal.
 */
#include "stacks/taskstate.h"

#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>

#include "backend/procfs.h"
#include "gpuscope/gs_err.h"

/* Reads the thread's file name (at most cap-1 bytes) into buf up to its first newline; -1 when
 * it cannot be read. */
static int read_small(pid_t pid, pid_t tid, const char *name, char *buf, size_t cap)
{
    if (gs_procfs_read_text(NULL, (unsigned)pid, (unsigned)tid, name, buf, cap) < 0)
        return -1;
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}

struct sysname {
    long nr;
    const char *what;
};

static const struct sysname syscalls[] = {
#ifdef SYS_futex
    {SYS_futex, "waiting on a futex (lock, GIL, queue)"},
#endif
#ifdef SYS_read
    {SYS_read, "in I/O: read"},
#endif
#ifdef SYS_write
    {SYS_write, "in I/O: write"},
#endif
#ifdef SYS_pread64
    {SYS_pread64, "in I/O: pread"},
#endif
#ifdef SYS_recvfrom
    {SYS_recvfrom, "in I/O: recv"},
#endif
#ifdef SYS_recvmsg
    {SYS_recvmsg, "in I/O: recvmsg"},
#endif
#ifdef SYS_sendto
    {SYS_sendto, "in I/O: send"},
#endif
#ifdef SYS_poll
    {SYS_poll, "in I/O wait: poll"},
#endif
#ifdef SYS_ppoll
    {SYS_ppoll, "in I/O wait: ppoll"},
#endif
#ifdef SYS_select
    {SYS_select, "in I/O wait: select"},
#endif
#ifdef SYS_pselect6
    {SYS_pselect6, "in I/O wait: pselect"},
#endif
#ifdef SYS_epoll_wait
    {SYS_epoll_wait, "in I/O wait: epoll"},
#endif
#ifdef SYS_epoll_pwait
    {SYS_epoll_pwait, "in I/O wait: epoll"},
#endif
#ifdef SYS_nanosleep
    {SYS_nanosleep, "sleeping (time.sleep)"},
#endif
#ifdef SYS_clock_nanosleep
    {SYS_clock_nanosleep, "sleeping (time.sleep)"},
#endif
#ifdef SYS_wait4
    {SYS_wait4, "waiting for a child process"},
#endif
#ifdef SYS_accept
    {SYS_accept, "in I/O wait: accept"},
#endif
#ifdef SYS_accept4
    {SYS_accept4, "in I/O wait: accept"},
#endif
#ifdef SYS_connect
    {SYS_connect, "in I/O: connect"},
#endif
#ifdef SYS_ioctl
    {SYS_ioctl, "in a driver call (ioctl)"},
#endif
};

void gs_taskstate_describe(char state, long nr, const char *wchan, char *out, size_t cap)
{
    if (state == 'R') {
        snprintf(out, cap, "running");
        return;
    }
    if (state == 'Z' || state == 'X') {
        snprintf(out, cap, "exited");
        return;
    }
    if (state == 'T' || state == 't') {
        snprintf(out, cap, "stopped");
        return;
    }
    for (size_t i = 0; nr >= 0 && i < sizeof syscalls / sizeof syscalls[0]; i++)
        if (syscalls[i].nr == nr) {
            snprintf(out, cap, "%s%s", syscalls[i].what, state == 'D' ? " (uninterruptible)" : "");
            return;
        }
    if (wchan && strstr(wchan, "futex"))
        snprintf(out, cap, "waiting on a futex (lock, GIL, queue)");
    else if (wchan && (strstr(wchan, "poll") || strstr(wchan, "select")))
        snprintf(out, cap, "in I/O wait: %s", wchan);
    else if (state == 'D')
        snprintf(out, cap, "in I/O (uninterruptible%s%s)", wchan && *wchan ? ": " : "",
                 wchan ? wchan : "");
    else if (nr >= 0)
        snprintf(out, cap, "sleeping in syscall %ld", nr);
    else
        snprintf(out, cap, "sleeping%s%s", wchan && *wchan ? ": " : "", wchan ? wchan : "");
}

int gs_taskstate_read(pid_t pid, pid_t tid, struct gs_taskstate *st)
{
    char buf[1024];
    struct gs_procfs_stat ps;
    int rc;

    memset(st, 0, sizeof *st);
    st->state = '?';
    st->syscall_nr = -1;
    rc = gs_procfs_read_stat(NULL, (unsigned)pid, (unsigned)tid, &ps);
    if (rc == GS_ENOTFOUND)
        return GS_ENOTFOUND;
    if (rc == GS_OK) { /* else unparsable: the state stays unknown */
        size_t n = strnlen(ps.comm, sizeof st->comm - 1);
        memcpy(st->comm, ps.comm, n);
        st->comm[n] = '\0';
        st->state = ps.state;
    }
    if (read_small(pid, tid, "syscall", buf, sizeof buf) == 0 && buf[0] != 'r' && buf[0] != '\0')
        if (sscanf(buf, "%ld", &st->syscall_nr) != 1)
            st->syscall_nr = -1;
    if (read_small(pid, tid, "wchan", buf, sizeof st->wchan) == 0 && strcmp(buf, "0") != 0)
        memcpy(st->wchan, buf, strlen(buf) + 1);
    gs_taskstate_describe(st->state, st->syscall_nr, st->wchan, st->what, sizeof st->what);
    st->idle = st->state != 'R' && st->state != 'D';
    return GS_OK;
}

char gs_taskstate_letter(pid_t pid, pid_t tid)
{
    struct gs_procfs_stat ps;

    return gs_procfs_read_stat(NULL, (unsigned)pid, (unsigned)tid, &ps) == GS_OK ? ps.state : '?';
}
