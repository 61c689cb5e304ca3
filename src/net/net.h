/* fd-safe socket helpers and monotonic deadlines.
 *
 * Every descriptor made here is created with SOCK_CLOEXEC and handed to the
 * caller, who owns it from that moment (one release path: close). Sends use
 * MSG_NOSIGNAL (src/net/transport_socket.c), so a closed peer gives EPIPE,
 * never SIGPIPE. Stream sockets get TCP_NODELAY: the protocol is
 * request/reply and a 24-byte header must not wait for Nagle.
 *
 * Deadlines are absolute CLOCK_MONOTONIC times in nanoseconds
 * (baton_net_now_ns), so a loop of partial reads cannot extend them.
 * BATON_DEADLINE_NONE means "wait forever".
 */
#ifndef BATON_NET_H
#define BATON_NET_H

#include <stddef.h>
#include <stdint.h>

#define BATON_DEADLINE_NONE UINT64_MAX

/* Nanoseconds on CLOCK_MONOTONIC. */
uint64_t baton_net_now_ns(void);

/* Absolute deadline timeout_ms from now; BATON_DEADLINE_NONE when
 * timeout_ms < 0. Saturates instead of wrapping. */
uint64_t baton_net_deadline_ms(int timeout_ms);

/* poll(2) timeout in ms for an absolute deadline: -1 for
 * BATON_DEADLINE_NONE, 0 once it has passed, otherwise the remaining time
 * rounded up (capped at INT_MAX). */
int baton_net_poll_timeout(uint64_t deadline_ns);

/* Parses a decimal TCP port "0".."65535" (no sign, no spaces).
 * Returns 0 or BATON_E_INVAL. */
int baton_net_parse_port(const char *s, uint16_t *port);

/* Splits "host:port" or "[v6addr]:port" into host (NUL-terminated, without
 * brackets, at most host_len - 1 bytes) and port. Returns 0 or
 * BATON_E_INVAL. */
int baton_net_split_hostport(const char *s, char *host, size_t host_len, uint16_t *port);

/* 1 if every address host resolves to is a loopback address (127.0.0.0/8,
 * ::1, ::ffff:127.0.0.0/104), 0 if any is not or host does not resolve. */
int baton_net_host_is_loopback(const char *host);

/* Creates a TCP listening socket bound to host:port (host numeric or a name
 * that resolves; port 0 picks an ephemeral port) with SO_REUSEADDR,
 * SOCK_CLOEXEC and SOCK_NONBLOCK (accept with baton_net_accept after poll).
 * *fd_out owns the socket; *bound_port gets the port actually bound.
 * Returns 0, BATON_E_INVAL (unresolvable host) or BATON_E_IO (bind/listen
 * failed; errno kept). */
int baton_net_listen(const char *host, uint16_t port, int backlog, int *fd_out,
                     uint16_t *bound_port);

/* Accepts one connection from a listening socket: SOCK_CLOEXEC, blocking,
 * TCP_NODELAY. *fd_out owns it. Returns 0, BATON_E_TIMEOUT when no
 * connection is pending (EAGAIN) or BATON_E_IO. */
int baton_net_accept(int listen_fd, int *fd_out);

/* Connects to host:port (numeric address or a name; every resolved address
 * is tried in order) with a non-blocking connect and poll, all within
 * timeout_ms (< 0: no limit). The returned socket is blocking, SOCK_CLOEXEC,
 * TCP_NODELAY; *fd_out owns it. Returns 0, BATON_E_INVAL (unresolvable),
 * BATON_E_TIMEOUT or BATON_E_IO (refused, unreachable); after BATON_E_IO
 * errno holds the last address's reason (ECONNREFUSED, ENETUNREACH, ...). */
int baton_net_connect(const char *host, uint16_t port, int timeout_ms, int *fd_out);

/* Connects to one binary socket address (AF_INET or AF_INET6; no name
 * resolution, so it also works under the seccomp allow-list) as
 * baton_net_connect does. Returns 0, BATON_E_INVAL (another family),
 * BATON_E_TIMEOUT or BATON_E_IO (errno: the reason). */
struct sockaddr;
int baton_net_connect_addr(const struct sockaddr *sa, unsigned addr_len, int timeout_ms,
                           int *fd_out);

/* Sets TCP_NODELAY where the socket is TCP (ignored for AF_UNIX). */
void baton_net_set_nodelay(int fd);

/* Writes "addr:port" ("[v6]:port", "local" for AF_UNIX, "unknown" when the
 * system cannot say) of the socket's peer into buf (always NUL-terminated
 * when len > 0). */
void baton_net_peer_string(int fd, char *buf, size_t len);


#endif
