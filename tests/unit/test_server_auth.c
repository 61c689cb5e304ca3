/* src/server with keys: the handshake (HELLO, AUTH), what an unauthenticated
 * or wrongly keyed connection can get (nothing beyond HELLO/AUTH), frame
 * tags after AUTH (bad, replayed, reordered, altered frames close the
 * connection without a reply; the server keeps serving others), payload
 * encryption, and libbaton against the keyed dispatcher. Served in-process
 * over socketpairs; raw frames are built with the reference AEAD
 * (auth_test_frames.h). */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "auth_test_frames.h"
#include "baton/client.h"
#include "baton/status.h"
#include "net/net.h"
#include "server/server.h"

#define TOTAL_MEMORY (16ull << 20)

static struct keydir keys;

static int group_setup(void **state)
{
    (void)state;
    keydir_open(&keys);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    keydir_close(&keys);
    return 0;
}

/* A server with the given keys (NULL: none). */
static struct baton_server *new_server(const struct baton_key *client_key,
                                       const struct baton_key *peer_key, int encrypt,
                                       int handshake_ms)
{
    struct baton_server_config cfg;
    struct baton_server *s;
    baton_server_config_default(&cfg);
    cfg.total_memory_bytes = TOTAL_MEMORY;
    cfg.max_scratch_bytes = 1u << 20;
    cfg.max_message_bytes = 8u << 20;
    cfg.quiet = getenv("BATON_TEST_VERBOSE") == NULL;
    cfg.max_connections = 8;
    cfg.client_key = client_key;
    cfg.peer_key = peer_key;
    cfg.encrypt = encrypt;
    if (handshake_ms > 0)
        cfg.handshake_timeout_ms = handshake_ms;
    assert_int_equal(baton_server_create(&cfg, &s), 0);
    return s;
}

static struct baton_server *keyed_server(void)
{
    return new_server(keys.client_key, keys.peer_key, 0, 0);
}

static int raw_conn(struct baton_server *s)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    assert_int_equal(baton_server_serve_fd(s, sv[0]), 0);
    return sv[1];
}

static int connect_with(struct baton_server *s, const struct baton_key *key, uint8_t role,
                        struct baton_conn **c)
{
    struct baton_conn_options o = {.timeout_ms = 10000, .key = key, .role = role};
    return baton_conn_adopt_fd_ex(raw_conn(s), &o, c);
}

static struct baton_conn *keyed_client(struct baton_server *s)
{
    struct baton_conn *c = NULL;
    assert_int_equal(connect_with(s, keys.client_key, BATON_ROLE_CLIENT, &c), 0);
    assert_int_equal(baton_conn_authenticated(c), 1);
    return c;
}

/* Waits (bounded) until every buffer of closed sessions is released:
 * DEVICE_INFO's free memory is server-wide. */
static void expect_all_memory_free(struct baton_conn *c)
{
    struct baton_device_info d;
    for (int i = 0; i < 2000; i++) {
        assert_int_equal(baton_device_info(c, &d), 0);
        if (d.free_memory == TOTAL_MEMORY)
            return;
        poll(NULL, 0, 5);
    }
    fail_msg("a closed session's buffers were not released");
}

static void alloc_payload(uint8_t p[8], uint64_t size)
{
    put_le(p, size, 8);
}

/* ---- libbaton against the keyed server ---- */

static void roundtrip(struct baton_conn *c, size_t n)
{
    uint64_t h;
    struct baton_tensor_desc t;
    uint8_t *src = malloc(n), *dst = malloc(n);
    assert_non_null(src);
    assert_non_null(dst);
    randombytes_buf(src, n);
    assert_int_equal(baton_alloc_buffer(c, n, &h), 0);
    assert_int_equal(baton_tensor_init(&t, h, 0, BATON_TYPE_I32, n / 4, 1, 1, 1), 0);
    assert_int_equal(baton_set_tensor(c, &t, 0, src, n), 0);
    memset(dst, 0, n);
    assert_int_equal(baton_get_tensor(c, &t, 0, dst, n), 0);
    assert_memory_equal(src, dst, n);
    /* an error reply is tagged too, and the connection goes on */
    assert_int_equal(baton_free_buffer(c, h ^ (1ull << 40)), BATON_E_STALE_HANDLE);
    assert_int_equal(baton_free_buffer(c, h), 0);
    assert_false(baton_conn_is_dead(c));
    free(src);
    free(dst);
}

