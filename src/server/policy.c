/* Policy file parser and the policy -> server configuration step
 * (policy.h; the format is defined there and in policy/README.md). */
#include "server/policy.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "baton/status.h"
#include "core/limits.h"
#include "net/net.h"
#include "server/server.h"

#define DAY_MS 86400000ull
#define MEM_MAX (1ull << 60)

enum kind {
    K_COUNT,    /* u32 */
    K_SIZE,     /* u64, K/M/G suffix, optional "auto" (0) */
    K_DURATION, /* u32 ms, "ms"/"s" suffix */
    K_FLOPS,    /* u64, K/M/G/T/P decimal suffix */
    K_BOOL,     /* int 0/1 */
    K_PATH,     /* char[BATON_POLICY_PATH_BYTES] */
    K_HOST,     /* char[BATON_POLICY_HOST_BYTES] */
    K_PORT,     /* u16 */
    K_PEER,     /* appended to peers[] */
    K_CLIENT,   /* appended to clients[] */
};

struct field {
    const char *key;
    enum kind kind;
    size_t off;
    uint64_t lo, hi;
    int auto_ok; /* K_SIZE: "auto" stores 0 */
};

#define F(k, kind, member, lo, hi, a) {k, kind, offsetof(struct baton_policy, member), lo, hi, a}

static const struct field fields[] = {
    F("max_connections", K_COUNT, max_connections, 1, 1024, 0),
    F("max_unauthenticated", K_COUNT, max_unauthenticated, 1, 16384, 0),
    F("max_unauthenticated_per_ip", K_COUNT, max_unauthenticated_per_ip, 1, 16384, 0),
    F("handshake_timeout", K_DURATION, handshake_timeout_ms, 1, DAY_MS, 0),
    F("frame_timeout", K_DURATION, frame_timeout_ms, 1, DAY_MS, 0),
    F("send_timeout", K_DURATION, send_timeout_ms, 1, DAY_MS, 0),
    F("idle_timeout", K_DURATION, idle_timeout_ms, 0, DAY_MS, 0),
    F("max_message_bytes", K_SIZE, max_message_bytes, 4096, BATON_MAX_MESSAGE_BYTES, 0),
    F("session_memory_bytes", K_SIZE, session_memory_bytes, 4096, MEM_MAX, 1),
    F("total_memory_bytes", K_SIZE, total_memory_bytes, 4096, MEM_MAX, 1),
    F("max_graph_nodes", K_COUNT, max_graph_nodes, 1, BATON_MAX_GRAPH_NODES, 0),
    F("max_graph_flops", K_FLOPS, max_graph_flops, 1, UINT64_MAX, 0),
    F("max_graphs_per_session", K_COUNT, max_graphs_per_session, 0, 4096, 0),
    F("fence_timeout", K_DURATION, fence_timeout_ms, 1, DAY_MS, 0),
    F("compute_slice", K_DURATION, compute_slice_ms, 1, 60000, 0),
    F("max_grants_per_session", K_COUNT, max_grants_per_session, 0, 65536, 0),
    F("max_peer_links", K_COUNT, max_peer_links, 0, 1024, 0),
    F("max_peer_links_per_session", K_COUNT, max_peer_links_per_session, 0, 1024, 0),
    F("peer_timeout", K_DURATION, peer_timeout_ms, 1, DAY_MS, 0),
    F("peer_backoff_max", K_DURATION, peer_backoff_max_ms, 1000, DAY_MS, 0),
    F("peer_queue_depth", K_COUNT, peer_queue_depth, 1, 64, 0),
    F("peer", K_PEER, peers, 0, 0, 0),
    F("client", K_CLIENT, clients, 0, 0, 0),
    F("key_file", K_PATH, key_file, 0, 0, 0),
    F("peer_key_file", K_PATH, peer_key_file, 0, 0, 0),
    F("bind", K_HOST, bind, 0, 0, 0),
    F("port", K_PORT, port, 0, 65535, 0),
    F("encrypt", K_BOOL, encrypt, 0, 1, 0),
    F("log_rate", K_COUNT, log_rate, 0, 100000, 0),
    F("threads", K_COUNT, threads, 1, 64, 0),
};
#define N_FIELDS (sizeof fields / sizeof fields[0])

void baton_policy_default(struct baton_policy *p)
{
    memset(p, 0, sizeof *p);
    p->max_connections = 64;
    p->max_unauthenticated = 1024;
    p->max_unauthenticated_per_ip = 1024;
    p->handshake_timeout_ms = 5000;
    p->frame_timeout_ms = 10000;
    p->send_timeout_ms = 10000;
    p->idle_timeout_ms = 300000;
    p->max_message_bytes = 1ull << 30;
    p->session_memory_bytes = 0;
    p->total_memory_bytes = 0;
    p->max_graph_nodes = BATON_DEFAULT_MAX_GRAPH_NODES;
    p->max_graph_flops = BATON_DEFAULT_MAX_GRAPH_FLOPS;
    p->max_graphs_per_session = 32;
    p->fence_timeout_ms = 20000;
    p->compute_slice_ms = 10;
    p->max_grants_per_session = 64;
    p->max_peer_links = 16;
    p->max_peer_links_per_session = 4;
    p->peer_timeout_ms = 5000;
    p->peer_backoff_max_ms = 60000;
    p->peer_queue_depth = 4;
    snprintf(p->bind, sizeof p->bind, "127.0.0.1");
    p->port = BATON_DEFAULT_PORT;
    p->encrypt = 0;
    p->log_rate = 20;
    p->threads = 1;
}

