/* libbaton: the client side of the baton protocol (docs/PROTOCOL.md).
 *
 * A struct baton_conn owns one connection (its socket descriptor) to one
 * batond. Calls on one connection must come from one thread at a time.
 * Every call has a deadline (baton_conn_set_timeout, default 30 s); a dead or
 * silent server gives BATON_E_IO or BATON_E_TIMEOUT and the connection is
 * then unusable (BATON_E_IO for every later call).
 *
 * Errors: 0 on success, or a negative enum baton_status. A status the server
 * sent back is returned as is (e.g. BATON_E_NOT_OWNED). On an authenticated
 * connection a reply whose tag does not verify gives BATON_E_AUTH and the
 * connection is dead; GET data already written to the caller's memory is
 * then not to be used.
 */
#ifndef BATON_CLIENT_H
#define BATON_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "baton/status.h"
#include "core/tensor.h"
#include "wire/wire.h"

struct baton_conn;

/* Per-command counters at this end: requests sent, request bytes (header +
 * payload), reply bytes (header + payload). */
struct baton_cmd_stats {
    uint64_t count;
    uint64_t request_bytes;
    uint64_t reply_bytes;
};

/* Connects (TCP, SOCK_CLOEXEC, TCP_NODELAY) to host:port within timeout_ms and
 * performs HELLO. host is a numeric address or a name. *out is owned by the
 * caller (baton_conn_close). */
int baton_conn_connect(const char *host, uint16_t port, int timeout_ms, struct baton_conn **out);

/* Adopts a connected stream socket (closed by baton_conn_close even on
 * failure) and performs HELLO. Used for in-process servers (socketpair). */
int baton_conn_adopt_fd(int fd, int timeout_ms, struct baton_conn **out);

struct baton_key; /* src/auth/auth.h: a key loaded with baton_key_open */

/* How to connect (the plain functions above are these with key NULL and
 * the client role). */
struct baton_conn_options {
    int timeout_ms;              /* connect and every later call, as above */
    /* With a key, HELLO is followed by AUTH (docs/PROTOCOL.md): both sides
     * prove the key over the two HELLO frames, and every later frame carries
     * a 16-byte tag (payloads also encrypted when the server's HELLO sets
     * BATON_FEATURE_ENCRYPT). A server that offers no authentication is
     * refused, and so is a server that requires it when key is NULL
     * (BATON_E_AUTH). A wrong key gives BATON_E_AUTH. The key is only read
     * during the call (borrowed). */
    const struct baton_key *key;
    uint8_t role;                /* BATON_ROLE_CLIENT (also when 0) or BATON_ROLE_PEER */
    /* When not NULL, set by the call whatever it returns: 1 if the
     * server's HELLO reply offered authentication (BATON_FEATURE_AUTH), 0
     * if it did not, -1 if no valid HELLO reply came. It tells the two
     * BATON_E_AUTH cases of a keyed client apart (a server without a key,
     * or one with another key). */
    int *server_auth;
};

/* baton_conn_connect / baton_conn_adopt_fd with options (see above). Also
 * BATON_E_INVAL for a role other than client or peer (fd closed). */
int baton_conn_connect_ex(const char *host, uint16_t port, const struct baton_conn_options *o,
                          struct baton_conn **out);
int baton_conn_adopt_fd_ex(int fd, const struct baton_conn_options *o, struct baton_conn **out);

/* 1 once AUTH succeeded (every frame carries a tag), else 0. */
int baton_conn_authenticated(const struct baton_conn *c);
/* 1 when payloads are encrypted as well, else 0. */
int baton_conn_encrypted(const struct baton_conn *c);

/* Closes the socket and frees c (NULL-safe). Outstanding replies are dropped. */
void baton_conn_close(struct baton_conn *c);
/* Deadline of each later call (each reply of baton_conn_wait) in ms; < 0: none. */
void baton_conn_set_timeout(struct baton_conn *c, int timeout_ms);
/* 1 once the connection is unusable (I/O error, timeout, a reply that did
 * not match, a framing error from the server), else 0. */
int baton_conn_is_dead(const struct baton_conn *c);

/* The server's HELLO reply (features, chosen version). */
const struct baton_hello *baton_conn_server_hello(const struct baton_conn *c);

/* Counters for one command id (1..BATON_CMD_LIMIT-1); zeroes for others.
 * Byte counts include the 16-byte tag of each frame after AUTH. */
struct baton_cmd_stats baton_conn_stats(const struct baton_conn *c, uint32_t cmd);
void baton_conn_reset_stats(struct baton_conn *c);

/* ---- synchronous commands ----
 * Each sends one request and waits for its reply. If pipelined requests are
 * still outstanding, their replies are read first and the first error among
 * them (or this call's) is returned. baton_alloc_buffer fills *handle;
 * baton_device_info fills *out (name NUL-terminated). */
