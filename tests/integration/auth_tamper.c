/* auth_tamper: attacks on a running keyed batond over loopback TCP (started
 * by tests/integration/test_auth_attacks.sh with --key and --peer-key).
 *
 *   auth_tamper PORT CLIENT_KEY PEER_KEY OTHER_KEY MODE
 *
 * Handshake modes (raw frames, built here from docs/PROTOCOL.md and the
 * auth library): nokey (HELLO without AUTH), wrongkey (OTHER_KEY),
 * peerrole (the client key claiming the peer role), reflect (the server's
 * own proof for this transcript sent back as ours), nonce (the server's
 * HELLO nonce as the proof). After each, DEVICE_INFO and ALLOC_BUFFER are
 * sent and must never be answered: the only frames that may come back are
 * the HELLO reply and one error frame, then the connection closes.
 *
 * Proxy modes: a relay on 127.0.0.1 between a libbaton client (CLIENT_KEY)
 * and batond that, after the handshake, alters one request (flipreq: a bit
 * of SET_TENSOR data), replays one (replay: ALLOC_BUFFER twice), swaps two
 * pipelined requests (swap), drops one (drop), or alters a reply (flipreply:
 * a bit of GET_TENSOR data); `none` relays faithfully. The client script is
 * DEVICE_INFO, ALLOC, SET 1 MiB, GET 1 MiB, DEVICE_INFO (SET and GET
 * pipelined in swap and drop). Checked: which calls fail, how many frames
 * the server sent (none after the tampered request), and that the server
 * closed first (request tampering) or the client refused the reply.
 *
 * Every mode then checks on a fresh, direct connection that the server
 * still serves and that the attacked session's buffers were freed.
 * Prints ok / not ok lines; exit 0 iff all passed. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "keyed_util.h" /* check(), g_failed, TIMEOUT_MS */
#include "sock_io.h"

#include "auth/auth.h"
#include "baton/client.h"
#include "baton/status.h"
#include "net/net.h"
#include "wire/wire.h"

#define HDR BATON_FRAME_HEADER_BYTES
#define HELLO_FRAME (HDR + BATON_HELLO_BYTES)
#define DATA_BYTES (1u << 20)

static uint16_t g_port;
static struct baton_key *g_client, *g_peer, *g_other;

/* ---- raw socket I/O ---- */


/* Reads n bytes within TIMEOUT_MS per wait; returns bytes read (< n: EOF,
 * reset or timeout). */
static size_t read_full(int fd, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, TIMEOUT_MS) != 1)
            break;
        ssize_t r = recv(fd, (uint8_t *)buf + got, n - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    return got;
}

static int connect_server(void)
{
    int fd;
    if (baton_net_connect("127.0.0.1", g_port, TIMEOUT_MS, &fd) != 0) {
        printf("not ok - connect to 127.0.0.1:%u\n", g_port);
        exit(1);
    }
    return fd;
}

static uint64_t le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* ---- handshake modes ---- */

/* Reads what the server sends until it closes; returns the number of
 * frames (headers) seen, counting a reply's payload as part of it. */
static int frames_until_close(int fd, uint16_t *last_status)
{
    uint8_t hb[HDR], sink[256];
    int n = 0;
    for (;;) {
        if (read_full(fd, hb, HDR) != HDR)
            return n;
        n++;
        *last_status = (uint16_t)le(hb + 6, 2);
        uint64_t len = le(hb + 16, 8);
        if (len > sizeof sink || read_full(fd, sink, (size_t)len) != len)
            return n;
    }
}

/* Sends HELLO with role; reads the reply HELLO into rep. Returns the
 * reply's status, or -1 when the server closed. */
