/* Fuzz target lobby: the pre-authentication lobby of batond
 * (src/server/lobby.c) with its real epoll loop, entries, deadlines,
 * eviction and hand-off to connection threads, one fresh server per input.
 *
 * The harness drives the lobby through its test seam (server_internal.h:
 * server_lobby_create / _adopt / _step / _entries / _destroy), which is
 * server_lobby_run without the listening socket: a "connection" is one end
 * of a socketpair adopted with an address the input chooses (what accept
 * and getpeername give batond), the other end the harness's client. Time
 * is the harness's clock (virtual nanoseconds), so deadlines are
 * deterministic. After every record the harness steps the lobby until
 * epoll reports nothing (each step reads, replies, closes or hands over),
 * then reads every client end without blocking.
 *
 * Input: byte 0 = configuration
 *   bit 0     keyed: the server holds a client key, a peer key and a named
 *             client "alice" (her own key, max_connections 1); else no key
 *   bit 1     encrypt (keyed only)
 *   bits 2-3  max_unauthenticated 1, 2, 3, 5 (the lobby's cap)
 *   bits 4-5  max_unauthenticated_per_ip 1, 2, 3, 8
 *   bits 6-7  max_connections 1, 2, 3, 4 (READY connections of the
 *             unnamed class)
 * then records, op byte: bits 0-2 the kind, bits 3-7 an argument a
 * (a connection: the (a % opened)-th connection of the input):
 *   0 OPEN   a new connection from address a: bits 0-1 family (0: none,
 *            as an AF_UNIX client; 1, 3: IPv4; 2: IPv6), bits 2-3 the host
 *            (four per family), bit 4 (IPv6) another host of the same /64
 *   1 DATA   next byte n, then n raw bytes to connection a
 *   2 HELLO  next byte v: a HELLO frame built by the harness to a:
 *            bits 0-1 role (client, peer, 0, 3), bits 2-3 versions
 *            (1..1, 1..9, 2..3: none in common, 3..1: min > max), bit 4:
 *            only the first (next byte % 72) bytes now, the rest on REST;
 *            the nonce from libsodium, the AUTH feature when keyed
 *   3 AUTH   next byte v: an AUTH frame to a whose proof the harness
 *            computes (src/auth, the initiator's side) over its HELLO and
 *            the server's HELLO reply as received: bits 0-1 the key
 *            (client, peer, alice's, one the server does not hold), bit 2
 *            flips a proof byte, bit 3: only the first (next byte % 56)
 *            bytes now; a zero proof when the harness has no transcript
 *   4 REST   the rest of a frame HELLO or AUTH split
 *   5 CLOSE  closes the client's end of a
 *   6 TICK   the clock advances by (a + 1) * 50 ms (the handshake
 *            timeout is 1000 ms: a tick can land exactly on a deadline)
 *   7 FLOOD  (a % 8) + 1 new connections from one address: a's bits 3-4
 *            pick the host of an IPv4 address
 * At most 32 connections per input; each connection is sent at most its
 * handshake's bytes (HELLO + AUTH frames keyed, the HELLO frame without
 * keys; more is cut), so a connection handed over has nothing unread and
 * its thread waits for a request the harness never sends: the count of
 * running connection threads is exactly the harness's count of READY
 * connections.
 *
 * Properties (FUZZ_CHECK), besides memory safety:
 *   - caps: the lobby never holds more than max_unauthenticated entries,
 *     nor (an address being an IPv4 address or an IPv6 /64) more than
 *     max_unauthenticated_per_ip of one address; server_lobby_entries
 *     equals the harness's count of connections neither closed nor READY;
 *   - eviction: a new connection evicts exactly the entry the rules of
 *     lobby.c name, computed here independently (the oldest of its own
 *     address when that holds the per-address cap, else when the lobby is
 *     full the oldest entry of the address holding the most, the newcomer
 *     counted, ties to the address with the oldest entry); the evicted
 *     client reads one E_LIMIT frame (cmd 0, seq 0) and then end of file,
 *     and no other connection is closed;
 *   - deadlines: at each tick, exactly the connections whose handshake
 *     timeout has passed are closed, with one E_TIMEOUT frame when they were
 *     inside a frame and none otherwise;
 *   - frames: every frame a client reads has the magic, no flags; an error
 *     frame has no payload and is the last thing before end of file; OK
 *     frames are a HELLO reply (48 bytes, features PIPELINE and OWNER_FENCE,
 *     + AUTH, PEER_COPY, ENCRYPT as configured) and, keyed, an AUTH reply
 *     (32 bytes) after it;
 *   - handshakes built by the harness (whole frames in order): the outcome
 *     is the one server.h / respond.c promise: E_INVAL (role 3, min > max),
 *     E_PROTO (role 0), E_VERSION, E_UNSUPPORTED (peer role without keys),
 *     E_AUTH (a wrong key or a flipped proof byte), E_LIMIT when the
 *     connection's class (alice's own, or the unnamed one) is full, each
 *     echoing cmd and seq; else the OK reply, and a keyed AUTH reply carries
 *     the server's proof, which verifies;
 *   - AUTH never succeeds without the harness's proof under a key the
 *     server holds for the HELLO's role;
 *   - hand-off exactly once: a connection is READY once its last handshake
 *     reply arrived; the server's running connection threads equal the
 *     READY connections after every record (a READY connection the harness
 *     closes ends its thread), and a READY client reads nothing more;
 *   - at the end, with every client closed: the lobby is empty, and after
 *     the server is destroyed the process holds exactly the descriptors it
 *     held before the input.
 */
