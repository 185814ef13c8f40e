/*
 * Reading another process's memory (or our own) without trusting it. The Python stack reader
 * (pyread.h) sees memory only through struct gs_mem, so the same walker runs against a live
 * process (process_vm_readv), against the calling process itself (the in-process sampler; a
 * bad address still fails cleanly, never faults) and against a byte image in a test or a fuzz
 * target. Nothing here pauses the target: reads race with its writes, which the walker allows.
 */
#ifndef GS_STACKS_MEM_H
#define GS_STACKS_MEM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct gs_err;

struct gs_mem {
    /* Copies len bytes at addr into buf. Returns GS_OK, GS_EIO (address not mapped, short
     * read), GS_EPERM (reads refused) or GS_ENOTFOUND (the process is gone). */
    int (*read)(const struct gs_mem *m, uint64_t addr, void *buf, size_t len);
    pid_t pid;            /* process_vm_readv target */
    int mem_fd;           /* /proc/PID/mem fallback when process_vm_readv is unavailable; -1 */
    const uint8_t *image; /* image reader: bytes of [image_base, image_base + image_len) */
    size_t image_len;
    uint64_t image_base;
    uint64_t reads; /* read calls made (for benchmarks) */
};

/* A reader of process pid's memory through process_vm_readv. */
void gs_mem_init_pid(struct gs_mem *m, pid_t pid);

/* A reader of the calling process: process_vm_readv on getpid(), which the kernel allows
 * under any ptrace policy, or /proc/self/mem when a seccomp filter refuses the call. */
int gs_mem_init_self(struct gs_mem *m, struct gs_err *err);

/* A reader over a copy of memory [base, base + len); data stays owned by the caller. */
void gs_mem_init_image(struct gs_mem *m, uint64_t base, const void *data, size_t len);

/* Releases what init acquired (the /proc/self/mem descriptor); safe on every kind. */
void gs_mem_fini(struct gs_mem *m);

/* m->read with the count kept: what the walker calls. */
int gs_mem_read(struct gs_mem *m, uint64_t addr, void *buf, size_t len);

/* Reads n blocks of len bytes each (addrs[i] -> bufs[i]) in as few calls as the reader
 * allows (one process_vm_readv for all when every address is mapped). ok[i] says which
 * succeeded; returns how many did. */
unsigned gs_mem_readv(struct gs_mem *m, const uint64_t *addrs, uint8_t *const *bufs, size_t len,
                      unsigned n, unsigned char *ok);

#endif
