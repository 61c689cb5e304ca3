/* Read-only memory bandwidth: the ceiling of a decode step, which only
 * reads its weights (issue "Kernels and transport that win on every x86
 * server": the triad, two reads and a write, understates what a read-only
 * stream reaches by up to 1.8x on some hosts, so a roofline that divides by
 * the triad can exceed 1).
 *
 * bench_read_sum(p, bytes) reads bytes (a multiple of 64, p 64-byte
 * aligned) with the widest loads the CPU has (AVX-512, else AVX2, else
 * 64-bit words; chosen at run time) into eight independent accumulators,
 * so the loop is bound by the loads, not by an add chain, and returns the
 * wrapping 64-bit sum of the words so the compiler cannot drop the reads.
 * Header-only, for bench/ programs (triad.c, kernels.c); own code.
 */
#ifndef BATON_BENCH_READBW_H
#define BATON_BENCH_READBW_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h> /* x86 only: the bench builds on aarch64 too (words) */

__attribute__((target("avx512f"))) static uint64_t bench_read_sum_avx512(const void *p,
                                                                         size_t bytes)
{
    const __m512i *v = p;
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
            a7 = a0;
    size_t i, n = bytes / 64;
    uint64_t out[8], s = 0;

    for (i = 0; i + 8 <= n; i += 8) {
        a0 = _mm512_add_epi64(a0, _mm512_load_si512(v + i));
        a1 = _mm512_add_epi64(a1, _mm512_load_si512(v + i + 1));
        a2 = _mm512_add_epi64(a2, _mm512_load_si512(v + i + 2));
        a3 = _mm512_add_epi64(a3, _mm512_load_si512(v + i + 3));
        a4 = _mm512_add_epi64(a4, _mm512_load_si512(v + i + 4));
        a5 = _mm512_add_epi64(a5, _mm512_load_si512(v + i + 5));
        a6 = _mm512_add_epi64(a6, _mm512_load_si512(v + i + 6));
        a7 = _mm512_add_epi64(a7, _mm512_load_si512(v + i + 7));
    }
    for (; i < n; i++)
        a0 = _mm512_add_epi64(a0, _mm512_load_si512(v + i));
    a0 = _mm512_add_epi64(_mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)),
                          _mm512_add_epi64(_mm512_add_epi64(a4, a5), _mm512_add_epi64(a6, a7)));
    _mm512_storeu_si512((void *)out, a0);
    for (i = 0; i < 8; i++)
        s += out[i];
    return s;
}

__attribute__((target("avx2"))) static uint64_t bench_read_sum_avx2(const void *p, size_t bytes)
{
    const __m256i *v = p;
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
            a7 = a0;
    size_t i, n = bytes / 32;
    uint64_t out[4], s = 0;

    for (i = 0; i + 8 <= n; i += 8) {
        a0 = _mm256_add_epi64(a0, _mm256_load_si256(v + i));
        a1 = _mm256_add_epi64(a1, _mm256_load_si256(v + i + 1));
        a2 = _mm256_add_epi64(a2, _mm256_load_si256(v + i + 2));
        a3 = _mm256_add_epi64(a3, _mm256_load_si256(v + i + 3));
        a4 = _mm256_add_epi64(a4, _mm256_load_si256(v + i + 4));
        a5 = _mm256_add_epi64(a5, _mm256_load_si256(v + i + 5));
        a6 = _mm256_add_epi64(a6, _mm256_load_si256(v + i + 6));
        a7 = _mm256_add_epi64(a7, _mm256_load_si256(v + i + 7));
    }
    for (; i < n; i++)
        a0 = _mm256_add_epi64(a0, _mm256_load_si256(v + i));
    a0 = _mm256_add_epi64(_mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)),
                          _mm256_add_epi64(_mm256_add_epi64(a4, a5), _mm256_add_epi64(a6, a7)));
    _mm256_storeu_si256((__m256i *)out, a0);
    for (i = 0; i < 4; i++)
        s += out[i];
    return s;
}
#endif

static inline uint64_t bench_read_sum_words(const void *p, size_t bytes)
{
    const unsigned char *b = p;
    uint64_t a[8] = {0}, w, s = 0;
    size_t i;
    int j;

    for (i = 0; i + 64 <= bytes; i += 64)
        for (j = 0; j < 8; j++) {
            memcpy(&w, b + i + 8 * (size_t)j, sizeof(w));
            a[j] += w;
        }
    for (j = 0; j < 8; j++)
        s += a[j];
    return s;
}

/* The name of the loads bench_read_sum uses on this CPU. */
static inline const char *bench_read_level(void)
{
#if defined(__x86_64__) || defined(__i386__)
    if (__builtin_cpu_supports("avx512f"))
        return "avx512";
    if (__builtin_cpu_supports("avx2"))
        return "avx2";
#endif
    return "words";
}

static inline uint64_t bench_read_sum(const void *p, size_t bytes)
{
#if defined(__x86_64__) || defined(__i386__)
    if (__builtin_cpu_supports("avx512f"))
        return bench_read_sum_avx512(p, bytes);
    if (__builtin_cpu_supports("avx2"))
        return bench_read_sum_avx2(p, bytes);
#endif
    return bench_read_sum_words(p, bytes);
}

#endif
