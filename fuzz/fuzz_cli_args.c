/* Fuzz target cli_args: the command-line parsers of `baton` and `batond`
 *   (a) integer option values, baton_cli_parse_u64 / baton_cli_parse_u32
 *       (src/cli/cli_args.c, compiled into this target);
 *   (b) the stage list, baton_run_check_stages (src/model/run.c): --servers
 *       ("local", or 1..64 comma-separated host:port / host:port@peerhost:
 *       peerport entries; a host of letters, digits, '.', '-', '_', or an
 *       IPv6 address with an optional %zone in brackets) and --split
 *       (baton_split_parse: plain decimals) against it;
 *   (c) decimal option values (--temp, --top-p), baton_cli_parse_float
 *       (src/cli/cli_args.c);
 *   (d) on/off option values (--p2p, --pipeline, --ring of baton run and
 *       baton bench), baton_cli_parse_onoff (src/cli/cli_args.c).
 *
 * Input: byte 0 selects the parser, the rest is the text. Every string is
 * an exact-size heap copy ending at the first NUL (argv cannot hold one),
 * so a read past its terminator is a heap overflow under ASan.
 *   byte 0 bit 7 = 0: integer value. Bit 6: parse_u32 (else parse_u64);
 *     bits 0-2: min, bits 3-5: max, from the tables below (clamped to
 *     UINT32_MAX for u32, swapped when min > max: callers pass min <= max).
 *     The value is bytes 1.. .
 *   byte 0 bits 7-5 = 110: decimal value, baton_cli_parse_float (cli_args.c).
 *     Bits 0-1 pick the bounds: [0, 100] (--temp), (0, 1] (--top-p),
 *     [-1, 1], (1e-3, 1e3]. The value is bytes 1.. .
 *   byte 0 bits 7-5 = 111: on/off value, baton_cli_parse_onoff, or with
 *     bit 1 set a --kv-type value, baton_cli_parse_kv_type; bit 0: the
 *     start value of *out (0 or 1; F32 or F16). The value is bytes 1.. .
 *   byte 0 bits 7-6 = 10: stage list. Bits 0-1: servers_name (NULL, "--servers",
 *     "BATON_SERVERS", "-s"); bit 2: --split given; bits 3-4: cfg->prog
 *     (NULL, "baton run", "baton bench", ""). --servers is bytes 1.. up to
 *     the first LF; --split is what follows that LF ("" when there is none).
 *
 * Output of the parsers goes to a memstream (stderr is swapped for one
 * around the integer parser: glibc lets stderr be assigned), so fuzzing
 * prints nothing, and the messages are checked.
 *
 * Properties, against oracles written here from cli.h, run.h, split.h and
 * the rules stated in run.c's comments:
 *   (a) the result is 0 or -1 and is the reference's: digits only with at
 *       most one leading '-', "-0" is 0, any other '-' value is too small,
 *       past 2^64 - 1 (decided on the decimal string, not by arithmetic) is
 *       too large, else the range [min, max]; on success the value equals
 *       the reference decimal conversion and lies in [min, max] and nothing
 *       is printed; on failure *out is untouched and exactly the documented
 *       message "fuzz: -n: 'S' is not an integer | is too large (at most MAX)
 *       | is too small (at least MIN)" is printed (for an S of '=' and more,
 *       "-n=4" as getopt hands it over, "'S' is not an integer (write
 *       -n REST, without '=')"); parse_u32 agrees with
 *       parse_u64 on the same bounds (result, value and message).
 *   (c) decimal values: the result is 0 or -1 and is the reference's: the
 *       grammar is a POSIX regular expression written from cli.h
 *       (-?(D+.?D*|.D+)([eE][+-]?D+)?), then strtod's value within the
 *       bounds, then the float it rounds to within them too; on success
 *       *out is that float and nothing is printed; on failure *out is
 *       untouched and exactly the documented message is printed.
 *   (d) on/off: 0 exactly for "on" (*out 1) and "off" (*out 0), nothing
 *       printed; else -1, *out untouched and exactly "fuzz: --p2p: 'S' is
 *       not on or off" printed. --kv-type the same with "f32" (F32) and
 *       "f16" (F16), and "fuzz: --kv-type: 'S' is not f32 or f16".
 *   (b) the result is 0 or 2 and is the reference's (entries checked in
 *       order: a 65th entry, then empty, then malformed; then --split, then
 *       the count); 0 prints nothing; 2 prints exactly one message that
 *       starts with cfg->prog (or "baton") and ": " and is the documented
 *       one for the first failure (the entry number, the entry, and for a
 *       bad entry one of the reasons that apply to its first bad address:
 *       syntax, port range, bracket shape, IPv6 characters, host
 *       characters, or size, which is the only one for an address of 128
 *       bytes or more); the result does not depend on servers_name
 *       being NULL or "--servers"; the same call gives the same result;
 *       baton_split_parse gives the reference proportions (plain
 *       decimals, > 0, <= 1e6), and printed again as plain decimals of 18+
 *       significant digits and re-joined they parse to the same values,
 *       which an accepted list accepts again;
 *       an accepted list is re-accepted when re-joined: each entry alone,
 *       the entries in reverse order (with the same --split), the entries
 *       without their @peer parts; one entry more is accepted below 64
 *       entries and refused as the 65th; a trailing comma is refused; a
 *       refused entry is refused alone with the same message (except
 *       "local", which alone is the in-process list); a refused
 *       --split is refused with --servers local too.
 */
