/* AVX2 + FMA + F16C kernels of Q5_0 / Q5_1 weights (x86-64 only; every
 * function carries its target attribute). They follow matmul.h's Q5 order
 * lane for lane, so they give the scalar kernels' bits (the AVX-512 level's
 * are in matmul_q5_avx512.c).
 *
 * The layout is Q4_0's (matmul_avx2.c): a 256-bit accumulator holds the 4
 * lanes of each of two blocks, blocks 4g, 4g+1 in acc0 (L[0..7]) and 4g+2,
 * 4g+3 in acc1 (L[8..15]). The fifth bits (bit e of a block's qh for its
 * element e) are spread to bytes by a shuffle, a per-byte bit mask and a
 * compare, then or-ed above the nibbles: unsigned 0..31 weights, whose
 * maddubs pair sums stay below 2 * 31 * 127 and the two halves' sum below
 * 2^15. Q5_0 adds -16 * (sum of x) back through the activations' corr
 * (bias 16); for Q5_1 corr is the lane's sum of x (bias -1), the min term.
 */
#include "compute/cpu/matmul.h"

#if defined(__x86_64__)

#include <immintrin.h>
#include <string.h>

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#define T2 __attribute__((target("avx2,fma,f16c")))
#define AI inline __attribute__((always_inline))

static AI uint32_t q5_load_u32(const uint8_t *p)
{
    uint32_t v;

    memcpy(&v, p, sizeof(v)); /* x86: little-endian */
    return v;
}

static AI uint16_t q5_load_u16(const uint8_t *p)
{
    uint16_t v;

    memcpy(&v, p, sizeof(v));
    return v;
}

/* hsum8 of matmul.h */
static AI T2 float q5_hsum8(__m256 c)
{
    const __m128 e = _mm_add_ps(_mm256_castps256_ps128(c), _mm256_extractf128_ps(c, 1));
    const __m128 f = _mm_add_ps(e, _mm_movehl_ps(e, e));

    return _mm_cvtss_f32(_mm_add_ss(f, _mm_movehdup_ps(f)));
}

/* binary16 values at p (block b) and p + bb (block b+1) as [v0 x4, v1 x4]
 * (v1 = 0 without pair). */
static AI T2 __m256 q5_scales2(const uint8_t *p, uint64_t bb, const int pair)
{
    const uint32_t h = q5_load_u16(p) | (pair ? (uint32_t)q5_load_u16(p + bb) << 16 : 0);
    const __m128i spread = _mm_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3);

    return _mm256_cvtph_ps(_mm_shuffle_epi8(_mm_cvtsi32_si128((int)h), spread));
}

/* 0x10 in byte i of each 128-bit half where bit (8 * sel[i] + i % 8) of
 * that half's 32-bit qh is set: sel picks the qh byte of each output byte
 * (bytes 0, 1 for elements 0..15; 2, 3 for elements 16..31). */
static AI T2 __m256i q5_bits(__m256i qh2, __m256i sel)
{
    const __m256i mask = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i b = _mm256_and_si256(_mm256_shuffle_epi8(qh2, sel), mask);

    return _mm256_and_si256(_mm256_cmpeq_epi8(b, mask), _mm256_set1_epi8(0x10));
}

/* Blocks b, b+1 (pair 1) or b alone (pair 0: lanes 4..7 left as they are)
 * of row r against NC columns into acc[j]. */
static AI T2 void q5_pair(const struct baton_mm *mm, uint64_t r, uint64_t c, uint64_t b,
                          const int NC, const int is_q5_1, const int pair, __m256 *acc)
{
    const uint64_t bb = is_q5_1 ? 24 : 22, half = 16 * (b % 4); /* 0 or 32 */
    const uint64_t qh_off = is_q5_1 ? 4 : 2, qs_off = qh_off + 4;
    const __m256i ones16 = _mm256_set1_epi16(1), m4 = _mm256_set1_epi8(0x0F);
    const __m256i sel_lo =
        _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1,
                         1, 1, 1, 1, 1, 1, 1);
    const __m256i sel_hi =
        _mm256_setr_epi8(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2, 3,
                         3, 3, 3, 3, 3, 3, 3);
    const uint8_t *p = mm->w + r * mm->w_row_bytes + b * bb;
    const __m256 dw = q5_scales2(p, bb, pair);
    const __m256 mw = is_q5_1 ? q5_scales2(p + 2, bb, pair) : _mm256_setzero_ps();
    const __m128i v0 = _mm_loadu_si128((const __m128i *)(p + qs_off));
    const __m128i v1 = pair ? _mm_loadu_si128((const __m128i *)(p + bb + qs_off))
                            : _mm_setzero_si128();
    const __m256i v = _mm256_set_m128i(v1, v0);
    const __m256i qh2 =
        _mm256_set_m128i(_mm_cvtsi32_si128(pair ? (int)q5_load_u32(p + bb + qh_off) : 0),
                         _mm_cvtsi32_si128((int)q5_load_u32(p + qh_off)));
    const __m256i lo = _mm256_or_si256(_mm256_and_si256(v, m4), q5_bits(qh2, sel_lo));
    const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4),
                                       q5_bits(qh2, sel_hi));
    int j;

