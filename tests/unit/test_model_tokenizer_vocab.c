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
 * counts are printed.
 *
 * Then the pre-tokenizers no .out file covers, against llama.cpp's ids in
 * tests/reference/fixtures/tok-*.txt (make-fixtures.sh, tok_ref.c): a
 * vocabulary of $MODEL_DIR/vocab with its tokenizer.ggml.pre set to a name
 * (or removed), llama.cpp's add_bos for it, and its ids for every text of a
 * test file. tok-names.txt holds every name baton knows. */
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
#include "model/tokenizer_pre.h"

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

/* Tokenizes text[0, len) without BOS or special parsing and compares the
 * ids with the integers of ids_text (up to its NUL); prints a mismatch
 * under label and case n. 1 if they match. */
static int match_case(const struct baton_tokenizer *tok, const char *text, size_t len,
                      const char *ids_text, const char *label, size_t n)
{
    static int32_t want[MAX_IDS], ids[MAX_IDS];
    size_t n_want = 0, n_got = 0;
    char *endp;

    for (const char *q = ids_text;; q = endp) {
        long v = strtol(q, &endp, 10);
        if (endp == q)
            break;
        assert_true(n_want < MAX_IDS);
        want[n_want++] = (int32_t)v;
    }
    int st = baton_tokenize_ex(tok, text, len, 0, ids, MAX_IDS, &n_got);
    if (st == 0 && n_got == n_want && memcmp(ids, want, n_got * sizeof *ids) == 0)
        return 1;
    print_message("%s case %zu (%zu bytes) '%.*s':\n  want", label, n, len, (int)len, text);
    for (size_t i = 0; i < n_want; i++)
        print_message(" %d", want[i]);
    print_message("\n  got ");
    for (size_t i = 0; i < n_got && i < MAX_IDS; i++)
        print_message(" %d", ids[i]);
    print_message(" (status %d)\n", st);
    return 0;
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

    size_t pass = 0, n = 0;
    const char *text = inp, *line = outp;
    const char *inp_end = inp + inp_len, *out_end = outp + out_len;
    while (text < inp_end) {
        const char *sep = memmem(text, (size_t)(inp_end - text), SEP, strlen(SEP));
        assert_non_null(sep); /* every text is followed by a separator */
        const char *eol = memchr(line, '\n', (size_t)(out_end - line));
        assert_true(line < out_end && eol != NULL);

        static char ids_text[8 * MAX_IDS];
        assert_true((size_t)(eol - line) < sizeof ids_text);
        memcpy(ids_text, line, (size_t)(eol - line));
        ids_text[eol - line] = '\0';
        pass += (size_t)match_case(tok, text, (size_t)(sep - text), ids_text, name, n);
        n++;
        text = sep + strlen(SEP);
        line = eol + 1;
    }
    assert_true(line == out_end); /* as many expected lines as texts */
    print_message("ggml-vocab-%s: %zu/%zu cases match\n", name, pass, n);
    *n_cases = n;
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

/* A copy of vocabulary g (no tensors) in memory with tokenizer.ggml.pre set
 * to pre (NULL: removed); the caller frees *buf after closing the copy. */
static struct baton_gguf *with_pre(const struct baton_gguf *g, const char *pre, char **buf)
{
    size_t cap = (size_t)baton_gguf_file_size(g) + 4096, n = 0;
    uint64_t n_kv = 0;
    char *b = malloc(cap);
    assert_non_null(b);
    assert_int_equal(baton_gguf_n_tensors(g), 0);
#define PUT(p, len)                                                                                \
    do {                                                                                           \
        assert_true(n + (len) <= cap);                                                             \
        memcpy(b + n, (p), (len));                                                                 \
        n += (len);                                                                                \
    } while (0)
#define PUT_LE(v, bytes)                                                                           \
    do {                                                                                           \
        uint64_t v_ = (v);                                                                         \
        for (int i_ = 0; i_ < (bytes); i_++) {                                                     \
            char c_ = (char)(v_ >> (8 * i_));                                                      \
            PUT(&c_, 1);                                                                           \
        }                                                                                          \
    } while (0)
    PUT("GGUF", 4);
    PUT_LE(3, 4);
    PUT_LE(0, 8);
    size_t n_kv_at = n;
    PUT_LE(0, 8);
    for (uint64_t i = 0; i < baton_gguf_n_kv(g); i++) {
        const struct baton_gguf_kv *kv = baton_gguf_kv_at(g, i);
        const char *key = baton_gguf_kv_key(kv);
        const void *raw;
        size_t len;
        if (strcmp(key, "tokenizer.ggml.pre") == 0)
            continue;
        assert_int_equal(baton_gguf_kv_raw(kv, &raw, &len), 0);
        PUT_LE(strlen(key), 8);
        PUT(key, strlen(key));
        PUT_LE(baton_gguf_kv_type(kv), 4);
        PUT(raw, len);
        n_kv++;
    }
    if (pre != NULL) {
        PUT_LE(strlen("tokenizer.ggml.pre"), 8);
        PUT("tokenizer.ggml.pre", strlen("tokenizer.ggml.pre"));
        PUT_LE(BATON_GGUF_STRING, 4);
        PUT_LE(strlen(pre), 8);
        PUT(pre, strlen(pre));
        n_kv++;
    }
    for (int i = 0; i < 8; i++)
        b[n_kv_at + (size_t)i] = (char)(n_kv >> (8 * i));
#undef PUT_LE
#undef PUT
    struct baton_gguf *copy = NULL;
    char err[256] = "";
    if (baton_gguf_open_buffer(b, n, "vocab copy", &copy, err, sizeof err) != 0)
        fail_msg("the vocabulary copy with pre '%s': %s", pre ? pre : "(none)", err);
    *buf = b;
    return copy;
}

/* The next line of *p (without its newline) at line, or NULL at the end. */
static char *next_line(char **p)
{
    char *line = *p, *eol;
    if (*line == '\0')
        return NULL;
    eol = strchr(line, '\n');
    if (eol != NULL) {
        *eol = '\0';
        *p = eol + 1;
    } else {
        *p = line + strlen(line);
    }
    return line;
}

/* Runs one fixture; returns how many pre blocks it held. Every name it
 * holds is marked in seen[] (indexed as baton_pretok_name). */
static size_t run_fixture(const char *fixture, int *seen, size_t n_names)
{
    char dirbuf[4096], path[4300], err[512] = "";
    const char *src = getenv("SRC_DIR"), *vdir = vocab_dir(dirbuf, sizeof dirbuf);
    size_t fix_len, texts_len = 0, blocks = 0;
    struct baton_gguf *g = NULL;

    assert_non_null(src);
    snprintf(path, sizeof path, "%s/tests/reference/fixtures/%s", src, fixture);
    char *fix = slurp(path, &fix_len), *p = fix, *line, *texts = NULL;
    assert_non_null(fix);
    while ((line = next_line(&p)) != NULL) {
        if (line[0] == '#')
            continue;
        if (strncmp(line, "vocab ", 6) == 0) {
            snprintf(path, sizeof path, "%s/../%s", vdir ? vdir : "(MODEL_DIR unset)", line + 6);
            if (vdir == NULL || baton_gguf_open(path, &g, err, sizeof err) != 0) {
                const char *ci = getenv("CI");
                if (ci != NULL && strcmp(ci, "true") == 0)
                    fail_msg("%s not usable (%s) and CI=true", path, err);
                print_message("skipping: %s not found (set MODEL_DIR) %s\n", path, err);
                skip();
            }
            continue;
        }
        if (strncmp(line, "texts ", 6) == 0) {
            if (strncmp(line + 6, "vocab/", 6) == 0)
                snprintf(path, sizeof path, "%s/%s", vdir, line + 12);
            else
                snprintf(path, sizeof path, "%s/tests/%s", src, line + 6);
            texts = slurp(path, &texts_len);
            assert_non_null(texts);
            continue;
        }
        assert_true(strncmp(line, "pre ", 4) == 0);
        assert_non_null(g);
        assert_non_null(texts);
        const char *name = line + 4;
        int none = strcmp(name, "-") == 0;
        for (size_t i = 0; i < n_names; i++)
            if (strcmp(baton_pretok_name(i), name) == 0)
                seen[i] = 1;
        char *buf;
        struct baton_gguf *copy = with_pre(g, none ? NULL : name, &buf);
        struct baton_tokenizer *tok = NULL;
        if (baton_tokenizer_from_gguf(copy, &tok, err, sizeof err) != 0)
            fail_msg("%s: pre '%s': %s", fixture, name, err);
        line = next_line(&p);
        assert_non_null(line);
        int want_bos = -1;
        assert_int_equal(sscanf(line, "add_bos %d", &want_bos), 1);
        if (baton_tokenizer_add_bos(tok) != want_bos)
            fail_msg("%s: pre '%s': add_bos %d, llama.cpp's %d", fixture, name,
                     baton_tokenizer_add_bos(tok), want_bos);
        assert_true(none == (baton_tokenizer_pre_warning(tok) != NULL));
        size_t n = 0, pass = 0;
        for (const char *t = texts, *end = texts + texts_len; t < end; n++) {
            const char *sep = memmem(t, (size_t)(end - t), SEP, strlen(SEP));
            assert_non_null(sep);
            line = next_line(&p);
            assert_non_null(line);
            assert_true(strncmp(line, "ids", 3) == 0);
            pass += (size_t)match_case(tok, t, (size_t)(sep - t), line + 3, name, n);
            t = sep + strlen(SEP);
        }
        print_message("%s: pre '%s': %zu/%zu texts match\n", fixture, name, pass, n);
        assert_true(n > 0);
        assert_int_equal(pass, n);
        baton_tokenizer_free(tok);
        baton_gguf_close(copy);
        free(buf);
        blocks++;
    }
    free(texts);
    free(fix);
    baton_gguf_close(g);
    return blocks;
}

static void test_reference_pretok(void **state)
{
    (void)state;
    size_t n_names = 0;
    while (baton_pretok_name(n_names) != NULL)
        n_names++;
    int *seen = calloc(n_names, sizeof *seen);
    assert_non_null(seen);
    /* every name (and none) on the probe texts, then every text of
     * llama.cpp's test files for the expressions and flags the .out files
     * of $MODEL_DIR/vocab do not cover */
    assert_int_equal(run_fixture("tok-names.txt", seen, n_names), n_names + 1);
    for (size_t i = 0; i < n_names; i++)
        if (!seen[i])
            fail_msg("pre-tokenizer '%s' is not in tok-names.txt (run make-fixtures.sh --only "
                     "tok)", baton_pretok_name(i));
    static const char *const more[] = {"tok-tekken.txt", "tok-dbrx.txt", "tok-smollm.txt",
                                       "tok-default.txt"};
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++)
        assert_int_equal(run_fixture(more[i], seen, n_names), 1);
    free(seen);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_spm), cmocka_unit_test(test_phi_3),
        cmocka_unit_test(test_llama_bpe), cmocka_unit_test(test_qwen2),
        cmocka_unit_test(test_gpt_2), cmocka_unit_test(test_reference_pretok),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
