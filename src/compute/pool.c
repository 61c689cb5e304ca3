/* Persistent worker pool: n_threads - 1 pthreads plus the caller.
 *
 * One job at a time (callers are serialized by run_mu). The caller writes
 * the job (fn, ctx, n) and then publishes it by storing a new job word
 * (a generation counter in the high bits, the job's chunk count in the low
 * 8 bits). Each worker watches the job word; a worker whose id is below the
 * chunk count runs its chunk and decrements `pending`; the caller runs chunk
 * 0 and waits for `pending` to reach 0 before it returns (and before it may
 * write the next job).
 *
 * Waiting: both sides first spin on the atomic word for a short, bounded
 * time (with a pause instruction), then sleep on a condition variable.
 * Decode runs many small parallel ops back to back (about 100 per token of
 * the 86M-parameter benchmark model, most gaps between them under 5 us): a
 * sleeping worker costs a futex wake-up and a reschedule per op (about 9 us
 * at 2 threads here, bench/pool.c), which the spin avoids when the next op
 * comes within the spin window.
 *
 * Oversubscription: when the machine has more runnable threads than cores
 * (the shared 2-core development host runs builds and provers beside the
 * benchmarks), a spinning thread burns its share of the CPU while its
 * partner is descheduled, and it loses the scheduler's preference for
 * threads that wake from sleep: measured there, a fixed 5..50 us window cut
 * 2-thread decode by 10-70 %, and the pool hand-off grew from 9 us (sleep)
 * to 35-100 us (bench/pool.c). So each waiting thread watches for that: a
 * spin whose clock jumps by more than SPIN_PREEMPT_NS between two polls was
 * descheduled, and that thread then sleeps at once for its next `backoff`
 * waits (compute/spin.h: 32 at first; doubled, up to 65536, by a
 * preemption within 128 spins of the previous one; halved, down to 32, by
 * a later one; forgotten after 4096 spins in a row without one). On a
 * dedicated machine spins are not preempted and stay on; on an
 * oversubscribed one the pool behaves nearly like the plain
 * condition-variable pool.
 *
 * A lone clock jump is not a preemption: in a virtual machine a timer
 * interrupt (a VM exit) stops a spin for more than SPIN_PREEMPT_NS too,
 * a few hundred times a second, and treating each as a preemption kept the
 * pool in its cooldown almost all the time on the quiet 2-core KVM host:
 * 2-thread decode of the Q4_0 benchmark model ran at 200-240 tok/s, below
 * 1 thread (about 370). So a jump counts only when another came within the
 * last BATON_SPIN_JUMP_PAIR spins (a competing thread preempts a spinner
 * again and again; interrupts are far apart); with that, 2-thread decode
 * there measured 450-600 tok/s, and with a CPU hog on one of the 2 cores
 * 170-190 tok/s (the single-jump rule: 180-240; 1 thread: 375, the better
 * choice on a shared host).
 *
 * Rare preemptions are not a hog: a batond's pool lives across sessions,
 * and the coordinator's process on the same 2 cores preempts a spinner now
 * and then (once per few hundred to few thousand spins). When every
 * preemption doubled the backoff (from 256), and only 4096 clean spins in a
 * row forgot it (a thread in its cooldown does not spin, so it never got
 * them), a batond's pool thread slept at once in 97 % of its waits after
 * two benchmark runs, and one batond at 2 threads decoded at 0.69x
 * in-process (Zen 5 KVM host, 2026-12-03). Doubling only
 * for preemptions that come close together (a hog preempts a spinner
 * within tens of spins; the coordinator, hundreds or more apart) and
 * halving otherwise: one batond 0.97-1.06x in-process (ABBA, 3 rounds),
 * and 2-thread decode with a CPU hog on one core unchanged (258-262 tok/s
 * against 257-272 with the old rule; without any cooldown, 90-120).
 * bench/RESULTS.md.
 *
 * The window (BATON_POOL_SPIN_US_DEFAULT = 100 us, overridable with the
 * environment variable BATON_POOL_SPIN_US, 0..10000 us, read once per pool;
 * 0 never spins) is about twice the cost of a wake-up: spinning for about
 * what blocking costs, then blocking, wastes at most a small multiple of
 * what the best choice made in hindsight would (the classic spin-then-block
 * argument). A futex wake-up measured 9 us with bench/pool.c, but a whole
 * hand-off from a sleeping thread in this KVM guest (the idle vCPU halted)
 * costs more: with 20 us a 2-thread prefill of the 86M Q8_0 model ran at
 * 940-1290 tok/s from run to run (the serial small ops between the parallel
 * ones outlast 20 us, so the worker slept), with 100 us at 1110-1320, and
 * decode gained about 3 %; without spinning, 880-970. 20 us covered about
 * 91 % of the gaps between ops in decode, 100 us nearly all.
 * Idle threads sleep after at most one window, so an idle pool costs no
 * CPU. Measurements: bench/RESULTS.md.
 *
 * Sleeping without lost wake-ups (C11 sequentially consistent atomics):
 * a sleeper takes mu, announces itself (`sleepers` / `caller_waiting`), then
 * re-reads the word it waits on and only then waits on the condvar. The
 * waker first stores the word, then reads the announcement, and takes mu to
 * signal only when someone announced. In the single total order of these
 * seq_cst operations either the sleeper's re-read comes after the store (it
 * does not sleep) or the waker's read comes after the announcement (it
 * signals, and since it must take mu, the signal cannot fall between the
 * sleeper's re-read and its wait).
 *
 * Dynamic jobs (baton_pool_run_dynamic): the threads first run their even
 * shares of the first three quarters of the items, with no shared writes,
 * then claim pieces of the last quarter from the `next` counter (a CAS
 * loop; each piece is ceil(left / 2k) items, so about 2k ln(n / 4) claims
 * in all). A thread the host slows down (in this
 * KVM guest one vCPU ran a decode's chunks up to 1.3x slower than the other
 * for seconds at a time) or that starts late then leaves its part of the
 * tail to the others instead of making them wait at the end. A quarter
 * absorbs a speed ratio up to 5:3 between 2 threads; with equal speeds the
 * claims cost about as much as they save (an A/B over the 86M model's
 * decode products: within +-2 %).
 *
 * Memory order of the job itself: the job fields are plain and written
 * before the job word's seq_cst store (a release); a worker reads them
 * after loading the word (an acquire). They are not rewritten until every
 * worker with a chunk has decremented `pending` (release), which the caller
 * observes (acquire) before returning; a worker without a chunk in a job
 * reads nothing but the word. A chunk's writes are thus visible to the
 * caller when baton_pool_run returns. */
