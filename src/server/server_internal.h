/* Internal to src/server: the server object, sessions and logging shared by
 * the listener (listener.c), the dispatcher (dispatch.c) and sessions
 * (session.c). */
#ifndef BATON_SERVER_INTERNAL_H
#define BATON_SERVER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "auth/auth.h"
#include "compute/compute.h"
#include "core/tensor.h"
#include "net/transport.h"
#include "server/handles.h"
#include "server/server.h"
#include "wire/wire.h"

#define SERVER_NAME "batond cpu"
#define SERVER_PEER_NAME_BYTES 64

/* ---- respond.c: the responder's half of the handshake ---- */

#define SERVER_HELLO_FRAME_BYTES (BATON_FRAME_HEADER_BYTES + BATON_HELLO_BYTES) /* 72 */
#define SERVER_AUTH_FRAME_BYTES (BATON_FRAME_HEADER_BYTES + BATON_PROOF_BYTES)  /* 56 */

/* A handshake between HELLO and AUTH: the initiator's role and the chosen
 * version, and (need_auth) both HELLO frames, the transcript that AUTH's
 * proof is checked against with each key the role may hold; hs is the
 * state of the key that matched (wiped by server_hs_auth). */
struct server_hs {
    struct baton_hs hs;
    uint8_t role;
    uint16_t version;
    int need_auth;
    uint8_t transcript[2 * SERVER_HELLO_FRAME_BYTES];
};

/* The class a READY connection counts in: a named client (0..n_clients-1)
 * or SERVER_CLASS_OTHER (client_key, the peer role, no keys). */
#define SERVER_CLASS_OTHER (-1)

/* A connection the lobby brought to READY, handed to its thread: the
 * session id, role, version and (tagged) the frame keys (secret). */
struct server_ready {
    uint64_t session;
    uint8_t role;
    uint16_t version;
    int tagged;
    int client; /* the class: a named client's index, or SERVER_CLASS_OTHER */
    struct baton_frame_key send_key, recv_key;
};

/* HELLO: req is the request frame as received (SERVER_HELLO_FRAME_BYTES:
 * header and payload; the caller checked that the header says HELLO, status
 * 0, len BATON_HELLO_BYTES). Picks the role's key and the version, writes
 * the reply frame to rep (SERVER_HELLO_FRAME_BYTES) and, with
 * authentication, starts st->hs on the transcript of both frames.
 * Errors (the status of the error frame; st holds no secret then):
 * BATON_E_PROTO (not HELLO, or role 0), the HELLO decoder's statuses
 * (BATON_E_INVAL: a role above 2, version_min > version_max, reserved
 * bytes not 0), BATON_E_UNSUPPORTED (peer role without authentication),
 * BATON_E_AUTH (no key for the role), BATON_E_VERSION (no common version). */
int server_hs_hello(const struct baton_server *s, const uint8_t *req, struct server_hs *st,
                    uint8_t *rep);

/* AUTH: checks the initiator's proof (BATON_PROOF_BYTES, constant time)
 * against every key its role may hold (peer: peer_key; client: client_key
 * and each named client's; all are tried, whichever matches); on success
 * writes MAC_r to proof_out and fills ready's role, version, tagged, client
 * (which key) and frame keys (the caller sets session). Every handshake
 * secret is wiped either way. Errors: BATON_E_AUTH (nothing written to
 * ready), BATON_E_NOMEM. */
int server_hs_auth(const struct baton_server *s, struct server_hs *st, const uint8_t *proof_in,
                   uint8_t *proof_out, struct server_ready *ready);

/* The authentication log line of a handshake (server_log_auth): failed, or
 * authenticated with its role, key name (client: a named client's index)
 * and whether payloads are encrypted. */
void server_log_auth_outcome(struct baton_server *s, uint64_t session, const char *peer,
                             uint8_t role, int ok, int client);

/* Wipes ready's keys and fields. */
void server_ready_wipe(struct server_ready *ready);

/* cmd and seq of a request header hb (BATON_FRAME_HEADER_BYTES) that
 * failed to decode with status, for its error frame: after a bad magic
 * nothing of it is trusted (0, 0). */
