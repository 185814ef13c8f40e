/*
 * The agent's configuration (config.h): one key table, an INI reader and the flag reader, so a
 * key added to the table is at once a file key, a flag, a line of --help and of the
 * effective-configuration dump.
 */
#include "agent/config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pwd.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/log.h"
#include "base/parse.h"
#include "gpuscope/gs_err.h"
#include "run/hang.h"

enum key_type {
    KEY_DOUBLE,
    KEY_ENUM,
    KEY_LISTEN,
    KEY_LOGLEVEL,
    KEY_DURATION,
    KEY_PATH,
    KEY_UINT,
    KEY_STR,
    KEY_HOSTS,
    KEY_USER
};

struct key {
    const char *name;
    enum key_type type;
    size_t off;
    double min, max;            /* KEY_DOUBLE, KEY_DURATION (seconds) */
    const char *const *choices; /* KEY_ENUM: index = stored value */
    const char *def; /* the default, as text: parsed like any other value; NULL: computed */
    const char *help;
    int restart; /* RESTART: what it binds or opens at start stays until a restart (SIGHUP
                  * warns and keeps the running value; --help says "restart to change") */
};

#define RESTART 1

static const char *const compat_names[] = {"none", "dcgm", "dcgm3", NULL};
static const char *const history_names[] = {"off", "on", NULL};
static const char *const influx_version_names[] = {"1", "2", NULL};
static const char *const procvis_names[] = {"all", "own", "none", NULL}; /* policy.h */
static const char *const gpuvis_names[] = {"all", "used", NULL};

#define DAY_S 86400.0

