/* Socket helpers and monotonic deadlines (net.h). */
#include "net/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "baton/status.h"

uint64_t baton_net_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t baton_net_deadline_ms(int timeout_ms)
{
    if (timeout_ms < 0)
        return BATON_DEADLINE_NONE;
    uint64_t now = baton_net_now_ns();
    uint64_t add = (uint64_t)timeout_ms * 1000000ull;
    if (add >= BATON_DEADLINE_NONE - now)
        return BATON_DEADLINE_NONE - 1;
    return now + add;
}

int baton_net_poll_timeout(uint64_t deadline_ns)
{
    if (deadline_ns == BATON_DEADLINE_NONE)
        return -1;
    uint64_t now = baton_net_now_ns();
    if (now >= deadline_ns)
        return 0;
    uint64_t ms = (deadline_ns - now + 999999ull) / 1000000ull;
    return ms > (uint64_t)INT_MAX ? INT_MAX : (int)ms;
}

int baton_net_parse_port(const char *s, uint16_t *port)
{
    uint32_t v = 0;
    size_t i = 0;
    if (!s || !s[0])
        return BATON_E_INVAL;
    for (; s[i]; i++) {
        if (s[i] < '0' || s[i] > '9' || i >= 5)
            return BATON_E_INVAL;
        v = v * 10 + (uint32_t)(s[i] - '0');
    }
    if (v > 65535)
        return BATON_E_INVAL;
    *port = (uint16_t)v;
    return 0;
}

int baton_net_split_hostport(const char *s, char *host, size_t host_len, uint16_t *port)
{
    const char *hs, *he, *ps;
    if (!s || host_len == 0)
        return BATON_E_INVAL;
    if (s[0] == '[') {
        hs = s + 1;
        he = strchr(hs, ']');
        if (!he || he[1] != ':')
            return BATON_E_INVAL;
        ps = he + 2;
    } else {
        hs = s;
        he = strrchr(s, ':');
        if (!he)
            return BATON_E_INVAL;
        /* an unbracketed IPv6 literal is ambiguous */
        if (memchr(hs, ':', (size_t)(he - hs)))
            return BATON_E_INVAL;
        ps = he + 1;
    }
    size_t hl = (size_t)(he - hs);
    if (hl == 0 || hl >= host_len)
        return BATON_E_INVAL;
    /* brackets only wrap an IPv6 literal; inside a host they are an error
     * (found by fuzz_policy: "[[1]:5" would format back as "[1:5") */
    if (memchr(hs, '[', hl) || memchr(hs, ']', hl))
        return BATON_E_INVAL;
    if (baton_net_parse_port(ps, port) != 0)
        return BATON_E_INVAL;
    memcpy(host, hs, hl);
    host[hl] = '\0';
    return 0;
}

static int resolve(const char *host, uint16_t port, int passive, struct addrinfo **res)
{
    struct addrinfo hints;
    char portstr[8];
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
    snprintf(portstr, sizeof portstr, "%u", (unsigned)port);
    if (getaddrinfo(host, portstr, &hints, res) != 0 || !*res)
        return BATON_E_INVAL;
    return 0;
}

static int addr_is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        const uint8_t *a = in6->sin6_addr.s6_addr;
        if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr))
            return 1;
        return IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && a[12] == 127;
    }
    return 0;
}

int baton_net_host_is_loopback(const char *host)
{
    struct addrinfo *res = NULL;
    int ok = 1;
    if (!host || resolve(host, 0, 0, &res) != 0)
        return 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next)
        if (!addr_is_loopback(ai->ai_addr))
            ok = 0;
    freeaddrinfo(res);
    return ok;
}

void baton_net_set_nodelay(int fd)
{
    int one = 1;
    /* fails harmlessly (ENOTSUP/EOPNOTSUPP) on AF_UNIX socketpairs */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static uint16_t sockaddr_port(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)ss)->sin_port);
    if (ss->ss_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
    return 0;
}

