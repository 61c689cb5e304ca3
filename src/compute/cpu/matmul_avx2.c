/* AVX2 + FMA + F16C kernels (x86-64 only; every function carries its
 * target attribute, so the file builds with generic flags and runs only
 * when baton_cpu_isa() chose this level). Each follows the reduction order
 * of matmul.h lane for lane; the scalar kernels in matmul.c are the
 * reference they are tested against, bit for bit. */
#include "compute/cpu/matmul.h"

#if defined(__x86_64__)

#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "compute/cpu/expf.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#define T2 __attribute__((target("avx2,fma,f16c")))
#define AI inline __attribute__((always_inline))

#define K_VEC_TARGET T2
#include "compute/cpu/matmul_k.h"
#include "compute/cpu/quant.h"

static AI uint16_t load_u16(const uint8_t *p)
{
    uint16_t v;

    memcpy(&v, p, sizeof(v)); /* x86: little-endian */
    return v;
}

static AI uint32_t load_u32(const uint8_t *p)
{
    uint32_t v;

    memcpy(&v, p, sizeof(v));
    return v;
}

static AI T2 float h2f(const uint8_t *p)
{
    return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(load_u16(p))));
}

/* hsum8 of matmul.h */
static AI T2 float hsum8(__m256 c)
{
    const __m128 e = _mm_add_ps(_mm256_castps256_ps128(c), _mm256_extractf128_ps(c, 1));
    const __m128 f = _mm_add_ps(e, _mm_movehl_ps(e, e));

    return _mm_cvtss_f32(_mm_add_ss(f, _mm_movehdup_ps(f)));
}

/* ---- F32: rows across lanes, so each lane keeps run.c's order ---- */

#define F32_TARGET T2
#define F32_PREFIX avx2_
#define F32_T8_HALVES
#include "compute/cpu/matmul_f32.h"

static T2 void avx2_f32(const struct baton_mm *mm, uint64_t r0, uint64_t r1)
{
    baton_mm_drive(mm, r0, r1, &avx2_f32_tiles);
}

/* ---- F16 and BF16: 32 lanes as four 8-lane accumulators ----
 * Both 16-bit float weight types share these kernels: each function takes
 * bf (a constant: 0 F16, 1 BF16), and only the conversions look at it, so
 * BF16 takes F16's order (matmul.h) lane for lane. */

/* 8 weights -> 8 floats, exactly: F16 by vcvtph2ps; BF16, the top half of
 * a binary32, widened to 32 bits and shifted up 16 (baton_bf16_to_fp32's
 * bits, a NaN's payload kept). */
static AI T2 __m256 h16_cvt(__m128i v, const int bf)
{
    return bf ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16))
              : _mm256_cvtph_ps(v);
}

/* The weight at p, as h16_cvt converts it (ragged tails). */
static AI T2 float h16_to_f(const uint8_t *p, const int bf)
{
    return bf ? baton_bf16_to_fp32(load_u16(p)) : h2f(p);
}

/* An output from its 32 lanes s[] (lane l: the terms i = l, l + 32, ... of
 * every whole group of 32 inputs): the ragged tail's terms one at a time
 * into their lanes, then the fixed tree b[l] = s[l] + s[l + 16] for l < 16,
 * hsum8(b[0..7] + b[8..15]). wr: the row's weights, xc: the column's k
 * inputs. */
static AI T2 float h16_lanes_sum(const uint8_t *wr, const float *xc, uint64_t k, float *s,
                                 const int bf)
{
    uint64_t kk;
    __m256 b0, b1;

    for (kk = k & ~(uint64_t)31; kk < k; kk++)
        s[kk % 32] = fmaf(h16_to_f(wr + 2 * kk, bf), xc[kk], s[kk % 32]);
    b0 = _mm256_add_ps(_mm256_loadu_ps(s), _mm256_loadu_ps(s + 16));
    b1 = _mm256_add_ps(_mm256_loadu_ps(s + 8), _mm256_loadu_ps(s + 24));
    return hsum8(_mm256_add_ps(b0, b1));
}

/* One column: one row at a time, a single sequential stream of weights
 * (see matmul_avx512.c), its 32 lanes in four accumulators. */
static AI T2 void h16_decode(const struct baton_mm *mm, uint64_t r, const int bf)
{
    const uint64_t k = mm->k;
    const uint8_t *wr = mm->w + r * mm->w_row_bytes;
    __m256 a[4];
    float s[32];
    uint64_t i;
    int q;

#pragma GCC unroll 4
    for (q = 0; q < 4; q++)
        a[q] = _mm256_setzero_ps();
    for (i = 0; i + 32 <= k; i += 32) {
#pragma GCC unroll 4
        for (q = 0; q < 4; q++)
            a[q] = _mm256_fmadd_ps(
                h16_cvt(_mm_loadu_si128((const __m128i *)(wr + 2 * (i + 8 * q))), bf),
                _mm256_loadu_ps(mm->x + i + 8 * q), a[q]);
    }
#pragma GCC unroll 4
    for (q = 0; q < 4; q++)
        _mm256_storeu_ps(s + 8 * q, a[q]);
    mm->y[r] = h16_lanes_sum(wr, mm->x, k, s, bf);
}

/* ---- F16 / BF16 prefill tiles: NR rows x NC columns, one lane group at a
 * time ----
 * An output's 32 lanes take four accumulators (as in h16_decode), so in
 * the tiles before these 16 registers held at most 1 x 3 outputs, and each
 * converted weight vector served 3 multiply-adds: on a core with two
 * 256-bit FMA pipes (Zen 3) the loads and conversions, not the
 * multiply-adds, bound them. Here the k inputs
 * go in chunks of H16_KC (in L1: NR rows of weights and NC columns of
 * activations), and within a chunk lane group q (lanes 8q..8q+7) runs over
 * the chunk for every output before group q + 1 does: NR x NC = 12
 * accumulators, 4 conversions and 3 activation loads per 12 multiply-adds
 * (1 x 3: 1 and 3 per 3). The groups' sums wait in lane[] between chunks.
 * Every lane still takes its terms in h16_decode's order (lane l: i = l,
 * l + 32, ... then the ragged tail), so the bits are h16_decode's.
 * bench_kernels on Zen 3 (1 thread, 128 columns, GFLOP/s): k 768 about 43
 * -> 50-64, k 4096 29-32 -> 44-53, k 14336 25-27 -> 26-40 (bench/RESULTS.md,
 * fiftieth session); 3 x 4 and 2 x 6 tiles were no faster. */
#define H16_KC 1024u /* 4 rows x 2 KiB + 3 columns x 4 KiB in L1 */
#define H16_ROWS 4
#define H16_COLS 3

/* Lane group passes of NR rows x NC columns from (r, c) over inputs
 * [i0, i1) (multiples of 32): lane[rr][j] holds the 32 lanes of row
 * r + rr, column c + j, read at the start of each group's pass (zero when
 * i0 == 0) and written at its end. */
static AI T2 void h16_pass(const struct baton_mm *mm, uint64_t r, uint64_t c, const int NR,
                           const int NC, uint64_t i0, uint64_t i1, float (*lane)[H16_COLS][32],
                           const int bf)
{
    const uint64_t k = mm->k;
    uint64_t i;
    int rr, j, q;

#pragma GCC unroll 1
    for (q = 0; q < 4; q++) {
        __m256 a[H16_ROWS][H16_COLS];

#pragma GCC unroll 8
        for (rr = 0; rr < NR; rr++)
#pragma GCC unroll 8
            for (j = 0; j < NC; j++) /* the first chunk starts from zero */
                a[rr][j] = i0 ? _mm256_load_ps(&lane[rr][j][8 * q]) : _mm256_setzero_ps();
        for (i = i0 + 8 * (uint64_t)q; i < i1; i += 32) {
            __m256 xv[H16_COLS];

#pragma GCC unroll 8
            for (j = 0; j < NC; j++)
                xv[j] = _mm256_loadu_ps(mm->x + (c + j) * k + i);
#pragma GCC unroll 8
            for (rr = 0; rr < NR; rr++) {
                const uint8_t *wr = mm->w + (r + rr) * mm->w_row_bytes;
                const __m256 wv = h16_cvt(_mm_loadu_si128((const __m128i *)(wr + 2 * i)), bf);

#pragma GCC unroll 8
                for (j = 0; j < NC; j++)
                    a[rr][j] = _mm256_fmadd_ps(wv, xv[j], a[rr][j]);
            }
        }
#pragma GCC unroll 8
        for (rr = 0; rr < NR; rr++)
#pragma GCC unroll 8
            for (j = 0; j < NC; j++)
                _mm256_store_ps(&lane[rr][j][8 * q], a[rr][j]);
    }
}

/* The outputs of NR rows x NC columns from (r, c) whose lanes hold every
 * whole group of 32 inputs (h16_pass), as h16_decode ends its row. */
static AI T2 void h16_finish(const struct baton_mm *mm, uint64_t r, uint64_t c, const int NR,
                             const int NC, float (*lane)[H16_COLS][32], const int bf)
{
    int rr, j;

#pragma GCC unroll 8
    for (rr = 0; rr < NR; rr++)
#pragma GCC unroll 8
        for (j = 0; j < NC; j++)
            mm->y[(c + j) * mm->ldy + r + rr] =
                h16_lanes_sum(mm->w + (r + rr) * mm->w_row_bytes, mm->x + (c + j) * mm->k,
                              mm->k, lane[rr][j], bf);
}

static AI T2 void h16_tile_lanes(const struct baton_mm *mm, uint64_t r, uint64_t c,
                                 const int NR, const int NC, const int bf)
{
    const uint64_t kf = mm->k & ~(uint64_t)31;
    float lane[H16_ROWS][H16_COLS][32] __attribute__((aligned(32)));
    uint64_t i0;

    if (kf == 0) /* no whole group: the tail starts from zero lanes */
        memset(lane, 0, sizeof(lane));
    for (i0 = 0; i0 < kf; i0 += H16_KC)
        h16_pass(mm, r, c, NR, NC, i0, i0 + H16_KC < kf ? i0 + H16_KC : kf, lane, bf);
    h16_finish(mm, r, c, NR, NC, lane, bf);
}

static AI T2 void h16_tile_n(const struct baton_mm *mm, uint64_t r, uint64_t c, uint32_t nc,
                             const int bf)
{
    if (nc == 1)
        h16_tile_lanes(mm, r, c, H16_ROWS, 1, bf);
    else if (nc == 2)
        h16_tile_lanes(mm, r, c, H16_ROWS, 2, bf);
    else
        h16_tile_lanes(mm, r, c, H16_ROWS, 3, bf);
}

static AI T2 void h16_row(const struct baton_mm *mm, uint64_t r, uint64_t c, uint32_t nc,
                          const int bf)
{
    uint32_t j;

    for (j = 0; j + 3 <= nc; j += 3)
        h16_tile_lanes(mm, r, c + j, 1, 3, bf);
    if (nc - j == 2)
        h16_tile_lanes(mm, r, c + j, 1, 2, bf);
    else if (nc - j == 1)
        h16_tile_lanes(mm, r, c + j, 1, 1, bf);
}

/* Each type's tiles: the functions above with bf fixed. */
static T2 void f16_decode(const struct baton_mm *mm, uint64_t r)
{
    h16_decode(mm, r, 0);
}

static T2 void f16_tile_n(const struct baton_mm *mm, uint64_t r, uint64_t c, uint32_t nc)
{
    h16_tile_n(mm, r, c, nc, 0);
}

static T2 void f16_row(const struct baton_mm *mm, uint64_t r, uint64_t c, uint32_t nc)
{
    h16_row(mm, r, c, nc, 0);
}

static T2 void bf16_decode(const struct baton_mm *mm, uint64_t r)
{
    h16_decode(mm, r, 1);
}

static T2 void bf16_tile_n(const struct baton_mm *mm, uint64_t r, uint64_t c, uint32_t nc)
{
    h16_tile_n(mm, r, c, nc, 1);
}

static T2 void bf16_row(const struct baton_mm *mm, uint64_t r, uint64_t c, uint32_t nc)
{
    h16_row(mm, r, c, nc, 1);
}

static const struct baton_mm_tiles f16_tiles = {
    f16_decode, 1, f16_tile_n, H16_ROWS, H16_COLS, f16_row, 0,
};
static const struct baton_mm_tiles bf16_tiles = {
    bf16_decode, 1, bf16_tile_n, H16_ROWS, H16_COLS, bf16_row, 0,
};

static T2 void avx2_f16(const struct baton_mm *mm, uint64_t r0, uint64_t r1)
{
    baton_mm_drive(mm, r0, r1, &f16_tiles);
}

static T2 void avx2_bf16(const struct baton_mm *mm, uint64_t r0, uint64_t r1)
{
    baton_mm_drive(mm, r0, r1, &bf16_tiles);
}

/* ---- Q8_0 against quantized activations (matmul.h: four chains) ----
 * A 256-bit accumulator holds two chains, each in the 4 lanes of a 128-bit
 * half: blocks 4g, 4g+1 (chains 0, 1) go to acc[0] and 4g+2, 4g+3 (chains
 * 2, 3) to acc[1]. A block's 4 partial sums are added across the half
 * (two in-lane shuffles) before its multiply-add, so every lane of a half
 * holds the same chain. */

/* y = (C0 + C2) + (C1 + C3) from acc0 + acc1 (C0 + C2 in lane 0, C1 + C3
 * in lane 4). */
