/* Chat templates (chat.h). */
#include "model/chat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/status.h"
#include "model/gguf.h"

static const char *const names[] = {"unknown",           "chatml",     "llama3",
                                    "llama2",            "phi3",       "mistral-v3",
                                    "mistral-v3-tekken", "mistral-v7", "mistral-v7-tekken",
                                    "gemma"};

/* Whether s[0, len) holds the NUL-terminated needle. */
static int holds(const char *s, size_t len, const char *needle)
{
    return memmem(s, len, needle, strlen(needle)) != NULL;
}

enum baton_chat_template baton_chat_detect(const char *source, size_t len)
{
    if (source == NULL)
        return BATON_CHAT_UNKNOWN;
    if (holds(source, len, "<|im_start|>")) /* Phi-4's "<|im_start|>user<|im_sep|>" is not */
        return holds(source, len, "<|im_sep|>") ? BATON_CHAT_UNKNOWN : BATON_CHAT_CHATML;
    /* llama.cpp checks gemma's marker before llama3's, after the others */
    if (holds(source, len, "<|start_header_id|>") && !holds(source, len, "<start_of_turn>"))
        return BATON_CHAT_LLAMA3;
    if (holds(source, len, "[INST]")) {
        /* Mistral's (llama.cpp's rules, and the tekken v7 told from v7 by
         * its "[INST]" without a space after it) */
        if (holds(source, len, "[SYSTEM_PROMPT]"))
            return holds(source, len, "[INST] ") ? BATON_CHAT_MISTRAL_V7
                                                 : BATON_CHAT_MISTRAL_V7_TEKKEN;
        if (holds(source, len, "[AVAILABLE_TOOLS]") && !holds(source, len, " [INST]"))
            return holds(source, len, "\"[INST]\"") ? BATON_CHAT_MISTRAL_V3_TEKKEN
                                                    : BATON_CHAT_MISTRAL_V3;
        return BATON_CHAT_LLAMA2;
    }
    if (holds(source, len, "<|user|>") && holds(source, len, "<|end|>"))
        return BATON_CHAT_PHI3;
    if (holds(source, len, "<start_of_turn>"))
        return BATON_CHAT_GEMMA;
    return BATON_CHAT_UNKNOWN;
}

enum baton_chat_template baton_chat_from_name(const char *name)
{
    for (size_t i = 1; name != NULL && i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i]) == 0)
            return (enum baton_chat_template)i;
    return BATON_CHAT_UNKNOWN;
}

const char *baton_chat_name(enum baton_chat_template t)
{
    return (size_t)t < sizeof names / sizeof names[0] ? names[t] : names[0];
}

/* The prompt under construction: with text NULL only the length counts. */
struct builder {
    struct baton_chat_prompt *p;
    size_t len;
};

static void add(struct builder *b, const char *s, size_t n, int mark)
{
    if (b->p->text != NULL) {
        memcpy(b->p->text + b->len, s, n);
        if (mark && n > 0) {
            struct baton_text_span *last =
                b->p->n_spans ? &b->p->spans[b->p->n_spans - 1] : NULL;

            if (last != NULL && last->off + last->len == b->len)
                last->len += n; /* one span for adjacent markers */
            else
                b->p->spans[b->p->n_spans++] = (struct baton_text_span){b->len, n};
        }
    }
    b->len += n;
}

static void mark(struct builder *b, const char *s)
{
    add(b, s, strlen(s), 1);
}

/* The length of the whitespace character that s[0, n) starts with (at_end
 * 0) or ends with (at_end 1), or 0: Python's str.isspace() set, which the
 * templates' trim and strip() use: ASCII \t \n \v \f \r, 0x1c-0x1f and space,
 * and in UTF-8 U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029,
 * U+202F, U+205F and U+3000. A NUL is no whitespace. */
static size_t space_len(const char *s, size_t n, int at_end)
{
    static const char *const wide[] = {
        "\xc2\x85", "\xc2\xa0", "\xe1\x9a\x80", "\xe2\x80\xa8", "\xe2\x80\xa9", "\xe2\x80\xaf",
        "\xe2\x81\x9f", "\xe3\x80\x80"};
    const unsigned char c = (unsigned char)(at_end ? s[n - 1] : s[0]);

    if (c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f))
        return 1;
    for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++) {
        const size_t k = strlen(wide[i]);

        if (n >= k && memcmp(at_end ? s + n - k : s, wide[i], k) == 0)
            return k;
    }
    if (n >= 3) { /* U+2000-U+200A: e2 80 80-8a */
        const unsigned char *u = (const unsigned char *)(at_end ? s + n - 3 : s);

        if (u[0] == 0xe2 && u[1] == 0x80 && u[2] >= 0x80 && u[2] <= 0x8a)
            return 3;
    }
    return 0;
}

