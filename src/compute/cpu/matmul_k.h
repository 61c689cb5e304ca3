/* Internal: the per-super-block scales of the K-quant weights (quant.h's
 * layouts) as every level of the MUL_MAT kernels reads them, included by
 * matmul.c, matmul_avx2.c and matmul_avx512.c. Everything here is exact
 * integer work: the levels share it so they agree on the integers, and the
 * integers fix the bits (matmul.h's K order).
 *
 * k_scales() gives, for each group i of 16 consecutive elements (i = 0..15)
 * of one super-block:
 *   sc[i]  the integer scale Sc of matmul.h (Q2_K 0..15, Q3_K -32..31,
 *          Q4_K / Q5_K 0..63 (a sub-block of 32 is the groups 2j, 2j + 1),
 *          Q6_K -128..127, IQ4_XS -32..31 (sub-blocks of 32 as Q4_K)),
 *   mn[i]  the integer min M (Q2_K 0..15, Q4_K / Q5_K 0..63, else 0),
 * and returns the bias the SIMD levels subtract: they read each quant as
 * an unsigned value Qw + bias (Q3_K 4, Q6_K 32, IQ4_XS 128 (its grid
 * levels -127..113 read as 1..241 by AVX-512's vpdpbusd; the AVX2 level
 * reads them signed and ignores the bias), else 0) and take
 * bias * sum_i sc[i] * bsums[i] off the integer sum, which is exact.
 * d_off / dmin_off: byte offsets of the binary16 d and dmin (dmin_off < 0:
 * none). */
#ifndef BATON_COMPUTE_CPU_MATMUL_K_H
#define BATON_COMPUTE_CPU_MATMUL_K_H

#include <stdint.h>

#include "compute/cpu/quant.h"
#include "core/types.h"

static inline int k_scales(uint32_t type, const uint8_t *wb, int8_t sc[16], int16_t mn[16])
{
    int i;

    switch (type) {
    case BATON_TYPE_Q2_K:
        for (i = 0; i < 16; i++) {
            sc[i] = (int8_t)(wb[i] & 15);
            mn[i] = (int16_t)(wb[i] >> 4);
        }
        return 0;
    case BATON_TYPE_Q3_K: {
        const uint8_t *s = wb + 96;

        for (i = 0; i < 16; i++) {
            const int lo = i < 8 ? s[i] & 15 : s[i - 8] >> 4;
            const int hi = (s[8 + i % 4] >> (2 * (i / 4))) & 3;

            sc[i] = (int8_t)((lo | hi << 4) - 32);
            mn[i] = 0;
        }
        return 4;
    }
    case BATON_TYPE_Q4_K:
    case BATON_TYPE_Q5_K: {
        const uint8_t *s = wb + 4;

        for (i = 0; i < 8; i++) {
            int v, m;

            if (i < 4) {
                v = s[i] & 63;
                m = s[i + 4] & 63;
            } else {
                v = (s[i + 4] & 15) | (s[i - 4] >> 6) << 4;
                m = (s[i + 4] >> 4) | (s[i] >> 6) << 4;
            }
            sc[2 * i] = sc[2 * i + 1] = (int8_t)v;
            mn[2 * i] = mn[2 * i + 1] = (int16_t)m;
        }
        return 0;
    }
    case BATON_TYPE_IQ4_XS: {
        const uint16_t sh = (uint16_t)(wb[2] | wb[3] << 8);

        for (i = 0; i < 8; i++) {
            const int ls = ((wb[4 + i / 2] >> 4 * (i % 2)) & 15) | ((sh >> 2 * i) & 3) << 4;

            sc[2 * i] = sc[2 * i + 1] = (int8_t)(ls - 32);
            mn[2 * i] = mn[2 * i + 1] = 0;
        }
        return 128;
    }
    default: /* Q6_K */
        for (i = 0; i < 16; i++) {
            sc[i] = (int8_t)wb[192 + i];
            mn[i] = 0;
        }
        return 32;
    }
}

/* Byte offsets of d and dmin (-1: no dmin) and the super-block's size. */
static inline void k_layout(uint32_t type, uint32_t *bytes, int *d_off, int *dmin_off)
{
    switch (type) {
    case BATON_TYPE_Q2_K:
        *bytes = BATON_Q2_K_BLOCK_BYTES, *d_off = 80, *dmin_off = 82;
        return;
    case BATON_TYPE_Q3_K:
        *bytes = BATON_Q3_K_BLOCK_BYTES, *d_off = 108, *dmin_off = -1;
        return;
    case BATON_TYPE_Q4_K:
        *bytes = BATON_Q4_K_BLOCK_BYTES, *d_off = 0, *dmin_off = 2;
        return;
    case BATON_TYPE_Q5_K:
        *bytes = BATON_Q5_K_BLOCK_BYTES, *d_off = 0, *dmin_off = 2;
        return;
    case BATON_TYPE_IQ4_XS:
        *bytes = BATON_IQ4_XS_BLOCK_BYTES, *d_off = 0, *dmin_off = -1;
        return;
    default:
        *bytes = BATON_Q6_K_BLOCK_BYTES, *d_off = 208, *dmin_off = -1;
        return;
    }
}

#endif

#if defined(K_VEC_TARGET) && !defined(BATON_MATMUL_K_VEC)
#define BATON_MATMUL_K_VEC
#include <immintrin.h>
#include <string.h>

