/* Synthetic llama models and weight conversion (see genmodel.h). */
#include "model/genmodel.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "baton/status.h"
#include "compute/cpu/quant.h"
#include "core/types.h"
#include "model/gguf.h"
#include "model/gguf_write.h"
#include "model/llama.h"
#include "model/meminfo.h"
#include "model/quant_preset.h"
#include "wire/wire.h"

/* ---- deterministic stream (xorshift64*, Vigna 2016) ---- */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* uniform in [-1, 1) */
static float rng_sym(uint64_t *s)
{
    return (float)(rng_next(s) >> 40) / 8388608.0f - 1.0f;
}

/* ---- memory available ---- */

/* MemAvailable of this machine in bytes (0 is a value: none available), or
 * -1 where /proc/meminfo cannot be read or has no usable MemAvailable line. */
static double memory_available(void)
{
    char text[16384];
    size_t len = 0;
    uint64_t bytes = 0;
    FILE *f = fopen("/proc/meminfo", "re");

    if (f == NULL)
        return -1.0;
    /* MemAvailable is the third line: a text longer than the buffer is cut */
    len = fread(text, 1, sizeof text, f);
    fclose(f);
    if (baton_meminfo_available(text, len, &bytes) != 0)
        return -1.0;
    return (double)bytes;
}

#define GIB 1073741824.0

/* Whether need bytes fit in the memory available now (memory_available),
 * or in the machine's RAM where that cannot be read: 0 when they fit (or
 * neither figure is known); else 1 (more than MemAvailable) or 2 (more than
 * the RAM), with the comparison for the refusal in what: "more than the
 * 3.1 GiB of memory available now (MemAvailable in /proc/meminfo; this
 * machine has 23.4 GiB of RAM)" or "more than this machine's 23.4 GiB of
 * RAM". */
static int memory_exceeded(double need, char *what, size_t what_len)
{
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    const double ram = pages > 0 && page > 0 ? (double)pages * (double)page : 0.0;
    const double avail = memory_available();

    if (avail >= 0.0 && need > avail) {
        char of_ram[64] = "";

        if (ram > 0.0)
            snprintf(of_ram, sizeof of_ram, "; this machine has %.1f GiB of RAM", ram / GIB);
        snprintf(what, what_len,
                 "more than the %.1f GiB of memory available now (MemAvailable in "
                 "/proc/meminfo%s)",
                 avail / GIB, of_ram);
        return 1;
    }
    if (avail < 0.0 && ram > 0.0 && need > ram) {
        snprintf(what, what_len, "more than this machine's %.1f GiB of RAM", ram / GIB);
        return 2;
    }
    return 0;
}

/* ---- conversion ---- */

static uint64_t row_bytes(uint32_t type, uint64_t row_len)
{
    uint64_t ne[4] = {row_len, 1, 1, 1}, nb[4];

    if (baton_tensor_contiguous_nb(type, ne, nb) != 0)
        return 0;
    return nb[1];
}

int baton_convert_rows(uint32_t type, const float *src, uint64_t n_rows, uint64_t row_len,
                       void *dst)
{
    const uint64_t rb = row_bytes(type, row_len);
    uint64_t r;

    if (rb == 0)
        return BATON_E_SHAPE;
    for (r = 0; r < n_rows; r++) {
        int rc = baton_quantize_row(type, src + r * row_len, (uint8_t *)dst + r * rb, row_len);

        if (rc != 0)
            return rc;
    }
    return 0;
}

/* "blk.N." -> N, -1 for a tensor outside the blocks (llama.cpp's model
 * loader orders tensors by this, then by name). */
static long layer_of(const char *name)
{
    char *end;
    long n;

    if (strncmp(name, "blk.", 4) != 0 || name[4] < '0' || name[4] > '9')
        return -1;
    n = strtol(name + 4, &end, 10);
    return *end == '.' ? n : -1;
}

/* ---- gen-model ---- */

/* Largest n_head x head size gen-model writes (attn_q's rows). */
#define GEN_Q_MAX (1u << 30)

/* The most rows of D any tensor has: max(vocab, ff, dim, n_head x head size). */
static uint64_t gen_widest(uint32_t v, uint32_t f, uint32_t d, uint32_t q)
{
    uint32_t m = v > f ? v : f;

    m = m > d ? m : d;
    return m > q ? m : q;
}

/* "<arch>.<rest>" into buf. */
static const char *akey(char *buf, size_t cap, const char *arch, const char *rest)
{
    snprintf(buf, cap, "%s.%s", arch, rest);
    return buf;
}

struct gen {
    const struct baton_gen_model_config *cfg;
    struct baton_gguf_writer *w;
    uint64_t rng;
    float *f32;
    uint8_t *conv;
    char *err;
    size_t err_len;
};

/* What add_weight writes. */
enum { GEN_MATRIX = 0, GEN_NORM = 1, GEN_BIAS = 2 };

/* Adds a matrix {ne0, ne1} (ne1 rows of ne0) in cfg->type, or a vector in
 * F32: a norm weight (1 + small noise) or a bias (small noise). */
static int add_weight(struct gen *g, const char *name, uint64_t ne0, uint64_t ne1, int is_norm)
{
    const uint64_t n = ne0 * ne1;
    /* gemma3's embedding rows a quarter as large: the graph scales them by
     * sqrt(n_embd) and the head is the same matrix, so at full size a row
     * outweighed the layers' outputs in its own logit and the random model
     * repeated its last token every step (a weak test of the ids) */
    const float scale = (g->cfg->arch == BATON_ARCH_GEMMA3 && strcmp(name, "token_embd.weight") == 0
                             ? 0.25f
                             : 1.0f) /
                        sqrtf((float)ne0);
    uint32_t type = is_norm ? BATON_TYPE_F32 : g->cfg->type;
    uint64_t ne[2] = {ne0, ne1}, bytes;

    if (!is_norm && g->cfg->preset != BATON_PRESET_NONE) {
        /* a mix: llama.cpp's choice for this tensor; every layer has one
         * attn_v and one ffn_down, so their rank is the layer */
        struct baton_quant_plan plan;
        const long layer = layer_of(name);

        memset(&plan, 0, sizeof plan);
        plan.preset = g->cfg->preset;
        plan.n_layer = plan.n_attn_v = g->cfg->n_layer;
        plan.n_gqa = g->cfg->n_head / g->cfg->n_head_kv;
        /* (llama.cpp's gemma3 loader names no 70B type: gemma3 is never one) */
        plan.is_70b = g->cfg->n_layer == 80 && g->cfg->n_head != g->cfg->n_head_kv &&
                      g->cfg->arch != BATON_ARCH_GEMMA3;
        /* gemma3's head is token_embd: the preset gives it the head's type */
        plan.has_output = g->cfg->arch != BATON_ARCH_GEMMA3;
        plan.attn_v_rank = plan.ffn_down_rank = layer < 0 ? 0 : (uint32_t)layer;
        type = baton_quant_preset_type(&plan, name, ne0);
    }
    uint64_t i;
    int rc;

    for (i = 0; i < n; i++)
        g->f32[i] = is_norm == GEN_NORM   ? 1.0f + 0.05f * rng_sym(&g->rng)
                    : is_norm == GEN_BIAS ? 0.1f * rng_sym(&g->rng)
                                          : scale * rng_sym(&g->rng);
    bytes = row_bytes(type, ne0) * ne1;
    if (bytes == 0) {
        snprintf(g->err, g->err_len, "tensor '%s': row of %llu does not fit type %s", name,
                 (unsigned long long)ne0, baton_type_name(type));
        return BATON_E_SHAPE;
    }
    rc = baton_convert_rows(type, g->f32, ne1, ne0, g->conv);
    if (rc == 0)
        rc = baton_gguf_w_tensor(g->w, name, type, is_norm ? 1 : 2, ne, g->conv, bytes);
    if (rc != 0)
        snprintf(g->err, g->err_len, "tensor '%s': %s", name, baton_status_str(rc));
    return rc;
}

