/* Fuzz target wire_peer: the direct-path decoders of src/wire/peer.c —
 * GRANT_WRITE request, grant id, COPY_TENSOR_TO destination, PEER_WRITE
 * header, COPY_TENSOR_TO reply — and the two of src/wire/pipeline.c that
 * belong to the direct path — COPY_TENSOR_TO options (for each family) and
 * PEER_FENCE — at every cursor position, and a whole COPY_TENSOR_TO request
 * (tensor, offset, n, destination, options) as the server decodes it. The
 * GRAPH_RUN records of pipeline.c are target wire_run.
 *
 * Oracle, written here from docs/PROTOCOL.md "Direct path":
 *   - TRUNCATED iff fewer bytes than the record remain;
 *   - grant request (24): INVAL if length is 0, OVERFLOW if offset + length
 *     exceeds 2^64 - 1 (computed in 128 bits);
 *   - grant id (16): INVAL if all zero;
 *   - destination (48): INVAL unless byte 1 and bytes 4..7 are 0 and either
 *     family 0 with bytes 2..47 all 0, or family 4 / 6 with a non-zero port
 *     and grant id, and for family 4 address bytes 4..15 zero;
 *   - PEER_WRITE header (40): INVAL if the grant id is all zero, n is 0 or
 *     seq is 0;
 *   - copy options (16) for a destination of family f: INVAL if the
 *     reserved u32 is not 0 or flags > 1 (BATON_COPY_ASYNC only); family 0
 *     (a query): INVAL unless seq and flags are both 0; any other family:
 *     INVAL if seq is 0;
 *   - PEER_FENCE (32): INVAL if the grant id is all zero, seq is 0, status
 *     is 0 or above 65535, or the reserved u32 is not 0;
 *   - reply (48): INVAL if result >= 10, status > 65535 or the reserved u64
 *     is not 0.
 * On success: cursor + record size, every field equals its bytes, and
 * encode(decode(x)) == x; on failure the cursor is unchanged.
 */
#include "fuzz_common.h"

#include "baton/status.h"
#include "wire/wire.h"

typedef unsigned __int128 u128;

static int zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

static int room(size_t len, size_t pos, size_t n)
{
    return pos <= len && len - pos >= n;
}

static int oracle_grant_request(const uint8_t *b, size_t len, size_t pos)
{
    if (!room(len, pos, 24))
        return BATON_E_TRUNCATED;
    b += pos;
    if (fuzz_le(b + 16, 8) == 0)
        return BATON_E_INVAL;
    if ((u128)fuzz_le(b + 8, 8) + fuzz_le(b + 16, 8) > UINT64_MAX)
        return BATON_E_OVERFLOW;
    return 0;
}

static int oracle_grant_id(const uint8_t *b, size_t len, size_t pos)
{
    if (!room(len, pos, 16))
        return BATON_E_TRUNCATED;
    return zero(b + pos, 16) ? BATON_E_INVAL : 0;
}

static int oracle_dest(const uint8_t *b, size_t len, size_t pos)
{
    if (!room(len, pos, 48))
        return BATON_E_TRUNCATED;
    b += pos;
    if (b[1] || !zero(b + 4, 4))
        return BATON_E_INVAL;
    if (b[0] == 0)
        return zero(b + 2, 2) && zero(b + 8, 40) ? 0 : BATON_E_INVAL;
    if (b[0] != 4 && b[0] != 6)
        return BATON_E_INVAL;
    if (fuzz_le(b + 2, 2) == 0 || zero(b + 24, 16))
        return BATON_E_INVAL;
    if (b[0] == 4 && !zero(b + 12, 12))
        return BATON_E_INVAL;
    return 0;
}

static int oracle_peer_write(const uint8_t *b, size_t len, size_t pos)
{
    if (!room(len, pos, 40))
        return BATON_E_TRUNCATED;
    b += pos;
    return zero(b, 16) || fuzz_le(b + 24, 8) == 0 || fuzz_le(b + 32, 8) == 0 ? BATON_E_INVAL : 0;
}

