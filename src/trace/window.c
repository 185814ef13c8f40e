/*
 * window.c - `gpuscope run --profile STEPS`: the window spec, and at the end the traces
 * the package wrote (python/gpuscope/_profile.py, DIR/profile/rank<R>-step<S>.json) analysed
 * by src/trace into the report's "profile" section (docs/trace.md, docs/report.md).
 */
#include "trace/window.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/trace.h"

#define PROFILE_MAX_FILES 4096

static int parse_long(const char *s, long *out, const char **end)
{
    char *e;
    long v = strtol(s, &e, 10);

    if (e == s || v < 0 || v > 1000000000L)
        return -1;
    *out = v;
    *end = e;
    return 0;
}

int gs_trace_window_check(const char *spec)
{
    long a, b;
    const char *p;

    if (strncmp(spec, "every:", 6) == 0) {
        if (parse_long(spec + 6, &a, &p) != 0 || *p != ':' || parse_long(p + 1, &b, &p) != 0 || *p)
            return -1;
        return a >= 2 && b >= 1 && b < a ? 0 : -1;
    }
    if (parse_long(spec, &a, &p) != 0 || *p != ':' || parse_long(p + 1, &b, &p) != 0 || *p)
        return -1;
    return a >= 1 && b > a && b >= 3 ? 0 : -1;
}

/* The S of "rank<R>-step<S>.json[.gz]"; -1 when the name is not one. */
static long window_of(const char *name)
{
    const char *s = strstr(name, "-step");
    size_t n = strlen(name);

    if (strncmp(name, "rank", 4) != 0 || !s ||
        !((n > 5 && strcmp(name + n - 5, ".json") == 0) ||
          (n > 8 && strcmp(name + n - 8, ".json.gz") == 0)))
        return -1;
    return strtol(s + 5, NULL, 10);
}

json_t *gs_trace_window_analyze(const char *run_dir, const char *spec, FILE *msg)
{
    char dir[4096];
    DIR *d;
    struct dirent *e;
    long last = -1;
    size_t windows = 0, n = 0;
    struct gs_trace_job *job = gs_trace_job_new(NULL);
    json_t *files = json_array(), *doc = NULL, *out;

    snprintf(dir, sizeof dir, "%s/profile", run_dir);
    d = opendir(dir);
    if (d) {
        long seen[64];
        size_t nseen = 0;

        while ((e = readdir(d)) != NULL) {
            long w = window_of(e->d_name);
            size_t i;

            if (w < 0)
                continue;
            for (i = 0; i < nseen && seen[i] != w; i++)
                ;
            if (i == nseen && nseen < 64)
                seen[nseen++] = w;
            if (w > last)
                last = w;
        }
        windows = nseen;
        rewinddir(d);
        /* the last window: every rank's trace of it */
        while (last >= 0 && (e = readdir(d)) != NULL && n < PROFILE_MAX_FILES) {
            char path[4096 + 256];
            struct gs_err err = {0};
            struct gs_trace *t = NULL;

            if (window_of(e->d_name) != last)
                continue;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            if (gs_trace_load(path, &t, &err) != GS_OK) {
                fprintf(msg, "gpuscope run: profile: %s\n", err.msg);
                continue;
            }
            if (job && gs_trace_job_add(job, t) == GS_OK) {
                json_array_append_new(files, json_string(path));
                n++;
            }
            gs_trace_free(t); /* one rank's records in memory at a time */
        }
        closedir(d);
    }
    if (n)
        doc = gs_trace_job_done(job);
    gs_trace_job_free(job);
    if (!spec && !windows) { /* no --profile and nobody asked: no section */
        json_decref(files);
        json_decref(doc);
        return NULL;
    }
    out = json_pack("{s:s, s:s, s:I, s:o}", "steps", spec ? spec : "on request", "dir", dir,
                    "windows", (json_int_t)windows, "files", files ? files : json_array());
    if (!out) {
        json_decref(doc);
        return NULL;
    }
    if (last >= 0)
        json_object_set_new(out, "window_first_step", json_integer(last));
    if (doc) {
        json_object_update(out, doc);
        json_decref(doc);
    } else {
        json_object_set_new(out, "note",
                            json_string(windows ? "no readable trace in the last window"
                                                : "no trace written: the run ended before the "
                                                  "window, or the package could not profile"));
    }
    return out;
}
