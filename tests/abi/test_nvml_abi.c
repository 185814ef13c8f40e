/*
 * ABI conformance: src/backend/nvml_abi.h against NVIDIA's real nvml.h.
 *
 * The product declares its own NVML subset and loads libnvidia-ml.so.1 with dlopen; a wrong
 * size, offset or constant there crashes or misreads a real driver and nvml-sim cannot notice,
 * because it is built from the same declarations. abi_ours.c and abi_theirs.c measure both
 * headers with one list (abi_list.h); this test matches the two tables by key, one cmocka test
 * per struct or constant family, and prints every comparison as a TAP comment:
 *
 *   # nvmlPciInfo_t.busId: ours 36, nvml.h 36
 *
 * Items the installed nvml.h is too old to declare are shown as "not in this nvml.h"; a family
 * with nothing comparable is listed in a comment instead of running as a test. A last test
 * ("coverage") reads nvml_abi.h itself and fails for any name or struct member it declares that
 * abi_list.h does not compare, so a new declaration cannot slip in unchecked.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi_table.h"

#ifndef GS_NVML_ABI_H_PATH
#error "meson passes the path of src/backend/nvml_abi.h as GS_NVML_ABI_H_PATH"
#endif
#ifndef GS_ABI_HEADER_DESC
#define GS_ABI_HEADER_DESC "nvml.h"
#endif

#define MAX_GROUPS 64

static const struct gs_abi_entry *theirs_find(const char *key)
{
    for (size_t i = 0; i < gs_abi_theirs_len; i++)
        if (strcmp(gs_abi_theirs[i].key, key) == 0)
            return &gs_abi_theirs[i];
    return NULL;
}

/* Small values read best in decimal, bit masks and versions in hex. */
static const char *fmt_value(char *buf, size_t n, unsigned long long v)
{
    if (v < 100000)
        snprintf(buf, n, "%llu", v);
    else
        snprintf(buf, n, "0x%llx", v);
    return buf;
}

/* " (nvml.h: nvmlClocksThrottleReasonGpuIdle)" when NVIDIA spells it differently. */
static const char *alias_note(char *buf, size_t n, const struct gs_abi_entry *o,
                              const struct gs_abi_entry *t)
{
    buf[0] = '\0';
    if (o->name && t->name && strcmp(o->name, t->name) != 0)
        snprintf(buf, n, " (ours: %s, nvml.h: %s)", o->name, t->name);
    return buf;
}

static void test_group(void **state)
{
    const char *group = *state;
    int compared = 0, absent = 0, failed = 0;
    char a[32], b[32], note[256];

    for (size_t i = 0; i < gs_abi_ours_len; i++) {
        const struct gs_abi_entry *o = &gs_abi_ours[i];
        const struct gs_abi_entry *t;
        int ok;

        if (strcmp(o->group, group) != 0)
            continue;
        if (o->rel == GS_ABI_OURS_ONLY) {
            printf("# %s: ours %s (our own constant; nvml.h has none)\n", o->key,
                   fmt_value(a, sizeof a, o->value));
            continue;
        }
        t = theirs_find(o->key);
        if (!t) {
            absent++;
            printf("# %s: ours %s, not in this nvml.h\n", o->key, fmt_value(a, sizeof a, o->value));
            continue;
        }
        compared++;
        ok = o->rel == GS_ABI_GE ? o->value >= t->value : o->value == t->value;
        printf("# %s: ours %s, nvml.h %s%s%s%s\n", o->key, fmt_value(a, sizeof a, o->value),
               fmt_value(b, sizeof b, t->value), alias_note(note, sizeof note, o, t),
               o->rel == GS_ABI_GE ? " (ours must be >=)" : "", ok ? "" : "  <-- MISMATCH");
        if (!ok)
            failed++;
    }
    fflush(stdout);
    if (failed)
        fail_msg("%s: %d of %d comparisons differ from nvml.h (lines marked MISMATCH)", group,
                 failed, compared);
    (void)absent;
}

/* A family registers as a test only when this nvml.h declares something in it: cmocka 1.1
 * writes skip() as "not ok # SKIP", which meson and scripts/test-summary.py count as failed. */
