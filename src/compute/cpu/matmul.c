/* MUL_MAT and GET_ROWS over F32 / F16 / Q8_0 / Q4_0 weights: the scalar
 * reference kernels, activation quantization, the run-time choice of the
 * kernel level and the split of rows over the pool (see matmul.h for the
 * reduction orders every level follows, README.md for the reasons). */
#include "compute/cpu/matmul.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "baton/status.h"
#include "compute/cpu/expf.h"
#include "compute/cpu/kernels.h"
#include "compute/cpu/matmul_k.h"
#include "compute/cpu/quant.h"
#include "compute/pool.h"
#include "core/types.h"

#ifdef __FAST_MATH__
#error "the kernels' bit-exact reduction orders need IEEE arithmetic (no -ffast-math)"
#endif
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* ---- instruction-set level ---- */

static int isa_level = -1; /* -1: not settled yet */

/* __builtin_cpu_supports checks the CPU and that the OS saves the wider
 * registers; F16C and AVX512-VNNI are read from CPUID directly (clang 14's
 * builtin does not know their names): F16C is CPUID.1:ECX bit 29, VNNI
 * CPUID.(7,0):ECX bit 11, both usable once AVX / AVX-512 state is. */
enum baton_cpu_isa baton_cpu_isa_detect(void)
{
#if !defined(__x86_64__)
    return BATON_CPU_ISA_SCALAR;
#else
    unsigned int a, b, c, d;
    int f16c = 0, vnni = 0;

    __builtin_cpu_init();
    if (__get_cpuid(1, &a, &b, &c, &d))
        f16c = (c >> 29) & 1;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d))
        vnni = (c >> 11) & 1;
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") || !f16c)
        return BATON_CPU_ISA_SCALAR;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") && vnni)
        return BATON_CPU_ISA_AVX512;
    return BATON_CPU_ISA_AVX2;
#endif
}

/* BATON_CPU_ISA, or NULL when it is unset or empty (an empty value means
 * unset, as for the other BATON_ variables). */
static const char *isa_env(void)
{
    const char *env = getenv("BATON_CPU_ISA");

    return env && *env ? env : NULL;
}

/* The level BATON_CPU_ISA names (scalar, avx2, avx512, any case), or -1
 * when it is unset or names none of them. */
static int isa_from_env(void)
{
    const char *env = isa_env();
    int i;

    for (i = BATON_CPU_ISA_SCALAR; env && i <= BATON_CPU_ISA_AVX512; i++)
        if (strcasecmp(env, baton_cpu_isa_name((enum baton_cpu_isa)i)) == 0)
            return i;
    return -1;
}

enum baton_cpu_isa baton_cpu_isa(void)
{
    int level = __atomic_load_n(&isa_level, __ATOMIC_RELAXED);

    if (level < 0) {
        const int env = isa_from_env();

        level = baton_cpu_isa_detect();
        if (env >= 0 && env < level) /* a level above the detected one is ignored */
            level = env;
        __atomic_store_n(&isa_level, level, __ATOMIC_RELAXED);
    }
    return (enum baton_cpu_isa)level;
}

const char *baton_compute_kernels(int *env_ignored)
{
    if (env_ignored)
        *env_ignored = isa_env() != NULL && isa_from_env() < 0;
    return baton_cpu_isa_name(baton_cpu_isa());
}

enum baton_cpu_isa baton_cpu_isa_set(enum baton_cpu_isa isa)
{
    const enum baton_cpu_isa best = baton_cpu_isa_detect();
    const int level = isa > best ? (int)best : (int)isa;

    __atomic_store_n(&isa_level, level, __ATOMIC_RELAXED);
    return (enum baton_cpu_isa)level;
}

static int avx512_split = -1; /* -1: not detected yet */

/* AMD ("AuthenticAMD") family 19h: the family is CPUID.1:EAX bits 8..11,
 * plus bits 20..27 when those read 0xF (AMD's and Intel's manuals). */
static int avx512_split_detect(void)
{
#if !defined(__x86_64__)
    return 0;
#else
    unsigned int a, b, c, d, family;

    if (!__get_cpuid(0, &a, &b, &c, &d) || b != 0x68747541u || d != 0x69746e65u ||
        c != 0x444d4163u)
        return 0;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return 0;
    family = (a >> 8) & 0xF;
    if (family == 0xF)
        family += (a >> 20) & 0xFF;
    return family == 0x19;
#endif
}

int baton_cpu_avx512_split(void)
{
    int v = __atomic_load_n(&avx512_split, __ATOMIC_RELAXED);

    if (v < 0) {
        v = avx512_split_detect();
        __atomic_store_n(&avx512_split, v, __ATOMIC_RELAXED);
    }
    return v;
}

void baton_cpu_avx512_split_set(int split)
{
    __atomic_store_n(&avx512_split, split < 0 ? -1 : split != 0, __ATOMIC_RELAXED);
}

const char *baton_cpu_isa_name(enum baton_cpu_isa isa)
{
    switch (isa) {
    case BATON_CPU_ISA_AVX2:
        return "avx2";
    case BATON_CPU_ISA_AVX512:
        return "avx512";
    default:
        return "scalar";
    }
}

static const struct baton_mm_kernels *kernels(void)
{
    switch (baton_cpu_isa()) {
    case BATON_CPU_ISA_AVX512:
        return &baton_mm_avx512;
    case BATON_CPU_ISA_AVX2:
        return &baton_mm_avx2;
    default:
        return &baton_mm_scalar;
    }
}

/* ---- scalar reference kernels ---- */

static uint16_t load_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (uint16_t)(p[1] << 8));
}

static float hsum8(const float c[8])
{
    float e[4], f[2];
    int l;

    for (l = 0; l < 4; l++)
        e[l] = c[l] + c[l + 4];
    for (l = 0; l < 2; l++)
        f[l] = e[l] + e[l + 2];
    return f[0] + f[1];
}

static float hsum32(const float a[32])
{
    float b[16], c[8];
    int l;

    for (l = 0; l < 16; l++)
        b[l] = a[l] + a[l + 16];
    for (l = 0; l < 8; l++)
        c[l] = b[l] + b[l + 8];
    return hsum8(c);
}

/* F32: one float accumulator in ascending k (run.c); four columns share
 * each read of a weight row, each still summed exactly as alone. */