static const struct key keys[] = {
    {"listen", KEY_LISTEN, offsetof(struct gs_agent_config, listen), 0, 0, NULL, "127.0.0.1:9400",
     "HOST:PORT of the HTTP server ([V6]:PORT for IPv6)", RESTART},
    {"interval", KEY_DOUBLE, offsetof(struct gs_agent_config, interval_s), 0.1, 60, NULL, "1",
     "sampling period in seconds", 0},
    {"metrics_compat", KEY_ENUM, offsetof(struct gs_agent_config, metrics_compat), 0, 0,
     compat_names, "none",
     "none | dcgm | dcgm3: also emit dcgm-exporter names on /metrics (dcgm: 4.x labels, "
     "hostname; dcgm3: 3.x's Hostname)",
     0},
    {"log_level", KEY_LOGLEVEL, offsetof(struct gs_agent_config, log_level), 0, 0, NULL, "info",
     "error | warn | info | debug", 0},
    {"data_dir", KEY_PATH, offsetof(struct gs_agent_config, data_dir), 0, 0, NULL, NULL,
     "directory of history.db, made 0750 if missing", RESTART},
    {"history", KEY_ENUM, offsetof(struct gs_agent_config, history), 0, 0, history_names, "on",
     "on | off: keep a history in DATA_DIR/history.db", RESTART},
    {"flush_interval", KEY_DOUBLE, offsetof(struct gs_agent_config, flush_interval_s), 1, 300, NULL,
     "5", "seconds between history writes", 0},
    {"retention_raw", KEY_DURATION, offsetof(struct gs_agent_config, retention_raw_s), 60,
     3650 * DAY_S, NULL, "24h", "how long raw samples are kept (s, m, h, d suffixes)", 0},
    {"retention_rollup", KEY_DURATION, offsetof(struct gs_agent_config, retention_rollup_s), 60,
     3650 * DAY_S, NULL, "30d", "how long per-minute rollups are kept (s, m, h, d suffixes)", 0},
    {"retention_runs", KEY_DURATION, offsetof(struct gs_agent_config, retention_runs_s), 60,
     3650 * DAY_S, NULL, "30d",
     "how long ended training runs and their steps are kept (s, m, h, d suffixes)", 0},
    {"integrity_check_interval", KEY_DURATION, offsetof(struct gs_agent_config, integrity_check_s),
     0, 3650 * DAY_S, NULL, "6h",
     "how often history.db is checked for damage (SQLite quick_check; 0: never; s, m, h, d "
     "suffixes)",
     0},
    {"process_metrics", KEY_ENUM, offsetof(struct gs_agent_config, process_metrics), 0, 0,
     history_names, "off", "on | off: per-process series on /metrics (docs/metrics.md)", 0},
    {"process_metrics_max", KEY_UINT, offsetof(struct gs_agent_config, process_metrics_max), 1,
     100000, NULL, "256", "cap on per-process series per scrape; the rest are counted", 0},
    {"http_rate", KEY_DOUBLE, offsetof(struct gs_agent_config, http_rate), 0, 100000, NULL, "50",
     "HTTP requests/s allowed per client IP (429 beyond); 0: no limit", 0},
    {"http_burst", KEY_UINT, offsetof(struct gs_agent_config, http_burst), 1, 1000000, NULL, "100",
     "HTTP requests a client IP may send at once before http_rate applies", 0},
    {"runs_per_uid", KEY_UINT, offsetof(struct gs_agent_config, runs_per_uid), 1, 64, NULL, "16",
     "training runs one uid other than root may have going on at once (of 64); restart to "
     "change",
     0},
    {"runs_resume_timeout", KEY_UINT, offsetof(struct gs_agent_config, runs_resume_timeout_s), 0,
     86400, NULL, "300",
     "seconds a run whose sender went away (or that an agent restart left) stays interrupted, "
     "waiting for its sender to resume it, before it is ended; 0: ended at once",
     RESTART},
    {"http_conn_per_uid", KEY_UINT, offsetof(struct gs_agent_config, http_conn_per_uid), 1, 65536,
     NULL, "32", "HTTP connections one local uid (unix socket or loopback TCP) may hold at once",
     0},
    {"steps_conn_per_uid", KEY_UINT, offsetof(struct gs_agent_config, steps_conn_per_uid), 1, 256,
     NULL, "32", "step-socket connections one uid other than root may hold at once (of 256)",
     RESTART},
    {"steps_rate_per_uid", KEY_DOUBLE, offsetof(struct gs_agent_config, steps_rate_per_uid), 0, 1e7,
     NULL, "10000",
     "step-socket records/s one uid other than root may send (token bucket; more are "
     "dropped, counted); 0: no limit",
     RESTART},
    {"steps_burst_per_uid", KEY_UINT, offsetof(struct gs_agent_config, steps_burst_per_uid), 1,
     10000000, NULL, "20000",
     "step-socket records one uid may send at once before steps_rate_per_uid applies", RESTART},
    {"steps_per_run", KEY_UINT, offsetof(struct gs_agent_config, steps_per_run), 0, 4000000000.0,
     NULL, "500000",
     "step records kept in the history per run, also of a run that never ends (the lowest "
     "step numbers pruned first); 0: no cap",
     0},
    {"steps_per_uid", KEY_UINT, offsetof(struct gs_agent_config, steps_per_uid), 0, 4000000000.0,
     NULL, "2000000",
     "step records one uid's live runs keep in the history together (its biggest run pruned "
     "first); 0: no cap",
     0},
    {"ended_rows_per_uid", KEY_UINT, offsetof(struct gs_agent_config, ended_rows_per_uid), 0,
     4000000000.0, NULL, "1000000",
     "rows (runs, steps, logged values) one uid's ended runs keep in the history together (its "
     "oldest ended runs pruned first); 0: no cap",
     0},
    {"ended_mib_per_uid", KEY_UINT, offsetof(struct gs_agent_config, ended_mib_per_uid), 0, 1000000,
     NULL, "64",
     "MiB of stored text (reports, tags, names, commands) one uid's ended runs keep together "
     "(its oldest ended runs pruned first); 0: no cap",
     0},
    {"gpu_hour_price", KEY_DOUBLE, offsetof(struct gs_agent_config, gpu_hour_price), 0, 1e9, NULL,
     "0", "price of one GPU-hour held, for the cost column of gpuscope usage; 0: no cost", 0},
    {"kwh_price", KEY_DOUBLE, offsetof(struct gs_agent_config, kwh_price), 0, 1e9, NULL, "0",
     "price of one kWh of GPU energy, added to the cost of gpuscope usage; 0: none", 0},
    {"currency", KEY_STR, offsetof(struct gs_agent_config, currency), 0,
     sizeof(((struct gs_agent_config *)0)->currency), NULL, "",
     "currency of gpu_hour_price and kwh_price (EUR, USD, ...), shown beside the cost", 0},
    {"influx_url", KEY_STR, offsetof(struct gs_agent_config, push.influx_url), 0,
     sizeof(((struct gs_agent_config *)0)->push.influx_url), NULL, "",
     "InfluxDB base URL (http://HOST:8086); empty: no InfluxDB push", 0},
    {"influx_version", KEY_ENUM, offsetof(struct gs_agent_config, push.influx_version), 0, 0,
     influx_version_names, "1", "1 | 2: /write?db= or /api/v2/write with a token", 0},
    {"influx_db", KEY_STR, offsetof(struct gs_agent_config, push.influx_db), 0,
     sizeof(((struct gs_agent_config *)0)->push.influx_db), NULL, "", "InfluxDB 1.x database", 0},
    {"influx_org", KEY_STR, offsetof(struct gs_agent_config, push.influx_org), 0,
     sizeof(((struct gs_agent_config *)0)->push.influx_org), NULL, "", "InfluxDB 2.x organisation",
     0},
    {"influx_bucket", KEY_STR, offsetof(struct gs_agent_config, push.influx_bucket), 0,
     sizeof(((struct gs_agent_config *)0)->push.influx_bucket), NULL, "", "InfluxDB 2.x bucket", 0},
    {"influx_token_file", KEY_STR, offsetof(struct gs_agent_config, push.influx_token_file), 0,
     sizeof(((struct gs_agent_config *)0)->push.influx_token_file), NULL, "",
     "file holding the InfluxDB 2.x token (never put the token on the command line)", 0},
    {"influx_gzip", KEY_ENUM, offsetof(struct gs_agent_config, push.influx_gzip), 0, 0,
     history_names, "off", "on | off: gzip the InfluxDB body", 0},
    {"push_interval", KEY_DOUBLE, offsetof(struct gs_agent_config, push.interval_s), 1, 3600, NULL,
     "10", "seconds between pushes (InfluxDB batch, Pushgateway)", 0},
    {"push_buffer", KEY_UINT, offsetof(struct gs_agent_config, push.buffer_batches), 1, 4096, NULL,
     "64", "InfluxDB batches kept while the target is down; the oldest dropped first", 0},
    {"pushgateway_url", KEY_STR, offsetof(struct gs_agent_config, push.pushgateway_url), 0,
     sizeof(((struct gs_agent_config *)0)->push.pushgateway_url), NULL, "",
     "Prometheus Pushgateway base URL (http://HOST:9091); empty: off", 0},
    {"pushgateway_job", KEY_STR, offsetof(struct gs_agent_config, push.pushgateway_job), 0,
     sizeof(((struct gs_agent_config *)0)->push.pushgateway_job), NULL, "gpuscope",
     "Pushgateway grouping key job (instance is the host name)", 0},
    {"alerts", KEY_ENUM, offsetof(struct gs_agent_config, alerts.enabled), 0, 0, history_names,
     "on", "on | off: evaluate the alert rules ([alert NAME] sections, docs/agent.md)", 0},
    {"alert_webhook", KEY_STR, offsetof(struct gs_agent_config, alerts.webhook), 0,
     sizeof(((struct gs_agent_config *)0)->alerts.webhook), NULL, "",
     "URL that receives Alertmanager-style JSON on each firing/resolved alert; empty: none", 0},
    {"grafana_url", KEY_STR, offsetof(struct gs_agent_config, grafana_url), 0,
     sizeof(((struct gs_agent_config *)0)->grafana_url), NULL, "",
     "Grafana base URL (https://grafana.example:3000): the dashboard links a run's job to "
     "deploy/grafana/training-job.json there; empty: no link",
     RESTART},
    /* the hang rule of src/run/hang.h, with gpuscope run's defaults (--hang-after, --hang-min) */
    {"training_hang_after", KEY_DOUBLE, offsetof(struct gs_agent_config, alerts.hang_after), 1,
     1000, NULL, GS_HANG_STR(GS_HANG_FACTOR),
     "training_hang alert: a rank sent no step for this many times its p95 step time ...", 0},
    {"training_hang_min", KEY_DURATION, offsetof(struct gs_agent_config, alerts.hang_min_s), 1,
     DAY_S, NULL, GS_HANG_STR(GS_HANG_MIN_S) "s",
     "... and for at least this long (s, m, h suffixes)", 0},
    {"socket", KEY_STR, offsetof(struct gs_agent_config, socket), 0,
     sizeof(((struct gs_agent_config *)0)->socket), NULL, NULL,
     "step-record socket for training runs (docs/agent.md), absolute path or off; default "
     "$GPUSCOPE_AGENT_SOCKET, $RUNTIME_DIRECTORY/steps.sock, /run/gpuscope/steps.sock (root), "
     "$XDG_RUNTIME_DIR/gpuscope/steps.sock",
     RESTART},
    {"process_visibility", KEY_ENUM, offsetof(struct gs_agent_config, process_visibility), 0, 0,
     procvis_names, "own",
     "all | own | none: what non-admin viewers see of other users' processes (docs/security.md)",
     0},
    {"gpu_visibility", KEY_ENUM, offsetof(struct gs_agent_config, gpu_visibility), 0, 0,
     gpuvis_names, "all", "all | used: used shows a non-admin viewer only the GPUs it uses", 0},
    {"admin_group", KEY_STR, offsetof(struct gs_agent_config, admin_group), 0,
     sizeof(((struct gs_agent_config *)0)->admin_group), NULL, "",
     "group whose members see everything, like root; empty: root and the agent's user only", 0},
    {"http_socket", KEY_STR, offsetof(struct gs_agent_config, http_socket), 0,
     sizeof(((struct gs_agent_config *)0)->http_socket), NULL, NULL,
     "HTTP unix socket for local viewers (mode 0666), absolute path or off; default "
     "$RUNTIME_DIRECTORY/agent.sock, /run/gpuscope/agent.sock (root), "
     "$XDG_RUNTIME_DIR/gpuscope/agent.sock",
     RESTART},
    {"allowed_hosts", KEY_HOSTS, offsetof(struct gs_agent_config, allowed_hosts), 0,
     sizeof(((struct gs_agent_config *)0)->allowed_hosts), NULL, "",
     "more Host header names the TCP door answers (comma-separated; besides localhost, "
     "loopback and listen addresses and the hostname); * : any (docs/agent.md)",
     0},
    {"tokens_file", KEY_STR, offsetof(struct gs_agent_config, tokens_file), 0,
     sizeof(((struct gs_agent_config *)0)->tokens_file), NULL, "",
     "HTTP bearer tokens, lines 'sha256:<hex> admin|viewer|metrics [user]' (docs/security.md; "
     "gpuscope agent --new-token ROLE [USER]); empty: none",
     0},
    {"web_config_file", KEY_STR, offsetof(struct gs_agent_config, web_config_file), 0,
     sizeof(((struct gs_agent_config *)0)->web_config_file), NULL, "",
     "Prometheus exporter-toolkit web config (YAML: tls_server_config, basic_auth_users)", 0},
    {"tls_cert_file", KEY_STR, offsetof(struct gs_agent_config, tls_cert_file), 0,
     sizeof(((struct gs_agent_config *)0)->tls_cert_file), NULL, "",
     "PEM certificate for HTTPS (with tls_key_file); SIGHUP reloads the pair", 0},
    {"tls_key_file", KEY_STR, offsetof(struct gs_agent_config, tls_key_file), 0,
     sizeof(((struct gs_agent_config *)0)->tls_key_file), NULL, "", "PEM private key for HTTPS", 0},
    {"insecure", KEY_ENUM, offsetof(struct gs_agent_config, insecure), 0, 0, history_names, "off",
     "on | off (--insecure alone: on): allow a non-loopback listen without TLS and "
     "tokens or basic auth",
     0},
    {"user", KEY_USER, offsetof(struct gs_agent_config, user), 0,
     sizeof(((struct gs_agent_config *)0)->user), NULL, "",
     "started as root: become this user once the TCP port is bound (docs/security.md); "
     "empty: stay as started",
     RESTART},
    {"kubernetes_pods_dir", KEY_STR, offsetof(struct gs_agent_config, kubernetes_pods_dir), 0,
     sizeof(((struct gs_agent_config *)0)->kubernetes_pods_dir), NULL, "/var/log/pods",
     "the kubelet's pod log directories (<namespace>_<pod>_<uid>/<container>/), which name the "
     "pod, namespace and container of a process whose cgroup is a pod's (docs/metrics.md); "
     "off: do not look",
     RESTART},
};
#define N_KEYS (sizeof keys / sizeof keys[0])