static AI T2 float q8_chains_sum(__m256 acc0, __m256 acc1)
{
    const __m256 v = _mm256_add_ps(acc0, acc1);

    return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)));
}

/* Each 32-bit lane of a 128-bit half: the sum of the half's 4 lanes. */
static AI T2 __m256i q8_half_sums(__m256i v)
{
    v = _mm256_add_epi32(v, _mm256_shuffle_epi32(v, 0x4E));
    return _mm256_add_epi32(v, _mm256_shuffle_epi32(v, 0xB1));
}

/* binary16 scales of blocks b, b+1 as [d0 x4, d1 x4] (d1 = 0 without pair). */
static AI T2 __m256 scales2(const uint8_t *p, uint64_t bb, const int pair)
{
    const uint32_t h = load_u16(p) | (pair ? (uint32_t)load_u16(p + bb) << 16 : 0);
    const __m128i spread = _mm_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3);

    return _mm256_cvtph_ps(_mm_shuffle_epi8(_mm_cvtsi32_si128((int)h), spread));
}

/* Blocks b, b+1 (pair 1) or b alone (pair 0: lanes 4..7 left as they are)
 * of NR rows against NC columns into acc[rr] (chain b % 4 in the low half,
 * the next in the high half), by the sign trick (|w| unsigned times x with
 * w's sign, so maddubs's int16 pair sums stay below 2 * 128 * 127). With
 * one column a block's 4 partial sums are added across its half, so each
 * lane of the half holds the chain; with 2..4 columns two rounds of
 * vphaddd over the columns' sums leave lane u of each half with column
 * u's block sum (3 operations for 4 columns where the former took 8). */
static AI T2 void q_pair(const struct baton_mm *mm, uint64_t r, uint64_t c, uint64_t b,
                         const int NR, const int NC, const int pair, __m256 *acc)
{
    const uint64_t bb = BATON_Q8_0_BLOCK_BYTES, half = 16 * (b % 4); /* 0 or 32 */
    const __m256i ones16 = _mm256_set1_epi16(1);
    __m256i lo[2], hi[2], xlo[4], xhi[4];
    __m256 dw[2], dx[4], dxc;
    int rr, j;

#pragma GCC unroll 8
    for (rr = 0; rr < NR; rr++) {
        const uint8_t *p = mm->w + (r + rr) * mm->w_row_bytes + b * bb;
        const __m128i z = _mm_setzero_si128();

        dw[rr] = scales2(p, bb, pair);
        lo[rr] = _mm256_set_m128i(pair ? _mm_loadu_si128((const __m128i *)(p + 36)) : z,
                                  _mm_loadu_si128((const __m128i *)(p + 2)));
        hi[rr] = _mm256_set_m128i(pair ? _mm_loadu_si128((const __m128i *)(p + 52)) : z,
                                  _mm_loadu_si128((const __m128i *)(p + 18)));
    }
#pragma GCC unroll 4
    for (j = 0; j < NC; j++) {
        const uint8_t *grp = mm->act + (c + j) * mm->act_col_bytes + b / 4 * BATON_ACT_GROUP_BYTES;

        xlo[j] = _mm256_loadu_si256((const __m256i *)(grp + half));
        xhi[j] = _mm256_loadu_si256((const __m256i *)(grp + 64 + half));
        dx[j] = _mm256_loadu_ps((const float *)(grp + 192 + half));
    }
    dxc = dx[0];
    if (NC > 1)
        dxc = _mm256_blend_ps(dxc, dx[1], 0x22);
    if (NC > 2)
        dxc = _mm256_blend_ps(dxc, dx[2], 0x44);
    if (NC > 3)
        dxc = _mm256_blend_ps(dxc, dx[3], 0x88);
#pragma GCC unroll 8
    for (rr = 0; rr < NR; rr++) {
        __m256i v[4], i32;
        __m256 t;

#pragma GCC unroll 4
        for (j = 0; j < 4; j++) {
            if (j < NC) {
                const __m256i plo = _mm256_maddubs_epi16(_mm256_abs_epi8(lo[rr]),
                                                         _mm256_sign_epi8(xlo[j], lo[rr]));
                const __m256i phi = _mm256_maddubs_epi16(_mm256_abs_epi8(hi[rr]),
                                                         _mm256_sign_epi8(xhi[j], hi[rr]));

                v[j] = _mm256_add_epi32(_mm256_madd_epi16(plo, ones16),
                                        _mm256_madd_epi16(phi, ones16));
            } else {
                v[j] = _mm256_setzero_si256();
            }
        }
        i32 = NC == 1 ? q8_half_sums(v[0])
                      : _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]),
                                          _mm256_hadd_epi32(v[2], v[3]));
        t = _mm256_fmadd_ps(_mm256_mul_ps(dw[rr], dxc), _mm256_cvtepi32_ps(i32), acc[rr]);
        acc[rr] = pair ? t : _mm256_blend_ps(t, acc[rr], 0xF0);
    }
}

/* The outputs of q_pair's chains (acc0: chains 0 and 1, acc1: 2 and 3) of
 * one row and NC columns into y[j * ldy]: (C0 + C2) + (C1 + C3). */
static AI T2 void q8_store_cols(__m256 acc0, __m256 acc1, const int NC, float *y, uint64_t ldy)
{
    const __m256 v = _mm256_add_ps(acc0, acc1);
    float o[4];
    int j;

    if (NC == 1) {
        y[0] = q8_chains_sum(acc0, acc1);
        return;
    }
    _mm_storeu_ps(o, _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)));
#pragma GCC unroll 4
    for (j = 0; j < NC; j++)
        y[j * ldy] = o[j];
}

static AI T2 void q_tile(const struct baton_mm *mm, uint64_t r, uint64_t c, const int NR,
                         const int NC)
{
    const uint64_t nb = mm->k / 32;
    __m256 acc0[8], acc1[8];
    uint64_t b;
    int i;

#pragma GCC unroll 8
    for (i = 0; i < NR; i++) {
        acc0[i] = _mm256_setzero_ps();
        acc1[i] = _mm256_setzero_ps();
    }
    for (b = 0; nb - b >= 4; b += 4) {
        if (NR == 1 && NC == 1) /* one column: see BATON_MM_DECODE_PF_BYTES */
            baton_mm_decode_prefetch(mm->w + r * mm->w_row_bytes + b * BATON_Q8_0_BLOCK_BYTES, 3);
        q_pair(mm, r, c, b, NR, NC, 1, acc0);
        q_pair(mm, r, c, b + 2, NR, NC, 1, acc1);
    }
    if (nb - b >= 2) {
        q_pair(mm, r, c, b, NR, NC, 1, acc0);
        if (nb - b == 3)
            q_pair(mm, r, c, b + 2, NR, NC, 0, acc1);
    } else if (nb - b == 1) {
        q_pair(mm, r, c, b, NR, NC, 0, acc0);
    }
#pragma GCC unroll 8
    for (i = 0; i < NR; i++)
        q8_store_cols(acc0[i], acc1[i], NC, mm->y + c * mm->ldy + r + i, mm->ldy);
}

/* Decode (one row, column 0) in 128-bit registers: a group's 4 blocks give
 * 4 registers of partial sums, two rounds of vphaddd make them one whose
 * lane t is block t's exact sum, and one multiply-add takes the 4 blocks
 * into the 4 chains (lane t: chain t). On Zen 1 every 256-bit operation is
 * two 128-bit ones. */

/* Block t (0..3) of a group, weights at p: the 4 partial sums of its
 * elements 4l..4l+3 and 16+4l..16+4l+3. */
static AI T2 __m128i q_blk_isum(const uint8_t *p, const uint8_t *grp, int t)
{
    const __m128i ones16 = _mm_set1_epi16(1);
    const __m128i wl = _mm_loadu_si128((const __m128i *)(p + 2));
    const __m128i wh = _mm_loadu_si128((const __m128i *)(p + 18));
    const __m128i xl = _mm_loadu_si128((const __m128i *)(grp + 16 * t));
    const __m128i xh = _mm_loadu_si128((const __m128i *)(grp + 64 + 16 * t));
    const __m128i plo = _mm_maddubs_epi16(_mm_abs_epi8(wl), _mm_sign_epi8(xl, wl));
    const __m128i phi = _mm_maddubs_epi16(_mm_abs_epi8(wh), _mm_sign_epi8(xh, wh));

    return _mm_add_epi32(_mm_madd_epi16(plo, ones16), _mm_madd_epi16(phi, ones16));
}

/* The exact sums of the 4 blocks of the group at p, lane t: block t. */
static AI T2 __m128i q_grp_isum(const uint8_t *p, const uint8_t *grp)
{
    const uint64_t bb = BATON_Q8_0_BLOCK_BYTES;

    return _mm_hadd_epi32(_mm_hadd_epi32(q_blk_isum(p, grp, 0), q_blk_isum(p + bb, grp, 1)),
                          _mm_hadd_epi32(q_blk_isum(p + 2 * bb, grp, 2),
                                         q_blk_isum(p + 3 * bb, grp, 3)));
}

/* The group's 4 float steps: chain t = fma(fp16(dW_t) * dx_t, isum_t,
 * chain t); the 4 binary16 scales gathered in a general-purpose register
 * and widened by one conversion. */
static AI T2 __m128 q_grp_step(const uint8_t *p, const uint8_t *grp, __m128i isum, __m128 acc)
{
    const uint64_t bb = BATON_Q8_0_BLOCK_BYTES;
    const float *dx = (const float *)(grp + 192);
    uint64_t h = (uint64_t)load_u16(p) | (uint64_t)load_u16(p + bb) << 16 |
                 (uint64_t)load_u16(p + 2 * bb) << 32 | (uint64_t)load_u16(p + 3 * bb) << 48;
    __m128 d, x;

    __asm__("" : "+r"(h)); /* stays in a GPR: see q4_scales8 */
    d = _mm_cvtph_ps(_mm_cvtsi64_si128((long long)h));
    x = _mm_blend_ps(_mm_loadu_ps(dx), _mm_loadu_ps(dx + 4), 0x2);
    x = _mm_blend_ps(x, _mm_loadu_ps(dx + 8), 0x4);
    x = _mm_blend_ps(x, _mm_loadu_ps(dx + 12), 0x8);
    return _mm_fmadd_ps(_mm_mul_ps(d, x), _mm_cvtepi32_ps(isum), acc);
}

/* q_tile(mm, r, 0, 1, 1), software-pipelined: each group of 4 blocks forms
 * the next group's integer sums before its own float step, so two groups'
 * chains of dependent operations overlap; the last blocks (k / 32 % 4)
 * through q_pair, the 4 chains spread to its layout. */
static T2 void q8_0_decode(const struct baton_mm *mm, uint64_t r)
{
    const uint64_t nb = mm->k / 32, bb = BATON_Q8_0_BLOCK_BYTES, gb = BATON_ACT_GROUP_BYTES;
    const uint8_t *w = mm->w + r * mm->w_row_bytes;
    __m128 acc = _mm_setzero_ps();
    __m128i isum, next;
    __m256 acc0[1], acc1[1];
    uint64_t b = 0;

    if (nb < 4) {
        q_tile(mm, r, 0, 1, 1);
        return;
    }
    isum = q_grp_isum(w, mm->act);
    for (;; b += 4) {
        const uint8_t *p = w + b * bb, *grp = mm->act + b / 4 * gb;

        baton_mm_decode_prefetch(p, 3); /* see BATON_MM_DECODE_PF_BYTES */
        if (nb - b < 8) {
            acc = q_grp_step(p, grp, isum, acc);
            b += 4;
            break;
        }
        next = q_grp_isum(p + 4 * bb, grp + gb);
        acc = q_grp_step(p, grp, isum, acc);
        isum = next;
    }
    if (nb == b) {
        const __m128 t = _mm_add_ps(acc, _mm_movehl_ps(acc, acc));

        mm->y[r] = _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
        return;
    }
    acc0[0] = _mm256_set_m128(_mm_permute_ps(acc, 0x55), _mm_permute_ps(acc, 0x00));
    acc1[0] = _mm256_set_m128(_mm_permute_ps(acc, 0xFF), _mm_permute_ps(acc, 0xAA));
    if (nb - b >= 2) {
        q_pair(mm, r, 0, b, 1, 1, 1, acc0);
        if (nb - b == 3)
            q_pair(mm, r, 0, b + 2, 1, 1, 0, acc1);
    } else {
        q_pair(mm, r, 0, b, 1, 1, 0, acc0);
    }
    mm->y[r] = q8_chains_sum(acc0[0], acc1[0]);
}

static T2 void q8_0_tile_n(const struct baton_mm *mm, uint64_t r, uint64_t c, uint32_t nc)
{
    switch (nc) {
    case 1:
        q_tile(mm, r, c, 1, 1);
        break;
    case 2:
        q_tile(mm, r, c, 1, 2);
        break;
    case 3:
        q_tile(mm, r, c, 1, 3);
        break;
    default:
        q_tile(mm, r, c, 1, 4);
        break;
    }
}

static const struct baton_mm_tiles q8_0_tiles = {
    q8_0_decode, 1, q8_0_tile_n, 1, 4, q8_0_tile_n, 0,
};

static T2 void avx2_q8_0(const struct baton_mm *mm, uint64_t r0, uint64_t r1)
{
    baton_mm_drive(mm, r0, r1, &q8_0_tiles);
}

/* ---- activation quantization (scalar_act's arithmetic, 8 lanes) ---- */

