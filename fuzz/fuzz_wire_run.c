/* Fuzz target wire_run: the registered-graph decoders of src/wire/pipeline.c
 * — id record (GRAPH_REGISTER and COPY_ROUTE replies, GRAPH_FREE request),
 * GRAPH_RUN header, fence, input, hand-off and return — at every cursor
 * position, and the whole input as one GRAPH_RUN payload decoded the way
 * the server decodes it (header, n_fences fences, n_inputs inputs, the
 * hand-off with HANDOFF, the return with RETURN). The other two decoders of
 * pipeline.c, COPY_TENSOR_TO options and PEER_FENCE, belong to the direct
 * path and are checked by target wire_peer.
 *
 * Oracle, written here from wire.h and docs/PROTOCOL.md "Registered graphs"
 * (integers little-endian, read byte by byte):
 *   - TRUNCATED iff fewer bytes than the record remain;
 *   - id record (8): INVAL if the u32 id is 0 or the u32 reserved is not 0;
 *   - run header (16: graph, flags, n_fences, n_inputs): LIMIT if n_fences
 *     or n_inputs is above 4; then INVAL if graph is 0, flags above 7, or
 *     the bytes left after the header are not exactly 32 n_fences +
 *     16 n_inputs (+ 24 with flag 2, + 8 with flag 4);
 *   - fence (32: grant, seq, reserved u64): INVAL if the grant is all zero,
 *     seq is 0 or the reserved u64 is not 0;
 *   - input (16: leaf, count, i32 first, reserved): INVAL if count is 0, the
 *     reserved u32 is not 0, or first + count - 1 (in 64-bit arithmetic)
 *     is above 2^31 - 1;
 *   - hand-off (24: route, flags, seq, n): INVAL if route is 0, flags
 *     above 1, seq is 0 or n is 0;
 *   - return (8: leaf, reserved): INVAL if the reserved u32 is not 0.
 * On success: cursor + record size, every field equals its bytes and
 * encode(decode(x)) == x; on failure the cursor is unchanged. The whole
 * payload: the server's first failing record gives its status (a header
 * cut short is INVAL, as in cmd_graph_run), no record after a good header
 * is ever TRUNCATED, and a decoded payload ends exactly at its last byte.
 */
#include "fuzz_common.h"

#include "baton/status.h"
#include "wire/wire.h"

#define RUN_SCAN_MAX 4096 /* cursor positions checked per input */

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

/* The i32 with the bits of u, by arithmetic (no implementation-defined
 * conversion). */
static int64_t as_i32(uint64_t u)
{
    return u < 0x80000000u ? (int64_t)u : (int64_t)u - 0x100000000ll;
}

static int oracle_id(const uint8_t *b, size_t len, size_t pos)
{
    if (!room(len, pos, 8))
        return BATON_E_TRUNCATED;
    b += pos;
    return fuzz_le(b, 4) == 0 || fuzz_le(b + 4, 4) != 0 ? BATON_E_INVAL : 0;
}

static int oracle_header(const uint8_t *b, size_t len, size_t pos)
{
    if (!room(len, pos, 16))
        return BATON_E_TRUNCATED;
    b += pos;
    uint64_t graph = fuzz_le(b, 4), flags = fuzz_le(b + 4, 4);
    uint64_t nf = fuzz_le(b + 8, 4), ni = fuzz_le(b + 12, 4);
    if (nf > 4 || ni > 4)
        return BATON_E_LIMIT;
    if (graph == 0 || flags > 7)
        return BATON_E_INVAL;
    uint64_t rest = 32 * nf + 16 * ni + (flags & 2 ? 24 : 0) + (flags & 4 ? 8 : 0);
    return len - pos - 16 == rest ? 0 : BATON_E_INVAL;
}

static int oracle_fence(const uint8_t *b, size_t len, size_t pos)
{
    if (!room(len, pos, 32))
        return BATON_E_TRUNCATED;
    b += pos;
    return zero(b, 16) || fuzz_le(b + 16, 8) == 0 || fuzz_le(b + 24, 8) != 0 ? BATON_E_INVAL : 0;
}

static int oracle_input(const uint8_t *b, size_t len, size_t pos)
{
    if (!room(len, pos, 16))
        return BATON_E_TRUNCATED;
    b += pos;
    uint64_t count = fuzz_le(b + 4, 4);
    if (count == 0 || fuzz_le(b + 12, 4) != 0)
        return BATON_E_INVAL;
    return as_i32(fuzz_le(b + 8, 4)) + (int64_t)count - 1 > 2147483647 ? BATON_E_INVAL : 0;
}

