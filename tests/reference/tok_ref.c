/* tok_ref: llama.cpp's token ids for test texts, with a vocabulary's
 * tokenizer. Our own program on llama.cpp's public API (llama.h) of the
 * build that make-fixtures.sh names; nothing of llama.cpp enters baton.
 *
 *   tok_ref VOCAB.gguf TEXTS
 *
 * VOCAB is a GGUF with a tokenizer (a vocab-only one is enough; loaded with
 * vocab_only). TEXTS holds texts each followed by "\n__ggml_vocab_test__\n",
 * the format of llama.cpp's ggml-vocab-*.gguf.inp files. Prints to stdout:
 *   add_bos B              llama_vocab_get_add_bos (0 or 1)
 *   ids ID ...             one line per text: llama_tokenize without BOS and
 *                          without parsing special-token text
 * Exit status 0, 1 on a failure (message on stderr), 2 on usage. */
#define _GNU_SOURCE /* memmem */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

#define SEP "\n__ggml_vocab_test__\n"

static void quiet_log(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR)
        fputs(text, stderr);
}

/* The whole file, NUL-terminated; NULL on a failure. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;

    if (f == NULL)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)n + 1)) != NULL) {
        if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
            free(buf);
            buf = NULL;
        } else {
            buf[n] = '\0';
            *len = (size_t)n;
        }
    }
    fclose(f);
    return buf;
}

int main(int argc, char **argv)
{
    struct llama_model *model = NULL;
    char *texts = NULL;
    llama_token *ids = NULL;
    size_t len = 0;
    int ret = 1;

    if (argc != 3) {
        fprintf(stderr, "usage: tok_ref VOCAB.gguf TEXTS\n");
        return 2;
    }
    llama_log_set(quiet_log, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    model = llama_model_load_from_file(argv[1], mp);
    if (model == NULL) {
        fprintf(stderr, "tok_ref: cannot load %s\n", argv[1]);
        goto out;
    }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    if ((texts = slurp(argv[2], &len)) == NULL) {
        fprintf(stderr, "tok_ref: cannot read %s\n", argv[2]);
        goto out;
    }
    printf("add_bos %d\n", llama_vocab_get_add_bos(vocab) ? 1 : 0);
    const char *t = texts, *end = texts + len;
    while (t < end) {
        const char *sep = memmem(t, (size_t)(end - t), SEP, strlen(SEP));
        if (sep == NULL) {
            fprintf(stderr, "tok_ref: %s: a text without the separator after it\n", argv[2]);
            goto out;
        }
        int32_t n_text = (int32_t)(sep - t), cap = n_text + 16;
        free(ids);
        if ((ids = malloc((size_t)cap * sizeof *ids)) == NULL)
            goto out;
        int32_t n = llama_tokenize(vocab, t, n_text, ids, cap, false, false);
        if (n < 0) {
            fprintf(stderr, "tok_ref: llama_tokenize failed (%d)\n", n);
            goto out;
        }
        fputs("ids", stdout);
        for (int32_t i = 0; i < n; i++)
            printf(" %d", ids[i]);
        putchar('\n');
        t = sep + strlen(SEP);
    }
    ret = 0;
out:
    free(ids);
    free(texts);
    llama_model_free(model);
    llama_backend_free();
    return ret;
}
