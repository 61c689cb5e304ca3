/* The body of an HTTP request to `baton serve` (src/model/serve.c): an
 * OpenAI-style completion ("POST /v1/completions": a prompt) or chat
 * completion ("POST /v1/chat/completions": messages), parsed with jansson;
 * and the UTF-8 rules of the text a reply carries (a JSON string must be
 * valid UTF-8, and a token's piece may end inside a character).
 *
 * Fields read (OpenAI's API reference, "Completions" and "Chat"; any other
 * field is ignored, as OpenAI-compatible servers do; a field given as JSON
 * null is as if absent):
 *   prompt       completions: a string, or an array of exactly one string
 *   messages     chat: an array of 1..BATON_SERVE_MAX_MESSAGES objects
 *                {"role": "system"|"user"|"assistant", "content": C}, C a
 *                string or an array of {"type": "text", "text": string}
 *                parts (joined without separator); a system message only
 *                first; then user and assistant in turn, first and last a
 *                user's
 *   max_tokens   integer 1..2^31-1 (also "n_predict", llama.cpp's name; not
 *                both); "max_completion_tokens" as max_tokens
 *   temperature  number 0..100
 *   top_p        number in (0, 1]
 *   top_k        integer 0..2^31-1 (0: all)
 *   seed         integer 0..2^63-1
 *   stream       boolean
 *   stop         a string, or an array of 0..BATON_SERVE_MAX_STOP strings ([]:
 *                none); each at most BATON_SERVE_MAX_STOP_BYTES bytes; an
 *                empty one is skipped (it matches nothing), so stop[] holds
 *                the n_stop non-empty ones in order
 *   n            only 1
 *   logprobs     only false (or 0); echo only false
 * Texts and stop strings must not hold NUL (jansson refuses "\u0000"
 * without JSON_ALLOW_NUL) and are valid UTF-8 (jansson refuses any other
 * string); the texts (prompt, messages) together hold at most
 * BATON_TOKENIZER_MAX_TEXT_BYTES bytes. */
#ifndef BATON_MODEL_SERVE_REQ_H
#define BATON_MODEL_SERVE_REQ_H

#include <stddef.h>
#include <stdint.h>

/* Largest request body read (bytes); more is refused before parsing. */
#define BATON_SERVE_MAX_BODY (2u << 20)
/* Most messages of one chat request. */
#define BATON_SERVE_MAX_MESSAGES 1024u
/* Most stop strings of one request (OpenAI's "up to 4"), and the most
 * bytes of each (UTF-8, as decoded from the JSON). */
#define BATON_SERVE_MAX_STOP 4u
#define BATON_SERVE_MAX_STOP_BYTES 256u

enum baton_serve_role {
    BATON_SERVE_SYSTEM = 0,
    BATON_SERVE_USER = 1,
    BATON_SERVE_ASSISTANT = 2,
};

struct baton_serve_msg {
    enum baton_serve_role role;
    char *text; /* content, NUL-terminated, no NUL inside; owned */
    size_t len;
};

/* A parsed request. has_*: the field was given (not null). */
struct baton_serve_req {
    int chat;                     /* messages (1) or prompt (0) */
    char *prompt;                 /* !chat: NUL-terminated, owned */
    size_t prompt_len;
    struct baton_serve_msg *msgs; /* chat: n_msgs, owned */
    size_t n_msgs;
    uint32_t max_tokens;
    int has_max_tokens;
    float temperature;
    int has_temperature;
    float top_p;
    int has_top_p;
    uint32_t top_k;
    int has_top_k;
    uint64_t seed;
    int has_seed;
    int stream;
    char *stop[BATON_SERVE_MAX_STOP]; /* n_stop stop strings: NUL-terminated, owned */
    size_t stop_len[BATON_SERVE_MAX_STOP]; /* each 1..BATON_SERVE_MAX_STOP_BYTES */
    size_t n_stop;
};