static const struct key *find_key(const char *name, size_t len)
{
    for (size_t i = 0; i < N_KEYS; i++)
        if (strlen(keys[i].name) == len && strncmp(keys[i].name, name, len) == 0)
            return &keys[i];
    return NULL;
}

int gs_config_split_listen(const char *listen, char *host, size_t host_len, unsigned *port)
{
    const char *colon, *h = listen;
    size_t hl;
    char *end;
    long p;

    if (listen[0] == '[') {
        const char *close = strchr(listen, ']');
        if (!close || close[1] != ':')
            return GS_EINVAL;
        h = listen + 1;
        hl = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = strrchr(listen, ':');
        if (!colon)
            return GS_EINVAL;
        hl = (size_t)(colon - listen);
    }
    if (hl == 0 || hl >= host_len)
        return GS_EINVAL;
    memcpy(host, h, hl);
    host[hl] = '\0';
    errno = 0;
    p = strtol(colon + 1, &end, 10);
    if (errno || end == colon + 1 || *end || p < 1 || p > 65535)
        return GS_EINVAL;
    *port = (unsigned)p;
    return GS_OK;
}

static int set_listen(char *dst, const char *value, const char *why_prefix, struct gs_err *err)
{
    char host[GS_LISTEN_LEN];
    unsigned port;
    unsigned char addr[16];

    if (strlen(value) >= GS_LISTEN_LEN ||
        gs_config_split_listen(value, host, sizeof host, &port) != GS_OK)
        return gs_err_set(err, GS_EINVAL, "%s: expected HOST:PORT with PORT 1..65535, got '%s'",
                          why_prefix, value);
    if (inet_pton(AF_INET, host, addr) != 1 && inet_pton(AF_INET6, host, addr) != 1)
        return gs_err_set(err, GS_EINVAL, "%s: '%s' is not an IPv4 or IPv6 address", why_prefix,
                          host);
    strcpy(dst, value);
    return GS_OK;
}

