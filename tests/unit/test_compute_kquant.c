/* MUL_MAT over K-quant weights (Q2_K..Q6_K, IQ4_XS) at every level this CPU has,
 * against this file's own reading of the formats (compute/cpu/quant.h's
 * formulas, element by element) and of matmul.h's K reduction order:
 *   (a) every level gives the reference's bits;
 *   (b) the same bits for 1, 2 and 3 threads, batches of 1..9 columns, and
 *       a column alone against the batch;
 *   (c) the result is within the activation-rounding error bound of the
 *       double-precision dot product of the dequantized weights with x;
 *   (d) a non-finite x gives NaN;
 * plus the K activation layout byte for byte, and sums past 2^24 (where
 * (float)isum rounds). Weights are random super-block bytes with binary16
 * d / dmin of magnitude 2^-8..2^-4, written directly (no quantizer). */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "compute/compute.h"
#include "compute/cpu/matmul.h"
#include "compute/cpu/quant.h"
#include "core/types.h"

static uint64_t rng_state;

static uint32_t rng32(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static float rng_unit(void) /* [-1, 1) */
{
    return (float)(int32_t)rng32() / 2147483648.0f;
}

static const uint32_t k_types[] = {BATON_TYPE_Q2_K, BATON_TYPE_Q3_K, BATON_TYPE_Q4_K,
                                   BATON_TYPE_Q5_K, BATON_TYPE_Q6_K, BATON_TYPE_IQ4_XS};
#define N_K_TYPES (sizeof(k_types) / sizeof(k_types[0]))

static const char *tname(uint32_t t)
{
    static const char *names[] = {"Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"};

    return t == BATON_TYPE_IQ4_XS ? "IQ4_XS" : names[t - BATON_TYPE_Q2_K];
}

/* IQ4_XS's levels, from quant.h's text (ggml's kvalues_iq4nl) */
static const int iq4_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                   1,    13,   25,  38,  53,  69,  89,  113};

/* ---- the formats, from quant.h's text ---- */

static uint64_t sb_bytes(uint32_t t)
{
    static const uint64_t b[] = {84, 110, 144, 176, 210};

    return t == BATON_TYPE_IQ4_XS ? 136 : b[t - BATON_TYPE_Q2_K];
}

static int has_min(uint32_t t)
{
    return t == BATON_TYPE_Q2_K || t == BATON_TYPE_Q4_K || t == BATON_TYPE_Q5_K;
}

static float h2f(const uint8_t *p)
{
    return baton_fp16_to_fp32((uint16_t)(p[0] | p[1] << 8));
}

static float sb_d(uint32_t t, const uint8_t *b)
{
    switch (t) {
    case BATON_TYPE_Q2_K:
        return h2f(b + 80);
    case BATON_TYPE_Q3_K:
        return h2f(b + 108);
    case BATON_TYPE_Q6_K:
        return h2f(b + 208);
    default:
        return h2f(b);
    }
}

static float sb_dmin(uint32_t t, const uint8_t *b)
{
    return t == BATON_TYPE_Q2_K ? h2f(b + 82) : h2f(b + 2);
}

/* Q4_K / Q5_K 6-bit scale and min of sub-block j (of 32). */
static void scale_min_k4(const uint8_t *S, int j, int *sc, int *m)
{
    if (j < 4) {
        *sc = S[j] & 63;
        *m = S[j + 4] & 63;
    } else {
        *sc = (S[j + 4] & 15) | (S[j - 4] >> 6) << 4;
        *m = (S[j + 4] >> 4) | (S[j] >> 6) << 4;
    }
}

/* Element e of super-block b: integer quant *q, integer scale *sc, integer
 * min *m (0 for the types without one), and its sub-block index *sub. */
