/* K-quants (and Q5_0 / Q5_1, check_q5, and IQ4_NL / IQ4_XS, check_iq4,
 * below) against llama.cpp (issue 18,
 * "Checked against llama.cpp"): the
 * super-blocks of tests/reference/kq_gen.h, regenerated here, against what
 * llama.cpp's ggml made of the same bytes (tests/reference/fixtures, written
 * by tests/reference/make-fixtures.sh; tests/reference/README.md).
 *
 * 1. baton_dequantize_row_k (and baton_dequantize_row) gives ggml's
 *    to_float floats bit for bit, for all 1024 elements of each type (the
 *    fixture's llama.cpp build compiles ggml-base without FMA contraction on
 *    x86-64; README.md says what was measured).
 * 2. baton's MUL_MAT (one row of 1024, one column) at every SIMD level this
 *    CPU has gives the same bits at every level, within the bound derived
 *    below of ggml's vec_dot with the activation quantized to Q8_K by ggml.
 *
 * The bound. Both sides compute exactly (integer sums) sum_e W_e * dq_e *
 * q_e, W_e the weight of element e (d * Sc * Qw - dmin * M, binary16 d,
 * dmin) and q_e * dq the quantized x_e, then round a few float products and
 * sums. baton: dq = amax / 127, q = rne(x * (1 / dq)); ggml (Q8_K):
 * dq = 1 / (-127 / max) (max: the element of largest |x|, so |dq| = amax /
 * 127 up to two roundings, the sign flipping q too), q = rne(x * (-127 /
 * max)). Both products approximate t = 127 x / amax with absolute error
 * <= 127 * 2 * 2^-24 < 2^-16, so the two q differ (by one, the other side
 * of a tie) only where t is within 2^-16 of a half-integer ("near ties");
 * such an element moves the result by at most dq * |W_e|. Everything else
 * differs only by rounding: the scales (two roundings each side) and the
 * float products and sums (a handful per super-block on each side), each
 * a relative 2^-24 of a term bounded by amax * sum_e (|W_e| + |dmin| *
 * Mmax) (Mmax: the largest integer min, 15 for Q2_K, 63 for Q4_K / Q5_K;
 * the min term is added back because isum and msum can cancel). So
 *   |y_baton - y_ggml| <= sum over near ties of dq * |W_e|
 *                         + 2^-18 * sum_sb amax_sb * sum_e (|W_e| + |dmin| Mmax)
 * (2^-18: 64 roundings of 2^-24, several times what either side does). W_e
 * is the fixture's dequantized float (it differs from the exact W_e by one
 * rounding, inside the second term). */
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
#include "kq_gen.h"

static const char *const kq_names[5] = {"q2_k", "q3_k", "q4_k", "q5_k", "q6_k"};

/* ggml's dequantized floats of type t from the fixture, into y[KQ_GEN_K]. */
static void load_dequant(uint32_t t, float *y)
{
    const char *src = getenv("SRC_DIR");
    char path[4096];
    FILE *f;
    size_t got;

    assert_non_null(src);
    snprintf(path, sizeof path, "%s/tests/reference/fixtures/kq-%s.dequant.f32", src,
             kq_names[t - KQ_GEN_TYPE_FIRST]);
    f = fopen(path, "rb");
    if (!f)
        fail_msg("%s: cannot open (tests/reference/make-fixtures.sh writes it)", path);
    got = fread(y, sizeof(float), KQ_GEN_K, f);
    fclose(f);
    assert_int_equal(got, KQ_GEN_K);
}

/* ggml's vec_dot results of type t, one per activation vector. */
static void load_vecdot(uint32_t t, double *want)
{
    const char *src = getenv("SRC_DIR");
    char path[4096], name[16];
    unsigned v;
    double r;
    int seen = 0;
    FILE *f;

    assert_non_null(src);
    snprintf(path, sizeof path, "%s/tests/reference/fixtures/kq-vecdot.txt", src);
    f = fopen(path, "r");
    if (!f)
        fail_msg("%s: cannot open", path);
    while (fscanf(f, "%15s %u %la", name, &v, &r) == 3) {
        if (strcmp(name, kq_names[t - KQ_GEN_TYPE_FIRST]) == 0 && v < KQ_GEN_NX) {
            want[v] = r;
            seen |= 1 << v;
        }
    }
    fclose(f);
    assert_int_equal(seen, (1 << KQ_GEN_NX) - 1);
}