void server_header_echo(const uint8_t *hb, int status, uint8_t *cmd, uint32_t *seq);

/* ---- lobby.c: connections before READY ---- */

struct server_lobby;

/* The listener loop of baton_server_run (lobby.c): accepts, holds every
 * connection before READY in one event loop (no thread), does its
 * handshake there, and hands it to a connection thread once it is READY.
 * Returns when the server stops (0) or the listening socket fails
 * (BATON_E_IO); every lobby connection is closed by then. */
int server_lobby_run(struct baton_server *s);

/* Test seam (fuzz/fuzz_lobby.c): the same lobby driven step by step by its
 * caller, without a listening socket or the stop pipe, on a clock the
 * caller sets (CLOCK_MONOTONIC ns in batond; any monotonic count in a
 * harness). server_lobby_run is these steps around epoll_wait and accept.
 *   create: an empty lobby of s->lobby_cap entries (max_unauthenticated
 *     when 0) with its own epoll set. BATON_E_NOMEM.
 *   adopt: what accept does with a new connection fd (adopted: closed by
 *     the lobby) from client address (family 4 or 6, or 0 for none:
 *     server_peer_ip's form) at now_ns: the caps make room (evicting), the
 *     handshake deadline is now_ns + handshake_timeout_ms.
 *   step: at now_ns, closes the entries whose deadline has passed, then acts
 *     on what one epoll_wait without waiting reports (reads, replies,
 *     closes, hands READY connections to their threads). Returns the count
 *     of events (0: nothing was ready) or BATON_E_IO.
 *   entries: connections in the lobby now.
 *   destroy: closes every entry (NULL-safe). */
int server_lobby_create(struct baton_server *s, struct server_lobby **out);
void server_lobby_adopt(struct server_lobby *L, int fd, uint8_t family, const uint8_t ip[16],
                        uint64_t now_ns);
int server_lobby_step(struct server_lobby *L, uint64_t now_ns);
uint32_t server_lobby_entries(const struct server_lobby *L);
void server_lobby_destroy(struct server_lobby *L);

/* server.c: for the lobby (caller holds conn_lock): joins finished
 * threads; whether a connection of class `client` (SERVER_CLASS_OTHER or a
 * named client) has room: its class below its max_connections; starts the
 * connection thread of fd (adopted, closed on failure) on a free slot,
 * READY with *ready (moved into the slot, wiped here). Returns 0,
 * BATON_E_LIMIT (its class is full; fd untouched, ready kept), or another
 * status (fd closed). */
void server_reap_locked(struct baton_server *s);
int server_start_ready_locked(struct baton_server *s, int fd, const char *peer, uint8_t family,
                              const uint8_t *ip, struct server_ready *ready);
int server_has_room_locked(struct baton_server *s, int client);
/* The client address of socket fd: family 4 or 6 (an IPv4-mapped IPv6
 * address counts as IPv4) and 16 bytes, family 0 when it has none. */
void server_peer_ip(int fd, uint8_t *family, uint8_t ip[16]);

/* One connection thread's slot (fixed array of max_connections). */
enum conn_slot_state { SLOT_FREE = 0, SLOT_RUNNING, SLOT_DONE };

struct conn_slot {
    struct baton_server *server;
    struct baton_transport *transport;
    pthread_t thread;
    int state;
    int authenticated; /* handshake done (server_conn_authenticated); under conn_lock */
    uint8_t ip_family; /* 4, 6, or 0 (AF_UNIX: no per-address cap) */
    uint8_t ip[16];    /* the client's address, for the per-IP unauthenticated cap */
    char peer[SERVER_PEER_NAME_BYTES];
    int client;                /* its class (SERVER_CLASS_OTHER or a named client) */
    int has_ready;             /* the lobby did the handshake: ready holds its outcome */
    struct server_ready ready; /* moved into the connection by its thread, then wiped */
};

/* One per-second window of a log rate limiter (server.c). */
struct log_limiter {
    uint64_t window_start_ns;
    uint32_t in_window;
    uint64_t suppressed;
};

