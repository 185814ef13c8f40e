/*
 * The agent as the front ends' data source (agent_client.h): the socket to try, a small
 * HTTP/1.0 GET over it, and the snapshot document turned back into a struct gs_snapshot, the
 * inverse of cli/quick_json.c (whose field names and units it follows; a change there needs
 * one here, and the round-trip test in tests/unit/test_policy.c says so).
 */
#include "cli/agent_client.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cli/quick.h"
#include "gpuscope/gs_err.h"

#define NO_INSTANCE 0xFFFFFFFFu
#define BODY_MAX (64u << 20)

int gs_agent_client_socket(char *out, size_t len)
{
    const char *env = getenv("GPUSCOPE_HTTP_SOCKET");
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    struct stat st;

    if (env) {
        if (!env[0] || strcmp(env, "off") == 0)
            return 0;
        snprintf(out, len, "%s", env);
        return 1;
    }
    if (stat("/run/gpuscope/agent.sock", &st) == 0 && S_ISSOCK(st.st_mode)) {
        snprintf(out, len, "/run/gpuscope/agent.sock");
        return 1;
    }
    if (xdg && xdg[0] == '/') {
        snprintf(out, len, "%s/gpuscope/agent.sock", xdg);
        return 1;
    }
    return 0;
}

/* Waits until fd is ready for ev; 0 on time, -1 on a timeout or an error. */
static int wait_fd(int fd, short ev, int timeout_ms)
{
    struct pollfd p = {.fd = fd, .events = ev};
    int n;

    do
        n = poll(&p, 1, timeout_ms);
    while (n < 0 && errno == EINTR);
    return n == 1 ? 0 : -1;
}