/* Q4_K / Q5_K: bytes 0..7 of the result are the 6-bit scales of
 * sub-blocks 0..7 of the super-block at wb, bytes 8..15 their mins
 * (k_scales' integers). The fields are read four at a time from the 12
 * bytes as three 32-bit words u0, u1, u2 (byte b of a word is the field of
 * sub-block b, resp. b + 4): sc[0..3] = u0 & 63, m[0..3] = u1 & 63,
 * sc[4..7] = (u2 & 15) | (u0 >> 6) << 4, m[4..7] = (u2 >> 4) | (u1 >> 6)
 * << 4, per byte; that is quant.h's formula with j - 4 = b. The words are
 * lanes of one vector load, not general registers: moving them from
 * general registers into a vector (vmovd, vpinsrd) cost about a quarter
 * of AVX-512 Q4_K decode's time. */
static inline __attribute__((always_inline)) K_VEC_TARGET __m128i k_q45_sm(const uint8_t *wb)
{
    /* dwords u0, u1, u2 (bytes 4..15; the load's last 4 bytes are the
     * quants, unused) */
    const __m128i u = _mm_loadu_si128((const __m128i *)(wb + 4));
    /* dwords 0, 1: s8[0], m8[0] */
    const __m128i lo = _mm_and_si128(u, _mm_set1_epi8(63));
    /* dwords 0, 1: u2 & 15, (u2 >> 4) & 15 per byte, or'ed with
     * (u0 >> 6) << 4, (u1 >> 6) << 4: s8[1], m8[1] */
    const __m128i hi = _mm_or_si128(
        _mm_and_si128(_mm_srlv_epi32(_mm_shuffle_epi32(u, 0xAA), _mm_setr_epi32(0, 4, 0, 0)),
                      _mm_set1_epi8(15)),
        _mm_and_si128(_mm_srli_epi32(u, 2), _mm_set1_epi8(0x30)));

    return _mm_unpacklo_epi32(lo, hi);
}

/* k_scales in registers (the SIMD levels; K_VEC_TARGET is the including
 * file's target attribute): *sc = the 16 int8 sc[i], *mn = the 16 int16
 * mn[i], the same integers as k_scales (tested equal through the kernels'
 * bits); returns the bias. Writing them to memory byte by byte and
 * reading them back as a vector cost a store-forwarding stall per
 * super-block. Q4_K / Q5_K: k_q45_sm. */
static inline __attribute__((always_inline)) K_VEC_TARGET int
k_scales_v(uint32_t type, const uint8_t *wb, __m128i *sc, __m256i *mn)
{
    switch (type) {
    case BATON_TYPE_Q2_K: {
        const __m128i v = _mm_loadu_si128((const __m128i *)wb);
        const __m128i m15 = _mm_set1_epi8(15);

        *sc = _mm_and_si128(v, m15);
        *mn = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(v, 4), m15));
        return 0;
    }
    case BATON_TYPE_Q3_K: {
        const __m128i m15 = _mm_set1_epi8(15);
        const __m128i a = _mm_loadl_epi64((const __m128i *)(wb + 96));
        const __m128i lo =
            _mm_unpacklo_epi64(_mm_and_si128(a, m15), _mm_and_si128(_mm_srli_epi16(a, 4), m15));
        uint32_t hw;
        __m128i hi;

        memcpy(&hw, wb + 104, sizeof(hw));
        hi = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32((int)hw), _mm_setr_epi32(0, 2, 4, 6)),
                           _mm_set1_epi8(3));
        *sc = _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi8(32));
        *mn = _mm256_setzero_si256();
        return 4;
    }
    case BATON_TYPE_Q4_K:
    case BATON_TYPE_Q5_K: {
        const __m128i sm = k_q45_sm(wb);

        *sc = _mm_unpacklo_epi8(sm, sm); /* sub-block j of 32 = groups 2j, 2j + 1 */
        *mn = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm));
        return 0;
    }
    case BATON_TYPE_IQ4_XS: {
        /* ls_j's low 4 bits: the nibbles of scales_l in order (byte j / 2,
         * low nibble first); its high 2: bits 2j, 2j + 1 of scales_h, moved
         * to the top of int16 lane j by a multiply by 2^(14 - 2j), then down */
        uint32_t l4;
        uint16_t h16;
        __m128i lo, hi;

        memcpy(&h16, wb + 2, sizeof(h16));
        memcpy(&l4, wb + 4, sizeof(l4));
        lo = _mm_cvtsi32_si128((int)l4);
        lo = _mm_unpacklo_epi8(_mm_and_si128(lo, _mm_set1_epi8(15)),
                               _mm_and_si128(_mm_srli_epi16(lo, 4), _mm_set1_epi8(15)));
        hi = _mm_srli_epi16(_mm_mullo_epi16(_mm_set1_epi16((short)h16),
                                            _mm_setr_epi16(1 << 14, 1 << 12, 1 << 10, 1 << 8,
                                                           1 << 6, 1 << 4, 1 << 2, 1)),
                            14);
        /* bytes 0..7: ls_j - 32; groups 2j, 2j + 1 share sub-block j's */
        lo = _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(_mm_packus_epi16(hi, hi), 4)),
                          _mm_set1_epi8(32));
        *sc = _mm_unpacklo_epi8(lo, lo);
        *mn = _mm256_setzero_si256();
        return 128;
    }
    default: /* Q6_K */
        *sc = _mm_loadu_si128((const __m128i *)(wb + 192));
        *mn = _mm256_setzero_si256();
        return 32;
    }
}

/* The 16 grid levels of IQ4_NL / IQ4_XS (quant.h) as signed bytes, the
 * table of a vpshufb by nibble. */
static inline __attribute__((always_inline)) K_VEC_TARGET __m128i k_iq4_grid(void)
{
    return _mm_loadu_si128((const __m128i *)baton_iq4_grid);
}
#endif
