/* `baton tokenize --model FILE [--no-bos] [-f FILE | [--] TEXT]`: prints
 * the token ids of a text on one line, as llama.cpp's llama-tokenize does
 * with its ids-only output (here space-separated). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/status.h"
#include "cli/cli.h"
#include "model/chat.h"
#include "model/gguf.h"
#include "model/tokenizer.h"

#define PROG "baton tokenize"

static void usage(FILE *f)
{
    fputs("usage: baton tokenize --model FILE [--no-bos] [--no-parse-special]\n"
          "                      [--chat [--system TEXT] [--chat-template NAME]]\n"
          "                      [-f FILE | [--] TEXT]\n"
          "\n"
          "Tokenizes TEXT, or the bytes of FILE, with the tokenizer of a GGUF model\n"
          "(SentencePiece 'llama' or byte-level BPE 'gpt2' with a pre-tokenizer such as\n"
          "'llama-bpe', 'qwen2', 'tekken', 'smollm' or 'gpt-2'; a vocab-only GGUF is\n"
          "enough) and prints the token ids on one line, separated by spaces, as\n"
          "llama.cpp's llama-tokenize does.\n"
          "\n"
          "  -m, --model FILE      the GGUF file whose tokenizer is used\n"
          "  -f, --file FILE       read the text from FILE byte for byte (a final newline\n"
          "                        is part of the text); '-' reads standard input\n"
          "  --no-bos              no BOS first, even if the model adds one\n"
          "                        (tokenizer.ggml.add_bos_token)\n"
          "  --no-parse-special    take the text of control tokens ('<|eot_id|>', '<s>')\n"
          "                        as plain text; by default it is that token\n"
          "  --chat                TEXT is a user's message: tokenize it laid out with\n"
          "                        the model's chat template, as `baton run --chat` does\n"
          "                        (only the template's markers become control tokens;\n"
          "                        not with --no-parse-special)\n"
          "  --system TEXT         with --chat: the system prompt (default none)\n"
          "  --chat-template NAME  with --chat: chatml, llama3, llama2, phi3, gemma,\n"
          "                        mistral-v3, mistral-v3-tekken, mistral-v7 or\n"
          "                        mistral-v7-tekken instead of the one\n"
          "                        tokenizer.chat_template is recognized as\n"
          "  --                    ends the options: a TEXT may then start with '-'\n"
          "  -h, --help            this help\n"
          "\n"
          "Exit status: 0 ok, 1 the model or file cannot be read or tokenized, 2 usage\n"
          "(also --chat on a model whose template baton cannot lay out: the message says\n"
          "what to give --chat-template).\n",
          f);
}

/* Reads all of path ("-": stdin) into *buf; at most
 * BATON_TOKENIZER_MAX_TEXT_BYTES. Returns 0, or the exit status after
 * printing why. */
static int read_text(const char *path, char **buf, size_t *len)
{
    int is_stdin = strcmp(path, "-") == 0;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    size_t cap = (size_t)BATON_TOKENIZER_MAX_TEXT_BYTES + 1, n = 0, got;
    char *b;

    *buf = NULL;
    *len = 0;
    if (f == NULL) {
        fprintf(stderr, "%s: -f %s: %s\n", PROG, path, strerror(errno));
        return 1;
    }
    b = malloc(cap);
    if (b == NULL) {
        fprintf(stderr, "%s: -f %s: out of memory\n", PROG, path);
        if (!is_stdin)
            fclose(f);
        return 1;
    }
    while (n < cap && (got = fread(b + n, 1, cap - n, f)) > 0)
        n += got;
    int bad = ferror(f);
    int saved = errno;
    if (!is_stdin)
        fclose(f);
    if (bad) {
        fprintf(stderr, "%s: -f %s: %s\n", PROG, path, strerror(saved));
        free(b);
        return 1;
    }
    if (n > BATON_TOKENIZER_MAX_TEXT_BYTES) {
        fprintf(stderr, "%s: -f %s: longer than %u bytes (the tokenizer's limit)\n", PROG, path,
                BATON_TOKENIZER_MAX_TEXT_BYTES);
        free(b);
        return 1;
    }
    *buf = b;
    *len = n;
    return 0;
}

/* The text's ids: with a chat layout cp, its markers alone parsed. */
static int tokenize(const struct baton_tokenizer *tok, const struct baton_chat_prompt *cp,
                    const char *text, size_t len, unsigned flags, int32_t *ids, size_t max_ids,
                    size_t *n)
{
    if (cp != NULL)
        return baton_tokenize_spans(tok, text, len, flags & BATON_TOKENIZE_ADD_BOS, cp->spans,
                                    cp->n_spans, ids, max_ids, n);
    return baton_tokenize_ex(tok, text, len, flags, ids, max_ids, n);
}

