/* Weight formats of GGUF / ggml: IEEE binary16 conversion and the Q8_0,
 * Q4_0, Q5_0 and Q5_1 block quantizers, for `baton quantize`, `baton gen-model` and the CPU
 * kernels (GET_ROWS of a quantized table, tests).
 *
 * Block layouts (ggml's ggml-common.h, block_q8_0, block_q4_0, block_q5_0
 * and block_q5_1; every
 * multi-byte field little-endian, blocks packed with no padding):
 *
 *   Q8_0, 34 bytes per 32 elements: u16 d (binary16 scale), then int8 q[32];
 *         element j = d * q[j].
 *   Q4_0, 18 bytes per 32 elements: u16 d (binary16 scale), then 16 bytes qs;
 *         element j     = d * ((qs[j] & 0x0F) - 8)   for j in 0..15,
 *         element j + 16 = d * ((qs[j] >> 4) - 8)    for j in 0..15.
 *
 *   Q5_0, 22 bytes per 32 elements: u16 d, then qh (4 bytes, read as one
 *         little-endian u32), then 16 bytes qs; with h(e) = bit e of qh:
 *         element j      = d * ((qs[j] & 0x0F | h(j) << 4) - 16)       j < 16,
 *         element j + 16 = d * ((qs[j] >> 4 | h(j + 16) << 4) - 16)    j < 16.
 *   Q5_1, 24 bytes per 32 elements: u16 d, u16 m (binary16 min), then qh and
 *         qs as Q5_0; with q the same 5-bit value (0..31, no -16):
 *         element = d * q + m (the product rounded, then the sum).
 *
 * A row of k elements is k/32 consecutive blocks (k must be a multiple of
 * 32; BATON_E_SHAPE otherwise). Quantizers follow ggml's reference
 * quantizers (quantize_row_q8_0_ref, quantize_row_q4_0_ref,
 * quantize_row_q5_0_ref, quantize_row_q5_1_ref in ggml-quants.c) step for
 * step, written anew here, so files we write hold the values llama.cpp
 * would write (without an importance matrix):
 *
 *   Q8_0: amax = max |x|, d = amax / 127, q = roundf(x / d) (x * (1/d),
 *         halfway cases away from zero), stored d = fp16(d).
 *   Q4_0: m = the element of largest magnitude (the first one on a tie),
 *         d = m / -8, q = min(15, (int)(x * (1/d) + 8.5)) (truncation),
 *         stored d = fp16(d).
 *   Q5_0: as Q4_0 with 16 levels on each side: d = m / -16, q = min(31,
 *         (int)(x * (1/d) + 16.5)) (quantize_row_q5_0_ref).
 *   Q5_1: lo = min x, hi = max x, d = (hi - lo) / 31, q = (int)((x - lo) *
 *         (1/d) + 0.5) (truncation, at most 31), stored d = fp16(d), m =
 *         fp16(lo) (quantize_row_q5_1_ref).
 *
 * Error bounds (per block, x' = the dequantized value, d the unrounded
 * scale above, D = fp16(d) the stored one):
 *   Q8_0: |x - x'| <= |d|/2 + 127 |d - D|, plus float rounding of the
 *         products (relative 2^-24). With D = d this is d/2 = amax/254.
 *   Q4_0: |x - x'| <= |d|/2 + 8 |d - D| for elements with x/d <= 7.5;
 *         elements with x/d in (7.5, 8] (the largest magnitude of the sign
 *         opposite to m) are clamped to q = 15 and have |x - x'| <= |d| +
 *         8 |d - D|. |d - D| <= 2^-11 |d| for d in binary16's normal range.
 *   Q5_0: as Q4_0 with 16 for 8 and 15.5 for 7.5: |x - x'| <= |d|/2 +
 *         16 |d - D| (|d| + 16 |d - D| for the clamped elements).
 *   Q5_1: |x - x'| <= d/2 + 31 |d - D| + |lo - M| (M = fp16(lo) the stored
 *         min).
 */
