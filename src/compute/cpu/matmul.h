/* Internal: MUL_MAT and GET_ROWS over F32, F16, BF16, Q8_0, Q4_0, Q5_0,
 * Q5_1, K-quant, IQ4_NL and IQ4_XS weights, and
 * the instruction-set dispatch of their kernels. README.md in this folder
 * explains the formats, the reduction orders and their error.
 *
 * Every kernel has a scalar version (always built, the reference) and
 * AVX2+FMA+F16C and AVX-512 (F, BW, DQ, VL, VNNI) versions, compiled with
 * target attributes and chosen at run time. All versions of a kernel give
 * the same bits: each output element is reduced in one fixed order (below)
 * that the scalar code spells out and the SIMD code follows lane for lane.
 * That order does not depend on the thread count, on the batch size (how
 * many columns x has) or on the row tiling, so a token's column is the
 * same whether it runs alone or in a batch, on any host. One exception: an
 * output that is NaN (a NaN or infinite scale or activation) is NaN at
 * every level, but its payload may differ between levels (which NaN
 * operand's payload an instruction passes on depends on the levels'
 * instruction sequences); tests compare NaNs as NaNs.
 *
 * Reduction order of y[c][r] = sum_k W[r][k] * x[c][k]:
 *   F32   s = 0; for k ascending: s = s + W*x (product rounded, then sum
 *         rounded, no FMA): llama2.c's run.c matmul, so F32 models match it.
 *   F16   32 lanes a[0..31] = +0; for k ascending: a[k%32] =
 *         fma(fp16->f32(W), x, a[k%32]); then y = hsum32(a).
 *   BF16  as F16, with bf16->f32(W) (the bits shifted up 16: exact).
 *   Q8_0  with x quantized per block of 32 to int8 with a float scale
 *         dx (baton_cpu_quantize_act): four chains C[0..3] = +0; for
 *         block b ascending: isum = the exact integer sum of W_q * x_q
 *         over the block's 32 elements, d = fp16->f32(dW) * dx (rounded),
 *         C[b%4] = fma(d, (float)isum, C[b%4]); then y = (C[0] + C[2]) +
 *         (C[1] + C[3]). (One multiply-add per block and output, as Q4_0:
 *         batched kernels put 16 rows in a register's lanes; a one-row
 *         decode keeps the 4 chains in the lanes of its 4 blocks of a
 *         group. Until the thirty-sixth session Q8_0 kept the 16 lanes that
 *         Q5_0 keeps below, 3 float operations per 2 vpdpbusd in batched
 *         products, which ran at about half Q4_0's rate.)
 *   Q4_0  with x quantized as for Q8_0: one chain acc = +0; for block b
 *         ascending: isum = the exact integer sum of W_q * x_q over the
 *         block's 32 elements (the 4-bit quants minus 8), d =
 *         fp16->f32(dW) * dx (rounded), acc = fma(d, (float)isum, acc);
 *         then y = acc. (One multiply-add per block and output, as the K
 *         types below: 16 rows' chains fill a 512-bit register, and the
 *         batched kernels feed vpdpbusd weights transposed so that its
 *         lanes are rows. Until the sixteenth session Q4_0 took the 16
 *         lanes, four float chains per block.)
 *   IQ4_NL as Q4_0, with W_q the grid level of each nibble (quant.h,
 *         -127..113) instead of nibble - 8; x quantized as for Q8_0
 *         (bias 128 in corr).
 *   Q5_0  with x quantized as for Q8_0: 16 lanes L[0..15] = +0; for block
 *         b and l = 0..3, isum = the exact integer sum of (W_q - 16) * x_q
 *         over the 8 elements {4l..4l+3} and {16+4l..16+4l+3} of the
 *         block, d = fp16->f32(dW) * dx (rounded), L[4(b%4) + l] = fma(d,
 *         (float)isum, L[4(b%4) + l]); then y = hsum16(L). (Grouping an
 *         element with the one 16 places on matches the nibble layout and
 *         gives 4 lanes per block, so a 512-bit register holds 4 blocks.)
 *   Q5_1  as Q5_0's lanes and activations, with isum = the exact integer
 *         sum of Wq * x_q over the lane's 8 elements (Wq 0..31, no offset)
 *         and xsum = the exact sum of x_q over the same 8 elements:
 *         d = fp16->f32(dW) * dx, dm = fp16->f32(mW) * dx (each rounded),
 *         L[i] = fma(d, (float)isum, L[i]); then L[i] = fma(dm,
 *         (float)xsum, L[i]) (i = 4(b%4) + l); y = hsum16(L). (The min
 *         term of each element, mW * x, summed per lane like ggml's
 *         vec_dot_q5_1_q8_1 sums it per block.)
 *   Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS with x quantized per super-block of
 *         256 to int8 with a float scale dx (the K activations below): one
 *         chain acc = +0; for each super-block s ascending:
 *           isum = the exact int32 sum over its 256 elements of
 *                  Sc(e) * Qw(e) * qx(e), where Sc is the element's
 *                  sub-block scale as an integer and Qw its integer quant
 *                  (quant.h: Q2_K Sc = scales & 15, Qw 0..3; Q3_K Sc =
 *                  s_j - 32, Qw -4..3; Q4_K Sc = sc_j, Qw 0..15; Q5_K Sc =
 *                  sc_j, Qw 0..31; Q6_K Sc = int8 scale, Qw -32..31;
 *                  IQ4_XS Sc = ls_j - 32, Qw = the grid level -127..113),
 *           msum = (Q2_K, Q4_K, Q5_K only) the exact int32 sum over the
 *                  sub-blocks j of M_j * (sum of qx over sub-block j), M_j
 *                  the sub-block's integer min,
 *           a = fp16->f32(d) * dx, b = fp16->f32(dmin) * dx (each rounded),
 *           acc = fma(a, (float)isum, acc); then, for the types with a min,
 *           acc = fma(-b, (float)msum, acc);
 *         y = acc. (float)isum rounds to nearest when |isum| > 2^24 (Q4_K,
 *         Q5_K, Q6_K, IQ4_XS can reach 1.3e8): the same integer always gives the
 *         same float, so the bits still depend on nothing but the data.
 *         How the integer sums are formed (sub-block by sub-block, bsums
 *         for the mins, -32 folded in through bsums for Q6_K, ...) is free:
 *         they are exact.
 *   hsum32(a): b[l] = a[l] + a[l+16] (l < 16), then hsum16.
 *   hsum16(b): c[l] = b[l] + b[l+8] (l < 8), then hsum8.
 *   hsum8(c): e[l] = c[l] + c[l+4] (l < 4); f[l] = e[l] + e[l+2] (l < 2);
 *         f[0] + f[1].
 */
