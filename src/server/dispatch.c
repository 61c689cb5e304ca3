/* The request dispatcher: one connection, strictly in order, exactly one
 * reply per request (docs/PROTOCOL.md).
 *
 * Every byte from the wire goes through the proven decoders of src/wire
 * (header, HELLO, tensor descriptors, graph header and nodes, u8/u64
 * fields), each given the (buf, len) that recv_request reserved, checked
 * and received; every range check through baton_wire_check_range or the
 * proven arithmetic of core/access.h, and every buffer pointer is formed
 * as mem + at from an offset at that core/access.h returned with its proof
 * that the access lies inside the buffer (verify/PROVEN.md). Handlers
 * validate and resolve first and touch buffers only afterwards.
 *
 * A handler consumes exactly its frame's payload or returns early with a
 * semantic error, after which the dispatcher discards what is left of the
 * payload (bounded by max_message_bytes and the frame deadline) so the
 * framing is kept. A framing error (or a failed read inside a frame) marks
 * the connection fatal: one error frame, then close.
 *
 * Authentication (auth/auth.h "Wiring", SECURITY.md): with a key configured
 * a connection goes NEW -> HELLO_DONE (only AUTH) -> READY. After AUTH every
 * frame in both directions is followed by a 16-byte tag. recv_payload MACs
 * (or decrypts) each piece as it arrives and checks the tag as soon as the
 * last payload byte is in, so a handler that has read its whole payload
 * holds a verified request before it acts. The one exception is SET_TENSOR
 * data, received into its validated range of this session's own buffer and
 * verified right after. A bad tag ends the connection without a reply.
 */
#include <arpa/inet.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/auth.h"
#include "baton/status.h"
#include "client/frame_send.h"
#include "core/access.h"
#include "core/limits.h"
#include "core/ops.h"
#include "core/types.h"
#include "server/server_internal.h"
#include "wire/wire.h"

enum conn_state { STATE_NEW = 0, STATE_HELLO_DONE, STATE_READY };

/* Received payload is MAC'd (or decrypted) in pieces of this size, each
 * right after it arrives, while it is still in cache. */
#ifndef RECV_PIECE_BYTES /* overridable for benchmarks (bench/auth_cost.sh) */
#define RECV_PIECE_BYTES (256u * 1024u)
#endif
/* Sent payload: client/frame_send.h (BATON_SEND_PIECE_BYTES pieces). */

struct conn {
    struct baton_server *s;
    struct baton_transport *t;
    struct baton_session sess;
    const char *peer;
    int state;
    uint16_t version;
    uint64_t frame_deadline;
    uint64_t left;   /* payload bytes of the current frame not read yet */
    int fatal;       /* framing broken: send one error frame, then close */
    int dead;        /* cannot even send: close at once */
    uint8_t hdr[BATON_FRAME_HEADER_BYTES]; /* the current request's header as received */
    uint64_t hs_deadline; /* HELLO (and AUTH) must be done by then */
    uint8_t role;         /* from HELLO */
    struct server_hs hs;  /* handshake state and secrets, HELLO_DONE only */
    int tagged;           /* after AUTH: every frame carries a tag */
    int encrypt;          /* tagged, and payloads are encrypted */
    struct baton_frame_key send_key, recv_key;
    struct baton_mac rmac; /* tag of the request being received */
    int rmac_open;         /* rmac begun, its tag not checked yet */
    int silent;            /* bad tag: close without an error frame */
    uint8_t *enc;          /* encrypt mode: BATON_SEND_PIECE_BYTES of ciphertext */
    struct conn_slot *slot; /* the listener's slot (NULL: serve_transport) */
    uint64_t n_requests;    /* frame headers read on this connection */
};


/* ---- payload I/O ---- */

/* Starts the tag of the request whose header is c->hdr (READY, tagged). */
static int begin_tag(struct conn *c)
{
    uint64_t ctr;
    int rc = baton_frame_key_next(&c->recv_key, &ctr);
    if (rc == 0 && c->encrypt)
        rc = baton_aead_begin(&c->rmac, &c->recv_key, ctr, c->hdr, sizeof c->hdr);
    else if (rc == 0)
        rc = baton_mac_begin(&c->rmac, &c->recv_key, ctr);
    if (rc == 0 && !c->encrypt)
        rc = baton_mac_update(&c->rmac, c->hdr, sizeof c->hdr);
    if (rc == 0)
        c->rmac_open = 1;
    return rc;
}

/* Reads the 16-byte tag that follows the current request's payload and
 * checks it in constant time. A bad tag is fatal and silent: the
 * connection ends without a reply (an attacker learns nothing from it). */
static int check_tag(struct conn *c)
{
    uint8_t tag[BATON_TAG_BYTES];
    c->rmac_open = 0;
    int rc = baton_transport_recv_exact(c->t, tag, sizeof tag, c->frame_deadline);
    if (rc != 0) {
        baton_mac_abort(&c->rmac);
        c->fatal = 1;
        return rc == BATON_E_TIMEOUT ? BATON_E_TIMEOUT : BATON_E_TRUNCATED;
    }
    if (baton_mac_final_verify(&c->rmac, tag) != 0) {
        c->fatal = 1;
        c->silent = 1;
        return BATON_E_AUTH;
    }
    return 0;
}

/* Reads n (<= c->left) payload bytes under the frame deadline. A failure
 * inside a frame breaks framing: E_TIMEOUT or E_TRUNCATED, fatal. On a
 * tagged connection each piece is MAC'd (or decrypted in place) as it
 * arrives, and once the payload is complete the tag is read and checked
 * (E_AUTH, fatal and silent, when it does not verify). */
static int recv_payload(struct conn *c, void *buf, uint64_t n)
{
    uint8_t *p = buf;
    if (n > c->left) {
        c->fatal = 1;
        return BATON_E_TRUNCATED;
    }
    while (n > 0) {
        uint64_t k = c->rmac_open && n > RECV_PIECE_BYTES ? RECV_PIECE_BYTES : n;
        int rc = baton_transport_recv_exact(c->t, p, (size_t)k, c->frame_deadline);
        if (rc != 0) {
            c->fatal = 1;
            return rc == BATON_E_TIMEOUT ? BATON_E_TIMEOUT : BATON_E_TRUNCATED;
        }
        if (c->rmac_open) {
            rc = c->encrypt ? baton_aead_decrypt(&c->rmac, p, p, (size_t)k)
                            : baton_mac_update(&c->rmac, p, (size_t)k);
            if (rc != 0) {
                c->fatal = 1;
                return rc;
            }
        }
        c->left -= k;
        p += k;
        n -= k;
    }
    if (c->left == 0 && c->rmac_open)
        return check_tag(c);
    return 0;
}

/* Reads and drops the rest of the payload, in chunks, under the frame
 * deadline. */
