/* AVX-512 (F, BW, DQ, VL, VNNI) kernels. F32 is matmul_f32.h's 256-bit
 * code given 32 registers; the activation quantizer is the AVX2 one (a
 * small share of the time). Target attributes only (generic build flags);
 * chosen at run time. Same reduction orders as matmul.h, so the results
 * equal the scalar and AVX2 kernels' bit for bit.
 *
 * For Q8_0's decode one 512-bit register holds a group of 4 blocks, 4
 * lanes each, and a row's 4 chains; for Q4_0, and Q8_0's batched products,
 * a register holds the chains of 16 rows; for F16 and BF16 the two
 * registers of a row hold lanes 0..15 and 16..31.
 *
 * On Zen 4 (the development host) a 512-bit operation occupies its pipe
 * for two cycles, so what counts is the number of vector operations per
 * weight byte; the kernels were shaped by measuring that (README.md). */
#include "compute/cpu/matmul.h"

#if defined(__x86_64__)

#include <immintrin.h>
#include <string.h>

#include "compute/cpu/expf.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#define T5 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx2,fma,f16c")))
#define AI inline __attribute__((always_inline))

#define K_VEC_TARGET T5
#include "compute/cpu/matmul_k.h"

static AI T5 float hsum8(__m256 c)
{
    const __m128 e = _mm_add_ps(_mm256_castps256_ps128(c), _mm256_extractf128_ps(c, 1));
    const __m128 f = _mm_add_ps(e, _mm_movehl_ps(e, e));

    return _mm_cvtss_f32(_mm_add_ss(f, _mm_movehdup_ps(f)));
}

/* low 8 lanes + high 8 lanes, then hsum8 */
static AI T5 float hsum16(__m512 a)
{
    return hsum8(_mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1)));
}

/* baton_mm_drive_few with dmax, except where AVX-512 runs on 256-bit
 * halves (baton_cpu_avx512_split, Zen 4): the column counts up to which
 * the decode per column beats the tiles were measured on Zen 5 only
 * (thirty-fifth session), so Zen 4 keeps the tiles it was tuned with. */
static AI void avx512_drive(const struct baton_mm *mm, uint64_t r0, uint64_t r1,
                            const struct baton_mm_tiles *t, uint32_t dmax)
{
    baton_mm_drive_few(mm, r0, r1, t, baton_cpu_avx512_split() ? 0 : dmax);
}

/* ---- F32 (matmul_f32.h) ---- */

#define F32_TARGET T5
#define F32_PREFIX avx512_
#include "compute/cpu/matmul_f32.h"

static T5 void avx512_f32(const struct baton_mm *mm, uint64_t r0, uint64_t r1)
{
    baton_mm_drive(mm, r0, r1, &avx512_f32_tiles);
}

/* ---- F16 and BF16 ----
 * One set of kernels for both 16-bit float weight types: each function
 * below takes bf (a constant: 0 F16, 1 BF16), and only h16_cvt looks at it,
 * so BF16 weights go through F16's tiles, decode and prefill walk and take
 * F16's order (matmul.h) lane for lane. */

/* 16 weights -> 16 floats, exactly. F16 by vcvtph2ps; BF16 is the top half
 * of a binary32, so each lane is widened to 32 bits and shifted up 16
 * (baton_bf16_to_fp32's bits; a NaN keeps its payload, and a zero lane of a
 * masked load is +0 in both formats). Not AVX512_BF16's vdpbf16ps: it sums
 * pairs of products before accumulating and flushes subnormals, so its
 * bits are not the order's. */
static AI T5 __m512 h16_cvt(__m256i v, const int bf)
{
    return bf ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16))
              : _mm512_cvtph_ps(v);
}

/* Columns per tile (see h16_tile_n). */
#define H16_COLS 6

/* hsum16 of the 12 vectors b[rr][j] (2 rows, 6 columns), the same
 * additions in the same pairs, done on 16 lanes at a time: each step adds
 * the two halves of every vector's live lanes and packs two vectors' results
 * into one. Writes y[j * ldy + rr]. The tile's epilogue was about 12 % of its
 * time with one hsum16 per output. */
static AI T5 void h16_store_2x6(const __m512 b[2][H16_COLS], float *y, uint64_t ldy)
{
    __m512 u[H16_COLS], v[3], w01, w2, t;
    float o[16];
    int j;

    /* u[j] = [c(0,j) | c(1,j)], c(l) = b(l) + b(l + 8) for l < 8 */
#pragma GCC unroll 6
    for (j = 0; j < H16_COLS; j++)
        u[j] = _mm512_add_ps(_mm512_shuffle_f32x4(b[0][j], b[1][j], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_f32x4(b[0][j], b[1][j], _MM_SHUFFLE(3, 2, 3, 2)));
    /* v[m] = [e(0,2m) | e(1,2m) | e(0,2m+1) | e(1,2m+1)], e(l) = c(l) + c(l + 4) */
#pragma GCC unroll 3
    for (j = 0; j < 3; j++)
        v[j] = _mm512_add_ps(_mm512_shuffle_f32x4(u[2 * j], u[2 * j + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(u[2 * j], u[2 * j + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    /* per 128-bit lane: f(l) = e(l) + e(l + 2), two vectors' f side by side */
    w01 = _mm512_add_ps(_mm512_shuffle_ps(v[0], v[1], _MM_SHUFFLE(1, 0, 1, 0)),
                        _mm512_shuffle_ps(v[0], v[1], _MM_SHUFFLE(3, 2, 3, 2)));
    w2 = _mm512_add_ps(_mm512_shuffle_ps(v[2], v[2], _MM_SHUFFLE(1, 0, 1, 0)),
                       _mm512_shuffle_ps(v[2], v[2], _MM_SHUFFLE(3, 2, 3, 2)));
    /* f(0) + f(1): lane 4L + m holds the sum of v[m]'s 128-bit lane L, that
     * is row L & 1 of column 2m + (L >> 1) */
    t = _mm512_add_ps(_mm512_shuffle_ps(w01, w2, _MM_SHUFFLE(2, 0, 2, 0)),
                      _mm512_shuffle_ps(w01, w2, _MM_SHUFFLE(3, 1, 3, 1)));
    _mm512_storeu_ps(o, t);
#pragma GCC unroll 6
    for (j = 0; j < H16_COLS; j++) {
        const int l0 = 4 * (2 * (j & 1)) + j / 2;

        y[(uint64_t)j * ldy] = o[l0];
        y[(uint64_t)j * ldy + 1] = o[l0 + 4];
    }
}

/* NR rows x NC columns over inputs [i0, i1) (i0 a multiple of 32; i1 a
 * multiple of 32 or k). With sv == NULL the tile covers all of k (i0 = 0,
 * i1 = k) and writes its outputs. Otherwise it is one k-chunk of
 * h16_prefill's: the accumulators start at zero (first) or from sv, and
 * end in sv, or (last) reduced into the outputs. Each accumulator lane
 * takes the same terms in the same order either way: the same bits. */
static AI T5 void h16_tile_k(const struct baton_mm *mm, uint64_t r, uint64_t c, const int NR,
                             const int NC, uint64_t i0, uint64_t i1, __m512 *sv, int first,
                             int last, const int bf)
{
    const uint64_t k = mm->k, ldy = mm->ldy;
    __m512 a0[2][H16_COLS], a1[2][H16_COLS];
    uint64_t i;
    int rr, j;

#pragma GCC unroll 4
    for (rr = 0; rr < NR; rr++)
#pragma GCC unroll 6
        for (j = 0; j < NC; j++) {
            a0[rr][j] = first ? _mm512_setzero_ps() : sv[2 * (rr * H16_COLS + j)];
            a1[rr][j] = first ? _mm512_setzero_ps() : sv[2 * (rr * H16_COLS + j) + 1];
        }
    for (i = i0; i + 32 <= i1; i += 32) {
        __m512 w0[4], w1[4];

#pragma GCC unroll 4
        for (rr = 0; rr < NR; rr++) {
            const uint8_t *p = mm->w + (r + rr) * mm->w_row_bytes + 2 * i;

            w0[rr] = h16_cvt(_mm256_loadu_si256((const __m256i *)p), bf);
            w1[rr] = h16_cvt(_mm256_loadu_si256((const __m256i *)(p + 32)), bf);
        }
#pragma GCC unroll 6
        for (j = 0; j < NC; j++) {
            const float *xc = mm->x + (c + j) * k + i;
            __m512 x0 = _mm512_loadu_ps(xc), x1 = _mm512_loadu_ps(xc + 16);

            /* Keep the column in registers: folded into each row's FMA as a
             * memory operand it is loaded NR times, and the loads, not the
             * FMAs, bound the tile. */
            __asm__("" : "+v"(x0), "+v"(x1));
#pragma GCC unroll 4
            for (rr = 0; rr < NR; rr++) {
                a0[rr][j] = _mm512_fmadd_ps(w0[rr], x0, a0[rr][j]);
                a1[rr][j] = _mm512_fmadd_ps(w1[rr], x1, a1[rr][j]);
            }
        }
    }
    if (i < i1) { /* ragged k (i1 == k): masked lanes stay as they are */
        const uint64_t t = i1 - i;
        const __mmask16 m0 = t >= 16 ? 0xFFFF : (__mmask16)((1u << t) - 1);
        const __mmask16 m1 = t > 16 ? (__mmask16)((1u << (t - 16)) - 1) : 0;

#pragma GCC unroll 4
        for (rr = 0; rr < NR; rr++) {
            const uint8_t *p = mm->w + (r + rr) * mm->w_row_bytes + 2 * i;
            const __m512 w0 = h16_cvt(_mm256_maskz_loadu_epi16(m0, p), bf);
            const __m512 w1 = h16_cvt(_mm256_maskz_loadu_epi16(m1, p + 32), bf);

#pragma GCC unroll 6
            for (j = 0; j < NC; j++) {
                const float *xc = mm->x + (c + j) * k + i;

                a0[rr][j] = _mm512_mask3_fmadd_ps(w0, _mm512_maskz_loadu_ps(m0, xc), a0[rr][j], m0);
                a1[rr][j] =
                    _mm512_mask3_fmadd_ps(w1, _mm512_maskz_loadu_ps(m1, xc + 16), a1[rr][j], m1);
            }
        }
    }
    if (!last) {
#pragma GCC unroll 4
        for (rr = 0; rr < NR; rr++)
#pragma GCC unroll 6
            for (j = 0; j < NC; j++) {
                sv[2 * (rr * H16_COLS + j)] = a0[rr][j];
                sv[2 * (rr * H16_COLS + j) + 1] = a1[rr][j];
            }
        return;
    }
    if (NR == 2 && NC == H16_COLS) {
        __m512 b[2][H16_COLS];

#pragma GCC unroll 2
        for (rr = 0; rr < 2; rr++)
#pragma GCC unroll 6
            for (j = 0; j < H16_COLS; j++)
                b[rr][j] = _mm512_add_ps(a0[rr][j], a1[rr][j]);
        h16_store_2x6(b, mm->y + c * ldy + r, ldy);
        return;
    }
#pragma GCC unroll 4
    for (rr = 0; rr < NR; rr++)
#pragma GCC unroll 6
        for (j = 0; j < NC; j++) /* b[l] = a[l] + a[l+16], then hsum16 */
            mm->y[(c + j) * ldy + r + rr] = hsum16(_mm512_add_ps(a0[rr][j], a1[rr][j]));
}

static AI T5 void h16_tile(const struct baton_mm *mm, uint64_t r, uint64_t c, const int NR,
                           const int NC, const int bf)
{
    h16_tile_k(mm, r, c, NR, NC, 0, mm->k, NULL, 1, 1, bf);
}

/* Rows per decode call; rows of up to H16_DEC_ROW_MAX inputs go a row at a
 * time, longer ones by chunks of H16_DEC_KC inputs (the column's chunk, 8
 * KiB of binary32, stays in L1 while the call's rows pass over it), two
 * rows at once. At k = 14336, `bench_kernels --no-prefill`, 1 thread:
 * chunks of 2048 inputs 24-26 GB/s, of 4096 22-24, of 1024 20-22, a row at
 * a time 18-20 (Zen 4); on Zen 5 (thirty-fifth session) a row of a chunk
 * at a time 29.5-30.4, two rows 32.7-34.2 (2 threads 57-58 -> 62-64), four
 * 29.5-30.0, chunks of 1024 or 3072 with two rows 30-32; at k = 4096 a
 * row at a time 27-33 (Zen 4), 37 (Zen 5), chunks of 2048 23-24 (Zen 4),
 * 30-32 with two rows (Zen 5): so the threshold. */
#define H16_DEC_ROWS 8
#define H16_DEC_ROW_MAX 4096u
#define H16_DEC_KC 2048u
_Static_assert(H16_DEC_ROWS % 2 == 0, "h16_decode takes the rows in pairs");

/* Row r's terms over inputs [i0, i1) (i0 a multiple of 32) into s0 and s1,
 * as h16_tile's (1 row, 1 column) loop makes them; the masked tail only
 * where i1 == k is not a multiple of 32. While it reads, the run at the
 * address pf (what is read next, as long as this run; an integer, as it
 * may lie past the matrix) is prefetched into L1 line by line (into L2
 * until the thirty-third session: matmul.h, baton_mm_decode_prefetch_l1). */
static AI T5 void h16_dec_run(const struct baton_mm *mm, uint64_t r, uint64_t i0, uint64_t i1,
                              uintptr_t pf, __m512 *s0, __m512 *s1, const int bf)
{
    const uint8_t *w = mm->w + r * mm->w_row_bytes;
    __m512 a0 = *s0, a1 = *s1;
    uint64_t i;

    for (i = i0; i + 32 <= i1; i += 32) {
        const __m512 w0 = h16_cvt(_mm256_loadu_si256((const __m256i *)(w + 2 * i)), bf);
        const __m512 w1 = h16_cvt(_mm256_loadu_si256((const __m256i *)(w + 2 * i + 32)), bf);

        __builtin_prefetch((const void *)(pf + 2 * (i - i0)), 0, 3);
        a0 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(mm->x + i), a0);
        a1 = _mm512_fmadd_ps(w1, _mm512_loadu_ps(mm->x + i + 16), a1);
    }
    if (i < i1) { /* ragged k: masked lanes stay as they are */
        const uint64_t t = i1 - i;
        const __mmask16 m0 = t >= 16 ? 0xFFFF : (__mmask16)((1u << t) - 1);
        const __mmask16 m1 = t > 16 ? (__mmask16)((1u << (t - 16)) - 1) : 0;
        const __m512 w0 = h16_cvt(_mm256_maskz_loadu_epi16(m0, w + 2 * i), bf);
        const __m512 w1 = h16_cvt(_mm256_maskz_loadu_epi16(m1, w + 2 * i + 32), bf);

        a0 = _mm512_mask3_fmadd_ps(w0, _mm512_maskz_loadu_ps(m0, mm->x + i), a0, m0);
        a1 = _mm512_mask3_fmadd_ps(w1, _mm512_maskz_loadu_ps(m1, mm->x + i + 16), a1, m1);
    }
    *s0 = a0;
    *s1 = a1;
}

/* Rows r and r + 1 over inputs [i0, i1) (i0 a multiple of 32) into s0[0..1]
 * and s1[0..1]: h16_dec_run's terms, each row's in its order, with the
 * column's loads shared (four chains in flight instead of two). pf is the
 * first row's next run; the second row's is a row further. */
static AI T5 void h16_dec_run2(const struct baton_mm *mm, uint64_t r, uint64_t i0, uint64_t i1,
                               uintptr_t pf, __m512 *s0, __m512 *s1, const int bf)
{
    const uint64_t wrb = mm->w_row_bytes;
    const uint8_t *w = mm->w + r * wrb, *v = w + wrb;
    __m512 a0 = s0[0], a1 = s1[0], b0 = s0[1], b1 = s1[1];
    uint64_t i;

    for (i = i0; i + 32 <= i1; i += 32) {
        const __m512 x0 = _mm512_loadu_ps(mm->x + i), x1 = _mm512_loadu_ps(mm->x + i + 16);
        const __m256i *pw = (const __m256i *)(w + 2 * i), *pv = (const __m256i *)(v + 2 * i);

        __builtin_prefetch((const void *)(pf + 2 * (i - i0)), 0, 3);
        __builtin_prefetch((const void *)(pf + wrb + 2 * (i - i0)), 0, 3);
        a0 = _mm512_fmadd_ps(h16_cvt(_mm256_loadu_si256(pw), bf), x0, a0);
        a1 = _mm512_fmadd_ps(h16_cvt(_mm256_loadu_si256(pw + 1), bf), x1, a1);
        b0 = _mm512_fmadd_ps(h16_cvt(_mm256_loadu_si256(pv), bf), x0, b0);
        b1 = _mm512_fmadd_ps(h16_cvt(_mm256_loadu_si256(pv + 1), bf), x1, b1);
    }
    s0[0] = a0;
    s1[0] = a1;
    s0[1] = b0;
    s1[1] = b1;
    if (i < i1) { /* ragged k: each row's masked tail as h16_dec_run takes it */
        h16_dec_run(mm, r, i, i1, pf, &s0[0], &s1[0], bf);
        h16_dec_run(mm, r + 1, i, i1, pf + wrb, &s0[1], &s1[1], bf);
    }
}

/* One column, rows [r, r + H16_DEC_ROWS). Up to H16_DEC_ROW_MAX inputs a
 * row at a time, so the weights are read as one sequential stream (rows
 * are contiguous), which the hardware prefetchers follow best (several
 * rows at once measured up to 2x slower here), each line also prefetched
 * into L1 BATON_MM_DECODE_PF_BYTES ahead (until the thirty-fifth session
 * this path prefetched nothing; on Zen 5, `bench_kernels --no-prefill`, 1
 * thread: k 4096 36-37 -> 40 GB/s, 2048 37.6 -> 40.4-41.2, 768 37-38 ->
 * 40-41; a row ahead instead lost at 768 and 16 KiB ahead at 4096).
 * Longer rows go by chunks of H16_DEC_KC inputs, each chunk of every row
 * before the next chunk, so that the chunk of the column is read from L1
 * (at k = 14336 the whole column, 56 KiB, came from L2 for every row); the
 * weights then come in runs of 4 KiB, two rows' at once, and each pair of
 * runs prefetches the next pair. Each row's two accumulators take the same
 * terms in the same order as in h16_tile: the same bits. */
static AI T5 void h16_decode(const struct baton_mm *mm, uint64_t r, const int bf)
{
    const uint64_t k = mm->k, wrb = mm->w_row_bytes;
    __m512 s0[H16_DEC_ROWS], s1[H16_DEC_ROWS];
    uint64_t i0;
    int rr;

    if (k <= H16_DEC_ROW_MAX) {
        for (rr = 0; rr < H16_DEC_ROWS; rr++) {
            const uint64_t rw = r + (uint64_t)rr;
            __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();

            h16_dec_run(mm, rw, 0, k, (uintptr_t)mm->w + rw * wrb + BATON_MM_DECODE_PF_BYTES,
                        &a0, &a1, bf);
            mm->y[rw] = hsum16(_mm512_add_ps(a0, a1)); /* as h16_tile's 1 x 1 */
        }
        return;
    }
    for (rr = 0; rr < H16_DEC_ROWS; rr++)
        s0[rr] = s1[rr] = _mm512_setzero_ps();
    for (i0 = 0; i0 < k; i0 += H16_DEC_KC) {
        const uint64_t i1 = k - i0 > H16_DEC_KC ? i0 + H16_DEC_KC : k;

        for (rr = 0; rr < H16_DEC_ROWS; rr += 2) {
            /* the next runs: the next pair's chunk, or the first pair's
             * next chunk, or the next call's first pair (past the matrix:
             * a prefetch never faults) */
            const int last = rr + 2 == H16_DEC_ROWS;
            const uint64_t nrow = !last ? r + (uint64_t)rr + 2 : i1 < k ? r : r + H16_DEC_ROWS;
            const uint64_t noff = !last ? 2 * i0 : i1 < k ? 2 * i1 : 0;
            const uintptr_t next = (uintptr_t)mm->w + nrow * wrb + noff;

            h16_dec_run2(mm, r + (uint64_t)rr, i0, i1, next, &s0[rr], &s1[rr], bf);
        }
    }
    for (rr = 0; rr < H16_DEC_ROWS; rr++) /* b[l] = a[l] + a[l+16], then hsum16 */
        mm->y[r + (uint64_t)rr] = hsum16(_mm512_add_ps(s0[rr], s1[rr]));
}

/* Up to 6 columns against 2 rows: 24 accumulators, 4 weight registers and
 * the column's 2 loads fit the 32 registers, and each converted weight
 * vector serves 6 columns instead of 4: the kernel benchmark's F16 prefill
 * (m = 64, 1 thread, Zen 5) 110 -> 127-129 GFLOP/s, the d768 model's 1-thread
 * prefill about +3 % (bench/RESULTS.md). */
static AI T5 void h16_tile_n(const struct baton_mm *mm, uint64_t r, uint64_t c, uint32_t nc,
                             const int bf)
{
    switch (nc) {
    case 1:
        h16_tile(mm, r, c, 2, 1, bf);
        break;
    case 2:
        h16_tile(mm, r, c, 2, 2, bf);
        break;
    case 3:
        h16_tile(mm, r, c, 2, 3, bf);
        break;
    case 4:
        h16_tile(mm, r, c, 2, 4, bf);
        break;
    case 5:
        h16_tile(mm, r, c, 2, 5, bf);
        break;
    default:
        h16_tile(mm, r, c, 2, 6, bf);
        break;
    }
}

static AI T5 void h16_row(const struct baton_mm *mm, uint64_t r, uint64_t c, uint32_t nc,
                          const int bf)
{
    switch (nc) {
    case 1:
        h16_tile(mm, r, c, 1, 1, bf);
        break;
    case 2:
        h16_tile(mm, r, c, 1, 2, bf);
        break;
    case 3:
        h16_tile(mm, r, c, 1, 3, bf);
        break;
    case 4:
        h16_tile(mm, r, c, 1, 4, bf);
        break;
    case 5:
        h16_tile(mm, r, c, 1, 5, bf);
        break;
    default:
        h16_tile(mm, r, c, 1, 6, bf);
        break;
    }
}

/* Up to this many columns (where AVX-512 runs at full width) each goes
 * through h16_decode: a block of rows streams from memory once and the
 * other columns read it from cache, where the 2 x 6 tiles and
 * h16_prefill were built for more columns. bench_kernels (Zen 5, 1
 * thread), GFLOP/s, tiles or h16_prefill against the decode per column: k
 * 4096 2 columns 37 -> 54, 3 51 -> 61, 4 61 -> 64, 6 84 -> 67; k 14336 2
 * 36 -> 52, 3 48 -> 61, 4 60 -> 70; k 768 2 61 -> 89, 3 86 -> 94, 4 even,
 * 6 123 -> 98. */
#define H16_DECODE_MAX_M 3u

/* Each type's tiles: the functions above with bf fixed. */
static T5 void f16_decode(const struct baton_mm *mm, uint64_t r)
{
    h16_decode(mm, r, 0);
}

static T5 void f16_tile_n(const struct baton_mm *mm, uint64_t r, uint64_t c, uint32_t nc)
{
    h16_tile_n(mm, r, c, nc, 0);
}

static T5 void f16_row(const struct baton_mm *mm, uint64_t r, uint64_t c, uint32_t nc)
{
    h16_row(mm, r, c, nc, 0);
}

static T5 void bf16_decode(const struct baton_mm *mm, uint64_t r)
{
    h16_decode(mm, r, 1);
}

static T5 void bf16_tile_n(const struct baton_mm *mm, uint64_t r, uint64_t c, uint32_t nc)
{
    h16_tile_n(mm, r, c, nc, 1);
}

static T5 void bf16_row(const struct baton_mm *mm, uint64_t r, uint64_t c, uint32_t nc)
{
    h16_row(mm, r, c, nc, 1);
}

static const struct baton_mm_tiles f16_tiles = {
    f16_decode, H16_DEC_ROWS, f16_tile_n, 2, H16_COLS, f16_row, 0,
};
static const struct baton_mm_tiles bf16_tiles = {
    bf16_decode, H16_DEC_ROWS, bf16_tile_n, 2, H16_COLS, bf16_row, 0,
};

/* Columns' inputs per k-chunk of h16_prefill (6 columns: 24 KiB of binary32
 * in L1), the rows of its blocks (their accumulators: 24 KiB), and the
 * shortest rows it takes (below, 6 columns' whole inputs fit L1: at k = 768
 * the plain tiles ran at 229 GFLOP/s, at k = 4096 and 14336 at 150). */
#define H16_PRE_KC 1024u
#define H16_PRE_ROWS 32u
#define H16_PRE_KMIN 2048u

/* NC (1..6) columns from c against the row pairs [r, re) of a block, over
 * inputs [i0, i1), the accumulators of pair p at sv + 24 p. */
static AI T5 void h16_pre_pass(const struct baton_mm *mm, uint64_t r, uint64_t re, uint64_t c,
                               const int NC, uint64_t i0, uint64_t i1, __m512 *sv, int first,
                               int last, const int bf)
{
    for (; r + 2 <= re; r += 2, sv += 4 * H16_COLS)
        h16_tile_k(mm, r, c, 2, NC, i0, i1, sv, first, last, bf);
}

/* Several columns with rows of H16_PRE_KMIN inputs or more: the row blocks
 * of H16_PRE_ROWS rows are walked a column group (6 columns) at a time,
 * and each group k-chunk by k-chunk, every row pair of the block over the
 * chunk before the next chunk, so the group's chunk of activations is read
 * from L1 by every pair (the plain tiles read each pair's whole inputs,
 * 6 x 16 KiB at k = 4096, from L2 for every pair, which bound them: the
 * loads, not the FMAs). The accumulators of the block's pairs wait in sv
 * between chunks; each lane takes the same terms in the same order as in
 * h16_tile: the same bits. A block's odd last row goes through h16_row. */
static AI T5 void h16_prefill(const struct baton_mm *mm, uint64_t r0, uint64_t r1, const int bf)
{
    __m512 sv[H16_PRE_ROWS / 2 * 4 * H16_COLS];
    const uint64_t k = mm->k;
    uint64_t rs, c, i0;

    for (rs = r0; rs < r1; rs += H16_PRE_ROWS) {
        const uint64_t re = r1 - rs > H16_PRE_ROWS ? rs + H16_PRE_ROWS : r1;

        for (c = 0; c < mm->m; c += H16_COLS) {
            const uint32_t nc = mm->m - c < H16_COLS ? (uint32_t)(mm->m - c) : H16_COLS;
            uint64_t r;

            for (i0 = 0; i0 < k; i0 += H16_PRE_KC) {
                const uint64_t i1 = k - i0 > H16_PRE_KC ? i0 + H16_PRE_KC : k;
                const int first = i0 == 0, last = i1 == k;

                switch (nc) {
                case 1:
                    h16_pre_pass(mm, rs, re, c, 1, i0, i1, sv, first, last, bf);
                    break;
                case 2:
                    h16_pre_pass(mm, rs, re, c, 2, i0, i1, sv, first, last, bf);
                    break;
                case 3:
                    h16_pre_pass(mm, rs, re, c, 3, i0, i1, sv, first, last, bf);
                    break;
                case 4:
                    h16_pre_pass(mm, rs, re, c, 4, i0, i1, sv, first, last, bf);
                    break;
                case 5:
                    h16_pre_pass(mm, rs, re, c, 5, i0, i1, sv, first, last, bf);
                    break;
                default:
                    h16_pre_pass(mm, rs, re, c, 6, i0, i1, sv, first, last, bf);
                    break;
                }
            }
            for (r = rs + (re - rs) / 2 * 2; r < re; r++) {
                if (bf)
                    bf16_row(mm, r, c, nc);
                else
                    f16_row(mm, r, c, nc);
            }
        }
    }
}

static AI T5 void h16_mul_mat(const struct baton_mm *mm, uint64_t r0, uint64_t r1, const int bf)
{
    if (mm->k >= H16_PRE_KMIN &&
        mm->m > (baton_cpu_avx512_split() ? 1 : H16_DECODE_MAX_M))
        h16_prefill(mm, r0, r1, bf);
    else
        avx512_drive(mm, r0, r1, bf ? &bf16_tiles : &f16_tiles, H16_DECODE_MAX_M);
}

static T5 void avx512_f16(const struct baton_mm *mm, uint64_t r0, uint64_t r1)
{
    h16_mul_mat(mm, r0, r1, 0);
}

static T5 void avx512_bf16(const struct baton_mm *mm, uint64_t r0, uint64_t r1)
{
    h16_mul_mat(mm, r0, r1, 1);
}

/* ---- Q8_0 (matmul.h: four chains per output) ----
 * Decode and the tiles of few columns: one 512-bit register per group of 4
 * blocks and row, lane 4j + l the partial sum of block j over its elements
 * 4l..4l+3 and 16+4l..16+4l+3. Weights are fed to vpdpbusd as unsigned
 * bytes w + 128 (w xor 0x80); lane 4j of the activation group's corr (-128
 * times block j's sum of x) starts the integer sum and takes that offset
 * back out, so the 4 lanes of block j add up to its exact isum (q_cols
 * adds them), and block j of a group is chain j. (Until the thirty-sixth
 * session the 16 lanes were the order itself, each scaled on its own:
 * adding them first cost the one-column decode nothing measurable, k 4096
 * and 14336, and gave the batched products below Q4_0's form.) Many
 * columns: q8_batched, after Q4_0's code. */

static const uint16_t q8_d_idx[16] = {0, 0, 0, 0, 17, 17, 17, 17, 34, 34, 34, 34, 51, 51, 51, 51};
/* 128-bit halves: the first 16 bytes of each block, then the last 16 */
static const uint64_t q8_lo_idx[8] = {0, 1, 4, 5, 8, 9, 12, 13};
static const uint64_t q8_hi_idx[8] = {2, 3, 6, 7, 10, 11, 14, 15};

static AI T5 __mmask64 byte_mask(uint64_t n) /* n <= 64 */
{
    return n >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << n) - 1);
}

/* The group's weights as elements 0..15 of each block (lo) and 16..31 (hi),
 * unsigned, and its scales as [d0 x4, d1 x4, d2 x4, d3 x4]. nblk < 4 only
 * for the last group of a row: nothing past its blocks is read, missing
 * blocks read as zero. */
static AI T5 void q_weights(const uint8_t *p, const int full, uint64_t nblk, __m512i *lo,
                            __m512i *hi, __m512 *dw)
{
    __m512i z01, z23, s0, s1;

    if (full) {
        z01 = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(p + 2))),
            _mm256_loadu_si256((const __m256i *)(p + 36)), 1);
        z23 = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(p + 70))),
            _mm256_loadu_si256((const __m256i *)(p + 104)), 1);
        s0 = _mm512_loadu_si512(p);
        s1 = _mm512_loadu_si512(p + 64);
    } else {
        const __mmask32 m0 = nblk > 0 ? 0xFFFFFFFFu : 0, m1 = nblk > 1 ? 0xFFFFFFFFu : 0;
        const __mmask32 m2 = nblk > 2 ? 0xFFFFFFFFu : 0;

        z01 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_maskz_loadu_epi8(m0, p + 2)),
                                 _mm256_maskz_loadu_epi8(m1, p + 36), 1);
        z23 = _mm512_zextsi256_si512(_mm256_maskz_loadu_epi8(m2, p + 70));
        s0 = _mm512_maskz_loadu_epi8(byte_mask(34 * nblk), p);
        s1 = _mm512_maskz_loadu_epi8(byte_mask(34 * nblk > 64 ? 34 * nblk - 64 : 0), p + 64);
    }
    *lo = _mm512_xor_si512(_mm512_permutex2var_epi64(z01, _mm512_loadu_si512(q8_lo_idx), z23),
                           _mm512_set1_epi8((char)0x80));
    *hi = _mm512_xor_si512(_mm512_permutex2var_epi64(z01, _mm512_loadu_si512(q8_hi_idx), z23),
                           _mm512_set1_epi8((char)0x80));
    *dw = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutex2var_epi16(
        s0, _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)q8_d_idx)), s1)));
}

