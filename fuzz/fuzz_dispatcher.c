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
 *              op & 15 = 0: a second session whose own input is the payload
 *              (structured, auto HELLO), served when the first session
 *              next waits for a frame (at most one; nested ones ignored);
 *              op & 16: the payload goes into the stream raw, unframed.
 *
 * Server limits are small so no input can take long: 128 KiB of buffers
 * and scratch in all (BATON_E_QUOTA beyond), 64 KiB of scratch, 1 MiB
 * messages.
 *
 * Properties, for structured sessions without raw records (oracles from
 * docs/PROTOCOL.md, computed here from the requests and replies):
 *   - replies come in request order, each echoing its request's cmd and seq;
 *   - a session that ends cleanly answered every request exactly once; one
 *     that ends on an error sent that error last;
 *   - an error reply has no payload; an OK reply has the payload length its
 *     command defines (HELLO 48, DEVICE_INFO 96, ALLOC 16, GET n, else 0);
 *   - ownership: a request naming a buffer handle (FREE, CLEAR, SET, GET,
 *     COPY, every GRAPH_COMPUTE leaf) succeeds only if this session
 *     allocated that handle and has not freed it;
 * and for every input: once all sessions have ended, the handle table maps
 * no buffer and charges no byte.
 *
 * FUZZ_TRACE=1 in the environment prints every reply of structured sessions.
 */
#include "fuzz_common.h"

#include "baton/status.h"
#include "net/transport.h"
#include "server/server.h"
#include "server/server_internal.h"
#include "wire/wire.h"

#define MAX_OWNED 256u

struct req {
    uint8_t cmd;
    uint32_t seq;
    size_t off; /* payload offset in the stream */
    size_t len; /* payload bytes present in the stream */
    uint64_t declared;
};

/* Streaming reply parser and oracle of one session. */
struct checker {
    const uint8_t *stream; /* the session's input, for request payloads */
    const struct req *reqs;
    size_t n_reqs;
    int active; /* 0: count bytes only (raw session) */
    uint8_t hdr[24];
    size_t hdr_have;
    uint64_t left; /* payload bytes of the current reply still to come */
    uint8_t head[16];
    size_t head_have;
    size_t n_replies;
    uint16_t last_status;
    uint64_t owned[MAX_OWNED];
    size_t n_owned;
};

struct script {
    struct baton_transport base; /* first: the vtable */
    uint8_t *stream;
    size_t len, cap, pos;
    struct req *reqs;
    size_t n_reqs, reqs_cap;
    uint32_t next_seq;
    int raw; /* a raw record went in: order oracles off */
    const uint8_t *child_in;
    size_t child_len, child_at;
    int has_child, child_done;
    struct checker chk;
};

static struct baton_server *server;
static int depth;
static int trace = -1; /* FUZZ_TRACE set: print every reply (debugging seeds) */

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

static void put(struct script *s, const void *p, size_t n)
{
    grow(s, n);
    if (n)
        memcpy(s->stream + s->len, p, n);
    s->len += n;
}

static void frame(struct script *s, uint8_t cmd, const uint8_t *payload, size_t n)
{
    uint8_t hb[BATON_FRAME_HEADER_BYTES];
    struct baton_frame_header h = {.cmd = cmd, .flags = 0, .status = 0, .seq = s->next_seq++,
                                   .len = n};
    baton_wire_encode_header(hb, &h);
    if (s->n_reqs == s->reqs_cap) {
        size_t nc = s->reqs_cap ? 2 * s->reqs_cap : 64;
        struct req *r = realloc(s->reqs, nc * sizeof *r);
        if (!r)
            abort();
        s->reqs = r;
        s->reqs_cap = nc;
    }
    put(s, hb, sizeof hb);
    s->reqs[s->n_reqs++] = (struct req){cmd, h.seq, s->len, n, n};
    put(s, payload, n);
}

static void client_hello(struct script *s)
{
    uint8_t p[BATON_HELLO_BYTES];
    struct baton_hello h;
    memset(&h, 0, sizeof h);
    h.version_min = h.version_max = BATON_PROTOCOL_VERSION;
    h.role = BATON_ROLE_CLIENT;
    memset(h.nonce, 0x4e, sizeof h.nonce);
    baton_wire_encode_hello(p, &h);
    frame(s, BATON_CMD_HELLO, p, sizeof p);
}

/* Builds a structured session's stream from its records. */
static void build(struct script *s, const uint8_t *in, size_t n, int auto_hello, int allow_child)
{
    struct fuzz_reader r = {in, n};
    s->next_seq = 1;
    if (auto_hello)
        client_hello(s);
    while (r.n > 0) {
        uint8_t op = fuzz_u8(&r);
        size_t len = (size_t)fuzz_uint(&r, 2);
        if (len > r.n)
            len = r.n;
        const uint8_t *payload = r.p;
        r.p += len;
        r.n -= len;
        if (op & 16) {
            put(s, payload, len);
            s->raw = 1;
        } else if ((op & 15) == 0) {
            if (allow_child && !s->has_child) {
                s->has_child = 1;
                s->child_in = payload;
                s->child_len = len;
                s->child_at = s->len;
            }
        } else {
            frame(s, op & 15, payload, len);
        }
    }
}

