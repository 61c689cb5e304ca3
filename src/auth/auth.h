/* Authentication: key files, the handshake, session keys and frame MACs.
 *
 * Pure library over libsodium (and OpenSSL's libcrypto for the frames' bulk
 * Poly1305 and ChaCha20, see frame.c): no sockets, no protocol state machine. The
 * server and the client call it from their own frame paths (see "Wiring"
 * below and DESIGN.md, "Security model").
 *
 * Where secrets live
 *   - Long-lived keys (key files) are held in struct baton_key: libsodium
 *     guarded memory (sodium_malloc: guard pages, canary, mlock attempted,
 *     excluded from core dumps), read-only once loaded, wiped by sodium_free.
 *   - Per-connection secrets (struct baton_hs, struct baton_frame_key,
 *     struct baton_mac) live in the caller's connection object, in ordinary
 *     memory; every function here that is done with a secret wipes it with
 *     sodium_memzero, and baton_hs_destroy / baton_frame_key_wipe /
 *     baton_mac_abort wipe what remains. Intermediate values on the stack are
 *     wiped before return.
 *   - baton_key_load writes the raw key into the caller's buffer: the caller
 *     owns that memory and wipes it.
 *
 * Constructions (libsodium primitives, the frames' bulk in libcrypto; byte
 * layouts fixed here)
 *   Handshake, with K the 32-byte key of the role and T the exact bytes of
 *   both HELLO frames (initiator's, then responder's, headers included):
 *     PRK    = BLAKE2b-256(key = K, "baton/1 keys" || role || T)
 *     K_auth = crypto_kdf_derive_from_key(32, id 1, "batonhs1", PRK)
 *     K_i2r  = crypto_kdf_derive_from_key(32, id 2, "batonhs1", PRK)
 *     K_r2i  = crypto_kdf_derive_from_key(32, id 3, "batonhs1", PRK)
 *     MAC_i  = BLAKE2b-256(key = K_auth, "baton/1 init" || T)
 *     MAC_r  = BLAKE2b-256(key = K_auth, "baton/1 resp" || T || MAC_i)
 *   role is one byte (1 client, 2 peer: the wire's enum baton_role values).
 *   The labels are 12 bytes each and differ, so a proof is never valid in
 *   the other direction (reflection). The raw key only ever keys PRK.
 *
 *   Frames: ChaCha20-Poly1305 as in RFC 8439 section 2.8 (what libsodium
 *   calls crypto_aead_chacha20poly1305_ietf), key = the direction's session
 *   key, nonce = 4 zero bytes || LE64(counter). The counter is per direction,
 *   starts at 0 and is never reused (BATON_E_LIMIT at 2^64 - 1).
 *     MAC mode:     AEAD with AD = header || payload and an empty plaintext.
 *     encrypt mode: AEAD with AD = header and plaintext = payload.
 *   Both give a 16-byte tag, so the frame layout is the same in both modes.
 *   The computation is incremental (any chunking gives the same tag),
 *   runs its bulk in libcrypto (the one-time key in libsodium), and is
 *   byte-identical to libsodium's one-shot
 *   crypto_aead_chacha20poly1305_ietf_encrypt_detached, which the tests use
 *   as the reference.
 *
 * Wiring (what the frame paths do; the integrating phase owns the details)
 *   Handshake, initiator (client or peer link):
 *     baton_hs_init(&hs, role, key); build HELLO with a baton_hs_nonce;
 *     send it; transcript_add(its 72 frame bytes); receive the reply HELLO;
 *     transcript_add(its 72 bytes); refuse (BATON_E_AUTH) when the reply
 *     lacks the AUTH feature while we hold a key; initiator_proof -> send
 *     AUTH (payload 32 bytes); receive the AUTH reply (payload exactly 32
 *     bytes, status 0) -> verify_responder; session_keys(&send, &recv);
 *     baton_hs_destroy.
 *   Handshake, responder (batond): receive HELLO, decode, pick the key by its
 *     role (client -> client key, peer -> peer key; none held -> refuse);
 *     baton_hs_init; transcript_add(request frame bytes); build the reply
 *     HELLO (fresh nonce, AUTH feature bit); transcript_add(reply frame
 *     bytes); send it. Receive AUTH (len exactly 32) -> verify_initiator;
 *     on failure send no proof, close. On success responder_proof -> AUTH
 *     reply, session_keys, destroy, state READY.
 *     The AUTH frames themselves carry no frame tag (counters start with the
 *     first frame after the AUTH reply); their payloads are the proofs.
 *   Every frame after AUTH, both directions:
 *     [24-byte header][len payload bytes][16-byte tag]; len counts the
 *     payload only, the tag always follows.
 *     Send:    baton_frame_key_next(&send, &ctr); baton_mac_begin(&m, &send,
 *              ctr); baton_mac_update over the header, then every payload
 *              piece (in 1 MiB pieces interleaved with the sends, so data is
 *              still in cache); baton_mac_final_tag; send the tag last.
 *     Receive: baton_frame_key_next(&recv, &ctr); begin; update with the
 *              24 header bytes as received; update with each payload chunk
 *              as it arrives (also the chunks an error path discards); read
 *              16 bytes; baton_mac_final_verify. On failure close the
 *              connection at once (BATON_E_AUTH); no reply.
 *     A request acts only after its tag verified; the one exception is
 *     received data written straight into its validated destination
 *     (SET_TENSOR, PEER_WRITE), which is verified after it lands: on a bad
 *     tag the connection and its session end (see SECURITY.md).
 *   Encrypt mode: baton_aead_begin(&m, &key, ctr, header, 24) instead of
 *     begin + update(header); payload via baton_aead_encrypt (sender, into a
 *     scratch buffer: never encrypt a tensor buffer in place) or
 *     baton_aead_decrypt (receiver, in place in the destination).
 *
 * Call baton_auth_init() once, before threads start and before seccomp is
 * installed (libsodium picks its random source and CPU paths there).
 */
