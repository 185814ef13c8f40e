/*
 * Options of the quick check: the one option table, its parser (short clusters "-cup",
 * "-i2", "--name=value", "--name value"), the --help text generated from the table, and the
 * --id filter (GPU indexes, UUIDs or PCI bus ids), parsed at option time so a typo is a usage
 * error and matched against each snapshot. Pure: no I/O besides gs_quick_usage's FILE.
 */
#include "cli/quick/quick.h"

#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/parse.h"
#include "gpuscope/gs_err.h"

/* ---- the option table ---- */

enum quick_opt_id {
    QO_INTERVAL,
    QO_JSON,
    QO_COLOR,
    QO_NO_COLOR,
    QO_ALL,
    QO_CMD,
    QO_USER,
    QO_PID,
    QO_POWER,
    QO_FAN,
    QO_CODEC,
    QO_FULL_CMD,
    QO_CONTAINER,
    QO_ID,
    QO_NO_HEADER,
    QO_NO_PROCS,
    QO_NO_AGENT,
    QO_HELP,
};

enum quick_arg { QA_NONE, QA_REQUIRED, QA_OPT_NUMBER };

struct quick_option {
    enum quick_opt_id id;
    char short_name; /* 0: long only */
    const char *long_name;
    enum quick_arg arg;
    const char *arg_name;
    const char *help; /* NULL: an alias, left out of --help */
};

static const struct quick_option quick_options[] = {
    {QO_INTERVAL, 'i', "interval", QA_OPT_NUMBER, "[SEC]",
     "watch mode: redraw in place every SEC seconds (0.1-60, default 1)"},
    {QO_INTERVAL, 0, "watch", QA_OPT_NUMBER, "[SEC]", NULL},
    {QO_JSON, 0, "json", QA_NONE, NULL,
     "print one JSON document (with -i: one compact document per line)"},
    {QO_COLOR, 0, "color", QA_NONE, NULL, "colour even when stdout is not a terminal"},
    {QO_NO_COLOR, 0, "no-color", QA_NONE, NULL, "never colour (so does a non-empty NO_COLOR)"},
    {QO_ALL, 'a', "show-all", QA_NONE, NULL,
     "all below, plus pstate, clocks, PCIe link vs max, throughput, ECC, Xid"},
    {QO_CMD, 'c', "show-cmd", QA_NONE, NULL, "process: show the name"},
    {QO_USER, 'u', "show-user", QA_NONE, NULL, "process: show the owner"},
    {QO_PID, 'p', "show-pid", QA_NONE, NULL,
     "process: show the PID (without -c/-u/-p all three are shown)"},
    {QO_POWER, 'P', "show-power", QA_NONE, NULL, "show power draw / enforced limit in W"},
    {QO_FAN, 'F', "show-fan", QA_NONE, NULL, "show fan speed"},
    {QO_CODEC, 'e', "show-codec", QA_NONE, NULL, "show encoder and decoder utilization"},
    {QO_FULL_CMD, 'f', "show-full-cmd", QA_NONE, NULL,
     "a line per process: PID, CPU, RSS, user and full command line"},
    {QO_CONTAINER, 0, "show-container", QA_NONE, NULL,
     "process: container id, Kubernetes pod, Slurm job"},
    {QO_ID, 0, "id", QA_REQUIRED, "LIST",
     "only these GPUs: indexes, UUIDs or PCI bus ids, comma separated"},
    {QO_NO_HEADER, 0, "no-header", QA_NONE, NULL, "leave out the hostname/time/driver line"},
    {QO_NO_PROCS, 0, "no-processes", QA_NONE, NULL, "leave out processes (faster)"},
    {QO_NO_AGENT, 0, "no-agent", QA_NONE, NULL,
     "read NVML directly even when the local agent's socket answers"},
    {QO_HELP, 'h', "help", QA_NONE, NULL, "show this help"},
};

#define N_OPTIONS (sizeof quick_options / sizeof quick_options[0])