static void scalar_f32(const struct baton_mm *mm, uint64_t r0, uint64_t r1)
{
    const uint64_t k = mm->k, ldy = mm->ldy, m = mm->m, ws = mm->w_row_bytes / sizeof(float);
    const float *w = (const float *)mm->w;
    uint64_t r, c, i;

    for (r = r0; r < r1; r++) {
        const float *wr = w + r * ws;

        for (c = 0; c + 4 <= m; c += 4) {
            const float *x0 = mm->x + c * k, *x1 = x0 + k, *x2 = x1 + k, *x3 = x2 + k;
            float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;

            for (i = 0; i < k; i++) {
                const float wi = wr[i];

                s0 += wi * x0[i];
                s1 += wi * x1[i];
                s2 += wi * x2[i];
                s3 += wi * x3[i];
            }
            mm->y[c * ldy + r] = s0;
            mm->y[(c + 1) * ldy + r] = s1;
            mm->y[(c + 2) * ldy + r] = s2;
            mm->y[(c + 3) * ldy + r] = s3;
        }
        for (; c < m; c++) {
            const float *xc = mm->x + c * k;
            float s = 0.0f;

            for (i = 0; i < k; i++)
                s += wr[i] * xc[i];
            mm->y[c * ldy + r] = s;
        }
    }
}

/* F16 and BF16 (bf set): each weight converted exactly, 32 lanes of fused
 * multiply-adds, then hsum32. */
static void scalar_h16(const struct baton_mm *mm, uint64_t r0, uint64_t r1, int bf)
{
    const uint64_t k = mm->k, ldy = mm->ldy, m = mm->m;
    uint64_t r, c, i;

    for (r = r0; r < r1; r++) {
        const uint8_t *wr = mm->w + r * mm->w_row_bytes;

        for (c = 0; c < m; c++) {
            const float *xc = mm->x + c * k;
            float a[32] = {0};

            for (i = 0; i < k; i++) {
                const uint16_t h = load_u16(wr + 2 * i);
                const float w = bf ? baton_bf16_to_fp32(h) : baton_fp16_to_fp32(h);

                a[i % 32] = fmaf(w, xc[i], a[i % 32]);
            }
            mm->y[c * ldy + r] = hsum32(a);
        }
    }
}

static void scalar_f16(const struct baton_mm *mm, uint64_t r0, uint64_t r1)
{
    scalar_h16(mm, r0, r1, 0);
}

static void scalar_bf16(const struct baton_mm *mm, uint64_t r0, uint64_t r1)
{
    scalar_h16(mm, r0, r1, 1);
}

/* Block b of a column of quantized activations at col (matmul.h's
 * layout): its q of elements 0..15 and 16..31, its scale, its index in
 * the group. */
struct act_block {
    const int8_t *lo, *hi;
    float dx;
    int bj;
};

static struct act_block act_block(const uint8_t *col, uint64_t b)
{
    const uint8_t *grp = col + b / 4 * BATON_ACT_GROUP_BYTES;
    struct act_block a;

    a.bj = (int)(b % 4);
    a.lo = (const int8_t *)grp + 16 * a.bj;
    a.hi = (const int8_t *)grp + 64 + 16 * a.bj;
    memcpy(&a.dx, grp + 192 + 16 * a.bj, sizeof(a.dx));
    return a;
}

/* Q8_0 against quantized activations: four chains per output, block b's
 * exact integer sum scaled once into chain b % 4 (see matmul.h). */
static void scalar_q8_0(const struct baton_mm *mm, uint64_t r0, uint64_t r1)
{
    const uint64_t nb = mm->k / 32, ldy = mm->ldy, m = mm->m;
    uint64_t r, c, b;
    int j;

    for (r = r0; r < r1; r++) {
        const uint8_t *wr = mm->w + r * mm->w_row_bytes;

        for (c = 0; c < m; c++) {
            const uint8_t *col = mm->act + c * mm->act_col_bytes;
            float chain[4] = {0.0f, 0.0f, 0.0f, 0.0f};

            for (b = 0; b < nb; b++) {
                const uint8_t *wb = wr + b * BATON_Q8_0_BLOCK_BYTES;
                const struct act_block xb = act_block(col, b);
                const float d = baton_fp16_to_fp32(load_u16(wb)) * xb.dx;
                int32_t isum = 0;

                for (j = 0; j < 16; j++)
                    isum += (int8_t)wb[2 + j] * xb.lo[j] + (int8_t)wb[18 + j] * xb.hi[j];
                chain[b % 4] = fmaf(d, (float)isum, chain[b % 4]);
            }
            mm->y[c * ldy + r] = (chain[0] + chain[2]) + (chain[1] + chain[3]);
        }
    }
}

/* Q4_0 and IQ4_NL: one chain per output over the blocks, each block's exact
 * integer sum scaled once (see matmul.h); nl: IQ4_NL's grid levels for
 * the nibbles, else nibble - 8. */
static void scalar_q4(const struct baton_mm *mm, uint64_t r0, uint64_t r1, int nl)
{
    const uint64_t nb = mm->k / 32, ldy = mm->ldy, m = mm->m;
    uint64_t r, c, b;
    int j, lv[16];

    for (j = 0; j < 16; j++)
        lv[j] = nl ? baton_iq4_grid[j] : j - 8;
    for (r = r0; r < r1; r++) {
        const uint8_t *wr = mm->w + r * mm->w_row_bytes;

        for (c = 0; c < m; c++) {
            const uint8_t *col = mm->act + c * mm->act_col_bytes;
            float acc = 0.0f;

            for (b = 0; b < nb; b++) {
                /* Q4_0 and IQ4_NL blocks are both 18 bytes */
                const uint8_t *wb = wr + b * BATON_Q4_0_BLOCK_BYTES;
                const struct act_block xb = act_block(col, b);
                const int8_t *x_lo = xb.lo, *x_hi = xb.hi;
                const float dx = xb.dx;
                const float d = baton_fp16_to_fp32(load_u16(wb)) * dx;
                int32_t isum = 0;

                for (j = 0; j < 16; j++)
                    isum += lv[wb[2 + j] & 0x0F] * x_lo[j] + lv[wb[2 + j] >> 4] * x_hi[j];
                acc = fmaf(d, (float)isum, acc);
            }
            mm->y[c * ldy + r] = acc;
        }
    }
}

