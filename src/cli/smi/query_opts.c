/*
 * `gpuscope query` command line: the option table, its parser, and the -i/--id GPU matcher.
 *
 * The wording of usage errors follows nvidia-smi where its text is known ("ERROR: Option X is
 * not recognized.", "Invalid combination of input arguments.", "\"--format=\" switch is
 * missing."), with "gpuscope query -h" as the place to look for help. Everything here is pure:
 * query.c prints the messages and picks the exit code.
 */
#include "cli/smi/query_opts.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/parse.h"
#include "cli/smi/query_fields.h"
#include "gpuscope/gs_err.h"

#define HELP_HINT "Please run 'gpuscope query -h' for help."

enum opt_arg {
    ARG_NONE,    /* a flag */
    ARG_REQ,     /* needs a value: --opt=V or --opt V */
    ARG_OPT_NUM, /* value optional; taken from the next word only when it is a number */
};

enum opt_id {
    O_HELP,
    O_QUERY_GPU,
    O_QUERY_APPS,
    O_FORMAT,
    O_LOOP,
    O_LOOP_MS,
    O_ID,
    O_FILE,
    O_HELP_GPU,
    O_HELP_APPS,
    O_NO_AGENT,
};

struct opt {
    const char *shortname; /* NULL when none */
    const char *longname;
    enum opt_arg arg;
    enum opt_id id;
};

static const struct opt options[] = {
    {"-h", "--help", ARG_NONE, O_HELP},
    {NULL, "--query-gpu", ARG_REQ, O_QUERY_GPU},
    {NULL, "--query-compute-apps", ARG_REQ, O_QUERY_APPS},
    {NULL, "--format", ARG_REQ, O_FORMAT},
    {"-l", "--loop", ARG_OPT_NUM, O_LOOP},
    {"-lms", "--loop-ms", ARG_REQ, O_LOOP_MS},
    {"-i", "--id", ARG_REQ, O_ID},
    {"-f", "--filename", ARG_REQ, O_FILE},
    {NULL, "--help-query-gpu", ARG_NONE, O_HELP_GPU},
    {NULL, "--help-query-compute-apps", ARG_NONE, O_HELP_APPS},
    {NULL, "--no-agent", ARG_NONE, O_NO_AGENT},
};

/* Whether word is name, or name=VALUE (then *val points after the '='). */
static int name_matches(const char *word, const char *name, const char **val)
{
    size_t n;

    if (!name)
        return 0;
    n = strlen(name);
    if (strncmp(word, name, n) != 0)
        return 0;
    if (word[n] == '\0')
        return 1;
    if (word[n] == '=') {
        *val = word + n + 1;
        return 1;
    }
    return 0;
}

static const struct opt *find_option(const char *word, const char **val)
{
    *val = NULL;
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++)
        if (name_matches(word, options[i].longname, val) ||
            name_matches(word, options[i].shortname, val))
            return &options[i];
    return NULL;
}

long gs_query_positive(const char *s, long max)
{
    char *end;
    long v;

    if (!s || !gs_parse_is_digits(s))
        return -1;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || *end || v <= 0 || v > max)
        return -1;
    return v;
}

static int parse_format(struct gs_query_opts *o, const char *spec, struct gs_err *err)
{
    int csv = 0;
    const char *p = spec;

    o->flags = 0;
    for (;;) {
        size_t n = strcspn(p, ",");

        if (n == 3 && strncmp(p, "csv", 3) == 0)
            csv = 1;
        else if (n == 8 && strncmp(p, "noheader", 8) == 0)
            o->flags |= GS_QF_NOHEADER;
        else if (n == 7 && strncmp(p, "nounits", 7) == 0)
            o->flags |= GS_QF_NOUNITS;
        else
            return gs_err_set(err, GS_EUSAGE, "\"%.*s\" is not a valid format option. " HELP_HINT,
                              (int)n, p);
        if (p[n] == '\0')
            break;
        p += n + 1;
    }
    if (!csv)
        return gs_err_set(err, GS_EUSAGE, "\"csv\" is a mandatory --format option. " HELP_HINT);
    o->format = spec;
    return GS_OK;
}

static int apply(struct gs_query_opts *o, const struct opt *opt, const char *word, const char *val,
                 struct gs_err *err)
{
    long v;

    switch (opt->id) {
    case O_HELP:
        o->help = 1;
        break;
    case O_HELP_GPU:
        o->help_gpu = 1;
        break;
    case O_HELP_APPS:
        o->help_apps = 1;
        break;
    case O_NO_AGENT:
        o->no_agent = 1;
        break;
    case O_QUERY_GPU:
        o->gpu_fields = val;
        break;
    case O_QUERY_APPS:
        o->app_fields = val;
        break;
    case O_FORMAT:
        return parse_format(o, val, err);
    case O_ID:
        o->ids = val;
        break;
    case O_FILE:
        o->file = val;
        break;
    case O_LOOP:
        if (!val) {
            o->loop_ms = GS_QUERY_DEFAULT_LOOP_MS;
            break;
        }
        v = gs_query_positive(val, GS_QUERY_LOOP_MAX_MS / 1000);
        if (v < 0)
            goto bad_value;
        o->loop_ms = v * 1000;
        break;
    case O_LOOP_MS:
        v = gs_query_positive(val, GS_QUERY_LOOP_MAX_MS);
        if (v < 0)
            goto bad_value;
        o->loop_ms = v;
        break;
    }
    return GS_OK;
bad_value:
    return gs_err_set(err, GS_EUSAGE, "ERROR: Option %s has an invalid value \"%s\". " HELP_HINT,
                      word, val);
}

