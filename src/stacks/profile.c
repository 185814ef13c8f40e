/*
 * The stack profile (profile.h): interned labels, a prefix tree of stacks, own/total counts,
 * and the collapsed and speedscope writers.
 */
#include "stacks/profile.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "gpuscope/gs_err.h"

#define LHASH (2 * GS_PROF_MAX_FRAMES)

struct gs_stackprof *gs_stackprof_new(void)
{
    struct gs_stackprof *p = calloc(1, sizeof *p);

    if (!p)
        return NULL;
    p->labels = calloc(GS_PROF_MAX_FRAMES, sizeof *p->labels);
    p->lhash = calloc(LHASH, sizeof *p->lhash);
    p->own = calloc(GS_PROF_MAX_FRAMES, sizeof *p->own);
    p->tot = calloc(GS_PROF_MAX_FRAMES, sizeof *p->tot);
    p->seen = calloc(GS_PROF_MAX_FRAMES, sizeof *p->seen);
    p->cap_nodes = 1024;
    p->nodes = calloc(p->cap_nodes, sizeof *p->nodes);
    if (!p->labels || !p->lhash || !p->own || !p->tot || !p->seen || !p->nodes) {
        gs_stackprof_free(p);
        return NULL;
    }
    p->nodes[0] =
        (struct gs_prof_node){GS_PROF_NONE, GS_PROF_NONE, GS_PROF_NONE, GS_PROF_NONE, 0, 0};
    p->nnodes = 1;
    return p;
}

void gs_stackprof_free(struct gs_stackprof *p)
{
    if (!p)
        return;
    if (p->labels)
        for (uint32_t i = 0; i < p->nlabels; i++) {
            free(p->labels[i].name);
            free(p->labels[i].file);
        }
    free(p->labels);
    free(p->lhash);
    free(p->own);
    free(p->tot);
    free(p->seen);
    free(p->nodes);
    free(p);
}

uint32_t gs_stackprof_label(struct gs_stackprof *p, const char *name, const char *file)
{
    uint32_t h = gs_hash_fnv1a_pair(name, file ? file : "");

    if (!file)
        file = "";
    for (uint32_t k = 0; k < LHASH; k++) {
        uint32_t *slot = &p->lhash[(h + k) % LHASH];
        struct gs_prof_label *l;
        if (*slot) {
            l = &p->labels[*slot - 1];
            if (strcmp(l->name, name) == 0 && strcmp(l->file, file) == 0)
                return *slot - 1;
            continue;
        }
        if (p->nlabels >= GS_PROF_MAX_FRAMES)
            return GS_PROF_NONE;
        l = &p->labels[p->nlabels];
        l->name = strdup(name);
        l->file = strdup(file);
        if (!l->name || !l->file) {
            free(l->name);
            free(l->file);
            l->name = l->file = NULL;
            return GS_PROF_NONE;
        }
        *slot = ++p->nlabels;
        return *slot - 1;
    }
    return GS_PROF_NONE;
}

static uint32_t child_of(struct gs_stackprof *p, uint32_t node, uint32_t frame)
{
    uint32_t c;

    for (c = p->nodes[node].child; c != GS_PROF_NONE; c = p->nodes[c].sibling)
        if (p->nodes[c].frame == frame)
            return c;
    if (p->nnodes == p->cap_nodes) {
        uint32_t ncap = p->cap_nodes * 2;
        struct gs_prof_node *nn;
        if (ncap > GS_PROF_MAX_NODES)
            return GS_PROF_NONE;
        nn = realloc(p->nodes, ncap * sizeof *nn);
        if (!nn)
            return GS_PROF_NONE;
        p->nodes = nn;
        p->cap_nodes = ncap;
    }
    c = p->nnodes++;
    p->nodes[c] = (struct gs_prof_node){frame, node, GS_PROF_NONE, p->nodes[node].child, 0, 0};
    p->nodes[node].child = c;
    return c;
}

int gs_stackprof_add(struct gs_stackprof *p, const uint32_t *frames, unsigned n, uint64_t w)
{
    return gs_stackprof_add_leaf(p, frames, n, w, NULL);
}

