/*
 * The Python stack walker (pyread.h): interpreters -> thread states -> frames -> code objects,
 * read through struct gs_mem with a layout from pylayout.c. Names and line tables are cached
 * per code object; functions are interned. Nothing here trusts the target: every read may
 * fail, every pointer is checked, every loop is bounded.
 */
#include "stacks/pyread.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "gpuscope/gs_err.h"

#define CODE_CACHE 4096     /* code objects remembered (direct-mapped by address) */
#define MAX_LINETABLE 65536 /* bytes of a line table we copy at most */
#define MAX_NAME 512        /* bytes of a name or file name we keep (UTF-8) */
#define MAX_INTERPS 16
#define FUNCS_FIRST 256  /* the function table starts this big and doubles up to the max */
#define FRAME_BLOCK 4096 /* bytes read below a frame: its callers usually live there */

struct code_ent {
    uint64_t addr, filename, name, linetable; /* the object and what it pointed at */
    uint32_t func;
    int first_line;
    uint8_t *tbl;
    uint32_t tbl_len;
};

struct gs_pyread {
    struct gs_mem mem;
    struct gs_pytarget t;
    struct gs_py_layout L;
    struct code_ent codes[CODE_CACHE];
    struct gs_pyfunc *funcs;
    unsigned nfuncs;
    uint32_t *fhash; /* 2 * cap_funcs slots: 0 empty, else id + 1 */
    unsigned cap_funcs;
    /* 3.11+ frames sit in each thread's data stack, callers below callees: one read of the
     * block below a frame usually holds the whole chain. Valid for one sample only. */
    uint8_t blk[FRAME_BLOCK];
    uint64_t blk_addr;
    uint32_t blk_len;
    /* one walk's code objects, read in one batch */
    uint64_t pend_code[GS_PY_MAX_DEPTH];
    int64_t pend_lasti[GS_PY_MAX_DEPTH];
    uint8_t hdrs[GS_PY_MAX_DEPTH][512];
    uint8_t *hdr_ptr[GS_PY_MAX_DEPTH];
    unsigned char hdr_ok[GS_PY_MAX_DEPTH];
};

static uint64_t rd64(const uint8_t *b, uint32_t off)
{
    uint64_t v;
    memcpy(&v, b + off, sizeof v);
    return v;
}

static uint32_t rd32(const uint8_t *b, uint32_t off)
{
    uint32_t v;
    memcpy(&v, b + off, sizeof v);
    return v;
}

static int ptr_ok(uint64_t p)
{
    /* user-space, 8-aligned, not in the first page */
    return p >= 4096 && (p & 7) == 0 && p < (UINT64_C(1) << 56);
}

static int rdp(struct gs_pyread *r, uint64_t addr, uint64_t *out)
{
    return gs_mem_read(&r->mem, addr, out, sizeof *out);
}

/* ---- line tables ---- */

static int read_varint(const uint8_t *t, size_t len, size_t *i, uint64_t *out)
{
    uint64_t v = 0;
    unsigned shift = 0;
    uint8_t b;

    do {
        if (*i >= len || shift > 60)
            return -1;
        b = t[(*i)++];
        v |= (uint64_t)(b & 63) << shift;
        shift += 6;
    } while (b & 64);
    *out = v;
    return 0;
}

static int read_svarint(const uint8_t *t, size_t len, size_t *i, int64_t *out)
{
    uint64_t u;

    if (read_varint(t, len, i, &u) != 0)
        return -1;
    *out = (u & 1) ? -(int64_t)(u >> 1) : (int64_t)(u >> 1);
    return 0;
}

/* 3.11+ location table (Objects/locations.md): entries of a first byte 1cccclll (code,
 * length-1 in code units) and code-dependent varints. */
