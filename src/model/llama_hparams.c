/* Llama-family hyperparameters from GGUF metadata (keys as written by
 * llama.cpp's converters: "<arch>.embedding_length" etc., see ggml's
 * docs/gguf.md). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "baton/status.h"
#include "model/gguf.h"
#include "model/llama.h"

/* The error for kv (key) that baton_gguf_kv_u32 refused with rc: the type
 * found against the integer expected, or the value out of range. */
static int u32_error(const struct baton_gguf_kv *kv, const char *key, int rc, char *err,
                     size_t err_len)
{
    struct baton_gguf_scalar v;

    if (rc == BATON_E_TYPE)
        snprintf(err, err_len, "metadata key '%s': not an integer (type %s)", key,
                 baton_gguf_type_name(baton_gguf_kv_type(kv)));
    else if (baton_gguf_kv_scalar(kv, &v) == 0 && v.type != BATON_GGUF_U8 &&
             v.type != BATON_GGUF_U16 && v.type != BATON_GGUF_U32 && v.type != BATON_GGUF_U64)
        snprintf(err, err_len, "metadata key '%s': value %lld out of range (0..4294967295)", key,
                 (long long)v.v.i);
    else
        snprintf(err, err_len, "metadata key '%s': value %llu out of range (0..4294967295)", key,
                 (unsigned long long)v.v.u);
    return BATON_E_FORMAT;
}

static int need_u32(const struct baton_gguf *g, const char *key, uint32_t *out, char *err,
                    size_t err_len)
{
    const struct baton_gguf_kv *kv = baton_gguf_find_key(g, key);
    int rc;

    if (kv == NULL) {
        snprintf(err, err_len, "metadata key '%s': missing", key);
        return BATON_E_FORMAT;
    }
    rc = baton_gguf_kv_u32(kv, out);
    return rc == 0 ? 0 : u32_error(kv, key, rc, err, err_len);
}

/* An optional integer key: absent, *out keeps its default (and *found, when
 * not NULL, is 0); present, it must be an integer in 0..2^32-1, else an
 * error names the key and what it holds (a default in its place would run
 * another model than the file describes). */
static int opt_u32(const struct baton_gguf *g, const char *key, uint32_t *out, int *found,
                   char *err, size_t err_len)
{
    const struct baton_gguf_kv *kv = baton_gguf_find_key(g, key);
    int rc;

    if (found != NULL)
        *found = kv != NULL;
    if (kv == NULL)
        return 0;
    rc = baton_gguf_kv_u32(kv, out);
    return rc == 0 ? 0 : u32_error(kv, key, rc, err, err_len);
}

/* The same for a float key (f32, or f64 rounded to float, as
 * baton_gguf_kv_f32 reads them). */
static int opt_f32(const struct baton_gguf *g, const char *key, float *out, char *err,
                   size_t err_len)
{
    const struct baton_gguf_kv *kv = baton_gguf_find_key(g, key);

    if (kv == NULL || baton_gguf_kv_f32(kv, out) == 0)
        return 0;
    snprintf(err, err_len, "metadata key '%s': not a float (type %s; f32 or f64 expected)", key,
             baton_gguf_type_name(baton_gguf_kv_type(kv)));
    return BATON_E_FORMAT;
}

/* "<prefix>.<rest>" into buf. */
static const char *key(char *buf, size_t cap, const char *prefix, const char *rest)
{
    snprintf(buf, cap, "%s.%s", prefix, rest);
    return buf;
}

/* 0 if the tensor exists with type F32 and shape {n} (a vector), else an
 * error naming it. */
static int need_vector(const struct baton_gguf *g, const char *name, uint64_t n, char *err,
                       size_t err_len)
{
    struct baton_gguf_tensor t;

    if (baton_gguf_find_tensor(g, name, &t, NULL) != 0) {
        snprintf(err, err_len, "tensor '%s': missing", name);
        return BATON_E_FORMAT;
    }
    if (t.n_dims != 1 || t.ne[0] != n) {
        snprintf(err, err_len, "tensor '%s': shape {%llu%s} but the model needs {%llu}", name,
                 (unsigned long long)t.ne[0], t.n_dims != 1 ? ", ..." : "",
                 (unsigned long long)n);
        return BATON_E_FORMAT;
    }
    return 0;
}

