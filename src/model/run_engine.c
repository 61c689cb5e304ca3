/* The step engine (run_internal.h): ubatches through the stages.
 *
 * Each stage's part of a step (a "block") is a few pipelined requests on
 * that stage's connection: a SET of the input where it comes through the
 * coordinator (token ids of a prefill ubatch on stage 1, the hidden state on
 * the hub path), one GRAPH_RUN of a registered graph (its positions, a
 * decode step's token id and the last index as inputs; fenced on the
 * previous stage's hand-off on the direct path; with a hand-off of its own
 * hidden state to the next stage, or the argmax returned on the last
 * stage), and a GET of the hidden state on the hub path (of the logits on
 * the last stage when sampling needs them). Every reply is tracked
 * (baton_conn_track), so the engine knows which step's which part has
 * answered.
 *
 * Scheduling: the engine submits a block as soon as its inputs can exist
 * and waits only where data must come back to it.
 *   - Direct boundary: stage i + 1's block of step k goes at once, fenced on
 *     the write with the hand-off's sequence number; the server computes
 *     only once that write has landed (docs/PROTOCOL.md "Asynchronous
 *     hand-off"). Until a copy over the boundary has succeeded (its first
 *     step, or after a failure) the hand-off is synchronous and stage
 *     i + 1's block waits for its outcome: a copy that is not done goes
 *     through the coordinator for that step, and the boundary is tried
 *     again after 1, 2, 4 ... 64 steps.
 *   - Hub boundary: stage i + 1's block waits for the GET of stage i's
 *     hidden state; the coordinator SETs it in.
 *   - Slots: step k reads slot k mod n_slots of the next stage's input, so
 *     stage i's block of step k waits until stage i + 1 has answered its run
 *     of step k - n_slots (the last reader of that slot; the hub path's host
 *     buffers, one per slot, are reused on the same rule).
 *   - Pipelined prefill: stage 1 computes ubatch k + 1 while stage 2
 *     computes ubatch k. --pipeline off keeps the one-at-a-time schedule:
 *     a stage's block is sent only once the previous stage's block has
 *     answered, and every hand-off is synchronous.
 *
 * A hand-off that does not land makes the dependent run fail with E_FENCE,
 * nothing computed on stale data; the stage then refuses its later runs
 * (the server's latch) and cancels its own hand-offs, so the failure runs
 * down the pipeline at once. The engine reads every outstanding reply,
 * finds the earliest failed step and the boundary at fault, voids the
 * destination's slot grants of that boundary (seal_boundary: hand-offs
 * still queued at the source cannot land afterwards), and redoes the steps
 * from there with that boundary through the coordinator (the first run on
 * each stage clears the latch). Recomputing a step writes the same
 * KV-cache rows again (every kernel gives the same bits), so the output is
 * the same. Any other error ends the run with a message naming the stage.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "baton/status.h"
#include "model/run_internal.h"
#include "net/net.h"

enum out_mode {
    OUT_RETURN = 0,    /* last stage: the argmax comes back with the run */
    OUT_HANDOFF_ASYNC, /* the run hands its hidden state to the next stage */
    OUT_HANDOFF_SYNC,  /* ... and its reply says whether the copy landed */
    OUT_GET,           /* hub: the coordinator GETs the hidden state */
};

/* One stage's part of one step. A status is BATON_REPLY_PENDING until its
 * reply is read. */
struct block {
    int submitted;
    int has_set, has_get, has_pset, has_sset;
    int st_set, st_run, st_get, st_pset; /* pset: the positions' SET (several sequences) */
    int st_sset;                          /* sset: SAMPLE's parameters' SET (last stage) */
    int fenced;   /* the run waits for the previous stage's hand-off (stage 1: the ring's) */
    int mode;     /* enum out_mode */
    int ring;     /* last stage: 0, or OUT_HANDOFF_ASYNC / _SYNC: the token goes to stage 1 */
    int resolved; /* a synchronous hand-off's outcome has been acted on */
    uint64_t seq; /* the hand-off's sequence number */
    struct baton_copy_result copy;
    int32_t argmax;
};

struct step {
    const int32_t *tokens; /* NULL: a ring step, whose token the step before produces */
    uint32_t n, pos0;
    const int32_t *seqpos; /* NULL, or 3n: positions, cells, first cells (run_ubatch) */
    const int32_t *sample; /* NULL, or 6 n_out: SAMPLE's parameters (run_ubatch) */
    uint32_t n_out;        /* argmax ids the last stage returns: 1, or n into out */
    int32_t *out;
    uint64_t number; /* r->n_steps when the batch began + k: picks the slot */
    uint32_t slot;
    uint32_t k_plus_1; /* which step of the batch this ring entry holds (+ 1; 0: none) */
    struct block b[BATON_MAX_STAGES];
};

struct engine {
    struct run *r;
    const struct run_ubatch *ub;
    uint32_t m;
    uint32_t next[BATON_MAX_STAGES]; /* the next step each stage submits */
    uint32_t done;                   /* steps [0, done) answered everywhere, retired */
    uint64_t base;                   /* the first step's number */
    uint32_t hub_end[BATON_MAX_STAGES]; /* boundary i goes through the coordinator for the
                                           steps before this one (those redone after a
                                           failure) */
    uint32_t recoveries;
    uint32_t gap;                    /* a ring step's tokens: the step this many before */
    uint32_t m0;                     /* m as called (on_retire may stop the batch early) */
    uint64_t wait_key;               /* the reply the last counted wait was for */
    struct step ring[RUN_RING];
};

static struct step *step_at(struct engine *e, uint32_t k)
{
    return &e->ring[k % RUN_RING];
}

static int pending(int st)
{
    return st == BATON_REPLY_PENDING;
}

