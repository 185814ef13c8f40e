/*
 * `gpuscope top`'s preferences file (top.h, docs/top.md PREFERENCES): top.conf's key = value
 * lines parsed over defaults, the first bad line named as PATH:LINE, and the file's text
 * written back when top quits. No I/O here: fuzz/fuzz_top_conf.c feeds it any bytes.
 */
#include "top/top.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *const top_col_names[TOP_C__N] = {"gpu", "pid", "user",        "job",  "gpu_memory",
                                             "sm",  "cpu", "host_memory", "time", "command"};

/* ---- preferences ---- */

static const char *const graph_names[TOP_G__N] = {"utilization", "memory", "power"};

static char *trim(char *s)
{
    char *e;

    while (isspace((unsigned char)*s))
        s++;
    e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

static int parse_bool(const char *v, int *out)
{
    if (!strcmp(v, "1") || !strcasecmp(v, "yes") || !strcasecmp(v, "true") || !strcasecmp(v, "on"))
        *out = 1;
    else if (!strcmp(v, "0") || !strcasecmp(v, "no") || !strcasecmp(v, "false") ||
             !strcasecmp(v, "off"))
        *out = 0;
    else
        return -1;
    return 0;
}

void top_prefs_parse(struct top_prefs *p, const char *path, const char *text, char *warn,
                     size_t wlen)
{
    char *copy = strdup(text ? text : ""), *line, *save = NULL, *cur;
    unsigned ln = 0;

    if (!copy)
        return;
    cur = copy;
    while ((line = strsep(&cur, "\n")) != NULL) {
        char *eq, *k, *v, bad[160] = "";
        ln++;
        (void)save;
        k = trim(line);
        if (!*k || *k == '#')
            continue;
        eq = strchr(k, '=');
        if (!eq) {
            snprintf(bad, sizeof bad, "expected key = value");
        } else {
            *eq = '\0';
            k = trim(k);
            v = trim(eq + 1);
            if (!strcmp(k, "graph")) {
                int i;
                for (i = 0; i < TOP_G__N && strcmp(v, graph_names[i]); i++)
                    ;
                if (i < TOP_G__N)
                    p->graph = i;
                else
                    snprintf(bad, sizeof bad, "graph: '%.40s' is not utilization, memory or power",
                             v);
            } else if (!strcmp(k, "sort")) {
                int i;
                for (i = 0; i < TOP_C__N && strcmp(v, top_col_names[i]); i++)
                    ;
                if (i < TOP_C__N)
                    p->sort = i;
                else
                    snprintf(bad, sizeof bad, "sort: unknown column '%.40s'", v);
            } else if (!strcmp(k, "reverse") || !strcmp(k, "tree") || !strcmp(k, "mouse") ||
                       !strcmp(k, "runs_panel")) {
                int b;
                if (parse_bool(v, &b) != 0)
                    snprintf(bad, sizeof bad, "%s: '%.40s' is not yes or no", k, v);
                else if (!strcmp(k, "reverse"))
                    p->reverse = b;
                else if (!strcmp(k, "tree"))
                    p->tree = b;
                else if (!strcmp(k, "mouse"))
                    p->mouse = b;
                else
                    p->runs_panel = b;
            } else if (!strcmp(k, "interval")) {
                char *end;
                double d = strtod(v, &end);
                if (end == v || *end || !(d >= 0.1 && d <= 3600))
                    snprintf(bad, sizeof bad, "interval: '%.40s' is not seconds in 0.1..3600", v);
                else
                    p->interval_s = d;
            } else {
                snprintf(bad, sizeof bad, "unknown key '%.40s'", k);
            }
        }
        if (bad[0] && warn && !warn[0])
            snprintf(warn, wlen, "%s:%u: %s (ignored)", path, ln, bad);
    }
    free(copy);
}

int top_prefs_format(const struct top_prefs *p, char *out, size_t len)
{
    int n = snprintf(out, len,
                     "# gpuscope top preferences (docs/top.md); written when top quits\n"
                     "graph = %s\nsort = %s\nreverse = %s\ntree = %s\nruns_panel = %s\n"
                     "mouse = %s\ninterval = %g\n",
                     graph_names[p->graph], top_col_names[p->sort], p->reverse ? "yes" : "no",
                     p->tree ? "yes" : "no", p->runs_panel ? "yes" : "no", p->mouse ? "yes" : "no",
                     p->interval_s);
    return n > 0 && (size_t)n < len ? 0 : -1;
}
