/* The coordinator's KV cache size (baton_run_kv_cache_bytes): hand-computed
 * sizes, the 64-byte alignment of each tensor, and every overflow of the
 * 64-bit product; a prompt past the tokenizer's limit is said in bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "baton/status.h"
#include "model/run.h"
#include "model/tokenizer.h"

static void kv_bytes_stories260k(void **state)
{
    uint64_t b = 0;

    (void)state;
    /* stories260K: head_dim 8, 4 kv heads, 5 layers; K and V of
     * 8 * 512 * 4 floats = 65536 bytes each, per layer */
    assert_int_equal(baton_run_kv_cache_bytes(8, 4, 512, 5, 4, &b), 0);
    assert_int_equal(b, 655360);
    /* --kv-type f16: 2 bytes an element, half of it */
    assert_int_equal(baton_run_kv_cache_bytes(8, 4, 512, 5, 2, &b), 0);
    assert_int_equal(b, 327680);
    /* --ctx 4000000000: 2 * 5 * (8 * 4 * 4 * 4e9) = 5.12e12 bytes (4.7 TiB) */
    assert_int_equal(baton_run_kv_cache_bytes(8, 4, 4000000000u, 5, 4, &b), 0);
    assert_int_equal(b, 5120000000000ull);
    /* split 1,1: stage 1 holds 3 layers */
    assert_int_equal(baton_run_kv_cache_bytes(8, 4, 4000000000u, 3, 4, &b), 0);
    assert_int_equal(b, 3072000000000ull);
}

static void kv_bytes_aligned(void **state)
{
    uint64_t b = 0;

    (void)state;
    /* 1 * 3 * 1 floats = 12 bytes, each tensor padded to 64 */
    assert_int_equal(baton_run_kv_cache_bytes(1, 1, 3, 2, 4, &b), 0);
    assert_int_equal(b, 4 * 64);
    /* 17 floats = 68 bytes, padded to 128 */
    assert_int_equal(baton_run_kv_cache_bytes(17, 1, 1, 1, 4, &b), 0);
    assert_int_equal(b, 2 * 128);
    /* a stage without layers still gets one 64-byte buffer */
    assert_int_equal(baton_run_kv_cache_bytes(8, 4, 512, 0, 4, &b), 0);
    assert_int_equal(b, 64);
}

static void kv_bytes_overflow(void **state)
{
    uint64_t b = 12345;

    (void)state;
    /* head_dim * n_head_kv * 4 * n_ctx = 2^34 * (2^32 - 1) > 2^64 */
    assert_int_equal(baton_run_kv_cache_bytes(65536, 65536, UINT32_MAX, 1, 4, &b),
                     BATON_E_OVERFLOW);
    /* head_dim * n_head_kv = (2^32 - 1)^2: times 4 already past 2^64 */
    assert_int_equal(baton_run_kv_cache_bytes(UINT32_MAX, UINT32_MAX, 1, 1, 4, &b),
                     BATON_E_OVERFLOW);
    /* one tensor of 2^62 bytes fits; K and V of one layer (2^63) fit; two
     * layers (2^64) do not */
    assert_int_equal(baton_run_kv_cache_bytes(32768, 32768, 1u << 30, 1, 4, &b), 0);
    assert_int_equal(b, 1ull << 63);
    b = 12345;
    assert_int_equal(baton_run_kv_cache_bytes(32768, 32768, 1u << 30, 2, 4, &b), BATON_E_OVERFLOW);
    /* 4 * (2^62 - 1) = 2^64 - 4 fits, but not once padded to 64 bytes:
     * 2^62 - 1 = 3 * 715827883 * 2147483647 */
    assert_int_equal(baton_run_kv_cache_bytes(3, 715827883u, 2147483647u, 1, 4, &b),
                     BATON_E_OVERFLOW);
    /* as many layers as a model can have (2^16) of a 2^47-byte tensor */
    assert_int_equal(baton_run_kv_cache_bytes(8192, 4096, 1u << 20, 65536, 4, &b),
                     BATON_E_OVERFLOW);
    assert_int_equal(b, 12345); /* unchanged on failure */
}

/* baton_run with a prompt of n bytes ('a') on stories260K (skipped without
 * MODEL_DIR, failed under CI=true): its exit code, and what it wrote to
 * cfg.log in *log (free it). */
static int run_prompt_of(size_t n, char **log)
{
    const char *dir = getenv("MODEL_DIR"), *ci = getenv("CI");
    char path[4096];
    struct baton_run_config cfg;
    size_t log_len = 0, out_len = 0;
    char *prompt = malloc(n + 1), *out = NULL;
    FILE *f;
    int rc;

    snprintf(path, sizeof path, "%s/stories260K.gguf", dir ? dir : ".");
    f = fopen(path, "rb");
    if (f == NULL) {
        if (ci != NULL && strcmp(ci, "true") == 0)
            fail_msg("model %s not found (MODEL_DIR) and CI=true", path);
        free(prompt);
        print_message("skipping: model %s not found (set MODEL_DIR)\n", path);
        skip();
    }
    fclose(f);
    assert_non_null(prompt);
    memset(prompt, 'a', n);
    prompt[n] = '\0';
    baton_run_config_default(&cfg);
    cfg.prog = "baton run";
    cfg.model_path = path;
    cfg.prompt = prompt;
    cfg.n_predict = 1;
    cfg.quiet = 1;
    cfg.log = open_memstream(log, &log_len);
    cfg.out = open_memstream(&out, &out_len);
    assert_non_null(cfg.log);
    assert_non_null(cfg.out);
    rc = baton_run(&cfg);
    fclose(cfg.log);
    fclose(cfg.out);
    free(out);
    free(prompt);
    return rc;
}

/* One byte past BATON_TOKENIZER_MAX_TEXT_BYTES (1 MiB): a usage error that
 * names the size and the limit (it was "cannot tokenize the prompt: limit
 * exceeded", exit 1); at the limit the tokenizer takes it, and the context
 * is what refuses it. */
static void prompt_over_tokenizer_limit(void **state)
{
    char *log = NULL;

    (void)state;
    assert_int_equal(BATON_TOKENIZER_MAX_TEXT_BYTES, 1048576);
    assert_int_equal(run_prompt_of(1048577, &log), 2);
    assert_non_null(strstr(log, "baton run: the prompt is 1048577 bytes; the tokenizer takes at "
                                "most 1048576 bytes (1 MiB)\n"));
    free(log);
    log = NULL;
    assert_int_equal(run_prompt_of(1048576, &log), 2);
    assert_null(strstr(log, "the tokenizer takes"));
    assert_non_null(strstr(log, "exceeds the default --ctx 512"));
    free(log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kv_bytes_stories260k),
        cmocka_unit_test(kv_bytes_aligned),
        cmocka_unit_test(kv_bytes_overflow),
        cmocka_unit_test(prompt_over_tokenizer_limit),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
