/* src/server/policy.c: the policy file parser (every field, suffixes,
 * comments, errors with their line numbers, duplicates, overrides), the
 * format round trip, loading files, and policy -> server configuration. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "baton/status.h"
#include "server/policy.h"
#include "server/server.h"

static char err[512];

/* Parses text on top of the defaults. */
static int parse(struct baton_policy *p, const char *text)
{
    baton_policy_default(p);
    err[0] = '\0';
    return baton_policy_parse(p, text, strlen(text), "t.policy", err, sizeof err);
}

/* The text must fail; err must contain want; the policy must be unchanged. */
static void expect_error(const char *text, const char *want)
{
    struct baton_policy p, d;
    baton_policy_default(&d);
    int rc = parse(&p, text);
    if (rc != BATON_E_FORMAT || !strstr(err, want))
        fail_msg("text <<%s>>: rc %d, err '%s', want '%s'", text, rc, err, want);
    assert_memory_equal(&p, &d, sizeof p);
}

static void test_defaults(void **state)
{
    struct baton_policy p;
    baton_policy_default(&p);
    assert_int_equal(p.max_connections, 64);
    assert_int_equal(p.max_unauthenticated, 1024);
    assert_int_equal(p.max_unauthenticated_per_ip, 1024);
    assert_int_equal(p.handshake_timeout_ms, 5000);
    assert_int_equal(p.frame_timeout_ms, 10000);
    assert_int_equal(p.send_timeout_ms, 10000);
    assert_int_equal(p.idle_timeout_ms, 300000);
    assert_true(p.max_message_bytes == 1073741824ull);
    assert_true(p.session_memory_bytes == 0 && p.total_memory_bytes == 0);
    assert_int_equal(p.max_graph_nodes, 8192);
    assert_true(p.max_graph_flops == 50000000000000ull);
    assert_int_equal(p.max_grants_per_session, 64);
    assert_int_equal(p.max_peer_links, 16);
    assert_int_equal(p.max_peer_links_per_session, 4);
    assert_int_equal(p.compute_slice_ms, 10);
    assert_int_equal(p.n_peers, 0);
    assert_string_equal(p.key_file, "");
    assert_string_equal(p.peer_key_file, "");
    assert_string_equal(p.bind, "127.0.0.1");
    assert_int_equal(p.port, 7340);
    assert_int_equal(p.encrypt, 0);
    assert_int_equal(p.log_rate, 20);
    assert_int_equal(p.threads, 1);
    /* an empty file and a file of comments change nothing */
    struct baton_policy q;
    assert_int_equal(parse(&q, ""), 0);
    assert_memory_equal(&p, &q, sizeof p);
    assert_int_equal(parse(&q, "# nothing\n\n   \t\n# more\n"), 0);
    assert_memory_equal(&p, &q, sizeof p);
}

/* Every field set to a value other than its default. */
static const char every_field[] =
    "max_connections = 100\n"
    "max_unauthenticated = 9\n"
    "max_unauthenticated_per_ip = 3\n"
    "handshake_timeout = 2s\n"
    "frame_timeout = 1500ms\n"
    "send_timeout = 750\n"
    "idle_timeout = 0\n"
    "max_message_bytes = 64M\n"
    "session_memory_bytes = 512K\n"
    "total_memory_bytes = 2G\n"
    "max_graph_nodes = 16384\n"
    "max_graph_flops = 5G\n"
    "max_grants_per_session = 0\n"
    "max_peer_links = 1024\n"
    "max_peer_links_per_session = 2\n"
    "peer = 10.1.2.3:7340\n"
    "peer = [fd00::7]:9\n"
    "peer = host.example:65535\n"
    "key_file = /etc/baton/client key.bin\n"
    "peer_key_file = rel/peer.key\n"
    "bind = ::1\n"
    "port = 0\n"
    "encrypt = yes\n"
    "log_rate = 0\n"
    "threads = 64\n";

static void test_every_field(void **state)
{
    struct baton_policy p;
    assert_int_equal(parse(&p, every_field), 0);
    assert_int_equal(p.max_connections, 100);
    assert_int_equal(p.max_unauthenticated, 9);
    assert_int_equal(p.max_unauthenticated_per_ip, 3);
    assert_int_equal(p.handshake_timeout_ms, 2000);
    assert_int_equal(p.frame_timeout_ms, 1500);
    assert_int_equal(p.send_timeout_ms, 750);
    assert_int_equal(p.idle_timeout_ms, 0);
    assert_true(p.max_message_bytes == 64ull * 1048576);
    assert_true(p.session_memory_bytes == 512ull * 1024);
    assert_true(p.total_memory_bytes == 2ull * 1073741824);
    assert_int_equal(p.max_graph_nodes, 16384);
    assert_true(p.max_graph_flops == 5000000000ull);
    assert_int_equal(p.max_grants_per_session, 0);
    assert_int_equal(p.max_peer_links, 1024);
    assert_int_equal(p.max_peer_links_per_session, 2);
    assert_int_equal(p.n_peers, 3);
    assert_string_equal(p.peers[0].host, "10.1.2.3");
    assert_int_equal(p.peers[0].port, 7340);
    assert_string_equal(p.peers[1].host, "fd00::7");
    assert_int_equal(p.peers[1].port, 9);
    assert_string_equal(p.peers[2].host, "host.example");
    assert_int_equal(p.peers[2].port, 65535);
    assert_string_equal(p.key_file, "/etc/baton/client key.bin");
    assert_string_equal(p.peer_key_file, "rel/peer.key");
    assert_string_equal(p.bind, "::1");
    assert_int_equal(p.port, 0);
    assert_int_equal(p.encrypt, 1);
    assert_int_equal(p.log_rate, 0);
    assert_int_equal(p.threads, 64);
}

