/* Decoders of the pipelined step (src/wire/pipeline.c): COPY_TENSOR_TO
 * options, PEER_FENCE, the id record (GRAPH_REGISTER / COPY_ROUTE replies,
 * GRAPH_FREE request) and GRAPH_RUN's header, fence, input, hand-off and
 * return. Hand-written bytes (layouts in wire.h, docs/PROTOCOL.md
 * "Registered graphs"), byte-exact round trips through the encoders, every
 * failure branch, truncation at every length, and the cursor unchanged on
 * every failure (each record is decoded after 3 junk bytes). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "baton/status.h"
#include "wire/wire.h"

#define AT 3 /* junk bytes before every record */

/* A record's bytes after AT junk bytes; the rest of b is 0. */
static void place(uint8_t *b, size_t size, const uint8_t *rec, size_t n)
{
    memset(b, 0, size);
    memset(b, 0xEE, AT);
    memcpy(b + AT, rec, n);
}

/* ---- layout constants ---- */

static void test_constants(void **state)
{
    (void)state;
    assert_int_equal(BATON_CMD_PEER_FENCE, 15);
    assert_int_equal(BATON_CMD_GRAPH_REGISTER, 16);
    assert_int_equal(BATON_CMD_GRAPH_RUN, 17);
    assert_int_equal(BATON_CMD_GRAPH_FREE, 18);
    assert_int_equal(BATON_CMD_COPY_ROUTE, 19);
    assert_int_equal(BATON_CMD_LIMIT, 20);
    assert_true(BATON_FEATURE_PIPELINE == 8);
    assert_int_equal(BATON_E_FENCE, -24);
    assert_int_equal(BATON_COPY_QUEUED, 8);
    assert_int_equal(BATON_COPY_CANCELLED, 9);
    assert_int_equal(BATON_COPY_OUTCOME_LIMIT, 10);
    assert_int_equal(BATON_COPY_OPTIONS_BYTES, 16);
    assert_int_equal(BATON_COPY_TO_BYTES, 168);
    assert_int_equal(BATON_PEER_WRITE_HEADER_BYTES, 40);
    assert_int_equal(BATON_PEER_FENCE_BYTES, 32);
    assert_int_equal(BATON_GRAPH_ID_BYTES, 8);
    assert_int_equal(BATON_COPY_ROUTE_BYTES, 136);
    assert_int_equal(BATON_RUN_HEADER_BYTES, 16);
    assert_int_equal(BATON_RUN_FENCE_BYTES, 32);
    assert_int_equal(BATON_RUN_INPUT_BYTES, 16);
    assert_int_equal(BATON_RUN_HANDOFF_BYTES, 24);
    assert_int_equal(BATON_RUN_RETURN_BYTES, 8);
    assert_int_equal(BATON_MAX_RUN_FENCES, 4);
    assert_int_equal(BATON_MAX_RUN_INPUTS, 4);
    assert_true(BATON_RUN_RESET == 1 && BATON_RUN_HANDOFF == 2 && BATON_RUN_RETURN == 4);
    assert_string_equal(baton_cmd_name(BATON_CMD_GRAPH_RUN), "GRAPH_RUN");
    assert_string_equal(baton_cmd_name(BATON_CMD_COPY_ROUTE), "COPY_ROUTE");
    assert_string_equal(baton_status_name(BATON_E_FENCE), "E_FENCE");
}

/* ---- COPY_TENSOR_TO options ---- */

static int opts(const uint8_t *b, size_t len, uint8_t family, struct baton_copy_options *o)
{
    size_t pos = AT;
    int rc = baton_wire_decode_copy_options(b, len, &pos, family, o);
    assert_int_equal(pos, rc == 0 ? AT + 16 : AT);
    return rc;
}

/* seq 0x0102030405060708, flags ASYNC */
static const uint8_t opts_async[16] = {8, 7, 6, 5, 4, 3, 2, 1, 1, 0, 0, 0, 0, 0, 0, 0};

