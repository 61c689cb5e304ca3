/* llama SentencePiece and byte-level BPE tokenizers (behaviour and sources
 * in tokenizer.h; the BPE pre-tokenizers in tokenizer_pre.c).
 *
 * Vocabulary lookup is an open-addressing hash table (FNV-1a, linear
 * probing, load <= 1/2) from piece bytes to id. Tokenizing keeps the symbols
 * in a doubly linked list over the escaped text and the candidate pairs in a
 * binary max-heap ordered by (score desc, left index asc). A popped pair is
 * stale when either symbol has changed length since it was pushed: a symbol
 * only grows by absorbing its right neighbour, and an absorbed symbol drops
 * to length 0, so "both lengths still sum to the pair's length" identifies a
 * live pair exactly. BPE uses the same list and heap, with a pair's score
 * the negated rank of its merge (exact in a float: ranks are below 2^24),
 * so "highest score, then leftmost" is "lowest rank, then leftmost".
 * Merges are looked up in a second hash table keyed by the merge line
 * "left right", hashed without building the line.
 */
#include "model/tokenizer.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/status.h"
#include "model/gguf.h"
#include "model/tokenizer_pre.h"

#define SPACE_ESC "\xe2\x96\x81" /* U+2581, SentencePiece's space */
#define SPACE_ESC_BYTES 3u
#define UNK_TEXT "\xe2\x96\x85" /* U+2585, llama.cpp's text for the unknown token */

struct baton_tokenizer {
    uint32_t n_vocab;
    char *text;           /* all pieces, back to back */
    size_t *piece_off;    /* n_vocab: offset in text */
    uint32_t *piece_len;  /* n_vocab */
    float *scores;        /* n_vocab */
    uint8_t *types;       /* n_vocab, enum baton_token_type (others -> UNDEFINED) */
    int16_t *byte_val;    /* n_vocab: the byte of a "<0xNN>" byte token, else -1 */
    int32_t *table;       /* hash table of ids, -1 = empty */
    size_t table_mask;    /* table size - 1 */
    int32_t byte_id[256]; /* id of "<0xNN>", or -1 */
    int32_t bos, eos, unk;
    int add_bos;
    int add_space_prefix;

    int is_bpe;                /* tokenizer.ggml.model "gpt2" */
    struct baton_pretok *pre;  /* BPE: tokenizer.ggml.pre */
    int ignore_merges;         /* BPE: a word that is a piece is not merged (Llama 3) */
    int pre_missing;           /* BPE: no tokenizer.ggml.pre, 'default' used */
    char pre_name[48];         /* BPE: the pre-tokenizer's name, escaped */
    uint32_t n_merges;
    char *merge_text;          /* all merge lines, back to back */
    size_t *merge_off;         /* n_merges: offset in merge_text */
    uint32_t *merge_len;       /* n_merges: bytes of the line */
    uint32_t *merge_split;     /* n_merges: offset of the separating space */
    int32_t *merge_table;      /* hash table of ranks, -1 = empty */
    size_t merge_mask;

    int32_t *special;          /* CONTROL, USER_DEFINED and UNKNOWN ids, longest first */
    uint32_t n_special;
    int32_t eog[BATON_TOKENIZER_MAX_EOG];
    uint32_t n_eog;
};

/* ---- vocabulary lookup ---- */

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* Id of the piece equal to s[0..n), or -1. */
static int32_t find_piece(const struct baton_tokenizer *tok, const char *s, size_t n)
{
    size_t slot = (size_t)hash_bytes(s, n) & tok->table_mask;
    for (;;) {
        int32_t id = tok->table[slot];
        if (id < 0)
            return -1;
        if (tok->piece_len[id] == n && memcmp(tok->text + tok->piece_off[id], s, n) == 0)
            return id;
        slot = (slot + 1) & tok->table_mask;
    }
}

/* Inserts id; an equal piece already present is replaced (later id wins). */
static void insert_piece(struct baton_tokenizer *tok, int32_t id)
{
    const char *s = tok->text + tok->piece_off[id];
    size_t n = tok->piece_len[id];
    size_t slot = (size_t)hash_bytes(s, n) & tok->table_mask;
    for (;;) {
        int32_t cur = tok->table[slot];
        if (cur < 0 ||
            (tok->piece_len[cur] == n && memcmp(tok->text + tok->piece_off[cur], s, n) == 0)) {
            tok->table[slot] = id;
            return;
        }
        slot = (slot + 1) & tok->table_mask;
    }
}

