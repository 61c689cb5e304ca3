/* MUL_MAT kernel throughput against the memory-bandwidth roofline.
 *
 * Decode (one column): GB/s of weights streamed by MUL_MAT for F32, F16, BF16,
 * Q8_0, Q4_0, Q2_K..Q6_K, Q5_0, Q5_1, IQ4_NL and IQ4_XS weights (--types
 * picks some) of 4096 rows of K = 4096 inputs (--k: the 86M benchmark model's rows have 768 or
 * 2048), cycling through enough distinct
 * matrices (about 192 MiB per type) that nothing stays in the 32 MiB L3,
 * beside a read-only stream of the same size (DECODE_BYTES, summed with
 * the widest loads the CPU has: bench/readbw.h) and a STREAM-like triad
 * (a = b + s*c over doubles, 24 bytes per element counted, as STREAM does)
 * on the same pool, at 1 and 2 threads.
 * roofline = MUL_MAT GB/s / read-only GB/s at the same thread count: a
 * decode step only reads its weights, and the triad (two reads and a
 * write) understates that ceiling on some hosts, so a fraction of the
 * triad can exceed 1; it is printed second ("of triad").
 * Decode from cache ("cached"): the same kernels over the first rows of one
 * matrix (WARM_BYTES of weights: in the 32 MiB L3, and 2 MiB of it in each
 * core's L2 at 2 threads), WARM_PASSES times over: the kernel's speed with
 * the weights in cache, its compute ceiling (the activations are quantized
 * on every call, about 2 % of the time at 4096 inputs). A type whose
 * ceiling is near the triad is compute-bound at decode, not memory-bound
 * (bench/RESULTS.md, fourth round).
 * Prefill (many columns): GFLOP/s (2 K N M / time) of one 4096 x K
 * matrix against M columns (--m, default 64; a batched decode of M
 * sequences is the same product).
 *
 * Built by CMake as build/bench/bench_kernels (speed is measured, never
 * asserted; tests/integration/test_bench_smoke.sh only runs it once):
 *   build/bench/bench_kernels [--reps N] [--k K] [--no-thp] [--isa scalar|avx2|avx512]
 *                             [--no-prefill] [--m M] [--threads 1,2] [--types q4_k,...]
 * K-quant weights are random super-block bytes with binary16 scales of
 * 2^-8..2^-5 (the kernels' speed does not depend on the values).
 *
 * Arms alternate within each repetition (read, triad, then each type, order
 * rotated per repetition); each line gives the median and min..max over
 * the repetitions, and for decode the median over repetitions of the
 * ratio to that repetition's read-only stream (and triad) (robust when other work on the machine
 * comes and goes). "cpu" figures divide by the process CPU time over the
 * thread count instead of wall time (time a thread was descheduled is not
 * counted; time waiting on memory is). Memory is madvise(MADV_HUGEPAGE)d
 * unless --no-thp.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "baton/status.h"
#include "readbw.h"
#include "compute/compute.h"
#include "compute/cpu/matmul.h"
#include "compute/cpu/quant.h"
#include "compute/pool.h"
#include "core/types.h"

static uint32_t K = 4096u; /* inputs per row (--k) */
#define N 4096u
#define DECODE_BYTES (192ull << 20)
static uint32_t PREFILL_M = 64u; /* columns of the prefill product (--m) */
#define MAX_REPS 41
#define WARM_BYTES (4ull << 20)
#define WARM_PASSES 100u

static int use_thp = 1;

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One timed arm: wall and CPU seconds. */
struct span {
    double t0, c0;
};

static struct span span_start(void)
{
    struct span s = {now(), cpu_now()};

    return s;
}

static double last_cpu_s; /* CPU seconds of the last span, over the thread count */

static double span_end(struct span s, uint32_t n_threads)
{
    const double wall = now() - s.t0;

    last_cpu_s = (cpu_now() - s.c0) / n_threads;
    return wall;
}