/* K-quants (ggml-common.h's block_q2_K .. block_q6_K; llama.cpp's k-quants,
 * PR 1684): a super-block of QK_K = 256 elements in sub-blocks of 16 or 32,
 * each sub-block with a small integer scale (and for Q2_K, Q4_K, Q5_K a
 * small integer min) that multiplies the super-block's binary16 d (dmin).
 * Byte offsets inside one super-block; e is the element index 0..255, and
 * h = e / 128, g = (e % 128) / 32, l = e % 32, c = e / 64, u = e % 64:
 *
 *   Q2_K, 84 bytes: scales[16] @0 (low nibble: scale, high nibble: min of
 *         sub-block j of 16), qs[64] @16, u16 d @80, u16 dmin @82.
 *         sub-block j = e / 16; q = (qs[32h + l] >> 2g) & 3;
 *         element = (d * (scales[j] & 15)) * q - dmin * (scales[j] >> 4).
 *   Q3_K, 110 bytes: hmask[32] @0, qs[64] @32, scales[12] @96, u16 d @108.
 *         sub-block j = e / 16 with the 6-bit scale
 *         s_j = lo | hi << 4, lo = j < 8 ? scales[j] & 15 : scales[j - 8] >> 4,
 *         hi = (scales[8 + j % 4] >> (2 (j / 4))) & 3;
 *         q = ((qs[32h + l] >> 2g) & 3) - (hmask[l] bit (4h + g) set ? 0 : 4)
 *         (-4..3); element = (d * (s_j - 32)) * q.
 *   Q4_K, 144 bytes: u16 d @0, u16 dmin @2, scales[12] @4, qs[128] @16.
 *         sub-block j = e / 32 with 6-bit scale sc_j and min m_j from
 *         scales (S = scales): j < 4: sc = S[j] & 63, m = S[j + 4] & 63;
 *         j >= 4: sc = (S[j + 4] & 15) | (S[j - 4] >> 6) << 4,
 *         m = (S[j + 4] >> 4) | (S[j] >> 6) << 4;
 *         q = u < 32 ? qs[32c + u] & 15 : qs[32c + u - 32] >> 4;
 *         element = (d * sc_j) * q - dmin * m_j.
 *   Q5_K, 176 bytes: u16 d @0, u16 dmin @2, scales[12] @4 (as Q4_K),
 *         qh[32] @16, qs[128] @48; sub-block j = e / 32;
 *         q = Q4_K's nibble + 16 * (qh[u % 32] bit j) (0..31);
 *         element = (d * sc_j) * q - dmin * m_j.
 *   Q6_K, 210 bytes: ql[128] @0, qh[64] @128, int8 scales[16] @192,
 *         u16 d @208; sub-block j = e / 16; with v = e % 128, t = v / 32,
 *         i = v % 32: b = ql[64h + 32 (t % 2) + i], lo4 = t < 2 ? b & 15 :
 *         b >> 4, hi2 = (qh[32h + i] >> 2t) & 3, q = (lo4 | hi2 << 4) - 32
 *         (-32..31);
 *         element = (d * scales[j]) * q.
 *
 * Dequantization evaluates each element with exactly these binary32
 * operations in this order (ggml's dequantize_row_q*_K), so the floats equal
 * llama.cpp's bit for bit. A row of k elements is k / 256 super-blocks (k a
 * multiple of 256, BATON_E_SHAPE otherwise). (A llama.cpp build that lets
 * the compiler contract `a * q - b` into one FMA may differ in the last bit;
 * tests/reference says what was measured.)
 */
/* IQ4_NL and IQ4_XS (ggml-common.h's block_iq4_nl and block_iq4_xs;
 * llama.cpp PRs 5590 and 5747): 4-bit indices into one fixed grid of 16
 * int8 levels, spaced more closely near zero, where most weights lie:
 *
 *   G = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69,
 *        89, 113} (ggml's kvalues_iq4nl; baton_iq4_grid).
 *
 *   IQ4_NL, 18 bytes per 32 elements: u16 d, then 16 bytes qs;
 *         element j      = d * G[qs[j] & 15]    j < 16,
 *         element j + 16 = d * G[qs[j] >> 4]    j < 16.
 *   IQ4_XS, 136 bytes per 256 elements: u16 d @0, u16 scales_h @2,
 *         scales_l[4] @4, qs[128] @8; sub-block j = e / 32 (0..7) has the
 *         6-bit scale ls_j = ((scales_l[j / 2] >> 4 (j % 2)) & 15) |
 *         ((scales_h >> 2j) & 3) << 4 and its 16 bytes at qs + 16j laid
 *         out as one IQ4_NL block's:
 *         element 32j + i = (d * (ls_j - 32)) * G[nibble i of sub-block j].
 *
 * Dequantization evaluates each element with exactly these binary32
 * operations (ggml's dequantize_row_iq4_nl / _xs: IQ4_XS's d * (ls - 32)
 * rounded first), so the floats equal llama.cpp's. The quantizers are
 * ours (quant.c describes the search and its error).
 */
