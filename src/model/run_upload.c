/* A stage's upload (run_internal.h): its weights from the GGUF, its KV
 * cache and I/O buffers, and the graphs it runs, registered once. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "baton/status.h"
#include "compute/compute.h"
#include "core/limits.h"
#include "model/gguf.h"
#include "model/graph_builder.h"
#include "model/run_internal.h"

#define ALIGN RUN_ALIGN
#define UPLOAD_CHUNK (16u << 20)

int baton_run_kv_cache_bytes(uint32_t head_dim, uint32_t n_head_kv, uint32_t n_ctx,
                             uint32_t n_layers, uint32_t elem_bytes, uint64_t *bytes)
{
    /* head_dim * n_head_kv * 4 < 2^66 and n_ctx < 2^32: check each product */
    const uint64_t row = (uint64_t)head_dim * n_head_kv;
    const uint64_t eb = elem_bytes == 2 ? 2 : 4;
    uint64_t one;

    if (n_layers == 0) {
        *bytes = ALIGN;
        return 0;
    }
    if (row > UINT64_MAX / eb || (n_ctx != 0 && row * eb > UINT64_MAX / n_ctx))
        return BATON_E_OVERFLOW;
    one = row * eb * n_ctx;
    if (one > UINT64_MAX - (ALIGN - 1))
        return BATON_E_OVERFLOW;
    one = run_align_up(one);
    if (one > UINT64_MAX / 2 / n_layers)
        return BATON_E_OVERFLOW;
    *bytes = one * 2 * n_layers;
    return 0;
}

/* Looks up a weight tensor and checks its shape ({ne0, ne1}, ne1 = 1 for vectors). */
static int find_weight(struct run *r, const char *name, uint64_t ne0, uint64_t ne1,
                       struct baton_gguf_tensor *t)
{
    int rc = baton_gguf_find_tensor(r->gguf, name, t, NULL);

    if (rc != 0) {
        stage_msg(r, "%s: tensor '%s': missing\n", r->cfg->model_path, name);
        return 1;
    }
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1) {
        stage_msg(r,
                  "%s: tensor '%s': shape (%" PRIu64 ", %" PRIu64 ") but the model needs "
                  "(%" PRIu64 ", %" PRIu64 ")\n",
                  r->cfg->model_path, name, t->ne[0], t->ne[1], ne0, ne1);
        return 1;
    }
    return 0;
}


static int place(struct run *r, struct upload_item *items, uint32_t *n_items, uint64_t *offset,
                 const char *name, uint64_t ne0, uint64_t ne1, struct baton_tensor_desc *dst)
{
    struct upload_item *it = &items[*n_items];
    int rc;

    if (find_weight(r, name, ne0, ne1, &it->src) != 0)
        return 1;
    *offset = run_align_up(*offset);
    rc = baton_tensor_init(dst, 0, *offset, it->src.type, ne0, ne1, 1, 1);
    if (rc != 0) {
        stage_msg(r, "%s: tensor '%s': %s\n", r->cfg->model_path, name,
                  baton_status_str(rc));
        return 1;
    }
    it->dst = dst;
    *offset += dst->nbytes;
    (*n_items)++;
    return 0;
}

/* Bytes of the hidden state of one ubatch (n_embd x n_ubatch floats): what
 * a split run sends a stage in one SET_TENSOR on the hub path. */
uint64_t run_hidden_state_bytes(const struct run *r)
{
    return (uint64_t)r->hp.n_embd * r->n_tok_max * sizeof(float);
}

/* Until a stage's buffers are allocated, its tensors name these in their
 * place (the weights 0), so that a graph built to size a step (step_bytes)
 * tells its buffers apart; each is replaced by the handle ALLOC_BUFFER
 * returns before any graph goes to the server. */
#define KV_BUF_UNSET (UINT64_MAX - 1)
#define IO_BUF_UNSET (UINT64_MAX - 2)

/* The KV cache's tensors of stage s, buffer KV_BUF_UNSET until it is
 * allocated: per local layer k and v, of type (F32 or F16: --kv-type)
 * {head_dim, n_cells, n_head_kv} (kv-head-major, as ATTENTION defines them:
 * core/ops.h), one after the other; s->kv_bytes is their extent (==
 * baton_run_kv_cache_bytes). 0 or baton_tensor_init's status. */
static int kv_descs(struct run *r, struct stage_rt *s, uint32_t type, uint32_t n_cells)
{
    const struct baton_llama_hparams *hp = &r->hp;
    const uint32_t n_local = s->st.layer_end - s->st.layer_begin;
    uint64_t koff = 0;

    for (uint32_t l = 0; l < n_local; l++) {
        struct baton_llama_layer *L = &s->st.layers[l];
        int rc = baton_tensor_init(&L->k_cache, KV_BUF_UNSET, koff, type, hp->head_dim, n_cells,
                                   hp->n_head_kv, 1);

        koff = run_align_up(koff + L->k_cache.nbytes);
        if (rc == 0)
            rc = baton_tensor_init(&L->v_cache, KV_BUF_UNSET, koff, type, hp->head_dim, n_cells,
                                   hp->n_head_kv, 1);
        koff = run_align_up(koff + L->v_cache.nbytes);
        if (rc != 0)
            return rc;
    }
    s->kv_bytes = koff ? koff : ALIGN;
    return 0;
}

/* The most I/O tensors a stage has: positions, last indices, logits,
 * argmax, SAMPLE's parameters, the hidden state out, and an input per
 * slot. */
#define IO_MAX (6 + BATON_LLAMA_MAX_SLOTS)

/* The I/O tensors of stage s, buffer IO_BUF_UNSET until it is allocated: the hidden
 * state comes in through n_slots slots (not on the first stage) and goes
 * out of hidden_out (not on the last); d[] gets each tensor, s->io_bytes
 * their extent. Returns how many (at most IO_MAX), 0 after a message. */
