/* src/net: socket helpers, deadlines, socket and memory transports. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "baton/status.h"
#include "net/net.h"
#include "net/transport.h"

static void test_parse_port(void **state)
{
    uint16_t p = 1;
    assert_int_equal(baton_net_parse_port("0", &p), 0);
    assert_int_equal(p, 0);
    assert_int_equal(baton_net_parse_port("7340", &p), 0);
    assert_int_equal(p, 7340);
    assert_int_equal(baton_net_parse_port("65535", &p), 0);
    assert_int_equal(p, 65535);
    assert_int_equal(baton_net_parse_port("65536", &p), BATON_E_INVAL);
    assert_int_equal(baton_net_parse_port("", &p), BATON_E_INVAL);
    assert_int_equal(baton_net_parse_port("-1", &p), BATON_E_INVAL);
    assert_int_equal(baton_net_parse_port("12a", &p), BATON_E_INVAL);
    assert_int_equal(baton_net_parse_port("000001", &p), BATON_E_INVAL);
}

static void test_split_hostport(void **state)
{
    char h[64];
    uint16_t p = 0;
    assert_int_equal(baton_net_split_hostport("127.0.0.1:7340", h, sizeof h, &p), 0);
    assert_string_equal(h, "127.0.0.1");
    assert_int_equal(p, 7340);
    assert_int_equal(baton_net_split_hostport("[::1]:9", h, sizeof h, &p), 0);
    assert_string_equal(h, "::1");
    assert_int_equal(p, 9);
    assert_int_equal(baton_net_split_hostport("localhost:1", h, sizeof h, &p), 0);
    assert_string_equal(h, "localhost");
    assert_int_equal(baton_net_split_hostport("::1:9", h, sizeof h, &p), BATON_E_INVAL);
    assert_int_equal(baton_net_split_hostport("host", h, sizeof h, &p), BATON_E_INVAL);
    assert_int_equal(baton_net_split_hostport(":80", h, sizeof h, &p), BATON_E_INVAL);
    assert_int_equal(baton_net_split_hostport("h:", h, sizeof h, &p), BATON_E_INVAL);
    assert_int_equal(baton_net_split_hostport("[::1]9", h, sizeof h, &p), BATON_E_INVAL);
    assert_int_equal(baton_net_split_hostport("abcdef:1", h, 4, &p), BATON_E_INVAL);
}

static void test_loopback(void **state)
{
    assert_int_equal(baton_net_host_is_loopback("127.0.0.1"), 1);
    assert_int_equal(baton_net_host_is_loopback("127.3.2.1"), 1);
    assert_int_equal(baton_net_host_is_loopback("::1"), 1);
    assert_int_equal(baton_net_host_is_loopback("0.0.0.0"), 0);
    assert_int_equal(baton_net_host_is_loopback("::"), 0);
    assert_int_equal(baton_net_host_is_loopback("10.1.2.3"), 0);
    assert_int_equal(baton_net_host_is_loopback("not an address!"), 0);
}

static void test_deadline_math(void **state)
{
    assert_true(baton_net_deadline_ms(-1) == BATON_DEADLINE_NONE);
    assert_int_equal(baton_net_poll_timeout(BATON_DEADLINE_NONE), -1);
    assert_int_equal(baton_net_poll_timeout(1), 0); /* long past */
    uint64_t d = baton_net_deadline_ms(5000);
    int to = baton_net_poll_timeout(d);
    assert_true(to > 0 && to <= 5000);
    assert_true(baton_net_deadline_ms(0x7fffffff) > baton_net_now_ns());
}

/* Two socket transports over a socketpair. */
static void pair(struct baton_transport **a, struct baton_transport **b, int *raw_b)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    assert_int_equal(baton_transport_socket(sv[0], -1, a), 0);
    if (b) {
        assert_int_equal(baton_transport_socket(sv[1], -1, b), 0);
    } else {
        *raw_b = sv[1];
    }
}

