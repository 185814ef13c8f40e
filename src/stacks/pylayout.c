/*
 * CPython's struct layouts as the stack reader needs them (pylayout.h).
 *
 * The 3.8-3.12 rows are offsets we worked out from the struct definitions in each version's
 * headers (Include/internal/pycore_runtime.h, pycore_interp.h, Include/cpython/pystate.h,
 * frameobject.h / pycore_frame.h, code.h, unicodeobject.h, bytesobject.h) for LP64 builds:
 * 8-byte pointers, 4-byte int, natural alignment. 3.11's row is checked against Debian's
 * /usr/bin/python3.11 by tests/e2e/test_stacks.py in CI; the 3.8, 3.9, 3.10 and 3.12 rows
 * passed the same test against pyenv builds (GPUSCOPE_STACKS_EXTRA_PYTHONS, docs/stacks.md).
 *
 * 3.13 and newer carry their own offsets in _Py_DebugOffsets, the first member of
 * _PyRuntime ("xdebugpy" cookie); only that struct's own shape is known here, per minor
 * version, as an index of its uint64_t fields.
 */
#include "stacks/pylayout.h"

#include <string.h>

#include "gpuscope/gs_err.h"

/* Unicode and bytes objects are the same from 3.8 to 3.11; 3.12 dropped PyASCIIObject.wstr
 * and PyCompactUnicodeObject.wstr_length. */
#define UNI_38 .uni_state = 32, .uni_length = 16, .uni_ascii_size = 48, .uni_compact_size = 72
#define UNI_312 .uni_state = 32, .uni_length = 16, .uni_ascii_size = 40, .uni_compact_size = 56
#define OBJ .ob_type = 8, .bytes_size = 16, .bytes_sval = 32

static const struct gs_py_layout table[] = {
    {
        /* 3.8 and 3.9: tstate->frame is the innermost PyFrameObject; co_lnotab. */
        .version = 0x03080000,
        .frames = GS_PYF_FRAMEOBJ,
        .lines = GS_PYL_LNOTAB,
        .rt_interp_head = 32,
        .is_next = 0,
        .is_threads_head = 8,
        .ts_next = 8,
        .ts_interp = 16,
        .ts_frame = 24,
        .ts_thread_id = 176,
        .ts_native_tid = 0,
        .fr_size = 112,
        .fr_back = 24,
        .fr_code = 32,
        .fr_lasti = 104,
        .co_size = 128,
        .co_filename = 104,
        .co_name = 112,
        .co_qualname = 0,
        .co_linetable = 120,
        .co_firstlineno = 40,
        .co_code = 0,
        OBJ,
        UNI_38,
    },
    {
        .version = 0x03090000,
        .frames = GS_PYF_FRAMEOBJ,
        .lines = GS_PYL_LNOTAB,
        .rt_interp_head = 32,
        .is_next = 0,
        .is_threads_head = 8,
        .ts_next = 8,
        .ts_interp = 16,
        .ts_frame = 24,
        .ts_thread_id = 176,
        .ts_native_tid = 0,
        .fr_size = 112,
        .fr_back = 24,
        .fr_code = 32,
        .fr_lasti = 104,
        .co_size = 128,
        .co_filename = 104,
        .co_name = 112,
        .co_qualname = 0,
        .co_linetable = 120,
        .co_firstlineno = 40,
        .co_code = 0,
        OBJ,
        UNI_38,
    },
    {
        /* 3.10: f_stacktop became int f_stackdepth (f_lasti moves up 8), f_lasti counts
         * code units, co_lnotab became co_linetable (same slot). */
        .version = 0x030a0000,
        .frames = GS_PYF_FRAMEOBJ,
        .lines = GS_PYL_LINETABLE,
        .rt_interp_head = 32,
        .is_next = 0,
        .is_threads_head = 8,
        .ts_next = 8,
        .ts_interp = 16,
        .ts_frame = 24,
        .ts_thread_id = 176,
        .ts_native_tid = 0,
        .fr_size = 104,
        .fr_back = 24,
        .fr_code = 32,
        .fr_lasti = 96,
        .co_size = 128,
        .co_filename = 104,
        .co_name = 112,
        .co_qualname = 0,
        .co_linetable = 120,
        .co_firstlineno = 40,
        .co_code = 0,
        OBJ,
        UNI_38,
    },
    {
        /* 3.11: _PyRuntimeState gained _initialized, PyInterpreterState a threads struct;
         * frames are _PyInterpreterFrame reached through tstate->cframe->current_frame;
         * prev_instr points into co_code_adaptive. */
        .version = 0x030b0000,
        .frames = GS_PYF_CFRAME,
        .lines = GS_PYL_LOCATIONS,
        .rt_interp_head = 40,
        .is_next = 0,
        .is_threads_head = 16,
        .ts_next = 8,
        .ts_interp = 16,
        .ts_frame = 56,
        .ts_thread_id = 152,
        .ts_native_tid = 160,
        .cf_current_frame = 8,
        .fr_size = 72,
        .fr_back = 48,
        .fr_code = 32,
        .fr_lasti = 56,
        .fr_owner = 69,
        .co_size = 144,
        .co_filename = 112,
        .co_name = 120,
        .co_qualname = 128,
        .co_linetable = 136,
        .co_firstlineno = 72,
        .co_code = 184,
        OBJ,
        UNI_38,
    },
    {
        /* 3.12: f_code first in the frame, C-stack shim frames (owner 3), no
         * _PyCFrame.use_tracing, PyInterpreterState grew id/monitoring fields. */
        .version = 0x030c0000,
        .frames = GS_PYF_CFRAME,
        .lines = GS_PYL_LOCATIONS,
        .rt_interp_head = 48,
        .is_next = 0,
        .is_threads_head = 72,
        .ts_next = 8,
        .ts_interp = 16,
        .ts_frame = 56,
        .ts_thread_id = 136,
        .ts_native_tid = 144,
        .cf_current_frame = 0,
        .fr_size = 72,
        .fr_back = 8,
        .fr_code = 0,
        .fr_lasti = 56,
        .fr_owner = 70,
        .fr_owner_cstack = 3,
        .co_size = 144,
        .co_filename = 112,
        .co_name = 120,
        .co_qualname = 128,
        .co_linetable = 136,
        .co_firstlineno = 68,
        .co_code = 192,
        OBJ,
        UNI_312,
    },
};

