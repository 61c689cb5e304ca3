/* batond's log lines (log.h). */
#include "server/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static enum baton_log_format g_format = BATON_LOG_TEXT;

int baton_log_format_parse(const char *name, enum baton_log_format *out)
{
    if (!strcmp(name, "text"))
        *out = BATON_LOG_TEXT;
    else if (!strcmp(name, "json"))
        *out = BATON_LOG_JSON;
    else if (!strcmp(name, "journal"))
        *out = BATON_LOG_JOURNAL;
    else
        return -1;
    return 0;
}

int baton_log_stderr_is_journal(void)
{
    const char *js = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    struct stat st;
    char end;

    if (js == NULL || sscanf(js, "%llu:%llu%c", &dev, &ino, &end) != 2)
        return 0;
    if (fstat(STDERR_FILENO, &st) != 0)
        return 0;
    return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void baton_log_set_format(enum baton_log_format f)
{
    g_format = f;
}

enum baton_log_format baton_log_get_format(void)
{
    return g_format;
}

static const char *level_name(int level)
{
    switch (level) {
    case BATON_LOG_ERR:
        return "err";
    case BATON_LOG_WARNING:
        return "warning";
    case BATON_LOG_NOTICE:
        return "notice";
    default:
        return "info";
    }
}

/* A bounded appender: once full it drops the rest, keeping room for the
 * closing "}\n" that json_close writes. */
struct out {
    char *p;
    size_t len, used, reserve;
};

static void put(struct out *o, const char *s, size_t n)
{
    size_t room;
    if (o->used + o->reserve + 1 > o->len)
        return;
    room = o->len - 1 - o->reserve - o->used;
    if (n > room)
        n = room;
    memcpy(o->p + o->used, s, n);
    o->used += n;
    o->p[o->used] = '\0';
}

static void puts_(struct out *o, const char *s)
{
    put(o, s, strlen(s));
}

/* s as the inside of a JSON string (RFC 8259 section 7): quote, backslash
 * and control characters escaped; a byte over 0x7f (messages are ASCII; a
 * name from a peer might not be) becomes U+FFFD, so the line is always
 * valid UTF-8. An escape is written whole or not at all. */
static void put_json_str(struct out *o, const char *s)
{
    char esc[8];
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        const char *e = NULL;
        size_t n, room;
        if (c == '"')
            e = "\\\"";
        else if (c == '\\')
            e = "\\\\";
        else if (c == '\n')
            e = "\\n";
        else if (c == '\t')
            e = "\\t";
        else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            e = esc;
        } else if (c > 0x7f)
            e = "\\ufffd";
        n = e ? strlen(e) : 1;
        if (o->used + o->reserve + 1 > o->len)
            return;
        room = o->len - 1 - o->reserve - o->used;
        if (n > room)
            return;
        if (e)
            put(o, e, n);
        else
            put(o, (const char *)&c, 1);
    }
}

/* s for a text or journal line: LF, CR and the other control bytes but TAB
 * (C0, DEL) as \n, \r, \xNN, so no message can end its line early or
 * start a forged one (a name from a peer, a path an operator typed) nor
 * send a terminal an escape sequence. An escape is written whole or not at
 * all. */
static void put_text_str(struct out *o, const char *s)
{
    char esc[8];
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        const char *e = NULL;
        size_t n;
        if (c == '\n')
            e = "\\n";
        else if (c == '\r')
            e = "\\r";
        else if ((c < 0x20 && c != '\t') || c == 0x7f) {
            snprintf(esc, sizeof esc, "\\x%02x", c);
            e = esc;
        }
        n = e ? strlen(e) : 1;
        if (o->used + o->reserve + 1 > o->len || n > o->len - 1 - o->reserve - o->used)
            return;
        put(o, e ? e : (const char *)&c, n);
    }
}

/* s as a JSON string, quotes included: the closing quote is always
 * written once the opening one was (the content may be cut). */
static void put_json_string(struct out *o, const char *s)
{
    if (o->used + o->reserve + 3 > o->len)
        return;
    put(o, "\"", 1);
    o->reserve++;
    put_json_str(o, s);
    o->reserve--;
    put(o, "\"", 1);
}

