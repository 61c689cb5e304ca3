/* AVX-512 (F, BW, DQ, VL, VNNI) kernels of Q5_0 / Q5_1 weights (x86-64
 * only; every function carries its target attribute). They follow
 * matmul.h's Q5 order lane for lane: one 512-bit accumulator holds the 16
 * lanes L[0..15] of a group of 4 blocks (lane 4j + l: block 4g + j, lane l),
 * which is the activation group's layout, so a group is two vpdpbusd (the
 * 5-bit weights unsigned, 0..31, against the int8 activations; exact int32
 * sums of the 8 elements of each lane) and one or two FMAs. The fifth bits
 * go in through a byte mask: bit 16j + e of a 64-bit mask is bit e (low
 * half) or 16 + e (high half) of block j's qh. Q5_0's -16 comes back
 * through the activations' corr (bias 16), Q5_1's xsum is corr (bias -1).
 * The final L[l] + L[l + 8] and hsum8 are the AVX2 level's, so the bits are
 * the scalar kernels'. A whole group's weights come out of its bytes by
 * word permutes (q5z_load4); a last group of fewer than 4 blocks reads only
 * its blocks (q5z_load) and leaves the absent blocks' lanes as they were. */
#include "compute/cpu/matmul.h"

#if defined(__x86_64__)

#include <immintrin.h>
#include <string.h>

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#define T5 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx2,fma,f16c")))
#define AI inline __attribute__((always_inline))

static AI uint32_t q5z_load_u32(const uint8_t *p)
{
    uint32_t v;

    memcpy(&v, p, sizeof(v)); /* x86: little-endian */
    return v;
}

static AI uint16_t q5z_load_u16(const uint8_t *p)
{
    uint16_t v;

    memcpy(&v, p, sizeof(v));
    return v;
}

/* hsum8 of matmul.h over L[l] + L[l + 8] */
static AI T5 float q5z_hsum16(__m512 acc)
{
    const __m256 c = _mm256_add_ps(_mm512_castps512_ps256(acc),
                                   _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1)));
    const __m128 e = _mm_add_ps(_mm256_castps256_ps128(c), _mm256_extractf128_ps(c, 1));
    const __m128 f = _mm_add_ps(e, _mm_movehl_ps(e, e));

    return _mm_cvtss_f32(_mm_add_ss(f, _mm_movehdup_ps(f)));
}

/* The weights of blocks b .. b + nbk - 1 (1 <= nbk <= 4) of one row, laid
 * out as one activation group: lo / hi bytes 16j + e = the 5-bit quant of
 * element e / 16 + e of block j (0 for absent blocks), dw / mw lanes
 * 4j..4j+3 = block j's d / m (0 for absent blocks). */
struct q5z_w {
    __m512i lo, hi;
    __m512 dw, mw;
};

/* Word indices into a whole group's bytes (4 blocks, words 0..31 from the
 * first 64 bytes, 32.. from the rest), per type (Q5_0: W = 11 words a
 * block, qh at word 1, qs at 3; Q5_1: W = 12, qh at 2, qs at 4):
 *   [0] the qs: word 8j + i = W j + qs + i (block j's 16 quant bytes in
 *       its 128-bit lane)
 *   [1] / [2] the low / high 16 bits of block j's qh in every word of lane j
 *   [3] the scales: word 4j + l = W j (d), for Q5_1 word 16 + 4j + l = W j
 *       + 1 (m) */
static const uint16_t q5z_idx[2][4][32] = {
    {{3, 4, 5, 6, 7, 8, 9, 10, 14, 15, 16, 17, 18, 19, 20, 21,
      25, 26, 27, 28, 29, 30, 31, 32, 36, 37, 38, 39, 40, 41, 42, 43},
     {1, 1, 1, 1, 1, 1, 1, 1, 12, 12, 12, 12, 12, 12, 12, 12,
      23, 23, 23, 23, 23, 23, 23, 23, 34, 34, 34, 34, 34, 34, 34, 34},
     {2, 2, 2, 2, 2, 2, 2, 2, 13, 13, 13, 13, 13, 13, 13, 13,
      24, 24, 24, 24, 24, 24, 24, 24, 35, 35, 35, 35, 35, 35, 35, 35},
     {0, 0, 0, 0, 11, 11, 11, 11, 22, 22, 22, 22, 33, 33, 33, 33,
      0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
    {{4, 5, 6, 7, 8, 9, 10, 11, 16, 17, 18, 19, 20, 21, 22, 23,
      28, 29, 30, 31, 32, 33, 34, 35, 40, 41, 42, 43, 44, 45, 46, 47},
     {2, 2, 2, 2, 2, 2, 2, 2, 14, 14, 14, 14, 14, 14, 14, 14,
      26, 26, 26, 26, 26, 26, 26, 26, 38, 38, 38, 38, 38, 38, 38, 38},
     {3, 3, 3, 3, 3, 3, 3, 3, 15, 15, 15, 15, 15, 15, 15, 15,
      27, 27, 27, 27, 27, 27, 27, 27, 39, 39, 39, 39, 39, 39, 39, 39},
     {0, 0, 0, 0, 12, 12, 12, 12, 24, 24, 24, 24, 36, 36, 36, 36,
      1, 1, 1, 1, 13, 13, 13, 13, 25, 25, 25, 25, 37, 37, 37, 37}},
};

/* The 64-bit byte mask of one qh half (words as q5z_idx[1] or [2] lays them
 * out): bit 16j + e = bit e of that half of block j's qh, as the byte
 * mask of q5z_load's scalar path. Each byte e of a lane takes the half's
 * low byte (e < 8) or high byte, then is tested against bit e % 8. */
static AI T5 __mmask64 q5z_bits(__m512i halves)
{
    const __m512i pick = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1,
                                                              1, 1, 1, 1));
    const __m512i bit = _mm512_broadcast_i32x4(_mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2,
                                                             4, 8, 16, 32, 64, -128));

    return _mm512_test_epi8_mask(_mm512_shuffle_epi8(halves, pick), bit);
}

