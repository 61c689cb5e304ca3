/* Internal: the F32 MUL_MAT tiles, included by matmul_avx2.c and
 * matmul_avx512.c with F32_TARGET (a target attribute) and F32_PREFIX
 * (a name prefix) defined; the AVX-512 copy is the same code given 32
 * vector registers.
 *
 * Row r of W starts at float r * ws, ws = w_row_bytes / 4 (k for a
 * MUL_MAT, the cache's slot stride for ATTENTION's scores).
 *
 * F32 keeps run.c's order (s = s + w*x per output, ascending k, no FMA), so
 * a dot product cannot be split across SIMD lanes. Instead the lanes hold 8
 * rows: each 8 x 8 block of W (8 rows, 8 consecutive k) is loaded and
 * transposed in registers, and lane j of the accumulator adds row j's
 * products in ascending k, bit for bit what the scalar loop computes. Each
 * transposed block serves up to 4 columns of x. One column (decode) reads
 * 8 rows at a time: 16 rows, or software prefetch of the 8 row streams,
 * measured slower on the EPYC host (the hardware prefetchers follow 8
 * streams better than 16). */

#define F32_CAT2(a, b) a##b
#define F32_CAT(a, b) F32_CAT2(a, b)
#define F32_NAME(n) F32_CAT(F32_PREFIX, n)

/* Loads rows w + q*ws (q = 0..7; ws = the row stride in floats) at k
 * index i and transposes: on return t_q lane j is row j's element i + q.
 * Named variables, not an array, so the compiler keeps them in registers. */
#define F32_LOAD_T8(w, ws, i)                                                                      \
    F32_LOAD_T8P((w), (w) + (ws), (w) + 2 * (ws), (w) + 3 * (ws), (w) + 4 * (ws), (w) + 5 * (ws),  \
                 (w) + 6 * (ws), (w) + 7 * (ws), i)

/* The same from 8 row pointers. With F32_T8_HALVES defined (the AVX2
 * level) each register is built from two 128-bit loads, rows j and j + 4
 * in its two halves, and two in-lane 4 x 4 transposes finish it: no
 * vperm2f128, which Zen 1 runs at about 5 cycles each (8 per block), and
 * 16 shuffles per 8 x 8 block instead of 24. Same lanes, same values. */
#ifdef F32_T8_HALVES
#define F32_LOAD_T8P(p0, p1, p2, p3, p4, p5, p6, p7, i)                                            \
    do {                                                                                           \
        F32_T4X2(p0, p1, p2, p3, p4, p5, p6, p7, (i), t0, t1, t2, t3);                             \
        F32_T4X2(p0, p1, p2, p3, p4, p5, p6, p7, (i) + 4, t4, t5, t6, t7);                         \
    } while (0)

/* Row pair (p_j, p_{j+4}) at k index i as one register, j = 0..3. */
#define F32_LOAD_2H(pa, pb, i)                                                                     \
    _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps((pa) + (i))),                         \
                         _mm_loadu_ps((pb) + (i)), 1)

/* u_q lane j = row j's element i + q, q = 0..3. */
#define F32_T4X2(p0, p1, p2, p3, p4, p5, p6, p7, i, u0, u1, u2, u3)                                \
    do {                                                                                           \
        const __m256 h0 = F32_LOAD_2H(p0, p4, i), h1 = F32_LOAD_2H(p1, p5, i);                     \
        const __m256 h2 = F32_LOAD_2H(p2, p6, i), h3 = F32_LOAD_2H(p3, p7, i);                     \
        const __m256 c0 = _mm256_unpacklo_ps(h0, h1), c1 = _mm256_unpackhi_ps(h0, h1);             \
        const __m256 c2 = _mm256_unpacklo_ps(h2, h3), c3 = _mm256_unpackhi_ps(h2, h3);             \
        u0 = _mm256_shuffle_ps(c0, c2, 0x44);                                                      \
        u1 = _mm256_shuffle_ps(c0, c2, 0xEE);                                                      \
        u2 = _mm256_shuffle_ps(c1, c3, 0x44);                                                      \
        u3 = _mm256_shuffle_ps(c1, c3, 0xEE);                                                      \
    } while (0)