#ifndef BATON_COMPUTE_CPU_QUANT_H
#define BATON_COMPUTE_CPU_QUANT_H

#include <stdint.h>

#define BATON_QK 32u /* elements per Q8_0 / Q4_0 block */
#define BATON_Q8_0_BLOCK_BYTES 34u
#define BATON_Q4_0_BLOCK_BYTES 18u
#define BATON_Q5_0_BLOCK_BYTES 22u
#define BATON_Q5_1_BLOCK_BYTES 24u
#define BATON_QK_K 256u /* elements per K-quant super-block */
#define BATON_Q2_K_BLOCK_BYTES 84u
#define BATON_Q3_K_BLOCK_BYTES 110u
#define BATON_Q4_K_BLOCK_BYTES 144u
#define BATON_Q5_K_BLOCK_BYTES 176u
#define BATON_Q6_K_BLOCK_BYTES 210u
#define BATON_IQ4_NL_BLOCK_BYTES 18u  /* per 32 elements */
#define BATON_IQ4_XS_BLOCK_BYTES 136u /* per 256 elements */

/* The 16 levels G of IQ4_NL and IQ4_XS, ascending (above). */
extern const int8_t baton_iq4_grid[16];

/* binary16 bits -> binary32, exact for every input: normals, subnormals,
 * zeros, infinities; a NaN stays NaN with its payload in the top mantissa
 * bits and the quiet bit set (as the F16C instruction vcvtph2ps does). */
float baton_fp16_to_fp32(uint16_t h);

/* binary32 -> binary16 bits, rounded to nearest, ties to even (as
 * vcvtps2ph with imm 0). Magnitudes from 65520 up become infinity, values
 * below 2^-25 become zero (subnormal results are rounded, not flushed), a
 * NaN becomes a quiet NaN keeping the top 9 payload bits. */
uint16_t baton_fp32_to_fp16(float f);

/* bfloat16 bits (the high half of a binary32) -> binary32: the bits
 * shifted up 16, exact for every input (a NaN keeps its payload, as the
 * SIMD kernels' shift does). */
float baton_bf16_to_fp32(uint16_t h);

/* binary32 -> bfloat16 bits, rounded to nearest, ties to even (the low 16
 * bits dropped after adding 0x7FFF plus the kept part's lowest bit; the
 * rounding every BF16 converter uses, e.g. ggml's). Values that round past
 * the largest finite bfloat16 become infinity; subnormals are rounded, not
 * flushed; a NaN becomes a quiet NaN keeping its top 7 payload bits. */
uint16_t baton_fp32_to_bf16(float f);

/* n bfloat16 values (little-endian, src may be unaligned) -> floats, and
 * n floats -> bfloat16 values with baton_fp32_to_bf16's rounding. */
void baton_bf16_to_fp32_row(const void *src, float *dst, uint64_t n);
void baton_fp32_to_bf16_row(const float *src, void *dst, uint64_t n);

/* n binary16 values (little-endian, src may be unaligned) -> floats. */
void baton_fp16_to_fp32_row(const void *src, float *dst, uint64_t n);

/* n floats -> binary16 values (little-endian, dst may be unaligned), with
 * baton_fp32_to_fp16's rounding. Never fails (large values become inf). */
void baton_fp32_to_fp16_row(const float *src, void *dst, uint64_t n);

/* Quantizes k floats (k a multiple of 32) into k/32 Q8_0 blocks at y
 * (k/32 * 34 bytes, caller-owned, may be unaligned). Returns 0,
 * BATON_E_SHAPE if k % 32 != 0, or BATON_E_INVAL if some x is not finite or
 * a block's scale does not fit binary16 (max|x| > 65504 * 127); on error
 * nothing is written. */
int baton_quantize_row_q8_0(const float *x, void *y, uint64_t k);

/* Quantizes k floats (k a multiple of 32) into k/32 Q4_0 blocks at y
 * (k/32 * 18 bytes). Returns 0, BATON_E_SHAPE (k % 32 != 0) or
 * BATON_E_INVAL (a non-finite x, or max|x| > 65504 * 8); on error nothing
 * is written. */
int baton_quantize_row_q4_0(const float *x, void *y, uint64_t k);