static void test_suffixes(void **state)
{
    struct baton_policy p;
    assert_int_equal(parse(&p, "max_message_bytes = 4096\nsession_memory_bytes = 5K\n"
                               "total_memory_bytes = 7M\n"),
                     0);
    assert_true(p.max_message_bytes == 4096);
    assert_true(p.session_memory_bytes == 5120);
    assert_true(p.total_memory_bytes == 7340032);
    assert_int_equal(parse(&p, "max_message_bytes = 4G\n"), 0);
    assert_true(p.max_message_bytes == 4294967296ull); /* the ceiling itself */
    assert_int_equal(parse(&p, "total_memory_bytes = auto\nsession_memory_bytes=auto"), 0);
    assert_true(p.total_memory_bytes == 0 && p.session_memory_bytes == 0);
    assert_int_equal(parse(&p, "frame_timeout = 1ms\nsend_timeout = 86400s\n"
                               "handshake_timeout = 86400000\n"),
                     0);
    assert_int_equal(p.frame_timeout_ms, 1);
    assert_int_equal(p.send_timeout_ms, 86400000);
    assert_int_equal(p.handshake_timeout_ms, 86400000);
    assert_int_equal(parse(&p, "max_graph_flops = 1\n"), 0);
    assert_true(p.max_graph_flops == 1);
    assert_int_equal(parse(&p, "max_graph_flops = 3K\n"), 0);
    assert_true(p.max_graph_flops == 3000);
    assert_int_equal(parse(&p, "max_graph_flops = 2M\n"), 0);
    assert_true(p.max_graph_flops == 2000000);
    assert_int_equal(parse(&p, "max_graph_flops = 7T\n"), 0);
    assert_true(p.max_graph_flops == 7000000000000ull);
    assert_int_equal(parse(&p, "max_graph_flops = 18446P\n"), 0);
    assert_true(p.max_graph_flops == 18446000000000000000ull);
    assert_int_equal(parse(&p, "max_graph_flops = 18446744073709551615\n"), 0);
    assert_true(p.max_graph_flops == UINT64_MAX);
    assert_int_equal(parse(&p, "max_connections = 007\n"), 0);
    assert_int_equal(p.max_connections, 7);
}

static void test_syntax(void **state)
{
    struct baton_policy p;
    /* blanks everywhere, CRLF, an inline comment, no final LF */
    assert_int_equal(parse(&p, "  \tmax_connections\t=\t12   # twelve\r\n"
                               "#port = 1\n"
                               "port=99"),
                     0);
    assert_int_equal(p.max_connections, 12);
    assert_int_equal(p.port, 99);
    /* '#' not after a blank is part of the value */
    assert_int_equal(parse(&p, "key_file = /k#1 # a comment\n"), 0);
    assert_string_equal(p.key_file, "/k#1");
    /* a line exactly at the length limit is fine */
    char *line = malloc(BATON_POLICY_MAX_LINE_BYTES + 2);
    assert_non_null(line);
    memset(line, ' ', BATON_POLICY_MAX_LINE_BYTES);
    memcpy(line, "port = 5", 8);
    line[BATON_POLICY_MAX_LINE_BYTES] = '\n';
    line[BATON_POLICY_MAX_LINE_BYTES + 1] = '\0';
    assert_int_equal(parse(&p, line), 0);
    assert_int_equal(p.port, 5);
    /* one byte more is not */
    line[BATON_POLICY_MAX_LINE_BYTES] = ' ';
    assert_int_equal(parse(&p, line), BATON_E_FORMAT);
    assert_non_null(strstr(err, "t.policy:1: line longer than 8192 bytes"));
    free(line);
    /* ... and with CRLF: the CR is not counted, one byte more still is */
    line = malloc(BATON_POLICY_MAX_LINE_BYTES + 4);
    assert_non_null(line);
    memset(line, ' ', BATON_POLICY_MAX_LINE_BYTES);
    memcpy(line, "port = 6", 8);
    memcpy(line + BATON_POLICY_MAX_LINE_BYTES, "\r\n", 3);
    assert_int_equal(parse(&p, line), 0);
    assert_int_equal(p.port, 6);
    memcpy(line + BATON_POLICY_MAX_LINE_BYTES, " \r\n", 4);
    assert_int_equal(parse(&p, line), BATON_E_FORMAT);
    assert_non_null(strstr(err, "t.policy:1: line longer than 8192 bytes"));
    free(line);
}