int gs_config_set(struct gs_agent_config *c, const char *key, const char *value, const char *where,
                  struct gs_err *err)
{
    const struct key *k = find_key(key, strlen(key));
    char prefix[GS_ERR_MSG_LEN / 2];
    char *p;

    snprintf(prefix, sizeof prefix, "%s: %.64s", where, key);
    if (!k)
        return gs_err_set(err, GS_EINVAL, "%s: unknown key", prefix);
    p = (char *)c + k->off;
    switch (k->type) {
    case KEY_DOUBLE: {
        double v;
        if (gs_config_parse_number(value, &v) != GS_OK)
            return gs_err_set(err, GS_EINVAL, "%s: '%.64s' is not a number", prefix, value);
        if (v < k->min || v > k->max)
            return gs_err_set(err, GS_EINVAL, "%s: %g is out of range %g..%g", prefix, v, k->min,
                              k->max);
        memcpy(p, &v, sizeof v);
        return GS_OK;
    }
    case KEY_UINT: {
        char *end;
        unsigned long v;
        errno = 0;
        v = strtoul(value, &end, 10);
        if (errno || end == value || *end || !(value[0] >= '0' && value[0] <= '9'))
            return gs_err_set(err, GS_EINVAL, "%s: '%.64s' is not a whole number", prefix, value);
        if (v < k->min || v > k->max)
            return gs_err_set(err, GS_EINVAL, "%s: %lu is out of range %g..%g", prefix, v, k->min,
                              k->max);
        unsigned u = (unsigned)v;
        memcpy(p, &u, sizeof u);
        return GS_OK;
    }
    case KEY_ENUM: {
        char list[128] = "";
        for (int i = 0; k->choices[i]; i++) {
            if (strcmp(value, k->choices[i]) == 0) {
                memcpy(p, &i, sizeof i);
                return GS_OK;
            }
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                     k->choices[i]);
        }
        return gs_err_set(err, GS_EINVAL, "%s: '%.64s' is not one of %s", prefix, value, list);
    }
    case KEY_DURATION: {
        double v;
        if (gs_config_parse_duration(value, &v) != GS_OK)
            return gs_err_set(err, GS_EINVAL,
                              "%s: '%.64s' is not a duration (a number with s, m, h or d)", prefix,
                              value);
        if (v < k->min || v > k->max)
            return gs_err_set(err, GS_EINVAL, "%s: %.64s is out of range 1m..3650d", prefix, value);
        memcpy(p, &v, sizeof v);
        return GS_OK;
    }
    case KEY_STR: /* k->max: the field's size */
        if (strlen(value) >= (size_t)k->max)
            return gs_err_set(err, GS_EINVAL, "%s: longer than %d bytes", prefix, (int)k->max - 1);
        strcpy(p, value);
        return GS_OK;
    case KEY_HOSTS: /* k->max: the field's size */
        if (strlen(value) >= (size_t)k->max)
            return gs_err_set(err, GS_EINVAL, "%s: longer than %d bytes", prefix, (int)k->max - 1);
        if (!gs_config_hosts_valid(value))
            return gs_err_set(err, GS_EINVAL,
                              "%s: '%.64s' is not a comma-separated list of host names "
                              "(letters, digits, '.', '-', '_', IP addresses, [IPv6]) or *",
                              prefix, value);
        strcpy(p, value);
        return GS_OK;
    case KEY_USER: { /* resolved here so that a typo names its FILE:LINE */
        struct passwd pw, *res = NULL;
        char buf[4096];
        if (strlen(value) >= (size_t)k->max)
            return gs_err_set(err, GS_EINVAL, "%s: longer than %d bytes", prefix, (int)k->max - 1);
        if (value[0] && (getpwnam_r(value, &pw, buf, sizeof buf, &res) != 0 || !res))
            return gs_err_set(err, GS_EINVAL, "%s: no such user '%.64s'", prefix, value);
        strcpy(p, value);
        return GS_OK;
    }
    case KEY_PATH:
        if (!value[0])
            return gs_err_set(err, GS_EINVAL, "%s: empty path", prefix);
        if (strlen(value) >= GS_DATA_DIR_LEN - 16) /* room for "/history.db-wal" */
            return gs_err_set(err, GS_EINVAL, "%s: path longer than %d bytes", prefix,
                              GS_DATA_DIR_LEN - 17);
        strcpy(p, value);
        return GS_OK;
    case KEY_LOGLEVEL: {
        int lv = gs_log_parse(value);
        if (lv < 0)
            return gs_err_set(err, GS_EINVAL, "%s: '%.64s' is not one of error, warn, info, debug",
                              prefix, value);
        memcpy(p, &lv, sizeof lv);
        return GS_OK;
    }
    case KEY_LISTEN:
        return set_listen(p, value, prefix, err);
    }
    return gs_err_set(err, GS_EINVAL, "%s: bad key type", prefix);
}

int gs_config_parse_number(const char *text, double *v)
{
    return gs_parse_double(text, v) == 0 ? GS_OK : GS_EINVAL;
}

int gs_config_parse_duration(const char *text, double *seconds)
{
    return gs_parse_duration(text, seconds) == 0 ? GS_OK : GS_EINVAL;
}

