/* The persistent pool: argument checks, every item of a parallel-for run
 * exactly once in contiguous chunks, chunk ids within the thread count,
 * many back-to-back jobs, jobs right after creation, shared use. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "baton/status.h"
#include "compute/compute.h"
#include "compute/pool.h"

#define MAX_ITEMS 1000

struct cover {
    uint32_t hits[MAX_ITEMS];
    uint64_t chunk_begin[BATON_POOL_MAX_THREADS];
    uint64_t chunk_end[BATON_POOL_MAX_THREADS];
    uint32_t chunk_calls[BATON_POOL_MAX_THREADS];
};

static void cover_task(void *ctx, uint64_t begin, uint64_t end, uint32_t chunk)
{
    struct cover *c = ctx;
    uint64_t i;

    /* each chunk id is used once per run, so these writes do not race */
    c->chunk_begin[chunk] = begin;
    c->chunk_end[chunk] = end;
    c->chunk_calls[chunk]++;
    for (i = begin; i < end; i++)
        c->hits[i]++;
}

/* Runs [0, n) and checks: every item once; chunks 0..k-1 each called once,
 * contiguous and in order, sizes differing by at most one; k as expected. */
static void check_run(struct baton_pool *p, uint64_t n, uint64_t max_chunks, uint32_t want_k)
{
    static struct cover c;
    uint64_t i, lo = UINT64_MAX, hi = 0;
    uint32_t k;

    memset(&c, 0, sizeof(c));
    baton_pool_run(p, n, max_chunks, cover_task, &c);
    for (i = 0; i < n; i++)
        assert_int_equal(c.hits[i], 1);
    for (k = 0; k < BATON_POOL_MAX_THREADS && c.chunk_calls[k]; k++) {
        const uint64_t size = c.chunk_end[k] - c.chunk_begin[k];

        assert_int_equal(c.chunk_calls[k], 1);
        assert_int_equal(c.chunk_begin[k], k == 0 ? 0 : c.chunk_end[k - 1]);
        if (size < lo)
            lo = size;
        if (size > hi)
            hi = size;
    }
    for (i = k; i < BATON_POOL_MAX_THREADS; i++)
        assert_int_equal(c.chunk_calls[i], 0);
    assert_int_equal(k, want_k);
    if (k > 0) {
        assert_int_equal(c.chunk_end[k - 1], n);
        assert_true(hi - lo <= 1);
    }
}

static void test_create_args(void **state)
{
    struct baton_pool *p = (struct baton_pool *)&p;

    (void)state;
    assert_int_equal(baton_pool_create(0, &p), BATON_E_INVAL);
    assert_null(p);
    assert_int_equal(baton_pool_create(BATON_POOL_MAX_THREADS + 1, &p), BATON_E_INVAL);
    assert_int_equal(baton_pool_create(1, NULL), BATON_E_INVAL);
    assert_int_equal(baton_pool_create(1, &p), 0);
    assert_int_equal(baton_pool_threads(p), 1);
    baton_pool_destroy(p);
    assert_int_equal(baton_pool_create(4, &p), 0);
    assert_int_equal(baton_pool_threads(p), 4);
    baton_pool_destroy(p);
    assert_int_equal(baton_pool_threads(NULL), 1);
    baton_pool_destroy(NULL);
}

static void test_cover(void **state)
{
    struct baton_pool *p;

    (void)state;
    check_run(NULL, 10, 100, 1); /* no pool: inline */
    check_run(NULL, 0, 100, 0);
    assert_int_equal(baton_pool_create(3, &p), 0);
    check_run(p, 10, 100, 3);  /* 4 + 3 + 3 */
    check_run(p, 2, 100, 2);   /* fewer items than threads */
    check_run(p, 1, 100, 1);
    check_run(p, 0, 100, 0);
    check_run(p, 999, 2, 2);   /* capped by max_chunks */
    check_run(p, 999, 1, 1);
    check_run(p, 1000, 100, 3);
    baton_pool_destroy(p);
}

static void test_job_right_after_create(void **state)
{
    /* A job published before the workers first ran must still reach them. */
    struct baton_pool *p;
    int i;

    (void)state;
    for (i = 0; i < 200; i++) {
        assert_int_equal(baton_pool_create(4, &p), 0);
        check_run(p, 100, 100, 4);
        baton_pool_destroy(p);
    }
}

static void test_many_jobs(void **state)
{
    struct baton_pool *p;
    uint64_t n;
    int i;

    (void)state;
    assert_int_equal(baton_pool_create(4, &p), 0);
    for (i = 0; i < 2000; i++) {
        n = (uint64_t)(i % 9); /* 0..8 items: some runs leave workers idle */
        check_run(p, n, 100, (uint32_t)(n < 4 ? n : 4));
    }
    baton_pool_destroy(p);
}

struct sharer {
    struct baton_pool *pool;
    uint32_t hits[64];
};

static void sum_task(void *ctx, uint64_t begin, uint64_t end, uint32_t chunk)
{
    struct sharer *s = ctx;
    uint64_t i;

    (void)chunk;
    for (i = begin; i < end; i++)
        s->hits[i]++;
}

static void *sharer_main(void *arg)
{
    struct sharer *s = arg;
    int i;

    for (i = 0; i < 300; i++)
        baton_pool_run(s->pool, 64, 100, sum_task, s);
    return NULL;
}

static void test_shared_by_two_callers(void **state)
{
    struct baton_pool *p;
    struct sharer a, b;
    pthread_t ta, tb;
    int i;

    (void)state;
    assert_int_equal(baton_pool_create(3, &p), 0);
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    a.pool = b.pool = p;
    assert_int_equal(pthread_create(&ta, NULL, sharer_main, &a), 0);
    assert_int_equal(pthread_create(&tb, NULL, sharer_main, &b), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    for (i = 0; i < 64; i++) {
        assert_int_equal(a.hits[i], 300);
        assert_int_equal(b.hits[i], 300);
    }
    baton_pool_destroy(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_args),
        cmocka_unit_test(test_cover),
        cmocka_unit_test(test_job_right_after_create),
        cmocka_unit_test(test_many_jobs),
        cmocka_unit_test(test_shared_by_two_callers),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
