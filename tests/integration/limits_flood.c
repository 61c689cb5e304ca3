/* limits_flood PORT PID HANDSHAKE_MS MAX_UNAUTH PER_IP MAX_CONN
 *
 * Drives a batond (started by test_limits_flood.sh with the given policy)
 * with silent connections and checks the lobby's caps (issues 3 and 15,
 * src/server/lobby.c):
 *
 * 1. 200 silent connections from 50 loopback source addresses (4 each,
 *    127.0.0.2 ..): the lobby holds MAX_UNAUTH of them, each newer one
 *    evicts the oldest (one E_LIMIT frame, then close); the last
 *    MAX_UNAUTH, less the one the new client's arrival evicts, are
 *    closed at their handshake deadline (HANDSHAKE_MS,
 *    within [-100 ms, +2500 ms]). While the flood lasts, batond has no
 *    thread more than the two clients' (strangers get none) and at most
 *    MAX_UNAUTH + 3 descriptors more than its baseline; a client connected
 *    before the flood keeps being served (a byte-exact GET every 100 ms); a
 *    new client from 127.0.0.1 gets in on its first attempt; afterwards the
 *    thread and descriptor counts return to the baseline.
 * 2. 10 silent connections from one address: PER_IP are held to their
 *    deadline, the rest evicted by newer ones from that address.
 * 3. MAX_CONN authenticated connections are served; one more gets E_LIMIT.
 *
 * Prints one "ok"/"not ok" line per check; exit 0 iff all passed. Every
 * wait is bounded, everything is on loopback. */
#include "limits_util.h"

#define N_FLOOD 200
#define PER_ADDR 4

struct flood_conn {
    int fd;
    int64_t t_est;   /* connect completed (ms), -1 before */
    int64_t t_close; /* closed by the server (ms), -1 before */
    int got_limit;   /* an E_LIMIT frame came before the close */
    uint8_t hdr[BATON_FRAME_HEADER_BYTES];
    size_t hdr_got;
};

static uint16_t g_port;
static int g_pid;

