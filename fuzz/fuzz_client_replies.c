/* Fuzz target client_replies: a malicious server against libbaton.
 *
 * Input:
 *   byte 0          bits 0-3: number of call bytes - 1 (1..16);
 *                   bit 4: keyed mode (below), bit 5: keyed, the client
 *                   connects in the peer role, bit 6: keyed, the server's
 *                   AUTH proof has a flipped bit; bit 7: after the
 *                   handshake the server's end is closed, so every
 *                   request's send fails (EPIPE) and the client reads a
 *                   frame already there as the refusal (client.c
 *                   refusal_status)
 *   next n bytes    the calls: low nibble = which call, high nibble = its
 *                   parameter (sizes, handle slot, pipeline depth); calls
 *                   12..15 also take the next call byte as their argument
 *                   (counted in n; 0 when none is left)
 *   the rest        everything "the server" sends, starting with its HELLO
 *                   reply (at most STREAM_MAX bytes are used). Keyed mode:
 *                   the HELLO reply frame (72 bytes) as is, then the
 *                   harness's AUTH reply (the real responder proof), then
 *                   records `u8 ctl, 24-byte header, payload` up to the
 *                   header's length (or the end of the input): the harness
 *                   appends the frame's tag made with the server-to-client
 *                   session key (and encrypts the payload when the HELLO
 *                   reply has BATON_FEATURE_ENCRYPT); ctl bit 7 then flips
 *                   one byte of the tagged frame: k = ctl & 127, byte k when
 *                   k < 64, else byte k - 64 counted from the frame's end.
 *                   A record cut by the end of the input has no tag.
 *
 * The calls (p = high nibble; a = argument byte of 12..15):
 *    0 DEVICE_INFO            1 ALLOC 64 << p          2 FREE      3 CLEAR
 *    4 SET (small tensor p)   5 GET into an exact heap block
 *    6 COPY                   7 GRAPH_COMPUTE (one SCALE node)
 *    8 GRAPH_COMPUTE pipelined with a GET of its result, then wait
 *    9 (p % 4) + 1 pipelined GETs and a SET, then wait
 *   10 baton_conn_wait       11 baton_conn_stats(p)
 *   12 registered graphs, a & 3: 0 baton_graph_register, 1 its submit (no
 *      wait; ((a >> 2) & 3) + 1 of them, or 65 when that is 3: the last
 *      finds 64 outstanding and reads them first), 2 baton_graph_free (id
 *      number (a >> 2) & 3 of those the replies gave, else the raw id
 *      a >> 4), 3 baton_copy_route (IPv6 when a & 4); handle / tensor
 *      from a >> 4
 *   13 GRAPH_RUN: a bit 0 submit only (no wait), bit 1 HANDOFF, bit 2
 *      RETURN (ret_bytes 4 << 2 * ((a >> 4) & 3) into an exact heap block),
 *      bit 3 RESET, bits 6-7: no fences or inputs / 1 fence and 1 input /
 *      4 and 4 / an invalid request refused locally (HANDOFF without its
 *      result pointer: E_INVAL, else 5 fences: E_LIMIT)
 *   14 direct path, a & 7: 0 baton_copy_tensor_to (seq 1 + (a >> 4), ASYNC
 *      when a & 8), 1 its submit (no wait), 2 the counters query (family 0,
 *      n 0, no options), 3 baton_peer_fence, 4 baton_submit_peer_write,
 *      5 baton_peer_write, 6 baton_grant_write, 7 baton_revoke_grant
 *   15 tracking, a & 3: 0 baton_conn_track into slot (a >> 2) & 7,
 *      1 baton_conn_read_reply, 2 baton_conn_track(NULL) (and
 *      baton_conn_fd is the socket), 3 baton_conn_read_reply
 *      ((a >> 2) & 7) + 1 times
 *
 * The server bytes are written into one end of an AF_UNIX socketpair, which
 * is then shut down for writing (EOF after them); libbaton adopts the other
 * end (baton_conn_adopt_fd_ex, with the key in keyed mode) and performs
 * HELLO (and AUTH) and the calls, in order, on the calling thread. Nothing
 * answers the client's requests: the harness reads and drops them after
 * each call. The client's sequence numbers are 1, 2, ... (HELLO 1, keyed
 * AUTH 2, then one per request), which the seeds in
 * fuzz/corpus/client_replies follow. libsodium's random source is a
 * counter restarted per input (as in fuzz_dispatcher.c), so the client's
 * HELLO nonce, and with it the keyed transcript, the proofs and the session
 * keys, are known in advance.
 *
 * The reply decoders on their own (baton_wire_decode_device_info at every
 * cursor, with its round trip) run over the raw bytes first.
 *
 * A reference model of the client, written from client.h and PROTOCOL.md,
 * runs beside it: the outstanding requests in order, the sequence numbers,
 * the first untracked error, the armed tracking slot, the dead flag and the
 * stream position. For each reply the client reads it decides the status
 * from the frame (header decode, cmd/seq match, error frames of at most 4096
 * bytes, the exact OK payload length of each command, the payload checks:
 * DEVICE_INFO reserved 0, ALLOC echoes the size, grant id not 0, id record
 * id != 0 and reserved 0, copy result outcome < 10, status <= 65535,
 * reserved 0; keyed: the tag verifies exactly for an unaltered complete
 * record read at its own place) and which statuses are fatal.
 *
 * Properties, after every call: no memory error (GET and RETURN
 * destinations are exact-size heap blocks); the call returns exactly the
 * model's status, which is 0 or a negative status of enum baton_status;
 * baton_conn_is_dead, baton_conn_outstanding, the bytes the client has read
 * from the socket (FIONREAD) and the per-command request counters and bytes
 * equal the model's; every tracking slot is BATON_REPLY_PENDING until its
 * reply is read, then that reply's status (what baton_conn_read_reply
 * returned for it), and is never written otherwise; a successful reply's
 * outputs equal its payload bytes (device info, handle, GET bytes, grant
 * id, copy result, graph / route id, the returned leaf's bytes); a
 * destination the model never let the reply reach still holds its canary
 * bytes; once the connection is dead it stays dead and every later call
 * fails; a keyed handshake with the harness's real proof succeeds.
 *
 * Three deviations this harness found in src/client/client.c are fixed
 * there and held here (seeds of gen_corpus.c replay each):
 *   K1 an untagged framing-error frame's status goes through
 *      server_status, so the caller sees a value of enum baton_status;
 *   K2 a submit that fails before its request is sent (refused locally, or
 *      on a dead connection) puts its status in the slot armed by
 *      baton_conn_track, and the arm goes with it;
 *   K3 a request whose send fails leaves its slot holding what the call
 *      returned (an OK frame taken as its refusal is BATON_E_IO in both).
 * FUZZ_TRACE=1 prints each call, its status and the model's replies.
 */
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sodium.h>

#include "fuzz_common.h"
#include "fuzz_keys.h"
#include "fuzz_random.h"

#include "auth/auth.h"
#include "baton/client.h"
#include "baton/status.h"
#include "wire/wire.h"

#define STREAM_MAX (32u * 1024u)
#define TIMEOUT_MS 2000
#define MAX_HANDLES 4
#define MAX_IDS 4
#define N_SLOTS 8
#define MAX_REQS 640 /* 8 calls of 65 submits, and the rest */
#define RING 64u         /* BATON_CLIENT_MAX_PENDING: client.h "at most 64 outstanding" */
#define MAX_RECORDS 128
#define MAX_ERROR_PAYLOAD 4096u /* client.h: error replies carry no payload */
#define CANARY 0xA5