static int oracle_handoff(const uint8_t *b, size_t len, size_t pos)
{
    if (!room(len, pos, 24))
        return BATON_E_TRUNCATED;
    b += pos;
    if (fuzz_le(b, 4) == 0 || fuzz_le(b + 4, 4) > 1 || fuzz_le(b + 8, 8) == 0 ||
        fuzz_le(b + 16, 8) == 0)
        return BATON_E_INVAL;
    return 0;
}

static int oracle_return(const uint8_t *b, size_t len, size_t pos)
{
    if (!room(len, pos, 8))
        return BATON_E_TRUNCATED;
    return fuzz_le(b + pos + 4, 4) != 0 ? BATON_E_INVAL : 0;
}

static void check_at(const uint8_t *buf, size_t size, size_t at)
{
    size_t pos;
    int rc, want;

    {
        uint32_t id;
        uint8_t enc[8];
        pos = at;
        memset(&id, 0xA5, sizeof id);
        rc = baton_wire_decode_graph_id(buf, size, &pos, &id);
        want = oracle_id(buf, size, at);
        FUZZ_CHECK(rc == want, "graph_id at %zu gave %d, oracle %d", at, rc, want);
        FUZZ_CHECK(pos == (rc == 0 ? at + 8 : at), "graph_id cursor");
        if (rc == 0) {
            FUZZ_CHECK(id == fuzz_le(buf + at, 4) && id != 0, "graph_id field");
            baton_wire_encode_graph_id(enc, id);
            FUZZ_CHECK(memcmp(enc, buf + at, 8) == 0, "graph_id round trip");
        }
    }
    {
        struct baton_run_header h;
        uint8_t enc[16];
        pos = at;
        memset(&h, 0xA5, sizeof h);
        rc = baton_wire_decode_run_header(buf, size, &pos, &h);
        want = oracle_header(buf, size, at);
        FUZZ_CHECK(rc == want, "run_header at %zu gave %d, oracle %d", at, rc, want);
        FUZZ_CHECK(pos == (rc == 0 ? at + 16 : at), "run_header cursor");
        if (rc == 0) {
            FUZZ_CHECK(h.graph == fuzz_le(buf + at, 4) && h.flags == fuzz_le(buf + at + 4, 4) &&
                           h.n_fences == fuzz_le(buf + at + 8, 4) &&
                           h.n_inputs == fuzz_le(buf + at + 12, 4),
                       "run_header fields");
            baton_wire_encode_run_header(enc, &h);
            FUZZ_CHECK(memcmp(enc, buf + at, 16) == 0, "run_header round trip");
        }
    }
    {
        struct baton_run_fence f;
        uint8_t enc[32];
        pos = at;
        memset(&f, 0xA5, sizeof f);
        rc = baton_wire_decode_run_fence(buf, size, &pos, &f);
        want = oracle_fence(buf, size, at);
        FUZZ_CHECK(rc == want, "run_fence at %zu gave %d, oracle %d", at, rc, want);
        FUZZ_CHECK(pos == (rc == 0 ? at + 32 : at), "run_fence cursor");
        if (rc == 0) {
            FUZZ_CHECK(memcmp(f.grant, buf + at, 16) == 0 && f.seq == fuzz_le(buf + at + 16, 8),
                       "run_fence fields");
            baton_wire_encode_run_fence(enc, &f);
            FUZZ_CHECK(memcmp(enc, buf + at, 32) == 0, "run_fence round trip");
        }
    }
    {
        struct baton_run_input in;
        uint8_t enc[16];
        pos = at;
        memset(&in, 0xA5, sizeof in);
        rc = baton_wire_decode_run_input(buf, size, &pos, &in);
        want = oracle_input(buf, size, at);
        FUZZ_CHECK(rc == want, "run_input at %zu gave %d, oracle %d", at, rc, want);
        FUZZ_CHECK(pos == (rc == 0 ? at + 16 : at), "run_input cursor");
        if (rc == 0) {
            FUZZ_CHECK(in.leaf == fuzz_le(buf + at, 4) && in.count == fuzz_le(buf + at + 4, 4) &&
                           (int64_t)in.first == as_i32(fuzz_le(buf + at + 8, 4)),
                       "run_input fields");
            /* the values first .. first + count - 1 all fit in an i32 */
            FUZZ_CHECK((int64_t)in.first + in.count - 1 <= INT32_MAX, "run_input last value");
            baton_wire_encode_run_input(enc, &in);
            FUZZ_CHECK(memcmp(enc, buf + at, 16) == 0, "run_input round trip");
        }
    }
    {
        struct baton_run_handoff ho;
        uint8_t enc[24];
        pos = at;
        memset(&ho, 0xA5, sizeof ho);
        rc = baton_wire_decode_run_handoff(buf, size, &pos, &ho);
        want = oracle_handoff(buf, size, at);
        FUZZ_CHECK(rc == want, "run_handoff at %zu gave %d, oracle %d", at, rc, want);
        FUZZ_CHECK(pos == (rc == 0 ? at + 24 : at), "run_handoff cursor");
        if (rc == 0) {
            FUZZ_CHECK(ho.route == fuzz_le(buf + at, 4) && ho.flags == fuzz_le(buf + at + 4, 4) &&
                           ho.seq == fuzz_le(buf + at + 8, 8) &&
                           ho.n == fuzz_le(buf + at + 16, 8),
                       "run_handoff fields");
            baton_wire_encode_run_handoff(enc, &ho);
            FUZZ_CHECK(memcmp(enc, buf + at, 24) == 0, "run_handoff round trip");
        }
    }
    {
        struct baton_run_return r;
        uint8_t enc[8];
        pos = at;
        memset(&r, 0xA5, sizeof r);
        rc = baton_wire_decode_run_return(buf, size, &pos, &r);
        want = oracle_return(buf, size, at);
        FUZZ_CHECK(rc == want, "run_return at %zu gave %d, oracle %d", at, rc, want);
        FUZZ_CHECK(pos == (rc == 0 ? at + 8 : at), "run_return cursor");
        if (rc == 0) {
            FUZZ_CHECK(r.leaf == fuzz_le(buf + at, 4), "run_return field");
            baton_wire_encode_run_return(enc, &r);
            FUZZ_CHECK(memcmp(enc, buf + at, 8) == 0, "run_return round trip");
        }
    }
}

