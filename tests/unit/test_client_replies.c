/* src/client: request encoding and reply matching against a scripted fake
 * server. Replies are written into a socketpair before the client runs (the
 * client's seq numbers are 1, 2, ... in order), and the requests it sent are
 * read back and checked byte by byte afterwards. */
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "baton/client.h"
#include "baton/status.h"
#include "wire/wire.h"

struct fake {
    int srv;  /* the fake server's end */
    int cli;  /* handed to baton_conn_adopt_fd */
};

/* A loopback TCP port nothing listens on: bound, read back and closed. */
static uint16_t closed_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static void fake_open(struct fake *f)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    f->srv = sv[0];
    f->cli = sv[1];
}

static void reply(struct fake *f, uint8_t cmd, uint32_t seq, uint16_t status, const void *p,
                  uint64_t n)
{
    uint8_t hb[24];
    struct baton_frame_header h = {.cmd = cmd, .status = status, .seq = seq, .len = n};
    baton_wire_encode_header(hb, &h);
    assert_int_equal(write(f->srv, hb, 24), 24);
    if (n)
        assert_int_equal(write(f->srv, p, n), (ssize_t)n);
}

static void reply_hello(struct fake *f, uint16_t version, uint64_t features)
{
    uint8_t p[48];
    struct baton_hello h = {.version_min = version, .version_max = version,
                            .role = BATON_ROLE_SERVER, .features = features};
    baton_wire_encode_hello(p, &h);
    reply(f, BATON_CMD_HELLO, 1, 0, p, 48);
}

/* A fake server whose HELLO reply (version 1, no features) is queued first. */
static void fake_open_hello(struct fake *f)
{
    fake_open(f);
    reply_hello(f, 1, 0);
}

static void read_n(int fd, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        assert_int_equal(poll(&p, 1, 10000), 1);
        ssize_t r = read(fd, (uint8_t *)buf + got, n - got);
        assert_true(r > 0);
        got += (size_t)r;
    }
}

/* Reads one request the client sent; returns its header, payload in p. */
static void take_request(struct fake *f, struct baton_frame_header *h, uint8_t *p, size_t cap)
{
    uint8_t hb[24];
    size_t pos = 0;
    read_n(f->srv, hb, 24);
    assert_int_equal(baton_wire_decode_header(hb, 24, &pos, 1u << 30, h), 0);
    assert_int_equal(h->status, 0);
    assert_true(h->len <= cap);
    read_n(f->srv, p, (size_t)h->len);
}

static struct baton_conn *connect_fake(struct fake *f)
{
    struct baton_conn *c;
    assert_int_equal(baton_conn_adopt_fd(f->cli, 5000, &c), 0);
    uint8_t p[64];
    struct baton_frame_header h;
    take_request(f, &h, p, sizeof p);
    assert_int_equal(h.cmd, BATON_CMD_HELLO);
    assert_int_equal(h.seq, 1);
    assert_int_equal(h.len, 48);
    struct baton_hello hello;
    size_t pos = 0;
    assert_int_equal(baton_wire_decode_hello(p, 48, &pos, &hello), 0);
    assert_int_equal(hello.version_min, 1);
    assert_int_equal(hello.version_max, 1);
    assert_int_equal(hello.role, BATON_ROLE_CLIENT);
    return c;
}

