/* Frame header, HELLO, tensor descriptor, graph and device-info decoders:
 * byte-exact round trips against hand-written bytes and every failure code,
 * with the cursor unchanged on failure. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "baton/status.h"
#include "core/ops.h"
#include "wire/wire.h"

/* ---- frame header ---- */

/* cmd 7, status 0xFFFE, seq 0x11223344, len 0x0000000500000006, after 2 junk bytes */
static const uint8_t header_bytes[26] = {
    0xAA, 0xBB, 'B', 'A', 'T', 'N', 7, 0, 0xFE, 0xFF, 0x44, 0x33, 0x22, 0x11, 0, 0, 0, 0,
    0x06, 0, 0, 0, 0x05, 0, 0, 0,
};

static int decode_header_at2(const uint8_t *b, size_t len, uint64_t max, size_t *pos)
{
    struct baton_frame_header h;
    *pos = 2;
    return baton_wire_decode_header(b, len, pos, max, &h);
}

static void test_header_round_trip(void **state)
{
    struct baton_frame_header h;
    uint8_t enc[24];
    size_t pos = 2;
    (void)state;

    assert_int_equal(baton_wire_decode_header(header_bytes, sizeof header_bytes, &pos,
                                              UINT64_MAX, &h), 0);
    assert_int_equal(pos, 26);
    assert_int_equal(h.cmd, 7);
    assert_int_equal(h.flags, 0);
    assert_int_equal(h.status, 0xFFFE);
    assert_int_equal(h.seq, 0x11223344u);
    assert_true(h.len == 0x0000000500000006ull);
    baton_wire_encode_header(enc, &h);
    assert_memory_equal(enc, header_bytes + 2, 24);
}

static void test_header_errors(void **state)
{
    uint8_t b[26];
    size_t pos;
    (void)state;

    for (size_t n = 0; n < 24; n++) {
        assert_int_equal(decode_header_at2(header_bytes, 2 + n, UINT64_MAX, &pos),
                         BATON_E_TRUNCATED);
        assert_int_equal(pos, 2);
    }
    for (int i = 0; i < 4; i++) {
        memcpy(b, header_bytes, sizeof b);
        b[2 + i] ^= 0x20; /* "bATN", "BaTN", ... */
        assert_int_equal(decode_header_at2(b, sizeof b, UINT64_MAX, &pos), BATON_E_MAGIC);
        assert_int_equal(pos, 2);
    }
    memcpy(b, header_bytes, sizeof b);
    b[6] = 0;
    assert_int_equal(decode_header_at2(b, sizeof b, UINT64_MAX, &pos), BATON_E_CMD);
    assert_int_equal(pos, 2);
    b[6] = BATON_CMD_LIMIT;
    assert_int_equal(decode_header_at2(b, sizeof b, UINT64_MAX, &pos), BATON_E_CMD);
    b[6] = 255;
    assert_int_equal(decode_header_at2(b, sizeof b, UINT64_MAX, &pos), BATON_E_CMD);
    b[6] = BATON_CMD_LIMIT - 1;
    assert_int_equal(decode_header_at2(b, sizeof b, UINT64_MAX, &pos), 0);
    assert_int_equal(pos, 26);
    b[6] = 1;
    assert_int_equal(decode_header_at2(b, sizeof b, UINT64_MAX, &pos), 0);

    memcpy(b, header_bytes, sizeof b);
    b[7] = 1; /* flags */
    assert_int_equal(decode_header_at2(b, sizeof b, UINT64_MAX, &pos), BATON_E_INVAL);
    assert_int_equal(pos, 2);
    memcpy(b, header_bytes, sizeof b);
    b[17] = 0x80; /* reserved */
    assert_int_equal(decode_header_at2(b, sizeof b, UINT64_MAX, &pos), BATON_E_INVAL);
    assert_int_equal(pos, 2);

    /* len is 0x500000006: one over the limit fails, equal passes */
    assert_int_equal(decode_header_at2(header_bytes, 26, 0x500000005ull, &pos), BATON_E_LIMIT);
    assert_int_equal(pos, 2);
    assert_int_equal(decode_header_at2(header_bytes, 26, 0x500000006ull, &pos), 0);
    assert_int_equal(pos, 26);
}

/* ---- HELLO ---- */

