/* Shared by test_server_auth.c and test_client_auth.c: both ends of the
 * baton handshake and tagged frames over a raw socket, written from
 * docs/PROTOCOL.md and the constructions in src/auth/auth.h. Frame tags are
 * made and checked with libsodium's one-shot
 * crypto_aead_chacha20poly1305_ietf_{encrypt,decrypt}_detached, the
 * reference, not with the library's incremental frame MAC that the client
 * and the server use. The handshake proofs come from the auth library
 * (tested against its own reference in test_auth_handshake.c). */
#ifndef BATON_TEST_AUTH_FRAMES_H
#define BATON_TEST_AUTH_FRAMES_H

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "auth/auth.h"
#include "wire/wire.h"

#define HDR 24u
#define HELLO_FRAME (HDR + BATON_HELLO_BYTES)

/* One end of an authenticated connection: the per-direction frame keys
 * (counters included) and whether payloads are encrypted. */
struct tside {
    int fd;
    struct baton_frame_key send, recv;
    int encrypt;
};

static inline void io_write(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* the other end closed: the test reads EOF next */
        b += w;
        n -= (size_t)w;
    }
}

/* Reads n bytes (20 s bound per wait); returns how many arrived before EOF. */
static inline size_t io_read(int fd, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        assert_int_equal(poll(&p, 1, 20000), 1);
        ssize_t r = read(fd, (uint8_t *)buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    return got;
}

/* The peer closed: the next read gives EOF (nothing more was sent). */
static inline void expect_eof(int fd)
{
    uint8_t b;
    assert_int_equal(io_read(fd, &b, 1), 0);
}

static inline void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t get_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* A frame header as docs/PROTOCOL.md lays it out. */
static inline void frame_header(uint8_t hb[HDR], uint8_t cmd, uint16_t status, uint32_t seq,
                         uint64_t len)
{
    memset(hb, 0, HDR);
    memcpy(hb, "BATN", 4);
    hb[4] = cmd;
    put_le(hb + 6, status, 2);
    put_le(hb + 8, seq, 4);
    put_le(hb + 16, len, 8);
}

/* Parses a header field by field (error frames may carry cmd 0). */
static inline void parse_header(const uint8_t hb[HDR], struct baton_frame_header *h)
{
    assert_memory_equal(hb, "BATN", 4);
    h->cmd = hb[4];
    h->flags = hb[5];
    h->status = (uint16_t)get_le(hb + 6, 2);
    h->seq = (uint32_t)get_le(hb + 8, 4);
    h->len = get_le(hb + 16, 8);
    assert_int_equal(h->flags, 0);
    assert_int_equal(get_le(hb + 12, 4), 0);
}

static inline void ref_nonce(uint8_t n[12], uint64_t counter)
{
    memset(n, 0, 4);
    put_le(n + 4, counter, 8);
}

/* The whole tagged frame for counter ctr under key k: header, payload
 * (encrypted in encrypt mode), 16-byte tag. Returns a malloc'd buffer of
 * *n bytes. */
static inline uint8_t *tagged_frame(const struct baton_frame_key *k, uint64_t ctr, int encrypt,
                             uint8_t cmd, uint16_t status, uint32_t seq, const void *payload,
                             uint64_t len, size_t *n)
{
    uint8_t nonce[12];
    unsigned long long maclen = 0;
    uint8_t *f = malloc(HDR + len + BATON_TAG_BYTES);
    assert_non_null(f);
    frame_header(f, cmd, status, seq, len);
    ref_nonce(nonce, ctr);
    if (encrypt) {
        crypto_aead_chacha20poly1305_ietf_encrypt_detached(
            f + HDR, f + HDR + len, &maclen, payload, len, f, HDR, NULL, nonce, k->key);
    } else {
        if (len)
            memcpy(f + HDR, payload, len);
        uint8_t none[1]; /* empty plaintext, empty ciphertext */
        crypto_aead_chacha20poly1305_ietf_encrypt_detached(none, f + HDR + len, &maclen, none, 0,
                                                           f, HDR + len, NULL, nonce, k->key);
    }
    assert_int_equal(maclen, BATON_TAG_BYTES);
    *n = HDR + len + BATON_TAG_BYTES;
    return f;
}

/* Sends one frame with the next counter of t's send direction. */
static inline void send_tagged(struct tside *t, uint8_t cmd, uint16_t status, uint32_t seq,
                        const void *payload, uint64_t len)
{
    size_t n;
    uint8_t *f = tagged_frame(&t->send, t->send.next_counter++, t->encrypt, cmd, status, seq,
                              payload, len, &n);
    io_write(t->fd, f, n);
    free(f);
}

/* Receives one frame with the next counter of t's receive direction and
 * checks its tag with the reference. Returns 0 (verified; payload, at most
 * cap bytes, decrypted), 1 (the tag does not verify) or -1 (EOF before the
 * first byte). */
static inline int recv_tagged(struct tside *t, struct baton_frame_header *h, void *payload, size_t cap)
{
    uint8_t hb[HDR], tag[BATON_TAG_BYTES], nonce[12];
    size_t got = io_read(t->fd, hb, HDR);
    if (got == 0)
        return -1;
    assert_int_equal(got, HDR);
    parse_header(hb, h);
    assert_true(h->len <= cap);
    uint8_t *buf = malloc(HDR + h->len + 1);
    assert_non_null(buf);
    memcpy(buf, hb, HDR);
    assert_int_equal(io_read(t->fd, buf + HDR, (size_t)h->len), h->len);
    assert_int_equal(io_read(t->fd, tag, sizeof tag), sizeof tag);
    ref_nonce(nonce, t->recv.next_counter++);
    int bad;
    if (t->encrypt)
        bad = crypto_aead_chacha20poly1305_ietf_decrypt_detached(
            payload, NULL, buf + HDR, h->len, tag, buf, HDR, nonce, t->recv.key);
    else
        bad = crypto_aead_chacha20poly1305_ietf_decrypt_detached(
            tag, NULL, tag, 0, tag, buf, HDR + h->len, nonce, t->recv.key);
    if (!bad && !t->encrypt && h->len)
        memcpy(payload, buf + HDR, (size_t)h->len);
    free(buf);
    return bad ? 1 : 0;
}

/* ---- the handshake, initiator side (a raw client) ---- */

/* Sends HELLO (seq 1) with role and features and reads the reply. Fills
 * req and rep with both frames' bytes and *sh with the reply's HELLO.
 * Returns the reply's status (0: a HELLO came back), -1 on EOF. */
static inline int raw_hello(int fd, uint8_t role, uint64_t features, uint8_t req[HELLO_FRAME],
                     uint8_t rep[HELLO_FRAME], struct baton_hello *sh)
{
    struct baton_frame_header h;
    uint8_t *p = req + HDR;
    frame_header(req, BATON_CMD_HELLO, 0, 1, BATON_HELLO_BYTES);
    memset(p, 0, BATON_HELLO_BYTES);
    p[0] = 1; /* version 1..1 */
    p[2] = 1;
    p[4] = role;
    put_le(p + 8, features, 8);
    randombytes_buf(p + 16, 32);
    io_write(fd, req, HELLO_FRAME);
    if (io_read(fd, rep, HDR) != HDR)
        return -1;
    parse_header(rep, &h);
    if (h.status != 0)
        return h.status;
    assert_int_equal(h.cmd, BATON_CMD_HELLO);
    assert_int_equal(h.seq, 1);
    assert_int_equal(h.len, BATON_HELLO_BYTES);
    assert_int_equal(io_read(fd, rep + HDR, BATON_HELLO_BYTES), BATON_HELLO_BYTES);
    size_t pos = 0;
    assert_int_equal(baton_wire_decode_hello(rep + HDR, BATON_HELLO_BYTES, &pos, sh), 0);
    return 0;
}

/* Sends AUTH (seq 2) with a 32-byte proof and reads the reply: returns its
 * status (0: resp holds the server's 32-byte proof), -1 on EOF. */
static inline int raw_auth(int fd, const uint8_t *proof, size_t proof_len, uint8_t resp[32])
{
    struct baton_frame_header h;
    uint8_t f[HDR + 64], hb[HDR];
    assert_true(proof_len <= 64);
    frame_header(f, BATON_CMD_AUTH, 0, 2, proof_len);
    memcpy(f + HDR, proof, proof_len);
    io_write(fd, f, HDR + proof_len);
    if (io_read(fd, hb, HDR) != HDR)
        return -1;
    parse_header(hb, &h);
    assert_int_equal(h.cmd, BATON_CMD_AUTH);
    assert_int_equal(h.seq, 2);
    if (h.status != 0) {
        assert_int_equal(h.len, 0); /* an error frame carries no proof */
        return h.status;
    }
    assert_int_equal(h.len, 32);
    assert_int_equal(io_read(fd, resp, 32), 32);
    return 0;
}

/* The whole initiator handshake with key (must succeed); fills t. */
static inline void raw_login(int fd, const uint8_t *key, uint8_t role, struct tside *t)
{
    struct baton_hs hs;
    struct baton_hello sh;
    uint8_t req[HELLO_FRAME], rep[HELLO_FRAME], mac_i[32], mac_r[32];
    assert_int_equal(raw_hello(fd, role, BATON_FEATURE_AUTH, req, rep, &sh), 0);
    assert_true(sh.features & BATON_FEATURE_AUTH);
    assert_int_equal(baton_hs_init(&hs, role, key), 0);
    assert_int_equal(baton_hs_transcript_add(&hs, req, sizeof req), 0);
    assert_int_equal(baton_hs_transcript_add(&hs, rep, sizeof rep), 0);
    assert_int_equal(baton_hs_initiator_proof(&hs, mac_i), 0);
    assert_int_equal(raw_auth(fd, mac_i, 32, mac_r), 0);
    assert_int_equal(baton_hs_verify_responder(&hs, mac_r), 0);
    memset(t, 0, sizeof *t);
    t->fd = fd;
    assert_int_equal(baton_hs_session_keys(&hs, &t->send, &t->recv), 0);
    t->encrypt = (sh.features & BATON_FEATURE_ENCRYPT) != 0;
    baton_hs_destroy(&hs);
}

/* ---- the handshake, responder side (a fake server) ---- */

/* Reads a client's HELLO, answers with features, reads its AUTH, checks
 * the proof with key and answers with the server's proof (one byte
 * flipped when corrupt_proof). Fills t (the server's end). */
static inline void fake_accept(int fd, const uint8_t *key, uint64_t features, int corrupt_proof,
                        struct tside *t)
{
    struct baton_hs hs;
    struct baton_frame_header h;
    uint8_t req[HELLO_FRAME], rep[HELLO_FRAME], auth[HDR + 32], reply[HDR + 32];
    assert_int_equal(io_read(fd, req, HELLO_FRAME), HELLO_FRAME);
    parse_header(req, &h);
    assert_int_equal(h.cmd, BATON_CMD_HELLO);
    assert_int_equal(h.len, BATON_HELLO_BYTES);
    assert_true(get_le(req + HDR + 8, 8) & BATON_FEATURE_AUTH); /* a keyed client says so */
    frame_header(rep, BATON_CMD_HELLO, 0, h.seq, BATON_HELLO_BYTES);
    memset(rep + HDR, 0, BATON_HELLO_BYTES);
    rep[HDR + 0] = 1;
    rep[HDR + 2] = 1;
    rep[HDR + 4] = BATON_ROLE_SERVER;
    put_le(rep + HDR + 8, features, 8);
    randombytes_buf(rep + HDR + 16, 32);
    assert_int_equal(baton_hs_init(&hs, req[HDR + 4], key), 0);
    assert_int_equal(baton_hs_transcript_add(&hs, req, sizeof req), 0);
    assert_int_equal(baton_hs_transcript_add(&hs, rep, sizeof rep), 0);
    io_write(fd, rep, sizeof rep);
    assert_int_equal(io_read(fd, auth, sizeof auth), sizeof auth);
    parse_header(auth, &h);
    assert_int_equal(h.cmd, BATON_CMD_AUTH);
    assert_int_equal(h.len, 32);
    assert_int_equal(baton_hs_verify_initiator(&hs, auth + HDR), 0);
    frame_header(reply, BATON_CMD_AUTH, 0, h.seq, 32);
    assert_int_equal(baton_hs_responder_proof(&hs, reply + HDR), 0);
    if (corrupt_proof)
        reply[HDR + 5] ^= 0x01;
    memset(t, 0, sizeof *t);
    t->fd = fd;
    assert_int_equal(baton_hs_session_keys(&hs, &t->send, &t->recv), 0);
    t->encrypt = (features & BATON_FEATURE_ENCRYPT) != 0;
    baton_hs_destroy(&hs);
    io_write(fd, reply, sizeof reply);
}

/* ---- key files in a private temporary directory ---- */

struct keydir {
    char dir[64];
    char client[96], peer[96], other[96];
    struct baton_key *client_key, *peer_key, *other_key;
};

static inline void keydir_open(struct keydir *k)
{
    char err[256];
    assert_int_equal(baton_auth_init(), 0);
    snprintf(k->dir, sizeof k->dir, "/tmp/baton-auth-test-XXXXXX");
    assert_non_null(mkdtemp(k->dir));
    snprintf(k->client, sizeof k->client, "%s/client.key", k->dir);
    snprintf(k->peer, sizeof k->peer, "%s/peer.key", k->dir);
    snprintf(k->other, sizeof k->other, "%s/other.key", k->dir);
    assert_int_equal(baton_key_generate_file(k->client, err, sizeof err), 0);
    assert_int_equal(baton_key_generate_file(k->peer, err, sizeof err), 0);
    assert_int_equal(baton_key_generate_file(k->other, err, sizeof err), 0);
    assert_int_equal(baton_key_open(k->client, &k->client_key, err, sizeof err), 0);
    assert_int_equal(baton_key_open(k->peer, &k->peer_key, err, sizeof err), 0);
    assert_int_equal(baton_key_open(k->other, &k->other_key, err, sizeof err), 0);
}

static inline void keydir_close(struct keydir *k)
{
    baton_key_free(k->client_key);
    baton_key_free(k->peer_key);
    baton_key_free(k->other_key);
    unlink(k->client);
    unlink(k->peer);
    unlink(k->other);
    rmdir(k->dir);
}

#endif
