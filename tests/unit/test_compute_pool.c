/* The persistent pool: argument checks, every item of a parallel-for run
 * exactly once in contiguous chunks, chunk ids within the thread count,
 * many back-to-back jobs, jobs right after creation, shared use; dynamic
 * runs: every item once, each thread's static share first, calls of one
 * chunk id never at the same time, a slow thread's tail taken by others;
 * the spin policy (compute/spin.h): lone clock jumps ignored, a preemption's
 * cooldown, doubling while preemptions come close together, halving when
 * they come apart, forgetting after a clean run. */
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "baton/status.h"
#include "compute/compute.h"
#include "compute/pool.h"
#include "compute/spin.h"

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

/* ---- dynamic runs ---- */

struct dyn_cover {
    _Atomic uint32_t hits[MAX_ITEMS];
    _Atomic uint32_t busy[BATON_POOL_MAX_THREADS]; /* a call of that chunk id is running */
    _Atomic uint32_t calls[BATON_POOL_MAX_THREADS];
    _Atomic uint32_t overlaps;                     /* calls of one chunk id at once */
    uint64_t first_begin[BATON_POOL_MAX_THREADS];  /* the first call of each chunk id */
    uint64_t first_end[BATON_POOL_MAX_THREADS];
    uint64_t items_of[BATON_POOL_MAX_THREADS];     /* items each chunk id processed */
    uint32_t slow_chunk;                           /* this chunk id sleeps per call; */
    uint32_t slow_us;                              /* 0: nobody sleeps */
};

static void dyn_task(void *ctx, uint64_t begin, uint64_t end, uint32_t chunk)
{
    struct dyn_cover *c = ctx;
    uint64_t i;

    if (atomic_fetch_add(&c->busy[chunk], 1) != 0)
        atomic_fetch_add(&c->overlaps, 1);
    /* only threads with this chunk id write these, one call at a time */
    if (atomic_fetch_add(&c->calls[chunk], 1) == 0) {
        c->first_begin[chunk] = begin;
        c->first_end[chunk] = end;
    }
    c->items_of[chunk] += end - begin;
    for (i = begin; i < end; i++)
        atomic_fetch_add(&c->hits[i], 1);
    if (c->slow_us && chunk == c->slow_chunk) {
        struct timespec ts = {0, (long)c->slow_us * 1000L};

        nanosleep(&ts, NULL);
    }
    atomic_fetch_sub(&c->busy[chunk], 1);
}

/* One dynamic run of [0, n); checks every item once, no overlapping calls
 * of a chunk id, ids below want_k, and each id's first call = its even
 * share of the first n - ceil(n/4) items (when that share is not empty). */
static void check_dynamic(struct baton_pool *p, uint64_t n, uint64_t max_chunks, uint32_t want_k,
                          struct dyn_cover *c)
{
    const uint64_t n_static = n - (n / 4 + (n % 4 != 0));
    uint64_t i, total = 0;
    uint32_t k;

    baton_pool_run_dynamic(p, n, max_chunks, dyn_task, c);
    for (i = 0; i < n; i++)
        assert_int_equal(atomic_load(&c->hits[i]), 1);
    assert_int_equal(atomic_load(&c->overlaps), 0);
    for (k = 0; k < BATON_POOL_MAX_THREADS; k++) {
        if (k >= want_k) {
            assert_int_equal(atomic_load(&c->calls[k]), 0);
            continue;
        }
        total += c->items_of[k];
        if (want_k > 1 && n_static / want_k > 0) {
            const uint64_t base = n_static / want_k, rem = n_static % want_k;

            assert_int_equal(c->first_begin[k], base * k + (k < rem ? k : rem));
            assert_int_equal(c->first_end[k] - c->first_begin[k], base + (k < rem ? 1 : 0));
        }
    }
    assert_int_equal(total, n);
}

static void test_dynamic_cover(void **state)
{
    static struct dyn_cover c;
    static const uint64_t sizes[] = {0, 1, 2, 3, 5, 7, 8, 48, 49, 128, 999, 1000};
    struct baton_pool *p;
    size_t s;
    int i;

    (void)state;
    memset(&c, 0, sizeof(c));
    check_dynamic(NULL, 10, 100, 1, &c); /* no pool: inline, one call */
    assert_int_equal(atomic_load(&c.calls[0]), 1);
    assert_int_equal(baton_pool_create(3, &p), 0);
    for (i = 0; i < 300; i++)
        for (s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
            const uint64_t n = sizes[s], mc = (uint64_t)(i % 4) + 1;
            const uint64_t k = n < (mc < 3 ? mc : 3) ? n : (mc < 3 ? mc : 3);

            memset(&c, 0, sizeof(c));
            check_dynamic(p, n, mc, (uint32_t)k, &c);
        }
    baton_pool_destroy(p);
}

static void test_dynamic_slow_thread(void **state)
{
    /* Chunk 1 sleeps 5 ms after each of its calls: the others take the
     * dynamic tail, so chunk 1 ends with its static share plus at most a
     * few pieces, far less than a static split would give it. */
    static struct dyn_cover c;
    struct baton_pool *p;
    const uint64_t n = 400, n_static = n - n / 4;

    (void)state;
    assert_int_equal(baton_pool_create(2, &p), 0);
    memset(&c, 0, sizeof(c));
    c.slow_chunk = 1;
    c.slow_us = 5000;
    check_dynamic(p, n, 100, 2, &c);
    /* static share 150 plus at most the first piece of the tail it can
     * claim before the caller, at full speed, claims the rest */
    assert_true(c.items_of[1] >= n_static / 2);
    assert_true(c.items_of[1] < n / 2);
    assert_true(c.items_of[0] > n / 2);
    baton_pool_destroy(p);
}