static int group_comparable(const char *group, int *absent)
{
    int comparable = 0;

    *absent = 0;
    for (size_t i = 0; i < gs_abi_ours_len; i++) {
        const struct gs_abi_entry *o = &gs_abi_ours[i];
        if (strcmp(o->group, group) != 0 || o->rel == GS_ABI_OURS_ONLY)
            continue;
        if (theirs_find(o->key))
            comparable++;
        else
            (*absent)++;
    }
    return comparable > 0 || *absent == 0;
}

/* One line for the report: how many of each kind were compared, how many this header lacks. */
static void print_totals(void)
{
    int size = 0, align = 0, offset = 0, msize = 0, constant = 0, proto = 0, absent = 0, own = 0;

    for (size_t i = 0; i < gs_abi_ours_len; i++) {
        const struct gs_abi_entry *o = &gs_abi_ours[i];
        if (o->rel == GS_ABI_OURS_ONLY) {
            own++;
        } else if (!theirs_find(o->key)) {
            absent++;
        } else if (strcmp(o->group, "prototypes") == 0) {
            proto++;
        } else if (strncmp(o->key, "alignof(", 8) == 0) {
            align++;
        } else if (strncmp(o->key, "sizeof(", 7) == 0) {
            if (strchr(o->key, '.'))
                msize++;
            else
                size++;
        } else if (strchr(o->key, '.')) {
            offset++;
        } else {
            constant++;
        }
    }
    printf("# compared with nvml.h: %d type sizes, %d alignments, %d field offsets, "
           "%d field sizes, %d constants, %d prototypes; %d items not in this nvml.h; "
           "%d of our own constants shown\n",
           size, align, offset, msize, constant, proto, absent, own);
}

/* Every key in nvml.h's table must come from the same list on our side. */
static void test_tables_agree(void **state)
{
    int orphans = 0;

    (void)state;
    for (size_t i = 0; i < gs_abi_theirs_len; i++) {
        int found = 0;
        for (size_t j = 0; j < gs_abi_ours_len && !found; j++)
            found = strcmp(gs_abi_theirs[i].key, gs_abi_ours[j].key) == 0;
        if (!found) {
            printf("# %s: only in the nvml.h table\n", gs_abi_theirs[i].key);
            orphans++;
        }
    }
    printf("# %zu entries ours, %zu entries nvml.h (%s)\n", gs_abi_ours_len, gs_abi_theirs_len,
           GS_ABI_HEADER_DESC);
    fflush(stdout);
    assert_int_equal(orphans, 0);
}

/* ---- coverage: what nvml_abi.h declares vs what abi_list.h compares --------------------- */

#define MAX_TOKENS 8192
#define TOKEN_LEN 96
#define MAX_MEMBERS 64

struct tokens {
    char (*tok)[TOKEN_LEN];
    int n;
};

static int is_ident_start(int c)
{
    return isalpha(c) || c == '_';
}

static int is_ident(const char *s)
{
    return is_ident_start((unsigned char)s[0]);
}

/* C tokens of the header, without comments, string/char literals and preprocessor lines other
 * than #define (whose name is a declaration). Numbers come out as one token each. */
static int tokenize(const char *src, struct tokens *out)
{
    const char *p = src;
    int line_start = 1;

    out->n = 0;
    while (*p) {
        if (p[0] == '/' && p[1] == '*') {
            const char *e = strstr(p + 2, "*/");
            p = e ? e + 2 : p + strlen(p);
            continue;
        }
        if (p[0] == '/' && p[1] == '/') {
            while (*p && *p != '\n')
                p++;
            continue;
        }
        if (*p == '\n') {
            line_start = 1;
            p++;
            continue;
        }
        if (isspace((unsigned char)*p)) {
            p++;
            continue;
        }
        if (line_start && *p == '#') {
            /* keep "#define NAME", drop #include/#if/#endif lines (continuations included) */
            const char *q = p + 1;
            while (*q == ' ' || *q == '\t')
                q++;
            if (strncmp(q, "define", 6) != 0) {
                while (*p && !(*p == '\n' && p[-1] != '\\'))
                    p++;
                continue;
            }
            p = q + 6;
            line_start = 0;
            continue;
        }
        line_start = 0;
        if (*p == '"' || *p == '\'') {
            char quote = *p++;
            while (*p && *p != quote) {
                if (*p == '\\' && p[1])
                    p++;
                p++;
            }
            if (*p)
                p++;
            continue;
        }
        if (out->n >= MAX_TOKENS)
            return -1;
        if (is_ident_start((unsigned char)*p) || isdigit((unsigned char)*p)) {
            size_t len = 0;
            while (isalnum((unsigned char)p[len]) || p[len] == '_')
                len++;
            if (len >= TOKEN_LEN)
                return -1;
            memcpy(out->tok[out->n], p, len);
            out->tok[out->n][len] = '\0';
            p += len;
        } else {
            out->tok[out->n][0] = *p++;
            out->tok[out->n][1] = '\0';
        }
        out->n++;
    }
    return 0;
}

