/*
 * An SVG flame graph of a stack profile, drawn by gpuscope itself: the root at the bottom,
 * each frame as wide as its share of samples, a tooltip (<title>) per frame with its samples
 * and percentage. Self-contained (no script, no external fonts), so it opens in any browser.
 */
#ifndef GS_STACKS_FLAME_H
#define GS_STACKS_FLAME_H

#include <stdio.h>

struct gs_err;
struct gs_stackprof;

/* Writes the flame graph of p with a title line to out. */
int gs_flame_write_svg(const struct gs_stackprof *p, const char *title, FILE *out,
                       struct gs_err *err);

#endif
