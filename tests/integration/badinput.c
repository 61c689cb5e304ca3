/* badinput PORT: drives a running batond on 127.0.0.1:PORT (started by
 * tests/integration/test_server_badinput.sh) with bad input and round trips.
 *
 * Each bad input must get its exact error status, and afterwards the server
 * must still serve another client (a fresh connection doing a byte-exact
 * round trip). Prints one "ok"/"not ok" line per check; exit 0 iff all
 * passed. Every call has a deadline, so a hung server fails the test. */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "baton/client.h"
#include "baton/status.h"
#include "net/net.h"
#include "wire/wire.h"

#define TIMEOUT_MS 10000

static uint16_t g_port;
static int g_failed, g_n;

static void check(int ok, const char *what)
{
    g_n++;
    printf("%s %d - %s\n", ok ? "ok" : "not ok", g_n, what);
    if (!ok)
        g_failed++;
}

static void check_status(int got, int want, const char *what)
{
    char line[256];
    snprintf(line, sizeof line, "%s: %s (want %s)", what, baton_status_name(got),
             baton_status_name(want));
    check(got == want, line);
}

static struct baton_conn *open_conn(void)
{
    struct baton_conn *c = NULL;
    int rc = baton_conn_connect("127.0.0.1", g_port, TIMEOUT_MS, &c);
    if (rc != 0) {
        printf("not ok - connect: %s\n", baton_status_name(rc));
        exit(1);
    }
    return c;
}

/* A fresh client allocates, writes, reads back byte-exact and frees. */
static void still_serving(const char *after)
{
    struct baton_conn *c = open_conn();
    struct baton_tensor_desc t;
    uint64_t h = 0;
    uint8_t out[64], back[64] = {0};
    for (int i = 0; i < 64; i++)
        out[i] = (uint8_t)(i * 13 + 1);
    int rc = baton_alloc_buffer(c, 64, &h);
    if (rc == 0)
        rc = baton_tensor_init(&t, h, 0, BATON_TYPE_I32, 16, 1, 1, 1);
    if (rc == 0)
        rc = baton_set_tensor(c, &t, 0, out, 64);
    if (rc == 0)
        rc = baton_get_tensor(c, &t, 0, back, 64);
    if (rc == 0)
        rc = baton_free_buffer(c, h);
    char line[256];
    snprintf(line, sizeof line, "another client is served after: %s", after);
    check(rc == 0 && memcmp(out, back, 64) == 0, line);
    baton_conn_close(c);
}

static void test_unknown_type(struct baton_conn *c, uint64_t h)
{
    struct baton_tensor_desc t;
    uint8_t data[16] = {0};
    baton_tensor_init(&t, h, 0, BATON_TYPE_F32, 4, 1, 1, 1);
    t.type = 9; /* not a type id baton knows (ggml's Q8_1) */
    check_status(baton_set_tensor(c, &t, 0, data, 16), BATON_E_TYPE, "SET with unknown type");
    check_status(baton_get_tensor(c, &t, 0, data, 16), BATON_E_TYPE, "GET with unknown type");
    still_serving("unknown type");
}

static void test_block_multiple(struct baton_conn *c, uint64_t h)
{
    struct baton_tensor_desc t;
    uint8_t data[34] = {0};
    memset(&t, 0, sizeof t);
    t.buffer = h;
    t.type = BATON_TYPE_Q8_0;
    t.ne[0] = 33; /* Q8_0 blocks hold 32 elements */
    t.ne[1] = t.ne[2] = t.ne[3] = 1;
    t.nb[0] = 34;
    t.nb[1] = t.nb[2] = t.nb[3] = 68;
    check_status(baton_set_tensor(c, &t, 0, data, 34), BATON_E_SHAPE, "Q8_0 with ne[0] = 33");
    still_serving("ne[0] not a block multiple");
}

