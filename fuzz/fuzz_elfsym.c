/*
 * libFuzzer target for the ELF symbol lookup of `gpuscope stacks` (src/stacks/pyfind.c): the
 * input is an ELF file (a python binary or libpython as a target process maps it, which may
 * be anything), handed over through a memfd. The lookup must return a value or an error, never
 * crash, whatever the section, segment and symbol tables claim.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "stacks/pyfind.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const names[] = {"_PyRuntime", "PyCode_Type", "Py_Version"};
    uint64_t v[3], first = 0;
    int type = 0, fd = memfd_create("fuzz-elf", MFD_CLOEXEC);
    char path[64];

    if (fd < 0)
        return 0;
    if (write(fd, data, size) == (ssize_t)size) {
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        (void)gs_pyfind_elf_symbols(path, names, 3, v, &type, &first, NULL);
    }
    close(fd);
    return 0;
}
