/*
 * gs_pyread_find: a live process's interpreter, from /proc/PID/maps and the ELF symbols of
 * the python binary or libpython it maps (pyfind.h). Non-PIE binaries (Debian's
 * /usr/bin/python3.11 is ET_EXEC) have no bias; PIE binaries and shared libraries are biased
 * by where their offset-0 segment was mapped. The files are opened through /proc/PID/root so
 * a process in another mount namespace (a container) is read from its own files.
 */
#include "stacks/pyfind.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpuscope/gs_err.h"
#include "stacks/mem.h"
#include "stacks/pyread.h"

#define MAX_CANDIDATES 16

struct candidate {
    char path[512];
    uint64_t base; /* lowest start of an offset-0 mapping of path */
    int is_lib;
};

int gs_pyfind_elf_symbols(const char *path, const char *const *names, size_t n, uint64_t *values,
                          int *elf_type, uint64_t *first_vaddr, struct gs_err *err)
{
    int fd, rc = GS_OK;
    Elf *e = NULL;
    GElf_Ehdr eh;
    size_t nph = 0;
    Elf_Scn *scn = NULL;

    memset(values, 0, n * sizeof *values);
    if (elf_version(EV_CURRENT) == EV_NONE)
        return gs_err_set(err, GS_EIO, "stacks: libelf: %s", elf_errmsg(-1));
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return gs_err_set(err, errno == EACCES ? GS_EPERM : GS_EIO, "stacks: %s: %s", path,
                          strerror(errno));
    e = elf_begin(fd, ELF_C_READ, NULL);
    if (!e || elf_kind(e) != ELF_K_ELF || !gelf_getehdr(e, &eh) || elf_getphdrnum(e, &nph) != 0) {
        rc = gs_err_set(err, GS_EPARSE, "stacks: %s: not an ELF file (%s)", path, elf_errmsg(-1));
        goto out;
    }
    *elf_type = eh.e_type;
    *first_vaddr = UINT64_MAX;
    for (size_t i = 0; i < nph && i < 4096; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && ph.p_offset == 0 &&
            ph.p_vaddr < *first_vaddr)
            *first_vaddr = ph.p_vaddr;
    }
    if (*first_vaddr == UINT64_MAX) {
        rc = gs_err_set(err, GS_EPARSE, "stacks: %s: no loadable segment at offset 0", path);
        goto out;
    }
    while ((scn = elf_nextscn(e, scn)) != NULL) {
        GElf_Shdr sh;
        Elf_Data *d;
        size_t count;
        if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) ||
            sh.sh_entsize == 0)
            continue;
        d = elf_getdata(scn, NULL);
        if (!d)
            continue;
        count = sh.sh_size / sh.sh_entsize;
        for (size_t i = 0; i < count; i++) {
            GElf_Sym sym;
            const char *nm;
            if (!gelf_getsym(d, (int)i, &sym) || sym.st_value == 0 || sym.st_shndx == SHN_UNDEF)
                continue;
            nm = elf_strptr(e, sh.sh_link, sym.st_name);
            if (!nm)
                continue;
            for (size_t k = 0; k < n; k++)
                if (!values[k] && strcmp(nm, names[k]) == 0)
                    values[k] = sym.st_value;
        }
    }
out:
    if (e)
        elf_end(e);
    close(fd);
    return rc;
}

static int has_cap_sys_ptrace(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long cap = 0;

    if (!f)
        return 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "CapEff: %llx", &cap) == 1)
            break;
    fclose(f);
    return (cap >> 19) & 1; /* CAP_SYS_PTRACE */
}

void gs_pyfind_perm_hint(pid_t pid, char *buf, size_t cap)
{
    char path[64];
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
    int scope = -1;

    if (f) {
        if (fscanf(f, "%d", &scope) != 1)
            scope = -1;
        fclose(f);
    }
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    if (access(path, R_OK) != 0 && errno == EACCES && scope <= 0)
        snprintf(buf, cap,
                 "/proc/%d is hidden or not ours (another user, or /proc mounted "
                 "with hidepid); run as the process's user or as root",
                 (int)pid);
    else if (scope == 3)
        snprintf(buf, cap,
                 "kernel.yama.ptrace_scope=3 forbids reading other processes; "
                 "use the in-process sampler (gpuscope run, or gpuscope.stacks.start())");
    else if (scope == 2 && !has_cap_sys_ptrace())
        snprintf(buf, cap,
                 "kernel.yama.ptrace_scope=2 needs CAP_SYS_PTRACE (sudo; in a "
                 "container: --cap-add SYS_PTRACE), or run the target under gpuscope run");
    else if (scope == 1 && !has_cap_sys_ptrace())
        snprintf(buf, cap,
                 "kernel.yama.ptrace_scope=1 lets only an ancestor read a process: "
                 "run the target under gpuscope run, use sudo (CAP_SYS_PTRACE), or set "
                 "ptrace_scope=0");
    else if (!has_cap_sys_ptrace())
        snprintf(buf, cap,
                 "the process belongs to another user or is not dumpable; use sudo "
                 "(CAP_SYS_PTRACE)");
    else
        snprintf(buf, cap,
                 "refused although we hold CAP_SYS_PTRACE: a seccomp profile or "
                 "LSM blocks process_vm_readv (containers: --cap-add SYS_PTRACE, "
                 "--security-opt seccomp=unconfined)");
}