#ifndef BATON_COMPUTE_CPU_MATMUL_H
#define BATON_COMPUTE_CPU_MATMUL_H

#include <stdint.h>

#include "compute/compute.h"

/* Instruction-set levels of the kernels. */
enum baton_cpu_isa {
    BATON_CPU_ISA_SCALAR = 0,
    BATON_CPU_ISA_AVX2 = 1,   /* AVX2 + FMA + F16C */
    BATON_CPU_ISA_AVX512 = 2, /* AVX-512 F, BW, DQ, VL, VNNI (+ the AVX2 set) */
};

/* Best level this CPU (and OS) supports, by __builtin_cpu_supports. */
enum baton_cpu_isa baton_cpu_isa_detect(void);

/* Level the kernels use now. The first call settles it: the best detected
 * level, lowered by the environment variable BATON_CPU_ISA=scalar|avx2|
 * avx512 (any case) when set (a level above the detected one is ignored;
 * baton_compute_kernels tells a program about other values). */
enum baton_cpu_isa baton_cpu_isa(void);

/* Sets the level for later calls (tests, benchmarks), clamped to the
 * detected one; returns the level in effect. Not for use while kernels run
 * on other threads. */
enum baton_cpu_isa baton_cpu_isa_set(enum baton_cpu_isa isa);

/* 1 when the CPU runs 512-bit operations on 256-bit halves (AMD family
 * 19h, Zen 4: vendor and family from CPUID leaves 0 and 1), else 0. Some
 * AVX-512 kernels pick their tiles by it (baton_mm_tiles.row_max_m); it
 * changes no result. Settled on the first call. */
int baton_cpu_avx512_split(void);

/* Sets what baton_cpu_avx512_split returns (0 or 1; tests, so both tile
 * choices run on any host; -1: detect again). Not for use while kernels
 * run on other threads. */
void baton_cpu_avx512_split_set(int split);

/* "scalar", "avx2", "avx512". */
const char *baton_cpu_isa_name(enum baton_cpu_isa isa);

/* Quantized activations. Each block of 32 values of a column of x gets a
 * float scale d = max|x| / 127 (binary32, not rounded to binary16) and
 * int8 q = round-to-nearest-even(x * (1/d)) in [-127, 127]; a block with a
 * non-finite x gets d = NaN and q = 0, so its outputs are NaN as an F32
 * product with it would be; one whose 1/d overflows to +inf (d subnormal:
 * every |x| below about 2^-121) gets q = 0 at every level (its products
 * are 0; rint(inf) would be 0 in the scalar code and -128 through
 * cvtps2dq). Blocks go in groups of 4 (blocks 4g..4g+3, the
 * last group padded with zero blocks), 256 bytes per group:
 *   bytes   0..63   int8  q of elements 0..15 of the group's block j at 16j
 *   bytes  64..127  int8  q of elements 16..31 of block j at 64 + 16j
 *   bytes 128..191  int32 corr[4j + l] = -bias * (sum of q over the
 *                   8 elements of lane l of block j, see the order above),
 *                   bias 128 for Q8_0 weights, 8 for Q4_0, 16 for Q5_0
 *                   (kernels that read the weight bytes as unsigned add
 *                   the bias back through it) and -1 for Q5_1 (corr is
 *                   then the lane's sum of q, its min term's xsum); for
 *                   Q8_0 and Q4_0 (bias 128, 8) lane 4j holds the sum of
 *                   block j's four and lanes 4j+1..4j+3 hold 0 (their
 *                   orders sum whole blocks: one broadcast gives a kernel
 *                   the block's corr)
 *   bytes 192..255  float d of block j, 4 times, at 4j
 * Column c starts at byte c * baton_cpu_act_col_bytes(k) (a multiple of
 * 64). */