#include "compute/pool.h"
#include "compute/spin.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "baton/status.h"

/* Spin window before sleeping, microseconds (see the top). */
#define BATON_POOL_SPIN_US_DEFAULT 100u
#define BATON_POOL_SPIN_US_MAX 10000u
/* A gap this long between two clock reads of a spin means the thread was
 * descheduled while spinning (one poll takes about 2 us). */
#define SPIN_PREEMPT_NS 20000u
/* Job word: generation << 8 | chunk count (BATON_POOL_MAX_THREADS <= 255). */
#define JOB_CHUNK_BITS 8u
#define JOB_CHUNK_MASK ((1u << JOB_CHUNK_BITS) - 1u)

_Static_assert(BATON_POOL_MAX_THREADS <= JOB_CHUNK_MASK, "chunk count must fit the job word");

struct pool_worker {
    struct baton_pool *pool;
    pthread_t thread;
    uint32_t id;             /* 1 .. n_threads-1; the caller is chunk 0 */
    struct baton_spin spin;  /* this worker's own spin state */
};

struct baton_pool {
    uint32_t n_threads;
    uint32_t n_started; /* workers actually running (for cleanup) */
    struct pool_worker *workers;
    uint64_t spin_max_ns;           /* spin window; 0: always sleep at once */
    struct baton_spin caller_spin;  /* the caller's spin state (under run_mu) */

