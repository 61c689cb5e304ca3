/* Hyperparameters of the llama-family architectures (llama_hparams.c):
 * llama, qwen2 (Q/K/V biases, NeoX RoPE), qwen3 (Q/K norms, its own head
 * size), gemma3 (post norms, sliding window, its constants), Llama 3.1's
 * rope_freqs.weight and linear rope scaling, read from small GGUF files
 * written here; and every refusal names the key or tensor at fault. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "baton/status.h"
#include "core/types.h"
#include "model/gguf.h"
#include "model/gguf_write.h"
#include "model/llama.h"

/* What a test file holds. */
struct spec {
    const char *arch;
    uint32_t n_embd, n_head, n_head_kv, n_layer, key_length, value_length;
    int biases;        /* blk.N.attn_{q,k,v}.bias */
    int qk_norm;       /* blk.N.attn_{q,k}_norm.weight */
    int rope_freqs;    /* rope_freqs.weight of this many floats (0: none) */
    const char *skip;  /* a tensor or key left out (NULL: none) */
    int floats;        /* write rms_eps and rope_base below (0: neither) */
    float rms_eps, rope_base;
    const char *odd_key; /* "<arch>.<odd_key>" written with odd_type instead (NULL: none) */
    uint32_t odd_type;   /* BATON_GGUF_STRING ("8"), _F32 (8.0), _I32 (-1) or _U64 (2^32) */
};

static char path[128];
static uint32_t block_count; /* written as block_count instead of n_layer (0: n_layer) */
/* more keys for the next file (NULL: none) */
static void (*extra_keys)(struct baton_gguf_writer *w);

static int add_vec(struct baton_gguf_writer *w, const struct spec *s, const char *name, uint64_t n)
{
    static float zeros[1024];
    const uint64_t ne[1] = {n};

    if (s->skip && strcmp(s->skip, name) == 0)
        return 0;
    assert_true(n <= 1024);
    return baton_gguf_w_tensor(w, name, BATON_TYPE_F32, 1, ne, zeros, n * sizeof(float));
}

static int add_u32(struct baton_gguf_writer *w, const struct spec *s, const char *rest, uint32_t v)
{
    char key[96];

    snprintf(key, sizeof key, "%s.%s", s->arch, rest);
    if ((s->skip && strcmp(s->skip, key) == 0) || (s->odd_key && strcmp(s->odd_key, rest) == 0))
        return 0;
    return baton_gguf_w_u32(w, key, v);
}

/* Writes "<arch>.<odd_key>" with the odd type of s. */
static int add_odd(struct baton_gguf_writer *w, const struct spec *s)
{
    char key[96];
    static const uint8_t minus_one[4] = {0xff, 0xff, 0xff, 0xff}; /* i32 -1 */
    static const uint8_t big[8] = {0, 0, 0, 0, 1, 0, 0, 0};        /* u64 2^32 */

    snprintf(key, sizeof key, "%s.%s", s->arch, s->odd_key);
    switch (s->odd_type) {
    case BATON_GGUF_STRING:
        return baton_gguf_w_string(w, key, "8", 1);
    case BATON_GGUF_F32:
        return baton_gguf_w_f32(w, key, 8.0f);
    case BATON_GGUF_I32:
        return baton_gguf_w_raw(w, key, BATON_GGUF_I32, minus_one, sizeof minus_one);
    default:
        return baton_gguf_w_raw(w, key, BATON_GGUF_U64, big, sizeof big);
    }
}