/* One step of a flood connection on poll events. */
static void flood_event(struct flood_conn *f, short revents, int64_t now)
{
    if (f->t_est < 0) {
        int err = 0;
        socklen_t el = sizeof err;
        if (getsockopt(f->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0) {
            f->t_est = f->t_close = now; /* refused by the kernel: counted below */
            return;
        }
        f->t_est = now;
    }
    if (!(revents & (POLLIN | POLLHUP | POLLERR)))
        return;
    for (;;) {
        uint8_t b[64];
        ssize_t r = recv(f->fd, b, sizeof b, MSG_DONTWAIT);
        if (r > 0) {
            for (ssize_t i = 0; i < r && f->hdr_got < sizeof f->hdr; i++)
                f->hdr[f->hdr_got++] = b[i];
            if (f->hdr_got == sizeof f->hdr && memcmp(f->hdr, "BATN", 4) == 0 &&
                f->hdr[6] == (uint8_t)(-BATON_E_LIMIT) && f->hdr[7] == 0)
                f->got_limit = 1;
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && errno == EAGAIN)
            return;
        f->t_close = now; /* EOF or reset */
        return;
    }
}

/* Opens n silent connections from the given source addresses and follows
 * them until all are closed or deadline_ms passes. Samples batond's counts
 * into *max_threads / *max_fds. on_tick (may be NULL) runs every loop. */
static void run_flood(struct flood_conn *f, int n, const char *const *src, int64_t deadline_ms,
                      int *max_threads, int *max_fds, void (*on_tick)(int64_t t0, int64_t now),
                      int64_t *t0_out)
{
    int64_t t0 = now_ms();
    *t0_out = t0;
    for (int i = 0; i < n; i++) {
        f[i] = (struct flood_conn){.fd = tcp_open(g_port, src[i], 1), .t_est = -1, .t_close = -1};
        if (f[i].fd < 0) {
            printf("# cannot open flood connection %d from %s: %s\n", i, src[i], strerror(errno));
            f[i].t_est = f[i].t_close = now_ms();
        }
    }
    struct pollfd *p = calloc((size_t)n, sizeof *p);
    int *map = calloc((size_t)n, sizeof *map);
    if (!p || !map)
        exit(1);
    for (;;) {
        int k = 0;
        for (int i = 0; i < n; i++) {
            if (f[i].t_close >= 0)
                continue;
            p[k] = (struct pollfd){.fd = f[i].fd, .events = f[i].t_est < 0 ? POLLOUT : POLLIN};
            map[k++] = i;
        }
        int64_t now = now_ms();
        if (k == 0 || now - t0 > deadline_ms)
            break;
        int r = poll(p, (nfds_t)k, 5);
        now = now_ms();
        for (int j = 0; r > 0 && j < k; j++)
            if (p[j].revents)
                flood_event(&f[map[j]], p[j].revents, now);
        int th = proc_threads(g_pid), fd = proc_fds(g_pid);
        if (th > *max_threads)
            *max_threads = th;
        if (fd > *max_fds)
            *max_fds = fd;
        if (on_tick)
            on_tick(t0, now);
    }
    free(p);
    free(map);
}

/* ---- the clients that must keep working during the flood ---- */

static struct baton_conn *g_early;
static struct baton_tensor_desc g_early_t;
static uint8_t g_early_data[4096];
static int64_t g_last_probe;
static int g_probes, g_probe_failures;

static struct baton_conn *g_new;
static int64_t g_new_ok_at = -1, g_next_try;
static int g_new_tries, g_new_refusals;
static int g_flood_settled; /* set once the flood's refusals have all arrived */

static void tick(int64_t t0, int64_t now)
{
    if (now - g_last_probe >= 100) {
        uint8_t back[4096];
        g_last_probe = now;
        g_probes++;
        if (baton_get_tensor(g_early, &g_early_t, 0, back, sizeof back) != 0 ||
            memcmp(back, g_early_data, sizeof back) != 0)
            g_probe_failures++;
    }
    if (!g_new && g_flood_settled && now >= g_next_try) {
        struct baton_conn *c = NULL;
        g_new_tries++;
        int rc = baton_conn_connect("127.0.0.1", g_port, 2000, &c);
        if (rc == 0) {
            g_new = c;
            g_new_ok_at = now_ms() - t0;
        } else {
            g_new_refusals += rc == BATON_E_LIMIT;
            g_next_try = now_ms() + 100;
        }
    }
}

int main(int argc, char **argv)
{
    int handshake_ms, max_unauth, per_ip, max_conn;
    signal(SIGPIPE, SIG_IGN);
    if (argc != 7 || baton_net_parse_port(argv[1], &g_port) != 0 || g_port == 0 ||
        (g_pid = atoi(argv[2])) <= 0 || (handshake_ms = atoi(argv[3])) <= 0 ||
        (max_unauth = atoi(argv[4])) <= 0 || (per_ip = atoi(argv[5])) <= 0 ||
        (max_conn = atoi(argv[6])) <= 0) {
        fprintf(stderr, "usage: limits_flood PORT PID HANDSHAKE_MS MAX_UNAUTH PER_IP MAX_CONN\n");
        return 2;
    }
    /* the flood opens 200 descriptors here */
    int base_threads = proc_threads(g_pid), base_fds = proc_fds(g_pid);
    check(base_threads > 0 && base_fds > 0, "baseline: %d threads, %d descriptors", base_threads,
          base_fds);

    /* ---- 1: 200 silent connections ---- */
    g_early = client_open(g_port);
    uint64_t h;
    for (size_t i = 0; i < sizeof g_early_data; i++)
        g_early_data[i] = (uint8_t)(i * 7 + 3);
    int rc = baton_alloc_buffer(g_early, sizeof g_early_data, &h);
    if (rc == 0)
        rc = baton_tensor_init(&g_early_t, h, 0, BATON_TYPE_I32, sizeof g_early_data / 4, 1, 1, 1);
    if (rc == 0)
        rc = baton_set_tensor(g_early, &g_early_t, 0, g_early_data, sizeof g_early_data);
    check(rc == 0, "a client connected before the flood stores its bytes");

    static struct flood_conn f[N_FLOOD];
    static char addr[N_FLOOD][32];
    const char *src[N_FLOOD];
    for (int i = 0; i < N_FLOOD; i++) {
        snprintf(addr[i], sizeof addr[i], "127.0.0.%d", 2 + i / PER_ADDR);
        src[i] = addr[i];
    }
    int max_threads = 0, max_fds = 0;
    int64_t t0;
    g_flood_settled = 0;
    /* the new client starts trying once every refusal has come back, so the
     * flood alone fills the unauthenticated slots */
    {
        /* run_flood with a tick that also watches for the settled flood */
        int64_t deadline = handshake_ms + 6000;
        t0 = now_ms();
        for (int i = 0; i < N_FLOOD; i++) {
            f[i] = (struct flood_conn){.fd = tcp_open(g_port, src[i], 1), .t_est = -1, .t_close = -1};
            if (f[i].fd < 0) {
                printf("# cannot open flood connection %d from %s: %s\n", i, src[i],
                       strerror(errno));
                f[i].t_est = f[i].t_close = now_ms();
            }
        }
        struct pollfd p[N_FLOOD];
        int map[N_FLOOD];
        for (;;) {
            int k = 0, refused = 0;
            for (int i = 0; i < N_FLOOD; i++) {
                refused += f[i].got_limit && f[i].t_close >= 0;
                if (f[i].t_close >= 0)
                    continue;
                p[k] = (struct pollfd){.fd = f[i].fd,
                                       .events = f[i].t_est < 0 ? POLLOUT : POLLIN};
                map[k++] = i;
            }
            if (refused >= N_FLOOD - max_unauth)
                g_flood_settled = 1;
            int64_t now = now_ms();
            if ((k == 0 && g_new) || now - t0 > deadline)
                break;
            int r = k ? poll(p, (nfds_t)k, 5) : (sleep_ms(5), 0);
            now = now_ms();
            for (int j = 0; r > 0 && j < k; j++)
                if (p[j].revents)
                    flood_event(&f[map[j]], p[j].revents, now);
            int th = proc_threads(g_pid), fdn = proc_fds(g_pid);
            if (th > max_threads)
                max_threads = th;
            if (fdn > max_fds)
                max_fds = fdn;
            tick(t0, now);
        }
    }
    int held = 0, refused = 0, open_left = 0, bad_refusal = 0, early_close = 0, late_close = 0;
    for (int i = 0; i < N_FLOOD; i++) {
        if (f[i].t_close < 0) {
            open_left++;
            continue;
        }
        int64_t d = f[i].t_close - f[i].t_est;
        if (f[i].got_limit) {
            refused++;
            if (d > handshake_ms / 2)
                bad_refusal++;
            continue;
        }
        held++;
        if (d < handshake_ms - 100)
            early_close++;
        if (d > handshake_ms + 2500)
            late_close++;
    }
    check(open_left == 0, "every flood connection was closed by the server (%d left open)",
          open_left);
    /* the lobby ends the flood full; the new client's arrival evicts one */
    check(held == max_unauth - 1,
          "%d of %d silent connections held to their deadline (cap %d, one evicted by the new "
          "client)", held, N_FLOOD, max_unauth);
    check(refused == N_FLOOD - held && bad_refusal == 0,
          "%d evicted by newer ones with one E_LIMIT frame (%d slow)", refused, bad_refusal);
    check(early_close == 0 && late_close == 0,
          "each held connection closed at its %d ms deadline (%d early, %d late)", handshake_ms,
          early_close, late_close);
    /* no thread for a stranger: only the early client's and the new one's */
    check(max_threads <= base_threads + 2,
          "threads during the flood: at most %d (baseline %d, + the early and the new client)",
          max_threads, base_threads);
    /* the capped flood, the new client (+1 for a descriptor between accept
     * and eviction) */
    check(max_fds <= base_fds + 3 + max_unauth,
          "descriptors during the flood: at most %d (baseline %d, cap %d)", max_fds, base_fds,
          max_unauth);
    check(g_probes >= 3 && g_probe_failures == 0,
          "the client connected before the flood was served throughout (%d GETs, %d failed)",
          g_probes, g_probe_failures);
    check(g_new != NULL && g_new_tries == 1,
          "a new client during the flood got in on its first attempt, after %lld ms (%d tries, "
          "%d E_LIMIT)",
          (long long)g_new_ok_at, g_new_tries, g_new_refusals);
    if (g_new) {
        uint64_t h2;
        struct baton_tensor_desc t;
        uint8_t out[256], back[256];
        for (int i = 0; i < 256; i++)
            out[i] = (uint8_t)(255 - i);
        rc = baton_alloc_buffer(g_new, sizeof out, &h2);
        if (rc == 0)
            rc = baton_tensor_init(&t, h2, 0, BATON_TYPE_I32, 64, 1, 1, 1);
        if (rc == 0)
            rc = baton_set_tensor(g_new, &t, 0, out, sizeof out);
        if (rc == 0)
            rc = baton_get_tensor(g_new, &t, 0, back, sizeof back);
        check(rc == 0 && memcmp(out, back, sizeof out) == 0, "the new client is served");
    }
    for (int i = 0; i < N_FLOOD; i++)
        if (f[i].fd >= 0)
            close(f[i].fd);
    baton_conn_close(g_new);
    baton_conn_close(g_early);
    int back = wait_counts(g_pid, base_threads, base_fds, 10000);
    check(back, "threads and descriptors back to the baseline (%d, %d): now %d, %d",
          base_threads, base_fds, proc_threads(g_pid), proc_fds(g_pid));

    /* ---- 2: one address ---- */
    {
        enum { N = 10 };
        static struct flood_conn g[N];
        const char *one[N];
        int mt = 0, mf = 0;
        int64_t t1;
        for (int i = 0; i < N; i++)
            one[i] = "127.0.0.200";
        run_flood(g, N, one, handshake_ms + 4000, &mt, &mf, NULL, &t1);
        int h1 = 0, r1 = 0, left = 0;
        for (int i = 0; i < N; i++) {
            left += g[i].t_close < 0;
            if (g[i].t_close >= 0) {
                r1 += g[i].got_limit;
                h1 += !g[i].got_limit;
            }
            if (g[i].fd >= 0)
                close(g[i].fd);
        }
        check(left == 0 && h1 == per_ip && r1 == N - per_ip,
              "from one address: %d held (per-address cap %d), %d evicted, %d left", h1, per_ip,
              r1, left);
        check(wait_counts(g_pid, base_threads, base_fds, 10000),
              "threads and descriptors back to the baseline after it");
    }

    /* ---- 3: the connection cap ---- */
    {
        struct baton_conn **cs = calloc((size_t)max_conn, sizeof *cs);
        int opened = 0;
        if (!cs)
            return 1;
        for (int i = 0; i < max_conn; i++)
            if (baton_conn_connect("127.0.0.1", g_port, 5000, &cs[i]) == 0)
                opened++;
        check(opened == max_conn, "%d authenticated connections served (cap %d)", opened,
              max_conn);
        struct baton_conn *extra = NULL;
        rc = baton_conn_connect("127.0.0.1", g_port, 5000, &extra);
        check(rc == BATON_E_LIMIT, "one more connection is refused: %s (want E_LIMIT)",
              baton_status_name(rc));
        baton_conn_close(extra);
        struct baton_device_info d;
        check(opened > 0 && baton_device_info(cs[0], &d) == 0, "the first one is still served");
        for (int i = 0; i < max_conn; i++)
            baton_conn_close(cs[i]);
        free(cs);
        check(wait_counts(g_pid, base_threads, base_fds, 10000),
              "threads and descriptors back to the baseline at the end");
    }
    printf("%d checks, %d failed\n", g_n, g_failed);
    return g_failed ? 1 : 0;
}
