/* Fuzz target dispatcher: the whole request dispatcher of batond
 * (src/server/dispatch.c) with real server state, one input = one fresh
 * in-process server (so buffer handles are deterministic: the k-th buffer
 * ever allocated is (1 << 32) | k until one is freed and reused) serving
 * one session over a transport on the calling thread
 * (baton_server_serve_transport), and optionally a second session nested
 * inside the first, so cross-session use of handles is exercised while the
 * owner's buffers are live.
 *
 * Input, byte 0 = mode:
 *   bit 0 set: raw. The rest is the byte stream as is (the in-memory
 *              transport of src/net/transport_mem.c); framing is fuzzed.
 *   bit 0 clear: structured. The harness frames requests itself (valid
 *              headers, seq 1, 2, ...), starting with a valid client HELLO
 *              unless bit 1 is set. The rest is a list of records
 *                u8 op, u16 len (LE), len payload bytes (cut at the end):
 *              op & 15 = cmd 1..15: one request with that cmd and payload;
 *              op & 15 = 0 with op & 64: an extended request: its cmd is
 *              the payload's first byte (any value: GRAPH_REGISTER 16 ..
 *              COPY_ROUTE 19, and ids no command has), its payload the
 *              rest (an empty one is ignored); in keyed sessions op & 32
 *              flips a byte as below, the tag's, or with op & 128 the
 *              payload's last;
 *              op & 15 = 0 otherwise: a second session whose own input is
 *              the payload (structured, auto HELLO), served when the first
 *              session next waits for a frame (at most one; nested ones
 *              ignored);
 *              op & 16: the payload goes into the stream raw, unframed.
 *              Grant ids: an all-zero grant id in a GRAPH_RUN fence, a
 *              REVOKE_GRANT, a COPY_TENSOR_TO's or COPY_ROUTE's destination
 *              (client sessions), a PEER_WRITE (peer role) or a PEER_FENCE
 *              becomes the grant id of the latest GRANT_WRITE reply of this
 *              input,
 *              so a seed can name a grant it cannot know. At most 64
 *              GRAPH_RUN requests with fences are sent per input (later
 *              ones are left out): each waits for its fences.
 *   bit 2 set: keyed. The server holds a client key and a peer key (made
 *              once per process), so every connection must authenticate
 *              (docs/PROTOCOL.md "AUTH", "Frame tags"). Raw streams go to
 *              that server as they are. Structured sessions do the real
 *              handshake as the initiator: the automatic HELLO carries a
 *              nonce and the AUTH feature and is followed by an AUTH whose
 *              proof is computed (src/auth) from the transcript, i.e. the
 *              HELLO frame sent and the server's actual HELLO reply. With
 *              bit 1 set there is no automatic handshake: the first HELLO
 *              record (48 bytes, role 1 or 2) starts it with its role's
 *              key, and an AUTH record with an empty payload gets the proof
 *              (sent empty while there is none to make). Every frame
 *              after a successful AUTH carries the tag of the next client
 *              counter (baton_mac_*, the functions libbaton uses). Frames
 *              are therefore made lazily, when the server wants their first
 *              byte, from the state its replies left. In keyed sessions:
 *              op & 32 on a request: one byte of that (tagged) frame is
 *              flipped after tagging: a tag byte, or with op & 64 the last
 *              payload byte (op & 128: the first; the tag's when the
 *              payload is empty);
 *              op & 32 on a second session: it is in the peer role (HELLO
 *              role 2, the peer key), so PEER_WRITE and PEER_FENCE are
 *              served.
 *   bit 3 set (with bit 2): the server encrypts (policy encrypt = yes):
 *              request payloads are encrypted, reply payloads decrypted.
 *   Bits 4-7 are ignored.
 *
 * Randomness is deterministic inside the harness for fuzzer stability:
 * libsodium's randombytes (both HELLO nonces, grant ids, the keys) is a
 * counter through randombytes_buf_deterministic, restarted per input, so an
 * input replays to the same bytes.
 *
 * Server limits are small so no input can take long: 128 KiB of buffers
 * and scratch in all (BATON_E_QUOTA beyond), 64 KiB of scratch, 1 MiB
 * messages, 4 registered graphs and 16 grants per session, and a fence
 * timeout of 1 ms (a GRAPH_RUN fenced on a write that never comes fails at
 * once instead of waiting the default 30 s). The server's allow-list holds
 * one destination, 127.0.0.2:7341, the loopback peer: its links are
 * socketpairs served by the same server on a thread of the harness (see
 * "the loopback peer" below), so a copy to it lands in a grant of this
 * input (keyed mode; without keys the server has no peer key and cannot
 * dial). Every other destination is refused without dialling.
 *
 * Properties, for structured sessions without raw records (oracles from
 * docs/PROTOCOL.md, computed here from the requests and replies):
 *   - replies come in request order, each echoing its request's cmd and seq;
 *   - a session that ends cleanly answered every request exactly once; one
 *     that ends on an error sent that error last;
 *   - an error reply has no payload; an OK reply has the payload length its
 *     command defines (HELLO 48, AUTH 32, DEVICE_INFO 96, ALLOC 16, GET n,
 *     GRANT_WRITE 16, COPY_TENSOR_TO 48, GRAPH_REGISTER and COPY_ROUTE 8,
 *     GRAPH_RUN 48 with HANDOFF + the returned leaf's bytes with RETURN,
 *     else 0);
 *   - an OK HELLO reply offers exactly PIPELINE, and in keyed mode AUTH,
 *     PEER_COPY and (bit 3) ENCRYPT besides;
 *   - ownership: a request naming a buffer handle (FREE, CLEAR, SET, GET,
 *     COPY, GRANT_WRITE, COPY_TENSOR_TO, COPY_ROUTE, every GRAPH_COMPUTE
 *     and GRAPH_REGISTER leaf, and at GRAPH_RUN every leaf of the graph it
 *     runs) succeeds only if this session allocated that handle and has not
 *     freed it;
 *   - registered graphs: GRAPH_REGISTER returns the next id after the
 *     session's last one (skipping 0 and live ids), reserved 0, and
 *     succeeds only below 4 live graphs; GRAPH_RUN and GRAPH_FREE succeed
 *     only on a live id of this session, and a well-formed GRAPH_FREE of
 *     one always succeeds; COPY_ROUTE returns route ids 1, 2, ... (at most
 *     16) and only for a destination of family 4 or 6;
 *   - the failed-run latch: a GRAPH_RUN succeeds only if RESET is set or
 *     the session's last GRAPH_RUN (if any) succeeded;
 *   - fences: a GRAPH_RUN with fences succeeds only if each fence names a
 *     grant GRANT_WRITE returned to this session and the latest successful
 *     PEER_WRITE into that grant had the fence's seq; a PEER_WRITE or
 *     PEER_FENCE succeeds only with a seq above every seq that succeeded
 *     on its grant before (writes only move forward);
 *   - inputs: the bytes GRAPH_RUN returns of a leaf that no node writes
 *     and no other input's leaf overlaps hold, for each of its first
 *     elements, first + k of the last input that covered element k;
 *   - copies (COPY_TENSOR_TO, GRAPH_RUN's hand-off): a copy to family 4 or
 *     6 other than the loopback peer is NOT_ALLOWED with status 0, a query
 *     (family 0) result 0; one to the loopback peer is anything but
 *     NOT_ALLOWED, and a synchronous one that is DONE lies inside its grant
 *     and its bytes are there; until a copy to the loopback peer is made,
 *     nothing is ever sent or done (peer_bytes_sent and copies_done 0); bytes
 *     received equal header + 40 + n + tag of every successful PEER_WRITE
 *     into this session's grants (this and the fences' latest write are
 *     not checked once a session of the input had raw records, or a copy
 *     went to the loopback peer: those PEER_WRITEs are not seen); the
 *     copy counters are not checked after a copy to the loopback peer;
 *     copies_not_done counts every not-done copy (at least the
 *     successful ones, at most those plus every failed GRAPH_RUN that
 *     asked for a hand-off); reserved 0; a hand-off names a route this
 *     session registered;
 *   - keyed: the automatic HELLO and AUTH succeed; a PEER_WRITE or
 *     PEER_FENCE succeeds only with a grant id some GRANT_WRITE of this
 *     input returned and no REVOKE_GRANT revoked (the owner's PEER_FENCE,
 *     on a client link, only with one this session holds), a PEER_WRITE
 *     only while the grant's buffer is live; REVOKE_GRANT succeeds only
 *     on a live grant of this session, and so does a GRAPH_RUN fence;
 *   - buffers (the shadow check, "shadow buffers" below): after every
 *     reply each live buffer of the structured sessions holds exactly
 *     what the requests answered so far put there: ALLOC zeroes, SET its
 *     bytes in its tensor's range only, COPY the source's bytes in the
 *     destination's range only, CLEAR its value, a PEER_WRITE its bytes in
 *     its range of the grant only, GRAPH_COMPUTE and GRAPH_RUN anything
 *     inside their leaves only; GET's reply bytes equal the buffer's;
 *   - keyed, flipped byte: the server answers every request before that
 *     frame and then closes with BATON_E_AUTH without any reply to it or
 *     after it; except that a command the state forbids (judged from the
 *     header: HELLO, AUTH, PEER_WRITE on a client link, a
 *     client command on a peer link) gets its E_PROTO error frame, a cmd
 *     no command has gets E_CMD, and a PEER_WRITE may get the error frame
 *     of a refusal, all decided before the tag is read (docs/PROTOCOL.md
 *     "PEER_WRITE");
 * for every structured session: an AUTH succeeds only in keyed mode with
 * the harness's proof, and then the server's proof verifies; every reply
 * after it carries a tag that verifies (and decrypts); and for every input:
 * once all sessions have ended, the handle table maps no buffer and charges
 * no byte.
 *
 * FUZZ_TRACE=1 in the environment prints every reply of structured sessions
 * and every frame whose byte was flipped.
 */
#include "fuzz_common.h"
#include "fuzz_keys.h"
#include "fuzz_random.h"

#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth/auth.h"
#include "baton/status.h"
#include "net/transport.h"
#include "server/server.h"
#include "server/handles.h"
#include "server/server_internal.h"
#include "wire/wire.h"

#define MAX_OWNED 256u
#define MAX_GRANTED 64u /* >= the 2 sessions' GRANTS_PER_SESSION */
#define MAX_GRAPHS 4u   /* the server's max_graphs_per_session here */
#define GRANTS_PER_SESSION 16u
#define MAX_FENCED_RUNS 64u /* GRAPH_RUN requests with fences sent per input */
#define HEAD_BYTES 256u     /* reply payload bytes kept for the oracle */
/* randombytes calls of an input count from here: the keys, made once per
 * process, used the first few counters, and no input reuses them */
#define RANDOM_INPUT_FIRST (1ull << 32)

#define MODE_RAW 1u
#define MODE_NO_HELLO 2u
#define MODE_KEYED 4u
#define MODE_ENCRYPT 8u

#define OP_CMD 15u
#define OP_RAW 16u
#define OP_FLIP 32u        /* keyed request: flip a byte; second session: peer role */
#define OP_FLIP_BODY 64u   /* the payload's byte, not the tag's */
#define OP_FLIP_FIRST 128u /* the payload's first byte, not its last */
#define OP_EXT 64u         /* with op & 15 == 0: an extended request (cmd in the payload) */

/* struct req flags */
#define REQ_HANDSHAKE 1u /* the automatic HELLO or AUTH of a keyed session */
#define REQ_PROOF 2u     /* AUTH whose payload is the proof, made when sent */
#define REQ_FLIPPED 4u   /* a byte of this frame was flipped after tagging */

