/* Weight formats: binary16 conversion, the Q8_0 / Q4_0 (.., IQ4_NL,
 * IQ4_XS) quantizers and dequantizers (hand-built blocks, ggml's rounding
 * rules, error bounds),
 * the activation quantizer of the MUL_MAT kernels, and GET_ROWS on F16 /
 * Q8_0 / Q4_0 tables through a graph. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "compute/cpu/matmul.h"
#include "compute/cpu/quant.h"
#include "test_compute_util.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

static uint32_t bits(float f)
{
    uint32_t u;

    memcpy(&u, &f, sizeof(u));
    return u;
}

static float from_bits(uint32_t u)
{
    float f;

    memcpy(&f, &u, sizeof(f));
    return f;
}

static uint64_t rng_state;

static uint32_t rng32(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

/* uniform in [-1, 1) */
static float rng_unit(void)
{
    return (float)(int32_t)rng32() / 2147483648.0f;
}

/* ---- binary16 ---- */

static void test_fp16_known_values(void **state)
{
    (void)state;
    assert_true(baton_fp16_to_fp32(0x3C00) == 1.0f);
    assert_true(baton_fp16_to_fp32(0xC000) == -2.0f);
    assert_true(baton_fp16_to_fp32(0x7BFF) == 65504.0f);
    assert_true(baton_fp16_to_fp32(0x0400) == ldexpf(1.0f, -14)); /* smallest normal */
    assert_true(baton_fp16_to_fp32(0x0001) == ldexpf(1.0f, -24)); /* smallest subnormal */
    assert_true(baton_fp16_to_fp32(0x03FF) == ldexpf(1023.0f, -24));
    assert_true(baton_fp16_to_fp32(0x3555) == 0.333251953125f);
    assert_int_equal(bits(baton_fp16_to_fp32(0x8000)), 0x80000000u);
    assert_int_equal(bits(baton_fp16_to_fp32(0x7C00)), 0x7F800000u);
    assert_int_equal(bits(baton_fp16_to_fp32(0xFC00)), 0xFF800000u);
    assert_int_equal(bits(baton_fp16_to_fp32(0x7E00)), 0x7FC00000u);
    assert_int_equal(bits(baton_fp16_to_fp32(0x7C01)), 0x7FC02000u); /* signalling -> quiet */

    assert_int_equal(baton_fp32_to_fp16(1.0f), 0x3C00);
    assert_int_equal(baton_fp32_to_fp16(-2.0f), 0xC000);
    assert_int_equal(baton_fp32_to_fp16(0.1f), 0x2E66);
    assert_int_equal(baton_fp32_to_fp16(65504.0f), 0x7BFF);
    assert_int_equal(baton_fp32_to_fp16(65519.99f), 0x7BFF);
    assert_int_equal(baton_fp32_to_fp16(65520.0f), 0x7C00); /* tie to even: up */
    assert_int_equal(baton_fp32_to_fp16(1e9f), 0x7C00);
    assert_int_equal(baton_fp32_to_fp16(-INFINITY), 0xFC00);
    assert_int_equal(baton_fp32_to_fp16(-0.0f), 0x8000);
    assert_int_equal(baton_fp32_to_fp16(1.0f + ldexpf(1.0f, -11)), 0x3C00);     /* tie, even */
    assert_int_equal(baton_fp32_to_fp16(1.0f + 3 * ldexpf(1.0f, -11)), 0x3C02); /* tie, up */
    assert_int_equal(baton_fp32_to_fp16(ldexpf(1.0f, -24)), 0x0001);
    assert_int_equal(baton_fp32_to_fp16(ldexpf(1.0f, -25)), 0x0000); /* tie to 0 */
    assert_int_equal(baton_fp32_to_fp16(ldexpf(1.5f, -25)), 0x0001);
    assert_int_equal(baton_fp32_to_fp16(ldexpf(3.0f, -25)), 0x0002);    /* 1.5: tie, even */
    assert_int_equal(baton_fp32_to_fp16(ldexpf(1023.5f, -24)), 0x0400); /* carries to normal */
    assert_int_equal(baton_fp32_to_fp16(ldexpf(1.0f, -30)), 0x0000);
    assert_int_equal(baton_fp32_to_fp16(NAN) & 0x7E00, 0x7E00);
}

/* Every binary16 value survives f16 -> f32 -> f16; NaNs stay NaN. */
static void test_fp16_round_trip_all(void **state)
{
    uint32_t h;

    (void)state;
    for (h = 0; h < 65536; h++) {
        const float f = baton_fp16_to_fp32((uint16_t)h);
        const uint16_t back = baton_fp32_to_fp16(f);

        if ((h & 0x7C00) == 0x7C00 && (h & 0x3FF)) {
            assert_true(isnan(f));
            assert_int_equal(back & 0x7E00, 0x7E00);
            assert_int_equal(back & 0x8000, h & 0x8000);
        } else {
            assert_int_equal(back, h);
        }
    }
}

/* bfloat16: the high half of binary32. Widening is a shift (a signalling
 * NaN stays as it is); narrowing rounds to nearest, ties to even, and
 * keeps a NaN a NaN. */
static void test_bf16_known_values(void **state)
{
    (void)state;
    assert_true(baton_bf16_to_fp32(0x3F80) == 1.0f);
    assert_true(baton_bf16_to_fp32(0xC000) == -2.0f);
    assert_true(baton_bf16_to_fp32(0x7F7F) == 0x1.fep127f);    /* largest finite */
    assert_true(baton_bf16_to_fp32(0x0080) == ldexpf(1.0f, -126)); /* smallest normal */
    assert_true(baton_bf16_to_fp32(0x0001) == ldexpf(1.0f, -133)); /* smallest subnormal */
    assert_true(baton_bf16_to_fp32(0x3EAB) == 0x1.56p-2f);
    assert_int_equal(bits(baton_bf16_to_fp32(0x8000)), 0x80000000u);
    assert_int_equal(bits(baton_bf16_to_fp32(0x7F80)), 0x7F800000u);
    assert_int_equal(bits(baton_bf16_to_fp32(0xFF80)), 0xFF800000u);
    assert_int_equal(bits(baton_bf16_to_fp32(0x7FC1)), 0x7FC10000u);
    assert_int_equal(bits(baton_bf16_to_fp32(0x7F81)), 0x7F810000u); /* kept as it is */

    assert_int_equal(baton_fp32_to_bf16(1.0f), 0x3F80);
    assert_int_equal(baton_fp32_to_bf16(-2.0f), 0xC000);
    assert_int_equal(baton_fp32_to_bf16(0.1f), 0x3DCD); /* 0x3DCCCCCD: up */
    assert_int_equal(baton_fp32_to_bf16(-0.0f), 0x8000);
    assert_int_equal(baton_fp32_to_bf16(1.0f + ldexpf(1.0f, -8)), 0x3F80);     /* tie, even */
    assert_int_equal(baton_fp32_to_bf16(1.0f + 3 * ldexpf(1.0f, -8)), 0x3F82); /* tie, up */
    assert_int_equal(baton_fp32_to_bf16(1.0f + ldexpf(1.0f, -8) + ldexpf(1.0f, -20)), 0x3F81);
    assert_int_equal(baton_fp32_to_bf16(0x1.fep127f), 0x7F7F);
    assert_int_equal(baton_fp32_to_bf16(nextafterf(0x1.ffp127f, 0.0f)), 0x7F7F);
    assert_int_equal(baton_fp32_to_bf16(0x1.ffp127f), 0x7F80); /* tie, odd: up to inf */
    assert_int_equal(baton_fp32_to_bf16(-FLT_MAX), 0xFF80);
    assert_int_equal(baton_fp32_to_bf16(INFINITY), 0x7F80);
    assert_int_equal(baton_fp32_to_bf16(ldexpf(1.0f, -133)), 0x0001);
    assert_int_equal(baton_fp32_to_bf16(ldexpf(1.0f, -134)), 0x0000); /* tie to 0 */
    assert_int_equal(baton_fp32_to_bf16(ldexpf(3.0f, -134)), 0x0002); /* 1.5: tie, even */
    assert_int_equal(baton_fp32_to_bf16(ldexpf(1.0f, -149)), 0x0000);
    assert_int_equal(baton_fp32_to_bf16(NAN) & 0x7FC0, 0x7FC0);
    {
        /* a NaN whose payload is all in the dropped half stays NaN */
        uint32_t u = 0xFF800001u;
        float f;

        memcpy(&f, &u, sizeof f);
        assert_int_equal(baton_fp32_to_bf16(f), 0xFFC0);
    }
}

/* Every bfloat16 value survives bf16 -> f32 -> bf16, but a signalling NaN,
 * which comes back quiet; rows convert as the single values do. */
static void test_bf16_round_trip_all(void **state)
{
    uint16_t row[256];
    float f[256];
    uint8_t back[512];
    uint32_t h;

    (void)state;
    for (h = 0; h < 65536; h++) {
        const uint16_t b = baton_fp32_to_bf16(baton_bf16_to_fp32((uint16_t)h));

        if ((h & 0x7F80) == 0x7F80 && (h & 0x7F))
            assert_int_equal(b, h | 0x40);
        else
            assert_int_equal(b, h);
    }
    for (h = 0; h < 256; h++)
        row[h] = (uint16_t)(h * 257u);
    assert_int_equal(baton_dequantize_row(BATON_TYPE_BF16, row, f, 256), 0);
    assert_int_equal(baton_quantize_row(BATON_TYPE_BF16, f, back, 256), 0);
    for (h = 0; h < 256; h++) {
        assert_int_equal(bits(f[h]), (uint32_t)row[h] << 16);
        assert_int_equal(back[2 * h] | back[2 * h + 1] << 8,
                         baton_fp32_to_bf16(baton_bf16_to_fp32(row[h])));
    }
    assert_int_equal(baton_row_bytes(BATON_TYPE_BF16, 7), 14);
    assert_int_equal(baton_row_bytes(BATON_TYPE_BF16, 1ull << 63), 0); /* wraps */
}

