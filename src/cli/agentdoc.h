/*
 * The answer of the node's agent to the commands that print one of its API documents as a
 * table or as it came (`gpuscope runs`, `gpuscope usage`).
 */
#ifndef GS_CLI_AGENTDOC_H
#define GS_CLI_AGENTDOC_H

#include <jansson.h>
#include <stddef.h>

/* body (len bytes, freed here) is the agent's answer to `gpuscope CMD`. With raw (--json) it is
 * printed as it came, with a final newline, and the exit status is returned. Otherwise it must
 * be a JSON object with an array member `key`: then *doc is set and -1 returned, for the caller
 * to print; else "gpuscope CMD: WHERE: not a CMD document: ..." goes to stderr and the exit
 * status is returned. */
int gs_cli_agent_doc(const char *cmd, const char *where, char *body, size_t len, int raw,
                     const char *key, json_t **doc);

#endif