T2 void baton_mm_avx2_act(const float *x, uint64_t k, uint8_t *act, uint64_t col_bytes,
                          int32_t bias, uint64_t b0, uint64_t b1)
{
    const uint64_t nb = k / 32, nbp = (nb + 3) / 4 * 4;
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    const __m256i exp_mask = _mm256_set1_epi32(0x7F800000);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    uint64_t fb;

    for (fb = b0; fb < b1; fb++) {
        const uint64_t c = fb / nbp, b = fb % nbp;
        uint8_t *grp = act + c * col_bytes + b / 4 * BATON_ACT_GROUP_BYTES;
        const int bj = (int)(b % 4);
        __m128i *q_lo = (__m128i *)(grp + 16 * bj), *q_hi = (__m128i *)(grp + 64 + 16 * bj);
        __m128i *corr = (__m128i *)(grp + 128 + 16 * bj);
        float *dd = (float *)(grp + 192) + 4 * bj;
        __m256 v[4], mx;
        __m256i nonfinite = _mm256_setzero_si256(), q32[4], bytes, s4;
        __m128i c4;
        __m128 m4;
        float amax, d, id;
        int i;

        if (b >= nb) { /* padding of the last group */
            _mm_storeu_si128(q_lo, _mm_setzero_si128());
            _mm_storeu_si128(q_hi, _mm_setzero_si128());
            _mm_storeu_si128(corr, _mm_setzero_si128());
            _mm_storeu_ps(dd, _mm_setzero_ps());
            continue;
        }
        for (i = 0; i < 4; i++) {
            v[i] = _mm256_loadu_ps(x + c * k + b * 32 + 8 * i);
            nonfinite = _mm256_or_si256(
                nonfinite, _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_castps_si256(v[i]), exp_mask),
                                              exp_mask));
        }
        if (!_mm256_testz_si256(nonfinite, nonfinite)) {
            _mm_storeu_si128(q_lo, _mm_setzero_si128());
            _mm_storeu_si128(q_hi, _mm_setzero_si128());
            _mm_storeu_si128(corr, _mm_setzero_si128());
            _mm_storeu_ps(dd, _mm_set1_ps(NAN));
            continue;
        }
        mx = _mm256_max_ps(
            _mm256_max_ps(_mm256_and_ps(v[0], abs_mask), _mm256_and_ps(v[1], abs_mask)),
            _mm256_max_ps(_mm256_and_ps(v[2], abs_mask), _mm256_and_ps(v[3], abs_mask)));
        m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        amax = _mm_cvtss_f32(m4);
        d = amax / 127.0f;
        id = d != 0.0f ? 1.0f / d : 0.0f;
        if (id > FLT_MAX) /* d subnormal: 1/d overflows; every q is 0 (matmul.h) */
            id = 0.0f;
        for (i = 0; i < 4; i++)
            q32[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], _mm256_set1_ps(id)));
        bytes = _mm256_packs_epi16(_mm256_packs_epi32(q32[0], q32[1]),
                                   _mm256_packs_epi32(q32[2], q32[3]));
        bytes = _mm256_permutevar8x32_epi32(bytes, order); /* elements 0..31 in order */
        _mm_storeu_si128(q_lo, _mm256_castsi256_si128(bytes));
        _mm_storeu_si128(q_hi, _mm256_extracti128_si256(bytes, 1));
        /* sums of 4 (elements 4l.., then 16+4l..), lane l + lane l+4 */
        s4 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), bytes),
                               _mm256_set1_epi16(1));
        c4 = _mm_mullo_epi32(
            _mm_add_epi32(_mm256_castsi256_si128(s4), _mm256_extracti128_si256(s4, 1)),
            _mm_set1_epi32(-bias));
        if (bias == 8 || bias == 128) { /* Q4_0, Q8_0: the whole corr in lane 0 (matmul.h) */
            c4 = _mm_add_epi32(c4, _mm_shuffle_epi32(c4, 0x4E));
            c4 = _mm_add_epi32(c4, _mm_shuffle_epi32(c4, 0xB1));
            c4 = _mm_blend_epi32(_mm_setzero_si128(), c4, 1);
        }
        _mm_storeu_si128(corr, c4);
        _mm_storeu_ps(dd, _mm_set1_ps(d));
    }
}

/* K activations (matmul.h), baton_mm_act_k's bytes: a super-block of
 * 256 floats in two passes over it (it is in L1 after the first). The
 * first takes the largest |x| as the largest of the integers x & 0x7FFFFFFF
 * (for non-negative floats the integer order is the float order), which
 * is at least 0x7F800000 exactly when some x is inf or NaN. The second
 * rounds x * (1/dx) with cvtps2dq (nearest even, as the scalar lrintf),
 * packs to bytes and takes the sums of 16 with vpmaddubsw and a vphaddw
 * tree (|sum| <= 16 * 127: no wrap). */
T2 void baton_mm_avx2_act_k(const float *x, uint64_t k, uint8_t *act, uint64_t col_bytes,
                            uint64_t b0, uint64_t b1)
{
    const uint64_t nsb = k / BATON_QK_K;
    const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m256i ones = _mm256_set1_epi8(1);
    uint64_t fb;

    for (fb = b0; fb < b1; fb++) {
        const uint64_t c = fb / nsb, s = fb % nsb;
        const float *xb = x + c * k + s * BATON_QK_K;
        uint8_t *blk = act + c * col_bytes + s * BATON_ACT_K_BLOCK_BYTES;
        __m256i mx = _mm256_setzero_si256(), mx1 = _mm256_setzero_si256(), p[8];
        __m128i m4;
        uint32_t amax_bits;
        float amax, dx, id;
        int i;

        for (i = 0; i < 32; i += 2) {
            mx = _mm256_max_epu32(
                mx, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(xb + 8 * i)), abs_mask));
            mx1 = _mm256_max_epu32(
                mx1,
                _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(xb + 8 * i + 8)), abs_mask));
        }
        mx = _mm256_max_epu32(mx, mx1);
        m4 = _mm_max_epu32(_mm256_castsi256_si128(mx), _mm256_extracti128_si256(mx, 1));
        m4 = _mm_max_epu32(m4, _mm_shuffle_epi32(m4, 0x4E));
        m4 = _mm_max_epu32(m4, _mm_shuffle_epi32(m4, 0xB1));
        amax_bits = (uint32_t)_mm_cvtsi128_si32(m4);
        memset(blk + 292, 0, BATON_ACT_K_BLOCK_BYTES - 292);
        if (amax_bits >= 0x7F800000u) { /* an inf or a NaN */
            const float nan = NAN;

            memset(blk, 0, 288);
            memcpy(blk + 288, &nan, sizeof(nan));
            continue;
        }
        memcpy(&amax, &amax_bits, sizeof(amax));
        dx = amax / 127.0f;
        id = dx != 0.0f ? 1.0f / dx : 0.0f;
        if (id == INFINITY) {
            /* dx < 2^-128: every x * id is +-inf or NaN, which the scalar
             * lrintf turns into LONG_MIN, int8 0 (cvtps2dq would give -128) */
            memset(blk, 0, 288);
            memcpy(blk + 288, &dx, sizeof(dx));
            continue;
        }
        for (i = 0; i < 8; i++) {
            const __m256 idv = _mm256_set1_ps(id);
            __m256i q32[4], bytes;
            int j;

            for (j = 0; j < 4; j++)
                q32[j] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + 32 * i + 8 * j), idv));
            bytes = _mm256_packs_epi16(_mm256_packs_epi32(q32[0], q32[1]),
                                       _mm256_packs_epi32(q32[2], q32[3]));
            bytes = _mm256_permutevar8x32_epi32(bytes, order); /* elements 32i.. in order */
            _mm256_storeu_si256((__m256i *)(blk + 32 * i), bytes);
            /* int16 lanes 0..7: pair sums of elements 32i..32i+15, 8..15: of the next 16 */
            p[i] = _mm256_maddubs_epi16(ones, bytes);
        }
        {
            /* 128-bit half 0 of each vphaddw ends with sums of the sub-blocks
             * of 16 2i (the even ones), half 1 with 2i + 1 */
            const __m256i h01 = _mm256_hadd_epi16(p[0], p[1]), h23 = _mm256_hadd_epi16(p[2], p[3]);
            const __m256i h45 = _mm256_hadd_epi16(p[4], p[5]), h67 = _mm256_hadd_epi16(p[6], p[7]);
            const __m256i f = _mm256_hadd_epi16(_mm256_hadd_epi16(h01, h23),
                                                _mm256_hadd_epi16(h45, h67));
            const __m128i ev = _mm256_castsi256_si128(f), od = _mm256_extracti128_si256(f, 1);

            _mm_storeu_si128((__m128i *)(blk + 256), _mm_unpacklo_epi16(ev, od));
            _mm_storeu_si128((__m128i *)(blk + 272), _mm_unpackhi_epi16(ev, od));
        }
        memcpy(blk + 288, &dx, sizeof(dx));
    }
}

/* ---- ATTENTION's weighted sum: lanes hold i, s ascending per lane ---- */

/* 8 value lanes at v (floats, or binary16 converted exactly by vcvtph2ps
 * when half): the F16 rows give the bits of F32 rows holding the same
 * values. */
static AI T2 __m256 wsum_load(const void *v, const int half)
{
    return half ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)v))
                : _mm256_loadu_ps((const float *)v);
}

/* out[i0 .. i0 + 8*NA) over every s, NA accumulators of 8 lanes; v points
 * at element i0 of row 0, rows vs elements apart. */
static AI T2 void wsum_block(const void *v, uint64_t vs, const float *a, uint64_t n, float *out,
                             const int NA, const int half)
{
    const size_t eb = half ? 2 : 4;
    __m256 acc[8];
    uint64_t s;
    int j;

    /* unrolled, so the accumulators stay in registers (rolled, they were
     * an array in memory, zeroed by a rep stos per block) */
#pragma GCC unroll 8
    for (j = 0; j < NA; j++)
        acc[j] = _mm256_setzero_ps();
    for (s = 0; s < n; s++) {
        const __m256 w = _mm256_broadcast_ss(a + s);
        const uint8_t *vr = (const uint8_t *)v + s * vs * eb;

#pragma GCC unroll 8
        for (j = 0; j < NA; j++)
            acc[j] = _mm256_add_ps(acc[j], _mm256_mul_ps(w, wsum_load(vr + 8 * j * eb, half)));
    }
#pragma GCC unroll 8
    for (j = 0; j < NA; j++)
        _mm256_storeu_ps(out + 8 * j, acc[j]);
}

/* The weighted sum over F32 or (half) binary16 value rows. */
static AI T2 void wsum_rows(const void *v, uint64_t vs, const float *a, uint64_t n, uint64_t k,
                            float *out, const int half)
{
    const float *vf = v;
    const uint16_t *vh = v;
    uint64_t i = 0, s, t;

    for (; k - i >= 64; i += 64)
        wsum_block(half ? (const void *)(vh + i) : (const void *)(vf + i), vs, a, n, out + i, 8,
                   half);
    for (; k - i >= 8; i += 8)
        wsum_block(half ? (const void *)(vh + i) : (const void *)(vf + i), vs, a, n, out + i, 1,
                   half);
    for (t = i; t < k; t++)
        out[t] = 0.0f;
    for (s = 0; s < n; s++)
        for (t = i; t < k; t++)
            out[t] = out[t] +
                     a[s] * (half ? baton_fp16_to_fp32(vh[s * vs + t]) : vf[s * vs + t]);
}

T2 void baton_mm_avx2_wsum_h(const void *v, uint64_t vs, const float *a, uint64_t n, uint64_t k,
                             float *out)
{
    wsum_rows(v, vs, a, n, k, out, 1);
}

T2 void baton_mm_avx2_wsum(const float *v, uint64_t vs, const float *a, uint64_t n, uint64_t k,
                           float *out)
{
    wsum_rows(v, vs, a, n, k, out, 0);
}

/* binary16 -> binary32 (vcvtph2ps: exact, baton_fp16_to_fp32's bits) */
T2 void baton_mm_avx2_f16_row(const void *src, float *dst, uint64_t n)
{
    const uint8_t *p = src;
    uint64_t i = 0;

    for (; n - i >= 8; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 2 * i))));
    if (i < n)
        baton_fp16_to_fp32_row(p + 2 * i, dst + i, n - i);
}