int gs_stackprof_add_leaf(struct gs_stackprof *p, const uint32_t *frames, unsigned n, uint64_t w,
                          uint32_t *leaf)
{
    uint32_t path[1024];
    uint32_t node = 0;

    if (n > sizeof path / sizeof path[0])
        n = sizeof path / sizeof path[0];
    for (unsigned i = 0; i < n; i++) {
        if (frames[i] >= p->nlabels) {
            p->dropped += w;
            return GS_EINVAL;
        }
        node = child_of(p, node, frames[i]);
        if (node == GS_PROF_NONE) {
            p->dropped += w;
            return GS_ENOMEM;
        }
        path[i] = node;
    }
    p->samples += w;
    p->nodes[0].total += w;
    for (unsigned i = 0; i < n; i++)
        p->nodes[path[i]].total += w;
    p->nodes[n ? path[n - 1] : 0].self += w;
    if (leaf)
        *leaf = n ? path[n - 1] : 0;
    if (++p->stamp == 0) {
        memset(p->seen, 0, GS_PROF_MAX_FRAMES * sizeof *p->seen);
        p->stamp = 1;
    }
    for (unsigned i = 0; i < n; i++)
        if (p->seen[frames[i]] != p->stamp) {
            p->seen[frames[i]] = p->stamp;
            p->tot[frames[i]] += w;
        }
    if (n)
        p->own[frames[n - 1]] += w;
    return GS_OK;
}

/* The order of gs_stackprof_top: by the key (total or own samples), then by the other, then
 * by id; the profile and the key come through qsort_r's context. */
struct top_order {
    const struct gs_stackprof *p;
    int by_total;
};

