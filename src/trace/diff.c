/*
 * diff.c - two sets of traces compared (diff.h): each side analysed (analyze.c) and its
 * kernels totalled by name, then the figures put side by side as change rows.
 */
#include "trace/diff.h"

#include <stdlib.h>
#include <string.h>

/* Job sums of one side: temporal figures added over ranks, kernel types. */
static json_t *side_summary(const json_t *doc)
{
    static const char *keys[] = {"idle_us", "compute_us", "non_compute_us", "kernel_span_us"};
    json_t *tmp = json_object(), *files = json_array(), *r;
    size_t i;

    for (size_t k = 0; k < 4; k++)
        json_object_set_new(tmp, keys[k], json_integer(0));
    json_array_foreach(json_object_get(doc, "ranks"), i, r)
    {
        const json_t *t = json_object_get(r, "temporal");

        json_array_append(files, json_object_get(r, "file"));
        for (size_t k = 0; k < 4 && t; k++)
            json_object_set_new(tmp, keys[k],
                                json_integer(json_integer_value(json_object_get(tmp, keys[k])) +
                                             json_integer_value(json_object_get(t, keys[k]))));
    }
    return json_pack("{s:o, s:o, s:O}", "files", files, "temporal", tmp, "kernel_types",
                     json_object_get(json_object_get(doc, "job"), "kernel_types"));
}

static json_t *delta_row(const char *label, long long a, long long b)
{
    return json_pack("{s:s, s:I, s:I, s:I, s:o}", "what", label, "a_us", (json_int_t)a, "b_us",
                     (json_int_t)b, "delta_us", (json_int_t)(b - a), "delta_pct",
                     a ? json_real(100.0 * (double)(b - a) / (double)a) : json_null());
}

/* Total kernel time of one type (durations added, overlaps counted in each kernel). */
static long long type_sum(const json_t *totals, const char *type)
{
    const char *name;
    json_t *v;
    long long sum = 0;

    json_object_foreach((json_t *)totals, name,
                        v) if (strcmp(json_string_value(json_object_get(v, "type")), type) == 0)
        sum += json_integer_value(json_object_get(v, "sum_us"));
    (void)name;
    return sum;
}

static int cmp_absdelta(const void *x, const void *y)
{
    const json_t *a = *(json_t *const *)x, *b = *(json_t *const *)y;
    long long da = json_integer_value(json_object_get(a, "delta_us"));
    long long db = json_integer_value(json_object_get(b, "delta_us"));

    da = da < 0 ? -da : da;
    db = db < 0 ? -db : db;
    return da < db ? 1 : da > db ? -1 : 0;
}

/* The kernels of A and B as change rows (vanished from A, appeared in B, or changed), the top
 * ones by |delta_us| when they can be sorted. */
static json_t *kernel_rows(const json_t *ka, const json_t *kb, int top)
{
    json_t *kernels = json_array(), *v, **sorted;
    const char *name;
    size_t n, i;

    json_object_foreach((json_t *)ka, name, v)
    {
        json_t *w = json_object_get(kb, name);
        long long a = json_integer_value(json_object_get(v, "sum_us"));
        long long b = w ? json_integer_value(json_object_get(w, "sum_us")) : 0;
        json_t *row = delta_row(name, a, b);

        json_object_set(row, "type", json_object_get(v, "type"));
        json_object_set_new(row, "a_count",
                            json_integer(json_integer_value(json_object_get(v, "count"))));
        json_object_set_new(row, "b_count",
                            json_integer(w ? json_integer_value(json_object_get(w, "count")) : 0));
        json_object_set_new(row, "status", json_string(w ? "changed" : "vanished"));
        json_array_append_new(kernels, row);
    }
    json_object_foreach((json_t *)kb, name, v)
    {
        json_t *row;

        if (json_object_get(ka, name))
            continue;
        row = delta_row(name, 0, json_integer_value(json_object_get(v, "sum_us")));
        json_object_set(row, "type", json_object_get(v, "type"));
        json_object_set_new(row, "a_count", json_integer(0));
        json_object_set_new(row, "b_count",
                            json_integer(json_integer_value(json_object_get(v, "count"))));
        json_object_set_new(row, "status", json_string("appeared"));
        json_array_append_new(kernels, row);
    }
    n = json_array_size(kernels);
    sorted = malloc((n + 1) * sizeof *sorted);
    if (sorted) {
        json_t *keep = json_array();

        for (i = 0; i < n; i++)
            sorted[i] = json_array_get(kernels, i);
        qsort(sorted, n, sizeof *sorted, cmp_absdelta);
        for (i = 0; i < n && (int)i < top; i++)
            json_array_append(keep, sorted[i]);
        free(sorted);
        json_decref(kernels);
        kernels = keep;
    }
    return kernels;
}

/* The comparison of the two sides' documents (da, db) and kernel totals (ka, kb). */
static json_t *diff_docs(const json_t *da, const json_t *db, const json_t *ka, const json_t *kb,
                         int top)
{
    static const char *types[] = {"COMPUTATION", "COMMUNICATION", "MEMORY"};
    static const char *tkeys[][2] = {{"idle", "idle_us"},
                                     {"compute", "compute_us"},
                                     {"non-compute", "non_compute_us"},
                                     {"kernel span", "kernel_span_us"}};
    json_t *out = json_object();
    json_t *sa, *sb, *trows, *krows;

    if (!out)
        return NULL;
    sa = side_summary(da);
    sb = side_summary(db);
    trows = json_array();
    krows = json_array();
    for (size_t k = 0; k < 4; k++)
        json_array_append_new(
            trows,
            delta_row(
                tkeys[k][0],
                json_integer_value(json_object_get(json_object_get(sa, "temporal"), tkeys[k][1])),
                json_integer_value(json_object_get(json_object_get(sb, "temporal"), tkeys[k][1]))));
    for (size_t k = 0; k < 3; k++)
        json_array_append_new(krows,
                              delta_row(types[k], type_sum(ka, types[k]), type_sum(kb, types[k])));
    json_object_set_new(out, "a", sa);
    json_object_set_new(out, "b", sb);
    json_object_set_new(out, "temporal", trows);
    json_object_set_new(out, "kernel_types", krows);
    json_object_set_new(out, "kernels", kernel_rows(ka, kb, top));
    json_object_set_new(out, "kernels_compared",
                        json_integer((json_int_t)(json_object_size(ka) + json_object_size(kb))));
    return out;
}

json_t *gs_trace_diff(struct gs_trace *const *a, size_t na, struct gs_trace *const *b, size_t nb,
                      int top)
{
    json_t *da = gs_trace_analyze(a, na, NULL);
    json_t *db = gs_trace_analyze(b, nb, NULL);
    json_t *ka = gs_trace_kernel_totals(a, na, NULL);
    json_t *kb = gs_trace_kernel_totals(b, nb, NULL);
    json_t *out = da && db && ka && kb ? diff_docs(da, db, ka, kb, top) : NULL;

    json_decref(da);
    json_decref(db);
    json_decref(ka);
    json_decref(kb);
    return out;
}
