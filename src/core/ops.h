/* The op catalogue: ids, arity and the meaning of each op's sources and
 * parameters. Shapes use ggml's convention: ne[0] is the innermost
 * (contiguous) dimension; a matrix with ne = {K, N} has N rows of K elements.
 *
 * Parameters are 8 little-endian u32 words per node; a float parameter is
 * the IEEE-754 binary32 bit pattern.
 *
 * op            sources                                   params             result
 * GET_ROWS      0: table {K,R} (F32)  1: ids {n} I32      -                  F32 {K,n}
 * RMS_NORM      0: x {K,...} F32                          p0 eps (f32)       F32 like x
 * MUL_MAT       0: W {K,N} F32  1: x {K,M,..} F32         -                  F32 {N,M,..}
 * ADD, MUL      0: a F32   1: b F32 (b.ne[i] == a.ne[i] or 1: broadcast) -    F32 like a
 * SCALE         0: x F32                                  p0 s (f32)         F32 like x
 * SILU          0: x F32                                  -                  F32 like x
 * GELU          0: x F32                                  -                  F32 like x
 *               y = x / (1 + exp(-2 sqrt(2/pi) (x + 0.044715 x^3))), which is GELU's
 *               tanh form 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (Hendrycks and
 *               Gimpel 2016; ggml_gelu) written with baton_cpu_expf
 * ROPE          0: x {hd,nh,nt} F32  1: pos {nt} I32      p0 n_dims (u32), p1 freq_base (f32),
 *                                                          p2 mode (0: adjacent pairs,
 *                                                          2: NeoX, (i, i + n_dims/2)),
 *                                                          p3 freq_scale (f32): the angle
 *                                                          times it (linear rope scaling,
 *                                                          ggml's freq_scale); 0: none
 *                                                                             F32 like x
 * ROPE_FREQS    ROPE with a third source 2: factors {n_dims/2} F32 (Llama 3.1's
 *               rope_freqs.weight): pair i's angle is (pos * freq_i) / factors[i],
 *               params as ROPE's                                   F32 like x
 * ATTENTION     0: q {hd,nh,nt}  1: k {hd,nkv,nt}  2: v {hd,nkv,nt}
 *               3: k_cache {hd,n_ctx,nkv} (leaf)  4: v_cache {hd,n_ctx,nkv} (leaf),
 *                  both F32 or both F16 (k, v rounded to binary16 when stored)
 *               5: pos {nt} I32, or {nt,3} I32            p0 scale (f32),    F32 {hd,nh,nt}
 *                                                          p1 score mode: 0 score * p0,
 *                                                          1 score / p0 (llama2.c's form),
 *                                                          p2 window (u32): 0 none, else
 *                                                          token t attends only to cells
 *                                                          > c[t] - p2 (sliding window)
 *               With pos {nt}: stores k, v at cache slots pos[t], then each query
 *               token t attends to slots 0..pos[t] (causal). With {nt,3} (several
 *               sequences, each owning a range of cells): row 0 holds the
 *               positions (ROPE's, unused here), row 1 the cell c[t] token t
 *               writes and row 2 the first cell f[t] of its sequence; token t
 *               attends to cells f[t]..c[t] (0 <= f[t] <= c[t] < n_ctx, else
 *               E_INDEX before any write), so sequences never mix. Query head h
 *               uses kv head h / (nh/nkv) (grouped-query). nh % nkv == 0.
 *               The caches are kv-head-major: the n_ctx slots of one kv
 *               head are contiguous rows of hd, so a query reads one
 *               sequential stream per cache.
 * ARGMAX        0: x {K,M} F32                            -                  I32 {M} (first max)
 * SAMPLE        0: logits {V,M} F32  1: params {6,M} I32  -                  I32 {M}
 *               Row m's token: params[6m..6m+5] = temperature (f32 bits), top_p (f32
 *               bits), top_k, seed low 32 bits, seed high 32 bits, counter (the
 *               token's position). Temperature <= 0: the first maximum (ARGMAX).
 *               Else p_i = expf((l_i - max) / T) (baton_cpu_expf: the same bits on
 *               every host), sorted by p descending then id ascending, the first
 *               top_k kept (0: all), then the shortest prefix whose share (double
 *               sums in that order) reaches top_p (1: all), and u in [0, 1) (24
 *               bits) from splitmix64(seed ^ splitmix64(counter)) picks the first
 *               entry whose running share exceeds u. A pure function of the row's
 *               logits and parameters: the same ids whatever the batch, the split
 *               or the host. A temperature or top_p that is not finite, or top_p
 *               outside (0, 1], is E_INVAL before anything is written.
 * RESHAPE       0: x (contiguous)                         -                  same type, node's ne
 *               (same element count; a view of the source, may not have an out leaf)
 */
#ifndef BATON_CORE_OPS_H
#define BATON_CORE_OPS_H

#include <stdint.h>

enum baton_op {
    BATON_OP_GET_ROWS = 1,
    BATON_OP_RMS_NORM = 2,
    BATON_OP_MUL_MAT = 3,
    BATON_OP_ADD = 4,
    BATON_OP_MUL = 5,
    BATON_OP_SCALE = 6,
    BATON_OP_SILU = 7,
    BATON_OP_ROPE = 8,
    BATON_OP_ATTENTION = 9,
    BATON_OP_ARGMAX = 10,
    BATON_OP_RESHAPE = 11,
    BATON_OP_SAMPLE = 12,
    BATON_OP_ROPE_FREQS = 13,
    BATON_OP_GELU = 14,
    BATON_OP_COUNT = 15 /* ids are 1..BATON_OP_COUNT-1 */
};

#define BATON_MAX_SRC 6
#define BATON_N_PARAMS 8
#define BATON_SRC_NONE 0xFFFFFFFFu /* unused source slot / no out leaf */

/* Returns the op's number of sources (1..BATON_MAX_SRC), or 0 for an unknown id. */
uint32_t baton_op_arity(uint32_t op);

/* Returns the op's name ("MUL_MAT"), or "?" for an unknown id. */
const char *baton_op_name(uint32_t op);

#endif
