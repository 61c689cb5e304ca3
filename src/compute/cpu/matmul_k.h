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
 *          Q6_K -128..127),
 *   mn[i]  the integer min M (Q2_K 0..15, Q4_K / Q5_K 0..63, else 0),
 * and returns the bias the SIMD levels subtract: they read each quant as
 * an unsigned value Qw + bias (Q3_K 4, Q6_K 32, else 0) and take
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
    default:
        *bytes = BATON_Q6_K_BLOCK_BYTES, *d_off = 208, *dmin_off = -1;
        return;
    }
}

#endif