static void hello_bytes(uint8_t b[48])
{
    /* version 1..3, role client, features 0x8000000000000003 */
    const uint8_t head[16] = {1, 0, 3, 0, 1, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0x80};
    memcpy(b, head, 16);
    for (int i = 0; i < 32; i++)
        b[16 + i] = (uint8_t)(0xA0 + i);
}

static void test_hello(void **state)
{
    uint8_t b[48];
    uint8_t enc[48];
    struct baton_hello h;
    size_t pos = 0;
    (void)state;

    hello_bytes(b);
    assert_int_equal(baton_wire_decode_hello(b, 48, &pos, &h), 0);
    assert_int_equal(pos, 48);
    assert_int_equal(h.version_min, 1);
    assert_int_equal(h.version_max, 3);
    assert_int_equal(h.role, BATON_ROLE_CLIENT);
    assert_true(h.features == 0x8000000000000003ull);
    assert_int_equal(h.nonce[0], 0xA0);
    assert_int_equal(h.nonce[31], 0xBF);
    baton_wire_encode_hello(enc, &h);
    assert_memory_equal(enc, b, 48);

    for (size_t n = 0; n < 48; n++) {
        pos = 0;
        assert_int_equal(baton_wire_decode_hello(b, n, &pos, &h), BATON_E_TRUNCATED);
        assert_int_equal(pos, 0);
    }
    for (int i = 5; i < 8; i++) {
        hello_bytes(b);
        b[i] = 1;
        pos = 0;
        assert_int_equal(baton_wire_decode_hello(b, 48, &pos, &h), BATON_E_INVAL);
        assert_int_equal(pos, 0);
    }
    hello_bytes(b);
    b[0] = 4; /* min 4 > max 3 */
    assert_int_equal(baton_wire_decode_hello(b, 48, &pos, &h), BATON_E_INVAL);
    b[0] = 3;
    assert_int_equal(baton_wire_decode_hello(b, 48, &pos, &h), 0);
    pos = 0;
    b[4] = 3; /* role */
    assert_int_equal(baton_wire_decode_hello(b, 48, &pos, &h), BATON_E_INVAL);
    assert_int_equal(pos, 0);
    b[4] = BATON_ROLE_PEER;
    assert_int_equal(baton_wire_decode_hello(b, 48, &pos, &h), 0);
}

/* ---- tensor extent and descriptor ---- */

static int extent(uint32_t type, uint64_t n0, uint64_t n1, uint64_t n2, uint64_t n3,
                  uint64_t *nbytes)
{
    const uint64_t ne[4] = {n0, n1, n2, n3};
    uint64_t nb[4];
    int rc = baton_tensor_contiguous_nb(type, ne, nb);
    if (rc != 0)
        return rc;
    return baton_wire_tensor_extent(type, ne, nb, nbytes);
}