static void test_keyed_roundtrip(void **state)
{
    struct baton_server *s = keyed_server();
    struct baton_conn *c = keyed_client(s);
    const struct baton_hello *sh = baton_conn_server_hello(c);
    assert_true(sh->features & BATON_FEATURE_AUTH);
    assert_false(sh->features & BATON_FEATURE_ENCRYPT);
    assert_int_equal(baton_conn_encrypted(c), 0);
    /* 3 MiB + 4: several MAC pieces in both directions */
    roundtrip(c, (3u << 20) + 4);
    baton_conn_reset_stats(c);
    struct baton_device_info d;
    assert_int_equal(baton_device_info(c, &d), 0);
    struct baton_cmd_stats st = baton_conn_stats(c, BATON_CMD_DEVICE_INFO);
    assert_int_equal(st.request_bytes, 24 + 16);
    assert_int_equal(st.reply_bytes, 24 + 96 + 16);
    baton_conn_close(c);
    baton_server_destroy(s);
}

static void test_encrypted_roundtrip(void **state)
{
    struct baton_server *s = new_server(keys.client_key, NULL, 1, 0);
    struct baton_conn *c = keyed_client(s);
    assert_true(baton_conn_server_hello(c)->features & BATON_FEATURE_ENCRYPT);
    assert_int_equal(baton_conn_encrypted(c), 1);
    roundtrip(c, (3u << 20) + 4);
    baton_conn_close(c);
    baton_server_destroy(s);
}

/* The bytes on the wire, checked with the reference AEAD: in MAC mode the
 * payload is in clear and the tag covers header and payload; in encrypt
 * mode the payload differs from the data and decrypts to it. */
static void wire_check(int encrypt)
{
    struct baton_server *s = new_server(keys.client_key, NULL, encrypt, 0);
    int fd = raw_conn(s);
    struct tside t;
    struct baton_frame_header h;
    uint8_t p[BATON_TENSOR_DESC_BYTES + 16 + 64], reply[64], data[64];
    raw_login(fd, baton_key_bytes(keys.client_key), BATON_ROLE_CLIENT, &t);
    assert_int_equal(t.encrypt, encrypt);
    alloc_payload(p, 4096);
    send_tagged(&t, BATON_CMD_ALLOC_BUFFER, 0, 3, p, 8);
    assert_int_equal(recv_tagged(&t, &h, reply, sizeof reply), 0);
    assert_int_equal(h.status, 0);
    assert_int_equal(h.len, 16);
    uint64_t handle = get_le(reply, 8);
    struct baton_tensor_desc td;
    assert_int_equal(baton_tensor_init(&td, handle, 0, BATON_TYPE_I32, 16, 1, 1, 1), 0);
    for (int i = 0; i < 64; i++)
        data[i] = (uint8_t)(i * 7 + 1);
    baton_wire_encode_tensor(p, &td);
    put_le(p + BATON_TENSOR_DESC_BYTES, 0, 8);
    put_le(p + BATON_TENSOR_DESC_BYTES + 8, 64, 8);
    memcpy(p + BATON_TENSOR_DESC_BYTES + 16, data, 64);
    send_tagged(&t, BATON_CMD_SET_TENSOR, 0, 4, p, sizeof p);
    assert_int_equal(recv_tagged(&t, &h, reply, sizeof reply), 0);
    assert_int_equal(h.status, 0);
    /* GET: read the raw frame first, then check it */
    send_tagged(&t, BATON_CMD_GET_TENSOR, 0, 5, p, BATON_TENSOR_DESC_BYTES + 16);
    uint8_t raw[HDR + 64 + 16];
    assert_int_equal(io_read(fd, raw, sizeof raw), sizeof raw);
    parse_header(raw, &h);
    assert_int_equal(h.cmd, BATON_CMD_GET_TENSOR);
    assert_int_equal(h.seq, 5);
    assert_int_equal(h.len, 64);
    uint8_t nonce[12], clear[64];
    ref_nonce(nonce, t.recv.next_counter++);
    if (encrypt) {
        assert_memory_not_equal(raw + HDR, data, 64);
        assert_int_equal(crypto_aead_chacha20poly1305_ietf_decrypt_detached(
                             clear, NULL, raw + HDR, 64, raw + HDR + 64, raw, HDR, nonce, t.recv.key),
                         0);
        assert_memory_equal(clear, data, 64);
    } else {
        assert_memory_equal(raw + HDR, data, 64);
        assert_int_equal(crypto_aead_chacha20poly1305_ietf_decrypt_detached(
                             clear, NULL, clear, 0, raw + HDR + 64, raw, HDR + 64, nonce,
                             t.recv.key),
                         0);
    }
    close(fd);
    baton_server_destroy(s);
}

