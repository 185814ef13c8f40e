/*
 * libFuzzer target for the Host header check of the agent's TCP door (src/agent/hosts.c):
 * gs_hosts_allowed on any Host value against any allowed_hosts list, with a listen address
 * and a local address. Invariants: the answer does not change between two calls, a list with
 * "*" allows at least what the list allows, and what the empty list allows (localhost,
 * loopback, the two addresses, the hostname) every list allows.
 *
 * Input: the allowed_hosts list, a newline, the Host value; seeds are in fuzz/corpus/hosts/.
 * Build and run: make fuzz.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "agent/hosts.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = gs_fuzz_dup_text(data, size), *nl, star[600];
    const char *list = "", *host;
    struct sockaddr_storage ls;
    struct sockaddr_in *l4 = (struct sockaddr_in *)(void *)&ls;
    struct sockaddr_in6 local = {.sin6_family = AF_INET6};
    bool ok;

    if (!text)
        return 0;
    memset(&ls, 0, sizeof ls);
    l4->sin_family = AF_INET;
    inet_pton(AF_INET, "192.168.0.5", &l4->sin_addr);
    inet_pton(AF_INET6, "fd00::7", &local.sin6_addr);
    host = text;
    if ((nl = strchr(text, '\n')) != NULL) {
        *nl = '\0';
        list = text;
        host = nl + 1;
    }
    ok = gs_hosts_allowed(host, list, &ls, (const struct sockaddr *)&local, "node7");
    CHECK(ok == gs_hosts_allowed(host, list, &ls, (const struct sockaddr *)&local, "node7"));
    snprintf(star, sizeof star, "%.500s,*", list);
    CHECK(!ok || gs_hosts_allowed(host, star, &ls, (const struct sockaddr *)&local, "node7"));
    CHECK(!gs_hosts_allowed(host, "", &ls, (const struct sockaddr *)&local, "node7") || ok);
    free(text);
    return 0;
}