/* ---- value parsers: each takes the whole value (NUL-terminated) and
 * writes a reason into why on failure ---- */

static int is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* Decimal digits at s[0..) into *v; *end gets the first non-digit, also on
 * BATON_E_OVERFLOW (past 2^64 - 1), so a caller can refuse a bad suffix
 * first, as the command-line parser refuses a non-number before its size.
 * At least one digit (else BATON_E_INVAL). */
static int parse_digits(const char *s, uint64_t *v, const char **end)
{
    uint64_t x = 0;
    size_t i = 0;
    int over = 0;
    for (; s[i] >= '0' && s[i] <= '9'; i++) {
        uint64_t d = (uint64_t)(s[i] - '0');
        if (over || x > (UINT64_MAX - d) / 10)
            over = 1; /* keep scanning: the caller checks what follows first */
        else
            x = x * 10 + d;
    }
    *end = s + i;
    if (i == 0)
        return BATON_E_INVAL;
    if (over)
        return BATON_E_OVERFLOW;
    *v = x;
    return 0;
}

/* n * mult without wrapping. */
static int scale(uint64_t n, uint64_t mult, uint64_t *out)
{
    if (mult != 0 && n > UINT64_MAX / mult)
        return BATON_E_OVERFLOW;
    *out = n * mult;
    return 0;
}

/* A number with a suffix from the table (suffix "" = multiplier `plain`). */
struct suffix {
    const char *s;
    uint64_t mult;
};

static int parse_scaled(const char *v, const struct suffix *sfx, size_t n_sfx, uint64_t plain,
                        uint64_t *out)
{
    uint64_t n;
    const char *end;
    int rc = parse_digits(v, &n, &end);
    if (rc == BATON_E_INVAL)
        return rc;
    if (*end == '\0')
        return rc != 0 ? rc : scale(n, plain, out);
    for (size_t i = 0; i < n_sfx; i++)
        if (strcmp(end, sfx[i].s) == 0)
            return rc != 0 ? rc : scale(n, sfx[i].mult, out);
    return BATON_E_INVAL; /* not a unit: that, before any overflow */
}

static const struct suffix size_sfx[] = {{"K", 1ull << 10}, {"M", 1ull << 20}, {"G", 1ull << 30}};
static const struct suffix dur_sfx[] = {{"ms", 1}, {"s", 1000}};
static const struct suffix flops_sfx[] = {{"K", 1000ull},
                                          {"M", 1000000ull},
                                          {"G", 1000000000ull},
                                          {"T", 1000000000000ull},
                                          {"P", 1000000000000000ull}};

static const char *kind_expect(const struct field *f)
{
    switch (f->kind) {
    case K_COUNT:
    case K_PORT:
        return "an integer";
    case K_SIZE:
        return f->auto_ok ? "a size (bytes, or with K, M, G) or auto" : "a size (bytes, or with K, M, G)";
    case K_DURATION:
        return "a duration (ms, or with ms or s)";
    case K_FLOPS:
        return "a count of operations (or with K, M, G, T, P)";
    case K_BOOL:
        return "yes or no";
    case K_PATH:
        return "a path";
    case K_HOST:
        return "an address or host name";
    case K_PEER:
        return "ADDR:PORT or [IPv6]:PORT (port 1..65535)";
    case K_CLIENT:
        return "NAME KEYFILE [max_connections=N] [session_memory_bytes=SIZE] "
               "[max_graph_flops=FLOPS] [max_peer_links=N]";
    }
    return "?";
}

int baton_policy_host_bracketed(const char *v)
{
    const char *end;

    if (v[0] != '[')
        return -1;
    end = strchr(v, ']');
    return end != NULL && end > v + 1 && end[1] == '\0' && end - v - 1 <= INT_MAX
               ? (int)(end - v - 1)
               : 0;
}

/* A host: 1..255 printable non-blank ASCII bytes, no '#'. */
static int valid_host(const char *v)
{
    size_t n = strlen(v);
    if (n == 0 || n >= BATON_POLICY_HOST_BYTES)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)v[i] <= 0x20 || (unsigned char)v[i] >= 0x7f || v[i] == '#')
            return 0;
    return 1;
}

/* The number of a count, port, size, duration or flops value v (no sign)
 * into *n: 0, BATON_E_INVAL (not one) or BATON_E_OVERFLOW (past 2^64 - 1). */