/* binary32 -> binary16 (vcvtps2ph, nearest even: baton_fp32_to_fp16's bits) */
T2 void baton_mm_avx2_f32_to_f16_row(const float *src, void *dst, uint64_t n)
{
    uint8_t *p = dst;
    uint64_t i = 0;

    for (; n - i >= 8; i += 8)
        _mm_storeu_si128((__m128i *)(p + 2 * i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    if (i < n)
        baton_fp32_to_fp16_row(src + i, p + 2 * i, n - i);
}

/* ---- exp, SILU (expf.h's steps on 4 binary64 lanes, as baton_cpu_expf) ---- */

static AI T2 __m128 exp4(__m128 x)
{
    const __m256d shift = _mm256_set1_pd(BATON_EXP_SHIFT);
    const __m256i low4 = _mm256_set1_epi64x(15);
    const __m256d xd = _mm256_min_pd(_mm256_max_pd(_mm256_cvtps_pd(x),
                                                   _mm256_set1_pd(BATON_EXP_X_MIN)),
                                     _mm256_set1_pd(BATON_EXP_X_MAX));
    const __m256d t =
        _mm256_add_pd(_mm256_mul_pd(xd, _mm256_set1_pd(BATON_EXP_INV_LN2_16)), shift);
    const __m256d kd = _mm256_sub_pd(t, shift);
    const __m256i ki = _mm256_sub_epi64(_mm256_castpd_si256(t), _mm256_castpd_si256(shift));
    const __m256d tj = _mm256_i64gather_pd(baton_exp_table, _mm256_and_si256(ki, low4), 8);
    const __m256d s = _mm256_castsi256_pd(_mm256_add_epi64(
        _mm256_castpd_si256(tj), _mm256_slli_epi64(_mm256_andnot_si256(low4, ki), 48)));
    __m256d r = _mm256_sub_pd(xd, _mm256_mul_pd(kd, _mm256_set1_pd(BATON_EXP_LN2_16_HI)));
    __m256d p = _mm256_set1_pd(BATON_EXP_C7);

    r = _mm256_sub_pd(r, _mm256_mul_pd(kd, _mm256_set1_pd(BATON_EXP_LN2_16_LO)));
    p = _mm256_add_pd(_mm256_mul_pd(p, r), _mm256_set1_pd(BATON_EXP_C6));
    p = _mm256_add_pd(_mm256_mul_pd(p, r), _mm256_set1_pd(BATON_EXP_C5));
    p = _mm256_add_pd(_mm256_mul_pd(p, r), _mm256_set1_pd(BATON_EXP_C4));
    p = _mm256_add_pd(_mm256_mul_pd(p, r), _mm256_set1_pd(BATON_EXP_C3));
    p = _mm256_add_pd(_mm256_mul_pd(p, r), _mm256_set1_pd(BATON_EXP_C2));
    p = _mm256_add_pd(_mm256_mul_pd(p, r), _mm256_set1_pd(1.0));
    p = _mm256_add_pd(_mm256_mul_pd(p, r), _mm256_set1_pd(1.0));
    return _mm256_cvtpd_ps(_mm256_mul_pd(s, p));
}

/* baton_cpu_expf on 8 lanes (NaN lanes: x + x). */
static AI T2 __m256 exp8(__m256 x)
{
    const __m256 y = _mm256_set_m128(exp4(_mm256_extractf128_ps(x, 1)),
                                     exp4(_mm256_castps256_ps128(x)));

    return _mm256_blendv_ps(y, _mm256_add_ps(x, x), _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

static T2 void avx2_silu(const float *x, float *y, uint64_t n)
{
    const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
    uint64_t i;

    for (i = 0; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        const __m256 e = exp8(_mm256_xor_ps(v, sign));

        _mm256_storeu_ps(y + i, _mm256_mul_ps(v, _mm256_div_ps(one, _mm256_add_ps(one, e))));
    }
    for (; i < n; i++)
        y[i] = x[i] * (1.0f / (1.0f + baton_cpu_expf(-x[i])));
}

/* GELU (matmul.h): z in the scalar order, then SILU's steps on it */
static T2 void avx2_gelu(const float *x, float *y, uint64_t n)
{
    const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
    const __m256 c = _mm256_set1_ps(BATON_GELU_C), a = _mm256_set1_ps(BATON_GELU_A);
    uint64_t i;

    for (i = 0; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        const __m256 t = _mm256_add_ps(one, _mm256_mul_ps(_mm256_mul_ps(a, v), v));
        const __m256 z = _mm256_mul_ps(_mm256_mul_ps(c, v), t);
        const __m256 e = exp8(_mm256_xor_ps(z, sign));

        _mm256_storeu_ps(y + i, _mm256_mul_ps(v, _mm256_div_ps(one, _mm256_add_ps(one, e))));
    }
    for (; i < n; i++) {
        const float v = x[i];
        const float z = BATON_GELU_C * v * (1.0f + BATON_GELU_A * v * v);

        y[i] = v * (1.0f / (1.0f + baton_cpu_expf(-z)));
    }
}

static T2 void avx2_exp_shift(float *x, uint64_t n, float m)
{
    const __m256 mv = _mm256_set1_ps(m);
    uint64_t i;

    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv)));
    for (; i < n; i++)
        x[i] = baton_cpu_expf(x[i] - m);
}

/* ---- ATTENTION, a block of up to 16 tokens of one head (matmul.h,
 * baton_cpu_att_block; matmul_avx512.c has the 16-lane form) ----
 * Lane c of a register is token 8 h + c of half h. Scores: the queries
 * transposed once, then 8 key rows at a time per half, each row's 8
 * scores one chain acc + q[i] * k[i] in ascending i from +0 (8 chains);
 * the softmax on the slot-major scores with a lane mask per slot (the
 * same scale, first maximum, exp, sum in ascending slots and divide as
 * each token alone); the weighted sums 4 tokens x 16 elements at a time
 * (8 chains), each value row's loads shared by the 4. Each token keeps its
 * order: the per-token path's bits. */
#define ATT2_ROWS 8

static AI T2 __m256i att2_lanes(uint64_t hd_left)
{
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);

    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int32_t)(hd_left < 8 ? hd_left : 8)), idx);
}

/* Scores of half h (work + 8 h, 16 floats a slot) for slots [s0, s0 + 8)
 * (past n - 1: row n - 1 read, not stored). */
static AI T2 void att2_scores8(const float *qt, const float *k, uint64_t hd, uint64_t s0,
                               uint64_t n, float *work)
{
    const float *kr[ATT2_ROWS];
    __m256 acc[ATT2_ROWS];
    uint64_t i;
    int r;

#pragma GCC unroll 8
    for (r = 0; r < ATT2_ROWS; r++) {
        kr[r] = k + (s0 + (uint64_t)r < n ? s0 + (uint64_t)r : n - 1) * hd;
        acc[r] = _mm256_setzero_ps();
    }
    for (i = 0; i < hd; i++) {
        const __m256 x = _mm256_loadu_ps(qt + 8 * i);

        acc[0] = _mm256_add_ps(acc[0], _mm256_mul_ps(x, _mm256_broadcast_ss(kr[0] + i)));
        acc[1] = _mm256_add_ps(acc[1], _mm256_mul_ps(x, _mm256_broadcast_ss(kr[1] + i)));
        acc[2] = _mm256_add_ps(acc[2], _mm256_mul_ps(x, _mm256_broadcast_ss(kr[2] + i)));
        acc[3] = _mm256_add_ps(acc[3], _mm256_mul_ps(x, _mm256_broadcast_ss(kr[3] + i)));
        acc[4] = _mm256_add_ps(acc[4], _mm256_mul_ps(x, _mm256_broadcast_ss(kr[4] + i)));
        acc[5] = _mm256_add_ps(acc[5], _mm256_mul_ps(x, _mm256_broadcast_ss(kr[5] + i)));
        acc[6] = _mm256_add_ps(acc[6], _mm256_mul_ps(x, _mm256_broadcast_ss(kr[6] + i)));
        acc[7] = _mm256_add_ps(acc[7], _mm256_mul_ps(x, _mm256_broadcast_ss(kr[7] + i)));
    }
#pragma GCC unroll 8
    for (r = 0; r < ATT2_ROWS; r++)
        if (s0 + (uint64_t)r < n)
            _mm256_storeu_ps(work + 16 * (s0 + (uint64_t)r), acc[r]);
}

/* The lanes whose slot count ns exceeds s (all ones), as floats. */
static AI T2 __m256 att2_in(__m256i ns, uint64_t s)
{
    return _mm256_castsi256_ps(_mm256_cmpgt_epi32(ns, _mm256_set1_epi32((int32_t)s)));
}

/* The softmax of half h's lanes (slot counts ns) over slots [0, n). */
static AI T2 void att2_softmax(const struct baton_att_block *b, float *w, __m256i ns, uint64_t n)
{
    const __m256 scale = _mm256_set1_ps(b->scale);
    __m256 m, sum = _mm256_setzero_ps();
    uint64_t s;

    for (s = 0; s < n; s++) {
        const __m256 x = _mm256_loadu_ps(w + 16 * s);

        _mm256_storeu_ps(w + 16 * s, b->divide ? _mm256_div_ps(x, scale) : _mm256_mul_ps(x, scale));
    }
    m = _mm256_loadu_ps(w);
    for (s = 1; s < n; s++) {
        const __m256 x = _mm256_loadu_ps(w + 16 * s);
        const __m256 in = att2_in(ns, s);

        m = _mm256_blendv_ps(m, x, _mm256_and_ps(in, _mm256_cmp_ps(x, m, _CMP_GT_OQ)));
    }
    for (s = 0; s < n; s++) {
        const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(w + 16 * s), m));
        const __m256 in = att2_in(ns, s);

        _mm256_storeu_ps(w + 16 * s, e);
        sum = _mm256_blendv_ps(sum, _mm256_add_ps(sum, e), in);
    }
    for (s = 0; s < n; s++)
        _mm256_storeu_ps(w + 16 * s, _mm256_div_ps(_mm256_loadu_ps(w + 16 * s), sum));
}

/* Elements [i, i + 8) of value row s, the lanes of tail (others 0;
 * binary16 rows converted exactly). */
static AI T2 __m256 att2_v8(const struct baton_att_block *b, uint64_t s, uint64_t i, __m256i tail,
                            int full, const int HALF)
{
    const uint64_t at = s * b->hd + i;

    if (HALF) {
        uint16_t h[8] = {0};

        if (full)
            return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)b->v + at)));
        memcpy(h, (const uint16_t *)b->v + at, 2 * (size_t)(b->hd - i));
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
    }
    return full ? _mm256_loadu_ps((const float *)b->v + at)
                : _mm256_maskload_ps((const float *)b->v + at, tail);
}

/* Weighted sums of tokens [c0, c0 + NT) over elements [i0, i0 + 8 NU) (the
 * last register's lanes by tail): slots [0, lo) for all, then each token's
 * own rest. */
static AI T2 void att2_wsum(const struct baton_att_block *b, uint32_t c0, uint64_t i0,
                            __m256i tail, uint64_t lo, const int NT, const int NU,
                            const int HALF)
{
    const int full = b->hd - i0 >= 8 * (uint64_t)NU; /* the last register whole */
    __m256 acc[4][2];
    uint64_t s;
    int t, u;

#pragma GCC unroll 4
    for (t = 0; t < NT; t++)
#pragma GCC unroll 2
        for (u = 0; u < NU; u++)
            acc[t][u] = _mm256_setzero_ps();
    for (s = 0; s < lo; s++) {
        __m256 x[2];

#pragma GCC unroll 2
        for (u = 0; u < NU; u++)
            x[u] = att2_v8(b, s, i0 + 8 * (uint64_t)u, tail, u + 1 < NU || full, HALF);
#pragma GCC unroll 4
        for (t = 0; t < NT; t++) {
            const __m256 a = _mm256_broadcast_ss(b->work + 16 * s + c0 + (uint32_t)t);

#pragma GCC unroll 2
            for (u = 0; u < NU; u++)
                acc[t][u] = _mm256_add_ps(acc[t][u], _mm256_mul_ps(a, x[u]));
        }
    }
#pragma GCC unroll 4
    for (t = 0; t < NT; t++) {
        const uint32_t c = c0 + (uint32_t)t;
        float *o = b->out + c * b->os + i0;

        for (s = lo; s < b->n_slots[c]; s++) {
            const __m256 a = _mm256_broadcast_ss(b->work + 16 * s + c);

#pragma GCC unroll 2
            for (u = 0; u < NU; u++)
                acc[t][u] = _mm256_add_ps(
                    acc[t][u],
                    _mm256_mul_ps(a, att2_v8(b, s, i0 + 8 * (uint64_t)u, tail,
                                             u + 1 < NU || full, HALF)));
        }
#pragma GCC unroll 2
        for (u = 0; u < NU; u++) {
            if (u + 1 < NU || full)
                _mm256_storeu_ps(o + 8 * u, acc[t][u]);
            else
                _mm256_maskstore_ps(o + 8 * u, tail, acc[t][u]);
        }
    }
}

static AI T2 void att2_wsum_tokens(const struct baton_att_block *b, uint32_t c0, const int NT,
                                   const int HALF)
{
    const uint64_t hd = b->hd, lo = baton_att_block_min_slots(b, c0, (uint32_t)NT);
    uint64_t i0;

    for (i0 = 0; hd - i0 >= 16; i0 += 16)
        att2_wsum(b, c0, i0, att2_lanes(8), lo, NT, 2, HALF);
    for (; i0 < hd; i0 += 8)
        att2_wsum(b, c0, i0, att2_lanes(hd - i0), lo, NT, 1, HALF);
}

