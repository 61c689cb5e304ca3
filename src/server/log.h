/* batond's log lines, on stderr, in one of three forms:
 *
 *   text     "batond: MESSAGE" (the default on a terminal or a file)
 *   journal  "<N>MESSAGE", N the syslog priority, no timestamp and no
 *            program name: journald adds both (sd-daemon(3), "<N>"
 *            prefixes). The default when stderr is the journal's stream
 *            ($JOURNAL_STREAM names stderr's device and inode, as
 *            systemd.exec(5) says to check).
 *   json     one JSON object a line (--log-format json), for log pipelines:
 *            {"ts":"2026-12-01T19:31:02.123Z","level":"info",
 *             "kind":"connection","msg":"...", FIELDS...}; ts is UTC with
 *            milliseconds, level one of err, warning, notice, info.
 *
 * Every line is one write(2), so lines of different threads never
 * interleave. The format is set once, before the server's threads start.
 * Nothing here opens a file or reads the time zone: it runs under the
 * seccomp allow-list (policy/seccomp.list). */
#ifndef BATON_SERVER_LOG_H
#define BATON_SERVER_LOG_H

#include <stdarg.h>
#include <stddef.h>

enum baton_log_format { BATON_LOG_TEXT = 0, BATON_LOG_JOURNAL = 1, BATON_LOG_JSON = 2 };

/* syslog priorities (syslog(3)), the numbers journald reads */
enum baton_log_level {
    BATON_LOG_ERR = 3,
    BATON_LOG_WARNING = 4,
    BATON_LOG_NOTICE = 5,
    BATON_LOG_INFO = 6
};

/* One extra field of a JSON line: a string, or (str NULL) a number. */
struct baton_log_field {
    const char *key;
    const char *str;
    long long num;
};

/* Parses "text", "json" or "journal" (0), else -1. */
int baton_log_format_parse(const char *name, enum baton_log_format *out);
/* 1 when stderr is the journal's stream ($JOURNAL_STREAM "DEV:INO" is
 * stderr's), else 0. */
int baton_log_stderr_is_journal(void);
void baton_log_set_format(enum baton_log_format f);
enum baton_log_format baton_log_get_format(void);

/* Formats one line into buf (at most len bytes, NUL-terminated, ending in
 * '\n'; a long message is cut, the JSON stays well-formed) and returns its
 * length. ts_ms is the time in ms since the epoch (json only). kind names
 * the kind of line (json "kind"; may be NULL). */
size_t baton_log_format_line(char *buf, size_t len, enum baton_log_format f, int level,
                             const char *kind, const struct baton_log_field *fields,
                             unsigned n_fields, long long ts_ms, const char *msg);

/* Writes one line in the current format to stderr. */
void baton_log(int level, const char *kind, const struct baton_log_field *fields,
               unsigned n_fields, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
void baton_vlog(int level, const char *kind, const struct baton_log_field *fields,
                unsigned n_fields, const char *fmt, va_list ap);

#endif