static uint32_t io_descs(struct run *r, struct stage_rt *s, struct baton_tensor_desc *d[IO_MAX])
{
    const struct baton_llama_hparams *hp = &r->hp;
    struct baton_llama_stage *st = &s->st;
    struct baton_llama_io *io = &st->io;
    const uint32_t u = r->n_tok_max;
    /* input slots: the hidden state's (not on the first stage), or the
     * token ids' (the first stage of several: the decode ring over
     * pipeline groups writes them ahead, run_plan.c) */
    const uint32_t n_in = st->first && st->last ? 1 : r->n_slots;
    uint64_t ioff = 0;
    uint32_t types[IO_MAX] = {BATON_TYPE_I32, BATON_TYPE_I32, BATON_TYPE_F32,
                              BATON_TYPE_I32, BATON_TYPE_I32, BATON_TYPE_F32};
    /* several sequences: {n,3} positions, an argmax per token; SAMPLE's
     * parameters: 6 words per output token */
    uint64_t ne0[IO_MAX] = {r->seqs ? 3ull * u : u, r->seqs ? u : 1, hp->n_vocab,
                            r->seqs ? u : 1,        6ull * (r->seqs ? u : 1), hp->n_embd};
    uint64_t ne1[IO_MAX] = {1, 1, 1, 1, 1, u};
    uint32_t n_io = st->last ? 5 : 6, k;

    d[0] = &io->pos;
    d[1] = &io->last_idx;
    d[2] = &io->logits;
    d[3] = &io->argmax;
    d[4] = &io->sample;
    d[5] = &io->hidden_out;
    io->n_slots = n_in;
    for (k = 0; k < n_in; k++) {
        d[n_io] = st->first ? &io->tokens[k] : &io->hidden_in[k];
        types[n_io] = st->first ? BATON_TYPE_I32 : BATON_TYPE_F32;
        ne0[n_io] = st->first ? u : hp->n_embd;
        ne1[n_io] = st->first ? 1 : u;
        n_io++;
    }
    for (k = 0; k < n_io; k++) {
        int rc = baton_tensor_init(d[k], IO_BUF_UNSET, ioff, types[k], ne0[k], ne1[k], 1, 1);

        if (rc != 0) {
            stage_msg(r, "I/O tensor size: %s\n", baton_status_str(rc));
            return 0;
        }
        ioff = run_align_up(ioff + d[k]->nbytes);
    }
    s->io_bytes = ioff;
    return n_io;
}

/* The outputs stage s's graph for counts[i] has (outs NULL: 1). */
static uint32_t out_of(const struct stage_rt *s, const uint32_t *outs, uint32_t i)
{
    return outs && outs[i] > 1 && s->st.last ? outs[i] : 1;
}

/* What graph g holds on a server once registered (baton_graph_stored_bytes),
 * and in *scratch
 * the scratch arena it needs (baton_graph_validate, at most max_nodes
 * nodes). 0 or the validation's status. */
static int graph_charge(const struct baton_graph *g, uint32_t max_nodes, uint64_t *charge,
                        uint64_t *scratch)
{
    struct baton_node_plan *plan = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *plan);
    int rc = plan ? baton_graph_validate(g, max_nodes, plan, scratch) : BATON_E_NOMEM;

    free(plan);
    *charge = baton_graph_stored_bytes(g);
    return rc;
}

/* Adds what the graph of a step of n tokens (n_out outputs, input slot) on
 * stage s holds on the server to *graphs (server: cmd_graph_register's
 * charge, its leaves, nodes and plan) and raises *scratch to its scratch
 * arena (baton_graph_validate). 0, or nonzero where the graph does not
 * build or validate here (its registration then says why). The graph is
 * built in s->leaves / s->nodes, which registration reuses. */
static int step_graph_bytes(struct run *r, struct stage_rt *s, uint32_t n, uint32_t n_out,
                            uint32_t slot, uint64_t *graphs, uint64_t *scratch)
{
    struct baton_llama_graph_inputs in;
    struct baton_gb gb;
    uint64_t need = 0, charge = 0;
    int rc;

    baton_gb_init(&gb, s->leaves, s->cap_leaves, s->nodes, s->cap_nodes);
    rc = baton_llama_build_stage_out(&r->hp, &s->st, n, n_out, slot, r->want_logits, &gb, &in);
    if (rc == 0)
        rc = graph_charge(&gb.g, s->cap_nodes, &charge, &need);
    if (rc != 0)
        return rc;
    *graphs += charge;
    if (need > *scratch)
        *scratch = need;
    return 0;
}

/* What stage s's steps need on the server beyond its buffers: the graphs
 * the run registers before it starts, each once per input slot, told apart
 * as register_shapes does (one sequence: the prompt's ubatches, its rest
 * and the decode step; several: run_par_shapes), and the scratch arena of
 * the largest that surely runs (run_par_shape_runs): the server's own
 * figures. *scratch gets the arena alone. 0 where a graph does not build or
 * validate here. */
static uint64_t step_bytes(struct run *r, struct stage_rt *s, uint64_t *scratch)
{
    uint32_t counts[RUN_PAR_SHAPES], outs[RUN_PAR_SHAPES], n;
    uint64_t graphs = 0, unsure = 0;

    *scratch = 0;
    if (r->seqs) {
        n = run_par_shapes(r, counts, outs);
    } else {
        const size_t n_prompt = r->n_prompt_max;

        counts[0] = n_prompt >= r->n_ubatch ? r->n_ubatch : 0;
        counts[1] = (uint32_t)(n_prompt % r->n_ubatch);
        counts[2] = r->cfg->n_predict > 1 ? 1 : 0;
        outs[0] = outs[1] = outs[2] = 1;
        n = 3;
    }
    for (uint32_t i = 0; i < n; i++) {
        /* only the last stage tells graphs apart by their outputs */
        const uint32_t oi = out_of(s, outs, i);
        uint32_t j;

        for (j = 0; j < i && !(counts[j] == counts[i] && out_of(s, outs, j) == oi); j++)
            ;
        if (counts[i] == 0 || j < i)
            continue;
        /* the arena of a step that may never run is not counted: a server
         * maps it only when a run needs it */
        for (uint32_t slot = 0; slot < run_stage_slots(r, s); slot++)
            if (step_graph_bytes(r, s, counts[i], oi, slot, &graphs,
                                 !r->seqs || run_par_shape_runs(r, counts[i], outs[i])
                                     ? scratch
                                     : &unsure) != 0) {
                *scratch = 0;
                return 0;
            }
    }
    return graphs + *scratch;
}

/* The most scratch a server maps for one session: BATON_SCRATCH_LIMIT_BYTES,
 * or its total memory where less (server.c; not a policy key). */
static uint64_t scratch_cap(const struct stage_rt *s)
{
    return s->info.total_memory < BATON_SCRATCH_LIMIT_BYTES ? s->info.total_memory
                                                            : BATON_SCRATCH_LIMIT_BYTES;
}