static int locations_line(const uint8_t *t, size_t len, int first, int64_t addrq)
{
    int64_t line = first, addr = 0;
    size_t i = 0;

    while (i < len) {
        uint8_t b = t[i++];
        unsigned code = (b >> 3) & 15;
        int64_t delta = 0, end;
        uint64_t skip;

        if (!(b & 0x80))
            return 0;
        if (code == 15) {
            /* no location */
        } else if (code == 14) {
            if (read_svarint(t, len, &i, &delta) != 0 || read_varint(t, len, &i, &skip) != 0 ||
                read_varint(t, len, &i, &skip) != 0 || read_varint(t, len, &i, &skip) != 0)
                return 0;
        } else if (code == 13) {
            if (read_svarint(t, len, &i, &delta) != 0)
                return 0;
        } else if (code >= 10) {
            delta = code - 10;
            i += 2;
        } else {
            i += 1;
        }
        if (delta > INT32_MAX || delta < -(int64_t)INT32_MAX)
            return 0; /* no real table moves a line this far: garbage, no line */
        line += delta;
        end = addr + ((b & 7) + 1) * 2;
        if (addrq < end)
            return code == 15 || line < 0 || line > INT32_MAX ? 0 : (int)line;
        addr = end;
    }
    return 0;
}

int gs_pyread_addr2line(enum gs_py_lines lines, const uint8_t *t, size_t len, int first,
                        int64_t addrq)
{
    int64_t line = first, addr = 0;

    if (addrq < 0)
        return first;
    if (lines == GS_PYL_LOCATIONS)
        return locations_line(t, len, first, addrq);
    if (lines == GS_PYL_LINETABLE) {
        /* 3.10: (start delta, line delta) byte pairs; line delta -128: no line */
        int64_t end = 0;
        for (size_t i = 0; i + 1 < len; i += 2) {
            int8_t ld = (int8_t)t[i + 1];
            int64_t start = end;
            end = start + t[i];
            if (ld != -128)
                line += ld;
            if (addrq >= start && addrq < end)
                return ld == -128 || line < 0 || line > INT32_MAX ? 0 : (int)line;
        }
        return 0;
    }
    /* 3.8-3.9 co_lnotab: (address increment, signed line increment) */
    for (size_t i = 0; i + 1 < len; i += 2) {
        addr += t[i];
        if (addr > addrq)
            break;
        line += (int8_t)t[i + 1];
    }
    return line < 0 || line > INT32_MAX ? 0 : (int)line;
}

/* ---- strings ---- */

