/*
 * `gpuscope jobstats ID`: the end-of-job summary of one job (a Slurm job id, "NAMESPACE/POD",
 * a gpuscope run or job id) from the agents that saw it: the local agent's unix socket, or
 * agents over HTTP(S) with --from (one per node: a multi-node job is combined). Per agent:
 * /api/v1/usage?by=gpu&job=ID (what the job held, its idle-held time, energy, memory),
 * /api/v1/snapshot (the node's name, each GPU's name and memory) and, per GPU, /api/v1/history
 * of utilization_gpu over the time the job held it (mean and quartiles, the first GPU work).
 * The figures and the notes are diag/jobstats.h's (pure functions of the summary, which --json
 * prints); this file fetches and prints. docs/jobstats.md.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/parse.h"
#include "base/term.h"
#include "cli/cli.h"
#include "client/agent_client.h"
#include "client/http.h"
#include "diag/jobstats.h"
#include "gpuscope/gs_err.h"

#define JS_TIMEOUT_MS 10000
#define JS_MAX_SRC 64
#define JS_DEFAULT_SINCE (30 * 86400.0)
#define GIB (1024.0 * 1024.0 * 1024.0)

static void jobstats_usage(FILE *out)
{
    fprintf(out,
            "usage: gpuscope jobstats ID [--from AGENT,AGENT...] [--since DURATION] [--json]\n\n"
            "The end-of-job summary of job ID (a Slurm job id, NAMESPACE/POD of a Kubernetes\n"
            "pod, a gpuscope run or job id) from the agents' usage accounting: per node and\n"
            "GPU, the time the job held it, utilization (mean and quartiles), peak and mean\n"
            "memory against the GPU's, the time held while idle and the energy; then notes in\n"
            "plain words (a GPU idle most of the job, memory far below the GPU's, a long wait\n"
            "before the first GPU work, low or uneven utilization).\n\n"
            "  --from LIST       agents over HTTP(S), comma-separated (http://H:P, https://H:P,\n"
            "                    H:P, or H for port 9400): one per node of the job; default:\n"
            "                    the local agent's unix socket\n"
            "  --since DURATION  how far back the job may have started (90s, 5m, 2h, 7d;\n"
            "                    default 30d)\n"
            "  --json            the summary as JSON (docs/jobstats.md)\n"
            "  --token-file FILE Bearer token for --from agents (first line of FILE); or\n"
            "                    $GPUSCOPE_TOKEN\n"
            "  --cacert FILE     CA certificates for https:// agents\n"
            "  --insecure-tls    do not check https:// agents' certificates\n"
            "  -h, --help        this text\n\n"
            "The local agent's socket: $GPUSCOPE_HTTP_SOCKET, else /run/gpuscope/agent.sock,\n"
            "else $XDG_RUNTIME_DIR/gpuscope/agent.sock. The agents show what their visibility\n"
            "policy lets you see (your own jobs; an admin token sees all). Colour follows\n"
            "NO_COLOR and the terminal. Exit status 0 with a summary, 6 when no agent knows the\n"
            "job, 255 when none answered, 2 for a usage error. See docs/jobstats.md (a Slurm\n"
            "epilog: deploy/slurm/epilog.sh).\n");
}

/* One agent: the local socket (http NULL) or one over HTTP. */
struct js_src {
    char label[256];
    char sock[256];
    struct gs_http *http;
};

/* GET path; a 429 (the agent's per-client rate limit, docs/agent.md http_rate) is asked again
 * after a second, twice at most. */
static int src_get(struct js_src *s, const char *path, char **body, size_t *len, struct gs_err *err)
{
    for (int tries = 0;; tries++) {
        int rc = s->http ? gs_http_get(s->http, path, body, len, err)
                         : gs_agent_client_get(s->sock, path, JS_TIMEOUT_MS, body, len, err);
        if (rc == GS_OK || tries == 2 || !strstr(err->msg, " answered 429"))
            return rc;
        sleep(1);
    }
}