struct baton_server {
    struct baton_server_config cfg;
    struct baton_handle_table *handles;
    struct baton_pool *pool;
    /* Set when cfg holds a client or peer key: a connection goes from NEW
     * to HELLO_DONE and accepts only AUTH until it succeeds; every frame
     * after AUTH carries a tag (dispatch.c). */
    int auth_required;

    /* The compute device (the shared pool): one graph at a time, in turns
     * (server.c server_device_*): a ticket lock, so sessions get it in the
     * order they asked, and a graph hands it over between nodes once it
     * has held it cfg.compute_slice_ms while another session waits. */
    struct device_turns {
        pthread_mutex_t mu;
        pthread_cond_t cv;
        int busy;                     /* a session holds the device */
        int holder;                   /* its class (client), while busy */
        struct device_waiter *head, *tail; /* waiting sessions, in arrival order */
        _Atomic uint32_t waiting;     /* sessions waiting for their turn */
        _Atomic uint64_t handovers;   /* turns given up to a waiting session */
    } device;

    pthread_mutex_t conn_lock; /* slots, n_active, next_session */
    pthread_cond_t conn_done;  /* signalled when a connection thread ends */
    struct conn_slot *slots;
    uint32_t n_slots;
    uint32_t n_active;
    uint64_t next_session;

    int listen_fd;
    uint32_t lobby_cap; /* connections before READY the lobby holds (after the fd limit) */
    int lobby_epfd;     /* made by baton_server_listen, taken by the lobby */
    int stop_pipe[2]; /* self-pipe: [1] written by baton_server_stop, [0] never drained */
    atomic_int stopping; /* lock-free, so baton_server_stop may set it from a signal handler */

    pthread_mutex_t log_lock; /* guards both rate limiters */
    struct log_limiter log_errors;      /* error / refusal lines */
    struct log_limiter log_connections; /* connection open / close lines */
    struct log_limiter log_auth;        /* authentication outcomes */

    /* Direct path (grants.c, peer_link.c). */
    struct grant_table *grants;
    pthread_mutex_t peer_lock; /* n_links and backoff[]; never held across I/O */
    uint32_t n_links;          /* outbound peer links open, all sessions */
    uint32_t client_links[BATON_SERVER_MAX_CLIENTS]; /* the same per named client */
    struct peer_backoff {
        uint32_t fails;    /* connect/handshake failures in a row */
        uint64_t until_ns; /* no dial before this (CLOCK_MONOTONIC) */
    } backoff[BATON_SERVER_MAX_PEERS]; /* one per allow-list entry, cfg.peers[i] */

    /* Test seam, NULL in batond: when set, a peer link's dial (peer_link.c)
     * takes its connected stream socket from here instead of a TCP connect
     * to allow-list entry a, so a harness can link the server to an
     * in-memory peer (fuzz/fuzz_dispatcher.c: a socketpair served by the
     * same server). Returns 0 with *fd (then owned by the link) or a
     * status, treated as a failed connect. Set before any session runs. */
    int (*peer_connect)(void *ctx, const struct baton_peer_addr *a, int timeout_ms, int *fd);
    void *peer_connect_ctx;
};

struct peer_link; /* peer_link.c: one outbound link of a session and its sender */

/* A route registered with COPY_ROUTE: a tensor of the session and a
 * destination grant, for GRAPH_RUN's hand-off. */
#define BATON_SERVER_MAX_ROUTES 16u
struct stored_route {
    struct baton_tensor_desc tensor; /* re-resolved at each hand-off */
    struct baton_peer_dest dest;
};

/* A graph registered with GRAPH_REGISTER: validated once, its leaves
 * re-resolved (owner, generation, extent) at every GRAPH_RUN. */
struct stored_graph {
    uint32_t id; /* >= 1, unique within the session */
    uint32_t n_leaves, n_nodes;
    struct baton_tensor_desc *leaves;
    struct baton_graph_node *nodes;
    struct baton_node_plan *plan;
    uint64_t scratch_bytes;
    uint64_t charged_bytes; /* what it holds against the memory accounting */
};

