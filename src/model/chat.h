/* Chat templates: an optional system prompt and one user message laid out
 * as the prompt an instruct model was trained on, ending with the opening
 * of the assistant's turn (the "generation prompt"), for `baton run
 * --chat` and `baton tokenize --chat`; and a conversation's later turns
 * (baton_chat_format_next, for `baton run --chat --interactive`).
 *
 * A GGUF states its template as Jinja source in tokenizer.chat_template
 * (as Hugging Face's tokenizer_config.json). baton does not run Jinja: it
 * recognizes the layouts below by marker strings in that source, as
 * llama.cpp's built-in templates do, and writes them itself. Names and
 * layouts (S: the system prompt, U: the user message; "\n" a newline):
 *
 *   chatml  Qwen 2, 2.5 and 3 (and others): the source holds "<|im_start|>"
 *           (but not "<|im_sep|>": Phi-4's role lines end with it, not "\n")
 *           [<|im_start|>system\nS<|im_end|>\n]<|im_start|>user\nU<|im_end|>\n
 *           <|im_start|>assistant\n
 *   llama3  Llama 3: the source holds "<|start_header_id|>" (and not
 *           "<start_of_turn>": llama.cpp checks gemma's first); S and U trimmed
 *           of leading and trailing whitespace, as the template's "| trim"
 *           (Python's str.strip(): Unicode's whitespace too, never a NUL)
 *           [<|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>]
 *           <|start_header_id|>user<|end_header_id|>\n\nU<|eot_id|>
 *           <|start_header_id|>assistant<|end_header_id|>\n\n
 *           (Llama 3.1's and later templates also write a system part of
 *           their own, with dates, every time; like llama.cpp's built-in
 *           llama3, this one does not)
 *   mistral-v7-tekken  Mistral Small 3, 3.1, 3.2, Magistral, Devstral: the
 *           source holds "[SYSTEM_PROMPT]" and no "[INST] " (with a space)
 *           [[SYSTEM_PROMPT]S[/SYSTEM_PROMPT]][INST]U[/INST]
 *   mistral-v7  Mistral Large 2411: "[SYSTEM_PROMPT]" and "[INST] "
 *           [[SYSTEM_PROMPT] S[/SYSTEM_PROMPT]][INST] U[/INST]
 *           (llama.cpp's built-in detection takes every "[SYSTEM_PROMPT]"
 *           source for this one; the tekken templates write no spaces)
 *   mistral-v3-tekken  Mistral Nemo: "[AVAILABLE_TOOLS]" and "\"[INST]\""
 *           [INST][S\n\n]U[/INST]
 *   mistral-v3  Mistral 7B v0.3, Mixtral 8x22B: "[AVAILABLE_TOOLS]", and
 *           neither " [INST]" (v1's) nor "\"[INST]\""
 *           [INST] [S\n\n]U[/INST]
 *           The Mistral layouts trim nothing and are llama.cpp's built-in
 *           ones of the same names (tests/reference/fixtures/chat-mistral.txt
 *           holds llama.cpp's texts; the system part there comes before the
 *           first message, where Mistral's own templates put it before the
 *           last: the same for one message). Their markers are control
 *           tokens, which the vocabulary must hold.
 *   llama2  Llama 2 chat: another source with "[INST]"; trimmed
 *           as Llama 2's template strips the system block and U together:
 *           without S, U trimmed; with S, S as given and only U's trailing
 *           whitespace (and the "\n\n" before an empty U)
 *           [INST] [<<SYS>>\nS\n<</SYS>>\n\n]U [/INST]
 *           Mistral 7B Instruct v0.1/v0.2 templates hold "[INST]" too and
 *           give the same text for a U without leading or trailing
 *           whitespace and no S (theirs trims nothing and has no system
 *           turn), as do Mistral v1 templates with tools (" [INST]") for
 *           all but a leading space
 *   phi3    Phi-3: the source holds "<|user|>" and "<|end|>"
 *           [<|system|>S<|end|>]<|user|>U<|end|><|assistant|>
 *           with S and U's leading whitespace dropped: the template writes a
 *           newline after each marker, which Phi-3's markers strip with any
 *           whitespace after them (rstrip tokens, in Hugging Face's
 *           tokenizer and llama.cpp's); baton's tokenizer does not strip,
 *           so the layout holds what is left
 *   gemma   Gemma (2, 3): the source holds "<start_of_turn>" (checked last:
 *           a source with a marker above as well is that layout, as in
 *           llama.cpp's detection)
 *           <start_of_turn>user\n[S\n\n]U<end_of_turn>\n<start_of_turn>model\n
 *           Gemma has no system turn: S opens the first user turn, as in
 *           llama.cpp's built-in gemma and Gemma 3's template (Gemma 2's
 *           refuses a system message). S and U are trimmed as llama.cpp's
 *           trim(): of C's isspace() characters " \t\n\v\f\r" only (Gemma
 *           3's Jinja strips U of Unicode's whitespace too and S of none:
 *           the same for texts without such whitespace); an S that is
 *           empty when trimmed writes no part. The markers are control
 *           tokens, which the vocabulary must hold.
 *
 * The bracketed part is there only with a system prompt: a default one that
 * a template's Jinja adds by itself (Qwen 2's "You are a helpful
 * assistant") is not added, as llama.cpp's built-in templates do not; give
 * it with --system. BOS is not part of the text: the tokenizer adds it
 * where the model's tokenizer.ggml.add_bos_token says.
 *
 * The template's own markers are returned as spans: only there does
 * control-token text become that token (baton_tokenize_spans), so text in
 * S or U such as "<|im_end|>" stays text. User-defined pieces are tokens
 * wherever they occur, in every tokenizer (Phi-3's "</s>" is one).
 */
