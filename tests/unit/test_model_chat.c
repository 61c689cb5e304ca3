/* Chat templates (model/chat.h) and baton_tokenize_spans: the layouts as
 * exact texts and spans; recognition of the templates in llama.cpp's own
 * vocab GGUFs ($MODEL_DIR/vocab: qwen2's chatml, phi-3's); the ids of laid-
 * out prompts on those real vocabularies (Qwen 2's and Llama 3's published
 * special-token ids), and that text in a message never becomes a control
 * token. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "baton/status.h"
#include "model/chat.h"
#include "model/gguf.h"
#include "model/gguf_write.h"
#include "model/tokenizer.h"

#define N_IDS 256

/* The vocab GGUF ggml-vocab-<name>.gguf and its tokenizer; skips (fails
 * under CI=true) without it. */
static void open_vocab(const char *name, struct baton_gguf **g, struct baton_tokenizer **tok)
{
    const char *dir = getenv("MODEL_DIR"), *ci = getenv("CI");
    char path[4096], err[512] = "";

    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf", dir ? dir : "(MODEL_DIR unset)",
             name);
    if (dir == NULL || baton_gguf_open(path, g, err, sizeof err) != 0) {
        if (ci != NULL && strcmp(ci, "true") == 0)
            fail_msg("%s not usable (%s) and CI=true", path, err);
        print_message("skipping: %s not found (set MODEL_DIR) %s\n", path, err);
        skip();
    }
    assert_int_equal(baton_tokenizer_from_gguf(*g, tok, err, sizeof err), 0);
}

static void close_vocab(struct baton_gguf *g, struct baton_tokenizer *tok)
{
    baton_tokenizer_free(tok);
    baton_gguf_close(g);
}

/* Lays out (sys, user) as t (a conversation's later turn with next 1:
 * baton_chat_format_next, sys unused) and checks the text and the spans
 * (the marker strings, in order, adjacent ones as one). */
static void expect_turn(enum baton_chat_template t, int next, const char *sys, const char *user,
                        const char *want, const char *const *marks, size_t n_marks)
{
    struct baton_chat_prompt p;

    assert_int_equal(next ? baton_chat_format_next(t, user, strlen(user), &p)
                          : baton_chat_format(t, sys, user, strlen(user), &p),
                     0);
    assert_string_equal(p.text, want);
    assert_int_equal(p.len, strlen(want));
    assert_int_equal(p.n_spans, n_marks);
    for (size_t i = 0; i < n_marks; i++) {
        assert_true(p.spans[i].off + p.spans[i].len <= p.len);
        assert_int_equal(p.spans[i].len, strlen(marks[i]));
        assert_memory_equal(p.text + p.spans[i].off, marks[i], strlen(marks[i]));
    }
    baton_chat_prompt_free(&p);
}

static void expect_layout(enum baton_chat_template t, const char *sys, const char *user,
                          const char *want, const char *const *marks, size_t n_marks)
{
    expect_turn(t, 0, sys, user, want, marks, n_marks);
}

/* A conversation's later turns: the reply's turn closed, the message laid
 * out and trimmed as in a first turn, the next reply opened. */
static void test_next_layouts(void **state)
{
    struct baton_chat_prompt p;

    (void)state;
    {
        const char *const m[] = {"<|im_end|>\n<|im_start|>user\n",
                                 "<|im_end|>\n<|im_start|>assistant\n"};
        expect_turn(BATON_CHAT_CHATML, 1, NULL, " Hi\n",
                    "<|im_end|>\n<|im_start|>user\n Hi\n<|im_end|>\n<|im_start|>assistant\n", m,
                    2);
    }
    {
        const char *const m[] = {"<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n",
                                 "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"};
        expect_turn(BATON_CHAT_LLAMA3, 1, NULL, "\t Hi \n",
                    "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                    "<|start_header_id|>assistant<|end_header_id|>\n\n",
                    m, 2);
    }
    {
        const char *const m[] = {" </s><s>[INST] ", " [/INST]"};
        expect_turn(BATON_CHAT_LLAMA2, 1, NULL, " Hi ", " </s><s>[INST] Hi [/INST]", m, 2);
    }
    {
        const char *const m[] = {"<|end|><|user|>", "<|end|><|assistant|>"};
        expect_turn(BATON_CHAT_PHI3, 1, NULL, "\n Hi", "<|end|><|user|>Hi<|end|><|assistant|>", m,
                    2);
    }
    {
        /* the reply's <end_of_turn> (the EOG token the model ended with,
         * not kept) and its newline, then the user's turn */
        const char *const m[] = {"<end_of_turn>\n<start_of_turn>user\n",
                                 "<end_of_turn>\n<start_of_turn>model\n"};
        expect_turn(BATON_CHAT_GEMMA, 1, NULL, "\r\n Hi \t",
                    "<end_of_turn>\n<start_of_turn>user\nHi<end_of_turn>\n"
                    "<start_of_turn>model\n",
                    m, 2);
    }
    assert_int_equal(baton_chat_format_next(BATON_CHAT_UNKNOWN, "x", 1, &p), BATON_E_INVAL);
    assert_null(p.text);
    assert_int_equal(baton_chat_format_next(BATON_CHAT_CHATML, NULL, 0, &p), BATON_E_INVAL);
}

