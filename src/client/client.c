/* libbaton: connections, commands, pipelining and per-command counters
 * (include/baton/client.h, docs/PROTOCOL.md).
 *
 * Replies are decoded with the proven functions of src/wire. A connection
 * keeps a fixed ring of up to BATON_CLIENT_MAX_PENDING outstanding requests;
 * each reply must match the oldest one by cmd and seq. Anything that breaks
 * the stream (I/O error, deadline, a reply that does not match, a framing
 * error status from the server) marks the connection dead.
 *
 * With a key (baton_conn_options.key) the connection performs the AUTH
 * handshake after HELLO (auth/auth.h "Wiring", docs/PROTOCOL.md), and every
 * later frame in both directions carries a 16-byte tag; a reply whose tag
 * does not verify gives BATON_E_AUTH and kills the connection.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth/auth.h"
#include "baton/client.h"
#include "client/frame_send.h"
#include "net/net.h"
#include "net/transport.h"

#define BATON_CLIENT_MAX_PENDING 64u
#define DEFAULT_TIMEOUT_MS 30000
/* A SET larger than this is not sent while a GET reply is outstanding: the
 * server could be blocked sending that reply while we are blocked sending
 * to it. */
#define BULK_SEND_BYTES (64u * 1024u)
/* Error replies carry no payload; anything above this is a broken server. */
#define MAX_ERROR_PAYLOAD 4096u
/* Tagged connections: received payload is MAC'd (or decrypted) in pieces
 * of this size as they arrive; sent payload in BATON_SEND_PIECE_BYTES
 * pieces (frame_send.h), each sent right after it is MAC'd. */
#ifndef RECV_PIECE_BYTES /* overridable for benchmarks (bench/auth_cost.sh) */
#define RECV_PIECE_BYTES (256u * 1024u)
#endif

struct pending {
    uint8_t cmd;
    uint32_t seq;
    void *get_dst; /* GET_TENSOR: where the data goes */
    uint64_t get_n;
    uint64_t *alloc_handle;          /* ALLOC_BUFFER */
    uint64_t alloc_size;
    struct baton_device_info *info;  /* DEVICE_INFO */
    struct baton_hello *hello;       /* HELLO */
    uint8_t *grant_id;               /* GRANT_WRITE */
    struct baton_copy_result *copy;  /* COPY_TENSOR_TO */
    uint32_t *graph_id;              /* GRAPH_REGISTER */
    int *status_out;                 /* baton_conn_track: the reply's status goes here */
};

struct baton_conn {
    struct baton_transport *t;
    int timeout_ms;
    int dead;
    int first_err; /* first failed reply not yet returned by baton_conn_wait */
    uint32_t next_seq;
    struct baton_hello server_hello;
    struct baton_cmd_stats stats[BATON_CMD_LIMIT];
    struct pending ring[BATON_CLIENT_MAX_PENDING];
    uint32_t head, count;
    uint8_t *enc; /* graph encoding buffer */
    size_t enc_cap;
    int tagged;   /* after AUTH: every frame carries a tag */
    int encrypt;  /* tagged, and payloads are encrypted (server's HELLO) */
    struct baton_frame_key send_key, recv_key;
    uint8_t *enc_buf; /* encrypt mode: BATON_SEND_PIECE_BYTES of ciphertext */
    int *track;       /* baton_conn_track: for the next submit only */
};


/* A status code sent by the server, as a negative enum baton_status. A code
 * outside the table is itself a protocol violation (BATON_E_PROTO), so a
 * caller never sees a value it cannot name. */
static int server_status(uint16_t status)
{
    if (status == 0 || status > (uint16_t)-BATON_E_STATUS_MIN)
        return BATON_E_PROTO;
    return -(int)status;
}

static void mark_dead(struct baton_conn *c)
{
    c->dead = 1;
    c->count = 0;
}

/* Statuses after which the server has closed (or will close) the stream. */
static int is_fatal_status(int st)
{
    switch (st) {
    case BATON_E_MAGIC:
    case BATON_E_CMD:
    case BATON_E_PROTO:
    case BATON_E_VERSION:
    case BATON_E_TRUNCATED:
    case BATON_E_TIMEOUT:
    case BATON_E_AUTH:
    case BATON_E_IO:
        return 1;
    default:
        return 0;
    }
}

static int io_status(int rc)
{
    return rc == BATON_E_TIMEOUT ? BATON_E_TIMEOUT : BATON_E_IO;
}

static int io_status_or_ok(int rc)
{
    return rc == 0 ? 0 : io_status(rc);
}

/* ---- tagged frames ---- */

/* Starts the tag of the next received frame, whose header is hb. */
static int begin_recv_tag(struct baton_conn *c, struct baton_mac *m, const uint8_t *hb)
{
    uint64_t ctr;
    int rc = baton_frame_key_next(&c->recv_key, &ctr);
    if (rc == 0 && c->encrypt)
        rc = baton_aead_begin(m, &c->recv_key, ctr, hb, BATON_FRAME_HEADER_BYTES);
    else if (rc == 0)
        rc = baton_mac_begin(m, &c->recv_key, ctr);
    if (rc == 0 && !c->encrypt)
        rc = baton_mac_update(m, hb, BATON_FRAME_HEADER_BYTES);
    return rc;
}

/* Reads n payload bytes into buf; on a tagged connection each piece is
 * MAC'd (or decrypted in place) right after it arrives. The bytes are not
 * authentic until recv_tag succeeds. */