/* Writes the file of s and loads its hyperparameters; returns the status. */
static int load(const struct spec *s, struct baton_llama_hparams *hp, char *err, size_t err_len)
{
    struct baton_gguf_writer *w;
    struct baton_gguf *g;
    const uint32_t hd = s->key_length ? s->key_length : s->n_embd / s->n_head;
    const uint64_t qd = (uint64_t)hd * s->n_head, kvd = (uint64_t)hd * s->n_head_kv;
    static float embd[300 * 256];
    const uint64_t ne_embd[2] = {s->n_embd, 300};
    char name[96];
    uint32_t l;
    int rc;

    snprintf(path, sizeof path, "/tmp/baton_hparams_%ld.gguf", (long)getpid());
    assert_int_equal(baton_gguf_writer_create(&w), 0);
    assert_int_equal(baton_gguf_w_string(w, "general.architecture", s->arch, strlen(s->arch)), 0);
    assert_int_equal(add_u32(w, s, "embedding_length", s->n_embd), 0);
    assert_int_equal(add_u32(w, s, "block_count", block_count ? block_count : s->n_layer), 0);
    assert_int_equal(add_u32(w, s, "feed_forward_length", 64), 0);
    assert_int_equal(add_u32(w, s, "attention.head_count", s->n_head), 0);
    assert_int_equal(add_u32(w, s, "attention.head_count_kv", s->n_head_kv), 0);
    if (s->key_length)
        assert_int_equal(add_u32(w, s, "attention.key_length", s->key_length), 0);
    if (s->value_length)
        assert_int_equal(add_u32(w, s, "attention.value_length", s->value_length), 0);
    if (s->floats) {
        snprintf(name, sizeof name, "%s.attention.layer_norm_rms_epsilon", s->arch);
        assert_int_equal(baton_gguf_w_f32(w, name, s->rms_eps), 0);
        snprintf(name, sizeof name, "%s.rope.freq_base", s->arch);
        assert_int_equal(baton_gguf_w_f32(w, name, s->rope_base), 0);
    }
    if (s->odd_key)
        assert_int_equal(add_odd(w, s), 0);
    if (extra_keys)
        extra_keys(w);
    assert_true(s->n_embd <= 256);
    assert_int_equal(baton_gguf_w_tensor(w, "token_embd.weight", BATON_TYPE_F32, 2, ne_embd, embd,
                                         300ull * s->n_embd * sizeof(float)),
                     0);
    for (l = 0; l < s->n_layer; l++) {
        snprintf(name, sizeof name, "blk.%u.attn_norm.weight", l);
        assert_int_equal(add_vec(w, s, name, s->n_embd), 0);
        if (s->biases) {
            snprintf(name, sizeof name, "blk.%u.attn_q.bias", l);
            assert_int_equal(add_vec(w, s, name, qd), 0);
            snprintf(name, sizeof name, "blk.%u.attn_k.bias", l);
            assert_int_equal(add_vec(w, s, name, kvd), 0);
            snprintf(name, sizeof name, "blk.%u.attn_v.bias", l);
            assert_int_equal(add_vec(w, s, name, kvd), 0);
        }
        if (s->qk_norm) {
            snprintf(name, sizeof name, "blk.%u.attn_q_norm.weight", l);
            assert_int_equal(add_vec(w, s, name, hd), 0);
            snprintf(name, sizeof name, "blk.%u.attn_k_norm.weight", l);
            assert_int_equal(add_vec(w, s, name, hd), 0);
        }
        if (strcmp(s->arch, "gemma3") == 0) {
            snprintf(name, sizeof name, "blk.%u.post_attention_norm.weight", l);
            assert_int_equal(add_vec(w, s, name, s->n_embd), 0);
            snprintf(name, sizeof name, "blk.%u.post_ffw_norm.weight", l);
            assert_int_equal(add_vec(w, s, name, s->n_embd), 0);
        }
    }
    if (s->rope_freqs)
        assert_int_equal(add_vec(w, s, "rope_freqs.weight", (uint64_t)s->rope_freqs), 0);
    assert_int_equal(baton_gguf_writer_write(w, path, err, err_len), 0);
    baton_gguf_writer_free(w);
    assert_int_equal(baton_gguf_open(path, &g, err, err_len), 0);
    err[0] = '\0';
    rc = baton_llama_hparams_load(g, hp, err, err_len);
    baton_gguf_close(g);
    unlink(path);
    return rc;
}

