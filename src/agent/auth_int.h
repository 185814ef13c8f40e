/*
 * auth_int.h - what auth.c (life cycle, the request check) and auth_files.c (the tokens file
 * and the exporter-toolkit web config) share: the parsed credentials and the helpers both use.
 */
#ifndef GS_AGENT_AUTH_INT_H
#define GS_AGENT_AUTH_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/auth.h"
#include "gpuscope/gs_err.h"

#define AUTH_FILE_MAX (1u << 20) /* bytes of a tokens file or web config */
#define AUTH_TOKENS_MAX 10000
#define AUTH_USERS_MAX 1000
#define AUTH_PATH_LEN 1024
#define AUTH_USER_LEN 64
#define AUTH_HEADER_MAX 1024 /* bytes of an Authorization value we look at */
#define CACHE_SLOTS 16
#define FAIL_SLOTS 64 /* failure buckets kept per kind (source, user name) */

struct token_entry {
    unsigned char hash[32];
    enum gs_role role;
    char user[AUTH_USER_LEN];
    int uid_known;
    uid_t uid;
};

struct basic_user {
    char name[AUTH_USER_LEN];
    char hash[128]; /* bcrypt: $2b$10$..., 60 bytes */
    int uid_known;
    uid_t uid;
};

struct cache_slot {
    unsigned char key[32]; /* SHA-256 of the source and decoded credentials (auth.c) */
    unsigned user;         /* index into users */
    int64_t expires_ns;    /* 0: empty */
};

/* A token bucket of failed basic-auth checks for one source or one user name. */
struct fail_bucket {
    char key[AUTH_USER_LEN]; /* "" : free */
    double left;
    int64_t t_ns;
};

/* The mutable part, apart so that a const struct gs_auth may still update it. */
struct auth_cache {
    pthread_mutex_t lock;
    struct cache_slot slot[CACHE_SLOTS];
    unsigned next;
    double budget; /* uncached bcrypt checks left (token bucket) */
    int64_t budget_t_ns;
    struct fail_bucket by_src[FAIL_SLOTS], by_user[FAIL_SLOTS];
};

struct gs_auth {
    atomic_int refs;
    struct token_entry *tokens;
    unsigned n_tokens;
    struct basic_user *users;
    unsigned n_users;
    char cert_file[AUTH_PATH_LEN];
    char key_file[AUTH_PATH_LEN];
    int tls_min, tls_max; /* tls_server_config's min/max_version: 10..13; 0: not given */
    struct auth_cache *cache;
};

void gs_auth_sha256(const void *text, size_t len, unsigned char out[32]);
int gs_auth_hexval(char c);
int gs_auth_user_name_ok(const char *s, size_t n);
int gs_auth_parse_tokens(struct gs_auth *au, const char *name, const char *text, size_t len,
                         struct gs_err *err);
int gs_auth_parse_web(struct gs_auth *au, const char *name, const char *text, size_t len,
                      const char *base_dir, struct gs_err *err);

#endif