static void test_copy_options(void **state)
{
    uint8_t b[AT + 16], enc[16];
    struct baton_copy_options o;
    size_t pos;
    (void)state;

    place(b, sizeof b, opts_async, 16);
    static const uint8_t families[] = {4, 6};
    for (size_t f = 0; f < sizeof families; f++) {
        memset(&o, 0, sizeof o);
        assert_int_equal(opts(b, sizeof b, families[f], &o), 0);
        assert_true(o.seq == 0x0102030405060708ull && o.flags == BATON_COPY_ASYNC);
    }
    baton_wire_encode_copy_options(enc, &o);
    assert_memory_equal(enc, opts_async, 16);
    for (size_t n = 0; n < 16; n++)
        assert_int_equal(opts(b, AT + n, 4, &o), BATON_E_TRUNCATED);
    pos = sizeof b + 1; /* cursor past the end */
    assert_int_equal(baton_wire_decode_copy_options(b, sizeof b, &pos, 4, &o), BATON_E_TRUNCATED);
    assert_int_equal(pos, sizeof b + 1);
    /* the query (family 0) carries neither seq nor flags */
    assert_int_equal(opts(b, sizeof b, 0, &o), BATON_E_INVAL);
    b[AT + 8] = 0; /* synchronous, seq still set */
    assert_int_equal(opts(b, sizeof b, 4, &o), 0);
    assert_int_equal(o.flags, 0);
    assert_int_equal(opts(b, sizeof b, 0, &o), BATON_E_INVAL);
    memset(b + AT, 0, 16);
    assert_int_equal(opts(b, sizeof b, 0, &o), 0);
    assert_true(o.seq == 0 && o.flags == 0);
    baton_wire_encode_copy_options(enc, &o);
    assert_memory_equal(enc, b + AT, 16);
    b[AT + 8] = 1; /* ASYNC without seq: not for a query either */
    assert_int_equal(opts(b, sizeof b, 0, &o), BATON_E_INVAL);
    /* a copy needs its seq */
    assert_int_equal(opts(b, sizeof b, 4, &o), BATON_E_INVAL);
    assert_int_equal(opts(b, sizeof b, 6, &o), BATON_E_INVAL);
    b[AT + 7] = 0x80; /* seq 2^63 */
    b[AT + 8] = 0;
    assert_int_equal(opts(b, sizeof b, 6, &o), 0);
    assert_true(o.seq == 1ull << 63);
    /* flags other than ASYNC, and each reserved byte */
    static const size_t bad_flag[] = {8, 9, 10, 11};
    for (size_t i = 0; i < sizeof bad_flag / sizeof bad_flag[0]; i++) {
        place(b, sizeof b, opts_async, 16);
        b[AT + bad_flag[i]] = 2;
        assert_int_equal(opts(b, sizeof b, 4, &o), BATON_E_INVAL);
    }
    for (size_t i = 12; i < 16; i++) {
        place(b, sizeof b, opts_async, 16);
        b[AT + i] = 1;
        assert_int_equal(opts(b, sizeof b, 4, &o), BATON_E_INVAL);
        memset(b + AT, 0, 12); /* and for the query */
        assert_int_equal(opts(b, sizeof b, 0, &o), BATON_E_INVAL);
    }
}

/* ---- PEER_FENCE ---- */

static int pfence(const uint8_t *b, size_t len, struct baton_peer_fence *f)
{
    size_t pos = AT;
    int rc = baton_wire_decode_peer_fence(b, len, &pos, f);
    assert_int_equal(pos, rc == 0 ? AT + 32 : AT);
    return rc;
}

/* grant 0x80..0x8f, seq 3, status 24 (E_FENCE) */
static void fence_bytes(uint8_t b[AT + 32])
{
    memset(b, 0, AT + 32);
    memset(b, 0xEE, AT);
    for (int i = 0; i < 16; i++)
        b[AT + i] = (uint8_t)(0x80 + i);
    b[AT + 16] = 3;
    b[AT + 24] = 24;
}