    pthread_mutex_t run_mu; /* serializes baton_pool_run callers */
    pthread_mutex_t mu;     /* pairs with the two condvars (see the top) */
    pthread_cond_t work_cv; /* the job word changed, or stop */
    pthread_cond_t done_cv; /* pending reached 0 */

    _Alignas(64) _Atomic uint64_t job;     /* generation << 8 | chunk count */
    _Atomic int stop;
    _Atomic uint32_t sleepers;             /* workers that announced a work_cv wait */
    _Alignas(64) _Atomic uint32_t pending; /* worker chunks not yet finished */
    _Atomic int caller_waiting;            /* the caller announced a done_cv wait */

    /* current job: written by the caller before the job word is stored,
     * constant until pending reaches 0 */
    _Alignas(64) baton_task_fn fn;
    void *ctx;
    uint64_t n;
    uint64_t n_static; /* dynamic jobs: items split evenly up front; else n */
    int dynamic;

    /* dynamic jobs: the first item not yet claimed (in [n_static, n]) */
    _Alignas(64) _Atomic uint64_t next;
};

/* Chunk c of an even split of [0, n) into k chunks; the first n % k chunks
 * get one more item. No product of n can wrap. */
static void chunk_range(uint64_t n, uint32_t k, uint32_t c, uint64_t *begin, uint64_t *end)
{
    const uint64_t base = n / k, rem = n % k;

    *begin = base * c + (c < rem ? c : rem);
    *end = *begin + base + (c < rem ? 1 : 0);
}

/* Claims the next piece of a dynamic job for one of k threads: [*begin,
 * *end), ceil(left / (2k)) items (pool.h). Returns 0 when
 * nothing is left. Relaxed: the items' results are published by the
 * pending counter (see the top), not by this counter. */
static int claim_piece(struct baton_pool *p, uint32_t k, uint64_t *begin, uint64_t *end)
{
    const uint64_t parts = 2u * (uint64_t)k;
    uint64_t cur = atomic_load_explicit(&p->next, memory_order_relaxed), take;

    do {
        if (cur >= p->n)
            return 0;
        take = (p->n - cur) / parts + ((p->n - cur) % parts != 0);
    } while (!atomic_compare_exchange_weak_explicit(&p->next, &cur, cur + take,
                                                    memory_order_relaxed, memory_order_relaxed));
    *begin = cur;
    *end = cur + take;
    return 1;
}

/* Thread c's part of the current job of k chunks: its even share of the
 * static items, then (dynamic jobs) pieces of the rest until none is left. */