static size_t put_utf8(char *o, uint32_t c)
{
    if (c < 0x80) {
        o[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (char)(0xc0 | (c >> 6));
        o[1] = (char)(0x80 | (c & 63));
        return 2;
    }
    if (c < 0x10000 && (c < 0xd800 || c > 0xdfff)) {
        o[0] = (char)(0xe0 | (c >> 12));
        o[1] = (char)(0x80 | ((c >> 6) & 63));
        o[2] = (char)(0x80 | (c & 63));
        return 3;
    }
    if (c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        c = 0xfffd;
    if (c > 0xffff) {
        o[0] = (char)(0xf0 | (c >> 18));
        o[1] = (char)(0x80 | ((c >> 12) & 63));
        o[2] = (char)(0x80 | ((c >> 6) & 63));
        o[3] = (char)(0x80 | (c & 63));
        return 4;
    }
    return put_utf8(o, 0xfffd);
}

/* A compact str object at addr as UTF-8 in out (NUL-terminated, truncated to MAX_NAME). */
static int read_str(struct gs_pyread *r, uint64_t addr, char *out, size_t cap)
{
    uint8_t hdr[128];
    uint8_t raw[MAX_NAME * 4];
    uint32_t state, kind;
    uint64_t n, data;
    size_t o = 0;

    out[0] = '\0';
    if (!ptr_ok(addr) || r->L.uni_compact_size > sizeof hdr ||
        gs_mem_read(&r->mem, addr, hdr, r->L.uni_ascii_size) != GS_OK)
        return GS_EIO;
    state = rd32(hdr, r->L.uni_state);
    n = rd64(hdr, r->L.uni_length);
    kind = (state >> 2) & 7;
    if (!((state >> 5) & 1) || (kind != 1 && kind != 2 && kind != 4) || n > (UINT64_C(1) << 30))
        return GS_EPARSE; /* not a compact string */
    data = addr + (((state >> 6) & 1) ? r->L.uni_ascii_size : r->L.uni_compact_size);
    if (n > MAX_NAME)
        n = MAX_NAME;
    if (gs_mem_read(&r->mem, data, raw, (size_t)n * kind) != GS_OK)
        return GS_EIO;
    for (uint64_t i = 0; i < n && o + 5 < cap; i++) {
        uint32_t c = kind == 1   ? raw[i]
                     : kind == 2 ? (uint32_t)raw[2 * i] | raw[2 * i + 1] << 8
                                 : rd32(raw, (uint32_t)(4 * i));
        if (c == 0)
            c = '?';
        o += put_utf8(out + o, c);
    }
    out[o] = '\0';
    return GS_OK;
}

/* ---- functions ---- */

/* The id of (name, file), added when new; 0 (the "[unknown]" function) when full. */
/* Doubles the function table and rehashes; -1 when at the maximum or out of memory. */
static int grow_funcs(struct gs_pyread *r)
{
    unsigned ncap = r->cap_funcs * 2;
    struct gs_pyfunc *nf;
    uint32_t *nh;

    if (r->cap_funcs >= GS_PY_MAX_FUNCS)
        return -1;
    nf = realloc(r->funcs, ncap * sizeof *nf);
    if (!nf)
        return -1;
    r->funcs = nf;
    nh = calloc(2 * (size_t)ncap, sizeof *nh);
    if (!nh)
        return -1;
    for (unsigned i = 0; i < r->nfuncs; i++) {
        uint32_t h = gs_hash_fnv1a_pair(r->funcs[i].name, r->funcs[i].file);
        for (uint32_t k = 0;; k++)
            if (!nh[(h + k) % (2 * ncap)]) {
                nh[(h + k) % (2 * ncap)] = i + 1;
                break;
            }
    }
    free(r->fhash);
    r->fhash = nh;
    r->cap_funcs = ncap;
    return 0;
}

static uint32_t intern(struct gs_pyread *r, const char *name, const char *file, int first)
{
    uint32_t h = gs_hash_fnv1a_pair(name, file);
    uint32_t slots = 2 * r->cap_funcs;

    for (uint32_t k = 0; k < slots; k++) {
        uint32_t *slot = &r->fhash[(h + k) % slots];
        struct gs_pyfunc *f;
        if (*slot) {
            f = &r->funcs[*slot - 1];
            if (strcmp(f->name, name) == 0 && strcmp(f->file, file) == 0)
                return *slot - 1;
            continue;
        }
        if (r->nfuncs >= r->cap_funcs) {
            /* the table is at most half full, so the probe always ends at a free slot */
            if (grow_funcs(r) != 0)
                return 0;
            return intern(r, name, file, first);
        }
        f = &r->funcs[r->nfuncs];
        f->name = strdup(name);
        f->file = strdup(file);
        if (!f->name || !f->file) {
            free((char *)f->name);
            free((char *)f->file);
            return 0;
        }
        f->first_line = first;
        *slot = ++r->nfuncs;
        return *slot - 1;
    }
    return 0;
}

/* ---- code objects ---- */

/* The cache entry of the code object at `code` whose header bytes are hdr (L->co_size). */
static struct code_ent *code_resolve(struct gs_pyread *r, uint64_t code, const uint8_t *hdr)
{
    const struct gs_py_layout *L = &r->L;
    struct code_ent *ce = &r->codes[(code >> 4) % CODE_CACHE];
    uint64_t fn, nm, lt, n = 0;
    char name[MAX_NAME * 3 + 8], file[MAX_NAME * 3 + 8];
    int first;
    uint8_t *tbl = NULL;

    if (r->t.code_type_addr && rd64(hdr, L->ob_type) != r->t.code_type_addr)
        return NULL;
    fn = rd64(hdr, L->co_filename);
    nm = rd64(hdr, L->co_qualname ? L->co_qualname : L->co_name);
    lt = rd64(hdr, L->co_linetable);
    first = (int)rd32(hdr, L->co_firstlineno);
    if (ce->addr == code && ce->filename == fn && ce->name == nm && ce->linetable == lt)
        return ce;

    if (read_str(r, nm, name, sizeof name) != GS_OK)
        snprintf(name, sizeof name, "[code 0x%llx]", (unsigned long long)code);
    if (read_str(r, fn, file, sizeof file) != GS_OK)
        snprintf(file, sizeof file, "?");
    if (ptr_ok(lt) && rdp(r, lt + L->bytes_size, &n) == GS_OK && n > 0 && n <= MAX_LINETABLE) {
        tbl = malloc((size_t)n);
        if (tbl && gs_mem_read(&r->mem, lt + L->bytes_sval, tbl, (size_t)n) != GS_OK) {
            free(tbl);
            tbl = NULL;
        }
    }
    free(ce->tbl);
    ce->addr = code;
    ce->filename = fn;
    ce->name = nm;
    ce->linetable = lt;
    ce->first_line = first;
    ce->tbl = tbl;
    ce->tbl_len = tbl ? (uint32_t)n : 0;
    ce->func = intern(r, name, file, first);
    return ce;
}

/* ---- the walk ---- */

static uint64_t first_frame(struct gs_pyread *r, const uint8_t *ts)
{
    uint64_t f = rd64(ts, r->L.ts_frame), cur = 0;

    if (r->L.frames != GS_PYF_CFRAME)
        return f;
    if (!ptr_ok(f) || rdp(r, f + r->L.cf_current_frame, &cur) != GS_OK)
        return 0;
    return cur;
}

/* A frame's bytes, from the sample's block when they lie in it; otherwise one read of the
 * block that ends with this frame (falling back to the frame alone near unmapped memory). */
static int read_frame(struct gs_pyread *r, uint64_t frame, uint8_t *buf, uint32_t len)
{
    uint64_t start;

    if (r->L.frames == GS_PYF_FRAMEOBJ)
        return gs_mem_read(&r->mem, frame, buf, len);
    if (r->blk_len && frame >= r->blk_addr && frame + len <= r->blk_addr + r->blk_len) {
        memcpy(buf, r->blk + (frame - r->blk_addr), len);
        return GS_OK;
    }
    start = frame + len > FRAME_BLOCK ? frame + len - FRAME_BLOCK : 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            /* the block reached below the data stack's chunk: the frame's own page only */
            if ((frame & ~UINT64_C(4095)) <= start)
                break;
            start = frame & ~UINT64_C(4095);
            if (frame + len - start > FRAME_BLOCK)
                break;
        }
        if (gs_mem_read(&r->mem, start, r->blk, (size_t)(frame + len - start)) == GS_OK) {
            r->blk_addr = start;
            r->blk_len = (uint32_t)(frame + len - start);
            memcpy(buf, r->blk + (frame - start), len);
            return GS_OK;
        }
    }
    r->blk_len = 0;
    return gs_mem_read(&r->mem, frame, buf, len);
}