#pragma GCC unroll 4
    for (j = 0; j < NC; j++) {
        const uint8_t *grp = mm->act + (c + j) * mm->act_col_bytes + b / 4 * BATON_ACT_GROUP_BYTES;
        const __m256i xlo = _mm256_loadu_si256((const __m256i *)(grp + half));
        const __m256i xhi = _mm256_loadu_si256((const __m256i *)(grp + 64 + half));
        const __m256 dxv = _mm256_loadu_ps((const float *)(grp + 192 + half));
        const __m256i cv = _mm256_loadu_si256((const __m256i *)(grp + 128 + half));
        const __m256i p16 =
            _mm256_add_epi16(_mm256_maddubs_epi16(lo, xlo), _mm256_maddubs_epi16(hi, xhi));
        __m256i i32 = _mm256_madd_epi16(p16, ones16);
        __m256 s;

        if (!is_q5_1)
            i32 = _mm256_add_epi32(i32, cv);
        s = _mm256_fmadd_ps(_mm256_mul_ps(dw, dxv), _mm256_cvtepi32_ps(i32), acc[j]);
        if (is_q5_1)
            s = _mm256_fmadd_ps(_mm256_mul_ps(mw, dxv), _mm256_cvtepi32_ps(cv), s);
        acc[j] = pair ? s : _mm256_blend_ps(s, acc[j], 0xF0);
    }
}

static AI T2 void q5_tile(const struct baton_mm *mm, uint64_t r, uint64_t c, const int NC,
                          const int is_q5_1)
{
    const uint64_t nb = mm->k / 32;
    __m256 acc0[4], acc1[4];
    uint64_t b;
    int i;

#pragma GCC unroll 4
    for (i = 0; i < NC; i++) {
        acc0[i] = _mm256_setzero_ps();
        acc1[i] = _mm256_setzero_ps();
    }
    for (b = 0; nb - b >= 4; b += 4) {
        q5_pair(mm, r, c, b, NC, is_q5_1, 1, acc0);
        q5_pair(mm, r, c, b + 2, NC, is_q5_1, 1, acc1);
    }
    if (nb - b >= 2) {
        q5_pair(mm, r, c, b, NC, is_q5_1, 1, acc0);
        if (nb - b == 3)
            q5_pair(mm, r, c, b + 2, NC, is_q5_1, 0, acc1);
    } else if (nb - b == 1) {
        q5_pair(mm, r, c, b, NC, is_q5_1, 0, acc0);
    }
#pragma GCC unroll 4
    for (i = 0; i < NC; i++) /* c[k] = L[k] + L[k+8], then hsum8 */
        mm->y[(c + i) * mm->ldy + r] = q5_hsum8(_mm256_add_ps(acc0[i], acc1[i]));
}

#define Q5_KERNELS(name, is_q5_1)                                                                  \
    static T2 void name##_decode(const struct baton_mm *mm, uint64_t r)                            \
    {                                                                                              \
        q5_tile(mm, r, 0, 1, is_q5_1);                                                             \
    }                                                                                              \
    static T2 void name##_tile_n(const struct baton_mm *mm, uint64_t r, uint64_t c, uint32_t nc)   \
    {                                                                                              \
        switch (nc) {                                                                              \
        case 1:                                                                                    \
            q5_tile(mm, r, c, 1, is_q5_1);                                                         \
            break;                                                                                 \
        case 2:                                                                                    \
            q5_tile(mm, r, c, 2, is_q5_1);                                                         \
            break;                                                                                 \
        case 3:                                                                                    \
            q5_tile(mm, r, c, 3, is_q5_1);                                                         \
            break;                                                                                 \
        default:                                                                                   \
            q5_tile(mm, r, c, 4, is_q5_1);                                                         \
            break;                                                                                 \
        }                                                                                          \
    }                                                                                              \
    static const struct baton_mm_tiles name##_tiles = {                                            \
        name##_decode, 1, name##_tile_n, 1, 4, name##_tile_n, 0,                                   \
    };                                                                                             \
    T2 void baton_mm_avx2_##name(const struct baton_mm *mm, uint64_t r0, uint64_t r1)              \
    {                                                                                              \
        baton_mm_drive(mm, r0, r1, &name##_tiles);                                                 \
    }

Q5_KERNELS(q5_0, 0)
Q5_KERNELS(q5_1, 1)

#else /* not x86-64: nothing here (ISO C wants a declaration) */

typedef int baton_q5_avx2_unused;

#endif
