/* Per-tensor types of the K-quant presets (see quant_preset.h and
 * docs/QUANTIZE.md). */
#include "model/quant_preset.h"

#include <string.h>
#include <strings.h>

#include "core/types.h"

static const struct {
    const char *name;
    int preset;
    uint32_t ftype;
    uint32_t base; /* the type of the matrices no rule names */
} presets[] = {
    {"q2_k", BATON_PRESET_Q2_K, 10, BATON_TYPE_Q2_K},
    {"q3_k_m", BATON_PRESET_Q3_K_M, 12, BATON_TYPE_Q3_K},
    {"q4_k_m", BATON_PRESET_Q4_K_M, 15, BATON_TYPE_Q4_K},
    {"q5_k_m", BATON_PRESET_Q5_K_M, 17, BATON_TYPE_Q5_K},
    {"q6_k", BATON_PRESET_Q6_K, 18, BATON_TYPE_Q6_K},
    {"iq4_nl", BATON_PRESET_IQ4_NL, 25, BATON_TYPE_IQ4_NL},
    {"iq4_xs", BATON_PRESET_IQ4_XS, 30, BATON_TYPE_IQ4_XS},
};
#define N_PRESETS (sizeof presets / sizeof presets[0])

int baton_quant_preset_parse(const char *name, int *preset)
{
    for (size_t i = 0; i < N_PRESETS; i++)
        if (strcasecmp(name, presets[i].name) == 0) {
            *preset = presets[i].preset;
            return 0;
        }
    return -1;
}

const char *baton_quant_preset_name(int preset)
{
    for (size_t i = 0; i < N_PRESETS; i++)
        if (presets[i].preset == preset)
            return presets[i].name;
    return "?";
}

uint32_t baton_quant_preset_ftype(int preset)
{
    for (size_t i = 0; i < N_PRESETS; i++)
        if (presets[i].preset == preset)
            return presets[i].ftype;
    return 0;
}

int baton_quant_type_ftype(uint32_t type, uint32_t *ftype)
{
    static const struct {
        uint32_t type, ftype;
    } ftypes[] = {
        {BATON_TYPE_F32, 0},  {BATON_TYPE_F16, 1},  {BATON_TYPE_Q4_0, 2},
        {BATON_TYPE_Q8_0, 7}, {BATON_TYPE_Q5_0, 8}, {BATON_TYPE_Q5_1, 9},
        {BATON_TYPE_BF16, 32},
    };

    for (size_t i = 0; i < sizeof ftypes / sizeof ftypes[0]; i++)
        if (ftypes[i].type == type) {
            *ftype = ftypes[i].ftype;
            return 0;
        }
    return -1;
}

static uint32_t base_type(int preset)
{
    for (size_t i = 0; i < N_PRESETS; i++)
        if (presets[i].preset == preset)
            return presets[i].base;
    return BATON_TYPE_F16;
}

static int ends_with(const char *s, const char *suffix)
{
    const size_t n = strlen(s), m = strlen(suffix);

    return n >= m && strcmp(s + n - m, suffix) == 0;
}

int baton_quant_preset_applies(const char *name, uint32_t n_dims)
{
    return n_dims >= 2 && ends_with(name, "weight") && strstr(name, "_norm.weight") == NULL &&
           strstr(name, "ffn_gate_inp.weight") == NULL;
}

uint32_t baton_quant_fallback(uint32_t type, uint64_t ne0)
{
    uint32_t block_elems, block_bytes, r = type;

    if (baton_type_block(type, &block_elems, &block_bytes) != 0 || ne0 % block_elems == 0)
        return type;
    switch (type) {
    case BATON_TYPE_Q2_K:
    case BATON_TYPE_Q3_K:
        r = BATON_TYPE_Q4_0;
        break;
    case BATON_TYPE_IQ4_XS:
        r = BATON_TYPE_IQ4_NL;
        break;
    case BATON_TYPE_IQ4_NL: /* a block of 32 already: only F16 is left */
        return BATON_TYPE_F16;
    case BATON_TYPE_Q4_K:
        r = BATON_TYPE_Q5_0;
        break;
    case BATON_TYPE_Q5_K:
        r = BATON_TYPE_Q5_1;
        break;
    default: /* Q6_K (and the full-precision types, whose block is 1) */
        r = BATON_TYPE_Q8_0;
        break;
    }
    return ne0 % 32 == 0 ? r : BATON_TYPE_F16;
}