/* The synthetic SentencePiece vocabulary: <unk>, <s>, </s>, the 256 byte
 * tokens, "▁", letters, "▁"+letter, then letter pairs until n_vocab. */
static int add_synthetic_vocab(struct gen *g, uint32_t n_vocab)
{
    char (*pieces)[8] = calloc(n_vocab, sizeof(*pieces));
    const char **strs = calloc(n_vocab, sizeof(*strs));
    size_t *lens = calloc(n_vocab, sizeof(*lens));
    float *scores = calloc(n_vocab, sizeof(*scores));
    int32_t *types = calloc(n_vocab, sizeof(*types));
    uint32_t i, n = 0;
    int rc = BATON_E_NOMEM;

    if (!pieces || !strs || !lens || !scores || !types)
        goto out;
    snprintf(pieces[n], 8, "<unk>"), types[n++] = 2;
    snprintf(pieces[n], 8, "<s>"), types[n++] = 3;
    snprintf(pieces[n], 8, "</s>"), types[n++] = 3;
    for (i = 0; i < 256; i++)
        snprintf(pieces[n], 8, "<0x%02X>", i), types[n++] = 6;
    snprintf(pieces[n], 8, "\xe2\x96\x81"), types[n++] = 1;
    for (i = 0; i < 26 && n < n_vocab; i++)
        snprintf(pieces[n], 8, "%c", 'a' + i), types[n++] = 1;
    for (i = 0; i < 26 && n < n_vocab; i++)
        snprintf(pieces[n], 8, "\xe2\x96\x81%c", 'a' + i), types[n++] = 1;
    for (i = 0; n < n_vocab; i++)
        snprintf(pieces[n], 8, "%c%c", 'a' + (i / 26) % 26, 'a' + i % 26), types[n++] = 1;
    for (i = 0; i < n_vocab; i++) {
        strs[i] = pieces[i];
        lens[i] = strlen(pieces[i]);
        scores[i] = types[i] == 1 ? -(float)i : 0.0f;
    }
    rc = baton_gguf_w_string(g->w, "tokenizer.ggml.model", "llama", 5);
    if (rc == 0)
        rc = baton_gguf_w_str_array(g->w, "tokenizer.ggml.tokens", strs, lens, n_vocab);
    if (rc == 0)
        rc = baton_gguf_w_f32_array(g->w, "tokenizer.ggml.scores", scores, n_vocab);
    if (rc == 0)
        rc = baton_gguf_w_i32_array(g->w, "tokenizer.ggml.token_type", types, n_vocab);
    if (rc == 0)
        rc = baton_gguf_w_u32(g->w, "tokenizer.ggml.bos_token_id", 1);
    if (rc == 0)
        rc = baton_gguf_w_u32(g->w, "tokenizer.ggml.eos_token_id", 2);
    if (rc == 0)
        rc = baton_gguf_w_u32(g->w, "tokenizer.ggml.unknown_token_id", 0);
out:
    free(pieces);
    free(strs);
    free(lens);
    free(scores);
    free(types);
    return rc;
}

/* The tokenizer arrays --vocab-from copies, with the element type llama.cpp
 * writes and reads for each (llama-vocab.cpp) and baton's tokenizer takes,
 * and whether they hold one value per token. tokens comes first: the others
 * are counted against it. */
static const struct {
    const char *key;
    uint32_t elem_type;
    int per_token;
} vocab_arrays[] = {
    {"tokenizer.ggml.tokens", BATON_GGUF_STRING, 1},
    {"tokenizer.ggml.scores", BATON_GGUF_F32, 1},
    {"tokenizer.ggml.token_type", BATON_GGUF_I32, 1},
    {"tokenizer.ggml.merges", BATON_GGUF_STRING, 0},
};

/* Copies every tokenizer.* key of path; *n_vocab gets the token count. A
 * tokenizer array of another element type (or, for scores and token_type,
 * another length) is refused, naming the file and the key: the model would
 * be written, and its tokenizer refused by baton tokenize and run. */
static int copy_vocab(struct gen *g, const char *path, uint32_t *n_vocab)
{
    struct baton_gguf *src = NULL;
    uint64_t i, count = 0;
    char why[400];
    int rc = baton_gguf_open(path, &src, why, sizeof why);

    if (rc != 0) { /* why names the file */
        snprintf(g->err, g->err_len, "--vocab-from %s", why);
        return rc;
    }
    if (baton_gguf_find_key(src, "tokenizer.ggml.tokens") == NULL) {
        snprintf(g->err, g->err_len, "--vocab-from %s: no tokenizer.ggml.tokens array", path);
        rc = BATON_E_FORMAT;
        goto out;
    }
    for (i = 0; i < sizeof vocab_arrays / sizeof vocab_arrays[0]; i++) {
        const char *key = vocab_arrays[i].key;
        const uint32_t want = vocab_arrays[i].elem_type;
        const struct baton_gguf_kv *kv = baton_gguf_find_key(src, key);
        uint32_t et = 0;
        uint64_t n = 0;

        if (kv == NULL)
            continue; /* only tokens is required */
        rc = BATON_E_FORMAT;
        if (baton_gguf_kv_array(kv, &et, &n) != 0) {
            snprintf(g->err, g->err_len, "--vocab-from %s: key '%s' is a %s, not an array of %s",
                     path, key, baton_gguf_type_name(baton_gguf_kv_type(kv)),
                     baton_gguf_type_name(want));
            goto out;
        }
        if (et != want) {
            snprintf(g->err, g->err_len,
                     "--vocab-from %s: key '%s' is an array of %s, not of %s (as llama.cpp "
                     "writes and reads it)",
                     path, key, baton_gguf_type_name(et), baton_gguf_type_name(want));
            goto out;
        }
        if (i == 0)
            count = n;
        if (vocab_arrays[i].per_token && n != count) {
            snprintf(g->err, g->err_len,
                     "--vocab-from %s: key '%s' holds %llu values, not one per token (%llu)",
                     path, key, (unsigned long long)n, (unsigned long long)count);
            goto out;
        }
        rc = 0;
    }
    if (count == 0 || count > 0x7fffffffu) {
        snprintf(g->err, g->err_len, "--vocab-from %s: no tokenizer.ggml.tokens array", path);
        rc = BATON_E_FORMAT;
        goto out;
    }
    *n_vocab = (uint32_t)count;
    for (i = 0; rc == 0 && i < baton_gguf_n_kv(src); i++) {
        const struct baton_gguf_kv *kv = baton_gguf_kv_at(src, i);
        const char *key = baton_gguf_kv_key(kv);
        const void *raw;
        size_t len;

        if (strncmp(key, "tokenizer.", 10) != 0)
            continue;
        rc = baton_gguf_kv_raw(kv, &raw, &len);
        if (rc == 0)
            rc = baton_gguf_w_raw(g->w, key, baton_gguf_kv_type(kv), raw, len);
    }
out:
    baton_gguf_close(src);
    return rc;
}