#include "fuzz_common.h"
#include "fuzz_keys.h"
#include "fuzz_random.h"

#include <dirent.h>
#include <errno.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "auth/auth.h"
#include "baton/status.h"
#include "core/limits.h"
#include "server/server.h"
#include "server/server_internal.h"
#include "wire/wire.h"

#define MAX_CONNS 32
#define HELLO_FRAME (BATON_FRAME_HEADER_BYTES + BATON_HELLO_BYTES) /* 72 */
#define AUTH_FRAME (BATON_FRAME_HEADER_BYTES + BATON_PROOF_BYTES)  /* 56 */
#define TIMEOUT_MS 1000
#define MAX_STEPS 4096 /* steps per record before the lobby counts as spinning */

enum conn_state { C_LOBBY = 0, C_READY, C_GONE };

/* A close the harness predicts: none, or a status (0: end of file without
 * an error frame, else that error frame first). */
#define EXPECT_NONE 1

struct conn {
    int fd;    /* the client's end; -1 once the harness closed it */
    int state; /* enum conn_state */
    uint8_t family, ip[16];
    uint64_t deadline_ns;
    uint32_t written;  /* bytes sent to the lobby */
    uint32_t consumed; /* bytes of complete frames the lobby answered (HELLO) */
    int clean;         /* only whole harness frames so far, in order */
    int expect;        /* EXPECT_NONE or the predicted closing status */
    uint8_t expect_cmd;
    uint32_t expect_seq;
    /* the handshake the harness builds */
    uint8_t role; /* of the harness's HELLO */
    int hello_ok; /* its HELLO is one the server accepts */
    uint8_t hello_frame[HELLO_FRAME];
    int hello_reply; /* an OK HELLO reply arrived */
    uint8_t hello_reply_frame[HELLO_FRAME];
    int auth_pending; /* a harness AUTH with the right proof went out */
    int auth_class;   /* its class when it succeeds */
    struct baton_hs hs;
    int hs_live;
    int ready_class; /* READY: SERVER_CLASS_OTHER or alice's 0 */
    uint8_t pending[HELLO_FRAME]; /* the rest of a split frame */
    uint32_t pending_len;
    /* a harness frame under way (cmd HELLO or AUTH; 0: none), whose outcome
     * is predicted when its last byte goes out: the status its content
     * decides, the class it would be READY in, its seq */
    uint8_t pend_cmd;
    int pend_rc, pend_cls;
    uint32_t pend_seq;
    /* what the client read */
    uint8_t rx[256];
    size_t rx_len;
    int error_seen, eof;
    uint32_t n_frames;
};

struct harness {
    struct baton_server *s;
    struct server_lobby *L;
    struct baton_server_config cfg;
    int keyed;
    uint32_t cap, per_ip;
    uint64_t now_ns;
    struct conn c[MAX_CONNS];
    uint32_t n;
    uint32_t seq; /* the next request seq the harness uses */
    uint32_t n_ready[2]; /* READY connections: [0] unnamed class, [1] alice */
};

static struct baton_key *client_key, *peer_key, *alice_key, *stranger_key;
static int trace; /* FUZZ_TRACE set: print what each client reads (debugging seeds) */

#define TRACE(...)                                                                                 \
    do {                                                                                           \
        if (trace)                                                                                 \
            fprintf(stderr, __VA_ARGS__);                                                          \
    } while (0)