static void test_wire_mac_mode(void **state)
{
    wire_check(0);
}

static void test_wire_encrypt_mode(void **state)
{
    wire_check(1);
}

/* ---- who gets refused ---- */

/* After a refused or unfinished handshake nothing is served: the given
 * command is answered with E_PROTO (a framing error) and the connection
 * closes. */
static void expect_not_served(int fd, uint8_t cmd)
{
    uint8_t p[8], hb[HDR];
    struct baton_frame_header h;
    alloc_payload(p, 4096);
    frame_header(hb, cmd, 0, 9, cmd == BATON_CMD_ALLOC_BUFFER ? 8 : 0);
    io_write(fd, hb, HDR);
    if (cmd == BATON_CMD_ALLOC_BUFFER)
        io_write(fd, p, 8);
    assert_int_equal(io_read(fd, hb, HDR), HDR);
    parse_header(hb, &h);
    assert_int_equal(h.cmd, cmd);
    assert_int_equal(h.status, -BATON_E_PROTO);
    assert_int_equal(h.len, 0);
    expect_eof(fd);
}

static void test_no_key_refused(void **state)
{
    struct baton_server *s = keyed_server();
    struct baton_conn *c = NULL;
    /* libbaton without a key refuses a server that requires one */
    assert_int_equal(connect_with(s, NULL, BATON_ROLE_CLIENT, &c), BATON_E_AUTH);
    /* a raw client that skips AUTH gets nothing: DEVICE_INFO, ALLOC */
    uint8_t cmds[] = {BATON_CMD_DEVICE_INFO, BATON_CMD_ALLOC_BUFFER};
    for (size_t i = 0; i < sizeof cmds; i++) {
        int fd = raw_conn(s);
        uint8_t req[HELLO_FRAME], rep[HELLO_FRAME];
        struct baton_hello sh;
        assert_int_equal(raw_hello(fd, BATON_ROLE_CLIENT, 0, req, rep, &sh), 0);
        assert_true(sh.features & BATON_FEATURE_AUTH);
        expect_not_served(fd, cmds[i]);
        close(fd);
    }
    /* nor before HELLO */
    int fd = raw_conn(s);
    expect_not_served(fd, BATON_CMD_DEVICE_INFO);
    close(fd);
    /* AUTH before HELLO is a protocol error */
    fd = raw_conn(s);
    uint8_t zero[32] = {0}, resp[32];
    assert_int_equal(raw_auth(fd, zero, 32, resp), -BATON_E_PROTO);
    expect_eof(fd);
    close(fd);
    /* another client is served meanwhile */
    c = keyed_client(s);
    expect_all_memory_free(c);
    baton_conn_close(c);
    baton_server_destroy(s);
}

/* A raw handshake that sends `proof` as AUTH: the server answers E_AUTH
 * with no proof and closes. */