static void test_llama(void **state)
{
    const struct spec s = {"llama", 128, 4, 2, 2, 0, 0, 0, 0, 0, NULL, 0, 0, 0, NULL, 0};
    struct baton_llama_hparams hp;
    char err[256];

    (void)state;
    assert_int_equal(load(&s, &hp, err, sizeof err), 0);
    assert_int_equal(hp.arch, BATON_ARCH_LLAMA);
    assert_int_equal(hp.rope_mode, BATON_ROPE_NORMAL);
    assert_int_equal(hp.head_dim, 32);
    assert_int_equal(hp.n_embd_q, 128);
    assert_int_equal(hp.n_rot, 32);
    assert_int_equal(hp.qkv_bias, 0);
    assert_int_equal(hp.qk_norm, 0);
    assert_int_equal(hp.rope_freqs, 0);
    assert_int_equal(hp.n_vocab, 300);
    assert_string_equal(baton_llama_arch_name(hp.arch), "llama");
}

static void test_qwen2(void **state)
{
    const struct spec s = {"qwen2", 128, 4, 2, 2, 0, 0, 1, 0, 0, NULL, 0, 0, 0, NULL, 0};
    struct spec miss = s;
    struct baton_llama_hparams hp;
    char err[256];

    (void)state;
    assert_int_equal(load(&s, &hp, err, sizeof err), 0);
    assert_int_equal(hp.arch, BATON_ARCH_QWEN2);
    assert_int_equal(hp.rope_mode, BATON_ROPE_NEOX);
    assert_int_equal(hp.qkv_bias, 1);
    assert_int_equal(hp.qk_norm, 0);
    assert_int_equal(hp.head_dim, 32);
    /* the last layer's K bias left out: named */
    miss.skip = "blk.1.attn_k.bias";
    assert_int_equal(load(&miss, &hp, err, sizeof err), BATON_E_FORMAT);
    assert_string_equal(err, "tensor 'blk.1.attn_k.bias': missing");
    /* the keys carry the architecture's prefix */
    miss.skip = "qwen2.block_count";
    assert_int_equal(load(&miss, &hp, err, sizeof err), BATON_E_FORMAT);
    assert_string_equal(err, "metadata key 'qwen2.block_count': missing");
}

static void test_qwen3(void **state)
{
    /* heads 4 x key_length 64 = 256 wide queries over n_embd 128 */
    const struct spec s = {"qwen3", 128, 4, 2, 2, 64, 64, 0, 1, 0, NULL, 0, 0, 0, NULL, 0};
    struct spec bad = s;
    struct baton_llama_hparams hp;
    char err[256];

    (void)state;
    assert_int_equal(load(&s, &hp, err, sizeof err), 0);
    assert_int_equal(hp.arch, BATON_ARCH_QWEN3);
    assert_int_equal(hp.rope_mode, BATON_ROPE_NEOX);
    assert_int_equal(hp.qk_norm, 1);
    assert_int_equal(hp.qkv_bias, 0);
    assert_int_equal(hp.head_dim, 64);
    assert_int_equal(hp.n_embd_q, 256);
    assert_int_equal(hp.n_rot, 64);
    /* value heads of another size: refused, naming both keys */
    bad.value_length = 32;
    assert_int_equal(load(&bad, &hp, err, sizeof err), BATON_E_FORMAT);
    assert_string_equal(err, "qwen3.attention.key_length 64 and value_length 32: baton needs "
                             "equal head sizes of 1..65536");
    /* a Q norm left out */
    bad = s;
    bad.skip = "blk.0.attn_q_norm.weight";
    assert_int_equal(load(&bad, &hp, err, sizeof err), BATON_E_FORMAT);
    assert_string_equal(err, "tensor 'blk.0.attn_q_norm.weight': missing");
}

static void test_rope_freqs(void **state)
{
    const struct spec s = {"llama", 128, 4, 4, 1, 0, 0, 0, 0, 16, NULL, 0, 0, 0, NULL, 0};
    struct spec bad = s;
    struct baton_llama_hparams hp;
    char err[256];

    (void)state;
    assert_int_equal(load(&s, &hp, err, sizeof err), 0);
    assert_int_equal(hp.rope_freqs, 1);
    /* n_rot 32 needs 16 factors */
    bad.rope_freqs = 8;
    assert_int_equal(load(&bad, &hp, err, sizeof err), BATON_E_FORMAT);
    assert_string_equal(err, "tensor 'rope_freqs.weight': shape {8} but the model needs {16}");
}