static void test_extent_past_buffer(struct baton_conn *c, uint64_t h, uint64_t size)
{
    struct baton_tensor_desc t;
    uint8_t data[8] = {0};
    /* 2 floats starting 4 bytes before the end */
    baton_tensor_init(&t, h, size - 4, BATON_TYPE_F32, 2, 1, 1, 1);
    check_status(baton_set_tensor(c, &t, 0, data, 8), BATON_E_BOUNDS, "extent past the buffer (SET)");
    check_status(baton_get_tensor(c, &t, 0, data, 8), BATON_E_BOUNDS, "extent past the buffer (GET)");
    baton_tensor_init(&t, h, UINT64_MAX - 3, BATON_TYPE_F32, 1, 1, 1, 1);
    check_status(baton_get_tensor(c, &t, 0, data, 4), BATON_E_OVERFLOW,
                 "offset + extent past 2^64");
    still_serving("extent past the buffer");
}

static void test_not_owned(struct baton_conn *c)
{
    struct baton_conn *other = open_conn();
    struct baton_tensor_desc t;
    uint64_t h;
    uint8_t secret[32], probe[32] = {0}, back[32];
    for (int i = 0; i < 32; i++)
        secret[i] = (uint8_t)(0xC0 | i);
    int rc = baton_alloc_buffer(other, 32, &h);
    if (rc == 0)
        rc = baton_tensor_init(&t, h, 0, BATON_TYPE_I32, 8, 1, 1, 1);
    if (rc == 0)
        rc = baton_set_tensor(other, &t, 0, secret, 32);
    check(rc == 0, "other session stores its bytes");
    check_status(baton_get_tensor(c, &t, 0, probe, 32), BATON_E_NOT_OWNED,
                 "GET of another session's handle");
    check_status(baton_set_tensor(c, &t, 0, probe, 32), BATON_E_NOT_OWNED,
                 "SET of another session's handle");
    check_status(baton_buffer_clear(c, h, 0xEE), BATON_E_NOT_OWNED,
                 "BUFFER_CLEAR of another session's handle");
    check_status(baton_free_buffer(c, h), BATON_E_NOT_OWNED,
                 "FREE of another session's handle");
    rc = baton_get_tensor(other, &t, 0, back, 32);
    check(rc == 0 && memcmp(back, secret, 32) == 0, "the other session's bytes are unchanged");
    baton_conn_close(other);
    still_serving("another session's handle");
}

static void test_stale(struct baton_conn *c)
{
    struct baton_tensor_desc t;
    uint64_t h;
    uint8_t data[16] = {0};
    int rc = baton_alloc_buffer(c, 16, &h);
    if (rc == 0)
        rc = baton_free_buffer(c, h);
    check(rc == 0, "alloc and free");
    baton_tensor_init(&t, h, 0, BATON_TYPE_F32, 4, 1, 1, 1);
    check_status(baton_get_tensor(c, &t, 0, data, 16), BATON_E_STALE_HANDLE, "GET of a freed handle");
    check_status(baton_free_buffer(c, h), BATON_E_STALE_HANDLE, "FREE of a freed handle");
    check_status(baton_free_buffer(c, 0), BATON_E_STALE_HANDLE, "FREE of handle 0");
    still_serving("a freed handle");
}

static void node_init(struct baton_graph_node *n, uint32_t op, uint64_t ne0, uint64_t ne1)
{
    memset(n, 0, sizeof *n);
    n->op = op;
    n->type = BATON_TYPE_F32;
    n->ne[0] = ne0;
    n->ne[1] = ne1;
    n->ne[2] = n->ne[3] = 1;
    for (int k = 0; k < BATON_MAX_SRC; k++)
        n->src[k] = BATON_SRC_NONE;
    n->out_leaf = BATON_SRC_NONE;
}

