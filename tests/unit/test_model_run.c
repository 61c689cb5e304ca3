/* The coordinator's KV cache size (baton_run_kv_cache_bytes): hand-computed
 * sizes, the 64-byte alignment of each tensor, and every overflow of the
 * 64-bit product. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "baton/status.h"
#include "model/run.h"

static void kv_bytes_stories260k(void **state)
{
    uint64_t b = 0;

    (void)state;
    /* stories260K: head_dim 8, 4 kv heads, 5 layers; K and V of
     * 8 * 512 * 4 floats = 65536 bytes each, per layer */
    assert_int_equal(baton_run_kv_cache_bytes(8, 4, 512, 5, &b), 0);
    assert_int_equal(b, 655360);
    /* --ctx 4000000000: 2 * 5 * (8 * 4 * 4 * 4e9) = 5.12e12 bytes (4.7 TiB) */
    assert_int_equal(baton_run_kv_cache_bytes(8, 4, 4000000000u, 5, &b), 0);
    assert_int_equal(b, 5120000000000ull);
    /* split 1,1: stage 1 holds 3 layers */
    assert_int_equal(baton_run_kv_cache_bytes(8, 4, 4000000000u, 3, &b), 0);
    assert_int_equal(b, 3072000000000ull);
}

static void kv_bytes_aligned(void **state)
{
    uint64_t b = 0;

    (void)state;
    /* 1 * 3 * 1 floats = 12 bytes, each tensor padded to 64 */
    assert_int_equal(baton_run_kv_cache_bytes(1, 1, 3, 2, &b), 0);
    assert_int_equal(b, 4 * 64);
    /* 17 floats = 68 bytes, padded to 128 */
    assert_int_equal(baton_run_kv_cache_bytes(17, 1, 1, 1, &b), 0);
    assert_int_equal(b, 2 * 128);
    /* a stage without layers still gets one 64-byte buffer */
    assert_int_equal(baton_run_kv_cache_bytes(8, 4, 512, 0, &b), 0);
    assert_int_equal(b, 64);
}

static void kv_bytes_overflow(void **state)
{
    uint64_t b = 12345;

    (void)state;
    /* head_dim * n_head_kv * 4 * n_ctx = 2^34 * (2^32 - 1) > 2^64 */
    assert_int_equal(baton_run_kv_cache_bytes(65536, 65536, UINT32_MAX, 1, &b),
                     BATON_E_OVERFLOW);
    /* head_dim * n_head_kv = (2^32 - 1)^2: times 4 already past 2^64 */
    assert_int_equal(baton_run_kv_cache_bytes(UINT32_MAX, UINT32_MAX, 1, 1, &b),
                     BATON_E_OVERFLOW);
    /* one tensor of 2^62 bytes fits; K and V of one layer (2^63) fit; two
     * layers (2^64) do not */
    assert_int_equal(baton_run_kv_cache_bytes(32768, 32768, 1u << 30, 1, &b), 0);
    assert_int_equal(b, 1ull << 63);
    b = 12345;
    assert_int_equal(baton_run_kv_cache_bytes(32768, 32768, 1u << 30, 2, &b), BATON_E_OVERFLOW);
    /* 4 * (2^62 - 1) = 2^64 - 4 fits, but not once padded to 64 bytes:
     * 2^62 - 1 = 3 * 715827883 * 2147483647 */
    assert_int_equal(baton_run_kv_cache_bytes(3, 715827883u, 2147483647u, 1, &b),
                     BATON_E_OVERFLOW);
    /* as many layers as a model can have (2^16) of a 2^47-byte tensor */
    assert_int_equal(baton_run_kv_cache_bytes(8192, 4096, 1u << 20, 65536, &b),
                     BATON_E_OVERFLOW);
    assert_int_equal(b, 12345); /* unchanged on failure */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kv_bytes_stories260k),
        cmocka_unit_test(kv_bytes_aligned),
        cmocka_unit_test(kv_bytes_overflow),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
