/* Tensor type table (ggml type ids and block layouts, see types.h). */
#include "core/types.h"

#include <stddef.h>

#include "baton/status.h"

/*@ requires \valid(block_elems) && \valid(block_bytes);
    requires \separated(block_elems, block_bytes);
    assigns *block_elems, *block_bytes;
    behavior f32:
      assumes type == BATON_TYPE_F32;
      ensures \result == 0 && *block_elems == 1 && *block_bytes == 4;
    behavior f16:
      assumes type == BATON_TYPE_F16;
      ensures \result == 0 && *block_elems == 1 && *block_bytes == 2;
    behavior q4_0:
      assumes type == BATON_TYPE_Q4_0;
      ensures \result == 0 && *block_elems == 32 && *block_bytes == 18;
    behavior q5_0:
      assumes type == BATON_TYPE_Q5_0;
      ensures \result == 0 && *block_elems == 32 && *block_bytes == 22;
    behavior q5_1:
      assumes type == BATON_TYPE_Q5_1;
      ensures \result == 0 && *block_elems == 32 && *block_bytes == 24;
    behavior q8_0:
      assumes type == BATON_TYPE_Q8_0;
      ensures \result == 0 && *block_elems == 32 && *block_bytes == 34;
    behavior q2_k:
      assumes type == BATON_TYPE_Q2_K;
      ensures \result == 0 && *block_elems == 256 && *block_bytes == 84;
    behavior q3_k:
      assumes type == BATON_TYPE_Q3_K;
      ensures \result == 0 && *block_elems == 256 && *block_bytes == 110;
    behavior q4_k:
      assumes type == BATON_TYPE_Q4_K;
      ensures \result == 0 && *block_elems == 256 && *block_bytes == 144;
    behavior q5_k:
      assumes type == BATON_TYPE_Q5_K;
      ensures \result == 0 && *block_elems == 256 && *block_bytes == 176;
    behavior q6_k:
      assumes type == BATON_TYPE_Q6_K;
      ensures \result == 0 && *block_elems == 256 && *block_bytes == 210;
    behavior iq4_nl:
      assumes type == BATON_TYPE_IQ4_NL;
      ensures \result == 0 && *block_elems == 32 && *block_bytes == 18;
    behavior iq4_xs:
      assumes type == BATON_TYPE_IQ4_XS;
      ensures \result == 0 && *block_elems == 256 && *block_bytes == 136;
    behavior i32:
      assumes type == BATON_TYPE_I32;
      ensures \result == 0 && *block_elems == 1 && *block_bytes == 4;
    behavior bf16:
      assumes type == BATON_TYPE_BF16;
      ensures \result == 0 && *block_elems == 1 && *block_bytes == 2;
    behavior unknown:
      assumes type != BATON_TYPE_F32 && type != BATON_TYPE_F16 && type != BATON_TYPE_Q4_0 &&
              type != BATON_TYPE_Q5_0 && type != BATON_TYPE_Q5_1 &&
              type != BATON_TYPE_Q8_0 && type != BATON_TYPE_Q2_K && type != BATON_TYPE_Q3_K &&
              type != BATON_TYPE_Q4_K && type != BATON_TYPE_Q5_K && type != BATON_TYPE_Q6_K &&
              type != BATON_TYPE_IQ4_NL && type != BATON_TYPE_IQ4_XS &&
              type != BATON_TYPE_I32 && type != BATON_TYPE_BF16;
      ensures \result == BATON_E_TYPE;
      ensures *block_elems == \old(*block_elems) && *block_bytes == \old(*block_bytes);
    complete behaviors;
    disjoint behaviors;
*/
int baton_type_block(uint32_t type, uint32_t *block_elems, uint32_t *block_bytes)
{
    switch (type) {
    case BATON_TYPE_F32:
        *block_elems = 1;
        *block_bytes = 4;
        return 0;
    case BATON_TYPE_F16:
        *block_elems = 1;
        *block_bytes = 2;
        return 0;
    case BATON_TYPE_Q4_0:
        *block_elems = 32;
        *block_bytes = 18;
        return 0;
    case BATON_TYPE_Q5_0:
        *block_elems = 32;
        *block_bytes = 22;
        return 0;
    case BATON_TYPE_Q5_1:
        *block_elems = 32;
        *block_bytes = 24;
        return 0;
    case BATON_TYPE_Q8_0:
        *block_elems = 32;
        *block_bytes = 34;
        return 0;
    case BATON_TYPE_Q2_K:
        *block_elems = 256;
        *block_bytes = 84;
        return 0;
    case BATON_TYPE_Q3_K:
        *block_elems = 256;
        *block_bytes = 110;
        return 0;
    case BATON_TYPE_Q4_K:
        *block_elems = 256;
        *block_bytes = 144;
        return 0;
    case BATON_TYPE_Q5_K:
        *block_elems = 256;
        *block_bytes = 176;
        return 0;
    case BATON_TYPE_Q6_K:
        *block_elems = 256;
        *block_bytes = 210;
        return 0;
    case BATON_TYPE_IQ4_NL:
        *block_elems = 32;
        *block_bytes = 18;
        return 0;
    case BATON_TYPE_IQ4_XS:
        *block_elems = 256;
        *block_bytes = 136;
        return 0;
    case BATON_TYPE_I32:
        *block_elems = 1;
        *block_bytes = 4;
        return 0;
    case BATON_TYPE_BF16:
        *block_elems = 1;
        *block_bytes = 2;
        return 0;
    default:
        return BATON_E_TYPE;
    }
}