static float half_at(const uint8_t *p)
{
    return baton_fp16_to_fp32((uint16_t)(p[0] | p[1] << 8));
}

/* |dmin| * Mmax of super-block b (0 for the types without a min). */
static double min_term(uint32_t t, const uint8_t *blocks, uint32_t b)
{
    const uint8_t *sb = blocks + b * kq_gen_block_bytes(t);

    switch (t) {
    case BATON_TYPE_Q2_K: return fabs((double)half_at(sb + 82)) * 15.0;
    case BATON_TYPE_Q4_K:
    case BATON_TYPE_Q5_K: return fabs((double)half_at(sb + 2)) * 63.0;
    default: return 0.0;
    }
}

static void check_dequant(uint32_t t)
{
    static uint8_t blocks[KQ_GEN_NB * 210];
    static float want[KQ_GEN_K], got[KQ_GEN_K], got2[KQ_GEN_K];
    uint32_t n_diff = 0;

    assert_int_equal(kq_gen_blocks(t, blocks, KQ_GEN_NB), 0);
    load_dequant(t, want);
    memset(got, 0x55, sizeof got);
    assert_int_equal(baton_dequantize_row_k(t, blocks, got, KQ_GEN_K), 0);
    assert_int_equal(baton_dequantize_row(t, blocks, got2, KQ_GEN_K), 0);
    for (uint32_t i = 0; i < KQ_GEN_K; i++) {
        if (memcmp(&got[i], &want[i], 4) != 0) {
            if (n_diff++ < 8)
                print_message("%s element %u: baton %a, ggml %a\n", kq_names[t - 10], i,
                              (double)got[i], (double)want[i]);
        }
        if (memcmp(&got2[i], &got[i], 4) != 0)
            fail_msg("%s element %u: baton_dequantize_row %a, baton_dequantize_row_k %a",
                     kq_names[t - 10], i, (double)got2[i], (double)got[i]);
    }
    if (n_diff)
        fail_msg("%s: %u of %u elements differ from ggml's to_float", kq_names[t - 10], n_diff,
                 KQ_GEN_K);
}

/* MUL_MAT of the row at blocks (type t, KQ_GEN_K elements) with x at every
 * level the CPU has: the same bits at each, within tol of ggml's vec_dot
 * want (activation vector v; n_ties near 8-bit rounding ties went into
 * tol); the scalar level's figures are printed. */
static void dot_levels(struct baton_pool *pool, uint32_t t, const void *blocks, const float *x,
                       void *work, const char *name, uint32_t v, double want, double tol,
                       uint32_t n_ties)
{
    float first = 0.0f;
    int have_first = 0;

    for (int lvl = BATON_CPU_ISA_SCALAR; lvl <= BATON_CPU_ISA_AVX512; lvl++) {
        float y = NAN;
        double diff;

        if ((int)baton_cpu_isa_set((enum baton_cpu_isa)lvl) != lvl)
            continue;
        baton_cpu_mul_mat_typed(pool, t, blocks, x, &y, KQ_GEN_K, 1, 1, work);
        if (!have_first) {
            first = y;
            have_first = 1;
        } else if (memcmp(&y, &first, 4) != 0) {
            fail_msg("%s x%u: %s gives %a, the scalar level %a", name, v,
                     baton_cpu_isa_name((enum baton_cpu_isa)lvl), (double)y, (double)first);
        }
        diff = fabs((double)y - want);
        if (!(diff <= tol))
            fail_msg("%s x%u %s: baton %a, ggml %a: |diff| %g > bound %g (%u near ties)", name,
                     v, baton_cpu_isa_name((enum baton_cpu_isa)lvl), (double)y, want, diff, tol,
                     n_ties);
        if (lvl == BATON_CPU_ISA_SCALAR)
            print_message("%s x%u: baton %.9g ggml %.9g |diff| %.3g (rel %.3g), bound %.3g "
                          "(%u near ties)\n",
                          name, v, (double)y, want, diff, diff / fabs(want), tol, n_ties);
    }
}