static void expect_auth_refused(struct baton_server *s, const uint8_t *key, uint8_t role,
                                void (*make_proof)(struct baton_hs *, const uint8_t *, const uint8_t *,
                                                   const uint8_t *, uint8_t *))
{
    int fd = raw_conn(s);
    struct baton_hs hs;
    struct baton_hello sh;
    uint8_t req[HELLO_FRAME], rep[HELLO_FRAME], proof[32], resp[32];
    assert_int_equal(raw_hello(fd, role, BATON_FEATURE_AUTH, req, rep, &sh), 0);
    assert_int_equal(baton_hs_init(&hs, role, key), 0);
    assert_int_equal(baton_hs_transcript_add(&hs, req, sizeof req), 0);
    assert_int_equal(baton_hs_transcript_add(&hs, rep, sizeof rep), 0);
    make_proof(&hs, key, req, rep, proof);
    baton_hs_destroy(&hs);
    assert_int_equal(raw_auth(fd, proof, 32, resp), -BATON_E_AUTH);
    expect_eof(fd);
    close(fd);
}

static void proof_initiator(struct baton_hs *hs, const uint8_t *key, const uint8_t *req,
                            const uint8_t *rep, uint8_t *out)
{
    assert_int_equal(baton_hs_initiator_proof(hs, out), 0);
}

/* The responder's proof for this very transcript, made by a second
 * handshake object acting as the server: what a reflection attack would
 * send back. */
static void proof_reflected(struct baton_hs *hs, const uint8_t *key, const uint8_t *req,
                            const uint8_t *rep, uint8_t *out)
{
    struct baton_hs resp;
    uint8_t mac_i[32];
    assert_int_equal(baton_hs_initiator_proof(hs, mac_i), 0);
    assert_int_equal(baton_hs_init(&resp, hs->role, key), 0);
    assert_int_equal(baton_hs_transcript_add(&resp, req, HELLO_FRAME), 0);
    assert_int_equal(baton_hs_transcript_add(&resp, rep, HELLO_FRAME), 0);
    assert_int_equal(baton_hs_verify_initiator(&resp, mac_i), 0);
    assert_int_equal(baton_hs_responder_proof(&resp, out), 0);
    baton_hs_destroy(&resp);
}

/* The server's own HELLO nonce echoed as the proof. */
static void proof_nonce_echo(struct baton_hs *hs, const uint8_t *key, const uint8_t *req,
                             const uint8_t *rep, uint8_t *out)
{
    memcpy(out, rep + HDR + 16, 32);
}

static uint8_t recorded_mac_i[32];

/* A proof that was valid on an earlier connection (other nonces). */
static void proof_recorded(struct baton_hs *hs, const uint8_t *key, const uint8_t *req,
                           const uint8_t *rep, uint8_t *out)
{
    memcpy(out, recorded_mac_i, 32);
}

static void test_wrong_key_refused(void **state)
{
    struct baton_server *s = keyed_server();
    struct baton_conn *c = NULL;
    assert_int_equal(connect_with(s, keys.other_key, BATON_ROLE_CLIENT, &c), BATON_E_AUTH);
    /* the peer key is not the client key either */
    assert_int_equal(connect_with(s, keys.peer_key, BATON_ROLE_CLIENT, &c), BATON_E_AUTH);
    expect_auth_refused(s, baton_key_bytes(keys.other_key), BATON_ROLE_CLIENT, proof_initiator);
    c = keyed_client(s);
    expect_all_memory_free(c);
    baton_conn_close(c);
    baton_server_destroy(s);
}