static void keys_gemma3_swa(struct baton_gguf_writer *w)
{
    assert_int_equal(baton_gguf_w_u32(w, "gemma3.attention.sliding_window", 512), 0);
    assert_int_equal(baton_gguf_w_u32(w, "gemma3.attention.sliding_window_pattern", 3), 0);
    assert_int_equal(baton_gguf_w_f32(w, "gemma3.rope.freq_base_swa", 5000.0f), 0);
    assert_int_equal(baton_gguf_w_string(w, "gemma3.rope.scaling.type", "linear", 6), 0);
    assert_int_equal(baton_gguf_w_f32(w, "gemma3.rope.scaling.factor", 8.0f), 0);
}

static void keys_softcap(struct baton_gguf_writer *w)
{
    assert_int_equal(baton_gguf_w_f32(w, "gemma3.final_logit_softcapping", 30.0f), 0);
}

static void keys_yarn(struct baton_gguf_writer *w)
{
    assert_int_equal(baton_gguf_w_string(w, "gemma3.rope.scaling.type", "yarn", 4), 0);
    assert_int_equal(baton_gguf_w_f32(w, "gemma3.rope.scaling.factor", 4.0f), 0);
}

static void keys_bad_swa_base(struct baton_gguf_writer *w)
{
    assert_int_equal(baton_gguf_w_f32(w, "gemma3.rope.freq_base_swa", -1.0f), 0);
}

static void keys_llama_scale_linear(struct baton_gguf_writer *w)
{
    assert_int_equal(baton_gguf_w_f32(w, "llama.rope.scale_linear", 2.0f), 0);
}

static void keys_llama_scaling_none(struct baton_gguf_writer *w)
{
    assert_int_equal(baton_gguf_w_string(w, "llama.rope.scaling.type", "none", 4), 0);
    assert_int_equal(baton_gguf_w_f32(w, "llama.rope.scaling.factor", 4.0f), 0);
}

static void keys_tiny_factor(struct baton_gguf_writer *w)
{
    assert_int_equal(baton_gguf_w_f32(w, "llama.rope.scaling.factor", 0x1p-128f), 0);
}

