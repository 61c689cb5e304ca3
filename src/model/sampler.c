/* Greedy / temperature / top-k / top-p sampling (see sampler.h). */
#include "model/sampler.h"

#include <math.h>
#include <stdlib.h>

void baton_sampler_init(struct baton_sampler *s, float temp, uint32_t top_k, float top_p,
                        uint64_t seed)
{
    s->temp = temp;
    s->top_k = top_k;
    s->top_p = top_p;
    s->state = seed ? seed : 0x9E3779B97F4A7C15ull;
}

float baton_sampler_uniform(struct baton_sampler *s)
{
    uint64_t x = s->state;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    s->state = x;
    /* top 24 bits -> [0, 1) exactly representable in float */
    return (float)((x * 0x2545F4914F6CDD1Dull) >> 40) / 16777216.0f;
}

static int32_t argmax_first(const float *v, size_t n)
{
    size_t best = 0;
    size_t i;

    for (i = 1; i < n; i++)
        if (v[i] > v[best])
            best = i;
    return (int32_t)best;
}

static int entry_desc(const void *a, const void *b)
{
    const struct baton_sample_entry *x = a;
    const struct baton_sample_entry *y = b;

    if (x->p > y->p)
        return -1;
    if (x->p < y->p)
        return 1;
    return x->id < y->id ? -1 : (x->id > y->id);
}

int32_t baton_sampler_sample(struct baton_sampler *s, const float *logits, size_t n_vocab,
                             struct baton_sample_entry *scratch)
{
    float max_logit;
    double sum = 0.0;
    double cum = 0.0;
    size_t n = n_vocab;
    size_t i;
    float r;

    if (s->temp <= 0.0f || n_vocab <= 1)
        return argmax_first(logits, n_vocab);
    max_logit = logits[argmax_first(logits, n_vocab)];
    for (i = 0; i < n_vocab; i++) {
        scratch[i].id = (int32_t)i;
        scratch[i].p = expf((logits[i] - max_logit) / s->temp);
    }
    qsort(scratch, n_vocab, sizeof(scratch[0]), entry_desc);
    if (s->top_k > 0 && s->top_k < n)
        n = s->top_k;
    for (i = 0; i < n; i++)
        sum += scratch[i].p;
    if (s->top_p > 0.0f && s->top_p < 1.0f) {
        size_t keep = n;
        double acc = 0.0;

        for (i = 0; i < n; i++) {
            acc += scratch[i].p / sum;
            if (acc >= s->top_p) {
                keep = i + 1;
                break;
            }
        }
        n = keep;
        sum = 0.0;
        for (i = 0; i < n; i++)
            sum += scratch[i].p;
    }
    r = baton_sampler_uniform(s);
    for (i = 0; i < n; i++) {
        cum += scratch[i].p / sum;
        if ((double)r < cum)
            return scratch[i].id;
    }
    return scratch[n - 1].id;
}