/* rope_freqs.weight {hd/2}: the divisors Llama 3.1's converter writes for
 * its rope scaling (factor 8, low_freq_factor 1, high_freq_factor 4, an
 * original context of 8192; Meta's reference apply_scaling, in our words):
 * a pair whose wavelength 2 pi / freq is below 8192 / 4 keeps its frequency
 * (divisor 1), one above 8192 / 1 is slowed 8 times (divisor 8), and those
 * between blend the two: s = (8192 / wavelength - 1) / (4 - 1), divisor =
 * 1 / ((1 - s) / 8 + s). */
static int add_rope_freqs(struct gen *g, uint32_t hd, float base)
{
    const double factor = 8.0, lo = 1.0, hi = 4.0, old_ctx = 8192.0;
    const uint64_t ne[1] = {hd / 2};
    uint32_t i;

    for (i = 0; i < hd / 2; i++) {
        const double freq = pow((double)base, -2.0 * i / hd);
        const double wavelen = 2.0 * M_PI / freq;
        double div;

        if (wavelen < old_ctx / hi) {
            div = 1.0;
        } else if (wavelen > old_ctx / lo) {
            div = factor;
        } else {
            const double s = (old_ctx / wavelen - lo) / (hi - lo);

            div = 1.0 / ((1.0 - s) / factor + s);
        }
        g->f32[i] = (float)div;
    }
    return baton_gguf_w_tensor(g->w, "rope_freqs.weight", BATON_TYPE_F32, 1, ne, g->f32,
                               (uint64_t)(hd / 2) * sizeof(float));
}

