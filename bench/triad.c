/* STREAM-like triad: memory bandwidth at a given thread count, for the
 * roofline of bench/roofline.sh.
 *
 * a[i] = b[i] + s * c[i] over doubles, three arrays of --mib MiB each
 * (default 128, far beyond the 32 MiB L3 here), split into one contiguous
 * slice per thread; each thread first touches its own slice. Counted bytes
 * per element: 24 (two reads, one write), as STREAM counts them (the write
 * allocate's extra read is not counted). Memory is madvise(MADV_HUGEPAGE)d
 * unless --no-thp, like batond's weight buffers (src/server/handles.c).
 * The threads are created once and meet at a barrier before and after every
 * pass, so a pass's time covers all slices.
 *
 *   triad [--threads N] [--passes P] [--mib M] [--no-thp]
 *
 * With --kernel read it measures the read-only bandwidth instead (the
 * ceiling of a decode step, which only reads its weights): one array of
 * --mib MiB, each thread summing its slice with the widest loads the CPU
 * has (bench/readbw.h), 8 bytes counted per element.
 *
 * Prints one line: `triad threads=N best_GBs=X median_GBs=Y min_GBs=Z
 * passes=P mib=M` (`read ...` with --kernel read; GB = 1e9 bytes).
 * Figures only, never a test. Own code; the triad kernel and the 24-byte
 * convention follow the description of McCalpin's STREAM benchmark.
 *
 *   triad [--kernel triad|read] [--threads N] [--passes P] [--mib M] [--no-thp]
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "readbw.h"

#define MAX_THREADS 64
#define MAX_PASSES 1000

struct shared {
    double *a, *b, *c;
    size_t n;
    unsigned threads, passes;
    int read_only;
    volatile uint64_t sink;
    pthread_barrier_t bar;
    double t[MAX_PASSES];
};

struct worker {
    struct shared *sh;
    unsigned id;
};

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Thread id's slice [begin, end) of the n elements; for the read kernel
 * in whole 64-byte lines (8 doubles), so its aligned loads stay aligned. */
static void slice(const struct shared *sh, unsigned id, size_t *begin, size_t *end)
{
    const size_t unit = sh->read_only ? 8 : 1, n = sh->n / unit;
    const size_t base = n / sh->threads, rem = n % sh->threads;

    *begin = (base * id + (id < rem ? id : rem)) * unit;
    *end = *begin + (base + (id < rem ? 1 : 0)) * unit;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct shared *sh = w->sh;
    const double s = 3.0;
    size_t begin, end, i;
    unsigned p;

    slice(sh, w->id, &begin, &end);
    for (i = begin; i < end; i++) { /* first touch by the owner */
        if (!sh->read_only) {
            sh->a[i] = 0.0;
            sh->c[i] = 2.0;
        }
        sh->b[i] = 1.0;
    }
    for (p = 0; p < sh->passes + 1; p++) { /* pass 0 warms up */
        double t0 = 0;

        pthread_barrier_wait(&sh->bar);
        if (w->id == 0)
            t0 = now();
        if (sh->read_only)
            sh->sink += bench_read_sum(sh->b + begin, (end - begin) * sizeof(double));
        else
            for (i = begin; i < end; i++)
                sh->a[i] = sh->b[i] + s * sh->c[i];
        pthread_barrier_wait(&sh->bar);
        if (w->id == 0 && p > 0)
            sh->t[p - 1] = now() - t0;
    }
    return NULL;
}

static int cmp_double(const void *x, const void *y)
{
    const double a = *(const double *)x, b = *(const double *)y;

    return a < b ? -1 : a > b;
}

static double *map_array(size_t bytes, int thp)
{
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (m == MAP_FAILED)
        return NULL;
    if (thp)
        (void)madvise(m, bytes, MADV_HUGEPAGE);
    return m;
}

