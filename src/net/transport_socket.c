/* Socket transport (transport.h): poll + MSG_DONTWAIT against one absolute
 * deadline per call, MSG_NOSIGNAL on every send. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "baton/status.h"
#include "net/transport.h"

struct socket_transport {
    struct baton_transport base; /* first: the vtable pointer */
    int fd;
    int cancel_fd;
};

static struct socket_transport *as_socket(struct baton_transport *t)
{
    return (struct socket_transport *)t;
}

/* Waits for events on fd (and POLLIN on cancel_fd when >= 0). Returns 0 when
 * fd is ready, 1 when cancelled, BATON_E_TIMEOUT or BATON_E_IO. */
static int wait_fd(int fd, short events, int cancel_fd, uint64_t deadline)
{
    for (;;) {
        struct pollfd p[2] = {{.fd = fd, .events = events}, {.fd = cancel_fd, .events = POLLIN}};
        int n = poll(p, cancel_fd >= 0 ? 2 : 1, baton_net_poll_timeout(deadline));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return BATON_E_IO;
        if (cancel_fd >= 0 && (p[1].revents & POLLIN))
            return 1;
        if (n == 0) {
            /* poll's ms rounding can wake a hair early: re-check the clock */
            if (deadline != BATON_DEADLINE_NONE && baton_net_now_ns() >= deadline)
                return BATON_E_TIMEOUT;
            continue;
        }
        /* POLLERR/POLLHUP: let the following recv/send report it */
        return 0;
    }
}

static int sock_wait_readable(struct baton_transport *t, uint64_t deadline)
{
    struct socket_transport *s = as_socket(t);
    for (;;) {
        int rc = wait_fd(s->fd, POLLIN, s->cancel_fd, deadline);
        if (rc == 1)
            return BATON_E_IO;
        if (rc != 0)
            return rc;
        uint8_t b;
        ssize_t n;
        do {
            n = recv(s->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
        } while (n < 0 && errno == EINTR);
        if (n == 1)
            return 0;
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
            return BATON_E_IO; /* EOF at a frame boundary, or an error */
        /* spurious wake-up: wait again */
    }
}

static int sock_recv_exact(struct baton_transport *t, void *buf, size_t n, uint64_t deadline)
{
    struct socket_transport *s = as_socket(t);
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t r = recv(s->fd, p, n, MSG_DONTWAIT);
        if (r > 0) {
            p += r;
            n -= (size_t)r;
            continue;
        }
        if (r == 0)
            return BATON_E_IO;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return BATON_E_IO;
        int rc = wait_fd(s->fd, POLLIN, -1, deadline);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int sock_send_all(struct baton_transport *t, const struct iovec *iov_in, int iovcnt,
                         uint64_t deadline)
{
    struct socket_transport *s = as_socket(t);
    struct iovec iov[BATON_TRANSPORT_MAX_IOV];
    int first = 0, cnt = 0;
    if (iovcnt < 0 || iovcnt > BATON_TRANSPORT_MAX_IOV)
        return BATON_E_INVAL;
    for (int i = 0; i < iovcnt; i++)
        if (iov_in[i].iov_len > 0)
            iov[cnt++] = iov_in[i];
    while (first < cnt) {
        struct msghdr mh;
        memset(&mh, 0, sizeof mh);
        mh.msg_iov = &iov[first];
        mh.msg_iovlen = (size_t)(cnt - first);
        ssize_t w = sendmsg(s->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                return BATON_E_IO;
            int rc = wait_fd(s->fd, POLLOUT, -1, deadline);
            if (rc != 0)
                return rc;
            continue;
        }
        size_t left = (size_t)w;
        while (first < cnt && left >= iov[first].iov_len) {
            left -= iov[first].iov_len;
            first++;
        }
        if (first < cnt) {
            iov[first].iov_base = (uint8_t *)iov[first].iov_base + left;
            iov[first].iov_len -= left;
        }
    }
    return 0;
}

static void sock_close(struct baton_transport *t)
{
    struct socket_transport *s = as_socket(t);
    close(s->fd);
    free(s);
}

static const struct baton_transport_ops socket_ops = {
    .wait_readable = sock_wait_readable,
    .recv_exact = sock_recv_exact,
    .send_all = sock_send_all,
    .close = sock_close,
};

int baton_transport_socket(int fd, int cancel_fd, struct baton_transport **out)
{
    struct socket_transport *s = calloc(1, sizeof *s);
    if (!s) {
        close(fd);
        return BATON_E_NOMEM;
    }
    s->base.ops = &socket_ops;
    s->fd = fd;
    s->cancel_fd = cancel_fd;
    *out = &s->base;
    return 0;
}

void baton_transport_socket_linger(struct baton_transport *t, uint64_t deadline,
                                   size_t max_bytes)
{
    if (!t || t->ops != &socket_ops)
        return;
    struct socket_transport *s = as_socket(t);
    if (shutdown(s->fd, SHUT_WR) != 0)
        return; /* not connected any more: nothing to protect */
    uint8_t sink[4096];
    while (max_bytes > 0) {
        ssize_t r = recv(s->fd, sink, max_bytes < sizeof sink ? max_bytes : sizeof sink,
                         MSG_DONTWAIT);
        if (r > 0) {
            max_bytes -= (size_t)r;
            continue;
        }
        if (r == 0)
            return; /* the peer's EOF: it has read what we sent */
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return;
        if (wait_fd(s->fd, POLLIN, s->cancel_fd, deadline) != 0)
            return; /* deadline, error or server stopping */
    }
}

int baton_transport_socket_fd(const struct baton_transport *t)
{
    return ((const struct socket_transport *)t)->fd;
}