#ifndef BATON_MODEL_CHAT_H
#define BATON_MODEL_CHAT_H

#include <stddef.h>

#include "model/tokenizer.h"

enum baton_chat_template {
    BATON_CHAT_UNKNOWN = 0,
    BATON_CHAT_CHATML,
    BATON_CHAT_LLAMA3,
    BATON_CHAT_LLAMA2,
    BATON_CHAT_PHI3,
    BATON_CHAT_MISTRAL_V3,
    BATON_CHAT_MISTRAL_V3_TEKKEN,
    BATON_CHAT_MISTRAL_V7,
    BATON_CHAT_MISTRAL_V7_TEKKEN,
    BATON_CHAT_GEMMA,
};

/* The names, for messages. */
#define BATON_CHAT_NAMES                                                                           \
    "chatml, llama3, llama2, phi3, gemma, mistral-v3, mistral-v3-tekken, mistral-v7 or "           \
    "mistral-v7-tekken"

#define BATON_CHAT_MAX_SPANS 8 /* spans of a laid-out prompt (at most 4 used) */

/* A formatted prompt: text (NUL-terminated, owned; free with
 * baton_chat_prompt_free) and the template's spans in it, ascending. */
struct baton_chat_prompt {
    char *text;
    size_t len;
    struct baton_text_span spans[BATON_CHAT_MAX_SPANS];
    size_t n_spans;
};

/* The layout a chat template's Jinja source (len bytes, need not be
 * NUL-terminated) is recognized as, by the markers listed above (checked
 * in that order), or BATON_CHAT_UNKNOWN. */
enum baton_chat_template baton_chat_detect(const char *source, size_t len);

/* The template named name (one of BATON_CHAT_NAMES), or
 * BATON_CHAT_UNKNOWN. */
enum baton_chat_template baton_chat_from_name(const char *name);

/* The name of t, or "unknown". */
const char *baton_chat_name(enum baton_chat_template t);

struct baton_gguf;

