/*
 * One growable text buffer with a cap (curl's dynbuf): the Prometheus and Influx renderers,
 * the HTTP bodies and clients, and the terminal frames (term.h) all append to one. Errors are
 * sticky: after a failed append every later one is a no-op and gs_buf_status says why, so a
 * renderer checks once at the end. The text is always NUL-terminated once anything was
 * appended. Not thread-safe: one owner at a time.
 */
#ifndef GS_BASE_BUF_H
#define GS_BASE_BUF_H

#include <stdarg.h>
#include <stddef.h>

/* The cap of a buffer initialised with max 0 (or zero-filled). */
#define GS_BUF_MAX_DEFAULT (16u << 20)

enum gs_buf_status {
    GS_BUF_OK = 0,
    GS_BUF_ENOMEM, /* an allocation failed */
    GS_BUF_FULL,   /* an append would have passed the cap */
    GS_BUF_EFMT,   /* vsnprintf failed (a bad format or wide character) */
};

/* A zero-filled struct gs_buf is an empty buffer with the default cap. */
struct gs_buf {
    char *data; /* NULL until the first append */
    size_t len;
    size_t cap; /* bytes allocated */
    size_t max; /* most bytes of text, the NUL included; 0: GS_BUF_MAX_DEFAULT */
    int status; /* enum gs_buf_status: GS_BUF_OK or the first failure */
};

/* An empty buffer whose text may reach max - 1 bytes (0: GS_BUF_MAX_DEFAULT). */
void gs_buf_init(struct gs_buf *b, size_t max);
/* Frees the memory; the buffer is empty again with the same cap. NULL is allowed. */
void gs_buf_free(struct gs_buf *b);
/* Empties the buffer, keeping its memory, and clears a sticky error. */
void gs_buf_reset(struct gs_buf *b);
int gs_buf_status(const struct gs_buf *b);
/* Marks the buffer failed with status (when it is not already): for a caller's own failure
 * while rendering into it. */
void gs_buf_fail(struct gs_buf *b, enum gs_buf_status status);
/* The text so far ("" when nothing was appended). */
const char *gs_buf_str(const struct gs_buf *b);
/* Hands the text over (to be freed with free(); NULL when nothing was appended), *len its
 * length when len is not NULL; the buffer is empty afterwards, its status unchanged. */
char *gs_buf_take(struct gs_buf *b, size_t *len);

void gs_buf_put(struct gs_buf *b, const char *s, size_t n);
void gs_buf_puts(struct gs_buf *b, const char *s);
/* n bytes of the buffer's own text from offset off (written earlier: off + n <= len), as
 * gs_buf_put would append a copy of them; safe though growing may move the text. */
void gs_buf_copy(struct gs_buf *b, size_t off, size_t n);
/* n copies of c. */
void gs_buf_fill(struct gs_buf *b, char c, size_t n);
void gs_buf_printf(struct gs_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void gs_buf_vprintf(struct gs_buf *b, const char *fmt, va_list ap);

#endif