static uint64_t hash_more(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* Hash of the merge line "left right" (the same as hash_bytes of it). */
static uint64_t hash_merge(const char *l, size_t ln, const char *r, size_t rn)
{
    return hash_more(hash_more(hash_more(1469598103934665603ull, l, ln), " ", 1), r, rn);
}

/* Rank of the merge of l and r, or -1. */
static int32_t find_merge(const struct baton_tokenizer *tok, const char *l, size_t ln,
                          const char *r, size_t rn)
{
    size_t slot = (size_t)hash_merge(l, ln, r, rn) & tok->merge_mask;
    for (;;) {
        int32_t rank = tok->merge_table[slot];
        if (rank < 0)
            return -1;
        const char *m = tok->merge_text + tok->merge_off[rank];
        if (tok->merge_split[rank] == ln && tok->merge_len[rank] == ln + 1 + rn &&
            memcmp(m, l, ln) == 0 && memcmp(m + ln + 1, r, rn) == 0)
            return rank;
        slot = (slot + 1) & tok->merge_mask;
    }
}

/* Inserts rank; an equal merge already present keeps its (lower) rank, as
 * in llama.cpp, where the first line of a pair wins. */
static void insert_merge(struct baton_tokenizer *tok, int32_t rank)
{
    const char *m = tok->merge_text + tok->merge_off[rank];
    size_t n = tok->merge_len[rank], split = tok->merge_split[rank];
    size_t slot = (size_t)hash_bytes(m, n) & tok->merge_mask;
    for (;;) {
        int32_t cur = tok->merge_table[slot];
        if (cur < 0) {
            tok->merge_table[slot] = rank;
            return;
        }
        if (tok->merge_len[cur] == n && tok->merge_split[cur] == split &&
            memcmp(tok->merge_text + tok->merge_off[cur], m, n) == 0)
            return;
        slot = (slot + 1) & tok->merge_mask;
    }
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* ---- construction ---- */

__attribute__((format(printf, 4, 5))) static int tfail(char *err, size_t err_len, int st,
                                                       const char *fmt, ...)
{
    if (err != NULL && err_len > 0) {
        int n = snprintf(err, err_len, "tokenizer: ");
        if (n >= 0 && (size_t)n < err_len) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(err + n, err_len - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return st;
}

/* Reads an optional token id key; keeps *id (the default, made NONE when
 * not below n_vocab) if absent. */
static int read_id(const struct baton_gguf *g, const char *key, uint32_t n_vocab, int32_t *id,
                   char *err, size_t err_len)
{
    uint32_t v;
    int st = baton_gguf_get_u32(g, key, &v);
    if (st == BATON_E_NOT_FOUND) {
        if (*id >= 0 && (uint32_t)*id >= n_vocab)
            *id = BATON_TOKEN_NONE;
        return 0;
    }
    if (st != 0 || v >= n_vocab)
        return tfail(err, err_len, BATON_E_FORMAT, "key '%s': not a token id below %u", key,
                     n_vocab);
    *id = (int32_t)v;
    return 0;
}

static int read_flag(const struct baton_gguf *g, const char *key, int *flag, char *err,
                     size_t err_len)
{
    int st = baton_gguf_get_bool(g, key, flag);
    if (st == BATON_E_NOT_FOUND)
        return 0;
    if (st != 0)
        return tfail(err, err_len, BATON_E_FORMAT, "key '%s': not a bool", key);
    return 0;
}

/* BPE: the pre-tokenizer (tokenizer.ggml.pre) and the merges
 * (tokenizer.ggml.merges, one "left right" line per rank, split at the first
 * space after the first byte, as llama.cpp splits them). */
static int load_bpe(const struct baton_gguf *g, struct baton_tokenizer *tok, char *err,
                    size_t err_len)
{
    const char *pre;
    size_t pre_len;
    struct baton_pretok_info info;
    int st = baton_gguf_get_string(g, "tokenizer.ggml.pre", &pre, &pre_len);
    if (st == BATON_E_NOT_FOUND || (st == 0 && pre_len == 0)) {
        /* No name, or an empty one: llama.cpp warns and uses its 'default'
         * expressions (a file converted before pre-tokenizers were
         * recorded); so does baton (baton_tokenizer_pre_warning says so to
         * whoever prints a warning). */
        pre = "default";
        pre_len = strlen(pre);
        tok->pre_missing = 1;
    } else if (st != 0) {
        return tfail(err, err_len, BATON_E_FORMAT, "key 'tokenizer.ggml.pre': not a string");
    }
    char shown[48];
    baton_gguf_escape(shown, sizeof shown, pre, pre_len);
    if (baton_pretok_lookup(pre, pre_len, &info) != 0)
        return tfail(err, err_len, BATON_E_UNSUPPORTED,
                     "key 'tokenizer.ggml.pre': pre-tokenizer '%s' is not supported "
                     "(baton knows 'llama-bpe', 'qwen2', 'tekken', 'smollm', 'gpt-2', "
                     "'default' and their other names, listed in baton(1))", shown);
    snprintf(tok->pre_name, sizeof tok->pre_name, "%s", shown);
    st = baton_pretok_create(info.kind, &tok->pre);
    if (st != 0)
        return tfail(err, err_len, st, "key 'tokenizer.ggml.pre': cannot compile the '%s' "
                     "expressions (PCRE2 without Unicode?)", shown);
    tok->ignore_merges = info.ignore_merges;
    tok->add_bos = info.add_bos;

    const struct baton_gguf_kv *merges = baton_gguf_find_key(g, "tokenizer.ggml.merges");
    uint32_t elem_type;
    uint64_t n;
    if (merges == NULL)
        return tfail(err, err_len, BATON_E_NOT_FOUND, "key 'tokenizer.ggml.merges' missing");
    if (baton_gguf_kv_array(merges, &elem_type, &n) != 0 || elem_type != BATON_GGUF_STRING)
        return tfail(err, err_len, BATON_E_FORMAT, "key 'tokenizer.ggml.merges': not a string array");
    if (n > BATON_TOKENIZER_MAX_MERGES)
        return tfail(err, err_len, BATON_E_LIMIT,
                     "key 'tokenizer.ggml.merges': %llu merges (at most %u)",
                     (unsigned long long)n, BATON_TOKENIZER_MAX_MERGES);
    size_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
        const char *p;
        size_t len;
        baton_gguf_arr_string(merges, i, &p, &len);
        const char *sp = len > 1 ? memchr(p + 1, ' ', len - 1) : NULL;
        if (sp == NULL)
            return tfail(err, err_len, BATON_E_FORMAT,
                         "key 'tokenizer.ggml.merges': element %llu is not two parts "
                         "separated by a space", (unsigned long long)i);
        total += len;
    }
    tok->n_merges = (uint32_t)n;
    size_t table_size = 2;
    while (table_size < 2 * (size_t)n)
        table_size *= 2;
    tok->merge_text = malloc(total ? total : 1);
    tok->merge_off = malloc((n ? n : 1) * sizeof *tok->merge_off);
    tok->merge_len = malloc((n ? n : 1) * sizeof *tok->merge_len);
    tok->merge_split = malloc((n ? n : 1) * sizeof *tok->merge_split);
    tok->merge_table = malloc(table_size * sizeof *tok->merge_table);
    tok->merge_mask = table_size - 1;
    if (!tok->merge_text || !tok->merge_off || !tok->merge_len || !tok->merge_split ||
        !tok->merge_table)
        return tfail(err, err_len, BATON_E_NOMEM, "out of memory");
    size_t off = 0;
    for (uint64_t i = 0; i < n; i++) {
        const char *p;
        size_t len;
        baton_gguf_arr_string(merges, i, &p, &len);
        memcpy(tok->merge_text + off, p, len);
        tok->merge_off[i] = off;
        tok->merge_len[i] = (uint32_t)len;
        tok->merge_split[i] = (uint32_t)((const char *)memchr(p + 1, ' ', len - 1) - p);
        off += len;
    }
    for (size_t i = 0; i < table_size; i++)
        tok->merge_table[i] = -1;
    for (uint32_t i = 0; i < tok->n_merges; i++)
        insert_merge(tok, (int32_t)i);
    return 0;
}

static int special_longer(const void *a, const void *b, void *arg)
{
    const struct baton_tokenizer *tok = arg;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (tok->piece_len[x] != tok->piece_len[y])
        return tok->piece_len[x] > tok->piece_len[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* The ids the input text may name (see baton_tokenize_ex), longest first,
 * and the end-of-generation set. */
static int load_specials(const struct baton_gguf *g, struct baton_tokenizer *tok, char *err,
                         size_t err_len)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < tok->n_vocab; i++)
        n += (tok->types[i] == BATON_TOKEN_CONTROL || tok->types[i] == BATON_TOKEN_USER_DEFINED ||
              tok->types[i] == BATON_TOKEN_UNKNOWN) &&
             tok->piece_len[i] > 0;
    tok->special = malloc((n ? n : 1) * sizeof *tok->special);
    if (tok->special == NULL)
        return tfail(err, err_len, BATON_E_NOMEM, "out of memory");
    for (uint32_t i = 0; i < tok->n_vocab; i++)
        if ((tok->types[i] == BATON_TOKEN_CONTROL || tok->types[i] == BATON_TOKEN_USER_DEFINED ||
             tok->types[i] == BATON_TOKEN_UNKNOWN) &&
            tok->piece_len[i] > 0)
            tok->special[tok->n_special++] = (int32_t)i;
    qsort_r(tok->special, tok->n_special, sizeof *tok->special, special_longer, tok);

    /* End of generation: EOS, the end-of-turn and end-of-message ids, and
     * the pieces chat templates end a turn with. */
    static const char *const eog_text[] = {
        "<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|endoftext|>", "<|end|>", "<end_of_turn>",
    };
    int32_t cand[2 + sizeof eog_text / sizeof eog_text[0]];
    _Static_assert(1 + sizeof cand / sizeof cand[0] <= BATON_TOKENIZER_MAX_EOG,
                   "room for EOS and every candidate");
    size_t n_cand = 0;
    int32_t eot = BATON_TOKEN_NONE, eom = BATON_TOKEN_NONE;
    int st;
    if ((st = read_id(g, "tokenizer.ggml.eot_token_id", tok->n_vocab, &eot, err, err_len)) != 0 ||
        (st = read_id(g, "tokenizer.ggml.eom_token_id", tok->n_vocab, &eom, err, err_len)) != 0)
        return st;
    cand[n_cand++] = eot;
    cand[n_cand++] = eom;
    for (size_t i = 0; i < sizeof eog_text / sizeof eog_text[0]; i++)
        cand[n_cand++] = find_piece(tok, eog_text[i], strlen(eog_text[i]));
    if (tok->eos >= 0)
        tok->eog[tok->n_eog++] = tok->eos;
    for (size_t i = 0; i < n_cand; i++) {
        int dup = cand[i] < 0;
        for (uint32_t j = 0; j < tok->n_eog && !dup; j++)
            dup = tok->eog[j] == cand[i];
        if (!dup)
            tok->eog[tok->n_eog++] = cand[i];
    }
    return 0;
}

int baton_tokenizer_from_gguf(const struct baton_gguf *g, struct baton_tokenizer **out, char *err,
                              size_t err_len)
{
    struct baton_tokenizer *tok = NULL;
    const struct baton_gguf_kv *tokens, *scores, *types;
    uint32_t elem_type;
    uint64_t count, n;
    int st;

    if (err != NULL && err_len > 0)
        err[0] = '\0';
    if (g == NULL || out == NULL)
        return BATON_E_INVAL;
    *out = NULL;

    const char *model;
    size_t model_len;
    int is_bpe = 0;
    st = baton_gguf_get_string(g, "tokenizer.ggml.model", &model, &model_len);
    if (st == 0 && model_len == 4 && memcmp(model, "gpt2", 4) == 0)
        is_bpe = 1;
    else if (st == 0 && !(model_len == 5 && memcmp(model, "llama", 5) == 0)) {
        char shown[48];
        st = tfail(err, err_len, BATON_E_UNSUPPORTED,
                   "key 'tokenizer.ggml.model': '%s' is not supported (only 'llama' and 'gpt2')",
                   baton_gguf_escape(shown, sizeof shown, model, model_len));
        goto out;
    }
    if (st != 0 && st != BATON_E_NOT_FOUND) {
        st = tfail(err, err_len, BATON_E_FORMAT, "key 'tokenizer.ggml.model': not a string");
        goto out;
    }

    tokens = baton_gguf_find_key(g, "tokenizer.ggml.tokens");
    if (tokens == NULL) {
        st = tfail(err, err_len, BATON_E_NOT_FOUND, "key 'tokenizer.ggml.tokens' missing");
        goto out;
    }
    if (baton_gguf_kv_array(tokens, &elem_type, &n) != 0 || elem_type != BATON_GGUF_STRING) {
        st = tfail(err, err_len, BATON_E_FORMAT, "key 'tokenizer.ggml.tokens': not a string array");
        goto out;
    }
    if (n == 0 || n > BATON_TOKENIZER_MAX_VOCAB) {
        st = tfail(err, err_len, n == 0 ? BATON_E_FORMAT : BATON_E_LIMIT,
                   "key 'tokenizer.ggml.tokens': %llu pieces (need 1..%u)", (unsigned long long)n,
                   BATON_TOKENIZER_MAX_VOCAB);
        goto out;
    }
    scores = baton_gguf_find_key(g, "tokenizer.ggml.scores");
    if (scores != NULL &&
        (baton_gguf_kv_array(scores, &elem_type, &count) != 0 ||
         (elem_type != BATON_GGUF_F32 && elem_type != BATON_GGUF_F64) || count != n)) {
        st = tfail(err, err_len, BATON_E_FORMAT,
                   "key 'tokenizer.ggml.scores': not a float array of %llu", (unsigned long long)n);
        goto out;
    }
    types = baton_gguf_find_key(g, "tokenizer.ggml.token_type");
    if (types != NULL && (baton_gguf_kv_array(types, &elem_type, &count) != 0 || count != n)) {
        st = tfail(err, err_len, BATON_E_FORMAT,
                   "key 'tokenizer.ggml.token_type': not an array of %llu", (unsigned long long)n);
        goto out;
    }

    tok = calloc(1, sizeof *tok);
    if (tok == NULL)
        goto nomem;
    tok->n_vocab = (uint32_t)n;
    tok->bos = 1;
    tok->eos = 2;
    tok->unk = 0;
    tok->add_bos = 1;
    tok->add_space_prefix = 1;
    tok->is_bpe = is_bpe;
    if (is_bpe) {
        /* No default ids: llama.cpp's (11, GPT-2's ",") are no BOS/EOS of
         * any real model. add_bos's default comes with the pre-tokenizer. */
        tok->bos = tok->eos = tok->unk = BATON_TOKEN_NONE;
        tok->add_space_prefix = 0;
    }

    /* Sizes first, so the text is one allocation. Each piece is at most
     * BATON_GGUF_MAX_STRING_BYTES and n <= 2^24, so the sum fits. */
    size_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
        const char *p;
        size_t len;
        baton_gguf_arr_string(tokens, i, &p, &len);
        total += len;
    }
    tok->text = malloc(total ? total : 1);
    tok->piece_off = malloc(n * sizeof *tok->piece_off);
    tok->piece_len = malloc(n * sizeof *tok->piece_len);
    tok->scores = malloc(n * sizeof *tok->scores);
    tok->types = malloc(n * sizeof *tok->types);
    tok->byte_val = malloc(n * sizeof *tok->byte_val);
    size_t table_size = 2;
    while (table_size < 2 * (size_t)n)
        table_size *= 2;
    tok->table = malloc(table_size * sizeof *tok->table);
    tok->table_mask = table_size - 1;
    if (!tok->text || !tok->piece_off || !tok->piece_len || !tok->scores || !tok->types ||
        !tok->byte_val || !tok->table)
        goto nomem;

    size_t off = 0;
    for (uint64_t i = 0; i < n; i++) {
        const char *p;
        size_t len;
        baton_gguf_arr_string(tokens, i, &p, &len);
        memcpy(tok->text + off, p, len);
        tok->piece_off[i] = off;
        tok->piece_len[i] = (uint32_t)len;
        off += len;

        float score = 0.0f;
        if (scores != NULL)
            baton_gguf_arr_f32(scores, i, &score);
        tok->scores[i] = isnan(score) ? -INFINITY : score;

        int32_t type = BATON_TOKEN_NORMAL;
        if (types != NULL && baton_gguf_arr_i32(types, i, &type) != 0) {
            st = tfail(err, err_len, BATON_E_FORMAT,
                       "key 'tokenizer.ggml.token_type': element %llu is not an int32",
                       (unsigned long long)i);
            goto out;
        }
        tok->types[i] = (type >= BATON_TOKEN_NORMAL && type <= BATON_TOKEN_BYTE)
                            ? (uint8_t)type
                            : BATON_TOKEN_UNDEFINED;
        tok->byte_val[i] = -1;
        if (len == 6 && p[0] == '<' && p[1] == '0' && p[2] == 'x' && p[5] == '>' &&
            hex_digit(p[3]) >= 0 && hex_digit(p[4]) >= 0)
            tok->byte_val[i] = (int16_t)(hex_digit(p[3]) * 16 + hex_digit(p[4]));
    }
    for (size_t i = 0; i < table_size; i++)
        tok->table[i] = -1;
    for (uint32_t i = 0; i < tok->n_vocab; i++)
        insert_piece(tok, (int32_t)i);
    for (unsigned b = 0; b < 256; b++) {
        char name[7];
        snprintf(name, sizeof name, "<0x%02X>", b);
        tok->byte_id[b] = find_piece(tok, name, 6);
    }

    if (is_bpe && (st = load_bpe(g, tok, err, err_len)) != 0)
        goto out;
    if ((st = read_id(g, "tokenizer.ggml.bos_token_id", tok->n_vocab, &tok->bos, err, err_len)) !=
            0 ||
        (st = read_id(g, "tokenizer.ggml.eos_token_id", tok->n_vocab, &tok->eos, err, err_len)) !=
            0 ||
        (st = read_id(g, "tokenizer.ggml.unknown_token_id", tok->n_vocab, &tok->unk, err,
                      err_len)) != 0 ||
        (st = read_flag(g, "tokenizer.ggml.add_bos_token", &tok->add_bos, err, err_len)) != 0 ||
        (!is_bpe && (st = read_flag(g, "tokenizer.ggml.add_space_prefix", &tok->add_space_prefix,
                                    err, err_len)) != 0) ||
        (st = load_specials(g, tok, err, err_len)) != 0)
        goto out;

    *out = tok;
    tok = NULL;
    st = 0;
    goto out;
nomem:
    st = tfail(err, err_len, BATON_E_NOMEM, "out of memory");
out:
    baton_tokenizer_free(tok);
    return st;
}

void baton_tokenizer_free(struct baton_tokenizer *tok)
{
    if (tok == NULL)
        return;
    free(tok->text);
    free(tok->piece_off);
    free(tok->piece_len);
    free(tok->scores);
    free(tok->types);
    free(tok->byte_val);
    free(tok->table);
    baton_pretok_free(tok->pre);
    free(tok->merge_text);
    free(tok->merge_off);
    free(tok->merge_len);
    free(tok->merge_split);
    free(tok->merge_table);
    free(tok->special);
    free(tok);
}

uint32_t baton_tokenizer_n_vocab(const struct baton_tokenizer *tok)
{
    return tok->n_vocab;
}

int32_t baton_tokenizer_bos(const struct baton_tokenizer *tok)
{
    return tok->bos;
}

int32_t baton_tokenizer_eos(const struct baton_tokenizer *tok)
{
    return tok->eos;
}

int32_t baton_tokenizer_unk(const struct baton_tokenizer *tok)
{
    return tok->unk;
}

const char *baton_tokenizer_pre(const struct baton_tokenizer *tok, int *missing)
{
    if (missing != NULL)
        *missing = tok->is_bpe && tok->pre_missing;
    return tok->is_bpe ? tok->pre_name : "";
}

const char *baton_tokenizer_pre_warning(const struct baton_tokenizer *tok)
{
    if (!tok->is_bpe || !tok->pre_missing)
        return NULL;
    return "no tokenizer.ggml.pre: its text is split with llama.cpp's 'default' "
           "pre-tokenizer, as llama.cpp does, which may not be the model's (a file "
           "converted before llama.cpp recorded pre-tokenizers: convert it again)";
}

int baton_tokenizer_add_bos(const struct baton_tokenizer *tok)
{
    return tok->add_bos;
}

int baton_tokenizer_is_bpe(const struct baton_tokenizer *tok)
{
    return tok->is_bpe;
}

int baton_tokenizer_is_eog(const struct baton_tokenizer *tok, int32_t id)
{
    for (uint32_t i = 0; i < tok->n_eog; i++)
        if (tok->eog[i] == id)
            return id >= 0;
    return 0;
}

int baton_tokenizer_piece(const struct baton_tokenizer *tok, int32_t id, const char **ptr,
                          size_t *len, float *score, uint32_t *type)
{
    if (id < 0 || (uint32_t)id >= tok->n_vocab)
        return BATON_E_BOUNDS;
    if (ptr)
        *ptr = tok->text + tok->piece_off[id];
    if (len)
        *len = tok->piece_len[id];
    if (score)
        *score = tok->scores[id];
    if (type)
        *type = tok->types[id];
    return 0;
}

/* ---- tokenize ---- */

struct pair {
    int32_t left, right; /* symbol indices */
    float score;         /* SPM: the piece's score; BPE: -rank */
    uint32_t len;        /* bytes of left + right when pushed */
};

/* Scratch space of one call, grown to the largest text merged. */
struct work {
    char *text; /* the text being merged: escaped (SPM) or mapped (BPE) */
    size_t cap_text;
    uint32_t *sym_off, *sym_len;
    int32_t *prev, *next;
    size_t cap_sym;
    struct pair *heap;
    size_t n_heap, cap_heap;
    char *clean; /* BPE: the fragment as valid UTF-8 */
    size_t cap_clean;
};

struct out {
    int32_t *ids;
    size_t max, n;
};

static void work_free(struct work *w)
{
    free(w->text);
    free(w->sym_off);
    free(w->sym_len);
    free(w->prev);
    free(w->next);
    free(w->heap);
    free(w->clean);
}

/* Room for a text of text_bytes bytes (every symbol at least 1 byte). */
static int work_reserve(struct work *w, size_t text_bytes)
{
    if (text_bytes > w->cap_text) {
        char *t = realloc(w->text, text_bytes);
        if (t == NULL)
            return BATON_E_NOMEM;
        w->text = t;
        w->cap_text = text_bytes;
    }
    if (text_bytes > w->cap_sym) {
        size_t n = text_bytes;
        uint32_t *so = realloc(w->sym_off, n * sizeof *so);
        if (so)
            w->sym_off = so;
        uint32_t *sl = realloc(w->sym_len, n * sizeof *sl);
        if (sl)
            w->sym_len = sl;
        int32_t *pv = realloc(w->prev, n * sizeof *pv);
        if (pv)
            w->prev = pv;
        int32_t *nx = realloc(w->next, n * sizeof *nx);
        if (nx)
            w->next = nx;
        /* Pushes: n_sym - 1 initial pairs, then at most 2 per merge, and
         * there are at most n_sym - 1 merges. */
        struct pair *hp = realloc(w->heap, 3 * n * sizeof *hp);
        if (hp)
            w->heap = hp;
        if (!so || !sl || !pv || !nx || !hp)
            return BATON_E_NOMEM;
        w->cap_sym = n;
        w->cap_heap = 3 * n;
    }
    return 0;
}

/* a comes out of the heap before b */
static int pair_before(const struct pair *a, const struct pair *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void heap_push(struct work *w, struct pair p)
{
    /* cap_heap bounds every push (see work_reserve). */
    size_t i = w->n_heap++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!pair_before(&p, &w->heap[parent]))
            break;
        w->heap[i] = w->heap[parent];
        i = parent;
    }
    w->heap[i] = p;
}

static struct pair heap_pop(struct work *w)
{
    struct pair top = w->heap[0];
    struct pair last = w->heap[--w->n_heap];
    size_t i = 0, n = w->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && pair_before(&w->heap[c + 1], &w->heap[c]))
            c++;
        if (!pair_before(&w->heap[c], &last))
            break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n > 0)
        w->heap[i] = last;
    return top;
}