static int hello(int fd, uint8_t role, uint64_t features, uint8_t req[HELLO_FRAME],
                 uint8_t rep[HELLO_FRAME])
{
    struct baton_frame_header h = {.cmd = BATON_CMD_HELLO, .seq = 1, .len = BATON_HELLO_BYTES};
    struct baton_hello hl = {.version_min = 1, .version_max = 1, .role = role,
                             .features = features};
    baton_hs_nonce(hl.nonce);
    baton_wire_encode_header(req, &h);
    baton_wire_encode_hello(req + HDR, &hl);
    if (write_all(fd, req, HELLO_FRAME) != 0 || read_full(fd, rep, HDR) != HDR)
        return -1;
    uint16_t st = (uint16_t)le(rep + 6, 2);
    if (st != 0)
        return st;
    if (le(rep + 16, 8) != BATON_HELLO_BYTES ||
        read_full(fd, rep + HDR, BATON_HELLO_BYTES) != BATON_HELLO_BYTES)
        return -1;
    return 0;
}

/* After a refused or skipped handshake: DEVICE_INFO and ALLOC_BUFFER (as
 * plain frames, and once more with a zero tag appended) get nothing but at
 * most one error frame before the close. */
static void nothing_served(int fd, const char *mode, int may_have_error_frame)
{
    uint8_t f[2 * HDR + 8 + 2 * BATON_TAG_BYTES];
    struct baton_frame_header di = {.cmd = BATON_CMD_DEVICE_INFO, .seq = 7, .len = 0};
    struct baton_frame_header al = {.cmd = BATON_CMD_ALLOC_BUFFER, .seq = 8, .len = 8};
    memset(f, 0, sizeof f);
    baton_wire_encode_header(f, &di);
    baton_wire_encode_header(f + HDR + BATON_TAG_BYTES, &al);
    baton_wire_put_u64(f + 2 * HDR + BATON_TAG_BYTES, 4096);
    (void)write_all(fd, f, sizeof f); /* may fail: the server may have closed */
    uint16_t st = 0;
    int n = frames_until_close(fd, &st);
    check(n <= (may_have_error_frame ? 1 : 0) && (n == 0 || st != 0),
          "%s: DEVICE_INFO/ALLOC not served (%d frame(s), last status %u), closed", mode, n,
          (unsigned)st);
}

static void mode_handshake(const char *mode)
{
    int fd = connect_server();
    uint8_t req[HELLO_FRAME], rep[HELLO_FRAME], proof[BATON_PROOF_BYTES];
    struct baton_hs hs;
    const struct baton_key *key = g_client;
    uint8_t role = BATON_ROLE_CLIENT;
    if (!strcmp(mode, "nokey")) {
        int st = hello(fd, BATON_ROLE_CLIENT, 0, req, rep);
        check(st == 0 && (le(rep + HDR + 8, 8) & BATON_FEATURE_AUTH),
              "nokey: HELLO answered with the AUTH bit");
        nothing_served(fd, mode, 1); /* E_PROTO for DEVICE_INFO before AUTH */
        close(fd);
        return;
    }
    if (!strcmp(mode, "wrongkey"))
        key = g_other;
    if (!strcmp(mode, "peerrole"))
        role = BATON_ROLE_PEER;
    int st = hello(fd, role, BATON_FEATURE_AUTH, req, rep);
    check(st == 0, "%s: HELLO answered (%d)", mode, st);
    if (st != 0) {
        close(fd);
        return;
    }
    baton_hs_init(&hs, role, baton_key_bytes(key));
    baton_hs_transcript_add(&hs, req, sizeof req);
    baton_hs_transcript_add(&hs, rep, sizeof rep);
    baton_hs_initiator_proof(&hs, proof);
    if (!strcmp(mode, "reflect")) {
        /* what the server would answer to our proof: its own MAC_r */
        struct baton_hs resp;
        uint8_t mac_i[BATON_PROOF_BYTES];
        memcpy(mac_i, proof, sizeof mac_i);
        baton_hs_init(&resp, role, baton_key_bytes(key));
        baton_hs_transcript_add(&resp, req, sizeof req);
        baton_hs_transcript_add(&resp, rep, sizeof rep);
        int ok = baton_hs_verify_initiator(&resp, mac_i) == 0 &&
                 baton_hs_responder_proof(&resp, proof) == 0;
        baton_hs_destroy(&resp);
        check(ok, "reflect: made the responder's proof");
    } else if (!strcmp(mode, "nonce")) {
        memcpy(proof, rep + HDR + 16, sizeof proof);
    }
    baton_hs_destroy(&hs);
    uint8_t auth[HDR + BATON_PROOF_BYTES];
    struct baton_frame_header ah = {.cmd = BATON_CMD_AUTH, .seq = 2, .len = BATON_PROOF_BYTES};
    baton_wire_encode_header(auth, &ah);
    memcpy(auth + HDR, proof, sizeof proof);
    check(write_all(fd, auth, sizeof auth) == 0, "%s: AUTH sent", mode);
    /* the answer: one E_AUTH error frame without a proof, then nothing */
    uint8_t hb[HDR];
    int got = read_full(fd, hb, HDR) == HDR;
    check(got && le(hb + 6, 2) == (uint16_t)-BATON_E_AUTH && le(hb + 16, 8) == 0,
          "%s: AUTH refused with E_AUTH and no proof", mode);
    nothing_served(fd, mode, 0);
    close(fd);
}