int baton_gen_model(const struct baton_gen_model_config *cfg, char *err, size_t err_len)
{
    struct gen g;
    const uint32_t D = cfg->n_embd, F = cfg->n_ff;
    const int gemma3 = cfg->arch == BATON_ARCH_GEMMA3;
    /* gemma3's window: 512 unless --swa says otherwise (Gemma 3's 1B and
     * larger have 512 or 1024) */
    const uint32_t n_swa = cfg->swa_given ? cfg->n_swa : gemma3 ? 512u : 0u;
    uint32_t V = cfg->n_vocab, l, kv_dim, hd, QD;
    const char *a;
    char k[96];
    uint64_t biggest;
    char name[96];
    int rc;

    memset(&g, 0, sizeof(g));
    g.cfg = cfg;
    g.err = err;
    g.err_len = err_len;
    g.rng = cfg->seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
    if (g.rng == 0)
        g.rng = 1;
    /* each refusal names the rule it breaks and the values, as the options
     * of baton gen-model spell them */
    if (cfg->n_layer == 0 || D == 0 || F == 0 || cfg->n_head == 0 || cfg->n_head_kv == 0) {
        snprintf(err, err_len, "--layers, --dim, --ff, --heads and --kv-heads must be at least 1");
        return BATON_E_INVAL;
    }
    if (cfg->arch > BATON_ARCH_GEMMA3) {
        snprintf(err, err_len, "unknown architecture %u", cfg->arch);
        return BATON_E_INVAL;
    }
    /* llama.cpp loads qwen2 only with n_embd / n_head heads, and reads
     * rope_freqs.weight only for llama: files it would refuse are not
     * written (gen-model's files run in llama.cpp too) */
    if (cfg->head_dim != 0 && cfg->arch == BATON_ARCH_QWEN2 &&
        cfg->head_dim * (uint64_t)cfg->n_head != D) {
        snprintf(err, err_len,
                 "--head-dim %u with --arch qwen2: qwen2's heads are --dim / --heads wide "
                 "(llama.cpp refuses other widths; llama, qwen3 and gemma3 take --head-dim)",
                 cfg->head_dim);
        return BATON_E_INVAL;
    }
    if (cfg->rope_freqs && cfg->arch != BATON_ARCH_LLAMA) {
        snprintf(err, err_len, "--rope-freqs is Llama 3.1's rope scaling: only with --arch llama");
        return BATON_E_INVAL;
    }
    /* the sliding window and the linear rope scale are gemma3's keys: the
     * loaders of llama, qwen2 and qwen3 (baton's and llama.cpp's) would not
     * read them, so a file with them would not be what was asked for */
    if (cfg->arch != BATON_ARCH_GEMMA3 &&
        (cfg->swa_given || cfg->swa_period != 0 || cfg->rope_scale != 0.0f)) {
        snprintf(err, err_len, "%s is gemma3's: only with --arch gemma3",
                 cfg->swa_given          ? "--swa (a sliding window)"
                 : cfg->swa_period != 0 ? "--swa-period (the sliding-window layer pattern)"
                                         : "--rope-scale (a linear rope scale)");
        return BATON_E_INVAL;
    }
    if (cfg->swa_period != 0 && n_swa == 0) {
        snprintf(err, err_len,
                 "--swa-period %u with --swa 0: the period says which layers slide, and with "
                 "no window none does (give --swa N > 0)",
                 cfg->swa_period);
        return BATON_E_INVAL;
    }
    if (cfg->rope_scale < 0.0f || !isfinite(cfg->rope_scale)) {
        snprintf(err, err_len, "--rope-scale %g: the factor must be above 0",
                 (double)cfg->rope_scale);
        return BATON_E_INVAL;
    }
    if (cfg->head_dim != 0) {
        hd = cfg->head_dim;
    } else if (D % cfg->n_head != 0) {
        snprintf(err, err_len,
                 "--dim %u is not a multiple of --heads %u: the heads split the embedding "
                 "evenly (dim %% heads == 0)",
                 D, cfg->n_head);
        return BATON_E_INVAL;
    } else {
        hd = D / cfg->n_head;
    }
    if (cfg->head_dim == 0 && hd % 2 != 0) {
        snprintf(err, err_len,
                 "--dim %u / --heads %u = %u: the head size must be even (RoPE rotates pairs)", D,
                 cfg->n_head, hd);
        return BATON_E_INVAL;
    }
    if (hd % 2 != 0 || (uint64_t)hd * cfg->n_head > GEN_Q_MAX) {
        snprintf(err, err_len,
                 "head size %u (--head-dim, or --dim / --heads): must be even (RoPE rotates "
                 "pairs) and heads x head size at most %u",
                 hd, GEN_Q_MAX);
        return BATON_E_INVAL;
    }
    QD = hd * cfg->n_head;
    if (cfg->n_head % cfg->n_head_kv != 0) {
        snprintf(err, err_len,
                 "--heads %u is not a multiple of --kv-heads %u: each key/value head serves the "
                 "same number of query heads (heads %% kv-heads == 0)",
                 cfg->n_head, cfg->n_head_kv);
        return BATON_E_INVAL;
    }
    /* the rows of the matrices are --dim or --ff long; the K-quants store
     * them in super-blocks of 256 (a mix falls back per matrix, as
     * llama.cpp does, down to blocks of 32) */
    if (cfg->preset == BATON_PRESET_NONE && cfg->type != BATON_TYPE_F32 &&
        baton_type_get(cfg->type) && baton_type_get(cfg->type)->block_elems == 256 &&
        (D % 256 != 0 || F % 256 != 0)) {
        snprintf(err, err_len,
                 "%s %u is not a multiple of 256: %s stores the rows of the matrices (--dim and "
                 "--ff long) in super-blocks of 256",
                 D % 256 != 0 ? "--dim" : "--ff", D % 256 != 0 ? D : F,
                 baton_type_name(cfg->type));
        return BATON_E_INVAL;
    }
    /* q8_0 and q4_0 store them in blocks of 32 (gen-model holds f16 and the
     * mixes to the same rule) */
    if ((cfg->type != BATON_TYPE_F32 || cfg->preset != BATON_PRESET_NONE) &&
        (D % 32 != 0 || F % 32 != 0)) {
        const char *opt = D % 32 != 0 ? "--dim" : "--ff";
        const uint32_t v = D % 32 != 0 ? D : F;

        if (cfg->type == BATON_TYPE_F16 || cfg->type == BATON_TYPE_BF16)
            snprintf(err, err_len,
                     "%s %u is not a multiple of 32: gen-model writes %s matrices only with "
                     "--dim and --ff multiples of 32",
                     opt, v, baton_type_name(cfg->type));
        else
            snprintf(err, err_len,
                     "%s %u is not a multiple of 32: %s stores the rows of the matrices (--dim "
                     "and --ff long) in blocks of 32",
                     opt, v,
                     cfg->preset != BATON_PRESET_NONE ? baton_quant_preset_name(cfg->preset)
                                                      : baton_type_name(cfg->type));
        return BATON_E_INVAL;
    }
    if (cfg->preset == BATON_PRESET_NONE && baton_type_get(cfg->type) &&
        baton_type_get(cfg->type)->block_elems == 256 && QD % 256 != 0) {
        snprintf(err, err_len,
                 "--heads %u x head size %u = %u is not a multiple of 256: %s stores the rows "
                 "of attn_output in super-blocks of 256",
                 cfg->n_head, hd, QD, baton_type_name(cfg->type));
        return BATON_E_INVAL;
    }
    if (cfg->type != BATON_TYPE_F32 && QD % 32 != 0) {
        const int h16 = cfg->type == BATON_TYPE_F16 || cfg->type == BATON_TYPE_BF16;

        snprintf(err, err_len,
                 "--heads %u x head size %u = %u is not a multiple of 32: %s%s%s", cfg->n_head,
                 hd, QD, h16 ? "gen-model writes " : "", baton_type_name(cfg->type),
                 h16 ? " attn_output only with rows of a multiple of 32"
                     : " stores the rows of attn_output in blocks of 32");
        return BATON_E_INVAL;
    }
    kv_dim = hd * cfg->n_head_kv;
    a = baton_llama_arch_name(cfg->arch);
    rc = baton_gguf_writer_create(&g.w);
    if (rc != 0)
        return rc;
    rc = baton_gguf_w_string(g.w, "general.architecture", a, strlen(a));
    if (rc == 0)
        rc = baton_gguf_w_string(g.w, "general.name", "baton-gen-model", 15);
    if (rc == 0 && cfg->preset != BATON_PRESET_NONE) /* a mix: as llama-quantize marks it */
        rc = baton_gguf_w_u32(g.w, "general.file_type", baton_quant_preset_ftype(cfg->preset));
    if (rc == 0)
        rc = baton_gguf_w_u32(g.w, akey(k, sizeof k, a, "context_length"),
                              cfg->n_ctx ? cfg->n_ctx : 2048);
    if (rc == 0)
        rc = baton_gguf_w_u32(g.w, akey(k, sizeof k, a, "embedding_length"), D);
    if (rc == 0)
        rc = baton_gguf_w_u32(g.w, akey(k, sizeof k, a, "block_count"), cfg->n_layer);
    if (rc == 0)
        rc = baton_gguf_w_u32(g.w, akey(k, sizeof k, a, "feed_forward_length"), F);
    if (rc == 0)
        rc = baton_gguf_w_u32(g.w, akey(k, sizeof k, a, "rope.dimension_count"), hd);
    if (rc == 0)
        rc = baton_gguf_w_u32(g.w, akey(k, sizeof k, a, "attention.head_count"), cfg->n_head);
    if (rc == 0)
        rc = baton_gguf_w_u32(g.w, akey(k, sizeof k, a, "attention.head_count_kv"),
                              cfg->n_head_kv);
    /* (gemma3's converter writes the head size always, default 256) */
    if (rc == 0 && (cfg->head_dim != 0 || gemma3))
        rc = baton_gguf_w_u32(g.w, akey(k, sizeof k, a, "attention.key_length"), hd);
    if (rc == 0 && (cfg->head_dim != 0 || gemma3))
        rc = baton_gguf_w_u32(g.w, akey(k, sizeof k, a, "attention.value_length"), hd);
    if (rc == 0)
        rc = baton_gguf_w_f32(g.w, akey(k, sizeof k, a, "attention.layer_norm_rms_epsilon"),
                              cfg->arch == BATON_ARCH_LLAMA ? 1e-5f : 1e-6f);
    if (rc == 0)
        rc = baton_gguf_w_f32(g.w, akey(k, sizeof k, a, "rope.freq_base"),
                              cfg->rope_base > 0.0f               ? cfg->rope_base
                              : cfg->arch == BATON_ARCH_LLAMA ? 10000.0f
                                                                  : 1000000.0f);
    /* gemma3: the window of the sliding layers, which layers slide (llama.cpp
     * assumes 6 without the key: five sliding, then one global), and the
     * global layers' linear rope scale (Gemma 3 4B and larger: factor 8) */
    if (rc == 0 && n_swa != 0)
        rc = baton_gguf_w_u32(g.w, akey(k, sizeof k, a, "attention.sliding_window"), n_swa);
    if (rc == 0 && cfg->swa_period != 0)
        rc = baton_gguf_w_u32(g.w, akey(k, sizeof k, a, "attention.sliding_window_pattern"),
                              cfg->swa_period);
    if (rc == 0 && cfg->rope_scale > 0.0f)
        rc = baton_gguf_w_string(g.w, akey(k, sizeof k, a, "rope.scaling.type"), "linear", 6);
    if (rc == 0 && cfg->rope_scale > 0.0f)
        rc = baton_gguf_w_f32(g.w, akey(k, sizeof k, a, "rope.scaling.factor"), cfg->rope_scale);
    if (rc == 0)
        rc = cfg->vocab_from ? copy_vocab(&g, cfg->vocab_from, &V) : add_synthetic_vocab(&g, V);
    if (rc != 0) {
        if (err[0] == '\0')
            snprintf(err, err_len, "metadata: %s", baton_status_str(rc));
        goto out;
    }
    /* the writer holds every tensor until the file is written: a model
     * larger than the memory available now is refused before anything is
     * allocated (a 450 TiB shape otherwise grew to 19 GiB of RSS in a
     * minute on a 24 GiB machine before the OOM killer came; one just under
     * the RAM, with part of it in use, ends the same way) */
    {
        /* (a mix: at most Q8_0's 34 bytes per 32 elements) */
        const uint32_t est = cfg->preset != BATON_PRESET_NONE ? BATON_TYPE_Q8_0 : cfg->type;
        const double mat = (double)row_bytes(est, D);
        const double big = (double)D * gen_widest(V, F, D, QD);
        /* the file's tensors, plus the two float scratch rows sets below */
        const double total =
            8.0 * big + (gemma3 ? 1.0 : 2.0) * mat * V + 4.0 * D +
            (double)cfg->n_layer * (mat * ((double)QD + 2.0 * kv_dim + 2.0 * F) +
                                    (double)row_bytes(est, QD) * D +
                                    (double)row_bytes(est, F) * D + 8.0 * D +
                                    (cfg->arch == BATON_ARCH_QWEN2   ? 4.0 * (QD + 2.0 * kv_dim)
                                     : cfg->arch == BATON_ARCH_QWEN3 ? 8.0 * hd
                                     : gemma3                        ? 8.0 * hd + 8.0 * D
                                                                     : 0.0));
        char what[200];
        const int over = memory_exceeded(total, what, sizeof what);

        if (over != 0) {
            rc = BATON_E_LIMIT;
            snprintf(err, err_len, "the model would take %.1f GiB, %s%s", total / GIB, what,
                     over == 1 ? "; gen-model builds the file in memory: use fewer --layers or "
                                 "a smaller --dim, --ff or vocabulary"
                               : " (gen-model builds the file in memory); use fewer --layers or "
                                 "a smaller --dim, --ff or vocabulary");
            goto out;
        }
    }
    biggest = (uint64_t)D * gen_widest(V, F, D, QD);
    g.f32 = malloc(biggest * sizeof(float));
    g.conv = malloc(biggest * sizeof(float));
    if (g.f32 == NULL || g.conv == NULL) {
        rc = BATON_E_NOMEM;
        snprintf(err, err_len,
                 "out of memory (two scratch buffers of %llu floats each, %.1f GiB in all, for "
                 "dim x max(vocab, ff, dim))",
                 (unsigned long long)biggest, 2.0 * (double)biggest * sizeof(float) / 1073741824.0);
        goto out;
    }
    rc = cfg->rope_freqs ? add_rope_freqs(&g, hd, cfg->rope_base > 0.0f ? cfg->rope_base
                                                                         : 10000.0f)
                         : 0;
    if (rc == 0)
        rc = add_weight(&g, "token_embd.weight", D, V, 0);
    if (rc == 0)
        rc = add_weight(&g, "output_norm.weight", D, 1, 1);
    if (rc == 0 && !gemma3) /* gemma3 ties its head to the embedding */
        rc = add_weight(&g, "output.weight", D, V, 0);
    for (l = 0; rc == 0 && l < cfg->n_layer; l++) {
        static const char *const fmt[9] = {
            "blk.%u.attn_norm.weight", "blk.%u.attn_q.weight",      "blk.%u.attn_k.weight",
            "blk.%u.attn_v.weight",    "blk.%u.attn_output.weight", "blk.%u.ffn_norm.weight",
            "blk.%u.ffn_gate.weight",  "blk.%u.ffn_up.weight",      "blk.%u.ffn_down.weight"};
        const uint64_t shape[9][2] = {{D, 1}, {D, QD}, {D, kv_dim}, {D, kv_dim}, {QD, D},
                                      {D, 1}, {D, F},  {D, F},      {F, D}};
        /* qwen2's Q/K/V biases, qwen3's and gemma3's Q/K norms, gemma3's
         * norms of the attention's and the feed-forward's outputs (llama.cpp's
         * names) */
        static const char *const fmt_x[7] = {
            "blk.%u.attn_q.bias",        "blk.%u.attn_k.bias",
            "blk.%u.attn_v.bias",        "blk.%u.attn_q_norm.weight",
            "blk.%u.attn_k_norm.weight", "blk.%u.post_attention_norm.weight",
            "blk.%u.post_ffw_norm.weight"};
        const uint64_t len_x[7] = {QD, kv_dim, kv_dim, hd, hd, D, D};
        uint32_t j;

        for (j = 0; rc == 0 && j < 9; j++) {
            snprintf(name, sizeof(name), fmt[j], l);
            rc = add_weight(&g, name, shape[j][0], shape[j][1],
                            shape[j][1] == 1 ? GEN_NORM : GEN_MATRIX);
        }
        for (j = 0; rc == 0 && j < 7; j++) {
            if (j < 3   ? cfg->arch != BATON_ARCH_QWEN2
                : j < 5 ? cfg->arch != BATON_ARCH_QWEN3 && !gemma3
                        : !gemma3)
                continue;
            snprintf(name, sizeof(name), fmt_x[j], l);
            rc = add_weight(&g, name, len_x[j], 1, j < 3 ? GEN_BIAS : GEN_NORM);
        }
    }
    if (rc == 0)
        rc = baton_gguf_writer_write(g.w, cfg->out_path, err, err_len);
out:
    free(g.f32);
    free(g.conv);
    baton_gguf_writer_free(g.w);
    return rc;
}

