/* Frame MACs and payload encryption (auth.h): an incremental form of the
 * ChaCha20-Poly1305 AEAD of RFC 8439 section 2.8, byte-identical to
 * libsodium's crypto_aead_chacha20poly1305_ietf for any chunking.
 *
 * RFC 8439 2.8: the Poly1305 one-time key is the first 32 bytes of ChaCha20
 * block 0; the payload is XORed with blocks 1, 2, ...; the tag is Poly1305
 * over AD || pad16(AD) || C || pad16(C) || LE64(|AD|) || LE64(|C|).
 * MAC mode is that AEAD with the whole frame as AD and no plaintext.
 *
 * The one-time key comes from libsodium (crypto_stream_chacha20_ietf, one
 * block); the bulk work, Poly1305 over every frame byte and the keystream of
 * encrypt mode, runs in OpenSSL's libcrypto (EVP_MAC "POLY1305", EVP_CIPHER
 * "ChaCha20"), whose x86-64 code has AVX2 and AVX-512 paths where libsodium
 * 1.0.18 has SSE2 only: about 3x the MAC throughput on an AVX-512 host
 * (bench/mac_speed.c). The bytes are the same either way; the tests compare
 * every tag and ciphertext with libsodium's one-shot AEAD.
 *
 * A MAC-mode frame stays in m->buf until it passes BATON_MAC_SMALL_BYTES
 * (up to 32 bytes more stay: buf has room for the pad and lengths):
 * a small frame (a request or reply of a decode step) is tagged at the end
 * by one call of libsodium's crypto_onetimeauth_poly1305 over AD, pad and
 * lengths, without a libcrypto context (making, keying and freeing one
 * costs microseconds a frame); a larger one moves to libcrypto at the
 * update that passes the size, the kept bytes first. */
#include "auth/auth.h"

#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "baton/status.h"

enum { PHASE_IDLE = 0, PHASE_AD, PHASE_CT };

static const uint8_t zeros[16];

static pthread_once_t algs_once = PTHREAD_ONCE_INIT;
static EVP_MAC *alg_poly1305;
static EVP_CIPHER *alg_chacha20;

/* Loads the two algorithms once. OpenSSL reads no configuration file (so
 * nothing is opened after seccomp) and registers no exit handler (threads
 * may still hold frames while the process exits). */
static void algs_load(void)
{
    if (OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG | OPENSSL_INIT_NO_ATEXIT, NULL) != 1)
        return;
    alg_poly1305 = EVP_MAC_fetch(NULL, "POLY1305", NULL);
    alg_chacha20 = EVP_CIPHER_fetch(NULL, "ChaCha20", NULL);
}

int baton_frame_crypto_init(void)
{
    pthread_once(&algs_once, algs_load);
    return alg_poly1305 != NULL && alg_chacha20 != NULL ? 0 : BATON_E_IO;
}

static void put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* nonce = 4 zero bytes || LE64(counter) */
static void frame_nonce(uint8_t nonce[12], uint64_t counter)
{
    memset(nonce, 0, 4);
    put_le64(nonce + 4, counter);
}

int baton_frame_key_next(struct baton_frame_key *k, uint64_t *counter)
{
    if (k->next_counter == UINT64_MAX)
        return BATON_E_LIMIT;
    *counter = k->next_counter++;
    return 0;
}

void baton_frame_key_wipe(struct baton_frame_key *k)
{
    if (k != NULL)
        sodium_memzero(k, sizeof *k);
}

/* Frees the contexts (OpenSSL cleanses their key material) and zeroes m:
 * the fields before buf, and the part of buf that held frame bytes. */
static void release(struct baton_mac *m)
{
    EVP_MAC_CTX_free(m->poly);
    EVP_CIPHER_CTX_free(m->stream);
    sodium_memzero(m->buf, m->buf_len);
    sodium_memzero(m, offsetof(struct baton_mac, buf));
}

/* A small frame outgrew m->buf: a libcrypto context keyed with the frame's
 * Poly1305 key takes the kept bytes. 0, BATON_E_NOMEM or BATON_E_IO (m
 * stays small, without a context: the caller aborts the frame). */