#ifndef BATON_AUTH_H
#define BATON_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include <sodium.h>

#define BATON_KEY_BYTES 32u
#define BATON_NONCE_BYTES 32u     /* HELLO nonce */
#define BATON_PROOF_BYTES 32u     /* AUTH payload: MAC_i or MAC_r */
#define BATON_TAG_BYTES 16u       /* frame tag after every frame's payload */
#define BATON_HS_TRANSCRIPT_MAX 256u

/* Roles, equal to the wire's enum baton_role values (src/wire/wire.h). */
#define BATON_AUTH_ROLE_CLIENT 1u
#define BATON_AUTH_ROLE_PEER 2u

/* Largest payload one encrypted frame can carry: the ChaCha20 IETF block
 * counter is 32 bits and block 0 makes the Poly1305 key (RFC 8439 2.8). */
#define BATON_AEAD_MAX_BYTES (64ull * 0xffffffffull)

/* Initialises libsodium (sodium_init) and loads libcrypto's frame
 * algorithms (baton_frame_crypto_init). Idempotent, thread-safe after the
 * first call. Returns 0 or BATON_E_IO when no random source is usable or
 * libcrypto lacks Poly1305 / ChaCha20. */
int baton_auth_init(void);

/* ---- key files ---- */

/* Creates path with 32 random bytes (randombytes_buf) and mode 0600, opened
 * O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC, then fsync'd. Never
 * overwrites: an existing file or symlink gives BATON_E_INVAL with "exists".
 * A failed write or fsync removes the file. Errors: BATON_E_INVAL (exists),
 * BATON_E_IO (anything else). err (may be NULL) gets a one-line message
 * naming the file and the reason. */
int baton_key_generate_file(const char *path, char *err, size_t err_len);

/* Reads a key file into key[32]. The file is opened with
 * O_RDONLY|O_NOFOLLOW|O_CLOEXEC|O_NONBLOCK (a FIFO cannot block) and refused,
 * in this order, when:
 *   - it is missing (BATON_E_NOT_FOUND) or cannot be opened (BATON_E_IO);
 *   - it is a symbolic link (BATON_E_AUTH; only the last path component is
 *     checked);
 *   - it is not a regular file (BATON_E_AUTH);
 *   - it is not owned by the effective uid (BATON_E_AUTH);
 *   - its mode has any group or other bit, mode & 077 != 0 (BATON_E_AUTH);
 *   - its size is not exactly 32 bytes (BATON_E_FORMAT). A key file is raw
 *     bytes: a trailing newline makes it 33 bytes and it is refused.
 * key is written only on success; the caller owns and wipes it. err (may be
 * NULL) gets one line naming the file and the reason. */
