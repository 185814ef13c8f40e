/* placeholder until query lands */
#include <stdio.h>
#include "cli/cli.h"
int gs_cli_query(int argc, char **argv)
{
    (void)argc; (void)argv;
    fprintf(stderr, "gpuscope: query not built yet\n");
    return 255;
}