static void test_client_key_as_peer_refused(void **state)
{
    struct baton_server *s = keyed_server();
    struct baton_conn *c = NULL;
    /* the client key cannot pose as a peer */
    assert_int_equal(connect_with(s, keys.client_key, BATON_ROLE_PEER, &c), BATON_E_AUTH);
    expect_auth_refused(s, baton_key_bytes(keys.client_key), BATON_ROLE_PEER, proof_initiator);
    /* the peer key authenticates the peer role; a peer link carries no
     * client command */
    assert_int_equal(connect_with(s, keys.peer_key, BATON_ROLE_PEER, &c), 0);
    assert_int_equal(baton_conn_authenticated(c), 1);
    struct baton_device_info d;
    assert_int_equal(baton_device_info(c, &d), BATON_E_PROTO);
    assert_true(baton_conn_is_dead(c));
    baton_conn_close(c);
    baton_server_destroy(s);
    /* a server without a peer key refuses the peer role at HELLO */
    s = new_server(keys.client_key, NULL, 0, 0);
    assert_int_equal(connect_with(s, keys.peer_key, BATON_ROLE_PEER, &c), BATON_E_AUTH);
    int fd = raw_conn(s);
    uint8_t req[HELLO_FRAME], rep[HELLO_FRAME];
    struct baton_hello sh;
    assert_int_equal(raw_hello(fd, BATON_ROLE_PEER, BATON_FEATURE_AUTH, req, rep, &sh),
                     -BATON_E_AUTH);
    expect_eof(fd);
    close(fd);
    baton_server_destroy(s);
}

static void test_reflection_and_replayed_proof_refused(void **state)
{
    struct baton_server *s = keyed_server();
    const uint8_t *key = baton_key_bytes(keys.client_key);
    expect_auth_refused(s, key, BATON_ROLE_CLIENT, proof_reflected);
    expect_auth_refused(s, key, BATON_ROLE_CLIENT, proof_nonce_echo);
    /* record a valid MAC_i, then replay it on a new connection */
    int fd = raw_conn(s);
    struct baton_hs hs;
    struct baton_hello sh;
    uint8_t req[HELLO_FRAME], rep[HELLO_FRAME], resp[32];
    assert_int_equal(raw_hello(fd, BATON_ROLE_CLIENT, BATON_FEATURE_AUTH, req, rep, &sh), 0);
    assert_int_equal(baton_hs_init(&hs, BATON_ROLE_CLIENT, key), 0);
    assert_int_equal(baton_hs_transcript_add(&hs, req, sizeof req), 0);
    assert_int_equal(baton_hs_transcript_add(&hs, rep, sizeof rep), 0);
    assert_int_equal(baton_hs_initiator_proof(&hs, recorded_mac_i), 0);
    assert_int_equal(raw_auth(fd, recorded_mac_i, 32, resp), 0);
    baton_hs_destroy(&hs);
    close(fd);
    expect_auth_refused(s, key, BATON_ROLE_CLIENT, proof_recorded);
    baton_server_destroy(s);
}

static void test_pre_auth_rules(void **state)
{
    struct baton_server *s = keyed_server();
    uint8_t req[HELLO_FRAME], rep[HELLO_FRAME], resp[32], junk[31] = {0};
    struct baton_hello sh;
    struct baton_frame_header h;
    /* AUTH with a short proof: E_INVAL, closed */
    int fd = raw_conn(s);
    assert_int_equal(raw_hello(fd, BATON_ROLE_CLIENT, BATON_FEATURE_AUTH, req, rep, &sh), 0);
    assert_int_equal(raw_auth(fd, junk, sizeof junk, resp), -BATON_E_INVAL);
    expect_eof(fd);
    close(fd);
    /* HELLO twice: E_PROTO, closed */
    fd = raw_conn(s);
    assert_int_equal(raw_hello(fd, BATON_ROLE_CLIENT, BATON_FEATURE_AUTH, req, rep, &sh), 0);
    io_write(fd, req, sizeof req);
    assert_int_equal(io_read(fd, rep, HDR), HDR);
    parse_header(rep, &h);
    assert_int_equal(h.cmd, BATON_CMD_HELLO);
    assert_int_equal(h.status, -BATON_E_PROTO);
    expect_eof(fd);
    close(fd);
    /* AUTH again after a successful one: a tagged connection gets E_PROTO */
    fd = raw_conn(s);
    struct tside t;
    raw_login(fd, baton_key_bytes(keys.client_key), BATON_ROLE_CLIENT, &t);
    send_tagged(&t, BATON_CMD_AUTH, 0, 3, junk, 31);
    assert_int_equal(recv_tagged(&t, &h, resp, sizeof resp), 0);
    assert_int_equal(h.status, -BATON_E_PROTO);
    expect_eof(fd);
    close(fd);
    baton_server_destroy(s);
}

