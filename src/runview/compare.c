/*
 * compare.c - the comparison document of two or more run reports (compare.h). Changes are
 * against the first run: change = value - first, change_percent = change / |first| * 100
 * (null when either is null or the first is 0), better = whether the change goes the field's
 * good way (null for fields with no good direction, or no change).
 */
#include "runview/compare.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpuscope/gs_run.h"

#define COMPARE_FIELD_(name, dir, always, unit, digits) {name, dir, always},
const struct gs_compare_field gs_compare_fields[] = {GS_COMPARE_FIELDS(COMPARE_FIELD_)};
#undef COMPARE_FIELD_
const size_t gs_compare_n_fields = sizeof gs_compare_fields / sizeof gs_compare_fields[0];

/* The phases a step record may carry (gs_run.h GS_PHASES); page_phase(k) is the k-th in the
 * page's order. */
#define N_PHASES ((size_t)GS_PH_ALL)

static const char *page_phase(size_t k)
{
    return gs_phase_name(gs_phase_page_order((int)k));
}

static double num(const json_t *v)
{
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* {"field", "values": [...], "changes": [{"change", "change_percent", "better"} per run after
 * the first]}; values[i] = vals[i] (NaN = null). */
static json_t *row(const char *field, const double *vals, size_t n, int dir)
{
    json_t *o = json_object(), *v = json_array(), *c = json_array();
    json_object_set_new(o, "field", json_string(field));
    for (size_t i = 0; i < n; i++)
        json_array_append_new(v, isfinite(vals[i]) ? json_real(vals[i]) : json_null());
    for (size_t i = 1; i < n; i++) {
        json_t *ch = json_object();
        double a = vals[0], b = vals[i];
        int known = isfinite(a) && isfinite(b);
        double d = known ? b - a : NAN;
        json_object_set_new(ch, "change", known ? json_real(d) : json_null());
        json_object_set_new(ch, "change_percent",
                            known && a != 0 ? json_real(d / fabs(a) * 100.0) : json_null());
        json_object_set_new(ch, "better",
                            known && dir && d != 0 ? json_boolean((d > 0) == (dir > 0))
                                                   : json_null());
        json_array_append_new(c, ch);
    }
    json_object_set_new(o, "values", v);
    json_object_set_new(o, "changes", c);
    return o;
}

static json_t *fields(const struct gs_rundata *runs, size_t n, double *vals)
{
    json_t *arr = json_array();
    for (size_t f = 0; f < gs_compare_n_fields; f++) {
        int any = 0;
        for (size_t i = 0; i < n; i++) {
            vals[i] = num(json_object_get(runs[i].report, gs_compare_fields[f].name));
            any |= isfinite(vals[i]);
        }
        if (any || gs_compare_fields[f].always)
            json_array_append_new(arr, row(gs_compare_fields[f].name, vals, n,
                                           gs_compare_fields[f].larger_is_better));
    }
    /* the end record's loss, when the runs had one */
    int any = 0;
    for (size_t i = 0; i < n; i++) {
        vals[i] = num(json_object_get(json_object_get(runs[i].report, "run"), "train_loss"));
        any |= isfinite(vals[i]);
    }
    if (any)
        json_array_append_new(arr, row("train_loss", vals, n, -1));
    return arr;
}

static json_t *phases(const struct gs_rundata *runs, size_t n, double *vals)
{
    json_t *arr = json_array();
    for (size_t p = 0; p < N_PHASES; p++) {
        int any = 0;
        json_t *p50 = json_array(), *p95 = json_array();
        for (size_t i = 0; i < n; i++) {
            const json_t *ph =
                json_object_get(json_object_get(runs[i].report, "phases"), page_phase(p));
            vals[i] = num(json_object_get(ph, "mean_ms"));
            any |= isfinite(vals[i]);
            json_array_append(p50, json_object_get(ph, "p50_ms") ? json_object_get(ph, "p50_ms")
                                                                 : json_null());
            json_array_append(p95, json_object_get(ph, "p95_ms") ? json_object_get(ph, "p95_ms")
                                                                 : json_null());
        }
        if (any) {
            char name[64];
            snprintf(name, sizeof name, "%s", page_phase(p));
            json_t *r = row(name, vals, n, -1);
            json_object_set_new(r, "stat", json_string("mean_ms"));
            json_object_set_new(r, "p50_ms", p50);
            json_object_set_new(r, "p95_ms", p95);
            json_array_append_new(arr, r);
        } else {
            json_decref(p50);
            json_decref(p95);
        }
    }
    return arr;
}

/* The command lines (run.command, as `gpuscope run` started them) when they differ: a row
 * "command" after the facts' rows. */
static void command_row(const struct gs_rundata *runs, size_t n, json_t *arr)
{
    json_t *vals = json_array();
    int differ = 0;
    const json_t *first = json_object_get(json_object_get(runs[0].report, "run"), "command");

    for (size_t i = 0; i < n; i++) {
        const json_t *x = json_object_get(json_object_get(runs[i].report, "run"), "command");
        if (!json_is_string(x))
            x = NULL;
        json_array_append_new(vals, x ? json_deep_copy(x) : json_null());
        if (i && !((x == NULL && !json_is_string(first)) ||
                   (x && json_is_string(first) && json_equal(x, first))))
            differ = 1;
    }
    if (differ) {
        json_t *o = json_object();
        json_object_set_new(o, "key", json_string("command"));
        json_object_set_new(o, "values", vals);
        json_array_append_new(arr, o);
    } else {
        json_decref(vals);
    }
}

/* The facts whose values differ between the runs (absent counts as a value: null), then the
 * command lines when they differ. */
static json_t *facts(const struct gs_rundata *runs, size_t n)
{
    json_t *keys = json_object(), *arr = json_array();
    const char *k;
    json_t *v;
    size_t order = 0;
    for (size_t i = 0; i < n; i++)
        json_object_foreach(json_object_get(runs[i].report, "facts"), k,
                            v) if (!json_object_get(keys, k))
            json_object_set_new(keys, k, json_integer((json_int_t)order++));
    /* jansson keeps insertion order (2.8+): iterate in first-seen order */
    json_object_foreach(keys, k, v)
    {
        json_t *vals = json_array();
        int differ = 0;
        const json_t *first = json_object_get(json_object_get(runs[0].report, "facts"), k);
        for (size_t i = 0; i < n; i++) {
            const json_t *x = json_object_get(json_object_get(runs[i].report, "facts"), k);
            json_array_append_new(vals, x ? json_deep_copy(x) : json_null());
            if (i && !((x == NULL && first == NULL) || (x && first && json_equal(x, first))))
                differ = 1;
        }
        if (differ) {
            json_t *o = json_object();
            json_object_set_new(o, "key", json_string(k));
            json_object_set_new(o, "values", vals);
            json_array_append_new(arr, o);
        } else {
            json_decref(vals);
        }
    }
    json_decref(keys);
    command_row(runs, n, arr);
    return arr;
}

static const json_t *finding(const json_t *report, const char *id)
{
    size_t i;
    const json_t *f;
    json_array_foreach(json_object_get(report, "findings"), i, f)
    {
        const char *x = json_string_value(json_object_get(f, "id"));
        if (x && strcmp(x, id) == 0)
            return f;
    }
    return NULL;
}

/* Every finding id of any run: which runs have it, its severity in each, and against the first
 * run "appeared" (not in the first, in the last), "went away" (in the first, not in the
 * last), "in every run", or "in some runs". */
static json_t *findings(const struct gs_rundata *runs, size_t n)
{
    json_t *seen = json_object(), *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        size_t j;
        const json_t *f;
        json_array_foreach(json_object_get(runs[i].report, "findings"), j, f)
        {
            const char *id = json_string_value(json_object_get(f, "id"));
            if (!id || json_object_get(seen, id))
                continue;
            json_object_set_new(seen, id, json_true());
            json_t *o = json_object(), *in = json_array(), *sev = json_array();
            int first = 0, last = 0;
            size_t count = 0;
            const char *title = NULL;
            for (size_t r = 0; r < n; r++) {
                const json_t *g = finding(runs[r].report, id);
                json_array_append_new(sev, g && json_object_get(g, "severity")
                                               ? json_deep_copy(json_object_get(g, "severity"))
                                               : json_null());
                if (!g)
                    continue;
                json_array_append_new(in, json_integer((json_int_t)r));
                count++;
                first |= r == 0;
                last |= r == n - 1;
                title = json_string_value(json_object_get(g, "title"));
            }
            const char *change = count == n       ? "in every run"
                                 : first && !last ? "went away"
                                 : !first && last ? "appeared"
                                                  : "in some runs";
            json_object_set_new(o, "id", json_string(id));
            json_object_set_new(o, "change", json_string(change));
            json_object_set_new(o, "in", in);
            json_object_set_new(o, "severity", sev);
            json_object_set_new(o, "title", title ? json_string(title) : json_null());
            json_array_append_new(arr, o);
        }
    }
    json_decref(seen);
    return arr;
}