static void test_unknown_key_line(void **state)
{
    expect_error("port = 1\n\n# c\nbogus = 3\n", "t.policy:4: unknown key 'bogus'");
    expect_error("Port = 1\n", "t.policy:1: unknown key 'Port'");
    expect_error("max-connections = 1\n", "t.policy:1: unknown key 'max-connections'");
    expect_error("max_connections_x = 1\n", "t.policy:1: unknown key 'max_connections_x'");
}

static void test_duplicates(void **state)
{
    expect_error("port = 1\nthreads = 2\nport = 1\n",
                 "t.policy:3: duplicate key 'port' (first set on line 1)");
    expect_error("\n\nencrypt = no\nencrypt = no\n",
                 "t.policy:4: duplicate key 'encrypt' (first set on line 3)");
    /* peer repeats */
    struct baton_policy p;
    assert_int_equal(parse(&p, "peer = 1.2.3.4:1\npeer = 1.2.3.4:2\npeer = 1.2.3.4:1\n"), 0);
    assert_int_equal(p.n_peers, 3);
}

static void test_bad_values(void **state)
{
    /* numbers: the words of the command-line parser (baton_cli_parse_u64) */
    expect_error("max_connections = 0\n",
                 "t.policy:1: max_connections: '0' is too small (at least 1)");
    expect_error("max_connections = 1025\n",
                 "max_connections: '1025' is too large (at most 1024)");
    expect_error("max_connections = -1\n", "max_connections: '-1' is too small (at least 1)");
    expect_error("max_connections = -99999999999999999999\n",
                 "max_connections: '-99999999999999999999' is too small (at least 1)");
    /* "-0" is 0, as on the command line: then the range decides */
    expect_error("max_connections = -0\n", "max_connections: '-0' is too small (at least 1)");
    /* a bad unit or trailing text is reported before an overflow */
    expect_error("max_connections = 99999999999999999999999x\n",
                 "max_connections: '99999999999999999999999x' is not an integer");
    expect_error("handshake_timeout = 99999999999999999999h\n",
                 "handshake_timeout: expected a duration (ms, or with ms or s), got "
                 "'99999999999999999999h'");
    expect_error("total_memory_bytes = 99999999999999999999999Q\n",
                 "total_memory_bytes: expected a size (bytes, or with K, M, G) or auto, got "
                 "'99999999999999999999999Q'");
    expect_error("total_memory_bytes = 99999999999999999999999G\n",
                 "total_memory_bytes: '99999999999999999999999G' is too large");
    expect_error("max_connections = -\n", "max_connections: '-' is not an integer");
    expect_error("max_connections = +1\n", "max_connections: '+1' is not an integer");
    expect_error("max_connections = 1 2\n", "max_connections: '1 2' is not an integer");
    expect_error("max_connections = 0x10\n", "'0x10' is not an integer");
    expect_error("max_connections = 99999999999999999999\n",
                 "max_connections: '99999999999999999999' is too large (at most 1024)");
    expect_error("max_connections =\n", "t.policy:1: max_connections: missing value");
    expect_error("max_connections = # only a comment\n", "max_connections: missing value");
    expect_error("max_connections 5\n", "t.policy:1: expected 'key = value'");
    expect_error("= 5\n", "t.policy:1: missing key before '='");
    expect_error("port = 65536\n", "port: '65536' is too large (at most 65535)");
    expect_error("port = -1\n", "port: '-1' is too small (at least 0)");
    expect_error("threads = 0\n", "threads: '0' is too small (at least 1)");
    expect_error("threads = 65\n", "threads: '65' is too large (at most 64)");
    expect_error("max_graph_nodes = 16385\n", "max_graph_nodes: '16385' is too large (at most 16384)");
    expect_error("log_rate = 100001\n", "log_rate: '100001' is too large (at most 100000)");
    expect_error("max_grants_per_session = 65537\n", "'65537' is too large (at most 65536)");
    expect_error("max_peer_links = 1025\n", "'1025' is too large (at most 1024)");
    expect_error("max_peer_links_per_session = 1025\n", "'1025' is too large (at most 1024)");
    expect_error("compute_slice = 0\n", "compute_slice: '0' is too small (at least 1 ms)");
    expect_error("max_unauthenticated = 16385\n", "'16385' is too large (at most 16384)");
    expect_error("max_unauthenticated = 0\n", "'0' is too small (at least 1)");
    expect_error("max_unauthenticated_per_ip = 0\n", "'0' is too small (at least 1)");
    /* sizes */
    expect_error("max_message_bytes = 4097M\n",
                 "max_message_bytes: '4097M' is too large (at most 4294967296 bytes)");
    expect_error("max_message_bytes = 4095\n", "'4095' is too small (at least 4096 bytes)");
    expect_error("max_message_bytes = -1G\n", "'-1G' is too small (at least 4096 bytes)");
    expect_error("max_message_bytes = 1 G\n", "expected a size");
    expect_error("max_message_bytes = 1g\n", "expected a size");
    expect_error("max_message_bytes = 1KB\n", "expected a size");
    expect_error("max_message_bytes = auto\n", "expected a size (bytes, or with K, M, G)");
    expect_error("total_memory_bytes = 0\n", "'0' is too small (at least 4096 bytes)");
    expect_error("total_memory_bytes = 17179869184G\n", /* wraps 2^64 */
                 "'17179869184G' is too large (at most 1152921504606846976 bytes)");
    expect_error("session_memory_bytes = AUTO\n", "expected a size");
    /* durations */
    expect_error("frame_timeout = 0\n", "frame_timeout: '0' is too small (at least 1 ms)");
    expect_error("frame_timeout = 0s\n", "'0s' is too small (at least 1 ms)");
    expect_error("frame_timeout = 86401s\n", "'86401s' is too large (at most 86400000 ms)");
    expect_error("frame_timeout = -5s\n", "'-5s' is too small (at least 1 ms)");
    expect_error("frame_timeout = -5x\n", "frame_timeout: expected a duration");
    expect_error("frame_timeout = 10 s\n", "frame_timeout: expected a duration");
    expect_error("frame_timeout = 1.5s\n", "expected a duration");
    expect_error("frame_timeout = 5m\n", "expected a duration");
    expect_error("frame_timeout = s\n", "expected a duration");
    expect_error("idle_timeout = 99999999999999999999s\n", "is too large (at most 86400000 ms)");
    /* flops */
    expect_error("max_graph_flops = 0\n", "max_graph_flops: '0' is too small (at least 1)");
    expect_error("max_graph_flops = 18447P\n", /* > 2^64 - 1 */
                 "'18447P' is too large (at most 18446744073709551615)");
    expect_error("max_graph_flops = 18446744073709551616\n", "is too large (at most");
    expect_error("max_graph_flops = 1E\n", "expected a count of operations");
    /* bool */
    expect_error("encrypt = true\n", "encrypt: expected yes or no, got 'true'");
    expect_error("encrypt = YES\n", "expected yes or no");
    /* host, peer */
    expect_error("bind = a b\n", "bind: expected an address or host name");
    expect_error("bind = [::1]\n", "t.policy:1: bind: '[::1]': give the address without brackets "
                                    "(bind = ::1)");
    expect_error("bind = [\n", "bind: '[': give the address without brackets");
    expect_error("peer = 1.2.3.4\n", "peer: expected ADDR:PORT or [IPv6]:PORT");
    expect_error("peer = 1.2.3.4:0\n", "peer: expected ADDR:PORT");
    expect_error("peer = 1.2.3.4:65536\n", "expected ADDR:PORT");
    expect_error("peer = fd00::1:5\n", "expected ADDR:PORT"); /* unbracketed v6 */
    expect_error("peer = [fd00::1]5\n", "expected ADDR:PORT");
    expect_error("peer = :5\n", "expected ADDR:PORT");
    /* bytes */
    expect_error("port = 1\nthreads = \x01\n", "t.policy:2: control byte 0x01");
    expect_error("port = 1\x7f\n", "t.policy:1: control byte 0x7f");
    expect_error("port = 1\rx\n", "control byte 0x0d");
    struct baton_policy p, d;
    baton_policy_default(&d);
    const char nul[] = "port = 1\nthreads = 2\0\n";
    memcpy(&p, &d, sizeof p);
    assert_int_equal(baton_policy_parse(&p, nul, sizeof nul - 1, "n", err, sizeof err),
                     BATON_E_FORMAT);
    assert_non_null(strstr(err, "n:2: NUL byte"));
    assert_memory_equal(&p, &d, sizeof p);
    /* a byte order mark is named (it was "unknown key '<BOM>port'", which
     * reads "unknown key 'port'"); elsewhere than at the start it is text */
    expect_error("\xef\xbb\xbfport = 1\n",
                 "t.policy:1: a UTF-8 byte order mark (BOM) starts the file; save it without one");
    expect_error("\xef\xbb\xbf# comment\n", "t.policy:1: a UTF-8 byte order mark (BOM)");
    expect_error("port = 1\n\xef\xbb\xbfthreads = 2\n", "t.policy:2: unknown key");
    /* a value past its size says so (the value shown is cut to 64 bytes) */
    char text[BATON_POLICY_PATH_BYTES + 64];
    snprintf(text, sizeof text, "key_file = /%0*d\n", (int)BATON_POLICY_PATH_BYTES - 1, 0);
    expect_error(text, "t.policy:1: key_file: the path is 4096 bytes; at most 4095");
    snprintf(text, sizeof text, "client = a /%0*d\n", (int)BATON_POLICY_PATH_BYTES - 1, 0);
    expect_error(text, "t.policy:1: client a: the key file path is 4096 bytes; at most 4095");
    snprintf(text, sizeof text, "bind = h%0*d\n", (int)BATON_POLICY_HOST_BYTES - 1, 0);
    expect_error(text, "t.policy:1: bind: the host name is 256 bytes; at most 255");
    /* one byte less is a path (a host name) */
    snprintf(text, sizeof text, "key_file = /%0*d\n", (int)BATON_POLICY_PATH_BYTES - 2, 0);
    assert_int_equal(parse(&p, text), 0);
    assert_int_equal(strlen(p.key_file), BATON_POLICY_PATH_BYTES - 1);
    snprintf(text, sizeof text, "bind = h%0*d\n", (int)BATON_POLICY_HOST_BYTES - 2, 0);
    assert_int_equal(parse(&p, text), 0);
    assert_int_equal(strlen(p.bind), BATON_POLICY_HOST_BYTES - 1);
}