static int is_nvml_name(const char *s)
{
    return strncmp(s, "NVML_", 5) == 0 || strncmp(s, "nvml", 4) == 0 ||
           strncmp(s, "GS_NVML_", 8) == 0;
}

/* Does an identifier occur as a whole word in some key or name of our table? */
static int mentioned(const char *ident)
{
    size_t len = strlen(ident);

    for (size_t i = 0; i < gs_abi_ours_len; i++) {
        const char *strs[2] = {gs_abi_ours[i].key, gs_abi_ours[i].name};
        for (int k = 0; k < 2; k++) {
            const char *s = strs[k];
            const char *hit;
            if (!s)
                continue;
            for (hit = strstr(s, ident); hit; hit = strstr(hit + 1, ident)) {
                int before = hit > s && (isalnum((unsigned char)hit[-1]) || hit[-1] == '_');
                int after = isalnum((unsigned char)hit[len]) || hit[len] == '_';
                if (!before && !after)
                    return 1;
            }
        }
    }
    return 0;
}

static int ours_has_key(const char *key)
{
    for (size_t i = 0; i < gs_abi_ours_len; i++)
        if (strcmp(gs_abi_ours[i].key, key) == 0)
            return 1;
    return 0;
}

struct members {
    char name[MAX_MEMBERS][2 * TOKEN_LEN];
    int n;
};

static void members_add(struct members *m, const char *prefix, const char *name)
{
    if (m->n < MAX_MEMBERS)
        snprintf(m->name[m->n++], sizeof m->name[0], "%s%s%s", prefix, *prefix ? "." : "", name);
}

/* Reads a struct/union body from the token after '{' to the token after its '}', collecting
 * member paths ("metricInfo", "metricInfo.unit"). A member's name is its last identifier
 * before any '[' (array size) or the ';'. */
static void parse_body(const struct tokens *t, int *i, struct members *out)
{
    const char *name = NULL;
    int in_brackets = 0;

    while (*i < t->n) {
        const char *tok = t->tok[*i];
        if (strcmp(tok, "{") == 0) {
            struct members sub = {.n = 0};
            (*i)++;
            parse_body(t, i, &sub);
            if (*i < t->n && is_ident(t->tok[*i])) {
                const char *outer = t->tok[*i];
                members_add(out, "", outer);
                for (int k = 0; k < sub.n; k++)
                    members_add(out, outer, sub.name[k]);
            }
            while (*i < t->n && strcmp(t->tok[*i], ";") != 0)
                (*i)++;
            (*i)++;
            name = NULL;
            in_brackets = 0;
            continue;
        }
        (*i)++;
        if (strcmp(tok, "}") == 0)
            return;
        if (strcmp(tok, ";") == 0) {
            if (name)
                members_add(out, "", name);
            name = NULL;
            in_brackets = 0;
        } else if (strcmp(tok, "[") == 0) {
            in_brackets = 1;
        } else if (is_ident(tok) && !in_brackets) {
            name = tok;
        }
    }
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    long len;

    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return NULL;
    }
    buf = malloc((size_t)len + 1);
    if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len) {
        free(buf);
        buf = NULL;
    }
    if (buf)
        buf[len] = '\0';
    fclose(f);
    return buf;
}

