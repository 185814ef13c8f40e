/*
 * Performance budgets that hold without timing (issue 25): what the agent's sampling cycle
 * costs in steady state, counted rather than timed, so a regression fails `make test` on a
 * loaded machine as surely as on an idle one.
 *
 *   - NVML calls per cycle: nvml-sim counts every entry point it serves (NVML_SIM_PROFILE,
 *     read through its nvmlSimProfileGet extension);
 *   - heap allocations per cycle: this executable defines malloc, calloc, realloc,
 *     posix_memalign and aligned_alloc, counting each call and forwarding it to glibc's own
 *     (__libc_malloc, ...), so the agent's code, jansson and libc's internal allocations
 *     (strdup, fopen) are all counted. Not built under a sanitizer (meson.build), whose
 *     allocator would be bypassed.
 *
 * The cycle is src/agent/sampling.c's gs_agent_cycle, as the sampling thread runs it: sample
 * (the agent's own cadence, schedule.c), alert rules, the alerts listed, published; and
 * every 5th cycle a scrape, which renders /metrics (agent/pub.c makes it for a cycle's first
 * request; counted here as the agent's own work). The history writer, the runs socket and the
 * pushers are off: their work is on their own threads. Steady state is cycles 120..179 after the
 * sampler opened: one whole period of the cadence (PCIe throughput every 5th cycle, health, MIG and
 * NVLink link states every 10th, static readings every 60th), each cycle 101 ms after the one
 * before (GPM's minimum interval), so the counts are the same every run. The test takes ~6 s.
 *
 * The scenario is the bundled 8-GPU training one with its clock frozen and its processes'
 * pids replaced by this test's own ("self"): procfs then answers the same on every machine
 * (a synthetic pid might be a live process somewhere); its PCIe throughput call does not sleep.
 *
 * Each budget is today's figure plus a small margin; the reason is written next to it. When a
 * change lowers a figure for good, lower its budget with it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent_int.h"
#include "agent/alerts.h"
#include "agent/config.h"
#include "agent/log.h"
#include "agent/usage.h"
#include "gpuscope/gs_sampler.h"

/* ---- the counting allocator ---- */

void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t n);
void *__libc_memalign(size_t align, size_t n);
void __libc_free(void *p);

/* Default visibility (the build hides symbols): the executable's malloc then interposes on
 * libc's for every library, libc's own callers included. */
#define EXPORTED __attribute__((visibility("default")))

static atomic_ullong n_alloc;

EXPORTED void *malloc(size_t n)
{
    atomic_fetch_add_explicit(&n_alloc, 1, memory_order_relaxed);
    return __libc_malloc(n);
}

EXPORTED void *calloc(size_t n, size_t size)
{
    atomic_fetch_add_explicit(&n_alloc, 1, memory_order_relaxed);
    return __libc_calloc(n, size);
}

EXPORTED void *realloc(void *p, size_t n)
{
    atomic_fetch_add_explicit(&n_alloc, 1, memory_order_relaxed);
    return __libc_realloc(p, n);
}