static void test_contiguous_nb(void **state)
{
    const uint64_t ne[4] = {64, 3, 5, 7};
    uint64_t nb[4];
    (void)state;

    assert_int_equal(baton_tensor_contiguous_nb(BATON_TYPE_Q8_0, ne, nb), 0);
    assert_true(nb[0] == 34 && nb[1] == 68 && nb[2] == 204 && nb[3] == 1020);
    assert_int_equal(baton_tensor_contiguous_nb(BATON_TYPE_Q4_0, ne, nb), 0);
    assert_true(nb[0] == 18 && nb[1] == 36 && nb[2] == 108 && nb[3] == 540);
    assert_int_equal(baton_tensor_contiguous_nb(BATON_TYPE_F32, ne, nb), 0);
    assert_true(nb[0] == 4 && nb[1] == 256 && nb[2] == 768 && nb[3] == 3840);
    assert_int_equal(baton_tensor_contiguous_nb(BATON_TYPE_F16, ne, nb), 0);
    assert_true(nb[0] == 2 && nb[1] == 128 && nb[2] == 384 && nb[3] == 1920);
    assert_int_equal(baton_tensor_contiguous_nb(BATON_TYPE_I32, ne, nb), 0);
    assert_true(nb[3] == 3840);
    assert_int_equal(baton_tensor_contiguous_nb(3, ne, nb), BATON_E_TYPE);
    /* K-quants: super-blocks of 256 elements, ggml's block_q2_K..q6_K sizes */
    {
        static const struct { uint32_t type; uint64_t bytes; } k[] = {
            {BATON_TYPE_Q2_K, 84}, {BATON_TYPE_Q3_K, 110}, {BATON_TYPE_Q4_K, 144},
            {BATON_TYPE_Q5_K, 176}, {BATON_TYPE_Q6_K, 210}};
        const uint64_t kne[4] = {512, 3, 1, 2};
        const uint64_t k300[4] = {300, 1, 1, 1};
        for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
            assert_int_equal(baton_tensor_contiguous_nb(k[i].type, kne, nb), 0);
            assert_true(nb[0] == k[i].bytes && nb[1] == 2 * k[i].bytes &&
                        nb[2] == 6 * k[i].bytes && nb[3] == 6 * k[i].bytes);
            assert_int_equal(baton_tensor_contiguous_nb(k[i].type, k300, nb), BATON_E_SHAPE);
        }
        /* IQ4_NL (blocks of 32, 18 bytes) and IQ4_XS (256, 136 bytes) */
        assert_int_equal(baton_tensor_contiguous_nb(BATON_TYPE_IQ4_NL, kne, nb), 0);
        assert_true(nb[0] == 18 && nb[1] == 16 * 18 && nb[2] == 48 * 18 && nb[3] == 48 * 18);
        assert_int_equal(baton_tensor_contiguous_nb(BATON_TYPE_IQ4_NL, k300, nb), BATON_E_SHAPE);
        assert_int_equal(baton_tensor_contiguous_nb(BATON_TYPE_IQ4_XS, kne, nb), 0);
        assert_true(nb[0] == 136 && nb[1] == 2 * 136 && nb[2] == 6 * 136 && nb[3] == 6 * 136);
        assert_int_equal(baton_tensor_contiguous_nb(BATON_TYPE_IQ4_XS, k300, nb), BATON_E_SHAPE);
        /* the other ids between the K-quants and I32 (15 = Q8_K, the other
         * IQ types) stay unknown */
        for (uint32_t t = 15; t < 26; t++)
            if (t != BATON_TYPE_IQ4_NL && t != BATON_TYPE_IQ4_XS)
                assert_int_equal(baton_tensor_contiguous_nb(t, kne, nb), BATON_E_TYPE);
        assert_int_equal(baton_tensor_contiguous_nb(9, kne, nb), BATON_E_TYPE);
    }
    /* Q5_0 / Q5_1: blocks of 32, ggml's block_q5_0 (2 + 4 + 16 bytes) and
     * block_q5_1 (2 + 2 + 4 + 16 bytes); Q4_1 (3) stays unknown */
    {
        const uint64_t ne5[4] = {96, 2, 1, 3};
        const uint64_t ne40[4] = {40, 1, 1, 1};
        assert_int_equal(baton_tensor_contiguous_nb(BATON_TYPE_Q5_0, ne5, nb), 0);
        assert_true(nb[0] == 22 && nb[1] == 66 && nb[2] == 132 && nb[3] == 132);
        assert_int_equal(baton_tensor_contiguous_nb(BATON_TYPE_Q5_1, ne5, nb), 0);
        assert_true(nb[0] == 24 && nb[1] == 72 && nb[2] == 144 && nb[3] == 144);
        assert_int_equal(baton_tensor_contiguous_nb(BATON_TYPE_Q5_0, ne40, nb), BATON_E_SHAPE);
        assert_int_equal(baton_tensor_contiguous_nb(BATON_TYPE_Q5_1, ne40, nb), BATON_E_SHAPE);
        assert_int_equal(baton_tensor_contiguous_nb(3, ne5, nb), BATON_E_TYPE);
    }
    /* BF16 (30): 2 bytes per element, any row length, as F16; 29 and 31
     * stay unknown */
    {
        const uint64_t neb[4] = {7, 3, 2, 1};
        assert_int_equal(baton_tensor_contiguous_nb(BATON_TYPE_BF16, neb, nb), 0);
        assert_true(nb[0] == 2 && nb[1] == 14 && nb[2] == 42 && nb[3] == 84);
        assert_int_equal(baton_tensor_contiguous_nb(29, neb, nb), BATON_E_TYPE);
        assert_int_equal(baton_tensor_contiguous_nb(31, neb, nb), BATON_E_TYPE);
    }
    const uint64_t odd[4] = {33, 1, 1, 1};
    assert_int_equal(baton_tensor_contiguous_nb(BATON_TYPE_Q8_0, odd, nb), BATON_E_SHAPE);
    const uint64_t big[4] = {1ull << 62, 2, 2, 1}; /* 4 * 2^62 * 2 wraps at nb[2] */
    assert_int_equal(baton_tensor_contiguous_nb(BATON_TYPE_F32, big, nb), BATON_E_OVERFLOW);
}

