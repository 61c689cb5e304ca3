/* Limits of the server core, in process: the per-session quota of the
 * handle table (baton_handles_alloc_capped), the unauthenticated cap and
 * the handshake deadline of baton_server_serve_fd (over socketpairs), and
 * the per-session quota and compute budget as a client sees them. */
#include <poll.h>
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
#include "core/ops.h"
#include "server/handles.h"
#include "server/server.h"
#include "wire/wire.h"

#define PAGE 4096u

static void test_handles_session_cap(void **state)
{
    struct baton_handle_table *t;
    struct baton_buf_ref ref;
    uint64_t a, b, c, d;
    long pg = sysconf(_SC_PAGESIZE);
    if (pg != PAGE)
        skip();
    assert_int_equal(baton_handles_create(64 * PAGE, &t), 0);
    /* session 1, cap 3 pages */
    assert_int_equal(baton_handles_alloc_capped(t, 1, 2 * PAGE, 3 * PAGE, 0, &a), 0);
    assert_int_equal(baton_handles_alloc_capped(t, 1, PAGE + 1, 3 * PAGE, 0, &b), BATON_E_QUOTA);
    assert_int_equal(baton_handles_alloc_capped(t, 1, 1, 3 * PAGE, 0, &b), 0); /* 1 page */
    assert_true(baton_handles_session_bytes(t, 1) == 3 * PAGE);
    assert_int_equal(baton_handles_alloc_capped(t, 1, 1, 3 * PAGE, 0, &c), BATON_E_QUOTA);
    /* another session has its own quota */
    assert_int_equal(baton_handles_alloc_capped(t, 2, 3 * PAGE, 3 * PAGE, 0, &c), 0);
    assert_true(baton_handles_session_bytes(t, 2) == 3 * PAGE);
    /* extra bytes (a scratch arena) count against the session */
    assert_int_equal(baton_handles_free(t, 2, c), 0);
    assert_int_equal(baton_handles_alloc_capped(t, 2, 2 * PAGE, 3 * PAGE, 2 * PAGE, &c),
                     BATON_E_QUOTA);
    assert_int_equal(baton_handles_alloc_capped(t, 2, PAGE, 3 * PAGE, 2 * PAGE, &c), 0);
    assert_int_equal(baton_handles_alloc_capped(t, 2, 1, 3 * PAGE, 4 * PAGE, &d), BATON_E_QUOTA);
    /* a freed buffer still pinned stays counted until its last pin goes */
    assert_int_equal(baton_handles_acquire(t, 1, a, &ref), 0);
    assert_int_equal(baton_handles_free(t, 1, a), 0);
    assert_true(baton_handles_session_bytes(t, 1) == 3 * PAGE);
    assert_int_equal(baton_handles_alloc_capped(t, 1, 1, 3 * PAGE, 0, &d), BATON_E_QUOTA);
    baton_handles_release(t, &ref);
    assert_true(baton_handles_session_bytes(t, 1) == PAGE);
    assert_int_equal(baton_handles_alloc_capped(t, 1, 2 * PAGE, 3 * PAGE, 0, &d), 0);
    /* the uncapped call is the old baton_handles_alloc */
    assert_int_equal(baton_handles_alloc(t, 3, 40 * PAGE, &d), 0);
    assert_true(baton_handles_session_bytes(t, 3) == 40 * PAGE);
    assert_int_equal(baton_handles_free_session(t, 1), 2);
    assert_true(baton_handles_session_bytes(t, 1) == 0);
    baton_handles_destroy(t);
}

/* ---- in-process server ---- */

static struct baton_server *new_server(uint32_t max_unauth, int handshake_ms)
{
    struct baton_server_config cfg;
    struct baton_server *s;
    baton_server_config_default(&cfg);
    cfg.total_memory_bytes = 1u << 20;
    cfg.session_memory_bytes = 64 * PAGE;
    cfg.max_graph_flops = 10;
    cfg.quiet = 1;
    cfg.max_connections = 8;
    cfg.max_unauthenticated = max_unauth;
    cfg.handshake_timeout_ms = handshake_ms;
    assert_int_equal(baton_server_create(&cfg, &s), 0);
    return s;
}