/* One session per connection: its id owns buffers in the handle table; the
 * rest is per-connection working memory, grown on demand within limits. */
struct baton_session {
    uint64_t id;
    int client; /* its connection's class (SERVER_CLASS_OTHER or a named client) */
    uint8_t *scratch; /* graph intermediates (mmap, charged to the quota) */
    uint64_t scratch_bytes;
    /* the arena was grown at GRAPH_REGISTER and no run has reserved it
     * since: it gives way to the session's later registrations and buffers
     * (session_prepare_scratch) */
    int scratch_ahead;
    uint8_t *req; /* received payloads that are decoded from memory (graphs, small commands) */
    size_t req_cap;
    struct baton_tensor_desc *leaves;
    struct baton_buf_ref *leaf_refs;
    uint8_t **leaf_data;
    uint32_t leaves_cap;
    struct baton_graph_node *nodes;
    struct baton_node_plan *plan;
    uint32_t nodes_cap;
    /* Direct path: this session's outbound peer links, keyed by destination
     * (each with its sender thread), and its counters (COPY_TENSOR_TO
     * reply), which the senders update. */
    struct peer_link **links;
    uint32_t n_links, links_cap;
    _Atomic uint64_t peer_bytes_sent;
    _Atomic uint64_t copies_done, copies_not_done;
    _Atomic uint64_t staging_bytes; /* asynchronous copies waiting in the senders' queues */
    /* Registered graphs (GRAPH_REGISTER), and the failed-run latch: set by
     * a GRAPH_RUN that fails, cleared by GRAPH_RUN's RESET flag; while set,
     * GRAPH_RUN fails with E_FENCE and COPY_TENSOR_TO cancels instead of
     * copying (docs/PROTOCOL.md "Asynchronous hand-off"). */
    struct stored_graph *graphs;
    uint32_t n_graphs;
    struct stored_route *routes; /* COPY_ROUTE, at most BATON_SERVER_MAX_ROUTES */
    uint32_t n_routes;
    uint32_t next_graph_id;
    uint64_t graph_bytes; /* held by the registered graphs (charged) */
    int run_failed;
    /* server_peer_copy queued a job for the link's sender and returned:
     * the connection thread yields its core once its reply is out
     * (server_yield_to_sender); this thread's alone */
    int sender_queued;
};

/* grants.c: the server-wide grant table. A copy of one entry: */
struct grant {
    uint8_t id[BATON_GRANT_ID_BYTES];
    uint64_t owner;  /* session id */
    uint64_t handle; /* generation << 32 | index, as granted */
    uint64_t offset; /* granted bytes [offset, offset + length) of the buffer */
    uint64_t length;
    /* Fence state (sequence numbers of PEER_WRITE / PEER_FENCE): */
    uint64_t last_seq;   /* the newest seq the grant has seen (writes only move forward) */
    uint64_t landed_seq; /* the write whose bytes the grant holds, tag verified (0: none) */
    uint64_t failed_seq; /* the newest seq cancelled or whose write did not land */
    uint32_t writing;    /* a PEER_WRITE (of last_seq) is receiving into the grant */
    uint32_t readers;    /* GRAPH_RUNs fenced on the grant that are reading it now */
};
struct grant_table;
/* Creates an empty table with a cap of per_session grants per session.
 * Returns 0, BATON_E_NOMEM or BATON_E_IO (no random source). */
int grants_create(uint32_t per_session, struct grant_table **out);
void grants_destroy(struct grant_table *g); /* NULL-safe */
/* Records a grant with a fresh random non-zero id (written to id) for the
 * caller's already validated range. BATON_E_INVAL when the range overlaps
 * another grant of session on the same handle, BATON_E_LIMIT when session
 * holds its cap of grants, BATON_E_NOMEM. */
int grants_add(struct grant_table *g, uint64_t session, uint64_t handle, uint64_t offset,
               uint64_t length, uint8_t id[BATON_GRANT_ID_BYTES]);
/* Removes session's grant id: 0, or BATON_E_NOT_FOUND (no such grant, or
 * another session's). */