static void test_peer_fence(void **state)
{
    uint8_t b[AT + 32], enc[32];
    struct baton_peer_fence f;
    (void)state;

    fence_bytes(b);
    assert_int_equal(pfence(b, sizeof b, &f), 0);
    assert_memory_equal(f.grant, b + AT, 16);
    assert_true(f.seq == 3 && f.status == 24);
    baton_wire_encode_peer_fence(enc, &f);
    assert_memory_equal(enc, b + AT, 32);
    for (size_t n = 0; n < 32; n++)
        assert_int_equal(pfence(b, AT + n, &f), BATON_E_TRUNCATED);

    b[AT + 16] = 0; /* seq 0 */
    assert_int_equal(pfence(b, sizeof b, &f), BATON_E_INVAL);
    b[AT + 23] = 0x80; /* seq 2^63 */
    assert_int_equal(pfence(b, sizeof b, &f), 0);
    assert_true(f.seq == 1ull << 63);

    fence_bytes(b);
    b[AT + 24] = 0; /* status 0: a fence says why */
    assert_int_equal(pfence(b, sizeof b, &f), BATON_E_INVAL);
    b[AT + 24] = 0xFF;
    b[AT + 25] = 0xFF; /* 65535 */
    assert_int_equal(pfence(b, sizeof b, &f), 0);
    assert_int_equal(f.status, 65535);
    b[AT + 24] = 0;
    b[AT + 25] = 0;
    b[AT + 26] = 1; /* 65536 */
    assert_int_equal(pfence(b, sizeof b, &f), BATON_E_INVAL);
    b[AT + 26] = 0;
    b[AT + 27] = 0x80; /* 2^31 */
    assert_int_equal(pfence(b, sizeof b, &f), BATON_E_INVAL);

    for (size_t i = 28; i < 32; i++) {
        fence_bytes(b);
        b[AT + i] = 1; /* reserved */
        assert_int_equal(pfence(b, sizeof b, &f), BATON_E_INVAL);
    }
    fence_bytes(b);
    memset(b + AT, 0, 16); /* no grant */
    assert_int_equal(pfence(b, sizeof b, &f), BATON_E_INVAL);
    b[AT + 15] = 1; /* one non-zero byte is a grant id */
    assert_int_equal(pfence(b, sizeof b, &f), 0);
}

/* ---- id record ---- */

static int gid(const uint8_t *b, size_t len, uint32_t *id)
{
    size_t pos = AT;
    int rc = baton_wire_decode_graph_id(b, len, &pos, id);
    assert_int_equal(pos, rc == 0 ? AT + 8 : AT);
    return rc;
}

static void test_graph_id(void **state)
{
    static const uint8_t rec[8] = {0x04, 0x03, 0x02, 0x01, 0, 0, 0, 0};
    uint8_t b[AT + 8], enc[8];
    uint32_t id = 0;
    (void)state;

    place(b, sizeof b, rec, 8);
    assert_int_equal(gid(b, sizeof b, &id), 0);
    assert_int_equal(id, 0x01020304);
    baton_wire_encode_graph_id(enc, id);
    assert_memory_equal(enc, rec, 8);
    for (size_t n = 0; n < 8; n++)
        assert_int_equal(gid(b, AT + n, &id), BATON_E_TRUNCATED);
    for (size_t i = 4; i < 8; i++) {
        place(b, sizeof b, rec, 8);
        b[AT + i] = 1; /* reserved */
        assert_int_equal(gid(b, sizeof b, &id), BATON_E_INVAL);
    }
    memset(b + AT, 0, 8); /* id 0 names nothing */
    assert_int_equal(gid(b, sizeof b, &id), BATON_E_INVAL);
    memset(b + AT, 0xFF, 4);
    assert_int_equal(gid(b, sizeof b, &id), 0);
    assert_int_equal(id, UINT32_MAX);
}

/* ---- GRAPH_RUN header ---- */

/* The header (graph, flags, n_fences, n_inputs) at AT, then `rest` zero
 * bytes; returns the length. */
static size_t run_bytes(uint8_t *b, size_t size, uint32_t graph, uint32_t flags, uint32_t nf,
                        uint32_t ni, size_t rest)
{
    struct baton_run_header h = {graph, flags, nf, ni};
    assert_true(AT + 16 + rest <= size);
    memset(b, 0, size);
    memset(b, 0xEE, AT);
    baton_wire_encode_run_header(b + AT, &h);
    return AT + 16 + rest;
}