#define BATON_ACT_GROUP_BYTES 256u
uint64_t baton_cpu_act_col_bytes(uint64_t k);

/* K activations (weights Q2_K..Q6_K; llama.cpp's block_q8_K, laid out for
 * aligned loads). Each super-block of 256 values of a column of x gets a
 * float scale dx = max|x| / 127 and q = round-to-nearest-even(x * (1/dx))
 * in [-127, 127] (the rule of the activations above; a super-block with a
 * non-finite x gets dx = NaN and q = 0; one whose 1/dx overflows to +inf,
 * dx < 2^-128, all |x| below about 2^-121, gets q = 0: the scalar lrintf
 * of +-inf or NaN, LONG_MIN, cast to int8), BATON_ACT_K_BLOCK_BYTES per
 * super-block:
 *   bytes   0..255  int8  q of elements 0..255, in order
 *   bytes 256..287  int16 bsums[i] = sum of q over elements 16i..16i+15
 *   bytes 288..291  float dx
 *   bytes 292..319  zero
 * Column c starts at byte c * baton_cpu_act_k_col_bytes(k) = c * (k / 256)
 * * 320 (k % 256 == 0, validated). */
#define BATON_ACT_K_BLOCK_BYTES 320u
uint64_t baton_cpu_act_k_col_bytes(uint64_t k);

/* 1 for Q2_K .. Q6_K. */
int baton_cpu_type_is_k(uint32_t type);

/* Bytes of one weight row of k elements of type as the kernels read it:
 * k / 256 * the super-block bytes of quant.h for Q2_K..Q6_K (0 if k % 256
 * != 0), else baton_row_bytes(type, k). */
uint64_t baton_cpu_weight_row_bytes(uint32_t type, uint64_t k);

/* Quantizes m columns of k floats (k % 256 == 0) into the K activation
 * layout above at act (m * baton_cpu_act_k_col_bytes(k) bytes, 4-byte
 * aligned), split over the pool by super-blocks. Same bytes for any
 * thread count. */
void baton_cpu_quantize_act_k(struct baton_pool *pool, const float *x, uint64_t k, uint64_t m,
                              void *act);

/* Scratch bytes MUL_MAT needs for weights of type wtype, k inputs and m
 * columns: m * baton_cpu_act_col_bytes(k) for Q8_0 / Q4_0 / Q5_0 / Q5_1,
 * m * baton_cpu_act_k_col_bytes(k) for Q2_K..Q6_K, else 0.
 * BATON_E_OVERFLOW-free: returns UINT64_MAX when the product wraps. */
uint64_t baton_cpu_mul_mat_work_bytes(uint32_t wtype, uint64_t k, uint64_t m);

/* Quantizes m columns of k floats (k % 32 == 0) into act (laid out as
 * above, baton_cpu_mul_mat_work_bytes bytes) for weights of type wtype
 * (Q8_0, Q4_0, Q5_0 or Q5_1), split over the pool by blocks. */
void baton_cpu_quantize_act(struct baton_pool *pool, uint32_t wtype, const float *x, uint64_t k,
                            uint64_t m, void *act);

/* y {N,M} = W {K,N} x {K,M} for W of type wtype (F32, F16, BF16, Q8_0, Q4_0,
 * Q5_0, Q5_1, Q2_K..Q6_K; rows of W are contiguous: K/block * block_bytes bytes, any
 * alignment for the non-F32 types). work holds baton_cpu_mul_mat_work_bytes(wtype, k, m)
 * bytes, 4-byte aligned (64 is best; NULL when that is 0). Threads split
 * the rows of W ROW_UNIT rows at a time: each streams one contiguous range
 * of the first three quarters, then claims pieces of the rest
 * (baton_pool_run_dynamic). Shapes are validated by the caller (k % 32 ==
 * 0 for Q8_0 / Q4_0 / Q5_0 / Q5_1, k % 256 == 0 for the K types). */
void baton_cpu_mul_mat_typed(struct baton_pool *pool, uint32_t wtype, const void *w, const float *x,
                             float *y, uint64_t k, uint64_t n, uint64_t m, void *work);

