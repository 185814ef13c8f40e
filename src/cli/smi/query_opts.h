/*
 * Command line of `gpuscope query`: one option table parsed into struct gs_query_opts, and the
 * -i/--id matcher that picks GPUs of a snapshot by index, UUID or PCI bus id. Both are pure (no
 * sampler, no output), so the unit tests drive them directly; query.c runs what they describe.
 *
 * Options follow nvidia-smi: long options take "--opt=VALUE" or "--opt VALUE", short ones
 * "-o VALUE" (or "-o=VALUE"); -l may omit its value (5 seconds, as nvidia-smi does).
 */
#ifndef GS_QUERY_OPTS_H
#define GS_QUERY_OPTS_H

#include "gpuscope/gs_model.h"

struct gs_err;

#define GS_QUERY_DEFAULT_LOOP_MS 5000
#define GS_QUERY_LOOP_MAX_MS (7L * 24 * 3600 * 1000) /* -l/-lms: a week; more is a typo */

/* What to do, from the command line. Strings point into argv. */
struct gs_query_opts {
    const char *gpu_fields; /* --query-gpu */
    const char *app_fields; /* --query-compute-apps */
    const char *format;     /* --format, NULL when missing */
    unsigned flags;         /* GS_QF_NOHEADER | GS_QF_NOUNITS from --format */
    long loop_ms;           /* 0: once; else the period of -l / -lms */
    const char *ids;        /* -i/--id, NULL: every GPU */
    const char *file;       /* -f/--filename, NULL: stdout */
    int help;               /* -h/--help */
    int help_gpu;           /* --help-query-gpu */
    int help_apps;          /* --help-query-compute-apps */
    int no_agent;           /* --no-agent: NVML even when the local agent answers */
};

/* Parses argv[1..argc-1] (argv[0] is the subcommand name). Bad usage returns GS_EUSAGE with a
 * one-line message in err; help requests succeed with the help flag set and skip the checks
 * that a query needs (a --query-* switch, --format). */
int gs_query_parse(int argc, char **argv, struct gs_query_opts *o, struct gs_err *err);

/* A whole positive decimal number (digits only) no larger than max, or -1 (also for NULL): the
 * numeric option values of query and of nvidia-smi's other modes (smi.c, smi_mon.c). */
long gs_query_positive(const char *s, long max);

/* Marks in sel[0..snap->n_gpus-1] the GPUs that -i names (all of them when ids is NULL). Items
 * are comma separated: a decimal index, a GPU UUID ("GPU-..."), or a PCI bus id in any of
 * NVML's spellings ("00000000:00:09.0", "0000:00:09.0", "00:09.0"), case-insensitive. Returns
 * the number of GPUs selected, or GS_ENOGPU when an item matches none (nvidia-smi's "No devices
 * were found"). */
int gs_query_select(const char *ids, const struct gs_snapshot *snap, unsigned char *sel,
                    struct gs_err *err);

#endif