#else
#define F32_LOAD_T8P(p0, p1, p2, p3, p4, p5, p6, p7, i)                                            \
    do {                                                                                           \
        const __m256 r0 = _mm256_loadu_ps((p0) + (i)), r1 = _mm256_loadu_ps((p1) + (i));           \
        const __m256 r2 = _mm256_loadu_ps((p2) + (i)), r3 = _mm256_loadu_ps((p3) + (i));           \
        const __m256 r4 = _mm256_loadu_ps((p4) + (i)), r5 = _mm256_loadu_ps((p5) + (i));           \
        const __m256 r6 = _mm256_loadu_ps((p6) + (i)), r7 = _mm256_loadu_ps((p7) + (i));           \
        const __m256 a0 = _mm256_unpacklo_ps(r0, r1), a1 = _mm256_unpackhi_ps(r0, r1);             \
        const __m256 a2 = _mm256_unpacklo_ps(r2, r3), a3 = _mm256_unpackhi_ps(r2, r3);             \
        const __m256 a4 = _mm256_unpacklo_ps(r4, r5), a5 = _mm256_unpackhi_ps(r4, r5);             \
        const __m256 a6 = _mm256_unpacklo_ps(r6, r7), a7 = _mm256_unpackhi_ps(r6, r7);             \
        const __m256 b0 = _mm256_shuffle_ps(a0, a2, 0x44), b1 = _mm256_shuffle_ps(a0, a2, 0xEE);   \
        const __m256 b2 = _mm256_shuffle_ps(a1, a3, 0x44), b3 = _mm256_shuffle_ps(a1, a3, 0xEE);   \
        const __m256 b4 = _mm256_shuffle_ps(a4, a6, 0x44), b5 = _mm256_shuffle_ps(a4, a6, 0xEE);   \
        const __m256 b6 = _mm256_shuffle_ps(a5, a7, 0x44), b7 = _mm256_shuffle_ps(a5, a7, 0xEE);   \
        t0 = _mm256_permute2f128_ps(b0, b4, 0x20);                                                 \
        t1 = _mm256_permute2f128_ps(b1, b5, 0x20);                                                 \
        t2 = _mm256_permute2f128_ps(b2, b6, 0x20);                                                 \
        t3 = _mm256_permute2f128_ps(b3, b7, 0x20);                                                 \
        t4 = _mm256_permute2f128_ps(b0, b4, 0x31);                                                 \
        t5 = _mm256_permute2f128_ps(b1, b5, 0x31);                                                 \
        t6 = _mm256_permute2f128_ps(b2, b6, 0x31);                                                 \
        t7 = _mm256_permute2f128_ps(b3, b7, 0x31);                                                 \
    } while (0)
#endif

/* acc = acc + t * x[i + q], each product rounded, then each sum: run.c's
 * s += w * x for 8 rows at once. */
#define F32_MA(acc, t, xc, i, q)                                                                   \
    acc = _mm256_add_ps(acc, _mm256_mul_ps(t, _mm256_broadcast_ss((xc) + (i) + (q))))

#define F32_MA8(acc, xc, i)                                                                        \
    do {                                                                                           \
        F32_MA(acc, t0, xc, i, 0);                                                                 \
        F32_MA(acc, t1, xc, i, 1);                                                                 \
        F32_MA(acc, t2, xc, i, 2);                                                                 \
        F32_MA(acc, t3, xc, i, 3);                                                                 \
        F32_MA(acc, t4, xc, i, 4);                                                                 \
        F32_MA(acc, t5, xc, i, 5);                                                                 \
        F32_MA(acc, t6, xc, i, 6);                                                                 \
        F32_MA(acc, t7, xc, i, 7);                                                                 \
    } while (0)

/* Finishes 8 rows of one column: the ragged k tail in scalar code, in
 * the same order, then the stores. */
static AI F32_TARGET void F32_NAME(f32_finish)(const struct baton_mm *mm, __m256 acc,
                                               const float *w, const float *xc, uint64_t i,
                                               uint64_t r, uint64_t col)
{
    const uint64_t k = mm->k, ws = mm->w_row_bytes / sizeof(float);
    float s[8];
    uint64_t kk;
    int q;

    _mm256_storeu_ps(s, acc);
    for (kk = i; kk < k; kk++)
        for (q = 0; q < 8; q++)
            s[q] = s[q] + w[(uint64_t)q * ws + kk] * xc[kk];
    for (q = 0; q < 8; q++)
        mm->y[col * mm->ldy + r + q] = s[q];
}