static void elem(uint32_t t, const uint8_t *b, int e, int *q, int *sc, int *m, int *sub)
{
    const int h = e / 128, g = (e % 128) / 32, l = e % 32, c = e / 64, u = e % 64;

    *m = 0;
    switch (t) {
    case BATON_TYPE_Q2_K:
        *sub = e / 16;
        *q = (b[16 + 32 * h + l] >> (2 * g)) & 3;
        *sc = b[*sub] & 15;
        *m = b[*sub] >> 4;
        return;
    case BATON_TYPE_Q3_K: {
        const int j = e / 16;
        const int lo = j < 8 ? b[96 + j] & 15 : b[96 + j - 8] >> 4;
        const int hi = (b[96 + 8 + j % 4] >> (2 * (j / 4))) & 3;

        *sub = j;
        *sc = (lo | hi << 4) - 32;
        *q = ((b[32 + 32 * h + l] >> (2 * g)) & 3) - ((b[l] >> (4 * h + g)) & 1 ? 0 : 4);
        return;
    }
    case BATON_TYPE_Q4_K:
    case BATON_TYPE_Q5_K: {
        const uint8_t *qs = b + (t == BATON_TYPE_Q4_K ? 16 : 48);

        *sub = e / 32;
        scale_min_k4(b + 4, *sub, sc, m);
        *q = u < 32 ? qs[32 * c + u] & 15 : qs[32 * c + u - 32] >> 4;
        if (t == BATON_TYPE_Q5_K)
            *q += 16 * ((b[16 + u % 32] >> *sub) & 1);
        return;
    }
    case BATON_TYPE_IQ4_XS: { /* sub-block j = e / 32: ls_j, then one IQ4_NL block's nibbles */
        const int j = e / 32, i = e % 32, byte = b[8 + 16 * j + i % 16];
        const int lo = (b[4 + j / 2] >> (4 * (j % 2))) & 15,
                  hi = ((b[2] | b[3] << 8) >> (2 * j)) & 3;

        *sub = e / 16;
        *sc = (lo | hi << 4) - 32;
        *q = iq4_levels[i < 16 ? byte & 15 : byte >> 4];
        return;
    }
    default: {
        const int v = e % 128, tt = v / 32, i = v % 32;
        const int byte = b[64 * h + 32 * (tt % 2) + i];
        const int lo4 = tt < 2 ? byte & 15 : byte >> 4;
        const int hi2 = (b[128 + 32 * h + i] >> (2 * tt)) & 3;

        *sub = e / 16;
        *sc = (int8_t)b[192 + *sub];
        *q = (lo4 | hi2 << 4) - 32;
        return;
    }
    }
}

/* Dequantized element, exact in double: d * sc * q - dmin * m. */
static double elem_value(uint32_t t, const uint8_t *b, int e)
{
    int q, sc, m, sub;

    elem(t, b, e, &q, &sc, &m, &sub);
    return (double)sb_d(t, b) * sc * q - (has_min(t) ? (double)sb_dmin(t, b) * m : 0.0);
}

/* ---- the K activations and the reduction order, from matmul.h's text ---- */

struct ref_act {
    int8_t q[256];
    int32_t bsum16[16];
    float dx;
};

static void ref_quantize(const float *x, struct ref_act *a)
{
    float amax = 0.0f;
    int i, finite = 1;

    for (i = 0; i < 256; i++) {
        if (!isfinite(x[i]))
            finite = 0;
        else if (fabsf(x[i]) > amax)
            amax = fabsf(x[i]);
    }
    if (!finite) {
        a->dx = NAN;
        memset(a->q, 0, sizeof(a->q));
    } else {
        const float dx = amax / 127.0f, id = dx != 0.0f ? 1.0f / dx : 0.0f;

        a->dx = dx;
        for (i = 0; i < 256; i++) {
            const float v = rintf(x[i] * id); /* nearest, ties to even */

            /* 1/dx = +inf (dx < 2^-128): q = 0 (matmul.h) */
            a->q[i] = isfinite(v) ? (int8_t)v : 0;
        }
    }
    for (i = 0; i < 16; i++) {
        int j;

        a->bsum16[i] = 0;
        for (j = 0; j < 16; j++)
            a->bsum16[i] += a->q[16 * i + j];
    }
}

/* One output: acc = fma(a, isum, acc), then fma(-b, msum, acc), per
 * super-block ascending. */
static float ref_dot(uint32_t t, const uint8_t *row, const float *x, uint64_t k)
{
    float acc = 0.0f;
    uint64_t s;

    for (s = 0; s < k / 256; s++) {
        const uint8_t *b = row + s * sb_bytes(t);
        struct ref_act a;
        int64_t isum = 0, msum = 0;
        int32_t subx[16] = {0}, subm[16] = {0};
        int e, j;

        ref_quantize(x + s * 256, &a);
        for (e = 0; e < 256; e++) {
            int q, sc, m, sub;

            elem(t, b, e, &q, &sc, &m, &sub);
            isum += (int64_t)sc * q * a.q[e];
            subx[sub] += a.q[e];
            subm[sub] = m;
        }
        for (j = 0; j < 16; j++)
            msum += (int64_t)subm[j] * subx[j];
        acc = fmaf(sb_d(t, b) * a.dx, (float)isum, acc);
        if (has_min(t))
            acc = fmaf(-(sb_dmin(t, b) * a.dx), (float)msum, acc);
    }
    return acc;
}

/* |y - exact dot of the dequantized weights with x|: the activation error
 * sum_e |w_e| * |x_e - dx q_e| (<= dx/2 each, plus x * (1/dx)'s rounding),
 * and the float roundings of a, b, (float)isum, (float)msum and each fma
 * (relative 2^-24 of the terms, a few per super-block). */