EXPORTED int posix_memalign(void **out, size_t align, size_t n)
{
    void *p;

    atomic_fetch_add_explicit(&n_alloc, 1, memory_order_relaxed);
    if (align < sizeof(void *) || (align & (align - 1)) != 0)
        return EINVAL;
    p = __libc_memalign(align, n);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

EXPORTED void *aligned_alloc(size_t align, size_t n)
{
    atomic_fetch_add_explicit(&n_alloc, 1, memory_order_relaxed);
    return __libc_memalign(align, n);
}

EXPORTED void free(void *p)
{
    __libc_free(p);
}

/* ---- the fixture ---- */

#define WARM_CYCLES 120
#define COUNTED_CYCLES 60 /* one whole period of schedule.c's cadence */

struct cycle_cost {
    double nvml_calls; /* per cycle */
    double allocs;     /* per cycle */
    double reads;      /* read system calls (read, pread, readv: /proc/self/io's syscr) */
};

/* The read system calls this process has made (/proc/self/io's syscr, the kernel's count),
 * read with one open and one read. */
static unsigned long long read_syscalls(void)
{
    char buf[512];
    const char *k;
    ssize_t n;
    int fd = open("/proc/self/io", O_RDONLY | O_CLOEXEC);

    assert_true(fd >= 0);
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    assert_true(n > 0);
    buf[n] = '\0';
    k = strstr(buf, "syscr: ");
    assert_non_null(k);
    return strtoull(k + 7, NULL, 10);
}

static const char *sim_lib(void)
{
    const char *p = getenv("GPUSCOPE_SIM_LIB");
    return p && *p ? p : NULL;
}

static unsigned long long sim_calls(void)
{
    void *h = dlopen(sim_lib(), RTLD_NOW | RTLD_NOLOAD);
    void (*get)(unsigned long long *, unsigned long long *);
    unsigned long long ns = 0, calls = 0;

    assert_non_null(h);
    *(void **)&get = dlsym(h, "nvmlSimProfileGet");
    assert_non_null(get);
    get(&ns, &calls);
    dlclose(h);
    return calls;
}

/* The bundled training scenario with every process's pid "self"; its path in out. */
static void self_scenario(char *out, size_t n)
{
    const char *root = getenv("GPUSCOPE_SOURCE_ROOT");
    const char *tmp = getenv("TMPDIR");
    char path[512];
    json_error_t je;
    json_t *doc, *procs, *p;
    size_t i;
    int fd;

    snprintf(path, sizeof path, "%s/sim/scenarios/h100x8-training.json",
             root && *root ? root : ".");
    doc = json_load_file(path, 0, &je);
    if (!doc)
        fail_msg("%s: %s", path, je.text);
    procs = json_object_get(doc, "processes");
    assert_true(json_array_size(procs) > 0);
    json_array_foreach(procs, i, p)
        assert_int_equal(json_object_set_new(p, "pid", json_string("self")), 0);
    /* The driver's PCIe throughput call blocks ~20 ms (the sim's default delay): wall time,
     * not CPU, and 36 of them would make this test 12 s long. */
    assert_int_equal(json_object_set_new(doc, "pcie_throughput_delay_ms", json_integer(0)), 0);
    snprintf(out, n, "%s/gs_budget_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    fd = mkstemp(out);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(json_dump_file(doc, out, 0), 0);
    json_decref(doc);
}

/* A scraper every 5th cycle (every 5 s at the agent's 1 s, as Prometheus would): /metrics is
 * rendered by the first request for a cycle (agent/pub.c), so its cost is counted too. */
static void scrape(struct gs_agent *a, unsigned i)
{
    size_t len = 0;

    if (i % 5 != 0)
        return;
    assert_non_null(gs_pub_body(a->current, GS_PUB_METRICS, &len));
    assert_true(len > 1000);
}

/* Runs the agent's sampling cycle as the sampling thread does, alerts on, and returns the
 * cost of the counted cycles. */
static struct cycle_cost agent_cycle_cost(void)
{
    struct gs_agent a;
    struct gs_err err;
    struct gs_pub *p;
    struct cycle_cost c;
    char scenario[512];
    unsigned long long calls0, allocs0, reads0, probe;

    self_scenario(scenario, sizeof scenario);
    setenv("NVML_SIM_PROFILE", "1", 1);
    setenv("NVML_SIM_SCENARIO", scenario, 1);
    setenv("NVML_SIM_TIME", "100", 1);
    setenv("GPUSCOPE_NVML_LIBRARY", sim_lib(), 1);
    gs_log_set_level(GS_LOG_ERROR);

    memset(&a, 0, sizeof a);
    gs_config_defaults(&a.cfg);
    snprintf(a.hostname, sizeof a.hostname, "budget");
    a.last_sample_s = -1;
    assert_int_equal(pthread_mutex_init(&a.lock, NULL), 0);
    gs_err_clear(&err);
    assert_int_equal(gs_alerts_new(&a.alerts, &a.cfg.alerts, &err), GS_OK);
    /* the usage accounting as the agent runs it (every holder of the 8 GPUs, every cycle) */
    assert_int_equal(gs_usage_new(&a.usage, &(struct gs_usage_opts){.read_env = 1}), GS_OK);

    for (unsigned i = 0; i < WARM_CYCLES; i++) {
        gs_agent_cycle(&a, &a.cfg);
        scrape(&a, i);
    }
    assert_non_null(a.current);
    assert_true(a.current->up);
    assert_int_equal(a.current->snap->n_gpus, 8);
    calls0 = sim_calls();
    allocs0 = atomic_load(&n_alloc);
    probe = read_syscalls();
    reads0 = read_syscalls();
    probe = reads0 - probe; /* what one read_syscalls() itself adds (its read: 1) */
    for (unsigned i = 0; i < COUNTED_CYCLES; i++) {
        /* GPM metrics need two samples 100 ms apart (NVML_GPM_MIN_NS, backend/nvml_int.h): at
         * the agent's 1 s every cycle takes one, so here too, and the count does not depend on
         * how fast the machine runs the cycles. (The window stays well inside procfs's 10 s
         * refresh of a process's fixed details, PF_STATIC_TTL_NS.) */
        nanosleep(&(struct timespec){0, 101000000}, NULL);
        gs_agent_cycle(&a, &a.cfg);
        scrape(&a, i);
    }
    c.reads = (double)(read_syscalls() - reads0 - probe) / COUNTED_CYCLES;
    c.allocs = (double)(atomic_load(&n_alloc) - allocs0) / COUNTED_CYCLES;
    c.nvml_calls = (double)(sim_calls() - calls0) / COUNTED_CYCLES;
    assert_true(a.current->up);

    gs_pub_release(a.current);
    while ((p = a.spare) != NULL) {
        a.spare = p->next_spare;
        gs_pub_free(p);
    }
    gs_sampler_close(a.sampler);
    gs_alerts_free(a.alerts);
    gs_usage_free(a.usage);
    pthread_mutex_destroy(&a.lock);
    unlink(scenario);
    return c;
}

/* Prints the figure; returns 1 (and says why) when it is over its budget. */
static int over(const char *what, double measured, double today, double budget)
{
    printf("# %s: %.2f per cycle (today %.2f, budget %.2f)\n", what, measured, today, budget);
    if (measured <= budget)
        return 0;
    printf("# %s: over its budget: find what the change added to the agent's cycle\n", what);
    return 1;
}

/* ---- the budgets ---- */

/* NVML calls per cycle, 8 GPUs, the agent's default cadence averaged over one period of 60
 * cycles (bench/RESULTS.md, "Deterministic budgets"): 21,102 calls in the 60 cycles. The PCIe
 * byte counters (fields 197/198) ride in the field-values call the cycle makes anyway, but with
 * the clock frozen they see no interval, so the 16 throughput calls of every 5th cycle stay
 * here (on a running clock they go: 3.2 a cycle fewer). It was
 * 483.70 (29,022) while the 18 links' states of each GPU were read every cycle; they are now
 * read every 10th cycle with the health readings (144 calls fewer in 54 of the 60 cycles), and
 * not again in the cycle whose NVLink probe (every 60th, GS_WANT_STATIC) has just read them
 * (354.10 before: 144 fewer in 1 of the 60). The
 * figure is exact (the same every run); the margin of 1 per cycle lets one whole-system call
 * on the fast cadence come in without re-budgeting, while one more reading per GPU (8 per
 * cycle), or one per GPU on the health cadence (0.8) twice over, is over. */
#define AGENT_NVML_CALLS_TODAY 351.70
#define AGENT_NVML_CALLS_BUDGET (AGENT_NVML_CALLS_TODAY + 1.0)

/* Heap allocations per cycle, same window: none (the publications are reused and the JSON
 * documents, alerts' included, are made by the first request that asks: agent/pub.c). Before
 * that the alerts document cost 12 a cycle. The margin of 0.1 lets an allocation on a slow
 * cadence (up to 6 in the 60 cycles) come in; one allocation every cycle is over. Measured 0.03
 * since the usage accounting: the /metrics buffer grows twice in the window as its counters'
 * text lengthens (a doubling buffer: rarer as the text settles). */
#define AGENT_ALLOCS_TODAY 0.0
#define AGENT_ALLOCS_BUDGET (AGENT_ALLOCS_TODAY + 0.1)

/* Read system calls per cycle, same window (/proc/self/io's syscr): the scenario's processes
 * are all this one, so one read of its /proc/PID/stat through the kept descriptor. It was 2.00
 * while each stat read went on to a second read for the end of the file (backend/procfs.c
 * pf_read_fd_once). The margin of 0.5 lets a read on a slow cadence come in (up to 30 in the
 * 60 cycles); one more read every cycle, or one more per process, is over. */
#define AGENT_READS_TODAY 1.0
#define AGENT_READS_BUDGET (AGENT_READS_TODAY + 0.5)

static void agent_cycle_within_budget(void **state)
{
    struct cycle_cost c;
    int n_over;

    (void)state;
    if (!sim_lib())
        skip();
    c = agent_cycle_cost();
    n_over = over("agent cycle, NVML calls", c.nvml_calls, AGENT_NVML_CALLS_TODAY,
                  AGENT_NVML_CALLS_BUDGET);
    n_over +=
        over("agent cycle, heap allocations", c.allocs, AGENT_ALLOCS_TODAY, AGENT_ALLOCS_BUDGET);
    n_over +=
        over("agent cycle, read system calls", c.reads, AGENT_READS_TODAY, AGENT_READS_BUDGET);
    if (n_over)
        fail_msg("%d budget(s) exceeded", n_over);
}

/* The counting allocator counts (a test that cannot fail is no test). */
static void allocator_counts(void **state)
{
    /* Sizes and text through volatile objects: the compiler may drop an allocation it can see
     * is freed unused, which would not test the counter. */
    static volatile size_t small = 16, big = 4096;
    static char text[] = "counted through libc";
    char *volatile s;
    void *volatile p = NULL;
    unsigned long long before = atomic_load(&n_alloc);

    (void)state;
    s = malloc(small);
    assert_non_null(s);
    s[0] = 'x';
    s = realloc(s, big);
    assert_non_null(s);
    assert_int_equal(s[0], 'x');
    free(s);
    assert_int_equal(posix_memalign((void **)&p, 64, big), 0);
    free(p);
    s = strdup(text);
    assert_string_equal(s, text);
    free(s);
    assert_int_equal(atomic_load(&n_alloc) - before, 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(allocator_counts),
        cmocka_unit_test(agent_cycle_within_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
