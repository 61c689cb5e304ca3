/* Persistent worker pool: n_threads - 1 pthreads plus the caller.
 *
 * One job at a time (callers are serialized by run_mu). A job is published
 * under mu with a new generation number; each worker waits on work_cv until
 * the generation changes, runs its chunk, and the last one to finish signals
 * done_cv. All shared fields are read and written under mu only, so the
 * hand-off is ordered by the mutex (no atomics, no spinning). */
#include "compute/pool.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include "baton/status.h"

struct pool_worker {
    struct baton_pool *pool;
    pthread_t thread;
    uint32_t id; /* 1 .. n_threads-1; the caller is chunk 0 */
};

struct baton_pool {
    uint32_t n_threads;
    uint32_t n_started; /* workers actually running (for cleanup) */
    struct pool_worker *workers;

    pthread_mutex_t run_mu; /* serializes baton_pool_run callers */
    pthread_mutex_t mu;     /* protects everything below */
    pthread_cond_t work_cv; /* generation changed or stop */
    pthread_cond_t done_cv; /* pending reached 0 */
    uint64_t generation;
    int stop;
    uint32_t pending; /* worker chunks of the current job not yet finished */

    /* current job, valid while pending > 0 */
    baton_task_fn fn;
    void *ctx;
    uint64_t n;
    uint32_t n_chunks;
};

/* Chunk c of an even split of [0, n) into k chunks; the first n % k chunks
 * get one more item. No product of n can wrap. */
static void chunk_range(uint64_t n, uint32_t k, uint32_t c, uint64_t *begin, uint64_t *end)
{
    const uint64_t base = n / k, rem = n % k;

    *begin = base * c + (c < rem ? c : rem);
    *end = *begin + base + (c < rem ? 1 : 0);
}

static void *worker_main(void *arg)
{
    struct pool_worker *w = arg;
    struct baton_pool *p = w->pool;
    /* No job can be published before baton_pool_create returns, so the
     * generation at creation is 0; reading p->generation here instead would
     * miss a job published before this thread first ran. */
    uint64_t seen = 0;

    pthread_mutex_lock(&p->mu);
    for (;;) {
        baton_task_fn fn;
        void *ctx;
        uint64_t n, begin, end;
        uint32_t n_chunks;

        while (p->generation == seen && !p->stop)
            pthread_cond_wait(&p->work_cv, &p->mu);
        if (p->stop)
            break;
        seen = p->generation;
        if (w->id >= p->n_chunks)
            continue; /* no chunk for this worker in this job */
        fn = p->fn;
        ctx = p->ctx;
        n = p->n;
        n_chunks = p->n_chunks;
        pthread_mutex_unlock(&p->mu);

        chunk_range(n, n_chunks, w->id, &begin, &end);
        fn(ctx, begin, end, w->id);

        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0)
            pthread_cond_signal(&p->done_cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void pool_stop_workers(struct baton_pool *p)
{
    uint32_t i;

    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
    for (i = 0; i < p->n_started; i++)
        pthread_join(p->workers[i].thread, NULL);
    p->n_started = 0;
}

/* Creates the pool. Workers start with every signal blocked, so signals are
 * delivered to the application's own threads. n_threads must be in
 * 1..BATON_POOL_MAX_THREADS (BATON_E_INVAL); BATON_E_NOMEM when memory or a
 * thread cannot be had (nothing is left behind). */
int baton_pool_create(uint32_t n_threads, struct baton_pool **out)
{
    struct baton_pool *p = NULL;
    sigset_t all, old;
    int rc = BATON_E_NOMEM, have_old = 0;
    uint32_t i;

    if (!out)
        return BATON_E_INVAL;
    *out = NULL;
    if (n_threads < 1 || n_threads > BATON_POOL_MAX_THREADS)
        return BATON_E_INVAL;
    p = calloc(1, sizeof(*p));
    if (!p)
        return BATON_E_NOMEM;
    p->n_threads = n_threads;
    if (pthread_mutex_init(&p->run_mu, NULL) != 0) {
        free(p);
        return BATON_E_NOMEM;
    }
    if (pthread_mutex_init(&p->mu, NULL) != 0)
        goto fail_run_mu;
    if (pthread_cond_init(&p->work_cv, NULL) != 0)
        goto fail_mu;
    if (pthread_cond_init(&p->done_cv, NULL) != 0)
        goto fail_work_cv;
    if (n_threads > 1) {
        p->workers = calloc(n_threads - 1, sizeof(*p->workers));
        if (!p->workers)
            goto fail_done_cv;
        sigfillset(&all);
        if (pthread_sigmask(SIG_SETMASK, &all, &old) == 0)
            have_old = 1;
        for (i = 0; i + 1 < n_threads; i++) {
            p->workers[i].pool = p;
            p->workers[i].id = i + 1;
            if (pthread_create(&p->workers[i].thread, NULL, worker_main, &p->workers[i]) != 0)
                break;
            p->n_started++;
        }
        if (have_old)
            pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (p->n_started + 1 != n_threads) {
            pool_stop_workers(p);
            goto fail_workers;
        }
    }
    *out = p;
    return 0;

fail_workers:
    free(p->workers);
fail_done_cv:
    pthread_cond_destroy(&p->done_cv);
fail_work_cv:
    pthread_cond_destroy(&p->work_cv);
fail_mu:
    pthread_mutex_destroy(&p->mu);
fail_run_mu:
    pthread_mutex_destroy(&p->run_mu);
    free(p);
    return rc;
}

/* Stops and joins every worker, then frees the pool. No run may be in
 * progress. NULL is a no-op. */
void baton_pool_destroy(struct baton_pool *pool)
{
    if (!pool)
        return;
    pool_stop_workers(pool);
    free(pool->workers);
    pthread_cond_destroy(&pool->done_cv);
    pthread_cond_destroy(&pool->work_cv);
    pthread_mutex_destroy(&pool->mu);
    pthread_mutex_destroy(&pool->run_mu);
    free(pool);
}

/* Number of threads including the caller (1 for a NULL pool). */
uint32_t baton_pool_threads(const struct baton_pool *pool)
{
    return pool ? pool->n_threads : 1;
}

void baton_pool_run(struct baton_pool *pool, uint64_t n, uint64_t max_chunks, baton_task_fn fn,
                    void *ctx)
{
    uint64_t k = pool ? pool->n_threads : 1, begin, end;

    if (max_chunks < k)
        k = max_chunks;
    if (n < k)
        k = n;
    if (k <= 1) {
        if (n > 0)
            fn(ctx, 0, n, 0);
        return;
    }

    pthread_mutex_lock(&pool->run_mu);
    pthread_mutex_lock(&pool->mu);
    pool->fn = fn;
    pool->ctx = ctx;
    pool->n = n;
    pool->n_chunks = (uint32_t)k;
    pool->pending = (uint32_t)k - 1;
    pool->generation++;
    pthread_cond_broadcast(&pool->work_cv);
    pthread_mutex_unlock(&pool->mu);

    chunk_range(n, (uint32_t)k, 0, &begin, &end);
    fn(ctx, begin, end, 0);

    pthread_mutex_lock(&pool->mu);
    while (pool->pending > 0)
        pthread_cond_wait(&pool->done_cv, &pool->mu);
    pthread_mutex_unlock(&pool->mu);
    pthread_mutex_unlock(&pool->run_mu);
}
