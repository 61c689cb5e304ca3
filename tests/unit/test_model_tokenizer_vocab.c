/* Tokenizers against llama.cpp's own expected output: the vocab-only GGUFs
 * of llama.cpp's models/ directory (ggml-vocab-<name>.gguf) with their
 * .gguf.inp (test texts) and .gguf.out (the ids llama.cpp's
 * test-tokenizer-0 expects, without BOS) files, in $MODEL_DIR/vocab.
 *
 * Format, as llama.cpp's convert_hf_to_gguf_update.py writes it and
 * test-tokenizer-0 reads it: .inp is every text followed by
 * "\n__ggml_vocab_test__\n" (so a text may be empty or end in newlines of
 * its own), .out one line per text, each id preceded by a space. Texts are
 * tokenized without BOS and without parsing special-token text (the texts
 * hold none). Every case of every file must match exactly; the per-file
 * counts are printed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/status.h"
#include "model/gguf.h"
#include "model/tokenizer.h"

#define SEP "\n__ggml_vocab_test__\n"
#define MAX_IDS 4096

/* Reads a whole file; NULL if it cannot be read. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    size_t got;
    while (buf != NULL && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *nb = realloc(buf, 2 * cap + 1);
            if (nb == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf != NULL) {
        buf[n] = '\0';
        *len = n;
    }
    return buf;
}

static const char *vocab_dir(char *buf, size_t cap)
{
    const char *dir = getenv("MODEL_DIR");
    if (dir == NULL)
        return NULL;
    snprintf(buf, cap, "%s/vocab", dir);
    return buf;
}

/* Runs every case of ggml-vocab-<name>.gguf; returns the cases that matched
 * and sets *n_cases. Prints each mismatch. */
static size_t run_vocab(const char *name, int want_bpe, size_t *n_cases)
{
    char dirbuf[4096], path[4200], err[512] = "";
    const char *dir = vocab_dir(dirbuf, sizeof dirbuf);
    struct baton_gguf *g = NULL;
    struct baton_tokenizer *tok = NULL;
    size_t inp_len = 0, out_len = 0;
    char *inp, *outp;

    snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf", dir ? dir : "(MODEL_DIR unset)", name);
    if (dir == NULL || baton_gguf_open(path, &g, err, sizeof err) != 0) {
        const char *ci = getenv("CI");
        if (ci != NULL && strcmp(ci, "true") == 0)
            fail_msg("%s not usable (%s) and CI=true", path, err);
        print_message("skipping: %s not found (set MODEL_DIR) %s\n", path, err);
        skip();
    }
    if (baton_tokenizer_from_gguf(g, &tok, err, sizeof err) != 0)
        fail_msg("%s: %s", path, err);
    assert_int_equal(baton_tokenizer_is_bpe(tok), want_bpe);

    snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf.inp", dir, name);
    inp = slurp(path, &inp_len);
    snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf.out", dir, name);
    outp = slurp(path, &out_len);
    assert_non_null(inp);
    assert_non_null(outp);

    int32_t *ids = malloc(MAX_IDS * sizeof *ids);
    assert_non_null(ids);
    size_t pass = 0, n = 0;
    const char *text = inp, *line = outp;
    const char *inp_end = inp + inp_len, *out_end = outp + out_len;
    while (text < inp_end) {
        const char *sep = memmem(text, (size_t)(inp_end - text), SEP, strlen(SEP));
        assert_non_null(sep); /* every text is followed by a separator */
        const char *eol = memchr(line, '\n', (size_t)(out_end - line));
        assert_true(line < out_end && eol != NULL);

        int32_t want[MAX_IDS];
        size_t n_want = 0;
        for (const char *q = line; q < eol;) {
            char *endp;
            long v = strtol(q, &endp, 10);
            if (endp == q)
                break;
            assert_true(n_want < MAX_IDS);
            want[n_want++] = (int32_t)v;
            q = endp;
        }

        size_t n_got = 0;
        int st = baton_tokenize_ex(tok, text, (size_t)(sep - text), 0, ids, MAX_IDS, &n_got);
        if (st == 0 && n_got == n_want && memcmp(ids, want, n_got * sizeof *ids) == 0) {
            pass++;
        } else {
            print_message("%s case %zu (%d bytes) '%.*s':\n  want", name, n, (int)(sep - text),
                          (int)(sep - text), text);
            for (size_t i = 0; i < n_want; i++)
                print_message(" %d", want[i]);
            print_message("\n  got ");
            for (size_t i = 0; i < n_got && i < MAX_IDS; i++)
                print_message(" %d", ids[i]);
            print_message(" (status %d)\n", st);
        }
        n++;
        text = sep + strlen(SEP);
        line = eol + 1;
    }
    assert_true(line == out_end); /* as many expected lines as texts */
    print_message("ggml-vocab-%s: %zu/%zu cases match\n", name, pass, n);
    *n_cases = n;
    free(ids);
    free(inp);
    free(outp);
    baton_tokenizer_free(tok);
    baton_gguf_close(g);
    return pass;
}

static void check_vocab(const char *name, int want_bpe)
{
    size_t n = 0;
    size_t pass = run_vocab(name, want_bpe, &n);
    assert_true(n > 0);
    assert_int_equal(pass, n);
}

static void test_llama_spm(void **state)
{
    (void)state;
    check_vocab("llama-spm", 0);
}

static void test_phi_3(void **state)
{
    (void)state;
    check_vocab("phi-3", 0);
}

static void test_llama_bpe(void **state)
{
    (void)state;
    check_vocab("llama-bpe", 1);
}

static void test_qwen2(void **state)
{
    (void)state;
    check_vocab("qwen2", 1);
}

static void test_gpt_2(void **state)
{
    (void)state;
    check_vocab("gpt-2", 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_spm), cmocka_unit_test(test_phi_3),
        cmocka_unit_test(test_llama_bpe), cmocka_unit_test(test_qwen2),
        cmocka_unit_test(test_gpt_2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