/* What stage s's session holds on the server, at least, with a KV cache of
 * n_cells cells of type: its weights, KV cache and I/O buffers (whole
 * pages) and step_bytes. Leaves the KV-cache tensors at (type, n_cells);
 * *step gets step_bytes. UINT64_MAX where that does not fit in 64 bits, or
 * where the scratch arena is past the server's fixed limit for one session
 * (BATON_SCRATCH_LIMIT_BYTES, or its total memory where less). */
static uint64_t session_need(struct run *r, struct stage_rt *s, uint32_t type, uint32_t n_cells,
                             uint64_t *step)
{
    uint64_t n = run_page_up(s->weights_bytes), part[3], scratch;

    *step = 0;
    if (kv_descs(r, s, type, n_cells) != 0)
        return UINT64_MAX;
    *step = step_bytes(r, s, &scratch);
    if (scratch > scratch_cap(s))
        return UINT64_MAX;
    part[0] = run_page_up(s->kv_bytes);
    part[1] = run_page_up(s->io_bytes);
    part[2] = *step;
    for (int i = 0; i < 3; i++)
        n = part[i] > UINT64_MAX - n ? UINT64_MAX : n + part[i];
    return n;
}

/* Whether a stage's session is checked: its server gave a limit, and its
 * weights alone are within it (past it, the weights' ALLOC_BUFFER is
 * refused, and weights_alloc_hint explains). */
static int checked(const struct stage_rt *s)
{
    return s->info.max_buffer_bytes != 0 &&
           run_page_up(s->weights_bytes) <= s->info.max_buffer_bytes;
}

/* Whether every checked stage fits with KV caches of n_cells cells of type:
 * each within its server's limit for one session; in-process stages (one
 * server in this process) also all together within its memory. Leaves each
 * stage's KV-cache tensors at (type, n_cells). */
static int sessions_fit(struct run *r, uint32_t type, uint32_t n_cells)
{
    uint64_t sum = 0, step;
    int ok = 1;

    for (uint32_t i = 0; i < r->n_stages; i++) {
        struct stage_rt *s = &r->stages[i];
        uint64_t need;

        if (!checked(s))
            continue;
        need = session_need(r, s, type, n_cells, &step);
        if (need > s->info.max_buffer_bytes)
            ok = 0;
        sum = need > UINT64_MAX - sum ? UINT64_MAX : sum + need;
    }
    if (r->local && sum > r->stages[0].info.total_memory)
        ok = 0;
    return ok;
}

/* The upper midpoint of lo < hi for the searches below, in 64 bits: hi may
 * be 2^32 - 1 (--ctx 4294967295), where hi - lo + 1 wrapped to 0. */
static uint32_t upper_mid(uint32_t lo, uint32_t hi)
{
    return lo + (uint32_t)(((uint64_t)hi - lo + 1) / 2);
}

/* The largest k in [1, hi] with which sessions_fit holds for k x mult cells
 * of type (it grows with k); 0 when none does. */
static uint32_t sessions_fit_max(struct run *r, uint32_t type, uint32_t hi, uint32_t mult)
{
    uint32_t lo = 0;

    while (lo < hi) {
        const uint32_t mid = upper_mid(lo, hi);
        const uint64_t cells = (uint64_t)mid * mult;

        if (cells > UINT32_MAX || !sessions_fit(r, type, (uint32_t)cells))
            hi = mid - 1;
        else
            lo = mid;
    }
    return lo;
}

/* The most sequences at a time, below r->n_seq, with which every session
 * fits at this --ctx: each try is the run with that many (its KV cache,
 * its groups, step shapes and ring slots). 0 when none does. */
static uint32_t seqs_fit_max(struct run *r)
{
    const uint32_t n_seq = r->n_seq, groups = r->n_groups, cells = r->n_cells;
    uint32_t lo = 0, hi = n_seq - 1;

    while (lo < hi) {
        const uint32_t mid = upper_mid(lo, hi);
        const uint64_t c = (uint64_t)r->cfg->n_ctx * mid;
        int ok;

        r->n_seq = mid;
        r->n_groups = groups < mid ? groups : mid;
        r->tok_slots = run_planned_tok_slots(r);
        ok = c <= UINT32_MAX && sessions_fit(r, r->cfg->kv_type, (uint32_t)c);
        if (ok)
            lo = mid;
        else
            hi = mid - 1;
    }
    r->n_seq = n_seq;
    r->n_groups = groups;
    r->n_cells = cells;
    r->tok_slots = run_planned_tok_slots(r);
    return lo;
}

/* The largest ubatch below r->n_ubatch with which sessions_fit holds with
 * KV caches of n_cells cells (prefill steps, their rests and continuous
 * batching's chunks all follow it); 0 when none does. The I/O buffers stay
 * as large as the run's ubatch makes them. */
static uint32_t ubatch_fit_max(struct run *r, uint32_t n_cells)
{
    const uint32_t u = r->n_ubatch, chunk = r->n_chunk;
    uint32_t lo = 0, hi = u - 1;

    while (lo < hi) {
        const uint32_t mid = upper_mid(lo, hi);

        r->n_ubatch = mid;
        r->n_chunk = chunk ? mid : 0;
        if (sessions_fit(r, r->cfg->kv_type, n_cells))
            lo = mid;
        else
            hi = mid - 1;
    }
    r->n_ubatch = u;
    r->n_chunk = chunk;
    return lo;
}

/* The lines for checked stage s with the run's KV cache (one_pos: one
 * position per sequence, as no --ctx fits): what its session needs and
 * past which limit, as kv_fail's first line, where it is past it. Sets
 * *quota when the session's quota, not the server's whole memory, is the
 * limit. Returns whether it printed. */