static int recv_body(struct baton_conn *c, struct baton_mac *m, void *buf, uint64_t n,
                     uint64_t deadline)
{
    uint8_t *p = buf;
    while (n > 0) {
        uint64_t k = c->tagged && n > RECV_PIECE_BYTES ? RECV_PIECE_BYTES : n;
        int rc = baton_transport_recv_exact(c->t, p, (size_t)k, deadline);
        if (rc != 0)
            return io_status(rc);
        if (c->tagged) {
            rc = c->encrypt ? baton_aead_decrypt(m, p, p, (size_t)k)
                            : baton_mac_update(m, p, (size_t)k);
            if (rc != 0)
                return BATON_E_PROTO;
        }
        p += k;
        n -= k;
    }
    return 0;
}

/* Reads the frame's tag and checks it (constant time): 0, BATON_E_AUTH, or
 * an I/O status. Nothing to do on an untagged connection. */
static int recv_tag(struct baton_conn *c, struct baton_mac *m, uint64_t deadline)
{
    uint8_t tag[BATON_TAG_BYTES];
    if (!c->tagged)
        return 0;
    int rc = baton_transport_recv_exact(c->t, tag, sizeof tag, deadline);
    if (rc != 0)
        return io_status(rc);
    return baton_mac_final_verify(m, tag) == 0 ? 0 : BATON_E_AUTH;
}

/* Sends header hb, payload pieces p1 and p2 and, on a tagged connection,
 * the tag of the next frame of the send direction (frame_send.h). */
static int send_frame(struct baton_conn *c, const uint8_t *hb, const void *p1, uint64_t n1,
                      const void *p2, uint64_t n2, uint64_t deadline)
{
    if (!c->tagged) {
        struct iovec plain[3] = {{(void *)hb, BATON_FRAME_HEADER_BYTES},
                                 {(void *)p1, (size_t)n1},
                                 {(void *)p2, (size_t)n2}};
        return baton_transport_send_all(c->t, plain, 3, deadline);
    }
    return baton_send_tagged_frame(c->t, &c->send_key, c->encrypt, &c->enc_buf, hb, p1, n1, p2,
                                   n2, deadline);
}

/* Reads and decodes the reply of the oldest outstanding request. */
static int read_one_reply_raw(struct baton_conn *c)
{
    struct pending *pd = &c->ring[c->head];
    uint8_t hb[BATON_FRAME_HEADER_BYTES];
    uint8_t small[BATON_DEVICE_INFO_BYTES];
    struct baton_frame_header h;
    struct baton_mac m;
    size_t pos = 0;
    uint64_t deadline = baton_net_deadline_ms(c->timeout_ms);
    uint64_t want;
    int rc;

    memset(&m, 0, sizeof m);
    c->head = (c->head + 1) % BATON_CLIENT_MAX_PENDING;
    c->count--;
    rc = baton_transport_recv_exact(c->t, hb, sizeof hb, deadline);
    if (rc != 0)
        goto dead;
    rc = baton_wire_decode_header(hb, sizeof hb, &pos, BATON_MAX_MESSAGE_BYTES, &h);
    if (rc == BATON_E_CMD && !c->tagged) {
        /* The error frame of a framing error carries cmd 0 (bad magic) or
         * the unknown cmd it echoes, which the header decoder rejects: take
         * its status field, then give up on the stream. (On a tagged
         * connection a status is believed only with a tag that verifies.) */
        uint16_t st = 0;
        pos = 6;
        if (baton_wire_get_u16(hb, sizeof hb, &pos, &st) == 0 && st != 0) {
            rc = server_status(st);
            goto dead;
        }
    }
    if (rc != 0) {
        rc = BATON_E_PROTO;
        goto dead;
    }
    if (pd->cmd < BATON_CMD_LIMIT)
        c->stats[pd->cmd].reply_bytes +=
            BATON_FRAME_HEADER_BYTES + h.len + (c->tagged ? BATON_TAG_BYTES : 0);
    if (h.cmd != pd->cmd || h.seq != pd->seq) {
        rc = h.status != 0 && !c->tagged ? server_status(h.status) : BATON_E_PROTO;
        goto dead;
    }
    if (c->tagged) {
        rc = begin_recv_tag(c, &m, hb);
        if (rc != 0)
            goto dead;
    }
    if (h.status != 0) {
        int st = server_status(h.status);
        if (h.len > MAX_ERROR_PAYLOAD) {
            rc = BATON_E_PROTO;
            goto dead;
        }
        while (h.len > 0) {
            uint64_t k = h.len < sizeof small ? h.len : sizeof small;
            rc = recv_body(c, &m, small, k, deadline);
            if (rc != 0)
                goto dead;
            h.len -= k;
        }
        rc = recv_tag(c, &m, deadline);
        if (rc != 0)
            goto dead;
        if (is_fatal_status(st))
            mark_dead(c);
        return st;
    }
    switch (pd->cmd) {
    case BATON_CMD_HELLO:
        want = BATON_HELLO_BYTES;
        break;
    case BATON_CMD_DEVICE_INFO:
        want = BATON_DEVICE_INFO_BYTES;
        break;
    case BATON_CMD_ALLOC_BUFFER:
        want = 16;
        break;
    case BATON_CMD_GET_TENSOR:
        want = pd->get_n;
        break;
    case BATON_CMD_GRANT_WRITE:
        want = BATON_GRANT_ID_BYTES;
        break;
    case BATON_CMD_COPY_TENSOR_TO:
        want = BATON_COPY_RESULT_BYTES;
        break;
    case BATON_CMD_GRAPH_REGISTER:
    case BATON_CMD_COPY_ROUTE:
        want = BATON_GRAPH_ID_BYTES;
        break;
    case BATON_CMD_GRAPH_RUN:
        want = (pd->copy ? BATON_COPY_RESULT_BYTES : 0) + pd->get_n;
        break;
    default:
        want = 0;
        break;
    }
    if (h.len != want) {
        rc = BATON_E_PROTO;
        goto dead;
    }
    if (pd->cmd == BATON_CMD_GET_TENSOR) {
        /* straight into the caller's memory (authentic once the tag is) */
        rc = recv_body(c, &m, pd->get_dst, want, deadline);
        if (rc == 0)
            rc = recv_tag(c, &m, deadline);
        if (rc != 0)
            goto dead;
        return 0;
    }
    if (pd->cmd == BATON_CMD_GRAPH_RUN) {
        /* the hand-off's result, then the returned leaf's bytes */
        rc = 0;
        if (pd->copy)
            rc = recv_body(c, &m, small, BATON_COPY_RESULT_BYTES, deadline);
        if (rc == 0 && pd->get_n)
            rc = recv_body(c, &m, pd->get_dst, pd->get_n, deadline);
        if (rc == 0)
            rc = recv_tag(c, &m, deadline);
        if (rc != 0)
            goto dead;
        pos = 0;
        if (pd->copy && baton_wire_decode_copy_result(small, BATON_COPY_RESULT_BYTES, &pos,
                                                      pd->copy) != 0) {
            rc = BATON_E_PROTO;
            goto dead;
        }
        return 0;
    }
    rc = recv_body(c, &m, small, want, deadline);
    if (rc == 0)
        rc = recv_tag(c, &m, deadline);
    if (rc != 0)
        goto dead;
    pos = 0;
    if (pd->cmd == BATON_CMD_HELLO) {
        rc = baton_wire_decode_hello(small, (size_t)want, &pos, pd->hello);
    } else if (pd->cmd == BATON_CMD_DEVICE_INFO) {
        rc = baton_wire_decode_device_info(small, (size_t)want, &pos, pd->info);
    } else if (pd->cmd == BATON_CMD_ALLOC_BUFFER) {
        uint64_t handle, size;
        rc = baton_wire_get_u64(small, 16, &pos, &handle);
        if (rc == 0)
            rc = baton_wire_get_u64(small, 16, &pos, &size);
        if (rc == 0 && size != pd->alloc_size)
            rc = BATON_E_PROTO;
        if (rc == 0)
            *pd->alloc_handle = handle;
    } else if (pd->cmd == BATON_CMD_GRANT_WRITE) {
        rc = baton_wire_decode_grant_id(small, (size_t)want, &pos, pd->grant_id);
    } else if (pd->cmd == BATON_CMD_COPY_TENSOR_TO) {
        rc = baton_wire_decode_copy_result(small, (size_t)want, &pos, pd->copy);
    } else if (pd->cmd == BATON_CMD_GRAPH_REGISTER || pd->cmd == BATON_CMD_COPY_ROUTE) {
        rc = baton_wire_decode_graph_id(small, (size_t)want, &pos, pd->graph_id);
    }
    if (rc != 0) {
        rc = BATON_E_PROTO;
        goto dead;
    }
    return 0;
dead:
    if (rc == BATON_E_IO || rc == BATON_E_TIMEOUT || rc == BATON_E_TRUNCATED)
        rc = io_status(rc);
    baton_mac_abort(&m);
    mark_dead(c);
    return rc;
}

