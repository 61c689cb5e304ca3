/* Fuzz target tokenizer: the llama SentencePiece and byte-level BPE
 * tokenizers (src/model/tokenizer.h, tokenizer_pre.h) on arbitrary bytes.
 *
 * Vocabularies, built once (the real ones on first use): SentencePiece: the
 * real model's (stories260K.gguf from $MODEL_DIR, else the build's
 * BATON_FUZZ_MODEL_DIR, else ../shared/models) and a small synthetic one
 * made with gguf_writer.c (<unk>, <s>, </s>, all 256 byte tokens, a few
 * dozen merges); BPE: a synthetic one (the 256 mapped bytes, a dozen merges
 * and their pieces, a control and a user-defined piece; the gpt-2, tekken,
 * smollm or default pre-tokenizer by the text's length % 4) and llama.cpp's
 * ggml-vocab-{gpt-2,llama-bpe,qwen2}.gguf
 * from the same directory's vocab/. A missing real vocabulary is replaced
 * by the synthetic one of its kind.
 *
 * Input: byte 0 = flags (bit 0: add BOS; bit 1: synthetic SentencePiece
 * vocabulary; bit 2: also detokenize the input read as little-endian i32
 * ids; bit 3: BPE, with bits 5-6 choosing synthetic, gpt-2, llama-bpe or
 * qwen2 (bit 1 then unused); bit 4: parse special-token text; bit 7:
 * also the spans checks below), then the text.
 *
 * Properties:
 *   - the size query (max_ids 0) and the real call agree, and a result of
 *     n ids needs at most 3 per text byte plus the prefix and BOS;
 *   - every id is in 0..n_vocab-1, and the first is BOS when asked for;
 *   - detokenize's length query and the real call agree; token_to_piece
 *     of every id succeeds with the length it asked for;
 *   - SentencePiece round trip: with a vocabulary holding all 256 byte
 *     tokens, a text free of "\xe2\x96\x81" (U+2581, which the tokenizer
 *     uses for ' ') and whose spaces are not swallowed by a preceding
 *     multi-byte lead byte (spaces_stay_whole), and a result without
 *     control/unknown/unused ids past the leading BOS (special_inside),
 *     detokenize(tokenize(text)) == text byte for byte;
 *   - BPE round trip: with a vocabulary whose normal pieces include all
 *     256 mapped bytes and a result without control/unknown/unused ids past
 *     the BOS, detokenize(tokenize(text)) == the text with each byte that
 *     starts no valid UTF-8 sequence replaced by U+FFFD
 *     (baton_utf8_sanitize), byte for byte;
 *   - ids outside the vocabulary give BATON_E_BOUNDS, never a read;
 *   - (bit 7) baton_tokenize_spans with no span gives the ids of
 *     baton_tokenize_ex without special parsing, with one span over the
 *     whole text those with it; the text as a user's message laid out with
 *     a chat template (chat.h; template 1 + length % 9; a conversation's
 *     later turn, baton_chat_format_next, when length / 8 is odd, tokenized
 *     as a continuation: BATON_TOKENIZE_CONTINUE, which changes no BPE
 *     tokenizer's ids) tokenizes with its spans (ascending, inside the
 *     text), the size query and the call agreeing, every id in range;
 *     the text as a past reply (baton_chat_format_reply): no spans, the
 *     text itself after at most one space (mistral-v3 trims it; gemma trims
 *     C's white space at both ends, exactly), its ids in range;
 *   - at the start, every pre-tokenizer name baton lists looks up and
 *     compiles.
 */
#include "fuzz_common.h"

#include <ctype.h>

#include "baton/status.h"
#include "gguf_writer.h"
#include "model/chat.h"
#include "model/gguf.h"
#include "model/tokenizer.h"
#include "model/tokenizer_pre.h"

#ifndef BATON_FUZZ_MODEL_DIR
#define BATON_FUZZ_MODEL_DIR "../shared/models"
#endif

struct vocab {
    struct baton_tokenizer *tok;
    int all_bytes; /* every <0xNN> present as a BYTE token */
};