static int stage_need_lines(struct run *r, struct stage_rt *s, int one_pos, int *quota)
{
    const struct baton_run_config *cfg = r->cfg;
    const uint64_t lim = s->info.max_buffer_bytes;
    const uint32_t n_layers = s->st.layer_end - s->st.layer_begin;
    const int q = lim < s->info.total_memory;
    const char *const who =
        r->local ? "the in-process stages allow one session (3/4 of this machine's memory, "
                   "shared by every stage)"
        : q      ? (r->key ? "the server allows one session (batond --session-memory-bytes, or "
                             "its --client's session_memory_bytes)"
                           : "the server allows one session (batond --session-memory-bytes)")
                 : "the server has for all sessions (batond --total-memory-bytes)";
    char limit[32], held[32], ios[32], steps[32], why[640], ub[96], many[64] = "";
    uint64_t step, need;
    int exact = 0;

    need = session_need(r, s, cfg->kv_type, one_pos ? r->n_seq : r->n_cells, &step);
    if (need <= lim)
        return 0;
    *quota |= q;
    run_format_bytes(limit, sizeof limit, lim);
    run_format_bytes(held, sizeof held, s->weights_bytes);
    run_format_bytes(ios, sizeof ios, s->io_bytes);
    run_format_bytes(steps, sizeof steps, step);
    run_ubatch_name(r, ub, sizeof ub);
    if (one_pos) {
        if (r->n_seq > 1)
            snprintf(many, sizeof many, " for each of %u sequences", r->n_seq);
        stage_msg(r,
                  "stage %u (%s, %u layer%s) needs %s of weights, %s of I/O buffers and %s "
                  "for its graphs and a step's scratch arena (%s) with a KV cache of one "
                  "position%s: more than the %s %s\n",
                  s->index + 1, s->endpoint, n_layers, n_layers == 1 ? "" : "s", held, ios,
                  steps, ub, many, limit, who);
        return 1;
    }
    if (need == UINT64_MAX && run_page_up(s->kv_bytes) <= lim) {
        /* the scratch arena past the fixed limit (ATTENTION's work area
         * grows with the cells) */
        char ctx[RUN_CTX_NAME_CAP], cap[32], arena[32];
        uint64_t scratch;

        if (n_layers > 0 &&
            baton_attention_work_bytes(r->hp.head_dim, r->hp.n_head, r->n_tok_max, r->n_cells,
                                       cfg->kv_type == BATON_TYPE_F16) >
                BATON_SCRATCH_LIMIT_BYTES) {
            step_limit_hint(r, s, BATON_E_LIMIT); /* the work area's own figures */
            return 1;
        }
        (void)step_bytes(r, s, &scratch);
        run_ctx_name(cfg, ctx, sizeof ctx);
        run_format_bytes(arena, sizeof arena, scratch);
        run_format_bytes(cap, sizeof cap, scratch_cap(s));
        stage_msg(r,
                  "%s needs a scratch arena of %s on stage %u (%s, %u layer%s) for a step (%s): "
                  "more than the %s a server maps for one session (fixed; its total memory "
                  "where less); ATTENTION's work area grows with the KV-cache cells\n",
                  ctx, arena, s->index + 1, s->endpoint, n_layers, n_layers == 1 ? "" : "s", ub,
                  cap);
        return 1;
    }
    if (run_page_up(s->kv_bytes) > lim) {
        char kv[32];

        /* figures that round alike are given in bytes too */
        run_format_bytes(kv, sizeof kv, s->kv_bytes);
        exact = strcmp(kv, limit) == 0;
        if (exact) {
            run_format_bytes(kv, sizeof kv, lim);
            snprintf(limit, sizeof limit, "%" PRIu64 " bytes", lim);
        }
        snprintf(why, sizeof why, "%s at most %s%s%s%s in one buffer%s",
                 r->local ? "the in-process stages (3/4 of this machine's memory, shared "
                            "by every stage) allow"
                          : "the server allows",
                 limit, exact ? " (" : "", exact ? kv : "", exact ? ")" : "",
                 r->local || !q ? ""
                                : " (its memory for one session, batond "
                                  "--session-memory-bytes)");
    } else {
        snprintf(why, sizeof why,
                 "with the stage's %s of weights, %s of I/O buffers and %s for its graphs and "
                 "a step's scratch arena (%s), that is %" PRIu64 " bytes in all (buffers in whole pages), "
                 "more than the %" PRIu64 " bytes (%s) %s",
                 held, ios, steps, ub, need, lim, limit, who);
    }
    kv_need_line(r, s, s->kv_bytes, why, exact);
    return 1;
}

/* Several in-process stages past the memory they share, each within it:
 * one line with their sums. Returns 0 (nothing said) where a stage alone
 * is past a limit, which stage_need_lines says. */
static int local_sum_line(struct run *r)
{
    const struct baton_run_config *cfg = r->cfg;
    const uint64_t lim = r->stages[0].info.total_memory;
    uint64_t w = 0, kv = 0, io = 0, steps = 0, total = 0, step;
    uint32_t n_layers = 0;
    char ctx[RUN_CTX_NAME_CAP], sw[32], skv[32], sio[32], sst[32], slim[32];

    for (uint32_t i = 0; i < r->n_stages; i++) {
        struct stage_rt *s = &r->stages[i];
        const uint64_t need = session_need(r, s, cfg->kv_type, r->n_cells, &step);

        if (!checked(s) || need > s->info.max_buffer_bytes)
            return 0;
        w += s->weights_bytes;
        kv += s->kv_bytes;
        io += s->io_bytes;
        steps += step;
        total += need; /* each <= max_buffer_bytes: no wrap for a few stages */
        n_layers += s->st.layer_end - s->st.layer_begin;
    }
    run_ctx_name(cfg, ctx, sizeof ctx);
    run_format_bytes(sw, sizeof sw, w);
    run_format_bytes(skv, sizeof skv, kv);
    run_format_bytes(sio, sizeof sio, io);
    run_format_bytes(sst, sizeof sst, steps);
    run_format_bytes(slim, sizeof slim, lim);
    stage_msg(r,
              "%s needs %s of KV cache on the %u in-process stages (%u layers); with their %s of "
              "weights, %s of I/O buffers and %s for their graphs and steps' scratch arenas, "
              "that is %" PRIu64 " bytes in all, more than the %" PRIu64 " bytes (%s) of this "
              "machine's memory they share (3/4 of it)\n",
              ctx, skv, r->n_stages, n_layers, sw, sio, sst, total, lim, slim);
    return 1;
}

