/* Spin-then-sleep policy of a pool thread (see compute/spin.h). */
#include "compute/spin.h"

uint64_t baton_spin_window(struct baton_spin *s, uint64_t max_ns)
{
    if (s->cooldown > 0) {
        s->cooldown--;
        return 0;
    }
    return max_ns;
}

void baton_spin_record(struct baton_spin *s, enum baton_spin_end how)
{
    if (how == BATON_SPIN_PREEMPTED) {
        /* a lone jump is an interrupt, not a competing thread */
        const int lone = s->jump_left == 0;

        s->jump_left = BATON_SPIN_JUMP_PAIR;
        if (!lone) {
            if (s->backoff == 0)
                s->backoff = BATON_SPIN_BACKOFF_FIRST;
            else if (s->clean < BATON_SPIN_HOT_GAP)
                s->backoff = s->backoff >= BATON_SPIN_BACKOFF_MAX / 2 ? BATON_SPIN_BACKOFF_MAX
                                                                      : s->backoff * 2;
            else
                s->backoff = s->backoff / 2 < BATON_SPIN_BACKOFF_FIRST ? BATON_SPIN_BACKOFF_FIRST
                                                                       : s->backoff / 2;
            s->cooldown = s->backoff;
            s->clean = 0;
            return;
        }
    } else if (s->jump_left > 0) {
        s->jump_left--;
    }
    if (s->clean < BATON_SPIN_CLEAN_RESET && ++s->clean == BATON_SPIN_CLEAN_RESET)
        s->backoff = 0;
}