/* One product of a group that shares its input: W {K, n} at w (rows as in
 * baton_cpu_mul_mat_typed), y {n, M} with column c at y + c * ldy (ldy >=
 * n; 0 means n, a dense y): a ldy above n writes rows of a larger output in
 * place (graph.c's products in pieces). */
struct baton_cpu_mm_part {
    const void *w;
    float *y;
    uint64_t n;
    uint64_t ldy;
};
#define BATON_CPU_MM_MAX_PARTS 4u

/* y_p = W_p x for each of parts[0..n_parts) (1 <= n_parts <=
 * BATON_CPU_MM_MAX_PARTS, all of type wtype with K = k), as n_parts calls
 * of baton_cpu_mul_mat_typed would compute them, bit for bit, but in one
 * pool run over the parts' concatenated rows and with x quantized once:
 * a transformer layer's Q, K and V (and its gate and up) projections read
 * the same x, and at decode each pool run costs a hand-off (graph.c groups
 * such nodes). work as for one product. Every y_p and work must be
 * disjoint from each other and from x (the caller checks). */
void baton_cpu_mul_mat_group(struct baton_pool *pool, uint32_t wtype,
                             const struct baton_cpu_mm_part *parts, uint32_t n_parts,
                             const float *x, uint64_t k, uint64_t m, void *work);

/* baton_cpu_mul_mat_group in two steps, for products that run in pieces
 * (graph.c's turns): baton_cpu_mul_mat_prepare writes work from x (the
 * quantized activations of the types that have them; nothing for F32 and
 * F16), once; then any number of baton_cpu_mul_mat_group_prepared calls
 * over row ranges of the products read it (x must not change in between).
 * The bits are those of baton_cpu_mul_mat_group: the quantizer's output
 * does not depend on which rows of W are multiplied with it. Before, a
 * product in 61 pieces (K 14336, 128 columns) quantized its input 61
 * times: 10 % of a Llama-3-8B-shaped prefill. */
void baton_cpu_mul_mat_prepare(struct baton_pool *pool, uint32_t wtype, const float *x,
                               uint64_t k, uint64_t m, void *work);
void baton_cpu_mul_mat_group_prepared(struct baton_pool *pool, uint32_t wtype,
                                      const struct baton_cpu_mm_part *parts, uint32_t n_parts,
                                      const float *x, uint64_t k, uint64_t m, const void *work);

/* y {k,n} = rows ids[0..n) of table {k,r} of type ttype (F32, F16, BF16,
 * Q8_0, Q4_0, Q5_0, Q5_1, Q2_K..Q6_K), dequantized as baton_dequantize_row
 * does. Returns BATON_E_INDEX (before writing) if some id is outside [0, r). */
int baton_cpu_get_rows_typed(uint32_t ttype, const void *table, uint64_t k, uint64_t r,
                             const int32_t *ids, uint64_t n, float *y);

/* ATTENTION's scores, on the calling thread at the current level:
 * y[s] = sum_i w[s * ws + i] * x[i] for s in [0, n), i in [0, k), each in
 * the F32 order above (run.c's: ascending i, product then sum rounded), so
 * the bits equal a plain sequential loop on every level. ws is the row
 * stride in floats (>= k; the KV cache's slot stride nkv * hd). */
void baton_cpu_f32_dots(const float *w, uint64_t ws, const float *x, uint64_t k, uint64_t n,
                        float *y);

/* baton_cpu_f32_dots for nx queries at once (1 <= nx <= BATON_CPU_DOTS_MAX_X):
 * y[c * ys + s] = sum_i w[s * ws + i] * x[c * xs + i] for c in [0, nx), s in
 * [0, n), i in [0, k), each exactly as baton_cpu_f32_dots computes it for
 * query c alone (same order, same bits). A prefill ubatch's tokens score the
 * same cache rows; the SIMD levels transpose each block of rows once for
 * all the queries instead of once per query (one query is
 * baton_cpu_f32_dots, tuned for a decode's cold cache). y must not overlap
 * w or x. */
#define BATON_CPU_DOTS_MAX_X 4u
void baton_cpu_f32_dots_multi(const float *w, uint64_t ws, const float *x, uint64_t xs,
                              uint32_t nx, uint64_t k, uint64_t n, float *y, uint64_t ys);

/* ATTENTION's weighted sum of value rows, on the calling thread at the
 * current level: out[i] = sum_s a[s] * v[s * vs + i] for i in [0, k),
 * summed from +0 in ascending s, product then sum rounded (run.c's order;
 * the lanes hold different i, so every level gives the same bits). vs is
 * the row stride in floats. out must not overlap v or a. */
void baton_cpu_f32_wsum(const float *v, uint64_t vs, const float *a, uint64_t n, uint64_t k,
                        float *out);

/* baton_cpu_f32_wsum over binary16 value rows (v: vs-strided uint16_t
 * rows, 2-byte aligned): each value converted exactly, then the same
 * operations in the same order, so the bits of F32 rows holding the
 * converted values. */
