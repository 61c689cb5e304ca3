/* The handshake: both sides agree on keys with the same key and fail with a
 * different one, the role selects the key, proofs do not reflect, every
 * transcript byte counts, and the construction matches auth.h byte for
 * byte (recomputed here from libsodium primitives). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "auth/auth.h"
#include "baton/status.h"

#define FRAME_BYTES 72 /* 24-byte header + 48-byte HELLO */

/* A HELLO frame as docs/PROTOCOL.md lays it out: magic, cmd 1, len 48;
 * payload version 1..1, role, features, nonce. Built by hand so this test
 * depends on nothing but the auth library. */
static void hello_frame(uint8_t f[FRAME_BYTES], uint8_t role, uint64_t features,
                        const uint8_t nonce[32])
{
    memset(f, 0, FRAME_BYTES);
    memcpy(f, "BATN", 4);
    f[4] = 1;  /* HELLO */
    f[16] = 48; /* len, LE64 */
    uint8_t *p = f + 24;
    p[0] = 1; /* version_min */
    p[2] = 1; /* version_max */
    p[4] = role;
    for (int i = 0; i < 8; i++)
        p[8 + i] = (uint8_t)(features >> (8 * i));
    memcpy(p + 16, nonce, 32);
}

struct pair {
    uint8_t init_frame[FRAME_BYTES];
    uint8_t resp_frame[FRAME_BYTES];
    struct baton_hs ini, rsp;
};

/* Both sides of a handshake up to (not including) the proofs: the
 * initiator speaks `role` with ikey, the responder selects rkey for it. */
static void start_pair(struct pair *p, unsigned role, const uint8_t ikey[32],
                       const uint8_t rkey[32])
{
    uint8_t n1[32], n2[32];
    baton_hs_nonce(n1);
    baton_hs_nonce(n2);
    hello_frame(p->init_frame, (uint8_t)role, 0, n1);
    hello_frame(p->resp_frame, 0, 1, n2);
    assert_int_equal(baton_hs_init(&p->ini, role, ikey), 0);
    assert_int_equal(baton_hs_init(&p->rsp, role, rkey), 0);
    assert_int_equal(baton_hs_transcript_add(&p->ini, p->init_frame, FRAME_BYTES), 0);
    assert_int_equal(baton_hs_transcript_add(&p->ini, p->resp_frame, FRAME_BYTES), 0);
    assert_int_equal(baton_hs_transcript_add(&p->rsp, p->init_frame, FRAME_BYTES), 0);
    assert_int_equal(baton_hs_transcript_add(&p->rsp, p->resp_frame, FRAME_BYTES), 0);
}

static uint8_t key_a[32], key_b[32];

static int setup(void **state)
{
    (void)state;
    if (baton_auth_init() != 0)
        return -1;
    for (int i = 0; i < 32; i++) {
        key_a[i] = (uint8_t)i;
        key_b[i] = (uint8_t)(0x80 + i);
    }
    return 0;
}

static void test_same_key_agrees(void **state)
{
    struct pair p;
    uint8_t mi[32], mr[32];
    struct baton_frame_key is, ir, rs, rr;
    (void)state;
    start_pair(&p, BATON_AUTH_ROLE_CLIENT, key_a, key_a);
    assert_int_equal(baton_hs_initiator_proof(&p.ini, mi), 0);
    assert_int_equal(baton_hs_verify_initiator(&p.rsp, mi), 0);
    assert_int_equal(baton_hs_responder_proof(&p.rsp, mr), 0);
    assert_int_equal(baton_hs_verify_responder(&p.ini, mr), 0);
    assert_memory_not_equal(mi, mr, 32);
    assert_int_equal(baton_hs_session_keys(&p.ini, &is, &ir), 0);
    assert_int_equal(baton_hs_session_keys(&p.rsp, &rs, &rr), 0);
    /* what one side sends with, the other receives with */
    assert_memory_equal(is.key, rr.key, 32);
    assert_memory_equal(ir.key, rs.key, 32);
    /* the two directions differ, and neither is the raw key */
    assert_memory_not_equal(is.key, ir.key, 32);
    assert_memory_not_equal(is.key, key_a, 32);
    assert_memory_not_equal(ir.key, key_a, 32);
    assert_true(is.next_counter == 0 && ir.next_counter == 0);
    baton_hs_destroy(&p.ini);
    baton_hs_destroy(&p.rsp);
    /* destroyed: no secret left, and nothing more is handed out */
    static const uint8_t zero[32];
    assert_memory_equal(p.ini.k_i2r, zero, 32);
    assert_memory_equal(p.ini.k_auth, zero, 32);
    assert_int_equal(baton_hs_session_keys(&p.ini, &is, &ir), BATON_E_AUTH);
}