static void test_extent(void **state)
{
    uint64_t nbytes = 0;
    (void)state;

    assert_int_equal(extent(BATON_TYPE_F32, 3, 5, 7, 11, &nbytes), 0);
    assert_true(nbytes == 4u * 3 * 5 * 7 * 11);
    assert_int_equal(extent(BATON_TYPE_Q8_0, 96, 2, 1, 1, &nbytes), 0);
    assert_true(nbytes == 3u * 34 * 2);
    assert_int_equal(extent(BATON_TYPE_Q4_K, 768, 2, 1, 1, &nbytes), 0);
    assert_true(nbytes == 3u * 144 * 2);
    assert_int_equal(extent(BATON_TYPE_Q6_K, 256, 1, 1, 1, &nbytes), 0);
    assert_true(nbytes == 210);
    assert_int_equal(extent(BATON_TYPE_Q5_K, 128, 1, 1, 1, &nbytes), BATON_E_SHAPE);
    assert_int_equal(extent(BATON_TYPE_Q5_0, 896, 3, 1, 1, &nbytes), 0);
    assert_true(nbytes == 28u * 22 * 3);
    assert_int_equal(extent(BATON_TYPE_Q5_1, 896, 3, 1, 1, &nbytes), 0);
    assert_true(nbytes == 28u * 24 * 3);
    assert_int_equal(extent(BATON_TYPE_Q5_1, 48, 1, 1, 1, &nbytes), BATON_E_SHAPE);
    assert_int_equal(extent(BATON_TYPE_BF16, 4096, 5, 1, 1, &nbytes), 0);
    assert_true(nbytes == 4096u * 2 * 5);
    /* any zero dimension: extent 0 */
    assert_int_equal(extent(BATON_TYPE_F32, 0, 5, 7, 11, &nbytes), 0);
    assert_true(nbytes == 0);
    assert_int_equal(extent(BATON_TYPE_F32, 3, 5, 7, 0, &nbytes), 0);
    assert_true(nbytes == 0);
    assert_int_equal(extent(BATON_TYPE_F32, 3, 0, 1ull << 40, 1ull << 40, &nbytes), 0);
    assert_true(nbytes == 0);

    const uint64_t ne[4] = {32, 1, 1, 1};
    uint64_t nb[4] = {34, 34, 34, 34};
    assert_int_equal(baton_wire_tensor_extent(BATON_TYPE_Q8_0, ne, nb, &nbytes), 0);
    assert_true(nbytes == 34);
    assert_int_equal(baton_wire_tensor_extent(3, ne, nb, &nbytes), BATON_E_TYPE);
    assert_int_equal(baton_wire_tensor_extent(4, ne, nb, &nbytes), BATON_E_TYPE);
    assert_int_equal(baton_wire_tensor_extent(1000, ne, nb, &nbytes), BATON_E_TYPE);
    for (int i = 0; i < 4; i++) {
        nb[i] = 35;
        assert_int_equal(baton_wire_tensor_extent(BATON_TYPE_Q8_0, ne, nb, &nbytes),
                         BATON_E_SHAPE);
        nb[i] = 34;
    }
    const uint64_t ne33[4] = {33, 1, 1, 1};
    assert_int_equal(baton_wire_tensor_extent(BATON_TYPE_Q8_0, ne33, nb, &nbytes),
                     BATON_E_SHAPE);
    /* limit 2^40 per dimension, checked before the block multiple */
    for (int i = 0; i < 4; i++) {
        uint64_t big[4] = {32, 1, 1, 1};
        big[i] = (1ull << 40) + 1;
        assert_int_equal(baton_wire_tensor_extent(BATON_TYPE_Q8_0, big, nb, &nbytes),
                         BATON_E_LIMIT);
    }
    assert_int_equal(extent(BATON_TYPE_F32, 1ull << 40, 1, 1, 1, &nbytes), 0);
    assert_true(nbytes == 1ull << 42);
    /* 4 * 2^40 * 2^20 * 1 = 2^62 = nb[3]; * 4 = 2^64: extent wraps */
    {
        const uint64_t w[4] = {1ull << 40, 1ull << 20, 1, 4};
        const uint64_t wnb[4] = {4, 1ull << 42, 1ull << 62, 1ull << 62};
        assert_int_equal(baton_wire_tensor_extent(BATON_TYPE_F32, w, wnb, &nbytes),
                         BATON_E_OVERFLOW);
        const uint64_t w3[4] = {1ull << 40, 1ull << 20, 1, 3};
        assert_int_equal(baton_wire_tensor_extent(BATON_TYPE_F32, w3, wnb, &nbytes), 0);
        assert_true(nbytes == 3ull << 62);
    }
    /* stride nb[3] = 4 * 2^40 * 2^20 * 4 = 2^64 is not representable */
    {
        const uint64_t w[4] = {1ull << 40, 1ull << 20, 4, 1};
        const uint64_t wnb[4] = {4, 1ull << 42, 1ull << 62, 0};
        assert_int_equal(baton_wire_tensor_extent(BATON_TYPE_F32, w, wnb, &nbytes),
                         BATON_E_OVERFLOW);
    }
}