/* ---- oracle ---- */

static int owned_find(const struct checker *c, uint64_t h)
{
    for (size_t i = 0; i < c->n_owned; i++)
        if (c->owned[i] == h)
            return (int)i;
    return -1;
}

static void check_owned(const struct checker *c, uint64_t h, const char *what)
{
    FUZZ_CHECK(owned_find(c, h) >= 0, "%s succeeded on handle 0x%llx not owned by the session",
               what, (unsigned long long)h);
}

/* The request payload's u64 at off, if present. */
static int req_u64(const struct checker *c, const struct req *q, size_t off, uint64_t *v)
{
    if (q->len < 8 || off > q->len - 8)
        return -1;
    *v = fuzz_le(c->stream + q->off + off, 8);
    return 0;
}

static uint64_t expected_ok_len(const struct checker *c, const struct req *q)
{
    uint64_t n = 0;
    switch (q->cmd) {
    case BATON_CMD_HELLO:
        return BATON_HELLO_BYTES;
    case BATON_CMD_DEVICE_INFO:
        return BATON_DEVICE_INFO_BYTES;
    case BATON_CMD_ALLOC_BUFFER:
        return 16;
    case BATON_CMD_GET_TENSOR:
        if (req_u64(c, q, BATON_TENSOR_DESC_BYTES + 8, &n) != 0)
            FUZZ_CHECK(0, "GET without its n succeeded");
        return n;
    case BATON_CMD_GRANT_WRITE:
        return BATON_GRANT_ID_BYTES;
    case BATON_CMD_COPY_TENSOR_TO:
        return BATON_COPY_RESULT_BYTES;
    default:
        return 0;
    }
}