static void check_dot(uint32_t t)
{
    static uint8_t blocks[KQ_GEN_NB * 210];
    static float w[KQ_GEN_K], x[KQ_GEN_K];
    double want[KQ_GEN_NX];
    struct baton_pool *pool;
    void *work;
    const uint64_t work_bytes = baton_cpu_mul_mat_work_bytes(t, KQ_GEN_K, 1);

    assert_int_equal(work_bytes, KQ_GEN_NB * BATON_ACT_K_BLOCK_BYTES);
    assert_int_equal(kq_gen_blocks(t, blocks, KQ_GEN_NB), 0);
    load_dequant(t, w);
    load_vecdot(t, want);
    assert_int_equal(baton_pool_create(1, &pool), 0);
    work = aligned_alloc(64, work_bytes);
    assert_non_null(work);
    for (uint32_t v = 0; v < KQ_GEN_NX; v++) {
        double tol_ties = 0.0, tol_round = 0.0;
        uint32_t n_ties = 0;

        kq_gen_x(v, x, KQ_GEN_K);
        for (uint32_t b = 0; b < KQ_GEN_NB; b++) {
            double amax = 0.0, sw = 0.0;

            for (uint32_t e = 0; e < 256; e++)
                if (fabs((double)x[b * 256 + e]) > amax)
                    amax = fabs((double)x[b * 256 + e]);
            for (uint32_t e = 0; e < 256; e++) {
                const double tq = 127.0 * (double)x[b * 256 + e] / amax;
                const double frac = fabs(tq - floor(tq) - 0.5);

                sw += fabs((double)w[b * 256 + e]);
                if (frac < 0x1p-16) {
                    n_ties++;
                    tol_ties += amax / 127.0 * fabs((double)w[b * 256 + e]);
                }
            }
            tol_round += 0x1p-18 * amax * (sw + 256.0 * min_term(t, blocks, b));
        }
        dot_levels(pool, t, blocks, x, work, kq_names[t - 10], v, want[v], tol_ties + tol_round, n_ties);
    }
    baton_cpu_isa_set(BATON_CPU_ISA_AVX512); /* back to the best */
    free(work);
    baton_pool_destroy(pool);
}

/* ---- Q5_0 / Q5_1 (kq_gen_q5_blocks) ----
 * 1. dequantization bit for bit; 2. baton's quantizer writes the bytes of
 * ggml's reference quantizer (quantize_row_q5_*_ref, llama-quantize's
 * without an importance matrix) for kq_gen_x(0); 3. MUL_MAT at every level
 * the same bits, within a bound of ggml's vec_dot, whose activations are
 * Q8_0 (Q5_0) or Q8_1 (Q5_1) blocks of 32 with a binary16 scale dq16 where
 * baton keeps dq in binary32: |dq16 - dq| <= 2^-11 dq moves the result by
 * at most 2^-11 * sum_blocks amax * sum_e |W_e|; Q8_1's binary16 s =
 * dq * sum q, which ggml multiplies by the min m, adds 2^-11 * amax * 32 *
 * |m| per block. Near ties as above; float rounding 2^-18 as above. */
static void load_fixture(const char *name, const char *suffix, void *dst, size_t bytes)
{
    const char *src = getenv("SRC_DIR");
    char path[4096];
    FILE *f;
    size_t got;

    assert_non_null(src);
    snprintf(path, sizeof path, "%s/tests/reference/fixtures/kq-%s.%s", src, name, suffix);
    f = fopen(path, "rb");
    if (!f)
        fail_msg("%s: cannot open (tests/reference/make-fixtures.sh writes it)", path);
    got = fread(dst, 1, bytes, f);
    fclose(f);
    assert_int_equal(got, bytes);
}

