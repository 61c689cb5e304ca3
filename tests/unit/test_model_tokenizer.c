/* llama SentencePiece tokenizer: the real stories260K vocabulary (expected
 * ids from the task statement and from an independent Python reference of
 * the same algorithm; byte tokens are id 3 + byte), round trips, and small
 * hand-computed vocabularies for merge order, ties and fallback. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/status.h"
#include "model/gguf.h"
#include "model/tokenizer.h"
#include "model/tokenizer_pre.h"

#define MODEL_FILE "stories260K.gguf"
#define SP "\xe2\x96\x81" /* U+2581 */

static struct baton_gguf *model;
static struct baton_tokenizer *tok;

/* Opens the model and its tokenizer once; skips (or fails under CI=true)
 * if absent. */
static void need_model(void)
{
    if (tok != NULL)
        return;
    const char *dir = getenv("MODEL_DIR");
    const char *ci = getenv("CI");
    char path[4096];
    char err[512] = "";
    int st = BATON_E_NOT_FOUND;
    if (dir != NULL) {
        snprintf(path, sizeof path, "%s/%s", dir, MODEL_FILE);
        st = baton_gguf_open(path, &model, err, sizeof err);
    }
    if (st != 0) {
        if (ci != NULL && strcmp(ci, "true") == 0)
            fail_msg("model %s/%s not usable (%s) and CI=true", dir ? dir : "(unset)", MODEL_FILE,
                     err);
        print_message("skipping: model %s/%s not found (set MODEL_DIR) %s\n", dir ? dir : "(unset)",
                      MODEL_FILE, err);
        skip();
    }
    assert_int_equal(baton_tokenizer_from_gguf(model, &tok, err, sizeof err), 0);
    assert_non_null(tok);
}

static void expect_ids(const struct baton_tokenizer *t, const char *text, size_t len, int add_bos,
                       const int32_t *want, size_t n_want)
{
    int32_t ids[256];
    size_t n = 999;
    assert_int_equal(baton_tokenize(t, text, len, add_bos, ids, 256, &n), 0);
    if (n != n_want || (n > 0 && memcmp(ids, want, n * sizeof *ids) != 0)) {
        for (size_t i = 0; i < n; i++)
            print_message("%d ", ids[i]);
        print_message("\n");
        fail_msg("'%.*s': got %zu ids, want %zu", (int)len, text, n, n_want);
    }
}

static void test_vocab(void **state)
{
    (void)state;
    need_model();
    const char *p;
    size_t len;
    float score;
    uint32_t type;
    assert_int_equal(baton_tokenizer_n_vocab(tok), 512);
    assert_int_equal(baton_tokenizer_bos(tok), 1);
    assert_int_equal(baton_tokenizer_eos(tok), 2);
    assert_int_equal(baton_tokenizer_unk(tok), 0);
    assert_int_equal(baton_tokenizer_add_bos(tok), 1);
    assert_int_equal(baton_tokenizer_piece(tok, 403, &p, &len, &score, &type), 0);
    assert_int_equal(len, 7);
    assert_memory_equal(p, SP "Once", 7);
    assert_true(score == -144.0f); /* scores 0, -1, ... from id 259 */
    assert_int_equal(type, BATON_TOKEN_NORMAL);
    assert_int_equal(baton_tokenizer_piece(tok, 68, &p, &len, NULL, &type), 0);
    assert_memory_equal(p, "<0x41>", 6);
    assert_int_equal(type, BATON_TOKEN_BYTE);
    assert_int_equal(baton_tokenizer_piece(tok, 1, NULL, NULL, NULL, &type), 0);
    assert_int_equal(type, BATON_TOKEN_CONTROL);
    assert_int_equal(baton_tokenizer_piece(tok, 512, &p, &len, NULL, NULL), BATON_E_BOUNDS);
    assert_int_equal(baton_tokenizer_piece(tok, -1, &p, &len, NULL, NULL), BATON_E_BOUNDS);
}

static void test_tokenize_real(void **state)
{
    (void)state;
    need_model();
    static const int32_t once[] = {1, 403, 407, 261, 378};
    expect_ids(tok, "Once upon a time", 16, 1, once, 5);
    expect_ids(tok, "Once upon a time", 16, 0, once + 1, 4);

    static const int32_t cat[] = {291, 280, 294, 262, 294, 353, 265, 284, 294, 426};
    expect_ids(tok, "The cat sat on the mat.", 23, 0, cat, 10);

    /* "▁h" "é" "ll" "o" "▁" then ☃ (E2 98 83), which is no piece, as byte
     * tokens (id 3 + byte), "▁", and 日 (E6 97 A5) 本 (E6 9C AC) likewise. */
    static const int32_t intl[] = {270,      485,      306,      414,      410,
                                   3 + 0xe2, 3 + 0x98, 3 + 0x83, 410,      3 + 0xe6,
                                   3 + 0x97, 3 + 0xa5, 3 + 0xe6, 3 + 0x9c, 3 + 0xac};
    const char *h = "h\xc3\xa9llo \xe2\x98\x83 \xe6\x97\xa5\xe6\x9c\xac";
    expect_ids(tok, h, strlen(h), 0, intl, sizeof intl / sizeof intl[0]);

    static const int32_t spaces[] = {410, 410, 259, 424, 414, 410, 262, 427, 412, 331, 419};
    expect_ids(tok, "  two  spaces", 13, 0, spaces, 11);

    /* Empty text: no pieces, not even the space prefix. */
    static const int32_t bos_only[] = {1};
    expect_ids(tok, "", 0, 1, bos_only, 1);
    expect_ids(tok, "", 0, 0, NULL, 0);
}

