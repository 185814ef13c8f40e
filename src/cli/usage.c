/*
 * `gpuscope usage`: GPU usage accounting of the local agent (GET /api/v1/usage over its unix
 * socket, client/agent_client.h) or of an agent over HTTP (--host, client/http.h): GPU-hours
 * held, busy share, idle-held hours, memory, energy and cost, by user, job, pod, namespace or
 * GPU, as an aligned table, --csv or the API's --json. The agent applies its visibility policy
 * to the caller (SO_PEERCRED): a user who is not an admin sees their own rows. docs/usage.md.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/parse.h"
#include "base/term.h"
#include "cli/agentdoc.h"
#include "cli/cli.h"
#include "client/agent_client.h"
#include "client/http.h"
#include "gpuscope/gs_err.h"

#define USAGE_TIMEOUT_MS 10000

static void usage_help(FILE *out)
{
    fprintf(out,
            "usage: gpuscope usage [--since DUR | --from T [--to T]] [--by KIND] [--job ID]\n"
            "                      [--json | --csv] [--host URL]\n\n"
            "GPU usage accounting kept by the agent: for each user (or job, pod, namespace,\n"
            "GPU), the GPU-hours held (a process had a context on the GPU), the busy share\n"
            "(utilization while held, split by per-process SM utilization on shared GPUs),\n"
            "the hours held while below 5 %% busy, memory in GiB-hours and its peak, energy\n"
            "in kWh and, when the agent has gpu_hour_price (and kwh_price) set, the cost.\n"
            "Rows are sorted by GPU-hours held. A user who is not an admin of the agent sees\n"
            "their own rows only.\n\n"
            "  --since DUR    the last DUR (s, m, h, d suffixes; default 7d)\n"
            "  --from T       start of the range: unix seconds, or YYYY-MM-DD[THH:MM[:SS]] in\n"
            "                 local time (TZ)\n"
            "  --to T         end of the range (default now)\n"
            "  --by KIND      user (default), job (Slurm job, NAMESPACE/POD or gpuscope run\n"
            "                 id), pod, namespace or gpu\n"
            "  --job ID       only the rows of this job\n"
            "  --json         the agent's /api/v1/usage document, unchanged\n"
            "  --csv          one header line, then one line per row, numbers unformatted\n"
            "  --host URL     an agent over HTTP(S) (http://HOST:PORT) instead of the local\n"
            "                 one; a Bearer token from $GPUSCOPE_TOKEN\n"
            "  -h, --help     this text\n\n"
            "The local agent's socket: $GPUSCOPE_HTTP_SOCKET, else /run/gpuscope/agent.sock,\n"
            "else $XDG_RUNTIME_DIR/gpuscope/agent.sock. Colour follows NO_COLOR and the\n"
            "terminal. Units: GPU-h (GPU-hours), h, GiB-h, GiB, kWh. See docs/usage.md.\n");
}

/* Unix seconds or YYYY-MM-DD[THH:MM[:SS]] (local time) into *t. */
static int parse_when(const char *s, double *t)
{
    struct tm tm;
    const char *end;

    if (gs_parse_is_number(s) && gs_parse_double_range(s, 0, 1e11, t) == GS_OK)
        return 0;
    memset(&tm, 0, sizeof tm);
    end = strptime(s, "%Y-%m-%d", &tm);
    if (end && *end == 'T') {
        const char *e2 = strptime(end + 1, "%H:%M:%S", &tm);
        end = e2 ? e2 : strptime(end + 1, "%H:%M", &tm);
    }
    if (!end || *end)
        return -1;
    tm.tm_isdst = -1;
    *t = (double)mktime(&tm);
    return *t < 0 ? -1 : 0;
}

