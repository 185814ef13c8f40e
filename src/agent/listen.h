/*
 * What the agent's TCP door listens with (docs/security.md): the listen address parsed, the
 * exposure rule (a non-loopback address needs TLS and credentials unless insecure = on), and
 * the TLS pair read and checked with GnuTLS before libmicrohttpd gets it. Used at start-up, on
 * SIGHUP and by the privilege drop, which binds the port first.
 */
#ifndef GS_AGENT_LISTEN_H
#define GS_AGENT_LISTEN_H

#include <sys/socket.h>

#include "agent/auth.h"
#include "agent/config.h"
#include "gpuscope/gs_err.h"

/* listen ("HOST:PORT", "[V6]:PORT") into *ss. GS_EINVAL with the address named. */
int gs_listen_parse(const char *listen, struct sockaddr_storage *ss, struct gs_err *err);

/* The exposure rule for ss with or without TLS and au's credentials: GS_OK, or GS_EINVAL
 * naming what is missing; with insecure = on an exposed address is allowed and logged. */
int gs_listen_check_exposure(const struct gs_agent_config *c, const struct sockaddr_storage *ss,
                             int tls, const struct gs_auth *au, struct gs_err *err);

/* The GnuTLS priority string for the versions au allows (gs_auth_tls_versions): GnuTLS's
 * NORMAL set with only those protocol versions, e.g. "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-
 * TLS1.2" by default. size: 96 is enough. */
#define GS_LISTEN_PRIO_LEN 96
void gs_listen_tls_priorities(const struct gs_auth *au, char *buf, size_t size);

/* The TLS pair c asks for (tls_cert_file + tls_key_file, or the web config's
 * tls_server_config), read (1 MiB at most each) and checked with GnuTLS (parses, key
 * matches). *cert and *key are NULL when none is asked for; free them with gs_listen_free_pem. */
int gs_listen_load_tls(const struct gs_agent_config *c, const struct gs_auth *au, char **cert,
                       char **key, struct gs_err *err);

/* Frees a pair, the key's bytes zeroed first. NULLs are allowed. */
void gs_listen_free_pem(char *cert, char *key);

#endif