/* A whole group (4 blocks) by word permutes of its bytes: the same
 * registers as q5z_load builds from scalar loads, shifts and ors (which
 * bounded the decode: bench_kernels, Zen 5, 1 thread, from cache Q5_0 24
 * -> 42 GB/s, Q5_1 21 -> 33; with the decode's prefetch, from memory at k
 * 4096 Q5_0 22.4-22.8 -> 38.5-39.0, Q5_1 20.0-20.2 -> 31.2-31.9, at k
 * 14336 Q5_0 14.8 -> 35.0-35.6, Q5_1 13.8-14.0 -> 30.8-31.0; the loads
 * alone gave 32 / 28.5 and 21-22 / 20.5). */
static AI T5 struct q5z_w q5z_load4(const uint8_t *p, const int is_q5_1)
{
    const uint16_t(*idx)[32] = q5z_idx[is_q5_1];
    const __m512i m4 = _mm512_set1_epi8(0x0F), b4 = _mm512_set1_epi8(0x10);
    const __m512i z0 = _mm512_loadu_si512((const void *)p);
    /* bytes 64..87 (Q5_0) or 64..95 (Q5_1): the group's end, no further */
    const __m512i z1 = _mm512_maskz_loadu_epi8(is_q5_1 ? 0xFFFFFFFFull : 0xFFFFFFull, p + 64);
    const __m512i v = _mm512_permutex2var_epi16(z0, _mm512_loadu_si512(idx[0]), z1);
    const __mmask64 mlo =
        q5z_bits(_mm512_permutex2var_epi16(z0, _mm512_loadu_si512(idx[1]), z1));
    const __mmask64 mhi =
        q5z_bits(_mm512_permutex2var_epi16(z0, _mm512_loadu_si512(idx[2]), z1));
    const __m512i dm = _mm512_permutex2var_epi16(z0, _mm512_loadu_si512(idx[3]), z1);
    struct q5z_w w;

    w.lo = _mm512_or_si512(_mm512_and_si512(v, m4), _mm512_maskz_mov_epi8(mlo, b4));
    w.hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4),
                           _mm512_maskz_mov_epi8(mhi, b4));
    w.dw = _mm512_cvtph_ps(_mm512_castsi512_si256(dm));
    w.mw = is_q5_1 ? _mm512_cvtph_ps(_mm512_extracti64x4_epi64(dm, 1)) : _mm512_setzero_ps();
    return w;
}

static AI T5 struct q5z_w q5z_load(const uint8_t *p, const int nbk, const int is_q5_1)
{
    const uint64_t bb = is_q5_1 ? 24 : 22, qh_off = is_q5_1 ? 4 : 2, qs_off = qh_off + 4;
    const __m512i m4 = _mm512_set1_epi8(0x0F), b4 = _mm512_set1_epi8(0x10);
    const __m512i spread = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    __m512i v = _mm512_setzero_si512();
    uint64_t mlo = 0, mhi = 0, d4 = 0, m4w = 0;
    struct q5z_w w;
    int j;

    if (nbk == 4) {
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + qs_off)), 0);
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + bb + qs_off)), 1);
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + 2 * bb + qs_off)), 2);
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + 3 * bb + qs_off)), 3);
    } else { /* the row's last, partial group: absent blocks' bytes 0 */
        uint8_t qs[64] = {0};

        for (j = 0; j < nbk; j++)
            memcpy(qs + 16 * j, p + j * bb + qs_off, 16);
        v = _mm512_loadu_si512((const void *)qs);
    }