int gs_pylayout_for_version(unsigned version_hex, struct gs_py_layout *out, struct gs_err *err)
{
    unsigned mm = version_hex & 0xffff0000u;

    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].version == mm) {
            *out = table[i];
            out->version = version_hex;
            return GS_OK;
        }
    return gs_err_set(err, GS_ENOTSUP, "stacks: python %u.%u has no offset table",
                      version_hex >> 24, (version_hex >> 16) & 0xff);
}

/* Index (in uint64_t) of each _Py_DebugOffsets field we use, per minor version. */
struct dbg_index {
    unsigned minor;
    unsigned rt_size, rt_head;
    unsigned is_size, is_next, is_head;
    unsigned ts_size, ts_next, ts_interp, ts_frame, ts_tid, ts_native;
    unsigned fr_size, fr_prev, fr_exec, fr_instr, fr_owner;
    unsigned co_size, co_filename, co_name, co_qualname, co_linetable, co_first, co_code;
    unsigned ob_type;
    unsigned by_size, by_obsize, by_sval;
    unsigned un_size, un_state, un_length, un_ascii;
    unsigned count; /* fields up to and including the last one read */
};

static const struct dbg_index dbg_indices[] = {
    /* 3.13: cookie, version, free_threaded; runtime_state {size, finalizing,
     * interpreters_head}; interpreter_state (13 fields); thread_state (9); interpreter_frame
     * (6); code_object (10); pyobject (2); type_object (4); tuple, list, dict (3 each);
     * float (2); long (3); bytes (3); unicode (4). */
    {13, 3,  5,  6,  8,  9,  19, 21, 22, 23, 24, 25, 28, 29, 30, 31, 33,
     34, 35, 36, 37, 38, 39, 43, 45, 64, 65, 66, 67, 68, 69, 70, 71},
    /* 3.14: interpreter_state gained threads_main, interpreter_frame stackpointer, and a
     * set_object block sits between list and dict. */
    {14, 3,  5,  6,  8,  9,  20, 22, 23, 24, 25, 26, 29, 30, 31, 32, 34,
     36, 37, 38, 39, 40, 41, 45, 47, 70, 71, 72, 73, 74, 75, 76, 77},
};

static int off_in(uint64_t off, uint64_t size, uint64_t width)
{
    return size > 0 && size <= (1u << 20) && off <= size && width <= size - off;
}

int gs_pylayout_from_debug(const void *buf, size_t len, struct gs_py_layout *out,
                           struct gs_err *err)
{
    const uint8_t *b = buf;
    uint64_t f[GS_PY_DEBUG_OFFSETS_MAX / 8];
    const struct dbg_index *ix = NULL;
    unsigned version, minor;

    if (len < 24 || memcmp(b, "xdebugpy", 8) != 0)
        return gs_err_set(err, GS_EPARSE, "stacks: _PyRuntime has no _Py_DebugOffsets cookie");
    if (len > sizeof f)
        len = sizeof f;
    memcpy(f, b, len - len % 8);
    version = (unsigned)f[1];
    minor = (version >> 16) & 0xff;
    if ((version >> 24) != 3)
        return gs_err_set(err, GS_EPARSE, "stacks: _Py_DebugOffsets version 0x%x", version);
    for (size_t i = 0; i < sizeof dbg_indices / sizeof dbg_indices[0]; i++)
        if (dbg_indices[i].minor == minor)
            ix = &dbg_indices[i];
    if (!ix)
        return gs_err_set(err, GS_ENOTSUP,
                          "stacks: python 3.%u: _Py_DebugOffsets layout not known to this "
                          "gpuscope (3.13 and 3.14 are)",
                          minor);
    if (f[2] != 0)
        return gs_err_set(err, GS_ENOTSUP,
                          "stacks: python 3.%u free-threaded build: frames not supported", minor);
    if (len / 8 < ix->count)
        return gs_err_set(err, GS_EPARSE, "stacks: _Py_DebugOffsets truncated");