static const struct baton_type_info type_f32 = {1, 4, 1, "f32"};
/* F16, Q4_0 and Q8_0 run as MUL_MAT weights and GET_ROWS tables
 * (compute/cpu/matmul.h); graph validation rejects them anywhere else. */
static const struct baton_type_info type_f16 = {1, 2, 1, "f16"};
static const struct baton_type_info type_q4_0 = {32, 18, 1, "q4_0"};
static const struct baton_type_info type_q8_0 = {32, 34, 1, "q8_0"};
/* Q5_0 and Q5_1 (blocks of 32 with a fifth bit; compute/cpu/quant.h) as
 * MUL_MAT weights and GET_ROWS tables, like Q4_0. */
static const struct baton_type_info type_q5_0 = {32, 22, 1, "q5_0"};
static const struct baton_type_info type_q5_1 = {32, 24, 1, "q5_1"};
/* K-quant super-blocks (256 elements; compute/cpu/quant.h) as MUL_MAT
 * weights and GET_ROWS tables, like Q4_0 and Q8_0. */
static const struct baton_type_info type_q2_k = {256, 84, 1, "q2_k"};
static const struct baton_type_info type_q3_k = {256, 110, 1, "q3_k"};
static const struct baton_type_info type_q4_k = {256, 144, 1, "q4_k"};
static const struct baton_type_info type_q5_k = {256, 176, 1, "q5_k"};
static const struct baton_type_info type_q6_k = {256, 210, 1, "q6_k"};
/* IQ4_NL and IQ4_XS (indices into a non-linear grid; compute/cpu/quant.h)
 * as MUL_MAT weights and GET_ROWS tables, like Q4_0 and Q4_K. */
static const struct baton_type_info type_iq4_nl = {32, 18, 1, "iq4_nl"};
static const struct baton_type_info type_iq4_xs = {256, 136, 1, "iq4_xs"};
static const struct baton_type_info type_i32 = {1, 4, 1, "i32"};
/* BF16 (the top half of binary32) as MUL_MAT weights and GET_ROWS tables,
 * like F16. */
static const struct baton_type_info type_bf16 = {1, 2, 1, "bf16"};

/*@ assigns \nothing;
    ensures \result == \null || \valid_read(\result);
    behavior known:
      assumes type == BATON_TYPE_F32 || type == BATON_TYPE_F16 || type == BATON_TYPE_Q4_0 ||
              type == BATON_TYPE_Q5_0 || type == BATON_TYPE_Q5_1 ||
              type == BATON_TYPE_Q8_0 || type == BATON_TYPE_Q2_K || type == BATON_TYPE_Q3_K ||
              type == BATON_TYPE_Q4_K || type == BATON_TYPE_Q5_K || type == BATON_TYPE_Q6_K ||
              type == BATON_TYPE_IQ4_NL || type == BATON_TYPE_IQ4_XS ||
              type == BATON_TYPE_I32 || type == BATON_TYPE_BF16;
      ensures \valid_read(\result);
    behavior unknown:
      assumes type != BATON_TYPE_F32 && type != BATON_TYPE_F16 && type != BATON_TYPE_Q4_0 &&
              type != BATON_TYPE_Q5_0 && type != BATON_TYPE_Q5_1 &&
              type != BATON_TYPE_Q8_0 && type != BATON_TYPE_Q2_K && type != BATON_TYPE_Q3_K &&
              type != BATON_TYPE_Q4_K && type != BATON_TYPE_Q5_K && type != BATON_TYPE_Q6_K &&
              type != BATON_TYPE_IQ4_NL && type != BATON_TYPE_IQ4_XS &&
              type != BATON_TYPE_I32 && type != BATON_TYPE_BF16;
      ensures \result == \null;
    complete behaviors;
    disjoint behaviors;
*/
const struct baton_type_info *baton_type_get(uint32_t type)
{
    switch (type) {
    case BATON_TYPE_F32:
        return &type_f32;
    case BATON_TYPE_F16:
        return &type_f16;
    case BATON_TYPE_Q4_0:
        return &type_q4_0;
    case BATON_TYPE_Q5_0:
        return &type_q5_0;
    case BATON_TYPE_Q5_1:
        return &type_q5_1;
    case BATON_TYPE_Q8_0:
        return &type_q8_0;
    case BATON_TYPE_Q2_K:
        return &type_q2_k;
    case BATON_TYPE_Q3_K:
        return &type_q3_k;
    case BATON_TYPE_Q4_K:
        return &type_q4_k;
    case BATON_TYPE_Q5_K:
        return &type_q5_k;
    case BATON_TYPE_Q6_K:
        return &type_q6_k;
    case BATON_TYPE_IQ4_NL:
        return &type_iq4_nl;
    case BATON_TYPE_IQ4_XS:
        return &type_iq4_xs;
    case BATON_TYPE_I32:
        return &type_i32;
    case BATON_TYPE_BF16:
        return &type_bf16;
    default:
        return NULL;
    }
}

/*@ assigns \nothing; */
const char *baton_type_name(uint32_t type)
{
    const struct baton_type_info *ti = baton_type_get(type);
    return ti ? ti->name : "?";
}