static int parse_number(const struct field *f, const char *v, uint64_t *n)
{
    const char *end;
    int rc;

    switch (f->kind) {
    case K_SIZE:
        return parse_scaled(v, size_sfx, sizeof size_sfx / sizeof size_sfx[0], 1, n);
    case K_DURATION:
        return parse_scaled(v, dur_sfx, sizeof dur_sfx / sizeof dur_sfx[0], 1, n);
    case K_FLOPS:
        return parse_scaled(v, flops_sfx, sizeof flops_sfx / sizeof flops_sfx[0], 1, n);
    default: /* K_COUNT, K_PORT */
        rc = parse_digits(v, n, &end);
        return rc != BATON_E_INVAL && *end != '\0' ? BATON_E_INVAL : rc;
    }
}

/* The unit a bound of f is printed in: its bare numbers' unit. */
static const char *bound_unit(const struct field *f)
{
    return f->kind == K_DURATION ? " ms" : f->kind == K_SIZE ? " bytes" : "";
}

/* Applies value v to field f of *p. On failure writes the reason to why:
 * for numbers the words of the command-line integer parser (src/cli,
 * baton_cli_parse_u64): "KEY: 'V' is not an integer" (counts and the port;
 * the other kinds say what they expect), "is too small (at least LO)",
 * "is too large (at most HI)" (also past 2^64 - 1; a bad unit is reported
 * first). No '+'; '-' and a nonzero value is too small, "-0" is 0. */
static int set_client(struct baton_policy *p, const char *v, char *why, size_t why_len);

static int set_field(struct baton_policy *p, const struct field *f, const char *v, char *why,
                     size_t why_len)
{
    uint8_t *base = (uint8_t *)p + f->off;
    uint64_t n = 0;
    int rc = 0;

    switch (f->kind) {
    case K_COUNT:
    case K_PORT:
    case K_DURATION:
    case K_FLOPS:
        rc = parse_number(f, v, &n);
        break;
    case K_SIZE:
        if (f->auto_ok && strcmp(v, "auto") == 0) {
            uint64_t zero = 0;
            memcpy(base, &zero, sizeof zero);
            return 0;
        }
        rc = parse_number(f, v, &n);
        break;
    case K_BOOL: {
        int b;
        if (strcmp(v, "yes") == 0)
            b = 1;
        else if (strcmp(v, "no") == 0)
            b = 0;
        else
            goto bad;
        memcpy(base, &b, sizeof b);
        return 0;
    }
    case K_PATH: {
        /* only what a file line can hold: no blank at either end, no '#'
         * at the start or after a blank (it would start a comment) */
        size_t len = strlen(v);
        if (len >= BATON_POLICY_PATH_BYTES) { /* the value shown is cut: say why */
            snprintf(why, why_len, "%s: the path is %zu bytes; at most %u", f->key, len,
                     BATON_POLICY_PATH_BYTES - 1);
            return BATON_E_FORMAT;
        }
        if (len == 0 || is_blank(v[0]) || is_blank(v[len - 1]) || v[0] == '#')
            goto bad;
        for (size_t i = 1; i < len; i++)
            if (v[i] == '#' && is_blank(v[i - 1]))
                goto bad;
        /* the whole array: no bytes of an earlier, longer value remain */
        memset(base, 0, BATON_POLICY_PATH_BYTES);
        memcpy(base, v, len);
        return 0;
    }
    case K_HOST:
        if (strlen(v) >= BATON_POLICY_HOST_BYTES) {
            snprintf(why, why_len, "%s: the host name is %zu bytes; at most %u", f->key,
                     strlen(v), BATON_POLICY_HOST_BYTES - 1);
            return BATON_E_FORMAT;
        }
        if (v[0] == '[') { /* as in a URL: the resolver takes the address bare */
            const int inner = baton_policy_host_bracketed(v);

            if (inner > 0)
                snprintf(why, why_len, "%s: '%.64s': give the address without brackets (%s = "
                         "%.*s)", f->key, v, f->key, inner, v + 1);
            else
                snprintf(why, why_len, "%s: '%.64s': give the address without brackets",
                         f->key, v);
            return BATON_E_FORMAT;
        }
        if (!valid_host(v))
            goto bad;
        memset(base, 0, BATON_POLICY_HOST_BYTES);
        memcpy(base, v, strlen(v));
        return 0;
    case K_CLIENT:
        return set_client(p, v, why, why_len);
    case K_PEER: {
        struct baton_policy_peer e;
        memset(&e, 0, sizeof e);
        if (baton_net_split_hostport(v, e.host, sizeof e.host, &e.port) != 0 || e.port == 0 ||
            !valid_host(e.host))
            goto bad;
        if (p->n_peers >= BATON_POLICY_MAX_PEERS) {
            snprintf(why, why_len, "peer: more than %u entries", BATON_POLICY_MAX_PEERS);
            return BATON_E_FORMAT;
        }
        p->peers[p->n_peers++] = e;
        return 0;
    }
    }
    if (rc == BATON_E_INVAL && v[0] == '-') {
        /* a negative number: too small, as the command-line parser says;
         * "-0" is 0, as there (then the range decides) */
        uint64_t m = 0;
        int neg = parse_number(f, v + 1, &m);

        if (neg == BATON_E_OVERFLOW || (neg == 0 && m != 0)) {
            snprintf(why, why_len, "%s: '%.64s' is too small (at least %llu%s)", f->key, v,
                     (unsigned long long)f->lo, bound_unit(f));
            return BATON_E_FORMAT;
        }
        if (neg == 0) {
            n = 0;
            rc = 0;
        }
    }
    if (rc == BATON_E_INVAL)
        goto bad;
    if (rc != 0 || n > f->hi) {
        snprintf(why, why_len, "%s: '%.64s' is too large (at most %llu%s)", f->key, v,
                 (unsigned long long)f->hi, bound_unit(f));
        return BATON_E_FORMAT;
    }
    if (n < f->lo) {
        snprintf(why, why_len, "%s: '%.64s' is too small (at least %llu%s)", f->key, v,
                 (unsigned long long)f->lo, bound_unit(f));
        return BATON_E_FORMAT;
    }
    switch (f->kind) {
    case K_COUNT:
    case K_DURATION: {
        uint32_t x = (uint32_t)n;
        memcpy(base, &x, sizeof x);
        break;
    }
    case K_PORT: {
        uint16_t x = (uint16_t)n;
        memcpy(base, &x, sizeof x);
        break;
    }
    default:
        memcpy(base, &n, sizeof n);
        break;
    }
    return 0;
bad:
    if (f->kind == K_COUNT || f->kind == K_PORT)
        snprintf(why, why_len, "%s: '%.64s' is not an integer", f->key, v);
    else
        snprintf(why, why_len, "%s: expected %s, got '%.64s'", f->key, kind_expect(f), v);
    return BATON_E_FORMAT;
}

