/* chat_ref: llama.cpp's built-in chat layouts (llama_chat_apply_template,
 * llama.h, no Jinja) of fixed messages, for the layouts baton writes as
 * llama.cpp does. Our own program on llama.cpp's public API of the build
 * that make-fixtures.sh names; nothing of llama.cpp enters baton.
 *
 *   chat_ref [--spaced] NAME...
 *
 * NAME: a template name llama.cpp knows ("mistral-v7-tekken", ...). The
 * messages (tests/unit/test_model_chat.c uses the same): system "Be
 * brief.", user " What is 2+2? ", assistant "Four.", user "And 3+3?";
 * with --spaced, for layouts that trim every message, each with whitespace
 * around it: system " \tBe brief.\n", user " \tWhat is 2+2?\r\n",
 * assistant "\n Four.\f", user "\x1f And 3+3?\xc2\xa0\v" (0x1f and U+00A0
 * are whitespace to Python's str.strip() but not to C's isspace()).
 * Prints to stdout, the texts as lowercase hex:
 *   template NAME
 *   first0 HEX      the first user message alone, the assistant's turn opened
 *   first1 HEX      the system message and the first user message, the same
 *   conv0 HEX       first user, assistant, second user, assistant opened
 *   conv1 HEX       the same after the system message
 * Exit status 0, 1 on a failure (message on stderr), 2 on usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

static int show(const char *label, const char *name, const struct llama_chat_message *msgs,
                size_t n)
{
    char buf[4096];
    int32_t len = llama_chat_apply_template(name, msgs, n, true, buf, (int32_t)sizeof buf);

    if (len < 0 || len > (int32_t)sizeof buf) {
        fprintf(stderr, "chat_ref: llama_chat_apply_template('%s') failed (%d)\n", name, len);
        return 1;
    }
    printf("%s ", label);
    for (int32_t i = 0; i < len; i++)
        printf("%02x", (unsigned char)buf[i]);
    putchar('\n');
    return 0;
}

int main(int argc, char **argv)
{
    const int spaced = argc > 1 && strcmp(argv[1], "--spaced") == 0;
    const struct llama_chat_message sys = {"system", spaced ? " \tBe brief.\n" : "Be brief."};
    const struct llama_chat_message u1 = {"user",
                                          spaced ? " \tWhat is 2+2?\r\n" : " What is 2+2? "};
    const struct llama_chat_message r = {"assistant", spaced ? "\n Four.\f" : "Four."};
    const struct llama_chat_message u2 = {"user",
                                          spaced ? "\x1f And 3+3?\xc2\xa0\v" : "And 3+3?"};

    if (argc < 2 + spaced) {
        fprintf(stderr, "usage: chat_ref [--spaced] NAME...\n");
        return 2;
    }
    for (int i = 1 + spaced; i < argc; i++) {
        const struct llama_chat_message first0[] = {u1}, first1[] = {sys, u1};
        const struct llama_chat_message conv0[] = {u1, r, u2}, conv1[] = {sys, u1, r, u2};

        printf("template %s\n", argv[i]);
        if (show("first0", argv[i], first0, 1) || show("first1", argv[i], first1, 2) ||
            show("conv0", argv[i], conv0, 3) || show("conv1", argv[i], conv1, 4))
            return 1;
    }
    return 0;
}
