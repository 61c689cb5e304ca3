/* SAMPLE (baton_cpu_sample, a radix selection and sort of the candidates)
 * against its plain reference (sample_ref.h: a comparison sort of every
 * candidate), token for token, on rows built to stress the order: ties
 * (few distinct logits, equal p after underflow), NaN and infinite logits,
 * temperatures from 1e-30 to 1e30, top_k from 1 to past the vocabulary,
 * top_p from 1e-6 to 1, vocabularies of 1 to 152064 (the output rows of
 * Qwen 2 7B). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "baton/status.h"
#include "compute/compute.h"
#include "sample_ref.h"

static uint64_t rng_state = 0x5eed5a3b1e0full;

static uint64_t rng64(void)
{
    rng_state += 0x9E3779B97F4A7C15ull;
    return sample_ref_mix64(rng_state);
}

/* uniform in [0, 1) */
static double rng_unit(void)
{
    return (double)(rng64() >> 11) / 9007199254740992.0;
}

enum { SHAPE_SPREAD, SHAPE_FEW, SHAPE_HOLES, SHAPE_HUGE, SHAPE_FLAT, SHAPE_PEAK, SHAPE_COUNT };

/* Row x[0, k) of the given shape: SPREAD a sum of uniforms times scale
 * (bell-shaped), FEW 3 distinct values, HOLES SPREAD with NaN and -inf,
 * HUGE values near +-3e38 (differences overflow to -inf), FLAT all equal,
 * PEAK one logit far above a spread. */
static void fill_row(float *x, uint64_t k, int shape, float scale)
{
    for (uint64_t i = 0; i < k; i++) {
        const double g = rng_unit() + rng_unit() + rng_unit() - 1.5;

        switch (shape) {
        case SHAPE_FEW:
            x[i] = (float)(rng64() % 3) * scale;
            break;
        case SHAPE_HOLES: {
            const uint64_t r = rng64() % 8;

            x[i] = r == 0 ? NAN : r == 1 ? -INFINITY : (float)(g * scale);
            break;
        }
        case SHAPE_HUGE:
            x[i] = rng64() % 2 ? 3e38f : -3e38f;
            break;
        case SHAPE_FLAT:
            x[i] = scale;
            break;
        default:
            x[i] = (float)(g * scale);
            break;
        }
    }
    if (shape == SHAPE_PEAK)
        x[rng64() % k] = 40.0f * scale;
}

static void set_params(int32_t *p, float temp, float top_p, uint32_t top_k)
{
    const uint64_t seed = rng64();

    memcpy(&p[0], &temp, 4);
    memcpy(&p[1], &top_p, 4);
    p[2] = (int32_t)top_k;
    p[3] = (int32_t)(uint32_t)seed;
    p[4] = (int32_t)(uint32_t)(seed >> 32);
    p[5] = (int32_t)(uint32_t)rng64();
}

static const float temps[] = {1e-30f, 0.01f, 0.7f, 1.0f, 5.0f, 1e30f};
static const float top_ps[] = {1.0f, 0.95f, 0.5f, 1e-6f, 0.99999994f};

/* rows of vocabulary k, each compared with the reference: the rows in
 * one call on a pool of 3 threads (rows shared among them, each thread's
 * part of the work area), then one at a time without a pool */
static void compare_rows(uint64_t k, uint32_t rows)
{
    struct baton_pool *pool = NULL;
    float *x = malloc(k * rows * sizeof *x);
    int32_t *p = malloc(6 * (size_t)rows * sizeof *p), *y = malloc(rows * sizeof *y);
    struct baton_cpu_sample_entry *work =
        malloc(baton_cpu_sample_work_entries(k, rows) * sizeof *work);
    const uint32_t top_ks[] = {0, 1, 2, 40, (uint32_t)k - 1, (uint32_t)k, (uint32_t)k + 3,
                               UINT32_MAX, (uint32_t)(k / 2)};

    assert_non_null(x);
    assert_non_null(p);
    assert_non_null(y);
    assert_non_null(work);
    assert_int_equal(baton_pool_create(3, &pool), 0);
    for (uint32_t r = 0; r < rows; r++) {
        const int shape = (int)(rng64() % SHAPE_COUNT);
        const float scale = (float)pow(10.0, (double)(rng64() % 5) - 2.0);

        fill_row(x + r * k, k, shape, scale);
        set_params(p + 6 * r, temps[rng64() % (sizeof temps / sizeof temps[0])],
                   top_ps[rng64() % (sizeof top_ps / sizeof top_ps[0])],
                   top_ks[rng64() % (sizeof top_ks / sizeof top_ks[0])]);
    }
    assert_int_equal(baton_cpu_sample(pool, x, k, rows, p, y, work), 0);
    for (uint32_t r = 0; r < rows; r++) {
        const int32_t want = sample_ref_row(x + r * k, k, p + 6 * r, work);
        int32_t one = -1;

        if (y[r] != want)
            fail_msg("k %llu row %u (temperature bits %08x, top_p bits %08x, top_k %u): "
                     "token %d, the reference %d",
                     (unsigned long long)k, r, (unsigned)p[6 * r], (unsigned)p[6 * r + 1],
                     (unsigned)p[6 * r + 2], y[r], want);
        assert_int_equal(baton_cpu_sample(NULL, x + r * k, k, 1, p + 6 * r, &one, work), 0);
        assert_int_equal(one, want);
    }
    baton_pool_destroy(pool);
    free(x);
    free(p);
    free(y);
    free(work);
}

static void test_sample_small_vocabularies(void **state)
{
    static const uint64_t ks[] = {1, 2, 3, 5, 31, 256, 257, 1000};

    (void)state;
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        compare_rows(ks[i], 300);
}

static void test_sample_real_vocabularies(void **state)
{
    (void)state;
    compare_rows(4099, 120);
    compare_rows(32000, 40); /* Llama 2's */
    compare_rows(152064, 12); /* Qwen 2 7B's output rows */
}

/* The draw itself: with top_k 40 over a spread row, 2000 counters give
 * only ids among the 40 largest logits, and more than 20 distinct ones
 * (the selection keeps the candidates the sort must see). */
static void test_sample_top_k_keeps_the_largest(void **state)
{
    enum { K = 5000, DRAWS = 2000 };
    float *x = malloc(K * sizeof *x);
    struct baton_cpu_sample_entry *work = malloc(2 * K * sizeof *work);
    int32_t p[6], y;
    int seen[K] = {0}, distinct = 0;

    (void)state;
    assert_non_null(x);
    assert_non_null(work);
    for (int i = 0; i < K; i++)
        x[i] = (float)i * 0.001f; /* distinct; the 40 largest are ids 4960..4999 */
    for (uint32_t c = 0; c < DRAWS; c++) {
        set_params(p, 1.0f, 1.0f, 40);
        p[5] = (int32_t)c;
        assert_int_equal(baton_cpu_sample(NULL, x, K, 1, p, &y, work), 0);
        assert_true(y >= K - 40 && y < K);
        if (seen[y]++ == 0)
            distinct++;
    }
    assert_true(distinct > 20);
    free(x);
    free(work);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sample_small_vocabularies),
        cmocka_unit_test(test_sample_real_vocabularies),
        cmocka_unit_test(test_sample_top_k_keeps_the_largest),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
