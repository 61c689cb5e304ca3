/* src/server: the dispatcher served in-process over socketpairs
 * (baton_server_serve_fd + baton_conn_adopt_fd, as `--servers local` uses
 * them), raw frames for the framing errors, and the in-memory transport. */
#include <poll.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "baton/client.h"
#include "baton/status.h"
#include "core/limits.h"
#include "net/transport.h"
#include "server/server.h"
#include "wire/wire.h"

#define TOTAL_MEMORY (16ull << 20)

static struct baton_server *new_server(int frame_timeout_ms)
{
    struct baton_server_config cfg;
    struct baton_server *s;
    baton_server_config_default(&cfg);
    cfg.total_memory_bytes = TOTAL_MEMORY;
    cfg.max_scratch_bytes = 1u << 20;
    cfg.quiet = 1;
    cfg.frame_timeout_ms = frame_timeout_ms;
    cfg.max_message_bytes = 1u << 20;
    cfg.max_connections = 4;
    assert_int_equal(baton_server_create(&cfg, &s), 0);
    return s;
}

/* A served socketpair end; returns the client's end. */
static int raw_conn(struct baton_server *s)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    assert_int_equal(baton_server_serve_fd(s, sv[0]), 0);
    return sv[1];
}

static struct baton_conn *client(struct baton_server *s)
{
    struct baton_conn *c;
    assert_int_equal(baton_conn_adopt_fd(raw_conn(s), 10000, &c), 0);
    return c;
}

static void wait_idle(struct baton_server *s)
{
    for (int i = 0; i < 1000 && baton_server_active_connections(s) > 0; i++)
        poll(NULL, 0, 5);
    assert_int_equal(baton_server_active_connections(s), 0);
}

/* ---- raw frame helpers ---- */

static void put_frame(int fd, uint8_t cmd, uint32_t seq, const void *payload, uint64_t len)
{
    uint8_t hb[BATON_FRAME_HEADER_BYTES];
    struct baton_frame_header h = {.cmd = cmd, .seq = seq, .len = len};
    baton_wire_encode_header(hb, &h);
    assert_int_equal(write(fd, hb, sizeof hb), (ssize_t)sizeof hb);
    /* after a framing error in the header the server closes without
     * reading the payload, so this write may fail (EPIPE; SIGPIPE is
     * ignored in main) */
    if (len && write(fd, payload, len) < 0)
        return;
}