#define MODE_KEYED 0x10u
#define MODE_PEER 0x20u
#define MODE_BAD_PROOF 0x40u
#define MODE_CLOSED 0x80u

#define HELLO_FRAME (BATON_FRAME_HEADER_BYTES + BATON_HELLO_BYTES)
#define AUTH_FRAME (BATON_FRAME_HEADER_BYTES + BATON_PROOF_BYTES)
#define STREAM_CAP (STREAM_MAX + AUTH_FRAME + MAX_RECORDS * BATON_TAG_BYTES)

static int trace;
static struct baton_key *key;

/* ---- deterministic randomness and the key (once per process) ---- */

/* Before libsodium starts (randombytes_set_implementation must come first):
 * the deterministic random source, then one key (the client's and the
 * server's: both ends of a keyed connection hold it), made with the
 * library's generator in a private temporary directory and removed at
 * once. */
static void harness_init(void)
{
    static int done;
    char dir[256];
    if (done)
        return;
    done = 1;
    trace = getenv("FUZZ_TRACE") != NULL;
    fuzz_keys_begin("fuzz_client_replies", dir, sizeof dir);
    key = fuzz_new_key("fuzz_client_replies", dir, "k");
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    harness_init();
    return 0;
}

/* ---- the device-info decoder alone ---- */

static void check_device_info(const uint8_t *buf, size_t size, size_t at)
{
    struct baton_device_info d;
    size_t pos = at;
    int rc = baton_wire_decode_device_info(buf, size, &pos, &d);
    if (at > size || size - at < BATON_DEVICE_INFO_BYTES) {
        FUZZ_CHECK(rc == BATON_E_TRUNCATED && pos == at, "short device info: %d", rc);
        return;
    }
    const uint8_t *p = buf + at;
    int reserved_zero = fuzz_le(p + 88, 8) == 0;
    FUZZ_CHECK(reserved_zero ? rc == 0 : rc == BATON_E_INVAL, "device info rc %d", rc);
    if (rc != 0) {
        FUZZ_CHECK(pos == at, "cursor moved on failure");
        return;
    }
    FUZZ_CHECK(pos == at + BATON_DEVICE_INFO_BYTES, "cursor");
    FUZZ_CHECK(d.name[32] == 0 && d.total_memory == fuzz_le(p, 8) &&
                   d.op_mask == fuzz_le(p + 40, 8) && d.version == fuzz_le(p + 52, 4),
               "device info fields");
    /* the encoder writes the name up to its first NUL: the round trip is
     * exact when nothing follows that NUL */
    size_t nl = strnlen((const char *)p + 56, 32);
    int clean = 1;
    for (size_t i = nl; i < 32; i++)
        clean &= p[56 + i] == 0;
    if (clean) {
        uint8_t enc[BATON_DEVICE_INFO_BYTES];
        baton_wire_encode_device_info(enc, &d);
        FUZZ_CHECK(memcmp(enc, p, sizeof enc) == 0, "device info encode(decode(x)) != x");
    }
}

/* ---- state ---- */

/* One request the client sent (or tried to), with the storage its reply's
 * outputs go to: it never moves, so pointers into it stay valid until the
 * input ends. */
struct req {
    uint8_t cmd;
    uint32_t seq;
    int slot;            /* tracking slot of its reply, -1 none */
    uint64_t want;       /* OK payload length */
    uint64_t alloc_size; /* ALLOC_BUFFER */
    int handoff;         /* GRAPH_RUN: the 48-byte result comes first */
    uint8_t *dst;        /* GET_TENSOR / GRAPH_RUN RETURN: exact heap block */
    uint64_t dst_n;
    int dst_reached;     /* the model let the reply's payload reach dst */
    int is_route;        /* COPY_ROUTE (else GRAPH_REGISTER) for the id */
    uint64_t handle;
    uint32_t id;
    uint8_t grant[BATON_GRANT_ID_BYTES];
    struct baton_copy_result copy;
    struct baton_device_info info;
};

/* A keyed record as the harness sent it. */
struct record {
    size_t start; /* of its header in the stream */
    uint64_t len; /* payload bytes */
    int complete; /* header, whole payload and tag present */
    int flipped;
};

struct run {
    struct baton_conn *c;
    int fd;              /* the client's socket */
    const uint8_t *wire; /* the stream as sent */
    const uint8_t *plain;/* the same with the payloads before encryption */
    size_t len;
    int keyed, tagged;
    int closed; /* the server's end is closed: every send fails */
    struct record recs[MAX_RECORDS];
    uint32_t n_recs;

    /* the model */
    size_t pos;
    int dead;
    int first_err;
    uint32_t next_seq;
    int armed; /* slot armed by baton_conn_track, -1 none */
    uint32_t q[MAX_REQS];
    uint32_t q_head, q_tail;
    uint32_t frames_read; /* keyed: frames whose tag the client began */
    uint64_t n_sent[BATON_CMD_LIMIT], bytes_sent[BATON_CMD_LIMIT];
    int slot_model[N_SLOTS];

    /* what the calls use */
    int slots[N_SLOTS];
    struct req *reqs; /* reqs_pool, filled from 0 per input */
    uint32_t n_reqs;
    uint64_t handles[MAX_HANDLES];
    uint32_t n_handles;
    uint32_t graph_ids[MAX_IDS], route_ids[MAX_IDS];
    uint32_t n_graph_ids, n_route_ids;
    uint8_t grants[MAX_IDS][BATON_GRANT_ID_BYTES];
    uint32_t n_grants;
    size_t call; /* index of the call byte, for messages */
};

static struct run R;
static struct req reqs_pool[MAX_REQS];
static uint8_t wire_buf[STREAM_CAP], plain_buf[STREAM_CAP];

static int nameable(int st)
{
    return st <= 0 && st >= BATON_E_STATUS_MIN;
}

static struct req *new_req(struct run *r, uint8_t cmd, uint64_t want)
{
    FUZZ_CHECK(r->n_reqs < MAX_REQS, "harness: too many requests");
    struct req *q = &r->reqs[r->n_reqs++];
    memset(q, 0, sizeof *q);
    q->cmd = cmd;
    q->want = want;
    q->slot = -1;
    return q;
}

/* An exact-size destination holding canary bytes. */
static void give_dst(struct req *q, uint64_t n)
{
    q->dst = malloc((size_t)n);
    if (!q->dst)
        abort();
    memset(q->dst, CANARY, (size_t)n);
    q->dst_n = n;
}

/* ---- the model ---- */

static int m_server_status(uint64_t st)
{
    if (st == 0 || st > (uint64_t)-BATON_E_STATUS_MIN)
        return BATON_E_PROTO;
    return -(int)st;
}

/* What the client's dead path does to an I/O-like status. */
static int m_io(int rc)
{
    return rc == BATON_E_TRUNCATED ? BATON_E_IO : rc;
}

static int m_fatal(int st)
{
    return st == BATON_E_MAGIC || st == BATON_E_CMD || st == BATON_E_PROTO ||
           st == BATON_E_VERSION || st == BATON_E_TRUNCATED || st == BATON_E_TIMEOUT ||
           st == BATON_E_AUTH || st == BATON_E_IO;
}

/* The connection dies: outstanding replies are dropped (their slots keep
 * BATON_REPLY_PENDING). */
