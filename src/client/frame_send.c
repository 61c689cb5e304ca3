/* Shared tagged-frame sender (frame_send.h). */
#include "client/frame_send.h"

#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "baton/status.h"
#include "core/limits.h"

int baton_send_tagged_frame(struct baton_transport *t, struct baton_frame_key *key, int encrypt,
                            uint8_t **enc_buf, const uint8_t *hdr, const void *p1, uint64_t n1,
                            const void *p2, uint64_t n2, uint64_t deadline)
{
    const uint8_t *piece[2] = {p1, p2};
    uint64_t piece_n[2] = {n1, n2};
    struct baton_mac m;
    struct iovec iov[4]; /* header, a small p1, one piece, the tag (below) */
    uint8_t tag[BATON_TAG_BYTES];
    uint64_t ctr, queued = 0;
    int niov = 0, pending = 0, rc;

    memset(&m, 0, sizeof m);
    rc = baton_frame_key_next(key, &ctr);
    if (rc == 0 && encrypt && !*enc_buf && !(*enc_buf = malloc(BATON_SEND_PIECE_BYTES)))
        rc = BATON_E_NOMEM;
    if (rc == 0 && encrypt)
        rc = baton_aead_begin(&m, key, ctr, hdr, BATON_FRAME_HEADER_BYTES);
    else if (rc == 0)
        rc = baton_mac_begin(&m, key, ctr);
    if (rc == 0 && !encrypt)
        rc = baton_mac_update(&m, hdr, BATON_FRAME_HEADER_BYTES);
    if (rc != 0)
        goto out;
    iov[niov++] = (struct iovec){(void *)hdr, BATON_FRAME_HEADER_BYTES};
    for (int i = 0; i < 2; i++) {
        for (uint64_t off = 0; off < piece_n[i];) {
            uint64_t k = piece_n[i] - off < BATON_SEND_PIECE_BYTES ? piece_n[i] - off
                                                                  : BATON_SEND_PIECE_BYTES;
            const uint8_t *src = piece[i] + off;
            /* the previous pieces go out first when *enc_buf is reused, or
             * once they hold a whole piece; until then they wait, so a
             * small frame (a decode step's hand-off, a GRAPH_RUN) is one
             * send: one segment, one wake of the receiver */
            if (pending && (encrypt || queued >= BATON_SEND_PIECE_BYTES)) {
                rc = baton_transport_send_all(t, iov, niov, deadline);
                if (rc != 0)
                    goto out;
                niov = 0;
                pending = 0;
                queued = 0;
            }
            if (encrypt) {
                rc = baton_aead_encrypt(&m, *enc_buf, src, (size_t)k);
                src = *enc_buf;
            } else {
                rc = baton_mac_update(&m, src, (size_t)k);
            }
            if (rc != 0)
                goto out;
            iov[niov++] = (struct iovec){(void *)src, (size_t)k};
            pending = 1;
            queued += k;
            off += k;
        }
    }
    rc = baton_mac_final_tag(&m, tag);
    if (rc != 0)
        goto out;
    iov[niov++] = (struct iovec){tag, sizeof tag};
    rc = baton_transport_send_all(t, iov, niov, deadline);
out:
    baton_mac_abort(&m);
    return rc;
}

