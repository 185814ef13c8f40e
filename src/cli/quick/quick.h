/*
 * The quick check, `gpuscope` with no subcommand: a gpustat-like coloured view of every GPU
 * and the processes on it, once or in watch mode, or the same snapshot as JSON.
 *
 * The module is four files behind this header: quick_opts.c parses the options (one table)
 * and holds the --id filter; quick_text.c renders a snapshot as text; quick_json.c builds the
 * JSON document; quick.c runs the sampling loop (the only part that touches the sampler and
 * the terminal). Everything but quick.c is pure, so tests/unit/test_quick.c drives it with
 * hand-built snapshots and no NVML.
 */
#ifndef GS_QUICK_H
#define GS_QUICK_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "base/term.h"
#include "gpuscope/gs_model.h"

struct gs_err;

/* Which optional parts the text view shows (-a sets them all). */
enum gs_quick_show {
    GS_QS_CMD = 1u << 0,       /* -c: process name */
    GS_QS_USER = 1u << 1,      /* -u: process owner */
    GS_QS_PID = 1u << 2,       /* -p: process id */
    GS_QS_POWER = 1u << 3,     /* -P: power draw / limit */
    GS_QS_FAN = 1u << 4,       /* -F: fan speed */
    GS_QS_CODEC = 1u << 5,     /* -e: encoder / decoder utilization */
    GS_QS_FULL_CMD = 1u << 6,  /* -f: a line per process with its command line */
    GS_QS_CONTAINER = 1u << 7, /* --show-container: container id, pod, Slurm job */
    GS_QS_CLOCKS = 1u << 8,    /* (-a) pstate, SM and memory clocks, PCIe link */
    GS_QS_ALL = 0x1FFu,
};
/* Process parts used when none of -c, -u, -p is given: name/pid(user mem). */
#define GS_QS_PROC_PARTS (GS_QS_CMD | GS_QS_USER | GS_QS_PID)

#define GS_QUICK_INTERVAL_MIN 0.1
#define GS_QUICK_INTERVAL_MAX 60.0
#define GS_QUICK_IDS_MAX 64
#define GS_QUICK_NAME_MAX 40 /* longer GPU names are cut with an ellipsis */

enum gs_quick_id_kind { GS_QID_INDEX = 1, GS_QID_UUID, GS_QID_BUS };

/* One entry of --id, parsed at option time so a typo is a usage error. */
struct gs_quick_id {
    enum gs_quick_id_kind kind;
    unsigned index;
    char uuid[GS_STR_LEN];
    unsigned domain, bus, device, function;
    const char *text; /* as given, for messages; points into argv */
};

struct gs_quick_opts {
    double interval_s; /* 0: print once; else watch mode, GS_QUICK_INTERVAL_MIN..MAX */
    int json;
    enum gs_color_mode color;
    unsigned show;  /* enum gs_quick_show bits */
    int no_header;  /* --no-header */
    int no_procs;   /* --no-processes */
    int no_agent;   /* --no-agent: NVML directly even when the local agent answers */
    int help;       /* -h: print usage and stop */
    unsigned n_ids; /* --id filter; 0: every GPU */
    struct gs_quick_id ids[GS_QUICK_IDS_MAX];
};

/* quick_opts.c */

/* Parses argv[1..argc) into o (zeroed first). Returns GS_OK, or GS_EUSAGE with a one-line
 * message in err ("gpuscope: --interval: 0.01 is out of range 0.1..60"). */
int gs_quick_parse(struct gs_quick_opts *o, int argc, char **argv, struct gs_err *err);

/* Writes the --help text, generated from the option table. */
void gs_quick_usage(FILE *out);

/* Whether GPU g passes the --id filter (always with no filter). */
int gs_quick_selected(const struct gs_quick_opts *o, const struct gs_gpu *g);

/* GS_OK when every --id entry names a GPU of s, else GS_ENOGPU naming the first that does
 * not. */
int gs_quick_check_ids(const struct gs_quick_opts *o, const struct gs_snapshot *s,
                       struct gs_err *err);

/* quick_text.c */

/* Appends the text view of s to out: a header line (unless --no-header) and one line per
 * selected GPU (plus MIG and full-command lines), each ending in '\n'. cols is the terminal
 * width used to wrap long process lists and clip command lines (0: never wrap); colour comes
 * from out->color. Returns gs_tbuf_status(out). */
int gs_quick_render(struct gs_tbuf *out, const struct gs_snapshot *s, const struct gs_quick_opts *o,
                    unsigned cols);

/* Sets m[metric] / t[text] (GS_M__COUNT / GS_T__COUNT flags) for every GPU reading the text
 * view (gs_quick_render) prints with o's columns (o->show), and the texts --id matches on:
 * what the sampler asks the driver for when the view is text (gs_sampler_opts.need_*). Kept
 * beside what the view reads. */
void gs_quick_text_need(const struct gs_quick_opts *o, unsigned char *m, unsigned char *t);

/* Formats process memory for humans: "512M", "30.1G", "142G" (binary units). */
void gs_quick_fmt_mem(char *buf, size_t n, double bytes);

/* quick_json.c */

/* The snapshot document of s (core/snapjson.h, docs/gpuscope.md JSON SCHEMA) with the GPUs o
 * selects and, unless --no-processes, their processes. On success *out is a new reference the
 * caller json_decref()s. */
int gs_quick_json(json_t **out, const struct gs_snapshot *s, const struct gs_quick_opts *o,
                  struct gs_err *err);

#endif
