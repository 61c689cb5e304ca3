/* limits_cases PORT PID semantic|deadlines
 *
 * semantic: a batond started by test_limits_cases.sh with
 *   max_message_bytes 1M, max_graph_nodes 16, max_graph_flops 1000,
 *   session_memory_bytes 1M, total_memory_bytes 3M:
 *   a length above the limit and an unknown command (one error frame, then
 *   close), more graph nodes than the limit, a graph over the compute
 *   budget (E_LIMIT, nothing written), a stale handle in a graph,
 *   ALLOC_BUFFER beyond the session quota and beyond the total, graph
 *   scratch counted in the session quota, every command aimed at another
 *   session's buffer (COPY_TENSOR and GRAPH_COMPUTE; badinput.c covers
 *   GET/SET/CLEAR/FREE) gets NOT_OWNED and the bytes stay, and a client
 *   that disconnects in the middle of SET_TENSOR, GET_TENSOR or
 *   GRAPH_COMPUTE has its session freed (DEVICE_INFO free memory, seen from
 *   another client, returns to its value) while nothing else is affected.
 *
 * deadlines: a batond with handshake_timeout 2s, frame_timeout 3s,
 *   send_timeout 2s, idle_timeout 2s: a client that sends one byte a second
 *   (before HELLO, inside a header, inside a payload) is closed at its
 *   deadline, a silent authenticated client at the idle timeout, a client
 *   that never reads a large GET at the send deadline; each frees its slot
 *   (thread and descriptor counts back to the baseline) and its memory.
 *
 * Prints one "ok"/"not ok" line per check; exit 0 iff all passed. */
#include "limits_util.h"

#include "core/ops.h"

static uint16_t g_port;
static int g_pid;

/* ---- raw requests ---- */

/* ALLOC_BUFFER over a raw connection; returns the handle or 0. */
static uint64_t raw_alloc(int fd, uint32_t seq, uint64_t size)
{
    uint8_t p[8], r[16];
    struct baton_frame_header h;
    size_t pos = 0;
    uint64_t handle = 0;
    baton_wire_put_u64(p, size);
    if (put_frame(fd, BATON_CMD_ALLOC_BUFFER, seq, p, 8) != 0 || get_reply(fd, &h, 10000) != 0 ||
        h.status != 0 || h.len != 16 || read_n(fd, r, 16, 10000) != 16)
        return 0;
    baton_wire_get_u64(r, 16, &pos, &handle);
    return handle;
}

/* A raw, HELLO'd connection; exits on failure. */
static int raw_open(void)
{
    int fd = tcp_open(g_port, NULL, 0);
    if (fd < 0 || raw_hello(fd) != 0) {
        printf("not ok - raw connection\n");
        exit(1);
    }
    return fd;
}

/* The request of SET/GET: tensor, u64 offset, u64 n. */
static void put_tensor_range(uint8_t *p, const struct baton_tensor_desc *t, uint64_t n)
{
    baton_wire_encode_tensor(p, t);
    baton_wire_put_u64(p + BATON_TENSOR_DESC_BYTES, 0);
    baton_wire_put_u64(p + BATON_TENSOR_DESC_BYTES + 8, n);
}


/* ---- semantic ---- */

struct owner {
    struct baton_conn *c;
    uint64_t h;
    struct baton_tensor_desc whole;
    uint8_t data[4096];
};

static int owner_intact(struct owner *a)
{
    uint8_t back[4096];
    return baton_get_tensor(a->c, &a->whole, 0, back, sizeof back) == 0 &&
           memcmp(back, a->data, sizeof back) == 0;
}