/* A served socketpair end; returns the client's end, or -1 when refused
 * (*rc gets serve_fd's status). */
static int raw_conn(struct baton_server *s, int *rc)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    *rc = baton_server_serve_fd(s, sv[0]);
    if (*rc != 0) {
        close(sv[1]);
        return -1;
    }
    return sv[1];
}

/* 1 when fd reaches EOF within 10 s. */
static int eof_within(int fd)
{
    uint8_t b;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 10000) == 1 && read(fd, &b, 1) == 0;
}

static void test_unauthenticated_cap(void **state)
{
    struct baton_server *s = new_server(2, 60000);
    int rc;
    int a = raw_conn(s, &rc), b = raw_conn(s, &rc);
    assert_true(a >= 0 && b >= 0);
    assert_int_equal(raw_conn(s, &rc), -1); /* two silent ones hold the cap */
    assert_int_equal(rc, BATON_E_LIMIT);
    /* a HELLO moves b out of the unauthenticated count */
    struct baton_conn *cb;
    assert_int_equal(baton_conn_adopt_fd(b, 10000, &cb), 0);
    int c = raw_conn(s, &rc);
    assert_true(c >= 0);
    assert_int_equal(raw_conn(s, &rc), -1);
    assert_int_equal(rc, BATON_E_LIMIT);
    /* a silent one that goes away frees its place */
    close(a);
    for (int i = 0; i < 1000 && baton_server_active_connections(s) > 2; i++)
        poll(NULL, 0, 5);
    int d = raw_conn(s, &rc);
    assert_true(d >= 0);
    struct baton_device_info info;
    assert_int_equal(baton_device_info(cb, &info), 0);
    close(c);
    close(d);
    baton_conn_close(cb);
    baton_server_destroy(s);
}

static void test_handshake_deadline(void **state)
{
    struct baton_server *s = new_server(8, 200);
    int rc;
    int a = raw_conn(s, &rc);
    assert_true(a >= 0);
    /* one byte of HELLO, then silence: the 200 ms handshake deadline ends
     * it although the frame deadline is 10 s */
    assert_int_equal(write(a, "B", 1), 1);
    uint8_t hb[24];
    struct pollfd p = {.fd = a, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 10000), 1);
    assert_int_equal(read(a, hb, sizeof hb), 24); /* E_TIMEOUT frame */
    assert_int_equal(hb[6], (uint8_t)-BATON_E_TIMEOUT);
    assert_true(eof_within(a));
    close(a);
    /* a client that completes HELLO in time is not affected afterwards */
    int b = raw_conn(s, &rc);
    struct baton_conn *cb;
    assert_int_equal(baton_conn_adopt_fd(b, 10000, &cb), 0);
    poll(NULL, 0, 400);
    struct baton_device_info info;
    assert_int_equal(baton_device_info(cb, &info), 0);
    baton_conn_close(cb);
    baton_server_destroy(s);
}