static void scalar_q4_0(const struct baton_mm *mm, uint64_t r0, uint64_t r1)
{
    scalar_q4(mm, r0, r1, 0);
}

static void scalar_iq4_nl(const struct baton_mm *mm, uint64_t r0, uint64_t r1)
{
    scalar_q4(mm, r0, r1, 1);
}

/* ---- Q5_0 / Q5_1: the reference of matmul.h's Q5 order ----
 * The activations of Q4_0 and 16 lanes, 4 per block; the 5-bit weights read element by
 * element from quant.h's formulas. Q5_0 sums (q - 16) * x; Q5_1 sums q * x
 * and, for its min, the lane's sum of x. */
static void scalar_q5(const struct baton_mm *mm, uint64_t r0, uint64_t r1, int is_q5_1)
{
    const uint64_t nb = mm->k / 32, ldy = mm->ldy, m = mm->m;
    const uint64_t bbytes = is_q5_1 ? BATON_Q5_1_BLOCK_BYTES : BATON_Q5_0_BLOCK_BYTES;
    const int qh_off = is_q5_1 ? 4 : 2;
    uint64_t r, c, b;
    int l, j;

    for (r = r0; r < r1; r++) {
        const uint8_t *wr = mm->w + r * mm->w_row_bytes;

        for (c = 0; c < m; c++) {
            const uint8_t *col = mm->act + c * mm->act_col_bytes;
            float lanes[16] = {0};

            for (b = 0; b < nb; b++) {
                const uint8_t *wb = wr + b * bbytes;
                const struct act_block xb = act_block(col, b);
                const int8_t *x_lo = xb.lo, *x_hi = xb.hi;
                const float dx = xb.dx;
                const float d = baton_fp16_to_fp32(load_u16(wb)) * dx;
                const float dm = is_q5_1 ? baton_fp16_to_fp32(load_u16(wb + 2)) * dx : 0.0f;
                const uint32_t qh = (uint32_t)wb[qh_off] | (uint32_t)wb[qh_off + 1] << 8 |
                                    (uint32_t)wb[qh_off + 2] << 16 |
                                    (uint32_t)wb[qh_off + 3] << 24;
                const uint8_t *qs = wb + qh_off + 4;
                const int bias = is_q5_1 ? 0 : 16;
                int w_lo[16], w_hi[16];

                for (j = 0; j < 16; j++) {
                    w_lo[j] = ((qs[j] & 0x0F) | (int)(qh >> j & 1) << 4) - bias;
                    w_hi[j] = ((qs[j] >> 4) | (int)(qh >> (16 + j) & 1) << 4) - bias;
                }
                for (l = 0; l < 4; l++) {
                    int32_t isum = 0, xsum = 0;

                    for (j = 4 * l; j < 4 * l + 4; j++) {
                        isum += w_lo[j] * x_lo[j] + w_hi[j] * x_hi[j];
                        xsum += x_lo[j] + x_hi[j];
                    }
                    lanes[4 * xb.bj + l] = fmaf(d, (float)isum, lanes[4 * xb.bj + l]);
                    if (is_q5_1)
                        lanes[4 * xb.bj + l] = fmaf(dm, (float)xsum, lanes[4 * xb.bj + l]);
                }
            }
            {
                float sum[8];

                for (l = 0; l < 8; l++)
                    sum[l] = lanes[l] + lanes[l + 8];
                mm->y[c * ldy + r] = hsum8(sum);
            }
        }
    }
}

static void scalar_q5_0(const struct baton_mm *mm, uint64_t r0, uint64_t r1)
{
    scalar_q5(mm, r0, r1, 0);
}

static void scalar_q5_1(const struct baton_mm *mm, uint64_t r0, uint64_t r1)
{
    scalar_q5(mm, r0, r1, 1);
}

/* One activation block of n values: returns d = max|x| / 127 and writes
 * q = rint(x * (1/d)) in the current (nearest-even) rounding mode, as the
 * SIMD versions' cvtps2dq; a block with a non-finite value gets d = NaN and
 * q = 0. */
static float act_span(const float *xb, int n, int8_t *q)
{
    float amax = 0.0f, d, id;
    int j, finite = 1;

    for (j = 0; j < n; j++) {
        uint32_t bits;

        memcpy(&bits, &xb[j], sizeof(bits));
        if ((bits & 0x7F800000u) == 0x7F800000u)
            finite = 0;
        else if (fabsf(xb[j]) > amax)
            amax = fabsf(xb[j]);
    }
    if (!finite) {
        memset(q, 0, (size_t)n);
        return NAN;
    }
    d = amax / 127.0f;
    id = d != 0.0f ? 1.0f / d : 0.0f;
    if (id > FLT_MAX) /* d subnormal: 1/d overflows; every q is 0 (matmul.h) */
        id = 0.0f;
    for (j = 0; j < n; j++)
        q[j] = (int8_t)lrintf(xb[j] * id);
    return d;
}

/* Activation blocks: d = max|x| / 127, q = rint(x / d) via x * (1/d) in the
 * current (nearest-even) rounding mode, as the SIMD versions' cvtps2dq. */
static void scalar_act(const float *x, uint64_t k, uint8_t *act, uint64_t col_bytes, int32_t bias,
                       uint64_t b0, uint64_t b1)
{
    const uint64_t nb = k / 32, nbp = (nb + 3) / 4 * 4;
    uint64_t fb;

    for (fb = b0; fb < b1; fb++) {
        const uint64_t c = fb / nbp, b = fb % nbp;
        uint8_t *grp = act + c * col_bytes + b / 4 * BATON_ACT_GROUP_BYTES;
        const int bj = (int)(b % 4);
        int8_t *q_lo = (int8_t *)grp + 16 * bj, *q_hi = (int8_t *)grp + 64 + 16 * bj;
        int32_t *corr = (int32_t *)(grp + 128) + 4 * bj;
        float *dd = (float *)(grp + 192) + 4 * bj;
        float d;
        int8_t q[32];
        int l;

        if (b >= nb) { /* padding of the last group */
            memset(q_lo, 0, 16);
            memset(q_hi, 0, 16);
            memset(corr, 0, 4 * sizeof(*corr));
            memset(dd, 0, 4 * sizeof(*dd));
            continue;
        }
        d = act_span(x + c * k + b * 32, 32, q);
        memcpy(q_lo, q, 16);
        memcpy(q_hi, q + 16, 16);
        for (l = 0; l < 4; l++) {
            corr[l] = -bias * (q[4 * l] + q[4 * l + 1] + q[4 * l + 2] + q[4 * l + 3] +
                               q[16 + 4 * l] + q[17 + 4 * l] + q[18 + 4 * l] + q[19 + 4 * l]);
            dd[l] = d;
        }
        if (bias == 8 || bias == 128) { /* Q4_0, Q8_0: the block's whole corr in lane 0 */
            corr[0] += corr[1] + corr[2] + corr[3];
            corr[1] = corr[2] = corr[3] = 0;
        }
    }
}