/* Every reply of block b has been read (and a synchronous hand-off acted on). */
static int block_answered(const struct block *b)
{
    return b->submitted && !(b->has_set && pending(b->st_set)) &&
           !(b->has_pset && pending(b->st_pset)) && !(b->has_sset && pending(b->st_sset)) &&
           !pending(b->st_run) &&
           !(b->has_get && pending(b->st_get)) &&
           ((b->mode != OUT_HANDOFF_SYNC && b->ring != OUT_HANDOFF_SYNC) || b->resolved);
}

/* Block b has answered, and every reply succeeded. */
static int block_ok(const struct block *b)
{
    return block_answered(b) && (!b->has_set || b->st_set == 0) &&
           (!b->has_pset || b->st_pset == 0) && (!b->has_sset || b->st_sset == 0) &&
           b->st_run == 0 &&
           (!b->has_get || b->st_get == 0);
}

/* Block (s, k) has answered, or step k is already retired. */
static int answered(struct engine *e, uint32_t s, uint32_t k)
{
    return k < e->done || block_answered(&step_at(e, k)->b[s]);
}

/* Whether stage s may submit its block of step k now. */
static int can_submit(struct engine *e, uint32_t s, uint32_t k)
{
    struct run *r = e->r;
    struct step *st;

    /* the ring keeps the last retired steps too: a ring step takes its
     * tokens (or, redone, its outputs) from the step gap before */
    if (k >= e->m || k + e->gap >= e->done + RUN_RING)
        return 0;
    if (s == 0 && e->ub[k].after > e->done)
        return 0; /* its inputs come from a step not retired yet */
    st = step_at(e, k);
    if (s == 0 && st->k_plus_1 != k + 1) {
        memset(st, 0, sizeof *st);
        st->tokens = e->ub[k].tokens;
        st->n = e->ub[k].n;
        st->pos0 = e->ub[k].pos0;
        st->seqpos = e->ub[k].seqpos;
        st->sample = e->ub[k].sample;
        st->n_out = e->ub[k].n_out > 1 ? e->ub[k].n_out : 1;
        st->out = e->ub[k].out;
        st->number = e->base + k;
        st->slot = (uint32_t)(st->number % r->n_slots);
        st->k_plus_1 = k + 1;
    }
    if (s > 0) {
        const struct block *pb = &st->b[s - 1];

        /* the entry must be step k's (stage 1 set it up): an entry not yet
         * reused still holds step k - RUN_RING's blocks, all submitted */
        if (st->k_plus_1 != k + 1 || !pb->submitted)
            return 0;
        if (pb->mode == OUT_HANDOFF_SYNC && !pb->resolved)
            return 0; /* its outcome decides: fenced run, or the hub */
        if (pb->mode == OUT_GET && pending(pb->st_get))
            return 0; /* the hidden state has not come back yet */
        if (!r->cfg->pipeline && !block_answered(pb))
            return 0;
    } else if (!r->cfg->pipeline && k > e->done) {
        return 0; /* one step at a time */
    } else if (st->tokens == NULL) {
        /* a ring step: its tokens are the outputs of the step gap before;
         * that block must be sent (its hand-off's sequence number), its
         * synchronous hand-off's outcome known, and without the ring its
         * outputs read */
        const struct block *pb = &step_at(e, k - e->gap)->b[r->n_stages - 1];

        if (!pb->submitted || (pb->ring == OUT_HANDOFF_SYNC && !pb->resolved) ||
            (!pb->ring && pending(pb->st_run)))
            return 0;
    }
    /* the previous block of this stage: a hand-off whose outcome is not
     * known yet may need hidden_out again (the hub fallback GET) */
    if (k > e->done && step_at(e, k - 1)->b[s].mode == OUT_HANDOFF_SYNC &&
        !step_at(e, k - 1)->b[s].resolved)
        return 0;
    /* slot k mod n_slots of the next stage (and its host buffer) is free
     * once the next stage has answered step k - n_slots. A ring step needs
     * no such wait: its input is the outputs of step k - gap, so every
     * stage computes it only after every stage has computed that step, and
     * gap <= n_slots (run_plan.c sets the ring up only then; the coordinator
     * may queue ring steps ahead by more than its round trip) */
    if (st->tokens != NULL && s + 1 < r->n_stages && k >= r->n_slots &&
        !answered(e, s + 1, k - r->n_slots))
        return 0;
    return 1;
}

static int submit_fail(struct engine *e, uint32_t s, int rc)
{
    struct run *r = e->r;

    stage_fail(r, &r->stages[s], "step", rc);
    step_limit_hint(r, &r->stages[s], rc);
    return 1;
}