static struct vocab model_vocab, synth_vocab, synth_bpe;
/* The synthetic BPE vocabulary with the pre-tokenizers of several
 * expressions (tokenizer_pre.c): tekken, smollm (two stages), default
 * (four stages); chosen when bits 5-6 pick the synthetic one, by the text's
 * length % 4 (0: synth_bpe's gpt-2). */
static const char *const synth_pre[] = {"gpt-2", "tekken", "smollm", "default"};
static struct vocab synth_bpe_pre[4];
static struct vocab real_bpe[3]; /* gpt-2, llama-bpe, qwen2 */
static int real_bpe_tried[3];
static int inited;

/* 1 if every byte's mapped character is a NORMAL piece (BPE). */
static int has_all_mapped_bytes(const struct baton_tokenizer *tok)
{
    uint32_t n = baton_tokenizer_n_vocab(tok), found = 0;
    uint8_t seen[256] = {0};
    for (uint32_t id = 0; id < n; id++) {
        const char *p;
        size_t len;
        uint32_t type;
        if (baton_tokenizer_piece(tok, (int32_t)id, &p, &len, NULL, &type) != 0)
            abort();
        if (type != BATON_TOKEN_NORMAL || len == 0 || len > 2)
            continue;
        for (unsigned b = 0; b < 256; b++) {
            char enc[2];
            size_t el = baton_bpe_byte_encode((uint8_t)b, enc);
            if (el == len && memcmp(enc, p, len) == 0 && !seen[b]) {
                seen[b] = 1;
                found++;
            }
        }
    }
    return found == 256;
}

static int has_all_bytes(const struct baton_tokenizer *tok)
{
    uint32_t n = baton_tokenizer_n_vocab(tok), found = 0;
    uint8_t seen[256] = {0};
    for (uint32_t id = 0; id < n; id++) {
        const char *p;
        size_t len;
        uint32_t type;
        unsigned b;
        char tail;
        char piece[8];
        if (baton_tokenizer_piece(tok, (int32_t)id, &p, &len, NULL, &type) != 0)
            abort();
        if (type != BATON_TOKEN_BYTE || len != 6)
            continue;
        memcpy(piece, p, 6);
        piece[6] = 0;
        if (sscanf(piece, "<0x%2X%c", &b, &tail) == 2 && tail == '>' && b < 256 && !seen[b]) {
            seen[b] = 1;
            found++;
        }
    }
    return found == 256;
}

static int load_model(const char *dir, struct vocab *v)
{
    char path[4096];
    struct baton_gguf *g;
    char err[256];
    if (!dir || !*dir)
        return -1;
    snprintf(path, sizeof path, "%s/stories260K.gguf", dir);
    if (baton_gguf_open(path, &g, err, sizeof err) != 0)
        return -1;
    int rc = baton_tokenizer_from_gguf(g, &v->tok, err, sizeof err);
    baton_gguf_close(g);
    if (rc != 0)
        return -1;
    v->all_bytes = has_all_bytes(v->tok);
    return 0;
}

/* The synthetic BPE vocabulary: ids 0..255 the mapped bytes, then the
 * merge results, "<|endoftext|>" (control, BOS and EOS) and "<|u|>"
 * (user-defined). Merges in mapped space ("Ġ" is the space). */

/* The tokenizer of the GGUF written in w (freed here); aborts when the
 * harness's own vocabulary is refused. */