#include "fuzz_common.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <regex.h>
#include <stdarg.h>

#include "cli/cli.h"
#include "core/types.h"
#include "model/run.h"
#include "model/split.h"

/* ---- small helpers ---- */

/* An exact-size NUL-terminated heap copy of data[0..n) up to its first NUL. */
static char *dup_str(const uint8_t *data, size_t n)
{
    const uint8_t *nul = memchr(data, '\0', n);
    size_t len = nul ? (size_t)(nul - data) : n;
    char *s = malloc(len + 1);
    if (!s)
        abort();
    if (len > 0)
        memcpy(s, data, len);
    s[len] = '\0';
    return s;
}

static char *str_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *str_printf(const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;
    va_start(ap, fmt);
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0)
        abort();
    return s;
}

/* A growing string. */
struct sbuf {
    char *p;
    size_t len, cap;
};

static void sb_add(struct sbuf *b, const char *s, size_t n)
{
    if (b->cap - b->len < n + 1) {
        size_t cap = (b->len + n + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p)
            abort();
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

/* ---- (a) integer values ---- */

static const uint64_t min_table[8] = {0, 1, 2, 10, 4096, 65536, 4294967296ull, UINT64_MAX};
static const uint64_t max_table[8] = {0,           9,          100, 65535, 4294967295ull,
                                      INT64_MAX, UINT64_MAX - 1, UINT64_MAX};

enum { INT_OK, INT_NOT_INTEGER, INT_TOO_LARGE, INT_TOO_SMALL };

/* cli.h's rules, deciding overflow on the digits themselves. */
static int ref_integer(const char *s, uint64_t min, uint64_t max, uint64_t *value)
{
    static const char u64_max[] = "18446744073709551615";
    const int neg = s[0] == '-';
    const char *d = s + neg;
    size_t n = strlen(d), z = 0;
    if (n == 0)
        return INT_NOT_INTEGER;
    for (size_t i = 0; i < n; i++)
        if (d[i] < '0' || d[i] > '9')
            return INT_NOT_INTEGER;
    while (z < n && d[z] == '0')
        z++;
    const size_t sig = n - z; /* significant digits */
    const int over = sig > 20 || (sig == 20 && memcmp(d + z, u64_max, 20) > 0);
    uint64_t v = 0;
    if (!over)
        for (size_t i = z; i < n; i++)
            v = v * 10 + (uint64_t)(d[i] - '0');
    *value = v;
    if (neg && (over || v != 0))
        return INT_TOO_SMALL;
    if (over || v > max)
        return INT_TOO_LARGE;
    if (v < min)
        return INT_TOO_SMALL;
    return INT_OK;
}

/* Runs the u64 (or u32) parser with stderr going to a memstream; *msg gets
 * what it printed (free it). */
static int parse_quiet(int u32, const char *s, uint64_t min, uint64_t max, uint64_t *out,
                       char **msg)
{
    size_t len = 0;
    FILE *m = open_memstream(msg, &len);
    FILE *saved = stderr;
    int rc;
    if (!m)
        abort();
    stderr = m;
    if (u32) {
        uint32_t v = 0xA5A5A5A5u;
        rc = baton_cli_parse_u32("fuzz", "-n", s, (uint32_t)min, (uint32_t)max, &v);
        *out = v;
    } else {
        uint64_t v = 0xA5A5A5A5A5A5A5A5ull;
        rc = baton_cli_parse_u64("fuzz", "-n", s, min, max, &v);
        *out = v;
    }
    stderr = saved;
    if (fclose(m) != 0)
        abort();
    return rc;
}

static void check_integer(uint8_t mode, const char *s)
{
    const int u32 = (mode & 0x40) != 0;
    uint64_t min = min_table[mode & 7], max = max_table[(mode >> 3) & 7], want = 0, got;
    char *msg, *expect = NULL;
    if (u32) {
        min = min > UINT32_MAX ? UINT32_MAX : min;
        max = max > UINT32_MAX ? UINT32_MAX : max;
    }
    if (min > max) {
        uint64_t t = min;
        min = max;
        max = t;
    }
    const uint64_t untouched = u32 ? 0xA5A5A5A5u : 0xA5A5A5A5A5A5A5A5ull;
    const int ref = ref_integer(s, min, max, &want);
    const int rc = parse_quiet(u32, s, min, max, &got, &msg);

    FUZZ_CHECK(rc == 0 || rc == -1, "parse returned %d", rc);
    FUZZ_CHECK((rc == 0) == (ref == INT_OK), "'%s' in [%" PRIu64 ", %" PRIu64 "]: rc %d, ref %d",
               s, min, max, rc, ref);
    if (rc == 0) {
        FUZZ_CHECK(got >= min && got <= max, "'%s' gave %" PRIu64 " outside [%" PRIu64
                                             ", %" PRIu64 "]", s, got, min, max);
        FUZZ_CHECK(got == want, "'%s' gave %" PRIu64 ", reference %" PRIu64, s, got, want);
        FUZZ_CHECK(msg[0] == '\0', "success printed '%s'", msg);
    } else {
        FUZZ_CHECK(got == untouched, "failure wrote %" PRIu64 " to *out", got);
        if (ref == INT_NOT_INTEGER && s[0] == '=' && s[1]) /* "-n=4": getopt's "=4" */
            expect = str_printf("fuzz: -n: '%s' is not an integer (write -n %s, without '=')\n",
                                s, s + 1);
        else if (ref == INT_NOT_INTEGER)
            expect = str_printf("fuzz: -n: '%s' is not an integer\n", s);
        else if (ref == INT_TOO_LARGE)
            expect = str_printf("fuzz: -n: '%s' is too large (at most %" PRIu64 ")\n", s, max);
        else
            expect = str_printf("fuzz: -n: '%s' is too small (at least %" PRIu64 ")\n", s, min);
        FUZZ_CHECK(strcmp(msg, expect) == 0, "message '%s', want '%s'", msg, expect);
    }
    if (u32) {
        uint64_t got64;
        char *msg64;
        int rc64 = parse_quiet(0, s, min, max, &got64, &msg64);
        FUZZ_CHECK(rc64 == rc && strcmp(msg64, msg) == 0 && (rc != 0 || got64 == got),
                   "parse_u32 and parse_u64 differ on '%s'", s);
        free(msg64);
    }
    free(expect);
    free(msg);
}

/* ---- (c) decimal values ---- */

static const struct {
    double lo, hi;
    int lo_open;
} float_bounds[4] = {{0.0, 100.0, 0}, {0.0, 1.0, 1}, {-1.0, 1.0, 0}, {1e-3, 1e3, 1}};

static void check_float(uint8_t mode, const char *s)
{
    static regex_t re;
    static int re_ready;
    const double lo = float_bounds[mode & 3].lo, hi = float_bounds[mode & 3].hi;
    const int lo_open = float_bounds[mode & 3].lo_open;
    const char open = lo_open ? '(' : '[';
    size_t len = 0;
    char *msg = NULL, *expect = NULL;
    FILE *m = open_memstream(&msg, &len);
    FILE *saved = stderr;
    float got = -12345.0f;
    int rc, want_rc = 0;

    if (!re_ready) {
        if (regcomp(&re, "^-?([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][+-]?[0-9]+)?$",
                    REG_EXTENDED | REG_NOSUB) != 0)
            abort();
        re_ready = 1;
    }
    if (!m)
        abort();
    stderr = m;
    rc = baton_cli_parse_float("fuzz", "--x", s, lo, hi, lo_open, &got);
    stderr = saved;
    if (fclose(m) != 0)
        abort();
    if (regexec(&re, s, 0, NULL, 0) != 0) {
        want_rc = -1;
        expect = str_printf("fuzz: --x: '%s' is not a decimal number (digits with an optional "
                            "'.' and exponent, as 0.25 or 25e-2)\n",
                            s);
    } else {
        const double v = strtod(s, NULL);
        const float f = (float)v;

        if (!(v >= lo && v <= hi) || (lo_open && v <= lo)) {
            want_rc = -1;
            expect = str_printf("fuzz: --x: '%s' is not in %c%g, %g]\n", s, open, lo, hi);
        } else if (!((double)f >= lo && (double)f <= hi) || (lo_open && (double)f <= lo)) {
            want_rc = -1;
            expect = str_printf("fuzz: --x: '%s' is not in %c%g, %g] as a 32-bit float (%g)\n",
                                s, open, lo, hi, (double)f);
        } else {
            FUZZ_CHECK(rc == 0 && got == f, "'%s': rc %d, %.9g, want %.9g", s, rc, (double)got,
                       (double)f);
        }
    }
    FUZZ_CHECK(rc == want_rc, "'%s' in %c%g, %g]: rc %d, want %d (%s)", s, open, lo, hi, rc,
               want_rc, msg);
    if (rc == 0) {
        FUZZ_CHECK(msg[0] == '\0', "success printed '%s'", msg);
        FUZZ_CHECK(isfinite(got) && got >= lo && got <= hi && (!lo_open || got > lo),
                   "'%s' gave %g outside the bounds", s, (double)got);
    } else {
        FUZZ_CHECK(got == -12345.0f, "failure wrote %g to *out", (double)got);
        FUZZ_CHECK(strcmp(msg, expect) == 0, "message '%s', want '%s'", msg, expect);
    }
    free(expect);
    free(msg);
}

/* ---- (b) the stage list ---- */

#define ADDR_MAX 128 /* run.h: each address shorter than 128 bytes */
#define PART_MAX 1e6 /* split.h: BATON_SPLIT_PART_MAX */

/* Why an address is refused; a refused entry's message gives one reason
 * that applies to its first refused address. */
enum {
    WHY_SYNTAX = 1,   /* empty, no "host:", or a port that is not digits */
    WHY_PORT = 2,     /* an all-digit port outside 1..65535 */
    WHY_BRACKET = 4,  /* '[' without a closing ']' just before the port */
    WHY_IPV6 = 8,     /* inside brackets: not hex digits, ':', '.' (+ %zone) */
    WHY_HOST = 16,    /* unbracketed: not letters, digits, '.', '-', '_' */
    WHY_SIZE = 32,    /* an address of 128 bytes or more */
    WHY_LOCAL = 64,   /* the entry is exactly "local" in a list of servers */
};
static const char *const why_text[7] = {
    "want host:port or host:port@peerhost:peerport",
    "the port must be 1..65535",
    "an IPv6 address goes in brackets, as in [::1]:7340",
    "a bracketed host must be an IPv6 address: hex digits, ':', '.' and a %zone of letters and "
    "digits",
    "a host may hold only letters, digits, '.', '-' and '_'; an IPv6 address goes in brackets, "
    "as in [::1]:7340",
    "an address must be shorter than 128 bytes",
    "'local' stands alone: in-process stages and servers do not mix",
};

static const char *const servers_names[4] = {NULL, "--servers", "BATON_SERVERS", "-s"};
static const char *const progs[4] = {NULL, "baton run", "baton bench", ""};

/* One call; *log gets what it printed (free it). */
static int stages(const char *prog, const char *name, const char *servers, const char *split,
                  char **log)
{
    struct baton_run_config cfg;
    size_t len = 0;
    FILE *m = open_memstream(log, &len);
    if (!m)
        abort();
    baton_run_config_default(&cfg);
    cfg.prog = prog;
    cfg.servers = servers;
    cfg.split = split;
    cfg.log = m;
    cfg.out = m;
    int rc = baton_run_check_stages(&cfg, name);
    if (fclose(m) != 0)
        abort();
    return rc;
}

static int name_char(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           c == '.' || c == '-' || c == '_';
}

/* The inside of [...]: hex digits, ':' and '.', at least one ':', then
 * optionally '%' and a non-empty zone of name characters. */
static int ipv6_ok(const char *s, size_t n)
{
    size_t i, colons = 0;
    for (i = 0; i < n && s[i] != '%'; i++) {
        const char c = s[i];
        if (c == ':')
            colons++;
        else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') ||
                   c == '.'))
            return 0;
    }
    if (colons == 0)
        return 0;
    if (i == n)
        return 1;
    if (i + 1 == n) /* an empty zone */
        return 0;
    for (i++; i < n; i++)
        if (!name_char(s[i]))
            return 0;
    return 1;
}