static void test_too_many_peers(void **state)
{
    size_t cap = 32 * (BATON_POLICY_MAX_PEERS + 1) + 1;
    char *text = malloc(cap), *q = text;
    assert_non_null(text);
    for (uint32_t i = 0; i < BATON_POLICY_MAX_PEERS; i++)
        q += sprintf(q, "peer = 10.0.0.1:%u\n", i + 1);
    struct baton_policy p;
    assert_int_equal(parse(&p, text), 0);
    assert_int_equal(p.n_peers, BATON_POLICY_MAX_PEERS);
    sprintf(q, "peer = 10.0.0.1:9999\n");
    expect_error(text, "t.policy:65: peer: more than 64 entries");
    /* the same limit as a flag names its key (it was "--more than 64 peer
     * entries"), and leaves the list as it was */
    assert_int_equal(baton_policy_set(&p, "peer", "10.0.0.1:9999", err, sizeof err),
                     BATON_E_FORMAT);
    assert_string_equal(err, "--peer: more than 64 entries");
    assert_int_equal(p.n_peers, BATON_POLICY_MAX_PEERS);
    free(text);
}

static void test_too_large(void **state)
{
    size_t n = BATON_POLICY_MAX_FILE_BYTES + 1;
    char *text = malloc(n);
    assert_non_null(text);
    memset(text, '\n', n);
    struct baton_policy p;
    baton_policy_default(&p);
    assert_int_equal(baton_policy_parse(&p, text, n, "big", err, sizeof err), BATON_E_FORMAT);
    assert_non_null(strstr(err, "big: larger than 1048576 bytes"));
    assert_int_equal(baton_policy_parse(&p, text, n - 1, "big", err, sizeof err), 0);
    free(text);
}