static int go_large(struct baton_mac *m)
{
    m->poly = EVP_MAC_CTX_new(alg_poly1305);
    if (m->poly == NULL)
        return BATON_E_NOMEM;
    if (EVP_MAC_init(m->poly, m->poly_key, sizeof m->poly_key, NULL) != 1 ||
        EVP_MAC_update(m->poly, m->buf, m->buf_len) != 1) {
        EVP_MAC_CTX_free(m->poly);
        m->poly = NULL;
        return BATON_E_IO;
    }
    sodium_memzero(m->poly_key, sizeof m->poly_key);
    sodium_memzero(m->buf, m->buf_len);
    m->buf_len = 0;
    m->small = 0;
    return 0;
}

static int poly_update(struct baton_mac *m, const void *p, size_t n)
{
    if (m->small) {
        if (n <= sizeof m->buf - m->buf_len) {
            if (n > 0)
                memcpy(m->buf + m->buf_len, p, n);
            m->buf_len += (uint32_t)n;
            return 0;
        }
        int rc = go_large(m);
        if (rc != 0)
            return rc;
    }
    return EVP_MAC_update(m->poly, p, n) == 1 ? 0 : BATON_E_IO;
}

/* Poly1305 key from block 0, the keystream from block 1 (encrypt mode),
 * then the AD phase. m is overwritten: it must be idle (zeroed, finished
 * or aborted). BATON_E_NOMEM / BATON_E_IO when libcrypto fails (m idle). */
static int start(struct baton_mac *m, const uint8_t key[BATON_KEY_BYTES], const uint8_t nonce[12],
                 int encrypt)
{
    uint8_t poly_key[32];
    uint8_t iv[16] = {1, 0, 0, 0}; /* LE32 block counter 1, then the nonce */
    int rc = baton_frame_crypto_init();

    memset(m, 0, offsetof(struct baton_mac, buf));
    if (rc != 0)
        return rc;
    if (!encrypt) { /* MAC mode: kept in buf until it outgrows it */
        crypto_stream_chacha20_ietf(m->poly_key, sizeof m->poly_key, nonce, key);
        m->small = 1;
        m->phase = PHASE_AD;
        return 0;
    }
    m->poly = EVP_MAC_CTX_new(alg_poly1305);
    if (m->poly == NULL || (encrypt && (m->stream = EVP_CIPHER_CTX_new()) == NULL)) {
        release(m);
        return BATON_E_NOMEM;
    }
    crypto_stream_chacha20_ietf(poly_key, sizeof poly_key, nonce, key);
    rc = EVP_MAC_init(m->poly, poly_key, sizeof poly_key, NULL) == 1 ? 0 : BATON_E_IO;
    sodium_memzero(poly_key, sizeof poly_key);
    memcpy(iv + 4, nonce, 12);
    if (rc == 0 && encrypt && EVP_EncryptInit_ex2(m->stream, alg_chacha20, key, iv, NULL) != 1)
        rc = BATON_E_IO;
    if (rc != 0) {
        release(m);
        return rc;
    }
    m->encrypt = (uint8_t)encrypt;
    m->phase = PHASE_AD;
    return 0;
}

static int pad16(struct baton_mac *m, uint64_t n)
{
    unsigned r = (unsigned)(n % 16);
    return r != 0 ? poly_update(m, zeros, 16 - r) : 0;
}

int baton_mac_begin(struct baton_mac *m, const struct baton_frame_key *k, uint64_t counter)
{
    uint8_t nonce[12];
    if (counter == UINT64_MAX)
        return BATON_E_LIMIT;
    frame_nonce(nonce, counter);
    return start(m, k->key, nonce, 0);
}

int baton_mac_update(struct baton_mac *m, const void *p, size_t n)
{
    if (m->phase != PHASE_AD || m->encrypt)
        return BATON_E_PROTO;
    int rc = poly_update(m, p, n);
    if (rc == 0)
        m->ad_bytes += n;
    return rc;
}

