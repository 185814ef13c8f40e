/*
 * The Host names the agent's TCP door answers (hosts.h): a Host header value or an
 * allowed_hosts entry split into its name (brackets, port and a trailing dot dropped), IP
 * literals compared as 16-byte addresses (IPv4 as IPv4-mapped), names case-insensitively.
 */
#include "agent/hosts.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <strings.h>

/* The name of a Host value or allowed_hosts entry (n bytes at s) into out: brackets of an
 * IPv6 address and a :PORT dropped, one trailing dot dropped. false when malformed. */
static bool host_name(const char *s, size_t n, char *out, size_t size)
{
    const char *end = s + n, *name = s, *name_end;

    if (n && s[0] == '[') {
        const char *rb = memchr(s, ']', n);
        if (!rb)
            return false;
        name = s + 1;
        name_end = rb;
        if (rb + 1 < end && rb[1] != ':')
            return false;
        for (const char *p = rb + 2; p < end; p++) /* the port */
            if (*p < '0' || *p > '9')
                return false;
    } else {
        const char *colon = memchr(s, ':', n);
        name_end = colon ? colon : end;
        if (colon && memchr(colon + 1, ':', (size_t)(end - colon - 1)))
            return false; /* an IPv6 address without brackets */
        for (const char *p = colon ? colon + 1 : end; p < end; p++)
            if (*p < '0' || *p > '9')
                return false;
    }
    if (name_end > name && name_end[-1] == '.')
        name_end--;
    if (name_end <= name || (size_t)(name_end - name) >= size)
        return false;
    memcpy(out, name, (size_t)(name_end - name));
    out[name_end - name] = '\0';
    for (const char *p = out; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == '/' || *p == '@' || *p == '[' || *p == ']')
            return false;
    return true;
}

/* An IP literal's 16-byte form (IPv4 as ::ffff:a.b.c.d, as an IPv4-mapped peer is). */
static bool ip_of(const char *name, struct in6_addr *a)
{
    struct in_addr a4;

    if (inet_pton(AF_INET6, name, a) == 1)
        return true;
    if (inet_pton(AF_INET, name, &a4) != 1)
        return false;
    memset(a, 0, sizeof *a);
    a->s6_addr[10] = a->s6_addr[11] = 0xff;
    memcpy(a->s6_addr + 12, &a4, 4);
    return true;
}

/* sa's address in ip_of's form; false for other families and wildcards. */
static bool ip_of_sa(const struct sockaddr *sa, struct in6_addr *a)
{
    if (!sa)
        return false;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s = (const struct sockaddr_in *)(const void *)sa;
        if (s->sin_addr.s_addr == htonl(INADDR_ANY))
            return false;
        memset(a, 0, sizeof *a);
        a->s6_addr[10] = a->s6_addr[11] = 0xff;
        memcpy(a->s6_addr + 12, &s->sin_addr, 4);
        return true;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)(const void *)sa;
        if (IN6_IS_ADDR_UNSPECIFIED(&s->sin6_addr))
            return false;
        *a = s->sin6_addr;
        return true;
    }
    return false;
}

bool gs_hosts_allowed(const char *host, const char *allowed, const struct sockaddr_storage *ls,
                      const struct sockaddr *local, const char *hostname)
{
    char name[256], entry[256];
    struct in6_addr ip, other;
    bool is_ip;

    if (!host || !host_name(host, strlen(host), name, sizeof name))
        return false;
    is_ip = ip_of(name, &ip);
    if (strcasecmp(name, "localhost") == 0)
        return true;
    if (is_ip) {
        if (IN6_IS_ADDR_LOOPBACK(&ip) || (IN6_IS_ADDR_V4MAPPED(&ip) && ip.s6_addr[12] == 127))
            return true; /* ::1, 127.0.0.0/8 */
        if (ip_of_sa((const struct sockaddr *)ls, &other) && memcmp(&ip, &other, sizeof ip) == 0)
            return true;
        if (ip_of_sa(local, &other) && memcmp(&ip, &other, sizeof ip) == 0)
            return true;
    } else if (hostname && hostname[0] && strcasecmp(name, hostname) == 0) {
        return true;
    }
    for (const char *p = allowed ? allowed : ""; *p;) {
        size_t n;
        p += strspn(p, ", \t");
        n = strcspn(p, ", \t");
        if (n == 1 && p[0] == '*')
            return true;
        if (n && host_name(p, n, entry, sizeof entry) &&
            (is_ip && ip_of(entry, &other) ? memcmp(&ip, &other, sizeof ip) == 0
                                           : strcasecmp(entry, name) == 0))
            return true;
        p += n;
    }
    return false;
}