static void run_share(struct baton_pool *p, uint32_t k, uint32_t c)
{
    uint64_t begin, end;

    chunk_range(p->n_static, k, c, &begin, &end);
    if (begin < end)
        p->fn(p->ctx, begin, end, c);
    if (p->dynamic)
        while (claim_piece(p, k, &begin, &end))
            p->fn(p->ctx, begin, end, c);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

static uint64_t mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The clock check after each poll of a spin (a poll is 64 reads of the
 * watched word with a pause after each; the clock is a vDSO call, no system
 * call; 64 pauses take about 2 us on the development host). Returns
 * BATON_SPIN_PREEMPTED when the clock jumped by more than SPIN_PREEMPT_NS since
 * the previous read *last (the thread was descheduled), BATON_SPIN_RAN_OUT once
 * `window` ns have passed since t0, otherwise -1 (poll again). */
static int spin_clock(uint64_t t0, uint64_t window, uint64_t *last)
{
    const uint64_t now = mono_ns();

    if (now - *last > SPIN_PREEMPT_NS)
        return BATON_SPIN_PREEMPTED;
    *last = now;
    return now - t0 >= window ? BATON_SPIN_RAN_OUT : -1;
}

/* Spins up to `window` ns while *word == old and stop is clear: BATON_SPIN_CAUGHT
 * when the word changed or stop was set, else as spin_clock. */
static int spin_while_u64(const _Atomic uint64_t *word, uint64_t old, const _Atomic int *stop,
                          uint64_t window)
{
    const uint64_t t0 = mono_ns();
    uint64_t last = t0;
    uint32_t i;
    int how = -1;

    while (how < 0) {
        for (i = 0; i < 64; i++) {
            if (atomic_load_explicit(word, memory_order_relaxed) != old ||
                atomic_load_explicit(stop, memory_order_relaxed))
                return BATON_SPIN_CAUGHT;
            cpu_relax();
        }
        how = spin_clock(t0, window, &last);
    }
    return how;
}

/* As spin_while_u64, while *word != 0. */
static int spin_while_nonzero(const _Atomic uint32_t *word, uint64_t window)
{
    const uint64_t t0 = mono_ns();
    uint64_t last = t0;
    uint32_t i;
    int how = -1;

    while (how < 0) {
        for (i = 0; i < 64; i++) {
            if (atomic_load_explicit(word, memory_order_relaxed) == 0)
                return BATON_SPIN_CAUGHT;
            cpu_relax();
        }
        how = spin_clock(t0, window, &last);
    }
    return how;
}

/* Waits until the job word differs from `seen` or stop is set; returns the
 * new word (acquire), or `seen` itself when stopping. */
static uint64_t worker_wait(struct pool_worker *w, uint64_t seen)
{
    struct baton_pool *p = w->pool;
    const uint64_t window = baton_spin_window(&w->spin, p->spin_max_ns);
    int how = BATON_SPIN_RAN_OUT;

    if (window > 0) {
        how = spin_while_u64(&p->job, seen, &p->stop, window);
        baton_spin_record(&w->spin, how);
    }
    if (how != BATON_SPIN_CAUGHT) {
        pthread_mutex_lock(&p->mu);
        atomic_fetch_add(&p->sleepers, 1);
        while (atomic_load(&p->job) == seen && !atomic_load(&p->stop))
            pthread_cond_wait(&p->work_cv, &p->mu);
        atomic_fetch_sub(&p->sleepers, 1);
        pthread_mutex_unlock(&p->mu);
    }
    if (atomic_load(&p->stop))
        return seen;
    return atomic_load(&p->job); /* seq_cst load: acquires the job fields */
}

static void *worker_main(void *arg)
{
    struct pool_worker *w = arg;
    struct baton_pool *p = w->pool;
    /* No job can be published before baton_pool_create returns, so the job
     * word at creation is 0; reading p->job here instead would miss a job
     * published before this thread first ran. */
    uint64_t seen = 0;

    for (;;) {
        uint64_t word = worker_wait(w, seen);
        uint32_t n_chunks;

        if (word == seen)
            break; /* stop */
        seen = word;
        n_chunks = (uint32_t)(word & JOB_CHUNK_MASK);
        if (w->id >= n_chunks)
            continue; /* no chunk for this worker in this job: read nothing else */
        run_share(p, n_chunks, w->id);
        /* the last worker out wakes the caller if it announced a wait */
        if (atomic_fetch_sub(&p->pending, 1) == 1 && atomic_load(&p->caller_waiting)) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done_cv);
            pthread_mutex_unlock(&p->mu);
        }
    }
    return NULL;
}

static void pool_stop_workers(struct baton_pool *p)
{
    uint32_t i;

    atomic_store(&p->stop, 1);
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
    for (i = 0; i < p->n_started; i++)
        pthread_join(p->workers[i].thread, NULL);
    p->n_started = 0;
}

/* The spin window: BATON_POOL_SPIN_US when it is a decimal number of
 * microseconds in 0..BATON_POOL_SPIN_US_MAX, otherwise the default. */