/* The reasons (WHY_*) address text[0..n) is refused for, 0 when it is
 * host:port: port 1..65535 (at most 5 digits, leading zeros among them) after the last
 * ':', the host before it a non-empty run of name characters or "[IPv6]". */
static int ref_address(const char *s, size_t n)
{
    size_t colon = n, i;
    int why = 0;
    for (i = n; i > 0; i--)
        if (s[i - 1] == ':') {
            colon = i - 1;
            break;
        }
    if (n == 0 || colon == n || colon == 0 || colon + 1 == n)
        return WHY_SYNTAX;
    const char *port = s + colon + 1;
    const size_t pn = n - colon - 1;
    for (i = 0; i < pn; i++)
        if (port[i] < '0' || port[i] > '9')
            return WHY_SYNTAX;
    size_t z = 0;
    while (z < pn && port[z] == '0')
        z++;
    if (z == pn || pn > 5 || (pn - z == 5 && memcmp(port + z, "65535", 5) > 0))
        why |= WHY_PORT;
    if (s[0] == '[') {
        if (colon < 3 || s[colon - 1] != ']')
            why |= WHY_BRACKET;
        else if (!ipv6_ok(s + 1, colon - 2))
            why |= WHY_IPV6;
    } else {
        for (i = 0; i < colon; i++)
            if (!name_char(s[i])) {
                why |= WHY_HOST;
                break;
            }
    }
    return why;
}