#if defined(__x86_64__)
__attribute__((target("f16c"))) static uint32_t hw_h2f(uint16_t h)
{
    return bits(_mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h))));
}

__attribute__((target("f16c"))) static uint16_t hw_f2h(float f)
{
    return (uint16_t)_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(f), 0), 0);
}
#endif

/* The conversions agree with the F16C instructions the SIMD kernels use:
 * every binary16 value, and a million binary32 patterns weighted towards
 * binary16's range. */
static void test_fp16_matches_f16c(void **state)
{
#if defined(__x86_64__)
    uint32_t h, i;

    (void)state;
    if (baton_cpu_isa_detect() < BATON_CPU_ISA_AVX2) /* the AVX2 level requires F16C */
        skip();
    for (h = 0; h < 65536; h++)
        assert_int_equal(bits(baton_fp16_to_fp32((uint16_t)h)), hw_h2f((uint16_t)h));
    rng_state = 0x9E3779B97F4A7C15ull;
    for (i = 0; i < 1000000; i++) {
        uint32_t u = rng32() ^ (rng32() << 16);

        if (i % 2) /* exponents near binary16's: 2^-26 .. 2^17 */
            u = (u & 0x807FFFFFu) | ((uint32_t)(101 + rng32() % 43) << 23);
        assert_int_equal(baton_fp32_to_fp16(from_bits(u)), hw_f2h(from_bits(u)));
    }
#else
    (void)state;
    skip();
#endif
}

/* ---- Q8_0 / Q4_0: hand-built blocks ---- */

static void test_q8_0_known_block(void **state)
{
    /* d = 0x3800 (0.5), little-endian; q = 1, -1, 127, -128, 0, 2, ... */
    uint8_t blk[34] = {0x00, 0x38, 0x01, 0xFF, 0x7F, 0x80, 0x00};
    float y[32];
    int j;

    (void)state;
    for (j = 5; j < 32; j++)
        blk[2 + j] = (uint8_t)(j - 3); /* q = 2 .. 28 */
    assert_int_equal(baton_dequantize_row_q8_0(blk, y, 32), 0);
    assert_true(y[0] == 0.5f);
    assert_true(y[1] == -0.5f);
    assert_true(y[2] == 63.5f);
    assert_true(y[3] == -64.0f);
    assert_true(y[4] == 0.0f);
    for (j = 5; j < 32; j++)
        assert_true(y[j] == 0.5f * (float)(j - 3));
    assert_int_equal(baton_dequantize_row_q8_0(blk, y, 31), BATON_E_SHAPE);
}

static void test_q4_0_known_block(void **state)
{
    /* d = 0x4000 (2.0); qs[0] = 0x9F: element 0 = (15 - 8) * 2 = 14,
     * element 16 = (9 - 8) * 2 = 2; qs[1] = 0x08: element 1 = 0,
     * element 17 = -16; the rest 0x88: 0. */
    uint8_t blk[18] = {0x00, 0x40, 0x9F, 0x08};
    float y[32];
    int j;

    (void)state;
    for (j = 2; j < 16; j++)
        blk[2 + j] = 0x88;
    assert_int_equal(baton_dequantize_row_q4_0(blk, y, 32), 0);
    assert_true(y[0] == 14.0f);
    assert_true(y[16] == 2.0f);
    assert_true(y[1] == 0.0f);
    assert_true(y[17] == -16.0f);
    for (j = 2; j < 16; j++) {
        assert_true(y[j] == 0.0f);
        assert_true(y[16 + j] == 0.0f);
    }
}

/* ggml's rules: Q8_0 rounds halves away from zero (roundf); Q4_0 takes the
 * first element of largest magnitude as -8 d and truncates x/d + 8.5. */
static void test_quantize_known_blocks(void **state)
{
    float x[32] = {0};
    uint8_t q8[34], q4[18];
    int j;

    (void)state;
    x[0] = 127.0f; /* amax 127 -> d = 1 */
    x[1] = 2.5f;
    x[2] = -2.5f;
    x[3] = 3.49f;
    x[4] = -127.0f;
    x[31] = 0.5f;
    assert_int_equal(baton_quantize_row_q8_0(x, q8, 32), 0);
    assert_int_equal(q8[0], 0x00); /* fp16(1.0) = 0x3C00 */
    assert_int_equal(q8[1], 0x3C);
    assert_int_equal((int8_t)q8[2], 127);
    assert_int_equal((int8_t)q8[3], 3);
    assert_int_equal((int8_t)q8[4], -3);
    assert_int_equal((int8_t)q8[5], 3);
    assert_int_equal((int8_t)q8[6], -127);
    assert_int_equal((int8_t)q8[33], 1);

    memset(x, 0, sizeof(x));
    x[0] = -8.0f;  /* the first of largest magnitude: d = -8 / -8 = 1 */
    x[1] = 8.0f;   /* x/d + 8.5 = 16.5 -> 16 -> clamped to 15: value 7 */
    x[2] = 2.5f;   /* 11 -> 3 */
    x[3] = -2.5f;  /* 6 -> -2 */
    x[16] = 7.6f;  /* 16 -> 15 */
    x[17] = -0.4f; /* 8.1 -> 8 -> 0 */
    assert_int_equal(baton_quantize_row_q4_0(x, q4, 32), 0);
    assert_int_equal(q4[0], 0x00);
    assert_int_equal(q4[1], 0x3C);
    assert_int_equal(q4[2], 0x00 | (15 << 4)); /* element 0 -> 0, element 16 -> 15 */
    assert_int_equal(q4[3], 15 | (8 << 4));    /* element 1 -> 15, element 17 -> 8 */
    assert_int_equal(q4[4], 11 | (8 << 4));
    assert_int_equal(q4[5], 6 | (8 << 4));
    for (j = 4; j < 16; j++)
        assert_int_equal(q4[2 + j], 0x88);

    memset(x, 0, sizeof(x)); /* all zero: d = 0, q = 0 (Q4_0 nibbles 8) */
    assert_int_equal(baton_quantize_row_q8_0(x, q8, 32), 0);
    for (j = 0; j < 34; j++)
        assert_int_equal(q8[j], 0);
    assert_int_equal(baton_quantize_row_q4_0(x, q4, 32), 0);
    assert_int_equal(q4[0], 0x00); /* d = 0 / -8 = -0: 0x8000, as ggml writes it */
    assert_int_equal(q4[1], 0x80);
    for (j = 0; j < 16; j++)
        assert_int_equal(q4[2 + j], 0x88);
}

static void test_quantize_errors(void **state)
{
    float x[64];
    uint8_t out[2 * 34];
    int j;

    (void)state;
    for (j = 0; j < 64; j++)
        x[j] = (float)j;
    memset(out, 0xEE, sizeof(out));
    assert_int_equal(baton_quantize_row_q8_0(x, out, 48), BATON_E_SHAPE);
    assert_int_equal(baton_quantize_row_q4_0(x, out, 33), BATON_E_SHAPE);
    x[40] = NAN; /* second block: nothing at all is written */
    assert_int_equal(baton_quantize_row_q8_0(x, out, 64), BATON_E_INVAL);
    assert_int_equal(baton_quantize_row_q4_0(x, out, 64), BATON_E_INVAL);
    x[40] = INFINITY;
    assert_int_equal(baton_quantize_row_q8_0(x, out, 64), BATON_E_INVAL);
    x[40] = 65504.0f * 127.0f * 1.01f; /* scale past binary16 */
    assert_int_equal(baton_quantize_row_q8_0(x, out, 64), BATON_E_INVAL);
    x[40] = 65504.0f * 8.0f * 1.01f;
    assert_int_equal(baton_quantize_row_q4_0(x, out, 64), BATON_E_INVAL);
    assert_int_equal(baton_quantize_row_q8_0(x, out, 64), 0); /* fits Q8_0 */
    for (j = 0; j < 34; j++)
        assert_int_not_equal(out[34 + j], 0xEE);
    memset(out, 0xEE, sizeof(out));
    x[40] = NAN;
    assert_int_equal(baton_quantize_row_q4_0(x, out, 64), BATON_E_INVAL);
    for (j = 0; j < (int)sizeof(out); j++)
        assert_int_equal(out[j], 0xEE);
    assert_int_equal(baton_quantize_row(BATON_TYPE_I32, x, out, 32), BATON_E_UNSUPPORTED);
    assert_int_equal(baton_row_bytes(BATON_TYPE_Q8_0, 64), 68);
    assert_int_equal(baton_row_bytes(BATON_TYPE_Q4_0, 64), 36);
    assert_int_equal(baton_row_bytes(BATON_TYPE_F16, 7), 14);
    assert_int_equal(baton_row_bytes(BATON_TYPE_Q4_0, 40), 0);
    assert_int_equal(baton_row_bytes(BATON_TYPE_F32, UINT64_MAX / 2), 0);
}

/* Round trips within the bounds of quant.h, on blocks of very different
 * scales (binary16 normal and subnormal scales). */