#pragma GCC unroll 4
    for (j = 0; j < nbk; j++) {
        const uint8_t *pb = p + j * bb;
        const uint32_t qh = q5z_load_u32(pb + qh_off);

        mlo |= (uint64_t)(qh & 0xFFFFu) << (16 * j);
        mhi |= (uint64_t)(qh >> 16) << (16 * j);
        d4 |= (uint64_t)q5z_load_u16(pb) << (16 * j);
        if (is_q5_1)
            m4w |= (uint64_t)q5z_load_u16(pb + 2) << (16 * j);
    }
    w.lo = _mm512_or_si512(_mm512_and_si512(v, m4), _mm512_maskz_mov_epi8(mlo, b4));
    w.hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4),
                           _mm512_maskz_mov_epi8(mhi, b4));
    /* the binary16 scales assembled in a register: a byte-wise array read
     * back as a vector would stall store forwarding */
    {
        const __m256 dm = _mm256_cvtph_ps(_mm_set_epi64x((long long)m4w, (long long)d4));

        w.dw = _mm512_permutexvar_ps(spread, _mm512_castps256_ps512(dm));
        w.mw = is_q5_1 ? _mm512_permutexvar_ps(_mm512_add_epi32(spread, _mm512_set1_epi32(4)),
                                               _mm512_castps256_ps512(dm))
                       : _mm512_setzero_ps();
    }
    return w;
}

/* Row r against columns [c, c + NC). */
static AI T5 void q5z_tile(const struct baton_mm *mm, uint64_t r, uint64_t c, const int NC,
                           const int is_q5_1)
{
    const uint64_t nb = mm->k / 32, bb = is_q5_1 ? 24 : 22;
    const uint8_t *wr = mm->w + r * mm->w_row_bytes;
    __m512 acc[4];
    uint64_t b;
    int i;

#pragma GCC unroll 4
    for (i = 0; i < NC; i++)
        acc[i] = _mm512_setzero_ps();
    for (b = 0; b < nb; b += 4) {
        const int nbk = nb - b >= 4 ? 4 : (int)(nb - b);
        const __mmask16 keep = (__mmask16)((1u << (4 * nbk)) - 1u);
        const struct q5z_w w =
            nbk == 4 ? q5z_load4(wr + b * bb, is_q5_1) : q5z_load(wr + b * bb, nbk, is_q5_1);

        if (NC == 1) /* decode: the weights 8 KiB ahead into L1, as the other types' */
            baton_mm_decode_prefetch_l1(wr + b * bb, 2);

#pragma GCC unroll 4
        for (i = 0; i < NC; i++) {
            const uint8_t *grp =
                mm->act + (c + i) * mm->act_col_bytes + b / 4 * BATON_ACT_GROUP_BYTES;
            const __m512i xlo = _mm512_loadu_si512((const void *)grp);
            const __m512i xhi = _mm512_loadu_si512((const void *)(grp + 64));
            const __m512i cv = _mm512_loadu_si512((const void *)(grp + 128));
            const __m512 dx = _mm512_loadu_ps((const float *)(grp + 192));
            const __m512i i32 = _mm512_dpbusd_epi32(
                _mm512_dpbusd_epi32(is_q5_1 ? _mm512_setzero_si512() : cv, w.lo, xlo), w.hi, xhi);
            __m512 s = _mm512_fmadd_ps(_mm512_mul_ps(w.dw, dx), _mm512_cvtepi32_ps(i32), acc[i]);

            if (is_q5_1)
                s = _mm512_fmadd_ps(_mm512_mul_ps(w.mw, dx), _mm512_cvtepi32_ps(cv), s);
            acc[i] = _mm512_mask_blend_ps(keep, acc[i], s);
        }
    }
#pragma GCC unroll 4
    for (i = 0; i < NC; i++)
        mm->y[(c + i) * mm->ldy + r] = q5z_hsum16(acc[i]);
}

#define Q5Z_KERNELS(name, is_q5_1)                                                                 \
    static T5 void name##_decode(const struct baton_mm *mm, uint64_t r)                            \
    {                                                                                              \
        q5z_tile(mm, r, 0, 1, is_q5_1);                                                            \
    }                                                                                              \
    static T5 void name##_tile_n(const struct baton_mm *mm, uint64_t r, uint64_t c, uint32_t nc)   \
    {                                                                                              \
        switch (nc) {                                                                              \
        case 1:                                                                                    \
            q5z_tile(mm, r, c, 1, is_q5_1);                                                        \
            break;                                                                                 \
        case 2:                                                                                    \
            q5z_tile(mm, r, c, 2, is_q5_1);                                                        \
            break;                                                                                 \
        case 3:                                                                                    \
            q5z_tile(mm, r, c, 3, is_q5_1);                                                        \
            break;                                                                                 \
        default:                                                                                   \
            q5z_tile(mm, r, c, 4, is_q5_1);                                                        \
            break;                                                                                 \
        }                                                                                          \
    }                                                                                              \
    static const struct baton_mm_tiles name##_z_tiles = {                                          \
        name##_decode, 1, name##_tile_n, 1, 4, name##_tile_n, 0,                                   \
    };                                                                                             \
    T5 void baton_mm_avx512_##name(const struct baton_mm *mm, uint64_t r0, uint64_t r1)            \
    {                                                                                              \
        baton_mm_drive(mm, r0, r1, &name##_z_tiles);                                               \
    }

Q5Z_KERNELS(q5_0, 0)
Q5Z_KERNELS(q5_1, 1)

#else /* not x86-64: nothing here (ISO C wants a declaration) */

typedef int baton_q5_avx512_unused;

#endif