/* read_one_reply_raw, and the status into the request's tracking slot
 * (baton_conn_track) when it has one. Returns the status, and sets *tracked
 * when it went to a slot. */
static int read_one_reply(struct baton_conn *c, int *tracked)
{
    int *slot = c->ring[c->head].status_out;
    int rc = read_one_reply_raw(c);
    if (slot)
        *slot = rc;
    if (tracked)
        *tracked = slot != NULL;
    return rc;
}

/* Reads every outstanding reply, keeping the first error of an untracked
 * request in c->first_err (a tracked one's goes to its slot). */
static void drain(struct baton_conn *c)
{
    while (c->count > 0) {
        int tracked = 0;
        int rc = read_one_reply(c, &tracked);
        if (rc != 0 && !tracked && c->first_err == 0)
            c->first_err = rc;
    }
}

/* Whether a reply that carries bulk bytes (GET_TENSOR, or GRAPH_RUN with
 * RETURN) is outstanding: a bulk send then drains first, so neither side
 * blocks writing while the other does. */
static int has_pending_get(const struct baton_conn *c)
{
    for (uint32_t i = 0; i < c->count; i++)
        if (c->ring[(c->head + i) % BATON_CLIENT_MAX_PENDING].get_n > 0)
            return 1;
    return 0;
}

/* A submit that ends before its request is sent: the tracking slot the
 * caller set (baton_conn_track) gets rc, so no one waits for a reply that
 * will not come. Returns rc. */
static int untracked(struct baton_conn *c, int rc)
{
    if (c->track)
        *c->track = rc;
    c->track = NULL;
    return rc;
}

/* Records that the reply to request seq must look like *expect (the ring
 * has room: submit drains it first). */
static void push_pending(struct baton_conn *c, const struct pending *expect, uint32_t seq)
{
    struct pending *pd = &c->ring[(c->head + c->count) % BATON_CLIENT_MAX_PENDING];

    *pd = *expect;
    pd->seq = seq;
    c->count++;
}

/* After a send that failed with BATON_E_IO while no earlier reply was
 * outstanding: a server that refuses a frame by its header (a length above
 * its max_message_bytes: docs/PROTOCOL.md, framing errors) sends an error
 * frame and closes while the payload is still on its way, which the send
 * sees as a reset. That frame, when it has arrived, says why: its status
 * (BATON_E_LIMIT for that length) is returned, else BATON_E_IO (the server
 * died, or closed without a reply). Waits for no frame that has not begun to
 * arrive; one that has is read as any reply is, within the connection's
 * timeout (over TCP a failed send means a reset, so no partial frame
 * follows). */