void gs_quick_usage(FILE *out)
{
    fprintf(out, "usage: gpuscope [OPTIONS]\n"
                 "       gpuscope COMMAND [OPTIONS]   (gpuscope help: the commands)\n\n"
                 "Quick check: one line per GPU with temperature, utilization, memory and the\n"
                 "processes using it, coloured by load and temperature.\n\noptions:\n");
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const struct quick_option *q = &quick_options[i];
        char left[64];
        int n;

        if (!q->help)
            continue;
        if (q->short_name)
            n = snprintf(left, sizeof left, "-%c, --%s", q->short_name, q->long_name);
        else
            n = snprintf(left, sizeof left, "    --%s", q->long_name);
        if (q->arg_name && n > 0 && (size_t)n < sizeof left)
            snprintf(left + n, sizeof left - (size_t)n, " %s", q->arg_name);
        fprintf(out, "  %-26s %s\n", left, q->help);
    }
    fprintf(out, "      --version              print the version and exit\n"
                 "\nenvironment: NO_COLOR, GPUSCOPE_NVML_LIBRARY (see docs/gpuscope.md)\n");
}

static const struct quick_option *find_long(const char *name, size_t len)
{
    for (size_t i = 0; i < N_OPTIONS; i++)
        if (strlen(quick_options[i].long_name) == len &&
            strncmp(quick_options[i].long_name, name, len) == 0)
            return &quick_options[i];
    return NULL;
}

static const struct quick_option *find_short(char c)
{
    for (size_t i = 0; i < N_OPTIONS; i++)
        if (quick_options[i].short_name == c)
            return &quick_options[i];
    return NULL;
}

static int parse_interval(struct gs_quick_opts *o, const char *v, struct gs_err *err)
{
    double d;

    if (!v) {
        o->interval_s = 1.0;
        return GS_OK;
    }
    if (gs_parse_double(v, &d) != 0)
        return gs_err_set(err, GS_EUSAGE, "gpuscope: --interval: '%s' is not a number of seconds",
                          v);
    if (d < GS_QUICK_INTERVAL_MIN || d > GS_QUICK_INTERVAL_MAX)
        return gs_err_set(err, GS_EUSAGE, "gpuscope: --interval: %s is out of range %g..%g", v,
                          GS_QUICK_INTERVAL_MIN, GS_QUICK_INTERVAL_MAX);
    o->interval_s = d;
    return GS_OK;
}

/* One hex number at *s that fits in unsigned, followed by stop (or the end when stop is '\0');
 * moves *s past the stop. Digits only: no blanks, sign or "0x", which sscanf's %x would take,
 * and no silent wrap of a value too large (sscanf turned 100000000:17:00.0 into domain 0). */
static int hex_field(const char **s, char stop, unsigned *out)
{
    const char *p = *s;
    unsigned long long v = 0;

    if (!isxdigit((unsigned char)*p))
        return 0;
    for (; isxdigit((unsigned char)*p); p++) {
        int c = tolower((unsigned char)*p);
        v = v * 16 + (unsigned)(c <= '9' ? c - '0' : c - 'a' + 10);
        if (v > UINT_MAX)
            return 0;
    }
    if (*p != stop)
        return 0;
    *s = stop ? p + 1 : p;
    *out = (unsigned)v;
    return 1;
}

/* Parses "00000000:17:00.0", "0000:17:00.0" or "17:00.0" (hex numbers). */
static int parse_bus_id(const char *s, unsigned *dom, unsigned *bus, unsigned *dev, unsigned *fn)
{
    const char *p = s;

    if (hex_field(&p, ':', dom) && hex_field(&p, ':', bus) && hex_field(&p, '.', dev) &&
        hex_field(&p, '\0', fn))
        return 1;
    p = s;
    *dom = 0;
    return hex_field(&p, ':', bus) && hex_field(&p, '.', dev) && hex_field(&p, '\0', fn);
}

static int parse_one_id(struct gs_quick_id *id, const char *tok, size_t len, const char *text,
                        struct gs_err *err)
{
    char buf[GS_STR_LEN];
    size_t i;

