/* Weight formats: binary16 conversion, the Q8_0 / Q4_0 quantizers and
 * dequantizers (hand-built blocks, ggml's rounding rules, error bounds),
 * the activation quantizer of the MUL_MAT kernels, and GET_ROWS on F16 /
 * Q8_0 / Q4_0 tables through a graph. */
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
        /* lane 0: elements 0..3 and 16..19: 127 + 2 - 4 + 0 - 1 - 2 + 1 + 2 */
        assert_int_equal(corr[0], -128 * 125);
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

        baton_cpu_quantize_act(NULL, BATON_TYPE_Q4_0, x, k, 1, act);
        assert_int_equal(corr[0], -8 * 125);
    }
    baton_cpu_isa_set(BATON_CPU_ISA_AVX512);
    free(act);
}

/* ---- GET_ROWS on F16 / Q8_0 / Q4_0 tables ---- */

static void get_rows_case(uint32_t type, uint64_t k)
{
    enum { R = 5 };
    const uint64_t rb = baton_row_bytes(type, k);
    float src[R * 64], want[3 * 64], got[3 * 64];
    uint8_t table[R * 64 * 2 + 4] __attribute__((aligned(4)));
    int32_t ids[3] = {4, 0, 4};
    struct tg t;
    uint32_t lt, li, ly, n;
    int j;

    assert_true(k <= 64 && rb * R <= sizeof(table));
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
    get_rows_case(BATON_TYPE_Q8_0, 32);
    get_rows_case(BATON_TYPE_Q8_0, 64);
    get_rows_case(BATON_TYPE_Q4_0, 64);
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
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp16_known_values),  cmocka_unit_test(test_fp16_round_trip_all),
        cmocka_unit_test(test_fp16_matches_f16c),  cmocka_unit_test(test_q8_0_known_block),
        cmocka_unit_test(test_q4_0_known_block),   cmocka_unit_test(test_quantize_known_blocks),
        cmocka_unit_test(test_quantize_errors),    cmocka_unit_test(test_round_trip_bounds),
        cmocka_unit_test(test_f16_row_round_trip), cmocka_unit_test(test_act_quantizer),
        cmocka_unit_test(test_get_rows_types),     cmocka_unit_test(test_mul_mat_quant_known),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