/* ---- keys and randomness (once per process) ---- */

static void harness_init(void)
{
    static int done;
    char dir[256];
    if (done)
        return;
    done = 1;
    trace = getenv("FUZZ_TRACE") != NULL;
    fuzz_keys_begin("fuzz_lobby", dir, sizeof dir);
    client_key = fuzz_new_key("fuzz_lobby", dir, "client.key");
    peer_key = fuzz_new_key("fuzz_lobby", dir, "peer.key");
    alice_key = fuzz_new_key("fuzz_lobby", dir, "alice.key");
    stranger_key = fuzz_new_key("fuzz_lobby", dir, "stranger.key");
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    harness_init();
    return 0;
}

/* Descriptors the process holds (/proc/self/fd, the directory's own
 * descriptor not counted). */
static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1;
}

/* ---- the model of the lobby's caps ---- */

/* lobby.c's address identity: the family, then 16 bytes (IPv4, none) or the
 * first 8 (an IPv6 /64). */
static int same_address(const struct conn *a, uint8_t family, const uint8_t *ip)
{
    return a->family == family && memcmp(a->ip, ip, family == 6 ? 8 : 16) == 0;
}

/* Entries of the address (family, ip) in the lobby. */
static uint32_t count_address(const struct harness *h, uint8_t family, const uint8_t *ip)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < h->n; i++)
        if (h->c[i].state == C_LOBBY && same_address(&h->c[i], family, ip))
            k++;
    return k;
}

static uint32_t lobby_count(const struct harness *h)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < h->n; i++)
        k += h->c[i].state == C_LOBBY;
    return k;
}

/* The connection a newcomer from (family, ip) evicts, or -1: the rules of
 * lobby.c's header comment, by brute force. Connections are in accept
 * order, as the lobby's list. */
static int predict_victim(const struct harness *h, uint8_t family, const uint8_t *ip)
{
    if (family != 0 && h->per_ip < h->cap && count_address(h, family, ip) >= h->per_ip) {
        for (uint32_t i = 0; i < h->n; i++)
            if (h->c[i].state == C_LOBBY && same_address(&h->c[i], family, ip))
                return (int)i;
    }
    if (lobby_count(h) < h->cap)
        return -1;
    uint32_t best = 0;
    for (uint32_t i = 0; i < h->n; i++) {
        if (h->c[i].state != C_LOBBY)
            continue;
        const struct conn *x = &h->c[i];
        uint32_t k = count_address(h, x->family, x->ip) + same_address(x, family, ip);
        if (k > best)
            best = k;
    }
    for (uint32_t i = 0; i < h->n; i++) {
        const struct conn *x = &h->c[i];
        if (x->state == C_LOBBY &&
            count_address(h, x->family, x->ip) + same_address(x, family, ip) == best)
            return (int)i;
    }
    FUZZ_CHECK(0, "a full lobby without entries");
    return -1;
}

/* ---- the client's side ---- */

static void expect_close(struct conn *c, int status, uint8_t cmd, uint32_t seq)
{
    if (c->expect == EXPECT_NONE) {
        c->expect = status;
        c->expect_cmd = cmd;
        c->expect_seq = seq;
    }
}

/* Whether class cls (SERVER_CLASS_OTHER or alice's 0) has room for one
 * more READY connection. */
static int class_has_room(const struct harness *h, int cls)
{
    return cls == 0 ? h->n_ready[1] < 1 : h->n_ready[0] < h->cfg.max_connections;
}

static void become_ready(struct harness *h, struct conn *c, int cls)
{
    TRACE("  conn %u: READY (class %d)\n", (unsigned)(c - h->c), cls);
    c->state = C_READY;
    c->ready_class = cls;
    h->n_ready[cls == 0 ? 1 : 0]++;
}