/* Quantizes k floats (k a multiple of 32) into k/32 Q5_0 blocks at y
 * (k/32 * 22 bytes) or Q5_1 blocks (k/32 * 24 bytes), by ggml's reference
 * rules above. Returns 0, BATON_E_SHAPE (k % 32 != 0) or BATON_E_INVAL (a
 * non-finite x; Q5_0: max|x| > 65504 * 16; Q5_1: a scale or min that does
 * not fit binary16); on error nothing is written. */
int baton_quantize_row_q5_0(const float *x, void *y, uint64_t k);
int baton_quantize_row_q5_1(const float *x, void *y, uint64_t k);

/* Expands k/32 blocks at x into k floats at y (each value d * q computed
 * as one float product, exactly as the MUL_MAT kernels read it; Q5_1 d * q
 * + m, product then sum, as ggml's dequantize_row_q5_1, so the floats equal
 * llama.cpp's bit for bit). Returns 0 or BATON_E_SHAPE if k % 32 != 0. */
int baton_dequantize_row_q8_0(const void *x, float *y, uint64_t k);
int baton_dequantize_row_q4_0(const void *x, float *y, uint64_t k);
int baton_dequantize_row_q5_0(const void *x, float *y, uint64_t k);
int baton_dequantize_row_q5_1(const void *x, float *y, uint64_t k);

/* Quantizes k floats (k a multiple of 256) into k/256 super-blocks of the
 * K-quant type (BATON_TYPE_Q2_K .. BATON_TYPE_Q6_K) at y (k/256 * block
 * bytes, may be unaligned). baton's own quantizer (the format is ggml's; the
 * choice of scales is ours, described in quant.c with its error). Returns 0,
 * BATON_E_SHAPE (k % 256 != 0), BATON_E_INVAL (a non-finite x, or a scale
 * that does not fit binary16) or BATON_E_UNSUPPORTED (not a K-quant type);
 * on error nothing is written. */
int baton_quantize_row_k(uint32_t type, const float *x, void *y, uint64_t k);

/* Expands k/256 super-blocks of a K-quant type at x into k floats at y, each
 * element by the operations above. Returns 0, BATON_E_SHAPE (k % 256 != 0)
 * or BATON_E_UNSUPPORTED (not a K-quant type). */
int baton_dequantize_row_k(uint32_t type, const void *x, float *y, uint64_t k);

/* Quantizes k floats into IQ4_NL blocks (k a multiple of 32; k/32 * 18
 * bytes at y) or IQ4_XS super-blocks (k a multiple of 256; k/256 * 136
 * bytes), by baton's own search (quant.c). Returns 0, BATON_E_SHAPE,
 * BATON_E_INVAL (a non-finite x, or a scale that does not fit binary16);
 * on error nothing is written. */
int baton_quantize_row_iq4_nl(const float *x, void *y, uint64_t k);
int baton_quantize_row_iq4_xs(const float *x, void *y, uint64_t k);

/* Expands IQ4_NL blocks (k % 32 == 0) or IQ4_XS super-blocks (k % 256 ==
 * 0) at x into k floats at y by the operations above. Returns 0 or
 * BATON_E_SHAPE. */
int baton_dequantize_row_iq4_nl(const void *x, float *y, uint64_t k);
int baton_dequantize_row_iq4_xs(const void *x, float *y, uint64_t k);

/* Row of k floats -> type (F32: copy; F16; BF16; Q8_0; Q4_0; Q5_0; Q5_1;
 * Q2_K..Q6_K; IQ4_NL; IQ4_XS) at dst, which holds baton_row_bytes(type, k) bytes. Returns
 * 0, BATON_E_SHAPE (k not a multiple of the block), BATON_E_INVAL (as the
 * quantizers) or BATON_E_UNSUPPORTED for any other type. */
int baton_quantize_row(uint32_t type, const float *src, void *dst, uint64_t k);

/* Row of k elements of type (F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q5_1,
 * Q2_K..Q6_K, IQ4_NL, IQ4_XS) -> k floats. Returns 0, BATON_E_SHAPE or BATON_E_UNSUPPORTED. */
int baton_dequantize_row(uint32_t type, const void *src, float *dst, uint64_t k);

/* Bytes of a row of k elements of type (k a multiple of its block), or 0
 * for a type this file does not convert, a k that is not a multiple, or a
 * size that does not fit 64 bits. */
uint64_t baton_row_bytes(uint32_t type, uint64_t k);

#endif