int baton_cmd_tokenize(int argc, char **argv)
{
    enum { O_NO_BOS = 256, O_NO_SPECIAL, O_CHAT, O_SYSTEM, O_CHAT_TEMPLATE };
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},      {"file", required_argument, 0, 'f'},
        {"no-bos", no_argument, 0, O_NO_BOS},      {"no-parse-special", no_argument, 0, O_NO_SPECIAL},
        {"chat", no_argument, 0, O_CHAT},          {"system", required_argument, 0, O_SYSTEM},
        {"chat-template", required_argument, 0, O_CHAT_TEMPLATE},
        {"help", no_argument, 0, 'h'},             {0, 0, 0, 0}};
    const char *model = NULL, *file = NULL, *system = NULL, *chat_name = NULL;
    int no_bos = 0, no_special = 0, chat = 0, c, rc = 1;
    struct baton_chat_prompt cp = {0};
    struct baton_gguf *g = NULL;
    struct baton_tokenizer *tok = NULL;
    char *text_buf = NULL, err[512] = "";
    const char *text;
    size_t len, n = 0;
    int32_t *ids = NULL;

    optind = 1;
    while ((c = getopt_long(argc, argv, "m:f:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 'f': file = optarg; break;
        case O_NO_BOS: no_bos = 1; break;
        case O_NO_SPECIAL: no_special = 1; break;
        case O_CHAT: chat = 1; break;
        case O_SYSTEM: system = optarg; break;
        case O_CHAT_TEMPLATE: chat_name = optarg; break;
        case 'h': usage(stdout); return 0;
        default:
            /* getopt said which; a text like "-x" reads as options too */
            fprintf(stderr, "(a TEXT that starts with '-' goes after --: baton tokenize -m FILE "
                            "-- TEXT; see `baton tokenize --help`)\n");
            return 2;
        }
    }
    if (model == NULL) {
        fprintf(stderr, "%s: --model FILE is required (see `baton tokenize --help`)\n", PROG);
        return 2;
    }
    if ((system || chat_name) && !chat) {
        fprintf(stderr, "%s: %s needs --chat\n", PROG, system ? "--system" : "--chat-template");
        return 2;
    }
    if (chat && no_special) {
        fprintf(stderr, "%s: --chat parses the template's markers only: not with "
                        "--no-parse-special\n",
                PROG);
        return 2;
    }
    if (chat_name && baton_chat_from_name(chat_name) == BATON_CHAT_UNKNOWN) {
        char shown[64];

        fprintf(stderr, "%s: --chat-template '%s' is not " BATON_CHAT_NAMES "\n", PROG,
                baton_gguf_escape(shown, sizeof shown, chat_name, strlen(chat_name)));
        return 2;
    }
    if (file != NULL && optind < argc) {
        fprintf(stderr, "%s: give either -f FILE or TEXT, not both ('%s')\n", PROG, argv[optind]);
        return 2;
    }
    if (file == NULL && optind >= argc) {
        fprintf(stderr, "%s: no text: give TEXT or -f FILE (see `baton tokenize --help`)\n", PROG);
        return 2;
    }
    if (optind + 1 < argc) {
        fprintf(stderr, "%s: unexpected argument '%s' (quote a TEXT with spaces)\n", PROG,
                argv[optind + 1]);
        return 2;
    }

    if (baton_gguf_open(model, &g, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", PROG, err);
        goto out;
    }
    if (baton_tokenizer_from_gguf(g, &tok, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s: %s\n", PROG, model, err);
        goto out;
    }
    if (baton_tokenizer_pre_warning(tok) != NULL)
        fprintf(stderr, "%s: warning: %s: %s\n", PROG, model, baton_tokenizer_pre_warning(tok));
    if (file != NULL) {
        if ((rc = read_text(file, &text_buf, &len)) != 0)
            goto out;
        rc = 1;
        text = text_buf;
    } else {
        text = argv[optind];
        len = strlen(text);
        if (len > BATON_TOKENIZER_MAX_TEXT_BYTES) {
            fprintf(stderr, "%s: TEXT is longer than %u bytes (the tokenizer's limit)\n", PROG,
                    BATON_TOKENIZER_MAX_TEXT_BYTES);
            goto out;
        }
    }

    if (chat) {
        enum baton_chat_template t;
        int cs = baton_chat_template_for(g, chat_name, tok, system != NULL, &t, err, sizeof err);

        if (cs != 0) { /* what --chat-template must change: a usage error */
            fprintf(stderr, "%s: %s: %s\n", PROG, model, err);
            rc = 2;
            goto out;
        }
        cs = baton_chat_format(t, system, text, len, &cp);
        if (cs == BATON_E_LIMIT)
            snprintf(err, sizeof err, "the message laid out as %s is longer than %u bytes (the "
                                      "tokenizer's limit)",
                     baton_chat_name(t), BATON_TOKENIZER_MAX_TEXT_BYTES);
        else if (cs == BATON_E_NOMEM)
            snprintf(err, sizeof err, "out of memory");
        if (cs != 0) {
            fprintf(stderr, "%s: %s: %s\n", PROG, model, err);
            goto out;
        }
        text = cp.text;
        len = cp.len;
    }
    unsigned flags = (!no_bos && baton_tokenizer_add_bos(tok) ? BATON_TOKENIZE_ADD_BOS : 0u) |
                     (no_special ? 0u : BATON_TOKENIZE_PARSE_SPECIAL);
    int st = tokenize(tok, chat ? &cp : NULL, text, len, flags, NULL, 0, &n);
    if (st == BATON_E_LIMIT && n > 0) {
        ids = malloc(n * sizeof *ids);
        if (ids == NULL) {
            fprintf(stderr, "%s: out of memory for %zu ids\n", PROG, n);
            goto out;
        }
        st = tokenize(tok, chat ? &cp : NULL, text, len, flags, ids, n, &n);
    }
    if (st != 0) {
        fprintf(stderr, "%s: %s: cannot tokenize: %s\n", PROG, file ? file : "TEXT",
                baton_status_str(st));
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        printf(i ? " %d" : "%d", ids[i]);
    putchar('\n');
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "%s: standard output: cannot write: %s\n", PROG,
                errno ? strerror(errno) : "write error");
        goto out;
    }
    rc = 0;
out:
    free(ids);
    free(text_buf);
    baton_chat_prompt_free(&cp);
    baton_tokenizer_free(tok);
    baton_gguf_close(g);
    return rc;
}