int baton_key_load(const char *path, uint8_t key[BATON_KEY_BYTES], char *err, size_t err_len);

/* What baton_key_load learns about an opened key file (fstat), for
 * baton_key_check_file. */
struct baton_key_file_info {
    int is_regular;   /* S_ISREG(st_mode) */
    uint32_t uid;     /* st_uid */
    uint32_t euid;    /* geteuid() of the loading process */
    uint32_t mode;    /* st_mode & 07777 */
    int64_t size;     /* st_size */
};

/* The rules of baton_key_load (credential 0) or baton_key_open_credential
 * (credential 1) on an opened file, in their order: not a regular file,
 * owner, mode, size (each error as baton_key_load's; path only names the
 * file in err). Returns 0 or that error. Pure: no I/O. */
int baton_key_check_file(const char *path, const struct baton_key_file_info *info,
                         int credential, char *err, size_t err_len);

/* The key file format: data[0..n) is a key exactly when n is 32 (raw bytes,
 * no encoding, no trailing newline) and those bytes are not weak
 * (baton_key_is_weak); then copies it to key and returns 0, else
 * BATON_E_FORMAT, key untouched, err naming path and the rule (n where the
 * size is wrong). Pure: the parsing half of baton_key_load, fuzzed by
 * fuzz/fuzz_keyfile.c. */
int baton_key_parse(const char *path, const uint8_t *data, size_t n,
                    uint8_t key[BATON_KEY_BYTES], char *err, size_t err_len);

/* 1 when the 32 bytes cannot be a random key: one byte repeated (32 zero
 * bytes) or all text, printable ASCII 0x20..0x7e with TAB, LF and CR (a
 * passphrase written to the file, its newline too). A key from baton
 * keygen (32 random bytes) is text with a chance of (98/256)^32, about
 * 5e-14; keygen draws again then. */
int baton_key_is_weak(const uint8_t key[BATON_KEY_BYTES]);

/* A loaded key in libsodium guarded memory, read-only. */
struct baton_key;

/* baton_key_load into a fresh struct baton_key (sodium_malloc, then
 * sodium_mprotect_readonly). Same errors, plus BATON_E_NOMEM. *out is owned
 * by the caller: baton_key_free. Safe to share between threads (read-only). */
int baton_key_open(const char *path, struct baton_key **out, char *err, size_t err_len);

/* baton_key_open for a systemd credential, a key file that the service
 * manager copied (LoadCredential=) into $CREDENTIALS_DIRECTORY: a read-only
 * directory that only the service's user (and root) can enter. systemd
 * makes the file that user's, mode 0400, or root's with an ACL granting
 * that user read, which shows as mode 0440 (the ACL mask). So the owner may
 * be the effective uid or root, and the mode may hold owner and group read
 * only: any write or execute bit or other access gives BATON_E_AUTH (the
 * other rules and errors are baton_key_open's). systemd.exec(5),
 * "Credentials". */
int baton_key_open_credential(const char *path, struct baton_key **out, char *err,
                              size_t err_len);

/* The 32 key bytes (read-only, valid until baton_key_free). */
const uint8_t *baton_key_bytes(const struct baton_key *k);

/* Wipes and releases (sodium_free). NULL-safe. */
void baton_key_free(struct baton_key *k);

/* ---- handshake ---- */

struct baton_frame_key {
    uint8_t key[BATON_KEY_BYTES];
    uint64_t next_counter; /* counter of the next frame in this direction */
};

/* Handshake state; lives in the connection object. Fields are private. */
struct baton_hs {
    uint8_t key[BATON_KEY_BYTES]; /* the role's key, wiped once PRK is made */
    uint8_t k_auth[BATON_KEY_BYTES];
    uint8_t k_i2r[BATON_KEY_BYTES];
    uint8_t k_r2i[BATON_KEY_BYTES];
    uint8_t mac_i[BATON_PROOF_BYTES];
    uint8_t transcript[BATON_HS_TRANSCRIPT_MAX];
    size_t transcript_len;
    unsigned n_parts;
    uint8_t role;
    uint8_t state;
};

