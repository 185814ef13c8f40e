/*
 * nvidia-smi's other faces: the default table, -L, --version, -q (text and -x XML), dmon, pmon
 * and topo -m, under `gpuscope query` and when the binary runs as `nvidia-smi`.
 *
 * smi.c parses those command lines, opens the sampler, prints nvidia-smi's own error messages
 * and runs the -l/-lms loops; the printers (smi_table.c, smi_q.c, smi_mon.c) only format one
 * snapshot. They read the model (gs_model.h) and nothing else: a value the model lacks is
 * printed as the token nvidia-smi prints for a value it cannot get ("N/A"), never guessed.
 */
#ifndef GS_SMI_H
#define GS_SMI_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#include "gpuscope/gs_model.h"

/* Whether argv (argv[0] the program or subcommand name) asks for one of the modes here rather
 * than a --query-gpu / --query-compute-apps selective query. */
int gs_smi_wants(int argc, char **argv);

/* Runs such a command line; returns the exit status. prog is "nvidia-smi" or "gpuscope query",
 * named in usage hints. */
int gs_smi_main(int argc, char **argv, const char *prog);

/* -q sections (-d): bits of enum gs_smi_section; 0 means every section. */
enum gs_smi_section {
    GS_SMI_D_MEMORY = 1u << 0,
    GS_SMI_D_UTILIZATION = 1u << 1,
    GS_SMI_D_ECC = 1u << 2,
    GS_SMI_D_TEMPERATURE = 1u << 3,
    GS_SMI_D_POWER = 1u << 4,
    GS_SMI_D_CLOCK = 1u << 5,
    GS_SMI_D_COMPUTE = 1u << 6,
    GS_SMI_D_PIDS = 1u << 7,
    GS_SMI_D_PERFORMANCE = 1u << 8,
    GS_SMI_D_SUPPORTED_CLOCKS = 1u << 9,
    GS_SMI_D_PAGE_RETIREMENT = 1u << 10,
    GS_SMI_D_ACCOUNTING = 1u << 11,
    GS_SMI_D_ENCODER_STATS = 1u << 12,
    GS_SMI_D_FBC_STATS = 1u << 13,
    GS_SMI_D_ROW_REMAPPER = 1u << 14,
    GS_SMI_D_VOLTAGE = 1u << 15,
    GS_SMI_D_RESET_STATUS = 1u << 16,
};

/* Parses a -d list ("MEMORY,UTILIZATION", case-insensitive) into *mask; returns 0, or -1 with
 * the offending word in bad[0..n-1]. */
int gs_smi_parse_sections(const char *spec, unsigned *mask, char *bad, size_t n);

/* The default table of the GPUs marked in sel (all when sel is NULL). */
int gs_smi_table(FILE *out, const struct gs_snapshot *s, const unsigned char *sel);
/* -L: one line per GPU and one per MIG device. */
int gs_smi_list(FILE *out, const struct gs_snapshot *s, const unsigned char *sel);
/* -q: the NVSMI LOG text, or with xml the nvsmi_device_v12 XML document. */
int gs_smi_q(FILE *out, const struct gs_snapshot *s, const unsigned char *sel, unsigned sections,
             int xml);
/* `dmon` and `pmon`: argv[0] is the mode's name. */
int gs_smi_dmon(int argc, char **argv, const char *prog);
int gs_smi_pmon(int argc, char **argv, const char *prog);
/* `topo`: argv[0] is "topo"; -m prints gs_smi_topo_matrix from NVML's topology. */
int gs_smi_topo(int argc, char **argv, const char *prog);
/* topo -m's matrix and legend of n GPUs, t[i] the topology of GPU i; underline: the header's
 * SGR 4 as nvidia-smi prints it. */
