/* lobby_cases victim PORT      (batond with max_unauthenticated 4)
 * lobby_cases emfile PORT N    (batond under a descriptor limit, keyless)
 *
 * Who the lobby evicts (src/server/lobby.c), issue 15:
 *
 * victim: H from 127.0.0.5 and X1..X3 from 127.0.0.6 fill a lobby of 4
 *   (silent connections); X4 from 127.0.0.6 arrives: the address holding
 *   the most, the newcomer counted, is 127.0.0.6, so X1 is evicted (one
 *   E_LIMIT frame), not H, the oldest; then Y from 127.0.0.7 evicts X2.
 *   H, X3, X4 and Y stay open.
 * emfile: N READY connections (no key: a HELLO each) use up the
 *   descriptors batond has, then 100 silent connections from 127.0.0.9
 *   arrive; a new client's connection gets in on its first attempt (the
 *   lobby evicts a silent one when accept finds no descriptor, instead of
 *   backing off while strangers hold them all).
 *
 * Prints ok / not ok lines; exit 0 iff all passed. Loopback only. */
#include "limits_util.h"

/* 1 when the server sent E_LIMIT and closed fd within ms, 0 when fd is
 * still open and silent after ms, -1 otherwise. */
static int evicted(int fd, int ms)
{
    uint8_t hb[BATON_FRAME_HEADER_BYTES];
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, ms) == 0)
        return 0;
    if (read_n(fd, hb, sizeof hb, ms) != sizeof hb)
        return -1;
    return memcmp(hb, "BATN", 4) == 0 && hb[6] == (uint8_t)(-BATON_E_LIMIT) ? 1 : -1;
}

static int cmd_victim(uint16_t port)
{
    int h = tcp_open(port, "127.0.0.5", 0);
    sleep_ms(50);
    int x[4];
    for (int i = 0; i < 3; i++) {
        x[i] = tcp_open(port, "127.0.0.6", 0);
        sleep_ms(50); /* accepted in this order */
    }
    check(h >= 0 && x[0] >= 0 && x[1] >= 0 && x[2] >= 0, "H and X1..X3 fill the lobby of 4");
    x[3] = tcp_open(port, "127.0.0.6", 0);
    check(evicted(x[0], 2000) == 1, "X4 from X's address evicts X1 (the oldest of the address "
                                     "that would hold the most)");
    check(evicted(h, 300) == 0, "H, the oldest entry, stays");
    int y = tcp_open(port, "127.0.0.7", 0);
    check(evicted(x[1], 2000) == 1, "Y from a third address evicts X2");
    check(evicted(h, 100) == 0 && evicted(x[2], 100) == 0 && evicted(x[3], 100) == 0 &&
              evicted(y, 100) == 0,
          "H, X3, X4 and Y stay open");
    close(h);
    close(y);
    for (int i = 0; i < 4; i++)
        close(x[i]);
    return g_failed ? 1 : 0;
}

static int cmd_emfile(uint16_t port, int n)
{
    struct baton_conn **ready = calloc((size_t)n, sizeof *ready);
    int opened = 0;
    if (!ready)
        return 1;
    for (int i = 0; i < n; i++)
        if (baton_conn_connect("127.0.0.1", port, 3000, &ready[i]) == 0)
            opened++;
    check(opened == n, "%d READY connections of %d", opened, n);
    int s[100];
    for (int i = 0; i < 100; i++)
        s[i] = tcp_open(port, "127.0.0.9", 1);
    sleep_ms(500); /* the server has met EMFILE by now */
    struct baton_conn *c = NULL;
    int64_t t0 = now_ms();
    int rc = baton_conn_connect("127.0.0.1", port, 3000, &c);
    struct baton_device_info d;
    check(rc == 0 && baton_device_info(c, &d) == 0,
          "a new client gets in on its first attempt while strangers hold the descriptors: %s "
          "after %lld ms",
          baton_status_name(rc), (long long)(now_ms() - t0));
    baton_conn_close(c);
    for (int i = 0; i < 100; i++)
        if (s[i] >= 0)
            close(s[i]);
    for (int i = 0; i < n; i++)
        baton_conn_close(ready[i]);
    free(ready);
    return g_failed ? 1 : 0;
}

int main(int argc, char **argv)
{
    uint16_t port = 0;
    signal(SIGPIPE, SIG_IGN);
    if (argc >= 3)
        baton_net_parse_port(argv[2], &port);
    if (argc == 3 && port && !strcmp(argv[1], "victim"))
        return cmd_victim(port);
    if (argc == 4 && port && !strcmp(argv[1], "emfile"))
        return cmd_emfile(port, atoi(argv[3]));
    fprintf(stderr, "usage: see the comment at the top of tests/integration/lobby_cases.c\n");
    return 2;
}
