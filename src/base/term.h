/*
 * Terminal output for the command-line front ends: whether to colour (--color, --no-color,
 * NO_COLOR, TERM=dumb, isatty), the terminal's size, a text buffer that emits SGR colour codes
 * only when colour is on, display-width arithmetic that skips escape sequences and counts UTF-8
 * code points, and the in-place redraw of a watch-mode frame.
 *
 * A frame is built whole in a gs_tbuf and written with one write(2) so that the terminal never
 * shows a half-drawn screen. Nothing here keeps global state.
 */
#ifndef GS_TERM_H
#define GS_TERM_H

#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include "base/buf.h"

enum gs_color_mode {
    GS_COLOR_AUTO = 0, /* colour when the stream is a terminal and NO_COLOR is unset */
    GS_COLOR_ALWAYS,   /* --color: even into a pipe (for `watch --color`) */
    GS_COLOR_NEVER,    /* --no-color */
};

/* Decides colour for fd. AUTO is off when NO_COLOR is set to a non-empty value
 * (https://no-color.org), when TERM is "dumb", or when fd is not a terminal. */
int gs_term_use_color(enum gs_color_mode mode, int fd);

/* Terminal columns and rows of fd; 0 when fd is not a terminal or the size is unknown.
 * Columns fall back to $COLUMNS when fd is not a terminal (set by watch(1)). */
unsigned gs_term_cols(int fd);
unsigned gs_term_rows(int fd);

/* Select Graphic Rendition codes the renderers use; GS_SGR_NONE emits nothing. */
enum gs_sgr {
    GS_SGR_NONE = 0,
    GS_SGR_RESET,
    GS_SGR_BOLD,
    GS_SGR_GRAY, /* bold black: absent values, users */
    GS_SGR_RED,
    GS_SGR_BOLD_RED,
    GS_SGR_GREEN,
    GS_SGR_BOLD_GREEN,
    GS_SGR_YELLOW,
    GS_SGR_BOLD_YELLOW,
    GS_SGR_BLUE,
    GS_SGR_MAGENTA,
    GS_SGR_BOLD_MAGENTA,
    GS_SGR_CYAN,
    GS_SGR_BOLD_CYAN,
    GS_SGR_BOLD_WHITE,
    GS_SGR__COUNT,
};

/* A text buffer for the terminal: base/buf.h's (sticky errors, always NUL-terminated once
 * anything was appended, never past GS_TBUF_MAX), plus whether to emit SGR colour codes. A
 * renderer checks gs_tbuf_status once at the end: GS_OK, GS_ENOMEM (out of memory or past the
 * cap) or GS_EINVAL (a format vsnprintf refused). */
#define GS_TBUF_MAX (8u << 20)

struct gs_tbuf {
    struct gs_buf text;
    int color; /* emit SGR codes */
};

void gs_tbuf_init(struct gs_tbuf *b, int color);
void gs_tbuf_free(struct gs_tbuf *b);
/* Empties the buffer, keeping its memory and clearing a sticky error. */
void gs_tbuf_reset(struct gs_tbuf *b);
int gs_tbuf_status(const struct gs_tbuf *b);
/* The text so far ("" when nothing was appended). */
const char *gs_tbuf_str(const struct gs_tbuf *b);

void gs_tbuf_put(struct gs_tbuf *b, const char *s, size_t n);
void gs_tbuf_puts(struct gs_tbuf *b, const char *s);
void gs_tbuf_printf(struct gs_tbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void gs_tbuf_vprintf(struct gs_tbuf *b, const char *fmt, va_list ap);
void gs_tbuf_spaces(struct gs_tbuf *b, size_t n);
/* Appends the escape sequence of c when b->color is set. */
void gs_tbuf_sgr(struct gs_tbuf *b, enum gs_sgr c);
/* Appends s between c and a reset (plain s without colour). */
void gs_tbuf_color(struct gs_tbuf *b, enum gs_sgr c, const char *s);

/* Display columns of s[0..n): escape sequences count 0, each UTF-8 code point 1 (the
 * renderers emit only narrow characters; wide CJK text in a process name is miscounted by
 * one column per character, which only shifts alignment). */
size_t gs_term_width(const char *s, size_t n);

/* Length in bytes of the longest prefix of s[0..n) that fits in cols columns, never splitting
 * an escape sequence or a UTF-8 sequence; escape sequences right after the cut are kept so a
 * trailing reset survives. */
size_t gs_term_clip(const char *s, size_t n, size_t cols);

/* One table cell of text from outside (a run's name, a user, a job id): control bytes and DEL
 * shown as '?', so it cannot move the cursor or colour the terminal; clipped to cols columns
 * (at most 399 bytes of s are shown); then padded with spaces to pad columns. NULL reads as "".
 * gs_tbuf_cell appends it to b, gs_term_put_cell writes it to f. */
void gs_tbuf_cell(struct gs_tbuf *b, const char *s, size_t cols, size_t pad);
void gs_term_put_cell(FILE *f, const char *s, size_t cols, size_t pad);

/* Terminal control strings. */
#define GS_TERM_HOME "\x1b[H"
#define GS_TERM_CLEAR_EOL "\x1b[K"
#define GS_TERM_CLEAR_BELOW "\x1b[J"
#define GS_TERM_CLEAR_SCREEN "\x1b[H\x1b[2J"
#define GS_TERM_HIDE_CURSOR "\x1b[?25l"
#define GS_TERM_SHOW_CURSOR "\x1b[?25h"

/* Turns the text of one frame (lines ending in '\n') into an in-place redraw: cursor home,
 * each line clipped to cols (0: no clipping) followed by clear-to-end-of-line where it is
 * shorter than the terminal, at most rows-1 lines (0: all), then clear-below. Colour state is
 * reset at the end of each clipped line. Nothing is dropped silently: a clipped line ends in
 * '>' in its last column, and when the frame has more lines than fit, the last row says
 * "... N more lines: the terminal is too short", naming the GPUs whose lines ("[5] ...")
 * are among them: "... 13 more lines, GPUs 5-7: the terminal is too short". Appends to out. */
void gs_term_redraw(struct gs_tbuf *out, const char *frame, size_t n, unsigned cols, unsigned rows);

/* Writes all of p[0..n) to fd, retrying on short writes and on EINTR — unless *stop is set
 * by then (stop may be NULL), so that a signal can end a write blocked on a full pipe. Returns
 * 0, or -1 with errno (EINTR when stopped). */
int gs_term_write(int fd, const char *p, size_t n, const volatile sig_atomic_t *stop);

#endif
