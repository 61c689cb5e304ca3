/* Spin-then-sleep policy of one waiting thread of the worker pool
 * (compute/pool.c): whether its next wait spins, and how a spin's end
 * changes that. Pure bookkeeping (no clock, no atomics), so that the rule is
 * testable on its own (tests/unit/test_compute_pool.c); pool.c's top comment
 * says why the pool spins and what was measured. */
#ifndef BATON_COMPUTE_SPIN_H
#define BATON_COMPUTE_SPIN_H

#include <stdint.h>

/* How a spin ended. */
enum baton_spin_end {
    BATON_SPIN_RAN_OUT = 0,   /* the window passed, nothing came: the thread sleeps */
    BATON_SPIN_CAUGHT = 1,    /* what it waited for came while spinning */
    BATON_SPIN_PREEMPTED = 2, /* the clock jumped between two polls: descheduled */
};

/* Cooldown after a preemption, in waits that sleep at once: the first, and
 * the largest. */
#define BATON_SPIN_BACKOFF_FIRST 32u
#define BATON_SPIN_BACKOFF_MAX 65536u
/* A preemption within this many spins of the previous one doubles the
 * backoff (the thread competes for its core all the time); a later one
 * halves it, down to BATON_SPIN_BACKOFF_FIRST (it competed once). */
#define BATON_SPIN_HOT_GAP 128u
/* This many spins in a row without a preemption forget the backoff. */
#define BATON_SPIN_CLEAN_RESET 4096u
/* A clock jump counts as a preemption only when the previous jump came at
 * most this many spins before: a lone jump is an interrupt (pool.c). */
#define BATON_SPIN_JUMP_PAIR 32u

/* Spin state of one waiting thread; all zero at the start. */
struct baton_spin {
    uint32_t cooldown;  /* waits left that sleep at once */
    uint32_t backoff;   /* the last cooldown set; 0: none since the last reset */
    uint32_t clean;     /* spins since the last preemption (saturates at CLEAN_RESET) */
    uint32_t jump_left; /* spins in which a further clock jump is a preemption */
};

/* The spin window of the thread's next wait, in ns: max_ns, or 0 (sleep at
 * once) while it cools down after a preemption; counts that wait. */
uint64_t baton_spin_window(struct baton_spin *s, uint64_t max_ns);

/* Records how a spin (a wait whose window was not 0) ended. A preemption
 * (a clock jump within BATON_SPIN_JUMP_PAIR spins of the previous one)
 * starts a cooldown of `backoff` waits: BATON_SPIN_BACKOFF_FIRST after a
 * reset, else doubled (up to BATON_SPIN_BACKOFF_MAX) when it came within
 * BATON_SPIN_HOT_GAP spins of the previous preemption, halved (down to
 * FIRST) when it came later. BATON_SPIN_CLEAN_RESET spins in a row without
 * one reset the backoff. */
void baton_spin_record(struct baton_spin *s, enum baton_spin_end how);

#endif
