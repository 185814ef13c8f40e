/*
 * Sampled stacks into a profile, and the thread dump (collect.h).
 */
#include "stacks/collect.h"

#include <jansson.h>
#include <string.h>

#include "gpuscope/gs_err.h"
#include "stacks/taskstate.h"

void gs_collect_init(struct gs_collect *c, struct gs_stackprof *prof, const struct gs_pyread *r)
{
    c->prof = prof;
    c->r = r;
    memset(c->map, 0, sizeof c->map);
}

uint32_t gs_collect_label(struct gs_collect *c, uint32_t f)
{
    const struct gs_pyfunc *fn;
    uint32_t id;

    if (f >= GS_PY_MAX_FUNCS)
        return GS_PROF_NONE;
    if (c->map[f])
        return c->map[f] - 1;
    fn = gs_pyread_func(c->r, f);
    if (!fn)
        return GS_PROF_NONE;
    id = gs_stackprof_label(c->prof, fn->name, fn->file);
    if (id != GS_PROF_NONE)
        c->map[f] = id + 1;
    return id;
}

int gs_collect_add(struct gs_collect *c, const struct gs_pythread *th, const char *root, uint64_t w)
{
    uint32_t ids[GS_PY_MAX_DEPTH + 1];
    unsigned n = 0;

    if (root) {
        ids[n] = gs_stackprof_label(c->prof, root, "");
        if (ids[n] != GS_PROF_NONE)
            n++;
    }
    for (unsigned i = th->nframes; i-- > 0;) {
        uint32_t id = gs_collect_label(c, th->frames[i].func);
        if (id != GS_PROF_NONE)
            ids[n++] = id;
    }
    return gs_stackprof_add(c->prof, ids, n, w);
}

static void version_str(unsigned v, char *buf, size_t cap)
{
    snprintf(buf, cap, "%u.%u.%u", v >> 24, (v >> 16) & 0xff, (v >> 8) & 0xff);
}

void gs_collect_dump(const struct gs_pyread *r, pid_t pid, const struct gs_pysample *s, FILE *out)
{
    char ver[32];

    version_str(gs_pyread_version(r), ver, sizeof ver);
    fprintf(out, "Process %d: python %s, %u thread%s%s\n", (int)pid, ver, s->nthreads,
            s->nthreads == 1 ? "" : "s",
            s->truncated ? " shown (it has more; at most this many are read)" : "");
    for (unsigned t = 0; t < s->nthreads; t++) {
        const struct gs_pythread *th = &s->threads[t];
        struct gs_taskstate ts;
        if (th->native_tid > 0 && gs_taskstate_read(pid, (pid_t)th->native_tid, &ts) == GS_OK)
            fprintf(out, "\nThread %lld (%s)%s: %s\n", (long long)th->native_tid, ts.comm,
                    th->native_tid == pid ? " [main]" : "", ts.what);
        else
            fprintf(out, "\nThread 0x%llx\n", (unsigned long long)th->thread_id);
        if (th->nframes == 0)
            fprintf(out, "    (no Python frames)\n");
        for (unsigned i = 0; i < th->nframes; i++) {
            const struct gs_pyfunc *f = gs_pyread_func(r, th->frames[i].func);
            if (th->frames[i].line > 0)
                fprintf(out, "    %s (%s:%d)\n", f ? f->name : "?", f ? f->file : "?",
                        th->frames[i].line);
            else
                fprintf(out, "    %s (%s)\n", f ? f->name : "?", f ? f->file : "?");
        }
        if (th->partial)
            fprintf(out, "    ... (stack changed while read, or deeper than %d frames)\n",
                    GS_PY_MAX_DEPTH);
    }
}

int gs_collect_dump_json(const struct gs_pyread *r, pid_t pid, const struct gs_pysample *s,
                         FILE *out, struct gs_err *err)
{
    json_t *root = json_object(), *threads = json_array();
    char ver[32];
    int rc = GS_OK;

    if (!root || !threads) {
        json_decref(root);
        json_decref(threads);
        return gs_err_set(err, GS_ENOMEM, "stacks: out of memory");
    }
    version_str(gs_pyread_version(r), ver, sizeof ver);
    json_object_set_new(root, "pid", json_integer(pid));
    json_object_set_new(root, "python", json_string(ver));
    for (unsigned t = 0; t < s->nthreads; t++) {
        const struct gs_pythread *th = &s->threads[t];
        json_t *jt = json_object(), *frames = json_array();
        struct gs_taskstate ts;
        json_object_set_new(jt, "thread_id", json_integer((json_int_t)th->thread_id));
        if (th->native_tid > 0) {
            json_object_set_new(jt, "tid", json_integer(th->native_tid));
            json_object_set_new(jt, "main", json_boolean(th->native_tid == pid));
            if (gs_taskstate_read(pid, (pid_t)th->native_tid, &ts) == GS_OK) {
                char st[2] = {ts.state, 0};
                json_object_set_new(jt, "name", json_string(ts.comm));
                json_object_set_new(jt, "state", json_string(st));
                json_object_set_new(jt, "what", json_string(ts.what));
                if (ts.wchan[0])
                    json_object_set_new(jt, "wchan", json_string(ts.wchan));
                if (ts.syscall_nr >= 0)
                    json_object_set_new(jt, "syscall", json_integer(ts.syscall_nr));
            }
        }
        for (unsigned i = 0; i < th->nframes; i++) {
            const struct gs_pyfunc *f = gs_pyread_func(r, th->frames[i].func);
            json_t *jf = json_object();
            json_object_set_new(jf, "function", json_string(f ? f->name : "?"));
            json_object_set_new(jf, "file", json_string(f ? f->file : "?"));
            json_object_set_new(jf, "line", json_integer(th->frames[i].line));
            json_array_append_new(frames, jf);
        }
        json_object_set_new(jt, "frames", frames);
        json_object_set_new(jt, "partial", json_boolean(th->partial));
        json_array_append_new(threads, jt);
    }
    json_object_set_new(root, "threads", threads);
    json_object_set_new(root, "threads_truncated", json_boolean(s->truncated));
    if (json_dumpf(root, out, JSON_INDENT(2)) != 0 || fputc('\n', out) == EOF)
        rc = gs_err_set(err, GS_EIO, "stacks: writing JSON failed");
    json_decref(root);
    return rc;
}