static T2 void avx2_att_block(const struct baton_att_block *b)
{
    float qt[2][BATON_CPU_ATT_HD_MAX * 8];
    int32_t nsl[16];
    const uint64_t hd = b->hd;
    uint64_t n = 0, nh_n[2] = {0, 0}, s, i;
    uint32_t c, h;

    for (c = 0; c < 16; c++) {
        const uint64_t nc = c < b->nx ? b->n_slots[c] : 0;

        nsl[c] = (int32_t)nc; /* < 2^31 (matmul.h) */
        if (nc > nh_n[c / 8])
            nh_n[c / 8] = nc;
        for (i = 0; i < hd; i++)
            qt[c / 8][8 * i + c % 8] = c < b->nx ? b->q[c * b->qs + i] : 0.0f;
    }
    n = nh_n[0] > nh_n[1] ? nh_n[0] : nh_n[1];
    for (s = 0; s < n; s += BATON_CPU_ATT_CONV_ROWS) {
        /* F32 key rows in place; binary16 ones a window at a time
         * converted exactly */
        const uint64_t wn = n - s < BATON_CPU_ATT_CONV_ROWS ? n - s : BATON_CPU_ATT_CONV_ROWS;
        const float *k = b->half ? b->conv : (const float *)b->k + s * hd;

        if (b->half)
            baton_mm_avx2_f16_row((const uint16_t *)b->k + s * hd, b->conv, wn * hd);
        for (h = 0; h < 2 && 8 * h < b->nx; h++)
            for (i = 0; i < wn; i += ATT2_ROWS)
                att2_scores8(qt[h], k, hd, i, wn, b->work + 16 * s + 8 * h);
    }
    for (h = 0; h < 2 && 8 * h < b->nx; h++)
        att2_softmax(b, b->work + 8 * h, _mm256_loadu_si256((const __m256i *)(nsl + 8 * h)), n);
    /* the cache type fixed per call, out of the loads */
    for (c = 0; b->nx - c >= 4; c += 4)
        b->half ? att2_wsum_tokens(b, c, 4, 1) : att2_wsum_tokens(b, c, 4, 0);
    for (; c < b->nx; c++)
        b->half ? att2_wsum_tokens(b, c, 1, 1) : att2_wsum_tokens(b, c, 1, 0);
}

/* ---- K-quants: exact integer sums per super-block, then matmul.h's two
 * fused multiply-adds per super-block, as the scalar kernel ----
 *
 * A super-block is 8 chunks of 32 elements, one register each. The
 * weights are read as unsigned bytes Qw + bias (0..63); vpmaddubsw
 * multiplies them by the int8 activations and adds pairs into int16
 * (|.| <= 2 * 63 * 127 = 16002: no saturation), a vphaddw adds pairs of
 * those of two chunks (|.| <= 32004: no wrap), and vpmaddwd multiplies
 * them by the int16 group scale of their lane and adds pairs into int32:
 * one vpmaddwd per two chunks (Zen 1 runs vpmaddubsw and vpmaddwd on one
 * pipe; measured faster there). The bias term (bias * sum_i sc_i *
 * bsums_i) and the mins' sum come from the activations' bsums with one
 * more vpmaddwd. Every intermediate fits its lanes, so the sums equal the
 * scalar kernel's integers exactly, whatever order they are added in.
 * IQ4_XS: its grid levels, biased by 128, would saturate vpmaddubsw (2 *
 * 241 * 127), so this level reads them signed (-127..113) and takes them
 * by the sign trick, |Qw| times x with Qw's sign (pair sums <= 2 * 127 *
 * 127 = 32258; no bias, no correction), and each chunk's int16 sums go to
 * one vpmaddwd by its own sub-block's scale (two of them would overflow a
 * vphaddw). */

#define K_COLS 8u /* columns sharing one decode of a weight super-block */

/* fma(a, b, c), one rounding (vfmadd231ss: the target has FMA, so the
 * builtin is the instruction, never a call; _mm_set_ss would add a lane
 * clearing step to the chain) */
static AI T2 float k_fma(float a, float b, float c)
{
    return __builtin_fmaf(a, b, c);
}

/* Lane j = the sum of the 8 lanes of v[j], j = 0..7. */
static AI T2 __m256i k_hsum8x(const __m256i v[8])
{
    /* unpacks and adds (vphaddd is about 2 cycles per instruction on Zen 4,
     * these are 0.5): integers, so the grouping does not matter */
    const __m256i s01 = _mm256_add_epi32(_mm256_unpacklo_epi32(v[0], v[1]),
                                         _mm256_unpackhi_epi32(v[0], v[1]));
    const __m256i s23 = _mm256_add_epi32(_mm256_unpacklo_epi32(v[2], v[3]),
                                         _mm256_unpackhi_epi32(v[2], v[3]));
    const __m256i s45 = _mm256_add_epi32(_mm256_unpacklo_epi32(v[4], v[5]),
                                         _mm256_unpackhi_epi32(v[4], v[5]));
    const __m256i s67 = _mm256_add_epi32(_mm256_unpacklo_epi32(v[6], v[7]),
                                         _mm256_unpackhi_epi32(v[6], v[7]));
    /* per 128-bit half: lane j = the half's sum of v[j] (resp. v[4 + j]) */
    const __m256i u0 = _mm256_add_epi32(_mm256_unpacklo_epi64(s01, s23),
                                        _mm256_unpackhi_epi64(s01, s23));
    const __m256i u1 = _mm256_add_epi32(_mm256_unpacklo_epi64(s45, s67),
                                        _mm256_unpackhi_epi64(s45, s67));

    /* [u0.lo, u1.lo] + [u0.hi, u1.hi] by 128-bit inserts: vperm2i128 is
     * about 5 cycles per instruction on Zen 1 (two lane moves, about 1) */
    return _mm256_add_epi32(_mm256_inserti128_si256(u0, _mm256_castsi256_si128(u1), 1),
                            _mm256_inserti128_si256(u1, _mm256_extracti128_si256(u0, 1), 0));
}

static AI T2 __m256i k_srl(__m256i v, int n)
{
    return _mm256_srl_epi16(v, _mm_cvtsi32_si128(n));
}

/* Bit `from` of each byte of v moved to bit `to` (and its neighbours
 * alike) by one 16-bit shift, none when they are equal: the shift pipe is
 * Zen 1's limit in the high-bit unpacking. Bits moved across bytes are the
 * caller's to mask off. */
static AI T2 __m256i k_move_bits(__m256i v, int from, int to)
{
    return from < to   ? _mm256_sll_epi16(v, _mm_cvtsi32_si128(to - from))
           : from > to ? k_srl(v, from - to)
                       : v;
}

/* Unsigned quant bytes (Qw + bias) of elements 32t..32t+31 (IQ4_XS: Qw,
 * signed). */
static AI T2 __m256i k_chunk(uint32_t type, const uint8_t *wb, int t)
{
    const __m256i m3 = _mm256_set1_epi8(3), m15 = _mm256_set1_epi8(15);
    const int h = t / 4, g = t % 4;

    switch (type) {
    case BATON_TYPE_Q2_K:
        return _mm256_and_si256(
            k_srl(_mm256_loadu_si256((const __m256i *)(wb + 16 + 32 * h)), 2 * g), m3);
    case BATON_TYPE_Q3_K: {
        const __m256i lo = _mm256_and_si256(
            k_srl(_mm256_loadu_si256((const __m256i *)(wb + 32 + 32 * h)), 2 * g), m3);
        /* bit t of each hmask byte moved to bit 2 */
        const __m256i hb = _mm256_and_si256(
            k_move_bits(_mm256_loadu_si256((const __m256i *)wb), t, 2), _mm256_set1_epi8(4));

        return _mm256_add_epi8(lo, hb);
    }
    case BATON_TYPE_Q4_K:
    case BATON_TYPE_Q5_K: {
        const uint8_t *qs = wb + (type == BATON_TYPE_Q4_K ? 16 : 48);
        __m256i q = _mm256_and_si256(
            k_srl(_mm256_loadu_si256((const __m256i *)(qs + 32 * (t / 2))), 4 * (t % 2)), m15);

        if (type == BATON_TYPE_Q5_K) {
            /* bit t of each qh byte moved to bit 4 */
            const __m256i hb =
                _mm256_and_si256(k_move_bits(_mm256_loadu_si256((const __m256i *)(wb + 16)), t, 4),
                                 _mm256_set1_epi8(16));

            q = _mm256_add_epi8(q, hb);
        }
        return q;
    }
    case BATON_TYPE_IQ4_XS: { /* signed levels: sub-block t, as one IQ4_NL block */
        const __m128i b = _mm_loadu_si128((const __m128i *)(wb + 8 + 16 * t));

        return _mm256_shuffle_epi8(
            _mm256_broadcastsi128_si256(k_iq4_grid()),
            _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), m15));
    }
    default: { /* Q6_K: t = 4h + g, g the quarter of the half */
        const __m256i b = _mm256_loadu_si256((const __m256i *)(wb + 64 * h + 32 * (g % 2)));
        const __m256i lo4 = _mm256_and_si256(k_srl(b, 4 * (g / 2)), m15);
        /* bits 2g, 2g + 1 of each qh byte moved to bits 4, 5 */
        const __m256i hi2 = _mm256_and_si256(
            k_move_bits(_mm256_loadu_si256((const __m256i *)(wb + 128 + 32 * h)), 2 * g, 4),
            _mm256_set1_epi8(0x30));

        return _mm256_or_si256(lo4, hi2);
    }
    }
}

/* Chunks t and t + 1 (t even), as k_chunk. Q4_K's and Q5_K's share their
 * 32 quant bytes (low and high nibbles): loaded once into a register (the
 * empty asm keeps the compiler from folding a second load into the and). */
static AI T2 void k_chunk2(uint32_t type, const uint8_t *wb, int t, __m256i *c0, __m256i *c1)
{
    if (type == BATON_TYPE_Q4_K) {
        const __m256i m15 = _mm256_set1_epi8(15);
        __m256i raw = _mm256_loadu_si256((const __m256i *)(wb + 16 + 16 * t));

        __asm__("" : "+x"(raw));
        *c0 = _mm256_and_si256(raw, m15);
        *c1 = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m15);
        return;
    }
    *c0 = k_chunk(type, wb, t);
    *c1 = k_chunk(type, wb, t + 1);
}

/* The int16 scale factors of chunks t and t + 1 (elements 32t..32t+63)
 * from the 16 scale bytes sc2 (k_scales_v's, in both halves), for the
 * vphaddw of the two chunks' vpmaddubsw sums: half h of that holds, in
 * int16 lanes 0..3, group 2t + h's pair sums, in lanes 4..7 group
 * 2t + 2 + h's. Q2_K, Q4_K and Q5_K scales are unsigned: one vpshufb
 * zero-extends them (index 0x80 clears the high byte); Q3_K's and Q6_K's
 * are signed: the byte goes to the high half, then an arithmetic shift. */
static AI T2 __m256i k_sv2(uint32_t type, __m256i sc2, int t)
{
    const char g = (char)(2 * t);
    const char a = g, b = (char)(g + 2), c = (char)(g + 1), d = (char)(g + 3);

    if (type == BATON_TYPE_Q2_K || type == BATON_TYPE_Q4_K || type == BATON_TYPE_Q5_K)
        return _mm256_shuffle_epi8(
            sc2, _mm256_setr_epi8(a, -128, a, -128, a, -128, a, -128, b, -128, b, -128, b, -128,
                                  b, -128, c, -128, c, -128, c, -128, c, -128, d, -128, d, -128,
                                  d, -128, d, -128));
    return _mm256_srai_epi16(
        _mm256_shuffle_epi8(sc2, _mm256_setr_epi8(-128, a, -128, a, -128, a, -128, a, -128, b,
                                                  -128, b, -128, b, -128, b, -128, c, -128, c,
                                                  -128, c, -128, c, -128, d, -128, d, -128, d,
                                                  -128, d)),
        8);
}

/* The scale factors of chunks t and t + 1 for k_dot2: *s0 = k_sv2's (s1
 * unused), or for IQ4_XS chunk t's int16 scale in every lane (*s0) and
 * chunk t + 1's (*s1). */
static AI T2 void k_svs(uint32_t type, __m256i sc2, int t, __m256i *s0, __m256i *s1)
{
    if (type == BATON_TYPE_IQ4_XS) {
        /* group 2t's byte (sub-block t's) to the high byte of each word,
         * then down with its sign */
        *s0 = _mm256_srai_epi16(
            _mm256_shuffle_epi8(sc2, _mm256_set1_epi16((short)((2 * t) << 8 | 0x80))), 8);
        *s1 = _mm256_srai_epi16(
            _mm256_shuffle_epi8(sc2, _mm256_set1_epi16((short)((2 * t + 2) << 8 | 0x80))), 8);
        return;
    }
    *s0 = k_sv2(type, sc2, t);
    *s1 = *s0;
}

/* Chunks t and t + 1 (wq c0, c1) against their 64 activations at xb: 8
 * int32 lanes of their share of isum (scales s0, s1 from k_svs). */
static AI T2 __m256i k_dot2(uint32_t type, __m256i c0, __m256i c1, const uint8_t *xb, __m256i s0,
                            __m256i s1)
{
    const __m256i x0 = _mm256_loadu_si256((const __m256i *)xb);
    const __m256i x1 = _mm256_loadu_si256((const __m256i *)(xb + 32));

    if (type == BATON_TYPE_IQ4_XS)
        return _mm256_add_epi32(
            _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(c0), _mm256_sign_epi8(x0, c0)),
                              s0),
            _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(c1), _mm256_sign_epi8(x1, c1)),
                              s1));
    return _mm256_madd_epi16(
        _mm256_hadd_epi16(_mm256_maddubs_epi16(c0, x0), _mm256_maddubs_epi16(c1, x1)), s0);
}

/* The scales of the super-block at wb in both halves of *sc2, *corr the
 * int16 factors of its 16 bsums; returns the bias (IQ4_XS: 0, its quants
 * read signed). */
static AI T2 int k_scales2(uint32_t type, const uint8_t *wb, __m256i *sc2, __m256i *corr)
{
    __m128i scb;
    __m256i mn;
    const int bias = type == BATON_TYPE_IQ4_XS ? (k_scales_v(type, wb, &scb, &mn), 0)
                                               : k_scales_v(type, wb, &scb, &mn);

    *sc2 = _mm256_broadcastsi128_si256(scb);
    if (bias)
        *corr = _mm256_mullo_epi16(_mm256_cvtepi8_epi16(scb), _mm256_set1_epi16((short)-bias));
    else
        *corr = mn;
    return bias;
}