static int refusal_status(struct baton_conn *c, const struct pending *expect, uint32_t seq)
{
    int rc;

    if (baton_transport_wait_readable(c->t, baton_net_deadline_ms(0)) != 0)
        return BATON_E_IO;
    push_pending(c, expect, seq);
    rc = read_one_reply(c, NULL);
    return rc != 0 ? rc : BATON_E_IO; /* a success cannot answer half a frame */
}

/* Sends one request (header + up to two payload pieces) and records what
 * its reply must look like. A request that is not sent (or whose send
 * failed) leaves its tracking slot holding the returned status. */
static int submit(struct baton_conn *c, const struct pending *expect_in, const void *p1,
                  uint64_t n1, const void *p2, uint64_t n2)
{
    uint8_t hb[BATON_FRAME_HEADER_BYTES];
    struct pending tracked = *expect_in;
    const struct pending *expect = &tracked;
    if (c->dead)
        return untracked(c, BATON_E_IO);
    if (n1 > BATON_MAX_MESSAGE_BYTES || n2 > BATON_MAX_MESSAGE_BYTES - n1)
        return untracked(c, BATON_E_LIMIT); /* nothing sent: the connection stays usable */
    if (c->count == BATON_CLIENT_MAX_PENDING ||
        (n1 + n2 > BULK_SEND_BYTES && has_pending_get(c)))
        drain(c);
    if (c->dead) {
        /* the first failed reply is returned here, not again by a wait */
        int rc = c->first_err ? c->first_err : BATON_E_IO;
        c->first_err = 0;
        return untracked(c, rc);
    }
    tracked.status_out = c->track;
    c->track = NULL;
    struct baton_frame_header h = {
        .cmd = expect->cmd, .flags = 0, .status = 0, .seq = c->next_seq++, .len = n1 + n2};
    baton_wire_encode_header(hb, &h);
    int rc = send_frame(c, hb, p1, n1, p2, n2, baton_net_deadline_ms(c->timeout_ms));
    c->stats[expect->cmd].count++;
    c->stats[expect->cmd].request_bytes +=
        BATON_FRAME_HEADER_BYTES + n1 + n2 + (c->tagged ? BATON_TAG_BYTES : 0);
    if (rc != 0) {
        rc = io_status(rc);
        if (rc == BATON_E_IO && c->count == 0)
            rc = refusal_status(c, expect, h.seq);
        mark_dead(c);
        if (tracked.status_out)
            *tracked.status_out = rc;
        return rc;
    }
    push_pending(c, expect, h.seq);
    return 0;
}

void baton_conn_track(struct baton_conn *c, int *status)
{
    if (status)
        *status = BATON_REPLY_PENDING;
    c->track = status;
}

uint32_t baton_conn_outstanding(const struct baton_conn *c)
{
    return c->count;
}

int baton_conn_read_reply(struct baton_conn *c)
{
    if (c->count == 0)
        return c->dead ? BATON_E_IO : BATON_E_PROTO;
    int tracked = 0;
    int rc = read_one_reply(c, &tracked);
    if (rc != 0 && !tracked && c->first_err == 0)
        c->first_err = rc;
    return rc;
}

int baton_conn_fd(const struct baton_conn *c)
{
    return baton_transport_socket_fd(c->t);
}

int baton_conn_wait(struct baton_conn *c)
{
    drain(c);
    int rc = c->first_err;
    c->first_err = 0;
    if (rc == 0 && c->dead)
        rc = BATON_E_IO;
    return rc;
}

/* submit + wait: the status of this call (or of an earlier pipelined
 * request that failed). */
/* The synchronous form of a submit that returned rc: its error (the
 * request was not sent), or the wait for every outstanding reply. */
static int finish_sync(struct baton_conn *c, int rc)
{
    if (rc != 0) {
        c->first_err = 0;
        return rc;
    }
    return baton_conn_wait(c);
}

static int roundtrip(struct baton_conn *c, const struct pending *expect, const void *p1,
                     uint64_t n1, const void *p2, uint64_t n2)
{
    return finish_sync(c, submit(c, expect, p1, n1, p2, n2));
}

static int encode_graph(struct baton_conn *c, const struct baton_graph *g, size_t *len_out);

/* ---- connection ---- */

/* Reads the header of a handshake reply (cmd, seq) and returns 0, the
 * status the server sent (an error frame), BATON_E_PROTO or an I/O status. */
static int hs_read_header(struct baton_conn *c, uint8_t *hb, struct baton_frame_header *h,
                          uint8_t cmd, uint32_t seq, uint64_t deadline)
{
    size_t pos = 0;
    int rc = baton_transport_recv_exact(c->t, hb, BATON_FRAME_HEADER_BYTES, deadline);
    if (rc != 0)
        return io_status(rc);
    rc = baton_wire_decode_header(hb, BATON_FRAME_HEADER_BYTES, &pos, BATON_MAX_MESSAGE_BYTES, h);
    if (rc == BATON_E_CMD) {
        uint16_t st = 0;
        pos = 6;
        if (baton_wire_get_u16(hb, BATON_FRAME_HEADER_BYTES, &pos, &st) == 0 && st != 0)
            return server_status(st);
    }
    if (rc != 0)
        return BATON_E_PROTO;
    c->stats[cmd].reply_bytes += BATON_FRAME_HEADER_BYTES + h->len;
    if (h->cmd != cmd || h->seq != seq || h->status != 0)
        return h->status != 0 ? server_status(h->status) : BATON_E_PROTO;
    return 0;
}

/* Sends one handshake frame (no tag) and counts it. */
static int hs_send(struct baton_conn *c, uint8_t cmd, const uint8_t *frame, size_t n,
                   uint64_t deadline)
{
    struct iovec iov = {(void *)frame, n};
    c->stats[cmd].count++;
    c->stats[cmd].request_bytes += n;
    int rc = baton_transport_send_all(c->t, &iov, 1, deadline);
    return rc != 0 ? io_status(rc) : 0;
}