static void test_layouts(void **state)
{
    (void)state;
    {
        const char *const m[] = {"<|im_start|>user\n", "<|im_end|>\n<|im_start|>assistant\n"};
        expect_layout(BATON_CHAT_CHATML, NULL, " Hi\n",
                      "<|im_start|>user\n Hi\n<|im_end|>\n<|im_start|>assistant\n", m, 2);
    }
    {
        const char *const m[] = {"<|im_start|>system\n", "<|im_end|>\n<|im_start|>user\n",
                                 "<|im_end|>\n<|im_start|>assistant\n"};
        expect_layout(BATON_CHAT_CHATML, "Be brief.", "Hi",
                      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                      "<|im_start|>assistant\n",
                      m, 3);
    }
    {
        /* trimmed, as the template's "| trim" */
        const char *const m[] = {"<|start_header_id|>system<|end_header_id|>\n\n",
                                 "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n",
                                 "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"};
        expect_layout(BATON_CHAT_LLAMA3, " S \n", "\t U u \r\n",
                      "<|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>"
                      "<|start_header_id|>user<|end_header_id|>\n\nU u<|eot_id|>"
                      "<|start_header_id|>assistant<|end_header_id|>\n\n",
                      m, 3);
    }
    {
        const char *const m[] = {"[INST] ", " [/INST]"};
        expect_layout(BATON_CHAT_LLAMA2, NULL, "  What is 2+2? ", "[INST] What is 2+2? [/INST]",
                      m, 2);
    }
    {
        const char *const m[] = {"[INST] <<SYS>>\n", "\n<</SYS>>\n\n", " [/INST]"};
        expect_layout(BATON_CHAT_LLAMA2, "Be kind.", "Hi",
                      "[INST] <<SYS>>\nBe kind.\n<</SYS>>\n\nHi [/INST]", m, 3);
    }
    {
        /* Llama 2's template strips '<<SYS>>\n' + S + '\n<</SYS>>\n\n' + U
         * as one: S's spaces and U's leading ones stay */
        const char *const m[] = {"[INST] <<SYS>>\n", "\n<</SYS>>\n\n", " [/INST]"};
        expect_layout(BATON_CHAT_LLAMA2, " Be kind.\n", "\n Hi \n",
                      "[INST] <<SYS>>\n Be kind.\n\n<</SYS>>\n\n\n Hi [/INST]", m, 3);
    }
    {
        /* an empty U: the "\n\n" after <</SYS>> goes too */
        const char *const m[] = {"[INST] <<SYS>>\n", "\n<</SYS>> [/INST]"};
        expect_layout(BATON_CHAT_LLAMA2, "S", " \n", "[INST] <<SYS>>\nS\n<</SYS>> [/INST]", m,
                      2);
    }
    {
        /* Phi-3: no newline after a marker, leading whitespace trimmed (what
         * its rstrip markers leave of the template's text) */
        const char *const m[] = {"<|system|>", "<|end|><|user|>", "<|end|><|assistant|>"};
        expect_layout(BATON_CHAT_PHI3, "\n S ", " \t\r\nU\n",
                      "<|system|>S <|end|><|user|>U\n<|end|><|assistant|>", m, 3);
    }
    {
        /* Gemma: no system turn; S trimmed at the start of the first user
         * turn, then "\n\n" */
        const char *const m[] = {"<start_of_turn>user\n", "<end_of_turn>\n<start_of_turn>model\n"};
        const char *const ms[] = {"<start_of_turn>user\n", "\n\n",
                                  "<end_of_turn>\n<start_of_turn>model\n"};

        expect_layout(BATON_CHAT_GEMMA, NULL, " What is 2+2?\n",
                      "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n", m,
                      2);
        expect_layout(BATON_CHAT_GEMMA, "\tBe brief. \n", "\v Hi\f\r",
                      "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n",
                      ms, 3);
        /* an S that trims to nothing writes no part (llama.cpp's) */
        expect_layout(BATON_CHAT_GEMMA, " \n\t", "Hi",
                      "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n", m, 2);
    }
    {
        /* an empty U after S: the "\n\n" stays (one span with the tail) */
        const char *const m[] = {"<start_of_turn>user\n",
                                 "\n\n<end_of_turn>\n<start_of_turn>model\n"};

        expect_layout(BATON_CHAT_GEMMA, "S", " ",
                      "<start_of_turn>user\nS\n\n<end_of_turn>\n<start_of_turn>model\n", m, 2);
    }
    {
        /* an empty message, and one holding NUL (length-counted) */
        struct baton_chat_prompt p;
        const char *const m[] = {"<|user|><|end|><|assistant|>"}; /* adjacent: one */

        expect_layout(BATON_CHAT_PHI3, NULL, "", "<|user|><|end|><|assistant|>", m, 1);
        assert_int_equal(baton_chat_format(BATON_CHAT_CHATML, NULL, "a\0b", 3, &p), 0);
        assert_int_equal(p.len, strlen("<|im_start|>user\n<|im_end|>\n<|im_start|>assistant\n") +
                                    3);
        assert_memory_equal(p.text + strlen("<|im_start|>user\n"), "a\0b", 3);
        baton_chat_prompt_free(&p);
        assert_int_equal(baton_chat_format(BATON_CHAT_UNKNOWN, NULL, "x", 1, &p), BATON_E_INVAL);
        assert_null(p.text);
    }
}

static void test_limit(void **state)
{
    struct baton_chat_prompt p;
    const size_t n = BATON_TOKENIZER_MAX_TEXT_BYTES;
    char *big = malloc(n);

    (void)state;
    assert_non_null(big);
    memset(big, 'a', n);
    /* the message alone fits the tokenizer; laid out it does not */
    assert_int_equal(baton_chat_format(BATON_CHAT_LLAMA2, NULL, big, n, &p), BATON_E_LIMIT);
    assert_null(p.text);
    assert_int_equal(baton_chat_format(BATON_CHAT_LLAMA2, NULL, big, n - 20, &p), 0);
    assert_int_equal(p.len, n - 20 + strlen("[INST] ") + strlen(" [/INST]"));
    baton_chat_prompt_free(&p);
    free(big);
}

