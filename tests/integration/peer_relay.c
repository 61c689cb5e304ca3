/* peer_relay: a TCP relay for the direct-path tests, put on the peer-facing
 * path between a source batond and a destination batond (or a test peer).
 *
 *   peer_relay --to PORT --port-file FILE [--port N] [--mode MODE]
 *              [--after BYTES] [--chunk BYTES --delay-ms MS]
 *              [--mark-after BYTES --mark-file FILE [--hold-ms MS]]
 *
 * Listens on 127.0.0.1 (port N, default 0 = ephemeral; written to FILE once
 * listening) and relays every accepted connection to 127.0.0.1:PORT, both
 * directions, one thread per connection. Modes:
 *   forward  relay everything (default);
 *   stall    relay until BYTES bytes in all have gone towards the
 *            destination, then relay nothing more, on any connection (old
 *            or new), keeping every socket open: a peer that stops
 *            answering;
 *   die      once BYTES bytes have gone towards the destination, the relay
 *            kills itself with SIGKILL: a peer that vanishes mid-run;
 *   slow     towards the destination, relay at most --chunk bytes, then
 *            sleep --delay-ms, and so on: a slow peer;
 *   cut      the first connection is closed (both sides, mid-frame) once
 *            BYTES bytes have gone towards the destination on it; later
 *            connections are relayed in full: one reset on a path that
 *            works again at once;
 *   delay    every byte, both directions, is relayed --delay-ms after it
 *            arrived (a link with that one-way latency; bandwidth is not
 *            limited): the latency netem would add, in user space.
 * --mark-file FILE is created once --mark-after bytes have gone towards
 * the destination (so a test can act while a transfer is in flight); in
 * slow mode --hold-ms makes the first pause after that MS instead of
 * --delay-ms (time for the test to act before the next bytes go).
 * SIGTERM ends the relay. Exit 2 on a usage error, 1 if it cannot listen. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "sock_io.h"

#include "net/net.h"

enum mode { MODE_FORWARD, MODE_STALL, MODE_DIE, MODE_SLOW, MODE_CUT, MODE_DELAY };

static enum mode g_mode = MODE_FORWARD;
static uint16_t g_to;
static uint64_t g_after, g_mark_after;
static size_t g_chunk = 16384;
static int g_delay_ms;
static const char *g_mark_file;
static int g_hold_ms;
static atomic_int g_held;
static atomic_uint_fast64_t g_forwarded; /* bytes sent towards the destination */
static atomic_int g_stalled, g_marked, g_cut_taken;

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Counts bytes that went towards the destination and applies the mode's
 * triggers. */
static void count_forwarded(size_t n)
{
    uint64_t total = atomic_fetch_add(&g_forwarded, n) + n;
    if (g_mark_file && total >= g_mark_after && !atomic_exchange(&g_marked, 1)) {
        int fd = open(g_mark_file, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd >= 0)
            close(fd);
    }
    if (total >= g_after) {
        if (g_mode == MODE_DIE)
            kill(getpid(), SIGKILL);
        if (g_mode == MODE_STALL)
            atomic_store(&g_stalled, 1);
    }
}

/* Holds a connection open without relaying anything, until the process
 * ends. */
static void hold_forever(void)
{
    for (;;)
        sleep_ms(1000);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* One direction of a delay-mode connection: bytes read from `from` are
 * written to `to` g_delay_ms after they arrived. A FIFO of chunks with
 * their due times; poll waits for input or the head's due time. */
struct delay_dir {
    int from, to;
};

struct delay_chunk {
    uint64_t due;
    size_t n;
    struct delay_chunk *next;
    uint8_t data[];
};

static void *delay_main(void *arg)
{
    struct delay_dir *d = arg;
    struct delay_chunk *head = NULL, **tail = &head;
    int open = 1;
    while (open || head) {
        uint64_t now = now_ms();
        int timeout = head ? (head->due > now ? (int)(head->due - now) : 0) : -1;
        struct pollfd p = {.fd = d->from, .events = POLLIN};
        if (open && poll(&p, 1, timeout) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR))) {
            uint8_t buf[65536];
            ssize_t r = recv(d->from, buf, sizeof buf, 0);
            struct delay_chunk *c = r > 0 ? malloc(sizeof *c + (size_t)r) : NULL;
            if (!c) {
                open = 0; /* end of input (or no memory): what is queued still goes */
            } else {
                c->due = now_ms() + (uint64_t)g_delay_ms;
                c->n = (size_t)r;
                c->next = NULL;
                memcpy(c->data, buf, (size_t)r);
                *tail = c;
                tail = &c->next;
            }
        } else if (!open) {
            sleep_ms(timeout > 0 ? timeout : 0);
        }
        while (head && head->due <= now_ms()) {
            struct delay_chunk *c = head;
            int failed = write_all(d->to, c->data, c->n) != 0;
            head = c->next;
            if (!head)
                tail = &head;
            free(c);
            if (failed) {
                open = 0;
                while (head) {
                    c = head->next;
                    free(head);
                    head = c;
                }
            }
        }
    }
    shutdown(d->to, SHUT_WR);
    return NULL;
}

/* A delay-mode connection: one thread per direction. */
static void delay_pair(int cfd, int sfd)
{
    struct delay_dir up = {cfd, sfd}, down = {sfd, cfd};
    pthread_t t;
    if (pthread_create(&t, NULL, delay_main, &up) != 0)
        return;
    delay_main(&down);
    pthread_join(t, NULL);
}

