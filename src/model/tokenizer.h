/* Tokenizers over a GGUF vocabulary: llama SentencePiece
 * (tokenizer.ggml.model = "llama") and byte-level BPE ("gpt2"), giving the
 * ids llama.cpp gives (checked against llama.cpp's ggml-vocab-*.gguf test
 * files, tests/unit/test_model_tokenizer_vocab.c).
 *
 * SentencePiece (llama.cpp's "spm" tokenizer; SentencePiece BPE with scores
 * and byte fallback):
 *
 *   1. every ' ' becomes U+2581 "▁", and a "▁" is prepended
 *      (tokenizer.ggml.add_space_prefix, default true); empty text gives no
 *      pieces at all;
 *   2. the text is split into UTF-8 characters (length from the lead byte,
 *      clamped to the end of the text; invalid bytes are 1-byte characters);
 *   3. repeatedly, of all adjacent symbol pairs whose concatenation is a
 *      vocabulary piece, the one whose piece has the highest score is merged
 *      (ties: the leftmost pair);
 *   4. each final symbol maps to its piece's id; a symbol that is not a piece
 *      is emitted as one byte token "<0xNN>" per UTF-8 byte (byte fallback),
 *      or as the unknown id if the vocabulary lacks that byte token.
 *
 * Byte-level BPE (GPT-2's scheme, as Llama 3, Qwen2 and GPT-2 use it):
 *
 *   1. invalid UTF-8 bytes become U+FFFD (one per byte);
 *   2. the pre-tokenizer named by tokenizer.ggml.pre ("llama-bpe", "qwen2",
 *      "gpt-2"; tokenizer_pre.h) splits the text into words with its
 *      regular expression; words never merge with each other;
 *   3. each byte of a word is replaced by its printable stand-in character
 *      (GPT-2's bytes_to_unicode: a space is "Ġ");
 *   4. llama-bpe only: a word that is a vocabulary piece as a whole is that
 *      piece (Hugging Face's ignore_merges);
 *   5. otherwise the word is split into characters and, repeatedly, the
 *      adjacent pair whose "left right" line comes first in
 *      tokenizer.ggml.merges is merged (ties: leftmost), as in Sennrich et
 *      al.'s BPE and GPT-2's encoder.py;
 *   6. each symbol maps to its piece; one that is not a piece falls back to
 *      the pieces of its single bytes, and bytes without one are dropped
 *      (llama.cpp does the same; real vocabularies hold all 256).
 *
 * Special tokens: the text of a user-defined piece in the input is always
 * that piece; the text of a control or unknown piece ("<|eot_id|>", "<s>")
 * is that token only with BATON_TOKENIZE_PARSE_SPECIAL (baton tokenize sets
 * it unless --no-parse-special, as llama-tokenize does; baton_tokenize and
 * baton run never do, so a prompt cannot forge control tokens; with --chat
 * only the template's own markers are parsed, baton_tokenize_spans). Pieces are
 * matched longest first over the whole text, and the text between them is
 * tokenized on its own (SentencePiece: with the "▁" prefix after each
 * special, as llama.cpp). Not done: llama.cpp's lstrip/rstrip of spaces
 * next to some special tokens.
 * Without special parsing, SentencePiece merges can still reach a control
 * piece if the vocabulary has a merge path to it, as in llama.cpp.
 * Complexity: O(n log n) in the text length n (a binary heap of candidate
 * pairs; stale pairs are skipped when popped, as in llama.cpp), with
 * O(n) memory allocated per call, plus O(n) per special piece parsed.
 *
 * Detokenizing follows llama.cpp's token_to_piece. SentencePiece: normal
 * and user-defined pieces with "▁" replaced by ' ', byte tokens as their
 * byte, control and unused tokens as nothing, the unknown token as U+2585
 * "▅"; the leading space of a piece is stripped after BOS (as llama2.c's
 * decode does), which undoes step 1's prefix. BPE: normal pieces mapped
 * back to bytes (a character outside the mapping is copied as it is),
 * user-defined pieces as stored, everything else (control, byte, unknown)
 * as nothing; no space is stripped.
 *
 * Ownership: a struct baton_tokenizer copies what it needs from the GGUF;
 * the GGUF may be closed afterwards. All functions except _free are
 * read-only and thread-safe.
 */