/* Rows per call of a decode tile: the tile loops over them a row at a
 * time, so the walker's indirect call is paid once per 16 rows (at the
 * 768-wide rows of a small model it was a measurable part of decode). */
#define Q_DECODE_ROWS 16

/* The lanes of a group of nblk blocks (1..4): 4 per block. */
static AI __mmask16 q_lanes(uint64_t nblk)
{
    return (__mmask16)((1u << (4 * nblk)) - 1);
}

/* lane 2m + s = (s ? b : a)[2m] + (s ? b : a)[2m + 1] */
static AI T5 __m512i q4_sum2(__m512i a, __m512i b)
{
    return _mm512_add_epi32(_mm512_mask_blend_epi32(0xAAAA, a, b),
                            _mm512_shuffle_epi32(_mm512_mask_blend_epi32(0xAAAA, b, a), 0xB1));
}

/* lane 4j + u (u < 2: a, else b) = the sum of lanes 4j + u % 2 and 4j + 2 +
 * u % 2 of that register */
static AI T5 __m512i q4_sum4(__m512i a, __m512i b)
{
    return _mm512_add_epi32(_mm512_mask_blend_epi64(0xAA, a, b),
                            _mm512_shuffle_epi32(_mm512_mask_blend_epi64(0xAA, b, a), 0x4E));
}

/* Each 32-bit lane of a 128-bit piece: the sum of the piece's 4 lanes (a
 * block's exact isum from its 4 partial sums). */
static AI T5 __m512i q8_piece_sums(__m512i v)
{
    v = _mm512_add_epi32(v, _mm512_shuffle_epi32(v, 0x4E));
    return _mm512_add_epi32(v, _mm512_shuffle_epi32(v, 0xB1));
}

/* y = (C0 + C2) + (C1 + C3) of a register whose piece t holds chain t. */
static AI T5 float q8_chains_sum(__m512 a)
{
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));

    return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
}

/* Group g's unpacked weights of NR rows (lo, hi, dw) against NC columns
 * from c, into acc[rr]. With one column the row's 4 chains each fill the
 * 4 lanes of a piece (a block's 4 partial sums added across the piece);
 * with 2..4 columns lane 4t + u holds chain t of column u (q4_sum2 and
 * q4_sum4 add the columns' partial sums as q4_decode_group adds rows'), 8
 * vpdpbusd, 12 integer and 3 float operations per row and 4 columns where
 * a register per column took 24 and 12. Only the lanes of `lanes` (a
 * short last group's blocks) take terms. */
static AI T5 void q_cols(const struct baton_mm *mm, uint64_t c, uint64_t g, const int NR,
                         const int NC, __mmask16 lanes, const __m512i lo[4], const __m512i hi[4],
                         const __m512 dw[4], __m512 acc[4])
{
    __m512i xlo[4], xhi[4], cv[4];
    __m512 dx[4], dxc;
    int rr, j;

#pragma GCC unroll 4
    for (j = 0; j < NC; j++) {
        const uint8_t *grp = mm->act + (c + j) * mm->act_col_bytes + g * BATON_ACT_GROUP_BYTES;

        xlo[j] = _mm512_loadu_si512(grp);
        xhi[j] = _mm512_loadu_si512(grp + 64);
        cv[j] = _mm512_loadu_si512(grp + 128);
        dx[j] = _mm512_loadu_ps(grp + 192);
    }
    dxc = dx[0];
    if (NC > 1)
        dxc = _mm512_mask_blend_ps(0x2222, dxc, dx[1]);
    if (NC > 2)
        dxc = _mm512_mask_blend_ps(0x4444, dxc, dx[2]);
    if (NC > 3)
        dxc = _mm512_mask_blend_ps(0x8888, dxc, dx[3]);
#pragma GCC unroll 4
    for (rr = 0; rr < NR; rr++) {
        __m512i v[4], isum;

#pragma GCC unroll 4
        for (j = 0; j < 4; j++)
            v[j] = j < NC ? _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(cv[j], lo[rr], xlo[j]), hi[rr],
                                                xhi[j])
                          : _mm512_setzero_si512();
        isum = NC == 1 ? q8_piece_sums(v[0]) : q4_sum4(q4_sum2(v[0], v[1]), q4_sum2(v[2], v[3]));
        acc[rr] = _mm512_mask3_fmadd_ps(_mm512_mul_ps(dw[rr], dxc), _mm512_cvtepi32_ps(isum),
                                        acc[rr], lanes);
    }
}