/* HELLO, then with a key AUTH (auth/auth.h "Wiring", initiator). The
 * transcript is the exact bytes of both HELLO frames. A keyed client
 * refuses a server that offers no authentication, and an unkeyed one a
 * server that requires it (BATON_E_AUTH either way). */
static int handshake(struct baton_conn *c, const struct baton_key *key, uint8_t role)
{
    struct baton_hs hs;
    struct baton_hello hello;
    struct baton_frame_header h;
    uint8_t req[BATON_FRAME_HEADER_BYTES + BATON_HELLO_BYTES];
    uint8_t rep[BATON_FRAME_HEADER_BYTES + BATON_HELLO_BYTES];
    uint8_t auth[BATON_FRAME_HEADER_BYTES + BATON_PROOF_BYTES];
    uint8_t proof[BATON_PROOF_BYTES];
    uint64_t deadline = baton_net_deadline_ms(c->timeout_ms);
    size_t pos = 0;
    int rc;

    memset(&hs, 0, sizeof hs);
    memset(&hello, 0, sizeof hello);
    hello.version_min = BATON_PROTOCOL_VERSION;
    hello.version_max = BATON_PROTOCOL_VERSION;
    hello.role = role;
    hello.features = key ? BATON_FEATURE_AUTH : 0;
    rc = baton_auth_init(); /* libsodium, for the nonce (idempotent) */
    if (rc != 0)
        goto out;
    baton_hs_nonce(hello.nonce);
    struct baton_frame_header rq = {
        .cmd = BATON_CMD_HELLO, .seq = c->next_seq++, .len = BATON_HELLO_BYTES};
    baton_wire_encode_header(req, &rq);
    baton_wire_encode_hello(req + BATON_FRAME_HEADER_BYTES, &hello);
    if (key) {
        rc = baton_hs_init(&hs, role, baton_key_bytes(key));
        if (rc == 0)
            rc = baton_hs_transcript_add(&hs, req, sizeof req);
        if (rc != 0)
            goto out;
    }
    rc = hs_send(c, BATON_CMD_HELLO, req, sizeof req, deadline);
    if (rc == 0)
        rc = hs_read_header(c, rep, &h, BATON_CMD_HELLO, rq.seq, deadline);
    if (rc == 0 && h.len != BATON_HELLO_BYTES)
        rc = BATON_E_PROTO;
    if (rc == 0)
        rc = io_status_or_ok(baton_transport_recv_exact(c->t, rep + BATON_FRAME_HEADER_BYTES,
                                                        BATON_HELLO_BYTES, deadline));
    if (rc == 0 && baton_wire_decode_hello(rep + BATON_FRAME_HEADER_BYTES, BATON_HELLO_BYTES,
                                           &pos, &c->server_hello) != 0)
        rc = BATON_E_PROTO;
    if (rc != 0)
        goto out;
    if (c->server_hello.role != BATON_ROLE_SERVER ||
        c->server_hello.version_min != c->server_hello.version_max ||
        c->server_hello.version_min != BATON_PROTOCOL_VERSION) {
        rc = BATON_E_PROTO;
        goto out;
    }
    /* never talk to a server half-way: with a key, only to one that
     * authenticates; without, only to one that does not require it */
    if (((c->server_hello.features & BATON_FEATURE_AUTH) != 0) != (key != NULL)) {
        rc = BATON_E_AUTH;
        goto out;
    }
    if (!key)
        goto out;
    rc = baton_hs_transcript_add(&hs, rep, sizeof rep);
    if (rc == 0)
        rc = baton_hs_initiator_proof(&hs, proof);
    if (rc != 0)
        goto out;
    struct baton_frame_header ah = {
        .cmd = BATON_CMD_AUTH, .seq = c->next_seq++, .len = BATON_PROOF_BYTES};
    baton_wire_encode_header(auth, &ah);
    memcpy(auth + BATON_FRAME_HEADER_BYTES, proof, BATON_PROOF_BYTES);
    deadline = baton_net_deadline_ms(c->timeout_ms);
    rc = hs_send(c, BATON_CMD_AUTH, auth, sizeof auth, deadline);
    if (rc == 0)
        rc = hs_read_header(c, rep, &h, BATON_CMD_AUTH, ah.seq, deadline);
    if (rc == 0 && h.len != BATON_PROOF_BYTES)
        rc = BATON_E_PROTO;
    if (rc == 0)
        rc = io_status_or_ok(
            baton_transport_recv_exact(c->t, proof, BATON_PROOF_BYTES, deadline));
    if (rc == 0)
        rc = baton_hs_verify_responder(&hs, proof);
    if (rc == 0)
        rc = baton_hs_session_keys(&hs, &c->send_key, &c->recv_key);
    if (rc != 0)
        goto out;
    c->tagged = 1;
    c->encrypt = (c->server_hello.features & BATON_FEATURE_ENCRYPT) != 0;
out:
    baton_hs_destroy(&hs);
    sodium_memzero(auth, sizeof auth);
    sodium_memzero(proof, sizeof proof);
    return rc;
}