/* s[0, n) with trailing whitespace (Python's str.rstrip()) dropped: its new
 * length. */
static size_t rstrip_len(const char *s, size_t n)
{
    size_t k;

    while (n > 0 && (k = space_len(s, n, 1)) > 0)
        n -= k;
    return n;
}

/* How a layout trims S and U. */
enum trim {
    TRIM_NONE,
    TRIM_STRIP,  /* Python's str.strip(), as the templates' trim and strip() */
    TRIM_LEFT_C, /* leading C isspace() characters: what a marker that strips the
                    whitespace after it (rstrip) takes from the text that follows */
    TRIM_C,      /* leading and trailing C isspace() characters (in the C locale:
                    " \t\n\v\f\r"), as llama.cpp's trim() in src/llama-chat.cpp */
};

/* Whether c is whitespace to C's isspace() in the C locale (a NUL is not). */
static int c_space(char c)
{
    return c != '\0' && strchr(" \t\n\v\f\r", c) != NULL;
}

/* *s, *n trimmed as trim says (within the same bytes). */
static void trimmed(const char **s, size_t *n, enum trim trim)
{
    if (trim == TRIM_LEFT_C || trim == TRIM_C) {
        while (*n > 0 && c_space(**s)) {
            (*s)++;
            (*n)--;
        }
        while (trim == TRIM_C && *n > 0 && c_space((*s)[*n - 1]))
            (*n)--;
    } else if (trim == TRIM_STRIP) {
        size_t k;

        while (*n > 0 && (k = space_len(*s, *n, 0)) > 0) {
            *s += k;
            *n -= k;
        }
        *n = rstrip_len(*s, *n);
    }
}

/* s[0, n), trimmed as trim says. */
static void content(struct builder *b, const char *s, size_t n, enum trim trim)
{
    trimmed(&s, &n, trim);
    add(b, s, n, 0);
}

/* Each layout (chat.h) as its markers: the system part (only with a
 * system prompt), the user's turn opened (without, and after, a system
 * part), the user's turn closed with the assistant's opened; how the
 * texts are trimmed. Phi-3's template writes a newline after each marker,
 * which its tokenizers drop with any whitespace that follows (the markers
 * are rstrip tokens in Hugging Face's tokenizer.json, and llama.cpp sets
 * RSTRIP on Phi-3's special tokens); baton's tokenizer does not strip, so
 * the layout leaves the newlines out and trims the texts' leading
 * whitespace itself: the same ids. Gemma has no system turn: S opens the
 * first user turn (llama.cpp's built-in gemma, and Gemma 3's template). */
static const struct layout {
    const char *sys_open, *sys_close, *user_open, *user_open_after_sys, *tail;
    const char *reply_close; /* ends an assistant's reply, and opens the next user turn */
    enum trim trim;
} layouts[] = {
    [BATON_CHAT_CHATML] = {"<|im_start|>system\n", "<|im_end|>\n", "<|im_start|>user\n",
                           "<|im_start|>user\n", "<|im_end|>\n<|im_start|>assistant\n",
                           "<|im_end|>\n<|im_start|>user\n", TRIM_NONE},
    [BATON_CHAT_LLAMA3] = {"<|start_header_id|>system<|end_header_id|>\n\n", "<|eot_id|>",
                           "<|start_header_id|>user<|end_header_id|>\n\n",
                           "<|start_header_id|>user<|end_header_id|>\n\n",
                           "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
                           "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n",
                           TRIM_STRIP},
    [BATON_CHAT_LLAMA2] = {"[INST] <<SYS>>\n", "\n<</SYS>>\n\n", "[INST] ", "", " [/INST]",
                           " </s><s>[INST] ", TRIM_STRIP},
    [BATON_CHAT_PHI3] = {"<|system|>", "<|end|>", "<|user|>", "<|user|>", "<|end|><|assistant|>",
                         "<|end|><|user|>", TRIM_LEFT_C},
    /* the system part inside the first [INST]: "\n\n" marks no token */
    [BATON_CHAT_MISTRAL_V3] = {"[INST] ", "\n\n", "[INST] ", "", "[/INST]", "</s>[INST] ",
                               TRIM_NONE},
    [BATON_CHAT_MISTRAL_V3_TEKKEN] = {"[INST]", "\n\n", "[INST]", "", "[/INST]", "</s>[INST]",
                                      TRIM_NONE},
    [BATON_CHAT_MISTRAL_V7] = {"[SYSTEM_PROMPT] ", "[/SYSTEM_PROMPT]", "[INST] ", "[INST] ",
                               "[/INST]", "</s>[INST] ", TRIM_NONE},
    [BATON_CHAT_MISTRAL_V7_TEKKEN] = {"[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[INST]", "[INST]",
                                      "[/INST]", "</s>[INST]", TRIM_NONE},
    /* the "\n\n" after S marks no token (as mistral-v3's) */
    [BATON_CHAT_GEMMA] = {"<start_of_turn>user\n", "\n\n", "<start_of_turn>user\n", "",
                          "<end_of_turn>\n<start_of_turn>model\n",
                          "<end_of_turn>\n<start_of_turn>user\n", TRIM_C},
};