json_t *gs_compare_doc(const struct gs_rundata *runs, size_t n)
{
    json_t *doc = json_object(), *rs = json_array();
    double *vals = calloc(n ? n : 1, sizeof *vals);
    if (!doc || !rs || !vals) {
        json_decref(doc);
        json_decref(rs);
        free(vals);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *run = json_object_get(runs[i].report, "run");
        json_t *o = json_object();
        json_object_set_new(o, "label", json_string(runs[i].label ? runs[i].label : "?"));
        json_object_set_new(o, "origin", json_string(runs[i].origin ? runs[i].origin : "?"));
        json_object_set_new(o, "name",
                            json_deep_copy(json_object_get(run, "name")
                                               ? json_object_get(run, "name")
                                               : json_null()));
        json_object_set_new(o, "source",
                            json_deep_copy(json_object_get(run, "source")
                                               ? json_object_get(run, "source")
                                               : json_null()));
        json_object_set_new(o, "start_time",
                            json_deep_copy(json_object_get(run, "start_time")
                                               ? json_object_get(run, "start_time")
                                               : json_null()));
        json_array_append_new(rs, o);
    }
    json_object_set_new(doc, "runs", rs);
    json_object_set_new(doc, "fields", fields(runs, n, vals));
    json_object_set_new(doc, "phases", phases(runs, n, vals));
    json_object_set_new(doc, "facts", facts(runs, n));
    json_object_set_new(doc, "findings", findings(runs, n));
    free(vals);
    return doc;
}