/* Computes the tag (closing the AD and ciphertext sections) and releases m. */
static int finish(struct baton_mac *m, uint8_t tag[BATON_TAG_BYTES])
{
    uint8_t lens[16];
    size_t tag_len = 0;
    int rc = 0;
    if (m->phase == PHASE_IDLE)
        return BATON_E_PROTO;
    if (m->phase == PHASE_AD)
        rc = pad16(m, m->ad_bytes);
    if (rc == 0)
        rc = pad16(m, m->ct_bytes);
    put_le64(lens, m->ad_bytes);
    put_le64(lens + 8, m->ct_bytes);
    if (rc == 0)
        rc = poly_update(m, lens, sizeof lens);
    if (rc == 0 && m->small)
        crypto_onetimeauth_poly1305(tag, m->buf, m->buf_len, m->poly_key);
    else if (rc == 0 && (EVP_MAC_final(m->poly, tag, &tag_len, BATON_TAG_BYTES) != 1 ||
                         tag_len != BATON_TAG_BYTES))
        rc = BATON_E_IO;
    release(m);
    return rc;
}

int baton_mac_final_tag(struct baton_mac *m, uint8_t tag[BATON_TAG_BYTES])
{
    return finish(m, tag);
}

int baton_mac_final_verify(struct baton_mac *m, const uint8_t tag[BATON_TAG_BYTES])
{
    uint8_t want[BATON_TAG_BYTES];
    int rc = finish(m, want);
    if (rc == 0)
        rc = crypto_verify_16(want, tag) == 0 ? 0 : BATON_E_AUTH;
    sodium_memzero(want, sizeof want);
    return rc;
}

void baton_mac_abort(struct baton_mac *m)
{
    if (m != NULL)
        release(m);
}

int baton_aead_begin_nonce(struct baton_mac *m, const uint8_t key[BATON_KEY_BYTES],
                           const uint8_t nonce[12], const void *ad, size_t ad_len)
{
    int rc = start(m, key, nonce, 1);
    if (rc == 0)
        rc = poly_update(m, ad, ad_len);
    m->ad_bytes = ad_len;
    if (rc == 0)
        rc = pad16(m, m->ad_bytes);
    if (rc != 0) {
        release(m);
        return rc;
    }
    m->phase = PHASE_CT;
    return 0;
}

int baton_aead_begin(struct baton_mac *m, const struct baton_frame_key *k, uint64_t counter,
                     const void *header, size_t header_len)
{
    uint8_t nonce[12];
    if (counter == UINT64_MAX)
        return BATON_E_LIMIT;
    frame_nonce(nonce, counter);
    return baton_aead_begin_nonce(m, k->key, nonce, header, header_len);
}

/* Splits [in, in+n) into pieces of at most 1 MiB so that decryption can MAC
 * each piece before it is overwritten when out == in. The keystream
 * continues across calls (libcrypto keeps the partial block). */
static int aead_crypt(struct baton_mac *m, uint8_t *out, const uint8_t *in, size_t n,
                      int decrypt)
{
    if (m->phase != PHASE_CT || !m->encrypt)
        return BATON_E_PROTO;
    if (n > BATON_AEAD_MAX_BYTES - m->ct_bytes)
        return BATON_E_LIMIT;
    while (n > 0) {
        size_t k = n < (1u << 20) ? n : (1u << 20);
        int out_len = 0, rc = 0;
        if (decrypt)
            rc = poly_update(m, in, k);
        if (rc == 0 && (EVP_EncryptUpdate(m->stream, out, &out_len, in, (int)k) != 1 ||
                        (size_t)out_len != k))
            rc = BATON_E_IO;
        if (rc == 0 && !decrypt)
            rc = poly_update(m, out, k);
        if (rc != 0)
            return rc;
        m->ct_bytes += k;
        out += k;
        in += k;
        n -= k;
    }
    return 0;
}

int baton_aead_encrypt(struct baton_mac *m, void *out, const void *in, size_t n)
{
    return aead_crypt(m, out, in, n, 0);
}

int baton_aead_decrypt(struct baton_mac *m, void *out, const void *in, size_t n)
{
    return aead_crypt(m, out, in, n, 1);
}