void baton_cpu_f16_wsum(const void *v, uint64_t vs, const float *a, uint64_t n, uint64_t k,
                        float *out);

/* n binary16 values at src (little-endian, any alignment) -> floats at dst,
 * at the current level: exact, baton_fp16_to_fp32's bits (quant.h), which
 * are the F16C conversion's. dst must not overlap src. */
void baton_cpu_f16_row(const void *src, float *dst, uint64_t n);

/* n floats at src -> binary16 values at dst (little-endian, any
 * alignment), at the current level: baton_fp32_to_fp16's bits (quant.h:
 * nearest, ties to even, as vcvtps2ph with imm 0, which the AVX2 and
 * AVX-512 levels use). ATTENTION's writes into an F16 KV cache. dst must
 * not overlap src. */
void baton_cpu_f32_to_f16_row(const float *src, void *dst, uint64_t n);

/* ATTENTION for one head of a block of nx tokens of one sequence, over one
 * window of cache rows (F32, or binary16: half; kernels.c's
 * attention_task): token c scores the key rows k[s * hd ..] of slots s in
 * [0, n_slots[c]) against its query q[c * qs ..] (hd floats), takes the
 * softmax of those scores and writes the weighted sum of the value rows
 * v[s * hd ..] to out[c * os ..] (hd floats). Every token's bits are those
 * the per-token steps give at any level (baton_cpu_f32_dots, the scale by
 * scale (divide: / scale), the first maximum, baton_cpu_exp_shift, a float
 * sum from +0 in ascending s, the divide, baton_cpu_f32_wsum), since each
 * lane keeps its token's order: the AVX-512 level holds 16 tokens in the
 * lanes of one register for the scores and the softmax (AVX2: two
 * registers of 8), and 4 tokens' sums share each value row's loads. work
 * holds BATON_CPU_ATT_BLOCK floats per slot up to the largest n_slots[c]
 * (the scores, slot-major); nothing is allocated; the caller owns every
 * buffer. */
#define BATON_CPU_ATT_BLOCK 16u
struct baton_att_block {
    const float *q;          /* token c's query at q + c * qs */
    uint64_t qs;             /* floats */
    uint32_t nx;             /* 1 .. BATON_CPU_ATT_BLOCK */
    const uint64_t *n_slots; /* nx counts, each in [1, 2^31) */
    const void *k, *v;       /* the window's first key and value rows, hd elements apart:
                                floats, or binary16 (half) */
    int half;                /* F16 caches: key rows converted exactly into conv
                                BATON_CPU_ATT_CONV_ROWS at a time, value rows as
                                they are loaded: the bits of F32 rows of the same values */
    float *conv;             /* half: BATON_CPU_ATT_CONV_ROWS * hd floats */
    uint64_t hd;             /* 1 .. BATON_CPU_ATT_HD_MAX */
    float scale;
    int divide;              /* 0: score * scale; 1: score / scale */
    float *work;             /* BATON_CPU_ATT_BLOCK * max n_slots floats */
    float *out;              /* token c's output at out + c * os */
    uint64_t os;             /* floats */
};
/* The smallest slot count of tokens [c0, c0 + n) of b (n >= 1): the slots
 * a block kernel's weighted sums add for all n tokens at once. */
static inline uint64_t baton_att_block_min_slots(const struct baton_att_block *b, uint32_t c0,
                                                 uint32_t n)
{
    uint64_t lo = b->n_slots[c0];

    for (uint32_t t = 1; t < n; t++)
        if (b->n_slots[c0 + t] < lo)
            lo = b->n_slots[c0 + t];
    return lo;
}
#define BATON_CPU_ATT_HD_MAX 256u
#define BATON_CPU_ATT_CONV_ROWS 64u /* kernels.h's BATON_CPU_ATT_F16_ROWS */
/* Whether the current level has the block kernel (AVX2 and AVX-512);
 * without it attention_task scores BATON_CPU_ATT_QUERIES tokens at a time
 * and takes each token's softmax and sum alone. */
int baton_cpu_has_att_block(void);
/* The block at the current level; the caller checked baton_cpu_has_att_block
 * and the bounds above (out must not overlap the inputs, work or conv).
 * Writes out's nx rows and uses work (and conv with half) as scratch; no
 * errors, nothing allocated. */
void baton_cpu_att_block(const struct baton_att_block *b);

/* exp(x) rounded to binary32 by baton's own algorithm (expf.h: binary64
 * table-driven evaluation, then one rounding), the scalar reference of the
 * two array kernels below. Not libm's expf: libm's differs between C
 * libraries and versions (glibc 2.36's by one unit in the last place on
 * 0.004 % of inputs), and stages on different hosts must agree bit for bit.
 * NaN gives NaN (x + x); +inf gives +inf, -inf gives +0. */
float baton_cpu_expf(float x);