static int m_dead(struct run *r, int rc)
{
    r->dead = 1;
    r->q_head = r->q_tail;
    return rc;
}

static int m_copy_ok(const uint8_t *p)
{
    return fuzz_le(p, 4) < BATON_COPY_OUTCOME_LIMIT && fuzz_le(p + 4, 4) <= 65535 &&
           fuzz_le(p + 40, 8) == 0;
}

/* The payload checks of an OK reply (PROTOCOL.md, wire.h). */
static int m_payload_ok(const struct req *q, const uint8_t *p)
{
    switch (q->cmd) {
    case BATON_CMD_DEVICE_INFO:
        return fuzz_le(p + 88, 8) == 0;
    case BATON_CMD_ALLOC_BUFFER:
        return fuzz_le(p + 8, 8) == q->alloc_size;
    case BATON_CMD_GRANT_WRITE:
        for (unsigned i = 0; i < BATON_GRANT_ID_BYTES; i++)
            if (p[i])
                return 1;
        return 0;
    case BATON_CMD_COPY_TENSOR_TO:
        return m_copy_ok(p);
    case BATON_CMD_GRAPH_REGISTER:
    case BATON_CMD_COPY_ROUTE:
        return fuzz_le(p, 4) != 0 && fuzz_le(p + 4, 4) == 0;
    case BATON_CMD_GRAPH_RUN:
        return !q->handoff || m_copy_ok(p);
    default:
        return 1;
    }
}

static void check_copy(const struct baton_copy_result *c, const uint8_t *p)
{
    FUZZ_CHECK(c->result == fuzz_le(p, 4) && c->status == fuzz_le(p + 4, 4) &&
                   c->peer_bytes_sent == fuzz_le(p + 8, 8) &&
                   c->peer_bytes_received == fuzz_le(p + 16, 8) &&
                   c->copies_done == fuzz_le(p + 24, 8) &&
                   c->copies_not_done == fuzz_le(p + 32, 8),
               "copy result != its reply bytes (call %zu)", R.call);
}

/* An OK reply: the client's outputs equal the payload; the ids and handles
 * it gave are kept for later calls. */
static void m_outputs(struct run *r, struct req *q, const uint8_t *p)
{
    switch (q->cmd) {
    case BATON_CMD_DEVICE_INFO: {
        const struct baton_device_info *d = &q->info;
        FUZZ_CHECK(d->name[32] == 0 && strncmp(d->name, (const char *)p + 56, 32) == 0 &&
                       d->total_memory == fuzz_le(p, 8) && d->free_memory == fuzz_le(p + 8, 8) &&
                       d->alignment == fuzz_le(p + 16, 8) &&
                       d->max_buffer_bytes == fuzz_le(p + 24, 8) &&
                       d->type_mask == fuzz_le(p + 32, 8) && d->op_mask == fuzz_le(p + 40, 8) &&
                       d->n_threads == fuzz_le(p + 48, 4) && d->version == fuzz_le(p + 52, 4),
                   "device info != its reply bytes (call %zu)", r->call);
        break;
    }
    case BATON_CMD_ALLOC_BUFFER:
        FUZZ_CHECK(q->handle == fuzz_le(p, 8), "handle != its reply bytes (call %zu)", r->call);
        if (r->n_handles < MAX_HANDLES)
            r->handles[r->n_handles++] = q->handle;
        break;
    case BATON_CMD_GET_TENSOR:
        FUZZ_CHECK(memcmp(q->dst, p, (size_t)q->dst_n) == 0,
                   "GET bytes != its reply bytes (call %zu)", r->call);
        break;
    case BATON_CMD_GRANT_WRITE:
        FUZZ_CHECK(memcmp(q->grant, p, BATON_GRANT_ID_BYTES) == 0,
                   "grant id != its reply bytes (call %zu)", r->call);
        if (r->n_grants < MAX_IDS)
            memcpy(r->grants[r->n_grants++], q->grant, BATON_GRANT_ID_BYTES);
        break;
    case BATON_CMD_COPY_TENSOR_TO:
        check_copy(&q->copy, p);
        break;
    case BATON_CMD_GRAPH_REGISTER:
    case BATON_CMD_COPY_ROUTE:
        FUZZ_CHECK(q->id == fuzz_le(p, 4) && q->id != 0, "id %u != its reply bytes (call %zu)",
                   q->id, r->call);
        if (q->is_route && r->n_route_ids < MAX_IDS)
            r->route_ids[r->n_route_ids++] = q->id;
        if (!q->is_route && r->n_graph_ids < MAX_IDS)
            r->graph_ids[r->n_graph_ids++] = q->id;
        break;
    case BATON_CMD_GRAPH_RUN:
        if (q->handoff)
            check_copy(&q->copy, p);
        if (q->dst)
            FUZZ_CHECK(memcmp(q->dst, p + (q->handoff ? BATON_COPY_RESULT_BYTES : 0),
                              (size_t)q->dst_n) == 0,
                       "returned leaf != its reply bytes (call %zu)", r->call);
        break;
    default:
        break;
    }
}

/* Keyed: the tag of a frame whose header is at start with payload len
 * verifies exactly when it is record j, whole and unaltered. */
static int m_tag_ok(const struct run *r, uint32_t j, size_t start, uint64_t len)
{
    return j < r->n_recs && r->recs[j].start == start && r->recs[j].len == len &&
           r->recs[j].complete && !r->recs[j].flipped;
}

/* The client reads the reply to q at r->pos: its status. */
static int m_reply(struct run *r, struct req *q)
{
    size_t start = r->pos;
    const uint8_t *w = r->wire + start;
    struct baton_frame_header h;
    size_t hp = 0;
    uint64_t tag = r->tagged ? BATON_TAG_BYTES : 0;

    if (r->len - start < BATON_FRAME_HEADER_BYTES) {
        r->pos = r->len;
        return m_dead(r, BATON_E_IO);
    }
    r->pos += BATON_FRAME_HEADER_BYTES;
    /* the header decoder is proven (and fuzzed in wire_header) */
    int hrc = baton_wire_decode_header(w, BATON_FRAME_HEADER_BYTES, &hp, BATON_MAX_MESSAGE_BYTES,
                                       &h);
    if (hrc == BATON_E_CMD && !r->tagged && fuzz_le(w + 6, 2) != 0) {
        /* a framing error frame (cmd 0 or unknown): its status, then the
         * stream is given up */
        return m_dead(r, m_io(m_server_status(fuzz_le(w + 6, 2))));
    }
    if (hrc != 0)
        return m_dead(r, BATON_E_PROTO);
    if (h.cmd != q->cmd || h.seq != q->seq)
        return m_dead(r, m_io(h.status != 0 && !r->tagged ? m_server_status(h.status)
                                                           : BATON_E_PROTO));
    uint32_t j = r->frames_read;
    if (r->tagged)
        r->frames_read++;
    if (h.status != 0) {
        int st = m_server_status(h.status);
        if (h.len > MAX_ERROR_PAYLOAD)
            return m_dead(r, BATON_E_PROTO);
        if (r->len - r->pos < h.len + tag) {
            r->pos = r->len;
            return m_dead(r, BATON_E_IO);
        }
        r->pos += h.len + tag;
        if (r->tagged && !m_tag_ok(r, j, start, h.len))
            return m_dead(r, BATON_E_AUTH);
        if (m_fatal(st))
            m_dead(r, st);
        return st;
    }
    if (h.len != q->want)
        return m_dead(r, BATON_E_PROTO);
    if (q->dst)
        q->dst_reached = 1;
    if (r->len - r->pos < h.len + tag) {
        r->pos = r->len;
        return m_dead(r, BATON_E_IO);
    }
    const uint8_t *p = r->plain + r->pos;
    r->pos += h.len + tag;
    if (r->tagged && !m_tag_ok(r, j, start, h.len))
        return m_dead(r, BATON_E_AUTH);
    if (!m_payload_ok(q, p))
        return m_dead(r, BATON_E_PROTO);
    m_outputs(r, q, p);
    return 0;
}

