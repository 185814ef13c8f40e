/*
 * The Python stack reader: every thread's Python call stack, read from a CPython process's
 * memory without pausing it and without its GIL.
 *
 * A reader is bound to one interpreter in one address space: where _PyRuntime lies, which
 * layout the version has (pylayout.h), the address of PyCode_Type (to tell code objects from
 * garbage) and a struct gs_mem to read with. gs_pyread_find (pyfind.c) builds one for a live
 * process from its /proc/PID/maps and the ELF symbols of its python binary or libpython;
 * gs_pyread_open_self does so from inside (dlsym); gs_pyread_new takes everything explicitly
 * (tests, the fuzz target).
 *
 * Sampling walks interpreters -> thread states -> frames. The target keeps running, so what
 * is read may be torn: every pointer is checked (alignment, code objects by type), chains are
 * bounded (GS_PY_MAX_THREADS, GS_PY_MAX_DEPTH), and a thread whose chain breaks is returned
 * with what was read and `partial` set. A reader never faults and never loops.
 *
 * Functions are interned per reader: a frame holds a function id (qualified name and file) and
 * its current line; gs_pyread_func gives the names. Code objects are cached by address and
 * revalidated on each use (their name, file and line-table pointers), so a code object freed
 * and replaced at the same address is noticed.
 *
 * Threads: a reader is used by one thread at a time.
 */
#ifndef GS_STACKS_PYREAD_H
#define GS_STACKS_PYREAD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "stacks/mem.h"
#include "stacks/pylayout.h"

struct gs_err;
struct gs_pyread;

#define GS_PY_MAX_THREADS 128
#define GS_PY_MAX_DEPTH 256
#define GS_PY_MAX_FUNCS 65536

struct gs_pyframe {
    uint32_t func; /* gs_pyread_func id */
    int32_t line;  /* current line, 0 when unknown */
};

struct gs_pythread {
    uint64_t thread_id; /* PyThreadState.thread_id (pthread_t) */
    int64_t native_tid; /* OS thread id (3.11+); before 3.11 only the main thread's (the
                         * oldest thread state: the pid), others 0 */
    int partial;        /* the frame chain broke or passed GS_PY_MAX_DEPTH */
    unsigned nframes;
    struct gs_pyframe frames[GS_PY_MAX_DEPTH]; /* innermost first */
};

struct gs_pysample {
    unsigned nthreads;
    int truncated; /* more thread states than GS_PY_MAX_THREADS: the rest are left out */
    struct gs_pythread threads[GS_PY_MAX_THREADS];
};

struct gs_pyfunc {
    const char *name; /* co_qualname (3.11+) or co_name */
    const char *file; /* co_filename */
    int first_line;
};

/* Where an interpreter lives in an address space. */
struct gs_pytarget {
    uint64_t runtime_addr;   /* &_PyRuntime */
    uint64_t code_type_addr; /* &PyCode_Type; 0 = do not check code objects' type */
    unsigned version;        /* PY_VERSION_HEX; 0 = read Py_Version at version_addr */
    uint64_t version_addr;   /* &Py_Version (3.11+), 0 when absent */
};

/* A reader over mem (copied; from here on the reader finalises it, also on failure) for the
 * interpreter at t. Reads the version, picks or reads the layout (3.13+: _Py_DebugOffsets)
 * and checks that the main interpreter and its first thread state point back at each other.
 * GS_EPARSE when the memory does not look like a CPython runtime, GS_ENOTSUP for versions
 * without a layout, GS_EPERM / GS_ENOTFOUND from the first read. */
int gs_pyread_new(const struct gs_mem *mem, const struct gs_pytarget *t, struct gs_pyread **out,
                  struct gs_err *err);

/* A reader of the calling process (the interpreter that loaded us), found with dlsym. */
int gs_pyread_open_self(struct gs_pyread **out, struct gs_err *err);

/* A reader of live process pid (pyfind.c: /proc/PID/maps, ELF .dynsym and .symtab). The
 * error names the cause: no python in the process, permission (ptrace_scope, CAP_SYS_PTRACE,
 * hidepid), a version without layout. */
int gs_pyread_find(pid_t pid, struct gs_pyread **out, struct gs_err *err);

void gs_pyread_close(struct gs_pyread *r);

/* Reads every thread's stack into out (caller storage, ~270 KiB). only_tid > 0 keeps just
 * that OS thread (3.11+; older versions keep the main thread, the oldest thread state).
 * GS_OK with out->nthreads threads; GS_ENOTFOUND when the process is gone, GS_EPERM when
 * reads are refused, GS_EPARSE when the runtime or a thread state does not read as one. */
int gs_pyread_sample(struct gs_pyread *r, pid_t only_tid, struct gs_pysample *out,
                     struct gs_err *err);

/* The function with id f (from a frame of a sample of r); NULL for an unknown id. */
const struct gs_pyfunc *gs_pyread_func(const struct gs_pyread *r, uint32_t f);

unsigned gs_pyread_version(const struct gs_pyread *r);
/* Memory reads made so far (benchmarks). */
uint64_t gs_pyread_reads(const struct gs_pyread *r);

/* Line of the instruction at byte offset addr in a code object's line table (tbl, len), in
 * the format `lines`, starting from first_line. Returns the line, or 0 when the table says
 * nothing for addr or is malformed. Exposed for tests. */
int gs_pyread_addr2line(enum gs_py_lines lines, const uint8_t *tbl, size_t len, int first_line,
                        int64_t addr);

#endif