/* Waits of the next cooldown: how many windows in a row are 0 before one
 * is the full window again (that spin is then recorded as caught). */
static uint32_t spin_cooldown_len(struct baton_spin *s)
{
    const uint64_t max = 100000;
    uint32_t zero = 0;

    while (baton_spin_window(s, max) == 0)
        zero++;
    baton_spin_record(s, BATON_SPIN_CAUGHT);
    return zero;
}

/* n spins that caught what they waited for. */
static void spin_caught(struct baton_spin *s, uint32_t n)
{
    while (n-- > 0) {
        assert_int_equal(baton_spin_window(s, 7), 7);
        baton_spin_record(s, BATON_SPIN_CAUGHT);
    }
}

static void test_spin_lone_jumps(void **state)
{
    struct baton_spin s = {0};
    int i;

    (void)state;
    for (i = 0; i < 100; i++) {
        assert_int_equal(baton_spin_window(&s, 7), 7);
        baton_spin_record(&s, BATON_SPIN_PREEMPTED); /* an interrupt */
        spin_caught(&s, BATON_SPIN_JUMP_PAIR);
    }
    assert_int_equal(s.backoff, 0);
    assert_int_equal(s.cooldown, 0);
}

static void test_spin_hog_doubles_to_max(void **state)
{
    struct baton_spin s = {0};
    uint32_t want = BATON_SPIN_BACKOFF_FIRST;
    int i;

    (void)state;
    baton_spin_record(&s, BATON_SPIN_PREEMPTED); /* lone: nothing yet */
    assert_int_equal(s.cooldown, 0);
    baton_spin_record(&s, BATON_SPIN_PREEMPTED); /* the pair: a preemption */
    assert_int_equal(spin_cooldown_len(&s), BATON_SPIN_BACKOFF_FIRST);
    for (i = 0; i < 20; i++) {
        /* preempted again within a few spins of the cooldown's end */
        spin_caught(&s, 3);
        baton_spin_record(&s, BATON_SPIN_PREEMPTED);
        want = want * 2 > BATON_SPIN_BACKOFF_MAX ? BATON_SPIN_BACKOFF_MAX : want * 2;
        assert_int_equal(spin_cooldown_len(&s), want);
    }
    assert_int_equal(want, BATON_SPIN_BACKOFF_MAX);
}

static void test_spin_sparse_halves(void **state)
{
    struct baton_spin s = {0};
    uint32_t want = 1024;
    int i;

    (void)state;
    baton_spin_record(&s, BATON_SPIN_PREEMPTED);
    baton_spin_record(&s, BATON_SPIN_PREEMPTED);
    (void)spin_cooldown_len(&s);
    while (s.backoff < 1024) {
        baton_spin_record(&s, BATON_SPIN_PREEMPTED);
        (void)spin_cooldown_len(&s);
    }
    assert_int_equal(s.backoff, 1024);
    for (i = 0; i < 8; i++) {
        /* a pair of jumps, a few hundred spins after the last preemption */
        spin_caught(&s, BATON_SPIN_HOT_GAP + 100);
        baton_spin_record(&s, BATON_SPIN_PREEMPTED);
        baton_spin_record(&s, BATON_SPIN_PREEMPTED);
        want = want / 2 < BATON_SPIN_BACKOFF_FIRST ? BATON_SPIN_BACKOFF_FIRST : want / 2;
        assert_int_equal(spin_cooldown_len(&s), want);
    }
    assert_int_equal(want, BATON_SPIN_BACKOFF_FIRST);
}

static void test_spin_clean_run_forgets(void **state)
{
    struct baton_spin s = {0};

    (void)state;
    baton_spin_record(&s, BATON_SPIN_PREEMPTED);
    baton_spin_record(&s, BATON_SPIN_PREEMPTED);
    (void)spin_cooldown_len(&s);
    baton_spin_record(&s, BATON_SPIN_PREEMPTED);
    assert_int_equal(spin_cooldown_len(&s), 2 * BATON_SPIN_BACKOFF_FIRST);
    spin_caught(&s, BATON_SPIN_CLEAN_RESET - 2);
    assert_int_equal(s.backoff, 2 * BATON_SPIN_BACKOFF_FIRST); /* not yet */
    spin_caught(&s, 1);
    assert_int_equal(s.backoff, 0);
    baton_spin_record(&s, BATON_SPIN_PREEMPTED);
    baton_spin_record(&s, BATON_SPIN_PREEMPTED);
    assert_int_equal(spin_cooldown_len(&s), BATON_SPIN_BACKOFF_FIRST);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_args),
        cmocka_unit_test(test_cover),
        cmocka_unit_test(test_job_right_after_create),
        cmocka_unit_test(test_many_jobs),
        cmocka_unit_test(test_shared_by_two_callers),
        cmocka_unit_test(test_dynamic_cover),
        cmocka_unit_test(test_dynamic_slow_thread),
        cmocka_unit_test(test_spin_lone_jumps),
        cmocka_unit_test(test_spin_hog_doubles_to_max),
        cmocka_unit_test(test_spin_sparse_halves),
        cmocka_unit_test(test_spin_clean_run_forgets),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