/* Fresh nonces give fresh session keys even with the same key. */
static void test_sessions_differ(void **state)
{
    struct pair p, q;
    uint8_t m[32];
    struct baton_frame_key s1, r1, s2, r2;
    (void)state;
    start_pair(&p, BATON_AUTH_ROLE_CLIENT, key_a, key_a);
    start_pair(&q, BATON_AUTH_ROLE_CLIENT, key_a, key_a);
    assert_int_equal(baton_hs_initiator_proof(&p.ini, m), 0);
    assert_int_equal(baton_hs_verify_initiator(&p.rsp, m), 0);
    assert_int_equal(baton_hs_initiator_proof(&q.ini, m), 0);
    assert_int_equal(baton_hs_verify_initiator(&q.rsp, m), 0);
    assert_int_equal(baton_hs_session_keys(&p.rsp, &s1, &r1), 0);
    assert_int_equal(baton_hs_session_keys(&q.rsp, &s2, &r2), 0);
    assert_memory_not_equal(s1.key, s2.key, 32);
    assert_memory_not_equal(r1.key, r2.key, 32);
}

static void test_wrong_key_fails(void **state)
{
    struct pair p;
    uint8_t mi[32], mr[32];
    struct baton_frame_key s, r;
    (void)state;
    start_pair(&p, BATON_AUTH_ROLE_CLIENT, key_b, key_a);
    assert_int_equal(baton_hs_initiator_proof(&p.ini, mi), 0);
    assert_int_equal(baton_hs_verify_initiator(&p.rsp, mi), BATON_E_AUTH);
    /* after a failure the responder gives no proof and no keys */
    assert_int_equal(baton_hs_responder_proof(&p.rsp, mr), BATON_E_AUTH);
    assert_int_equal(baton_hs_session_keys(&p.rsp, &s, &r), BATON_E_AUTH);
    assert_int_equal(baton_hs_verify_initiator(&p.rsp, mi), BATON_E_AUTH);
}

/* A coordinator holds only the client key; claiming the peer role makes
 * the responder verify with the peer key, so the proof fails. */
static void test_client_key_claiming_peer_fails(void **state)
{
    struct pair p;
    uint8_t mi[32];
    const uint8_t *client_key = key_a, *peer_key = key_b;
    (void)state;
    start_pair(&p, BATON_AUTH_ROLE_PEER, client_key, peer_key);
    assert_int_equal(baton_hs_initiator_proof(&p.ini, mi), 0);
    assert_int_equal(baton_hs_verify_initiator(&p.rsp, mi), BATON_E_AUTH);
}

/* The same key under the two roles gives different secrets: the role byte
 * is bound into PRK (besides being in T). */
static void test_role_is_bound(void **state)
{
    struct pair p;
    struct baton_hs other;
    uint8_t mi[32];
    (void)state;
    start_pair(&p, BATON_AUTH_ROLE_CLIENT, key_a, key_a);
    assert_int_equal(baton_hs_init(&other, BATON_AUTH_ROLE_PEER, key_a), 0);
    assert_int_equal(baton_hs_transcript_add(&other, p.init_frame, FRAME_BYTES), 0);
    assert_int_equal(baton_hs_transcript_add(&other, p.resp_frame, FRAME_BYTES), 0);
    assert_int_equal(baton_hs_initiator_proof(&p.ini, mi), 0);
    assert_int_equal(baton_hs_verify_initiator(&other, mi), BATON_E_AUTH);
}

/* Reflection: a responder proof sent back as an initiator proof (to a
 * responder with the same transcript) fails, and so does an initiator
 * receiving its own proof back as the responder's. */
static void test_reflection_fails(void **state)
{
    struct pair p;
    struct baton_hs rsp2;
    uint8_t mi[32], mr[32];
    (void)state;
    start_pair(&p, BATON_AUTH_ROLE_CLIENT, key_a, key_a);
    rsp2 = p.rsp; /* a second responder with the same state */
    assert_int_equal(baton_hs_initiator_proof(&p.ini, mi), 0);
    assert_int_equal(baton_hs_verify_initiator(&p.rsp, mi), 0);
    assert_int_equal(baton_hs_responder_proof(&p.rsp, mr), 0);
    assert_int_equal(baton_hs_verify_initiator(&rsp2, mr), BATON_E_AUTH);
    assert_int_equal(baton_hs_verify_responder(&p.ini, mi), BATON_E_AUTH);
}