/* python3.11, python3, python, libpython3.11.so.1.0, ... */
static int python_like(const char *base, int *is_lib)
{
    *is_lib = strncmp(base, "libpython", 9) == 0;
    return *is_lib || strncmp(base, "python", 6) == 0;
}

static int read_candidates(pid_t pid, struct candidate *c, unsigned *nc, struct gs_err *err)
{
    char path[64], line[1024];
    FILE *f;

    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT)
            return gs_err_set(err, GS_ENOTFOUND, "stacks: no process %d", (int)pid);
        if (errno == EACCES || errno == EPERM) {
            char hint[300];
            gs_pyfind_perm_hint(pid, hint, sizeof hint);
            return gs_err_set(err, GS_EPERM, "stacks: %s: permission denied: %s", path, hint);
        }
        return gs_err_set(err, GS_EIO, "stacks: %s: %s", path, strerror(errno));
    }
    *nc = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long long lo, hi, off;
        int name_at = 0, is_lib;
        const char *file, *base;
        unsigned i;
        if (sscanf(line, "%llx-%llx %*s %llx %*s %*s %n", &lo, &hi, &off, &name_at) < 3 ||
            name_at == 0 || off != 0)
            continue;
        file = line + name_at;
        if (file[0] != '/')
            continue;
        line[strcspn(line, "\n")] = '\0';
        base = strrchr(file, '/') + 1;
        if (!python_like(base, &is_lib) || strlen(file) >= sizeof c[0].path)
            continue;
        for (i = 0; i < *nc; i++)
            if (strcmp(c[i].path, file) == 0)
                break;
        if (i < *nc) {
            if (lo < c[i].base)
                c[i].base = lo;
            continue;
        }
        if (*nc >= MAX_CANDIDATES)
            continue;
        snprintf(c[*nc].path, sizeof c[*nc].path, "%s", file);
        c[*nc].base = lo;
        c[*nc].is_lib = is_lib;
        (*nc)++;
    }
    fclose(f);
    if (*nc == 0)
        return gs_err_set(err, GS_ENOTFOUND,
                          "stacks: process %d maps no python binary or libpython (not CPython?)",
                          (int)pid);
    return GS_OK;
}

/* 0x030a00f0 from ".../python3.10" or "libpython3.10.so.1.0"; 0 when not in the name. */
static unsigned version_from_name(const char *path)
{
    const char *b = strrchr(path, '/');
    unsigned maj, min;
    b = b ? b + 1 : path;
    if (strncmp(b, "lib", 3) == 0)
        b += 3;
    if (sscanf(b, "python%u.%u", &maj, &min) == 2 && maj == 3 && min < 100)
        return maj << 24 | min << 16 | 0xf0;
    return 0;
}

static int try_candidate(pid_t pid, const struct candidate *c, struct gs_pyread **out,
                         struct gs_err *err)
{
    static const char *const names[] = {"_PyRuntime", "PyCode_Type", "Py_Version"};
    uint64_t v[3], first_vaddr = 0, bias = 0;
    char file[sizeof c->path + 32];
    int type = 0, rc;
    struct gs_pytarget t = {0};
    struct gs_mem mem;

    if (snprintf(file, sizeof file, "/proc/%d/root%.512s", (int)pid, c->path) >= (int)sizeof file)
        file[0] = '\0';
    rc = gs_pyfind_elf_symbols(file, names, 3, v, &type, &first_vaddr, NULL);
    if (rc != GS_OK)
        rc = gs_pyfind_elf_symbols(c->path, names, 3, v, &type, &first_vaddr, err);
    if (rc != GS_OK)
        return rc;
    if (!v[0])
        return gs_err_set(err, GS_ENOTFOUND, "stacks: %s has no _PyRuntime symbol", c->path);
    if (type == ET_DYN)
        bias = c->base - (first_vaddr & ~UINT64_C(0xfff));
    t.runtime_addr = v[0] + bias;
    t.code_type_addr = v[1] ? v[1] + bias : 0;
    t.version_addr = v[2] ? v[2] + bias : 0;
    t.version = v[2] ? 0 : version_from_name(c->path);
    if (!t.version && !t.version_addr)
        return gs_err_set(err, GS_ENOTSUP, "stacks: %s: no Py_Version and no version in its name",
                          c->path);
    gs_mem_init_pid(&mem, pid);
    rc = gs_pyread_new(&mem, &t, out, err);
    if (rc == GS_EPERM) {
        char hint[300];
        gs_pyfind_perm_hint(pid, hint, sizeof hint);
        return gs_err_set(err, GS_EPERM, "stacks: cannot read process %d's memory: %s", (int)pid,
                          hint);
    }
    return rc;
}

int gs_pyread_find(pid_t pid, struct gs_pyread **out, struct gs_err *err)
{
    struct candidate c[MAX_CANDIDATES];
    unsigned nc = 0;
    int rc = GS_ENOTFOUND;

    rc = read_candidates(pid, c, &nc, err);
    if (rc != GS_OK)
        return rc;
    /* libpython first: with a shared libpython the binary is a launcher without _PyRuntime */
    for (int pass = 0; pass < 2; pass++)
        for (unsigned i = 0; i < nc; i++) {
            if (c[i].is_lib != (pass == 0))
                continue;
            rc = try_candidate(pid, &c[i], out, err);
            if (rc == GS_OK || rc == GS_EPERM)
                return rc;
        }
    return rc;
}
