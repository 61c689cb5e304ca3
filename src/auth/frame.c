/* Frame MACs and payload encryption (auth.h): an incremental form of the
 * ChaCha20-Poly1305 AEAD of RFC 8439 section 2.8, byte-identical to
 * libsodium's crypto_aead_chacha20poly1305_ietf for any chunking.
 *
 * RFC 8439 2.8: the Poly1305 one-time key is the first 32 bytes of ChaCha20
 * block 0; the payload is XORed with blocks 1, 2, ...; the tag is Poly1305
 * over AD || pad16(AD) || C || pad16(C) || LE64(|AD|) || LE64(|C|).
 * MAC mode is that AEAD with the whole frame as AD and no plaintext. */
#include "auth/auth.h"

#include <string.h>

#include "baton/status.h"

enum { PHASE_IDLE = 0, PHASE_AD, PHASE_CT };

static const uint8_t zeros[64];

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

/* Poly1305 key from block 0, then the AD phase. */
static void start(struct baton_mac *m, const uint8_t key[BATON_KEY_BYTES], const uint8_t nonce[12],
                  int encrypt)
{
    uint8_t poly_key[crypto_onetimeauth_poly1305_KEYBYTES];
    sodium_memzero(m, sizeof *m);
    crypto_stream_chacha20_ietf(poly_key, sizeof poly_key, nonce, key);
    crypto_onetimeauth_poly1305_init(&m->poly, poly_key);
    sodium_memzero(poly_key, sizeof poly_key);
    memcpy(m->nonce, nonce, sizeof m->nonce);
    if (encrypt)
        memcpy(m->key, key, BATON_KEY_BYTES);
    m->block = 1;
    m->encrypt = (uint8_t)encrypt;
    m->phase = PHASE_AD;
}

static void pad16(struct baton_mac *m, uint64_t n)
{
    unsigned r = (unsigned)(n % 16);
    if (r != 0)
        crypto_onetimeauth_poly1305_update(&m->poly, zeros, 16 - r);
}

int baton_mac_begin(struct baton_mac *m, const struct baton_frame_key *k, uint64_t counter)
{
    uint8_t nonce[12];
    if (counter == UINT64_MAX)
        return BATON_E_LIMIT;
    frame_nonce(nonce, counter);
    start(m, k->key, nonce, 0);
    return 0;
}

int baton_mac_update(struct baton_mac *m, const void *p, size_t n)
{
    if (m->phase != PHASE_AD || m->encrypt)
        return BATON_E_PROTO;
    crypto_onetimeauth_poly1305_update(&m->poly, p, n);
    m->ad_bytes += n;
    return 0;
}

/* Computes the tag (closing the AD and ciphertext sections) and wipes m. */
static int finish(struct baton_mac *m, uint8_t tag[BATON_TAG_BYTES])
{
    uint8_t lens[16];
    if (m->phase == PHASE_IDLE)
        return BATON_E_PROTO;
    if (m->phase == PHASE_AD)
        pad16(m, m->ad_bytes);
    pad16(m, m->ct_bytes);
    put_le64(lens, m->ad_bytes);
    put_le64(lens + 8, m->ct_bytes);
    crypto_onetimeauth_poly1305_update(&m->poly, lens, sizeof lens);
    crypto_onetimeauth_poly1305_final(&m->poly, tag);
    sodium_memzero(m, sizeof *m);
    return 0;
}

int baton_mac_final_tag(struct baton_mac *m, uint8_t tag[BATON_TAG_BYTES])
{
    return finish(m, tag);
}

int baton_mac_final_verify(struct baton_mac *m, const uint8_t tag[BATON_TAG_BYTES])
{
    uint8_t want[BATON_TAG_BYTES];
    int rc = finish(m, want);
    if (rc != 0)
        return rc;
    rc = crypto_verify_16(want, tag) == 0 ? 0 : BATON_E_AUTH;
    sodium_memzero(want, sizeof want);
    return rc;
}

void baton_mac_abort(struct baton_mac *m)
{
    if (m != NULL)
        sodium_memzero(m, sizeof *m);
}

void baton_aead_begin_nonce(struct baton_mac *m, const uint8_t key[BATON_KEY_BYTES],
                            const uint8_t nonce[12], const void *ad, size_t ad_len)
{
    start(m, key, nonce, 1);
    crypto_onetimeauth_poly1305_update(&m->poly, ad, ad_len);
    m->ad_bytes = ad_len;
    pad16(m, m->ad_bytes);
    m->phase = PHASE_CT;
}

int baton_aead_begin(struct baton_mac *m, const struct baton_frame_key *k, uint64_t counter,
                     const void *header, size_t header_len)
{
    uint8_t nonce[12];
    if (counter == UINT64_MAX)
        return BATON_E_LIMIT;
    frame_nonce(nonce, counter);
    baton_aead_begin_nonce(m, k->key, nonce, header, header_len);
    return 0;
}

/* XORs n bytes of keystream into out[i] = in[i] ^ ks, continuing where the
 * last call stopped. Whole blocks go straight through
 * crypto_stream_chacha20_ietf_xor_ic; a partial block is kept in m->ks. */
static void xor_stream(struct baton_mac *m, uint8_t *out, const uint8_t *in, size_t n)
{
    while (n > 0) {
        if (m->ks_left > 0) {
            size_t take = n < m->ks_left ? n : m->ks_left;
            const uint8_t *ks = m->ks + (64 - m->ks_left);
            for (size_t i = 0; i < take; i++)
                out[i] = in[i] ^ ks[i];
            m->ks_left -= (uint32_t)take;
            out += take;
            in += take;
            n -= take;
        } else if (n >= 64) {
            /* at most 2^20 blocks per call keeps the u32 counter arithmetic
             * plain; the total was bounded by the caller */
            size_t blocks = n / 64;
            if (blocks > (1u << 20))
                blocks = 1u << 20;
            size_t bytes = blocks * 64;
            crypto_stream_chacha20_ietf_xor_ic(out, in, bytes, m->nonce, m->block, m->key);
            m->block += (uint32_t)blocks;
            out += bytes;
            in += bytes;
            n -= bytes;
        } else {
            crypto_stream_chacha20_ietf_xor_ic(m->ks, zeros, 64, m->nonce, m->block, m->key);
            m->block++;
            m->ks_left = 64;
        }
    }
}

/* Splits [in, in+n) into pieces of at most 1 MiB so that decryption can MAC
 * each piece before it is overwritten when out == in. */
static int aead_crypt(struct baton_mac *m, uint8_t *out, const uint8_t *in, size_t n,
                      int decrypt)
{
    if (m->phase != PHASE_CT || !m->encrypt)
        return BATON_E_PROTO;
    if (n > BATON_AEAD_MAX_BYTES - m->ct_bytes)
        return BATON_E_LIMIT;
    while (n > 0) {
        size_t k = n < (1u << 20) ? n : (1u << 20);
        if (decrypt)
            crypto_onetimeauth_poly1305_update(&m->poly, in, k);
        xor_stream(m, out, in, k);
        if (!decrypt)
            crypto_onetimeauth_poly1305_update(&m->poly, out, k);
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
