/* Frame MACs and payload encryption. The reference for every tag is
 * libsodium's one-shot crypto_aead_chacha20poly1305_ietf_encrypt_detached
 * (RFC 8439 2.8) over the same bytes, and the RFC 8439 2.8.2 vector checks
 * the incremental AEAD itself. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "auth/auth.h"
#include "baton/status.h"

#define HDR 24

static struct baton_frame_key key_s, key_r; /* two directions of one session */

static int setup(void **state)
{
    (void)state;
    if (baton_auth_init() != 0)
        return -1;
    for (int i = 0; i < 32; i++) {
        key_s.key[i] = (uint8_t)(3 * i + 1);
        key_r.key[i] = (uint8_t)(200 - i);
    }
    return 0;
}

static void nonce_for(uint8_t n[12], uint64_t counter)
{
    memset(n, 0, 12);
    for (int i = 0; i < 8; i++)
        n[4 + i] = (uint8_t)(counter >> (8 * i));
}

/* Reference MAC-mode tag: AEAD, AD = the whole frame, empty plaintext. */
static void ref_tag(const struct baton_frame_key *k, uint64_t counter, const uint8_t *frame,
                    size_t n, uint8_t tag[16])
{
    uint8_t nonce[12], none[1];
    unsigned long long tlen = 0;
    nonce_for(nonce, counter);
    assert_int_equal(crypto_aead_chacha20poly1305_ietf_encrypt_detached(
                         none, tag, &tlen, none, 0, frame, n, NULL, nonce, k->key),
                     0);
    assert_int_equal(tlen, 16);
}

/* Tags frame[0..n) with baton_mac, fed in pieces of the given sizes
 * (cycled). */
static void mac_chunked(const struct baton_frame_key *k, uint64_t counter, const uint8_t *frame,
                        size_t n, const size_t *pieces, size_t n_pieces, uint8_t tag[16])
{
    struct baton_mac m;
    size_t off = 0, i = 0;
    assert_int_equal(baton_mac_begin(&m, k, counter), 0);
    while (off < n) {
        size_t c = pieces[i++ % n_pieces];
        if (c > n - off)
            c = n - off;
        assert_int_equal(baton_mac_update(&m, frame + off, c), 0);
        off += c;
    }
    assert_int_equal(baton_mac_final_tag(&m, tag), 0);
}

static uint8_t *random_frame(size_t n)
{
    uint8_t *f = malloc(n);
    assert_non_null(f);
    randombytes_buf(f, n);
    return f;
}

static void test_mac_matches_reference(void **state)
{
    /* around BATON_MAC_SMALL_BYTES (frame bytes, header included): a frame
     * kept in struct baton_mac up to its end, one that moves to libcrypto
     * at its last update or while its pad and lengths are added (the kept
     * part has room for 32 more bytes), and one that moves early */
    enum { S = BATON_MAC_SMALL_BYTES - HDR };
    static const size_t sizes[] = {0,      1,      15,     16,     17,     63,    64,
                                   65,     1000,   S - 1,  S,      S + 1,  S + 15, S + 16,
                                   S + 17, S + 31, S + 32, S + 33, S + 48, 70000};
    static const size_t pieces_a[] = {1}, pieces_b[] = {24, 7, 64, 3, 1000},
                        pieces_c[] = {1 << 20};
    uint8_t want[16], got[16];
    (void)state;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = HDR + sizes[s];
        uint8_t *f = random_frame(n);
        uint64_t ctr = 1000003ull * s;
        ref_tag(&key_s, ctr, f, n, want);
        mac_chunked(&key_s, ctr, f, n, pieces_c, 1, got);
        assert_memory_equal(got, want, 16);
        mac_chunked(&key_s, ctr, f, n, pieces_b, 5, got);
        assert_memory_equal(got, want, 16);
        if (n < 2000 || (n > BATON_MAC_SMALL_BYTES - 2 && n < BATON_MAC_SMALL_BYTES + 64)) {
            mac_chunked(&key_s, ctr, f, n, pieces_a, 1, got);
            assert_memory_equal(got, want, 16);
        }
        free(f);
    }
}