static void test_round_trip_bounds(void **state)
{
    static const float scales[] = {1.0f, 1e-3f, 3e4f, 1e-6f, 1e-9f, 5e4f};
    float x[256], y[256];
    uint8_t q8[8 * 34], q4[8 * 18];
    unsigned s;
    int b, j, trial;

    (void)state;
    rng_state = 42;
    for (trial = 0; trial < 200; trial++) {
        s = (unsigned)trial % (sizeof(scales) / sizeof(scales[0]));
        for (j = 0; j < 256; j++)
            x[j] = rng_unit() * scales[s] * (float)(1 + j / 32);
        if (trial % 7 == 0)
            x[5] = -x[5] * 4.0f; /* a lone outlier */

        assert_int_equal(baton_quantize_row_q8_0(x, q8, 256), 0);
        assert_int_equal(baton_dequantize_row_q8_0(q8, y, 256), 0);
        for (b = 0; b < 8; b++) {
            float amax = 0.0f, d, D, bound;

            for (j = 0; j < 32; j++)
                amax = fmaxf(amax, fabsf(x[b * 32 + j]));
            d = amax / 127.0f;
            D = baton_fp16_to_fp32((uint16_t)(q8[b * 34] | q8[b * 34 + 1] << 8));
            bound = d / 2 + 127 * fabsf(d - D) + amax * 1e-6f;
            for (j = 0; j < 32; j++)
                assert_true(fabsf(x[b * 32 + j] - y[b * 32 + j]) <= bound);
        }

        assert_int_equal(baton_quantize_row_q4_0(x, q4, 256), 0);
        assert_int_equal(baton_dequantize_row_q4_0(q4, y, 256), 0);
        for (b = 0; b < 8; b++) {
            float amax = 0.0f, m = 0.0f, d, D;

            for (j = 0; j < 32; j++)
                if (fabsf(x[b * 32 + j]) > amax) {
                    amax = fabsf(x[b * 32 + j]);
                    m = x[b * 32 + j];
                }
            d = m / -8.0f;
            D = baton_fp16_to_fp32((uint16_t)(q4[b * 18] | q4[b * 18 + 1] << 8));
            for (j = 0; j < 32; j++) {
                const float v = x[b * 32 + j], t = v / d;
                const float bound =
                    (t > 7.5f ? fabsf(d) : fabsf(d) / 2) + 8 * fabsf(d - D) + amax * 1e-6f;

                assert_true(fabsf(v - y[b * 32 + j]) <= bound);
            }
        }
    }
}

/* ---- Q5_0 / Q5_1: hand-built blocks ---- */

/* qh = 0x80010201 (bytes 01 02 01 80): fifth bits of elements 0, 9, 16, 31;
 * qs[0] = 0x9F (element 0 nibble 15, element 16 nibble 9), qs[1] = 0x08
 * (element 1 nibble 8, element 17 nibble 0), every other nibble 0. */
static void q5_fill_hand(uint8_t *qh, uint8_t *qs)
{
    qh[0] = 0x01;
    qh[1] = 0x02;
    qh[2] = 0x01;
    qh[3] = 0x80;
    memset(qs, 0, 16);
    qs[0] = 0x9F;
    qs[1] = 0x08;
}

static void test_q5_known_blocks(void **state)
{
    uint8_t b0[22] = {0x00, 0x40}, b1[24] = {0x00, 0x38, 0x00, 0xBC}; /* d 2; d 0.5, m -1 */
    float y[32];
    int j;

    (void)state;
    q5_fill_hand(b0 + 2, b0 + 6);
    assert_int_equal(baton_dequantize_row_q5_0(b0, y, 32), 0);
    /* Q5_0: d * (q - 16): element 0 q = 31 -> 30, 16: 25 -> 18, 1: 8 -> -16,
     * 17: 0 -> -32, 9: 16 -> 0, 31: 16 -> 0, the rest q = 0 -> -32 */
    for (j = 0; j < 32; j++) {
        const float want = j == 0    ? 30.0f
                           : j == 16 ? 18.0f
                           : j == 1  ? -16.0f
                           : j == 9 || j == 31 ? 0.0f
                                               : -32.0f;

        assert_true(y[j] == want);
    }
    assert_int_equal(baton_dequantize_row(BATON_TYPE_Q5_0, b0, y, 31), BATON_E_SHAPE);

    q5_fill_hand(b1 + 4, b1 + 8);
    assert_int_equal(baton_dequantize_row(BATON_TYPE_Q5_1, b1, y, 32), 0);
    /* Q5_1: 0.5 * q - 1: 31 -> 14.5, 25 -> 11.5, 8 -> 3, 0 -> -1, 16 -> 7 */
    for (j = 0; j < 32; j++) {
        const float want = j == 0    ? 14.5f
                           : j == 16 ? 11.5f
                           : j == 1  ? 3.0f
                           : j == 9 || j == 31 ? 7.0f
                                               : -1.0f;

        assert_true(y[j] == want);
    }
    assert_int_equal(baton_dequantize_row_q5_1(b1, y, 48), BATON_E_SHAPE);
}

/* ggml's rules (quantize_row_q5_0_ref / _q5_1_ref): Q5_0 takes the first
 * element of largest magnitude as -16 d and truncates x/d + 16.5 (at most
 * 31); Q5_1 takes d = (max - min) / 31, m = min, q = trunc((x - min)/d +
 * 0.5). */
static void test_q5_quantize_known(void **state)
{
    float x[32] = {0};
    uint8_t q0[22], q1[24];
    int j;

    (void)state;
    x[0] = -16.0f; /* d = -16 / -16 = 1 */
    x[1] = 16.0f;  /* 32.5 -> 32 -> 31 */
    x[2] = 2.5f;   /* 19 */
    x[3] = -2.5f;  /* 14 */
    x[16] = 15.6f; /* 32.1 -> 31 */
    x[17] = -0.4f; /* 16.1 -> 16 */
    /* every other element 0: 16.5 -> 16 */
    assert_int_equal(baton_quantize_row_q5_0(x, q0, 32), 0);
    assert_int_equal(q0[0], 0x00); /* fp16(1.0) = 0x3C00 */
    assert_int_equal(q0[1], 0x3C);
    /* fifth bits: every q >= 16, i.e. all but elements 0 and 3 */
    assert_int_equal(q0[2], 0xF6);
    assert_int_equal(q0[3], 0xFF);
    assert_int_equal(q0[4], 0xFF);
    assert_int_equal(q0[5], 0xFF);
    assert_int_equal(q0[6], 0x00 | 0xF << 4); /* element 0: 0, element 16: 31 */
    assert_int_equal(q0[7], 0xF | 0x0 << 4);  /* 31, 16 */
    assert_int_equal(q0[8], 0x3);             /* 19, 16 */
    assert_int_equal(q0[9], 0xE);             /* 14, 16 */
    for (j = 4; j < 16; j++)
        assert_int_equal(q0[6 + j], 0x00);

    for (j = 0; j < 32; j++)
        x[j] = (float)(j - 1); /* min -1, max 30: d = 1, q = j */
    x[5] = 3.4f;               /* 4.4 + 0.5 -> 4 */
    x[6] = 5.6f;               /* 6.6 + 0.5 -> 7 */
    assert_int_equal(baton_quantize_row_q5_1(x, q1, 32), 0);
    assert_int_equal(q1[0], 0x00); /* d = fp16(1) */
    assert_int_equal(q1[1], 0x3C);
    assert_int_equal(q1[2], 0x00); /* m = fp16(-1) = 0xBC00 */
    assert_int_equal(q1[3], 0xBC);
    assert_int_equal(q1[4], 0x00); /* fifth bits: elements 16..31 */
    assert_int_equal(q1[5], 0x00);
    assert_int_equal(q1[6], 0xFF);
    assert_int_equal(q1[7], 0xFF);
    for (j = 0; j < 16; j++) {
        const int lo = j == 5 ? 4 : j == 6 ? 7 : j;

        assert_int_equal(q1[8 + j], lo | (j << 4));
    }

    memset(x, 0, sizeof(x)); /* all zero: Q5_0 d = -0, q = 16 everywhere */
    assert_int_equal(baton_quantize_row_q5_0(x, q0, 32), 0);
    assert_int_equal(q0[0], 0x00);
    assert_int_equal(q0[1], 0x80);
    for (j = 2; j < 6; j++)
        assert_int_equal(q0[j], 0xFF);
    for (j = 6; j < 22; j++)
        assert_int_equal(q0[j], 0x00);
    assert_int_equal(baton_quantize_row_q5_1(x, q1, 32), 0); /* d = 0, m = 0, q = 0 */
    for (j = 0; j < 24; j++)
        assert_int_equal(q1[j], 0x00);
}

static void test_q5_quantize_errors(void **state)
{
    float x[64];
    uint8_t out[2 * 24];
    int j;

    (void)state;
    for (j = 0; j < 64; j++)
        x[j] = (float)j;
    memset(out, 0xEE, sizeof(out));
    assert_int_equal(baton_quantize_row_q5_0(x, out, 33), BATON_E_SHAPE);
    assert_int_equal(baton_quantize_row_q5_1(x, out, 48), BATON_E_SHAPE);
    x[40] = NAN; /* second block: nothing at all is written */
    assert_int_equal(baton_quantize_row_q5_0(x, out, 64), BATON_E_INVAL);
    assert_int_equal(baton_quantize_row_q5_1(x, out, 64), BATON_E_INVAL);
    x[40] = -INFINITY;
    assert_int_equal(baton_quantize_row(BATON_TYPE_Q5_1, x, out, 64), BATON_E_INVAL);
    x[40] = 65504.0f * 16.0f * 1.01f; /* Q5_0's scale past binary16 */
    assert_int_equal(baton_quantize_row_q5_0(x, out, 64), BATON_E_INVAL);
    x[40] = 65504.0f * 31.0f * 1.01f; /* Q5_1's scale past binary16 */
    assert_int_equal(baton_quantize_row_q5_1(x, out, 64), BATON_E_INVAL);
    for (j = 32; j < 64; j++)
        x[j] = -70000.0f; /* Q5_1: range 0, but the min past binary16 */
    assert_int_equal(baton_quantize_row_q5_1(x, out, 64), BATON_E_INVAL);
    x[33] = 3.4e38f; /* finite, but max - min overflows to inf */
    x[34] = -3.4e38f;
    assert_int_equal(baton_quantize_row_q5_1(x, out, 64), BATON_E_INVAL);
    for (j = 0; j < (int)sizeof(out); j++)
        assert_int_equal(out[j], 0xEE);
    assert_int_equal(baton_row_bytes(BATON_TYPE_Q5_0, 64), 44);
    assert_int_equal(baton_row_bytes(BATON_TYPE_Q5_1, 64), 48);
    assert_int_equal(baton_row_bytes(BATON_TYPE_Q5_0, 40), 0);
    assert_int_equal(baton_row_bytes(BATON_TYPE_Q5_1, 16), 0);
}