enum item_kind { ITEM_FRAME, ITEM_RAW, ITEM_CHILD };
enum phase { PH_HEADER, PH_PAYLOAD, PH_TAG };
enum hs_step { HS_NONE, HS_HELLO_SENT, HS_HELLO_SEEN, HS_PROOF_SENT, HS_READY };

struct req {
    uint8_t cmd;
    uint8_t op;    /* the record's op byte (flip bits) */
    uint8_t flags; /* REQ_* */
    uint32_t seq;
    const uint8_t *payload;              /* the payload as the oracle reads it (NULL: proof) */
    size_t len;                          /* payload bytes sent */
    /* the grant ids sent, after the harness put its grant id in: PEER_WRITE
     * and PEER_FENCE [0], GRAPH_RUN one per fence */
    uint8_t grant[BATON_MAX_RUN_FENCES][BATON_GRANT_ID_BYTES];
};

/* One piece of a structured session's stream, made when it is needed. */
struct item {
    enum item_kind kind;
    size_t req;         /* ITEM_FRAME: index into the request list */
    const uint8_t *raw; /* ITEM_RAW: the bytes */
    size_t raw_len;
};

/* The initiator's side of a keyed session: the handshake and the two
 * directions' frame keys (auth/auth.h "Wiring"). */
struct keyed {
    struct baton_hs hs;
    enum hs_step step;
    struct baton_frame_key send, recv;
};

/* A graph this session registered and has not freed: its id and the
 * GRAPH_REGISTER payload (leaves and nodes, read by the oracle). */
struct live_graph {
    uint32_t id;
    const uint8_t *payload;
    size_t len;
};

struct shadow;

/* Streaming reply parser and oracle of one session. */
struct checker {
    const struct req *reqs;
    size_t n_reqs;
    int active;      /* 0: count bytes only (raw records present) */
    struct keyed *k; /* keyed session; NULL: the server holds no key */
    int tagged;      /* replies carry tags (every reply after the AUTH reply) */
    enum phase phase;
    uint8_t hdr[BATON_FRAME_HEADER_BYTES];
    size_t hdr_have;
    uint64_t left;           /* payload bytes of the current reply still to come */
    uint8_t head[HEAD_BYTES]; /* the first payload bytes, plaintext */
    size_t head_have;
    struct baton_mac mac; /* the tag of the current reply */
    uint8_t tag[BATON_TAG_BYTES];
    size_t tag_have;
    size_t n_replies;
    uint16_t last_status;
    uint64_t owned[MAX_OWNED];
    size_t n_owned;
    int depth; /* the session's depth: 0 first, 1 the second (grant owners) */
    uint8_t role; /* the session's role (as its script's) */
    struct live_graph graphs[MAX_GRAPHS];
    uint32_t n_graphs;
    uint32_t last_graph_id; /* the latest id GRAPH_REGISTER returned */
    uint32_t n_routes;      /* COPY_ROUTE successes */
    int run_failed;         /* the latch: the session's last GRAPH_RUN failed */
    /* copies_not_done is in [not_done_min, not_done_min + not_done_maybe] */
    uint64_t not_done_min, not_done_maybe;
    uint8_t route_loop[16];                          /* route k + 1 is to the loopback peer */
    uint8_t route_grant[16][BATON_GRANT_ID_BYTES];   /* and its destination grant */
    /* the OK GET reply being read: its buffer's shadow, where its bytes
     * start in it, how many have been compared */
    struct shadow *get_sh;
    uint64_t get_at, get_pos;
};

struct script {
    struct baton_transport base; /* first: the vtable */
    uint8_t *stream;
    size_t len, cap, pos;
    struct req *reqs;
    size_t n_reqs, reqs_cap;
    struct item *items;
    size_t n_items, items_cap, next_item;
    uint32_t next_seq;
    uint8_t role;                     /* BATON_ROLE_CLIENT or _PEER: the role of the handshake */
    uint8_t hello[BATON_HELLO_BYTES]; /* the automatic HELLO's payload */
    int raw;                          /* a raw record went in: order oracles off */
    const uint8_t *child_in;
    size_t child_len, child_at;
    uint8_t child_role;
    int has_child, child_placed, child_done;
    size_t flipped; /* the first request with a flipped byte (n_reqs: none) */
    struct keyed key;
    struct checker chk;
};

static struct baton_server *server;
static int depth;
static int trace = -1; /* FUZZ_TRACE set: print every reply (debugging seeds) */
static int keyed_mode, encrypt_mode;
static struct baton_key *client_key, *peer_key;            /* for the process's lifetime */
/* This input's grants (GRANT_WRITE replies), in order: the id, its owner
 * session's depth, and what PEER_WRITE and PEER_FENCE did to it. */
static struct granted_id {
    uint8_t id[BATON_GRANT_ID_BYTES];
    int owner;           /* the depth of the session GRANT_WRITE answered */
    uint64_t landed_seq; /* seq of the latest successful PEER_WRITE (0: none) */
    uint64_t max_seq;    /* the largest seq a PEER_WRITE or PEER_FENCE succeeded with */
    int revoked;         /* a REVOKE_GRANT of it succeeded */
    int has_range;       /* handle, offset, length known (its GRANT_WRITE was seen) */
    uint64_t handle, offset, length;
    /* bytes may land in its range at times the harness does not see (a
     * loopback copy, a session with raw records): not compared until it is
     * revoked */
    int unseen;
} granted[MAX_GRANTED];
static size_t n_granted;
static uint64_t received_bytes[2]; /* PEER_WRITE bytes landed in each depth's grants */
/* A session of this input has raw records: its replies cannot be matched
 * to its requests, so what its PEER_WRITEs did to the grants is not known
 * (landed_seq and received_bytes are then not checked). */
static int events_lost;
static uint32_t n_fenced_runs;     /* GRAPH_RUN requests with fences sent in this input */
/* A copy of this input went to the loopback peer (below): the copy
 * counters and what lands in grants are no longer known exactly. */
static int peer_used;
/* The checkers of the sessions running now, by depth. */
static struct checker *checkers[2];

/* ---- the loopback peer ----
 *
 * The server's allow-list holds one destination, LOOP_ADDR:LOOP_PORT. Its
 * links are not dialled over TCP: the server's peer_connect seam gets a
 * socketpair whose other end a thread of the harness serves with the same
 * server (baton_server_serve_transport), so a COPY_TENSOR_TO to it goes
 * through peer_link.c (link, sender, handshake in the peer role with the
 * peer key, PEER_WRITE or PEER_FENCE) into a grant of this input. The
 * threads end when their link closes (at the latest when the session that
 * owns it ends) and are joined before the next input. */
#define LOOP_PORT 7341u
static const uint8_t loop_addr[16] = {127, 0, 0, 2};
#define MAX_LOOP_LINKS 64u
static pthread_mutex_t loop_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_t loop_threads[MAX_LOOP_LINKS];
static size_t n_loop_threads;

static void *loop_serve(void *arg)
{
    (void)baton_server_serve_transport(server, arg, "fuzz-loopback-peer");
    return NULL;
}

/* The server's peer_connect: a fresh socketpair, one end served by a new
 * thread, the other returned to the link. */
static int loop_connect(void *ctx, const struct baton_peer_addr *a, int timeout_ms, int *fd)
{
    int sv[2], rc = BATON_E_IO;
    struct baton_transport *t;
    (void)ctx;
    (void)timeout_ms;
    FUZZ_CHECK(a->family == BATON_PEER_FAMILY_IPV4 && a->port == LOOP_PORT &&
                   memcmp(a->addr, loop_addr, sizeof loop_addr) == 0,
               "dialled a destination that is not on the allow-list");
    pthread_mutex_lock(&loop_lock);
    if (n_loop_threads < MAX_LOOP_LINKS) {
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0 ||
            baton_transport_socket(sv[1], -1, &t) != 0 ||
            pthread_create(&loop_threads[n_loop_threads], NULL, loop_serve, t) != 0)
            abort();
        n_loop_threads++;
        *fd = sv[0];
        rc = 0;
    }
    pthread_mutex_unlock(&loop_lock);
    return rc;
}

/* Joins the loopback peers' threads (their links are closed by now). */
static void loop_join(void)
{
    pthread_mutex_lock(&loop_lock);
    size_t n = n_loop_threads;
    pthread_mutex_unlock(&loop_lock);
    for (size_t i = 0; i < n; i++)
        pthread_join(loop_threads[i], NULL);
    n_loop_threads = 0;
}

/* Whether the 48 bytes at d name the loopback peer (family 4). */
static int is_loop_dest(const uint8_t *d)
{
    return d[0] == BATON_PEER_FAMILY_IPV4 && fuzz_le(d + 2, 2) == LOOP_PORT &&
           memcmp(d + 8, loop_addr, sizeof loop_addr) == 0;
}

/* ---- shadow buffers ----
 *
 * What each live buffer of a structured session must hold, byte by byte,
 * with a mask of the bytes the harness knows. After every reply the
 * buffers are compared with their shadows: SET may change only its range
 * (to the bytes it sent), COPY only its destination, CLEAR its buffer,
 * PEER_WRITE only its range of the grant, a graph only its leaves; GET's
 * bytes must equal the shadow's. A byte is not known (not compared) while
 * a write may land in it unseen: a grant marked unseen, until it is
 * revoked. */
#define MAX_SHADOWS 64u /* >= the buffers 128 KiB of pages can hold */
static struct shadow {
    uint64_t handle, size;
    uint8_t *bytes, *known;
    int depth;
} shadows[MAX_SHADOWS];
static size_t n_shadows;

static struct shadow *shadow_find(uint64_t handle)
{
    for (size_t i = 0; i < n_shadows; i++)
        if (shadows[i].handle == handle)
            return &shadows[i];
    return NULL;
}

static void shadow_drop(struct shadow *sh)
{
    free(sh->bytes);
    free(sh->known);
    *sh = shadows[--n_shadows];
}

/* Forgets the shadows of the sessions at depth d and deeper (ended). */
static void shadow_drop_depth(int d)
{
    for (size_t i = n_shadows; i-- > 0;)
        if (shadows[i].depth >= d)
            shadow_drop(&shadows[i]);
}

/* Pins the buffer behind sh (the harness reads it from outside). */
static void shadow_pin(const struct shadow *sh, struct baton_buf_ref *ref)
{
    int rc = baton_handles_acquire_any(server->handles, sh->handle, ref);
    FUZZ_CHECK(rc == 0 && ref->size == sh->size,
               "buffer 0x%llx of %llu bytes: %s, %llu bytes", (unsigned long long)sh->handle,
               (unsigned long long)sh->size, baton_status_name(rc),
               (unsigned long long)(rc == 0 ? ref->size : 0));
}

/* The range [off, off + n) of sh clipped to the buffer: *a, *b. */
static int shadow_clip(const struct shadow *sh, uint64_t off, uint64_t n, uint64_t *a, uint64_t *b)
{
    if (!sh || off >= sh->size)
        return 0;
    *a = off;
    *b = n < sh->size - off ? off + n : sh->size;
    return *a < *b;
}

/* The bytes of [off, off + n) are what the buffer holds now (a write the
 * harness cannot predict, but which must stay in this range). */
static void shadow_learn(struct shadow *sh, uint64_t off, uint64_t n)
{
    struct baton_buf_ref ref;
    uint64_t a, b;
    if (!shadow_clip(sh, off, n, &a, &b))
        return;
    shadow_pin(sh, &ref);
    memcpy(sh->bytes + a, ref.mem + a, (size_t)(b - a));
    memset(sh->known + a, 1, (size_t)(b - a));
    baton_handles_release(server->handles, &ref);
}

/* The range [off, off + n) now holds data (known where known is NULL or
 * says so). */