int baton_conn_adopt_fd_ex(int fd, const struct baton_conn_options *o, struct baton_conn **out)
{
    struct baton_conn *c;
    uint8_t role = o->role ? o->role : BATON_ROLE_CLIENT;
    int rc;
    if (o->server_auth)
        *o->server_auth = -1;
    if ((role != BATON_ROLE_CLIENT && role != BATON_ROLE_PEER) ||
        (o->key && baton_auth_init() != 0)) {
        close(fd);
        return role != BATON_ROLE_CLIENT && role != BATON_ROLE_PEER ? BATON_E_INVAL : BATON_E_IO;
    }
    c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return BATON_E_NOMEM;
    }
    rc = baton_transport_socket(fd, -1, &c->t);
    if (rc != 0) {
        free(c);
        return rc;
    }
    c->timeout_ms = o->timeout_ms;
    c->next_seq = 1;
    rc = handshake(c, o->key, role);
    if (o->server_auth) /* a HELLO reply was taken iff its role was checked */
        *o->server_auth = c->server_hello.role != BATON_ROLE_SERVER ? -1
                          : (c->server_hello.features & BATON_FEATURE_AUTH) != 0;
    if (rc != 0) {
        baton_conn_close(c);
        return rc;
    }
    *out = c;
    return 0;
}

int baton_conn_adopt_fd(int fd, int timeout_ms, struct baton_conn **out)
{
    struct baton_conn_options o = {.timeout_ms = timeout_ms};
    return baton_conn_adopt_fd_ex(fd, &o, out);
}

int baton_conn_connect_ex(const char *host, uint16_t port, const struct baton_conn_options *o,
                          struct baton_conn **out)
{
    int fd;
    int rc = baton_net_connect(host, port, o->timeout_ms, &fd);
    if (rc != 0)
        return rc;
    return baton_conn_adopt_fd_ex(fd, o, out);
}

int baton_conn_connect(const char *host, uint16_t port, int timeout_ms, struct baton_conn **out)
{
    struct baton_conn_options o = {.timeout_ms = timeout_ms};
    return baton_conn_connect_ex(host, port, &o, out);
}

int baton_conn_authenticated(const struct baton_conn *c)
{
    return c->tagged;
}

int baton_conn_encrypted(const struct baton_conn *c)
{
    return c->encrypt;
}

void baton_conn_close(struct baton_conn *c)
{
    if (!c)
        return;
    baton_transport_close(c->t);
    baton_frame_key_wipe(&c->send_key);
    baton_frame_key_wipe(&c->recv_key);
    free(c->enc_buf);
    free(c->enc);
    free(c);
}

void baton_conn_set_timeout(struct baton_conn *c, int timeout_ms)
{
    c->timeout_ms = timeout_ms;
}

int baton_conn_is_dead(const struct baton_conn *c)
{
    return c->dead;
}

const struct baton_hello *baton_conn_server_hello(const struct baton_conn *c)
{
    return &c->server_hello;
}

struct baton_cmd_stats baton_conn_stats(const struct baton_conn *c, uint32_t cmd)
{
    struct baton_cmd_stats z = {0, 0, 0};
    if (cmd == 0 || cmd >= BATON_CMD_LIMIT)
        return z;
    return c->stats[cmd];
}

void baton_conn_reset_stats(struct baton_conn *c)
{
    memset(c->stats, 0, sizeof c->stats);
}

/* ---- commands ---- */

int baton_device_info(struct baton_conn *c, struct baton_device_info *out)
{
    struct pending e = {.cmd = BATON_CMD_DEVICE_INFO, .info = out};
    return roundtrip(c, &e, NULL, 0, NULL, 0);
}

int baton_alloc_buffer(struct baton_conn *c, uint64_t size, uint64_t *handle)
{
    uint8_t p[8];
    baton_wire_put_u64(p, size);
    struct pending e = {.cmd = BATON_CMD_ALLOC_BUFFER, .alloc_handle = handle, .alloc_size = size};
    return roundtrip(c, &e, p, sizeof p, NULL, 0);
}

int baton_free_buffer(struct baton_conn *c, uint64_t handle)
{
    uint8_t p[8];
    baton_wire_put_u64(p, handle);
    struct pending e = {.cmd = BATON_CMD_FREE_BUFFER};
    return roundtrip(c, &e, p, sizeof p, NULL, 0);
}

int baton_buffer_clear(struct baton_conn *c, uint64_t handle, uint8_t value)
{
    uint8_t p[16] = {0};
    baton_wire_put_u64(p, handle);
    p[8] = value;
    struct pending e = {.cmd = BATON_CMD_BUFFER_CLEAR};
    return roundtrip(c, &e, p, sizeof p, NULL, 0);
}

static void encode_tensor_range(uint8_t *p, const struct baton_tensor_desc *t, uint64_t offset,
                                uint64_t n)
{
    baton_wire_encode_tensor(p, t);
    baton_wire_put_u64(p + BATON_TENSOR_DESC_BYTES, offset);
    baton_wire_put_u64(p + BATON_TENSOR_DESC_BYTES + 8, n);
}

int baton_submit_set_tensor(struct baton_conn *c, const struct baton_tensor_desc *t,
                            uint64_t offset, const void *data, uint64_t n)
{
    uint8_t p[BATON_TENSOR_DESC_BYTES + 16];
    encode_tensor_range(p, t, offset, n);
    struct pending e = {.cmd = BATON_CMD_SET_TENSOR};
    return submit(c, &e, p, sizeof p, data, n);
}

int baton_submit_get_tensor(struct baton_conn *c, const struct baton_tensor_desc *t,
                            uint64_t offset, void *data, uint64_t n)
{
    uint8_t p[BATON_TENSOR_DESC_BYTES + 16];
    encode_tensor_range(p, t, offset, n);
    struct pending e = {.cmd = BATON_CMD_GET_TENSOR, .get_dst = data, .get_n = n};
    return submit(c, &e, p, sizeof p, NULL, 0);
}

int baton_set_tensor(struct baton_conn *c, const struct baton_tensor_desc *t, uint64_t offset,
                     const void *data, uint64_t n)
{
    return finish_sync(c, baton_submit_set_tensor(c, t, offset, data, n));
}

