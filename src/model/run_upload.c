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

/* One weight to upload: where it comes from and where it goes. */
struct upload_item {
    struct baton_gguf_tensor src;
    struct baton_tensor_desc *dst;
};

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

int run_upload_stage(struct run *r, struct stage_rt *s, double *bytes_total)
{
    const struct baton_llama_hparams *hp = &r->hp;
    struct baton_llama_stage *st = &s->st;
    const uint32_t n_local = st->layer_end - st->layer_begin;
    const uint64_t kv_dim = (uint64_t)hp->head_dim * hp->n_head_kv;
    struct upload_item *items;
    uint32_t n_items = 0, i, l;
    uint64_t off = 0, done = 0, kv_bytes = 0;
    int ret = 1, rc;
    char name[96];
    struct baton_device_info info;
    const int tty = isatty(fileno(r->cfg->log));

    items = calloc((size_t)n_local * 14 + 4, sizeof(*items));
    st->layers = calloc(n_local ? n_local : 1, sizeof(*st->layers));
    if (items == NULL || st->layers == NULL) {
        stage_msg(r, "out of memory\n");
        goto out;
    }
    rc = baton_device_info(s->conn, &info);
    if (rc != 0) {
        ret = stage_fail(r, s, "DEVICE_INFO", rc);
        goto out;
    }
    if (st->sample && !(info.op_mask & (1ull << BATON_OP_SAMPLE))) {
        stage_msg(r, "stage %u (%s): the server does not sample on the stage (op SAMPLE), "
                     "which --temp needs: a batond of this version is needed\n",
                  s->index + 1, s->endpoint);
        goto out;
    }
    if (hp->rope_freqs && n_local > 0 && !(info.op_mask & (1ull << BATON_OP_ROPE_FREQS))) {
        stage_msg(r, "stage %u (%s): the server has no op ROPE_FREQS, which the model's "
                     "rope_freqs.weight (Llama 3.1 rope scaling) needs: a batond of this "
                     "version is needed\n",
                  s->index + 1, s->endpoint);
        goto out;
    }
    /* fits in 64 bits: baton_run checked every stage before connecting */
    (void)baton_run_kv_cache_bytes(hp->head_dim, hp->n_head_kv, r->n_cells, n_local,
                                   r->cfg->kv_type == BATON_TYPE_F16 ? 2 : 4, &kv_bytes);
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

        /* the vectors of qwen2 (Q/K/V biases) and qwen3 (Q/K norms) */
        static const char *const fmt_x[5] = {"blk.%u.attn_q.bias", "blk.%u.attn_k.bias",
                                             "blk.%u.attn_v.bias", "blk.%u.attn_q_norm.weight",
                                             "blk.%u.attn_k_norm.weight"};
        const uint64_t len_x[5] = {hp->n_embd_q, kv_dim, kv_dim, hp->head_dim, hp->head_dim};
        struct baton_tensor_desc *dst_x[5] = {&L->bq, &L->bk, &L->bv, &L->q_norm, &L->k_norm};

        for (k = 0; k < 9; k++) {
            snprintf(name, sizeof(name), fmt[k], l);
            if (place(r, items, &n_items, &off, name, shape[k][0], shape[k][1], dst[k]) != 0)
                goto out;
        }
        for (k = 0; k < 5; k++) {
            if (k < 3 ? !hp->qkv_bias : !hp->qk_norm)
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
         * F16, Q8_0, Q4_0, Q5_0, Q5_1 or a K-quant (rows a multiple of the block: the
         * GGUF reader checked that) */
        if (is_vector ? ty != BATON_TYPE_F32
                      : !(ty == BATON_TYPE_F32 || ty == BATON_TYPE_F16 ||
                          ty == BATON_TYPE_Q8_0 || ty == BATON_TYPE_Q4_0 ||
                          ty == BATON_TYPE_Q5_0 || ty == BATON_TYPE_Q5_1 ||
                          ty == BATON_TYPE_Q2_K || ty == BATON_TYPE_Q3_K ||
                          ty == BATON_TYPE_Q4_K || ty == BATON_TYPE_Q5_K ||
                          ty == BATON_TYPE_Q6_K)) {
            stage_msg(r, "%s: tensor '%s' has type %s, which the llama graph does not use "
                         "for a %s\n",
                      r->cfg->model_path, items[i].src.name, baton_type_name(ty),
                      is_vector ? "vector (f32 only)"
                                : "matrix (f32, f16, q8_0, q4_0, q5_0, q5_1, q2_k..q6_k)");
            goto out;
        }
        if (items[i].src.type >= 64 || !(info.type_mask & (1ull << items[i].src.type))) {
            stage_msg(r, "%s: tensor '%s' has type %s, which stage %u (%s) cannot compute\n",
                      r->cfg->model_path, items[i].src.name, baton_type_name(items[i].src.type),
                      s->index + 1, s->endpoint);
            goto out;
        }
    }
    s->weights_bytes = run_align_up(off);
    /* a KV cache that no buffer of the server can hold, or that the
     * session's memory cannot hold beside the stage's weights, is said now,
     * in terms of --ctx, before the weights are uploaded for nothing (a
     * weights buffer past it alone gets weights_alloc_hint's figures below) */
    if (info.max_buffer_bytes != 0 &&
        (kv_bytes > info.max_buffer_bytes ||
         (s->weights_bytes <= info.max_buffer_bytes &&
          kv_bytes > info.max_buffer_bytes - s->weights_bytes))) {
        const int alone = kv_bytes > info.max_buffer_bytes;
        char limit[32], held[32], why[224];

        run_format_bytes(limit, sizeof limit, info.max_buffer_bytes);
        run_format_bytes(held, sizeof held, s->weights_bytes);
        if (alone)
            snprintf(why, sizeof why, "%s at most %s in one buffer",
                     r->local ? "the in-process stages (3/4 of this machine's memory, shared "
                                "by every stage) allow"
                              : "the server allows",
                     limit);
        else
            snprintf(why, sizeof why,
                     "with the stage's %s of weights that is more than the %s %s", held, limit,
                     r->local ? "the in-process stages allow one session (3/4 of this "
                                "machine's memory)"
                              : "the server allows one session (batond --session-memory-bytes)");
        ret = kv_fail(r, s, kv_bytes, why, !alone);
        goto out;
    }
    rc = baton_alloc_buffer(s->conn, s->weights_bytes, &s->weights_buf);
    if (rc != 0) {
        ret = stage_fail(r, s, "ALLOC_BUFFER (weights)", rc);
        weights_alloc_hint(r, s, &info, rc);
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

    /* KV cache: per local layer k and v, F32 or F16 (--kv-type) {head_dim,
     * n_ctx, n_head_kv}
     * (kv-head-major, as ATTENTION defines them: core/ops.h) */
    {
        uint64_t koff = 0;

        for (l = 0; l < n_local; l++) {
            struct baton_llama_layer *L = &st->layers[l];

            rc = baton_tensor_init(&L->k_cache, 0, koff, r->cfg->kv_type, hp->head_dim,
                                   r->n_cells, hp->n_head_kv, 1);
            koff = run_align_up(koff + L->k_cache.nbytes);
            if (rc == 0)
                rc = baton_tensor_init(&L->v_cache, 0, koff, r->cfg->kv_type, hp->head_dim,
                                       r->n_cells, hp->n_head_kv, 1);
            koff = run_align_up(koff + L->v_cache.nbytes);
            if (rc != 0) {
                stage_msg(r, "KV cache size: %s\n", baton_status_str(rc));
                goto out;
            }
        }
        s->kv_bytes = koff ? koff : ALIGN; /* == kv_bytes (baton_run_kv_cache_bytes) */
        rc = baton_alloc_buffer(s->conn, s->kv_bytes, &s->kv_buf);
        /* only a refusal for memory is the size's fault; E_LIMIT here is the
         * server's table of buffers, full (a size past the server's memory
         * was refused above), and is reported as the server said it */
        if (rc == BATON_E_QUOTA || rc == BATON_E_NOMEM) {
            char why[160], held[32];

            run_format_bytes(held, sizeof held, s->weights_bytes);
            snprintf(why, sizeof why, "the server refused it: %s (%s), with %s of weights held",
                     baton_status_name(rc), baton_status_str(rc), held);
            ret = kv_fail(r, s, s->kv_bytes, why, rc == BATON_E_QUOTA);
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
    }

    /* I/O tensors: the hidden state comes in through n_slots slots (not
     * on the first stage) and goes out of hidden_out (not on the last) */
    {
        struct baton_llama_io *io = &st->io;
        const uint32_t u = r->n_tok_max;
        /* input slots: the hidden state's (not on the first stage), or the
         * token ids' (the first stage of several: the decode ring over
         * pipeline groups writes them ahead, run_plan.c) */
        const uint32_t n_in = st->first && st->last ? 1 : r->n_slots;
        uint64_t ioff = 0;
        struct baton_tensor_desc *d[7 + BATON_LLAMA_MAX_SLOTS] = {
            &io->pos, &io->last_idx, &io->logits, &io->argmax, &io->sample, &io->hidden_out};
        uint32_t types[7 + BATON_LLAMA_MAX_SLOTS] = {BATON_TYPE_I32, BATON_TYPE_I32,
                                                     BATON_TYPE_F32, BATON_TYPE_I32,
                                                     BATON_TYPE_I32, BATON_TYPE_F32};
        /* several sequences: {n,3} positions, an argmax per token; SAMPLE's
         * parameters: 6 words per output token */
        uint64_t ne0[7 + BATON_LLAMA_MAX_SLOTS] = {r->seqs ? 3ull * u : u, r->seqs ? u : 1,
                                                   hp->n_vocab,
                                                   r->seqs ? u : 1, 6ull * (r->seqs ? u : 1),
                                                   hp->n_embd};
        uint64_t ne1[7 + BATON_LLAMA_MAX_SLOTS] = {1, 1, 1, 1, 1, u};
        uint32_t n_io = st->last ? 5 : 6, k;

        io->n_slots = n_in;
        for (k = 0; k < n_in; k++) {
            d[n_io] = st->first ? &io->tokens[k] : &io->hidden_in[k];
            types[n_io] = st->first ? BATON_TYPE_I32 : BATON_TYPE_F32;
            ne0[n_io] = st->first ? u : hp->n_embd;
            ne1[n_io] = st->first ? 1 : u;
            n_io++;
        }
        for (k = 0; k < n_io; k++) {
            rc = baton_tensor_init(d[k], 0, ioff, types[k], ne0[k], ne1[k], 1, 1);
            if (rc != 0) {
                stage_msg(r, "I/O tensor size: %s\n", baton_status_str(rc));
                goto out;
            }
            ioff = run_align_up(ioff + d[k]->nbytes);
        }
        s->io_bytes = ioff;
        rc = baton_alloc_buffer(s->conn, s->io_bytes, &s->io_buf);
        if (rc != 0) {
            ret = stage_fail(r, s, "ALLOC_BUFFER (I/O)", rc);
            goto out;
        }
        for (k = 0; k < n_io; k++)
            d[k]->buffer = s->io_buf;
    }

    s->cap_leaves = baton_llama_max_leaves(st);
    s->cap_nodes = baton_llama_max_nodes(st);
    s->leaves = calloc(s->cap_leaves, sizeof(*s->leaves));
    s->nodes = calloc(s->cap_nodes, sizeof(*s->nodes));
    if (s->leaves == NULL || s->nodes == NULL) {
        stage_msg(r, "out of memory\n");
        goto out;
    }
    ret = 0;
out:
    free(items);
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

/* The outputs stage s's graph for counts[i] has (outs NULL: 1). */
static uint32_t out_of(const struct stage_rt *s, const uint32_t *outs, uint32_t i)
{
    return outs && outs[i] > 1 && s->st.last ? outs[i] : 1;
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
 * coordinator's RUN_MAX_GRAPHS or the server's max_graphs_per_session) is
 * not an error: registration stops there quietly and returns 0. */
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
                rc = baton_graph_register(s->conn, &gb.g, &sg->id);
                if (rc == BATON_E_LIMIT && optional)
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
