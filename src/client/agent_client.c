/*
 * The agent as the front ends' data source (agent_client.h): the socket to try, a small
 * HTTP/1.0 GET over it, and the snapshot document turned back into a struct gs_snapshot by
 * the snapshot codec (core/snapjson.h).
 */
#include "client/agent_client.h"

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

#include "core/snapjson.h"
#include "gpuscope/gs_err.h"

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
    int status = 0,
        rc = gs_agent_client_request(sock, "GET", path, timeout_ms, &status, body, body_len, err);

    if (rc == GS_OK && status != 200) {
        free(*body);
        *body = NULL;
        return gs_err_set(err, GS_EIO, "agent: %s: %s answered %d", sock, path, status);
    }
    return rc;
}

int gs_agent_client_request(const char *sock, const char *method, const char *path, int timeout_ms,
                            int *status_out, char **body, size_t *body_len, struct gs_err *err)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    char req[600], *buf = NULL, *hdr_end;
    size_t len = 0, cap = 0, off = 0, n;
    int fd, status = 0;
    int post = strcmp(method, "POST") == 0;

    *body = NULL;
    if (strlen(sock) >= sizeof sun.sun_path)
        return gs_err_set(err, GS_EIO, "agent: socket path too long");
    memcpy(sun.sun_path, sock, strlen(sock));
    /* a POST says who sends it (the agent refuses one without: docs/api.md) */
    n = (size_t)snprintf(req, sizeof req,
                         "%s %s HTTP/1.0\r\nHost: localhost\r\nConnection: close\r\n%s\r\n",
                         post ? "POST" : "GET", path,
                         post ? "X-Requested-By: gpuscope\r\nContent-Length: 0\r\n" : "");
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
    *status_out = status;
    hdr_end += 4;
    *body_len = len - (size_t)(hdr_end - buf);
    memmove(buf, hdr_end, *body_len + 1);
    *body = buf;
    return GS_OK;
timeout:
    close(fd);
    free(buf);
    return gs_err_set(err, GS_EIO, "agent: %s: no answer within %d ms", sock, timeout_ms);
io : {
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

int gs_agent_client_snapshot(const char *sock, int hidden_as_procs, struct gs_snapshot **out,
                             struct gs_err *err)
{
    char *body = NULL;
    size_t len = 0;
    json_t *doc;
    json_error_t je;
    int rc =
        gs_agent_client_get(sock, "/api/v1/snapshot", GS_AGENT_CLIENT_TIMEOUT_MS, &body, &len, err);

    if (rc != GS_OK)
        return rc;
    doc = json_loadb(body, len, 0, &je);
    free(body);
    if (!doc)
        return gs_err_set(err, GS_EIO, "agent: %s: bad JSON: %s", sock, je.text);
    rc = gs_snapjson_decode(doc, hidden_as_procs != 0, out, err);
    json_decref(doc);
    if (rc == GS_OK) /* every view that shows it says which agent it read */
        snprintf((*out)->sys.source, sizeof(*out)->sys.source, "agent:%.100s", sock);
    return rc;
}
