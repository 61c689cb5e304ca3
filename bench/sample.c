/* SAMPLE's cost per token: baton_cpu_sample (a radix selection and sort
 * of the candidates) beside its plain reference (tests/unit/sample_ref.h: a
 * heapsort of every candidate, what the kernel did before), one row at a
 * time on one thread, for Llama 2's and Qwen 2's vocabulary sizes and the
 * sampling settings people use. The logits are a bell-shaped spread (a sum
 * of three uniforms times 4), new for each repetition; each repetition runs
 * both arms on the same row (order alternating) and checks that they draw
 * the same token. Prints the median and min..max milliseconds per token.
 *
 * Built by CMake as build/bench/bench_sample (speed is measured, never
 * asserted):
 *   build/bench/bench_sample [--reps N]   (CMake target bench_sample)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../tests/unit/sample_ref.h"

#define MAX_REPS 1000

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng = 0x243f6a8885a308d3ull;

static double rng_unit(void)
{
    rng += 0x9E3779B97F4A7C15ull;
    return (double)(sample_ref_mix64(rng) >> 11) / 9007199254740992.0;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static void print_stat(double *ms, int n)
{
    qsort(ms, (size_t)n, sizeof *ms, cmp_double);
    printf(" %9.3f (%.3f..%.3f)", ms[n / 2], ms[0], ms[n - 1]);
}

int main(int argc, char **argv)
{
    static const uint32_t vocab[] = {32000, 152064};
    static const struct {
        float temp, top_p;
        uint32_t top_k;
    } cells[] = {{0.8f, 1.0f, 0}, {0.8f, 0.95f, 0}, {0.8f, 0.95f, 40}, {0.8f, 1.0f, 40}};
    static double ms_new[MAX_REPS], ms_ref[MAX_REPS];
    int reps = 21;

    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--reps") == 0 && a + 1 < argc) {
            char *end;
            const long v = strtol(argv[++a], &end, 10);

            if (end == argv[a] || *end != '\0' || v < 1 || v > MAX_REPS) {
                fprintf(stderr, "bench_sample: --reps: '%s' (want 1..%d)\n", argv[a], MAX_REPS);
                return 2;
            }
            reps = (int)v;
        } else {
            fprintf(stderr, "usage: bench_sample [--reps N]\n");
            return strcmp(argv[a], "--help") == 0 ? 0 : 2;
        }
    }
    printf("SAMPLE, one row, one thread: ms per token, median (min..max) of %d\n", reps);
    printf("%7s %5s %5s %5s %27s %27s %7s\n", "vocab", "temp", "top_p", "top_k",
           "baton_cpu_sample", "reference (heapsort)", "ratio");
    for (size_t v = 0; v < sizeof vocab / sizeof vocab[0]; v++) {
        const uint64_t k = vocab[v];
        float *x = malloc(k * sizeof *x);
        struct baton_cpu_sample_entry *work = malloc(2 * k * sizeof *work);

        if (x == NULL || work == NULL) {
            fprintf(stderr, "bench_sample: out of memory\n");
            return 1;
        }
        for (size_t c = 0; c < sizeof cells / sizeof cells[0]; c++) {
            int32_t p[6] = {0};
            double ratio;

            memcpy(&p[0], &cells[c].temp, 4);
            memcpy(&p[1], &cells[c].top_p, 4);
            p[2] = (int32_t)cells[c].top_k;
            p[3] = 1234;
            for (int r = 0; r < reps; r++) {
                int32_t got = -1, want;
                double t0, t1, t2;

                for (uint64_t i = 0; i < k; i++)
                    x[i] = (float)((rng_unit() + rng_unit() + rng_unit() - 1.5) * 4.0);
                p[5] = r;
                if (r % 2 == 0) {
                    t0 = now();
                    (void)baton_cpu_sample(NULL, x, k, 1, p, &got, work);
                    t1 = now();
                    want = sample_ref_row(x, k, p, work);
                    t2 = now();
                    ms_new[r] = 1e3 * (t1 - t0);
                    ms_ref[r] = 1e3 * (t2 - t1);
                } else {
                    t0 = now();
                    want = sample_ref_row(x, k, p, work);
                    t1 = now();
                    (void)baton_cpu_sample(NULL, x, k, 1, p, &got, work);
                    t2 = now();
                    ms_ref[r] = 1e3 * (t1 - t0);
                    ms_new[r] = 1e3 * (t2 - t1);
                }
                if (got != want) {
                    fprintf(stderr, "bench_sample: token %d, the reference %d\n", got, want);
                    return 1;
                }
            }
            printf("%7llu %5.2f %5.2f %5u", (unsigned long long)k, (double)cells[c].temp,
                   (double)cells[c].top_p, cells[c].top_k);
            print_stat(ms_new, reps);
            ratio = ms_new[reps / 2];
            print_stat(ms_ref, reps);
            printf(" %6.1fx\n", ms_ref[reps / 2] / ratio);
        }
        free(x);
        free(work);
    }
    return 0;
}
