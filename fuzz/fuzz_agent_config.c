/*
 * libFuzzer target for the agent's INI configuration (src/agent/config.c):
 * gs_config_parse_text with its section header, comments, `key = value` splitting, quotes,
 * CR/LF handling and every key type (listen address, bounded number, enum, log level,
 * duration, path). A successful parse is checked against what the agent relies on
 * (terminated listen address that splits into host and port, numbers within bounds, known
 * enum values, a terminated data dir); a failed one
 * must leave a terminated "FILE:LINE: ..." message. gs_config_write of the result is then
 * parsed again and must give the same configuration.
 *
 * Input: the file's text; seeds are in fuzz/corpus/agent_config/ (deploy/agent.conf and edge
 * cases). Build and run: make fuzz (fuzz/meson.build, scripts/fuzz.sh).
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/config.h"
#include "agent/log.h"
#include "gpuscope/gs_err.h"

#include "fuzz_util.h"

static void check_config(const struct gs_agent_config *c)
{
    char host[GS_LISTEN_LEN];
    unsigned port = 0;

    CHECK(memchr(c->listen, '\0', sizeof c->listen) != NULL);
    CHECK(gs_config_split_listen(c->listen, host, sizeof host, &port) == GS_OK);
    CHECK(port >= 1 && port <= 65535);
    CHECK(isfinite(c->interval_s) && c->interval_s >= 0.1 && c->interval_s <= 60);
    CHECK(c->metrics_compat == GS_COMPAT_NONE || c->metrics_compat == GS_COMPAT_DCGM ||
          c->metrics_compat == GS_COMPAT_DCGM3);
    CHECK(c->log_level == GS_LOG_ERROR || c->log_level == GS_LOG_WARN ||
          c->log_level == GS_LOG_INFO || c->log_level == GS_LOG_DEBUG);
    CHECK(memchr(c->data_dir, '\0', sizeof c->data_dir) != NULL && c->data_dir[0]);
    CHECK(c->history == GS_HISTORY_OFF || c->history == GS_HISTORY_ON);
    CHECK(c->flush_interval_s >= 1 && c->flush_interval_s <= 300);
    CHECK(c->retention_raw_s >= 60 && c->retention_raw_s <= 3650 * 86400.0);
    CHECK(c->retention_rollup_s >= 60 && c->retention_rollup_s <= 3650 * 86400.0);
}

/* What --check-config prints must read back as the same configuration (the interval to %g's
 * six digits). */
static void check_round_trip(const struct gs_agent_config *c)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    struct gs_agent_config back;
    struct gs_err err = {0};

    if (!f)
        return;
    gs_config_write(f, c);
    if (fclose(f) != 0 || !text) {
        free(text);
        return;
    }
    gs_config_defaults(&back);
    CHECK(gs_config_parse_text(&back, "written", text, &err) == GS_OK);
    CHECK(strcmp(back.listen, c->listen) == 0);
    CHECK(fabs(back.interval_s - c->interval_s) <= 1e-5 * c->interval_s);
    CHECK(back.metrics_compat == c->metrics_compat);
    CHECK(back.log_level == c->log_level);
    CHECK(strcmp(back.data_dir, c->data_dir) == 0);
    CHECK(back.history == c->history);
    CHECK(fabs(back.flush_interval_s - c->flush_interval_s) <= 1e-5 * c->flush_interval_s);
    CHECK(back.retention_raw_s == c->retention_raw_s); /* %.17g: exact */
    CHECK(back.retention_rollup_s == c->retention_rollup_s);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The file reader refuses NUL bytes; the text parser sees what comes before the first. */
    char *text = gs_fuzz_dup_text(data, size);
    struct gs_agent_config c;
    struct gs_err err = {0};

    if (!text)
        return 0;
    gs_config_defaults(&c);
    if (gs_config_parse_text(&c, "fuzz.conf", text, &err) != GS_OK) {
        CHECK(err.rc == GS_EINVAL);
        CHECK(memchr(err.msg, '\0', sizeof err.msg) != NULL);
        CHECK(strncmp(err.msg, "fuzz.conf:", 10) == 0);
    } else {
        check_config(&c);
        check_round_trip(&c);
    }
    free(text);
    return 0;
}
