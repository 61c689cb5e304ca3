/* binary16 conversion and the Q8_0 / Q4_0 quantizers (see quant.h). Plain
 * C: the formats' bytes are assembled little-endian explicitly, so nothing
 * here depends on alignment or host byte order. */
#include "compute/cpu/quant.h"

#include <math.h>
#include <string.h>

#include "baton/status.h"
#include "core/types.h"

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

int baton_quantize_row_q8_0(const float *x, void *y, uint64_t k)
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
        float amax = 0.0f;

        for (j = 0; j < (int)BATON_QK; j++)
            if (fabsf(xb[j]) > amax)
                amax = fabsf(xb[j]);
        if (amax / 127.0f > FP16_MAX)
            return BATON_E_INVAL;
    }
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

    if (k % BATON_QK != 0)
        return BATON_E_SHAPE;
    nb = k / BATON_QK;
    if (!row_finite(x, k))
        return BATON_E_INVAL;
    for (b = 0; b < nb; b++) {
        float amax;

        (void)block_max_signed(x + b * BATON_QK, &amax);
        if (amax / 8.0f > FP16_MAX)
            return BATON_E_INVAL;
    }
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
    case BATON_TYPE_Q8_0:
        return baton_quantize_row_q8_0(src, dst, k);
    case BATON_TYPE_Q4_0:
        return baton_quantize_row_q4_0(src, dst, k);
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
    case BATON_TYPE_Q8_0:
        return baton_dequantize_row_q8_0(src, dst, k);
    case BATON_TYPE_Q4_0:
        return baton_dequantize_row_q4_0(src, dst, k);
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
        return __builtin_mul_overflow(k, (uint64_t)2, &r) ? 0 : r;
    case BATON_TYPE_Q8_0:
        return k % BATON_QK ? 0 : k / BATON_QK * BATON_Q8_0_BLOCK_BYTES;
    case BATON_TYPE_Q4_0:
        return k % BATON_QK ? 0 : k / BATON_QK * BATON_Q4_0_BLOCK_BYTES;
    default:
        return 0;
    }
}
