/* src/client with a key, against a fake server that runs the responder side
 * of the handshake on a thread (auth_test_frames.h): the client's frames
 * and tags match the reference AEAD byte for byte, in MAC and in encrypt
 * mode; a wrong server proof, a server without authentication, a reply
 * with a bad tag, a replayed reply or a reply tagged for another counter
 * all give BATON_E_AUTH (or a dead connection) and are never accepted. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "auth_test_frames.h"
#include "baton/client.h"
#include "baton/status.h"

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

/* What the fake server does after the handshake. */
enum script {
    SCRIPT_HANDSHAKE_ONLY,   /* then waits for EOF */
    SCRIPT_BAD_PROOF,        /* its AUTH proof has one bit flipped */
    SCRIPT_DEVICE_INFO_BAD,  /* answers DEVICE_INFO with a flipped tag bit */
    SCRIPT_REPLAY_REPLY,     /* answers two requests with the first reply twice */
    SCRIPT_SKIP_COUNTER,     /* answers with counter 1 instead of 0 */
    SCRIPT_ECHO_SET_GET,     /* checks an ALLOC, SET and GET; echoes the data */
};

struct fake {
    int srv, cli;
    enum script script;
    uint64_t features;
    pthread_t thread;
    /* what the fake saw (checked by the test after join) */
    int ok;
    uint8_t set_data[4096 + 1];
};

static void fake_read_request(struct tside *t, struct baton_frame_header *h, uint8_t *p, size_t cap)
{
    assert_int_equal(recv_tagged(t, h, p, cap), 0); /* the client's tag verifies */
    assert_int_equal(h->status, 0);
}

static void *fake_main(void *arg)
{
    struct fake *f = arg;
    struct tside t;
    struct baton_frame_header h;
    uint8_t p[BATON_TENSOR_DESC_BYTES + 16 + 4096], info[BATON_DEVICE_INFO_BYTES];
    size_t n;
    memset(info, 0, sizeof info);
    info[16] = 64; /* alignment */
    memcpy(info + 56, "fake", 4);
    fake_accept(f->srv, baton_key_bytes(keys.client_key), f->features,
                f->script == SCRIPT_BAD_PROOF, &t);
    switch (f->script) {
    case SCRIPT_HANDSHAKE_ONLY:
    case SCRIPT_BAD_PROOF:
        break;
    case SCRIPT_DEVICE_INFO_BAD: {
        fake_read_request(&t, &h, p, sizeof p);
        assert_int_equal(h.cmd, BATON_CMD_DEVICE_INFO);
        uint8_t *fr = tagged_frame(&t.send, t.send.next_counter++, t.encrypt, h.cmd, 0, h.seq,
                                   info, sizeof info, &n);
        fr[n - 1] ^= 0x80;
        io_write(f->srv, fr, n);
        free(fr);
        break;
    }
    case SCRIPT_REPLAY_REPLY: {
        /* reply 1 is correct (counter 0); reply 2, to the next request,
         * replays counter 0's tag computation with the new seq */
        for (int i = 0; i < 2; i++) {
            fake_read_request(&t, &h, p, sizeof p);
            uint8_t *r = tagged_frame(&t.send, 0, t.encrypt, h.cmd, 0, h.seq, info, sizeof info,
                                      &n);
            io_write(f->srv, r, n);
            free(r);
        }
        break;
    }
    case SCRIPT_SKIP_COUNTER: {
        fake_read_request(&t, &h, p, sizeof p);
        uint8_t *fr = tagged_frame(&t.send, 1, t.encrypt, h.cmd, 0, h.seq, info, sizeof info, &n);
        io_write(f->srv, fr, n);
        free(fr);
        break;
    }
    case SCRIPT_ECHO_SET_GET: {
        uint8_t ar[16];
        fake_read_request(&t, &h, p, sizeof p);
        assert_int_equal(h.cmd, BATON_CMD_ALLOC_BUFFER);
        assert_int_equal(get_le(p, 8), 4096);
        put_le(ar, 0x100000001ull, 8);
        put_le(ar + 8, 4096, 8);
        send_tagged(&t, h.cmd, 0, h.seq, ar, 16);
        fake_read_request(&t, &h, p, sizeof p);
        assert_int_equal(h.cmd, BATON_CMD_SET_TENSOR);
        assert_int_equal(h.len, BATON_TENSOR_DESC_BYTES + 16 + 4096);
        memcpy(f->set_data, p + BATON_TENSOR_DESC_BYTES + 16, 4096);
        send_tagged(&t, h.cmd, 0, h.seq, NULL, 0);
        fake_read_request(&t, &h, p, sizeof p);
        assert_int_equal(h.cmd, BATON_CMD_GET_TENSOR);
        send_tagged(&t, h.cmd, 0, h.seq, f->set_data, 4096);
        /* an error reply (tagged) keeps the connection */
        fake_read_request(&t, &h, p, sizeof p);
        assert_int_equal(h.cmd, BATON_CMD_FREE_BUFFER);
        send_tagged(&t, h.cmd, (uint16_t)-BATON_E_NOT_OWNED, h.seq, NULL, 0);
        break;
    }
    }
    f->ok = 1;
    /* wait until the client is done, then close */
    uint8_t b;
    while (read(f->srv, &b, 1) > 0)
        ;
    close(f->srv);
    return NULL;
}