/* ---- quantize ---- */

/* One matrix of a rank category (attn_v or ffn_down), for the sort. */
struct ranked {
    long layer;       /* layer_of(name) */
    const char *name; /* owned by the source file */
    uint64_t index;   /* the tensor's index in the file */
};

/* llama.cpp's loader order: layer (-1, outside the blocks, first), then name. */
static int ranked_cmp(const void *pa, const void *pb)
{
    const struct ranked *a = pa, *b = pb;

    if (a->layer != b->layer)
        return a->layer < b->layer ? -1 : 1;
    return strcmp(a->name, b->name);
}

/* rank[i], for each tensor i of src that is(name) selects and the preset
 * applies to: the number of those tensors before it in llama.cpp's loader
 * order (ranked_cmp; tensors that compare equal share a rank); the other
 * entries of rank[0..n_tensors) are left alone. Their count in *n. One sort,
 * O(n log n): a scan of the file per tensor made quantizing 4096 layers to
 * q4_k_m take 36 s. Returns 0 or BATON_E_NOMEM. */
static int rank_all(const struct baton_gguf *src, int (*is)(const char *), uint32_t *rank,
                    uint32_t *n)
{
    const uint64_t n_tensors = baton_gguf_n_tensors(src);
    struct ranked *v = malloc((n_tensors ? n_tensors : 1) * sizeof *v);
    uint64_t i, k, m = 0;

    *n = 0;
    if (v == NULL)
        return BATON_E_NOMEM;
    for (i = 0; i < n_tensors; i++) {
        struct baton_gguf_tensor t;

        if (baton_gguf_tensor_at(src, i, &t) != 0 || !is(t.name) ||
            !baton_quant_preset_applies(t.name, t.n_dims))
            continue;
        v[m].layer = layer_of(t.name);
        v[m].name = t.name;
        v[m].index = i;
        m++;
    }
    qsort(v, m, sizeof *v, ranked_cmp);
    for (k = 0; k < m; k++)
        rank[v[k].index] =
            k > 0 && ranked_cmp(&v[k - 1], &v[k]) == 0 ? rank[v[k - 1].index] : (uint32_t)k;
    *n = (uint32_t)m;
    free(v);
    return 0;
}

