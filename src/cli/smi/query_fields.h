/*
 * The field tables and CSV formatter behind `gpuscope query`: which names nvidia-smi accepts for
 * --query-gpu and --query-compute-apps (canonical names and aliases), the unit each one carries,
 * how a gs_snapshot value turns into the exact cell nvidia-smi prints, and the --help-query-*
 * texts. Option parsing and sampling live in query.c; this module only reads snapshots, so unit
 * tests can feed it hand-built snapshots.
 *
 * Names: gs_qf_ (query field). A selection (struct gs_qf_sel) is the parsed FIELDS argument;
 * it owns a private copy of the names as queried, because nvidia-smi's header repeats the name
 * the user typed (an alias stays an alias).
 */
#ifndef GS_QUERY_FIELDS_H
#define GS_QUERY_FIELDS_H

#include <stddef.h>
#include <stdio.h>

#include "gpuscope/gs_model.h"

struct gs_err;
struct gs_qfield;

/* Which switch a field list belongs to. */
enum gs_qf_list {
    GS_QF_GPU = 0,  /* --query-gpu */
    GS_QF_APPS = 1, /* --query-compute-apps */
};

/* Output flags, from --format=csv[,noheader][,nounits]. */
enum gs_qf_flags {
    GS_QF_NOHEADER = 1u << 0,
    GS_QF_NOUNITS = 1u << 1,
};

/* Cells are joined with this, as nvidia-smi does. */
#define GS_QF_SEP ", "
/* Longest cell we produce (names and paths included); longer text is cut. */
#define GS_QF_CELL_MAX 600

/* The parsed field list of one query. */
struct gs_qf_sel {
    enum gs_qf_list list;
    unsigned n;
    const struct gs_qfield **f; /* n entries, table rows */
    const char **name;          /* n entries, the names as queried (header text) */
    char *buf;                  /* owned copy of the list the names point into */
};

/* Returns the table row for a canonical name or an alias, or NULL. Case-sensitive, as
 * nvidia-smi is (pci.baseClass). */
const struct gs_qfield *gs_qf_find(enum gs_qf_list list, const char *name);

/* Canonical name and unit ("MiB", "%", ... or "" when the field has none) of a row. */
const char *gs_qf_name(const struct gs_qfield *f);
const char *gs_qf_unit(const struct gs_qfield *f);

/* Number of rows (canonical fields) in a table. */
unsigned gs_qf_count(enum gs_qf_list list);

/* Parses a comma-separated field list into *sel (zeroed first). Surrounding blanks of each name
 * are ignored. An unknown or empty name fails with GS_EUSAGE and err->msg holding nvidia-smi's
 * own wording, `Field "NAME" is not a valid field to query.`; GS_ENOMEM otherwise. On failure
 * *sel holds nothing to free (gs_qf_sel_free is still safe). */
int gs_qf_parse(struct gs_qf_sel *sel, enum gs_qf_list list, const char *spec, struct gs_err *err);

/* Frees what gs_qf_parse allocated; safe on a zeroed or already-freed selection. */
void gs_qf_sel_free(struct gs_qf_sel *sel);

/* The GS_WANT_* flags a sampling cycle needs for this selection (never the slow PCIe
 * throughput or GPM ones: no nvidia-smi field reads them). */
unsigned gs_qf_want(const struct gs_qf_sel *sel);

/* Sets metrics[m] (GS_M__COUNT flags) and texts[t] (GS_T__COUNT) for every reading a row of
 * sel prints, and the texts the GPU selection matches on: what the sampler asks the driver
 * for (gs_sampler_opts.need_*). The flags are only set, never cleared. */
void gs_qf_need(const struct gs_qf_sel *sel, unsigned char *metrics, unsigned char *texts);

/* Formats one cell into buf (always NUL-terminated when n > 0) and returns its length.
 * gpu indexes snap->gpus; proc is the process for a --query-compute-apps row (NULL for GPU rows).
 * flags: GS_QF_NOUNITS. */
size_t gs_qf_cell(const struct gs_qfield *f, const struct gs_snapshot *snap, unsigned gpu,
                  const struct gs_proc *proc, unsigned flags, char *buf, size_t n);

/* Writes the header line ("name [unit], ...\n"). The unit stays in the header under nounits. */
int gs_qf_write_header(FILE *out, const struct gs_qf_sel *sel);

/* Writes one CSV row: a GPU (proc NULL) or a compute process running on snap->gpus[gpu]. */
int gs_qf_write_row(FILE *out, const struct gs_qf_sel *sel, const struct gs_snapshot *snap,
                    unsigned gpu, const struct gs_proc *proc, unsigned flags);

/* Whether the nvidia-smi of this driver major (gs_smi_driver_major; 0 unknown: every field)
 * lists the field: the lists differ by branch (590, 595, 610). */
int gs_qf_on_driver(const struct gs_qfield *f, int driver_major);

/* GS_EUSAGE with nvidia-smi's `Field "NAME" is not a valid field to query.` for the first field
 * of sel that the driver's nvidia-smi does not list; GS_OK otherwise. */
int gs_qf_check_driver(const struct gs_qf_sel *sel, int driver_major, struct gs_err *err);

/* Writes the --help-query-gpu or --help-query-compute-apps text of the driver's branch
 * (driver_major 0: every field). */
int gs_qf_write_help(FILE *out, enum gs_qf_list list, int driver_major);

/* nvidia-smi's words for the values of an enum-like reading (enum gs_qf_names). */
enum gs_qf_names {
    GS_QN_ADDRESSING,    /* GS_M_ADDRESSING_MODE: None, HMM, ATS */
    GS_QN_RECOVERY,      /* GS_M_RECOVERY_ACTION: None, Reset, Reboot, Drain P2P, ... */
    GS_QN_VIRT,          /* GS_M_VIRT_MODE: None, Pass-Through, VGPU, Host VGPU, Host VSGA */
    GS_QN_HOST_VGPU,     /* GS_M_HOST_VGPU_MODE: Non SR-IOV, SR-IOV */
    GS_QN_FABRIC_STATE,  /* GS_M_FABRIC_STATE: Not Supported, Not Started, In Progress, ... */
    GS_QN_FABRIC_STATUS, /* GS_M_FABRIC_STATUS: an NVML return code, "Success" for 0 */
    GS_QN_GOM,           /* GS_M_GOM_*: All On, Compute, Low Double Precision */
    GS_QN_FABRIC_HEALTH, /* GS_M_FABRIC_HEALTH_SUMMARY: Healthy, Unhealthy, Limited Capacity */
    GS_QN_FABRIC_BW,     /* GS_M_FABRIC_HEALTH_BW_DEGRADED: Full, Degraded */
    GS_QN_TRUE_FALSE,    /* the other fabric health flags: False, True */
    GS_QN_FABRIC_CONFIG, /* GS_M_FABRIC_HEALTH_CONFIG: None, SysGUID, ... */
    GS_QN__COUNT
};

/* The word for value v of table t, or NULL for a value the table does not know. */
const char *gs_qf_value_name(enum gs_qf_names t, double v);

/* "YYYY/MM/DD HH:MM:SS.mmm" in local time for a unix time in seconds (milliseconds cut, not
 * rounded). Returns the length written into buf. */
size_t gs_qf_timestamp(double t_real, char *buf, size_t n);

#endif
