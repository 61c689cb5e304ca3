/* The llama-family decoder as baton graphs, one graph per stage per step
 * (architectures llama, qwen2, qwen3, gemma3: enum baton_llama_arch).
 *
 * Architecture (Touvron et al. 2023, "LLaMA"; as in llama2.c's run.c and
 * llama.cpp's llama arch): token embedding; per layer
 *   h = x + Wo · Attn(RoPE(Wq·n1), RoPE(Wk·n1), Wv·n1),  n1 = RMSNorm(x)·g1
 *   x = h + Wdown · (SiLU(Wgate·n2) ⊙ Wup·n2),           n2 = RMSNorm(h)·g2
 * then RMSNorm·g_out and the output head (tied to the embedding when the
 * GGUF has no output.weight). RoPE rotates adjacent pairs (x[2i], x[2i+1])
 * ("normal" mode of the llama arch); attention is causal and grouped-query.
 * qwen2 adds a bias after each of the Q, K, V projections and rotates the
 * pairs (x[i], x[i + n_rot/2]) (NeoX mode); qwen3 has no biases but an RMS
 * norm with its own weight over each head of Q and K before RoPE, NeoX mode
 * too, and a head size of its own (attention.key_length, so n_head x
 * head_dim may differ from n_embd). Llama 3.1+ files carry rope_freqs.weight,
 * whose factors divide the pairs' frequencies (its rope scaling). gemma3
 * (Gemma Team 2025, "Gemma 3 Technical Report") has qwen3's head norms and
 * NeoX rope, scales the embedding rows by sqrt(n_embd), normalizes the
 * attention's and the feed-forward's outputs (RMS norm with their own
 * weights) before each residual add, uses GELU for SiLU, scales the queries
 * by attn_scale, and has sliding-window layers (ATTENTION's window) with a
 * rope base of their own; a linear rope scale (any architecture) multiplies
 * the other layers' angles (ROPE's p3). Sources: llama.cpp's
 * src/models/{llama,qwen2,qwen3,gemma3}.cpp graphs, read for the
 * structure; the code here is ours.
 */
#ifndef BATON_MODEL_LLAMA_H
#define BATON_MODEL_LLAMA_H

#include <stddef.h>
#include <stdint.h>

#include "core/tensor.h"
#include "model/graph_builder.h"

struct baton_gguf;

/* Architectures (GGUF general.architecture) the graph builds. */
enum baton_llama_arch {
    BATON_ARCH_LLAMA = 0, /* "llama": Llama 1/2/3/3.x, Mistral, TinyLlama, ... */
    BATON_ARCH_QWEN2 = 1, /* "qwen2": Qwen 2/2.5 (Q/K/V biases, NeoX RoPE) */
    BATON_ARCH_QWEN3 = 2, /* "qwen3": Qwen 3 dense (per-head RMS norm on Q and K, NeoX RoPE) */
    BATON_ARCH_GEMMA3 = 3, /* "gemma3": Gemma 3 text (qwen3's head norms, embedding scaled by
                              sqrt(n_embd), RMS norms after attention and feed-forward, GELU,
                              sliding-window layers with their own rope base) */
};

/* RoPE modes (ROPE's p2, core/ops.h; ggml's values). */
#define BATON_ROPE_NORMAL 0u /* adjacent pairs (x[2i], x[2i+1]) */
#define BATON_ROPE_NEOX 2u   /* pairs (x[i], x[i + n_rot/2]) */

struct baton_llama_hparams {
    uint32_t arch;      /* enum baton_llama_arch */
    uint32_t rope_mode; /* BATON_ROPE_NORMAL (llama) or BATON_ROPE_NEOX (qwen2, qwen3) */
    uint32_t qkv_bias;  /* 1: blk.N.attn_{q,k,v}.bias are added after the projections */
    uint32_t qk_norm;   /* 1: blk.N.attn_{q,k}_norm.weight, RMS norm per head */
    uint32_t rope_freqs; /* 1: rope_freqs.weight {n_rot/2} divides each pair's frequency */
    uint32_t n_vocab;
    uint32_t n_embd;
    uint32_t n_layer;
    uint32_t n_head;
    uint32_t n_head_kv;
    uint32_t n_ff;
    uint32_t head_dim; /* <arch>.attention.key_length, else n_embd / n_head */
    uint32_t n_embd_q; /* n_head * head_dim: rows of attn_q, columns of attn_output */
    uint32_t n_rot;    /* rope dimensions per head */
    uint32_t n_ctx_train; /* llama.context_length, or 2048 (see n_ctx_train_src) */
    uint32_t n_ctx_train_src; /* enum baton_llama_ctx_src */
    float rms_eps;
    float rope_base;
    /* gemma3 (0 / 1.0 for the others) */
    uint32_t embd_scale; /* 1: the embedding rows are multiplied by sqrtf(n_embd) */
    uint32_t post_norms; /* 1: blk.N.post_attention_norm / post_ffw_norm.weight, an RMS norm
                            of the attention's and the feed-forward's outputs before each add */
    uint32_t ffn_gelu;   /* 1: GELU (tanh form) of the gate instead of SiLU */
    uint32_t n_swa;      /* <arch>.attention.sliding_window: a sliding-window layer's token
                            attends to the last n_swa positions (itself included); 0: none */
    uint32_t swa_period; /* <arch>.attention.sliding_window_pattern (default 6): layer l
                            slides when l % swa_period < swa_period - 1 (with n_swa) */
    float rope_base_swa; /* <arch>.rope.freq_base_swa (default 10000): the sliding layers' */
    float rope_scale;    /* 1 / <arch>.rope.scaling.factor (linear), the other layers'
                            angle factor; 1: none */
    float attn_scale;    /* the queries' scale before the scores (gemma3); 0: the scores
                            divided by sqrt(head_dim) (llama, qwen2, qwen3) */
};

