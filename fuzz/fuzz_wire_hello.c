/* Fuzz target wire_hello: the handshake messages. HELLO payload decoding
 * (baton_wire_decode_hello) on its own and as the first frame of a
 * connection (header, then payload), as the server reads it.
 *
 * Properties (oracle from docs/PROTOCOL.md, "HELLO"):
 *   - TRUNCATED iff fewer than 48 bytes remain; INVAL iff a reserved byte is
 *     non-zero, version_min > version_max or role > 2; else 0;
 *   - on success the cursor moved by 48, every field equals its bytes, and
 *     encode(decode(x)) == x; on failure the cursor is unchanged.
 */
#include "fuzz_common.h"

#include "baton/status.h"
#include "wire/wire.h"

static int oracle_hello(const uint8_t *b, size_t len, size_t pos)
{
    if (pos > len || len - pos < BATON_HELLO_BYTES)
        return BATON_E_TRUNCATED;
    b += pos;
    if (b[5] || b[6] || b[7] || fuzz_le(b, 2) > fuzz_le(b + 2, 2) || b[4] > BATON_ROLE_PEER)
        return BATON_E_INVAL;
    return 0;
}

static void check_hello_at(const uint8_t *buf, size_t size, size_t at)
{
    struct baton_hello h;
    size_t pos = at;
    memset(&h, 0x5A, sizeof h);
    int rc = baton_wire_decode_hello(buf, size, &pos, &h);
    int want = oracle_hello(buf, size, at);
    FUZZ_CHECK(rc == want, "decode_hello at %zu gave %d, oracle %d", at, rc, want);
    if (rc != 0) {
        FUZZ_CHECK(pos == at, "cursor moved on failure");
        return;
    }
    FUZZ_CHECK(pos == at + BATON_HELLO_BYTES, "cursor did not advance by 48");
    FUZZ_CHECK(h.version_min == fuzz_le(buf + at, 2) && h.version_max == fuzz_le(buf + at + 2, 2) &&
                   h.role == buf[at + 4] && h.features == fuzz_le(buf + at + 8, 8) &&
                   memcmp(h.nonce, buf + at + 16, 32) == 0,
               "field values");
    uint8_t enc[BATON_HELLO_BYTES];
    baton_wire_encode_hello(enc, &h);
    FUZZ_CHECK(memcmp(enc, buf + at, sizeof enc) == 0, "encode(decode(x)) != x");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = fuzz_dup(data, size);
    for (size_t at = 0; at <= size + 1 && at <= 4096; at++)
        check_hello_at(buf, size, at);

    /* the first frame of a connection: header (any cmd), then its payload */
    struct baton_frame_header h;
    size_t pos = 0;
    if (baton_wire_decode_header(buf, size, &pos, BATON_MAX_MESSAGE_BYTES, &h) == 0 &&
        h.cmd == BATON_CMD_HELLO && h.len <= size - pos) {
        struct baton_hello hello;
        size_t end = pos + (size_t)h.len;
        size_t p2 = pos;
        int rc = baton_wire_decode_hello(buf, end, &p2, &hello);
        FUZZ_CHECK(rc == oracle_hello(buf, end, pos), "HELLO frame payload");
        /* the server also insists on the exact length */
        if (rc == 0)
            FUZZ_CHECK(p2 == pos + BATON_HELLO_BYTES, "HELLO cursor");
    }
    free(buf);
    return 0;
}