/* 8 rows against NC columns; each transposed block serves every column. */
static AI F32_TARGET void F32_NAME(f32_tile)(const struct baton_mm *mm, uint64_t r, uint64_t c,
                                             const int NC)
{
    const uint64_t k = mm->k, ws = mm->w_row_bytes / sizeof(float);
    const float *w = (const float *)mm->w + r * ws;
    const float *x0 = mm->x + c * k, *x1 = x0 + k, *x2 = x1 + k, *x3 = x2 + k;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    __m256 t0, t1, t2, t3, t4, t5, t6, t7;
    uint64_t i = 0;

    for (; k - i >= 8; i += 8) {
        F32_LOAD_T8(w, ws, i);
        F32_MA8(acc0, x0, i);
        if (NC > 1)
            F32_MA8(acc1, x1, i);
        if (NC > 2)
            F32_MA8(acc2, x2, i);
        if (NC > 3)
            F32_MA8(acc3, x3, i);
    }
    F32_NAME(f32_finish)(mm, acc0, w, x0, i, r, c);
    if (NC > 1)
        F32_NAME(f32_finish)(mm, acc1, w, x1, i, r, c + 1);
    if (NC > 2)
        F32_NAME(f32_finish)(mm, acc2, w, x2, i, r, c + 2);
    if (NC > 3)
        F32_NAME(f32_finish)(mm, acc3, w, x3, i, r, c + 3);
}

static F32_TARGET void F32_NAME(f32_decode)(const struct baton_mm *mm, uint64_t r)
{
    F32_NAME(f32_tile)(mm, r, 0, 1);
}

static F32_TARGET void F32_NAME(f32_tile_n)(const struct baton_mm *mm, uint64_t r, uint64_t c,
                                            uint32_t nc)
{
    switch (nc) {
    case 1:
        F32_NAME(f32_tile)(mm, r, c, 1);
        break;
    case 2:
        F32_NAME(f32_tile)(mm, r, c, 2);
        break;
    case 3:
        F32_NAME(f32_tile)(mm, r, c, 3);
        break;
    default:
        F32_NAME(f32_tile)(mm, r, c, 4);
        break;
    }
}

/* ATTENTION's scores (matmul.h, baton_cpu_f32_dots): 16 rows at a time as
 * two independent 8-row chains (one chain is bound by the add latency at
 * this short k); a last group of fewer rows repeats its last row in the
 * missing lanes (read, never stored), so no row past n is touched.
 *
 * The rows are read in place. For short rows (k <= F32_DOTS_PF_MAX: a
 * head's slots) the group F32_DOTS_PF_AHEAD groups ahead is prefetched into
 * L1 first, line by line: the transposes touch the 16 rows a few floats at
 * a time, 256 bytes apart, and from memory (the KV cache is evicted by each
 * decode step's weight stream) that ran at about 4 GB/s, as the hardware
 * prefetchers do not follow 16 short strided streams. Until the
 * nineteenth session each group was instead copied, row after row, into a
 * buffer on the stack (a plain sequential stream): that copy was 16-27 %
 * of a decode step at depth 1000 and read K at about 23 GB/s where the
 * weighted sum reads V at 34. With the prefetch, the d768 Q8_0 model's
 * decode at depth 1024-1088 went from 155-166 to 182-205 tok/s (1 thread,
 * Zen 5 KVM guest, best of 4 repetitions per round, rounds alternating).
 * Neither changes any arithmetic. */