static void *big_alloc(size_t bytes)
{
    void *p = NULL;

    if (posix_memalign(&p, 2u << 20, bytes ? bytes : 1) != 0) {
        fprintf(stderr, "bench_kernels: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    if (use_thp)
        madvise(p, bytes, MADV_HUGEPAGE);
    memset(p, 0, bytes); /* fault the pages in now */
    return p;
}

static uint64_t rng = 88172645463325252ull;

static uint32_t rng32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static float rng_unit(void)
{
    return (float)(int32_t)rng32() / 2147483648.0f;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

struct stat {
    double v[MAX_REPS];
    int n;
};

static void stat_line(const char *label, const struct stat *s, const char *unit)
{
    double sorted[MAX_REPS];

    memcpy(sorted, s->v, sizeof(double) * (size_t)s->n);
    qsort(sorted, (size_t)s->n, sizeof(double), cmp_double);
    printf("%-28s %8.2f %s  (min %.2f max %.2f, %d reps)\n", label, sorted[s->n / 2], unit,
           sorted[0], sorted[s->n - 1], s->n);
}

static double median(const struct stat *s)
{
    double sorted[MAX_REPS];

    memcpy(sorted, s->v, sizeof(double) * (size_t)s->n);
    qsort(sorted, (size_t)s->n, sizeof(double), cmp_double);
    return sorted[s->n / 2];
}

/* ---- triad ---- */

#define TRIAD_N (20u << 20) /* doubles per array: 160 MiB each */

struct triad_job {
    double *a;
    const double *b, *c;
    double s;
};

static void triad_task(void *ctx, uint64_t i0, uint64_t i1, uint32_t chunk)
{
    const struct triad_job *j = ctx;
    uint64_t i;

    (void)chunk;
    for (i = i0; i < i1; i++)
        j->a[i] = j->b[i] + j->s * j->c[i];
}

static double run_triad(struct baton_pool *pool, struct triad_job *j, double *cpu_gbs)
{
    const struct span sp = span_start();
    double wall;

    baton_pool_run(pool, TRIAD_N, 1024, triad_task, j);
    wall = span_end(sp, baton_pool_threads(pool));
    *cpu_gbs = 24.0 * TRIAD_N / last_cpu_s / 1e9;
    return 24.0 * TRIAD_N / wall / 1e9;
}

/* ---- read-only stream ---- */

struct read_job {
    const uint8_t *p; /* DECODE_BYTES, 2 MiB aligned */
    volatile uint64_t sink;
};

#define READ_CHUNK (1u << 20) /* bytes per pool index */

static void read_task(void *ctx, uint64_t i0, uint64_t i1, uint32_t chunk)
{
    struct read_job *j = ctx;

    (void)chunk;
    j->sink += bench_read_sum(j->p + i0 * READ_CHUNK, (size_t)(i1 - i0) * READ_CHUNK);
}

static double run_read(struct baton_pool *pool, struct read_job *j, double *cpu_gbs)
{
    const struct span sp = span_start();
    double wall;

    baton_pool_run(pool, DECODE_BYTES / READ_CHUNK, 8, read_task, j);
    wall = span_end(sp, baton_pool_threads(pool));
    *cpu_gbs = (double)DECODE_BYTES / last_cpu_s / 1e9;
    return (double)DECODE_BYTES / wall / 1e9;
}

/* ---- MUL_MAT ---- */

struct weights {
    uint32_t type;
    uint8_t *data;
    uint64_t mat_bytes;
    uint32_t n_mats;
};

static const struct {
    uint32_t type;
    const char *name;
} type_names[] = {
    {BATON_TYPE_F32, "f32"},   {BATON_TYPE_F16, "f16"},   {BATON_TYPE_BF16, "bf16"},
    {BATON_TYPE_Q8_0, "q8_0"}, {BATON_TYPE_Q4_0, "q4_0"}, {BATON_TYPE_Q2_K, "q2_k"},
    {BATON_TYPE_Q3_K, "q3_k"}, {BATON_TYPE_Q4_K, "q4_k"}, {BATON_TYPE_Q5_K, "q5_k"},
    {BATON_TYPE_Q6_K, "q6_k"}, {BATON_TYPE_Q5_0, "q5_0"}, {BATON_TYPE_Q5_1, "q5_1"},
    {BATON_TYPE_IQ4_NL, "iq4_nl"}, {BATON_TYPE_IQ4_XS, "iq4_xs"},
};
#define N_TYPES (sizeof(type_names) / sizeof(type_names[0]))

static const char *tname(uint32_t type)
{
    size_t i;

    for (i = 0; i < N_TYPES; i++)
        if (type_names[i].type == type)
            return type_names[i].name;
    return "?";
}

/* A K-quant row: random bytes, then d (and dmin) of each super-block set
 * to +-2^-8..2^-5 (matmul_k.h's layouts: d at 80 / 108 / 0 / 0 / 208, IQ4_XS
 * 0). */
static void fill_k_row(uint32_t type, uint8_t *row, uint64_t rb)
{
    const uint64_t sb = rb / (K / 256);
    const int d_off = type == BATON_TYPE_Q2_K   ? 80
                      : type == BATON_TYPE_Q3_K ? 108
                      : type == BATON_TYPE_Q6_K ? 208
                                                : 0;
    const int has_min = type == BATON_TYPE_Q2_K || type == BATON_TYPE_Q4_K ||
                        type == BATON_TYPE_Q5_K;
    uint64_t i, s;

    for (i = 0; i < rb; i++)
        row[i] = (uint8_t)rng32();
    for (s = 0; s < K / 256; s++) {
        uint8_t *b = row + s * sb;
        const uint16_t d = baton_fp32_to_fp16(rng_unit() * 0.03125f);
        const uint16_t dm = baton_fp32_to_fp16(rng_unit() * 0.03125f);

        b[d_off] = (uint8_t)d;
        b[d_off + 1] = (uint8_t)(d >> 8);
        if (has_min) {
            b[d_off + 2] = (uint8_t)dm;
            b[d_off + 3] = (uint8_t)(dm >> 8);
        }
    }
}

static void fill_weights(struct weights *w, uint32_t type)
{
    const uint64_t rb = baton_cpu_weight_row_bytes(type, K);
    float *row = malloc(sizeof(float) * K);
    uint64_t m, r;
    uint32_t i;

    if (row == NULL) {
        fprintf(stderr, "bench_kernels: out of memory\n");
        exit(1);
    }

    w->type = type;
    w->mat_bytes = rb * N;
    w->n_mats = (uint32_t)((DECODE_BYTES + w->mat_bytes - 1) / w->mat_bytes);
    w->data = big_alloc(w->mat_bytes * w->n_mats);
    for (i = 0; i < K; i++)
        row[i] = rng_unit() * 0.05f;
    for (m = 0; m < w->n_mats; m++)
        for (r = 0; r < N; r++) {
            row[rng32() % K] = rng_unit() * 0.05f; /* rows differ a little */
            if (baton_cpu_type_is_k(type))
                fill_k_row(type, w->data + m * w->mat_bytes + r * rb, rb);
            else if (baton_quantize_row(type, row, w->data + m * w->mat_bytes + r * rb, K) != 0) {
                fprintf(stderr, "bench_kernels: quantize failed\n");
                exit(1);
            }
        }
    free(row);
}

/* One pass over every matrix, one column each: GB/s of weights. */
static double run_decode(struct baton_pool *pool, const struct weights *w, const float *x, float *y,
                         void *work, double *cpu_gbs)
{
    const struct span sp = span_start();
    const double bytes = (double)w->mat_bytes * w->n_mats;
    double wall;
    uint32_t m;

    for (m = 0; m < w->n_mats; m++)
        baton_cpu_mul_mat_typed(pool, w->type, w->data + m * w->mat_bytes, x, y, K, N, 1, work);
    wall = span_end(sp, baton_pool_threads(pool));
    *cpu_gbs = bytes / last_cpu_s / 1e9;
    return bytes / wall / 1e9;
}

/* WARM_PASSES passes over the first WARM_BYTES of rows of the first
 * matrix, one column: GB/s of weights read (from cache after the first
 * pass, which is not timed). */
static double run_decode_warm(struct baton_pool *pool, const struct weights *w, const float *x,
                              float *y, void *work)
{
    const uint64_t rb = baton_cpu_weight_row_bytes(w->type, K);
    const uint64_t rows = WARM_BYTES / rb < N ? WARM_BYTES / rb : N;
    const double bytes = (double)rb * rows * WARM_PASSES;
    double t0;
    uint32_t i;

    baton_cpu_mul_mat_typed(pool, w->type, w->data, x, y, K, rows, 1, work);
    t0 = now();
    for (i = 0; i < WARM_PASSES; i++)
        baton_cpu_mul_mat_typed(pool, w->type, w->data, x, y, K, rows, 1, work);
    return bytes / (now() - t0) / 1e9;
}

/* One matrix against PREFILL_M columns: GFLOP/s. */
static double run_prefill(struct baton_pool *pool, const struct weights *w, const float *x,
                          float *y, void *work)
{
    const double t0 = now();

    baton_cpu_mul_mat_typed(pool, w->type, w->data, x, y, K, N, PREFILL_M, work);
    return 2.0 * K * N * PREFILL_M / (now() - t0) / 1e9;
}

int main(int argc, char **argv)
{
    uint32_t types[N_TYPES];
    int n_types = 0;
    uint64_t work_bytes = 0;
    int reps = 9, prefill = 1, ti, rep, a, n_threads_list = 2;
    uint32_t threads_list[2] = {1, 2};
    struct weights w[N_TYPES];
    struct triad_job tj;
    struct read_job rj;
    float *x, *y;
    void *work;

    for (a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--reps") == 0 && a + 1 < argc) {
            char *end;
            const long v = strtol(argv[++a], &end, 10);

            if (end == argv[a] || *end != '\0' || v < 1 || v > MAX_REPS) {
                fprintf(stderr, "bench_kernels: --reps: '%s' (want 1..%d)\n", argv[a],
                        MAX_REPS);
                return 2;
            }
            reps = (int)v;
        } else if (strcmp(argv[a], "--k") == 0 && a + 1 < argc) {
            char *end;
            const long v = strtol(argv[++a], &end, 10);

            if (end == argv[a] || *end != '\0' || v < 32 || v > 65536 || v % 32 != 0) {
                fprintf(stderr,
                        "bench_kernels: --k: '%s' (want a multiple of 32 in 32..65536)\n",
                        argv[a]);
                return 2;
            }
            K = (uint32_t)v;
        } else if (strcmp(argv[a], "--m") == 0 && a + 1 < argc) {
            char *end;
            const long v = strtol(argv[++a], &end, 10);

            if (end == argv[a] || *end != '\0' || v < 1 || v > 4096) {
                fprintf(stderr, "bench_kernels: --m: '%s' (want 1..4096 columns)\n", argv[a]);
                return 2;
            }
            PREFILL_M = (uint32_t)v;
        } else if (strcmp(argv[a], "--no-thp") == 0) {
            use_thp = 0;
        } else if (strcmp(argv[a], "--no-prefill") == 0) {
            prefill = 0;
        } else if (strcmp(argv[a], "--threads") == 0 && a + 1 < argc) {
            const char *arg = argv[++a], *s = arg;

            n_threads_list = 0;
            while (*s && n_threads_list < 2) {
                char *end;
                const unsigned long v = strtoul(s, &end, 10);

                if (end == s || v < 1 || v > 64 || (*end != ',' && *end != '\0')) {
                    fprintf(stderr,
                            "bench_kernels: --threads: '%s' (want one or two counts 1..64, "
                            "e.g. 1,2)\n",
                            arg);
                    return 2;
                }
                threads_list[n_threads_list++] = (uint32_t)v;
                s = *end == ',' ? end + 1 : end;
            }
            if (*s != '\0' || n_threads_list == 0 || arg[strlen(arg) - 1] == ',') {
                fprintf(stderr,
                        "bench_kernels: --threads: '%s' (want one or two counts 1..64, "
                        "e.g. 1,2)\n",
                        arg);
                return 2;
            }
        } else if (strcmp(argv[a], "--types") == 0 && a + 1 < argc) {
            char *list = argv[++a], *tok;

            n_types = 0;
            for (tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
                size_t i;

                for (i = 0; i < N_TYPES && strcmp(tok, type_names[i].name) != 0; i++)
                    ;
                if (i == N_TYPES || n_types == (int)N_TYPES) {
                    fprintf(stderr,
                            "bench_kernels: --types: '%s' (want a comma-separated list of at "
                            "most %d of "
                            "f32,f16,bf16,q8_0,q4_0,q2_k,q3_k,q4_k,q5_k,q6_k,q5_0,q5_1,iq4_nl,"
                            "iq4_xs)\n",
                            tok, (int)N_TYPES);
                    return 2;
                }
                types[n_types++] = type_names[i].type;
            }
        } else if (strcmp(argv[a], "--isa") == 0 && a + 1 < argc) {
            const char *s = argv[++a];

            if (strcmp(s, "scalar") != 0 && strcmp(s, "avx2") != 0 && strcmp(s, "avx512") != 0) {
                fprintf(stderr, "bench_kernels: --isa: '%s' (want scalar, avx2 or avx512)\n", s);
                return 2;
            }
            baton_cpu_isa_set(strcmp(s, "scalar") == 0 ? BATON_CPU_ISA_SCALAR
                              : strcmp(s, "avx2") == 0 ? BATON_CPU_ISA_AVX2
                                                       : BATON_CPU_ISA_AVX512);
        } else {
            const int help = strcmp(argv[a], "--help") == 0 || strcmp(argv[a], "-h") == 0;
            static const char *const with_value[] = {"--reps", "--k",     "--m",
                                                     "--threads", "--types", "--isa"};
            size_t o;

            for (o = 0; !help && o < sizeof(with_value) / sizeof(with_value[0]); o++)
                if (strcmp(argv[a], with_value[o]) == 0) {
                    fprintf(stderr, "bench_kernels: %s needs a value (--help)\n", argv[a]);
                    return 2;
                }
            if (!help)
                fprintf(stderr, "bench_kernels: unknown option '%s'\n", argv[a]);
            fprintf(help ? stdout : stderr,
                    "usage: %s [--reps N] [--k K] [--m M] [--no-thp] [--no-prefill] [--threads 1,2] "
                    "[--isa scalar|avx2|avx512] [--types f32,q4_k,...]\n"
                    "MUL_MAT kernel throughput: decode GB/s (one column) against the read-only\n"
                    "stream, prefill GFLOP/s (M columns). bench/kernels.c's header describes each "
                    "figure.\n"
                    "  --reps N      repetitions, 1..41 (default 9); arms alternate within each\n"
                    "  --k K         inputs per weight row, a multiple of 32 in 32..65536 (K-quants: "
                    "of 256; default 4096)\n"
                    "  --m M         columns of the prefill product, 1..4096 (default 64)\n"
                    "  --threads T   one or two pool sizes, 1..64 (default 1,2)\n"
                    "  --types LIST  of f32,f16,bf16,q8_0,q4_0,q2_k,q3_k,q4_k,q5_k,q6_k,q5_0,"
                    "q5_1,\n"
                    "                iq4_nl,iq4_xs (default all)\n"
                    "  --isa L       kernel level scalar, avx2 or avx512 (default: the best the CPU "
                    "has)\n"
                    "  --no-prefill  decode figures only; --no-thp: no transparent huge pages\n",
                    argv[0]);
            return help ? 0 : 2;
        }
    }
    if (n_types == 0)
        for (n_types = 0; n_types < (int)N_TYPES; n_types++)
            types[n_types] = type_names[n_types].type;
    if (K % 256 != 0)
        for (ti = 0; ti < n_types; ti++)
            if (baton_cpu_type_is_k(types[ti])) {
                fprintf(stderr, "bench_kernels: --k: K-quant types need a multiple of 256\n");
                return 2;
            }
    printf("kernel level %s, %u x %u weights, THP %s, %d reps; read-only stream: %llu MiB, "
           "%s loads\n",
           baton_cpu_isa_name(baton_cpu_isa()), K, N, use_thp ? "madvise" : "off", reps,
           DECODE_BYTES >> 20, bench_read_level());
    rj.p = big_alloc(DECODE_BYTES);
    memset((void *)rj.p, 1, DECODE_BYTES);
    rj.sink = 0;

    tj.a = big_alloc(TRIAD_N * sizeof(double));
    tj.b = big_alloc(TRIAD_N * sizeof(double));
    tj.c = big_alloc(TRIAD_N * sizeof(double));
    tj.s = 3.0;
    for (a = 0; a < (int)TRIAD_N; a++) {
        ((double *)tj.b)[a] = 1.0;
        ((double *)tj.c)[a] = 2.0;
    }
    for (ti = 0; ti < n_types; ti++)
        fill_weights(&w[ti], types[ti]);
    x = big_alloc(sizeof(float) * K * PREFILL_M);
    y = big_alloc(sizeof(float) * N * PREFILL_M);
    for (ti = 0; ti < n_types; ti++) {
        const uint64_t wb = baton_cpu_mul_mat_work_bytes(types[ti], K, PREFILL_M);

        work_bytes = wb > work_bytes ? wb : work_bytes;
    }
    work = big_alloc(work_bytes);
    for (a = 0; a < (int)(K * PREFILL_M); a++)
        x[a] = rng_unit();

    for (a = 0; a < n_threads_list; a++) {
        struct baton_pool *pool;
        struct stat triad = {{0}, 0}, triad_cpu = {{0}, 0}, rd = {{0}, 0}, rd_cpu = {{0}, 0},
                    dec[N_TYPES], dec_cpu[N_TYPES], ratio[N_TYPES], ratio_cpu[N_TYPES],
                    tratio[N_TYPES], tratio_cpu[N_TYPES], pre[N_TYPES], warm[N_TYPES];
        char label[64];
        double cpu;

        if (baton_pool_create(threads_list[a], &pool) != 0) {
            fprintf(stderr, "bench_kernels: pool of %u threads failed\n", threads_list[a]);
            return 1;
        }
        memset(dec, 0, sizeof(dec));
        memset(dec_cpu, 0, sizeof(dec_cpu));
        memset(ratio, 0, sizeof(ratio));
        memset(ratio_cpu, 0, sizeof(ratio_cpu));
        memset(tratio, 0, sizeof(tratio));
        memset(tratio_cpu, 0, sizeof(tratio_cpu));
        memset(pre, 0, sizeof(pre));
        memset(warm, 0, sizeof(warm));
        run_read(pool, &rj, &cpu); /* warm-up */
        run_triad(pool, &tj, &cpu);
        for (ti = 0; ti < n_types; ti++)
            run_decode(pool, &w[ti], x, y, work, &cpu);
        for (rep = 0; rep < reps; rep++) {
            const double rr = run_read(pool, &rj, &cpu), rr_cpu = cpu;
            const double tr = run_triad(pool, &tj, &cpu), tr_cpu = cpu;

            rd.v[rd.n++] = rr;
            rd_cpu.v[rd_cpu.n++] = rr_cpu;
            triad.v[triad.n++] = tr;
            triad_cpu.v[triad_cpu.n++] = tr_cpu;
            for (ti = 0; ti < n_types; ti++) {
                const int t = (ti + rep) % n_types;
                const double g = run_decode(pool, &w[t], x, y, work, &cpu);

                dec[t].v[dec[t].n++] = g;
                dec_cpu[t].v[dec_cpu[t].n++] = cpu;
                ratio[t].v[ratio[t].n++] = g / rr;
                ratio_cpu[t].v[ratio_cpu[t].n++] = cpu / rr_cpu;
                tratio[t].v[tratio[t].n++] = g / tr;
                tratio_cpu[t].v[tratio_cpu[t].n++] = cpu / tr_cpu;
                warm[t].v[warm[t].n++] = run_decode_warm(pool, &w[t], x, y, work);
            }
            if (prefill)
                for (ti = 0; ti < n_types; ti++) {
                    const int t = (ti + rep) % n_types;

                    pre[t].v[pre[t].n++] = run_prefill(pool, &w[t], x, y, work);
                }
        }
        printf("\n-- %u thread(s) --\n", threads_list[a]);
        stat_line("read-only", &rd, "GB/s");
        stat_line("read-only (cpu)", &rd_cpu, "GB/s");
        stat_line("triad", &triad, "GB/s");
        stat_line("triad (cpu)", &triad_cpu, "GB/s");
        for (ti = 0; ti < n_types; ti++) {
            snprintf(label, sizeof(label), "decode %s", tname(types[ti]));
            stat_line(label, &dec[ti], "GB/s");
            snprintf(label, sizeof(label), "decode %s (cpu)", tname(types[ti]));
            stat_line(label, &dec_cpu[ti], "GB/s");
            printf("%-28s %8.3f (cpu %.3f)  of triad %.3f (cpu %.3f)\n",
                   "  roofline (per-rep ratio)", median(&ratio[ti]), median(&ratio_cpu[ti]),
                   median(&tratio[ti]), median(&tratio_cpu[ti]));
            snprintf(label, sizeof(label), "decode %s cached", tname(types[ti]));
            stat_line(label, &warm[ti], "GB/s");
        }
        if (prefill)
            for (ti = 0; ti < n_types; ti++) {
                snprintf(label, sizeof(label), "prefill %s m=%u", tname(types[ti]),
                         PREFILL_M);
                stat_line(label, &pre[ti], "GFLOP/s");
            }
        baton_pool_destroy(pool);
    }
    return 0;
}