static void test_mac_verify_and_tamper(void **state)
{
    enum { PAYLOAD = 100 };
    static const size_t whole[] = {HDR + PAYLOAD};
    uint8_t f[HDR + PAYLOAD], tag[16];
    struct baton_mac m;
    (void)state;
    randombytes_buf(f, sizeof f);
    mac_chunked(&key_s, 7, f, sizeof f, whole, 1, tag);

    assert_int_equal(baton_mac_begin(&m, &key_s, 7), 0);
    assert_int_equal(baton_mac_update(&m, f, HDR), 0);
    assert_int_equal(baton_mac_update(&m, f + HDR, PAYLOAD), 0);
    assert_int_equal(baton_mac_final_verify(&m, tag), 0);

    /* any flipped bit of header or payload */
    for (size_t i = 0; i < sizeof f; i++) {
        f[i] ^= (uint8_t)(1u << (i % 8));
        assert_int_equal(baton_mac_begin(&m, &key_s, 7), 0);
        assert_int_equal(baton_mac_update(&m, f, sizeof f), 0);
        if (baton_mac_final_verify(&m, tag) != BATON_E_AUTH)
            fail_msg("byte %zu flipped but the tag verified", i);
        f[i] ^= (uint8_t)(1u << (i % 8));
    }
    /* any flipped tag byte */
    for (int i = 0; i < 16; i++) {
        tag[i] ^= 0x40;
        assert_int_equal(baton_mac_begin(&m, &key_s, 7), 0);
        assert_int_equal(baton_mac_update(&m, f, sizeof f), 0);
        assert_int_equal(baton_mac_final_verify(&m, tag), BATON_E_AUTH);
        tag[i] ^= 0x40;
    }
    /* truncated or extended frame */
    assert_int_equal(baton_mac_begin(&m, &key_s, 7), 0);
    assert_int_equal(baton_mac_update(&m, f, sizeof f - 1), 0);
    assert_int_equal(baton_mac_final_verify(&m, tag), BATON_E_AUTH);
    assert_int_equal(baton_mac_begin(&m, &key_s, 7), 0);
    assert_int_equal(baton_mac_update(&m, f, sizeof f), 0);
    assert_int_equal(baton_mac_update(&m, "", 1), 0);
    assert_int_equal(baton_mac_final_verify(&m, tag), BATON_E_AUTH);
}

/* A frame tagged with counter c is rejected at any other counter (replay:
 * the receiver is at c + 1; reordering: at c - 1), and in the other
 * direction (a frame reflected back to its sender). */
static void test_counter_and_direction(void **state)
{
    static const size_t whole[] = {HDR + 40};
    uint8_t f[HDR + 40], tag[16];
    struct baton_mac m;
    (void)state;
    randombytes_buf(f, sizeof f);
    mac_chunked(&key_s, 5, f, sizeof f, whole, 1, tag);
    static const uint64_t others[] = {4, 6, 5ull << 32, 0};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(baton_mac_begin(&m, &key_s, others[i]), 0);
        assert_int_equal(baton_mac_update(&m, f, sizeof f), 0);
        assert_int_equal(baton_mac_final_verify(&m, tag), BATON_E_AUTH);
    }
    assert_int_equal(baton_mac_begin(&m, &key_r, 5), 0);
    assert_int_equal(baton_mac_update(&m, f, sizeof f), 0);
    assert_int_equal(baton_mac_final_verify(&m, tag), BATON_E_AUTH);

    /* the stream of counters a receiver takes: a replayed frame meets the
     * next counter and fails */
    struct baton_frame_key tx = key_s, rx = key_s;
    uint64_t c;
    uint8_t t0[16];
    assert_int_equal(baton_frame_key_next(&tx, &c), 0);
    assert_true(c == 0);
    mac_chunked(&tx, c, f, sizeof f, whole, 1, t0);
    assert_int_equal(baton_frame_key_next(&rx, &c), 0);
    assert_int_equal(baton_mac_begin(&m, &rx, c), 0);
    assert_int_equal(baton_mac_update(&m, f, sizeof f), 0);
    assert_int_equal(baton_mac_final_verify(&m, t0), 0);
    assert_int_equal(baton_frame_key_next(&rx, &c), 0);
    assert_true(c == 1);
    assert_int_equal(baton_mac_begin(&m, &rx, c), 0);
    assert_int_equal(baton_mac_update(&m, f, sizeof f), 0);
    assert_int_equal(baton_mac_final_verify(&m, t0), BATON_E_AUTH);
}