static void walk_frames(struct gs_pyread *r, uint64_t frame, struct gs_pythread *th)
{
    const struct gs_py_layout *L = &r->L;
    uint8_t buf[256];
    unsigned n = 0;

    /* 1: the frame chain, each frame's code object and instruction */
    for (unsigned hops = 0; frame; hops++) {
        uint64_t code, next;

        if (hops >= 2 * GS_PY_MAX_DEPTH || n >= GS_PY_MAX_DEPTH || !ptr_ok(frame) ||
            L->fr_size > sizeof buf || read_frame(r, frame, buf, L->fr_size) != GS_OK) {
            th->partial = 1;
            break;
        }
        next = rd64(buf, L->fr_back);
        code = rd64(buf, L->fr_code);
        if (L->fr_code_tagged)
            code &= ~UINT64_C(7);
        if (next == frame)
            th->partial = 1;
        if (!(L->fr_owner_cstack && buf[L->fr_owner] >= L->fr_owner_cstack)) {
            r->pend_code[n] = code;
            if (L->frames == GS_PYF_FRAMEOBJ) {
                int32_t lasti = (int32_t)rd32(buf, L->fr_lasti);
                r->pend_lasti[n] = L->lines == GS_PYL_LNOTAB ? lasti : (int64_t)lasti * 2;
            } else {
                r->pend_lasti[n] = (int64_t)(rd64(buf, L->fr_lasti) - (code + L->co_code));
            }
            n++;
        } /* else a C-stack shim, not Python code */
        if (next == frame)
            break;
        frame = next;
    }
    /* 2: their headers in one batch */
    for (unsigned i = 0; i < n; i++)
        r->hdr_ptr[i] = r->hdrs[i];
    if (L->co_size > sizeof r->hdrs[0])
        n = 0;
    for (unsigned i = 0; i < n; i++)
        if (!ptr_ok(r->pend_code[i])) {
            n = i + 1; /* stops at this frame in 3 */
            break;
        }
    gs_mem_readv(&r->mem, r->pend_code, r->hdr_ptr, L->co_size, n, r->hdr_ok);
    /* 3: names and lines; the walk ends at the first code object that is not one */
    for (unsigned i = 0; i < n; i++) {
        struct gs_pyframe *pf = &th->frames[th->nframes++];
        struct code_ent *ce = ptr_ok(r->pend_code[i]) && r->hdr_ok[i]
                                  ? code_resolve(r, r->pend_code[i], r->hdrs[i])
                                  : NULL;
        int64_t addr = r->pend_lasti[i];
        if (!ce) {
            pf->func = 0;
            pf->line = 0;
            th->partial = 1;
            return;
        }
        pf->func = ce->func;
        pf->line = addr > (int64_t)MAX_LINETABLE * 64
                       ? 0
                       : gs_pyread_addr2line(L->lines, ce->tbl, ce->tbl_len, ce->first_line, addr);
    }
}

