/*
 * Finding the interpreter in a live process: the python binary or libpython among the files
 * /proc/PID/maps lists, its ELF symbols (_PyRuntime, PyCode_Type, Py_Version from .dynsym or
 * .symtab, through libelf) and its load bias. gs_pyread_find (pyread.h) is the entry point;
 * this header adds the permission diagnosis the stacks command and gpuscope run print.
 */
#ifndef GS_STACKS_PYFIND_H
#define GS_STACKS_PYFIND_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct gs_err;

/* Values of the named symbols in the ELF file at path (from .symtab and .dynsym; values[i]
 * stays 0 when names[i] is absent), its type (ET_EXEC / ET_DYN) and the virtual address of
 * the segment that maps file offset 0. GS_EIO / GS_EPARSE with the file named. */
int gs_pyfind_elf_symbols(const char *path, const char *const *names, size_t n, uint64_t *values,
                          int *elf_type, uint64_t *first_vaddr, struct gs_err *err);

/* One line on why reading pid's memory is refused: Yama's ptrace_scope, CAP_SYS_PTRACE,
 * another user, containers. Always NUL-terminates buf. */
void gs_pyfind_perm_hint(pid_t pid, char *buf, size_t cap);

#endif