/* Where n_ctx_train came from. */
enum baton_llama_ctx_src {
    BATON_LLAMA_CTX_KEY = 0,  /* llama.context_length */
    BATON_LLAMA_CTX_MISSING,  /* no such key: 2048 assumed */
    BATON_LLAMA_CTX_UNUSABLE, /* not an integer in 1..2^32-1: 2048 assumed */
};

/* Reads and checks the hyperparameters of a llama-family GGUF
 * (general.architecture "llama", "qwen2", "qwen3" or "gemma3"; "<arch>.*" keys as
 * llama.cpp's converters write them, vocabulary size from
 * tokenizer.ggml.tokens or token_embd.weight). An optional key that is
 * absent takes its default; one present with another type (a string
 * epsilon, an f32 rope.dimension_count), an integer out of 0..2^32-1, or a
 * value_length other than the head size is an error naming the key and the
 * type found (context_length alone is taken as missing when unusable: see
 * enum baton_llama_ctx_src). Errors name the key or tensor in err, without
 * the file (the caller adds it). Returns 0 or BATON_E_FORMAT /
 * BATON_E_NOT_FOUND / BATON_E_UNSUPPORTED. */
int baton_llama_hparams_load(const struct baton_gguf *gguf, struct baton_llama_hparams *hp,
                             char *err, size_t err_len);

/* "llama", "qwen2", "qwen3" or "gemma3" (general.architecture of enum
 * baton_llama_arch). */
const char *baton_llama_arch_name(uint32_t arch);

/* 1 when layer l is a sliding-window layer (hp->n_swa > 0 and l % swa_period <
 * swa_period - 1, llama.cpp's set_swa_pattern), else 0. */
int baton_llama_layer_swa(const struct baton_llama_hparams *hp, uint32_t l);

/* The trained context for messages, as it was found: "llama.context_length
 * 2048", or "the model has no llama.context_length; 2048 assumed" (or "no
 * usable llama.context_length"). Writes at most cap bytes, NUL-terminated. */
void baton_llama_ctx_train_desc(const struct baton_llama_hparams *hp, char *buf, size_t cap);

/* Weights of one layer, as tensors in the stage's weight buffer. */
struct baton_llama_layer {
    struct baton_tensor_desc attn_norm, wq, wk, wv, wo, ffn_norm, w_gate, w_up, w_down;
    struct baton_tensor_desc bq, bk, bv;       /* F32 {n_embd_q}, {kv_dim} x 2 (qkv_bias) */
    struct baton_tensor_desc q_norm, k_norm;   /* F32 {head_dim} (qk_norm) */
    struct baton_tensor_desc attn_post_norm, ffn_post_norm; /* F32 {n_embd} (post_norms) */
    struct baton_tensor_desc k_cache, v_cache; /* F32 {head_dim, n_ctx, n_head_kv} */
};

#define BATON_LLAMA_MAX_SLOTS 4u

/* Per-step I/O tensors of a stage, sized for max_ubatch tokens. The input
 * (the hidden state; on the first stage the token ids) comes in through a
 * ring of n_slots input slots, so that the copy of ubatch k + 1 (or the
 * decode ring's tokens of step k + 1) never lands in the slot ubatch k is
 * still reading. */
