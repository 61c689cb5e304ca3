/* Hand-off cost of the persistent pool (src/compute/pool.c).
 *
 * Times back-to-back baton_pool_run calls of a tiny task (each chunk writes
 * one cache line of its own) at 2 threads, with a gap of serial work on the
 * calling thread between runs (0, 2, 10 and 50 us of busy-waiting), as
 * decode does between MUL_MATs (norms, the activation quantizer, ...).
 * Prints, per gap, the median and min..max over repetitions of
 * (time per run - gap): the cost of publishing a job, waking the workers and
 * collecting them, in microseconds.
 *
 * Build and run (not part of the test suite; speed is measured, never
 * asserted):
 *   cmake --build BUILD --target baton_compute
 *   cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc bench/pool.c \
 *      BUILD/libbaton_compute.a BUILD/libbaton_core.a -lpthread -lm -o BUILD/bench_pool
 *   BUILD/bench_pool [--threads N] [--reps R] [--runs N]
 * The spin of the pool is set by BATON_POOL_SPIN_US (see pool.c); running
 * this with BATON_POOL_SPIN_US=0 gives the condition-variable-only figures.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compute/compute.h"
#include "compute/pool.h"

#define MAX_REPS 41

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void busy_wait(double s)
{
    const double end = now() + s;

    while (now() < end) {
    }
}

struct line {
    volatile uint64_t v;
    char pad[56];
};

static struct line lines[BATON_POOL_MAX_THREADS];

static void tiny_task(void *ctx, uint64_t begin, uint64_t end, uint32_t chunk)
{
    (void)ctx;
    lines[chunk].v += end - begin;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    static const double gaps_us[] = {0, 2, 10, 50};
    unsigned threads = 2, reps = 9, runs = 2000, g, r, i;
    struct baton_pool *pool = NULL;
    double t[MAX_REPS];

    for (i = 1; i < (unsigned)argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < (unsigned)argc)
            threads = (unsigned)atoi(argv[++i]);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < (unsigned)argc)
            reps = (unsigned)atoi(argv[++i]);
        else if (strcmp(argv[i], "--runs") == 0 && i + 1 < (unsigned)argc)
            runs = (unsigned)atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_pool [--threads N] [--reps R] [--runs N]\n");
            return 2;
        }
    }
    if (reps < 1 || reps > MAX_REPS || runs < 1 || threads < 2) {
        fprintf(stderr, "bench_pool: reps 1..%d, runs >= 1, threads >= 2\n", MAX_REPS);
        return 2;
    }
    if (baton_pool_create(threads, &pool) != 0) {
        fprintf(stderr, "bench_pool: cannot create a pool of %u threads\n", threads);
        return 1;
    }
    printf("pool hand-off, %u threads, %u runs per repetition, %u repetitions, "
           "BATON_POOL_SPIN_US=%s\n",
           threads, runs, reps, getenv("BATON_POOL_SPIN_US") ? getenv("BATON_POOL_SPIN_US")
                                                              : "(default)");
    printf("  gap_us   handoff_us median      min      max\n");
    for (g = 0; g < sizeof(gaps_us) / sizeof(gaps_us[0]); g++) {
        const double gap = gaps_us[g] * 1e-6;

        for (r = 0; r < reps; r++) {
            double t0;

            baton_pool_run(pool, threads, threads, tiny_task, NULL); /* warm */
            t0 = now();
            for (i = 0; i < runs; i++) {
                if (gap > 0)
                    busy_wait(gap);
                baton_pool_run(pool, threads, threads, tiny_task, NULL);
            }
            t[r] = ((now() - t0) / runs - gap) * 1e6;
        }
        qsort(t, reps, sizeof(t[0]), cmp_double);
        printf("  %6.0f   %17.2f %8.2f %8.2f\n", gaps_us[g], t[reps / 2], t[0], t[reps - 1]);
    }
    baton_pool_destroy(pool);
    return 0;
}