/* y[i] = x[i] * (1 / (1 + baton_cpu_expf(-x[i]))) for i in [0, n) (SILU,
 * run.c's SwiGLU form, each operation rounded to binary32 in that order),
 * at the current level; every level gives the same bits. y may equal x
 * (in place) but not overlap it otherwise. */
void baton_cpu_silu_n(const float *x, float *y, uint64_t n);

/* GELU's tanh form (core/ops.h): y[i] = x[i] * (1 / (1 + baton_cpu_expf(-z)))
 * with z = (BATON_GELU_C * x[i]) * (1 + (BATON_GELU_A * x[i]) * x[i]) for i
 * in [0, n), each operation rounded to binary32 in that order, at the
 * current level; every level gives the same bits. y may equal x. */
#define BATON_GELU_C 1.5957691216057308f /* 2 sqrt(2 / pi) */
#define BATON_GELU_A 0.044715f
void baton_cpu_gelu_n(const float *x, float *y, uint64_t n);

/* x[i] = baton_cpu_expf(x[i] - m) for i in [0, n), in place (a softmax's
 * exponentials after its maximum m is found), at the current level; every
 * level gives the same bits. */
void baton_cpu_exp_shift(float *x, uint64_t n, float m);

/* ---- per-level kernels (matmul.c, matmul_avx2.c, matmul_avx512.c) ---- */

/* One MUL_MAT: W rows of w_row_bytes bytes, y column stride n. x is F32
 * (column stride k) for F32 / F16 weights; act holds the quantized columns
 * for Q8_0 / Q4_0 and Q2_K..Q6_K weights (column stride act_col_bytes). */
struct baton_mm {
    const uint8_t *w;
    uint64_t w_row_bytes;
    const float *x;
    const uint8_t *act;
    uint64_t act_col_bytes;
    float *y;
    uint64_t k, n, m;
    uint64_t ldy; /* y's column stride in floats (>= n): column c at y + c * ldy */
};

/* Computes y rows [r0, r1) (every column) of one weight type. */
typedef void (*baton_mm_rows_fn)(const struct baton_mm *mm, uint64_t r0, uint64_t r1);

/* Quantizes blocks [b0, b1) of the flat index c * nbp + b (column c,
 * block b, nbp = k/32 rounded up to a multiple of 4; blocks b >= k/32 are
 * the zero padding) into act, bias as above. */
typedef void (*baton_act_fn)(const float *x, uint64_t k, uint8_t *act, uint64_t col_bytes,
                             int32_t bias, uint64_t b0, uint64_t b1);

/* Quantizes super-blocks [b0, b1) of the flat index c * (k / 256) + s
 * (column c, super-block s) of x into the K activation layout at act
 * (column stride col_bytes). */
typedef void (*baton_act_k_fn)(const float *x, uint64_t k, uint8_t *act, uint64_t col_bytes,
                               uint64_t b0, uint64_t b1);

/* baton_cpu_f32_dots and baton_cpu_f32_wsum at one level. */
typedef void (*baton_dots_fn)(const float *w, uint64_t ws, const float *x, uint64_t k, uint64_t n,
                              float *y);
typedef void (*baton_wsum_fn)(const float *v, uint64_t vs, const float *a, uint64_t n, uint64_t k,
                              float *out);
/* baton_cpu_f16_row and baton_cpu_f16_wsum at one level. */
typedef void (*baton_f16_row_fn)(const void *src, float *dst, uint64_t n);
typedef void (*baton_f32_to_f16_row_fn)(const float *src, void *dst, uint64_t n);
typedef void (*baton_wsum_h_fn)(const void *v, uint64_t vs, const float *a, uint64_t n,
                                uint64_t k, float *out);
/* baton_cpu_f32_dots_multi at one level. */
typedef void (*baton_dots_multi_fn)(const float *w, uint64_t ws, const float *x, uint64_t xs,
                                    uint32_t nx, uint64_t k, uint64_t n, float *y, uint64_t ys);

/* baton_cpu_silu_n and baton_cpu_exp_shift at one level. */
typedef void (*baton_silu_fn)(const float *x, float *y, uint64_t n);
typedef void (*baton_exp_shift_fn)(float *x, uint64_t n, float m);
/* baton_cpu_att_block at one level (NULL: none). */
typedef void (*baton_att_block_fn)(const struct baton_att_block *b);