static void framing_limits(struct baton_conn *obs, struct owner *a)
{
    struct baton_frame_header h;
    uint8_t hb[BATON_FRAME_HEADER_BYTES];
    /* length above the limit (1 MiB) */
    int fd = raw_open();
    encode_frame_header(hb, BATON_CMD_SET_TENSOR, 5, (1u << 20) + 1);
    int ok = write_all(fd, hb, sizeof hb) == 0 && get_reply(fd, &h, 10000) == 0;
    check(ok && h.cmd == BATON_CMD_SET_TENSOR && h.seq == 5 && h.status == (uint16_t)-BATON_E_LIMIT &&
              h.len == 0,
          "length above max_message_bytes: one E_LIMIT frame");
    check(closed_within(fd, 5000), "then the connection is closed");
    close(fd);
    /* at the limit: a semantic error (SET's payload does not match), served */
    fd = raw_open();
    static uint8_t big[1u << 20];
    memset(big, 0, sizeof big);
    ok = put_frame(fd, BATON_CMD_SET_TENSOR, 6, big, sizeof big) == 0 &&
         get_reply(fd, &h, 10000) == 0;
    check(ok && h.seq == 6 && h.status != 0 && h.status != (uint16_t)-BATON_E_LIMIT,
          "a payload of exactly max_message_bytes is read (status %u)", h.status);
    ok = put_frame(fd, BATON_CMD_DEVICE_INFO, 7, NULL, 0) == 0 && get_reply(fd, &h, 10000) == 0;
    check(ok && h.seq == 7 && h.status == 0, "and that connection goes on");
    close(fd);
    /* unknown command */
    fd = raw_open();
    encode_frame_header(hb, BATON_CMD_DEVICE_INFO, 9, 0);
    hb[4] = 200;
    ok = write_all(fd, hb, sizeof hb) == 0 && get_reply(fd, &h, 10000) == 0;
    check(ok && h.cmd == 200 && h.seq == 9 && h.status == (uint16_t)-BATON_E_CMD,
          "unknown command: one E_CMD frame");
    check(closed_within(fd, 5000), "then the connection is closed");
    close(fd);
    check(free_memory(obs) != UINT64_MAX && owner_intact(a),
          "other clients are unaffected by the framing errors");
}

