/*
 * Where CPython keeps what a stack reader needs, per interpreter version: field offsets of
 * _PyRuntimeState, PyInterpreterState, PyThreadState, the frame (PyFrameObject up to 3.10,
 * _PyInterpreterFrame from 3.11), PyCodeObject, PyBytesObject and the compact unicode objects.
 * 3.8 to 3.12 come from our own table (pylayout.c, written from the struct definitions in
 * CPython's Include/ headers for x86-64/aarch64 LP64 builds); 3.13 and 3.14 from the
 * interpreter's own _Py_DebugOffsets at the start of _PyRuntime, whose layout we know per
 * minor version.
 */
#ifndef GS_STACKS_PYLAYOUT_H
#define GS_STACKS_PYLAYOUT_H

#include <stddef.h>
#include <stdint.h>

struct gs_err;

/* How a frame chain is found and walked. */
enum gs_py_frames {
    GS_PYF_FRAMEOBJ = 1, /* 3.8-3.10: tstate->frame, PyFrameObject.f_back */
    GS_PYF_CFRAME,       /* 3.11-3.12: tstate->cframe->current_frame, _PyInterpreterFrame */
    GS_PYF_DIRECT,       /* 3.13+: tstate->current_frame */
};

/* How a code object maps an instruction offset to a line. */
enum gs_py_lines {
    GS_PYL_LNOTAB = 1, /* 3.8-3.9: co_lnotab (byte increments), f_lasti in bytes */
    GS_PYL_LINETABLE,  /* 3.10: co_linetable (start delta, line delta), f_lasti in units */
    GS_PYL_LOCATIONS,  /* 3.11+: co_linetable location table (PEP 657 varints) */
};

struct gs_py_layout {
    unsigned version; /* PY_VERSION_HEX, e.g. 0x030b02f0 */
    enum gs_py_frames frames;
    enum gs_py_lines lines;
    /* _PyRuntimeState */
    uint32_t rt_interp_head;
    /* PyInterpreterState */
    uint32_t is_next, is_threads_head;
    /* PyThreadState */
    uint32_t ts_next, ts_interp, ts_frame, ts_thread_id, ts_native_tid; /* native: 0 = none */
    uint32_t cf_current_frame; /* _PyCFrame.current_frame (GS_PYF_CFRAME) */
    /* frame */
    uint32_t fr_size;                              /* bytes to read per frame */
    uint32_t fr_back, fr_code, fr_lasti, fr_owner; /* owner: 0 = none */
    int fr_code_tagged;       /* f_executable is a _PyStackRef: clear the low tag bits */
    unsigned fr_owner_cstack; /* owner values >= this are C-stack shims to skip; 0 = none */
    /* PyCodeObject */
    uint32_t co_size; /* bytes to read per code object header */
    uint32_t co_filename, co_name, co_qualname, co_linetable, co_firstlineno, co_code;
    /* co_code: 3.11+ offset of co_code_adaptive in the object; 3.8-3.10 none (0) */
    /* PyObject / PyBytesObject / unicode */
    uint32_t ob_type, bytes_size, bytes_sval;
    uint32_t uni_state, uni_length, uni_ascii_size, uni_compact_size;
};

/* The table entry for a 3.8-3.12 interpreter (major.minor of version_hex). GS_ENOTSUP for
 * versions the table has no row for (3.13+ use gs_pylayout_from_debug). */
int gs_pylayout_for_version(unsigned version_hex, struct gs_py_layout *out, struct gs_err *err);

/* Fills out from the _Py_DebugOffsets bytes at the start of _PyRuntime (3.13, 3.14): checks
 * the "xdebugpy" cookie, the version, the free-threaded flag (refused: its frames differ) and
 * that every offset lies inside its struct's recorded size. GS_EPARSE when the bytes do not
 * read as a known layout. len: bytes available at buf. */
int gs_pylayout_from_debug(const void *buf, size_t len, struct gs_py_layout *out,
                           struct gs_err *err);

/* Bytes of _PyRuntime to read for gs_pylayout_from_debug. */
#define GS_PY_DEBUG_OFFSETS_MAX 1024

#endif
