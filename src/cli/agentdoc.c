/*
 * The agent's answer to `gpuscope runs` / `gpuscope usage`: as it came, or checked and parsed
 * (agentdoc.h).
 */
#include "cli/agentdoc.h"

#include <stdio.h>
#include <stdlib.h>

#include "gpuscope/gs_err.h"

int gs_cli_agent_doc(const char *cmd, const char *where, char *body, size_t len, int raw,
                     const char *key, json_t **doc)
{
    json_error_t je;

    *doc = NULL;
    if (raw) {
        fwrite(body, 1, len, stdout);
        if (len == 0 || body[len - 1] != '\n')
            putchar('\n');
        free(body);
        return fflush(stdout) == 0 ? GS_EXIT_OK : gs_rc_exit_code(GS_EIO);
    }
    *doc = json_loadb(body, len, 0, &je);
    free(body);
    if (!json_is_object(*doc) || !json_is_array(json_object_get(*doc, key))) {
        if (*doc)
            fprintf(stderr, "gpuscope %s: %s: not a %s document: no %s array\n", cmd, where, cmd,
                    key);
        else
            fprintf(stderr, "gpuscope %s: %s: not a %s document: %s\n", cmd, where, cmd, je.text);
        json_decref(*doc);
        *doc = NULL;
        return gs_rc_exit_code(GS_EPARSE);
    }
    return -1;
}