    if (len == 0 || len >= sizeof buf)
        return gs_err_set(err, GS_EUSAGE, "gpuscope: --id: bad entry in '%s'", text);
    memcpy(buf, tok, len);
    buf[len] = '\0';
    id->text = text;
    for (i = 0; i < len && buf[i] >= '0' && buf[i] <= '9'; i++)
        ;
    if (i == len && len < 7) {
        id->kind = GS_QID_INDEX;
        id->index = (unsigned)strtoul(buf, NULL, 10);
        return GS_OK;
    }
    if (strncasecmp(buf, "GPU-", 4) == 0 || strncasecmp(buf, "MIG-", 4) == 0) {
        id->kind = GS_QID_UUID;
        memcpy(id->uuid, buf, len + 1);
        return GS_OK;
    }
    if (parse_bus_id(buf, &id->domain, &id->bus, &id->device, &id->function)) {
        id->kind = GS_QID_BUS;
        return GS_OK;
    }
    return gs_err_set(err, GS_EUSAGE,
                      "gpuscope: --id: '%s' is not a GPU index, UUID (GPU-...) or PCI bus id", buf);
}

static int parse_ids(struct gs_quick_opts *o, const char *list, struct gs_err *err)
{
    const char *p = list;

    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        int rc;

        if (o->n_ids == GS_QUICK_IDS_MAX)
            return gs_err_set(err, GS_EUSAGE, "gpuscope: --id: more than %d GPUs",
                              GS_QUICK_IDS_MAX);
        rc = parse_one_id(&o->ids[o->n_ids], p, len, list, err);
        if (rc != GS_OK)
            return rc;
        o->n_ids++;
        if (!comma)
            return GS_OK;
        p = comma + 1;
    }
}

static int apply_option(struct gs_quick_opts *o, const struct quick_option *q, const char *v,
                        struct gs_err *err)
{
    switch (q->id) {
    case QO_INTERVAL:
        return parse_interval(o, v, err);
    case QO_JSON:
        o->json = 1;
        break;
    case QO_COLOR:
        o->color = GS_COLOR_ALWAYS;
        break;
    case QO_NO_COLOR:
        o->color = GS_COLOR_NEVER;
        break;
    case QO_ALL:
        o->show |= GS_QS_ALL;
        break;
    case QO_CMD:
        o->show |= GS_QS_CMD;
        break;
    case QO_USER:
        o->show |= GS_QS_USER;
        break;
    case QO_PID:
        o->show |= GS_QS_PID;
        break;
    case QO_POWER:
        o->show |= GS_QS_POWER;
        break;
    case QO_FAN:
        o->show |= GS_QS_FAN;
        break;
    case QO_CODEC:
        o->show |= GS_QS_CODEC;
        break;
    case QO_FULL_CMD:
        o->show |= GS_QS_FULL_CMD;
        break;
    case QO_CONTAINER:
        o->show |= GS_QS_CONTAINER;
        break;
    case QO_ID:
        return parse_ids(o, v, err);
    case QO_NO_HEADER:
        o->no_header = 1;
        break;
    case QO_NO_PROCS:
        o->no_procs = 1;
        break;
    case QO_NO_AGENT:
        o->no_agent = 1;
        break;
    case QO_HELP:
        o->help = 1;
        break;
    }
    return GS_OK;
}

/* "--name", "--name=value", "--name value". *i advances past a consumed value. */
static int parse_long(struct gs_quick_opts *o, int argc, char **argv, int *i, struct gs_err *err)
{
    const char *a = argv[*i] + 2;
    const char *eq = strchr(a, '=');
    const struct quick_option *q = find_long(a, eq ? (size_t)(eq - a) : strlen(a));
    const char *v = eq ? eq + 1 : NULL;

    if (!q)
        return gs_err_set(err, GS_EUSAGE, "gpuscope: unknown option '%s' (see gpuscope --help)",
                          argv[*i]);
    if (q->arg == QA_NONE && eq)
        return gs_err_set(err, GS_EUSAGE, "gpuscope: --%s takes no value", q->long_name);
    if (!eq && q->arg == QA_REQUIRED) {
        if (*i + 1 >= argc)
            return gs_err_set(err, GS_EUSAGE, "gpuscope: --%s needs a value (%s)", q->long_name,
                              q->arg_name);
        v = argv[++*i];
    } else if (!eq && q->arg == QA_OPT_NUMBER && *i + 1 < argc &&
               gs_parse_is_number(argv[*i + 1])) {
        v = argv[++*i];
    }
    return apply_option(o, q, v, err);
}