/* The hyperparameters the preset rules read, from the file's metadata
 * (n_attn_v and the ranks are the caller's: rank_all). */
static void plan_from_file(const struct baton_gguf *src, int preset, struct baton_quant_plan *p)
{
    const char *arch = "";
    size_t arch_len = 0;
    char key[96], a[32] = "";
    uint32_t n_head = 1, n_head_kv = 0;
    struct baton_gguf_tensor t;

    memset(p, 0, sizeof *p);
    p->preset = preset;
    p->has_output = baton_gguf_find_tensor(src, "output.weight", &t, NULL) == 0;
    if (baton_gguf_get_string(src, "general.architecture", &arch, &arch_len) == 0 &&
        arch_len < sizeof a) {
        memcpy(a, arch, arch_len);
        a[arch_len] = '\0';
    }
    snprintf(key, sizeof key, "%s.block_count", a);
    if (baton_gguf_get_u32(src, key, &p->n_layer) != 0) {
        /* no block count: one ffn_down per layer */
        for (uint64_t i = 0; i < baton_gguf_n_tensors(src); i++)
            if (baton_gguf_tensor_at(src, i, &t) == 0 && baton_quant_preset_is_ffn_down(t.name))
                p->n_layer++;
    }
    snprintf(key, sizeof key, "%s.attention.head_count", a);
    (void)baton_gguf_get_u32(src, key, &n_head);
    snprintf(key, sizeof key, "%s.attention.head_count_kv", a);
    if (baton_gguf_get_u32(src, key, &n_head_kv) != 0)
        n_head_kv = n_head;
    p->n_gqa = n_head_kv ? n_head / n_head_kv : 0;
    p->is_70b = p->n_layer == 80 &&
                ((strcmp(a, "llama") == 0 && n_head != n_head_kv) || strcmp(a, "qwen2") == 0);
}

/* A tensor name from the input file as messages quote it: control bytes
 * escaped (baton_gguf_escape), so a crafted name cannot drive the
 * terminal. */
static const char *shown_name(const char *name, char *buf, size_t cap)
{
    return baton_gguf_escape(buf, cap, name, strlen(name));
}

/* Why the quantizer refused tensor t's values (BATON_E_INVAL): the first
 * value that is NaN or infinite, else the largest magnitude, which gives a
 * block a scale that binary16 cannot hold (compute/cpu/quant.h). t is 2-D,
 * F32, F16 or BF16; its values are read a chunk at a time. */
static void describe_unconvertible(const struct baton_gguf_tensor *t, uint32_t type,
                                   const char *in_path, char *err, size_t err_len)
{
    enum { CHUNK = 1024 };
    const uint8_t *base = t->data; /* (F32 data need not be aligned for float) */
    const uint64_t n = t->ne[0] * t->ne[1];
    float x[CHUNK], big = 0.0f, big_value = 0.0f;
    uint64_t i, at = 0;
    char shown[128];

    for (i = 0; i < n; i++) {
        float v;

        if (i % CHUNK == 0) {
            const uint64_t k = n - i < CHUNK ? n - i : CHUNK;

            /* F32 (a copy), F16 or BF16: cannot fail */
            (void)baton_dequantize_row(t->type, base + i * (t->type == BATON_TYPE_F32 ? 4 : 2),
                                       x, k);
        }
        v = x[i % CHUNK];
        if (!isfinite(v)) {
            snprintf(err, err_len,
                     "%s: tensor '%s': element %llu is %s, which %s cannot hold (baton inspect "
                     "--check names every tensor with NaN or infinite values)",
                     in_path, shown_name(t->name, shown, sizeof shown), (unsigned long long)i,
                     isnan(v) ? "NaN" : "infinite",
                     baton_type_name(type));
            return;
        }
        if (i == 0 || fabsf(v) > big) {
            big = fabsf(v);
            big_value = v;
            at = i;
        }
    }
    snprintf(err, err_len,
             "%s: tensor '%s': element %llu (%g) is too large for %s: a block's scale would "
             "not fit binary16",
             in_path, shown_name(t->name, shown, sizeof shown), (unsigned long long)at,
             (double)big_value, baton_type_name(type));
}

/* The limit below which a value fits out_type's range: F16 and BF16 keep
 * NaN and infinities, but a finite value the half type cannot hold would
 * become infinite: binary16 rounds |x| >= 65520 past 65504, its largest
 * finite value; bfloat16 rounds |x| >= 2^128 - 2^119 past 2^128 - 2^120
 * (about 3.39e38). +inf for the other types (their quantizers check). */
static float half_limit(uint32_t out_type)
{
    return out_type == BATON_TYPE_F16    ? 65520.0f
           : out_type == BATON_TYPE_BF16 ? 0x1.ffp127f
                                         : INFINITY;
}

/* The first element of row (ne0 floats) that is finite and at least lim in
 * magnitude, or ne0. */
static uint64_t first_beyond(const float *row, uint64_t ne0, float lim)
{
    uint64_t e;

    for (e = 0; e < ne0 && !(isfinite(row[e]) && fabsf(row[e]) >= lim); e++)
        ;
    return e;
}

/* Rows [r0, r1) of tensor t to out_type into dst, rb bytes per row, through
 * row (t->ne[0] floats); *bad = the first row that failed (its status
 * returned), else r1. */