/* Civil date of a day count since 1970-01-01 (proleptic Gregorian), by
 * eras of 400 years as in H. Hinnant, "chrono-Compatible Low-Level Date
 * Algorithms" (days_from_civil's inverse). Not gmtime_r: glibc reads the
 * time zone file on first use, which the sandbox would refuse. */
static void civil_from_days(long long z, int *y, unsigned *m, unsigned *d)
{
    long long era, yy;
    unsigned doe, yoe, doy, mp;

    z += 719468;
    era = (z >= 0 ? z : z - 146096) / 146097;
    doe = (unsigned)(z - era * 146097);
    yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    yy = (long long)yoe + era * 400;
    doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = (int)(yy + (*m <= 2));
}

size_t baton_log_format_line(char *buf, size_t len, enum baton_log_format f, int level,
                             const char *kind, const struct baton_log_field *fields,
                             unsigned n_fields, long long ts_ms, const char *msg)
{
    struct out o = {buf, len, 0, 0};
    char tmp[64];

    if (len == 0)
        return 0;
    buf[0] = '\0';
    if (len < 64)
        return 0; /* callers pass a line buffer; too small for any line */
    o.reserve = f == BATON_LOG_JSON ? 2 : 1; /* "}\n" or "\n" */
    if (f == BATON_LOG_TEXT) {
        puts_(&o, "batond: ");
        put_text_str(&o, msg);
    } else if (f == BATON_LOG_JOURNAL) {
        snprintf(tmp, sizeof tmp, "<%d>", level);
        puts_(&o, tmp);
        put_text_str(&o, msg);
    } else {
        long long days = ts_ms / 86400000, ms_of_day = ts_ms % 86400000;
        int y;
        unsigned m, d;
        if (ms_of_day < 0) {
            ms_of_day += 86400000;
            days--;
        }
        civil_from_days(days, &y, &m, &d);
        snprintf(tmp, sizeof tmp, "{\"ts\":\"%04d-%02u-%02uT%02lld:%02lld:%02lld.%03lldZ\"", y, m,
                 d, ms_of_day / 3600000, ms_of_day / 60000 % 60, ms_of_day / 1000 % 60,
                 ms_of_day % 1000);
        puts_(&o, tmp);
        puts_(&o, ",\"level\":\"");
        puts_(&o, level_name(level));
        puts_(&o, "\"");
        if (kind) {
            puts_(&o, ",\"kind\":");
            put_json_string(&o, kind);
        }
        puts_(&o, ",\"msg\":");
        put_json_string(&o, msg);
        for (unsigned i = 0; i < n_fields; i++) {
            /* each field whole or not at all */
            char fb[256];
            struct out fo = {fb, sizeof fb, 0, 0};
            fb[0] = '\0';
            puts_(&fo, ",");
            put_json_string(&fo, fields[i].key);
            puts_(&fo, ":");
            if (fields[i].str) {
                put_json_string(&fo, fields[i].str);
            } else {
                snprintf(tmp, sizeof tmp, "%lld", fields[i].num);
                puts_(&fo, tmp);
            }
            if (fo.used + 2 < sizeof fb && o.used + o.reserve + fo.used < o.len)
                put(&o, fb, fo.used);
        }
        o.reserve = 1;
        puts_(&o, "}");
    }
    o.reserve = 0;
    puts_(&o, "\n");
    return o.used;
}

void baton_vlog(int level, const char *kind, const struct baton_log_field *fields,
                unsigned n_fields, const char *fmt, va_list ap)
{
    char msg[512], line[1024];
    struct timespec ts = {0, 0};
    size_t n;

    vsnprintf(msg, sizeof msg, fmt, ap);
    if (g_format == BATON_LOG_JSON)
        clock_gettime(CLOCK_REALTIME, &ts);
    n = baton_log_format_line(line, sizeof line, g_format, level, kind, fields, n_fields,
                              (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000, msg);
    if (n > 0 && write(STDERR_FILENO, line, n) < 0) {
        /* nowhere left to say it */
    }
}

void baton_log(int level, const char *kind, const struct baton_log_field *fields,
               unsigned n_fields, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    baton_vlog(level, kind, fields, n_fields, fmt, ap);
    va_end(ap);
}