/* A whole reply (header and payload) has been seen. */
static void reply_done(struct checker *c)
{
    const uint8_t *h = c->hdr;
    uint16_t status = (uint16_t)fuzz_le(h + 6, 2);
    size_t i = c->n_replies++;
    c->last_status = status;
    if (trace)
        fprintf(stderr, "  session depth %d reply %zu: cmd %u seq %u status %s len %llu\n", depth,
                i, h[4], (unsigned)fuzz_le(h + 8, 4),
                status ? baton_status_name(-(int)status) : "OK",
                (unsigned long long)fuzz_le(h + 16, 8));
    if (!c->active)
        return;
    FUZZ_CHECK(i < c->n_reqs, "reply %zu without a request", i);
    const struct req *q = &c->reqs[i];
    FUZZ_CHECK(h[4] == q->cmd && fuzz_le(h + 8, 4) == q->seq,
               "reply %zu: cmd %u seq %llu, request cmd %u seq %u", i, h[4],
               (unsigned long long)fuzz_le(h + 8, 4), q->cmd, q->seq);
    uint64_t len = fuzz_le(h + 16, 8);
    if (status != 0) {
        FUZZ_CHECK(len == 0, "error reply with a %llu-byte payload", (unsigned long long)len);
        return;
    }
    uint64_t want = expected_ok_len(c, q);
    FUZZ_CHECK(len == want, "reply %zu (cmd %u): %llu payload bytes, expected %llu", i, q->cmd,
               (unsigned long long)len, (unsigned long long)want);
    uint64_t a = 0, b = 0;
    switch (q->cmd) {
    case BATON_CMD_ALLOC_BUFFER: {
        uint64_t handle = fuzz_le(c->head, 8);
        FUZZ_CHECK(owned_find(c, handle) < 0, "ALLOC returned a live handle again");
        req_u64(c, q, 0, &a);
        FUZZ_CHECK(fuzz_le(c->head + 8, 8) == a, "ALLOC reply size differs");
        if (c->n_owned < MAX_OWNED)
            c->owned[c->n_owned++] = handle;
        break;
    }
    case BATON_CMD_FREE_BUFFER: {
        FUZZ_CHECK(req_u64(c, q, 0, &a) == 0, "FREE without a handle succeeded");
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
        FUZZ_CHECK(req_u64(c, q, 0, &a) == 0, "request without a handle succeeded");
        check_owned(c, a, baton_cmd_name(q->cmd));
        break;
    case BATON_CMD_COPY_TENSOR:
        FUZZ_CHECK(req_u64(c, q, 0, &a) == 0 && req_u64(c, q, BATON_TENSOR_DESC_BYTES, &b) == 0,
                   "COPY without handles succeeded");
        check_owned(c, a, "COPY_TENSOR src");
        check_owned(c, b, "COPY_TENSOR dst");
        break;
    case BATON_CMD_GRAPH_COMPUTE: {
        uint64_t nl = q->len >= 4 ? fuzz_le(c->stream + q->off, 4) : 0;
        for (uint64_t k = 0; k < nl; k++) {
            FUZZ_CHECK(req_u64(c, q, 8 + 88 * k, &a) == 0, "graph leaf missing");
            check_owned(c, a, "GRAPH_COMPUTE leaf");
        }
        break;
    }
    default:
        break;
    }
}

static void checker_feed(struct checker *c, const uint8_t *p, size_t n)
{
    while (n > 0) {
        if (c->hdr_have < sizeof c->hdr) {
            size_t k = sizeof c->hdr - c->hdr_have;
            if (k > n)
                k = n;
            memcpy(c->hdr + c->hdr_have, p, k);
            c->hdr_have += k;
            p += k;
            n -= k;
            if (c->hdr_have == sizeof c->hdr) {
                FUZZ_CHECK(memcmp(c->hdr, "BATN", 4) == 0, "reply without magic");
                c->left = fuzz_le(c->hdr + 16, 8);
                c->head_have = 0;
                if (c->left == 0) {
                    reply_done(c);
                    c->hdr_have = 0;
                }
            }
            continue;
        }
        size_t k = c->left < n ? (size_t)c->left : n;
        if (c->head_have < sizeof c->head) {
            size_t h = sizeof c->head - c->head_have;
            if (h > k)
                h = k;
            memcpy(c->head + c->head_have, p, h);
            c->head_have += h;
        }
        p += k;
        n -= k;
        c->left -= k;
        if (c->left == 0) {
            reply_done(c);
            c->hdr_have = 0;
        }
    }
}

/* ---- transport over a script ---- */

static void run_session(const uint8_t *in, size_t n, int raw, int auto_hello);

static struct script *as_script(struct baton_transport *t)
{
    return (struct script *)t;
}

static int sc_wait_readable(struct baton_transport *t, uint64_t deadline)
{
    struct script *s = as_script(t);
    if (s->has_child && !s->child_done && s->pos >= s->child_at) {
        s->child_done = 1;
        depth++;
        run_session(s->child_in, s->child_len, 0, 1);
        depth--;
    }
    return s->pos < s->len ? 0 : BATON_E_IO;
}

static int sc_recv_exact(struct baton_transport *t, void *buf, size_t n, uint64_t deadline)
{
    struct script *s = as_script(t);
    size_t avail = s->len - s->pos;
    size_t k = n < avail ? n : avail;
    if (k)
        memcpy(buf, s->stream + s->pos, k);
    s->pos += k;
    return k == n ? 0 : BATON_E_IO;
}

static int sc_send_all(struct baton_transport *t, const struct iovec *iov, int iovcnt,
                       uint64_t deadline)
{
    struct script *s = as_script(t);
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

static void run_session(const uint8_t *in, size_t n, int raw, int auto_hello)
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
    build(&s, in, n, auto_hello, depth == 0);
    s.chk.stream = s.stream;
    s.chk.reqs = s.reqs;
    s.chk.n_reqs = s.n_reqs;
    s.chk.active = !s.raw;
    int rc = baton_server_serve_transport(server, &s.base, "fuzz");
    if (s.has_child && !s.child_done) {
        /* the first session ended before reaching it: run it afterwards */
        s.child_done = 1;
        depth++;
        run_session(s.child_in, s.child_len, 0, 1);
        depth--;
    }
    if (s.chk.active) {
        FUZZ_CHECK(s.chk.hdr_have == 0 && s.chk.left == 0, "reply cut short");
        if (rc == 0)
            FUZZ_CHECK(s.chk.n_replies == s.n_reqs, "clean end: %zu replies to %zu requests",
                       s.chk.n_replies, s.n_reqs);
        else
            FUZZ_CHECK(s.chk.n_replies >= 1 && s.chk.n_replies <= s.n_reqs &&
                           s.chk.last_status != 0,
                       "ended with %d after %zu replies to %zu requests (last status %u)", rc,
                       s.chk.n_replies, s.n_reqs, s.chk.last_status);
    }
    free(s.stream);
    free(s.reqs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct baton_server_config cfg;
    if (trace < 0)
        trace = getenv("FUZZ_TRACE") != NULL;
    if (size == 0)
        return 0;
    uint8_t *buf = fuzz_dup(data, size);
    baton_server_config_default(&cfg);
    cfg.n_threads = 1;
    cfg.max_message_bytes = 1u << 20;
    cfg.total_memory_bytes = 128u << 10;
    cfg.max_scratch_bytes = 64u << 10;
    cfg.max_connections = 1;
    cfg.quiet = 1;
    if (baton_server_create(&cfg, &server) != 0)
        abort();
    run_session(buf + 1, size - 1, buf[0] & 1, !(buf[0] & 2));

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