static void test_request_encoding_and_replies(void **state)
{
    struct fake f;
    fake_open_hello(&f);
    /* replies to: ALLOC (seq 2), SET (3), GET (4), FREE (5) */
    uint8_t ar[16];
    baton_wire_put_u64(ar, 0x0000000300000007ull);
    baton_wire_put_u64(ar + 8, 4096);
    reply(&f, BATON_CMD_ALLOC_BUFFER, 2, 0, ar, 16);
    reply(&f, BATON_CMD_SET_TENSOR, 3, 0, NULL, 0);
    reply(&f, BATON_CMD_GET_TENSOR, 4, 0, "wxyz", 4);
    reply(&f, BATON_CMD_FREE_BUFFER, 5, (uint16_t)-BATON_E_NOT_OWNED, NULL, 0);
    struct baton_conn *c = connect_fake(&f);
    uint64_t h = 0;
    assert_int_equal(baton_alloc_buffer(c, 4096, &h), 0);
    assert_true(h == 0x0000000300000007ull);
    struct baton_tensor_desc t;
    assert_int_equal(baton_tensor_init(&t, h, 16, BATON_TYPE_F32, 2, 3, 1, 1), 0);
    assert_int_equal(t.nb[0], 4);
    assert_int_equal(t.nb[1], 8);
    assert_int_equal(t.nb[2], 24);
    assert_int_equal(t.nb[3], 24);
    assert_int_equal(t.nbytes, 24);
    assert_int_equal(baton_set_tensor(c, &t, 4, "abcdefgh", 8), 0);
    char got[4];
    assert_int_equal(baton_get_tensor(c, &t, 8, got, 4), 0);
    assert_memory_equal(got, "wxyz", 4);
    /* a server status is returned as is; the connection goes on */
    assert_int_equal(baton_free_buffer(c, h), BATON_E_NOT_OWNED);
    assert_false(baton_conn_is_dead(c));
    struct baton_cmd_stats st = baton_conn_stats(c, BATON_CMD_GET_TENSOR);
    assert_int_equal(st.count, 1);
    assert_int_equal(st.request_bytes, 24 + 104);
    assert_int_equal(st.reply_bytes, 24 + 4);
    st = baton_conn_stats(c, BATON_CMD_HELLO);
    assert_int_equal(st.request_bytes, 24 + 48);
    assert_int_equal(st.reply_bytes, 24 + 48);

    /* what the client sent */
    uint8_t p[256];
    struct baton_frame_header rh;
    size_t pos;
    uint64_t v;
    take_request(&f, &rh, p, sizeof p);
    assert_int_equal(rh.cmd, BATON_CMD_ALLOC_BUFFER);
    assert_int_equal(rh.seq, 2);
    assert_int_equal(rh.len, 8);
    pos = 0;
    assert_int_equal(baton_wire_get_u64(p, 8, &pos, &v), 0);
    assert_int_equal(v, 4096);
    take_request(&f, &rh, p, sizeof p);
    assert_int_equal(rh.cmd, BATON_CMD_SET_TENSOR);
    assert_int_equal(rh.seq, 3);
    assert_int_equal(rh.len, 104 + 8);
    struct baton_tensor_desc dt;
    pos = 0;
    assert_int_equal(baton_wire_decode_tensor(p, rh.len, &pos, &dt), 0);
    assert_true(dt.buffer == h);
    assert_int_equal(dt.offset, 16);
    assert_int_equal(dt.type, BATON_TYPE_F32);
    assert_int_equal(dt.ne[1], 3);
    assert_int_equal(baton_wire_get_u64(p, rh.len, &pos, &v), 0);
    assert_int_equal(v, 4);
    assert_int_equal(baton_wire_get_u64(p, rh.len, &pos, &v), 0);
    assert_int_equal(v, 8);
    assert_memory_equal(p + pos, "abcdefgh", 8);
    take_request(&f, &rh, p, sizeof p);
    assert_int_equal(rh.cmd, BATON_CMD_GET_TENSOR);
    assert_int_equal(rh.len, 104);
    take_request(&f, &rh, p, sizeof p);
    assert_int_equal(rh.cmd, BATON_CMD_FREE_BUFFER);
    assert_int_equal(rh.seq, 5);
    baton_conn_close(c);
    close(f.srv);
}

