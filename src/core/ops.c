/* Op catalogue: arity and names (semantics in ops.h). */
#include "core/ops.h"

struct op_entry {
    uint32_t arity;
    const char *name;
};

static const struct op_entry op_table[BATON_OP_COUNT] = {
    [BATON_OP_GET_ROWS] = {2, "GET_ROWS"},   [BATON_OP_RMS_NORM] = {1, "RMS_NORM"},
    [BATON_OP_MUL_MAT] = {2, "MUL_MAT"},     [BATON_OP_ADD] = {2, "ADD"},
    [BATON_OP_MUL] = {2, "MUL"},             [BATON_OP_SCALE] = {1, "SCALE"},
    [BATON_OP_SILU] = {1, "SILU"},           [BATON_OP_ROPE] = {2, "ROPE"},
    [BATON_OP_ATTENTION] = {6, "ATTENTION"}, [BATON_OP_ARGMAX] = {1, "ARGMAX"},
    [BATON_OP_SAMPLE] = {2, "SAMPLE"},     [BATON_OP_ROPE_FREQS] = {3, "ROPE_FREQS"},
    [BATON_OP_RESHAPE] = {1, "RESHAPE"},     [BATON_OP_GELU] = {1, "GELU"},
};

uint32_t baton_op_arity(uint32_t op)
{
    if (op == 0 || op >= BATON_OP_COUNT)
        return 0;
    return op_table[op].arity;
}

const char *baton_op_name(uint32_t op)
{
    if (op == 0 || op >= BATON_OP_COUNT)
        return "?";
    return op_table[op].name;
}