static void test_tokenize_limits(void **state)
{
    (void)state;
    need_model();
    int32_t ids[8] = {0};
    size_t n = 0;
    /* Too small an array: the count needed comes back, the prefix is written. */
    assert_int_equal(baton_tokenize(tok, "Once upon a time", 16, 1, ids, 2, &n), BATON_E_LIMIT);
    assert_int_equal(n, 5);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], 403);
    assert_int_equal(ids[2], 0);
    assert_int_equal(baton_tokenize(tok, "Once upon a time", 16, 1, NULL, 0, &n), BATON_E_LIMIT);
    assert_int_equal(n, 5);
    assert_int_equal(baton_tokenize(tok, "Once upon a time", 16, 1, ids, 5, &n), 0);

    size_t big = BATON_TOKENIZER_MAX_TEXT_BYTES + 1;
    char *text = malloc(big);
    assert_non_null(text);
    memset(text, 'a', big);
    assert_int_equal(baton_tokenize(tok, text, big, 0, ids, 8, &n), BATON_E_LIMIT);
    /* At the limit it works: "aaaa..." merges into long pieces. */
    int32_t *many = malloc(big * sizeof *many);
    assert_non_null(many);
    assert_int_equal(baton_tokenize(tok, text, big - 1, 0, many, big, &n), 0);
    assert_true(n > 0 && n < big);
    char *back = malloc(big);
    size_t len;
    assert_int_equal(baton_detokenize(tok, many, n, back, big, &len), 0);
    assert_int_equal(len, big - 1);
    assert_memory_equal(back, text, len);
    free(back);
    free(many);
    free(text);
}

static void test_detokenize_real(void **state)
{
    (void)state;
    need_model();
    static const int32_t ids[] = {432, 383, 286, 261, 376, 298, 315, 421, 395, 317};
    char out[256];
    size_t len = 0;
    assert_int_equal(baton_detokenize(tok, ids, 10, out, sizeof out, &len), 0);
    const char *want = ", there was a little girl named Lily";
    assert_int_equal(len, strlen(want));
    assert_memory_equal(out, want, len);

    /* Too small: the length needed, and the prefix that fits. */
    memset(out, '#', sizeof out);
    assert_int_equal(baton_detokenize(tok, ids, 10, out, 7, &len), BATON_E_LIMIT);
    assert_int_equal(len, strlen(want));
    assert_memory_equal(out, ", there", 7);
    assert_int_equal(out[7], '#');
    const int32_t bad[] = {432, 512};
    assert_int_equal(baton_detokenize(tok, bad, 2, out, sizeof out, &len), BATON_E_BOUNDS);

    /* One piece at a time, as a generation loop prints them. */
    assert_int_equal(baton_token_to_piece(tok, 403, 1, out, sizeof out, &len), 0);
    assert_int_equal(len, 4);
    assert_memory_equal(out, "Once", 4);
    assert_int_equal(baton_token_to_piece(tok, 403, 261, out, sizeof out, &len), 0);
    assert_int_equal(len, 5);
    assert_memory_equal(out, " Once", 5);
    assert_int_equal(baton_token_to_piece(tok, 403, BATON_TOKEN_NONE, out, sizeof out, &len), 0);
    assert_int_equal(len, 5);
    assert_int_equal(baton_token_to_piece(tok, 403, 261, out, 4, &len), BATON_E_LIMIT);
    assert_int_equal(len, 5);
    assert_int_equal(baton_token_to_piece(tok, 1, 0, out, sizeof out, &len), 0); /* <s>: control */
    assert_int_equal(len, 0);
    assert_int_equal(baton_token_to_piece(tok, 2, 0, out, sizeof out, &len), 0); /* </s> */
    assert_int_equal(len, 0);
    /* ... as their text with BATON_DETOKENIZE_SPECIAL (llama-server's
     * /detokenize); the other pieces unchanged */
    assert_int_equal(
        baton_token_to_piece_ex(tok, 2, 0, BATON_DETOKENIZE_SPECIAL, out, sizeof out, &len), 0);
    assert_int_equal(len, 4);
    assert_memory_equal(out, "</s>", 4);
    assert_int_equal(
        baton_token_to_piece_ex(tok, 2, 0, BATON_DETOKENIZE_SPECIAL, out, 3, &len), BATON_E_LIMIT);
    assert_int_equal(len, 4);
    {
        static const int32_t with_bos[] = {1, 403, 2};

        assert_int_equal(baton_detokenize_ex(tok, with_bos, 3, BATON_DETOKENIZE_SPECIAL, out,
                                             sizeof out, &len),
                         0);
        assert_int_equal(len, 11); /* the space after BOS stripped, as without the flag */
        assert_memory_equal(out, "<s>Once</s>", 11);
        assert_int_equal(baton_detokenize_ex(tok, with_bos, 3, 0, out, sizeof out, &len), 0);
        assert_int_equal(len, 4);
        assert_memory_equal(out, "Once", 4);
    }
    assert_int_equal(baton_token_to_piece(tok, 0, 0, out, sizeof out, &len),
                     0); /* <unk> -> U+2585 */
    assert_int_equal(len, 3);
    assert_memory_equal(out, "\xe2\x96\x85", 3);
    assert_int_equal(baton_token_to_piece(tok, 3 + 0x41, 0, out, sizeof out, &len), 0); /* <0x41> */
    assert_int_equal(len, 1);
    assert_int_equal(out[0], 'A');
    assert_int_equal(baton_token_to_piece(tok, 3, 0, out, sizeof out, &len), 0); /* <0x00> */
    assert_int_equal(len, 1);
    assert_int_equal(out[0], '\0');
    assert_int_equal(baton_token_to_piece(tok, 512, 0, out, sizeof out, &len), BATON_E_BOUNDS);
    assert_int_equal(baton_token_to_piece(tok, -5, 0, out, sizeof out, &len), BATON_E_BOUNDS);
}

