/*
 * Kubernetes pod, namespace and container names from the kubelet's log directories (k8s.h).
 * The parsers check each part against Kubernetes' naming rules (RFC 1123 labels and
 * subdomains, lower case), so an entry that does not follow them is not a pod; the lookup is
 * a readdir of the pods root and, when a pod has several containers, one of the containers
 * directory beside it.
 */
#include "backend/k8s.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "gpuscope/gs_err.h"

static int is_lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static int is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* A DNS label ([a-z0-9-], starting and ending alphanumeric) of 1..max characters; with dots
 * (a subdomain) when dots. */
static int dns_name(const char *s, size_t n, size_t max, int dots)
{
    if (n == 0 || n > max || !is_lower_alnum(s[0]) || !is_lower_alnum(s[n - 1]))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!is_lower_alnum(s[i]) && s[i] != '-' && !(dots && s[i] == '.'))
            return 0;
    return 1;
}

static int uid_ok(const char *s, size_t n)
{
    if (n == 0 || n >= GS_K8S_UID_LEN)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!is_hex(s[i]) && s[i] != '-')
            return 0;
    return 1;
}

static void copy_n(char *dst, const char *src, size_t n)
{
    memcpy(dst, src, n);
    dst[n] = '\0';
}

int gs_k8s_parse_pod_dir(const char *name, size_t len, struct gs_k8s_pod *out)
{
    const char *u1, *u2;

    memset(out, 0, sizeof *out);
    u1 = memchr(name, '_', len);
    u2 = u1 ? memchr(u1 + 1, '_', (size_t)(name + len - u1 - 1)) : NULL;
    if (!u2 || memchr(u2 + 1, '_', (size_t)(name + len - u2 - 1)))
        return GS_EPARSE;
    if (!dns_name(name, (size_t)(u1 - name), GS_K8S_NAME_LEN - 1, 0) ||
        !dns_name(u1 + 1, (size_t)(u2 - u1 - 1), GS_K8S_POD_LEN - 1, 1) ||
        !uid_ok(u2 + 1, (size_t)(name + len - u2 - 1)))
        return GS_EPARSE;
    copy_n(out->ns, name, (size_t)(u1 - name));
    copy_n(out->pod, u1 + 1, (size_t)(u2 - u1 - 1));
    copy_n(out->uid, u2 + 1, (size_t)(name + len - u2 - 1));
    return GS_OK;
}

int gs_k8s_parse_container_log(const char *name, size_t len, struct gs_k8s_ctr_log *out)
{
    const char *u1, *u2, *dash, *id;
    size_t rest, id_n;

    memset(out, 0, sizeof *out);
    if (len < 4 || memcmp(name + len - 4, ".log", 4) != 0)
        return GS_EPARSE;
    len -= 4;
    u1 = memchr(name, '_', len);
    u2 = u1 ? memchr(u1 + 1, '_', (size_t)(name + len - u1 - 1)) : NULL;
    if (!u2 || memchr(u2 + 1, '_', (size_t)(name + len - u2 - 1)))
        return GS_EPARSE;
    rest = (size_t)(name + len - u2 - 1);
    dash = NULL;
    for (size_t i = rest; i-- > 0;)
        if (u2[1 + i] == '-') {
            dash = u2 + 1 + i;
            break;
        }
    if (!dash)
        return GS_EPARSE;
    id = dash + 1;
    id_n = (size_t)(name + len - id);
    if (id_n < 12 || id_n >= GS_K8S_ID_LEN)
        return GS_EPARSE;
    for (size_t i = 0; i < id_n; i++)
        if (!is_hex(id[i]))
            return GS_EPARSE;
    if (!dns_name(name, (size_t)(u1 - name), GS_K8S_POD_LEN - 1, 1) ||
        !dns_name(u1 + 1, (size_t)(u2 - u1 - 1), GS_K8S_NAME_LEN - 1, 0) ||
        !dns_name(u2 + 1, (size_t)(dash - u2 - 1), GS_K8S_NAME_LEN - 1, 0))
        return GS_EPARSE;
    copy_n(out->pod, name, (size_t)(u1 - name));
    copy_n(out->ns, u1 + 1, (size_t)(u2 - u1 - 1));
    copy_n(out->container, u2 + 1, (size_t)(dash - u2 - 1));
    copy_n(out->id, id, id_n);
    return GS_OK;
}

