/* Layer split planner: turns --split proportions into contiguous layer
 * ranges, one per stage. */
#ifndef BATON_MODEL_SPLIT_H
#define BATON_MODEL_SPLIT_H

#include <stddef.h>
#include <stdint.h>

#define BATON_MAX_STAGES 64

/* Largest proportion one part may have: 64 of them still sum to a finite
 * double, so the plan never divides by infinity. */
#define BATON_SPLIT_PART_MAX 1e6

/* Parses "1,1,1" or "0.5,2" into proportions: comma-separated plain
 * decimals (digits with at most one '.'; no sign, exponent, hex or spaces),
 * each > 0 and at most BATON_SPLIT_PART_MAX. Returns the number of parts
 * (1..max_parts), or BATON_E_INVAL. */
int baton_split_parse(const char *text, double *props, size_t max_parts);

/* Largest-remainder apportionment (Hamilton's method): stage i gets
 * floor(n_layers * p_i / sum p) layers, and the layers left over go one each
 * to the stages with the largest fractional remainders, ties to the earlier
 * stage. counts[] receives n_stages entries summing to n_layers. Returns 0,
 * or BATON_E_INVAL if n_stages is 0, a proportion is not > 0, or a stage
 * would get no layer (more stages than the proportions allow). */
int baton_split_plan(uint32_t n_layers, const double *props, size_t n_stages, uint32_t *counts);

#endif
