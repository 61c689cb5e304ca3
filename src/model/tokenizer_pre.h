/* Pre-tokenizers and the byte-to-unicode mapping of byte-level BPE
 * (tokenizer.ggml.model = "gpt2"); used by tokenizer.c.
 *
 * A pre-tokenizer splits UTF-8 text into words before BPE merges run on
 * each word separately. Each one named by tokenizer.ggml.pre is a regular
 * expression whose matches are words; text between matches also becomes a
 * word (none of ours leaves any, but the rule makes the split total). The
 * expressions are those of the models' Hugging Face tokenizer.json files
 * (GPT-2's encoder.py, Llama 3's and Qwen2's tiktoken-style patterns),
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

/* Pre-tokenizer kinds (tokenizer.ggml.pre). */
enum baton_pretok_kind {
    BATON_PRETOK_GPT2 = 1,  /* "gpt-2" */
    BATON_PRETOK_LLAMA3 = 2, /* "llama-bpe" (Llama 3.x) */
    BATON_PRETOK_QWEN2 = 3, /* "qwen2" (Qwen 2, 2.5, 3) */
};

/* Kind for the name (len bytes, not NUL-terminated), or 0 if unknown. */
int baton_pretok_kind(const char *name, size_t len);

/* Compiles the expression of kind. Errors: BATON_E_INVAL (unknown kind),
 * BATON_E_NOMEM, BATON_E_UNSUPPORTED (PCRE2 refused the pattern: a PCRE2
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