_Static_assert(sizeof layouts / sizeof layouts[0] == sizeof names / sizeof names[0],
               "a layout for every name");

/* Lays out a first turn (next 0: sys, when not NULL, and user) or a later
 * one (next 1: the reply's close, then user; sys unused). */
static void lay_out(struct builder *b, enum baton_chat_template t, const char *sys,
                    const char *user, size_t n, int next)
{
    const struct layout *l = &layouts[t];

    if (next) {
        mark(b, l->reply_close);
        content(b, user, n, l->trim);
        mark(b, l->tail);
        return;
    }
    if (sys && t == BATON_CHAT_LLAMA2) {
        /* Llama 2's template strips '<<SYS>>\n' + S + '\n<</SYS>>\n\n' + U
         * as one string: S as given, U without its trailing whitespace, and
         * the "\n\n" only before a U that is left */
        const size_t un = rstrip_len(user, n);

        mark(b, l->sys_open);
        content(b, sys, strlen(sys), TRIM_NONE);
        mark(b, un > 0 ? l->sys_close : "\n<</SYS>>");
        content(b, user, un, TRIM_NONE);
        mark(b, l->tail);
        return;
    }
    if (sys && t == BATON_CHAT_GEMMA) {
        /* llama.cpp writes S's part only where S trimmed is not empty */
        const char *s = sys;
        size_t sn = strlen(sys);

        trimmed(&s, &sn, l->trim);
        if (sn == 0)
            sys = NULL;
    }
    if (sys) {
        mark(b, l->sys_open);
        content(b, sys, strlen(sys), l->trim);
        mark(b, l->sys_close);
    }
    mark(b, sys ? l->user_open_after_sys : l->user_open);
    content(b, user, n, l->trim);
    mark(b, l->tail);
}