static void shadow_write(struct shadow *sh, uint64_t off, uint64_t n, const uint8_t *data,
                         const uint8_t *known)
{
    uint64_t a, b;
    if (!shadow_clip(sh, off, n, &a, &b))
        return;
    memmove(sh->bytes + a, data, (size_t)(b - a));
    if (known)
        memmove(sh->known + a, known, (size_t)(b - a));
    else
        memset(sh->known + a, 1, (size_t)(b - a));
}

/* The ranges of unseen grants are not known any more. */
static void shadow_forget_unseen(void)
{
    for (size_t g = 0; g < n_granted; g++) {
        struct shadow *sh = granted[g].has_range ? shadow_find(granted[g].handle) : NULL;
        uint64_t a, b;
        if (sh && granted[g].unseen && !granted[g].revoked &&
            shadow_clip(sh, granted[g].offset, granted[g].length, &a, &b))
            memset(sh->known + a, 0, (size_t)(b - a));
    }
}

/* Every live buffer equals its shadow where the shadow knows its bytes;
 * the ranges of unseen grants are forgotten first. */
static void shadow_compare(const struct req *q)
{
    shadow_forget_unseen();
    for (size_t i = 0; i < n_shadows; i++) {
        struct shadow *sh = &shadows[i];
        struct baton_buf_ref ref;
        shadow_pin(sh, &ref);
        for (uint64_t k = 0; k < sh->size; k++)
            FUZZ_CHECK(!sh->known[k] || ref.mem[k] == sh->bytes[k],
                       "after %s (seq %u): buffer 0x%llx byte %llu is 0x%02x, expected 0x%02x",
                       baton_cmd_name(q->cmd), q->seq, (unsigned long long)sh->handle,
                       (unsigned long long)k, ref.mem[k], sh->bytes[k]);
        baton_handles_release(server->handles, &ref);
    }
}

/* ---- deterministic randomness and keys (once per process) ---- */


/* Once per process: the deterministic random source, then the client and
 * peer keys of keyed mode (fuzz_keys.h). */
static void harness_init(void)
{
    static int done;
    char dir[256];
    if (done)
        return;
    done = 1;
    trace = getenv("FUZZ_TRACE") != NULL;
    fuzz_keys_begin("fuzz_dispatcher", dir, sizeof dir);
    client_key = fuzz_new_key("fuzz_dispatcher", dir, "client.key");
    peer_key = fuzz_new_key("fuzz_dispatcher", dir, "peer.key");
    rmdir(dir);
}

/* libFuzzer and libAFLDriver call this once before any input (AFL++: before
 * the fork server, so the keys are made once per campaign); the replay
 * driver does not, and the first input then does it. */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    harness_init();
    return 0;
}

/* ---- building a session ---- */

/* Makes room for n more stream bytes. */
static void grow(struct script *s, size_t n)
{
    if (n <= s->cap - s->len)
        return;
    size_t ncap = s->cap ? s->cap : 1024;
    while (n > ncap - s->len)
        ncap *= 2;
    uint8_t *p = realloc(s->stream, ncap);
    if (!p)
        abort();
    s->stream = p;
    s->cap = ncap;
}

/* Appends n bytes to the stream the server reads. */
static void put(struct script *s, const void *p, size_t n)
{
    grow(s, n);
    if (n)
        memcpy(s->stream + s->len, p, n);
    s->len += n;
}

/* Appends an item (and for a frame its request) to the session's plan. */
static struct item *add_item(struct script *s, enum item_kind kind)
{
    if (s->n_items == s->items_cap) {
        size_t nc = s->items_cap ? 2 * s->items_cap : 64;
        struct item *it = realloc(s->items, nc * sizeof *it);
        if (!it)
            abort();
        s->items = it;
        s->items_cap = nc;
    }
    struct item *it = &s->items[s->n_items++];
    memset(it, 0, sizeof *it);
    it->kind = kind;
    return it;
}

/* Plans one request frame: cmd, the next seq, payload (NULL with
 * REQ_PROOF). */
static void plan_frame(struct script *s, uint8_t cmd, uint8_t op, uint8_t flags,
                       const uint8_t *payload, size_t n)
{
    if (s->n_reqs == s->reqs_cap) {
        size_t nc = s->reqs_cap ? 2 * s->reqs_cap : 64;
        struct req *r = realloc(s->reqs, nc * sizeof *r);
        if (!r)
            abort();
        s->reqs = r;
        s->reqs_cap = nc;
    }
    struct item *it = add_item(s, ITEM_FRAME);
    it->req = s->n_reqs;
    struct req *q = &s->reqs[s->n_reqs++];
    memset(q, 0, sizeof *q);
    q->cmd = cmd;
    q->op = op;
    q->flags = flags;
    q->seq = s->next_seq++;
    q->payload = payload;
    q->len = n;
}

/* The automatic HELLO: version 1 in the session's role; keyed: a random
 * nonce and the AUTH feature, followed by the AUTH with the proof. */
static void plan_handshake(struct script *s)
{
    struct baton_hello h;
    memset(&h, 0, sizeof h);
    h.version_min = h.version_max = BATON_PROTOCOL_VERSION;
    h.role = s->role;
    if (keyed_mode) {
        h.features = BATON_FEATURE_AUTH;
        baton_hs_nonce(h.nonce);
    } else {
        memset(h.nonce, 0x4e, sizeof h.nonce);
    }
    baton_wire_encode_hello(s->hello, &h);
    if (!keyed_mode) {
        plan_frame(s, BATON_CMD_HELLO, 0, 0, s->hello, sizeof s->hello);
        return;
    }
    plan_frame(s, BATON_CMD_HELLO, 0, REQ_HANDSHAKE, s->hello, sizeof s->hello);
    plan_frame(s, BATON_CMD_AUTH, 0, REQ_HANDSHAKE | REQ_PROOF, NULL, BATON_PROOF_BYTES);
}

/* Plans a request record, unless it is a GRAPH_RUN with fences beyond the
 * input's MAX_FENCED_RUNS (each may wait the fence timeout). */
static void plan_request(struct script *s, uint8_t cmd, uint8_t op, const uint8_t *payload,
                         size_t len)
{
    if (cmd == BATON_CMD_GRAPH_RUN && len >= 12 && fuzz_le(payload + 8, 4) != 0) {
        if (n_fenced_runs >= MAX_FENCED_RUNS)
            return;
        n_fenced_runs++;
    }
    plan_frame(s, cmd, op, 0, payload, len);
}

/* Parses a structured session's records into its plan. */
static void build(struct script *s, const uint8_t *in, size_t n, int auto_hello, int allow_child)
{
    struct fuzz_reader r = {in, n};
    s->next_seq = 1;
    if (auto_hello)
        plan_handshake(s);
    while (r.n > 0) {
        uint8_t op = fuzz_u8(&r);
        size_t len = (size_t)fuzz_uint(&r, 2);
        if (len > r.n)
            len = r.n;
        const uint8_t *payload = r.p;
        r.p += len;
        r.n -= len;
        if (op & OP_RAW) {
            struct item *it = add_item(s, ITEM_RAW);
            it->raw = payload;
            it->raw_len = len;
            s->raw = 1;
        } else if ((op & OP_CMD) == 0 && (op & OP_EXT)) {
            /* the flips of an extended request: the tag's byte, or with
             * op & 128 the payload's last */
            uint8_t flip = (uint8_t)((op & OP_FLIP) | (op & OP_FLIP_FIRST ? OP_FLIP_BODY : 0));
            if (len > 0)
                plan_request(s, payload[0], flip, payload + 1, len - 1);
        } else if ((op & OP_CMD) == 0) {
            if (allow_child && !s->has_child) {
                s->has_child = 1;
                s->child_in = payload;
                s->child_len = len;
                s->child_role = keyed_mode && (op & OP_FLIP) ? BATON_ROLE_PEER : BATON_ROLE_CLIENT;
                add_item(s, ITEM_CHILD);
            }
        } else if (keyed_mode && (op & OP_CMD) == BATON_CMD_AUTH && len == 0) {
            plan_frame(s, BATON_CMD_AUTH, op, REQ_PROOF, NULL, 0);
        } else {
            plan_request(s, op & OP_CMD, op, payload, len);
        }
    }
}

/* Tags the frame of `n` payload bytes at s->stream + at with the next
 * client counter (MAC mode, or encrypt mode in place) and appends the tag. */
static void tag_frame(struct script *s, size_t at, size_t n)
{
    struct baton_mac m;
    uint8_t tag[BATON_TAG_BYTES];
    uint64_t ctr;
    uint8_t *frame = s->stream + at;
    int rc = baton_frame_key_next(&s->key.send, &ctr);
    if (rc == 0 && encrypt_mode)
        rc = baton_aead_begin(&m, &s->key.send, ctr, frame, BATON_FRAME_HEADER_BYTES);
    if (rc == 0 && encrypt_mode)
        rc = baton_aead_encrypt(&m, frame + BATON_FRAME_HEADER_BYTES,
                                frame + BATON_FRAME_HEADER_BYTES, n);
    if (rc == 0 && !encrypt_mode)
        rc = baton_mac_begin(&m, &s->key.send, ctr);
    if (rc == 0 && !encrypt_mode)
        rc = baton_mac_update(&m, frame, BATON_FRAME_HEADER_BYTES + n);
    if (rc == 0)
        rc = baton_mac_final_tag(&m, tag);
    FUZZ_CHECK(rc == 0, "tagging request frame: %s", baton_status_name(rc));
    put(s, tag, sizeof tag);
}

/* Puts the latest grant id of the input into the all-zero grant id at p,
 * if there is one, and records the id sent in *sent. */
static void put_grant(uint8_t *p, uint8_t sent[BATON_GRANT_ID_BYTES])
{
    static const uint8_t zero[BATON_GRANT_ID_BYTES];
    if (memcmp(p, zero, sizeof zero) == 0 && n_granted > 0)
        memcpy(p, granted[n_granted - 1].id, BATON_GRANT_ID_BYTES);
    memcpy(sent, p, BATON_GRANT_ID_BYTES);
}

/* The grant ids of request q's payload p (in the stream, before it is
 * tagged): PEER_WRITE's and PEER_FENCE's on a peer link, each fence's of a
 * GRAPH_RUN on a client link (as many as the header says and the payload
 * holds). */
static void put_grants(struct script *s, struct req *q, uint8_t *p)
{
    const size_t copy_grant_at = BATON_TENSOR_DESC_BYTES + 16 + 24; /* its destination's */
    const size_t route_grant_at = BATON_TENSOR_DESC_BYTES + 24;
    if (((s->role == BATON_ROLE_PEER && q->cmd == BATON_CMD_PEER_WRITE) ||
         q->cmd == BATON_CMD_PEER_FENCE ||
         (s->role == BATON_ROLE_CLIENT && q->cmd == BATON_CMD_REVOKE_GRANT)) &&
        q->len >= BATON_GRANT_ID_BYTES)
        put_grant(p, q->grant[0]);
    /* a destination's (not a query's: family 0 has an all-zero id) */
    if (s->role == BATON_ROLE_CLIENT && q->cmd == BATON_CMD_COPY_TENSOR_TO &&
        q->len >= copy_grant_at + BATON_GRANT_ID_BYTES && p[copy_grant_at - 24] != 0)
        put_grant(p + copy_grant_at, q->grant[0]);
    /* from before the server reads it: a copy to the loopback peer, or a
     * run that may hand off to it */
    const size_t copy_dest_at = copy_grant_at - 24;
    if (q->cmd == BATON_CMD_COPY_TENSOR_TO && q->len >= copy_dest_at + BATON_PEER_DEST_BYTES &&
        is_loop_dest(p + copy_dest_at))
        peer_used = 1;
    if (q->cmd == BATON_CMD_GRAPH_RUN && memchr(s->chk.route_loop, 1, sizeof s->chk.route_loop))
        peer_used = 1;
    if (s->role == BATON_ROLE_CLIENT && q->cmd == BATON_CMD_COPY_ROUTE &&
        q->len >= route_grant_at + BATON_GRANT_ID_BYTES && p[route_grant_at - 24] != 0)
        put_grant(p + route_grant_at, q->grant[0]);
    if (s->role == BATON_ROLE_CLIENT && q->cmd == BATON_CMD_GRAPH_RUN &&
        q->len >= BATON_RUN_HEADER_BYTES) {
        uint64_t nf = fuzz_le(p + 8, 4);
        for (uint64_t i = 0; i < nf && i < BATON_MAX_RUN_FENCES; i++) {
            size_t at = BATON_RUN_HEADER_BYTES + BATON_RUN_FENCE_BYTES * i;
            if (at <= q->len && q->len - at >= BATON_GRANT_ID_BYTES)
                put_grant(p + at, q->grant[i]);
        }
    }
}