static void usage(FILE *f)
{
    fputs("usage: bench_triad [--kernel triad|read] [--threads N] [--passes P] [--mib M]\n"
          "                   [--no-thp]\n"
          "\n"
          "Memory bandwidth at a given thread count (bench/roofline.sh's ceiling).\n"
          "\n"
          "  --kernel triad  (default) STREAM-like a[i] = b[i] + s * c[i] over doubles,\n"
          "                  three arrays of M MiB, 24 bytes counted per element\n"
          "  --kernel read   read-only: one array of M MiB summed with the widest loads\n"
          "                  the CPU has, 8 bytes counted per element (the ceiling of a\n"
          "                  decode step, which only reads its weights)\n"
          "  --threads N     threads, 1..64, one contiguous slice each (default 1)\n"
          "  --passes P      timed passes, 1..1000 (default 10)\n"
          "  --mib M         MiB per array, 1..65536 (default 128)\n"
          "  --no-thp        no madvise(MADV_HUGEPAGE)\n"
          "  -h, --help      this help\n"
          "\n"
          "Prints one line (GB = 1e9 bytes):\n"
          "  triad threads=N best_GBs=X median_GBs=Y min_GBs=Z passes=P mib=M\n"
          "(`read ...` with --kernel read). Figures only, never a test.\n"
          "Exit status: 0, 1 the memory cannot be mapped, 2 usage.\n",
          f);
}

int main(int argc, char **argv)
{
    struct shared sh;
    struct worker w[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    unsigned threads = 1, passes = 10, mib = 128, i, started = 0;
    int thp = 1, rc = 1, read_only = 0;
    size_t bytes;
    double gbs[MAX_PASSES];

    for (i = 1; i < (unsigned)argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < (unsigned)argc)
            threads = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--passes") == 0 && i + 1 < (unsigned)argc)
            passes = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--mib") == 0 && i + 1 < (unsigned)argc)
            mib = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--no-thp") == 0)
            thp = 0;
        else if (strcmp(argv[i], "--kernel") == 0 && i + 1 < (unsigned)argc &&
                 (strcmp(argv[i + 1], "triad") == 0 || strcmp(argv[i + 1], "read") == 0))
            read_only = strcmp(argv[++i], "read") == 0;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "bench_triad: unknown option or missing value: '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (threads < 1 || threads > MAX_THREADS || passes < 1 || passes > MAX_PASSES || mib < 1 ||
        mib > 65536) {
        fprintf(stderr, "triad: threads 1..%d, passes 1..%d, mib 1..65536\n", MAX_THREADS,
                MAX_PASSES);
        return 2;
    }
    memset(&sh, 0, sizeof(sh));
    bytes = (size_t)mib << 20;
    sh.n = bytes / sizeof(double);
    sh.threads = threads;
    sh.passes = passes;
    sh.read_only = read_only;
    /* slices are whole 64-byte lines for the read kernel's aligned loads */
    sh.n = read_only ? bytes / 64 * 8 : sh.n;
    if (!read_only) {
        sh.a = map_array(bytes, thp);
        sh.c = map_array(bytes, thp);
    }
    sh.b = map_array(bytes, thp);
    if (!sh.b || (!read_only && (!sh.a || !sh.c))) {
        fprintf(stderr, "triad: cannot map %u x %u MiB\n", read_only ? 1u : 3u, mib);
        goto out;
    }
    if (pthread_barrier_init(&sh.bar, NULL, threads) != 0)
        goto out;
    for (i = 0; i < threads; i++) {
        w[i].sh = &sh;
        w[i].id = i;
    }
    for (i = 1; i < threads; i++) {
        if (pthread_create(&th[i], NULL, worker_main, &w[i]) != 0) {
            fprintf(stderr, "triad: cannot start thread %u\n", i);
            /* the started ones wait at the barrier forever: exit the process */
            exit(1);
        }
        started++;
    }
    worker_main(&w[0]);
    for (i = 1; i <= started; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&sh.bar);
    for (i = 0; i < passes; i++)
        gbs[i] = (read_only ? 8.0 : 24.0) * (double)sh.n / sh.t[i] / 1e9;
    qsort(gbs, passes, sizeof(gbs[0]), cmp_double);
    printf("%s threads=%u best_GBs=%.2f median_GBs=%.2f min_GBs=%.2f passes=%u mib=%u\n",
           read_only ? "read" : "triad", threads, gbs[passes - 1], gbs[passes / 2], gbs[0], passes, mib);
    rc = 0;
out:
    if (sh.a)
        munmap(sh.a, bytes);
    if (sh.b)
        munmap(sh.b, bytes);
    if (sh.c)
        munmap(sh.c, bytes);
    return rc;
}