static void test_counter_exhaustion(void **state)
{
    struct baton_frame_key k = key_s;
    struct baton_mac m;
    uint64_t c = 0;
    (void)state;
    k.next_counter = UINT64_MAX - 1;
    assert_int_equal(baton_frame_key_next(&k, &c), 0);
    assert_true(c == UINT64_MAX - 1);
    assert_int_equal(baton_frame_key_next(&k, &c), BATON_E_LIMIT);
    assert_int_equal(baton_frame_key_next(&k, &c), BATON_E_LIMIT);
    assert_true(c == UINT64_MAX - 1 && k.next_counter == UINT64_MAX);
    assert_int_equal(baton_mac_begin(&m, &k, UINT64_MAX), BATON_E_LIMIT);
    assert_int_equal(baton_aead_begin(&m, &k, UINT64_MAX, "h", 1), BATON_E_LIMIT);
    assert_int_equal(baton_mac_begin(&m, &k, UINT64_MAX - 1), 0);
    baton_mac_abort(&m);
}

static void test_misuse(void **state)
{
    struct baton_mac m;
    uint8_t tag[16], b[4] = {0};
    (void)state;
    memset(&m, 0, sizeof m);
    assert_int_equal(baton_mac_update(&m, b, 4), BATON_E_PROTO);
    assert_int_equal(baton_mac_final_tag(&m, tag), BATON_E_PROTO);
    assert_int_equal(baton_mac_final_verify(&m, tag), BATON_E_PROTO);
    assert_int_equal(baton_aead_encrypt(&m, b, b, 4), BATON_E_PROTO);
    /* MAC mode has no ciphertext; encrypt mode takes no more AD */
    assert_int_equal(baton_mac_begin(&m, &key_s, 0), 0);
    assert_int_equal(baton_aead_encrypt(&m, b, b, 4), BATON_E_PROTO);
    assert_int_equal(baton_mac_final_tag(&m, tag), 0);
    /* final wipes: a second final is refused */
    assert_int_equal(baton_mac_final_tag(&m, tag), BATON_E_PROTO);
    assert_int_equal(baton_aead_begin(&m, &key_s, 0, b, 4), 0);
    assert_int_equal(baton_mac_update(&m, b, 4), BATON_E_PROTO);
    baton_mac_abort(&m);
    assert_int_equal(baton_aead_decrypt(&m, b, b, 4), BATON_E_PROTO);
    baton_mac_abort(NULL);
}

/* Encrypts payload in pieces (in place); returns the tag. */
static void aead_chunked(const struct baton_frame_key *k, uint64_t counter, const uint8_t *hdr,
                         uint8_t *payload, size_t n, size_t piece, uint8_t tag[16])
{
    struct baton_mac m;
    assert_int_equal(baton_aead_begin(&m, k, counter, hdr, HDR), 0);
    for (size_t off = 0; off < n;) {
        size_t c = piece < n - off ? piece : n - off;
        assert_int_equal(baton_aead_encrypt(&m, payload + off, payload + off, c), 0);
        off += c;
    }
    assert_int_equal(baton_mac_final_tag(&m, tag), 0);
}

static int aead_open(const struct baton_frame_key *k, uint64_t counter, const uint8_t *hdr,
                     uint8_t *payload, size_t n, size_t piece, const uint8_t tag[16])
{
    struct baton_mac m;
    assert_int_equal(baton_aead_begin(&m, k, counter, hdr, HDR), 0);
    for (size_t off = 0; off < n;) {
        size_t c = piece < n - off ? piece : n - off;
        assert_int_equal(baton_aead_decrypt(&m, payload + off, payload + off, c), 0);
        off += c;
    }
    return baton_mac_final_verify(&m, tag);
}