int gs_agent_client_get(const char *sock, const char *path, int timeout_ms, char **body,
                        size_t *body_len, struct gs_err *err)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    char req[512], *buf = NULL, *hdr_end;
    size_t len = 0, cap = 0, off = 0, n;
    int fd, status = 0;

    *body = NULL;
    if (strlen(sock) >= sizeof sun.sun_path)
        return gs_err_set(err, GS_EIO, "agent: socket path too long");
    memcpy(sun.sun_path, sock, strlen(sock));
    n = (size_t)snprintf(req, sizeof req,
                         "GET %s HTTP/1.0\r\nHost: localhost\r\nConnection: close\r\n\r\n", path);
    if (n >= sizeof req)
        return gs_err_set(err, GS_EIO, "agent: path too long");
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return gs_err_set(err, GS_EIO, "agent: socket: %s", strerror(errno));
    /* A unix socket's connect does not wait for the server to accept: it fails at once
     * (ENOENT, ECONNREFUSED) or succeeds into the backlog. */
    if (connect(fd, (const struct sockaddr *)&sun, sizeof sun) != 0) {
        int e = errno;
        close(fd);
        return gs_err_set(err, GS_EIO, "agent: %s: %s", sock, strerror(e));
    }
    while (off < n) {
        ssize_t w;
        if (wait_fd(fd, POLLOUT, timeout_ms) != 0)
            goto timeout;
        w = send(fd, req + off, n - off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            goto io;
        off += (size_t)w;
    }
    for (;;) {
        ssize_t r;
        if (cap - len < 4096) {
            char *nb;
            if (cap >= BODY_MAX || !(nb = realloc(buf, cap ? cap * 2 : 65536)))
                goto nomem;
            buf = nb;
            cap = cap ? cap * 2 : 65536;
        }
        if (wait_fd(fd, POLLIN, timeout_ms) != 0)
            goto timeout;
        r = recv(fd, buf + len, cap - len - 1, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            goto io;
        if (r == 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    buf[len] = '\0';
    hdr_end = strstr(buf, "\r\n\r\n");
    if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1 || !hdr_end) {
        free(buf);
        return gs_err_set(err, GS_EIO, "agent: %s: not an HTTP answer", sock);
    }
    if (status != 200) {
        free(buf);
        return gs_err_set(err, GS_EIO, "agent: %s: %s answered %d", sock, path, status);
    }
    hdr_end += 4;
    *body_len = len - (size_t)(hdr_end - buf);
    memmove(buf, hdr_end, *body_len + 1);
    *body = buf;
    return GS_OK;
timeout:
    close(fd);
    free(buf);
    return gs_err_set(err, GS_EIO, "agent: %s: no answer within %d ms", sock, timeout_ms);
io:
    {
        int e = errno;
        close(fd);
        free(buf);
        return gs_err_set(err, GS_EIO, "agent: %s: %s", sock, strerror(e));
    }
nomem:
    close(fd);
    free(buf);
    return gs_err_set(err, GS_ENOMEM, "agent: answer too large or out of memory");
}

/* ---- the snapshot document back into a snapshot (keys: quick_json.c's tables) ---- */

static void copy_str(char *dst, size_t len, const json_t *v)
{
    snprintf(dst, len, "%s", json_is_string(v) ? json_string_value(v) : "");
}

static uint8_t status_of(const json_t *unavail, const char *name)
{
    const char *why = json_string_value(json_object_get(unavail, name));

    if (!why)
        return GS_ST_NA;
    if (strcmp(why, "no_permission") == 0)
        return GS_ST_NOPERM;
    if (strcmp(why, "gpu_lost") == 0)
        return GS_ST_LOST;
    return GS_ST_ERROR;
}

static void gpu_from_json(struct gs_gpu *g, const json_t *o)
{
    const json_t *unavail = json_object_get(o, "unavailable");
    const json_t *ecc = json_object_get(o, "ecc_errors_by_location");
    const json_t *migs = json_object_get(o, "mig_devices"), *m;
    static const char *const kinds[2][2] = {
        {"corrected_volatile", "corrected_aggregate"},
        {"uncorrected_volatile", "uncorrected_aggregate"},
    };
    size_t i;

    g->index = (unsigned)json_integer_value(json_object_get(o, "index"));
    g->lost = json_is_true(json_object_get(o, "lost"));
    for (int t = 0; t < GS_T__COUNT; t++) {
        const json_t *v = json_object_get(o, gs_quick_json_text_keys[t]);
        if (json_is_string(v)) {
            copy_str(g->text[t], GS_STR_LEN, v);
            g->tst[t] = GS_ST_OK;
        }
    }
    for (int k = 0; k < GS_M__COUNT; k++) {
        const char *name = gs_metric_name((enum gs_metric)k);
        const json_t *v = json_object_get(o, name);
        if (json_is_number(v))
            gs_gpu_set(g, (enum gs_metric)k, json_number_value(v));
        else
            g->st[k] = status_of(unavail, name);
    }
    for (int t = 0; t < 2; t++)
        for (int c = 0; c < 2; c++) {
            const json_t *locs = json_object_get(ecc, kinds[t][c]);
            for (int l = 0; l < GS_ECC_LOCATIONS; l++) {
                const json_t *v = json_object_get(locs, gs_quick_json_ecc_keys[l]);
                if (json_is_integer(v)) {
                    g->ecc_loc_st[t][c][l] = GS_ST_OK;
                    g->ecc_loc[t][c][l] = (uint64_t)json_integer_value(v);
                }
            }
        }
    json_array_foreach(migs, i, m) {
        struct gs_mig *d;
        const json_t *total = json_object_get(m, "memory_total");
        if (g->n_mig >= GS_MIG_MAX)
            break;
        d = &g->mig[g->n_mig++];
        d->index = (unsigned)json_integer_value(json_object_get(m, "index"));
        d->gi_id = (unsigned)json_integer_value(json_object_get(m, "gi_id"));
        d->ci_id = (unsigned)json_integer_value(json_object_get(m, "ci_id"));
        copy_str(d->uuid, sizeof d->uuid, json_object_get(m, "uuid"));
        copy_str(d->name, sizeof d->name, json_object_get(m, "name"));
        if (json_is_integer(total)) {
            d->mem_st = GS_ST_OK;
            d->mem_total_bytes = (uint64_t)json_integer_value(total);
            d->mem_used_bytes = (uint64_t)json_integer_value(json_object_get(m, "memory_used"));
            d->mem_free_bytes = (uint64_t)json_integer_value(json_object_get(m, "memory_free"));
        }
    }
}

static unsigned job_kind(const char *runtime)
{
    static const struct {
        const char *name;
        unsigned kind;
    } rt[] = {{"docker", GS_JOB_DOCKER},
              {"containerd", GS_JOB_CONTAINERD},
              {"cri-o", GS_JOB_CRIO},
              {"podman", GS_JOB_PODMAN}};

    for (size_t i = 0; runtime && i < sizeof rt / sizeof rt[0]; i++)
        if (strcmp(runtime, rt[i].name) == 0)
            return rt[i].kind;
    return GS_JOB_CONTAINER;
}

static void proc_from_json(struct gs_proc *p, const json_t *o, unsigned gpu)
{
    const json_t *types = json_object_get(o, "type"), *t, *v;
    const json_t *ctr = json_object_get(o, "container");
    size_t i;

    memset(p, 0, sizeof *p);
    p->pid = (unsigned)json_integer_value(json_object_get(o, "pid"));
    p->gpu = gpu;
    json_array_foreach(types, i, t) {
        const char *s = json_string_value(t);
        if (!s)
            continue;
        p->type |= strcmp(s, "compute") == 0    ? GS_PROC_COMPUTE
                   : strcmp(s, "graphics") == 0 ? GS_PROC_GRAPHICS
                   : strcmp(s, "mps") == 0      ? GS_PROC_MPS
                                                : 0u;
    }
    v = json_object_get(o, "gi_id");
    p->gi_id = json_is_integer(v) ? (unsigned)json_integer_value(v) : NO_INSTANCE;
    v = json_object_get(o, "ci_id");
    p->ci_id = json_is_integer(v) ? (unsigned)json_integer_value(v) : NO_INSTANCE;
    v = json_object_get(o, "gpu_memory");
    if (json_is_integer(v)) {
        p->mem_st = GS_ST_OK;
        p->gpu_mem_bytes = (uint64_t)json_integer_value(v);
    }
    if (json_is_number(json_object_get(o, "utilization_sm"))) {
        p->util_st = GS_ST_OK;
        p->sm_util = json_number_value(json_object_get(o, "utilization_sm"));
        p->mem_util = json_number_value(json_object_get(o, "utilization_memory"));
        p->enc_util = json_number_value(json_object_get(o, "utilization_encoder"));
        p->dec_util = json_number_value(json_object_get(o, "utilization_decoder"));
    }
    copy_str(p->name, sizeof p->name, json_object_get(o, "name"));
    v = json_object_get(o, "uid");
    if (json_is_integer(v)) { /* quick_json writes host details only when host_st is OK */
        p->host_st = GS_ST_OK;
        p->uid = (uint32_t)json_integer_value(v);
        copy_str(p->cmdline, sizeof p->cmdline, json_object_get(o, "command"));
        copy_str(p->user, sizeof p->user, json_object_get(o, "user"));
        p->rss_bytes = (uint64_t)json_integer_value(json_object_get(o, "memory_rss"));
        p->start_time = json_number_value(json_object_get(o, "start_time"));
    }
    v = json_object_get(o, "cpu_ratio");
    if (json_is_number(v)) {
        p->cpu_st = GS_ST_OK;
        p->cpu_ratio = json_number_value(v);
    }
    if (json_is_object(ctr) && json_is_string(json_object_get(ctr, "id"))) {
        copy_str(p->container_id, sizeof p->container_id, json_object_get(ctr, "id"));
        p->job_kind = (uint8_t)job_kind(json_string_value(json_object_get(ctr, "runtime")));
    }
    copy_str(p->pod_uid, sizeof p->pod_uid, json_object_get(o, "pod_uid"));
    copy_str(p->slurm_job, sizeof p->slurm_job, json_object_get(o, "slurm_job"));
    if (!p->container_id[0] && p->slurm_job[0])
        p->job_kind = GS_JOB_SLURM;
}

int gs_snapshot_from_json(const json_t *doc, int hidden_as_procs, struct gs_snapshot **out,
                          struct gs_err *err)
{
    const json_t *gpus = json_object_get(doc, "gpus"), *g, *v;
    struct gs_snapshot *s = NULL;
    unsigned n_procs = 0;
    size_t i, j;
    int rc;

    if (!json_is_array(gpus))
        return gs_err_set(err, GS_EPARSE, "agent: the snapshot has no gpus");
    json_array_foreach(gpus, i, g)
        n_procs += (unsigned)json_array_size(json_object_get(g, "processes")) + 1;
    rc = gs_snapshot_new(&s, (unsigned)json_array_size(gpus), n_procs ? n_procs : 1, err);
    if (rc != GS_OK)
        return rc;
    copy_str(s->sys.hostname, sizeof s->sys.hostname, json_object_get(doc, "hostname"));
    if (json_is_string(v = json_object_get(doc, "driver_version"))) {
        copy_str(s->sys.driver_version, sizeof s->sys.driver_version, v);
        s->sys.driver_st = GS_ST_OK;
    }
    if (json_is_string(v = json_object_get(doc, "nvml_version"))) {
        copy_str(s->sys.nvml_version, sizeof s->sys.nvml_version, v);
        s->sys.nvml_st = GS_ST_OK;
    }
    if (json_is_string(v = json_object_get(doc, "cuda_version"))) {
        int major = 0, minor = 0;
        if (sscanf(json_string_value(v), "%d.%d", &major, &minor) == 2) {
            s->sys.cuda_version = major * 1000 + minor * 10;
            s->sys.cuda_st = GS_ST_OK;
        }
    }
    s->t_real = json_number_value(json_object_get(doc, "query_time_unix"));
    s->sys.gpu_count = s->n_gpus;
    json_array_foreach(gpus, i, g) {
        const json_t *procs = json_object_get(g, "processes"), *pr;
        const json_t *h = json_object_get(g, "hidden_processes");
        gpu_from_json(&s->gpus[i], g);
        json_array_foreach(procs, j, pr)
            proc_from_json(&s->procs[s->n_procs++], pr, (unsigned)i);
        if (hidden_as_procs && json_integer_value(json_object_get(h, "count")) > 0) {
            struct gs_proc *p = &s->procs[s->n_procs++];
            memset(p, 0, sizeof *p);
            p->gpu = (unsigned)i;
            p->type = GS_PROC_COMPUTE;
            p->gi_id = p->ci_id = NO_INSTANCE;
            snprintf(p->name, sizeof p->name, "%lld hidden",
                     (long long)json_integer_value(json_object_get(h, "count")));
            if (json_is_integer(v = json_object_get(h, "gpu_memory"))) {
                p->mem_st = GS_ST_OK;
                p->gpu_mem_bytes = (uint64_t)json_integer_value(v);
            }
        }
    }
    *out = s;
    return GS_OK;
}

int gs_agent_client_snapshot(const char *sock, int hidden_as_procs, struct gs_snapshot **out,
                             json_t **doc_out, struct gs_err *err)
{
    char *body = NULL;
    size_t len = 0;
    json_t *doc;
    json_error_t je;
    int rc = gs_agent_client_get(sock, "/api/v1/snapshot", GS_AGENT_CLIENT_TIMEOUT_MS, &body,
                                 &len, err);

    if (rc != GS_OK)
        return rc;
    doc = json_loadb(body, len, 0, &je);
    free(body);
    if (!doc)
        return gs_err_set(err, GS_EIO, "agent: %s: bad JSON: %s", sock, je.text);
    rc = gs_snapshot_from_json(doc, hidden_as_procs, out, err);
    if (rc == GS_OK && doc_out)
        *doc_out = doc;
    else
        json_decref(doc);
    return rc;
}
