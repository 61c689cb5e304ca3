/* Same-process A/B of two builds of one kernel file (bench/kernel-ab.sh).
 *
 *   kernel_ab TYPE K ROWS MATRICES CALLS
 *
 * Links two builds of a kernel table (baton_mm_ab_A: the file at a git
 * revision, baton_mm_ab_B: the working tree's; see kernel-ab.sh) and times
 * one-column products (decode) of ROWS x K weights of TYPE (q8_0, q4_0,
 * q2_k..q6_k; random quants, finite scales), the arms alternating call by
 * call and in alternating order, so a noisy host slows both alike. With
 * MATRICES > 1 each call reads a different matrix than the call before
 * (arm A the even ones, B the odd ones; weights of MATRICES x ROWS rows):
 * beyond the caches when their total is, and neither arm reads what the
 * other just brought in. The activations are quantized once (the level's
 * quantizer is the scalar reference's bytes). At the end both arms run on
 * matrix 0 and their outputs are compared bit for bit.
 *
 * Prints one line (GB = 1e9 bytes of weights per second):
 *   kernel_ab type=T k=K rows=R matrices=M calls=C A_best_GBs=X
 *   A_median_GBs=Y B_best_GBs=X B_median_GBs=Y B_over_A_median=Z bits=equal|differ
 * Built with -DKAB_ISA=BATON_CPU_ISA_AVX2 or BATON_CPU_ISA_AVX512, the
 * level of the file under test: on a CPU without that level it says so and
 * exits 3 before calling a kernel (the instructions would fault).
 * Exit status: 0, 1 the bits differ or memory failed, 2 usage, 3 the CPU
 * lacks the level. Figures only, never a test. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compute/cpu/matmul.h"
#include "compute/pool.h"
#include "core/types.h"

extern const struct baton_mm_kernels baton_mm_ab_A, baton_mm_ab_B;

#ifndef KAB_ISA
#error "build with -DKAB_ISA=BATON_CPU_ISA_AVX2 or BATON_CPU_ISA_AVX512 (bench/kernel-ab.sh does)"
#endif

struct ab_type {
    const char *name;
    uint32_t type;
    uint32_t block_bytes, block_elems;
    int d_off, dmin_off; /* the fp16 scales set finite; -1: none */
};

static const struct ab_type ab_types[] = {
    {"q8_0", BATON_TYPE_Q8_0, 34, 32, 0, -1},   {"q4_0", BATON_TYPE_Q4_0, 18, 32, 0, -1},
    {"q2_k", BATON_TYPE_Q2_K, 84, 256, 80, 82}, {"q3_k", BATON_TYPE_Q3_K, 110, 256, 108, -1},
    {"q4_k", BATON_TYPE_Q4_K, 144, 256, 0, 2},  {"q5_k", BATON_TYPE_Q5_K, 176, 256, 0, 2},
    {"q6_k", BATON_TYPE_Q6_K, 210, 256, 208, -1},
};

static uint64_t rng_state = 0x9E3779B97F4A7C15u;

static uint32_t rng32(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}

