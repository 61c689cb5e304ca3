/* batond's server core: handle table, sessions, dispatcher, listener.
 *
 * One thread per connection serves its requests strictly in order. The same
 * dispatcher serves a TCP connection, an in-process stage (`baton run
 * --servers local`, over a socketpair) and a fuzz harness's byte stream
 * (over the transport interface of src/net/transport.h).
 */
#ifndef BATON_SERVER_H
#define BATON_SERVER_H

#include <stdint.h>

struct baton_server;
struct baton_key; /* auth/auth.h */

#define BATON_SERVER_MAX_PEERS 64u

/* One allowed peer endpoint: a binary address (IPv4 in the first 4 bytes of
 * addr, family 4; IPv6 all 16, family 6) and a port, matched exactly. */
struct baton_peer_addr {
    uint8_t family;
    uint8_t addr[16];
    uint16_t port;
};

/* One named client key with limits of its own (policy `client` lines):
 * its holders can exhaust only this share. */
#define BATON_SERVER_MAX_CLIENTS 16u
struct baton_server_client {
    char name[32];                  /* [a-z0-9_-]{1,31}, for log lines */
    const struct baton_key *key;    /* borrowed, as client_key */
    uint32_t max_connections;       /* its READY connections at once (>= 1) */
    uint64_t session_memory_bytes;  /* each of its sessions (0: cfg's) */
    uint64_t max_graph_flops;       /* each of its graphs (0: cfg's) */
    uint32_t max_peer_links;        /* outbound links of all its sessions together */
};

struct baton_server_config {
    uint32_t n_threads;          /* compute threads per graph (default 1) */
    uint64_t max_message_bytes;  /* default 1 GiB */
    uint32_t max_graph_nodes;    /* default 8192 */
    uint64_t total_memory_bytes; /* all buffers of all sessions (default: 3/4 of RAM) */
    uint32_t max_connections;    /* default 64 */
    int frame_timeout_ms;        /* whole frame, from its first byte (default 10000) */
    int idle_timeout_ms;         /* between frames (default 300000; 0 = none) */
    int send_timeout_ms;         /* whole reply (default 10000) */
    int quiet;                   /* no per-connection log lines */
    uint64_t max_scratch_bytes;  /* one session's graph scratch arena, counted
                                    against total_memory_bytes (default 1 GiB) */
    /* Limits of issue 3 (src/server/policy.h fills them from the policy). */
    uint32_t max_unauthenticated;        /* connections before READY, in the lobby (default 1024) */
    uint32_t max_unauthenticated_per_ip; /* the same per client address (default 1024) */
    int handshake_timeout_ms;            /* connect to READY (default 5000) */
    uint64_t session_memory_bytes;       /* buffers + scratch of one session
                                            (default: total_memory_bytes) */
    uint64_t max_graph_flops;            /* per GRAPH_COMPUTE, baton_graph_flops
                                            (default 5 x 10^13) */
    uint32_t max_graphs_per_session;     /* GRAPH_REGISTER, per session (default 32) */
    int fence_timeout_ms;                /* a GRAPH_RUN's wait for its fences (default 20000) */
    int compute_slice_ms;                /* a graph gives the device to a waiting session
                                            after this long, between nodes (default 10) */
    uint32_t max_grants_per_session;     /* direct path (default 64) */
    uint32_t max_peer_links;             /* direct path: open peer links, server-wide
                                            (default 16) */
    uint32_t max_peer_links_per_session; /* the same, per session (default 4) */
    int peer_timeout_ms;                 /* each of: connect, handshake, one PEER_WRITE
                                            and its reply, on a peer link (default 5000) */
    int peer_backoff_max_ms;             /* cap of the dial backoff (default 60000) */
    uint32_t peer_queue_depth;           /* copies queued per peer link, 1..64 (default 4) */
    uint32_t log_rate;                   /* rate-limited log lines per second (default 20) */
    int encrypt;                         /* payload encryption after AUTH (default 0) */
    uint32_t n_peers;                    /* outbound allow-list, resolved at start */
    struct baton_peer_addr peers[BATON_SERVER_MAX_PEERS];
    /* Authentication (SECURITY.md, docs/PROTOCOL.md "AUTH"). The keys are
     * borrowed (baton_key_open) and must outlive the server. With either key
     * set every connection must complete HELLO + AUTH with the key of the
     * role in its HELLO (client -> client_key, peer -> peer_key; a role
     * whose key is not held is refused with E_AUTH), and every frame after
     * AUTH carries a 16-byte tag (encrypt: payloads are also encrypted).
     * Both NULL: no authentication (encrypt must then be 0). */
    const struct baton_key *client_key;
    const struct baton_key *peer_key;
    /* Named client keys, each with its own limits (a client proves one of
     * them, or client_key; the server tries each). Connections of client_key
     * and of the peer role share max_connections; each named client has its
     * own max_connections on top, so the slots are max_connections + the
     * sum of the clients' and a client within its share is never refused
     * for lack of one. Keys must differ from each other and from peer_key. */
    uint32_t n_clients;
    struct baton_server_client clients[BATON_SERVER_MAX_CLIENTS];
    int insecure_no_auth; /* allow a non-loopback listen without keys (default 0) */
};

/* Fills *cfg with the defaults above. */
void baton_server_config_default(struct baton_server_config *cfg);

/* Creates a server (no socket yet). *out owned by the caller. */
int baton_server_create(const struct baton_server_config *cfg, struct baton_server **out);

/* Serves one already-connected stream socket on a new connection thread.
 * Adopts fd (closed by the server on every path). Returns 0 or
 * BATON_E_LIMIT (connection cap) / BATON_E_NOMEM. */
int baton_server_serve_fd(struct baton_server *s, int fd);

/* Binds and listens on host:port (port 0 = ephemeral); *bound_port gets the
 * port. A non-loopback address needs a key (client_key or peer_key) or
 * insecure_no_auth in the configuration; otherwise BATON_E_AUTH. */
int baton_server_listen(struct baton_server *s, const char *host, uint16_t port,
                        uint16_t *bound_port);

/* Accept loop; returns 0 after baton_server_stop (from any thread or a
 * signal handler via the self-pipe), once all connections have drained
 * (BATON_E_IO, also after draining, if the listening socket fails;
 * BATON_E_INVAL without a successful baton_server_listen). */
int baton_server_run(struct baton_server *s);

/* Async-signal-safe: asks baton_server_run to stop accepting and drain. */
void baton_server_stop(struct baton_server *s);

/* Closes every connection, joins every thread, frees every buffer. */
void baton_server_destroy(struct baton_server *s);

struct baton_transport; /* net/transport.h */

/* Serves one connection over any transport on the calling thread until it
 * closes (peer gone, framing error, baton_server_stop between frames), then
 * frees its session. Takes ownership of t (closed on every path). peer is
 * the name used in log lines (NULL: "local"). Used by fuzz harnesses (with
 * the in-memory transport) and tests; not counted against max_connections.
 * Returns 0 when the connection ended cleanly at a frame boundary, or the
 * status that ended it (a framing error, BATON_E_IO, BATON_E_TIMEOUT). */
int baton_server_serve_transport(struct baton_server *s, struct baton_transport *t,
                                 const char *peer);

/* The number of connections being served now (threads of serve_fd and the
 * listener). */
uint32_t baton_server_active_connections(struct baton_server *s);

#endif