static void fake_start(struct fake *f, enum script script, uint64_t features)
{
    int sv[2];
    memset(f, 0, sizeof *f);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    f->srv = sv[0];
    f->cli = sv[1];
    f->script = script;
    f->features = features;
    assert_int_equal(pthread_create(&f->thread, NULL, fake_main, f), 0);
}

static void fake_join(struct fake *f)
{
    assert_int_equal(pthread_join(f->thread, NULL), 0);
    assert_int_equal(f->ok, 1);
}

static int adopt(struct fake *f, const struct baton_key *key, struct baton_conn **c)
{
    struct baton_conn_options o = {.timeout_ms = 10000, .key = key};
    return baton_conn_adopt_fd_ex(f->cli, &o, c);
}

static void echo_roundtrip(uint64_t features, int encrypted)
{
    struct fake f;
    struct baton_conn *c = NULL;
    uint8_t data[4096], got[4096];
    uint64_t handle;
    struct baton_tensor_desc t;
    fake_start(&f, SCRIPT_ECHO_SET_GET, features);
    assert_int_equal(adopt(&f, keys.client_key, &c), 0);
    assert_int_equal(baton_conn_authenticated(c), 1);
    assert_int_equal(baton_conn_encrypted(c), encrypted);
    for (int i = 0; i < 4096; i++)
        data[i] = (uint8_t)(i * 13 + 5);
    assert_int_equal(baton_alloc_buffer(c, 4096, &handle), 0);
    assert_true(handle == 0x100000001ull);
    assert_int_equal(baton_tensor_init(&t, handle, 0, BATON_TYPE_I32, 1024, 1, 1, 1), 0);
    assert_int_equal(baton_set_tensor(c, &t, 0, data, 4096), 0);
    assert_int_equal(baton_get_tensor(c, &t, 0, got, 4096), 0);
    assert_memory_equal(got, data, 4096);
    assert_int_equal(baton_free_buffer(c, handle), BATON_E_NOT_OWNED);
    assert_false(baton_conn_is_dead(c));
    /* HELLO and AUTH are counted; every later frame carries 16 tag bytes */
    assert_int_equal(baton_conn_stats(c, BATON_CMD_AUTH).request_bytes, 24 + 32);
    assert_int_equal(baton_conn_stats(c, BATON_CMD_AUTH).reply_bytes, 24 + 32);
    assert_int_equal(baton_conn_stats(c, BATON_CMD_SET_TENSOR).request_bytes,
                     24 + 104 + 4096 + 16);
    assert_int_equal(baton_conn_stats(c, BATON_CMD_GET_TENSOR).reply_bytes, 24 + 4096 + 16);
    baton_conn_close(c);
    fake_join(&f);
    /* the fake decrypted (or read) exactly what the client set */
    assert_memory_equal(f.set_data, data, 4096);
}

static void test_mac_mode_matches_reference(void **state)
{
    echo_roundtrip(BATON_FEATURE_AUTH, 0);
}