/* Reads n bytes with a generous bound; returns bytes read (< n on EOF). */
static size_t get_bytes(int fd, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        assert_int_equal(poll(&p, 1, 20000), 1);
        ssize_t r = read(fd, (uint8_t *)buf + got, n - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    return got;
}

/* Reads a reply header field by field: error frames may carry cmd 0 or an
 * unknown cmd, which baton_wire_decode_header (a request decoder) rejects. */
static void get_reply(int fd, struct baton_frame_header *h)
{
    uint8_t hb[BATON_FRAME_HEADER_BYTES];
    size_t pos = 4;
    uint32_t reserved;
    assert_int_equal(get_bytes(fd, hb, sizeof hb), sizeof hb);
    assert_memory_equal(hb, "BATN", 4);
    assert_int_equal(baton_wire_get_u8(hb, 24, &pos, &h->cmd), 0);
    assert_int_equal(baton_wire_get_u8(hb, 24, &pos, &h->flags), 0);
    assert_int_equal(baton_wire_get_u16(hb, 24, &pos, &h->status), 0);
    assert_int_equal(baton_wire_get_u32(hb, 24, &pos, &h->seq), 0);
    assert_int_equal(baton_wire_get_u32(hb, 24, &pos, &reserved), 0);
    assert_int_equal(baton_wire_get_u64(hb, 24, &pos, &h->len), 0);
    assert_int_equal(h->flags, 0);
    assert_int_equal(reserved, 0);
}

static void expect_eof(int fd)
{
    uint8_t b;
    assert_int_equal(get_bytes(fd, &b, 1), 0);
}

static void raw_hello(int fd)
{
    uint8_t p[BATON_HELLO_BYTES], r[BATON_HELLO_BYTES];
    struct baton_hello h = {.version_min = 1, .version_max = 1, .role = BATON_ROLE_CLIENT};
    struct baton_frame_header rh;
    baton_wire_encode_hello(p, &h);
    put_frame(fd, BATON_CMD_HELLO, 77, p, sizeof p);
    get_reply(fd, &rh);
    assert_int_equal(rh.cmd, BATON_CMD_HELLO);
    assert_int_equal(rh.seq, 77);
    assert_int_equal(rh.status, 0);
    assert_int_equal(rh.len, BATON_HELLO_BYTES);
    assert_int_equal(get_bytes(fd, r, sizeof r), sizeof r);
}

/* ---- tests ---- */

static void test_hello_and_device_info(void **state)
{
    struct baton_server *s = new_server(10000);
    struct baton_conn *c = client(s);
    const struct baton_hello *sh = baton_conn_server_hello(c);
    assert_int_equal(sh->version_min, 1);
    assert_int_equal(sh->version_max, 1);
    assert_int_equal(sh->role, BATON_ROLE_SERVER);
    assert_int_equal(sh->features & BATON_FEATURE_AUTH, 0);
    struct baton_device_info d;
    assert_int_equal(baton_device_info(c, &d), 0);
    assert_string_equal(d.name, "batond cpu");
    assert_int_equal(d.total_memory, TOTAL_MEMORY);
    assert_int_equal(d.free_memory, TOTAL_MEMORY);
    assert_int_equal(d.alignment, 64);
    assert_int_equal(d.max_buffer_bytes, TOTAL_MEMORY);
    /* F32, F16, Q4_0, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K (10..14), IQ4_NL (20),
     * IQ4_XS (23), I32 and BF16 execute in this build */
    assert_int_equal(d.type_mask, (1ull << 0) | (1ull << 1) | (1ull << 2) | (1ull << 6) |
                                      (1ull << 7) | (1ull << 8) | (1ull << 10) | (1ull << 11) |
                                      (1ull << 12) | (1ull << 13) | (1ull << 14) | (1ull << 20) |
                                      (1ull << 23) | (1ull << 26) | (1ull << 30));
    /* ops 1..14 (GELU, 14, with Gemma 3) */
    assert_int_equal(d.op_mask, 0x7FFEull);
    assert_int_equal(d.n_threads, 1);
    assert_int_equal(d.version, 1);
    uint64_t h;
    assert_int_equal(baton_alloc_buffer(c, 5000, &h), 0);
    assert_int_equal(baton_device_info(c, &d), 0);
    assert_int_equal(d.free_memory, TOTAL_MEMORY - 8192); /* whole pages */
    baton_conn_close(c);
    baton_server_destroy(s);
}

static void test_set_get_roundtrip_and_stats(void **state)
{
    struct baton_server *s = new_server(10000);
    struct baton_conn *c = client(s);
    struct baton_tensor_desc t;
    uint64_t h;
    float data[24], back[24] = {0};
    for (int i = 0; i < 24; i++)
        data[i] = (float)i * 1.5f - 7.0f;
    assert_int_equal(baton_alloc_buffer(c, 4096, &h), 0);
    assert_int_equal(baton_tensor_init(&t, h, 128, BATON_TYPE_F32, 4, 6, 1, 1), 0);
    assert_int_equal(t.nbytes, 96);
    baton_conn_reset_stats(c);
    assert_int_equal(baton_set_tensor(c, &t, 0, data, sizeof data), 0);
    assert_int_equal(baton_get_tensor(c, &t, 0, back, sizeof back), 0);
    assert_memory_equal(data, back, sizeof data);
    /* a part of the tensor, at a byte offset inside it */
    float part[3];
    assert_int_equal(baton_get_tensor(c, &t, 40, part, sizeof part), 0);
    assert_memory_equal(part, &data[10], sizeof part);
    struct baton_cmd_stats st = baton_conn_stats(c, BATON_CMD_SET_TENSOR);
    assert_int_equal(st.count, 1);
    assert_int_equal(st.request_bytes, 24 + 104 + 96);
    assert_int_equal(st.reply_bytes, 24);
    st = baton_conn_stats(c, BATON_CMD_GET_TENSOR);
    assert_int_equal(st.count, 2);
    assert_int_equal(st.request_bytes, 2 * (24 + 104));
    assert_int_equal(st.reply_bytes, 24 + 96 + 24 + 12);
    st = baton_conn_stats(c, 0);
    assert_int_equal(st.count, 0);
    /* the bytes around the tensor were not touched */
    struct baton_tensor_desc whole;
    uint8_t all[4096];
    assert_int_equal(baton_tensor_init(&whole, h, 0, BATON_TYPE_I32, 1024, 1, 1, 1), 0);
    assert_int_equal(baton_get_tensor(c, &whole, 0, all, sizeof all), 0);
    for (int i = 0; i < 128; i++)
        assert_int_equal(all[i], 0);
    assert_memory_equal(all + 128, data, sizeof data);
    for (int i = 128 + 96; i < 4096; i++)
        assert_int_equal(all[i], 0);
    baton_conn_close(c);
    baton_server_destroy(s);
}

static void test_semantic_errors_keep_connection(void **state)
{
    struct baton_server *s = new_server(10000);
    struct baton_conn *c = client(s);
    struct baton_tensor_desc t;
    uint64_t h;
    uint8_t data[256] = {1, 2, 3};
    assert_int_equal(baton_alloc_buffer(c, 256, &h), 0);

    /* unknown type id 3 (retired/unknown) */
    assert_int_equal(baton_tensor_init(&t, h, 0, BATON_TYPE_F32, 4, 1, 1, 1), 0);
    t.type = 3;
    assert_int_equal(baton_set_tensor(c, &t, 0, data, 16), BATON_E_TYPE);
    assert_int_equal(baton_get_tensor(c, &t, 0, data, 16), BATON_E_TYPE);
    /* Q8_0 with ne[0] = 33: not a multiple of the 32-element block */
    memset(&t, 0, sizeof t);
    t.buffer = h;
    t.type = BATON_TYPE_Q8_0;
    t.ne[0] = 33;
    t.ne[1] = t.ne[2] = t.ne[3] = 1;
    t.nb[0] = 34;
    t.nb[1] = t.nb[2] = t.nb[3] = 34 * 2;
    assert_int_equal(baton_set_tensor(c, &t, 0, data, 34), BATON_E_SHAPE);
    /* non-contiguous strides */
    assert_int_equal(baton_tensor_init(&t, h, 0, BATON_TYPE_F32, 4, 2, 1, 1), 0);
    t.nb[1] = 32;
    assert_int_equal(baton_set_tensor(c, &t, 0, data, 16), BATON_E_SHAPE);
    /* extent past the buffer: 64 floats at offset 4 in a 256-byte buffer */
    assert_int_equal(baton_tensor_init(&t, h, 4, BATON_TYPE_F32, 64, 1, 1, 1), 0);
    assert_int_equal(baton_set_tensor(c, &t, 0, data, 256), BATON_E_BOUNDS);
    assert_int_equal(baton_get_tensor(c, &t, 0, data, 4), BATON_E_BOUNDS);
    /* a range outside the tensor */
    assert_int_equal(baton_tensor_init(&t, h, 0, BATON_TYPE_F32, 8, 1, 1, 1), 0);
    assert_int_equal(baton_set_tensor(c, &t, 16, data, 17), BATON_E_BOUNDS);
    assert_int_equal(baton_get_tensor(c, &t, 33, data, 0), BATON_E_BOUNDS);
    assert_int_equal(baton_get_tensor(c, &t, UINT64_MAX, data, 2), BATON_E_BOUNDS);
    /* allocation limits */
    uint64_t h2;
    assert_int_equal(baton_alloc_buffer(c, 0, &h2), BATON_E_INVAL);
    assert_int_equal(baton_alloc_buffer(c, TOTAL_MEMORY + 1, &h2), BATON_E_LIMIT);
    assert_int_equal(baton_alloc_buffer(c, TOTAL_MEMORY, &h2), BATON_E_QUOTA);
    /* a freed handle */
    assert_int_equal(baton_alloc_buffer(c, 64, &h2), 0);
    assert_int_equal(baton_free_buffer(c, h2), 0);
    assert_int_equal(baton_free_buffer(c, h2), BATON_E_STALE_HANDLE);
    assert_int_equal(baton_tensor_init(&t, h2, 0, BATON_TYPE_F32, 4, 1, 1, 1), 0);
    assert_int_equal(baton_set_tensor(c, &t, 0, data, 16), BATON_E_STALE_HANDLE);
    assert_int_equal(baton_buffer_clear(c, h2, 1), BATON_E_STALE_HANDLE);
    assert_int_equal(baton_buffer_clear(c, 0, 1), BATON_E_STALE_HANDLE);
    /* COPY_TENSOR: source larger than destination */
    struct baton_tensor_desc big, small;
    assert_int_equal(baton_tensor_init(&big, h, 0, BATON_TYPE_F32, 8, 1, 1, 1), 0);
    assert_int_equal(baton_tensor_init(&small, h, 128, BATON_TYPE_F32, 7, 1, 1, 1), 0);
    assert_int_equal(baton_copy_tensor(c, &big, &small), BATON_E_BOUNDS);
    /* commands of later issues */
    assert_false(baton_conn_is_dead(c));
    /* and the connection still works, byte-exact */
    uint8_t pattern[32], back[32];
    for (int i = 0; i < 32; i++)
        pattern[i] = (uint8_t)(0xA0 + i);
    assert_int_equal(baton_set_tensor(c, &big, 0, pattern, 32), 0);
    assert_int_equal(baton_get_tensor(c, &big, 0, back, 32), 0);
    assert_memory_equal(pattern, back, 32);
    baton_conn_close(c);
    baton_server_destroy(s);
}

static void test_copy_and_clear(void **state)
{
    struct baton_server *s = new_server(10000);
    struct baton_conn *c = client(s);
    uint64_t ha, hb;
    struct baton_tensor_desc src, dst, whole_b;
    int32_t v[6] = {1, -2, 3, -4, 5, -6}, out[8];
    assert_int_equal(baton_alloc_buffer(c, 64, &ha), 0);
    assert_int_equal(baton_alloc_buffer(c, 32, &hb), 0);
    assert_int_equal(baton_tensor_init(&src, ha, 8, BATON_TYPE_I32, 6, 1, 1, 1), 0);
    assert_int_equal(baton_tensor_init(&dst, hb, 4, BATON_TYPE_I32, 3, 2, 1, 1), 0);
    assert_int_equal(baton_tensor_init(&whole_b, hb, 0, BATON_TYPE_I32, 8, 1, 1, 1), 0);
    assert_int_equal(baton_buffer_clear(c, hb, 0x11), 0);
    assert_int_equal(baton_set_tensor(c, &src, 0, v, sizeof v), 0);
    assert_int_equal(baton_copy_tensor(c, &src, &dst), 0);
    assert_int_equal(baton_get_tensor(c, &whole_b, 0, out, sizeof out), 0);
    assert_int_equal(out[0], 0x11111111);
    assert_memory_equal(&out[1], v, sizeof v);
    assert_int_equal(out[7], 0x11111111);
    /* a smaller source into a larger destination copies src.nbytes */
    struct baton_tensor_desc two;
    assert_int_equal(baton_tensor_init(&two, ha, 0, BATON_TYPE_I32, 2, 1, 1, 1), 0);
    assert_int_equal(baton_copy_tensor(c, &two, &whole_b), 0);
    assert_int_equal(baton_get_tensor(c, &whole_b, 0, out, sizeof out), 0);
    assert_int_equal(out[0], 0);
    assert_int_equal(out[1], 0);
    assert_int_equal(out[2], v[1]);
    assert_int_equal(baton_buffer_clear(c, hb, 0), 0);
    assert_int_equal(baton_get_tensor(c, &whole_b, 0, out, sizeof out), 0);
    for (int i = 0; i < 8; i++)
        assert_int_equal(out[i], 0);
    baton_conn_close(c);
    baton_server_destroy(s);
}

static void test_other_session(void **state)
{
    struct baton_server *s = new_server(10000);
    struct baton_conn *a = client(s), *b = client(s);
    uint64_t ha, hb;
    struct baton_tensor_desc ta, tb;
    uint8_t secret[16], probe[16] = {0}, back[16];
    for (int i = 0; i < 16; i++)
        secret[i] = (uint8_t)(0x5A ^ i);
    assert_int_equal(baton_alloc_buffer(a, 16, &ha), 0);
    assert_int_equal(baton_alloc_buffer(b, 16, &hb), 0);
    assert_int_equal(baton_tensor_init(&ta, ha, 0, BATON_TYPE_I32, 4, 1, 1, 1), 0);
    assert_int_equal(baton_tensor_init(&tb, hb, 0, BATON_TYPE_I32, 4, 1, 1, 1), 0);
    assert_int_equal(baton_set_tensor(a, &ta, 0, secret, 16), 0);
    /* b names a's handle in every command */
    assert_int_equal(baton_get_tensor(b, &ta, 0, probe, 16), BATON_E_NOT_OWNED);
    assert_int_equal(baton_set_tensor(b, &ta, 0, probe, 16), BATON_E_NOT_OWNED);
    assert_int_equal(baton_copy_tensor(b, &ta, &tb), BATON_E_NOT_OWNED);
    assert_int_equal(baton_copy_tensor(b, &tb, &ta), BATON_E_NOT_OWNED);
    assert_int_equal(baton_buffer_clear(b, ha, 0xFF), BATON_E_NOT_OWNED);
    assert_int_equal(baton_free_buffer(b, ha), BATON_E_NOT_OWNED);
    for (int i = 0; i < 16; i++)
        assert_int_equal(probe[i], 0);
    /* a's bytes are unchanged */
    assert_int_equal(baton_get_tensor(a, &ta, 0, back, 16), 0);
    assert_memory_equal(back, secret, 16);
    /* when a's session ends its buffers go: the handle is stale for everyone */
    baton_conn_close(a);
    for (int i = 0; i < 1000 && baton_server_active_connections(s) > 1; i++)
        poll(NULL, 0, 5);
    assert_int_equal(baton_get_tensor(b, &ta, 0, probe, 16), BATON_E_STALE_HANDLE);
    struct baton_device_info d;
    assert_int_equal(baton_device_info(b, &d), 0);
    assert_int_equal(d.free_memory, TOTAL_MEMORY - 4096);
    baton_conn_close(b);
    wait_idle(s);
    baton_server_destroy(s);
}

/* ADD of two leaves into an out leaf; SCALE of a node; a source index out
 * of range. */
static void test_graph_compute(void **state)
{
    struct baton_server *s = new_server(10000);
    struct baton_conn *c = client(s);
    uint64_t h;
    struct baton_tensor_desc leaves[3];
    struct baton_graph_node nodes[2];
    float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {0.5f, -1, 10, 0, -3, 0.25f}, out[6];
    assert_int_equal(baton_alloc_buffer(c, 3 * 24, &h), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(baton_tensor_init(&leaves[i], h, (uint64_t)i * 24, BATON_TYPE_F32, 3, 2,
                                           1, 1),
                         0);
    assert_int_equal(baton_set_tensor(c, &leaves[0], 0, a, sizeof a), 0);
    assert_int_equal(baton_set_tensor(c, &leaves[1], 0, b, sizeof b), 0);
    memset(nodes, 0, sizeof nodes);
    for (int j = 0; j < 2; j++) {
        for (int k = 0; k < BATON_MAX_SRC; k++)
            nodes[j].src[k] = BATON_SRC_NONE;
        nodes[j].type = BATON_TYPE_F32;
        nodes[j].ne[0] = 3;
        nodes[j].ne[1] = 2;
        nodes[j].ne[2] = nodes[j].ne[3] = 1;
    }
    nodes[0].op = BATON_OP_ADD;
    nodes[0].src[0] = 0;
    nodes[0].src[1] = 1;
    nodes[0].out_leaf = BATON_SRC_NONE;
    nodes[1].op = BATON_OP_SCALE;
    nodes[1].src[0] = 3; /* node 0 */
    float two = 2.0f;
    memcpy(&nodes[1].params[0], &two, 4);
    nodes[1].out_leaf = 2;
    struct baton_graph g = {.n_leaves = 3, .n_nodes = 2, .leaves = leaves, .nodes = nodes};
    assert_int_equal(baton_graph_compute(c, &g), 0);
    assert_int_equal(baton_get_tensor(c, &leaves[2], 0, out, sizeof out), 0);
    const float want[6] = {3, 2, 26, 8, 4, 12.5f}; /* (a + b) * 2 */
    assert_memory_equal(out, want, sizeof want);

    /* source index out of range: node 0 may name leaves 0..2 only */
    nodes[0].src[1] = 3;
    assert_int_equal(baton_graph_compute(c, &g), BATON_E_GRAPH);
    nodes[0].src[1] = 1;
    /* a leaf past its buffer */
    leaves[2].offset = 3 * 24 - 4;
    assert_int_equal(baton_graph_compute(c, &g), BATON_E_BOUNDS);
    leaves[2].offset = 48;
    /* a leaf of another session */
    struct baton_conn *o = client(s);
    assert_int_equal(baton_graph_compute(o, &g), BATON_E_NOT_OWNED);
    baton_conn_close(o);
    /* still fine afterwards */
    assert_int_equal(baton_graph_compute(c, &g), 0);
    baton_conn_close(c);
    baton_server_destroy(s);
}

static void test_pipelining(void **state)
{
    struct baton_server *s = new_server(10000);
    struct baton_conn *c = client(s);
    uint64_t h;
    enum { N = 100 };
    struct baton_tensor_desc t[N];
    static int32_t vals[N][16], back[N][16];
    assert_int_equal(baton_alloc_buffer(c, N * 64, &h), 0);
    for (int i = 0; i < N; i++) {
        assert_int_equal(baton_tensor_init(&t[i], h, (uint64_t)i * 64, BATON_TYPE_I32, 16, 1, 1, 1),
                         0);
        for (int k = 0; k < 16; k++)
            vals[i][k] = i * 1000 + k;
    }
    baton_conn_reset_stats(c);
    /* more than the 64-request ring: submit drains as needed */
    for (int i = 0; i < N; i++)
        assert_int_equal(baton_submit_set_tensor(c, &t[i], 0, vals[i], 64), 0);
    for (int i = 0; i < N; i++)
        assert_int_equal(baton_submit_get_tensor(c, &t[i], 0, back[i], 64), 0);
    assert_int_equal(baton_conn_wait(c), 0);
    assert_memory_equal(vals, back, sizeof vals);
    assert_int_equal(baton_conn_stats(c, BATON_CMD_SET_TENSOR).count, N);
    assert_int_equal(baton_conn_stats(c, BATON_CMD_GET_TENSOR).reply_bytes, N * (24 + 64));
    /* an error in the middle is reported once, the rest still done */
    memset(back, 0, sizeof back);
    struct baton_tensor_desc bad = t[0];
    bad.buffer = 12345;
    assert_int_equal(baton_submit_get_tensor(c, &t[1], 0, back[1], 64), 0);
    assert_int_equal(baton_submit_get_tensor(c, &bad, 0, back[2], 64), 0);
    assert_int_equal(baton_submit_get_tensor(c, &t[3], 0, back[3], 64), 0);
    assert_int_equal(baton_conn_wait(c), BATON_E_STALE_HANDLE);
    assert_memory_equal(back[1], vals[1], 64);
    assert_memory_equal(back[3], vals[3], 64);
    assert_int_equal(baton_conn_wait(c), 0);
    /* a large SET after an outstanding GET does not deadlock */
    size_t big = 8u << 20;
    uint64_t hb;
    uint8_t *src = malloc(big), *dst = malloc(big);
    assert_non_null(src);
    assert_non_null(dst);
    for (size_t i = 0; i < big; i++)
        src[i] = (uint8_t)(i * 31 + (i >> 13));
    assert_int_equal(baton_alloc_buffer(c, big, &hb), 0);
    struct baton_tensor_desc tb;
    assert_int_equal(baton_tensor_init(&tb, hb, 0, BATON_TYPE_I32, big / 4, 1, 1, 1), 0);
    /* max_message_bytes is 1 MiB here: 8 parts each way */
    for (size_t off = 0; off < big; off += 1u << 19)
        assert_int_equal(baton_submit_set_tensor(c, &tb, off, src + off, 1u << 19), 0);
    for (size_t off = 0; off < big; off += 1u << 19) {
        assert_int_equal(baton_submit_get_tensor(c, &tb, off, dst + off, 1u << 19), 0);
        assert_int_equal(baton_submit_set_tensor(c, &tb, off, src + off, 1u << 19), 0);
    }
    assert_int_equal(baton_conn_wait(c), 0);
    assert_memory_equal(src, dst, big);
    free(src);
    free(dst);
    baton_conn_close(c);
    baton_server_destroy(s);
}

static void test_framing_wrong_magic(void **state)
{
    struct baton_server *s = new_server(10000);
    struct baton_conn *other = client(s);
    int fd = raw_conn(s);
    raw_hello(fd);
    uint8_t junk[24] = "GET / HTTP/1.1\r\nHost: x";
    assert_int_equal(write(fd, junk, sizeof junk), 24);
    struct baton_frame_header h;
    get_reply(fd, &h);
    assert_int_equal(h.cmd, 0);
    assert_int_equal(h.status, 14); /* E_MAGIC */
    assert_int_equal(h.len, 0);
    expect_eof(fd);
    close(fd);
    /* the wrong magic as the very first bytes, too */
    fd = raw_conn(s);
    assert_int_equal(write(fd, junk, sizeof junk), 24);
    get_reply(fd, &h);
    assert_int_equal(h.status, 14);
    expect_eof(fd);
    close(fd);
    /* another client is unaffected */
    struct baton_device_info d;
    assert_int_equal(baton_device_info(other, &d), 0);
    baton_conn_close(other);
    baton_server_destroy(s);
}

static void test_framing_errors(void **state)
{
    struct baton_server *s = new_server(200);
    struct baton_frame_header h;
    uint8_t pl[8] = {0};
    /* a command before HELLO */
    int fd = raw_conn(s);
    put_frame(fd, BATON_CMD_DEVICE_INFO, 5, NULL, 0);
    get_reply(fd, &h);
    assert_int_equal(h.cmd, BATON_CMD_DEVICE_INFO);
    assert_int_equal(h.seq, 5);
    assert_int_equal(h.status, 16); /* E_PROTO */
    expect_eof(fd);
    close(fd);
    /* no HELLO within the frame deadline (200 ms): closed without a reply */
    fd = raw_conn(s);
    expect_eof(fd);
    close(fd);
    /* HELLO with no common version */
    fd = raw_conn(s);
    uint8_t hp[BATON_HELLO_BYTES];
    struct baton_hello hello = {.version_min = 2, .version_max = 9, .role = BATON_ROLE_CLIENT};
    baton_wire_encode_hello(hp, &hello);
    put_frame(fd, BATON_CMD_HELLO, 1, hp, sizeof hp);
    get_reply(fd, &h);
    assert_int_equal(h.status, 17); /* E_VERSION */
    expect_eof(fd);
    close(fd);
    /* unknown command: cmd echoed */
    fd = raw_conn(s);
    raw_hello(fd);
    uint8_t hb[24];
    struct baton_frame_header bad = {.cmd = 3, .seq = 9};
    baton_wire_encode_header(hb, &bad);
    hb[4] = 200;
    assert_int_equal(write(fd, hb, 24), 24);
    get_reply(fd, &h);
    assert_int_equal(h.cmd, 200);
    assert_int_equal(h.seq, 9);
    assert_int_equal(h.status, 15); /* E_CMD */
    expect_eof(fd);
    close(fd);
    /* length over the limit (1 MiB here) */
    fd = raw_conn(s);
    raw_hello(fd);
    bad = (struct baton_frame_header){.cmd = BATON_CMD_SET_TENSOR, .seq = 4, .len = (1u << 20) + 1};
    baton_wire_encode_header(hb, &bad);
    assert_int_equal(write(fd, hb, 24), 24);
    get_reply(fd, &h);
    assert_int_equal(h.status, 10); /* E_LIMIT */
    expect_eof(fd);
    close(fd);
    /* non-zero flags */
    fd = raw_conn(s);
    raw_hello(fd);
    bad = (struct baton_frame_header){.cmd = BATON_CMD_DEVICE_INFO, .flags = 1, .seq = 4};
    baton_wire_encode_header(hb, &bad);
    assert_int_equal(write(fd, hb, 24), 24);
    get_reply(fd, &h);
    assert_int_equal(h.status, 1); /* E_INVAL */
    expect_eof(fd);
    close(fd);
    /* HELLO twice */
    fd = raw_conn(s);
    raw_hello(fd);
    baton_wire_encode_hello(hp, &(struct baton_hello){.version_min = 1, .version_max = 1,
                                                      .role = BATON_ROLE_CLIENT});
    put_frame(fd, BATON_CMD_HELLO, 2, hp, sizeof hp);
    get_reply(fd, &h);
    assert_int_equal(h.status, 16);
    expect_eof(fd);
    close(fd);
    /* a frame that stops half-way: the frame deadline (200 ms) ends it,
     * however long the connection stays open */
    fd = raw_conn(s);
    raw_hello(fd);
    put_frame(fd, BATON_CMD_FREE_BUFFER, 6, NULL, 0); /* header says 0 bytes: fine... */
    get_reply(fd, &h);
    assert_int_equal(h.status, 1); /* ...but FREE needs 8: E_INVAL, connection goes on */
    bad = (struct baton_frame_header){.cmd = BATON_CMD_FREE_BUFFER, .seq = 7, .len = 8};
    baton_wire_encode_header(hb, &bad);
    assert_int_equal(write(fd, hb, 24), 24);
    assert_int_equal(write(fd, pl, 3), 3);
    get_reply(fd, &h);
    assert_int_equal(h.seq, 7);
    assert_int_equal(h.status, 19); /* E_TIMEOUT */
    expect_eof(fd);
    close(fd);
    /* a truncated frame (peer closes inside it) frees the session */
    fd = raw_conn(s);
    raw_hello(fd);
    uint8_t sz[8];
    baton_wire_put_u64(sz, 4096);
    put_frame(fd, BATON_CMD_ALLOC_BUFFER, 8, sz, 8);
    get_reply(fd, &h);
    assert_int_equal(h.status, 0);
    uint8_t ignore[16];
    assert_int_equal(get_bytes(fd, ignore, 16), 16);
    assert_int_equal(write(fd, hb, 10), 10);
    close(fd);
    wait_idle(s);
    struct baton_conn *c = client(s);
    struct baton_device_info d;
    assert_int_equal(baton_device_info(c, &d), 0);
    assert_int_equal(d.free_memory, TOTAL_MEMORY);
    baton_conn_close(c);
    baton_server_destroy(s);
}

/* A SET whose header fails keeps framing: its data is read and dropped. */
static void test_set_error_discards_payload(void **state)
{
    struct baton_server *s = new_server(10000);
    struct baton_conn *c = client(s);
    uint64_t h;
    struct baton_tensor_desc t;
    static uint8_t data[300000];
    memset(data, 'B', sizeof data); /* would read as a bad magic if not discarded */
    assert_int_equal(baton_alloc_buffer(c, 4096, &h), 0);
    assert_int_equal(baton_tensor_init(&t, h, 0, BATON_TYPE_I32, sizeof data / 4, 1, 1, 1), 0);
    assert_int_equal(baton_set_tensor(c, &t, 0, data, sizeof data), BATON_E_BOUNDS);
    t.buffer ^= 1ull << 32;
    assert_int_equal(baton_set_tensor(c, &t, 0, data, sizeof data), BATON_E_STALE_HANDLE);
    struct baton_device_info d;
    assert_int_equal(baton_device_info(c, &d), 0);
    baton_conn_close(c);
    baton_server_destroy(s);
}

static void test_stop_drains(void **state)
{
    struct baton_server *s = new_server(10000);
    struct baton_conn *a = client(s), *b = client(s);
    struct baton_device_info d;
    assert_int_equal(baton_device_info(a, &d), 0);
    baton_server_stop(s);
    wait_idle(s); /* idle connections end at their frame boundary */
    assert_int_equal(baton_device_info(a, &d), BATON_E_IO);
    assert_true(baton_conn_is_dead(a));
    assert_int_equal(baton_device_info(a, &d), BATON_E_IO);
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    assert_int_equal(baton_server_serve_fd(s, sv[0]), BATON_E_IO); /* stopping */
    close(sv[1]);
    baton_conn_close(a);
    baton_conn_close(b);
    baton_server_destroy(s);
}

static void test_connection_cap(void **state)
{
    struct baton_server *s = new_server(10000);
    struct baton_conn *c[4];
    for (int i = 0; i < 4; i++)
        c[i] = client(s);
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    assert_int_equal(baton_server_serve_fd(s, sv[0]), BATON_E_LIMIT);
    expect_eof(sv[1]); /* closed at once */
    close(sv[1]);
    baton_conn_close(c[0]);
    for (int i = 0; i < 1000 && baton_server_active_connections(s) > 3; i++)
        poll(NULL, 0, 5);
    c[0] = client(s);
    for (int i = 0; i < 4; i++)
        baton_conn_close(c[i]);
    baton_server_destroy(s);
}

/* The same dispatcher over the in-memory transport (as the fuzz harness
 * drives it): HELLO, ALLOC, SET, GET, then a bad magic. */
static void test_memory_transport(void **state)
{
    struct baton_server *s = new_server(10000);
    uint8_t in[1024], *p = in;
    struct baton_frame_header h;
    struct baton_hello hello = {.version_min = 1, .version_max = 3, .role = BATON_ROLE_CLIENT};
    h = (struct baton_frame_header){.cmd = BATON_CMD_HELLO, .seq = 1, .len = 48};
    baton_wire_encode_header(p, &h);
    baton_wire_encode_hello(p + 24, &hello);
    p += 72;
    h = (struct baton_frame_header){.cmd = BATON_CMD_ALLOC_BUFFER, .seq = 2, .len = 8};
    baton_wire_encode_header(p, &h);
    baton_wire_put_u64(p + 24, 100);
    p += 32;
    /* the first handle of a fresh server: index 0, generation 1 */
    struct baton_tensor_desc t;
    assert_int_equal(baton_tensor_init(&t, 1ull << 32, 0, BATON_TYPE_I32, 2, 1, 1, 1), 0);
    h = (struct baton_frame_header){.cmd = BATON_CMD_SET_TENSOR, .seq = 3, .len = 104 + 8};
    baton_wire_encode_header(p, &h);
    baton_wire_encode_tensor(p + 24, &t);
    baton_wire_put_u64(p + 24 + 88, 0);
    baton_wire_put_u64(p + 24 + 96, 8);
    memcpy(p + 24 + 104, "ABCDEFGH", 8);
    p += 24 + 112;
    h = (struct baton_frame_header){.cmd = BATON_CMD_GET_TENSOR, .seq = 4, .len = 104};
    baton_wire_encode_header(p, &h);
    baton_wire_encode_tensor(p + 24, &t);
    baton_wire_put_u64(p + 24 + 88, 2);
    baton_wire_put_u64(p + 24 + 96, 5);
    p += 24 + 104;
    memcpy(p, "XXXXXXXXXXXXXXXXXXXXXXXX", 24);
    p += 24;
    struct baton_transport *tr;
    assert_int_equal(baton_transport_mem(in, (size_t)(p - in), 1u << 16, &tr), 0);
    /* ends at the bad magic; the output is checked by the next test */
    assert_int_equal(baton_server_serve_transport(s, tr, "fuzz"), BATON_E_MAGIC);
    baton_server_destroy(s);
}

/* Checks the bytes the dispatcher wrote, through a transport we keep. */
struct keep_transport {
    struct baton_transport base;
    struct baton_transport *inner;
};

static int keep_wait(struct baton_transport *t, uint64_t d)
{
    return baton_transport_wait_readable(((struct keep_transport *)t)->inner, d);
}
static int keep_recv(struct baton_transport *t, void *b, size_t n, uint64_t d)
{
    return baton_transport_recv_exact(((struct keep_transport *)t)->inner, b, n, d);
}
static int keep_send(struct baton_transport *t, const struct iovec *iov, int n, uint64_t d)
{
    return baton_transport_send_all(((struct keep_transport *)t)->inner, iov, n, d);
}
static void keep_close(struct baton_transport *t)
{
    (void)t; /* the test closes the inner transport */
}
static const struct baton_transport_ops keep_ops = {keep_wait, keep_recv, keep_send, keep_close};

static void test_memory_transport_output(void **state)
{
    struct baton_server *s = new_server(10000);
    uint8_t in[256], *p = in;
    struct baton_frame_header h;
    struct baton_hello hello = {.version_min = 1, .version_max = 3, .role = BATON_ROLE_CLIENT};
    h = (struct baton_frame_header){.cmd = BATON_CMD_HELLO, .seq = 1, .len = 48};
    baton_wire_encode_header(p, &h);
    baton_wire_encode_hello(p + 24, &hello);
    p += 72;
    h = (struct baton_frame_header){.cmd = BATON_CMD_ALLOC_BUFFER, .seq = 2, .len = 8};
    baton_wire_encode_header(p, &h);
    baton_wire_put_u64(p + 24, 100);
    p += 32;
    h = (struct baton_frame_header){.cmd = BATON_CMD_FREE_BUFFER, .seq = 3, .len = 8};
    baton_wire_encode_header(p, &h);
    baton_wire_put_u64(p + 24, 99);
    p += 32;
    struct baton_transport *inner;
    assert_int_equal(baton_transport_mem(in, (size_t)(p - in), 1u << 16, &inner), 0);
    struct keep_transport kt = {{&keep_ops}, inner};
    assert_int_equal(baton_server_serve_transport(s, &kt.base, NULL), 0); /* EOF at a boundary */
    size_t len, pos = 0;
    const uint8_t *out = baton_transport_mem_output(inner, &len);
    assert_int_equal(len, 24 + 48 + 24 + 16 + 24);
    struct baton_frame_header r;
    assert_int_equal(baton_wire_decode_header(out, len, &pos, 1u << 20, &r), 0);
    assert_int_equal(r.cmd, BATON_CMD_HELLO);
    assert_int_equal(r.len, 48);
    struct baton_hello sh;
    assert_int_equal(baton_wire_decode_hello(out, len, &pos, &sh), 0);
    assert_int_equal(sh.version_min, 1); /* highest common of [1,3] and [1,1] */
    assert_int_equal(sh.version_max, 1);
    assert_int_equal(sh.role, BATON_ROLE_SERVER);
    assert_int_equal(baton_wire_decode_header(out, len, &pos, 1u << 20, &r), 0);
    assert_int_equal(r.cmd, BATON_CMD_ALLOC_BUFFER);
    assert_int_equal(r.seq, 2);
    assert_int_equal(r.status, 0);
    uint64_t handle, size;
    assert_int_equal(baton_wire_get_u64(out, len, &pos, &handle), 0);
    assert_int_equal(baton_wire_get_u64(out, len, &pos, &size), 0);
    assert_int_equal(handle, 1ull << 32);
    assert_int_equal(size, 100);
    assert_int_equal(baton_wire_decode_header(out, len, &pos, 1u << 20, &r), 0);
    assert_int_equal(r.cmd, BATON_CMD_FREE_BUFFER);
    assert_int_equal(r.seq, 3);
    assert_int_equal(r.status, 8); /* E_STALE_HANDLE for handle 99 */
    baton_transport_close(inner);
    baton_server_destroy(s);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hello_and_device_info),
        cmocka_unit_test(test_set_get_roundtrip_and_stats),
        cmocka_unit_test(test_semantic_errors_keep_connection),
        cmocka_unit_test(test_copy_and_clear),
        cmocka_unit_test(test_other_session),
        cmocka_unit_test(test_graph_compute),
        cmocka_unit_test(test_pipelining),
        cmocka_unit_test(test_framing_wrong_magic),
        cmocka_unit_test(test_framing_errors),
        cmocka_unit_test(test_set_error_discards_payload),
        cmocka_unit_test(test_stop_drains),
        cmocka_unit_test(test_connection_cap),
        cmocka_unit_test(test_memory_transport),
        cmocka_unit_test(test_memory_transport_output),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
