/* Internal to src/server: the server object, sessions and logging shared by
 * the listener (listener.c), the dispatcher (dispatch.c) and sessions
 * (session.c). */
#ifndef BATON_SERVER_INTERNAL_H
#define BATON_SERVER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "compute/compute.h"
#include "core/tensor.h"
#include "net/transport.h"
#include "server/handles.h"
#include "server/server.h"

#define SERVER_NAME "batond cpu"
#define SERVER_PEER_NAME_BYTES 64

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
};

struct baton_server {
    struct baton_server_config cfg;
    struct baton_handle_table *handles;
    struct baton_pool *pool;
    /* Set when cfg holds a client or peer key: a connection goes from NEW
     * to HELLO_DONE and accepts only AUTH until it succeeds; every frame
     * after AUTH carries a tag (dispatch.c). */
    int auth_required;

    pthread_mutex_t device_lock; /* one graph at a time on the shared pool */

    pthread_mutex_t conn_lock; /* slots, n_active, next_session */
    pthread_cond_t conn_done;  /* signalled when a connection thread ends */
    struct conn_slot *slots;
    uint32_t n_slots;
    uint32_t n_active;
    uint64_t next_session;

    int listen_fd;
    int stop_pipe[2]; /* self-pipe: [1] written by baton_server_stop, [0] never drained */
    atomic_int stopping; /* lock-free, so baton_server_stop may set it from a signal handler */

    pthread_mutex_t log_lock; /* rate limiter of error/refusal lines */
    uint64_t log_window_start_ns;
    uint32_t log_in_window;
    uint64_t log_suppressed;
};

/* One session per connection: its id owns buffers in the handle table; the
 * rest is per-connection working memory, grown on demand within limits. */
struct baton_session {
    uint64_t id;
    uint8_t *scratch; /* graph intermediates (mmap, charged to the quota) */
    uint64_t scratch_bytes;
    uint8_t *req; /* received payloads that are decoded from memory (graphs, small commands) */
    size_t req_cap;
    struct baton_tensor_desc *leaves;
    struct baton_buf_ref *leaf_refs;
    uint8_t **leaf_data;
    uint32_t leaves_cap;
    struct baton_graph_node *nodes;
    struct baton_node_plan *plan;
    uint32_t nodes_cap;
};

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
 * buffers + arena above session_memory_bytes), BATON_E_NOMEM. */
int session_reserve_scratch(struct baton_server *s, struct baton_session *sess, uint64_t n);

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

/* Log lines to stderr (nothing when cfg.quiet). server_log_limited applies
 * the server-wide rate limit (error replies, refused connections). */
void server_log(struct baton_server *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void server_log_limited(struct baton_server *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Protocol name of a command id ("SET_TENSOR"), "?" when unknown. */
const char *server_cmd_name(uint32_t cmd);

#endif