/* Appends request q's frame to the stream, as the session's state now
 * makes it: the AUTH proof from the transcript, the harness's grant ids
 * put in, the tag once AUTH succeeded, and the flipped byte. */
static void make_frame(struct script *s, struct req *q)
{
    uint8_t hb[BATON_FRAME_HEADER_BYTES];
    uint8_t proof[BATON_PROOF_BYTES];
    struct keyed *k = &s->key;
    const uint8_t *payload = q->payload;
    size_t at = s->len;
    if (q->flags & REQ_PROOF) {
        q->len = 0;
        if (k->step == HS_HELLO_SEEN && baton_hs_initiator_proof(&k->hs, proof) == 0) {
            k->step = HS_PROOF_SENT;
            payload = proof;
            q->len = sizeof proof;
        }
    }
    struct baton_frame_header h = {.cmd = q->cmd, .seq = q->seq, .len = q->len};
    baton_wire_encode_header(hb, &h);
    put(s, hb, sizeof hb);
    put(s, payload, q->len);
    sodium_memzero(proof, sizeof proof);
    uint8_t *p = s->stream + at + BATON_FRAME_HEADER_BYTES;
    put_grants(s, q, p);
    if (!keyed_mode)
        return;
    if (q->cmd == BATON_CMD_HELLO && k->step == HS_NONE && q->len == BATON_HELLO_BYTES &&
        (p[4] == BATON_ROLE_CLIENT || p[4] == BATON_ROLE_PEER)) {
        /* the first HELLO starts the handshake, in its role with that
         * role's key; the transcript's first part is the frame as sent */
        s->role = p[4];
        s->chk.role = s->role;
        const struct baton_key *key = s->role == BATON_ROLE_PEER ? peer_key : client_key;
        if (baton_hs_init(&k->hs, s->role, baton_key_bytes(key)) == 0 &&
            baton_hs_transcript_add(&k->hs, s->stream + at, BATON_FRAME_HEADER_BYTES + q->len) == 0)
            k->step = HS_HELLO_SENT;
    }
    if (k->step != HS_READY)
        return;
    tag_frame(s, at, q->len);
    if (q->op & OP_FLIP) {
        size_t flip = s->len - BATON_TAG_BYTES; /* the tag's first byte */
        if ((q->op & OP_FLIP_BODY) && q->len > 0)
            flip = at + BATON_FRAME_HEADER_BYTES + (q->op & OP_FLIP_FIRST ? 0 : q->len - 1);
        s->stream[flip] ^= 0x01;
        q->flags |= REQ_FLIPPED;
        if (s->flipped == s->n_reqs)
            s->flipped = (size_t)(q - s->reqs);
        if (trace)
            fprintf(stderr, "  session depth %d request cmd %u seq %u: byte %zu of %zu flipped\n",
                    depth, q->cmd, q->seq, flip - at, s->len - at);
    }
}

/* Makes the next planned item. */
static void make_next(struct script *s)
{
    const struct item *it = &s->items[s->next_item++];
    switch (it->kind) {
    case ITEM_RAW:
        put(s, it->raw, it->raw_len);
        break;
    case ITEM_CHILD:
        s->child_at = s->len;
        s->child_placed = 1;
        break;
    case ITEM_FRAME:
        make_frame(s, &s->reqs[it->req]);
        break;
    }
}

/* Makes items until n unread bytes are there or the plan is done. */
static void need(struct script *s, size_t n)
{
    while (s->len - s->pos < n && s->next_item < s->n_items)
        make_next(s);
}

/* ---- oracle ---- */

/* The index of handle h among the session's live buffers, or -1. */
static int owned_find(const struct checker *c, uint64_t h)
{
    for (size_t i = 0; i < c->n_owned; i++)
        if (c->owned[i] == h)
            return (int)i;
    return -1;
}

/* Property: a command that succeeded on h named one of the session's own
 * live buffers. */
static void check_owned(const struct checker *c, uint64_t h, const char *what)
{
    FUZZ_CHECK(owned_find(c, h) >= 0, "%s succeeded on handle 0x%llx not owned by the session",
               what, (unsigned long long)h);
}

/* The u64 at off of len bytes at p, if present. */
static int req_u64_at(const uint8_t *p, size_t len, size_t off, uint64_t *v)
{
    if (!p || len < 8 || off > len - 8)
        return -1;
    *v = fuzz_le(p + off, 8);
    return 0;
}

/* The request payload's u64 at off, if present. */
static int req_u64(const struct req *q, size_t off, uint64_t *v)
{
    return req_u64_at(q->payload, q->len, off, v);
}

/* The grant a GRANT_WRITE of this input returned as id, or NULL. */
static struct granted_id *find_granted(const uint8_t id[BATON_GRANT_ID_BYTES])
{
    for (size_t i = 0; i < n_granted; i++)
        if (memcmp(granted[i].id, id, BATON_GRANT_ID_BYTES) == 0)
            return &granted[i];
    return NULL;
}

/* ---- registered graphs ---- */

/* This session's live graph with id, or NULL. */
static struct live_graph *graph_find(struct checker *c, uint32_t id)
{
    for (uint32_t i = 0; i < c->n_graphs; i++)
        if (c->graphs[i].id == id)
            return &c->graphs[i];
    return NULL;
}

static uint32_t graph_n_leaves(const struct live_graph *g)
{
    return (uint32_t)fuzz_le(g->payload, 4);
}

/* Leaf k of a registered graph (the server accepted the payload, so each
 * leaf decodes). */
static struct baton_tensor_desc graph_leaf(const struct live_graph *g, uint32_t k)
{
    struct baton_tensor_desc t;
    size_t pos = BATON_GRAPH_HEADER_BYTES + (size_t)BATON_TENSOR_DESC_BYTES * k;
    FUZZ_CHECK(k < graph_n_leaves(g) && baton_wire_decode_tensor(g->payload, g->len, &pos, &t) == 0,
               "leaf %u of registered graph %u does not decode", k, g->id);
    return t;
}

/* Whether a node of the graph writes leaf r: its out leaf, or the caches an
 * ATTENTION node appends to (sources 3 and 4). */
static int graph_writes_leaf(const struct live_graph *g, uint32_t r)
{
    uint32_t nl = graph_n_leaves(g), nn = (uint32_t)fuzz_le(g->payload + 4, 4);
    for (uint32_t j = 0; j < nn; j++) {
        const uint8_t *n = g->payload + BATON_GRAPH_HEADER_BYTES +
                           (size_t)BATON_TENSOR_DESC_BYTES * nl +
                           (size_t)BATON_GRAPH_NODE_BYTES * j;
        if (fuzz_le(n + 64, 4) == r)
            return 1;
        if (fuzz_le(n, 4) == BATON_OP_ATTENTION && (fuzz_le(n + 40 + 12, 4) == r ||
                                                    fuzz_le(n + 40 + 16, 4) == r))
            return 1;
    }
    return 0;
}

/* Whether two leaves share bytes of one buffer. */
static int leaves_overlap(const struct baton_tensor_desc *a, const struct baton_tensor_desc *b)
{
    return a->buffer == b->buffer && a->nbytes > 0 && b->nbytes > 0 &&
           (unsigned __int128)a->offset < (unsigned __int128)b->offset + b->nbytes &&
           (unsigned __int128)b->offset < (unsigned __int128)a->offset + a->nbytes;
}

/* The inputs of a successful GRAPH_RUN as its returned leaf r shows them:
 * element k holds first + k of the last input that covered it, when no
 * node writes r and no input to another leaf overlaps it. bytes: the first
 * `have` returned bytes of r. */
static void check_returned_inputs(const struct live_graph *g, const uint8_t *inputs,
                                  uint32_t n_inputs, uint32_t r, const uint8_t *bytes, size_t have)
{
    int64_t want[HEAD_BYTES / 4];
    uint8_t set[HEAD_BYTES / 4] = {0};
    if (graph_writes_leaf(g, r))
        return;
    struct baton_tensor_desc tr = graph_leaf(g, r);
    for (uint32_t i = 0; i < n_inputs; i++) {
        uint32_t leaf = (uint32_t)fuzz_le(inputs + 16 * i, 4);
        if (leaf == r)
            continue;
        struct baton_tensor_desc tl = graph_leaf(g, leaf);
        if (leaves_overlap(&tr, &tl))
            return;
    }
    for (uint32_t i = 0; i < n_inputs; i++) {
        const uint8_t *in = inputs + 16 * i;
        uint64_t count = fuzz_le(in + 4, 4);
        uint64_t u = fuzz_le(in + 8, 4);
        int64_t first = u < 0x80000000u ? (int64_t)u : (int64_t)u - 0x100000000ll;
        if (fuzz_le(in, 4) != r)
            continue;
        for (uint64_t k = 0; k < count && k < HEAD_BYTES / 4; k++) {
            want[k] = first + (int64_t)k;
            set[k] = 1;
        }
    }
    for (size_t k = 0; k < have / 4 && k < HEAD_BYTES / 4; k++)
        if (set[k])
            FUZZ_CHECK((int64_t)(int32_t)(uint32_t)fuzz_le(bytes + 4 * k, 4) == want[k],
                       "GRAPH_RUN returned leaf %u element %zu = %d, the inputs set %lld", r, k,
                       (int32_t)(uint32_t)fuzz_le(bytes + 4 * k, 4), (long long)want[k]);
}

/* ---- copies ---- */

/* A copy result (COPY_TENSOR_TO reply, GRAPH_RUN hand-off) of this
 * session: `copy` one to a family 4/6 destination, else a query. Nothing
 * can be copied in the harness: every destination is refused before
 * anything else, a copy and a cancellation alike (a hand-off whose route's
 * buffer went is cancelled), as not allow-listed. */
