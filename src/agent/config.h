/*
 * The agent's configuration: one table of keys (name, type, bounds, default), read from an INI
 * file and from `--key=value` flags, the flags winning. Pure: no sampler, no I/O besides
 * reading the file, so tests/unit/test_agent_config.c drives it directly.
 *
 * File format: `key = value` lines; `#` or `;` starts a comment line; blank lines are
 * skipped; an optional `[agent]` section header. Values may be double-quoted. Every error
 * names where it was found: `FILE:LINE: KEY: why` for the file, `--KEY: why` for a flag.
 */
#ifndef GS_AGENT_CONFIG_H
#define GS_AGENT_CONFIG_H

#include <stdbool.h>
#include <stdio.h>

#include "agent/alerts.h"

struct gs_err;

enum gs_metrics_compat {
    GS_COMPAT_NONE = 0,  /* native gpuscope_* names only */
    GS_COMPAT_DCGM = 1,  /* also dcgm-exporter's DCGM_FI_* names and labels (4.x: hostname) */
    GS_COMPAT_DCGM3 = 2, /* the same with dcgm-exporter 3.x's Hostname label */
};

#define GS_LISTEN_LEN 128
#define GS_DATA_DIR_LEN 1024
#define GS_SOCKET_LEN 108 /* sun_path */

enum gs_history_mode {
    GS_HISTORY_OFF = 0,
    GS_HISTORY_ON = 1,
};

/* The push sinks (src/agent/push.h); an empty URL turns its sink off. Restart to change. */
#define GS_PUSH_STR_LEN 256
enum gs_influx_version { GS_INFLUX_V1 = 0, GS_INFLUX_V2 = 1 };

struct gs_push_config {
    char influx_url[GS_PUSH_STR_LEN];        /* "http://host:8086"; "": off */
    int influx_version;                      /* enum gs_influx_version */
    char influx_db[GS_PUSH_STR_LEN];         /* v1 */
    char influx_org[GS_PUSH_STR_LEN];        /* v2 */
    char influx_bucket[GS_PUSH_STR_LEN];     /* v2 */
    char influx_token_file[GS_PUSH_STR_LEN]; /* v2: the token, read at start */
    int influx_gzip;                         /* 1: Content-Encoding: gzip */
    double interval_s;                       /* one push per sink per interval */
    unsigned buffer_batches;                 /* InfluxDB batches kept while it is down */
    char pushgateway_url[GS_PUSH_STR_LEN];   /* "http://host:9091"; "": off */
    char pushgateway_job[GS_PUSH_STR_LEN];
};