static void test_detect(void **state)
{
    (void)state;
    /* fragments of the templates' Jinja as their models ship them */
    static const char llama3[] =
        "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
        "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] "
        "| trim + '<|eot_id|>' %}";
    static const char llama2[] = "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }} "
                                 "'<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n'";
    static const char mistral[] = "{{ '[INST] ' + message['content'] + ' [/INST]' }}";
    static const char phi3[] = "{{'<|user|>' + '\\n' + message['content'] + '<|end|>'}}";
    static const char zephyr[] = "{{ '<|user|>\\n' + message['content'] + eos_token }}";

    assert_int_equal(baton_chat_detect(llama3, strlen(llama3)), BATON_CHAT_LLAMA3);
    assert_int_equal(baton_chat_detect(llama2, strlen(llama2)), BATON_CHAT_LLAMA2);
    assert_int_equal(baton_chat_detect(mistral, strlen(mistral)), BATON_CHAT_LLAMA2);
    assert_int_equal(baton_chat_detect(phi3, strlen(phi3)), BATON_CHAT_PHI3);
    assert_int_equal(baton_chat_detect(zephyr, strlen(zephyr)), BATON_CHAT_UNKNOWN);
    /* Phi-4: chatml's markers, but "<|im_sep|>" where chatml has "\n" */
    static const char phi4[] = "{{'<|im_start|>' + message['role'] + '<|im_sep|>' + "
                               "message['content'] + '<|im_end|>'}}";
    assert_int_equal(baton_chat_detect(phi4, strlen(phi4)), BATON_CHAT_UNKNOWN);
    assert_int_equal(baton_chat_detect("{{ messages }}", 14), BATON_CHAT_UNKNOWN);
    assert_int_equal(baton_chat_detect(NULL, 0), BATON_CHAT_UNKNOWN);
    /* len bounds the search: the marker past it is not seen */
    assert_int_equal(baton_chat_detect("ab<|im_start|>", 2), BATON_CHAT_UNKNOWN);
    /* Mistral's, by llama.cpp's rules (the tekken v7 told apart by its
     * "[INST]" without a space) */
    static const char v7_tekken[] = "{%- if system_message %}{{- '[SYSTEM_PROMPT]' + "
                                    "system_message + '[/SYSTEM_PROMPT]' }}{%- endif %}"
                                    "{{- '[INST]' + message['content'] + '[/INST]' }}";
    static const char v7[] = "{{- '[SYSTEM_PROMPT] ' + system_message + '[/SYSTEM_PROMPT]' }}"
                             "{{- '[INST] ' + message['content'] + '[/INST]' }}";
    static const char v3_tekken[] = "{{- \"[AVAILABLE_TOOLS]\" + tools|tojson }}"
                                    "{{- \"[INST]\" + message[\"content\"] + \"[/INST]\" }}";
    static const char v3[] = "{{- '[AVAILABLE_TOOLS] ' + tools }}{{- '[INST] ' + "
                             "message['content'] + '[/INST]' }}";
    static const char v1[] = "{{- '[AVAILABLE_TOOLS] ' + tools }}{{- ' [INST] ' + "
                             "message['content'] + ' [/INST]' }}";
    assert_int_equal(baton_chat_detect(v7_tekken, strlen(v7_tekken)),
                     BATON_CHAT_MISTRAL_V7_TEKKEN);
    assert_int_equal(baton_chat_detect(v7, strlen(v7)), BATON_CHAT_MISTRAL_V7);
    assert_int_equal(baton_chat_detect(v3_tekken, strlen(v3_tekken)),
                     BATON_CHAT_MISTRAL_V3_TEKKEN);
    assert_int_equal(baton_chat_detect(v3, strlen(v3)), BATON_CHAT_MISTRAL_V3);
    assert_int_equal(baton_chat_detect(v1, strlen(v1)), BATON_CHAT_LLAMA2);
    assert_int_equal(baton_chat_detect("[SYSTEM_PROMPT]", 15), BATON_CHAT_UNKNOWN); /* no [INST] */
    /* Gemma 3's template; with another layout's marker as well, that layout
     * except llama3 (llama.cpp's order: chatml, [INST], phi3, gemma, llama3) */
    static const char gemma[] =
        "{%- if messages[0]['role'] == 'system' -%}{%- set first_user_prefix = "
        "messages[0]['content'] + '\n\n' -%}{%- endif -%}{{ '<start_of_turn>' + role + '\n' + "
        "(first_user_prefix if loop.first else \"\") }}{{ message['content'] | trim }}"
        "{{ '<end_of_turn>\n' }}{%- if add_generation_prompt -%}{{'<start_of_turn>model\n'}}";
    assert_int_equal(baton_chat_detect(gemma, strlen(gemma)), BATON_CHAT_GEMMA);
    assert_int_equal(baton_chat_detect("<start_of_turn>", 15), BATON_CHAT_GEMMA);
    assert_int_equal(baton_chat_detect("<start_of_turn", 14), BATON_CHAT_UNKNOWN);
    assert_int_equal(baton_chat_detect("<end_of_turn>", 13), BATON_CHAT_UNKNOWN);
    {
        static const struct {
            const char *src;
            enum baton_chat_template want;
        } both[] = {
            {"<start_of_turn><|im_start|>", BATON_CHAT_CHATML},
            {"<start_of_turn><|start_header_id|>", BATON_CHAT_GEMMA},
            {"<start_of_turn>[INST]", BATON_CHAT_LLAMA2},
            {"<start_of_turn>[INST][SYSTEM_PROMPT]", BATON_CHAT_MISTRAL_V7_TEKKEN},
            {"<start_of_turn><|user|><|end|>", BATON_CHAT_PHI3},
            {"<start_of_turn><|user|>", BATON_CHAT_GEMMA},
        };
        for (size_t i = 0; i < sizeof both / sizeof both[0]; i++)
            assert_int_equal(baton_chat_detect(both[i].src, strlen(both[i].src)), both[i].want);
    }
    for (int t = BATON_CHAT_CHATML; t <= BATON_CHAT_GEMMA; t++)
        assert_int_equal(baton_chat_from_name(baton_chat_name((enum baton_chat_template)t)), t);
    assert_int_equal(baton_chat_from_name("ChatML"), BATON_CHAT_UNKNOWN);
    assert_int_equal(baton_chat_from_name(NULL), BATON_CHAT_UNKNOWN);
    assert_string_equal(baton_chat_name((enum baton_chat_template)99), "unknown");
}