/* The per-layer vectors an architecture adds (biases, Q/K norms), checked
 * for every layer so that a stage never finds one missing mid-upload. */
static int check_arch_tensors(const struct baton_gguf *g, const struct baton_llama_hparams *hp,
                              char *err, size_t err_len)
{
    const uint64_t kv_dim = (uint64_t)hp->head_dim * hp->n_head_kv;
    char name[96];
    uint32_t l;
    int rc;

    for (l = 0; l < hp->n_layer; l++) {
        if (hp->qkv_bias) {
            snprintf(name, sizeof(name), "blk.%u.attn_q.bias", l);
            if ((rc = need_vector(g, name, hp->n_embd_q, err, err_len)) != 0)
                return rc;
            snprintf(name, sizeof(name), "blk.%u.attn_k.bias", l);
            if ((rc = need_vector(g, name, kv_dim, err, err_len)) != 0)
                return rc;
            snprintf(name, sizeof(name), "blk.%u.attn_v.bias", l);
            if ((rc = need_vector(g, name, kv_dim, err, err_len)) != 0)
                return rc;
        }
        if (hp->qk_norm) {
            snprintf(name, sizeof(name), "blk.%u.attn_q_norm.weight", l);
            if ((rc = need_vector(g, name, hp->head_dim, err, err_len)) != 0)
                return rc;
            snprintf(name, sizeof(name), "blk.%u.attn_k_norm.weight", l);
            if ((rc = need_vector(g, name, hp->head_dim, err, err_len)) != 0)
                return rc;
        }
        if (hp->post_norms) {
            snprintf(name, sizeof(name), "blk.%u.post_attention_norm.weight", l);
            if ((rc = need_vector(g, name, hp->n_embd, err, err_len)) != 0)
                return rc;
            snprintf(name, sizeof(name), "blk.%u.post_ffw_norm.weight", l);
            if ((rc = need_vector(g, name, hp->n_embd, err, err_len)) != 0)
                return rc;
        }
    }
    return 0;
}

/* <a>.rope.scaling.type and .factor (or the older .rope.scale_linear), as
 * llama.cpp reads them: no type is "linear"; a factor of 0 or none is no
 * scaling; "linear" divides every angle by the factor (hp->rope_scale =
 * 1 / factor). "none" is no scaling too. YaRN and LongRoPE change the angles
 * in ways baton does not compute: refused, naming the key, rather than run
 * as another model. */
static int load_rope_scaling(const struct baton_gguf *g, const char *a,
                             struct baton_llama_hparams *hp, char *err, size_t err_len)
{
    const char *type = "linear";
    size_t type_len = 6;
    float factor = 0.0f;
    char k[96];
    int rc;

    hp->rope_scale = 1.0f;
    rc = baton_gguf_get_string(g, key(k, sizeof k, a, "rope.scaling.type"), &type, &type_len);
    if (rc != 0 && rc != BATON_E_NOT_FOUND) {
        snprintf(err, err_len, "metadata key '%s': not a string", k);
        return BATON_E_FORMAT;
    }
    if (baton_gguf_find_key(g, key(k, sizeof k, a, "rope.scaling.factor")) == NULL)
        key(k, sizeof k, a, "rope.scale_linear");
    if ((rc = opt_f32(g, k, &factor, err, err_len)) != 0)
        return rc;
    if (type_len == 4 && memcmp(type, "none", 4) == 0)
        return 0;
    if (!(type_len == 6 && memcmp(type, "linear", 6) == 0)) {
        char shown[40];

        snprintf(err, err_len,
                 "%s.rope.scaling.type '%s' is not linear or none: baton computes linear rope "
                 "scaling only (yarn and longrope are not supported)",
                 a, baton_gguf_escape(shown, sizeof shown, type, type_len));
        return BATON_E_UNSUPPORTED;
    }
    if (factor == 0.0f)
        return 0;
    if (!(isfinite(factor) && factor > 0.0f)) {
        snprintf(err, err_len, "%s: %g: the rope scaling factor must be finite and above 0", k,
                 (double)factor);
        return BATON_E_FORMAT;
    }
    hp->rope_scale = 1.0f / factor;
    if (!isfinite(hp->rope_scale)) {
        /* below 1 / FLT_MAX: the angles' factor would be infinite */
        snprintf(err, err_len, "%s: %g: the rope scaling factor is too small (1 / factor is not "
                 "a finite float)", k, (double)factor);
        return BATON_E_FORMAT;
    }
    return 0;
}