static void test_handshake_deadline(void **state)
{
    /* frame deadline 10 s, handshake 200 ms: a client that stops after
     * HELLO is closed at the handshake deadline, without a reply */
    struct baton_server *s = new_server(keys.client_key, NULL, 0, 200);
    uint8_t req[HELLO_FRAME], rep[HELLO_FRAME];
    struct baton_hello sh;
    int fd = raw_conn(s);
    assert_int_equal(raw_hello(fd, BATON_ROLE_CLIENT, BATON_FEATURE_AUTH, req, rep, &sh), 0);
    expect_eof(fd);
    close(fd);
    /* one that sends nothing at all, too */
    fd = raw_conn(s);
    expect_eof(fd);
    close(fd);
    baton_server_destroy(s);
}

/* ---- frames after AUTH ---- */

/* An authenticated raw connection with one served request behind it. */
static int logged_in(struct baton_server *s, struct tside *t)
{
    struct baton_frame_header h;
    uint8_t reply[BATON_DEVICE_INFO_BYTES];
    int fd = raw_conn(s);
    raw_login(fd, baton_key_bytes(keys.client_key), BATON_ROLE_CLIENT, t);
    send_tagged(t, BATON_CMD_DEVICE_INFO, 0, 3, NULL, 0);
    assert_int_equal(recv_tagged(t, &h, reply, sizeof reply), 0);
    assert_int_equal(h.status, 0);
    assert_int_equal(h.len, BATON_DEVICE_INFO_BYTES);
    return fd;
}

static void test_bad_tag_closes_silently(void **state)
{
    struct baton_server *s = keyed_server();
    struct baton_conn *other = keyed_client(s);
    struct tside t;
    size_t n;
    /* a flipped bit in the tag, the header or the payload: no reply, EOF */
    for (int where = 0; where < 3; where++) {
        int fd = logged_in(s, &t);
        uint8_t p[8];
        alloc_payload(p, 4096);
        uint8_t *f = tagged_frame(&t.send, t.send.next_counter, 0, BATON_CMD_ALLOC_BUFFER, 0, 4,
                                  p, 8, &n);
        size_t at = where == 0 ? n - 1 : where == 1 ? 8 : HDR + 2;
        f[at] ^= 0x10;
        io_write(fd, f, n);
        free(f);
        expect_eof(fd);
        close(fd);
    }
    /* a frame tagged with the other direction's key */
    int fd = logged_in(s, &t);
    uint8_t *f = tagged_frame(&t.recv, t.send.next_counter, 0, BATON_CMD_DEVICE_INFO, 0, 4, NULL,
                              0, &n);
    io_write(fd, f, n);
    free(f);
    expect_eof(fd);
    close(fd);
    /* a frame without its tag, then the next one: the server takes the
     * next header's bytes as the tag, which does not verify */
    fd = logged_in(s, &t);
    uint8_t hb[HDR];
    frame_header(hb, BATON_CMD_DEVICE_INFO, 0, 4, 0);
    io_write(fd, hb, HDR);
    t.send.next_counter++;
    send_tagged(&t, BATON_CMD_DEVICE_INFO, 0, 5, NULL, 0);
    expect_eof(fd);
    close(fd);
    /* the server keeps serving the other session, and nothing leaked */
    expect_all_memory_free(other);
    baton_conn_close(other);
    baton_server_destroy(s);
}