/* Sends stage s's block of step k (can_submit said yes). 0 or 1. */
static int submit_block(struct engine *e, uint32_t s, uint32_t k)
{
    struct run *r = e->r;
    struct stage_rt *stage = &r->stages[s];
    const struct baton_llama_io *io = &stage->st.io;
    struct step *st = step_at(e, k);
    struct block *blk = &st->b[s];
    const uint64_t hidden_bytes = (uint64_t)r->hp.n_embd * st->n * sizeof(float);
    const struct stage_graph *g = run_stage_graph(r, stage, st->n, st->n_out, st->slot);
    const uint32_t tslot = st->slot % run_stage_slots(r, stage); /* stage 1's token slot */
    struct baton_graph_run run;
    int rc;

    if (g == NULL) {
        stage_msg(r, "stage %u: no registered graph for %u tokens\n", s + 1, st->n);
        return 1;
    }
    memset(&run, 0, sizeof run);
    memset(blk, 0, sizeof *blk);
    blk->st_set = blk->st_run = blk->st_get = blk->st_pset = blk->st_sset = BATON_REPLY_PENDING;
    run.graph = g->id;
    if (stage->need_reset)
        run.flags |= BATON_RUN_RESET;
    stage->need_reset = 0;
    if (st->seqpos != NULL) {
        /* several sequences: positions, cells and first cells, set before
         * the run on the same connection (answered in order) */
        blk->has_pset = 1;
        baton_conn_track(stage->conn, &blk->st_pset);
        rc = baton_submit_set_tensor(stage->conn, &io->pos, 0, st->seqpos, (uint64_t)st->n * 12);
        r->token_bytes += (uint64_t)st->n * 12;
        if (rc != 0)
            return submit_fail(e, s, rc);
    } else {
        run.inputs[run.n_inputs++] = (struct baton_run_input){g->in.pos, st->n, (int32_t)st->pos0};
        r->token_bytes += BATON_RUN_INPUT_BYTES;
    }

    /* the input */
    if (stage->st.first) {
        const int32_t *ids = st->tokens;

        if (ids == NULL) {
            /* a ring step: the outputs of the step gap before, straight
             * from the last stage (fenced on its write), or through the
             * coordinator */
            const struct step *ps = step_at(e, k - e->gap);
            const struct block *pb = &ps->b[r->n_stages - 1];

            if (pb->ring) {
                struct baton_run_fence *f = &run.fences[run.n_fences++];

                memcpy(f->grant, r->bounds[r->n_stages - 1].grant[tslot], BATON_GRANT_ID_BYTES);
                f->seq = pb->seq;
                blk->fenced = 1;
            } else if (ps->out == NULL && st->n == 1) {
                ids = &pb->argmax;
            } else if (ps->out != NULL && ps->n_out == st->n) {
                ids = ps->out;
            } else {
                stage_msg(r, "internal error: a decode-ring step of %u tokens after one of %u "
                             "outputs\n",
                          st->n, ps->n_out);
                return 1;
            }
        }
        if (ids != NULL && st->n == 1) {
            run.inputs[run.n_inputs++] = (struct baton_run_input){g->in.tokens, 1, ids[0]};
            r->token_bytes += BATON_RUN_INPUT_BYTES;
        } else if (ids != NULL) {
            blk->has_set = 1;
            baton_conn_track(stage->conn, &blk->st_set);
            rc = baton_submit_set_tensor(stage->conn, &io->tokens[tslot], 0, ids,
                                         (uint64_t)st->n * 4);
            r->token_bytes += (uint64_t)st->n * 4;
            if (rc != 0)
                return submit_fail(e, s, rc);
        }
    } else {
        const struct block *pb = &st->b[s - 1];
        struct boundary *bin = &r->bounds[s - 1];

        if (pb->mode == OUT_GET) {
            blk->has_set = 1;
            baton_conn_track(stage->conn, &blk->st_set);
            rc = baton_submit_set_tensor(stage->conn, &io->hidden_in[st->slot], 0,
                                         bin->host[st->slot], hidden_bytes);
            r->hidden_bytes_hub += hidden_bytes;
            stage->hidden_sets++;
            if (rc != 0)
                return submit_fail(e, s, rc);
        } else {
            struct baton_run_fence *f = &run.fences[run.n_fences++];

            memcpy(f->grant, bin->grant[st->slot], BATON_GRANT_ID_BYTES);
            f->seq = pb->seq;
            blk->fenced = 1;
        }
    }
    if (stage->st.last && st->n_out < st->n) {
        /* the rows whose output comes back: the last n_out */
        run.inputs[run.n_inputs++] = (struct baton_run_input){g->in.last_idx, st->n_out,
                                                              (int32_t)(st->n - st->n_out)};
        r->token_bytes += BATON_RUN_INPUT_BYTES;
    }

    /* the output */
    if (stage->st.last && stage->st.sample) {
        /* SAMPLE's parameters, before the run on the same connection */
        if (st->sample == NULL) {
            stage_msg(r, "internal error: a sampled step without its parameters\n");
            return 1;
        }
        blk->has_sset = 1;
        baton_conn_track(stage->conn, &blk->st_sset);
        rc = baton_submit_set_tensor(stage->conn, &io->sample, 0, st->sample,
                                     (uint64_t)st->n_out * 24);
        r->token_bytes += (uint64_t)st->n_out * 24;
        if (rc != 0)
            return submit_fail(e, s, rc);
    }
    if (stage->st.last) {
        struct boundary *b = &r->bounds[r->n_stages - 1];

        blk->mode = OUT_RETURN;
        run.flags |= BATON_RUN_RETURN;
        run.ret.leaf = g->in.argmax;
        run.ret_dst = st->out ? st->out : &blk->argmax;
        run.ret_bytes = 4 * st->n_out;
        r->token_bytes += 4 * st->n_out;
        /* step k + gap is a ring step: the outputs go to stage 1 too, into
         * that step's token slot */
        if (k + e->gap < e->m && e->ub[k + e->gap].tokens == NULL && b->direct &&
            st->number >= b->retry_step) {
            const int sync = !b->proven;

            blk->seq = ++b->seq;
            blk->ring = sync ? OUT_HANDOFF_SYNC : OUT_HANDOFF_ASYNC;
            run.flags |= BATON_RUN_HANDOFF;
            run.handoff.route =
                b->route[((st->number + e->gap) % r->n_slots) % run_stage_slots(r, &r->stages[0])];
            run.handoff.flags = sync ? 0 : BATON_COPY_ASYNC;
            run.handoff.seq = blk->seq;
            run.handoff.n = 4ull * st->n_out;
            run.handoff_result = &blk->copy;
        }
    } else {
        struct boundary *b = &r->bounds[s];

        if (b->direct && k >= e->hub_end[s] && st->number >= b->retry_step) {
            const int sync = !b->proven || !r->cfg->pipeline;

            blk->seq = ++b->seq;
            blk->mode = sync ? OUT_HANDOFF_SYNC : OUT_HANDOFF_ASYNC;
            run.flags |= BATON_RUN_HANDOFF;
            run.handoff.route = b->route[step_at(e, k)->slot];
            run.handoff.flags = sync ? 0 : BATON_COPY_ASYNC;
            run.handoff.seq = blk->seq;
            run.handoff.n = hidden_bytes;
            run.handoff_result = &blk->copy;
        } else {
            blk->mode = OUT_GET;
        }
    }
    baton_conn_track(stage->conn, &blk->st_run);
    rc = baton_submit_graph_run(stage->conn, &run);
    if (rc != 0)
        return submit_fail(e, s, rc);
    if (blk->mode == OUT_GET) {
        blk->has_get = 1;
        baton_conn_track(stage->conn, &blk->st_get);
        rc = baton_submit_get_tensor(stage->conn, &io->hidden_out, 0,
                                     r->bounds[s].host[st->slot], hidden_bytes);
        r->hidden_bytes_hub += hidden_bytes;
        stage->hidden_gets++;
    } else if (stage->st.last && r->want_logits && k + 1 == e->m) {
        blk->has_get = 1;
        baton_conn_track(stage->conn, &blk->st_get);
        rc = baton_submit_get_tensor(stage->conn, &io->logits, 0, r->logits,
                                     (uint64_t)r->hp.n_vocab * 4);
        r->logits_bytes += (uint64_t)r->hp.n_vocab * 4;
    }
    if (rc != 0)
        return submit_fail(e, s, rc);
    blk->submitted = 1;
    return 0;
}

