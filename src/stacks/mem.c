/*
 * struct gs_mem's three readers: a live process through process_vm_readv(2), the calling
 * process (process_vm_readv on itself, /proc/self/mem when a seccomp filter refuses it) and a
 * byte image. See mem.h.
 */
#include "stacks/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "gpuscope/gs_err.h"

static int errno_rc(int e)
{
    if (e == EPERM || e == EACCES)
        return GS_EPERM;
    if (e == ESRCH)
        return GS_ENOTFOUND;
    return GS_EIO;
}

static int read_vm(const struct gs_mem *m, uint64_t addr, void *buf, size_t len)
{
    struct iovec local = {buf, len};
    struct iovec remote = {(void *)(uintptr_t)addr, len};
    ssize_t n;

    if (len == 0)
        return GS_OK;
    if (m->mem_fd >= 0) {
        n = pread(m->mem_fd, buf, len, (off_t)addr);
        if (n == (ssize_t)len)
            return GS_OK;
        return n < 0 ? errno_rc(errno) : GS_EIO;
    }
    n = process_vm_readv(m->pid, &local, 1, &remote, 1, 0);
    if (n == (ssize_t)len)
        return GS_OK;
    return n < 0 ? errno_rc(errno) : GS_EIO;
}

static int read_image(const struct gs_mem *m, uint64_t addr, void *buf, size_t len)
{
    if (addr < m->image_base || addr - m->image_base > m->image_len ||
        len > m->image_len - (addr - m->image_base))
        return GS_EIO;
    memcpy(buf, m->image + (addr - m->image_base), len);
    return GS_OK;
}

void gs_mem_init_pid(struct gs_mem *m, pid_t pid)
{
    memset(m, 0, sizeof *m);
    m->read = read_vm;
    m->pid = pid;
    m->mem_fd = -1;
}

int gs_mem_init_self(struct gs_mem *m, struct gs_err *err)
{
    uint64_t probe = 0x5eed;
    uint64_t got = 0;

    gs_mem_init_pid(m, getpid());
    if (read_vm(m, (uint64_t)(uintptr_t)&probe, &got, sizeof got) == GS_OK && got == probe)
        return GS_OK;
    m->mem_fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
    if (m->mem_fd < 0)
        return gs_err_set(err, GS_EPERM, "stacks: process_vm_readv(self) and /proc/self/mem: %s",
                          strerror(errno));
    if (read_vm(m, (uint64_t)(uintptr_t)&probe, &got, sizeof got) != GS_OK || got != probe) {
        gs_mem_fini(m);
        return gs_err_set(err, GS_EPERM, "stacks: cannot read own memory through /proc/self/mem");
    }
    return GS_OK;
}

void gs_mem_init_image(struct gs_mem *m, uint64_t base, const void *data, size_t len)
{
    memset(m, 0, sizeof *m);
    m->read = read_image;
    m->mem_fd = -1;
    m->image = data;
    m->image_len = len;
    m->image_base = base;
}

void gs_mem_fini(struct gs_mem *m)
{
    if (m && m->mem_fd >= 0) {
        close(m->mem_fd);
        m->mem_fd = -1;
    }
}

int gs_mem_read(struct gs_mem *m, uint64_t addr, void *buf, size_t len)
{
    m->reads++;
    return m->read(m, addr, buf, len);
}
