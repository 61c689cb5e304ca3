/* llama SentencePiece tokenizer over a GGUF vocabulary.
 *
 * Behaviour follows llama.cpp's "spm" tokenizer (llama-vocab.cpp,
 * llm_tokenizer_spm) for vocabularies with tokenizer.ggml.model = "llama",
 * which is SentencePiece BPE with scores and byte fallback:
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
 * Special-token text in the input ("<s>") is not parsed as a special token:
 * it is plain text and goes through the merges like any other text. If the
 * vocabulary has merge paths that reach a control piece (a piece "<s" and a
 * score path to "<s>"), the merges can still produce that id, as llama.cpp's
 * spm tokenizer does.
 * Complexity: O(n log n) in the text length n (a binary heap of candidate
 * pairs; stale pairs are skipped when popped, as in llama.cpp), with
 * O(n) memory allocated per call.
 *
 * Detokenizing follows llama.cpp's token_to_piece for this vocabulary type:
 * normal and user-defined pieces with "▁" replaced by ' ', byte tokens as
 * their byte, control and unused tokens as nothing, the unknown token as
 * U+2585 "▅". The leading space of a piece is stripped after BOS (as
 * llama2.c's decode does), which undoes step 1's prefix.
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
 *   tokenizer.ggml.model             string, must be "llama" if present
 *   tokenizer.ggml.tokens            string array, 1..BATON_TOKENIZER_MAX_VOCAB (required)
 *   tokenizer.ggml.scores            f32 array of the same length (default all 0)
 *   tokenizer.ggml.token_type        integer array of the same length (default all NORMAL)
 *   tokenizer.ggml.bos/eos/unknown_token_id   integers < n_vocab (defaults 1, 2, 0)
 *   tokenizer.ggml.add_bos_token     bool (default true)
 *   tokenizer.ggml.add_space_prefix  bool (default true)
 * A default id that is not below n_vocab becomes BATON_TOKEN_NONE. A NaN
 * score is treated as -infinity. If a piece occurs twice, the later id wins
 * (as in llama.cpp).
 * Errors: BATON_E_NOT_FOUND (no tokens key), BATON_E_UNSUPPORTED (another
 * tokenizer model), BATON_E_FORMAT (wrong type, length mismatch, id out of
 * range), BATON_E_LIMIT, BATON_E_NOMEM; err (if err_len > 0) gets a message
 * naming the key. On success *out is owned by the caller. */
int baton_tokenizer_from_gguf(const struct baton_gguf *g, struct baton_tokenizer **out, char *err,
                              size_t err_len);

/* Frees tok; NULL is a no-op. */
void baton_tokenizer_free(struct baton_tokenizer *tok);

uint32_t baton_tokenizer_n_vocab(const struct baton_tokenizer *tok);
int32_t baton_tokenizer_bos(const struct baton_tokenizer *tok); /* or BATON_TOKEN_NONE */
int32_t baton_tokenizer_eos(const struct baton_tokenizer *tok); /* or BATON_TOKEN_NONE */
int32_t baton_tokenizer_unk(const struct baton_tokenizer *tok); /* or BATON_TOKEN_NONE */
int baton_tokenizer_add_bos(const struct baton_tokenizer *tok); /* tokenizer.ggml.add_bos_token */

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

/* The text of token id as it should be printed, given the token before it
 * (prev_id, or BATON_TOKEN_NONE): one leading space is stripped when prev_id
 * is BOS and add_space_prefix is on. Writes the bytes (no NUL; a byte token
 * may be 0x00) to out and their count to *len.
 * Errors: BATON_E_BOUNDS for an id outside the vocabulary, BATON_E_LIMIT if
 * the text is longer than cap (*len then holds the length needed and
 * nothing is written). */
int baton_token_to_piece(const struct baton_tokenizer *tok, int32_t id, int32_t prev_id, char *out,
                         size_t cap, size_t *len);

/* Concatenates the pieces of n ids into out (no NUL), stripping one leading
 * space from the first piece and from any piece right after BOS (when
 * add_space_prefix is on), so that detokenize(tokenize(t)) == t for valid
 * UTF-8 text whose pieces are all in the vocabulary or byte-encoded. Invalid
 * UTF-8 can break the round trip: a lead byte of a multi-byte sequence
 * followed by a space ("\xc3 ") is taken as one character with the space.
 * *len receives the full length. Errors as baton_token_to_piece; on
 * BATON_E_LIMIT out holds the first cap bytes. */
int baton_detokenize(const struct baton_tokenizer *tok, const int32_t *ids, size_t n, char *out,
                     size_t cap, size_t *len);

#endif