/* Whether a failed peer handshake points at the peer keys: the destination
 * refused the key (E_AUTH) or holds none (E_UNSUPPORTED: no PEER_COPY). A
 * handshake that timed out or was closed (E_TIMEOUT, E_IO) says nothing
 * about keys: a batond that stopped answering, or another program there. */
static int handshake_is_keys(uint32_t status)
{
    return status == 0 || -(int)status == BATON_E_AUTH || -(int)status == BATON_E_UNSUPPORTED;
}

/* Says once per change how the copies over boundary i go. */
static void note_outcome(struct run *r, uint32_t i, uint32_t outcome, uint32_t status)
{
    struct boundary *b = &r->bounds[i];
    const uint32_t d = (i + 1) % r->n_stages + 1; /* the destination stage (the ring: 1) */

    if (outcome == b->last_outcome)
        return;
    /* a link in backoff after a failure said already: the same failure
     * (its first cause stays the one said) */
    if (outcome == BATON_COPY_BACKOFF && b->last_outcome != BATON_COPY_DONE &&
        b->last_outcome != BATON_COPY_OUTCOME_LIMIT)
        return;
    if (i + 1 == r->n_stages) {
        /* the decode ring: one line, it is an optimisation */
        if (outcome == BATON_COPY_DONE)
            stage_msg(r, "stage %u -> 1 (decode ring): tokens go straight to stage 1\n", i + 1);
        else if (outcome == BATON_COPY_NOT_ALLOWED)
            stage_msg(r, "stage %u -> 1 (decode ring): stage %u (%s) does not allow-list stage 1 "
                         "(batond --peer %s would let it); tokens go through the coordinator\n",
                      i + 1, i + 1, r->stages[i].endpoint, b->dest_name);
        else
            stage_msg(r, "stage %u -> 1 (decode ring): direct copy: %s%s%s%s; tokens go through "
                         "the coordinator for now%s\n",
                      i + 1, run_outcome_name(outcome), status ? " (" : "",
                      status ? baton_status_name(-(int)status) : "", status ? ")" : "",
                      outcome != BATON_COPY_HANDSHAKE ? ""
                      : -(int)status == BATON_E_UNSUPPORTED
                          ? " (the server at stage 1's peer address holds no peer key: batond "
                            "--peer-key)"
                      : handshake_is_keys(status)
                          ? " (stage 1 and the last stage hold different peer keys: give both "
                            "the same batond --peer-key file)"
                          : " (stage 1's address for the other servers did not finish the "
                            "peer handshake)");
        b->last_outcome = outcome;
        return;
    }
    stage_msg(r, "stage %u -> %u: direct copy: %s%s%s%s\n", i + 1, d, run_outcome_name(outcome),
              status ? " (" : "", status ? baton_status_name(-(int)status) : "", status ? ")" : "");
    if (outcome != BATON_COPY_DONE)
        stage_msg(r, "stage %u -> %u: copying through the coordinator (hub path) while the direct "
                     "copy is not done\n",
                  i + 1, d);
    /* what to change, where the outcome says it */
    if (outcome == BATON_COPY_NOT_ALLOWED)
        stage_msg(r, "stage %u (%s) sends only to its allow-list: start it with --peer %s (the "
                     "address stage %u is reached at; --servers HOST:PORT@PEERHOST:PEERPORT "
                     "names another)\n",
                  i + 1, r->stages[i].endpoint, b->dest_name, d);
    else if (outcome == BATON_COPY_UNREACHABLE)
        stage_msg(r, "stage %u (%s) cannot connect to %s: is stage %u listening there for the "
                     "other servers?\n",
                  i + 1, r->stages[i].endpoint, b->dest_name, d);
    else if (outcome == BATON_COPY_HANDSHAKE && -(int)status == BATON_E_UNSUPPORTED)
        stage_msg(r, "the server at %s (stage %u's peer address) holds no peer key (batond "
                     "--peer-key)\n",
                  b->dest_name, d);
    else if (outcome == BATON_COPY_HANDSHAKE && handshake_is_keys(status))
        stage_msg(r, "stages %u and %u hold different peer keys: give both the same batond "
                     "--peer-key file\n",
                  i + 1, d);
    else if (outcome == BATON_COPY_HANDSHAKE)
        stage_msg(r, "stage %u (%s) reached %s, which did not finish the peer handshake: is it "
                     "stage %u's batond, and answering?\n",
                  i + 1, r->stages[i].endpoint, b->dest_name, d);
    else if (outcome == BATON_COPY_LIMIT)
        stage_msg(r, "stage %u (%s) has all its peer links open (batond --max-peer-links, "
                     "--max-peer-links-per-session, or its client key's max_peer_links) or "
                     "holds no peer key\n",
                  i + 1, r->stages[i].endpoint);
    b->last_outcome = outcome;
}