static void test_graph_encoding(void **state)
{
    struct fake f;
    fake_open_hello(&f);
    reply(&f, BATON_CMD_GRAPH_COMPUTE, 2, 0, NULL, 0);
    struct baton_conn *c = connect_fake(&f);
    struct baton_tensor_desc leaves[2];
    struct baton_graph_node node;
    assert_int_equal(baton_tensor_init(&leaves[0], 1ull << 32, 0, BATON_TYPE_F32, 4, 1, 1, 1), 0);
    assert_int_equal(baton_tensor_init(&leaves[1], 1ull << 32, 16, BATON_TYPE_F32, 4, 1, 1, 1), 0);
    memset(&node, 0, sizeof node);
    node.op = BATON_OP_SILU;
    node.type = BATON_TYPE_F32;
    node.ne[0] = 4;
    node.ne[1] = node.ne[2] = node.ne[3] = 1;
    for (int k = 0; k < BATON_MAX_SRC; k++)
        node.src[k] = BATON_SRC_NONE;
    node.src[0] = 0;
    node.out_leaf = 1;
    struct baton_graph g = {.n_leaves = 2, .n_nodes = 1, .leaves = leaves, .nodes = &node};
    assert_int_equal(baton_graph_compute(c, &g), 0);
    uint8_t p[512];
    struct baton_frame_header rh;
    take_request(&f, &rh, p, sizeof p);
    assert_int_equal(rh.cmd, BATON_CMD_GRAPH_COMPUTE);
    assert_int_equal(rh.len, 8 + 2 * 88 + 104);
    /* the server's decoders accept exactly what was sent */
    size_t pos = 0;
    uint32_t nl, nn;
    assert_int_equal(baton_wire_decode_graph_header(p, rh.len, &pos, 100, &nl, &nn), 0);
    assert_int_equal(nl, 2);
    assert_int_equal(nn, 1);
    struct baton_tensor_desc dl;
    assert_int_equal(baton_wire_decode_tensor(p, rh.len, &pos, &dl), 0);
    assert_int_equal(baton_wire_decode_tensor(p, rh.len, &pos, &dl), 0);
    assert_int_equal(dl.offset, 16);
    struct baton_graph_node dn;
    assert_int_equal(baton_wire_decode_node(p, rh.len, &pos, 2, 0, &dn), 0);
    assert_int_equal(dn.op, BATON_OP_SILU);
    assert_int_equal(dn.out_leaf, 1);
    assert_int_equal(pos, rh.len);
    /* counts beyond the limits are refused before sending */
    g.n_nodes = 0;
    assert_int_equal(baton_graph_compute(c, &g), BATON_E_LIMIT);
    /* a SET whose length cannot be framed is refused without sending */
    assert_int_equal(baton_set_tensor(c, &leaves[0], 0, "x", UINT64_MAX - 50), BATON_E_LIMIT);
    assert_false(baton_conn_is_dead(c));
    baton_conn_close(c);
    close(f.srv);
}

static void test_pipelined_reply_matching(void **state)
{
    struct fake f;
    fake_open_hello(&f);
    reply(&f, BATON_CMD_GET_TENSOR, 2, 0, "AA", 2);
    reply(&f, BATON_CMD_GET_TENSOR, 3, (uint16_t)-BATON_E_BOUNDS, NULL, 0);
    reply(&f, BATON_CMD_GET_TENSOR, 4, 0, "CC", 2);
    /* then a reply out of order: seq 6 where 5 is expected */
    reply(&f, BATON_CMD_GET_TENSOR, 6, 0, "DD", 2);
    struct baton_conn *c = connect_fake(&f);
    struct baton_tensor_desc t;
    assert_int_equal(baton_tensor_init(&t, 1ull << 32, 0, BATON_TYPE_I32, 4, 1, 1, 1), 0);
    char a[2] = {0}, b[2] = {0}, cc[2] = {0}, d[2] = {0};
    assert_int_equal(baton_submit_get_tensor(c, &t, 0, a, 2), 0);
    assert_int_equal(baton_submit_get_tensor(c, &t, 0, b, 2), 0);
    assert_int_equal(baton_submit_get_tensor(c, &t, 0, cc, 2), 0);
    assert_int_equal(baton_conn_wait(c), BATON_E_BOUNDS);
    assert_memory_equal(a, "AA", 2);
    assert_memory_equal(cc, "CC", 2);
    assert_int_equal(b[0], 0);
    assert_false(baton_conn_is_dead(c));
    assert_int_equal(baton_get_tensor(c, &t, 0, d, 2), BATON_E_PROTO);
    assert_true(baton_conn_is_dead(c));
    assert_int_equal(baton_get_tensor(c, &t, 0, d, 2), BATON_E_IO);
    baton_conn_close(c);
    close(f.srv);
}

