/* Sending one authenticated frame; shared by libbaton and batond's
 * dispatcher (which links libbaton for its peer links). */
#ifndef BATON_CLIENT_FRAME_SEND_H
#define BATON_CLIENT_FRAME_SEND_H

#include <stdint.h>

#include "auth/auth.h"
#include "net/transport.h"

/* Payload pieces are MAC'd or encrypted and sent in pieces of this size, each
 * right after it is processed, while it is still in cache (an encrypted piece
 * at once, as its buffer is reused; a MAC'd one with the pieces after it
 * until they hold this many bytes, so a small frame goes in one send). */
#define BATON_SEND_PIECE_BYTES (1u << 20)

/* Sends the 24-byte header hdr, payload pieces p1 (n1 bytes) and p2 (n2
 * bytes), then the 16-byte tag of the next frame of key's direction
 * (src/auth/auth.h: ChaCha20-Poly1305, counter from baton_frame_key_next).
 * With encrypt, payload pieces are encrypted into *enc_buf (allocated on
 * first use, BATON_SEND_PIECE_BYTES, owned by the caller, who frees it): the
 * caller's data is never modified, so a tensor buffer is never encrypted in
 * place. All sends share the absolute deadline (CLOCK_MONOTONIC ns).
 * Returns 0, the transport's error, BATON_E_NOMEM, or the auth library's
 * error (BATON_E_LIMIT when the counter is exhausted). */
int baton_send_tagged_frame(struct baton_transport *t, struct baton_frame_key *key, int encrypt,
                            uint8_t **enc_buf, const uint8_t *hdr, const void *p1, uint64_t n1,
                            const void *p2, uint64_t n2, uint64_t deadline);

#endif