/* Group g (blocks 4g.., nblk of them) of NR rows against NC columns. */
static AI T5 void q_group(const struct baton_mm *mm, uint64_t r, uint64_t c, uint64_t g,
                          const int NR, const int NC, const int full, uint64_t nblk,
                          __m512 acc[4])
{
    __m512i lo[4], hi[4];
    __m512 dw[4];
    int rr;

    if (NR == 1 && NC == 1) /* one column: see BATON_MM_DECODE_PF_BYTES */
        baton_mm_decode_prefetch_l1(mm->w + r * mm->w_row_bytes + 4 * g * 34, 3);
#pragma GCC unroll 4
    for (rr = 0; rr < NR; rr++)
        q_weights(mm->w + (r + rr) * mm->w_row_bytes + 4 * g * 34, full, nblk, &lo[rr], &hi[rr],
                  &dw[rr]);
    q_cols(mm, c, g, NR, NC, q_lanes(full ? 4 : nblk), lo, hi, dw, acc);
}

/* (C0 + C2) + (C1 + C3) of q_cols' 2..4 columns: lane u, column u. */
static AI T5 __m128 q8_cols_sum(__m512 a)
{
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));

    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

static AI T5 void q_tile(const struct baton_mm *mm, uint64_t r, uint64_t c, const int NR,
                         const int NC)
{
    const uint64_t nb = mm->k / 32;
    float *y = mm->y + c * mm->ldy + r;
    __m512 acc[4];
    __m128 s[4];
    uint64_t g;
    int rr, j;

#pragma GCC unroll 4
    for (rr = 0; rr < NR; rr++)
        acc[rr] = _mm512_setzero_ps();
    for (g = 0; g < nb / 4; g++)
        q_group(mm, r, c, g, NR, NC, 1, 4, acc);
    if (nb % 4)
        q_group(mm, r, c, g, NR, NC, 0, nb % 4, acc);
    if (NC == 1) {
#pragma GCC unroll 4
        for (rr = 0; rr < NR; rr++)
            y[rr] = q8_chains_sum(acc[rr]);
        return;
    }
#pragma GCC unroll 4
    for (rr = 0; rr < 4; rr++)
        s[rr] = rr < NR ? q8_cols_sum(acc[rr]) : _mm_setzero_ps();
    if (NR == 4) {
        _MM_TRANSPOSE4_PS(s[0], s[1], s[2], s[3]); /* s[u]: column u's 4 rows */
#pragma GCC unroll 4
        for (j = 0; j < NC; j++)
            _mm_storeu_ps(y + j * mm->ldy, s[j]);
        return;
    }
#pragma GCC unroll 4
    for (rr = 0; rr < NR; rr++) {
        float o[4];

        _mm_storeu_ps(o, s[rr]);
#pragma GCC unroll 4
        for (j = 0; j < NC; j++)
            y[j * mm->ldy + rr] = o[j];
    }
}

static T5 void q8_0_decode(const struct baton_mm *mm, uint64_t r)
{
    uint64_t i;

    for (i = 0; i < Q_DECODE_ROWS; i++)
        q_tile(mm, r + i, 0, 1, 1);
}

/* NR rows of columns [c, c + nc), nc <= 4 */
static AI T5 void q8_0_cols(const struct baton_mm *mm, uint64_t r, uint64_t c, uint32_t nc,
                            const int NR)
{
    switch (nc) {
    case 1:
        q_tile(mm, r, c, NR, 1);
        break;
    case 2:
        q_tile(mm, r, c, NR, 2);
        break;
    case 3:
        q_tile(mm, r, c, NR, 3);
        break;
    default:
        q_tile(mm, r, c, NR, 4);
        break;
    }
}

static T5 void q8_0_tile_n(const struct baton_mm *mm, uint64_t r, uint64_t c, uint32_t nc)
{
    q8_0_cols(mm, r, c, nc, 4);
}

static T5 void q8_0_row(const struct baton_mm *mm, uint64_t r, uint64_t c, uint32_t nc)
{
    q8_0_cols(mm, r, c, nc, 1);
}

/* Rows per decode call and per batched tile (4 columns), measured on the
 * EPYC host at 4096 x 4096 (bench/kernels.c): Q8_0 decode is memory-bound
 * and two rows measured much slower than one (31 -> 12 GB/s); batched
 * Q8_0 gains from 4-row tiles (125 -> 160 GFLOP/s at 64 columns). Where
 * AVX-512 runs on 256-bit halves (baton_cpu_avx512_split: the Zen 4 of
 * those measurements) Q8_0 goes a row at a time up to 16 columns
 * (row_max_m, matmul.h): on the 87 MB d768 model the 4-row tiles could not
 * overlap the weight stream there (a batched decode of 4 sequences ran at
 * 255 tok/s against 420-500 a row at a time). On a Zen 5 it is the other
 * way round: the tiles, from 2 columns on, decoded 4 sequences at 665-690
 * tok/s against 529-538 a row at a time, 16 at 880-921 against 740-760.
 * With 2 columns each goes through the decode (Q8_DECODE_MAX_M; Zen 5,
 * bench_kernels 1 thread: k 4096 89 -> 103 GFLOP/s, k 14336 76 -> 89; 3
 * columns 139 -> 116 and 106 -> 97, so there the tiles stay). From
 * Q8_PACK_MIN_M columns q8_batched takes over (not where AVX-512 runs on
 * 256-bit halves: not measured there). */
#define Q8_DECODE_MAX_M 2u
static const struct baton_mm_tiles q8_0_tiles = {
    q8_0_decode, Q_DECODE_ROWS, q8_0_tile_n, 4, 4, q8_0_row, 0,
};
static const struct baton_mm_tiles q8_0_tiles_split = {
    q8_0_decode, Q_DECODE_ROWS, q8_0_tile_n, 4, 4, q8_0_row, 16,
};

/* ---- Q4_0 (matmul.h: one chain per output over whole blocks) ----
 * 16 rows at a time, row i in 32-bit lane i of every register: a block's
 * 16 x 16 nibble bytes are transposed (4 loads per register, then 8
 * unpacks) so that register q holds bytes 4q..4q+3 of each row, i.e.
 * elements 4q..4q+3 (low nibbles, w[q]) and 16+4q..16+4q+3 (high, w[4 +
 * q]); vpdpbusd of w[q] with those 4 activation bytes broadcast adds them
 * to each row's sum, 8 of them make the block's, started from lane 0 of
 * the activation's corr (-8 times the block's sum of x, which takes the
 * nibbles' offset back out): each lane ends as the exact isum, and one
 * multiply-add per block serves 16 outputs (the old lanes needed 4 per
 * block and output). Batched products transpose a chunk of blocks of 16
 * rows once into a buffer that every column then reads; decode, with one
 * column, sums before it transposes (q4_decode_group below). A strip of
 * fewer rows (the ragged end) reads its first row in the missing lanes
 * and stores only its own. IQ4_NL (nl set) is the same code with each
 * nibble looked up (vpshufb) as its grid level + 128, 1..241, and the
 * activation's corr -128 times the block's sum of x: vpdpbusd's sums of 4
 * unsigned-by-signed products do not saturate, so the isum stays exact. */
#define Q4_ROWS 16
#define Q4_KC 64u   /* blocks per transposed chunk: 64 x 576 bytes, in L1 */
/* Activations per pass over the rows (in L2). Each pass streams the whole
 * matrix again, so passes cost most where the matrix is beyond L3: 512 KiB
 * made 32 columns of 14336 inputs (28 KiB each) two passes, and 1 MiB
 * (one) took bench_kernels' q4_0 at k 14336 from 353-359 to 420-440
 * GFLOP/s at 32 columns and 350-364 -> 405-426 at 64 and 128 (Zen 5, 1 MiB
 * of L2 per core; k 4096 at 128 columns, one pass of exactly 1 MiB
 * instead of two, 493-502 -> 479-484, the matrix in L3 there). */
#define Q4_ACT_BYTES (1024u * 1024u)
#define Q4_COLS 8   /* columns per pass over a chunk */
#define Q4_BLOCK_BYTES 576u /* 8 registers of weights, 16 binary32 scales */
/* Up to this many columns (where AVX-512 runs at full width) each goes
 * through q4_decode_strip, strip by strip, so a strip's weights come from
 * memory once and from cache for the other columns: the packing below
 * does not pay for so few. bench_kernels (Zen 5, 1 thread), GFLOP/s,
 * packed against strips: k 4096 2 columns 108 -> 174, 3 142 -> 189, 4
 * 208 -> 190; k 14336 2 115 -> 176, 3 147 -> 186, 4 205 -> 191; 2
 * threads, k 4096, 2 columns 190 -> 326, 3 261 -> 326. */
#define Q4_STRIP_MAX_M 3u

static AI uint16_t load_u16(const uint8_t *p)
{
    uint16_t v;

    memcpy(&v, p, sizeof(v));
    return v;
}

static AI int32_t load_i32(const uint8_t *p)
{
    int32_t v;

    memcpy(&v, p, sizeof(v));
    return v;
}

/* The binary16 scales at p + off[i] of the strip's 16 rows, widened
 * (lane i: row i). */
static AI T5 __m512 q_scales16(const uint8_t *p, const uint64_t off[Q4_ROWS])
{
    return _mm512_cvtph_ps(_mm256_setr_epi16(
        (short)load_u16(p + off[0]), (short)load_u16(p + off[1]), (short)load_u16(p + off[2]),
        (short)load_u16(p + off[3]), (short)load_u16(p + off[4]), (short)load_u16(p + off[5]),
        (short)load_u16(p + off[6]), (short)load_u16(p + off[7]), (short)load_u16(p + off[8]),
        (short)load_u16(p + off[9]), (short)load_u16(p + off[10]), (short)load_u16(p + off[11]),
        (short)load_u16(p + off[12]), (short)load_u16(p + off[13]), (short)load_u16(p + off[14]),
        (short)load_u16(p + off[15])));
}

/* The unsigned bytes of IQ4_NL's nibbles: grid level + 128 (the level's
 * top bit flipped) in each 128-bit lane, a vpshufb table. */
static AI T5 __m512i q4_nl_table(void)
{
    return _mm512_xor_si512(_mm512_broadcast_i32x4(k_iq4_grid()), _mm512_set1_epi8((char)0x80));
}

/* Block b of the strip's rows (row i at w + off[i]): w[0..7] as above,
 * *dw the 16 rows' binary16 scales widened; nl: IQ4_NL's levels. */
static AI T5 void q4_block(const uint8_t *w, const uint64_t off[Q4_ROWS], uint64_t b, __m512i wq[8],
                           __m512 *dw, const int nl)
{
    const uint8_t *p = w + b * 18;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512i x[4], a[4];
    int t;

#pragma GCC unroll 4
    for (t = 0; t < 4; t++) {
        __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(p + off[t] + 2)));

        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + off[4 + t] + 2)), 1);
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + off[8 + t] + 2)), 2);
        x[t] = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + off[12 + t] + 2)), 3);
    }
    /* per 128-bit lane i: rows 4i..4i+3, 4 dwords each -> dword q of the 4 */
    a[0] = _mm512_unpacklo_epi32(x[0], x[1]);
    a[1] = _mm512_unpackhi_epi32(x[0], x[1]);
    a[2] = _mm512_unpacklo_epi32(x[2], x[3]);
    a[3] = _mm512_unpackhi_epi32(x[2], x[3]);
    x[0] = _mm512_unpacklo_epi64(a[0], a[2]);
    x[1] = _mm512_unpackhi_epi64(a[0], a[2]);
    x[2] = _mm512_unpacklo_epi64(a[1], a[3]);
    x[3] = _mm512_unpackhi_epi64(a[1], a[3]);
#pragma GCC unroll 4
    for (t = 0; t < 4; t++) {
        wq[t] = _mm512_and_si512(x[t], m4);
        wq[4 + t] = _mm512_and_si512(_mm512_srli_epi16(x[t], 4), m4);
        if (nl) {
            wq[t] = _mm512_shuffle_epi8(q4_nl_table(), wq[t]);
            wq[4 + t] = _mm512_shuffle_epi8(q4_nl_table(), wq[4 + t]);
        }
    }
    *dw = q_scales16(p, off);
}

/* The activations of block b of a column at col. */
static AI const uint8_t *q4_xb(const uint8_t *col, uint64_t b)
{
    return col + b / 4 * BATON_ACT_GROUP_BYTES + 16 * (b % 4);
}

/* acc = fma(dw * dx, isum, acc) for one block of activations at xb. */
static AI T5 __m512 q4_step(const uint8_t *xb, const __m512i wq[8], __m512 dw, __m512 acc)
{
    /* two integer chains (low and high nibbles), then their exact sum */
    __m512i s0 = _mm512_set1_epi32(load_i32(xb + 128)), s1 = _mm512_setzero_si512();
    int q;

#pragma GCC unroll 4
    for (q = 0; q < 4; q++) {
        s0 = _mm512_dpbusd_epi32(s0, wq[q], _mm512_set1_epi32(load_i32(xb + 4 * q)));
        s1 = _mm512_dpbusd_epi32(s1, wq[4 + q], _mm512_set1_epi32(load_i32(xb + 64 + 4 * q)));
    }
    return _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(((const float *)(xb + 192))[0])),
                           _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), acc);
}

/* off[i] = the byte offset of the strip's row i from its row 0 (0 for
 * i >= nr); the strip starts at the returned pointer */
static AI T5 const uint8_t *q4_offsets(const struct baton_mm *mm, uint64_t r, uint32_t nr,
                                       uint64_t off[Q4_ROWS])
{
    int i;

    for (i = 0; i < Q4_ROWS; i++)
        off[i] = (uint32_t)i < nr ? (uint64_t)i * mm->w_row_bytes : 0;
    return mm->w + r * mm->w_row_bytes;
}

static AI T5 __mmask16 q4_mask(uint32_t nr)
{
    return (__mmask16)((1u << nr) - 1);
}

/* Decode: a group of 4 blocks (72 bytes) of each of the strip's 16 rows,
 * unpacked as the Q8_0 code's registers (lanes 4j + l: the 8-element
 * partial sums of block j), then summed and transposed together by blends
 * and in-lane shuffles: two rows' registers give one whose lane 2m + s is
 * row s's sum of lanes 2m, 2m + 1; two of those give one whose lane 4j + u
 * is row u's sum of block j (4 rows per register); a 4 x 4 transpose of
 * 128-bit pieces then makes s[j] (lane i: row i's block j). The scales go
 * the same way by word permutes of the rows' first 64 bytes. Fewer
 * operations per block than transposing the bytes first (q4_block), which
 * batched products use since their chunk is transposed once.
 *
 * Word indices of a group's 4 x 16 nibble bytes in its 72 bytes (a
 * two-source permute of bytes 64..71 and 0..63: 32.. index the second;
 * the tail goes first, so the permute may overwrite it rather than a copy
 * of bytes 0..63, which the scales still need). */
static const uint16_t q4_nib_idx[32] = {33, 34, 35, 36, 37, 38, 39, 40, 42, 43, 44,
                                        45, 46, 47, 48, 49, 51, 52, 53, 54, 55, 56,
                                        57, 58, 60, 61, 62, 63, 0,  1,  2,  3};
/* scale words: level n leaves word n j + t = row t of the n rows' block j */
static const uint16_t q4_w1[32] = {0, 32, 9, 41, 18, 50, 27, 59};
static const uint16_t q4_w2[32] = {0, 1, 32, 33, 2, 3, 34, 35, 4, 5, 36, 37, 6, 7, 38, 39};
static const uint16_t q4_w3[32] = {0,  1,  2,  3,  32, 33, 34, 35, 4,  5,  6,  7,  36, 37, 38, 39,
                                   8,  9,  10, 11, 40, 41, 42, 43, 12, 13, 14, 15, 44, 45, 46, 47};
static const uint16_t q4_w4a[32] = {0,  1,  2,  3,  4,  5,  6,  7,  32, 33, 34, 35, 36, 37, 38, 39,
                                    8,  9,  10, 11, 12, 13, 14, 15, 40, 41, 42, 43, 44, 45, 46, 47};
static const uint16_t q4_w4b[32] = {16, 17, 18, 19, 20, 21, 22, 23, 48, 49, 50, 51, 52, 53, 54, 55,
                                    24, 25, 26, 27, 28, 29, 30, 31, 56, 57, 58, 59, 60, 61, 62, 63};

static AI T5 __m512i q4_words(__m512i a, const uint16_t *idx, __m512i b)
{
    return _mm512_permutex2var_epi16(a, _mm512_loadu_si512(idx), b);
}

/* Row i's partial sums of group g (lanes 4j + l) and its first 64 bytes;
 * nl: IQ4_NL's levels. */
static AI T5 __m512i q4_row_sums(const uint8_t *pi, __m512i nidx, __m512i xlo, __m512i xhi,
                                 __m512i cv, __m512i *z0, const int nl)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i z1 = _mm512_zextsi128_si512(_mm_loadl_epi64((const __m128i *)(pi + 64)));
    __m512i nib, lo, hi;

    *z0 = _mm512_loadu_si512(pi);
    nib = _mm512_permutex2var_epi16(z1, nidx, *z0);
    lo = _mm512_and_si512(nib, m4);
    hi = _mm512_and_si512(_mm512_srli_epi16(nib, 4), m4);
    if (nl) {
        lo = _mm512_shuffle_epi8(q4_nl_table(), lo);
        hi = _mm512_shuffle_epi8(q4_nl_table(), hi);
    }
    return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(cv, lo, xlo), hi, xhi);
}

/* Group g (blocks 4g..4g+3, all present) of the strip (rows at w + off[i])
 * against column 0: acc's chains over the 4 blocks in order. */
