/* Scalar CPU kernels (see kernels.h). The formulas are those of llama2.c's
 * run.c (rmsnorm, softmax, RoPE, attention, SwiGLU), written anew. MUL_MAT
 * and GET_ROWS are in matmul.c (all weight types, SIMD levels).
 *
 * Bit-exactness rules kept throughout: float accumulators, ascending index
 * order, no reassociation, no fused multiply-add (GCC contracts nothing in
 * ISO C mode, -std=c11; clang is told below). */
#include "compute/cpu/kernels.h"
#include "compute/cpu/quant.h"
#include "compute/cpu/matmul.h"

#include <math.h>
#include <string.h>

#include "baton/status.h"
#include "compute/pool.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* Work (roughly multiply-adds) per chunk below which splitting a job across
 * threads costs more than it saves. Only speed depends on it, never bits. */
#define GRAIN 32768u

static uint64_t chunks_for(uint64_t work)
{
    return work / GRAIN + 1;
}

/* Saturating product for the chunk heuristics. */
static uint64_t sat_mul(uint64_t a, uint64_t b)
{
    uint64_t r;

    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

/* ---- RMS_NORM ---- */

struct rms_norm_job {
    const float *x;
    float *y;
    uint64_t k;
    float eps;
};

static void rms_norm_task(void *ctx, uint64_t r0, uint64_t r1, uint32_t chunk)
{
    const struct rms_norm_job *j = ctx;
    uint64_t r, i;

    (void)chunk;
    for (r = r0; r < r1; r++) {
        const float *x = j->x + r * j->k;
        float *y = j->y + r * j->k;
        float ss = 0.0f;

        for (i = 0; i < j->k; i++)
            ss += x[i] * x[i];
        ss /= (float)j->k;
        ss += j->eps;
        ss = 1.0f / sqrtf(ss);
        for (i = 0; i < j->k; i++)
            y[i] = ss * x[i];
    }
}

void baton_cpu_rms_norm(struct baton_pool *pool, const float *x, float *y, uint64_t k,
                        uint64_t rows, float eps)
{
    struct rms_norm_job j = {x, y, k, eps};

    if (k == 0)
        return;
    baton_pool_run(pool, rows, chunks_for(sat_mul(k, rows)), rms_norm_task, &j);
}

/* ---- ADD, MUL ---- */

struct binary_job {
    int is_mul;
    const float *a, *b;
    float *y;
    uint64_t ane[4], bne[4];
};

static void binary_task(void *ctx, uint64_t r0, uint64_t r1, uint32_t chunk)
{
    const struct binary_job *j = ctx;
    const uint64_t k = j->ane[0], bk = j->bne[0];
    uint64_t r, i;

    (void)chunk;
    for (r = r0; r < r1; r++) {
        const uint64_t i1 = r % j->ane[1], i2 = (r / j->ane[1]) % j->ane[2],
                       i3 = r / j->ane[1] / j->ane[2];
        const uint64_t br =
            i1 % j->bne[1] + j->bne[1] * (i2 % j->bne[2] + j->bne[2] * (i3 % j->bne[3]));
        const float *a = j->a + r * k, *b = j->b + br * bk;
        float *y = j->y + r * k;

        if (bk == k) {
            if (j->is_mul)
                for (i = 0; i < k; i++)
                    y[i] = a[i] * b[i];
            else
                for (i = 0; i < k; i++)
                    y[i] = a[i] + b[i];
        } else {
            const float b0 = b[0];

            if (j->is_mul)
                for (i = 0; i < k; i++)
                    y[i] = a[i] * b0;
            else
                for (i = 0; i < k; i++)
                    y[i] = a[i] + b0;
        }
    }
}

void baton_cpu_binary(struct baton_pool *pool, int is_mul, const float *a, const uint64_t ane[4],
                      const float *b, const uint64_t bne[4], float *y)
{
    struct binary_job j;
    uint64_t rows;

    if (ane[0] == 0 || ane[1] == 0 || ane[2] == 0 || ane[3] == 0)
        return;
    j.is_mul = is_mul;
    j.a = a;
    j.b = b;
    j.y = y;
    memcpy(j.ane, ane, sizeof(j.ane));
    memcpy(j.bne, bne, sizeof(j.bne));
    rows = ane[1] * ane[2] * ane[3]; /* validated: the element count fits */
    baton_pool_run(pool, rows, chunks_for(sat_mul(rows, ane[0])), binary_task, &j);
}

/* ---- SCALE, SILU, GELU ---- */

struct unary_job {
    const float *x;
    float *y;
    float s;
};

static void scale_task(void *ctx, uint64_t i0, uint64_t i1, uint32_t chunk)
{
    const struct unary_job *j = ctx;
    uint64_t i;

    (void)chunk;
    for (i = i0; i < i1; i++)
        j->y[i] = j->x[i] * j->s;
}

static void silu_task(void *ctx, uint64_t i0, uint64_t i1, uint32_t chunk)
{
    const struct unary_job *j = ctx;

    (void)chunk;
    baton_cpu_silu_n(j->x + i0, j->y + i0, i1 - i0);
}

/* GELU's tanh form as a logistic: 0.5 x (1 + tanh(u)) = x / (1 + e^(-2u)),
 * u = sqrt(2/pi) (x + 0.044715 x^3) (kernels.h; baton_cpu_gelu_n, matmul.h). */
static void gelu_task(void *ctx, uint64_t i0, uint64_t i1, uint32_t chunk)
{
    const struct unary_job *j = ctx;

    (void)chunk;
    baton_cpu_gelu_n(j->x + i0, j->y + i0, i1 - i0);
}

void baton_cpu_scale(struct baton_pool *pool, const float *x, float *y, uint64_t n, float s)
{
    struct unary_job j = {x, y, s};

    baton_pool_run(pool, n, chunks_for(n), scale_task, &j);
}

void baton_cpu_silu(struct baton_pool *pool, const float *x, float *y, uint64_t n)
{
    struct unary_job j = {x, y, 0.0f};

    baton_pool_run(pool, n, chunks_for(sat_mul(n, 16)), silu_task, &j);
}

void baton_cpu_gelu(struct baton_pool *pool, const float *x, float *y, uint64_t n)
{
    struct unary_job j = {x, y, 0.0f};

    baton_pool_run(pool, n, chunks_for(sat_mul(n, 20)), gelu_task, &j);
}

/* ---- ROPE ---- */

struct rope_job {
    const float *x;
    const int32_t *pos;
    const float *factors; /* n_dims/2 divisors of the angles, or NULL */
    float *y;
    uint64_t hd, nh;
    uint32_t n_dims;
    float freq_base;
    uint32_t mode; /* 0 adjacent pairs, 2 NeoX */
    float freq_scale; /* the angles' factor (1: none) */
};

/* Pairs whose cos/sin one rope task keeps for the rows of a token. */
#define ROPE_CACHE_PAIRS 256u

/* cos and sin of pair i at position p (run.c's expressions). */
static void rope_angle(const struct rope_job *j, float p, uint64_t i, float *fcr, float *fci)
{
    const float freq = 1.0f / powf(j->freq_base, (float)(2 * i) / (float)j->n_dims);
    float val = j->factors ? (p * freq) / j->factors[i] : p * freq;

    if (j->freq_scale != 1.0f)
        val *= j->freq_scale; /* ggml: theta = freq_scale * theta_extrap */
    *fcr = cosf(val);
    *fci = sinf(val);
}

/* Rows [r0, r1) of the nh*nt head rows. run.c: freq = 1 / powf(base,
 * head_dim / (float)head_size), val = pos * freq, then (v0, v1) ->
 * (v0 cos - v1 sin, v0 sin + v1 cos); dims past n_dims are copied. The
 * angles depend on the token and pair only, so the heads of a token share
 * them (computed once per token by the same expressions: same bits). */
static void rope_task(void *ctx, uint64_t r0, uint64_t r1, uint32_t chunk)
{
    const struct rope_job *j = ctx;
    const uint64_t pairs = j->n_dims / 2;
    const int cached = pairs <= ROPE_CACHE_PAIRS;
    float cs[2 * ROPE_CACHE_PAIRS];
    uint64_t r, i, have_t = UINT64_MAX;

    (void)chunk;
    for (r = r0; r < r1; r++) {
        const uint64_t t = r / j->nh;
        const float p = (float)j->pos[t];
        const float *x = j->x + r * j->hd;
        float *y = j->y + r * j->hd;

        if (cached && t != have_t) {
            for (i = 0; i < pairs; i++)
                rope_angle(j, p, i, &cs[2 * i], &cs[2 * i + 1]);
            have_t = t;
        }
        for (i = 0; i < pairs; i++) {
            float fcr, fci;
            /* pair i: (2i, 2i + 1), or NeoX's (i, i + n_dims / 2) */
            const uint64_t i0 = j->mode == 2 ? i : 2 * i, i1 = j->mode == 2 ? i + pairs : 2 * i + 1;
            const float v0 = x[i0], v1 = x[i1];

            if (cached) {
                fcr = cs[2 * i];
                fci = cs[2 * i + 1];
            } else {
                rope_angle(j, p, i, &fcr, &fci);
            }
            y[i0] = v0 * fcr - v1 * fci;
            y[i1] = v0 * fci + v1 * fcr;
        }
        for (i = j->n_dims; i < j->hd; i++)
            y[i] = x[i];
    }
}

int baton_cpu_rope(struct baton_pool *pool, const float *x, const int32_t *pos,
                   const float *factors, float *y, uint64_t hd, uint64_t nh, uint64_t nt,
                   uint32_t n_dims, float freq_base, uint32_t mode, float freq_scale)
{
    struct rope_job j = {x, pos, factors, y, hd, nh, n_dims, freq_base, mode, freq_scale};
    uint64_t t;

    for (t = 0; t < nt; t++)
        if (pos[t] < 0)
            return BATON_E_INDEX;
    if (nh == 0 || hd == 0)
        return 0;
    baton_pool_run(pool, nh * nt, chunks_for(sat_mul(sat_mul(nh, nt), sat_mul(hd, 16))),
                   rope_task, &j);
    return 0;
}

/* ---- ATTENTION ---- */

/* Four floats in one vector (GCC / clang vector extension: SSE on x86-64,
 * NEON elsewhere, plain code where neither exists). */
typedef float v4f __attribute__((vector_size(16)));

/* x[i] = x[i] / d (divide) or x[i] * d, for i < n. A quotient or product
 * is correctly rounded in every lane (IEEE 754), so the bits are the
 * scalar loop's; four lanes at a time take most of the division latency
 * out of the softmax. */
static void scale_all(float *x, uint64_t n, float d, int divide)
{
    const v4f dv = {d, d, d, d};
    uint64_t i = 0;

    for (; n - i >= 4; i += 4) {
        v4f v;

        memcpy(&v, x + i, sizeof(v));
        v = divide ? v / dv : v * dv;
        memcpy(x + i, &v, sizeof(v));
    }
    for (; i < n; i++)
        x[i] = divide ? x[i] / d : x[i] * d;
}

_Static_assert(BATON_CPU_ATT_QUERIES <= BATON_CPU_DOTS_MAX_X,
               "without the block kernel, one dots_multi call per run of a block");
_Static_assert(BATON_CPU_ATT_QUERIES <= BATON_CPU_ATT_BLOCK, "a block fits the token arrays");
_Static_assert(BATON_CPU_ATT_CONV_ROWS == BATON_CPU_ATT_F16_ROWS, "one conversion window");

struct attention_job {
    const struct baton_cpu_attention *a;
    uint64_t block; /* tokens per block, 1..BATON_CPU_ATT_QUERIES, or ..BATON_CPU_ATT_BLOCK
                       with use_block (kernels.h) */
    int use_block;  /* the level's block kernel takes a block over one window of cells
                       (baton_cpu_att_block) */
};

/* The first cell token t reads when its last is p: its sequence's first
 * cell (0 without a->first), raised to p - window + 1 with a sliding
 * window (when that is larger; p out of range is caught by the callers). */
static int32_t att_first(const struct baton_cpu_attention *a, uint64_t t, int32_t p)
{
    const int32_t f = a->first ? a->first[t] : 0;

    if (a->window != 0 && (int64_t)p - (int64_t)a->window + 1 > (int64_t)f)
        return (int32_t)((int64_t)p - (int64_t)a->window + 1);
    return f;
}

/* Softmax of one query's scores att[0, n_slots) in place, as run.c: the
 * scale, max subtracted, exp (baton_cpu_exp_shift), float sum in slot
 * order, divide. */
static void attention_softmax(const struct baton_cpu_attention *a, float *att, uint64_t n_slots)
{
    float max_val, sum = 0.0f;
    uint64_t s;

    scale_all(att, n_slots, a->scale, a->divide);
    max_val = att[0];
    for (s = 1; s < n_slots; s++)
        if (att[s] > max_val)
            max_val = att[s];
    baton_cpu_exp_shift(att, n_slots, max_val);
    for (s = 0; s < n_slots; s++)
        sum += att[s];
    scale_all(att, n_slots, sum, 1);
}

/* Scores of nx queries (x, stride nh * hd) against the n cache rows from
 * cell lo of kv head kvh into y (stride n_ctx); an F16 cache a window of
 * rows at a time through conv (each row's score is its own dot product, so
 * the windows change no bit). */
static void attention_scores(const struct baton_cpu_attention *a, uint64_t kvh, uint64_t lo,
                             const float *x, uint32_t nx, uint64_t n, float *y, float *conv)
{
    const uint64_t hd = a->hd, first = (kvh * a->n_ctx + lo) * hd;
    uint64_t w0;

    if (!a->cache_f16) {
        baton_cpu_f32_dots_multi((const float *)a->k_cache + first, hd, x, a->nh * hd, nx, hd, n,
                                 y, a->n_ctx);
        return;
    }
    for (w0 = 0; w0 < n; w0 += BATON_CPU_ATT_F16_ROWS) {
        const uint64_t wn = n - w0 < BATON_CPU_ATT_F16_ROWS ? n - w0 : BATON_CPU_ATT_F16_ROWS;

        baton_cpu_f16_row((const uint16_t *)a->k_cache + first + w0 * hd, conv, wn * hd);
        baton_cpu_f32_dots_multi(conv, hd, x, a->nh * hd, nx, hd, wn, y + w0, a->n_ctx);
    }
}

/* out = the weighted sum (weights sc) of the n value rows from cell lo of
 * kv head kvh; an F16 cache's rows converted as they are loaded
 * (baton_cpu_f16_wsum: the bits of F32 rows holding the same values). */
static void attention_wsum(const struct baton_cpu_attention *a, uint64_t kvh, uint64_t lo,
                           const float *sc, uint64_t n, float *out)
{
    const uint64_t hd = a->hd, first = (kvh * a->n_ctx + lo) * hd;

    if (a->cache_f16)
        baton_cpu_f16_wsum((const uint16_t *)a->v_cache + first, hd, sc, n, hd, out);
    else
        baton_cpu_f32_wsum((const float *)a->v_cache + first, hd, sc, n, hd, out);
}

/* n tokens from token t of the batch, head h (kv head kvh), which all read
 * the window of cells from lo (one sequence; token c: n_slots[c] cells, 0
 * for a token whose position was out of range: output 0). With the
 * level's block kernel (matmul.h, baton_cpu_att_block) when there are 2 or
 * more, each has a cell, and the chunk's score rows att (j->block rows of
 * n_ctx floats) hold BATON_CPU_ATT_BLOCK scores per cell of the largest
 * count; else the scores of up to BATON_CPU_DOTS_MAX_X tokens per
 * baton_cpu_f32_dots_multi call over the largest count (a token's scores
 * past its own cells are computed and never read), which reads each cache
 * row once for the call's tokens, then each token's softmax as run.c (max
 * subtracted, exp, float sum, divide) and weighted sum of value rows in
 * cell order. Every kernel keeps run.c's order in every lane (matmul.h),
 * so the bits are those of the plain loops on every level either way.
 * The caches are kv-head-major (core/ops.h), so the scores and the sums
 * read one sequential stream of rows each. */
static void attention_run(const struct attention_job *j, uint64_t t, uint64_t h, uint64_t kvh,
                          const uint64_t *n_slots, uint64_t lo, uint64_t n, float *att,
                          float *conv)
{
    const struct baton_cpu_attention *a = j->a;
    const uint64_t hd = a->hd, nh = a->nh;
    uint64_t max_slots = 0, min_slots = UINT64_MAX, c, i;

    for (c = 0; c < n; c++) {
        if (n_slots[c] > max_slots)
            max_slots = n_slots[c];
        if (n_slots[c] < min_slots)
            min_slots = n_slots[c];
    }
    if (j->use_block && n > 1 && min_slots > 0 &&
        j->block * a->n_ctx >= BATON_CPU_ATT_BLOCK * max_slots) {
        const uint64_t first = (kvh * a->n_ctx + lo) * hd;
        const size_t eb = a->cache_f16 ? 2 : 4;
        const struct baton_att_block bb = {
            a->q + (t * nh + h) * hd, nh * hd, (uint32_t)n, n_slots,
            (const uint8_t *)a->k_cache + first * eb, (const uint8_t *)a->v_cache + first * eb,
            a->cache_f16, conv, hd, a->scale, a->divide, att, a->out + (t * nh + h) * hd,
            nh * hd};

        baton_cpu_att_block(&bb);
        return;
    }
    for (c = 0; max_slots > 0 && c < n; c += BATON_CPU_DOTS_MAX_X)
        attention_scores(a, kvh, lo, a->q + ((t + c) * nh + h) * hd,
                         (uint32_t)(n - c < BATON_CPU_DOTS_MAX_X ? n - c : BATON_CPU_DOTS_MAX_X),
                         max_slots, att + c * a->n_ctx, conv);
    for (c = 0; c < n; c++) {
        float *out = a->out + ((t + c) * nh + h) * hd;
        float *sc = att + c * a->n_ctx;

        if (n_slots[c] == 0) {
            for (i = 0; i < hd; i++)
                out[i] = 0.0f;
            continue;
        }
        attention_softmax(a, sc, n_slots[c]);
        attention_wsum(a, kvh, lo, sc, n_slots[c], out);
    }
}

/* Units [r0, r1) of nh * n_units (unit = h * n_units + u): head h of the tokens
 * of token block u (tokens [j->block * b, ...) of the batch, at most
 * j->block of them, kernels.h; b as below), each run of consecutive tokens
 * that read one window of cells (one sequence) through attention_run.
 * Each token scores cache cells first..pos[t].
 *
 * The units are head-major (unit = h * n_units + u), so one head's key and
 * value rows (n_ctx * hd floats each, at most 256 KiB at 512 cells of 64)
 * are read by all of that head's blocks one after the other and stay in L2
 * between them: in a prefill ubatch after the first, the older rows come
 * from memory (the weights streamed since evicted them) once per head
 * instead of once per block (a 64-token ubatch's ATTENTION 10 % faster on
 * the d768 model, the thirty-eighth session's figures in bench/RESULTS.md).
 * Within a head, [r0, r1) indexes the blocks in a zig-zag order (blocks 0,
 * last, 1, last - 1, ...): in a batch a token at a later position attends
 * to more slots, and contiguous ranges of that order pair cheap blocks with
 * dear ones, so the threads of a prefill ubatch get about equal work (with
 * plain order the second of 2 threads had 3/4 of it). Each token's row is
 * computed alone, so neither the blocks, the runs nor their order change a
 * result. */
static void attention_task(void *ctx, uint64_t r0, uint64_t r1, uint32_t chunk)
{
    const struct attention_job *j = ctx;
    const struct baton_cpu_attention *a = j->a;
    const uint64_t hd = a->hd, nh = a->nh, nkv = a->nkv, group = nh / nkv, nt = a->nt;
    const uint64_t block = j->block, n_units = (nt + block - 1) / block;
    float *att = a->work + (uint64_t)chunk * block * a->n_ctx;
    /* F16 caches: after the score rows, one window of converted key rows
     * per chunk (graph.c sizes the work area so) */
    float *conv = !a->cache_f16 ? NULL
                                : a->work +
                                      (nh * nt < BATON_POOL_MAX_THREADS ? nh * nt
                                                                        : BATON_POOL_MAX_THREADS) *
                                          a->n_ctx +
                                      (uint64_t)chunk * BATON_CPU_ATT_F16_ROWS * hd;
    uint64_t lr, c, c1;

    for (lr = r0; lr < r1; lr++) {
        const uint64_t u = lr % n_units, h = lr / n_units, kvh = h / group;
        const uint64_t b = u % 2 == 0 ? u / 2 : n_units - 1 - u / 2;
        const uint64_t t0 = b * block, nx = nt - t0 < block ? nt - t0 : block;
        uint64_t n_slots[BATON_CPU_ATT_BLOCK], lo[BATON_CPU_ATT_BLOCK];

        for (c = 0; c < nx; c++) {
            const int32_t p = a->pos[t0 + c]; /* read once, checked where it is used */
            const int32_t f = att_first(a, t0 + c, p);

            /* p or f out of range: unreachable after the checks in
             * baton_cpu_attention and the validator's no-overlap rule; kept
             * so no index is ever used unchecked (that token's output is 0) */
            n_slots[c] = p < 0 || (uint64_t)p >= a->n_ctx || f < 0 || f > p
                             ? 0
                             : (uint64_t)(p - f) + 1;
            lo[c] = n_slots[c] ? (uint64_t)f : 0;
        }
        for (c = 0; c < nx; c = c1) {
            for (c1 = c + 1; c1 < nx && lo[c1] == lo[c]; c1++)
                ;
            attention_run(j, t0 + c, h, kvh, n_slots + c, lo[c], c1 - c, att, conv);
        }
    }
}

int baton_cpu_attention(struct baton_pool *pool, const struct baton_cpu_attention *a)
{
    const uint64_t row = a->nkv * a->hd;
    struct attention_job j = {a, 1, 0};
    uint64_t t, max_slots = 0;

    for (t = 0; t < a->nt; t++) {
        const int32_t f = att_first(a, t, a->pos[t]);

        /* the given first cell too: a window that raises it would hide a
         * negative one (core/ops.h: 0 <= f[t] <= c[t]) */
        if (a->pos[t] < 0 || (uint64_t)a->pos[t] >= a->n_ctx || f < 0 || f > a->pos[t] ||
            (a->first && a->first[t] < 0))
            return BATON_E_INDEX;
        if ((uint64_t)(a->pos[t] - f) + 1 > max_slots)
            max_slots = (uint64_t)(a->pos[t] - f) + 1;
    }
    /* Cache writes first, in token order, on this thread: a later token of
     * the batch sees every earlier one, as in token-by-token decoding. */
    if (row > 0)
        for (t = 0; t < a->nt; t++) {
            const int32_t p = a->pos[t]; /* re-read and re-checked at its use */

            if (p < 0 || (uint64_t)p >= a->n_ctx)
                return BATON_E_INDEX;
            uint64_t g;

            for (g = 0; g < a->nkv; g++) {
                const uint64_t at = (g * a->n_ctx + (uint64_t)p) * a->hd;

                if (a->cache_f16) {
                    baton_cpu_f32_to_f16_row(a->k + t * row + g * a->hd,
                                             (uint16_t *)a->k_cache + at, a->hd);
                    baton_cpu_f32_to_f16_row(a->v + t * row + g * a->hd,
                                             (uint16_t *)a->v_cache + at, a->hd);
                } else {
                    memmove((float *)a->k_cache + at, a->k + t * row + g * a->hd,
                            a->hd * sizeof(float));
                    memmove((float *)a->v_cache + at, a->v + t * row + g * a->hd,
                            a->hd * sizeof(float));
                }
            }
        }
    if (a->nh == 0 || a->hd == 0)
        return 0;
    {
        /* the work area's rows (graph.c sizes it so) and the chunks that
         * may run: each chunk holds one row per token of its block */
        const uint64_t rows = a->nh * a->nt < BATON_POOL_MAX_THREADS ? a->nh * a->nt
                                                                      : BATON_POOL_MAX_THREADS;
        uint64_t max_chunks, threads;

        max_chunks = chunks_for(sat_mul(sat_mul(a->nh * a->nt, max_slots), sat_mul(a->hd, 2)));
        if (max_chunks > BATON_POOL_MAX_THREADS)
            max_chunks = BATON_POOL_MAX_THREADS;
        threads = baton_pool_threads(pool) < max_chunks ? baton_pool_threads(pool) : max_chunks;
        /* the block kernel: hd and slot counts within its bounds
         * (matmul.h) */
        j.use_block = a->hd <= BATON_CPU_ATT_HD_MAX &&
                      max_slots < (1ull << 31) && baton_cpu_has_att_block();
        j.block = rows / threads; /* rows < threads only when rows = nh*nt (see kernels.h) */
        if (j.block > (j.use_block ? BATON_CPU_ATT_BLOCK : BATON_CPU_ATT_QUERIES))
            j.block = j.use_block ? BATON_CPU_ATT_BLOCK : BATON_CPU_ATT_QUERIES;
        if (j.block > a->nt)
            j.block = a->nt;
        if (j.block == 0)
            j.block = 1;
        baton_pool_run_dynamic(pool, a->nh * ((a->nt + j.block - 1) / j.block), max_chunks,
                               attention_task, &j);
    }
    return 0;
}

/* ---- ARGMAX ---- */

struct argmax_job {
    const float *x;
    int32_t *y;
    uint64_t k;
};

static void argmax_task(void *ctx, uint64_t r0, uint64_t r1, uint32_t chunk)
{
    const struct argmax_job *j = ctx;
    uint64_t r, i;

    (void)chunk;
    for (r = r0; r < r1; r++) {
        const float *x = j->x + r * j->k;
        uint64_t best = 0;
        int have = 0;

        for (i = 0; i < j->k; i++) {
            if (isnan(x[i]))
                continue;
            if (!have || x[i] > x[best]) {
                best = i;
                have = 1;
            }
        }
        j->y[r] = (int32_t)best; /* validated: k <= INT32_MAX */
    }
}

void baton_cpu_argmax(struct baton_pool *pool, const float *x, uint64_t k, uint64_t m,
                      int32_t *y)
{
    struct argmax_job j = {x, y, k};

    baton_pool_run(pool, m, chunks_for(sat_mul(k, m)), argmax_task, &j);
}

/* ---- SAMPLE ---- */

/* splitmix64's output function (Steele, Lea, Flood 2014, "Fast splittable
 * pseudorandom number generators"; the constants of Vigna's public-domain
 * splitmix64.c): a bijective mix of 64 bits. */
static uint64_t mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The candidates' order: larger p first, then lower id, a total order (p
 * is never NaN here, ids are distinct). p >= 0, so its bits without the
 * sign (a -0 is 0) as an unsigned integer order as p does: a stable radix
 * sort on them, descending, of entries in id order gives exactly that order
 * (the order is total, so the result does not depend on the method). */