enum { SV_OK, SV_EMPTY, SV_EMPTY_ENTRY, SV_TOO_MANY, SV_BAD_ENTRY, SV_BAD_SPLIT, SV_MISMATCH };

struct stages_ref {
    int verdict;
    unsigned entry;          /* 1-based: SV_EMPTY_ENTRY, SV_BAD_ENTRY */
    const char *bad;         /* SV_BAD_ENTRY: the entry, bad_len bytes */
    size_t bad_len;
    int why;                 /* SV_BAD_ENTRY: the reasons that fit (WHY_*) */
    unsigned n_servers;      /* entries (0 for "local") */
    int n_parts;             /* --split parts (SV_MISMATCH, SV_OK) */
    double props[BATON_MAX_STAGES];
};

/* One entry text[0..n): host:port, optionally '@' and a second address
 * (split at the first '@'); sets r->why to the reasons of the first refused
 * address. Returns 1 when the entry is accepted. */
static int ref_entry(const char *s, size_t n, struct stages_ref *r)
{
    const char *at = memchr(s, '@', n);
    const size_t cn = at ? (size_t)(at - s) : n;
    if (cn >= ADDR_MAX || (at && n - cn - 1 >= ADDR_MAX))
        r->why = WHY_SIZE;
    else
        r->why = ref_address(s, cn);
    if (r->why == 0 && at)
        r->why = ref_address(at + 1, n - cn - 1);
    if (n == 5 && memcmp(s, "local", 5) == 0)
        r->why = WHY_LOCAL; /* refused (no port), with its own reason */
    return r->why == 0;
}