/* One complete frame the client read (header hd, payload p of len). */
static void on_frame(struct harness *h, struct conn *c, const uint8_t *hd, const uint8_t *p,
                     uint64_t len)
{
    const uint8_t cmd = hd[4];
    const uint16_t status = (uint16_t)fuzz_le(hd + 6, 2);
    const uint32_t seq = (uint32_t)fuzz_le(hd + 8, 4);
    FUZZ_CHECK(!c->error_seen, "a frame after an error frame (cmd %u status %u)", cmd, status);
    FUZZ_CHECK(c->state == C_LOBBY, "a READY connection read a frame from the lobby");
    TRACE("  conn %u: cmd %u status %u (%s) seq %u len %llu\n", (unsigned)(c - h->c), cmd,
          status, status ? baton_status_name(-(int)status) : "ok", seq, (unsigned long long)len);
    c->n_frames++;
    if (status != 0) {
        FUZZ_CHECK(len == 0, "error frame with a payload of %llu bytes", (unsigned long long)len);
        c->error_seen = (int)status;
        if (c->expect != EXPECT_NONE) {
            FUZZ_CHECK(status == (uint16_t)-c->expect, "closing status %u, expected %d (%s)",
                       status, c->expect, baton_status_name(c->expect));
            FUZZ_CHECK(cmd == c->expect_cmd && seq == c->expect_seq,
                       "error frame echoes cmd %u seq %u, expected %u %u", cmd, seq,
                       c->expect_cmd, c->expect_seq);
        } else {
            FUZZ_CHECK(!c->clean, "error %u for a clean handshake nothing predicted", status);
        }
        return;
    }
    if (cmd == BATON_CMD_HELLO) {
        FUZZ_CHECK(len == BATON_HELLO_BYTES && !c->hello_reply && c->written >= HELLO_FRAME,
                   "HELLO reply of %llu bytes (replied before: %d, sent %u bytes)",
                   (unsigned long long)len, c->hello_reply, c->written);
        uint64_t features = fuzz_le(p + 8, 8);
        uint64_t want = BATON_FEATURE_PIPELINE | BATON_FEATURE_OWNER_FENCE;
        if (h->keyed)
            want |= BATON_FEATURE_AUTH | BATON_FEATURE_PEER_COPY |
                    (h->cfg.encrypt ? BATON_FEATURE_ENCRYPT : 0);
        FUZZ_CHECK(features == want, "HELLO reply features 0x%llx, expected 0x%llx",
                   (unsigned long long)features, (unsigned long long)want);
        FUZZ_CHECK(p[4] == BATON_ROLE_SERVER, "HELLO reply role %u", p[4]);
        if (c->clean)
            FUZZ_CHECK(c->hello_ok && c->expect == EXPECT_NONE,
                       "HELLO succeeded that should not (role %u)", c->role);
        c->hello_reply = 1;
        c->consumed = HELLO_FRAME;
        memcpy(c->hello_reply_frame, hd, BATON_FRAME_HEADER_BYTES);
        memcpy(c->hello_reply_frame + BATON_FRAME_HEADER_BYTES, p, BATON_HELLO_BYTES);
        if (!h->keyed)
            become_ready(h, c, SERVER_CLASS_OTHER);
        return;
    }
    FUZZ_CHECK(cmd == BATON_CMD_AUTH && h->keyed && c->hello_reply && len == BATON_PROOF_BYTES,
               "an OK reply cmd %u len %llu (keyed %d, HELLO replied %d)", cmd,
               (unsigned long long)len, h->keyed, c->hello_reply);
    FUZZ_CHECK(c->auth_pending && c->expect == EXPECT_NONE,
               "AUTH succeeded without the harness's proof");
    FUZZ_CHECK(c->hs_live && baton_hs_verify_responder(&c->hs, p) == 0,
               "the server's AUTH proof does not verify");
    baton_hs_destroy(&c->hs);
    c->hs_live = 0;
    become_ready(h, c, c->auth_class);
}

/* Parses the frames complete in c->rx. */
static void parse_rx(struct harness *h, struct conn *c)
{
    for (;;) {
        if (c->rx_len < BATON_FRAME_HEADER_BYTES)
            return;
        const uint8_t *hd = c->rx;
        FUZZ_CHECK(memcmp(hd, "BATN", 4) == 0 && hd[5] == 0 && fuzz_le(hd + 12, 4) == 0,
                   "a reply header without the magic or with flags/reserved bits");
        uint64_t len = fuzz_le(hd + 16, 8);
        FUZZ_CHECK(len <= BATON_HELLO_BYTES, "a reply of %llu bytes", (unsigned long long)len);
        if (c->rx_len < BATON_FRAME_HEADER_BYTES + len)
            return;
        on_frame(h, c, hd, hd + BATON_FRAME_HEADER_BYTES, len);
        size_t used = BATON_FRAME_HEADER_BYTES + (size_t)len;
        memmove(c->rx, c->rx + used, c->rx_len - used);
        c->rx_len -= used;
    }
}

