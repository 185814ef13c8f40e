/*
 * `gpuscope report RUN`: one training run as a self-contained HTML page (docs/report-html.md):
 * the headline fields, each GPU's utilization, memory, power and temperature over the run
 * with step markers, the phases of every step and their percentiles, the data and
 * communication ratios over time, training curves, the per-rank table, the findings with
 * their evidence, the run's settings, and the stacks and profile sections when the report has
 * them. RUN is a run directory of `gpuscope run` or a run id of the local agent. The page
 * needs no network (uPlot is inside it); `--serve` serves it on loopback with libmicrohttpd.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>

#include "base/dirfile.h"
#include "cli/cli.h"
#include "gpuscope/gs_err.h"
#include "runview/page.h"
#include "runview/rundata.h"

struct report_opts {
    const char *run;
    const char *out; /* -o FILE; "-" stdout */
    int open;        /* --open: print the file's URL */
    int serve;       /* --serve: serve on loopback */
    unsigned port;   /* --port (0: any free one) */
    int data;        /* --data: the data document (JSON) instead of the page */
    int help;
};

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

static void report_usage(FILE *out)
{
    fputs("usage: gpuscope report [-o FILE] [--open] RUN\n"
          "       gpuscope report --serve [--port N] RUN\n"
          "\n"
          "Writes one training run as a self-contained HTML page: headline fields, the GPUs\n"
          "over the run with step markers, step phases, data and communication ratios over\n"
          "time, training curves, per-rank table, findings with evidence, settings, stacks.\n"
          "The page needs no network (its charts library is inside it).\n"
          "\n"
          "RUN is a run directory of `gpuscope run` (metrics_report.json, steps.jsonl,\n"
          "samples.db), its metrics_report.json, or the id of a run the local agent kept\n"
          "(`gpuscope report 16`; /api/v1/runs).\n"
          "\n"
          "options:\n"
          "  -o, --output FILE  where to write (default DIR/report.html for a run directory,\n"
          "                     ./gpuscope-run-ID.html for an agent run; - for stdout)\n"
          "  --open             print the written file's file:// URL on stdout\n"
          "  --serve            serve the page on http://127.0.0.1:PORT/ until Ctrl-C\n"
          "                     (writes no file unless -o is given)\n"
          "  --port N           port for --serve (default: any free port)\n"
          "  --data             write the page's data document (JSON) instead of the page\n"
          "  -h, --help         this help\n"
          "\n"
          "See docs/report-html.md.\n",
          out);
}

static int parse(int argc, char **argv, struct report_opts *o)
{
    memset(o, 0, sizeof *o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            o->help = 1;
        } else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
            if (++i >= argc) {
                fprintf(stderr, "gpuscope report: %s needs a file name\n", a);
                return -1;
            }
            o->out = argv[i];
        } else if (strncmp(a, "--output=", 9) == 0) {
            o->out = a + 9;
        } else if (strcmp(a, "--open") == 0) {
            o->open = 1;
        } else if (strcmp(a, "--serve") == 0) {
            o->serve = 1;
        } else if (strcmp(a, "--data") == 0) {
            o->data = 1;
        } else if (strcmp(a, "--port") == 0 || strncmp(a, "--port=", 7) == 0) {
            const char *v = a[6] == '=' ? a + 7 : (++i < argc ? argv[i] : NULL);
            char *end;
            long p = v ? strtol(v, &end, 10) : -1;
            if (!v || *end || p < 0 || p > 65535) {
                fprintf(stderr, "gpuscope report: --port: '%s' is not a port 0..65535\n",
                        v ? v : "");
                return -1;
            }
            o->port = (unsigned)p;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "gpuscope report: unknown option '%s' (see --help)\n", a);
            return -1;
        } else if (!o->run) {
            o->run = a;
        } else {
            fprintf(stderr,
                    "gpuscope report: one RUN at a time ('%s' too); "
                    "gpuscope compare takes several\n",
                    a);
            return -1;
        }
    }
    if (!o->help && !o->run) {
        fprintf(stderr, "gpuscope report: which run? (a run directory or an agent run id; "
                        "see --help)\n");
        return -1;
    }
    if (o->data && o->serve) {
        fprintf(stderr, "gpuscope report: --data and --serve do not go together\n");
        return -1;
    }
    return 0;
}