/* Gemma 3's own keys and constants (llama.cpp's src/models/gemma3.cpp): the
 * embedding scaled by sqrt(n_embd), norms after attention and feed-forward,
 * GELU, the sliding window (attention.sliding_window; none without it) and
 * its layer pattern (attention.sliding_window_pattern, default 6), the
 * sliding layers' rope base (rope.freq_base_swa, default 10000) without the
 * rope scaling, the queries scaled by 1/sqrt(head size) before the scores
 * (1/sqrt(n_embd / n_head) for the 62-layer 27B, whose head size differs:
 * Google's gemma_pytorch config). A final logit softcap (Gemma 2's) is
 * refused: baton has no tanh op for it. */
static int load_gemma3(const struct baton_gguf *g, const char *a, struct baton_llama_hparams *hp,
                       char *err, size_t err_len)
{
    float cap = 0.0f;
    char k[96];
    int rc;

    hp->embd_scale = 1;
    hp->post_norms = 1;
    hp->ffn_gelu = 1;
    hp->swa_period = 6;
    hp->rope_base_swa = 10000.0f;
    if ((rc = opt_u32(g, key(k, sizeof k, a, "attention.sliding_window"), &hp->n_swa, NULL, err,
                      err_len)) != 0 ||
        (rc = opt_u32(g, key(k, sizeof k, a, "attention.sliding_window_pattern"),
                      &hp->swa_period, NULL, err, err_len)) != 0 ||
        (rc = opt_f32(g, key(k, sizeof k, a, "rope.freq_base_swa"), &hp->rope_base_swa, err,
                      err_len)) != 0 ||
        (rc = opt_f32(g, key(k, sizeof k, a, "final_logit_softcapping"), &cap, err,
                      err_len)) != 0)
        return rc;
    if (!(hp->rope_base_swa > 0.0f && isfinite(hp->rope_base_swa))) {
        snprintf(err, err_len, "%s.rope.freq_base_swa is %g: the rope base must be finite and "
                 "above 0", a, (double)hp->rope_base_swa);
        return BATON_E_FORMAT;
    }
    if (cap != 0.0f) {
        snprintf(err, err_len,
                 "%s.final_logit_softcapping is %g: baton does not compute a logit softcap", a,
                 (double)cap);
        return BATON_E_UNSUPPORTED;
    }
    if (hp->n_layer == 62 && hp->n_embd / hp->n_head == 0) {
        snprintf(err, err_len,
                 "%s.block_count 62 (Gemma 3 27B: queries scaled by 1/sqrt(embedding_length / "
                 "head_count)) with %s.embedding_length %u below %s.attention.head_count %u",
                 a, a, hp->n_embd, a, hp->n_head);
        return BATON_E_FORMAT;
    }
    hp->attn_scale = hp->n_layer == 62 ? 1.0f / sqrtf((float)(hp->n_embd / hp->n_head))
                                       : 1.0f / sqrtf((float)hp->head_dim);
    return 0;
}

int baton_llama_layer_swa(const struct baton_llama_hparams *hp, uint32_t l)
{
    if (hp->n_swa == 0)
        return 0;
    return hp->swa_period == 0 || l % hp->swa_period < hp->swa_period - 1;
}