static uint32_t ts_bytes(const struct gs_py_layout *L)
{
    uint32_t m = L->ts_next;
    if (L->ts_interp > m)
        m = L->ts_interp;
    if (L->ts_frame > m)
        m = L->ts_frame;
    if (L->ts_thread_id > m)
        m = L->ts_thread_id;
    if (L->ts_native_tid > m)
        m = L->ts_native_tid;
    return m + 8;
}

int gs_pyread_sample(struct gs_pyread *r, pid_t only_tid, struct gs_pysample *out,
                     struct gs_err *err)
{
    const struct gs_py_layout *L = &r->L;
    uint64_t interp = 0;
    uint8_t ts[1024];
    uint32_t tsn = ts_bytes(L);
    int rc;

    out->nthreads = 0;
    out->truncated = 0;
    r->blk_len = 0; /* memory changed since the last sample */
    if (tsn > sizeof ts)
        return gs_err_set(err, GS_EINVAL, "stacks: thread state layout too large");
    rc = rdp(r, r->t.runtime_addr + L->rt_interp_head, &interp);
    if (rc != GS_OK)
        return gs_err_set(err, rc, "stacks: reading _PyRuntime at 0x%llx: %s",
                          (unsigned long long)r->t.runtime_addr, gs_strerror(rc));
    if (interp == 0)
        return gs_err_set(err, GS_EPARSE, "stacks: no interpreter (not started or exiting)");
    for (unsigned ni = 0; interp && ni < MAX_INTERPS; ni++) {
        uint64_t t = 0, next_interp = 0;
        if (!ptr_ok(interp))
            return gs_err_set(err, GS_EPARSE, "stacks: interpreter pointer 0x%llx is not one",
                              (unsigned long long)interp);
        rc = rdp(r, interp + L->is_threads_head, &t);
        if (rc == GS_OK)
            rc = rdp(r, interp + L->is_next, &next_interp);
        if (rc != GS_OK)
            return gs_err_set(err, rc, "stacks: reading interpreter 0x%llx: %s",
                              (unsigned long long)interp, gs_strerror(rc));
        for (unsigned nt = 0; t && nt < GS_PY_MAX_THREADS && out->nthreads < GS_PY_MAX_THREADS;
             nt++) {
            struct gs_pythread *th = &out->threads[out->nthreads];
            uint64_t next;
            if (!ptr_ok(t))
                break;
            rc = gs_mem_read(&r->mem, t, ts, tsn);
            if (rc == GS_ENOTFOUND || rc == GS_EPERM)
                return gs_err_set(err, rc, "stacks: reading thread state: %s", gs_strerror(rc));
            if (rc != GS_OK || rd64(ts, L->ts_interp) != interp) {
                if (ni == 0 && nt == 0 && out->nthreads == 0)
                    return gs_err_set(err, GS_EPARSE,
                                      "stacks: thread state 0x%llx does not point back at its "
                                      "interpreter",
                                      (unsigned long long)t);
                break; /* a thread state freed under us: the rest of the list is stale */
            }
            next = rd64(ts, L->ts_next);
            th->thread_id = rd64(ts, L->ts_thread_id);
            th->native_tid = L->ts_native_tid ? (int64_t)rd64(ts, L->ts_native_tid) : 0;
            th->partial = 0;
            th->nframes = 0;
            if (only_tid > 0 && L->ts_native_tid && th->native_tid != only_tid) {
                t = next == t ? 0 : next;
                continue;
            }
            {
                /* The thread runs while we read: when its innermost frame is another one
                 * after the walk, the walk may mix two stacks; walk again (twice at most),
                 * then keep the last and mark it partial. */
                uint64_t f0 = first_frame(r, ts), f1 = 0;
                for (int tries = 0;; tries++) {
                    th->nframes = 0;
                    th->partial = 0;
                    walk_frames(r, f0, th);
                    if (gs_mem_read(&r->mem, t, ts, tsn) != GS_OK)
                        break;
                    f1 = first_frame(r, ts);
                    if (f1 == f0)
                        break;
                    if (tries == 2) {
                        th->partial = 1;
                        break;
                    }
                    f0 = f1;
                }
            }
            out->nthreads++;
            t = next == t ? 0 : next;
        }
        if (t && out->nthreads >= GS_PY_MAX_THREADS)
            out->truncated = 1;
        if (ni == 0 && !L->ts_native_tid && out->nthreads > 0 && r->mem.pid > 0)
            /* no native ids before 3.11: the oldest thread state (the list's tail) is the
             * main thread, whose OS id is the pid */
            out->threads[out->nthreads - 1].native_tid = r->mem.pid;
        interp = next_interp;
    }
    if (only_tid > 0 && !L->ts_native_tid && out->nthreads > 1) {
        /* no native ids before 3.11: the main thread's state is the oldest, the list's tail */
        memmove(&out->threads[0], &out->threads[out->nthreads - 1], sizeof out->threads[0]);
        out->nthreads = 1;
    }
    return GS_OK;
}