static void test_graph(struct baton_conn *c)
{
    struct baton_tensor_desc leaves[3];
    struct baton_graph_node node;
    uint64_t h;
    float a[4] = {1.5f, -2, 3, 0}, b[4] = {0.25f, 2, -10, 7}, out[4] = {0};
    int rc = baton_alloc_buffer(c, 48, &h);
    for (int i = 0; rc == 0 && i < 3; i++)
        rc = baton_tensor_init(&leaves[i], h, (uint64_t)i * 16, BATON_TYPE_F32, 2, 2, 1, 1);
    if (rc == 0)
        rc = baton_set_tensor(c, &leaves[0], 0, a, 16);
    if (rc == 0)
        rc = baton_set_tensor(c, &leaves[1], 0, b, 16);
    node_init(&node, BATON_OP_ADD, 2, 2);
    node.src[0] = 0;
    node.src[1] = 1;
    node.out_leaf = 2;
    struct baton_graph g = {.n_leaves = 3, .n_nodes = 1, .leaves = leaves, .nodes = &node};
    if (rc == 0)
        rc = baton_graph_compute(c, &g);
    if (rc == 0)
        rc = baton_get_tensor(c, &leaves[2], 0, out, 16);
    const float want[4] = {1.75f, 0, -7, 7};
    check(rc == 0 && memcmp(out, want, 16) == 0, "GRAPH_COMPUTE: ADD of two leaves into an out leaf");

    node.src[1] = 3; /* only leaves 0..2 exist before node 0 */
    check_status(baton_graph_compute(c, &g), BATON_E_GRAPH, "graph source index out of range");
    node.src[1] = 0xFFFFFFF0u;
    check_status(baton_graph_compute(c, &g), BATON_E_GRAPH, "graph source index near 2^32");
    node.src[1] = 1;
    node.out_leaf = 3;
    check_status(baton_graph_compute(c, &g), BATON_E_GRAPH, "graph out leaf out of range");
    still_serving("graph source index out of range");
}

static void test_copy(struct baton_conn *c)
{
    struct baton_tensor_desc big, small, whole;
    uint64_t h;
    int32_t v[8] = {10, 20, 30, 40, 50, 60, 70, 80}, out[16] = {0};
    int rc = baton_alloc_buffer(c, 64, &h);
    if (rc == 0)
        rc = baton_tensor_init(&big, h, 0, BATON_TYPE_I32, 8, 1, 1, 1);
    if (rc == 0)
        rc = baton_tensor_init(&small, h, 32, BATON_TYPE_I32, 4, 1, 1, 1);
    if (rc == 0)
        rc = baton_tensor_init(&whole, h, 0, BATON_TYPE_I32, 16, 1, 1, 1);
    if (rc == 0)
        rc = baton_set_tensor(c, &big, 0, v, 32);
    check(rc == 0, "COPY setup");
    check_status(baton_copy_tensor(c, &big, &small), BATON_E_BOUNDS,
                 "COPY_TENSOR with a source larger than the destination");
    rc = baton_get_tensor(c, &whole, 0, out, 64);
    check(rc == 0 && memcmp(out, v, 32) == 0 && out[8] == 0 && out[15] == 0,
          "a refused COPY changes nothing");
    /* a good copy: the first 4 ints to bytes 32..47 */
    struct baton_tensor_desc first4;
    baton_tensor_init(&first4, h, 0, BATON_TYPE_I32, 4, 1, 1, 1);
    rc = baton_copy_tensor(c, &first4, &small);
    if (rc == 0)
        rc = baton_get_tensor(c, &whole, 0, out, 64);
    check(rc == 0 && memcmp(out + 8, v, 16) == 0 && out[12] == 0, "COPY_TENSOR copies exactly");
    rc = baton_buffer_clear(c, h, 0x7F);
    if (rc == 0)
        rc = baton_get_tensor(c, &whole, 0, out, 64);
    int all = rc == 0;
    for (int i = 0; i < 16; i++)
        all = all && out[i] == 0x7F7F7F7F;
    check(all, "BUFFER_CLEAR sets every byte");
    still_serving("COPY_TENSOR source larger than destination");
}

