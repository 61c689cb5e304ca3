/* Internal: scalar CPU kernels for the ops of src/core/ops.h, on contiguous
 * F32 / I32 data. Shapes are already validated (compute/graph.c); the
 * kernels check only what is read from tensor data (indices, positions).
 *
 * Arithmetic follows llama2.c's run.c (Karpathy, MIT) operation for
 * operation: every reduction is a float accumulator in ascending index
 * order, on one thread. One deliberate difference: exp (SILU, softmax) is
 * baton_cpu_expf (matmul.h), not libm's expf, so the bits do not depend on
 * the C library; it is correctly rounded where libm's expf differs from it
 * (0.004 % of inputs with glibc 2.36, by one unit in the last place), so a
 * model's results equal run.c's except where such an input occurs.
 * Threads split output rows only, so results do not depend on the thread
 * count or on how many tokens share a batch. */
#ifndef BATON_COMPUTE_CPU_KERNELS_H
#define BATON_COMPUTE_CPU_KERNELS_H

#include <stdint.h>

#include "compute/compute.h"

/* y {N,M} = W {K,N} x {K,M}: y[m*N + n] = sum_k W[n*K + k] * x[m*K + k],
 * one float accumulator in ascending k (run.c), on any kernel level (the
 * SIMD levels vectorize across rows to keep that order). matmul.c; the
 * other weight types are in matmul.h. */
void baton_cpu_mul_mat(struct baton_pool *pool, const float *w, const float *x, float *y,
                       uint64_t k, uint64_t n, uint64_t m);

/* Each row of k elements: y = x * (1 / sqrtf(sum(x*x) / k + eps)). */
void baton_cpu_rms_norm(struct baton_pool *pool, const float *x, float *y, uint64_t k,
                        uint64_t rows, float eps);

/* y = a + b (is_mul 0) or a * b (is_mul 1), b broadcast: bne[i] is ane[i] or 1. */
void baton_cpu_binary(struct baton_pool *pool, int is_mul, const float *a, const uint64_t ane[4],
                      const float *b, const uint64_t bne[4], float *y);

/* y = x * s over n elements. */
void baton_cpu_scale(struct baton_pool *pool, const float *x, float *y, uint64_t n, float s);

/* y = x * (1 / (1 + exp(-x))) over n elements (run.c's SwiGLU form; exp is
 * baton_cpu_expf, matmul.h). */
void baton_cpu_silu(struct baton_pool *pool, const float *x, float *y, uint64_t n);

/* y[i] = x[i] / (1 + baton_cpu_expf(-2 sqrt(2/pi) (x[i] + 0.044715 x[i]^3))), i < n:
 * GELU's tanh form (ops.h; 0.5 x (1 + tanh(u)) = x / (1 + e^(-2u))), each
 * element alone in binary32 (the same bits for any thread count and on every
 * host). ggml's CPU GELU looks x up in a table of binary16 inputs and outputs
 * instead, so the two differ by up to about 1e-3 of |x|. y may be x. */
void baton_cpu_gelu(struct baton_pool *pool, const float *x, float *y, uint64_t n);

/* Rotary embedding of x {hd,nh,nt}: in each head, pair i < n_dims/2 of
 * token t is rotated by theta = pos[t] * (1 / powf(freq_base, 2i/n_dims)).
 * The pair is (x[2i], x[2i+1]) with mode 0 (llama's "normal" RoPE) and
 * (x[i], x[i + n_dims/2]) with mode 2 (GPT-NeoX's, which qwen2/qwen3 use;
 * ggml's GGML_ROPE_TYPE_NEOX); dimensions past n_dims are copied. Returns
 * BATON_E_INDEX (before writing) if some pos[t] < 0. mode is 0 or 2
 * (graph validation refuses others). factors (NULL: none) holds n_dims/2
 * floats: pair i's angle becomes (pos[t] * freq_i) / factors[i] (ROPE_FREQS,
 * Llama 3.1's rope_freqs.weight, as llama.cpp divides theta by it). With
 * freq_scale != 1 (linear rope scaling, ggml's freq_scale) that angle is then
 * multiplied by freq_scale; 1 leaves the angle as it was. */
int baton_cpu_rope(struct baton_pool *pool, const float *x, const int32_t *pos,
                   const float *factors, float *y,
                   uint64_t hd, uint64_t nh, uint64_t nt, uint32_t n_dims, float freq_base,
                   uint32_t mode, float freq_scale);