static void test_template_for(void **state)
{
    struct baton_gguf *g;
    struct baton_tokenizer *tok;
    enum baton_chat_template t = BATON_CHAT_UNKNOWN;
    char err[256] = "";

    (void)state;
    open_vocab("qwen2", &g, &tok);
    assert_int_equal(baton_chat_template_for(g, NULL, NULL, 0, &t, err, sizeof err), 0);
    assert_int_equal(t, BATON_CHAT_CHATML);
    assert_int_equal(baton_chat_template_for(g, "llama3", NULL, 0, &t, err, sizeof err), 0);
    assert_int_equal(t, BATON_CHAT_LLAMA3);
    assert_int_equal(baton_chat_template_for(g, "vicuna", NULL, 0, &t, err, sizeof err),
                     BATON_E_INVAL);
    assert_non_null(strstr(err, "'vicuna'"));
    close_vocab(g, tok);
    open_vocab("phi-3", &g, &tok);
    assert_int_equal(baton_chat_template_for(g, NULL, NULL, 0, &t, err, sizeof err), 0);
    assert_int_equal(t, BATON_CHAT_PHI3);
    assert_null(baton_chat_missing_marker(BATON_CHAT_PHI3, 1, tok));
    assert_string_equal(baton_chat_missing_marker(BATON_CHAT_CHATML, 0, tok), "<|im_start|>");
    close_vocab(g, tok);
    /* which layouts a vocabulary holds the control tokens of */
    open_vocab("qwen2", &g, &tok);
    assert_null(baton_chat_missing_marker(BATON_CHAT_CHATML, 1, tok));
    assert_null(baton_chat_missing_marker(BATON_CHAT_LLAMA2, 1, tok)); /* [INST] is text */
    /* Mistral's [INST] is a control token: not on Qwen 2's vocabulary */
    assert_string_equal(baton_chat_missing_marker(BATON_CHAT_MISTRAL_V3, 0, tok), "[INST]");
    assert_string_equal(baton_chat_missing_marker(BATON_CHAT_MISTRAL_V7_TEKKEN, 1, tok),
                        "[SYSTEM_PROMPT]");
    assert_string_equal(baton_chat_missing_marker(BATON_CHAT_MISTRAL_V7_TEKKEN, 0, tok),
                        "[INST]");
    assert_int_equal(baton_chat_template_for(g, "mistral-v7-tekken", tok, 0, &t, err, sizeof err),
                     BATON_E_UNSUPPORTED);
    assert_non_null(strstr(err, "no token [INST], which the mistral-v7-tekken layout needs"));
    assert_string_equal(baton_chat_missing_marker(BATON_CHAT_LLAMA3, 0, tok),
                        "<|start_header_id|>");
    assert_string_equal(baton_chat_missing_marker(BATON_CHAT_PHI3, 0, tok), "<|user|>");
    assert_string_equal(baton_chat_missing_marker(BATON_CHAT_GEMMA, 1, tok), "<start_of_turn>");
    assert_int_equal(baton_chat_template_for(g, "gemma", tok, 1, &t, err, sizeof err),
                     BATON_E_UNSUPPORTED);
    assert_non_null(strstr(err, "no token <start_of_turn>, which the gemma layout needs"));
    /* with the tokenizer, template_for refuses such a layout, naming the token */
    assert_int_equal(baton_chat_template_for(g, "llama3", tok, 0, &t, err, sizeof err),
                     BATON_E_UNSUPPORTED);
    assert_non_null(strstr(err, "no token <|start_header_id|>, which the llama3 layout needs"));
    assert_int_equal(baton_chat_template_for(g, NULL, tok, 1, &t, err, sizeof err), 0);
    assert_int_equal(t, BATON_CHAT_CHATML);
    close_vocab(g, tok);
    open_vocab("llama-bpe", &g, &tok); /* llama.cpp's file has no template */
    assert_null(baton_chat_missing_marker(BATON_CHAT_LLAMA3, 1, tok));
    assert_int_equal(baton_chat_template_for(g, NULL, NULL, 0, &t, err, sizeof err),
                     BATON_E_NOT_FOUND);
    assert_non_null(strstr(err, "tokenizer.chat_template"));
    assert_non_null(strstr(err, "--chat-template"));
    close_vocab(g, tok);
}

/* The ids of (sys, user) laid out as t and tokenized with its spans (BOS as
 * the vocabulary says) into ids; their count. */
static size_t chat_ids(const struct baton_tokenizer *tok, enum baton_chat_template t,
                       const char *sys, const char *user, int32_t *ids)
{
    struct baton_chat_prompt p;
    size_t n = 0;
    const unsigned bos = baton_tokenizer_add_bos(tok) ? BATON_TOKENIZE_ADD_BOS : 0u;

    assert_int_equal(baton_chat_format(t, sys, user, strlen(user), &p), 0);
    assert_int_equal(baton_tokenize_spans(tok, p.text, p.len, bos, p.spans, p.n_spans, ids, N_IDS,
                                          &n),
                     0);
    /* a message without control-token text: as llama.cpp tokenizes the
     * whole laid-out text with special parsing */
    if (strchr(user, '<') == NULL && (sys == NULL || strchr(sys, '<') == NULL)) {
        int32_t all[N_IDS];
        size_t n_all = 0;

        assert_int_equal(baton_tokenize_ex(tok, p.text, p.len, bos | BATON_TOKENIZE_PARSE_SPECIAL,
                                           all, N_IDS, &n_all),
                         0);
        assert_int_equal(n_all, n);
        assert_memory_equal(all, ids, n * sizeof *ids);
    }
    baton_chat_prompt_free(&p);
    return n;
}

static void expect_seq(const int32_t *ids, size_t n, const int32_t *want, size_t n_want)
{
    if (n != n_want || memcmp(ids, want, n * sizeof *ids) != 0) {
        for (size_t i = 0; i < n; i++)
            print_message("%d ", ids[i]);
        print_message("(%zu ids)\n", n);
        fail_msg("ids differ from the %zu expected", n_want);
    }
}