static void graph_limits(struct owner *a)
{
    /* leaves in a buffer of their own: a = 1..4, b = 10, 20, 30, 40, c out */
    uint64_t hg;
    struct baton_tensor_desc lv[3];
    float fa[4] = {1, 2, 3, 4}, fb[4] = {10, 20, 30, 40}, fc[4] = {-1, -1, -1, -1}, out[4];
    int rc = baton_alloc_buffer(a->c, 48, &hg);
    for (int i = 0; rc == 0 && i < 3; i++)
        rc = baton_tensor_init(&lv[i], hg, (uint64_t)i * 16, BATON_TYPE_F32, 4, 1, 1, 1);
    if (rc == 0)
        rc = baton_set_tensor(a->c, &lv[0], 0, fa, 16);
    if (rc == 0)
        rc = baton_set_tensor(a->c, &lv[1], 0, fb, 16);
    if (rc == 0)
        rc = baton_set_tensor(a->c, &lv[2], 0, fc, 16);
    check(rc == 0, "graph leaves stored");

    /* node 0 = a + b, node i = node i-1 + a; the last writes c */
    struct baton_graph_node nodes[17];
    for (int i = 0; i < 17; i++) {
        node_init(&nodes[i], BATON_OP_ADD, 4, 1);
        nodes[i].src[0] = i == 0 ? 1 : (uint32_t)(3 + i - 1);
        nodes[i].src[1] = 0;
    }
    nodes[16].out_leaf = 2;
    struct baton_graph g = {.n_leaves = 3, .n_nodes = 17, .leaves = lv, .nodes = nodes};
    check(baton_graph_compute(a->c, &g) == BATON_E_LIMIT, "17 nodes (limit 16): E_LIMIT");
    rc = baton_get_tensor(a->c, &lv[2], 0, out, 16);
    check(rc == 0 && memcmp(out, fc, 16) == 0, "nothing was written");
    nodes[15].out_leaf = 2;
    g.n_nodes = 16;
    rc = baton_graph_compute(a->c, &g);
    if (rc == 0)
        rc = baton_get_tensor(a->c, &lv[2], 0, out, 16);
    const float want16[4] = {26, 52, 78, 104}; /* b + 16 a */
    check(rc == 0 && memcmp(out, want16, 16) == 0, "16 nodes run and give b + 16a");

    /* compute budget 1000: MUL_MAT 16x16 by 16x16 is 2*16^3 = 8192 */
    uint64_t hm;
    struct baton_tensor_desc mw = {0}, mx = {0}, mo = {0};
    static float w[256], x[256], o[256], back[256];
    for (int i = 0; i < 256; i++) {
        w[i] = (float)(i % 7);
        x[i] = (float)(i % 5);
        o[i] = -3;
    }
    rc = baton_alloc_buffer(a->c, 3 * 1024, &hm);
    if (rc == 0)
        rc = baton_tensor_init(&mw, hm, 0, BATON_TYPE_F32, 16, 16, 1, 1);
    if (rc == 0)
        rc = baton_tensor_init(&mx, hm, 1024, BATON_TYPE_F32, 16, 16, 1, 1);
    if (rc == 0)
        rc = baton_tensor_init(&mo, hm, 2048, BATON_TYPE_F32, 16, 16, 1, 1);
    if (rc == 0)
        rc = baton_set_tensor(a->c, &mw, 0, w, sizeof w);
    if (rc == 0)
        rc = baton_set_tensor(a->c, &mx, 0, x, sizeof x);
    if (rc == 0)
        rc = baton_set_tensor(a->c, &mo, 0, o, sizeof o);
    struct baton_tensor_desc ml[3] = {mw, mx, mo};
    struct baton_graph_node mm;
    node_init(&mm, BATON_OP_MUL_MAT, 16, 16);
    mm.src[0] = 0;
    mm.src[1] = 1;
    mm.out_leaf = 2;
    struct baton_graph gm = {.n_leaves = 3, .n_nodes = 1, .leaves = ml, .nodes = &mm};
    check(rc == 0 && baton_graph_compute(a->c, &gm) == BATON_E_LIMIT,
          "MUL_MAT of 8192 estimated FLOPs (budget 1000): E_LIMIT");
    rc = baton_get_tensor(a->c, &mo, 0, back, sizeof back);
    check(rc == 0 && memcmp(back, o, sizeof o) == 0, "before any node ran: the output is untouched");
    /* 4x4 by 4x4 (128 FLOPs) with W = identity runs and copies x */
    float id[16] = {0}, x4[16], o4[16];
    for (int i = 0; i < 4; i++)
        id[i * 5] = 1;
    for (int i = 0; i < 16; i++)
        x4[i] = (float)(i * 3 - 7);
    rc = baton_tensor_init(&ml[0], hm, 0, BATON_TYPE_F32, 4, 4, 1, 1);
    if (rc == 0)
        rc = baton_tensor_init(&ml[1], hm, 1024, BATON_TYPE_F32, 4, 4, 1, 1);
    if (rc == 0)
        rc = baton_tensor_init(&ml[2], hm, 2048, BATON_TYPE_F32, 4, 4, 1, 1);
    if (rc == 0)
        rc = baton_set_tensor(a->c, &ml[0], 0, id, sizeof id);
    if (rc == 0)
        rc = baton_set_tensor(a->c, &ml[1], 0, x4, sizeof x4);
    node_init(&mm, BATON_OP_MUL_MAT, 4, 4);
    mm.src[0] = 0;
    mm.src[1] = 1;
    mm.out_leaf = 2;
    if (rc == 0)
        rc = baton_graph_compute(a->c, &gm);
    if (rc == 0)
        rc = baton_get_tensor(a->c, &ml[2], 0, o4, sizeof o4);
    check(rc == 0 && memcmp(o4, x4, sizeof x4) == 0, "a graph under the budget runs (I x = x)");

    /* a stale handle as a graph leaf */
    uint64_t hs;
    rc = baton_alloc_buffer(a->c, 64, &hs);
    if (rc == 0)
        rc = baton_free_buffer(a->c, hs);
    struct baton_tensor_desc sl[3] = {lv[0], lv[1], lv[2]};
    sl[1].buffer = hs;
    g = (struct baton_graph){.n_leaves = 3, .n_nodes = 1, .leaves = sl, .nodes = nodes};
    nodes[0].out_leaf = 2;
    check(rc == 0 && baton_graph_compute(a->c, &g) == BATON_E_STALE_HANDLE,
          "a freed buffer as a graph leaf: E_STALE_HANDLE");
    check(baton_free_buffer(a->c, hg) == 0 && baton_free_buffer(a->c, hm) == 0 && owner_intact(a),
          "the session goes on");
}