static void check_copy_result(const struct checker *c, const uint8_t *r, int copy, int loop)
{
    uint64_t result = fuzz_le(r, 4), status = fuzz_le(r + 4, 4);
    uint64_t not_done = fuzz_le(r + 32, 8);
    FUZZ_CHECK(fuzz_le(r + 40, 8) == 0, "copy result reserved bytes");
    if (loop) {
        FUZZ_CHECK(result != BATON_COPY_NOT_ALLOWED && result < BATON_COPY_OUTCOME_LIMIT &&
                       status <= 0xFFFF,
                   "copy to the loopback peer: result %llu status %llu",
                   (unsigned long long)result, (unsigned long long)status);
        return;
    }
    if (copy)
        FUZZ_CHECK(result == BATON_COPY_NOT_ALLOWED && status == 0,
                   "copy without an allow-list: result %llu status %llu, expected NOT_ALLOWED",
                   (unsigned long long)result, (unsigned long long)status);
    else
        FUZZ_CHECK(result == 0 && status == 0, "query: result %llu status %llu",
                   (unsigned long long)result, (unsigned long long)status);
    if (peer_used)
        return; /* the counters count what the loopback peer's links did */
    FUZZ_CHECK(fuzz_le(r + 8, 8) == 0, "peer bytes sent %llu without a peer",
               (unsigned long long)fuzz_le(r + 8, 8));
    FUZZ_CHECK(events_lost || fuzz_le(r + 16, 8) == received_bytes[c->depth],
               "peer bytes received %llu, the session's grants received %llu",
               (unsigned long long)fuzz_le(r + 16, 8),
               (unsigned long long)received_bytes[c->depth]);
    FUZZ_CHECK(fuzz_le(r + 24, 8) == 0, "copies done without a peer");
    FUZZ_CHECK(not_done >= c->not_done_min && not_done - c->not_done_min <= c->not_done_maybe,
               "copies not done %llu, expected %llu + at most %llu", (unsigned long long)not_done,
               (unsigned long long)c->not_done_min, (unsigned long long)c->not_done_maybe);
}

/* The fields of a GRAPH_RUN request that decoded (the server answered OK):
 * header, where its inputs, hand-off and return are. */
struct run_view {
    uint32_t graph, flags, n_fences, n_inputs;
    size_t inputs_at, handoff_at, return_at;
};

static struct run_view run_view(const struct req *q)
{
    struct run_view v;
    FUZZ_CHECK(q->len >= BATON_RUN_HEADER_BYTES, "GRAPH_RUN without a header succeeded");
    v.graph = (uint32_t)fuzz_le(q->payload, 4);
    v.flags = (uint32_t)fuzz_le(q->payload + 4, 4);
    v.n_fences = (uint32_t)fuzz_le(q->payload + 8, 4);
    v.n_inputs = (uint32_t)fuzz_le(q->payload + 12, 4);
    FUZZ_CHECK(v.n_fences <= BATON_MAX_RUN_FENCES && v.n_inputs <= BATON_MAX_RUN_INPUTS &&
                   v.flags <= BATON_RUN_FLAGS_ALL,
               "GRAPH_RUN with %u fences, %u inputs, flags 0x%x succeeded", v.n_fences,
               v.n_inputs, v.flags);
    v.inputs_at = BATON_RUN_HEADER_BYTES + (size_t)BATON_RUN_FENCE_BYTES * v.n_fences;
    v.handoff_at = v.inputs_at + (size_t)BATON_RUN_INPUT_BYTES * v.n_inputs;
    v.return_at = v.handoff_at + (v.flags & BATON_RUN_HANDOFF ? BATON_RUN_HANDOFF_BYTES : 0);
    FUZZ_CHECK(q->len == v.return_at + (v.flags & BATON_RUN_RETURN ? BATON_RUN_RETURN_BYTES : 0),
               "GRAPH_RUN of %zu bytes succeeded", q->len);
    return v;
}

/* The payload length of an OK GRAPH_RUN reply: the hand-off's result, then
 * the returned leaf's bytes. */
static uint64_t run_reply_len(struct checker *c, const struct req *q)
{
    struct run_view v = run_view(q);
    struct live_graph *g = graph_find(c, v.graph);
    uint64_t n = v.flags & BATON_RUN_HANDOFF ? BATON_COPY_RESULT_BYTES : 0;
    FUZZ_CHECK(g != NULL, "GRAPH_RUN succeeded on graph %u, not a live graph of the session",
               v.graph);
    if (v.flags & BATON_RUN_RETURN)
        n += graph_leaf(g, (uint32_t)fuzz_le(q->payload + v.return_at, 4)).nbytes;
    return n;
}

/* An OK GRAPH_RUN reply of `len` bytes (checked): the graph, its leaves,
 * the latch, the fences, the hand-off and the returned inputs. */
static void check_run_ok(struct checker *c, const struct req *q, uint64_t len)
{
    struct run_view v = run_view(q);
    struct live_graph *g = graph_find(c, v.graph);
    const uint8_t *p = q->payload;
    uint64_t a;
    for (uint32_t k = 0; k < graph_n_leaves(g); k++) {
        FUZZ_CHECK(req_u64_at(g->payload, g->len, 8 + 88 * (size_t)k, &a) == 0,
                   "registered leaf missing");
        check_owned(c, a, "GRAPH_RUN leaf");
    }
    FUZZ_CHECK(!c->run_failed || (v.flags & BATON_RUN_RESET),
               "GRAPH_RUN succeeded after a failed one without RESET");
    for (uint32_t i = 0; i < v.n_fences; i++) {
        const struct granted_id *gi = find_granted(q->grant[i]);
        uint64_t seq = fuzz_le(p + BATON_RUN_HEADER_BYTES + BATON_RUN_FENCE_BYTES * i + 16, 8);
        FUZZ_CHECK(gi != NULL && gi->owner == c->depth,
                   "GRAPH_RUN fence %u succeeded on a grant this session was not given", i);
        FUZZ_CHECK(!gi->revoked, "GRAPH_RUN fence %u succeeded on a revoked grant", i);
        FUZZ_CHECK(events_lost || peer_used || gi->landed_seq == seq,
                   "GRAPH_RUN fence %u on seq %llu succeeded; the grant's latest write is %llu", i,
                   (unsigned long long)seq, (unsigned long long)gi->landed_seq);
    }
    if (v.flags & BATON_RUN_HANDOFF) {
        uint32_t route = (uint32_t)fuzz_le(p + v.handoff_at, 4);
        FUZZ_CHECK(route >= 1 && route <= c->n_routes,
                   "GRAPH_RUN hand-off to route %u succeeded; the session has %u", route,
                   c->n_routes);
        c->not_done_min++;
        check_copy_result(c, c->head, 1, c->route_loop[route - 1]);
    }
    if (v.flags & BATON_RUN_RETURN) {
        size_t at = v.flags & BATON_RUN_HANDOFF ? BATON_COPY_RESULT_BYTES : 0;
        size_t have = len < HEAD_BYTES ? (size_t)len : HEAD_BYTES;
        check_returned_inputs(g, p + v.inputs_at, v.n_inputs,
                              (uint32_t)fuzz_le(p + v.return_at, 4), c->head + at,
                              have > at ? have - at : 0);
    }
}

/* What a request that got an error reply tells the oracle: a failed
 * GRAPH_RUN sets the latch (and may have cancelled its hand-off, a copy
 * not done); a well-formed GRAPH_FREE of a live graph never fails. */
static void check_failed(struct checker *c, const struct req *q, uint16_t status)
{
    if (q->cmd == BATON_CMD_GRAPH_RUN) {
        c->run_failed = 1;
        if (q->len >= 8 && (fuzz_le(q->payload + 4, 4) & BATON_RUN_HANDOFF))
            c->not_done_maybe++;
    }
    if (q->cmd == BATON_CMD_GRAPH_FREE && q->len == BATON_GRAPH_ID_BYTES &&
        fuzz_le(q->payload + 4, 4) == 0 && !(q->flags & REQ_FLIPPED))
        FUZZ_CHECK(graph_find(c, (uint32_t)fuzz_le(q->payload, 4)) == NULL,
                   "GRAPH_FREE of live graph %u refused: %s",
                   (unsigned)fuzz_le(q->payload, 4), baton_status_name(-(int)status));
}

/* The payload length of an OK reply to q (docs/PROTOCOL.md, commands). */
static uint64_t expected_ok_len(struct checker *c, const struct req *q)
{
    uint64_t n = 0;
    switch (q->cmd) {
    case BATON_CMD_HELLO:
        return BATON_HELLO_BYTES;
    case BATON_CMD_AUTH:
        return BATON_PROOF_BYTES;
    case BATON_CMD_DEVICE_INFO:
        return BATON_DEVICE_INFO_BYTES;
    case BATON_CMD_ALLOC_BUFFER:
        return 16;
    case BATON_CMD_GET_TENSOR:
        if (req_u64(q, BATON_TENSOR_DESC_BYTES + 8, &n) != 0)
            FUZZ_CHECK(0, "GET without its n succeeded");
        return n;
    case BATON_CMD_GRANT_WRITE:
        return BATON_GRANT_ID_BYTES;
    case BATON_CMD_COPY_TENSOR_TO:
        return BATON_COPY_RESULT_BYTES;
    case BATON_CMD_GRAPH_REGISTER:
    case BATON_CMD_COPY_ROUTE:
        return BATON_GRAPH_ID_BYTES;
    case BATON_CMD_GRAPH_RUN:
        return run_reply_len(c, q);
    default:
        return 0;
    }
}

/* The handshake as the replies drive it, for every structured session
 * (with raw records too: the replies then still have to be parsed, tags
 * included). An OK HELLO reply to the harness's HELLO is the transcript's
 * second part; an OK AUTH reply must carry the proof that verifies against
 * the one the harness sent, and from then on replies carry tags. */
static void handshake_reply(struct checker *c, uint8_t cmd, uint16_t status, uint64_t len)
{
    struct keyed *k = c->k;
    if (status != 0)
        return;
    if (cmd == BATON_CMD_AUTH)
        FUZZ_CHECK(k != NULL && k->step == HS_PROOF_SENT && len == BATON_PROOF_BYTES,
                   "AUTH succeeded without the harness's proof (keyed %d)", k != NULL);
    if (!k)
        return;
    if (cmd == BATON_CMD_HELLO && k->step == HS_HELLO_SENT && len == BATON_HELLO_BYTES) {
        uint8_t rep[BATON_FRAME_HEADER_BYTES + BATON_HELLO_BYTES];
        uint64_t features = fuzz_le(c->head + 8, 8);
        uint64_t want = BATON_FEATURE_AUTH | BATON_FEATURE_PEER_COPY | BATON_FEATURE_PIPELINE |
                        BATON_FEATURE_OWNER_FENCE | (encrypt_mode ? BATON_FEATURE_ENCRYPT : 0);
        FUZZ_CHECK(features == want, "keyed HELLO reply features 0x%llx, expected 0x%llx",
                   (unsigned long long)features, (unsigned long long)want);
        memcpy(rep, c->hdr, BATON_FRAME_HEADER_BYTES);
        memcpy(rep + BATON_FRAME_HEADER_BYTES, c->head, BATON_HELLO_BYTES);
        if (baton_hs_transcript_add(&k->hs, rep, sizeof rep) == 0)
            k->step = HS_HELLO_SEEN;
    }
    if (cmd == BATON_CMD_AUTH) {
        FUZZ_CHECK(baton_hs_verify_responder(&k->hs, c->head) == 0,
                   "the server's AUTH proof does not verify");
        FUZZ_CHECK(baton_hs_session_keys(&k->hs, &k->send, &k->recv) == 0,
                   "no session keys after AUTH");
        baton_hs_destroy(&k->hs);
        k->step = HS_READY;
        c->tagged = 1; /* the replies after this one */
    }
}

/* The leaves of a graph payload (GRAPH_COMPUTE, GRAPH_REGISTER) that lie
 * in buffers of this session: what its execution may have written (a run
 * that failed part way too) is read back. Only inside those leaves. */
static void shadow_learn_leaves(const struct checker *c, const uint8_t *p, size_t len)
{
    uint64_t nl = len >= BATON_GRAPH_HEADER_BYTES ? fuzz_le(p, 4) : 0;
    for (uint64_t k = 0; k < nl; k++) {
        struct baton_tensor_desc t;
        size_t pos = BATON_GRAPH_HEADER_BYTES + (size_t)BATON_TENSOR_DESC_BYTES * k;
        if (pos > len || baton_wire_decode_tensor(p, len, &pos, &t) != 0)
            break;
        if (owned_find(c, t.buffer) >= 0)
            shadow_learn(shadow_find(t.buffer), t.offset, t.nbytes);
    }
}