#ifndef BATON_MODEL_TOKENIZER_H
#define BATON_MODEL_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

struct baton_gguf;
struct baton_tokenizer;

#define BATON_TOKENIZER_MAX_VOCAB (1u << 24)      /* pieces in a vocabulary */
#define BATON_TOKENIZER_MAX_TEXT_BYTES (1u << 20) /* text passed to baton_tokenize */
#define BATON_TOKEN_NONE (-1)                     /* "no token" for prev_id / unset ids */
#define BATON_TOKENIZER_MAX_MERGES (1u << 24)     /* BPE merge lines */
#define BATON_TOKENIZER_MAX_EOG 16                /* end-of-generation ids (see _is_eog) */

/* Flags of baton_tokenize_ex. */
#define BATON_TOKENIZE_ADD_BOS 1u       /* put BOS first (if the vocabulary has one) */
#define BATON_TOKENIZE_PARSE_SPECIAL 2u /* control-token text in the input is that token */
/* the text continues text tokenized before it (a conversation's later
 * turn): SentencePiece's space prefix (add_space_prefix) is not put before
 * its first piece, only after each control token in it, so its ids are
 * those the whole text gives from there on */
#define BATON_TOKENIZE_CONTINUE 4u

/* Token types (tokenizer.ggml.token_type; llama.cpp's llama_token_type). */
enum baton_token_type {
    BATON_TOKEN_UNDEFINED = 0,
    BATON_TOKEN_NORMAL = 1,
    BATON_TOKEN_UNKNOWN = 2,
    BATON_TOKEN_CONTROL = 3,
    BATON_TOKEN_USER_DEFINED = 4,
    BATON_TOKEN_UNUSED = 5,
    BATON_TOKEN_BYTE = 6,
};

/* Builds a tokenizer from g's metadata:
 *   tokenizer.ggml.model             string, "llama" (default) or "gpt2"
 *   tokenizer.ggml.tokens            string array, 1..BATON_TOKENIZER_MAX_VOCAB (required)
 *   tokenizer.ggml.scores            f32 array of the same length (default all 0)
 *   tokenizer.ggml.token_type        integer array of the same length (default all NORMAL)
 *   tokenizer.ggml.bos/eos/unknown_token_id   integers < n_vocab (defaults 1, 2, 0)
 *   tokenizer.ggml.add_bos_token     bool (default true)
 *   tokenizer.ggml.add_space_prefix  bool (default true; "llama" only)
 *   tokenizer.ggml.eot_token_id, eom_token_id  integers < n_vocab (optional)
 * and for "gpt2" also
 *   tokenizer.ggml.pre               string: "llama-bpe", "qwen2" or "gpt-2" (required)
 *   tokenizer.ggml.merges            string array of "left right" lines, by rank
 *                                    (required; at most BATON_TOKENIZER_MAX_MERGES)
 * where the bos/eos/unknown ids have no default and add_bos_token defaults
 * to true for llama-bpe and false otherwise (as llama.cpp).
 * A default id that is not below n_vocab becomes BATON_TOKEN_NONE. A NaN
 * score is treated as -infinity. If a piece occurs twice, the later id wins
 * (as in llama.cpp).
 * Errors: BATON_E_NOT_FOUND (no tokens key; "gpt2" without merges; "gpt2"
 * without tokenizer.ggml.pre loads, with llama.cpp's 'default', see
 * baton_tokenizer_pre_warning),
 * BATON_E_UNSUPPORTED (another tokenizer model or pre-tokenizer),
 * BATON_E_FORMAT (wrong type, length mismatch, id out of range, a merge
 * line without a space after its first byte), BATON_E_LIMIT, BATON_E_NOMEM;
 * err (if err_len > 0) gets a message naming the key. On success *out is
 * owned by the caller. */