/* ---- K-quants (Q2_K..Q6_K): the reference of matmul.h's K order ---- */

/* The signed integer quant Qw of each of the 256 elements of super-block
 * wb, read element by element from quant.h's formulas. */
static void k_unpack(uint32_t type, const uint8_t *wb, int q[256])
{
    int e;

    for (e = 0; e < 256; e++) {
        const int h = e / 128, g = (e % 128) / 32, l = e % 32, c = e / 64, u = e % 64;

        switch (type) {
        case BATON_TYPE_Q2_K:
            q[e] = (wb[16 + 32 * h + l] >> (2 * g)) & 3;
            break;
        case BATON_TYPE_Q3_K:
            q[e] = ((wb[32 + 32 * h + l] >> (2 * g)) & 3) - ((wb[l] >> (4 * h + g)) & 1 ? 0 : 4);
            break;
        case BATON_TYPE_Q4_K:
        case BATON_TYPE_Q5_K: {
            const uint8_t *qs = wb + (type == BATON_TYPE_Q4_K ? 16 : 48);

            q[e] = u < 32 ? qs[32 * c + u] & 15 : qs[32 * c + u - 32] >> 4;
            if (type == BATON_TYPE_Q5_K)
                q[e] += 16 * ((wb[16 + u % 32] >> (e / 32)) & 1);
            break;
        }
        case BATON_TYPE_IQ4_XS: {
            const int i = e % 32, b = wb[8 + 16 * (e / 32) + i % 16];

            q[e] = baton_iq4_grid[i < 16 ? b & 15 : b >> 4];
            break;
        }
        default: { /* Q6_K */
            const int v = e % 128, t = v / 32, i = v % 32;
            const int b = wb[64 * h + 32 * (t % 2) + i];
            const int lo4 = t < 2 ? b & 15 : b >> 4, hi2 = (wb[128 + 32 * h + i] >> (2 * t)) & 3;

            q[e] = (lo4 | hi2 << 4) - 32;
            break;
        }
        }
    }
}

/* Rows [r0, r1) of K-quant weights: per super-block ascending, the exact
 * isum and msum, then the two fused multiply-adds of matmul.h; y itself
 * holds the chains. */
static void scalar_k(const struct baton_mm *mm, uint64_t r0, uint64_t r1, uint32_t type)
{
    const uint64_t nsb = mm->k / BATON_QK_K, ldy = mm->ldy, m = mm->m;
    uint32_t bbytes;
    int d_off, dmin_off;
    uint64_t r, c, s;

    k_layout(type, &bbytes, &d_off, &dmin_off);
    for (r = r0; r < r1; r++) {
        for (c = 0; c < m; c++)
            mm->y[c * ldy + r] = 0.0f;
        for (s = 0; s < nsb; s++) {
            const uint8_t *wb = mm->w + r * mm->w_row_bytes + s * bbytes;
            const float d = baton_fp16_to_fp32(load_u16(wb + d_off));
            const float dmin = dmin_off >= 0 ? baton_fp16_to_fp32(load_u16(wb + dmin_off)) : 0.0f;
            int8_t sc[16];
            int16_t mn[16];
            int q[256];
            int e, i;

            (void)k_scales(type, wb, sc, mn);
            k_unpack(type, wb, q);
            for (c = 0; c < m; c++) {
                const uint8_t *xb = mm->act + c * mm->act_col_bytes + s * BATON_ACT_K_BLOCK_BYTES;
                const int8_t *qx = (const int8_t *)xb;
                int16_t bsums[16];
                float dx, acc = mm->y[c * ldy + r];
                int32_t isum = 0, msum = 0;

                memcpy(bsums, xb + 256, sizeof(bsums));
                memcpy(&dx, xb + 288, sizeof(dx));
                for (e = 0; e < 256; e++)
                    isum += sc[e / 16] * q[e] * qx[e];
                acc = fmaf(d * dx, (float)isum, acc);
                if (dmin_off >= 0) {
                    for (i = 0; i < 16; i++)
                        msum += mn[i] * bsums[i];
                    acc = fmaf(-(dmin * dx), (float)msum, acc);
                }
                mm->y[c * ldy + r] = acc;
            }
        }
    }
}

static void scalar_q2_k(const struct baton_mm *mm, uint64_t r0, uint64_t r1)
{
    scalar_k(mm, r0, r1, BATON_TYPE_Q2_K);
}

static void scalar_q3_k(const struct baton_mm *mm, uint64_t r0, uint64_t r1)
{
    scalar_k(mm, r0, r1, BATON_TYPE_Q3_K);
}

static void scalar_q4_k(const struct baton_mm *mm, uint64_t r0, uint64_t r1)
{
    scalar_k(mm, r0, r1, BATON_TYPE_Q4_K);
}

static void scalar_q5_k(const struct baton_mm *mm, uint64_t r0, uint64_t r1)
{
    scalar_k(mm, r0, r1, BATON_TYPE_Q5_K);
}

static void scalar_q6_k(const struct baton_mm *mm, uint64_t r0, uint64_t r1)
{
    scalar_k(mm, r0, r1, BATON_TYPE_Q6_K);
}

static void scalar_iq4_xs(const struct baton_mm *mm, uint64_t r0, uint64_t r1)
{
    scalar_k(mm, r0, r1, BATON_TYPE_IQ4_XS);
}

/* K activations (matmul.h): super-blocks [b0, b1) of the flat index
 * c * (k / 256) + s. dx = max|x| / 127, q = rint(x * (1/dx)) as
 * scalar_act; the reference of the SIMD levels' (baton_mm_avx2_act_k),
 * which write the same bytes. */