/* A copy to the loopback peer answered: a synchronous one that is DONE has
 * landed (every earlier write on its link too), so its bytes are the
 * source's and lie inside the grant; any other may land later, or did in
 * part: its grant's range is not compared until it is revoked. */
static void shadow_loop_copy(const struct req *q, const uint8_t *r)
{
    const uint8_t *d = q->payload + BATON_TENSOR_DESC_BYTES + 16;
    struct granted_id *gi = find_granted(q->grant[0]);
    struct baton_tensor_desc t;
    size_t pos = 0;
    uint64_t result = fuzz_le(r, 4), flags = fuzz_le(d + BATON_PEER_DEST_BYTES + 8, 4);
    FUZZ_CHECK(result != BATON_COPY_DONE || gi != NULL || n_granted == MAX_GRANTED,
               "copy to the loopback peer DONE into a grant no GRANT_WRITE returned");
    if (!gi)
        return;
    FUZZ_CHECK(result != BATON_COPY_DONE || !gi->revoked,
               "copy to the loopback peer DONE into a revoked grant");
    if (!gi->has_range || gi->unseen)
        return;
    if (result != BATON_COPY_DONE || (flags & BATON_COPY_ASYNC)) {
        gi->unseen = 1;
        return;
    }
    uint64_t off = fuzz_le(q->payload + BATON_TENSOR_DESC_BYTES, 8);
    uint64_t n = fuzz_le(q->payload + BATON_TENSOR_DESC_BYTES + 8, 8);
    uint64_t at = fuzz_le(d + 40, 8);
    FUZZ_CHECK(at <= gi->length && n <= gi->length - at,
               "copy of %llu bytes at %llu DONE into a grant of %llu bytes",
               (unsigned long long)n, (unsigned long long)at, (unsigned long long)gi->length);
    struct shadow *src = NULL, *dst = shadow_find(gi->handle);
    if (baton_wire_decode_tensor(q->payload, q->len, &pos, &t) == 0)
        src = shadow_find(t.buffer);
    if (!src || !dst)
        return;
    /* the source range was checked against its buffer (OK reply) */
    shadow_write(dst, gi->offset + at, n, src->bytes + t.offset + off,
                 src->known + t.offset + off);
}

/* The shadows' side of request q's reply (status 0: OK): what the request
 * changed is put into the shadows, then every buffer is compared. */
static void shadow_after(struct checker *c, const struct req *q, uint16_t status)
{
    struct baton_tensor_desc t, u;
    size_t pos = 0;
    uint64_t a = 0, off = 0, n = 0;
    struct shadow *sh;
    struct granted_id *gi;
    switch (q->cmd) {
    case BATON_CMD_ALLOC_BUFFER:
        if (status != 0)
            break;
        FUZZ_CHECK(n_shadows < MAX_SHADOWS, "more than %u live buffers", MAX_SHADOWS);
        sh = &shadows[n_shadows++];
        sh->handle = fuzz_le(c->head, 8);
        sh->size = fuzz_le(c->head + 8, 8);
        sh->depth = c->depth;
        sh->bytes = calloc(1, (size_t)sh->size); /* a new buffer is zeroed */
        sh->known = malloc((size_t)sh->size);
        if (!sh->bytes || !sh->known)
            abort();
        memset(sh->known, 1, (size_t)sh->size);
        break;
    case BATON_CMD_FREE_BUFFER:
        if (status == 0 && req_u64(q, 0, &a) == 0 && (sh = shadow_find(a)) != NULL)
            shadow_drop(sh);
        break;
    case BATON_CMD_BUFFER_CLEAR:
        if (status == 0 && req_u64(q, 0, &a) == 0 && (sh = shadow_find(a)) != NULL) {
            memset(sh->bytes, q->payload[8], (size_t)sh->size);
            memset(sh->known, 1, (size_t)sh->size);
        }
        break;
    case BATON_CMD_SET_TENSOR:
        if (status == 0 && q->len >= BATON_TENSOR_DESC_BYTES + 16 &&
            baton_wire_decode_tensor(q->payload, q->len, &pos, &t) == 0) {
            off = fuzz_le(q->payload + BATON_TENSOR_DESC_BYTES, 8);
            n = q->len - (BATON_TENSOR_DESC_BYTES + 16);
            shadow_write(shadow_find(t.buffer), t.offset + off, n,
                         q->payload + BATON_TENSOR_DESC_BYTES + 16, NULL);
        }
        break;
    case BATON_CMD_COPY_TENSOR:
        if (status == 0 && baton_wire_decode_tensor(q->payload, q->len, &pos, &t) == 0 &&
            baton_wire_decode_tensor(q->payload, q->len, &pos, &u) == 0) {
            struct shadow *src = shadow_find(t.buffer), *dst = shadow_find(u.buffer);
            if (src && dst)
                shadow_write(dst, u.offset, t.nbytes, src->bytes + t.offset,
                             src->known + t.offset);
        }
        break;
    case BATON_CMD_GRAPH_COMPUTE:
        shadow_learn_leaves(c, q->payload, q->len);
        break;
    case BATON_CMD_GRAPH_RUN:
        if (q->len >= BATON_RUN_HEADER_BYTES) {
            struct live_graph *g = graph_find(c, (uint32_t)fuzz_le(q->payload, 4));
            uint64_t route = 0;
            if (g)
                shadow_learn_leaves(c, g->payload, g->len);
            /* a hand-off to the loopback peer (or its cancellation) */
            if ((fuzz_le(q->payload + 4, 4) & BATON_RUN_HANDOFF) && g) {
                struct run_view v;
                if (status == 0) {
                    v = run_view(q);
                    route = fuzz_le(q->payload + v.handoff_at, 4);
                }
                for (uint32_t k = 0; k < c->n_routes; k++)
                    if (c->route_loop[k] && (route == 0 || route == k + 1) &&
                        (gi = find_granted(c->route_grant[k])) != NULL)
                        gi->unseen = 1;
            }
        }
        break;
    case BATON_CMD_REVOKE_GRANT:
        /* nothing lands once it has returned: what the range holds now
         * stays, even where writes landed unseen */
        gi = find_granted(q->grant[0]);
        if (status == 0 && gi && gi->has_range && gi->unseen)
            shadow_learn(shadow_find(gi->handle), gi->offset, gi->length);
        break;
    case BATON_CMD_PEER_WRITE:
        gi = find_granted(q->grant[0]);
        if (c->role != BATON_ROLE_PEER || !gi || !gi->has_range || gi->unseen || q->len < 40)
            break;
        sh = shadow_find(gi->handle);
        if (status == 0)
            shadow_write(sh, gi->offset + fuzz_le(q->payload + 16, 8), q->len - 40,
                         q->payload + 40, NULL);
        else if (!gi->revoked) /* refused, or failed with part of it landed */
            shadow_learn(sh, gi->offset, gi->length);
        break;
    case BATON_CMD_COPY_TENSOR_TO:
        if (status == 0 && q->len == BATON_COPY_TO_BYTES &&
            is_loop_dest(q->payload + BATON_TENSOR_DESC_BYTES + 16))
            shadow_loop_copy(q, c->head);
        break;
    default:
        break;
    }
    shadow_compare(q);
}

/* The bytes of an OK GET reply: equal to the buffer's shadow where it
 * knows them, and inside the buffer. */
static void shadow_check_get(struct checker *c, const uint8_t *p, size_t n)
{
    const struct shadow *sh = c->get_sh;
    for (size_t j = 0; j < n; j++, c->get_pos++) {
        uint64_t k = c->get_at + c->get_pos;
        FUZZ_CHECK(k >= c->get_at && k < sh->size,
                   "GET reply byte %llu lies outside buffer 0x%llx of %llu bytes",
                   (unsigned long long)c->get_pos, (unsigned long long)sh->handle,
                   (unsigned long long)sh->size);
        FUZZ_CHECK(!sh->known[k] || p[j] == sh->bytes[k],
                   "GET reply byte %llu (buffer 0x%llx byte %llu) is 0x%02x, the buffer's 0x%02x",
                   (unsigned long long)c->get_pos, (unsigned long long)sh->handle,
                   (unsigned long long)k, p[j], sh->bytes[k]);
    }
}

/* A whole reply (header, payload and, when tagged, a verified tag) has
 * been seen. */