static double now_s(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static baton_mm_rows_fn ab_fn(const struct baton_mm_kernels *k, uint32_t type)
{
    switch (type) {
    case BATON_TYPE_Q8_0:
        return k->q8_0;
    case BATON_TYPE_Q4_0:
        return k->q4_0;
    case BATON_TYPE_Q2_K:
        return k->q2_k;
    case BATON_TYPE_Q3_K:
        return k->q3_k;
    case BATON_TYPE_Q4_K:
        return k->q4_k;
    case BATON_TYPE_Q5_K:
        return k->q5_k;
    default:
        return k->q6_k;
    }
}

static int parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *end;
    unsigned long long v;

    if (s[0] < '0' || s[0] > '9')
        return -1;
    v = strtoull(s, &end, 10);
    if (*end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    const struct ab_type *t = NULL;
    uint64_t k, rows, nmat, calls, nblk, row_bytes, mat_bytes, act_bytes, i, r, b;
    const struct baton_mm_kernels *arms[2] = {&baton_mm_ab_A, &baton_mm_ab_B};
    uint8_t *w, *act;
    float *x, *y[2];
    double *secs[2], best[2], median[2];
    int a, bits_equal;

    if (argc == 6)
        for (i = 0; i < sizeof(ab_types) / sizeof(ab_types[0]); i++)
            if (strcmp(argv[1], ab_types[i].name) == 0)
                t = &ab_types[i];
    if (t == NULL || parse_u64(argv[2], t->block_elems, 1u << 20, &k) != 0 ||
        k % t->block_elems != 0 || parse_u64(argv[3], 1, 1u << 20, &rows) != 0 ||
        parse_u64(argv[4], 1, 4096, &nmat) != 0 || parse_u64(argv[5], 1, 1000000, &calls) != 0) {
        fprintf(stderr, "usage: kernel_ab q8_0|q4_0|q2_k|q3_k|q4_k|q5_k|q6_k K ROWS MATRICES CALLS\n"
                        "  K a multiple of 256 (K-quants) or 32, up to 2^20\n");
        return 2;
    }
    if (baton_cpu_isa_detect() < KAB_ISA) {
        fprintf(stderr, "kernel_ab: this CPU lacks the %s level (it has %s); nothing to compare\n",
                baton_cpu_isa_name(KAB_ISA), baton_cpu_isa_name(baton_cpu_isa_detect()));
        return 3;
    }
    nblk = k / t->block_elems;
    row_bytes = nblk * t->block_bytes;
    mat_bytes = rows * row_bytes;
    act_bytes = t->block_elems == 256 ? baton_cpu_act_k_col_bytes(k) : baton_cpu_act_col_bytes(k);
    w = aligned_alloc(4096, (mat_bytes * nmat + 4095) / 4096 * 4096);
    act = aligned_alloc(64, (act_bytes + 63) / 64 * 64);
    x = malloc(k * sizeof(float));
    y[0] = malloc(rows * sizeof(float));
    y[1] = malloc(rows * sizeof(float));
    secs[0] = malloc(calls * sizeof(double));
    secs[1] = malloc(calls * sizeof(double));
    if (!w || !act || !x || !y[0] || !y[1] || !secs[0] || !secs[1]) {
        fprintf(stderr, "kernel_ab: out of memory (%llu bytes of weights)\n",
                (unsigned long long)(mat_bytes * nmat));
        return 1;
    }
    for (i = 0; i < mat_bytes * nmat; i++)
        w[i] = (uint8_t)rng32();
    for (r = 0; r < rows * nmat; r++)
        for (b = 0; b < nblk; b++) {
            uint8_t *blk = w + r * row_bytes + b * t->block_bytes;
            /* fp16 in [2^-9, 2^-8): finite, normal */
            const uint16_t h = (uint16_t)(0x1800 + (rng32() & 0x3FF));

            memcpy(blk + t->d_off, &h, sizeof(h));
            if (t->dmin_off >= 0)
                memcpy(blk + t->dmin_off, &h, sizeof(h));
        }
    for (i = 0; i < k; i++)
        x[i] = (float)rng32() / 4294967296.0f - 0.5f;
    {
        struct baton_pool *pool;

        if (baton_pool_create(1, &pool) != 0) {
            fprintf(stderr, "kernel_ab: no pool\n");
            return 1;
        }
        if (t->block_elems == 256)
            baton_cpu_quantize_act_k(pool, x, k, 1, act);
        else
            baton_cpu_quantize_act(pool, t->type, x, k, 1, act);
        baton_pool_destroy(pool);
    }
    for (i = 0; i < calls + 2; i++)
        for (a = 0; a < 2; a++) {
            const int arm = (i & 1) ? 1 - a : a;
            const uint64_t m = (i * 2 + (uint64_t)arm) % nmat;
            const struct baton_mm mm = {w + m * mat_bytes, row_bytes, x,    act, act_bytes,
                                        y[arm],            k,         rows, 1,   rows};
            const double t0 = now_s();

            ab_fn(arms[arm], t->type)(&mm, 0, rows);
            if (i >= 2) /* two warm-up rounds */
                secs[arm][i - 2] = now_s() - t0;
        }
    for (a = 0; a < 2; a++) {
        const struct baton_mm mm = {w, row_bytes, x, act, act_bytes, y[a], k, rows, 1, rows};

        ab_fn(arms[a], t->type)(&mm, 0, rows);
        qsort(secs[a], calls, sizeof(double), cmp_double);
        best[a] = (double)mat_bytes / secs[a][0] / 1e9;
        median[a] = (double)mat_bytes / secs[a][calls / 2] / 1e9;
    }
    bits_equal = memcmp(y[0], y[1], rows * sizeof(float)) == 0;
    printf("kernel_ab type=%s k=%llu rows=%llu matrices=%llu calls=%llu A_best_GBs=%.2f "
           "A_median_GBs=%.2f B_best_GBs=%.2f B_median_GBs=%.2f B_over_A_median=%.3f bits=%s\n",
           t->name, (unsigned long long)k, (unsigned long long)rows, (unsigned long long)nmat,
           (unsigned long long)calls, best[0], median[0], best[1], median[1], median[1] / median[0],
           bits_equal ? "equal" : "differ");
    free(w);
    free(act);
    free(x);
    free(y[0]);
    free(y[1]);
    free(secs[0]);
    free(secs[1]);
    return bits_equal ? 0 : 1;
}