/* ---- client lines ---- */

static const struct field client_fields[] = {
    {"max_connections", K_COUNT, offsetof(struct baton_policy_client, max_connections), 1, 1024, 0},
    {"session_memory_bytes", K_SIZE, offsetof(struct baton_policy_client, session_memory_bytes),
     4096, MEM_MAX, 1}, /* auto (0): the policy's */
    {"max_graph_flops", K_FLOPS, offsetof(struct baton_policy_client, max_graph_flops), 1,
     UINT64_MAX, 0},
    {"max_peer_links", K_COUNT, offsetof(struct baton_policy_client, max_peer_links), 0, 1024, 0},
};
#define N_CLIENT_FIELDS (sizeof client_fields / sizeof client_fields[0])

static int valid_client_name(const char *v)
{
    size_t n = strlen(v);
    if (n == 0 || n >= BATON_POLICY_CLIENT_NAME_BYTES)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((v[i] >= 'a' && v[i] <= 'z') || (v[i] >= '0' && v[i] <= '9') || v[i] == '_' ||
              v[i] == '-'))
            return 0;
    return 1;
}

/* `client = NAME KEYFILE [OPTION=VALUE]...` (struct baton_policy_client):
 * appended to p->clients on success. */
static int set_client(struct baton_policy *p, const char *v, char *why, size_t why_len)
{
    char buf[BATON_POLICY_MAX_LINE_BYTES];
    char *tok[2 + N_CLIENT_FIELDS + 1];
    size_t nt = 0, len = strlen(v);
    struct baton_policy_client c;
    int seen[N_CLIENT_FIELDS] = {0};

    if (len >= sizeof buf) {
        snprintf(why, why_len, "client: the line is too long");
        return BATON_E_FORMAT;
    }
    memcpy(buf, v, len + 1);
    for (char *q = buf; *q;) {
        while (*q && is_blank(*q))
            *q++ = '\0';
        if (!*q)
            break;
        if (nt == sizeof tok / sizeof tok[0]) {
            snprintf(why, why_len, "client: too many words (NAME KEYFILE and at most %zu "
                                   "options)", N_CLIENT_FIELDS);
            return BATON_E_FORMAT;
        }
        tok[nt++] = q;
        while (*q && !is_blank(*q))
            q++;
    }
    if (nt < 2) {
        snprintf(why, why_len, "client: expected NAME KEYFILE [max_connections=N] "
                               "[session_memory_bytes=SIZE] [max_graph_flops=FLOPS] "
                               "[max_peer_links=N]");
        return BATON_E_FORMAT;
    }
    memset(&c, 0, sizeof c);
    c.max_connections = 16;
    c.max_peer_links = 4;
    if (!valid_client_name(tok[0])) {
        snprintf(why, why_len, "client: name '%.64s' is not 1..%u of a-z 0-9 _ -", tok[0],
                 BATON_POLICY_CLIENT_NAME_BYTES - 1);
        return BATON_E_FORMAT;
    }
    for (uint32_t i = 0; i < p->n_clients; i++)
        if (strcmp(p->clients[i].name, tok[0]) == 0) {
            snprintf(why, why_len, "client: name '%s' given twice", tok[0]);
            return BATON_E_FORMAT;
        }
    memcpy(c.name, tok[0], strlen(tok[0]));
    if (strlen(tok[1]) >= BATON_POLICY_PATH_BYTES) {
        snprintf(why, why_len, "client %s: the key file path is %zu bytes; at most %u", c.name,
                 strlen(tok[1]), BATON_POLICY_PATH_BYTES - 1);
        return BATON_E_FORMAT;
    }
    if (tok[1][0] == '#' || strchr(tok[1], '=')) {
        snprintf(why, why_len, "client %s: expected a key file after the name, got '%.64s'",
                 c.name, tok[1]);
        return BATON_E_FORMAT;
    }
    memcpy(c.key_file, tok[1], strlen(tok[1]));
    for (size_t t = 2; t < nt; t++) {
        char *eq = strchr(tok[t], '=');
        size_t k;
        if (!eq) {
            snprintf(why, why_len, "client %s: '%.64s' is not OPTION=VALUE", c.name, tok[t]);
            return BATON_E_FORMAT;
        }
        *eq = '\0';
        for (k = 0; k < N_CLIENT_FIELDS; k++)
            if (strcmp(client_fields[k].key, tok[t]) == 0)
                break;
        if (k == N_CLIENT_FIELDS) {
            snprintf(why, why_len, "client %s: unknown option '%.64s' (max_connections, "
                                   "session_memory_bytes, max_graph_flops, max_peer_links)",
                     c.name, tok[t]);
            return BATON_E_FORMAT;
        }
        if (seen[k]++) {
            snprintf(why, why_len, "client %s: option %s given twice", c.name, tok[t]);
            return BATON_E_FORMAT;
        }
        char inner[200];
        /* set_field writes at the option's offset of the struct it is given */
        int rc = set_field((struct baton_policy *)(void *)&c, &client_fields[k], eq + 1, inner,
                           sizeof inner);
        if (rc != 0) {
            snprintf(why, why_len, "client %s: %s", c.name, inner);
            return rc;
        }
    }
    if (p->n_clients >= BATON_POLICY_MAX_CLIENTS) {
        snprintf(why, why_len, "client: more than %u entries", BATON_POLICY_MAX_CLIENTS);
        return BATON_E_FORMAT;
    }
    p->clients[p->n_clients++] = c;
    return 0;
}