static AI T5 __m512 q4_decode_group(const uint8_t *col, const uint8_t *w,
                                    const uint64_t off[Q4_ROWS], uint64_t g, __m512 acc,
                                    const int nl)
{
    const uint8_t *grp = col + g * BATON_ACT_GROUP_BYTES;
    const __m512i xlo = _mm512_loadu_si512(grp), xhi = _mm512_loadu_si512(grp + 64);
    const __m512i cv = _mm512_loadu_si512(grp + 128), nidx = _mm512_loadu_si512(q4_nib_idx);
    const uint8_t *p = w + g * 72;
    __m512i q[4], wd[4], s[4], u[4];
    __m512 d01, d23;
    int c, j;

#pragma GCC unroll 4
    for (c = 0; c < 4; c++) {
        __m512i v[4], z0[4];
        int t;

#pragma GCC unroll 4
        for (t = 0; t < 4; t++)
            v[t] = q4_row_sums(p + off[4 * c + t], nidx, xlo, xhi, cv, &z0[t], nl);
        q[c] = q4_sum4(q4_sum2(v[0], v[1]), q4_sum2(v[2], v[3]));
        wd[c] = q4_words(q4_words(z0[0], q4_w1, z0[1]), q4_w2, q4_words(z0[2], q4_w1, z0[3]));
    }
    /* q[c]'s 128-bit piece j is rows 4c..4c+3 of block j */
    u[0] = _mm512_shuffle_i32x4(q[0], q[1], 0x44);
    u[1] = _mm512_shuffle_i32x4(q[0], q[1], 0xEE);
    u[2] = _mm512_shuffle_i32x4(q[2], q[3], 0x44);
    u[3] = _mm512_shuffle_i32x4(q[2], q[3], 0xEE);
    s[0] = _mm512_shuffle_i32x4(u[0], u[2], 0x88);
    s[1] = _mm512_shuffle_i32x4(u[0], u[2], 0xDD);
    s[2] = _mm512_shuffle_i32x4(u[1], u[3], 0x88);
    s[3] = _mm512_shuffle_i32x4(u[1], u[3], 0xDD);
    wd[0] = q4_words(wd[0], q4_w3, wd[1]);
    wd[1] = q4_words(wd[2], q4_w3, wd[3]);
    d01 = _mm512_castsi512_ps(q4_words(wd[0], q4_w4a, wd[1]));
    d23 = _mm512_castsi512_ps(q4_words(wd[0], q4_w4b, wd[1]));
#pragma GCC unroll 4
    for (j = 0; j < 4; j++) {
        const __m512i h = _mm512_castps_si512(j < 2 ? d01 : d23);
        const __m256i hw = (j & 1) ? _mm512_extracti64x4_epi64(h, 1) : _mm512_castsi512_si256(h);
        const __m512 d = _mm512_mul_ps(_mm512_cvtph_ps(hw),
                                       _mm512_set1_ps(((const float *)(grp + 192))[4 * j]));

        acc = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(s[j]), acc);
    }
    return acc;
}

/* Rows [r, r + nr) of column 0: whole groups by q4_decode_group, the
 * last blocks (k / 32 % 4 of them) by q4_block. The strip's rows are one
 * contiguous range, and so is the strip that starts at least
 * BATON_MM_DECODE_PF_BYTES (8 KiB, the one-row walks' distance, matmul.h)
 * after this one's start (the next strip for rows of
 * 928 inputs or more, for shorter rows a later one): it is prefetched into
 * L1 (L2 until the thirty-third session: matmul.h,
 * baton_mm_decode_prefetch_l1) line by line, a slice per group of 4 blocks and the rest at the end,
 * a linear stream where the 16 rows' interleaved reads would be 16 short
 * ones (AMD EPYC Zen 5 host, 4096 x 4096 beyond the caches: 13 -> 22-25
 * GB/s with the whole next strip prefetched as the strip started, the
 * form until the twenty-fifth session; that burst stalled on its own
 * prefetches). Against the burst, 1 thread: bench_kernels' q4_0 at 4096
 * inputs streamed 20.7-20.8 -> 23.4-24.9 GB/s but from L3 31.8-33.3 ->
 * 28.2-29.5; the d4096 Q4_0 model of bench/roofline.sh decoded at 77-92 ->
 * 111-115 tok/s, the d768 one within the noise (src/compute/cpu/README.md).
 * Measured before: prefetching every second line (its pair comes with it)
 * streamed slower at 768 inputs (22 against 26 GB/s), and 16-32 KiB ahead
 * of the rows being read slowed the d768 model's decode. */
static AI T5 void q4_decode_strip(const struct baton_mm *mm, uint64_t r, uint32_t nr, uint64_t c,
                                  const int nl)
{
    const uint8_t *col = mm->act + c * mm->act_col_bytes;
    const uint64_t nb = mm->k / 32, ng = nb / 4, sb = Q4_ROWS * mm->w_row_bytes;
    const uint64_t lines = (sb + 63) / 64;
    uint64_t off[Q4_ROWS];
    const uint8_t *w = q4_offsets(mm, r, nr, off);
    /* an address, never dereferenced: it may lie past the weights */
    const uintptr_t pf = (uintptr_t)w + (1 + (BATON_MM_DECODE_PF_BYTES - 1) / sb) * sb;
    uint64_t g, b, l = 0, le;
    __m512 acc = _mm512_setzero_ps();

    for (g = 0; g < ng; g++) {
        for (le = (g + 1) * lines / ng; l < le; l++)
            _mm_prefetch((const char *)(pf + 64 * l), _MM_HINT_T0);
        acc = q4_decode_group(col, w, off, g, acc, nl);
    }
    for (; l < lines; l++)
        _mm_prefetch((const char *)(pf + 64 * l), _MM_HINT_T0);
    for (b = nb / 4 * 4; b < nb; b++) {
        __m512i wq[8];
        __m512 dw;

        q4_block(w, off, b, wq, &dw, nl);
        acc = q4_step(q4_xb(col, b), wq, dw, acc);
    }
    _mm512_mask_storeu_ps(mm->y + c * mm->ldy + r, q4_mask(nr), acc);
}

/* Columns [c, c + NC) of the strip at r over the packed blocks [b0, b1):
 * the chains start at 0 (b0 == 0) or from y. */
static AI T5 void q4_cols(const struct baton_mm *mm, const uint8_t *buf, uint64_t r, uint32_t nr,
                          uint64_t b0, uint64_t b1, uint64_t c, const int NC)
{
    const __mmask16 mask = q4_mask(nr);
    const uint8_t *col = mm->act + c * mm->act_col_bytes;
    const uint64_t cs = mm->act_col_bytes;
    __m512 acc[8];
    uint64_t b;
    int j, q;

#pragma GCC unroll 8
    for (j = 0; j < NC; j++)
        acc[j] = b0 == 0 ? _mm512_setzero_ps()
                         : _mm512_maskz_loadu_ps(mask, mm->y + (c + j) * mm->ldy + r);
    for (b = b0; b < b1; b++) {
        const uint8_t *o = buf + (b - b0) * Q4_BLOCK_BYTES, *xb = q4_xb(col, b);
        __m512i wq[8];
        const __m512 dw = _mm512_load_ps(o + 512);

#pragma GCC unroll 8
        for (q = 0; q < 8; q++)
            wq[q] = _mm512_load_si512(o + 64 * q);
#pragma GCC unroll 8
        for (j = 0; j < NC; j++)
            acc[j] = q4_step(xb + j * cs, wq, dw, acc[j]);
    }
#pragma GCC unroll 8
    for (j = 0; j < NC; j++)
        _mm512_mask_storeu_ps(mm->y + (c + j) * mm->ldy + r, mask, acc[j]);
}

static T5 void q4_cols_n(const struct baton_mm *mm, const uint8_t *buf, uint64_t r, uint32_t nr,
                         uint64_t b0, uint64_t b1, uint64_t c, uint32_t nc)
{
    switch (nc) {
    case 1:
        q4_cols(mm, buf, r, nr, b0, b1, c, 1);
        break;
    case 2:
        q4_cols(mm, buf, r, nr, b0, b1, c, 2);
        break;
    case 3:
        q4_cols(mm, buf, r, nr, b0, b1, c, 3);
        break;
    case 4:
        q4_cols(mm, buf, r, nr, b0, b1, c, 4);
        break;
    case 5:
        q4_cols(mm, buf, r, nr, b0, b1, c, 5);
        break;
    case 6:
        q4_cols(mm, buf, r, nr, b0, b1, c, 6);
        break;
    case 7:
        q4_cols(mm, buf, r, nr, b0, b1, c, 7);
        break;
    default:
        q4_cols(mm, buf, r, nr, b0, b1, c, 8);
        break;
    }
}


/* ---- Q8_0 batched: Q4_0's transposed chunks, four chains per output ----
 * A chunk of blocks of a 16-row strip is transposed into Q4_BLOCK_BYTES
 * per block (q8_block: the registers q4_block gives Q4_0, lane i of w[q]
 * holding bytes 4q..4q+3 of row i's elements 0..15 and w[4 + q] of its
 * elements 16..31, as unsigned bytes w + 128, which lane 0 of the
 * activation's corr, -128 times the block's sum of x, takes back out), and
 * q4_step adds block b into chain b % 4 of each of Q8_COLS columns: 8
 * vpdpbusd and 3 float operations per block, 16 rows and column, where the
 * 16-lane order of the one-row tiles took 8 and 12. The chains wait in a
 * buffer between chunks (y has room for one). (Until the thirty-sixth
 * session the batched products kept Q5_0's 16 lanes: bench_kernels, k
 * 4096, 1 thread, 289-307 GFLOP/s at 32 columns, 352 at 128.) */
#define Q8_COLS 4 /* 16 chains in registers; 5 or 6 columns measured the same */
#define Q8_PASS_MAX 64u /* columns per pass at most: the chains' buffer */
/* Fewer columns go through the tiles. bench_kernels (Zen 5, 1 thread,
 * GFLOP/s, k 4096 / 14336), tiles against q8_batched: 4 columns 190 / 137
 * against 148 / 149, 8 254 / 236 against 215 / 230, 12 266 / 262 against
 * 277 / 278; 16 and 32 columns, old tiles and packed strips against
 * q8_batched, 241 -> 315 and 285 -> 424 at k 4096. */
#define Q8_PACK_MIN_M 12u

/* Block b of the strip's rows (row i at w + off[i]) into the registers
 * q4_block gives Q4_0's. */
static AI T5 void q8_block(const uint8_t *w, const uint64_t off[Q4_ROWS], uint64_t b,
                           __m512i wq[8], __m512 *dw)
{
    const uint8_t *p = w + b * BATON_Q8_0_BLOCK_BYTES;
    const __m512i sign = _mm512_set1_epi8((char)0x80);
    __m512i x[4], a[4];
    int h, t;

#pragma GCC unroll 2
    for (h = 0; h < 2; h++) {
        const uint8_t *q = p + 2 + 16 * h;

#pragma GCC unroll 4
        for (t = 0; t < 4; t++) {
            __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(q + off[t])));

            v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(q + off[4 + t])), 1);
            v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(q + off[8 + t])), 2);
            x[t] = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(q + off[12 + t])), 3);
        }
        a[0] = _mm512_unpacklo_epi32(x[0], x[1]);
        a[1] = _mm512_unpackhi_epi32(x[0], x[1]);
        a[2] = _mm512_unpacklo_epi32(x[2], x[3]);
        a[3] = _mm512_unpackhi_epi32(x[2], x[3]);
        wq[4 * h] = _mm512_xor_si512(_mm512_unpacklo_epi64(a[0], a[2]), sign);
        wq[4 * h + 1] = _mm512_xor_si512(_mm512_unpackhi_epi64(a[0], a[2]), sign);
        wq[4 * h + 2] = _mm512_xor_si512(_mm512_unpacklo_epi64(a[1], a[3]), sign);
        wq[4 * h + 3] = _mm512_xor_si512(_mm512_unpackhi_epi64(a[1], a[3]), sign);
    }
    *dw = q_scales16(p, off);
}

/* Blocks [b0, b1) of the strip at r into buf (Q4_BLOCK_BYTES each), by
 * q8_block (Q8) or q4_block (nl: IQ4_NL). */
static AI T5 void q_pack(const struct baton_mm *mm, uint64_t r, uint32_t nr, uint64_t b0,
                         uint64_t b1, uint8_t *buf, const int Q8, const int nl)
{
    uint64_t off[Q4_ROWS];
    const uint8_t *w = q4_offsets(mm, r, nr, off);
    uint64_t b;
    int q;

    for (b = b0; b < b1; b++) {
        __m512i wq[8];
        __m512 dw;
        uint8_t *o = buf + (b - b0) * Q4_BLOCK_BYTES;

        if (Q8)
            q8_block(w, off, b, wq, &dw);
        else
            q4_block(w, off, b, wq, &dw, nl);
#pragma GCC unroll 8
        for (q = 0; q < 8; q++)
            _mm512_store_si512(o + 64 * q, wq[q]);
        _mm512_store_ps(o + 512, dw);
    }
}

/* q_pack out of line (called once per chunk, beside the column loop) */
static T5 void q4_pack(const struct baton_mm *mm, uint64_t r, uint32_t nr, uint64_t b0,
                       uint64_t b1, uint8_t *buf)
{
    q_pack(mm, r, nr, b0, b1, buf, 0, 0);
}

static T5 void iq4_nl_pack(const struct baton_mm *mm, uint64_t r, uint32_t nr, uint64_t b0,
                           uint64_t b1, uint8_t *buf)
{
    q_pack(mm, r, nr, b0, b1, buf, 0, 1);
}

static T5 void q8_pack(const struct baton_mm *mm, uint64_t r, uint32_t nr, uint64_t b0,
                       uint64_t b1, uint8_t *buf)
{
    q_pack(mm, r, nr, b0, b1, buf, 1, 0);
}

/* Packed block b (of the chunk from b0) into chain t of NC columns. */
static AI T5 void q8_cols_block(const struct baton_mm *mm, const uint8_t *buf, uint64_t b0,
                                uint64_t b, const uint8_t *col, const int NC, int t,
                                __m512 acc[Q8_COLS][4])
{
    const uint8_t *o = buf + (b - b0) * Q4_BLOCK_BYTES, *xb = q4_xb(col, b);
    const __m512 dw = _mm512_load_ps(o + 512);
    __m512i wq[8];
    int j, q;

#pragma GCC unroll 8
    for (q = 0; q < 8; q++)
        wq[q] = _mm512_load_si512(o + 64 * q);
#pragma GCC unroll 4
    for (j = 0; j < NC; j++)
        acc[j][t] = q4_step(xb + j * mm->act_col_bytes, wq, dw, acc[j][t]);
}

/* Columns [c, c + NC) of the strip at r over the packed blocks [b0, b1)
 * (b0 a multiple of 4): the chains start at 0 (b0 == 0) or from st (16
 * floats per column and chain), and end in st or, after the row's last
 * block, summed into y. */
static AI T5 void q8_cols(const struct baton_mm *mm, const uint8_t *buf, uint64_t r, uint32_t nr,
                          uint64_t b0, uint64_t b1, uint64_t c, float *st, const int NC)
{
    const __mmask16 mask = q4_mask(nr);
    const uint8_t *col = mm->act + c * mm->act_col_bytes;
    __m512 acc[Q8_COLS][4];
    uint64_t b;
    int j, t;

#pragma GCC unroll 4
    for (j = 0; j < NC; j++)
#pragma GCC unroll 4
        for (t = 0; t < 4; t++)
            acc[j][t] = b0 == 0 ? _mm512_setzero_ps() : _mm512_load_ps(st + 16 * (4 * j + t));
    for (b = b0; b1 - b >= 4; b += 4)
#pragma GCC unroll 4
        for (t = 0; t < 4; t++)
            q8_cols_block(mm, buf, b0, b + (uint64_t)t, col, NC, t, acc);
    if (b < b1)
        q8_cols_block(mm, buf, b0, b, col, NC, 0, acc);
    if (b + 1 < b1)
        q8_cols_block(mm, buf, b0, b + 1, col, NC, 1, acc);
    if (b + 2 < b1)
        q8_cols_block(mm, buf, b0, b + 2, col, NC, 2, acc);
    if (b1 < mm->k / 32) {
#pragma GCC unroll 4
        for (j = 0; j < NC; j++)
#pragma GCC unroll 4
            for (t = 0; t < 4; t++)
                _mm512_store_ps(st + 16 * (4 * j + t), acc[j][t]);
        return;
    }
#pragma GCC unroll 4
    for (j = 0; j < NC; j++)
        _mm512_mask_storeu_ps(mm->y + (c + j) * mm->ldy + r, mask,
                              _mm512_add_ps(_mm512_add_ps(acc[j][0], acc[j][2]),
                                            _mm512_add_ps(acc[j][1], acc[j][3])));
}

static T5 void q8_cols_n(const struct baton_mm *mm, const uint8_t *buf, uint64_t r, uint32_t nr,
                         uint64_t b0, uint64_t b1, uint64_t c, uint32_t nc, float *st)
{
    switch (nc) {
    case 1:
        q8_cols(mm, buf, r, nr, b0, b1, c, st, 1);
        break;
    case 2:
        q8_cols(mm, buf, r, nr, b0, b1, c, st, 2);
        break;
    case 3:
        q8_cols(mm, buf, r, nr, b0, b1, c, st, 3);
        break;
    default:
        q8_cols(mm, buf, r, nr, b0, b1, c, st, 4);
        break;
    }
}


/* Rows [r0, r1) against every column: passes of cgn columns; in each,
 * 16-row strips, whose chunks of Q4_KC blocks are packed once (q8_pack,
 * q4_pack or, nl, iq4_nl_pack) and read by cols columns at a time (q8_cols_n, its
 * chains in st, or q4_cols_n). The next strip's rows, one contiguous
 * range, are prefetched into L2 a slice per call: the packing reads 16
 * rows at once, which the hardware's stream prefetch does not follow. */
static AI T5 void q_chunks(const struct baton_mm *mm, uint64_t r0, uint64_t r1, uint64_t cgn,
                           const uint32_t cols, const int Q8, const int nl, float *st)
{
    const uint64_t nb = mm->k / 32;
    _Alignas(64) uint8_t buf[Q4_KC * Q4_BLOCK_BYTES];
    uint64_t r, cg, b0, c;

    for (cg = 0; cg < mm->m; cg += cgn) {
        const uint64_t ce = mm->m - cg < cgn ? mm->m : cg + cgn;

        for (r = r0; r < r1; r += Q4_ROWS) {
            const uint32_t nr = r1 - r < Q4_ROWS ? (uint32_t)(r1 - r) : Q4_ROWS;
            const uint64_t nx = r1 - r - nr < Q4_ROWS ? r1 - r - nr : Q4_ROWS;
            const char *pf = (const char *)mm->w + (r + nr) * mm->w_row_bytes;
            const uint64_t pf_lines = (nx * mm->w_row_bytes + 63) / 64;
            const uint64_t passes = (nb + Q4_KC - 1) / Q4_KC * ((ce - cg + cols - 1) / cols);
            const uint64_t pf_step = (pf_lines + passes - 1) / passes;
            uint64_t pl = 0, pe;

            for (b0 = 0; b0 < nb; b0 += Q4_KC) {
                const uint64_t b1 = nb - b0 < Q4_KC ? nb : b0 + Q4_KC;

                if (Q8)
                    q8_pack(mm, r, nr, b0, b1, buf);
                else if (nl)
                    iq4_nl_pack(mm, r, nr, b0, b1, buf);
                else
                    q4_pack(mm, r, nr, b0, b1, buf);
                for (c = cg; c < ce; c += cols) {
                    const uint32_t nc = ce - c < cols ? (uint32_t)(ce - c) : cols;

                    for (pe = pl + pf_step < pf_lines ? pl + pf_step : pf_lines; pl < pe; pl++)
                        _mm_prefetch(pf + 64 * pl, _MM_HINT_T1);
                    if (Q8) /* 4 chains x 16 floats per column */
                        q8_cols_n(mm, buf, r, nr, b0, b1, c, nc, st + 64 * (c - cg));
                    else
                        q4_cols_n(mm, buf, r, nr, b0, b1, c, nc);
                }
            }
        }
    }
}