static void test_aead_matches_reference(void **state)
{
    static const size_t sizes[] = {0, 1, 63, 64, 65, 127, 200, 4096, 100003};
    static const size_t pieces[] = {1, 7, 63, 64, 65, 4096, 1 << 21};
    uint8_t hdr[HDR], tag[16], want_tag[16], nonce[12];
    (void)state;
    randombytes_buf(hdr, sizeof hdr);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        uint8_t *plain = random_frame(n + 1);
        uint8_t *want = malloc(n + 1);
        uint8_t *work = malloc(n + 1);
        assert_non_null(want);
        assert_non_null(work);
        nonce_for(nonce, 77 + s);
        unsigned long long tlen;
        assert_int_equal(crypto_aead_chacha20poly1305_ietf_encrypt_detached(
                             want, want_tag, &tlen, plain, n, hdr, HDR, NULL, nonce, key_s.key),
                         0);
        for (size_t p = 0; p < sizeof pieces / sizeof pieces[0]; p++) {
            if (pieces[p] == 1 && n > 5000)
                continue;
            memcpy(work, plain, n);
            aead_chunked(&key_s, 77 + s, hdr, work, n, pieces[p], tag);
            assert_memory_equal(work, want, n);
            assert_memory_equal(tag, want_tag, 16);
            assert_int_equal(aead_open(&key_s, 77 + s, hdr, work, n, pieces[p], tag), 0);
            assert_memory_equal(work, plain, n);
        }
        /* not in place: out != in */
        struct baton_mac m;
        assert_int_equal(baton_aead_begin(&m, &key_s, 77 + s, hdr, HDR), 0);
        assert_int_equal(baton_aead_encrypt(&m, work, plain, n), 0);
        assert_int_equal(baton_mac_final_tag(&m, tag), 0);
        assert_memory_equal(work, want, n);
        assert_memory_equal(tag, want_tag, 16);
        free(plain);
        free(want);
        free(work);
    }
}

static void test_aead_tamper(void **state)
{
    enum { N = 150 };
    uint8_t hdr[HDR], plain[N], ct[N], work[N], tag[16];
    (void)state;
    randombytes_buf(hdr, sizeof hdr);
    randombytes_buf(plain, sizeof plain);
    memcpy(ct, plain, N);
    aead_chunked(&key_s, 9, hdr, ct, N, 50, tag);
    assert_memory_not_equal(ct, plain, N);
    for (size_t i = 0; i < N; i++) {
        memcpy(work, ct, N);
        work[i] ^= 0x02;
        if (aead_open(&key_s, 9, hdr, work, N, 33, tag) != BATON_E_AUTH)
            fail_msg("ciphertext byte %zu flipped but the tag verified", i);
    }
    for (size_t i = 0; i < HDR; i++) {
        memcpy(work, ct, N);
        hdr[i] ^= 0x02;
        if (aead_open(&key_s, 9, hdr, work, N, N, tag) != BATON_E_AUTH)
            fail_msg("header byte %zu flipped but the tag verified", i);
        hdr[i] ^= 0x02;
    }
    memcpy(work, ct, N);
    assert_int_equal(aead_open(&key_s, 10, hdr, work, N, N, tag), BATON_E_AUTH);
    memcpy(work, ct, N);
    assert_int_equal(aead_open(&key_r, 9, hdr, work, N, N, tag), BATON_E_AUTH);
    memcpy(work, ct, N);
    assert_int_equal(aead_open(&key_s, 9, hdr, work, N, N, tag), 0);
    assert_memory_equal(work, plain, N);
}