/* GET path as a JSON object; NULL with err set. */
static json_t *src_json(struct js_src *s, const char *path, struct gs_err *err)
{
    char *body = NULL;
    size_t len = 0;
    json_error_t je;
    json_t *doc;

    if (src_get(s, path, &body, &len, err) != GS_OK)
        return NULL;
    doc = json_loadb(body, len, 0, &je);
    free(body);
    if (!json_is_object(doc)) {
        json_decref(doc);
        gs_err_set(err, GS_EPARSE, "%s: not a JSON object: %s", path,
                   doc ? "another JSON value" : je.text);
        return NULL;
    }
    return doc;
}

/* Percent-encodes s (RFC 3986 unreserved kept) into out; -1 when it does not fit. */
static int url_encode(const char *s, char *out, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;

    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~') {
            if (n + 1 >= len)
                return -1;
            out[n++] = (char)c;
        } else {
            if (n + 3 >= len)
                return -1;
            out[n++] = '%';
            out[n++] = hex[c >> 4];
            out[n++] = hex[c & 15];
        }
    }
    out[n] = '\0';
    return 0;
}

static double num(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static json_t *num_or_null(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

/* Adds b to the number at key of o (null + x = x; a null b leaves it). */
static void add_num(json_t *o, const char *key, double b)
{
    double a = num(o, key);
    if (!isfinite(b))
        return;
    json_object_set_new(o, key, json_real(isfinite(a) ? a + b : b));
}

/* The snapshot's GPU of index idx, NULL when absent. */
static const json_t *snap_gpu(const json_t *snap, long idx)
{
    size_t i;
    const json_t *g;
    json_array_foreach(json_object_get(snap, "gpus"), i, g)
    {
        if (json_integer_value(json_object_get(g, "index")) == idx)
            return g;
    }
    return NULL;
}

/* The GPU object of node's gpus for index idx, created from the usage row when new. */
static json_t *node_gpu(json_t *gpus, long idx, const char *uuid)
{
    size_t i;
    json_t *g;
    /* a MIG instance is a line of its own (its uuid MIG-...), a GPU one line per index */
    int mig = uuid && strncmp(uuid, "MIG-", 4) == 0;
    json_array_foreach(gpus, i, g)
    {
        const char *u = json_string_value(json_object_get(g, "uuid"));
        if (json_integer_value(json_object_get(g, "gpu")) == idx &&
            (mig ? u && strcmp(u, uuid) == 0 : !json_is_true(json_object_get(g, "mig"))))
            return g;
    }
    g = json_pack("{s:I, s:n, s:b, s:n, s:n, s:n, s:n, s:n, s:n, s:n, s:n, s:{s:n, s:n, s:n}, "
                  "s:n}",
                  "gpu", (json_int_t)idx, "uuid", "mig", mig, "name", "first_seen", "last_seen",
                  "held_s", "busy_s", "busy_share", "idle_held_s", "energy_kwh", "memory",
                  "peak_bytes", "mean_bytes", "total_bytes", "utilization");
    json_array_append_new(gpus, g);
    return g;
}

/* One agent's part of the summary: {"node", "source", "gpus"}; NULL when the agent has no row
 * of the job, or (err set) when it could not be asked. The job's users go into users. */
static json_t *fetch_node(struct js_src *s, const char *job_enc, double since, json_t *users,
                          struct gs_err *err)
{
    char path[1024];
    json_t *usage, *snap, *node, *gpus, *row;
    const json_t *rows;
    size_t i;
    struct gs_err serr = {0};

    snprintf(path, sizeof path, "/api/v1/usage?by=gpu&job=%s&from=%.0f", job_enc, since);
    usage = src_json(s, path, err);
    if (!usage)
        return NULL;
    rows = json_object_get(usage, "rows");
    if (!json_is_array(rows)) {
        gs_err_set(err, GS_EPARSE, "/api/v1/usage: no rows array");
        json_decref(usage);
        return NULL;
    }
    if (json_array_size(rows) == 0) {
        json_decref(usage);
        return NULL;
    }
    snap = src_json(s, "/api/v1/snapshot", &serr);
    if (!snap) /* the driver down: the usage still stands, without names and capacities */
        snap = json_object();
    gpus = json_array();
    node = json_pack("{s:s, s:s, s:o}", "node",
                     json_is_string(json_object_get(snap, "hostname"))
                         ? json_string_value(json_object_get(snap, "hostname"))
                         : s->label,
                     "source", s->label, "gpus", gpus);
    json_array_foreach(rows, i, row)
    {
        const json_t *gi = json_object_get(row, "gpu");
        json_t *g, *mem;
        double held_h = num(row, "held_gpu_hours"), v;
        const char *user = json_string_value(json_object_get(row, "user"));

        if (!json_is_integer(gi))
            continue;
        g = node_gpu(gpus, (long)json_integer_value(gi),
                     json_string_value(json_object_get(row, "uuid")));
        mem = json_object_get(g, "memory");
        if (user) {
            size_t k;
            json_t *u;
            int have = 0;
            json_array_foreach(users, k, u)
            {
                have |= strcmp(json_string_value(u), user) == 0;
            }
            if (!have)
                json_array_append_new(users, json_string(user));
        }
        if (json_is_string(json_object_get(row, "uuid")))
            json_object_set(g, "uuid", json_object_get(row, "uuid"));
        v = num(row, "first_seen");
        if (isfinite(v) && !(num(g, "first_seen") <= v))
            json_object_set_new(g, "first_seen", json_real(v));
        v = num(row, "last_seen");
        if (isfinite(v) && !(num(g, "last_seen") >= v))
            json_object_set_new(g, "last_seen", json_real(v));
        add_num(g, "held_s", held_h * 3600);
        add_num(g, "busy_s", num(row, "busy_gpu_hours") * 3600);
        add_num(g, "idle_held_s", num(row, "idle_held_hours") * 3600);
        add_num(g, "energy_kwh", num(row, "energy_kwh"));
        /* the mean memory while held: GiB-hours over held hours, summed over the job's rows */
        add_num(mem, "mean_bytes", held_h > 0 ? num(row, "memory_gib_hours") / held_h * GIB : NAN);
        v = num(row, "peak_memory_bytes");
        if (isfinite(v) && !(num(mem, "peak_bytes") >= v))
            json_object_set_new(mem, "peak_bytes", json_real(v));
    }
    if (json_array_size(users) == 0) { /* rows of several users on one GPU: ask by user */
        json_t *by_user;
        struct gs_err uerr = {0};
        snprintf(path, sizeof path, "/api/v1/usage?by=user&job=%s&from=%.0f", job_enc, since);
        by_user = src_json(s, path, &uerr);
        json_array_foreach(json_object_get(by_user, "rows"), i, row)
        {
            if (json_is_string(json_object_get(row, "user")))
                json_array_append(users, json_object_get(row, "user"));
        }
        json_decref(by_user);
    }
    json_array_foreach(gpus, i, row)
    {
        double held = num(row, "held_s"), busy = num(row, "busy_s");
        double from = num(row, "first_seen"), to = num(row, "last_seen");
        const json_t *sg = snap_gpu(snap, (long)json_integer_value(json_object_get(row, "gpu")));
        const json_t *smig = NULL, *m;
        size_t k;
        json_t *hist;
        struct gs_err herr = {0};

        if (sg && json_is_true(json_object_get(row, "mig"))) {
            json_array_foreach(json_object_get(sg, "mig_devices"), k, m)
            {
                if (json_equal(json_object_get(m, "uuid"), json_object_get(row, "uuid")))
                    smig = m;
            }
        }
        json_object_set_new(row, "busy_share",
                            held > 0 && isfinite(busy) ? json_real(busy / held) : json_null());
        if (smig) /* the instance's name (MIG 3g.40gb ...) and memory */
            sg = smig;
        /* the energy counter is the whole GPU's: the agent has none for an instance (its 0) */
        if (json_is_true(json_object_get(row, "mig")))
            json_object_set_new(row, "energy_kwh", json_null());
        if (sg) {
            json_object_set(row, "name", json_object_get(sg, "name"));
            if (json_is_number(json_object_get(sg, "memory_total")))
                json_object_set_new(json_object_get(row, "memory"), "total_bytes",
                                    json_real(num(sg, "memory_total")));
            if (json_is_null(json_object_get(row, "uuid")))
                json_object_set(row, "uuid", json_object_get(sg, "uuid"));
        }
        { /* memory in whole bytes */
            static const char *const keys[] = {"peak_bytes", "mean_bytes", "total_bytes"};
            json_t *mem = json_object_get(row, "memory");
            for (size_t k = 0; k < 3; k++) {
                double v = num(mem, keys[k]);
                if (isfinite(v))
                    json_object_set_new(mem, keys[k], json_integer((json_int_t)llround(v)));
            }
        }
        if (!isfinite(from) || !isfinite(to))
            continue;
        snprintf(path, sizeof path,
                 "/api/v1/history?gpu=%lld&metric=utilization_gpu&from=%.3f&to=%.3f",
                 (long long)json_integer_value(json_object_get(row, "gpu")), from,
                 to > from ? to + 1 : from + 1);
        hist = src_json(s, path, &herr);
        if (hist) {
            json_t *u = gs_jobstats_util(json_object_get(hist, "points"));
            if (u) {
                json_object_set(u, "source", json_object_get(hist, "source"));
                json_object_set(u, "step", json_object_get(hist, "step"));
                json_object_set_new(row, "utilization", u);
            }
            json_decref(hist);
        }
    }
    json_decref(usage);
    json_decref(snap);
    return node;
}

static void fmt_dur(char *out, size_t len, double s)
{
    if (!isfinite(s) || s < 0)
        snprintf(out, len, "-");
    else if (s < 60)
        snprintf(out, len, "%.0fs", s);
    else if (s < 3600)
        snprintf(out, len, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else
        snprintf(out, len, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
}

/* kWh from 1 kWh up, Wh below */
static void fmt_energy(char *out, size_t len, double kwh)
{
    if (kwh >= 1)
        snprintf(out, len, "%.2f kWh", kwh);
    else
        snprintf(out, len, "%.1f Wh", kwh * 1000);
}

static void fmt_pct(char *out, size_t len, double r)
{
    if (isfinite(r))
        snprintf(out, len, "%.0f", 100 * r);
    else
        snprintf(out, len, "-");
}

static void fmt_time(char *out, size_t len, double t)
{
    time_t tt = (time_t)t;
    struct tm tm;
    if (!isfinite(t) || !localtime_r(&tt, &tm) || !strftime(out, len, "%Y-%m-%d %H:%M:%S", &tm))
        snprintf(out, len, "-");
}

/* One GPU's line of the table. */
static void print_gpu(struct gs_tbuf *b, const json_t *node, const json_t *g)
{
    const json_t *u = json_object_get(g, "utilization");
    const json_t *m = json_object_get(g, "memory");
    double held = num(g, "held_s"), idle = num(g, "idle_held_s");
    double peak = num(m, "peak_bytes"), total = num(m, "total_bytes");
    double mean = num(m, "mean_bytes"), kwh = num(g, "energy_kwh");
    char h[32], um[16], p25[16], p50[16], p75[16], busy[16], pk[48], mn[24], id[48], en[24];

    fmt_dur(h, sizeof h, held);
    fmt_pct(um, sizeof um, num(u, "mean"));
    fmt_pct(p25, sizeof p25, num(u, "p25"));
    fmt_pct(p50, sizeof p50, num(u, "p50"));
    fmt_pct(p75, sizeof p75, num(u, "p75"));
    fmt_pct(busy, sizeof busy, num(g, "busy_share"));
    if (isfinite(peak) && total > 0)
        snprintf(pk, sizeof pk, "%.1f GiB %3.0f %%", peak / GIB, 100 * peak / total);
    else if (isfinite(peak))
        snprintf(pk, sizeof pk, "%.1f GiB", peak / GIB);
    else
        snprintf(pk, sizeof pk, "-");
    if (isfinite(mean))
        snprintf(mn, sizeof mn, "%.1f GiB", mean / GIB);
    else
        snprintf(mn, sizeof mn, "-");
    if (isfinite(idle) && held > 0) {
        char d[24];
        fmt_dur(d, sizeof d, idle);
        snprintf(id, sizeof id, "%s %3.0f %%", d, 100 * idle / held);
    } else {
        snprintf(id, sizeof id, "-");
    }
    if (isfinite(kwh))
        fmt_energy(en, sizeof en, kwh);
    else
        snprintf(en, sizeof en, "-");
    gs_tbuf_cell(b, json_string_value(json_object_get(node, "node")), 12, 12);
    gs_tbuf_printf(b, " %3lld  ", (long long)json_integer_value(json_object_get(g, "gpu")));
    gs_tbuf_cell(b, json_string_value(json_object_get(g, "name")), 22, 22);
    gs_tbuf_printf(b, " %8s  %5s %4s %4s %4s  %5s  %17s %9s  ", h, um, p25, p50, p75, busy, pk, mn);
    if (isfinite(idle) && held > 0 && idle / held >= GS_JOBSTATS_IDLE_SHARE)
        gs_tbuf_sgr(b, GS_SGR_YELLOW);
    gs_tbuf_printf(b, "%14s", id);
    if (isfinite(idle) && held > 0 && idle / held >= GS_JOBSTATS_IDLE_SHARE)
        gs_tbuf_sgr(b, GS_SGR_RESET);
    gs_tbuf_printf(b, "  %12s\n", en);
}

static void print_summary(struct gs_tbuf *b, const json_t *sum)
{
    const json_t *nodes = json_object_get(sum, "nodes"), *node, *g, *f;
    const json_t *tot = json_object_get(sum, "totals");
    size_t i, j, ngpu = (size_t)json_integer_value(json_object_get(tot, "gpus"));
    char from[32], to[32], dur[32], users[256] = "";
    size_t un = 0;

    json_array_foreach(json_object_get(sum, "users"), i, g)
    {
        if (un < sizeof users)
            un += (size_t)snprintf(users + un, sizeof users - un, "%s%s", i ? ", " : "",
                                   json_string_value(g));
    }
    fmt_time(from, sizeof from, num(sum, "from"));
    fmt_time(to, sizeof to, num(sum, "to"));
    fmt_dur(dur, sizeof dur, num(sum, "duration_s"));
    gs_tbuf_sgr(b, GS_SGR_BOLD);
    gs_tbuf_puts(b, "Job ");
    gs_tbuf_cell(b, json_string_value(json_object_get(sum, "job")), 80, 0);
    gs_tbuf_sgr(b, GS_SGR_RESET);
    gs_tbuf_printf(b, ": %zu GPU%s on %zu node%s, %s to %s (%s)", ngpu, ngpu == 1 ? "" : "s",
                   json_array_size(nodes), json_array_size(nodes) == 1 ? "" : "s", from, to, dur);
    if (users[0]) {
        gs_tbuf_puts(b, ", user ");
        gs_tbuf_cell(b, users, 60, 0);
    }
    gs_tbuf_puts(b, "\n\n");
    gs_tbuf_printf(b, "%-12s %3s  %-22s %8s  %5s %4s %4s %4s  %5s  %17s %9s  %14s  %12s\n", "NODE",
                   "GPU", "NAME", "HELD", "UTIL%", "P25", "P50", "P75", "BUSY%", "PEAK MEM",
                   "MEAN MEM", "IDLE-HELD", "ENERGY");
    json_array_foreach(nodes, i, node){
        json_array_foreach(json_object_get(node, "gpus"), j, g){print_gpu(b, node, g);
}
}
{
    double held = num(tot, "held_gpu_hours"), share = num(tot, "busy_share");
    double idle = num(tot, "idle_held_gpu_hours"), kwh = num(tot, "energy_kwh");
    char s[16];
    fmt_pct(s, sizeof s, share);
    gs_tbuf_printf(b, "\nTotal: %.2f GPU-hours held, %s %% busy, %.2f GPU-hours idle-held, ",
                   isfinite(held) ? held : 0, s, isfinite(idle) ? idle : 0);
    if (isfinite(kwh)) {
        char e[24];
        fmt_energy(e, sizeof e, kwh);
        gs_tbuf_printf(b, "%s\n", e);
    } else
        gs_tbuf_puts(b, "energy unknown\n");
}
json_array_foreach(json_object_get(sum, "unreachable"), i, g)
{
    gs_tbuf_sgr(b, GS_SGR_RED);
    gs_tbuf_puts(b, "Not included: ");
    gs_tbuf_sgr(b, GS_SGR_RESET);
    gs_tbuf_cell(b, json_string_value(json_object_get(g, "source")), 80, 0);
    gs_tbuf_puts(b, ": ");
    gs_tbuf_cell(b, json_string_value(json_object_get(g, "error")), 200, 0);
    gs_tbuf_puts(b, "\n");
}
if (json_array_size(json_object_get(sum, "notes")) == 0) {
    gs_tbuf_puts(b, "\nNo notes: nothing to change found in these figures.\n");
    return;
}
gs_tbuf_puts(b, "\nNotes:\n");
json_array_foreach(json_object_get(sum, "notes"), i, f)
{
    const char *sev = json_string_value(json_object_get(f, "severity"));
    const json_t *a;
    size_t k;
    gs_tbuf_puts(b, "  ");
    gs_tbuf_sgr(b, sev && strcmp(sev, "critical") == 0  ? GS_SGR_BOLD_RED
                   : sev && strcmp(sev, "warning") == 0 ? GS_SGR_YELLOW
                                                        : GS_SGR_CYAN);
    gs_tbuf_puts(b, "* ");
    gs_tbuf_sgr(b, GS_SGR_RESET);
    gs_tbuf_puts(b, json_string_value(json_object_get(f, "title")));
    json_array_foreach(json_object_get(f, "advice"), k, a)
    {
        gs_tbuf_puts(b, k ? "; " : ": ");
        gs_tbuf_puts(b, json_string_value(a));
    }
    gs_tbuf_puts(b, "\n");
}
}

/* The job-wide figures: from, to, duration, totals. */
static void add_totals(json_t *sum)
{
    double from = NAN, to = NAN, held = 0, busy = 0, idle = 0, kwh = 0;
    int have_busy = 0, have_idle = 0, have_kwh = 0;
    size_t i, j, n = 0;
    const json_t *node, *g;

    json_array_foreach(json_object_get(sum, "nodes"), i, node)
    {
        json_array_foreach(json_object_get(node, "gpus"), j, g)
        {
            double a = num(g, "first_seen"), b = num(g, "last_seen"), v;
            n++;
            if (isfinite(a) && !(from <= a))
                from = a;
            if (isfinite(b) && !(to >= b))
                to = b;
            if (isfinite(v = num(g, "held_s")))
                held += v;
            if (isfinite(v = num(g, "busy_s")))
                busy += v, have_busy = 1;
            if (isfinite(v = num(g, "idle_held_s")))
                idle += v, have_idle = 1;
            if (isfinite(v = num(g, "energy_kwh")))
                kwh += v, have_kwh = 1;
        }
    }
    json_object_set_new(sum, "from", num_or_null(from));
    json_object_set_new(sum, "to", num_or_null(to));
    json_object_set_new(sum, "duration_s", num_or_null(to - from));
    json_object_set_new(sum, "totals",
                        json_pack("{s:I, s:f, s:o, s:o, s:o}", "gpus", (json_int_t)n,
                                  "held_gpu_hours", held / 3600, "busy_share",
                                  num_or_null(have_busy && held > 0 ? busy / held : NAN),
                                  "idle_held_gpu_hours", num_or_null(have_idle ? idle / 3600 : NAN),
                                  "energy_kwh", num_or_null(have_kwh ? kwh : NAN)));
}

/* Reads the first line of path into out. */
static int read_token(const char *path, char *out, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "gpuscope jobstats: --token-file: %s: cannot open\n", path);
        return -1;
    }
    if (!fgets(out, (int)len, f))
        out[0] = '\0';
    fclose(f);
    out[strcspn(out, "\r\n")] = '\0';
    if (!out[0]) {
        fprintf(stderr, "gpuscope jobstats: --token-file: %s:1: empty\n", path);
        return -1;
    }
    return 0;
}

int gs_cli_jobstats(int argc, char **argv)
{
    const char *job = NULL, *from = NULL, *cacert = NULL;
    int json = 0, insecure = 0, rc = GS_EXIT_OK, any = 0;
    double since = JS_DEFAULT_SINCE;
    char token[512] = "", job_enc[768];
    struct js_src *src = NULL;
    size_t nsrc = 0;
    json_t *sum, *nodes, *users, *bad, *notes;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            jobstats_usage(stdout);
            return GS_EXIT_OK;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (strcmp(a, "--insecure-tls") == 0) {
            insecure = 1;
        } else if ((strcmp(a, "--from") == 0 || strcmp(a, "--since") == 0 ||
                    strcmp(a, "--token-file") == 0 || strcmp(a, "--cacert") == 0)) {
            if (i + 1 >= argc) {
                fprintf(stderr, "gpuscope jobstats: %s needs a value (gpuscope jobstats --help)\n",
                        a);
                return GS_EXIT_USAGE;
            }
            const char *v = argv[++i];
            if (a[2] == 'f')
                from = v;
            else if (a[2] == 'c')
                cacert = v;
            else if (a[2] == 't') {
                if (read_token(v, token, sizeof token) != 0)
                    return GS_EXIT_USAGE;
            } else if (gs_parse_duration(v, &since) != 0 || !(since > 0)) {
                fprintf(stderr,
                        "gpuscope jobstats: --since %s: a duration such as 90s, 5m, 2h "
                        "or 7d\n",
                        v);
                return GS_EXIT_USAGE;
            }
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "gpuscope jobstats: unknown option '%s' (gpuscope jobstats --help)\n",
                    a);
            return GS_EXIT_USAGE;
        } else if (job) {
            fprintf(stderr, "gpuscope jobstats: one job id, not '%s' too\n", a);
            return GS_EXIT_USAGE;
        } else {
            job = a;
        }
    }
    if (!job || !job[0]) {
        fprintf(stderr, "usage: gpuscope jobstats ID [--from AGENT,...] [--json] (gpuscope "
                        "jobstats --help)\n");
        return GS_EXIT_USAGE;
    }
    if (strlen(job) > 200 || url_encode(job, job_enc, sizeof job_enc) != 0) {
        fprintf(stderr, "gpuscope jobstats: the job id is longer than 200 bytes\n");
        return GS_EXIT_USAGE;
    }
    if (!token[0] && getenv("GPUSCOPE_TOKEN") && getenv("GPUSCOPE_TOKEN")[0])
        snprintf(token, sizeof token, "%s", getenv("GPUSCOPE_TOKEN"));

    src = calloc(JS_MAX_SRC, sizeof *src);
    if (!src)
        return gs_rc_exit_code(GS_ENOMEM);
    if (from) {
        const char *p = from;
        while (*p) {
            size_t n = strcspn(p, ",");
            struct gs_err err = {0};
            struct gs_http_opts o = {.token = token[0] ? token : NULL,
                                     .cacert = cacert,
                                     .insecure_tls = insecure,
                                     .timeout_ms = JS_TIMEOUT_MS};
            if (n == 0 || n >= sizeof src[0].label - 8) {
                fprintf(stderr, "gpuscope jobstats: --from: %s agent in '%s'\n",
                        n ? "a too long" : "an empty", from);
                rc = GS_EXIT_USAGE;
                goto out;
            }
            if (nsrc == JS_MAX_SRC) {
                fprintf(stderr, "gpuscope jobstats: --from: at most %d agents\n", JS_MAX_SRC);
                rc = GS_EXIT_USAGE;
                goto out;
            }
            snprintf(src[nsrc].label, sizeof src[nsrc].label, "%.*s", (int)n, p);
            if (!strstr(src[nsrc].label, "://") && !strchr(src[nsrc].label, ':'))
                strcat(src[nsrc].label, ":9400"); /* the agent's default port */
            if (gs_http_open(&src[nsrc].http, src[nsrc].label, &o, &err) != GS_OK) {
                fprintf(stderr, "gpuscope jobstats: %s\n", err.msg);
                rc = gs_rc_exit_code(err.rc ? err.rc : GS_EIO);
                goto out;
            }
            nsrc++;
            p += n;
            if (*p == ',')
                p++;
        }
    } else {
        if (!gs_agent_client_socket(src[0].sock, sizeof src[0].sock)) {
            fprintf(stderr, "gpuscope jobstats: no local agent socket (GPUSCOPE_HTTP_SOCKET, "
                            "/run/gpuscope/agent.sock, $XDG_RUNTIME_DIR/gpuscope/agent.sock); "
                            "name the agents with --from\n");
            rc = gs_rc_exit_code(GS_ENOTFOUND);
            goto out;
        }
        snprintf(src[0].label, sizeof src[0].label, "%s", src[0].sock);
        nsrc = 1;
    }

    nodes = json_array();
    users = json_array();
    bad = json_array();
    sum = json_pack("{s:s, s:n, s:n, s:n, s:o, s:o, s:o}", "job", job, "from", "to", "duration_s",
                    "users", users, "nodes", nodes, "unreachable", bad);
    for (size_t i = 0; i < nsrc; i++) {
        struct gs_err err = {0};
        json_t *node = fetch_node(&src[i], job_enc, gs_clock_real_s() - since, users, &err);
        if (node) {
            json_array_append_new(nodes, node);
            any = 1;
        } else if (err.rc) {
            /* the socket's messages name it already */
            fprintf(stderr, "gpuscope jobstats: %s%s%s\n", src[i].http ? src[i].label : "",
                    src[i].http ? ": " : "", err.msg);
            json_array_append_new(
                bad, json_pack("{s:s, s:s}", "source", src[i].label, "error", err.msg));
        }
    }
    if (!any) {
        if (json_array_size(bad) == nsrc)
            rc = gs_rc_exit_code(GS_EIO);
        else {
            char span[32];
            if (since >= 86400)
                snprintf(span, sizeof span, "%.3g days", since / 86400);
            else if (since >= 3600)
                snprintf(span, sizeof span, "%.3g hours", since / 3600);
            else
                snprintf(span, sizeof span, "%.3g minutes", since / 60);
            fprintf(stderr,
                    "gpuscope jobstats: no agent saw job '%s' in the last %s (%zu asked); the "
                    "agents account jobs by the Slurm job id, NAMESPACE/POD or the gpuscope run "
                    "id of the GPU's processes\n",
                    job, span, nsrc);
            rc = gs_rc_exit_code(GS_ENOTFOUND);
        }
        json_decref(sum);
        goto out;
    }
    add_totals(sum);
    notes = gs_jobstats_notes(sum);
    json_object_set_new(sum, "notes", notes ? notes : json_array());
    if (json) {
        char *s = json_dumps(sum, JSON_INDENT(1) | JSON_REAL_PRECISION(15));
        if (s) {
            puts(s);
            free(s);
        } else {
            rc = gs_rc_exit_code(GS_ENOMEM);
        }
    } else {
        struct gs_tbuf b;
        gs_tbuf_init(&b, gs_term_use_color(GS_COLOR_AUTO, STDOUT_FILENO));
        print_summary(&b, sum);
        if (gs_tbuf_status(&b) == GS_OK)
            fputs(gs_tbuf_str(&b), stdout);
        else
            rc = gs_rc_exit_code(gs_tbuf_status(&b));
        gs_tbuf_free(&b);
    }
    json_decref(sum);
    if (fflush(stdout) != 0)
        rc = gs_rc_exit_code(GS_EIO);
out:
    for (size_t i = 0; i < nsrc; i++)
        gs_http_close(src[i].http);
    free(src);
    return rc;
}