static void try_pair(const struct baton_tokenizer *tok, struct work *w, int32_t left, int32_t right)
{
    if (left < 0 || right < 0)
        return;
    uint32_t len = w->sym_len[left] + w->sym_len[right];
    float score;
    if (tok->is_bpe) {
        int32_t rank = find_merge(tok, w->text + w->sym_off[left], w->sym_len[left],
                                  w->text + w->sym_off[right], w->sym_len[right]);
        if (rank < 0)
            return;
        score = -(float)rank;
    } else {
        int32_t id = find_piece(tok, w->text + w->sym_off[left], len);
        if (id < 0)
            return;
        score = tok->scores[id];
    }
    struct pair p = {left, right, score, len};
    if (w->n_heap < w->cap_heap)
        heap_push(w, p);
}

static void emit(struct out *o, int32_t id)
{
    if (o->n < o->max)
        o->ids[o->n] = id;
    o->n++;
}

static size_t utf8_char_len(uint8_t lead)
{
    if (lead < 0xc0)
        return 1; /* ASCII, or a stray continuation byte */
    if (lead < 0xe0)
        return 2;
    if (lead < 0xf0)
        return 3;
    if (lead < 0xf8)
        return 4;
    return 1;
}

/* Splits w->text[0..len) (len > 0, reserved) into one symbol per UTF-8
 * character and merges pairs until none is left; the symbols are then the
 * list from 0 through w->next. */
