/* Weight formats of GGUF / ggml: IEEE binary16 conversion and the Q8_0 and
 * Q4_0 block quantizers, for `baton quantize`, `baton gen-model` and the CPU
 * kernels (GET_ROWS of a quantized table, tests).
 *
 * Block layouts (ggml's ggml-common.h, block_q8_0 and block_q4_0; every
 * multi-byte field little-endian, blocks packed with no padding):
 *
 *   Q8_0, 34 bytes per 32 elements: u16 d (binary16 scale), then int8 q[32];
 *         element j = d * q[j].
 *   Q4_0, 18 bytes per 32 elements: u16 d (binary16 scale), then 16 bytes qs;
 *         element j     = d * ((qs[j] & 0x0F) - 8)   for j in 0..15,
 *         element j + 16 = d * ((qs[j] >> 4) - 8)    for j in 0..15.
 *
 * A row of k elements is k/32 consecutive blocks (k must be a multiple of
 * 32; BATON_E_SHAPE otherwise). Quantizers follow ggml's reference
 * quantizers (quantize_row_q8_0_ref, quantize_row_q4_0_ref in
 * ggml-quants.c) step for step, written anew here, so files we write hold
 * the values llama.cpp would write:
 *
 *   Q8_0: amax = max |x|, d = amax / 127, q = roundf(x / d) (x * (1/d),
 *         halfway cases away from zero), stored d = fp16(d).
 *   Q4_0: m = the element of largest magnitude (the first one on a tie),
 *         d = m / -8, q = min(15, (int)(x * (1/d) + 8.5)) (truncation),
 *         stored d = fp16(d).
 *
 * Error bounds (per block, x' = the dequantized value, d the unrounded
 * scale above, D = fp16(d) the stored one):
 *   Q8_0: |x - x'| <= |d|/2 + 127 |d - D|, plus float rounding of the
 *         products (relative 2^-24). With D = d this is d/2 = amax/254.
 *   Q4_0: |x - x'| <= |d|/2 + 8 |d - D| for elements with x/d <= 7.5;
 *         elements with x/d in (7.5, 8] (the largest magnitude of the sign
 *         opposite to m) are clamped to q = 15 and have |x - x'| <= |d| +
 *         8 |d - D|. |d - D| <= 2^-11 |d| for d in binary16's normal range.
 */
#ifndef BATON_COMPUTE_CPU_QUANT_H
#define BATON_COMPUTE_CPU_QUANT_H

#include <stdint.h>

#define BATON_QK 32u /* elements per Q8_0 / Q4_0 block */
#define BATON_Q8_0_BLOCK_BYTES 34u
#define BATON_Q4_0_BLOCK_BYTES 18u

/* binary16 bits -> binary32, exact for every input: normals, subnormals,
 * zeros, infinities; a NaN stays NaN with its payload in the top mantissa
 * bits and the quiet bit set (as the F16C instruction vcvtph2ps does). */
float baton_fp16_to_fp32(uint16_t h);

/* binary32 -> binary16 bits, rounded to nearest, ties to even (as
 * vcvtps2ph with imm 0). Magnitudes from 65520 up become infinity, values
 * below 2^-25 become zero (subnormal results are rounded, not flushed), a
 * NaN becomes a quiet NaN keeping the top 9 payload bits. */
uint16_t baton_fp32_to_fp16(float f);

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

/* Expands k/32 blocks at x into k floats at y (each value d * q computed
 * as one float product, exactly as the MUL_MAT kernels read it). Returns 0
 * or BATON_E_SHAPE if k % 32 != 0. */
int baton_dequantize_row_q8_0(const void *x, float *y, uint64_t k);
int baton_dequantize_row_q4_0(const void *x, float *y, uint64_t k);

/* Row of k floats -> type (F32: copy; F16; Q8_0; Q4_0) at dst, which holds
 * baton_row_bytes(type, k) bytes. Returns 0, BATON_E_SHAPE (k not a
 * multiple of the block), BATON_E_INVAL (as the quantizers) or
 * BATON_E_UNSUPPORTED for any other type. */
int baton_quantize_row(uint32_t type, const float *src, void *dst, uint64_t k);

/* Row of k elements of type (F32, F16, Q8_0, Q4_0) -> k floats. Returns 0,
 * BATON_E_SHAPE or BATON_E_UNSUPPORTED. */
int baton_dequantize_row(uint32_t type, const void *src, float *dst, uint64_t k);

/* Bytes of a row of k elements of type (k a multiple of its block), or 0
 * for a type this file does not convert, a k that is not a multiple, or a
 * size that does not fit 64 bits. */
uint64_t baton_row_bytes(uint32_t type, uint64_t k);

#endif