/* --split (split.h): 1..64 comma-separated plain decimals (digits with at
 * most one '.', at least one digit), each a whole strtod conversion without
 * ERANGE, > 0 and at most 1e6. Returns the count, or -1. */
static int ref_split(const char *split, double *props)
{
    const char *p = split;
    int n = 0;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p), digits = 0, dots = 0;
        for (size_t i = 0; i < len; i++) {
            if (p[i] >= '0' && p[i] <= '9')
                digits++;
            else if (p[i] == '.')
                dots++;
            else
                return -1;
        }
        if (digits == 0 || dots > 1 || n == BATON_MAX_STAGES)
            return -1;
        char *piece = dup_str((const uint8_t *)p, len), *end;
        errno = 0;
        double v = strtod(piece, &end);
        int ok = end == piece + len && errno == 0 && v > 0.0 && v <= PART_MAX;
        free(piece);
        if (!ok)
            return -1;
        props[n++] = v;
        if (!comma)
            return n;
        p = comma + 1;
    }
}

static void ref_stages(const char *servers, const char *split, struct stages_ref *r)
{
    memset(r, 0, sizeof *r);
    if (strcmp(servers, "local") != 0) {
        const char *p = servers;
        for (;;) {
            const char *comma = strchr(p, ',');
            size_t len = comma ? (size_t)(comma - p) : strlen(p);
            if (++r->n_servers > BATON_MAX_STAGES) {
                r->verdict = SV_TOO_MANY;
                return;
            }
            if (len == 0) {
                r->verdict = servers[0] == '\0' ? SV_EMPTY : SV_EMPTY_ENTRY;
                r->entry = r->n_servers;
                return;
            }
            if (!ref_entry(p, len, r)) {
                r->verdict = SV_BAD_ENTRY;
                r->entry = r->n_servers;
                r->bad = p;
                r->bad_len = len;
                return;
            }
            if (!comma)
                break;
            p = comma + 1;
        }
    }
    if (split) {
        r->n_parts = ref_split(split, r->props);
        if (r->n_parts < 0) {
            r->verdict = SV_BAD_SPLIT;
            return;
        }
    } else {
        r->n_parts = r->n_servers ? (int)r->n_servers : 1;
    }
    r->verdict = r->n_servers && (unsigned)r->n_parts != r->n_servers ? SV_MISMATCH : SV_OK;
}