static int rhead(const uint8_t *b, size_t len, struct baton_run_header *h)
{
    size_t pos = AT;
    int rc = baton_wire_decode_run_header(b, len, &pos, h);
    assert_int_equal(pos, rc == 0 ? AT + 16 : AT);
    return rc;
}

static void test_run_header(void **state)
{
    static const uint8_t rec[16] = {7, 0, 0, 0, 5, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0};
    uint8_t b[AT + 16 + 4 * 32 + 4 * 16 + 24 + 8 + 1], enc[16];
    struct baton_run_header h;
    size_t len;
    (void)state;

    /* graph 7, RESET | RETURN, 2 fences, 1 input: 64 + 16 + 8 bytes follow */
    place(b, sizeof b, rec, 16);
    len = AT + 16 + 64 + 16 + 8;
    assert_int_equal(rhead(b, len, &h), 0);
    assert_true(h.graph == 7 && h.flags == 5 && h.n_fences == 2 && h.n_inputs == 1);
    baton_wire_encode_run_header(enc, &h);
    assert_memory_equal(enc, rec, 16);
    /* exactly that many: one byte less or more is a wrong length */
    assert_int_equal(rhead(b, len - 1, &h), BATON_E_INVAL);
    assert_int_equal(rhead(b, len + 1, &h), BATON_E_INVAL);
    for (size_t n = 0; n < 16; n++)
        assert_int_equal(rhead(b, AT + n, &h), BATON_E_TRUNCATED);

    /* every flag combination and count: 32 f + 16 i (+ 24) (+ 8) */
    for (uint32_t flags = 0; flags <= 7; flags++) {
        for (uint32_t nf = 0; nf <= 4; nf++) {
            for (uint32_t ni = 0; ni <= 4; ni++) {
                size_t rest = 32 * nf + 16 * ni + (flags & 2 ? 24 : 0) + (flags & 4 ? 8 : 0);
                len = run_bytes(b, sizeof b, 1, flags, nf, ni, rest);
                assert_int_equal(rhead(b, len, &h), 0);
                assert_true(h.flags == flags && h.n_fences == nf && h.n_inputs == ni);
                if (rest > 0)
                    assert_int_equal(rhead(b, len - 8, &h), BATON_E_INVAL);
                assert_int_equal(rhead(b, len + 8 <= sizeof b ? len + 8 : len + 1, &h),
                                 BATON_E_INVAL);
            }
        }
    }
    /* more than 4 fences or inputs: E_LIMIT, checked before everything else */
    len = run_bytes(b, sizeof b, 1, 0, 5, 0, 0);
    assert_int_equal(rhead(b, len, &h), BATON_E_LIMIT);
    len = run_bytes(b, sizeof b, 0, 8, 0, 5, 0);
    assert_int_equal(rhead(b, len, &h), BATON_E_LIMIT);
    len = run_bytes(b, sizeof b, 1, 0, UINT32_MAX, UINT32_MAX, 0);
    assert_int_equal(rhead(b, len, &h), BATON_E_LIMIT);
    /* graph 0, unknown flags */
    len = run_bytes(b, sizeof b, 0, 0, 0, 0, 0);
    assert_int_equal(rhead(b, len, &h), BATON_E_INVAL);
    len = run_bytes(b, sizeof b, 1, 8, 0, 0, 0);
    assert_int_equal(rhead(b, len, &h), BATON_E_INVAL);
    len = run_bytes(b, sizeof b, 1, 0x80000000u, 0, 0, 0);
    assert_int_equal(rhead(b, len, &h), BATON_E_INVAL);
    len = run_bytes(b, sizeof b, UINT32_MAX, 0, 0, 0, 0);
    assert_int_equal(rhead(b, len, &h), 0);
    assert_int_equal(h.graph, UINT32_MAX);
    /* the length is counted from the cursor, not from the buffer's start */
    len = run_bytes(b, sizeof b, 1, BATON_RUN_RETURN, 0, 0, 8);
    size_t pos = 0;
    assert_int_equal(baton_wire_decode_run_header(b, len, &pos, &h), BATON_E_INVAL);
    assert_int_equal(pos, 0);
}

/* ---- fence ---- */

