/* Deterministic synthetic llama-family GGUF models (`baton gen-model`:
 * architectures llama, qwen2 with its Q/K/V biases, qwen3 with its Q/K
 * norms, gemma3 with qwen3's norms, post-norms, sliding-window keys and a
 * head tied to the embedding) and weight
 * conversion (`baton quantize`), for benchmarks and tests that need models
 * of a given size and type. The files use llama.cpp's tensor names and
 * metadata keys, so llama.cpp loads them too. */
#ifndef BATON_MODEL_GENMODEL_H
#define BATON_MODEL_GENMODEL_H

#include <stddef.h>
#include <stdint.h>

struct baton_gen_model_config {
    uint32_t n_layer, n_embd, n_ff, n_head, n_head_kv;
    uint32_t n_vocab;       /* synthetic vocabulary size (>= 300), unless vocab_from */
    uint32_t n_ctx;         /* llama.context_length */
    uint32_t type;          /* weight type of the matrices: F32, F16, Q8_0, Q4_0, Q2_K..Q6_K */
    int preset;             /* enum baton_quant_preset (model/quant_preset.h): a mix of
                               types chosen per matrix as llama.cpp's preset does;
                               BATON_PRESET_NONE (0): every matrix in type */
    uint32_t arch;          /* enum baton_llama_arch (model/llama.h): llama, qwen2, qwen3,
                               gemma3 */
    uint32_t head_dim;      /* 0: n_embd / n_head; else written as attention.key_length
                               (gemma3 writes key_length and value_length either way, as
                               its converter does) */
    float rope_base;        /* 0: 10000 (llama), 1000000 (qwen2, qwen3, gemma3) */
    int rope_freqs;         /* 1: write rope_freqs.weight, Llama 3.1's rope scaling factors */
    /* gemma3 only: given with another arch, baton_gen_model refuses them */
    int swa_given;          /* 1: n_swa was given (--swa); 0: 512 for gemma3 */
    uint32_t n_swa;         /* attention.sliding_window; 0: no such key (no layer slides) */
    uint32_t swa_period;    /* attention.sliding_window_pattern (>= 1, needs n_swa > 0);
                               0: no such key (llama.cpp's default, 6) */
    float rope_scale;       /* > 0: rope.scaling.type "linear" and rope.scaling.factor this;
                               0: no such keys */
    uint64_t seed;
    const char *vocab_from; /* GGUF whose tokenizer.* keys are copied, or NULL */
    const char *out_path;
};

/* Writes the model. Weights: uniform in [-1/sqrt(fan_in), 1/sqrt(fan_in)]
 * from a xorshift64* stream seeded with seed (same seed, same bytes), norm
 * weights 1 + small noise (gemma3's too: its converter stores them offset by
 * +1). A gemma3 file has no output.weight: its head is token_embd.weight, as
 * in Google's files. Matrices are converted to cfg->type (ne[0] must
 * be a multiple of 32 for Q8_0 / Q4_0 / F16 and of 256 for the K-quants) or,
 * with cfg->preset, each to its preset's type (multiples of 32); norms stay
 * F32. The model is
 * built in memory: a shape larger than the memory available now
 * (MemAvailable, /proc/meminfo, read by baton_meminfo_available in
 * meminfo.h; the machine's RAM where that cannot be read) is refused with
 * BATON_E_LIMIT before anything is allocated.
 * Returns 0 or a negative status with a message in err. */
int baton_gen_model(const struct baton_gen_model_config *cfg, char *err, size_t err_len);

/* Copies a GGUF. With preset BATON_PRESET_NONE: converts every 2-D F32/F16
 * tensor whose ne[0] is a multiple of 32 to type (Q8_0 or Q4_0, or F16/F32).
 * With a preset (model/quant_preset.h; type is then ignored): converts each
 * 2-D F32/F16 matrix llama.cpp's preset quantizes to the type that preset
 * picks for it (docs/QUANTIZE.md). Either way general.file_type is set to
 * llama.cpp's value for the type or preset (baton_quant_type_ftype,
 * baton_quant_preset_ftype) and general.quantization_version to 2, as
 * llama-quantize sets them. Other tensors and all other metadata are copied
 * unchanged. *n_converted / *n_kept (may
 * be NULL; the caller zeroes them) count converted and unchanged tensors.
 * The converted tensors are held in memory until out_path is written (the
 * kept ones are written from the input's mapping, a row of floats is the
 * only scratch): a conversion whose estimate exceeds the memory available
 * now (as for baton_gen_model) is refused with BATON_E_LIMIT before any
 * tensor is converted.
 * Returns 0 or a negative status with a message in err. */
int baton_quantize_file(const char *in_path, const char *out_path, uint32_t type, int preset,
                        char *err, size_t err_len, uint64_t *n_converted, uint64_t *n_kept);

/* Converts n_rows rows of row_len floats to type into dst (row_len a
 * multiple of the type's block). Returns 0 or BATON_E_UNSUPPORTED. */
int baton_convert_rows(uint32_t type, const float *src, uint64_t n_rows, uint64_t row_len,
                       void *dst);

#endif