static struct baton_tokenizer *tokenizer_of(struct gw *w, const char *name)
{
    struct baton_gguf *g;
    struct baton_tokenizer *tok = NULL;
    char err[256];
    if (baton_gguf_open_buffer(w->p, w->len, name, &g, err, sizeof err) != 0 ||
        baton_tokenizer_from_gguf(g, &tok, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_tokenizer: %s vocabulary rejected: %s\n", name, err);
        abort();
    }
    baton_gguf_close(g);
    gw_free(w);
    return tok;
}

static void build_synth_bpe(const char *pre, struct vocab *out)
{
    static const char *const merges[] = {
        "\xc4\xa0 t", "h e", "\xc4\xa0" "t he", "i n", "in g", "\xc4\xa0 a", "a n", "an d",
        "\xc4\xa0" "a nd", "e r", "1 2", "12 3", "\xc3\x83 \xc2\xa9", "\xc4\x8a \xc4\x8a",
        "\xc4\xa0 \xc4\xa0",
    };
    enum { N_MERGES = sizeof merges / sizeof merges[0] };
    char pieces[N_MERGES][32];
    struct gw w;
    uint32_t n_vocab = 256 + N_MERGES + 2;

    for (size_t i = 0; i < N_MERGES; i++) {
        const char *sp = strchr(merges[i] + 1, ' ');
        size_t l = (size_t)(sp - merges[i]);
        snprintf(pieces[i], sizeof pieces[i], "%.*s%s", (int)l, merges[i], sp + 1);
    }
    gw_init(&w);
    gw_header(&w, 3);
    gw_kv_str(&w, "tokenizer.ggml.model", "gpt2");
    gw_kv_str(&w, "tokenizer.ggml.pre", pre);
    gw_kv_array(&w, "tokenizer.ggml.tokens", BATON_GGUF_STRING, n_vocab);
    for (unsigned b = 0; b < 256; b++) {
        char enc[3] = {0};
        baton_bpe_byte_encode((uint8_t)b, enc);
        gw_str(&w, enc);
    }
    for (size_t i = 0; i < N_MERGES; i++)
        gw_str(&w, pieces[i]);
    gw_str(&w, "<|endoftext|>");
    gw_str(&w, "<|u|>");
    gw_kv_array(&w, "tokenizer.ggml.token_type", BATON_GGUF_I32, n_vocab);
    for (uint32_t i = 0; i < n_vocab; i++)
        gw_u32(&w, i == n_vocab - 2 ? BATON_TOKEN_CONTROL
                   : i == n_vocab - 1 ? BATON_TOKEN_USER_DEFINED
                                      : BATON_TOKEN_NORMAL);
    gw_kv_array(&w, "tokenizer.ggml.merges", BATON_GGUF_STRING, N_MERGES);
    for (size_t i = 0; i < N_MERGES; i++)
        gw_str(&w, merges[i]);
    gw_kv_u32(&w, "tokenizer.ggml.bos_token_id", n_vocab - 2);
    gw_kv_u32(&w, "tokenizer.ggml.eos_token_id", n_vocab - 2);
    gw_finish(&w);
    out->tok = tokenizer_of(&w, "synthetic-bpe");
    out->all_bytes = has_all_mapped_bytes(out->tok);
    FUZZ_CHECK(out->all_bytes, "synthetic BPE vocabulary lacks mapped bytes");
}

static int load_bpe_file(const char *dir, const char *name, struct vocab *v)
{
    char path[4096];
    struct baton_gguf *g;
    char err[256];
    if (!dir || !*dir)
        return -1;
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf", dir, name);
    if (baton_gguf_open(path, &g, err, sizeof err) != 0)
        return -1;
    int rc = baton_tokenizer_from_gguf(g, &v->tok, err, sizeof err);
    baton_gguf_close(g);
    if (rc != 0)
        return -1;
    v->all_bytes = has_all_mapped_bytes(v->tok);
    return 0;
}

/* Real BPE vocabulary k (0 gpt-2, 1 llama-bpe, 2 qwen2), loaded on first
 * use; the synthetic one if it cannot be. */
static const struct vocab *bpe_vocab(unsigned k)
{
    static const char *const names[] = {"gpt-2", "llama-bpe", "qwen2"};
    if (!real_bpe_tried[k]) {
        real_bpe_tried[k] = 1;
        if (load_bpe_file(getenv("MODEL_DIR"), names[k], &real_bpe[k]) != 0 &&
            load_bpe_file(BATON_FUZZ_MODEL_DIR, names[k], &real_bpe[k]) != 0 &&
            load_bpe_file("../shared/models", names[k], &real_bpe[k]) != 0)
            real_bpe[k] = synth_bpe; /* shared, never freed */
    }
    return &real_bpe[k];
}

static void init(void)
{
    static const char *const extra[] = {
        "\xe2\x96\x81", "\xe2\x96\x81t", "\xe2\x96\x81th", "\xe2\x96\x81the", "th", "he", "the",
        "\xe2\x96\201a", "an", "\xe2\x96\201an", "nd", "\xe2\x96\201and", "in", "ing",
        "\xe2\x96\x81in", "e", "t", "h", "a", "n", "d", "i", "g", "o", "\xe2\x96\x81o", "on",
        "nce", "\xe2\x96\x81once", "ce", "c", "u", "p", "up", "\xe2\x96\x81up", "\xc3\xa9",
        "\xe6\x97\xa5", "\xe6\x97\xa5\xe6\x9c\xac", "<", "s", ">", "<s", "\xe2\x96\x81\xe2\x96\x81",
    };
    struct gw w;
    gw_init(&w);
    gw_vocab_gguf(&w, extra, sizeof extra / sizeof extra[0]);
    synth_vocab.tok = tokenizer_of(&w, "synthetic");
    synth_vocab.all_bytes = has_all_bytes(synth_vocab.tok);
    FUZZ_CHECK(synth_vocab.all_bytes, "synthetic vocabulary lacks byte tokens");

    if (load_model(getenv("MODEL_DIR"), &model_vocab) != 0 &&
        load_model(BATON_FUZZ_MODEL_DIR, &model_vocab) != 0 &&
        load_model("../shared/models", &model_vocab) != 0)
        model_vocab = synth_vocab; /* shared, not owned twice: never freed */
    for (size_t i = 0; i < 4; i++)
        build_synth_bpe(synth_pre[i], &synth_bpe_pre[i]);
    /* every name baton lists looks up and compiles */
    for (size_t i = 0; baton_pretok_name(i) != NULL; i++) {
        struct baton_pretok_info info;
        struct baton_pretok *pre = NULL;
        const char *name = baton_pretok_name(i);
        FUZZ_CHECK(baton_pretok_lookup(name, strlen(name), &info) == 0 &&
                       baton_pretok_create(info.kind, &pre) == 0,
                   "pre-tokenizer '%s' does not compile", name);
        baton_pretok_free(pre);
    }
    synth_bpe = synth_bpe_pre[0];
    inited = 1;
}

/* 1 if an id after the optional leading BOS is a CONTROL, UNKNOWN or UNUSED
 * token. Merges may reach such a piece when the vocabulary has a path to
 * it (the synthetic one has "<" + "s" -> "<s", "<s" + ">" -> "<s>"), as in
 * llama.cpp's SPM tokenizer, which merges without looking at token types;
 * those pieces print as nothing (or U+2585), so no round trip holds. */
static int special_inside(const struct baton_tokenizer *tok, const int32_t *ids, size_t n,
                          int add_bos)
{
    int32_t bos = baton_tokenizer_bos(tok);
    for (size_t i = add_bos && bos != BATON_TOKEN_NONE ? 1 : 0; i < n; i++) {
        uint32_t type = 0;
        if (baton_tokenizer_piece(tok, ids[i], NULL, NULL, NULL, &type) != 0)
            abort();
        if (type == BATON_TOKEN_CONTROL || type == BATON_TOKEN_UNKNOWN ||
            type == BATON_TOKEN_UNUSED)
            return 1;
    }
    return 0;
}

/* 1 if, after each ' ' becomes the 3 bytes of U+2581, no character of the
 * tokenizer's split (length from the lead byte: C0-DF 2, E0-EF 3, F0-F7 4,
 * else 1; clamped at the end) swallows part of an escaped space. Otherwise
 * (a lead byte just before a space, as in "\xc3 ") the escape's bytes come
 * back as byte tokens and no round trip holds; llama.cpp splits alike. */
static int spaces_stay_whole(const char *text, size_t len)
{
    size_t pending = 0; /* escaped bytes the current character still takes */
    for (size_t i = 0; i < len; i++) {
        uint8_t b = (uint8_t)text[i];
        if (b == ' ') {
            if (pending > 0)
                return 0;
            continue; /* its own 3-byte character */
        }
        if (pending > 0) {
            pending--;
            continue;
        }
        pending = b < 0xc0 ? 0 : b < 0xe0 ? 1 : b < 0xf0 ? 2 : b < 0xf8 ? 3 : 0;
    }
    return 1;
}

static void check_ids_detok(const struct vocab *v, const int32_t *ids, size_t n)
{
    size_t len = 0, len2 = 0;
    int rc = baton_detokenize(v->tok, ids, n, NULL, 0, &len);
    uint32_t nv = baton_tokenizer_n_vocab(v->tok);
    int any_bad = 0;
    for (size_t i = 0; i < n; i++)
        any_bad |= ids[i] < 0 || (uint32_t)ids[i] >= nv;
    if (any_bad) {
        FUZZ_CHECK(rc == BATON_E_BOUNDS, "bad id accepted by detokenize (%d)", rc);
        return;
    }
    FUZZ_CHECK(rc == 0 || rc == BATON_E_LIMIT, "detokenize query %d", rc);
    char *out = malloc(len + 1);
    if (!out)
        abort();
    rc = baton_detokenize(v->tok, ids, n, out, len, &len2);
    FUZZ_CHECK(rc == 0 && len2 == len, "detokenize with its own length: %d, %zu vs %zu", rc, len2,
               len);
    free(out);
}

/* baton_tokenize_spans against baton_tokenize_ex (flags bos | extra):
 * the same ids, or the same error. */
static void check_spans_equal(const struct baton_tokenizer *tok, const char *text, size_t len,
                              unsigned bos, const struct baton_text_span *spans, size_t n_spans,
                              unsigned extra)
{
    size_t na = 0, nb = 0;
    int ra = baton_tokenize_spans(tok, text, len, bos, spans, n_spans, NULL, 0, &na);
    int rb = baton_tokenize_ex(tok, text, len, bos | extra, NULL, 0, &nb);

    FUZZ_CHECK(ra == rb && na == nb, "spans %zu: rc %d / %d, %zu / %zu ids", n_spans, ra, rb, na,
               nb);
    if (ra != BATON_E_LIMIT || na == 0)
        return;
    int32_t *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b);
    if (!a || !b)
        abort();
    ra = baton_tokenize_spans(tok, text, len, bos, spans, n_spans, a, na, &na);
    rb = baton_tokenize_ex(tok, text, len, bos | extra, b, nb, &nb);
    FUZZ_CHECK(ra == 0 && rb == 0 && na == nb && memcmp(a, b, na * sizeof *a) == 0,
               "spans %zu: different ids", n_spans);
    free(a);
    free(b);
}