#define F32_DOTS_PF_MAX 256u
#define F32_DOTS_PF_AHEAD 2u
static F32_TARGET void F32_NAME(f32_dots)(const float *w, uint64_t ws, const float *x, uint64_t k,
                                          uint64_t n, float *y)
{
    uint64_t r, i, kk;

    for (r = 0; r < n; r += 16) {
        const int nr = n - r < 16 ? (int)(n - r) : 16;
        const float *p[16];
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
        __m256 t0, t1, t2, t3, t4, t5, t6, t7;
        float s[16];
        int q;

        for (q = 0; q < 16; q++)
            p[q] = w + (r + (uint64_t)(q < nr ? q : nr - 1)) * ws;
        if (k <= F32_DOTS_PF_MAX && n - r >= 16 * (F32_DOTS_PF_AHEAD + 1)) {
            /* see the comment above; n - r is at least the groups ahead, so
             * every address is in the rows */
            for (q = 0; q < 16; q++) {
                const char *row = (const char *)(w + (r + 16 * F32_DOTS_PF_AHEAD + q) * ws);
                uint64_t byte;

                for (byte = 0; byte < k * sizeof(float); byte += 64)
                    _mm_prefetch(row + byte, _MM_HINT_T0);
            }
        }
        for (i = 0; k - i >= 8; i += 8) {
            F32_LOAD_T8P(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], i);
            F32_MA8(acc0, x, i);
            if (nr > 8) {
                F32_LOAD_T8P(p[8], p[9], p[10], p[11], p[12], p[13], p[14], p[15], i);
                F32_MA8(acc1, x, i);
            }
        }
        _mm256_storeu_ps(s, acc0);
        _mm256_storeu_ps(s + 8, acc1);
        for (kk = i; kk < k; kk++)
            for (q = 0; q < nr; q++)
                s[q] = s[q] + p[q][kk] * x[kk];
        for (q = 0; q < nr; q++)
            y[r + (uint64_t)q] = s[q];
    }
}

/* ATTENTION's scores for NX queries (matmul.h, baton_cpu_f32_dots_multi):
 * 8 rows at a time; each 8 x 8 block of the rows is transposed once and
 * serves every query (in a prefill ubatch consecutive tokens score the same
 * cache rows, and the transposes were most of f32_dots' work). Lane j of
 * query c's accumulator adds row j's products in ascending i, as f32_dots
 * and the plain loop do; a last block of fewer rows repeats its last row in
 * the missing lanes (read, never stored). The rows are read in place: a
 * ubatch's cache rows were just written and are still in cache. */
static AI F32_TARGET void F32_NAME(f32_dots_nx)(const float *w, uint64_t ws, const float *x,
                                                uint64_t xs, uint64_t k, uint64_t n, float *y,
                                                uint64_t ys, const int NX)
{
    uint64_t r, i, kk;

    for (r = 0; r < n; r += 8) {
        const int nr = n - r < 8 ? (int)(n - r) : 8;
        const float *p[8];
        __m256 acc[4], t0, t1, t2, t3, t4, t5, t6, t7;
        float s[4][8];
        int q, c;

        for (q = 0; q < 8; q++)
            p[q] = w + (r + (uint64_t)(q < nr ? q : nr - 1)) * ws;
        for (c = 0; c < NX; c++)
            acc[c] = _mm256_setzero_ps();
        for (i = 0; k - i >= 8; i += 8) {
            F32_LOAD_T8P(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], i);
            for (c = 0; c < NX; c++)
                F32_MA8(acc[c], x + (uint64_t)c * xs, i);
        }
        for (c = 0; c < NX; c++) {
            const float *xc = x + (uint64_t)c * xs;

            _mm256_storeu_ps(s[c], acc[c]);
            for (kk = i; kk < k; kk++)
                for (q = 0; q < nr; q++)
                    s[c][q] = s[c][q] + p[q][kk] * xc[kk];
            for (q = 0; q < nr; q++)
                y[(uint64_t)c * ys + r + (uint64_t)q] = s[c][q];
        }
    }
}

static F32_TARGET void F32_NAME(f32_dots_multi)(const float *w, uint64_t ws, const float *x,
                                                uint64_t xs, uint32_t nx, uint64_t k, uint64_t n,
                                                float *y, uint64_t ys)
{
    switch (nx) {
    case 0:
        break;
    case 1: /* one query (decode): the kernel tuned for a cold cache */
        F32_NAME(f32_dots)(w, ws, x, k, n, y);
        break;
    case 2:
        F32_NAME(f32_dots_nx)(w, ws, x, xs, k, n, y, ys, 2);
        break;
    case 3:
        F32_NAME(f32_dots_nx)(w, ws, x, xs, k, n, y, ys, 3);
        break;
    default: /* nx <= BATON_CPU_DOTS_MAX_X (4) */
        F32_NAME(f32_dots_nx)(w, ws, x, xs, k, n, y, ys, 4);
        break;
    }
}

static const struct baton_mm_tiles F32_NAME(f32_tiles) = {
    F32_NAME(f32_decode), 8, F32_NAME(f32_tile_n), 8, 4, baton_mm_f32_row, 0,
};