static int oracle_options(const uint8_t *b, size_t len, size_t pos, uint8_t family)
{
    if (!room(len, pos, 16))
        return BATON_E_TRUNCATED;
    b += pos;
    uint64_t seq = fuzz_le(b, 8), flags = fuzz_le(b + 8, 4);
    if (fuzz_le(b + 12, 4) != 0 || flags > 1)
        return BATON_E_INVAL;
    if (family == 0)
        return seq == 0 && flags == 0 ? 0 : BATON_E_INVAL;
    return seq == 0 ? BATON_E_INVAL : 0;
}

static int oracle_peer_fence(const uint8_t *b, size_t len, size_t pos)
{
    if (!room(len, pos, 32))
        return BATON_E_TRUNCATED;
    b += pos;
    uint64_t status = fuzz_le(b + 24, 4);
    if (zero(b, 16) || fuzz_le(b + 16, 8) == 0 || status == 0 || status > 65535 ||
        fuzz_le(b + 28, 4) != 0)
        return BATON_E_INVAL;
    return 0;
}

static int oracle_result(const uint8_t *b, size_t len, size_t pos)
{
    if (!room(len, pos, 48))
        return BATON_E_TRUNCATED;
    b += pos;
    if (fuzz_le(b, 4) >= BATON_COPY_OUTCOME_LIMIT || fuzz_le(b + 4, 4) > 65535 ||
        fuzz_le(b + 40, 8) != 0)
        return BATON_E_INVAL;
    return 0;
}