/* Whether log is the message documented for r (one line, prefix included). */
static int message_fits(const char *log, const char *prog, const char *name, const char *servers,
                        const char *split, const struct stages_ref *r)
{
    const char *P = prog ? prog : "baton", *N = name ? name : "--servers";
    char *want = NULL;
    int fits = 0;
    switch (r->verdict) {
    case SV_EMPTY:
        want = str_printf("%s: %s is empty (want host:port,host:port,... or local)\n", P, N);
        break;
    case SV_EMPTY_ENTRY:
        want = str_printf("%s: %s: entry %u of '%s' is empty (want host:port,host:port,... "
                          "or local)\n", P, N, r->entry, servers);
        break;
    case SV_TOO_MANY:
        want = str_printf("%s: %s: more than 64 servers (the most stages a run can have)\n",
                          P, N);
        break;
    case SV_BAD_ENTRY:
        for (int i = 0; i < 7; i++)
            if (r->why & 1 << i) {
                char *w = str_printf("%s: %s: bad endpoint '%.*s' (%s)\n", P, N,
                                     (int)r->bad_len, r->bad, why_text[i]);
                fits |= strcmp(log, w) == 0;
                free(w);
            }
        break;
    case SV_BAD_SPLIT:
        want = str_printf("%s: --split '%s': want up to 64 positive plain decimals like "
                          "1,1,1 or 0.5,2, each at most 1000000\n", P, split);
        break;
    case SV_MISMATCH:
        want = str_printf("%s: --split has %d part%s but %s names %u server%s\n", P,
                          r->n_parts, r->n_parts == 1 ? "" : "s", N, r->n_servers,
                          r->n_servers == 1 ? "" : "s");
        break;
    default:
        abort();
    }
    fits |= want && strcmp(log, want) == 0;
    free(want);
    return fits;
}

/* A call that must succeed (a re-joined accepted list). */
static void must_accept(const char *prog, const char *servers, const char *split,
                        const char *what)
{
    char *log;
    int rc = stages(prog, NULL, servers, split, &log);
    FUZZ_CHECK(rc == 0 && log[0] == '\0', "%s '%s' (split %s) refused: %s", what, servers,
               split ? split : "none", log);
    free(log);
}

/* The metamorphic checks on an accepted non-local list of r->n_servers entries. */
static void rejoin(const char *prog, const char *servers, const char *split,
                   const struct stages_ref *r)
{
    const char *entry[BATON_MAX_STAGES];
    size_t len[BATON_MAX_STAGES];
    unsigned n = 0;
    const char *p = servers;
    struct sbuf rev = {0}, bare = {0}, more = {0}, one = {0};
    char *log;
    for (;;) {
        const char *comma = strchr(p, ',');
        entry[n] = p;
        len[n++] = comma ? (size_t)(comma - p) : strlen(p);
        if (!comma)
            break;
        p = comma + 1;
    }
    FUZZ_CHECK(n == r->n_servers, "%u entries, reference %u", n, r->n_servers);
    for (unsigned i = 0; i < n; i++) {
        const char *at = memchr(entry[i], '@', len[i]);
        one.len = 0;
        sb_add(&one, entry[i], len[i]);
        must_accept(prog, one.p, NULL, "an entry of an accepted list, alone,");
        if (i) {
            sb_add(&rev, ",", 1);
            sb_add(&bare, ",", 1);
        }
        sb_add(&rev, entry[n - 1 - i], len[n - 1 - i]);
        sb_add(&bare, entry[i], at ? (size_t)(at - entry[i]) : len[i]);
    }
    must_accept(prog, rev.p, split, "an accepted list reversed,");
    must_accept(prog, bare.p, NULL, "an accepted list without @peer parts,");

    sb_add(&more, servers, strlen(servers));
    sb_add(&more, ",", 1);
    int rc = stages(prog, NULL, more.p, NULL, &log); /* a trailing comma */
    FUZZ_CHECK(rc == 2 && log[0] != '\0', "'%s' accepted", more.p);
    free(log);
    sb_add(&more, entry[0], len[0]);
    rc = stages(prog, NULL, more.p, NULL, &log);
    if (n < BATON_MAX_STAGES) {
        FUZZ_CHECK(rc == 0, "one entry more (%u) refused: %s", n + 1, log);
    } else {
        struct stages_ref r65;
        ref_stages(more.p, NULL, &r65);
        FUZZ_CHECK(rc == 2 && r65.verdict == SV_TOO_MANY &&
                       message_fits(log, prog, NULL, more.p, NULL, &r65),
                   "a 65th entry: rc %d, '%s'", rc, log);
    }
    free(log);
    free(rev.p);
    free(bare.p);
    free(more.p);
    free(one.p);
}