struct baton_mm_kernels {
    baton_mm_rows_fn f32, f16, q8_0, q4_0;
    baton_act_fn act;
    baton_dots_fn dots;
    baton_wsum_fn wsum;
    baton_dots_multi_fn dots_multi;
    baton_silu_fn silu;
    baton_exp_shift_fn exp_shift;
    /* K-quant weights; act holds the K activation layout */
    baton_mm_rows_fn q2_k, q3_k, q4_k, q5_k, q6_k;
    /* the K activation quantizer (baton_mm_act_k's bytes at every level) */
    baton_act_k_fn act_k;
    /* Q5_0 / Q5_1 weights; act holds the activations of Q4_0 (bias 16 / -1) */
    baton_mm_rows_fn q5_0, q5_1;
    /* baton_cpu_f16_row and baton_cpu_f16_wsum (ATTENTION over F16 caches) */
    baton_f16_row_fn f16_row;
    baton_wsum_h_fn wsum_h;
    /* baton_cpu_f32_to_f16_row (writes into an F16 KV cache) */
    baton_f32_to_f16_row_fn f32_to_f16_row;
    /* baton_cpu_att_block (NULL where the level has none) */
    baton_att_block_fn att_block;
    /* BF16 weights: F16's order (32 lanes of FMAs, hsum32), each weight
     * converted exactly */
    baton_mm_rows_fn bf16;
    /* IQ4_NL weights (Q4_0's order and activations, bias 128) and IQ4_XS
     * weights (the K order and K activations) */
    baton_mm_rows_fn iq4_nl, iq4_xs;
    /* baton_cpu_gelu_n */
    baton_silu_fn gelu;
};

/* The K activation quantizer, scalar (the reference): super-blocks
 * [b0, b1) of the flat index c * (k / 256) + s (column c, super-block s)
 * of x into act (column stride col_bytes). */
void baton_mm_act_k(const float *x, uint64_t k, uint8_t *act, uint64_t col_bytes, uint64_t b0,
                    uint64_t b1);

extern const struct baton_mm_kernels baton_mm_scalar;
extern const struct baton_mm_kernels baton_mm_avx2;
extern const struct baton_mm_kernels baton_mm_avx512;

/* A level's tiles for one weight type, walked by baton_mm_drive:
 * decode computes rows [r, r + decode_rows) of column 0 (used when m == 1);
 * tile computes rows [r, r + rows) of columns [c, c + nc), 1 <= nc <= cols;
 * row computes row r of columns [c, c + nc) (ragged rows). */
struct baton_mm_tiles {
    void (*decode)(const struct baton_mm *mm, uint64_t r);
    uint32_t decode_rows;
    void (*tile)(const struct baton_mm *mm, uint64_t r, uint64_t c, uint32_t nc);
    uint32_t rows, cols;
    void (*row)(const struct baton_mm *mm, uint64_t r, uint64_t c, uint32_t nc);
    /* With 2..row_max_m columns every row goes through row() instead of
     * the multi-row tile (0: never). Where 512-bit operations run on
     * 256-bit halves (Zen 4) few columns could not hide the weight stream
     * behind a multi-row tile's compute, and one row streamed better
     * (AVX-512 Q8_0, d768 model: 4 columns 255 -> 420-500 tok/s of decode,
     * 16 columns about +10 %, 32 about even); on a Zen 5 the tiles win
     * from 2 columns on (bench/RESULTS.md). Same bits: a tile's rows and
     * columns reduce each element alike. */
    uint32_t row_max_m;
};

/* Rows [r0, r1) of every column with t: one column streams the rows in
 * decode tiles; several columns go by row blocks of about 256 KiB of
 * weights (kept in L2 while every column group passes over them), each
 * weight tile serving up to t->cols columns (one row at a time up to
 * t->row_max_m columns). */
void baton_mm_drive(const struct baton_mm *mm, uint64_t r0, uint64_t r1,
                    const struct baton_mm_tiles *t);

#define BATON_MM_DECODE_MAX_M 8u

/* baton_mm_drive, except that with 2..decode_max_m columns (at most
 * BATON_MM_DECODE_MAX_M; 0 or 1: never) each block of t->decode_rows rows
 * goes through t->decode once per column, the block's weights read from
 * memory once and from cache for the other columns: with few columns the
 * decode kernels' streaming beat the tiles, which are built to reuse
 * weights across more columns (the AVX-512 K-quants' one-row tile read
 * long rows from memory at a third of the decode's speed: matmul_avx512.c,
 * K_KERNELS). Same bits (the decode and the tiles reduce alike). */
void baton_mm_drive_few(const struct baton_mm *mm, uint64_t r0, uint64_t r1,
                        const struct baton_mm_tiles *t, uint32_t decode_max_m);

/* F32 row r for columns [c, c + nc), scalar (the ragged rows of the SIMD
 * F32 kernels, which work on 8 rows at a time). */
void baton_mm_f32_row(const struct baton_mm *mm, uint64_t r, uint64_t c, uint32_t nc);

/* Q5_0 / Q5_1 kernels of the AVX2 (matmul_q5_avx2.c) and AVX-512
 * (matmul_q5_avx512.c) levels. */
void baton_mm_avx2_q5_0(const struct baton_mm *mm, uint64_t r0, uint64_t r1);
void baton_mm_avx2_q5_1(const struct baton_mm *mm, uint64_t r0, uint64_t r1);
void baton_mm_avx512_q5_0(const struct baton_mm *mm, uint64_t r0, uint64_t r1);
void baton_mm_avx512_q5_1(const struct baton_mm *mm, uint64_t r0, uint64_t r1);