/* Fills out[32] with a fresh random HELLO nonce (randombytes_buf). */
void baton_hs_nonce(uint8_t out[BATON_NONCE_BYTES]);

/* Starts a handshake for role (BATON_AUTH_ROLE_CLIENT or _PEER: the role in
 * the initiator's HELLO) with that role's key (copied; the copy is wiped as
 * soon as the session secrets are derived). The same call on both sides.
 * Returns 0 or BATON_E_INVAL (bad role, NULL). */
int baton_hs_init(struct baton_hs *hs, unsigned role, const uint8_t key[BATON_KEY_BYTES]);

/* Appends one HELLO frame's exact bytes (header and payload) to the
 * transcript T. Call exactly twice, initiator's frame first. Returns 0,
 * BATON_E_PROTO (a third part, or after a proof was made),
 * BATON_E_LIMIT (T would exceed BATON_HS_TRANSCRIPT_MAX). */
int baton_hs_transcript_add(struct baton_hs *hs, const void *bytes, size_t len);

/* Initiator: out = MAC_i. Requires both transcript parts (BATON_E_PROTO). */
int baton_hs_initiator_proof(struct baton_hs *hs, uint8_t out[BATON_PROOF_BYTES]);

/* Responder: checks MAC_i in constant time. Returns 0 or BATON_E_AUTH on a
 * mismatch (the state is then failed: every later call gives BATON_E_AUTH),
 * BATON_E_PROTO out of order. */
int baton_hs_verify_initiator(struct baton_hs *hs, const uint8_t mac[BATON_PROOF_BYTES]);

/* Responder: out = MAC_r. Only after baton_hs_verify_initiator succeeded
 * (BATON_E_PROTO otherwise). */
int baton_hs_responder_proof(struct baton_hs *hs, uint8_t out[BATON_PROOF_BYTES]);

/* Initiator: checks MAC_r (constant time) against the MAC_i it sent.
 * Returns 0, BATON_E_AUTH (then failed), BATON_E_PROTO out of order. */
int baton_hs_verify_responder(struct baton_hs *hs, const uint8_t mac[BATON_PROOF_BYTES]);

/* The per-direction frame keys, counters at 0: send = this side's outgoing
 * direction, recv = incoming (initiator: send K_i2r, recv K_r2i; responder
 * the reverse; the side is known from the calls made). Available to the
 * initiator after verify_responder, to the responder after
 * verify_initiator; BATON_E_PROTO before, BATON_E_AUTH after a failure. */
int baton_hs_session_keys(struct baton_hs *hs, struct baton_frame_key *send,
                          struct baton_frame_key *recv);

/* Wipes every secret in hs. NULL-safe; hs may be reused after init. */
void baton_hs_destroy(struct baton_hs *hs);

/* ---- frames ---- */

/* A MAC-mode frame of at most this many bytes (up to 32 more in fact: the
 * copy has room for the pad and lengths) is tagged in one call of
 * libsodium's Poly1305 at the end, from a copy in struct baton_mac, instead
 * of a libcrypto context made and freed for it (a few microseconds a frame:
 * most frames of a decode step are requests and replies under 200 bytes, and
 * a d768 hidden state is 3 KiB). Same tag either way. */
#define BATON_MAC_SMALL_BYTES 4096u

/* Per-frame MAC/AEAD state; lives on the stack or in the connection.
 * Fields are private. Idle when zeroed; a begin allocates two libcrypto
 * contexts (MAC mode: one, and only once the frame passes
 * BATON_MAC_SMALL_BYTES), which baton_mac_final_tag,
 * baton_mac_final_verify and baton_mac_abort free: every begun frame must
 * end in one of them, and a begin must start from an idle m. */
struct evp_mac_ctx_st;
struct evp_cipher_ctx_st;
struct baton_mac {
    struct evp_mac_ctx_st *poly;      /* Poly1305 over AD, C and the lengths */
    struct evp_cipher_ctx_st *stream; /* encrypt mode: ChaCha20 from block 1 */
    uint64_t ad_bytes;                /* bytes of associated data so far */
    uint64_t ct_bytes;                /* bytes of ciphertext so far */
    uint8_t phase;                    /* 0 idle, 1 AD, 2 ciphertext */
    uint8_t encrypt;
    uint8_t small;                    /* MAC mode, poly NULL: bytes kept in buf */
    uint32_t buf_len;                 /* bytes in buf (wiped at release) */
    uint8_t poly_key[32];             /* while small: the frame's Poly1305 key */
    uint8_t buf[BATON_MAC_SMALL_BYTES + 32]; /* while small: AD, then pad and lengths */
};