int baton_tokenizer_from_gguf(const struct baton_gguf *g, struct baton_tokenizer **out, char *err,
                              size_t err_len);

/* Frees tok; NULL is a no-op. */
void baton_tokenizer_free(struct baton_tokenizer *tok);

uint32_t baton_tokenizer_n_vocab(const struct baton_tokenizer *tok);
int32_t baton_tokenizer_bos(const struct baton_tokenizer *tok); /* or BATON_TOKEN_NONE */
int32_t baton_tokenizer_eos(const struct baton_tokenizer *tok); /* or BATON_TOKEN_NONE */
int32_t baton_tokenizer_unk(const struct baton_tokenizer *tok); /* or BATON_TOKEN_NONE */
int baton_tokenizer_add_bos(const struct baton_tokenizer *tok); /* tokenizer.ggml.add_bos_token */
int baton_tokenizer_is_bpe(const struct baton_tokenizer *tok);  /* model "gpt2" */

/* BPE: the pre-tokenizer's name (tokenizer.ggml.pre, escaped for printing;
 * "default" when the file has none, as llama.cpp then uses its 'default'
 * expressions, and 1 at *missing); "" and 0 for SentencePiece. missing may
 * be NULL. The string lives as long as tok. */
const char *baton_tokenizer_pre(const struct baton_tokenizer *tok, int *missing);

/* The warning for a BPE file without tokenizer.ggml.pre (a static string,
 * no newline), or NULL for every other file. llama.cpp warns too: the file
 * predates recorded pre-tokenizers and its words may be split otherwise than
 * in training. */
const char *baton_tokenizer_pre_warning(const struct baton_tokenizer *tok);

/* 1 if id ends generation: EOS, tokenizer.ggml.eot_token_id,
 * tokenizer.ggml.eom_token_id, or the piece "<|eot_id|>", "<|eom_id|>",
 * "<|im_end|>", "<|endoftext|>", "<|end|>" or "<end_of_turn>" (whatever its
 * type), as llama.cpp's end-of-generation set; else 0 (also for ids outside
 * the vocabulary and BATON_TOKEN_NONE). */
int baton_tokenizer_is_eog(const struct baton_tokenizer *tok, int32_t id);

/* Raw vocabulary entry of id (piece text as stored, with "▁"; not
 * NUL-terminated), its score and type. BATON_E_BOUNDS if id is not in
 * 0..n_vocab-1. Any output may be NULL. */
int baton_tokenizer_piece(const struct baton_tokenizer *tok, int32_t id, const char **ptr,
                          size_t *len, float *score, uint32_t *type);

/* Tokenizes len bytes of text (any bytes; not NUL-terminated) into ids,
 * preceded by BOS if add_bos is nonzero and the vocabulary has one.
 * *n_ids always receives the number of ids the full result has; at most
 * max_ids are written (ids may be NULL when max_ids is 0).
 * Errors: BATON_E_LIMIT if len > BATON_TOKENIZER_MAX_TEXT_BYTES or the
 * result has more than max_ids ids (call again with a larger array),
 * BATON_E_NOMEM. */
int baton_tokenize(const struct baton_tokenizer *tok, const char *text, size_t len, int add_bos,
                   int32_t *ids, size_t max_ids, size_t *n_ids);

/* baton_tokenize with flags (BATON_TOKENIZE_*): with
 * BATON_TOKENIZE_PARSE_SPECIAL, the text of a control or unknown piece in
 * the input becomes that id; user-defined pieces are always taken whole.
 * baton_tokenize(.., add_bos, ..) is this with flags ADD_BOS or 0. */
