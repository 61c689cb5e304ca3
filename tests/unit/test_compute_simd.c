/* MUL_MAT kernels of every level (scalar, AVX2, AVX-512: those this CPU
 * has) against an independent implementation of the reduction orders
 * written in matmul.h, bit for bit, on random shapes with ragged tails
 * (k not a multiple of the SIMD width, rows not a multiple of the row
 * tile, 1..7 columns), unaligned weights, several thread counts, and each
 * column alone against the batch. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "baton/status.h"
#include "compute/compute.h"
#include "compute/cpu/kernels.h"
#include "compute/pool.h"
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

static uint32_t rng_below(uint32_t n)
{
    return rng32() % n;
}

/* ---- the documented orders, from the raw bytes ---- */

static float h2f(const uint8_t *p)
{
    return baton_fp16_to_fp32((uint16_t)(p[0] | p[1] << 8));
}

/* bfloat16 at p: the high half of a binary32, the low half zero */
static float bf2f(const uint8_t *p)
{
    const uint32_t b = (uint32_t)(p[0] | p[1] << 8) << 16;
    float f;

    memcpy(&f, &b, sizeof(f));
    return f;
}

static float ref_hsum8(const float c[8])
{
    const float e0 = c[0] + c[4], e1 = c[1] + c[5], e2 = c[2] + c[6], e3 = c[3] + c[7];

    return (e0 + e2) + (e1 + e3);
}

static float ref_f32(const float *w, const float *x, uint64_t k)
{
    float s = 0.0f;
    uint64_t i;

    for (i = 0; i < k; i++)
        s = s + w[i] * x[i];
    return s;
}

/* F16, or BF16 (bf set): 32 lanes of fmaf, lane k % 32, then hsum32 */
static float ref_h16(const uint8_t *w, int bf, const float *x, uint64_t k)
{
    float a[32] = {0}, b[16], c[8];
    uint64_t i;
    int l;

    for (i = 0; i < k; i++)
        a[i % 32] = fmaf(bf ? bf2f(w + 2 * i) : h2f(w + 2 * i), x[i], a[i % 32]);
    for (l = 0; l < 16; l++)
        b[l] = a[l] + a[l + 16];
    for (l = 0; l < 8; l++)
        c[l] = b[l] + b[l + 8];
    return ref_hsum8(c);
}

/* IQ4_NL's levels, from quant.h's text (ggml's kvalues_iq4nl) */
static const int iq4_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                   1,    13,   25,  38,  53,  69,  89,  113};

/* x quantized per block: d = max|x| / 127, q = nearest-even(x * (1/d));
 * a block with a non-finite value gives NaN. Each block's 32 elements
 * summed exactly, then one fma: Q4_0 and IQ4_NL (nibble j of byte 2 + j %
 * 16, the low one for j < 16: Q4_0 nibble - 8, IQ4_NL its level) into one
 * chain, Q8_0 into chain b % 4 of four, summed (C0 + C2) + (C1 + C3) at
 * the end. */