static void boundary_failed(struct run *r, uint32_t i, uint64_t number);
static int seal_boundary(struct run *r, uint32_t i);

int run_open_links(struct run *r)
{
    struct baton_copy_result res[BATON_MAX_STAGES];
    int status[BATON_MAX_STAGES];
    const double t0 = run_now_s();
    uint32_t i, n_open = 0;
    int rc;

    for (i = 0; i < r->n_stages; i++) {
        struct boundary *b = &r->bounds[i];
        struct stage_rt *s = &r->stages[i];
        const struct baton_copy_options opt = {.seq = ++b->seq, .flags = 0};

        if (!b->direct)
            continue;
        baton_conn_track(s->conn, &status[i]);
        rc = baton_submit_copy_tensor_to(s->conn,
                                         i + 1 == r->n_stages ? &s->st.io.argmax
                                                              : &s->st.io.hidden_out,
                                         0, 4, &b->dest0, &opt, &res[i]);
        if (rc != 0)
            return stage_fail(r, s, "COPY_TENSOR_TO", rc);
    }
    for (i = 0; i < r->n_stages; i++) {
        struct stage_rt *s = &r->stages[i];

        if (!r->bounds[i].direct)
            continue;
        while (baton_conn_outstanding(s->conn) > 0)
            (void)baton_conn_read_reply(s->conn); /* the status goes to status[i] */
        if (status[i] != 0)
            return stage_fail(r, s, "COPY_TENSOR_TO", status[i]);
        note_outcome(r, i, res[i].result, res[i].status);
        r->bounds[i].proven = res[i].result == BATON_COPY_DONE;
        /* not done: this copy was the boundary's first try, so the first
         * step goes through the hub and the next try is a step later (a
         * link whose write timed out would cost its peer_timeout again) */
        if (!r->bounds[i].proven)
            boundary_failed(r, i, r->n_steps);
    }
    /* a write that was refused or failed midway may still land late (its
     * bytes were sent): void slot 0's grant before the hub path writes
     * there; every reply has been read */
    for (i = 0; i < r->n_stages; i++)
        if (r->bounds[i].direct && !r->bounds[i].proven &&
            (res[i].result == BATON_COPY_REFUSED || res[i].result == BATON_COPY_IO) &&
            seal_boundary(r, i) != 0)
            return 1;
    for (i = 0; i < r->n_stages; i++) {
        if (!r->bounds[i].direct || !r->bounds[i].proven)
            continue;
        if (n_open++ == 0)
            fputs("plan: peer links open before the first step:", r->cfg->log);
        fprintf(r->cfg->log, "%s %u -> %u%s", n_open > 1 ? "," : "", i + 1,
                (i + 1) % r->n_stages + 1, i + 1 == r->n_stages ? " (decode ring)" : "");
    }
    if (n_open > 0)
        fprintf(r->cfg->log, " (%.1f ms)\n", (run_now_s() - t0) * 1e3);
    return 0;
}

/* A copy over boundary i did not go: the boundary goes through the hub and
 * is tried again after 1, 2, 4 ... 64 steps. */
static void boundary_failed(struct run *r, uint32_t i, uint64_t number)
{
    struct boundary *b = &r->bounds[i];
    uint32_t shift = b->fails < 6 ? b->fails : 6;

    b->proven = 0;
    b->clean = 0;
    b->fails++;
    b->retry_step = number + (1ull << shift);
    r->stages[i].copies_not_done++;
}

/* Acts on the replies read so far: a synchronous hand-off's outcome (on
 * "not done", the hub fallback's GET), copies counted, steps retired.
 * Returns 1 on a fatal error, else 0; *changed is set when it acted. */
