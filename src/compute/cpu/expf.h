/* Internal: the constants of baton's binary32 exponential, shared by the
 * scalar reference (matmul.c, baton_cpu_expf) and the AVX2 / AVX-512 array
 * kernels (matmul_avx2.c, matmul_avx512.c), which repeat its operations
 * lane for lane, so every level gives the same bits.
 *
 * The algorithm (the textbook table-driven method; see J.-M. Muller,
 * "Elementary Functions", ch. 6, and P. T. P. Tang, "Table-driven
 * implementation of the exponential function in IEEE floating-point
 * arithmetic", ACM TOMS 15(2), 1989), every step in binary64 with no
 * fused multiply-add:
 *   1. x (binary32) is widened exactly to binary64 and clamped to
 *      [-104, 89] (exp(-104) rounds to +0 in binary32 and exp(89) to +inf,
 *      so the clamp changes no result); NaN returns x + x.
 *   2. k = round-to-nearest-even(x * 16/ln2), by adding and subtracting
 *      1.5 * 2^52; k's two's complement is the low bits of the sum.
 *   3. r = (x - k * LN2_16_HI) - k * LN2_16_LO, |r| <= ln2/32 + tiny.
 *      LN2_16_HI has 29 significant bits, so k * LN2_16_HI (|k| <= 2401)
 *      and the first difference are exact.
 *   4. p = exp(r) by its Taylor polynomial of degree 7, Horner's rule
 *      (truncation error below 2^-59 relative on that interval).
 *   5. 2^(k/16) = TABLE[k mod 16] * 2^floor(k/16), the power of two added
 *      to the table entry's exponent field (the result is a normal binary64
 *      throughout the clamped range).
 *   6. the binary32 result is the product 2^(k/16) * p, rounded once to
 *      binary32 (round to nearest even, overflow to +inf, gradual
 *      underflow).
 * The binary64 result is within a few units of 2^-53 of exp(x), so the
 * rounding to binary32 is correct except where exp(x) lies that close to a
 * binary32 midpoint. Checked over all 2^32 inputs on the development host
 * (Debian 12, glibc 2.36): equal to (float)exp((double)x) for every input;
 * glibc's own expf differs (by one unit in the last place) on 170,648 of
 * them (0.004 %). tests/unit/test_compute_simd.c checks a sample of both.
 *
 * Every constant below is the binary64 nearest to the exact value,
 * computed with 80-digit decimal arithmetic (Python's decimal module):
 * TABLE[j] = 2^(j/16); INV_LN2_16 = 16/ln2; LN2_16_HI = ln2/16 rounded to
 * 29 significant bits and LN2_16_LO = ln2/16 - LN2_16_HI; C2..C7 = 1/k!. */
#ifndef BATON_COMPUTE_CPU_EXPF_H
#define BATON_COMPUTE_CPU_EXPF_H

#define BATON_EXP_X_MIN (-104.0)
#define BATON_EXP_X_MAX 89.0
#define BATON_EXP_SHIFT 0x1.8p52 /* 1.5 * 2^52: rounds a binary64 to an integer */
#define BATON_EXP_INV_LN2_16 0x1.71547652b82fep+4
#define BATON_EXP_LN2_16_HI 0x1.62e42ffp-5
#define BATON_EXP_LN2_16_LO (-0x1.718432a1b0e26p-39)
#define BATON_EXP_C2 0x1p-1
#define BATON_EXP_C3 0x1.5555555555555p-3
#define BATON_EXP_C4 0x1.5555555555555p-5
#define BATON_EXP_C5 0x1.1111111111111p-7
#define BATON_EXP_C6 0x1.6c16c16c16c17p-10
#define BATON_EXP_C7 0x1.a01a01a01a01ap-13

/* 2^(j/16), j = 0..15. */
static const double baton_exp_table[16] = {
    0x1.0000000000000p+0, 0x1.0b5586cf9890fp+0, 0x1.172b83c7d517bp+0, 0x1.2387a6e756238p+0,
    0x1.306fe0a31b715p+0, 0x1.3dea64c123422p+0, 0x1.4bfdad5362a27p+0, 0x1.5ab07dd485429p+0,
    0x1.6a09e667f3bcdp+0, 0x1.7a11473eb0187p+0, 0x1.8ace5422aa0dbp+0, 0x1.9c49182a3f090p+0,
    0x1.ae89f995ad3adp+0, 0x1.c199bdd85529cp+0, 0x1.d5818dcfba487p+0, 0x1.ea4afa2a490dap+0,
};

#endif