static void *pair_main(void *arg)
{
    int cfd = (int)(intptr_t)arg, sfd = -1;
    uint8_t buf[65536];
    /* cut: the first connection only, after g_after bytes of its own */
    const int cut = g_mode == MODE_CUT && !atomic_exchange(&g_cut_taken, 1);
    uint64_t mine = 0;
    if (atomic_load(&g_stalled))
        hold_forever();
    if (baton_net_connect("127.0.0.1", g_to, 5000, &sfd) != 0) {
        close(cfd);
        return NULL;
    }
    if (g_mode == MODE_DELAY) {
        delay_pair(cfd, sfd);
        close(cfd);
        close(sfd);
        return NULL;
    }
    for (;;) {
        struct pollfd p[2] = {{.fd = cfd, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
        if (poll(p, 2, 200) < 0 && errno != EINTR)
            break;
        if (atomic_load(&g_stalled))
            hold_forever();
        if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            size_t cap = g_mode == MODE_SLOW && g_chunk < sizeof buf ? g_chunk : sizeof buf;
            if (g_mode == MODE_STALL) {
                uint64_t done = atomic_load(&g_forwarded);
                if (done >= g_after) {
                    atomic_store(&g_stalled, 1);
                    hold_forever();
                }
                if (g_after - done < cap)
                    cap = (size_t)(g_after - done); /* stop exactly there */
            }
            if (cut && g_after - mine < cap)
                cap = (size_t)(g_after - mine);
            ssize_t r = cap > 0 ? recv(cfd, buf, cap, 0) : 0;
            if (r <= 0 || write_all(sfd, buf, (size_t)r) != 0)
                break;
            count_forwarded((size_t)r);
            mine += (uint64_t)r;
            if (cut && mine >= g_after)
                break; /* both sockets close below */
            if (g_mode == MODE_SLOW && g_delay_ms > 0)
                sleep_ms(g_hold_ms > 0 && atomic_load(&g_marked) && !atomic_exchange(&g_held, 1)
                             ? g_hold_ms
                             : g_delay_ms);
        }
        if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t r = recv(sfd, buf, sizeof buf, 0);
            if (r <= 0 || write_all(cfd, buf, (size_t)r) != 0)
                break;
        }
    }
    close(cfd);
    close(sfd);
    return NULL;
}

static int write_port_file(const char *path, uint16_t port)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    fprintf(f, "%u\n", (unsigned)port);
    if (fclose(f) != 0)
        return -1;
    return rename(tmp, path);
}

int main(int argc, char **argv)
{
    const char *port_file = NULL;
    uint16_t port = 0, bound = 0;
    int lfd;
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            goto usage;
        if (!strcmp(a, "--to"))
            g_to = (uint16_t)atoi(v);
        else if (!strcmp(a, "--port"))
            port = (uint16_t)atoi(v);
        else if (!strcmp(a, "--port-file"))
            port_file = v;
        else if (!strcmp(a, "--after"))
            g_after = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--chunk"))
            g_chunk = (size_t)strtoull(v, NULL, 10);
        else if (!strcmp(a, "--delay-ms"))
            g_delay_ms = atoi(v);
        else if (!strcmp(a, "--mark-after"))
            g_mark_after = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--mark-file"))
            g_mark_file = v;
        else if (!strcmp(a, "--hold-ms"))
            g_hold_ms = atoi(v);
        else if (!strcmp(a, "--mode")) {
            if (!strcmp(v, "forward"))
                g_mode = MODE_FORWARD;
            else if (!strcmp(v, "stall"))
                g_mode = MODE_STALL;
            else if (!strcmp(v, "die"))
                g_mode = MODE_DIE;
            else if (!strcmp(v, "slow"))
                g_mode = MODE_SLOW;
            else if (!strcmp(v, "cut"))
                g_mode = MODE_CUT;
            else if (!strcmp(v, "delay"))
                g_mode = MODE_DELAY;
            else
                goto usage;
        } else {
            goto usage;
        }
    }
    if (!g_to || !port_file || g_chunk == 0)
        goto usage;
    if (g_mode == MODE_STALL && g_after == 0)
        atomic_store(&g_stalled, 1);
    signal(SIGPIPE, SIG_IGN);
    if (baton_net_listen("127.0.0.1", port, 64, &lfd, &bound) != 0 ||
        write_port_file(port_file, bound) != 0) {
        fprintf(stderr, "peer_relay: cannot listen on 127.0.0.1:%u\n", (unsigned)port);
        return 1;
    }
    for (;;) {
        struct pollfd p = {.fd = lfd, .events = POLLIN};
        int cfd;
        pthread_t t;
        if (poll(&p, 1, -1) < 0)
            continue;
        if (baton_net_accept(lfd, &cfd) != 0)
            continue;
        if (pthread_create(&t, NULL, pair_main, (void *)(intptr_t)cfd) != 0) {
            close(cfd);
            continue;
        }
        pthread_detach(t);
    }
usage:
    fprintf(stderr, "usage: peer_relay --to PORT --port-file FILE [--port N] "
                    "[--mode forward|stall|die|slow|cut|delay] [--after BYTES] [--chunk BYTES "
                    "--delay-ms MS] [--mark-after BYTES --mark-file FILE [--hold-ms MS]]\n");
    return 2;
}