/* Q4_0 (nl 0) or IQ4_NL (nl 1) */
static AI T5 void q4_mul_mat(const struct baton_mm *mm, uint64_t r0, uint64_t r1, const int nl)
{
    /* columns per pass: their activations within Q4_ACT_BYTES (in L2) */
    uint64_t cgn = Q4_ACT_BYTES / mm->act_col_bytes / Q4_COLS * Q4_COLS;
    uint64_t r, c;

    if (mm->m == 1 || (mm->m <= Q4_STRIP_MAX_M && !baton_cpu_avx512_split())) {
        for (r = r0; r < r1; r += Q4_ROWS)
            for (c = 0; c < mm->m; c++)
                q4_decode_strip(mm, r, r1 - r < Q4_ROWS ? (uint32_t)(r1 - r) : Q4_ROWS, c, nl);
        return;
    }
    q_chunks(mm, r0, r1, cgn < Q4_COLS ? Q4_COLS : cgn, Q4_COLS, 0, nl, NULL);
}

static T5 void avx512_q4_0(const struct baton_mm *mm, uint64_t r0, uint64_t r1)
{
    q4_mul_mat(mm, r0, r1, 0);
}

static T5 void avx512_iq4_nl(const struct baton_mm *mm, uint64_t r0, uint64_t r1)
{
    q4_mul_mat(mm, r0, r1, 1);
}

/* Rows [r0, r1) of Q8_0 weights against mm->m >= Q8_PACK_MIN_M columns:
 * avx512_q4_0's passes, strips and chunks, Q8_COLS columns at a time, at
 * most Q8_PASS_MAX a pass (the activations within Q4_ACT_BYTES, the
 * chains within st). */
static T5 void q8_batched(const struct baton_mm *mm, uint64_t r0, uint64_t r1)
{
    _Alignas(64) float st[Q8_PASS_MAX * 4 * 16];
    uint64_t cgn = Q4_ACT_BYTES / mm->act_col_bytes / Q8_COLS * Q8_COLS;

    if (cgn < Q8_COLS)
        cgn = Q8_COLS;
    q_chunks(mm, r0, r1, cgn > Q8_PASS_MAX ? Q8_PASS_MAX : cgn, Q8_COLS, 1, 0, st);
}

static T5 void avx512_q8_0(const struct baton_mm *mm, uint64_t r0, uint64_t r1)
{
    if (mm->m >= Q8_PACK_MIN_M && !baton_cpu_avx512_split()) {
        q8_batched(mm, r0, r1);
        return;
    }
    avx512_drive(mm, r0, r1, baton_cpu_avx512_split() ? &q8_0_tiles_split : &q8_0_tiles,
                 Q8_DECODE_MAX_M);
}

/* ---- exp, SILU (expf.h's steps on 8 binary64 lanes, as baton_cpu_expf) ---- */

static AI T5 __m256 exp8d(__m256 x)
{
    const __m512d shift = _mm512_set1_pd(BATON_EXP_SHIFT);
    const __m512i low4 = _mm512_set1_epi64(15);
    const __m512d xd = _mm512_min_pd(
        _mm512_max_pd(_mm512_cvtps_pd(x), _mm512_set1_pd(BATON_EXP_X_MIN)),
        _mm512_set1_pd(BATON_EXP_X_MAX));
    const __m512d t =
        _mm512_add_pd(_mm512_mul_pd(xd, _mm512_set1_pd(BATON_EXP_INV_LN2_16)), shift);
    const __m512d kd = _mm512_sub_pd(t, shift);
    const __m512i ki = _mm512_sub_epi64(_mm512_castpd_si512(t), _mm512_castpd_si512(shift));
    /* the index's low 4 bits pick one of the 16 entries of the two registers */
    const __m512d tj = _mm512_permutex2var_pd(_mm512_loadu_pd(baton_exp_table), ki,
                                              _mm512_loadu_pd(baton_exp_table + 8));
    const __m512d s = _mm512_castsi512_pd(_mm512_add_epi64(
        _mm512_castpd_si512(tj), _mm512_slli_epi64(_mm512_andnot_si512(low4, ki), 48)));
    __m512d r = _mm512_sub_pd(xd, _mm512_mul_pd(kd, _mm512_set1_pd(BATON_EXP_LN2_16_HI)));
    __m512d p = _mm512_set1_pd(BATON_EXP_C7);

    r = _mm512_sub_pd(r, _mm512_mul_pd(kd, _mm512_set1_pd(BATON_EXP_LN2_16_LO)));
    p = _mm512_add_pd(_mm512_mul_pd(p, r), _mm512_set1_pd(BATON_EXP_C6));
    p = _mm512_add_pd(_mm512_mul_pd(p, r), _mm512_set1_pd(BATON_EXP_C5));
    p = _mm512_add_pd(_mm512_mul_pd(p, r), _mm512_set1_pd(BATON_EXP_C4));
    p = _mm512_add_pd(_mm512_mul_pd(p, r), _mm512_set1_pd(BATON_EXP_C3));
    p = _mm512_add_pd(_mm512_mul_pd(p, r), _mm512_set1_pd(BATON_EXP_C2));
    p = _mm512_add_pd(_mm512_mul_pd(p, r), _mm512_set1_pd(1.0));
    p = _mm512_add_pd(_mm512_mul_pd(p, r), _mm512_set1_pd(1.0));
    return _mm512_cvtpd_ps(_mm512_mul_pd(s, p));
}

/* baton_cpu_expf on 16 lanes (NaN lanes: x + x). */
static AI T5 __m512 exp16(__m512 x)
{
    const __m512 y = _mm512_insertf32x8(_mm512_castps256_ps512(exp8d(_mm512_castps512_ps256(x))),
                                        exp8d(_mm512_extractf32x8_ps(x, 1)), 1);

    return _mm512_mask_add_ps(y, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x, x);
}

static AI T5 __m512 silu16(__m512 v)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 e = exp16(_mm512_castsi512_ps(
        _mm512_xor_si512(_mm512_castps_si512(v), _mm512_set1_epi32((int)0x80000000u))));

    return _mm512_mul_ps(v, _mm512_div_ps(one, _mm512_add_ps(one, e)));
}

/* GELU (matmul.h): z in the scalar order, then SILU's steps on it */
static AI T5 __m512 gelu16(__m512 v)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 t = _mm512_add_ps(
        one, _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(BATON_GELU_A), v), v));
    const __m512 z = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(BATON_GELU_C), v), t);
    const __m512 e = exp16(_mm512_castsi512_ps(
        _mm512_xor_si512(_mm512_castps_si512(z), _mm512_set1_epi32((int)0x80000000u))));

    return _mm512_mul_ps(v, _mm512_div_ps(one, _mm512_add_ps(one, e)));
}

/* ---- ATTENTION's weighted sum (matmul_avx2.c's wsum_rows on 16 lanes) ----
 * Each output element is its own chain, acc + a[s] * v[s] (multiply, then
 * add) for s ascending, so the lanes' width changes no bit; the 16-lane
 * ops halve the instructions of the AVX2 form (4-5 % of a d768 model's
 * prefill went there). Elements past the last multiple of 16 go to the AVX2
 * form. */
static AI T5 __m512 wsum_load16(const void *v, const int half)
{
    return half ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)v))
                : _mm512_loadu_ps((const float *)v);
}

/* out[0 .. 16 * NA) over every s; v points at element 0 of row 0, rows vs
 * elements apart. */
static AI T5 void wsum_block16(const void *v, uint64_t vs, const float *a, uint64_t n, float *out,
                               const int NA, const int half)
{
    const size_t eb = half ? 2 : 4;
    __m512 acc[8];
    uint64_t s;
    int j;

#pragma GCC unroll 8
    for (j = 0; j < NA; j++)
        acc[j] = _mm512_setzero_ps();
    for (s = 0; s < n; s++) {
        const __m512 w = _mm512_set1_ps(a[s]);
        const uint8_t *vr = (const uint8_t *)v + s * vs * eb;

#pragma GCC unroll 8
        for (j = 0; j < NA; j++)
            acc[j] = _mm512_add_ps(acc[j], _mm512_mul_ps(w, wsum_load16(vr + 16 * j * eb, half)));
    }
#pragma GCC unroll 8
    for (j = 0; j < NA; j++)
        _mm512_storeu_ps(out + 16 * j, acc[j]);
}

static AI T5 void wsum_rows16(const void *v, uint64_t vs, const float *a, uint64_t n, uint64_t k,
                              float *out, const int half)
{
    const size_t eb = half ? 2 : 4;
    const uint8_t *vb = v;
    uint64_t i = 0;

    for (; k - i >= 128; i += 128)
        wsum_block16(vb + i * eb, vs, a, n, out + i, 8, half);
    for (; k - i >= 64; i += 64)
        wsum_block16(vb + i * eb, vs, a, n, out + i, 4, half);
    for (; k - i >= 16; i += 16)
        wsum_block16(vb + i * eb, vs, a, n, out + i, 1, half);
    if (i < k) {
        if (half)
            baton_mm_avx2_wsum_h(vb + i * eb, vs, a, n, k - i, out + i);
        else
            baton_mm_avx2_wsum((const float *)(const void *)(vb + i * eb), vs, a, n, k - i,
                               out + i);
    }
}

static T5 void avx512_wsum(const float *v, uint64_t vs, const float *a, uint64_t n, uint64_t k,
                           float *out)
{
    wsum_rows16(v, vs, a, n, k, out, 0);
}

static T5 void avx512_wsum_h(const void *v, uint64_t vs, const float *a, uint64_t n, uint64_t k,
                             float *out)
{
    wsum_rows16(v, vs, a, n, k, out, 1);
}

/* y = silu16 (gelu = 0) or gelu16 (gelu = 1) of x, 16 lanes at a time
 * (inlined with a constant gelu: one loop per op). The tail goes through
 * masked loads and stores: lanes past n compute exp(0) and are never
 * stored. */
static AI T5 void map16(const float *x, float *y, uint64_t n, int gelu)
{
    uint64_t i;

    for (i = 0; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);

        _mm512_storeu_ps(y + i, gelu ? gelu16(v) : silu16(v));
    }
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        const __m512 v = _mm512_maskz_loadu_ps(m, x + i);

        _mm512_mask_storeu_ps(y + i, m, gelu ? gelu16(v) : silu16(v));
    }
}

static T5 void avx512_silu(const float *x, float *y, uint64_t n)
{
    map16(x, y, n, 0);
}

static T5 void avx512_gelu(const float *x, float *y, uint64_t n)
{
    map16(x, y, n, 1);
}

static T5 void avx512_exp_shift(float *x, uint64_t n, float m)
{
    const __m512 mv = _mm512_set1_ps(m);
    uint64_t i;

    for (i = 0; i + 16 <= n; i += 16)
        _mm512_storeu_ps(x + i, exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), mv)));
    if (i < n) {
        const __mmask16 k = (__mmask16)((1u << (n - i)) - 1);

        _mm512_mask_storeu_ps(x + i, k, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), mv)));
    }
}

/* ---- ATTENTION, a block of up to 16 tokens of one head (matmul.h,
 * baton_cpu_att_block) ----
 * Lane c of a register is token c. The scores: the tokens' queries
 * transposed once (qt: element i of every token in one register), then 8
 * key rows at a time, each row's 16 scores one chain acc + qt[i] * k[i]
 * (multiply, then add) in ascending i from +0, as baton_cpu_f32_dots sums
 * one row for one token; 8 rows are 8 independent chains, where the
 * per-token kernels' 4 chains waited on the add's latency. The softmax
 * runs on the slot-major scores with a lane mask per slot (slot s counts
 * for token c while s < n_slots[c]): the same scale, first maximum, exp
 * (exp16, baton_cpu_expf's steps), sum from +0 in ascending s and divide
 * as attention_softmax for each token alone, with no scalar loop. The
 * weighted sums: 4 tokens at a time over 64 elements (16 chains), each
 * element acc + a[s] * v[s] in ascending s from +0 as baton_cpu_f32_wsum,
 * every value row loaded once for the 4; the slots past the 4 tokens'
 * smallest count go per token. bench/RESULTS.md "Thirty-seventh session"
 * has the figures. */
#define ATT_ROWS 8 /* key rows per pass of the scores */

/* Scores of the slots [s0, s0 + 8) (slots past n - 1 read row n - 1 and are
 * not stored) into work (16 floats a slot). */
static AI T5 void att_scores8(const float *qt, const float *k, uint64_t hd, uint64_t s0,
                              uint64_t n, float *work)
{
    const float *kr[ATT_ROWS];
    __m512 acc[ATT_ROWS];
    uint64_t i;
    int r;

#pragma GCC unroll 8
    for (r = 0; r < ATT_ROWS; r++) {
        kr[r] = k + (s0 + (uint64_t)r < n ? s0 + (uint64_t)r : n - 1) * hd;
        acc[r] = _mm512_setzero_ps();
    }
    for (i = 0; i < hd; i++) {
        const __m512 x = _mm512_load_ps(qt + 16 * i);

#pragma GCC unroll 8
        for (r = 0; r < ATT_ROWS; r++)
            acc[r] = _mm512_add_ps(acc[r], _mm512_mul_ps(x, _mm512_set1_ps(kr[r][i])));
    }
#pragma GCC unroll 8
    for (r = 0; r < ATT_ROWS; r++)
        if (s0 + (uint64_t)r < n)
            _mm512_storeu_ps(work + 16 * (s0 + (uint64_t)r), acc[r]);
}

/* Elements [i, i + 16) of value row s (lanes outside mask 0; binary16
 * rows converted exactly). */
static AI T5 __m512 att_v16(const struct baton_att_block *b, uint64_t s, uint64_t i,
                            __mmask16 mask, const int HALF)
{
    const uint64_t at = s * b->hd + i;

    if (HALF)
        return _mm512_cvtph_ps(
            _mm256_maskz_loadu_epi16(mask, (const uint16_t *)b->v + at));
    return _mm512_maskz_loadu_ps(mask, (const float *)b->v + at);
}

/* The weighted sums of tokens [c0, c0 + NT) over elements [i0, i0 + 16 NU)
 * (lanes past hd masked by tail), slots [0, lo) for all NT tokens, then
 * each token's own [lo, n_slots[c]). */
static AI T5 void att_wsum(const struct baton_att_block *b, uint32_t c0, uint64_t i0,
                           __mmask16 tail, uint64_t lo, const int NT, const int NU,
                           const int HALF)
{
    const float *w = b->work;
    __m512 acc[4][4];
    uint64_t s;
    int t, u;

#pragma GCC unroll 4
    for (t = 0; t < NT; t++)
#pragma GCC unroll 4
        for (u = 0; u < NU; u++)
            acc[t][u] = _mm512_setzero_ps();
    for (s = 0; s < lo; s++) {
        __m512 x[4];

#pragma GCC unroll 4
        for (u = 0; u < NU; u++)
            x[u] = att_v16(b, s, i0 + 16 * (uint64_t)u, u + 1 < NU ? (__mmask16)0xFFFF : tail,
                           HALF);
#pragma GCC unroll 4
        for (t = 0; t < NT; t++) {
            const __m512 a = _mm512_set1_ps(w[16 * s + c0 + (uint32_t)t]);

#pragma GCC unroll 4
            for (u = 0; u < NU; u++)
                acc[t][u] = _mm512_add_ps(acc[t][u], _mm512_mul_ps(a, x[u]));
        }
    }
#pragma GCC unroll 4
    for (t = 0; t < NT; t++) {
        const uint32_t c = c0 + (uint32_t)t;
        float *o = b->out + c * b->os + i0;

        for (s = lo; s < b->n_slots[c]; s++) {
            const __m512 a = _mm512_set1_ps(w[16 * s + c]);

#pragma GCC unroll 4
            for (u = 0; u < NU; u++)
                acc[t][u] = _mm512_add_ps(
                    acc[t][u],
                    _mm512_mul_ps(a, att_v16(b, s, i0 + 16 * (uint64_t)u,
                                             u + 1 < NU ? (__mmask16)0xFFFF : tail, HALF)));
        }
#pragma GCC unroll 4
        for (u = 0; u < NU; u++) {
            if (u + 1 < NU)
                _mm512_storeu_ps(o + 16 * u, acc[t][u]);
            else
                _mm512_mask_storeu_ps(o + 16 * u, tail, acc[t][u]);
        }
    }
}

/* att_wsum for NT tokens over every element: 64 at a time, then the
 * rest in 16s (the last one masked). */
static AI T5 void att_wsum_tokens(const struct baton_att_block *b, uint32_t c0, const int NT,
                                  const int HALF)
{
    const uint64_t hd = b->hd, lo = baton_att_block_min_slots(b, c0, (uint32_t)NT);
    uint64_t i0;

    for (i0 = 0; hd - i0 >= 64; i0 += 64)
        att_wsum(b, c0, i0, 0xFFFF, lo, NT, 4, HALF);
    for (; i0 < hd; i0 += 16) {
        const __mmask16 tail =
            hd - i0 >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (hd - i0)) - 1);

        att_wsum(b, c0, i0, tail, lo, NT, 1, HALF);
    }
}