static const struct field *find_field(const char *key, size_t n)
{
    for (size_t i = 0; i < N_FIELDS; i++)
        if (strlen(fields[i].key) == n && memcmp(fields[i].key, key, n) == 0)
            return &fields[i];
    return NULL;
}

/* ---- the file parser ---- */

static void set_err(char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t err_len, const char *fmt, ...)
{
    va_list ap;
    if (!err || err_len == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
}

/* Parses one line (line[0..n), no LF) into *p. seen[i] holds the line that
 * first set field i (0: not yet). Writes the reason (without location) to
 * why on failure. */
static int parse_line(struct baton_policy *p, char *line, size_t n, uint32_t lineno,
                      uint32_t *seen, char *why, size_t why_len)
{
    if (n > 0 && line[n - 1] == '\r')
        n--;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)line[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f) {
            snprintf(why, why_len, "control byte 0x%02x", c);
            return BATON_E_FORMAT;
        }
    }
    if (lineno == 1 && n >= 3 && memcmp(line, "\xef\xbb\xbf", 3) == 0) {
        /* else "unknown key 'port'", the mark unseen before the name */
        snprintf(why, why_len, "a UTF-8 byte order mark (BOM) starts the file; save it "
                               "without one");
        return BATON_E_FORMAT;
    }
    /* a comment: '#' at the start or after a blank */
    for (size_t i = 0; i < n; i++) {
        if (line[i] == '#' && (i == 0 || is_blank(line[i - 1]))) {
            n = i;
            break;
        }
    }
    line[n] = '\0';
    size_t a = 0;
    while (a < n && is_blank(line[a]))
        a++;
    while (n > a && is_blank(line[n - 1]))
        line[--n] = '\0';
    if (a == n)
        return 0; /* blank or comment only */

    char *key = line + a;
    size_t k = 0;
    while (a + k < n && !is_blank(key[k]) && key[k] != '=')
        k++;
    char *rest = key + k;
    while (*rest && is_blank(*rest))
        rest++;
    if (*rest != '=') {
        snprintf(why, why_len, "expected 'key = value'");
        return BATON_E_FORMAT;
    }
    if (k == 0) {
        snprintf(why, why_len, "missing key before '='");
        return BATON_E_FORMAT;
    }
    const struct field *f = find_field(key, k);
    if (!f) {
        snprintf(why, why_len, "unknown key '%.*s'", (int)(k > 64 ? 64 : k), key);
        return BATON_E_FORMAT;
    }
    char *value = rest + 1;
    while (*value && is_blank(*value))
        value++;
    if (*value == '\0') {
        snprintf(why, why_len, "%s: missing value", f->key);
        return BATON_E_FORMAT;
    }
    size_t idx = (size_t)(f - fields);
    if (f->kind != K_PEER && f->kind != K_CLIENT && seen[idx] != 0) {
        snprintf(why, why_len, "duplicate key '%s' (first set on line %u)", f->key, seen[idx]);
        return BATON_E_FORMAT;
    }
    int rc = set_field(p, f, value, why, why_len);
    if (rc == 0 && seen[idx] == 0)
        seen[idx] = lineno;
    return rc;
}

