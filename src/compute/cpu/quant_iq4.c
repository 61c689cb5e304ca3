/* IQ4_NL and IQ4_XS: dequantization (ggml's operations, quant.h) and
 * baton's own quantizer.
 *
 * The quantizer. For a group of 32 values x (an IQ4_NL block, an IQ4_XS
 * sub-block) with weights w_i = x_i^2 (large values matter most, as in
 * llama.cpp without an importance matrix):
 *   1. m = the value of largest magnitude (the first on a tie). Candidate
 *      scales s = m / c for c in the 9 integers around each end level of
 *      the grid (G[0] - 2 .. G[0] + 6 and G[15] - 6 .. G[15] + 2): the
 *      largest value lands near one end, the grid's asymmetry decides which
 *      end fits the rest better.
 *   2. For each s, every x takes the nearest level of x / s (grid_index);
 *      the least-squares scale of those levels is a = sum w q x / sum w q^2
 *      and the weighted error it leaves is sum w x^2 - a sum w q x, so the
 *      candidate with the largest (sum w q x)^2 / sum w q^2 wins (the first
 *      on a tie). Its a is the group's scale.
 *   3. IQ4_NL stores D = fp16(a) and gives each x the nearest level of
 *      x / D. IQ4_XS takes the sub-block scale of largest magnitude a_max
 *      (first on a tie), stores D = fp16(-a_max / 32), gives sub-block j
 *      the integer l_j = clamp(round(a_j / D), -32, 31) (so a_max is
 *      exactly -32 D before rounding), and each x the nearest level of x /
 *      (D * l_j), the product rounded as the dequantization rounds it.
 * Re-choosing the levels against the stored scale (and not keeping those of
 * step 2) makes each element the nearest level the stored block can give:
 * |x - x'| <= 12 |S| (half the widest gap between levels, 24) for x / S in
 * [-127, 113], S the element's stored scale (D, or D * l_j rounded), the
 * distance to the end level beyond. A group of zeros gets scale 0. Every
 * level has |q| >= 1, so |a| <= sqrt(sum w x^2 / sum w q^2) <= max |x|
 * (Cauchy-Schwarz): only a block with a value past binary16's range can
 * have a scale past it, and only such blocks are searched twice (the check
 * before anything is written).
 * Everything is a fixed sequence of binary32 and binary64 operations (ISO
 * C11, no -march: nothing is contracted into an FMA): the same input gives
 * the same bytes on every host.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "baton/status.h"
#include "compute/cpu/quant.h"

const int8_t baton_iq4_grid[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                   1,    13,   25,  38,  53,  69,  89,  113};

#define IQ4_FP16_MAX 65504.0f

static uint16_t iq4_load_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static void iq4_store_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

/* The midpoints between consecutive levels (exact half-integers). */
static const float grid_mid[16] = {-115.5f, -93.5f, -74.0f, -57.0f, -42.0f, -28.5f, -16.0f, -4.5f,
                                   7.0f,    19.0f,  31.5f,  45.5f,  61.0f,  79.0f,  101.0f, INFINITY};

/* The index of the grid level nearest v: the number of midpoints below v
 * (the lower level on a tie; NaN: 0). Sixteen compares without a branch
 * (the last midpoint is +inf, never below): a binary search's mispredicted
 * branches made the quantizer five times slower than Q4_K's. */
static int grid_index(float v)
{
    int i, n = 0;

    for (i = 0; i < 16; i++)
        n += v > grid_mid[i];
    return n;
}

/* Step 2 for the scale s: returns (sum w q x)^2 / sum w q^2 (0 when sum w
 * q^2 is 0) and *a = the least-squares scale. The sums are binary64: with
 * w = x^2, binary32 overflows for |x| above about 1e9. */