/* ---- life cycle ---- */

int gs_pyread_new(const struct gs_mem *mem, const struct gs_pytarget *t, struct gs_pyread **out,
                  struct gs_err *err)
{
    struct gs_pyread *r = calloc(1, sizeof *r);
    uint8_t dbg[GS_PY_DEBUG_OFFSETS_MAX];
    uint32_t ver = t->version;
    uint64_t interp = 0, ts = 0, back = 0;
    int rc;

    if (!r) {
        struct gs_mem m = *mem;
        gs_mem_fini(&m);
        return gs_err_set(err, GS_ENOMEM, "stacks: out of memory");
    }
    r->mem = *mem;
    r->t = *t;
    r->cap_funcs = FUNCS_FIRST;
    r->funcs = calloc(r->cap_funcs, sizeof *r->funcs);
    r->fhash = calloc(2 * (size_t)r->cap_funcs, sizeof *r->fhash);
    if (!r->funcs || !r->fhash) {
        rc = gs_err_set(err, GS_ENOMEM, "stacks: out of memory");
        goto fail;
    }
    r->funcs[0].name = strdup("[unknown]");
    r->funcs[0].file = strdup("?");
    r->nfuncs = 1;
    if (!r->funcs[0].name || !r->funcs[0].file) {
        rc = gs_err_set(err, GS_ENOMEM, "stacks: out of memory");
        goto fail;
    }
    if (!ver && t->version_addr) {
        rc = gs_mem_read(&r->mem, t->version_addr, &ver, sizeof ver);
        if (rc != GS_OK) {
            gs_err_set(err, rc, "stacks: reading Py_Version at 0x%llx: %s",
                       (unsigned long long)t->version_addr, gs_strerror(rc));
            goto fail;
        }
    }
    if ((ver >> 24) != 3) {
        rc = gs_err_set(err, GS_EPARSE, "stacks: python version 0x%x is not 3.x", ver);
        goto fail;
    }
    if (((ver >> 16) & 0xff) >= 13) {
        rc = gs_mem_read(&r->mem, t->runtime_addr, dbg, sizeof dbg);
        if (rc != GS_OK) {
            gs_err_set(err, rc, "stacks: reading _PyRuntime: %s", gs_strerror(rc));
            goto fail;
        }
        rc = gs_pylayout_from_debug(dbg, sizeof dbg, &r->L, err);
    } else {
        rc = gs_pylayout_for_version(ver, &r->L, err);
    }
    if (rc != GS_OK)
        goto fail;
    r->t.version = r->L.version;