/* Reads what connection c's client end has, without blocking. */
static void drain(struct harness *h, struct conn *c)
{
    while (c->fd >= 0 && !c->eof) {
        ssize_t r = recv(c->fd, c->rx + c->rx_len, sizeof c->rx - c->rx_len, MSG_DONTWAIT);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (r <= 0) {
            /* ECONNRESET counts as the end too (the lobby drains what it
             * can before closing; a reset would mean it did not) */
            FUZZ_CHECK(r == 0, "recv: %s", strerror(errno));
            c->eof = 1;
            break;
        }
        c->rx_len += (size_t)r;
        parse_rx(h, c);
    }
    if (c->eof && c->fd >= 0) {
        FUZZ_CHECK(c->rx_len == 0, "%zu bytes of a cut frame before end of file", c->rx_len);
        FUZZ_CHECK(c->state == C_LOBBY, "a READY connection was closed (state %d)", c->state);
        if (c->expect != EXPECT_NONE)
            FUZZ_CHECK(c->expect == 0 ? c->error_seen == 0 : c->error_seen != 0,
                       "closed with error %d, expected %d", c->error_seen, c->expect);
        else
            FUZZ_CHECK(c->error_seen != 0, "closed without an error frame, nothing predicted");
        TRACE("  conn %u: closed by the lobby\n", (unsigned)(c - h->c));
        c->state = C_GONE;
        close(c->fd);
        c->fd = -1;
        if (c->hs_live)
            baton_hs_destroy(&c->hs);
        c->hs_live = 0;
    }
}

/* Waits (a few seconds at most) until the server runs `want` connection
 * threads: a READY connection's thread ends once its client closed. */
static void wait_active(struct harness *h, uint32_t want)
{
    for (int k = 0; k < 50000 && baton_server_active_connections(h->s) != want; k++) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    FUZZ_CHECK(baton_server_active_connections(h->s) == want,
               "%u connection threads, expected %u", baton_server_active_connections(h->s), want);
}

/* Steps the lobby until epoll reports nothing, reads every client, and
 * checks the invariants. */
static void settle(struct harness *h)
{
    int steps = 0, n;
    /* deadlines first: what expires at this step, the model closes too */
    for (uint32_t i = 0; i < h->n; i++) {
        struct conn *c = &h->c[i];
        if (c->state == C_LOBBY && c->deadline_ns <= h->now_ns)
            expect_close(c, c->written > c->consumed ? BATON_E_TIMEOUT : 0, 0, 0);
    }
    while ((n = server_lobby_step(h->L, h->now_ns)) > 0)
        FUZZ_CHECK(++steps < MAX_STEPS, "the lobby keeps reporting events");
    FUZZ_CHECK(n == 0, "server_lobby_step: %d", n);
    for (uint32_t i = 0; i < h->n; i++)
        drain(h, &h->c[i]);
    uint32_t in_lobby = lobby_count(h);
    FUZZ_CHECK(server_lobby_entries(h->L) == in_lobby, "the lobby holds %u entries, expected %u",
               server_lobby_entries(h->L), in_lobby);
    FUZZ_CHECK(in_lobby <= h->cap, "%u entries over the cap %u", in_lobby, h->cap);
    for (uint32_t i = 0; i < h->n; i++) {
        struct conn *c = &h->c[i];
        if (c->state != C_LOBBY)
            continue;
        FUZZ_CHECK(c->expect == EXPECT_NONE, "connection %u still open, expected closed (%d)", i,
                   c->expect);
        FUZZ_CHECK(c->family == 0 || count_address(h, c->family, c->ip) <= h->per_ip,
                   "%u entries of one address over the cap %u",
                   count_address(h, c->family, c->ip), h->per_ip);
    }
    wait_active(h, h->n_ready[0] + h->n_ready[1]);
}

/* Sends n bytes to c, cut to what is left of its handshake's bytes.
 * Returns the count sent. */
static uint32_t send_bytes(struct harness *h, struct conn *c, const uint8_t *p, uint32_t n)
{
    const uint32_t budget = h->keyed ? HELLO_FRAME + AUTH_FRAME : HELLO_FRAME;
    if (c->state != C_LOBBY || c->fd < 0)
        return 0;
    if (n > budget - c->written)
        n = budget - c->written;
    if (n == 0)
        return 0;
    ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
    FUZZ_CHECK(w == (ssize_t)n, "send to the lobby: %zd of %u", w, n);
    c->written += n;
    return n;
}