static void merge_symbols(const struct baton_tokenizer *tok, struct work *w, size_t len)
{
    size_t n_sym = 0;
    for (size_t off = 0; off < len;) {
        size_t cl = utf8_char_len((uint8_t)w->text[off]);
        if (cl > len - off)
            cl = len - off;
        w->sym_off[n_sym] = (uint32_t)off;
        w->sym_len[n_sym] = (uint32_t)cl;
        w->prev[n_sym] = (int32_t)n_sym - 1;
        w->next[n_sym] = (int32_t)n_sym + 1;
        n_sym++;
        off += cl;
    }
    w->next[n_sym - 1] = -1;
    w->n_heap = 0;

    for (size_t i = 1; i < n_sym; i++)
        try_pair(tok, w, (int32_t)i - 1, (int32_t)i);
    while (w->n_heap > 0) {
        struct pair p = heap_pop(w);
        uint32_t l = w->sym_len[p.left], r = w->sym_len[p.right];
        if (l == 0 || r == 0 || l + r != p.len)
            continue; /* stale */
        w->sym_len[p.left] = p.len;
        w->sym_len[p.right] = 0;
        w->next[p.left] = w->next[p.right];
        if (w->next[p.right] >= 0)
            w->prev[w->next[p.right]] = p.left;
        try_pair(tok, w, w->prev[p.left], p.left);
        try_pair(tok, w, p.left, w->next[p.left]);
    }
}