struct gs_agent_config {
    char listen[GS_LISTEN_LEN];     /* "127.0.0.1:9400", "[::1]:9400", "0.0.0.0:9400" */
    double interval_s;              /* sampling period, 0.1..60 */
    int metrics_compat;             /* enum gs_metrics_compat */
    int log_level;                  /* enum gs_log_level */
    char data_dir[GS_DATA_DIR_LEN]; /* history.db lives here; restart to change */
    int history;                    /* enum gs_history_mode; restart to change */
    double flush_interval_s;        /* history flush period, 1..300 */
    double retention_raw_s;         /* raw samples kept this long */
    double retention_rollup_s;      /* per-minute rollups kept this long */
    double retention_runs_s;        /* ended runs and their steps kept this long */
    int process_metrics;            /* 1: per-process series on /metrics */
    unsigned process_metrics_max;   /* at most this many per-process series per scrape */
    double http_rate;               /* requests/s per client IP (token bucket); 0: no limit */
    unsigned http_burst;            /* the bucket's size */
    unsigned http_conn_per_uid;     /* HTTP connections one local uid may hold (reaper.h) */
    unsigned runs_per_uid;          /* live training runs one uid may have (runs.h) */
    unsigned runs_resume_timeout_s; /* an interrupted run waits this long for its sender */
    unsigned steps_conn_per_uid;    /* step-socket connections one uid may hold (runs.h) */
    double steps_rate_per_uid;      /* step-socket records/s per uid (token bucket); 0: none */
    unsigned steps_burst_per_uid;   /* its bucket's size */
    unsigned steps_per_run;         /* step rows kept per run, live ones too; 0: no cap */
    unsigned steps_per_uid;         /* step rows of one uid's live runs together; 0: no cap */
    unsigned ended_rows_per_uid;    /* rows of one uid's ended runs together; 0: no cap */
    unsigned ended_mib_per_uid;     /* MiB of their stored text (reports...); 0: no cap */
    double integrity_check_s;       /* history.db's scheduled quick_check period; 0: never */
    struct gs_push_config push;     /* push sinks; restart to change */
    struct gs_alert_rules alerts;   /* keys alerts, alert_webhook; [alert NAME] sections */
    char socket[GS_SOCKET_LEN];     /* step-record socket (src/agent/runs.h); "off": none */
    /* The visibility policy (src/agent/policy.h, docs/security.md). */
    int process_visibility;          /* enum gs_proc_visibility: all | own | none */
    int gpu_visibility;              /* enum gs_gpu_visibility: all | used */
    char admin_group[64];            /* members see everything; "": root and the agent's user */
    char grafana_url[256];           /* Grafana base URL the dashboard links jobs to; "": none */
    char http_socket[GS_SOCKET_LEN]; /* HTTP on a unix socket for local viewers; "off": none */
    char allowed_hosts[512];         /* more Host names for the TCP door (hosts.h); "*": any */
    /* HTTP viewers' credentials and TLS (src/agent/auth.h, docs/security.md); SIGHUP re-reads. */
    char tokens_file[GS_DATA_DIR_LEN];     /* "sha256:<hex> ROLE [USER]" lines; "": none */
    char web_config_file[GS_DATA_DIR_LEN]; /* exporter-toolkit web.config.file; "": none */
    char tls_cert_file[GS_DATA_DIR_LEN];   /* PEM certificate (chain); "": no TLS */
    char tls_key_file[GS_DATA_DIR_LEN];    /* PEM private key */
    int insecure;                          /* 1: allow a non-loopback listen without TLS+auth */
    char user[64]; /* started as root: become this user after binding (privdrop.h); "": stay */
    char kubernetes_pods_dir[GS_DATA_DIR_LEN]; /* kubelet pod log dirs (k8s.h); "off": none */
    /* GPU usage prices (usage_api.h, docs/usage.md): cost = GPU-hours held x gpu_hour_price +
     * kWh x kwh_price; 0: not priced. */
    double gpu_hour_price;
    double kwh_price;
    char currency[16]; /* "EUR", "USD", ...: shown beside the cost; "": none */
};

/* Fills every key with its default; data_dir's comes from gs_config_default_data_dir with
 * $STATE_DIRECTORY, the effective uid, $XDG_STATE_HOME and $HOME. */
void gs_config_defaults(struct gs_agent_config *c);

/* The same with the euid-dependent defaults (data_dir, socket, http_socket) computed for euid
 * instead of the current one: after dropping root (privdrop.h) a SIGHUP's defaults stay those
 * of the start. */
void gs_config_defaults_for(struct gs_agent_config *c, unsigned euid);

/* Writes the default data directory into out: systemd_state ($STATE_DIRECTORY, set by a unit's
 * StateDirectory=; its first path) when absolute, else /var/lib/gpuscope for root (euid 0),
 * else xdg_state/gpuscope when absolute, else home/.local/state/gpuscope. Inputs are passed
 * in so that tests need no environment; the strings may be NULL or "". */
void gs_config_default_data_dir(char *out, size_t len, const char *systemd_state, unsigned euid,
                                const char *xdg_state, const char *home);

/* Writes the default step-record socket into out: systemd_runtime/steps.sock when
 * systemd_runtime ($RUNTIME_DIRECTORY, from a unit's RuntimeDirectory=; its first path) is
 * absolute, else /run/gpuscope/steps.sock for root (euid 0), else
 * xdg_runtime/gpuscope/steps.sock when xdg_runtime is absolute, else "off". */