/* A small SentencePiece vocabulary with Gemma's turn markers as control
 * tokens (no real Gemma vocabulary is at hand; the layout's ids are known
 * by construction): 0 <unk>, 1 <s>, 2 </s>, 3 <start_of_turn>,
 * 4 <end_of_turn>, 5 "user", 6 "model", 7 <0x0A>, 8 "Hi", and the pieces
 * "us", "er", "mo", "de", "del" that "user" and "model" are merged from;
 * no space prefix, BOS added (as Gemma's). */
static void gemma_like_vocab(struct baton_gguf **g, struct baton_tokenizer **tok)
{
    static const char *const pieces[] = {"<unk>", "<s>", "</s>", "<start_of_turn>",
                                         "<end_of_turn>", "user", "model", "<0x0A>", "Hi",
                                         "us", "er", "mo", "de", "del"};
    enum { N = sizeof pieces / sizeof pieces[0] };
    static const int32_t types[N] = {2, 3, 3, 3, 3, 1, 1, 6, 1, 1, 1, 1, 1, 1};
    size_t lens[N];
    float scores[N];
    struct baton_gguf_writer *w;
    char path[] = "/tmp/baton-gemma-vocab-XXXXXX", err[256] = "";
    int fd = mkstemp(path);

    assert_true(fd >= 0);
    close(fd);
    for (size_t i = 0; i < N; i++) {
        lens[i] = strlen(pieces[i]);
        scores[i] = (float)lens[i]; /* longer pieces first */
    }
    assert_int_equal(baton_gguf_writer_create(&w), 0);
    assert_int_equal(baton_gguf_w_string(w, "tokenizer.ggml.model", "llama", 5), 0);
    assert_int_equal(baton_gguf_w_str_array(w, "tokenizer.ggml.tokens", pieces, lens, N), 0);
    assert_int_equal(baton_gguf_w_f32_array(w, "tokenizer.ggml.scores", scores, N), 0);
    assert_int_equal(baton_gguf_w_i32_array(w, "tokenizer.ggml.token_type", types, N), 0);
    assert_int_equal(baton_gguf_w_bool(w, "tokenizer.ggml.add_space_prefix", 0), 0);
    assert_int_equal(baton_gguf_writer_write(w, path, err, sizeof err), 0);
    baton_gguf_writer_free(w);
    assert_int_equal(baton_gguf_open(path, g, err, sizeof err), 0);
    unlink(path); /* the mapping stays */
    assert_int_equal(baton_tokenizer_from_gguf(*g, tok, err, sizeof err), 0);
}

/* gemma's ids on such a vocabulary: the markers' control tokens, the
 * newlines after them as text, the reply's end a generation's end, and
 * marker text in a message never a control token. */
static void test_ids_gemma(void **state)
{
    struct baton_gguf *g;
    struct baton_tokenizer *tok;
    int32_t ids[N_IDS];
    size_t n;
    enum baton_chat_template t;
    char err[256] = "";

    (void)state;
    gemma_like_vocab(&g, &tok);
    assert_null(baton_chat_missing_marker(BATON_CHAT_GEMMA, 1, tok));
    assert_int_equal(baton_chat_template_for(g, "gemma", tok, 1, &t, err, sizeof err), 0);
    assert_int_equal(t, BATON_CHAT_GEMMA);
    assert_true(baton_tokenizer_is_eog(tok, 4)); /* <end_of_turn> */
    {
        /* <s> <start_of_turn> user \n Hi <end_of_turn> \n <start_of_turn> model \n */
        static const int32_t want[] = {1, 3, 5, 7, 8, 4, 7, 3, 6, 7};

        n = chat_ids(tok, BATON_CHAT_GEMMA, NULL, " Hi\n", ids);
        expect_seq(ids, n, want, sizeof want / sizeof want[0]);
    }
    {
        /* a later turn, after the reply (its <end_of_turn> not kept) */
        static const int32_t want[] = {4, 7, 3, 5, 7, 8, 4, 7, 3, 6, 7};
        struct baton_chat_prompt p;

        assert_int_equal(baton_chat_format_next(BATON_CHAT_GEMMA, "Hi", 2, &p), 0);
        assert_int_equal(baton_tokenize_spans(tok, p.text, p.len, BATON_TOKENIZE_CONTINUE,
                                              p.spans, p.n_spans, ids, N_IDS, &n),
                         0);
        expect_seq(ids, n, want, sizeof want / sizeof want[0]);
        baton_chat_prompt_free(&p);
    }
    /* the message's "<start_of_turn>" is text: only the template's two */
    n = chat_ids(tok, BATON_CHAT_GEMMA, "<end_of_turn>", "<start_of_turn>Hi", ids);
    {
        size_t n_start = 0, n_end = 0;

        for (size_t i = 0; i < n; i++) {
            n_start += ids[i] == 3;
            n_end += ids[i] == 4;
        }
        assert_int_equal(n_start, 2);
        assert_int_equal(n_end, 1);
    }
    close_vocab(g, tok);
}

static void test_ids_qwen2(void **state)
{
    struct baton_gguf *g;
    struct baton_tokenizer *tok;
    int32_t ids[N_IDS], plain[N_IDS];
    size_t n, n_plain = 0, n_end = 0;
    /* Qwen 2's ids: <|im_start|> 151644, <|im_end|> 151645, "system" 8948,
     * "user" 872, "assistant" 77091, "\n" 198 */
    static const int32_t want[] = {151644, 8948, 198,    3430,   9814, 13,  151645, 198, 151644,
                                   872,    198,  9707,   151645, 198,  151644, 77091, 198};

    (void)state;
    open_vocab("qwen2", &g, &tok);
    n = chat_ids(tok, BATON_CHAT_CHATML, "Be brief.", "Hello", ids);
    expect_seq(ids, n, want, sizeof want / sizeof want[0]);
    /* the message's "<|im_end|>" is text: the ids between the markers are
     * those of the plain text, and <|im_end|> occurs only where the
     * template puts it */
    n = chat_ids(tok, BATON_CHAT_CHATML, NULL, "Hello <|im_end|> there", ids);
    assert_int_equal(baton_tokenize_ex(tok, "user\nHello <|im_end|> there", 27, 0, plain, N_IDS,
                                       &n_plain),
                     0);
    assert_int_equal(n, n_plain + 6); /* 1 marker id before, 5 after */
    assert_int_equal(ids[0], 151644);
    assert_memory_equal(ids + 1, plain, n_plain * sizeof *ids);
    for (size_t i = 0; i < n; i++)
        n_end += ids[i] == 151645;
    assert_int_equal(n_end, 1);
    close_vocab(g, tok);
}

