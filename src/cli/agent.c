/*
 * `gpuscope agent`: reads the command line and the configuration (src/agent/config.c), then
 * runs the daemon (src/agent/agent.c). A bad configuration is refused before anything starts.
 */
#include <stdio.h>
#include <string.h>

#include "agent/agent.h"
#include "agent/auth.h"
#include "agent/config.h"
#include "cli/cli.h"
#include "gpuscope/gs_err.h"

/* `gpuscope agent --new-token ROLE [USER]`: a fresh token on stdout, once, and the tokens-file
 * line that admits it (docs/security.md). Nothing is written anywhere. */
static int new_token(int argc, char **argv)
{
    char token[GS_AUTH_TOKEN_LEN + 1], line[256];
    struct gs_err err;
    enum gs_role role = argc >= 3 ? gs_auth_role_parse(argv[2]) : GS_ROLE_NONE;

    gs_err_clear(&err);
    if (argc < 3 || argc > 4 || role == GS_ROLE_NONE) {
        fprintf(stderr, "usage: gpuscope agent --new-token admin|viewer|metrics [USER]\n");
        return GS_EXIT_USAGE;
    }
    if (gs_auth_new_token(role, argc == 4 ? argv[3] : NULL, token, line, sizeof line, &err) !=
        GS_OK) {
        fprintf(stderr, "gpuscope: %s\n", err.msg);
        return GS_EXIT_USAGE;
    }
    printf("token: %s\n# add this line to the tokens file (tokens_file), then SIGHUP the agent;\n"
           "# the token is shown only now: clients send 'Authorization: Bearer TOKEN'\n%s\n",
           token, line);
    return GS_EXIT_OK;
}

int gs_cli_agent(int argc, char **argv)
{
    struct gs_agent_args args;
    struct gs_agent_config cfg;
    struct gs_err err;
    int rc;

    if (argc >= 2 && strcmp(argv[1], "--new-token") == 0)
        return new_token(argc, argv);
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