int baton_net_listen(const char *host, uint16_t port, int backlog, int *fd_out,
                     uint16_t *bound_port)
{
    struct addrinfo *res = NULL;
    int fd = -1, rc = resolve(host, port, 1, &res);
    if (rc != 0)
        return rc;
    rc = BATON_E_IO;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int one = 1;
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
        if (fd < 0)
            continue;
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
            bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, backlog) == 0) {
            rc = 0;
            break;
        }
        int saved = errno;
        close(fd);
        errno = saved;
        fd = -1;
    }
    freeaddrinfo(res);
    if (rc != 0)
        return rc;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) {
        close(fd);
        return BATON_E_IO;
    }
    *bound_port = sockaddr_port(&ss);
    *fd_out = fd;
    return 0;
}

int baton_net_accept(int listen_fd, int *fd_out)
{
    int fd;
    do {
        fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return (errno == EAGAIN || errno == EWOULDBLOCK) ? BATON_E_TIMEOUT : BATON_E_IO;
    baton_net_set_nodelay(fd);
    *fd_out = fd;
    return 0;
}

/* One non-blocking connect to one address, finished by the deadline. On
 * success the socket is switched back to blocking mode. On failure errno
 * holds the reason (the socket's SO_ERROR for a connect that failed after
 * EINPROGRESS, ETIMEDOUT for the deadline). */
static int connect_one(const struct addrinfo *ai, uint64_t deadline, int *fd_out)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    int rc = BATON_E_IO;
    if (fd < 0)
        return BATON_E_IO;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        if (errno != EINPROGRESS)
            goto out;
        for (;;) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            int to = baton_net_poll_timeout(deadline);
            int n = poll(&p, 1, to);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                goto out;
            if (n == 0) {
                rc = BATON_E_TIMEOUT;
                errno = ETIMEDOUT;
                goto out;
            }
            break;
        }
        int err = 0;
        socklen_t el = sizeof err;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0)
            goto out;
        if (err != 0) {
            errno = err;
            goto out;
        }
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0)
        goto out;
    baton_net_set_nodelay(fd);
    *fd_out = fd;
    fd = -1;
    rc = 0;
out:
    if (fd >= 0) {
        const int saved = errno; /* the reason, not close's */
        close(fd);
        errno = saved;
    }
    return rc;
}

int baton_net_connect(const char *host, uint16_t port, int timeout_ms, int *fd_out)
{
    struct addrinfo *res = NULL;
    uint64_t deadline = baton_net_deadline_ms(timeout_ms);
    int rc = resolve(host, port, 0, &res);
    if (rc != 0)
        return rc;
    rc = BATON_E_IO;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        rc = connect_one(ai, deadline, fd_out);
        if (rc == 0 || rc == BATON_E_TIMEOUT)
            break;
    }
    const int saved = errno; /* the last address's reason */
    freeaddrinfo(res);
    errno = saved;
    return rc;
}

int baton_net_connect_addr(const struct sockaddr *sa, unsigned addr_len, int timeout_ms,
                           int *fd_out)
{
    struct addrinfo ai;
    if (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)
        return BATON_E_INVAL;
    memset(&ai, 0, sizeof ai);
    ai.ai_family = sa->sa_family;
    ai.ai_socktype = SOCK_STREAM;
    ai.ai_protocol = IPPROTO_TCP;
    ai.ai_addr = (struct sockaddr *)sa;
    ai.ai_addrlen = addr_len;
    return connect_one(&ai, baton_net_deadline_ms(timeout_ms), fd_out);
}

void baton_net_peer_string(int fd, char *buf, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char addr[INET6_ADDRSTRLEN];
    if (len == 0)
        return;
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) != 0) {
        snprintf(buf, len, "unknown");
        return;
    }
    if (ss.ss_family == AF_INET &&
        inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, addr, sizeof addr))
        snprintf(buf, len, "%s:%u", addr, (unsigned)sockaddr_port(&ss));
    else if (ss.ss_family == AF_INET6 &&
             inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, addr, sizeof addr))
        snprintf(buf, len, "[%s]:%u", addr, (unsigned)sockaddr_port(&ss));
    else if (ss.ss_family == AF_UNIX)
        snprintf(buf, len, "local");
    else
        snprintf(buf, len, "unknown");
}