static void quota_limits(struct baton_conn *obs, struct owner *a)
{
    const uint64_t mib = 1u << 20;
    uint64_t start = free_memory(obs);
    struct baton_conn *q = client_open(g_port);
    struct baton_device_info d;
    uint64_t h1, h2, h3;
    check(baton_device_info(q, &d) == 0 && d.max_buffer_bytes == mib && d.total_memory == 3 * mib,
          "DEVICE_INFO: max buffer = the session quota (1M), total 3M");
    check(baton_alloc_buffer(q, mib + 1, &h1) == BATON_E_QUOTA,
          "ALLOC_BUFFER of 1M + 1 (quota 1M): E_QUOTA");
    check(baton_alloc_buffer(q, 4 * mib, &h1) == BATON_E_LIMIT,
          "ALLOC_BUFFER above the total (4M of 3M): E_LIMIT");
    check(baton_alloc_buffer(q, 600 * 1024, &h1) == 0, "600K fits the quota");
    check(baton_alloc_buffer(q, 600 * 1024, &h2) == BATON_E_QUOTA,
          "another 600K goes past it: E_QUOTA");
    check(baton_free_buffer(q, h1) == 0 && baton_alloc_buffer(q, 600 * 1024, &h2) == 0,
          "after FREE it fits again");
    /* scratch counts too: a session at its quota cannot get an arena */
    struct baton_conn *t = client_open(g_port);
    uint64_t ht;
    struct baton_tensor_desc lv[3];
    int rc = baton_alloc_buffer(t, mib, &ht);
    for (int i = 0; rc == 0 && i < 3; i++)
        rc = baton_tensor_init(&lv[i], ht, (uint64_t)i * 16, BATON_TYPE_F32, 4, 1, 1, 1);
    struct baton_graph_node n[2];
    node_init(&n[0], BATON_OP_ADD, 4, 1);
    n[0].src[0] = 0;
    n[0].src[1] = 1;
    node_init(&n[1], BATON_OP_ADD, 4, 1);
    n[1].src[0] = 3;
    n[1].src[1] = 0;
    n[1].out_leaf = 2;
    struct baton_graph g = {.n_leaves = 3, .n_nodes = 2, .leaves = lv, .nodes = n};
    check(rc == 0 && baton_graph_compute(t, &g) == BATON_E_QUOTA,
          "a session holding its whole quota gets no scratch arena: E_QUOTA");
    /* the total: 3M; a (two pages) + q (600K) + t (1M) leave less than 1M
     * + 600K */
    struct baton_conn *u = client_open(g_port);
    rc = baton_alloc_buffer(u, 900 * 1024, &h3);
    check(rc == 0, "a third session gets 900K");
    struct baton_conn *v = client_open(g_port);
    uint64_t free_before = free_memory(obs), hv;
    check(baton_alloc_buffer(v, 600 * 1024, &hv) == BATON_E_QUOTA,
          "a fourth session's 600K is past the total (%llu bytes free): E_QUOTA",
          (unsigned long long)free_before);
    baton_conn_close(t); /* its 1M comes back */
    check(wait_free_memory(obs, free_before + mib, 5000), "a closed session's memory is free again");
    check(baton_alloc_buffer(v, 600 * 1024, &hv) == 0, "then the 600K fits");
    baton_conn_close(u);
    baton_conn_close(v);
    baton_conn_close(q);
    /* sessions end asynchronously: wait for all their memory */
    check(wait_free_memory(obs, start, 5000), "every closed session's memory is free again");
    check(owner_intact(a), "the first session's bytes are intact");
}

