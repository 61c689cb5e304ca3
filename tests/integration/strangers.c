/* strangers PORT N ADDRS FIRST_ADDR READY_FILE SECONDS
 *
 * Holds N connections without a key open against a batond on 127.0.0.1:PORT
 * for SECONDS (or until SIGTERM), from ADDRS loopback source addresses
 * starting at FIRST_ADDR (an IPv4 address; the next ones count up in its
 * last two bytes). Four kinds, round robin:
 *   idle     connects and sends nothing;
 *   half     sends a frame header and half a HELLO payload, then nothing;
 *   trickle  sends a HELLO one byte per second;
 *   stall    sends a whole HELLO, reads the reply, never sends AUTH.
 * Whenever the server closes one (its handshake deadline, or evicted from
 * the lobby for a newer connection) it is opened again at once, so N stay
 * open for the whole run. Writes READY_FILE once each of the N has
 * connected at least once (a flood larger than the lobby never has all N
 * open at the same moment).
 * At the end prints one line of counts: "opened O closed C limit L
 * timeout T hello_replies H". Used by test_strangers.sh (issue 15). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HDR 24
#define HELLO 48

enum kind { IDLE = 0, HALF, TRICKLE, STALL, N_KINDS };

struct stranger {
    int fd;
    int kind;
    int connected;
    int ever; /* has connected at least once */
    uint32_t sent;     /* bytes of the HELLO frame sent */
    int64_t next_byte; /* trickle: when the next byte goes (ms) */
    uint8_t in[HDR];
    uint32_t got;
    struct in_addr src;
};

static volatile sig_atomic_t g_stop;
static uint16_t g_port;
static uint8_t g_hello[HDR + HELLO];
static unsigned long g_opened, g_closed, g_limit, g_timeout, g_replies;

static void on_term(int sig)
{
    (void)sig;
    g_stop = 1;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A HELLO frame: "BATN", cmd 1, seq 1, len 48; versions 1..1, role 1
 * (client), no features, a nonce of 0x5a. */
static void make_hello(void)
{
    memset(g_hello, 0, sizeof g_hello);
    memcpy(g_hello, "BATN", 4);
    g_hello[4] = 1;
    g_hello[8] = 1;
    g_hello[16] = HELLO;
    g_hello[HDR + 0] = 1;
    g_hello[HDR + 2] = 1;
    g_hello[HDR + 4] = 1;
    memset(g_hello + HDR + 16, 0x5a, 32);
}

static void open_one(struct stranger *s)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(g_port)};
    struct sockaddr_in b = {.sin_family = AF_INET, .sin_addr = s->src};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    s->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    s->connected = 0;
    s->sent = s->got = 0;
    s->next_byte = 0;
    if (s->fd < 0)
        return;
    int one = 1;
    setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(s->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(s->fd, (struct sockaddr *)&b, sizeof b) != 0 ||
        (connect(s->fd, (struct sockaddr *)&a, sizeof a) != 0 && errno != EINPROGRESS)) {
        close(s->fd);
        s->fd = -1;
        return;
    }
    g_opened++;
}

static void close_one(struct stranger *s)
{
    close(s->fd);
    s->fd = -1;
    g_closed++;
}

/* What the kind sends once connected (trickle: one byte per second). */
static void send_some(struct stranger *s, int64_t now)
{
    uint32_t upto = 0;
    if (s->kind == HALF)
        upto = HDR + HELLO / 2;
    else if (s->kind == STALL)
        upto = HDR + HELLO;
    else if (s->kind == TRICKLE && now >= s->next_byte && s->sent < HDR + HELLO) {
        upto = s->sent + 1;
        s->next_byte = now + 1000;
    }
    if (upto > s->sent) {
        ssize_t w = send(s->fd, g_hello + s->sent, upto - s->sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0)
            s->sent += (uint32_t)w;
    }
}

/* Reads what the server sent; returns 1 when it closed the connection. */
static int read_some(struct stranger *s)
{
    uint8_t b[256];
    for (;;) {
        ssize_t r = recv(s->fd, b, sizeof b, MSG_DONTWAIT);
        if (r > 0) {
            for (ssize_t i = 0; i < r && s->got < HDR; i++)
                s->in[s->got++] = b[i];
            if (s->got == HDR && s->in[6] == 0 && s->in[4] == 1) {
                g_replies++; /* a HELLO reply (stall) */
                s->got = HDR + 1;
            } else if (s->got == HDR) {
                uint16_t st = (uint16_t)(s->in[6] | s->in[7] << 8);
                g_limit += st == 10; /* -BATON_E_LIMIT: evicted */
                g_timeout += st == 19; /* -BATON_E_TIMEOUT: a frame cut off */
                s->got = HDR + 1;
            }
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        return 1; /* EOF or reset */
    }
}

int main(int argc, char **argv)
{
    int n, addrs, seconds;
    struct in_addr first;
    if (argc != 7 || (g_port = (uint16_t)atoi(argv[1])) == 0 || (n = atoi(argv[2])) <= 0 ||
        (addrs = atoi(argv[3])) <= 0 || inet_pton(AF_INET, argv[4], &first) != 1 ||
        (seconds = atoi(argv[6])) <= 0) {
        fprintf(stderr, "usage: strangers PORT N ADDRS FIRST_ADDR READY_FILE SECONDS\n");
        return 2;
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)n + 64) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, on_term);
    signal(SIGINT, on_term);
    make_hello();
    struct stranger *s = calloc((size_t)n, sizeof *s);
    struct pollfd *p = calloc((size_t)n, sizeof *p);
    if (!s || !p) {
        free(s);
        free(p);
        return 1;
    }
    uint32_t base = ntohl(first.s_addr);
    for (int i = 0; i < n; i++) {
        s[i].kind = i % N_KINDS;
        s[i].src.s_addr = htonl(base + (uint32_t)(i % addrs));
        open_one(&s[i]);
    }
    int64_t t0 = now_ms(), end = t0 + (int64_t)seconds * 1000;
    int ready = 0;
    while (!g_stop && now_ms() < end) {
        int64_t now = now_ms();
        int connected = 0;
        for (int i = 0; i < n; i++) {
            if (s[i].fd < 0)
                open_one(&s[i]);
            p[i] = (struct pollfd){.fd = s[i].fd,
                                   .events = s[i].connected ? POLLIN : POLLOUT};
            connected += s[i].ever;
        }
        if (!ready && connected == n) {
            FILE *f = fopen(argv[5], "w");
            if (f) {
                fprintf(f, "%d\n", n);
                fclose(f);
            }
            ready = 1;
        }
        int r = poll(p, (nfds_t)n, 50);
        now = now_ms();
        for (int i = 0; i < n && r >= 0; i++) {
            if (s[i].fd < 0)
                continue;
            if (!s[i].connected) {
                if (!(p[i].revents & (POLLOUT | POLLERR | POLLHUP)))
                    continue;
                int err = 0;
                socklen_t el = sizeof err;
                if (getsockopt(s[i].fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0) {
                    close_one(&s[i]);
                    continue;
                }
                s[i].connected = 1;
                s[i].ever = 1;
            }
            send_some(&s[i], now);
            if ((p[i].revents & (POLLIN | POLLHUP | POLLERR)) && read_some(&s[i]))
                close_one(&s[i]);
        }
    }
    printf("opened %lu closed %lu limit %lu timeout %lu hello_replies %lu ready %d\n", g_opened,
           g_closed, g_limit, g_timeout, g_replies, ready);
    for (int i = 0; i < n; i++)
        if (s[i].fd >= 0)
            close(s[i].fd);
    free(s);
    free(p);
    return 0;
}