/* A harness frame: the first `now` bytes go out, the rest waits for REST. */
static void send_frame(struct harness *h, struct conn *c, const uint8_t *f, uint32_t len,
                       uint32_t now)
{
    c->pending_len = 0;
    if (now >= len)
        now = len;
    if (send_bytes(h, c, f, now) != now)
        c->clean = 0;
    if (now < len) {
        memcpy(c->pending, f + now, len - now);
        c->pending_len = len - now;
    }
}

/* The last byte of the harness frame under way went out: its outcome is
 * due (the class's room decided now, as the lobby decides it). */
static void frame_complete(struct harness *h, struct conn *c)
{
    int rc = c->pend_rc;
    const int hand_off = c->pend_cmd == BATON_CMD_AUTH || !h->keyed;
    if (rc == 0 && hand_off && !class_has_room(h, c->pend_cls))
        rc = BATON_E_LIMIT;
    if (c->pend_cmd == BATON_CMD_HELLO)
        c->hello_ok = rc == 0;
    else
        c->auth_pending = rc == 0;
    c->auth_class = c->pend_cls;
    if (rc != 0)
        expect_close(c, rc, c->pend_cmd, c->pend_seq);
    c->pend_cmd = 0;
}

/* ---- records ---- */

static void address(uint8_t a, uint8_t *family, uint8_t ip[16])
{
    memset(ip, 0, 16);
    switch (a & 3) {
    case 0:
        *family = 0;
        return;
    case 2:
        *family = 6;
        ip[0] = 0x20;
        ip[1] = 0x01;
        ip[7] = (uint8_t)((a >> 2) & 3);
        ip[15] = (a & 16) ? 2 : 1; /* the same /64: the same address for the caps */
        return;
    default:
        *family = 4;
        ip[0] = 192;
        ip[1] = 0;
        ip[2] = 2;
        ip[3] = (uint8_t)(1 + ((a >> 2) & 3));
        return;
    }
}

static void open_conn(struct harness *h, uint8_t family, const uint8_t ip[16])
{
    int sv[2];
    if (h->n >= MAX_CONNS)
        return;
    FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "socketpair: %s",
               strerror(errno));
    int victim = predict_victim(h, family, ip);
    if (victim >= 0)
        expect_close(&h->c[victim], BATON_E_LIMIT, 0, 0);
    struct conn *c = &h->c[h->n++];
    memset(c, 0, sizeof *c);
    c->fd = sv[0];
    c->state = C_LOBBY;
    c->family = family;
    memcpy(c->ip, ip, 16);
    c->deadline_ns = h->now_ns + (uint64_t)TIMEOUT_MS * 1000000u;
    c->clean = 1;
    c->expect = EXPECT_NONE;
    server_lobby_adopt(h->L, sv[1], family, ip, h->now_ns);
    /* the eviction happened inside adopt: the victim's client reads it now */
    if (victim >= 0) {
        drain(h, &h->c[victim]);
        FUZZ_CHECK(h->c[victim].state == C_GONE, "connection %d was not evicted", victim);
    }
}

static struct conn *pick(struct harness *h, uint8_t a)
{
    return h->n ? &h->c[a % h->n] : NULL;
}

static void do_hello(struct harness *h, struct conn *c, uint8_t v, uint8_t cut)
{
    static const uint16_t vmin[4] = {1, 1, 2, 3}, vmax[4] = {1, 9, 3, 1};
    static const uint8_t roles[4] = {BATON_ROLE_CLIENT, BATON_ROLE_PEER, 0, 3};
    struct baton_hello hello;
    uint8_t f[HELLO_FRAME];
    memset(&hello, 0, sizeof hello);
    hello.version_min = vmin[(v >> 2) & 3];
    hello.version_max = vmax[(v >> 2) & 3];
    hello.role = roles[v & 3];
    hello.features = h->keyed ? BATON_FEATURE_AUTH : 0;
    baton_hs_nonce(hello.nonce);
    struct baton_frame_header fh = {.cmd = BATON_CMD_HELLO, .seq = h->seq++,
                                    .len = BATON_HELLO_BYTES};
    baton_wire_encode_header(f, &fh);
    baton_wire_encode_hello(f + BATON_FRAME_HEADER_BYTES, &hello);
    c->pend_cmd = 0;
    if (c->written != 0)
        c->clean = 0;
    memcpy(c->hello_frame, f, sizeof f);
    c->role = hello.role;
    /* respond.c's order: the decoder (role above 2, min > max), the role,
     * the key for it, the version */
    int rc = 0;
    if (hello.role > 2 || hello.version_min > hello.version_max)
        rc = BATON_E_INVAL;
    else if (hello.role == 0)
        rc = BATON_E_PROTO;
    else if (hello.role == BATON_ROLE_PEER && !h->keyed)
        rc = BATON_E_UNSUPPORTED;
    else if (hello.version_min > BATON_PROTOCOL_VERSION)
        rc = BATON_E_VERSION;
    c->pend_cmd = BATON_CMD_HELLO;
    c->pend_rc = rc;
    c->pend_cls = SERVER_CLASS_OTHER;
    c->pend_seq = fh.seq;
    send_frame(h, c, f, sizeof f, (v & 16) ? cut % HELLO_FRAME : HELLO_FRAME);
    if (!c->clean)
        c->pend_cmd = 0;
    else if (c->pending_len == 0)
        frame_complete(h, c);
}

