/*
 * The agent's log sink: one line per event on stderr, prefixed with the sd-daemon(3) priority
 * (`<3>` error, `<4>` warning, `<6>` info, `<7>` debug) so journald files each line at its
 * level when the agent runs under systemd, followed by the level name for a human reading a
 * terminal: `<6>info: http: listening on 127.0.0.1:9400`.
 *
 * Threads: gs_log may be called from any thread; the level is an atomic, checked before any
 * formatting, and each line goes out in one write(2) so lines from two threads never mix.
 */
#ifndef GS_AGENT_LOG_H
#define GS_AGENT_LOG_H

enum gs_log_level {
    GS_LOG_ERROR = 3, /* values are the syslog priorities */
    GS_LOG_WARN = 4,
    GS_LOG_INFO = 6,
    GS_LOG_DEBUG = 7,
};

/* Lines above this level are dropped (default GS_LOG_INFO). */
void gs_log_set_level(enum gs_log_level level);

void gs_log(enum gs_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* "error", "warn", "info", "debug" <-> the level; gs_log_parse returns -1 for another name. */
const char *gs_log_level_name(enum gs_log_level level);
int gs_log_parse(const char *name);

#endif