int baton_get_tensor(struct baton_conn *c, const struct baton_tensor_desc *t, uint64_t offset,
                     void *data, uint64_t n)
{
    return finish_sync(c, baton_submit_get_tensor(c, t, offset, data, n));
}

int baton_copy_tensor(struct baton_conn *c, const struct baton_tensor_desc *src,
                      const struct baton_tensor_desc *dst)
{
    uint8_t p[2 * BATON_TENSOR_DESC_BYTES];
    baton_wire_encode_tensor(p, src);
    baton_wire_encode_tensor(p + BATON_TENSOR_DESC_BYTES, dst);
    struct pending e = {.cmd = BATON_CMD_COPY_TENSOR};
    return roundtrip(c, &e, p, sizeof p, NULL, 0);
}

int baton_submit_graph_compute(struct baton_conn *c, const struct baton_graph *g)
{
    size_t len = 0;
    if (c->dead)
        return untracked(c, BATON_E_IO);
    int rc = encode_graph(c, g, &len);
    if (rc != 0)
        return untracked(c, rc);
    struct pending e = {.cmd = BATON_CMD_GRAPH_COMPUTE};
    return submit(c, &e, c->enc, len, NULL, 0);
}

int baton_graph_compute(struct baton_conn *c, const struct baton_graph *g)
{
    return finish_sync(c, baton_submit_graph_compute(c, g));
}

int baton_grant_write(struct baton_conn *c, uint64_t handle, uint64_t offset, uint64_t length,
                      uint8_t id[BATON_GRANT_ID_BYTES])
{
    uint8_t p[BATON_GRANT_REQUEST_BYTES];
    struct baton_grant_request g = {.handle = handle, .offset = offset, .length = length};
    baton_wire_encode_grant_request(p, &g);
    struct pending e = {.cmd = BATON_CMD_GRANT_WRITE, .grant_id = id};
    return roundtrip(c, &e, p, sizeof p, NULL, 0);
}

int baton_revoke_grant(struct baton_conn *c, const uint8_t id[BATON_GRANT_ID_BYTES])
{
    struct pending e = {.cmd = BATON_CMD_REVOKE_GRANT};
    return roundtrip(c, &e, id, BATON_GRANT_ID_BYTES, NULL, 0);
}

int baton_submit_copy_tensor_to(struct baton_conn *c, const struct baton_tensor_desc *t,
                                uint64_t offset, uint64_t n, const struct baton_peer_dest *dest,
                                const struct baton_copy_options *opt,
                                struct baton_copy_result *out)
{
    uint8_t p[BATON_COPY_TO_BYTES];
    struct baton_copy_options none = {0, 0};
    encode_tensor_range(p, t, offset, n);
    baton_wire_encode_peer_dest(p + BATON_TENSOR_DESC_BYTES + 16, dest);
    baton_wire_encode_copy_options(p + BATON_TENSOR_DESC_BYTES + 16 + BATON_PEER_DEST_BYTES,
                                   opt ? opt : &none);
    struct pending e = {.cmd = BATON_CMD_COPY_TENSOR_TO, .copy = out};
    return submit(c, &e, p, sizeof p, NULL, 0);
}

int baton_copy_tensor_to(struct baton_conn *c, const struct baton_tensor_desc *t, uint64_t offset,
                         uint64_t n, const struct baton_peer_dest *dest,
                         const struct baton_copy_options *opt, struct baton_copy_result *out)
{
    return finish_sync(c, baton_submit_copy_tensor_to(c, t, offset, n, dest, opt, out));
}

int baton_submit_peer_write(struct baton_conn *c, const uint8_t id[BATON_GRANT_ID_BYTES],
                            uint64_t offset, uint64_t seq, const void *data, uint64_t n)
{
    uint8_t p[BATON_PEER_WRITE_HEADER_BYTES];
    struct baton_peer_write_header w = {.offset = offset, .n = n, .seq = seq};
    memcpy(w.grant, id, BATON_GRANT_ID_BYTES);
    baton_wire_encode_peer_write(p, &w);
    struct pending e = {.cmd = BATON_CMD_PEER_WRITE};
    return submit(c, &e, p, sizeof p, data, n);
}

int baton_peer_write(struct baton_conn *c, const uint8_t id[BATON_GRANT_ID_BYTES],
                     uint64_t offset, uint64_t seq, const void *data, uint64_t n)
{
    return finish_sync(c, baton_submit_peer_write(c, id, offset, seq, data, n));
}

int baton_peer_fence(struct baton_conn *c, const uint8_t id[BATON_GRANT_ID_BYTES], uint64_t seq,
                     uint32_t status)
{
    uint8_t p[BATON_PEER_FENCE_BYTES];
    struct baton_peer_fence f = {.seq = seq, .status = status};
    memcpy(f.grant, id, BATON_GRANT_ID_BYTES);
    baton_wire_encode_peer_fence(p, &f);
    struct pending e = {.cmd = BATON_CMD_PEER_FENCE};
    return roundtrip(c, &e, p, sizeof p, NULL, 0);
}

/* Encodes g as GRAPH_COMPUTE / GRAPH_REGISTER payload into c->enc; *len
 * gets its length. */