int baton_llama_hparams_load(const struct baton_gguf *g, struct baton_llama_hparams *hp,
                             char *err, size_t err_len)
{
    static const struct {
        const char *name;
        uint32_t arch, rope_mode, qkv_bias, qk_norm;
    } archs[] = {
        {"llama", BATON_ARCH_LLAMA, BATON_ROPE_NORMAL, 0, 0},
        {"qwen2", BATON_ARCH_QWEN2, BATON_ROPE_NEOX, 1, 0},
        {"qwen3", BATON_ARCH_QWEN3, BATON_ROPE_NEOX, 0, 1},
        {"gemma3", BATON_ARCH_GEMMA3, BATON_ROPE_NEOX, 0, 1},
    };
    const char *arch = NULL, *a;
    size_t arch_len = 0, i;
    const struct baton_gguf_kv *kv;
    struct baton_gguf_tensor embd, rf;
    char k[96];
    uint32_t key_len = 0, val_len = 0;
    int rc, has_key_len = 0, has_val_len = 0;

    memset(hp, 0, sizeof(*hp));
    kv = baton_gguf_find_key(g, "general.architecture");
    if (kv == NULL) {
        snprintf(err, err_len, "metadata key 'general.architecture': missing");
        return BATON_E_FORMAT;
    }
    if (baton_gguf_kv_string(kv, &arch, &arch_len) != 0) {
        snprintf(err, err_len, "metadata key 'general.architecture': not a string (type %s)",
                 baton_gguf_type_name(baton_gguf_kv_type(kv)));
        return BATON_E_FORMAT;
    }
    for (i = 0; i < sizeof(archs) / sizeof(archs[0]); i++)
        if (arch_len == strlen(archs[i].name) && memcmp(arch, archs[i].name, arch_len) == 0)
            break;
    if (i == sizeof(archs) / sizeof(archs[0])) {
        char shown[80];

        snprintf(err, err_len,
                 "general.architecture '%s' is not supported (llama, qwen2, qwen3, gemma3)",
                 baton_gguf_escape(shown, sizeof shown, arch, arch_len));
        return BATON_E_UNSUPPORTED;
    }
    a = archs[i].name;
    hp->arch = archs[i].arch;
    hp->rope_mode = archs[i].rope_mode;
    hp->qkv_bias = archs[i].qkv_bias;
    hp->qk_norm = archs[i].qk_norm;
    if ((rc = need_u32(g, key(k, sizeof k, a, "embedding_length"), &hp->n_embd, err,
                       err_len)) != 0 ||
        (rc = need_u32(g, key(k, sizeof k, a, "block_count"), &hp->n_layer, err, err_len)) != 0 ||
        (rc = need_u32(g, key(k, sizeof k, a, "attention.head_count"), &hp->n_head, err,
                       err_len)) != 0 ||
        (rc = need_u32(g, key(k, sizeof k, a, "feed_forward_length"), &hp->n_ff, err,
                       err_len)) != 0)
        return BATON_E_FORMAT;
    hp->n_head_kv = hp->n_head;
    hp->rms_eps = 1e-5f;
    hp->rope_base = 10000.0f;
    if ((rc = opt_u32(g, key(k, sizeof k, a, "attention.head_count_kv"), &hp->n_head_kv, NULL,
                      err, err_len)) != 0 ||
        (rc = opt_f32(g, key(k, sizeof k, a, "attention.layer_norm_rms_epsilon"), &hp->rms_eps,
                      err, err_len)) != 0 ||
        (rc = opt_f32(g, key(k, sizeof k, a, "rope.freq_base"), &hp->rope_base, err,
                      err_len)) != 0 ||
        (rc = opt_u32(g, key(k, sizeof k, a, "attention.key_length"), &key_len, &has_key_len,
                      err, err_len)) != 0 ||
        (rc = opt_u32(g, key(k, sizeof k, a, "attention.value_length"), &val_len, &has_val_len,
                      err, err_len)) != 0)
        return rc;
    /* a model without its trained context (or with one of 0) is taken to
     * have llama2's 2048, and messages say it was assumed */
    hp->n_ctx_train = 2048;
    rc = baton_gguf_get_u32(g, key(k, sizeof k, a, "context_length"), &hp->n_ctx_train);
    if (rc == BATON_E_NOT_FOUND) {
        hp->n_ctx_train_src = BATON_LLAMA_CTX_MISSING;
    } else if (rc != 0 || hp->n_ctx_train == 0) {
        hp->n_ctx_train = 2048;
        hp->n_ctx_train_src = BATON_LLAMA_CTX_UNUSABLE;
    }

    {
        /* the key at fault, by name */
        const char *zero = hp->n_embd == 0      ? "embedding_length"
                           : hp->n_layer == 0   ? "block_count"
                           : hp->n_head == 0    ? "attention.head_count"
                           : hp->n_head_kv == 0 ? "attention.head_count_kv"
                           : hp->n_ff == 0      ? "feed_forward_length"
                                                : NULL;

        if (zero != NULL) {
            snprintf(err, err_len, "%s.%s is 0", a, zero);
            return BATON_E_FORMAT;
        }
        if (hp->n_head % hp->n_head_kv != 0) {
            snprintf(err, err_len,
                     "%s.attention.head_count %u is not a multiple of "
                     "%s.attention.head_count_kv %u (grouped-query attention shares each "
                     "key/value head among the same number of query heads)",
                     a, hp->n_head, a, hp->n_head_kv);
            return BATON_E_FORMAT;
        }
    }
    /* the head size: attention.key_length when the file has it (Qwen 3's
     * heads are wider than n_embd / n_head), which value_length must equal */
    if (has_key_len) {
        if (!has_val_len)
            val_len = key_len;
        if (key_len == 0 || key_len > 65536 || val_len != key_len) {
            snprintf(err, err_len,
                     "%s.attention.key_length %u and value_length %u: baton needs equal "
                     "head sizes of 1..65536",
                     a, key_len, val_len);
            return BATON_E_FORMAT;
        }
        hp->head_dim = key_len;
    } else {
        if (hp->n_embd % hp->n_head != 0) {
            snprintf(err, err_len,
                     "%s.embedding_length %u is not a multiple of %s.attention.head_count %u "
                     "(and the file has no %s.attention.key_length)",
                     a, hp->n_embd, a, hp->n_head, a);
            return BATON_E_FORMAT;
        }
        hp->head_dim = hp->n_embd / hp->n_head;
        /* baton's attention has value heads as wide as the key heads */
        if (has_val_len && val_len != hp->head_dim) {
            snprintf(err, err_len,
                     "%s.attention.value_length %u is not the head size %u (embedding_length / "
                     "head_count: the file has no %s.attention.key_length); baton needs value "
                     "heads as wide as the key heads",
                     a, val_len, hp->head_dim, a);
            return BATON_E_FORMAT;
        }
    }
    hp->n_embd_q = hp->n_head * hp->head_dim; /* head_count <= 2^32 / 65536 checked below */
    if ((uint64_t)hp->n_head * hp->head_dim > 0x7fffffffu) {
        snprintf(err, err_len, "%s.attention.head_count %u x head size %u is too large", a,
                 hp->n_head, hp->head_dim);
        return BATON_E_FORMAT;
    }
    {
        /* every layer needs its tensors: check the last one exists before
         * anyone sizes arrays by n_layer */
        char name[64];
        struct baton_gguf_tensor last;

        snprintf(name, sizeof(name), "blk.%u.attn_norm.weight", hp->n_layer - 1);
        if (baton_gguf_n_tensors(g) == 0) {
            /* llama.cpp's vocab-only files (its tests' ggml-vocab-*.gguf) */
            snprintf(err, err_len,
                     "the file holds no tensors: a vocabulary-only GGUF (baton tokenize "
                     "reads it; running needs a model with its weights)");
            return BATON_E_FORMAT;
        }
        /* each layer has tensors of its own, so a count past the file's
         * tensors (or past 65536) is the key's fault, not a tensor's */
        if (hp->n_layer > (1u << 16) || hp->n_layer >= baton_gguf_n_tensors(g)) {
            snprintf(err, err_len,
                     "%s.block_count %u is more layers than the file's %" PRIu64
                     " tensors can hold (each layer has tensors of its own%s)",
                     a, hp->n_layer, baton_gguf_n_tensors(g),
                     hp->n_layer > (1u << 16) ? "; at most 65536 layers" : "");
            return BATON_E_FORMAT;
        }
        if (baton_gguf_find_tensor(g, name, &last, NULL) != 0) {
            snprintf(err, err_len, "%s.block_count is %u but tensor '%s' is missing", a,
                     hp->n_layer, name);
            return BATON_E_FORMAT;
        }
        /* ... and a layer past the count means the count is short: its
         * tensors would be left out without a word (llama.cpp refuses such
         * a file for its tensor count) */
        snprintf(name, sizeof(name), "blk.%u.attn_norm.weight", hp->n_layer);
        if (baton_gguf_find_tensor(g, name, &last, NULL) == 0) {
            snprintf(err, err_len,
                     "%s.block_count is %u but the file holds tensor '%s' of a layer past it",
                     a, hp->n_layer, name);
            return BATON_E_FORMAT;
        }
    }
    hp->n_rot = hp->head_dim;
    if ((rc = opt_u32(g, key(k, sizeof k, a, "rope.dimension_count"), &hp->n_rot, NULL, err,
                      err_len)) != 0)
        return rc;
    if (hp->n_rot == 0 || hp->n_rot > hp->head_dim || hp->n_rot % 2 != 0) {
        snprintf(err, err_len, "%s.rope.dimension_count %u does not fit head size %u%s", a,
                 hp->n_rot, hp->head_dim,
                 has_key_len ? "" : " (embedding_length / head_count: the file has no "
                                    "attention.key_length)");
        return BATON_E_FORMAT;
    }
    /* NaN fails both comparisons; +inf passed them and made every graph
     * fail the server's checks later (GRAPH_REGISTER E_INVAL, no key named) */
    const int bad_eps = !(hp->rms_eps >= 0.0f && isfinite(hp->rms_eps));
    if (bad_eps || !(hp->rope_base > 0.0f && isfinite(hp->rope_base))) {
        snprintf(err, err_len, "%s.%s is %g: %s", a,
                 bad_eps ? "attention.layer_norm_rms_epsilon" : "rope.freq_base",
                 bad_eps ? (double)hp->rms_eps : (double)hp->rope_base,
                 bad_eps ? "the epsilon must be finite and at least 0"
                         : "the rope base must be finite and above 0");
        return BATON_E_FORMAT;
    }
    if (baton_gguf_find_tensor(g, "rope_freqs.weight", &rf, NULL) == 0) {
        if ((rc = need_vector(g, "rope_freqs.weight", hp->n_rot / 2, err, err_len)) != 0)
            return rc;
        hp->rope_freqs = 1;
    }
    if ((rc = load_rope_scaling(g, a, hp, err, err_len)) != 0)
        return rc;
    if (hp->arch == BATON_ARCH_GEMMA3 && (rc = load_gemma3(g, a, hp, err, err_len)) != 0)
        return rc;
    if ((rc = check_arch_tensors(g, hp, err, err_len)) != 0)
        return rc;

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

const char *baton_llama_arch_name(uint32_t arch)
{
    switch (arch) {
    case BATON_ARCH_QWEN2:
        return "qwen2";
    case BATON_ARCH_QWEN3:
        return "qwen3";
    case BATON_ARCH_GEMMA3:
        return "gemma3";
    default:
        return "llama";
    }
}

void baton_llama_ctx_train_desc(const struct baton_llama_hparams *hp, char *buf, size_t cap)
{
    const char *a = baton_llama_arch_name(hp->arch);

    if (hp->n_ctx_train_src == BATON_LLAMA_CTX_KEY)
        snprintf(buf, cap, "%s.context_length %u", a, hp->n_ctx_train);
    else
        snprintf(buf, cap, "the model has no %s%s.context_length; %u assumed",
                 hp->n_ctx_train_src == BATON_LLAMA_CTX_UNUSABLE ? "usable " : "", a,
                 hp->n_ctx_train);
}