static int convert_rows(const struct baton_gguf_tensor *t, uint32_t out_type, float *row,
                        uint8_t *dst, uint64_t rb, uint64_t r0, uint64_t r1, uint64_t *bad)
{
    const uint64_t ne0 = t->ne[0];
    const uint8_t *base = t->data; /* (F32 data need not be aligned for float) */
    const float lim = half_limit(out_type);
    uint64_t r;
    int rc = 0;

    for (r = r0; r < r1; r++) {
        /* F32 (a copy), F16 or BF16 (out_type_of): cannot fail */
        (void)baton_dequantize_row(t->type, base + r * ne0 * (t->type == BATON_TYPE_F32 ? 4 : 2),
                                   row, ne0);
        rc = first_beyond(row, ne0, lim) < ne0 ? BATON_E_INVAL
                                               : baton_quantize_row(out_type, row, dst + r * rb,
                                                                    ne0);
        if (rc != 0)
            break;
    }
    *bad = r;
    return rc;
}

/* One thread's share of a tensor's rows (convert_tensor). */
struct conv_part {
    const struct baton_gguf_tensor *t;
    uint32_t out_type;
    uint8_t *dst;
    uint64_t rb, r0, r1, bad;
    int rc;
};

static void *conv_part_run(void *arg)
{
    struct conv_part *p = arg;
    float *row = malloc(p->t->ne[0] * sizeof(float)); /* ne0 fits: the tensor was read */

    p->rc = row != NULL ? convert_rows(p->t, p->out_type, row, p->dst, p->rb, p->r0, p->r1,
                                       &p->bad)
                        : BATON_E_NOMEM;
    free(row);
    return NULL;
}

/* Threads for a tensor of n elements in n_rows rows: one per online CPU (at
 * most 16), fewer for small tensors (at least 2^16 elements and 8 rows
 * each), 1 where the count is unknown. */
static unsigned conv_threads(uint64_t n, uint64_t n_rows)
{
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    uint64_t k = cpus > 1 ? (uint64_t)cpus : 1;

    if (k > 16)
        k = 16;
    while (k > 1 && (n / k < (1u << 16) || n_rows / k < 8))
        k--;
    return (unsigned)k;
}

/* Converts tensor t (2-D, F32, F16 or BF16) to out_type into dst, rb bytes per
 * row, its rows split over threads (conv_threads; each row is converted
 * alone, so the bytes do not depend on the split: the K and IQ4 searches
 * made a 7B model's conversion take tens of minutes on one core), each
 * through its own row buffer (the calling thread's is row, t->ne[0]
 * floats). Returns 0, or an error with a message in err naming in_path,
 * the tensor and, for a value out_type cannot hold, the element: the first
 * failing row in order, found again by this thread alone. */