void gs_config_default_socket(char *out, size_t len, const char *systemd_runtime, unsigned euid,
                              const char *xdg_runtime);

/* Writes the default HTTP unix socket (local viewers, docs/security.md) into out, as
 * gs_config_default_socket but named agent.sock. */
void gs_config_default_http_socket(char *out, size_t len, const char *systemd_runtime,
                                   unsigned euid, const char *xdg_runtime);

/* Parses a whole text as one finite number (strtod's syntax). GS_EINVAL otherwise. */
int gs_config_parse_number(const char *text, double *v);

/* Parses a duration: a non-negative decimal number with an optional unit suffix s, m, h or d
 * (none: seconds), "24h", "30d", "90", "1.5h". GS_EINVAL for anything else (empty, negative,
 * unknown suffix, trailing text, not finite). */
int gs_config_parse_duration(const char *text, double *seconds);

/* Sets one key from its text. where prefixes the message ("agent.conf:12" or "--interval");
 * errors: GS_EINVAL "WHERE: KEY: why" (unknown key, bad value, out of bounds). */
int gs_config_set(struct gs_agent_config *c, const char *key, const char *value, const char *where,
                  struct gs_err *err);

/* Applies an INI text (name is the file name for messages). Stops at the first error. */
int gs_config_parse_text(struct gs_agent_config *c, const char *name, const char *text,
                         struct gs_err *err);

/* Reads and applies a file: GS_EIO when it cannot be read, else as gs_config_parse_text. */
int gs_config_load_file(struct gs_agent_config *c, const char *path, struct gs_err *err);

/* The command line of `gpuscope agent` (argv[0] is the subcommand name). */
struct gs_agent_args {
    const char *config_path; /* --config FILE, NULL if none */
    int help;
    int check; /* --check-config: validate, print the result, exit */
    /* gs_config_build's defaults are for this euid (gs_config_defaults_for) when pin_euid is
     * set, for the current one otherwise */
    int pin_euid;
    unsigned euid;
};

/* Scans argv for --config/--help/--check-config and validates the rest without applying
 * it; GS_EUSAGE for an unknown flag or a flag missing its value. */
int gs_config_parse_args(struct gs_agent_args *a, int argc, char **argv, struct gs_err *err);

/* Applies the key flags of argv on top of c (call after loading the file). */
int gs_config_apply_args(struct gs_agent_config *c, int argc, char **argv, struct gs_err *err);

/* defaults -> file (if any) -> flags: what the agent does at start and on SIGHUP. */
int gs_config_build(struct gs_agent_config *c, const struct gs_agent_args *a, int argc, char **argv,
                    struct gs_err *err);

/* Writes the key table (flags, bounds, defaults) for --help. */
void gs_config_usage(FILE *out);

/* SIGHUP: for every key the table marks restart-only (what the agent binds or opens at start:
 * listen, data_dir, history, socket, http_socket, user), puts running's value back into the
 * reloaded c, with a warning when c changed it, except for the key named fixed (NULL: none),
 * which the caller set itself (gpuscope demo's data_dir). */
void gs_config_keep_restart_keys(struct gs_agent_config *c, const struct gs_agent_config *running,
                                 const char *fixed);

/* Writes the effective configuration as an INI text. */
void gs_config_write(FILE *out, const struct gs_agent_config *c);

/* Whether list is a valid allowed_hosts value: names, IP addresses and [IPv6] addresses
 * (an optional :port is ignored when matching, hosts.h), or *, separated by commas or blanks.
 * "" is valid (no more names). */
bool gs_config_hosts_valid(const char *list);

/* Splits c->listen into host and port (1..65535). Brackets around an IPv6 host are removed.
 * GS_EINVAL when malformed. */
int gs_config_split_listen(const char *listen, char *host, size_t host_len, unsigned *port);

#endif