void baton_mm_act_k(const float *x, uint64_t k, uint8_t *act, uint64_t col_bytes, uint64_t b0,
                    uint64_t b1)
{
    const uint64_t nsb = k / BATON_QK_K;
    uint64_t fb;

    for (fb = b0; fb < b1; fb++) {
        const uint64_t c = fb / nsb, s = fb % nsb;
        const float *xb = x + c * k + s * BATON_QK_K;
        uint8_t *blk = act + c * col_bytes + s * BATON_ACT_K_BLOCK_BYTES;
        int8_t q[256];
        int16_t bsums[16];
        const float dx = act_span(xb, 256, q);
        int j;

        for (j = 0; j < 16; j++) {
            int i, sum = 0;

            for (i = 0; i < 16; i++)
                sum += q[16 * j + i];
            bsums[j] = (int16_t)sum;
        }
        memcpy(blk, q, 256);
        memcpy(blk + 256, bsums, sizeof(bsums));
        memcpy(blk + 288, &dx, sizeof(dx));
        memset(blk + 292, 0, BATON_ACT_K_BLOCK_BYTES - 292);
    }
}

/* Scores (matmul.h, baton_cpu_f32_dots): four rows at a time, each its own
 * sequential sum, so the four chains overlap. */
static void scalar_dots(const float *w, uint64_t ws, const float *x, uint64_t k, uint64_t n,
                        float *y)
{
    uint64_t r = 0, i;

    for (; n - r >= 4; r += 4) {
        const float *w0 = w + r * ws, *w1 = w0 + ws, *w2 = w1 + ws, *w3 = w2 + ws;
        float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;

        for (i = 0; i < k; i++) {
            s0 = s0 + w0[i] * x[i];
            s1 = s1 + w1[i] * x[i];
            s2 = s2 + w2[i] * x[i];
            s3 = s3 + w3[i] * x[i];
        }
        y[r] = s0;
        y[r + 1] = s1;
        y[r + 2] = s2;
        y[r + 3] = s3;
    }
    for (; r < n; r++) {
        const float *wr = w + r * ws;
        float s = 0.0f;

        for (i = 0; i < k; i++)
            s = s + wr[i] * x[i];
        y[r] = s;
    }
}

/* Scores of several queries (matmul.h, baton_cpu_f32_dots_multi): one
 * query after the other. */
static void scalar_dots_multi(const float *w, uint64_t ws, const float *x, uint64_t xs,
                              uint32_t nx, uint64_t k, uint64_t n, float *y, uint64_t ys)
{
    uint32_t c;

    for (c = 0; c < nx; c++)
        scalar_dots(w, ws, x + c * xs, k, n, y + c * ys);
}

/* Weighted sum of value rows (matmul.h, baton_cpu_f32_wsum), or of
 * binary16 rows converted exactly (half: baton_cpu_f16_wsum). */
static void scalar_wsum_rows(const void *v, uint64_t vs, const float *a, uint64_t n, uint64_t k,
                             float *out, int half)
{
    const float *vf = v;
    const uint16_t *vh = v;
    uint64_t s, i;

    for (i = 0; i < k; i++)
        out[i] = 0.0f;
    for (s = 0; s < n; s++) {
        const float w = a[s];

        for (i = 0; i < k; i++)
            out[i] = out[i] + w * (half ? baton_fp16_to_fp32(vh[s * vs + i]) : vf[s * vs + i]);
    }
}

static void scalar_wsum_h(const void *v, uint64_t vs, const float *a, uint64_t n, uint64_t k,
                          float *out)
{
    scalar_wsum_rows(v, vs, a, n, k, out, 1);
}

static void scalar_wsum(const float *v, uint64_t vs, const float *a, uint64_t n, uint64_t k,
                        float *out)
{
    scalar_wsum_rows(v, vs, a, n, k, out, 0);
}

/* See matmul.h; the algorithm and its constants are expf.h's, step by
 * step (the SIMD kernels repeat these operations in this order). */
float baton_cpu_expf(float x)
{
    const double shift = BATON_EXP_SHIFT;
    double xd, t, kd, r, s, p;
    uint64_t tb, sb, ki;

    if (x != x)
        return x + x;
    xd = x < BATON_EXP_X_MIN ? BATON_EXP_X_MIN : x > BATON_EXP_X_MAX ? BATON_EXP_X_MAX : (double)x;
    t = xd * BATON_EXP_INV_LN2_16 + shift;
    kd = t - shift;
    r = xd - kd * BATON_EXP_LN2_16_HI;
    r = r - kd * BATON_EXP_LN2_16_LO;
    memcpy(&tb, &t, sizeof(tb));
    memcpy(&sb, &shift, sizeof(sb));
    ki = tb - sb; /* k, two's complement */
    memcpy(&sb, &baton_exp_table[ki & 15], sizeof(sb));
    sb += (ki & ~(uint64_t)15) << 48; /* + floor(k/16) in the exponent field */
    memcpy(&s, &sb, sizeof(s));
    p = BATON_EXP_C7;
    p = p * r + BATON_EXP_C6;
    p = p * r + BATON_EXP_C5;
    p = p * r + BATON_EXP_C4;
    p = p * r + BATON_EXP_C3;
    p = p * r + BATON_EXP_C2;
    p = p * r + 1.0;
    p = p * r + 1.0;
    return (float)(s * p);
}

static void scalar_silu(const float *x, float *y, uint64_t n)
{
    uint64_t i;

    for (i = 0; i < n; i++) {
        const float v = x[i];

        y[i] = v * (1.0f / (1.0f + baton_cpu_expf(-v)));
    }
}

static void scalar_gelu(const float *x, float *y, uint64_t n)
{
    uint64_t i;

    for (i = 0; i < n; i++) {
        const float v = x[i];
        const float z = BATON_GELU_C * v * (1.0f + BATON_GELU_A * v * v);

        y[i] = v * (1.0f / (1.0f + baton_cpu_expf(-z)));
    }
}

static void scalar_exp_shift(float *x, uint64_t n, float m)
{
    uint64_t i;

    for (i = 0; i < n; i++)
        x[i] = baton_cpu_expf(x[i] - m);
}