int baton_device_info(struct baton_conn *c, struct baton_device_info *out);
int baton_alloc_buffer(struct baton_conn *c, uint64_t size, uint64_t *handle);
int baton_free_buffer(struct baton_conn *c, uint64_t handle);
int baton_buffer_clear(struct baton_conn *c, uint64_t handle, uint8_t value);
/* Writes n bytes at byte offset `offset` within tensor t. A request the
 * server refuses by its length (n + 104 bytes above its max message size)
 * gives BATON_E_LIMIT, also when the server closed while the data was still
 * being sent (its error frame is read then); the server closes the
 * connection after such a refusal, so its next call fails (the connection
 * is marked dead at once only in the second case). */
int baton_set_tensor(struct baton_conn *c, const struct baton_tensor_desc *t, uint64_t offset,
                     const void *data, uint64_t n);
/* Reads n bytes at byte offset `offset` within tensor t into data. */
int baton_get_tensor(struct baton_conn *c, const struct baton_tensor_desc *t, uint64_t offset,
                     void *data, uint64_t n);
int baton_copy_tensor(struct baton_conn *c, const struct baton_tensor_desc *src,
                      const struct baton_tensor_desc *dst);
int baton_graph_compute(struct baton_conn *c, const struct baton_graph *g);

/* ---- pipelining ----
 * baton_submit_* send a request without waiting; baton_conn_wait reads every
 * outstanding reply in order (matching cmd and seq), stores GET data into the
 * pointers given at submit time, and returns 0 or the first error status
 * (all replies are still consumed). At most 64 requests may be outstanding:
 * a submit with 64 outstanding first reads all their replies (keeping the
 * first error for the next baton_conn_wait), and so does a submit of more
 * than 64 KiB while a GET is outstanding (so neither side can block sending
 * to the other). A SET's data is sent before submit returns; a GET's
 * destination must stay valid until baton_conn_wait returns. A submit
 * returns an error only when the request could not be sent (then the
 * connection is dead). */
int baton_submit_set_tensor(struct baton_conn *c, const struct baton_tensor_desc *t,
                            uint64_t offset, const void *data, uint64_t n);
int baton_submit_get_tensor(struct baton_conn *c, const struct baton_tensor_desc *t,
                            uint64_t offset, void *data, uint64_t n);
int baton_submit_graph_compute(struct baton_conn *c, const struct baton_graph *g);
int baton_conn_wait(struct baton_conn *c);

/* ---- tracking replies one by one (the coordinator's step engine) ----
 * baton_conn_track(c, &st) makes the next submit's reply status go to st:
 * st is BATON_REPLY_PENDING until that reply is read (by any call that
 * reads replies: baton_conn_read_reply, baton_conn_wait, or a submit that
 * drains), then 0 or the reply's error status, which is then not kept for
 * baton_conn_wait. st must stay valid until the reply is read or the
 * connection is dead (baton_conn_is_dead: replies not read by then never
 * set it). baton_conn_outstanding counts the replies not read yet;
 * baton_conn_read_reply reads the oldest one (blocking, within the
 * connection's timeout) and returns its status (BATON_E_PROTO when none
 * is outstanding); baton_conn_fd is the socket, for poll(): readable when
 * a reply has begun to arrive (or the server closed). */
#define BATON_REPLY_PENDING 1
void baton_conn_track(struct baton_conn *c, int *status);
uint32_t baton_conn_outstanding(const struct baton_conn *c);
int baton_conn_read_reply(struct baton_conn *c);
int baton_conn_fd(const struct baton_conn *c);

/* ---- registered graphs (docs/PROTOCOL.md "Registered graphs") ----
 * baton_graph_register validates and stores g on the server for this
 * session (GRAPH_REGISTER): *id gets its id (>= 1). Errors: those of
 * GRAPH_COMPUTE's validation, BATON_E_LIMIT (max_graphs_per_session),
 * BATON_E_QUOTA. baton_graph_run runs a registered graph (GRAPH_RUN) after
 * its fences (each: wait until the grant holds exactly the write with that
 * sequence number) and inputs (each: leaf's first count I32 elements set to
 * first, first + 1, ...). Errors: BATON_E_NOT_FOUND (no such graph or
 * fence grant of this session), BATON_E_FENCE (a fenced write will not
 * land, or an earlier GRAPH_RUN of this session failed and flags lacks
 * BATON_RUN_RESET), the leaf errors (a buffer freed since registration:
 * BATON_E_STALE_HANDLE), BATON_E_GRAPH / BATON_E_TYPE / BATON_E_BOUNDS for
 * an input, the scratch errors, BATON_E_INDEX. baton_graph_free forgets a
 * graph (BATON_E_NOT_FOUND otherwise). */