int grants_revoke(struct grant_table *g, uint64_t session, const uint8_t id[BATON_GRANT_ID_BYTES]);
/* Copies the grant with this id to *out: 0 or BATON_E_NOT_FOUND. */
int grants_find(struct grant_table *g, const uint8_t id[BATON_GRANT_ID_BYTES], struct grant *out);
/* Drops every grant of session on handle (FREE_BUFFER). */
void grants_drop_handle(struct grant_table *g, uint64_t session, uint64_t handle);
/* Drops every grant and the counters of session (session end). */
void grants_drop_session(struct grant_table *g, uint64_t session);
/* Counts bytes of a PEER_WRITE that landed in one of session's grants. */
void grants_add_received(struct grant_table *g, uint64_t session, uint64_t bytes);
/* session's PEER_WRITE bytes received so far and grants held (either may
 * be NULL). */
void grants_session_info(struct grant_table *g, uint64_t session, uint64_t *bytes_received,
                         uint32_t *n_grants);
/* A PEER_WRITE with sequence number seq begins: BATON_E_NOT_FOUND (no such
 * grant), BATON_E_FENCE (seq not newer than the grant's last, or another
 * write in progress), BATON_E_TIMEOUT (a fenced run still read the grant at
 * deadline_ns). On 0 the grant is marked writing seq (its old bytes no
 * longer count as landed) and *out is a copy; grants_write_end must
 * follow. */
int grants_write_begin(struct grant_table *g, const uint8_t id[BATON_GRANT_ID_BYTES],
                       uint64_t seq, uint64_t deadline_ns, struct grant *out);
/* Copies n bytes of that write (src, already received) to dst (inside the
 * granted range, pinned by the caller) under the table lock, so a revoke or
 * seal that returned lands nothing more: 0, BATON_E_NOT_FOUND (revoked) or
 * BATON_E_FENCE (sealed: the write is void). */
int grants_write_land(struct grant_table *g, const uint8_t id[BATON_GRANT_ID_BYTES], uint64_t seq,
                      uint8_t *dst, const uint8_t *src, size_t n);
/* Ends that write: landed (the data and its tag checked) or not (failed:
 * a fence on seq then fails at once). */
void grants_write_end(struct grant_table *g, const uint8_t id[BATON_GRANT_ID_BYTES], uint64_t seq,
                      int landed);
/* PEER_FENCE: seq will not come. 0, BATON_E_NOT_FOUND, or BATON_E_FENCE
 * when seq is not newer than the grant's last (or a write is in
 * progress). */
int grants_cancel(struct grant_table *g, const uint8_t id[BATON_GRANT_ID_BYTES], uint64_t seq);
/* PEER_FENCE from the grant's owner (a client-role connection of
 * session): every seq up to seq is void. A write in progress lands nothing
 * more once this returns; a later write must be newer than seq. 0,
 * BATON_E_NOT_FOUND (no such grant of session) or BATON_E_FENCE (seq not
 * newer than the grant's last). */
int grants_seal(struct grant_table *g, uint64_t session, const uint8_t id[BATON_GRANT_ID_BYTES],
                uint64_t seq);
/* A fenced run of session waits until each grant ids[i] (i < n) holds
 * exactly the write seqs[i], all at the same time; then it counts as a
 * reader of each (grants_fence_release, once per fence) — taken together
 * under the table lock, so no fence is held while another is waited for.
 * Returns 0, or with *failed the index of the fence that failed:
 * BATON_E_NOT_FOUND (no such grant of this session), BATON_E_FENCE (its
 * seq can no longer land: a newer write began, or it was cancelled or
 * failed) or BATON_E_TIMEOUT at deadline_ns (CLOCK_MONOTONIC; *failed: the
 * first fence not satisfied then), or BATON_E_IO as soon as abandoned(arg)
 * (when not NULL; asked every 100 ms without the lock) says the run is no
 * longer wanted: its client went away, or the server is stopping. */
