/* Blocking socket write shared by the integration test programs and the
 * raw-TCP benchmark (bench/rawtcp.c): every byte of buf, MSG_NOSIGNAL (a
 * closed peer is an error, never SIGPIPE), EINTR retried. */
#ifndef BATON_TESTS_SOCK_IO_H
#define BATON_TESTS_SOCK_IO_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

/* Sends all n bytes of buf on fd. Returns 0, or -1 on an error or a peer
 * that stopped reading for good (send returned 0). */
static inline int write_all(int fd, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

#endif