/* baton_split_parse against the reference, and its %.17g round trip. */
static void check_split(const char *prog, const char *servers, const char *split,
                        const struct stages_ref *r)
{
    double props[BATON_MAX_STAGES], again[BATON_MAX_STAGES], ref[BATON_MAX_STAGES];
    int n = baton_split_parse(split, props, BATON_MAX_STAGES);
    int n_ref = ref_split(split, ref);
    FUZZ_CHECK(n == n_ref || (n < 0 && n_ref < 0), "split_parse('%s') %d, reference %d", split,
               n, n_ref);
    if (n < 0)
        return;
    struct sbuf b = {0};
    for (int i = 0; i < n; i++) {
        char num[1200];
        FUZZ_CHECK(props[i] == ref[i] && props[i] > 0.0 && props[i] <= PART_MAX,
                   "split part %d: %.17g, reference %.17g", i, props[i], ref[i]);
        /* a plain decimal (no exponent) of at least 18 significant digits,
         * which gives the double back; a subnormal exactly (1074 places), as
         * a rounded one would underflow (ERANGE) */
        int places = isnormal(props[i]) ? 18 - (int)floor(log10(props[i])) : 1074;
        snprintf(num, sizeof num, "%s%.*f", i ? "," : "", places < 0 ? 0 : places, props[i]);
        sb_add(&b, num, strlen(num));
    }
    FUZZ_CHECK(baton_split_parse(b.p, again, BATON_MAX_STAGES) == n &&
                   memcmp(again, props, (size_t)n * sizeof *props) == 0,
               "split '%s' printed as '%s' parses differently", split, b.p);
    if (r->verdict == SV_OK)
        must_accept(prog, servers, b.p, "an accepted --split printed again,");
    free(b.p);
}

static void check_stages(uint8_t mode, const char *servers, const char *split)
{
    const char *name = servers_names[mode & 3], *prog = progs[(mode >> 3) & 3];
    const char *P = prog ? prog : "baton";
    struct stages_ref r;
    char *log, *log2;

    ref_stages(servers, split, &r);
    const int rc = stages(prog, name, servers, split, &log);
    FUZZ_CHECK(rc == 0 || rc == 2, "check_stages returned %d", rc);
    FUZZ_CHECK((rc == 0) == (r.verdict == SV_OK), "'%s' / split '%s': rc %d, reference %d",
               servers, split ? split : "(none)", rc, r.verdict);
    if (rc == 0) {
        FUZZ_CHECK(log[0] == '\0', "success printed '%s'", log);
    } else {
        const size_t pl = strlen(P), ll = strlen(log);
        FUZZ_CHECK(strncmp(log, P, pl) == 0 && strncmp(log + pl, ": ", 2) == 0,
                   "message without 'PROG: ': '%s'", log);
        FUZZ_CHECK(ll > 0 && log[ll - 1] == '\n', "message does not end a line: '%s'", log);
        FUZZ_CHECK(message_fits(log, prog, name, servers, split, &r),
                   "message '%s' does not fit reference verdict %d (entry %u)", log, r.verdict,
                   r.entry);
    }

    /* deterministic; NULL names the list "--servers" */
    int rc2 = stages(prog, name == NULL ? "--servers" : name, servers, split, &log2);
    FUZZ_CHECK(rc2 == rc && strcmp(log, log2) == 0, "second call differs: '%s' / '%s'", log,
               log2);
    free(log2);

    if (split)
        check_split(prog, servers, split, &r);
    if (rc == 0 && r.n_servers)
        rejoin(prog, servers, split, &r);
    if (r.verdict == SV_BAD_ENTRY && !(r.bad_len == 5 && memcmp(r.bad, "local", 5) == 0)) {
        char *one = dup_str((const uint8_t *)r.bad, r.bad_len);
        rc2 = stages(prog, name, one, NULL, &log2);
        FUZZ_CHECK(rc2 == 2 && strcmp(log, log2) == 0, "a refused entry alone: '%s' / '%s'", log,
                   log2);
        free(log2);
        free(one);
    }
    if (r.verdict == SV_BAD_SPLIT) {
        rc2 = stages(prog, name, "local", split, &log2);
        FUZZ_CHECK(rc2 == 2 && strcmp(log, log2) == 0, "a refused split with local: '%s' / '%s'",
                   log, log2);
        free(log2);
    }
    free(log);
}