/* The unpacked weights wq and spread scales sv (k_svs of chunks 2t,
 * 2t + 1 in sv[2t], sv[2t + 1]) of the super-block at wb, *corr the int16
 * factors of its 16 bsums; returns the bias. */
static AI T2 int k_prep(uint32_t type, const uint8_t *wb, __m256i wq[8], __m256i sv[8],
                        __m256i *corr)
{
    __m256i sc2;
    const int bias = k_scales2(type, wb, &sc2, corr);
    int t;

#pragma GCC unroll 4
    for (t = 0; t < 4; t++) {
        k_chunk2(type, wb, 2 * t, &wq[2 * t], &wq[2 * t + 1]);
        k_svs(type, sc2, 2 * t, &sv[2 * t], &sv[2 * t + 1]);
    }
    return bias;
}

/* dw[j] = the binary16 d | dmin << 16 of super-block j (j = 0..7): *d
 * and *dmin, lane j. */
static AI T2 void k_dmin8(const uint32_t dw[8], __m256 *d, __m256 *dmin)
{
    const __m256i dd = _mm256_setr_epi32((int)dw[0], (int)dw[1], (int)dw[2], (int)dw[3],
                                         (int)dw[4], (int)dw[5], (int)dw[6], (int)dw[7]);
    const __m256i lo = _mm256_and_si256(dd, _mm256_set1_epi32(0xFFFF));
    const __m256i hi = _mm256_srli_epi32(dd, 16);

    /* the 8 halves in order (values <= 0xFFFF: the packs are exact) */
    *d = _mm256_cvtph_ps(
        _mm_packus_epi32(_mm256_castsi256_si128(lo), _mm256_extracti128_si256(lo, 1)));
    *dmin = _mm256_cvtph_ps(
        _mm_packus_epi32(_mm256_castsi256_si128(hi), _mm256_extracti128_si256(hi, 1)));
}

#define K_GROUP 8u

/* The float operands of a group of super-blocks, lane t for super-block
 * t: a = d * dx, i = (float)isum, b = -(dmin * dx), m = (float)msum. */
struct k_fl {
    __m256 a, i, b, m;
};

/* Group f's operands as scalars (p[0..3] = a, i, b, m), stored once per
 * group rather than once per chain step. */
static AI T2 void k_fl_store(const struct k_fl *f, float p[4][K_GROUP])
{
    _mm256_storeu_ps(p[0], f->a);
    _mm256_storeu_ps(p[1], f->i);
    _mm256_storeu_ps(p[2], f->b);
    _mm256_storeu_ps(p[3], f->m);
}

/* Super-block t's steps of the chain, from k_fl_store's scalars. */
static AI T2 float k_chain(const float p[4][K_GROUP], uint32_t t, int has_min, float acc)
{
    acc = k_fma(p[0][t], p[1][t], acc);
    if (has_min)
        acc = k_fma(p[2][t], p[3][t], acc);
    return acc;
}

/* The float chain of a decode call's current row: acc, that row's index in
 * y (column 0). */
struct k_chain_state {
    float acc;
    uint64_t row;
    float *y;
};

/* Where a decode call's sequence of super-blocks stands: block s of row
 * `row` (counted from the call's first), whose weights start at wrow. */
struct k_cursor {
    const uint8_t *wrow, *act;
    uint64_t s, nsb, row, row_bytes;
};

/* Super-block t's chain steps (k_chain); bit t of starts set: t is the
 * first super-block of a row after the call's first, so the row before it
 * is done. */
static AI T2 void k_chain_step(struct k_chain_state *st, const float p[4][K_GROUP], uint32_t t,
                               uint32_t starts, int has_min)
{
    if (starts >> t & 1u) {
        st->y[st->row++] = st->acc;
        st->acc = 0.0f;
    }
    st->acc = k_chain(p, t, has_min, st->acc);
}

/* Decode, as the AVX-512 level's k_group1 (matmul_avx512.c): the nt
 * super-blocks at the cursor against the column at cur->act, the cursor
 * advanced past them, their lanes summed across 8 at a time into *out,
 * the previous group's chain steps (np super-blocks, row starts pstarts)
 * done on *st between them; *starts gets this group's row starts. flat
 * (a constant): the group may span rows; else it lies in one row (nsb a
 * multiple of K_GROUP), which saves the cursor's step per super-block
 * (about 4 % on rows of k 4096). Same bits. */
static AI T2 void k_group1(uint32_t type, struct k_cursor *cur, uint32_t nt,
                           const struct k_fl *prev, uint32_t np, uint32_t pstarts,
                           uint32_t *starts, struct k_chain_state *st, struct k_fl *out,
                           const int flat)
{
    uint32_t bbytes, t;
    int d_off, dmin_off, q;
    __m256i is[K_GROUP], ms[K_GROUP];
    uint32_t dw[K_GROUP];
    float dxs[K_GROUP], pf[4][K_GROUP];
    __m256i sc2n = _mm256_setzero_si256(), corrn = _mm256_setzero_si256();
    int biasn = 0;

    k_layout(type, &bbytes, &d_off, &dmin_off);
    k_fl_store(prev, pf);
    /* not flat: the group lies in one row (nsb % K_GROUP == 0) */
    *starts = !flat && cur->s == 0 && cur->row > 0;
    if (nt > 0 && type != BATON_TYPE_Q3_K)
        biasn = k_scales2(type, cur->wrow + cur->s * bbytes, &sc2n, &corrn);
    for (t = 0; t < K_GROUP; t++) {
        if (t < nt) {
            const uint64_t sb = flat ? cur->s : cur->s + t;
            const uint8_t *wb = cur->wrow + sb * bbytes;
            const uint8_t *xb = cur->act + sb * BATON_ACT_K_BLOCK_BYTES;
            uint16_t h[2] = {0, 0};
            __m256i sc2 = sc2n, corr = corrn, m, a;
            int bias = biasn;

            /* the next super-block's scales, one ahead (Q3_K's longer
             * decode lost 2-5 % that way: in place) */
            if (type == BATON_TYPE_Q3_K)
                bias = k_scales2(type, wb, &sc2, &corr);
            if (flat) {
                if (cur->s == 0 && cur->row > 0)
                    *starts |= 1u << t;
                if (++cur->s == cur->nsb) {
                    cur->s = 0;
                    cur->row++;
                    cur->wrow += cur->row_bytes;
                }
            }
            if (type != BATON_TYPE_Q3_K && t + 1 < nt)
                biasn = k_scales2(type, flat ? cur->wrow + cur->s * bbytes : wb + bbytes, &sc2n,
                                  &corrn);
            /* see BATON_MM_DECODE_PF_BYTES: the super-block's bytes
             * rounded up to lines, which with the next super-block's
             * (contiguous) covers every line; one group's 18 lines at
             * once held the loop at the prefetches */
            baton_mm_decode_prefetch(wb, (int)((bbytes + 63) / 64));

            m = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(xb + 256)), corr);
            a = bias ? m : _mm256_setzero_si256();
            /* chunk by chunk (one column: nothing to keep; unpacking all
             * eight first, as k_row does for its columns, spilled) */
#pragma GCC unroll 4
            for (q = 0; q < 8; q += 2) {
                __m256i c0, c1, s0, s1;

                k_chunk2(type, wb, q, &c0, &c1);
                k_svs(type, sc2, q, &s0, &s1);
                a = _mm256_add_epi32(a, k_dot2(type, c0, c1, xb + 32 * q, s0, s1));
            }
            is[t] = a;
            ms[t] = m;
            memcpy(&h[0], wb + d_off, sizeof(h[0]));
            if (dmin_off >= 0)
                memcpy(&h[1], wb + dmin_off, sizeof(h[1]));
            dw[t] = (uint32_t)h[0] | (uint32_t)h[1] << 16;
            memcpy(&dxs[t], xb + 288, sizeof(float));
        } else {
            is[t] = ms[t] = _mm256_setzero_si256();
            dw[t] = 0;
            dxs[t] = 0.0f;
        }
        if (t < np)
            k_chain_step(st, pf, t, pstarts, dmin_off >= 0);
    }
    if (!flat && (cur->s += nt) == cur->nsb) {
        cur->s = 0;
        cur->row++;
        cur->wrow += cur->row_bytes;
    }
    {
        const __m256 dx = _mm256_setr_ps(dxs[0], dxs[1], dxs[2], dxs[3], dxs[4], dxs[5], dxs[6],
                                         dxs[7]);
        __m256 d8, m8;

        k_dmin8(dw, &d8, &m8);
        out->a = _mm256_mul_ps(d8, dx);
        out->i = _mm256_cvtepi32_ps(k_hsum8x(is));
        if (dmin_off >= 0) {
            /* -(dmin * dx): the negation is exact */
            out->b = _mm256_xor_ps(_mm256_mul_ps(m8, dx), _mm256_set1_ps(-0.0f));
            out->m = _mm256_cvtepi32_ps(k_hsum8x(ms));
        } else {
            out->b = out->m = _mm256_setzero_ps();
        }
    }
}

/* Rows per decode call: a divisor of matmul.c's row unit (16), so only a
 * matrix's last rows go one at a time. */
#define K_DEC_ROWS 8u

/* Decode: rows [r, r + nr) against column 0, their super-blocks taken in
 * order as one sequence, K_GROUP at a time (a group may end one row and
 * begin the next: rows of k 768 fill whole groups), each group's chain
 * steps done during the next group's integer work. Alone, a row's last
 * group's chain steps (16 dependent FMAs) cost about a tenth of a row at
 * k 4096; a partial group per row of 3 super-blocks cost its sums and
 * conversions for 3. */
static AI T2 void k_rows1(const struct baton_mm *mm, uint64_t r, uint32_t nr, uint32_t type)
{
    const uint64_t nsb = mm->k / BATON_QK_K, total = nr * nsb;
    uint32_t bbytes, np = 0, pstarts = 0, starts, t;
    int d_off, dmin_off;
    uint64_t u;
    float p[4][K_GROUP];
    struct k_fl f[2];
    struct k_chain_state st = {0.0f, r, mm->y};
    struct k_cursor cur = {mm->w + r * mm->w_row_bytes, mm->act, 0, nsb, 0, mm->w_row_bytes};

    f[0].a = f[0].i = f[0].b = f[0].m = _mm256_setzero_ps();
    k_layout(type, &bbytes, &d_off, &dmin_off);
    for (u = 0; u < total; u += K_GROUP) {
        const uint32_t nt = total - u >= K_GROUP ? K_GROUP : (uint32_t)(total - u);

        if (nsb % K_GROUP == 0) /* the same groups, fewer steps */
            k_group1(type, &cur, nt, &f[0], np, pstarts, &starts, &st, &f[1], 0);
        else
            k_group1(type, &cur, nt, &f[0], np, pstarts, &starts, &st, &f[1], 1);
        f[0] = f[1];
        np = nt;
        pstarts = starts;
    }
    k_fl_store(&f[0], p);
    for (t = 0; t < np; t++)
        k_chain_step(&st, p, t, pstarts, dmin_off >= 0);
    mm->y[st.row] = st.acc;
}

/* Row r of K weights for columns [c, c + nc), nc <= K_COLS. */
static AI T2 void k_row(const struct baton_mm *mm, uint64_t r, uint64_t c, uint32_t nc,
                        uint32_t type)
{
    const uint64_t nsb = mm->k / BATON_QK_K;
    uint32_t bbytes;
    int d_off, dmin_off, t;
    uint64_t s;
    uint32_t j;
    float acc[K_COLS];
    /* every column's sums of one super-block, then the float steps in
     * lane j; the lanes of absent columns (j >= nc) stay zero, set once
     * here and only for them: zeroing all 8 per super-block (a rep stos
     * of 2 x 256 bytes) was a fifth of the Q4_K prefill's time on Zen 1 */
    __m256i is[K_COLS], ms[K_COLS];
    float dxs[K_COLS];
    __m256 accv = _mm256_setzero_ps();

    if (nc == 1) {
        /* the one-column path of the decode (same bits either way) */
        const struct baton_mm one = {
            mm->w, mm->w_row_bytes, mm->x, mm->act + c * mm->act_col_bytes, mm->act_col_bytes,
            mm->y + c * mm->ldy, mm->k, mm->n, 1, mm->ldy,
        };

        k_rows1(&one, r, 1, type);
        return;
    }
    k_layout(type, &bbytes, &d_off, &dmin_off);
    for (j = nc; j < K_COLS; j++) {
        is[j] = ms[j] = _mm256_setzero_si256();
        dxs[j] = 0.0f;
    }
    for (s = 0; s < nsb; s++) {
        const uint8_t *wb = mm->w + r * mm->w_row_bytes + s * bbytes;
        const float d = h2f(wb + d_off), dmin = dmin_off >= 0 ? h2f(wb + dmin_off) : 0.0f;
        __m256i wq[8], sv[8], corr;
        const int bias = k_prep(type, wb, wq, sv, &corr);
        __m256 dxv;

        for (j = 0; j < nc; j++) {
            const uint8_t *xb =
                mm->act + (c + j) * mm->act_col_bytes + s * BATON_ACT_K_BLOCK_BYTES;
            const __m256i m =
                _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(xb + 256)), corr);
            __m256i a = bias ? m : _mm256_setzero_si256();

#pragma GCC unroll 4
            for (t = 0; t < 8; t += 2)
                a = _mm256_add_epi32(a,
                                     k_dot2(type, wq[t], wq[t + 1], xb + 32 * t, sv[t], sv[t + 1]));
            is[j] = a;
            ms[j] = m;
            memcpy(&dxs[j], xb + 288, sizeof(float));
        }
        /* not a vector load of the 8 scalar stores (a store-forwarding
         * stall) */
        dxv = _mm256_setr_ps(dxs[0], dxs[1], dxs[2], dxs[3], dxs[4], dxs[5], dxs[6], dxs[7]);
        accv = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(d), dxv),
                               _mm256_cvtepi32_ps(k_hsum8x(is)), accv);
        if (dmin_off >= 0)
            accv = _mm256_fnmadd_ps(_mm256_mul_ps(_mm256_set1_ps(dmin), dxv),
                                    _mm256_cvtepi32_ps(k_hsum8x(ms)), accv);
    }
    _mm256_storeu_ps(acc, accv);
    for (j = 0; j < nc; j++)
        mm->y[(c + j) * mm->ldy + r] = acc[j];
}

