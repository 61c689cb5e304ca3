/* Layer split planner (largest remainder; see split.h). */
#include "model/split.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "baton/status.h"

/* Length of the decimal number at p (digits, at most one '.', at least one
 * digit), or 0 when p does not start with one. */
static size_t decimal_len(const char *p)
{
    size_t i = 0, digits = 0;
    int dot = 0;

    for (;; i++) {
        if (p[i] >= '0' && p[i] <= '9')
            digits++;
        else if (p[i] == '.' && !dot)
            dot = 1;
        else
            break;
    }
    return digits > 0 ? i : 0;
}

int baton_split_parse(const char *text, double *props, size_t max_parts)
{
    size_t n = 0;
    const char *p = text;

    if (text == NULL || *text == '\0')
        return BATON_E_INVAL;
    for (;;) {
        const size_t len = decimal_len(p);
        char *end = NULL;
        double v;

        if (n == max_parts || len == 0)
            return BATON_E_INVAL;
        errno = 0;
        v = strtod(p, &end); /* the C locale: '.' is the decimal point */
        if (end != p + len || errno != 0 || !(v > 0.0) || v > BATON_SPLIT_PART_MAX)
            return BATON_E_INVAL;
        props[n++] = v;
        if (*end == '\0')
            break;
        if (*end != ',')
            return BATON_E_INVAL;
        p = end + 1;
    }
    return (int)n;
}

int baton_split_plan(uint32_t n_layers, const double *props, size_t n_stages, uint32_t *counts)
{
    double sum = 0.0;
    double rem[BATON_MAX_STAGES];
    uint32_t assigned = 0;
    size_t i;

    if (n_stages == 0 || n_stages > BATON_MAX_STAGES)
        return BATON_E_INVAL;
    for (i = 0; i < n_stages; i++) {
        if (!(props[i] > 0.0) || !isfinite(props[i]))
            return BATON_E_INVAL;
        sum += props[i];
    }
    if (!isfinite(sum)) /* parts above BATON_SPLIT_PART_MAX: not from baton_split_parse */
        return BATON_E_INVAL;
    for (i = 0; i < n_stages; i++) {
        double quota = (double)n_layers * props[i] / sum;
        double fl = floor(quota);

        counts[i] = (uint32_t)fl;
        rem[i] = quota - fl;
        assigned += counts[i];
    }
    while (assigned < n_layers) {
        size_t best = 0;

        /* strict '>' keeps the earlier stage on ties */
        for (i = 1; i < n_stages; i++)
            if (rem[i] > rem[best])
                best = i;
        counts[best]++;
        rem[best] = -1.0;
        assigned++;
    }
    for (i = 0; i < n_stages; i++)
        if (counts[i] == 0)
            return BATON_E_INVAL;
    return 0;
}
