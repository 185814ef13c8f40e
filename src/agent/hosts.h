/*
 * DNS rebinding (docs/agent.md "HOST NAMES"): a page of another site whose name now points at
 * the agent is same-origin with it, so the TCP door answers only requests whose Host header
 * names the agent. Pure (no lookup, no DNS), apart from the agent so that the fuzz target
 * fuzz_hosts builds it alone.
 */
#ifndef GS_AGENT_HOSTS_H
#define GS_AGENT_HOSTS_H

#include <stdbool.h>
#include <sys/socket.h>

/* Whether a request's Host header value host ("NAME", "NAME:PORT", "[V6]:PORT"; the port
 * ignored, a trailing dot and case too) names this agent: localhost, a loopback address, the
 * listen address ls (unless a wildcard), the local address local the connection came in on
 * (so a client by IP always gets through; NULL: none), the machine's hostname (NULL or "":
 * none), or one of allowed (the allowed_hosts key; "*" in it allows any). host NULL or
 * malformed: false. */
bool gs_hosts_allowed(const char *host, const char *allowed, const struct sockaddr_storage *ls,
                      const struct sockaddr *local, const char *hostname);

#endif
