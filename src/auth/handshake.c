/* The handshake (auth.h; DESIGN.md "Security model"): key derivation from
 * the role key and the transcript, the two proofs, the session keys. */
#include "auth/auth.h"

#include <string.h>

#include "baton/status.h"

enum hs_state {
    HS_TRANSCRIPT = 0, /* collecting the two HELLO frames */
    HS_SEALED,         /* secrets derived, no proof yet */
    HS_INIT_SENT,      /* initiator made MAC_i */
    HS_INIT_OK,        /* responder verified MAC_i */
    HS_RESP_OK,        /* initiator verified MAC_r */
    HS_FAILED,
};

#define HS_LABEL_BYTES 12
static const char label_keys[HS_LABEL_BYTES + 1] = "baton/1 keys";
static const char label_init[HS_LABEL_BYTES + 1] = "baton/1 init";
static const char label_resp[HS_LABEL_BYTES + 1] = "baton/1 resp";
static const char kdf_context[crypto_kdf_CONTEXTBYTES + 1] = "batonhs1";

enum { KDF_ID_AUTH = 1, KDF_ID_I2R = 2, KDF_ID_R2I = 3 };

void baton_hs_nonce(uint8_t out[BATON_NONCE_BYTES])
{
    randombytes_buf(out, BATON_NONCE_BYTES);
}

int baton_hs_init(struct baton_hs *hs, unsigned role, const uint8_t key[BATON_KEY_BYTES])
{
    if (hs == NULL || key == NULL)
        return BATON_E_INVAL;
    sodium_memzero(hs, sizeof *hs);
    if (role != BATON_AUTH_ROLE_CLIENT && role != BATON_AUTH_ROLE_PEER)
        return BATON_E_INVAL;
    memcpy(hs->key, key, BATON_KEY_BYTES);
    hs->role = (uint8_t)role;
    hs->state = HS_TRANSCRIPT;
    return 0;
}

int baton_hs_transcript_add(struct baton_hs *hs, const void *bytes, size_t len)
{
    if (hs->state == HS_FAILED)
        return BATON_E_AUTH;
    if (hs->state != HS_TRANSCRIPT || hs->n_parts >= 2)
        return BATON_E_PROTO;
    if (len > sizeof hs->transcript - hs->transcript_len)
        return BATON_E_LIMIT;
    memcpy(hs->transcript + hs->transcript_len, bytes, len);
    hs->transcript_len += len;
    hs->n_parts++;
    return 0;
}

/* Derives PRK, K_auth and both direction keys from the role key and T, then
 * wipes the role key: from here on only derived secrets remain. */
static int seal(struct baton_hs *hs)
{
    crypto_generichash_state st;
    uint8_t prk[crypto_kdf_KEYBYTES];
    if (hs->state == HS_FAILED)
        return BATON_E_AUTH;
    if (hs->state != HS_TRANSCRIPT)
        return 0;
    if (hs->n_parts != 2)
        return BATON_E_PROTO;
    crypto_generichash_init(&st, hs->key, BATON_KEY_BYTES, sizeof prk);
    crypto_generichash_update(&st, (const uint8_t *)label_keys, HS_LABEL_BYTES);
    crypto_generichash_update(&st, &hs->role, 1);
    crypto_generichash_update(&st, hs->transcript, hs->transcript_len);
    crypto_generichash_final(&st, prk, sizeof prk);
    crypto_kdf_derive_from_key(hs->k_auth, sizeof hs->k_auth, KDF_ID_AUTH, kdf_context, prk);
    crypto_kdf_derive_from_key(hs->k_i2r, sizeof hs->k_i2r, KDF_ID_I2R, kdf_context, prk);
    crypto_kdf_derive_from_key(hs->k_r2i, sizeof hs->k_r2i, KDF_ID_R2I, kdf_context, prk);
    sodium_memzero(prk, sizeof prk);
    sodium_memzero(&st, sizeof st);
    sodium_memzero(hs->key, sizeof hs->key);
    hs->state = HS_SEALED;
    return 0;
}