static void reply_done(struct checker *c)
{
    const uint8_t *h = c->hdr;
    uint16_t status = (uint16_t)fuzz_le(h + 6, 2);
    uint64_t len = fuzz_le(h + 16, 8);
    size_t i = c->n_replies++;
    c->last_status = status;
    if (trace)
        fprintf(stderr, "  session depth %d reply %zu: cmd %u seq %u status %s len %llu%s\n", depth,
                i, h[4], (unsigned)fuzz_le(h + 8, 4),
                status ? baton_status_name(-(int)status) : "OK", (unsigned long long)len,
                c->tagged ? " tag ok" : "");
    handshake_reply(c, h[4], status, len);
    if (h[4] == BATON_CMD_GRANT_WRITE && status == 0 && len == BATON_GRANT_ID_BYTES &&
        n_granted < MAX_GRANTED) {
        struct granted_id *gi = &granted[n_granted++];
        memset(gi, 0, sizeof *gi);
        memcpy(gi->id, c->head, BATON_GRANT_ID_BYTES);
        gi->owner = c->depth;
    }
    if (!c->active)
        return;
    FUZZ_CHECK(i < c->n_reqs, "reply %zu without a request", i);
    const struct req *q = &c->reqs[i];
    FUZZ_CHECK(h[4] == q->cmd && fuzz_le(h + 8, 4) == q->seq,
               "reply %zu: cmd %u seq %llu, request cmd %u seq %u", i, h[4],
               (unsigned long long)fuzz_le(h + 8, 4), q->cmd, q->seq);
    if (q->flags & REQ_HANDSHAKE)
        FUZZ_CHECK(status == 0, "automatic %s refused: %s", baton_cmd_name(q->cmd),
                   baton_status_name(-(int)status));
    if (status != 0) {
        FUZZ_CHECK(len == 0, "error reply with a %llu-byte payload", (unsigned long long)len);
        check_failed(c, q, status);
        shadow_after(c, q, status);
        return;
    }
    FUZZ_CHECK(!(q->flags & REQ_FLIPPED), "request %zu with a flipped byte succeeded", i);
    uint64_t want = expected_ok_len(c, q);
    FUZZ_CHECK(len == want, "reply %zu (cmd %u): %llu payload bytes, expected %llu", i, q->cmd,
               (unsigned long long)len, (unsigned long long)want);
    uint64_t a = 0, b = 0;
    switch (q->cmd) {
    case BATON_CMD_ALLOC_BUFFER: {
        uint64_t handle = fuzz_le(c->head, 8);
        FUZZ_CHECK(owned_find(c, handle) < 0, "ALLOC returned a live handle again");
        req_u64(q, 0, &a);
        FUZZ_CHECK(fuzz_le(c->head + 8, 8) == a, "ALLOC reply size differs");
        if (c->n_owned < MAX_OWNED)
            c->owned[c->n_owned++] = handle;
        break;
    }
    case BATON_CMD_FREE_BUFFER: {
        FUZZ_CHECK(req_u64(q, 0, &a) == 0, "FREE without a handle succeeded");
        int k = owned_find(c, a);
        check_owned(c, a, "FREE_BUFFER");
        c->owned[k] = c->owned[--c->n_owned];
        break;
    }
    case BATON_CMD_BUFFER_CLEAR:
    case BATON_CMD_SET_TENSOR:
    case BATON_CMD_GET_TENSOR:
    case BATON_CMD_GRANT_WRITE:    /* handle first: the buffer being granted */
    case BATON_CMD_COPY_TENSOR_TO: /* source tensor first, checked as GET's */
        FUZZ_CHECK(req_u64(q, 0, &a) == 0, "request without a handle succeeded");
        check_owned(c, a, baton_cmd_name(q->cmd));
        if (q->cmd == BATON_CMD_GRANT_WRITE) {
            struct granted_id *gi = find_granted(c->head);
            if (gi && gi->owner == c->depth && !gi->has_range) {
                gi->has_range = req_u64(q, 8, &gi->offset) == 0 && req_u64(q, 16, &gi->length) == 0;
                gi->handle = a;
                gi->unseen = events_lost;
            }
        }
        break;
    case BATON_CMD_REVOKE_GRANT: {
        struct granted_id *gi = find_granted(q->grant[0]);
        FUZZ_CHECK(q->len == BATON_GRANT_ID_BYTES && gi != NULL && gi->owner == c->depth &&
                       !gi->revoked,
                   "REVOKE_GRANT succeeded on no live grant of the session");
        gi->revoked = 1;
        break;
    }
    case BATON_CMD_COPY_TENSOR:
        FUZZ_CHECK(req_u64(q, 0, &a) == 0 && req_u64(q, BATON_TENSOR_DESC_BYTES, &b) == 0,
                   "COPY without handles succeeded");
        check_owned(c, a, "COPY_TENSOR src");
        check_owned(c, b, "COPY_TENSOR dst");
        break;
    case BATON_CMD_GRAPH_COMPUTE: {
        uint64_t nl = q->len >= 4 ? fuzz_le(q->payload, 4) : 0;
        for (uint64_t k = 0; k < nl; k++) {
            FUZZ_CHECK(req_u64(q, 8 + 88 * k, &a) == 0, "graph leaf missing");
            check_owned(c, a, "GRAPH_COMPUTE leaf");
        }
        break;
    }
    case BATON_CMD_PEER_WRITE:
    case BATON_CMD_PEER_FENCE: {
        /* writes (and cancellations) only move forward */
        struct granted_id *gi = find_granted(q->grant[0]);
        size_t seq_at = q->cmd == BATON_CMD_PEER_WRITE ? 32 : 16;
        FUZZ_CHECK(q->len >= seq_at + 8 && gi != NULL,
                   "%s succeeded with a grant id no GRANT_WRITE returned", baton_cmd_name(q->cmd));
        uint64_t seq = fuzz_le(q->payload + seq_at, 8);
        /* the owner's PEER_FENCE (client link) names its own grant */
        FUZZ_CHECK(c->role != BATON_ROLE_CLIENT || gi->owner == c->depth,
                   "PEER_FENCE on a client link succeeded on another session's grant");
        FUZZ_CHECK(!gi->revoked, "%s succeeded on a revoked grant", baton_cmd_name(q->cmd));
        /* a write lands only in a live buffer of the grant's owner */
        const struct checker *oc = checkers[gi->owner];
        FUZZ_CHECK(q->cmd != BATON_CMD_PEER_WRITE || !gi->has_range || !oc || !oc->active ||
                       owned_find(oc, gi->handle) >= 0,
                   "PEER_WRITE succeeded into buffer 0x%llx, freed by its owner",
                   (unsigned long long)gi->handle);
        FUZZ_CHECK(seq > gi->max_seq, "%s seq %llu succeeded after seq %llu",
                   baton_cmd_name(q->cmd), (unsigned long long)seq,
                   (unsigned long long)gi->max_seq);
        gi->max_seq = seq;
        if (q->cmd == BATON_CMD_PEER_WRITE) {
            gi->landed_seq = seq;
            received_bytes[gi->owner] += BATON_FRAME_HEADER_BYTES +
                                         BATON_PEER_WRITE_HEADER_BYTES +
                                         fuzz_le(q->payload + 24, 8) + BATON_TAG_BYTES;
        }
        break;
    }
    case BATON_CMD_HELLO: {
        uint64_t features = fuzz_le(c->head + 8, 8);
        uint64_t fw = BATON_FEATURE_PIPELINE | BATON_FEATURE_OWNER_FENCE;
        if (keyed_mode)
            fw |= BATON_FEATURE_AUTH | BATON_FEATURE_PEER_COPY |
                  (encrypt_mode ? BATON_FEATURE_ENCRYPT : 0);
        FUZZ_CHECK(features == fw, "HELLO reply features 0x%llx, expected 0x%llx",
                   (unsigned long long)features, (unsigned long long)fw);
        break;
    }
    case BATON_CMD_GRAPH_REGISTER: {
        uint64_t nl = fuzz_le(q->payload, 4);
        for (uint64_t k = 0; k < nl; k++) {
            FUZZ_CHECK(req_u64(q, 8 + 88 * k, &a) == 0, "graph leaf missing");
            check_owned(c, a, "GRAPH_REGISTER leaf");
        }
        FUZZ_CHECK(c->n_graphs < MAX_GRAPHS, "GRAPH_REGISTER beyond %u live graphs", MAX_GRAPHS);
        uint32_t id = (uint32_t)fuzz_le(c->head, 4), next = c->last_graph_id;
        do {
            next++;
        } while (next == 0 || graph_find(c, next) != NULL);
        FUZZ_CHECK(id == next && fuzz_le(c->head + 4, 4) == 0,
                   "GRAPH_REGISTER returned id %u (reserved %u), expected %u", id,
                   (unsigned)fuzz_le(c->head + 4, 4), next);
        c->graphs[c->n_graphs++] = (struct live_graph){id, q->payload, q->len};
        c->last_graph_id = id;
        break;
    }
    case BATON_CMD_GRAPH_FREE: {
        struct live_graph *g = NULL;
        if (q->len == BATON_GRAPH_ID_BYTES)
            g = graph_find(c, (uint32_t)fuzz_le(q->payload, 4));
        FUZZ_CHECK(g != NULL, "GRAPH_FREE succeeded on no live graph of the session");
        *g = c->graphs[--c->n_graphs];
        break;
    }
    case BATON_CMD_GRAPH_RUN:
        check_run_ok(c, q, len);
        c->run_failed = 0;
        break;
    case BATON_CMD_COPY_ROUTE: {
        FUZZ_CHECK(q->len == BATON_COPY_ROUTE_BYTES && req_u64(q, 0, &a) == 0,
                   "COPY_ROUTE of %zu bytes succeeded", q->len);
        check_owned(c, a, "COPY_ROUTE");
        uint8_t family = q->payload[BATON_TENSOR_DESC_BYTES];
        FUZZ_CHECK(family == BATON_PEER_FAMILY_IPV4 || family == BATON_PEER_FAMILY_IPV6,
                   "COPY_ROUTE to family %u succeeded", family);
        FUZZ_CHECK(c->n_routes < 16, "a 17th COPY_ROUTE succeeded");
        FUZZ_CHECK(fuzz_le(c->head, 4) == c->n_routes + 1 && fuzz_le(c->head + 4, 4) == 0,
                   "COPY_ROUTE returned id %u, expected %u", (unsigned)fuzz_le(c->head, 4),
                   c->n_routes + 1);
        c->route_loop[c->n_routes] = (uint8_t)is_loop_dest(q->payload + BATON_TENSOR_DESC_BYTES);
        memcpy(c->route_grant[c->n_routes], q->grant[0], BATON_GRANT_ID_BYTES);
        c->n_routes++;
        break;
    }
    default:
        break;
    }
    if (q->cmd == BATON_CMD_COPY_TENSOR_TO) {
        int copy = q->len == BATON_COPY_TO_BYTES &&
                   q->payload[BATON_TENSOR_DESC_BYTES + 16] != BATON_PEER_FAMILY_NONE;
        FUZZ_CHECK(q->len == BATON_COPY_TO_BYTES, "COPY_TENSOR_TO of %zu bytes succeeded",
                   q->len);
        if (copy)
            c->not_done_min++;
        check_copy_result(c, c->head, copy,
                          copy && is_loop_dest(q->payload + BATON_TENSOR_DESC_BYTES + 16));
    }
    shadow_after(c, q, 0);
}

/* Payload bytes of the current reply: MAC'd (or decrypted) when tagged,
 * the first ones kept in plaintext for reply_done. */
static void reply_payload(struct checker *c, const uint8_t *p, size_t n)
{
    uint8_t plain[4096];
    while (n > 0) {
        size_t k = n < sizeof plain ? n : sizeof plain;
        const uint8_t *text = p;
        if (c->tagged && encrypt_mode) {
            FUZZ_CHECK(baton_aead_decrypt(&c->mac, plain, p, k) == 0, "reply decrypt");
            text = plain;
        } else if (c->tagged) {
            FUZZ_CHECK(baton_mac_update(&c->mac, p, k) == 0, "reply MAC");
        }
        if (c->get_sh)
            shadow_check_get(c, text, k);
        if (c->head_have < sizeof c->head) {
            size_t h = sizeof c->head - c->head_have;
            if (h > k)
                h = k;
            memcpy(c->head + c->head_have, text, h);
            c->head_have += h;
        }
        p += k;
        n -= k;
    }
}

/* The current reply's payload is complete: its tag follows when tagged. */
static void reply_body_done(struct checker *c)
{
    if (c->tagged) {
        c->phase = PH_TAG;
        c->tag_have = 0;
        return;
    }
    reply_done(c);
    c->phase = PH_HEADER;
    c->hdr_have = 0;
}

/* A complete header: starts the reply's payload (and its tag). */
static void reply_header_done(struct checker *c)
{
    FUZZ_CHECK(memcmp(c->hdr, "BATN", 4) == 0, "reply without magic");
    c->left = fuzz_le(c->hdr + 16, 8);
    c->head_have = 0;
    c->get_sh = NULL;
    if (c->active && c->n_replies < c->n_reqs && c->hdr[4] == BATON_CMD_GET_TENSOR &&
        fuzz_le(c->hdr + 6, 2) == 0) {
        /* an OK GET: its bytes are compared with the shadow as they come */
        const struct req *q = &c->reqs[c->n_replies];
        struct baton_tensor_desc t;
        size_t pos = 0;
        if (q->cmd == BATON_CMD_GET_TENSOR && q->len >= BATON_TENSOR_DESC_BYTES + 16 &&
            baton_wire_decode_tensor(q->payload, q->len, &pos, &t) == 0) {
            c->get_sh = shadow_find(t.buffer);
            c->get_at = t.offset + fuzz_le(q->payload + BATON_TENSOR_DESC_BYTES, 8);
            c->get_pos = 0;
        }
    }
    if (c->tagged) {
        uint64_t ctr;
        int rc = baton_frame_key_next(&c->k->recv, &ctr);
        if (rc == 0 && encrypt_mode)
            rc = baton_aead_begin(&c->mac, &c->k->recv, ctr, c->hdr, sizeof c->hdr);
        if (rc == 0 && !encrypt_mode)
            rc = baton_mac_begin(&c->mac, &c->k->recv, ctr);
        if (rc == 0 && !encrypt_mode)
            rc = baton_mac_update(&c->mac, c->hdr, sizeof c->hdr);
        FUZZ_CHECK(rc == 0, "reply tag start: %s", baton_status_name(rc));
    }
    c->phase = PH_PAYLOAD;
    if (c->left == 0)
        reply_body_done(c);
}

/* Feeds reply bytes, as the server sends them, through the parser:
 * header, payload, tag (when tagged), in any chunking. */
