/* binary16 conversion, the Q8_0 / Q4_0 / Q5_0 / Q5_1 quantizers and the K-quants (see
 * quant.h). Plain
 * C: the formats' bytes are assembled little-endian explicitly, so nothing
 * here depends on alignment or host byte order. */
#include "compute/cpu/quant.h"

#include <math.h>
#include <string.h>

#include "baton/status.h"
#include "core/types.h"

static uint32_t kq_block_bytes(uint32_t type);

static uint32_t f32_bits(float f)
{
    uint32_t u;

    memcpy(&u, &f, sizeof(u));
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;

    memcpy(&f, &u, sizeof(f));
    return f;
}

float baton_fp16_to_fp32(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;

    if (e == 0x1F) /* inf, or NaN made quiet (bit 22) */
        return bits_f32(sign | 0x7F800000u | (m << 13) | (m ? 0x00400000u : 0));
    if (e == 0) {
        if (m == 0)
            return bits_f32(sign);
        /* subnormal m * 2^-24: shift the leading 1 up to bit 10 */
        e = 113;
        while (!(m & 0x400u)) {
            m <<= 1;
            e--;
        }
        return bits_f32(sign | (e << 23) | ((m & 0x3FFu) << 13));
    }
    return bits_f32(sign | ((e + 112) << 23) | (m << 13));
}

uint16_t baton_fp32_to_fp16(float f)
{
    const uint32_t x = f32_bits(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t ax = x & 0x7FFFFFFFu;

    if (ax > 0x7F800000u) /* NaN: quiet, top payload bits kept */
        return (uint16_t)(sign | 0x7E00u | ((ax >> 13) & 0x3FFu));
    if (ax >= 0x477FF000u) /* >= 65520: rounds to 2^16, i.e. inf */
        return (uint16_t)(sign | 0x7C00u);
    if (ax >= 0x38800000u) {                          /* >= 2^-14: a normal half */
        uint32_t r = ax + 0xFFFu + ((ax >> 13) & 1u); /* ties to even */

        return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
    }
    if (ax <= 0x33000000u) /* <= 2^-25 (the tie rounds to even 0) */
        return sign;
    {
        /* subnormal result: (ax's significand) * 2^(e-150) in units of
         * 2^-24 is the significand shifted right by 126 - e (14..24) */
        const uint32_t e = ax >> 23, mant = (ax & 0x7FFFFFu) | 0x800000u;
        const uint32_t s = 126 - e, half = 1u << (s - 1);
        uint32_t r = mant >> s;
        const uint32_t rem = mant & ((1u << s) - 1);

        if (rem > half || (rem == half && (r & 1u)))
            r++; /* may carry into the smallest normal: still correct */
        return (uint16_t)(sign | r);
    }
}

static uint16_t load_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (uint16_t)(p[1] << 8));
}

static void store_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v & 0xFFu);
    p[1] = (uint8_t)(v >> 8);
}

void baton_fp16_to_fp32_row(const void *src, float *dst, uint64_t n)
{
    const uint8_t *s = src;
    uint64_t i;

    for (i = 0; i < n; i++)
        dst[i] = baton_fp16_to_fp32(load_u16(s + 2 * i));
}

void baton_fp32_to_fp16_row(const float *src, void *dst, uint64_t n)
{
    uint8_t *d = dst;
    uint64_t i;

    for (i = 0; i < n; i++)
        store_u16(d + 2 * i, baton_fp32_to_fp16(src[i]));
}

float baton_bf16_to_fp32(uint16_t h)
{
    return bits_f32((uint32_t)h << 16);
}