static void test_gemma3(void **state)
{
    /* heads 4 x key_length 64 over n_embd 128, 4 layers */
    const struct spec s = {"gemma3", 128, 4, 2, 4, 64, 64, 0, 1, 0, NULL, 0, 0, 0, NULL, 0};
    struct spec bad = s;
    struct baton_llama_hparams hp;
    char err[256];

    (void)state;
    assert_int_equal(load(&s, &hp, err, sizeof err), 0);
    assert_int_equal(hp.arch, BATON_ARCH_GEMMA3);
    assert_string_equal(baton_llama_arch_name(hp.arch), "gemma3");
    assert_int_equal(hp.rope_mode, BATON_ROPE_NEOX);
    assert_int_equal(hp.qk_norm, 1);
    assert_int_equal(hp.qkv_bias, 0);
    assert_true(hp.embd_scale && hp.post_norms && hp.ffn_gelu);
    assert_int_equal(hp.head_dim, 64);
    /* no sliding_window key: no layer slides; the defaults of llama.cpp */
    assert_int_equal(hp.n_swa, 0);
    assert_int_equal(hp.swa_period, 6);
    assert_false(baton_llama_layer_swa(&hp, 0));
    assert_true(hp.rope_base_swa == 10000.0f);
    assert_true(hp.rope_scale == 1.0f);
    assert_true(hp.attn_scale == 0.125f); /* 1 / sqrt(64) */

    /* window 512, pattern 3 (layers 0, 1 slide, 2 does not, 3 does), their
     * rope base, linear scaling 8 */
    extra_keys = keys_gemma3_swa;
    assert_int_equal(load(&s, &hp, err, sizeof err), 0);
    assert_int_equal(hp.n_swa, 512);
    assert_int_equal(hp.swa_period, 3);
    assert_true(baton_llama_layer_swa(&hp, 0) && baton_llama_layer_swa(&hp, 1));
    assert_false(baton_llama_layer_swa(&hp, 2));
    assert_true(baton_llama_layer_swa(&hp, 3));
    assert_true(hp.rope_base_swa == 5000.0f);
    assert_true(hp.rope_scale == 0.125f);

    /* Gemma 2's logit softcap and YaRN: refused, naming the key */
    extra_keys = keys_softcap;
    assert_int_equal(load(&s, &hp, err, sizeof err), BATON_E_UNSUPPORTED);
    assert_string_equal(err, "gemma3.final_logit_softcapping is 30: baton does not compute a "
                             "logit softcap");
    extra_keys = keys_yarn;
    assert_int_equal(load(&s, &hp, err, sizeof err), BATON_E_UNSUPPORTED);
    assert_string_equal(err, "gemma3.rope.scaling.type 'yarn' is not linear or none: baton "
                             "computes linear rope scaling only (yarn and longrope are not "
                             "supported)");
    extra_keys = keys_bad_swa_base;
    assert_int_equal(load(&s, &hp, err, sizeof err), BATON_E_FORMAT);
    assert_string_equal(err, "gemma3.rope.freq_base_swa is -1: the rope base must be finite and "
                             "above 0");
    extra_keys = NULL;
    /* a post norm left out */
    bad.skip = "blk.3.post_ffw_norm.weight";
    assert_int_equal(load(&bad, &hp, err, sizeof err), BATON_E_FORMAT);
    assert_string_equal(err, "tensor 'blk.3.post_ffw_norm.weight': missing");
    /* 62 layers (the 27B's query scale 1/sqrt(n_embd / n_head)) with more
     * heads than n_embd: refused by key, not an infinite scale */
    bad = (struct spec){"gemma3", 4, 8, 8, 62, 2, 2, 0, 1, 0, NULL, 0, 0, 0, NULL, 0};
    assert_int_equal(load(&bad, &hp, err, sizeof err), BATON_E_FORMAT);
    assert_string_equal(err, "gemma3.block_count 62 (Gemma 3 27B: queries scaled by "
                             "1/sqrt(embedding_length / head_count)) with "
                             "gemma3.embedding_length 4 below gemma3.attention.head_count 8");
    bad.n_embd = 8; /* 8 / 8: scale 1 */
    assert_int_equal(load(&bad, &hp, err, sizeof err), 0);
    assert_true(hp.attn_scale == 1.0f);
}

static void test_rope_scaling(void **state)
{
    const struct spec s = {"llama", 128, 4, 4, 1, 0, 0, 0, 0, 0, NULL, 0, 0, 0, NULL, 0};
    struct baton_llama_hparams hp;
    char err[256];

    (void)state;
    /* the older key, no type: linear */
    extra_keys = keys_llama_scale_linear;
    assert_int_equal(load(&s, &hp, err, sizeof err), 0);
    assert_true(hp.rope_scale == 0.5f);
    assert_true(hp.attn_scale == 0.0f && !hp.post_norms && !hp.ffn_gelu && !hp.embd_scale);
    /* type none: a factor is ignored */
    extra_keys = keys_llama_scaling_none;
    assert_int_equal(load(&s, &hp, err, sizeof err), 0);
    assert_true(hp.rope_scale == 1.0f);
    /* a factor of 2^-128: 1 / factor (2^128) is past FLT_MAX */
    extra_keys = keys_tiny_factor;
    assert_int_equal(load(&s, &hp, err, sizeof err), BATON_E_FORMAT);
    assert_string_equal(err, "llama.rope.scaling.factor: 2.93874e-39: the rope scaling factor is too "
                             "small (1 / factor is not a finite float)");
    extra_keys = NULL;
    assert_int_equal(load(&s, &hp, err, sizeof err), 0);
    assert_true(hp.rope_scale == 1.0f);
}

/* s's file is refused as E_FORMAT with the message want. */
static void format_refused(const struct spec *s, const char *want)
{
    struct baton_llama_hparams hp;
    char err[256];

    assert_int_equal(load(s, &hp, err, sizeof err), BATON_E_FORMAT);
    assert_string_equal(err, want);
}