#define K_ROW_DECODE(name, type)                                                                   \
    static T2 void name##_row(const struct baton_mm *mm, uint64_t r, uint64_t c, uint32_t nc)      \
    {                                                                                              \
        k_row(mm, r, c, nc, type);                                                                 \
    }                                                                                              \
    static T2 void name##_decode(const struct baton_mm *mm, uint64_t r)                            \
    {                                                                                              \
        k_rows1(mm, r, K_DEC_ROWS, type);                                                          \
    }
#define K_DRIVE(name, tiles)                                                                       \
    static T2 void avx2_##name(const struct baton_mm *mm, uint64_t r0, uint64_t r1)                \
    {                                                                                              \
        baton_mm_drive(mm, r0, r1, &tiles);                                                        \
    }
#define K_KERNELS(name, type)                                                                      \
    K_ROW_DECODE(name, type)                                                                       \
    static const struct baton_mm_tiles name##_tiles = {                                            \
        name##_decode, K_DEC_ROWS, name##_row, 1, K_COLS, name##_row, 0,                           \
    };                                                                                             \
    K_DRIVE(name, name##_tiles)

K_KERNELS(q2_k, BATON_TYPE_Q2_K)
K_KERNELS(q3_k, BATON_TYPE_Q3_K)
K_KERNELS(q6_k, BATON_TYPE_Q6_K)
K_KERNELS(iq4_xs, BATON_TYPE_IQ4_XS)

/* ---- AVX2 K-quant prefill panels (Q4_K, Q5_K): 8 rows, one per 32-bit
 * lane ----
 *
 * k_row keeps one row per register: per super-block and column 8
 * vpmaddubsw, 4 vphaddw and 5 vpmaddwd, then a share of the cross-lane sum
 * (k_hsum8x); Zen 1 runs vpmaddubsw and vpmaddwd on one pipe, and that
 * pipe is the limit. A panel turns the register around, as the AVX-512
 * panels do (matmul_avx512.c, k_panels): lane i holds row i of 8
 * consecutive rows. Register w[t][e] holds the 4 unsigned quants of
 * elements 32t + 4e..32t + 4e + 3 (sub-block t) of each row; the column's
 * 4 activation bytes of those elements are broadcast to every lane, so
 * one vpmaddubsw gives each row two int16 sums of 2 products, all of one
 * sub-block. Runs of kp_run of them are added in int16 (the activations
 * are in [-127, 127]: Q4_K 8 x 2 x 15 x 127 = 30480, Q5_K 4 x 2 x 31 x
 * 127 = 31496; no wrap) and one vpmaddwd by the rows' sub-block scales
 * (both int16 halves of lane i: row i's) leaves lane i with Sc times the
 * run's sum, in int32. Per super-block and column, for 8 rows: 64
 * vpmaddubsw and 8 (Q4_K) or 16 (Q5_K) vpmaddwd, where the tile took 104
 * operations on that pipe, and no cross-lane sum. The mins: the column's
 * 16 bsums added in pairs (one vphaddw: the 8 sub-blocks' sums, |.| <= 32
 * * 127) and 4 vpmaddwd by the rows' pairs of mins. The rows' super-block
 * is unpacked and transposed into struct kp_sb once for up to KP_COLS
 * columns: 128-bit halves of rows i and i + 4 in one register, then 4 x 4
 * transposes of 32-bit lanes within each half (no lane-crossing shuffle:
 * about 5 cycles each on Zen 1). Same bits: isum and msum are exact
 * integers whatever their grouping, and lane i does row i's float steps of
 * k_row in the same order (d * dx, then fma; dmin * dx, then fnma).
 * Q6_K stays on k_row: its 6-bit quants allow only 2 vpmaddubsw per
 * vpmaddwd (2 x 2 x 63 x 127 = 32004), 104 operations on the pipe as in
 * the tile, and a variant with signed quants (|Qw| by x with Qw's sign,
 * runs of 4) was no faster either (vpsignb per product; bench_kernels,
 * Zen 1: 26-35 GFLOP/s against the tile's 31-34). */

#define KP_COLS 64u /* columns per panel (t->cols) */
#define KP_MIN_M 1u /* up to this many columns the rows go by k_row (t->row_max_m) */

struct kp_sb {
    __m256i w[8][8]; /* [t][e]: lane i = row i's quants 32t + 4e..32t + 4e + 3 */
    __m256i sc[8];   /* [t]: lane i = row i's scale of sub-block t, in both int16 halves */
    __m256i mn[4];   /* [h]: lane i = row i's mins of sub-blocks 2h, 2h + 1 (int16) */
    __m256 d, dmin; /* lane i: row i's d, dmin */
};

/* vpmaddubsw sums added in int16 per vpmaddwd (see above): a sub-block's
 * 8 (Q4_K) or half of them (Q5_K) */
static AI int kp_run(uint32_t type)
{
    return type == BATON_TYPE_Q4_K ? 8 : 4;
}

/* 4 x 4 transpose of the 32-bit lanes within each 128-bit half: half h of
 * out[e] = lane e of half h of in[0..3]. */
static AI T2 void kp_t4(const __m256i in[4], __m256i out[4])
{
    const __m256i t0 = _mm256_unpacklo_epi32(in[0], in[1]);
    const __m256i t1 = _mm256_unpackhi_epi32(in[0], in[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(in[2], in[3]);
    const __m256i t3 = _mm256_unpackhi_epi32(in[2], in[3]);

    out[0] = _mm256_unpacklo_epi64(t0, t2);
    out[1] = _mm256_unpackhi_epi64(t0, t2);
    out[2] = _mm256_unpacklo_epi64(t1, t3);
    out[3] = _mm256_unpackhi_epi64(t1, t3);
}

/* lo in the low half, hi in the high half */
static AI T2 __m256i kp_pair(__m128i lo, __m128i hi)
{
    return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
}

static AI T2 __m128i kp_load128(const uint8_t *p)
{
    return _mm_loadu_si128((const __m128i *)p);
}

/* z[e] (e = 0..7), lane i = bytes off + 4e..off + 4e + 3 of wb[i]. */
static AI T2 void kp_region(const uint8_t *const wb[8], uint32_t off, __m256i z[8])
{
    __m256i y[4];
    int h, i;

#pragma GCC unroll 2
    for (h = 0; h < 2; h++) {
#pragma GCC unroll 4
        for (i = 0; i < 4; i++)
            y[i] = kp_pair(kp_load128(wb[i] + off + 16 * h), kp_load128(wb[i + 4] + off + 16 * h));
        kp_t4(y, z + 4 * h);
    }
}

/* out[0..3], lane i = dword j of half[i] (j = 0..3): 8 rows' 128-bit values
 * transposed by 32-bit lanes. */
static AI T2 void kp_t8x4(const __m128i half[8], __m256i out[4])
{
    __m256i y[4];
    int i;

#pragma GCC unroll 4
    for (i = 0; i < 4; i++)
        y[i] = kp_pair(half[i], half[i + 4]);
    kp_t4(y, out);
}

/* The panel of super-block s of rows r..r + 7. */
static AI T2 void kp_build(uint32_t type, const struct baton_mm *mm, uint64_t r, uint64_t s,
                           struct kp_sb *p)
{
    const __m256i m15 = _mm256_set1_epi8(15), m16 = _mm256_set1_epi8(16);
    /* chunk 2q in the low nibbles of the 32 bytes at qs + 32q, 2q + 1 in
     * the high; Q5_K's fifth bit of sub-block t is bit t of its element's
     * byte of the 32 at 16 */
    const uint32_t qs = type == BATON_TYPE_Q4_K ? 16 : 48;
    uint32_t bbytes;
    int d_off, dmin_off, i, q, e;
    const uint8_t *wb[8];
    __m128i a[8], b[8];
    __m256i z[8], hz[8];
    uint32_t dw[8];

    k_layout(type, &bbytes, &d_off, &dmin_off);
    for (i = 0; i < 8; i++) {
        wb[i] = mm->w + (r + (uint64_t)i) * mm->w_row_bytes + s * bbytes;
        dw[i] = load_u32(wb[i] + d_off); /* d, then dmin at d_off + 2 */
    }
    if (type == BATON_TYPE_Q5_K)
        kp_region(wb, 16, hz);
#pragma GCC unroll 4
    for (q = 0; q < 4; q++) {
        kp_region(wb, qs + 32u * (uint32_t)q, z);
#pragma GCC unroll 8
        for (e = 0; e < 8; e++) {
            __m256i lo = _mm256_and_si256(z[e], m15),
                    hi = _mm256_and_si256(_mm256_srli_epi16(z[e], 4), m15);

            if (type == BATON_TYPE_Q5_K) {
                lo = _mm256_or_si256(lo, _mm256_and_si256(k_move_bits(hz[e], 2 * q, 4), m16));
                hi = _mm256_or_si256(hi,
                                     _mm256_and_si256(k_move_bits(hz[e], 2 * q + 1, 4), m16));
            }
            p->w[2 * q][e] = lo;
            p->w[2 * q + 1][e] = hi;
        }
    }
    for (i = 0; i < 8; i++) {
        const __m128i sm = k_q45_sm(wb[i]);

        a[i] = _mm_unpacklo_epi8(sm, _mm_setzero_si128()); /* int16 scales of 0..7 */
        b[i] = _mm_unpackhi_epi8(sm, _mm_setzero_si128()); /* int16 mins of 0..7 */
    }
    for (q = 0; q < 2; q++) {
        __m128i u[8];

        for (i = 0; i < 8; i++)
            u[i] = q ? _mm_unpackhi_epi16(a[i], a[i]) : _mm_unpacklo_epi16(a[i], a[i]);
        kp_t8x4(u, p->sc + 4 * q);
    }
    kp_t8x4(b, p->mn);
    k_dmin8(dw, &p->d, &p->dmin);
}

/* nc columns (1..4, a constant) of a panel: xs[j] the column's super-block
 * of activations, acc[j] its 8 rows' chains, advanced by the super-block's
 * steps. */
static AI T2 void kp_cols(uint32_t type, const struct kp_sb *p, const uint8_t *const xs[4],
                          __m256 acc[], const int nc)
{
    const int run = kp_run(type);
    __m256i is[4];
    int t, e, j;

#pragma GCC unroll 4
    for (j = 0; j < nc; j++)
        is[j] = _mm256_setzero_si256();
    for (t = 0; t < 8; t++) {
        __m256i s16[4];

#pragma GCC unroll 8
        for (e = 0; e < 8; e++) {
            const __m256i w = p->w[t][e];

#pragma GCC unroll 4
            for (j = 0; j < nc; j++) {
                const __m256i pr = _mm256_maddubs_epi16(
                    w, _mm256_set1_epi32((int)load_u32(xs[j] + 32 * t + 4 * e)));

                s16[j] = e % run ? _mm256_add_epi16(s16[j], pr) : pr;
                /* added in order: gcc otherwise keeps the 32 products of
                 * a sub-block for an adder tree, spilling most of them */
                __asm__("" : "+x"(s16[j]));
                if (e % run == run - 1)
                    is[j] = _mm256_add_epi32(is[j], _mm256_madd_epi16(s16[j], p->sc[t]));
            }
        }
    }
#pragma GCC unroll 4
    for (j = 0; j < nc; j++) {
        const __m256 dx = _mm256_broadcast_ss((const float *)(const void *)(xs[j] + 288));
        /* the sub-blocks' sums of q: int16 lanes 0..7, in both halves */
        const __m256i b32 = _mm256_broadcastsi128_si256(
            _mm_hadd_epi16(kp_load128(xs[j] + 256), kp_load128(xs[j] + 272)));
        __m256i ms;

        ms = _mm256_madd_epi16(p->mn[0], _mm256_shuffle_epi32(b32, 0x00));
        ms = _mm256_add_epi32(ms, _mm256_madd_epi16(p->mn[1], _mm256_shuffle_epi32(b32, 0x55)));
        ms = _mm256_add_epi32(ms, _mm256_madd_epi16(p->mn[2], _mm256_shuffle_epi32(b32, 0xAA)));
        ms = _mm256_add_epi32(ms, _mm256_madd_epi16(p->mn[3], _mm256_shuffle_epi32(b32, 0xFF)));
        acc[j] = _mm256_fmadd_ps(_mm256_mul_ps(p->d, dx), _mm256_cvtepi32_ps(is[j]), acc[j]);
        acc[j] = _mm256_fnmadd_ps(_mm256_mul_ps(p->dmin, dx), _mm256_cvtepi32_ps(ms), acc[j]);
    }
}

/* Rows r..r + 7 for columns [c, c + nc), nc <= KP_COLS. */
static AI T2 void kp_tile(uint32_t type, const struct baton_mm *mm, uint64_t r, uint64_t c,
                          uint32_t nc)
{
    const uint64_t nsb = mm->k / BATON_QK_K;
    struct kp_sb p;
    __m256 acc[KP_COLS];
    const uint8_t *xs[4];
    uint64_t s;
    uint32_t j, i;

    for (j = 0; j < nc; j++)
        acc[j] = _mm256_setzero_ps();
    for (s = 0; s < nsb; s++) {
        kp_build(type, mm, r, s, &p);
        for (j = 0; j < nc; j += 4) {
            const uint32_t n4 = nc - j < 4 ? nc - j : 4;

            for (i = 0; i < n4; i++)
                xs[i] = mm->act + (c + j + i) * mm->act_col_bytes + s * BATON_ACT_K_BLOCK_BYTES;
            switch (n4) {
            case 4:
                kp_cols(type, &p, xs, acc + j, 4);
                break;
            case 3:
                kp_cols(type, &p, xs, acc + j, 3);
                break;
            case 2:
                kp_cols(type, &p, xs, acc + j, 2);
                break;
            default:
                kp_cols(type, &p, xs, acc + j, 1);
                break;
            }
        }
    }
    for (j = 0; j < nc; j++)
        _mm256_storeu_ps(mm->y + (c + j) * mm->ldy + r, acc[j]);
}

/* Q4_K, Q5_K: panels of 8 rows (kp_tile) from KP_MIN_M + 1 columns on,
 * the rows left over one at a time for up to KP_COLS columns, K_COLS at a
 * time (k_row). */
#define KP_KERNELS(name, type)                                                                     \
    K_ROW_DECODE(name, type)                                                                       \
    static T2 void name##_panel(const struct baton_mm *mm, uint64_t r, uint64_t c, uint32_t nc)    \
    {                                                                                              \
        kp_tile(type, mm, r, c, nc);                                                               \
    }                                                                                              \
    static T2 void name##_prow(const struct baton_mm *mm, uint64_t r, uint64_t c, uint32_t nc)     \
    {                                                                                              \
        uint32_t j;                                                                                \
                                                                                                   \
        for (j = 0; j < nc; j += K_COLS)                                                           \
            name##_row(mm, r, c + j, nc - j < K_COLS ? nc - j : K_COLS);                           \
    }                                                                                              \
    static const struct baton_mm_tiles name##_tiles = {                                            \
        name##_decode, K_DEC_ROWS, name##_panel, 8, KP_COLS, name##_prow, KP_MIN_M,                \
    };                                                                                             \
    K_DRIVE(name, name##_tiles)

KP_KERNELS(q4_k, BATON_TYPE_Q4_K)
KP_KERNELS(q5_k, BATON_TYPE_Q5_K)

/* ---- Q4_0 (matmul.h: one chain per output over whole blocks) ----
 * Q4_ROWS rows at a time, one per 32-bit lane of the chains. Rows i and
 * i + 4 share a register: row i's 16 bytes in the low half, row i + 4's in
 * the high half; masked, they are the low nibbles (elements 0..15), and
 * shifted down 4 bits and masked, the high nibbles (16..31). Each nibble
 * register times the matching 16 bytes of x in both halves (vpmaddubsw,
 * unsigned nibbles times signed x, pair sums at most 2 * 15 * 127 = 3810),
 * the two added (<= 7620): per half eight int16 sums of 4 products of one
 * row. Two rounds of vphaddw over the four registers (<= 15240, then
 * <= 30480: no int16 overflow) and a vpmaddwd by ones leave lane i (half
 * 0) / i + 4 (half 1) with row i's / i + 4's whole-block sum, with no
 * cross-half shuffle; lane 0 of the block's activation corr (-8 times the
 * block's sum of x) takes the nibbles' offset back out, so each lane ends
 * as the exact isum. A strip of fewer rows (the ragged end) reads its
 * first row in the missing lanes and stores only its own. (Until the
 * twenty-sixth session every row had its own register, nibbles by
 * vpsrlvd, and the sums met through vphaddd and two vperm2i128: bench/
 * RESULTS.md, "Twenty-sixth session", for the figures.)
 * IQ4_NL (nl set): the nibbles index the grid by vpshufb, signed levels
 * -127..113, and vpmaddubsw takes them by the sign trick, |level| times x
 * with the level's sign (pair sums at most 2 * 127 * 127 = 32258). Two of
 * those would overflow int16, so each goes to int32 at once (vpmaddwd by
 * ones: sums of 4 products), and the two rounds of adds are vphaddd; the
 * activation corr (bias 128) is not needed. Same lanes, same exact isum. */
#define Q4_ROWS 8

/* binary16 scales of block offset bo of the 8 rows, as floats in lane
 * order: formed in general-purpose registers (two 64-bit words) rather
 * than by eight vpinsrw, which compete with the products for the vector
 * ports. */
static AI T2 __m256 q4_scales8(const uint8_t *const row[Q4_ROWS], uint64_t bo)
{
    uint64_t lo = (uint64_t)load_u16(row[0] + bo) | (uint64_t)load_u16(row[1] + bo) << 16 |
                  (uint64_t)load_u16(row[2] + bo) << 32 | (uint64_t)load_u16(row[3] + bo) << 48;
    uint64_t hi = (uint64_t)load_u16(row[4] + bo) | (uint64_t)load_u16(row[5] + bo) << 16 |
                  (uint64_t)load_u16(row[6] + bo) << 32 | (uint64_t)load_u16(row[7] + bo) << 48;

    /* keeps GCC's SLP vectorizer from turning the shifts back into
     * vector operations (no instruction: only "the value is in a GPR") */
    __asm__("" : "+r"(lo), "+r"(hi));
    return _mm256_cvtph_ps(_mm_set_epi64x((long long)hi, (long long)lo));
}

static AI T2 void q4_strip(const struct baton_mm *mm, uint64_t r, uint32_t nr, uint64_t c,
                           const int NC, const int nl)
{
    const uint64_t nb = mm->k / 32;
    const __m256i ones16 = _mm256_set1_epi16(1), m4 = _mm256_set1_epi8(0x0F);
    const __m256i grid = _mm256_broadcastsi128_si256(k_iq4_grid());
    const uint8_t *row[Q4_ROWS];
    /* the next strip's rows, one contiguous range: decode prefetches it
     * into L2 block by block as it goes (without, the 8 rows' interleaved
     * reads ran at a third of the speed; all of it at once, as the AVX-512
     * decode did until the twenty-fifth session, measured 30-50 % slower
     * here: d768 model, Zen 5) */
    const char *pf = (const char *)mm->w + (r + Q4_ROWS) * mm->w_row_bytes;
    __m256 acc[4];
    uint64_t b;
    int i, j;

    for (i = 0; i < Q4_ROWS; i++)
        row[i] = mm->w + (r + ((uint32_t)i < nr ? (uint64_t)i : 0)) * mm->w_row_bytes;
#pragma GCC unroll 4
    for (j = 0; j < NC; j++)
        acc[j] = _mm256_setzero_ps();
    for (b = 0; b < nb; b++) {
        const uint64_t bo = b * BATON_Q4_0_BLOCK_BYTES;
        __m256i wl[Q4_ROWS / 2], wh[Q4_ROWS / 2];
        __m256 dw;

        if (NC == 1) { /* decode: the next strip's 144 bytes per block */
            _mm_prefetch(pf + Q4_ROWS * bo, _MM_HINT_T1);
            _mm_prefetch(pf + Q4_ROWS * bo + 64, _MM_HINT_T1);
            _mm_prefetch(pf + Q4_ROWS * bo + 128, _MM_HINT_T1);
        }
        dw = q4_scales8(row, bo);
#pragma GCC unroll 4
        for (i = 0; i < Q4_ROWS / 2; i++) {
            const __m256i v = _mm256_loadu2_m128i((const __m128i *)(row[i + 4] + bo + 2),
                                                  (const __m128i *)(row[i] + bo + 2));

            wl[i] = _mm256_and_si256(v, m4);
            wh[i] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            if (nl) {
                wl[i] = _mm256_shuffle_epi8(grid, wl[i]);
                wh[i] = _mm256_shuffle_epi8(grid, wh[i]);
            }
        }
#pragma GCC unroll 4
        for (j = 0; j < NC; j++) {
            const uint8_t *xb = mm->act + (c + j) * mm->act_col_bytes +
                                b / 4 * BATON_ACT_GROUP_BYTES + 16 * (b % 4);
            const __m256i xl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)xb));
            const __m256i xh =
                _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(xb + 64)));
            int32_t corr;
            float dx;
            __m256i s[Q4_ROWS / 2], isum;

            memcpy(&corr, xb + 128, sizeof(corr));
            memcpy(&dx, xb + 192, sizeof(dx));
            if (nl) {
#pragma GCC unroll 4
                for (i = 0; i < Q4_ROWS / 2; i++)
                    s[i] = _mm256_add_epi32(
                        _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(wl[i]),
                                                               _mm256_sign_epi8(xl, wl[i])),
                                          ones16),
                        _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(wh[i]),
                                                               _mm256_sign_epi8(xh, wh[i])),
                                          ones16));
                /* per half: rows 0, 1 | 2, 3, two sums each; then one */
                isum =
                    _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
            } else {
#pragma GCC unroll 4
                for (i = 0; i < Q4_ROWS / 2; i++)
                    s[i] = _mm256_add_epi16(_mm256_maddubs_epi16(wl[i], xl),
                                            _mm256_maddubs_epi16(wh[i], xh));
                /* per half: rows 0, 1 | 2, 3 (half 1: 4, 5 | 6, 7), four
                 * sums each; then all four rows, two sums each */
                isum = _mm256_madd_epi16(
                    _mm256_hadd_epi16(_mm256_hadd_epi16(s[0], s[1]), _mm256_hadd_epi16(s[2], s[3])),
                    ones16);
                isum = _mm256_add_epi32(isum, _mm256_set1_epi32(corr));
            }
            acc[j] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(dx)),
                                     _mm256_cvtepi32_ps(isum), acc[j]);
        }
    }