/* The checks a real query needs once every option is read. */
static int check_query(const struct gs_query_opts *o, struct gs_err *err)
{
    if (o->gpu_fields && o->app_fields)
        return gs_err_set(err, GS_EUSAGE, "Only one --query-* switch can be used at a time.");
    if (!o->gpu_fields && !o->app_fields)
        return gs_err_set(err, GS_EUSAGE, "Invalid combination of input arguments. " HELP_HINT);
    if (!o->format)
        return gs_err_set(err, GS_EUSAGE, "\"--format=\" switch is missing. " HELP_HINT);
    return GS_OK;
}

int gs_query_parse(int argc, char **argv, struct gs_query_opts *o, struct gs_err *err)
{
    memset(o, 0, sizeof *o);
    for (int i = 1; i < argc; i++) {
        const char *word = argv[i];
        const char *val;
        const struct opt *opt = find_option(word, &val);
        int rc;

        if (!opt)
            return gs_err_set(err, GS_EUSAGE, "ERROR: Option %s is not recognized. " HELP_HINT,
                              word);
        if (opt->arg == ARG_NONE && val)
            return gs_err_set(err, GS_EUSAGE, "ERROR: Option %.*s takes no value. " HELP_HINT,
                              (int)(strchr(word, '=') - word), word);
        if (opt->arg == ARG_REQ && !val) {
            if (i + 1 >= argc)
                return gs_err_set(err, GS_EUSAGE,
                                  "ERROR: Option %s is missing its value. " HELP_HINT, word);
            val = argv[++i];
        }
        if (opt->arg == ARG_OPT_NUM && !val && i + 1 < argc && gs_parse_is_digits(argv[i + 1]))
            val = argv[++i];
        rc = apply(o, opt, word, val, err);
        if (rc != GS_OK)
            return rc;
    }
    if (o->help || o->help_gpu || o->help_apps)
        return GS_OK;
    return check_query(o, err);
}

/* --- -i / --id ---------------------------------------------------------------------------- */

struct pci_addr {
    unsigned long domain, bus, device, function;
};

/* One hexadecimal number ending at one of `stops` (or at the end). */
static int hex_part(const char **s, const char *stops, unsigned long *out)
{
    char *end;

    if (!isxdigit((unsigned char)**s))
        return -1;
    errno = 0;
    *out = strtoul(*s, &end, 16);
    if (errno || (*end && !strchr(stops, *end)))
        return -1;
    *s = end;
    return 0;
}

/* NVML's bus id spellings: domain:bus:device.function, domain:bus:device, bus:device.function. */
static int parse_pci(const char *s, struct pci_addr *a)
{
    unsigned long x[3];
    int n = 0;

    memset(a, 0, sizeof *a);
    while (n < 3) {
        if (hex_part(&s, ":.", &x[n]) < 0)
            return -1;
        n++;
        if (*s != ':')
            break;
        s++;
    }
    if (n == 3) {
        a->domain = x[0];
        a->bus = x[1];
        a->device = x[2];
    } else if (n == 2 && *s == '.') {
        a->bus = x[0];
        a->device = x[1];
    } else {
        return -1;
    }
    if (*s == '.') {
        s++;
        if (hex_part(&s, "", &a->function) < 0)
            return -1;
    }
    return *s ? -1 : 0;
}

static int gpu_matches(const struct gs_gpu *g, const char *item)
{
    struct pci_addr want, have;

    if (gs_parse_is_digits(item))
        return strtoul(item, NULL, 10) == g->index;
    if (strncasecmp(item, "GPU-", 4) == 0)
        return gs_gpu_has_text(g, GS_T_UUID) && strcasecmp(item, g->text[GS_T_UUID]) == 0;
    if (parse_pci(item, &want) < 0 || !gs_gpu_has_text(g, GS_T_PCI_BUS_ID) ||
        parse_pci(g->text[GS_T_PCI_BUS_ID], &have) < 0)
        return 0;
    return want.domain == have.domain && want.bus == have.bus && want.device == have.device &&
           want.function == have.function;
}

int gs_query_select(const char *ids, const struct gs_snapshot *snap, unsigned char *sel,
                    struct gs_err *err)
{
    char item[GS_STR_LEN];
    const char *p = ids;
    int count = 0;

    if (!ids) {
        memset(sel, 1, snap->n_gpus);
        return (int)snap->n_gpus;
    }
    memset(sel, 0, snap->n_gpus);
    for (;;) {
        size_t n = strcspn(p, ",");
        int hit = 0;
        size_t b = 0, e = n;

        while (b < e && isspace((unsigned char)p[b]))
            b++;
        while (e > b && isspace((unsigned char)p[e - 1]))
            e--;
        if (e - b >= sizeof item)
            return gs_err_set(err, GS_ENOGPU, "No devices were found");
        memcpy(item, p + b, e - b);
        item[e - b] = '\0';
        for (unsigned i = 0; i < snap->n_gpus; i++)
            if (item[0] && gpu_matches(&snap->gpus[i], item)) {
                count += !sel[i];
                sel[i] = 1;
                hit = 1;
            }
        if (!hit)
            return gs_err_set(err, GS_ENOGPU, "No devices were found");
        if (p[n] == '\0')
            break;
        p += n + 1;
    }
    return count;
}
