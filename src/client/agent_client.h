/*
 * The agent as the front ends' data source (issue 5, docs/security.md "LOCAL VIEWERS"):
 * `gpuscope` and `gpuscope --json` ask the local agent's HTTP unix socket for its snapshot
 * when it answers (no NVML initialisation, and the visibility policy applies), and open NVML
 * themselves otherwise. This module finds the socket, speaks just enough HTTP/1.0 over it,
 * and has the agent's snapshot document decoded back into a struct gs_snapshot
 * (core/snapjson.h).
 */
#ifndef GS_CLI_AGENT_CLIENT_H
#define GS_CLI_AGENT_CLIENT_H

#include <stddef.h>

#include "gpuscope/gs_model.h"

struct gs_err;

#define GS_AGENT_CLIENT_TIMEOUT_MS 2000

/* Writes the socket to try into out: $GPUSCOPE_HTTP_SOCKET when set (empty or "off": none,
 * returns 0), else /run/gpuscope/agent.sock when it exists (the node's agent serves every
 * user), else $XDG_RUNTIME_DIR/gpuscope/agent.sock (a user's own agent). Returns 1 when there
 * is one to try. */
int gs_agent_client_socket(char *out, size_t len);

/* GET path over the unix socket sock (HTTP/1.0, timeout_ms for connect, send and each read).
 * On 200 returns GS_OK with the body (malloc'ed, NUL-terminated) in *body; else GS_EIO (no
 * agent there, a timeout, another status: the message says which). */
int gs_agent_client_get(const char *sock, const char *path, int timeout_ms, char **body,
                        size_t *body_len, struct gs_err *err);

/* method ("GET" or "POST", the latter without a body) path over sock: GS_OK with the
 * answer's status in *status and its body (malloc'ed, NUL-terminated) whatever the status;
 * GS_EIO when no agent answers (the message says why). */
int gs_agent_client_request(const char *sock, const char *method, const char *path, int timeout_ms,
                            int *status, char **body, size_t *body_len, struct gs_err *err);

/* Fetches /api/v1/snapshot from sock and decodes it (gs_snapjson_decode, hidden_as_procs as
 * there). GS_EIO when no agent answers. */
int gs_agent_client_snapshot(const char *sock, int hidden_as_procs, struct gs_snapshot **out,
                             struct gs_err *err);

#endif