static uint32_t sample_key(const struct baton_cpu_sample_entry *e)
{
    uint32_t key;

    memcpy(&key, &e->p, 4);
    return key & 0x7fffffffu;
}

/* Sorts the n entries of v (in id order) into the candidates' order,
 * using tmp (n entries) as the other buffer of an LSD radix sort of the
 * 32 key bits, a byte a pass (a pass whose byte is the same in every entry
 * is skipped). Returns v or tmp, whichever holds the result. No allocation
 * (libc's qsort may allocate and ask the system for its memory size, which
 * batond's seccomp filter refuses). */
static struct baton_cpu_sample_entry *sample_sort(struct baton_cpu_sample_entry *v,
                                                  struct baton_cpu_sample_entry *tmp, uint64_t n)
{
    uint64_t count[4][256];
    uint64_t i;

    memset(count, 0, sizeof count);
    for (i = 0; i < n; i++) {
        const uint32_t key = sample_key(&v[i]);

        for (int b = 0; b < 4; b++)
            count[b][(key >> (8 * b)) & 255u]++;
    }
    for (int b = 0; b < 4; b++) {
        const unsigned shift = 8u * (unsigned)b;
        struct baton_cpu_sample_entry *t;
        uint64_t at = 0;
        int d;

        if (n == 0 || count[b][(sample_key(&v[0]) >> shift) & 255u] == n)
            continue; /* every entry has this byte: the pass would keep the order */
        /* descending: the largest byte's entries first */
        for (d = 255; d >= 0; d--) {
            const uint64_t c = count[b][d];

            count[b][d] = at;
            at += c;
        }
        for (i = 0; i < n; i++)
            tmp[count[b][(sample_key(&v[i]) >> shift) & 255u]++] = v[i];
        t = v;
        v = tmp;
        tmp = t;
    }
    return v;
}