/* Command-line overrides go on top of a parsed file. */
static void test_overrides(void **state)
{
    struct baton_policy p, before;
    assert_int_equal(parse(&p, "max_connections = 10\nframe_timeout = 3s\npeer = 1.1.1.1:1\n"), 0);
    assert_int_equal(baton_policy_set(&p, "max-connections", "20", err, sizeof err), 0);
    assert_int_equal(p.max_connections, 20);
    assert_int_equal(baton_policy_set(&p, "frame_timeout", "250ms", err, sizeof err), 0);
    assert_int_equal(p.frame_timeout_ms, 250);
    assert_int_equal(baton_policy_set(&p, "handshake-timeout", "1s", err, sizeof err), 0);
    assert_int_equal(p.handshake_timeout_ms, 1000);
    assert_int_equal(baton_policy_set(&p, "peer", "[::1]:8", err, sizeof err), 0);
    assert_int_equal(p.n_peers, 2);
    assert_string_equal(p.peers[1].host, "::1");
    /* the same key again simply overrides (only files refuse duplicates) */
    assert_int_equal(baton_policy_set(&p, "max_connections", "30", err, sizeof err), 0);
    assert_int_equal(p.max_connections, 30);
    memcpy(&before, &p, sizeof p); /* bytewise: padding too */
    assert_int_equal(baton_policy_set(&p, "max-connections", "0", err, sizeof err),
                     BATON_E_FORMAT);
    assert_non_null(strstr(err, "--max_connections: '0' is too small (at least 1)"));
    assert_int_equal(baton_policy_set(&p, "max-connections", "-1", err, sizeof err),
                     BATON_E_FORMAT);
    assert_string_equal(err, "--max_connections: '-1' is too small (at least 1)");
    assert_int_equal(baton_policy_set(&p, "max-connections", "1k", err, sizeof err),
                     BATON_E_FORMAT);
    assert_string_equal(err, "--max_connections: '1k' is not an integer");
    assert_int_equal(baton_policy_set(&p, "nope", "1", err, sizeof err), BATON_E_FORMAT);
    assert_non_null(strstr(err, "--nope: unknown setting"));
    assert_int_equal(baton_policy_set(&p, "port", "", err, sizeof err), BATON_E_FORMAT);
    assert_non_null(strstr(err, "--port: missing value"));
    assert_int_equal(baton_policy_set(&p, "key_file", "a\nb", err, sizeof err), BATON_E_FORMAT);
    assert_string_equal(err, "--key_file: control byte 0x0a in the value");
    assert_int_equal(baton_policy_set(&p, "encrypt", "maybe", err, sizeof err), BATON_E_FORMAT);
    /* a path the file format could not hold back */
    assert_int_equal(baton_policy_set(&p, "key_file", "/k ", err, sizeof err), BATON_E_FORMAT);
    assert_int_equal(baton_policy_set(&p, "key_file", " /k", err, sizeof err), BATON_E_FORMAT);
    assert_int_equal(baton_policy_set(&p, "key_file", "/k #1", err, sizeof err), BATON_E_FORMAT);
    assert_int_equal(baton_policy_set(&p, "key_file", "#k", err, sizeof err), BATON_E_FORMAT);
    assert_memory_equal(&p, &before, sizeof p);
    /* a TAB separates a client line's words, as it does in a file */
    assert_int_equal(baton_policy_set(&p, "client", "ann\t/k/ann.key\tmax_connections=3", err,
                                      sizeof err), 0);
    assert_int_equal(p.n_clients, 1);
    assert_string_equal(p.clients[0].name, "ann");
    assert_string_equal(p.clients[0].key_file, "/k/ann.key");
    assert_int_equal(p.clients[0].max_connections, 3);
    assert_true(baton_policy_key_known("max-unauthenticated-per-ip"));
    assert_true(baton_policy_key_known("peer_key_file"));
    assert_false(baton_policy_key_known("policy"));
    assert_false(baton_policy_key_known(""));
    assert_false(baton_policy_key_known("max-connections-"));
}

