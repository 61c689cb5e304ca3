/* batond's policy: every limit, deadline and setting of the server in one
 * struct, read from a policy file (`batond --policy FILE`) and overridden by
 * command-line flags (DESIGN.md, "Limits"; policy/batond.policy documents
 * every field and its default).
 *
 * File format (policy/README.md has the full definition):
 *   - UTF-8/ASCII text, at most BATON_POLICY_MAX_FILE_BYTES bytes, lines of
 *     at most BATON_POLICY_MAX_LINE_BYTES bytes ending in LF (a CR before the
 *     LF is ignored; the last line may lack its LF). No NUL or other control
 *     bytes except TAB, and no UTF-8 byte order mark at the start.
 *   - Blank lines and lines whose first non-blank character is '#' are
 *     ignored. Elsewhere '#' preceded by a blank starts a comment that runs
 *     to the end of the line.
 *   - Every other line is `key = value`: blanks (space, TAB) around the key,
 *     the '=' and the value are ignored. key is [a-z0-9_]+ and must be one
 *     of the fields below; each key may appear once, except `peer`, which
 *     may repeat (one allow-list entry per line), and `client` (one named
 *     client key per line, see struct baton_policy_client).
 *   - Values by kind:
 *       count     decimal digits (no sign), in the field's range;
 *       size      decimal digits with an optional suffix K, M or G
 *                 (x 1024, 1024^2, 1024^3), no space before it;
 *       duration  decimal digits with an optional suffix "ms" or "s";
 *                 without a suffix the number is milliseconds;
 *       flops     decimal digits with an optional suffix K, M, G, T or P
 *                 (x 10^3 .. 10^15);
 *       bool      "yes" or "no";
 *       path      any text without control bytes (at most 4095 bytes);
 *       host      a numeric address or a host name, no blanks;
 *       peer      ADDR:PORT or [IPv6]:PORT, port 1..65535;
 *     total_memory_bytes and session_memory_bytes also take "auto".
 *   - Any error names the file and the line: "FILE:LINE: message".
 *
 * The parser allocates only a working copy of the struct and one line
 * buffer, never reads past len, and leaves *p unchanged on error.
 */
#ifndef BATON_SERVER_POLICY_H
#define BATON_SERVER_POLICY_H

#include <stddef.h>
#include <stdint.h>

struct baton_server_config;

#define BATON_POLICY_MAX_FILE_BYTES (1u << 20)
#define BATON_POLICY_MAX_LINE_BYTES 8192u
#define BATON_POLICY_MAX_PEERS 64u
#define BATON_POLICY_PATH_BYTES 4096u
#define BATON_POLICY_HOST_BYTES 256u
#define BATON_POLICY_MAX_CLIENTS 16u
#define BATON_POLICY_CLIENT_NAME_BYTES 32u

/* One named client key with its own limits (a `client` line):
 *   client = NAME KEYFILE [max_connections=N] [session_memory_bytes=SIZE]
 *            [max_graph_flops=FLOPS] [max_peer_links=N]
 * NAME is [a-z0-9_-], 1..31 bytes, unique; KEYFILE a path without blanks
 * or '#' (a key file as for key_file); the options in any order, each at
 * most once. */
struct baton_policy_client {
    char name[BATON_POLICY_CLIENT_NAME_BYTES];
    char key_file[BATON_POLICY_PATH_BYTES];
    uint32_t max_connections;      /* 1..1024, default 16 */
    uint64_t session_memory_bytes; /* >= 4 KiB, 0 (default, or "auto"): the policy's */
    uint64_t max_graph_flops;      /* >= 1, 0 (default): the policy's */
    uint32_t max_peer_links;       /* 0..1024, default 4: its sessions' links together */
};

/* One allow-list entry as written (resolved by baton_policy_apply). */
struct baton_policy_peer {
    char host[BATON_POLICY_HOST_BYTES];
    uint16_t port;
};