static void test_quota_and_budget(void **state)
{
    struct baton_server *s = new_server(8, 5000);
    int rc;
    struct baton_conn *c;
    assert_int_equal(baton_conn_adopt_fd(raw_conn(s, &rc), 10000, &c), 0);
    struct baton_device_info info;
    assert_int_equal(baton_device_info(c, &info), 0);
    assert_true(info.max_buffer_bytes == 64 * PAGE);
    uint64_t h, h2;
    assert_int_equal(baton_alloc_buffer(c, 64 * PAGE + 1, &h), BATON_E_QUOTA);
    assert_int_equal(baton_alloc_buffer(c, 48, &h), 0);
    /* ADD of 4 elements: 4 FLOPs (budget 10); of 16: over it */
    struct baton_tensor_desc lv[3];
    struct baton_graph_node n;
    float x[4] = {1, 2, 3, 4}, out[4];
    for (int i = 0; i < 3; i++)
        assert_int_equal(baton_tensor_init(&lv[i], h, (uint64_t)i * 16, BATON_TYPE_F32, 4, 1, 1, 1),
                         0);
    assert_int_equal(baton_set_tensor(c, &lv[0], 0, x, 16), 0);
    assert_int_equal(baton_set_tensor(c, &lv[1], 0, x, 16), 0);
    memset(&n, 0, sizeof n);
    n.op = BATON_OP_ADD;
    n.type = BATON_TYPE_F32;
    n.ne[0] = 4;
    n.ne[1] = n.ne[2] = n.ne[3] = 1;
    for (int k = 0; k < BATON_MAX_SRC; k++)
        n.src[k] = BATON_SRC_NONE;
    n.src[0] = 0;
    n.src[1] = 1;
    n.out_leaf = 2;
    struct baton_graph g = {.n_leaves = 3, .n_nodes = 1, .leaves = lv, .nodes = &n};
    assert_int_equal(baton_graph_compute(c, &g), 0);
    assert_int_equal(baton_get_tensor(c, &lv[2], 0, out, 16), 0);
    const float want[4] = {2, 4, 6, 8};
    assert_memory_equal(out, want, 16);
    assert_int_equal(baton_alloc_buffer(c, 3 * 64, &h2), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(
            baton_tensor_init(&lv[i], h2, (uint64_t)i * 64, BATON_TYPE_F32, 16, 1, 1, 1), 0);
    n.ne[0] = 16;
    assert_int_equal(baton_graph_compute(c, &g), BATON_E_LIMIT);
    assert_int_equal(baton_device_info(c, &info), 0); /* the connection goes on */
    baton_conn_close(c);
    baton_server_destroy(s);
}

/* GRAPH_REGISTER grows the session's scratch arena to the graph's (so the
 * first run takes no page faults), and that arena gives way to the
 * session's own later buffers until a run reserves it; a run's arena is
 * then kept, also when a graph with more scratch is registered. Graph 1:
 * SCALE of leaf 0 into scratch (ARENA pages), SCALE of that into leaf 1;
 * graph 2 keeps two such intermediates live (2 x ARENA pages). Session
 * cap 64 pages, total 70: session A holds 2 x ARENA pages of leaves + the
 * graphs' memory (under a page) + the arena. */
#define ARENA 8
static void scale_node(struct baton_graph_node *n, uint64_t ne0, uint32_t op, float p)
{
    memset(n, 0, sizeof *n);
    for (int k = 0; k < BATON_MAX_SRC; k++)
        n->src[k] = BATON_SRC_NONE;
    n->op = op;
    n->type = BATON_TYPE_F32;
    n->ne[0] = ne0;
    n->ne[1] = n->ne[2] = n->ne[3] = 1;
    n->out_leaf = BATON_SRC_NONE;
    memcpy(&n->params[0], &p, 4);
}

static void test_register_grows_arena(void **state)
{
    struct baton_server_config cfg;
    struct baton_server *s;
    baton_server_config_default(&cfg);
    cfg.total_memory_bytes = 70 * PAGE;
    cfg.session_memory_bytes = 64 * PAGE;
    cfg.quiet = 1;
    assert_int_equal(baton_server_create(&cfg, &s), 0);
    int rc;
    struct baton_conn *a, *b;
    assert_int_equal(baton_conn_adopt_fd(raw_conn(s, &rc), 10000, &a), 0);
    assert_int_equal(baton_conn_adopt_fd(raw_conn(s, &rc), 10000, &b), 0);

    const uint64_t n = ARENA * PAGE / sizeof(float);
    uint64_t h, hx, hb;
    assert_int_equal(baton_alloc_buffer(a, 2 * ARENA * PAGE, &h), 0);
    struct baton_tensor_desc lv[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(
            baton_tensor_init(&lv[i], h, (uint64_t)i * ARENA * PAGE, BATON_TYPE_F32, n, 1, 1, 1),
            0);
    float x[4] = {1, -2, 3.5f, 8};
    assert_int_equal(baton_set_tensor(a, &lv[0], 0, x, sizeof x), 0);
    struct baton_graph_node nodes[3];
    scale_node(&nodes[0], n, BATON_OP_SCALE, 0.5f);
    scale_node(&nodes[1], n, BATON_OP_SCALE, 3.0f);
    nodes[0].src[0] = 0;
    nodes[1].src[0] = 2; /* node 0 */
    nodes[1].out_leaf = 1;
    struct baton_graph g = {.n_leaves = 2, .n_nodes = 2, .leaves = lv, .nodes = nodes};
    uint32_t id, id2;
    assert_int_equal(baton_graph_register(a, &g, &id), 0);

    /* the arena is held from registration: A has 16 + 8 pages and the
     * graph's bytes, so 46 pages more do not fit the total of 70 (they
     * would with the leaves alone) */
    assert_int_equal(baton_alloc_buffer(b, 46 * PAGE, &hb), BATON_E_QUOTA);
    assert_int_equal(baton_alloc_buffer(b, 40 * PAGE, &hb), 0);
    assert_int_equal(baton_free_buffer(b, hb), 0);
    /* A's own buffer of 41 pages fits beside the leaves, not beside the
     * arena too: the arena, not yet a run's, gives way */
    assert_int_equal(baton_alloc_buffer(a, 41 * PAGE, &hx), 0);
    assert_int_equal(baton_free_buffer(a, hx), 0);
    /* the run reserves its arena again and computes */
    struct baton_graph_run run;
    memset(&run, 0, sizeof run);
    run.graph = id;
    assert_int_equal(baton_graph_run(a, &run), 0);
    float out[4];
    assert_int_equal(baton_get_tensor(a, &lv[1], 0, out, sizeof out), 0);
    const float want[4] = {1.5f, -3, 5.25f, 12};
    assert_memory_equal(out, want, sizeof want);
    /* now the arena is the run's: the same 41 pages are refused */
    assert_int_equal(baton_alloc_buffer(a, 41 * PAGE, &hx), BATON_E_QUOTA);
    /* and a graph with more scratch registered now leaves it as it is (it
     * is not replaced by one that would give way) */
    scale_node(&nodes[1], n, BATON_OP_SCALE, 3.0f);
    nodes[1].src[0] = 2;
    scale_node(&nodes[2], n, BATON_OP_ADD, 0.0f);
    nodes[2].src[0] = 2;
    nodes[2].src[1] = 3; /* nodes 0 and 1, both live */
    nodes[2].out_leaf = 1;
    g.n_nodes = 3;
    assert_int_equal(baton_graph_register(a, &g, &id2), 0);
    assert_int_equal(baton_alloc_buffer(a, 41 * PAGE, &hx), BATON_E_QUOTA);
    assert_int_equal(baton_graph_run(a, &run), 0);
    run.graph = id2; /* 0.5 x + 1.5 x */
    assert_int_equal(baton_graph_run(a, &run), 0);
    assert_int_equal(baton_get_tensor(a, &lv[1], 0, out, sizeof out), 0);
    const float want2[4] = {2, -4, 7, 16};
    assert_memory_equal(out, want2, sizeof want2);
    baton_conn_close(a);
    baton_conn_close(b);
    baton_server_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handles_session_cap),
        cmocka_unit_test(test_unauthenticated_cap),
        cmocka_unit_test(test_handshake_deadline),
        cmocka_unit_test(test_quota_and_budget),
        cmocka_unit_test(test_register_grows_arena),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
