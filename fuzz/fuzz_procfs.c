/*
 * libFuzzer target for the procfs text parsers (src/backend/procfs.c): the files a process
 * controls or the kernel writes on its behalf, /proc/PID/stat (the name in it is whatever the
 * process set with prctl), /proc/PID/cmdline, /proc/PID/status, /proc/PID/cgroup, and the
 * system's /proc/stat. Each input goes to all five parsers, so the seed corpus
 * (fuzz/corpus/procfs/) is plain copies of real files and hand-made cgroup lines of docker,
 * Kubernetes, Podman and Slurm, and one input that reaches one parser's branch can be
 * mutated towards another's.
 *
 * The parsers take (text, len) and must not read past len: libFuzzer hands us exactly size
 * bytes on the heap, so ASan flags any over-read. Beyond "no crash", each output is checked
 * against its contract (terminated strings, the cgroup id shapes, the cmdline length), and
 * the cmdline joiner writes into heap buffers of exactly cap bytes for a range of caps.
 *
 * Build and run: make fuzz (fuzz/meson.build, scripts/fuzz.sh), or by hand with clang:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -std=c17 \
 *       -D_GNU_SOURCE -Iinclude -Isrc fuzz/fuzz_procfs.c src/backend/procfs.c src/core/err.c \
 *       -o build-fuzz/fuzz_procfs
 *   build-fuzz/fuzz_procfs -max_total_time=60 build-fuzz/work fuzz/corpus/procfs
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/procfs.h"
#include "gpuscope/gs_err.h"
#include "gpuscope/gs_model.h"

#include "fuzz_util.h"

/* Whether s holds a NUL within cap bytes. */
static int terminated(const char *s, size_t cap)
{
    return memchr(s, '\0', cap) != NULL;
}

static int all_of(const char *s, int (*ok)(char))
{
    for (; *s; s++)
        if (!ok(*s))
            return 0;
    return 1;
}

static int hex_char(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int digit_char(char c)
{
    return c >= '0' && c <= '9';
}

static int uid_char(char c)
{
    return hex_char(c) || c == '-';
}

static void fuzz_stat(const char *text, size_t len)
{
    struct gs_procfs_stat st;

    if (gs_procfs_parse_stat(text, len, &st) != GS_OK)
        return;
    CHECK(terminated(st.comm, sizeof st.comm));
    CHECK(st.rss_pages >= 0);
}

static void fuzz_cmdline(const char *text, size_t len)
{
    /* Small caps meet the "..." and plain-cut rules; GS_PROC_CMD_LEN is what the reader uses. */
    static const size_t caps[] = {0, 1, 2, 4, 5, 6, 17, GS_PROC_CMD_LEN};

    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        size_t cap = caps[i];
        char *out = malloc(cap ? cap : 1); /* exactly cap bytes: ASan sees a write past it */
        size_t n;

        if (!out)
            return;
        n = gs_procfs_join_cmdline(text, len, out, cap);
        if (cap == 0) {
            CHECK(n == 0);
        } else {
            CHECK(n < cap);
            CHECK(out[n] == '\0');
            CHECK(strlen(out) == n); /* NULs and control characters became spaces */
            CHECK(n <= len);
        }
        free(out);
    }
}

static void fuzz_status(const char *text, size_t len)
{
    uint32_t uid;
    long long btime = -1;
    struct gs_procfs_creds c;

    (void)gs_procfs_parse_uid(text, len, &uid);
    if (gs_procfs_parse_btime(text, len, &btime) == GS_OK)
        CHECK(btime >= 0);
    /* the credentials the run's source-line check uses: never more groups than kept */
    if (gs_procfs_parse_creds(text, len, &c) == GS_OK)
        CHECK(c.ngroups <= GS_PROCFS_MAX_GROUPS);
}

static void fuzz_cgroup(const char *text, size_t len)
{
    struct gs_procfs_job job;
    size_t n;

    gs_procfs_parse_cgroup(text, len, &job);
    CHECK(terminated(job.container_id, sizeof job.container_id));
    CHECK(terminated(job.pod_uid, sizeof job.pod_uid));
    CHECK(terminated(job.slurm_job, sizeof job.slurm_job));
    /* The contract in procfs.h: an id is 12..64 hex digits, set exactly when kind is. */
    n = strlen(job.container_id);
    CHECK((job.kind == GS_JOB_NONE) == (n == 0));
    CHECK(n == 0 || (n >= 12 && n <= 64 && all_of(job.container_id, hex_char)));
    /* a pod UID is a UUID with dashes, or a static pod's 32 hex digits */
    n = strlen(job.pod_uid);
    CHECK(n == 0 || (n == 36 && all_of(job.pod_uid, uid_char)) ||
          (n == 32 && all_of(job.pod_uid, hex_char)));
    CHECK(all_of(job.slurm_job, digit_char));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;

    fuzz_stat(text, size);
    fuzz_cmdline(text, size);
    fuzz_status(text, size);
    fuzz_cgroup(text, size);
    return 0;
}