static int rfence(const uint8_t *b, size_t len, struct baton_run_fence *f)
{
    size_t pos = AT;
    int rc = baton_wire_decode_run_fence(b, len, &pos, f);
    assert_int_equal(pos, rc == 0 ? AT + 32 : AT);
    return rc;
}

static void test_run_fence(void **state)
{
    uint8_t b[AT + 32], enc[32];
    struct baton_run_fence f;
    (void)state;

    memset(b, 0, sizeof b);
    memset(b, 0xEE, AT);
    for (int i = 0; i < 16; i++)
        b[AT + i] = (uint8_t)(0x30 + i);
    b[AT + 16] = 0x10;
    b[AT + 17] = 0x27; /* seq 10000 */
    assert_int_equal(rfence(b, sizeof b, &f), 0);
    assert_memory_equal(f.grant, b + AT, 16);
    assert_true(f.seq == 10000);
    baton_wire_encode_run_fence(enc, &f);
    assert_memory_equal(enc, b + AT, 32);
    for (size_t n = 0; n < 32; n++)
        assert_int_equal(rfence(b, AT + n, &f), BATON_E_TRUNCATED);
    for (size_t i = 24; i < 32; i++) {
        b[AT + i] = 1; /* reserved */
        assert_int_equal(rfence(b, sizeof b, &f), BATON_E_INVAL);
        b[AT + i] = 0;
    }
    b[AT + 16] = b[AT + 17] = 0; /* seq 0 */
    assert_int_equal(rfence(b, sizeof b, &f), BATON_E_INVAL);
    memset(b + AT + 16, 0xFF, 8); /* seq 2^64 - 1 */
    assert_int_equal(rfence(b, sizeof b, &f), 0);
    assert_true(f.seq == UINT64_MAX);
    memset(b + AT, 0, 16); /* no grant */
    assert_int_equal(rfence(b, sizeof b, &f), BATON_E_INVAL);
}

/* ---- input ---- */

static int rinput(const uint8_t *b, size_t len, struct baton_run_input *in)
{
    size_t pos = AT;
    int rc = baton_wire_decode_run_input(b, len, &pos, in);
    assert_int_equal(pos, rc == 0 ? AT + 16 : AT);
    return rc;
}

/* An input record at AT: leaf, count, first (as its u32 bits), reserved. */
static void input_bytes(uint8_t b[AT + 16], uint32_t leaf, uint32_t count, uint32_t first_bits,
                        uint32_t reserved)
{
    memset(b, 0xEE, AT);
    baton_wire_put_u32(b + AT, leaf);
    baton_wire_put_u32(b + AT + 4, count);
    baton_wire_put_u32(b + AT + 8, first_bits);
    baton_wire_put_u32(b + AT + 12, reserved);
}

static void test_run_input(void **state)
{
    static const uint8_t rec[16] = {3, 0, 0, 0, 2, 0, 0, 0, 0xFE, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0};
    uint8_t b[AT + 16], enc[16];
    struct baton_run_input in;
    (void)state;

    /* leaf 3, count 2, first -2 */
    place(b, sizeof b, rec, 16);
    assert_int_equal(rinput(b, sizeof b, &in), 0);
    assert_true(in.leaf == 3 && in.count == 2 && in.first == -2);
    baton_wire_encode_run_input(enc, &in);
    assert_memory_equal(enc, rec, 16);
    for (size_t n = 0; n < 16; n++)
        assert_int_equal(rinput(b, AT + n, &in), BATON_E_TRUNCATED);
    for (size_t i = 12; i < 16; i++) {
        place(b, sizeof b, rec, 16);
        b[AT + i] = 1; /* reserved */
        assert_int_equal(rinput(b, sizeof b, &in), BATON_E_INVAL);
    }
    input_bytes(b, 0, 0, 5, 0); /* count 0 */
    assert_int_equal(rinput(b, sizeof b, &in), BATON_E_INVAL);
    /* the last value first + count - 1 must fit in an i32 */
    input_bytes(b, 0, 1, 0x7FFFFFFFu, 0);
    assert_int_equal(rinput(b, sizeof b, &in), 0);
    assert_true(in.first == INT32_MAX && in.count == 1);
    input_bytes(b, 0, 2, 0x7FFFFFFFu, 0);
    assert_int_equal(rinput(b, sizeof b, &in), BATON_E_INVAL);
    input_bytes(b, 0, 4, 0x7FFFFFFCu, 0); /* ..., 2^31 - 1 */
    assert_int_equal(rinput(b, sizeof b, &in), 0);
    input_bytes(b, 0, 5, 0x7FFFFFFCu, 0);
    assert_int_equal(rinput(b, sizeof b, &in), BATON_E_INVAL);
    input_bytes(b, UINT32_MAX, UINT32_MAX, 0x80000000u, 0); /* -2^31 .. 2^31 - 1 */
    assert_int_equal(rinput(b, sizeof b, &in), 0);
    assert_true(in.first == INT32_MIN && in.count == UINT32_MAX && in.leaf == UINT32_MAX);
    baton_wire_encode_run_input(enc, &in);
    assert_memory_equal(enc, b + AT, 16);
    input_bytes(b, 0, UINT32_MAX, 0x80000001u, 0); /* -2^31 + 1 .. 2^31 - 1 */
    assert_int_equal(rinput(b, sizeof b, &in), 0);
    input_bytes(b, 0, UINT32_MAX, 0x80000002u, 0); /* one past */
    assert_int_equal(rinput(b, sizeof b, &in), BATON_E_INVAL);
    input_bytes(b, 0, UINT32_MAX, 0xFFFFFFFFu, 0); /* -1 + 2^32 - 2 */
    assert_int_equal(rinput(b, sizeof b, &in), BATON_E_INVAL);
}