int run_check_sessions(struct run *r)
{
    const struct baton_run_config *cfg = r->cfg;
    const uint32_t tok_slots = r->tok_slots;
    const uint64_t min_ctx = cfg->ctx_origin == BATON_CTX_BENCH
                                 ? cfg->n_ctx
                                 : (uint64_t)r->n_prompt_max + cfg->n_predict;
    const uint32_t min_cells =
        (uint32_t)((min_ctx < cfg->n_ctx ? min_ctx : cfg->n_ctx) * r->n_seq); /* <= n_cells */
    struct run_kv_fits fits;
    struct stage_rt *tight = NULL;
    int quota = 0, ret = 0;

    /* stage 1 registers its shapes once per token slot the ring will use */
    r->tok_slots = run_planned_tok_slots(r);
    /* a stage's weights past its limit: no --ctx helps, said first */
    for (uint32_t i = 0; i < r->n_stages; i++) {
        struct stage_rt *s = &r->stages[i];

        if (s->info.max_buffer_bytes != 0 && !checked(s)) {
            stage_msg(r, "stage %u (%s): its weights alone are more than a session may hold "
                         "there (nothing was uploaded)\n",
                      s->index + 1, s->endpoint);
            weights_alloc_hint(r, s, &s->info,
                               s->weights_bytes > s->info.total_memory ? BATON_E_LIMIT
                                                                       : BATON_E_QUOTA);
            ret = 1;
        }
    }
    if (ret != 0 || sessions_fit(r, cfg->kv_type, r->n_cells))
        goto out;
    ret = 1;
    /* what fits, every stage at once: positions per sequence, sequences at
     * this --ctx, half the bytes at this --ctx */
    fits.ctx = sessions_fit_max(r, cfg->kv_type, cfg->n_ctx, r->n_seq);
    fits.seqs = r->n_seq > 1 ? seqs_fit_max(r) : 0;
    fits.f16 = cfg->kv_type != BATON_TYPE_F16 && sessions_fit(r, BATON_TYPE_F16, r->n_cells);
    /* (where no --ctx fits: at the smallest one the run allows, the longest
     * prompt + -n, bench's own context already being that) */
    fits.ubatch = r->n_ubatch > 1 ? ubatch_fit_max(r, fits.ctx ? r->n_cells : min_cells) : 0;
    if (r->local && r->n_stages > 1 && local_sum_line(r))
        tight = &r->stages[0];
    for (uint32_t i = 0; tight == NULL && i < r->n_stages; i++) {
        struct stage_rt *s = &r->stages[i];

        if (checked(s) && stage_need_lines(r, s, fits.ctx == 0, &quota))
            tight = s;
    }
    /* the other stages past their limits say so too */
    for (uint32_t i = tight ? tight->index + 1 : r->n_stages; !r->local && i < r->n_stages; i++)
        if (checked(&r->stages[i]))
            (void)stage_need_lines(r, &r->stages[i], fits.ctx == 0, &quota);
    if (tight == NULL) /* not reached: a stage, or the in-process stages' sum, was said */
        tight = &r->stages[0];
    if (fits.ctx == 0) { /* not even one position: not the KV cache's fault */
        const uint32_t n_layers = tight->st.layer_end - tight->st.layer_begin;
        char fewer[64] = "", ub[64] = "", layers[96] = "";

        if (r->n_seq > 1 && fits.seqs >= 1)
            snprintf(fewer, sizeof fewer, "%s %u%s, ", run_seq_flag(cfg), fits.seqs,
                     fits.seqs == 1 ? "" : " or fewer");
        if (fits.ubatch && min_cells < r->n_cells)
            snprintf(ub, sizeof ub, "--ubatch %u or less with --ctx %u, ", fits.ubatch,
                     min_cells / r->n_seq);
        else if (fits.ubatch)
            snprintf(ub, sizeof ub, "--ubatch %u or less, ", fits.ubatch);
        if (n_layers > 1 && !r->local)
            snprintf(layers, sizeof layers,
                     "fewer layers on stage %u (--split, or one more server in --servers), ",
                     tight->index + 1);
        stage_msg(r, "to fit: %s%s%s%s%s\n", fewer, ub, layers,
                  r->local ? "or servers with more memory (--servers)"
                  : quota  ? "or a batond with a larger --session-memory-bytes"
                           : "or a batond with a larger --total-memory-bytes",
                  quota && r->key && !r->local ? " (or its --client's session_memory_bytes)"
                                               : "");
        goto out;
    }
    kv_fit_line(r, tight, quota, &fits);
out:
    /* the KV caches as the run has them; the ring sets its slots itself */
    for (uint32_t i = 0; i < r->n_stages; i++)
        (void)kv_descs(r, &r->stages[i], cfg->kv_type, r->n_cells);
    r->tok_slots = tok_slots;
    return ret;
}