/* Writes buf to path whole, or to stdout for "-": a fresh temporary made beside it without
 * following links, renamed into place (base/dirfile.h), so a link planted at path (in another
 * user's run directory) is replaced, never written through. */
static int write_out(const char *path, const char *buf, size_t len, struct gs_err *err)
{
    if (strcmp(path, "-") == 0) {
        if (fwrite(buf, 1, len, stdout) != len || fflush(stdout) != 0)
            return gs_err_set(err, GS_EIO, "stdout: %s", strerror(errno));
        return GS_OK;
    }
    const char *slash = strrchr(path, '/');
    char dir[PATH_MAX];
    struct gs_dirfile df;
    int dirfd, rc;
    if (slash && (size_t)(slash - path) >= sizeof dir)
        return gs_err_set(err, GS_EINVAL, "%s: path too long", path);
    snprintf(dir, sizeof dir, "%.*s", slash ? (slash == path ? 1 : (int)(slash - path)) : 1,
             slash ? path : ".");
    dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0)
        return gs_err_set(err, GS_EIO, "%s: %s", dir, strerror(errno));
    rc = gs_dirfile_begin(&df, dirfd, slash ? slash + 1 : path, 0644, err);
    if (rc == GS_OK) {
        if (fwrite(buf, 1, len, df.f) != len) {
            rc = gs_err_set(err, GS_EIO, "%s: %s", path, strerror(errno));
            gs_dirfile_abort(&df);
        } else {
            rc = gs_dirfile_commit(&df, err);
        }
    }
    close(dirfd);
    return rc;
}

struct served {
    const char *buf;
    size_t len;
    const char *type;
};

static enum MHD_Result serve_cb(void *cls, struct MHD_Connection *c, const char *url,
                                const char *method, const char *version, const char *upload,
                                size_t *upload_len, void **state)
{
    const struct served *s = cls;
    struct MHD_Response *r;
    enum MHD_Result ret;
    unsigned status = MHD_HTTP_OK;
    (void)version;
    (void)upload;
    (void)upload_len;
    (void)state;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        static const char msg[] = "method not allowed\n";
        r = MHD_create_response_from_buffer(sizeof msg - 1, (void *)msg, MHD_RESPMEM_PERSISTENT);
        status = MHD_HTTP_METHOD_NOT_ALLOWED;
    } else if (strcmp(url, "/") != 0 && strcmp(url, "/report.html") != 0) {
        static const char msg[] = "not found: the report is at /\n";
        r = MHD_create_response_from_buffer(sizeof msg - 1, (void *)msg, MHD_RESPMEM_PERSISTENT);
        status = MHD_HTTP_NOT_FOUND;
    } else {
        r = MHD_create_response_from_buffer(s->len, (void *)s->buf, MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(r, "Content-Type", s->type);
    }
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Cache-Control", "no-store");
    ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static int serve(const char *buf, size_t len, unsigned port, struct gs_err *err)
{
    struct served s = {buf, len, "text/html; charset=utf-8"};
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, (uint16_t)port, NULL, NULL, serve_cb,
        &s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_LIMIT, 64u,
        MHD_OPTION_CONNECTION_TIMEOUT, 30u, MHD_OPTION_END);
    if (!d)
        return gs_err_set(err, GS_EIO, "--serve: cannot listen on 127.0.0.1:%u (%s)", port,
                          port ? "in use?" : "no free port?");
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    unsigned p = info ? info->port : port;
    struct sigaction sig;
    memset(&sig, 0, sizeof sig);
    sig.sa_handler = on_signal;
    sigaction(SIGINT, &sig, NULL);
    sigaction(SIGTERM, &sig, NULL);
    printf("http://127.0.0.1:%u/\n", p);
    fflush(stdout);
    fprintf(stderr, "gpuscope report: serving on loopback; Ctrl-C stops\n");
    while (!g_stop)
        pause();
    MHD_stop_daemon(d);
    return GS_OK;
}

