/*
 * run_int.h - what the files of `gpuscope run` share (src/cli/run/): its options (run_opts.c),
 * the run's context, and the child and its files (run_child.c); run.c is the session.
 */
#ifndef GS_CLI_RUN_INT_H
#define GS_CLI_RUN_INT_H

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/types.h>

#include "gpuscope/gs_model.h"
#include "run/record.h"
#include "run/runstacks.h"
#include "run/session.h"
#include "store/history.h"

#define RUN_EXIT_WRITE 123    /* CMD exited 0 but DIR could not be written completely */
#define RUN_EXIT_FAIL 125     /* gpuscope run itself failed; CMD did not run */
#define RUN_EXIT_NOEXEC 126   /* CMD found but not executable */
#define RUN_EXIT_NOTFOUND 127 /* CMD not found */
#define RUN_FLUSH_S 1         /* samples.db flush period (s): a killed run loses at most this */
#define RUN_DRAIN_S 2.0       /* after CMD exits: wait for its connections to close ... */
#define RUN_DRAIN_MAX_S 30.0  /* ... 2 s without a record, 30 s at most while records come */
#define RUN_STEP_FLUSH 2000   /* step records buffered in samples.db's store at most */

#define RUN_MAX_TAGS 16
#define RUN_MAX_RANKS 1024 /* ranks counted by --stop-after-steps */

struct run_opts {
    const char *out;
    double interval_s;
    int auto_inject;
    int help;
    const char *profile; /* --profile STEPS (trace/window.h) */
    char **cmd;          /* NULL-terminated */
    double stacks_hz;    /* --stacks: rank main-thread samples per second, 0 = off */
    double hang_factor;  /* --hang-after: multiple of the p95 step time, 0 = no watchdog */
    double hang_min_s;   /* --hang-min */
    int log_steps;    /* --log-steps: the package's step lines every N steps, 0 none; -1 its own */
    const char *name; /* --name */
    const char *job;  /* --job: the job id every rank shares (docs/run.md, JOBS) */
    const char *tags[RUN_MAX_TAGS]; /* --tag K=V */
    unsigned n_tags;
    int no_agent; /* --no-agent: the node's agent does not get the records */
    /* --stop-after-steps N: stop CMD's process group (SIGTERM, --stop-grace S, SIGKILL) once
     * every rank that sent steps has sent N of them; 0: run to its end. CMD then runs in its
     * own process group. */
    long stop_after_steps;
    double stop_grace_s;
};

struct run_ctx {
    pthread_mutex_t mu;
    struct gs_session *session; /* the aggregate and the records' counters, own lock */
    int dirfd;                  /* the run directory, opened once and checked (base/dirfile.h) */
    FILE *steps;
    unsigned steps_lines;
    int steps_failed;
    int store_failed; /* samples.db flushes that failed (store_mu) */
    /* CUDA device indices named by hello records */
    unsigned char cuda_dev[GS_RECORD_MAX_DEVICES];
    unsigned closed_conns;
    char last_reject[200];
    /* the first step record refused for its time (run/record.h's rule): why */
    char refused_why[200];
    const struct run_opts *opts;
    char default_name[300]; /* script and start time: the name of an unnamed run */
    /* sampler thread */
    struct gs_sampler *sampler;
    pthread_mutex_t store_mu;
    struct gs_store *store;
    int64_t run_id;
    double interval_s;
    pid_t child;
    int stop;
    pthread_cond_t cv;
    struct gs_runstacks *rs;   /* --stacks sampler and hang watchdog; NULL when off */
    double job_start, job_end; /* CMD's start and exit, unix seconds (train_runtime) */
    pid_t hello_pid;           /* the first hello's sender (SO_PEERCRED): the agent's run pid */
    /* --stop-after-steps: step records per rank (ranks 0..RUN_MAX_RANKS-1), the stop asked
     * (by the receiver's thread) and done (by the stopper), CMD's exit seen by main */
    unsigned long rank_steps[RUN_MAX_RANKS];
    int stop_asked, stopped, child_exited;
};

void gs_runcli_usage(FILE *out);
int gs_runcli_parse(struct run_opts *o, int argc, char **argv);
int gs_runcli_open_outdir(const char *dir, int *created);
void gs_runcli_remove_outputs(int dirfd, const char *dir, int created);
void gs_runcli_give_to_sudo_user(int dirfd, int created);
int gs_runcli_profile_env(const char *dir, const char *spec);
int gs_runcli_child_env(const char *sock, const char *dir, int auto_inject);
void gs_runcli_signals(sigset_t *set);
int gs_runcli_cmd_exists(const char *cmd);
/* own_group: CMD leads a process group of its own (--stop-after-steps), to which the
 * forwarded signals then go whole. */
pid_t gs_runcli_spawn(char **cmd, const sigset_t *fwd, int own_group);
int gs_runcli_wait(pid_t pid, int *sig);

/* The child the forwarded signals go to (0: none); whether a Ctrl-C came. */
void gs_runcli_child_set(pid_t pid);
int gs_runcli_interrupted(void);
/* The first SIGTERM, SIGINT or SIGHUP gpuscope run received (and passed on to CMD): a stop
 * from outside; 0 when none. */
int gs_runcli_stop_signal(void);

#endif