/* Reads the oldest outstanding reply; its status goes to its slot. */
static int m_read_one(struct run *r, int *tracked)
{
    struct req *q = &r->reqs[r->q[r->q_head++]];
    int st = m_reply(r, q);
    if (trace)
        fprintf(stderr, "  model: reply to %s seq %u -> %d (%s)%s\n", baton_cmd_name(q->cmd),
                q->seq, st, baton_status_name(st), r->dead ? ", dead" : "");
    if (q->slot >= 0)
        r->slot_model[q->slot] = st;
    *tracked = q->slot >= 0;
    return st;
}

static void m_drain(struct run *r)
{
    while (r->q_head != r->q_tail) {
        int tracked;
        int st = m_read_one(r, &tracked);
        if (st != 0 && !tracked && r->first_err == 0)
            r->first_err = st;
    }
}

static int m_wait(struct run *r)
{
    m_drain(r);
    int rc = r->first_err;
    r->first_err = 0;
    if (rc == 0 && r->dead)
        rc = BATON_E_IO;
    return rc;
}

/* A submit that returns without sending: the armed slot gets its status
 * and the arm goes with it. */
static int m_refused_locally(struct run *r, int rc)
{
    if (r->armed >= 0)
        r->slot_model[r->armed] = rc;
    r->armed = -1;
    return rc;
}

/* A request that reaches the client's submit(): it takes the armed slot,
 * then is sent unless the connection is dead. */
static int m_submit(struct run *r, struct req *q, uint64_t payload)
{
    if (r->dead)
        return m_refused_locally(r, BATON_E_IO);
    if (r->q_tail - r->q_head == RING) {
        /* a full ring is drained first; a first error kept there is
         * returned now (and forgotten) when the drain killed the
         * connection */
        m_drain(r);
        if (r->dead) {
            int rc = r->first_err ? r->first_err : BATON_E_IO;
            r->first_err = 0;
            return m_refused_locally(r, rc);
        }
    }
    int slot = r->armed;
    r->armed = -1;
    q->seq = r->next_seq++;
    q->slot = slot;
    r->n_sent[q->cmd]++;
    r->bytes_sent[q->cmd] += BATON_FRAME_HEADER_BYTES + payload + (r->tagged ? BATON_TAG_BYTES : 0);
    r->q[r->q_tail++] = (uint32_t)(q - r->reqs);
    if (!r->closed)
        return 0;
    /* the send fails (EPIPE). With nothing else outstanding the client
     * takes a frame that has already arrived as the refusal of this
     * request (client.c refusal_status: a server that refuses a frame by
     * its header answers and closes); an OK frame cannot answer it. */
    r->q_tail--;
    int rc = BATON_E_IO;
    if (r->q_tail == r->q_head && r->pos < r->len) {
        int tracked;
        r->q_tail++;
        int st = m_read_one(r, &tracked);
        rc = st != 0 ? st : BATON_E_IO;
    }
    if (slot >= 0)
        r->slot_model[slot] = rc; /* the slot says what the call says */
    return m_dead(r, rc);
}

/* baton_submit_graph_compute / _graph_register: dead is refused before
 * submit(). */
static int m_submit_graph(struct run *r, struct req *q, uint64_t payload)
{
    if (r->dead)
        return m_refused_locally(r, BATON_E_IO);
    return m_submit(r, q, payload);
}

/* A synchronous call: submit, then wait; a failed submit forgets the first
 * error kept. */
static int m_sync_rc(struct run *r, int rc)
{
    if (rc != 0) {
        r->first_err = 0;
        return rc;
    }
    return m_wait(r);
}

static int m_sync(struct run *r, struct req *q, uint64_t payload)
{
    return m_sync_rc(r, m_submit(r, q, payload));
}

static int m_read_reply(struct run *r)
{
    if (r->q_head == r->q_tail)
        return r->dead ? BATON_E_IO : BATON_E_PROTO;
    int tracked;
    int st = m_read_one(r, &tracked);
    if (st != 0 && !tracked && r->first_err == 0)
        r->first_err = st;
    return st;
}

/* HELLO (and keyed AUTH): adopt's status. */
static int m_handshake(struct run *r, int proof_ok)
{
    const uint8_t *w = r->wire;
    struct baton_frame_header h;
    size_t hp = 0;

    if (r->len < BATON_FRAME_HEADER_BYTES)
        return BATON_E_IO;
    int hrc = baton_wire_decode_header(w, BATON_FRAME_HEADER_BYTES, &hp, BATON_MAX_MESSAGE_BYTES,
                                       &h);
    if (hrc == BATON_E_CMD && fuzz_le(w + 6, 2) != 0)
        return m_server_status(fuzz_le(w + 6, 2));
    if (hrc != 0)
        return BATON_E_PROTO;
    if (h.cmd != BATON_CMD_HELLO || h.seq != 1 || h.status != 0)
        return h.status != 0 ? m_server_status(h.status) : BATON_E_PROTO;
    if (h.len != BATON_HELLO_BYTES)
        return BATON_E_PROTO;
    if (r->len < HELLO_FRAME)
        return BATON_E_IO;
    const uint8_t *p = w + BATON_FRAME_HEADER_BYTES;
    uint64_t vmin = fuzz_le(p, 2), vmax = fuzz_le(p + 2, 2), features = fuzz_le(p + 8, 8);
    if (p[5] || p[6] || p[7] || vmin > vmax || p[4] > BATON_ROLE_PEER)
        return BATON_E_PROTO; /* the HELLO decoder refuses it */
    if (p[4] != BATON_ROLE_SERVER || vmin != vmax || vmin != BATON_PROTOCOL_VERSION)
        return BATON_E_PROTO;
    if (((features & BATON_FEATURE_AUTH) != 0) != r->keyed)
        return BATON_E_AUTH;
    r->n_sent[BATON_CMD_HELLO] = 1;
    r->bytes_sent[BATON_CMD_HELLO] = HELLO_FRAME;
    r->next_seq = 2;
    r->pos = HELLO_FRAME;
    if (!r->keyed)
        return 0;
    if (!proof_ok)
        return BATON_E_AUTH;
    r->n_sent[BATON_CMD_AUTH] = 1;
    r->bytes_sent[BATON_CMD_AUTH] = AUTH_FRAME;
    r->next_seq = 3;
    r->pos = HELLO_FRAME + AUTH_FRAME;
    r->tagged = 1;
    return 0;
}

/* ---- the stream ---- */

static void put2(size_t *n, const void *w, const void *p, size_t k)
{
    memcpy(wire_buf + *n, w, k);
    memcpy(plain_buf + *n, p, k);
    *n += k;
}

/* Keyed mode: the server's HELLO frame as given, the AUTH reply with the
 * real responder proof over the client's HELLO (known: its nonce is the
 * first random output of the input) and that frame, then the records with
 * their tags. */