int run_prepare_stage(struct run *r, struct stage_rt *s)
{
    const struct baton_llama_hparams *hp = &r->hp;
    struct baton_llama_stage *st = &s->st;
    const uint32_t n_local = st->layer_end - st->layer_begin;
    const uint64_t kv_dim = (uint64_t)hp->head_dim * hp->n_head_kv;
    struct upload_item *items;
    uint32_t n_items = 0, i, l;
    uint64_t off = 0;
    struct baton_tensor_desc *io_d[IO_MAX];
    int ret = 1, rc;
    char name[96];

    items = s->items = calloc((size_t)n_local * 16 + 4, sizeof(*items));
    st->layers = calloc(n_local ? n_local : 1, sizeof(*st->layers));
    if (items == NULL || st->layers == NULL) {
        stage_msg(r, "out of memory\n");
        goto out;
    }
    rc = baton_device_info(s->conn, &s->info);
    if (rc != 0) {
        ret = stage_fail(r, s, "DEVICE_INFO", rc);
        goto out;
    }
    if (st->sample && !(s->info.op_mask & (1ull << BATON_OP_SAMPLE))) {
        stage_msg(r, "stage %u (%s): the server does not sample on the stage (op SAMPLE), "
                     "which --temp needs: a batond of this version is needed\n",
                  s->index + 1, s->endpoint);
        goto out;
    }
    if (hp->rope_freqs && n_local > 0 && !(s->info.op_mask & (1ull << BATON_OP_ROPE_FREQS))) {
        stage_msg(r, "stage %u (%s): the server has no op ROPE_FREQS, which the model's "
                     "rope_freqs.weight (Llama 3.1 rope scaling) needs: a batond of this "
                     "version is needed\n",
                  s->index + 1, s->endpoint);
        goto out;
    }
    if (hp->ffn_gelu && n_local > 0 && !(s->info.op_mask & (1ull << BATON_OP_GELU))) {
        stage_msg(r, "stage %u (%s): the server has no op GELU, which the model's "
                     "architecture (%s) needs: a batond of this version is needed\n",
                  s->index + 1, s->endpoint, baton_llama_arch_name(hp->arch));
        goto out;
    }
    /* ROPE's p3 (linear scaling) came with GELU: a batond without GELU
     * answers E_INVAL to the graph, which would not say why */
    if (hp->rope_scale != 1.0f && n_local > 0 && !(s->info.op_mask & (1ull << BATON_OP_GELU))) {
        stage_msg(r, "stage %u (%s): the server predates linear rope scaling (ROPE p3), "
                     "which the model's rope scaling factor %g needs: a batond of this "
                     "version is needed\n",
                  s->index + 1, s->endpoint, 1.0 / (double)hp->rope_scale);
        goto out;
    }
    if (st->first && place(r, items, &n_items, &off, "token_embd.weight", hp->n_embd,
                           hp->n_vocab, &st->tok_embd) != 0)
        goto out;
    for (l = st->layer_begin; l < st->layer_end; l++) {
        struct baton_llama_layer *L = &st->layers[l - st->layer_begin];
        static const char *const fmt[9] = {
            "blk.%u.attn_norm.weight", "blk.%u.attn_q.weight",  "blk.%u.attn_k.weight",
            "blk.%u.attn_v.weight",    "blk.%u.attn_output.weight", "blk.%u.ffn_norm.weight",
            "blk.%u.ffn_gate.weight",  "blk.%u.ffn_up.weight",  "blk.%u.ffn_down.weight"};
        const uint64_t shape[9][2] = {
            {hp->n_embd, 1},       {hp->n_embd, hp->n_embd_q}, {hp->n_embd, kv_dim},
            {hp->n_embd, kv_dim},  {hp->n_embd_q, hp->n_embd}, {hp->n_embd, 1},
            {hp->n_embd, hp->n_ff}, {hp->n_embd, hp->n_ff},  {hp->n_ff, hp->n_embd}};
        struct baton_tensor_desc *dst[9] = {&L->attn_norm, &L->wq,     &L->wk,
                                            &L->wv,        &L->wo,     &L->ffn_norm,
                                            &L->w_gate,    &L->w_up,   &L->w_down};
        uint32_t k;

        /* the vectors of qwen2 (Q/K/V biases), qwen3 and gemma3 (Q/K norms)
         * and gemma3 (the norms after attention and feed-forward) */
        static const char *const fmt_x[7] = {
            "blk.%u.attn_q.bias",          "blk.%u.attn_k.bias",
            "blk.%u.attn_v.bias",          "blk.%u.attn_q_norm.weight",
            "blk.%u.attn_k_norm.weight",   "blk.%u.post_attention_norm.weight",
            "blk.%u.post_ffw_norm.weight"};
        const uint64_t len_x[7] = {hp->n_embd_q,  kv_dim,     kv_dim,    hp->head_dim,
                                   hp->head_dim, hp->n_embd, hp->n_embd};
        struct baton_tensor_desc *dst_x[7] = {&L->bq,     &L->bk,     &L->bv,
                                              &L->q_norm, &L->k_norm, &L->attn_post_norm,
                                              &L->ffn_post_norm};

        for (k = 0; k < 9; k++) {
            snprintf(name, sizeof(name), fmt[k], l);
            if (place(r, items, &n_items, &off, name, shape[k][0], shape[k][1], dst[k]) != 0)
                goto out;
        }
        for (k = 0; k < 7; k++) {
            if (k < 3 ? !hp->qkv_bias : k < 5 ? !hp->qk_norm : !hp->post_norms)
                continue;
            snprintf(name, sizeof(name), fmt_x[k], l);
            if (place(r, items, &n_items, &off, name, len_x[k], 1, dst_x[k]) != 0)
                goto out;
        }
    }
    if (hp->rope_freqs && n_local > 0 &&
        place(r, items, &n_items, &off, "rope_freqs.weight", hp->n_rot / 2, 1, &st->rope_freqs) !=
            0)
        goto out;
    if (st->last) {
        struct baton_gguf_tensor t;
        const char *out_name = "output.weight";

        if (place(r, items, &n_items, &off, "output_norm.weight", hp->n_embd, 1,
                  &st->output_norm) != 0)
            goto out;
        /* tied output head: llama.cpp falls back to the embedding too */
        if (baton_gguf_find_tensor(r->gguf, out_name, &t, NULL) != 0)
            out_name = "token_embd.weight";
        if (place(r, items, &n_items, &off, out_name, hp->n_embd, hp->n_vocab, &st->output) != 0)
            goto out;
    }
    for (i = 0; i < n_items; i++) {
        const uint32_t ty = items[i].src.type;
        const int is_vector = items[i].src.n_dims <= 1;

        /* norms, biases and rope factors are F32 vectors; matrices F32,
         * F16, BF16, Q8_0, Q4_0, Q5_0, Q5_1 or a K-quant (rows a multiple of the
         * block: the GGUF reader checked that) */
        if (is_vector ? ty != BATON_TYPE_F32
                      : !(ty == BATON_TYPE_F32 || ty == BATON_TYPE_F16 || ty == BATON_TYPE_BF16 ||
                          ty == BATON_TYPE_Q8_0 || ty == BATON_TYPE_Q4_0 ||
                          ty == BATON_TYPE_Q5_0 || ty == BATON_TYPE_Q5_1 ||
                          ty == BATON_TYPE_Q2_K || ty == BATON_TYPE_Q3_K ||
                          ty == BATON_TYPE_Q4_K || ty == BATON_TYPE_Q5_K ||
                          ty == BATON_TYPE_Q6_K || ty == BATON_TYPE_IQ4_NL ||
                          ty == BATON_TYPE_IQ4_XS)) {
            stage_msg(r, "%s: tensor '%s' has type %s, which the llama graph does not use "
                         "for a %s\n",
                      r->cfg->model_path, items[i].src.name, baton_type_name(ty),
                      is_vector ? "vector (f32 only)"
                                : "matrix (f32, f16, bf16, q8_0, q4_0, q5_0, q5_1, "
                                  "q2_k..q6_k, iq4_nl, iq4_xs)");
            goto out;
        }
        if (items[i].src.type >= 64 || !(s->info.type_mask & (1ull << items[i].src.type))) {
            stage_msg(r, "%s: tensor '%s' has type %s, which stage %u (%s) cannot compute\n",
                      r->cfg->model_path, items[i].src.name, baton_type_name(items[i].src.type),
                      s->index + 1, s->endpoint);
            goto out;
        }
    }
    s->weights_bytes = run_align_up(off);
    rc = kv_descs(r, s, r->cfg->kv_type, r->n_cells);
    if (rc != 0) {
        stage_msg(r, "KV cache size: %s\n", baton_status_str(rc));
        goto out;
    }
    if (io_descs(r, s, io_d) == 0)
        goto out;
    s->cap_leaves = baton_llama_max_leaves(st);
    s->cap_nodes = baton_llama_max_nodes(st);
    s->leaves = calloc(s->cap_leaves, sizeof(*s->leaves));
    s->nodes = calloc(s->cap_nodes, sizeof(*s->nodes));
    if (s->leaves == NULL || s->nodes == NULL) {
        stage_msg(r, "out of memory\n");
        goto out;
    }
    s->n_items = n_items;
    s->session_limit = s->info.max_buffer_bytes;
    ret = 0;
out:
    return ret;
}