static double group_fit(const float *x, const double *w, float s, float *a)
{
    const float is = 1.0f / s;
    double sqx = 0.0, sq2 = 0.0;
    int i;

    for (i = 0; i < 32; i++) {
        const double q = baton_iq4_grid[grid_index(x[i] * is)];

        sqx += w[i] * q * x[i];
        sq2 += w[i] * q * q;
    }
    if (!(sq2 > 0.0)) {
        *a = 0.0f;
        return 0.0;
    }
    *a = (float)(sqx / sq2);
    return sqx * (sqx / sq2);
}

/* Steps 1 and 2: the scale of 32 values x. */
static float group_scale(const float *x)
{
    double w[32], best = -1.0;
    float m = 0.0f, amax = 0.0f, a = 0.0f;
    int i, t;

    for (i = 0; i < 32; i++) {
        w[i] = (double)x[i] * x[i];
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            m = x[i];
        }
    }
    if (amax == 0.0f)
        return 0.0f;
    for (t = 0; t < 18; t++) {
        const int c = t < 9 ? baton_iq4_grid[0] - 2 + t : baton_iq4_grid[15] - 6 + (t - 9);
        float at;
        const double score = group_fit(x, w, m / (float)c, &at);

        if (score > best) {
            best = score;
            a = at;
        }
    }
    return a;
}

/* 32 values x as the nearest levels of x / s into one IQ4_NL nibble layout
 * at qs (16 bytes: element i < 16 low nibble of qs[i], i + 16 high). */
static void group_pack(const float *x, float s, uint8_t *qs)
{
    const float is = s != 0.0f ? 1.0f / s : 0.0f;
    int i;

    for (i = 0; i < 16; i++)
        qs[i] = (uint8_t)(grid_index(x[i] * is) | grid_index(x[16 + i] * is) << 4);
}

/* max |x| over n values. */
static float group_amax(const float *x, uint64_t n)
{
    float amax = 0.0f;
    uint64_t i;

    for (i = 0; i < n; i++)
        amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    return amax;
}

/* 0, BATON_E_SHAPE (k % n) or BATON_E_INVAL (a non-finite x). */
static int iq4_row_ok(const float *x, uint64_t k, uint64_t n)
{
    uint64_t i;

    if (k % n != 0)
        return BATON_E_SHAPE;
    for (i = 0; i < k; i++)
        if (!isfinite(x[i]))
            return BATON_E_INVAL;
    return 0;
}

int baton_quantize_row_iq4_nl(const float *x, void *y, uint64_t k)
{
    uint8_t *out = y;
    uint64_t b;
    int rc = iq4_row_ok(x, k, BATON_QK);

    if (rc != 0)
        return rc;
    for (b = 0; b < k / BATON_QK; b++)
        if (group_amax(x + b * BATON_QK, BATON_QK) > IQ4_FP16_MAX &&
            !(fabsf(group_scale(x + b * BATON_QK)) <= IQ4_FP16_MAX))
            return BATON_E_INVAL;
    for (b = 0; b < k / BATON_QK; b++) {
        const float *xb = x + b * BATON_QK;
        uint8_t *yb = out + b * BATON_IQ4_NL_BLOCK_BYTES;
        const uint16_t h = baton_fp32_to_fp16(group_scale(xb));

        iq4_store_u16(yb, h);
        group_pack(xb, baton_fp16_to_fp32(h), yb + 2);
    }
    return 0;
}

/* Step 3 of IQ4_XS for the super-block at x: *dh = the stored d, l[j] the
 * sub-block integers -32..31. Returns BATON_E_INVAL if d does not fit
 * binary16. */
static int xs_scales(const float *x, uint16_t *dh, int l[8])
{
    float a[8], amax = 0.0f, smax = 0.0f, d;
    int j;

    for (j = 0; j < 8; j++) {
        a[j] = group_scale(x + 32 * j);
        if (fabsf(a[j]) > amax) {
            amax = fabsf(a[j]);
            smax = a[j];
        }
    }
    if (!(amax / 32.0f <= IQ4_FP16_MAX))
        return BATON_E_INVAL;
    *dh = baton_fp32_to_fp16(-smax / 32.0f);
    d = baton_fp16_to_fp32(*dh);
    for (j = 0; j < 8; j++) {
        const float v = d != 0.0f ? rintf(a[j] / d) : 0.0f;

        l[j] = v < -32.0f ? -32 : v > 31.0f ? 31 : (int)v;
    }
    return 0;
}

