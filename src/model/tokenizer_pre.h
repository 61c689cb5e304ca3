/* Pre-tokenizers and the byte-to-unicode mapping of byte-level BPE
 * (tokenizer.ggml.model = "gpt2"); used by tokenizer.c.
 *
 * A pre-tokenizer splits UTF-8 text into words before BPE merges run on
 * each word separately. Each one named by tokenizer.ggml.pre is a list of
 * regular expressions, run in order: the first splits the text, each next
 * one splits every word the one before made, as a text of its own (its
 * lookaheads end at the word's end). A word is a match, or text between
 * matches (the rule makes each split total). The expressions are those of
 * the models' Hugging Face tokenizer.json files (GPT-2's encoder.py,
 * Llama 3's, Qwen2's and Mistral's tekken tiktoken-style patterns) and, for
 * the lists, llama.cpp's (src/llama-vocab.cpp: the kinds SMOLLM and
 * DEFAULT),
 * written for PCRE2 with UTF and Unicode properties (PCRE2_UCP); "\s" is
 * spelled out as PCRE2's Unicode space (\p{Z} and \t\n\v\f\r) plus U+0085,
 * which is exactly Unicode's White_Space property, as llama.cpp's tables
 * use.
 *
 * The byte-to-unicode mapping is GPT-2's (encoder.py, bytes_to_unicode):
 * the printable bytes 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF stand for the code
 * point of the same value, the other 68 bytes, in increasing order, for
 * U+0100, U+0101, ... U+0143. So a space is "Ġ" (U+0120) and a newline "Ċ"
 * (U+010A) in vocabulary pieces and merges.
 */
#ifndef BATON_MODEL_TOKENIZER_PRE_H
#define BATON_MODEL_TOKENIZER_PRE_H

#include <stddef.h>
#include <stdint.h>

struct baton_pretok;

/* Pre-tokenizer kinds: the expressions, run in order (each on the words
 * the one before made). */
enum baton_pretok_kind {
    BATON_PRETOK_GPT2 = 1,   /* GPT-2's expression */
    BATON_PRETOK_LLAMA3 = 2, /* Llama 3's: digits in threes, contractions in any case */
    BATON_PRETOK_QWEN2 = 3,  /* Qwen2's: Llama 3's with single digits */
    BATON_PRETOK_TEKKEN = 4, /* Mistral's tekken: words split before capitals */
    BATON_PRETOK_SMOLLM = 5, /* single digits, then GPT-2's (SmolLM, StarCoder) */
    BATON_PRETOK_DEFAULT = 6 /* llama.cpp's fallback: punctuation runs, GPT-2's,
                              * number runs, then three digits */
};

/* What a tokenizer.ggml.pre name selects: the expressions (kind) and the
 * BPE flags llama.cpp's vocabulary loader (src/llama-vocab.cpp) sets with
 * it: a word that is a whole piece is not merged (ignore_merges), and BOS
 * is added unless tokenizer.ggml.add_bos_token says otherwise (add_bos). */
struct baton_pretok_info {
    int kind;
    int ignore_merges;
    int add_bos;
};

/* Looks up the pre-tokenizer name (len bytes, not NUL-terminated; the
 * names are llama.cpp's, docs/USAGE.md lists them). 0 and *info set, or
 * BATON_E_NOT_FOUND for a name baton does not know. */
int baton_pretok_lookup(const char *name, size_t len, struct baton_pretok_info *info);

/* The i-th name baton_pretok_lookup knows (i from 0), NULL past the last. */
const char *baton_pretok_name(size_t i);

/* Compiles the expressions of kind. Errors: BATON_E_INVAL (unknown kind),
 * BATON_E_NOMEM, BATON_E_UNSUPPORTED (PCRE2 refused a pattern: a PCRE2
 * build without Unicode support). On success *out is owned by the caller. */
int baton_pretok_create(int kind, struct baton_pretok **out);
void baton_pretok_free(struct baton_pretok *p);

/* Calls word(ctx, off, len) for each word of text[0..len), in order; the
 * words tile the text exactly. text must be valid UTF-8 (see
 * baton_utf8_sanitize). A nonzero return from word stops the split and is
 * returned. Errors: BATON_E_NOMEM, BATON_E_LIMIT (PCRE2's match or depth
 * limit). Thread-safe: match data is per call. */
int baton_pretok_split(const struct baton_pretok *p, const char *text, size_t len,
                       int (*word)(void *ctx, size_t off, size_t len), void *ctx);

/* Writes text[0..len) to out as valid UTF-8: every byte that does not start
 * a well-formed UTF-8 sequence (RFC 3629: no overlong forms, surrogates or
 * code points above U+10FFFF) becomes U+FFFD, as llama.cpp does for a byte it
 * cannot decode. out must hold 3 * len bytes. Returns the bytes written. */
size_t baton_utf8_sanitize(const char *text, size_t len, char *out);

/* The mapped text of byte b in UTF-8 (1 or 2 bytes) at out; returns its
 * length. */
size_t baton_bpe_byte_encode(uint8_t b, char out[2]);

/* The byte that code point cp stands for, or -1 if none. */
int baton_bpe_byte_decode(uint32_t cp);

#endif