static uint64_t spin_window_ns(void)
{
    const char *s = getenv("BATON_POOL_SPIN_US");
    uint64_t us = 0;

    if (s == NULL || *s == '\0')
        return (uint64_t)BATON_POOL_SPIN_US_DEFAULT * 1000u;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return (uint64_t)BATON_POOL_SPIN_US_DEFAULT * 1000u;
        us = us * 10u + (uint64_t)(*s - '0');
        if (us > BATON_POOL_SPIN_US_MAX)
            return (uint64_t)BATON_POOL_SPIN_US_DEFAULT * 1000u;
    }
    return us * 1000u;
}

/* Creates the pool. Workers start with every signal blocked, so signals are
 * delivered to the application's own threads. n_threads must be in
 * 1..BATON_POOL_MAX_THREADS (BATON_E_INVAL); BATON_E_NOMEM when memory or a
 * thread cannot be had (nothing is left behind). The spin window before an
 * idle thread sleeps is read from BATON_POOL_SPIN_US here (see the top). */
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
    if (posix_memalign((void **)&p, 64, sizeof(*p)) != 0)
        return BATON_E_NOMEM;
    memset(p, 0, sizeof(*p));
    p->n_threads = n_threads;
    p->spin_max_ns = spin_window_ns();
    atomic_init(&p->job, 0);
    atomic_init(&p->stop, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->caller_waiting, 0);
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

/* baton_pool_run (dynamic 0) and baton_pool_run_dynamic (1). */
static void pool_run(struct baton_pool *pool, uint64_t n, uint64_t max_chunks, baton_task_fn fn,
                     void *ctx, int dynamic)
{
    uint64_t k = pool ? pool->n_threads : 1, word, window;
    int how;

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
    pool->fn = fn;
    pool->ctx = ctx;
    pool->n = n;
    pool->dynamic = dynamic;
    pool->n_static = dynamic ? n - (n / 4u + (n % 4u != 0)) : n; /* the last quarter is claimed */
    atomic_store_explicit(&pool->next, pool->n_static, memory_order_relaxed);
    atomic_store_explicit(&pool->pending, (uint32_t)k - 1, memory_order_relaxed);
    /* publish: the seq_cst store releases the fields above */
    word = ((atomic_load_explicit(&pool->job, memory_order_relaxed) >> JOB_CHUNK_BITS) + 1)
               << JOB_CHUNK_BITS |
           k;
    atomic_store(&pool->job, word);
    if (atomic_load(&pool->sleepers) > 0) {
        pthread_mutex_lock(&pool->mu);
        pthread_cond_broadcast(&pool->work_cv);
        pthread_mutex_unlock(&pool->mu);
    }

    run_share(pool, (uint32_t)k, 0);

    window = baton_spin_window(&pool->caller_spin, pool->spin_max_ns);
    how = BATON_SPIN_RAN_OUT;
    if (window > 0) {
        how = spin_while_nonzero(&pool->pending, window);
        baton_spin_record(&pool->caller_spin, how);
    }
    if (how != BATON_SPIN_CAUGHT) {
        pthread_mutex_lock(&pool->mu);
        atomic_store(&pool->caller_waiting, 1);
        while (atomic_load(&pool->pending) != 0)
            pthread_cond_wait(&pool->done_cv, &pool->mu);
        atomic_store(&pool->caller_waiting, 0);
        pthread_mutex_unlock(&pool->mu);
    }

    /* acquire: every chunk's writes are visible from here on */
    (void)atomic_load_explicit(&pool->pending, memory_order_acquire);
    pthread_mutex_unlock(&pool->run_mu);
}

void baton_pool_run(struct baton_pool *pool, uint64_t n, uint64_t max_chunks, baton_task_fn fn,
                    void *ctx)
{
    pool_run(pool, n, max_chunks, fn, ctx, 0);
}

void baton_pool_run_dynamic(struct baton_pool *pool, uint64_t n, uint64_t max_chunks,
                            baton_task_fn fn, void *ctx)
{
    pool_run(pool, n, max_chunks, fn, ctx, 1);
}