/* buffer 0x0102030405060708, offset 0x100, Q8_0 {64, 3, 1, 2} */
static void tensor_bytes(uint8_t b[88])
{
    const uint64_t ne[4] = {64, 3, 1, 2};
    const uint64_t nb[4] = {34, 68, 204, 204};
    memset(b, 0, 88);
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(8 - i);
    b[9] = 1;
    b[16] = BATON_TYPE_Q8_0;
    for (int d = 0; d < 4; d++) {
        for (int i = 0; i < 8; i++) {
            b[24 + 8 * d + i] = (uint8_t)(ne[d] / (1ull << (8 * i)) % 256);
            b[56 + 8 * d + i] = (uint8_t)(nb[d] / (1ull << (8 * i)) % 256);
        }
    }
}

static int decode_tensor_rc(const uint8_t *b, size_t *pos)
{
    struct baton_tensor_desc t;
    *pos = 0;
    return baton_wire_decode_tensor(b, 88, pos, &t);
}

static void test_tensor(void **state)
{
    uint8_t b[88];
    uint8_t enc[88];
    struct baton_tensor_desc t;
    size_t pos = 0;
    (void)state;

    tensor_bytes(b);
    assert_int_equal(baton_wire_decode_tensor(b, 88, &pos, &t), 0);
    assert_int_equal(pos, 88);
    assert_true(t.buffer == 0x0102030405060708ull);
    assert_true(t.offset == 0x100);
    assert_int_equal(t.type, BATON_TYPE_Q8_0);
    assert_true(t.ne[0] == 64 && t.ne[1] == 3 && t.ne[2] == 1 && t.ne[3] == 2);
    assert_true(t.nb[0] == 34 && t.nb[1] == 68 && t.nb[2] == 204 && t.nb[3] == 204);
    assert_true(t.nbytes == 408);
    baton_wire_encode_tensor(enc, &t);
    assert_memory_equal(enc, b, 88);

    for (size_t n = 0; n < 88; n++) {
        pos = 0;
        assert_int_equal(baton_wire_decode_tensor(b, n, &pos, &t), BATON_E_TRUNCATED);
        assert_int_equal(pos, 0);
    }
    tensor_bytes(b);
    b[16] = 3;
    assert_int_equal(decode_tensor_rc(b, &pos), BATON_E_TYPE);
    assert_int_equal(pos, 0);
    tensor_bytes(b);
    b[23] = 1; /* reserved */
    assert_int_equal(decode_tensor_rc(b, &pos), BATON_E_INVAL);
    assert_int_equal(pos, 0);
    tensor_bytes(b);
    b[24] = 33; /* ne[0] = 33, not a multiple of 32 */
    assert_int_equal(decode_tensor_rc(b, &pos), BATON_E_SHAPE);
    assert_int_equal(pos, 0);
    tensor_bytes(b);
    b[64] = 69; /* nb[1] */
    assert_int_equal(decode_tensor_rc(b, &pos), BATON_E_SHAPE);
    assert_int_equal(pos, 0);
    tensor_bytes(b);
    b[55] = 1; /* ne[3] = 2^56 + 2 */
    assert_int_equal(decode_tensor_rc(b, &pos), BATON_E_LIMIT);
    assert_int_equal(pos, 0);
    /* offset + 408 wraps: offset = 2^64 - 408 + 1 */
    tensor_bytes(b);
    {
        uint64_t off = UINT64_MAX - 407;
        for (int i = 0; i < 8; i++)
            b[8 + i] = (uint8_t)(off / (1ull << (8 * i)) % 256);
        assert_int_equal(decode_tensor_rc(b, &pos), BATON_E_OVERFLOW);
        assert_int_equal(pos, 0);
        off = UINT64_MAX - 408;
        for (int i = 0; i < 8; i++)
            b[8 + i] = (uint8_t)(off / (1ull << (8 * i)) % 256);
        assert_int_equal(decode_tensor_rc(b, &pos), 0);
        assert_int_equal(pos, 88);
    }
}