static void test_refusals(void **state)
{
    struct spec s = {"phi3", 128, 4, 4, 1, 0, 0, 0, 0, 0, NULL, 0, 0, 0, NULL, 0};
    struct baton_llama_hparams hp;
    char err[256];

    (void)state;
    assert_int_equal(load(&s, &hp, err, sizeof err), BATON_E_UNSUPPORTED);
    assert_string_equal(err, "general.architecture 'phi3' is not supported (llama, qwen2, qwen3, "
                             "gemma3)");
    /* a width the heads do not divide, without key_length */
    s.arch = "llama";
    s.n_embd = 100;
    s.n_head = 3;
    s.n_head_kv = 3;
    format_refused(&s, "llama.embedding_length 100 is not a multiple of "
                   "llama.attention.head_count 3 (and the file has no "
                   "llama.attention.key_length)");
    /* the key at fault named */
    s.n_embd = 128;
    s.n_head = 3;
    s.n_head_kv = 2;
    format_refused(&s, "llama.attention.head_count 3 is not a multiple of "
                   "llama.attention.head_count_kv 2 (grouped-query attention shares "
                   "each key/value head among the same number of query heads)");
    s.n_head = 4;
    s.n_head_kv = 0;
    format_refused(&s, "llama.attention.head_count_kv is 0");
    /* the float keys: finite, epsilon >= 0, rope base > 0 (inf and NaN too) */
    s.n_head = s.n_head_kv = 4;
    s.floats = 1;
    s.rms_eps = 1e-5f;
    s.rope_base = 10000.0f;
    assert_int_equal(load(&s, &hp, err, sizeof err), 0);
    assert_true(hp.rms_eps == 1e-5f && hp.rope_base == 10000.0f);
    s.rms_eps = INFINITY;
    format_refused(&s, "llama.attention.layer_norm_rms_epsilon is inf: the epsilon must "
                   "be finite and at least 0");
    s.rms_eps = -1.0f;
    format_refused(&s, "llama.attention.layer_norm_rms_epsilon is -1: the epsilon must "
                   "be finite and at least 0");
    s.rms_eps = 0.0f;
    s.rope_base = INFINITY;
    format_refused(&s, "llama.rope.freq_base is inf: the rope base must be finite and "
                   "above 0");
    s.rope_base = NAN;
    format_refused(&s, "llama.rope.freq_base is nan: the rope base must be finite and "
                   "above 0");
    /* a layer count past the file's tensors names the key, not a tensor
     * (the file: token_embd and one attn_norm a layer, 2 tensors here) */
    s.rope_base = 10000.0f;
    block_count = 2147483647u;
    format_refused(&s, "llama.block_count 2147483647 is more layers than the file's 2 tensors "
                   "can hold (each layer has tensors of its own; at most 65536 layers)");
    block_count = 2;
    format_refused(&s, "llama.block_count 2 is more layers than the file's 2 tensors can "
                   "hold (each layer has tensors of its own)");
    /* a count short of the file's layers: blk.1 would be left out */
    s.n_layer = 2;
    block_count = 1;
    format_refused(&s, "llama.block_count is 1 but the file holds tensor "
                   "'blk.1.attn_norm.weight' of a layer past it");
    block_count = 0;
    /* one layer more than the file has, with tensors enough for it (the
     * biases: 4 tensors a layer) */
    s.n_layer = 3;
    s.biases = 1;
    s.skip = "blk.2.attn_norm.weight";
    format_refused(&s, "llama.block_count is 3 but tensor 'blk.2.attn_norm.weight' is missing");
}

/* An optional key of the wrong type, or with a value out of range, is an
 * error that names the key, the type found and the type expected: the
 * default in its place ran another model than the file describes (an
 * epsilon or rotary width of the default), or failed later on a tensor
 * shape without naming the key (head_count_kv). */
