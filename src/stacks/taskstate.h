/*
 * What the kernel says an OS thread is doing: its state letter from /proc/PID/task/TID/stat,
 * the system call it sits in (/proc/PID/task/TID/syscall) and its wchan, summed up in a few
 * words ("running", "waiting on a futex (lock, GIL, queue)", "in I/O: read"). The stacks dump
 * prints it next to each Python stack; the top view uses `idle` to leave sleeping threads out.
 */
#ifndef GS_STACKS_TASKSTATE_H
#define GS_STACKS_TASKSTATE_H

#include <sys/types.h>

struct gs_taskstate {
    char state;      /* R S D T Z ...; '?' when unreadable */
    long syscall_nr; /* -1 running in user space or unknown */
    char comm[32];   /* thread name */
    char wchan[64];  /* "" unknown */
    char what[96];   /* the summary */
    int idle;        /* sleeping (not R, not D) */
};

/* Fills st for thread tid of process pid. GS_ENOTFOUND when the thread is gone. */
int gs_taskstate_read(pid_t pid, pid_t tid, struct gs_taskstate *st);

/* Only the state letter ('?' when unreadable): one small read, for sampling loops. */
char gs_taskstate_letter(pid_t pid, pid_t tid);

/* The summary for a state letter, syscall number and wchan (exposed for tests). */
void gs_taskstate_describe(char state, long syscall_nr, const char *wchan, char *out, size_t cap);

#endif