/* format -> parse gives back the same struct. */
static void roundtrip(const struct baton_policy *p)
{
    size_t need = baton_policy_format(p, NULL, 0);
    char *text = malloc(need + 1);
    assert_non_null(text);
    assert_int_equal(baton_policy_format(p, text, need + 1), need);
    assert_int_equal(strlen(text), need);
    struct baton_policy q;
    baton_policy_default(&q);
    int rc = baton_policy_parse(&q, text, need, "fmt", err, sizeof err);
    if (rc != 0)
        fail_msg("%s\n%s", err, text);
    assert_memory_equal(p, &q, sizeof q);
    /* a short buffer still gets a NUL-terminated prefix */
    char small[8];
    assert_int_equal(baton_policy_format(p, small, sizeof small), need);
    assert_int_equal(strlen(small), sizeof small - 1);
    assert_memory_equal(small, text, sizeof small - 1);
    free(text);
}

static void test_format_roundtrip(void **state)
{
    struct baton_policy p;
    baton_policy_default(&p);
    roundtrip(&p);
    assert_int_equal(parse(&p, every_field), 0);
    roundtrip(&p);
    assert_int_equal(parse(&p, "max_message_bytes = 5000\nframe_timeout = 1001\n"
                               "max_graph_flops = 1500\ntotal_memory_bytes = 3G\n"),
                     0);
    roundtrip(&p);
    size_t need = baton_policy_format(&p, NULL, 0);
    char *text = malloc(need + 1);
    baton_policy_format(&p, text, need + 1);
    assert_non_null(strstr(text, "max_message_bytes = 5000\n"));
    assert_non_null(strstr(text, "frame_timeout = 1001ms\n"));
    assert_non_null(strstr(text, "handshake_timeout = 5s\n"));
    assert_non_null(strstr(text, "max_graph_flops = 1500\n"));
    assert_non_null(strstr(text, "total_memory_bytes = 3G\n"));
    assert_non_null(strstr(text, "session_memory_bytes = auto\n"));
    assert_null(strstr(text, "key_file"));
    free(text);
}