static void test_key_types(void **state)
{
    struct spec s = {.arch = "llama", .n_embd = 128, .n_head = 4, .n_head_kv = 4, .n_layer = 1};
    struct baton_llama_hparams hp;
    char err[256];

    (void)state;
    s.odd_key = "attention.layer_norm_rms_epsilon";
    s.odd_type = BATON_GGUF_STRING;
    format_refused(&s, "metadata key 'llama.attention.layer_norm_rms_epsilon': not a float "
                   "(type string; f32 or f64 expected)");
    s.odd_type = BATON_GGUF_F32; /* 8.0: a float, read */
    assert_int_equal(load(&s, &hp, err, sizeof err), 0);
    assert_true(hp.rms_eps == 8.0f);
    s.odd_key = "rope.freq_base";
    s.odd_type = BATON_GGUF_U64;
    format_refused(&s, "metadata key 'llama.rope.freq_base': not a float (type u64; f32 or f64 "
                   "expected)");

    s.odd_key = "rope.dimension_count";
    s.odd_type = BATON_GGUF_STRING;
    format_refused(&s, "metadata key 'llama.rope.dimension_count': not an integer (type string)");
    s.odd_type = BATON_GGUF_F32;
    format_refused(&s, "metadata key 'llama.rope.dimension_count': not an integer (type f32)");
    s.odd_type = BATON_GGUF_U64;
    format_refused(&s, "metadata key 'llama.rope.dimension_count': value 4294967296 out of range "
                   "(0..4294967295)");

    /* it said "tensor 'blk.0.attn_k.weight': shape ..." at upload, or ran */
    s.odd_key = "attention.head_count_kv";
    s.odd_type = BATON_GGUF_STRING;
    format_refused(&s,
                   "metadata key 'llama.attention.head_count_kv': not an integer (type string)");
    s.odd_type = BATON_GGUF_I32;
    format_refused(&s, "metadata key 'llama.attention.head_count_kv': value -1 out of range "
                   "(0..4294967295)");

    /* the other architectures' keys, with their prefixes */
    s.arch = "qwen2";
    s.biases = 1;
    s.odd_key = "attention.layer_norm_rms_epsilon";
    s.odd_type = BATON_GGUF_STRING;
    format_refused(&s, "metadata key 'qwen2.attention.layer_norm_rms_epsilon': not a float "
                   "(type string; f32 or f64 expected)");
    s.arch = "qwen3";
    s.biases = 0;
    s.qk_norm = 1;
    s.key_length = 64;
    s.odd_key = "attention.value_length";
    format_refused(&s,
                   "metadata key 'qwen3.attention.value_length': not an integer (type string)");
    s.odd_key = "attention.key_length";
    s.odd_type = BATON_GGUF_F32;
    format_refused(&s, "metadata key 'qwen3.attention.key_length': not an integer (type f32)");
    /* a required key too names the type it found */
    s.odd_key = "block_count";
    format_refused(&s, "metadata key 'qwen3.block_count': not an integer (type f32)");
}

/* value_length without key_length was ignored: the head size is then
 * embedding_length / head_count, which value_length must equal. */
static void test_value_length_alone(void **state)
{
    struct spec s = {.arch = "llama", .n_embd = 128, .n_head = 4, .n_head_kv = 4, .n_layer = 1};
    struct baton_llama_hparams hp;
    char err[256];

    (void)state;
    s.value_length = 16;
    format_refused(&s, "llama.attention.value_length 16 is not the head size 32 "
                   "(embedding_length / head_count: the file has no "
                   "llama.attention.key_length); baton needs value heads as wide as the key "
                   "heads");
    s.value_length = 64;
    format_refused(&s, "llama.attention.value_length 64 is not the head size 32 "
                   "(embedding_length / head_count: the file has no "
                   "llama.attention.key_length); baton needs value heads as wide as the key "
                   "heads");
    s.value_length = 32; /* what llama.cpp's converters write */
    assert_int_equal(load(&s, &hp, err, sizeof err), 0);
    assert_int_equal(hp.head_dim, 32);
    s.arch = "qwen2";
    s.biases = 1;
    s.value_length = 8;
    format_refused(&s, "qwen2.attention.value_length 8 is not the head size 32 "
                   "(embedding_length / head_count: the file has no "
                   "qwen2.attention.key_length); baton needs value heads as wide as the key "
                   "heads");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama),     cmocka_unit_test(test_qwen2),
        cmocka_unit_test(test_qwen3),     cmocka_unit_test(test_rope_freqs),
        cmocka_unit_test(test_gemma3),    cmocka_unit_test(test_rope_scaling),
        cmocka_unit_test(test_refusals),  cmocka_unit_test(test_key_types),
        cmocka_unit_test(test_value_length_alone),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