static void test_socket_roundtrip_iov(void **state)
{
    struct baton_transport *a, *b;
    pair(&a, &b, NULL);
    uint8_t x[3] = {1, 2, 3}, y[5] = {4, 5, 6, 7, 8}, got[8];
    struct iovec iov[3] = {{x, 3}, {NULL, 0}, {y, 5}};
    assert_int_equal(baton_transport_send_all(a, iov, 3, baton_net_deadline_ms(5000)), 0);
    assert_int_equal(baton_transport_wait_readable(b, baton_net_deadline_ms(5000)), 0);
    assert_int_equal(baton_transport_recv_exact(b, got, 8, baton_net_deadline_ms(5000)), 0);
    const uint8_t want[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    assert_memory_equal(got, want, 8);
    struct iovec many[BATON_TRANSPORT_MAX_IOV + 1];
    for (int i = 0; i <= BATON_TRANSPORT_MAX_IOV; i++)
        many[i] = (struct iovec){x, 1};
    assert_int_equal(baton_transport_send_all(a, many, BATON_TRANSPORT_MAX_IOV + 1,
                                              BATON_DEADLINE_NONE),
                     BATON_E_INVAL);
    baton_transport_close(a);
    baton_transport_close(b);
}

/* A large send needs several partial writes while the other side reads. */
struct bulk_reader {
    struct baton_transport *t;
    uint8_t *buf;
    size_t n;
    int rc;
};

static void *bulk_read(void *arg)
{
    struct bulk_reader *r = arg;
    r->rc = baton_transport_recv_exact(r->t, r->buf, r->n, baton_net_deadline_ms(20000));
    return NULL;
}

static void test_socket_bulk(void **state)
{
    struct baton_transport *a, *b;
    pair(&a, &b, NULL);
    size_t n = 4u << 20;
    uint8_t *src = malloc(n), *dst = calloc(1, n);
    assert_non_null(src);
    assert_non_null(dst);
    for (size_t i = 0; i < n; i++)
        src[i] = (uint8_t)(i * 7 + (i >> 11));
    struct bulk_reader r = {b, dst, n, 1};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, bulk_read, &r), 0);
    struct iovec iov[2] = {{src, 1000}, {src + 1000, n - 1000}};
    assert_int_equal(baton_transport_send_all(a, iov, 2, baton_net_deadline_ms(20000)), 0);
    pthread_join(th, NULL);
    assert_int_equal(r.rc, 0);
    assert_memory_equal(src, dst, n);
    free(src);
    free(dst);
    baton_transport_close(a);
    baton_transport_close(b);
}

static void test_socket_eof_and_timeout(void **state)
{
    struct baton_transport *a;
    int raw;
    uint8_t buf[4];
    pair(&a, NULL, &raw);
    /* nothing sent: both waits end at their deadline */
    assert_int_equal(baton_transport_wait_readable(a, baton_net_deadline_ms(30)), BATON_E_TIMEOUT);
    assert_int_equal(baton_transport_recv_exact(a, buf, 4, baton_net_deadline_ms(30)),
                     BATON_E_TIMEOUT);
    /* two bytes then EOF: recv_exact of four fails with E_IO */
    assert_int_equal(write(raw, "ab", 2), 2);
    close(raw);
    assert_int_equal(baton_transport_wait_readable(a, baton_net_deadline_ms(5000)), 0);
    assert_int_equal(baton_transport_recv_exact(a, buf, 4, baton_net_deadline_ms(5000)),
                     BATON_E_IO);
    assert_memory_equal(buf, "ab", 2);
    /* EOF at a frame boundary: wait_readable says the peer is gone */
    assert_int_equal(baton_transport_wait_readable(a, baton_net_deadline_ms(5000)), BATON_E_IO);
    baton_transport_close(a);
}

static void test_socket_send_to_closed_peer(void **state)
{
    struct baton_transport *a;
    int raw;
    pair(&a, NULL, &raw);
    close(raw);
    uint8_t x[16] = {0};
    struct iovec iov = {x, sizeof x};
    /* EPIPE must come back as E_IO, not kill the test with SIGPIPE */
    assert_int_equal(baton_transport_send_all(a, &iov, 1, baton_net_deadline_ms(5000)),
                     BATON_E_IO);
    baton_transport_close(a);
}

/* A peer that trickles one byte every 20 ms cannot stretch a frame: the
 * 10-byte read below has one deadline 100 ms out, while the trickle would
 * need 200 ms. */
struct trickle {
    int fd;
    int n;
};

static void *trickle_main(void *arg)
{
    struct trickle *tr = arg;
    for (int i = 0; i < tr->n; i++) {
        if (write(tr->fd, "x", 1) != 1)
            break;
        poll(NULL, 0, 20);
    }
    return NULL;
}

static void test_frame_deadline_not_per_recv(void **state)
{
    struct baton_transport *a;
    int raw;
    pair(&a, NULL, &raw);
    struct trickle tr = {raw, 10};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, trickle_main, &tr), 0);
    uint8_t buf[10];
    uint64_t start = baton_net_now_ns();
    int rc = baton_transport_recv_exact(a, buf, 10, start + 100000000ull);
    uint64_t end = baton_net_now_ns();
    assert_int_equal(rc, BATON_E_TIMEOUT);
    assert_true(end >= start + 100000000ull);
    pthread_join(th, NULL);
    close(raw);
    baton_transport_close(a);
}

static void test_cancel_fd(void **state)
{
    int sv[2], pp[2];
    struct baton_transport *a;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    assert_int_equal(pipe2(pp, O_CLOEXEC), 0);
    assert_int_equal(baton_transport_socket(sv[0], pp[0], &a), 0);
    assert_int_equal(write(sv[1], "abcd", 4), 4);
    assert_int_equal(write(pp[1], "!", 1), 1);
    /* cancelled: the wait between frames ends even though data is waiting */
    assert_int_equal(baton_transport_wait_readable(a, BATON_DEADLINE_NONE), BATON_E_IO);
    /* but a frame in progress still reads */
    uint8_t buf[4];
    assert_int_equal(baton_transport_recv_exact(a, buf, 4, baton_net_deadline_ms(5000)), 0);
    assert_memory_equal(buf, "abcd", 4);
    baton_transport_close(a);
    close(sv[1]);
    close(pp[0]);
    close(pp[1]);
}

