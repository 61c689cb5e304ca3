/* Fuzz target wire_header: frame header decoding (baton_wire_decode_header)
 * and the proven primitives under it (get_u8..u64, check_range, mul_u64).
 *
 * Input: any bytes. The header decoder runs at cursor 0, at every other
 * cursor position up to the end (and one past it), and over the input as a
 * stream of frames. Properties checked against oracles written here from
 * docs/PROTOCOL.md and wire.h, not from src/wire:
 *   - the result code is the first failing check, in the documented order
 *     TRUNCATED, MAGIC, CMD, INVAL (flags/reserved), LIMIT;
 *   - on success the cursor moved by exactly 24 and re-encoding the decoded
 *     header gives back the 24 input bytes; on failure the cursor is unchanged;
 *   - get_uN equals a little-endian load, or TRUNCATED without moving;
 *   - check_range(off, n, size) == 0 iff off + n <= size in exact arithmetic;
 *   - mul_u64 equals the 128-bit product or reports OVERFLOW.
 */
#include "fuzz_common.h"

#include "baton/status.h"
#include "wire/wire.h"

static int oracle_header(const uint8_t *b, size_t len, size_t pos, uint64_t max_len)
{
    if (pos > len || len - pos < 24)
        return BATON_E_TRUNCATED;
    b += pos;
    if (memcmp(b, "BATN", 4) != 0)
        return BATON_E_MAGIC;
    if (b[4] == 0 || b[4] >= BATON_CMD_LIMIT)
        return BATON_E_CMD;
    if (b[5] != 0 || fuzz_le(b + 12, 4) != 0)
        return BATON_E_INVAL;
    if (fuzz_le(b + 16, 8) > max_len)
        return BATON_E_LIMIT;
    return 0;
}

static void check_header_at(const uint8_t *buf, size_t size, size_t at, uint64_t max_len)
{
    struct baton_frame_header h;
    size_t pos = at;
    memset(&h, 0xA5, sizeof h);
    int rc = baton_wire_decode_header(buf, size, &pos, max_len, &h);
    int want = oracle_header(buf, size, at, max_len);
    FUZZ_CHECK(rc == want, "decode_header at %zu gave %d, oracle %d", at, rc, want);
    if (rc != 0) {
        FUZZ_CHECK(pos == at, "cursor moved on failure");
        return;
    }
    FUZZ_CHECK(pos == at + 24, "cursor did not advance by 24");
    FUZZ_CHECK(h.len <= max_len, "len above max_len");
    FUZZ_CHECK(h.cmd == buf[at + 4] && h.flags == 0, "cmd/flags");
    FUZZ_CHECK(h.status == fuzz_le(buf + at + 6, 2) && h.seq == fuzz_le(buf + at + 8, 4) &&
                   h.len == fuzz_le(buf + at + 16, 8),
               "field values");
    uint8_t enc[BATON_FRAME_HEADER_BYTES];
    baton_wire_encode_header(enc, &h);
    FUZZ_CHECK(memcmp(enc, buf + at, sizeof enc) == 0, "encode(decode(x)) != x");
}

static void check_primitives(const uint8_t *buf, size_t size, size_t at)
{
    static const unsigned widths[] = {1, 2, 4, 8};
    for (unsigned w = 0; w < 4; w++) {
        unsigned n = widths[w];
        size_t pos = at;
        uint64_t v = 0xDEADBEEFu;
        int rc;
        if (n == 1) {
            uint8_t x = 0;
            rc = baton_wire_get_u8(buf, size, &pos, &x);
            v = x;
        } else if (n == 2) {
            uint16_t x = 0;
            rc = baton_wire_get_u16(buf, size, &pos, &x);
            v = x;
        } else if (n == 4) {
            uint32_t x = 0;
            rc = baton_wire_get_u32(buf, size, &pos, &x);
            v = x;
        } else {
            rc = baton_wire_get_u64(buf, size, &pos, &v);
        }
        int fits = at <= size && size - at >= n;
        FUZZ_CHECK(fits ? rc == 0 : rc == BATON_E_TRUNCATED, "get_u%u at %zu: %d", 8 * n, at, rc);
        if (fits)
            FUZZ_CHECK(pos == at + n && v == fuzz_le(buf + at, n), "get_u%u value/cursor", 8 * n);
        else
            FUZZ_CHECK(pos == at, "get_u%u moved on failure", 8 * n);
    }
}

static void check_arith(const uint8_t *p)
{
    uint64_t a = fuzz_le(p, 8), b = fuzz_le(p + 8, 8), c = fuzz_le(p + 16, 8);
    unsigned __int128 sum = (unsigned __int128)a + b;
    int rc = baton_wire_check_range(a, b, c);
    FUZZ_CHECK((rc == 0) == (sum <= c), "check_range(%llu, %llu, %llu) = %d",
               (unsigned long long)a, (unsigned long long)b, (unsigned long long)c, rc);
    FUZZ_CHECK(rc == 0 || rc == BATON_E_BOUNDS, "check_range code %d", rc);

    /* small factors too, so that the non-overflowing side is reached */
    uint64_t fa[2] = {a, a >> (c & 63)}, fb[2] = {b, b >> ((c >> 8) & 63)};
    for (int i = 0; i < 2; i++) {
        unsigned __int128 prod = (unsigned __int128)fa[i] * fb[i];
        uint64_t out = 12345;
        rc = baton_wire_mul_u64(fa[i], fb[i], &out);
        if (prod > UINT64_MAX)
            FUZZ_CHECK(rc == BATON_E_OVERFLOW, "mul_u64 missed an overflow");
        else
            FUZZ_CHECK(rc == 0 && out == (uint64_t)prod, "mul_u64 value");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = fuzz_dup(data, size);
    static const uint64_t maxes[] = {0, 1, 1u << 20, BATON_MAX_MESSAGE_BYTES, UINT64_MAX};
    /* a max taken from the input too, so LIMIT is met at its edge */
    uint64_t max_in = size >= 8 ? fuzz_le(buf + size - 8, 8) : 0;

    for (size_t i = 0; i < sizeof maxes / sizeof maxes[0]; i++)
        check_header_at(buf, size, 0, maxes[i]);
    check_header_at(buf, size, 0, max_in);
    /* every cursor position, and one past the end */
    for (size_t at = 1; at <= size + 1 && at <= 4096; at++) {
        check_header_at(buf, size, at, BATON_MAX_MESSAGE_BYTES);
        check_primitives(buf, size, at);
    }
    check_primitives(buf, size, 0);
    check_primitives(buf, size, SIZE_MAX);

    /* as a stream: header, skip the payload that is there, next header */
    size_t pos = 0;
    for (int frames = 0; frames < 1024; frames++) {
        struct baton_frame_header h;
        size_t before = pos;
        if (baton_wire_decode_header(buf, size, &pos, max_in, &h) != 0) {
            FUZZ_CHECK(pos == before, "stream cursor moved on failure");
            break;
        }
        if (h.len > size - pos)
            break;
        pos += (size_t)h.len;
    }

    for (size_t at = 0; at + 24 <= size && at < 4096; at += 8)
        check_arith(buf + at);
    free(buf);
    return 0;
}