static int process(struct engine *e, int *changed)
{
    struct run *r = e->r;

    for (uint32_t k = e->done; k < e->next[0]; k++) {
        struct step *st = step_at(e, k);

        for (uint32_t s = 0; s + 1 < r->n_stages; s++) {
            struct block *blk = &st->b[s];
            int rc;

            if (!blk->submitted || blk->mode != OUT_HANDOFF_SYNC || blk->resolved ||
                pending(blk->st_run))
                continue;
            blk->resolved = 1;
            *changed = 1;
            if (blk->st_run != 0)
                continue; /* the run failed: the error check reports it */
            note_outcome(r, s, blk->copy.result, blk->copy.status);
            if (blk->copy.result == BATON_COPY_DONE) {
                r->bounds[s].proven = 1; /* fails is forgotten only after clean steps */
                continue;
            }
            /* not done: this step's hidden state goes through the hub
             * (hidden_out still holds it: the next block waited) */
            boundary_failed(r, s, st->number);
            blk->mode = OUT_GET;
            blk->has_get = 1;
            baton_conn_track(r->stages[s].conn, &blk->st_get);
            rc = baton_submit_get_tensor(r->stages[s].conn, &r->stages[s].st.io.hidden_out, 0,
                                         r->bounds[s].host[st->slot],
                                         (uint64_t)r->hp.n_embd * st->n * sizeof(float));
            r->hidden_bytes_hub += (uint64_t)r->hp.n_embd * st->n * sizeof(float);
            r->stages[s].hidden_gets++;
            if (rc != 0)
                return submit_fail(e, s, rc);
        }
        /* the ring's synchronous hand-off: on "not done" the next step's
         * token goes through the coordinator (the argmax came back) */
        {
            const uint32_t last = r->n_stages - 1;
            struct block *blk = &st->b[last];

            if (blk->submitted && blk->ring == OUT_HANDOFF_SYNC && !blk->resolved &&
                !pending(blk->st_run)) {
                blk->resolved = 1;
                *changed = 1;
                if (blk->st_run == 0) {
                    note_outcome(r, last, blk->copy.result, blk->copy.status);
                    if (blk->copy.result == BATON_COPY_DONE) {
                        r->bounds[last].proven = 1;
                    } else {
                        boundary_failed(r, last, st->number);
                        blk->ring = 0;
                    }
                }
            }
        }
    }
    /* retire answered steps in order */
    while (e->done < e->m && e->done < e->next[r->n_stages - 1]) {
        struct step *st = step_at(e, e->done);
        uint32_t s;

        /* only a step whose every reply succeeded retires; a failed one
         * stays for check_errors (and recover) */
        for (s = 0; s < r->n_stages && block_ok(&st->b[s]); s++)
            ;
        if (s < r->n_stages)
            break;
        /* a fenced run that succeeded: the hand-off into it landed (stage
         * 1's: the ring's, from the last stage) */
        for (s = 0; s < r->n_stages; s++) {
            const uint32_t bi = s == 0 ? r->n_stages - 1 : s - 1;
            struct boundary *b = &r->bounds[bi];

            if (!st->b[s].fenced)
                continue;
            r->stages[bi].copies_done++;
            if (s == 0)
                r->ring_tokens += st->n;
            note_outcome(r, bi, BATON_COPY_DONE, 0);
            /* a boundary that failed is tried again after 1, 2, 4 ... 64
             * steps; after RUN_CLEAN_STEPS steps without a failure its
             * count starts again, so one that fails every few steps is not
             * tried on every one */
            if (++b->clean >= RUN_CLEAN_STEPS)
                b->fails = 0;
        }
        e->done++;
        e->recoveries = 0; /* a limit on failures in a row, not per batch */
        *changed = 1;
        /* a ring step's token, streamed as it comes; the caller may stop
         * the steps after it (EOS, -n) */
        if (r->on_token && r->on_token(r, st->b[r->n_stages - 1].argmax) != 0)
            e->m = e->done;
        if (r->on_retire) {
            const int rc = r->on_retire(r, e->done - 1);

            if (rc == 2)
                e->m = e->done; /* the steps after it are not needed */
            else if (rc != 0)
                return 1;
        }
    }
    return 0;
}

/* The first error among the replies read: 0, 1 (fatal, said), or 2 (a run
 * failed with E_FENCE: recover). */
static int check_errors(struct engine *e)
{
    struct run *r = e->r;
    int fence = 0;

    for (uint32_t k = e->done; k < e->next[0]; k++) {
        struct step *st = step_at(e, k);

        for (uint32_t s = 0; s < r->n_stages; s++) {
            const struct block *blk = &st->b[s];
            const int sts[5] = {blk->has_set ? blk->st_set : 0, blk->st_run,
                                blk->has_get ? blk->st_get : 0, blk->has_pset ? blk->st_pset : 0,
                                blk->has_sset ? blk->st_sset : 0};
            static const char *const what[5] = {"SET_TENSOR", "GRAPH_RUN", "GET_TENSOR",
                                                "SET_TENSOR (positions)",
                                                "SET_TENSOR (sampling parameters)"};

            if (!blk->submitted)
                continue;
            for (int i = 0; i < 5; i++) {
                if (pending(sts[i]) || sts[i] == 0)
                    continue;
                if (i == 1 && sts[i] == BATON_E_FENCE) {
                    fence = 1;
                    continue;
                }
                stage_fail(r, &r->stages[s], what[i], sts[i]);
                step_limit_hint(r, &r->stages[s], sts[i]);
                return 1;
            }
        }
    }
    for (uint32_t s = 0; s < r->n_stages; s++)
        if (baton_conn_is_dead(r->stages[s].conn))
            return stage_fail(r, &r->stages[s], "step", BATON_E_IO);
    return fence ? 2 : 0;
}

/* The stages whose replies the engine needs to go on (bit s): the last
 * stage's (the token), a stage's pending GET (the hub path's hidden state,
 * the logits) or synchronous hand-off (its outcome decides the next
 * stage's input), the next stage of a stage that still has blocks to send
 * (its answer frees a slot); with --pipeline off, every stage's. */
static uint32_t needed_stages(struct engine *e)
{
    struct run *r = e->r;
    uint32_t mask = 1u << (r->n_stages - 1);

    if (!r->cfg->pipeline)
        return (r->n_stages >= 32 ? 0u : 1u << r->n_stages) - 1u;
    for (uint32_t k = e->done; k < e->next[0]; k++) {
        const struct step *st = step_at(e, k);

        for (uint32_t s = 0; s < r->n_stages; s++) {
            const struct block *b = &st->b[s];

            if (!b->submitted)
                continue;
            if ((b->has_get && pending(b->st_get)) ||
                (b->mode == OUT_HANDOFF_SYNC && !b->resolved))
                mask |= 1u << s;
        }
    }
    for (uint32_t s = 0; s + 1 < r->n_stages; s++)
        if (e->next[s] < e->m)
            mask |= 1u << (s + 1);
    return mask;
}

/* Reads one reply from every connection that has one ready; blocks (within
 * --timeout) until at least one has. 0 or 1. */