static void check_at(const uint8_t *buf, size_t size, size_t at)
{
    size_t pos;
    int rc, want;

    {
        struct baton_grant_request g;
        uint8_t enc[24];
        pos = at;
        memset(&g, 0xA5, sizeof g);
        rc = baton_wire_decode_grant_request(buf, size, &pos, &g);
        want = oracle_grant_request(buf, size, at);
        FUZZ_CHECK(rc == want, "grant_request at %zu gave %d, oracle %d", at, rc, want);
        FUZZ_CHECK(pos == (rc == 0 ? at + 24 : at), "grant_request cursor");
        if (rc == 0) {
            FUZZ_CHECK(g.handle == fuzz_le(buf + at, 8) && g.offset == fuzz_le(buf + at + 8, 8) &&
                           g.length == fuzz_le(buf + at + 16, 8),
                       "grant_request fields");
            baton_wire_encode_grant_request(enc, &g);
            FUZZ_CHECK(memcmp(enc, buf + at, 24) == 0, "grant_request round trip");
        }
    }
    {
        uint8_t id[16];
        pos = at;
        memset(id, 0xA5, sizeof id);
        rc = baton_wire_decode_grant_id(buf, size, &pos, id);
        want = oracle_grant_id(buf, size, at);
        FUZZ_CHECK(rc == want, "grant_id at %zu gave %d, oracle %d", at, rc, want);
        FUZZ_CHECK(pos == (rc == 0 ? at + 16 : at), "grant_id cursor");
        if (rc == 0)
            FUZZ_CHECK(memcmp(id, buf + at, 16) == 0, "grant_id bytes");
    }
    {
        struct baton_peer_dest d;
        uint8_t enc[48];
        pos = at;
        memset(&d, 0xA5, sizeof d);
        rc = baton_wire_decode_peer_dest(buf, size, &pos, &d);
        want = oracle_dest(buf, size, at);
        FUZZ_CHECK(rc == want, "peer_dest at %zu gave %d, oracle %d", at, rc, want);
        FUZZ_CHECK(pos == (rc == 0 ? at + 48 : at), "peer_dest cursor");
        if (rc == 0) {
            FUZZ_CHECK(d.family == buf[at] && d.port == fuzz_le(buf + at + 2, 2) &&
                           memcmp(d.addr, buf + at + 8, 16) == 0 &&
                           memcmp(d.grant, buf + at + 24, 16) == 0 &&
                           d.grant_offset == fuzz_le(buf + at + 40, 8),
                       "peer_dest fields");
            baton_wire_encode_peer_dest(enc, &d);
            FUZZ_CHECK(memcmp(enc, buf + at, 48) == 0, "peer_dest round trip");
        }
    }
    {
        struct baton_peer_write_header w;
        uint8_t enc[40];
        pos = at;
        memset(&w, 0xA5, sizeof w);
        rc = baton_wire_decode_peer_write(buf, size, &pos, &w);
        want = oracle_peer_write(buf, size, at);
        FUZZ_CHECK(rc == want, "peer_write at %zu gave %d, oracle %d", at, rc, want);
        FUZZ_CHECK(pos == (rc == 0 ? at + 40 : at), "peer_write cursor");
        if (rc == 0) {
            FUZZ_CHECK(memcmp(w.grant, buf + at, 16) == 0 &&
                           w.offset == fuzz_le(buf + at + 16, 8) &&
                           w.n == fuzz_le(buf + at + 24, 8) && w.n != 0 &&
                           w.seq == fuzz_le(buf + at + 32, 8) && w.seq != 0,
                       "peer_write fields");
            baton_wire_encode_peer_write(enc, &w);
            FUZZ_CHECK(memcmp(enc, buf + at, 40) == 0, "peer_write round trip");
        }
    }
    /* the options after a destination of each family the decoder can see
     * (any non-zero family is a copy to it: the destination decoder has
     * already refused the others) */
    static const uint8_t families[] = {0, 4, 6, 1, 255};
    for (size_t f = 0; f < sizeof families; f++) {
        struct baton_copy_options o;
        uint8_t enc[16];
        pos = at;
        memset(&o, 0xA5, sizeof o);
        rc = baton_wire_decode_copy_options(buf, size, &pos, families[f], &o);
        want = oracle_options(buf, size, at, families[f]);
        FUZZ_CHECK(rc == want, "copy_options (family %u) at %zu gave %d, oracle %d", families[f],
                   at, rc, want);
        FUZZ_CHECK(pos == (rc == 0 ? at + 16 : at), "copy_options cursor");
        if (rc == 0) {
            FUZZ_CHECK(o.seq == fuzz_le(buf + at, 8) && o.flags == fuzz_le(buf + at + 8, 4),
                       "copy_options fields");
            baton_wire_encode_copy_options(enc, &o);
            FUZZ_CHECK(memcmp(enc, buf + at, 16) == 0, "copy_options round trip");
        }
    }
    {
        struct baton_peer_fence fc;
        uint8_t enc[32];
        pos = at;
        memset(&fc, 0xA5, sizeof fc);
        rc = baton_wire_decode_peer_fence(buf, size, &pos, &fc);
        want = oracle_peer_fence(buf, size, at);
        FUZZ_CHECK(rc == want, "peer_fence at %zu gave %d, oracle %d", at, rc, want);
        FUZZ_CHECK(pos == (rc == 0 ? at + 32 : at), "peer_fence cursor");
        if (rc == 0) {
            FUZZ_CHECK(memcmp(fc.grant, buf + at, 16) == 0 &&
                           fc.seq == fuzz_le(buf + at + 16, 8) &&
                           fc.status == fuzz_le(buf + at + 24, 4),
                       "peer_fence fields");
            baton_wire_encode_peer_fence(enc, &fc);
            FUZZ_CHECK(memcmp(enc, buf + at, 32) == 0, "peer_fence round trip");
        }
    }
    {
        struct baton_copy_result r;
        uint8_t enc[48];
        pos = at;
        memset(&r, 0xA5, sizeof r);
        rc = baton_wire_decode_copy_result(buf, size, &pos, &r);
        want = oracle_result(buf, size, at);
        FUZZ_CHECK(rc == want, "copy_result at %zu gave %d, oracle %d", at, rc, want);
        FUZZ_CHECK(pos == (rc == 0 ? at + 48 : at), "copy_result cursor");
        if (rc == 0) {
            FUZZ_CHECK(r.result == fuzz_le(buf + at, 4) && r.status == fuzz_le(buf + at + 4, 4) &&
                           r.peer_bytes_sent == fuzz_le(buf + at + 8, 8) &&
                           r.peer_bytes_received == fuzz_le(buf + at + 16, 8) &&
                           r.copies_done == fuzz_le(buf + at + 24, 8) &&
                           r.copies_not_done == fuzz_le(buf + at + 32, 8),
                       "copy_result fields");
            baton_wire_encode_copy_result(enc, &r);
            FUZZ_CHECK(memcmp(enc, buf + at, 48) == 0, "copy_result round trip");
        }
    }
}

