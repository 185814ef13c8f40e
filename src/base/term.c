/*
 * Terminal output helpers: the colour decision, terminal size, a sticky-error text buffer with
 * optional SGR colour, display-width arithmetic over text with escape sequences, and the
 * flicker-free in-place redraw of watch mode (home, overwrite each line, clear the rest of the
 * line, clear below; one write per frame).
 */
#include "base/term.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "gpuscope/gs_err.h"

int gs_term_use_color(enum gs_color_mode mode, int fd)
{
    const char *no_color = getenv("NO_COLOR");
    const char *term = getenv("TERM");

    if (mode == GS_COLOR_ALWAYS)
        return 1;
    if (mode == GS_COLOR_NEVER)
        return 0;
    if (no_color && no_color[0])
        return 0;
    if (term && strcmp(term, "dumb") == 0)
        return 0;
    return isatty(fd) == 1;
}

unsigned gs_term_cols(int fd)
{
    struct winsize ws;
    const char *env;

    if (isatty(fd) == 1 && ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    if (isatty(fd) == 1)
        return 80;
    env = getenv("COLUMNS");
    if (env && env[0]) {
        char *end;
        long v = strtol(env, &end, 10);
        if (*end == '\0' && v > 0 && v < 10000)
            return (unsigned)v;
    }
    return 0;
}

unsigned gs_term_rows(int fd)
{
    struct winsize ws;

    if (isatty(fd) == 1 && ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0)
        return ws.ws_row;
    return 0;
}

/* ---- text buffer ---- */

void gs_tbuf_init(struct gs_tbuf *b, int color)
{
    gs_buf_init(&b->text, GS_TBUF_MAX);
    b->color = color;
}

void gs_tbuf_free(struct gs_tbuf *b)
{
    if (b)
        gs_buf_free(&b->text);
}

void gs_tbuf_reset(struct gs_tbuf *b)
{
    gs_buf_reset(&b->text);
}

int gs_tbuf_status(const struct gs_tbuf *b)
{
    switch (gs_buf_status(&b->text)) {
    case GS_BUF_OK:
        return GS_OK;
    case GS_BUF_EFMT:
        return GS_EINVAL;
    default:
        return GS_ENOMEM;
    }
}

const char *gs_tbuf_str(const struct gs_tbuf *b)
{
    return gs_buf_str(&b->text);
}

void gs_tbuf_put(struct gs_tbuf *b, const char *s, size_t n)
{
    gs_buf_put(&b->text, s, n);
}

void gs_tbuf_puts(struct gs_tbuf *b, const char *s)
{
    gs_buf_puts(&b->text, s);
}

void gs_tbuf_vprintf(struct gs_tbuf *b, const char *fmt, va_list ap)
{
    gs_buf_vprintf(&b->text, fmt, ap);
}

void gs_tbuf_printf(struct gs_tbuf *b, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    gs_buf_vprintf(&b->text, fmt, ap);
    va_end(ap);
}

void gs_tbuf_spaces(struct gs_tbuf *b, size_t n)
{
    gs_buf_fill(&b->text, ' ', n);
}

/* Plain 16-colour SGR: what every terminal and watch(1) --color understand. */
static const char *const sgr_codes[GS_SGR__COUNT] = {
    [GS_SGR_NONE] = "",
    [GS_SGR_RESET] = "\x1b[0m",
    [GS_SGR_BOLD] = "\x1b[1m",
    [GS_SGR_GRAY] = "\x1b[1;30m",
    [GS_SGR_RED] = "\x1b[31m",
    [GS_SGR_BOLD_RED] = "\x1b[1;31m",
    [GS_SGR_GREEN] = "\x1b[32m",
    [GS_SGR_BOLD_GREEN] = "\x1b[1;32m",
    [GS_SGR_YELLOW] = "\x1b[33m",
    [GS_SGR_BOLD_YELLOW] = "\x1b[1;33m",
    [GS_SGR_BLUE] = "\x1b[34m",
    [GS_SGR_MAGENTA] = "\x1b[35m",
    [GS_SGR_BOLD_MAGENTA] = "\x1b[1;35m",
    [GS_SGR_CYAN] = "\x1b[36m",
    [GS_SGR_BOLD_CYAN] = "\x1b[1;36m",
    [GS_SGR_BOLD_WHITE] = "\x1b[1;37m",
};

void gs_tbuf_sgr(struct gs_tbuf *b, enum gs_sgr c)
{
    if (b->color && (unsigned)c < GS_SGR__COUNT && c != GS_SGR_NONE)
        gs_tbuf_puts(b, sgr_codes[c]);
}

void gs_tbuf_color(struct gs_tbuf *b, enum gs_sgr c, const char *s)
{
    gs_tbuf_sgr(b, c);
    gs_tbuf_puts(b, s);
    if (c != GS_SGR_NONE)
        gs_tbuf_sgr(b, GS_SGR_RESET);
}

/* ---- display width ---- */

/* Length of the escape sequence at s[0] (which is ESC), bounded by n. CSI sequences end at a
 * byte in 0x40..0x7e; other escapes are two bytes. */
static size_t esc_len(const char *s, size_t n)
{
    size_t i;

    if (n < 2)
        return n;
    if (s[1] != '[')
        return 2;
    for (i = 2; i < n; i++)
        if ((unsigned char)s[i] >= 0x40 && (unsigned char)s[i] <= 0x7e)
            return i + 1;
    return n;
}

/* Length of the UTF-8 sequence starting at s[0], bounded by n (1 for a stray byte). */
static size_t utf8_len(const char *s, size_t n)
{
    unsigned char c = (unsigned char)s[0];
    size_t want = c < 0xc0 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
    size_t i;

    if (want > n)
        return 1;
    for (i = 1; i < want; i++)
        if (((unsigned char)s[i] & 0xc0) != 0x80)
            return 1;
    return want;
}

size_t gs_term_width(const char *s, size_t n)
{
    size_t i = 0, w = 0;

    while (i < n) {
        if (s[i] == '\x1b') {
            i += esc_len(s + i, n - i);
            continue;
        }
        i += utf8_len(s + i, n - i);
        w++;
    }
    return w;
}

size_t gs_term_clip(const char *s, size_t n, size_t cols)
{
    size_t i = 0, w = 0;

    while (i < n) {
        size_t l;
        if (s[i] == '\x1b') {
            i += esc_len(s + i, n - i);
            continue;
        }
        if (w == cols)
            break;
        l = utf8_len(s + i, n - i);
        i += l;
        w++;
    }
    return i;
}

/* ---- watch-mode redraw ---- */

/* The GPU index a quick-check line starts with ("[5] NVIDIA ...", colour escapes first), or
 * -1 when it does not start with one. */
static long gpu_line_index(const char *s, size_t n)
{
    size_t i = 0;
    long v = 0;

    while (i + 1 < n && s[i] == '\x1b' && s[i + 1] == '[') { /* SGR: ESC [ ... m */
        i += 2;
        while (i < n && s[i] != 'm')
            i++;
        i++;
    }
    if (i >= n || s[i] != '[' || i + 1 >= n || s[i + 1] < '0' || s[i + 1] > '9')
        return -1;
    for (i++; i < n && s[i] >= '0' && s[i] <= '9' && v < 1000000; i++)
        v = v * 10 + (s[i] - '0');
    return i < n && s[i] == ']' ? v : -1;
}

/* ", GPUs 5-7" / ", GPU 5" / ", 3 GPUs": the GPU lines among frame[pos, n), "" when none. */
static void gpus_left(const char *frame, size_t pos, size_t n, char *out, size_t cap)
{
    long first = -1, last = -1;
    unsigned count = 0;
    int runs = 1;

    while (pos < n) {
        const char *nl = memchr(frame + pos, '\n', n - pos);
        size_t len = nl ? (size_t)(nl - (frame + pos)) : n - pos;
        long g = gpu_line_index(frame + pos, len);
        if (g >= 0) {
            if (count && g != last + 1)
                runs = 0;
            if (!count)
                first = g;
            last = g;
            count++;
        }
        pos += len + (nl ? 1 : 0);
    }
    if (!count)
        out[0] = '\0';
    else if (count == 1)
        snprintf(out, cap, ", GPU %ld", first);
    else if (runs)
        snprintf(out, cap, ", GPUs %ld-%ld", first, last);
    else
        snprintf(out, cap, ", %u GPUs", count);
}

void gs_term_redraw(struct gs_tbuf *out, const char *frame, size_t n, unsigned cols, unsigned rows)
{
    size_t pos = 0;
    unsigned line = 0, total = 0;

    for (size_t i = 0; i < n; i++) /* lines in the frame, a last one without '\n' too */
        total += frame[i] == '\n' || i + 1 == n;
    gs_tbuf_puts(out, GS_TERM_HOME);
    while (pos < n) {
        const char *nl = memchr(frame + pos, '\n', n - pos);
        size_t len = nl ? (size_t)(nl - (frame + pos)) : n - pos;
        size_t keep = len;
        size_t w;

        if (rows && line + 1 >= rows)
            break;
        if (rows && total > rows - 1 && line + 2 >= rows) {
            /* never drop GPUs silently: the last row says how many lines did not fit */
            char note[128], gpus[48];
            int k;
            gpus_left(frame, pos, n, gpus, sizeof gpus);
            k = snprintf(note, sizeof note, "... %u more line%s%s: the terminal is too short",
                         total - line, total - line == 1 ? "" : "s", gpus);
            size_t nk = k < 0 ? 0 : (size_t)k < sizeof note ? (size_t)k : sizeof note - 1;
            gs_tbuf_put(out, note, cols ? gs_term_clip(note, nk, cols) : nk);
            gs_tbuf_puts(out, GS_TERM_CLEAR_EOL "\n");
            break;
        }
        if (cols && gs_term_width(frame + pos, len) > cols) /* cut: a '>' in the last column */
            keep = gs_term_clip(frame + pos, len, cols > 1 ? cols - 1 : cols);
        gs_tbuf_put(out, frame + pos, keep);
        if (keep < len && memchr(frame + pos, '\x1b', len))
            gs_tbuf_puts(out, "\x1b[0m");
        if (keep < len && cols > 1)
            gs_tbuf_puts(out, ">");
        w = gs_term_width(frame + pos, keep) + (keep < len && cols > 1);
        /* A line that fills the terminal leaves the cursor in the pending-wrap state on
         * the last column, where clear-to-end-of-line would erase that column. */
        if (!cols || w < cols)
            gs_tbuf_puts(out, GS_TERM_CLEAR_EOL);
        gs_tbuf_puts(out, "\n");
        line++;
        pos += len + (nl ? 1 : 0);
    }
    gs_tbuf_puts(out, GS_TERM_CLEAR_BELOW);
}

int gs_term_write(int fd, const char *p, size_t n, const volatile sig_atomic_t *stop)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR && !(stop && *stop))
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
        /* A signal during a blocked write to a pipe shows as a short write, not EINTR. */
        if (n > 0 && stop && *stop) {
            errno = EINTR;
            return -1;
        }
    }
    return 0;
}

/* s made safe for a cell (control bytes as '?') and clipped to cols: its bytes in buf, its
 * width returned. */
static size_t cell_text(char *buf, size_t size, const char *s, size_t cols)
{
    size_t n = 0;

    for (; s && *s && n < size - 1; s++)
        buf[n++] = ((unsigned char)*s < 0x20 || *s == 0x7f) ? '?' : *s;
    buf[n] = '\0';
    n = gs_term_clip(buf, n, cols);
    buf[n] = '\0';
    return gs_term_width(buf, n);
}

void gs_tbuf_cell(struct gs_tbuf *b, const char *s, size_t cols, size_t pad)
{
    char buf[400];
    size_t w = cell_text(buf, sizeof buf, s, cols);

    gs_tbuf_puts(b, buf);
    if (w < pad)
        gs_tbuf_spaces(b, pad - w);
}

void gs_term_put_cell(FILE *f, const char *s, size_t cols, size_t pad)
{
    char buf[400];
    size_t w = cell_text(buf, sizeof buf, s, cols);

    fputs(buf, f);
    for (; w < pad; w++)
        putc(' ', f);
}
