/*
 * The capped growable text buffer (buf.h). Grows by doubling from 256 bytes up to the cap; a
 * failed growth leaves the old text in place and valid.
 */
#include "base/buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gs_buf_init(struct gs_buf *b, size_t max)
{
    memset(b, 0, sizeof *b);
    b->max = max;
}

void gs_buf_free(struct gs_buf *b)
{
    if (!b)
        return;
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->status = GS_BUF_OK;
}

void gs_buf_reset(struct gs_buf *b)
{
    b->len = 0;
    b->status = GS_BUF_OK;
    if (b->data)
        b->data[0] = '\0';
}

int gs_buf_status(const struct gs_buf *b)
{
    return b->status;
}

void gs_buf_fail(struct gs_buf *b, enum gs_buf_status status)
{
    if (b->status == GS_BUF_OK)
        b->status = status;
}

const char *gs_buf_str(const struct gs_buf *b)
{
    return b->data ? b->data : "";
}

char *gs_buf_take(struct gs_buf *b, size_t *len)
{
    char *p = b->data;

    if (len)
        *len = b->len;
    b->data = NULL;
    b->len = b->cap = 0;
    return p;
}

/* Makes room for n more bytes plus the NUL; 0, or -1 with the status set. */
static int grow(struct gs_buf *b, size_t n)
{
    size_t max = b->max ? b->max : GS_BUF_MAX_DEFAULT;
    size_t need, cap;
    char *p;

    if (b->status != GS_BUF_OK)
        return -1;
    if (b->len >= max || n > max - b->len - 1) {
        b->status = GS_BUF_FULL;
        return -1;
    }
    need = b->len + n + 1;
    if (need <= b->cap)
        return 0;
    cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap *= 2;
    if (cap > max)
        cap = max;
    p = realloc(b->data, cap);
    if (!p) {
        b->status = GS_BUF_ENOMEM;
        return -1;
    }
    b->data = p;
    b->cap = cap;
    return 0;
}

void gs_buf_put(struct gs_buf *b, const char *s, size_t n)
{
    /* room already (cap never passes max): the renderers' many short appends */
    if (b->status == GS_BUF_OK && b->cap && n < b->cap - b->len) {
        if (n) /* s may be NULL when n is 0 (an empty buffer's data) */
            memcpy(b->data + b->len, s, n);
        b->len += n;
        b->data[b->len] = '\0';
        return;
    }
    if (grow(b, n) != 0)
        return;
    if (n)
        memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void gs_buf_puts(struct gs_buf *b, const char *s)
{
    gs_buf_put(b, s, strlen(s));
}

void gs_buf_copy(struct gs_buf *b, size_t off, size_t n)
{
    if (b->status == GS_BUF_OK && (off > b->len || n > b->len - off)) {
        b->status = GS_BUF_EFMT; /* not text of this buffer: a caller's mistake */
        return;
    }
    if (grow(b, n) != 0)
        return;
    if (n)
        memcpy(b->data + b->len, b->data + off, n); /* off + n <= len: no overlap */
    b->len += n;
    b->data[b->len] = '\0';
}

void gs_buf_fill(struct gs_buf *b, char c, size_t n)
{
    if (grow(b, n) != 0)
        return;
    memset(b->data + b->len, c, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void gs_buf_vprintf(struct gs_buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    int n;

    if (b->status != GS_BUF_OK)
        return;
    /* Most lines fit in what is left: one vsnprintf, a second only after growing. */
    va_copy(ap2, ap);
    n = vsnprintf(b->data ? b->data + b->len : NULL, b->data ? b->cap - b->len : 0, fmt, ap2);
    va_end(ap2);
    if (n < 0) {
        if (b->data)
            b->data[b->len] = '\0';
        b->status = GS_BUF_EFMT;
        return;
    }
    if (b->data && (size_t)n < b->cap - b->len) {
        b->len += (size_t)n;
        return;
    }
    if (b->data)
        b->data[b->len] = '\0'; /* the truncated attempt is not text */
    if (grow(b, (size_t)n) != 0)
        return;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

void gs_buf_printf(struct gs_buf *b, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    gs_buf_vprintf(b, fmt, ap);
    va_end(ap);
}