int baton_policy_parse(struct baton_policy *p, const char *text, size_t len, const char *name,
                       char *err, size_t err_len)
{
    struct baton_policy *work = NULL;
    char *line = NULL;
    uint32_t seen[N_FIELDS] = {0};
    uint32_t lineno = 0;
    char why[256];
    int rc = BATON_E_FORMAT;
    size_t pos = 0;

    if (!name)
        name = "policy";
    if (len > BATON_POLICY_MAX_FILE_BYTES) {
        set_err(err, err_len, "%s: larger than %u bytes", name, BATON_POLICY_MAX_FILE_BYTES);
        return BATON_E_FORMAT;
    }
    work = malloc(sizeof *work);
    line = malloc(BATON_POLICY_MAX_LINE_BYTES + 2); /* a line, its CR and the NUL */
    if (!work || !line) {
        set_err(err, err_len, "%s: out of memory", name);
        rc = BATON_E_NOMEM;
        goto out;
    }
    memcpy(work, p, sizeof *work); /* bytewise: padding too, so memcmp works */
    while (pos < len) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;
        lineno++;
        /* the limit is on what the line holds: a CR before its LF is not counted */
        if (n - (n > 0 && text[pos + n - 1] == '\r') > BATON_POLICY_MAX_LINE_BYTES) {
            set_err(err, err_len, "%s:%u: line longer than %u bytes", name, lineno,
                    BATON_POLICY_MAX_LINE_BYTES);
            goto out;
        }
        memcpy(line, text + pos, n);
        line[n] = '\0';
        if (memchr(text + pos, '\0', n)) {
            set_err(err, err_len, "%s:%u: NUL byte", name, lineno);
            goto out;
        }
        if (parse_line(work, line, n, lineno, seen, why, sizeof why) != 0) {
            set_err(err, err_len, "%s:%u: %s", name, lineno, why);
            goto out;
        }
        pos += n + (nl ? 1 : 0);
    }
    memcpy(p, work, sizeof *p);
    rc = 0;
out:
    free(line);
    free(work);
    return rc;
}

int baton_policy_load(struct baton_policy *p, const char *path, char *err, size_t err_len)
{
    struct stat st;
    char *buf = NULL;
    size_t got = 0;
    int rc;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        set_err(err, err_len, "%s: %s", path, strerror(errno));
        return errno == ENOENT ? BATON_E_NOT_FOUND : BATON_E_IO;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        set_err(err, err_len, "%s: not a regular file", path);
        rc = BATON_E_IO;
        goto out;
    }
    if (st.st_size < 0 || (uint64_t)st.st_size > BATON_POLICY_MAX_FILE_BYTES) {
        set_err(err, err_len, "%s: larger than %u bytes", path, BATON_POLICY_MAX_FILE_BYTES);
        rc = BATON_E_LIMIT;
        goto out;
    }
    /* one byte more than the limit, to notice a file that grew meanwhile */
    buf = malloc(BATON_POLICY_MAX_FILE_BYTES + 1);
    if (!buf) {
        set_err(err, err_len, "%s: out of memory", path);
        rc = BATON_E_NOMEM;
        goto out;
    }
    for (;;) {
        ssize_t r = read(fd, buf + got, BATON_POLICY_MAX_FILE_BYTES + 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            set_err(err, err_len, "%s: %s", path, strerror(errno));
            rc = BATON_E_IO;
            goto out;
        }
        if (r == 0)
            break;
        got += (size_t)r;
        if (got > BATON_POLICY_MAX_FILE_BYTES) {
            set_err(err, err_len, "%s: larger than %u bytes", path, BATON_POLICY_MAX_FILE_BYTES);
            rc = BATON_E_LIMIT;
            goto out;
        }
    }
    rc = baton_policy_parse(p, buf, got, path, err, err_len);
out:
    free(buf);
    close(fd);
    return rc;
}

/* "max-connections" or "max_connections" -> the field, else NULL. */
static const struct field *find_flag(const char *key)
{
    char k[64];
    size_t n = strlen(key);
    if (n == 0 || n >= sizeof k)
        return NULL;
    for (size_t i = 0; i < n; i++)
        k[i] = key[i] == '-' ? '_' : key[i];
    return find_field(k, n);
}

int baton_policy_key_known(const char *key)
{
    return key && find_flag(key) != NULL;
}