/* Parses body[0, len) (need not be NUL-terminated; may hold anything) as
 * a completion request (chat 0) or a chat completion request (chat 1) into
 * *req (zeroed first). Returns 0, or on error (nothing left allocated in
 * *req) BATON_E_FORMAT (not a JSON object, a field of the wrong type or out
 * of range, messages out of order), BATON_E_UNSUPPORTED (a feature this
 * server lacks: n > 1, logprobs, echo), BATON_E_LIMIT (more than
 * BATON_SERVE_MAX_BODY bytes, BATON_SERVE_MAX_MESSAGES messages,
 * BATON_TOKENIZER_MAX_TEXT_BYTES of text, BATON_SERVE_MAX_STOP stop strings
 * or BATON_SERVE_MAX_STOP_BYTES in one), BATON_E_NOMEM; err (when errcap
 * > 0) then holds one NUL-terminated sentence naming the field (e.g.
 * "\"temperature\" must be a number from 0 to 100"), never the body's bytes
 * beyond a field's name. */
int baton_serve_req_parse(const char *body, size_t len, int chat, struct baton_serve_req *req,
                          char *err, size_t errcap);

/* Frees what *req owns and zeroes it (a zeroed one is fine). */
void baton_serve_req_free(struct baton_serve_req *req);

/* Most ids of one /detokenize request, and the most bytes of its text
 * (the server refuses a longer one before it writes it). */
#define BATON_SERVE_MAX_DETOKENIZE 131072u
#define BATON_SERVE_MAX_DETOKENIZE_BYTES (4u << 20)

/* The body of "POST /tokenize" or "POST /detokenize", llama.cpp's
 * llama-server endpoints of those names, with its field names and defaults
 * (any other field is ignored; null is as if absent):
 *   tokenize:   content        a string (required; no NUL, at most
 *                              BATON_TOKENIZER_MAX_TEXT_BYTES bytes)
 *               add_special    boolean, default false: BOS first when the
 *                              model adds one
 *               parse_special  boolean, default true: the text of a control
 *                              token ("<|im_end|>") is that token
 *               with_pieces    boolean, default false: each id with its piece
 *   detokenize: tokens         an array of 0..BATON_SERVE_MAX_DETOKENIZE
 *                              integers, each 0..2^31-1 (the server checks
 *                              them against its vocabulary) */
struct baton_serve_tok_req {
    int detokenize;
    char *content; /* tokenize: NUL-terminated, no NUL inside, owned */
    size_t content_len;
    int add_special, parse_special, with_pieces;
    int32_t *tokens; /* detokenize: n_tokens ids, owned (NULL when 0) */
    size_t n_tokens;
};

/* Parses body[0, len) (any bytes) as a /tokenize (detokenize 0) or
 * /detokenize (1) request into *req (zeroed first). Returns 0, or on error
 * (nothing left allocated) BATON_E_FORMAT (not a JSON object, a field
 * missing, of the wrong type or out of range), BATON_E_LIMIT (a body over
 * BATON_SERVE_MAX_BODY bytes, a text over BATON_TOKENIZER_MAX_TEXT_BYTES,
 * more than BATON_SERVE_MAX_DETOKENIZE ids) or BATON_E_NOMEM, with one
 * sentence naming the field in err, as baton_serve_req_parse. */
int baton_serve_tok_parse(const char *body, size_t len, int detokenize,
                          struct baton_serve_tok_req *req, char *err, size_t errcap);

/* Frees what *req owns and zeroes it (a zeroed one is fine). */
void baton_serve_tok_free(struct baton_serve_tok_req *req);

/* The length of the longest prefix of p[0, n) that does not end inside a
 * UTF-8 sequence which more bytes could still complete: what a stream can
 * send now, keeping the rest until the next piece comes. Bytes that can
 * never be valid UTF-8 count as complete (baton_serve_utf8_clean replaces
 * them). */
size_t baton_serve_utf8_complete(const char *p, size_t n);

/* p[0, n) with every maximal ill-formed subsequence replaced by U+FFFD
 * (Unicode's "substitution of maximal subparts", chapter 3.9: overlong
 * forms, surrogates, code points past U+10FFFF, stray continuation bytes,
 * truncated sequences), a NUL byte too (as U+FFFD, so that the text is a C
 * string), into a new NUL-terminated block (*out_len bytes; free it), or
 * NULL when out of memory. Valid UTF-8 without NUL comes back unchanged. */
char *baton_serve_utf8_clean(const char *p, size_t n, size_t *out_len);

#endif