/* ---- hand-off ---- */

static int rhandoff(const uint8_t *b, size_t len, struct baton_run_handoff *h)
{
    size_t pos = AT;
    int rc = baton_wire_decode_run_handoff(b, len, &pos, h);
    assert_int_equal(pos, rc == 0 ? AT + 24 : AT);
    return rc;
}

static void test_run_handoff(void **state)
{
    /* route 2, ASYNC, seq 9, n 0x1000 */
    static const uint8_t rec[24] = {2, 0, 0, 0, 1, 0, 0, 0, 9, 0, 0, 0,
                                    0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0};
    uint8_t b[AT + 24], enc[24];
    struct baton_run_handoff h;
    (void)state;

    place(b, sizeof b, rec, 24);
    assert_int_equal(rhandoff(b, sizeof b, &h), 0);
    assert_true(h.route == 2 && h.flags == BATON_COPY_ASYNC && h.seq == 9 && h.n == 0x1000);
    baton_wire_encode_run_handoff(enc, &h);
    assert_memory_equal(enc, rec, 24);
    for (size_t n = 0; n < 24; n++)
        assert_int_equal(rhandoff(b, AT + n, &h), BATON_E_TRUNCATED);
    b[AT + 4] = 0; /* synchronous */
    assert_int_equal(rhandoff(b, sizeof b, &h), 0);
    assert_int_equal(h.flags, 0);
    b[AT + 4] = 2; /* a flag other than ASYNC */
    assert_int_equal(rhandoff(b, sizeof b, &h), BATON_E_INVAL);
    b[AT + 4] = 0;
    b[AT + 7] = 0x80;
    assert_int_equal(rhandoff(b, sizeof b, &h), BATON_E_INVAL);
    place(b, sizeof b, rec, 24);
    b[AT] = 0; /* route 0 */
    assert_int_equal(rhandoff(b, sizeof b, &h), BATON_E_INVAL);
    place(b, sizeof b, rec, 24);
    b[AT + 8] = 0; /* seq 0 */
    assert_int_equal(rhandoff(b, sizeof b, &h), BATON_E_INVAL);
    place(b, sizeof b, rec, 24);
    b[AT + 17] = 0; /* n 0 */
    assert_int_equal(rhandoff(b, sizeof b, &h), BATON_E_INVAL);
    memset(b + AT + 16, 0xFF, 8); /* n 2^64 - 1: the route's tensor decides */
    memset(b + AT, 0xFF, 4);
    assert_int_equal(rhandoff(b, sizeof b, &h), 0);
    assert_true(h.n == UINT64_MAX && h.route == UINT32_MAX);
}

/* ---- return ---- */