static int wait_replies(struct engine *e)
{
    struct run *r = e->r;
    struct pollfd pfd[BATON_MAX_STAGES];
    uint32_t who[BATON_MAX_STAGES], n = 0, s;
    int rc;

    const uint32_t needed = needed_stages(e);

    /* a reply the engine does not need yet (a run's acknowledgement on a
     * direct path) is read later, when it has long arrived: waking for it
     * would take a core from a stage that computes; a server that closes
     * the connection (it died) wakes the engine all the same (POLLRDHUP) */
    for (s = 0; s < r->n_stages; s++) {
        if (baton_conn_outstanding(r->stages[s].conn) == 0)
            continue;
        pfd[n].fd = baton_conn_fd(r->stages[s].conn);
        pfd[n].events = (needed >> s) & 1 ? POLLIN : POLLRDHUP;
        pfd[n].revents = 0;
        who[n++] = s;
    }
    {
        uint32_t i;

        for (i = 0; i < n && pfd[i].events != POLLIN; i++)
            ;
        if (i == n) /* nothing needed is outstanding: what is left is */
            for (i = 0; i < n; i++)
                pfd[i].events = POLLIN;
    }
    if (n == 0) {
        stage_msg(r, "internal error: the step engine waits for nothing\n");
        return 1;
    }
    {
        /* a wait, counted once per reply the engine needs (whether or not
         * it has already arrived): the input of the first block it cannot
         * send yet (a hub GET, a synchronous hand-off's outcome, a slot's
         * last reader), or, with every block sent, the last step's result
         * (keyed on the batch, not on the steps retired: acknowledgements
         * read late must not count again) */
        uint64_t key = 1ull << 63;

        for (s = 0; s < r->n_stages; s++)
            if (e->next[s] < e->m && ((key >> 63) || e->next[s] < (uint32_t)(key >> 8)))
                key = (uint64_t)e->next[s] << 8 | s;
        if (key >> 63) /* every block sent: one wait for the batch's
                          results, however its replies arrive */
            key |= (uint64_t)e->m << 8;
        key ^= e->base << 32;
        if (key != e->wait_key) {
            r->waits++;
            e->wait_key = key;
        }
    }
    do {
        rc = poll(pfd, n, r->cfg->timeout_ms > 0 ? r->cfg->timeout_ms : -1);
    } while (rc < 0 && errno == EINTR);
    if (rc < 0) {
        stage_msg(r, "poll: %s\n", strerror(errno));
        return 1;
    }
    if (rc == 0) {
        /* name the first stage that has not answered: read what every
         * stage has sent, then look in stage order */
        for (uint32_t i = 0; i < n; i++) {
            struct pollfd one = {pfd[i].fd, POLLIN, 0};

            while (baton_conn_outstanding(r->stages[who[i]].conn) > 0 &&
                   poll(&one, 1, 0) == 1 && !baton_conn_is_dead(r->stages[who[i]].conn))
                (void)baton_conn_read_reply(r->stages[who[i]].conn);
        }
        /* a stage that owes no reply is not at fault */
        for (s = 0; s < r->n_stages && (block_answered(&step_at(e, e->done)->b[s]) ||
                                        baton_conn_outstanding(r->stages[s].conn) == 0);
             s++)
            ;
        if (s == r->n_stages)
            s = who[0];
        return stage_fail(r, &r->stages[s], "step", BATON_E_TIMEOUT);
    }
    for (uint32_t i = 0; i < n; i++) {
        if (pfd[i].revents == 0)
            continue;
        (void)baton_conn_read_reply(r->stages[who[i]].conn); /* the status goes to its slot */
    }
    /* replies not needed above that have arrived: read without waiting */
    for (uint32_t i = 0; i < n; i++) {
        struct pollfd one = {pfd[i].fd, POLLIN, 0};

        while (baton_conn_outstanding(r->stages[who[i]].conn) > 0 && poll(&one, 1, 0) == 1 &&
               !baton_conn_is_dead(r->stages[who[i]].conn))
            (void)baton_conn_read_reply(r->stages[who[i]].conn);
    }
    return 0;
}

/* Reads every outstanding reply of every stage. 0, or 1 when a connection
 * died. */
static int drain_all(struct engine *e)
{
    struct run *r = e->r;

    for (uint32_t s = 0; s < r->n_stages; s++) {
        while (baton_conn_outstanding(r->stages[s].conn) > 0)
            (void)baton_conn_read_reply(r->stages[s].conn);
        if (baton_conn_is_dead(r->stages[s].conn))
            return stage_fail(r, &r->stages[s], "step", BATON_E_IO);
    }
    return 0;
}

/* Before boundary i goes through the coordinator: hand-offs of later steps
 * may still be on their way (queued on stage i's link), and the hub path's
 * SET and the redone runs are not fenced, so a late write could land in a
 * slot between the SET and the run. The owner's PEER_FENCE with a sequence
 * number above every one used voids each slot's grant up to it: a write in
 * progress lands nothing more once the reply has come, and a later one is
 * refused as not newer (docs/PROTOCOL.md "PEER_FENCE"). Every reply has been
 * read, so the destination's connection is idle and answers at once. 0 or
 * 1 (said). */
static int seal_boundary(struct run *r, uint32_t i)
{
    struct boundary *b = &r->bounds[i];
    struct stage_rt *dst = &r->stages[(i + 1) % r->n_stages]; /* the ring's: stage 1 */

    for (uint32_t j = 0; j < b->n_grants; j++) {
        int rc = baton_peer_fence(dst->conn, b->grant[j], ++b->seq, (uint32_t)-BATON_E_FENCE);

        if (rc == BATON_E_FENCE) {
            /* the grant has seen a sequence number above ours (a holder of
             * its id fenced it far ahead): revoking it stops late writes
             * just as well, and the boundary stays on the hub path */
            rc = baton_revoke_grant(dst->conn, b->grant[j]);
            if (rc == 0 && b->direct) {
                b->direct = 0;
                stage_msg(r, "stage %u -> %u: a slot's grant was fenced past every sequence "
                             "number this run uses; revoked, the boundary goes through the "
                             "coordinator from now on\n",
                          i + 1, i + 2);
            }
        }
        if (rc != 0)
            return stage_fail(r, dst, "PEER_FENCE", rc);
    }
    return 0;
}

