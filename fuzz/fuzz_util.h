/*
 * What the libFuzzer targets in fuzz/ share: the entry point's prototype (the build has
 * -Wmissing-prototypes in mind), CHECK, which traps on a broken invariant so libFuzzer
 * records a crash, and gs_fuzz_dup_text, the input copied into a fresh NUL-terminated buffer
 * for parsers that take C strings (a NUL byte in the input ends the string there, as it would
 * for a file or header the program reads).
 */
#ifndef GS_FUZZ_UTIL_H
#define GS_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            __builtin_trap();                                                                      \
    } while (0)

/* data[0, size) as a malloc'd C string the caller frees; NULL when memory runs out. */
static inline char *gs_fuzz_dup_text(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);

    if (!text)
        return NULL;
    if (size)
        memcpy(text, data, size);
    text[size] = '\0';
    return text;
}

/* Splits text in place at newlines into argv after argv0: at most max arguments, argv[argc] =
 * NULL; argv needs max + 2 slots. Returns argc. For targets that fuzz command lines. */
static inline int gs_fuzz_split_args(char *text, char *argv0, char **argv, int max)
{
    int argc = 0;

    argv[argc++] = argv0;
    for (char *p = text; argc < max + 1;) {
        char *nl = strchr(p, '\n');
        argv[argc++] = p;
        if (!nl)
            break;
        *nl = '\0';
        p = nl + 1;
    }
    argv[argc] = NULL;
    return argc;
}

#endif