static double num(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static const char *str(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static void cell(char *out, size_t len, double v, const char *fmt)
{
    if (isnan(v))
        snprintf(out, len, "-");
    else
        snprintf(out, len, fmt, v);
}

static const char *const key_title[] = {"USER", "JOB", "POD", "NAMESPACE", "GPU"};
static const char *const by_names[] = {"user", "job", "pod", "namespace", "gpu"};

static int by_index(const char *by)
{
    for (int i = 0; i < 5; i++)
        if (by && strcmp(by, by_names[i]) == 0)
            return i;
    return 0;
}

/* The key of a row as the table shows it. */
static const char *row_key(const json_t *r, int by)
{
    const char *k = str(r, "key");
    if (k && k[0])
        return k;
    return by == 1 ? "(no job)" : by == 2 ? "(no pod)" : by == 3 ? "(no namespace)" : "-";
}

static void print_range(const json_t *doc)
{
    char a[32], b[32];
    time_t f = (time_t)num(doc, "from"), t = (time_t)num(doc, "to");
    struct tm tm;

    localtime_r(&f, &tm);
    strftime(a, sizeof a, "%Y-%m-%d %H:%M", &tm);
    localtime_r(&t, &tm);
    strftime(b, sizeof b, "%Y-%m-%d %H:%M %Z", &tm);
    printf("from %s to %s", a, b);
}

static void print_table(const json_t *doc, int color)
{
    const json_t *rows = json_object_get(doc, "rows"), *r;
    int by = by_index(str(doc, "by")),
        priced = json_is_number(json_object_get(doc, "gpu_hour_price")) ||
                 json_is_number(json_object_get(doc, "kwh_price"));
    const char *cur = str(doc, "currency");
    double tot[6] = {0};
    char cost_title[32];
    size_t i, keyw = strlen(key_title[by]);

    json_array_foreach(rows, i, r)
    {
        size_t w = strlen(row_key(r, by));
        if (w > keyw)
            keyw = w;
    }
    if (keyw > 40)
        keyw = 40;
    snprintf(cost_title, sizeof cost_title, "COST%s%s", cur ? " " : "", cur ? cur : "");
    printf("%-*s  ", (int)keyw, key_title[by]);
    if (by == 1)
        printf("%-12s  ", "USER");
    printf("%10s  %6s  %10s  %11s  %10s  %8s  %10s", "HELD GPU-H", "BUSY%", "BUSY GPU-H",
           "IDLE-HELD H", "MEM GiB-H", "PEAK GiB", "ENERGY kWh");
    if (priced)
        printf("  %10s", cost_title);
    putchar('\n');
    json_array_foreach(rows, i, r)
    {
        char held[24], busy[24], bh[24], idle[24], mem[24], peak[24], kwh[24], cost[24];
        double h = num(r, "held_gpu_hours"), ih = num(r, "idle_held_hours");
        const char *sgr = color && h > 0 && ih / h >= 0.5 ? "\033[33m" : "";

        cell(held, sizeof held, h, "%.3f");
        cell(busy, sizeof busy, num(r, "busy_share") * 100, "%.1f");
        cell(bh, sizeof bh, num(r, "busy_gpu_hours"), "%.3f");
        cell(idle, sizeof idle, ih, "%.3f");
        cell(mem, sizeof mem, num(r, "memory_gib_hours"), "%.2f");
        cell(peak, sizeof peak, num(r, "peak_memory_bytes") / 1073741824.0, "%.2f");
        cell(kwh, sizeof kwh, num(r, "energy_kwh"), "%.3f");
        cell(cost, sizeof cost, num(r, "cost"), "%.2f");
        gs_term_put_cell(stdout, row_key(r, by), keyw, keyw);
        fputs("  ", stdout);
        if (by == 1) {
            char uid[32];
            const char *u = str(r, "user");
            if (!u && json_is_integer(json_object_get(r, "uid"))) {
                snprintf(uid, sizeof uid, "uid %lld",
                         (long long)json_integer_value(json_object_get(r, "uid")));
                u = uid;
            }
            gs_term_put_cell(stdout, u ? u : "-", 12, 12);
            fputs("  ", stdout);
        }
        printf("%10s  %6s  %10s  %s%11s%s  %10s  %8s  %10s", held, busy, bh, sgr, idle,
               sgr[0] ? "\033[0m" : "", mem, peak, kwh);
        if (priced)
            printf("  %10s", cost);
        putchar('\n');
        tot[0] += isnan(h) ? 0 : h;
        tot[1] += isnan(num(r, "busy_gpu_hours")) ? 0 : num(r, "busy_gpu_hours");
        tot[2] += isnan(ih) ? 0 : ih;
        tot[3] += isnan(num(r, "energy_kwh")) ? 0 : num(r, "energy_kwh");
        tot[4] += isnan(num(r, "cost")) ? 0 : num(r, "cost");
    }
    printf("%zu row%s; ", json_array_size(rows), json_array_size(rows) == 1 ? "" : "s");
    print_range(doc);
    printf("\ntotal: %.3f GPU-h held, %.1f%% busy, %.3f h idle-held, %.3f kWh", tot[0],
           tot[0] > 0 ? tot[1] / tot[0] * 100 : 0.0, tot[2], tot[3]);
    if (priced)
        printf(", cost %.2f%s%s", tot[4], cur ? " " : "", cur ? cur : "");
    putchar('\n');
}

/* A CSV field: quoted when it holds a comma, a quote or a line break. */
static void csv_str(const char *s)
{
    if (!s)
        return;
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, stdout);
        return;
    }
    putchar('"');
    for (; *s; s++) {
        if (*s == '"')
            putchar('"');
        putchar(*s);
    }
    putchar('"');
}