static float ref_q(const uint8_t *w, uint32_t type, const float *x, uint64_t k)
{
    const int is_q4 = type == BATON_TYPE_Q4_0 || type == BATON_TYPE_IQ4_NL;
    float chain[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    uint64_t b;
    int j;

    for (b = 0; b < k / 32; b++) {
        const uint8_t *wb = w + b * (is_q4 ? 18 : 34);
        const float *xb = x + b * 32;
        float amax = 0.0f, dx, id, d;
        int wq[32], xq[32], finite = 1;

        for (j = 0; j < 32; j++) {
            if (!isfinite(xb[j]))
                finite = 0;
            else
                amax = fmaxf(amax, fabsf(xb[j]));
            if (is_q4) {
                const int nib = j < 16 ? wb[2 + j] & 15 : wb[2 + j - 16] >> 4;

                wq[j] = type == BATON_TYPE_IQ4_NL ? iq4_levels[nib] : nib - 8;
            } else {
                wq[j] = (int8_t)wb[2 + j];
            }
        }
        dx = finite ? amax / 127.0f : NAN;
        id = dx != 0.0f ? 1.0f / dx : 0.0f;
        for (j = 0; j < 32; j++)
            xq[j] = finite ? (int)nearbyintf(xb[j] * id) : 0;
        d = h2f(wb) * dx;
        {
            const int t = is_q4 ? 0 : (int)(b % 4);
            int isum = 0;

            for (j = 0; j < 32; j++)
                isum += wq[j] * xq[j];
            chain[t] = fmaf(d, (float)isum, chain[t]);
        }
    }
    return is_q4 ? chain[0] : (chain[0] + chain[2]) + (chain[1] + chain[3]);
}

/* Q5_0 / Q5_1 weights, read from ggml's block_q5_0 / block_q5_1 layout:
 * u16 d, (Q5_1: u16 m), u32 qh, 16 bytes qs; element e's fifth bit is bit e
 * of qh, its nibble qs[e % 16] low (e < 16) or high. Same activations as
 * ref_q; 16 lanes, 4 per block: lane l of block b sums elements 4l..4l+3
 * and 16+4l..16+4l+3 (matmul.h's Q5_0 order). Q5_0 sums (q - 16) * x, Q5_1 sums q * x, then adds its
 * min term fma(m * dx, sum of x, lane) per lane (matmul.h). */
static float ref_q5(const uint8_t *w, int is_q5_1, const float *x, uint64_t k)
{
    float lanes[16] = {0}, c[8];
    const int bb = is_q5_1 ? 24 : 22, qh_at = is_q5_1 ? 4 : 2;
    uint64_t b;
    int j, l;

    for (b = 0; b < k / 32; b++) {
        const uint8_t *wb = w + b * (uint64_t)bb;
        const float *xb = x + b * 32;
        const uint32_t qh = wb[qh_at] | (uint32_t)wb[qh_at + 1] << 8 |
                            (uint32_t)wb[qh_at + 2] << 16 | (uint32_t)wb[qh_at + 3] << 24;
        float amax = 0.0f, dx, id, d, dm;
        int wq[32], xq[32], finite = 1;

        for (j = 0; j < 32; j++) {
            const int nib = j < 16 ? wb[qh_at + 4 + j] & 15 : wb[qh_at + 4 + j - 16] >> 4;

            if (!isfinite(xb[j]))
                finite = 0;
            else
                amax = fmaxf(amax, fabsf(xb[j]));
            wq[j] = nib + 16 * (int)((qh >> j) & 1) - (is_q5_1 ? 0 : 16);
        }
        dx = finite ? amax / 127.0f : NAN;
        id = dx != 0.0f ? 1.0f / dx : 0.0f;
        for (j = 0; j < 32; j++)
            xq[j] = finite ? (int)nearbyintf(xb[j] * id) : 0;
        d = h2f(wb) * dx;
        dm = is_q5_1 ? h2f(wb + 2) * dx : 0.0f;
        for (l = 0; l < 4; l++) {
            int isum = 0, xsum = 0;

            for (j = 4 * l; j < 4 * l + 4; j++) {
                isum += wq[j] * xq[j] + wq[16 + j] * xq[16 + j];
                xsum += xq[j] + xq[16 + j];
            }
            lanes[4 * (b % 4) + l] = fmaf(d, (float)isum, lanes[4 * (b % 4) + l]);
            if (is_q5_1)
                lanes[4 * (b % 4) + l] = fmaf(dm, (float)xsum, lanes[4 * (b % 4) + l]);
        }
    }
    for (l = 0; l < 8; l++)
        c[l] = lanes[l] + lanes[l + 8];
    return ref_hsum8(c);
}

static uint64_t block_bytes_of(uint32_t type)
{
    return type == BATON_TYPE_Q4_0 || type == BATON_TYPE_IQ4_NL ? 18
           : type == BATON_TYPE_Q5_0                            ? 22
           : type == BATON_TYPE_Q5_1                            ? 24
                                                                : 34;
}

/* ---- one case ---- */

/* A row of k bfloat16 weights, by the row's index: rows r % 8 < 5 hold
 * values in (-2, 2) with about 1 in 16 a subnormal or a signed zero; r % 8
 * == 5 only subnormals (the sums stay subnormal: a kernel that flushed them
 * would give zeros); 6 magnitudes of 2^90..2^120 (lane sums overflow to
 * infinities, and infinities of both signs meet in NaNs); 7 one infinity or
 * NaN (quiet or signalling, with a payload: the NaNs' payloads may differ
 * between levels, matmul.h) among values as in rows < 5. */
static void bf16_row_fill(uint8_t *wr, uint64_t k, uint64_t r)
{
    static const uint16_t nonfinite[4] = {0x7F80, 0xFF80, 0x7FC5, 0xFF81};
    const uint64_t bad = rng_below((uint32_t)k);
    uint64_t i;

    for (i = 0; i < k; i++) {
        const uint16_t sign = (uint16_t)(rng32() & 0x8000u);
        float f = rng_unit() * 2.0f;
        uint32_t b;
        uint16_t h;

        memcpy(&b, &f, sizeof(b));
        h = (uint16_t)(b >> 16); /* any bfloat16 is valid: truncated, not rounded */
        if (r % 8 == 5 || (r % 8 != 6 && rng_below(16) == 0))
            h = (uint16_t)(sign | (rng32() & 0x7F)); /* exponent 0 */
        else if (r % 8 == 6)
            h = (uint16_t)(sign | (217 + rng_below(31)) << 7 | (rng32() & 0x7F));
        if (r % 8 == 7 && i == bad)
            h = nonfinite[rng_below(4)];
        wr[2 * i] = (uint8_t)h;
        wr[2 * i + 1] = (uint8_t)(h >> 8);
    }
}

struct mm_case {
    uint32_t type;
    uint64_t k, n, m;
    uint8_t *w_alloc, *w; /* w = w_alloc + 2: unaligned for every type but F32 */
    float *x, *want, *got, *one;
    void *work;
};

static void case_ref(struct mm_case *c);

/* c's weights and x, random, and its want (case_ref). */
static void case_fill(struct mm_case *c, uint32_t type, uint64_t k, uint64_t n, uint64_t m)
{
    const uint64_t rb = baton_row_bytes(type, k);
    const uint64_t work = baton_cpu_mul_mat_work_bytes(type, k, m);
    uint64_t i, r;

    memset(c, 0, sizeof(*c));
    c->type = type;
    c->k = k;
    c->n = n;
    c->m = m;
    c->w_alloc = malloc(rb * n + 2); /* exact: an over-read shows under ASan */
    c->w = type == BATON_TYPE_F32 ? c->w_alloc : c->w_alloc + 2;
    c->x = malloc(k * m * sizeof(float));
    c->want = malloc(n * m * sizeof(float));
    c->got = malloc(n * m * sizeof(float));
    c->one = malloc(n * sizeof(float));
    c->work = work ? aligned_alloc(64, work) : NULL;
    assert_non_null(c->w_alloc);
    assert_non_null(c->x);
    assert_non_null(c->want);
    assert_non_null(c->got);
    assert_non_null(c->one);
    if (work)
        assert_non_null(c->work);

    for (r = 0; r < n; r++) {
        uint8_t *wr = c->w + r * rb;

        switch (type) {
        case BATON_TYPE_F32:
            for (i = 0; i < k; i++)
                ((float *)wr)[i] = rng_unit();
            break;
        case BATON_TYPE_F16:
            for (i = 0; i < k; i++) {
                const uint16_t h = baton_fp32_to_fp16(rng_unit() * 2.0f);

                wr[2 * i] = (uint8_t)h;
                wr[2 * i + 1] = (uint8_t)(h >> 8);
            }
            break;
        case BATON_TYPE_BF16:
            bf16_row_fill(wr, k, r);
            break;
        default: /* any bytes are a valid block; scales kept moderate */
            for (i = 0; i < rb; i++)
                wr[i] = (uint8_t)rng32();
            for (i = 0; i < k / 32; i++) {
                const uint16_t h = baton_fp32_to_fp16(rng_unit() * 0.05f);
                uint8_t *p = wr + i * block_bytes_of(type);

                p[0] = (uint8_t)h;
                p[1] = (uint8_t)(h >> 8);
                if (type == BATON_TYPE_Q5_1) { /* the min, as large as the range */
                    const uint16_t hm = baton_fp32_to_fp16(rng_unit() * 1.5f);

                    p[2] = (uint8_t)hm;
                    p[3] = (uint8_t)(hm >> 8);
                }
            }
            break;
        }
    }
    for (i = 0; i < k * m; i++) /* blocks of different magnitudes, a zero run */
        c->x[i] = rng_unit() * (float)(1 + (i / 32) % 5) * ((i / 40) % 9 == 3 ? 0.0f : 1.0f);
    case_ref(c);
}

static void case_ref(struct mm_case *c)
{
    const uint32_t type = c->type;
    const uint64_t k = c->k, n = c->n, m = c->m, rb = baton_row_bytes(type, k);
    uint64_t i, r;

    for (i = 0; i < m; i++)
        for (r = 0; r < n; r++) {
            const uint8_t *wr = c->w + r * rb;
            const float *xc = c->x + i * k;
            float v;

            switch (type) {
            case BATON_TYPE_F32:
                v = ref_f32((const float *)wr, xc, k);
                break;
            case BATON_TYPE_F16:
            case BATON_TYPE_BF16:
                v = ref_h16(wr, type == BATON_TYPE_BF16, xc, k);
                break;
            case BATON_TYPE_Q5_0:
            case BATON_TYPE_Q5_1:
                v = ref_q5(wr, type == BATON_TYPE_Q5_1, xc, k);
                break;
            default:
                v = ref_q(wr, type, xc, k);
                break;
            }
            c->want[i * n + r] = v;
        }
}

static void case_free(struct mm_case *c)
{
    free(c->w_alloc);
    free(c->x);
    free(c->want);
    free(c->got);
    free(c->one);
    free(c->work);
}

static void expect_same(const float *got, const float *want, uint64_t count, const char *what)
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

/* The rows in two pieces written in place into a wider output (column
 * stride ldy = n + 5, as graph.c's products in pieces write theirs): the
 * same bits as the reference, and the 5 floats past each column's rows
 * untouched. One group of two parts (the second's rows start at n / 2). */
static void strided_check(const struct mm_case *c, struct baton_pool *pool, enum baton_cpu_isa lvl)
{
    const uint64_t ldy = c->n + 5, n1 = c->n / 2, rb = baton_row_bytes(c->type, c->k);
    float *ys = malloc(ldy * c->m * sizeof(float));
    uint64_t col, r;
    char what[96];

    assert_non_null(ys);
    for (r = 0; r < ldy * c->m; r++)
        ys[r] = -7.5f;
    const struct baton_cpu_mm_part parts[2] = {{c->w, ys, n1, ldy},
                                               {c->w + n1 * rb, ys + n1, c->n - n1, ldy}};
    baton_cpu_mul_mat_group(pool, c->type, n1 > 0 ? parts : parts + 1, n1 > 0 ? 2 : 1, c->x, c->k,
                            c->m, c->work);
    for (col = 0; col < c->m; col++) {
        snprintf(what, sizeof(what), "%s %s column %llu strided", baton_type_name(c->type),
                 baton_cpu_isa_name(lvl), (unsigned long long)col);
        expect_same(ys + col * ldy, c->want + col * c->n, c->n, what);
        for (r = c->n; r < ldy; r++)
            assert_true(ys[col * ldy + r] == -7.5f);
    }
    free(ys);
}

/* Runs the case at every level this CPU has, with the given pools; checks
 * the batch against the reference, the rows in pieces into a wider output
 * (strided_check) and each column alone against it. */
static void case_check(struct mm_case *c, struct baton_pool **pools, int n_pools)
{
    int lvl, p;
    uint64_t col;
    char what[96];

    for (lvl = BATON_CPU_ISA_SCALAR; lvl <= BATON_CPU_ISA_AVX512; lvl++) {
        if ((int)baton_cpu_isa_set((enum baton_cpu_isa)lvl) != lvl)
            continue;
        for (p = 0; p < n_pools; p++) {
            snprintf(what, sizeof(what), "%s %s k=%llu n=%llu m=%llu threads=%u",
                     baton_type_name(c->type), baton_cpu_isa_name((enum baton_cpu_isa)lvl),
                     (unsigned long long)c->k, (unsigned long long)c->n, (unsigned long long)c->m,
                     baton_pool_threads(pools[p]));
            memset(c->got, 0x55, c->n * c->m * sizeof(float));
            baton_cpu_mul_mat_typed(pools[p], c->type, c->w, c->x, c->got, c->k, c->n, c->m,
                                    c->work);
            expect_same(c->got, c->want, c->n * c->m, what);
        }
        strided_check(c, pools[n_pools - 1], (enum baton_cpu_isa)lvl);
        for (col = 0; col < c->m; col++) {
            snprintf(what, sizeof(what), "%s %s column %llu alone", baton_type_name(c->type),
                     baton_cpu_isa_name((enum baton_cpu_isa)lvl), (unsigned long long)col);
            baton_cpu_mul_mat_typed(pools[0], c->type, c->w, c->x + col * c->k, c->one, c->k, c->n,
                                    1, c->work);
            expect_same(c->one, c->want + col * c->n, c->n, what);
        }
    }
    baton_cpu_isa_set(BATON_CPU_ISA_AVX512); /* back to the best */
}

static void random_cases(uint32_t type, const uint64_t *ks, int n_ks, int n_cases)
{
    struct baton_pool *pools[3];
    int i;

    assert_int_equal(baton_pool_create(1, &pools[0]), 0);
    assert_int_equal(baton_pool_create(2, &pools[1]), 0);
    assert_int_equal(baton_pool_create(3, &pools[2]), 0);
    for (i = 0; i < n_cases; i++) {
        struct mm_case c;
        const uint64_t k = ks[rng_below((uint32_t)n_ks)];
        const uint64_t n = 1 + rng_below(40), m = 1 + rng_below(7);

        case_fill(&c, type, k, n, m);
        case_check(&c, pools, 3);
        case_free(&c);
    }
    baton_pool_destroy(pools[0]);
    baton_pool_destroy(pools[1]);
    baton_pool_destroy(pools[2]);
}

static const uint64_t k_any[] = {1, 5, 8, 9, 16, 31, 32, 33, 47, 64, 100, 257};
/* block counts 1-7, 10, 17, 19: every tail (nb % 4) before and after whole
 * groups of 4 (AVX2 Q8_0 decode pipelines groups from nb 4 on) */
static const uint64_t k_blocks[] = {32, 64, 96, 128, 160, 192, 224, 320, 544, 608};

static void test_f32_random(void **state)
{
    (void)state;
    rng_state = 1;
    random_cases(BATON_TYPE_F32, k_any, 12, 40);
}

static void test_f16_random(void **state)
{
    (void)state;
    rng_state = 2;
    random_cases(BATON_TYPE_F16, k_any, 12, 40);
}

static void test_bf16_random(void **state)
{
    (void)state;
    rng_state = 14;
    random_cases(BATON_TYPE_BF16, k_any, 12, 40);
}

static void test_q8_0_random(void **state)
{
    (void)state;
    rng_state = 3;
    random_cases(BATON_TYPE_Q8_0, k_blocks, 10, 50);
}

static void test_q4_0_random(void **state)
{
    (void)state;
    rng_state = 4;
    random_cases(BATON_TYPE_Q4_0, k_blocks, 10, 50);
}

static void test_iq4_nl_random(void **state)
{
    (void)state;
    rng_state = 20;
    random_cases(BATON_TYPE_IQ4_NL, k_blocks, 10, 50);
}

static void test_q5_0_random(void **state)
{
    (void)state;
    rng_state = 41;
    random_cases(BATON_TYPE_Q5_0, k_blocks, 10, 50);
}

static void test_q5_1_random(void **state)
{
    (void)state;
    rng_state = 42;
    random_cases(BATON_TYPE_Q5_1, k_blocks, 10, 50);
}

/* Shapes past one row block of the prefill walk (256 KiB of weights), so
 * several row blocks and column groups (4 + 4 + 1, and 19 columns: past
 * the row-at-a-time limit) are crossed, and the decode walk's row tiles
 * with a ragged end. */
static void test_large_shapes(void **state)
{
    static const uint32_t types[] = {BATON_TYPE_F32,  BATON_TYPE_F16,   BATON_TYPE_BF16,
                                     BATON_TYPE_Q8_0, BATON_TYPE_Q4_0,  BATON_TYPE_Q5_0,
                                     BATON_TYPE_Q5_1, BATON_TYPE_IQ4_NL};
    struct baton_pool *pools[2];
    unsigned t;

    (void)state;
    rng_state = 5;
    assert_int_equal(baton_pool_create(1, &pools[0]), 0);
    assert_int_equal(baton_pool_create(2, &pools[1]), 0);
    for (t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        struct mm_case c;

        /* with 9 columns AVX-512 Q8_0 takes its 4-row tiles, or where
         * AVX-512 runs on 256-bit halves one row at a time: both here */
        baton_cpu_avx512_split_set(0);
        case_fill(&c, types[t], 2048, 163, 9);
        case_check(&c, pools, 2);
        case_free(&c);
        baton_cpu_avx512_split_set(1);
        case_fill(&c, types[t], 2048, 163, 9);
        case_check(&c, pools, 2);
        case_free(&c);
        baton_cpu_avx512_split_set(-1);
        /* past row_max_m (matmul.h): the multi-row tiles, 4 + 4 + 4 + 4 + 3
         * columns */
        case_fill(&c, types[t], 2048, 163, 19);
        case_check(&c, pools, 2);
        case_free(&c);
    }
    baton_pool_destroy(pools[0]);
    baton_pool_destroy(pools[1]);
}

/* Every k of ks against every m of ms, 37 rows of type, 1 and 2 threads. */
static void shape_grid(uint32_t type, const uint64_t *ks, unsigned n_ks, const uint64_t *ms,
                       unsigned n_ms)
{
    struct baton_pool *pools[2];
    unsigned i, m;

    assert_int_equal(baton_pool_create(1, &pools[0]), 0);
    assert_int_equal(baton_pool_create(2, &pools[1]), 0);
    for (i = 0; i < n_ks; i++)
        for (m = 0; m < n_ms; m++) {
            struct mm_case c;

            case_fill(&c, type, ks[i], 37, ms[m]);
            case_check(&c, pools, 2);
            case_free(&c);
        }
    baton_pool_destroy(pools[0]);
    baton_pool_destroy(pools[1]);
}

/* The Q4_0 kernels go 16 (AVX-512) or 8 (AVX2) rows at a time; the
 * AVX-512 decode takes groups of 4 blocks, then the last blocks one by
 * one, and its batched products transpose chunks of 64 blocks and pass
 * over as many columns as have 1 MiB of activations, at least 8. Lengths of 5 groups
 * (640), 6 (768), 6 and 1, 2 or 3 blocks (800, 832, 864), 7 (896), 9 and
 * a block (1184), past one chunk (2080: 65 blocks) and many (33280: 1040
 * blocks: 15 columns' activations in 1 MiB, so passes of 8); 37 rows (two 16-row strips and
 * a ragged end of 5), 1, 2 and 17 columns. */
static void test_q4_0_decode_chunks(void **state)
{
    static const uint64_t ks[] = {640, 768, 800, 832, 864, 896, 1184, 2080, 33280};
    static const uint64_t ms[] = {1, 2, 17};

    (void)state;
    rng_state = 9;
    shape_grid(BATON_TYPE_Q4_0, ks, 9, ms, 3);
}

/* IQ4_NL through Q4_0's strips, decode groups and packed chunks (above),
 * its nibbles looked up in the grid. */
static void test_iq4_nl_decode_chunks(void **state)
{
    static const uint64_t ks[] = {640, 800, 864, 1184, 2080, 33280};
    static const uint64_t ms[] = {1, 2, 17};

    (void)state;
    rng_state = 21;
    shape_grid(BATON_TYPE_IQ4_NL, ks, 6, ms, 3);
}

/* IQ4_NL blocks at the edges: every row holds all 16 levels at every
 * nibble position (low and high) across its blocks, the extreme levels
 * -127 and 113 against x of +-127 (|isum| up to 32 * 127 * 127 = 516128,
 * past int16 at every step a kernel might add in it), and binary16 scales
 * of every kind: subnormal (0x0001, 0x83FF), the largest finite (65504,
 * products overflow to +-inf, which meet in NaN), +-0, +inf, NaN; 37 rows
 * (strips of 8 and 16 and a ragged end), 1, 3 and 17 columns. */
static void test_iq4_nl_edges(void **state)
{
    static const uint16_t scales[] = {0x0001, 0x83FF, 0x7BFF, 0xFBFF, 0x0000,
                                      0x8000, 0x7C00, 0x7E00, 0x3C00, 0x2E66};
    static const uint64_t ms[] = {1, 3, 17};
    struct baton_pool *pools[2];
    unsigned mi;

    (void)state;
    rng_state = 22;
    assert_int_equal(baton_pool_create(1, &pools[0]), 0);
    assert_int_equal(baton_pool_create(2, &pools[1]), 0);
    for (mi = 0; mi < 3; mi++) {
        struct mm_case c;
        const uint64_t k = 32 * 19, n = 37, rb = baton_row_bytes(BATON_TYPE_IQ4_NL, k);
        uint64_t r, b, i;

        case_fill(&c, BATON_TYPE_IQ4_NL, k, n, ms[mi]);
        for (r = 0; r < n; r++)
            for (b = 0; b < k / 32; b++) {
                uint8_t *p = c.w + r * rb + b * 18;
                const uint16_t h = r % 3 == 0   ? scales[(r / 3 + b) % 10]
                                   : r % 3 == 1 ? 0x2E66 /* 0.1 */
                                                : p[0] | (uint16_t)(p[1] & 0x3F) << 8;

                p[0] = (uint8_t)h;
                p[1] = (uint8_t)(h >> 8);
                for (i = 0; i < 16; i++) /* low nibble level (i + b + r), high 15 - that */
                    p[2 + i] = (uint8_t)((i + b + r) % 16 | (15 - (i + b + r) % 16) << 4);
                if (r % 3 == 1 && b % 2 == 0) /* every element the lowest or highest level */
                    memset(p + 2, b % 4 == 0 ? 0x00 : 0xFF, 16);
            }
        for (i = 0; i < k * c.m; i++) /* blocks of +-127 exactly, others random */
            if (i / 32 % 3 == 0)
                c.x[i] = (i / 32 % 2 ? -1.0f : 1.0f) * 3.5f;
        case_ref(&c);
        case_check(&c, pools, 2);
        case_free(&c);
    }
    baton_pool_destroy(pools[0]);
    baton_pool_destroy(pools[1]);
}

/* AVX-512 Q8_0 from 12 columns on transposes chunks of 64 blocks of each
 * 16-row strip and passes over at most 64 columns, 4 at a time, each
 * output's 4 chains kept in a buffer between chunks: three blocks (96: a
 * short group), 25 (800), two chunks, the second ending in 3 blocks past
 * its whole groups (4192: 131 blocks), five (8320: 260); 37 rows (two
 * strips and a ragged one of 5); 12 and 16 columns, and 67 (a pass of 60
 * at 8320 inputs, of 64 below, and the rest, in calls of 4 and of 3). */
static void test_q8_0_packed(void **state)
{
    static const uint64_t ks[] = {96, 800, 4192, 8320};
    static const uint64_t ms[] = {12, 16, 67};

    (void)state;
    rng_state = 10;
    shape_grid(BATON_TYPE_Q8_0, ks, 4, ms, 3);
}

/* AVX-512 F16 and BF16 decode goes 8 rows at a time, and rows longer than
 * 4096 inputs by chunks of 2048, every row's chunk before the next chunk:
 * 4096 (the longest row taken a row at a time), two chunks and one input
 * (4097), two and two groups of 32 (4160), two, three groups and a tail of
 * 8 (4200), four chunks (8192), six and a ragged tail of 31 (12319); 37
 * rows (4 calls and a ragged end of 5), 1 column, and 3 columns (the
 * tiles, untouched) beside it. The chunked path exists only at the AVX-512
 * level: on a CPU without it, the test says so and checks the other levels. */
static void decode_chunks(uint32_t type)
{
    static const uint64_t ks[] = {4096, 4097, 4160, 4200, 8192, 12319};
    static const uint64_t ms[] = {1, 3};

    if (baton_cpu_isa_set(BATON_CPU_ISA_AVX512) != BATON_CPU_ISA_AVX512)
        print_message("no AVX-512 here: its chunked %s decode is not exercised\n",
                      baton_type_name(type));
    shape_grid(type, ks, 6, ms, 2);
}

static void test_f16_decode_chunks(void **state)
{
    (void)state;
    rng_state = 12;
    decode_chunks(BATON_TYPE_F16);
}

static void test_bf16_decode_chunks(void **state)
{
    (void)state;
    rng_state = 15;
    decode_chunks(BATON_TYPE_BF16);
}

/* AVX-512 F16 and BF16 products of several columns with rows of 2048
 * inputs or more go by blocks of 32 rows, column groups of 6 and k-chunks
 * of 1024, the row pairs' lanes kept between chunks: exactly 2048 (two
 * chunks), 2049 (a third chunk of one input), 3079 (three chunks and a
 * ragged one of 7 inputs), 4096; 37 rows (a block and a ragged one of 5,
 * whose fifth row goes alone), 2 columns, 6 (one whole group), 7 and 13
 * (whole groups and a group of 1). AVX2 F16 and BF16 tiles of 4 rows x 3
 * columns go by k-chunks of 1024 too: the same shapes give them one, two
 * and three chunks with a ragged tail, ragged rows and column groups. */
static void prefill_chunks(uint32_t type)
{
    static const uint64_t ks[] = {2048, 2049, 3079, 4096};
    static const uint64_t ms[] = {2, 6, 7, 13};

    if (baton_cpu_isa_set(BATON_CPU_ISA_AVX512) != BATON_CPU_ISA_AVX512)
        print_message("no AVX-512 here: its k-chunked %s prefill is not exercised\n",
                      baton_type_name(type));
    shape_grid(type, ks, 4, ms, 4);
}

static void test_f16_prefill_chunks(void **state)
{
    (void)state;
    rng_state = 13;
    prefill_chunks(BATON_TYPE_F16);
}

static void test_bf16_prefill_chunks(void **state)
{
    (void)state;
    rng_state = 16;
    prefill_chunks(BATON_TYPE_BF16);
}

/* binary32 -> binary16 rows (ATTENTION's writes into an F16 KV cache) at
 * every level give baton_fp32_to_fp16's bits: zeros, infinities, quiet
 * and signalling NaNs with payloads, the overflow threshold (65504 stays,
 * 65520 becomes inf), the normal/subnormal boundary, the smallest
 * subnormal and the ties around it, then random bit patterns; rows of
 * 1..21 values (the SIMD levels' tails). */
static void test_f32_to_f16_row(void **state)
{
    static const uint32_t special[] = {
        0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00001u,
        0x7F800001u, 0x7FA5A5A5u, 0xFF9FFFFFu, 0x477FE000u, 0x477FEFFFu, 0x477FF000u,
        0x38800000u, 0x387FFFFFu, 0x387FE000u, 0x33800000u, 0x33000000u, 0x33000001u,
        0x33C00000u, 0x3F801000u, 0x3F803000u, 0x3F800FFFu, 0x00000001u, 0x807FFFFFu,
    };
    enum { N_VALUES = 1u << 16 };
    float *x = malloc(N_VALUES * sizeof(float));
    uint16_t *want = malloc(N_VALUES * sizeof(uint16_t)), *got = malloc(N_VALUES * 2);
    uint64_t i, n;
    int lvl;

    (void)state;
    assert_non_null(x);
    assert_non_null(want);
    assert_non_null(got);
    rng_state = 11;
    for (i = 0; i < N_VALUES; i++) {
        const uint32_t b = i < sizeof(special) / sizeof(special[0]) ? special[i] : rng32();

        memcpy(&x[i], &b, sizeof(b));
        want[i] = baton_fp32_to_fp16(x[i]);
    }
    for (lvl = BATON_CPU_ISA_SCALAR; lvl <= BATON_CPU_ISA_AVX512; lvl++) {
        if ((int)baton_cpu_isa_set((enum baton_cpu_isa)lvl) != lvl)
            continue;
        memset(got, 0x55, N_VALUES * 2);
        baton_cpu_f32_to_f16_row(x, got, N_VALUES);
        for (i = 0; i < N_VALUES; i++)
            if (got[i] != want[i])
                fail_msg("%s: value %llu (bits 0x%08x): 0x%04x, want 0x%04x",
                         baton_cpu_isa_name((enum baton_cpu_isa)lvl), (unsigned long long)i,
                         (unsigned)(*(const uint32_t *)(const void *)&x[i]), got[i], want[i]);
        for (n = 1; n <= 21; n++) {
            memset(got, 0x55, 64);
            baton_cpu_f32_to_f16_row(x + 1, (uint8_t *)got + 1, n); /* unaligned dst */
            for (i = 0; i < n; i++) {
                uint16_t h;

                memcpy(&h, (uint8_t *)got + 1 + 2 * i, 2);
                assert_int_equal(h, want[1 + i]);
            }
            assert_int_equal(((uint8_t *)got)[1 + 2 * n], 0x55); /* nothing past n */
        }
    }
    baton_cpu_isa_set(BATON_CPU_ISA_AVX512);
    free(x);
    free(want);
    free(got);
}

/* A non-finite activation makes its column NaN for quantized weights
 * (the block's scale is NaN), on every level. */
static void test_nonfinite_activation(void **state)
{
    struct mm_case c;
    struct baton_pool *pool = NULL;
    uint64_t r;

    (void)state;
    rng_state = 6;
    case_fill(&c, BATON_TYPE_Q8_0, 96, 10, 3);
    c.x[96 + 40] = INFINITY; /* column 1, block 1 */
    for (r = 0; r < 10; r++)
        c.want[10 + r] =
            ref_q(c.w + r * baton_row_bytes(BATON_TYPE_Q8_0, 96), BATON_TYPE_Q8_0, c.x + 96, 96);
    for (r = 0; r < 10; r++)
        assert_true(isnan(c.want[10 + r]));
    case_check(&c, &pool, 1);
    case_free(&c);
}

/* The activation quantizer of every level writes the same bytes as the
 * scalar one (values of many magnitudes, ties, a zero block, a NaN block,
 * a padded last group), for every bias (Q8_0 128, Q4_0 8, Q5_0 16, Q5_1 -1). */
static void test_act_levels_equal(void **state)
{
    static const uint32_t types[] = {BATON_TYPE_Q8_0, BATON_TYPE_Q4_0, BATON_TYPE_Q5_0,
                                     BATON_TYPE_Q5_1};
    const uint64_t k = 32 * 7, m = 3, bytes = m * baton_cpu_act_col_bytes(32 * 7);
    float x[32 * 7 * 3];
    uint8_t *want = aligned_alloc(64, bytes), *got = aligned_alloc(64, bytes);
    unsigned t, i;
    int lvl;

    (void)state;
    assert_non_null(want);
    assert_non_null(got);
    rng_state = 8;
    for (i = 0; i < k * m; i++)
        x[i] = rng_unit() * (float)(1u << (i / 32 % 9)) * 1e-3f;
    for (i = 64; i < 96; i++)
        x[i] = 0.0f;
    x[200] = NAN;
    x[300] = 127.0f; /* a block where x * (1/d) hits exact halves */
    x[301] = 0.5f;
    x[302] = -1.5f;
    /* block 10 (column 1, block 3): every |x| about 1e-38, so d = amax / 127
     * is subnormal and 1/d overflows to +inf: every q is 0 at every level
     * (matmul.h), not rint(inf) (scalar: 0 after the int8 cast; cvtps2dq:
     * INT_MIN, packed to -128) */
    for (i = 320; i < 352; i++)
        x[i] = (i % 2 ? 1.0f : -1.0f) * 1e-38f * (float)(1 + i % 5) / 5.0f;
    for (t = 0; t < 4; t++) {
        baton_cpu_isa_set(BATON_CPU_ISA_SCALAR);
        memset(want, 0xAB, bytes);
        baton_cpu_quantize_act(NULL, types[t], x, k, m, want);
        {
            /* column 1, block 3 = group 0's block 3 of column 1: its 32 q bytes */
            const uint8_t *grp = want + 1 * baton_cpu_act_col_bytes(k);
            static const int8_t zero[16] = {0};

            assert_memory_equal(grp + 16 * 3, zero, 16);
            assert_memory_equal(grp + 64 + 16 * 3, zero, 16);
        }
        for (lvl = BATON_CPU_ISA_AVX2; lvl <= BATON_CPU_ISA_AVX512; lvl++) {
            if ((int)baton_cpu_isa_set((enum baton_cpu_isa)lvl) != lvl)
                continue;
            memset(got, 0xCD, bytes);
            baton_cpu_quantize_act(NULL, types[t], x, k, m, got);
            assert_memory_equal(got, want, bytes);
        }
    }
    baton_cpu_isa_set(BATON_CPU_ISA_AVX512);
    free(want);
    free(got);
}

/* ATTENTION's helpers at every level against plain sequential loops (run.c's
 * order), bit for bit: scores over strided cache rows (the slot stride is
 * larger than the row, as with several KV heads), slot counts that are not
 * a multiple of the 8-row tile, head sizes with ragged tails; the weighted
 * sum over the same rows. Nothing outside y / out is written. */
static void test_attention_helpers_levels(void **state)
{
    /* up to 256 the SIMD scores prefetch the group of 16 rows two groups
     * ahead (the slot counts 56 and 67 here); 257 and 264 do not */
    static const uint64_t hds[] = {1, 7, 8, 9, 31, 64, 65, 72, 128, 256, 257, 264};
    enum { MAXN = 67, MAXK = 264, STRIDE_EXTRA = 3 };
    float *cache = malloc(sizeof(float) * MAXN * (MAXK + STRIDE_EXTRA) * 2);
    float q[MAXK], a[MAXN], want[MAXN + 1], got[MAXN + 1];
    uint64_t h, n, s, i;
    int lvl;

    (void)state;
    assert_non_null(cache);
    rng_state = 11;
    for (i = 0; i < MAXN * (MAXK + STRIDE_EXTRA) * 2; i++)
        cache[i] = rng_unit() * (float)(1u << (i % 7));
    for (i = 0; i < MAXK; i++)
        q[i] = rng_unit();
    for (i = 0; i < MAXN; i++)
        a[i] = rng_unit() * 0.1f;
    for (h = 0; h < sizeof(hds) / sizeof(hds[0]); h++) {
        const uint64_t k = hds[h], ws = 2 * k + STRIDE_EXTRA;

        for (n = 1; n <= MAXN; n += 11) {
            for (s = 0; s < n; s++) {
                float acc = 0.0f;

                for (i = 0; i < k; i++)
                    acc = acc + cache[s * ws + i] * q[i];
                want[s] = acc;
            }
            for (lvl = BATON_CPU_ISA_SCALAR; lvl <= BATON_CPU_ISA_AVX512; lvl++) {
                char what[64];

                if ((int)baton_cpu_isa_set((enum baton_cpu_isa)lvl) != lvl)
                    continue;
                snprintf(what, sizeof(what), "dots %s k=%llu n=%llu",
                         baton_cpu_isa_name((enum baton_cpu_isa)lvl), (unsigned long long)k,
                         (unsigned long long)n);
                got[n] = 12345.0f;
                baton_cpu_f32_dots(cache, ws, q, k, n, got);
                expect_same(got, want, n, what);
                assert_true(got[n] == 12345.0f);
            }
            /* several queries at once (xs = MAXK + 5 floats apart, results
             * ys = MAXN + 2 apart): each query's scores as it alone gets them */
            {
                enum { XS = MAXK + 5, YS = MAXN + 2, NXMAX = 4 };
                static float qs[NXMAX * XS], wm[NXMAX * YS], gm[NXMAX * YS];
                uint32_t nx, c;

                for (i = 0; i < NXMAX * XS; i++)
                    qs[i] = rng_unit();
                for (c = 0; c < NXMAX; c++)
                    for (s = 0; s < n; s++) {
                        float acc = 0.0f;

                        for (i = 0; i < k; i++)
                            acc = acc + cache[s * ws + i] * qs[c * XS + i];
                        wm[c * YS + s] = acc;
                    }
                for (nx = 1; nx <= NXMAX; nx++)
                    for (lvl = BATON_CPU_ISA_SCALAR; lvl <= BATON_CPU_ISA_AVX512; lvl++) {
                        char what[80];

                        if ((int)baton_cpu_isa_set((enum baton_cpu_isa)lvl) != lvl)
                            continue;
                        for (i = 0; i < NXMAX * YS; i++)
                            gm[i] = 12345.0f;
                        baton_cpu_f32_dots_multi(cache, ws, qs, XS, nx, k, n, gm, YS);
                        for (c = 0; c < NXMAX; c++) {
                            snprintf(what, sizeof(what), "dots_multi %s k=%llu n=%llu nx=%u c=%u",
                                     baton_cpu_isa_name((enum baton_cpu_isa)lvl),
                                     (unsigned long long)k, (unsigned long long)n, nx, c);
                            if (c < nx)
                                expect_same(gm + c * YS, wm + c * YS, n, what);
                            /* nothing past n, nor for queries past nx */
                            for (i = c < nx ? n : 0; i < YS; i++)
                                assert_true(gm[c * YS + i] == 12345.0f);
                        }
                    }
            }
            /* weighted sum of n rows of k: out has k elements */
            {
                float wout[MAXK + 1], gout[MAXK + 1];

                for (i = 0; i < k; i++) {
                    float acc = 0.0f;

                    for (s = 0; s < n; s++)
                        acc = acc + a[s] * cache[s * ws + i];
                    wout[i] = acc;
                }
                for (lvl = BATON_CPU_ISA_SCALAR; lvl <= BATON_CPU_ISA_AVX512; lvl++) {
                    char what[64];

                    if ((int)baton_cpu_isa_set((enum baton_cpu_isa)lvl) != lvl)
                        continue;
                    snprintf(what, sizeof(what), "wsum %s k=%llu n=%llu",
                             baton_cpu_isa_name((enum baton_cpu_isa)lvl), (unsigned long long)k,
                             (unsigned long long)n);
                    memset(gout, 0x55, sizeof(gout));
                    gout[k] = 12345.0f;
                    baton_cpu_f32_wsum(cache, ws, a, n, k, gout);
                    expect_same(gout, wout, k, what);
                    assert_true(gout[k] == 12345.0f);
                }
            }
        }
    }
    baton_cpu_isa_set(BATON_CPU_ISA_AVX512);
    free(cache);
}

/* A sliding window is the same as each token's first cell raised to
 * pos - window + 1: the attention a computed (want) is run again with no
 * window and those first cells (scratch: wfirst), the same bits. */
static void expect_window_as_first(const struct baton_cpu_attention *a, const float *want,
                                   int32_t *wfirst)
{
    struct baton_cpu_attention b = *a;
    float *out = malloc(sizeof(float) * a->hd * a->nh * a->nt);
    int32_t first2[64];
    uint64_t t;

    assert_non_null(out);
    assert_true(a->nt <= 64);
    for (t = 0; t < a->nt; t++) {
        const int32_t f = a->first ? wfirst[t] : 0, lo = a->pos[t] - (int32_t)a->window + 1;

        first2[t] = lo > f ? lo : f;
    }
    b.first = first2;
    b.window = 0;
    b.out = out;
    assert_int_equal(baton_cpu_attention(NULL, &b), 0);
    assert_memory_equal(out, want, sizeof(float) * a->hd * a->nh * a->nt);
    /* and the window did cut something: a token reads fewer cells */
    for (t = 0; t < a->nt; t++)
        if (first2[t] != (a->first ? wfirst[t] : 0))
            break;
    if (a->nt > a->window)
        assert_true(t < a->nt);
    free(out);
}

/* The whole ATTENTION (baton_cpu_attention) at every level against the
 * scalar level, bit for bit: prefill blocks of one sequence (the block
 * kernel of the AVX2 and AVX-512 levels, baton_cpu_att_block), ragged
 * block and head sizes, a head size past the block kernel's limit (the
 * per-token path), grouped-query heads, positions and windows past cell 0,
 * two sequences in one batch interleaved (per-token windows) and back to
 * back (runs of one window within a block), scores large enough that most weights
 * underflow to 0, a NaN query, binary16 caches, sliding windows (also
 * against the same first cells given explicitly), on 1 and 3 threads; the
 * caches end the same. */
static void test_attention_levels(void **state)
{
    static const uint64_t hds[] = {1, 8, 15, 16, 36, 64, 80, 128, 200, 256, 264};
    static const uint32_t nts[] = {1, 5, 16, 17, 40};
    enum { NH = 4, NKV = 2, NCTX = 90, MAXT = 40, MAXHD = 264 };
    const size_t ncache = (size_t)MAXHD * NCTX * NKV;
    /* the F16 work area's conversion windows: 64 rows of hd floats per chunk */
    const size_t nwork = 64 * NCTX + 64 * (size_t)BATON_CPU_ATT_F16_ROWS * MAXHD;
    float *q = malloc(sizeof(float) * MAXHD * NH * MAXT),
          *k = malloc(sizeof(float) * MAXHD * NKV * MAXT),
          *v = malloc(sizeof(float) * MAXHD * NKV * MAXT), *kc0 = malloc(sizeof(float) * ncache),
          *vc0 = malloc(sizeof(float) * ncache), *kc = malloc(sizeof(float) * ncache),
          *vc = malloc(sizeof(float) * ncache), *kw = malloc(sizeof(float) * ncache),
          *vw = malloc(sizeof(float) * ncache), *want = malloc(sizeof(float) * MAXHD * NH * MAXT),
          *got = malloc(sizeof(float) * MAXHD * NH * MAXT),
          *work = malloc(sizeof(float) * nwork);
    static const uint32_t pools_n[] = {1, 3};
    struct baton_pool *pools[2];
    int32_t pos[MAXT], first[MAXT];
    size_t i;

    (void)state;
    assert_non_null(q && k && v && kc0 && vc0 && kc && vc && kw && vw && want && got && work);
    for (i = 0; i < 2; i++)
        assert_int_equal(baton_pool_create(pools_n[i], &pools[i]), 0);
    rng_state = 2024;
    for (i = 0; i < ncache; i++) {
        kc0[i] = rng_unit();
        vc0[i] = rng_unit();
    }
    for (size_t h = 0; h < sizeof hds / sizeof hds[0]; h++)
        for (size_t t = 0; t < sizeof nts / sizeof nts[0]; t++)
            for (int kind = 0; kind < 9; kind++) {
                /* 0: from cell 0; 1: from cell 37; 2: two sequences (cells 0.. and
                 * 45..) with their tokens interleaved; 3: from cell 3, large
                 * scores, token 2's query NaN; 4: binary16 caches from cell 5;
                 * 5: one sequence in cells 45.. (its window starts there); 6: two
                 * sequences back to back (the first half of the tokens in cells
                 * 0.., the rest in cells 45..: runs of one window in a block); 7: case 6
                 * with a sliding window of 5 cells; 8: case 0 with a window of 3 (each
                 * token's own first cell) */
                const int lay = kind == 7 ? 6 : kind == 8 ? 0 : kind;
                const uint32_t window = kind == 7 ? 5 : kind == 8 ? 3 : 0;
                const uint64_t hd = hds[h];
                const uint32_t nt = kind == 1 && nts[t] > NCTX - 37 ? NCTX - 37 : nts[t];
                const float qscale = kind == 3 ? 40.0f : 1.0f;

                for (i = 0; i < hd * NH * nt; i++)
                    q[i] = rng_unit() * qscale;
                if (kind == 3 && nt > 2)
                    q[2 * NH * hd] = NAN;
                for (i = 0; i < hd * NKV * nt; i++) {
                    k[i] = rng_unit();
                    v[i] = rng_unit();
                }
                for (i = 0; i < nt; i++) {
                    const uint32_t half = (nt + 1) / 2;

                    first[i] = (lay == 2 && i % 2) || lay == 5 || (lay == 6 && i >= half)
                                   ? 45
                                   : 0;
                    pos[i] = lay == 0   ? (int32_t)i
                             : lay == 1 ? (int32_t)(37 + i)
                             : lay == 2 ? first[i] + (int32_t)(i / 2)
                             : lay == 3 ? (int32_t)(3 + i)
                             : lay == 4 ? (int32_t)(5 + i)
                             : lay == 5 ? (int32_t)(45 + i)
                                        : first[i] + (int32_t)(i >= half ? i - half : i);
                }
                for (size_t p = 0; p < 2; p++)
                    for (int lvl = BATON_CPU_ISA_SCALAR; lvl <= BATON_CPU_ISA_AVX512; lvl++) {
                        struct baton_cpu_attention a = {q,      k,   v,   kc,  vc,  pos,
                                                        lay == 2 || lay >= 5 ? first : NULL,
                                                        got,    work, hd, NH,  NKV, nt,
                                                        NCTX,   0.125f, 0,  0, window};
                        char what[96];

                        if ((int)baton_cpu_isa_set((enum baton_cpu_isa)lvl) != lvl)
                            continue;
                        memcpy(kc, kc0, sizeof(float) * hd * NCTX * NKV);
                        memcpy(vc, vc0, sizeof(float) * hd * NCTX * NKV);
                        a.cache_f16 = kind == 4; /* the first half of each cache, as binary16 */
                        for (i = 0; a.cache_f16 && i < hd * NCTX * NKV; i++) {
                            ((uint16_t *)kc)[i] = baton_fp32_to_fp16(kc0[i]);
                            ((uint16_t *)vc)[i] = baton_fp32_to_fp16(vc0[i]);
                        }
                        memset(got, 0x55, sizeof(float) * hd * NH * nt);
                        a.divide = 0;
                        if (kind == 1)
                            a.divide = 1, a.scale = 8.0f;
                        assert_int_equal(baton_cpu_attention(pools[p], &a), 0);
                        if (lvl == BATON_CPU_ISA_SCALAR) {
                            memcpy(want, got, sizeof(float) * hd * NH * nt);
                            memcpy(kw, kc, sizeof(float) * hd * NCTX * NKV);
                            memcpy(vw, vc, sizeof(float) * hd * NCTX * NKV);
                            if (window != 0)
                                expect_window_as_first(&a, want, first);
                            continue;
                        }
                        snprintf(what, sizeof what, "attention %s hd=%llu nt=%u case %d pool %u",
                                 baton_cpu_isa_name((enum baton_cpu_isa)lvl),
                                 (unsigned long long)hd, nt, kind, pools_n[p]);
                        expect_same(got, want, hd * NH * nt, what);
                        assert_memory_equal(kc, kw, sizeof(float) * hd * NCTX * NKV);
                        assert_memory_equal(vc, vw, sizeof(float) * hd * NCTX * NKV);
                    }
            }
    baton_cpu_isa_set(BATON_CPU_ISA_AVX512);
    for (i = 0; i < 2; i++)
        baton_pool_destroy(pools[i]);
    free(q);
    free(k);
    free(v);
    free(kc0);
    free(vc0);
    free(kc);
    free(vc);
    free(kw);
    free(vw);
    free(want);
    free(got);
    free(work);
}

/* baton_cpu_expf against the binary64 exp of libm rounded once to binary32
 * (the value it is built to give, expf.h) on every 997th bit pattern (about
 * 4.3 million inputs, every sign and exponent) and on the edges: equal bit
 * for bit; and within one unit in the last place of libm's expf. Checked
 * over all 2^32 inputs on the development host (expf.h). */
static uint32_t f2u(float f)
{
    uint32_t u;

    memcpy(&u, &f, 4);
    return u;
}

static float u2f(uint32_t u)
{
    float f;

    memcpy(&f, &u, 4);
    return f;
}

static void expect_exp(float x)
{
    const float got = baton_cpu_expf(x), want = (float)exp((double)x), lib = expf(x);
    int64_t ulps;

    if (isnan(x)) {
        assert_true(isnan(got));
        return;
    }
    if (f2u(got) != f2u(want))
        fail_msg("baton_cpu_expf(%a) = %a, (float)exp = %a", (double)x, (double)got,
                 (double)want);
    ulps = (int64_t)f2u(got) - (int64_t)f2u(lib);
    if (ulps > 1 || ulps < -1)
        fail_msg("baton_cpu_expf(%a) = %a, libm expf %a", (double)x, (double)got, (double)lib);
}

static void test_expf_values(void **state)
{
    static const float edges[] = {
        0.0f, -0.0f, 1.0f, -1.0f, 0x1p-149f, -0x1p-149f, 88.0f, 88.72283f, 88.722839f,
        88.7228394f, 88.72284f, 89.0f, 89.5f, 1000.0f, -87.33654f, -87.3365479f, -100.0f,
        -103.2789f, -103.97208f, -103.972084f, -104.0f, -104.5f, -1000.0f, 0.34657359f,
        -0.34657359f, 0.0216608f, 1e-10f, -1e-10f, 3.4e38f, -3.4e38f,
    };
    uint64_t u;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
        expect_exp(edges[i]);
    for (u = 0; u < ((uint64_t)1 << 32); u += 997)
        expect_exp(u2f((uint32_t)u));
    assert_true(baton_cpu_expf(INFINITY) == INFINITY);
    assert_true(f2u(baton_cpu_expf(-INFINITY)) == 0); /* +0 */
    assert_true(isnan(baton_cpu_expf(NAN)));
    assert_true(baton_cpu_expf(0.0f) == 1.0f && baton_cpu_expf(-0.0f) == 1.0f);
    assert_true(f2u(baton_cpu_expf(-104.0f)) == 0 && baton_cpu_expf(89.0f) == INFINITY);
    assert_true(baton_cpu_expf(-103.28f) == 0x1p-149f); /* the least subnormal */
}

/* SILU, GELU and the softmax exponentials at every level against the scalar
 * formulas with baton_cpu_expf, bit for bit, on every length 0..67 (the
 * SIMD bodies and every tail) with random values of every magnitude, NaN
 * and infinities among them; nothing past n is written. */
static void test_exp_kernels_levels(void **state)
{
    enum { MAXN = 67 };
    float x[MAXN + 1], want[MAXN + 1], got[MAXN + 1];
    uint64_t n, i;
    int lvl, round;

    (void)state;
    rng_state = 0x3C6EF372FE94F82AULL;
    for (round = 0; round < 20; round++)
        for (n = 0; n <= MAXN; n++) {
            const float m = round % 4 == 0 ? 0.0f : 20.0f * rng_unit();

            for (i = 0; i < n; i++) {
                switch (rng_below(16)) {
                case 0:
                    x[i] = u2f(rng32() << 16 ^ rng32()); /* any bit pattern */
                    break;
                case 1:
                    x[i] = rng_below(2) ? INFINITY : -INFINITY;
                    break;
                case 2:
                    x[i] = NAN;
                    break;
                default:
                    x[i] = 120.0f * rng_unit();
                    break;
                }
            }
            for (i = 0; i < n; i++)
                want[i] = x[i] * (1.0f / (1.0f + baton_cpu_expf(-x[i])));
            for (lvl = BATON_CPU_ISA_SCALAR; lvl <= BATON_CPU_ISA_AVX512; lvl++) {
                char what[64];

                if ((int)baton_cpu_isa_set((enum baton_cpu_isa)lvl) != lvl)
                    continue;
                snprintf(what, sizeof(what), "silu %s n=%llu",
                         baton_cpu_isa_name((enum baton_cpu_isa)lvl), (unsigned long long)n);
                got[n] = 12345.0f;
                baton_cpu_silu_n(x, got, n);
                expect_same(got, want, n, what);
                assert_true(got[n] == 12345.0f);
                memcpy(got, x, sizeof(x)); /* in place */
                baton_cpu_silu_n(got, got, n);
                expect_same(got, want, n, what);
            }
            /* GELU: the formula of ops.h, with x scaled down so that most
             * values fall where its curve bends (|x| < 8) */
            for (i = 0; i < n; i++) {
                const float v = round % 2 ? x[i] / 16.0f : x[i];
                const float z = 1.5957691216057308f * v * (1.0f + 0.044715f * v * v);

                want[i] = v * (1.0f / (1.0f + baton_cpu_expf(-z)));
            }
            for (lvl = BATON_CPU_ISA_SCALAR; lvl <= BATON_CPU_ISA_AVX512; lvl++) {
                float xs[MAXN + 1];
                char what[64];

                if ((int)baton_cpu_isa_set((enum baton_cpu_isa)lvl) != lvl)
                    continue;
                for (i = 0; i < n; i++)
                    xs[i] = round % 2 ? x[i] / 16.0f : x[i];
                snprintf(what, sizeof(what), "gelu %s n=%llu",
                         baton_cpu_isa_name((enum baton_cpu_isa)lvl), (unsigned long long)n);
                got[n] = 12345.0f;
                baton_cpu_gelu_n(xs, got, n);
                expect_same(got, want, n, what);
                assert_true(got[n] == 12345.0f);
                baton_cpu_gelu_n(xs, xs, n); /* in place */
                expect_same(xs, want, n, what);
            }
            for (i = 0; i < n; i++)
                want[i] = baton_cpu_expf(x[i] - m);
            for (lvl = BATON_CPU_ISA_SCALAR; lvl <= BATON_CPU_ISA_AVX512; lvl++) {
                char what[64];

                if ((int)baton_cpu_isa_set((enum baton_cpu_isa)lvl) != lvl)
                    continue;
                snprintf(what, sizeof(what), "exp_shift %s n=%llu",
                         baton_cpu_isa_name((enum baton_cpu_isa)lvl), (unsigned long long)n);
                memcpy(got, x, sizeof(x));
                got[n] = 12345.0f;
                baton_cpu_exp_shift(got, n, m);
                expect_same(got, want, n, what);
                assert_true(got[n] == 12345.0f);
            }
        }
    baton_cpu_isa_set(BATON_CPU_ISA_AVX512);
}

/* The level in effect can be lowered and restored; names are stable. */
static void test_isa_levels(void **state)
{
    const enum baton_cpu_isa best = baton_cpu_isa_detect();

    (void)state;
    assert_int_equal(baton_cpu_isa_set(BATON_CPU_ISA_SCALAR), BATON_CPU_ISA_SCALAR);
    assert_int_equal(baton_cpu_isa(), BATON_CPU_ISA_SCALAR);
    assert_int_equal(baton_cpu_isa_set(BATON_CPU_ISA_AVX512), best);
    assert_string_equal(baton_cpu_isa_name(BATON_CPU_ISA_SCALAR), "scalar");
    assert_string_equal(baton_cpu_isa_name(BATON_CPU_ISA_AVX2), "avx2");
    assert_string_equal(baton_cpu_isa_name(BATON_CPU_ISA_AVX512), "avx512");
    print_message("kernel level on this CPU: %s\n", baton_cpu_isa_name(best));
    {
        /* baton_compute_kernels: the level in effect; BATON_CPU_ISA's
         * known values in any case, anything else reported as ignored */
        static const char *const known[] = {"scalar", "AVX2", "Avx512", "avx2"};
        int ignored = -1;
        unsigned i;

        assert_int_equal(unsetenv("BATON_CPU_ISA"), 0);
        assert_string_equal(baton_compute_kernels(&ignored), baton_cpu_isa_name(best));
        assert_int_equal(ignored, 0);
        for (i = 0; i < 4; i++) {
            assert_int_equal(setenv("BATON_CPU_ISA", known[i], 1), 0);
            ignored = -1;
            (void)baton_compute_kernels(&ignored);
            assert_int_equal(ignored, 0);
        }
        assert_int_equal(setenv("BATON_CPU_ISA", "avx-512", 1), 0);
        assert_string_equal(baton_compute_kernels(&ignored), baton_cpu_isa_name(best));
        assert_int_equal(ignored, 1);
        assert_int_equal(unsetenv("BATON_CPU_ISA"), 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_isa_levels),           cmocka_unit_test(test_f32_random),
        cmocka_unit_test(test_f16_random),           cmocka_unit_test(test_bf16_random),
        cmocka_unit_test(test_q8_0_random),
        cmocka_unit_test(test_q4_0_random),          cmocka_unit_test(test_q5_0_random),
        cmocka_unit_test(test_q5_1_random),          cmocka_unit_test(test_large_shapes),
        cmocka_unit_test(test_q4_0_decode_chunks),
        cmocka_unit_test(test_iq4_nl_random),
        cmocka_unit_test(test_iq4_nl_decode_chunks),
        cmocka_unit_test(test_iq4_nl_edges),
        cmocka_unit_test(test_q8_0_packed),
        cmocka_unit_test(test_f16_decode_chunks),   cmocka_unit_test(test_f16_prefill_chunks),
        cmocka_unit_test(test_bf16_decode_chunks),  cmocka_unit_test(test_bf16_prefill_chunks),
        cmocka_unit_test(test_f32_to_f16_row),
        cmocka_unit_test(test_nonfinite_activation),
        cmocka_unit_test(test_act_levels_equal),
        cmocka_unit_test(test_attention_helpers_levels),
        cmocka_unit_test(test_attention_levels),
        cmocka_unit_test(test_expf_values),
        cmocka_unit_test(test_exp_kernels_levels),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