static void test_ids_llama3(void **state)
{
    struct baton_gguf *g;
    struct baton_tokenizer *tok;
    int32_t ids[N_IDS];
    size_t n;
    /* Llama 3's ids: <|begin_of_text|> 128000 (BOS), <|start_header_id|>
     * 128006, <|end_header_id|> 128007, <|eot_id|> 128009, "user" 882,
     * "assistant" 78191, "\n\n" 271, "Hello" 9906 */
    static const int32_t want[] = {128000, 128006, 882,    128007, 271,   9906,
                                   128009, 128006, 78191, 128007, 271};

    (void)state;
    open_vocab("llama-bpe", &g, &tok);
    n = chat_ids(tok, BATON_CHAT_LLAMA3, NULL, " Hello\n", ids);
    expect_seq(ids, n, want, sizeof want / sizeof want[0]);
    n = chat_ids(tok, BATON_CHAT_LLAMA3, NULL, "<|eot_id|>", ids);
    assert_true(n > 11);
    for (size_t i = 5; i + 6 < n; i++) /* the message: no control id */
        assert_true(ids[i] < 128000);
    close_vocab(g, tok);
}

static void test_ids_spm(void **state)
{
    struct baton_gguf *g;
    struct baton_tokenizer *tok;
    int32_t ids[N_IDS];
    size_t n;

    (void)state;
    /* a SentencePiece vocabulary: the same ids as the whole text with
     * special parsing (chat_ids checks it), BOS first */
    open_vocab("phi-3", &g, &tok);
    n = chat_ids(tok, BATON_CHAT_PHI3, "Be brief.", "Hello", ids);
    assert_true(n > 8);
    assert_int_equal(ids[0], baton_tokenizer_bos(tok));
    /* no "\n" (<0x0A>, 13) after the markers, as Phi-3's rstrip markers
     * give: <s> <|user|> "Hello" (with its space prefix) <|end|>
     * <|assistant|> */
    {
        static const int32_t want[] = {1, 32010, 15043, 32007, 32001};

        n = chat_ids(tok, BATON_CHAT_PHI3, NULL, "\nHello", ids);
        expect_seq(ids, n, want, sizeof want / sizeof want[0]);
    }
    close_vocab(g, tok);
    open_vocab("llama-spm", &g, &tok);
    n = chat_ids(tok, BATON_CHAT_LLAMA2, "Be kind.", "Hello", ids);
    assert_true(n > 8);
    assert_int_equal(ids[0], baton_tokenizer_bos(tok));
    /* a later turn: the reply closed by EOS, BOS before the next [INST]
     * (Llama 2's template), both control tokens from the markers; tokenized
     * as a continuation (no space prefix before its first piece), its ids
     * are those of the whole conversation's text after the reply's */
    {
        struct baton_chat_prompt p;
        int32_t whole[N_IDS], reply[N_IDS];
        size_t n_whole = 0, n_reply = 0;
        char text[128];

        assert_int_equal(baton_chat_format_next(BATON_CHAT_LLAMA2, "Hello", 5, &p), 0);
        assert_int_equal(baton_tokenize_spans(tok, p.text, p.len, BATON_TOKENIZE_CONTINUE,
                                              p.spans, p.n_spans, ids, N_IDS, &n),
                         0);
        snprintf(text, sizeof text, "Sure thing.%s", p.text);
        assert_int_equal(baton_tokenize_ex(tok, text, strlen(text), BATON_TOKENIZE_PARSE_SPECIAL,
                                           whole, N_IDS, &n_whole),
                         0);
        assert_int_equal(baton_tokenize_ex(tok, "Sure thing.", 11, 0, reply, N_IDS, &n_reply), 0);
        assert_int_equal(n_whole, n_reply + n);
        assert_memory_equal(whole, reply, n_reply * sizeof *ids);
        expect_seq(ids, n, whole + n_reply, n);
        assert_int_equal(ids[1], baton_tokenizer_eos(tok)); /* " " then "</s><s>" */
        assert_int_equal(ids[2], baton_tokenizer_bos(tok));
        /* without CONTINUE the space before </s> took a space prefix too */
        assert_int_equal(baton_tokenize_spans(tok, p.text, p.len, 0, p.spans, p.n_spans, reply,
                                              N_IDS, &n_reply),
                         0);
        assert_true(reply[0] != ids[0]);
        baton_chat_prompt_free(&p);
    }
    close_vocab(g, tok);
}