    memset(out, 0, sizeof *out);
    out->version = version;
    out->frames = GS_PYF_DIRECT;
    out->lines = GS_PYL_LOCATIONS;
    out->rt_interp_head = (uint32_t)f[ix->rt_head];
    out->is_next = (uint32_t)f[ix->is_next];
    out->is_threads_head = (uint32_t)f[ix->is_head];
    out->ts_next = (uint32_t)f[ix->ts_next];
    out->ts_interp = (uint32_t)f[ix->ts_interp];
    out->ts_frame = (uint32_t)f[ix->ts_frame];
    out->ts_thread_id = (uint32_t)f[ix->ts_tid];
    out->ts_native_tid = (uint32_t)f[ix->ts_native];
    out->fr_back = (uint32_t)f[ix->fr_prev];
    out->fr_code = (uint32_t)f[ix->fr_exec];
    out->fr_lasti = (uint32_t)f[ix->fr_instr];
    out->fr_owner = (uint32_t)f[ix->fr_owner];
    out->fr_code_tagged = minor >= 14;
    out->fr_owner_cstack = 3; /* 3.13: CSTACK = 3; 3.14: INTERPRETER = 3, CSTACK = 4 */
    out->co_filename = (uint32_t)f[ix->co_filename];
    out->co_name = (uint32_t)f[ix->co_name];
    out->co_qualname = (uint32_t)f[ix->co_qualname];
    out->co_linetable = (uint32_t)f[ix->co_linetable];
    out->co_firstlineno = (uint32_t)f[ix->co_first];
    out->co_code = (uint32_t)f[ix->co_code];
    out->ob_type = (uint32_t)f[ix->ob_type];
    out->bytes_size = (uint32_t)f[ix->by_obsize];
    out->bytes_sval = (uint32_t)f[ix->by_sval];
    out->uni_state = (uint32_t)f[ix->un_state];
    out->uni_length = (uint32_t)f[ix->un_length];
    out->uni_ascii_size = (uint32_t)f[ix->un_ascii];
    out->uni_compact_size = out->uni_ascii_size + 16; /* + utf8_length, utf8 */

    /* Every offset inside its struct's recorded size: a wrong guess of the layout reads
     * sizes as offsets and fails here rather than walking garbage. */
    if (!off_in(f[ix->rt_head], f[ix->rt_size], 8) || !off_in(f[ix->is_next], f[ix->is_size], 8) ||
        !off_in(f[ix->is_head], f[ix->is_size], 8) || !off_in(f[ix->ts_next], f[ix->ts_size], 8) ||
        !off_in(f[ix->ts_interp], f[ix->ts_size], 8) ||
        !off_in(f[ix->ts_frame], f[ix->ts_size], 8) || !off_in(f[ix->ts_tid], f[ix->ts_size], 8) ||
        !off_in(f[ix->ts_native], f[ix->ts_size], 8) ||
        !off_in(f[ix->fr_prev], f[ix->fr_size], 8) || !off_in(f[ix->fr_exec], f[ix->fr_size], 8) ||
        !off_in(f[ix->fr_instr], f[ix->fr_size], 8) ||
        !off_in(f[ix->fr_owner], f[ix->fr_size], 1) ||
        !off_in(f[ix->co_filename], f[ix->co_size], 8) ||
        !off_in(f[ix->co_name], f[ix->co_size], 8) ||
        !off_in(f[ix->co_qualname], f[ix->co_size], 8) ||
        !off_in(f[ix->co_linetable], f[ix->co_size], 8) ||
        !off_in(f[ix->co_first], f[ix->co_size], 4) || !off_in(f[ix->co_code], f[ix->co_size], 0) ||
        !off_in(f[ix->by_obsize], f[ix->by_size], 8) ||
        !off_in(f[ix->by_sval], f[ix->by_size], 0) || !off_in(f[ix->un_state], f[ix->un_size], 4) ||
        !off_in(f[ix->un_length], f[ix->un_size], 8) || f[ix->un_ascii] > f[ix->un_size] ||
        f[ix->ob_type] != 8)
        return gs_err_set(err, GS_EPARSE,
                          "stacks: python 3.%u _Py_DebugOffsets: an offset lies outside its "
                          "struct",
                          minor);
    out->fr_size = (uint32_t)(f[ix->fr_size] > 128 ? 128 : f[ix->fr_size]);
    out->co_size = out->co_linetable + 8;
    if (out->co_filename + 8 > out->co_size || out->co_name + 8 > out->co_size ||
        out->co_qualname + 8 > out->co_size || out->co_firstlineno + 4 > out->co_size)
        out->co_size = (uint32_t)(f[ix->co_size] > 512 ? 512 : f[ix->co_size]);
    if (out->fr_back + 8 > out->fr_size || out->fr_code + 8 > out->fr_size ||
        out->fr_lasti + 8 > out->fr_size || out->fr_owner + 1 > out->fr_size)
        return gs_err_set(err, GS_EPARSE, "stacks: python 3.%u frame larger than we read", minor);
    return GS_OK;
}