static void not_owned(struct baton_conn *obs, struct owner *a)
{
    uint64_t start = free_memory(obs);
    struct baton_conn *b = client_open(g_port);
    uint64_t hb;
    struct baton_tensor_desc mine, theirs, lv[3];
    uint8_t z[64] = {0};
    int rc = baton_alloc_buffer(b, 4096, &hb);
    if (rc == 0)
        rc = baton_tensor_init(&mine, hb, 0, BATON_TYPE_I32, 16, 1, 1, 1);
    if (rc == 0)
        rc = baton_set_tensor(b, &mine, 0, z, 64);
    if (rc == 0)
        rc = baton_tensor_init(&theirs, a->h, 0, BATON_TYPE_I32, 16, 1, 1, 1);
    check(rc == 0, "a second session with its own buffer");
    check(baton_copy_tensor(b, &theirs, &mine) == BATON_E_NOT_OWNED,
          "COPY_TENSOR from another session's buffer: E_NOT_OWNED");
    check(baton_copy_tensor(b, &mine, &theirs) == BATON_E_NOT_OWNED,
          "COPY_TENSOR into another session's buffer: E_NOT_OWNED");
    for (int i = 0; i < 3; i++)
        baton_tensor_init(&lv[i], hb, (uint64_t)i * 16, BATON_TYPE_F32, 4, 1, 1, 1);
    struct baton_graph_node n;
    node_init(&n, BATON_OP_ADD, 4, 1);
    n.src[0] = 0;
    n.src[1] = 1;
    n.out_leaf = 2;
    struct baton_graph g = {.n_leaves = 3, .n_nodes = 1, .leaves = lv, .nodes = &n};
    baton_tensor_init(&lv[1], a->h, 0, BATON_TYPE_F32, 4, 1, 1, 1);
    check(baton_graph_compute(b, &g) == BATON_E_NOT_OWNED,
          "GRAPH_COMPUTE reading another session's buffer: E_NOT_OWNED");
    baton_tensor_init(&lv[1], hb, 16, BATON_TYPE_F32, 4, 1, 1, 1);
    baton_tensor_init(&lv[2], a->h, 64, BATON_TYPE_F32, 4, 1, 1, 1);
    check(baton_graph_compute(b, &g) == BATON_E_NOT_OWNED,
          "GRAPH_COMPUTE writing another session's buffer: E_NOT_OWNED");
    check(baton_buffer_clear(b, a->h, 0x55) == BATON_E_NOT_OWNED,
          "BUFFER_CLEAR of another session's buffer: E_NOT_OWNED");
    check(owner_intact(a), "the other session's bytes are unchanged");
    baton_conn_close(b);
    check(wait_free_memory(obs, start, 5000), "the second session's memory is free again");
}