static void do_auth(struct harness *h, struct conn *c, uint8_t v, uint8_t cut)
{
    const struct baton_key *keys[4] = {client_key, peer_key, alice_key, stranger_key};
    const struct baton_key *key = keys[v & 3];
    uint8_t f[AUTH_FRAME];
    struct baton_frame_header fh = {.cmd = BATON_CMD_AUTH, .seq = h->seq++,
                                    .len = BATON_PROOF_BYTES};
    baton_wire_encode_header(f, &fh);
    memset(f + BATON_FRAME_HEADER_BYTES, 0, BATON_PROOF_BYTES);
    c->pend_cmd = 0;
    if (c->hs_live)
        baton_hs_destroy(&c->hs);
    c->hs_live = 0;
    /* a proof only over a whole clean HELLO and its reply */
    if (!(c->clean && h->keyed && c->hello_reply && c->written == HELLO_FRAME))
        c->clean = 0;
    if (c->clean) {
        FUZZ_CHECK(baton_hs_init(&c->hs, c->role, baton_key_bytes(key)) == 0 &&
                       baton_hs_transcript_add(&c->hs, c->hello_frame, HELLO_FRAME) == 0 &&
                       baton_hs_transcript_add(&c->hs, c->hello_reply_frame, HELLO_FRAME) == 0 &&
                       baton_hs_initiator_proof(&c->hs, f + BATON_FRAME_HEADER_BYTES) == 0,
                   "the initiator's proof");
        c->hs_live = 1;
    }
    if (v & 4)
        f[BATON_FRAME_HEADER_BYTES + (v >> 4) % BATON_PROOF_BYTES] ^= 0x01;
    /* which key the proof shows (respond.c: client role: the client key
     * or a named client's; peer role: the peer key) */
    const int right =
        !(v & 4) && ((c->role == BATON_ROLE_CLIENT && (key == client_key || key == alice_key)) ||
                     (c->role == BATON_ROLE_PEER && key == peer_key));
    c->pend_cmd = BATON_CMD_AUTH;
    c->pend_rc = right ? 0 : BATON_E_AUTH;
    c->pend_cls = key == alice_key ? 0 : SERVER_CLASS_OTHER;
    c->pend_seq = fh.seq;
    send_frame(h, c, f, sizeof f, (v & 8) ? cut % AUTH_FRAME : AUTH_FRAME);
    if (!c->clean)
        c->pend_cmd = 0;
    else if (c->pending_len == 0)
        frame_complete(h, c);
}

/* REST: the rest of a split harness frame. */
static void do_rest(struct harness *h, struct conn *c)
{
    uint32_t n = c->pending_len;
    if (n == 0)
        return;
    c->pending_len = 0;
    if (send_bytes(h, c, c->pending, n) != n)
        c->clean = 0;
    if (!c->clean)
        c->pend_cmd = 0;
    else if (c->pend_cmd != 0)
        frame_complete(h, c);
}

static void do_close(struct harness *h, struct conn *c)
{
    if (c->fd < 0 || c->state == C_GONE)
        return;
    close(c->fd);
    c->fd = -1;
    if (c->hs_live)
        baton_hs_destroy(&c->hs);
    c->hs_live = 0;
    if (c->state == C_READY) {
        h->n_ready[c->ready_class == 0 ? 1 : 0]--;
        c->state = C_GONE;
        return; /* settle waits for its thread to end */
    }
    c->state = C_GONE; /* the lobby sees end of file at the next step */
    (void)h;
}