struct baton_cpu_attention {
    const float *q; /* {hd,nh,nt} */
    const float *k; /* {hd,nkv,nt} */
    const float *v; /* {hd,nkv,nt} */
    void *k_cache; /* {hd,n_ctx,nkv}, F32 or (cache_f16) F16, written at the cells pos[t] */
    void *v_cache;
    const int32_t *pos;   /* {nt}: the cache cell token t writes, and the last it reads */
    const int32_t *first; /* {nt}: the first cell token t reads (its sequence's first
                             cell: ops.h), or NULL: cell 0 for every token */
    float *out;         /* {hd,nh,nt} */
    float *work;        /* min(nh*nt, BATON_POOL_MAX_THREADS) score rows of n_ctx
                           floats, shared by the chunks (see below) */
    uint64_t hd, nh, nkv, nt, n_ctx;
    float scale;
    int divide;    /* 0: score * scale; 1: score / scale (run.c's / sqrtf(hd)) */
    int cache_f16; /* the caches hold binary16: k and v are rounded to it when
                      written (baton_fp32_to_fp16); key rows are converted
                      exactly, BATON_CPU_ATT_F16_ROWS at a time, into the work
                      area after the score rows (graph.c sizes it) and scored
                      as F32 rows, value rows converted as the weighted sum
                      loads them (baton_cpu_f16_wsum): the same bits as an F32
                      cache holding the converted values */
    uint32_t window; /* 0, or a sliding window: token t reads only the cells
                        above pos[t] - window (and from first[t]) */
};

/* Cache rows converted per window of an F16 cache (see cache_f16). */
#define BATON_CPU_ATT_F16_ROWS 64u

/* Most tokens of a batch whose scores against one head's cache rows are
 * computed together (baton_cpu_f32_dots_multi). Each chunk needs one score
 * row per token of its block, so a block has min(this, nt, R / T) tokens
 * (at least 1), R = the work area's rows, T = the chunks the pool may run:
 * the work area stays min(nh*nt, BATON_POOL_MAX_THREADS) rows whatever the
 * thread count (a larger one counts against the server's scratch limit and
 * the session's memory quota), and a pool of more than R / 4 threads scores
 * fewer tokens at once. The blocks change no result. Where the level has
 * the block kernel (matmul.h, baton_cpu_att_block: AVX2 and AVX-512) a
 * block has up to BATON_CPU_ATT_BLOCK tokens instead, on the same rule (so
 * fewer from R / 16 threads), and a run of its tokens in one sequence goes
 * through that kernel while its rows hold BATON_CPU_ATT_BLOCK scores for
 * each cell the run reads (early in a long context with many threads, not
 * later: then the 4-token scoring). */
#define BATON_CPU_ATT_QUERIES 4u

/* Fused causal grouped-query attention (ops.h): token t writes its k and v
 * rows at cell pos[t] and attends to cells first[t]..pos[t] (0..pos[t]
 * without first; with a window W, from max(first[t], pos[t] - W + 1)). Returns BATON_E_INDEX (before writing anything) if some
 * pos[t] is outside [0, n_ctx) or some first[t] outside [0, pos[t]]. */
int baton_cpu_attention(struct baton_pool *pool, const struct baton_cpu_attention *a);

/* y {k,n} = rows ids[0..n) of table {k,r}. Returns BATON_E_INDEX (before
 * writing) if some id is outside [0, r). matmul.c (other table types:
 * baton_cpu_get_rows_typed in matmul.h). */
int baton_cpu_get_rows(const float *table, uint64_t k, uint64_t r, const int32_t *ids,
                       uint64_t n, float *y);

/* y[m] = index of the first maximum of row m of x {k,m} (k >= 1); NaN never
 * wins; an all-NaN row gives 0. */
void baton_cpu_argmax(struct baton_pool *pool, const float *x, uint64_t k, uint64_t m,
                      int32_t *y);

/* SAMPLE (core/ops.h): row r of logits {k,m} gives out[r], with the
 * parameters params[6r..6r+5]. work holds baton_cpu_sample_work_entries(k,
 * m) entries (the caller's; the graph's node work area): 2k for each of up
 * to BATON_CPU_SAMPLE_MAX_CHUNKS rows at once. Returns BATON_E_INVAL, before
 * writing anything, when some row's temperature or top_p is not finite or
 * top_p is outside (0, 1]; else 0. Rows are shared among the pool's threads
 * (a row's token does not depend on which thread draws it). The candidates'
 * order is that of ops.h; it is found by keeping those whose top 11 bits of
 * p reach the top_k-th's (all when top_k is 0) and radix-sorting those on
 * p's bits, not by a comparison sort of all k: at k = 152064 on one Zen 5
 * core, 1.2 ms a row with top_k 0 and 0.4 ms with top_k 40, where a heapsort
 * of every candidate took 18 ms (bench/sample.c; the same tokens,
 * tests/unit/test_compute_sample.c). */
#define BATON_CPU_SAMPLE_MAX_CHUNKS 8u
struct baton_cpu_sample_entry {
    float p;
    int32_t id;
};
/* 2k * min(m, BATON_CPU_SAMPLE_MAX_CHUNKS), UINT64_MAX when it overflows. */
uint64_t baton_cpu_sample_work_entries(uint64_t k, uint64_t m);
int baton_cpu_sample(struct baton_pool *pool, const float *logits, uint64_t k, uint64_t m,
                     const int32_t *params, int32_t *out, struct baton_cpu_sample_entry *work);

#endif