/* Changing any byte of either HELLO frame on one side breaks the proof. */
static void test_transcript_bytes(void **state)
{
    struct pair p;
    uint8_t mi[32];
    (void)state;
    start_pair(&p, BATON_AUTH_ROLE_CLIENT, key_a, key_a);
    assert_int_equal(baton_hs_initiator_proof(&p.ini, mi), 0);
    for (int i = 0; i < 2 * FRAME_BYTES; i++) {
        uint8_t f1[FRAME_BYTES], f2[FRAME_BYTES];
        struct baton_hs r;
        memcpy(f1, p.init_frame, FRAME_BYTES);
        memcpy(f2, p.resp_frame, FRAME_BYTES);
        if (i < FRAME_BYTES)
            f1[i] ^= 0x01;
        else
            f2[i - FRAME_BYTES] ^= 0x80;
        assert_int_equal(baton_hs_init(&r, BATON_AUTH_ROLE_CLIENT, key_a), 0);
        assert_int_equal(baton_hs_transcript_add(&r, f1, FRAME_BYTES), 0);
        assert_int_equal(baton_hs_transcript_add(&r, f2, FRAME_BYTES), 0);
        if (baton_hs_verify_initiator(&r, mi) != BATON_E_AUTH)
            fail_msg("transcript byte %d changed but the proof verified", i);
    }
    /* the frames in the other order are a different transcript too */
    struct baton_hs r;
    assert_int_equal(baton_hs_init(&r, BATON_AUTH_ROLE_CLIENT, key_a), 0);
    assert_int_equal(baton_hs_transcript_add(&r, p.resp_frame, FRAME_BYTES), 0);
    assert_int_equal(baton_hs_transcript_add(&r, p.init_frame, FRAME_BYTES), 0);
    assert_int_equal(baton_hs_verify_initiator(&r, mi), BATON_E_AUTH);
    /* and the untouched transcript still verifies */
    assert_int_equal(baton_hs_verify_initiator(&p.rsp, mi), 0);
}

/* A changed proof byte fails on both sides. */
static void test_proof_bytes(void **state)
{
    uint8_t mi[32], mr[32];
    (void)state;
    for (int i = 0; i < 32; i++) {
        struct pair p;
        start_pair(&p, BATON_AUTH_ROLE_CLIENT, key_a, key_a);
        assert_int_equal(baton_hs_initiator_proof(&p.ini, mi), 0);
        struct baton_hs r2 = p.rsp;
        mi[i] ^= 0x10;
        assert_int_equal(baton_hs_verify_initiator(&r2, mi), BATON_E_AUTH);
        mi[i] ^= 0x10;
        assert_int_equal(baton_hs_verify_initiator(&p.rsp, mi), 0);
        assert_int_equal(baton_hs_responder_proof(&p.rsp, mr), 0);
        mr[i] ^= 0x01;
        assert_int_equal(baton_hs_verify_responder(&p.ini, mr), BATON_E_AUTH);
    }
}

/* Calls out of order are refused rather than answered. */
static void test_order(void **state)
{
    struct baton_hs h;
    struct baton_frame_key s, r;
    uint8_t f[FRAME_BYTES] = {0}, m[32] = {0};
    uint8_t big[BATON_HS_TRANSCRIPT_MAX + 1] = {0};
    (void)state;
    assert_int_equal(baton_hs_init(&h, 0, key_a), BATON_E_INVAL);
    assert_int_equal(baton_hs_init(&h, 3, key_a), BATON_E_INVAL);
    assert_int_equal(baton_hs_init(&h, BATON_AUTH_ROLE_CLIENT, key_a), 0);
    assert_int_equal(baton_hs_transcript_add(&h, big, sizeof big), BATON_E_LIMIT);
    assert_int_equal(baton_hs_transcript_add(&h, f, sizeof f), 0);
    /* one part only */
    assert_int_equal(baton_hs_initiator_proof(&h, m), BATON_E_PROTO);
    assert_int_equal(baton_hs_transcript_add(&h, f, sizeof f), 0);
    assert_int_equal(baton_hs_transcript_add(&h, f, sizeof f), BATON_E_PROTO);
    assert_int_equal(baton_hs_responder_proof(&h, m), BATON_E_PROTO);
    assert_int_equal(baton_hs_verify_responder(&h, m), BATON_E_PROTO);
    assert_int_equal(baton_hs_session_keys(&h, &s, &r), BATON_E_PROTO);
    assert_int_equal(baton_hs_initiator_proof(&h, m), 0);
    /* an initiator neither verifies an initiator proof nor adds to T */
    assert_int_equal(baton_hs_verify_initiator(&h, m), BATON_E_PROTO);
    assert_int_equal(baton_hs_transcript_add(&h, f, 1), BATON_E_PROTO);
    /* no keys before the responder is verified */
    assert_int_equal(baton_hs_session_keys(&h, &s, &r), BATON_E_PROTO);
    baton_hs_destroy(&h);
    baton_hs_destroy(NULL);
}