int baton_quantize_row_iq4_xs(const float *x, void *y, uint64_t k)
{
    uint8_t *out = y;
    uint64_t b;
    int l[8], j;
    uint16_t dh;
    int rc = iq4_row_ok(x, k, BATON_QK_K);

    if (rc != 0)
        return rc;
    for (b = 0; b < k / BATON_QK_K; b++)
        if (group_amax(x + b * BATON_QK_K, BATON_QK_K) > 32.0f * IQ4_FP16_MAX &&
            (rc = xs_scales(x + b * BATON_QK_K, &dh, l)) != 0)
            return rc;
    for (b = 0; b < k / BATON_QK_K; b++) {
        const float *xb = x + b * BATON_QK_K;
        uint8_t *yb = out + b * BATON_IQ4_XS_BLOCK_BYTES;
        uint16_t sh = 0;
        float d;

        (void)xs_scales(xb, &dh, l);
        d = baton_fp16_to_fp32(dh);
        iq4_store_u16(yb, dh);
        memset(yb + 4, 0, 4);
        for (j = 0; j < 8; j++) {
            const int ls = l[j] + 32; /* 0..63 */

            yb[4 + j / 2] |= (uint8_t)((ls & 15) << 4 * (j % 2));
            sh |= (uint16_t)((ls >> 4) << 2 * j);
            group_pack(xb + 32 * j, d * (float)l[j], yb + 8 + 16 * j);
        }
        iq4_store_u16(yb + 2, sh);
    }
    return 0;
}

int baton_dequantize_row_iq4_nl(const void *x, float *y, uint64_t k)
{
    const uint8_t *in = x;
    uint64_t b;
    int i;

    if (k % BATON_QK != 0)
        return BATON_E_SHAPE;
    for (b = 0; b < k / BATON_QK; b++) {
        const uint8_t *xb = in + b * BATON_IQ4_NL_BLOCK_BYTES;
        const float d = baton_fp16_to_fp32(iq4_load_u16(xb));
        float *yb = y + b * BATON_QK;

        for (i = 0; i < 16; i++) {
            yb[i] = d * (float)baton_iq4_grid[xb[2 + i] & 15];
            yb[16 + i] = d * (float)baton_iq4_grid[xb[2 + i] >> 4];
        }
    }
    return 0;
}

int baton_dequantize_row_iq4_xs(const void *x, float *y, uint64_t k)
{
    const uint8_t *in = x;
    uint64_t b;
    int i, j;

    if (k % BATON_QK_K != 0)
        return BATON_E_SHAPE;
    for (b = 0; b < k / BATON_QK_K; b++) {
        const uint8_t *xb = in + b * BATON_IQ4_XS_BLOCK_BYTES;
        const float d = baton_fp16_to_fp32(iq4_load_u16(xb));
        const uint16_t sh = iq4_load_u16(xb + 2);

        for (j = 0; j < 8; j++) {
            const int ls = ((xb[4 + j / 2] >> 4 * (j % 2)) & 15) | ((sh >> 2 * j) & 3) << 4;
            const float dl = d * (float)(ls - 32);
            const uint8_t *qs = xb + 8 + 16 * j;
            float *yb = y + b * BATON_QK_K + 32 * j;

            for (i = 0; i < 16; i++) {
                yb[i] = dl * (float)baton_iq4_grid[qs[i] & 15];
                yb[16 + i] = dl * (float)baton_iq4_grid[qs[i] >> 4];
            }
        }
    }
    return 0;
}