int baton_tokenize_ex(const struct baton_tokenizer *tok, const char *text, size_t len,
                      unsigned flags, int32_t *ids, size_t max_ids, size_t *n_ids);

/* A byte range [off, off + len) of a text. */
struct baton_text_span {
    size_t off, len;
};

/* baton_tokenize_ex where the text of a control or unknown piece is that id
 * only where it lies wholly inside one of spans[0, n_spans) (the chat
 * template's own markers, chat.h), and plain text everywhere else (the
 * user's message cannot forge "<|im_end|>"); user-defined pieces are taken
 * whole everywhere, as always. The text between the ids so found is
 * tokenized as one, so when no control-token text lies outside the spans
 * the ids are those of baton_tokenize_ex with PARSE_SPECIAL (llama.cpp
 * tokenizes a formatted chat so). flags: BATON_TOKENIZE_ADD_BOS and
 * BATON_TOKENIZE_CONTINUE, or 0. spans: ascending, not overlapping, each inside the text (n_spans 0: no
 * control token is parsed). Errors as baton_tokenize_ex, and BATON_E_INVAL
 * for a span past the text, out of order or overlapping. */
int baton_tokenize_spans(const struct baton_tokenizer *tok, const char *text, size_t len,
                         unsigned flags, const struct baton_text_span *spans, size_t n_spans,
                         int32_t *ids, size_t max_ids, size_t *n_ids);

/* The text of token id as it should be printed, given the token before it
 * (prev_id, or BATON_TOKEN_NONE): one leading space is stripped when prev_id
 * is BOS and add_space_prefix is on. Writes the bytes (no NUL; a byte token
 * may be 0x00) to out and their count to *len.
 * Errors: BATON_E_BOUNDS for an id outside the vocabulary, BATON_E_LIMIT if
 * the text is longer than cap (*len then holds the length needed and
 * nothing is written). */
int baton_token_to_piece(const struct baton_tokenizer *tok, int32_t id, int32_t prev_id, char *out,
                         size_t cap, size_t *len);

/* Concatenates the pieces of n ids into out (no NUL). SentencePiece:
 * one leading space is stripped from the first piece and from any piece
 * right after BOS (when add_space_prefix is on), so that
 * detokenize(tokenize(t)) == t for valid UTF-8 text whose pieces are all in
 * the vocabulary or byte-encoded; invalid UTF-8 can break the round trip: a
 * lead byte of a multi-byte sequence followed by a space ("\xc3 ") is taken
 * as one character with the space. BPE: nothing is stripped, and the round
 * trip gives t with invalid UTF-8 bytes as U+FFFD when no control token is
 * parsed and the vocabulary holds all 256 mapped bytes.
 * *len receives the full length. Errors as baton_token_to_piece; on
 * BATON_E_LIMIT out holds the first cap bytes. */
int baton_detokenize(const struct baton_tokenizer *tok, const int32_t *ids, size_t n, char *out,
                     size_t cap, size_t *len);

/* Flags of the _ex forms below. BATON_DETOKENIZE_SPECIAL: a control token
 * ("<|im_end|>", "</s>") writes its piece's text as stored, where without
 * it a control token writes nothing (llama.cpp's token_to_piece with and
 * without its special argument; llama-server's /detokenize sets it). */
#define BATON_DETOKENIZE_SPECIAL 1u

/* baton_token_to_piece and baton_detokenize with flags (0 or
 * BATON_DETOKENIZE_SPECIAL); the same results and errors otherwise. */
int baton_token_to_piece_ex(const struct baton_tokenizer *tok, int32_t id, int32_t prev_id,
                            unsigned flags, char *out, size_t cap, size_t *len);
int baton_detokenize_ex(const struct baton_tokenizer *tok, const int32_t *ids, size_t n,
                        unsigned flags, char *out, size_t cap, size_t *len);

#endif