/* SPM on one fragment of plain text: ' ' -> U+2581, a leading U+2581 if
 * prefix, merges, byte fallback. */
static int spm_fragment(const struct baton_tokenizer *tok, struct work *w, const char *text,
                        size_t len, int prefix, struct out *o)
{
    /* at most 3 bytes per input byte, plus the prefix (no wrap: len <= 2^20) */
    int st = work_reserve(w, SPACE_ESC_BYTES * (len + 1));
    if (st != 0)
        return st;
    size_t esc_len = 0;
    if (prefix) {
        memcpy(w->text, SPACE_ESC, SPACE_ESC_BYTES);
        esc_len = SPACE_ESC_BYTES;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(w->text + esc_len, SPACE_ESC, SPACE_ESC_BYTES);
            esc_len += SPACE_ESC_BYTES;
        } else {
            w->text[esc_len++] = text[i];
        }
    }
    if (esc_len == 0)
        return 0;
    merge_symbols(tok, w, esc_len);
    for (int32_t s = 0; s >= 0; s = w->next[s]) {
        const char *sym = w->text + w->sym_off[s];
        int32_t id = find_piece(tok, sym, w->sym_len[s]);
        if (id >= 0) {
            emit(o, id);
            continue;
        }
        for (uint32_t i = 0; i < w->sym_len[s]; i++) {
            int32_t bid = tok->byte_id[(uint8_t)sym[i]];
            emit(o, bid >= 0 ? bid : tok->unk);
        }
    }
    return 0;
}