/* "-cup", "-i2", "-i 2", "--id" never has a short form. */
static int parse_short(struct gs_quick_opts *o, int argc, char **argv, int *i, struct gs_err *err)
{
    const char *a = argv[*i];

    for (size_t k = 1; a[k]; k++) {
        const struct quick_option *q = find_short(a[k]);
        const char *v = NULL;

        if (!q)
            return gs_err_set(err, GS_EUSAGE,
                              "gpuscope: unknown option '-%c' (see gpuscope --help)", a[k]);
        if (q->arg != QA_NONE) {
            if (a[k + 1])
                v = a + k + 1;
            else if (*i + 1 < argc && (q->arg == QA_REQUIRED || gs_parse_is_number(argv[*i + 1])))
                v = argv[++*i];
            else if (q->arg == QA_REQUIRED)
                return gs_err_set(err, GS_EUSAGE, "gpuscope: -%c needs a value (%s)", a[k],
                                  q->arg_name);
            return apply_option(o, q, v, err);
        }
        int rc = apply_option(o, q, NULL, err);
        if (rc != GS_OK)
            return rc;
    }
    return GS_OK;
}

int gs_quick_parse(struct gs_quick_opts *o, int argc, char **argv, struct gs_err *err)
{
    memset(o, 0, sizeof *o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int rc;

        if (strcmp(a, "--") == 0) {
            if (i + 1 < argc)
                return gs_err_set(err, GS_EUSAGE, "gpuscope: unexpected argument '%s'",
                                  argv[i + 1]);
            break;
        }
        if (a[0] == '-' && a[1] == '-')
            rc = parse_long(o, argc, argv, &i, err);
        else if (a[0] == '-' && a[1])
            rc = parse_short(o, argc, argv, &i, err);
        else
            rc = gs_err_set(err, GS_EUSAGE,
                            "gpuscope: unexpected argument '%s' (commands: gpuscope help)", a);
        if (rc != GS_OK)
            return rc;
    }
    return GS_OK;
}

/* ---- the --id filter ---- */

static int bus_matches(const struct gs_quick_id *id, const struct gs_gpu *g)
{
    unsigned dom, bus, dev, fn;

    if (!gs_gpu_has_text(g, GS_T_PCI_BUS_ID) ||
        !parse_bus_id(g->text[GS_T_PCI_BUS_ID], &dom, &bus, &dev, &fn))
        return 0;
    return dom == id->domain && bus == id->bus && dev == id->device && fn == id->function;
}

static int id_matches(const struct gs_quick_id *id, const struct gs_gpu *g)
{
    switch (id->kind) {
    case GS_QID_INDEX:
        return g->index == id->index;
    case GS_QID_UUID:
        if (gs_gpu_has_text(g, GS_T_UUID) && strcasecmp(g->text[GS_T_UUID], id->uuid) == 0)
            return 1;
        for (unsigned m = 0; m < g->n_mig && m < GS_MIG_MAX; m++)
            if (strcasecmp(g->mig[m].uuid, id->uuid) == 0)
                return 1;
        return 0;
    case GS_QID_BUS:
        return bus_matches(id, g);
    }
    return 0;
}

int gs_quick_selected(const struct gs_quick_opts *o, const struct gs_gpu *g)
{
    if (o->n_ids == 0)
        return 1;
    for (unsigned i = 0; i < o->n_ids; i++)
        if (id_matches(&o->ids[i], g))
            return 1;
    return 0;
}

int gs_quick_check_ids(const struct gs_quick_opts *o, const struct gs_snapshot *s,
                       struct gs_err *err)
{
    for (unsigned i = 0; i < o->n_ids; i++) {
        unsigned g;
        for (g = 0; g < s->n_gpus; g++)
            if (id_matches(&o->ids[i], &s->gpus[g]))
                break;
        if (g == s->n_gpus) {
            const struct gs_quick_id *id = &o->ids[i];
            if (id->kind == GS_QID_INDEX)
                return gs_err_set(err, GS_ENOGPU, "no GPU with index %u (--id %s; %u GPUs)",
                                  id->index, id->text, s->n_gpus);
            return gs_err_set(err, GS_ENOGPU, "no GPU matches --id %s", id->text);
        }
    }
    return GS_OK;
}
