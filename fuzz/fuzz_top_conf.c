/*
 * libFuzzer target for `gpuscope top`'s preferences file (src/top/top_conf.c): any bytes as
 * top.conf text. Whatever the input, the preferences stay in range (a graph, a column, an
 * interval in 0.1..3600 s, booleans 0/1), the warning is a NUL-terminated "PATH:LINE: ..."
 * line, and formatting the result parses back to the same preferences without a warning.
 *
 * Build and run: make fuzz (fuzz/meson.build, scripts/fuzz.sh); seeds in fuzz/corpus/top_conf/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "top/top.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct top_prefs p = {.interval_s = 1.0, .sort = TOP_C_GMEM}, q = {0};
    char *text = malloc(size + 1), warn[320] = "", out[1024];

    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    top_prefs_parse(&p, "top.conf", text, warn, sizeof warn);
    if (p.graph >= TOP_G__N || p.sort >= TOP_C__N ||
        !(p.interval_s >= 0.1 && p.interval_s <= 3600) ||
        (p.tree | p.reverse | p.mouse | p.runs_panel) > 1)
        abort();
    if (warn[0] && strncmp(warn, "top.conf:", 9) != 0)
        abort();
    if (top_prefs_format(&p, out, sizeof out) != 0)
        abort();
    warn[0] = '\0';
    top_prefs_parse(&q, "again", out, warn, sizeof warn);
    if (warn[0] || memcmp(&p, &q, sizeof p) != 0)
        abort();
    free(text);
    return 0;
}