/* RFC 8439 section 2.8.2: the AEAD test vector. */
static void test_rfc8439_vector(void **state)
{
    static const char pt[] = "Ladies and Gentlemen of the class of '99: If I could offer you "
                             "only one tip for the future, sunscreen would be it.";
    static const uint8_t nonce[12] = {0x07, 0x00, 0x00, 0x00, 0x40, 0x41,
                                      0x42, 0x43, 0x44, 0x45, 0x46, 0x47};
    static const uint8_t aad[12] = {0x50, 0x51, 0x52, 0x53, 0xc0, 0xc1,
                                    0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7};
    static const uint8_t want_ct[114] = {
        0xd3, 0x1a, 0x8d, 0x34, 0x64, 0x8e, 0x60, 0xdb, 0x7b, 0x86, 0xaf, 0xbc, 0x53, 0xef, 0x7e,
        0xc2, 0xa4, 0xad, 0xed, 0x51, 0x29, 0x6e, 0x08, 0xfe, 0xa9, 0xe2, 0xb5, 0xa7, 0x36, 0xee,
        0x62, 0xd6, 0x3d, 0xbe, 0xa4, 0x5e, 0x8c, 0xa9, 0x67, 0x12, 0x82, 0xfa, 0xfb, 0x69, 0xda,
        0x92, 0x72, 0x8b, 0x1a, 0x71, 0xde, 0x0a, 0x9e, 0x06, 0x0b, 0x29, 0x05, 0xd6, 0xa5, 0xb6,
        0x7e, 0xcd, 0x3b, 0x36, 0x92, 0xdd, 0xbd, 0x7f, 0x2d, 0x77, 0x8b, 0x8c, 0x98, 0x03, 0xae,
        0xe3, 0x28, 0x09, 0x1b, 0x58, 0xfa, 0xb3, 0x24, 0xe4, 0xfa, 0xd6, 0x75, 0x94, 0x55, 0x85,
        0x80, 0x8b, 0x48, 0x31, 0xd7, 0xbc, 0x3f, 0xf4, 0xde, 0xf0, 0x8e, 0x4b, 0x7a, 0x9d, 0xe5,
        0x76, 0xd2, 0x65, 0x86, 0xce, 0xc6, 0x4b, 0x61, 0x16};
    static const uint8_t want_tag[16] = {0x1a, 0xe1, 0x0b, 0x59, 0x4f, 0x09, 0xe2, 0x6a,
                                         0x7e, 0x90, 0x2e, 0xcb, 0xd0, 0x60, 0x06, 0x91};
    uint8_t key[32], ct[114], tag[16];
    struct baton_mac m;
    (void)state;
    assert_int_equal(sizeof pt - 1, 114);
    for (int i = 0; i < 32; i++)
        key[i] = (uint8_t)(0x80 + i);
    /* in three uneven pieces to cross the block boundaries */
    baton_aead_begin_nonce(&m, key, nonce, aad, sizeof aad);
    assert_int_equal(baton_aead_encrypt(&m, ct, pt, 10), 0);
    assert_int_equal(baton_aead_encrypt(&m, ct + 10, pt + 10, 70), 0);
    assert_int_equal(baton_aead_encrypt(&m, ct + 80, pt + 80, 34), 0);
    assert_int_equal(baton_mac_final_tag(&m, tag), 0);
    assert_memory_equal(ct, want_ct, sizeof ct);
    assert_memory_equal(tag, want_tag, sizeof tag);
}

/* The payload limit is checked before anything is written. */
static void test_aead_limit(void **state)
{
    struct baton_mac m;
    uint8_t b[8] = {1, 2, 3, 4, 5, 6, 7, 8}, c[8];
    (void)state;
    memcpy(c, b, 8);
    assert_int_equal(baton_aead_begin(&m, &key_s, 0, "hdr", 3), 0);
    m.ct_bytes = BATON_AEAD_MAX_BYTES - 4; /* as if that much had passed */
    assert_int_equal(baton_aead_encrypt(&m, b, b, 5), BATON_E_LIMIT);
    assert_memory_equal(b, c, 8);
    baton_mac_abort(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mac_matches_reference),
        cmocka_unit_test(test_mac_verify_and_tamper),
        cmocka_unit_test(test_counter_and_direction),
        cmocka_unit_test(test_counter_exhaustion),
        cmocka_unit_test(test_misuse),
        cmocka_unit_test(test_aead_matches_reference),
        cmocka_unit_test(test_aead_tamper),
        cmocka_unit_test(test_rfc8439_vector),
        cmocka_unit_test(test_aead_limit),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