static void test_pipelined(struct baton_conn *c)
{
    enum { N = 80 };
    static uint32_t vals[N][32], back[N][32];
    struct baton_tensor_desc t[N];
    uint64_t h;
    int rc = baton_alloc_buffer(c, N * 128, &h);
    for (int i = 0; rc == 0 && i < N; i++) {
        rc = baton_tensor_init(&t[i], h, (uint64_t)i * 128, BATON_TYPE_I32, 32, 1, 1, 1);
        for (int k = 0; k < 32; k++)
            vals[i][k] = (uint32_t)(i * 7919 + k * 31);
    }
    for (int i = 0; rc == 0 && i < N; i++)
        rc = baton_submit_set_tensor(c, &t[i], 0, vals[i], 128);
    for (int i = 0; rc == 0 && i < N; i++)
        rc = baton_submit_get_tensor(c, &t[i], 0, back[i], 128);
    if (rc == 0)
        rc = baton_conn_wait(c);
    check(rc == 0 && memcmp(vals, back, sizeof vals) == 0, "80 pipelined SETs then 80 GETs");
    struct baton_cmd_stats st = baton_conn_stats(c, BATON_CMD_GET_TENSOR);
    check(st.count >= N && st.reply_bytes >= (uint64_t)N * (24 + 128), "GET counters");
}

static size_t read_some(int fd, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, TIMEOUT_MS) != 1)
            break;
        ssize_t r = read(fd, (uint8_t *)buf + got, n - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    return got;
}

static void test_wrong_magic(struct baton_conn *c)
{
    int fd;
    if (baton_net_connect("127.0.0.1", g_port, TIMEOUT_MS, &fd) != 0) {
        check(0, "raw connect");
        return;
    }
    static const char http[] = "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";
    ssize_t w = write(fd, http, sizeof http - 1);
    uint8_t hb[24], b;
    size_t got = read_some(fd, hb, 24);
    size_t pos = 6;
    uint16_t st = 0;
    if (got == 24)
        baton_wire_get_u16(hb, 24, &pos, &st);
    check(w > 0 && got == 24 && memcmp(hb, "BATN", 4) == 0 && hb[4] == 0 &&
              -(int)st == BATON_E_MAGIC,
          "wrong magic gets one E_MAGIC error frame");
    check(read_some(fd, &b, 1) == 0, "then the connection is closed");
    close(fd);
    struct baton_device_info d;
    check_status(baton_device_info(c, &d), 0, "an open connection is unaffected by it");
    still_serving("a frame with the wrong magic");
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN); /* raw writes to a server that closed on us */
    if (argc != 2 || baton_net_parse_port(argv[1], &g_port) != 0 || g_port == 0) {
        fprintf(stderr, "usage: badinput PORT\n");
        return 2;
    }
    struct baton_conn *c = open_conn();
    uint64_t h;
    const uint64_t size = 256;
    int rc = baton_alloc_buffer(c, size, &h);
    check(rc == 0, "alloc");
    if (rc != 0)
        return 1;
    /* round trip first: SET then GET gives the exact bytes */
    struct baton_tensor_desc t;
    uint8_t data[size], back[size];
    for (uint64_t i = 0; i < size; i++)
        data[i] = (uint8_t)(255 - i);
    baton_tensor_init(&t, h, 0, BATON_TYPE_I32, size / 4, 1, 1, 1);
    rc = baton_set_tensor(c, &t, 0, data, size);
    if (rc == 0)
        rc = baton_get_tensor(c, &t, 0, back, size);
    check(rc == 0 && memcmp(data, back, size) == 0, "SET then GET returns the exact bytes");

    test_unknown_type(c, h);
    test_block_multiple(c, h);
    test_extent_past_buffer(c, h, size);
    test_not_owned(c);
    test_stale(c);
    test_graph(c);
    test_copy(c);
    test_pipelined(c);
    test_wrong_magic(c);

    /* the first connection survived every semantic error */
    rc = baton_get_tensor(c, &t, 0, back, size);
    check(rc == 0 && memcmp(data, back, size) == 0, "the first connection's buffer is intact");
    baton_conn_close(c);
    printf("%d checks, %d failed\n", g_n, g_failed);
    return g_failed ? 1 : 0;
}