void gs_config_default_data_dir(char *out, size_t len, const char *systemd_state, unsigned euid,
                                const char *xdg_state, const char *home)
{
    /* systemd's StateDirectory= (the unit's /var/lib/gpuscope, with DynamicUser's non-root
     * uid): the first of its colon-separated paths. */
    if (systemd_state && systemd_state[0] == '/') {
        size_t n = strcspn(systemd_state, ":");
        snprintf(out, len, "%.*s", (int)n, systemd_state);
    } else if (euid == 0)
        snprintf(out, len, "/var/lib/gpuscope");
    else if (xdg_state && xdg_state[0] == '/') /* XDG: a relative value is to be ignored */
        snprintf(out, len, "%s/gpuscope", xdg_state);
    else if (home && home[0])
        snprintf(out, len, "%s/.local/state/gpuscope", home);
    else
        snprintf(out, len, "/var/lib/gpuscope");
}

void gs_config_default_socket(char *out, size_t len, const char *systemd_runtime, unsigned euid,
                              const char *xdg_runtime)
{
    size_t n = systemd_runtime ? strcspn(systemd_runtime, ":") : 0;

    if (systemd_runtime && systemd_runtime[0] == '/' && n + sizeof "/steps.sock" <= len)
        snprintf(out, len, "%.*s/steps.sock", (int)n, systemd_runtime);
    else if (euid == 0)
        snprintf(out, len, "/run/gpuscope/steps.sock");
    else if (xdg_runtime && xdg_runtime[0] == '/' &&
             strlen(xdg_runtime) + sizeof "/gpuscope/steps.sock" <= len)
        snprintf(out, len, "%s/gpuscope/steps.sock", xdg_runtime);
    else
        snprintf(out, len, "off");
}

void gs_config_default_http_socket(char *out, size_t len, const char *systemd_runtime,
                                   unsigned euid, const char *xdg_runtime)
{
    size_t n = systemd_runtime ? strcspn(systemd_runtime, ":") : 0;

    if (systemd_runtime && systemd_runtime[0] == '/' && n + sizeof "/agent.sock" <= len)
        snprintf(out, len, "%.*s/agent.sock", (int)n, systemd_runtime);
    else if (euid == 0)
        snprintf(out, len, "/run/gpuscope/agent.sock");
    else if (xdg_runtime && xdg_runtime[0] == '/' &&
             strlen(xdg_runtime) + sizeof "/gpuscope/agent.sock" <= len)
        snprintf(out, len, "%s/gpuscope/agent.sock", xdg_runtime);
    else
        snprintf(out, len, "off");
}

static void defaults(struct gs_agent_config *c, unsigned euid)
{
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < N_KEYS; i++)
        if (keys[i].def)
            (void)gs_config_set(c, keys[i].name, keys[i].def, "default", NULL);
    gs_alert_rules_defaults(&c->alerts);
    gs_config_default_data_dir(c->data_dir, sizeof c->data_dir, getenv("STATE_DIRECTORY"), euid,
                               getenv("XDG_STATE_HOME"), getenv("HOME"));
    /* $GPUSCOPE_AGENT_SOCKET names the socket for both sides (src/run/client.c reads it). */
    if (getenv("GPUSCOPE_AGENT_SOCKET") && getenv("GPUSCOPE_AGENT_SOCKET")[0] == '/' &&
        strlen(getenv("GPUSCOPE_AGENT_SOCKET")) < sizeof c->socket)
        snprintf(c->socket, sizeof c->socket, "%s", getenv("GPUSCOPE_AGENT_SOCKET"));
    else
        gs_config_default_socket(c->socket, sizeof c->socket, getenv("RUNTIME_DIRECTORY"), euid,
                                 getenv("XDG_RUNTIME_DIR"));
    gs_config_default_http_socket(c->http_socket, sizeof c->http_socket,
                                  getenv("RUNTIME_DIRECTORY"), euid, getenv("XDG_RUNTIME_DIR"));
}

void gs_config_defaults(struct gs_agent_config *c)
{
    defaults(c, (unsigned)geteuid());
}

void gs_config_defaults_for(struct gs_agent_config *c, unsigned euid)
{
    defaults(c, euid);
}

static const char *skip_blank(const char *s, const char *end)
{
    while (s < end && (*s == ' ' || *s == '\t' || *s == '\r'))
        s++;
    return s;
}

static const char *trim_end(const char *s, const char *end)
{
    while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
        end--;
    return end;
}

/* One line of an INI text: [s, e) without its newline. */
static int parse_line(struct gs_agent_config *c, const char *name, unsigned lineno, const char *s,
                      const char *e, struct gs_err *err)
{
    char where[300], key[64], value[GS_LISTEN_LEN * 2];
    const char *eq, *ks, *ke, *vs, *ve;

    s = skip_blank(s, e);
    e = trim_end(s, e);
    snprintf(where, sizeof where, "%.256s:%u", name, lineno);
    if (s == e || *s == '#' || *s == ';')
        return GS_OK;
    if (*s == '[') {
        if (e - s == 7 && memcmp(s, "[agent]", 7) == 0)
            return GS_OK;
        return gs_err_set(err, GS_EINVAL, "%s: %.*s: unknown section (only [agent])", where,
                          (int)(e - s > 64 ? 64 : e - s), s);
    }
    eq = memchr(s, '=', (size_t)(e - s));
    if (!eq)
        return gs_err_set(err, GS_EINVAL, "%s: %.*s: expected 'key = value'", where,
                          (int)(e - s > 64 ? 64 : e - s), s);
    ks = s;
    ke = trim_end(ks, eq);
    vs = skip_blank(eq + 1, e);
    ve = e;
    if (ke == ks)
        return gs_err_set(err, GS_EINVAL, "%s: missing key before '='", where);
    if ((size_t)(ke - ks) >= sizeof key || !find_key(ks, (size_t)(ke - ks)))
        return gs_err_set(err, GS_EINVAL, "%s: %.*s: unknown key", where,
                          (int)(ke - ks > 64 ? 64 : ke - ks), ks);
    memcpy(key, ks, (size_t)(ke - ks));
    key[ke - ks] = '\0';
    if (ve - vs >= 2 && *vs == '"' && ve[-1] == '"')
        vs++, ve--;
    if (ve == vs)
        return gs_err_set(err, GS_EINVAL, "%s: %s: missing value", where, key);
    if ((size_t)(ve - vs) >= sizeof value)
        return gs_err_set(err, GS_EINVAL, "%s: %s: value too long", where, key);
    memcpy(value, vs, (size_t)(ve - vs));
    value[ve - vs] = '\0';
    return gs_config_set(c, key, value, where, err);
}