/* ---- graph ---- */

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v / (1u << (8 * i)) % 256);
}

static void test_graph_header(void **state)
{
    uint8_t b[8 + 2 * 88 + 3 * 104] = {0};
    uint32_t nl = 99, nn = 99;
    size_t pos = 0;
    (void)state;

    put32(b, 2);
    put32(b + 4, 3);
    assert_int_equal(baton_wire_decode_graph_header(b, sizeof b, &pos, 100, &nl, &nn), 0);
    assert_int_equal(pos, 8);
    assert_int_equal(nl, 2);
    assert_int_equal(nn, 3);

    for (size_t n = 0; n < 8; n++) {
        pos = 0;
        assert_int_equal(baton_wire_decode_graph_header(b, n, &pos, 100, &nl, &nn),
                         BATON_E_TRUNCATED);
        assert_int_equal(pos, 0);
    }
    pos = 0;
    /* one byte short, one byte over */
    assert_int_equal(baton_wire_decode_graph_header(b, sizeof b - 1, &pos, 100, &nl, &nn),
                     BATON_E_INVAL);
    assert_int_equal(pos, 0);
    {
        uint8_t c[sizeof b + 1] = {0};
        memcpy(c, b, sizeof b);
        assert_int_equal(baton_wire_decode_graph_header(c, sizeof c, &pos, 100, &nl, &nn),
                         BATON_E_INVAL);
        assert_int_equal(pos, 0);
    }
    /* the counts swapped give 2*104 + 3*88 = 472 != 488 */
    put32(b, 3);
    put32(b + 4, 2);
    assert_int_equal(baton_wire_decode_graph_header(b, sizeof b, &pos, 100, &nl, &nn),
                     BATON_E_INVAL);
    put32(b, 2);
    put32(b + 4, 3);
    assert_int_equal(baton_wire_decode_graph_header(b, sizeof b, &pos, 2, &nl, &nn),
                     BATON_E_LIMIT);
    assert_int_equal(pos, 0);
    assert_int_equal(baton_wire_decode_graph_header(b, sizeof b, &pos, 3, &nl, &nn), 0);
    pos = 0;
    put32(b + 4, BATON_MAX_GRAPH_NODES + 1);
    assert_int_equal(baton_wire_decode_graph_header(b, sizeof b, &pos, UINT32_MAX, &nl, &nn),
                     BATON_E_LIMIT);
    put32(b, BATON_MAX_GRAPH_LEAVES + 1);
    put32(b + 4, 3);
    assert_int_equal(baton_wire_decode_graph_header(b, sizeof b, &pos, 100, &nl, &nn),
                     BATON_E_LIMIT);
    put32(b, UINT32_MAX);
    put32(b + 4, UINT32_MAX);
    assert_int_equal(baton_wire_decode_graph_header(b, sizeof b, &pos, UINT32_MAX, &nl, &nn),
                     BATON_E_LIMIT);
    /* zero nodes */
    {
        uint8_t z[8 + 88] = {0};
        put32(z, 1);
        assert_int_equal(baton_wire_decode_graph_header(z, sizeof z, &pos, 100, &nl, &nn),
                         BATON_E_INVAL);
        assert_int_equal(pos, 0);
    }
    assert_int_equal(pos, 0);
}

/* ATTENTION (arity 6) reading leaves 0..2 and nodes 0..2, out leaf 1 */
static void node_struct(struct baton_graph_node *n)
{
    memset(n, 0, sizeof *n);
    n->op = BATON_OP_ATTENTION;
    n->type = BATON_TYPE_F32;
    n->ne[0] = 64;
    n->ne[1] = 8;
    n->ne[2] = 5;
    n->ne[3] = 1;
    for (int i = 0; i < BATON_MAX_SRC; i++)
        n->src[i] = (uint32_t)i;
    n->out_leaf = 1;
    for (int i = 0; i < BATON_N_PARAMS; i++)
        n->params[i] = 0x3F800000u + (uint32_t)i;
}