/* Keeps, in id order at the start of v, the entries of v[0, n) whose key's
 * top SELECT_BITS bits are at least those of the n_keep-th largest key: a
 * superset of the first n_keep entries in the candidates' order (every entry
 * left out has a smaller key than every entry kept). Returns how many were
 * kept (>= n_keep; 1 <= n_keep <= n). */
#define SELECT_BITS 11u
static uint64_t sample_select(struct baton_cpu_sample_entry *v, uint64_t n, uint64_t n_keep)
{
    uint32_t count[1u << SELECT_BITS];
    uint64_t i, kept = 0, seen = 0;
    uint32_t floor_bucket = (1u << SELECT_BITS) - 1u;

    memset(count, 0, sizeof count);
    for (i = 0; i < n; i++) /* n <= INT32_MAX: the counts fit */
        count[sample_key(&v[i]) >> (32u - SELECT_BITS)]++;
    for (;;) {
        seen += count[floor_bucket];
        if (seen >= n_keep || floor_bucket == 0)
            break;
        floor_bucket--;
    }
    for (i = 0; i < n; i++)
        if (sample_key(&v[i]) >> (32u - SELECT_BITS) >= floor_bucket)
            v[kept++] = v[i];
    return kept;
}

/* The first maximum of x[0, k), NaN never winning (ARGMAX's rule); -1 when
 * every value is NaN. */