static size_t build_keyed(struct run *r, const uint8_t *in, size_t n, uint8_t role, int bad_proof)
{
    size_t out = 0;
    size_t k = n < HELLO_FRAME ? n : HELLO_FRAME;
    put2(&out, in, in, k);
    if (n < HELLO_FRAME)
        return out;

    /* the client's HELLO frame, byte for byte */
    uint8_t creq[HELLO_FRAME];
    struct baton_hello ch;
    memset(&ch, 0, sizeof ch);
    ch.version_min = ch.version_max = BATON_PROTOCOL_VERSION;
    ch.role = role;
    ch.features = BATON_FEATURE_AUTH;
    fuzz_random_counter = 0;
    baton_hs_nonce(ch.nonce);
    fuzz_random_counter = 0; /* the client draws it again */
    struct baton_frame_header rq = {
        .cmd = BATON_CMD_HELLO, .seq = 1, .len = BATON_HELLO_BYTES};
    baton_wire_encode_header(creq, &rq);
    baton_wire_encode_hello(creq + BATON_FRAME_HEADER_BYTES, &ch);

    struct baton_hs hi, hr;
    struct baton_frame_key send, recv;
    uint8_t mac_i[BATON_PROOF_BYTES], auth[AUTH_FRAME];
    memset(&hi, 0, sizeof hi);
    memset(&hr, 0, sizeof hr);
    if (baton_hs_init(&hi, role, baton_key_bytes(key)) != 0 ||
        baton_hs_transcript_add(&hi, creq, sizeof creq) != 0 ||
        baton_hs_transcript_add(&hi, in, HELLO_FRAME) != 0 ||
        baton_hs_initiator_proof(&hi, mac_i) != 0 ||
        baton_hs_init(&hr, role, baton_key_bytes(key)) != 0 ||
        baton_hs_transcript_add(&hr, creq, sizeof creq) != 0 ||
        baton_hs_transcript_add(&hr, in, HELLO_FRAME) != 0 ||
        baton_hs_verify_initiator(&hr, mac_i) != 0 ||
        baton_hs_responder_proof(&hr, auth + BATON_FRAME_HEADER_BYTES) != 0 ||
        baton_hs_session_keys(&hr, &send, &recv) != 0)
        abort();
    baton_hs_destroy(&hi);
    baton_hs_destroy(&hr);
    struct baton_frame_header ah = {.cmd = BATON_CMD_AUTH, .seq = 2, .len = BATON_PROOF_BYTES};
    baton_wire_encode_header(auth, &ah);
    if (bad_proof)
        auth[BATON_FRAME_HEADER_BYTES] ^= 1;
    put2(&out, auth, auth, sizeof auth);

    int encrypt = (fuzz_le(in + BATON_FRAME_HEADER_BYTES + 8, 8) & BATON_FEATURE_ENCRYPT) != 0;
    size_t at = HELLO_FRAME;
    while (at < n && r->n_recs < MAX_RECORDS) {
        uint8_t ctl = in[at++];
        struct record *rec = &r->recs[r->n_recs++];
        rec->start = out;
        if (n - at < BATON_FRAME_HEADER_BYTES) {
            put2(&out, in + at, in + at, n - at);
            break;
        }
        const uint8_t *hb = in + at;
        uint64_t len = fuzz_le(hb + 16, 8);
        at += BATON_FRAME_HEADER_BYTES;
        size_t take = len < n - at ? (size_t)len : n - at;
        rec->len = len;
        put2(&out, hb, hb, BATON_FRAME_HEADER_BYTES);
        memcpy(plain_buf + out, in + at, take);
        struct baton_mac m;
        uint64_t ctr;
        if (baton_frame_key_next(&send, &ctr) != 0)
            abort();
        if (encrypt) {
            if (baton_aead_begin(&m, &send, ctr, hb, BATON_FRAME_HEADER_BYTES) != 0 ||
                baton_aead_encrypt(&m, wire_buf + out, in + at, take) != 0)
                abort();
        } else {
            memcpy(wire_buf + out, in + at, take);
            if (baton_mac_begin(&m, &send, ctr) != 0 ||
                baton_mac_update(&m, hb, BATON_FRAME_HEADER_BYTES) != 0 ||
                baton_mac_update(&m, in + at, take) != 0)
                abort();
        }
        out += take;
        at += take;
        if (take < len) {
            baton_mac_abort(&m);
            break; /* cut by the end of the input: no tag */
        }
        if (baton_mac_final_tag(&m, wire_buf + out) != 0)
            abort();
        memcpy(plain_buf + out, wire_buf + out, BATON_TAG_BYTES);
        out += BATON_TAG_BYTES;
        rec->complete = 1;
        if (ctl & 0x80) {
            size_t total = out - rec->start;
            unsigned kk = ctl & 127u;
            size_t off = kk < 64 ? kk % total : total - 1 - (kk - 64) % total;
            wire_buf[rec->start + off] ^= 0x5a;
            rec->flipped = 1;
        }
    }
    baton_frame_key_wipe(&send);
    baton_frame_key_wipe(&recv);
    return out;
}

/* ---- the calls ---- */

/* A small F32 tensor in buffer `handle`: 16 << (p & 3) elements. */
static void small_tensor(struct baton_tensor_desc *t, uint64_t handle, unsigned p)
{
    if (baton_tensor_init(t, handle, 64u * (p >> 2), BATON_TYPE_F32, 16u << (p & 3), 1, 1, 1) != 0)
        abort();
}

static uint64_t pick_handle(const struct run *r, unsigned p)
{
    if (r->n_handles == 0 || p >= 8)
        return ((uint64_t)1 << 32) | p;
    return r->handles[p % r->n_handles];
}

/* One SCALE node from leaf 0 into leaf 1 (288 bytes on the wire). */
struct small_graph {
    struct baton_tensor_desc leaves[2];
    struct baton_graph_node node;
    struct baton_graph g;
};
#define SMALL_GRAPH_BYTES (8u + 2u * BATON_TENSOR_DESC_BYTES + 104u)

static void small_graph(struct small_graph *s, uint64_t h, unsigned p)
{
    small_tensor(&s->leaves[0], h, p);
    small_tensor(&s->leaves[1], h, p);
    s->leaves[1].offset += s->leaves[0].nbytes;
    memset(&s->node, 0, sizeof s->node);
    s->node.op = BATON_OP_SCALE;
    s->node.type = BATON_TYPE_F32;
    memcpy(s->node.ne, s->leaves[0].ne, sizeof s->node.ne);
    for (int i = 0; i < BATON_MAX_SRC; i++)
        s->node.src[i] = BATON_SRC_NONE;
    s->node.src[0] = 0;
    s->node.out_leaf = 1;
    s->node.params[0] = 0x3f800000u; /* 1.0f */
    s->g = (struct baton_graph){2, 1, s->leaves, &s->node};
}

static void peer_dest(struct baton_peer_dest *d, int v6)
{
    memset(d, 0, sizeof *d);
    d->family = v6 ? BATON_PEER_FAMILY_IPV6 : BATON_PEER_FAMILY_IPV4;
    d->port = 7340;
    if (v6)
        d->addr[15] = 1;
    else
        d->addr[0] = 127, d->addr[3] = 1;
    for (unsigned i = 0; i < BATON_GRANT_ID_BYTES; i++)
        d->grant[i] = (uint8_t)(0x77 + i);
}

