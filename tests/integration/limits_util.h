/* Shared helpers of the limits test programs (tests/integration/limits_*.c):
 * raw frames over loopback sockets, reading batond's thread and descriptor
 * counts from /proc, and "ok"/"not ok" check lines. Every wait is bounded. */
#ifndef BATON_TESTS_LIMITS_UTIL_H
#define BATON_TESTS_LIMITS_UTIL_H

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "baton/client.h"
#include "baton/status.h"
#include "core/limits.h"
#include "net/net.h"
#include "wire/wire.h"

#include "keyed_util.h"
#include "sock_io.h"

static inline int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void sleep_ms(int ms)
{
    poll(NULL, 0, ms);
}

/* A TCP socket to 127.0.0.1:port from source address src (NULL: any).
 * Non-blocking connect when nonblock (the caller waits for POLLOUT);
 * otherwise connected and blocking. Returns the descriptor or -1. */
static inline int tcp_open(uint16_t port, const char *src, int nonblock)
{
    struct sockaddr_in a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0)
        return -1;
    if (src) {
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        inet_pton(AF_INET, src, &a.sin_addr);
        if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
            close(fd);
            return -1;
        }
    }
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 && !(nonblock && errno == EINPROGRESS)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads exactly n bytes within timeout_ms. Returns the bytes read (< n on
 * EOF, error or timeout). */
static inline size_t read_n(int fd, void *buf, size_t n, int timeout_ms)
{
    size_t got = 0;
    int64_t end = now_ms() + timeout_ms;
    while (got < n) {
        int64_t left = end - now_ms();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left) != 1)
            break;
        ssize_t r = recv(fd, (uint8_t *)buf + got, n - got, MSG_DONTWAIT);
        if (r < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    return got;
}


static inline void encode_frame_header(uint8_t *hb, uint8_t cmd, uint32_t seq, uint64_t len)
{
    struct baton_frame_header h = {.cmd = cmd, .seq = seq, .len = len};
    baton_wire_encode_header(hb, &h);
}

/* Sends a request header and its payload (best effort: -1 if the server
 * closed first). */
static inline int put_frame(int fd, uint8_t cmd, uint32_t seq, const void *payload, uint64_t len)
{
    uint8_t hb[BATON_FRAME_HEADER_BYTES];
    encode_frame_header(hb, cmd, seq, len);
    if (write_all(fd, hb, sizeof hb) != 0)
        return -1;
    return len ? write_all(fd, payload, (size_t)len) : 0;
}

/* Reads a reply header field by field (error frames may carry cmd 0).
 * Returns 0, or -1 when 24 bytes did not arrive or the magic is wrong. */
static inline int get_reply(int fd, struct baton_frame_header *h, int timeout_ms)
{
    uint8_t hb[BATON_FRAME_HEADER_BYTES];
    size_t pos = 4;
    if (read_n(fd, hb, sizeof hb, timeout_ms) != sizeof hb || memcmp(hb, "BATN", 4) != 0)
        return -1;
    baton_wire_get_u8(hb, 24, &pos, &h->cmd);
    baton_wire_get_u8(hb, 24, &pos, &h->flags);
    baton_wire_get_u16(hb, 24, &pos, &h->status);
    baton_wire_get_u32(hb, 24, &pos, &h->seq);
    pos += 4;
    baton_wire_get_u64(hb, 24, &pos, &h->len);
    return 0;
}

/* 1 when the peer closed (EOF or reset) within timeout_ms, reading and
 * dropping anything before it. */
static inline int closed_within(int fd, int timeout_ms)
{
    uint8_t sink[4096];
    int64_t end = now_ms() + timeout_ms;
    for (;;) {
        int64_t left = end - now_ms();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left) != 1)
            return 0;
        ssize_t r = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
            return 1;
    }
}

/* HELLO as a client over a raw socket. Returns 0 or -1. */
static inline int raw_hello(int fd)
{
    uint8_t p[BATON_HELLO_BYTES], r[BATON_HELLO_BYTES];
    struct baton_hello hello = {.version_min = 1, .version_max = 1, .role = BATON_ROLE_CLIENT};
    struct baton_frame_header h;
    baton_wire_encode_hello(p, &hello);
    if (put_frame(fd, BATON_CMD_HELLO, 1, p, sizeof p) != 0 || get_reply(fd, &h, 10000) != 0 ||
        h.status != 0 || h.len != BATON_HELLO_BYTES)
        return -1;
    return read_n(fd, r, sizeof r, 10000) == sizeof r ? 0 : -1;
}

/* "Threads:" of /proc/PID/status, or -1. */
static inline int proc_threads(int pid)
{
    char path[64], line[256];
    int n = -1;
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %d", &n) == 1)
            break;
    fclose(f);
    return n;
}

/* Entries of /proc/PID/fd, or -1. */
static inline int proc_fds(int pid)
{
    char path[64];
    int n = 0;
    snprintf(path, sizeof path, "/proc/%d/fd", pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Waits up to timeout_ms for batond's threads and descriptors to equal
 * (threads, fds). Returns 1 when they did. */
static inline int wait_counts(int pid, int threads, int fds, int timeout_ms)
{
    int64_t end = now_ms() + timeout_ms;
    do {
        if (proc_threads(pid) == threads && proc_fds(pid) == fds)
            return 1;
        sleep_ms(20);
    } while (now_ms() < end);
    return 0;
}

/* A client connection with a deadline on every call; exits on failure. */
/* A graph node of op with result {ne0, ne1, 1, 1} F32, no sources, no out
 * leaf (the caller fills them in). */
static inline void node_init(struct baton_graph_node *n, uint32_t op, uint64_t ne0, uint64_t ne1)
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

static inline struct baton_conn *client_open(uint16_t port)
{
    struct baton_conn *c = NULL;
    int rc = baton_conn_connect("127.0.0.1", port, 10000, &c);
    if (rc != 0) {
        printf("not ok - connect: %s\n", baton_status_name(rc));
        exit(1);
    }
    return c;
}

/* Free memory as DEVICE_INFO reports it (UINT64_MAX on failure). */
static inline uint64_t free_memory(struct baton_conn *c)
{
    struct baton_device_info d;
    return baton_device_info(c, &d) == 0 ? d.free_memory : UINT64_MAX;
}

/* Waits up to timeout_ms for DEVICE_INFO's free memory to reach want. */
static inline int wait_free_memory(struct baton_conn *c, uint64_t want, int timeout_ms)
{
    int64_t end = now_ms() + timeout_ms;
    do {
        if (free_memory(c) == want)
            return 1;
        sleep_ms(20);
    } while (now_ms() < end);
    return 0;
}

#endif