static T5 void avx512_att_block(const struct baton_att_block *b)
{
    _Alignas(64) float qt[BATON_CPU_ATT_HD_MAX * 16];
    _Alignas(64) int32_t nsl[16];
    const uint64_t hd = b->hd;
    const __m512 scale = _mm512_set1_ps(b->scale);
    float *w = b->work;
    uint64_t n = 0, s, i;
    __m512i ns;
    __m512 m, sum;
    uint32_t c;

    for (c = 0; c < 16; c++) {
        const uint64_t nc = c < b->nx ? b->n_slots[c] : 0;

        nsl[c] = (int32_t)nc; /* < 2^31 (matmul.h) */
        if (nc > n)
            n = nc;
        for (i = 0; i < hd; i++)
            qt[16 * i + c] = c < b->nx ? b->q[c * b->qs + i] : 0.0f;
    }
    ns = _mm512_load_si512(nsl);
    if (!b->half)
        for (s = 0; s < n; s += ATT_ROWS)
            att_scores8(qt, (const float *)b->k, hd, s, n, w);
    for (i = 0; b->half && i < n; i += BATON_CPU_ATT_CONV_ROWS) {
        /* a window of key rows converted (kernels.h), then scored */
        const uint64_t wn = n - i < BATON_CPU_ATT_CONV_ROWS ? n - i : BATON_CPU_ATT_CONV_ROWS;

        baton_mm_avx2_f16_row((const uint16_t *)b->k + i * hd, b->conv, wn * hd);
        for (s = 0; s < wn; s += ATT_ROWS)
            att_scores8(qt, b->conv, hd, s, wn, w + 16 * i);
    }
    /* softmax: scale, first maximum, exp, sum, divide */
    for (s = 0; s < n; s++) {
        const __m512 x = _mm512_loadu_ps(w + 16 * s);

        _mm512_storeu_ps(w + 16 * s, b->divide ? _mm512_div_ps(x, scale) : _mm512_mul_ps(x, scale));
    }
    m = _mm512_loadu_ps(w);
    for (s = 1; s < n; s++) {
        const __m512 x = _mm512_loadu_ps(w + 16 * s);
        const __mmask16 in = _mm512_cmpgt_epi32_mask(ns, _mm512_set1_epi32((int32_t)s));

        m = _mm512_mask_mov_ps(m, _mm512_mask_cmp_ps_mask(in, x, m, _CMP_GT_OQ), x);
    }
    sum = _mm512_setzero_ps();
    for (s = 0; s < n; s++) {
        const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(w + 16 * s), m));

        _mm512_storeu_ps(w + 16 * s, e);
        sum = _mm512_mask_add_ps(sum, _mm512_cmpgt_epi32_mask(ns, _mm512_set1_epi32((int32_t)s)),
                                 sum, e);
    }
    for (s = 0; s < n; s++)
        _mm512_storeu_ps(w + 16 * s, _mm512_div_ps(_mm512_loadu_ps(w + 16 * s), sum));
    /* the weighted sums, 4 tokens at a time; the cache type fixed per call */
    for (c = 0; b->nx - c >= 4; c += 4)
        b->half ? att_wsum_tokens(b, c, 4, 1) : att_wsum_tokens(b, c, 4, 0);
    for (; c < b->nx; c++)
        b->half ? att_wsum_tokens(b, c, 1, 1) : att_wsum_tokens(b, c, 1, 0);
}

/* ---- K-quants: the AVX2 level's integer sums (matmul_avx2.c) on
 * 512-bit registers, a chunk of 64 elements each, formed with VNNI
 * (vpdpbusd sums of 4, packed to int16, scaled by vpmaddwd / vpdpwssd:
 * k_dot). Same integers, so the same bits. ---- */

#define K_COLS 8u

/* fma(a, b, c), one rounding (vfmadd231ss: the target has FMA, so the
 * builtin is the instruction, never a call; _mm_set_ss would add a lane
 * clearing step to the chain) */
static AI T5 float k_fma(float a, float b, float c)
{
    return __builtin_fmaf(a, b, c);
}

/* Lane j = the sum of the 8 lanes of v[j], j = 0..7. */
static AI T5 __m256i k_hsum8x(const __m256i v[8])
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

    return _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20),
                            _mm256_permute2x128_si256(u0, u1, 0x31));
}

static AI T5 float k_h2f(const uint8_t *p)
{
    uint16_t v;

    memcpy(&v, p, sizeof(v));
    return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(v)));
}

/* 32 bytes at p in both halves, the low half's 16-bit lanes shifted right
 * by lo, the high half's by hi, then masked by mask. */
static AI T5 __m512i k_two(const uint8_t *p, int lo, int hi, int mask)
{
    const __m512i v = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p));
    const __m512i n =
        _mm512_inserti64x4(_mm512_set1_epi16((short)lo), _mm256_set1_epi16((short)hi), 1);

    return _mm512_and_si512(_mm512_srlv_epi16(v, n), _mm512_set1_epi8((char)mask));
}

/* Unsigned quant bytes (Qw + bias) of elements 64q..64q+63. */
static AI T5 __m512i k_chunk(uint32_t type, const uint8_t *wb, int q)
{
    const int h = q / 2, p = q % 2;

    switch (type) {
    case BATON_TYPE_IQ4_XS: { /* sub-blocks 2q, 2q + 1 (16 bytes each): 128-bit
                               * lanes 0, 1 the first's low and high nibbles,
                               * 2, 3 the second's; grid level + 128 (q4_nl_table) */
        const __m512i b =
            _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(wb + 8 + 32 * q)));
        const __m512i v = _mm512_shuffle_i64x2(b, b, 0x50);
        const __m512i n = _mm512_mask_srli_epi16(v, (__mmask32)0xFF00FF00u, v, 4);

        return _mm512_shuffle_epi8(q4_nl_table(), _mm512_and_si512(n, _mm512_set1_epi8(15)));
    }
    case BATON_TYPE_Q2_K:
        return k_two(wb + 16 + 32 * h, 4 * p, 4 * p + 2, 3);
    case BATON_TYPE_Q3_K:
        return _mm512_add_epi8(k_two(wb + 32 + 32 * h, 4 * p, 4 * p + 2, 3),
                               _mm512_slli_epi16(k_two(wb, 2 * q, 2 * q + 1, 1), 2));
    case BATON_TYPE_Q4_K:
        return k_two(wb + 16 + 32 * q, 0, 4, 15);
    case BATON_TYPE_Q5_K:
        return _mm512_add_epi8(k_two(wb + 48 + 32 * q, 0, 4, 15),
                               _mm512_slli_epi16(k_two(wb + 16, 2 * q, 2 * q + 1, 1), 4));
    default: { /* Q6_K: ql[64h..64h+63] are the low nibbles (p = 0) or high nibbles (p = 1);
                * the 2 high bits of element 64q + l (resp. 64q + 32 + l) are bits 4p, 4p + 1
                * (resp. 4p + 2, 4p + 3) of qh[32h + l], moved to bits 4, 5 by one variable
                * shift per 16-bit lane (left by 4, 2 for p = 0, right by 0, 2 for p = 1) */
        const __m512i ql = _mm512_loadu_si512((const void *)(wb + 64 * h));
        const __m512i qh =
            _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(wb + 128 + 32 * h)));
        const __m512i lo4 = _mm512_and_si512(p ? _mm512_srli_epi16(ql, 4) : ql,
                                             _mm512_set1_epi8(15));
        const __m512i n = _mm512_inserti64x4(_mm512_set1_epi16((short)(p ? 0 : 4)),
                                             _mm256_set1_epi16(2), 1);
        const __m512i sh = p ? _mm512_srlv_epi16(qh, n) : _mm512_sllv_epi16(qh, n);

        /* lo4 | (sh & 0x30) */
        return _mm512_ternarylogic_epi32(lo4, sh, _mm512_set1_epi8(0x30), 0xF8);
    }
    }
}

/* The unpacked weights of one super-block (at wb): wq[q] = k_chunk(q),
 * sv[h] = the int16 scales of k_dot's packed sums of chunks 2h and 2h + 1
 * (word k of 128-bit lane L: group 8h + L for k < 4, 8h + 4 + L for k >=
 * 4; IQ4_XS: sv[q] = chunk q's int32 scales, dword d of sub-block 2q +
 * d / 8), *corr = the int16 factors of the 16 bsums (-bias * sc for the
 * biased types, else the mins). Returns the bias. */
static AI T5 int k_prep(uint32_t type, const uint8_t *wb, __m512i wq[4], __m512i sv[4],
                        __m256i *corr)
{
    __m128i scb;
    __m256i mn;
    const int bias = k_scales_v(type, wb, &scb, &mn);
    const __m512i sc16 = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(scb));
    const __m512i idx0 = _mm512_setr_epi32(0, 0, 0x40004, 0x40004, 0x10001, 0x10001, 0x50005,
                                           0x50005, 0x20002, 0x20002, 0x60006, 0x60006, 0x30003,
                                           0x30003, 0x70007, 0x70007);
    int q;

    if (bias)
        *corr = _mm256_mullo_epi16(_mm256_cvtepi8_epi16(scb), _mm256_set1_epi16((short)-bias));
    else
        *corr = mn;
#pragma GCC unroll 4
    for (q = 0; q < 4; q++)
        wq[q] = k_chunk(type, wb, q);
    if (type == BATON_TYPE_IQ4_XS) {
        const __m512i sc32 = _mm512_cvtepi8_epi32(scb);
        const __m512i idx = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2);

#pragma GCC unroll 4
        for (q = 0; q < 4; q++)
            sv[q] = _mm512_permutexvar_epi32(_mm512_add_epi32(idx, _mm512_set1_epi32(4 * q)), sc32);
        return bias;
    }
    sv[0] = _mm512_permutexvar_epi16(idx0, sc16);
    sv[1] = _mm512_permutexvar_epi16(_mm512_add_epi16(idx0, _mm512_set1_epi16(8)), sc16);
    return bias;
}

/* 16 int32 lanes summing to sum_e Sc(e) * u(e) * qx(e) over the super-block
 * (u = Qw + bias, the unsigned quants of wq, sv as k_prep makes them; qx at
 * xb). vpdpbusd gives each dword d of chunk q the sum of 4 products
 * u * qx, all of group 4q + d / 4; |sum| <= 4 * 63 * 127 = 32004, so
 * vpackssdw packs two chunks' sums to int16 exactly, and one vpmaddwd
 * (vpdpwssd) multiplies them by their scales and adds pairs: 6 multiply
 * operations per super-block instead of 8 (vpmaddubsw + vpdpwssd per
 * chunk), and half the scale spreading. Exact integers throughout.
 * IQ4_XS's sums of 4 reach 4 * 241 * 127 = 122428, past int16: each
 * chunk's dwords are multiplied by their int32 scales (vpmulld) instead. */
static AI T5 __m512i k_dot(uint32_t type, const __m512i wq[4], const __m512i sv[4],
                           const uint8_t *xb)
{
    const __m512i z = _mm512_setzero_si512();
    const __m512i p0 = _mm512_dpbusd_epi32(z, wq[0], _mm512_loadu_si512((const void *)xb));
    const __m512i p1 = _mm512_dpbusd_epi32(z, wq[1], _mm512_loadu_si512((const void *)(xb + 64)));
    const __m512i p2 = _mm512_dpbusd_epi32(z, wq[2], _mm512_loadu_si512((const void *)(xb + 128)));
    const __m512i p3 = _mm512_dpbusd_epi32(z, wq[3], _mm512_loadu_si512((const void *)(xb + 192)));

    if (type == BATON_TYPE_IQ4_XS)
        return _mm512_add_epi32(
            _mm512_add_epi32(_mm512_mullo_epi32(p0, sv[0]), _mm512_mullo_epi32(p1, sv[1])),
            _mm512_add_epi32(_mm512_mullo_epi32(p2, sv[2]), _mm512_mullo_epi32(p3, sv[3])));
    return _mm512_dpwssd_epi32(_mm512_madd_epi16(_mm512_packs_epi32(p0, p1), sv[0]),
                               _mm512_packs_epi32(p2, p3), sv[1]);
}

/* The integer sums of one super-block for columns [c, c + nc) (2 <= nc
 * <= K_COLS) from the unpacked weights wq and scales sv, then the float
 * steps of all columns at once: column j's isum and msum go to lane j by a
 * transposing reduction (one instead of one per column), and lane j does
 * exactly the scalar steps (d * dx_j, the conversions, the two fused
 * multiply-adds), so the bits are the one-column path's. */
static AI T5 void k_sb_cols(const struct baton_mm *mm, uint32_t type, const __m512i wq[4],
                            const __m512i sv[4], __m256i corr, int bias, int has_min, float d,
                            float dmin, uint64_t s, uint64_t c, uint32_t nc, float *acc)
{
    __m256i is[K_COLS], ms[K_COLS];
    float dxs[K_COLS];
    uint32_t j;

    /* unrolled, so is and ms stay in registers; dx is read where the
     * quantizer wrote it (a vector load of 8 floats just stored one by one
     * would wait for store forwarding to fail) */
#pragma GCC unroll 8
    for (j = 0; j < K_COLS; j++) {
        if (j < nc) {
            const uint8_t *xb =
                mm->act + (c + j) * mm->act_col_bytes + s * BATON_ACT_K_BLOCK_BYTES;
            const __m256i m =
                _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(xb + 256)), corr);
            const __m512i a = k_dot(type, wq, sv, xb);
            __m256i a8;

            a8 = _mm256_add_epi32(_mm512_castsi512_si256(a), _mm512_extracti64x4_epi64(a, 1));
            is[j] = bias ? _mm256_add_epi32(a8, m) : a8;
            ms[j] = m;
            memcpy(&dxs[j], xb + 288, sizeof(float));
        } else {
            is[j] = ms[j] = _mm256_setzero_si256();
            dxs[j] = 0.0f;
        }
    }
    {
        const __m256 dx = _mm256_setr_ps(dxs[0], dxs[1], dxs[2], dxs[3], dxs[4], dxs[5], dxs[6],
                                         dxs[7]);
        __m256 accv = _mm256_loadu_ps(acc);

        accv = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(d), dx),
                               _mm256_cvtepi32_ps(k_hsum8x(is)), accv);
        if (has_min)
            accv = _mm256_fnmadd_ps(_mm256_mul_ps(_mm256_set1_ps(dmin), dx),
                                    _mm256_cvtepi32_ps(k_hsum8x(ms)), accv);
        _mm256_storeu_ps(acc, accv);
    }
}

/* One super-block s of one weight row (at wb) for columns [c, c + nc),
 * 2 <= nc <= K_COLS: acc[j] gets its two fused multiply-adds. */
static AI T5 void k_sb(const struct baton_mm *mm, uint32_t type, const uint8_t *wb, uint64_t s,
                       uint64_t c, uint32_t nc, float *acc)
{
    uint32_t bbytes;
    int d_off, dmin_off;

    k_layout(type, &bbytes, &d_off, &dmin_off);
    const float d = k_h2f(wb + d_off), dmin = dmin_off >= 0 ? k_h2f(wb + dmin_off) : 0.0f;
    __m512i wq[4], sv[4];
    __m256i corr;
    const int bias = k_prep(type, wb, wq, sv, &corr);

    k_sb_cols(mm, type, wq, sv, corr, bias, dmin_off >= 0, d, dmin, s, c, nc, acc);
}

/* The integer sums of one super-block (weights at wb) against one column's
 * activations (at xb): *is = 8 int32 lanes summing to isum, *ms = 8 lanes
 * summing to msum (the types with a min; for the others the bias
 * correction, already in *is). */
static AI T5 void k_sb_int1(uint32_t type, const uint8_t *wb, const uint8_t *xb, __m256i *is,
                            __m256i *ms)
{
    __m512i wq[4], sv[4];
    __m256i corr;
    const int bias = k_prep(type, wb, wq, sv, &corr);
    const __m256i m = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(xb + 256)), corr);
    const __m512i a = k_dot(type, wq, sv, xb);
    const __m256i a8 =
        _mm256_add_epi32(_mm512_castsi512_si256(a), _mm512_extracti64x4_epi64(a, 1));

    *is = bias ? _mm256_add_epi32(a8, m) : a8;
    *ms = m;
}

#define K_GROUP 8u

/* Slot t of a group from the super-block at wb against the activations at
 * xb: its integer lanes (k_sb_int1), its d | dmin << 16 halves and its dx,
 * as k_group_fl takes them. */
static AI T5 void k_slot(uint32_t type, const uint8_t *wb, const uint8_t *xb, uint32_t t,
                         __m256i is[K_GROUP], __m256i ms[K_GROUP], uint32_t dw[K_GROUP],
                         float dxs[K_GROUP])
{
    uint32_t bbytes;
    int d_off, dmin_off;
    uint16_t h[2] = {0, 0};

    k_layout(type, &bbytes, &d_off, &dmin_off);
    k_sb_int1(type, wb, xb, &is[t], &ms[t]);
    memcpy(&h[0], wb + d_off, sizeof(h[0]));
    if (dmin_off >= 0)
        memcpy(&h[1], wb + dmin_off, sizeof(h[1]));
    dw[t] = (uint32_t)h[0] | (uint32_t)h[1] << 16;
    memcpy(&dxs[t], xb + 288, sizeof(float));
}

/* Slot t of a group past its last super-block: zeros. */
static AI T5 void k_slot_empty(uint32_t t, __m256i is[K_GROUP], __m256i ms[K_GROUP],
                               uint32_t dw[K_GROUP], float dxs[K_GROUP])
{
    is[t] = ms[t] = _mm256_setzero_si256();
    dw[t] = 0;
    dxs[t] = 0.0f;
}

/* The float operands of a group of super-blocks, lane t for super-block
 * t of the group: a = d * dx, i = (float)isum, b = -(dmin * dx), m =
 * (float)msum. */
struct k_fl {
    __m256 a, i, b, m;
};

/* Super-block t of group f's two steps of the chain (one without a min). */
static AI T5 float k_chain(const struct k_fl *f, uint32_t t, int has_min, float acc)
{
    float a[K_GROUP], i[K_GROUP];

    _mm256_storeu_ps(a, f->a);
    _mm256_storeu_ps(i, f->i);
    acc = k_fma(a[t], i[t], acc);
    if (has_min) {
        float b[K_GROUP], m[K_GROUP];

        _mm256_storeu_ps(b, f->b);
        _mm256_storeu_ps(m, f->m);
        acc = k_fma(b[t], m[t], acc);
    }
    return acc;
}

/* The 8 d | dmin << 16 halves dw[t] and the 8 dx dxs[t] of a group's slots
 * as the vectors k_group_fl takes. */
static AI T5 __m256i k_dw_vec(const uint32_t dw[K_GROUP])
{
    return _mm256_setr_epi32((int)dw[0], (int)dw[1], (int)dw[2], (int)dw[3], (int)dw[4],
                             (int)dw[5], (int)dw[6], (int)dw[7]);
}

static AI T5 __m256 k_dx_vec(const float dxs[K_GROUP])
{
    return _mm256_setr_ps(dxs[0], dxs[1], dxs[2], dxs[3], dxs[4], dxs[5], dxs[6], dxs[7]);
}

/* A group's float operands (struct k_fl) from its integer lanes is, ms,
 * its d | dmin << 16 halves dwv (lane t: super-block t) and its dx (lane
 * t). */
