/* Deterministic K-quant test data, shared by tests/reference/kq_ref.c (which
 * asks llama.cpp's ggml what the data mean) and tests/unit/
 * test_reference_kquant.c (which asks baton), so that both see the same
 * bytes without committing them.
 *
 * PRNG: splitmix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number
 * generators", OOPSLA 2014; the constants of Vigna's public-domain
 * splitmix64.c): state += 0x9e3779b97f4a7c15, then the output mix
 *   z = (z ^ z >> 30) * 0xbf58476d1ce4e5b9; z = (z ^ z >> 27) *
 *   0x94d049bb133111eb; z ^ z >> 31.
 *
 * Super-blocks (kq_gen_blocks): for type t (ggml / baton ids 10..14), seed
 * KQ_GEN_SEED + t, every byte of the n super-blocks is the low byte of one
 * splitmix64 output, in byte order; then each binary16 d (and dmin) is
 * replaced, in block order, d before dmin, by kq_gen_half(): sign +, an
 * exponent giving 2^-6, 2^-5 or 2^-4 and a random 10-bit mantissa (so
 * 2^-6 <= d < 2^-3). Every other byte (scales, mins, quants, high bits)
 * stays random: all sub-block scales, signs and quant values occur.
 *
 * Activations (kq_gen_x): vector v (0..KQ_GEN_NX-1) of k floats, seed
 * KQ_GEN_SEED + 100 + v; element i = s * (2 u - 1), u = (next >> 40) *
 * 2^-24 in [0, 1), s = 2^(i / 256 % 5 - 2): each super-block of x has its
 * own magnitude, 1/4 .. 4, so the per-super-block activation scales differ.
 *
 * Q5_0 / Q5_1 blocks (kq_gen_q5_blocks): for type t (6: Q5_0, 22 bytes per
 * 32 elements; 7: Q5_1, 24 bytes), seed KQ_GEN_SEED + t, KQ_GEN_K / 32
 * blocks (one row of KQ_GEN_K) of random bytes as above; then each block's
 * binary16 d, in block order, by kq_gen_half(), and for Q5_1 its m (after
 * d) by kq_gen_half() with the sign bit of the next output's bit 0 (mins of
 * both signs).
 *
 * IQ4_NL / IQ4_XS blocks (kq_gen_iq4_blocks): for type t (20: IQ4_NL, 18
 * bytes per 32 elements; 23: IQ4_XS, 136 bytes per 256), seed KQ_GEN_SEED
 * + t, one row of KQ_GEN_K of random bytes as above; then each block's
 * binary16 d (offset 0), in block order, by kq_gen_half(). Every nibble
 * (grid index) and every 6-bit IQ4_XS sub-block scale occurs.
 *
 * Header-only, C11, no allocation. */
#ifndef BATON_TESTS_REFERENCE_KQ_GEN_H
#define BATON_TESTS_REFERENCE_KQ_GEN_H

#include <stddef.h>
#include <stdint.h>

#define KQ_GEN_SEED 0x6b7175616e747321ull /* "kquants!" */
#define KQ_GEN_NB 4u  /* super-blocks per type: one row of k = 1024 */
#define KQ_GEN_K (KQ_GEN_NB * 256u)
#define KQ_GEN_NX 3u  /* activation vectors */
#define KQ_GEN_TYPE_FIRST 10u /* Q2_K */
#define KQ_GEN_TYPE_LAST 14u  /* Q6_K */

static inline uint64_t kq_gen_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Bytes per super-block of type t (10..14), 0 for any other t. */
static inline size_t kq_gen_block_bytes(uint32_t t)
{
    static const size_t bytes[5] = {84, 110, 144, 176, 210};

    return t >= KQ_GEN_TYPE_FIRST && t <= KQ_GEN_TYPE_LAST ? bytes[t - KQ_GEN_TYPE_FIRST] : 0;
}

/* binary16 bits of a value in [2^-6, 2^-3): biased exponent 9..11. */
static inline uint16_t kq_gen_half(uint64_t *state)
{
    const uint64_t r = kq_gen_next(state);

    return (uint16_t)(((9u + (uint32_t)(r % 3u)) << 10) | (uint32_t)((r >> 8) & 0x3ffu));
}

static inline void kq_gen_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v & 0xffu);
    p[1] = (uint8_t)(v >> 8);
}

/* Fills out (n * kq_gen_block_bytes(t) bytes) with n super-blocks of type
 * t as described above. Returns 0, or -1 for a t outside 10..14. */