static int decode_node_rc(const struct baton_graph_node *in, uint32_t n_leaves,
                          uint32_t index, size_t *pos)
{
    uint8_t b[104];
    struct baton_graph_node out;
    baton_wire_encode_node(b, in);
    *pos = 0;
    return baton_wire_decode_node(b, 104, pos, n_leaves, index, &out);
}

static void test_node(void **state)
{
    struct baton_graph_node n;
    struct baton_graph_node out;
    uint8_t b[104];
    uint8_t enc[104];
    size_t pos = 0;
    (void)state;

    node_struct(&n);
    baton_wire_encode_node(b, &n);
    /* spot-check the layout by hand */
    assert_int_equal(b[0], BATON_OP_ATTENTION);
    assert_int_equal(b[8], 64);
    assert_int_equal(b[40 + 4 * 5], 5);
    assert_int_equal(b[64], 1);
    assert_int_equal(b[68], 0x00);
    assert_int_equal(b[71], 0x3F);
    assert_int_equal(b[68 + 4 * 7], 0x07);
    assert_int_equal(b[100] | b[101] | b[102] | b[103], 0);
    assert_int_equal(baton_wire_decode_node(b, 104, &pos, 3, 3, &out), 0);
    assert_int_equal(pos, 104);
    assert_memory_equal(&out, &n, sizeof n);
    baton_wire_encode_node(enc, &out);
    assert_memory_equal(enc, b, 104);

    for (size_t len = 0; len < 104; len++) {
        pos = 0;
        assert_int_equal(baton_wire_decode_node(b, len, &pos, 3, 3, &out), BATON_E_TRUNCATED);
        assert_int_equal(pos, 0);
    }
    /* src 5 with 3 leaves and index 2: 5 >= 3 + 2 */
    assert_int_equal(decode_node_rc(&n, 3, 2, &pos), BATON_E_GRAPH);
    assert_int_equal(pos, 0);
    node_struct(&n);
    n.src[0] = 6;
    assert_int_equal(decode_node_rc(&n, 3, 3, &pos), BATON_E_GRAPH);
    n.src[0] = BATON_SRC_NONE; /* a used slot may not be NONE */
    assert_int_equal(decode_node_rc(&n, 3, 3, &pos), BATON_E_GRAPH);
    /* n_leaves + node_index above 2^32 must not wrap (in 32 bits it would
     * be 0x10 and reject this valid source) */
    n.src[0] = 0xFFFFFFF0u;
    assert_int_equal(decode_node_rc(&n, 0xFFFFFFF0u, 0x20, &pos), 0);
    assert_int_equal(decode_node_rc(&n, 0xFFFFFFF0u, 0, &pos), BATON_E_GRAPH);
    assert_int_equal(decode_node_rc(&n, 0xFFFFFFF1u, 0, &pos), 0);

    /* unused slot not NONE (RMS_NORM has arity 1) */
    node_struct(&n);
    n.op = BATON_OP_RMS_NORM;
    for (int i = 1; i < BATON_MAX_SRC; i++)
        n.src[i] = BATON_SRC_NONE;
    assert_int_equal(decode_node_rc(&n, 3, 0, &pos), 0);
    assert_int_equal(pos, 104);
    for (int i = 1; i < BATON_MAX_SRC; i++) {
        n.src[i] = 0;
        assert_int_equal(decode_node_rc(&n, 3, 0, &pos), BATON_E_GRAPH);
        assert_int_equal(pos, 0);
        n.src[i] = BATON_SRC_NONE;
    }
    /* out_leaf */
    n.out_leaf = 3;
    assert_int_equal(decode_node_rc(&n, 3, 0, &pos), BATON_E_GRAPH);
    assert_int_equal(pos, 0);
    n.out_leaf = 2;
    assert_int_equal(decode_node_rc(&n, 3, 0, &pos), 0);
    n.out_leaf = BATON_SRC_NONE;
    assert_int_equal(decode_node_rc(&n, 3, 0, &pos), 0);
    /* type */
    n.type = 3;
    assert_int_equal(decode_node_rc(&n, 3, 0, &pos), BATON_E_TYPE);
    assert_int_equal(pos, 0);
    n.type = BATON_TYPE_I32;
    assert_int_equal(decode_node_rc(&n, 3, 0, &pos), 0);
    /* unknown ops */
    n.op = 0;
    assert_int_equal(decode_node_rc(&n, 3, 0, &pos), BATON_E_GRAPH);
    n.op = BATON_OP_COUNT;
    assert_int_equal(decode_node_rc(&n, 3, 0, &pos), BATON_E_GRAPH);
    assert_int_equal(pos, 0);
    /* reserved */
    n.op = BATON_OP_RMS_NORM;
    baton_wire_encode_node(b, &n);
    b[103] = 1;
    pos = 0;
    assert_int_equal(baton_wire_decode_node(b, 104, &pos, 3, 0, &out), BATON_E_INVAL);
    assert_int_equal(pos, 0);
}