/* AVX2's activation quantizers and weighted sum, also the AVX-512 level's. */
void baton_mm_avx2_act(const float *x, uint64_t k, uint8_t *act, uint64_t col_bytes, int32_t bias,
                       uint64_t b0, uint64_t b1);
void baton_mm_avx2_act_k(const float *x, uint64_t k, uint8_t *act, uint64_t col_bytes,
                         uint64_t b0, uint64_t b1);
void baton_mm_avx2_wsum(const float *v, uint64_t vs, const float *a, uint64_t n, uint64_t k,
                        float *out);
void baton_mm_avx2_f16_row(const void *src, float *dst, uint64_t n);
void baton_mm_avx2_f32_to_f16_row(const float *src, void *dst, uint64_t n);
void baton_mm_avx2_wsum_h(const void *v, uint64_t vs, const float *a, uint64_t n, uint64_t k,
                          float *out);

/* How far ahead of a decode loop, in bytes of its row's weights, the weights
 * are prefetched into L2 (prefetcht1; AVX-512: into L1, below), by the one-column loops that read a
 * row at a time (decode, or a batch's last single column): Q8_0, and the
 * K-quants' `k_row1` from 8 super-blocks (k >= 2048), at the AVX2 and
 * AVX-512 levels (AVX-512 decode takes 8 rows at a time, `k_rows8`, and
 * prefetches the next 8 rows instead; its `k_row1` serves the rows left
 * over). Such a product reads its
 * weights as one sequential stream (rows contiguous), yet with long rows
 * the hardware prefetchers fell behind it: at k = 14336 (the feed-forward down matrix of
 * Llama-3-8B-shaped layers) `bench_kernels --no-prefill` read Q8_0 at 16-25
 * GB/s against 24-31 at k = 4096, Q4_K at 13-15 against 25-26 and Q6_K at
 * 21 against 29, on the Zen 5 host (read-only stream 29-32 GB/s); AVX2 the
 * same way. 8 KiB ahead: Q4_K 27-28 GB/s and Q6_K 30-31 at k = 14336; 2
 * layers of that shape (bench/roofline.sh --shape d4096), old and new
 * binaries alternating: Q8_0 50-51 -> 60-63 tok/s, Q4_K_M 77 -> 91-95,
 * Q6_K 63-66 -> 71-80 (bench/RESULTS.md). 1 KiB ahead into L1 was no
 * better than none, 2 KiB (non-temporal) and 16 KiB in between. F16's
 * loss there came mostly from its binary32 column (56 KiB at that k) read
 * from L2 for every row: AVX-512 h16_decode takes long rows in chunks, and
 * prefetches each run of weights one run ahead. */
#define BATON_MM_DECODE_PF_BYTES 8192u

/* Prefetches `lines` cache lines from p + BATON_MM_DECODE_PF_BYTES into L1
 * (l1 nonzero: prefetcht0) or L2 (prefetcht1); l1 must be a constant, as
 * __builtin_prefetch's locality is. A prefetch past the end of the weights
 * is harmless (it never faults); the address is formed as an integer, so no
 * pointer leaves its object. */
static inline __attribute__((always_inline)) void baton_mm_decode_prefetch_to(const uint8_t *p,
                                                                              int lines, int l1)
{
    int l;

    for (l = 0; l < lines; l++) {
        const void *a =
            (const void *)((uintptr_t)p + BATON_MM_DECODE_PF_BYTES + 64u * (unsigned)l);

        if (l1)
            __builtin_prefetch(a, 0, 3);
        else
            __builtin_prefetch(a, 0, 2);
    }
}

/* Into L2: the AVX2 level's decode loops. */
static inline __attribute__((always_inline)) void baton_mm_decode_prefetch(const uint8_t *p,
                                                                           int lines)
{
    baton_mm_decode_prefetch_to(p, lines, 0);
}

/* Into L1: the AVX-512 level's decode loops. On the Zen 5 host of the
 * thirty-third session (L1d 48 KiB) the same prefetches into L1 instead of
 * L2 read the weights faster (`bench_kernels --no-prefill`, 1 thread, the
 * two hints alternating: Q8_0 at k = 14336 29-30 -> 34-35 GB/s, Q4_0 29-31
 * -> 36-38, Q4_K 34-37 -> 38-39; no loss elsewhere) and the d4096 models
 * decoded up to 24 % faster (bench/RESULTS.md, thirty-third session). AVX2
 * keeps L2: measured on Zen 1, where it was chosen. */
static inline __attribute__((always_inline)) void baton_mm_decode_prefetch_l1(const uint8_t *p,
                                                                              int lines)
{
    baton_mm_decode_prefetch_to(p, lines, 1);
}

#endif