/* Loads libcrypto's Poly1305 and ChaCha20 (once; baton_auth_init calls it,
 * and a frame's begin does if nobody did). Reads no OpenSSL configuration
 * file. Returns 0 or BATON_E_IO when libcrypto lacks them. */
int baton_frame_crypto_init(void);

/* Takes the counter of the next frame in k's direction: *counter =
 * k->next_counter, then it is incremented. BATON_E_LIMIT once it reaches
 * 2^64 - 1 (never wraps; the connection must then end). */
int baton_frame_key_next(struct baton_frame_key *k, uint64_t *counter);

/* Wipes the key (NULL-safe). */
void baton_frame_key_wipe(struct baton_frame_key *k);

/* MAC mode: starts the tag of frame `counter` under k. Every byte passed to
 * baton_mac_update (header first, then the payload) is authenticated.
 * Returns 0, BATON_E_LIMIT (counter == 2^64 - 1) or BATON_E_IO (libcrypto
 * lacks its algorithms; m stays idle). */
int baton_mac_begin(struct baton_mac *m, const struct baton_frame_key *k, uint64_t counter);

/* Adds n bytes of the frame (any chunking). Returns 0, BATON_E_PROTO
 * when m is not in MAC mode's AD phase (not begun, or encrypt mode after
 * its header), or BATON_E_NOMEM / BATON_E_IO (libcrypto failed, once the
 * frame passes BATON_MAC_SMALL_BYTES). */
int baton_mac_update(struct baton_mac *m, const void *p, size_t n);

/* Writes the 16-byte tag and releases m (idle again). Returns 0,
 * BATON_E_PROTO (not begun), BATON_E_NOMEM or BATON_E_IO. Works for both
 * modes. */
int baton_mac_final_tag(struct baton_mac *m, uint8_t tag[BATON_TAG_BYTES]);

/* Compares the computed tag with tag in constant time and releases m.
 * Returns 0, BATON_E_AUTH (mismatch), BATON_E_PROTO (not begun) or
 * BATON_E_IO. */
int baton_mac_final_verify(struct baton_mac *m, const uint8_t tag[BATON_TAG_BYTES]);

/* Releases m without producing a tag (error paths; also fine on an idle
 * m). NULL-safe. */
void baton_mac_abort(struct baton_mac *m);

/* Encrypt mode: starts frame `counter` under k with the header as
 * associated data (copied into the MAC at once; header_len bytes).
 * Returns 0, BATON_E_LIMIT (counter == 2^64 - 1), BATON_E_NOMEM or
 * BATON_E_IO (m stays idle). */
int baton_aead_begin(struct baton_mac *m, const struct baton_frame_key *k, uint64_t counter,
                     const void *header, size_t header_len);

/* Same with an explicit 12-byte nonce (RFC 8439 test vectors; the frame path
 * uses baton_aead_begin). Returns 0, BATON_E_NOMEM or BATON_E_IO. */
int baton_aead_begin_nonce(struct baton_mac *m, const uint8_t key[BATON_KEY_BYTES],
                            const uint8_t nonce[12], const void *ad, size_t ad_len);

/* Encrypts n payload bytes from in to out (out == in, or no overlap), any
 * chunking; the MAC covers the ciphertext. Returns 0, BATON_E_PROTO (not in
 * encrypt mode), BATON_E_LIMIT (payload beyond BATON_AEAD_MAX_BYTES;
 * nothing written) or BATON_E_IO (libcrypto failed). */
int baton_aead_encrypt(struct baton_mac *m, void *out, const void *in, size_t n);

/* Decrypts n payload bytes (out == in, or no overlap): the ciphertext is
 * MAC'd, then decrypted. The plaintext is not authentic until
 * baton_mac_final_verify succeeds. Same errors as baton_aead_encrypt. */
int baton_aead_decrypt(struct baton_mac *m, void *out, const void *in, size_t n);

#endif