static int64_t first_max(const float *x, uint64_t k)
{
    int64_t best = -1;

    for (uint64_t i = 0; i < k; i++)
        if (!isnan(x[i]) && (best < 0 || x[i] > x[best]))
            best = (int64_t)i;
    return best;
}

/* One row: x {k} with parameters pr[0..5] (valid) gives the token; work
 * holds 2k entries. */
static int32_t sample_row(const float *x, uint64_t k, const int32_t *pr,
                          struct baton_cpu_sample_entry *work)
{
    const uint32_t top_k = (uint32_t)pr[2];
    const uint64_t seed = (uint64_t)(uint32_t)pr[3] | (uint64_t)(uint32_t)pr[4] << 32;
    const uint64_t counter = (uint64_t)(uint32_t)pr[5];
    const int64_t best = first_max(x, k);
    float t, top_p, mx, u;
    double sum = 0.0, acc = 0.0;
    uint64_t i, n = k;
    const struct baton_cpu_sample_entry *v;
    float *z;

    memcpy(&t, &pr[0], 4);
    memcpy(&top_p, &pr[1], 4);
    if (t <= 0.0f || best < 0 || !isfinite(x[best]))
        return best < 0 ? 0 : (int32_t)best; /* greedy, or nothing to weigh */
    mx = x[best];
    /* p_i = baton_cpu_expf((x_i - mx) / t): the quotients in the second
     * half of work, then the exponentials in place at the CPU's level
     * (every level gives baton_cpu_expf's bits) */
    z = (float *)(void *)(work + k);
    for (i = 0; i < k; i++)
        z[i] = (x[i] - mx) / t;
    baton_cpu_exp_shift(z, k, 0.0f);
    for (i = 0; i < k; i++) {
        work[i].id = (int32_t)i;
        work[i].p = isnan(x[i]) ? 0.0f : z[i];
    }
    if (top_k > 0 && top_k < n)
        n = top_k;
    /* only the first n in the candidates' order matter from here on */
    v = sample_sort(work, work + k, n < k ? sample_select(work, k, n) : k);
    for (i = 0; i < n; i++)
        sum += v[i].p;
    if (top_p < 1.0f) {
        for (i = 0; i < n; i++) {
            acc += v[i].p / sum;
            if (acc >= top_p) {
                n = i + 1;
                break;
            }
        }
        sum = 0.0;
        for (i = 0; i < n; i++)
            sum += v[i].p;
    }
    /* 24 random bits: u in [0, 1), exactly a float */
    u = (float)(mix64(seed ^ mix64(counter)) >> 40) / 16777216.0f;
    acc = 0.0;
    for (i = 0; i < n; i++) {
        acc += v[i].p / sum;
        if ((double)u < acc)
            return v[i].id;
    }
    return v[n - 1].id;
}