static AI T5 void k_group_fl(const __m256i is[K_GROUP], const __m256i ms[K_GROUP], __m256i dwv,
                             __m256 dx, int has_min, struct k_fl *out)
{
    /* lanes 2t and 2t + 1: d and dmin of super-block t of the group */
    const __m512 dd = _mm512_cvtph_ps(dwv);
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m256 d8 = _mm512_castps512_ps256(_mm512_permutexvar_ps(ev, dd));

    out->a = _mm256_mul_ps(d8, dx);
    out->i = _mm256_cvtepi32_ps(k_hsum8x(is));
    if (has_min) {
        const __m512i od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 0, 0, 0, 0, 0, 0, 0,
                                             0);
        const __m256 m8 = _mm512_castps512_ps256(_mm512_permutexvar_ps(od, dd));

        /* -(dmin * dx): the negation is exact */
        out->b = _mm256_xor_ps(_mm256_mul_ps(m8, dx), _mm256_set1_ps(-0.0f));
        out->m = _mm256_cvtepi32_ps(k_hsum8x(ms));
    } else {
        out->b = out->m = _mm256_setzero_ps();
    }
}

/* The scales of 8 Q4_K / Q5_K super-blocks at wb, wb + stride, ... (the 8
 * of a group of one row in k_group1, stride the super-block's bytes; super-
 * block s of 8 rows in k_rows8, stride the row's bytes), four super-blocks
 * per vector, one per 128-bit lane: each
 * lane loads the super-block's first 16 bytes (d, dmin, the 12 bytes of
 * 6-bit fields: dwords D, u0, u1, u2) and k_scales_v's steps run on all
 * four lanes at once, leaving per lane the bytes sc[0..3], m[0..3],
 * sc[4..7], m[4..7] (k_scales_v's formulas; vshufps picks dwords 1, 2 of
 * the low fields and 1, 2 of the high ones). sw[p] = those bytes widened to
 * int16 for super-blocks 2p (words 0..15) and 2p + 1 (words 16..31), the
 * tables k_slot_sw spreads its scales from; *dwv = the 8 D dwords (d | dmin
 * << 16), lane t for super-block t. Per super-block, decoding the scales
 * alone took about as many operations as its products, so doing it 4 at a
 * time (and taking d, dmin from the same loads instead of 8 general
 * registers moved into a vector) made AVX-512 Q4_K decode about 15 % faster
 * (bench/RESULTS.md, twenty-fourth session). Same integers. */
static AI T5 void k_scales8(const uint8_t *wb, uint64_t stride, __m512i sw[4], __m256i *dwv)
{
    const __m512i sh = _mm512_broadcast_i32x4(_mm_setr_epi32(0, 0, 4, 0));
    __m512i u[2];
    int h;

    for (h = 0; h < 2; h++) {
        const uint8_t *b = wb + 4 * (uint64_t)h * stride;
        __m512i lo, hi, sm;

        u[h] = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)b));
        u[h] = _mm512_inserti32x4(u[h], _mm_loadu_si128((const __m128i *)(b + stride)), 1);
        u[h] = _mm512_inserti32x4(u[h], _mm_loadu_si128((const __m128i *)(b + 2 * stride)), 2);
        u[h] = _mm512_inserti32x4(u[h], _mm_loadu_si128((const __m128i *)(b + 3 * stride)), 3);
        /* dwords 1, 2: sc[0..3] = u0 & 63, m[0..3] = u1 & 63 */
        lo = _mm512_and_si512(u[h], _mm512_set1_epi8(63));
        /* dwords 1, 2: sc[4..7] = (u2 & 15) | (u0 >> 6) << 4, m[4..7] =
         * (u2 >> 4) | (u1 >> 6) << 4, per byte */
        hi = _mm512_ternarylogic_epi32(
            _mm512_and_si512(_mm512_srlv_epi32(_mm512_shuffle_epi32(u[h], 0xFF), sh),
                             _mm512_set1_epi8(15)),
            _mm512_srli_epi32(u[h], 2), _mm512_set1_epi8(0x30), 0xF8);
        sm = _mm512_castps_si512(
            _mm512_shuffle_ps(_mm512_castsi512_ps(lo), _mm512_castsi512_ps(hi), 0x99));
        sw[2 * h] = _mm512_cvtepu8_epi16(_mm512_castsi512_si256(sm));
        sw[2 * h + 1] = _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(sm, 1));
    }
    *dwv = _mm512_castsi512_si256(_mm512_permutex2var_epi32(
        u[0], _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 0, 0, 0, 0, 0, 0, 0), u[1]));
}

/* k_sb_int1 for a Q4_K / Q5_K super-block (weights at wb) whose scales are
 * words of w16 = sw[t / 2] of k_scales8, from word 16 * (t & 1): sc[j] at
 * word j (j < 4) or 8 + j - 4, m[j] at word 4 + j or 12 + j - 4. The
 * spreads are k_prep's (sv: word k of 128-bit lane L is group L (k < 4)
 * or 4 + L of the pair, each sub-block of 32 being two groups; corr word g
 * = the min of group g), taken from the table by one vpermw each. */
static AI T5 void k_sb_int1_sw(uint32_t type, const uint8_t *wb, const uint8_t *xb, uint32_t t,
                               __m512i w16, __m256i *is, __m256i *ms)
{
    /* [o][h]: sv[h] for odd o = 1 (the table's words 16..31) */
    static const uint16_t isv[2][2][32] = {
        {{0, 0, 0, 0, 2, 2, 2, 2, 0, 0, 0, 0, 2, 2, 2, 2,
          1, 1, 1, 1, 3, 3, 3, 3, 1, 1, 1, 1, 3, 3, 3, 3},
         {8, 8, 8, 8, 10, 10, 10, 10, 8, 8, 8, 8, 10, 10, 10, 10,
          9, 9, 9, 9, 11, 11, 11, 11, 9, 9, 9, 9, 11, 11, 11, 11}},
        {{16, 16, 16, 16, 18, 18, 18, 18, 16, 16, 16, 16, 18, 18, 18, 18,
          17, 17, 17, 17, 19, 19, 19, 19, 17, 17, 17, 17, 19, 19, 19, 19},
         {24, 24, 24, 24, 26, 26, 26, 26, 24, 24, 24, 24, 26, 26, 26, 26,
          25, 25, 25, 25, 27, 27, 27, 27, 25, 25, 25, 25, 27, 27, 27, 27}}};
    static const uint16_t imn[2][32] = {
        {4, 4, 5, 5, 6, 6, 7, 7, 12, 12, 13, 13, 14, 14, 15, 15},
        {20, 20, 21, 21, 22, 22, 23, 23, 28, 28, 29, 29, 30, 30, 31, 31}};
    const uint32_t o = t & 1;
    __m512i wq[4], sv[4], a;
    __m256i corr;
    int q;

    sv[0] = _mm512_permutexvar_epi16(_mm512_loadu_si512((const void *)isv[o][0]), w16);
    sv[1] = _mm512_permutexvar_epi16(_mm512_loadu_si512((const void *)isv[o][1]), w16);
    corr = _mm512_castsi512_si256(
        _mm512_permutexvar_epi16(_mm512_loadu_si512((const void *)imn[o]), w16));
#pragma GCC unroll 4
    for (q = 0; q < 4; q++)
        wq[q] = k_chunk(type, wb, q);
    a = k_dot(type, wq, sv, xb);
    *is = _mm256_add_epi32(_mm512_castsi512_si256(a), _mm512_extracti64x4_epi64(a, 1));
    *ms = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(xb + 256)), corr);
}

/* Super-blocks [s, s + nt) (1 <= nt <= K_GROUP) of the row at wrow against
 * the column at xcol: their integer lanes are kept and summed across in one
 * transposing reduction (instead of one per super-block), and their d, dmin
 * and dx widened and multiplied 8 at a time (vmulps rounds each lane as the
 * scalar mulss does), giving *out. Meanwhile the previous group's chain
 * steps (prev, np super-blocks; np = 0: none) are done on *acc, one
 * super-block's after each super-block's integer work: the chain's latency
 * (two dependent fused multiply-adds per super-block) then hides behind
 * that work instead of stalling the window after every group. The float
 * steps are the same operations on the same values in the same order (s
 * ascending), so the same bits. A full group of Q4_K / Q5_K takes its
 * scales and d, dmin from k_scales8. */
static AI T5 void k_group1(uint32_t type, const uint8_t *wrow, const uint8_t *xcol, uint64_t s,
                           uint32_t nt, const struct k_fl *prev, uint32_t np, float *acc,
                           struct k_fl *out)
{
    uint32_t bbytes, t;
    int d_off, dmin_off;
    __m256i is[K_GROUP], ms[K_GROUP], dwv;
    uint32_t dw[K_GROUP];
    float dxs[K_GROUP];
    __m512i sw[4];
    const int by8 = (type == BATON_TYPE_Q4_K || type == BATON_TYPE_Q5_K) && nt == K_GROUP;

    k_layout(type, &bbytes, &d_off, &dmin_off);
    if (by8)
        k_scales8(wrow + s * bbytes, bbytes, sw, &dwv);
#pragma GCC unroll 8
    for (t = 0; t < K_GROUP; t++) {
        const uint8_t *xb = xcol + (s + t) * BATON_ACT_K_BLOCK_BYTES;

        if (by8) {
            k_sb_int1_sw(type, wrow + (s + t) * bbytes, xb, t, sw[t / 2], &is[t], &ms[t]);
            memcpy(&dxs[t], xb + 288, sizeof(float));
        } else if (t < nt) {
            k_slot(type, wrow + (s + t) * bbytes, xb, t, is, ms, dw, dxs);
        } else {
            k_slot_empty(t, is, ms, dw, dxs);
        }
        if (t < np)
            *acc = k_chain(prev, t, dmin_off >= 0, *acc);
    }
    k_group_fl(is, ms, by8 ? dwv : k_dw_vec(dw), k_dx_vec(dxs), dmin_off >= 0, out);
}

/* Decode: row r against column 0, K_GROUP super-blocks at a time (the rows
 * left over after k_rows8's tiles). */
static AI T5 void k_row1(const struct baton_mm *mm, uint64_t r, uint32_t type)
{
    const uint64_t nsb = mm->k / BATON_QK_K;
    const uint8_t *wrow = mm->w + r * mm->w_row_bytes;
    uint32_t bbytes, np = 0, t;
    int d_off, dmin_off;
    uint64_t s = 0;
    float acc = 0.0f;
    struct k_fl f[2];

    f[0].a = f[0].i = f[0].b = f[0].m = _mm256_setzero_ps();
    k_layout(type, &bbytes, &d_off, &dmin_off);
    for (; nsb - s >= K_GROUP; s += K_GROUP) {
        /* see BATON_MM_DECODE_PF_BYTES: the group's bytes, rounded up to lines */
        baton_mm_decode_prefetch_l1(wrow + s * bbytes, (int)((K_GROUP * bbytes + 63) / 64));
        k_group1(type, wrow, mm->act, s, K_GROUP, &f[0], np, &acc, &f[1]);
        f[0] = f[1];
        np = K_GROUP;
    }
    if (s < nsb) {
        k_group1(type, wrow, mm->act, s, (uint32_t)(nsb - s), &f[0], np, &acc, &f[1]);
        f[0] = f[1];
        np = (uint32_t)(nsb - s);
    }
    for (t = 0; t < np; t++)
        acc = k_chain(&f[0], t, dmin_off >= 0, acc);
    mm->y[r] = acc;
}

/* Rows per decode tile of k_rows8: one row per lane of the chain. */
#define K_DECODE_ROWS 8u

/* Decode: rows [r, r + K_DECODE_ROWS) against column 0, super-block s of
 * all 8 rows at a time, one row per lane. The integer lanes of the 8 rows'
 * super-block s are summed across in one k_hsum8x (lane j: row j's isum,
 * another for msum), their d, dmin widened together (k_scales8 across the
 * rows for Q4_K / Q5_K, whose scales it decodes 4 rows at a time) and
 * multiplied by the column's dx (the same for every row), and the 8 rows'
 * chains advance in one register: lane j does exactly row j's steps in
 * ascending s (vfmadd231ps rounds each lane once, as the scalar fmaf; vmulps
 * each lane as mulss): same bits. A row walked alone (k_row1) spent about a
 * quarter of its time in its chain (two dependent fused multiply-adds per
 * super-block, 8 cycles) and in moving the chain's operands into scalars;
 * here the chain costs 8 cycles per 8 rows' super-block. The 8 rows are read
 * side by side (8 streams), so the next tile (the next 8 rows, one linear
 * run) is prefetched into L1 (L2 until the thirty-third session: matmul.h,
 * baton_mm_decode_prefetch_l1), a share of it per super-block. 1 thread, Zen
 * 5 (bench/kernel-ab.sh, bench/RESULTS.md, twenty-fourth session), medians
 * of the old and new kernels alternating: Q4_K from cache 1.32-1.57x, from
 * memory 1.01-1.31x; Q6_K from cache 1.09-1.28x, from memory 0.89-0.97x;
 * the d4096 Q4_K_M model's decode 89-91 -> 97-103 tok/s. */
static AI T5 void k_rows8(const struct baton_mm *mm, uint64_t r, uint32_t type)
{
    const uint64_t nsb = mm->k / BATON_QK_K, rbytes = mm->w_row_bytes;
    const uint8_t *w0 = mm->w + r * rbytes;
    /* formed as an integer: a prefetch past the weights is harmless, the
     * pointer never leaves its object */
    const uintptr_t next = (uintptr_t)w0 + K_DECODE_ROWS * rbytes;
    const uint64_t lines = (K_DECODE_ROWS * rbytes + 63) / 64;
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 0, 0, 0, 0, 0, 0, 0, 0);
    const int by4 = type == BATON_TYPE_Q4_K || type == BATON_TYPE_Q5_K;
    uint32_t bbytes, j;
    int d_off, dmin_off;
    uint64_t s, pf = 0;
    __m256 acc = _mm256_setzero_ps();

    k_layout(type, &bbytes, &d_off, &dmin_off);
    for (s = 0; s < nsb; s++) {
        const uint8_t *xb = mm->act + s * BATON_ACT_K_BLOCK_BYTES;
        const uint8_t *wb = w0 + s * bbytes;
        const uint64_t pf_end = (s + 1) * lines / nsb;
        __m256i dwv, is[K_DECODE_ROWS], ms[K_DECODE_ROWS];
        float dx;

        for (; pf < pf_end; pf++)
            __builtin_prefetch((const void *)(next + 64 * pf), 0, 3);
        if (by4) {
            __m512i sw[4];

            k_scales8(wb, rbytes, sw, &dwv);
#pragma GCC unroll 8
            for (j = 0; j < K_DECODE_ROWS; j++)
                k_sb_int1_sw(type, wb + j * rbytes, xb, j, sw[j / 2], &is[j], &ms[j]);
        } else {
            uint32_t dw[K_DECODE_ROWS];
            float dxs[K_DECODE_ROWS]; /* each the column's dx: unused */

#pragma GCC unroll 8
            for (j = 0; j < K_DECODE_ROWS; j++)
                k_slot(type, wb + j * rbytes, xb, j, is, ms, dw, dxs);
            dwv = k_dw_vec(dw);
        }
        memcpy(&dx, xb + 288, sizeof(dx));
        {
            /* lanes 2j and 2j + 1: d and dmin of row j */
            const __m512 dd = _mm512_cvtph_ps(dwv);
            const __m256 dxv = _mm256_set1_ps(dx);
            const __m256 a = _mm256_mul_ps(_mm512_castps512_ps256(_mm512_permutexvar_ps(ev, dd)),
                                           dxv);

            acc = _mm256_fmadd_ps(a, _mm256_cvtepi32_ps(k_hsum8x(is)), acc);
            if (dmin_off >= 0) {
                /* -(dmin * dx): the negation is exact */
                const __m256 b = _mm256_xor_ps(
                    _mm256_mul_ps(_mm512_castps512_ps256(_mm512_permutexvar_ps(od, dd)), dxv),
                    _mm256_set1_ps(-0.0f));

                acc = _mm256_fmadd_ps(b, _mm256_cvtepi32_ps(k_hsum8x(ms)), acc);
            }
        }
    }
    _mm256_storeu_ps(mm->y + r, acc);
}

/* Row r for columns [c, c + nc), nc <= K_COLS. */
static AI T5 void k_row(const struct baton_mm *mm, uint64_t r, uint64_t c, uint32_t nc,
                        uint32_t type)
{
    const uint64_t nsb = mm->k / BATON_QK_K;
    uint32_t bbytes, j;
    int d_off, dmin_off;
    uint64_t s;
    float acc[K_COLS];

    if (nc == 1) {
        /* the one-column path of the decode (same bits either way) */
        const struct baton_mm one = {
            mm->w, mm->w_row_bytes, mm->x, mm->act + c * mm->act_col_bytes, mm->act_col_bytes,
            mm->y + c * mm->ldy, mm->k, mm->n, 1, mm->ldy,
        };

        k_row1(&one, r, type);
        return;
    }
    k_layout(type, &bbytes, &d_off, &dmin_off);
    for (j = 0; j < K_COLS; j++)
        acc[j] = 0.0f;
    for (s = 0; s < nsb; s++)
        k_sb(mm, type, mm->w + r * mm->w_row_bytes + s * bbytes, s, c, nc, acc);
    for (j = 0; j < nc; j++)
        mm->y[(c + j) * mm->ldy + r] = acc[j];
}

/* ---- Prefill panels: 16 rows at once, one row per 32-bit lane ----
 *
 * k_row works a row at a time: each 512-bit register holds 64 quants of
 * one row, and per super-block and column its integer sums cost the
 * packing, the scale products and a cross-lane sum besides the 4 vpdpbusd
 * (about 15 vector operations per 256 products). A panel turns that
 * around: 16 rows, lane i = row i, the 4 quants of elements 4e..4e+3 of
 * each row in one register (w[e]), and the column's 4 activation bytes of
 * those elements broadcast to every lane (one vpbroadcastd load).
 * A lane then accumulates its own row's products, so no cross-lane sum is
 * needed: per group of 16 or 32 elements and column, 4 or 8 vpdpbusd, one
 * vpmulld by the rows' group scales and one add; the mins (or the bias
 * correction) 8 vpdpwssd per super-block (about 95 vector operations per
 * 4096 products of a Q4_K super-block). The rows are unpacked and
 * transposed once per K_PANEL_SB super-blocks into struct k_panel_sb (on
 * the stack, in L1), and every column of the product passes over them.
 *
 * Same bits as k_row and the decode: the integers isum and msum of a
 * (row, super-block, column) are exact whatever their order, and lane i
 * does row i's float steps in the same order (acc = fma(d * dx, isum,
 * acc), then acc = fma(-(dmin * dx), msum, acc), super-blocks ascending;
 * between passes the accumulators wait in y, floats stored and reloaded
 * exactly). */

