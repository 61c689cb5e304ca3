/* logits_ref: the reference logits and greedy ids of llama.cpp for a GGUF.
 * Our own program on llama.cpp's public API (llama.h) of the build that
 * make-fixtures.sh names; nothing of llama.cpp enters baton.
 *
 *   logits_ref MODEL N_GEN N_STEPS ID [ID ...]
 *
 * Decodes the prompt ids (one llama_decode of all of them, logits of the
 * last position only; no BOS is added: the ids are the whole prompt), then
 * generates N_GEN tokens greedily (argmax, the lowest id on a tie), one
 * llama_decode per token, on one thread, flash attention off, a context of
 * the prompt + N_GEN positions and an F32 KV cache like baton's (llama.cpp's
 * default F16 cache rounds K and V to binary16, and the 8-bit activation
 * quantization of the next layer's quantized matrix products amplifies
 * that: max logit differences of ~0.04 on the K-quant test models instead
 * of ~5e-6; tests/reference/README.md).
 * Prints to stdout:
 *   n_vocab V
 *   prompt ID ...
 *   greedy ID ...                   (N_GEN ids)
 *   logits S X_0 ... X_{V-1}        for steps S = 0 .. N_STEPS-1 (step 0: after
 *                                   the prompt, step s: after the s-th
 *                                   generated token), each %.6g (6
 *                                   significant digits: far below any
 *                                   tolerance the tests state)
 * Exit status 0, 1 on a failure (message on stderr), 2 on usage. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

static void quiet_log(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR)
        fputs(text, stderr);
}

static int parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    long v = strtol(s, &end, 10);

    if (*s == '\0' || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    long n_gen, n_steps, v;
    int n_prompt, n_vocab, ret = 1;
    llama_token *toks = NULL;
    struct llama_model *model = NULL;
    struct llama_context *ctx = NULL;

    if (argc < 5 || parse_int(argv[2], 1, 4096, &n_gen) != 0 ||
        parse_int(argv[3], 1, 4096, &n_steps) != 0 || n_steps > n_gen) {
        fprintf(stderr, "usage: logits_ref MODEL N_GEN N_STEPS ID [ID ...] (N_STEPS <= N_GEN)\n");
        return 2;
    }
    n_prompt = argc - 4;
    toks = calloc((size_t)(n_prompt + n_gen), sizeof *toks);
    if (!toks)
        return 1;
    for (int i = 0; i < n_prompt; i++) {
        if (parse_int(argv[4 + i], 0, INT32_MAX, &v) != 0) {
            fprintf(stderr, "logits_ref: bad token id %s\n", argv[4 + i]);
            free(toks);
            return 2;
        }
        toks[i] = (llama_token)v;
    }
    llama_log_set(quiet_log, NULL);
    llama_backend_init();
    {
        struct llama_model_params mp = llama_model_default_params();

        model = llama_model_load_from_file(argv[1], mp);
    }
    if (!model) {
        fprintf(stderr, "logits_ref: cannot load %s\n", argv[1]);
        goto out;
    }
    n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    for (int i = 0; i < n_prompt; i++) {
        if (toks[i] >= n_vocab) {
            fprintf(stderr, "logits_ref: token id %d >= n_vocab %d\n", toks[i], n_vocab);
            goto out;
        }
    }
    {
        struct llama_context_params cp = llama_context_default_params();

        cp.n_ctx = (uint32_t)(n_prompt + n_gen);
        cp.n_batch = cp.n_ubatch = (uint32_t)n_prompt;
        cp.n_threads = cp.n_threads_batch = 1;
        cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
        cp.no_perf = 1;
        cp.type_k = GGML_TYPE_F32;
        cp.type_v = GGML_TYPE_F32;
        ctx = llama_init_from_model(model, cp);
    }
    if (!ctx) {
        fprintf(stderr, "logits_ref: cannot create a context for %s\n", argv[1]);
        goto out;
    }
    printf("n_vocab %d\nprompt", n_vocab);
    for (int i = 0; i < n_prompt; i++)
        printf(" %d", toks[i]);
    printf("\n");
    {
        llama_token *cur = toks;
        int n_cur = n_prompt;
        char **rows = calloc((size_t)n_steps, sizeof *rows);
        size_t row_bytes = (size_t)n_vocab * 16 + 32;

        if (!rows)
            goto out;
        for (long g = 0; g < n_gen; g++) {
            const float *lg;
            int best = 0;

            if (llama_decode(ctx, llama_batch_get_one(cur, n_cur)) != 0) {
                fprintf(stderr, "logits_ref: llama_decode failed at step %ld\n", g);
                goto rows_out;
            }
            lg = llama_get_logits_ith(ctx, -1);
            for (int i = 1; i < n_vocab; i++)
                if (lg[i] > lg[best])
                    best = i;
            if (g < n_steps) {
                size_t off;

                rows[g] = malloc(row_bytes);
                if (!rows[g])
                    goto rows_out;
                off = (size_t)snprintf(rows[g], row_bytes, "logits %ld", g);
                for (int i = 0; i < n_vocab; i++)
                    off += (size_t)snprintf(rows[g] + off, row_bytes - off, " %.6g",
                                            (double)lg[i]);
            }
            toks[n_prompt + g] = best;
            cur = &toks[n_prompt + g];
            n_cur = 1;
        }
        printf("greedy");
        for (long g = 0; g < n_gen; g++)
            printf(" %d", toks[n_prompt + g]);
        printf("\n");
        for (long s = 0; s < n_steps; s++)
            printf("%s\n", rows[s]);
        ret = fflush(stdout) == 0 ? 0 : 1;
rows_out:
        for (long s = 0; s < n_steps; s++)
            free(rows[s]);
        free(rows);
    }
out:
    if (ctx)
        llama_free(ctx);
    if (model)
        llama_model_free(model);
    llama_backend_free();
    free(toks);
    return ret;
}