struct baton_llama_io {
    struct baton_tensor_desc tokens[BATON_LLAMA_MAX_SLOTS]; /* I32 {max_ubatch} (first stage) */
    struct baton_tensor_desc pos;        /* I32 {max_ubatch}, or {3 * max_ubatch} with
                                            seqs (positions, cells, first cells) */
    uint32_t n_slots;                    /* 1..BATON_LLAMA_MAX_SLOTS: tokens (first stage)
                                            or hidden_in (the others) */
    struct baton_tensor_desc hidden_in[BATON_LLAMA_MAX_SLOTS]; /* F32 {n_embd, max_ubatch} */
    struct baton_tensor_desc hidden_out; /* F32 {n_embd, max_ubatch} (not last) */
    struct baton_tensor_desc last_idx;   /* I32 {1}, or {max_ubatch} with seqs (last):
                                            the rows whose output is computed */
    struct baton_tensor_desc logits;     /* F32 {n_vocab}            (last) */
    struct baton_tensor_desc argmax;     /* I32 {1}, or {max_ubatch} with seqs (last) */
    struct baton_tensor_desc sample;     /* I32 {6 * max_ubatch}: SAMPLE's parameters per
                                            output token (last, with sample) */
};

struct baton_llama_stage {
    uint32_t layer_begin, layer_end; /* [begin, end) */
    int first, last;
    int sample; /* the last stage samples (SAMPLE, core/ops.h, its parameters in
                   io.sample) instead of taking the argmax */
    int seqs; /* several sequences share the KV cache: io.pos holds, for n tokens,
                 n positions, n cells written and n first cells read (ATTENTION's
                 {n,3} form, core/ops.h), and a step may output every token's argmax */
    struct baton_tensor_desc tok_embd;    /* first */
    struct baton_tensor_desc output_norm; /* last */
    struct baton_tensor_desc output;      /* last */
    struct baton_tensor_desc rope_freqs;  /* F32 {n_rot/2} (hp.rope_freqs; every stage) */
    struct baton_llama_layer *layers;     /* layer_end - layer_begin entries */
    struct baton_llama_io io;
};

/* Leaves and nodes a stage graph needs at most. */
uint32_t baton_llama_max_leaves(const struct baton_llama_stage *st);
uint32_t baton_llama_max_nodes(const struct baton_llama_stage *st);

/* Where a step's small inputs go in a stage graph, and where its token
 * comes out: leaf indices (into the graph's leaves) of the I32 views the
 * coordinator fills per step or reads back, or BATON_SRC_NONE where the
 * graph has none. */
struct baton_llama_graph_inputs {
    uint32_t pos;      /* positions {n_tokens} */
    uint32_t tokens;   /* token ids {n_tokens} (first stage) */
    uint32_t last_idx; /* {1}: the token whose logits are computed (last stage, n_tokens > 1) */
    uint32_t argmax;   /* {1}: the output, the argmax token id (last stage) */
};

/* Builds the graph of one stage for n_tokens tokens (1..max_ubatch) whose
 * positions are in io.pos (and token ids in io.tokens[slot] on the first
 * stage, or the previous stage's hidden state in io.hidden_in[slot]) when it
 * runs (slot < io.n_slots).
 * The last stage computes the output head for the last token only (and,
 * in the model's last layer, the attention output projection and the
 * feed-forward for that row only, after ATTENTION has written every
 * token's K and V, as llama.cpp's graphs do: the same bits) and
 * writes its argmax into io.argmax and, when want_logits, its logits into
 * io.logits; other stages write their hidden state into io.hidden_out. gb
 * must have been initialised with at least baton_llama_max_leaves/_nodes
 * capacity. *in (may be NULL) gets the leaves of the per-step inputs.
 * Returns 0, BATON_E_INVAL (n_tokens or slot out of range) or the
 * builder's error. */
int baton_llama_build_stage(const struct baton_llama_hparams *hp,
                            const struct baton_llama_stage *st, uint32_t n_tokens, uint32_t slot,
                            int want_logits, struct baton_gb *gb,
                            struct baton_llama_graph_inputs *in);

/* baton_llama_build_stage with n_out output tokens on the last stage: 1 (the
 * last token, as above), n_tokens (every token's argmax into io.argmax
 * {n_tokens}: one decode token of each of several sequences), or 1 < n_out <
 * n_tokens: the argmax of the rows named by io.last_idx {n_out} (a step that
 * mixes the chunk of a prompt with other sequences' decode tokens: the
 * coordinator names the last n_out rows). n_out > 1 needs st->seqs and no
 * logits; BATON_E_INVAL otherwise, for n_out > n_tokens, or for more rows
 * than io.last_idx holds. */
int baton_llama_build_stage_out(const struct baton_llama_hparams *hp,
                                const struct baton_llama_stage *st, uint32_t n_tokens,
                                uint32_t n_out, uint32_t slot, int want_logits,
                                struct baton_gb *gb,
                            struct baton_llama_graph_inputs *in);

#endif