uint16_t baton_fp32_to_bf16(float f)
{
    const uint32_t x = f32_bits(f);

    if ((x & 0x7FFFFFFFu) > 0x7F800000u) /* NaN: quiet (bit 6 of the half) */
        return (uint16_t)((x >> 16) | 0x40u);
    /* ties to even: a tie rounds up only when the kept part is odd; a
     * carry out of the significand steps the exponent (to inf at the top) */
    return (uint16_t)((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

void baton_bf16_to_fp32_row(const void *src, float *dst, uint64_t n)
{
    const uint8_t *s = src;
    uint64_t i;

    for (i = 0; i < n; i++)
        dst[i] = baton_bf16_to_fp32(load_u16(s + 2 * i));
}

void baton_fp32_to_bf16_row(const float *src, void *dst, uint64_t n)
{
    uint8_t *d = dst;
    uint64_t i;

    for (i = 0; i < n; i++)
        store_u16(d + 2 * i, baton_fp32_to_bf16(src[i]));
}

/* Largest block scale whose binary16 form is finite (65504). */
#define FP16_MAX 65504.0f

static int row_finite(const float *x, uint64_t k)
{
    uint64_t i;

    for (i = 0; i < k; i++)
        if (!isfinite(x[i]))
            return 0;
    return 1;
}

/* The checks the 32-element quantizers (Q8_0, Q4_0, Q5_0) make before they
 * write anything: k a multiple of 32 (else BATON_E_SHAPE), every x finite
 * and every block's scale max|x| / div within binary16 (else
 * BATON_E_INVAL). 0 when the row can be converted. */
static int blocks_fit(const float *x, uint64_t k, float div)
{
    uint64_t b;
    int j;

    if (k % BATON_QK != 0)
        return BATON_E_SHAPE;
    if (!row_finite(x, k))
        return BATON_E_INVAL;
    for (b = 0; b < k / BATON_QK; b++) {
        float amax = 0.0f;

        for (j = 0; j < (int)BATON_QK; j++)
            if (fabsf(x[b * BATON_QK + j]) > amax)
                amax = fabsf(x[b * BATON_QK + j]);
        if (amax / div > FP16_MAX)
            return BATON_E_INVAL;
    }
    return 0;
}

int baton_quantize_row_q8_0(const float *x, void *y, uint64_t k)
{
    uint8_t *out = y;
    uint64_t b, nb;
    int j;
    const int rc = blocks_fit(x, k, 127.0f);

    if (rc != 0)
        return rc;
    nb = k / BATON_QK;
    for (b = 0; b < nb; b++) {
        const float *xb = x + b * BATON_QK;
        uint8_t *yb = out + b * BATON_Q8_0_BLOCK_BYTES;
        float amax = 0.0f, d, id;

        for (j = 0; j < (int)BATON_QK; j++)
            if (fabsf(xb[j]) > amax)
                amax = fabsf(xb[j]);
        d = amax / 127.0f;
        id = d != 0.0f ? 1.0f / d : 0.0f;
        store_u16(yb, baton_fp32_to_fp16(d));
        for (j = 0; j < (int)BATON_QK; j++) {
            const int8_t q = (int8_t)roundf(xb[j] * id); /* |x * id| <= 127 (+ rounding) */

            yb[2 + j] = (uint8_t)q;
        }
    }
    return 0;
}

/* The element of largest magnitude (the first on a tie), as ggml picks it. */
static float block_max_signed(const float *xb, float *amax_out)
{
    float amax = 0.0f, max = 0.0f;
    int j;

    for (j = 0; j < (int)BATON_QK; j++)
        if (amax < fabsf(xb[j])) {
            amax = fabsf(xb[j]);
            max = xb[j];
        }
    *amax_out = amax;
    return max;
}

int baton_quantize_row_q4_0(const float *x, void *y, uint64_t k)
{
    uint8_t *out = y;
    uint64_t b, nb;
    int j;
    const int rc = blocks_fit(x, k, 8.0f);

    if (rc != 0)
        return rc;
    nb = k / BATON_QK;
    for (b = 0; b < nb; b++) {
        const float *xb = x + b * BATON_QK;
        uint8_t *yb = out + b * BATON_Q4_0_BLOCK_BYTES;
        float amax;
        const float max = block_max_signed(xb, &amax);
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;

        store_u16(yb, baton_fp32_to_fp16(d));
        for (j = 0; j < 16; j++) {
            /* x * id is in [-8, 8] up to rounding, so + 8.5 is in about
             * [0.5, 16.5]: truncation is a floor there */
            int q0 = (int)(xb[j] * id + 8.5f), q1 = (int)(xb[16 + j] * id + 8.5f);

            q0 = q0 < 0 ? 0 : q0 > 15 ? 15 : q0;
            q1 = q1 < 0 ? 0 : q1 > 15 ? 15 : q1;
            yb[2 + j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
    return 0;
}

int baton_dequantize_row_q8_0(const void *x, float *y, uint64_t k)
{
    const uint8_t *in = x;
    uint64_t b;
    int j;

    if (k % BATON_QK != 0)
        return BATON_E_SHAPE;
    for (b = 0; b < k / BATON_QK; b++) {
        const uint8_t *xb = in + b * BATON_Q8_0_BLOCK_BYTES;
        const float d = baton_fp16_to_fp32(load_u16(xb));

        for (j = 0; j < (int)BATON_QK; j++)
            y[b * BATON_QK + j] = d * (float)(int8_t)xb[2 + j];
    }
    return 0;
}

int baton_dequantize_row_q4_0(const void *x, float *y, uint64_t k)
{
    const uint8_t *in = x;
    uint64_t b;
    int j;

    if (k % BATON_QK != 0)
        return BATON_E_SHAPE;
    for (b = 0; b < k / BATON_QK; b++) {
        const uint8_t *xb = in + b * BATON_Q4_0_BLOCK_BYTES;
        const float d = baton_fp16_to_fp32(load_u16(xb));

        for (j = 0; j < 16; j++) {
            y[b * BATON_QK + j] = d * (float)((xb[2 + j] & 0x0F) - 8);
            y[b * BATON_QK + 16 + j] = d * (float)((xb[2 + j] >> 4) - 8);
        }
    }
    return 0;
}

/* Q5_0 / Q5_1 (layouts and rules: quant.h). The fifth bit of element e of a
 * block is bit e of qh (a little-endian u32 after the scale(s)). */
static uint32_t load_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void store_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* Packs 32 values 0..31 (element order) into qh (4 bytes) and qs (16). */
static void q5_pack(const int q[32], uint8_t *qh, uint8_t *qs)
{
    uint32_t h = 0;
    int j;

    for (j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((q[j] & 0x0F) | (q[16 + j] & 0x0F) << 4);
        h |= (uint32_t)(q[j] >> 4 & 1) << j;
        h |= (uint32_t)(q[16 + j] >> 4 & 1) << (16 + j);
    }
    store_u32(qh, h);
}

/* The 32 5-bit values (0..31, element order) of qh and qs. */
static void q5_unpack(const uint8_t *qh, const uint8_t *qs, int q[32])
{
    const uint32_t h = load_u32(qh);
    int j;

    for (j = 0; j < 16; j++) {
        q[j] = (qs[j] & 0x0F) | (int)(h >> j & 1) << 4;
        q[16 + j] = (qs[j] >> 4) | (int)(h >> (16 + j) & 1) << 4;
    }
}

int baton_quantize_row_q5_0(const float *x, void *y, uint64_t k)
{
    uint8_t *out = y;
    uint64_t b, nb;
    int j;
    const int rc = blocks_fit(x, k, 16.0f);

    if (rc != 0)
        return rc;
    nb = k / BATON_QK;
    for (b = 0; b < nb; b++) {
        const float *xb = x + b * BATON_QK;
        uint8_t *yb = out + b * BATON_Q5_0_BLOCK_BYTES;
        float amax;
        const float max = block_max_signed(xb, &amax);
        const float d = max / -16.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        int q[32];

        store_u16(yb, baton_fp32_to_fp16(d));
        for (j = 0; j < (int)BATON_QK; j++) {
            /* x * id is in [-16, 16] up to rounding: + 16.5 in about
             * [0.5, 32.5], where truncation is a floor */
            const int v = (int)(xb[j] * id + 16.5f);

            q[j] = v < 0 ? 0 : v > 31 ? 31 : v;
        }
        q5_pack(q, yb + 2, yb + 6);
    }
    return 0;
}

int baton_quantize_row_q5_1(const float *x, void *y, uint64_t k)
{
    uint8_t *out = y;
    uint64_t b, nb;
    int j;

    if (k % BATON_QK != 0)
        return BATON_E_SHAPE;
    nb = k / BATON_QK;
    if (!row_finite(x, k))
        return BATON_E_INVAL;
    for (b = 0; b < nb; b++) {
        const float *xb = x + b * BATON_QK;
        float lo = xb[0], hi = xb[0];

        for (j = 1; j < (int)BATON_QK; j++) {
            lo = xb[j] < lo ? xb[j] : lo;
            hi = xb[j] > hi ? xb[j] : hi;
        }
        /* hi - lo may overflow to inf for finite input: refused too */
        if (!((hi - lo) / 31.0f <= FP16_MAX) || fabsf(lo) > FP16_MAX)
            return BATON_E_INVAL;
    }
    for (b = 0; b < nb; b++) {
        const float *xb = x + b * BATON_QK;
        uint8_t *yb = out + b * BATON_Q5_1_BLOCK_BYTES;
        float lo = xb[0], hi = xb[0], d, id;
        int q[32];

        for (j = 1; j < (int)BATON_QK; j++) {
            lo = xb[j] < lo ? xb[j] : lo;
            hi = xb[j] > hi ? xb[j] : hi;
        }
        d = (hi - lo) / 31.0f;
        id = d != 0.0f ? 1.0f / d : 0.0f;
        store_u16(yb, baton_fp32_to_fp16(d));
        store_u16(yb + 2, baton_fp32_to_fp16(lo));
        for (j = 0; j < (int)BATON_QK; j++) {
            /* (x - lo) * id is in [0, 31] up to rounding */
            const int v = (int)((xb[j] - lo) * id + 0.5f);

            q[j] = v < 0 ? 0 : v > 31 ? 31 : v;
        }
        q5_pack(q, yb + 4, yb + 8);
    }
    return 0;
}

int baton_dequantize_row_q5_0(const void *x, float *y, uint64_t k)
{
    const uint8_t *in = x;
    uint64_t b;
    int j;

    if (k % BATON_QK != 0)
        return BATON_E_SHAPE;
    for (b = 0; b < k / BATON_QK; b++) {
        const uint8_t *xb = in + b * BATON_Q5_0_BLOCK_BYTES;
        const float d = baton_fp16_to_fp32(load_u16(xb));
        int q[32];

        q5_unpack(xb + 2, xb + 6, q);
        for (j = 0; j < (int)BATON_QK; j++)
            y[b * BATON_QK + j] = d * (float)(q[j] - 16);
    }
    return 0;
}

int baton_dequantize_row_q5_1(const void *x, float *y, uint64_t k)
{
    const uint8_t *in = x;
    uint64_t b;
    int j;

    if (k % BATON_QK != 0)
        return BATON_E_SHAPE;
    for (b = 0; b < k / BATON_QK; b++) {
        const uint8_t *xb = in + b * BATON_Q5_1_BLOCK_BYTES;
        const float d = baton_fp16_to_fp32(load_u16(xb));
        const float m = baton_fp16_to_fp32(load_u16(xb + 2));
        int q[32];

        q5_unpack(xb + 4, xb + 8, q);
        for (j = 0; j < (int)BATON_QK; j++) {
            const float p = d * (float)q[j]; /* rounded before the sum: no FMA */

            y[b * BATON_QK + j] = p + m;
        }
    }
    return 0;
}

int baton_quantize_row(uint32_t type, const float *src, void *dst, uint64_t k)
{
    switch (type) {
    case BATON_TYPE_F32:
        if (k > 0)
            memcpy(dst, src, k * sizeof(float));
        return 0;
    case BATON_TYPE_F16:
        baton_fp32_to_fp16_row(src, dst, k);
        return 0;
    case BATON_TYPE_BF16:
        baton_fp32_to_bf16_row(src, dst, k);
        return 0;
    case BATON_TYPE_Q8_0:
        return baton_quantize_row_q8_0(src, dst, k);
    case BATON_TYPE_Q4_0:
        return baton_quantize_row_q4_0(src, dst, k);
    case BATON_TYPE_Q5_0:
        return baton_quantize_row_q5_0(src, dst, k);
    case BATON_TYPE_Q5_1:
        return baton_quantize_row_q5_1(src, dst, k);
    case BATON_TYPE_Q2_K:
    case BATON_TYPE_Q3_K:
    case BATON_TYPE_Q4_K:
    case BATON_TYPE_Q5_K:
    case BATON_TYPE_Q6_K:
        return baton_quantize_row_k(type, src, dst, k);
    case BATON_TYPE_IQ4_NL:
        return baton_quantize_row_iq4_nl(src, dst, k);
    case BATON_TYPE_IQ4_XS:
        return baton_quantize_row_iq4_xs(src, dst, k);
    default:
        return BATON_E_UNSUPPORTED;
    }
}

int baton_dequantize_row(uint32_t type, const void *src, float *dst, uint64_t k)
{
    switch (type) {
    case BATON_TYPE_F32:
        if (k > 0)
            memcpy(dst, src, k * sizeof(float));
        return 0;
    case BATON_TYPE_F16:
        baton_fp16_to_fp32_row(src, dst, k);
        return 0;
    case BATON_TYPE_BF16:
        baton_bf16_to_fp32_row(src, dst, k);
        return 0;
    case BATON_TYPE_Q8_0:
        return baton_dequantize_row_q8_0(src, dst, k);
    case BATON_TYPE_Q4_0:
        return baton_dequantize_row_q4_0(src, dst, k);
    case BATON_TYPE_Q5_0:
        return baton_dequantize_row_q5_0(src, dst, k);
    case BATON_TYPE_Q5_1:
        return baton_dequantize_row_q5_1(src, dst, k);
    case BATON_TYPE_Q2_K:
    case BATON_TYPE_Q3_K:
    case BATON_TYPE_Q4_K:
    case BATON_TYPE_Q5_K:
    case BATON_TYPE_Q6_K:
        return baton_dequantize_row_k(type, src, dst, k);
    case BATON_TYPE_IQ4_NL:
        return baton_dequantize_row_iq4_nl(src, dst, k);
    case BATON_TYPE_IQ4_XS:
        return baton_dequantize_row_iq4_xs(src, dst, k);
    default:
        return BATON_E_UNSUPPORTED;
    }
}

uint64_t baton_row_bytes(uint32_t type, uint64_t k)
{
    uint64_t r;

    switch (type) {
    case BATON_TYPE_F32:
        return __builtin_mul_overflow(k, (uint64_t)4, &r) ? 0 : r;
    case BATON_TYPE_F16:
    case BATON_TYPE_BF16:
        return __builtin_mul_overflow(k, (uint64_t)2, &r) ? 0 : r;
    case BATON_TYPE_Q8_0:
        return k % BATON_QK ? 0 : k / BATON_QK * BATON_Q8_0_BLOCK_BYTES;
    case BATON_TYPE_Q4_0:
        return k % BATON_QK ? 0 : k / BATON_QK * BATON_Q4_0_BLOCK_BYTES;
    case BATON_TYPE_Q5_0:
        return k % BATON_QK ? 0 : k / BATON_QK * BATON_Q5_0_BLOCK_BYTES;
    case BATON_TYPE_Q5_1:
        return k % BATON_QK ? 0 : k / BATON_QK * BATON_Q5_1_BLOCK_BYTES;
    case BATON_TYPE_Q2_K:
    case BATON_TYPE_Q3_K:
    case BATON_TYPE_Q4_K:
    case BATON_TYPE_Q5_K:
    case BATON_TYPE_Q6_K:
        return k % BATON_QK_K ? 0 : k / BATON_QK_K * kq_block_bytes(type);
    case BATON_TYPE_IQ4_NL:
        return k % BATON_QK ? 0 : k / BATON_QK * BATON_IQ4_NL_BLOCK_BYTES;
    case BATON_TYPE_IQ4_XS:
        return k % BATON_QK_K ? 0 : k / BATON_QK_K * BATON_IQ4_XS_BLOCK_BYTES;
    default:
        return 0;
    }
}

/* ---- K-quants (layouts and dequantization: quant.h) ----
 *
 * The quantizer is ours (the format is ggml's). Per super-block of 256:
 *
 * 1. Each sub-block j (16 or 32 elements) gets a float scale a_j (and, for
 *    the types with a min, an offset M_j >= 0, element ~ a_j q - M_j):
 *    - with a min (Q2_K nmax 3, Q4_K nmax 15, Q5_K nmax 31): lo = min(min x,
 *      0), a = (max x - lo) / nmax, M = -lo (the formats store a
 *      non-negative min that is subtracted, so the offset is never above 0);
 *    - symmetric (Q3_K q in -4..3, Q6_K q in -32..31): with m the element
 *      of largest magnitude (the first on a tie), a = m / qmin, so m maps
 *      to qmin exactly and the rest of the sub-block lies in
 *      [-|qmin| |a|, |qmin| |a|].
 *    Then one least-squares refinement over the quants rounded with that
 *    choice: (a, M) minimizing sum (x - (a q - M))^2 (a alone for the
 *    symmetric types); the elements are quantized again with the refined
 *    values and the refinement is kept only if it lowers the sub-block's sum
 *    of squared errors without raising its largest error (so the bound
 *    below, which holds for the min/max choice, holds for the result).
 * 2. The super-block scales: d = max_j |a_j| / S and dmin = max_j M_j / S,
 *    S = 63 (Q4_K, Q5_K), 15 (Q2_K), 31 (Q3_K), 127 (Q6_K), stored as
 *    binary16 D = fp16(d), Dmin = fp16(dmin) (BATON_E_INVAL if one is not
 *    finite there). The integer sub-block scale is sc_j = round(a_j / D)
 *    and min m_j = round(M_j / Dmin), clamped to the field's range.
 * 3. Every element is quantized again against the stored values, to the
 *    nearest level of the clamped range: q = clamp(round((x + Dmin m_j) /
 *    (D sc_j))) (q = the level nearest 0 when D sc_j = 0).
 *
 * Error bound, per element x of sub-block j, x' its dequantized value, for
 * D and Dmin in binary16's normal range (|fp16(v) - v| <= 2^-11 |v|), plus
 * binary32 rounding of the few operations (relative ~2^-22):
 *   with a min:  |x - x'| <= a_j / 2 + nmax D / 2 + Dmin / 2,
 *                a_j = (max x - min(min x, 0)) / nmax of that sub-block;
 *   symmetric:   |x - x'| <= |a_j| + |qmin| D / 2, a_j = m / qmin.
 * Why: with the min/max choice every x is within a_j / 2 of a level a_j q
 * - M_j (symmetric: within |a_j|, the one element -m may clamp from |qmin|
 * to |qmin| - 1); the integer scale and min move each level by at most
 * q |D sc_j - a_j| + |Dmin m_j - M_j| <= nmax D / 2 + Dmin / 2 (the 2^-11
 * error of fp16(d) times S stays below D / 2); step 3 picks the nearest
 * level, no farther than the moved one. */

/* Shape of one K-quant type for the generic quantizer. */
struct kq_shape {
    int sub;      /* elements per sub-block: 16 or 32 */
    int has_min;  /* 1: element = D sc q - Dmin m (q in 0..qmax) */
    int qmin;     /* symmetric types: lowest level (-4, -32); 0 with a min */
    int qmax;     /* highest level */
    int scale_max; /* largest |sc| (and m): 15, 31, 63 or 127 */
};

static int kq_shape_of(uint32_t type, struct kq_shape *s)
{
    switch (type) {
    case BATON_TYPE_Q2_K:
        *s = (struct kq_shape){16, 1, 0, 3, 15};
        return 0;
    case BATON_TYPE_Q3_K:
        *s = (struct kq_shape){16, 0, -4, 3, 31};
        return 0;
    case BATON_TYPE_Q4_K:
        *s = (struct kq_shape){32, 1, 0, 15, 63};
        return 0;
    case BATON_TYPE_Q5_K:
        *s = (struct kq_shape){32, 1, 0, 31, 63};
        return 0;
    case BATON_TYPE_Q6_K:
        *s = (struct kq_shape){16, 0, -32, 31, 127};
        return 0;
    default:
        return BATON_E_UNSUPPORTED;
    }
}

static uint32_t kq_block_bytes(uint32_t type)
{
    switch (type) {
    case BATON_TYPE_Q2_K:
        return BATON_Q2_K_BLOCK_BYTES;
    case BATON_TYPE_Q3_K:
        return BATON_Q3_K_BLOCK_BYTES;
    case BATON_TYPE_Q4_K:
        return BATON_Q4_K_BLOCK_BYTES;
    case BATON_TYPE_Q5_K:
        return BATON_Q5_K_BLOCK_BYTES;
    case BATON_TYPE_Q6_K:
        return BATON_Q6_K_BLOCK_BYTES;
    default:
        return 0;
    }
}

/* Nearest level of [lo, hi] to v / step (step of either sign), or the level
 * nearest 0 when step is 0. */
static int kq_level(float v, float step, int lo, int hi)
{
    float r;
    int q;

    if (!(step > 0.0f) && !(step < 0.0f))
        return lo > 0 ? lo : hi < 0 ? hi : 0;
    r = roundf(v / step);
    if (!(r >= (float)lo)) /* also NaN (inf / inf on inputs BATON_E_INVAL rejects later) */
        return lo;
    if (r > (float)hi)
        return hi;
    q = (int)r;
    return q;
}

/* Squared and largest error of sub-block x[0..n) with levels q under
 * element = a q - off. */
static void kq_err(const float *x, const int *q, int n, float a, float off, double *sse,
                   float *emax)
{
    int i;

    *sse = 0.0;
    *emax = 0.0f;
    for (i = 0; i < n; i++) {
        const float e = fabsf(x[i] - (a * (float)q[i] - off));

        *sse += (double)e * e;
        if (e > *emax)
            *emax = e;
    }
}

/* Step 1 for one sub-block: *a (and *off = M) as described above. */
static void kq_sub_scale(const struct kq_shape *s, const float *x, float *a, float *off)
{
    int q[32], q2[32], i;
    const int n = s->sub;
    float a0, m0, a1, m1, e0max, e1max;
    double sse0, sse1;

    if (s->has_min) {
        float lo = 0.0f, hi = x[0];

        for (i = 0; i < n; i++) {
            if (x[i] < lo)
                lo = x[i];
            if (x[i] > hi)
                hi = x[i];
        }
        a0 = (hi - lo) / (float)s->qmax;
        m0 = -lo;
    } else {
        float amax = 0.0f, m = 0.0f;

        for (i = 0; i < n; i++)
            if (fabsf(x[i]) > amax) {
                amax = fabsf(x[i]);
                m = x[i];
            }
        a0 = m / (float)s->qmin;
        m0 = 0.0f;
    }
    *a = a0;
    *off = m0;
    if (a0 == 0.0f)
        return;
    for (i = 0; i < n; i++)
        q[i] = kq_level(x[i] + m0, a0, s->qmin, s->qmax);
    kq_err(x, q, n, a0, m0, &sse0, &e0max);
    /* least squares over the rounded levels (double: sums of up to 32
     * products, exact enough that the comparison below decides) */
    {
        double sq = 0, sqq = 0, sx = 0, sxq = 0;

        for (i = 0; i < n; i++) {
            sq += q[i];
            sqq += (double)q[i] * q[i];
            sx += x[i];
            sxq += (double)x[i] * q[i];
        }
        if (s->has_min) {
            const double det = n * sqq - sq * sq;

            if (det <= 0)
                return;
            a1 = (float)((n * sxq - sq * sx) / det);
            m1 = (float)(-(sqq * sx - sq * sxq) / det);
            if (!(a1 > 0.0f) || !(m1 >= 0.0f))
                return;
        } else {
            if (sqq <= 0)
                return;
            a1 = (float)(sxq / sqq);
            m1 = 0.0f;
            if (a1 == 0.0f || !isfinite(a1))
                return;
        }
    }
    for (i = 0; i < n; i++)
        q2[i] = kq_level(x[i] + m1, a1, s->qmin, s->qmax);
    kq_err(x, q2, n, a1, m1, &sse1, &e1max);
    if (sse1 < sse0 && e1max <= e0max) {
        *a = a1;
        *off = m1;
    }
}

/* Steps 1-3 for one super-block: integer scales sc[], mins m[], levels q[]
 * and the binary16 D, Dmin. Returns 0 or BATON_E_INVAL. */
static int kq_super(const struct kq_shape *s, const float *x, int *sc, int *m, int *q,
                    uint16_t *dh, uint16_t *dminh)
{
    float a[16], off[16], amax = 0.0f, mmax = 0.0f, d, dmin, D, Dmin;
    const int nsub = 256 / s->sub;
    int j, i;

    for (j = 0; j < nsub; j++) {
        kq_sub_scale(s, x + j * s->sub, &a[j], &off[j]);
        if (fabsf(a[j]) > amax)
            amax = fabsf(a[j]);
        if (off[j] > mmax)
            mmax = off[j];
    }
    d = amax / (float)s->scale_max;
    dmin = mmax / (float)s->scale_max;
    if (!(d <= FP16_MAX) || !(dmin <= FP16_MAX))
        return BATON_E_INVAL;
    *dh = baton_fp32_to_fp16(d);
    *dminh = baton_fp32_to_fp16(dmin);
    D = baton_fp16_to_fp32(*dh);
    Dmin = baton_fp16_to_fp32(*dminh);
    if (!isfinite(D) || !isfinite(Dmin))
        return BATON_E_INVAL;
    for (j = 0; j < nsub; j++) {
        const int lo = s->has_min ? 0 : -s->scale_max;

        sc[j] = kq_level(a[j], D, lo, s->scale_max);
        m[j] = s->has_min ? kq_level(off[j], Dmin, 0, s->scale_max) : 0;
        {
            const float step = D * (float)sc[j];
            const float moff = Dmin * (float)m[j];

            for (i = 0; i < s->sub; i++)
                q[j * s->sub + i] = kq_level(x[j * s->sub + i] + moff, step, s->qmin, s->qmax);
        }
    }
    return 0;
}

/* Packs one super-block (levels as kq_super gives them) in ggml's layout. */
static void kq_pack(uint32_t type, const int *sc, const int *m, const int *q, uint16_t dh,
                    uint16_t dminh, uint8_t *y)
{
    int e, j;

    memset(y, 0, kq_block_bytes(type));
    switch (type) {
    case BATON_TYPE_Q2_K:
        for (j = 0; j < 16; j++)
            y[j] = (uint8_t)(sc[j] | m[j] << 4);
        for (e = 0; e < 256; e++)
            y[16 + 32 * (e / 128) + e % 32] |= (uint8_t)(q[e] << (2 * ((e % 128) / 32)));
        store_u16(y + 80, dh);
        store_u16(y + 82, dminh);
        break;
    case BATON_TYPE_Q3_K:
        for (j = 0; j < 16; j++) {
            const int st = sc[j] + 32; /* 1..63 */

            y[96 + (j < 8 ? j : j - 8)] |= (uint8_t)(j < 8 ? st & 15 : (st & 15) << 4);
            y[96 + 8 + j % 4] |= (uint8_t)((st >> 4) << (2 * (j / 4)));
        }
        for (e = 0; e < 256; e++) {
            const int qq = q[e] + 4, h = e / 128, g = (e % 128) / 32, l = e % 32;

            y[32 + 32 * h + l] |= (uint8_t)((qq & 3) << (2 * g));
            if (qq >= 4)
                y[l] |= (uint8_t)(1u << (4 * h + g));
        }
        store_u16(y + 108, dh);
        break;
    case BATON_TYPE_Q4_K:
    case BATON_TYPE_Q5_K: {
        uint8_t *S = y + 4;
        uint8_t *qs = y + (type == BATON_TYPE_Q4_K ? 16 : 48);

        store_u16(y, dh);
        store_u16(y + 2, dminh);
        for (j = 0; j < 4; j++) {
            S[j] = (uint8_t)((sc[j] & 63) | (sc[j + 4] >> 4) << 6);
            S[j + 4] = (uint8_t)((m[j] & 63) | (m[j + 4] >> 4) << 6);
            S[j + 8] = (uint8_t)((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
        }
        for (e = 0; e < 256; e++) {
            const int c = e / 64, u = e % 64;

            if (u < 32)
                qs[32 * c + u] |= (uint8_t)(q[e] & 15);
            else
                qs[32 * c + u - 32] |= (uint8_t)((q[e] & 15) << 4);
            if (type == BATON_TYPE_Q5_K && q[e] >= 16)
                y[16 + e % 32] |= (uint8_t)(1u << (e / 32));
        }
        break;
    }
    case BATON_TYPE_Q6_K:
        for (j = 0; j < 16; j++)
            y[192 + j] = (uint8_t)(int8_t)sc[j];
        for (e = 0; e < 256; e++) {
            const int qq = q[e] + 32, h = e / 128, v = e % 128, t = v / 32, i = v % 32;

            y[64 * h + 32 * (t % 2) + i] |= (uint8_t)(t < 2 ? qq & 15 : (qq & 15) << 4);
            y[128 + 32 * h + i] |= (uint8_t)((qq >> 4) << (2 * t));
        }
        store_u16(y + 208, dh);
        break;
    default:
        break;
    }
}

int baton_quantize_row_k(uint32_t type, const float *x, void *y, uint64_t k)
{
    struct kq_shape s;
    uint8_t *out = y;
    const uint32_t bytes = kq_block_bytes(type);
    uint64_t b;
    int rc;

    if (kq_shape_of(type, &s) != 0)
        return BATON_E_UNSUPPORTED;
    if (k % BATON_QK_K != 0)
        return BATON_E_SHAPE;
    if (!row_finite(x, k))
        return BATON_E_INVAL;
    /* A first pass that writes nothing, so that an error leaves y as it was. */
    for (b = 0; b < k / BATON_QK_K; b++) {
        int sc[16], m[16], q[256];
        uint16_t dh, dminh;

        rc = kq_super(&s, x + b * BATON_QK_K, sc, m, q, &dh, &dminh);
        if (rc != 0)
            return rc;
    }
    for (b = 0; b < k / BATON_QK_K; b++) {
        int sc[16], m[16], q[256];
        uint16_t dh, dminh;

        (void)kq_super(&s, x + b * BATON_QK_K, sc, m, q, &dh, &dminh);
        kq_pack(type, sc, m, q, dh, dminh, out + b * bytes);
    }
    return 0;
}

/* Q4_K / Q5_K 6-bit scale and min of sub-block j (quant.h). */
static void k4_scale_min(const uint8_t *S, int j, int *sc, int *m)
{
    if (j < 4) {
        *sc = S[j] & 63;
        *m = S[j + 4] & 63;
    } else {
        *sc = (S[j + 4] & 15) | (S[j - 4] >> 6) << 4;
        *m = (S[j + 4] >> 4) | (S[j] >> 6) << 4;
    }
}

static void dequant_block_k(uint32_t type, const uint8_t *x, float *y)
{
    int e, j;

    switch (type) {
    case BATON_TYPE_Q2_K: {
        const float d = baton_fp16_to_fp32(load_u16(x + 80));
        const float dmin = baton_fp16_to_fp32(load_u16(x + 82));

        for (j = 0; j < 16; j++) {
            const float dl = d * (float)(x[j] & 15), ml = dmin * (float)(x[j] >> 4);

            for (e = 16 * j; e < 16 * j + 16; e++) {
                const int q = (x[16 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;

                y[e] = dl * (float)q - ml;
            }
        }
        break;
    }
    case BATON_TYPE_Q3_K: {
        const float d = baton_fp16_to_fp32(load_u16(x + 108));
        const uint8_t *S = x + 96;

        for (j = 0; j < 16; j++) {
            const int lo = j < 8 ? S[j] & 15 : S[j - 8] >> 4;
            const int hi = (S[8 + j % 4] >> (2 * (j / 4))) & 3;
            const float dl = d * (float)((lo | hi << 4) - 32);

            for (e = 16 * j; e < 16 * j + 16; e++) {
                const int h = e / 128, g = (e % 128) / 32, l = e % 32;
                const int q = ((x[32 + 32 * h + l] >> (2 * g)) & 3) -
                              ((x[l] >> (4 * h + g)) & 1 ? 0 : 4);

                y[e] = dl * (float)q;
            }
        }
        break;
    }
    case BATON_TYPE_Q4_K:
    case BATON_TYPE_Q5_K: {
        const float d = baton_fp16_to_fp32(load_u16(x));
        const float dmin = baton_fp16_to_fp32(load_u16(x + 2));
        const uint8_t *qs = x + (type == BATON_TYPE_Q4_K ? 16 : 48);

        for (j = 0; j < 8; j++) {
            int sc, m;

            k4_scale_min(x + 4, j, &sc, &m);
            {
                const float dl = d * (float)sc, ml = dmin * (float)m;

                for (e = 32 * j; e < 32 * j + 32; e++) {
                    const int c = e / 64, u = e % 64;
                    int q = u < 32 ? qs[32 * c + u] & 15 : qs[32 * c + u - 32] >> 4;

                    if (type == BATON_TYPE_Q5_K)
                        q += 16 * ((x[16 + e % 32] >> j) & 1);
                    y[e] = dl * (float)q - ml;
                }
            }
        }
        break;
    }
    case BATON_TYPE_Q6_K: {
        const float d = baton_fp16_to_fp32(load_u16(x + 208));

        for (j = 0; j < 16; j++) {
            const float dl = d * (float)(int8_t)x[192 + j];

            for (e = 16 * j; e < 16 * j + 16; e++) {
                const int h = e / 128, v = e % 128, t = v / 32, i = v % 32;
                const int b = x[64 * h + 32 * (t % 2) + i];
                const int lo4 = t < 2 ? b & 15 : b >> 4;
                const int hi2 = (x[128 + 32 * h + i] >> (2 * t)) & 3;

                y[e] = dl * (float)((lo4 | hi2 << 4) - 32);
            }
        }
        break;
    }
    default:
        break;
    }
}

int baton_dequantize_row_k(uint32_t type, const void *x, float *y, uint64_t k)
{
    const uint8_t *in = x;
    const uint32_t bytes = kq_block_bytes(type);
    uint64_t b;

    if (bytes == 0)
        return BATON_E_UNSUPPORTED;
    if (k % BATON_QK_K != 0)
        return BATON_E_SHAPE;
    for (b = 0; b < k / BATON_QK_K; b++)
        dequant_block_k(type, in + b * bytes, y + b * BATON_QK_K);
    return 0;
}