static void disconnects(struct baton_conn *obs, struct owner *a)
{
    const uint64_t size = 512 * 1024;
    static uint8_t data[512 * 1024];
    uint64_t before = free_memory(obs);
    struct baton_tensor_desc t;
    uint8_t req[BATON_TENSOR_DESC_BYTES + 16];

    /* SET_TENSOR: header and a fifth of the data, then gone */
    int fd = raw_open();
    uint64_t h = raw_alloc(fd, 2, size);
    baton_tensor_init(&t, h, 0, BATON_TYPE_I32, size / 4, 1, 1, 1);
    put_tensor_range(req, &t, size);
    uint8_t hb[BATON_FRAME_HEADER_BYTES];
    encode_frame_header(hb, BATON_CMD_SET_TENSOR, 3, sizeof req + size);
    int ok = h != 0 && free_memory(obs) < before && write_all(fd, hb, sizeof hb) == 0 &&
             write_all(fd, req, sizeof req) == 0 && write_all(fd, data, size / 5) == 0;
    close(fd);
    check(ok && wait_free_memory(obs, before, 5000),
          "a client gone in the middle of SET_TENSOR: its session's memory is free again");

    /* GET_TENSOR: a small receive buffer, 100 bytes read, then gone */
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(g_port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ok = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 && raw_hello(fd) == 0;
    h = ok ? raw_alloc(fd, 2, size) : 0;
    baton_tensor_init(&t, h, 0, BATON_TYPE_I32, size / 4, 1, 1, 1);
    put_tensor_range(req, &t, size);
    uint8_t some[100];
    ok = h != 0 && put_frame(fd, BATON_CMD_GET_TENSOR, 3, req, sizeof req) == 0 &&
         read_n(fd, some, sizeof some, 5000) == sizeof some;
    close(fd);
    check(ok && wait_free_memory(obs, before, 5000),
          "a client gone in the middle of GET_TENSOR: its session's memory is free again");

    /* GRAPH_COMPUTE: half a graph, then gone; a whole graph, then gone
     * without its reply */
    for (int whole = 0; whole < 2; whole++) {
        fd = raw_open();
        h = raw_alloc(fd, 2, 48);
        uint8_t gp[BATON_GRAPH_HEADER_BYTES + 3 * BATON_TENSOR_DESC_BYTES + BATON_GRAPH_NODE_BYTES];
        baton_wire_put_u32(gp, 3);
        baton_wire_put_u32(gp + 4, 1);
        for (int i = 0; i < 3; i++) {
            baton_tensor_init(&t, h, (uint64_t)i * 16, BATON_TYPE_F32, 4, 1, 1, 1);
            baton_wire_encode_tensor(gp + 8 + i * BATON_TENSOR_DESC_BYTES, &t);
        }
        struct baton_graph_node n;
        node_init(&n, BATON_OP_ADD, 4, 1);
        n.src[0] = 0;
        n.src[1] = 1;
        n.out_leaf = 2;
        baton_wire_encode_node(gp + 8 + 3 * BATON_TENSOR_DESC_BYTES, &n);
        encode_frame_header(hb, BATON_CMD_GRAPH_COMPUTE, 3, sizeof gp);
        ok = h != 0 && write_all(fd, hb, sizeof hb) == 0 &&
             write_all(fd, gp, whole ? sizeof gp : sizeof gp / 2) == 0;
        close(fd);
        check(ok && wait_free_memory(obs, before, 5000),
              "a client gone %s GRAPH_COMPUTE: its session's memory is free again",
              whole ? "right after sending" : "in the middle of");
    }
    check(owner_intact(a), "nothing else was affected");
}

/* ---- deadlines ---- */

/* Sends bytes[0..n) one per second until the server closes the socket.
 * Returns the ms from the first byte to the close (-1: never closed within
 * limit_ms); *sent gets the bytes written. */
static int64_t trickle(int fd, const uint8_t *bytes, size_t n, int limit_ms, size_t *sent)
{
    int64_t t0 = now_ms();
    *sent = 0;
    while (now_ms() - t0 < limit_ms) {
        if (*sent < n && send(fd, bytes + *sent, 1, MSG_NOSIGNAL) == 1)
            (*sent)++;
        if (closed_within(fd, 1000))
            return now_ms() - t0;
    }
    return -1;
}

static void deadlines(void)
{
    int base_threads = proc_threads(g_pid), base_fds = proc_fds(g_pid);
    uint8_t frame[BATON_FRAME_HEADER_BYTES + BATON_HELLO_BYTES];
    struct baton_hello hello = {.version_min = 1, .version_max = 1, .role = BATON_ROLE_CLIENT};
    size_t sent;
    encode_frame_header(frame, BATON_CMD_HELLO, 1, BATON_HELLO_BYTES);
    baton_wire_encode_hello(frame + BATON_FRAME_HEADER_BYTES, &hello);

    /* HELLO, a byte a second: the 2 s handshake deadline (from connect) */
    int fd = tcp_open(g_port, NULL, 0);
    int64_t d = trickle(fd, frame, sizeof frame, 10000, &sent);
    close(fd);
    check(d >= 1900 && d <= 4000 && sent < sizeof frame,
          "HELLO sent a byte a second: closed after %lld ms (handshake deadline 2 s), %zu bytes in",
          (long long)d, sent);
    check(wait_counts(g_pid, base_threads, base_fds, 5000), "its slot is free again");

    /* after HELLO, a header a byte a second: the 3 s frame deadline */
    fd = raw_open();
    uint8_t hb[BATON_FRAME_HEADER_BYTES];
    encode_frame_header(hb, BATON_CMD_DEVICE_INFO, 2, 0);
    int64_t t0 = now_ms();
    struct baton_frame_header h = {0};
    size_t got = 0;
    sent = 0;
    while (now_ms() - t0 < 10000 && got == 0) {
        if (sent < sizeof hb)
            sent += send(fd, hb + sent, 1, MSG_NOSIGNAL) == 1;
        got = get_reply(fd, &h, 1000) == 0;
    }
    d = now_ms() - t0;
    check(got && h.status == (uint16_t)-BATON_E_TIMEOUT && d >= 2900 && d <= 5000,
          "a header sent a byte a second: E_TIMEOUT after %lld ms (frame deadline 3 s)",
          (long long)d);
    check(closed_within(fd, 2000), "then the connection is closed");
    close(fd);

    /* a payload a byte a second: the same deadline, counted from the header */
    fd = raw_open();
    uint64_t hbuf = raw_alloc(fd, 2, 64);
    struct baton_tensor_desc t;
    uint8_t req[BATON_TENSOR_DESC_BYTES + 16], data[64] = {0};
    baton_tensor_init(&t, hbuf, 0, BATON_TYPE_I32, 16, 1, 1, 1);
    put_tensor_range(req, &t, 64);
    encode_frame_header(hb, BATON_CMD_SET_TENSOR, 3, sizeof req + 64);
    t0 = now_ms();
    int ok = hbuf != 0 && write_all(fd, hb, sizeof hb) == 0 && write_all(fd, req, sizeof req) == 0;
    d = ok ? trickle(fd, data, sizeof data, 10000, &sent) : -1;
    d = d >= 0 ? now_ms() - t0 : -1;
    close(fd);
    check(d >= 2900 && d <= 5000 && sent < sizeof data,
          "SET_TENSOR data sent a byte a second: closed after %lld ms, %zu of 64 bytes in",
          (long long)d, sent);
    check(wait_counts(g_pid, base_threads, base_fds, 5000), "its slot is free again");

    /* silent after HELLO: the 2 s idle timeout */
    fd = raw_open();
    t0 = now_ms();
    ok = closed_within(fd, 10000);
    d = now_ms() - t0;
    close(fd);
    check(ok && d >= 1900 && d <= 4000, "a silent client: closed after %lld ms (idle 2 s)",
          (long long)d);

    /* a GET that is never read: the 2 s send deadline */
    struct baton_conn *obs = client_open(g_port);
    uint64_t before = free_memory(obs);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(g_port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    const uint64_t size = 64u << 20;
    ok = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 && raw_hello(fd) == 0;
    hbuf = ok ? raw_alloc(fd, 2, size) : 0;
    baton_tensor_init(&t, hbuf, 0, BATON_TYPE_I32, size / 4, 1, 1, 1);
    put_tensor_range(req, &t, size);
    ok = hbuf != 0 && put_frame(fd, BATON_CMD_GET_TENSOR, 3, req, sizeof req) == 0;
    t0 = now_ms();
    /* the session is freed once the send deadline ends the connection; the
     * client keeps its socket open and reads nothing */
    ok = ok && wait_free_memory(obs, before, 8000);
    d = now_ms() - t0;
    check(ok && d >= 1500, "a 64 MiB GET never read: the session ends after %lld ms (send 2 s)",
          (long long)d);
    close(fd);
    baton_conn_close(obs);
    check(wait_counts(g_pid, base_threads, base_fds, 5000),
          "threads and descriptors back to the baseline");
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    if (argc != 4 || baton_net_parse_port(argv[1], &g_port) != 0 || g_port == 0 ||
        (g_pid = atoi(argv[2])) <= 0) {
        fprintf(stderr, "usage: limits_cases PORT PID semantic|deadlines\n");
        return 2;
    }
    if (strcmp(argv[3], "deadlines") == 0) {
        deadlines();
    } else if (strcmp(argv[3], "semantic") == 0) {
        struct baton_conn *obs = client_open(g_port);
        static struct owner a;
        a.c = client_open(g_port);
        for (size_t i = 0; i < sizeof a.data; i++)
            a.data[i] = (uint8_t)(i * 31 + 5);
        int rc = baton_alloc_buffer(a.c, sizeof a.data, &a.h);
        if (rc == 0)
            rc = baton_tensor_init(&a.whole, a.h, 0, BATON_TYPE_I32, sizeof a.data / 4, 1, 1, 1);
        if (rc == 0)
            rc = baton_set_tensor(a.c, &a.whole, 0, a.data, sizeof a.data);
        check(rc == 0, "a session stores its bytes");
        framing_limits(obs, &a);
        graph_limits(&a);
        quota_limits(obs, &a);
        not_owned(obs, &a);
        disconnects(obs, &a);
        baton_conn_close(a.c);
        baton_conn_close(obs);
    } else {
        fprintf(stderr, "usage: limits_cases PORT PID semantic|deadlines\n");
        return 2;
    }
    printf("%d checks, %d failed\n", g_n, g_failed);
    return g_failed ? 1 : 0;
}