static void print_csv(const json_t *doc)
{
    static const char *const cols[] = {"key",
                                       "user",
                                       "uid",
                                       "job",
                                       "pod",
                                       "namespace",
                                       "gpu",
                                       "uuid",
                                       "held_gpu_hours",
                                       "busy_share",
                                       "busy_gpu_hours",
                                       "idle_held_hours",
                                       "memory_gib_hours",
                                       "peak_memory_bytes",
                                       "energy_kwh",
                                       "cost",
                                       "first_seen",
                                       "last_seen"};
    const json_t *rows = json_object_get(doc, "rows"), *r;
    size_t i;

    for (size_t c = 0; c < sizeof cols / sizeof cols[0]; c++)
        printf("%s%s", c ? "," : "", cols[c]);
    putchar('\n');
    json_array_foreach(rows, i, r)
    {
        for (size_t c = 0; c < sizeof cols / sizeof cols[0]; c++) {
            const json_t *v = json_object_get(r, cols[c]);
            if (c)
                putchar(',');
            if (json_is_string(v))
                csv_str(json_string_value(v));
            else if (json_is_integer(v))
                printf("%lld", (long long)json_integer_value(v));
            else if (json_is_real(v))
                printf("%.10g", json_real_value(v));
        }
        putchar('\n');
    }
}

/* GET path from the local agent or --host; *where names it for messages. */
static int fetch(const char *host, const char *path, char **body, size_t *len, char *where,
                 size_t where_len, struct gs_err *err)
{
    int rc;

    if (host) {
        struct gs_http *h = NULL;
        struct gs_http_opts o = {.token = getenv("GPUSCOPE_TOKEN"), .timeout_ms = USAGE_TIMEOUT_MS};
        if (o.token && !o.token[0])
            o.token = NULL;
        rc = gs_http_open(&h, host, &o, err);
        if (rc == GS_OK) {
            snprintf(where, where_len, "%s", gs_http_url(h));
            rc = gs_http_get(h, path, body, len, err);
        }
        gs_http_close(h);
        return rc;
    }
    if (!gs_agent_client_socket(where, where_len))
        return gs_err_set(err, GS_ENOTFOUND,
                          "no local agent socket (GPUSCOPE_HTTP_SOCKET, "
                          "/run/gpuscope/agent.sock, $XDG_RUNTIME_DIR/gpuscope/agent.sock); "
                          "usage is kept by a running gpuscope agent (docs/agent.md)");
    return gs_agent_client_get(where, path, USAGE_TIMEOUT_MS, body, len, err);
}

/* Appends "&name=value" to path, value percent-encoded. */
static void add_arg(char *path, size_t cap, const char *name, const char *value)
{
    size_t n = strlen(path);

    n += (size_t)snprintf(path + n, n < cap ? cap - n : 0, "%s%s=", strchr(path, '?') ? "&" : "?",
                          name);
    for (const unsigned char *s = (const unsigned char *)value; *s && n + 4 < cap; s++) {
        if ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
            strchr("-_.~", *s))
            path[n++] = (char)*s;
        else
            n += (size_t)snprintf(path + n, cap - n, "%%%02X", *s);
    }
    if (n < cap)
        path[n] = '\0';
}

