/* A deterministic random source for harnesses that drive libsodium-based
 * code (the client's and the server's HELLO nonces, grant ids, keys): the
 * n-th request of an input gets the n-th output of
 * randombytes_buf_deterministic (ChaCha20) seeded with n, so every input
 * sees the same "random" bytes. Install with
 * randombytes_set_implementation(&fuzz_fixed_random) before libsodium
 * starts; set fuzz_random_counter to 0 at the start of each input. */
#ifndef BATON_FUZZ_RANDOM_H
#define BATON_FUZZ_RANDOM_H

#include <sodium.h>
#include <stdatomic.h>

#include "fuzz_common.h"

/* randombytes calls in this input; atomic, as a harness's server may call
 * from several threads (the dispatcher's loopback peer links) */
static _Atomic uint64_t fuzz_random_counter;

/* randombytes implementation name (libsodium asks for one). */
static const char *fuzz_fixed_random_name(void)
{
    return "baton-fuzz-counter";
}

/* randombytes_buf: the counter-th output of randombytes_buf_deterministic. */
static void fuzz_fixed_random_buf(void *const buf, const size_t size)
{
    uint8_t seed[randombytes_SEEDBYTES];
    uint64_t n = atomic_fetch_add(&fuzz_random_counter, 1);
    memset(seed, 0, sizeof seed);
    for (unsigned i = 0; i < 8; i++)
        seed[i] = (uint8_t)(n >> (8 * i));
    randombytes_buf_deterministic(buf, size, seed);
}

/* randombytes_random: 4 bytes of fuzz_fixed_random_buf. */
static uint32_t fuzz_fixed_random_u32(void)
{
    uint8_t b[4];
    fuzz_fixed_random_buf(b, sizeof b);
    return (uint32_t)fuzz_le(b, 4);
}

static randombytes_implementation fuzz_fixed_random = {
    .implementation_name = fuzz_fixed_random_name,
    .random = fuzz_fixed_random_u32,
    .buf = fuzz_fixed_random_buf,
};

#endif