static void test_spans(void **state)
{
    struct baton_gguf *g;
    struct baton_tokenizer *tok;
    int32_t a[N_IDS], b[N_IDS];
    size_t na = 0, nb = 0;
    static const char text[] = "<|im_start|>x<|im_end|>";
    const size_t len = sizeof text - 1;

    (void)state;
    open_vocab("qwen2", &g, &tok);
    /* no span: no control token; a span over the whole: every one */
    assert_int_equal(baton_tokenize_spans(tok, text, len, 0, NULL, 0, a, N_IDS, &na), 0);
    assert_int_equal(baton_tokenize_ex(tok, text, len, 0, b, N_IDS, &nb), 0);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na * sizeof *a);
    {
        const struct baton_text_span all = {0, len};

        assert_int_equal(baton_tokenize_spans(tok, text, len, 0, &all, 1, a, N_IDS, &na), 0);
        assert_int_equal(na, 3);
        assert_int_equal(a[0], 151644);
        assert_int_equal(a[2], 151645);
    }
    {
        /* a span that holds only part of a marker does not make it one */
        const struct baton_text_span s[] = {{0, 12}, {13, 5}};

        assert_int_equal(baton_tokenize_spans(tok, text, len, 0, s, 2, a, N_IDS, &na), 0);
        assert_int_equal(a[0], 151644);
        for (size_t i = 1; i < na; i++)
            assert_true(a[i] != 151645);
    }
    {
        const struct baton_text_span overlap[] = {{0, 5}, {4, 2}};
        const struct baton_text_span order[] = {{6, 2}, {0, 2}};
        const struct baton_text_span past[] = {{len, 1}};
        const struct baton_text_span at_end[] = {{len, 0}};

        assert_int_equal(baton_tokenize_spans(tok, text, len, 0, overlap, 2, a, N_IDS, &na),
                         BATON_E_INVAL);
        assert_int_equal(baton_tokenize_spans(tok, text, len, 0, order, 2, a, N_IDS, &na),
                         BATON_E_INVAL);
        assert_int_equal(baton_tokenize_spans(tok, text, len, 0, past, 1, a, N_IDS, &na),
                         BATON_E_INVAL);
        assert_int_equal(baton_tokenize_spans(tok, text, len, 0, at_end, 1, a, N_IDS, &na), 0);
    }
    close_vocab(g, tok);
}

/* The hex text after "KEY " on the next line of *p (NUL-terminated, owned). */
static char *hex_line(char **p, const char *key, size_t *len)
{
    char *line = *p, *eol = strchr(line, '\n');
    size_t k = strlen(key);

    assert_non_null(eol);
    *eol = '\0';
    *p = eol + 1;
    assert_true(strncmp(line, key, k) == 0 && line[k] == ' ');
    line += k + 1;
    size_t n = strlen(line) / 2;
    char *out = malloc(n + 1);
    assert_non_null(out);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        assert_int_equal(sscanf(line + 2 * i, "%2x", &v), 1);
        out[i] = (char)v;
    }
    out[n] = '\0';
    *len = n;
    return out;
}

/* chat_ref.c's messages: system, first user, assistant, second user. */
struct ref_msgs {
    const char *sys, *u1, *reply, *u2;
};

/* Layouts against llama.cpp's built-in ones of the same names (the
 * fixture tests/reference/fixtures/FILE, chat_ref.c, with messages m): a
 * first turn without and with a system prompt, and a conversation, which
 * must be the first turn, baton_chat_format_reply's text of the reply and
 * baton_chat_format_next's text. The fixture must hold n_want templates. */
static void check_reference(const char *file, const struct ref_msgs *m, size_t n_want)
{
    const char *src = getenv("SRC_DIR");
    char path[4200], *fix, *p;
    size_t n_templates = 0;

    assert_non_null(src);
    snprintf(path, sizeof path, "%s/tests/reference/fixtures/%s", src, file);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fix = calloc(1, 1 << 16);
    assert_non_null(fix);
    assert_true(fread(fix, 1, (1 << 16) - 1, f) > 0);
    fclose(f);
    for (p = fix; *p != '\0';) {
        char *eol = strchr(p, '\n');
        assert_non_null(eol);
        if (*p == '#') {
            p = eol + 1;
            continue;
        }
        *eol = '\0';
        assert_true(strncmp(p, "template ", 9) == 0);
        enum baton_chat_template t = baton_chat_from_name(p + 9);
        assert_int_not_equal(t, BATON_CHAT_UNKNOWN);
        p = eol + 1;
        for (int with_sys = 0; with_sys < 2; with_sys++) {
            struct baton_chat_prompt first;
            size_t n_want_text;
            char *want = hex_line(&p, with_sys ? "first1" : "first0", &n_want_text);

            assert_int_equal(baton_chat_format(t, with_sys ? m->sys : NULL, m->u1,
                                               strlen(m->u1), &first),
                             0);
            if (first.len != n_want_text || memcmp(first.text, want, n_want_text) != 0)
                fail_msg("%s: '%s', llama.cpp's '%s'", baton_chat_name(t), first.text, want);
            free(want);
            baton_chat_prompt_free(&first);
        }
        for (int with_sys = 0; with_sys < 2; with_sys++) {
            struct baton_chat_prompt first, next;
            size_t n_conv;
            char *conv = hex_line(&p, with_sys ? "conv1" : "conv0", &n_conv);

            assert_int_equal(baton_chat_format(t, with_sys ? m->sys : NULL, m->u1,
                                               strlen(m->u1), &first),
                             0);
            assert_int_equal(baton_chat_format_next(t, m->u2, strlen(m->u2), &next), 0);
            struct baton_chat_prompt rp;
            int fresh = -1;
            assert_int_equal(baton_chat_format_reply(t, m->reply, strlen(m->reply), &rp, &fresh),
                             0);
            /* after the Mistral layouts' [/INST], a control token; gemma's
             * reply follows "model\n" */
            assert_int_equal(fresh, t != BATON_CHAT_GEMMA);
            assert_true(n_conv > first.len && memcmp(conv, first.text, first.len) == 0);
            const char *r = conv + first.len;
            if (strncmp(r, rp.text, rp.len) != 0)
                fail_msg("%s: reply '%s', llama.cpp's '%s'", baton_chat_name(t), rp.text, r);
            r += rp.len;
            if (strcmp(r, next.text) != 0)
                fail_msg("%s: next turn '%s', llama.cpp's '%s'", baton_chat_name(t), next.text,
                         r);
            free(conv);
            baton_chat_prompt_free(&first);
            baton_chat_prompt_free(&rp);
            baton_chat_prompt_free(&next);
        }
        n_templates++;
    }
    assert_int_equal(n_templates, n_want);
    free(fix);
}

/* The Mistral layouts (chat-mistral.txt). */
static void test_reference_mistral(void **state)
{
    static const struct ref_msgs m = {"Be brief.", " What is 2+2? ", "Four.", "And 3+3?"};

    (void)state;
    check_reference("chat-mistral.txt", &m, 4);
}