int baton_quant_preset_is_attn_v(const char *name)
{
    /* llama.cpp treats the fused QKV and MLA's kv_b as value projections too */
    return strstr(name, "attn_v.weight") != NULL || strstr(name, "attn_qkv.weight") != NULL ||
           strstr(name, "attn_kv_b.weight") != NULL;
}

int baton_quant_preset_is_ffn_down(const char *name)
{
    return strstr(name, "ffn_down") != NULL && !baton_quant_preset_is_attn_v(name) &&
           strstr(name, "attn_") == NULL && strstr(name, "ffn_up") == NULL &&
           strstr(name, "ffn_gate") == NULL;
}

/* llama.cpp's use_more_bits: the first and last eighth of the layers and
 * every third one in between. */
static int more_bits(uint32_t i, uint32_t n)
{
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

uint32_t baton_quant_preset_type(const struct baton_quant_plan *p, const char *name, uint64_t ne0)
{
    const int preset = p->preset;
    uint32_t t = base_type(preset);

    if (strcmp(name, "output.weight") == 0 ||
        (!p->has_output && strcmp(name, "token_embd.weight") == 0)) {
        /* the output head: Q6_K, Q8_0 when its rows do not fit 256 */
        t = ne0 % 256 == 0 ? BATON_TYPE_Q6_K : BATON_TYPE_Q8_0;
    } else if (strcmp(name, "token_embd.weight") == 0) {
        /* the base type */
    } else if (baton_quant_preset_is_attn_v(name)) {
        const uint32_t i = p->attn_v_rank, n = p->n_attn_v;

        if (preset == BATON_PRESET_Q2_K)
            t = p->n_gqa >= 4 ? BATON_TYPE_Q4_K : BATON_TYPE_Q3_K;
        else if (preset == BATON_PRESET_Q3_K_M)
            t = i < 2 ? BATON_TYPE_Q5_K : BATON_TYPE_Q4_K;
        else if ((preset == BATON_PRESET_IQ4_NL || preset == BATON_PRESET_IQ4_XS) &&
                 p->n_gqa >= 4)
            t = BATON_TYPE_Q5_K;
        else if ((preset == BATON_PRESET_Q4_K_M || preset == BATON_PRESET_Q5_K_M) &&
                 more_bits(i, n))
            t = BATON_TYPE_Q6_K;
        /* a 70B shares each attn_v among 8 heads: it is small, give it more */
        if (p->is_70b && (t == BATON_TYPE_Q3_K || t == BATON_TYPE_Q4_K))
            t = BATON_TYPE_Q5_K;
    } else if (baton_quant_preset_is_ffn_down(name)) {
        const uint32_t i = p->ffn_down_rank, n = p->n_layer;

        if (preset == BATON_PRESET_Q2_K)
            t = BATON_TYPE_Q3_K;
        else if (preset == BATON_PRESET_Q3_K_M)
            t = i < n / 16 ? BATON_TYPE_Q5_K : BATON_TYPE_Q4_K;
        else if ((preset == BATON_PRESET_Q4_K_M || preset == BATON_PRESET_Q5_K_M) &&
                 more_bits(i, n))
            t = BATON_TYPE_Q6_K;
        else if ((preset == BATON_PRESET_IQ4_NL || preset == BATON_PRESET_IQ4_XS) && i < n / 8)
            t = BATON_TYPE_Q5_K; /* llama.cpp's rule without an importance matrix */
    } else if (strstr(name, "attn_output.weight") != NULL) {
        if (preset == BATON_PRESET_Q2_K)
            t = BATON_TYPE_Q3_K;
        else if (preset == BATON_PRESET_Q3_K_M)
            t = BATON_TYPE_Q4_K;
    }
    return baton_quant_fallback(t, ne0);
}