struct bpe_ctx {
    const struct baton_tokenizer *tok;
    struct work *w;
    struct out *o;
};

/* BPE on one pre-tokenizer word of w->clean: map its bytes, merge, emit
 * each symbol's piece; a symbol that is no piece becomes the pieces of its
 * single bytes, and bytes that are no piece are dropped (llama.cpp does
 * the same; with a full byte alphabet it cannot happen). */
static int bpe_word(void *arg, size_t off, size_t len)
{
    struct bpe_ctx *c = arg;
    const struct baton_tokenizer *tok = c->tok;
    struct work *w = c->w;
    int st = work_reserve(w, 2 * len);
    if (st != 0)
        return st;
    size_t m = 0;
    for (size_t i = 0; i < len; i++)
        m += baton_bpe_byte_encode((uint8_t)w->clean[off + i], w->text + m);
    if (tok->ignore_merges) {
        int32_t id = find_piece(tok, w->text, m);
        if (id >= 0) {
            emit(c->o, id);
            return 0;
        }
    }
    merge_symbols(tok, w, m);
    for (int32_t s = 0; s >= 0; s = w->next[s]) {
        const char *sym = w->text + w->sym_off[s];
        int32_t id = find_piece(tok, sym, w->sym_len[s]);
        if (id >= 0) {
            emit(c->o, id);
            continue;
        }
        for (uint32_t i = 0; i < w->sym_len[s]; i++) {
            id = find_piece(tok, sym + i, 1);
            if (id >= 0)
                emit(c->o, id);
        }
    }
    return 0;
}

static int bpe_fragment(const struct baton_tokenizer *tok, struct work *w, const char *text,
                        size_t len, struct out *o)
{
    if (3 * len > w->cap_clean) {
        char *c = realloc(w->clean, 3 * len);
        if (c == NULL)
            return BATON_E_NOMEM;
        w->clean = c;
        w->cap_clean = 3 * len;
    }
    size_t clean_len = baton_utf8_sanitize(text, len, w->clean);
    struct bpe_ctx c = {tok, w, o};
    return baton_pretok_split(tok->pre, w->clean, clean_len, bpe_word, &c);
}

/* A piece of the input: plain text (id < 0) or one special token. */
struct fragment {
    size_t off, len;
    int32_t id;
};

struct fragments {
    struct fragment *v;
    size_t n, cap;
};

static int frag_push(struct fragments *f, size_t off, size_t len, int32_t id)
{
    if (f->n == f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 16;
        struct fragment *v = realloc(f->v, cap * sizeof *v);
        if (v == NULL)
            return BATON_E_NOMEM;
        f->v = v;
        f->cap = cap;
    }
    f->v[f->n++] = (struct fragment){off, len, id};
    return 0;
}

/* Which special pieces may occur in the text: a trie of the first
 * ST_DEPTH_MAX bytes of each piece the flags let through, walked from every
 * position of the text, marks the node each piece's prefix ends at when
 * the walk reaches it. A piece whose prefix is nowhere in the text is not
 * in it; one whose prefix is may be (partition's search decides). A
 * position costs at most ST_DEPTH_MAX steps, the trie at most ST_DEPTH_MAX
 * nodes a piece, whatever the pieces' lengths: with whole pieces, one of
 * 100,000 bytes made a 50 KB text take 9 s (a break-it review). Real
 * vocabularies' special pieces are shorter (Llama 3's
 * <|reserved_special_token_250|> is 30 bytes). */
#define ST_DEPTH_MAX 32u
struct st_node {
    uint32_t child, sibling; /* node indices, 0: none (node 0 is the root) */
    uint8_t byte, hit;
};

struct st_trie {
    struct st_node *v;
    size_t n;
    uint32_t *end; /* per entry of tok->special: its piece's node, 0: not in the trie */
};

static void st_trie_free(struct st_trie *t)
{
    free(t->v);
    free(t->end);
}

/* The child of node n on byte b, or 0. */
static uint32_t st_child(const struct st_trie *t, uint32_t n, uint8_t b)
{
    uint32_t c;

    for (c = t->v[n].child; c != 0 && t->v[c].byte != b; c = t->v[c].sibling)
        ;
    return c;
}

static int st_trie_build(const struct baton_tokenizer *tok, unsigned flags, const char *text,
                         size_t len, struct st_trie *t)
{
    size_t cap = 1;

    memset(t, 0, sizeof *t);
    for (uint32_t k = 0; k < tok->n_special; k++) {
        const uint32_t plen = tok->piece_len[tok->special[k]];

        cap += plen < ST_DEPTH_MAX ? plen : ST_DEPTH_MAX;
    }
    if (cap > UINT32_MAX)
        return BATON_E_LIMIT;
    t->v = calloc(cap, sizeof *t->v);
    t->end = calloc(tok->n_special ? tok->n_special : 1, sizeof *t->end);
    if (t->v == NULL || t->end == NULL)
        return BATON_E_NOMEM;
    t->n = 1;
    for (uint32_t k = 0; k < tok->n_special; k++) {
        const int32_t id = tok->special[k];
        const uint8_t *piece = (const uint8_t *)tok->text + tok->piece_off[id];
        uint32_t n = 0;

        if (tok->types[id] != BATON_TOKEN_USER_DEFINED && !(flags & BATON_TOKENIZE_PARSE_SPECIAL))
            continue;
        for (size_t i = 0; i < tok->piece_len[id] && i < ST_DEPTH_MAX; i++) {
            uint32_t c = st_child(t, n, piece[i]);

            if (c == 0) { /* cap counts every byte inserted: room */
                c = (uint32_t)t->n++;
                t->v[c].byte = piece[i];
                t->v[c].sibling = t->v[n].child;
                t->v[n].child = c;
            }
            n = c;
        }
        t->end[k] = n;
    }
    for (size_t p = 0; p < len; p++)
        for (uint32_t n = 0, i = 0; p + i < len; i++) {
            n = st_child(t, n, (uint8_t)text[p + i]);
            if (n == 0)
                break;
            t->v[n].hit = 1;
        }
    return 0;
}

