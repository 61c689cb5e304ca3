/* Tensor element types: ids, block sizes and bytes per block.
 *
 * Type ids are ggml's (GGUF "ggml_type"), so a GGUF tensor's type goes on the
 * wire unchanged. Only the ids in the table are accepted; retired ids (4, 5:
 * Q4_2/Q4_3) and every id we do not know are rejected with BATON_E_TYPE.
 * Block layouts follow ggml's (ggml-common.h): Q8_0 = f16 scale + 32 x int8
 * (34 bytes), Q4_0 = f16 scale + 16 bytes of nibbles (18 bytes), Q5_0 =
 * f16 scale + 4 bytes of fifth bits + 16 bytes of nibbles (22 bytes), Q5_1 =
 * f16 scale + f16 min + the same 20 bytes (24 bytes), and the
 * K-quants Q2_K..Q6_K (super-blocks of 256 elements; compute/cpu/quant.h
 * gives their byte layouts); IQ4_NL = f16 scale + 16 bytes of indices into
 * a fixed grid of 16 int8 values (18 bytes per 32), IQ4_XS = super-blocks of
 * 256 with 6-bit sub-block scales and the same grid (136 bytes); BF16 = 2
 * bytes per element, the high half of the binary32 bits.
 *
 * This file is pure (no libc, no I/O) and is part of the proven set (verify/).
 */
#ifndef BATON_CORE_TYPES_H
#define BATON_CORE_TYPES_H

#include <stdint.h>

enum baton_type {
    BATON_TYPE_F32 = 0,
    BATON_TYPE_F16 = 1,
    BATON_TYPE_Q4_0 = 2,
    BATON_TYPE_Q5_0 = 6, /* 22 bytes per 32 (compute/cpu/quant.h) */
    BATON_TYPE_Q5_1 = 7, /* 24 bytes per 32 */
    BATON_TYPE_Q8_0 = 8,
    /* K-quants: super-blocks of 256 elements (compute/cpu/quant.h) */
    BATON_TYPE_Q2_K = 10, /* 84 bytes per 256 */
    BATON_TYPE_Q3_K = 11, /* 110 bytes per 256 */
    BATON_TYPE_Q4_K = 12, /* 144 bytes per 256 */
    BATON_TYPE_Q5_K = 13, /* 176 bytes per 256 */
    BATON_TYPE_Q6_K = 14, /* 210 bytes per 256 */
    /* non-linear 4-bit grids (compute/cpu/quant.h) */
    BATON_TYPE_IQ4_NL = 20, /* 18 bytes per 32 */
    BATON_TYPE_IQ4_XS = 23, /* 136 bytes per 256 */
    BATON_TYPE_I32 = 26,
    BATON_TYPE_BF16 = 30, /* bfloat16: the top 16 bits of a binary32 (compute/cpu/quant.h) */
};

#define BATON_TYPE_ID_LIMIT 32u /* every valid id is below this */
#define BATON_MAX_DIMS 4

struct baton_type_info {
    uint32_t block_elems; /* elements per block (1 for scalar types) */
    uint32_t block_bytes; /* bytes per block */
    uint32_t executable;  /* 1 if this build's compute can run it */
    const char *name;     /* "f32", "q8_0", ... */
};

/* Looks up a type id. Returns 0 and fills *block_elems, *block_bytes for a
 * known id, BATON_E_TYPE otherwise. Proven (verify/PROVEN.md). */
int baton_type_block(uint32_t type, uint32_t *block_elems, uint32_t *block_bytes);

/* Returns the table entry of a known type id, or NULL. */
const struct baton_type_info *baton_type_get(uint32_t type);

/* Returns the type's name, or "?" for an unknown id. */
const char *baton_type_name(uint32_t type);

#endif