/* file://ABS with every byte outside [A-Za-z0-9/._~-] percent-encoded (RFC 8089). */
static void print_file_url(const char *abs)
{
    fputs("file://", stdout);
    for (const unsigned char *p = (const unsigned char *)abs; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            strchr("/._~-", *p))
            putchar(*p);
        else
            printf("%%%02X", *p);
    }
    putchar('\n');
}

int gs_cli_report(int argc, char **argv)
{
    struct report_opts o;
    struct gs_rundata rd;
    struct gs_err err = {0};
    char *buf = NULL, path[PATH_MAX];
    size_t len = 0;
    int rc;

    if (parse(argc, argv, &o) != 0)
        return 2;
    if (o.help) {
        report_usage(stdout);
        return 0;
    }
    rc = gs_rundata_load(o.run, 0, &rd, &err);
    if (rc == GS_OK) {
        const json_t *run = json_object_get(rd.report, "run");
        if (json_is_string(json_object_get(run, "rebuilt_from")))
            fprintf(stderr,
                    "gpuscope report: %s: the run was interrupted (no metrics_report.json): "
                    "report rebuilt from %lld record(s) of steps.jsonl%s\n",
                    rd.origin,
                    (long long)json_integer_value(json_object_get(run, "rebuilt_records")),
                    json_integer_value(json_object_get(run, "rebuilt_lines_skipped"))
                        ? ", damaged lines left out"
                        : "");
    }
    if (rc == GS_OK)
        rc = o.data ? gs_report_page_data(&rd, &buf, &len, &err)
                    : gs_report_page_html(&rd, &buf, &len, &err);
    if (rc != GS_OK) {
        fprintf(stderr, "gpuscope report: %s\n", err.msg);
        gs_rundata_free(&rd);
        return rc == GS_ENOTFOUND || rc == GS_EPARSE ? 1 : 3;
    }
    const char *out = o.out;
    if (!out && !o.serve) {
        const char *ext = o.data ? "json" : "html";
        struct stat sb;
        if (rd.origin && strncmp(rd.origin, "agent run ", 10) == 0) {
            snprintf(path, sizeof path, "gpuscope-run-%s.%s", o.run, ext);
        } else if (stat(rd.origin, &sb) == 0 && S_ISREG(sb.st_mode)) {
            /* a report file: report.html next to it */
            const char *slash = strrchr(rd.origin, '/');
            snprintf(path, sizeof path, "%.*sreport.%s", slash ? (int)(slash - rd.origin + 1) : 0,
                     rd.origin, ext);
        } else {
            snprintf(path, sizeof path, "%s/report.%s", rd.origin, ext);
        }
        out = path;
    }
    if (out && (rc = write_out(out, buf, len, &err)) != GS_OK) {
        fprintf(stderr, "gpuscope report: %s\n", err.msg);
    } else if (out && strcmp(out, "-") != 0) {
        char abs[PATH_MAX];
        if (o.open && realpath(out, abs))
            print_file_url(abs);
        else if (!o.serve)
            fprintf(stderr, "gpuscope report: wrote %s (%zu bytes)\n", out, len);
    }
    if (rc == GS_OK && o.serve && (rc = serve(buf, len, o.port, &err)) != GS_OK)
        fprintf(stderr, "gpuscope report: %s\n", err.msg);
    free(buf);
    gs_rundata_free(&rd);
    return rc == GS_OK ? 0 : 3;
}