/* `[alert NAME]` sections (alerts.h): the header switches section (sec holds NAME, "" for
 * [agent]); inside one, `key = value` lines go to gs_alert_rule_set. *handled is 0 when the
 * line is parse_line's. */
static int alert_line(struct gs_agent_config *c, const char *name, unsigned lineno, const char *s,
                      const char *e, char *sec, unsigned *sec_line, int *handled,
                      struct gs_err *err)
{
    char where[300], key[64], value[GS_ALERT_URL_LEN];
    const char *eq, *ke, *vs;

    *handled = 0;
    s = skip_blank(s, e);
    e = trim_end(s, e);
    snprintf(where, sizeof where, "%.256s:%u", name, lineno);
    if (s < e && *s == '[') {
        char prev[300];
        int rc;
        snprintf(prev, sizeof prev, "%.256s:%u", name, *sec_line);
        if (sec[0] && (rc = gs_alert_rule_check(&c->alerts, sec, prev, err)) != GS_OK)
            return rc;
        sec[0] = '\0';
        if (e - s > 8 && memcmp(s, "[alert ", 7) == 0 && e[-1] == ']') {
            const char *ns = skip_blank(s + 7, e - 1), *ne = trim_end(ns, e - 1);
            if (ne == ns || ne - ns >= GS_ALERT_NAME_LEN ||
                strspn(ns, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") <
                    (size_t)(ne - ns))
                return gs_err_set(err, GS_EINVAL, "%s: %.*s: bad alert name (letters, digits, _-.)",
                                  where, (int)(e - s > 64 ? 64 : e - s), s);
            memcpy(sec, ns, (size_t)(ne - ns));
            sec[ne - ns] = '\0';
            *sec_line = lineno;
            *handled = 1;
        }
        return GS_OK;
    }
    if (!sec[0] || s == e || *s == '#' || *s == ';')
        return GS_OK;
    *handled = 1;
    eq = memchr(s, '=', (size_t)(e - s));
    if (!eq)
        return gs_err_set(err, GS_EINVAL, "%s: %.*s: expected 'key = value'", where,
                          (int)(e - s > 64 ? 64 : e - s), s);
    ke = trim_end(s, eq);
    vs = skip_blank(eq + 1, e);
    if (ke == s || (size_t)(ke - s) >= sizeof key)
        return gs_err_set(err, GS_EINVAL, "%s: bad key before '='", where);
    memcpy(key, s, (size_t)(ke - s));
    key[ke - s] = '\0';
    if (e - vs >= 2 && *vs == '"' && e[-1] == '"')
        vs++, e--;
    if (e == vs)
        return gs_err_set(err, GS_EINVAL, "%s: %s: missing value", where, key);
    if ((size_t)(e - vs) >= sizeof value)
        return gs_err_set(err, GS_EINVAL, "%s: %s: value too long", where, key);
    memcpy(value, vs, (size_t)(e - vs));
    value[e - vs] = '\0';
    return gs_alert_rule_set(&c->alerts, sec, key, value, where, err);
}

int gs_config_parse_text(struct gs_agent_config *c, const char *name, const char *text,
                         struct gs_err *err)
{
    unsigned lineno = 1, sec_line = 0;
    char sec[GS_ALERT_NAME_LEN] = "";

    for (const char *s = text; *s; lineno++) {
        const char *nl = strchr(s, '\n');
        const char *e = nl ? nl : s + strlen(s);
        int handled;
        int rc = alert_line(c, name, lineno, s, e, sec, &sec_line, &handled, err);
        if (rc == GS_OK && !handled)
            rc = parse_line(c, name, lineno, s, e, err);
        if (rc != GS_OK)
            return rc;
        if (!nl)
            break;
        s = nl + 1;
    }
    if (sec[0]) {
        char where[300];
        snprintf(where, sizeof where, "%.256s:%u", name, sec_line);
        return gs_alert_rule_check(&c->alerts, sec, where, err);
    }
    return GS_OK;
}

/* Config files are small; a cap keeps a wrong path (a device, a huge log) from eating memory. */
#define CONFIG_MAX_BYTES (1u << 20)

int gs_config_load_file(struct gs_agent_config *c, const char *path, struct gs_err *err)
{
    FILE *f = fopen(path, "r");
    char *buf;
    size_t n;
    int rc;

    if (!f)
        return gs_err_set(err, GS_EIO, "%s: cannot open: %s", path, strerror(errno));
    buf = malloc(CONFIG_MAX_BYTES + 1);
    if (!buf) {
        fclose(f);
        return gs_err_set(err, GS_ENOMEM, "%s: out of memory", path);
    }
    n = fread(buf, 1, CONFIG_MAX_BYTES + 1, f);
    if (ferror(f) || n > CONFIG_MAX_BYTES) {
        rc =
            gs_err_set(err, GS_EIO, "%s: %s", path, ferror(f) ? "read error" : "larger than 1 MiB");
    } else if (memchr(buf, '\0', n)) {
        rc = gs_err_set(err, GS_EINVAL, "%s: contains a NUL byte", path);
    } else {
        buf[n] = '\0';
        rc = gs_config_parse_text(c, path, buf, err);
    }
    free(buf);
    fclose(f);
    return rc;
}

/* Walks argv: for each --name[=value] calls fn; returns its first error. */
typedef int (*arg_fn)(void *ctx, const char *name, size_t name_len, const char *value,
                      struct gs_err *err);

static int walk_args(int argc, char **argv, arg_fn fn, void *ctx, struct gs_err *err)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *name, *eq, *value;
        size_t len;
        int rc;