/* A hand-off did not land: every reply is read, the earliest failed step
 * and the boundary at fault are found, and the steps from there are redone
 * with that boundary through the coordinator. 0 or 1. */
static int recover(struct engine *e)
{
    struct run *r = e->r;
    uint32_t k_fail = UINT32_MAX, s_fail = 0, k, s;

    if (drain_all(e) != 0)
        return 1;
    if (check_errors(e) == 1)
        return 1;
    for (k = e->done; k < e->next[0] && k_fail == UINT32_MAX; k++) {
        for (s = 0; s < r->n_stages; s++) {
            if (step_at(e, k)->b[s].submitted && step_at(e, k)->b[s].st_run == BATON_E_FENCE) {
                k_fail = k;
                s_fail = s;
                break;
            }
        }
    }
    if (k_fail == UINT32_MAX)
        return 0;
    if (!step_at(e, k_fail)->b[s_fail].fenced || (s_fail == 0 && k_fail < e->gap)) {
        stage_fail(r, &r->stages[s_fail], "GRAPH_RUN", BATON_E_FENCE);
        return 1;
    }
    if (++e->recoveries > 2 * r->n_stages + 4) {
        stage_msg(r, "stage %u: the hand-off into it keeps failing, also through the "
                     "coordinator\n",
                  s_fail + 1);
        return 1;
    }
    /* the boundary at fault: into stage s_fail, or (stage 1) the ring,
     * whose hand-off the last stage's block of the step before made */
    const uint32_t bi = s_fail == 0 ? r->n_stages - 1 : s_fail - 1;
    struct block *pb =
        s_fail == 0 ? &step_at(e, k_fail - e->gap)->b[bi] : &step_at(e, k_fail)->b[bi];
    {
        const int async = s_fail == 0 ? pb->ring == OUT_HANDOFF_ASYNC : pb->mode == OUT_HANDOFF_ASYNC;

        stage_msg(r, "stage %u -> %u: the hand-off of a step did not land (%s); redoing it "
                     "%s\n",
                  bi + 1, s_fail + 1,
                  async && pb->copy.result != BATON_COPY_QUEUED && pb->st_run == 0
                      ? run_outcome_name(pb->copy.result)
                      : "the write failed, was cancelled, or passed the fence deadline",
                  s_fail == 0 ? "with the token from the coordinator"
                              : "through the coordinator (hub path)");
    }
    if (seal_boundary(r, bi) != 0)
        return 1;
    boundary_failed(r, bi, step_at(e, k_fail)->number);
    r->bounds[bi].last_outcome = BATON_COPY_OUTCOME_LIMIT; /* say the next outcome */
    if (s_fail == 0)
        pb->ring = 0; /* the redone step takes the token from the coordinator */
    else
        e->hub_end[bi] = e->next[0]; /* the redone steps go through the hub */
    r->redos += e->next[0] - k_fail;
    for (k = k_fail; k < e->next[0]; k++) {
        struct step *st = step_at(e, k);

        memset(st->b, 0, sizeof st->b);
    }
    for (s = 0; s < r->n_stages; s++) {
        e->next[s] = k_fail;
        r->stages[s].need_reset = 1; /* the servers' latches */
    }
    return 0;
}

/* After an early stop: whether the last stage sent a block that hands its
 * outputs to a step past the stop (step k hands to k + gap while k + gap is
 * below the batch's m as called). */
static int handed_past_stop(const struct engine *e)
{
    const uint32_t last = e->r->n_stages - 1;
    const uint32_t lo = e->m > e->gap ? e->m - e->gap : 0;
    const uint32_t hi = e->m0 > e->gap ? e->m0 - e->gap : 0;

    return lo < (e->next[last] < hi ? e->next[last] : hi);
}

int run_engine(struct run *r, const struct run_ubatch *ub, uint32_t m, int32_t *next)
{
    struct engine *e = calloc(1, sizeof *e);
    int ret = 1;

    if (e == NULL) {
        stage_msg(r, "out of memory\n");
        return 1;
    }
    e->r = r;
    e->ub = ub;
    e->m = m;
    e->m0 = m;
    e->gap = r->ring_gap ? r->ring_gap : 1;
    e->base = r->n_steps;
    e->wait_key = UINT64_MAX;
    while (e->done < e->m) {
        int progress = 0, rc;

        for (uint32_t s = 0; s < r->n_stages; s++) {
            while (can_submit(e, s, e->next[s])) {
                if (submit_block(e, s, e->next[s]) != 0)
                    goto out;
                e->next[s]++;
                progress = 1;
            }
        }
        if (process(e, &progress) != 0)
            goto out;
        rc = check_errors(e);
        if (rc == 1)
            goto out;
        if (rc == 2) {
            if (recover(e) != 0)
                goto out;
            continue;
        }
        if (progress || e->done == e->m)
            continue;
        if (wait_replies(e) != 0)
            goto out;
    }
    if (drain_all(e) != 0)
        goto out;
    /* stopped early: the last stage may have handed the outputs of a step
     * past the stop to stage 1, and such a write may still be queued on
     * its peer link; sealed, it cannot land in a token slot that a later
     * step or prefill fills */
    if (e->m < e->m0 && r->n_stages >= 2 && r->bounds[r->n_stages - 1].direct &&
        handed_past_stop(e)) {
        if (seal_boundary(r, r->n_stages - 1) != 0)
            goto out;
        for (uint32_t s = 0; s < r->n_stages; s++)
            r->stages[s].need_reset = 1; /* a refused late write must not latch a stage */
    }
    *next = step_at(e, e->m - 1)->b[r->n_stages - 1].argmax;
    ret = 0;
out:
    r->n_steps += m;
    free(e);
    return ret;
}
