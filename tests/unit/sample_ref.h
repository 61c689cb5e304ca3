/* SAMPLE's reference: one row as core/ops.h states it, written the plain
 * way (every candidate's p, a comparison sort of them all, then top_k,
 * top_p and the draw), as baton_cpu_sample computed it before its radix
 * selection. tests/unit/test_compute_sample.c compares the kernel with it;
 * bench/sample.c times both. */
#ifndef BATON_TEST_SAMPLE_REF_H
#define BATON_TEST_SAMPLE_REF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "compute/cpu/kernels.h"
#include "compute/cpu/matmul.h"

static inline uint64_t sample_ref_mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* larger p first, then lower id */
static inline int sample_ref_before(const struct baton_cpu_sample_entry *a,
                                    const struct baton_cpu_sample_entry *b)
{
    return a->p != b->p ? a->p > b->p : a->id < b->id;
}

static inline void sample_ref_sift(struct baton_cpu_sample_entry *v, uint64_t i, uint64_t n)
{
    for (;;) {
        uint64_t c = 2 * i + 1;
        struct baton_cpu_sample_entry t;

        if (c >= n)
            return;
        if (c + 1 < n && sample_ref_before(&v[c], &v[c + 1]))
            c++;
        if (!sample_ref_before(&v[i], &v[c]))
            return;
        t = v[i];
        v[i] = v[c];
        v[c] = t;
        i = c;
    }
}

/* Heapsort into sample_ref_before order. */
static inline void sample_ref_sort(struct baton_cpu_sample_entry *v, uint64_t n)
{
    for (uint64_t i = n / 2; i-- > 0;)
        sample_ref_sift(v, i, n);
    for (uint64_t end = n; end > 1; end--) {
        struct baton_cpu_sample_entry t = v[0];

        v[0] = v[end - 1];
        v[end - 1] = t;
        sample_ref_sift(v, 0, end - 1);
    }
}

/* The token of one row x[0, k) (k >= 1) with parameters pr[0..5] (valid:
 * finite temperature, top_p in (0, 1]); work holds k entries. */
static inline int32_t sample_ref_row(const float *x, uint64_t k, const int32_t *pr,
                                     struct baton_cpu_sample_entry *work)
{
    const uint32_t top_k = (uint32_t)pr[2];
    const uint64_t seed = (uint64_t)(uint32_t)pr[3] | (uint64_t)(uint32_t)pr[4] << 32;
    const uint64_t counter = (uint64_t)(uint32_t)pr[5];
    int64_t best = -1;
    float t, top_p, u;
    double sum = 0.0, acc = 0.0;
    uint64_t i, n = k;
    int32_t id;

    memcpy(&t, &pr[0], 4);
    memcpy(&top_p, &pr[1], 4);
    for (i = 0; i < k; i++)
        if (!isnan(x[i]) && (best < 0 || x[i] > x[best]))
            best = (int64_t)i;
    if (t <= 0.0f || best < 0 || !isfinite(x[best]))
        return best < 0 ? 0 : (int32_t)best;
    for (i = 0; i < k; i++) {
        work[i].id = (int32_t)i;
        work[i].p = isnan(x[i]) ? 0.0f : baton_cpu_expf((x[i] - x[best]) / t);
    }
    sample_ref_sort(work, k);
    if (top_k > 0 && top_k < n)
        n = top_k;
    for (i = 0; i < n; i++)
        sum += work[i].p;
    if (top_p < 1.0f) {
        for (i = 0; i < n; i++) {
            acc += work[i].p / sum;
            if (acc >= top_p) {
                n = i + 1;
                break;
            }
        }
        sum = 0.0;
        for (i = 0; i < n; i++)
            sum += work[i].p;
    }
    u = (float)(sample_ref_mix64(seed ^ sample_ref_mix64(counter)) >> 40) / 16777216.0f;
    id = work[n - 1].id;
    acc = 0.0;
    for (i = 0; i < n; i++) {
        acc += work[i].p / sum;
        if ((double)u < acc)
            return work[i].id;
    }
    return id;
}

#endif