static void test_encrypt_mode_matches_reference(void **state)
{
    echo_roundtrip(BATON_FEATURE_AUTH | BATON_FEATURE_ENCRYPT, 1);
}

static void test_bad_server_proof(void **state)
{
    struct fake f;
    struct baton_conn *c = NULL;
    fake_start(&f, SCRIPT_BAD_PROOF, BATON_FEATURE_AUTH);
    assert_int_equal(adopt(&f, keys.client_key, &c), BATON_E_AUTH);
    fake_join(&f);
}

static void test_server_without_auth_refused(void **state)
{
    /* a scripted HELLO reply without the AUTH bit: the keyed client
     * refuses before sending anything else */
    int sv[2];
    uint8_t rep[HELLO_FRAME], req[HELLO_FRAME], b;
    struct baton_conn *c = NULL;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    frame_header(rep, BATON_CMD_HELLO, 0, 1, BATON_HELLO_BYTES);
    memset(rep + HDR, 0, BATON_HELLO_BYTES);
    rep[HDR] = 1;
    rep[HDR + 2] = 1;
    io_write(sv[0], rep, sizeof rep);
    struct baton_conn_options o = {.timeout_ms = 10000, .key = keys.client_key};
    assert_int_equal(baton_conn_adopt_fd_ex(sv[1], &o, &c), BATON_E_AUTH);
    assert_int_equal(io_read(sv[0], req, sizeof req), sizeof req); /* the HELLO */
    assert_int_equal(read(sv[0], &b, 1), 0);                         /* then nothing */
    close(sv[0]);
}

static void test_bad_reply_tag(void **state)
{
    struct fake f;
    struct baton_conn *c = NULL;
    struct baton_device_info d;
    fake_start(&f, SCRIPT_DEVICE_INFO_BAD, BATON_FEATURE_AUTH);
    assert_int_equal(adopt(&f, keys.client_key, &c), 0);
    assert_int_equal(baton_device_info(c, &d), BATON_E_AUTH);
    assert_true(baton_conn_is_dead(c));
    assert_int_equal(baton_device_info(c, &d), BATON_E_IO);
    baton_conn_close(c);
    fake_join(&f);
}

static void test_replayed_or_skipped_reply(void **state)
{
    struct fake f;
    struct baton_conn *c = NULL;
    struct baton_device_info d1, d2;
    /* the second reply reuses the first one's counter */
    fake_start(&f, SCRIPT_REPLAY_REPLY, BATON_FEATURE_AUTH);
    assert_int_equal(adopt(&f, keys.client_key, &c), 0);
    assert_int_equal(baton_device_info(c, &d1), 0);
    assert_string_equal(d1.name, "fake");
    assert_int_equal(baton_device_info(c, &d2), BATON_E_AUTH);
    assert_true(baton_conn_is_dead(c));
    baton_conn_close(c);
    fake_join(&f);
    /* a reply tagged with a later counter (a reply dropped in between) */
    fake_start(&f, SCRIPT_SKIP_COUNTER, BATON_FEATURE_AUTH | BATON_FEATURE_ENCRYPT);
    assert_int_equal(adopt(&f, keys.client_key, &c), 0);
    assert_int_equal(baton_device_info(c, &d1), BATON_E_AUTH);
    baton_conn_close(c);
    fake_join(&f);
}

static void test_options(void **state)
{
    int sv[2];
    struct baton_conn *c = NULL;
    uint8_t b;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    /* only the client and peer roles exist for a connection: fd closed */
    struct baton_conn_options o = {.timeout_ms = 1000, .role = 3};
    assert_int_equal(baton_conn_adopt_fd_ex(sv[1], &o, &c), BATON_E_INVAL);
    assert_int_equal(read(sv[0], &b, 1), 0);
    close(sv[0]);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mac_mode_matches_reference),
        cmocka_unit_test(test_encrypt_mode_matches_reference),
        cmocka_unit_test(test_bad_server_proof),
        cmocka_unit_test(test_server_without_auth_refused),
        cmocka_unit_test(test_bad_reply_tag),
        cmocka_unit_test(test_replayed_or_skipped_reply),
        cmocka_unit_test(test_options),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
