/*
 * gs_stacks.h - the in-process Python stack sampler of libgpuscope.so, for the Python package
 * (python/gpuscope/stacks.py, ctypes). It reads the calling process's own interpreter with
 * the same walker `gpuscope stacks` uses from outside (src/stacks/pyread.h), from a native
 * thread that never takes the GIL and never calls into Python, so it works under any ptrace
 * policy (a process may always read itself) and sees the same stacks an outside reader would.
 */
#ifndef GS_STACKS_API_H
#define GS_STACKS_API_H

#include "gpuscope/gs_run.h" /* GS_API */

struct gs_stacks_self;

/* Starts sampling at hz (1..1000): every thread, or only the main thread (the thread that
 * is the process's pid) when main_only. NULL with a message in err when this process has no
 * CPython interpreter the reader understands or the thread cannot start. */
GS_API struct gs_stacks_self *gs_stacks_self_start(double hz, int main_only, char *err,
                                                   size_t errlen);
/* Writes what was sampled so far to path as "collapsed", "speedscope" or "svg". 0 or -1. */
GS_API int gs_stacks_self_write(struct gs_stacks_self *s, const char *path, const char *format,
                                char *err, size_t errlen);
/* Samples taken so far. */
GS_API unsigned long long gs_stacks_self_samples(struct gs_stacks_self *s);
/* Stops the thread and frees everything; NULL allowed. */
GS_API void gs_stacks_self_stop(struct gs_stacks_self *s);

#endif