static double err_bound(uint32_t t, const uint8_t *row, const float *x, uint64_t k)
{
    double act = 0.0, terms = 0.0;
    uint64_t s;

    for (s = 0; s < k / 256; s++) {
        const uint8_t *b = row + s * sb_bytes(t);
        struct ref_act a;
        int e;

        ref_quantize(x + s * 256, &a);
        for (e = 0; e < 256; e++) {
            const double w = elem_value(t, b, e);
            int q, sc, m, sub;

            elem(t, b, e, &q, &sc, &m, &sub);
            act += fabs(w) * (0.5 + 1e-4) * a.dx;
            terms += fabs((double)sb_d(t, b) * sc * q * a.q[e] * a.dx) +
                     fabs((has_min(t) ? (double)sb_dmin(t, b) * m : 0.0) * a.q[e] * a.dx);
        }
    }
    return act + 6.0 * (double)(k / 256 + 1) * ldexp(terms, -24) + 1e-30;
}

/* ---- cases ---- */

static uint16_t rand_scale16(void) /* +-2^-8 .. 2^-4 */
{
    const float mag = ldexpf(1.0f + 0.999f * (rng_unit() + 1.0f) / 2.0f, -8 + (int)(rng32() % 4));

    return baton_fp32_to_fp16(rng32() & 1 ? -mag : mag);
}