static void round_trip(const char *text, size_t len)
{
    int32_t ids[512];
    char out[1024];
    size_t n, out_len;
    for (int bos = 0; bos <= 1; bos++) {
        assert_int_equal(baton_tokenize(tok, text, len, bos, ids, 512, &n), 0);
        assert_int_equal(baton_detokenize(tok, ids, n, out, sizeof out, &out_len), 0);
        if (out_len != len || memcmp(out, text, len) != 0)
            fail_msg("round trip of '%.*s' (bos %d) gave '%.*s'", (int)len, text, bos, (int)out_len,
                     out);
    }
}

static void test_round_trip(void **state)
{
    (void)state;
    need_model();
    static const char *const texts[] = {
        "Once upon a time",
        "The cat sat on the mat.",
        "Lily and Tom went to the park. They played with a big red ball!",
        "h\xc3\xa9llo \xe2\x98\x83 \xe6\x97\xa5\xe6\x9c\xac",
        "  two  spaces",
        "trailing space ",
        " ",
        "tab\tand\nnewline\r\n",
        "<s> is not parsed </s>",
        "\xff\xfe invalid \xc3( utf-8 \xe2\x82",
        "",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        round_trip(texts[i], strlen(texts[i]));
    round_trip("a\0b", 3); /* NUL goes through <0x00> */
    char all[256];
    for (int i = 0; i < 256; i++)
        all[i] = (char)i;
    round_trip(all, sizeof all);
}

/* ---- small vocabularies ---- */

struct gw {
    uint8_t buf[8192];
    size_t len;
};

static void gw_le(struct gw *w, uint64_t v, unsigned n)
{
    assert_true(n <= sizeof w->buf - w->len);
    for (unsigned i = 0; i < n; i++)
        w->buf[w->len++] = (uint8_t)(v >> (8 * i));
}

static void gw_str(struct gw *w, const char *s)
{
    size_t n = strlen(s);
    gw_le(w, n, 8);
    assert_true(n <= sizeof w->buf - w->len);
    memcpy(w->buf + w->len, s, n);
    w->len += n;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

struct vocab {
    const char *const *pieces;
    const float *scores;  /* NULL: no scores key */
    const int32_t *types; /* NULL: no token_type key */
    uint32_t n;
    const char *model; /* NULL: no model key */
    int space_prefix;  /* -1: no key */
    int64_t bos;       /* -1: no key */
    const char *pre;   /* NULL: no tokenizer.ggml.pre key */
    const char *const *merges; /* NULL: no tokenizer.ggml.merges key */
    uint32_t n_merges;
};

/* Writes a tensor-less GGUF holding v, opens it into *g and builds *t. */
static int build(const struct vocab *v, struct gw *w, struct baton_gguf **g,
                 struct baton_tokenizer **t, char *err, size_t err_len)
{
    uint64_t n_kv = 1 + (v->scores != NULL) + (v->types != NULL) + (v->model != NULL) +
                    (v->space_prefix >= 0) + (v->bos >= 0) + (v->pre != NULL) +
                    (v->merges != NULL);
    w->len = 0;
    gw_le(w, 0x46554747u, 4);
    gw_le(w, 3, 4);
    gw_le(w, 0, 8);
    gw_le(w, n_kv, 8);
    gw_str(w, "tokenizer.ggml.tokens");
    gw_le(w, BATON_GGUF_ARRAY, 4);
    gw_le(w, BATON_GGUF_STRING, 4);
    gw_le(w, v->n, 8);
    for (uint32_t i = 0; i < v->n; i++)
        gw_str(w, v->pieces[i]);
    if (v->scores != NULL) {
        gw_str(w, "tokenizer.ggml.scores");
        gw_le(w, BATON_GGUF_ARRAY, 4);
        gw_le(w, BATON_GGUF_F32, 4);
        gw_le(w, v->n, 8);
        for (uint32_t i = 0; i < v->n; i++)
            gw_le(w, f32_bits(v->scores[i]), 4);
    }
    if (v->types != NULL) {
        gw_str(w, "tokenizer.ggml.token_type");
        gw_le(w, BATON_GGUF_ARRAY, 4);
        gw_le(w, BATON_GGUF_I32, 4);
        gw_le(w, v->n, 8);
        for (uint32_t i = 0; i < v->n; i++)
            gw_le(w, (uint32_t)v->types[i], 4);
    }
    if (v->model != NULL) {
        gw_str(w, "tokenizer.ggml.model");
        gw_le(w, BATON_GGUF_STRING, 4);
        gw_str(w, v->model);
    }
    if (v->space_prefix >= 0) {
        gw_str(w, "tokenizer.ggml.add_space_prefix");
        gw_le(w, BATON_GGUF_BOOL, 4);
        gw_le(w, (uint64_t)v->space_prefix, 1);
    }
    if (v->bos >= 0) {
        gw_str(w, "tokenizer.ggml.bos_token_id");
        gw_le(w, BATON_GGUF_U32, 4);
        gw_le(w, (uint64_t)v->bos, 4);
    }
    if (v->pre != NULL) {
        gw_str(w, "tokenizer.ggml.pre");
        gw_le(w, BATON_GGUF_STRING, 4);
        gw_str(w, v->pre);
    }
    if (v->merges != NULL) {
        gw_str(w, "tokenizer.ggml.merges");
        gw_le(w, BATON_GGUF_ARRAY, 4);
        gw_le(w, BATON_GGUF_STRING, 4);
        gw_le(w, v->n_merges, 8);
        for (uint32_t i = 0; i < v->n_merges; i++)
            gw_str(w, v->merges[i]);
    }
    *t = NULL;
    assert_int_equal(baton_gguf_open_buffer(w->buf, w->len, "vocab.gguf", g, err, err_len), 0);
    return baton_tokenizer_from_gguf(*g, t, err, err_len);
}

static const char *const abc_pieces[] = {"<unk>", "<s>", "</s>", SP, "a", "b", "ab", "ba", SP "a"};
static const int32_t abc_types[] = {2, 3, 3, 1, 1, 1, 1, 1, 1};

static void test_merge_order(void **state)
{
    (void)state;
    struct gw w;
    struct baton_gguf *g;
    struct baton_tokenizer *t;
    char err[256];

    /* "aba" -> ▁ a b a. "ab" and "ba" tie at -1 (above "▁a" at -5): the
     * leftmost pair (a,b) wins; then neither "▁ab" nor "aba" is a piece. */
    float tie[] = {0, 0, 0, -10, -10, -10, -1, -1, -5};
    struct vocab v = {abc_pieces, tie, abc_types, 9, "llama", -1, -1, NULL, NULL, 0};
    assert_int_equal(build(&v, &w, &g, &t, err, sizeof err), 0);
    static const int32_t want_tie[] = {3, 6, 4};
    expect_ids(t, "aba", 3, 0, want_tie, 3);
    /* "z" is no piece and there are no byte tokens: unknown id. */
    static const int32_t want_z[] = {1, 8, 0};
    expect_ids(t, "az", 2, 1, want_z, 3);
    char out[64];
    size_t len;
    assert_int_equal(baton_detokenize(t, want_z, 3, out, sizeof out, &len), 0);
    assert_int_equal(len, 4);
    assert_memory_equal(out, "a\xe2\x96\x85", 4);
    baton_tokenizer_free(t);
    baton_gguf_close(g);

    /* "ba" scores higher: (b,a) first, then (▁,a) -> [▁a, ba]. */
    float high[] = {0, 0, 0, -10, -10, -10, -1, 0, -5};
    v.scores = high;
    assert_int_equal(build(&v, &w, &g, &t, err, sizeof err), 0);
    static const int32_t want_high[] = {8, 7};
    expect_ids(t, "aba", 3, 0, want_high, 2);
    baton_tokenizer_free(t);
    baton_gguf_close(g);

    /* NaN ranks below everything: "ab" = NaN, so (b,a) at -1 goes first. */
    float nan_ab[] = {0, 0, 0, -10, -10, -10, __builtin_nanf(""), -1, -5};
    v.scores = nan_ab;
    assert_int_equal(build(&v, &w, &g, &t, err, sizeof err), 0);
    expect_ids(t, "aba", 3, 0, want_high, 2);
    baton_tokenizer_free(t);
    baton_gguf_close(g);
}

static void test_defaults_and_prefix(void **state)
{
    (void)state;
    struct gw w;
    struct baton_gguf *g;
    struct baton_tokenizer *t;
    char err[256];
    static const char *const pieces[] = {"<unk>", "<s>", "</s>", SP, "h", "i", "hi", SP "hi"};

    /* No scores, no types, no model key: all pieces normal, score 0. */
    struct vocab v = {pieces, NULL, NULL, 8, NULL, -1, -1, NULL, NULL, 0};
    assert_int_equal(build(&v, &w, &g, &t, err, sizeof err), 0);
    static const int32_t with_prefix[] = {7};
    expect_ids(t, "hi", 2, 0, with_prefix, 1);
    char out[64];
    size_t len;
    /* Types default to normal, so <s> prints as its text here. */
    assert_int_equal(baton_token_to_piece(t, 1, BATON_TOKEN_NONE, out, sizeof out, &len), 0);
    assert_int_equal(len, 3);
    assert_memory_equal(out, "<s>", 3);
    baton_tokenizer_free(t);
    baton_gguf_close(g);

    /* add_space_prefix false: no "▁" in front, and nothing stripped. */
    v.space_prefix = 0;
    assert_int_equal(build(&v, &w, &g, &t, err, sizeof err), 0);
    static const int32_t no_prefix[] = {1, 6, 3, 4};
    expect_ids(t, "hi h", 4, 1, no_prefix, 4);
    static const int32_t spaced[] = {1, 7};
    assert_int_equal(baton_detokenize(t, spaced, 2, out, sizeof out, &len), 0);
    assert_int_equal(len, 6);
    assert_memory_equal(out, "<s> hi", 6);
    baton_tokenizer_free(t);
    baton_gguf_close(g);

    /* Explicit bos id. */
    v.space_prefix = -1;
    v.bos = 7;
    assert_int_equal(build(&v, &w, &g, &t, err, sizeof err), 0);
    assert_int_equal(baton_tokenizer_bos(t), 7);
    baton_tokenizer_free(t);
    baton_gguf_close(g);

    /* A 1-piece vocabulary: default ids 1 and 2 do not exist. */
    static const char *const one[] = {"x"};
    struct vocab v1 = {one, NULL, NULL, 1, NULL, -1, -1, NULL, NULL, 0};
    assert_int_equal(build(&v1, &w, &g, &t, err, sizeof err), 0);
    assert_int_equal(baton_tokenizer_bos(t), BATON_TOKEN_NONE);
    assert_int_equal(baton_tokenizer_eos(t), BATON_TOKEN_NONE);
    assert_int_equal(baton_tokenizer_unk(t), 0);
    /* No BOS; "▁" (3 bytes) and "y" are no pieces and there are no byte
     * tokens: one unknown id (0) per byte; "x" is id 0 too. */
    static const int32_t xs[] = {0, 0, 0, 0, 0};
    expect_ids(t, "xy", 2, 1, xs, 5);
    baton_tokenizer_free(t);
    baton_gguf_close(g);
}

static void test_build_errors(void **state)
{
    (void)state;
    struct gw w;
    struct baton_gguf *g;
    struct baton_tokenizer *t;
    char err[256];

    float tie[] = {0, 0, 0, -10, -10, -10, -1, -1, -5};
    struct vocab v = {abc_pieces, tie, abc_types, 9, "bert", -1, -1, NULL, NULL, 0};
    assert_int_equal(build(&v, &w, &g, &t, err, sizeof err), BATON_E_UNSUPPORTED);
    assert_null(t);
    assert_string_equal(err, "tokenizer: key 'tokenizer.ggml.model': 'bert' is not supported "
                             "(only 'llama' and 'gpt2')");
    baton_gguf_close(g);

    v.model = "llama";
    v.bos = 9;
    assert_int_equal(build(&v, &w, &g, &t, err, sizeof err), BATON_E_FORMAT);
    assert_string_equal(err,
                        "tokenizer: key 'tokenizer.ggml.bos_token_id': not a token id below 9");
    baton_gguf_close(g);

    /* Scores shorter than the vocabulary: build by hand. */
    v.bos = -1;
    v.n = 9;
    v.scores = NULL;
    assert_int_equal(build(&v, &w, &g, &t, err, sizeof err), 0);
    baton_tokenizer_free(t);
    baton_gguf_close(g);
    w.len = 0;
    gw_le(&w, 0x46554747u, 4);
    gw_le(&w, 3, 4);
    gw_le(&w, 0, 8);
    gw_le(&w, 2, 8);
    gw_str(&w, "tokenizer.ggml.tokens");
    gw_le(&w, BATON_GGUF_ARRAY, 4);
    gw_le(&w, BATON_GGUF_STRING, 4);
    gw_le(&w, 2, 8);
    gw_str(&w, "a");
    gw_str(&w, "b");
    gw_str(&w, "tokenizer.ggml.scores");
    gw_le(&w, BATON_GGUF_ARRAY, 4);
    gw_le(&w, BATON_GGUF_F32, 4);
    gw_le(&w, 1, 8);
    gw_le(&w, 0, 4);
    assert_int_equal(baton_gguf_open_buffer(w.buf, w.len, NULL, &g, err, sizeof err), 0);
    assert_int_equal(baton_tokenizer_from_gguf(g, &t, err, sizeof err), BATON_E_FORMAT);
    assert_string_equal(err, "tokenizer: key 'tokenizer.ggml.scores': not a float array of 2");
    baton_gguf_close(g);

    /* No vocabulary at all. */
    w.len = 0;
    gw_le(&w, 0x46554747u, 4);
    gw_le(&w, 3, 4);
    gw_le(&w, 0, 8);
    gw_le(&w, 1, 8);
    gw_str(&w, "tokenizer.ggml.tokens");
    gw_le(&w, BATON_GGUF_U32, 4);
    gw_le(&w, 5, 4);
    assert_int_equal(baton_gguf_open_buffer(w.buf, w.len, NULL, &g, err, sizeof err), 0);
    assert_int_equal(baton_tokenizer_from_gguf(g, &t, err, sizeof err), BATON_E_FORMAT);
    assert_string_equal(err, "tokenizer: key 'tokenizer.ggml.tokens': not a string array");
    baton_gguf_close(g);
    w.len = 16;
    gw_le(&w, 0, 8);
    assert_int_equal(baton_gguf_open_buffer(w.buf, w.len, NULL, &g, err, sizeof err), 0);
    assert_int_equal(baton_tokenizer_from_gguf(g, &t, err, sizeof err), BATON_E_NOT_FOUND);
    assert_string_equal(err, "tokenizer: key 'tokenizer.ggml.tokens' missing");
    baton_gguf_close(g);
}

/* ---- byte-level BPE (hand-computed) ---- */

#define G "\xc4\xa0" /* U+0120 "Ġ": the space byte in GPT-2's mapping */

static void test_bpe_byte_map(void **state)
{
    (void)state;
    static const struct {
        uint8_t b;
        const char *cp;
    } want[] = {
        {' ', G}, {'\n', "\xc4\x8a"}, {0x00, "\xc4\x80"}, {0x7f, "\xc4\xa1"},
        {0xa0, "\xc5\x82"}, {0xad, "\xc5\x83"}, {'A', "A"}, {0xff, "\xc3\xbf"},
        {0xa1, "\xc2\xa1"}, {'!', "!"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char out[2];
        size_t n = baton_bpe_byte_encode(want[i].b, out);
        assert_int_equal(n, strlen(want[i].cp));
        assert_memory_equal(out, want[i].cp, n);
    }
    /* a bijection onto U+0021..U+00FF (minus the 68) and U+0100..U+0143 */
    int seen[0x144] = {0};
    for (unsigned b = 0; b < 256; b++) {
        char out[2];
        size_t n = baton_bpe_byte_encode((uint8_t)b, out);
        uint32_t cp = n == 1 ? (uint8_t)out[0]
                             : ((uint32_t)((uint8_t)out[0] & 0x1f) << 6) | ((uint8_t)out[1] & 0x3f);
        assert_true(cp < 0x144 && !seen[cp]);
        seen[cp] = 1;
        assert_int_equal(baton_bpe_byte_decode(cp), (int)b);
    }
    assert_int_equal(baton_bpe_byte_decode(' '), -1);
    assert_int_equal(baton_bpe_byte_decode(0x144), -1);
}

/* a=0 b=1 c=2 Ġ=3 ab=4 bc=5 abc=6 Ġa=7 <|endoftext|>=8 (control) x=9
 * <x>=10 (user-defined); merges by rank: "b c", "a b", "ab c", "Ġ a". */
static const char *const bpe_pieces[] = {"a",  "b",  "c",   G,          "ab", "bc",
                                         "abc", G "a", "<|endoftext|>", "x", "<x>"};
static const int32_t bpe_types[] = {1, 1, 1, 1, 1, 1, 1, 1, 3, 1, 4};
static const char *const bpe_merges[] = {"b c", "a b", "ab c", G " a"};

static void expect_bpe(const struct baton_tokenizer *t, const char *text, unsigned flags,
                       const int32_t *want, size_t n_want)
{
    int32_t ids[64];
    size_t n = 999;
    assert_int_equal(baton_tokenize_ex(t, text, strlen(text), flags, ids, 64, &n), 0);
    if (n != n_want || (n > 0 && memcmp(ids, want, n * sizeof *ids) != 0)) {
        for (size_t i = 0; i < n; i++)
            print_message("%d ", ids[i]);
        print_message("\n");
        fail_msg("'%s': got %zu ids, want %zu", text, n, n_want);
    }
}

static void test_bpe_merges(void **state)
{
    (void)state;
    struct gw w;
    struct baton_gguf *g;
    struct baton_tokenizer *t;
    char err[256];
    struct vocab v = {bpe_pieces, NULL, bpe_types, 11, "gpt2", -1, -1, "gpt-2", bpe_merges, 4};
    assert_int_equal(build(&v, &w, &g, &t, err, sizeof err), 0);
    assert_int_equal(baton_tokenizer_is_bpe(t), 1);
    assert_int_equal(baton_tokenizer_bos(t), BATON_TOKEN_NONE); /* no default ids */
    assert_int_equal(baton_tokenizer_eos(t), BATON_TOKEN_NONE);
    assert_int_equal(baton_tokenizer_add_bos(t), 0);            /* gpt-2: no BOS */

    /* rank 0 "b c" before rank 1 "a b": a|bc, and "a bc" is no merge */
    static const int32_t abc[] = {0, 5};
    expect_bpe(t, "abc", 0, abc, 2);
    static const int32_t ab[] = {4};
    expect_bpe(t, "ab", 0, ab, 1);
    /* words "ab", " ab": Ġ,a,b -> a b (rank 1) before Ġ a (rank 3); "Ġ ab" is none */
    static const int32_t ab_ab[] = {4, 3, 4};
    expect_bpe(t, "ab ab", 0, ab_ab, 3);
    /* " a": Ġ a */
    static const int32_t sp_a[] = {7};
    expect_bpe(t, " a", 0, sp_a, 1);
    /* "!" is no piece, and neither is its byte: dropped (as llama.cpp) */
    static const int32_t a_only[] = {0};
    expect_bpe(t, "a!", 0, a_only, 1);
    /* special text: parsed only when asked; otherwise words "a", "<|",
     * "endoftext", "|>", "b", of which only a, the x of "endoftext" and b are
     * pieces */
    static const int32_t special[] = {0, 8, 1};
    expect_bpe(t, "a<|endoftext|>b", BATON_TOKENIZE_PARSE_SPECIAL, special, 3);
    static const int32_t plain[] = {0, 9, 1};
    expect_bpe(t, "a<|endoftext|>b", 0, plain, 3);
    /* a user-defined piece is always taken whole */
    static const int32_t user[] = {0, 10, 1};
    expect_bpe(t, "a<x>b", 0, user, 3);
    /* a shorter piece is still found in the plain text that a longer one
     * left on either side of it, every time it occurs */
    static const int32_t both[] = {10, 0, 8, 1, 10, 10};
    expect_bpe(t, "<x>a<|endoftext|>b<x><x>", BATON_TOKENIZE_PARSE_SPECIAL, both, 6);
    static const int32_t user_only[] = {10, 0, 9, 1, 10, 10};
    expect_bpe(t, "<x>a<|endoftext|>b<x><x>", 0, user_only, 6);
    expect_bpe(t, "", BATON_TOKENIZE_ADD_BOS, NULL, 0); /* no BOS id */

    /* detokenize: bytes back through the mapping, control prints nothing,
     * user-defined as stored */
    static const int32_t ids[] = {3, 4, 8, 7, 10, 2};
    char out[32];
    size_t len = 0;
    assert_int_equal(baton_detokenize(t, ids, 6, out, sizeof out, &len), 0);
    assert_int_equal(len, 9);
    assert_memory_equal(out, " ab a<x>c", 9);
    assert_int_equal(baton_token_to_piece(t, 3, BATON_TOKEN_NONE, out, sizeof out, &len), 0);
    assert_int_equal(len, 1);
    assert_int_equal(out[0], ' ');

    /* end of generation: <|endoftext|> by its text */
    assert_int_equal(baton_tokenizer_is_eog(t, 8), 1);
    assert_int_equal(baton_tokenizer_is_eog(t, 0), 0);
    assert_int_equal(baton_tokenizer_is_eog(t, BATON_TOKEN_NONE), 0);
    baton_tokenizer_free(t);
    baton_gguf_close(g);
}

/* Special pieces longer than the prefilter's 32-byte prefix: a=0 b=1,
 * 40 a's and b=2 (user-defined), 33 a's=3 (user-defined). The first
 * 32 bytes of both occur in 45 a's and a b; only the longer piece does. */
#define A8 "aaaaaaaa"
static const char *const long_pieces[] = {"a", "b", A8 A8 A8 A8 A8 "b", A8 A8 A8 A8 "a"};
static const int32_t long_types[] = {1, 1, 4, 4};
static const char *const long_merges[] = {"a b"};

static void test_long_special(void **state)
{
    (void)state;
    struct gw w;
    struct baton_gguf *g;
    struct baton_tokenizer *t;
    char err[256];
    struct vocab v = {long_pieces, NULL, long_types, 4, "gpt2", -1, -1, "gpt-2", long_merges, 0};

    assert_int_equal(build(&v, &w, &g, &t, err, sizeof err), 0);
    static const int32_t want[] = {0, 0, 0, 0, 0, 2};
    expect_bpe(t, "aaaaa" A8 A8 A8 A8 A8 "b", 0, want, 6);
    static const int32_t want33[] = {3, 0, 1};
    expect_bpe(t, A8 A8 A8 A8 "aab", 0, want33, 3);
    baton_tokenizer_free(t);
    baton_gguf_close(g);
}

static void test_bpe_errors(void **state)
{
    (void)state;
    struct gw w;
    struct baton_gguf *g;
    struct baton_tokenizer *t;
    char err[256];
    struct vocab v = {bpe_pieces, NULL, bpe_types, 11, "gpt2", -1, -1, NULL, bpe_merges, 4};

    /* no pre-tokenizer: llama.cpp's 'default', with a warning */
    int missing = -1;
    assert_int_equal(build(&v, &w, &g, &t, err, sizeof err), 0);
    assert_string_equal(baton_tokenizer_pre(t, &missing), "default");
    assert_int_equal(missing, 1);
    assert_non_null(strstr(baton_tokenizer_pre_warning(t), "no tokenizer.ggml.pre"));
    assert_int_equal(baton_tokenizer_add_bos(t), 0);
    baton_tokenizer_free(t);
    baton_gguf_close(g);
    v.pre = "default"; /* named: no warning */
    assert_int_equal(build(&v, &w, &g, &t, err, sizeof err), 0);
    assert_string_equal(baton_tokenizer_pre(t, &missing), "default");
    assert_int_equal(missing, 0);
    assert_null(baton_tokenizer_pre_warning(t));
    baton_tokenizer_free(t);
    baton_gguf_close(g);
    v.pre = ""; /* an empty name: as none, as llama.cpp */
    assert_int_equal(build(&v, &w, &g, &t, err, sizeof err), 0);
    assert_string_equal(baton_tokenizer_pre(t, &missing), "default");
    assert_int_equal(missing, 1);
    assert_non_null(baton_tokenizer_pre_warning(t));
    baton_tokenizer_free(t);
    baton_gguf_close(g);
    v.pre = "tekken"; /* BOS by default, as llama.cpp */
    assert_int_equal(build(&v, &w, &g, &t, err, sizeof err), 0);
    assert_string_equal(baton_tokenizer_pre(t, NULL), "tekken");
    assert_int_equal(baton_tokenizer_add_bos(t), 1);
    baton_tokenizer_free(t);
    baton_gguf_close(g);

    v.pre = "deepseek-llm";
    assert_int_equal(build(&v, &w, &g, &t, err, sizeof err), BATON_E_UNSUPPORTED);
    assert_null(t);
    assert_string_equal(err, "tokenizer: key 'tokenizer.ggml.pre': pre-tokenizer 'deepseek-llm' "
                             "is not supported (baton knows 'llama-bpe', 'qwen2', 'tekken', "
                             "'smollm', 'gpt-2', 'default' and their other names, listed "
                             "in baton(1))");
    baton_gguf_close(g);
    v.pre = "llama-bp"; /* a prefix of a name is not that name */
    assert_int_equal(build(&v, &w, &g, &t, err, sizeof err), BATON_E_UNSUPPORTED);
    baton_gguf_close(g);

    v.pre = "llama-bpe";
    static const char *const bad[] = {"b c", "ab", "a b"};
    v.merges = bad;
    v.n_merges = 3;
    assert_int_equal(build(&v, &w, &g, &t, err, sizeof err), BATON_E_FORMAT);
    assert_string_equal(err, "tokenizer: key 'tokenizer.ggml.merges': element 1 is not two parts "
                             "separated by a space");
    baton_gguf_close(g);
    static const char *const lead[] = {" ab"}; /* the space must follow the first byte */
    v.merges = lead;
    v.n_merges = 1;
    assert_int_equal(build(&v, &w, &g, &t, err, sizeof err), BATON_E_FORMAT);
    baton_gguf_close(g);

    v.merges = NULL;
    assert_int_equal(build(&v, &w, &g, &t, err, sizeof err), BATON_E_NOT_FOUND);
    assert_string_equal(err, "tokenizer: key 'tokenizer.ggml.merges' missing");
    baton_gguf_close(g);

    /* llama-bpe: BOS by default, and a word that is a piece is not merged
     * ("abc" is piece 6, although merges would give a|bc) */
    v.merges = bpe_merges;
    v.n_merges = 4;
    v.bos = 9;
    assert_int_equal(build(&v, &w, &g, &t, err, sizeof err), 0);
    assert_int_equal(baton_tokenizer_add_bos(t), 1);
    static const int32_t abc[] = {9, 6};
    expect_bpe(t, "abc", BATON_TOKENIZE_ADD_BOS, abc, 2);
    baton_tokenizer_free(t);
    baton_gguf_close(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vocab),
        cmocka_unit_test(test_tokenize_real),
        cmocka_unit_test(test_tokenize_limits),
        cmocka_unit_test(test_detokenize_real),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_merge_order),
        cmocka_unit_test(test_defaults_and_prefix),
        cmocka_unit_test(test_build_errors),
        cmocka_unit_test(test_bpe_byte_map),
        cmocka_unit_test(test_bpe_merges),
        cmocka_unit_test(test_bpe_errors),
        cmocka_unit_test(test_long_special),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    baton_tokenizer_free(tok);
    baton_gguf_close(model);
    return rc;
}