/* The whole input as a GRAPH_RUN payload, decoded in cmd_graph_run's order.
 * The oracle walks the same records with the oracles above. */
static void check_run_payload(const uint8_t *buf, size_t size)
{
    struct baton_run_header h;
    struct baton_run_fence f;
    struct baton_run_input in;
    struct baton_run_handoff ho;
    struct baton_run_return r;
    size_t pos = 0, at = 16;
    int rc = baton_wire_decode_run_header(buf, size, &pos, &h);
    int want = oracle_header(buf, size, 0);
    if (rc == BATON_E_TRUNCATED)
        rc = BATON_E_INVAL; /* the whole payload is in hand: a wrong length */
    if (want == BATON_E_TRUNCATED)
        want = BATON_E_INVAL;
    FUZZ_CHECK(rc == want, "payload header gave %d, oracle %d", rc, want);
    if (rc != 0)
        return;
    uint64_t nf = fuzz_le(buf + 8, 4), ni = fuzz_le(buf + 12, 4), flags = fuzz_le(buf + 4, 4);
    for (uint32_t i = 0; rc == 0 && i < h.n_fences; i++, at += 32) {
        rc = baton_wire_decode_run_fence(buf, size, &pos, &f);
        want = oracle_fence(buf, size, at);
        FUZZ_CHECK(rc == want && rc != BATON_E_TRUNCATED, "payload fence %u gave %d, oracle %d",
                   i, rc, want);
    }
    for (uint32_t i = 0; rc == 0 && i < h.n_inputs; i++, at += 16) {
        rc = baton_wire_decode_run_input(buf, size, &pos, &in);
        want = oracle_input(buf, size, at);
        FUZZ_CHECK(rc == want && rc != BATON_E_TRUNCATED, "payload input %u gave %d, oracle %d",
                   i, rc, want);
    }
    if (rc == 0 && (h.flags & BATON_RUN_HANDOFF)) {
        rc = baton_wire_decode_run_handoff(buf, size, &pos, &ho);
        want = oracle_handoff(buf, size, at);
        FUZZ_CHECK(rc == want && rc != BATON_E_TRUNCATED, "payload hand-off gave %d, oracle %d",
                   rc, want);
        at += 24;
    }
    if (rc == 0 && (h.flags & BATON_RUN_RETURN)) {
        rc = baton_wire_decode_run_return(buf, size, &pos, &r);
        want = oracle_return(buf, size, at);
        FUZZ_CHECK(rc == want && rc != BATON_E_TRUNCATED, "payload return gave %d, oracle %d",
                   rc, want);
        at += 8;
    }
    if (rc != 0)
        return;
    FUZZ_CHECK(pos == size && at == size, "decoded payload ends at %zu (oracle %zu) of %zu", pos,
               at, size);
    FUZZ_CHECK(size == 16 + 32 * nf + 16 * ni + (flags & 2 ? 24 : 0) + (flags & 4 ? 8 : 0),
               "decoded payload length");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = fuzz_dup(data, size);
    for (size_t at = 0; at <= size + 1 && at <= RUN_SCAN_MAX; at++)
        check_at(buf, size, at);
    check_run_payload(buf, size);
    free(buf);
    return 0;
}