static void pick_grant(const struct run *r, unsigned v, uint8_t id[BATON_GRANT_ID_BYTES])
{
    if (r->n_grants > 0) {
        memcpy(id, r->grants[v % r->n_grants], BATON_GRANT_ID_BYTES);
        return;
    }
    for (unsigned i = 0; i < BATON_GRANT_ID_BYTES; i++)
        id[i] = (uint8_t)(0x11 + i);
}

static const uint8_t payload[4096];

/* Runs call `op` (argument a for 12..15) on the client and on the model;
 * *mrc gets the model's status. Returns the client's. */
static int one_call(struct run *r, uint8_t op, uint8_t a, int *mrc)
{
    unsigned p = op >> 4;
    struct baton_tensor_desc t, t2;
    uint64_t h = pick_handle(r, p);
    struct baton_conn *c = r->c;
    struct req *q, *q2;
    int rc = 0, wrc;

    switch (op & 15) {
    case 0:
    default:
        q = new_req(r, BATON_CMD_DEVICE_INFO, BATON_DEVICE_INFO_BYTES);
        rc = baton_device_info(c, &q->info);
        *mrc = m_sync(r, q, 0);
        if (rc == 0)
            FUZZ_CHECK(memchr(q->info.name, 0, sizeof q->info.name) != NULL,
                       "device name not terminated");
        break;
    case 1:
        q = new_req(r, BATON_CMD_ALLOC_BUFFER, 16);
        q->alloc_size = 64u << p;
        rc = baton_alloc_buffer(c, q->alloc_size, &q->handle);
        *mrc = m_sync(r, q, 8);
        break;
    case 2:
        q = new_req(r, BATON_CMD_FREE_BUFFER, 0);
        rc = baton_free_buffer(c, h);
        *mrc = m_sync(r, q, 8);
        break;
    case 3:
        q = new_req(r, BATON_CMD_BUFFER_CLEAR, 0);
        rc = baton_buffer_clear(c, h, (uint8_t)p);
        *mrc = m_sync(r, q, 16);
        break;
    case 4:
        small_tensor(&t, h, p);
        q = new_req(r, BATON_CMD_SET_TENSOR, 0);
        rc = baton_set_tensor(c, &t, 0, payload, t.nbytes);
        *mrc = m_sync(r, q, BATON_TENSOR_DESC_BYTES + 16 + t.nbytes);
        break;
    case 5:
        small_tensor(&t, h, p);
        q = new_req(r, BATON_CMD_GET_TENSOR, t.nbytes);
        give_dst(q, t.nbytes);
        rc = baton_get_tensor(c, &t, 0, q->dst, t.nbytes);
        *mrc = m_sync(r, q, BATON_TENSOR_DESC_BYTES + 16);
        break;
    case 6:
        small_tensor(&t, h, p);
        small_tensor(&t2, pick_handle(r, p + 1), p);
        q = new_req(r, BATON_CMD_COPY_TENSOR, 0);
        rc = baton_copy_tensor(c, &t, &t2);
        *mrc = m_sync(r, q, 2 * BATON_TENSOR_DESC_BYTES);
        break;
    case 7:
    case 8: {
        /* with op 8 pipelined with a GET of the result */
        struct small_graph sg;
        small_graph(&sg, h, p);
        q = new_req(r, BATON_CMD_GRAPH_COMPUTE, 0);
        if ((op & 15) == 7) {
            rc = baton_graph_compute(c, &sg.g);
            *mrc = m_sync_rc(r, m_submit_graph(r, q, SMALL_GRAPH_BYTES));
            break;
        }
        q2 = new_req(r, BATON_CMD_GET_TENSOR, sg.leaves[1].nbytes);
        give_dst(q2, sg.leaves[1].nbytes);
        rc = baton_submit_graph_compute(c, &sg.g);
        if (rc == 0)
            rc = baton_submit_get_tensor(c, &sg.leaves[1], 0, q2->dst, q2->dst_n);
        wrc = baton_conn_wait(c);
        if (rc == 0)
            rc = wrc;
        *mrc = m_submit_graph(r, q, SMALL_GRAPH_BYTES);
        if (*mrc == 0)
            *mrc = m_submit(r, q2, BATON_TENSOR_DESC_BYTES + 16);
        wrc = m_wait(r);
        if (*mrc == 0)
            *mrc = wrc;
        break;
    }
    case 9: {
        /* pipeline: (p % 4) + 1 GETs, one SET, then wait for all */
        unsigned depth = p % 4 + 1, i;
        struct req *gq[4];
        for (i = 0; i < depth; i++) {
            small_tensor(&t, h, p + i);
            gq[i] = new_req(r, BATON_CMD_GET_TENSOR, t.nbytes);
            give_dst(gq[i], t.nbytes);
        }
        q = new_req(r, BATON_CMD_SET_TENSOR, 0);
        for (i = 0; i < depth && rc == 0; i++) {
            small_tensor(&t, h, p + i);
            rc = baton_submit_get_tensor(c, &t, 0, gq[i]->dst, t.nbytes);
        }
        small_tensor(&t, h, p);
        if (rc == 0)
            rc = baton_submit_set_tensor(c, &t, 0, payload, t.nbytes);
        wrc = baton_conn_wait(c);
        if (rc == 0)
            rc = wrc;
        *mrc = 0;
        for (i = 0; i < depth && *mrc == 0; i++)
            *mrc = m_submit(r, gq[i], BATON_TENSOR_DESC_BYTES + 16);
        if (*mrc == 0)
            *mrc = m_submit(r, q, BATON_TENSOR_DESC_BYTES + 16 + t.nbytes);
        wrc = m_wait(r);
        if (*mrc == 0)
            *mrc = wrc;
        break;
    }
    case 10:
        rc = baton_conn_wait(c);
        *mrc = m_wait(r);
        FUZZ_CHECK(baton_conn_outstanding(c) == 0, "replies outstanding after wait");
        break;
    case 11: {
        struct baton_cmd_stats st = baton_conn_stats(c, p);
        FUZZ_CHECK(p != 0 || (st.count == 0 && st.request_bytes == 0), "stats of cmd 0");
        *mrc = 0;
        break;
    }
    case 12: {
        /* registered graphs */
        unsigned pp = a >> 4, v = (a >> 2) & 3;
        struct small_graph sg;
        struct baton_peer_dest d;
        h = pick_handle(r, pp);
        switch (a & 3) {
        case 0:
        case 1:
            small_graph(&sg, h, pp);
            if ((a & 3) == 0) {
                q = new_req(r, BATON_CMD_GRAPH_REGISTER, BATON_GRAPH_ID_BYTES);
                rc = baton_graph_register(c, &sg.g, &q->id);
                *mrc = m_sync_rc(r, m_submit_graph(r, q, SMALL_GRAPH_BYTES));
                break;
            }
            /* v + 1 submits, or 65: the last one finds the ring full */
            *mrc = 0;
            for (unsigned i = 0; i < (v == 3 ? RING + 1 : v + 1) && rc == 0; i++) {
                q = new_req(r, BATON_CMD_GRAPH_REGISTER, BATON_GRAPH_ID_BYTES);
                rc = baton_submit_graph_register(c, &sg.g, &q->id);
                *mrc = m_submit_graph(r, q, SMALL_GRAPH_BYTES);
                FUZZ_CHECK(rc == *mrc, "submit %u of call %zu: %d, model %d", i, r->call, rc,
                           *mrc);
            }
            break;
        case 2: {
            uint32_t id = v < r->n_graph_ids ? r->graph_ids[v] : pp;
            q = new_req(r, BATON_CMD_GRAPH_FREE, 0);
            rc = baton_graph_free(c, id);
            *mrc = m_sync(r, q, BATON_GRAPH_ID_BYTES);
            break;
        }
        default:
            small_tensor(&t, h, pp);
            peer_dest(&d, (a & 4) != 0);
            q = new_req(r, BATON_CMD_COPY_ROUTE, BATON_GRAPH_ID_BYTES);
            q->is_route = 1;
            rc = baton_copy_route(c, &t, &d, &q->id);
            *mrc = m_sync(r, q, BATON_COPY_ROUTE_BYTES);
            break;
        }
        break;
    }
    case 13: {
        /* GRAPH_RUN */
        struct baton_graph_run run;
        unsigned variant = a >> 6;
        memset(&run, 0, sizeof run);
        run.graph = r->n_graph_ids ? r->graph_ids[0] : 1;
        run.flags = ((a & 2) ? BATON_RUN_HANDOFF : 0) | ((a & 4) ? BATON_RUN_RETURN : 0) |
                    ((a & 8) ? BATON_RUN_RESET : 0);
        if (variant == 1 || variant == 2) {
            unsigned k = variant == 1 ? 1 : BATON_MAX_RUN_FENCES;
            run.n_fences = run.n_inputs = k;
            for (unsigned i = 0; i < k; i++) {
                pick_grant(r, i, run.fences[i].grant);
                run.fences[i].seq = 1 + i;
                run.inputs[i] = (struct baton_run_input){i % 2, 1 + i, (int32_t)(7 * i)};
            }
        }
        q = new_req(r, BATON_CMD_GRAPH_RUN, 0);
        if (run.flags & BATON_RUN_HANDOFF) {
            run.handoff = (struct baton_run_handoff){
                r->n_route_ids ? r->route_ids[0] : 1, 0, 1, 64};
            run.handoff_result = &q->copy;
            q->handoff = 1;
            q->want += BATON_COPY_RESULT_BYTES;
        }
        if (run.flags & BATON_RUN_RETURN) {
            run.ret.leaf = 1;
            run.ret_bytes = 4u << (2 * ((a >> 4) & 3));
            give_dst(q, run.ret_bytes);
            run.ret_dst = q->dst;
            q->want += run.ret_bytes;
        }
        if (variant == 3) {
            if (run.flags & BATON_RUN_HANDOFF)
                run.handoff_result = NULL;
            else
                run.n_fences = BATON_MAX_RUN_FENCES + 1;
        }
        uint64_t len = BATON_RUN_HEADER_BYTES + BATON_RUN_FENCE_BYTES * run.n_fences +
                       BATON_RUN_INPUT_BYTES * run.n_inputs +
                       ((run.flags & BATON_RUN_HANDOFF) ? BATON_RUN_HANDOFF_BYTES : 0) +
                       ((run.flags & BATON_RUN_RETURN) ? BATON_RUN_RETURN_BYTES : 0);
        if (a & 1)
            rc = baton_submit_graph_run(c, &run);
        else
            rc = baton_graph_run(c, &run);
        if (variant == 3) {
            *mrc = m_refused_locally(r, (run.flags & BATON_RUN_HANDOFF) ? BATON_E_INVAL
                                                                          : BATON_E_LIMIT);
            if (!(a & 1))
                r->first_err = 0;
        } else if (a & 1) {
            *mrc = m_submit(r, q, len);
        } else {
            *mrc = m_sync(r, q, len);
        }
        break;
    }
    case 14: {
        /* direct path */
        unsigned pp = a >> 4;
        struct baton_peer_dest d;
        struct baton_copy_options o = {1 + pp, (a & 8) ? BATON_COPY_ASYNC : 0};
        uint8_t id[BATON_GRANT_ID_BYTES];
        h = pick_handle(r, pp);
        pick_grant(r, pp, id);
        switch (a & 7) {
        case 0:
        case 1:
        case 2:
            small_tensor(&t, h, pp);
            q = new_req(r, BATON_CMD_COPY_TENSOR_TO, BATON_COPY_RESULT_BYTES);
            if ((a & 7) == 2) {
                memset(&d, 0, sizeof d);
                rc = baton_copy_tensor_to(c, &t, 0, 0, &d, NULL, &q->copy);
                *mrc = m_sync(r, q, BATON_COPY_TO_BYTES);
            } else if ((a & 7) == 0) {
                peer_dest(&d, 0);
                rc = baton_copy_tensor_to(c, &t, 0, t.nbytes, &d, &o, &q->copy);
                *mrc = m_sync(r, q, BATON_COPY_TO_BYTES);
            } else {
                peer_dest(&d, 0);
                rc = baton_submit_copy_tensor_to(c, &t, 0, t.nbytes, &d, &o, &q->copy);
                *mrc = m_submit(r, q, BATON_COPY_TO_BYTES);
            }
            break;
        case 3:
            q = new_req(r, BATON_CMD_PEER_FENCE, 0);
            rc = baton_peer_fence(c, id, 1 + pp, (a & 8) ? (uint32_t)-BATON_E_FENCE : 1);
            *mrc = m_sync(r, q, BATON_PEER_FENCE_BYTES);
            break;
        case 4:
        case 5: {
            uint64_t n = 16u << (pp & 3);
            q = new_req(r, BATON_CMD_PEER_WRITE, 0);
            if ((a & 7) == 4) {
                rc = baton_submit_peer_write(c, id, 0, 1 + pp, payload, n);
                *mrc = m_submit(r, q, BATON_PEER_WRITE_HEADER_BYTES + n);
            } else {
                rc = baton_peer_write(c, id, 0, 1 + pp, payload, n);
                *mrc = m_sync(r, q, BATON_PEER_WRITE_HEADER_BYTES + n);
            }
            break;
        }
        case 6:
            q = new_req(r, BATON_CMD_GRANT_WRITE, BATON_GRANT_ID_BYTES);
            rc = baton_grant_write(c, h, 0, 64u << (pp & 3), q->grant);
            *mrc = m_sync(r, q, BATON_GRANT_REQUEST_BYTES);
            break;
        default:
            q = new_req(r, BATON_CMD_REVOKE_GRANT, 0);
            rc = baton_revoke_grant(c, id);
            *mrc = m_sync(r, q, BATON_GRANT_ID_BYTES);
            break;
        }
        break;
    }
    case 15: {
        /* tracking */
        unsigned v = (a >> 2) & 7;
        switch (a & 3) {
        case 0:
            baton_conn_track(c, &r->slots[v]);
            r->slot_model[v] = BATON_REPLY_PENDING;
            r->armed = (int)v;
            *mrc = 0;
            break;
        case 1:
            rc = baton_conn_read_reply(c);
            *mrc = m_read_reply(r);
            break;
        case 2:
            baton_conn_track(c, NULL);
            r->armed = -1;
            FUZZ_CHECK(baton_conn_fd(c) == r->fd, "baton_conn_fd is not the socket");
            *mrc = 0;
            break;
        default:
            for (unsigned i = 0; i <= v; i++) {
                rc = baton_conn_read_reply(c);
                *mrc = m_read_reply(r);
                FUZZ_CHECK(rc == *mrc, "read_reply %u of call %zu: %d, model %d", i, r->call, rc,
                           *mrc);
            }
            break;
        }
        break;
    }
    }
    return rc;
}

