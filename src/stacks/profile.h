/*
 * A stack profile: sampled stacks folded into a prefix tree (root first) with a count per
 * node, plus own / total sample counts per frame label. Fed by the stacks command and by
 * gpuscope run; written out as collapsed stacks (flamegraph.pl, speedscope, inferno), as
 * speedscope's JSON, or as an SVG flame graph (flame.h).
 *
 * Frame labels are interned here (name + file), so stacks from several readers (one per rank)
 * share one profile. Capacities are bounded (GS_PROF_MAX_FRAMES labels, GS_PROF_MAX_NODES
 * tree nodes); what does not fit is counted in `dropped`.
 */
#ifndef GS_STACKS_PROFILE_H
#define GS_STACKS_PROFILE_H

#include <stdint.h>
#include <stdio.h>

struct gs_err;

#define GS_PROF_MAX_FRAMES 65536
#define GS_PROF_MAX_NODES (1u << 20)
#define GS_PROF_NONE UINT32_MAX

struct gs_prof_label {
    char *name;
    char *file;
};

struct gs_prof_node {
    uint32_t frame;                  /* label id; GS_PROF_NONE for the root */
    uint32_t parent, child, sibling; /* node ids; GS_PROF_NONE */
    uint64_t self, total;
};

struct gs_stackprof {
    struct gs_prof_label *labels;
    uint32_t nlabels;
    uint32_t *lhash;            /* 2 * GS_PROF_MAX_FRAMES slots, 0 empty else id + 1 */
    struct gs_prof_node *nodes; /* nodes[0] is the root */
    uint32_t nnodes, cap_nodes;
    uint64_t *own, *tot; /* per label */
    uint32_t *seen;      /* per label: the sample stamp that last counted it in tot */
    uint32_t stamp;
    uint64_t samples, dropped;
};

struct gs_stackprof *gs_stackprof_new(void);
void gs_stackprof_free(struct gs_stackprof *p);

/* The id of label (name, file), interned; GS_PROF_NONE when the table is full. */
uint32_t gs_stackprof_label(struct gs_stackprof *p, const char *name, const char *file);

/* Adds one sample of weight w: frames[0] the outermost (root) label, frames[n-1] the
 * innermost. n may be 0 (counted at the root). GS_ENOMEM when the tree cannot grow (counted
 * as dropped, the profile stays consistent). */
int gs_stackprof_add(struct gs_stackprof *p, const uint32_t *frames, unsigned n, uint64_t w);

/* The same, and *leaf (may be NULL) gets the tree node of the stack (0: the root), whose
 * parent chain gives the stack back later. */
int gs_stackprof_add_leaf(struct gs_stackprof *p, const uint32_t *frames, unsigned n, uint64_t w,
                          uint32_t *leaf);

/* Label ids sorted by own count (then total), most first; at most cap; returns how many. */
unsigned gs_stackprof_top(const struct gs_stackprof *p, uint32_t *ids, unsigned cap, int by_total);

/* "a;b;c N" lines, one per distinct stack with own samples. Labels print as
 * "name (file)". */
int gs_stackprof_write_collapsed(const struct gs_stackprof *p, FILE *out);

/* speedscope's file format (https://www.speedscope.app/file-format-schema.json): one sampled
 * profile, weights in seconds (each sample counts interval_s). */
int gs_stackprof_write_speedscope(const struct gs_stackprof *p, const char *name, double interval_s,
                                  FILE *out, struct gs_err *err);

#endif