static int encode_graph(struct baton_conn *c, const struct baton_graph *g, size_t *len_out)
{
    if (g->n_nodes == 0 || g->n_nodes > BATON_MAX_GRAPH_NODES ||
        g->n_leaves > BATON_MAX_GRAPH_LEAVES)
        return BATON_E_LIMIT;
    /* bounded by the limits above: a few MiB, no overflow */
    size_t len = BATON_GRAPH_HEADER_BYTES + (size_t)g->n_leaves * BATON_TENSOR_DESC_BYTES +
                 (size_t)g->n_nodes * BATON_GRAPH_NODE_BYTES;
    if (len > c->enc_cap) {
        uint8_t *p = realloc(c->enc, len);
        if (!p)
            return BATON_E_NOMEM;
        c->enc = p;
        c->enc_cap = len;
    }
    uint8_t *p = c->enc;
    baton_wire_put_u32(p, g->n_leaves);
    baton_wire_put_u32(p + 4, g->n_nodes);
    p += BATON_GRAPH_HEADER_BYTES;
    for (uint32_t i = 0; i < g->n_leaves; i++, p += BATON_TENSOR_DESC_BYTES)
        baton_wire_encode_tensor(p, &g->leaves[i]);
    for (uint32_t j = 0; j < g->n_nodes; j++, p += BATON_GRAPH_NODE_BYTES)
        baton_wire_encode_node(p, &g->nodes[j]);
    *len_out = len;
    return 0;
}

int baton_submit_graph_register(struct baton_conn *c, const struct baton_graph *g, uint32_t *id)
{
    size_t len = 0;
    if (c->dead)
        return untracked(c, BATON_E_IO);
    int rc = encode_graph(c, g, &len);
    if (rc != 0)
        return untracked(c, rc);
    struct pending e = {.cmd = BATON_CMD_GRAPH_REGISTER, .graph_id = id};
    return submit(c, &e, c->enc, len, NULL, 0);
}

int baton_graph_register(struct baton_conn *c, const struct baton_graph *g, uint32_t *id)
{
    return finish_sync(c, baton_submit_graph_register(c, g, id));
}

int baton_submit_graph_run(struct baton_conn *c, const struct baton_graph_run *run)
{
    uint8_t p[BATON_RUN_HEADER_BYTES + BATON_MAX_RUN_FENCES * BATON_RUN_FENCE_BYTES +
              BATON_MAX_RUN_INPUTS * BATON_RUN_INPUT_BYTES + BATON_RUN_HANDOFF_BYTES +
              BATON_RUN_RETURN_BYTES];
    struct baton_run_header h = {.graph = run->graph, .flags = run->flags,
                                 .n_fences = run->n_fences, .n_inputs = run->n_inputs};
    size_t len = BATON_RUN_HEADER_BYTES;
    if (run->n_fences > BATON_MAX_RUN_FENCES || run->n_inputs > BATON_MAX_RUN_INPUTS ||
        run->flags > BATON_RUN_FLAGS_ALL)
        return untracked(c, BATON_E_LIMIT);
    if ((run->flags & BATON_RUN_RETURN) &&
        run->ret_bytes > BATON_MAX_MESSAGE_BYTES - BATON_COPY_RESULT_BYTES)
        return untracked(c, BATON_E_LIMIT); /* no reply could carry it */
    baton_wire_encode_run_header(p, &h);
    for (uint32_t i = 0; i < run->n_fences; i++, len += BATON_RUN_FENCE_BYTES)
        baton_wire_encode_run_fence(p + len, &run->fences[i]);
    for (uint32_t i = 0; i < run->n_inputs; i++, len += BATON_RUN_INPUT_BYTES)
        baton_wire_encode_run_input(p + len, &run->inputs[i]);
    if (run->flags & BATON_RUN_HANDOFF) {
        baton_wire_encode_run_handoff(p + len, &run->handoff);
        len += BATON_RUN_HANDOFF_BYTES;
    }
    if (run->flags & BATON_RUN_RETURN) {
        baton_wire_encode_run_return(p + len, &run->ret);
        len += BATON_RUN_RETURN_BYTES;
    }
    struct pending e = {.cmd = BATON_CMD_GRAPH_RUN,
                        .copy = (run->flags & BATON_RUN_HANDOFF) ? run->handoff_result : NULL,
                        .get_dst = (run->flags & BATON_RUN_RETURN) ? run->ret_dst : NULL,
                        .get_n = (run->flags & BATON_RUN_RETURN) ? run->ret_bytes : 0};
    if ((run->flags & BATON_RUN_HANDOFF) && !run->handoff_result)
        return untracked(c, BATON_E_INVAL);
    return submit(c, &e, p, len, NULL, 0);
}

int baton_copy_route(struct baton_conn *c, const struct baton_tensor_desc *t,
                     const struct baton_peer_dest *dest, uint32_t *id)
{
    uint8_t p[BATON_COPY_ROUTE_BYTES];
    baton_wire_encode_tensor(p, t);
    baton_wire_encode_peer_dest(p + BATON_TENSOR_DESC_BYTES, dest);
    struct pending e = {.cmd = BATON_CMD_COPY_ROUTE, .graph_id = id};
    return roundtrip(c, &e, p, sizeof p, NULL, 0);
}

int baton_graph_run(struct baton_conn *c, const struct baton_graph_run *run)
{
    return finish_sync(c, baton_submit_graph_run(c, run));
}

int baton_graph_free(struct baton_conn *c, uint32_t id)
{
    uint8_t p[BATON_GRAPH_ID_BYTES];
    baton_wire_encode_graph_id(p, id);
    struct pending e = {.cmd = BATON_CMD_GRAPH_FREE};
    return roundtrip(c, &e, p, sizeof p, NULL, 0);
}

int baton_tensor_init(struct baton_tensor_desc *t, uint64_t buffer, uint64_t offset, uint32_t type,
                      uint64_t ne0, uint64_t ne1, uint64_t ne2, uint64_t ne3)
{
    memset(t, 0, sizeof *t);
    t->buffer = buffer;
    t->offset = offset;
    t->type = type;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->ne[2] = ne2;
    t->ne[3] = ne3;
    int rc = baton_tensor_contiguous_nb(type, t->ne, t->nb);
    if (rc == 0)
        rc = baton_wire_tensor_extent(type, t->ne, t->nb, &t->nbytes);
    return rc;
}