/* Bit 7's checks (see the top). */
static void check_spans(const struct baton_tokenizer *tok, const char *text, size_t len,
                        unsigned bos)
{
    const struct baton_text_span all = {0, len};
    struct baton_chat_prompt cp;
    size_t n = 0, n2 = 0;
    uint32_t nv = baton_tokenizer_n_vocab(tok);

    check_spans_equal(tok, text, len, bos, NULL, 0, 0);
    check_spans_equal(tok, text, len, bos, &all, 1, BATON_TOKENIZE_PARSE_SPECIAL);
    const enum baton_chat_template t = (enum baton_chat_template)(1 + len % 9);
    const int next = (len / 8) % 2;
    /* a later turn continues the conversation's text: no BOS, no space
     * prefix before its first piece */
    const unsigned fl = next ? BATON_TOKENIZE_CONTINUE : bos;

    if (next ? baton_chat_format_next(t, text, len, &cp) != 0
             : baton_chat_format(t, NULL, text, len, &cp) != 0)
        return; /* too long: the text's own checks said so */
    for (size_t i = 0, end = 0; i < cp.n_spans; i++) {
        FUZZ_CHECK(cp.spans[i].off >= end && cp.spans[i].len > 0 &&
                       cp.spans[i].off + cp.spans[i].len <= cp.len,
                   "chat span %zu: [%zu, +%zu) after %zu, text %zu", i, cp.spans[i].off,
                   cp.spans[i].len, end, cp.len);
        end = cp.spans[i].off + cp.spans[i].len;
    }
    int rc = baton_tokenize_spans(tok, cp.text, cp.len, fl, cp.spans, cp.n_spans, NULL, 0, &n);
    FUZZ_CHECK(rc == BATON_E_LIMIT && n > 0, "chat size query: rc %d, n %zu", rc, n);
    int32_t *ids = malloc(n * sizeof *ids);
    if (!ids)
        abort();
    rc = baton_tokenize_spans(tok, cp.text, cp.len, fl, cp.spans, cp.n_spans, ids, n, &n2);
    FUZZ_CHECK(rc == 0 && n2 == n, "chat tokenize: rc %d, %zu ids then %zu", rc, n, n2);
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(ids[i] >= 0 && (uint32_t)ids[i] < nv, "chat id %d of %u", ids[i], nv);
    /* BPE has no space prefix: CONTINUE changes nothing there */
    if (next && baton_tokenizer_is_bpe(tok)) {
        int32_t *plain = malloc(n * sizeof *plain);
        size_t n3 = 0;

        if (!plain)
            abort();
        rc = baton_tokenize_spans(tok, cp.text, cp.len, 0, cp.spans, cp.n_spans, plain, n, &n3);
        FUZZ_CHECK(rc == 0 && n3 == n && memcmp(plain, ids, n * sizeof *ids) == 0,
                   "chat next turn, BPE: CONTINUE changed the ids (rc %d, %zu then %zu)", rc, n,
                   n3);
        free(plain);
    }
    free(ids);
    baton_chat_prompt_free(&cp);
    /* the text as a past reply in a history (baton serve): the reply's
     * text is the input, after at most one space, no longer than it and
     * the space; no spans; the ids in range */
    int fresh = -1;
    if (baton_chat_format_reply(t, text, len, &cp, &fresh) != 0)
        return;
    FUZZ_CHECK(cp.n_spans == 0 && cp.len <= len + 1 && (fresh == 0 || fresh == 1),
               "reply layout: %zu spans, %zu bytes of %zu, fresh %d", cp.n_spans, cp.len, len,
               fresh);
    if (t == BATON_CHAT_GEMMA) {
        size_t a = 0, e = len;

        while (a < len && isspace((unsigned char)text[a]))
            a++;
        while (e > a && isspace((unsigned char)text[e - 1]))
            e--;
        FUZZ_CHECK(cp.len == e - a && memcmp(cp.text, text + a, e - a) == 0,
                   "reply layout: gemma's text is not the input trimmed (%zu of %zu bytes)",
                   cp.len, len);
    }
    FUZZ_CHECK(t == BATON_CHAT_MISTRAL_V3 || t == BATON_CHAT_GEMMA ||
                   (cp.len >= len && memcmp(cp.text + (cp.len - len), text, len) == 0),
               "reply layout: the text changed (template %d)", (int)t);
    rc = baton_tokenize_ex(tok, cp.text, cp.len, fresh ? 0u : BATON_TOKENIZE_CONTINUE, NULL, 0,
                           &n);
    if (rc == BATON_E_LIMIT && n > 0) {
        ids = malloc(n * sizeof *ids);
        if (!ids)
            abort();
        rc = baton_tokenize_ex(tok, cp.text, cp.len, fresh ? 0u : BATON_TOKENIZE_CONTINUE, ids,
                               n, &n2);
        FUZZ_CHECK(rc == 0 && n2 == n, "reply tokenize: rc %d, %zu ids then %zu", rc, n, n2);
        for (size_t i = 0; i < n; i++)
            FUZZ_CHECK(ids[i] >= 0 && (uint32_t)ids[i] < nv, "reply id %d of %u", ids[i], nv);
        free(ids);
    }
    baton_chat_prompt_free(&cp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!inited)
        init();
    if (size == 0)
        return 0;
    uint8_t *buf = fuzz_dup(data, size);
    uint8_t flags = buf[0];
    const char *text = (const char *)buf + 1;
    size_t len = size - 1;
    int is_bpe = (flags & 8) != 0;
    unsigned which = (flags >> 5) & 3u;
    const struct vocab *v = is_bpe ? (which == 0 ? &synth_bpe_pre[len % 4] : bpe_vocab(which - 1))
                            : (flags & 2) ? &synth_vocab
                                          : &model_vocab;
    const struct baton_tokenizer *tok = v->tok;
    int add_bos = flags & 1;
    unsigned tflags = (add_bos ? BATON_TOKENIZE_ADD_BOS : 0u) |
                      ((flags & 16) ? BATON_TOKENIZE_PARSE_SPECIAL : 0u);
    uint32_t nv = baton_tokenizer_n_vocab(tok);
    int32_t bos = baton_tokenizer_bos(tok);
    size_t n = 0, n2 = 0;
    int32_t *ids = NULL;

    int rc = baton_tokenize_ex(tok, text, len, tflags, NULL, 0, &n);
    if (len > BATON_TOKENIZER_MAX_TEXT_BYTES) {
        FUZZ_CHECK(rc == BATON_E_LIMIT, "oversized text accepted");
        goto out;
    }
    FUZZ_CHECK(n == 0 ? rc == 0 : rc == BATON_E_LIMIT, "size query: rc %d, n %zu", rc, n);
    FUZZ_CHECK(n <= 3 * (len + 1) + 1, "%zu ids for %zu bytes", n, len);
    ids = malloc((n + 1) * sizeof *ids);
    if (!ids)
        abort();
    rc = baton_tokenize_ex(tok, text, len, tflags, ids, n, &n2);
    FUZZ_CHECK(rc == 0 && n2 == n, "tokenize: rc %d, %zu ids then %zu", rc, n, n2);
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(ids[i] >= 0 && (uint32_t)ids[i] < nv, "id %d of %u", ids[i], nv);
    if (add_bos && bos != BATON_TOKEN_NONE)
        FUZZ_CHECK(n >= 1 && ids[0] == bos, "no BOS first");
    if (len == 0)
        FUZZ_CHECK(n == (add_bos && bos != BATON_TOKEN_NONE ? 1u : 0u), "empty text gave ids");

    for (size_t i = 0; i < n; i++) {
        char piece[64];
        size_t pl = 0, pl2 = 0;
        int32_t prev = i ? ids[i - 1] : BATON_TOKEN_NONE;
        rc = baton_token_to_piece(tok, ids[i], prev, piece, 0, &pl);
        FUZZ_CHECK(rc == 0 || rc == BATON_E_LIMIT, "token_to_piece query %d", rc);
        char *pb = malloc(pl + 1);
        if (!pb)
            abort();
        rc = baton_token_to_piece(tok, ids[i], prev, pb, pl, &pl2);
        FUZZ_CHECK(rc == 0 && pl2 == pl, "token_to_piece with its own length");
        free(pb);
        (void)piece;
    }

    size_t dl = 0, dl2 = 0;
    rc = baton_detokenize(tok, ids, n, NULL, 0, &dl);
    FUZZ_CHECK(rc == 0 || rc == BATON_E_LIMIT, "detokenize query %d", rc);
    char *back = malloc(dl + 1);
    if (!back)
        abort();
    rc = baton_detokenize(tok, ids, n, back, dl, &dl2);
    FUZZ_CHECK(rc == 0 && dl2 == dl, "detokenize with its own length");
    if (is_bpe) {
        FUZZ_CHECK(baton_tokenizer_is_bpe(tok), "BPE vocabulary is not BPE");
        if (v->all_bytes && !special_inside(tok, ids, n, add_bos)) {
            char *clean = malloc(3 * len + 1);
            if (!clean)
                abort();
            size_t cl = baton_utf8_sanitize(text, len, clean);
            FUZZ_CHECK(dl == cl && memcmp(back, clean, cl) == 0,
                       "BPE round trip: %zu bytes in (%zu valid), %zu bytes back", len, cl, dl);
            free(clean);
        }
    } else if (v->all_bytes && !memmem(text, len, "\xe2\x96\x81", 3) &&
               spaces_stay_whole(text, len) && !special_inside(tok, ids, n, add_bos)) {
        FUZZ_CHECK(dl == len && memcmp(back, text, len) == 0,
                   "round trip: %zu bytes in, %zu bytes back", len, dl);
    }
    free(back);

    if (flags & 128)
        check_spans(tok, text, len, add_bos ? BATON_TOKENIZE_ADD_BOS : 0u);

    if (flags & 4) {
        /* the text as ids: range -2 .. n_vocab + 1 */
        size_t k = len / 4;
        int32_t *raw = malloc((k + 1) * sizeof *raw);
        if (!raw)
            abort();
        for (size_t i = 0; i < k; i++)
            raw[i] = (int32_t)(fuzz_le((const uint8_t *)text + 4 * i, 4) % (nv + 4u)) - 2;
        check_ids_detok(v, raw, k);
        free(raw);
    }
out:
    free(ids);
    free(buf);
    return 0;
}