struct baton_graph_run {
    uint32_t graph;
    uint32_t flags; /* BATON_RUN_RESET, BATON_RUN_HANDOFF, BATON_RUN_RETURN */
    uint32_t n_fences, n_inputs; /* each <= 4 */
    struct baton_run_fence fences[BATON_MAX_RUN_FENCES];
    struct baton_run_input inputs[BATON_MAX_RUN_INPUTS];
    /* HANDOFF: after the compute, the first handoff.n bytes of route
     * handoff.route's tensor go to its destination as write handoff.seq
     * (asynchronously with BATON_COPY_ASYNC); a failed run cancels that seq
     * there. *handoff_result (valid until the reply is read) gets the
     * outcome as COPY_TENSOR_TO's reply. */
    struct baton_run_handoff handoff;
    struct baton_copy_result *handoff_result;
    /* RETURN: the bytes of leaf ret.leaf after the compute, ret_bytes of
     * them (the leaf's size), into ret_dst (valid until the reply is read). */
    struct baton_run_return ret;
    void *ret_dst;
    uint64_t ret_bytes;
};
int baton_submit_graph_register(struct baton_conn *c, const struct baton_graph *g, uint32_t *id);
int baton_graph_register(struct baton_conn *c, const struct baton_graph *g, uint32_t *id);
int baton_submit_graph_run(struct baton_conn *c, const struct baton_graph_run *run);
int baton_graph_run(struct baton_conn *c, const struct baton_graph_run *run);
int baton_graph_free(struct baton_conn *c, uint32_t id);

/* COPY_ROUTE: registers (tensor t of this session, destination dest of
 * family 4 or 6) as a route for GRAPH_RUN's hand-off; *id gets its id
 * (1, 2, ...; at most 16 per session: BATON_E_LIMIT). Errors: those of the
 * tensor, BATON_E_INVAL (family 0). The allow-list is checked when a copy
 * goes. */
int baton_copy_route(struct baton_conn *c, const struct baton_tensor_desc *t,
                     const struct baton_peer_dest *dest, uint32_t *id);

/* ---- direct path (docs/PROTOCOL.md "Direct path") ----
 * baton_grant_write asks the server to accept PEER_WRITEs into bytes
 * [offset, offset + length) of this session's buffer `handle`; *id gets the
 * random 128-bit grant id. Errors: those of the handle, BATON_E_BOUNDS,
 * BATON_E_INVAL (length 0), BATON_E_LIMIT (max_grants_per_session).
 * baton_revoke_grant removes one of this session's grants
 * (BATON_E_NOT_FOUND otherwise). */
int baton_grant_write(struct baton_conn *c, uint64_t handle, uint64_t offset, uint64_t length,
                      uint8_t id[BATON_GRANT_ID_BYTES]);
int baton_revoke_grant(struct baton_conn *c, const uint8_t id[BATON_GRANT_ID_BYTES]);

/* COPY_TENSOR_TO: the server sends bytes [offset, offset + n) of tensor t
 * as a PEER_WRITE with sequence number opt->seq to dest (its address must
 * be on the server's allow-list) and answers once the destination has
 * answered, or at once (BATON_COPY_QUEUED) with BATON_COPY_ASYNC in
 * opt->flags. *out (valid until the reply is read) gets the outcome:
 * result BATON_COPY_DONE, QUEUED, or why it was not done, and this
 * session's peer counters on that server. A "not done" is not an error
 * (the call returns 0); only a malformed request is. With dest->family
 * BATON_PEER_FAMILY_NONE and n = 0 nothing is sent: a query of the
 * counters (opt NULL: seq 0, no flags). */
int baton_submit_copy_tensor_to(struct baton_conn *c, const struct baton_tensor_desc *t,
                                uint64_t offset, uint64_t n, const struct baton_peer_dest *dest,
                                const struct baton_copy_options *opt,
                                struct baton_copy_result *out);
int baton_copy_tensor_to(struct baton_conn *c, const struct baton_tensor_desc *t, uint64_t offset,
                         uint64_t n, const struct baton_peer_dest *dest,
                         const struct baton_copy_options *opt, struct baton_copy_result *out);

/* PEER_WRITE (a connection opened with role BATON_ROLE_PEER and the peer
 * key): writes n bytes at offset within the grant id as the write with
 * sequence number seq (>= 1, newer than the grant's last), and waits for
 * the reply. A refusal is the status the destination sent
 * (BATON_E_NOT_FOUND, BATON_E_BOUNDS, BATON_E_FENCE, ...), after which the
 * destination has closed the link. baton_peer_fence (PEER_FENCE) tells the
 * destination that write seq will not come (status: the positive code
 * why); a refusal leaves the link open. */
int baton_peer_write(struct baton_conn *c, const uint8_t id[BATON_GRANT_ID_BYTES],
                     uint64_t offset, uint64_t seq, const void *data, uint64_t n);
/* PEER_WRITE without waiting for its reply (pipelined, as the other
 * submits): its status shows at the next baton_conn_wait (or a later
 * synchronous call), or in baton_conn_track's slot. */
int baton_submit_peer_write(struct baton_conn *c, const uint8_t id[BATON_GRANT_ID_BYTES],
                            uint64_t offset, uint64_t seq, const void *data, uint64_t n);
int baton_peer_fence(struct baton_conn *c, const uint8_t id[BATON_GRANT_ID_BYTES], uint64_t seq,
                     uint32_t status);

/* Fills t as a contiguous tensor at (buffer, offset): nb and nbytes from type
 * and ne. Returns 0 or the error of baton_tensor_contiguous_nb. */
int baton_tensor_init(struct baton_tensor_desc *t, uint64_t buffer, uint64_t offset, uint32_t type,
                      uint64_t ne0, uint64_t ne1, uint64_t ne2, uint64_t ne3);

#endif