/* ---- proxy modes ---- */

struct proxy {
    const char *mode;
    int listen_fd;
    int cfd, sfd; /* client side (accepted), server side */
    pthread_mutex_t lock;
    int s2c_frames;    /* frames the server sent (handshake included) */
    int c2s_frames;    /* frames forwarded to the server */
    int first_close;   /* 0 none yet, 1 server, 2 client */
    int tampered;
};

struct dir {
    struct proxy *p;
    int from, to;
    int is_req;
};

static uint8_t *read_frame(int fd, int tagged, size_t *n)
{
    uint8_t hb[HDR];
    if (read_full(fd, hb, HDR) != HDR)
        return NULL;
    uint64_t len = le(hb + 16, 8);
    if (len > 64u << 20)
        return NULL;
    size_t total = HDR + (size_t)len + (tagged ? BATON_TAG_BYTES : 0);
    uint8_t *f = malloc(total);
    if (!f)
        return NULL;
    memcpy(f, hb, HDR);
    if (read_full(fd, f + HDR, total - HDR) != total - HDR) {
        free(f);
        return NULL;
    }
    *n = total;
    return f;
}

static void *relay(void *arg)
{
    struct dir *d = arg;
    struct proxy *p = d->p;
    uint8_t *held = NULL;
    size_t held_n = 0;
    int write_failed = 0;
    for (int index = 0;; index++) {
        size_t n;
        uint8_t *f = read_frame(d->from, index >= 2, &n); /* HELLO, AUTH: no tag */
        if (!f)
            break;
        int k = index - 2; /* index among tagged frames */
        int send_count = 1;
        const char *m = p->mode;
        if (d->is_req && !strcmp(m, "flipreq") && k == 2) {
            f[HDR + 104 + 1000] ^= 0x01; /* a SET_TENSOR data bit */
            p->tampered = 1;
        } else if (d->is_req && !strcmp(m, "replay") && k == 1) {
            send_count = 2; /* ALLOC_BUFFER, byte for byte, twice */
            p->tampered = 1;
        } else if (d->is_req && (!strcmp(m, "swap") || !strcmp(m, "drop")) && k == 2) {
            held = f; /* SET: held back (swap) or dropped */
            held_n = n;
            continue;
        } else if (!d->is_req && !strcmp(m, "flipreply") && k == 3) {
            f[HDR + 77] ^= 0x01; /* a GET_TENSOR data bit */
            p->tampered = 1;
        }
        int bad = 0;
        for (int i = 0; i < send_count && !bad; i++)
            bad = write_all(d->to, f, n) != 0;
        free(f);
        if (held && k == 3) {
            if (!strcmp(m, "swap"))
                bad = bad || write_all(d->to, held, held_n) != 0;
            free(held);
            held = NULL;
            p->tampered = 1;
        }
        pthread_mutex_lock(&p->lock);
        if (d->is_req)
            p->c2s_frames += send_count;
        else
            p->s2c_frames++;
        pthread_mutex_unlock(&p->lock);
        if (bad) {
            write_failed = 1;
            break;
        }
    }
    free(held);
    pthread_mutex_lock(&p->lock);
    /* who ended it: a failed read means `from` closed, a failed write `to` */
    if (p->first_close == 0)
        p->first_close = d->is_req != write_failed ? 2 : 1;
    pthread_mutex_unlock(&p->lock);
    /* wake the other direction: both sockets are done */
    shutdown(d->to, SHUT_RDWR);
    shutdown(d->from, SHUT_RDWR);
    return NULL;
}