static int convert_tensor(const struct baton_gguf_tensor *t, uint32_t out_type, float *row,
                          uint8_t *dst, uint64_t rb, const char *in_path, char *err,
                          size_t err_len)
{
    enum { MAX_THREADS = 16 };
    const uint64_t ne0 = t->ne[0];
    const unsigned nt = conv_threads(ne0 * t->ne[1], t->ne[1]); /* read: fits */
    struct conv_part parts[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    unsigned i;
    uint64_t r;
    char shown[128];
    int rc = 0;

    for (i = 0; i < nt; i++) {
        parts[i] = (struct conv_part){t, out_type, dst, rb, t->ne[1] * i / nt,
                                      t->ne[1] * (i + 1) / nt, 0, 0};
        started[i] = i > 0 && pthread_create(&tid[i], NULL, conv_part_run, &parts[i]) == 0;
    }
    /* part 0, and each part a thread could not be started for, on this
     * thread: a running part's range is never changed (widening the last
     * started part's range while its thread ran left rows unconverted) */
    for (i = 0; i < nt; i++)
        if (!started[i] && (parts[i].rc = convert_rows(t, out_type, row, dst, rb, parts[i].r0,
                                                       parts[i].r1, &r)) != 0)
            break;
    for (i = 1; i < nt; i++)
        if (started[i])
            pthread_join(tid[i], NULL);
    for (i = 0; i < nt; i++)
        rc = rc != 0 ? rc : parts[i].rc;
    if (rc == 0 || rc == BATON_E_NOMEM) {
        if (rc != 0)
            snprintf(err, err_len, "%s: tensor '%s': %s", in_path,
                     shown_name(t->name, shown, sizeof shown), baton_status_str(rc));
        return rc;
    }
    /* a value that does not convert: its row and element, in order */
    rc = convert_rows(t, out_type, row, dst, rb, 0, t->ne[1], &r);
    if (rc == BATON_E_INVAL) {
        const uint64_t e = first_beyond(row, ne0, half_limit(out_type));

        if (e < ne0) {
            snprintf(err, err_len,
                     "%s: tensor '%s': element %llu (%g) is beyond the range of %s "
                     "(largest finite value %s); keep the model in f32 or choose a "
                     "quantized type",
                     in_path, shown_name(t->name, shown, sizeof shown),
                     (unsigned long long)(r * ne0 + e), (double)row[e], baton_type_name(out_type),
                     out_type == BATON_TYPE_F16 ? "65504" : "about 3.39e38");
            return BATON_E_INVAL;
        }
        describe_unconvertible(t, out_type, in_path, err, err_len);
    } else if (rc != 0) {
        snprintf(err, err_len, "%s: tensor '%s': %s", in_path,
                 shown_name(t->name, shown, sizeof shown), baton_status_str(rc));
    }
    return rc;
}

/* 1 for the types quantize converts from (and to, whatever the row
 * length): F32, F16 and BF16. */
static int full_precision_type(uint32_t type)
{
    return type == BATON_TYPE_F32 || type == BATON_TYPE_F16 || type == BATON_TYPE_BF16;
}

/* The type tensor i (t) gets in the output: t's own type when it is kept. */
static uint32_t out_type_of(const struct baton_gguf_tensor *t, uint64_t i, uint32_t type,
                            struct baton_quant_plan *plan, const uint32_t *attn_v_rank,
                            const uint32_t *ffn_down_rank)
{
    if (t->n_dims != 2 || !full_precision_type(t->type))
        return t->type;
    if (plan != NULL) {
        if (!baton_quant_preset_applies(t->name, t->n_dims))
            return t->type;
        plan->attn_v_rank = attn_v_rank[i];
        plan->ffn_down_rank = ffn_down_rank[i];
        return baton_quant_preset_type(plan, t->name, t->ne[0]);
    }
    if (full_precision_type(type) || t->ne[0] % 32 == 0)
        return type;
    return t->type;
}

int baton_quantize_file(const char *in_path, const char *out_path, uint32_t type, int preset,
                        char *err, size_t err_len, uint64_t *n_converted, uint64_t *n_kept)
{
    struct baton_quant_plan plan;
    struct baton_gguf *src = NULL;
    struct baton_gguf_writer *w = NULL;
    float *row = NULL;
    uint32_t *out_types = NULL, *attn_v_rank = NULL, *ffn_down_rank = NULL, n_ffn_down;
    uint64_t i, n_tensors, max_ne0 = 0;
    double need;
    int full_precision = 1;
    int rc = baton_gguf_open(in_path, &src, err, err_len);

    if (rc != 0)
        return rc;
    n_tensors = baton_gguf_n_tensors(src);
    out_types = calloc(n_tensors ? n_tensors : 1, sizeof *out_types);
    rc = out_types ? 0 : BATON_E_NOMEM;
    if (rc == 0 && preset != BATON_PRESET_NONE) {
        plan_from_file(src, preset, &plan);
        attn_v_rank = calloc(n_tensors ? n_tensors : 1, sizeof *attn_v_rank);
        ffn_down_rank = calloc(n_tensors ? n_tensors : 1, sizeof *ffn_down_rank);
        rc = attn_v_rank && ffn_down_rank ? 0 : BATON_E_NOMEM;
        if (rc == 0)
            rc = rank_all(src, baton_quant_preset_is_attn_v, attn_v_rank, &plan.n_attn_v);
        if (rc == 0)
            rc = rank_all(src, baton_quant_preset_is_ffn_down, ffn_down_rank, &n_ffn_down);
    }
    /* what quantize holds at its peak, beyond what is allocated now: each
     * converted tensor's output (the writer keeps it until the file is
     * written), a row of floats, and the metadata and tensor infos, which
     * the writer copies and copies again into the header it builds, each
     * buffer up to twice its length as it grows (4 x the input's header).
     * The tensors kept are written from the input's mapping: file pages,
     * which the kernel may reclaim, as MemAvailable counts them. */
    need = 4.0 * (double)baton_gguf_data_offset(src);
    for (i = 0; rc == 0 && i < n_tensors; i++) {
        struct baton_gguf_tensor t;

        rc = baton_gguf_tensor_at(src, i, &t);
        if (rc != 0)
            break;
        out_types[i] = out_type_of(&t, i, type, preset != BATON_PRESET_NONE ? &plan : NULL,
                                   attn_v_rank, ffn_down_rank);
        /* an empty tensor (ne[0] or ne[1] 0) takes no memory and no row:
         * [2^40, 0] asked for a row of 4 TiB and was refused */
        if (out_types[i] != t.type && t.nbytes != 0) {
            need += (double)row_bytes(out_types[i], t.ne[0]) * (double)t.ne[1];
            max_ne0 = t.ne[0] > max_ne0 ? t.ne[0] : max_ne0;
        }
    }
    need += 4.0 * (double)max_ne0;
    if (rc == 0) {
        char what[200];

        if (memory_exceeded(need, what, sizeof what) != 0) {
            rc = BATON_E_LIMIT;
            snprintf(err, err_len,
                     "%s: quantizing to %s would take %.1f GiB, %s; quantize holds the "
                     "converted tensors in memory until %s is written",
                     in_path,
                     preset != BATON_PRESET_NONE ? baton_quant_preset_name(preset)
                                                 : baton_type_name(type),
                     need / GIB, what, out_path);
        }
    }
    if (rc == 0 && max_ne0 > 0) {
        row = malloc(max_ne0 * sizeof(float));
        rc = row ? 0 : BATON_E_NOMEM;
    }
    if (rc == 0)
        rc = baton_gguf_writer_create(&w);
    /* the output is marked as llama-quantize marks it (below) when the
     * input held only F32 / F16 / BF16 tensors, which quantize converts; an input
     * with quantized tensors keeps its own mark, as they stay as they are
     * (a q4_k_m file "to f32" keeps its Q5_0 and Q8_0 tensors) */
    for (i = 0; rc == 0 && i < n_tensors; i++) {
        struct baton_gguf_tensor t;

        if (baton_gguf_tensor_at(src, i, &t) == 0 && !full_precision_type(t.type))
            full_precision = 0;
    }
    for (i = 0; rc == 0 && i < baton_gguf_n_kv(src); i++) {
        const struct baton_gguf_kv *kv = baton_gguf_kv_at(src, i);
        const void *raw;
        size_t len;

        if (strcmp(baton_gguf_kv_key(kv), "general.alignment") == 0)
            continue; /* the writer uses the default alignment */
        if (full_precision && (strcmp(baton_gguf_kv_key(kv), "general.file_type") == 0 ||
                               strcmp(baton_gguf_kv_key(kv), "general.quantization_version") == 0))
            continue; /* written below, as llama-quantize writes them */
        rc = baton_gguf_kv_raw(kv, &raw, &len);
        if (rc == 0)
            rc = baton_gguf_w_raw(w, baton_gguf_kv_key(kv), baton_gguf_kv_type(kv), raw, len);
    }
    for (i = 0; rc == 0 && i < n_tensors; i++) {
        struct baton_gguf_tensor t;
        uint64_t rb;
        void *dst;

        rc = baton_gguf_tensor_at(src, i, &t);
        if (rc != 0)
            break;
        if (out_types[i] == t.type) {
            if (n_kept)
                (*n_kept)++;
            rc = baton_gguf_w_tensor_ref(w, t.name, t.type, t.n_dims ? t.n_dims : 1, t.ne,
                                         t.data, t.nbytes);
            continue;
        }
        if (n_converted)
            (*n_converted)++;
        /* row_bytes is 0 for ne[0] 0 as for a shape it cannot hold: an
         * empty tensor is written with its new type and no data (it said
         * "inconsistent shape or strides") */
        rb = t.nbytes == 0 ? 0 : row_bytes(out_types[i], t.ne[0]);
        rc = rb == 0 && t.nbytes != 0
                 ? BATON_E_SHAPE
                 : baton_gguf_w_tensor_alloc(w, t.name, out_types[i], 2, t.ne, rb * t.ne[1],
                                             &dst);
        if (rc != 0) {
            char shown[128];

            snprintf(err, err_len, "%s: tensor '%s': %s", in_path,
                     shown_name(t.name, shown, sizeof shown), baton_status_str(rc));
            break;
        }
        if (t.nbytes != 0)
            rc = convert_tensor(&t, out_types[i], row, dst, rb, in_path, err, err_len);
    }
    /* llama-quantize marks its output with the type or preset it was asked
     * for (a plain type used to keep the input's mark: ALL_F32 on a q8_0) */
    if (rc == 0 && full_precision) {
        uint32_t ftype = 0;

        if (preset != BATON_PRESET_NONE)
            ftype = baton_quant_preset_ftype(preset);
        else if (baton_quant_type_ftype(type, &ftype) != 0)
            rc = BATON_E_INVAL;
        if (rc == 0)
            rc = baton_gguf_w_u32(w, "general.file_type", ftype);
        if (rc == 0)
            rc = baton_gguf_w_u32(w, "general.quantization_version", 2);
    }
    if (rc == 0)
        rc = baton_gguf_writer_write(w, out_path, err, err_len);
    else if (err[0] == '\0')
        snprintf(err, err_len, "%s: %s", in_path, baton_status_str(rc));
    free(row);
    free(out_types);
    free(attn_v_rank);
    free(ffn_down_rank);
    baton_gguf_writer_free(w);
    baton_gguf_close(src);
    return rc;
}