/* Whether call op (argument a) sends a request or reads replies, so that it
 * must fail on a dead connection. */
static int must_fail_dead(uint8_t op, uint8_t a)
{
    if ((op & 15) == 11)
        return 0;
    if ((op & 15) == 15)
        return (a & 3) == 1 || (a & 3) == 3;
    return 1;
}

/* Everything observable agrees with the model. */
static void check_state(struct run *r, uint8_t op, int rc, int mrc)
{
    int avail = 0;
    FUZZ_CHECK(rc == mrc, "call %zu (op 0x%02x): rc %d (%s), model %d (%s)", r->call, op, rc,
               baton_status_name(rc), mrc, baton_status_name(mrc));
    FUZZ_CHECK(nameable(rc),
               "call %zu rc %d outside enum baton_status", r->call, rc);
    FUZZ_CHECK(baton_conn_is_dead(r->c) == r->dead, "call %zu: dead %d, model %d", r->call,
               baton_conn_is_dead(r->c), r->dead);
    FUZZ_CHECK(baton_conn_outstanding(r->c) == r->q_tail - r->q_head,
               "call %zu: %u outstanding, model %u", r->call, baton_conn_outstanding(r->c),
               r->q_tail - r->q_head);
    FUZZ_CHECK(ioctl(r->fd, FIONREAD, &avail) == 0, "FIONREAD");
    FUZZ_CHECK(r->len - (size_t)avail == r->pos, "call %zu: client read %zu bytes, model %zu",
               r->call, r->len - (size_t)avail, r->pos);
    for (unsigned i = 0; i < N_SLOTS; i++)
        FUZZ_CHECK(r->slots[i] == r->slot_model[i], "call %zu: slot %u = %d, model %d", r->call,
                   i, r->slots[i], r->slot_model[i]);
    for (uint32_t cmd = 1; cmd < BATON_CMD_LIMIT; cmd++) {
        struct baton_cmd_stats st = baton_conn_stats(r->c, cmd);
        FUZZ_CHECK(st.count == r->n_sent[cmd] && st.request_bytes == r->bytes_sent[cmd],
                   "call %zu: %s sent %llu (%llu bytes), model %llu (%llu)", r->call,
                   baton_cmd_name(cmd), (unsigned long long)st.count,
                   (unsigned long long)st.request_bytes, (unsigned long long)r->n_sent[cmd],
                   (unsigned long long)r->bytes_sent[cmd]);
    }
}

