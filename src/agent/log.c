/*
 * The agent's log sink (log.h): priority-prefixed lines on stderr, level checked first.
 */
#include "agent/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static atomic_int gs_log_level_now = GS_LOG_INFO;

void gs_log_set_level(enum gs_log_level level)
{
    atomic_store(&gs_log_level_now, (int)level);
}

const char *gs_log_level_name(enum gs_log_level level)
{
    switch (level) {
    case GS_LOG_ERROR:
        return "error";
    case GS_LOG_WARN:
        return "warn";
    case GS_LOG_INFO:
        return "info";
    case GS_LOG_DEBUG:
        return "debug";
    }
    return "?";
}

int gs_log_parse(const char *name)
{
    static const enum gs_log_level all[] = {GS_LOG_ERROR, GS_LOG_WARN, GS_LOG_INFO, GS_LOG_DEBUG};

    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strcmp(name, gs_log_level_name(all[i])) == 0)
            return (int)all[i];
    return -1;
}

void gs_log(enum gs_log_level level, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    int n, m;

    if ((int)level > atomic_load(&gs_log_level_now))
        return;
    n = snprintf(line, sizeof line, "<%d>%s: ", (int)level, gs_log_level_name(level));
    va_start(ap, fmt);
    m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m < 0)
        m = 0;
    n += m;
    if ((size_t)n > sizeof line - 2)
        n = (int)sizeof line - 2; /* cut, but always one whole line */
    for (int i = 0; i < n; i++)
        if (line[i] == '\n')
            line[i] = ' ';
    line[n++] = '\n';
    if (write(STDERR_FILENO, line, (size_t)n) < 0) {
        /* Nowhere left to say it. */
    }
}
