/* The per-tensor type choices of llama.cpp's quantization presets ("ftypes")
 * Q2_K, Q3_K_M, Q4_K_M, Q5_K_M, Q6_K, IQ4_NL and IQ4_XS (without an
 * importance matrix), for `baton quantize` and
 * `baton gen-model`. The rules are those of llama.cpp's llama_tensor_get_type
 * (src/llama-quant.cpp) for dense (non-MoE) llama and qwen2 models (qwen3
 * and gemma3 take the same: llama-quant.cpp has no rule of their own, and a
 * gemma3 file's head is its token_embd), restated in our own words in
 * docs/QUANTIZE.md; baton's code is its own.
 * One deviation: a matrix whose rows do not fit the 256-element super-block
 * falls back to a type baton runs (see baton_quant_fallback). */
#ifndef BATON_MODEL_QUANT_PRESET_H
#define BATON_MODEL_QUANT_PRESET_H

#include <stdint.h>

enum baton_quant_preset {
    BATON_PRESET_NONE = 0, /* one type for every matrix */
    BATON_PRESET_Q2_K,
    BATON_PRESET_Q3_K_M,
    BATON_PRESET_Q4_K_M,
    BATON_PRESET_Q5_K_M,
    BATON_PRESET_Q6_K,
    BATON_PRESET_IQ4_NL,
    BATON_PRESET_IQ4_XS,
};

/* What the choice depends on besides the tensor itself. */
struct baton_quant_plan {
    int preset;            /* enum baton_quant_preset, not NONE */
    uint32_t n_layer;      /* <arch>.block_count */
    uint32_t n_attn_v;     /* attn_v matrices in the file */
    uint32_t n_gqa;        /* head_count / head_count_kv (1 if unknown) */
    int is_70b;            /* llama.cpp's LLM_TYPE_70B (80-layer llama with GQA, qwen2) */
    int has_output;        /* output.weight present (otherwise the head is token_embd) */
    uint32_t attn_v_rank;  /* set by the caller per attn_v matrix: its index among
                              the attn_v matrices in layer order */
    uint32_t ffn_down_rank; /* the same for ffn_down */
};

/* Parses "q2_k", "q3_k_m", "q4_k_m", "q5_k_m", "q6_k", "iq4_nl", "iq4_xs",
 * in any case.
 * Returns 0 and sets *preset, or -1. */
int baton_quant_preset_parse(const char *name, int *preset);

/* The preset's name as parse takes it, and llama.cpp's general.file_type
 * value for it (LLAMA_FTYPE_MOSTLY_*: 10, 12, 15, 17, 18, 25, 30). */
const char *baton_quant_preset_name(int preset);
uint32_t baton_quant_preset_ftype(int preset);

/* llama.cpp's general.file_type for a file of one type (LLAMA_FTYPE_ALL_F32
 * 0, MOSTLY_F16 1, MOSTLY_Q4_0 2, MOSTLY_Q8_0 7, MOSTLY_Q5_0 8, MOSTLY_Q5_1
 * 9, MOSTLY_BF16 32: llama.h) into *ftype: 0, or -1 for a type with none here. */
int baton_quant_type_ftype(uint32_t type, uint32_t *ftype);

/* Whether llama.cpp's preset quantizes this tensor at all: a matrix (n_dims
 * >= 2) whose name ends in "weight" and is not a norm ("_norm.weight") or
 * an expert router ("ffn_gate_inp.weight"). */
int baton_quant_preset_applies(const char *name, uint32_t n_dims);

/* The matrices the attn_v and ffn_down rules count (llama.cpp's
 * categories: attn_v also takes attn_qkv and attn_kv_b). */
int baton_quant_preset_is_attn_v(const char *name);
int baton_quant_preset_is_ffn_down(const char *name);

/* The type for one matrix of rows of ne0 elements (a tensor for which
 * baton_quant_preset_applies), attn_v / ffn_down ranks set in the plan.
 * Always a type baton runs, with ne0 a multiple of its block. */
uint32_t baton_quant_preset_type(const struct baton_quant_plan *plan, const char *name,
                                 uint64_t ne0);

/* A type for rows of ne0 elements when type's block does not divide ne0:
 * llama.cpp's fallbacks (llama-quant.cpp, tensor_type_fallback): Q2_K,
 * Q3_K -> Q4_0; Q4_K -> Q5_0; Q5_K -> Q5_1; Q6_K -> Q8_0; IQ4_XS -> IQ4_NL;
 * F16 when even 32 does not divide ne0. Returns type itself when it fits. */
uint32_t baton_quant_fallback(uint32_t type, uint64_t ne0);

#endif