static void test_bad_replies(void **state)
{
    struct fake f;
    uint8_t zero[96] = {0};
    struct baton_tensor_desc t;
    char buf[8];
    assert_int_equal(baton_tensor_init(&t, 1ull << 32, 0, BATON_TYPE_I32, 2, 1, 1, 1), 0);

    /* GET reply of the wrong length */
    fake_open_hello(&f);
    reply(&f, BATON_CMD_GET_TENSOR, 2, 0, "123", 3);
    struct baton_conn *c = connect_fake(&f);
    assert_int_equal(baton_get_tensor(c, &t, 0, buf, 8), BATON_E_PROTO);
    assert_true(baton_conn_is_dead(c));
    baton_conn_close(c);
    close(f.srv);

    /* DEVICE_INFO reply with non-zero reserved bytes */
    fake_open_hello(&f);
    uint8_t di[96] = {0};
    di[95] = 1;
    reply(&f, BATON_CMD_DEVICE_INFO, 2, 0, di, 96);
    c = connect_fake(&f);
    struct baton_device_info info;
    assert_int_equal(baton_device_info(c, &info), BATON_E_PROTO);
    baton_conn_close(c);
    close(f.srv);

    /* the error frame of a framing error: cmd 0, status E_MAGIC */
    fake_open_hello(&f);
    reply(&f, 0, 0, (uint16_t)-BATON_E_MAGIC, NULL, 0);
    c = connect_fake(&f);
    assert_int_equal(baton_device_info(c, &info), BATON_E_MAGIC);
    assert_true(baton_conn_is_dead(c));
    baton_conn_close(c);
    close(f.srv);

    /* an ALLOC reply whose size differs from the request */
    fake_open_hello(&f);
    uint8_t ar[16];
    baton_wire_put_u64(ar, 1ull << 32);
    baton_wire_put_u64(ar + 8, 5);
    reply(&f, BATON_CMD_ALLOC_BUFFER, 2, 0, ar, 16);
    c = connect_fake(&f);
    uint64_t h;
    assert_int_equal(baton_alloc_buffer(c, 4, &h), BATON_E_PROTO);
    baton_conn_close(c);
    close(f.srv);

    /* a valid DEVICE_INFO decodes */
    fake_open_hello(&f);
    struct baton_device_info sent = {.total_memory = 1000, .free_memory = 600, .alignment = 64,
                                     .max_buffer_bytes = 900, .type_mask = 5, .op_mask = 6,
                                     .n_threads = 3, .version = 1};
    strcpy(sent.name, "fake");
    baton_wire_encode_device_info(zero, &sent);
    reply(&f, BATON_CMD_DEVICE_INFO, 2, 0, zero, 96);
    c = connect_fake(&f);
    assert_int_equal(baton_device_info(c, &info), 0);
    assert_int_equal(info.free_memory, 600);
    assert_int_equal(info.n_threads, 3);
    assert_string_equal(info.name, "fake");
    baton_conn_close(c);
    close(f.srv);
}