static int discard_rest(struct conn *c)
{
    uint8_t sink[16384];
    while (c->left > 0) {
        uint64_t k = c->left < sizeof sink ? c->left : sizeof sink;
        int rc = recv_payload(c, sink, k);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Reads len payload bytes into the session's request buffer; *out is the
 * start of exactly those len bytes, the (buf, len) that the caller hands to
 * the proven decoders, whose contracts require buf to hold len bytes. The
 * buffer holds sess.req_cap bytes (session_reserve_req); the proven
 * baton_access_slice checks [0, len) against that before any byte is
 * received (E_BOUNDS, never seen: the reservation is for len). */
static int recv_request(struct conn *c, size_t len, const uint8_t **out)
{
    uint64_t at = 0;
    int rc = session_reserve_req(&c->sess, len > 0 ? len : 1);
    if (rc == 0)
        rc = baton_access_slice(0, c->sess.req_cap, 0, len, c->sess.req_cap, &at);
    if (rc == 0)
        rc = recv_payload(c, c->sess.req + at, len);
    if (rc != 0)
        return rc;
    *out = c->sess.req + at;
    return 0;
}

/* Reads a payload that must be exactly `expect` bytes (recv_request). A
 * different length is a semantic error (E_INVAL): the caller's error path
 * discards the payload. */
static int read_fixed(struct conn *c, size_t expect, const uint8_t **out)
{
    if (c->left != expect)
        return BATON_E_INVAL;
    return recv_request(c, expect, out);
}

/* Sends header, payload pieces p1 and p2, and the tag of the next frame
 * of the send direction (client/frame_send.h; in encrypt mode through
 * c->enc, so a tensor buffer is never encrypted in place). */
static int send_tagged(struct conn *c, const uint8_t *hdr, const void *p1, uint64_t n1,
                       const void *p2, uint64_t n2, uint64_t deadline)
{
    return baton_send_tagged_frame(c->t, &c->send_key, c->encrypt, &c->enc, hdr, p1, n1, p2, n2,
                                   deadline);
}

/* Sends one reply frame: header + up to two payload pieces (+ the tag
 * after AUTH). A successful reply is only ever sent once its request's tag
 * has been checked; anything else is a bug and ends the connection. */
static int send_reply(struct conn *c, uint8_t cmd, uint32_t seq, int status, const void *p1,
                      uint64_t n1, const void *p2, uint64_t n2)
{
    uint8_t hdr[BATON_FRAME_HEADER_BYTES];
    uint64_t deadline = baton_net_deadline_ms(c->s->cfg.send_timeout_ms);
    struct baton_frame_header h = {
        .cmd = cmd, .flags = 0, .status = (uint16_t)(-status), .seq = seq, .len = n1 + n2};
    int rc;
    if (status == 0 && c->rmac_open) {
        c->dead = 1;
        return BATON_E_PROTO;
    }
    baton_wire_encode_header(hdr, &h);
    if (c->tagged) {
        rc = send_tagged(c, hdr, p1, n1, p2, n2, deadline);
    } else {
        struct iovec iov[3] = {
            {hdr, sizeof hdr}, {(void *)p1, (size_t)n1}, {(void *)p2, (size_t)n2}};
        rc = baton_transport_send_all(c->t, iov, 3, deadline);
    }
    if (rc != 0)
        c->dead = 1;
    return rc;
}

/* ---- commands ---- */

/* Sends bytes as they are (the handshake's frames, which carry no tag). */
static int send_raw(struct conn *c, const void *p, size_t n)
{
    struct iovec iov = {(void *)p, n};
    int rc = baton_transport_send_all(c->t, &iov, 1,
                                      baton_net_deadline_ms(c->s->cfg.send_timeout_ms));
    if (rc != 0)
        c->dead = 1;
    return rc;
}

static int cmd_hello(struct conn *c, const struct baton_frame_header *h)
{
    const uint8_t *p;
    uint8_t req[SERVER_HELLO_FRAME_BYTES]; /* the request frame, byte for byte */
    uint8_t rep[SERVER_HELLO_FRAME_BYTES];
    (void)h;
    /* before HELLO completes every failure is fatal: nothing else is
     * allowed in this state */
    c->fatal = 1;
    int rc = read_fixed(c, BATON_HELLO_BYTES, &p);
    if (rc != 0)
        return rc;
    memcpy(req, c->hdr, BATON_FRAME_HEADER_BYTES);
    memcpy(req + BATON_FRAME_HEADER_BYTES, p, BATON_HELLO_BYTES);
    rc = server_hs_hello(c->s, req, &c->hs, rep);
    if (rc != 0)
        return rc;
    c->fatal = 0;
    c->version = c->hs.version;
    c->role = c->hs.role;
    /* with a key the connection waits in HELLO_DONE for AUTH, under the
     * handshake deadline */
    c->state = c->s->auth_required ? STATE_HELLO_DONE : STATE_READY;
    if (c->state == STATE_READY)
        server_conn_authenticated(c->s, c->slot);
    send_raw(c, rep, sizeof rep);
    return 0;
}

/* AUTH (HELLO_DONE only): the payload is the initiator's proof MAC_i. It is
 * checked in constant time; only then does the server answer with its own
 * proof MAC_r, derive the session keys and go READY. A wrong proof gets one
 * E_AUTH error frame (no proof) and the connection closes. */
static int cmd_auth(struct conn *c, const struct baton_frame_header *h)
{
    const uint8_t *p;
    uint8_t proof[BATON_PROOF_BYTES];
    struct server_ready ready;
    memset(&ready, 0, sizeof ready);
    c->fatal = 1; /* before READY every failure ends the connection */
    int rc = read_fixed(c, BATON_PROOF_BYTES, &p);
    if (rc != 0)
        return rc;
    rc = server_hs_auth(c->s, &c->hs, p, proof, &ready);
    if (rc != 0) {
        server_log_auth_outcome(c->s, c->sess.id, c->peer, c->role, 0, SERVER_CLASS_OTHER);
        return BATON_E_AUTH;
    }
    c->fatal = 0;
    c->state = STATE_READY;
    c->send_key = ready.send_key;
    c->recv_key = ready.recv_key;
    c->sess.client = ready.client;
    server_ready_wipe(&ready);
    server_conn_authenticated(c->s, c->slot);
    server_log_auth_outcome(c->s, c->sess.id, c->peer, c->role, 1, c->sess.client);
    send_reply(c, h->cmd, h->seq, 0, proof, sizeof proof, NULL, 0); /* untagged */
    sodium_memzero(proof, sizeof proof);
    /* every later frame, both directions, carries a tag */
    c->tagged = 1;
    c->encrypt = c->s->cfg.encrypt != 0;
    return 0;
}

static int cmd_device_info(struct conn *c, const struct baton_frame_header *h)
{
    const uint8_t *p;
    struct baton_device_info d;
    uint8_t buf[BATON_DEVICE_INFO_BYTES];
    uint64_t used, total;
    int rc = read_fixed(c, 0, &p);
    if (rc != 0)
        return rc;
    baton_handles_usage(c->s->handles, &used, &total, NULL);
    memset(&d, 0, sizeof d);
    d.total_memory = total;
    d.free_memory = used < total ? total - used : 0;
    d.alignment = BATON_BUFFER_ALIGN;
    /* the largest ALLOC_BUFFER that can succeed: the session's quota */
    const uint64_t session_cap = session_memory_cap(c->s, &c->sess);
    d.max_buffer_bytes = total < session_cap ? total : session_cap;
    for (uint32_t t = 0; t < BATON_TYPE_ID_LIMIT && t < 64; t++) {
        const struct baton_type_info *ti = baton_type_get(t);
        if (ti && ti->executable)
            d.type_mask |= 1ull << t;
    }
    for (uint32_t o = 1; o < BATON_OP_COUNT && o < 64; o++)
        if (baton_op_arity(o) > 0)
            d.op_mask |= 1ull << o;
    d.n_threads = baton_pool_threads(c->s->pool);
    d.version = c->version;
    snprintf(d.name, sizeof d.name, "%s", SERVER_NAME);
    baton_wire_encode_device_info(buf, &d);
    send_reply(c, h->cmd, h->seq, 0, buf, sizeof buf, NULL, 0);
    return 0;
}

static int cmd_alloc_buffer(struct conn *c, const struct baton_frame_header *h)
{
    const uint8_t *p;
    size_t pos = 0;
    uint64_t size, handle, total;
    uint8_t buf[16];
    int rc = read_fixed(c, 8, &p);
    if (rc == 0)
        rc = baton_wire_get_u64(p, 8, &pos, &size);
    if (rc != 0)
        return rc;
    baton_handles_usage(c->s->handles, NULL, &total, NULL);
    if (size == 0)
        return BATON_E_INVAL;
    if (size > total)
        return BATON_E_LIMIT;
    /* per-session quota (buffers + scratch arena), then the total; an
     * arena grown ahead of its runs gives way */
    do {
        rc = baton_handles_alloc_capped(c->s->handles, c->sess.id, size,
                                        session_memory_cap(c->s, &c->sess),
                                        session_extra_bytes(&c->sess), &handle);
    } while (rc == BATON_E_QUOTA && session_yield_scratch(c->s, &c->sess));
    if (rc != 0)
        return rc;
    baton_wire_put_u64(buf, handle);
    baton_wire_put_u64(buf + 8, size);
    send_reply(c, h->cmd, h->seq, 0, buf, sizeof buf, NULL, 0);
    return 0;
}

static int cmd_free_buffer(struct conn *c, const struct baton_frame_header *h)
{
    const uint8_t *p;
    size_t pos = 0;
    uint64_t handle;
    int rc = read_fixed(c, 8, &p);
    if (rc == 0)
        rc = baton_wire_get_u64(p, 8, &pos, &handle);
    if (rc == 0)
        rc = baton_handles_free(c->s->handles, c->sess.id, handle);
    if (rc != 0)
        return rc;
    /* the generation moved on: the buffer's grants go at once (a PEER_WRITE
     * already receiving into it holds a pin) */
    grants_drop_handle(c->s->grants, c->sess.id, handle);
    send_reply(c, h->cmd, h->seq, 0, NULL, 0, NULL, 0);
    return 0;
}

static int cmd_buffer_clear(struct conn *c, const struct baton_frame_header *h)
{
    const uint8_t *p;
    size_t pos = 0;
    uint64_t handle;
    uint8_t value, zero;
    struct baton_buf_ref ref;
    int rc = read_fixed(c, 16, &p);
    if (rc == 0)
        rc = baton_wire_get_u64(p, 16, &pos, &handle);
    if (rc == 0)
        rc = baton_wire_get_u8(p, 16, &pos, &value);
    for (int i = 0; rc == 0 && i < 7; i++) {
        rc = baton_wire_get_u8(p, 16, &pos, &zero);
        if (rc == 0 && zero != 0)
            rc = BATON_E_INVAL;
    }
    if (rc == 0)
        rc = baton_handles_acquire(c->s->handles, c->sess.id, handle, &ref);
    if (rc != 0)
        return rc;
    memset(ref.mem, value, ref.size);
    baton_handles_release(c->s->handles, &ref);
    send_reply(c, h->cmd, h->seq, 0, NULL, 0, NULL, 0);
    return 0;
}

/* Resolves a decoded tensor to its pinned buffer and bytes [off, off + n)
 * of the tensor in it (the whole tensor: 0, t->nbytes). The proven
 * baton_access_slice checks the slice against the tensor and the tensor's
 * extent against the buffer's size (BATON_E_BOUNDS), and gives the offset
 * the pointer is formed from: *data has n bytes inside the buffer. On
 * success *ref must be released. */
static int resolve_tensor(struct conn *c, const struct baton_tensor_desc *t, uint64_t off,
                          uint64_t n, struct baton_buf_ref *ref, uint8_t **data)
{
    uint64_t at = 0;
    int rc = baton_handles_acquire(c->s->handles, c->sess.id, t->buffer, ref);
    if (rc != 0)
        return rc;
    rc = baton_access_slice(t->offset, t->nbytes, off, n, ref->size, &at);
    if (rc != 0) {
        baton_handles_release(c->s->handles, ref);
        return rc;
    }
    *data = ref->mem + at;
    return 0;
}

/* tensor (88), u64 offset, u64 n: the common prefix of SET and GET, at the
 * start of p's len bytes. */
static int decode_tensor_range(const uint8_t *p, size_t len, struct baton_tensor_desc *t,
                               uint64_t *off, uint64_t *n)
{
    size_t pos = 0;
    int rc = baton_wire_decode_tensor(p, len, &pos, t);
    if (rc == 0)
        rc = baton_wire_get_u64(p, len, &pos, off);
    if (rc == 0)
        rc = baton_wire_get_u64(p, len, &pos, n);
    if (rc == 0)
        rc = baton_wire_check_range(*off, *n, t->nbytes);
    return rc;
}

static int cmd_set_tensor(struct conn *c, const struct baton_frame_header *h)
{
    const size_t head = BATON_TENSOR_DESC_BYTES + 16;
    const uint8_t *p;
    struct baton_tensor_desc t;
    struct baton_buf_ref ref;
    uint8_t *dst = NULL;
    uint64_t off, n;
    if (c->left < head)
        return BATON_E_INVAL;
    int rc = recv_request(c, head, &p);
    if (rc == 0)
        rc = decode_tensor_range(p, head, &t, &off, &n);
    if (rc == 0 && c->left != n)
        rc = BATON_E_INVAL;
    if (rc == 0)
        rc = resolve_tensor(c, &t, off, n, &ref, &dst);
    if (rc != 0)
        return rc;
    /* validated and pinned: the data goes straight into the buffer */
    rc = recv_payload(c, dst, n);
    baton_handles_release(c->s->handles, &ref);
    if (rc != 0)
        return rc;
    send_reply(c, h->cmd, h->seq, 0, NULL, 0, NULL, 0);
    return 0;
}

static int cmd_get_tensor(struct conn *c, const struct baton_frame_header *h)
{
    const size_t len = BATON_TENSOR_DESC_BYTES + 16;
    const uint8_t *p;
    struct baton_tensor_desc t;
    struct baton_buf_ref ref;
    uint8_t *src = NULL;
    uint64_t off, n;
    int rc = read_fixed(c, len, &p);
    if (rc == 0)
        rc = decode_tensor_range(p, len, &t, &off, &n);
    if (rc == 0 && n > c->s->cfg.max_message_bytes)
        rc = BATON_E_LIMIT;
    if (rc == 0)
        rc = resolve_tensor(c, &t, off, n, &ref, &src);
    if (rc != 0)
        return rc;
    /* sent straight from the pinned buffer */
    send_reply(c, h->cmd, h->seq, 0, src, n, NULL, 0);
    baton_handles_release(c->s->handles, &ref);
    return 0;
}

static int cmd_copy_tensor(struct conn *c, const struct baton_frame_header *h)
{
    const size_t len = 2 * BATON_TENSOR_DESC_BYTES;
    const uint8_t *p;
    size_t pos = 0;
    struct baton_tensor_desc src, dst;
    struct baton_buf_ref rs, rd;
    uint8_t *from = NULL, *to = NULL;
    int rc = read_fixed(c, len, &p);
    if (rc == 0)
        rc = baton_wire_decode_tensor(p, len, &pos, &src);
    if (rc == 0)
        rc = baton_wire_decode_tensor(p, len, &pos, &dst);
    if (rc == 0)
        rc = resolve_tensor(c, &src, 0, src.nbytes, &rs, &from);
    if (rc != 0)
        return rc;
    /* the first src.nbytes bytes of dst: E_BOUNDS when dst is smaller, as
     * when its extent leaves its buffer */
    rc = resolve_tensor(c, &dst, 0, src.nbytes, &rd, &to);
    if (rc != 0) {
        baton_handles_release(c->s->handles, &rs);
        return rc;
    }
    memmove(to, from, src.nbytes);
    baton_handles_release(c->s->handles, &rd);
    baton_handles_release(c->s->handles, &rs);
    send_reply(c, h->cmd, h->seq, 0, NULL, 0, NULL, 0);
    return 0;
}

/* Reads a graph payload (GRAPH_COMPUTE, GRAPH_REGISTER) into the session's
 * decode arrays, pins every leaf (live, owned by this session, extent
 * inside its buffer), validates the graph and checks the compute budget.
 * On 0, g describes it (leaves, nodes and plan in the session's arrays)
 * and *n_pinned leaf pins in ss->leaf_refs must be released; on failure
 * the pins taken are released here. */
static int load_graph(struct conn *c, struct baton_graph *g, uint64_t *scratch_bytes,
                      uint32_t *n_pinned)
{
    struct baton_session *ss = &c->sess;
    uint32_t max_nodes = c->s->cfg.max_graph_nodes;
    uint32_t n_leaves = 0, n_nodes = 0;
    const uint8_t *p = NULL;
    size_t pos = 0, len;
    uint64_t max_len = BATON_GRAPH_HEADER_BYTES +
                       (uint64_t)BATON_MAX_GRAPH_LEAVES * BATON_TENSOR_DESC_BYTES +
                       (uint64_t)max_nodes * BATON_GRAPH_NODE_BYTES;
    int rc;
    *n_pinned = 0;
    if (c->left > max_len)
        return BATON_E_LIMIT;
    len = (size_t)c->left;
    rc = recv_request(c, len, &p);
    if (rc == 0)
        rc = baton_wire_decode_graph_header(p, len, &pos, max_nodes, &n_leaves, &n_nodes);
    /* the whole payload is in hand: a payload too short for the header is a
     * wrong length (E_INVAL, PROTOCOL.md), not a frame cut short */
    if (rc == BATON_E_TRUNCATED)
        rc = BATON_E_INVAL;
    if (rc == 0)
        rc = session_reserve_graph(ss, n_leaves, n_nodes);
    for (uint32_t i = 0; rc == 0 && i < n_leaves; i++)
        rc = baton_wire_decode_tensor(p, len, &pos, &ss->leaves[i]);
    for (uint32_t j = 0; rc == 0 && j < n_nodes; j++)
        rc = baton_wire_decode_node(p, len, &pos, n_leaves, j, &ss->nodes[j]);
    if (rc != 0)
        return rc;
    /* every leaf: live, owned by this session, extent inside its buffer */
    for (; *n_pinned < n_leaves; (*n_pinned)++) {
        const struct baton_tensor_desc *t = &ss->leaves[*n_pinned];
        rc = resolve_tensor(c, t, 0, t->nbytes, &ss->leaf_refs[*n_pinned],
                            &ss->leaf_data[*n_pinned]);
        if (rc != 0)
            goto fail;
    }
    g->n_leaves = n_leaves;
    g->n_nodes = n_nodes;
    g->leaves = ss->leaves;
    g->nodes = ss->nodes;
    rc = baton_graph_validate(g, max_nodes, ss->plan, scratch_bytes);
    /* the compute budget, before any scratch is mapped or any node runs;
     * the refusal names its limit on a line of its own, just before the
     * command's error line (a reply carries only the status) */
    if (rc == 0) {
        const uint64_t flops = baton_graph_flops(g), cap = session_flops_cap(c->s, ss);
        if (flops > cap) {
            server_log_limited(c->s,
                               "session %llu: a graph of %llu FLOPs is over the compute budget "
                               "of %llu FLOPs a graph (%s)",
                               (unsigned long long)ss->id, (unsigned long long)flops,
                               (unsigned long long)cap,
                               cap != c->s->cfg.max_graph_flops
                                   ? "the max_graph_flops of its client key's client line"
                                   : "max_graph_flops");
            rc = BATON_E_LIMIT;
        }
    }
    if (rc == 0)
        return 0;
fail:
    for (uint32_t i = 0; i < *n_pinned; i++)
        baton_handles_release(c->s->handles, &ss->leaf_refs[i]);
    *n_pinned = 0;
    return rc;
}

struct turn_arg {
    struct conn *c;
    int client;
    uint64_t start;
    uint64_t next_check; /* when to look again for a gone client (ns) */
};

static int run_abandoned(void *arg);

/* Between nodes: the device to a waiting session after a slice; the graph
 * ends early (nonzero) when the server stops or its client has gone
 * (looked at once a slice: a poll costs a system call). */
static int device_between(void *arg)
{
    struct turn_arg *t = arg;
    struct baton_server *s = t->c->s;
    if (atomic_load(&s->stopping))
        return 1;
    uint64_t now = baton_net_now_ns();
    if (now >= t->next_check) {
        t->next_check = now + (uint64_t)s->cfg.compute_slice_ms * 1000000u;
        if (run_abandoned(t->c))
            return 1;
    }
    server_device_between(s, t->client, &t->start);
    return atomic_load(&s->stopping) != 0;
}

/* Executes g (leaves resolved into the session's leaf_data, plan
 * validated) on the shared device, in turns with other sessions. */
static int execute_in_turns(struct conn *c, const struct baton_graph *g,
                            const struct baton_node_plan *plan)
{
    struct turn_arg ta = {c, c->sess.client, 0, 0};
    const struct baton_exec_turns turns = {device_between, &ta};
    server_device_acquire(c->s, ta.client, &ta.start);
    ta.next_check = ta.start + (uint64_t)c->s->cfg.compute_slice_ms * 1000000u;
    int rc = baton_graph_execute_turns(g, c->sess.leaf_data, plan, c->sess.scratch, c->s->pool,
                                       &turns);
    server_device_release(c->s);
    return rc;
}

static int cmd_graph_compute(struct conn *c, const struct baton_frame_header *h)
{
    struct baton_session *ss = &c->sess;
    struct baton_graph g;
    uint32_t n_pinned = 0;
    uint64_t scratch_bytes = 0;
    int rc = load_graph(c, &g, &scratch_bytes, &n_pinned);
    if (rc == 0)
        rc = session_reserve_scratch(c->s, ss, scratch_bytes);
    if (rc == 0) {
        rc = execute_in_turns(c, &g, ss->plan);
    }
    for (uint32_t i = 0; i < n_pinned; i++)
        baton_handles_release(c->s->handles, &ss->leaf_refs[i]);
    if (rc != 0)
        return rc;
    send_reply(c, h->cmd, h->seq, 0, NULL, 0, NULL, 0);
    return 0;
}

/* ---- registered graphs (docs/PROTOCOL.md "Registered graphs") ---- */

/* GRAPH_REGISTER: a graph payload, validated exactly as GRAPH_COMPUTE's,
 * stored in the session -> u32 graph id, u32 0. */
static int cmd_graph_register(struct conn *c, const struct baton_frame_header *h)
{
    struct baton_session *ss = &c->sess;
    struct baton_graph g;
    struct stored_graph sg;
    uint32_t n_pinned = 0;
    uint64_t scratch_bytes = 0;
    uint8_t buf[BATON_GRAPH_ID_BYTES];
    int rc = load_graph(c, &g, &scratch_bytes, &n_pinned);
    for (uint32_t i = 0; i < n_pinned; i++)
        baton_handles_release(c->s->handles, &ss->leaf_refs[i]);
    if (rc != 0)
        return rc;
    if (ss->n_graphs >= c->s->cfg.max_graphs_per_session) {
        server_log_limited(c->s,
                           "session %llu: a graph to register past the %u graphs a session "
                           "may hold (max_graphs_per_session)",
                           (unsigned long long)ss->id, c->s->cfg.max_graphs_per_session);
        return BATON_E_LIMIT;
    }
    memset(&sg, 0, sizeof sg);
    sg.n_leaves = g.n_leaves;
    sg.n_nodes = g.n_nodes;
    sg.scratch_bytes = scratch_bytes;
    sg.charged_bytes = baton_graph_stored_bytes(&g);
    if (ss->n_graphs == 0 && ss->graphs == NULL) {
        ss->graphs = calloc(c->s->cfg.max_graphs_per_session, sizeof *ss->graphs);
        if (!ss->graphs)
            return BATON_E_NOMEM;
    }
    do {
        rc = session_charge(c->s, ss, sg.charged_bytes);
    } while (rc == BATON_E_QUOTA && session_yield_scratch(c->s, ss));
    if (rc != 0)
        return rc;
    sg.leaves = malloc((size_t)g.n_leaves * sizeof *sg.leaves + 1);
    sg.nodes = malloc((size_t)g.n_nodes * sizeof *sg.nodes);
    sg.plan = malloc((size_t)g.n_nodes * sizeof *sg.plan);
    if (!sg.leaves || !sg.nodes || !sg.plan) {
        free(sg.leaves);
        free(sg.nodes);
        free(sg.plan);
        baton_handles_uncharge(c->s->handles, sg.charged_bytes);
        return BATON_E_NOMEM;
    }
    memcpy(sg.leaves, g.leaves, (size_t)g.n_leaves * sizeof *sg.leaves);
    memcpy(sg.nodes, g.nodes, (size_t)g.n_nodes * sizeof *sg.nodes);
    memcpy(sg.plan, ss->plan, (size_t)g.n_nodes * sizeof *sg.plan);
    /* ids count up from 1 and skip 0 when they wrap; one still in use is
     * skipped too, so an id names one graph while it lives */
    for (;;) {
        uint32_t i;
        if (++ss->next_graph_id == 0)
            ss->next_graph_id = 1;
        for (i = 0; i < ss->n_graphs && ss->graphs[i].id != ss->next_graph_id; i++)
            ;
        if (i == ss->n_graphs)
            break;
    }
    sg.id = ss->next_graph_id;
    ss->graphs[ss->n_graphs++] = sg;
    ss->graph_bytes += sg.charged_bytes;
    session_prepare_scratch(c->s, ss, scratch_bytes); /* server_internal.h says why */
    baton_wire_encode_graph_id(buf, sg.id);
    send_reply(c, h->cmd, h->seq, 0, buf, sizeof buf, NULL, 0);
    return 0;
}

/* Index of this session's graph id, or -1. */
static int64_t find_graph(const struct baton_session *ss, uint32_t id)
{
    for (uint32_t i = 0; i < ss->n_graphs; i++)
        if (ss->graphs[i].id == id)
            return i;
    return -1;
}

/* GRAPH_FREE: u32 graph id, u32 0. */
static int cmd_graph_free(struct conn *c, const struct baton_frame_header *h)
{
    const uint8_t *p;
    size_t pos = 0;
    uint32_t id = 0;
    int rc = read_fixed(c, BATON_GRAPH_ID_BYTES, &p);
    if (rc == 0)
        rc = baton_wire_decode_graph_id(p, BATON_GRAPH_ID_BYTES, &pos, &id);
    if (rc != 0)
        return rc;
    int64_t i = find_graph(&c->sess, id);
    if (i < 0)
        return BATON_E_NOT_FOUND;
    session_graph_free(c->s, &c->sess, (uint32_t)i);
    send_reply(c, h->cmd, h->seq, 0, NULL, 0, NULL, 0);
    return 0;
}

/* COPY_ROUTE: tensor (88), destination (48, family 4 or 6) -> u32 route
 * id, u32 0. The tensor is resolved now (and again at each hand-off); the
 * destination is checked against the allow-list when a copy goes. */
static int cmd_copy_route(struct conn *c, const struct baton_frame_header *h)
{
    struct baton_session *ss = &c->sess;
    const uint8_t *p;
    size_t pos = 0;
    struct stored_route rt;
    struct baton_buf_ref ref;
    uint8_t *data = NULL;
    uint8_t buf[BATON_GRAPH_ID_BYTES];
    int rc = read_fixed(c, BATON_COPY_ROUTE_BYTES, &p);
    if (rc == 0)
        rc = baton_wire_decode_tensor(p, BATON_COPY_ROUTE_BYTES, &pos, &rt.tensor);
    if (rc == 0)
        rc = baton_wire_decode_peer_dest(p, BATON_COPY_ROUTE_BYTES, &pos, &rt.dest);
    if (rc == 0 && rt.dest.family == BATON_PEER_FAMILY_NONE)
        rc = BATON_E_INVAL; /* a route goes somewhere */
    if (rc == 0)
        rc = resolve_tensor(c, &rt.tensor, 0, rt.tensor.nbytes, &ref, &data);
    if (rc != 0)
        return rc;
    baton_handles_release(c->s->handles, &ref);
    if (ss->n_routes >= BATON_SERVER_MAX_ROUTES)
        return BATON_E_LIMIT;
    if (!ss->routes) {
        ss->routes = calloc(BATON_SERVER_MAX_ROUTES, sizeof *ss->routes);
        if (!ss->routes)
            return BATON_E_NOMEM;
    }
    ss->routes[ss->n_routes++] = rt;
    baton_wire_encode_graph_id(buf, ss->n_routes); /* route ids are 1..n, never reused */
    send_reply(c, h->cmd, h->seq, 0, buf, sizeof buf, NULL, 0);
    return 0;
}

/* Whether a fenced run's wait should end early (grants_fence_wait): the
 * server is stopping, or the client's side of the connection has closed
 * (a coordinator that died or gave up: POLLRDHUP; a connection of the
 * listener only, where the transport is a socket). */
static int run_abandoned(void *arg)
{
    struct conn *c = arg;
    if (atomic_load(&c->s->stopping))
        return 1;
    if (!c->slot)
        return 0;
    struct pollfd p = {baton_transport_socket_fd(c->t), POLLRDHUP, 0};
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

/* A decoded GRAPH_RUN request. */
struct run_request {
    struct baton_run_header h;
    struct baton_run_fence fences[BATON_MAX_RUN_FENCES];
    struct baton_run_input inputs[BATON_MAX_RUN_INPUTS];
    struct baton_run_handoff handoff; /* h.flags & BATON_RUN_HANDOFF */
    struct baton_run_return ret;      /* h.flags & BATON_RUN_RETURN */
};

/* The run of a registered graph, after its request was decoded and
 * checked: fences, leaves, inputs, compute. On return *n_pinned leaves of
 * ss->leaf_refs are pinned (the caller releases them after its reply) and
 * *n_fenced fences hold their grants (released here). Returns 0 or the
 * status. */
static int run_graph(struct conn *c, const struct stored_graph *sg,
                     const struct run_request *rq, uint32_t *n_pinned)
{
    struct baton_session *ss = &c->sess;
    uint32_t n_fenced = 0, failed = 0;
    struct baton_graph g = {.n_leaves = sg->n_leaves, .n_nodes = sg->n_nodes,
                            .leaves = sg->leaves, .nodes = sg->nodes};
    uint8_t ids[BATON_MAX_RUN_FENCES][BATON_GRANT_ID_BYTES];
    uint64_t seqs[BATON_MAX_RUN_FENCES];
    int rc = 0;
    *n_pinned = 0;
    /* the boundary inputs: wait (without the device) until every grant
     * holds exactly the write this run needs */
    for (uint32_t i = 0; i < rq->h.n_fences; i++) {
        memcpy(ids[i], rq->fences[i].grant, BATON_GRANT_ID_BYTES);
        seqs[i] = rq->fences[i].seq;
    }
    if (rq->h.n_fences > 0) {
        rc = grants_fence_wait(c->s->grants, ss->id, ids, seqs, rq->h.n_fences,
                               baton_net_deadline_ms(c->s->cfg.fence_timeout_ms), run_abandoned,
                               c, &failed);
        if (rc != 0) {
            server_log_limited(c->s, "session %llu GRAPH_RUN: fence %u (seq %llu) %s",
                               (unsigned long long)ss->id, failed,
                               (unsigned long long)seqs[failed],
                               rc == BATON_E_TIMEOUT  ? "passed its deadline (fence_timeout)"
                               : rc == BATON_E_FENCE ? "cannot land (failed, cancelled or "
                                                       "overwritten)"
                               : rc == BATON_E_IO    ? "abandoned: the client went away, or "
                                                       "the server is stopping"
                                                     : "names no grant of this session");
            if (rc != BATON_E_NOT_FOUND)
                rc = BATON_E_FENCE;
            goto out;
        }
        n_fenced = rq->h.n_fences;
    }
    /* every leaf again: a buffer freed since registration is stale now */
    rc = session_reserve_graph(ss, sg->n_leaves, 1);
    for (; rc == 0 && *n_pinned < sg->n_leaves; (*n_pinned)++) {
        const struct baton_tensor_desc *t = &sg->leaves[*n_pinned];
        rc = resolve_tensor(c, t, 0, t->nbytes, &ss->leaf_refs[*n_pinned],
                            &ss->leaf_data[*n_pinned]);
        if (rc != 0)
            goto out;
    }
    for (uint32_t i = 0; rc == 0 && i < rq->h.n_inputs; i++) {
        const struct baton_run_input *in = &rq->inputs[i];
        /* leaf, type and count were checked by the caller; first + count
         * - 1 <= 2^31 - 1 (decoder): no value wraps (summed in 64 bits) */
        for (uint32_t k = 0; k < in->count; k++) {
            int32_t v = (int32_t)((int64_t)in->first + (int64_t)k);
            memcpy(ss->leaf_data[in->leaf] + (size_t)k * 4, &v, 4);
        }
    }
    if (rc == 0)
        rc = session_reserve_scratch(c->s, ss, sg->scratch_bytes);
    if (rc == 0) {
        rc = execute_in_turns(c, &g, sg->plan);
    }
out:
    for (uint32_t i = 0; i < n_fenced; i++)
        grants_fence_release(c->s->grants, rq->fences[i].grant);
    return rc;
}

/* Checks a decoded request against the session: the graph (E_NOT_FOUND),
 * each input's leaf (E_GRAPH), type (E_TYPE) and count (E_BOUNDS), the
 * hand-off's route (E_NOT_FOUND) and bytes (E_BOUNDS, E_LIMIT), the
 * return's leaf (E_GRAPH, E_LIMIT). *gi gets the graph's index. */
static int check_run(struct conn *c, const struct run_request *rq, int64_t *gi)
{
    const struct baton_session *ss = &c->sess;
    const uint64_t max_msg = c->s->cfg.max_message_bytes;
    *gi = find_graph(ss, rq->h.graph);
    if (*gi < 0)
        return BATON_E_NOT_FOUND;
    const struct stored_graph *sg = &ss->graphs[*gi];
    int rc;
    for (uint32_t i = 0; i < rq->h.n_inputs; i++) {
        const struct baton_run_input *in = &rq->inputs[i];
        /* run_graph writes count i32 values at the start of the leaf */
        rc = baton_access_index(in->leaf, sg->n_leaves);
        if (rc != 0)
            return rc;
        if (sg->leaves[in->leaf].type != BATON_TYPE_I32)
            return BATON_E_TYPE;
        rc = baton_access_i32_count(in->count, sg->leaves[in->leaf].nbytes);
        if (rc != 0)
            return rc;
    }
    if (rq->h.flags & BATON_RUN_HANDOFF) {
        uint32_t ri = 0;
        rc = baton_access_route(rq->handoff.route, ss->n_routes, &ri);
        if (rc != 0)
            return rc;
        if (rq->handoff.n > ss->routes[ri].tensor.nbytes)
            return BATON_E_BOUNDS;
        if (rq->handoff.n > max_msg)
            return BATON_E_LIMIT;
    }
    if (rq->h.flags & BATON_RUN_RETURN) {
        rc = baton_access_index(rq->ret.leaf, sg->n_leaves);
        if (rc != 0)
            return rc;
        /* the reply carries the hand-off's result too */
        if (sg->leaves[rq->ret.leaf].nbytes > max_msg - BATON_COPY_RESULT_BYTES)
            return BATON_E_LIMIT;
    }
    return 0;
}

/* d's address as the log shows it: "ADDR:PORT" ("[ADDR]:PORT" for IPv6). */
static void dest_string(const struct baton_peer_dest *d, char *buf, size_t len)
{
    char a[INET6_ADDRSTRLEN];
    const int v6 = d->family == BATON_PEER_FAMILY_IPV6;

    if (!inet_ntop(v6 ? AF_INET6 : AF_INET, d->addr, a, sizeof a))
        snprintf(a, sizeof a, "?");
    snprintf(buf, len, v6 ? "[%s]:%u" : "%s:%u", a, (unsigned)d->port);
}

/* The hand-off of a run (docs/PROTOCOL.md "GRAPH_RUN"): after a successful
 * compute the route's bytes go as write seq; after a failed one the
 * destination is told that seq will not come. route_index is the route's
 * index (baton_access_route: < n_routes). *res gets the outcome and the
 * session's counters. */
static void run_handoff(struct conn *c, const struct baton_run_handoff *ho, uint32_t route_index,
                        int run_ok, struct baton_copy_result *res)
{
    struct baton_session *ss = &c->sess;
    const struct stored_route *rt = &ss->routes[route_index];
    struct baton_copy_options opt = {.seq = ho->seq, .flags = ho->flags};
    struct baton_buf_ref ref;
    uint8_t *data = NULL;
    int st = 0;
    memset(res, 0, sizeof *res);
    /* its first n bytes (check_run: n <= the tensor's nbytes) */
    if (run_ok && resolve_tensor(c, &rt->tensor, 0, ho->n, &ref, &data) != 0)
        run_ok = 0; /* the route's buffer went since COPY_ROUTE: nothing to send */
    if (!run_ok) {
        opt.flags = BATON_COPY_ASYNC; /* the failed run's reply does not wait for it */
        res->result = server_peer_copy(c->s, ss, &rt->dest, &opt, (uint32_t)-BATON_E_FENCE, NULL,
                                       0, &st);
    } else {
        res->result = server_peer_copy(c->s, ss, &rt->dest, &opt, 0, data, ho->n, &st);
        baton_handles_release(c->s->handles, &ref);
    }
    res->status = (uint32_t)(-st) & 0xFFFFu;
    if (res->result == BATON_COPY_DONE) {
        atomic_fetch_add(&ss->copies_done, 1);
    } else if (res->result != BATON_COPY_QUEUED && res->result != BATON_COPY_CANCELLED) {
        atomic_fetch_add(&ss->copies_not_done, 1);
        char to[64];

        dest_string(&rt->dest, to, sizeof to);
        server_log_limited(c->s, "session %llu GRAPH_RUN hand-off to %s: not done (%s%s%s)",
                           (unsigned long long)ss->id, to, server_copy_outcome_name(res->result),
                           st ? ": " : "", st ? baton_status_name(st) : "");
    }
    res->peer_bytes_sent = atomic_load(&ss->peer_bytes_sent);
    grants_session_info(c->s->grants, ss->id, &res->peer_bytes_received, NULL);
    res->copies_done = atomic_load(&ss->copies_done);
    res->copies_not_done = atomic_load(&ss->copies_not_done);
}

/* GRAPH_RUN: header, fences, inputs, hand-off, return (docs/PROTOCOL.md).
 * Any failure sets the session's latch; RESET clears it first. */
static int cmd_graph_run(struct conn *c, const struct baton_frame_header *h)
{
    struct baton_session *ss = &c->sess;
    const size_t max_len = BATON_RUN_HEADER_BYTES + BATON_MAX_RUN_FENCES * BATON_RUN_FENCE_BYTES +
                           BATON_MAX_RUN_INPUTS * BATON_RUN_INPUT_BYTES +
                           BATON_RUN_HANDOFF_BYTES + BATON_RUN_RETURN_BYTES;
    struct run_request rq;
    struct baton_copy_result res;
    uint8_t rbuf[BATON_COPY_RESULT_BYTES];
    const uint8_t *p = NULL;
    uint32_t route_index = 0;
    size_t pos = 0, len;
    int64_t gi = -1;
    uint32_t n_pinned = 0;
    int rc = 0, handoff = 0;
    memset(&rq, 0, sizeof rq);
    if (c->left > max_len)
        rc = BATON_E_LIMIT;
    len = (size_t)c->left;
    if (rc == 0)
        rc = recv_request(c, len, &p);
    if (rc == 0)
        rc = baton_wire_decode_run_header(p, len, &pos, &rq.h);
    if (rc == BATON_E_TRUNCATED)
        rc = BATON_E_INVAL;
    for (uint32_t i = 0; rc == 0 && i < rq.h.n_fences; i++)
        rc = baton_wire_decode_run_fence(p, len, &pos, &rq.fences[i]);
    for (uint32_t i = 0; rc == 0 && i < rq.h.n_inputs; i++)
        rc = baton_wire_decode_run_input(p, len, &pos, &rq.inputs[i]);
    if (rc == 0 && (rq.h.flags & BATON_RUN_HANDOFF))
        rc = baton_wire_decode_run_handoff(p, len, &pos, &rq.handoff);
    if (rc == 0 && (rq.h.flags & BATON_RUN_RETURN))
        rc = baton_wire_decode_run_return(p, len, &pos, &rq.ret);
    /* a hand-off whose route exists goes, or is cancelled, whatever
     * happens to the run from here on */
    handoff = rc == 0 && (rq.h.flags & BATON_RUN_HANDOFF) &&
              baton_access_route(rq.handoff.route, ss->n_routes, &route_index) == 0;
    if (rc == 0)
        rc = check_run(c, &rq, &gi);
    if (rc == 0 && (rq.h.flags & BATON_RUN_RESET))
        ss->run_failed = 0;
    if (rc == 0 && ss->run_failed)
        rc = BATON_E_FENCE; /* an earlier run of this session failed */
    if (rc == 0)
        rc = run_graph(c, &ss->graphs[gi], &rq, &n_pinned);
    if (rc != 0 && !c->fatal)
        ss->run_failed = 1;
    if (handoff)
        run_handoff(c, &rq.handoff, route_index, rc == 0, &res);
    if (rc == 0) {
        const uint32_t ho = (rq.h.flags & BATON_RUN_HANDOFF) != 0;
        if (ho)
            baton_wire_encode_copy_result(rbuf, &res);
        if (rq.h.flags & BATON_RUN_RETURN)
            send_reply(c, h->cmd, h->seq, 0, rbuf, ho ? sizeof rbuf : 0, ss->leaf_data[rq.ret.leaf],
                       ss->graphs[gi].leaves[rq.ret.leaf].nbytes);
        else
            send_reply(c, h->cmd, h->seq, 0, rbuf, ho ? sizeof rbuf : 0, NULL, 0);
    }
    for (uint32_t i = 0; i < n_pinned; i++)
        baton_handles_release(c->s->handles, &ss->leaf_refs[i]);
    return rc;
}

/* ---- direct path (docs/PROTOCOL.md "Direct path") ---- */

/* GRANT_WRITE: u64 handle, u64 offset, u64 length -> 16-byte grant id. The
 * range must lie inside this session's live buffer. */
static int cmd_grant_write(struct conn *c, const struct baton_frame_header *h)
{
    const uint8_t *p;
    size_t pos = 0;
    struct baton_grant_request g;
    struct baton_buf_ref ref;
    uint8_t id[BATON_GRANT_ID_BYTES];
    int rc = read_fixed(c, BATON_GRANT_REQUEST_BYTES, &p);
    if (rc == 0)
        rc = baton_wire_decode_grant_request(p, BATON_GRANT_REQUEST_BYTES, &pos, &g);
    if (rc == 0)
        rc = baton_handles_acquire(c->s->handles, c->sess.id, g.handle, &ref);
    if (rc != 0)
        return rc;
    rc = baton_wire_check_range(g.offset, g.length, ref.size);
    baton_handles_release(c->s->handles, &ref);
    if (rc == 0)
        rc = grants_add(c->s->grants, c->sess.id, g.handle, g.offset, g.length, id);
    if (rc != 0)
        return rc;
    send_reply(c, h->cmd, h->seq, 0, id, sizeof id, NULL, 0);
    sodium_memzero(id, sizeof id);
    return 0;
}

/* REVOKE_GRANT: 16-byte grant id of this session. */
static int cmd_revoke_grant(struct conn *c, const struct baton_frame_header *h)
{
    const uint8_t *p;
    size_t pos = 0;
    uint8_t id[BATON_GRANT_ID_BYTES];
    int rc = read_fixed(c, BATON_GRANT_ID_BYTES, &p);
    if (rc == 0)
        rc = baton_wire_decode_grant_id(p, BATON_GRANT_ID_BYTES, &pos, id);
    if (rc == 0)
        rc = grants_revoke(c->s->grants, c->sess.id, id);
    if (rc != 0)
        return rc;
    send_reply(c, h->cmd, h->seq, 0, NULL, 0, NULL, 0);
    return 0;
}

/* COPY_TENSOR_TO: tensor, offset, n (validated as GET_TENSOR validates
 * them), destination, options. Only a malformed request is an error; a copy
 * that cannot be done is answered "not done" and the coordinator uses the
 * hub path. Family 0 with n = 0 sends nothing: a query of the counters.
 * After a failed GRAPH_RUN (the latch) nothing is copied: the destination
 * is told that the sequence number will not come (PEER_FENCE). */
static int cmd_copy_tensor_to(struct conn *c, const struct baton_frame_header *h)
{
    const uint8_t *p;
    size_t pos = BATON_TENSOR_DESC_BYTES + 16;
    struct baton_tensor_desc t;
    struct baton_buf_ref ref;
    struct baton_peer_dest d;
    struct baton_copy_options opt;
    struct baton_copy_result res;
    uint8_t buf[BATON_COPY_RESULT_BYTES];
    uint8_t *src = NULL;
    uint64_t off, n;
    int rc = read_fixed(c, BATON_COPY_TO_BYTES, &p);
    if (rc == 0)
        rc = decode_tensor_range(p, BATON_COPY_TO_BYTES, &t, &off, &n);
    if (rc == 0 && n > c->s->cfg.max_message_bytes)
        rc = BATON_E_LIMIT;
    if (rc == 0)
        rc = baton_wire_decode_peer_dest(p, BATON_COPY_TO_BYTES, &pos, &d);
    if (rc == 0)
        rc = baton_wire_decode_copy_options(p, BATON_COPY_TO_BYTES, &pos, d.family, &opt);
    if (rc == 0 && (d.family == BATON_PEER_FAMILY_NONE) != (n == 0))
        rc = BATON_E_INVAL; /* a copy moves bytes; a query moves none */
    if (rc == 0)
        rc = resolve_tensor(c, &t, off, n, &ref, &src);
    if (rc != 0)
        return rc;
    memset(&res, 0, sizeof res);
    if (d.family != BATON_PEER_FAMILY_NONE) {
        int st = 0;
        uint32_t cancel = c->sess.run_failed ? (uint32_t)-BATON_E_FENCE : 0;
        /* from the pinned source range (staged first when asynchronous) */
        res.result = server_peer_copy(c->s, &c->sess, &d, &opt, cancel, src, n, &st);
        res.status = (uint32_t)(-st) & 0xFFFFu;
        if (res.result == BATON_COPY_DONE) {
            atomic_fetch_add(&c->sess.copies_done, 1);
        } else if (res.result != BATON_COPY_QUEUED) {
            atomic_fetch_add(&c->sess.copies_not_done, 1);
            if (res.result != BATON_COPY_CANCELLED) {
                char to[64];

                dest_string(&d, to, sizeof to);
                server_log_limited(c->s, "session %llu COPY_TENSOR_TO %s: not done (%s%s%s)",
                                   (unsigned long long)c->sess.id, to,
                                   server_copy_outcome_name(res.result), st ? ": " : "",
                                   st ? baton_status_name(st) : "");
            }
        }
    }
    baton_handles_release(c->s->handles, &ref);
    res.peer_bytes_sent = atomic_load(&c->sess.peer_bytes_sent);
    grants_session_info(c->s->grants, c->sess.id, &res.peer_bytes_received, NULL);
    res.copies_done = atomic_load(&c->sess.copies_done);
    res.copies_not_done = atomic_load(&c->sess.copies_not_done);
    baton_wire_encode_copy_result(buf, &res);
    send_reply(c, h->cmd, h->seq, 0, buf, sizeof buf, NULL, 0);
    return 0;
}

/* PEER_WRITE (peer role): grant id, offset, n, seq, then n bytes. The grant
 * is checked from the 40-byte header (live, range inside the grant, owner's
 * buffer live, seq newer than the grant's last) before any data is read,
 * and a write refused there changes nothing; a write waits (up to the frame
 * deadline and peer_timeout) while a fenced run reads the grant. Any
 * refusal closes the link, so the data is never read. The data arrives in
 * pieces of PEER_PIECE_BYTES, each authenticated (MAC'd or decrypted) as it
 * comes and then copied into the granted range under the grant table's lock
 * (grants_write_land), so a REVOKE_GRANT or an owner's PEER_FENCE that has
 * returned lets no further byte land: the write then ends, and the link
 * with it. Only after the tag right after the data has verified
 * (SECURITY.md) does seq count as landed: a write that fails midway makes
 * a fence on seq fail at once. */
#define PEER_PIECE_BYTES (64u * 1024u)
static int cmd_peer_write(struct conn *c, const struct baton_frame_header *h)
{
    const uint8_t *p;
    struct baton_peer_write_header w;
    struct grant g;
    struct baton_buf_ref ref;
    uint8_t piece[PEER_PIECE_BYTES];
    size_t pos = 0;
    uint64_t start = 0; /* of the write in the owner's buffer */
    int rc, began = 0, pinned = 0;
    c->fatal = 1; /* a refused PEER_WRITE ends the link */
    if (c->left < BATON_PEER_WRITE_HEADER_BYTES)
        return BATON_E_INVAL;
    rc = recv_request(c, BATON_PEER_WRITE_HEADER_BYTES, &p);
    if (rc == 0)
        rc = baton_wire_decode_peer_write(p, BATON_PEER_WRITE_HEADER_BYTES, &pos, &w);
    if (rc == 0 && c->left != w.n)
        rc = BATON_E_INVAL;
    /* a grant's owner, handle and range never change: checked on a copy */
    if (rc == 0)
        rc = grants_find(c->s->grants, w.grant, &g);
    if (rc == 0)
        rc = baton_wire_check_range(w.offset, w.n, g.length);
    if (rc == 0)
        rc = baton_handles_acquire(c->s->handles, g.owner, g.handle, &ref);
    pinned = rc == 0;
    /* the write inside the grant, the grant inside the buffer */
    if (rc == 0)
        rc = baton_access_slice(g.offset, g.length, w.offset, w.n, ref.size, &start);
    if (rc == 0) {
        uint64_t deadline = baton_net_deadline_ms(c->s->cfg.peer_timeout_ms);
        if (c->frame_deadline < deadline)
            deadline = c->frame_deadline;
        rc = grants_write_begin(c->s->grants, w.grant, w.seq, deadline, &g);
        began = rc == 0;
    }
    for (uint64_t done = 0; rc == 0 && done < w.n;) {
        uint64_t at = 0, k = 0;
        /* [at, at + k) inside [start, start + n) and the buffer (proven) */
        rc = baton_access_piece(start, w.n, done, sizeof piece, ref.size, &at, &k);
        /* the last piece's recv_payload also reads and checks the tag */
        if (rc == 0)
            rc = recv_payload(c, piece, k);
        if (rc == 0)
            rc = grants_write_land(c->s->grants, w.grant, w.seq, ref.mem + at, piece, (size_t)k);
        done += k;
    }
    if (pinned)
        baton_handles_release(c->s->handles, &ref);
    if (rc == 0)
        grants_add_received(c->s->grants, g.owner,
                            BATON_FRAME_HEADER_BYTES + BATON_PEER_WRITE_HEADER_BYTES + w.n +
                                BATON_TAG_BYTES);
    if (began)
        grants_write_end(c->s->grants, w.grant, w.seq, rc == 0);
    if (rc != 0)
        return rc;
    c->fatal = 0;
    send_reply(c, h->cmd, h->seq, 0, NULL, 0, NULL, 0);
    return 0;
}

/* PEER_FENCE: grant id, seq, status. From a peer link: the write seq into
 * the grant will not come, so a run fenced on it fails at once. From the
 * grant's owner (a client-role connection): every write up to seq is void,
 * one in progress included, and once the reply is sent no byte of those
 * lands (grants_seal). A refusal (unknown grant, seq not newer; for a peer
 * also a write in progress) is a semantic error; the connection goes on. */
static int cmd_peer_fence(struct conn *c, const struct baton_frame_header *h)
{
    const uint8_t *p;
    size_t pos = 0;
    struct baton_peer_fence f;
    int rc = read_fixed(c, BATON_PEER_FENCE_BYTES, &p);
    if (rc == 0)
        rc = baton_wire_decode_peer_fence(p, BATON_PEER_FENCE_BYTES, &pos, &f);
    if (rc == 0)
        rc = c->role == BATON_ROLE_PEER ? grants_cancel(c->s->grants, f.grant, f.seq)
                                        : grants_seal(c->s->grants, c->sess.id, f.grant, f.seq);
    if (rc != 0)
        return rc;
    send_reply(c, h->cmd, h->seq, 0, NULL, 0, NULL, 0);
    return 0;
}

/* Routes one request whose header is valid. Returns 0 when the reply was
 * sent, a status otherwise (semantic unless c->fatal). */
static int handle(struct conn *c, const struct baton_frame_header *h)
{
    if (c->state == STATE_NEW) {
        if (h->cmd != BATON_CMD_HELLO) {
            c->fatal = 1;
            return BATON_E_PROTO;
        }
        return cmd_hello(c, h);
    }
    if (c->state == STATE_HELLO_DONE) {
        if (h->cmd == BATON_CMD_AUTH)
            return cmd_auth(c, h);
        c->fatal = 1; /* only AUTH is allowed here */
        return BATON_E_PROTO;
    }
    if (c->role == BATON_ROLE_PEER) {
        /* a peer link carries only the peer commands */
        if (h->cmd == BATON_CMD_PEER_WRITE)
            return cmd_peer_write(c, h);
        if (h->cmd == BATON_CMD_PEER_FENCE)
            return cmd_peer_fence(c, h);
        c->fatal = 1;
        return BATON_E_PROTO;
    }
    switch (h->cmd) {
    case BATON_CMD_DEVICE_INFO:
        return cmd_device_info(c, h);
    case BATON_CMD_ALLOC_BUFFER:
        return cmd_alloc_buffer(c, h);
    case BATON_CMD_FREE_BUFFER:
        return cmd_free_buffer(c, h);
    case BATON_CMD_BUFFER_CLEAR:
        return cmd_buffer_clear(c, h);
    case BATON_CMD_SET_TENSOR:
        return cmd_set_tensor(c, h);
    case BATON_CMD_GET_TENSOR:
        return cmd_get_tensor(c, h);
    case BATON_CMD_COPY_TENSOR:
        return cmd_copy_tensor(c, h);
    case BATON_CMD_GRAPH_COMPUTE:
        return cmd_graph_compute(c, h);
    case BATON_CMD_GRANT_WRITE:
        return cmd_grant_write(c, h);
    case BATON_CMD_REVOKE_GRANT:
        return cmd_revoke_grant(c, h);
    case BATON_CMD_COPY_TENSOR_TO:
        return cmd_copy_tensor_to(c, h);
    case BATON_CMD_GRAPH_REGISTER:
        return cmd_graph_register(c, h);
    case BATON_CMD_GRAPH_RUN:
        return cmd_graph_run(c, h);
    case BATON_CMD_GRAPH_FREE:
        return cmd_graph_free(c, h);
    case BATON_CMD_COPY_ROUTE:
        return cmd_copy_route(c, h);
    case BATON_CMD_PEER_FENCE:
        return cmd_peer_fence(c, h); /* the owner's: grants_seal */
    case BATON_CMD_PEER_WRITE:
        /* only a peer link may write into grants */
        c->fatal = 1;
        return BATON_E_PROTO;
    case BATON_CMD_HELLO:
    case BATON_CMD_AUTH:
        /* HELLO twice, or AUTH without authentication configured */
        c->fatal = 1;
        return BATON_E_PROTO;
    default:
        return BATON_E_UNSUPPORTED; /* not reached: the header decoder knows every command */
    }
}

/* Sends the one error frame of a framing error (best effort). */
static void framing_error(struct conn *c, uint8_t cmd, uint32_t seq, int status)
{
    if (c->silent) {
        server_log_limited(c->s, "session %llu %s: bad frame tag, closing without a reply",
                           (unsigned long long)c->sess.id, baton_cmd_name(cmd));
        return;
    }
    server_log_limited(c->s, "session %llu %s: %s, closing",
                       (unsigned long long)c->sess.id, cmd ? baton_cmd_name(cmd) : "frame",
                       baton_status_name(status));
    if (!c->dead)
        send_reply(c, cmd, seq, status, NULL, 0, NULL, 0);
}

static int serve_loop(struct conn *c, const char **reason)
{
    const struct baton_server_config *cfg = &c->s->cfg;
    for (;;) {
        uint8_t hb[BATON_FRAME_HEADER_BYTES];
        struct baton_frame_header h;
        size_t pos = 0;
        /* Before the handshake is done a connection gets no idle time: its
         * HELLO (and later AUTH) must come within the frame deadline, so a
         * silent client cannot hold a connection slot. */
        int pre_auth = c->state != STATE_READY;
        int idle_ms = pre_auth ? cfg->frame_timeout_ms : cfg->idle_timeout_ms;
        uint64_t idle = idle_ms > 0 ? baton_net_deadline_ms(idle_ms) : BATON_DEADLINE_NONE;
        if (pre_auth && c->hs_deadline < idle)
            idle = c->hs_deadline; /* the whole handshake has one deadline */
        int rc = baton_transport_wait_readable(c->t, idle);
        if (rc != 0) {
            /* READY without a key and not one request: what a client
             * with a key does on meeting a server without one (it says
             * so on its side), and what a coordinator does that gave up
             * before its first request (another of its servers failed) */
            *reason = atomic_load(&c->s->stopping) ? "server stopping"
                      : rc != BATON_E_TIMEOUT && c->state == STATE_READY && !c->tagged &&
                              c->n_requests == 0
                          ? "closed by peer before any request: a coordinator that gave up "
                            "(another of its servers failed), or a client with a key, which "
                            "refuses a server without one"
                      : rc != BATON_E_TIMEOUT      ? "closed by peer"
                      : c->state == STATE_NEW      ? "no HELLO in time"
                      : pre_auth                   ? "no AUTH in time"
                                                   : "idle timeout";
            return rc == BATON_E_TIMEOUT ? rc : 0;
        }
        c->frame_deadline = baton_net_deadline_ms(cfg->frame_timeout_ms);
        if (pre_auth && c->hs_deadline < c->frame_deadline)
            c->frame_deadline = c->hs_deadline;
        rc = baton_transport_recv_exact(c->t, hb, sizeof hb, c->frame_deadline);
        if (rc != 0) {
            rc = rc == BATON_E_TIMEOUT ? BATON_E_TIMEOUT : BATON_E_TRUNCATED;
            framing_error(c, 0, 0, rc);
            *reason = "framing error";
            return rc;
        }
        rc = baton_wire_decode_header(hb, sizeof hb, &pos, cfg->max_message_bytes, &h);
        if (rc == 0 && h.status != 0)
            rc = BATON_E_INVAL; /* requests carry status 0 */
        if (rc != 0) {
            uint8_t cmd;
            uint32_t seq;
            server_header_echo(hb, rc, &cmd, &seq);
            framing_error(c, cmd, seq, rc);
            *reason = "framing error";
            return rc;
        }
        memcpy(c->hdr, hb, sizeof hb);
        c->n_requests++;
        c->left = h.len;
        c->fatal = 0;
        rc = c->tagged ? begin_tag(c) : 0;
        if (rc != 0)
            c->fatal = 1;
        else
            rc = handle(c, &h);
        if (c->dead) {
            *reason = "send failed";
            return BATON_E_IO;
        }
        if (rc != 0 && !c->fatal) {
            /* the error reply goes out only once the request's tag checks */
            int drc = discard_rest(c);
            if (drc == 0 && c->rmac_open)
                drc = check_tag(c);
            if (drc != 0)
                rc = drc; /* the frame itself broke: that is what ends it */
        }
        if (c->fatal) {
            framing_error(c, h.cmd, h.seq, rc);
            *reason = c->silent                          ? "bad frame tag"
                      : c->state != STATE_READY && rc == BATON_E_AUTH ? "authentication failed"
                                                                 : "framing error";
            return rc;
        }
        if (rc != 0) {
            server_log_limited(c->s, "session %llu %s: %s", (unsigned long long)c->sess.id,
                               baton_cmd_name(h.cmd), baton_status_name(rc));
            send_reply(c, h.cmd, h.seq, rc, NULL, 0, NULL, 0);
            if (c->dead) {
                *reason = "send failed";
                return BATON_E_IO;
            }
        }
        server_yield_to_sender(&c->sess); /* the reply is out: a queued copy goes now */
    }
}

int server_serve_connection(struct baton_server *s, struct baton_transport *t, const char *peer,
                            struct conn_slot *slot)
{
    struct conn c;
    const char *reason = "?";
    memset(&c, 0, sizeof c);
    c.s = s;
    c.t = t;
    c.slot = slot;
    c.peer = peer ? peer : "local";
    c.hs_deadline = s->cfg.handshake_timeout_ms > 0
                        ? baton_net_deadline_ms(s->cfg.handshake_timeout_ms)
                        : BATON_DEADLINE_NONE;
    if (slot && slot->has_ready) {
        /* the lobby did the handshake (lobby.c): start READY with its keys */
        struct server_ready *r = &slot->ready;
        session_init(&c.sess, r->session);
        c.sess.client = r->client;
        c.state = STATE_READY;
        c.role = r->role;
        c.version = r->version;
        if (r->tagged) {
            c.send_key = r->send_key;
            c.recv_key = r->recv_key;
            c.tagged = 1;
            c.encrypt = s->cfg.encrypt != 0;
        }
        server_ready_wipe(r);
        slot->has_ready = 0;
    } else {
        session_init(&c.sess, server_next_session_id(s));
        server_log_conn(s, "connection from %s: session %llu", c.peer,
                        (unsigned long long)c.sess.id);
    }
    uint64_t id = c.sess.id;
    int rc = serve_loop(&c, &reason);
    /* wipe every per-connection secret */
    baton_hs_destroy(&c.hs.hs);
    baton_mac_abort(&c.rmac);
    baton_frame_key_wipe(&c.send_key);
    baton_frame_key_wipe(&c.recv_key);
    free(c.enc);
    session_end(s, &c.sess);
    server_log_conn(s, "session %llu closed (%s, peer %s)", (unsigned long long)id, reason, c.peer);
    return rc;
}