#pragma GCC unroll 4
    for (j = 0; j < NC; j++) {
        float *y = mm->y + (c + j) * mm->ldy + r;

        if (nr == Q4_ROWS) {
            _mm256_storeu_ps(y, acc[j]);
        } else {
            float t[Q4_ROWS];

            _mm256_storeu_ps(t, acc[j]);
            memcpy(y, t, nr * sizeof(float));
        }
    }
}

static AI T2 void q4_cols(const struct baton_mm *mm, uint64_t r, uint32_t nr, uint64_t c,
                          uint32_t nc, const int nl)
{
    switch (nc) {
    case 1:
        q4_strip(mm, r, nr, c, 1, nl);
        break;
    case 2:
        q4_strip(mm, r, nr, c, 2, nl);
        break;
    case 3:
        q4_strip(mm, r, nr, c, 3, nl);
        break;
    default:
        q4_strip(mm, r, nr, c, 4, nl);
        break;
    }
}

/* Q4_0 (nl 0) and IQ4_NL (nl 1): the strips as tiles */
#define Q4_KERNELS(name, nl)                                                                       \
    static T2 void name##_decode(const struct baton_mm *mm, uint64_t r)                            \
    {                                                                                              \
        q4_strip(mm, r, Q4_ROWS, 0, 1, nl);                                                        \
    }                                                                                              \
    static T2 void name##_tile_n(const struct baton_mm *mm, uint64_t r, uint64_t c, uint32_t nc)   \
    {                                                                                              \
        q4_cols(mm, r, Q4_ROWS, c, nc, nl);                                                        \
    }                                                                                              \
    static T2 void name##_row(const struct baton_mm *mm, uint64_t r, uint64_t c, uint32_t nc)      \
    {                                                                                              \
        q4_cols(mm, r, 1, c, nc, nl);                                                              \
    }                                                                                              \
    static const struct baton_mm_tiles name##_tiles = {                                            \
        name##_decode, Q4_ROWS, name##_tile_n, Q4_ROWS, 4, name##_row, 0,                          \
    };                                                                                             \
    static T2 void avx2_##name(const struct baton_mm *mm, uint64_t r0, uint64_t r1)                \
    {                                                                                              \
        baton_mm_drive(mm, r0, r1, &name##_tiles);                                                 \
    }

Q4_KERNELS(q4_0, 0)
Q4_KERNELS(iq4_nl, 1)

const struct baton_mm_kernels baton_mm_avx2 = {
    avx2_f32,           avx2_f16,  avx2_q8_0,     avx2_q4_0, baton_mm_avx2_act, avx2_f32_dots,
    baton_mm_avx2_wsum, avx2_f32_dots_multi, avx2_silu, avx2_exp_shift, avx2_q2_k, avx2_q3_k,
    avx2_q4_k,          avx2_q5_k, avx2_q6_k, baton_mm_avx2_act_k,
    baton_mm_avx2_q5_0, baton_mm_avx2_q5_1, baton_mm_avx2_f16_row, baton_mm_avx2_wsum_h,
    baton_mm_avx2_f32_to_f16_row, avx2_att_block, avx2_bf16, avx2_iq4_nl, avx2_iq4_xs,
    avx2_gelu,
};

#else /* not x86-64: the level is never chosen; keep the table defined */

const struct baton_mm_kernels baton_mm_avx2 = {0};

#endif