/* Gemma (chat-gemma.txt, chat_ref --spaced): every message trimmed, of C's
 * isspace() only (0x1f and U+00A0 stay), the system prompt at the start of
 * the first user turn. */
static void test_reference_gemma(void **state)
{
    static const struct ref_msgs m = {" \tBe brief.\n", " \tWhat is 2+2?\r\n", "\n Four.\f",
                                      "\x1f And 3+3?\xc2\xa0\v"};

    (void)state;
    check_reference("chat-gemma.txt", &m, 1);
}

/* How each layout writes a past reply in a history (baton serve). */
static void test_reply(void **state)
{
    static const struct {
        enum baton_chat_template t;
        const char *want;
        int fresh;
    } cases[] = {
        {BATON_CHAT_CHATML, "\t Four. \n", 0},
        {BATON_CHAT_LLAMA3, "\t Four. \n", 0},
        {BATON_CHAT_LLAMA2, " \t Four. \n", 0},
        {BATON_CHAT_PHI3, "\t Four. \n", 0},
        {BATON_CHAT_MISTRAL_V3, " Four.", 1},
        {BATON_CHAT_MISTRAL_V3_TEKKEN, "\t Four. \n", 1},
        {BATON_CHAT_MISTRAL_V7, " \t Four. \n", 1},
        {BATON_CHAT_MISTRAL_V7_TEKKEN, "\t Four. \n", 1},
        {BATON_CHAT_GEMMA, "Four.", 0},
    };
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct baton_chat_prompt p;
        int fresh = -1;
        assert_int_equal(baton_chat_format_reply(cases[i].t, "\t Four. \n", 9, &p, &fresh), 0);
        assert_string_equal(p.text, cases[i].want);
        assert_int_equal(p.len, strlen(cases[i].want));
        assert_int_equal(p.n_spans, 0);
        assert_int_equal(fresh, cases[i].fresh);
        baton_chat_prompt_free(&p);
    }
    struct baton_chat_prompt p;
    int fresh;
    assert_int_equal(baton_chat_format_reply(BATON_CHAT_UNKNOWN, "x", 1, &p, &fresh),
                     BATON_E_INVAL);
    assert_null(p.text);
    /* an empty reply: only the space */
    assert_int_equal(baton_chat_format_reply(BATON_CHAT_MISTRAL_V3, " ", 1, &p, &fresh), 0);
    assert_string_equal(p.text, " ");
    baton_chat_prompt_free(&p);
}

/* llama3's trimming is Python's str.strip() (Jinja's trim): a NUL is kept,
 * as are other control bytes; 0x1c-0x1f and Unicode whitespace (U+00A0,
 * U+3000, U+2000-U+200A) go. gemma's is llama.cpp's trim(), C's isspace():
 * those stay. */
static void test_trim(void **state)
{
    static const struct {
        const char *user;
        size_t len;
        const char *want; /* the message as laid out */
        size_t want_len;
    } cases[] = {
        {"\0Hi\0", 5, "\0Hi\0", 5},
        {"\0", 1, "\0", 1},
        {" \x01Hi\x7f ", 6, "\x01Hi\x7f", 4},
        {"\x1c\x1d\x1e\x1fHi\x1f", 7, "Hi", 2},
        {"\xc2\xa0Hi\xe3\x80\x80 \xe2\x80\x8a", 11, "Hi", 2},
        {"\xe2\x80\x8b" "Hi", 5, "\xe2\x80\x8b" "Hi", 5}, /* U+200B is no whitespace */
        {"\xc2\x85\n", 3, "", 0},
        {"\xa0", 1, "\xa0", 1}, /* a lone continuation byte stays */
    };
    const char *const head = "<|start_header_id|>user<|end_header_id|>\n\n";
    const char *const tail = "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n";

    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct baton_chat_prompt p;

        assert_int_equal(
            baton_chat_format(BATON_CHAT_LLAMA3, NULL, cases[i].user, cases[i].len, &p), 0);
        assert_int_equal(p.len, strlen(head) + cases[i].want_len + strlen(tail));
        assert_memory_equal(p.text + strlen(head), cases[i].want, cases[i].want_len);
        baton_chat_prompt_free(&p);
    }
    /* gemma trims as llama.cpp's trim(): C's isspace() only */
    static const struct {
        const char *user;
        size_t len;
        const char *want;
        size_t want_len;
    } c_cases[] = {
        {" \t\n\v\f\rHi\r\f\v\n\t ", 14, "Hi", 2},
        {"\0 Hi \0", 6, "\0 Hi \0", 6},
        {"\x1fHi\x1c", 4, "\x1fHi\x1c", 4},
        {"\xc2\xa0Hi\xe3\x80\x80 ", 8, "\xc2\xa0Hi\xe3\x80\x80", 7},
        {" \n", 2, "", 0},
    };
    const char *const g_head = "<start_of_turn>user\n";
    const char *const g_tail = "<end_of_turn>\n<start_of_turn>model\n";

    for (size_t i = 0; i < sizeof c_cases / sizeof c_cases[0]; i++) {
        struct baton_chat_prompt p;

        assert_int_equal(
            baton_chat_format(BATON_CHAT_GEMMA, NULL, c_cases[i].user, c_cases[i].len, &p), 0);
        assert_int_equal(p.len, strlen(g_head) + c_cases[i].want_len + strlen(g_tail));
        assert_memory_equal(p.text + strlen(g_head), c_cases[i].want, c_cases[i].want_len);
        baton_chat_prompt_free(&p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layouts),      cmocka_unit_test(test_limit),
        cmocka_unit_test(test_detect),       cmocka_unit_test(test_template_for),
        cmocka_unit_test(test_ids_qwen2),    cmocka_unit_test(test_ids_llama3),
        cmocka_unit_test(test_ids_spm),      cmocka_unit_test(test_ids_gemma),
        cmocka_unit_test(test_spans),
        cmocka_unit_test(test_trim),         cmocka_unit_test(test_next_layouts),
        cmocka_unit_test(test_reference_mistral), cmocka_unit_test(test_reference_gemma),
        cmocka_unit_test(test_reply),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