static void checker_feed(struct checker *c, const uint8_t *p, size_t n)
{
    while (n > 0) {
        size_t k;
        switch (c->phase) {
        case PH_HEADER:
            k = sizeof c->hdr - c->hdr_have;
            if (k > n)
                k = n;
            memcpy(c->hdr + c->hdr_have, p, k);
            c->hdr_have += k;
            if (c->hdr_have == sizeof c->hdr)
                reply_header_done(c);
            break;
        case PH_PAYLOAD:
            k = c->left < n ? (size_t)c->left : n;
            reply_payload(c, p, k);
            c->left -= k;
            if (c->left == 0)
                reply_body_done(c);
            break;
        case PH_TAG:
        default:
            k = sizeof c->tag - c->tag_have;
            if (k > n)
                k = n;
            memcpy(c->tag + c->tag_have, p, k);
            c->tag_have += k;
            if (c->tag_have == sizeof c->tag) {
                FUZZ_CHECK(baton_mac_final_verify(&c->mac, c->tag) == 0,
                           "reply %zu (cmd %u): its tag does not verify", c->n_replies, c->hdr[4]);
                reply_done(c);
                c->phase = PH_HEADER;
                c->hdr_have = 0;
            }
            break;
        }
        p += k;
        n -= k;
    }
}

/* Whether the server refuses cmd in READY from the header alone (a
 * framing error, E_PROTO, sent before the frame's tag is read). */
static int refused_by_header(uint8_t role, uint8_t cmd)
{
    if (role == BATON_ROLE_PEER)
        return cmd != BATON_CMD_PEER_WRITE && cmd != BATON_CMD_PEER_FENCE;
    /* PEER_FENCE on a client link is the grant owner's (grants_seal) */
    return cmd == BATON_CMD_HELLO || cmd == BATON_CMD_AUTH || cmd == BATON_CMD_PEER_WRITE;
}

/* The end of a keyed session that sent a frame with a flipped byte (the
 * server had answered everything before it, or the frame would not have
 * been made): a close with BATON_E_AUTH and no reply to it, or the error
 * frame the header (or PEER_WRITE's 40-byte header) decides before the tag
 * is read. */
static void check_flipped_end(const struct script *s, int rc)
{
    size_t k = s->flipped;
    const struct req *q = &s->reqs[k];
    const struct checker *c = &s->chk;
    if (q->cmd == 0 || q->cmd >= BATON_CMD_LIMIT) {
        FUZZ_CHECK(c->n_replies == k + 1 && c->last_status == (uint16_t)-BATON_E_CMD,
                   "flipped frame of cmd %u (request %zu): %zu replies, last status %u", q->cmd,
                   k, c->n_replies, c->last_status);
        return;
    }
    if (refused_by_header(s->role, q->cmd)) {
        FUZZ_CHECK(c->n_replies == k + 1 && c->last_status == (uint16_t)-BATON_E_PROTO,
                   "flipped %s (request %zu) on a %s link: %zu replies, last status %u",
                   baton_cmd_name(q->cmd), k, s->role == BATON_ROLE_PEER ? "peer" : "client",
                   c->n_replies, c->last_status);
        return;
    }
    if (q->cmd == BATON_CMD_PEER_WRITE && c->n_replies == k + 1) {
        FUZZ_CHECK(c->last_status != 0 && rc != 0,
                   "flipped PEER_WRITE (request %zu) answered with status %u", k, c->last_status);
        return;
    }
    FUZZ_CHECK(c->n_replies == k && rc == BATON_E_AUTH,
               "flipped %s (request %zu): %zu replies, session ended with %d; expected a "
               "close without a reply",
               baton_cmd_name(q->cmd), k, c->n_replies, rc);
}

/* ---- transport over a script ---- */

static void run_session(const uint8_t *in, size_t n, int raw, int auto_hello, uint8_t role);

/* The script behind the transport (base is its first member). */
static struct script *as_script(struct baton_transport *t)
{
    return (struct script *)t;
}

/* Runs the second session once the first has consumed everything before
 * its record; makes the next item while nothing is left to read. */
static int sc_wait_readable(struct baton_transport *t, uint64_t deadline)
{
    struct script *s = as_script(t);
    (void)deadline;
    for (;;) {
        if (s->child_placed && !s->child_done && s->pos >= s->child_at) {
            s->child_done = 1;
            depth++;
            run_session(s->child_in, s->child_len, 0, 1, s->child_role);
            depth--;
        }
        if (s->pos < s->len)
            return 0;
        if (s->next_item == s->n_items)
            return BATON_E_IO;
        make_next(s);
    }
}

/* Reads n stream bytes, making items as needed; BATON_E_IO at the end of
 * the input. Deadlines do not apply: nothing here waits. */
static int sc_recv_exact(struct baton_transport *t, void *buf, size_t n, uint64_t deadline)
{
    struct script *s = as_script(t);
    (void)deadline;
    need(s, n);
    size_t avail = s->len - s->pos;
    size_t k = n < avail ? n : avail;
    if (k)
        memcpy(buf, s->stream + s->pos, k);
    s->pos += k;
    return k == n ? 0 : BATON_E_IO;
}

/* Every reply byte goes to the session's checker. */
static int sc_send_all(struct baton_transport *t, const struct iovec *iov, int iovcnt,
                       uint64_t deadline)
{
    struct script *s = as_script(t);
    (void)deadline;
    if (iovcnt < 0 || iovcnt > BATON_TRANSPORT_MAX_IOV)
        return BATON_E_INVAL;
    for (int i = 0; i < iovcnt; i++)
        checker_feed(&s->chk, iov[i].iov_base, iov[i].iov_len);
    return 0;
}

static void sc_close(struct baton_transport *t)
{
    (void)t; /* the script outlives the serve call; freed by run_session */
}

static const struct baton_transport_ops script_ops = {
    .wait_readable = sc_wait_readable,
    .recv_exact = sc_recv_exact,
    .send_all = sc_send_all,
    .close = sc_close,
};

/* Serves one session of the input on the shared server and checks its
 * properties: raw (the bytes as they are), or structured in the given role
 * (keyed_mode: with the handshake and tags). */
static void run_session(const uint8_t *in, size_t n, int raw, int auto_hello, uint8_t role)
{
    if (raw) {
        struct baton_transport *t;
        if (baton_transport_mem(in, n, 0, &t) != 0)
            abort();
        (void)baton_server_serve_transport(server, t, "fuzz-raw");
        return;
    }
    struct script s;
    memset(&s, 0, sizeof s);
    s.base.ops = &script_ops;
    s.role = role;
    build(&s, in, n, auto_hello, depth == 0);
    s.flipped = s.n_reqs;
    /* frames are made when the server wants their first byte: grant ids
     * (and in keyed mode proofs and tags) come from the replies before */
    s.chk.reqs = s.reqs;
    s.chk.depth = depth;
    s.chk.role = s.role;
    s.chk.n_reqs = s.n_reqs;
    s.chk.active = !s.raw;
    if (s.raw) {
        /* its PEER_WRITEs may land in any grant unseen: forgotten now,
         * since the next reply checked may be a GET of the session that
         * owns the grant (a raw peer session wrote into it, a campaign of
         * the 10-minute growth found it) */
        events_lost = 1;
        for (size_t g = 0; g < n_granted; g++)
            granted[g].unseen = 1;
        shadow_forget_unseen();
    }
    s.chk.k = keyed_mode ? &s.key : NULL;
    checkers[depth] = &s.chk;
    int rc = baton_server_serve_transport(server, &s.base, "fuzz");
    /* the session has ended, its buffers with it: a second session run
     * after it must not find their shadows */
    shadow_drop_depth(depth);
    if (s.has_child && !s.child_done) {
        /* the first session ended before reaching it: run it afterwards */
        s.child_done = 1;
        depth++;
        run_session(s.child_in, s.child_len, 0, 1, s.child_role);
        depth--;
    }
    if (s.chk.active) {
        FUZZ_CHECK(s.chk.phase == PH_HEADER && s.chk.hdr_have == 0, "reply cut short");
        if (s.flipped < s.n_reqs)
            check_flipped_end(&s, rc);
        else if (rc == 0)
            FUZZ_CHECK(s.chk.n_replies == s.n_reqs, "clean end: %zu replies to %zu requests",
                       s.chk.n_replies, s.n_reqs);
        else
            FUZZ_CHECK(s.chk.n_replies >= 1 && s.chk.n_replies <= s.n_reqs &&
                           s.chk.last_status != 0,
                       "ended with %d after %zu replies to %zu requests (last status %u)", rc,
                       s.chk.n_replies, s.n_reqs, s.chk.last_status);
    }
    /* the session's buffers went with it; a peer-role session may have
     * written part of a PEER_WRITE it got no reply to (a bad tag), inside
     * its grant: what the live grants hold now is what they hold */
    checkers[depth] = NULL;
    shadow_drop_depth(depth);
    for (size_t g = 0; depth > 0 && s.role == BATON_ROLE_PEER && g < n_granted; g++)
        if (granted[g].has_range && !granted[g].revoked && !granted[g].unseen)
            shadow_learn(shadow_find(granted[g].handle), granted[g].offset, granted[g].length);
    baton_hs_destroy(&s.key.hs);
    baton_frame_key_wipe(&s.key.send);
    baton_frame_key_wipe(&s.key.recv);
    baton_mac_abort(&s.chk.mac);
    free(s.stream);
    free(s.reqs);
    free(s.items);
}

/* One input: a fresh server in the mode of byte 0, its sessions, then the
 * handle table must be empty. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct baton_server_config cfg;
    harness_init();
    if (size == 0)
        return 0;
    uint8_t *buf = fuzz_dup(data, size);
    keyed_mode = (buf[0] & MODE_KEYED) != 0;
    encrypt_mode = keyed_mode && (buf[0] & MODE_ENCRYPT) != 0;
    fuzz_random_counter = RANDOM_INPUT_FIRST;
    n_granted = 0;
    received_bytes[0] = received_bytes[1] = 0;
    events_lost = 0;
    n_fenced_runs = 0;
    peer_used = 0;
    baton_server_config_default(&cfg);
    cfg.n_threads = 1;
    cfg.max_message_bytes = 1u << 20;
    cfg.total_memory_bytes = 128u << 10;
    cfg.max_scratch_bytes = 64u << 10;
    cfg.max_connections = 1;
    cfg.max_graphs_per_session = MAX_GRAPHS;
    cfg.max_grants_per_session = GRANTS_PER_SESSION;
    cfg.fence_timeout_ms = 1; /* a fence on a write that never comes fails at once */
    cfg.quiet = 1;
    if (keyed_mode) {
        cfg.client_key = client_key;
        cfg.peer_key = peer_key;
        cfg.encrypt = encrypt_mode;
    }
    cfg.n_peers = 1; /* the loopback peer (without keys it cannot be dialled) */
    cfg.peers[0].family = BATON_PEER_FAMILY_IPV4;
    cfg.peers[0].port = LOOP_PORT;
    memcpy(cfg.peers[0].addr, loop_addr, sizeof loop_addr);
    cfg.peer_timeout_ms = 1000;
    if (baton_server_create(&cfg, &server) != 0)
        abort();
    server->peer_connect = loop_connect;
    run_session(buf + 1, size - 1, buf[0] & MODE_RAW, !(buf[0] & MODE_NO_HELLO), BATON_ROLE_CLIENT);
    loop_join(); /* every link closed with its session */
    FUZZ_CHECK(n_shadows == 0, "%zu shadows after every session ended", n_shadows);

    uint64_t used = 0, total = 0;
    uint32_t mapped = 0;
    baton_handles_usage(server->handles, &used, &total, &mapped);
    FUZZ_CHECK(used == 0 && mapped == 0, "after every session ended: %llu bytes, %u buffers",
               (unsigned long long)used, mapped);
    baton_server_destroy(server);
    server = NULL;
    free(buf);
    return 0;
}
