/* Token sampler for `baton run`: greedy, or temperature with top-k and
 * top-p (nucleus, Holtzman et al. 2019, "The Curious Case of Neural Text
 * Degeneration") over logits, driven by a seeded PRNG so a run is
 * reproducible with --seed. */
#ifndef BATON_MODEL_SAMPLER_H
#define BATON_MODEL_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

/* One candidate during sampling. */
struct baton_sample_entry {
    float p;
    int32_t id;
};

struct baton_sampler {
    float temp;     /* 0 = greedy */
    uint32_t top_k; /* 0 = no limit */
    float top_p;    /* 1 = no limit; in (0, 1] */
    uint64_t state; /* xorshift64* state, never 0 */
};

/* Initialises the sampler; seed 0 is mapped to a fixed non-zero state. */
void baton_sampler_init(struct baton_sampler *s, float temp, uint32_t top_k, float top_p,
                        uint64_t seed);

/* Returns a uniform float in [0, 1) from the sampler's PRNG (xorshift64*,
 * Vigna 2016, "An experimental exploration of Marsaglia's xorshift
 * generators, scrambled"). */
float baton_sampler_uniform(struct baton_sampler *s);

/* Samples a token id from n_vocab logits (not modified). Greedy (temp 0)
 * returns the first maximum. scratch must hold n_vocab entries (caller-owned).
 * Returns the id (0 <= id < n_vocab). */
int32_t baton_sampler_sample(struct baton_sampler *s, const float *logits, size_t n_vocab,
                             struct baton_sample_entry *scratch);

#endif