    rc = rdp(r, t->runtime_addr + r->L.rt_interp_head, &interp);
    if (rc != GS_OK) {
        gs_err_set(err, rc, "stacks: reading _PyRuntime at 0x%llx: %s",
                   (unsigned long long)t->runtime_addr, gs_strerror(rc));
        goto fail;
    }
    if (!ptr_ok(interp) || rdp(r, interp + r->L.is_threads_head, &ts) != GS_OK ||
        (ts && (!ptr_ok(ts) || rdp(r, ts + r->L.ts_interp, &back) != GS_OK || back != interp))) {
        rc = gs_err_set(err, GS_EPARSE,
                        "stacks: python %u.%u: _PyRuntime at 0x%llx does not lead to an "
                        "interpreter and its threads (not initialised yet, or another layout)",
                        ver >> 24, (ver >> 16) & 0xff, (unsigned long long)t->runtime_addr);
        goto fail;
    }
    *out = r;
    return GS_OK;
fail:
    gs_pyread_close(r);
    return rc;
}

static unsigned parse_version_string(const char *s)
{
    unsigned a = 0, b = 0, c = 0;
    if (!s || sscanf(s, "%u.%u.%u", &a, &b, &c) < 2 || a > 255 || b > 255 || c > 255)
        return 0;
    return a << 24 | b << 16 | c << 8 | 0xf0;
}

int gs_pyread_open_self(struct gs_pyread **out, struct gs_err *err)
{
    struct gs_pytarget t = {0};
    struct gs_mem mem;
    void *rt = dlsym(RTLD_DEFAULT, "_PyRuntime");
    void *ct = dlsym(RTLD_DEFAULT, "PyCode_Type");
    const unsigned *pv = dlsym(RTLD_DEFAULT, "Py_Version");
    const char *(*getver)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "Py_GetVersion");
    int rc;

    if (!rt)
        return gs_err_set(err, GS_ENOTFOUND, "stacks: no _PyRuntime in this process");
    t.runtime_addr = (uint64_t)(uintptr_t)rt;
    t.code_type_addr = (uint64_t)(uintptr_t)ct;
    t.version = pv ? *pv : parse_version_string(getver ? getver() : NULL);
    rc = gs_mem_init_self(&mem, err);
    if (rc != GS_OK)
        return rc;
    return gs_pyread_new(&mem, &t, out, err); /* owns mem, also on failure */
}

void gs_pyread_close(struct gs_pyread *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < CODE_CACHE; i++)
        free(r->codes[i].tbl);
    if (r->funcs)
        for (unsigned i = 0; i < r->nfuncs; i++) {
            free((char *)r->funcs[i].name);
            free((char *)r->funcs[i].file);
        }
    free(r->funcs);
    free(r->fhash);
    gs_mem_fini(&r->mem);
    free(r);
}

const struct gs_pyfunc *gs_pyread_func(const struct gs_pyread *r, uint32_t f)
{
    return f < r->nfuncs ? &r->funcs[f] : NULL;
}

unsigned gs_pyread_version(const struct gs_pyread *r)
{
    return r->L.version;
}

uint64_t gs_pyread_reads(const struct gs_pyread *r)
{
    return r->mem.reads;
}