/* Reads and drops what the client sent, so its requests never fill the
 * socket (a blocked send would time out). */
static void drain_requests(int fd)
{
    uint8_t sink[4096];
    while (recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0)
        ;
}

static void run_client(uint8_t mode, const uint8_t *calls, size_t n_calls, const uint8_t *in,
                       size_t n)
{
    struct run *r = &R;
    int sv[2];

    memset(r, 0, sizeof *r);
    r->reqs = reqs_pool;
    r->armed = -1;
    for (unsigned i = 0; i < N_SLOTS; i++)
        r->slots[i] = r->slot_model[i] = 0x5eed;
    r->keyed = (mode & MODE_KEYED) != 0;
    uint8_t role = (mode & MODE_PEER) ? BATON_ROLE_PEER : BATON_ROLE_CLIENT;
    size_t len;
    if (r->keyed) {
        len = build_keyed(r, in, n, role, (mode & MODE_BAD_PROOF) != 0);
    } else {
        memcpy(wire_buf, in, n);
        len = n;
    }
    r->wire = wire_buf;
    r->plain = r->keyed ? plain_buf : wire_buf;
    fuzz_random_counter = 0;

    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        abort();
    /* queue everything the server says, then EOF */
    int fl = fcntl(sv[0], F_GETFL);
    fcntl(sv[0], F_SETFL, fl | O_NONBLOCK);
    size_t off = 0;
    while (off < len) {
        ssize_t k = write(sv[0], wire_buf + off, len - off);
        if (k <= 0)
            break; /* socket buffer full: the rest is cut off */
        off += (size_t)k;
    }
    shutdown(sv[0], SHUT_WR);
    r->len = off;
    r->fd = sv[1];

    struct baton_conn_options o = {.timeout_ms = TIMEOUT_MS, .key = r->keyed ? key : NULL,
                                   .role = role};
    int rc = baton_conn_adopt_fd_ex(sv[1], &o, &r->c);
    int mrc = m_handshake(r, !(mode & MODE_BAD_PROOF));
    if (trace)
        fprintf(stderr, "adopt%s: %d (%s), model %d\n", r->keyed ? " (keyed)" : "", rc,
                baton_status_name(rc), mrc);
    FUZZ_CHECK(rc == mrc, "adopt rc %d (%s), model %d (%s)", rc, baton_status_name(rc), mrc,
               baton_status_name(mrc));
    FUZZ_CHECK(nameable(rc), "adopt rc %d", rc);
    if (rc != 0) {
        close(sv[0]);
        return;
    }
    FUZZ_CHECK(baton_conn_authenticated(r->c) == r->tagged, "authenticated");
    drain_requests(sv[0]);
    if (mode & MODE_CLOSED) {
        close(sv[0]);
        sv[0] = -1;
        r->closed = 1;
    }
    r->call = (size_t)-1;
    check_state(r, 0, 0, 0);
    for (size_t i = 0; i < n_calls; i++) {
        uint8_t op = calls[i], a = 0;
        r->call = i;
        if ((op & 15) >= 12 && i + 1 < n_calls)
            a = calls[++i];
        int was_dead = r->dead;
        rc = one_call(r, op, a, &mrc);
        if (trace)
            fprintf(stderr, "call %zu op 0x%02x a 0x%02x: %d (%s), model %d%s\n", r->call, op, a,
                    rc, baton_status_name(rc), mrc, baton_conn_is_dead(r->c) ? ", dead" : "");
        check_state(r, op, rc, mrc);
        if (sv[0] >= 0)
            drain_requests(sv[0]);
        FUZZ_CHECK(!was_dead || baton_conn_is_dead(r->c), "a dead connection came back");
        if (was_dead && must_fail_dead(op, a))
            FUZZ_CHECK(rc != 0, "call %zu on a dead connection succeeded", r->call);
    }
    baton_conn_close(r->c);
    if (sv[0] >= 0)
        close(sv[0]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    harness_init();
    uint8_t *buf = fuzz_dup(data, size);
    for (size_t at = 0; at <= size && at < 2048; at++)
        check_device_info(buf, size, at);

    if (size >= 1) {
        size_t n_calls = buf[0] % 16u + 1;
        if (n_calls > size - 1)
            n_calls = size - 1;
        const uint8_t *stream = buf + 1 + n_calls;
        size_t len = size - 1 - n_calls;
        if (len > STREAM_MAX)
            len = STREAM_MAX;
        run_client(buf[0] & 0xf0u, buf + 1, n_calls, stream, len);
        /* destinations the model never let a reply reach are untouched */
        for (uint32_t i = 0; i < R.n_reqs; i++) {
            struct req *q = &R.reqs[i];
            for (uint64_t k = 0; q->dst && !q->dst_reached && k < q->dst_n; k++)
                FUZZ_CHECK(q->dst[k] == CANARY, "a destination written without its reply");
            free(q->dst);
        }
    }
    free(buf);
    return 0;
}