static void test_listen_connect(void **state)
{
    int lfd, cfd, sfd;
    uint16_t port = 0;
    assert_int_equal(baton_net_listen("127.0.0.1", 0, 4, &lfd, &port), 0);
    assert_true(port != 0);
    assert_int_equal(baton_net_accept(lfd, &sfd), BATON_E_TIMEOUT); /* none pending */
    assert_int_equal(baton_net_connect("127.0.0.1", port, 5000, &cfd), 0);
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 5000), 1);
    assert_int_equal(baton_net_accept(lfd, &sfd), 0);
    assert_true(fcntl(cfd, F_GETFD) & FD_CLOEXEC);
    assert_true(fcntl(sfd, F_GETFD) & FD_CLOEXEC);
    assert_false(fcntl(cfd, F_GETFL) & O_NONBLOCK);
    char peer[64];
    baton_net_peer_string(sfd, peer, sizeof peer);
    assert_true(strncmp(peer, "127.0.0.1:", 10) == 0);
    assert_int_equal(write(cfd, "hi", 2), 2);
    char b[2];
    assert_int_equal(read(sfd, b, 2), 2);
    assert_memory_equal(b, "hi", 2);
    close(cfd);
    close(sfd);
    close(lfd);
    /* nothing listens on the port any more: refused at once, the reason in
     * errno (the coordinator prints it) */
    errno = 0;
    assert_int_equal(baton_net_connect("127.0.0.1", port, 5000, &cfd), BATON_E_IO);
    assert_int_equal(errno, ECONNREFUSED);
    assert_int_equal(baton_net_connect("no such host.invalid", port, 1000, &cfd), BATON_E_INVAL);
}

static void test_mem_transport(void **state)
{
    const uint8_t in[6] = {9, 8, 7, 6, 5, 4};
    struct baton_transport *t;
    uint8_t buf[4];
    size_t len;
    assert_int_equal(baton_transport_mem(in, sizeof in, 5, &t), 0);
    assert_int_equal(baton_transport_wait_readable(t, 0), 0);
    assert_int_equal(baton_transport_recv_exact(t, buf, 4, 0), 0);
    assert_memory_equal(buf, in, 4);
    assert_int_equal(baton_transport_recv_exact(t, buf, 4, 0), BATON_E_IO); /* 2 left */
    assert_int_equal(baton_transport_wait_readable(t, 0), BATON_E_IO);
    uint8_t x[3] = {1, 2, 3};
    struct iovec iov[2] = {{x, 3}, {x, 3}};
    assert_int_equal(baton_transport_send_all(t, iov, 2, 0), 0);
    const uint8_t *out = baton_transport_mem_output(t, &len);
    assert_int_equal(len, 5); /* capped */
    const uint8_t want[5] = {1, 2, 3, 1, 2};
    assert_memory_equal(out, want, 5);
    assert_int_equal(baton_transport_mem_written(t), 6);
    baton_transport_close(t);

    /* a discarding sink only counts */
    assert_int_equal(baton_transport_mem(NULL, 0, 0, &t), 0);
    assert_int_equal(baton_transport_send_all(t, iov, 2, 0), 0);
    baton_transport_mem_output(t, &len);
    assert_int_equal(len, 0);
    assert_int_equal(baton_transport_mem_written(t), 6);
    baton_transport_close(t);

    /* a growing sink keeps everything below its cap */
    static uint8_t big[100000];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (uint8_t)(i % 251);
    assert_int_equal(baton_transport_mem(NULL, 0, 1u << 20, &t), 0);
    struct iovec bi = {big, sizeof big};
    assert_int_equal(baton_transport_send_all(t, &bi, 1, 0), 0);
    assert_int_equal(baton_transport_send_all(t, &bi, 1, 0), 0);
    out = baton_transport_mem_output(t, &len);
    assert_int_equal(len, 2 * sizeof big);
    assert_memory_equal(out, big, sizeof big);
    assert_memory_equal(out + sizeof big, big, sizeof big);
    baton_transport_close(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_port),
        cmocka_unit_test(test_split_hostport),
        cmocka_unit_test(test_loopback),
        cmocka_unit_test(test_deadline_math),
        cmocka_unit_test(test_socket_roundtrip_iov),
        cmocka_unit_test(test_socket_bulk),
        cmocka_unit_test(test_socket_eof_and_timeout),
        cmocka_unit_test(test_socket_send_to_closed_peer),
        cmocka_unit_test(test_frame_deadline_not_per_recv),
        cmocka_unit_test(test_cancel_fd),
        cmocka_unit_test(test_listen_connect),
        cmocka_unit_test(test_mem_transport),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
