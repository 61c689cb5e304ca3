/* The transport interface: how the dispatcher and the client move bytes.
 *
 * The same dispatcher serves a TCP connection, an in-process stage (a
 * socketpair) and a fuzz harness's byte stream, so it reads and writes only
 * through this small vtable. Deadlines are absolute CLOCK_MONOTONIC times in
 * ns (net/net.h); BATON_DEADLINE_NONE waits forever.
 *
 * Frame deadlines: a caller reads a frame's first byte with wait_readable
 * (idle deadline), then computes one deadline for the whole frame and passes
 * that same absolute deadline to every recv_exact of the frame. A peer that
 * trickles one byte per second therefore cannot hold a frame open past its
 * deadline: the limit is on the frame, not on each recv call.
 */
#ifndef BATON_NET_TRANSPORT_H
#define BATON_NET_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "net/net.h"

#define BATON_TRANSPORT_MAX_IOV 8

struct baton_transport;

struct baton_transport_ops {
    /* Waits until at least one byte can be read. Returns 0 when one is
     * ready; BATON_E_IO when the peer closed (EOF before any byte), on a
     * socket error, or when the transport's cancel descriptor became
     * readable (server stopping); BATON_E_TIMEOUT at the deadline.
     * Consumes nothing. */
    int (*wait_readable)(struct baton_transport *t, uint64_t deadline_ns);
    /* Reads exactly n bytes into buf. Returns 0, BATON_E_TIMEOUT when the
     * deadline passes first, BATON_E_IO on EOF or error (buf partly
     * written). */
    int (*recv_exact)(struct baton_transport *t, void *buf, size_t n, uint64_t deadline_ns);
    /* Sends every byte of iov[0..iovcnt) (iovcnt <= BATON_TRANSPORT_MAX_IOV)
     * in order. Returns 0, BATON_E_TIMEOUT, BATON_E_IO (peer gone; never
     * SIGPIPE) or BATON_E_INVAL (too many iovecs). */
    int (*send_all)(struct baton_transport *t, const struct iovec *iov, int iovcnt,
                    uint64_t deadline_ns);
    /* Releases the transport and everything it owns (the socket). */
    void (*close)(struct baton_transport *t);
};

struct baton_transport {
    const struct baton_transport_ops *ops;
};

static inline int baton_transport_wait_readable(struct baton_transport *t, uint64_t deadline_ns)
{
    return t->ops->wait_readable(t, deadline_ns);
}
static inline int baton_transport_recv_exact(struct baton_transport *t, void *buf, size_t n,
                                             uint64_t deadline_ns)
{
    return t->ops->recv_exact(t, buf, n, deadline_ns);
}
static inline int baton_transport_send_all(struct baton_transport *t, const struct iovec *iov,
                                           int iovcnt, uint64_t deadline_ns)
{
    return t->ops->send_all(t, iov, iovcnt, deadline_ns);
}
/* NULL-safe. */
static inline void baton_transport_close(struct baton_transport *t)
{
    if (t)
        t->ops->close(t);
}

/* Socket transport over a connected stream socket fd (TCP or AF_UNIX).
 * Adopts fd: it is closed by baton_transport_close, and also here when
 * creation fails. cancel_fd (or -1) is polled only by wait_readable: once it
 * is readable, waits between frames end with BATON_E_IO while a frame in
 * progress still completes. The cancel descriptor is not owned. Works
 * whether fd is blocking or not (every recv/send is MSG_DONTWAIT after
 * poll). Returns 0 or BATON_E_NOMEM. */
int baton_transport_socket(int fd, int cancel_fd, struct baton_transport **out);

/* Lingering close, first half: shuts the socket's sending side (the peer
 * sees EOF after everything already sent), then reads and discards what the
 * peer still sends until its EOF, max_bytes discarded, an error, the cancel
 * descriptor, or the absolute deadline (ns; checked while waiting for
 * data, so a peer that keeps sending is stopped by max_bytes instead). Closing a TCP socket whose
 * receive queue still holds unread bytes makes the kernel send a reset, and
 * a reset can reach the peer before it has read our last reply (the error
 * frame that explains why the connection ends); after this call, close is a
 * plain FIN. Does nothing for a transport that is not a socket transport,
 * or when t is NULL. The transport still has to be closed. */
void baton_transport_socket_linger(struct baton_transport *t, uint64_t deadline,
                                   size_t max_bytes);

/* The socket of a socket transport (still owned by the transport). */
int baton_transport_socket_fd(const struct baton_transport *t);

/* In-memory transport for fuzz harnesses and tests: reads come from
 * in[0..in_len) (not copied; must outlive the transport), EOF after it;
 * deadlines are ignored. Writes go to a sink that keeps the first
 * sink_cap bytes (0: keep nothing) and counts the rest.
 * Returns 0 or BATON_E_NOMEM. */
int baton_transport_mem(const uint8_t *in, size_t in_len, size_t sink_cap,
                        struct baton_transport **out);

/* The bytes kept by a memory transport's sink (*len of them) and the total
 * number of bytes written to it (kept or not). */
const uint8_t *baton_transport_mem_output(const struct baton_transport *t, size_t *len);
uint64_t baton_transport_mem_written(const struct baton_transport *t);

#endif