static void load_vecdot_named(const char *want_name, double *want)
{
    const char *src = getenv("SRC_DIR");
    char path[4096], name[16];
    unsigned v;
    double r;
    int seen = 0;
    FILE *f;

    assert_non_null(src);
    snprintf(path, sizeof path, "%s/tests/reference/fixtures/kq-vecdot.txt", src);
    f = fopen(path, "r");
    if (!f)
        fail_msg("%s: cannot open", path);
    while (fscanf(f, "%15s %u %la", name, &v, &r) == 3) {
        if (strcmp(name, want_name) == 0 && v < KQ_GEN_NX) {
            want[v] = r;
            seen |= 1 << v;
        }
    }
    fclose(f);
    assert_int_equal(seen, (1 << KQ_GEN_NX) - 1);
}

static void check_q5(uint32_t t)
{
    const char *name = t == BATON_TYPE_Q5_0 ? "q5_0" : "q5_1";
    const size_t bb = kq_gen_q5_block_bytes(t), nbytes = KQ_GEN_Q5_NB * bb;
    static uint8_t blocks[KQ_GEN_Q5_NB * 24], want_q[KQ_GEN_Q5_NB * 24], got_q[KQ_GEN_Q5_NB * 24];
    static float want[KQ_GEN_K], got[KQ_GEN_K], x[KQ_GEN_K];
    double want_dot[KQ_GEN_NX];
    uint32_t n_diff = 0;
    struct baton_pool *pool;
    void *work;
    const uint64_t work_bytes = baton_cpu_mul_mat_work_bytes(t, KQ_GEN_K, 1);

    assert_int_equal(kq_gen_q5_blocks(t, blocks), 0);
    load_fixture(name, "dequant.f32", want, sizeof want);
    memset(got, 0x55, sizeof got);
    assert_int_equal(baton_dequantize_row(t, blocks, got, KQ_GEN_K), 0);
    for (uint32_t i = 0; i < KQ_GEN_K; i++)
        if (memcmp(&got[i], &want[i], 4) != 0 && n_diff++ < 8)
            print_message("%s element %u: baton %a, ggml %a\n", name, i, (double)got[i],
                          (double)want[i]);
    if (n_diff)
        fail_msg("%s: %u of %u elements differ from ggml's to_float", name, n_diff, KQ_GEN_K);

    kq_gen_x(0, x, KQ_GEN_K);
    load_fixture(name, "quant.bin", want_q, nbytes);
    memset(got_q, 0xEE, sizeof got_q);
    assert_int_equal(baton_quantize_row(t, x, got_q, KQ_GEN_K), 0);
    for (size_t i = 0; i < nbytes; i++)
        if (got_q[i] != want_q[i])
            fail_msg("%s quantizer: byte %zu (block %zu, offset %zu): baton 0x%02x, ggml 0x%02x",
                     name, i, i / bb, i % bb, got_q[i], want_q[i]);

    load_vecdot_named(name, want_dot);
    assert_int_equal(baton_pool_create(1, &pool), 0);
    work = aligned_alloc(64, work_bytes);
    assert_non_null(work);
    for (uint32_t v = 0; v < KQ_GEN_NX; v++) {
        double tol_ties = 0.0, tol_scale = 0.0, tol_round = 0.0;
        uint32_t n_ties = 0;

        kq_gen_x(v, x, KQ_GEN_K);
        for (uint32_t b = 0; b < KQ_GEN_Q5_NB; b++) {
            const double m = t == BATON_TYPE_Q5_1 ? fabs((double)half_at(blocks + b * bb + 2)) : 0;
            double amax = 0.0, sw = 0.0;

            for (uint32_t e = 0; e < 32; e++)
                if (fabs((double)x[b * 32 + e]) > amax)
                    amax = fabs((double)x[b * 32 + e]);
            for (uint32_t e = 0; e < 32; e++) {
                const double tq = 127.0 * (double)x[b * 32 + e] / amax;
                const double frac = fabs(tq - floor(tq) - 0.5);

                sw += fabs((double)want[b * 32 + e]);
                if (frac < 0x1p-16) {
                    n_ties++;
                    tol_ties += amax / 127.0 * (fabs((double)want[b * 32 + e]) + m);
                }
            }
            tol_scale += 0x1p-11 * amax * (sw + 32.0 * m);
            tol_round += 0x1p-18 * amax * (sw + 32.0 * m);
        }
        dot_levels(pool, t, blocks, x, work, name, v, want_dot[v], tol_ties + tol_scale + tol_round, n_ties);
    }
    baton_cpu_isa_set(BATON_CPU_ISA_AVX512);
    free(work);
    baton_pool_destroy(pool);
}