/* The construction of auth.h, recomputed from libsodium primitives. */
static void test_known_construction(void **state)
{
    struct pair p;
    uint8_t t[2 * FRAME_BYTES], prk[32], k_auth[32], k_i2r[32], k_r2i[32];
    uint8_t mi_want[32], mr_want[32], mi[32], mr[32], buf[12 + 2 * FRAME_BYTES + 32];
    struct baton_frame_key s, r;
    crypto_generichash_state st;
    uint8_t role = BATON_AUTH_ROLE_PEER;
    (void)state;
    start_pair(&p, role, key_b, key_b);
    memcpy(t, p.init_frame, FRAME_BYTES);
    memcpy(t + FRAME_BYTES, p.resp_frame, FRAME_BYTES);

    crypto_generichash_init(&st, key_b, 32, 32);
    crypto_generichash_update(&st, (const uint8_t *)"baton/1 keys", 12);
    crypto_generichash_update(&st, &role, 1);
    crypto_generichash_update(&st, t, sizeof t);
    crypto_generichash_final(&st, prk, 32);
    crypto_kdf_derive_from_key(k_auth, 32, 1, "batonhs1", prk);
    crypto_kdf_derive_from_key(k_i2r, 32, 2, "batonhs1", prk);
    crypto_kdf_derive_from_key(k_r2i, 32, 3, "batonhs1", prk);
    memcpy(buf, "baton/1 init", 12);
    memcpy(buf + 12, t, sizeof t);
    crypto_generichash(mi_want, 32, buf, 12 + sizeof t, k_auth, 32);
    memcpy(buf, "baton/1 resp", 12);
    memcpy(buf + 12 + sizeof t, mi_want, 32);
    crypto_generichash(mr_want, 32, buf, sizeof buf, k_auth, 32);

    assert_int_equal(baton_hs_initiator_proof(&p.ini, mi), 0);
    assert_memory_equal(mi, mi_want, 32);
    assert_int_equal(baton_hs_verify_initiator(&p.rsp, mi), 0);
    assert_int_equal(baton_hs_responder_proof(&p.rsp, mr), 0);
    assert_memory_equal(mr, mr_want, 32);
    assert_int_equal(baton_hs_verify_responder(&p.ini, mr), 0);
    assert_int_equal(baton_hs_session_keys(&p.ini, &s, &r), 0);
    assert_memory_equal(s.key, k_i2r, 32);
    assert_memory_equal(r.key, k_r2i, 32);
    assert_int_equal(baton_hs_session_keys(&p.rsp, &s, &r), 0);
    assert_memory_equal(s.key, k_r2i, 32);
    assert_memory_equal(r.key, k_i2r, 32);
    /* the role key itself is gone from the state once secrets exist */
    static const uint8_t zero[32];
    assert_memory_equal(p.ini.key, zero, 32);
    assert_memory_equal(p.rsp.key, zero, 32);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_key_agrees),
        cmocka_unit_test(test_sessions_differ),
        cmocka_unit_test(test_wrong_key_fails),
        cmocka_unit_test(test_client_key_claiming_peer_fails),
        cmocka_unit_test(test_role_is_bound),
        cmocka_unit_test(test_reflection_fails),
        cmocka_unit_test(test_transcript_bytes),
        cmocka_unit_test(test_proof_bytes),
        cmocka_unit_test(test_order),
        cmocka_unit_test(test_known_construction),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