/* Whether [at, at + n) lies wholly inside one of the spans (ascending). */
static int in_spans(const struct baton_text_span *spans, size_t n_spans, size_t at, size_t n)
{
    size_t lo = 0, hi = n_spans;

    while (lo < hi) { /* the last span that starts at or before at */
        const size_t mid = lo + (hi - lo) / 2;

        if (spans[mid].off <= at)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo > 0 && at + n <= spans[lo - 1].off + spans[lo - 1].len;
}

/* Splits the text at every occurrence of a special piece the flags let
 * through, taking the pieces longest first over the whole text (so a
 * longer piece wins over a shorter one inside it), as llama.cpp's
 * tokenizer_st_partition does. *f gets the fragments in order.
 *
 * Only the pieces that may occur in the text (st_trie) are looked for, so
 * a vocabulary's many pieces cost one walk of the text, not a search each:
 * 20,000 user-defined pieces over a 200 KB text took 4.5-7 s before (a
 * break-it review), 0.05 s now.
 *
 * spans NULL: control pieces as the flags say; else a control piece only
 * where it lies inside one of them (baton_tokenize_spans; the flags then
 * hold PARSE_SPECIAL), elsewhere its text stays in the fragment around it. */
static int partition(const struct baton_tokenizer *tok, const char *text, size_t len,
                     unsigned flags, const struct baton_text_span *spans, size_t n_spans,
                     struct fragments *f)
{
    struct fragments next = {0};
    struct st_trie trie;
    int st = st_trie_build(tok, flags, text, len, &trie);

    if (st == 0)
        st = frag_push(f, 0, len, BATON_TOKEN_NONE);
    for (uint32_t k = 0; st == 0 && k < tok->n_special; k++) {
        int32_t id = tok->special[k];
        if (trie.end[k] == 0 || !trie.v[trie.end[k]].hit)
            continue; /* not let through by the flags, or its prefix nowhere in the text */
        const char *piece = tok->text + tok->piece_off[id];
        size_t plen = tok->piece_len[id];
        const int anywhere = spans == NULL || tok->types[id] == BATON_TOKEN_USER_DEFINED;
        next.n = 0;
        for (size_t i = 0; st == 0 && i < f->n; i++) {
            struct fragment fr = f->v[i];
            if (fr.id >= 0) {
                st = frag_push(&next, fr.off, fr.len, fr.id);
                continue;
            }
            size_t pos = fr.off, from = fr.off, end = fr.off + fr.len;
            while (st == 0 && pos < end) {
                const char *hit = memmem(text + from, end - from, piece, plen);
                if (hit == NULL) {
                    st = frag_push(&next, pos, end - pos, BATON_TOKEN_NONE);
                    break;
                }
                size_t at = (size_t)(hit - text);
                if (!anywhere && !in_spans(spans, n_spans, at, plen)) {
                    from = at + 1; /* plain text here: look further */
                    continue;
                }
                if (at > pos)
                    st = frag_push(&next, pos, at - pos, BATON_TOKEN_NONE);
                if (st == 0)
                    st = frag_push(&next, at, plen, id);
                pos = from = at + plen;
            }
        }
        struct fragments t = *f;
        *f = next;
        next = t;
    }
    st_trie_free(&trie);
    free(next.v);
    return st;
}

static int tokenize(const struct baton_tokenizer *tok, const char *text, size_t len,
                    unsigned flags, const struct baton_text_span *spans, size_t n_spans,
                    int32_t *ids, size_t max_ids, size_t *n_ids)
{
    struct work w = {0};
    struct fragments f = {0};
    struct out o = {ids, ids ? max_ids : 0, 0};
    int st = 0;

    *n_ids = 0;
    if (len > BATON_TOKENIZER_MAX_TEXT_BYTES)
        return BATON_E_LIMIT;
    if ((flags & BATON_TOKENIZE_ADD_BOS) && tok->bos >= 0)
        emit(&o, tok->bos);
    if (len == 0)
        goto done;
    if ((st = partition(tok, text, len, flags, spans, n_spans, &f)) != 0)
        goto out;
    /* SPM: the first fragment gets the space prefix too, unless the text
     * continues earlier text */
    int prev_special = !(flags & BATON_TOKENIZE_CONTINUE);
    for (size_t i = 0; i < f.n && st == 0; i++) {
        const struct fragment *fr = &f.v[i];
        if (fr->id >= 0) {
            emit(&o, fr->id);
            prev_special = 1;
            continue;
        }
        if (tok->is_bpe)
            st = bpe_fragment(tok, &w, text + fr->off, fr->len, &o);
        else
            st = spm_fragment(tok, &w, text + fr->off, fr->len,
                              tok->add_space_prefix && prev_special, &o);
        prev_special = 0;
    }
    if (st != 0)
        goto out;
done:
    *n_ids = o.n;
    if (o.n > o.max)
        st = BATON_E_LIMIT;
out:
    work_free(&w);
    free(f.v);
    return st;
}

int baton_tokenize_ex(const struct baton_tokenizer *tok, const char *text, size_t len,
                      unsigned flags, int32_t *ids, size_t max_ids, size_t *n_ids)
{
    return tokenize(tok, text, len, flags, NULL, 0, ids, max_ids, n_ids);
}

int baton_tokenize_spans(const struct baton_tokenizer *tok, const char *text, size_t len,
                         unsigned flags, const struct baton_text_span *spans, size_t n_spans,
                         int32_t *ids, size_t max_ids, size_t *n_ids)
{
    size_t end = 0;

    *n_ids = 0;
    for (size_t i = 0; i < n_spans; i++) {
        if (spans[i].off < end || spans[i].off > len || spans[i].len > len - spans[i].off)
            return BATON_E_INVAL;
        end = spans[i].off + spans[i].len;
    }
    flags &= BATON_TOKENIZE_ADD_BOS | BATON_TOKENIZE_CONTINUE;
    if (n_spans == 0) /* no control token anywhere (partition takes NULL as "as the flags say") */
        return tokenize(tok, text, len, flags, NULL, 0, ids, max_ids, n_ids);
    return tokenize(tok, text, len, flags | BATON_TOKENIZE_PARSE_SPECIAL, spans, n_spans, ids,
                    max_ids, n_ids);
}

int baton_tokenize(const struct baton_tokenizer *tok, const char *text, size_t len, int add_bos,
                   int32_t *ids, size_t max_ids, size_t *n_ids)
{
    return baton_tokenize_ex(tok, text, len, add_bos ? BATON_TOKENIZE_ADD_BOS : 0u, ids, max_ids,
                             n_ids);
}

/* ---- detokenize ---- */

static void put(char c, char *out, size_t cap, size_t *pos)
{
    if (*pos < cap)
        out[*pos] = c;
    (*pos)++;
}

/* BPE, as llama.cpp's token_to_piece: a normal piece maps each character
 * back to its byte (a character outside the mapping, or a malformed
 * sequence, is copied as it is), a user-defined piece is copied as it is,
 * anything else prints nothing. */
static void append_bpe_piece(const struct baton_tokenizer *tok, int32_t id, char *out, size_t cap,
                             size_t *pos)
{
    const uint8_t *p = (const uint8_t *)tok->text + tok->piece_off[id];
    size_t len = tok->piece_len[id];
    if (tok->types[id] == BATON_TOKEN_USER_DEFINED) {
        for (size_t i = 0; i < len; i++)
            put((char)p[i], out, cap, pos);
        return;
    }
    if (tok->types[id] != BATON_TOKEN_NORMAL)
        return;
    for (size_t i = 0; i < len;) {
        int b = -1;
        size_t cl = 1;
        if (p[i] < 0x80) {
            b = baton_bpe_byte_decode(p[i]);
        } else if (p[i] >= 0xc2 && p[i] <= 0xdf && len - i >= 2 && (p[i + 1] & 0xc0) == 0x80) {
            cl = 2;
            b = baton_bpe_byte_decode((uint32_t)(p[i] & 0x1f) * 64u + (p[i + 1] & 0x3fu));
        }
        if (b >= 0) {
            put((char)b, out, cap, pos);
            i += cl;
            continue;
        }
        /* not a mapped character: copy the whole UTF-8 sequence */
        cl = utf8_char_len(p[i]);
        if (cl > len - i)
            cl = len - i;
        for (size_t k = 0; k < cl; k++)
            put((char)p[i + k], out, cap, pos);
        i += cl;
    }
}

/* Appends the printed text of id at out[*pos..], writing only below cap;
 * *pos always advances by the full length. strip: drop one leading space. */
static void append_piece(const struct baton_tokenizer *tok, int32_t id, int strip, int special,
                         char *out, size_t cap, size_t *pos)
{
    const char *p = tok->text + tok->piece_off[id];
    size_t len = tok->piece_len[id];
    char byte;
    if (special && tok->types[id] == BATON_TOKEN_CONTROL) {
        /* its text as stored ("<|im_end|>", "</s>"), as llama.cpp's
         * token_to_piece with special set writes it */
        for (size_t i = 0; i < len; i++)
            put(p[i], out, cap, pos);
        return;
    }
    if (tok->is_bpe) {
        append_bpe_piece(tok, id, out, cap, pos);
        return;
    }
    switch (tok->types[id]) {
    case BATON_TOKEN_NORMAL:
    case BATON_TOKEN_USER_DEFINED:
        break;
    case BATON_TOKEN_UNKNOWN:
        p = UNK_TEXT;
        len = 3;
        break;
    case BATON_TOKEN_BYTE:
        if (tok->byte_val[id] < 0)
            return;
        byte = (char)tok->byte_val[id];
        p = &byte;
        len = 1;
        break;
    default: /* control, unused, undefined: nothing */
        return;
    }
    int normal = tok->types[id] == BATON_TOKEN_NORMAL || tok->types[id] == BATON_TOKEN_USER_DEFINED;
    for (size_t i = 0; i < len;) {
        char c;
        if (normal && len - i >= SPACE_ESC_BYTES &&
            memcmp(p + i, SPACE_ESC, SPACE_ESC_BYTES) == 0) {
            c = ' ';
            i += SPACE_ESC_BYTES;
        } else {
            c = p[i++];
        }
        if (strip) {
            strip = 0;
            if (c == ' ')
                continue;
        }
        if (*pos < cap)
            out[*pos] = c;
        (*pos)++;
    }
}

int baton_token_to_piece(const struct baton_tokenizer *tok, int32_t id, int32_t prev_id, char *out,
                         size_t cap, size_t *len)
{
    return baton_token_to_piece_ex(tok, id, prev_id, 0, out, cap, len);
}

int baton_token_to_piece_ex(const struct baton_tokenizer *tok, int32_t id, int32_t prev_id,
                            unsigned flags, char *out, size_t cap, size_t *len)
{
    const int special = (flags & BATON_DETOKENIZE_SPECIAL) != 0;
    *len = 0;
    if (id < 0 || (uint32_t)id >= tok->n_vocab)
        return BATON_E_BOUNDS;
    int strip = tok->add_space_prefix && prev_id >= 0 && prev_id == tok->bos;
    size_t need = 0;
    append_piece(tok, id, strip, special, NULL, 0, &need);
    *len = need;
    if (need > cap)
        return BATON_E_LIMIT;
    size_t pos = 0;
    append_piece(tok, id, strip, special, out, cap, &pos);
    return 0;
}

int baton_detokenize(const struct baton_tokenizer *tok, const int32_t *ids, size_t n, char *out,
                     size_t cap, size_t *len)
{
    return baton_detokenize_ex(tok, ids, n, 0, out, cap, len);
}

int baton_detokenize_ex(const struct baton_tokenizer *tok, const int32_t *ids, size_t n,
                        unsigned flags, char *out, size_t cap, size_t *len)
{
    const int special = (flags & BATON_DETOKENIZE_SPECIAL) != 0;
    size_t pos = 0;
    *len = 0;
    if (out == NULL)
        cap = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (uint32_t)ids[i] >= tok->n_vocab)
            return BATON_E_BOUNDS;
        int strip = tok->add_space_prefix && (i == 0 || (tok->bos >= 0 && ids[i - 1] == tok->bos));
        append_piece(tok, ids[i], strip, special, out, cap, &pos);
    }
    *len = pos;
    return pos > cap ? BATON_E_LIMIT : 0;
}