static inline int kq_gen_blocks(uint32_t t, uint8_t *out, size_t n)
{
    const size_t bb = kq_gen_block_bytes(t);
    uint64_t state = KQ_GEN_SEED + t;
    size_t d_off, dmin_off; /* dmin_off == bb: none */

    if (bb == 0)
        return -1;
    for (size_t i = 0; i < n * bb; i++)
        out[i] = (uint8_t)(kq_gen_next(&state) & 0xffu);
    switch (t) {
    case 10: d_off = 80; dmin_off = 82; break;   /* Q2_K */
    case 11: d_off = 108; dmin_off = bb; break;  /* Q3_K */
    case 12: /* Q4_K */
    case 13: d_off = 0; dmin_off = 2; break;     /* Q5_K */
    default: d_off = 208; dmin_off = bb; break;  /* Q6_K */
    }
    for (size_t b = 0; b < n; b++) {
        kq_gen_put16(out + b * bb + d_off, kq_gen_half(&state));
        if (dmin_off < bb)
            kq_gen_put16(out + b * bb + dmin_off, kq_gen_half(&state));
    }
    return 0;
}

/* Bytes per block of Q5_0 (6) / Q5_1 (7), 0 for any other t. */
static inline size_t kq_gen_q5_block_bytes(uint32_t t)
{
    return t == 6u ? 22u : t == 7u ? 24u : 0u;
}

#define KQ_GEN_Q5_NB (KQ_GEN_K / 32u) /* Q5 blocks of one row */

/* Fills out (KQ_GEN_Q5_NB * kq_gen_q5_block_bytes(t) bytes) with the Q5
 * blocks of type t described above. Returns 0, or -1 for a t not 6 or 7. */
static inline int kq_gen_q5_blocks(uint32_t t, uint8_t *out)
{
    const size_t bb = kq_gen_q5_block_bytes(t);
    uint64_t state = KQ_GEN_SEED + t;

    if (bb == 0)
        return -1;
    for (size_t i = 0; i < KQ_GEN_Q5_NB * bb; i++)
        out[i] = (uint8_t)(kq_gen_next(&state) & 0xffu);
    for (size_t b = 0; b < KQ_GEN_Q5_NB; b++) {
        kq_gen_put16(out + b * bb, kq_gen_half(&state));
        if (t == 7u) {
            const uint16_t m = kq_gen_half(&state);

            kq_gen_put16(out + b * bb + 2, (uint16_t)(m | (kq_gen_next(&state) & 1u) << 15));
        }
    }
    return 0;
}

/* Bytes per block of IQ4_NL (20) / IQ4_XS (23), 0 for any other t. */
static inline size_t kq_gen_iq4_block_bytes(uint32_t t)
{
    return t == 20u ? 18u : t == 23u ? 136u : 0u;
}

/* Blocks of IQ4_NL (20) / IQ4_XS (23) in one row of KQ_GEN_K, 0 otherwise. */
static inline size_t kq_gen_iq4_nb(uint32_t t)
{
    return t == 20u ? KQ_GEN_K / 32u : t == 23u ? KQ_GEN_NB : 0u;
}

/* Fills out (kq_gen_iq4_nb(t) * kq_gen_iq4_block_bytes(t) bytes) with the
 * IQ4 blocks of type t described above. Returns 0, or -1 for a t not 20
 * or 23. */
static inline int kq_gen_iq4_blocks(uint32_t t, uint8_t *out)
{
    const size_t bb = kq_gen_iq4_block_bytes(t), nb = kq_gen_iq4_nb(t);
    uint64_t state = KQ_GEN_SEED + t;

    if (bb == 0)
        return -1;
    for (size_t i = 0; i < nb * bb; i++)
        out[i] = (uint8_t)(kq_gen_next(&state) & 0xffu);
    for (size_t b = 0; b < nb; b++)
        kq_gen_put16(out + b * bb, kq_gen_half(&state));
    return 0;
}

/* Fills x[0..k) with activation vector v as described above. */
static inline void kq_gen_x(uint32_t v, float *x, size_t k)
{
    uint64_t state = KQ_GEN_SEED + 100u + v;

    for (size_t i = 0; i < k; i++) {
        const float u = (float)(kq_gen_next(&state) >> 40) * 0x1p-24f;
        const int e = (int)(i / 256u % 5u) - 2;
        const float s = e < 0 ? (e == -2 ? 0.25f : 0.5f) : (float)(1u << e);

        x[i] = s * (2.0f * u - 1.0f);
    }
}

#endif