/* The template for a model: the one name gives (when not NULL), else the
 * one g's tokenizer.chat_template is recognized as, into *t; with tok (not
 * NULL), also one whose control tokens tok holds (baton_chat_missing_marker,
 * with a system part when has_system). Errors: BATON_E_INVAL (name is none
 * of BATON_CHAT_NAMES), BATON_E_NOT_FOUND (no such key), BATON_E_FORMAT (the key is
 * not a string), BATON_E_UNSUPPORTED (not recognized, or a marker tok lacks);
 * err (if err_len > 0) then says which and what to give. */
int baton_chat_template_for(const struct baton_gguf *g, const char *name,
                            const struct baton_tokenizer *tok, int has_system,
                            enum baton_chat_template *t, char *err, size_t err_len);

/* The first of template t's control-token markers (with a system prompt
 * when has_system) that tok's vocabulary does not hold as one token, or
 * NULL when it holds them all: laid out on such a vocabulary the markers
 * would be plain text, and the model could not end its turn with them.
 * llama2's markers ("[INST]") are plain text by design: always NULL. */
const char *baton_chat_missing_marker(enum baton_chat_template t, int has_system,
                                      const struct baton_tokenizer *tok);

/* Lays out system (NULL: none) and user (user_len bytes; may hold NUL) as
 * template t, into *out.
 * Errors: BATON_E_INVAL (t unknown), BATON_E_LIMIT (longer than
 * BATON_TOKENIZER_MAX_TEXT_BYTES), BATON_E_NOMEM; *out is then empty. */
int baton_chat_format(enum baton_chat_template t, const char *system, const char *user,
                      size_t user_len, struct baton_chat_prompt *out);

/* A conversation's next turn: the text that follows an assistant's reply,
 * kept as the ids the model generated without the end-of-generation token
 * it ended with (as llama.cpp's conversation mode keeps a reply, rather
 * than rendering it again): the end of the reply's turn, then user
 * (user_len bytes; may hold NUL) laid out as template t lays out a user's
 * turn after earlier ones, ending where the next reply begins:
 *
 *   chatml  <|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n
 *   llama3  <|eot_id|><|start_header_id|>user<|end_header_id|>\n\nU<|eot_id|>
 *           <|start_header_id|>assistant<|end_header_id|>\n\n
 *   llama2  " </s><s>[INST] U [/INST]" (Llama 2's template: the reply, a
 *           space and EOS, then BOS before every later [INST])
 *   phi3    <|end|><|user|>U<|end|><|assistant|>
 *   mistral-v3, mistral-v7  </s>[INST] U[/INST]
 *   mistral-v3-tekken, mistral-v7-tekken  </s>[INST]U[/INST]
 *   gemma   <end_of_turn>\n<start_of_turn>user\nU<end_of_turn>\n
 *           <start_of_turn>model\n
 *
 * U trimmed as in baton_chat_format's first turn. The markers are spans
 * (on a vocabulary without "</s>" and "<s>" as tokens, llama2's are text).
 * Errors as baton_chat_format's. */
int baton_chat_format_next(enum baton_chat_template t, const char *user, size_t user_len,
                           struct baton_chat_prompt *out);

/* A past assistant reply (text, len bytes; may hold NUL) as template t
 * writes it in a conversation's history (baton serve's messages), into *out
 * (no spans: a reply is plain text): llama2, mistral-v3 and mistral-v7 put a
 * space before it, mistral-v3 trims it (Python's str.strip()), gemma trims
 * it as its messages (C's isspace()), the others keep it as given. *fresh
 * is 1 where the reply follows a control token (the Mistral layouts'
 * [/INST]): llama.cpp tokenizes the text after a control token as a
 * fragment of its own, which a SentencePiece vocabulary prefixes with its
 * space, so the reply is tokenized without BATON_TOKENIZE_CONTINUE; 0 where
 * it continues the text before it (gemma's follows "model\n").
 * Errors as baton_chat_format's. */
int baton_chat_format_reply(enum baton_chat_template t, const char *text, size_t len,
                            struct baton_chat_prompt *out, int *fresh);

void baton_chat_prompt_free(struct baton_chat_prompt *p);

#endif