struct gs_topo;
int gs_smi_topo_matrix(FILE *out, const struct gs_topo *t, unsigned n, int underline);
/* `nvlink`: argv[0] is "nvlink"; -s prints gs_smi_nvlink_status. */
int gs_smi_nvlink(int argc, char **argv, const char *prog);
/* nvlink -c of the GPUs marked in sel (all when sel is NULL), t[i] GPU i's topology answer. */
int gs_smi_nvlink_caps(FILE *out, const struct gs_snapshot *s, const unsigned char *sel,
                       const struct gs_topo *t);
/* nvlink -s of the GPUs marked in sel (all when sel is NULL). */
int gs_smi_nvlink_status(FILE *out, const struct gs_snapshot *s, const unsigned char *sel);

/* Opens NVML as the source (client/source.h: these modes never ask the agent) and takes the
 * first snapshot (gs_source_snapshot), printing nvidia-smi's message for a failure (on stdout,
 * as nvidia-smi does) and returning the exit status; 0 on success. */
struct gs_source;
struct gs_sampler_opts;
int gs_smi_open(struct gs_source **src, unsigned want, const struct gs_sampler_opts *so);
/* Pay for what you ask: each mode opens the sampler with the metrics and texts it prints
 * (gs_sampler_opts.need_metrics/need_texts, GS_M__COUNT and GS_T__COUNT flags, zeroed by the
 * caller), so that NVML is asked for those only. What a GS_WANT_* bit reads (processes, MIG
 * devices, PCIe throughput) comes in full. gs_smi_need_ids adds what -i matches on. */
void gs_smi_need_ids(const char *ids, unsigned char *texts);
void gs_smi_table_need(unsigned char *metrics, unsigned char *texts);
void gs_smi_list_need(unsigned char *metrics, unsigned char *texts);
void gs_smi_nvlink_need(unsigned char *metrics, unsigned char *texts);
/* -q's rows in the -d sections chosen (0: every section); their ECC locations need health
 * read in full (no mask_health with GS_SMI_D_ECC). */
void gs_smi_q_need(unsigned sections, unsigned char *metrics, unsigned char *texts);
/* dmon -s SELECT's columns; the ECC columns (e) need the health reads masked too. */
void gs_smi_dmon_need(const char *select, unsigned char *metrics, unsigned char *texts);
/* The loops' wait (query, -l/-lms, dmon/pmon): sleeps until deadline (CLOCK_MONOTONIC ns) with
 * the signals in stop blocked by the caller and collected with sigtimedwait; 1 when one of them
 * arrived, 0 at the deadline (at once when it has passed). */
int gs_smi_wait_until(const sigset_t *stop, int64_t deadline);
/* The same until the next multiple of period after start, skipping ticks already missed. */
int gs_smi_wait_tick(const sigset_t *stop, int64_t start, int64_t period);
/* The exit status and message for an error code from the sampler. */
int gs_smi_fail(int rc, const char *detail);
/* ctime-like "Tue Jul 14 08:12:38 2026" of t_real in local time. */
void gs_smi_ctime(double t_real, char *buf, size_t n);
/* nvidia-smi's MiB: bytes rounded up. */
unsigned long long gs_smi_mib(uint64_t bytes);

/* What a driver branch changed in nvidia-smi's layouts (smi_fmt.c's table, newest last); rows
 * of -q that a branch adds or renames are conditions in smi_q.c's row table. */
struct gs_smi_layout {
    int from;     /* first driver major of the branch */
    int dtd;      /* -q -x: nvsmi_device_v<dtd>.dtd */
    int kmd;      /* "KMD version" / "CUDA UMD version" replace the driver and CUDA versions */
    int rows_595; /* -q: inactive remapped rows, fabric Partition Assigned */
    int rows_610; /* -q: Inforom Time Data, GPU Ceiling Power Limit / Base Power, renamed rows */
};
/* The installed driver's (the oldest when its version is unknown). */
const struct gs_smi_layout *gs_smi_layout(const struct gs_snapshot *s);
/* The major number of the installed driver, 0 when unknown. */
int gs_smi_driver_major(const struct gs_snapshot *s);

#endif