/* The decoder restates the op arities; every id must agree with core/ops.c:
 * a node whose first `arity` sources are 0 and the rest NONE decodes, one
 * more used source or one fewer does not. */
static void test_node_arity_matches_catalogue(void **state)
{
    struct baton_graph_node n;
    size_t pos;
    (void)state;

    for (uint32_t op = 0; op < BATON_OP_COUNT + 4; op++) {
        uint32_t arity = baton_op_arity(op);
        node_struct(&n);
        n.op = op;
        n.out_leaf = BATON_SRC_NONE;
        for (uint32_t i = 0; i < BATON_MAX_SRC; i++)
            n.src[i] = i < arity ? 0 : BATON_SRC_NONE;
        if (arity == 0) {
            assert_int_equal(decode_node_rc(&n, 1, 0, &pos), BATON_E_GRAPH);
            continue;
        }
        assert_int_equal(decode_node_rc(&n, 1, 0, &pos), 0);
        n.src[arity - 1] = BATON_SRC_NONE;
        assert_int_equal(decode_node_rc(&n, 1, 0, &pos), BATON_E_GRAPH);
        if (arity < BATON_MAX_SRC) {
            n.src[arity - 1] = 0;
            n.src[arity] = 0;
            assert_int_equal(decode_node_rc(&n, 1, 0, &pos), BATON_E_GRAPH);
        }
    }
}

/* ---- device info ---- */

static void test_device_info(void **state)
{
    struct baton_device_info d;
    struct baton_device_info out;
    uint8_t b[96];
    uint8_t enc[96];
    size_t pos = 0;
    (void)state;

    memset(&d, 0, sizeof d);
    d.total_memory = 0x1000000000ull;
    d.free_memory = 0x800000000ull;
    d.alignment = 64;
    d.max_buffer_bytes = 1ull << 32;
    d.type_mask = (1ull << 0) | (1ull << 8);
    d.op_mask = 0xFFE;
    d.n_threads = 2;
    d.version = 1;
    strcpy(d.name, "cpu");
    baton_wire_encode_device_info(b, &d);
    assert_int_equal(b[4], 0x10);
    assert_int_equal(b[16], 64);
    assert_int_equal(b[48], 2);
    assert_int_equal(b[56], 'c');
    assert_int_equal(b[59], 0);
    assert_int_equal(b[95], 0);
    memset(&out, 0, sizeof out); /* same padding as d */
    assert_int_equal(baton_wire_decode_device_info(b, 96, &pos, &out), 0);
    assert_int_equal(pos, 96);
    assert_memory_equal(&out, &d, sizeof d);
    baton_wire_encode_device_info(enc, &out);
    assert_memory_equal(enc, b, 96);

    /* a full 32-byte name comes back NUL-terminated */
    memset(b + 56, 'x', 32);
    pos = 0;
    assert_int_equal(baton_wire_decode_device_info(b, 96, &pos, &out), 0);
    assert_int_equal(strlen(out.name), 32);
    for (size_t n = 0; n < 96; n++) {
        pos = 0;
        assert_int_equal(baton_wire_decode_device_info(b, n, &pos, &out), BATON_E_TRUNCATED);
        assert_int_equal(pos, 0);
    }
    b[88] = 1; /* reserved */
    pos = 0;
    assert_int_equal(baton_wire_decode_device_info(b, 96, &pos, &out), BATON_E_INVAL);
    assert_int_equal(pos, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_round_trip),
        cmocka_unit_test(test_header_errors),
        cmocka_unit_test(test_hello),
        cmocka_unit_test(test_contiguous_nb),
        cmocka_unit_test(test_extent),
        cmocka_unit_test(test_tensor),
        cmocka_unit_test(test_graph_header),
        cmocka_unit_test(test_node),
        cmocka_unit_test(test_node_arity_matches_catalogue),
        cmocka_unit_test(test_device_info),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