int gs_cli_usage(int argc, char **argv)
{
    const char *by = NULL, *job = NULL, *host = NULL;
    double since = 7 * 86400.0, from = NAN, to = NAN;
    int json = 0, csv = 0, rc, have_since = 0;
    char path[1024] = "/api/v1/usage", where[512] = "", num_s[64];
    char *body = NULL;
    size_t len = 0;
    json_t *doc;
    struct gs_err err = {0};

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage_help(stdout);
            return GS_EXIT_OK;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (strcmp(a, "--csv") == 0) {
            csv = 1;
        } else if (strcmp(a, "--since") == 0 && v) {
            i++;
            if (gs_parse_duration(v, &since) != GS_OK || !(since > 0)) {
                fprintf(stderr,
                        "gpuscope usage: --since %s: a duration, e.g. 30m, 12h, 7d (s, m, h, d)\n",
                        v);
                return GS_EXIT_USAGE;
            }
            have_since = 1;
        } else if ((strcmp(a, "--from") == 0 || strcmp(a, "--to") == 0) && v) {
            i++;
            if (parse_when(v, a[2] == 'f' ? &from : &to) != 0) {
                fprintf(stderr,
                        "gpuscope usage: %s %s: unix seconds or YYYY-MM-DD[THH:MM[:SS]] "
                        "(local time)\n",
                        a, v);
                return GS_EXIT_USAGE;
            }
        } else if (strcmp(a, "--by") == 0 && v) {
            i++;
            by = v;
            if (by_index(by) == 0 && strcmp(by, "user") != 0) {
                fprintf(stderr, "gpuscope usage: --by %s: one of user, job, pod, namespace, gpu\n",
                        v);
                return GS_EXIT_USAGE;
            }
        } else if (strcmp(a, "--job") == 0 && v) {
            job = argv[++i];
        } else if (strcmp(a, "--host") == 0 && v) {
            host = argv[++i];
        } else {
            fprintf(stderr, "gpuscope usage: unknown argument '%s' (gpuscope usage --help)\n", a);
            return GS_EXIT_USAGE;
        }
    }
    if (json && csv) {
        fprintf(stderr, "gpuscope usage: --json and --csv: choose one\n");
        return GS_EXIT_USAGE;
    }
    if (have_since && !isnan(from)) {
        fprintf(stderr, "gpuscope usage: --since and --from: choose one\n");
        return GS_EXIT_USAGE;
    }
    if (isnan(to))
        to = (double)time(NULL);
    if (isnan(from))
        from = to - since;
    if (!(from < to)) {
        fprintf(stderr, "gpuscope usage: the range is empty (--from is not before --to)\n");
        return GS_EXIT_USAGE;
    }
    if (by)
        add_arg(path, sizeof path, "by", by);
    snprintf(num_s, sizeof num_s, "%.3f", from);
    add_arg(path, sizeof path, "from", num_s);
    snprintf(num_s, sizeof num_s, "%.3f", to);
    add_arg(path, sizeof path, "to", num_s);
    if (job)
        add_arg(path, sizeof path, "job", job);
    rc = fetch(host, path, &body, &len, where, sizeof where, &err);
    if (rc != GS_OK) {
        fprintf(stderr, "gpuscope usage: %s\n", err.msg[0] ? err.msg : gs_strerror(rc));
        return gs_rc_exit_code(rc);
    }
    if ((rc = gs_cli_agent_doc("usage", where, body, len, json, "rows", &doc)) >= 0)
        return rc;
    if (csv)
        print_csv(doc);
    else
        print_table(doc, gs_term_use_color(GS_COLOR_AUTO, STDOUT_FILENO));
    json_decref(doc);
    return fflush(stdout) == 0 ? GS_EXIT_OK : gs_rc_exit_code(GS_EIO);
}