        if (strncmp(a, "--", 2) != 0 || a[2] == '\0') {
            if (strcmp(a, "-h") == 0) {
                rc = fn(ctx, "help", 4, NULL, err);
                if (rc != GS_OK)
                    return rc;
                continue;
            }
            return gs_err_set(err, GS_EUSAGE, "agent: unexpected argument '%.64s'", a);
        }
        name = a + 2;
        eq = strchr(name, '=');
        len = eq ? (size_t)(eq - name) : strlen(name);
        value = eq ? eq + 1 : NULL;
        if (!eq && strncmp(name, "help", len) != 0 && strncmp(name, "check-config", len) != 0 &&
            strcmp(name, "insecure") != 0) { /* --insecure alone: insecure = on */
            if (i + 1 >= argc)
                return gs_err_set(err, GS_EUSAGE, "--%.64s: missing value", name);
            value = argv[++i];
        }
        rc = fn(ctx, name, len, value, err);
        if (rc != GS_OK)
            return rc;
    }
    return GS_OK;
}

/* Flag spelling: --metrics-compat and --metrics_compat both name metrics_compat. */
static void flag_to_key(const char *name, size_t len, char *key, size_t key_len)
{
    size_t i;

    for (i = 0; i < len && i + 1 < key_len; i++)
        key[i] = name[i] == '-' ? '_' : name[i];
    key[i] = '\0';
}

static int scan_arg(void *ctx, const char *name, size_t len, const char *value, struct gs_err *err)
{
    struct gs_agent_args *a = ctx;
    char key[64];

    if (len == 4 && strncmp(name, "help", 4) == 0) {
        a->help = 1;
        return GS_OK;
    }
    if (len == 12 && strncmp(name, "check-config", 12) == 0) {
        a->check = 1;
        return GS_OK;
    }
    if (len == 6 && strncmp(name, "config", 6) == 0) {
        a->config_path = value;
        return GS_OK;
    }
    flag_to_key(name, len, key, sizeof key);
    if (len >= sizeof key || !find_key(key, strlen(key)))
        return gs_err_set(err, GS_EUSAGE, "agent: unknown option '--%.*s'",
                          (int)(len > 64 ? 64 : len), name);
    return GS_OK;
}

int gs_config_parse_args(struct gs_agent_args *a, int argc, char **argv, struct gs_err *err)
{
    memset(a, 0, sizeof *a);
    return walk_args(argc, argv, scan_arg, a, err);
}

static int apply_arg(void *ctx, const char *name, size_t len, const char *value, struct gs_err *err)
{
    char key[64], where[80];

    flag_to_key(name, len, key, sizeof key);
    if (!value && strcmp(key, "insecure") == 0)
        value = "on";
    if (!value || strcmp(key, "config") == 0 || !find_key(key, strlen(key)))
        return GS_OK; /* --help, --config, --check-config: scan_arg's business */
    snprintf(where, sizeof where, "--%.*s", (int)(len > 64 ? 64 : len), name);
    /* The message reads "--interval: interval: why"; drop the repeated key. */
    {
        struct gs_err e;
        int rc = gs_config_set(ctx, key, value, "", &e);
        if (rc != GS_OK)
            return gs_err_set(err, rc, "%s%s", where, e.msg + 2 + strlen(key));
    }
    return GS_OK;
}

int gs_config_apply_args(struct gs_agent_config *c, int argc, char **argv, struct gs_err *err)
{
    return walk_args(argc, argv, apply_arg, c, err);
}

int gs_config_build(struct gs_agent_config *c, const struct gs_agent_args *a, int argc, char **argv,
                    struct gs_err *err)
{
    int rc;

    defaults(c, a->pin_euid ? a->euid : (unsigned)geteuid());
    if (a->config_path && (rc = gs_config_load_file(c, a->config_path, err)) != GS_OK)
        return rc;
    return gs_config_apply_args(c, argc, argv, err);
}

void gs_config_usage(FILE *out)
{
    fprintf(out, "usage: gpuscope agent [--config FILE] [--check-config] [--KEY=VALUE ...]\n\n"
                 "Every configuration key is also a flag (--log-level or --log_level); flags\n"
                 "override the file. SIGHUP re-reads the file. See docs/agent.md.\n\nkeys:\n");
    for (size_t i = 0; i < N_KEYS; i++) {
        char flag[64];
        size_t j;
        for (j = 0; keys[i].name[j] && j + 1 < sizeof flag; j++)
            flag[j] = keys[i].name[j] == '_' ? '-' : keys[i].name[j];
        flag[j] = '\0';
        fprintf(out, "  --%-16s %s%s (default %s", flag, keys[i].help,
                keys[i].restart ? "; restart to change" : "",
                keys[i].def                ? keys[i].def
                : keys[i].type == KEY_PATH ? "$STATE_DIRECTORY under systemd, /var/lib/gpuscope "
                                             "for root, else $XDG_STATE_HOME/gpuscope or "
                                             "~/.local/state/gpuscope"
                                           : "as above");
        if (keys[i].type == KEY_DOUBLE || keys[i].type == KEY_UINT)
            fprintf(out, ", %g..%g", keys[i].min, keys[i].max);
        fprintf(out, ")\n");
    }
}

bool gs_config_hosts_valid(const char *list)
{
    const char *p = list;

    while (*p) {
        size_t n = strcspn(p, ", \t");
        if (n == 1 && p[0] == '*') {
            /* any */
        } else {
            for (size_t i = 0; i < n; i++) {
                char ch = p[i];
                if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                      (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' || ch == '_' ||
                      ch == ':' || ch == '[' || ch == ']'))
                    return false;
            }
        }
        p += n;
        p += strspn(p, ", \t");
    }
    return true;
}