const char *baton_chat_missing_marker(enum baton_chat_template t, int has_system,
                                      const struct baton_tokenizer *tok)
{
    /* each layout's control tokens, the first n_sys only with a system part */
    static const struct {
        const char *m[4];
        size_t n_sys;
    } markers[] = {
        [BATON_CHAT_CHATML] = {{"<|im_start|>", "<|im_end|>"}, 0},
        [BATON_CHAT_LLAMA3] = {{"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}, 0},
        [BATON_CHAT_PHI3] = {{"<|system|>", "<|user|>", "<|end|>", "<|assistant|>"}, 1},
        [BATON_CHAT_MISTRAL_V3] = {{"[INST]", "[/INST]"}, 0},
        [BATON_CHAT_MISTRAL_V3_TEKKEN] = {{"[INST]", "[/INST]"}, 0},
        [BATON_CHAT_MISTRAL_V7] = {{"[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[INST]", "[/INST]"},
                                   2},
        [BATON_CHAT_MISTRAL_V7_TEKKEN] = {{"[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[INST]",
                                           "[/INST]"},
                                          2},
        [BATON_CHAT_GEMMA] = {{"<start_of_turn>", "<end_of_turn>"}, 0},
    };

    if ((size_t)t >= sizeof markers / sizeof markers[0])
        return NULL;
    for (size_t i = has_system ? 0 : markers[t].n_sys; i < 4 && markers[t].m[i]; i++) {
        int32_t id[2];
        size_t n = 0;

        if (baton_tokenize_ex(tok, markers[t].m[i], strlen(markers[t].m[i]),
                              BATON_TOKENIZE_PARSE_SPECIAL, id, 2, &n) != 0 ||
            n != 1)
            return markers[t].m[i];
    }
    return NULL;
}

int baton_chat_template_for(const struct baton_gguf *g, const char *name,
                            const struct baton_tokenizer *tok, int has_system,
                            enum baton_chat_template *t, char *err, size_t err_len)
{
    const char *src = NULL, *missing;
    size_t len = 0;
    int rc;

    if (name != NULL) {
        *t = baton_chat_from_name(name);
        if (*t == BATON_CHAT_UNKNOWN) {
            char shown[64];

            snprintf(err, err_len, "chat template '%s' is not " BATON_CHAT_NAMES,
                     baton_gguf_escape(shown, sizeof shown, name, strlen(name)));
            return BATON_E_INVAL;
        }
    } else {
        rc = baton_gguf_get_string(g, "tokenizer.chat_template", &src, &len);
        if (rc != 0) {
            snprintf(err, err_len, "%s key 'tokenizer.chat_template': name the layout with "
                                   "--chat-template (" BATON_CHAT_NAMES ")",
                     rc == BATON_E_NOT_FOUND ? "no" : "a non-string");
            return rc == BATON_E_NOT_FOUND ? BATON_E_NOT_FOUND : BATON_E_FORMAT;
        }
        *t = baton_chat_detect(src, len);
        if (*t == BATON_CHAT_UNKNOWN) {
            snprintf(err, err_len, "key 'tokenizer.chat_template' is none of the layouts baton "
                                   "writes (" BATON_CHAT_NAMES "): name one with "
                                   "--chat-template");
            return BATON_E_UNSUPPORTED;
        }
    }
    missing = tok != NULL ? baton_chat_missing_marker(*t, has_system, tok) : NULL;
    if (missing != NULL) {
        snprintf(err, err_len, "the vocabulary has no token %s, which the %s layout needs (its "
                               "markers would be plain text): %s",
                 missing, baton_chat_name(*t),
                 name != NULL ? "name the model's own layout with --chat-template"
                              : "the layout recognized in tokenizer.chat_template does not fit "
                                "the vocabulary: name one with --chat-template");
        return BATON_E_UNSUPPORTED;
    }
    return 0;
}

/* baton_chat_format (next 0) and baton_chat_format_next (next 1). */
static int format(enum baton_chat_template t, const char *system, const char *user,
                  size_t user_len, int next, struct baton_chat_prompt *out)
{
    struct builder b = {out, 0};

    memset(out, 0, sizeof *out);
    if (t == BATON_CHAT_UNKNOWN || (size_t)t >= sizeof names / sizeof names[0] || user == NULL)
        return BATON_E_INVAL;
    lay_out(&b, t, system, user, user_len, next); /* the length only */
    if (b.len > BATON_TOKENIZER_MAX_TEXT_BYTES)
        return BATON_E_LIMIT;
    out->text = malloc(b.len + 1);
    if (out->text == NULL)
        return BATON_E_NOMEM;
    b.len = 0;
    lay_out(&b, t, system, user, user_len, next);
    out->text[b.len] = '\0';
    out->len = b.len;
    return 0;
}

int baton_chat_format_reply(enum baton_chat_template t, const char *text, size_t len,
                            struct baton_chat_prompt *out, int *fresh)
{
    struct builder b = {out, 0};
    const int space = t == BATON_CHAT_LLAMA2 || t == BATON_CHAT_MISTRAL_V3 ||
                      t == BATON_CHAT_MISTRAL_V7;
    const enum trim trim = t == BATON_CHAT_MISTRAL_V3 ? TRIM_STRIP
                           : t == BATON_CHAT_GEMMA    ? TRIM_C
                                                      : TRIM_NONE;

    memset(out, 0, sizeof *out);
    *fresh = 0;
    if (t == BATON_CHAT_UNKNOWN || (size_t)t >= sizeof names / sizeof names[0] || text == NULL)
        return BATON_E_INVAL;
    for (int pass = 0; pass < 2; pass++) { /* the length, then the text */
        b.len = 0;
        add(&b, " ", space ? 1 : 0, 0);
        content(&b, text, len, trim);
        if (pass == 0) {
            if (b.len > BATON_TOKENIZER_MAX_TEXT_BYTES)
                return BATON_E_LIMIT;
            if ((out->text = malloc(b.len + 1)) == NULL)
                return BATON_E_NOMEM;
        }
    }
    out->text[b.len] = '\0';
    out->len = b.len;
    *fresh = t >= BATON_CHAT_MISTRAL_V3 && t <= BATON_CHAT_MISTRAL_V7_TEKKEN;
    return 0;
}

int baton_chat_format(enum baton_chat_template t, const char *system, const char *user,
                      size_t user_len, struct baton_chat_prompt *out)
{
    return format(t, system, user, user_len, 0, out);
}

int baton_chat_format_next(enum baton_chat_template t, const char *user, size_t user_len,
                           struct baton_chat_prompt *out)
{
    return format(t, NULL, user, user_len, 1, out);
}

void baton_chat_prompt_free(struct baton_chat_prompt *p)
{
    free(p->text);
    memset(p, 0, sizeof *p);
}