static void test_load(void **state)
{
    char dir[] = "/tmp/baton-policy-XXXXXX", path[256];
    struct baton_policy p, d;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/a.policy", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("# test\nmax_connections = 5\nhandshake_timeout = 1s\nbogus = 1\n", f);
    fclose(f);
    baton_policy_default(&p);
    memcpy(&d, &p, sizeof p);
    assert_int_equal(baton_policy_load(&p, path, err, sizeof err), BATON_E_FORMAT);
    char want[300];
    snprintf(want, sizeof want, "%s:4: unknown key 'bogus'", path);
    assert_string_equal(err, want);
    assert_memory_equal(&p, &d, sizeof p);
    f = fopen(path, "w");
    fputs("max_connections = 5\nhandshake_timeout = 1s\n", f);
    fclose(f);
    assert_int_equal(baton_policy_load(&p, path, err, sizeof err), 0);
    assert_int_equal(p.max_connections, 5);
    assert_int_equal(p.handshake_timeout_ms, 1000);
    snprintf(path, sizeof path, "%s/missing", dir);
    assert_int_equal(baton_policy_load(&p, path, err, sizeof err), BATON_E_NOT_FOUND);
    assert_non_null(strstr(err, "missing"));
    assert_int_equal(baton_policy_load(&p, dir, err, sizeof err), BATON_E_IO);
    assert_non_null(strstr(err, "not a regular file"));
    snprintf(path, sizeof path, "%s/big", dir);
    f = fopen(path, "w");
    for (unsigned i = 0; i <= BATON_POLICY_MAX_FILE_BYTES; i++)
        fputc('\n', f);
    fclose(f);
    assert_int_equal(baton_policy_load(&p, path, err, sizeof err), BATON_E_LIMIT);
    unlink(path);
    snprintf(path, sizeof path, "%s/a.policy", dir);
    unlink(path);
    rmdir(dir);
}

/* policy/batond.policy documents the defaults: loading it changes nothing. */
static void test_example_file(void **state)
{
    const char *src = getenv("SRC_DIR");
    char path[4096];
    struct baton_policy p, d;
    if (!src)
        skip();
    snprintf(path, sizeof path, "%s/policy/batond.policy", src);
    baton_policy_default(&p);
    memcpy(&d, &p, sizeof p);
    int rc = baton_policy_load(&p, path, err, sizeof err);
    if (rc != 0)
        fail_msg("%s", err);
    assert_memory_equal(&p, &d, sizeof p);
}

static void test_apply(void **state)
{
    struct baton_policy p;
    struct baton_server_config cfg, def;
    baton_server_config_default(&def);
    /* the defaults of both agree */
    baton_policy_default(&p);
    assert_int_equal(baton_policy_apply(&p, &cfg, err, sizeof err), 0);
    assert_memory_equal(&cfg, &def, sizeof cfg);
    assert_int_equal(parse(&p, every_field), 0);
    /* a host name that needs DNS is not for a unit test */
    p.n_peers = 2;
    assert_int_equal(baton_policy_set(&p, "peer", "[::ffff:10.9.8.7]:11", err, sizeof err), 0);
    assert_int_equal(baton_policy_set(&p, "peer", "10.1.2.3:7340", err, sizeof err), 0);
    assert_int_equal(baton_policy_apply(&p, &cfg, err, sizeof err), 0);
    assert_int_equal(cfg.max_connections, 100);
    assert_int_equal(cfg.max_unauthenticated, 9);
    assert_int_equal(cfg.max_unauthenticated_per_ip, 3);
    assert_int_equal(cfg.handshake_timeout_ms, 2000);
    assert_int_equal(cfg.frame_timeout_ms, 1500);
    assert_int_equal(cfg.send_timeout_ms, 750);
    assert_int_equal(cfg.idle_timeout_ms, 0);
    assert_true(cfg.max_message_bytes == 64ull << 20);
    assert_true(cfg.session_memory_bytes == 512ull << 10);
    assert_true(cfg.total_memory_bytes == 2ull << 30);
    assert_int_equal(cfg.max_graph_nodes, 16384);
    assert_true(cfg.max_graph_flops == 5000000000ull);
    assert_int_equal(cfg.max_grants_per_session, 0);
    assert_int_equal(cfg.max_peer_links, 1024);
    assert_int_equal(cfg.max_peer_links_per_session, 2);
    assert_int_equal(cfg.encrypt, 1);
    assert_int_equal(cfg.log_rate, 0);
    assert_int_equal(cfg.n_threads, 64);
    /* 10.1.2.3:7340 twice collapses; fd00::7 is v6; the mapped one is v4 */
    assert_int_equal(cfg.n_peers, 3);
    static const uint8_t a0[4] = {10, 1, 2, 3}, a2[4] = {10, 9, 8, 7};
    static const uint8_t a1[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7};
    assert_int_equal(cfg.peers[0].family, 4);
    assert_memory_equal(cfg.peers[0].addr, a0, 4);
    assert_int_equal(cfg.peers[0].port, 7340);
    assert_int_equal(cfg.peers[1].family, 6);
    assert_memory_equal(cfg.peers[1].addr, a1, 16);
    assert_int_equal(cfg.peers[1].port, 9);
    assert_int_equal(cfg.peers[2].family, 4);
    assert_memory_equal(cfg.peers[2].addr, a2, 4);
    assert_int_equal(cfg.peers[2].port, 11);
    /* auto session memory follows the total */
    assert_int_equal(parse(&p, "total_memory_bytes = 1G\n"), 0);
    assert_int_equal(baton_policy_apply(&p, &cfg, err, sizeof err), 0);
    assert_true(cfg.total_memory_bytes == 1ull << 30 && cfg.session_memory_bytes == 1ull << 30);
    /* a peer that does not resolve */
    assert_int_equal(parse(&p, "peer = no-such-host.invalid:5\n"), 0);
    assert_int_equal(baton_policy_apply(&p, &cfg, err, sizeof err), BATON_E_NOT_FOUND);
    assert_non_null(strstr(err, "no-such-host.invalid"));
}

