/*
 * gpuscope: one binary, subcommands. main() only dispatches; each subcommand parses its own
 * options and returns the exit status.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

/* GS_VERSION: meson's project version (meson.build). */

struct subcommand {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
};

static const struct subcommand subcommands[] = {
    {"query", gs_cli_query, "nvidia-smi compatible --query-gpu / --query-compute-apps"},
    {"agent", gs_cli_agent, "per-node daemon: Prometheus /metrics, JSON API"},
    {"demo", gs_cli_demo, "the agent on a bundled nvml-sim scenario, no GPU needed"},
    {"run", gs_cli_run, "run a training command and profile its steps and GPUs"},
    {"tune", gs_cli_tune, "try settings on the real job: before/after table, the change"},
    {"stacks", gs_cli_stacks, "Python stacks of a running process: top, --dump, --record"},
    {"trace", gs_cli_trace, "analyse PyTorch profiler traces (kernels, idle, overlap)"},
    {"report", gs_cli_report, "a run as one self-contained HTML page (charts, findings)"},
    {"compare", gs_cli_compare, "runs side by side: fields, phases, settings, findings"},
    {"runs", gs_cli_runs, "the training runs the local agent received: table or --json"},
    {"usage", gs_cli_usage, "GPU-hours held, busy and idle by user, job, pod or GPU; cost"},
    {"jobstats", gs_cli_jobstats, "a job's end-of-job summary: GPUs, utilization, memory, notes"},
    {"top", gs_cli_top, "full-screen live view: GPUs, processes, training runs"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: gpuscope [OPTIONS]            quick check of every GPU (see --help)\n"
                 "       gpuscope COMMAND [OPTIONS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        fprintf(out, "  %-10s %s\n", subcommands[i].name, subcommands[i].summary);
    fprintf(out, "  %-10s %s\n", "help", "show help of a command: gpuscope help query");
    fprintf(out, "\nRun 'gpuscope COMMAND --help' for a command's options.\n");
}

int main(int argc, char **argv)
{
    const char *cmd = argc > 1 ? argv[1] : NULL;

    if (cmd && (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0)) {
        printf("gpuscope %s\n", GS_VERSION);
        return 0;
    }
    if (cmd && strcmp(cmd, "help") == 0) {
        if (argc > 2) {
            for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
                if (strcmp(argv[2], subcommands[i].name) == 0) {
                    char *hargv[] = {argv[2], "--help", NULL};
                    return subcommands[i].run(2, hargv);
                }
            fprintf(stderr, "gpuscope: unknown command '%s'\n", argv[2]);
            return 2;
        }
        usage(stdout);
        return 0;
    }
    if (cmd && cmd[0] != '-') {
        for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
            if (strcmp(cmd, subcommands[i].name) == 0)
                return subcommands[i].run(argc - 1, argv + 1);
        fprintf(stderr, "gpuscope: unknown command '%s'\n", cmd);
        usage(stderr);
        return 2;
    }
    return gs_cli_quick(argc, argv);
}