static void test_q5_0(void **state)
{
    (void)state;
    check_q5(BATON_TYPE_Q5_0);
}

static void test_q5_1(void **state)
{
    (void)state;
    check_q5(BATON_TYPE_Q5_1);
}

/* ---- IQ4_NL / IQ4_XS (kq_gen_iq4_blocks) ----
 * 1. baton_dequantize_row_iq4_* (and baton_dequantize_row) give ggml's
 * to_float floats bit for bit; 2. MUL_MAT at every level the same bits,
 * within a bound of ggml's vec_dot. IQ4_NL takes Q8_0 activations (blocks
 * of 32, binary16 scale dq16 in ggml, binary32 dq in baton): near ties,
 * 2^-11 * sum_blocks amax * sum_e |W_e| for dq16, and float rounding 2^-18
 * as for Q5_0 above. IQ4_XS takes Q8_K activations (binary32 scales on
 * both sides) as the K-quants: near ties per super-block of 256 and the
 * rounding term of check_dot (no min). W_e is the fixture's float. */
static void check_iq4(uint32_t t)
{
    const char *name = t == BATON_TYPE_IQ4_NL ? "iq4_nl" : "iq4_xs";
    const uint32_t blk = t == BATON_TYPE_IQ4_NL ? 32u : 256u;
    static uint8_t blocks[KQ_GEN_K / 32 * 18];
    static float want[KQ_GEN_K], got[KQ_GEN_K], got2[KQ_GEN_K], x[KQ_GEN_K];
    double want_dot[KQ_GEN_NX];
    uint32_t n_diff = 0;
    struct baton_pool *pool;
    void *work;
    const uint64_t work_bytes = baton_cpu_mul_mat_work_bytes(t, KQ_GEN_K, 1);

    assert_true(kq_gen_iq4_nb(t) * kq_gen_iq4_block_bytes(t) <= sizeof blocks);
    assert_int_equal(kq_gen_iq4_blocks(t, blocks), 0);
    load_fixture(name, "dequant.f32", want, sizeof want);
    memset(got, 0x55, sizeof got);
    memset(got2, 0xAA, sizeof got2);
    assert_int_equal(t == BATON_TYPE_IQ4_NL ? baton_dequantize_row_iq4_nl(blocks, got, KQ_GEN_K)
                                            : baton_dequantize_row_iq4_xs(blocks, got, KQ_GEN_K),
                     0);
    assert_int_equal(baton_dequantize_row(t, blocks, got2, KQ_GEN_K), 0);
    for (uint32_t i = 0; i < KQ_GEN_K; i++) {
        if (memcmp(&got[i], &want[i], 4) != 0 && n_diff++ < 8)
            print_message("%s element %u: baton %a, ggml %a\n", name, i, (double)got[i],
                          (double)want[i]);
        if (memcmp(&got2[i], &got[i], 4) != 0)
            fail_msg("%s element %u: baton_dequantize_row %a, baton_dequantize_row_%s %a", name,
                     i, (double)got2[i], name, (double)got[i]);
    }
    if (n_diff)
        fail_msg("%s: %u of %u elements differ from ggml's to_float", name, n_diff, KQ_GEN_K);

    load_vecdot_named(name, want_dot);
    assert_true(work_bytes > 0);
    assert_int_equal(baton_pool_create(1, &pool), 0);
    work = aligned_alloc(64, work_bytes);
    assert_non_null(work);
    for (uint32_t v = 0; v < KQ_GEN_NX; v++) {
        double tol_ties = 0.0, tol_scale = 0.0, tol_round = 0.0, tol;
        uint32_t n_ties = 0;

        kq_gen_x(v, x, KQ_GEN_K);
        for (uint32_t b = 0; b < KQ_GEN_K / blk; b++) {
            double amax = 0.0, sw = 0.0;

            for (uint32_t e = 0; e < blk; e++)
                if (fabs((double)x[b * blk + e]) > amax)
                    amax = fabs((double)x[b * blk + e]);
            for (uint32_t e = 0; e < blk; e++) {
                const double tq = 127.0 * (double)x[b * blk + e] / amax;
                const double frac = fabs(tq - floor(tq) - 0.5);

                sw += fabs((double)want[b * blk + e]);
                if (frac < 0x1p-16) {
                    n_ties++;
                    tol_ties += amax / 127.0 * fabs((double)want[b * blk + e]);
                }
            }
            if (t == BATON_TYPE_IQ4_NL)
                tol_scale += 0x1p-11 * amax * sw;
            tol_round += 0x1p-18 * amax * sw;
        }
        tol = tol_ties + tol_scale + tol_round;
        dot_levels(pool, t, blocks, x, work, name, v, want_dot[v], tol, n_ties);
    }
    baton_cpu_isa_set(BATON_CPU_ISA_AVX512);
    free(work);
    baton_pool_destroy(pool);
}