static void write_str(FILE *out, const char *key, const char *value)
{
    if (value[0])
        fprintf(out, "%s = \"%s\"\n", key, value);
    else
        fprintf(out, "# %s = (empty)\n", key);
}

void gs_config_write(FILE *out, const struct gs_agent_config *c)
{
    fprintf(out, "[agent]\nlisten = %s\ninterval = %g\nmetrics_compat = %s\nlog_level = %s\n",
            c->listen, c->interval_s,
            compat_names[c->metrics_compat <= GS_COMPAT_DCGM3 ? c->metrics_compat : 0],
            gs_log_level_name((enum gs_log_level)c->log_level));
    fprintf(out,
            "data_dir = \"%s\"\nhistory = %s\nflush_interval = %g\nretention_raw = %.17gs\n"
            "retention_rollup = %.17gs\nretention_runs = %.17gs\n",
            c->data_dir, history_names[c->history ? 1 : 0], c->flush_interval_s, c->retention_raw_s,
            c->retention_rollup_s, c->retention_runs_s);
    fprintf(out,
            "process_metrics = %s\nprocess_metrics_max = %u\nhttp_rate = %g\nhttp_burst = %u\n",
            history_names[c->process_metrics ? 1 : 0], c->process_metrics_max, c->http_rate,
            c->http_burst);
    fprintf(out, "http_conn_per_uid = %u\n", c->http_conn_per_uid);
    fprintf(out, "runs_per_uid = %u\n", c->runs_per_uid);
    fprintf(out, "runs_resume_timeout = %u\n", c->runs_resume_timeout_s);
    fprintf(out, "integrity_check_interval = %.17gs\n", c->integrity_check_s);
    fprintf(out,
            "steps_conn_per_uid = %u\nsteps_rate_per_uid = %g\nsteps_burst_per_uid = %u\n"
            "steps_per_run = %u\nsteps_per_uid = %u\n",
            c->steps_conn_per_uid, c->steps_rate_per_uid, c->steps_burst_per_uid, c->steps_per_run,
            c->steps_per_uid);
    fprintf(out, "ended_rows_per_uid = %u\nended_mib_per_uid = %u\n", c->ended_rows_per_uid,
            c->ended_mib_per_uid);
    /* An empty value cannot be read back ("missing value"): written as a comment. */
    write_str(out, "influx_url", c->push.influx_url);
    fprintf(out, "influx_version = %s\n", influx_version_names[c->push.influx_version ? 1 : 0]);
    write_str(out, "influx_db", c->push.influx_db);
    write_str(out, "influx_org", c->push.influx_org);
    write_str(out, "influx_bucket", c->push.influx_bucket);
    write_str(out, "influx_token_file", c->push.influx_token_file);
    fprintf(out, "influx_gzip = %s\npush_interval = %g\npush_buffer = %u\n",
            history_names[c->push.influx_gzip ? 1 : 0], c->push.interval_s, c->push.buffer_batches);
    write_str(out, "pushgateway_url", c->push.pushgateway_url);
    write_str(out, "pushgateway_job", c->push.pushgateway_job);
    fprintf(out, "alerts = %s\n", history_names[c->alerts.enabled ? 1 : 0]);
    write_str(out, "alert_webhook", c->alerts.webhook);
    write_str(out, "grafana_url", c->grafana_url);
    fprintf(out, "training_hang_after = %.17g\ntraining_hang_min = %.17gs\n", c->alerts.hang_after,
            c->alerts.hang_min_s);
    write_str(out, "socket", c->socket);
    fprintf(out, "process_visibility = %s\ngpu_visibility = %s\n",
            procvis_names[c->process_visibility < 3 ? c->process_visibility : 0],
            gpuvis_names[c->gpu_visibility ? 1 : 0]);
    write_str(out, "admin_group", c->admin_group);
    write_str(out, "http_socket", c->http_socket);
    write_str(out, "allowed_hosts", c->allowed_hosts);
    write_str(out, "tokens_file", c->tokens_file);
    write_str(out, "web_config_file", c->web_config_file);
    write_str(out, "tls_cert_file", c->tls_cert_file);
    write_str(out, "tls_key_file", c->tls_key_file);
    fprintf(out, "insecure = %s\n", history_names[c->insecure ? 1 : 0]);
    write_str(out, "user", c->user);
    write_str(out, "kubernetes_pods_dir", c->kubernetes_pods_dir);
    for (unsigned i = 0; i < c->alerts.n; i++) {
        const struct gs_alert_rule *r = &c->alerts.r[i];
        fprintf(out,
                "\n[alert %s]\nmetric = %s\nop = %s\nthreshold = %.17g\nfor = %.17gs\n"
                "hysteresis = %.17g\nseverity = %s\nenabled = %s\n",
                r->name, gs_alert_metric_name(r->metric), gs_alert_op_name(r->op), r->threshold,
                r->for_s, r->hysteresis, gs_alert_severity_name(r->severity),
                r->enabled ? "on" : "off");
    }
}

void gs_config_keep_restart_keys(struct gs_agent_config *c, const struct gs_agent_config *running,
                                 const char *fixed)
{
    for (size_t i = 0; i < N_KEYS; i++) {
        const struct key *k = &keys[i];
        char *now = (char *)c + k->off;
        const char *run = (const char *)running + k->off;
        int warn = !fixed || strcmp(fixed, k->name) != 0;

        if (!k->restart)
            continue;
        if (k->type == KEY_ENUM) {
            int v_now, v_run;
            memcpy(&v_now, now, sizeof v_now);
            memcpy(&v_run, run, sizeof v_run);
            if (warn && v_now != v_run)
                gs_log(GS_LOG_WARN, "reload: %s %s needs a restart", k->name, k->choices[v_now]);
            memcpy(now, run, sizeof v_run);
            continue;
        }
        /* Text keys: the same field of the same struct, so the running value fits. */
        if (warn && strcmp(now, run) != 0)
            gs_log(GS_LOG_WARN, "reload: %s '%s' -> '%s' needs a restart; still '%s'", k->name, run,
                   now, run);
        memmove(now, run, strlen(run) + 1);
    }
}