/* `client` lines (named client keys with limits of their own): parsed in
 * order with their defaults, printed back the same, applied to the server
 * configuration (keys are loaded by batond), and every malformed line
 * refused naming the client. */
static void test_clients(void **state)
{
    (void)state;
    struct baton_policy p, q;
    struct baton_server_config cfg;
    static char text[8192];
    assert_int_equal(parse(&p, "client = team-a /k/a.key max_connections=3\n"
                               "client =  team_b2\trel/b.key  max_graph_flops=1G "
                               "session_memory_bytes=16M max_peer_links=0\n"),
                     0);
    assert_int_equal(p.n_clients, 2);
    assert_string_equal(p.clients[0].name, "team-a");
    assert_string_equal(p.clients[0].key_file, "/k/a.key");
    assert_int_equal(p.clients[0].max_connections, 3);
    assert_true(p.clients[0].session_memory_bytes == 0 && p.clients[0].max_graph_flops == 0);
    assert_int_equal(p.clients[0].max_peer_links, 4);
    assert_string_equal(p.clients[1].name, "team_b2");
    assert_string_equal(p.clients[1].key_file, "rel/b.key");
    assert_int_equal(p.clients[1].max_connections, 16);
    assert_true(p.clients[1].max_graph_flops == 1000000000ull);
    assert_true(p.clients[1].session_memory_bytes == 16ull << 20);
    assert_int_equal(p.clients[1].max_peer_links, 0);
    size_t n = baton_policy_format(&p, text, sizeof text);
    assert_true(n < sizeof text);
    assert_non_null(strstr(text, "client = team-a /k/a.key max_connections=3 max_peer_links=4\n"));
    baton_policy_default(&q);
    assert_int_equal(baton_policy_parse(&q, text, n, "fmt", err, sizeof err), 0);
    assert_memory_equal(&p, &q, sizeof p);
    assert_int_equal(baton_policy_apply(&p, &cfg, err, sizeof err), 0);
    assert_int_equal(cfg.n_clients, 2);
    assert_string_equal(cfg.clients[1].name, "team_b2");
    assert_int_equal(cfg.clients[0].max_connections, 3);
    assert_true(cfg.clients[1].max_graph_flops == 1000000000ull);
    assert_true(cfg.clients[1].session_memory_bytes == 16ull << 20);
    assert_null(cfg.clients[0].key);

    expect_error("client = team-a\n", "client: expected NAME KEYFILE");
    expect_error("client = Team a.key\n", "client: name 'Team' is not 1..31 of a-z 0-9 _ -");
    expect_error("client = a a.key\nclient = a b.key\n", "t.policy:2: client: name 'a' given twice");
    expect_error("client = a max_connections=2\n",
                 "client a: expected a key file after the name, got 'max_connections=2'");
    expect_error("client = a a.key max_conns=2\n", "client a: unknown option 'max_conns'");
    expect_error("client = a a.key max_connections=2 max_connections=3\n",
                 "client a: option max_connections given twice");
    expect_error("client = a a.key max_connections=0\n",
                 "client a: max_connections: '0' is too small (at least 1)");
    expect_error("client = a a.key max_peer_links=1025\n",
                 "client a: max_peer_links: '1025' is too large (at most 1024)");
    expect_error("client = a a.key session_memory_bytes=1K\n",
                 "client a: session_memory_bytes: '1K' is too small");
    expect_error("client = a a.key max_connections\n", "client a: 'max_connections' is not OPTION=VALUE");
    assert_int_equal(parse(&p, "client = a a.key session_memory_bytes=auto\n"), 0);
    assert_true(p.clients[0].session_memory_bytes == 0);
    text[0] = '\0';
    for (int i = 0; i < 17; i++)
        snprintf(text + strlen(text), sizeof text - strlen(text), "client = c%d k%d.key\n", i, i);
    expect_error(text, "t.policy:17: client: more than 16 entries");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clients),
        cmocka_unit_test(test_defaults),        cmocka_unit_test(test_every_field),
        cmocka_unit_test(test_suffixes),        cmocka_unit_test(test_syntax),
        cmocka_unit_test(test_unknown_key_line), cmocka_unit_test(test_duplicates),
        cmocka_unit_test(test_bad_values),      cmocka_unit_test(test_too_many_peers),
        cmocka_unit_test(test_too_large),       cmocka_unit_test(test_overrides),
        cmocka_unit_test(test_format_roundtrip), cmocka_unit_test(test_load),
        cmocka_unit_test(test_example_file),    cmocka_unit_test(test_apply),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
