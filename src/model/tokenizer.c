/* llama SentencePiece tokenizer (behaviour and sources in tokenizer.h).
 *
 * Vocabulary lookup is an open-addressing hash table (FNV-1a, linear
 * probing, load <= 1/2) from piece bytes to id. Tokenizing keeps the symbols
 * in a doubly linked list over the escaped text and the candidate pairs in a
 * binary max-heap ordered by (score desc, left index asc). A popped pair is
 * stale when either symbol has changed length since it was pushed: a symbol
 * only grows by absorbing its right neighbour, and an absorbed symbol drops
 * to length 0, so "both lengths still sum to the pair's length" identifies a
 * live pair exactly.
 */
#include "model/tokenizer.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/status.h"
#include "model/gguf.h"

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
    st = baton_gguf_get_string(g, "tokenizer.ggml.model", &model, &model_len);
    if (st == 0 && !(model_len == 5 && memcmp(model, "llama", 5) == 0)) {
        st = tfail(err, err_len, BATON_E_UNSUPPORTED,
                   "tokenizer.ggml.model '%.*s' is not supported (only 'llama')",
                   (int)(model_len > 32 ? 32 : model_len), model);
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

    if ((st = read_id(g, "tokenizer.ggml.bos_token_id", tok->n_vocab, &tok->bos, err, err_len)) !=
            0 ||
        (st = read_id(g, "tokenizer.ggml.eos_token_id", tok->n_vocab, &tok->eos, err, err_len)) !=
            0 ||
        (st = read_id(g, "tokenizer.ggml.unknown_token_id", tok->n_vocab, &tok->unk, err,
                      err_len)) != 0 ||
        (st = read_flag(g, "tokenizer.ggml.add_bos_token", &tok->add_bos, err, err_len)) != 0 ||
        (st = read_flag(g, "tokenizer.ggml.add_space_prefix", &tok->add_space_prefix, err,
                        err_len)) != 0)
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

int baton_tokenizer_add_bos(const struct baton_tokenizer *tok)
{
    return tok->add_bos;
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
    float score;
    uint32_t len; /* bytes of left + right when pushed */
};

struct work {
    const char *text; /* escaped text */
    uint32_t *sym_off, *sym_len;
    int32_t *prev, *next;
    struct pair *heap;
    size_t n_heap, cap_heap;
};

/* a comes out of the heap before b */
static int pair_before(const struct pair *a, const struct pair *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void heap_push(struct work *w, struct pair p)
{
    /* cap_heap bounds every push (see baton_tokenize). */
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
    int32_t id = find_piece(tok, w->text + w->sym_off[left], len);
    if (id < 0)
        return;
    struct pair p = {left, right, tok->scores[id], len};
    if (w->n_heap < w->cap_heap)
        heap_push(w, p);
}

static void emit(int32_t id, int32_t *ids, size_t max_ids, size_t *n)
{
    if (*n < max_ids)
        ids[*n] = id;
    (*n)++;
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

int baton_tokenize(const struct baton_tokenizer *tok, const char *text, size_t len, int add_bos,
                   int32_t *ids, size_t max_ids, size_t *n_ids)
{
    struct work w = {0};
    char *esc = NULL;
    size_t n = 0;
    int st = 0;

    *n_ids = 0;
    if (len > BATON_TOKENIZER_MAX_TEXT_BYTES)
        return BATON_E_LIMIT;
    if (ids == NULL)
        max_ids = 0;
    if (add_bos && tok->bos >= 0)
        emit(tok->bos, ids, max_ids, &n);
    if (len == 0)
        goto done;

    /* Escape: at most 3 bytes per input byte, plus the prefix (no wrap:
     * len <= 2^20). */
    esc = malloc(SPACE_ESC_BYTES * (len + 1));
    size_t esc_len = 0;
    if (esc == NULL) {
        st = BATON_E_NOMEM;
        goto out;
    }
    if (tok->add_space_prefix) {
        memcpy(esc, SPACE_ESC, SPACE_ESC_BYTES);
        esc_len = SPACE_ESC_BYTES;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(esc + esc_len, SPACE_ESC, SPACE_ESC_BYTES);
            esc_len += SPACE_ESC_BYTES;
        } else {
            esc[esc_len++] = text[i];
        }
    }

    /* Symbols: one per UTF-8 character. */
    size_t max_sym = esc_len;
    w.text = esc;
    w.sym_off = malloc(max_sym * sizeof *w.sym_off);
    w.sym_len = malloc(max_sym * sizeof *w.sym_len);
    w.prev = malloc(max_sym * sizeof *w.prev);
    w.next = malloc(max_sym * sizeof *w.next);
    /* Pushes: n_sym - 1 initial pairs, then at most 2 per merge, and there
     * are at most n_sym - 1 merges. */
    w.cap_heap = 3 * max_sym;
    w.heap = malloc(w.cap_heap * sizeof *w.heap);
    if (!w.sym_off || !w.sym_len || !w.prev || !w.next || !w.heap) {
        st = BATON_E_NOMEM;
        goto out;
    }
    size_t n_sym = 0;
    for (size_t off = 0; off < esc_len;) {
        size_t cl = utf8_char_len((uint8_t)esc[off]);
        if (cl > esc_len - off)
            cl = esc_len - off;
        w.sym_off[n_sym] = (uint32_t)off;
        w.sym_len[n_sym] = (uint32_t)cl;
        w.prev[n_sym] = (int32_t)n_sym - 1;
        w.next[n_sym] = (int32_t)n_sym + 1;
        n_sym++;
        off += cl;
    }
    w.next[n_sym - 1] = -1;

    for (size_t i = 1; i < n_sym; i++)
        try_pair(tok, &w, (int32_t)i - 1, (int32_t)i);
    while (w.n_heap > 0) {
        struct pair p = heap_pop(&w);
        uint32_t l = w.sym_len[p.left], r = w.sym_len[p.right];
        if (l == 0 || r == 0 || l + r != p.len)
            continue; /* stale */
        w.sym_len[p.left] = p.len;
        w.sym_len[p.right] = 0;
        w.next[p.left] = w.next[p.right];
        if (w.next[p.right] >= 0)
            w.prev[w.next[p.right]] = p.left;
        try_pair(tok, &w, w.prev[p.left], p.left);
        try_pair(tok, &w, p.left, w.next[p.left]);
    }

    for (int32_t s = 0; s >= 0; s = w.next[s]) {
        const char *sym = esc + w.sym_off[s];
        int32_t id = find_piece(tok, sym, w.sym_len[s]);
        if (id >= 0) {
            emit(id, ids, max_ids, &n);
            continue;
        }
        for (uint32_t i = 0; i < w.sym_len[s]; i++) {
            int32_t bid = tok->byte_id[(uint8_t)sym[i]];
            emit(bid >= 0 ? bid : tok->unk, ids, max_ids, &n);
        }
    }
done:
    *n_ids = n;
    if (n > max_ids)
        st = BATON_E_LIMIT;
out:
    free(esc);
    free(w.sym_off);
    free(w.sym_len);
    free(w.prev);
    free(w.next);
    free(w.heap);
    return st;
}

/* ---- detokenize ---- */

/* Appends the printed text of id at out[*pos..], writing only below cap;
 * *pos always advances by the full length. strip: drop one leading space. */
static void append_piece(const struct baton_tokenizer *tok, int32_t id, int strip, char *out,
                         size_t cap, size_t *pos)
{
    const char *p = tok->text + tok->piece_off[id];
    size_t len = tok->piece_len[id];
    char byte;
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
    *len = 0;
    if (id < 0 || (uint32_t)id >= tok->n_vocab)
        return BATON_E_BOUNDS;
    int strip = tok->add_space_prefix && prev_id >= 0 && prev_id == tok->bos;
    size_t need = 0;
    append_piece(tok, id, strip, NULL, 0, &need);
    *len = need;
    if (need > cap)
        return BATON_E_LIMIT;
    size_t pos = 0;
    append_piece(tok, id, strip, out, cap, &pos);
    return 0;
}

int baton_detokenize(const struct baton_tokenizer *tok, const int32_t *ids, size_t n, char *out,
                     size_t cap, size_t *len)
{
    size_t pos = 0;
    *len = 0;
    if (out == NULL)
        cap = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (uint32_t)ids[i] >= tok->n_vocab)
            return BATON_E_BOUNDS;
        int strip = tok->add_space_prefix && (i == 0 || (tok->bos >= 0 && ids[i - 1] == tok->bos));
        append_piece(tok, ids[i], strip, out, cap, &pos);
    }
    *len = pos;
    return pos > cap ? BATON_E_LIMIT : 0;
}
