/*
 * `gpuscope agent`: reads the command line and the configuration (src/agent/config.c), then
 * runs the daemon (src/agent/agent.c). A bad configuration is refused before anything starts.
 */
#include <stdio.h>

#include "agent/agent.h"
#include "agent/config.h"
#include "cli/cli.h"
#include "gpuscope/gs_err.h"

int gs_cli_agent(int argc, char **argv)
{
    struct gs_agent_args args;
    struct gs_agent_config cfg;
    struct gs_err err;
    int rc;

    gs_err_clear(&err);
    rc = gs_config_parse_args(&args, argc, argv, &err);
    if (rc != GS_OK) {
        fprintf(stderr, "gpuscope: %s\n", err.msg);
        return GS_EXIT_USAGE;
    }
    if (args.help) {
        gs_config_usage(stdout);
        return GS_EXIT_OK;
    }
    rc = gs_config_build(&cfg, &args, argc, argv, &err);
    if (rc != GS_OK) {
        fprintf(stderr, "gpuscope: %s\n", err.msg);
        return GS_EXIT_USAGE;
    }
    if (args.check) {
        gs_config_write(stdout, &cfg);
        return GS_EXIT_OK;
    }
    rc = gs_agent_run(&cfg, &args, argc, argv, NULL, &err);
    if (rc != GS_OK) {
        fprintf(stderr, "gpuscope: %s\n", err.msg[0] ? err.msg : gs_strerror(rc));
        return gs_rc_exit_code(rc);
    }
    return GS_EXIT_OK;
}