int run_upload_stage(struct run *r, struct stage_rt *s, double *bytes_total)
{
    struct baton_llama_stage *st = &s->st;
    const uint32_t n_local = st->layer_end - st->layer_begin;
    const struct upload_item *const items = s->items;
    const uint32_t n_items = s->n_items;
    uint32_t i, l, n_io;
    uint64_t done = 0;
    struct baton_tensor_desc *io_d[IO_MAX];
    int ret = 1, rc;
    const int tty = isatty(fileno(r->cfg->log));

    /* the KV cache's and the I/O tensors as this run has them
     * (run_check_sessions may have tried others); they fit in 64 bits
     * (run_prepare_stage) */
    (void)kv_descs(r, s, r->cfg->kv_type, r->n_cells);
    n_io = io_descs(r, s, io_d);
    rc = baton_alloc_buffer(s->conn, s->weights_bytes, &s->weights_buf);
    if (rc != 0) {
        ret = stage_fail(r, s, "ALLOC_BUFFER (weights)", rc);
        weights_alloc_hint(r, s, &s->info, rc);
        goto out;
    }
    for (i = 0; i < n_items; i++) {
        const struct upload_item *it = &items[i];
        uint64_t pos = 0;

        it->dst->buffer = s->weights_buf;
        while (pos < it->src.nbytes) {
            uint64_t n = it->src.nbytes - pos;

            if (n > UPLOAD_CHUNK)
                n = UPLOAD_CHUNK;
            rc = baton_set_tensor(s->conn, it->dst, pos, (const uint8_t *)it->src.data + pos, n);
            if (rc != 0) {
                ret = stage_fail(r, s, "SET_TENSOR (weights)", rc);
                /* the server's one other E_LIMIT for SET_TENSOR, an ne[i]
                 * above 2^40, cannot come from a descriptor that
                 * baton_tensor_init accepted: it is the frame's length */
                if (rc == BATON_E_LIMIT) {
                    /* the largest payload this run sends a stage: an
                     * upload chunk, or (split runs) a ubatch's hidden
                     * state, which goes in one SET_TENSOR too */
                    uint64_t need = r->n_stages > 1 ? run_hidden_state_bytes(r) : 0;
                    uint32_t k;

                    for (k = 0; k < n_items; k++) {
                        const uint64_t chunk = items[k].src.nbytes < UPLOAD_CHUNK
                                                   ? items[k].src.nbytes
                                                   : UPLOAD_CHUNK;

                        if (chunk > need)
                            need = chunk;
                    }
                    stage_msg(r,
                              "tensor '%s' went in a SET_TENSOR message of %" PRIu64
                              " bytes, more than the server's max message size; batond "
                              "--max-message-bytes %" PRIu64
                              " covers every message this run sends (policy "
                              "max_message_bytes, default 1G)\n",
                              it->src.name, (uint64_t)BATON_TENSOR_DESC_BYTES + 16 + n,
                              (uint64_t)BATON_TENSOR_DESC_BYTES + 16 + need);
                }
                goto out;
            }
            pos += n;
            done += n;
        }
        if (tty && (i % 16) == 15)
            fprintf(r->cfg->log, "\rupload: stage %u/%u (%s): %.1f/%.1f MiB", s->index + 1,
                    r->n_stages, s->endpoint, (double)done / 1048576.0,
                    (double)s->weights_bytes / 1048576.0);
    }
    fprintf(r->cfg->log, "%supload: stage %u/%u (%s): %.1f MiB in %u tensors\n", tty ? "\r" : "",
            s->index + 1, r->n_stages, s->endpoint, (double)done / 1048576.0, n_items);
    *bytes_total += (double)done;

    /* the KV cache (kv_descs) */
    rc = baton_alloc_buffer(s->conn, s->kv_bytes, &s->kv_buf);
    /* only a refusal for memory is the size's fault; E_LIMIT here is the
     * server's table of buffers, full (a size past the server's memory
     * was refused above), and is reported as the server said it */
    if (rc == BATON_E_QUOTA || rc == BATON_E_NOMEM) {
        char why[160], held[32];

        run_format_bytes(held, sizeof held, s->weights_bytes);
        snprintf(why, sizeof why, "the server refused it: %s (%s), with %s of weights held",
                 baton_status_name(rc), baton_status_str(rc), held);
        ret = kv_fail(r, s, s->kv_bytes, why, rc == BATON_E_QUOTA, NULL);
        goto out;
    }
    if (rc != 0) {
        ret = stage_fail(r, s, "ALLOC_BUFFER (KV cache)", rc);
        goto out;
    }
    for (l = 0; l < n_local; l++) {
        st->layers[l].k_cache.buffer = s->kv_buf;
        st->layers[l].v_cache.buffer = s->kv_buf;
    }
    /* the I/O tensors (io_descs) */
    rc = baton_alloc_buffer(s->conn, s->io_bytes, &s->io_buf);
    if (rc != 0) {
        ret = stage_fail(r, s, "ALLOC_BUFFER (I/O)", rc);
        goto out;
    }
    for (i = 0; i < n_io; i++)
        io_d[i]->buffer = s->io_buf;
    ret = 0;
out:
    return ret;
}

/* The registered graph of s for (n, n_out, slot), or NULL. Only the last
 * stage tells graphs apart by n_out (the others' are the same graph). */
static struct stage_graph *find_graph(struct stage_rt *s, uint32_t n, uint32_t n_out,
                                      uint32_t slot)
{
    if (!s->st.last || n_out == 0)
        n_out = 1;
    for (uint32_t i = 0; i < s->n_graphs; i++)
        if (s->graphs[i].n_tokens == n && s->graphs[i].slot == slot &&
            s->graphs[i].n_out == n_out)
            return &s->graphs[i];
    return NULL;
}

/* The distinct non-zero shapes among counts[0..n) on stage s: token
 * counts, and on the last stage (count, outputs) pairs. */
static uint32_t n_shapes(const struct stage_rt *s, const uint32_t *counts, const uint32_t *outs,
                         uint32_t n)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t j;
        for (j = 0; j < i && !(counts[j] == counts[i] && out_of(s, outs, j) == out_of(s, outs, i));
             j++)
            ;
        k += counts[i] != 0 && j == i;
    }
    return k;
}

/* The graphs stage s registers: a shape per distinct count, per slot. */
static uint32_t run_graphs_needed(const struct run *r, const uint32_t *counts,
                                  const uint32_t *outs, uint32_t n, const struct stage_rt *s)
{
    return n_shapes(s, counts, outs, n) * run_stage_slots(r, s);
}