static void test_iq4_nl(void **state)
{
    (void)state;
    check_iq4(BATON_TYPE_IQ4_NL);
}

static void test_iq4_xs(void **state)
{
    (void)state;
    check_iq4(BATON_TYPE_IQ4_XS);
}

#define KQ_TESTS(T, name)                                                                      \
    static void test_dequant_##name(void **state)                                              \
    {                                                                                          \
        (void)state;                                                                           \
        check_dequant(T);                                                                      \
    }                                                                                          \
    static void test_dot_##name(void **state)                                                  \
    {                                                                                          \
        (void)state;                                                                           \
        check_dot(T);                                                                          \
    }
KQ_TESTS(BATON_TYPE_Q2_K, q2_k)
KQ_TESTS(BATON_TYPE_Q3_K, q3_k)
KQ_TESTS(BATON_TYPE_Q4_K, q4_k)
KQ_TESTS(BATON_TYPE_Q5_K, q5_k)
KQ_TESTS(BATON_TYPE_Q6_K, q6_k)

/* The generator is what the fixtures were made from: a change to kq_gen.h
 * without make-fixtures.sh would fail every comparison above with a
 * confusing message; this names the cause. (First outputs of splitmix64
 * from seed 0: 0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, Vigna's
 * splitmix64.c.) */
static void test_generator(void **state)
{
    uint64_t s = 0;

    (void)state;
    assert_int_equal(kq_gen_next(&s), 0xe220a8397b1dcdafull);
    assert_int_equal(kq_gen_next(&s), 0x6e789e6aa1b965f4ull);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_generator),
        cmocka_unit_test(test_dequant_q2_k), cmocka_unit_test(test_dequant_q3_k),
        cmocka_unit_test(test_dequant_q4_k), cmocka_unit_test(test_dequant_q5_k),
        cmocka_unit_test(test_dequant_q6_k), cmocka_unit_test(test_dot_q2_k),
        cmocka_unit_test(test_dot_q3_k),     cmocka_unit_test(test_dot_q4_k),
        cmocka_unit_test(test_dot_q5_k),     cmocka_unit_test(test_dot_q6_k),
        cmocka_unit_test(test_q5_0),         cmocka_unit_test(test_q5_1),
        cmocka_unit_test(test_iq4_nl),       cmocka_unit_test(test_iq4_xs),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