static void test_silent_server_times_out(void **state)
{
    struct fake f;
    fake_open_hello(&f);
    struct baton_conn *c = connect_fake(&f);
    struct baton_device_info info;
    baton_conn_set_timeout(c, 50);
    assert_int_equal(baton_device_info(c, &info), BATON_E_TIMEOUT);
    assert_true(baton_conn_is_dead(c));
    assert_int_equal(baton_device_info(c, &info), BATON_E_IO);
    baton_conn_close(c);
    close(f.srv);

    /* a server that closes: E_IO */
    fake_open_hello(&f);
    c = connect_fake(&f);
    close(f.srv);
    assert_int_equal(baton_device_info(c, &info), BATON_E_IO);
    baton_conn_close(c);
}

/* A server that refuses a frame by its header (a length over its
 * max_message_bytes) sends the error frame and closes while the payload is
 * still on its way: the send fails, and the client reads the error frame to
 * say why. 4 MiB is far more than the socketpair holds. */
static void test_refused_while_sending(void **state)
{
    static uint8_t data[4u << 20];
    struct baton_tensor_desc t;
    struct fake f;
    assert_int_equal(baton_tensor_init(&t, 1ull << 32, 0, BATON_TYPE_F32, 1u << 20, 1, 1, 1), 0);

    fake_open_hello(&f);
    reply(&f, BATON_CMD_SET_TENSOR, 2, (uint16_t)-BATON_E_LIMIT, NULL, 0);
    struct baton_conn *c = connect_fake(&f);
    close(f.srv);
    assert_int_equal(baton_set_tensor(c, &t, 0, data, sizeof data), BATON_E_LIMIT);
    assert_true(baton_conn_is_dead(c));
    baton_conn_close(c);

    /* closed without a reply (the server died): E_IO, at once */
    fake_open_hello(&f);
    c = connect_fake(&f);
    baton_conn_set_timeout(c, 60000);
    close(f.srv);
    assert_int_equal(baton_set_tensor(c, &t, 0, data, sizeof data), BATON_E_IO);
    assert_true(baton_conn_is_dead(c));
    baton_conn_close(c);
}

static void test_hello_refusals(void **state)
{
    struct fake f;
    struct baton_conn *c = NULL;
    /* a server that requires AUTH: this build has no key */
    fake_open(&f);
    reply_hello(&f, 1, BATON_FEATURE_AUTH);
    assert_int_equal(baton_conn_adopt_fd(f.cli, 5000, &c), BATON_E_AUTH);
    close(f.srv);
    /* a version we did not offer */
    fake_open(&f);
    reply_hello(&f, 2, 0);
    assert_int_equal(baton_conn_adopt_fd(f.cli, 5000, &c), BATON_E_PROTO);
    close(f.srv);
    /* E_VERSION from the server */
    fake_open(&f);
    reply(&f, BATON_CMD_HELLO, 1, (uint16_t)-BATON_E_VERSION, NULL, 0);
    assert_int_equal(baton_conn_adopt_fd(f.cli, 5000, &c), BATON_E_VERSION);
    close(f.srv);
    /* the adopted descriptor is closed on failure: the fake end sees EOF
     * after the HELLO request */
    fake_open(&f);
    reply(&f, BATON_CMD_HELLO, 1, (uint16_t)-BATON_E_VERSION, NULL, 0);
    assert_int_equal(baton_conn_adopt_fd(f.cli, 5000, &c), BATON_E_VERSION);
    uint8_t req[72], b;
    read_n(f.srv, req, 72);
    assert_int_equal(read(f.srv, &b, 1), 0);
    close(f.srv);
    /* nothing listens there: a port bound and closed again (port 1 may be
     * taken on a shared host) */
    assert_int_equal(baton_conn_connect("127.0.0.1", closed_port(), 2000, &c), BATON_E_IO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_encoding_and_replies),
        cmocka_unit_test(test_graph_encoding),
        cmocka_unit_test(test_pipelined_reply_matching),
        cmocka_unit_test(test_bad_replies),
        cmocka_unit_test(test_silent_server_times_out),
        cmocka_unit_test(test_refused_while_sending),
        cmocka_unit_test(test_hello_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