/* The pod directory's only container subdirectory into out; 0 when none or several. */
static int only_container(const char *pod_path, char *out, size_t cap)
{
    DIR *d = opendir(pod_path);
    struct dirent *e;
    char name[GS_K8S_NAME_LEN];
    int found = 0;

    if (cap > sizeof name)
        cap = sizeof name;
    if (!d)
        return 0;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (e->d_name[0] == '.')
            continue;
        if (e->d_type != DT_DIR && e->d_type != DT_UNKNOWN)
            continue;
        if (e->d_type == DT_UNKNOWN) {
            char path[PATH_MAX];
            struct stat st;
            if (snprintf(path, sizeof path, "%s/%s", pod_path, e->d_name) >= (int)sizeof path ||
                stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
                continue;
        }
        if (!dns_name(e->d_name, n, cap - 1, 0))
            continue;
        if (found++) {
            closedir(d);
            return 0;
        }
        copy_n(name, e->d_name, n);
    }
    closedir(d);
    if (found == 1)
        strcpy(out, name);
    return found == 1;
}

/* The container whose log link in containers_dir names pod, ns and an id that container_id
 * (as the cgroup gives it: the full 64 digits) starts with or equals. */
static int container_by_id(const char *containers_dir, const struct gs_k8s_names *k,
                           const char *container_id, char *out)
{
    DIR *d = opendir(containers_dir);
    struct dirent *e;
    struct gs_k8s_ctr_log c;
    int found = 0;

    if (!d)
        return 0;
    while (!found && (e = readdir(d)) != NULL) {
        if (gs_k8s_parse_container_log(e->d_name, strlen(e->d_name), &c) != GS_OK)
            continue;
        if (strcmp(c.pod, k->pod) != 0 || strcmp(c.ns, k->ns) != 0 ||
            strncmp(container_id, c.id, strlen(c.id)) != 0)
            continue;
        strcpy(out, c.container);
        found = 1;
    }
    closedir(d);
    return found;
}

int gs_k8s_lookup(const char *pods_dir, const char *pod_uid, const char *container_id,
                  struct gs_k8s_names *out)
{
    char path[PATH_MAX];
    struct gs_k8s_pod pod;
    struct dirent *e;
    DIR *d;
    int found = 0;

    memset(out, 0, sizeof *out);
    if (!pods_dir)
        pods_dir = GS_K8S_PODS_DIR;
    if (!pod_uid || !pod_uid[0] || !(d = opendir(pods_dir)))
        return GS_ENOTFOUND;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name), ul = strlen(pod_uid);
        /* cheap test first: the name ends in _<uid> */
        if (n <= ul + 1 || e->d_name[n - ul - 1] != '_' || strcmp(e->d_name + n - ul, pod_uid) != 0)
            continue;
        if (gs_k8s_parse_pod_dir(e->d_name, n, &pod) != GS_OK || strcmp(pod.uid, pod_uid) != 0)
            continue;
        strcpy(out->pod, pod.pod);
        strcpy(out->ns, pod.ns);
        found = snprintf(path, sizeof path, "%s/%s", pods_dir, e->d_name) < (int)sizeof path;
        break;
    }
    closedir(d);
    if (!out->pod[0])
        return GS_ENOTFOUND;
    if (found && only_container(path, out->container, sizeof out->container))
        return GS_OK;
    if (container_id && container_id[0] &&
        snprintf(path, sizeof path, "%s/../containers", pods_dir) < (int)sizeof path)
        container_by_id(path, out, container_id, out->container);
    return GS_OK;
}