/* out = BLAKE2b-256(key = K_auth, label || T [|| extra]). */
static void proof(const struct baton_hs *hs, const char *label, const uint8_t *extra,
                  size_t extra_len, uint8_t out[BATON_PROOF_BYTES])
{
    crypto_generichash_state st;
    crypto_generichash_init(&st, hs->k_auth, sizeof hs->k_auth, BATON_PROOF_BYTES);
    crypto_generichash_update(&st, (const uint8_t *)label, HS_LABEL_BYTES);
    crypto_generichash_update(&st, hs->transcript, hs->transcript_len);
    if (extra_len > 0)
        crypto_generichash_update(&st, extra, extra_len);
    crypto_generichash_final(&st, out, BATON_PROOF_BYTES);
    sodium_memzero(&st, sizeof st);
}

int baton_hs_initiator_proof(struct baton_hs *hs, uint8_t out[BATON_PROOF_BYTES])
{
    int rc = seal(hs);
    if (rc != 0)
        return rc;
    if (hs->state != HS_SEALED && hs->state != HS_INIT_SENT)
        return BATON_E_PROTO;
    proof(hs, label_init, NULL, 0, hs->mac_i);
    memcpy(out, hs->mac_i, BATON_PROOF_BYTES);
    hs->state = HS_INIT_SENT;
    return 0;
}

int baton_hs_verify_initiator(struct baton_hs *hs, const uint8_t mac[BATON_PROOF_BYTES])
{
    uint8_t want[BATON_PROOF_BYTES];
    int rc = seal(hs);
    if (rc != 0)
        return rc;
    if (hs->state != HS_SEALED)
        return BATON_E_PROTO;
    proof(hs, label_init, NULL, 0, want);
    if (crypto_verify_32(want, mac) != 0) {
        sodium_memzero(want, sizeof want);
        baton_hs_destroy(hs);
        hs->state = HS_FAILED;
        return BATON_E_AUTH;
    }
    memcpy(hs->mac_i, want, sizeof want);
    sodium_memzero(want, sizeof want);
    hs->state = HS_INIT_OK;
    return 0;
}

int baton_hs_responder_proof(struct baton_hs *hs, uint8_t out[BATON_PROOF_BYTES])
{
    if (hs->state == HS_FAILED)
        return BATON_E_AUTH;
    if (hs->state != HS_INIT_OK)
        return BATON_E_PROTO;
    proof(hs, label_resp, hs->mac_i, sizeof hs->mac_i, out);
    return 0;
}

int baton_hs_verify_responder(struct baton_hs *hs, const uint8_t mac[BATON_PROOF_BYTES])
{
    uint8_t want[BATON_PROOF_BYTES];
    if (hs->state == HS_FAILED)
        return BATON_E_AUTH;
    if (hs->state != HS_INIT_SENT)
        return BATON_E_PROTO;
    proof(hs, label_resp, hs->mac_i, sizeof hs->mac_i, want);
    int ok = crypto_verify_32(want, mac) == 0;
    sodium_memzero(want, sizeof want);
    if (!ok) {
        baton_hs_destroy(hs);
        hs->state = HS_FAILED;
        return BATON_E_AUTH;
    }
    hs->state = HS_RESP_OK;
    return 0;
}

int baton_hs_session_keys(struct baton_hs *hs, struct baton_frame_key *send,
                          struct baton_frame_key *recv)
{
    const uint8_t *s, *r;
    if (hs->state == HS_FAILED)
        return BATON_E_AUTH;
    if (hs->state == HS_RESP_OK) {
        s = hs->k_i2r;
        r = hs->k_r2i;
    } else if (hs->state == HS_INIT_OK) {
        s = hs->k_r2i;
        r = hs->k_i2r;
    } else {
        return BATON_E_PROTO;
    }
    memcpy(send->key, s, BATON_KEY_BYTES);
    send->next_counter = 0;
    memcpy(recv->key, r, BATON_KEY_BYTES);
    recv->next_counter = 0;
    return 0;
}

void baton_hs_destroy(struct baton_hs *hs)
{
    if (hs == NULL)
        return;
    sodium_memzero(hs, sizeof *hs);
    hs->state = HS_FAILED;
}