static void check_onoff(uint8_t mode, const char *s)
{
    size_t len = 0;
    char *msg = NULL, *expect = NULL;
    FILE *m = open_memstream(&msg, &len);
    FILE *saved = stderr;
    const int start = mode & 1;
    int got = start, rc;

    if (!m)
        abort();
    stderr = m;
    rc = baton_cli_parse_onoff("fuzz", "--p2p", s, &got);
    stderr = saved;
    if (fclose(m) != 0)
        abort();
    if (!strcmp(s, "on") || !strcmp(s, "off")) {
        FUZZ_CHECK(rc == 0 && got == (s[1] == 'n'), "'%s': rc %d, value %d", s, rc, got);
        FUZZ_CHECK(len == 0, "'%s' accepted with a message: %s", s, msg);
    } else {
        expect = str_printf("fuzz: --p2p: '%s' is not on or off\n", s);
        FUZZ_CHECK(rc == -1 && got == start, "'%s': rc %d, value %d (start %d)", s, rc, got,
                   start);
        FUZZ_CHECK(strcmp(msg, expect) == 0, "'%s': message '%s', want '%s'", s, msg, expect);
    }
    free(expect);
    free(msg);
}

static void check_kv_type(uint8_t mode, const char *s)
{
    size_t len = 0;
    char *msg = NULL, *expect = NULL;
    FILE *m = open_memstream(&msg, &len);
    FILE *saved = stderr;
    const uint32_t start = (mode & 1) ? BATON_TYPE_F16 : BATON_TYPE_F32;
    uint32_t got = start;
    int rc;

    if (!m)
        abort();
    stderr = m;
    rc = baton_cli_parse_kv_type("fuzz", "--kv-type", s, &got);
    stderr = saved;
    if (fclose(m) != 0)
        abort();
    if (!strcmp(s, "f32") || !strcmp(s, "f16")) {
        FUZZ_CHECK(rc == 0 && got == (s[1] == '1' ? BATON_TYPE_F16 : BATON_TYPE_F32),
                   "'%s': rc %d, type %u", s, rc, got);
        FUZZ_CHECK(len == 0, "'%s' accepted with a message: %s", s, msg);
    } else {
        expect = str_printf("fuzz: --kv-type: '%s' is not f32 or f16\n", s);
        FUZZ_CHECK(rc == -1 && got == start, "'%s': rc %d, type %u (start %u)", s, rc, got,
                   start);
        FUZZ_CHECK(strcmp(msg, expect) == 0, "'%s': message '%s', want '%s'", s, msg, expect);
    }
    free(expect);
    free(msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const uint8_t mode = data[0];
    const uint8_t *rest = data + 1;
    const size_t n = size - 1;
    if (!(mode & 0x80) || (mode & 0xC0) == 0xC0) {
        char *s = dup_str(rest, n);
        if ((mode & 0xE2) == 0xE2)
            check_kv_type(mode, s);
        else if ((mode & 0xE0) == 0xE0)
            check_onoff(mode, s);
        else if (mode & 0x80)
            check_float(mode, s);
        else
            check_integer(mode, s);
        free(s);
        return 0;
    }
    const uint8_t *lf = memchr(rest, '\n', n);
    const size_t sn = lf ? (size_t)(lf - rest) : n;
    char *servers = dup_str(rest, sn);
    char *split = NULL;
    if (mode & 4)
        split = lf ? dup_str(lf + 1, n - sn - 1) : dup_str(rest, 0);
    check_stages(mode, servers, split);
    free(split);
    free(servers);
    return 0;
}
