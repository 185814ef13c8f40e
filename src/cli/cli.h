/*
 * Entry points of the subcommands. Each parses its own options from one table, runs, and
 * returns the process exit status; only main() exits.
 */
#ifndef GS_CLI_H
#define GS_CLI_H

/* `gpuscope [OPTIONS]`: the gpustat-like quick check (quick.c). */
int gs_cli_quick(int argc, char **argv);

/* `gpuscope query ...`: nvidia-smi compatible --query-gpu / --query-compute-apps (query.c). */
int gs_cli_query(int argc, char **argv);

/* `gpuscope agent ...`: the per-node daemon (agent.c, src/agent/). */
int gs_cli_agent(int argc, char **argv);

/* `gpuscope demo ...`: the agent on an nvml-sim scenario, temporary data dir (demo.c). */
int gs_cli_demo(int argc, char **argv);

/* `gpuscope run ... -- CMD`: runs and profiles a training command (run.c, src/run/). */
int gs_cli_run(int argc, char **argv);

/* `gpuscope stacks PID`: Python stacks of a running process (stacks.c, src/stacks/). */
int gs_cli_stacks(int argc, char **argv);
/* `gpuscope trace analyze ...`: PyTorch profiler trace analysis (trace.c, src/trace/). */
int gs_cli_trace(int argc, char **argv);

/* `gpuscope report RUN`: a run as a self-contained HTML page (report.c, src/runview/). */
int gs_cli_report(int argc, char **argv);

/* `gpuscope compare A B ...`: runs side by side (compare.c, src/runview/compare.c). */
int gs_cli_compare(int argc, char **argv);

/* `gpuscope tune ... -- CMD`: trials of settings that may make a training job faster
 * (src/cli/tune/, docs/tune.md). */
int gs_cli_tune(int argc, char **argv);

/* `gpuscope runs`: the local agent's training runs, a table or --json (runs.c, docs/runs.md). */
int gs_cli_runs(int argc, char **argv);

/* `gpuscope usage`: the agent's GPU usage accounting, a table, --csv or --json (usage.c,
 * docs/usage.md). */
int gs_cli_usage(int argc, char **argv);

/* `gpuscope jobstats ID`: a job's end-of-job summary from the agents (jobstats.c,
 * docs/jobstats.md). */
int gs_cli_jobstats(int argc, char **argv);

/* `gpuscope top`: the full-screen view (top_load.c loads gpuscope-top.so, src/top/). */
int gs_cli_top(int argc, char **argv);

/* Exit statuses: GS_EXIT_OK, GS_EXIT_USAGE (gpuscope/gs_err.h). */
#include "gpuscope/gs_err.h"

#endif