/* A whole COPY_TENSOR_TO request (the first 168 bytes) the way the server
 * decodes it: the GET_TENSOR prefix (tensor, offset, n; range inside the
 * tensor), the destination, then the options for the destination's
 * family. */
static void check_copy_request(const uint8_t *buf, size_t size)
{
    struct baton_tensor_desc t;
    struct baton_peer_dest d;
    struct baton_copy_options o;
    uint64_t off = 0, n = 0;
    size_t pos = 0;
    const size_t at_dest = BATON_TENSOR_DESC_BYTES + 16, at_opts = at_dest + 48;
    FUZZ_CHECK(BATON_COPY_TO_BYTES == 168 && BATON_COPY_OPTIONS_BYTES == 16,
               "COPY_TENSOR_TO layout");
    if (size < BATON_COPY_TO_BYTES)
        return;
    int rc = baton_wire_decode_tensor(buf, BATON_COPY_TO_BYTES, &pos, &t);
    if (rc == 0)
        rc = baton_wire_get_u64(buf, BATON_COPY_TO_BYTES, &pos, &off);
    if (rc == 0)
        rc = baton_wire_get_u64(buf, BATON_COPY_TO_BYTES, &pos, &n);
    if (rc == 0)
        rc = baton_wire_check_range(off, n, t.nbytes);
    if (rc != 0)
        return;
    FUZZ_CHECK(pos == BATON_TENSOR_DESC_BYTES + 16, "prefix cursor");
    FUZZ_CHECK((u128)off + n <= t.nbytes, "range inside the tensor");
    rc = baton_wire_decode_peer_dest(buf, BATON_COPY_TO_BYTES, &pos, &d);
    FUZZ_CHECK(rc == oracle_dest(buf, BATON_COPY_TO_BYTES, at_dest),
               "destination after the prefix");
    FUZZ_CHECK(pos == (rc == 0 ? at_opts : at_dest), "request cursor after the destination");
    if (rc != 0)
        return;
    rc = baton_wire_decode_copy_options(buf, BATON_COPY_TO_BYTES, &pos, d.family, &o);
    FUZZ_CHECK(rc == oracle_options(buf, BATON_COPY_TO_BYTES, at_opts, buf[at_dest]),
               "options after the destination");
    FUZZ_CHECK(pos == (rc == 0 ? BATON_COPY_TO_BYTES : at_opts), "request cursor");
    if (rc != 0)
        return;
    /* a decoded request: a query carries no sequence number and no flags,
     * a copy carries a sequence number */
    FUZZ_CHECK(d.family == 0 ? o.seq == 0 && o.flags == 0 : o.seq != 0 && o.flags <= 1,
               "options of a decoded request");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = fuzz_dup(data, size);
    for (size_t at = 0; at <= size + 1 && at <= 4096; at++)
        check_at(buf, size, at);
    check_copy_request(buf, size);
    free(buf);
    return 0;
}