#define K_PANEL_ROWS 16u
/* super-blocks unpacked per pass: 4 * 5760 bytes, with the 8 columns'
 * activations of a pass (9 KiB) inside L1 */
#define K_PANEL_SB 4u
/* Products with at least this many columns take panels (fewer cannot
 * repay the unpacking; the decode never does): 8 where AVX-512 runs at
 * full width, 16 where it runs on 256-bit halves (baton_cpu_avx512_split,
 * Zen 4: not measured there, so the threshold of the twenty-second
 * session stays). On Zen 5 (thirty-fifth session, `bench_kernels --threads
 * 1 --reps 3 --k 4096`, panels from 4 columns against the tile, GFLOP/s):
 * 8 columns Q4_K 196 -> 250, Q5_K 160 -> 228, Q6_K 137 -> 181, Q3_K 215 ->
 * 236, Q2_K 304 -> 299; 12 columns +40-80 %; at k 14336 8 columns Q4_K 164
 * -> 265, Q6_K 122 -> 176; 2 threads, 8 columns, Q4_K 431 -> 458, Q6_K 300
 * -> 381; 7 columns about even; 4-5 columns the tile wins (Q6_K 198
 * against 100 at 4). */
static AI uint64_t k_panel_min_m(void)
{
    return baton_cpu_avx512_split() ? 16u : 8u;
}

/* One super-block of a panel's 16 rows, lane i = row i: w[e] the unsigned
 * quants (Qw + bias) of elements 4e..4e+3, sc[g] the integer scale Sc of
 * group g (elements 16g..16g+15), mc[t] the int16 pair of factors of
 * bsums 2t and 2t + 1 (the mins M, or -bias * Sc for the biased types),
 * d and dmin (0: none) as floats. */
struct k_panel_sb {
    __m512i w[64];
    __m512i sc[16];
    __m512i mc[8];
    __m512 d, dmin;
};

/* Transposes 16 x 16 int32 (r[i] lane j -> r[j] lane i). */
static AI T5 void k_transpose16(__m512i r[16])
{
    __m512i t[16], u[16];
    int k;

#pragma GCC unroll 8
    for (k = 0; k < 8; k++) {
        t[2 * k] = _mm512_unpacklo_epi32(r[2 * k], r[2 * k + 1]);
        t[2 * k + 1] = _mm512_unpackhi_epi32(r[2 * k], r[2 * k + 1]);
    }
    /* u[4q + b], 128-bit lane L: rows 4q..4q+3 of element 4L + b */
#pragma GCC unroll 4
    for (k = 0; k < 4; k++) {
        u[4 * k] = _mm512_unpacklo_epi64(t[4 * k], t[4 * k + 2]);
        u[4 * k + 1] = _mm512_unpackhi_epi64(t[4 * k], t[4 * k + 2]);
        u[4 * k + 2] = _mm512_unpacklo_epi64(t[4 * k + 1], t[4 * k + 3]);
        u[4 * k + 3] = _mm512_unpackhi_epi64(t[4 * k + 1], t[4 * k + 3]);
    }
    /* element 4L + b: 128-bit lane L of u[b], u[4 + b], u[8 + b], u[12 + b] */
#pragma GCC unroll 4
    for (k = 0; k < 4; k++) {
        const __m512i v0 = _mm512_shuffle_i32x4(u[k], u[4 + k], 0x88);
        const __m512i v1 = _mm512_shuffle_i32x4(u[k], u[4 + k], 0xDD);
        const __m512i v2 = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], 0x88);
        const __m512i v3 = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], 0xDD);

        r[k] = _mm512_shuffle_i32x4(v0, v2, 0x88);
        r[4 + k] = _mm512_shuffle_i32x4(v1, v3, 0x88);
        r[8 + k] = _mm512_shuffle_i32x4(v0, v2, 0xDD);
        r[12 + k] = _mm512_shuffle_i32x4(v1, v3, 0xDD);
    }
}

/* Super-block s of rows [r, r + 16) into *p. */
static AI T5 void k_panel_pack(const struct baton_mm *mm, uint32_t type, uint64_t r, uint64_t s,
                               struct k_panel_sb *p)
{
    uint32_t bbytes;
    int d_off, dmin_off, q, i;
    __m512i rows[16], mcs[16];

    k_layout(type, &bbytes, &d_off, &dmin_off);
    const uint8_t *wb0 = mm->w + r * mm->w_row_bytes + s * bbytes;

    for (q = 0; q < 4; q++) {
#pragma GCC unroll 16
        for (i = 0; i < 16; i++)
            rows[i] = k_chunk(type, wb0 + (uint64_t)i * mm->w_row_bytes, q);
        k_transpose16(rows);
        memcpy(&p->w[16 * q], rows, sizeof(rows));
    }
    for (i = 0; i < 16; i++) {
        const uint8_t *wb = wb0 + (uint64_t)i * mm->w_row_bytes;
        __m128i scb;
        __m256i mn;
        const int bias = k_scales_v(type, wb, &scb, &mn);

        rows[i] = _mm512_cvtepi8_epi32(scb);
        if (bias)
            mn = _mm256_mullo_epi16(_mm256_cvtepi8_epi16(scb), _mm256_set1_epi16((short)-bias));
        mcs[i] = _mm512_zextsi256_si512(mn);
    }
    k_transpose16(rows);
    memcpy(p->sc, rows, sizeof(p->sc));
    k_transpose16(mcs);
    memcpy(p->mc, mcs, sizeof(p->mc));
    { /* d (and dmin) of the 16 rows by one gather of the dword holding them:
       * d | dmin << 16 at d_off, d in the low half also where d_off is 0
       * (IQ4_XS: d | scales_h << 16), or for the other types without dmin (d
       * is their last 2 bytes) d as the high half of the dword at d_off - 2.
       * Offsets in int32: 15 * w_row_bytes <= INT32_MAX (k_panels' callers
       * check). */
        const int d_lo = dmin_off >= 0 || d_off == 0;
        const __m512i idx = _mm512_mullo_epi32(
            _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
            _mm512_set1_epi32((int)mm->w_row_bytes));
        const __m512i h = _mm512_i32gather_epi32(idx, wb0 + (d_lo ? d_off : d_off - 2), 1);
        const __m512 hi = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(h, 16)));

        p->d = d_lo ? _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h)) : hi;
        p->dmin = dmin_off >= 0 ? hi : _mm512_setzero_ps();
    }
}

/* The 4 activation bytes at xb in every lane (GCC emits one vpbroadcastd
 * load, a load-port operation). */
static AI T5 __m512i k_bcast4(const uint8_t *xb)
{
    return _mm512_set1_epi32(load_i32(xb));
}

/* Rows [r, r + 16) of columns [c, c + nc) (1 <= nc <= K_COLS) over the ns
 * super-blocks from s0 packed in p: the accumulators start at zero (first)
 * or from y, and go back to y. G: elements per scale group the kernel
 * takes (32 for Q4_K / Q5_K, whose groups 2j and 2j + 1 share a scale). */
static AI T5 void k_panel_cols(const struct baton_mm *mm, uint32_t type, const int G,
                               const struct k_panel_sb *p, uint32_t ns, uint64_t r, uint64_t s0,
                               uint64_t c, uint32_t nc, int first)
{
    const int has_min = type == BATON_TYPE_Q2_K || type == BATON_TYPE_Q4_K ||
                        type == BATON_TYPE_Q5_K;
    const int E = G / 4; /* vpdpbusd per group and column */
    __m512 acc[K_COLS];
    uint32_t j, t;
    int g, e;

#pragma GCC unroll 8
    for (j = 0; j < K_COLS; j++)
        acc[j] = j < nc && !first ? _mm512_loadu_ps(mm->y + (c + j) * mm->ldy + r)
                                  : _mm512_setzero_ps();
    for (t = 0; t < ns; t++) {
        const struct k_panel_sb *b = &p[t];
        const uint8_t *x0 = mm->act + c * mm->act_col_bytes + (s0 + t) * BATON_ACT_K_BLOCK_BYTES;
        __m512i is[K_COLS];

#pragma GCC unroll 8
        for (j = 0; j < K_COLS; j++)
            is[j] = _mm512_setzero_si512();
        for (g = 0; g < 256 / G; g++) {
            const __m512i *w = &b->w[E * g];
            const __m512i sc = b->sc[G / 16 * g];

#pragma GCC unroll 8
            for (j = 0; j < K_COLS; j++) {
                if (j < nc) {
                    const uint8_t *xb = x0 + j * mm->act_col_bytes + G * g;
                    __m512i a = _mm512_setzero_si512();

#pragma GCC unroll 8
                    for (e = 0; e < E; e++)
                        a = _mm512_dpbusd_epi32(a, w[e], k_bcast4(xb + 4 * e));
                    is[j] = _mm512_add_epi32(is[j], _mm512_mullo_epi32(a, sc));
                }
            }
        }
#pragma GCC unroll 8
        for (j = 0; j < K_COLS; j++) {
            if (j < nc) {
                const uint8_t *xb = x0 + j * mm->act_col_bytes;
                __m512i m = _mm512_setzero_si512();
                float dxf;
                __m512 dx;

#pragma GCC unroll 8
                for (e = 0; e < 8; e++)
                    m = _mm512_dpwssd_epi32(m, b->mc[e], k_bcast4(xb + 256 + 4 * e));
                memcpy(&dxf, xb + 288, sizeof(dxf));
                dx = _mm512_set1_ps(dxf);
                if (!has_min)
                    is[j] = _mm512_add_epi32(is[j], m);
                acc[j] = _mm512_fmadd_ps(_mm512_mul_ps(b->d, dx), _mm512_cvtepi32_ps(is[j]),
                                         acc[j]);
                if (has_min)
                    acc[j] = _mm512_fnmadd_ps(_mm512_mul_ps(b->dmin, dx), _mm512_cvtepi32_ps(m),
                                              acc[j]);
            }
        }
    }
#pragma GCC unroll 8
    for (j = 0; j < K_COLS; j++)
        if (j < nc)
            _mm512_storeu_ps(mm->y + (c + j) * mm->ldy + r, acc[j]);
}

/* Prefetches into L2 the weights of the panel of rows [r, r + 16) over
 * super-blocks [s0, s0 + ns), the rows [i0, i1) of it. */
static AI void k_panel_prefetch(const struct baton_mm *mm, uint32_t bbytes, uint64_t r,
                                uint64_t s0, uint64_t ns, uint32_t i0, uint32_t i1)
{
    uint32_t i;
    uint64_t o;

    for (i = i0; i < i1; i++) {
        const uint8_t *row = mm->w + (r + i) * mm->w_row_bytes + s0 * bbytes;

        for (o = 0; o < ns * bbytes; o += 64)
            __builtin_prefetch(row + o, 0, 2);
        __builtin_prefetch(row + ns * bbytes - 1, 0, 2);
    }
}

/* Rows [r0, r1) of every column (m >= k_panel_min_m()): 16-row panels, a
 * pass of K_PANEL_SB super-blocks at a time over all of the rows (the
 * pass's activations, m * 4 * 320 bytes, stay in L2 while the panels go
 * by), then the rows left over one at a time (k_row: same bits). */
static AI T5 void k_panels(const struct baton_mm *mm, uint64_t r0, uint64_t r1, uint32_t type)
{
    const uint64_t nsb = mm->k / BATON_QK_K;
    const uint64_t rp = r0 + (r1 - r0) / K_PANEL_ROWS * K_PANEL_ROWS;
    const int G =
        type == BATON_TYPE_Q4_K || type == BATON_TYPE_Q5_K || type == BATON_TYPE_IQ4_XS ? 32 : 16;
    struct k_panel_sb p[K_PANEL_SB];
    uint64_t s0, r, c;
    uint32_t t, bbytes;
    int d_off, dmin_off;

    k_layout(type, &bbytes, &d_off, &dmin_off);

    for (s0 = 0; s0 < nsb; s0 += K_PANEL_SB) {
        const uint32_t ns = nsb - s0 < K_PANEL_SB ? (uint32_t)(nsb - s0) : K_PANEL_SB;

        for (r = r0; r < rp; r += K_PANEL_ROWS) {
            /* the next panel's weights (this pass's, else the next pass's
             * first) come into L2 while the columns pass over this one, a
             * slice of its rows per column group: packing waited for
             * memory, at about a tenth of a 128-column product's time */
            const int last = rp - r <= K_PANEL_ROWS;
            const uint64_t nr = last ? r0 : r + K_PANEL_ROWS, ns0 = last ? s0 + ns : s0;
            const uint64_t nns = nsb - ns0 < K_PANEL_SB ? nsb - ns0 : K_PANEL_SB;
            const uint64_t n_groups = (mm->m + K_COLS - 1) / K_COLS;
            uint64_t gi = 0;

            for (t = 0; t < ns; t++)
                k_panel_pack(mm, type, r, s0 + t, &p[t]);
            for (c = 0; c < mm->m; c += K_COLS, gi++) {
                const uint32_t nc = mm->m - c < K_COLS ? (uint32_t)(mm->m - c) : K_COLS;

                if (ns0 < nsb && gi < K_PANEL_ROWS)
                    k_panel_prefetch(mm, bbytes, nr, ns0, nns,
                                     (uint32_t)(gi * K_PANEL_ROWS / n_groups),
                                     (uint32_t)((gi + 1) * K_PANEL_ROWS / n_groups));

                if (G == 32)
                    k_panel_cols(mm, type, 32, p, ns, r, s0, c, nc, s0 == 0);
                else
                    k_panel_cols(mm, type, 16, p, ns, r, s0, c, nc, s0 == 0);
            }
        }
    }
    for (r = rp; r < r1; r++)
        for (c = 0; c < mm->m; c += K_COLS)
            k_row(mm, r, c, mm->m - c < K_COLS ? (uint32_t)(mm->m - c) : K_COLS, type);
}

/* Rows of at least this many inputs take a K type's dmax (K_KERNELS). */
#define K_LONG_ROW 4096u

static AI uint32_t k_decode_max_m(uint64_t k, uint32_t dmax)
{
    return k >= K_LONG_ROW || dmax < 3 ? dmax : 3;
}

#define K_KERNELS(name, type, dmax)                                                                \
    static T5 void name##_krow(const struct baton_mm *mm, uint64_t r, uint64_t c, uint32_t nc)     \
    {                                                                                              \
        k_row(mm, r, c, nc, type);                                                                 \
    }                                                                                              \
    static T5 void name##_kdecode(const struct baton_mm *mm, uint64_t r)                           \
    {                                                                                              \
        k_rows8(mm, r, type);                                                                      \
    }                                                                                              \
    static const struct baton_mm_tiles name##_ktiles = {                                           \
        name##_kdecode, K_DECODE_ROWS, name##_krow, 1, K_COLS, name##_krow, 0,                     \
    };                                                                                             \
    static T5 void avx512_##name(const struct baton_mm *mm, uint64_t r0, uint64_t r1)              \
    {                                                                                              \
        if (mm->m >= k_panel_min_m() && mm->w_row_bytes <= INT32_MAX / K_PANEL_ROWS)               \
            k_panels(mm, r0, r1, type);                                                            \
        else                                                                                       \
            avx512_drive(mm, r0, r1, &name##_ktiles, k_decode_max_m(mm->k, dmax));                 \
    }

/* dmax: up to this many columns each goes through the 8-row decode
 * (baton_mm_drive_few, k_decode_max_m), below the panels' 8, for rows of
 * K_LONG_ROW inputs or more; shorter rows up to 3 columns. The one-row
 * tile streams a long row badly from memory: bench_kernels (Zen 5, 1
 * thread), GFLOP/s, tile
 * against the decode per column, k 14336 (beyond L3), 2 / 3 / 4 / 5 / 7
 * columns: Q2_K 90 / 121 / 148 / 180 / 226 -> 208 / 215 / 216 / 216 /
 * 219, Q3_K 73 / 102 / 127 / 154 / 184 -> 127 / 128 / 130 / 129 / 131,
 * Q4_K 60 / 84 / 105 / 127 / 157 -> 167 / 175 / 180 / 182 / 184, Q5_K 48 /
 * 70 / 86 / 109 / 138 -> 121 / 129 / 130 / 131 / 134, Q6_K 48 / 60 / 77 /
 * 91 / 118 -> 131 / 146 / 157 / 163 / 172; at k 4096 (in L3) the tile
 * was ahead for Q3_K from 3 columns and for Q5_K from 4. Batched decode
 * (`baton bench --npl`, 1 thread) of the d4096 models, S_TG before and
 * after: Q4_K_M 2 sequences 93-97 -> 177-181 tok/s (one alone: 148), 3
 * 119-128 -> 189-191; Q6_K 93-95 -> 148-149, 117 -> 158-165; of the d768
 * models (rows of 768 and 2048) 2 sequences Q4_K_M 498-520 -> 704-741,
 * Q6_K 487-493 -> 675-682, 4 even, 6 slower by 4-12 % (so the short rows'
 * 3). */
K_KERNELS(q2_k, BATON_TYPE_Q2_K, 5)
K_KERNELS(q3_k, BATON_TYPE_Q3_K, 3)
K_KERNELS(q4_k, BATON_TYPE_Q4_K, 7)
K_KERNELS(q5_k, BATON_TYPE_Q5_K, 5)
K_KERNELS(q6_k, BATON_TYPE_Q6_K, 7)
/* IQ4_XS: Q4_K's 7 (about the same bytes per weight; not measured) */
K_KERNELS(iq4_xs, BATON_TYPE_IQ4_XS, 7)

const struct baton_mm_kernels baton_mm_avx512 = {
    avx512_f32,      avx512_f16,         avx512_q8_0,           avx512_q4_0,
    baton_mm_avx2_act, avx512_f32_dots, avx512_wsum, avx512_f32_dots_multi,
    avx512_silu,     avx512_exp_shift,   avx512_q2_k,           avx512_q3_k,
    avx512_q4_k,     avx512_q5_k,        avx512_q6_k,           baton_mm_avx2_act_k,
    baton_mm_avx512_q5_0, baton_mm_avx512_q5_1, baton_mm_avx2_f16_row, avx512_wsum_h,
    baton_mm_avx2_f32_to_f16_row, avx512_att_block, avx512_bf16, avx512_iq4_nl,
    avx512_iq4_xs, avx512_gelu,
};

#else

const struct baton_mm_kernels baton_mm_avx512 = {0};

#endif