/* Round trips within quant.h's bounds, on blocks of very different scales
 * (and offsets, for Q5_1's min). */
static void test_q5_round_trip_bounds(void **state)
{
    static const float scales[] = {1.0f, 1e-3f, 3e4f, 1e-6f, 1e-9f, 1e3f};
    float x[256], y[256];
    uint8_t q0[8 * 22], q1[8 * 24];
    int b, j, trial;

    (void)state;
    rng_state = 55;
    for (trial = 0; trial < 200; trial++) {
        const float sc = scales[trial % 6];
        const float off = trial % 3 == 0 ? sc * 3.0f : 0.0f;

        for (j = 0; j < 256; j++)
            x[j] = rng_unit() * sc * (float)(1 + j / 32) + off;
        if (trial % 7 == 0)
            x[5] = -x[5] * 4.0f;

        assert_int_equal(baton_quantize_row_q5_0(x, q0, 256), 0);
        assert_int_equal(baton_dequantize_row_q5_0(q0, y, 256), 0);
        for (b = 0; b < 8; b++) {
            float amax = 0.0f, m = 0.0f, d, D;

            for (j = 0; j < 32; j++)
                if (fabsf(x[b * 32 + j]) > amax) {
                    amax = fabsf(x[b * 32 + j]);
                    m = x[b * 32 + j];
                }
            d = m / -16.0f;
            D = baton_fp16_to_fp32((uint16_t)(q0[b * 22] | q0[b * 22 + 1] << 8));
            for (j = 0; j < 32; j++) {
                const float v = x[b * 32 + j], t = v / d;
                const float bound =
                    (t > 15.5f ? fabsf(d) : fabsf(d) / 2) + 16 * fabsf(d - D) + amax * 1e-6f;

                assert_true(fabsf(v - y[b * 32 + j]) <= bound);
            }
        }

        {
            int min_too_big = 0;

            for (b = 0; b < 8; b++) {
                float lo = x[b * 32];

                for (j = 1; j < 32; j++)
                    lo = fminf(lo, x[b * 32 + j]);
                min_too_big |= fabsf(lo) > 65504.0f;
            }
            if (min_too_big) { /* some block's min cannot be binary16 */
                assert_int_equal(baton_quantize_row_q5_1(x, q1, 256), BATON_E_INVAL);
                continue;
            }
        }
        assert_int_equal(baton_quantize_row_q5_1(x, q1, 256), 0);
        assert_int_equal(baton_dequantize_row_q5_1(q1, y, 256), 0);
        for (b = 0; b < 8; b++) {
            float lo = x[b * 32], hi = x[b * 32], d, D, M, bound;

            for (j = 1; j < 32; j++) {
                lo = fminf(lo, x[b * 32 + j]);
                hi = fmaxf(hi, x[b * 32 + j]);
            }
            d = (hi - lo) / 31.0f;
            D = baton_fp16_to_fp32((uint16_t)(q1[b * 24] | q1[b * 24 + 1] << 8));
            M = baton_fp16_to_fp32((uint16_t)(q1[b * 24 + 2] | q1[b * 24 + 3] << 8));
            bound = d / 2 + 31 * fabsf(d - D) + fabsf(lo - M) +
                    (fabsf(lo) + fabsf(hi)) * 1e-6f;
            for (j = 0; j < 32; j++)
                assert_true(fabsf(x[b * 32 + j] - y[b * 32 + j]) <= bound);
        }
    }
}

/* ---- K-quants ---- */

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v & 0xFF);
    p[1] = (uint8_t)(v >> 8);
}

/* Chosen integers per element e and sub-block j; each test packs them by the
 * byte layout written in quant.h and expects d * sc * q - dmin * m, with
 * d = 0.5 (0x3800) and dmin = 0.25 (0x3400): every product is exact. */
#define KD 0.5
#define KDMIN 0.25

static void check_k_block(uint32_t type, const uint8_t *blk, const double *want)
{
    float y[512];
    int e;

    assert_int_equal(baton_dequantize_row_k(type, blk, y, 256), 0);
    for (e = 0; e < 256; e++)
        assert_true((double)y[e] == want[e]);
    /* through the type switch too, and k = 512 reads two super-blocks */
    assert_int_equal(baton_dequantize_row(type, blk, y, 256), 0);
    for (e = 0; e < 256; e++)
        assert_true((double)y[e] == want[e]);
}

static void test_q2_k_known_block(void **state)
{
    uint8_t b[84];
    double want[256];
    int e, j;

    (void)state;
    memset(b, 0, sizeof b);
    for (j = 0; j < 16; j++) /* scale (j + 3) & 15, min j % 5 */
        b[j] = (uint8_t)(((j + 3) & 15) | (j % 5) << 4);
    for (e = 0; e < 256; e++) { /* q = (e * 7 + e / 64) & 3 */
        const int q = (e * 7 + e / 64) & 3, h = e / 128, g = (e % 128) / 32, l = e % 32;
        b[16 + 32 * h + l] |= (uint8_t)(q << (2 * g));
        want[e] = KD * ((e / 16 + 3) & 15) * q - KDMIN * ((e / 16) % 5);
    }
    put16(b + 80, 0x3800);
    put16(b + 82, 0x3400);
    /* spot values: e = 0: q 0, sc 3, m 0 -> 0; e = 17: j 1, q = 119 & 3 = 3,
     * sc 4, m 1 -> 0.5 * 4 * 3 - 0.25 = 5.75; e = 255: j 15, sc 2, m 0,
     * q = (1785 + 3) & 3 = 0 -> 0 */
    assert_true(want[0] == 0.0 && want[17] == 5.75 && want[255] == 0.0);
    check_k_block(BATON_TYPE_Q2_K, b, want);
}

static void test_q3_k_known_block(void **state)
{
    uint8_t b[110];
    double want[256];
    int e, j;

    (void)state;
    memset(b, 0, sizeof b);
    for (j = 0; j < 16; j++) { /* 6-bit stored scale s = 4 j + 2 (2..62) */
        const int s = 4 * j + 2;
        b[96 + (j % 8)] |= (uint8_t)((s & 15) << (j < 8 ? 0 : 4));
        b[96 + 8 + j % 4] |= (uint8_t)((s >> 4) << (2 * (j / 4)));
    }
    for (e = 0; e < 256; e++) { /* q = (e % 8) - 4, in -4..3 */
        const int q = e % 8 - 4, h = e / 128, g = (e % 128) / 32, l = e % 32;
        const int u = q + 4; /* low 2 bits in qs, bit 2 in hmask (set: no -4) */
        b[32 + 32 * h + l] |= (uint8_t)((u & 3) << (2 * g));
        if (u & 4)
            b[l] |= (uint8_t)(1 << (4 * h + g));
        want[e] = KD * (4 * (e / 16) + 2 - 32) * q;
    }
    put16(b + 108, 0x3800);
    /* e = 0: s 2 -> sc -30, q -4 -> 0.5 * -30 * -4 = 60; e = 255: sc 30,
     * q 3 -> 45 */
    assert_true(want[0] == 60.0 && want[255] == 45.0);
    check_k_block(BATON_TYPE_Q3_K, b, want);
}

