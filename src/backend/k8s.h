/*
 * Kubernetes names of a process's pod, from what a node exposes without the API server: the
 * kubelet's log directories. The kubelet makes one directory per pod,
 * /var/log/pods/<namespace>_<pod name>_<pod UID>/, with one subdirectory per container
 * (<container name>/<restart>.log), and the CRI logging convention links each container's log
 * as /var/log/containers/<pod name>_<namespace>_<container name>-<container id>.log. The pod
 * UID and the container id come from the process's cgroup (procfs.h, gs_procfs_parse_cgroup);
 * these names turn them into the pod, namespace and container labels dcgm-exporter users
 * filter on (docs/metrics.md, Kubernetes).
 *
 * The parsers take a directory entry's name (outside input: any pod may name itself within
 * Kubernetes' rules, any file may appear in the directory) and check it against Kubernetes'
 * naming rules, so that what they return is safe as a label value; each has a fuzz target
 * (fuzz/fuzz_k8s.c). The lookup reads a directory tree rooted where the caller says, so tests
 * point it at a temporary one.
 */
#ifndef GS_K8S_H
#define GS_K8S_H

#include <stddef.h>

#define GS_K8S_POD_LEN 254 /* a DNS subdomain (pod names): 253 characters */
#define GS_K8S_NAME_LEN 64 /* a DNS label (namespaces, container names): 63 characters */
#define GS_K8S_UID_LEN 40  /* a pod UID: 36 characters (a static pod's: 32) */
#define GS_K8S_ID_LEN 65   /* a container id: 64 hex digits */

/* The default root of the kubelet's pod log directories. */
#define GS_K8S_PODS_DIR "/var/log/pods"

/* The pod of a /var/log/pods entry. */
struct gs_k8s_pod {
    char ns[GS_K8S_NAME_LEN];
    char pod[GS_K8S_POD_LEN];
    char uid[GS_K8S_UID_LEN];
};

/* Parses "<namespace>_<pod>_<uid>" (len bytes, need not be NUL-terminated): a namespace of
 * [a-z0-9-] (1..63), a pod name of [a-z0-9.-] (1..253), a UID of hex digits and '-' (1..39),
 * separated by the only two '_' of the name. GS_OK or GS_EPARSE (out then all ""). */
int gs_k8s_parse_pod_dir(const char *name, size_t len, struct gs_k8s_pod *out);

/* A container's log link in /var/log/containers. */
struct gs_k8s_ctr_log {
    char pod[GS_K8S_POD_LEN];
    char ns[GS_K8S_NAME_LEN];
    char container[GS_K8S_NAME_LEN];
    char id[GS_K8S_ID_LEN];
};

/* Parses "<pod>_<namespace>_<container>-<id>.log": the id is the 12..64 hex digits after the
 * last '-', the container name [a-z0-9-] (1..63) before it. GS_OK or GS_EPARSE (out all ""). */
int gs_k8s_parse_container_log(const char *name, size_t len, struct gs_k8s_ctr_log *out);

/* What the node says of one pod. */
struct gs_k8s_names {
    char pod[GS_K8S_POD_LEN];
    char ns[GS_K8S_NAME_LEN];
    char container[GS_K8S_NAME_LEN]; /* "" when not known */
};

/* Looks pod_uid up under pods_dir (NULL: GS_K8S_PODS_DIR): the entry named *_<pod_uid> gives
 * the pod and namespace; the container is the pod directory's only subdirectory, else the one
 * whose log link in pods_dir/../containers carries container_id (NULL or "": not asked).
 * GS_OK, GS_ENOTFOUND (no such pod, or the directory cannot be read; out all ""). */
int gs_k8s_lookup(const char *pods_dir, const char *pod_uid, const char *container_id,
                  struct gs_k8s_names *out);

#endif