static int check_structs(const struct tokens *t)
{
    int missing = 0, structs = 0, fields = 0;
    char key[2 * TOKEN_LEN + 16];

    for (int i = 0; i + 2 < t->n; i++) {
        struct members m = {.n = 0};
        int j = i + 2;
        const char *tname;

        if (strcmp(t->tok[i], "typedef") != 0 ||
            (strcmp(t->tok[i + 1], "struct") != 0 && strcmp(t->tok[i + 1], "union") != 0))
            continue;
        if (is_ident(t->tok[j]))
            j++;
        if (j >= t->n || strcmp(t->tok[j], "{") != 0)
            continue; /* a handle: typedef struct nvmlDevice_st *nvmlDevice_t; */
        j++;
        parse_body(t, &j, &m);
        if (j >= t->n || !is_ident(t->tok[j]))
            continue;
        tname = t->tok[j];
        structs++;
        snprintf(key, sizeof key, "sizeof(%s)", tname);
        if (!ours_has_key(key)) {
            printf("# nvml_abi.h: struct %s is not compared (add GS_ABI_STRUCT to "
                   "tests/abi/abi_list.h)\n",
                   tname);
            missing++;
        }
        for (int k = 0; k < m.n; k++) {
            fields++;
            snprintf(key, sizeof key, "%s.%s", tname, m.name[k]);
            if (!ours_has_key(key)) {
                printf("# nvml_abi.h: member %s is not compared (add GS_ABI_FIELD to "
                       "tests/abi/abi_list.h)\n",
                       key);
                missing++;
            }
        }
        i = j;
    }
    printf("# nvml_abi.h: %d structs/unions, %d members found\n", structs, fields);
    return missing;
}

static int check_names(const struct tokens *t)
{
    int missing = 0, names = 0;

    for (int i = 0; i < t->n; i++) {
        const char *s = t->tok[i];
        size_t len = strlen(s);
        int dup = 0;

        if (!is_nvml_name(s) || strcmp(s, "GS_NVML_ABI_H") == 0)
            continue;
        if (len > 3 && strcmp(s + len - 3, "_st") == 0)
            continue; /* struct tags behind the handle typedefs */
        for (int k = 0; k < i && !dup; k++)
            dup = strcmp(t->tok[k], s) == 0;
        if (dup)
            continue;
        names++;
        if (!mentioned(s)) {
            printf("# nvml_abi.h: %s is not compared (add it to tests/abi/abi_list.h)\n", s);
            missing++;
        }
    }
    printf("# nvml_abi.h: %d distinct NVML names found\n", names);
    return missing;
}

static void test_coverage(void **state)
{
    struct tokens t = {.n = 0};
    char *src = read_file(GS_NVML_ABI_H_PATH);
    int missing;

    (void)state;
    if (!src)
        fail_msg("cannot read %s", GS_NVML_ABI_H_PATH);
    t.tok = calloc(MAX_TOKENS, sizeof *t.tok);
    assert_non_null(t.tok);
    assert_int_equal(tokenize(src, &t), 0);
    missing = check_names(&t) + check_structs(&t);
    fflush(stdout);
    free(t.tok);
    free(src);
    if (missing)
        fail_msg("%d declarations in nvml_abi.h are not compared with nvml.h", missing);
}

int main(void)
{
    static struct CMUnitTest tests[MAX_GROUPS + 2];
    static const char *groups[MAX_GROUPS];
    size_t ngroups = 0, n = 0;

    for (size_t i = 0; i < gs_abi_ours_len; i++) {
        size_t g = 0;
        while (g < ngroups && strcmp(groups[g], gs_abi_ours[i].group) != 0)
            g++;
        if (g == ngroups) {
            if (ngroups == MAX_GROUPS) {
                fprintf(stderr, "test_nvml_abi: more than %d groups\n", MAX_GROUPS);
                return 1;
            }
            groups[ngroups++] = gs_abi_ours[i].group;
        }
    }
    printf("# nvml ABI conformance: src/backend/nvml_abi.h vs %s (NVML_API_VERSION %s)\n",
           GS_ABI_HEADER_DESC, gs_abi_theirs_version);
    print_totals();
    for (size_t g = 0; g < ngroups; g++) {
        int absent;
        if (!group_comparable(groups[g], &absent)) {
            printf("# %s: not in this nvml.h (%d items not compared)\n", groups[g], absent);
            continue;
        }
        tests[n++] = (struct CMUnitTest){
            .name = groups[g], .test_func = test_group, .initial_state = (void *)groups[g]};
    }
    tests[n++] = (struct CMUnitTest){.name = "both tables list the same keys",
                                     .test_func = test_tables_agree};
    tests[n++] = (struct CMUnitTest){.name = "coverage: every nvml_abi.h declaration is compared",
                                     .test_func = test_coverage};
    fflush(stdout);
    return _cmocka_run_group_tests("nvml_abi", tests, n, NULL, NULL);
}