static void *proxy_main(void *arg)
{
    struct proxy *p = arg;
    struct pollfd pf = {.fd = p->listen_fd, .events = POLLIN};
    if (poll(&pf, 1, TIMEOUT_MS) != 1 || baton_net_accept(p->listen_fd, &p->cfd) != 0)
        return NULL;
    p->sfd = connect_server();
    struct dir up = {p, p->cfd, p->sfd, 1}, down = {p, p->sfd, p->cfd, 0};
    pthread_t t1, t2;
    pthread_create(&t1, NULL, relay, &up);
    pthread_create(&t2, NULL, relay, &down);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    close(p->cfd);
    close(p->sfd);
    return NULL;
}

static void mode_proxy(const char *mode)
{
    struct proxy p;
    pthread_t th;
    uint16_t lport;
    memset(&p, 0, sizeof p);
    p.mode = mode;
    p.cfd = p.sfd = -1;
    pthread_mutex_init(&p.lock, NULL);
    if (baton_net_listen("127.0.0.1", 0, 1, &p.listen_fd, &lport) != 0) {
        printf("not ok - proxy listen\n");
        exit(1);
    }
    pthread_create(&th, NULL, proxy_main, &p);

    struct baton_conn_options o = {.timeout_ms = TIMEOUT_MS, .key = g_client};
    struct baton_conn *c = NULL;
    struct baton_device_info d;
    struct baton_tensor_desc t;
    uint64_t handle = 0;
    uint8_t *data = malloc(DATA_BYTES), *back = malloc(DATA_BYTES);
    int rc_info1, rc_alloc = BATON_E_IO, rc_set = BATON_E_IO, rc_get = BATON_E_IO,
                  rc_info2 = BATON_E_IO;
    for (size_t i = 0; i < DATA_BYTES; i++)
        data[i] = (uint8_t)(i * 31 + 7);
    int rc = baton_conn_connect_ex("127.0.0.1", lport, &o, &c);
    check(rc == 0 && baton_conn_authenticated(c), "%s: authenticated through the proxy", mode);
    if (rc != 0)
        exit(1);
    rc_info1 = baton_device_info(c, &d);
    rc_alloc = baton_alloc_buffer(c, DATA_BYTES, &handle);
    baton_tensor_init(&t, handle, 0, BATON_TYPE_I32, DATA_BYTES / 4, 1, 1, 1);
    if (!strcmp(mode, "swap") || !strcmp(mode, "drop")) {
        /* pipelined: the proxy reorders or drops the first */
        rc_set = baton_submit_set_tensor(c, &t, 0, data, 4096);
        rc_get = baton_submit_get_tensor(c, &t, 0, back, 4096);
        if (rc_set == 0 && rc_get == 0)
            rc_set = rc_get = baton_conn_wait(c);
    } else {
        rc_set = baton_set_tensor(c, &t, 0, data, DATA_BYTES);
        rc_get = baton_get_tensor(c, &t, 0, back, DATA_BYTES);
        rc_info2 = baton_device_info(c, &d);
    }
    baton_conn_close(c);
    pthread_join(th, NULL);
    close(p.listen_fd);

    check(rc_info1 == 0 && rc_alloc == 0, "%s: DEVICE_INFO and ALLOC before the tampering: %s %s",
          mode, baton_status_name(rc_info1), baton_status_name(rc_alloc));
    if (!strcmp(mode, "none")) {
        check(rc_set == 0 && rc_get == 0 && rc_info2 == 0 && !memcmp(data, back, DATA_BYTES),
              "none: SET/GET round trip and DEVICE_INFO through the relay");
        check(p.s2c_frames == 7, "none: 7 frames from the server (%d)", p.s2c_frames);
    } else if (!strcmp(mode, "flipreply")) {
        check(rc_set == 0, "flipreply: SET answered (%s)", baton_status_name(rc_set));
        check(rc_get == BATON_E_AUTH, "flipreply: the altered GET reply is refused: %s",
              baton_status_name(rc_get));
        check(rc_info2 == BATON_E_IO, "flipreply: the connection is dead afterwards: %s",
              baton_status_name(rc_info2));
        check(p.first_close == 2, "flipreply: the client closed it");
    } else {
        /* request tampering: the tampered request and everything after it
         * got no reply; the server closed the connection */
        check(rc_set == BATON_E_IO && rc_get != 0,
              "%s: the tampered request is not answered: SET %s, GET %s", mode,
              baton_status_name(rc_set), baton_status_name(rc_get));
        check(p.s2c_frames == 4, "%s: the server sent HELLO, AUTH, DEVICE_INFO, ALLOC only (%d)",
              mode, p.s2c_frames);
        check(p.first_close == 1, "%s: the server closed the connection first", mode);
    }
    check(!strcmp(mode, "none") || p.tampered, "%s: the proxy tampered", mode);
    pthread_mutex_destroy(&p.lock);
    free(data);
    free(back);
}