static void put16(uint8_t *p, uint16_t h)
{
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

static void fill_weights(uint32_t t, uint8_t *w, uint64_t k, uint64_t n)
{
    uint64_t i, s;

    for (i = 0; i < k / 256 * sb_bytes(t) * n; i++)
        w[i] = (uint8_t)rng32();
    for (s = 0; s < k / 256 * n; s++) {
        uint8_t *b = w + s * sb_bytes(t);

        switch (t) {
        case BATON_TYPE_Q2_K:
            put16(b + 80, rand_scale16());
            put16(b + 82, rand_scale16());
            break;
        case BATON_TYPE_Q3_K:
            put16(b + 108, rand_scale16());
            break;
        case BATON_TYPE_Q6_K:
            put16(b + 208, rand_scale16());
            break;
        case BATON_TYPE_IQ4_XS: /* scales_h after d stays random */
            put16(b, rand_scale16());
            break;
        default:
            put16(b, rand_scale16());
            put16(b + 2, rand_scale16());
            break;
        }
    }
}

static void fill_x(float *x, uint64_t count)
{
    uint64_t i;

    for (i = 0; i < count; i++) /* super-blocks of different magnitudes, a zero run */
        x[i] = rng_unit() * (float)(1 + (i / 256) % 5) * ((i / 100) % 11 == 4 ? 0.0f : 1.0f);
}

/* Bit for bit; a NaN only as a NaN (its payload may differ between
 * levels: matmul.h). */
static void expect_bits(const float *got, const float *want, uint64_t count, const char *what)
{
    uint64_t i;

    for (i = 0; i < count; i++) {
        uint32_t a, b;

        if (isnan(want[i]) && isnan(got[i]))
            continue;
        memcpy(&a, &got[i], 4);
        memcpy(&b, &want[i], 4);
        if (a != b)
            fail_msg("%s: element %llu: got %.9g (0x%08x), want %.9g (0x%08x)", what,
                     (unsigned long long)i, got[i], a, want[i], b);
    }
}

/* y at every level, thread count, alone, in the batch and in pieces into
 * a wider output, equals want. */
static void check_levels(uint32_t t, const uint8_t *w, const float *x, const float *want,
                         uint64_t k, uint64_t n, uint64_t m, struct baton_pool **pools)
{
    const uint64_t work_bytes = baton_cpu_mul_mat_work_bytes(t, k, m);
    void *work = aligned_alloc(64, (work_bytes + 63) / 64 * 64);
    float *got = malloc(n * m * sizeof(float));
    char what[128];
    int lvl, p;
    uint64_t c;

    assert_non_null(work);
    assert_non_null(got);
    assert_int_equal(work_bytes, m * (k / 256) * 320);
    for (lvl = BATON_CPU_ISA_SCALAR; lvl <= BATON_CPU_ISA_AVX512; lvl++) {
        if ((int)baton_cpu_isa_set((enum baton_cpu_isa)lvl) != lvl)
            continue;
        for (p = 0; p < 3; p++) {
            snprintf(what, sizeof(what), "%s %s k=%llu n=%llu m=%llu threads=%d", tname(t),
                     baton_cpu_isa_name((enum baton_cpu_isa)lvl), (unsigned long long)k,
                     (unsigned long long)n, (unsigned long long)m, p + 1);
            memset(got, 0x55, n * m * sizeof(float));
            baton_cpu_mul_mat_typed(pools[p], t, w, x, got, k, n, m, work);
            expect_bits(got, want, n * m, what);
        }
        { /* the rows in two pieces into a wider output (ldy = n + 5), as
           * graph.c's products in pieces write theirs; the padding untouched */
            const uint64_t ldy = n + 5, n1 = n / 2, rb = baton_cpu_weight_row_bytes(t, k);
            float *ys = malloc(ldy * m * sizeof(float));
            uint64_t r;

            assert_non_null(ys);
            for (r = 0; r < ldy * m; r++)
                ys[r] = -7.5f;
            const struct baton_cpu_mm_part parts[2] = {{w, ys, n1, ldy},
                                                       {w + n1 * rb, ys + n1, n - n1, ldy}};
            baton_cpu_mul_mat_group(pools[2], t, n1 > 0 ? parts : parts + 1, n1 > 0 ? 2 : 1, x, k,
                                    m, work);
            for (c = 0; c < m; c++) {
                snprintf(what, sizeof(what), "%s %s column %llu strided", tname(t),
                         baton_cpu_isa_name((enum baton_cpu_isa)lvl), (unsigned long long)c);
                expect_bits(ys + c * ldy, want + c * n, n, what);
                for (r = n; r < ldy; r++)
                    assert_true(ys[c * ldy + r] == -7.5f);
            }
            free(ys);
        }
        for (c = 0; c < m; c++) {
            snprintf(what, sizeof(what), "%s %s column %llu of %llu alone", tname(t),
                     baton_cpu_isa_name((enum baton_cpu_isa)lvl), (unsigned long long)c,
                     (unsigned long long)m);
            memset(got, 0x55, n * sizeof(float));
            baton_cpu_mul_mat_typed(pools[c % 3], t, w, x + c * k, got, k, n, 1, work);
            expect_bits(got, want + c * n, n, what);
        }
    }
    baton_cpu_isa_set(BATON_CPU_ISA_AVX512);
    free(work);
    free(got);
}

static void create_pools(struct baton_pool **pools)
{
    int i;

    for (i = 0; i < 3; i++)
        assert_int_equal(baton_pool_create((uint32_t)i + 1, &pools[i]), 0);
}

static void destroy_pools(struct baton_pool **pools)
{
    int i;

    for (i = 0; i < 3; i++)
        baton_pool_destroy(pools[i]);
}

/* (a), (b), (c) on random shapes: k 256..4096, 1..40 rows, 1..9 columns
 * (then 6 cases of 16..79 rows and 8..32 columns: the AVX-512 prefill
 * panels of 16 rows, from 8 columns on at full width and 16 on 256-bit
 * halves (Zen 4), with rows and columns left over; and 2 of 9..24 rows
 * and 65..80 columns: the AVX2 panels of 8 rows take 64 columns at a
 * time);
 * weights at an odd address (rows may start anywhere). The SIMD decode
 * takes the super-blocks of a row 8 at a time, the AVX-512 one two rows at
 * a time up to 4 and up to 8 super-blocks, so k covers 1..4 (256..1024),
 * 5..7 (1280, 1536, 1792), exactly 8 and 16 (2048, 4096) and 8 or more
 * with a remainder (2304: 8 + 1, 3840: 8 + 7). */
static void random_type(uint32_t t, int n_cases)
{
    static const uint64_t ks[] = {256, 512, 768, 1024, 1280, 1536, 1792, 2048, 2304, 3840, 4096};
    struct baton_pool *pools[3];
    int i;

    create_pools(pools);
    for (i = 0; i < n_cases + 8; i++) {
        const int panel = i >= n_cases, wide = i >= n_cases + 6;
        const uint64_t k = ks[rng32() % (sizeof(ks) / sizeof(ks[0]))],
                       n = wide    ? 9 + rng32() % 16
                           : panel ? 16 + rng32() % 64
                                   : 1 + rng32() % 40,
                       m = wide    ? 65 + rng32() % 16
                           : panel ? 8 + rng32() % 25
                                   : 1 + (uint64_t)(i % 9);
        const uint64_t rb = k / 256 * sb_bytes(t);
        uint8_t *alloc = malloc(rb * n + 1), *w = alloc + 1;
        float *x = malloc(k * m * sizeof(float)), *want = malloc(n * m * sizeof(float));
        uint64_t r, c;

        assert_non_null(alloc);
        assert_non_null(x);
        assert_non_null(want);
        assert_int_equal(baton_cpu_weight_row_bytes(t, k), rb);
        fill_weights(t, w, k, n);
        fill_x(x, k * m);
        for (c = 0; c < m; c++)
            for (r = 0; r < n; r++) {
                const uint8_t *row = w + r * rb;
                const float *xc = x + c * k;
                double exact = 0.0;
                int64_t e;

                want[c * n + r] = ref_dot(t, row, xc, k);
                for (e = 0; e < (int64_t)k; e++)
                    exact += elem_value(t, row + e / 256 * sb_bytes(t), (int)(e % 256)) * xc[e];
                if (fabs((double)want[c * n + r] - exact) > err_bound(t, row, xc, k))
                    fail_msg("%s k=%llu row %llu col %llu: %.9g vs exact %.9g, bound %.3g",
                             tname(t), (unsigned long long)k, (unsigned long long)r,
                             (unsigned long long)c, want[c * n + r], exact,
                             err_bound(t, row, xc, k));
            }
        check_levels(t, w, x, want, k, n, m, pools);
        free(alloc);
        free(x);
        free(want);
    }
    destroy_pools(pools);
}

static void test_q2_k(void **state)
{
    (void)state;
    rng_state = 0x2222;
    random_type(BATON_TYPE_Q2_K, 18);
}

static void test_q3_k(void **state)
{
    (void)state;
    rng_state = 0x3333;
    random_type(BATON_TYPE_Q3_K, 18);
}

static void test_q4_k(void **state)
{
    (void)state;
    rng_state = 0x4444;
    random_type(BATON_TYPE_Q4_K, 18);
}

static void test_q5_k(void **state)
{
    (void)state;
    rng_state = 0x5555;
    random_type(BATON_TYPE_Q5_K, 18);
}

static void test_q6_k(void **state)
{
    (void)state;
    rng_state = 0x6666;
    random_type(BATON_TYPE_Q6_K, 18);
}

static void test_iq4_xs(void **state)
{
    (void)state;
    rng_state = 0x1A4;
    random_type(BATON_TYPE_IQ4_XS, 18);
}

/* IQ4_XS super-blocks at the edges, every level: sub-block scales ls 0 and
 * 63 (Sc -32 and 31) and all between, all 16 levels at each nibble
 * position, sub-blocks of only -127 or only 113 against super-blocks of x
 * at +-127 (|isum| up to 256 * 32 * 127 * 127 = 132128768: past 2^24, and
 * past int16 at every step a kernel might add in it), and binary16 d of
 * every kind: subnormal, the largest finite (products overflow to +-inf,
 * which meet in NaN), +-0, +inf, NaN. 37 rows (8-row decode tiles and
 * 16-row panels with a ragged end), k 2304 (a group of 8 super-blocks and
 * one), 1, 3 and 17 columns (the decode, the tiles, the panels). */
static void test_iq4_xs_edges(void **state)
{
    static const uint16_t ds[] = {0x0001, 0x83FF, 0x7BFF, 0xFBFF, 0x0000,
                                  0x8000, 0x7C00, 0x7E00, 0x3C00, 0x1C00};
    static const uint64_t ms[] = {1, 3, 17};
    const uint64_t k = 2304, n = 37, rb = k / 256 * 136;
    struct baton_pool *pools[3];
    unsigned mi;

    (void)state;
    rng_state = 0x1A5;
    create_pools(pools);
    for (mi = 0; mi < 3; mi++) {
        const uint64_t m = ms[mi];
        uint8_t *w = malloc(rb * n);
        float *x = malloc(k * m * sizeof(float)), *want = malloc(n * m * sizeof(float));
        uint64_t r, s, c, i;

        assert_non_null(w);
        assert_non_null(x);
        assert_non_null(want);
        fill_weights(BATON_TYPE_IQ4_XS, w, k, n);
        for (r = 0; r < n; r++)
            for (s = 0; s < k / 256; s++) {
                uint8_t *b = w + r * rb + s * 136;
                const uint64_t v = r + s;

                if (r % 3 == 0)
                    put16(b, ds[(r / 3 + s) % 10]);
                /* ls: all 0, all 63, or 8 values that step through 0..63 */
                if (v % 4 == 0)
                    memset(b + 2, 0x00, 6);
                else if (v % 4 == 1)
                    memset(b + 2, 0xFF, 6);
                for (i = 0; i < 128; i++) /* low nibble level (i + v) % 16, high 15 - that */
                    b[8 + i] = (uint8_t)((i + v) % 16 | (15 - (i + v) % 16) << 4);
                if (r % 3 == 1) { /* sub-blocks of one extreme level */
                    memset(b + 8, 0x00, 32);
                    memset(b + 8 + 64, 0xFF, 32);
                }
            }
        fill_x(x, k * m);
        for (i = 0; i < k * m; i++) /* super-blocks of +-127 exactly */
            if (i / 256 % 3 == 0)
                x[i] = (i / 256 % 2 ? -1.0f : 1.0f) * 0.25f;
        for (c = 0; c < m; c++)
            for (r = 0; r < n; r++)
                want[c * n + r] = ref_dot(BATON_TYPE_IQ4_XS, w + r * rb, x + c * k, k);
        check_levels(BATON_TYPE_IQ4_XS, w, x, want, k, n, m, pools);
        free(w);
        free(x);
        free(want);
    }
    destroy_pools(pools);
}

/* The layout of matmul.h: q, bsums, dx and zero padding, byte for byte,
 * at every level and thread count (each level has its own quantizer).
 * Besides random super-blocks: one of zeros (dx = 0, q = 0), one of -0.0
 * and subnormals, one holding +inf, one -inf, one NaN (dx = NaN, q = 0),
 * one whose largest |x| is negative, one of huge values (FLT_MAX), one
 * where every x is +-amax (q = +-127), and ties. */
static void test_act_layout(void **state)
{
    const uint64_t k = 2560, m = 3, nsb = k / 256;
    float *x = malloc(k * m * sizeof(float));
    uint8_t *act = malloc(m * baton_cpu_act_k_col_bytes(k));
    struct baton_pool *pools[3];
    uint64_t c, s, i;
    int p, lvl;

    (void)state;
    assert_non_null(x);
    assert_non_null(act);
    assert_int_equal(baton_cpu_act_k_col_bytes(k), nsb * 320);
    rng_state = 77;
    fill_x(x, k * m);
    x[300] = 2.5f; /* a tie: 2.5 * (127 / 2.5) = 127 exactly; others round */
    for (i = 0; i < 256; i++) {
        x[1 * 256 + i] = 0.0f;                                      /* col 0, sb 1 */
        x[2 * 256 + i] = i % 2 ? -0.0f : ldexpf((float)i, -140);    /* sb 2 */
        x[3 * 256 + i] = (float)i - 100.0f;                         /* sb 3: amax 155 */
        x[4 * 256 + i] = i % 3 ? FLT_MAX * 0.5f : -FLT_MAX;        /* sb 4 */
        x[5 * 256 + i] = i % 5 ? -3.0f : 3.0f;                      /* sb 5: +-127 */
        x[6 * 256 + i] = (float)((int)i - 127) * 0.5f;              /* sb 6: .5 ties */
        x[k + 7 * 256 + i] = (float)i * 0.25f - 1.0f;               /* col 1 */
    }
    x[7 * 256 + 9] = INFINITY;           /* col 0, sb 7 */
    x[8 * 256 + 255] = -INFINITY;        /* col 0, sb 8 */
    x[k + 3 * 256 + 17] = NAN;           /* col 1, sb 3 */
    x[2 * k + 9 * 256] = -NAN;           /* col 2, sb 9, first element */
    create_pools(pools);
    for (lvl = BATON_CPU_ISA_SCALAR; lvl <= BATON_CPU_ISA_AVX512; lvl++) {
        if ((int)baton_cpu_isa_set((enum baton_cpu_isa)lvl) != lvl)
            continue;
        for (p = 0; p < 3; p++) {
            memset(act, 0xA5, m * baton_cpu_act_k_col_bytes(k));
            baton_cpu_quantize_act_k(pools[p], x, k, m, act);
            for (c = 0; c < m; c++)
                for (s = 0; s < nsb; s++) {
                    const uint8_t *blk = act + c * nsb * 320 + s * 320;
                    struct ref_act a;
                    int16_t bs[16];
                    float dx;

                    ref_quantize(x + c * k + s * 256, &a);
                    assert_memory_equal(blk, a.q, 256);
                    memcpy(bs, blk + 256, sizeof(bs));
                    for (i = 0; i < 16; i++)
                        assert_int_equal(bs[i], a.bsum16[i]);
                    memcpy(&dx, blk + 288, 4);
                    assert_memory_equal(&dx, &a.dx, 4); /* NaN too: both are NAN */
                    for (i = 292; i < 320; i++)
                        assert_int_equal(blk[i], 0);
                }
        }
    }
    baton_cpu_isa_set(BATON_CPU_ISA_AVX512);
    /* the special super-blocks are what they claim */
    {
        struct ref_act a;

        ref_quantize(x + 256, &a);
        assert_true(a.dx == 0.0f);
        ref_quantize(x + 2 * 256, &a);
        assert_true(a.dx > 0.0f && a.dx < ldexpf(1.0f, -128)); /* 1/dx overflows */
        ref_quantize(x + 5 * 256, &a);
        assert_int_equal(a.q[0], 127);
        assert_int_equal(a.q[1], -127);
        ref_quantize(x + 7 * 256, &a);
        assert_true(isnan(a.dx));
        ref_quantize(x + k + 3 * 256, &a);
        assert_true(isnan(a.dx));
    }
    destroy_pools(pools);
    free(x);
    free(act);
}

/* (d): an inf or a NaN anywhere in a column makes every output of that
 * column NaN, at every level; the other columns keep their values. */
static void test_nonfinite(void **state)
{
    const uint64_t k = 512, n = 5, m = 2;
    struct baton_pool *pools[3];
    size_t ti;

    (void)state;
    rng_state = 99;
    create_pools(pools);
    for (ti = 0; ti < N_K_TYPES; ti++) {
        const uint32_t t = k_types[ti];
        uint8_t *w = malloc(k / 256 * sb_bytes(t) * n);
        float x[1024], want[10], got[10];
        void *work = aligned_alloc(64, baton_cpu_mul_mat_work_bytes(t, k, m));
        int lvl, bad;
        uint64_t r;

        assert_non_null(w);
        assert_non_null(work);
        fill_weights(t, w, k, n);
        for (bad = 0; bad < 2; bad++) {
            fill_x(x, k * m);
            x[k + 300] = bad ? NAN : INFINITY; /* column 1, super-block 1 */
            for (r = 0; r < n; r++)
                want[r] = ref_dot(t, w + r * (k / 256) * sb_bytes(t), x, k);
            for (lvl = BATON_CPU_ISA_SCALAR; lvl <= BATON_CPU_ISA_AVX512; lvl++) {
                if ((int)baton_cpu_isa_set((enum baton_cpu_isa)lvl) != lvl)
                    continue;
                baton_cpu_mul_mat_typed(pools[lvl], t, w, x, got, k, n, m, work);
                expect_bits(got, want, n, tname(t));
                for (r = 0; r < n; r++)
                    assert_true(isnan(got[n + r]));
            }
        }
        baton_cpu_isa_set(BATON_CPU_ISA_AVX512);
        free(w);
        free(work);
    }
    destroy_pools(pools);
}

/* Integer sums past 2^24, where (float)isum rounds. Q6_K, x's first
 * super-block all 1 (q = 127): row 0 has every quant -32 and scales -128,
 * isum = 256 * 4096 * 127 = 133169152 (= 127 * 2^20, a float); row 1 has
 * scales -127 and two quants -31 (ql[5] = 0x11: elements 5 and 69), isum =
 * 256 * 32 * 127 * 127 - 2 * 127 * 127 = 132096510, which is not a float
 * (it lies between multiples of 8), so (float)isum rounds. The other types
 * get all-ones bytes (their largest quants, scales and mins). Every level
 * must give the reference's bits. */
static void test_large_sums(void **state)
{
    const uint64_t k = 512;
    struct baton_pool *pools[3];
    float x[512], want[3];
    size_t ti;
    int i;

    (void)state;
    create_pools(pools);
    for (i = 0; i < 512; i++)
        x[i] = i < 256 ? 1.0f : i % 256 == 7 ? 1.0f : 0.75f;
    for (ti = 0; ti < N_K_TYPES; ti++) {
        const uint32_t t = k_types[ti];
        const uint64_t rb = 2 * sb_bytes(t);
        uint8_t w[3 * 2 * 210];
        uint64_t r;
        int64_t lvl;

        memset(w, t == BATON_TYPE_Q6_K || t == BATON_TYPE_IQ4_XS ? 0x00 : 0xFF, sizeof(w));
        for (r = 0; r < 6; r++) {
            uint8_t *b = w + r * sb_bytes(t);

            switch (t) {
            case BATON_TYPE_Q2_K:
                put16(b + 80, 0x3C00), put16(b + 82, 0x2C00); /* 1, 1/16 */
                break;
            case BATON_TYPE_Q3_K:
                put16(b + 108, 0x3C00);
                break;
            case BATON_TYPE_Q6_K:
                memset(b + 192, r < 2 ? 0x80 : 0x81, 16); /* scales -128 (row 0), -127 */
                put16(b + 208, 0x1C00); /* 2^-8 */
                break;
            case BATON_TYPE_IQ4_XS: /* ls 0 (scale -32), every level -127 */
                put16(b, 0x1C00);
                break;
            default:
                put16(b, 0x1C00), put16(b + 2, 0x2C00);
                break;
            }
        }
        if (t == BATON_TYPE_Q6_K)
            w[rb + 5] = 0x11;
        if (t == BATON_TYPE_IQ4_XS) { /* row 1: ls_0 = 1, element 0 at level -104 */
            w[rb + 4] = 0x01;
            w[rb + 8] = 0x01;
        }
        for (r = 0; r < 3; r++)
            want[r] = ref_dot(t, w + r * rb, x, k);
        for (lvl = BATON_CPU_ISA_SCALAR; lvl <= BATON_CPU_ISA_AVX512; lvl++) {
            float got[3];
            uint8_t work[640] __attribute__((aligned(64)));

            if ((int64_t)baton_cpu_isa_set((enum baton_cpu_isa)lvl) != lvl)
                continue;
            baton_cpu_mul_mat_typed(pools[0], t, w, x, got, k, 3, 1, work);
            expect_bits(got, want, 3, tname(t));
        }
        baton_cpu_isa_set(BATON_CPU_ISA_AVX512);
        { /* the same rows 16 times (rows 0..2, 0..2, ...: one AVX-512 panel) and
           * 16 columns of x: every element of y is one of want */
            const uint64_t n = 16, m = 16;
            uint8_t *w16 = malloc(n * rb), *work = aligned_alloc(64, m * 2 * 320);
            float *x8 = malloc(m * k * sizeof(float)), *got = malloc(n * m * sizeof(float));
            uint64_t c;

            assert_non_null(w16);
            assert_non_null(work);
            assert_non_null(x8);
            assert_non_null(got);
            for (r = 0; r < n; r++)
                memcpy(w16 + r * rb, w + r % 3 * rb, rb);
            for (c = 0; c < m; c++)
                memcpy(x8 + c * k, x, sizeof(x));
            baton_cpu_mul_mat_typed(pools[1], t, w16, x8, got, k, n, m, work);
            for (c = 0; c < m; c++)
                for (r = 0; r < n; r++)
                    expect_bits(&got[c * n + r], &want[r % 3], 1, tname(t));
            free(w16);
            free(work);
            free(x8);
            free(got);
        }
        if (t == BATON_TYPE_Q6_K || t == BATON_TYPE_IQ4_XS) {
            /* the figures claimed above, from this file's reading; IQ4_XS
             * row 0: 256 * (-32) * (-127) * 127 = 132128768, row 1: 127 *
             * (31 * (31 * 127 + 104) + 32 * 224 * 127) = 131522089, odd, not
             * a float */
            const int64_t want0 = t == BATON_TYPE_Q6_K ? 133169152 : 132128768;
            const int64_t want1 = t == BATON_TYPE_Q6_K ? 132096510 : 131522089;
            struct ref_act a;
            int64_t isum[2] = {0, 0};
            int e;

            ref_quantize(x, &a);
            for (r = 0; r < 2; r++)
                for (e = 0; e < 256; e++) {
                    int q, sc, m, sub;

                    elem(t, w + r * rb, e, &q, &sc, &m, &sub);
                    isum[r] += (int64_t)sc * q * a.q[e];
                }
            assert_int_equal(isum[0], want0);
            assert_int_equal(isum[1], want1);
            assert_true((int64_t)(float)isum[1] != isum[1]);
        }
    }
    destroy_pools(pools);
}

static void test_sizes(void **state)
{
    (void)state;
    assert_true(baton_cpu_type_is_k(BATON_TYPE_Q2_K));
    assert_true(baton_cpu_type_is_k(BATON_TYPE_Q6_K));
    assert_false(baton_cpu_type_is_k(BATON_TYPE_Q4_0));
    assert_false(baton_cpu_type_is_k(BATON_TYPE_Q8_0));
    assert_false(baton_cpu_type_is_k(BATON_TYPE_F32));
    assert_int_equal(baton_cpu_weight_row_bytes(BATON_TYPE_Q4_K, 4096), 16 * 144);
    assert_int_equal(baton_cpu_weight_row_bytes(BATON_TYPE_Q6_K, 4096), 16 * 210);
    assert_int_equal(baton_cpu_weight_row_bytes(BATON_TYPE_Q2_K, 300), 0);
    assert_int_equal(baton_cpu_mul_mat_work_bytes(BATON_TYPE_Q5_K, 4096, 3), 3 * 16 * 320);
    assert_int_equal(baton_cpu_mul_mat_work_bytes(BATON_TYPE_Q3_K, 256, UINT64_MAX), UINT64_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes),     cmocka_unit_test(test_act_layout),
        cmocka_unit_test(test_q4_k),      cmocka_unit_test(test_q6_k),
        cmocka_unit_test(test_q5_k),      cmocka_unit_test(test_q2_k),
        cmocka_unit_test(test_q3_k),      cmocka_unit_test(test_iq4_xs),
        cmocka_unit_test(test_iq4_xs_edges), cmocka_unit_test(test_nonfinite),
        cmocka_unit_test(test_large_sums),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