const struct baton_mm_kernels baton_mm_scalar = {
    scalar_f32, scalar_f16, scalar_q8_0, scalar_q4_0, scalar_act, scalar_dots, scalar_wsum,
    scalar_dots_multi, scalar_silu, scalar_exp_shift, scalar_q2_k, scalar_q3_k, scalar_q4_k,
    scalar_q5_k, scalar_q6_k, baton_mm_act_k, scalar_q5_0, scalar_q5_1, baton_fp16_to_fp32_row,
    scalar_wsum_h, baton_fp32_to_fp16_row, NULL, scalar_bf16, scalar_iq4_nl, scalar_iq4_xs,
    scalar_gelu,
};

/* ---- drivers ---- */

/* Multiply-adds per chunk below which a split costs more than it saves
 * (speed only, never bits). */
#define GRAIN 32768u
/* Rows per unit of the row split: a multiple of every kernel's row tile,
 * so only the matrix's last unit can be ragged. */
#define ROW_UNIT 16u

static uint64_t sat_mul(uint64_t a, uint64_t b)
{
    uint64_t r;

    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

uint64_t baton_cpu_act_col_bytes(uint64_t k)
{
    return (k / 32 + 3) / 4 * BATON_ACT_GROUP_BYTES; /* k <= 2^40: cannot wrap */
}

uint64_t baton_cpu_act_k_col_bytes(uint64_t k)
{
    return k / BATON_QK_K * BATON_ACT_K_BLOCK_BYTES; /* k <= 2^40: cannot wrap */
}

int baton_cpu_type_is_k(uint32_t type)
{
    return type == BATON_TYPE_Q2_K || type == BATON_TYPE_Q3_K || type == BATON_TYPE_Q4_K ||
           type == BATON_TYPE_Q5_K || type == BATON_TYPE_Q6_K || type == BATON_TYPE_IQ4_XS;
}

uint64_t baton_cpu_weight_row_bytes(uint32_t type, uint64_t k)
{
    uint32_t bbytes;
    int d_off, dmin_off;

    if (!baton_cpu_type_is_k(type))
        return baton_row_bytes(type, k);
    if (k % BATON_QK_K != 0)
        return 0;
    k_layout(type, &bbytes, &d_off, &dmin_off);
    return sat_mul(k / BATON_QK_K, bbytes) == UINT64_MAX ? 0 : k / BATON_QK_K * bbytes;
}

uint64_t baton_cpu_mul_mat_work_bytes(uint32_t wtype, uint64_t k, uint64_t m)
{
    if (baton_cpu_type_is_k(wtype))
        return sat_mul(m, baton_cpu_act_k_col_bytes(k));
    if (wtype != BATON_TYPE_Q8_0 && wtype != BATON_TYPE_Q4_0 && wtype != BATON_TYPE_Q5_0 &&
        wtype != BATON_TYPE_Q5_1 && wtype != BATON_TYPE_IQ4_NL)
        return 0;
    return sat_mul(m, baton_cpu_act_col_bytes(k));
}

struct act_k_job {
    const float *x;
    uint64_t k, col_bytes;
    uint8_t *act;
};

static void act_k_task(void *ctx, uint64_t b0, uint64_t b1, uint32_t chunk)
{
    const struct act_k_job *j = ctx;

    (void)chunk;
    kernels()->act_k(j->x, j->k, j->act, j->col_bytes, b0, b1);
}

void baton_cpu_quantize_act_k(struct baton_pool *pool, const float *x, uint64_t k, uint64_t m,
                              void *act)
{
    struct act_k_job j;

    j.x = x;
    j.k = k;
    j.col_bytes = baton_cpu_act_k_col_bytes(k);
    j.act = act;
    baton_pool_run(pool, m * (k / BATON_QK_K), sat_mul(m, k) / GRAIN + 1, act_k_task, &j);
}

struct act_job {
    baton_act_fn fn;
    const float *x;
    uint64_t k, col_bytes;
    uint8_t *act;
    int32_t bias;
};

static void act_task(void *ctx, uint64_t b0, uint64_t b1, uint32_t chunk)
{
    const struct act_job *j = ctx;

    (void)chunk;
    j->fn(j->x, j->k, j->act, j->col_bytes, j->bias, b0, b1);
}

void baton_cpu_quantize_act(struct baton_pool *pool, uint32_t wtype, const float *x, uint64_t k,
                            uint64_t m, void *act)
{
    struct act_job j;

    j.fn = kernels()->act;
    j.x = x;
    j.k = k;
    j.col_bytes = baton_cpu_act_col_bytes(k);
    j.act = act;
    /* Q5_1's corr is the lane's plain sum of q (its min term: matmul.h);
     * IQ4_NL's bias is Q8_0's (a level may read its levels + 128) */
    j.bias = wtype == BATON_TYPE_Q4_0   ? 8
             : wtype == BATON_TYPE_Q5_0 ? 16
             : wtype == BATON_TYPE_Q5_1 ? -1
                                        : 128;
    baton_pool_run(pool, m * ((k / 32 + 3) / 4 * 4), sat_mul(m, k) / GRAIN + 1, act_task, &j);
}

/* A group of products over one x: part p covers row units
 * [unit0[p], unit0[p + 1]) of the group's concatenated row units. */
struct rows_job {
    baton_mm_rows_fn fn;
    uint32_t n_parts;
    struct baton_mm mm[BATON_CPU_MM_MAX_PARTS];
    uint64_t unit0[BATON_CPU_MM_MAX_PARTS + 1];
};

static void rows_task(void *ctx, uint64_t u0, uint64_t u1, uint32_t chunk)
{
    const struct rows_job *j = ctx;
    uint32_t p;

    (void)chunk;
    for (p = 0; p < j->n_parts && u0 < u1; p++) {
        const uint64_t lo = j->unit0[p], hi = j->unit0[p + 1];
        uint64_t a, b, r1;

        if (u0 >= hi)
            continue;
        a = u0 - lo; /* u0 >= lo: the parts are visited in order */
        b = (u1 < hi ? u1 : hi) - lo;
        r1 = b * ROW_UNIT;
        j->fn(&j->mm[p], a * ROW_UNIT, r1 < j->mm[p].n ? r1 : j->mm[p].n);
        u0 = lo + b;
    }
}

void baton_cpu_mul_mat_prepare(struct baton_pool *pool, uint32_t wtype, const float *x,
                               uint64_t k, uint64_t m, void *work)
{
    if (k == 0 || m == 0)
        return;
    if (baton_cpu_type_is_k(wtype))
        baton_cpu_quantize_act_k(pool, x, k, m, work);
    else if (baton_cpu_mul_mat_work_bytes(wtype, k, m) > 0) /* Q8_0, Q4_0, Q5_0, Q5_1, IQ4_NL */
        baton_cpu_quantize_act(pool, wtype, x, k, m, work);
    /* F32, F16 and BF16 read x itself */
}

void baton_cpu_mul_mat_group(struct baton_pool *pool, uint32_t wtype,
                             const struct baton_cpu_mm_part *parts, uint32_t n_parts,
                             const float *x, uint64_t k, uint64_t m, void *work)
{
    if (m == 0 || n_parts == 0 || n_parts > BATON_CPU_MM_MAX_PARTS)
        return;
    baton_cpu_mul_mat_prepare(pool, wtype, x, k, m, work);
    baton_cpu_mul_mat_group_prepared(pool, wtype, parts, n_parts, x, k, m, work);
}

void baton_cpu_mul_mat_group_prepared(struct baton_pool *pool, uint32_t wtype,
                                      const struct baton_cpu_mm_part *parts, uint32_t n_parts,
                                      const float *x, uint64_t k, uint64_t m, const void *work)
{
    const struct baton_mm_kernels *kt = kernels();
    struct rows_job j;
    uint64_t w_row_bytes, act_col_bytes = 0, units = 0, rows = 0;
    uint32_t p;

    if (m == 0 || n_parts == 0 || n_parts > BATON_CPU_MM_MAX_PARTS)
        return;
    memset(&j, 0, sizeof(j));
    switch (wtype) {
    case BATON_TYPE_F16:
    case BATON_TYPE_BF16:
        j.fn = wtype == BATON_TYPE_F16 ? kt->f16 : kt->bf16;
        w_row_bytes = k * 2;
        break;
    case BATON_TYPE_Q8_0:
    case BATON_TYPE_Q4_0:
    case BATON_TYPE_Q5_0:
    case BATON_TYPE_Q5_1:
        j.fn = wtype == BATON_TYPE_Q8_0   ? kt->q8_0
               : wtype == BATON_TYPE_Q4_0 ? kt->q4_0
               : wtype == BATON_TYPE_Q5_0 ? kt->q5_0
                                          : kt->q5_1;
        w_row_bytes = baton_row_bytes(wtype, k);
        act_col_bytes = baton_cpu_act_col_bytes(k);
        break;
    case BATON_TYPE_IQ4_NL:
        j.fn = kt->iq4_nl;
        w_row_bytes = baton_row_bytes(wtype, k);
        act_col_bytes = baton_cpu_act_col_bytes(k);
        break;
    case BATON_TYPE_IQ4_XS:
        j.fn = kt->iq4_xs;
        w_row_bytes = baton_cpu_weight_row_bytes(wtype, k);
        act_col_bytes = baton_cpu_act_k_col_bytes(k);
        break;
    case BATON_TYPE_Q2_K:
    case BATON_TYPE_Q3_K:
    case BATON_TYPE_Q4_K:
    case BATON_TYPE_Q5_K:
    case BATON_TYPE_Q6_K:
        j.fn = wtype == BATON_TYPE_Q2_K   ? kt->q2_k
               : wtype == BATON_TYPE_Q3_K ? kt->q3_k
               : wtype == BATON_TYPE_Q4_K ? kt->q4_k
               : wtype == BATON_TYPE_Q5_K ? kt->q5_k
                                          : kt->q6_k;
        w_row_bytes = baton_cpu_weight_row_bytes(wtype, k);
        act_col_bytes = baton_cpu_act_k_col_bytes(k);
        break;
    default:
        j.fn = kt->f32;
        w_row_bytes = k * 4;
        break;
    }
    j.n_parts = n_parts;
    for (p = 0; p < n_parts; p++) {
        struct baton_mm *mm = &j.mm[p];

        mm->w = parts[p].w;
        mm->x = x;
        mm->y = parts[p].y;
        mm->k = k;
        mm->n = parts[p].n;
        mm->ldy = parts[p].ldy > parts[p].n ? parts[p].ldy : parts[p].n;
        mm->m = m;
        mm->w_row_bytes = w_row_bytes;
        mm->act = work;
        mm->act_col_bytes = act_col_bytes;
        j.unit0[p] = units;
        units += (parts[p].n + ROW_UNIT - 1) / ROW_UNIT; /* validated sizes: no wrap */
        rows += parts[p].n;
        if (k == 0) {
            uint64_t c;

            for (c = 0; c < m; c++) /* validated: the element count fits */
                memset(parts[p].y + c * mm->ldy, 0, (size_t)parts[p].n * sizeof(float));
        }
    }
    j.unit0[n_parts] = units;
    if (k == 0 || units == 0)
        return;
    baton_pool_run_dynamic(pool, units, sat_mul(sat_mul(k, rows), m) / GRAIN + 1, rows_task, &j);
}

void baton_cpu_mul_mat_typed(struct baton_pool *pool, uint32_t wtype, const void *w, const float *x,
                             float *y, uint64_t k, uint64_t n, uint64_t m, void *work)
{
    const struct baton_cpu_mm_part part = {w, y, n, n};

    baton_cpu_mul_mat_group(pool, wtype, &part, 1, x, k, m, work);
}

void baton_cpu_f32_dots(const float *w, uint64_t ws, const float *x, uint64_t k, uint64_t n,
                        float *y)
{
    kernels()->dots(w, ws, x, k, n, y);
}

void baton_cpu_f32_dots_multi(const float *w, uint64_t ws, const float *x, uint64_t xs,
                              uint32_t nx, uint64_t k, uint64_t n, float *y, uint64_t ys)
{
    kernels()->dots_multi(w, ws, x, xs, nx, k, n, y, ys);
}

void baton_cpu_f32_wsum(const float *v, uint64_t vs, const float *a, uint64_t n, uint64_t k,
                        float *out)
{
    kernels()->wsum(v, vs, a, n, k, out);
}

int baton_cpu_has_att_block(void)
{
    return kernels()->att_block != NULL;
}

void baton_cpu_att_block(const struct baton_att_block *b)
{
    kernels()->att_block(b);
}

void baton_cpu_f16_wsum(const void *v, uint64_t vs, const float *a, uint64_t n, uint64_t k,
                        float *out)
{
    kernels()->wsum_h(v, vs, a, n, k, out);
}

void baton_cpu_f16_row(const void *src, float *dst, uint64_t n)
{
    kernels()->f16_row(src, dst, n);
}

void baton_cpu_f32_to_f16_row(const float *src, void *dst, uint64_t n)
{
    kernels()->f32_to_f16_row(src, dst, n);
}

void baton_cpu_silu_n(const float *x, float *y, uint64_t n)
{
    kernels()->silu(x, y, n);
}

void baton_cpu_gelu_n(const float *x, float *y, uint64_t n)
{
    kernels()->gelu(x, y, n);
}

void baton_cpu_exp_shift(float *x, uint64_t n, float m)
{
    kernels()->exp_shift(x, n, m);
}

void baton_cpu_mul_mat(struct baton_pool *pool, const float *w, const float *x, float *y,
                       uint64_t k, uint64_t n, uint64_t m)
{
    baton_cpu_mul_mat_typed(pool, BATON_TYPE_F32, w, x, y, k, n, m, NULL);
}

int baton_cpu_get_rows_typed(uint32_t ttype, const void *table, uint64_t k, uint64_t r,
                             const int32_t *ids, uint64_t n, float *y)
{
    const uint64_t row_bytes = baton_cpu_weight_row_bytes(ttype, k);
    uint64_t i;

    for (i = 0; i < n; i++)
        if (ids[i] < 0 || (uint64_t)ids[i] >= r)
            return BATON_E_INDEX;
    if (k == 0)
        return 0;
    for (i = 0; i < n; i++) {
        /* each id is read once and checked at its use: a row written to y
         * must not be able to change an id checked above (the validator
         * also forbids an out leaf that overlaps another leaf) */
        const int32_t id = ids[i];
        const uint8_t *src;
        int rc;

        if (id < 0 || (uint64_t)id >= r)
            return BATON_E_INDEX;
        src = (const uint8_t *)table + (uint64_t)id * row_bytes;
        rc = baton_dequantize_row(ttype, src, y + i * k, k);

        if (rc)
            return rc; /* not reached: the type and k are validated */
    }
    return 0;
}

int baton_cpu_get_rows(const float *table, uint64_t k, uint64_t r, const int32_t *ids, uint64_t n,
                       float *y)
{
    return baton_cpu_get_rows_typed(BATON_TYPE_F32, table, k, r, ids, n, y);
}

/* ---- tile walker ---- */

#define ROW_BLOCK_BYTES (256u * 1024u)

void baton_mm_drive(const struct baton_mm *mm, uint64_t r0, uint64_t r1,
                    const struct baton_mm_tiles *t)
{
    baton_mm_drive_few(mm, r0, r1, t, 0);
}

void baton_mm_drive_few(const struct baton_mm *mm, uint64_t r0, uint64_t r1,
                        const struct baton_mm_tiles *t, uint32_t decode_max_m)
{
    uint64_t r, c, rs, rb;

    if (t->decode &&
        (mm->m == 1 || (mm->m <= decode_max_m && mm->m <= BATON_MM_DECODE_MAX_M))) {
        struct baton_mm col[BATON_MM_DECODE_MAX_M];

        for (c = 0; c < mm->m; c++) { /* column c as a product of one column */
            col[c] = *mm;
            col[c].x = mm->x ? mm->x + c * mm->k : NULL;
            col[c].act = mm->act ? mm->act + c * mm->act_col_bytes : NULL;
            col[c].y = mm->y + c * mm->ldy;
            col[c].m = 1;
        }
        for (r = r0; r1 - r >= t->decode_rows; r += t->decode_rows)
            for (c = 0; c < mm->m; c++)
                t->decode(&col[c], r);
        for (; r < r1; r++)
            for (c = 0; c < mm->m; c += t->cols)
                t->row(mm, r, c, mm->m - c < t->cols ? (uint32_t)(mm->m - c) : t->cols);
        return;
    }
    rb = ROW_BLOCK_BYTES / (mm->w_row_bytes ? mm->w_row_bytes : 1);
    rb -= rb % t->rows;
    if (rb == 0)
        rb = t->rows;
    {
        /* While the column groups pass over a block of rows (in L2), the
         * next block's weights are prefetched into L2 a slice per group,
         * so its first pass does not wait for memory. With few columns (a
         * pipelined ubatch of 64 tokens has 16 groups) that first pass was
         * most of the difference: 17 % more time per token in the Q8_0
         * tiles at 64 columns than at 512 on the EPYC host. Prefetching
         * changes no result. */
        const uint64_t n_groups = (mm->m + t->cols - 1) / t->cols;

        for (rs = r0; rs < r1; rs += rb) {
            const uint64_t re = r1 - rs > rb ? rs + rb : r1;
            const uint64_t next_end = r1 - re > rb ? re + rb : r1;
            const uint8_t *next = mm->w + re * mm->w_row_bytes;
            const uint64_t next_bytes = (next_end - re) * mm->w_row_bytes;
            const uint64_t slice = (next_bytes / n_groups + 63) & ~(uint64_t)63;
            uint64_t pf = 0;

            for (c = 0; c < mm->m; c += t->cols) {
                const uint32_t nc = mm->m - c < t->cols ? (uint32_t)(mm->m - c) : t->cols;
                const uint64_t pf_end = pf + slice < next_bytes ? pf + slice : next_bytes;

                for (; pf < pf_end; pf += 64)
                    __builtin_prefetch(next + pf, 0, 2);
                for (r = rs; mm->m > t->row_max_m && re - r >= t->rows; r += t->rows)
                    t->tile(mm, r, c, nc);
                for (; r < re; r++)
                    t->row(mm, r, c, nc);
            }
        }
    }
}

void baton_mm_f32_row(const struct baton_mm *mm, uint64_t r, uint64_t c, uint32_t nc)
{
    const uint64_t k = mm->k;
    const float *wr = (const float *)mm->w + r * (mm->w_row_bytes / sizeof(float));
    uint64_t i;
    uint32_t j;

    for (j = 0; j < nc; j++) {
        const float *xc = mm->x + (c + j) * k;
        float s = 0.0f;

        for (i = 0; i < k; i++)
            s += wr[i] * xc[i];
        mm->y[(c + j) * mm->ldy + r] = s;
    }
}
