/* Llama hyperparameters from GGUF metadata (keys as written by llama.cpp's
 * converters: "<arch>.embedding_length" etc., see ggml docs/gguf.md). */
#include <stdio.h>
#include <string.h>

#include "baton/status.h"
#include "model/gguf.h"
#include "model/llama.h"

static int need_u32(const struct baton_gguf *g, const char *key, uint32_t *out, char *err,
                    size_t err_len)
{
    int rc = baton_gguf_get_u32(g, key, out);

    if (rc != 0)
        snprintf(err, err_len, "metadata key '%s': %s", key,
                 rc == BATON_E_NOT_FOUND ? "missing"
                 : rc == BATON_E_TYPE    ? "not an integer"
                                         : "value out of range");
    return rc;
}

int baton_llama_hparams_load(const struct baton_gguf *g, struct baton_llama_hparams *hp,
                             char *err, size_t err_len)
{
    const char *arch = NULL;
    size_t arch_len = 0;
    const struct baton_gguf_kv *kv;
    struct baton_gguf_tensor embd;
    int rc;

    memset(hp, 0, sizeof(*hp));
    rc = baton_gguf_get_string(g, "general.architecture", &arch, &arch_len);
    if (rc != 0) {
        snprintf(err, err_len, "metadata key 'general.architecture': missing");
        return BATON_E_FORMAT;
    }
    if (arch_len != 5 || memcmp(arch, "llama", 5) != 0) {
        snprintf(err, err_len, "general.architecture '%.*s' is not supported (only 'llama')",
                 (int)(arch_len > 64 ? 64 : arch_len), arch);
        return BATON_E_UNSUPPORTED;
    }
    if ((rc = need_u32(g, "llama.embedding_length", &hp->n_embd, err, err_len)) != 0 ||
        (rc = need_u32(g, "llama.block_count", &hp->n_layer, err, err_len)) != 0 ||
        (rc = need_u32(g, "llama.attention.head_count", &hp->n_head, err, err_len)) != 0 ||
        (rc = need_u32(g, "llama.feed_forward_length", &hp->n_ff, err, err_len)) != 0)
        return BATON_E_FORMAT;
    hp->n_head_kv = hp->n_head;
    (void)baton_gguf_get_u32(g, "llama.attention.head_count_kv", &hp->n_head_kv);
    /* a model without its trained context (or with one of 0) is taken to
     * have llama2's 2048, and messages say it was assumed */
    hp->n_ctx_train = 2048;
    rc = baton_gguf_get_u32(g, "llama.context_length", &hp->n_ctx_train);
    if (rc == BATON_E_NOT_FOUND) {
        hp->n_ctx_train_src = BATON_LLAMA_CTX_MISSING;
    } else if (rc != 0 || hp->n_ctx_train == 0) {
        hp->n_ctx_train = 2048;
        hp->n_ctx_train_src = BATON_LLAMA_CTX_UNUSABLE;
    }
    hp->rms_eps = 1e-5f;
    (void)baton_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &hp->rms_eps);
    hp->rope_base = 10000.0f;
    (void)baton_gguf_get_f32(g, "llama.rope.freq_base", &hp->rope_base);

    if (hp->n_embd == 0 || hp->n_layer == 0 || hp->n_head == 0 || hp->n_head_kv == 0 ||
        hp->n_ff == 0 || hp->n_embd % hp->n_head != 0 || hp->n_head % hp->n_head_kv != 0) {
        snprintf(err, err_len,
                 "inconsistent hyperparameters: n_embd %u, n_head %u, n_head_kv %u, "
                 "n_layer %u, n_ff %u",
                 hp->n_embd, hp->n_head, hp->n_head_kv, hp->n_layer, hp->n_ff);
        return BATON_E_FORMAT;
    }
    {
        /* every layer needs its tensors: check the last one exists before
         * anyone sizes arrays by n_layer */
        char name[64];
        struct baton_gguf_tensor last;

        snprintf(name, sizeof(name), "blk.%u.attn_norm.weight", hp->n_layer - 1);
        if (hp->n_layer > (1u << 16) || baton_gguf_find_tensor(g, name, &last, NULL) != 0) {
            snprintf(err, err_len,
                     "llama.block_count is %u but tensor '%s' is missing", hp->n_layer, name);
            return BATON_E_FORMAT;
        }
    }
    hp->head_dim = hp->n_embd / hp->n_head;
    hp->n_rot = hp->head_dim;
    (void)baton_gguf_get_u32(g, "llama.rope.dimension_count", &hp->n_rot);
    if (hp->n_rot == 0 || hp->n_rot > hp->head_dim || hp->n_rot % 2 != 0) {
        snprintf(err, err_len, "llama.rope.dimension_count %u does not fit head size %u",
                 hp->n_rot, hp->head_dim);
        return BATON_E_FORMAT;
    }
    if (!(hp->rms_eps >= 0.0f) || !(hp->rope_base > 0.0f)) {
        snprintf(err, err_len, "bad rms epsilon or rope base");
        return BATON_E_FORMAT;
    }

    rc = baton_gguf_find_tensor(g, "token_embd.weight", &embd, NULL);
    if (rc != 0) {
        snprintf(err, err_len, "tensor 'token_embd.weight': missing");
        return BATON_E_FORMAT;
    }
    if (embd.ne[0] != hp->n_embd || embd.ne[1] == 0 || embd.ne[1] > 0x7fffffffu) {
        snprintf(err, err_len, "tensor 'token_embd.weight': shape does not match n_embd %u",
                 hp->n_embd);
        return BATON_E_FORMAT;
    }
    hp->n_vocab = (uint32_t)embd.ne[1];
    kv = baton_gguf_find_key(g, "tokenizer.ggml.tokens");
    if (kv != NULL) {
        uint32_t et;
        uint64_t count;

        if (baton_gguf_kv_array(kv, &et, &count) == 0 && count != hp->n_vocab) {
            snprintf(err, err_len,
                     "tokenizer.ggml.tokens has %llu entries but token_embd.weight has %u rows",
                     (unsigned long long)count, hp->n_vocab);
            return BATON_E_FORMAT;
        }
    }
    return 0;
}

void baton_llama_ctx_train_desc(const struct baton_llama_hparams *hp, char *buf, size_t cap)
{
    if (hp->n_ctx_train_src == BATON_LLAMA_CTX_KEY)
        snprintf(buf, cap, "llama.context_length %u", hp->n_ctx_train);
    else
        snprintf(buf, cap, "the model has no %sllama.context_length; %u assumed",
                 hp->n_ctx_train_src == BATON_LLAMA_CTX_UNUSABLE ? "usable " : "",
                 hp->n_ctx_train);
}