int baton_policy_set(struct baton_policy *p, const char *key, const char *value, char *err,
                     size_t err_len)
{
    const struct field *f = key ? find_flag(key) : NULL;
    char why[256];
    if (!f) {
        set_err(err, err_len, "--%s: unknown setting", key ? key : "(null)");
        return BATON_E_FORMAT;
    }
    /* the bytes a policy file's line may hold (a TAB is a blank there) */
    for (const char *c = value; c && *c; c++) {
        const unsigned char b = (unsigned char)*c;
        if ((b < 0x20 && b != '\t') || b == 0x7f) {
            set_err(err, err_len, "--%s: control byte 0x%02x in the value", key, b);
            return BATON_E_FORMAT;
        }
    }
    if (!value || !*value) {
        set_err(err, err_len, "--%s: missing value", key);
        return BATON_E_FORMAT;
    }
    /* set_field changes only its own field, and only on success */
    if (set_field(p, f, value, why, sizeof why) != 0) {
        set_err(err, err_len, "--%s", why);
        return BATON_E_FORMAT;
    }
    return 0;
}

/* ---- formatting ---- */

struct out {
    char *buf;
    size_t cap, len;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
    va_list ap;
    char *dst = o->len < o->cap ? o->buf + o->len : NULL;
    size_t room = o->len < o->cap ? o->cap - o->len : 0;
    va_start(ap, fmt);
    int n = vsnprintf(dst, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->len += (size_t)n;
}

/* The largest suffix that divides v exactly. */
static void put_scaled(struct out *o, uint64_t v, const struct suffix *sfx, size_t n_sfx)
{
    for (size_t i = n_sfx; i > 0; i--) {
        if (v != 0 && sfx[i - 1].mult > 1 && v % sfx[i - 1].mult == 0) {
            put(o, "%llu%s", (unsigned long long)(v / sfx[i - 1].mult), sfx[i - 1].s);
            return;
        }
    }
    put(o, "%llu", (unsigned long long)v);
}

size_t baton_policy_format(const struct baton_policy *p, char *buf, size_t cap)
{
    struct out o = {buf, cap, 0};
    if (buf && cap > 0)
        buf[0] = '\0';
    for (size_t i = 0; i < N_FIELDS; i++) {
        const struct field *f = &fields[i];
        const uint8_t *base = (const uint8_t *)p + f->off;
        uint64_t u64;
        uint32_t u32;
        uint16_t u16;
        int b;
        switch (f->kind) {
        case K_COUNT:
            memcpy(&u32, base, sizeof u32);
            put(&o, "%s = %u\n", f->key, u32);
            break;
        case K_PORT:
            memcpy(&u16, base, sizeof u16);
            put(&o, "%s = %u\n", f->key, (unsigned)u16);
            break;
        case K_DURATION:
            memcpy(&u32, base, sizeof u32);
            put(&o, "%s = ", f->key);
            if (u32 != 0 && u32 % 1000 == 0)
                put(&o, "%us\n", u32 / 1000);
            else
                put(&o, "%ums\n", u32);
            break;
        case K_SIZE:
            memcpy(&u64, base, sizeof u64);
            put(&o, "%s = ", f->key);
            if (u64 == 0 && f->auto_ok)
                put(&o, "auto");
            else
                put_scaled(&o, u64, size_sfx, sizeof size_sfx / sizeof size_sfx[0]);
            put(&o, "\n");
            break;
        case K_FLOPS:
            memcpy(&u64, base, sizeof u64);
            put(&o, "%s = ", f->key);
            put_scaled(&o, u64, flops_sfx, sizeof flops_sfx / sizeof flops_sfx[0]);
            put(&o, "\n");
            break;
        case K_BOOL:
            memcpy(&b, base, sizeof b);
            put(&o, "%s = %s\n", f->key, b ? "yes" : "no");
            break;
        case K_PATH:
        case K_HOST:
            if (base[0])
                put(&o, "%s = %s\n", f->key, (const char *)base);
            break;
        case K_CLIENT:
            for (uint32_t k = 0; k < p->n_clients && k < BATON_POLICY_MAX_CLIENTS; k++) {
                const struct baton_policy_client *c = &p->clients[k];
                put(&o, "client = %s %s max_connections=%u", c->name, c->key_file,
                    (unsigned)c->max_connections);
                if (c->session_memory_bytes) {
                    put(&o, " session_memory_bytes=");
                    put_scaled(&o, c->session_memory_bytes, size_sfx,
                               sizeof size_sfx / sizeof size_sfx[0]);
                }
                if (c->max_graph_flops) {
                    put(&o, " max_graph_flops=");
                    put_scaled(&o, c->max_graph_flops, flops_sfx,
                               sizeof flops_sfx / sizeof flops_sfx[0]);
                }
                put(&o, " max_peer_links=%u\n", (unsigned)c->max_peer_links);
            }
            break;
        case K_PEER:
            for (uint32_t k = 0; k < p->n_peers && k < BATON_POLICY_MAX_PEERS; k++) {
                const struct baton_policy_peer *e = &p->peers[k];
                int v6 = strchr(e->host, ':') != NULL;
                put(&o, "peer = %s%s%s:%u\n", v6 ? "[" : "", e->host, v6 ? "]" : "",
                    (unsigned)e->port);
            }
            break;
        }
    }
    return o.len;
}

/* ---- policy -> server configuration ---- */

static int add_peer_addr(struct baton_server_config *cfg, const struct sockaddr *sa,
                         uint16_t port)
{
    struct baton_peer_addr a;
    memset(&a, 0, sizeof a);
    a.port = port;
    if (sa->sa_family == AF_INET) {
        a.family = 4;
        memcpy(a.addr, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        const struct in6_addr *in6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(in6)) {
            a.family = 4;
            memcpy(a.addr, in6->s6_addr + 12, 4);
        } else {
            a.family = 6;
            memcpy(a.addr, in6->s6_addr, 16);
        }
    } else {
        return 0;
    }
    for (uint32_t i = 0; i < cfg->n_peers; i++)
        if (memcmp(&cfg->peers[i], &a, sizeof a) == 0)
            return 0; /* the same address twice */
    if (cfg->n_peers >= BATON_SERVER_MAX_PEERS)
        return BATON_E_LIMIT;
    cfg->peers[cfg->n_peers++] = a;
    return 0;
}

int baton_policy_apply(const struct baton_policy *p, struct baton_server_config *cfg, char *err,
                       size_t err_len)
{
    baton_server_config_default(cfg);
    cfg->n_threads = p->threads;
    cfg->max_message_bytes = p->max_message_bytes;
    cfg->max_graph_nodes = p->max_graph_nodes;
    if (p->total_memory_bytes != 0)
        cfg->total_memory_bytes = p->total_memory_bytes;
    cfg->max_connections = p->max_connections;
    cfg->frame_timeout_ms = (int)p->frame_timeout_ms;
    cfg->idle_timeout_ms = (int)p->idle_timeout_ms;
    cfg->send_timeout_ms = (int)p->send_timeout_ms;
    cfg->handshake_timeout_ms = (int)p->handshake_timeout_ms;
    cfg->max_unauthenticated = p->max_unauthenticated;
    cfg->max_unauthenticated_per_ip = p->max_unauthenticated_per_ip;
    cfg->session_memory_bytes =
        p->session_memory_bytes != 0 ? p->session_memory_bytes : cfg->total_memory_bytes;
    cfg->max_graph_flops = p->max_graph_flops;
    cfg->max_grants_per_session = p->max_grants_per_session;
    cfg->max_peer_links = p->max_peer_links;
    cfg->max_peer_links_per_session = p->max_peer_links_per_session;
    cfg->peer_timeout_ms = (int)p->peer_timeout_ms;
    cfg->peer_backoff_max_ms = (int)p->peer_backoff_max_ms;
    cfg->max_graphs_per_session = p->max_graphs_per_session;
    cfg->fence_timeout_ms = (int)p->fence_timeout_ms;
    cfg->compute_slice_ms = (int)p->compute_slice_ms;
    cfg->peer_queue_depth = p->peer_queue_depth;
    cfg->log_rate = p->log_rate;
    cfg->encrypt = p->encrypt;
    /* named clients: limits here, keys loaded by the caller (batond) */
    cfg->n_clients = p->n_clients < BATON_SERVER_MAX_CLIENTS ? p->n_clients
                                                             : BATON_SERVER_MAX_CLIENTS;
    for (uint32_t i = 0; i < cfg->n_clients; i++) {
        struct baton_server_client *c = &cfg->clients[i];
        memset(c, 0, sizeof *c);
        memcpy(c->name, p->clients[i].name, sizeof c->name);
        c->max_connections = p->clients[i].max_connections;
        c->session_memory_bytes = p->clients[i].session_memory_bytes;
        c->max_graph_flops = p->clients[i].max_graph_flops;
        c->max_peer_links = p->clients[i].max_peer_links;
    }
    cfg->n_peers = 0;
    for (uint32_t i = 0; i < p->n_peers && i < BATON_POLICY_MAX_PEERS; i++) {
        const struct baton_policy_peer *e = &p->peers[i];
        struct addrinfo hints, *res = NULL;
        memset(&hints, 0, sizeof hints);
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        if (getaddrinfo(e->host, NULL, &hints, &res) != 0 || !res) {
            set_err(err, err_len, "peer %s:%u: cannot resolve %s", e->host, (unsigned)e->port,
                    e->host);
            return BATON_E_NOT_FOUND;
        }
        int rc = 0;
        for (struct addrinfo *ai = res; ai && rc == 0; ai = ai->ai_next)
            rc = add_peer_addr(cfg, ai->ai_addr, e->port);
        freeaddrinfo(res);
        if (rc != 0) {
            set_err(err, err_len, "peer %s:%u: more than %u peer addresses", e->host,
                    (unsigned)e->port, BATON_SERVER_MAX_PEERS);
            return rc;
        }
    }
    return 0;
}