/* Every field of the policy file. Durations are milliseconds, sizes bytes. */
struct baton_policy {
    uint32_t max_connections;            /* 1..1024, default 64 */
    uint32_t max_unauthenticated;        /* 1..16384, default 1024 */
    uint32_t max_unauthenticated_per_ip; /* 1..16384, default 1024 */
    uint32_t handshake_timeout_ms;       /* 1 ms..24 h, default 5 s */
    uint32_t frame_timeout_ms;           /* 1 ms..24 h, default 10 s */
    uint32_t send_timeout_ms;            /* 1 ms..24 h, default 10 s */
    uint32_t idle_timeout_ms;            /* 0 (none)..24 h, default 300 s */
    uint64_t max_message_bytes;          /* 4 KiB..4 GiB, default 1 GiB */
    uint64_t session_memory_bytes;       /* 0 = auto (= total), else >= 4 KiB */
    uint64_t total_memory_bytes;         /* 0 = auto (3/4 of RAM), else >= 4 KiB */
    uint32_t max_graph_nodes;            /* 1..16384, default 8192 */
    uint64_t max_graph_flops;            /* >= 1, default 50T (5 x 10^13: a ubatch of
                                            512 through half of a 70B model's layers) */
    uint32_t max_graphs_per_session;     /* 0..4096, default 32 (GRAPH_REGISTER) */
    uint32_t fence_timeout_ms;           /* 1 ms..24 h, default 20 s (GRAPH_RUN fences) */
    uint32_t compute_slice_ms;           /* 1 ms..60 s, default 10 ms (turns on the device) */
    uint32_t max_grants_per_session;     /* 0..65536, default 64 */
    uint32_t max_peer_links;             /* 0..1024, default 16 */
    uint32_t max_peer_links_per_session; /* 0..1024, default 4 */
    uint32_t peer_timeout_ms;            /* 1 ms..24 h, default 5 s */
    uint32_t peer_backoff_max_ms;        /* 1 s..24 h, default 60 s */
    uint32_t peer_queue_depth;           /* 1..64, default 4: copies queued per link */
    uint32_t n_peers;                    /* entries of peers[] in use */
    struct baton_policy_peer peers[BATON_POLICY_MAX_PEERS];
    uint32_t n_clients;                          /* entries of clients[] in use */
    struct baton_policy_client clients[BATON_POLICY_MAX_CLIENTS];
    char key_file[BATON_POLICY_PATH_BYTES];      /* "" = none */
    char peer_key_file[BATON_POLICY_PATH_BYTES]; /* "" = none */
    char bind[BATON_POLICY_HOST_BYTES];          /* default "127.0.0.1" */
    uint16_t port;                               /* 0..65535, default 7340 */
    int encrypt;                                 /* 0/1, default 0 */
    uint32_t log_rate;                           /* 0..100000 lines/s, default 20 */
    uint32_t threads;                            /* 1..64, default 1 */
};

/* Fills *p with the defaults listed above. */
void baton_policy_default(struct baton_policy *p);

/* Parses policy text text[0..len) (need not be NUL-terminated) named `name`
 * in messages, applying each setting on top of *p (start from
 * baton_policy_default). Returns 0, or BATON_E_FORMAT with *p unchanged and
 * err (when err_len > 0) holding "NAME:LINE: reason" for: a line that is
 * not `key = value`, an unknown key, a key given twice (peer excepted), a
 * value that does not parse or is out of range, more than
 * BATON_POLICY_MAX_PEERS peers, a line longer than
 * BATON_POLICY_MAX_LINE_BYTES, a NUL or control byte, or text longer than
 * BATON_POLICY_MAX_FILE_BYTES. BATON_E_NOMEM if the working copy of *p
 * cannot be allocated. */
int baton_policy_parse(struct baton_policy *p, const char *text, size_t len, const char *name,
                       char *err, size_t err_len);

/* Reads the file at path (a regular file of at most
 * BATON_POLICY_MAX_FILE_BYTES) and parses it as above. Errors: those of
 * baton_policy_parse, BATON_E_NOT_FOUND (missing), BATON_E_IO (cannot be
 * read, not a regular file), BATON_E_LIMIT (too large); err names path. */
int baton_policy_load(struct baton_policy *p, const char *path, char *err, size_t err_len);

/* A host written as in a URL, "[ADDR]", which the resolver does not take
 * (bind, batond --host): the length of ADDR when v is exactly "[ADDR]" with
 * ADDR not empty, 0 when v starts with '[' otherwise, -1 when it does not
 * start with '['. */
int baton_policy_host_bracketed(const char *v);

/* Sets one field from a command-line override: key as in the file
 * ("max_connections"; '-' is accepted for '_', so "max-connections" works
 * too) and its value in the file syntax. A `peer` value is appended to the
 * list. Returns 0 or BATON_E_FORMAT with err = "--KEY: reason" and *p
 * unchanged. */
int baton_policy_set(struct baton_policy *p, const char *key, const char *value, char *err,
                     size_t err_len);

/* 1 if key (with '_' or '-') names a policy field, else 0. */
int baton_policy_key_known(const char *key);

/* Writes *p as policy text (one `key = value` line per field, one line per
 * peer, path fields only when set), which baton_policy_parse reads back to
 * the same struct. Returns the length it needs (excluding the NUL); the text
 * is complete iff that is < cap (snprintf rule). */
size_t baton_policy_format(const struct baton_policy *p, char *buf, size_t cap);

/* Turns a policy into a server configuration: starts from
 * baton_server_config_default, copies every limit, resolves the `auto`
 * memory sizes and each peer (getaddrinfo, numeric port; every address a
 * name resolves to is allowed) into cfg->peers. Call at start, before the
 * sandbox is installed. Returns 0, or BATON_E_NOT_FOUND (a peer does not
 * resolve) / BATON_E_LIMIT (more than BATON_SERVER_MAX_PEERS addresses)
 * with err naming the entry. */
int baton_policy_apply(const struct baton_policy *p, struct baton_server_config *cfg, char *err,
                       size_t err_len);

#endif