static void test_replay_and_reorder_close(void **state)
{
    struct baton_server *s = keyed_server();
    struct baton_conn *other = keyed_client(s);
    struct baton_frame_header h;
    struct tside t;
    uint8_t reply[BATON_DEVICE_INFO_BYTES], p[8];
    size_t n;
    alloc_payload(p, 4096);
    /* replay: the same ALLOC frame twice; the first is answered, the copy
     * is not (no second buffer, no reply) */
    int fd = logged_in(s, &t);
    uint8_t *f = tagged_frame(&t.send, t.send.next_counter++, 0, BATON_CMD_ALLOC_BUFFER, 0, 4, p,
                              8, &n);
    io_write(fd, f, n);
    assert_int_equal(recv_tagged(&t, &h, reply, sizeof reply), 0);
    assert_int_equal(h.status, 0);
    io_write(fd, f, n);
    free(f);
    expect_eof(fd);
    close(fd);
    /* a replayed frame from the start of the session (counter 0) */
    fd = logged_in(s, &t);
    f = tagged_frame(&t.send, 0, 0, BATON_CMD_DEVICE_INFO, 0, 3, NULL, 0, &n);
    io_write(fd, f, n);
    free(f);
    expect_eof(fd);
    close(fd);
    /* reorder: frames 1 and 2 sent as 2, 1: the first to arrive does not
     * verify, nothing is answered */
    fd = logged_in(s, &t);
    size_t n1, n2;
    uint8_t *f1 = tagged_frame(&t.send, t.send.next_counter, 0, BATON_CMD_ALLOC_BUFFER, 0, 4, p,
                               8, &n1);
    uint8_t *f2 = tagged_frame(&t.send, t.send.next_counter + 1, 0, BATON_CMD_DEVICE_INFO, 0, 5,
                               NULL, 0, &n2);
    io_write(fd, f2, n2);
    io_write(fd, f1, n1);
    free(f1);
    free(f2);
    expect_eof(fd);
    close(fd);
    /* a frame from another session (same key, other session keys) */
    struct tside t2;
    int fd2 = logged_in(s, &t2);
    fd = logged_in(s, &t);
    f = tagged_frame(&t2.send, t2.send.next_counter, 0, BATON_CMD_DEVICE_INFO, 0, 4, NULL, 0, &n);
    io_write(fd, f, n);
    free(f);
    expect_eof(fd);
    close(fd);
    /* ... while that other session goes on */
    send_tagged(&t2, BATON_CMD_DEVICE_INFO, 0, 4, NULL, 0);
    assert_int_equal(recv_tagged(&t2, &h, reply, sizeof reply), 0);
    assert_int_equal(h.status, 0);
    close(fd2);
    expect_all_memory_free(other);
    baton_conn_close(other);
    baton_server_destroy(s);
}

/* SET_TENSOR data lands in the session's own validated range before its
 * tag is checked: a bad tag still ends that session and frees its
 * buffers, and the data never reaches anyone else. */
static void test_set_tensor_bad_tag(void **state)
{
    for (int encrypt = 0; encrypt < 2; encrypt++) {
        struct baton_server *s = new_server(keys.client_key, NULL, encrypt, 0);
        struct baton_conn *other = keyed_client(s);
        struct baton_frame_header h;
        struct tside t;
        uint8_t reply[64], p[BATON_TENSOR_DESC_BYTES + 16 + 4096];
        size_t n;
        int fd = logged_in(s, &t);
        alloc_payload(p, 4096);
        send_tagged(&t, BATON_CMD_ALLOC_BUFFER, 0, 4, p, 8);
        assert_int_equal(recv_tagged(&t, &h, reply, sizeof reply), 0);
        assert_int_equal(h.status, 0);
        struct baton_tensor_desc td;
        assert_int_equal(
            baton_tensor_init(&td, get_le(reply, 8), 0, BATON_TYPE_I32, 1024, 1, 1, 1), 0);
        baton_wire_encode_tensor(p, &td);
        put_le(p + BATON_TENSOR_DESC_BYTES, 0, 8);
        put_le(p + BATON_TENSOR_DESC_BYTES + 8, 4096, 8);
        memset(p + BATON_TENSOR_DESC_BYTES + 16, 0xAB, 4096);
        uint8_t *f = tagged_frame(&t.send, t.send.next_counter++, encrypt, BATON_CMD_SET_TENSOR,
                                  0, 5, p, sizeof p, &n);
        f[HDR + BATON_TENSOR_DESC_BYTES + 16 + 1000] ^= 0x01; /* one data bit */
        io_write(fd, f, n);
        free(f);
        expect_eof(fd);
        close(fd);
        expect_all_memory_free(other);
        baton_conn_close(other);
        baton_server_destroy(s);
    }
}