static int rreturn(const uint8_t *b, size_t len, struct baton_run_return *r)
{
    size_t pos = AT;
    int rc = baton_wire_decode_run_return(b, len, &pos, r);
    assert_int_equal(pos, rc == 0 ? AT + 8 : AT);
    return rc;
}

static void test_run_return(void **state)
{
    static const uint8_t rec[8] = {0x11, 0, 0, 0, 0, 0, 0, 0};
    uint8_t b[AT + 8], enc[8];
    struct baton_run_return r;
    (void)state;

    place(b, sizeof b, rec, 8);
    assert_int_equal(rreturn(b, sizeof b, &r), 0);
    assert_int_equal(r.leaf, 0x11);
    baton_wire_encode_run_return(enc, &r);
    assert_memory_equal(enc, rec, 8);
    for (size_t n = 0; n < 8; n++)
        assert_int_equal(rreturn(b, AT + n, &r), BATON_E_TRUNCATED);
    for (size_t i = 4; i < 8; i++) {
        place(b, sizeof b, rec, 8);
        b[AT + i] = 1; /* reserved */
        assert_int_equal(rreturn(b, sizeof b, &r), BATON_E_INVAL);
    }
    memset(b + AT, 0, 8); /* leaf 0 is a leaf */
    assert_int_equal(rreturn(b, sizeof b, &r), 0);
    assert_int_equal(r.leaf, 0);
}

/* ---- a whole GRAPH_RUN payload, decoded in the server's order ---- */

static void test_run_payload(void **state)
{
    struct baton_run_header h = {9, BATON_RUN_HANDOFF | BATON_RUN_RETURN, 2, 1}, hd;
    struct baton_run_fence f[2], fd;
    struct baton_run_input in = {4, 2, 100}, ind;
    struct baton_run_handoff ho = {1, 0, 77, 512}, hod;
    struct baton_run_return ret = {5}, retd;
    uint8_t b[16 + 64 + 16 + 24 + 8];
    size_t pos = 0;
    (void)state;

    memset(f, 0, sizeof f);
    for (int k = 0; k < 2; k++) {
        memset(f[k].grant, 0x50 + k, 16);
        f[k].seq = 40 + (uint64_t)k;
    }
    baton_wire_encode_run_header(b, &h);
    baton_wire_encode_run_fence(b + 16, &f[0]);
    baton_wire_encode_run_fence(b + 48, &f[1]);
    baton_wire_encode_run_input(b + 80, &in);
    baton_wire_encode_run_handoff(b + 96, &ho);
    baton_wire_encode_run_return(b + 120, &ret);

    assert_int_equal(baton_wire_decode_run_header(b, sizeof b, &pos, &hd), 0);
    assert_memory_equal(&hd, &h, sizeof h);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(baton_wire_decode_run_fence(b, sizeof b, &pos, &fd), 0);
        assert_memory_equal(fd.grant, f[k].grant, 16);
        assert_true(fd.seq == f[k].seq);
    }
    assert_int_equal(baton_wire_decode_run_input(b, sizeof b, &pos, &ind), 0);
    assert_true(ind.leaf == 4 && ind.count == 2 && ind.first == 100);
    assert_int_equal(baton_wire_decode_run_handoff(b, sizeof b, &pos, &hod), 0);
    assert_true(hod.route == 1 && hod.flags == 0 && hod.seq == 77 && hod.n == 512);
    assert_int_equal(baton_wire_decode_run_return(b, sizeof b, &pos, &retd), 0);
    assert_int_equal(retd.leaf, 5);
    assert_int_equal(pos, sizeof b);
    /* without the return the same header promises 8 bytes too many */
    pos = 0;
    assert_int_equal(baton_wire_decode_run_header(b, sizeof b - 8, &pos, &hd), BATON_E_INVAL);
    assert_int_equal(pos, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_constants),   cmocka_unit_test(test_copy_options),
        cmocka_unit_test(test_peer_fence),  cmocka_unit_test(test_graph_id),
        cmocka_unit_test(test_run_header),  cmocka_unit_test(test_run_fence),
        cmocka_unit_test(test_run_input),   cmocka_unit_test(test_run_handoff),
        cmocka_unit_test(test_run_return),  cmocka_unit_test(test_run_payload),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