/* Q4_K / Q5_K scale bytes: 6-bit sc[j], m[j] for j = 0..7 (quant.h). */
static void pack_k4_scales(uint8_t *S, const int *sc, const int *m)
{
    int j;

    for (j = 0; j < 4; j++) {
        S[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        S[j + 4] = (uint8_t)(m[j] | (m[j + 4] >> 4) << 6);
        S[j + 8] = (uint8_t)((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
    }
}

static void test_q4_k_q5_k_known_blocks(void **state)
{
    static const int sc[8] = {1, 63, 17, 32, 48, 5, 60, 33};
    static const int m[8] = {0, 2, 63, 31, 16, 47, 1, 62};
    uint8_t b4[144], b5[176];
    double w4[256], w5[256];
    int e;

    (void)state;
    memset(b4, 0, sizeof b4);
    memset(b5, 0, sizeof b5);
    put16(b4, 0x3800);
    put16(b4 + 2, 0x3400);
    put16(b5, 0x3800);
    put16(b5 + 2, 0x3400);
    pack_k4_scales(b4 + 4, sc, m);
    pack_k4_scales(b5 + 4, sc, m);
    for (e = 0; e < 256; e++) {
        const int j = e / 32, c = e / 64, u = e % 64;
        const int q4 = (e * 5 + 3) % 16, q5 = (e * 11 + 7) % 32;
        uint8_t *n4 = &b4[16 + 32 * c + u % 32], *n5 = &b5[48 + 32 * c + u % 32];

        *n4 |= (uint8_t)(u < 32 ? q4 : q4 << 4);
        *n5 |= (uint8_t)(u < 32 ? (q5 & 15) : (q5 & 15) << 4);
        if (q5 >= 16)
            b5[16 + e % 32] |= (uint8_t)(1 << j);
        w4[e] = KD * sc[j] * q4 - KDMIN * m[j];
        w5[e] = KD * sc[j] * q5 - KDMIN * m[j];
    }
    /* e = 40: j 1 (sc 63, m 2), q4 = 203 % 16 = 11 -> 346.5 - 0.5 = 346;
     * q5 = 447 % 32 = 31 -> 976.5 - 0.5 = 976 */
    assert_true(w4[40] == 346.0 && w5[40] == 976.0);
    check_k_block(BATON_TYPE_Q4_K, b4, w4);
    check_k_block(BATON_TYPE_Q5_K, b5, w5);
}

static void test_q6_k_known_block(void **state)
{
    uint8_t b[210];
    double want[256];
    int e, j;

    (void)state;
    memset(b, 0, sizeof b);
    for (j = 0; j < 16; j++) /* int8 scales -128, -111, .. */
        b[192 + j] = (uint8_t)(int8_t)(-128 + 17 * j);
    for (e = 0; e < 256; e++) { /* q = (e * 13) % 64 - 32 */
        const int q = (e * 13) % 64 - 32, u = q + 32;
        const int h = e / 128, t = (e % 128) / 32, i = e % 32;

        b[64 * h + 32 * (t % 2) + i] |= (uint8_t)(t < 2 ? u & 15 : (u & 15) << 4);
        b[128 + 32 * h + i] |= (uint8_t)((u >> 4) << (2 * t));
        want[e] = KD * (-128 + 17 * (e / 16)) * q;
    }
    put16(b + 208, 0x3800);
    /* e = 0: -128 * -32 * 0.5 = 2048; e = 255: sc 127, q = 3315 % 64 - 32
     * = 19 -> 1206.5 */
    assert_true(want[0] == 2048.0 && want[255] == 1206.5);
    check_k_block(BATON_TYPE_Q6_K, b, want);
}

/* Round trips within the bounds written in quant.c, on super-blocks of very
 * different scales, with outliers and all-positive / all-negative blocks. */
static void test_k_round_trip_bounds(void **state)
{
    static const uint32_t types[5] = {BATON_TYPE_Q2_K, BATON_TYPE_Q3_K, BATON_TYPE_Q4_K,
                                      BATON_TYPE_Q5_K, BATON_TYPE_Q6_K};
    static const int sub[5] = {16, 16, 32, 32, 16}, nmax[5] = {3, 4, 15, 31, 32};
    static const int has_min[5] = {1, 0, 1, 1, 0};
    static const uint32_t bytes[5] = {84, 110, 144, 176, 210};
    static const float scales[] = {1.0f, 1e-2f, 300.0f, 3e-3f};
    float x[512], y[512];
    uint8_t q[2 * 210];
    double rms_sum[5] = {0}, ref_sum = 0;
    int t, trial, e;

    (void)state;
    rng_state = 7;
    for (trial = 0; trial < 120; trial++) {
        const float sc = scales[trial % 4];

        for (e = 0; e < 512; e++)
            x[e] = rng_unit() * sc * (float)(1 + e / 64);
        if (trial % 5 == 1)
            x[77] = 9.0f * sc; /* an outlier */
        if (trial % 5 == 2)
            for (e = 0; e < 256; e++)
                x[e] = fabsf(x[e]) + sc; /* all positive: the min is 0 */
        if (trial % 5 == 3)
            for (e = 256; e < 512; e++)
                x[e] = -fabsf(x[e]) - sc;
        for (e = 0; e < 512; e++)
            ref_sum += (double)x[e] * x[e];
        for (t = 0; t < 5; t++) {
            const int n = sub[t];
            int blk, j, i;

            assert_int_equal(baton_row_bytes(types[t], 512), 2 * bytes[t]);
            assert_int_equal(baton_quantize_row_k(types[t], x, q, 512), 0);
            assert_int_equal(baton_dequantize_row_k(types[t], q, y, 512), 0);
            for (blk = 0; blk < 2; blk++) {
                const uint8_t *bb = q + blk * bytes[t];
                /* D, Dmin where each layout stores them (quant.h) */
                uint32_t doff = t == 0 ? 80 : t == 1 ? 108 : t == 4 ? 208 : 0;
                const float D = baton_fp16_to_fp32((uint16_t)(bb[doff] | bb[doff + 1] << 8));
                const float Dmin =
                    has_min[t] ? baton_fp16_to_fp32((uint16_t)(bb[doff + 2] | bb[doff + 3] << 8))
                               : 0.0f;

                for (j = 0; j < 256 / n; j++) {
                    const float *xs = x + blk * 256 + j * n;
                    const float *ys = y + blk * 256 + j * n;
                    float lo = 0.0f, hi = xs[0], amax = 0.0f, a, bound;

                    for (i = 0; i < n; i++) {
                        lo = fminf(lo, xs[i]);
                        hi = fmaxf(hi, xs[i]);
                        amax = fmaxf(amax, fabsf(xs[i]));
                    }
                    if (has_min[t]) {
                        a = (hi - lo) / (float)nmax[t];
                        bound = a / 2 + (float)nmax[t] * D / 2 + Dmin / 2;
                    } else {
                        a = amax / (float)nmax[t];
                        bound = a + (float)nmax[t] * D / 2;
                    }
                    bound += amax * 1e-5f;
                    for (i = 0; i < n; i++) {
                        const double err = fabs((double)xs[i] - ys[i]);

                        rms_sum[t] += err * err;
                        if (!(err <= bound))
                            fail_msg("type %u trial %d block %d sub %d elem %d: |%g - %g| > %g",
                                     types[t], trial, blk, j, i, xs[i], ys[i], bound);
                    }
                }
            }
        }
    }
    /* more bits, less error: relative RMS errors strictly in type order, and
     * each no worse than a uniform grid over the sub-block's range would give
     * on uniform data (step 2A / nmax with a min: 1 / nmax of the RMS of x;
     * symmetric step A / |qmin|: 1 / (2 |qmin|)) */
    for (t = 1; t < 5; t++)
        assert_true(rms_sum[t] < rms_sum[t - 1]);
    for (t = 0; t < 5; t++)
        assert_true(sqrt(rms_sum[t] / ref_sum) <
                    1.0 / (has_min[t] ? nmax[t] : 2 * nmax[t]));
}

static void test_k_errors(void **state)
{
    static const uint32_t types[5] = {BATON_TYPE_Q2_K, BATON_TYPE_Q3_K, BATON_TYPE_Q4_K,
                                      BATON_TYPE_Q5_K, BATON_TYPE_Q6_K};
    static float x[512], y[512];
    static uint8_t out[2 * 210];
    int t, e;

    (void)state;
    for (e = 0; e < 512; e++)
        x[e] = (float)(e % 37) - 18.0f;
    for (t = 0; t < 5; t++) {
        memset(out, 0xEE, sizeof out);
        assert_int_equal(baton_quantize_row_k(types[t], x, out, 300), BATON_E_SHAPE);
        assert_int_equal(baton_quantize_row(types[t], x, out, 32), BATON_E_SHAPE);
        assert_int_equal(baton_dequantize_row_k(types[t], out, y, 257), BATON_E_SHAPE);
        assert_int_equal(baton_row_bytes(types[t], 300), 0);
        x[400] = NAN; /* second super-block: nothing at all is written */
        assert_int_equal(baton_quantize_row_k(types[t], x, out, 512), BATON_E_INVAL);
        x[400] = -INFINITY;
        assert_int_equal(baton_quantize_row(types[t], x, out, 512), BATON_E_INVAL);
        x[400] = 3e38f; /* finite, but its scale is past binary16 */
        assert_int_equal(baton_quantize_row_k(types[t], x, out, 512), BATON_E_INVAL);
        x[400] = (float)(400 % 37) - 18.0f;
        for (e = 0; e < (int)sizeof out; e++)
            assert_int_equal(out[e], 0xEE);
        assert_int_equal(baton_quantize_row_k(types[t], x, out, 0), 0);
    }
    assert_int_equal(baton_quantize_row_k(BATON_TYPE_Q8_0, x, out, 256), BATON_E_UNSUPPORTED);
    assert_int_equal(baton_dequantize_row_k(BATON_TYPE_Q4_0, out, y, 256), BATON_E_UNSUPPORTED);
    assert_int_equal(baton_dequantize_row_k(15, out, y, 256), BATON_E_UNSUPPORTED);
    assert_int_equal(baton_row_bytes(BATON_TYPE_Q2_K, 256), 84);
    assert_int_equal(baton_row_bytes(BATON_TYPE_Q3_K, 512), 220);
    assert_int_equal(baton_row_bytes(BATON_TYPE_Q4_K, 256), 144);
    assert_int_equal(baton_row_bytes(BATON_TYPE_Q5_K, 768), 528);
    assert_int_equal(baton_row_bytes(BATON_TYPE_Q6_K, 256), 210);
}

/* F16 rows: binary16's half-ulp bound, unaligned destination. */
static void test_f16_row_round_trip(void **state)
{
    float x[100], y[100];
    uint8_t h[2 * 100 + 1];
    int j;

    (void)state;
    rng_state = 7;
    for (j = 0; j < 100; j++)
        x[j] = rng_unit() * 1000.0f;
    assert_int_equal(baton_quantize_row(BATON_TYPE_F16, x, h + 1, 100), 0);
    assert_int_equal(baton_dequantize_row(BATON_TYPE_F16, h + 1, y, 100), 0);
    for (j = 0; j < 100; j++)
        assert_true(fabsf(x[j] - y[j]) <= fabsf(x[j]) * ldexpf(1.0f, -11) + ldexpf(1.0f, -25));
}

/* ---- activation quantizer ---- */

/* The grouped layout of matmul.h, with hand-computed entries: k = 160 (5
 * blocks: one full group and one with 3 zero blocks of padding), 2
 * columns. */
static void test_act_quantizer(void **state)
{
    const uint64_t k = 160, cb = baton_cpu_act_col_bytes(160);
    float x[2 * 160];
    uint8_t *act = aligned_alloc(64, 2 * cb);
    int j, lvl;

    (void)state;
    assert_int_equal(cb, 512); /* 2 groups of 256 */
    assert_int_equal(baton_cpu_mul_mat_work_bytes(BATON_TYPE_Q8_0, 160, 2), 1024);
    assert_int_equal(baton_cpu_mul_mat_work_bytes(BATON_TYPE_Q4_0, 32, 3), 768);
    assert_int_equal(baton_cpu_mul_mat_work_bytes(BATON_TYPE_F16, 160, 2), 0);
    assert_non_null(act);
    for (j = 0; j < 2 * 160; j++)
        x[j] = (float)(j % 7) - 3.0f;
    x[0] = 127.0f; /* column 0 block 0: d = 1, q = x (2.5 rounds to even 2) */
    x[1] = 2.5f;
    x[2] = -3.5f;
    x[17] = -2.0f;
    x[40] = NAN; /* column 0 block 1: non-finite */
    for (j = 64; j < 96; j++)
        x[j] = 0.0f; /* column 0 block 2: zero */
    for (lvl = BATON_CPU_ISA_SCALAR; lvl <= BATON_CPU_ISA_AVX512; lvl++) {
        const int8_t *q = (const int8_t *)act;
        const int32_t *corr = (const int32_t *)(act + 128);
        const float *d = (const float *)(act + 192);

        if ((int)baton_cpu_isa_set((enum baton_cpu_isa)lvl) != lvl)
            continue;
        memset(act, 0x5A, 2 * cb);
        baton_cpu_quantize_act(NULL, BATON_TYPE_Q8_0, x, k, 2, act);
        /* block 0 */
        for (j = 0; j < 4; j++)
            assert_true(d[j] == 1.0f);
        assert_int_equal(q[0], 127);
        assert_int_equal(q[1], 2);
        assert_int_equal(q[2], -4);
        assert_int_equal(q[3], 0);   /* 3 % 7 - 3 */
        assert_int_equal(q[64], -1); /* element 16: 16 % 7 - 3 */
        assert_int_equal(q[65], -2); /* element 17 */
        /* Q8_0 (bias 128): the block's whole corr in lane 0, the other
         * three 0 (matmul.h); block 0's 32 q sum to 123 (below) */
        assert_int_equal(corr[0], -128 * 123);
        assert_int_equal(corr[1] | corr[2] | corr[3], 0);
        /* block 1: non-finite */
        assert_true(isnan(d[4]));
        for (j = 0; j < 16; j++) {
            assert_int_equal(q[16 + j], 0);
            assert_int_equal(q[64 + 16 + j], 0);
        }
        assert_int_equal(corr[4], 0);
        /* block 2: zero; block 3: x = j % 7 - 3, amax 3 */
        assert_true(d[8] == 0.0f);
        assert_int_equal(q[32], 0);
        assert_true(d[12] == 3.0f / 127.0f);
        for (j = 0; j < 16; j++) {
            assert_int_equal(
                q[48 + j], (int)lrintf(((float)((96 + j) % 7) - 3.0f) * (1.0f / (3.0f / 127.0f))));
            assert_int_equal(q[64 + 48 + j], (int)lrintf(((float)((112 + j) % 7) - 3.0f) *
                                                         (1.0f / (3.0f / 127.0f))));
        }
        /* group 1: block 4, then 3 zero blocks */
        for (j = 0; j < 16; j++)
            assert_int_equal(q[256 + 16 + j] | q[256 + 64 + 16 + j] | q[256 + 48 + j], 0);
        for (j = 4; j < 16; j++) {
            assert_int_equal(((const int32_t *)(act + 256 + 128))[j], 0);
            assert_true(((const float *)(act + 256 + 192))[j] == 0.0f);
        }
        assert_true(((const float *)(act + 256 + 192))[0] == 3.0f / 127.0f);
        /* column 1 starts at cb: its block 0 is x[160..191] */
        assert_true(((const float *)(act + cb + 192))[0] == 3.0f / 127.0f);
        assert_int_equal(((const int8_t *)(act + cb))[0],
                         (int)lrintf(((float)(160 % 7) - 3.0f) * (1.0f / (3.0f / 127.0f))));

        /* Q4_0 (bias 8): the block's whole corr in lane 0, the other
         * three 0 (matmul.h); block 0's 32 q sum to 123: j % 7 - 3 over
         * j < 32 gives -6, and x[0], x[1], x[2], x[17] add 130, 4, -3, -2 */
        baton_cpu_quantize_act(NULL, BATON_TYPE_Q4_0, x, k, 1, act);
        {
            int32_t sum = 0;

            for (j = 0; j < 16; j++)
                sum += q[j] + q[64 + j];
            assert_int_equal(sum, 123);
        }
        assert_int_equal(corr[0], -8 * 123);
        assert_int_equal(corr[1] | corr[2] | corr[3], 0);
    }
    baton_cpu_isa_set(BATON_CPU_ISA_AVX512);
    free(act);
}

/* ---- GET_ROWS on F16 / Q8_0 / Q4_0 tables ---- */

static void get_rows_case(uint32_t type, uint64_t k)
{
    enum { R = 5 };
    const uint64_t rb = baton_row_bytes(type, k);
    static float src[R * 256], want[3 * 256], got[3 * 256];
    static uint8_t table[R * 256 * 2 + 4] __attribute__((aligned(4)));
    int32_t ids[3] = {4, 0, 4};
    struct tg t;
    uint32_t lt, li, ly, n;
    int j;

    assert_true(k <= 256 && rb * R <= sizeof(table));
    for (j = 0; j < (int)(R * k); j++)
        src[j] = rng_unit() * 3.0f;
    for (j = 0; j < R; j++)
        assert_int_equal(baton_quantize_row(type, src + j * k, table + j * rb, k), 0);
    for (j = 0; j < 3; j++)
        assert_int_equal(baton_dequantize_row(type, table + ids[j] * rb, want + j * k, k), 0);
    tg_init(&t);
    lt = tg_leaf(&t, type, k, R, 1, 1, table);
    li = tg_leaf(&t, BATON_TYPE_I32, 3, 1, 1, 1, ids);
    ly = tg_leaf(&t, BATON_TYPE_F32, k, 3, 1, 1, got);
    n = tg_node(&t, BATON_OP_GET_ROWS, BATON_TYPE_F32, k, 3, 1, 1, SRC2(lt, li), NULL);
    tg_at(&t, n)->out_leaf = ly;
    assert_int_equal(tg_run(&t, NULL), 0);
    assert_memory_equal(got, want, 3 * k * sizeof(float));
    for (j = 0; j < (int)(3 * k); j++) /* and close to the original */
        assert_true(fabsf(got[j] - src[ids[j / k] * k + j % k]) <= 0.5f);

    ids[1] = R; /* out of range: nothing written */
    memset(got, 0x77, sizeof(got));
    assert_int_equal(tg_run(&t, NULL), BATON_E_INDEX);
    assert_int_equal(bits(got[0]), 0x77777777u);
    ids[1] = 0;
}

static void test_get_rows_types(void **state)
{
    (void)state;
    rng_state = 99;
    get_rows_case(BATON_TYPE_F16, 7);
    get_rows_case(BATON_TYPE_F16, 64);
    get_rows_case(BATON_TYPE_BF16, 7);
    get_rows_case(BATON_TYPE_BF16, 64);
    get_rows_case(BATON_TYPE_Q8_0, 32);
    get_rows_case(BATON_TYPE_Q8_0, 64);
    get_rows_case(BATON_TYPE_Q4_0, 64);
    get_rows_case(BATON_TYPE_Q5_0, 64);
    get_rows_case(BATON_TYPE_Q5_1, 32);
    get_rows_case(BATON_TYPE_IQ4_NL, 64);
    get_rows_case(BATON_TYPE_IQ4_XS, 256);
}

/* Hand-computed MUL_MAT of BF16 weights through a graph, k = 40 (a
 * ragged tail past 32 lanes): row 0 holds 1.5 at even j and -0.5 at odd j,
 * row 1 2^100 at j = 1, row 2 2^-100 at j = 3 (beyond binary16's range:
 * read as bfloat16), zeros elsewhere, against x_j = j; every sum is
 * exact. */
static void test_mul_mat_bf16_known(void **state)
{
    uint8_t w[3 * 40 * 2];
    float x[40], y[3];
    struct tg t;
    uint32_t lw, lx, ly, n;
    int j;

    (void)state;
    memset(w, 0, sizeof w);
    for (j = 0; j < 40; j++) {
        const uint16_t h = j % 2 ? 0xBF00 : 0x3FC0; /* -0.5, 1.5 */

        w[2 * j] = (uint8_t)(h & 0xFF);
        w[2 * j + 1] = (uint8_t)(h >> 8);
        x[j] = (float)j;
    }
    w[80 + 2 * 1] = 0x80; /* 0x7180: 2^100 */
    w[80 + 2 * 1 + 1] = 0x71;
    w[160 + 2 * 3] = 0x80; /* 0x0D80: 2^-100 */
    w[160 + 2 * 3 + 1] = 0x0D;
    tg_init(&t);
    lw = tg_leaf(&t, BATON_TYPE_BF16, 40, 3, 1, 1, w);
    lx = tg_leaf(&t, BATON_TYPE_F32, 40, 1, 1, 1, x);
    ly = tg_leaf(&t, BATON_TYPE_F32, 3, 1, 1, 1, y);
    n = tg_node(&t, BATON_OP_MUL_MAT, BATON_TYPE_F32, 3, 1, 1, 1, SRC2(lw, lx), NULL);
    tg_at(&t, n)->out_leaf = ly;
    assert_int_equal(tg_run(&t, NULL), 0);
    assert_true(y[0] == 1.5f * 380.0f - 0.5f * 400.0f); /* evens 0..38, odds 1..39 */
    assert_true(y[1] == ldexpf(1.0f, 100));
    assert_true(y[2] == ldexpf(3.0f, -100));
}

/* Hand-computed MUL_MAT through a graph: a Q8_0 row with d = 0.5 and
 * q = 1..32 against x = 1 everywhere (x quantizes exactly: d = 1/127,
 * q = 127), and a Q4_0 row (d = 2, nibbles 9: values 2) against x = j. */
static void test_mul_mat_quant_known(void **state)
{
    uint8_t w8[34] = {0x00, 0x38}, w4[18] = {0x00, 0x40};
    float x[32], y[1];
    struct tg t;
    uint32_t lw, lx, ly, n;
    int j;

    (void)state;
    for (j = 0; j < 32; j++) {
        w8[2 + j] = (uint8_t)(j + 1);
        x[j] = 1.0f;
    }
    tg_init(&t);
    lw = tg_leaf(&t, BATON_TYPE_Q8_0, 32, 1, 1, 1, w8);
    lx = tg_leaf(&t, BATON_TYPE_F32, 32, 1, 1, 1, x);
    ly = tg_leaf(&t, BATON_TYPE_F32, 1, 1, 1, 1, y);
    n = tg_node(&t, BATON_OP_MUL_MAT, BATON_TYPE_F32, 1, 1, 1, 1, SRC2(lw, lx), NULL);
    tg_at(&t, n)->out_leaf = ly;
    assert_int_equal(tg_run(&t, NULL), 0);
    /* 0.5 * (1/127) * 127 * (1 + ... + 32) = 264, up to the rounding of
     * 0.5 * fl(1/127) and of its products with the exact group sums */
    assert_true(fabsf(y[0] - 264.0f) <= 264.0f * 1e-6f);

    for (j = 0; j < 16; j++)
        w4[2 + j] = 0x99;
    for (j = 0; j < 32; j++)
        x[j] = (float)(j % 4) * 42.0f; /* amax 126: d = 126/127, q = 0, 42, 84, 126 / 42*127/126 */
    tg_init(&t);
    lw = tg_leaf(&t, BATON_TYPE_Q4_0, 32, 1, 1, 1, w4);
    lx = tg_leaf(&t, BATON_TYPE_F32, 32, 1, 1, 1, x);
    ly = tg_leaf(&t, BATON_TYPE_F32, 1, 1, 1, 1, y);
    n = tg_node(&t, BATON_OP_MUL_MAT, BATON_TYPE_F32, 1, 1, 1, 1, SRC2(lw, lx), NULL);
    tg_at(&t, n)->out_leaf = ly;
    assert_int_equal(tg_run(&t, NULL), 0);
    /* 2 * sum(x) = 2 * 8 * (0 + 42 + 84 + 126) = 4032; q = 0, 42.33 -> 42,
     * 84.67 -> 85, 127: error <= 8 blocks-of-4 * 2 * d/2 * 2 elements */
    assert_true(fabsf(y[0] - 4032.0f) <= 8 * 2 * (126.0f / 127.0f));

    /* Q5_0, d = 2, nibbles 9 with every fifth bit set: q = 25, values
     * 2 * (25 - 16) = 18; Q5_1, d = 0.5, m = -1, nibbles 9, no fifth bit:
     * values 0.5 * 9 - 1 = 3.5; same x (sum 2016; error as above, per unit
     * of weight) */
    {
        uint8_t w50[22] = {0x00, 0x40, 0xFF, 0xFF, 0xFF, 0xFF};
        uint8_t w51[24] = {0x00, 0x38, 0x00, 0xBC};

        for (j = 0; j < 16; j++) {
            w50[6 + j] = 0x99;
            w51[8 + j] = 0x99;
        }
        tg_init(&t);
        lw = tg_leaf(&t, BATON_TYPE_Q5_0, 32, 1, 1, 1, w50);
        lx = tg_leaf(&t, BATON_TYPE_F32, 32, 1, 1, 1, x);
        ly = tg_leaf(&t, BATON_TYPE_F32, 1, 1, 1, 1, y);
        n = tg_node(&t, BATON_OP_MUL_MAT, BATON_TYPE_F32, 1, 1, 1, 1, SRC2(lw, lx), NULL);
        tg_at(&t, n)->out_leaf = ly;
        assert_int_equal(tg_run(&t, NULL), 0);
        assert_true(fabsf(y[0] - 18.0f * 2016.0f) <= 8 * 18 * (126.0f / 127.0f));

        tg_init(&t);
        lw = tg_leaf(&t, BATON_TYPE_Q5_1, 32, 1, 1, 1, w51);
        lx = tg_leaf(&t, BATON_TYPE_F32, 32, 1, 1, 1, x);
        ly = tg_leaf(&t, BATON_TYPE_F32, 1, 1, 1, 1, y);
        n = tg_node(&t, BATON_OP_MUL_MAT, BATON_TYPE_F32, 1, 1, 1, 1, SRC2(lw, lx), NULL);
        tg_at(&t, n)->out_leaf = ly;
        assert_int_equal(tg_run(&t, NULL), 0);
        assert_true(fabsf(y[0] - 3.5f * 2016.0f) <= 8 * 3.5f * (126.0f / 127.0f));
    }
}


/* ---- IQ4_NL / IQ4_XS ---- */

static const int iq4_g[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                              1,    13,   25,  38,  53,  69,  89,  113};

/* Hand-built blocks: IQ4_NL with d = 0.5 and element i of the grid level
 * (5 i + 3) % 16; IQ4_XS with d = 0.25, sub-block scales ls_j = {0, 63,
 * 32, 1, 33, 17, 48, 31} and level (7 e + 1) % 16 at element e. Every
 * product is exact, so the floats must equal the formulas of quant.h. */
static void test_iq4_known_blocks(void **state)
{
    static const int ls[8] = {0, 63, 32, 1, 33, 17, 48, 31};
    uint8_t nl[2 * 18], xs[136];
    float y[256];
    int e, j;

    (void)state;
    for (j = 0; j < 16; j++)
        assert_int_equal(baton_iq4_grid[j], iq4_g[j]);
    memset(nl, 0, sizeof nl);
    put16(nl, 0x3800);
    put16(nl + 18, 0xB800); /* second block: d = -0.5 */
    for (e = 0; e < 32; e++) {
        const int q = (5 * e + 3) % 16;

        nl[2 + e % 16] |= (uint8_t)(e < 16 ? q : q << 4);
        nl[18 + 2 + e % 16] |= (uint8_t)(e < 16 ? q : q << 4);
    }
    assert_int_equal(baton_dequantize_row_iq4_nl(nl, y, 64), 0);
    for (e = 0; e < 64; e++)
        assert_true((double)y[e] == (e < 32 ? 0.5 : -0.5) * iq4_g[(5 * (e % 32) + 3) % 16]);
    assert_int_equal(baton_dequantize_row(BATON_TYPE_IQ4_NL, nl, y, 32), 0);
    assert_true(y[0] == 0.5f * -65.0f && y[31] == 0.5f * 89.0f); /* levels 3, 14 */

    memset(xs, 0, sizeof xs);
    put16(xs, 0x3400);
    for (j = 0; j < 8; j++) {
        xs[4 + j / 2] |= (uint8_t)((ls[j] & 15) << 4 * (j % 2));
        xs[2 + j / 4] |= (uint8_t)((ls[j] >> 4) << 2 * (j % 4));
    }
    for (e = 0; e < 256; e++) {
        const int q = (7 * e + 1) % 16, i = e % 32;

        xs[8 + 16 * (e / 32) + i % 16] |= (uint8_t)(i < 16 ? q : q << 4);
    }
    assert_int_equal(baton_dequantize_row_iq4_xs(xs, y, 256), 0);
    for (e = 0; e < 256; e++)
        assert_true((double)y[e] == 0.25 * (ls[e / 32] - 32) * iq4_g[(7 * e + 1) % 16]);
    /* e = 32: ls 63 (31), level 1 (-104): 0.25 * 31 * -104 = -806 */
    assert_true(y[32] == -806.0f);
    assert_int_equal(baton_dequantize_row(BATON_TYPE_IQ4_XS, xs, y, 256), 0);
    assert_true(y[32] == -806.0f && y[0] == 0.25f * -32.0f * -104.0f);
    assert_int_equal(baton_dequantize_row_iq4_nl(nl, y, 33), BATON_E_SHAPE);
    assert_int_equal(baton_dequantize_row_iq4_xs(xs, y, 32), BATON_E_SHAPE);
    assert_int_equal(baton_row_bytes(BATON_TYPE_IQ4_NL, 64), 36);
    assert_int_equal(baton_row_bytes(BATON_TYPE_IQ4_NL, 48), 0);
    assert_int_equal(baton_row_bytes(BATON_TYPE_IQ4_XS, 512), 272);
    assert_int_equal(baton_row_bytes(BATON_TYPE_IQ4_XS, 288), 0);
}

/* The index of the level of the nibble of element i (0..31) of the 16
 * bytes at qs. */
static int iq4_nibble(const uint8_t *qs, int i)
{
    return i < 16 ? qs[i] & 15 : qs[i - 16] >> 4;
}

/* Each element is the nearest level of x / S, S its stored scale (quant.c's
 * promise): no other level is closer, up to float rounding. */
static void check_nearest(const float *x, float S, const uint8_t *qs)
{
    int i, l;

    for (i = 0; i < 32; i++) {
        const double got = fabs((double)x[i] - (double)S * iq4_g[iq4_nibble(qs, i)]);

        for (l = 0; l < 16; l++)
            assert_true(got <= fabs((double)x[i] - (double)S * iq4_g[l]) + 1e-6 * fabs(x[i]));
    }
}

/* The quantizers on data of very different scales, outliers, one-signed
 * blocks and zero blocks: every element takes the nearest level of its
 * stored scale, IQ4_XS's largest sub-block scale maps to -32 or 31, the
 * dequantized values stay close, and on random data the error is below
 * Q4_0's (the reason the format exists). */
static void test_iq4_quantize(void **state)
{
    enum { K = 1024 };
    static float x[K], y[K], y4[K];
    static uint8_t nl[K / 32 * 18], xs[K / 256 * 136], q4[K / 32 * 18];
    double e_nl = 0, e_xs = 0, e_q4 = 0;
    int round, b, j, i;

    (void)state;
    rng_state = 4242;
    for (round = 0; round < 6; round++) {
        const float scale = round == 0 ? 1.0f : round == 1 ? 1e-3f : round == 2 ? 300.0f : 1.0f;

        for (i = 0; i < K; i++) {
            /* a sum of uniforms: bell-shaped, as trained weights are */
            x[i] = scale * (rng_unit() + rng_unit() + rng_unit());
            if (round == 3)
                x[i] = fabsf(x[i]); /* one-signed */
            if (round == 4 && i % 97 == 0)
                x[i] *= 40.0f; /* outliers */
            if (round == 5 && i < 300)
                x[i] = 0.0f; /* zero blocks, a zero sub-block */
        }
        assert_int_equal(baton_quantize_row_iq4_nl(x, nl, K), 0);
        assert_int_equal(baton_quantize_row(BATON_TYPE_IQ4_XS, x, xs, K), 0);
        assert_int_equal(baton_quantize_row_q4_0(x, q4, K), 0);
        assert_int_equal(baton_dequantize_row_iq4_nl(nl, y, K), 0);
        for (b = 0; b < K / 32; b++)
            check_nearest(x + 32 * b, baton_fp16_to_fp32((uint16_t)(nl[18 * b] | nl[18 * b + 1] << 8)),
                          nl + 18 * b + 2);
        for (b = 0; b < K / 256; b++) {
            const uint8_t *sb = xs + 136 * b;
            const float d = baton_fp16_to_fp32((uint16_t)(sb[0] | sb[1] << 8));
            const int sh = sb[2] | sb[3] << 8;
            int lmax = 0;

            for (j = 0; j < 8; j++) {
                const int l = (((sb[4 + j / 2] >> 4 * (j % 2)) & 15) | ((sh >> 2 * j) & 3) << 4) - 32;

                lmax = abs(l) > abs(lmax) ? l : lmax;
                check_nearest(x + 256 * b + 32 * j, d * (float)l, sb + 8 + 16 * j);
            }
            /* -32 before d's rounding to binary16, so -32 or its neighbour */
            assert_true(d == 0.0f || lmax == -32 || lmax == 31 || lmax == -31);
        }
        if (round == 5) {
            for (i = 0; i < 288; i++) /* all-zero blocks dequantize to 0 */
                assert_true(y[i] == 0.0f);
            assert_true(nl[0] == 0 && nl[1] == 0);
        }
        if (round == 0 || round == 2) {
            float y2[K];

            assert_int_equal(baton_dequantize_row_iq4_xs(xs, y2, K), 0);
            assert_int_equal(baton_dequantize_row_q4_0(q4, y4, K), 0);
            for (i = 0; i < K; i++) {
                e_nl += ((double)x[i] - y[i]) * ((double)x[i] - y[i]) / (scale * scale);
                e_xs += ((double)x[i] - y2[i]) * ((double)x[i] - y2[i]) / (scale * scale);
                e_q4 += ((double)x[i] - y4[i]) * ((double)x[i] - y4[i]) / (scale * scale);
                assert_true(fabsf(x[i] - y2[i]) <= 0.3f * scale);
            }
        }
    }
    /* measured: IQ4_NL 0.84, IQ4_XS 0.85 of Q4_0's squared error (at about
     * the same size: 4.5 and 4.25 bits per weight against 4.5) */
    assert_true(e_nl < 0.9 * e_q4);
    assert_true(e_xs < 0.9 * e_q4);
    /* the same input gives the same bytes */
    {
        static uint8_t again[K / 256 * 136];

        assert_int_equal(baton_quantize_row_iq4_xs(x, again, K), 0);
        assert_memory_equal(again, xs, sizeof again);
    }
}

static void test_iq4_errors(void **state)
{
    static float x[512];
    static uint8_t out[2 * 136];
    int e;

    (void)state;
    for (e = 0; e < 512; e++)
        x[e] = (float)(e % 37) - 18.0f;
    memset(out, 0xEE, sizeof out);
    assert_int_equal(baton_quantize_row_iq4_nl(x, out, 48), BATON_E_SHAPE);
    assert_int_equal(baton_quantize_row_iq4_xs(x, out, 288), BATON_E_SHAPE);
    x[400] = NAN; /* a later block: nothing at all is written */
    assert_int_equal(baton_quantize_row_iq4_nl(x, out, 512), BATON_E_INVAL);
    assert_int_equal(baton_quantize_row_iq4_xs(x, out, 512), BATON_E_INVAL);
    x[400] = INFINITY;
    assert_int_equal(baton_quantize_row(BATON_TYPE_IQ4_XS, x, out, 512), BATON_E_INVAL);
    x[400] = 3e38f; /* finite, but the scale is past binary16 */
    assert_int_equal(baton_quantize_row_iq4_nl(x, out, 512), BATON_E_INVAL);
    assert_int_equal(baton_quantize_row_iq4_xs(x, out, 512), BATON_E_INVAL);
    for (e = 0; e < (int)sizeof out; e++)
        assert_int_equal(out[e], 0xEE);
    x[400] = 1e6f; /* large, but its scale fits: accepted */
    assert_int_equal(baton_quantize_row_iq4_nl(x, out, 32 * 15), 0);
    assert_int_equal(baton_quantize_row_iq4_xs(x, out, 512), 0);
    assert_int_equal(baton_quantize_row_iq4_xs(x, out, 0), 0);
}

/* Hand-computed MUL_MAT through a graph: an IQ4_NL row with d = 1 and
 * every nibble 8 (level 1) against x_j = 42 (j % 4) (sum 2016 per 32; the
 * quantized x as in test_mul_mat_quant_known), and an IQ4_XS row with d =
 * 0.5, every ls 33 (scale 1) and nibble 15 (level 113) against the same x
 * over 256 elements. */
static void test_mul_mat_iq4_known(void **state)
{
    uint8_t wn[18] = {0x00, 0x3C}, wx[136] = {0x00, 0x38, 0xAA, 0xAA};
    float x[256], y[1];
    struct tg t;
    uint32_t lw, lx, ly, n;
    int j;

    (void)state;
    for (j = 0; j < 16; j++)
        wn[2 + j] = 0x88;
    for (j = 0; j < 4; j++)
        wx[4 + j] = 0x11; /* ls = 1 | 2 << 4 = 33 */
    for (j = 0; j < 128; j++)
        wx[8 + j] = 0xFF;
    for (j = 0; j < 256; j++)
        x[j] = (float)(j % 4) * 42.0f;
    tg_init(&t);
    lw = tg_leaf(&t, BATON_TYPE_IQ4_NL, 32, 1, 1, 1, wn);
    lx = tg_leaf(&t, BATON_TYPE_F32, 32, 1, 1, 1, x);
    ly = tg_leaf(&t, BATON_TYPE_F32, 1, 1, 1, 1, y);
    n = tg_node(&t, BATON_OP_MUL_MAT, BATON_TYPE_F32, 1, 1, 1, 1, SRC2(lw, lx), NULL);
    tg_at(&t, n)->out_leaf = ly;
    assert_int_equal(tg_run(&t, NULL), 0);
    /* q = 0, 42, 85, 127 for 0, 42, 84, 126 (dx = 126/127): dx * 8 * 254 =
     * 2016 exactly in reals (the roundings of 42.3 down and 84.7 up
     * cancel), up to the float rounding of dx and its products */
    assert_true(fabsf(y[0] - 2016.0f) <= 2016.0f * 1e-6f);

    tg_init(&t);
    lw = tg_leaf(&t, BATON_TYPE_IQ4_XS, 256, 1, 1, 1, wx);
    lx = tg_leaf(&t, BATON_TYPE_F32, 256, 1, 1, 1, x);
    ly = tg_leaf(&t, BATON_TYPE_F32, 1, 1, 1, 1, y);
    n = tg_node(&t, BATON_OP_MUL_MAT, BATON_TYPE_F32, 1, 1, 1, 1, SRC2(lw, lx), NULL);
    tg_at(&t, n)->out_leaf = ly;
    assert_int_equal(tg_run(&t, NULL), 0);
    /* 0.5 * 113 * dx * 64 * 254 = 56.5 * 64 * 252 = 911232 (as above) */
    assert_true(fabsf(y[0] - 911232.0f) <= 911232.0f * 1e-6f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp16_known_values),  cmocka_unit_test(test_fp16_round_trip_all),
        cmocka_unit_test(test_bf16_known_values),  cmocka_unit_test(test_bf16_round_trip_all),
        cmocka_unit_test(test_fp16_matches_f16c),  cmocka_unit_test(test_q8_0_known_block),
        cmocka_unit_test(test_q4_0_known_block),   cmocka_unit_test(test_quantize_known_blocks),
        cmocka_unit_test(test_quantize_errors),    cmocka_unit_test(test_round_trip_bounds),
        cmocka_unit_test(test_f16_row_round_trip), cmocka_unit_test(test_act_quantizer),
        cmocka_unit_test(test_q2_k_known_block),   cmocka_unit_test(test_q3_k_known_block),
        cmocka_unit_test(test_q4_k_q5_k_known_blocks), cmocka_unit_test(test_q6_k_known_block),
        cmocka_unit_test(test_k_round_trip_bounds), cmocka_unit_test(test_k_errors),
        cmocka_unit_test(test_get_rows_types),     cmocka_unit_test(test_mul_mat_quant_known),
        cmocka_unit_test(test_mul_mat_bf16_known),
        cmocka_unit_test(test_iq4_known_blocks),   cmocka_unit_test(test_iq4_quantize),
        cmocka_unit_test(test_iq4_errors),         cmocka_unit_test(test_mul_mat_iq4_known),
        cmocka_unit_test(test_q5_known_blocks),    cmocka_unit_test(test_q5_quantize_known),
        cmocka_unit_test(test_q5_quantize_errors), cmocka_unit_test(test_q5_round_trip_bounds),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