int grants_fence_wait(struct grant_table *g, uint64_t session,
                      const uint8_t (*ids)[BATON_GRANT_ID_BYTES], const uint64_t *seqs,
                      uint32_t n, uint64_t deadline_ns, int (*abandoned)(void *), void *arg,
                      uint32_t *failed);
void grants_fence_release(struct grant_table *g, const uint8_t id[BATON_GRANT_ID_BYTES]);

/* peer_link.c: COPY_TENSOR_TO's transfer. Hands data[0..n) (pinned by the
 * caller, 1 <= n <= max_message_bytes) to the sender of sess's link to dest
 * (created on first use: allow-list, link cap, peer key), which sends it as
 * a PEER_WRITE with sequence number opt->seq into dest's grant, dialling
 * the link when needed (backoff; connect/handshake/I-O deadlines of
 * peer_timeout_ms; a stale cached link is retried once at once). With
 * BATON_COPY_ASYNC in opt->flags the data is first copied into a staging
 * buffer (charged to the session's memory; without room the copy is done
 * synchronously instead) and BATON_COPY_QUEUED is returned at once;
 * otherwise the call waits for the outcome. cancel (a positive status
 * code, or 0) sends PEER_FENCE(seq, cancel) instead of the data and
 * returns BATON_COPY_CANCELLED once queued (or sent). Returns the outcome
 * (enum baton_copy_outcome) and, when not done, *status = the baton status
 * that caused it (0 when none). Never fails the caller's connection. A
 * job left to the sender without waiting sets sess->sender_queued. */
uint32_t server_peer_copy(struct baton_server *s, struct baton_session *sess,
                          const struct baton_peer_dest *dest, const struct baton_copy_options *opt,
                          uint32_t cancel, const uint8_t *data, uint64_t n, int *status);
/* Called by the connection thread after each request's reply (dispatch.c):
 * where the request queued a job for a link's sender (sess->sender_queued,
 * set by server_peer_copy, read and cleared on this thread only),
 * sched_yield once, so a sender that shares this thread's core sends now
 * instead of when the scheduler ends this thread's time slice (a stage
 * pinned to one core computes the next ubatch at once: the next stage
 * waited up to 6 ms for the hand-off, bench/RESULTS.md "Thirty-seventh
 * session"). Where the sender runs on another, idle core it costs one
 * system call. The cost otherwise: other runnable threads of this core (a
 * second session's compute, more threads than cores) may run first, as
 * they would at the end of the slice; the scheduler shares the core among
 * them either way. */
void server_yield_to_sender(struct baton_session *sess);

/* The backoff after `fails` connect/handshake failures in a row (>= 1):
 * 1 s, 2 s, 4 s ... capped at cap_ms. */
uint64_t server_backoff_delay_ms(uint32_t fails, uint64_t cap_ms);
/* Stops every sender of sess (each finishes the job it is on, bounded by
 * its deadlines; queued jobs are dropped) and closes its links (session
 * end). */
void server_peer_links_close(struct baton_server *s, struct baton_session *sess);
/* Name of an outcome for log lines ("backoff"). */
const char *server_copy_outcome_name(uint32_t outcome);

/* session.c */
uint64_t server_next_session_id(struct baton_server *s);
void session_init(struct baton_session *sess, uint64_t id);
/* Frees every buffer of the session and its working memory. */
void session_end(struct baton_server *s, struct baton_session *sess);
/* Makes sess->req hold at least n bytes (n <= the caller's limit).
 * Returns 0 or BATON_E_NOMEM. */
int session_reserve_req(struct baton_session *sess, size_t n);
/* Sizes the graph decode arrays for the validated counts. Returns 0 or
 * BATON_E_NOMEM. */
int session_reserve_graph(struct baton_session *sess, uint32_t n_leaves, uint32_t n_nodes);
/* Makes the scratch arena at least n bytes: BATON_E_LIMIT above
 * max_scratch_bytes, BATON_E_QUOTA (total memory, or the session's
 * buffers + arena + registered graphs + staged copies above
 * session_memory_bytes), BATON_E_NOMEM. */