struct sample_job {
    const float *logits;
    const int32_t *params;
    int32_t *out;
    struct baton_cpu_sample_entry *work;
    uint64_t k;
};

/* Rows [r0, r1) with chunk c's part of the work area (calls with the same
 * chunk never overlap). */
static void sample_task(void *ctx, uint64_t r0, uint64_t r1, uint32_t chunk)
{
    const struct sample_job *j = ctx;

    for (uint64_t r = r0; r < r1; r++)
        j->out[r] = sample_row(j->logits + r * j->k, j->k, j->params + 6 * r,
                               j->work + 2 * j->k * chunk);
}

uint64_t baton_cpu_sample_work_entries(uint64_t k, uint64_t m)
{
    const uint64_t chunks = m < BATON_CPU_SAMPLE_MAX_CHUNKS ? m : BATON_CPU_SAMPLE_MAX_CHUNKS;

    return sat_mul(2 * k, chunks);
}

int baton_cpu_sample(struct baton_pool *pool, const float *logits, uint64_t k, uint64_t m,
                     const int32_t *params, int32_t *out, struct baton_cpu_sample_entry *work)
{
    struct sample_job j = {logits, params, out, work, k};

    for (uint64_t r = 0; r < m; r++) {
        float t, top_p;

        memcpy(&t, &params[6 * r], 4);
        memcpy(&top_p, &params[6 * r + 1], 4);
        if (!isfinite(t) || !isfinite(top_p) || !(top_p > 0.0f) || top_p > 1.0f)
            return BATON_E_INVAL;
    }
    baton_pool_run_dynamic(pool, m, BATON_CPU_SAMPLE_MAX_CHUNKS, sample_task, &j);
    return 0;
}