uint32_t run_stage_slots(const struct run *r, const struct stage_rt *s)
{
    return s->st.first ? (r->tok_slots ? r->tok_slots : 1) : r->n_slots;
}

int run_register_graphs(struct run *r, const uint32_t *counts, uint32_t n_counts)
{
    return run_register_graphs_out(r, counts, NULL, n_counts);
}

/* Registers the shapes; with optional set, a shape over a limit (this
 * coordinator's RUN_MAX_GRAPHS, the server's max_graphs_per_session, or the
 * session's memory) is not an error: registration stops there quietly and
 * returns 0. */
static int register_shapes(struct run *r, const uint32_t *counts, const uint32_t *outs,
                           uint32_t n_counts, int optional)
{
    for (uint32_t si = 0; si < r->n_stages; si++) {
        struct stage_rt *s = &r->stages[si];
        const uint32_t n_slots = run_stage_slots(r, s);

        for (uint32_t c = 0; c < n_counts; c++) {
            for (uint32_t slot = 0; counts[c] != 0 && slot < n_slots; slot++) {
                struct stage_graph *sg;
                struct baton_gb gb;
                uint64_t charge = 0, scratch = 0;
                int rc;

                const uint32_t n_out = out_of(s, outs, c);

                if (find_graph(s, counts[c], n_out, slot) != NULL)
                    continue;
                if (s->n_graphs == RUN_MAX_GRAPHS) {
                    if (optional)
                        return 0;
                    stage_msg(r,
                              "stage %u: the run needs more than the %u graphs a coordinator "
                              "keeps per stage (step shapes x %u input slot%s: prompt rests, "
                              "decode steps per group%s); use fewer --slots or --groups%s\n",
                              si + 1, RUN_MAX_GRAPHS, run_stage_slots(r, s),
                              run_stage_slots(r, s) == 1 ? "" : "s",
                              r->n_chunk ? ", continuous batching's mixed steps" : "",
                              r->n_chunk ? ", or --continuous off" : "");
                    return 1;
                }
                sg = &s->graphs[s->n_graphs];
                sg->n_tokens = counts[c];
                sg->n_out = n_out;
                sg->slot = slot;
                baton_gb_init(&gb, s->leaves, s->cap_leaves, s->nodes, s->cap_nodes);
                rc = baton_llama_build_stage_out(&r->hp, &s->st, counts[c], n_out, slot,
                                                 r->want_logits, &gb, &sg->in);
                if (rc != 0) {
                    stage_msg(r, "stage %u: building the graph failed: %s\n", si + 1,
                              baton_status_str(rc));
                    return 1;
                }
                /* what the session will hold with it: an optional shape
                 * that would leave no room for the scratch arena of the
                 * largest step is not registered (the server would make
                 * room by letting the arena go, and the next run could not
                 * map it again) */
                if (graph_charge(&gb.g, s->cap_nodes, &charge, &scratch) != 0)
                    charge = scratch = 0; /* GRAPH_REGISTER says why */
                if (scratch < s->scratch_max)
                    scratch = s->scratch_max;
                if (optional && s->session_limit != 0 &&
                    run_page_up(s->weights_bytes) + run_page_up(s->kv_bytes) +
                            run_page_up(s->io_bytes) + s->graphs_charged + charge + scratch >
                        s->session_limit)
                    return 0;
                rc = baton_graph_register(s->conn, &gb.g, &sg->id);
                /* an optional shape past the server's graphs or its
                 * session's memory: the run goes on without it */
                if ((rc == BATON_E_LIMIT || rc == BATON_E_QUOTA) && optional)
                    return 0;
                if (rc != 0) {
                    stage_fail(r, s, "GRAPH_REGISTER", rc);
                    if (rc == BATON_E_LIMIT) /* which limit: the graph's figures */
                        stage_msg(r,
                                  "stage %u's graph for a step of %u token%s has %u nodes "
                                  "and %" PRIu64 " FLOPs (%s: max_graph_nodes %u, "
                                  "max_graph_flops %llu)\n",
                                  si + 1, counts[c], counts[c] == 1 ? "" : "s", gb.g.n_nodes,
                                  baton_graph_flops(&gb.g),
                                  r->local ? "the in-process stages' limits"
                                           : "batond's defaults, which its policy may lower",
                                  BATON_DEFAULT_MAX_GRAPH_NODES,
                                  (unsigned long long)BATON_DEFAULT_MAX_GRAPH_FLOPS);
                    if (rc == BATON_E_LIMIT)
                        stage_msg(r,
                                  "the run registers %u graphs on stage %u (%u step shape%s x "
                                  "%u input slot%s); a server keeps at most "
                                  "max_graphs_per_session of them (%s), and refuses a graph "
                                  "over its node or compute limits too\n",
                                  run_graphs_needed(r, counts, outs, n_counts, s), si + 1,
                                  n_shapes(s, counts, outs, n_counts),
                                  n_shapes(s, counts, outs, n_counts) == 1 ? "" : "s",
                                  run_stage_slots(r, s),
                                  run_stage_slots(r, s) == 1 ? "" : "s", run_graphs_limit(r));
                    step_limit_hint(r, s, rc);
                    return 1;
                }
                s->graphs_charged += charge;
                s->scratch_max = scratch;
                s->n_graphs++;
            }
        }
    }
    return 0;
}

int run_register_graphs_out(struct run *r, const uint32_t *counts, const uint32_t *outs,
                            uint32_t n_counts)
{
    return register_shapes(r, counts, outs, n_counts, 0);
}

int run_register_graphs_optional(struct run *r, const uint32_t *counts, const uint32_t *outs,
                                 uint32_t n_counts)
{
    return register_shapes(r, counts, outs, n_counts, 1);
}

int run_has_shape(struct run *r, uint32_t n, uint32_t n_out)
{
    for (uint32_t si = 0; si < r->n_stages; si++) {
        struct stage_rt *s = &r->stages[si];
        const uint32_t n_slots = run_stage_slots(r, s);

        for (uint32_t slot = 0; slot < n_slots; slot++)
            if (find_graph(s, n, n_out, slot) == NULL)
                return 0;
    }
    return 1;
}

const struct stage_graph *run_stage_graph(const struct run *r, struct stage_rt *s, uint32_t n,
                                          uint32_t n_out, uint32_t slot)
{
    return find_graph(s, n, n_out, slot % run_stage_slots(r, s));
}