int session_reserve_scratch(struct baton_server *s, struct baton_session *sess, uint64_t n);
/* The arena of a graph's runs, reserved at its GRAPH_REGISTER (a coordinator
 * registers at load), so that its pages are faulted in there and not inside
 * the first run: n bytes exactly (whole pages), not grown geometrically,
 * and quietly (a refusal is not logged: the run that needs the arena
 * reserves it and reports the limit). Only while no run has reserved an
 * arena: a run's arena is left as it is. Such an arena gives way: a
 * registration or buffer of the session refused for memory frees it
 * (session_yield_scratch) and is tried again, so the session's requests
 * are answered as if no run had come yet. */
void session_prepare_scratch(struct baton_server *s, struct baton_session *sess, uint64_t n);
/* Frees the arena when session_prepare_scratch made it and no run has
 * reserved it since: 1 (the caller tries its charge again), else 0. Only on
 * the session's connection thread, between commands. */
int session_yield_scratch(struct baton_server *s, struct baton_session *sess);
/* Charges bytes more of the session's own memory outside buffers and the
 * arena (registered graphs, staged copies) against session_memory_bytes
 * and the total: 0 or BATON_E_QUOTA. */
int session_charge(struct baton_server *s, struct baton_session *sess, uint64_t bytes);
/* The limits of sess's class: a named client's own, or cfg's. */
uint64_t session_memory_cap(const struct baton_server *s, const struct baton_session *sess);
uint64_t session_flops_cap(const struct baton_server *s, const struct baton_session *sess);

/* The session's memory outside its buffers: arena, graphs, staged copies. */
uint64_t session_extra_bytes(const struct baton_session *sess);
/* Frees registered graph i of sess (keeps the array without holes). */
void session_graph_free(struct baton_server *s, struct baton_session *sess, uint32_t i);

/* dispatch.c: serves one connection until it ends (see
 * baton_server_serve_transport). Does not close t. slot is the listener's
 * slot of the connection (NULL for serve_transport): the dispatcher calls
 * server_conn_authenticated(s, slot) once the connection reaches READY. */
int server_serve_connection(struct baton_server *s, struct baton_transport *t, const char *peer,
                            struct conn_slot *slot);

/* server.c: the connection of slot finished its handshake (HELLO without
 * keys, AUTH with keys) and no longer counts against max_unauthenticated
 * and max_unauthenticated_per_ip. NULL-safe; idempotent. */
void server_conn_authenticated(struct baton_server *s, struct conn_slot *slot);

/* server.c: the compute device in turns. acquire waits for this caller's
 * turn and sets *turn_start (CLOCK_MONOTONIC ns); release ends it and hands
 * the device to the waiting session that arrived first among those of
 * another class (client key) than the releasing one, else to the first:
 * so one key's many sessions cannot keep another key's step waiting for
 * more than one turn. between (called by the graph executor between nodes
 * and pieces, baton_exec_turns) gives the device up once this session has
 * held it cfg.compute_slice_ms while another waits, and waits for its next
 * turn. client is the caller's class. */
void server_device_acquire(struct baton_server *s, int client, uint64_t *turn_start);
void server_device_release(struct baton_server *s);
void server_device_between(struct baton_server *s, int client, uint64_t *turn_start);

/* A session waiting for the device (on the waiter's stack). */
struct device_waiter {
    struct device_waiter *next;
    int client;
    int granted;
};

/* Log lines to stderr (nothing when cfg.quiet). Three server-wide rate
 * limits of cfg.log_rate lines per second each, so no flood fills the log
 * and no kind of line crowds out another: server_log_limited for error
 * replies and refused connections, server_log_conn for connection open /
 * close lines, server_log_auth for authentication outcomes (failed or
 * succeeded, with the peer address). What a window dropped is summarized
 * as "(N <kind> log lines suppressed)": with the next line of that kind,
 * or by server_log_flush once the window is over. */
void server_log(struct baton_server *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void server_log_limited(struct baton_server *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void server_log_conn(struct baton_server *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void server_log_auth(struct baton_server *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prints the summaries of windows that are over (the accept loop calls it
 * once a second). */
void server_log_flush(struct baton_server *s);


#endif