static void run(struct harness *h, struct fuzz_reader *r)
{
    while (r->n > 0) {
        uint8_t op = fuzz_u8(r), a = op >> 3;
        struct conn *c = pick(h, a);
        uint8_t family, ip[16];
        switch (op & 7) {
        case 0:
            address(a, &family, ip);
            open_conn(h, family, ip);
            break;
        case 1: {
            uint8_t n = fuzz_u8(r), buf[256];
            uint32_t k = 0;
            while (k < n && r->n > 0)
                buf[k++] = fuzz_u8(r);
            if (c && c->state == C_LOBBY) {
                c->clean = 0;
                c->pend_cmd = 0;
                c->pending_len = 0;
                send_bytes(h, c, buf, k);
            }
            break;
        }
        case 2: {
            uint8_t v = fuzz_u8(r), cut = (v & 16) ? fuzz_u8(r) : 0;
            if (c && c->state == C_LOBBY)
                do_hello(h, c, v, cut);
            break;
        }
        case 3: {
            uint8_t v = fuzz_u8(r), cut = (v & 8) ? fuzz_u8(r) : 0;
            if (c && c->state == C_LOBBY)
                do_auth(h, c, v, cut);
            break;
        }
        case 4:
            if (c && c->state == C_LOBBY)
                do_rest(h, c);
            break;
        case 5:
            if (c)
                do_close(h, c);
            break;
        case 6:
            h->now_ns += (uint64_t)(a + 1) * 50 * 1000000u;
            break;
        default:
            address((uint8_t)(1 | (a & 0x18) >> 1), &family, ip);
            for (uint32_t k = 0; k <= (a & 7u); k++)
                open_conn(h, family, ip);
            break;
        }
        settle(h);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint32_t caps[4] = {1, 2, 3, 5}, per_ip[4] = {1, 2, 3, 8};
    static struct harness h;
    harness_init();
    if (size < 1)
        return 0;
    uint8_t *in = fuzz_dup(data, size);
    struct fuzz_reader r = {in + 1, size - 1};
    atomic_store(&fuzz_random_counter, 0);
    const int fds_before = count_fds();

    memset(&h, 0, sizeof h);
    h.keyed = in[0] & 1;
    h.cap = caps[(in[0] >> 2) & 3];
    h.per_ip = per_ip[(in[0] >> 4) & 3];
    h.now_ns = 1000000000ull;
    h.seq = 1;
    baton_server_config_default(&h.cfg);
    h.cfg.quiet = 1;
    h.cfg.total_memory_bytes = 1u << 20;
    h.cfg.max_unauthenticated = h.cap;
    h.cfg.max_unauthenticated_per_ip = h.per_ip;
    h.cfg.max_connections = 1 + ((in[0] >> 6) & 3);
    h.cfg.handshake_timeout_ms = TIMEOUT_MS;
    if (h.keyed) {
        h.cfg.client_key = client_key;
        h.cfg.peer_key = peer_key;
        h.cfg.n_clients = 1;
        snprintf(h.cfg.clients[0].name, sizeof h.cfg.clients[0].name, "alice");
        h.cfg.clients[0].key = alice_key;
        h.cfg.clients[0].max_connections = 1;
        h.cfg.encrypt = (in[0] >> 1) & 1;
    }
    FUZZ_CHECK(baton_server_create(&h.cfg, &h.s) == 0, "baton_server_create");
    FUZZ_CHECK(server_lobby_create(h.s, &h.L) == 0, "server_lobby_create");

    run(&h, &r);

    /* every client goes away: the lobby sees end of file on each entry */
    for (uint32_t i = 0; i < h.n; i++) {
        struct conn *c = &h.c[i];
        if (c->state == C_READY) {
            drain(&h, c);
            FUZZ_CHECK(c->rx_len == 0 && !c->eof, "a READY client read %zu bytes", c->rx_len);
        }
        if (c->state == C_LOBBY)
            c->expect = EXPECT_NONE;
        do_close(&h, c);
    }
    settle(&h);
    FUZZ_CHECK(server_lobby_entries(h.L) == 0, "%u entries left", server_lobby_entries(h.L));
    server_lobby_destroy(h.L);
    baton_server_destroy(h.s);
    const int fds_after = count_fds();
    FUZZ_CHECK(fds_after == fds_before, "%d descriptors before the input, %d after", fds_before,
               fds_after);
    free(in);
    return 0;
}
