/* Shared helpers of the fuzz harnesses (fuzz/README.md).
 *
 * Every harness defines one libFuzzer-style entry point,
 *   int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
 * built three ways: with replay_main.c (plain compiler, ctest replay), with
 * afl-clang-fast -fsanitize=fuzzer (AFL++ persistent mode through
 * libAFLDriver), or with clang -fsanitize=fuzzer (libFuzzer).
 *
 * A harness checks properties that must hold for every input and calls
 * FUZZ_CHECK on them: a violated property aborts, so the fuzzer records the
 * input as a crash exactly as it would a sanitizer report.
 */
#ifndef BATON_FUZZ_COMMON_H
#define BATON_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Aborts with a message naming the harness line when cond is false. */
#define FUZZ_CHECK(cond, ...)                                                                      \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz property failed at %s:%d: %s: ", __FILE__, __LINE__, #cond);     \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* An exact-size heap copy of the input, so that a read one byte past its end
 * is a heap overflow under ASan (the AFL driver hands over a larger shared
 * buffer). Never NULL: aborts on allocation failure. Free with free(). */
static inline uint8_t *fuzz_dup(const uint8_t *data, size_t size)
{
    uint8_t *p = malloc(size > 0 ? size : 1);
    if (!p)
        abort();
    if (size > 0)
        memcpy(p, data, size);
    else
        p[0] = 0;
    return p;
}

/* Little-endian loads written independently of src/wire (used as oracles). */
static inline uint64_t fuzz_le(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = n; i > 0; i--)
        v = v << 8 | p[i - 1];
    return v;
}

/* A byte reader over the input: takes bytes from the front; 0 when empty. */
struct fuzz_reader {
    const uint8_t *p;
    size_t n;
};

static inline uint8_t fuzz_u8(struct fuzz_reader *r)
{
    if (r->n == 0)
        return 0;
    r->n--;
    return *r->p++;
}

static inline uint64_t fuzz_uint(struct fuzz_reader *r, unsigned bytes)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < bytes; i++)
        v |= (uint64_t)fuzz_u8(r) << (8 * i);
    return v;
}

#endif