/* A fresh direct connection is served, and every buffer of the closed
 * sessions is released (DEVICE_INFO's free memory is server-wide). */
static void still_serving(const char *mode)
{
    struct baton_conn_options o = {.timeout_ms = TIMEOUT_MS, .key = g_client};
    struct baton_conn *c = NULL;
    struct baton_device_info d;
    int rc = baton_conn_connect_ex("127.0.0.1", g_port, &o, &c);
    int freed = 0;
    for (int i = 0; rc == 0 && i < 2000 && !freed; i++) {
        rc = baton_device_info(c, &d);
        freed = rc == 0 && d.free_memory == d.total_memory;
        if (!freed)
            poll(NULL, 0, 5);
    }
    check(rc == 0 && freed, "%s: the server still serves, nothing left allocated (%s)", mode,
          baton_status_name(rc));
    baton_conn_close(c);
}

static struct baton_key *open_key(const char *path)
{
    struct baton_key *k = NULL;
    char err[256];
    if (baton_key_open(path, &k, err, sizeof err) != 0) {
        printf("not ok - %s\n", err);
        exit(1);
    }
    return k;
}

int main(int argc, char **argv)
{
    if (argc != 6 || baton_net_parse_port(argv[1], &g_port) != 0) {
        fprintf(stderr, "usage: auth_tamper PORT CLIENT_KEY PEER_KEY OTHER_KEY MODE\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    if (baton_auth_init() != 0)
        return 1;
    g_client = open_key(argv[2]);
    g_peer = open_key(argv[3]);
    g_other = open_key(argv[4]);
    const char *mode = argv[5];
    static const char *const handshake_modes[] = {"nokey", "wrongkey", "peerrole", "reflect",
                                                  "nonce"};
    static const char *const proxy_modes[] = {"none", "flipreq", "replay", "swap", "drop",
                                              "flipreply"};
    int known = 0;
    for (size_t i = 0; i < sizeof handshake_modes / sizeof *handshake_modes; i++)
        if (!strcmp(mode, handshake_modes[i])) {
            mode_handshake(mode);
            known = 1;
        }
    for (size_t i = 0; i < sizeof proxy_modes / sizeof *proxy_modes; i++)
        if (!strcmp(mode, proxy_modes[i])) {
            mode_proxy(mode);
            known = 1;
        }
    if (!known) {
        fprintf(stderr, "auth_tamper: unknown mode %s\n", mode);
        return 2;
    }
    still_serving(mode);
    baton_key_free(g_client);
    baton_key_free(g_peer);
    baton_key_free(g_other);
    return g_failed ? 1 : 0;
}