/* A semantic error is answered only after the request's tag checked: with
 * a bad tag the error reply never comes. */
static void test_error_reply_needs_good_tag(void **state)
{
    struct baton_server *s = keyed_server();
    struct baton_frame_header h;
    struct tside t;
    uint8_t p[8], reply[16];
    size_t n;
    alloc_payload(p, 0); /* size 0: E_INVAL */
    int fd = logged_in(s, &t);
    send_tagged(&t, BATON_CMD_ALLOC_BUFFER, 0, 4, p, 8);
    assert_int_equal(recv_tagged(&t, &h, reply, sizeof reply), 0);
    assert_int_equal(h.status, -BATON_E_INVAL);
    /* the same error with a bad tag, and a semantic error whose payload has
     * the wrong length: no reply */
    uint8_t *f = tagged_frame(&t.send, t.send.next_counter, 0, BATON_CMD_ALLOC_BUFFER, 0, 5, p,
                              8, &n);
    f[n - 3] ^= 0x40;
    io_write(fd, f, n);
    free(f);
    expect_eof(fd);
    close(fd);
    fd = logged_in(s, &t);
    f = tagged_frame(&t.send, t.send.next_counter, 0, BATON_CMD_FREE_BUFFER, 0, 5, p, 7, &n);
    f[HDR] ^= 0x01;
    io_write(fd, f, n);
    free(f);
    expect_eof(fd);
    close(fd);
    baton_server_destroy(s);
}

/* ---- configuration ---- */

static void test_unkeyed_server_and_config(void **state)
{
    struct baton_server *s = new_server(NULL, NULL, 0, 0);
    struct baton_conn *c = NULL;
    /* a keyed client refuses a server that offers no authentication */
    assert_int_equal(connect_with(s, keys.client_key, BATON_ROLE_CLIENT, &c), BATON_E_AUTH);
    /* peers need authentication */
    assert_int_equal(connect_with(s, NULL, BATON_ROLE_PEER, &c), BATON_E_UNSUPPORTED);
    /* an unkeyed client works as before */
    assert_int_equal(connect_with(s, NULL, BATON_ROLE_CLIENT, &c), 0);
    assert_int_equal(baton_conn_authenticated(c), 0);
    roundtrip(c, 4096);
    baton_conn_close(c);
    /* without keys: loopback only, unless insecure_no_auth */
    uint16_t port;
    assert_int_equal(baton_server_listen(s, "0.0.0.0", 0, &port), BATON_E_AUTH);
    baton_server_destroy(s);
    /* encrypt without a key is a configuration error */
    struct baton_server_config cfg;
    baton_server_config_default(&cfg);
    cfg.encrypt = 1;
    assert_int_equal(baton_server_create(&cfg, &s), BATON_E_INVAL);
    /* with a key a non-loopback listen is allowed (port 0, closed at once) */
    s = keyed_server();
    assert_int_equal(baton_server_listen(s, "0.0.0.0", 0, &port), 0);
    baton_server_destroy(s);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keyed_roundtrip),
        cmocka_unit_test(test_encrypted_roundtrip),
        cmocka_unit_test(test_wire_mac_mode),
        cmocka_unit_test(test_wire_encrypt_mode),
        cmocka_unit_test(test_no_key_refused),
        cmocka_unit_test(test_wrong_key_refused),
        cmocka_unit_test(test_client_key_as_peer_refused),
        cmocka_unit_test(test_reflection_and_replayed_proof_refused),
        cmocka_unit_test(test_pre_auth_rules),
        cmocka_unit_test(test_handshake_deadline),
        cmocka_unit_test(test_bad_tag_closes_silently),
        cmocka_unit_test(test_replay_and_reorder_close),
        cmocka_unit_test(test_set_tensor_bad_tag),
        cmocka_unit_test(test_error_reply_needs_good_tag),
        cmocka_unit_test(test_unkeyed_server_and_config),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