static int cmp_ids(const void *a, const void *b, void *ctx)
{
    const struct top_order *o = ctx;
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    const uint64_t *key = o->by_total ? o->p->tot : o->p->own;
    const uint64_t *second = o->by_total ? o->p->own : o->p->tot;

    if (key[x] != key[y])
        return key[x] > key[y] ? -1 : 1;
    if (second[x] != second[y])
        return second[x] > second[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

unsigned gs_stackprof_top(const struct gs_stackprof *p, uint32_t *ids, unsigned cap, int by_total)
{
    uint32_t *all;
    unsigned n = 0;

    if (cap == 0)
        return 0;
    all = malloc((p->nlabels ? p->nlabels : 1) * sizeof *all);
    if (!all)
        return 0;
    for (uint32_t i = 0; i < p->nlabels; i++)
        if (p->tot[i])
            all[n++] = i;
    qsort_r(all, n, sizeof *all, cmp_ids, &(struct top_order){p, by_total});
    if (n > cap)
        n = cap;
    memcpy(ids, all, n * sizeof *ids);
    free(all);
    return n;
}

static void put_label(const struct gs_stackprof *p, uint32_t id, FILE *out)
{
    const struct gs_prof_label *l = &p->labels[id];
    /* ';' separates frames and a trailing " N" is the count: keep them out of labels */
    for (const char *s = l->name; *s; s++)
        fputc(*s == ';' ? ':' : *s == '\n' ? ' ' : *s, out);
    if (l->file[0]) {
        fputs(" (", out);
        for (const char *s = l->file; *s; s++)
            fputc(*s == ';' ? ':' : *s == '\n' ? ' ' : *s, out);
        fputc(')', out);
    }
}

/* Calls leaf(ctx, p, node, chain, depth) for each node with samples of its own, depth first;
 * chain[depth - 1] .. chain[0] are the node ids from the outermost frame down to the node (at
 * most 1024 of them). GS_ENOMEM when the walk's stack cannot be allocated. */
typedef void (*leaf_fn)(void *ctx, const struct gs_stackprof *p, const struct gs_prof_node *nd,
                        const uint32_t *chain, uint32_t depth);

static int each_leaf(const struct gs_stackprof *p, leaf_fn leaf, void *ctx)
{
    uint32_t *stack = malloc(p->nnodes * sizeof *stack);
    uint32_t n = 0;

    if (!stack)
        return GS_ENOMEM;
    /* iterative DFS: stack holds node ids */
    if (p->nodes[0].child != GS_PROF_NONE)
        stack[n++] = p->nodes[0].child;
    while (n) {
        uint32_t id = stack[--n];
        const struct gs_prof_node *nd = &p->nodes[id];
        if (nd->sibling != GS_PROF_NONE)
            stack[n++] = nd->sibling;
        if (nd->child != GS_PROF_NONE)
            stack[n++] = nd->child;
        if (nd->self) {
            uint32_t chain[1024], depth = 0;
            for (uint32_t c = id; c != 0 && c != GS_PROF_NONE && depth < 1024;
                 c = p->nodes[c].parent)
                chain[depth++] = c;
            leaf(ctx, p, nd, chain, depth);
        }
    }
    free(stack);
    return GS_OK;
}

static void collapsed_leaf(void *ctx, const struct gs_stackprof *p, const struct gs_prof_node *nd,
                           const uint32_t *chain, uint32_t depth)
{
    FILE *out = ctx;

    for (uint32_t i = depth; i-- > 0;) {
        put_label(p, p->nodes[chain[i]].frame, out);
        if (i)
            fputc(';', out);
    }
    fprintf(out, " %llu\n", (unsigned long long)nd->self);
}

int gs_stackprof_write_collapsed(const struct gs_stackprof *p, FILE *out)
{
    int rc = each_leaf(p, collapsed_leaf, out);

    if (rc != GS_OK)
        return rc;
    return ferror(out) ? GS_EIO : GS_OK;
}

struct speedscope_walk {
    json_t *samples, *weights;
    double interval_s, total;
};

static void speedscope_leaf(void *ctx, const struct gs_stackprof *p, const struct gs_prof_node *nd,
                            const uint32_t *chain, uint32_t depth)
{
    struct speedscope_walk *w = ctx;
    json_t *s = json_array();

    for (uint32_t i = depth; i-- > 0;)
        json_array_append_new(s, json_integer(p->nodes[chain[i]].frame));
    json_array_append_new(w->samples, s);
    json_array_append_new(w->weights, json_real((double)nd->self * w->interval_s));
    w->total += (double)nd->self * w->interval_s;
}

int gs_stackprof_write_speedscope(const struct gs_stackprof *p, const char *name, double interval_s,
                                  FILE *out, struct gs_err *err)
{
    json_t *root = json_object(), *frames = json_array(), *samples = json_array(),
           *weights = json_array(), *prof = json_object(), *profiles = json_array(),
           *shared = json_object();
    struct speedscope_walk w = {0};
    int rc = GS_OK;

    if (!root || !frames || !samples || !weights || !prof || !profiles || !shared) {
        rc = gs_err_set(err, GS_ENOMEM, "stacks: out of memory");
        goto out;
    }
    for (uint32_t i = 0; i < p->nlabels; i++) {
        json_t *f = json_object();
        json_object_set_new(f, "name", json_string(p->labels[i].name));
        if (p->labels[i].file[0])
            json_object_set_new(f, "file", json_string(p->labels[i].file));
        json_array_append_new(frames, f);
    }
    w.samples = samples;
    w.weights = weights;
    w.interval_s = interval_s;
    if (each_leaf(p, speedscope_leaf, &w) != GS_OK) {
        rc = gs_err_set(err, GS_ENOMEM, "stacks: out of memory");
        goto out;
    }
    json_object_set_new(shared, "frames", frames);
    frames = NULL;
    json_object_set_new(prof, "type", json_string("sampled"));
    json_object_set_new(prof, "name", json_string(name));
    json_object_set_new(prof, "unit", json_string("seconds"));
    json_object_set_new(prof, "startValue", json_real(0));
    json_object_set_new(prof, "endValue", json_real(w.total));
    json_object_set_new(prof, "samples", samples);
    json_object_set_new(prof, "weights", weights);
    samples = weights = NULL;
    json_array_append_new(profiles, prof);
    prof = NULL;
    json_object_set_new(root, "$schema",
                        json_string("https://www.speedscope.app/file-format-schema.json"));
    json_object_set_new(root, "shared", shared);
    json_object_set_new(root, "profiles", profiles);
    shared = profiles = NULL;
    json_object_set_new(root, "name", json_string(name));
    json_object_set_new(root, "activeProfileIndex", json_integer(0));
    json_object_set_new(root, "exporter", json_string("gpuscope stacks"));
    if (json_dumpf(root, out, JSON_COMPACT) != 0 || fputc('\n', out) == EOF)
        rc = gs_err_set(err, GS_EIO, "stacks: writing speedscope JSON failed");
out:
    json_decref(root);
    json_decref(frames);
    json_decref(samples);
    json_decref(weights);
    json_decref(prof);
    json_decref(profiles);
    json_decref(shared);
    return rc;
}
